"""Reductions over the axes given by a second input: MEAN, SUM, REDUCE_MAX, REDUCE_MIN."""

from __future__ import annotations

import numpy as np

from runtime.ops.base import Node


def reduce_axes(node: Node, x: np.ndarray, axis: np.ndarray) -> tuple[int, ...]:
    rank = x.ndim
    axes = []
    for a in np.asarray(axis).reshape(-1):
        a = int(a)
        if not -rank <= a < rank:
            raise node.fail(f"reduction axis {a} is out of range for rank {rank}")
        axes.append(a % rank)
    return tuple(sorted(set(axes)))


def reducer(fn):
    def kernel(node: Node, x: np.ndarray, axis: np.ndarray) -> np.ndarray:
        out = fn(x, axis=reduce_axes(node, x, axis), keepdims=bool(node.options.keep_dims))
        return np.asarray(out, dtype=x.dtype)

    kernel.__name__ = fn.__name__
    return kernel


def _mean(x, axis, keepdims):
    if x.dtype.kind == "f":
        return np.mean(x, axis=axis, keepdims=keepdims, dtype=np.float32)
    # Integer MEAN truncates toward zero after the sum (reference/reduce.h).
    s = np.sum(x, axis=axis, keepdims=keepdims, dtype=np.int64)
    n = int(np.prod([x.shape[a] for a in axis])) if axis else 1
    return np.trunc(s / n).astype(x.dtype)


mean = reducer(_mean)
sum_ = reducer(np.sum)
reduce_max = reducer(np.max)
reduce_min = reducer(np.min)
