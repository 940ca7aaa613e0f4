"""Numba AVERAGE_POOL_2D and MAX_POOL_2D, float and 8-bit, equal to runtime/ops/pool.py and qpool.py."""

from __future__ import annotations

import numpy as np

from runtime.ops import quant
from runtime.ops.base import Node, activate, out_size, pad_before
from runtime.ops.fast_conv import clamp_range
from runtime.ops.fast_gemm import writable
from runtime.ops.fast_jit import jit


@jit
def _pool_float(x, out, kh, kw, sh, sw, pt, pl, average, lo, hi, r0, r1):
    """Output rows [r0, r1) of a float pool over the in-image part of each window (TFLite divides
    by the in-image count; a max ignores the padding): sums in the reference's (ky, kx) order,
    divided in float32; maxima with np.maximum's NaN rule (once NaN, NaN stays); then the clamp."""
    n, h, w, c = x.shape
    ow = out.shape[2]
    for b in range(n):
        for oy in range(r0, r1):
            y0, y1 = max(0, oy * sh - pt), min(h, oy * sh - pt + kh)
            for ox in range(ow):
                x0, x1 = max(0, ox * sw - pl), min(w, ox * sw - pl + kw)
                dst = out[b, oy, ox]
                dst[:] = x[b, y0, x0]
                for iy in range(y0, y1):
                    for ix in range(x0 + 1 if iy == y0 else x0, x1):
                        src = x[b, iy, ix]
                        for ch in range(c):
                            if average:
                                dst[ch] += src[ch]
                            elif dst[ch] == dst[ch] and not src[ch] <= dst[ch]:
                                dst[ch] = src[ch]
                count = np.float32((y1 - y0) * (x1 - x0))
                for ch in range(c):
                    v = dst[ch] / count if average else dst[ch]
                    if v < lo:
                        v = lo
                    if v > hi:
                        v = hi
                    dst[ch] = v


@jit
def _pool_int(x, out, total, kh, kw, sh, sw, pt, pl, average, half_away, lo, hi, r0, r1):
    """The 8-bit pool (qpool): exact int64 window sums divided by the in-image count with
    rounding half away from zero (int8; half up for uint8, never negative), or the window's max;
    then the clamp to the fused activation's range. `total` is the caller's scratch."""
    n, h, w, c = x.shape
    ow = out.shape[2]
    for b in range(n):
        for oy in range(r0, r1):
            y0, y1 = max(0, oy * sh - pt), min(h, oy * sh - pt + kh)
            for ox in range(ow):
                x0, x1 = max(0, ox * sw - pl), min(w, ox * sw - pl + kw)
                first = x[b, y0, x0]
                for ch in range(c):
                    total[ch] = first[ch]
                for iy in range(y0, y1):
                    for ix in range(x0 + 1 if iy == y0 else x0, x1):
                        src = x[b, iy, ix]
                        for ch in range(c):
                            if average:
                                total[ch] += src[ch]
                            else:
                                total[ch] = max(total[ch], np.int64(src[ch]))
                count = np.int64((y1 - y0) * (x1 - x0))
                dst = out[b, oy, ox]
                for ch in range(c):
                    v = total[ch]
                    if average:
                        if v > 0 or not half_away:
                            v = (v + count // 2) // count
                        else:
                            v = -((-v + count // 2) // count)
                    dst[ch] = min(max(v, lo), hi)


def _run(node: Node, x: np.ndarray, average: bool) -> np.ndarray | None:
    """The pooled output, or None for what the reference keeps: other element types, windows
    with no in-image element."""
    if x.dtype not in (np.float32, np.int8, np.uint8) or x.ndim != 4:
        return None
    o = node.options
    kh, kw, sh, sw = o.filter_height, o.filter_width, o.stride_h, o.stride_w
    n, h, w, c = x.shape
    oh, ow = out_size(o.padding, h, kh, sh), out_size(o.padding, w, kw, sw)
    pt, _ = pad_before(o.padding, h, kh, sh)
    pl, _ = pad_before(o.padding, w, kw, sw)
    # Every window must reach the image (the reference has its own answer for one that does not).
    if oh <= 0 or ow <= 0 or pt >= kh or pl >= kw or (oh - 1) * sh - pt >= h or (ow - 1) * sw - pl >= w:
        return None
    act = o.fused_activation_function
    xc = writable(x)
    out = node.buffer("fast_out", (n, oh, ow, c), x.dtype)
    if x.dtype == np.float32:
        lo, hi, done = clamp_range(act)
        _pool_float(xc, out, kh, kw, sh, sw, pt, pl, average, lo, hi, 0, oh)
        return out if done else activate(out, act)
    y = node.output().quant
    lo, hi = node.cached("activation_range", lambda: quant.activation_range(act, y.scale[0], y.zero_point[0],
                                                                             x.dtype))
    half_away = x.dtype == np.int8
    _pool_int(xc, out, np.empty(c, np.int64), kh, kw, sh, sw, pt, pl, average, half_away, int(lo), int(hi), 0, oh)
    return out


def average_pool_2d(node: Node, x: np.ndarray) -> np.ndarray | None:
    return _run(node, x, True)


def max_pool_2d(node: Node, x: np.ndarray) -> np.ndarray | None:
    return _run(node, x, False)
