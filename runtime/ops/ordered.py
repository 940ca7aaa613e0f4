"""Float sums in the order of TFLite's reference kernels, for the float ops of dynamic-range models.

A hybrid op quantizes its float input per image or row at run time (runtime/ops/hybrid.py). One ulp
of difference in a float op in front of it can move an element across a rounding boundary: the
hybrid op is then off by a whole quantization step, and every later hybrid op carries and widens it
(MobileNet v2 ended a quarter of its output range away from LiteRT). BLAS sums in its own order, so
in a model with hybrid ops the float CONV_2D and FULLY_CONNECTED sum as reference_ops::Conv and
reference_ops::FullyConnected do: one float32 running total per output, starting at 0, each product
rounded to float32 before it is added, the bias added to the finished total. The converter leaves
only weights under 1024 elements in float, so these sums are short and the loop stays cheap.
"""

from __future__ import annotations

import weakref

import numpy as np

from runtime.ir.graph import DType, Graph

__all__ = ["in_dynamic_range_model", "ordered_matmul"]

_EIGHT_BIT = (DType.INT8, DType.UINT8)
_SEEN: "weakref.WeakKeyDictionary[Graph, bool]" = weakref.WeakKeyDictionary()


def in_dynamic_range_model(graph: Graph) -> bool:
    """Some op of the graph takes float data against 8-bit constant weights (a hybrid op)."""
    found = _SEEN.get(graph)
    if found is None:
        found = _SEEN[graph] = any(_is_hybrid(op, graph) for op in graph.ops)
    return found


def _is_hybrid(op, graph: Graph) -> bool:
    tensors = graph.tensors
    data = next((tensors[t] for t in op.inputs if t >= 0 and not tensors[t].is_constant), None)
    return (data is not None and data.dtype is DType.FLOAT32
            and any(t >= 0 and tensors[t].is_constant and tensors[t].dtype in _EIGHT_BIT for t in op.inputs[1:]))


def ordered_matmul(rows: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """rows [P, K] @ weights [K, N] in float32, summed over K from first to last, each product
    rounded before it is added (no fused multiply-add), as the reference kernels' inner loops do."""
    rows = np.asarray(rows, np.float32)
    total = np.zeros((rows.shape[0], weights.shape[1]), np.float32)
    product = np.empty_like(total)
    for k in range(weights.shape[0]):
        np.multiply(rows[:, k:k + 1], weights[k], out=product)
        total += product
    return total
