"""Partitioning against TFLite's own cases, a plain port of its sweeps, and the subset properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from runtime.ir.errors import ModelError
from runtime.ir.partition import (PlanNode, Subset, largest_partitions, partition_plan, select_largest,
                               side_effect_edges)
from runtime.testing.strategies import support_sets


def plan(*nodes) -> list[PlanNode]:
    """Nodes as graph_info_test writes them: (inputs, outputs[, might_have_side_effect])."""
    return [PlanNode(tuple(n[0]), tuple(n[1]), n[2] if len(n) > 2 else False) for n in nodes]


def subset(kind: str, nodes, inputs, outputs) -> Subset:
    return Subset(tuple(nodes), kind == "delegated", tuple(inputs), tuple(outputs))


def reference_partition(nodes, supported, always_ready, model_outputs, control_edges=None):
    """A line-by-line port of PartitionGraphIntoIndependentNodeSubsetsImpl (greedy): sweep the
    plan again and again until a sweep adds nothing. Quadratic, and obviously TFLite's."""
    n = len(nodes)
    edges = sorted(set(side_effect_edges(nodes) if control_edges is None else control_edges))
    incoming = [0] * n
    for _, b in edges:
        incoming[b] += 1
    epoch: dict[int, int] = {}
    for node in nodes:
        epoch.update((t, -1) for t in node.outputs if t >= 0)
    epoch.update((t, -2) for t in always_ready)
    done = [-1] * n
    subsets: list[list] = []  # [kind, nodes, inputs, outputs]

    def update(i: int) -> bool:
        current = subsets[-1]
        e = len(subsets) - 1
        if done[i] != -1 or incoming[i] != 0:
            return False
        if any(t >= 0 and epoch.get(t, -2) == -1 for t in nodes[i].inputs):
            return False
        kind = i in supported
        if current[0] is None:
            current[0] = kind
        if current[0] != kind:
            return False
        done[i] = e
        current[1].append(i)
        for t in nodes[i].outputs:
            if t >= 0:
                epoch[t] = e
        for t in nodes[i].inputs:
            if t >= 0 and epoch.get(t, -2) != e:
                current[2].add(t)
                if epoch.get(t, -2) >= 0:
                    subsets[epoch[t]][3].add(t)
        for a, b in edges:
            if a == i:
                incoming[b] -= 1
        return True

    while True:
        subsets.append([None, [], set(), set()])
        while any([update(i) for i in range(n)]):
            pass
        if not subsets[-1][1]:
            subsets.pop()
            break
    if -1 in done:
        raise ModelError("unschedulable")
    for t in model_outputs:
        if epoch.get(t, -2) >= 0:
            subsets[epoch[t]][3].add(t)
    return tuple(Subset(tuple(m), k, tuple(sorted(i)), tuple(sorted(o))) for k, m, i, o in subsets)


# -- TFLite's own cases (tflite/graph_info_test.cc, tflite/graph_info.h) ------------------------

# graph_info.h: 0 -> 1 -> 2* -> 3*, 1 -> 4, 3 -> 5, 4 -> 5 (node i writes tensor i + 1).
DOC_GRAPH = plan(([0], [1]), ([1], [2]), ([2], [3]), ([3], [4]), ([2], [5]), ([4, 5], [6]))


def test_documented_example():
    got = partition_plan(DOC_GRAPH, {2, 3}, {0}, {6})
    assert [s.nodes for s in got] == [(0, 1, 4), (2, 3), (5,)]
    assert [s.delegated for s in got] == [False, True, False]


def test_documented_example_with_control_edge():
    got = partition_plan(DOC_GRAPH, {2, 3}, {0}, {6}, control_edges=[(3, 4)])
    assert [s.nodes for s in got] == [(0, 1), (2, 3), (4, 5)]


CASES = {
    "Nodes0PartitionNodes0": (plan(), [], [], [], []),
    "Nodes0PartitionNodes0Tensors1": (plan(), [], [0], [0], []),
    "Nodes1PartitionNodes0": (plan(([0], [1])), [], [0], [1], [subset("cpu", [0], [0], [1])]),
    "Nodes1PartitionNodes0Inputs0": (plan(([], [0])), [0], [], [0], [subset("delegated", [0], [], [0])]),
    "Nodes1PartitionNodes1": (plan(([0], [1])), [0], [0], [1], [subset("delegated", [0], [0], [1])]),
    "Nodes2PartitionNodes1": (plan(([0], [1]), ([1], [2])), [1], [0], [2],
                              [subset("cpu", [0], [0], [1]), subset("delegated", [1], [1], [2])]),
    "Nodes2PartitionNodes2": (plan(([0], [1]), ([1], [2])), [0, 1], [0], [2],
                              [subset("delegated", [0, 1], [0], [2])]),
    "Nodes3PartitionNodes2": (plan(([0], [1]), ([1], [2]), ([1, 2], [3])), [0, 2], [0], [3],
                              [subset("delegated", [0], [0], [1]), subset("cpu", [1], [1], [2]),
                               subset("delegated", [2], [1, 2], [3])]),
    "Nodes3PartitionNodes2Greedily": (plan(([0], [1]), ([1], [2]), ([1], [3])), [0, 2], [0], [2, 3],
                                      [subset("delegated", [0, 2], [0], [1, 3]), subset("cpu", [1], [1], [2])]),
    "Nodes4PartitionNodes3_WithControlDependency": (
        plan(([0], [1], True), ([1], [2], True), ([2], [3]), ([1, 3], [], True), ([1], [4], True)),
        [0, 1, 3, 4], [0], [4],
        [subset("delegated", [0, 1], [0], [1, 2]), subset("cpu", [2], [2], [3]),
         subset("delegated", [3, 4], [1, 3], [4])]),
    "ComplexGreedily": (
        plan(([0], [1]), ([1], [2, 5]), ([2], [3]), ([3], [4]), ([5], [6]), ([6], [7])),
        [0, 1, 4, 5], [0], [4, 7],
        [subset("delegated", [0, 1, 4, 5], [0], [2, 7]), subset("cpu", [2, 3], [2], [4])]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_graph_info_cases(name):
    nodes, supported, inputs, outputs, expected = CASES[name]
    assert partition_plan(nodes, supported, inputs, outputs) == tuple(expected)
    assert reference_partition(nodes, set(supported), inputs, outputs) == tuple(expected)


def test_external_control_edges_replace_the_side_effect_chain():
    nodes = plan(([0], [1]), ([1], [2]), ([2], [3]), ([1, 3], []), ([1], [4]))
    got = partition_plan(nodes, {0, 1, 3, 4}, {0}, {4}, control_edges=[(0, 1), (1, 3), (3, 4)])
    assert got == tuple(CASES["Nodes4PartitionNodes3_WithControlDependency"][4])
    # explicit edges replace the chain, as in TFLite: without it node 4 overtakes side-effect node 3
    flagged = [PlanNode(n.inputs, n.outputs, True) for n in nodes]
    assert partition_plan(flagged, {0, 1, 3, 4}, {0}, {4}, control_edges=[])[0].nodes == (0, 1, 4)


@pytest.mark.parametrize("edges", [[(-1, 0)], [(0, -1)], [(2, 0)], [(0, 2)]])
def test_invalid_control_edges_rejected(edges):
    with pytest.raises(ModelError, match="control edge"):
        partition_plan(plan(([0], [1]), ([1], [2])), {0}, {0}, {2}, control_edges=edges)


def test_invalid_nodes_to_partition_rejected():
    with pytest.raises(ModelError, match="not in the execution plan"):
        partition_plan(plan(([0], [1])), {1}, {0}, {1})


def test_unscheduled_nodes_rejected():
    with pytest.raises(ModelError, match="node 1 .* never be scheduled"):
        partition_plan(plan(([0], [2]), ([1], [3])), {0, 1}, {0, 1}, {2}, control_edges=[(1, 1)])


def test_optional_inputs_are_ignored():
    got = partition_plan(plan(([0, -1], [1]), ([1, -1, 0], [2])), {1}, {0}, {2})
    assert got == (subset("cpu", [0], [0], [1]), subset("delegated", [1], [0, 1], [2]))


def test_long_alternating_chain_gives_one_subset_per_node():
    n = 2001
    nodes = [PlanNode((i,), (i + 1,)) for i in range(n)]
    got = partition_plan(nodes, range(0, n, 2), {0}, {n})
    assert [s.nodes for s in got] == [(i,) for i in range(n)]


def test_sweeps_revisit_nodes_behind_the_cursor():
    # plan order is not dependency order: node 0 reads what node 2 writes
    nodes = plan(([3], [4]), ([0], [1]), ([1], [3]))
    got = partition_plan(nodes, {0, 1, 2}, {0}, {4})
    assert got == (subset("delegated", [1, 2, 0], [0], [4]),)


# -- equivalence with the reference, over random plans --------------------------------------------


@st.composite
def random_plans(draw, max_nodes: int = 18):
    """A random DAG of nodes over tensors, in a shuffled plan order at times (so sweeps matter),
    with side-effect flags, optional inputs and random (possibly cyclic) control edges."""
    n = draw(st.integers(0, max_nodes))
    n_inputs = draw(st.integers(0, 3))
    available = list(range(n_inputs))
    next_tensor = n_inputs
    dag = []
    for _ in range(n):
        ins = draw(st.lists(st.sampled_from(available + [-1]), max_size=3)) if available else []
        outs = list(range(next_tensor, next_tensor + draw(st.integers(0, 2))))
        next_tensor += len(outs)
        available += outs
        dag.append(PlanNode(tuple(ins), tuple(outs), draw(st.booleans())))
    order = draw(st.permutations(range(n))) if draw(st.booleans()) else list(range(n))
    nodes = [dag[i] for i in order]
    edges = None
    if n and draw(st.booleans()):
        edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=4))
    outputs = draw(st.sets(st.integers(0, max(next_tensor - 1, 0)), max_size=3))
    return nodes, draw(support_sets(n)), set(range(n_inputs)), outputs, edges


@given(random_plans())
def test_same_subsets_as_the_reference(case):
    nodes, supported, ready, outputs, edges = case
    try:
        expected = reference_partition(nodes, supported, ready, outputs, edges)
    except ModelError:
        with pytest.raises(ModelError):
            partition_plan(nodes, supported, ready, outputs, edges)
        return
    assert partition_plan(nodes, supported, ready, outputs, edges) == expected


# -- properties (topologically ordered plans) --------------------------------------------------


@st.composite
def topological_plans(draw):
    nodes, supported, ready, outputs, _ = draw(random_plans())
    return _topological(nodes), supported, ready, outputs


def _topological(nodes):
    produced = {t for n in nodes for t in n.outputs}
    placed, known, out = set(), set(), []
    while len(out) < len(nodes):
        for i, n in enumerate(nodes):
            if i not in placed and all(t < 0 or t not in produced or t in known for t in n.inputs):
                placed.add(i)
                known.update(n.outputs)
                out.append(n)
                break
    return out


@given(topological_plans())
def test_subset_properties(case):
    nodes, supported, ready, outputs = case
    subsets = partition_plan(nodes, supported, ready, outputs)
    placed = [i for s in subsets for i in s.nodes]
    assert sorted(placed) == list(range(len(nodes)))  # every node in exactly one subset
    producer = {t: i for i, n in enumerate(nodes) for t in n.outputs}
    written: set[int] = set()
    for k, s in enumerate(subsets):
        assert list(s.nodes) == sorted(s.nodes)  # plan order
        assert all((i in supported) == s.delegated for i in s.nodes)
        if k:
            assert s.delegated != subsets[k - 1].delegated  # greedy: kinds alternate
        inside: set[int] = set()
        for i in s.nodes:  # dependency order inside, and only finished tensors from outside
            for t in nodes[i].inputs:
                if t >= 0 and t in producer:
                    assert t in inside or t in written
            inside.update(nodes[i].outputs)
        reads = {t for i in s.nodes for t in nodes[i].inputs if t >= 0}
        assert set(s.inputs) == reads - inside
        assert all(t not in producer or t in written for t in s.inputs)  # no cycle between subsets
        later = {t for o in subsets[k + 1:] for i in o.nodes for t in nodes[i].inputs}
        assert set(s.outputs) == inside & (later | set(outputs))
        written |= inside


# -- choosing partitions -------------------------------------------------------------------------

SUBSETS = (subset("delegated", [0, 1], [], []), subset("cpu", [2], [], []),
           subset("delegated", [3, 4, 5], [], []), subset("cpu", [6], [], []),
           subset("delegated", [7, 8], [], []), subset("cpu", [9], [], []), subset("delegated", [10], [], []))


@pytest.mark.parametrize("max_partitions, min_nodes, expected", [
    (0, 0, {0, 1, 3, 4, 5, 7, 8, 10}),
    (-3, 0, {0, 1, 3, 4, 5, 7, 8, 10}),
    (1, 0, {3, 4, 5}),
    (2, 0, {0, 1, 3, 4, 5}),  # ties keep plan order: [0, 1] before [7, 8]
    (0, 2, {0, 1, 3, 4, 5, 7, 8}),
    (0, 3, {3, 4, 5}),
    (0, 4, set()),
])
def test_select_largest(max_partitions, min_nodes, expected):
    assert select_largest(SUBSETS, max_partitions, min_nodes) == frozenset(expected)


@settings(max_examples=300)  # plans with more delegated subsets than the limit are a minority
@given(topological_plans(), st.integers(-1, 4), st.integers(-1, 4))
def test_selection_limits(case, max_partitions, min_nodes):
    nodes, supported, ready, outputs = case
    chosen = largest_partitions(partition_plan(nodes, supported, ready, outputs), max_partitions, min_nodes)
    if max_partitions > 0:
        assert len(chosen) <= max_partitions
    assert all(len(s.nodes) >= min_nodes for s in chosen)
    assert [len(s.nodes) for s in chosen] == sorted((len(s.nodes) for s in chosen), reverse=True)
    again = partition_plan(nodes, {i for s in chosen for i in s.nodes}, ready, outputs)
    assert sum(s.delegated for s in again) <= len(chosen)
