"""Float AVERAGE_POOL_2D (in-image elements only) and MAX_POOL_2D."""

from __future__ import annotations

import numpy as np

from runtime.ops.opcheck import pool_taps
from runtime.ops.base import Node, activate, out_size, pad_before
from runtime.ops.fast_select import fast, pool_work


def windows(node: Node, x: np.ndarray, fill: float):
    o = node.options
    kh, kw, sh, sw = o.filter_height, o.filter_width, o.stride_h, o.stride_w
    _, h, w, _ = x.shape
    oh, ow = out_size(o.padding, h, kh, sh), out_size(o.padding, w, kw, sw)
    pt, _ = pad_before(o.padding, h, kh, sh)
    pl, _ = pad_before(o.padding, w, kw, sw)
    # Only the taps that reach the image (all of them, unless the window is larger than it).
    y0, y1, top, bottom = pool_taps(h, oh, kh, sh, pt)
    x0, x1, left, right = pool_taps(w, ow, kw, sw, pl)
    pads = ((0, 0), (top, bottom), (left, right), (0, 0))
    xp = np.pad(x, pads, constant_values=fill) if top + bottom + left + right else x
    views = [xp[:, r:r + sh * (oh - 1) + 1:sh, c:c + sw * (ow - 1) + 1:sw, :]
             for r in range(y0 - pt + top, y1 - pt + top) for c in range(x0 - pl + left, x1 - pl + left)]
    return views, (h, w, oh, ow, pt, pl)


def window_counts(node: Node, geom) -> np.ndarray:
    """How many in-image pixels each output window covers (TFLite divides by that, not by k*k)."""
    o = node.options
    h, w, oh, ow, pt, pl = geom

    def along(size, out, k, stride, pad):
        start = np.arange(out) * stride - pad
        return np.minimum(start + k, size) - np.maximum(start, 0)

    cy = along(h, oh, o.filter_height, o.stride_h, pt)
    cx = along(w, ow, o.filter_width, o.stride_w, pl)
    return (cy[:, None] * cx[None, :]).astype(np.float32)[None, :, :, None]


def average_pool_2d(node: Node, x: np.ndarray) -> np.ndarray:
    # numba (runtime/ops/fast_pool.py), one pass over the input; None: a case it leaves to this code.
    if (f := fast("fast_pool", pool_work(node, x))) is not None and (out := f.average_pool_2d(node, x)) is not None:
        return out
    views, geom = windows(node, x, 0.0)
    out = views[0].astype(np.float32, copy=True)
    for v in views[1:]:
        out += v
    out /= node.cached("counts", lambda: window_counts(node, geom))
    return activate(out, node.options.fused_activation_function)


def max_pool_2d(node: Node, x: np.ndarray) -> np.ndarray:
    if (f := fast("fast_pool", pool_work(node, x))) is not None and (out := f.max_pool_2d(node, x)) is not None:
        return out
    views, _ = windows(node, x, -np.inf)
    out = views[0].copy()
    for v in views[1:]:
        np.maximum(out, v, out=out)
    return activate(out, node.options.fused_activation_function)
