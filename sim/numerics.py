"""Numeric modes of the simulated units: each runs the runtime's kernels in its own number format."""

from __future__ import annotations

import enum
from dataclasses import replace
from typing import Callable, Mapping

import numpy as np

from runtime.ir.graph import DType, Graph, Op, Tensor
from runtime.ir.optypes import OpType
from sim.cost import Precision

__all__ = ["NumericMode", "float_view", "is_quantized", "to_mode", "from_mode", "round_fp16",
           "fake_quant", "op_precision", "computes_in_float", "is_conversion", "settle", "is_index_op", "moves_8bit",
           "op_precision_on"]


class NumericMode(enum.Enum):
    """How a unit computes a partition.

    REFERENCE     the CPU's kernels as they are (float32, TFLite integer arithmetic for 8-bit ops).
    FLOAT32_VIEW  a quantized model run in float32: weights dequantized once, each 8-bit activation
                  fake-quantized after the op that writes it (how the GPU delegate runs int8 models).
    FLOAT16       float16 storage and arithmetic: every input, weight and output rounded to float16
                  (a quantized model: the float view, in float16).
    INTEGER       8-bit integer kernels only (the Hexagon DSP).
    MIXED         each op in its own tensors' types: 8-bit ops with the integer kernels, float ops
                  in float16 (the QNN delegate's HTP graph of a quantized model with float ops, such
                  as an ARG_MAX after the DEQUANTIZE: LiteRT's Qualcomm plugin gives every tensor
                  its own QNN type, litert/vendors/qualcomm/compiler/qnn_compose_graph.cc
                  ConvertTensor, so one graph holds fixed-point and float16 ops).
    """

    REFERENCE = "reference"
    FLOAT32_VIEW = "float32_view"
    FLOAT16 = "float16"
    INTEGER = "integer"
    MIXED = "mixed"

    @classmethod
    def of(cls, mode: "NumericMode | str") -> "NumericMode":
        return mode if isinstance(mode, cls) else cls[str(mode).upper()]


_EIGHT_BIT = (DType.INT8, DType.UINT8)
_FLOATS = (DType.FLOAT32, DType.FLOAT16)
# Modes whose float values are held in float16.
_HALF = (NumericMode.FLOAT16, NumericMode.MIXED)


def is_quantized(tensor: Tensor) -> bool:
    """An 8-bit tensor with affine quantization: an activation or weight of an integer model."""
    return tensor.dtype in _EIGHT_BIT and tensor.quant is not None


def dequantize_array(x: np.ndarray, tensor: Tensor) -> np.ndarray:
    q = tensor.quant
    scale = np.asarray(q.scale, np.float32)
    zero = np.asarray(q.zero_point, np.float32)
    if q.per_channel:
        shape = [1] * x.ndim
        shape[q.axis] = -1
        scale, zero = scale.reshape(shape), zero.reshape(shape)
    else:   # one scale: a scalar, so a 0-d tensor stays 0-d (a (1,) array would broadcast it to (1,))
        scale, zero = scale[0], zero[0]
    return ((x.astype(np.float32) - zero) * scale).astype(np.float32)


def quantize_array(x: np.ndarray, tensor: Tensor) -> np.ndarray:
    q = tensor.quant
    info = np.iinfo(tensor.dtype.np)
    v = np.round(x / np.float32(q.scale[0])) + q.zero_point[0]
    return np.clip(v, info.min, info.max).astype(tensor.dtype.np)


def fake_quant(x: np.ndarray, tensor: Tensor) -> np.ndarray:
    """Round a float activation onto its tensor's 8-bit grid and back: what the integer model can hold."""
    return dequantize_array(quantize_array(x, tensor), tensor)


_LOW = np.uint32(0x38800000)    # 2**-14, the smallest normal float16, as float32 bits
_HIGH = np.uint32(0x477FF000)   # 65520: from here float16 rounds to infinity


def round_fp16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest float16 (ties to even), kept as float32.

    On the bits: add half an ulp of the 13 mantissa bits float16 lacks (plus the tie-to-even
    bit) and clear them; about twice as fast as a float16 round trip. Zeros and values in
    float16's normal range take that path; subnormals, overflow, inf and NaN go through NumPy's
    own conversion, so results equal x.astype(float16) bit for bit."""
    if x.dtype != np.float32:  # float16 weights stay as stored; integers are not rounded
        return x
    shape = x.shape
    # Flat, then back to the shape: arithmetic on a 0-d array gives NumPy scalars, which the
    # special-value fix-up below cannot assign into (a scalar weight of float16 overflow).
    x = np.require(x, requirements="C").reshape(-1)
    b = x.view(np.uint32)
    r = b >> np.uint32(13)
    r &= np.uint32(1)
    r += np.uint32(0xFFF)
    r += b
    r &= np.uint32(0xFFFFE000)
    mag = b & np.uint32(0x7FFFFFFF)
    special = mag >= _HIGH
    mag -= np.uint32(1)  # zero wraps to the top and counts as ordinary
    special |= mag < _LOW - np.uint32(1)
    y = r.view(np.float32)
    if special.any():
        with np.errstate(over="ignore"):
            y[special] = x[special].astype(np.float16).astype(np.float32)
    return y.reshape(shape)


def _float_tensor(tensor: Tensor) -> Tensor:
    """The float32 twin of an 8-bit (or int32 bias) quantized tensor; constants dequantized once."""
    if tensor.quant is None or tensor.dtype not in (*_EIGHT_BIT, DType.INT32):
        return tensor
    if tensor.dtype is DType.INT32 and not tensor.is_constant:
        return tensor
    data = dequantize_array(tensor.data, tensor) if tensor.is_constant else None
    return replace(tensor, dtype=DType.FLOAT32, data=data)


# In the float view these ops only convert between the 8-bit and float domains: identities, with
# the output's fake-quantization applied as after any op.
CONVERSIONS = frozenset({OpType.QUANTIZE, OpType.DEQUANTIZE})


def is_conversion(op: Op, graph: Graph) -> bool:
    """A QUANTIZE/DEQUANTIZE between 8-bit and float (not the fp16-weight DEQUANTIZE)."""
    return op.type in CONVERSIONS and graph.tensors[op.inputs[0]].dtype is not DType.FLOAT16


def float_view(graph: Graph) -> Graph:
    """The quantized graph as a float32 graph with the same indices (for FLOAT32_VIEW / FLOAT16)."""
    tensors = tuple(_float_tensor(t) for t in graph.tensors)
    return Graph(tensors, graph.ops, graph.inputs, graph.outputs, graph.name + ":float_view", graph.signatures)


def to_mode(x: np.ndarray, tensor: Tensor, mode: NumericMode) -> np.ndarray:
    """A value entering a unit: dequantized for a float view, rounded for float16."""
    if mode in (NumericMode.FLOAT32_VIEW, NumericMode.FLOAT16) and is_quantized(tensor):
        x = dequantize_array(x, tensor)
    return round_fp16(x) if mode in _HALF else x


def from_mode(x: np.ndarray, tensor: Tensor, mode: NumericMode) -> np.ndarray:
    """A value a unit produced, put back into its graph tensor's type (quantized, or float32)."""
    if mode in _HALF:
        x = round_fp16(x)
    if mode in (NumericMode.FLOAT32_VIEW, NumericMode.FLOAT16) and is_quantized(tensor):
        return quantize_array(x, tensor)
    return x.astype(tensor.dtype.np, copy=False) if x.dtype != tensor.dtype.np else x


def settle(x: np.ndarray, tensor: Tensor, mode: NumericMode) -> np.ndarray:
    """An op's output inside a unit: held in the unit's storage format between ops."""
    if mode in (NumericMode.FLOAT32_VIEW, NumericMode.FLOAT16) and is_quantized(tensor):
        x = fake_quant(x, tensor)
    return round_fp16(x) if mode in _HALF else x


def computes_in_float(op: Op, graph: Graph) -> bool:
    """A float run-time tensor other than the float side of a QUANTIZE / DEQUANTIZE, where a
    quantized model meets the float world and still runs in integers."""
    edge = op.inputs if op.type is OpType.QUANTIZE else op.outputs if op.type is OpType.DEQUANTIZE else ()
    inner = [t for t in (*op.inputs, *op.outputs) if t >= 0 and t not in edge and not graph.tensors[t].is_constant]
    return any(graph.tensors[t].dtype in _FLOATS for t in inner)


def op_precision(op: Op, graph: Graph, mode: NumericMode = NumericMode.REFERENCE) -> Precision:
    """The arithmetic an op costs on a unit: float16 mode, 8-bit data or weights, else float32. In
    the mixed mode, float16 for an op that computes in float and the integer path for the rest
    (fixed-point, index and conversion work alike)."""
    if mode is NumericMode.MIXED:
        return Precision.FLOAT16 if computes_in_float(op, graph) else Precision.INT8
    if mode is NumericMode.FLOAT16:
        return Precision.FLOAT16
    if mode is NumericMode.FLOAT32_VIEW:
        return Precision.FLOAT32
    live = [graph.tensors[t] for t in op.inputs if t >= 0 and not graph.tensors[t].is_constant]
    if any(t.dtype in _EIGHT_BIT for t in live):
        return Precision.INT8
    weights = [graph.tensors[t] for t in op.inputs[1:] if t >= 0 and graph.tensors[t].is_constant]
    if op.type is not OpType.DEQUANTIZE and any(t.dtype in _EIGHT_BIT for t in weights):
        return Precision.INT8  # dynamic range: activations quantized on the fly, integer GEMM
    return Precision.FLOAT32


# Element types of shapes, indices and masks.
_INDEX_TYPES = frozenset({DType.INT32, DType.INT64, DType.BOOL})
# The path index work takes on a unit that lacks the mode's precision: integer first.
_INDEX_PATHS = (Precision.INT8, Precision.FLOAT16, Precision.FLOAT32)
_EDGE_CONVERSIONS = frozenset({OpType.QUANTIZE, OpType.DEQUANTIZE})


def is_index_op(op: Op, graph: Graph) -> bool:
    """Shape, index or mask work: every output is int32, int64 or bool, and so is every run-time
    input (SHAPE reads only its input's dimensions, so its input may hold anything). The
    SHAPE -> STRIDED_SLICE -> PACK chain a Keras layer emits to read its batch size is such work."""
    outs = [graph.tensors[t] for t in op.outputs if t >= 0]
    live = [graph.tensors[t] for t in op.inputs if t >= 0 and not graph.tensors[t].is_constant]
    return (bool(outs) and all(t.dtype in _INDEX_TYPES for t in outs)
            and (op.type is OpType.SHAPE or all(t.dtype in _INDEX_TYPES for t in live)))


def moves_8bit(op: Op, graph: Graph) -> bool:
    """An op that computes in no float and writes 8-bit values: fixed-point work even where no
    run-time input is 8-bit (a GATHER from a constant int8 table by int32 indices)."""
    return (not computes_in_float(op, graph)
            and any(graph.tensors[t].dtype in _EIGHT_BIT for t in op.outputs if t >= 0))


def op_precision_on(op: Op, graph: Graph, mode: NumericMode, runs: Callable[[Precision], bool]) -> Precision:
    """op_precision on a unit that runs only the precisions `runs` accepts.

    Index work moves a few int32 values or does integer bookkeeping; it needs no float rate. It
    keeps the mode's precision where the unit has it (so the CPU and GPU charge it as they always
    did), and elsewhere takes the unit's integer path (a DSP that only has int8 rates). Value ops
    get op_precision unchanged: a unit without it is a placement error the caller reports, but for
    the QUANTIZE / DEQUANTIZE where a quantized model meets its float inputs and outputs: an
    integer-only accelerator that takes them (the QNN delegate's HTP, which AI Hub counts as NPU
    layers) converts on its vector unit, charged on the same integer path; and so is an op that
    moves 8-bit values by int32 indices (moves_8bit), which op_precision, reading its run-time
    inputs, would charge in float32."""
    precision = op_precision(op, graph, mode)
    if runs(precision) or not (is_index_op(op, graph) or op.type in _EDGE_CONVERSIONS or moves_8bit(op, graph)):
        return precision
    return next((p for p in _INDEX_PATHS if runs(p)), precision)


def convert_inputs(values: Mapping[int, np.ndarray], graph: Graph, mode: NumericMode) -> dict[int, np.ndarray]:
    return {t: to_mode(np.asarray(v), graph.tensors[t], mode) for t, v in values.items()}
