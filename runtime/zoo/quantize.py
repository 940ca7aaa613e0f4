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
from typing import Any

import numpy as np

from runtime.ir.errors import ModelError
from runtime.ir.graph import DType, Graph, Op, Tensor
from runtime.ir.optypes import OpType
from runtime.zoo.quant_base import (Rewriter, swap_inputs, require_float, quantize_f64_even, symmetric_weights, hybrid_version)

__all__ = ["CALIBRATED", "MODES", "quantize", "to_float16", "to_dynamic_range", "to_int8", "to_uint8"]

MODES = ("float16", "dynamic_range", "int8", "uint8")
CALIBRATED = ("int8", "uint8")  # the modes that need a representative dataset

_FP16_MAX = 65504.0
_HYBRID_MIN_ELEMENTS = 1024  # the converter leaves smaller weights in float


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
    require_float(graph, "float16")
    rw = Rewriter(graph)
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
    rw.ops = [swap_inputs(op, widened) for op in graph.ops]
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
    require_float(graph, "dynamic range")
    rw = Rewriter(graph)
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
                made[w, axis] = rw.add(symmetric_weights(graph.tensors[w], axis, rounding=quantize_f64_even))
            inputs[k] = made[w, axis]
        options = op.options
        if op.type in _ASYMMETRIC_INPUTS:
            options = dataclasses.replace(options, asymmetric_quantize_inputs=True)
        op = dataclasses.replace(op, inputs=tuple(inputs), options=options)
        rw.ops.append(dataclasses.replace(op, version=max(op.version, hybrid_version(op, rw.tensors))))
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

    require_float(graph, "int8")
    check_int8_support(graph)
    ranges = calibrate(graph, representative_data)
    return Int8Rewriter(graph, ranges, io).run()


def to_uint8(graph: Graph, representative_data: Any) -> Graph:
    """uint8 as TF1's quantization-aware training left models (runtime/zoo/quantize_uint8.py):
    activation ranges calibrated on `representative_data` (the forms to_int8 takes), RELU6
    outputs at [0, 6], weights asymmetric per tensor, uint8 inputs and outputs."""
    from runtime.zoo.quantize_uint8 import quantize_uint8

    require_float(graph, "uint8")
    return quantize_uint8(graph, representative_data)
