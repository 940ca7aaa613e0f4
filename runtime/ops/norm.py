"""Float L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION and L2_POOL_2D (reference_ops in
tflite/kernels/internal/reference/l2normalization.h, reference_ops.h, pooling.h). The 8-bit
L2_NORMALIZATION is in runtime/ops/qmath.py."""

from __future__ import annotations

import numpy as np

from runtime.ops.base import Node, activate
from runtime.ops.pool import window_counts, windows

_F32 = np.float32


def l2_normalization(node: Node, x: np.ndarray) -> np.ndarray:
    """Each vector along the last axis over its norm, the norm held at or above 1e-6."""
    with np.errstate(over="ignore", invalid="ignore"):  # inf norms give 0 or NaN, as in C
        norm = np.sqrt(np.einsum("...i,...i->...", x, x, dtype=_F32))[..., None]
        return (x / np.maximum(norm, _F32(1e-6))).astype(_F32)


def local_response_normalization(node: Node, x: np.ndarray) -> np.ndarray:
    """x * (bias + alpha * sum of squares) ** -beta, the sum taken over channels [c - r, c + r):
    TFLite's reference kernel stops one channel short of TensorFlow's [c - r, c + r]."""
    o = node.options
    depth = x.shape[-1]
    c = np.arange(depth)
    begin = np.clip(c - o.radius, 0, depth)
    end = np.clip(c + o.radius, 0, depth)
    # Window sums as differences of float64 prefix sums: what they lose to cancellation stays far
    # below float32's precision, so they match TFLite's float32 running sums within its rounding.
    with np.errstate(all="ignore"):  # infinities and NaNs propagate as in C
        squares = np.square(x, dtype=np.float64)
        prefix = np.concatenate([np.zeros(x.shape[:-1] + (1,)), np.cumsum(squares, axis=-1)], axis=-1)
        accum = np.where(end > begin, prefix[..., end] - prefix[..., begin], 0.0).astype(_F32)
        multiplier = np.power(_F32(o.bias) + _F32(o.alpha) * accum, -_F32(o.beta))
        return (x * multiplier).astype(_F32)


def l2_pool_2d(node: Node, x: np.ndarray) -> np.ndarray:
    """sqrt(sum of squares / count) over each window's in-image pixels, then the activation."""
    with np.errstate(over="ignore"):
        views, geom = windows(node, np.square(x), 0.0)
    total = views[0].astype(_F32, copy=True)
    for v in views[1:]:
        total += v
    with np.errstate(over="ignore", invalid="ignore"):
        total /= node.cached("counts", lambda: window_counts(node, geom))
        return activate(np.sqrt(total), node.options.fused_activation_function)
