"""RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR with align_corners / half_pixel_centers, via index tables."""

from __future__ import annotations

import numpy as np

from runtime.ops.base import Node


def _scale(size_in: int, size_out: int, align: bool) -> np.float32:
    if align and size_out > 1:
        return np.float32(size_in - 1) / np.float32(size_out - 1)
    return np.float32(size_in) / np.float32(size_out)


def _bilinear_axis(size_in: int, size_out: int, align: bool, half: bool):
    """Per output index: lower and upper source index and the fractional weight (reference/resize_bilinear.h)."""
    s = _scale(size_in, size_out, align)
    i = np.arange(size_out, dtype=np.float32)
    v = (i + np.float32(0.5)) * s - np.float32(0.5) if half else i * s
    lo = np.maximum(np.floor(v), 0).astype(np.int64)
    hi = np.minimum(np.ceil(v), size_in - 1).astype(np.int64)
    return lo, hi, (v - lo.astype(np.float32)).astype(np.float32)


def _size(node: Node, size: np.ndarray) -> tuple[int, int]:
    oh, ow = (int(v) for v in np.asarray(size).reshape(-1)[:2])
    if oh <= 0 or ow <= 0:
        raise node.fail(f"output size {[oh, ow]} must be positive")
    return oh, ow


def resize_bilinear(node: Node, x: np.ndarray, size: np.ndarray) -> np.ndarray:
    o = node.options
    if o.align_corners and o.half_pixel_centers:
        raise node.fail("align_corners and half_pixel_centers cannot both be set")
    _, h, w, _ = x.shape
    oh, ow = _size(node, size)
    y0, y1, dy = _bilinear_axis(h, oh, o.align_corners, o.half_pixel_centers)
    x0, x1, dx = _bilinear_axis(w, ow, o.align_corners, o.half_pixel_centers)
    dy, dx = dy[None, :, None, None], dx[None, None, :, None]
    top, bottom = x[:, y0], x[:, y1]
    a, c = top[:, :, x0], top[:, :, x1]
    b, d = bottom[:, :, x0], bottom[:, :, x1]
    one = np.float32(1)
    # The same association TFLite uses, so float rounding follows its order.
    out = ((a * (one - dy)) * (one - dx) + (b * dy) * (one - dx)) + (c * (one - dy)) * dx + (d * dy) * dx
    return out.astype(x.dtype, copy=False)


def _nearest_axis(size_in: int, size_out: int, align: bool, half: bool) -> np.ndarray:
    s = _scale(size_in, size_out, align)
    v = (np.arange(size_out, dtype=np.float32) + np.float32(0.5 if half else 0.0)) * s
    # align_corners rounds half away from zero (TfLiteRound); otherwise floor.
    idx = (np.sign(v) * np.floor(np.abs(v) + 0.5)) if align else np.floor(v)
    idx = np.minimum(idx.astype(np.int64), size_in - 1)
    return np.maximum(idx, 0) if half else idx


def resize_nearest_neighbor(node: Node, x: np.ndarray, size: np.ndarray) -> np.ndarray:
    o = node.options
    _, h, w, _ = x.shape
    oh, ow = _size(node, size)
    ys = _nearest_axis(h, oh, o.align_corners, o.half_pixel_centers)
    xs = _nearest_axis(w, ow, o.align_corners, o.half_pixel_centers)
    return x[:, ys][:, :, xs]
