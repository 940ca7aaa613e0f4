"""Each cost mechanism beyond the roofline, shown alone: switch it on, change one thing, see its effect."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from runtime.ir.graph import DType, Graph, Op, Tensor
from runtime.ir.optypes import OpType
from runtime.ir.options import AddOptions, Conv2DOptions, DepthwiseConv2DOptions, Padding
from sim import mechanisms as mx
from sim.cost import OpClass, Precision, Rates, Work, op_cost
from sim.mechanisms import Mechanisms
from sim.work import describe

F32, I8 = Precision.FLOAT32, Precision.INT8


def _rates(threads: int = 4, bandwidth: float = 15e9, **mech) -> Rates:
    return Rates({F32: 10e9, I8: 40e9}, {F32: 10e9, I8: 40e9}, bandwidth=bandwidth, dispatch_s=5e-6,
                 threads=threads, mech=Mechanisms(enabled=True, **mech))


def _act(name, shape, dtype=DType.FLOAT32):
    return Tensor(name, tuple(shape), dtype)


def _const(name, shape, dtype=DType.FLOAT32):
    data = np.ones(shape, dtype.np)
    return Tensor(name, tuple(shape), dtype, data=data)


def _conv(h, w, cin, cout, k, stride=1):
    out = (h - 1) // stride + 1
    tensors = [_act("x", (1, h, w, cin)), _const("w", (cout, k, k, cin)), _const("b", (cout,)),
               _act("y", (1, out, out, cout))]
    op = Op(OpType.CONV_2D, (0, 1, 2), (3,), Conv2DOptions(padding=Padding.SAME, stride_w=stride, stride_h=stride))
    return op, Graph(tuple(tensors), (op,), (0,), (3,))


def _depthwise(h, c):
    tensors = [_act("x", (1, h, h, c)), _const("w", (1, 3, 3, c)), _const("b", (c,)), _act("y", (1, h, h, c))]
    op = Op(OpType.DEPTHWISE_CONV_2D, (0, 1, 2), (3,), DepthwiseConv2DOptions())
    return op, Graph(tuple(tensors), (op,), (0,), (3,))


def _work(op_graph, precision=F32, align=1) -> Work:
    op, graph = op_graph
    return describe(op, graph, [t.shape for t in graph.tensors], precision, align)


def _speedup(work: Work, **mech) -> float:
    """1-thread over 4-thread time, compute-bound (memory does not scale with threads)."""
    one = op_cost(work, _rates(1, 1e15, **mech)).seconds - 5e-6
    return one / (op_cost(work, _rates(4, 1e15, **mech)).seconds - 5e-6)


# -- CPU ------------------------------------------------------------------------------------------

def test_thread_scaling_depends_on_the_layer_shape():
    """A 7x7x1024 depthwise layer splits 7 rows over 4 threads (2+2+2+1); a 112x112x64 one splits evenly."""
    small, big = _work(_depthwise(7, 1024)), _work(_depthwise(112, 64))
    assert mx.row_split(7, 4) == 3.5 and mx.row_split(112, 4) == 4.0
    assert _speedup(small) < _speedup(big)
    assert _speedup(big) == pytest.approx(4.0, rel=1e-9)


def test_ruy_keeps_a_small_gemm_on_one_thread():
    assert mx.ruy_threads(8, 8, 8, 4) == 1                 # 2**9 MACs: far under 2**15 per thread
    assert mx.ruy_threads(64, 64, 64, 4) == 4
    assert mx.ruy_threads(16, 16, 256, 4) == 2             # 2**16 MACs: two threads
    tiny = _work(_conv(2, 2, 8, 8, 1))
    assert _speedup(tiny) == pytest.approx(1.0)


def test_fork_join_is_paid_only_on_several_threads():
    work = _work(_conv(56, 56, 64, 64, 1))
    with_join = op_cost(work, _rates(4, join_s=20e-6)).seconds - op_cost(work, _rates(4)).seconds
    assert with_join == pytest.approx(20e-6)
    assert op_cost(work, _rates(1, join_s=20e-6)).seconds == op_cost(work, _rates(1)).seconds


def test_gemm_shape_efficiency_penalises_shallow_depth_and_partial_tiles():
    assert mx.gemm_shape_efficiency(64, 64, 256, (8, 8), 8) > mx.gemm_shape_efficiency(64, 64, 8, (8, 8), 8)
    assert mx.gemm_shape_efficiency(9, 8, 64, (8, 8), 0) == pytest.approx(9 / 16)
    shallow, deep = _work(_conv(28, 28, 8, 64, 1)), _work(_conv(28, 28, 256, 64, 1))
    per_mac = lambda w: op_cost(w, _rates(1, gemm_tile=(8, 8), gemm_depth_overhead=16)).compute_s / w.macs  # noqa: E731
    assert per_mac(shallow) > 2 * per_mac(deep)


def test_depthwise_lanes_pad_to_whole_vectors():
    """8 int8 channels fill half a 16-byte vector; 8 float32 channels fill two whole ones."""
    assert mx.lane_efficiency(8, 16) == 0.5 and mx.lane_efficiency(8, 4) == 1.0
    w8 = _work(_depthwise(28, 8), I8)
    w16 = _work(_depthwise(28, 16), I8)
    cost = lambda w: op_cost(w, _rates(1, vector_bytes=16)).compute_s / w.macs  # noqa: E731
    assert cost(w8) == pytest.approx(2 * cost(w16))


def test_cache_resident_working_set_streams_faster_than_dram():
    assert mx.cache_bandwidth(1 << 20, 15e9, 2 << 20, 60e9) == 60e9
    assert 15e9 < mx.cache_bandwidth(8 << 20, 15e9, 2 << 20, 60e9) < 60e9
    small = Work("ADD", OpClass.ELEMENTWISE, F32, elem_ops=1, bytes_read=1 << 20)
    big = dataclasses.replace(small, bytes_read=64 << 20)
    per_byte = lambda w: op_cost(w, _rates(1, cache_bytes=2 << 20, cache_bandwidth=60e9)).memory_s / w.bytes  # noqa
    assert per_byte(small) < per_byte(big)


def test_im2col_charges_a_pass_for_3x3_convs_on_the_cpu_only():
    """One memcpy per filter row and output pixel, on one thread, before the GEMM."""
    three, one = _work(_conv(28, 28, 32, 32, 3)), _work(_conv(28, 28, 32, 32, 1))
    assert three.im2col_bytes == 2 * 28 * 28 * 9 * 32 * 4 and one.im2col_bytes == 0
    assert (three.im2col_rows, one.im2col_rows) == (28 * 28 * 3, 0)
    on, off = _rates(1, im2col=True, im2col_row_s=20e-9), _rates(1)
    extra = op_cost(three, on).seconds - op_cost(three, off).seconds
    assert extra == pytest.approx(three.im2col_bytes / 15e9 + 28 * 28 * 3 * 20e-9)
    assert op_cost(three, _rates(4, im2col=True, im2col_row_s=20e-9)).seconds - \
        op_cost(three, _rates(4)).seconds == pytest.approx(extra)      # no faster on four threads
    assert op_cost(one, on).seconds == op_cost(one, off).seconds
    strided = _work(_conv(28, 28, 32, 32, 1, stride=2))
    assert strided.im2col_rows == 14 * 14                               # a strided 1x1 conv gathers too


# -- GPU ------------------------------------------------------------------------------------------

def test_occupancy_small_grids_leave_the_gpu_idle():
    """7x7x1024 is 12,544 work items of 4 channels; 112x112x32 is 100,352."""
    small, big = _work(_depthwise(7, 1024), align=4), _work(_depthwise(112, 32), align=4)
    assert (small.items, big.items) == (7 * 7 * 256, 112 * 112 * 8)
    full = 65536
    rate = lambda w: w.macs / op_cost(w, _rates(1, occupancy_items=full)).compute_s  # noqa: E731
    assert rate(small) == pytest.approx(rate(big) * small.items / full)


def _avg_pool(h, c, window):
    from runtime.ir.options import Pool2DOptions

    out = h // window
    tensors = [_act("x", (1, h, h, c)), _act("y", (1, out, out, c))]
    op = Op(OpType.AVERAGE_POOL_2D, (0,), (1,), Pool2DOptions(padding=Padding.VALID, stride_w=window,
                                                               stride_h=window, filter_width=window,
                                                               filter_height=window))
    return op, Graph(tuple(tensors), (op,), (0,), (1,))


def test_a_global_average_pool_runs_as_a_reduction_with_a_work_group_per_output():
    """A squeeze-excite pool (64x64x16 -> 1x1x16) keeps 4 x 256 GPU threads busy, not 4; a 2x2 pool
    keeps its one item per output slice."""
    squeeze, local = _work(_avg_pool(64, 16, 64), align=4), _work(_avg_pool(64, 16, 2), align=4)
    assert squeeze.items == 4 * mx.GPU_REDUCE_GROUP
    assert local.items == 32 * 32 * 4
    full = 4096
    slow = op_cost(dataclasses.replace(squeeze, items=4), _rates(1, occupancy_items=full)).compute_s
    fast = op_cost(squeeze, _rates(1, occupancy_items=full)).compute_s
    assert fast == pytest.approx(slow * 4 / (4 * mx.GPU_REDUCE_GROUP))


def _dilated_conv(h, c):
    tensors = [_act("x", (1, h, h, c)), _const("w", (c, 3, 3, c)), _const("b", (c,)), _act("y", (1, h, h, c))]
    op = Op(OpType.CONV_2D, (0, 1, 2), (3,), Conv2DOptions(padding=Padding.SAME, dilation_w_factor=2,
                                                          dilation_h_factor=2))
    return op, Graph(tuple(tensors), (op,), (0,), (3,))


def test_winograd_tiles_only_for_3x3_stride_1_undilated_convolutions():
    """IsSuitableForWinograd4x4To6x6: a 3x3 filter, stride 1, no dilation; 4x4 output tiles, rounded up."""
    assert _work(_conv(56, 56, 256, 256, 3), align=4).winograd_tiles == 14 * 14
    assert _work(_conv(30, 30, 256, 256, 3), align=4).winograd_tiles == 8 * 8
    assert _work(_conv(56, 56, 256, 256, 3, stride=2), align=4).winograd_tiles == 0
    assert _work(_conv(56, 56, 256, 256, 1), align=4).winograd_tiles == 0
    assert _work(_dilated_conv(56, 256), align=4).winograd_tiles == 0


def test_winograd_follows_the_gpu_delegates_rule_and_cuts_the_multiplies():
    """Adreno 6xx: both sides >= 32 slices of 4 channels and >= 128 output tiles. 256 -> 256 at 56x56
    (196 tiles) costs 36 products per tile instead of 144 plus the two transforms: 3.7x fewer."""
    direct = 196 * 16 * 9 * 256 * 256
    plan = mx.winograd(196, 256, 256, 32, 128)
    assert plan.kernels == 3 and plan.items == 36 * 196 * 64
    assert direct / plan.macs == pytest.approx(3.7, abs=0.05)
    assert plan.elements == 2 * 36 * 196 * 512
    assert mx.winograd(196, 124, 256, 32, 128) is None     # 31 input slices
    assert mx.winograd(196, 256, 124, 32, 128) is None     # 31 output slices
    assert mx.winograd(127, 256, 256, 32, 128) is None     # too few tiles
    assert mx.winograd(196, 256, 256, 0, 0) is None        # the unit has no Winograd path


def test_winograd_speeds_up_a_big_3x3_conv_on_the_gpu_and_leaves_a_small_one_alone():
    """Alone: the same op with the rule on and off. The big conv's compute drops ~3.7x and it pays
    three launches; a 64-channel conv (16 slices) keeps the direct kernel."""
    on = dict(winograd_min_slices=32, winograd_min_tiles=128)
    big, small = _work(_conv(56, 56, 256, 256, 3), align=4), _work(_conv(56, 56, 64, 64, 3), align=4)
    plain, wino = op_cost(big, _rates(1, 1e15)), op_cost(big, _rates(1, 1e15, **on))
    assert plain.compute_s / wino.compute_s == pytest.approx(3.7, abs=0.05)
    assert wino.dispatch_s == pytest.approx(3 * plain.dispatch_s)
    assert wino.bytes == big.bytes + 2 * 36 * 196 * 512 * 4   # the transformed tensors, written and read
    assert op_cost(small, _rates(1, 1e15, **on)) == op_cost(small, _rates(1, 1e15))


def test_the_adreno_phones_carry_the_adreno_winograd_rule():
    """Pixel 3 and 4 (Adreno 630, 640): 32 slices and 128 tiles. No conv of the fitted rows
    (MobileNet v1, SqueezeNet) meets it: the refit test (tests/test_calibrate.py) still gets the
    shipped numbers."""
    from sim.profile import load_profile

    for phone in ("pixel3", "pixel4"):
        mech = load_profile(phone).unit("gpu").mech
        assert (mech.winograd_min_slices, mech.winograd_min_tiles) == (32, 128)


def test_a_linked_add_and_relu_after_a_conv_cost_the_gpu_no_launch():
    from delegates.gpu import GpuDelegate, linked_nodes
    from runtime.interpreter.api import Interpreter
    from tests.sim_kit import tiny_profile

    h, c = 16, 8
    tensors = [_act("x", (1, h, h, c)), _const("w", (c, 1, 1, c)), _const("b", (c,)), _act("y", (1, h, h, c)),
               _act("skip", (1, h, h, c)), _act("s", (1, h, h, c)), _act("r", (1, h, h, c))]
    conv = Op(OpType.CONV_2D, (0, 1, 2), (3,), Conv2DOptions())
    add = Op(OpType.ADD, (4, 3), (5,), AddOptions())
    relu = Op(OpType.RELU, (5,), (6,))
    graph = Graph(tuple(tensors), (conv, add, relu), (0, 4), (6,))
    assert linked_nodes(graph, (0, 1, 2)) == frozenset({1, 2})
    profile = tiny_profile()
    profile = dataclasses.replace(profile, units=tuple(
        dataclasses.replace(u, dispatch_s=50e-6) if u.name == "gpu" else u for u in profile.units))

    class Unlinked(GpuDelegate):
        def fused_nodes(self, partition):
            return frozenset()

    def latency(delegate):
        it = Interpreter(graph=graph, experimental_delegates=[delegate], device=profile, timing_only=True)
        it.allocate_tensors()
        return it.simulation.invoke(), it.simulation.executor.jobs

    linked_s, jobs = latency(GpuDelegate())
    unlinked_s, _ = latency(Unlinked())
    linked = [op.work for job in jobs if hasattr(job, "ops") for op in job.ops if op.work.fused]
    assert len(linked) == 2 and all(w.bytes_written == 0 for w in linked)
    assert unlinked_s - linked_s >= 2 * 50e-6     # the ADD and the RELU launch nothing of their own


# -- NNAPI ----------------------------------------------------------------------------------------

def _tiny():
    from runtime import zoo

    return zoo.build("tiny_cnn", resolution=16, classes=4)


def _nnapi_run(profile, graph, **options):
    from delegates.nnapi import NnapiDelegate, NnapiOptions
    from runtime.interpreter.api import Interpreter

    delegate = NnapiDelegate(NnapiOptions(**options), profile)
    it = Interpreter(graph=graph, experimental_delegates=[delegate], device=profile, timing_only=True)
    it.allocate_tensors()
    seconds = it.simulation.invoke()
    placed = {op.op: (op.unit or job.unit).name for job in it.simulation.executor.jobs if hasattr(job, "step")
              for op in job.ops}
    return seconds, placed, it.simulation


def test_nnapi_splits_a_model_across_drivers_by_what_each_supports():
    """The test GPU driver lists no MUL; the NPU driver does: one NNAPI partition, two steps."""
    from tests.delegate_kit import android, device
    from sim.cost import Precision as P

    float_ops = {"CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "RESHAPE", "SOFTMAX", "MEAN",
                 "FULLY_CONNECTED", "MAX_POOL_2D"}
    graph = _tiny()
    gpu = device("test-gpu", "gpu", 4, float_ops, {P.FLOAT32})
    npu = device("test-npu", "npu", 4, {"MEAN"}, {P.FLOAT32}, execution_s=300e-6)
    seconds, placed, simulation = _nnapi_run(android(30, devices=(gpu, npu)), graph)
    mean = next(i for i, op in enumerate(graph.ops) if op.type is OpType.MEAN)
    assert placed[mean] == "gpu"                          # the main device takes what it lists
    gpu_no_mean = device("test-gpu", "gpu", 4, float_ops - {"MEAN"}, {P.FLOAT32})
    split_s, split, simulation = _nnapi_run(android(30, devices=(gpu_no_mean, npu)), graph)
    assert split[mean] == "npu" and {u for i, u in split.items() if i != mean} == {"gpu"}
    assert len(simulation.delegation.plan) == 1                  # still one delegated partition
    steps = [iv for iv in simulation.soc.trace.intervals if iv.name.endswith(" step")]
    assert [iv.lane for iv in steps if iv.inference >= 0] == ["npu"]   # the NPU driver's execution call
    moves = [iv for iv in simulation.soc.trace.intervals if iv.name.endswith(" step inputs") and iv.inference >= 0]
    assert len(moves) == 2                                # into the NPU's step and back to the GPU's
    assert split_s - seconds >= 300e-6


def test_nnapi_reference_runs_what_no_accelerator_takes_unless_the_cpu_is_disallowed():
    """Before API 29 the app cannot exclude NNAPI's CPU: nnapi-reference takes the rest, slowly."""
    from tests.delegate_kit import android, device
    from sim.cost import Precision as P

    graph = _tiny()
    ops = {op.name for op in graph.ops}
    gpu = device("test-gpu", "gpu", 2, ops - {"MEAN"}, {P.FLOAT32})
    ref = device("nnapi-reference", "cpu_big", 2, ops, {P.FLOAT32}, rate_scale=0.1)
    mean = next(i for i, op in enumerate(graph.ops) if op.type is OpType.MEAN)
    _, old, _ = _nnapi_run(android(28, devices=(gpu, ref)), graph)
    assert old[mean] == "cpu_big"                        # on NNAPI's reference CPU, inside the partition
    _, allowed, _ = _nnapi_run(android(30, devices=(gpu, ref)), graph, disallow_nnapi_cpu=False)
    assert allowed[mean] == "cpu_big"
    _, disallowed, simulation = _nnapi_run(android(30, devices=(gpu, ref)), graph)
    assert mean not in disallowed                        # back on TFLite's own CPU kernels


def test_nnapi_reference_kernels_run_at_the_drivers_rate_scale():
    from tests.delegate_kit import android, device
    from sim.cost import Precision as P

    graph = _tiny()
    ops = {op.name for op in graph.ops}
    fast = device("nnapi-reference", "cpu_big", 4, ops, {P.FLOAT32}, rate_scale=1.0)
    slow = device("nnapi-reference", "cpu_big", 4, ops, {P.FLOAT32}, rate_scale=0.1)
    t_fast, _, _ = _nnapi_run(android(30, devices=(fast,)), graph, disallow_nnapi_cpu=False)
    t_slow, _, _ = _nnapi_run(android(30, devices=(slow,)), graph, disallow_nnapi_cpu=False)
    assert t_slow > 3 * t_fast


def _op_seconds(simulation) -> list[tuple[str, float]]:
    from sim.trace import Kind

    return [(iv.name, iv.end - iv.start) for iv in simulation.soc.trace.intervals
            if iv.kind is Kind.OP and iv.inference >= 0]


def test_nnapi_reference_runs_each_float_op_as_one_core_of_tflites_kernels():
    """Android's CpuExecutor runs each op on the calling thread (OpenMP disabled, so Eigen's float
    GEMM is single-threaded) with TFLite's optimized Conv (im2col + GEMM): on the Pixel 3 every op
    costs what TFLite's CPU kernel costs on one thread, not a quarter of it."""
    from runtime.interpreter.api import Interpreter
    from sim.profile import load_profile

    profile, graph = load_profile("pixel3"), _tiny()
    _, placed, reference = _nnapi_run(profile, graph, accelerator_name="nnapi-reference", disallow_nnapi_cpu=False)
    assert set(placed.values()) == {"cpu_big"} and len(placed) == len(graph.ops)
    it = Interpreter(graph=graph, device=profile, num_threads=1, timing_only=True)
    it.allocate_tensors()
    it.simulation.invoke()
    one_thread = _op_seconds(it.simulation)
    assert [name for name, _ in _op_seconds(reference)] == [name for name, _ in one_thread]
    assert [s for _, s in _op_seconds(reference)] == pytest.approx([s for _, s in one_thread], rel=1e-9)


def test_hexagon_d32_layout_pads_depth_to_slices_of_32():
    """Hexagon NN keeps activations in depth slices of 32: 8 channels cost the DSP what 32 do."""
    eight, thirty_two = _work(_depthwise(28, 8), I8, align=32), _work(_depthwise(28, 32), I8, align=32)
    assert (eight.macs, eight.bytes, eight.items) == (thirty_two.macs, thirty_two.bytes, thirty_two.items)
    from sim.profile import load_profile

    for phone in ("pixel3", "pixel4"):
        assert load_profile(phone).unit("dsp").channel_align == 32
