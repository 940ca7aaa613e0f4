"""Builders of one float op each (shape, options and weights chosen through Picks), for runtime.testing.ops."""

from __future__ import annotations

import enum
from typing import Any, Callable, Sequence

import numpy as np

from runtime.ir.graph import DType, Graph, Op, QuantParams, Tensor
from runtime.ir.optypes import OpType
from runtime.ir.options import (Activation, AddOptions, ConcatenationOptions, Conv2DOptions,
                             DepthToSpaceOptions, DepthwiseConv2DOptions, DivOptions,
                             FullyConnectedOptions, GatherOptions, LeakyReluOptions, MulOptions,
                             PackOptions, Padding, Pool2DOptions, ReducerOptions, ReshapeOptions,
                             ResizeBilinearOptions, ResizeNearestNeighborOptions, SoftmaxOptions,
                             SpaceToDepthOptions, SplitOptions, StridedSliceOptions, SubOptions,
                             TransposeConvOptions, UnpackOptions)
from runtime.zoo.builder import GraphBuilder
from runtime.ops.validate import validate_graph

__all__ = ["Picks", "Domain", "sample", "Context", "BUILDERS", "WEIGHT_INPUT", "conversion_graph"]


class Picks:
    """Where a generator's choices come from; subclasses give `integer` and `choice`."""

    def integer(self, lo: int, hi: int) -> int:
        raise TypeError(f"{type(self).__name__} must define integer()")

    def choice(self, options: Sequence[Any]) -> Any:
        raise TypeError(f"{type(self).__name__} must define choice()")

    def boolean(self) -> bool:
        return bool(self.integer(0, 1))

    def seed(self) -> int:
        return self.integer(0, 2**31 - 1)


class Domain(enum.Enum):
    """What a float input may hold: any real, positive (SQRT, RSQRT), or away from 0 (a divisor)."""

    REAL = "real"
    POSITIVE = "positive"
    NONZERO = "nonzero"


def sample(domain: Domain, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if domain is Domain.POSITIVE:
        return rng.uniform(0.25, 4.0, shape).astype(np.float32)
    if domain is Domain.NONZERO:  # |x| >= 0.5 keeps quotients inside float16's range
        return (rng.choice([-1.0, 1.0], shape) * rng.uniform(0.5, 2.0, shape)).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


# NONE twice: half the instances carry no fused activation, as in most models.
ACTIVATIONS = (Activation.NONE, Activation.NONE, Activation.RELU, Activation.RELU6, Activation.RELU_N1_TO_1)


class Context:
    """One graph under construction: the builder, the picks and each graph input's domain."""

    def __init__(self, p: Picks, dtype: str):
        self.p, self.dtype = p, dtype
        self.b = GraphBuilder("single_op", seed=p.seed())
        self.domains: list[Domain] = []

    @property
    def float(self) -> bool:
        return self.dtype == "float32"

    def live(self, shape: Sequence[int], domain: Domain = Domain.REAL) -> int:
        t = self.b.input(f"input{len(self.domains)}", tuple(shape))
        self.b.values[t] = sample(domain, tuple(shape), self.b.rng)
        self.domains.append(domain)
        return t

    def const(self, value: Any, dtype=None) -> int:
        return self.b.const(f"const{len(self.b.tensors)}", value, dtype)

    def normal(self, shape: Sequence[int], std: float = 1.0, mean: float = 0.0) -> np.ndarray:
        return self.b.rng.normal(mean, std, tuple(shape)).astype(np.float32)

    def shape(self, lo: int = 2, hi: int = 4) -> tuple[int, ...]:
        """Rank lo..hi; a small batch, then dims up to 6, channels 1..7 (not only multiples of 4)."""
        rank = self.p.integer(lo, hi)
        dims = [self.p.integer(1, 2)] + [self.p.integer(1, 6) for _ in range(rank - 2)]
        return tuple(dims + [self.p.integer(1, 7)])

    def image(self, lo: int = 2, hi: int = 7, channels: int = 7) -> tuple[int, int, int, int]:
        return 1, self.p.integer(lo, hi), self.p.integer(lo, hi), self.p.integer(1, channels)

    def activation(self) -> Activation:
        return self.p.choice(ACTIVATIONS)

    def window(self, h: int, w: int, square: bool = False) -> tuple[int, int, int, Padding]:
        """(kernel h, kernel w, stride, padding); VALID only where the kernel fits."""
        kh, s = self.p.integer(1, 3), self.p.integer(1, 2)
        kw = kh if square else self.p.integer(1, 3)
        pad = self.p.choice((Padding.SAME, Padding.VALID))
        return kh, kw, s, pad if (h >= kh and w >= kw) else Padding.SAME

    def axis(self, rank: int) -> int:
        a = self.p.integer(0, rank - 1)
        return a - rank if self.p.boolean() else a  # negative axes count from the end


def _binary(kind: OpType) -> Callable[[Context], tuple[int, ...]]:
    options = {OpType.ADD: AddOptions, OpType.SUB: SubOptions, OpType.MUL: MulOptions, OpType.DIV: DivOptions}

    def build(c: Context) -> tuple[int, ...]:
        shape = c.shape(2, 4)
        domain = Domain.NONZERO if kind is OpType.DIV else Domain.REAL
        x = c.live(shape)
        if c.p.boolean():
            y = c.live(shape, domain)
        else:  # a per-channel constant, broadcast as TFLite allows
            y = c.const(c.b.rng.choice([-1.0, 1.0], shape[-1]).astype(np.float32)
                        * c.b.rng.uniform(0.5, 2.0, shape[-1]).astype(np.float32))
        opts = options[kind](c.activation()) if kind in options else None
        return (c.b.op(kind, [x, y], opts),)
    return build


def _conv(c: Context) -> tuple[int, ...]:
    _, h, w, cin = shape = c.image()
    kh, kw, s, pad = c.window(h, w)
    dilation = c.p.choice((1, 1, 2)) if s == 1 and pad is Padding.SAME else 1
    cout = c.p.integer(1, 7)
    wt = c.const(c.normal((cout, kh, kw, cin), 1 / np.sqrt(kh * kw * cin)))
    bias = c.const(c.normal((cout,), 0.3))
    opts = Conv2DOptions(pad, s, s, c.activation(), dilation, dilation)
    return (c.b.op(OpType.CONV_2D, [c.live(shape), wt, bias], opts),)


def _depthwise(c: Context) -> tuple[int, ...]:
    _, h, w, cin = shape = c.image()
    k, _, s, pad = c.window(h, w, square=True)
    mult = c.p.integer(1, 2)
    wt = c.const(c.normal((1, k, k, cin * mult), 1 / k))
    bias = c.const(c.normal((cin * mult,), 0.3))
    opts = DepthwiseConv2DOptions(pad, s, s, mult, c.activation())
    return (c.b.op(OpType.DEPTHWISE_CONV_2D, [c.live(shape), wt, bias], opts),)


def _transpose_conv(c: Context) -> tuple[int, ...]:
    _, h, w, cin = shape = c.image(2, 5)
    k, s = c.p.integer(1, 3), c.p.integer(1, 2)
    pad = c.p.choice((Padding.SAME, Padding.VALID))
    oh, ow = ((h * s, w * s) if pad is Padding.SAME else ((h - 1) * s + k, (w - 1) * s + k))
    cout = c.p.integer(1, 6)
    out_shape = c.const(np.array([1, oh, ow, cout], np.int32))
    wt = c.const(c.normal((cout, k, k, cin), 1 / np.sqrt(k * k * cin)))
    inputs = [out_shape, wt, c.live(shape)]
    if c.p.boolean():
        inputs.append(c.const(c.normal((cout,), 0.3)))
    return (c.b.op(OpType.TRANSPOSE_CONV, inputs, TransposeConvOptions(pad, s, s)),)


def _fully_connected(c: Context) -> tuple[int, ...]:
    shape = (c.p.integer(1, 3), c.p.integer(1, 16)) if c.p.boolean() else c.image(1, 4)
    depth, units = shape[-1], c.p.integer(1, 10)
    x = c.live(shape)
    wt = c.const(c.normal((units, depth), 1 / np.sqrt(depth)))
    inputs = [x, wt] + ([c.const(c.normal((units,), 0.3))] if c.p.boolean() else [])
    return (c.b.op(OpType.FULLY_CONNECTED, inputs, FullyConnectedOptions(c.activation())),)


def _pool(kind: OpType) -> Callable[[Context], tuple[int, ...]]:
    def build(c: Context) -> tuple[int, ...]:
        _, h, w, _ = shape = c.image()
        kh, kw, s, pad = c.window(h, w)
        return (c.b.op(kind, [c.live(shape)], Pool2DOptions(pad, s, s, kw, kh, c.activation())),)
    return build


def _reduce(kind: OpType) -> Callable[[Context], tuple[int, ...]]:
    def build(c: Context) -> tuple[int, ...]:
        shape = c.shape(2, 4)
        rank = len(shape)
        spatial = list(range(1, rank - 1)) or [rank - 1]
        axes = c.p.choice((spatial, [rank - 1], [c.p.integer(0, rank - 1)]))
        axis = c.const(np.array(axes, np.int32))
        return (c.b.op(kind, [c.live(shape), axis], ReducerOptions(keep_dims=c.p.boolean())),)
    return build


def _concatenation(c: Context) -> tuple[int, ...]:
    shape = c.shape(2, 4)
    axis = c.axis(len(shape))
    parts = []
    for _ in range(c.p.integer(2, 3)):
        part = list(shape)
        part[axis] = c.p.integer(1, 4)
        parts.append(c.live(part))
    act = c.activation() if c.float else Activation.NONE  # int8 concatenation fuses no activation
    return (c.b.op(OpType.CONCATENATION, parts, ConcatenationOptions(axis, act)),)


def _pad(c: Context) -> tuple[int, ...]:
    shape = c.shape(2, 4)
    pads = np.array([[c.p.integer(0, 2), c.p.integer(0, 2)] for _ in shape], np.int32)
    return (c.b.op(OpType.PAD, [c.live(shape), c.const(pads)]),)


def _reshape(c: Context) -> tuple[int, ...]:
    shape = c.shape(2, 4)
    size = int(np.prod(shape))
    divisors = [d for d in range(1, size + 1) if size % d == 0]
    first = c.p.choice(divisors)
    new = c.p.choice(([first, size // first], [1, first, size // first], [size]))
    if len(new) == 1:
        new = [1, size]
    target = c.const(np.array(new, np.int32))
    return (c.b.op(OpType.RESHAPE, [c.live(shape), target], ReshapeOptions(tuple(new))),)


def _transpose(c: Context) -> tuple[int, ...]:
    shape = c.shape(2, 4)
    perm = list(range(len(shape)))
    for i in range(len(perm) - 1, 0, -1):  # Fisher-Yates through the picks, so it shrinks
        j = c.p.integer(0, i)
        perm[i], perm[j] = perm[j], perm[i]
    return (c.b.op(OpType.TRANSPOSE, [c.live(shape), c.const(np.array(perm, np.int32))]),)


def _strided_slice(c: Context) -> tuple[int, ...]:
    shape = c.shape(2, 4)
    begin = [c.p.integer(0, d - 1) for d in shape]
    end = [c.p.integer(b + 1, d) for b, d in zip(begin, shape)]
    strides = [c.p.integer(1, 2) for _ in shape]
    begin_mask, end_mask = c.p.integer(0, 2 ** len(shape) - 1), c.p.integer(0, 2 ** len(shape) - 1)
    consts = [c.const(np.array(v, np.int32)) for v in (begin, end, strides)]
    opts = StridedSliceOptions(begin_mask=begin_mask, end_mask=end_mask)
    return (c.b.op(OpType.STRIDED_SLICE, [c.live(shape), *consts], opts),)


def _slice(c: Context) -> tuple[int, ...]:
    shape = c.shape(2, 4)
    begin = [c.p.integer(0, d - 1) for d in shape]
    size = [c.p.choice((-1, c.p.integer(1, d - b))) for b, d in zip(begin, shape)]
    consts = [c.const(np.array(v, np.int32)) for v in (begin, size)]
    return (c.b.op(OpType.SLICE, [c.live(shape), *consts]),)


def _unary(kind: OpType, domain: Domain = Domain.REAL,
           options: Any = None) -> Callable[[Context], tuple[int, ...]]:
    def build(c: Context) -> tuple[int, ...]:
        opts = options(c) if callable(options) else options
        return (c.b.op(kind, [c.live(c.shape(2, 4), domain)], opts),)
    return build


def _prelu(c: Context) -> tuple[int, ...]:
    shape = c.shape(2, 4)
    alpha_shape = (1,) * (len(shape) - 2) + (shape[-1],)
    alpha = c.const(c.b.rng.uniform(0.05, 0.5, alpha_shape).astype(np.float32))
    return (c.b.op(OpType.PRELU, [c.live(shape), alpha]),)


def _resize(kind: OpType) -> Callable[[Context], tuple[int, ...]]:
    cls = ResizeBilinearOptions if kind is OpType.RESIZE_BILINEAR else ResizeNearestNeighborOptions

    def build(c: Context) -> tuple[int, ...]:
        _, h, w, _ = shape = c.image(1, 6)
        size = c.const(np.array([c.p.integer(1, 2 * h), c.p.integer(1, 2 * w)], np.int32))
        align, half = c.p.choice(((False, False), (True, False), (False, True)))
        return (c.b.op(kind, [c.live(shape), size], cls(align, half)),)
    return build


def _depth_to_space(c: Context) -> tuple[int, ...]:
    b = c.p.integer(2, 3)
    shape = (1, c.p.integer(1, 4), c.p.integer(1, 4), b * b * c.p.integer(1, 3))
    return (c.b.op(OpType.DEPTH_TO_SPACE, [c.live(shape)], DepthToSpaceOptions(b)),)


def _space_to_depth(c: Context) -> tuple[int, ...]:
    b = c.p.integer(2, 3)
    shape = (1, b * c.p.integer(1, 3), b * c.p.integer(1, 3), c.p.integer(1, 5))
    return (c.b.op(OpType.SPACE_TO_DEPTH, [c.live(shape)], SpaceToDepthOptions(b)),)


def _split(c: Context) -> tuple[int, ...]:
    shape = list(c.shape(2, 4))
    axis, n = c.axis(len(shape)), c.p.integer(2, 3)
    shape[axis] = n * c.p.integer(1, 3)
    out = c.b.op(OpType.SPLIT, [c.const(np.array(axis, np.int32)), c.live(shape)], SplitOptions(n))
    return tuple(out)


def _pack(c: Context) -> tuple[int, ...]:
    shape = c.shape(1, 3) if c.p.boolean() else (c.p.integer(1, 6),)
    n = c.p.integer(2, 3)
    axis = c.p.integer(0, len(shape))
    return (c.b.op(OpType.PACK, [c.live(shape) for _ in range(n)], PackOptions(n, axis)),)


def _unpack(c: Context) -> tuple[int, ...]:
    shape = c.shape(2, 4)
    axis = c.p.integer(0, len(shape) - 1)
    out = c.b.op(OpType.UNPACK, [c.live(shape)], UnpackOptions(shape[axis], axis))
    return out if isinstance(out, tuple) else (out,)


def _gather(c: Context) -> tuple[int, ...]:
    shape = c.shape(2, 4)
    axis = c.p.integer(0, len(shape) - 1)
    indices = np.array([c.p.integer(0, shape[axis] - 1) for _ in range(c.p.integer(1, 4))], np.int32)
    return (c.b.op(OpType.GATHER, [c.live(shape), c.const(indices)], GatherOptions(axis)),)


BUILDERS: dict[OpType, Callable[[Context], tuple[int, ...]]] = {
    **{kind: _binary(kind) for kind in (OpType.ADD, OpType.SUB, OpType.MUL, OpType.DIV, OpType.MAXIMUM,
                                        OpType.MINIMUM, OpType.SQUARED_DIFFERENCE)},
    OpType.CONV_2D: _conv,
    OpType.DEPTHWISE_CONV_2D: _depthwise,
    OpType.TRANSPOSE_CONV: _transpose_conv,
    OpType.FULLY_CONNECTED: _fully_connected,
    OpType.AVERAGE_POOL_2D: _pool(OpType.AVERAGE_POOL_2D),
    OpType.MAX_POOL_2D: _pool(OpType.MAX_POOL_2D),
    OpType.MEAN: _reduce(OpType.MEAN),
    OpType.SUM: _reduce(OpType.SUM),
    OpType.CONCATENATION: _concatenation,
    OpType.PAD: _pad,
    OpType.RESHAPE: _reshape,
    OpType.TRANSPOSE: _transpose,
    OpType.STRIDED_SLICE: _strided_slice,
    OpType.SLICE: _slice,
    OpType.SOFTMAX: _unary(OpType.SOFTMAX, options=lambda c: SoftmaxOptions(c.p.choice((1.0, 1.0, 0.5)))),
    OpType.LOG_SOFTMAX: _unary(OpType.LOG_SOFTMAX),
    OpType.LEAKY_RELU: _unary(OpType.LEAKY_RELU, options=lambda c: LeakyReluOptions(c.p.choice((0.1, 0.2, 0.3)))),
    OpType.PRELU: _prelu,
    **{kind: _unary(kind) for kind in (OpType.LOGISTIC, OpType.TANH, OpType.RELU, OpType.RELU6,
                                       OpType.HARD_SWISH, OpType.EXP, OpType.ABS, OpType.NEG)},
    OpType.SQRT: _unary(OpType.SQRT, Domain.POSITIVE),
    OpType.RSQRT: _unary(OpType.RSQRT, Domain.POSITIVE),
    OpType.RESIZE_BILINEAR: _resize(OpType.RESIZE_BILINEAR),
    OpType.RESIZE_NEAREST_NEIGHBOR: _resize(OpType.RESIZE_NEAREST_NEIGHBOR),
    OpType.DEPTH_TO_SPACE: _depth_to_space,
    OpType.SPACE_TO_DEPTH: _space_to_depth,
    OpType.SPLIT: _split,
    OpType.PACK: _pack,
    OpType.UNPACK: _unpack,
    OpType.GATHER: _gather,
}

# Which input holds an op's weights (shown in a case's shape summary).
WEIGHT_INPUT = {OpType.CONV_2D: 1, OpType.DEPTHWISE_CONV_2D: 1, OpType.TRANSPOSE_CONV: 1,
                OpType.FULLY_CONNECTED: 1}

_RANGE = {"int8": (-128, 127), "uint8": (0, 255)}


def _params(p: Picks, dtype: str) -> QuantParams:
    lo, hi = _RANGE[dtype]
    scale = float(np.float32(p.choice((0.005, 0.01, 0.02, 0.05)) * p.integer(1, 4)))
    return QuantParams((scale,), (p.integer(lo + 64, hi - 64),))


def conversion_graph(p: Picks, op_type: OpType, dtype: str) -> tuple[Graph, tuple[Domain, ...]]:
    """QUANTIZE (float -> 8-bit, or an 8-bit requantization) or DEQUANTIZE (8-bit -> float)."""
    c = Context(p, dtype)
    shape, kind = c.shape(2, 4), DType.INT8 if dtype == "int8" else DType.UINT8
    quantized = Tensor("quantized", shape, kind, _params(p, dtype))
    if op_type is OpType.DEQUANTIZE:
        tensors = (quantized, Tensor("dequantized", shape, DType.FLOAT32))
        op = Op(OpType.DEQUANTIZE, (0,), (1,), version=2 if dtype == "int8" else 1)
    else:
        source = (Tensor("real", shape, DType.FLOAT32) if p.boolean()
                  else Tensor("source", shape, kind, _params(p, dtype)))
        tensors = (source, quantized)
        op = Op(OpType.QUANTIZE, (0,), (1,), version=2 if kind is DType.INT8 else 1)
    return validate_graph(Graph(tensors, (op,), (0,), (1,), "single_op")), (Domain.REAL,)
