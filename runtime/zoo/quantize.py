"""Post-training quantizers (float16 weights, dynamic range, full int8, TF1-style uint8) that rewrite
a float Graph the way TFLite's converter does, so LiteRT loads and runs the result.

Conventions copied from TFLite's converter (TF 2.21, checked on models it converted):
- float16: every float32 constant is stored as FLOAT16 (clamped to +-65504, round to nearest even)
  and widened back by a DEQUANTIZE (version 3) placed before the first op.
- dynamic range: constant weights of CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, TRANSPOSE_CONV
  (per channel, axis 0 / 3 / 0 / 0), BATCH_MATMUL and UNIDIRECTIONAL_SEQUENCE_LSTM (per tensor) with
  >= 1024 elements become symmetric int8 in [-127, 127]; FULLY_CONNECTED, BATCH_MATMUL and the LSTM
  get asymmetric_quantize_inputs.
- int8: activations per tensor, asymmetric over the calibrated range widened to include 0; weights
  symmetric per channel; biases int32 at s_in * s_w[c]; fixed outputs for SOFTMAX, LOGISTIC, TANH
  and LOG_SOFTMAX; ops that move values without rescaling share one scale and zero point across
  their inputs and outputs; a requantizing QUANTIZE goes in front of a shared group's input whose
  parameters are already fixed.
- uint8: the style of TF1's quantization-aware-trained models (uint8 everywhere, weights asymmetric
  per tensor, RELU6 outputs at [0, 6], no QUANTIZE/DEQUANTIZE); runtime/zoo/quantize_uint8.py.
- op versions as tflite/tools/versioning/op_version.cc gives them, then raised to the largest
  version among ops of the same type, since the converter writes one operator code per builtin.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from runtime.errors import ModelError
from runtime.graph import DType, Graph, Op, QuantParams, Signature, Tensor
from runtime.optypes import OpType

__all__ = ["CALIBRATED", "MODES", "quantize", "to_float16", "to_dynamic_range", "to_int8", "to_uint8"]

MODES = ("float16", "dynamic_range", "int8", "uint8")
CALIBRATED = ("int8", "uint8")  # the modes that need a representative dataset

_FP16_MAX = 65504.0
_HYBRID_MIN_ELEMENTS = 1024  # the converter leaves smaller weights in float
_INT8_MIN, _INT8_MAX = -128, 127
_INT32 = np.iinfo(np.int32)


# -- public API ---------------------------------------------------------------------------------


def quantize(graph: Graph, mode: str, representative_data: Any = None, **kw: Any) -> Graph:
    """Quantize `graph` in one of MODES; int8 and uint8 need a representative dataset (int8 also
    takes io=)."""
    if mode not in MODES:
        raise ModelError(f"unknown quantization mode '{mode}'; known: {', '.join(MODES)}")
    if mode in CALIBRATED and representative_data is None:
        raise ModelError(f"{mode} quantization needs a representative dataset (representative_data=) "
                         "to calibrate activation ranges")
    if mode == "int8":
        return to_int8(graph, representative_data, **kw)
    extra = ["representative_data"] * (representative_data is not None and mode not in CALIBRATED) + sorted(kw)
    if extra:
        raise ModelError(f"quantization mode '{mode}' takes no {', '.join(extra)}")
    if mode == "uint8":
        return to_uint8(graph, representative_data)
    return to_float16(graph) if mode == "float16" else to_dynamic_range(graph)


def to_float16(graph: Graph) -> Graph:
    """Store every float32 constant as float16 followed by a DEQUANTIZE to float32."""
    _require_float(graph, "float16")
    rw = _Rewriter(graph)
    widened: dict[int, int] = {}
    for op in graph.ops:
        for t in op.inputs:
            tensor = graph.tensors[t] if t >= 0 else None
            if (tensor is None or t in widened or not tensor.is_constant or tensor.is_variable
                    or tensor.dtype is not DType.FLOAT32):
                continue
            half = np.clip(tensor.data, -_FP16_MAX, _FP16_MAX).astype(np.float16)
            rw.tensors[t] = dataclasses.replace(tensor, dtype=DType.FLOAT16, data=half)
            widened[t] = rw.add(Tensor(f"{tensor.name}/dequantize", tensor.shape, DType.FLOAT32))
            rw.prologue.append(Op(OpType.DEQUANTIZE, (t,), (widened[t],), version=3))
    rw.ops = [_swap_inputs(op, widened) for op in graph.ops]
    return rw.finish()


# (weight inputs, per-channel axis or None for per tensor) of the ops with hybrid kernels.
_HYBRID_WEIGHTS = {
    OpType.CONV_2D: ((1,), 0),
    OpType.DEPTHWISE_CONV_2D: ((1,), 3),
    OpType.FULLY_CONNECTED: ((1,), 0),
    OpType.TRANSPOSE_CONV: ((1,), 0),
    OpType.BATCH_MATMUL: ((1,), None),
    # input-to-gate and recurrent-to-gate matrices, peepholes, projection
    OpType.UNIDIRECTIONAL_SEQUENCE_LSTM: ((1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 16), None),
}

# Ops whose options carry the flag; the converter sets it on every hybrid op that has one.
_ASYMMETRIC_INPUTS = frozenset({OpType.FULLY_CONNECTED, OpType.BATCH_MATMUL, OpType.UNIDIRECTIONAL_SEQUENCE_LSTM})


def to_dynamic_range(graph: Graph) -> Graph:
    """Weights of >= 1024 elements become symmetric int8; activations stay float32. An LSTM is
    converted only when all its weights qualify (its hybrid kernel takes all int8 or none)."""
    _require_float(graph, "dynamic range")
    rw = _Rewriter(graph)
    made: dict[tuple[int, int | None], int] = {}
    for op in graph.ops:
        slots = _hybrid_slots(op, graph)
        if not slots:
            rw.ops.append(op)
            continue
        axis = _HYBRID_WEIGHTS[op.type][1]
        inputs = list(op.inputs)
        for k in slots:
            w = op.inputs[k]
            if (w, axis) not in made:
                made[w, axis] = rw.add(_symmetric_weights(graph.tensors[w], axis, rounding=_quantize_f64_even))
            inputs[k] = made[w, axis]
        options = op.options
        if op.type in _ASYMMETRIC_INPUTS:
            options = dataclasses.replace(options, asymmetric_quantize_inputs=True)
        op = dataclasses.replace(op, inputs=tuple(inputs), options=options)
        rw.ops.append(dataclasses.replace(op, version=max(op.version, _hybrid_version(op, rw.tensors))))
    return rw.finish()


def _hybrid_slots(op: Op, graph: Graph) -> list[int]:
    """Input positions of the weights to quantize (empty: the op stays float)."""
    if op.type not in _HYBRID_WEIGHTS:
        return []
    present = [k for k in _HYBRID_WEIGHTS[op.type][0] if k < len(op.inputs) and op.inputs[k] >= 0]
    big = [k for k in present if graph.tensors[op.inputs[k]].is_constant
           and graph.tensors[op.inputs[k]].dtype is DType.FLOAT32
           and graph.tensors[op.inputs[k]].data.size >= _HYBRID_MIN_ELEMENTS]
    if op.type is OpType.UNIDIRECTIONAL_SEQUENCE_LSTM and big != present:
        return []
    return big


def to_int8(graph: Graph, representative_data: Any, io: str = "int8") -> Graph:
    """Full-integer quantization calibrated on `representative_data` (an iterable of samples, or
    a callable returning one; a sample is an array, a list of arrays, or a dict by input name).
    io="int8" makes the model's inputs and outputs int8; io="float" keeps them float32 with a
    QUANTIZE in front and a DEQUANTIZE behind."""
    if io not in ("int8", "float"):
        raise ModelError(f"io must be 'int8' or 'float', not '{io}'")
    from runtime.zoo.quantize_int8 import Int8Rewriter, calibrate, check_int8_support

    _require_float(graph, "int8")
    check_int8_support(graph)
    ranges = calibrate(graph, representative_data)
    return Int8Rewriter(graph, ranges, io).run()


def to_uint8(graph: Graph, representative_data: Any) -> Graph:
    """uint8 as TF1's quantization-aware training left models (runtime/zoo/quantize_uint8.py):
    activation ranges calibrated on `representative_data` (the forms to_int8 takes), RELU6
    outputs at [0, 6], weights asymmetric per tensor, uint8 inputs and outputs."""
    from runtime.zoo.quantize_uint8 import quantize_uint8

    _require_float(graph, "uint8")
    return quantize_uint8(graph, representative_data)


# -- shared machinery ---------------------------------------------------------------------------


class _Rewriter:
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

        return Graph(
            tensors=tuple(self.tensors[t] for t in used),
            ops=tuple(dataclasses.replace(op, inputs=tuple(new[t] for t in op.inputs),
                                          outputs=tuple(new[t] for t in op.outputs)) for op in ops),
            inputs=tuple(new[t] for t in inputs), outputs=tuple(new[t] for t in outputs), name=g.name,
            signatures=tuple(Signature(s.key, sig_map(s.inputs), sig_map(s.outputs)) for s in g.signatures),
        ).validate()


def _swap_inputs(op: Op, swap: dict[int, int]) -> Op:
    return dataclasses.replace(op, inputs=tuple(swap.get(t, t) for t in op.inputs))


def _unify_versions(ops: list[Op]) -> list[Op]:
    """One operator code per builtin, at the largest version any of its ops needs (what
    op_version.cc's UpdateOpVersion leaves in a converted model)."""
    top: dict[OpType, int] = {}
    for op in ops:
        top[op.type] = max(top.get(op.type, 1), op.version)
    return [dataclasses.replace(op, version=top[op.type]) for op in ops]


def _require_float(graph: Graph, mode: str) -> None:
    for t, tensor in enumerate(graph.tensors):
        if tensor.quant is not None or tensor.dtype is DType.FLOAT16:
            raise ModelError(f"{mode} quantization needs a float model, but {graph.describe_tensor(t)} is "
                             f"already {tensor.dtype.name}{' quantized' if tensor.quant else ''}")


def _round_half_away(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return np.trunc(x + np.copysign(0.5, x))


def _quantize_f32(values: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """round(v / s) as the converter computes it: v times the float32 reciprocal of s, in float32,
    ties away from zero. Every weight and bias of six converter-made int8 models matches this
    (a float32 or float64 division each miss one value in a few thousand)."""
    inverse = np.float32(1) / np.asarray(scale, np.float32)
    return _round_half_away(np.asarray(values, np.float32) * inverse)


def _channel_shape(ndim: int, axis: int | None) -> tuple[int, ...]:
    shape = [1] * ndim
    if axis is not None:
        shape[axis] = -1
    return tuple(shape)


def _quantize_f64_even(values: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """round(v / s) as the converter's dynamic-range pass computes it (MLIR's quantizer): a float64
    division, ties to even. Its weights match this and not _quantize_f32 (94.5 in float32 is
    94.49999... in float64)."""
    return np.rint(np.asarray(values, np.float64) / np.asarray(scale, np.float32).astype(np.float64))


def _symmetric_weights(tensor: Tensor, axis: int | None,
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
    q = np.clip((rounding or _quantize_f32)(tensor.data, scale.reshape(_channel_shape(w.ndim, axis))), -127, 127)
    quant = QuantParams(tuple(float(s) for s in scale), (0,) * scale.size, axis if axis is not None else 0)
    return Tensor(tensor.name, tensor.shape, DType.INT8, quant, q.astype(np.int8))


def _hybrid_version(op: Op, tensors: list[Tensor]) -> int:
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
        return _transpose_conv_version(op, 2)
    if op.type is OpType.UNIDIRECTIONAL_SEQUENCE_LSTM:
        return 4 if op.options.diagonal_recurrent_tensors else 3
    return 4  # BATCH_MATMUL with asymmetric_quantize_inputs


def _transpose_conv_version(op: Op, base: int) -> int:
    if op.options is not None and getattr(op.options, "fused_activation_function", 0):
        return 4
    return 3 if len(op.inputs) > 3 and op.inputs[3] >= 0 else base


# -- int8: which ops, calibration, parameters -------------------------------------------------------
