"""Comparisons, logic, selection, elementwise maths, arg/reductions and normalisations held to LiteRT's
reference kernels: single-op models written with the testbed's own writer, run by both over several
shapes (broadcasting, ranks 1-5, ties, negative and zero values) and every element type each op takes.
Float outputs agree within 1e-5 of their range, everything else (8-bit included) bit for bit."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

from runtime.ir.errors import ModelError
from runtime.ir.graph import DType, Graph, QuantParams, Tensor
from runtime.interpreter.api import Interpreter
from runtime.ir.optypes import OpType
from runtime.ir.options import (Activation, ArgMaxOptions, ArgMinOptions, CumsumOptions, FakeQuantOptions,
                             GeluOptions, L2NormOptions, LocalResponseNormalizationOptions, Padding,
                             Pool2DOptions, ReducerOptions)
from runtime.model.tflite_write import save
from tests.delegate_kit import single_op
from tests.litert_oracle import available, run_litert

F32, F64, I8, U8, I16, U16, I32, U32, I64, BOOL = (
    DType.FLOAT32, DType.FLOAT64, DType.INT8, DType.UINT8, DType.INT16, DType.UINT16, DType.INT32, DType.UINT32,
    DType.INT64, DType.BOOL)
REL_TOL = 1e-5

needs_litert = pytest.mark.skipif(not available(), reason="LiteRT (ai-edge-litert) is not installed")


# -- building single-op models ---------------------------------------------------------------------


def ten(name, shape, dtype=F32, q=None, data=None) -> Tensor:
    """A tensor; `q` = (scale, zero point) for 8-bit data; `data` makes it a constant."""
    quant = QuantParams((float(q[0]),), (int(q[1]),)) if q else None
    if data is not None:
        data = np.asarray(data, dtype.np).reshape(shape)
    return Tensor(name, tuple(shape), dtype, quant, data)


def model(op_type, inputs, out, options=None, version=1) -> Graph:
    return single_op(op_type, inputs, out, options, version)[0]


def values(rng, shape, dtype, lo=-4, hi=4):
    """Test data: floats on a coarse grid (so that ties and exact zeros occur), small integers."""
    if dtype is BOOL:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.np.kind == "f":
        return (rng.integers(lo * 4, hi * 4 + 1, shape) / 4).astype(dtype.np)
    info = np.iinfo(dtype.np)
    return rng.integers(max(lo, info.min), min(hi, info.max) + 1, shape).astype(dtype.np)


def feed(rng, graph, **ranges):
    return {t: values(rng, graph.tensors[t].shape, graph.tensors[t].dtype, **ranges) for t in graph.inputs}


def _q8(rng, dtype):
    scale = float(rng.uniform(0.01, 0.2))
    zp = int(rng.integers(-20, 20)) + (128 if dtype is U8 else 0)
    return scale, zp


def _random8(rng, shape, dtype):
    lo, hi = (-128, 127) if dtype is I8 else (0, 255)
    return rng.integers(lo, hi + 1, shape).astype(dtype.np)


# -- running both ----------------------------------------------------------------------------------


def ours(graph_path, feeds):
    it = Interpreter(model_path=graph_path)
    it.allocate_tensors()
    for index, value in feeds.items():
        it.set_tensor(index, value)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


# Ops BuiltinRefOpResolver lacks: LiteRT's own kernels answer for them instead.
NOT_IN_REF_RESOLVER = {OpType.CEIL, OpType.ROUND}


def agree(cases):
    """Run every (label, graph, feeds) through the testbed and LiteRT (one child process) and
    compare; returns LiteRT's outputs by label."""
    with tempfile.TemporaryDirectory() as tmp:
        jobs = []
        for k, (label, graph, feeds) in enumerate(cases):
            path = os.path.join(tmp, f"case{k}.tflite")
            save(graph, path)
            jobs.append((path, feeds))
        results = run_litert(jobs, resolvers=("BUILTIN_REF", "BUILTIN_WITHOUT_DEFAULT_DELEGATES"))
        wanted = {}
        for (label, graph, feeds), (path, _), want in zip(cases, jobs, results):
            assert not isinstance(want, str), f"{label}: LiteRT refused it: {want}"
            fallback = str(want["resolver"]) != "BUILTIN_REF"
            assert fallback == (graph.ops[0].type in NOT_IN_REF_RESOLVER), (label, str(want["resolver"]))
            ref = want[f"0:{graph.outputs[0]}"]
            got = ours(path, feeds)
            assert (got.dtype, got.shape) == (ref.dtype, ref.shape), (label, got.dtype, got.shape, ref.dtype, ref.shape)
            if got.dtype.kind == "f":
                span = float(np.ptp(ref)) if ref.size else 0.0
                err = float(np.nanmax(np.abs(got.astype(np.float64) - ref))) if ref.size else 0.0
                assert np.array_equal(np.isnan(got), np.isnan(ref)), f"{label}: NaNs differ"
                assert err <= REL_TOL * max(span, 1e-3), f"{label}: max error {err:.3g}, range {span:.3g}"
            else:
                np.testing.assert_array_equal(got, ref, err_msg=label)
            wanted[label] = ref
        return wanted


# -- the cases, by group ---------------------------------------------------------------------------

# (shape of a, shape of b): same shapes, a vector, both sides broadcasting, a scalar, rank 1 and 5.
PAIRS = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((1, 3, 1), (2, 1, 5)), ((), (3,)), ((6,), (6,)),
         ((2, 1, 3, 1, 2), (1, 2, 1, 4, 1))]
COMPARISONS = [OpType.LESS, OpType.LESS_EQUAL, OpType.GREATER, OpType.GREATER_EQUAL, OpType.EQUAL,
               OpType.NOT_EQUAL]


def _compare_cases(rng):
    cases = []
    for op in COMPARISONS:
        types = [F32, I32, I64] + ([I16] if op is not OpType.NOT_EQUAL else []) + \
                ([BOOL] if op in (OpType.EQUAL, OpType.NOT_EQUAL) else [])
        for dtype in types:
            for a, b in PAIRS:
                g = model(op, [ten("a", a, dtype), ten("b", b, dtype)], ten("y", np.broadcast_shapes(a, b), BOOL))
                cases.append((f"{op.name} {dtype.name} {a} {b}", g, feed(rng, g, lo=-2, hi=2)))
    return cases


def _compare8_cases(rng):
    """8-bit comparisons rescale both sides onto a common grid first: different scales, zero points
    and element types, and equal real values on different grids."""
    cases = []
    for op in COMPARISONS:
        for dtype in (I8, U8):
            for k, (a, b) in enumerate(PAIRS[:4]):
                qa, qb = _q8(rng, dtype), _q8(rng, dtype)
                if k == 0:  # the same real grid shifted: many exactly equal values
                    qb = (qa[0], qa[1] + 3)
                if k == 1:  # scales in the ratio 2: every other step of a lies on b's grid
                    qb = (qa[0] * 2, qb[1])
                g = model(op, [ten("a", a, dtype, qa), ten("b", b, dtype, qb)],
                          ten("y", np.broadcast_shapes(a, b), BOOL), version=2)
                lo, hi = (-128, 127) if dtype is I8 else (0, 255)
                feeds = {0: rng.integers(lo, hi + 1, a).astype(dtype.np),
                         1: rng.integers(lo, hi + 1, b).astype(dtype.np)}
                if k == 0:
                    feeds[1] = np.clip(feeds[0].astype(int) + 3 * rng.integers(0, 2, a), lo, hi).astype(dtype.np)
                cases.append((f"{op.name} {dtype.name} {a} {b} q{qa}/{qb}", g, feeds))
            # Two constants (folded when tensors are allocated) take the integer kernel too.
            lo = 0 if dtype is U8 else -10
            qa, qb = (0.1, lo + 5), (0.2, lo + 6)
            g = model(op, [ten("a", (5,), dtype, qa, data=np.arange(lo, lo + 5)),
                           ten("b", (5,), dtype, qb, data=np.arange(lo, lo + 10, 2))], ten("y", (5,), BOOL), version=2)
            cases.append((f"{op.name} {dtype.name} constants", g, {}))
    return cases


def _logic_select_cases(rng):
    cases = []
    for op in (OpType.LOGICAL_AND, OpType.LOGICAL_OR):
        for a, b in PAIRS:
            g = model(op, [ten("a", a, BOOL), ten("b", b, BOOL)], ten("y", np.broadcast_shapes(a, b), BOOL))
            cases.append((f"{op.name} {a} {b}", g, feed(rng, g)))
    for shape in [(5,), (2, 3, 4), ()]:
        g = model(OpType.LOGICAL_NOT, [ten("a", shape, BOOL)], ten("y", shape, BOOL))
        cases.append((f"LOGICAL_NOT {shape}", g, feed(rng, g)))
    # SELECT: same shapes, a scalar condition, one condition per row; SELECT_V2 also broadcasts.
    for dtype, q in ((F32, None), (I32, None), (I64, None), (BOOL, None), (I8, (0.05, 3)), (U8, (0.1, 128)),
                     (I16, None)):
        for cond, x in [((2, 3, 4), (2, 3, 4)), ((), (3, 4)), ((3,), (3, 2, 2)), ((1,), (1, 1))]:
            for op in (OpType.SELECT, OpType.SELECT_V2):
                if op is OpType.SELECT_V2 and cond == (3,):
                    continue  # SELECT_V2 broadcasts from the right: not a per-row condition
                g = model(op, [ten("c", cond, BOOL), ten("x", x, dtype, q), ten("y", x, dtype, q)],
                          ten("o", x, dtype, q))
                cases.append((f"{op.name} {dtype.name} {cond} {x}", g, feed(rng, g)))
    for cond, x, y in [((2, 1, 4), (1, 3, 1), (4,)), ((1, 2, 1, 3, 1), (2, 1, 1, 1, 2), (1, 1, 4, 1, 1)),
                       ((3, 1), (), (1, 5))]:
        out = np.broadcast_shapes(cond, x, y)
        g = model(OpType.SELECT_V2, [ten("c", cond, BOOL), ten("x", x), ten("y", y)], ten("o", out))
        cases.append((f"SELECT_V2 broadcast {cond} {x} {y}", g, feed(rng, g)))
    return cases


def _arg_cases(rng):
    cases = []
    shapes = [(7,), (3, 5), (2, 3, 4), (2, 1, 3, 4), (2, 3, 1, 2, 3)]
    for op, cls in ((OpType.ARG_MAX, ArgMaxOptions), (OpType.ARG_MIN, ArgMinOptions)):
        for dtype, q in ((F32, None), (I32, None), (BOOL, None), (I8, (0.1, -3)), (U8, (0.2, 130))):
            for shape in shapes:
                for axis in sorted({0, len(shape) - 1, -1, -len(shape)}):
                    out_type = I64 if (axis + len(shape)) % 2 else I32
                    axis_type = I64 if axis < 0 else I32
                    a = axis % len(shape)
                    g = model(op, [ten("x", shape, dtype, q), ten("axis", (1,), axis_type, data=[axis])],
                              ten("i", shape[:a] + shape[a + 1:], out_type), cls(out_type.code), version=2)
                    cases.append((f"{op.name} {dtype.name} {shape} axis {axis}", g, feed(rng, g, lo=-2, hi=2)))
    return cases


def _rounding_cases(rng):
    cases = []
    ties = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.25, 0.75, 3.0, -3.0, 0.0, 1e6 + 0.5], np.float32)
    for op in (OpType.FLOOR, OpType.CEIL, OpType.ROUND, OpType.SQUARE, OpType.SIN, OpType.COS):
        for shape in [(12,), (2, 3, 4), (1, 2, 3, 2, 2)]:
            g = model(op, [ten("x", shape)], ten("y", shape))
            x = np.resize(ties, shape) if shape == (12,) else values(rng, shape, F32) * 1.3
            cases.append((f"{op.name} {shape}", g, {0: x.astype(np.float32)}))
    for dtype in (F32, I32, I16, I8):
        for a, b in PAIRS:
            for op in (OpType.FLOOR_DIV, OpType.FLOOR_MOD):
                g = model(op, [ten("a", a, dtype), ten("b", b, dtype)], ten("y", np.broadcast_shapes(a, b), dtype))
                x = values(rng, a, dtype, -9, 9)
                y = values(rng, b, dtype, -4, 4)
                y[y == 0] = 3
                cases.append((f"{op.name} {dtype.name} {a} {b}", g, {0: x, 1: y}))
    for a, b in PAIRS[:3]:  # FLOOR_MOD also takes int64
        g = model(OpType.FLOOR_MOD, [ten("a", a, I64), ten("b", b, I64)], ten("y", np.broadcast_shapes(a, b), I64))
        y = values(rng, b, I64, -5, 5)
        y[y == 0] = -2
        cases.append((f"FLOOR_MOD INT64 {a} {b}", g, {0: values(rng, a, I64, -20, 20), 1: y}))
    for a, b in PAIRS:
        g = model(OpType.POW, [ten("a", a), ten("b", b)], ten("y", np.broadcast_shapes(a, b)))
        feeds = {0: np.abs(values(rng, a, F32)) + 0.25, 1: values(rng, b, F32, -2, 2)}  # no NaN: positive bases
        cases.append((f"POW FLOAT32 {a} {b}", g, feeds))
        g = model(OpType.POW, [ten("a", a, I32), ten("b", b, I32)], ten("y", np.broadcast_shapes(a, b), I32))
        cases.append((f"POW INT32 {a} {b}", g, {0: values(rng, a, I32, -5, 5), 1: values(rng, b, I32, 0, 4)}))
    # int32 powers beyond int32 come out as INT32_MIN (the x86 conversion of an out-of-range double).
    g = model(OpType.POW, [ten("a", (6,), I32), ten("b", (6,), I32)], ten("y", (6,), I32))
    cases.append(("POW INT32 overflow", g, {0: np.array([2, 3, -2, -3, 7, -1], np.int32),
                                            1: np.array([31, 40, 31, 21, 3, 5], np.int32)}))
    return cases


def _misc_cases(rng):
    cases = []
    for dtype in (F32, I32, F64):
        g = model(OpType.SIGN, [ten("x", (3, 4), dtype)], ten("y", (3, 4), dtype))
        cases.append((f"SIGN {dtype.name}", g, feed(rng, g, lo=-2, hi=2)))
    for shape, dtype in [((6,), F32), ((2, 3, 4), F32), ((2, 5), F64)]:
        g = model(OpType.ATAN2, [ten("y", shape, dtype), ten("x", shape, dtype)], ten("o", shape, dtype))
        cases.append((f"ATAN2 {dtype.name} {shape}", g, feed(rng, g)))
    for dtype in (F32, I32):
        for n in (2, 3, 5):
            g = model(OpType.ADD_N, [ten(f"x{k}", (2, 3, 4), dtype) for k in range(n)], ten("y", (2, 3, 4), dtype))
            cases.append((f"ADD_N {dtype.name} x{n}", g, feed(rng, g)))
    for dtype in (F32, I32, I64):
        g = model(OpType.ZEROS_LIKE, [ten("x", (2, 5), dtype)], ten("y", (2, 5), dtype))
        cases.append((f"ZEROS_LIKE {dtype.name}", g, feed(rng, g)))
    for dtype, q in ((F32, None), (I8, "random"), (U8, "random")):
        for shape in [(1, 4, 4, 3), (50,)]:
            qi, qo = (_q8(rng, dtype), _q8(rng, dtype)) if q else (None, None)
            g = model(OpType.RELU_0_TO_1, [ten("x", shape, dtype, qi)], ten("y", shape, dtype, qo))
            feeds = {0: _random8(rng, shape, dtype)} if q else {0: values(rng, shape, F32, -2, 2) / 2}
            cases.append((f"RELU_0_TO_1 {dtype.name} {shape}", g, feeds))
    for dtype in (I8, U8, I16, U16, I32, U32):
        info = np.iinfo(dtype.np)
        for a, b in PAIRS[:4]:
            out = np.broadcast_shapes(a, b)
            g = model(OpType.BITWISE_XOR, [ten("a", a, dtype), ten("b", b, dtype)], ten("y", out, dtype))
            feeds = {0: rng.integers(info.min, info.max, a, endpoint=True).astype(dtype.np),
                     1: rng.integers(info.min, info.max, b, endpoint=True).astype(dtype.np)}
            cases.append((f"BITWISE_XOR {dtype.name} {a} {b}", g, feeds))
            g = model(OpType.RIGHT_SHIFT, [ten("a", a, dtype), ten("b", b, dtype)], ten("y", out, dtype))
            shifts = rng.integers(max(-3, info.min), 8 * dtype.np.itemsize + 4, b).astype(dtype.np)
            cases.append((f"RIGHT_SHIFT {dtype.name} {a} {b}", g, {0: feeds[0], 1: shifts}))
    for lo, hi, bits in ((-1.0, 1.0, 8), (-0.3, 2.7, 8), (0.0, 6.0, 4), (-5.0, -0.5, 8), (0.5, 3.0, 2)):
        g = model(OpType.FAKE_QUANT, [ten("x", (4, 25))], ten("y", (4, 25)), FakeQuantOptions(lo, hi, bits), version=2)
        cases.append((f"FAKE_QUANT [{lo}, {hi}] {bits} bits", g, {0: np.linspace(lo - 1, hi + 1, 100, dtype=np.float32)
                                                                   .reshape(4, 25)}))
    return cases


def _gelu_cases(rng):
    cases = []
    for approximate in (False, True):
        for shape in [(1, 4, 4, 8), (300,)]:
            g = model(OpType.GELU, [ten("x", shape)], ten("y", shape), GeluOptions(approximate))
            x = rng.standard_normal(shape).astype(np.float32) * 4
            cases.append((f"GELU FLOAT32 approximate={approximate} {shape}", g, {0: x}))
        for dtype in (I8, U8):
            for k in range(3):
                qi, qo = _q8(rng, dtype), _q8(rng, dtype)
                g = model(OpType.GELU, [ten("x", (256,), dtype, qi)], ten("y", (256,), dtype, qo),
                          GeluOptions(approximate), version=2)
                every = np.arange(256) - (128 if dtype is I8 else 0)  # every input code once
                cases.append((f"GELU {dtype.name} approximate={approximate} q{qi}->{qo}", g,
                              {0: every.astype(dtype.np)}))
    return cases


def _cumsum_reduce_cases(rng):
    cases = []
    for dtype in (F32, I32, I64):
        for shape, axis in [((7,), 0), ((3, 5), 1), ((3, 5), -2), ((2, 3, 4, 2), 2), ((2, 2, 3, 2, 2), -1)]:
            for exclusive in (False, True):
                for reverse in (False, True):
                    g = model(OpType.CUMSUM, [ten("x", shape, dtype), ten("axis", (), I32, data=axis)],
                              ten("y", shape, dtype), CumsumOptions(exclusive, reverse))
                    cases.append((f"CUMSUM {dtype.name} {shape} axis {axis} ex={exclusive} rev={reverse}", g,
                                  feed(rng, g)))
    reductions = [(OpType.REDUCE_PROD, (F32, I32, I64)), (OpType.REDUCE_ANY, (BOOL,)), (OpType.REDUCE_ALL, (BOOL,))]
    for op, types in reductions:
        for dtype in types:
            for shape, axes in [((2, 3, 4), [1]), ((2, 3, 4), [0, 2]), ((2, 3, 4), [-1, 0]), ((5,), [0]),
                                ((2, 3, 2, 2, 3), [1, 3])]:
                for keep in (False, True):
                    out = tuple(1 if a in [x % len(shape) for x in axes] else d for a, d in enumerate(shape))
                    if not keep:
                        out = tuple(d for a, d in enumerate(shape) if a not in [x % len(shape) for x in axes])
                    g = model(op, [ten("x", shape, dtype), ten("axes", (len(axes),), I32, data=axes)],
                              ten("y", out, dtype), ReducerOptions(keep))
                    feeds = feed(rng, g, lo=-2, hi=2)
                    if dtype is BOOL:  # mostly true, so that REDUCE_ALL is not always false
                        feeds[0] = rng.random(shape) < 0.85
                    cases.append((f"{op.name} {dtype.name} {shape} axes {axes} keep={keep}", g, feeds))
    # int8: every multiplication rescaled by s_in / s_out ** (1/n), rounding each time.
    for shape, axes in [((2, 3, 4), [1]), ((2, 3, 4), [0, 2]), ((6, 5), [1]), ((2, 2, 2, 3), [-1, 1, 0])]:
        for keep in (False, True):
            picked = [a % len(shape) for a in axes]
            out = tuple(1 if a in picked else d for a, d in enumerate(shape)) if keep else \
                tuple(d for a, d in enumerate(shape) if a not in picked)
            qi, qo = (float(rng.uniform(0.02, 0.08)), int(rng.integers(-5, 5))), \
                (float(rng.uniform(0.002, 0.05)), int(rng.integers(-10, 10)))
            g = model(OpType.REDUCE_PROD, [ten("x", shape, I8, qi), ten("axes", (len(axes),), I32, data=axes)],
                      ten("y", out, I8, qo), ReducerOptions(keep), version=2)
            feeds = {0: rng.integers(-40, 40, shape).astype(np.int8)}
            cases.append((f"REDUCE_PROD INT8 {shape} axes {axes} keep={keep} q{qi}->{qo}", g, feeds))
    return cases


def _norm_cases(rng):
    cases = []
    for shape in [(5,), (3, 8), (2, 3, 4), (1, 2, 2, 6), (2, 1, 2, 1, 3)]:
        g = model(OpType.L2_NORMALIZATION, [ten("x", shape)], ten("y", shape), L2NormOptions(), version=2)
        feeds = feed(rng, g)
        feeds[0].reshape(-1, shape[-1])[0] = 0  # an all-zero vector: the 1e-6 floor
        cases.append((f"L2_NORMALIZATION FLOAT32 {shape}", g, feeds))
    for dtype in (I8, U8):
        for shape in [(3, 8), (1, 2, 2, 16), (4, 1), (2, 300)]:
            qi = _q8(rng, dtype)
            qo = (1 / 128, 0 if dtype is I8 else 128)
            g = model(OpType.L2_NORMALIZATION, [ten("x", shape, dtype, qi)], ten("y", shape, dtype, qo),
                      L2NormOptions(), version=2)
            x = _random8(rng, shape, dtype)
            rows = x.reshape(-1, shape[-1])
            rows[0] = qi[1]  # all at the zero point: a sum of squares of 0
            if len(rows) > 1:
                rows[-1] = qi[1]  # one step off it: a sum of 1, the other special case
                rows[-1, 0] = qi[1] + 1
            cases.append((f"L2_NORMALIZATION {dtype.name} {shape} q{qi}", g, {0: x}))
    for radius, bias, alpha, beta in ((2, 1.0, 0.5, 0.75), (1, 2.0, 1e-3, 0.5), (5, 1.0, 1.0, 1.0), (0, 1.5, 1.0, 0.5)):
        g = model(OpType.LOCAL_RESPONSE_NORMALIZATION, [ten("x", (1, 3, 2, 7))], ten("y", (1, 3, 2, 7)),
                  LocalResponseNormalizationOptions(radius, bias, alpha, beta))
        cases.append((f"LRN r={radius} b={bias} a={alpha} beta={beta}", g, feed(rng, g)))
    for pad, k, s, act in ((Padding.VALID, 2, 2, Activation.NONE), (Padding.SAME, 3, 2, Activation.RELU6),
                           (Padding.SAME, 2, 1, Activation.NONE), (Padding.VALID, 3, 1, Activation.RELU)):
        h, w = 7, 6
        oh = -(-h // s) if pad is Padding.SAME else (h - k) // s + 1
        ow = -(-w // s) if pad is Padding.SAME else (w - k) // s + 1
        g = model(OpType.L2_POOL_2D, [ten("x", (2, h, w, 3))], ten("y", (2, oh, ow, 3)),
                  Pool2DOptions(pad, s, s, k, k, act))
        cases.append((f"L2_POOL_2D {pad.name} k{k} s{s} {act.name}", g, feed(rng, g)))
    return cases


GROUPS = {
    "comparisons": _compare_cases, "comparisons_8bit": _compare8_cases, "logic_select": _logic_select_cases,
    "arg_min_max": _arg_cases, "rounding_division_pow": _rounding_cases, "gelu": _gelu_cases,
    "cumsum_reductions": _cumsum_reduce_cases, "normalisation_pooling": _norm_cases, "misc": _misc_cases,
}


@needs_litert
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_matches_litert_reference(group):
    agree(GROUPS[group](np.random.default_rng(len(group))))


# -- where LiteRT's reference kernels behave surprisingly -------------------------------------------


@needs_litert
def test_lrn_sums_one_channel_short_of_tensorflow():
    """LOCAL_RESPONSE_NORMALIZATION in TFLite's reference kernel sums squares over channels
    [c - r, c + r), not TensorFlow's [c - r, c + r]: the testbed follows TFLite."""
    r, bias, alpha, beta = 2, 1.0, 0.5, 0.75
    g = model(OpType.LOCAL_RESPONSE_NORMALIZATION, [ten("x", (1, 1, 1, 6))], ten("y", (1, 1, 1, 6)),
              LocalResponseNormalizationOptions(r, bias, alpha, beta))
    x = np.arange(1, 7, dtype=np.float32).reshape(1, 1, 1, 6)
    want = agree([("lrn", g, {0: x})])["lrn"]
    sq = x.ravel().astype(np.float64) ** 2
    tensorflow = [x.flat[c] * (bias + alpha * sq[max(0, c - r):c + r + 1].sum()) ** -beta for c in range(6)]
    tflite = [x.flat[c] * (bias + alpha * sq[max(0, c - r):c + r].sum()) ** -beta for c in range(6)]
    np.testing.assert_allclose(want.ravel(), tflite, rtol=1e-5)
    assert not np.allclose(want.ravel(), tensorflow, rtol=1e-3)


@needs_litert
def test_unquantized_int16_not_equal_is_refused_as_litert_leaves_it_unwritten():
    """comparisons.cc runs NOT_EQUAL on INT16 only when it is quantized; unquantized, the kernel
    returns without writing its output. The testbed refuses the op instead of inventing values."""
    g = model(OpType.NOT_EQUAL, [ten("a", (64,), I16), ten("b", (64,), I16)], ten("y", (64,), BOOL))
    a = np.arange(64, dtype=np.int16)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ne.tflite")
        save(g, path)
        (got,) = run_litert([(path, {0: a, 1: a + 1})], resolvers=("BUILTIN_REF",))
    assert not isinstance(got, str) and not got["0:2"].all()  # every pair differs, yet not all True
    with pytest.raises(ModelError, match=r"NOT_EQUAL.*INT16"):
        Interpreter(graph=g)


@needs_litert
def test_atan2_checks_only_ranks_and_the_testbed_needs_equal_shapes():
    """atan2.cc compares ranks only and then reads both inputs element for element, past the end of
    a smaller one; the testbed refuses inputs whose shapes differ."""
    g = model(OpType.ATAN2, [ten("y", (2, 3)), ten("x", (1, 3))], ten("o", (2, 3)))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "atan2.tflite")
        save(g, path)
        (got,) = run_litert([(path, {0: np.ones((2, 3), np.float32), 1: np.ones((1, 3), np.float32)})],
                            resolvers=("BUILTIN_REF",))
    assert not isinstance(got, str)  # LiteRT runs it
    with pytest.raises(ModelError, match=r"ATAN2 does not broadcast"):
        Interpreter(graph=g)


@needs_litert
def test_a_zero_divisor_fails_the_run_in_both():
    """FLOOR_DIV refuses a zero divisor of any type, float included (floor_div.cc); FLOOR_MOD only an
    integer one (a float one gives NaN)."""
    div = model(OpType.FLOOR_DIV, [ten("a", (3,)), ten("b", (3,))], ten("y", (3,)))
    mod = model(OpType.FLOOR_MOD, [ten("a", (3,)), ten("b", (3,))], ten("y", (3,)))
    feeds = {0: np.array([1, 2, 3], np.float32), 1: np.array([1, 0, -2], np.float32)}
    with tempfile.TemporaryDirectory() as tmp:
        jobs = []
        for name, g in (("div", div), ("mod", mod)):
            save(g, os.path.join(tmp, f"{name}.tflite"))
            jobs.append((os.path.join(tmp, f"{name}.tflite"), feeds))
        got_div, got_mod = run_litert(jobs, resolvers=("BUILTIN_REF",))
        assert isinstance(got_div, str) and "Division by 0" in got_div
        with pytest.raises(ModelError, match=r"FLOOR_DIV.*division by 0"):
            ours(jobs[0][0], feeds)
        np.testing.assert_array_equal(np.isnan(ours(jobs[1][0], feeds)), np.isnan(got_mod["0:2"]))


# -- damaged models: one ModelError line naming the op and the tensor -------------------------------


def _q(shape, dtype=I8, q=(0.1, 0)):
    return ten("q", shape, dtype, q)


def _cmp(op, a, b, out=BOOL):
    return model(op, [a, b], ten("y", np.broadcast_shapes(a.shape, b.shape), out))


def _arg(shape, axis, options=ArgMaxOptions(I32.code), op=OpType.ARG_MAX, dtype=F32):
    axis = np.atleast_1d(axis)
    return model(op, [ten("x", shape, dtype), ten("a", axis.shape, I32, data=axis)], ten("i", (3,), I32), options)


def _unary_model(op, dtype=F32, shape=(3,), options=None, out_dtype=None):
    return model(op, [ten("x", shape, dtype)], ten("y", shape, out_dtype or dtype), options)


DAMAGED = {
    "arity": (lambda: model(OpType.LESS, [ten("a", (3,)), ten("b", (3,)), ten("c", (3,))], ten("y", (3,), BOOL)),
              r"LESS.*has 3 inputs, 2 expected"),
    "mixed types": (lambda: _cmp(OpType.GREATER, ten("a", (3,)), ten("b", (3,), I32)),
                    r"GREATER.*input types differ: input .*'a' is FLOAT32, input .*'b' is INT32"),
    "comparison output": (lambda: _cmp(OpType.EQUAL, ten("a", (3,)), ten("b", (3,)), out=F32),
                          r"EQUAL.*output .*'y' is FLOAT32, BOOL expected"),
    "no broadcast": (lambda: model(OpType.LESS_EQUAL, [ten("a", (2, 3)), ten("b", (4,))], ten("y", (2, 3), BOOL)),
                     r"LESS_EQUAL.*shapes \[2, 3\] of .*'a'.* and \[4\] of .*'b'.* do not broadcast"),
    "8-bit unquantized": (lambda: _cmp(OpType.LESS, ten("a", (3,), I8), ten("b", (3,), I8)),
                          r"LESS.*'a'.* is INT8 without quantization parameters"),
    "8-bit scale": (lambda: _cmp(OpType.LESS, _q((3,), I8, (1.5, 0)), _q((3,))),
                    r"LESS.*scale 1.5; the 8-bit comparison needs scales below 1"),
    "float64 comparison": (lambda: _cmp(OpType.LESS, ten("a", (3,), F64), ten("b", (3,), F64)),
                           r"LESS.*'a'.* is FLOAT64; LESS takes"),
    "logical on floats": (lambda: _cmp(OpType.LOGICAL_AND, ten("a", (3,)), ten("b", (3,))),
                          r"LOGICAL_AND.*'a'.* is FLOAT32; LOGICAL_AND takes BOOL"),
    "select condition type": (lambda: model(OpType.SELECT, [ten("c", (3,)), ten("x", (3,)), ten("y", (3,))],
                                            ten("o", (3,))),
                              r"SELECT.*'c'.* is FLOAT32; SELECT takes BOOL"),
    "select value types": (lambda: model(OpType.SELECT_V2, [ten("c", (3,), BOOL), ten("x", (3,)), ten("y", (3,), I32)],
                                         ten("o", (3,))),
                           r"SELECT_V2.*input types differ"),
    "select condition shape": (lambda: model(OpType.SELECT, [ten("c", (2,), BOOL), ten("x", (3, 4)), ten("y", (3, 4))],
                                             ten("o", (3, 4))),
                               r"SELECT.*condition .*'c'.* has shape \[2\]"),
    "select_v2 rank 6": (lambda: model(OpType.SELECT_V2, [ten("c", (2, 1, 1, 1, 1, 1), BOOL),
                                                          ten("x", (1, 2, 1, 1, 1, 1)), ten("y", (1, 1, 1, 1, 1, 2))],
                                       ten("o", (2, 2, 1, 1, 1, 2))),
                         r"SELECT_V2.*rank 6; at most 5"),
    "arg axis": (lambda: _arg((3, 4), 2), r"ARG_MAX.*axis 2 is out of range for rank 2"),
    "arg axis count": (lambda: _arg((3, 4), [0, 1], op=OpType.ARG_MIN, options=ArgMinOptions(I32.code)),
                       r"ARG_MIN.*'a'.* \(axis\) has 2 values, 1 expected"),
    "arg output_type": (lambda: _arg((3, 4), 1, options=None),
                        r"ARG_MAX.*options.output_type is 0; INT32 \(2\) or INT64"),
    "arg output declared": (lambda: _arg((3, 4), 1, options=ArgMaxOptions(I64.code)),
                            r"ARG_MAX.*output .*'i' is INT32, INT64 expected"),
    "arg empty axis": (lambda: _arg((3, 0), 1), r"ARG_MAX.*over an empty axis"),
    "arg float64": (lambda: _arg((3, 4), 1, dtype=F64), r"ARG_MAX.*FLOAT64; ARG_MAX takes"),
    "cumsum int64 axis": (lambda: model(OpType.CUMSUM, [ten("x", (3, 4)), ten("a", (), I64, data=1)], ten("y", (3, 4)),
                                        CumsumOptions()),
                          r"CUMSUM.*'a'.* \(axis\) is INT64; INT32 expected"),
    "cumsum axis": (lambda: model(OpType.CUMSUM, [ten("x", (3, 4)), ten("a", (), I32, data=-3)], ten("y", (3, 4)),
                                  CumsumOptions()),
                    r"CUMSUM.*axis -3 is out of range for rank 2"),
    "reduce axis": (lambda: model(OpType.REDUCE_PROD, [ten("x", (3, 4)), ten("a", (1,), I32, data=[5])], ten("y", (3,)),
                                  ReducerOptions()),
                    r"REDUCE_PROD.*reduction axis 5 is out of range for rank 2"),
    "reduce_any floats": (lambda: model(OpType.REDUCE_ANY, [ten("x", (3, 4)), ten("a", (1,), I32, data=[1])],
                                        ten("y", (3,)), ReducerOptions()),
                          r"REDUCE_ANY.*FLOAT32; REDUCE_ANY takes BOOL"),
    "reduce_prod uint8": (lambda: model(OpType.REDUCE_PROD, [_q((3, 4), U8, (0.1, 128)), ten("a", (1,), I32, data=[1])],
                                        _q((3,), U8, (0.1, 128)), ReducerOptions()),
                          r"REDUCE_PROD.*UINT8; REDUCE_PROD takes"),
    "reduce_prod int8 scales": (lambda: model(OpType.REDUCE_PROD, [_q((3, 4), I8, (0.5, 0)),
                                                                   ten("a", (1,), I32, data=[1])],
                                              _q((3,), I8, (1e-12, 0)), ReducerOptions()),
                                r"REDUCE_PROD.*takes factors below 128"),
    "reduce_prod int8 length": (lambda: model(OpType.REDUCE_PROD, [_q((2, 70000)), ten("a", (1,), I32, data=[1])],
                                              _q((2,)), ReducerOptions()),
                                r"REDUCE_PROD.*over 70000 elements; the testbed's step-by-step integer product"),
    "constant zero divisor": (lambda: model(OpType.FLOOR_DIV, [ten("a", (2,), I32), ten("b", (2,), I32, data=[1, 0])],
                                            ten("y", (2,), I32)),
                              r"FLOOR_DIV.*'b'.* \(the divisor\) holds 0"),
    "negative int exponent": (lambda: model(OpType.POW, [ten("a", (3,), I32), ten("b", (3,), I32, data=[1, -1, 2])],
                                            ten("y", (3,), I32)),
                              r"POW.*'b'.* \(the exponent\) is negative"),
    "atan2 shapes": (lambda: model(OpType.ATAN2, [ten("y", (2, 3)), ten("x", (3,))], ten("o", (2, 3))),
                     r"ATAN2.*do(es)? not broadcast"),
    "add_n one input": (lambda: model(OpType.ADD_N, [ten("a", (3,))], ten("y", (3,))),
                        r"ADD_N.*has 1 inputs, at least 2"),
    "add_n shapes": (lambda: model(OpType.ADD_N, [ten("a", (3,)), ten("b", (1,))], ten("y", (3,))),
                     r"ADD_N.*'b'.* has shape \[1\]"),
    "l2 output scale": (lambda: model(OpType.L2_NORMALIZATION, [_q((2, 4))], ten("y", (2, 4), I8, (0.01, 0)),
                                      L2NormOptions()),
                        r"L2_NORMALIZATION.*writes scale 1/128, zero point 0"),
    "l2 activation": (lambda: _unary_model(OpType.L2_NORMALIZATION, shape=(2, 4),
                                           options=L2NormOptions(Activation.RELU)),
                      r"L2_NORMALIZATION.*fused_activation_function is RELU"),
    "lrn rank": (lambda: _unary_model(OpType.LOCAL_RESPONSE_NORMALIZATION, shape=(2, 4, 3),
                                      options=LocalResponseNormalizationOptions(1, 1.0, 1.0, 0.5)),
                 r"LOCAL_RESPONSE_NORMALIZATION.*'x'.* has shape \[2, 4, 3\]; rank 4 expected"),
    "l2 pool int8": (lambda: model(OpType.L2_POOL_2D, [_q((1, 4, 4, 1))], _q((1, 2, 2, 1)),
                                   Pool2DOptions(Padding.VALID, 2, 2, 2, 2)),
                     r"L2_POOL_2D.*INT8; L2_POOL_2D takes FLOAT32"),
    "l2 pool window": (lambda: model(OpType.L2_POOL_2D, [ten("x", (1, 2, 2, 1))], ten("y", (1, 1, 1, 1)),
                                     Pool2DOptions(Padding.VALID, 1, 1, 3, 3)),
                       r"L2_POOL_2D.*filter height 3 exceeds"),
    "fake_quant narrow": (lambda: _unary_model(OpType.FAKE_QUANT, options=FakeQuantOptions(-1.0, 1.0, 8, True)),
                          r"FAKE_QUANT.*narrow_range"),
    "fake_quant bits": (lambda: _unary_model(OpType.FAKE_QUANT, options=FakeQuantOptions(-1.0, 1.0, 0)),
                        r"FAKE_QUANT.*options.num_bits is 0"),
    "fake_quant range": (lambda: _unary_model(OpType.FAKE_QUANT, options=FakeQuantOptions(1.0, 1.0, 8)),
                         r"FAKE_QUANT.*min 1.0 and options.max 1.0"),
    "gelu int32": (lambda: _unary_model(OpType.GELU, I32, options=GeluOptions()), r"GELU.*INT32; GELU takes"),
    "gelu output type": (lambda: _unary_model(OpType.GELU, options=GeluOptions(), out_dtype=I32),
                         r"GELU.*output .*'y' is INT32, FLOAT32 expected"),
    "sin int32": (lambda: _unary_model(OpType.SIN, I32), r"SIN.*INT32; SIN takes FLOAT32"),
    "shift floats": (lambda: _cmp(OpType.RIGHT_SHIFT, ten("a", (3,)), ten("b", (3,)), out=F32),
                     r"RIGHT_SHIFT.*FLOAT32; RIGHT_SHIFT takes"),
    "options of another op": (lambda: _unary_model(OpType.GELU, options=CumsumOptions()),
                              r"GELU.*builtin options are CumsumOptions, GeluOptions expected"),
}


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_damaged_models_fail_with_one_line(case, tmp_path):
    make, pattern = DAMAGED[case]
    graph = make()
    with pytest.raises(ModelError, match=pattern) as caught:
        Interpreter(graph=graph)
    assert "\n" not in str(caught.value)
    path = tmp_path / "damaged.tflite"  # the same, read from a file: the message names it
    save(graph, path)
    with pytest.raises(ModelError, match=pattern) as caught:
        Interpreter(model_path=str(path))
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("op,feeds,pattern", [
    (OpType.FLOOR_MOD, {0: np.array([3, 4], np.int32), 1: np.array([2, 0], np.int32)}, r"FLOOR_MOD.*division by 0"),
    (OpType.POW, {0: np.array([3, 4], np.int32), 1: np.array([2, -1], np.int32)}, r"POW.*exponent is negative"),
])
def test_values_the_kernels_refuse_fail_the_run_with_one_line(op, feeds, pattern):
    g = model(op, [ten("a", (2,), I32), ten("b", (2,), I32)], ten("y", (2,), I32))
    it = Interpreter(graph=g)
    it.allocate_tensors()
    for k, v in feeds.items():
        it.set_tensor(k, v)
    with pytest.raises(ModelError, match=pattern) as caught:
        it.invoke()
    assert "\n" not in str(caught.value)


def test_computed_axes_are_checked_before_the_kernel_runs():
    """An ARG_MAX axis that is a model input is only known when the op runs: checked then."""
    g = model(OpType.ARG_MAX, [ten("x", (3, 4)), ten("a", (1,), I32)], ten("i", (3,), I32), ArgMaxOptions(I32.code))
    it = Interpreter(graph=g)
    it.allocate_tensors()
    it.set_tensor(0, np.arange(12, dtype=np.float32).reshape(3, 4))
    it.set_tensor(1, np.array([1], np.int32))
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(2), [3, 3, 3])
    it.set_tensor(1, np.array([7], np.int32))
    with pytest.raises(ModelError, match=r"ARG_MAX.*axis 7 is out of range for rank 2"):
        it.invoke()


def test_logistic_of_large_inputs_warns_of_nothing_and_saturates_as_tflite():
    """exp(x) of the branch for x < -9 is taken of the clipped x: no overflow reaches a user."""
    import warnings

    from runtime.ops import elementwise as ew

    x = np.array([-200, -100, -88.8, -20, -9.5, -9, 0, 9, 17, 90, 200, 1e30], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = ew.logistic(None, x)
    with np.errstate(over="ignore"):
        old = np.where(x < -9, np.exp(x), np.float32(1) / (np.float32(1) + np.exp(-x)))
    want = np.where(x > np.float32(16.619047164916992), np.float32(1), old).astype(np.float32)
    assert y.dtype == np.float32 and np.array_equal(y, want)
