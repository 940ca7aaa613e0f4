"""Comparisons (float, integer, bool), logical ops and SELECT / SELECT_V2 (tflite/kernels/comparisons.cc,
logical.cc, select.cc); the 8-bit comparisons, which rescale both sides first, are in runtime/ops/qmath.py."""

from __future__ import annotations

import numpy as np

from runtime.ops.base import Node


def comparison(fn, operand=None):
    """A comparison kernel: NumPy's broadcasting is the rule TFLite's broadcast comparisons apply,
    the output is BOOL. `operand(node, k, x)` maps input k first (8-bit kernels rescale it)."""
    def kernel(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if operand is not None:
            a, b = operand(node, 0, a), operand(node, 1, b)
        return np.asarray(fn(a, b))

    kernel.__name__ = fn.__name__
    return kernel



less = comparison(np.less)
less_equal = comparison(np.less_equal)
greater = comparison(np.greater)
greater_equal = comparison(np.greater_equal)
equal = comparison(np.equal)
not_equal = comparison(np.not_equal)
logical_and = comparison(np.logical_and)
logical_or = comparison(np.logical_or)


def logical_not(node: Node, x: np.ndarray) -> np.ndarray:
    return np.logical_not(x)


def select(node: Node, cond: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """SELECT (v1): an elementwise pick when all three shapes agree; otherwise a scalar condition
    picks a whole input, a rank-1 one picks whole rows along the first axis (RankOneSelect)."""
    if cond.shape != x.shape and not (cond.size == x.size == y.size == 1):
        cond = cond.reshape(cond.shape + (1,) * (x.ndim - cond.ndim))
    return _pick(node, cond, x, y)


def select_v2(node: Node, cond: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """SELECT_V2: the condition and both inputs broadcast against each other."""
    return _pick(node, cond, x, y)


def _pick(node: Node, cond: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    out = np.where(cond, x, y)
    # Where every tensor holds one element, TFLite keeps the output's declared shape (select.cc).
    want = node.output().shape
    if out.size == 1 and out.shape != want and np.prod(want, dtype=np.int64) == 1:
        out = out.reshape(want)
    return out
