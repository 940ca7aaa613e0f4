"""Numeric properties: 8-bit kernels stay in range and within TFLite's rounding of the float kernel;
float16 units stay within float16's rounding of float32 (hypothesis, 'ci' profile)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import assume, given, strategies as st

from delegates.kernel import UnitKernel
from runtime.ir.graph import DType, Graph, Op, QuantParams, Tensor
from runtime.interpreter.api import Interpreter
from runtime.ops import Node, select_kernel
from runtime.ops.base import out_size
from runtime.ir.optypes import OpType
from runtime.ir.options import (Activation, AddOptions, Conv2DOptions, DepthwiseConv2DOptions,
                             FullyConnectedOptions, MulOptions, Padding, Pool2DOptions, SoftmaxOptions)
from runtime.ops.quant import RANGES
from runtime.testing.strategies import activations, float_graphs
from sim.numerics import NumericMode, dequantize_array, float_view

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

EIGHT_BIT = st.sampled_from([DType.INT8, DType.UINT8])
F32_ULP = 2.0 ** -24   # float32 unit roundoff


def scales(lo: float, hi: float):
    """Scales 2**e for e in [lo, hi], as float32 values (what a .tflite file can hold)."""
    return st.floats(lo, hi).map(lambda e: float(np.float32(2.0 ** e)))


@st.composite
def filled(draw, shape: tuple[int, ...], dtype: DType, lo: int | None = None, hi: int | None = None) -> np.ndarray:
    """Random codes, or the extremes: all lowest, all highest, or each one of the two."""
    info = np.iinfo(dtype.np)
    lo = info.min if lo is None else lo
    hi = info.max if hi is None else hi
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = "random" if draw(st.booleans()) else draw(st.sampled_from(["lowest", "highest", "extremes"]))
    if kind == "lowest":
        return np.full(shape, lo, dtype.np)
    if kind == "highest":
        return np.full(shape, hi, dtype.np)
    if kind == "extremes":
        return np.where(rng.random(shape) < 0.5, lo, hi).astype(dtype.np)
    return rng.integers(lo, hi + 1, shape).astype(dtype.np)


# Half the cases without a fused activation: with one, coarse scales clamp most outputs to a bound.
fused = st.one_of(st.just(Activation.NONE), activations)


def zero_points(dtype: DType):
    lo, hi = RANGES[dtype.np]
    return st.integers(lo, hi)


@dataclass(frozen=True)
class Case:
    """A one-op quantized graph, the values of its run-time inputs, and the op's error budget."""

    graph: Graph
    feeds: tuple[np.ndarray, ...]
    terms: int = 1            # products summed per output: float32 rounding of the reference


def _tensor(name, shape, dtype, q, data=None):
    return Tensor(name, tuple(shape), dtype, q, data)


def _graph(tensors, op_type, inputs, options, n_live):
    out = len(tensors) - 1
    return Graph(tuple(tensors), (Op(op_type, tuple(inputs), (out,), options),), tuple(range(n_live)), (out,))


@st.composite
def elementwise_cases(draw, op_type: OpType) -> Case:
    dtype = draw(EIGHT_BIT)
    shape = (1, draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    s_out = draw(scales(-12, 4))
    if op_type is OpType.ADD:
        # TFLite rescales inputs at 2**20 resolution of twice the larger input scale; keeping that
        # scale within 2**10 output steps keeps the rescaling error below 2**-8 of an output step.
        s1, s2 = (float(np.float32(s_out * 2.0 ** draw(st.floats(-10, 10)))) for _ in range(2))
        options = AddOptions(draw(fused))
    else:
        # MUL's multiplier s1*s2/s_out up to 2**8: the int32 pre-shift of a 16-bit product cannot wrap.
        s1 = draw(scales(-12, 4))
        s2 = float(np.float32(2.0 ** draw(st.floats(-16, 8)) * s_out / s1))
        options = MulOptions(draw(fused))
    qa, qb, qy = (QuantParams((s,), (draw(zero_points(dtype)),)) for s in (s1, s2, s_out))
    tensors = [_tensor("a", shape, dtype, qa), _tensor("b", shape, dtype, qb), _tensor("y", shape, dtype, qy)]
    return Case(_graph(tensors, op_type, (0, 1), options, 2), (draw(filled(shape, dtype)), draw(filled(shape, dtype))))


def _weights(draw, dtype: DType, shape, channels: int, axis: int, s_in: float, s_out: float):
    """8-bit weights and their int32 bias: int8 symmetric per channel (zero point 0), uint8 per
    tensor with a zero point; multipliers s_in * s_w / s_out in [2**-20, 2]."""
    per_channel = dtype is DType.INT8 and draw(st.booleans())
    n = channels if per_channel else 1
    s_w = tuple(float(np.float32(2.0 ** draw(st.floats(-20, 1)) * s_out / s_in)) for _ in range(n))
    zp = (0,) * n if dtype is DType.INT8 else (draw(zero_points(dtype)),)
    lo = -127 if dtype is DType.INT8 else 0   # TFLite's int8 weights never use -128
    w = draw(filled(shape, dtype, lo=lo))
    qw = QuantParams(s_w, zp, axis if per_channel else 0)
    bias = None
    if draw(st.booleans()):
        limit = draw(st.sampled_from([2**10, 2**20]))
        b = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).integers(-limit, limit + 1, channels)
        sb = tuple(float(np.float32(s_in * s)) for s in s_w)
        bias = (b.astype(np.int32), QuantParams(sb, (0,) * len(sb), 0))
    return w, qw, bias


@st.composite
def conv_cases(draw, op_type: OpType) -> Case:
    dtype = draw(EIGHT_BIT)
    h, w_, cin = draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.integers(1, 4))
    kh, kw, stride = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 2))
    padding = draw(st.sampled_from([Padding.SAME, Padding.VALID])) if h >= kh and w_ >= kw else Padding.SAME
    s_in, s_out = draw(scales(-12, 4)), draw(scales(-8, 4))
    qx, qy = QuantParams((s_in,), (draw(zero_points(dtype)),)), QuantParams((s_out,), (draw(zero_points(dtype)),))
    act = draw(fused)
    if op_type is OpType.CONV_2D:
        cout = draw(st.integers(1, 4))
        wshape, axis, terms = (cout, kh, kw, cin), 0, kh * kw * cin
        options = Conv2DOptions(padding, stride, stride, act)
    else:
        mult = draw(st.integers(1, 2))
        cout = cin * mult
        wshape, axis, terms = (1, kh, kw, cout), 3, kh * kw
        options = DepthwiseConv2DOptions(padding, stride, stride, mult, act)
    wq, qw, bias = _weights(draw, dtype, wshape, cout, axis, s_in, s_out)
    yshape = (1, out_size(padding, h, kh, stride), out_size(padding, w_, kw, stride), cout)
    tensors = [_tensor("x", (1, h, w_, cin), dtype, qx), _tensor("w", wshape, dtype, qw, wq)]
    if bias is not None:
        tensors.append(_tensor("b", (cout,), DType.INT32, bias[1], bias[0]))
    tensors.append(_tensor("y", yshape, dtype, qy))
    inputs = (0, 1, 2) if bias is not None else (0, 1)
    return Case(_graph(tensors, op_type, inputs, options, 1), (draw(filled((1, h, w_, cin), dtype)),), terms + 1)


@st.composite
def fully_connected_cases(draw) -> Case:
    dtype = draw(EIGHT_BIT)
    batch, depth, units = draw(st.integers(1, 3)), draw(st.integers(1, 16)), draw(st.integers(1, 5))
    s_in, s_out = draw(scales(-12, 4)), draw(scales(-8, 4))
    qx, qy = QuantParams((s_in,), (draw(zero_points(dtype)),)), QuantParams((s_out,), (draw(zero_points(dtype)),))
    wq, qw, bias = _weights(draw, dtype, (units, depth), units, 0, s_in, s_out)
    tensors = [_tensor("x", (batch, depth), dtype, qx), _tensor("w", (units, depth), dtype, qw, wq)]
    if bias is not None:
        tensors.append(_tensor("b", (units,), DType.INT32, bias[1], bias[0]))
    tensors.append(_tensor("y", (batch, units), dtype, qy))
    inputs = (0, 1, 2) if bias is not None else (0, 1)
    return Case(_graph(tensors, OpType.FULLY_CONNECTED, inputs, FullyConnectedOptions(draw(fused)), 1),
                (draw(filled((batch, depth), dtype)),), depth + 1)


@st.composite
def pool_cases(draw) -> Case:
    dtype = draw(EIGHT_BIT)
    h, w, c = draw(st.integers(2, 8)), draw(st.integers(2, 8)), draw(st.integers(1, 4))
    k, stride = draw(st.integers(2, 3)), draw(st.integers(1, 2))  # k = 1 copies: no mean to round
    padding = draw(st.sampled_from([Padding.SAME, Padding.VALID])) if min(h, w) >= k else Padding.SAME
    q = QuantParams((draw(scales(-12, 4)),), (draw(zero_points(dtype)),))  # TFLite: output as input
    yshape = (1, out_size(padding, h, k, stride), out_size(padding, w, k, stride), c)
    tensors = [_tensor("x", (1, h, w, c), dtype, q), _tensor("y", yshape, dtype, q)]
    options = Pool2DOptions(padding, stride, stride, k, k, draw(fused))
    return Case(_graph(tensors, OpType.AVERAGE_POOL_2D, (0,), options, 1), (draw(filled((1, h, w, c), dtype)),),
                k * k)


# TFLite's fixed output parameters: softmax and logistic on [0, 1) in 1/256 steps, tanh on [-1, 1)
# in 1/128 steps, with the zero point that puts the range at the type's ends.
_FIXED_OUTPUT = {(OpType.SOFTMAX, DType.INT8): (1 / 256, -128), (OpType.SOFTMAX, DType.UINT8): (1 / 256, 0),
                 (OpType.LOGISTIC, DType.INT8): (1 / 256, -128), (OpType.LOGISTIC, DType.UINT8): (1 / 256, 0),
                 (OpType.TANH, DType.INT8): (1 / 128, 0), (OpType.TANH, DType.UINT8): (1 / 128, 128)}


@st.composite
def activation_cases(draw, op_type: OpType) -> Case:
    dtype = draw(EIGHT_BIT)
    shape = (draw(st.integers(1, 3)), draw(st.integers(1, 16)))
    # Softmax scales differences by beta * s_in * 2**26 in int32: beta * s_in must stay below 32.
    s_in = draw(scales(-12, 4))
    options = SoftmaxOptions(float(np.float32(draw(st.floats(0.25, 1.0))))) if op_type is OpType.SOFTMAX else None
    s_out, zp_out = _FIXED_OUTPUT[(op_type, dtype)]
    tensors = [_tensor("x", shape, dtype, QuantParams((s_in,), (draw(zero_points(dtype)),))),
               _tensor("y", shape, dtype, QuantParams((s_out,), (zp_out,)))]
    return Case(_graph(tensors, op_type, (0,), options, 1), (draw(filled(shape, dtype)),), shape[-1])


CASES = {
    OpType.ADD: elementwise_cases(OpType.ADD),
    OpType.MUL: elementwise_cases(OpType.MUL),
    OpType.CONV_2D: conv_cases(OpType.CONV_2D),
    OpType.DEPTHWISE_CONV_2D: conv_cases(OpType.DEPTHWISE_CONV_2D),
    OpType.FULLY_CONNECTED: fully_connected_cases(),
    OpType.AVERAGE_POOL_2D: pool_cases(),
    OpType.SOFTMAX: activation_cases(OpType.SOFTMAX),
    OpType.LOGISTIC: activation_cases(OpType.LOGISTIC),
    OpType.TANH: activation_cases(OpType.TANH),
}

# Output steps the 8-bit result may be from the float kernel on dequantized values, beyond the
# float32 rounding of that reference (added per element below). Every kernel ends in one rounding
# to an integer code: half a step. On top of that:
BOUND = {
    # inputs rescaled to 2**20 resolution and rounded there (< 2**-8 step, see elementwise_cases)
    OpType.ADD: 0.5 + 2**-6,
    # MultiplyByQuantizedMultiplier rounds twice: the doubling high multiply to an integer, then
    # the shift by 2**e rounds again, adding up to 0.5 / 2**e <= 1/4 step when e >= 1 (e = 0 has
    # one rounding); the multiplier itself is within 2**-22 relative (float32 scale product)
    OpType.MUL: 0.75 + 2**-10,
    # the same requantization of an exact integer accumulator; the int32 bias enters the
    # reference dequantized, so its own rounding at quantization time is not an error here
    OpType.CONV_2D: 0.75 + 2**-10,
    OpType.DEPTHWISE_CONV_2D: 0.75 + 2**-10,
    # the reference kernel requantizes the accumulator in double: a single rounding
    OpType.FULLY_CONNECTED: 0.5 + 2**-10,
    # the integer mean of raw codes, rounded once (output parameters equal the input's)
    OpType.AVERAGE_POOL_2D: 0.5 + 2**-10,
    # gemmlowp's fixed-point exp (Q0.31), a sum of at most 16 terms each rounded to 2**-19 (Q12.19)
    # and a Newton reciprocal: relative error below 2**-14 of a probability, under 2**-6 step
    OpType.SOFTMAX: 0.5 + 2**-6,
    # a 256-entry table of the float32 function rounded once
    OpType.LOGISTIC: 0.5 + 2**-10,
    OpType.TANH: 0.5 + 2**-10,
}


def _args(graph: Graph, feeds) -> list:
    live = dict(zip(graph.inputs, feeds))
    op = graph.ops[0]
    return [live[t] if t in live else graph.tensors[t].data if t >= 0 else None for t in op.inputs]


def run_quantized(case: Case) -> np.ndarray:
    graph = case.graph
    kernel = select_kernel(graph.ops[0], graph)
    return np.array(kernel(Node(0, graph.ops[0], graph), *_args(graph, case.feeds)), copy=True)


def run_float(graph: Graph, args: list, options=None) -> np.ndarray:
    op = graph.ops[0] if options is None else dataclasses.replace(graph.ops[0], options=options)
    kernel = select_kernel(op, graph)
    return np.array(kernel(Node(0, op, graph), *args), copy=True).astype(np.float64)


@pytest.mark.parametrize("op_type", list(CASES), ids=lambda o: o.name)
@given(data=st.data())
def test_8bit_kernels_never_leave_their_types_range(op_type, data):
    case = data.draw(CASES[op_type], label="case")
    y = case.graph.tensors[case.graph.outputs[0]]
    out = run_quantized(case)
    assert out.dtype == y.dtype.np and out.shape == y.shape
    lo, hi = RANGES[y.dtype.np]
    assert lo <= int(out.min()) and int(out.max()) <= hi


def _magnitudes(op_type: OpType, view: Graph, args: list) -> np.ndarray:
    """Per output element, the sum of |terms| the float32 reference adds up (for its rounding)."""
    absolute = [np.abs(a) if a is not None else None for a in args]
    if op_type is OpType.MUL:
        return np.abs(args[0].astype(np.float64) * args[1])
    if op_type in (OpType.SOFTMAX, OpType.LOGISTIC, OpType.TANH):
        return np.ones_like(args[0], np.float64)  # values in [-1, 1], a few float32 ulps each
    options = view.ops[0].options
    if hasattr(options, "fused_activation_function"):
        options = dataclasses.replace(options, fused_activation_function=Activation.NONE)
    return run_float(view, absolute, options)


@pytest.mark.parametrize("op_type", list(CASES), ids=lambda o: o.name)
@given(data=st.data())
def test_8bit_kernels_match_the_float_kernel_within_their_rounding(op_type, data):
    case = data.draw(CASES[op_type], label="case")
    graph = case.graph
    view = float_view(graph)
    args = [dequantize_array(a, graph.tensors[t]) if t in graph.inputs else (view.tensors[t].data if t >= 0 else None)
            for t, a in zip(graph.ops[0].inputs, _args(graph, case.feeds))]
    reference = run_float(view, args)
    y = graph.tensors[graph.outputs[0]]
    s, zp = y.quant.scale[0], y.quant.zero_point[0]
    lo, hi = RANGES[y.dtype.np]
    ideal = np.clip(reference / s + zp, lo, hi)          # the float result, clamped to what 8 bits hold
    got = run_quantized(case).astype(np.float64)
    # float32 reference: the dequantized operands (one rounding each), their products and a sum of
    # `terms` of them, each within 2**-24 of the magnitudes involved (Higham's gamma_n)
    slack = (case.terms + 4) * F32_ULP * _magnitudes(graph.ops[0].type, view, args) / s
    error = np.abs(got - ideal)
    worst = np.unravel_index(np.argmax(error - slack), error.shape)
    assert np.all(error <= BOUND[op_type] + slack), (error[worst], slack[worst], got[worst], ideal[worst])


# -- float16 on the GPU ----------------------------------------------------------------------

U16 = 2.0 ** -11        # float16 unit roundoff: |fl16(x) - x| <= 2**-11 |x| for normal x
ETA16 = 2.0 ** -25      # half float16's subnormal spacing: the absolute error below 2**-14
EXACT = {OpType.RELU, OpType.RELU6, OpType.ABS, OpType.MAX_POOL_2D, OpType.CONCATENATION}  # no new values
LIPSCHITZ = {OpType.RELU: 1.0, OpType.RELU6: 1.0, OpType.ABS: 1.0, OpType.TANH: 1.0, OpType.LOGISTIC: 0.25,
             OpType.HARD_SWISH: 1.5, OpType.MAX_POOL_2D: 1.0, OpType.AVERAGE_POOL_2D: 1.0,
             OpType.RESIZE_BILINEAR: 1.0, OpType.CONCATENATION: 1.0}


def _rounding(m: float) -> float:
    return U16 * m + ETA16


def fp16_error_bound(graph: Graph, values: list[np.ndarray]) -> list[float]:
    """A bound on |float16 run - float32 run| per tensor, from the float32 run's magnitudes.

    Every float16 rounding (inputs, weights, each op's output) errs by at most 2**-11 of the value
    it rounds (plus 2**-25 for subnormals); an error already in an op's inputs reaches its output
    times the op's gain: its Lipschitz constant, a filter's L1 norm (conv), the other operand's
    magnitude (MUL), 1 + 1 (ADD/SUB). So the bound is 2**-11 x the magnitude each rounding acts on,
    carried through the gains of the ops after it: for ops of gain <= 1, 2**-11 x (ops + 1) x the
    largest magnitude. The kernels' own float32 arithmetic adds 2**-24 per term summed."""
    m = [float(np.max(np.abs(v))) if v is not None and v.size else 0.0 for v in values]
    e = [0.0] * len(values)
    for t in graph.inputs:
        e[t] = _rounding(m[t])
    for op in graph.ops:
        ins = [t for t in op.inputs if t >= 0]
        x = ins[0]
        out = op.outputs[0]
        const = lambda t: graph.tensors[t].is_constant  # noqa: E731
        err = lambda t: _rounding(m[t]) if const(t) else e[t]  # noqa: E731
        f32 = 16 * F32_ULP * (m[x] + e[x] + m[out])  # a few float32 roundings of the op's own math
        if op.type in (OpType.CONV_2D, OpType.DEPTHWISE_CONV_2D):
            w = np.abs(graph.tensors[op.inputs[1]].data.astype(np.float64))
            axes = (1, 2, 3) if op.type is OpType.CONV_2D else (0, 1, 2)
            gain = float(np.max(w.sum(axis=axes)))
            terms = int(w.size // w.shape[0 if op.type is OpType.CONV_2D else 3])
            bias = m[op.inputs[2]] if len(op.inputs) > 2 and op.inputs[2] >= 0 else 0.0
            # (w + dw)(x + dx) - wx summed: gain * dx + sum |dw| (|x| + dx), |dw| <= 2**-11 |w| + eta
            delta = gain * e[x] + (U16 * gain + ETA16 * terms) * (m[x] + e[x]) + _rounding(bias)
            f32 = (terms + 2) * F32_ULP * (1 + U16) * gain * (m[x] + e[x]) + f32
        elif op.type in (OpType.ADD, OpType.SUB):
            delta = err(ins[0]) + err(ins[1])
        elif op.type is OpType.MUL:
            a, b = ins
            delta = m[a] * err(b) + m[b] * err(a) + err(a) * err(b)
        elif op.type is OpType.CONCATENATION:
            delta = max(e[t] for t in ins)
        else:
            delta = LIPSCHITZ[op.type] * e[x]
        delta += f32
        # the output rounded to float16, except where the op only picks or clamps float16 values
        e[out] = delta if op.type in EXACT else delta + _rounding(m[out] + delta)
    return e


def _whole(graph: Graph):
    """The whole graph as one partition, as a delegate taking every op receives it."""
    return SimpleNamespace(graph=graph, nodes=tuple(range(len(graph.ops))), inputs=tuple(graph.inputs),
                           outputs=tuple(graph.outputs), delegate="fp16-property")


@given(float_graphs(), st.integers(0, 2**32 - 1), st.sampled_from([0.1, 1.0, 10.0]))
def test_float16_gpu_results_stay_within_float16_rounding_of_float32(graph, seed, spread):
    x = (spread * np.random.default_rng(seed).standard_normal(graph.tensors[graph.inputs[0]].shape)).astype(np.float32)
    cpu = Interpreter(graph=graph)
    cpu.allocate_tensors()
    cpu.set_tensor(graph.inputs[0], x)
    cpu.invoke()
    values = [cpu.get_tensor(t) if not tensor.is_constant else tensor.data for t, tensor in enumerate(graph.tensors)]
    assume(max(float(np.max(np.abs(v))) for v in values if v.size) < 2.0 ** 14)  # far from float16's overflow
    kernel = UnitKernel(_whole(graph), NumericMode.FLOAT16, "gpu")
    kernel.prepare()
    half = kernel.invoke({graph.inputs[0]: x})
    bound = fp16_error_bound(graph, values)
    for t in graph.outputs:
        got, want = half[t], values[t]
        assert np.array_equal(got, got.astype(np.float16).astype(np.float32))  # held in float16
        assert float(np.max(np.abs(got.astype(np.float64) - want))) <= bound[t], graph.tensors[t].name
