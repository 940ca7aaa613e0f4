"""Float FULLY_CONNECTED and BATCH_MATMUL, both straight onto BLAS."""

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
    # Feeding a hybrid op's run-time quantization, an ulp matters: reference_ops' order then.
    out = ordered_matmul(rows, wt) if in_dynamic_range_model(node.graph) else rows @ wt
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
