"""The cost model: roofline bound and crossover, GPU channel padding, MAC and byte counts, energy."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from runtime.ir.graph import DType, Graph, Op, Tensor
from runtime.ops import HYBRID_KERNELS, KERNELS, QUANT_KERNELS
from runtime.ir.optypes import OpType
from runtime.ir.options import (DepthwiseConv2DOptions, FullyConnectedOptions, Pool2DOptions,
                             UnidirectionalSequenceLSTMOptions)
from sim.cost import OpClass, Precision, Rates, Work, op_cost, padded_channels
from sim.work import (CLASSES, DEFAULT_CLASS, EXP_OPS, describe, footprint, graph_tensor_bytes,
                      op_class, tensor_bytes)

F32, F16, I8 = Precision.FLOAT32, Precision.FLOAT16, Precision.INT8


# ---- graph helpers ---------------------------------------------------------------------------

def act(name, shape, dtype=DType.FLOAT32):
    return Tensor(name=name, shape=shape, dtype=dtype)


def const(name, shape, dtype=DType.FLOAT32):
    return Tensor(name=name, shape=shape, dtype=dtype, data=np.zeros(shape, dtype.np))


def single_op(op_type, tensors, n_in, options=None, absent=()):
    """A one-op graph: tensors[:n_in] are its inputs (slots in `absent` are -1), the rest its outputs."""
    inputs = tuple(-1 if k in absent else k for k in range(n_in))
    op = Op(op_type, inputs, tuple(range(n_in, len(tensors))), options)
    return op, Graph(tuple(tensors), (op,), (0,), op.outputs)


def work_of(op_graph, precision=F32, align=1, shapes=None):
    op, graph = op_graph
    shapes = shapes or [t.shape for t in graph.tensors]
    return describe(op, graph, shapes, precision, align)


def add_graph(h, w, c):
    return single_op(OpType.ADD, [act("a", (1, h, w, c)), act("b", (1, h, w, c)), act("y", (1, h, w, c))], 2)


def conv_graph(h, w, cin, cout, k=3):
    tensors = [act("x", (1, h, w, cin)), const("w", (cout, k, k, cin)), const("b", (cout,)),
               act("y", (1, h, w, cout))]
    return single_op(OpType.CONV_2D, tensors, 3)


def depthwise_graph(h, w, c, k=3):
    tensors = [act("x", (1, h, w, c)), const("w", (1, k, k, c)), const("b", (c,)), act("y", (1, h, w, c))]
    return single_op(OpType.DEPTHWISE_CONV_2D, tensors, 3, DepthwiseConv2DOptions())


def fc_graph(batch, cin, cout, act_dtype=DType.FLOAT32, bias_dtype=DType.FLOAT32):
    tensors = [act("x", (batch, cin), act_dtype), const("w", (cout, cin), act_dtype),
               const("b", (cout,), bias_dtype), act("y", (batch, cout), act_dtype)]
    return single_op(OpType.FULLY_CONNECTED, tensors, 3, FullyConnectedOptions())


# ---- roofline: compute-bound, memory-bound and the crossover -----------------------------------

UNIT = Rates(macs_per_s={F32: 2.0 ** 36, F16: 2.0 ** 37}, elem_per_s={F32: 2.0 ** 33, F16: 2.0 ** 34},
             bandwidth=2.0 ** 33, dispatch_s=2.0 ** -17)


def test_dense_conv_is_compute_bound_and_same_bytes_elementwise_is_memory_bound():
    conv = work_of(conv_graph(56, 56, 64, 64))
    assert conv.macs / conv.bytes > 50
    assert op_cost(conv, UNIT).bound == "compute"
    # Same traffic, one element op per 12 bytes (an ADD of float32: two reads and a write).
    elementwise = Work("ADD", OpClass.ELEMENTWISE, F32, elem_ops=conv.bytes // 12, bytes_read=conv.bytes)
    assert op_cost(elementwise, UNIT).bound == "memory"
    assert op_cost(describe(*add_graph(56, 56, 64), shapes=[(1, 56, 56, 64)] * 3, precision=F32),
                   UNIT).bound == "memory"


@pytest.mark.parametrize("delta, bound", [(-1, "memory"), (0, "compute"), (1, "compute")])
def test_bound_flips_exactly_where_compute_time_equals_memory_time(delta, bound):
    nbytes = 2 ** 10
    crossover = nbytes * (2 ** 36 // 2 ** 33)  # macs / rate == bytes / bandwidth, exactly in binary
    work = Work("CONV_2D", OpClass.CONV, F32, macs=crossover + delta, bytes_read=nbytes)
    cost = op_cost(work, UNIT)
    assert cost.bound == bound
    assert cost.compute_s == (crossover + delta) / 2.0 ** 36
    assert cost.memory_s == nbytes / 2.0 ** 33
    assert cost.seconds == UNIT.dispatch_s + max(cost.compute_s, cost.memory_s)
    assert (cost.compute_s > cost.memory_s) == (delta > 0)


@given(macs=st.integers(0, 10 ** 9), elem=st.integers(0, 10 ** 8), nbytes=st.integers(0, 10 ** 9),
       eff=st.floats(0.05, 1.0))
def test_seconds_is_dispatch_plus_the_larger_term(macs, elem, nbytes, eff):
    rates = dataclasses.replace(UNIT, efficiency={OpClass.CONV: eff})
    cost = op_cost(Work("CONV_2D", OpClass.CONV, F32, macs, elem, nbytes, 0), rates)
    assert cost.compute_s == pytest.approx(macs / (2.0 ** 36 * eff) + elem / (2.0 ** 33 * eff), rel=1e-12)
    assert cost.seconds == rates.dispatch_s + max(cost.compute_s, cost.memory_s)
    assert cost.bound == ("compute" if cost.compute_s >= cost.memory_s else "memory")


def test_a_dram_share_slows_memory_bound_work_only():
    memory_bound = Work("ADD", OpClass.ELEMENTWISE, F32, elem_ops=1000, bytes_read=10 ** 6)
    compute_bound = Work("CONV_2D", OpClass.CONV, F32, macs=10 ** 9, bytes_read=10 ** 6)
    share = UNIT.bandwidth / 3
    assert op_cost(memory_bound, UNIT, bandwidth=share).seconds > op_cost(memory_bound, UNIT).seconds
    assert op_cost(memory_bound, UNIT, bandwidth=share).memory_s == pytest.approx(3 * 10 ** 6 / UNIT.bandwidth)
    assert op_cost(compute_bound, UNIT, bandwidth=share).seconds == op_cost(compute_bound, UNIT).seconds


def test_a_precision_the_unit_lacks_is_named():
    int_unit = Rates(macs_per_s={I8: 1e12}, elem_per_s={I8: 1e11}, bandwidth=1e10)
    with pytest.raises(ValueError, match="float16"):
        op_cost(Work("CONV_2D", OpClass.CONV, F16, macs=100), int_unit)
    with pytest.raises(ValueError, match="float32"):
        op_cost(Work("RESHAPE", OpClass.DATA, F32, bytes_read=100), int_unit)
    macs_only = Rates(macs_per_s={F32: 1e9}, elem_per_s={}, bandwidth=1e9)
    with pytest.raises(ValueError, match="element-op rate for float32"):
        op_cost(Work("ADD", OpClass.ELEMENTWISE, F32, elem_ops=10), macs_only)


# ---- the GPU's 4-channel padding -------------------------------------------------------------

def test_padded_channels():
    assert [padded_channels(c, 4) for c in (1, 4, 5, 8, 9)] == [4, 4, 8, 8, 12]
    assert padded_channels(5, 1) == 5
    assert padded_channels(2 ** 60 + 1, 4) == 2 ** 60 + 4


@pytest.mark.parametrize("build", [add_graph, lambda h, w, c: conv_graph(h, w, c, c), depthwise_graph])
def test_five_channels_cost_what_eight_cost_on_a_four_channel_unit(build):
    five, eight = work_of(build(7, 9, 5), align=4), work_of(build(7, 9, 8), align=4)
    assert five == eight
    plain = work_of(build(7, 9, 5), align=1)
    assert plain.bytes < five.bytes
    assert plain.macs + plain.elem_ops < five.macs + five.elem_ops


@given(h=st.integers(1, 9), w=st.integers(1, 9), c=st.integers(1, 21), k=st.sampled_from([1, 3]),
       family=st.sampled_from(["add", "conv", "depthwise"]), precision=st.sampled_from([F32, F16]))
def test_padding_law(h, w, c, k, family, precision):
    build = {"add": add_graph, "conv": lambda h, w, c: conv_graph(h, w, c, c, k),
             "depthwise": lambda h, w, c: depthwise_graph(h, w, c, k)}[family]
    up = -(-c // 4) * 4
    padded = work_of(build(h, w, c), precision, align=4)
    assert padded == work_of(build(h, w, up), precision, align=4)
    # on a one-channel unit every channel is a work item of its own; the rest is the same work
    assert padded == dataclasses.replace(work_of(build(h, w, up), precision, align=1), items=padded.items)
    plain = work_of(build(h, w, c), precision, align=1)
    if c == up:
        assert dataclasses.replace(plain, items=padded.items) == padded
    else:
        assert plain.bytes < padded.bytes and (plain.macs, plain.elem_ops) < (padded.macs, padded.elem_ops)


def test_shape_tensors_are_not_padded_and_keep_their_own_width():
    tensors = [act("x", (1, 2, 3, 5)), const("shape", (3,), DType.INT32), act("y", (1, 6, 5))]
    work = work_of(single_op(OpType.RESHAPE, tensors, 2), F16, align=4)
    assert work.bytes_read == 1 * 2 * 3 * 8 * 2 + 3 * 4
    assert work.bytes_written == 1 * 6 * 8 * 2
    assert (work.macs, work.elem_ops, work.op_class) == (0, 0, OpClass.DATA)


def test_tensor_bytes_and_footprint():
    assert tensor_bytes((1, 4, 4, 5), F32) == 320
    assert tensor_bytes((1, 4, 4, 5), F16, channel_align=4) == 256
    assert tensor_bytes((2, 3), DType.INT64) == 48
    op, graph = conv_graph(4, 4, 5, 6, k=1)
    shapes = [t.shape for t in graph.tensors]
    assert graph_tensor_bytes(graph, shapes, 0, F16, 4) == 4 * 4 * 8 * 2
    # Every tensor once, weights stored as padded 8x8 blocks on the four-channel unit.
    assert footprint(graph, [0], shapes, F32, 4) == 4 * (16 * 8 + 8 * 8 + 8 + 16 * 8)
    assert footprint(graph, [0], shapes, F32) == 4 * (16 * 5 + 6 * 5 + 6 + 16 * 6)


# ---- MAC and byte counts by hand -------------------------------------------------------------

def test_mobilenet_first_conv_macs():
    # MobileNet v1 1.0 224, conv 3x3 stride 2 from RGB: 112 x 112 x 32 outputs of 3 x 3 x 3 taps.
    tensors = [act("img", (1, 224, 224, 3)), const("w", (32, 3, 3, 3)), const("b", (32,)),
               act("y", (1, 112, 112, 32))]
    work = work_of(single_op(OpType.CONV_2D, tensors, 3))
    assert work.macs == 112 * 112 * 32 * 3 * 3 * 3 == 10_838_016
    assert work.op_class is OpClass.CONV
    assert work.bytes_read == 4 * (224 * 224 * 3 + 32 * 27 + 32)
    assert work.bytes_written == 4 * 112 * 112 * 32


def test_mobilenet_pointwise_and_depthwise_macs():
    assert work_of(conv_graph(14, 14, 512, 512, k=1)).macs == 14 * 14 * 512 * 512
    dw = work_of(depthwise_graph(112, 112, 64))
    assert dw.macs == 112 * 112 * 64 * 9 and dw.op_class is OpClass.DEPTHWISE


@pytest.mark.parametrize("precision, act_dtype, bias_dtype, size, bias_size", [
    (F32, DType.FLOAT32, DType.FLOAT32, 4, 4),
    (F16, DType.FLOAT32, DType.FLOAT32, 2, 2),
    (I8, DType.INT8, DType.INT32, 1, 4),
])
def test_fully_connected_bytes_by_hand(precision, act_dtype, bias_dtype, size, bias_size):
    work = work_of(fc_graph(1, 1024, 1001, act_dtype, bias_dtype), precision)
    assert work.bytes_read == size * (1024 + 1001 * 1024) + bias_size * 1001
    assert work.bytes_written == size * 1001
    assert work.macs == 1024 * 1001 and work.op_class is OpClass.GEMM


def test_fully_connected_without_bias_reads_no_bias():
    op, graph = fc_graph(2, 8, 3)
    op = dataclasses.replace(op, inputs=(0, 1, -1))
    assert describe(op, graph, [t.shape for t in graph.tensors], F32).bytes_read == 4 * (16 + 24)


def test_run_time_shapes_override_static_ones():
    op_graph = add_graph(1, 1, 3)
    work = work_of(op_graph, shapes=[(1, 10, 10, 3)] * 3)
    assert work.elem_ops == 300 and work.bytes == 3 * 300 * 4


def test_transpose_conv_and_batch_matmul_macs():
    tensors = [const("out_shape", (4,), DType.INT32), const("w", (6, 3, 3, 4)), act("x", (1, 5, 5, 4)),
               act("y", (1, 10, 10, 6))]
    work = work_of(single_op(OpType.TRANSPOSE_CONV, tensors, 3, absent=()))
    assert work.macs == 5 * 5 * 4 * 3 * 3 * 6
    assert work.bytes_read == 16 + 4 * (6 * 9 * 4 + 100)
    tensors = [act("a", (2, 3, 7)), act("b", (2, 7, 5)), act("y", (2, 3, 5))]
    assert work_of(single_op(OpType.BATCH_MATMUL, tensors, 2)).macs == 2 * 3 * 5 * 7


def test_lstm_macs_are_four_gates_of_input_plus_recurrent_per_step_and_batch():
    batch, steps, features, units = 2, 5, 6, 4
    tensors = [act("x", (batch, steps, features))]
    tensors += [const(f"wx{k}", (units, features)) for k in range(4)]
    tensors += [const(f"wh{k}", (units, units)) for k in range(4)]
    tensors += [const("unused", (1,))] * 3 + [const(f"b{k}", (units,)) for k in range(4)]
    tensors += [const("unused", (1,))] * 2 + [act("h", (batch, units)), act("c", (batch, units))]
    tensors += [act("y", (batch, steps, units))]
    absent = {9, 10, 11, 16, 17}
    work = work_of(single_op(OpType.UNIDIRECTIONAL_SEQUENCE_LSTM, tensors, 20,
                             UnidirectionalSequenceLSTMOptions(), absent=absent))
    assert work.macs == 4 * (features + units) * units * steps * batch
    assert work.elem_ops > 5 * EXP_OPS * units * steps * batch


@pytest.mark.parametrize("op_type, per_output", [(OpType.ADD, 1), (OpType.RELU, 1), (OpType.EXP, EXP_OPS),
                                                 (OpType.LOGISTIC, EXP_OPS + 2), (OpType.SOFTMAX, EXP_OPS + 4)])
def test_elementwise_ops_per_output(op_type, per_output):
    n_in = 2 if op_type is OpType.ADD else 1
    tensors = [act(f"x{k}", (1, 10)) for k in range(n_in)] + [act("y", (1, 10))]
    work = work_of(single_op(op_type, tensors, n_in))
    assert (work.macs, work.elem_ops) == (0, 10 * per_output)
    assert work.op_class is (OpClass.TRANSCENDENTAL if per_output > 1 else OpClass.ELEMENTWISE)


def test_pool_reduce_and_resize_element_ops():
    pool = single_op(OpType.MAX_POOL_2D, [act("x", (1, 8, 8, 3)), act("y", (1, 4, 4, 3))], 1,
                     Pool2DOptions(filter_width=2, filter_height=3))
    assert work_of(pool).elem_ops == 48 * 6
    mean = single_op(OpType.MEAN, [act("x", (1, 8, 8, 3)), const("axes", (2,), DType.INT32),
                                   act("y", (1, 3))], 2)
    assert work_of(mean).elem_ops == 192
    resize = single_op(OpType.RESIZE_BILINEAR, [act("x", (1, 4, 4, 3)), const("size", (2,), DType.INT32),
                                                act("y", (1, 8, 8, 3))], 2)
    assert work_of(resize).elem_ops == 192 * 4


def test_shape_reads_no_data_and_gather_reads_what_it_picks():
    shape = work_of(single_op(OpType.SHAPE, [act("x", (1, 64, 64, 3)), act("s", (4,), DType.INT32)], 1))
    assert (shape.bytes_read, shape.bytes_written) == (0, 16)
    gather = work_of(single_op(OpType.GATHER, [const("table", (1000, 16)), act("ids", (5,), DType.INT32),
                                               act("rows", (5, 16))], 2))
    assert gather.bytes_read == 5 * 16 * 4 + 5 * 4


# ---- op classes ------------------------------------------------------------------------------

def test_every_op_the_testbed_runs_has_an_explicit_class():
    ran = set(KERNELS) | set(QUANT_KERNELS) | set(HYBRID_KERNELS) | {
        OpType.QUANTIZE, OpType.DEQUANTIZE, OpType.DENSIFY, OpType.UNIDIRECTIONAL_SEQUENCE_LSTM}
    assert ran <= set(CLASSES)
    assert op_class(OpType.CONV_2D) is OpClass.CONV and op_class(OpType.TANH) is OpClass.TRANSCENDENTAL


def test_unknown_op_types_cost_bytes_only():
    assert OpType.DELEGATE not in CLASSES and op_class(OpType.DELEGATE) is DEFAULT_CLASS is OpClass.DATA
    work = work_of(single_op(OpType.DELEGATE, [act("x", (4, 4)), act("y", (4, 4))], 1))
    assert (work.macs, work.elem_ops, work.bytes) == (0, 0, 128)


# ---- energy ----------------------------------------------------------------------------------

def brute_force_energy(idle_w, span, busy):
    """Integrate the step function segment by segment, looking up the power in each segment."""
    cuts = sorted({0.0, span} | {x for s, e, _ in busy for x in (s, e)})
    total = []
    for a, b in zip(cuts, cuts[1:]):
        mid = (a + b) / 2
        total.append((b - a) * next((w for s, e, w in busy if s <= mid < e), idle_w))
    return math.fsum(total)


@st.composite
def rail(draw):
    span = draw(st.floats(1e-3, 10.0))
    points = sorted(draw(st.lists(st.floats(0.0, span), min_size=0, max_size=20, unique=True)))
    idle = draw(st.floats(0.0, 1.0))
    busy = [(s, e, idle + draw(st.floats(0.0, 5.0))) for s, e in zip(points[::2], points[1::2]) if e > s]
    return idle, span, busy


@given(rail())
def test_rail_energy_is_the_integral_of_the_power_step_function(case):
    """sim.power.rail_energy, the one place energy is computed: idle power over the span plus each
    busy interval's watts above idle, against the step function integrated segment by segment."""
    from sim.power import rail_energy
    from sim.trace import Interval, Kind

    idle, span, busy = case
    intervals = [Interval("gpu", "op", Kind.OP, s, e, "gpu", w - idle) for s, e, w in busy]
    exact = brute_force_energy(idle, span, busy)
    got = rail_energy(intervals, {"gpu": idle}, 0.0, span)["gpu"]
    assert got == pytest.approx(exact, rel=1e-9, abs=1e-300)
