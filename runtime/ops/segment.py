"""Segment reductions: SEGMENT_SUM and UNSORTED_SEGMENT_SUM / PROD / MAX / MIN."""

from __future__ import annotations

import numpy as np

from runtime.ops.base import Node


def _reduce(node: Node, data: np.ndarray, ids: np.ndarray, count: int, ufunc, start) -> np.ndarray:
    # One accumulation per element, in element order, as TFLite's loop does (the same float32
    # rounding); integer sums and products wrap. Negative ids are skipped
    # (tflite/kernels/internal/reference/reference_ops.h UnsortedSegmentRef).
    rows = data.reshape(ids.size, *data.shape[ids.ndim:])
    ids = ids.reshape(-1).astype(np.int64)
    if np.any(ids >= count):
        raise node.fail(f"segment id {int(ids.max())} is not below the {count} segments")
    out = np.full((count, *rows.shape[1:]), start, data.dtype)
    keep = ids >= 0
    with np.errstate(over="ignore", invalid="ignore"):
        ufunc.at(out, ids[keep], rows[keep])
    return out


def segment_sum(node: Node, data: np.ndarray, ids: np.ndarray) -> np.ndarray:
    count = int(ids.reshape(-1)[-1]) + 1 if ids.size else 0
    return _reduce(node, data, ids, count, np.add, 0)


def _unsorted(ufunc, start):
    def kernel(node: Node, data: np.ndarray, ids: np.ndarray, num_segments: np.ndarray) -> np.ndarray:
        init = start(data.dtype) if callable(start) else start
        return _reduce(node, data, ids, int(np.asarray(num_segments).reshape(-1)[0]), ufunc, init)
    return kernel


def _lowest(dtype):  # std::numeric_limits<T>::lowest(): an empty segment's maximum
    return np.finfo(dtype).min if dtype.kind == "f" else np.iinfo(dtype).min


def _highest(dtype):
    return np.finfo(dtype).max if dtype.kind == "f" else np.iinfo(dtype).max


unsorted_segment_sum = _unsorted(np.add, 0)
unsorted_segment_prod = _unsorted(np.multiply, 1)
# std::max / std::min keep the accumulator against a NaN element, as fmax / fmin do.
unsorted_segment_max = _unsorted(np.fmax, _lowest)
unsorted_segment_min = _unsorted(np.fmin, _highest)
