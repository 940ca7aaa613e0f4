"""What the quantizers share: the graph rewriter, the converter's rounding rules and op versions."""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from runtime.ir.errors import ModelError
from runtime.ir.graph import DType, Graph, Op, QuantParams, Signature, Tensor
from runtime.ir.optypes import OpType
from runtime.ops.validate import validate_graph

INT8_MIN, _INT8_MAX = -128, 127
INT32 = np.iinfo(np.int32)



class Rewriter:
    """Tensors and ops of the graph being built: prologue ops, then the body; finish() drops
    tensors nothing uses any more, renumbers, and settles op versions."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.tensors: list[Tensor] = list(graph.tensors)
        self.prologue: list[Op] = []
        self.ops: list[Op] = []
        self.epilogue: list[Op] = []

    def add(self, tensor: Tensor) -> int:
        self.tensors.append(tensor)
        return len(self.tensors) - 1

    def finish(self) -> Graph:
        g = self.graph
        inputs, outputs = g.inputs, g.outputs
        ops = _unify_versions(self.prologue + self.ops + self.epilogue)
        used = sorted({t for op in ops for t in (*op.inputs, *op.outputs) if t >= 0} | set(inputs) | set(outputs))
        new = {old: k for k, old in enumerate(used)}
        new[-1] = -1

        def sig_map(pairs):
            return tuple((n, new[t]) for n, t in pairs)

        return validate_graph(Graph(
            tensors=tuple(self.tensors[t] for t in used),
            ops=tuple(dataclasses.replace(op, inputs=tuple(new[t] for t in op.inputs),
                                          outputs=tuple(new[t] for t in op.outputs)) for op in ops),
            inputs=tuple(new[t] for t in inputs), outputs=tuple(new[t] for t in outputs), name=g.name,
            signatures=tuple(Signature(s.key, sig_map(s.inputs), sig_map(s.outputs)) for s in g.signatures),
        ))


def swap_inputs(op: Op, swap: dict[int, int]) -> Op:
    return dataclasses.replace(op, inputs=tuple(swap.get(t, t) for t in op.inputs))


def _unify_versions(ops: list[Op]) -> list[Op]:
    """One operator code per builtin, at the largest version any of its ops needs (what
    op_version.cc's UpdateOpVersion leaves in a converted model)."""
    top: dict[OpType, int] = {}
    for op in ops:
        top[op.type] = max(top.get(op.type, 1), op.version)
    return [dataclasses.replace(op, version=top[op.type]) for op in ops]


def require_float(graph: Graph, mode: str) -> None:
    for t, tensor in enumerate(graph.tensors):
        if tensor.quant is not None or tensor.dtype is DType.FLOAT16:
            raise ModelError(f"{mode} quantization needs a float model, but {graph.describe_tensor(t)} is "
                             f"already {tensor.dtype.name}{' quantized' if tensor.quant else ''}")


def round_half_away(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return np.trunc(x + np.copysign(0.5, x))


def quantize_f32(values: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """round(v / s) as the converter computes it: v times the float32 reciprocal of s, in float32,
    ties away from zero. Every weight and bias of six converter-made int8 models matches this
    (a float32 or float64 division each miss one value in a few thousand)."""
    inverse = np.float32(1) / np.asarray(scale, np.float32)
    return round_half_away(np.asarray(values, np.float32) * inverse)


def _channel_shape(ndim: int, axis: int | None) -> tuple[int, ...]:
    shape = [1] * ndim
    if axis is not None:
        shape[axis] = -1
    return tuple(shape)


def quantize_f64_even(values: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """round(v / s) as the converter's dynamic-range pass computes it (MLIR's quantizer): a float64
    division, ties to even. Its weights match this and not quantize_f32 (94.5 in float32 is
    94.49999... in float64)."""
    return np.rint(np.asarray(values, np.float64) / np.asarray(scale, np.float32).astype(np.float64))


def symmetric_weights(tensor: Tensor, axis: int | None,
                       rounding: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None) -> Tensor:
    """int8 in [-127, 127] with zero point 0; scale = max|w| / 127 per channel along `axis`
    (per tensor when None), as the converter computes it (matches its scales bit for bit).
    `rounding` maps values and scales to steps (default: the full-integer path's)."""
    w = np.asarray(tensor.data, np.float64)
    reduce = tuple(d for d in range(w.ndim) if d != axis) if axis is not None else None
    peak = np.abs(w).max(axis=reduce) if w.size else np.zeros(w.shape[axis] if axis is not None else ())
    scale = np.atleast_1d((peak / 127.0).astype(np.float32))
    # An all-zero channel needs some positive scale; any works for its weights, and a small one
    # keeps that channel's bias precise.
    positive = scale[scale > 0]
    scale[scale == 0] = positive.min() if positive.size else np.float32(1.0)
    q = np.clip((rounding or quantize_f32)(tensor.data, scale.reshape(_channel_shape(w.ndim, axis))), -127, 127)
    quant = QuantParams(tuple(float(s) for s in scale), (0,) * scale.size, axis if axis is not None else 0)
    return Tensor(tensor.name, tensor.shape, DType.INT8, quant, q.astype(np.int8))


def hybrid_version(op: Op, tensors: list[Tensor]) -> int:
    """op_version.cc for float input, int8 weights, float output."""
    weights = tensors[op.inputs[1]]
    per_channel = weights.quant is not None and weights.quant.per_channel
    if op.type is OpType.CONV_2D:
        return 5 if per_channel else 2
    if op.type is OpType.DEPTHWISE_CONV_2D:
        return 6 if per_channel else 4
    if op.type is OpType.FULLY_CONNECTED:
        return 12 if per_channel else 9
    if op.type is OpType.TRANSPOSE_CONV:
        return transpose_conv_version(op, 2)
    if op.type is OpType.UNIDIRECTIONAL_SEQUENCE_LSTM:
        return 4 if op.options.diagonal_recurrent_tensors else 3
    return 4  # BATCH_MATMUL with asymmetric_quantize_inputs


def transpose_conv_version(op: Op, base: int) -> int:
    if op.options is not None and getattr(op.options, "fused_activation_function", 0):
        return 4
    return 3 if len(op.inputs) > 3 and op.inputs[3] >= 0 else base


# -- int8: which ops, calibration, parameters -------------------------------------------------------
