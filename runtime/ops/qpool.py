"""8-bit pooling and MEAN as TFLite's reference kernels compute them (§2.7-2.9)."""

from __future__ import annotations

import numpy as np

from runtime.ops import quant
from runtime.ops import pool
from runtime.ops.base import Node
from runtime.ops.fast_select import fast, pool_work
from runtime.ir.options import Padding


def _clamp(node: Node, v: np.ndarray, dtype) -> np.ndarray:
    y = node.output().quant
    lo, hi = node.cached("activation_range", lambda: quant.activation_range(
        node.options.fused_activation_function, y.scale[0], y.zero_point[0], dtype))
    return np.clip(v, lo, hi).astype(dtype)


def _global(node: Node, x: np.ndarray) -> bool:
    """One window covering the whole unpadded image (a classifier's global average pool)."""
    o = node.options
    return (o.filter_height, o.filter_width) == x.shape[1:3] and (o.padding is Padding.VALID or (
        o.stride_h >= x.shape[1] and o.stride_w >= x.shape[2]))


def average_pool_2d(node: Node, x: np.ndarray) -> np.ndarray:
    """Sum of raw q over in-image elements, divided by their count with rounding (no rescale)."""
    if (f := fast("fast_pool", pool_work(node, x))) is not None and (out := f.average_pool_2d(node, x)) is not None:
        return out  # numba (runtime/ops/fast_pool.py): the same integers in one pass
    if _global(node, x):  # integer sums are exact in any order: one reduction, not k*k adds
        acc = x.sum(axis=(1, 2), keepdims=True, dtype=np.int64)
        n = np.int64(x.shape[1] * x.shape[2])
    else:
        views, geom = pool.windows(node, x.astype(np.int64), 0)
        acc = views[0].copy()
        for v in views[1:]:
            acc += v
        n = node.cached("counts_int", lambda: pool.window_counts(node, geom).astype(np.int64))
    if x.dtype == np.int8:  # round half away from zero, in C integer division
        avg = np.where(acc > 0, (acc + n // 2) // n, -((-acc + n // 2) // n))
    else:
        avg = (acc + n // 2) // n
    return _clamp(node, avg, x.dtype)


def max_pool_2d(node: Node, x: np.ndarray) -> np.ndarray:
    if (f := fast("fast_pool", pool_work(node, x))) is not None and (out := f.max_pool_2d(node, x)) is not None:
        return out
    views, _ = pool.windows(node, x, np.iinfo(x.dtype).min)
    out = views[0].copy()
    for v in views[1:]:
        np.maximum(out, v, out=out)
    return _clamp(node, out, x.dtype)


def mean(node: Node, x: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """Integer sum, 1/N folded into the multiplier, MBQM; no fused activation (§2.9)."""
    return _mean_or_sum(node, x, axis, divide=True)


def sum_(node: Node, x: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """SUM shares MEAN's integer path without the 1/N fold (QuantizedMeanOrSum)."""
    return _mean_or_sum(node, x, axis, divide=False)


def _mean_or_sum(node: Node, x: np.ndarray, axis: np.ndarray, divide: bool) -> np.ndarray:
    from runtime.ops.reduce import reduce_axes

    axes = reduce_axes(node, x, axis)
    xq, yq = node.input(0).quant, node.output().quant
    n = int(np.prod([x.shape[a] for a in axes])) if axes else 1
    s = np.sum(x.astype(np.int64), axis=axes, keepdims=bool(node.options.keep_dims))
    m, sh = (int(v) for v in quant.quantize_multiplier(np.float64(xq.scale[0]) / np.float64(yq.scale[0])))
    if divide:
        k = min(n.bit_length() - 1, 32, 31 + sh)
        m, sh = (m << k) // n, sh - k
    lo, hi = quant.RANGES[x.dtype]
    v = quant.mbqm(s - xq.zero_point[0] * n, m, sh) + yq.zero_point[0]
    return np.clip(v, lo, hi).astype(x.dtype)
