"""uint8 quantization in the style of TF1's quantization-aware-trained models (the 8-bit MobileNets
TFLite's performance pages measured): uint8 activations, inputs and outputs; uint8 weights with one
asymmetric scale and zero point per tensor; int32 biases at s_in * s_w; no QUANTIZE or DEQUANTIZE at
the model's edges.

- Activation ranges: QAT learns them; the representative data's min and max stand in, except where
  training pins the range: an output with a fused (or standalone) RELU6 is [0, 6] and RELU_N1_TO_1
  [-1, 1] (a RELU's [0, max] is what calibration gives anyway).
- Weights: TF's FakeQuant nudging over [min(w, 0), max(w, 0)]: scale = range / 255, zero point
  round(-min / scale) clamped to [0, 255].
- Fixed outputs as TFLite's uint8 kernels require them: SOFTMAX and LOGISTIC 1/256 at 0, TANH 1/128
  at 128, LOG_SOFTMAX 16/256 at 255.
- CONCATENATION keeps each input's parameters and covers the union of their ranges (TOCO's default,
  change_concat_input_ranges off: the uint8 kernel rescales its inputs). Every other op shares or
  takes parameters as in the int8 path (runtime/zoo/quantize_int8.py), whose rewriter this reuses.
- Op versions as op_version.cc gives them for uint8: 1, unless an option or shape raises it
  (grouped or dilated convolution, FULLY_CONNECTED without bias or with keep_num_dims, ...).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from runtime.ir.graph import DType, Graph, Op, QuantParams, Tensor
from runtime.ir.optypes import OpType
from runtime.ir.options import Activation
from runtime.zoo.quant_base import quantize_f32
from runtime.zoo.quantize_int8 import (INT8_VERSION, RESCALING, Int8Rewriter, activation_params,
                                       float_activation, int8_version, calibrate, check_int8_support)

__all__ = ["LACKING", "Uint8Rewriter", "quantize_uint8"]

# Ops the int8 path quantizes that TFLite has no uint8 kernel for.
LACKING = frozenset({OpType.BATCH_MATMUL, OpType.SQUARED_DIFFERENCE})

# Output parameters TFLite's uint8 kernels require (Prepare checks SOFTMAX, LOGISTIC, LOG_SOFTMAX).
_FIXED_OUTPUT = {
    OpType.SOFTMAX: (1 / 256, 0),
    OpType.LOGISTIC: (1 / 256, 0),
    OpType.TANH: (1 / 128, 128),
    OpType.LOG_SOFTMAX: (16 / 256, 255),
}

# Ranges QAT fixes rather than learns: clamping activations, fused or standalone.
_PINNED_ACTIVATION = {Activation.RELU6: (0.0, 6.0), Activation.RELU_N1_TO_1: (-1.0, 1.0)}
_PINNED_OP = {OpType.RELU6: (0.0, 6.0), OpType.RELU_N1_TO_1: (-1.0, 1.0)}


def quantize_uint8(graph: Graph, representative_data: Any) -> Graph:
    """The float `graph` as a uint8 QAT-style model; callers check it is float first."""
    check_int8_support(graph, "uint8", LACKING)
    return Uint8Rewriter(graph, calibrate(graph, representative_data)).run()


def asymmetric_weights(tensor: Tensor) -> Tensor:
    """uint8 per tensor over [min(w, 0), max(w, 0)], zero point nudged onto a code."""
    w = np.asarray(tensor.data, np.float32)
    scale, zp = activation_params(float(w.min(initial=0.0)), float(w.max(initial=0.0)), 0)
    q = np.clip(quantize_f32(w, np.float32(scale)) + zp, 0, 255)
    return Tensor(tensor.name, tensor.shape, DType.UINT8, QuantParams((scale,), (zp,)), q.astype(np.uint8))


def _pinned_range(op: Op) -> tuple[float, float] | None:
    if op.type in _PINNED_OP:
        return _PINNED_OP[op.type]
    activation = getattr(op.options, "fused_activation_function", None)
    return _PINNED_ACTIVATION.get(activation) if op.type in RESCALING else None


class Uint8Rewriter(Int8Rewriter):
    """The int8 rewriter with uint8 codes, per-tensor asymmetric weights, pinned RELU6 ranges,
    rescaling concatenations and uint8 op versions."""

    dtype = DType.UINT8
    qmin = 0
    fixed_outputs = _FIXED_OUTPUT

    def __init__(self, graph: Graph, ranges: dict[int, tuple[float, float]]):
        super().__init__(graph, ranges, io="uint8")

    def _plan_groups(self, i: int, op: Op) -> Op:
        values = [t for t in op.inputs if t >= 0 and self.graph.tensors[t].dtype is DType.FLOAT32]
        if op.type is OpType.CONCATENATION and len(values) > 1:
            spans = [self._span(t) for t in values]
            self.ranges[op.outputs[0]] = (min(lo for lo, _ in spans), max(hi for _, hi in spans))
            return op
        op = super()._plan_groups(i, op)
        span = _pinned_range(op)
        if span is not None:
            for t in op.outputs:
                if float_activation(self.graph.tensors[t]):
                    self.fixed[self.groups.find(t)] = activation_params(*span, self.qmin)
        return op

    def _span(self, t: int) -> tuple[float, float]:
        """The real range a concatenation input will cover: its pinned parameters', else its own."""
        root = self.groups.find(t)
        if root in self.fixed and not self.tensors[t].is_constant:
            scale, zp = self.fixed[root]
            return scale * (self.qmin - zp), scale * (self.qmin + 255 - zp)
        return self._range(t)

    def _weights(self, tensor: Tensor, axis: int | None) -> Tensor:
        return asymmetric_weights(tensor)

    def _version(self, op: Op) -> int:
        """op_version.cc for uint8: version 1 where int8 gets its plain int8 version."""
        if op.type is OpType.DEPTHWISE_CONV_2D:
            o = op.options
            return 2 if o is not None and (o.dilation_w_factor != 1 or o.dilation_h_factor != 1) else 1
        version = int8_version(op, self.tensors)
        return 1 if version == INT8_VERSION.get(op.type, 1) else version
