"""Float AVERAGE_POOL_2D (in-image elements only) and MAX_POOL_2D."""

from __future__ import annotations

import numpy as np

from runtime.ops.base import Node, activate, out_size, pad_before


def _windows(node: Node, x: np.ndarray, fill: float):
    o = node.options
    kh, kw, sh, sw = o.filter_height, o.filter_width, o.stride_h, o.stride_w
    _, h, w, _ = x.shape
    oh, ow = out_size(o.padding, h, kh, sh), out_size(o.padding, w, kw, sw)
    pt, pb = pad_before(o.padding, h, kh, sh)
    pl, pr = pad_before(o.padding, w, kw, sw)
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=fill) if pt + pb + pl + pr else x
    views = [xp[:, ky:ky + sh * (oh - 1) + 1:sh, kx:kx + sw * (ow - 1) + 1:sw, :]
             for ky in range(kh) for kx in range(kw)]
    return views, (h, w, oh, ow, pt, pl)


def _counts(node: Node, geom) -> np.ndarray:
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
    views, geom = _windows(node, x, 0.0)
    out = views[0].astype(np.float32, copy=True)
    for v in views[1:]:
        out += v
    out /= node.cached("counts", lambda: _counts(node, geom))
    return activate(out, node.options.fused_activation_function)


def max_pool_2d(node: Node, x: np.ndarray) -> np.ndarray:
    views, _ = _windows(node, x, -np.inf)
    out = views[0].copy()
    for v in views[1:]:
        np.maximum(out, v, out=out)
    return activate(out, node.options.fused_activation_function)
