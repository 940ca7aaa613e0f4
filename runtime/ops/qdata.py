"""8-bit CONCATENATION (uint8 rescales inputs, int8 only copies) and integer RESIZE_BILINEAR (§2.15, §2.17)."""

from __future__ import annotations

import numpy as np

from runtime.ops import quant
from runtime.ops.base import Node, axis_of


def concatenation(node: Node, *xs: np.ndarray) -> np.ndarray:
    y = node.output().quant
    s_out, zp_out = np.float32(y.scale[0]), int(y.zero_point[0])
    parts = []
    for k, x in enumerate(xs):
        q = node.input(k).quant
        same = np.float32(q.scale[0]) == s_out and int(q.zero_point[0]) == zp_out
        if x.dtype == np.int8 and not same:
            raise node.fail(f"int8 input {k} has scale/zero point {q.scale[0]}/{q.zero_point[0]}, "
                            f"output {y.scale[0]}/{y.zero_point[0]}; TFLite requires them equal")
        if same:
            parts.append(x)
            continue
        sc = np.float32(np.float32(q.scale[0]) * np.float32(np.float32(1) / s_out))
        bias = np.float32(-q.zero_point[0] * sc)
        v = quant.round_half_away((x.astype(np.float32) * sc + bias).astype(np.float32)) + zp_out
        parts.append(np.clip(v, 0, 255).astype(np.uint8))
    return np.concatenate(parts, axis=axis_of(node.options.axis, xs[0].ndim, node))


def _axis(size_in: int, size_out: int, align: bool, half: bool):
    """Integer source coordinates with 10 fractional bits: lower, upper index and weights."""
    if align and size_out > 1:
        scale = (1024 * (size_in - 1) + (size_out - 1) // 2) // (size_out - 1)
    else:
        scale = (1024 * size_in + size_out // 2) // size_out
    v = np.arange(size_out, dtype=np.int64) * scale
    if half:
        v = v + scale // 2 - 512
    lo = np.maximum(np.where(v < 0, -((-v) // 1024), v // 1024), 0)  # C trunc-div, then clamp
    hi = np.minimum(np.where(v + 1023 < 0, -((-(v + 1023)) // 1024), (v + 1023) // 1024), size_in - 1)
    frac = v - 1024 * lo
    return lo, hi, 1024 - frac, frac


def resize_bilinear(node: Node, x: np.ndarray, size: np.ndarray) -> np.ndarray:
    o = node.options
    if o.align_corners and o.half_pixel_centers:
        raise node.fail("align_corners and half_pixel_centers cannot both be set")
    if x.dtype == np.uint8:  # the uint8 reference path is the float kernel, +0.5 and truncation
        from runtime.ops.resize import resize_bilinear as float_resize

        out = float_resize(node, x.astype(np.float32), size)
        return np.clip(np.floor(out + np.float32(0.5)), 0, 255).astype(np.uint8)
    _, h, w, _ = x.shape
    oh, ow = (int(v) for v in np.asarray(size).reshape(-1)[:2])
    y0, y1, wy0, wy1 = _axis(h, oh, o.align_corners, o.half_pixel_centers)
    x0, x1, wx0, wx1 = _axis(w, ow, o.align_corners, o.half_pixel_centers)
    q = x.astype(np.int64)
    top, bottom = q[:, y0], q[:, y1]
    wy0, wy1 = wy0[None, :, None, None], wy1[None, :, None, None]
    wx0, wx1 = wx0[None, None, :, None], wx1[None, None, :, None]
    o20 = (top[:, :, x0] * wy0 * wx0 + bottom[:, :, x0] * wy1 * wx0 + top[:, :, x1] * wy0 * wx1
           + bottom[:, :, x1] * wy1 * wx1)
    half = np.where(o20 > 0, 1 << 19, -(1 << 19))
    num = o20 + half
    out = np.where(num < 0, -((-num) >> 20), num >> 20)  # C trunc-div by 2**20
    lo, hi = quant.RANGES[x.dtype]
    return np.clip(out, lo, hi).astype(x.dtype)
