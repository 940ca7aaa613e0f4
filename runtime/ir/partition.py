"""Cuts an execution plan into delegated and CPU node subsets and picks the largest, as TFLite does."""

from __future__ import annotations

import contextlib
import gc
import heapq
from dataclasses import dataclass
from typing import Collection, Iterable, Sequence

from runtime.ir.errors import ModelError
from runtime.ir.graph import Graph

__all__ = ["PlanNode", "Subset", "Partition", "partition_plan", "largest_partitions", "select_largest",
           "side_effect_edges"]

_NOT_READY = -1
_ALWAYS_READY = -2


@dataclass(frozen=True)
class PlanNode:
    """One node of an execution plan: an op, or an earlier delegate's node, which is opaque (the
    union of its partition's inputs and outputs). -1 among the inputs is an absent optional input."""

    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    side_effect: bool = False


@dataclass(frozen=True)
class Subset:
    """A run of plan nodes of one kind. `nodes` are plan positions in the order TFLite adds them,
    which is plan order whenever the plan is topologically sorted and control edges point forward.
    `inputs`: tensors it reads that it does not produce itself (model inputs and constants
    included); `outputs`: tensors it produces that another subset reads, plus model outputs.
    Both sorted and de-duplicated, as TFLite's NodeSubset."""

    nodes: tuple[int, ...]
    delegated: bool
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclass(frozen=True)
class Partition:
    """A delegated partition as its delegate kernel sees it (TfLiteDelegateParams): graph op
    indices in execution order, and the tensors that cross its boundary."""

    graph: Graph
    nodes: tuple[int, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    delegate: str


def side_effect_edges(nodes: Sequence[PlanNode]) -> tuple[tuple[int, int], ...]:
    """The control edges TFLite adds when none are given: nodes that may have side effects,
    chained in plan order, so no reordering swaps two of them."""
    chain = [i for i, node in enumerate(nodes) if node.side_effect]
    return tuple(zip(chain, chain[1:]))


def partition_plan(nodes: Sequence[PlanNode], supported: Collection[int], always_ready: Collection[int],
                   model_outputs: Collection[int],
                   control_edges: Sequence[tuple[int, int]] | None = None) -> tuple[Subset, ...]:
    """TFLite's greedy ("delegate clustering") PartitionGraphIntoIndependentNodeSubsets.

    Each subset takes every node of its kind (in `supported` or not) that becomes schedulable
    while it is open, sweeping the plan in index order until a sweep adds nothing. Instead of
    re-sweeping, nodes wait in per-kind ready queues with a count of pending inputs, so each node
    and edge is handled O(1) times: near-linear where the sweeps are quadratic on long chains.

    A tensor no node produces is ready from the start, as in TFLite; so is one in `always_ready`
    (model inputs, constants, variables). `control_edges=None` chains side-effect nodes in plan
    order; explicit edges replace that chain, as in TFLite. Raises ModelError when a node can
    never be scheduled (a cycle) or an index is out of range."""
    kinds = _kinds(len(nodes), supported)
    edges = side_effect_edges(nodes) if control_edges is None else _checked_edges(len(nodes), control_edges)
    with _no_gc():
        return _Clusterer(nodes, kinds, always_ready, edges).run(model_outputs)


def largest_partitions(subsets: Iterable[Subset], max_partitions: int, min_nodes: int) -> tuple[Subset, ...]:
    """TFLite's GetFirstNLargestPartitions: the delegated subsets, largest first, at most
    `max_partitions` of them (<= 0: no limit), stopping at the first smaller than `min_nodes`.

    TFLite's std::sort leaves ties in no defined order; here ties keep plan order (stable)."""
    ranked = sorted((s for s in subsets if s.delegated), key=lambda s: -len(s.nodes))
    if max_partitions > 0:
        ranked = ranked[:max_partitions]
    chosen = []
    for subset in ranked:
        if len(subset.nodes) < min_nodes:
            break
        chosen.append(subset)
    return tuple(chosen)


def select_largest(subsets: Iterable[Subset], max_partitions: int, min_nodes: int) -> frozenset[int]:
    """The plan positions to delegate after the largest-N / min-nodes choice."""
    return frozenset(i for s in largest_partitions(subsets, max_partitions, min_nodes) for i in s.nodes)


@contextlib.contextmanager
def _no_gc():
    """Pause the cyclic collector: a large plan allocates ~10 small containers per subset, none
    in a cycle, and the collections they trigger cost more than the partitioning itself."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _kinds(n: int, supported: Collection[int]) -> bytearray:
    kinds = bytearray(n)
    for i in supported:
        if not 0 <= i < n:
            raise ModelError(f"supported node {i} is not in the execution plan of {n} nodes")
        kinds[i] = 1
    return kinds


def _checked_edges(n: int, edges: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    for a, b in edges:
        if not (0 <= a < n and 0 <= b < n):
            raise ModelError(f"control edge {a} -> {b} names a node outside the plan of {n} nodes")
    return tuple(sorted(set(edges)))  # duplicates are harmless in TFLite: it de-duplicates them


class _Clusterer:
    """The state of one partitioning run: tensor epochs, pending counts, per-kind ready queues."""

    def __init__(self, nodes: Sequence[PlanNode], kinds: bytearray, always_ready: Collection[int],
                 edges: Sequence[tuple[int, int]]):
        self.nodes, self.kinds = nodes, kinds
        self.epoch = self._initial_epochs(always_ready)
        self.successors: list[list[int]] = [[] for _ in nodes]
        self.pending = [0] * len(nodes)
        for a, b in edges:
            self.successors[a].append(b)
            self.pending[b] += 1
        self.consumers: list[list[int]] = [[] for _ in self.epoch]
        for i, node in enumerate(nodes):
            for t in set(node.inputs):
                if t >= 0 and self.epoch[t] == _NOT_READY:
                    self.consumers[t].append(i)
                    self.pending[i] += 1
        self.ready: list[list[int]] = [[], []]
        for i, count in enumerate(self.pending):
            if count == 0:
                self.ready[kinds[i]].append(i)  # ascending, so already a heap
        self.members: list[list[int]] = []
        self.ins: list[set[int]] = []
        self.outs: list[set[int]] = []

    def _initial_epochs(self, always_ready: Collection[int]) -> list[int]:
        top = max((t for node in self.nodes for t in (*node.inputs, *node.outputs)), default=-1)
        epoch = [_ALWAYS_READY] * (top + 1)
        for node in self.nodes:
            for t in node.outputs:
                if t >= 0:
                    epoch[t] = _NOT_READY
        for t in always_ready:
            if 0 <= t <= top:
                epoch[t] = _ALWAYS_READY
        return epoch

    def run(self, model_outputs: Collection[int]) -> tuple[Subset, ...]:
        while self.ready[0] or self.ready[1]:
            self._build_subset()
        placed = sum(len(m) for m in self.members)
        if placed != len(self.nodes):
            done = {i for m in self.members for i in m}
            stuck = next(i for i in range(len(self.nodes)) if i not in done)
            raise ModelError(f"node {stuck} of the execution plan can never be scheduled: it waits on a "
                             f"tensor or control edge that depends on itself")
        for t in model_outputs:
            e = self.epoch[t] if 0 <= t < len(self.epoch) else _ALWAYS_READY
            if e >= 0:  # a model input that is also an output belongs to no subset
                self.outs[e].add(t)
        return tuple(Subset(tuple(m), bool(self.kinds[m[0]]), tuple(sorted(i)), tuple(sorted(o)))
                     for m, i, o in zip(self.members, self.ins, self.outs))

    def _build_subset(self) -> None:
        """One epoch: the lowest schedulable node fixes the kind, then nodes of that kind join in
        TFLite's sweep order. `current` holds those the running sweep has yet to pass, `later`
        those that became ready behind it and wait for the next sweep."""
        r0, r1 = self.ready
        kind = 1 if r1 and (not r0 or r1[0] < r0[0]) else 0
        current, later = self.ready[kind], []
        self.ready[kind] = []
        epoch = len(self.members)
        self.members.append([])
        self.ins.append(set())
        self.outs.append(set())
        while current or later:
            if not current:
                current, later = later, []
            self._join(heapq.heappop(current), epoch, kind, current, later)

    def _join(self, i: int, epoch: int, kind: int, current: list[int], later: list[int]) -> None:
        """Place node i in the open subset and queue the nodes it makes schedulable: behind the
        sweep's cursor (i) they wait for the next sweep, nodes of the other kind for the next subset."""
        node, epochs, pending, kinds = self.nodes[i], self.epoch, self.pending, self.kinds
        self.members[epoch].append(i)
        waiting = list(self.successors[i])
        for t in node.outputs:
            if t >= 0:
                if epochs[t] == _NOT_READY:
                    waiting += self.consumers[t]
                epochs[t] = epoch
        ins, outs = self.ins[epoch], self.outs
        for t in node.inputs:
            if t >= 0 and epochs[t] != epoch:
                ins.add(t)
                if epochs[t] >= 0:
                    outs[epochs[t]].add(t)
        for j in waiting:
            pending[j] -= 1
            if pending[j] == 0:
                if kinds[j] != kind:
                    heapq.heappush(self.ready[kinds[j]], j)
                else:
                    heapq.heappush(current if j > i else later, j)
