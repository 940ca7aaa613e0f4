"""StableHLO-era ops LiteRT's reference resolver runs: STABLEHLO_ADD / MULTIPLY / MAXIMUM / MINIMUM
(tflite/kernels/stablehlo_elementwise.h), STABLEHLO_PAD (stablehlo_pad.cc), DILATE (dilate.cc) and
the TFLite REDUCE_WINDOW (stablehlo_reduce_window.cc). All work on any element type as raw values:
8-bit data is not requantized, integer arithmetic wraps.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from runtime.ops.base import Node
from runtime.ir.options import ReduceWindowFunction


# -- elementwise: same shapes and types, no broadcasting, no fused activation ----------------------

def _arith(fn):
    def kernel(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):
            return fn(a, b).astype(a.dtype, copy=False)
    kernel.__name__ = fn.__name__
    return kernel


def _add(a, b):
    return a + b


def _multiply(a, b):
    return a * b


def _maximum(a, b):
    """std::max(a, b) is a < b ? b : a: a NaN in b is passed over, one in a kept."""
    return np.where(a < b, b, a)


def _minimum(a, b):
    """std::min(a, b) is b < a ? b : a."""
    return np.where(b < a, b, a)


stablehlo_add = _arith(_add)
stablehlo_multiply = _arith(_multiply)
stablehlo_maximum = _arith(_maximum)
stablehlo_minimum = _arith(_minimum)


# -- STABLEHLO_PAD: edge padding (negative crops), interior padding, one pad value ----------------

def pad_positions(size: int, low: int, high: int, interior: int) -> tuple[int, np.ndarray, np.ndarray]:
    """(output size, input indices kept, their output positions) along one axis: input element i
    sits at low + i * (interior + 1) of the padded line; negative edges crop it."""
    out = size + max(size - 1, 0) * interior + low + high
    pos = low + np.arange(size) * (interior + 1)
    keep = (pos >= 0) & (pos < out)
    return out, np.nonzero(keep)[0], pos[keep]


def stablehlo_pad(node: Node, x: np.ndarray, value: np.ndarray) -> np.ndarray:
    o = node.options
    axes = [pad_positions(d, lo, hi, it) for d, lo, hi, it in
            zip(x.shape, o.edge_padding_low, o.edge_padding_high, o.interior_padding)]
    out = np.full([a[0] for a in axes], np.asarray(value).reshape(-1)[0], x.dtype)
    out[np.ix_(*(a[2] for a in axes))] = x[np.ix_(*(a[1] for a in axes))]
    return out


# -- DILATE: interior padding of dilation - 1, filled with the padding value ------------------------

def dilate(node: Node, x: np.ndarray, dilations: np.ndarray, value: np.ndarray) -> np.ndarray:
    d = [int(v) for v in np.asarray(dilations).reshape(-1)]
    out = np.full([(s - 1) * k + 1 for s, k in zip(x.shape, d)], np.asarray(value).reshape(-1)[0], x.dtype)
    out[tuple(slice(None, None, k) for k in d)] = x
    return out


# -- REDUCE_WINDOW ------------------------------------------------------------------------------------

def _max(acc, v):
    return np.where(acc >= v, acc, v)   # the kernel's Max: a >= b ? a : b


def _min(acc, v):
    return np.where(acc <= v, acc, v)


REDUCERS = {
    ReduceWindowFunction.ADD: np.add, ReduceWindowFunction.MUL: np.multiply,
    ReduceWindowFunction.MINIMUM: _min, ReduceWindowFunction.MAXIMUM: _max,
    ReduceWindowFunction.ALL: np.logical_and, ReduceWindowFunction.ANY: np.logical_or,
}


def window_output_shape(shape, window, strides, dilations) -> list[int]:
    """A window that does not fit an axis gives it size 0 (ReduceWindowData::ComputeOutputShape)."""
    out = []
    for d, w, s, r in zip(shape, window, strides, dilations):
        eff = (w - 1) * r + 1
        out.append(0 if d < eff else (d - eff) // s + 1)
    return out


def reduce_window(node: Node, x: np.ndarray, init: np.ndarray, window: np.ndarray, strides: np.ndarray,
                  dilations: np.ndarray) -> np.ndarray:
    """Each output starts at the init value and takes the window's elements one at a time in
    row-major order, as StridedReduce does: here one whole-output step per window element, so
    float sums round in LiteRT's order. Booleans are int8 inside the kernel (their sums count)."""
    fn = REDUCERS.get(node.options.reduce_function)
    if fn is None:
        raise node.fail(f"reduce_function {node.options.reduce_function!r} is not supported")
    window, strides, dilations = ([int(v) for v in np.asarray(a).reshape(-1)] for a in (window, strides, dilations))
    out_shape = window_output_shape(x.shape, window, strides, dilations)
    is_bool = x.dtype == np.bool_
    data = x.astype(np.int8) if is_bool else x
    acc = np.full(out_shape, np.asarray(init).reshape(-1)[0], data.dtype)
    if math.prod(out_shape):
        with np.errstate(over="ignore", invalid="ignore"):
            for tap in itertools.product(*(range(w) for w in window)):
                sl = tuple(slice(t * r, t * r + s * (o - 1) + 1, s)
                           for t, r, s, o in zip(tap, dilations, strides, out_shape))
                acc = fn(acc, data[sl]).astype(data.dtype, copy=False)
    return acc != 0 if is_bool else acc
