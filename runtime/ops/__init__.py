"""The explicit kernel registries (float, 8-bit quantized, hybrid), and the choice among them per op."""

from __future__ import annotations

from runtime.ops import (conv, dense, densify, elementwise as ew, hybrid, lstm, pool, qconv, qdata,
                         qelementwise as qew, qpool, qsoftmax, reduce, resize, shape, softmax)
from runtime.ops.base import Kernel, Node
from runtime.optypes import OpType

__all__ = ["KERNELS", "QUANT_KERNELS", "HYBRID_KERNELS", "Kernel", "Node", "select_kernel"]

KERNELS: dict[OpType, Kernel] = {
    OpType.ADD: ew.add,
    OpType.SUB: ew.sub,
    OpType.MUL: ew.mul,
    OpType.DIV: ew.div,
    OpType.MAXIMUM: ew.maximum,
    OpType.MINIMUM: ew.minimum,
    OpType.SQUARED_DIFFERENCE: ew.squared_difference,
    OpType.CONV_2D: conv.conv_2d,
    OpType.DEPTHWISE_CONV_2D: conv.depthwise_conv_2d,
    OpType.TRANSPOSE_CONV: conv.transpose_conv,
    OpType.FULLY_CONNECTED: dense.fully_connected,
    OpType.BATCH_MATMUL: dense.batch_matmul,
    OpType.AVERAGE_POOL_2D: pool.average_pool_2d,
    OpType.MAX_POOL_2D: pool.max_pool_2d,
    OpType.MEAN: reduce.mean,
    OpType.SUM: reduce.sum_,
    OpType.REDUCE_MAX: reduce.reduce_max,
    OpType.REDUCE_MIN: reduce.reduce_min,
    OpType.CONCATENATION: shape.concatenation,
    OpType.PAD: shape.pad,
    OpType.PADV2: shape.padv2,
    OpType.MIRROR_PAD: shape.mirror_pad,
    OpType.RESHAPE: shape.reshape,
    OpType.SQUEEZE: shape.squeeze,
    OpType.EXPAND_DIMS: shape.expand_dims,
    OpType.TRANSPOSE: shape.transpose,
    OpType.STRIDED_SLICE: shape.strided_slice,
    OpType.SLICE: shape.slice_,
    OpType.SPLIT: shape.split,
    OpType.SPLIT_V: shape.split_v,
    OpType.PACK: shape.pack,
    OpType.UNPACK: shape.unpack,
    OpType.SHAPE: shape.shape,
    OpType.GATHER: shape.gather,
    OpType.DEPTH_TO_SPACE: shape.depth_to_space,
    OpType.SPACE_TO_DEPTH: shape.space_to_depth,
    OpType.RELU: ew.relu,
    OpType.RELU_N1_TO_1: ew.relu_n1_to_1,
    OpType.RELU6: ew.relu6,
    OpType.LEAKY_RELU: ew.leaky_relu,
    OpType.PRELU: ew.prelu,
    OpType.ELU: ew.elu,
    OpType.LOGISTIC: ew.logistic,
    OpType.TANH: ew.tanh,
    OpType.EXP: ew.exp,
    OpType.LOG: ew.log,
    OpType.SQRT: ew.sqrt,
    OpType.RSQRT: ew.rsqrt,
    OpType.ABS: ew.abs_,
    OpType.NEG: ew.neg,
    OpType.HARD_SWISH: ew.hard_swish,
    OpType.SOFTMAX: softmax.softmax,
    OpType.LOG_SOFTMAX: softmax.log_softmax,
    OpType.RESIZE_BILINEAR: resize.resize_bilinear,
    OpType.RESIZE_NEAREST_NEIGHBOR: resize.resize_nearest_neighbor,
    OpType.CAST: ew.cast,
    OpType.DEQUANTIZE: ew.dequantize,
    OpType.UNIDIRECTIONAL_SEQUENCE_LSTM: lstm.unidirectional_sequence_lstm,
    OpType.DENSIFY: densify.densify,
}

# Ops whose kernels only move or pick elements, so the same code serves every element type
# (quantized tensors keep their input's scale and zero point through them).
DTYPE_AGNOSTIC = frozenset({
    OpType.RESHAPE, OpType.SQUEEZE, OpType.EXPAND_DIMS, OpType.TRANSPOSE, OpType.STRIDED_SLICE,
    OpType.SLICE, OpType.SPLIT, OpType.SPLIT_V, OpType.PACK, OpType.UNPACK, OpType.SHAPE, OpType.GATHER,
    OpType.DEPTH_TO_SPACE, OpType.SPACE_TO_DEPTH, OpType.PAD, OpType.PADV2, OpType.MIRROR_PAD,
    OpType.CAST, OpType.DEQUANTIZE, OpType.MAXIMUM, OpType.MINIMUM, OpType.RESIZE_NEAREST_NEIGHBOR,
    OpType.REDUCE_MAX, OpType.REDUCE_MIN,
})

# 8-bit (int8/uint8) kernels, where TFLite's integer arithmetic differs from the float kernel's.
QUANT_KERNELS: dict[OpType, Kernel] = {
    OpType.CONV_2D: qconv.conv_2d,
    OpType.DEPTHWISE_CONV_2D: qconv.depthwise_conv_2d,
    OpType.TRANSPOSE_CONV: qconv.transpose_conv,
    OpType.FULLY_CONNECTED: qconv.fully_connected,
    OpType.BATCH_MATMUL: qconv.batch_matmul,
    OpType.SQUARED_DIFFERENCE: qew.squared_difference,
    OpType.ADD: qew.add,
    OpType.SUB: qew.sub,
    OpType.MUL: qew.mul,
    OpType.RELU: qew.relu,
    OpType.RELU6: qew.relu6,
    OpType.RELU_N1_TO_1: qew.relu_n1_to_1,
    OpType.PRELU: qew.prelu,
    OpType.LEAKY_RELU: qew.leaky_relu,
    OpType.LOGISTIC: qew.logistic,
    OpType.TANH: qew.tanh,
    OpType.HARD_SWISH: qew.hard_swish,
    OpType.QUANTIZE: qew.quantize,
    OpType.AVERAGE_POOL_2D: qpool.average_pool_2d,
    OpType.MAX_POOL_2D: qpool.max_pool_2d,
    OpType.MEAN: qpool.mean,
    OpType.SUM: qpool.sum_,
    OpType.SOFTMAX: qsoftmax.softmax,
    OpType.CONCATENATION: qdata.concatenation,
    OpType.RESIZE_BILINEAR: qdata.resize_bilinear,
}

# Float activations with 8-bit constant weights (dynamic-range quantization).
HYBRID_KERNELS: dict[OpType, Kernel] = {
    OpType.FULLY_CONNECTED: hybrid.fully_connected,
    OpType.CONV_2D: hybrid.conv_2d,
    OpType.DEPTHWISE_CONV_2D: hybrid.depthwise_conv_2d,
    OpType.TRANSPOSE_CONV: hybrid.transpose_conv,
    OpType.UNIDIRECTIONAL_SEQUENCE_LSTM: hybrid.unidirectional_sequence_lstm,
}

_EIGHT_BIT = ("int8", "uint8")


def select_kernel(op, graph) -> Kernel | None:
    """The kernel for one op, by the element types it sees; None when the testbed has none.

    Float data with 8-bit constant weights (in any slot: a CIFG LSTM has none in slot 1) is a
    dynamic-range op, which only a hybrid kernel may run: a float kernel would read the raw
    integers as values and answer wrongly without a word."""
    first = next((graph.tensors[t] for t in op.inputs if t >= 0 and not graph.tensors[t].is_constant), None)
    if first is not None and first.dtype.np.name in _EIGHT_BIT and op.type is not OpType.DEQUANTIZE:
        if op.type in QUANT_KERNELS:
            return QUANT_KERNELS[op.type]
        return KERNELS.get(op.type) if op.type in DTYPE_AGNOSTIC else None
    if op.type is OpType.QUANTIZE:
        return QUANT_KERNELS[op.type]
    if first is not None and first.dtype.np.kind == "f" and _has_8bit_weights(op, graph):
        return HYBRID_KERNELS.get(op.type)
    return KERNELS.get(op.type)


def _has_8bit_weights(op, graph) -> bool:
    return any(t >= 0 and graph.tensors[t].is_constant and graph.tensors[t].dtype.np.name in _EIGHT_BIT
               for t in op.inputs[1:])
