"""ARG_MAX / ARG_MIN, REDUCE_PROD / REDUCE_ANY / REDUCE_ALL and CUMSUM (tflite/kernels/arg_min_max.cc,
reduce.cc, cumsum.cc). ARG_MAX/ARG_MIN compare raw values, so 8-bit inputs need no rescaling."""

from __future__ import annotations

import numpy as np

from runtime.ops.base import Node, axis_of
from runtime.ops.reduce import reducer


def _arg(fn):
    def kernel(node: Node, x: np.ndarray, axis: np.ndarray) -> np.ndarray:
        a = axis_of(int(np.asarray(axis).reshape(-1)[0]), x.ndim, node)
        if x.shape[a] == 0:
            raise node.fail("cannot take ArgMin/ArgMax over an empty axis")
        # The first index of the extreme value wins a tie, as TFLite's strict comparison keeps it.
        return fn(x, axis=a).astype(node.output().dtype.np)

    kernel.__name__ = fn.__name__
    return kernel


arg_max = _arg(np.argmax)
arg_min = _arg(np.argmin)

reduce_prod = reducer(np.prod)
reduce_any = reducer(np.any)
reduce_all = reducer(np.all)


def cumsum(node: Node, x: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """Running sums along one axis in order (optimized_ops::CumSum); `exclusive` starts each sum
    at 0 (the element itself left out), `reverse` runs from the end."""
    a = axis_of(int(np.asarray(axis).reshape(-1)[0]), x.ndim, node)
    o = node.options
    v = np.flip(x, a) if o.reverse else x
    with np.errstate(over="ignore"):
        out = np.cumsum(v, axis=a, dtype=x.dtype)
    if o.exclusive and x.shape[a]:
        out = np.roll(out, 1, axis=a)
        np.moveaxis(out, a, 0)[0] = 0
    return np.flip(out, a) if o.reverse else out
