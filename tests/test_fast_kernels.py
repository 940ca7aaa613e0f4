"""The numba kernels (runtime/ops/fast_*.py) against the NumPy reference kernels they stand in for,
called directly: bit for bit on 8-bit data, within float32 rounding on float data; and the switch
that selects between them (DTB_KERNELS / runtime.ops.fast_select)."""

from __future__ import annotations

import collections
import dataclasses
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from runtime.ir.graph import DType, Graph, Op, QuantParams, Tensor
from runtime.ir.optypes import OpType
from runtime.ir.options import Activation, Conv2DOptions, DepthwiseConv2DOptions, Padding, Pool2DOptions
from runtime.ops import (conv, fast_conv, fast_gemm, fast_jit, fast_pool, fast_qconv, fast_select, parallel, pool,
                         qconv, qpool)
from runtime.ops.base import Node, out_size

_DTYPES = {"float32": DType.FLOAT32, "int8": DType.INT8, "uint8": DType.UINT8}
_ACTS = (Activation.NONE, Activation.RELU, Activation.RELU6, Activation.RELU_N1_TO_1, Activation.TANH)


@dataclasses.dataclass(frozen=True)
class Case:
    kind: str  # "conv" or "depthwise"
    dtype: str  # "float32", "int8" (per-channel or per-tensor weights) or "uint8" (legacy)
    n: int = 1
    h: int = 5
    w: int = 5
    cin: int = 3
    cout: int = 4  # conv only; a depthwise op has cin * mult
    kh: int = 3
    kw: int = 3
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    padding: Padding = Padding.SAME
    mult: int = 1
    act: Activation = Activation.NONE
    per_channel: bool = True
    bias: bool = True
    seed: int = 0


def _quant(scale, zp, axis=0) -> QuantParams:
    scale = tuple(float(s) for s in np.atleast_1d(scale))
    return QuantParams(scale, tuple(int(z) for z in np.broadcast_to(np.atleast_1d(zp), (len(scale),))), axis)


def build(case: Case):
    """The single-op graph of a case and its input, filter and bias arrays."""
    rng = np.random.default_rng(case.seed)
    dtype = _DTYPES[case.dtype]
    (sh, sw), (dh, dw), pad = case.stride, case.dilation, case.padding
    if pad is Padding.VALID and (case.h < (case.kh - 1) * dh + 1 or case.w < (case.kw - 1) * dw + 1):
        pad = Padding.SAME  # VALID needs the dilated filter to fit
    oh, ow = out_size(pad, case.h, case.kh, sh, dh), out_size(pad, case.w, case.kw, sw, dw)
    depthwise = case.kind == "depthwise"
    cout = case.cin * case.mult if depthwise else case.cout
    wshape = (1, case.kh, case.kw, cout) if depthwise else (cout, case.kh, case.kw, case.cin)
    taps = case.kh * case.kw * (1 if depthwise else case.cin)
    xshape = (case.n, case.h, case.w, case.cin)
    if case.dtype == "float32":
        x = rng.standard_normal(xshape).astype(np.float32)
        w = (rng.standard_normal(wshape) / np.sqrt(taps)).astype(np.float32)
        b = rng.standard_normal(cout).astype(np.float32)
        qx = qw = qb = qy = None
    else:
        info = np.iinfo(dtype.np)
        x = rng.integers(info.min, info.max + 1, xshape).astype(dtype.np)
        s_in, zp_in = float(rng.uniform(0.01, 0.1)), int(rng.integers(info.min, info.max + 1))
        axis = 3 if depthwise else 0
        if case.dtype == "uint8":  # per-tensor, with a weight zero point the kernel subtracts
            w = rng.integers(0, 256, wshape).astype(np.uint8)
            s_w, zp_w = np.array([rng.uniform(0.001, 0.02)]), int(rng.integers(100, 156))
        else:
            w = rng.integers(-127, 128, wshape).astype(np.int8)
            s_w, zp_w = rng.uniform(0.001, 0.02, cout if case.per_channel else 1), 0
        qx, qw = _quant(s_in, zp_in), _quant(s_w, zp_w, axis)
        b = rng.integers(-20000, 20000, cout).astype(np.int32)
        qb = _quant(np.broadcast_to(s_w * s_in, (cout,)), 0)
        # An output scale that spreads the sums over the 8-bit range (some clamp, most do not).
        spread = float(rng.uniform(20, 200))
        qy = _quant(s_in * float(np.mean(s_w)) * np.sqrt(taps) * spread,
                    int(rng.integers(info.min // 2, info.max // 2 + 1)))
    tensors = [Tensor("x", xshape, dtype, qx), Tensor("w", wshape, dtype, qw, w)]
    if case.bias:
        tensors.append(Tensor("b", (cout,), DType.FLOAT32 if qb is None else DType.INT32, qb, b))
    tensors.append(Tensor("y", (case.n, oh, ow, cout), dtype, qy))
    if depthwise:
        opts = DepthwiseConv2DOptions(pad, sw, sh, case.mult, case.act, dw, dh)
    else:
        opts = Conv2DOptions(pad, sw, sh, case.act, dw, dh)
    ins = (0, 1, 2) if case.bias else (0, 1, -1)
    op = Op(OpType.DEPTHWISE_CONV_2D if depthwise else OpType.CONV_2D, ins, (len(tensors) - 1,), opts)
    graph = Graph(tuple(tensors), (op,), (0,), (len(tensors) - 1,))
    args = (x, graph.tensors[1].data) + ((graph.tensors[2].data,) if case.bias else ())
    return graph, args


REFERENCE = {("conv", False): conv.conv_2d, ("depthwise", False): conv.depthwise_conv_2d,
              ("conv", True): qconv.conv_2d, ("depthwise", True): qconv.depthwise_conv_2d}
_FAST = {("conv", False): fast_conv.conv_2d, ("depthwise", False): fast_conv.depthwise_conv_2d,
         ("conv", True): fast_qconv.conv_2d, ("depthwise", True): fast_qconv.depthwise_conv_2d}


def reference(case: Case) -> np.ndarray:
    graph, args = build(case)
    with fast_select.using("numpy"):
        return np.array(REFERENCE[case.kind, case.dtype != "float32"](Node(0, graph.ops[0], graph), *args))


def fast(case: Case) -> np.ndarray:
    graph, args = build(case)
    out = _FAST[case.kind, case.dtype != "float32"](Node(0, graph.ops[0], graph), *args)
    assert out is not None, "the fast kernel declined a case it should handle"
    return np.array(out)


UNIT_ROUNDOFF = 2.0 ** -24   # float32


def gamma(terms: int) -> float:
    """Higham's gamma_n = n*u / (1 - n*u): a float sum of n terms, in any order (FMA or not, any
    blocking or thread split), is within gamma_n * (the sum of the terms' magnitudes) of the exact sum
    (N. J. Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., 2002, section 3.1)."""
    return terms * UNIT_ROUNDOFF / (1 - terms * UNIT_ROUNDOFF)


def float_bound(case: Case) -> np.ndarray:
    """How far two float32 evaluations of a conv case's outputs may lie apart, whatever their order
    of summation: each is within gamma_(taps+1) * (sum |x*w| + |b|) of the exact value. The
    magnitudes come from the reference kernel on |x|, |w|, |b| with no activation (which only clamps)."""
    plain = dataclasses.replace(case, act=Activation.NONE)
    graph, args = build(plain)
    taps = case.kh * case.kw * (1 if case.kind == "depthwise" else case.cin)
    with fast_select.using("numpy"):
        magnitude = np.array(REFERENCE[case.kind, False](Node(0, graph.ops[0], graph), *map(np.abs, args)), np.float64)
    return 2 * gamma(taps + 1) * magnitude * (1 + gamma(taps + 1))   # the last factor: magnitude's own rounding


def check(case: Case) -> None:
    want, got = reference(case), fast(case)
    assert got.shape == want.shape and got.dtype == want.dtype
    if case.dtype == "float32":
        off = np.abs(got.astype(np.float64) - want)
        bound = float_bound(case)
        assert np.all(off <= bound), f"{case}: off by {off.max():.3g}, where rounding allows {bound.flat[off.argmax()]:.3g}"
    else:
        np.testing.assert_array_equal(got, want)


# Hand-picked cases: MobileNet's layer kinds, each option on its own, and awkward sizes.
_CASES = [
    Case("conv", "float32", h=9, w=9, cin=3, cout=8, stride=(2, 2)),  # a first layer on RGB
    Case("conv", "float32", h=6, w=7, cin=16, cout=24, kh=1, kw=1, act=Activation.RELU6),  # pointwise
    Case("conv", "float32", h=7, w=6, cin=5, cout=6, kh=1, kw=1, stride=(2, 2), bias=False),
    Case("conv", "float32", n=2, h=8, w=5, cin=4, cout=3, kh=3, kw=2, stride=(2, 1), padding=Padding.VALID,
         act=Activation.RELU),
    Case("conv", "float32", h=9, w=9, cin=2, cout=3, dilation=(2, 3), act=Activation.RELU_N1_TO_1),
    Case("conv", "float32", h=1, w=1, cin=33, cout=7, kh=1, kw=1, act=Activation.TANH),
    Case("depthwise", "float32", h=9, w=9, cin=32, act=Activation.RELU6),
    Case("depthwise", "float32", h=10, w=9, cin=8, stride=(2, 2), act=Activation.RELU6),
    Case("depthwise", "float32", n=2, h=6, w=7, cin=3, mult=3, bias=False),
    Case("depthwise", "float32", h=8, w=8, cin=4, mult=2, dilation=(2, 2), padding=Padding.VALID),
    Case("depthwise", "float32", h=5, w=6, cin=5, kh=5, kw=3, stride=(1, 3), act=Activation.TANH),
    Case("depthwise", "float32", h=11, w=13, cin=6, stride=(2, 3), dilation=(1, 2)),  # 3x3, strided across
    Case("conv", "int8", h=9, w=9, cin=3, cout=8, stride=(2, 2), act=Activation.RELU6),
    Case("conv", "int8", h=6, w=7, cin=16, cout=24, kh=1, kw=1, act=Activation.RELU6),
    Case("conv", "int8", h=5, w=5, cin=10, cout=6, kh=1, kw=1, per_channel=False, bias=False),
    Case("conv", "int8", n=2, h=7, w=6, cin=4, cout=5, stride=(1, 2), padding=Padding.VALID, per_channel=False),
    Case("conv", "int8", h=9, w=8, cin=3, cout=4, dilation=(3, 2), act=Activation.RELU),
    Case("conv", "int8", h=4, w=4, cin=120, cout=5),  # K = 1080: the GEMM sums in exact chunks
    Case("depthwise", "int8", h=9, w=9, cin=32, act=Activation.RELU6),
    Case("depthwise", "int8", h=10, w=9, cin=16, stride=(2, 2), act=Activation.RELU6),
    Case("depthwise", "int8", n=2, h=5, w=7, cin=3, mult=2, per_channel=False, bias=False),
    Case("depthwise", "int8", h=9, w=9, cin=4, mult=3, dilation=(2, 2), padding=Padding.VALID),
    Case("depthwise", "int8", h=7, w=5, cin=6, kh=5, kw=5, stride=(3, 1), act=Activation.RELU_N1_TO_1),
    Case("depthwise", "int8", h=12, w=11, cin=5, stride=(1, 2), dilation=(2, 1), padding=Padding.VALID),
    Case("conv", "uint8", h=7, w=7, cin=3, cout=4, stride=(2, 2), act=Activation.RELU6),
    Case("conv", "uint8", h=5, w=5, cin=12, cout=8, kh=1, kw=1),
    Case("conv", "uint8", h=4, w=4, cin=40, cout=3),  # K = 360: uint8 products need exact chunks too
    Case("depthwise", "uint8", h=8, w=9, cin=8, act=Activation.RELU6),
    Case("depthwise", "uint8", n=2, h=9, w=6, cin=3, mult=2, stride=(2, 2), padding=Padding.VALID),
]


@pytest.mark.parametrize("case", _CASES, ids=lambda c: f"{c.kind}-{c.dtype}-{c.h}x{c.w}x{c.cin}")
def test_fast_kernel_matches_reference(case):
    check(case)


@st.composite
def cases(draw):
    kind = draw(st.sampled_from(["conv", "depthwise"]))
    k = draw(st.tuples(st.integers(1, 4), st.integers(1, 4)))
    return Case(
        kind, draw(st.sampled_from(sorted(_DTYPES))), n=draw(st.integers(1, 2)),
        h=draw(st.integers(1, 11)), w=draw(st.integers(1, 11)), cin=draw(st.integers(1, 9)),
        cout=draw(st.integers(1, 9)), kh=k[0], kw=k[1],
        stride=draw(st.tuples(st.integers(1, 3), st.integers(1, 3))),
        dilation=draw(st.tuples(st.integers(1, 2), st.integers(1, 2))),
        padding=draw(st.sampled_from([Padding.SAME, Padding.VALID])),
        mult=draw(st.integers(1, 3)) if kind == "depthwise" else 1,
        act=draw(st.sampled_from(_ACTS)), per_channel=draw(st.booleans()), bias=draw(st.booleans()),
        seed=draw(st.integers(0, 2**16)))


@settings(max_examples=60, deadline=None)
@given(cases())
def test_fast_kernel_matches_reference_generated(case):
    if case.dtype != "float32" and case.act is Activation.TANH:
        case = dataclasses.replace(case, act=Activation.RELU)  # 8-bit convolutions fuse clamps only
    check(case)


@dataclasses.dataclass(frozen=True)
class PoolCase:
    kind: str  # "avg" or "max"
    dtype: str
    n: int = 1
    h: int = 7
    w: int = 7
    c: int = 5
    kh: int = 2
    kw: int = 2
    stride: tuple[int, int] = (2, 2)
    padding: Padding = Padding.SAME
    act: Activation = Activation.NONE
    seed: int = 0


def pool_graph(case: PoolCase):
    rng = np.random.default_rng(case.seed)
    dtype = _DTYPES[case.dtype]
    (sh, sw), pad = case.stride, case.padding
    if pad is Padding.VALID and (case.h < case.kh or case.w < case.kw):
        pad = Padding.SAME
    shape = (case.n, case.h, case.w, case.c)
    if case.dtype == "float32":
        x, q = (rng.standard_normal(shape) * 3).astype(np.float32), None
    else:
        info = np.iinfo(dtype.np)
        x = rng.integers(info.min, info.max + 1, shape).astype(dtype.np)
        q = _quant(float(rng.uniform(0.01, 0.1)), int(rng.integers(info.min, info.max + 1)))
    oh, ow = out_size(pad, case.h, case.kh, sh), out_size(pad, case.w, case.kw, sw)
    op = Op(OpType.AVERAGE_POOL_2D if case.kind == "avg" else OpType.MAX_POOL_2D, (0,), (1,),
            Pool2DOptions(pad, sw, sh, case.kw, case.kh, case.act))
    graph = Graph((Tensor("x", shape, dtype, q), Tensor("y", (case.n, oh, ow, case.c), dtype, q)), (op,), (0,), (1,))
    return graph, x


def check_pool(case: PoolCase) -> None:
    module = pool if case.dtype == "float32" else qpool
    reference = module.average_pool_2d if case.kind == "avg" else module.max_pool_2d
    graph, x = pool_graph(case)
    with fast_select.using("numpy"):
        want = np.array(reference(Node(0, graph.ops[0], graph), x))
    run = fast_pool.average_pool_2d if case.kind == "avg" else fast_pool.max_pool_2d
    got = run(Node(0, graph.ops[0], graph), x)
    assert got is not None and got.dtype == want.dtype
    if case.dtype == "float32" and case.kind == "avg":
        # a window's sum (kh*kw terms) then one division: each result within gamma_(kh*kw+1) of
        # the exact mean of the magnitudes (gamma: see float_bound)
        plain, _ = pool_graph(dataclasses.replace(case, act=Activation.NONE))   # an activation only clamps
        with fast_select.using("numpy"):
            magnitude = np.array(reference(Node(0, plain.ops[0], plain), np.abs(x)), np.float64)
        bound = 2 * gamma(case.kh * case.kw + 1) * magnitude * (1 + gamma(case.kh * case.kw + 1))
        assert np.all(np.abs(got.astype(np.float64) - want) <= bound), case
    else:   # a maximum is exact in any order, and so are the integer kernels
        np.testing.assert_array_equal(got, want)


_POOL_CASES = [
    PoolCase("avg", "float32", h=7, w=7, c=16, kh=7, kw=7, stride=(1, 1), padding=Padding.VALID),  # global
    PoolCase("avg", "int8", h=7, w=7, c=16, kh=7, kw=7, stride=(1, 1), padding=Padding.VALID),
    PoolCase("avg", "uint8", h=5, w=6, c=3, kh=3, kw=3, stride=(1, 1), act=Activation.RELU6),
    PoolCase("max", "float32", n=2, h=9, w=8, c=4, kh=3, kw=3, stride=(2, 2), act=Activation.RELU),
    PoolCase("max", "int8", h=9, w=8, c=4, kh=3, kw=2, stride=(2, 1), padding=Padding.VALID),
    PoolCase("max", "uint8", h=4, w=5, c=2, kh=2, kw=2, stride=(2, 2)),
    PoolCase("avg", "float32", h=5, w=5, c=3, kh=4, kw=4, stride=(3, 3), act=Activation.TANH),
]


@pytest.mark.parametrize("case", _POOL_CASES, ids=lambda c: f"{c.kind}-{c.dtype}-{c.kh}x{c.kw}")
def test_fast_pool_matches_reference(case):
    check_pool(case)


@settings(max_examples=30, deadline=None)
@given(st.builds(PoolCase, st.sampled_from(["avg", "max"]), st.sampled_from(sorted(_DTYPES)), st.integers(1, 2),
                 st.integers(1, 9), st.integers(1, 9), st.integers(1, 5), st.integers(1, 4), st.integers(1, 4),
                 st.tuples(st.integers(1, 3), st.integers(1, 3)), st.sampled_from([Padding.SAME, Padding.VALID]),
                 st.sampled_from(_ACTS[:4]), st.integers(0, 2**16)))
def test_fast_pool_matches_reference_generated(case):
    check_pool(case)


_SPLIT_CASES = [Case("depthwise", "float32", h=12, w=9, cin=8, act=Activation.RELU6),
                Case("conv", "float32", h=12, w=9, cin=3, cout=5, stride=(2, 2)),  # split by rows
                Case("conv", "float32", h=3, w=3, cin=8, cout=20, act=Activation.RELU),  # by columns
                Case("conv", "float32", h=2, w=3, cin=8, cout=21, kh=1, kw=1, bias=False),
                Case("depthwise", "int8", h=12, w=9, cin=8, mult=2),
                Case("conv", "int8", h=12, w=9, cin=8, cout=5, kh=1, kw=1),
                Case("conv", "int8", h=3, w=2, cin=7, cout=19, act=Activation.RELU6),
                Case("conv", "uint8", h=3, w=3, cin=5, cout=16, kh=1, kw=1),
                Case("avg", "int8"), Case("max", "float32")]


def test_split_work_gives_the_same_bits_on_any_thread_count(monkeypatch):
    """With every kernel forced to split its work (by rows or by columns), on one thread or two,
    8-bit results are the reference's and float ones within its rounding, and the thread count
    never changes a bit."""
    monkeypatch.setattr(fast_conv, "MIN_SPLIT", 0)
    monkeypatch.setattr(fast_gemm, "MIN_SPLIT_MACS", 0)
    monkeypatch.setattr(fast_jit, "STALL_SECONDS", 1e9)  # never fall back to one thread here
    monkeypatch.setitem(fast_jit._contended, "until", 0.0)
    before = parallel.num_threads()
    results = []
    try:
        for threads in (1, 2):
            parallel.set_num_threads(threads)
            results.append([])
            for case in _SPLIT_CASES:
                if case.kind in ("avg", "max"):
                    check_pool(PoolCase(case.kind, case.dtype, h=12, w=9, c=6, kh=3, kw=3))
                    continue
                check(case)
                graph, args = build(case)
                node, kernel = Node(0, graph.ops[0], graph), _FAST[case.kind, case.dtype != "float32"]
                for _ in range(3):  # a loop's first two calls run on one thread (fast_jit.run)
                    out = np.array(kernel(node, *args))
                results[-1].append(out)
    finally:
        parallel.set_num_threads(before)
    for one, two in zip(*results):
        np.testing.assert_array_equal(one, two)


def test_a_stalled_parallel_loop_falls_back_to_one_thread(monkeypatch):
    """Loops on two threads slower than their one-thread time, several in a row, mark the machine
    contended; loops then run on one thread (same results) until the back-off ends."""
    monkeypatch.setattr(fast_jit, "STALL_SECONDS", -1.0)  # every parallel loop counts as a stall
    # a window and a back-off no busy host outlasts: the test counts stalls, it never races the clock
    monkeypatch.setattr(fast_jit, "WINDOW_SECONDS", 1e9)
    monkeypatch.setattr(fast_jit, "BACK_OFF_SECONDS", 1e9)
    monkeypatch.setattr(fast_conv, "MIN_SPLIT", 0)
    monkeypatch.setitem(fast_jit._contended, "until", 0.0)
    monkeypatch.setitem(fast_jit._contended, "stalls", collections.deque(maxlen=fast_jit.STALLS))
    case = Case("depthwise", "float32", h=12, w=9, cin=8)
    graph, args = build(case)
    node = Node(0, graph.ops[0], graph)
    before = parallel.num_threads()
    parallel.set_num_threads(2)
    try:
        outs = [np.array(fast_conv.depthwise_conv_2d(node, *args)) for _ in range(2)]  # one thread
        for _ in range(fast_jit.STALLS):  # stalls on two threads, within the window
            assert fast_jit._contended["until"] == 0.0   # not marked contended yet
            outs.append(np.array(fast_conv.depthwise_conv_2d(node, *args)))
        assert fast_jit._contended["until"] > 0.0        # marked: one thread until the back-off ends
        outs.append(np.array(fast_conv.depthwise_conv_2d(node, *args)))  # back on one thread
    finally:
        parallel.set_num_threads(before)
    for out in outs[1:]:
        np.testing.assert_array_equal(out, outs[0])


def test_the_fast_path_is_the_default_and_numpy_selects_the_reference(monkeypatch):
    monkeypatch.delenv(fast_select.ENV_VAR, raising=False)
    monkeypatch.setitem(fast_select._state, "choice", None)  # as in a fresh process
    case = Case("depthwise", "int8", h=40, w=40, cin=16)  # 230K multiply-adds
    graph, args = build(case)
    node = Node(0, graph.ops[0], graph)
    assert fast_select.kernels() == "fast"
    assert fast_select.conv_work(node, args[0], args[1]) >= fast_select.MIN_WORK
    qconv.depthwise_conv_2d(node, *args)
    assert "fast_taps" in node.cache  # the numba kernel ran
    other = Node(0, graph.ops[0], graph)
    with fast_select.using("numpy"):
        assert fast_select.kernels() == "numpy" and fast_select.fast("fast_qconv") is None
        qconv.depthwise_conv_2d(other, *args)
    assert "fast_taps" not in other.cache and fast_select.kernels() == "fast"


def test_tiny_ops_stay_on_the_reference_kernels(monkeypatch):
    """Below MIN_WORK the NumPy kernel runs (a program of tiny models never imports numba)."""
    monkeypatch.setitem(fast_select._state, "choice", "fast")
    case = Case("conv", "float32", h=8, w=8, cin=3, cout=8)  # 14K multiply-adds
    graph, args = build(case)
    node = Node(0, graph.ops[0], graph)
    assert fast_select.conv_work(node, args[0], args[1]) == 8 * 8 * 8 * 3 * 3 * 3  # pixels * Cout * KH*KW*Cin
    conv.conv_2d(node, *args)
    assert not any(key.startswith("fast_") for key in node.cache)


def test_kernel_choice_from_the_environment(monkeypatch):
    monkeypatch.setenv(fast_select.ENV_VAR, "NumPy")
    assert fast_select._from_env() == "numpy"
    monkeypatch.setenv(fast_select.ENV_VAR, "")
    assert fast_select._from_env() == "fast"
    monkeypatch.setenv(fast_select.ENV_VAR, "gpu")
    with pytest.warns(UserWarning, match="DTB_KERNELS"):
        assert fast_select._from_env() == "fast"
    with pytest.raises(ValueError):
        fast_select.set_kernels("gpu")


def test_without_numba_the_reference_runs(monkeypatch):
    monkeypatch.setitem(fast_select._state, "choice", "fast")
    monkeypatch.setitem(fast_select._state, "modules", {})
    monkeypatch.setitem(fast_select._state, "warned", False)
    monkeypatch.setattr(fast_select.importlib.util, "find_spec", lambda name: None)
    with pytest.warns(RuntimeWarning, match="numba"):
        assert fast_select.fast("fast_conv") is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once only
        assert fast_select.fast("fast_qconv") is None
