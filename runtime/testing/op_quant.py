"""8-bit versions of generated float graphs: int8 as TFLite's converter makes it, uint8 as its legacy form."""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from runtime.ir.graph import DType, Graph, QuantParams, Tensor
from runtime.ir.optypes import OpType
from runtime.testing.op_builders import Domain, sample
from runtime.zoo.quantize import to_int8
from runtime.ops.validate import validate_graph

__all__ = ["quantized_graph", "to_uint8"]

CALIBRATION_SAMPLES = 4

# (data input, weights input, bias input) of the ops with weights.
_WEIGHTED = {OpType.CONV_2D: (0, 1, 2), OpType.DEPTHWISE_CONV_2D: (0, 1, 2),
             OpType.FULLY_CONNECTED: (0, 1, 2), OpType.TRANSPOSE_CONV: (2, 1, 3)}


def quantized_graph(graph: Graph, domains: Sequence[Domain], dtype: str, seed: int) -> Graph:
    """`graph` in "int8" (calibrated on a few samples from the inputs' domains) or "uint8"."""
    rng = np.random.default_rng(seed)
    shapes = [graph.tensors[t].shape for t in graph.inputs]
    samples = [[sample(d, s, rng) for d, s in zip(domains, shapes)] for _ in range(CALIBRATION_SAMPLES)]
    int8 = to_int8(graph, samples)
    return int8 if dtype == "int8" else to_uint8(int8)


def _shifted(tensor: Tensor) -> Tensor:
    """An int8 tensor as uint8: the same real values, every code and zero point moved up by 128."""
    q = tensor.quant
    quant = QuantParams(q.scale, tuple(z + 128 for z in q.zero_point), q.axis)
    data = None if tensor.data is None else (tensor.data.astype(np.int16) + 128).astype(np.uint8)
    return dataclasses.replace(tensor, dtype=DType.UINT8, quant=quant, data=data)


def _per_tensor_weights(tensor: Tensor) -> Tensor:
    """Per-channel symmetric int8 weights re-quantized as TFLite's uint8 kernels want them: one
    asymmetric scale and zero point for the whole tensor."""
    q = tensor.quant
    shape = [1] * tensor.data.ndim
    shape[q.axis] = -1
    real = (tensor.data.astype(np.float64) * np.asarray(q.scale).reshape(shape))
    lo, hi = min(float(real.min()), 0.0), max(float(real.max()), 0.0)
    scale = float(np.float32((hi - lo) / 255.0 if hi > lo else 1.0))
    zero = int(np.clip(np.round(-lo / scale), 0, 255))
    data = np.clip(np.round(real / scale) + zero, 0, 255).astype(np.uint8)
    return dataclasses.replace(tensor, dtype=DType.UINT8, quant=QuantParams((scale,), (zero,)), data=data)


def _rebiased(bias: Tensor, s_in: float, s_w: float) -> Tensor:
    """An int32 bias re-expressed at the new scale s_in * s_w (float32 product, as TFLite stores it)."""
    real = bias.data.astype(np.float64) * np.asarray(bias.quant.scale, np.float64)
    scale = float(np.float32(np.float32(s_in) * np.float32(s_w)))
    data = np.clip(np.round(real / scale), -2**31, 2**31 - 1).astype(np.int32)
    return dataclasses.replace(bias, quant=QuantParams((scale,), (0,)), data=data)


def to_uint8(graph: Graph) -> Graph:
    """The legacy uint8 form of an int8 graph: activations and plain constants shifted by 128,
    conv/FC weights per-tensor asymmetric uint8 and their biases rescaled to match."""
    tensors = list(graph.tensors)
    weights: dict[int, tuple[int, int]] = {}  # weights tensor -> (data input, bias)
    for op in graph.ops:
        if op.type in _WEIGHTED:
            x, w, b = _WEIGHTED[op.type]
            bias = op.inputs[b] if b < len(op.inputs) else -1
            weights[op.inputs[w]] = (op.inputs[x], bias)
    for t, tensor in enumerate(graph.tensors):
        if t in weights:
            tensors[t] = _per_tensor_weights(tensor)
        elif tensor.dtype is DType.INT8 and tensor.quant is not None:
            tensors[t] = _shifted(tensor)
    for w, (x, bias) in weights.items():
        if bias >= 0:
            tensors[bias] = _rebiased(graph.tensors[bias], tensors[x].quant.scale[0], tensors[w].quant.scale[0])
    # The converter's uint8 ops are the first versions: the int8 bumps do not apply.
    ops = tuple(dataclasses.replace(op, version=1) for op in graph.ops)
    return validate_graph(Graph(tuple(tensors), ops, graph.inputs, graph.outputs, graph.name, graph.signatures))
