"""Hypothesis strategies: quantization parameters, tensors, and random DAG graphs of supported ops.

For the testbed's own property tests and for delegate authors testing theirs (needs hypothesis).
Graphs are built with the zoo's GraphBuilder, so every generated graph has consistent shapes and
runs on the reference kernels by construction.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from runtime.ir.graph import DType, QuantParams
from runtime.ir.optypes import OpType
from runtime.ir.options import (Activation, AddOptions, ConcatenationOptions, Conv2DOptions,
                             DepthwiseConv2DOptions, MulOptions, Padding, Pool2DOptions, ResizeBilinearOptions)
from runtime.zoo.builder import GraphBuilder

activations = st.sampled_from([Activation.NONE, Activation.RELU, Activation.RELU6, Activation.RELU_N1_TO_1])
paddings = st.sampled_from([Padding.SAME, Padding.VALID])


@st.composite
def quant_params(draw, dtype: DType = DType.INT8, channels: int | None = None, axis: int = 0) -> QuantParams:
    """Valid affine parameters: positive float32 scales, zero points inside the type's range
    (0 for per-channel weights, as TFLite requires)."""
    lo, hi = (-128, 127) if dtype is DType.INT8 else (0, 255)
    n = channels or 1
    scales = draw(st.lists(st.floats(1e-3, 0.5), min_size=n, max_size=n))
    zps = [0] * n if channels else [draw(st.integers(lo // 2, hi // 2))]
    return QuantParams(tuple(float(np.float32(s)) for s in scales), tuple(zps), axis)


@st.composite
def quantized_arrays(draw, shape: tuple[int, ...], dtype: DType = DType.INT8) -> np.ndarray:
    info = np.iinfo(dtype.np)
    seed = draw(st.integers(0, 2**32 - 1))
    return np.random.default_rng(seed).integers(info.min, info.max + 1, shape).astype(dtype.np)


def _valid(size: int, k: int, stride: int, padding: Padding) -> bool:
    return padding is Padding.SAME or size >= k


def _conv(draw, b: GraphBuilder, x: int) -> int:
    _, h, w, c = b.shape(x)
    k, s, pad = draw(st.integers(1, 3)), draw(st.integers(1, 2)), draw(paddings)
    if not (_valid(h, k, s, pad) and _valid(w, k, s, pad)):
        pad = Padding.SAME
    cout = draw(st.integers(1, 6))
    wt = b.const(f"w{len(b.ops)}", b.rng.normal(0, 1 / np.sqrt(k * k * c), (cout, k, k, c)).astype(np.float32))
    bias = b.const(f"b{len(b.ops)}", b.rng.normal(0, 0.1, cout).astype(np.float32))
    return b.op(OpType.CONV_2D, [x, wt, bias], Conv2DOptions(pad, s, s, draw(activations)))


def _depthwise(draw, b: GraphBuilder, x: int) -> int:
    _, h, w, c = b.shape(x)
    k, s, mult = draw(st.integers(2, 3)), draw(st.integers(1, 2)), draw(st.integers(1, 2))
    wt = b.const(f"w{len(b.ops)}", b.rng.normal(0, 1 / k, (1, k, k, c * mult)).astype(np.float32))
    return b.op(OpType.DEPTHWISE_CONV_2D, [x, wt],
                DepthwiseConv2DOptions(Padding.SAME, s, s, mult, draw(activations)))


def _pool(draw, b: GraphBuilder, x: int) -> int:
    k, s = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    kind = draw(st.sampled_from([OpType.MAX_POOL_2D, OpType.AVERAGE_POOL_2D]))
    return b.op(kind, [x], Pool2DOptions(Padding.SAME, s, s, k, k, draw(activations)))


def _unary(draw, b: GraphBuilder, x: int) -> int:
    return b.op(draw(st.sampled_from([OpType.RELU, OpType.RELU6, OpType.LOGISTIC, OpType.TANH,
                                      OpType.HARD_SWISH, OpType.ABS])), [x])


def _binary(draw, b: GraphBuilder, x: int, others: list[int]) -> int:
    same = [t for t in others if b.shape(t) == b.shape(x) and t != x]
    kind = draw(st.sampled_from([OpType.ADD, OpType.MUL, OpType.SUB]))
    if same and draw(st.booleans()):
        y = draw(st.sampled_from(same))
    else:  # a per-channel constant, broadcast as TFLite allows
        y = b.const(f"c{len(b.ops)}", b.rng.normal(0.5, 0.5, b.shape(x)[-1]).astype(np.float32))
    opts = AddOptions(draw(activations)) if kind is not OpType.MUL else MulOptions(draw(activations))
    if kind is OpType.SUB:
        from runtime.ir.options import SubOptions

        opts = SubOptions(opts.fused_activation_function)
    return b.op(kind, [x, y], opts)


def _concat(draw, b: GraphBuilder, x: int, others: list[int]) -> int:
    same = [t for t in others if b.shape(t)[:3] == b.shape(x)[:3] and t != x]
    parts = [x] + (draw(st.lists(st.sampled_from(same), min_size=1, max_size=2)) if same else [x])
    return b.op(OpType.CONCATENATION, parts, ConcatenationOptions(axis=3))


def _resize(draw, b: GraphBuilder, x: int) -> int:
    _, h, w, _ = b.shape(x)
    size = b.const(f"size{len(b.ops)}", np.array([draw(st.integers(1, 2 * h)), draw(st.integers(1, 2 * w))],
                                                np.int32))
    align, half = draw(st.sampled_from([(False, False), (True, False), (False, True)]))
    return b.op(OpType.RESIZE_BILINEAR, [x, size], ResizeBilinearOptions(align, half))


_LAYERS = ("conv", "depthwise", "pool", "unary", "binary", "concat", "resize")


@st.composite
def float_graphs(draw, max_ops: int = 6):
    """A random DAG of float ops over a [1, H, W, C] input; outputs are the last tensor and, at
    times, an earlier one. Weights are seeded, so a failing example reproduces exactly."""
    b = GraphBuilder("generated", seed=draw(st.integers(0, 2**16)))
    h, w, c = draw(st.integers(2, 9)), draw(st.integers(2, 9)), draw(st.integers(1, 5))
    tensors = [b.input("x", (1, h, w, c))]
    for _ in range(draw(st.integers(1, max_ops))):
        x = draw(st.sampled_from(tensors[-3:]))
        layer = draw(st.sampled_from(_LAYERS))
        if layer == "conv":
            y = _conv(draw, b, x)
        elif layer == "depthwise":
            y = _depthwise(draw, b, x)
        elif layer == "pool":
            y = _pool(draw, b, x)
        elif layer == "unary":
            y = _unary(draw, b, x)
        elif layer == "binary":
            y = _binary(draw, b, x, tensors)
        elif layer == "concat":
            y = _concat(draw, b, x, tensors)
        else:
            y = _resize(draw, b, x)
        tensors.append(y)
    outputs = [tensors[-1]]
    if len(tensors) > 2 and draw(st.booleans()):
        outputs.append(tensors[draw(st.integers(1, len(tensors) - 2))])
    return b.build(outputs)


def support_sets(n_nodes: int):
    """Plan positions a delegate might support among `n_nodes`: none, all, alternating runs of
    1-4 nodes (the case that splits a plan into most partitions), or any subset."""
    positions = range(n_nodes)
    runs = st.integers(1, 4).map(lambda k: frozenset(i for i in positions if (i // k) % 2 == 0))
    anything = st.sets(st.sampled_from(positions)).map(frozenset) if n_nodes else st.just(frozenset())
    return st.one_of(st.just(frozenset()), st.just(frozenset(positions)), runs, anything)
