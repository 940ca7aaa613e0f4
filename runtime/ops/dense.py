"""Float FULLY_CONNECTED (each image summed as it is alone) and BATCH_MATMUL (straight onto BLAS)."""

from __future__ import annotations

import numpy as np

from runtime.ops.base import Node, activate
from runtime.ops.ordered import in_dynamic_range_model, ordered_matmul


def fully_connected(node: Node, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    o = node.options
    units, depth = w.shape
    if x.size % depth:
        raise node.fail(f"input of shape {list(x.shape)} does not split into rows of {depth}")
    wt = node.cached("wt", lambda: np.ascontiguousarray(w.T))
    rows = x.reshape(-1, depth)
    out = _sums(node, rows, wt, x.shape[0] if x.ndim > 1 else 1)
    if bias is not None:
        out += bias
    out = activate(out, o.fused_activation_function)
    if o.keep_num_dims:
        return out.reshape(*x.shape[:-1], units)
    return out


def batch_matmul(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    o = node.options
    if o.adj_x:
        a = np.swapaxes(a, -1, -2)
    if o.adj_y:
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b)


def _sums(node: Node, rows: np.ndarray, wt: np.ndarray, images: int) -> np.ndarray:
    """rows @ wt, each of the `images` blocks of rows multiplied as when it runs alone: BLAS sums a
    row differently as the row count changes (sgemv for one row, sgemm's edge blocks for others),
    so a batch gets the bits of one by one. A small Python loop over images; BLAS does the rest."""
    if in_dynamic_range_model(node.graph):  # an ulp feeding run-time quantization matters
        return ordered_matmul(rows, wt)
    if images <= 1 or len(rows) % images:   # one image, or rows that are not whole images: one block
        return rows @ wt
    out = np.empty((len(rows), wt.shape[1]), np.result_type(rows, wt))
    step = len(rows) // images
    for i in range(0, len(rows), step):
        np.matmul(rows[i:i + step], wt, out=out[i:i + step])
    return out
