"""Delegate application: same outputs as the CPU plan, limits, log lines, failures, order, fp16."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from delegates.api import Delegate, DelegateKernel, DelegateOptions, Support
from delegates.coreml import CoreMlDelegate
from delegates.gpu import GpuDelegate
from runtime.interpreter.delegation import RESTORED, CpuStep, DelegateStep, apply_delegates
from runtime.ops.dynamic import dynamic_tensors
from runtime.ir.errors import DelegateError
from runtime.ir.graph import DType, Graph, Op, Tensor
from runtime.interpreter.api import Interpreter
from runtime.ops import Node, select_kernel
from runtime.ir.optypes import OpType
from runtime.ir.options import Conv2DOptions
from runtime.testing.strategies import float_graphs, support_sets
from runtime.zoo.builder import GraphBuilder
from runtime.zoo.quantize import to_float16


class DummyKernel(DelegateKernel):
    def __init__(self, partition, fail: bool):
        super().__init__(partition)
        self.fail, self.prepared = fail, False

    def prepare(self) -> None:
        if self.fail:
            raise DelegateError("Dummy: prepare failed")
        self.prepared = True


class Dummy(Delegate):
    """Supports the op types in `types`, or the op indices in `ops`; `fail` names the callback
    that raises: "supported", "create", "prepare" (DelegateError) or "bug" (RuntimeError)."""

    def __init__(self, types=(), ops=None, name="Dummy", fail="", options=None, **attrs):
        super().__init__(options)
        self.name, self.types, self.ops, self.fail = name, set(types), ops, fail
        self.asked: list[int] = []
        for key, value in attrs.items():
            setattr(self, key, value)

    def is_node_supported(self, op, graph):
        if self.fail == "supported":
            raise DelegateError("Dummy: is_node_supported failed")
        if self.fail == "bug":
            raise RuntimeError("boom")
        index = next(i for i, o in enumerate(graph.ops) if o is op)
        self.asked.append(index)
        ok = index in self.ops if self.ops is not None else op.type in self.types
        return Support(True) if ok else Support(False, f"{op.type.name} is not in the dummy's set")

    def create_kernel(self, partition):
        if self.fail == "create":
            raise DelegateError("Dummy: create_kernel failed")
        return DummyKernel(partition, self.fail == "prepare")


def run_op(graph: Graph, i: int, values: dict) -> None:
    op = graph.ops[i]
    args = [values[t] if t >= 0 else None for t in op.inputs]
    while args and args[-1] is None:
        args.pop()
    out = select_kernel(op, graph)(Node(i, op, graph), *args)
    values.update(zip(op.outputs, out if isinstance(out, tuple) else (out,)))


def run_plan(graph: Graph, plan, x: np.ndarray) -> list[np.ndarray]:
    """Execute steps in order; a delegated partition runs its ops on the CPU kernels, and may read
    only its declared inputs, all of which must already exist."""
    values = {t: tensor.data for t, tensor in enumerate(graph.tensors) if tensor.is_constant}
    values[graph.inputs[0]] = x
    for step in plan:
        if isinstance(step, CpuStep):
            run_op(graph, step.op, values)
            continue
        assert all(t in values for t in step.partition.inputs)
        local = {t: values[t] for t in step.partition.inputs}
        for i in step.partition.nodes:
            run_op(graph, i, local)
        values.update((t, local[t]) for t in step.partition.outputs)
    return [values[t] for t in graph.outputs]


def reference(graph: Graph, x: np.ndarray) -> list[np.ndarray]:
    it = Interpreter(graph=graph)
    it.allocate_tensors()
    it.set_tensor(graph.inputs[0], x)
    it.invoke()
    return [it.get_tensor(t) for t in graph.outputs]


def sample_input(graph: Graph, seed: int = 0) -> np.ndarray:
    tensor = graph.tensors[graph.inputs[0]]
    return np.random.default_rng(seed).standard_normal(tensor.shape).astype(tensor.dtype.np)


# -- properties over random graphs ----------------------------------------------------------------


@given(st.data())
def test_partitioned_plan_computes_the_cpu_outputs(data):
    graph = data.draw(float_graphs())
    supported = data.draw(support_sets(len(graph.ops)))
    max_p, min_n = data.draw(st.integers(-1, 3)), data.draw(st.integers(-1, 3))
    delegation = apply_delegates(graph, [Dummy(ops=supported, options=DelegateOptions(max_p, min_n))])
    steps = [s for s in delegation.plan if isinstance(s, DelegateStep)]
    if max_p > 0:
        assert len(steps) <= max_p
    assert all(len(s.partition.nodes) >= min_n for s in steps)
    assert all(i in supported for s in steps for i in s.partition.nodes)
    assert all(s.kernel.prepared for s in steps)
    ran = [s.op for s in delegation.plan if isinstance(s, CpuStep)] + [i for s in steps for i in s.partition.nodes]
    assert sorted(ran) == list(range(len(graph.ops)))
    x = sample_input(graph)
    for got, want in zip(run_plan(graph, delegation.plan, x), reference(graph, x)):
        np.testing.assert_array_equal(got, want)


# -- graphs for the examples ------------------------------------------------------------------


def conv(b: GraphBuilder, x: int, w: int | None = None, cout: int = 3) -> int:
    cin = b.shape(x)[-1]
    if w is None:
        w = b.const(f"w{len(b.ops)}", b.rng.normal(0, 0.3, (cout, 3, 3, cin)).astype(np.float32))
    bias = b.const(f"b{len(b.ops)}", b.rng.normal(0, 0.1, b.shape(w)[0]).astype(np.float32))
    return b.op(OpType.CONV_2D, [x, w, bias], Conv2DOptions())


def chain() -> Graph:
    """conv, relu, logistic, conv, relu: a supported run, a refused op, a supported run."""
    b = GraphBuilder("chain", seed=1)
    x = b.input("x", (1, 5, 5, 3))
    y = b.op(OpType.LOGISTIC, [b.op(OpType.RELU, [conv(b, x)])])
    return b.build([b.op(OpType.RELU, [conv(b, y)])])


CONV_RELU = {OpType.CONV_2D, OpType.RELU}
GPU_LOG = GpuDelegate().log_lines  # the GPU delegate's own log lines, on a dummy delegate


def hexagon_before_2_4(summary):
    """The Hexagon delegate's line before it became a SimpleDelegate: it counts the chosen partitions."""
    return [f"Hexagon delegate: {summary.delegated} nodes delegated out of {summary.total} nodes with "
            f"{summary.chosen} partitions."]


@pytest.mark.parametrize("writer, lines", [
    (None, ["Dummy delegate: 2 nodes delegated out of 5 nodes with 2 partitions."]),
    (hexagon_before_2_4, ["Hexagon delegate: 2 nodes delegated out of 5 nodes with 1 partitions."]),
    (CoreMlDelegate().log_lines, ["CoreML delegate: 2 nodes delegated out of 5 nodes, with 2 partitions."]),
    (GPU_LOG, ["Following operations are not supported by GPU delegate:",
               "LOGISTIC: LOGISTIC is not in the dummy's set",
               "2 operations will run on the GPU, and the remaining 3 operations will run on the CPU."]),
], ids=["default", "hexagon", "coreml", "gpu"])
def test_log_lines(writer, lines):
    hooks = {"log_lines": writer} if writer else {}
    d = apply_delegates(chain(), [Dummy(CONV_RELU, options=DelegateOptions(1), **hooks)])
    replacing = "Replacing 2 out of 5 node(s) with delegate (Dummy) node, yielding 2 partitions for the whole graph."
    assert d.log == (*lines, replacing)
    assert [type(s).__name__ for s in d.plan] == ["DelegateStep", "CpuStep", "CpuStep", "CpuStep"]
    report, = d.per_delegate
    assert (report.nodes_delegated, report.total_nodes, report.partitions) == (2, 5, 1)
    assert [(u.op, u.name) for u in report.unsupported] == [(2, "LOGISTIC")]
    assert [u.op for u in report.declined] == [3, 4] and "max_delegated_partitions" in report.declined[0].reason


def test_gpu_log_when_nothing_is_delegated():
    d = apply_delegates(chain(), [Dummy({OpType.ADD}, log_lines=GPU_LOG)])
    assert d.log[-1] == "No operations will run on the GPU, and all 5 operations will run on the CPU."
    assert d.plan == tuple(CpuStep(i) for i in range(5))  # and no "Replacing" line


def test_min_nodes_declines_small_partitions():
    d = apply_delegates(chain(), [Dummy(CONV_RELU | {OpType.LOGISTIC}, ops=None,
                                        options=DelegateOptions(0, 6))])
    assert d.per_delegate[0].nodes_delegated == 0
    assert "min_nodes_per_partition (6)" in d.per_delegate[0].declined[0].reason


# -- failures -------------------------------------------------------------------------------------


@pytest.mark.parametrize("fail, message", [
    ("supported", "Dummy: is_node_supported failed"),
    ("create", "Dummy: create_kernel failed"),
    ("prepare", "Dummy: prepare failed"),
    ("bug", "Dummy is_node_supported: RuntimeError: boom"),
])
def test_failure_restores_the_original_plan(fail, message):
    first = Dummy({OpType.LOGISTIC}, name="First")
    later = Dummy(CONV_RELU, name="Later")
    d = apply_delegates(chain(), [first, Dummy(CONV_RELU, fail=fail), later])
    assert d.restored and d.plan == tuple(CpuStep(i) for i in range(5))
    assert d.log[-1] == RESTORED and message in d.log
    assert later.asked == []  # nothing is applied after the restore
    assert [(r.delegate, r.nodes_delegated) for r in d.per_delegate] == [("First", 0), ("Dummy", 0)]
    assert d.per_delegate[0].error == "removed when Dummy failed" and d.per_delegate[1].error == message


def test_prepare_failure_names_the_delegate_node():
    d = apply_delegates(chain(), [Dummy({OpType.LOGISTIC}, name="First"), Dummy(CONV_RELU, fail="prepare")])
    # nodes 0-4 are the model's, node 5 the first delegate's, 6 and 7 this one's
    assert d.log[-3:] == ("Dummy: prepare failed", "Node number 6 (Dummy) failed to prepare.", RESTORED)


# -- several delegates ----------------------------------------------------------------------------


def test_two_delegates_in_order():
    graph = chain()
    first = Dummy({OpType.CONV_2D}, name="First")
    second = Dummy(CONV_RELU | {OpType.LOGISTIC}, name="Second")
    d = apply_delegates(graph, [first, second])
    assert first.asked == [0, 1, 2, 3, 4]
    assert second.asked == [1, 2, 4]  # First's nodes are opaque to it
    assert d.placement() == {0: "First", 1: "Second", 2: "Second", 3: "First", 4: "Second"}
    assert [s.partition.delegate for s in d.plan] == ["First", "Second", "First", "Second"]
    assert d.log == (
        "First delegate: 2 nodes delegated out of 5 nodes with 2 partitions.",
        "Replacing 2 out of 5 node(s) with delegate (First) node, yielding 4 partitions for the whole graph.",
        "Second delegate: 3 nodes delegated out of 5 nodes with 2 partitions.",
        "Replacing 3 out of 5 node(s) with delegate (Second) node, yielding 4 partitions for the whole graph.")
    x = sample_input(graph)
    np.testing.assert_array_equal(run_plan(graph, d.plan, x)[0], reference(graph, x)[0])


# -- static shapes --------------------------------------------------------------------------------


def dynamic_graph() -> Graph:
    """x -> RESHAPE(x, s) with `s` a model input, then RELU: tensors 2 and 3 are dynamic."""
    f32 = DType.FLOAT32
    tensors = (Tensor("x", (1, 4), f32), Tensor("s", (2,), DType.INT32), Tensor("y", (2, 2), f32),
               Tensor("z", (2, 2), f32))
    ops = (Op(OpType.RESHAPE, (0, 1), (2,)), Op(OpType.RELU, (2,), (3,)))
    return Graph(tensors, ops, (0, 1), (3,))


STATIC_WARNING = ("Attempting to use a delegate that only supports static-sized tensors with a graph that "
                  "has dynamic-sized tensors (tensor#2 is a dynamic-sized tensor).")


def test_static_only_delegate_on_a_dynamic_graph():
    graph = dynamic_graph()
    dynamic = dynamic_tensors(graph)
    assert dynamic == {2, 3}
    static = Dummy({OpType.RESHAPE, OpType.RELU})
    d = apply_delegates(graph, [static], dynamic)
    assert d.log == (STATIC_WARNING,) and not d.restored and static.asked == []
    assert d.plan == (CpuStep(0), CpuStep(1))
    assert d.per_delegate[0].error == STATIC_WARNING
    assert apply_delegates(graph, [static], ()).plan != d.plan  # a static graph is delegated


def test_static_only_delegate_is_skipped_and_the_others_stay():
    graph = dynamic_graph()
    dynamic = dynamic_tensors(graph)
    first = Dummy({OpType.RESHAPE}, name="First", allows_dynamic_tensors=True)
    last = Dummy({OpType.RELU}, name="Last", allows_dynamic_tensors=True)
    d = apply_delegates(graph, [first, Dummy({OpType.RELU}), last], dynamic)
    assert d.placement() == {0: "First", 1: "Last"}
    assert d.log[2] == STATIC_WARNING and RESTORED not in d.log
    # tensor#2 now comes out of First's node, and TFLite still sees it
    assert [r.error for r in d.per_delegate] == ["", STATIC_WARNING, ""]


def _graph(ops, constants=(), n_tensors=8, inputs=(0,)):
    tensors = tuple(Tensor(f"t{t}", (2,), DType.INT32, data=np.array([1, 2], np.int32) if t in constants else None)
                    for t in range(n_tensors))
    return Graph(tensors, tuple(Op(k, tuple(i), tuple(o)) for k, i, o in ops), tuple(inputs), ())


@pytest.mark.parametrize("ops, constants, expected", [
    ([(OpType.RESHAPE, [0, 1], [2])], {1}, set()),
    ([(OpType.MUL, [1, 1], [3]), (OpType.RESHAPE, [0, 3], [2])], {1}, set()),  # MUL computes in Prepare
    ([(OpType.ADD, [1, 1], [3]), (OpType.RESHAPE, [0, 3], [2])], {1}, {2}),  # ADD only at run time
    ([(OpType.SHAPE, [0], [3]), (OpType.RESHAPE, [0, 3], [2])], set(), set()),
    ([(OpType.RESHAPE, [0, -1], [2])], set(), set()),  # absent shape input: options decide
    ([(OpType.RESHAPE, [1, 0], [2]), (OpType.RELU, [2], [3]), (OpType.ADD, [3, 1], [4])], {1}, {2, 3, 4}),
    ([(OpType.PAD, [1, 0], [2])], {1}, {2}),
    ([(OpType.MIRROR_PAD, [1, 0], [2])], {1}, {2}),
    ([(OpType.STRIDED_SLICE, [1, 5, 5, 0], [2])], {1, 5}, {2}),
    ([(OpType.SLICE, [1, 5, 5], [2])], {1, 5}, set()),
    ([(OpType.RESIZE_BILINEAR, [1, 0], [2])], {1}, {2}),
    ([(OpType.TILE, [1, 0], [2]), (OpType.TRANSPOSE, [1, 0], [3])], {1}, {2, 3}),
    ([(OpType.FILL, [0, 1], [2]), (OpType.BROADCAST_TO, [1, 0], [3])], {1}, {2, 3}),
    ([(OpType.FILL, [1, 1], [2])], {1}, set()),
])
def test_dynamic_tensors(ops, constants, expected):
    assert dynamic_tensors(_graph(ops, constants)) == expected


# -- the fp16 DEQUANTIZE rule ---------------------------------------------------------------------


def fp16_graph() -> Graph:
    """conv1 -> relu -> conv2 -> logistic -> conv3, with conv3 sharing conv1's weights."""
    b = GraphBuilder("fp16", seed=2)
    x = b.input("x", (1, 6, 6, 3))
    w = b.const("w", b.rng.normal(0, 0.3, (3, 3, 3, 3)).astype(np.float32))
    y = b.op(OpType.LOGISTIC, [conv(b, b.op(OpType.RELU, [conv(b, x, w)]))])
    return to_float16(b.build([conv(b, y, w)]))


def test_fp16_dequantize_rule():
    graph = fp16_graph()
    names = [graph.ops[i].type.name for i in range(len(graph.ops))]
    assert names == ["DEQUANTIZE"] * 5 + ["CONV_2D", "RELU", "CONV_2D", "LOGISTIC", "CONV_2D"]
    delegate = Dummy(CONV_RELU | {OpType.DEQUANTIZE}, fp16_dequant_rule=True)
    d = apply_delegates(graph, [delegate])
    assert delegate.asked == [5, 6, 7, 8, 9]  # the DEQUANTIZEs do not decide for themselves
    first, second = [s.partition for s in d.plan if isinstance(s, DelegateStep)]
    # dequantize(w) feeds conv3 outside the largest partition, dequantize(b3) only conv3: CPU
    assert first.nodes == (1, 2, 3, 5, 6, 7) and second.nodes == (9,)
    assert [s.op for s in d.plan if isinstance(s, CpuStep)] == [0, 4, 8]
    assert d.log == ("Dummy delegate: 7 nodes delegated out of 10 nodes with 2 partitions.",
                     "Replacing 7 out of 10 node(s) with delegate (Dummy) node, yielding 4 partitions "
                     "for the whole graph.")
    refused = {u.op: u.reason for u in d.per_delegate[0].unsupported}
    assert sorted(refused) == [0, 4, 8] and "float16" in refused[0]
    x = sample_input(graph)
    np.testing.assert_array_equal(run_plan(graph, d.plan, x)[0], reference(graph, x)[0])


def test_fp16_rule_gpu_log_and_single_partition():
    delegate = Dummy(CONV_RELU, fp16_dequant_rule=True, log_lines=GPU_LOG, options=DelegateOptions(1))
    d = apply_delegates(fp16_graph(), [delegate])
    assert d.log[:4] == ("Following operations are not supported by GPU delegate:", "DEQUANTIZE: ",
                         "LOGISTIC: LOGISTIC is not in the dummy's set",
                         "6 operations will run on the GPU, and the remaining 4 operations will run on the CPU.")


def test_without_the_rule_dequantize_answers_for_itself():
    delegate = Dummy(CONV_RELU | {OpType.DEQUANTIZE})
    d = apply_delegates(fp16_graph(), [delegate])
    assert delegate.asked == list(range(10))
    assert d.per_delegate[0].nodes_delegated == 9
