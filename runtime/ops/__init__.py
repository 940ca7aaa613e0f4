"""The explicit kernel registries (float, 8-bit quantized, hybrid), and the choice among them per op."""

from __future__ import annotations

from runtime.ops import (conv, dense, densify, elementwise as ew, hybrid, hybrid_lstm, lstm, pool, qconv, qdata,
                         qelementwise as qew, qpool, qsoftmax, reduce, resize, shape, softmax)
from runtime.ops import custom_ops
from runtime.ops import batch_space, index, nms, segment
from runtime.ops import argreduce, compare as cmp, mathops as mth, norm, qmath
from runtime.ops.base import Kernel, Node
from runtime.ir.optypes import DATA_INPUT, OpType

__all__ = ["KERNELS", "QUANT_KERNELS", "HYBRID_KERNELS", "Kernel", "Node", "select_kernel", "data_tensor"]

KERNELS: dict[OpType, Kernel] = {
    OpType.ADD: ew.add,
    OpType.SUB: ew.sub,
    OpType.MUL: ew.mul,
    OpType.DIV: ew.div,
    OpType.MAXIMUM: ew.maximum,
    OpType.MINIMUM: ew.minimum,
    OpType.SQUARED_DIFFERENCE: ew.squared_difference,
    OpType.LESS: cmp.less,
    OpType.LESS_EQUAL: cmp.less_equal,
    OpType.GREATER: cmp.greater,
    OpType.GREATER_EQUAL: cmp.greater_equal,
    OpType.EQUAL: cmp.equal,
    OpType.NOT_EQUAL: cmp.not_equal,
    OpType.LOGICAL_AND: cmp.logical_and,
    OpType.LOGICAL_OR: cmp.logical_or,
    OpType.LOGICAL_NOT: cmp.logical_not,
    OpType.SELECT: cmp.select,
    OpType.SELECT_V2: cmp.select_v2,
    OpType.FLOOR: mth.floor,
    OpType.CEIL: mth.ceil,
    OpType.ROUND: mth.round_,
    OpType.SIN: mth.sin,
    OpType.COS: mth.cos,
    OpType.SQUARE: mth.square,
    OpType.POW: mth.pow_,
    OpType.FLOOR_DIV: mth.floor_div,
    OpType.FLOOR_MOD: mth.floor_mod,
    OpType.SIGN: mth.sign,
    OpType.ATAN2: mth.atan2,
    OpType.ADD_N: mth.add_n,
    OpType.ZEROS_LIKE: mth.zeros_like,
    OpType.RELU_0_TO_1: mth.relu_0_to_1,
    OpType.GELU: mth.gelu,
    OpType.FAKE_QUANT: mth.fake_quant,
    OpType.BITWISE_XOR: mth.bitwise_xor,
    OpType.RIGHT_SHIFT: mth.right_shift,
    OpType.ARG_MAX: argreduce.arg_max,
    OpType.ARG_MIN: argreduce.arg_min,
    OpType.CUMSUM: argreduce.cumsum,
    OpType.REDUCE_PROD: argreduce.reduce_prod,
    OpType.REDUCE_ANY: argreduce.reduce_any,
    OpType.REDUCE_ALL: argreduce.reduce_all,
    OpType.L2_NORMALIZATION: norm.l2_normalization,
    OpType.LOCAL_RESPONSE_NORMALIZATION: norm.local_response_normalization,
    OpType.L2_POOL_2D: norm.l2_pool_2d,
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
    # raw integer arithmetic or picks, whatever the quantization: 8-bit data as plain integers
    OpType.ARG_MAX, OpType.ARG_MIN, OpType.SELECT, OpType.SELECT_V2, OpType.FLOOR_DIV, OpType.FLOOR_MOD,
    OpType.BITWISE_XOR, OpType.RIGHT_SHIFT,
})

# Batch<->space, gather/scatter, shapes from values, segment reductions, top-k and NMS.
_INDEX_KERNELS: dict[OpType, Kernel] = {
    OpType.BATCH_TO_SPACE_ND: batch_space.batch_to_space_nd, OpType.SPACE_TO_BATCH_ND: batch_space.space_to_batch_nd,
    OpType.TILE: index.tile, OpType.BROADCAST_TO: index.broadcast_to, OpType.BROADCAST_ARGS: index.broadcast_args,
    OpType.FILL: index.fill, OpType.RANGE: index.range_, OpType.RANK: index.rank, OpType.ONE_HOT: index.one_hot,
    OpType.GATHER_ND: index.gather_nd, OpType.SCATTER_ND: index.scatter_nd, OpType.REVERSE_V2: index.reverse_v2,
    OpType.REVERSE_SEQUENCE: index.reverse_sequence, OpType.MATRIX_DIAG: index.matrix_diag,
    OpType.MATRIX_SET_DIAG: index.matrix_set_diag, OpType.SPARSE_TO_DENSE: index.sparse_to_dense,
    OpType.WHERE: index.where, OpType.UNIQUE: index.unique, OpType.TOPK_V2: index.topk_v2,
    OpType.DYNAMIC_UPDATE_SLICE: index.dynamic_update_slice, OpType.EMBEDDING_LOOKUP: index.embedding_lookup,
    OpType.BUCKETIZE: index.bucketize, OpType.SEGMENT_SUM: segment.segment_sum,
    OpType.UNSORTED_SEGMENT_SUM: segment.unsorted_segment_sum,
    OpType.UNSORTED_SEGMENT_PROD: segment.unsorted_segment_prod,
    OpType.UNSORTED_SEGMENT_MAX: segment.unsorted_segment_max,
    OpType.UNSORTED_SEGMENT_MIN: segment.unsorted_segment_min,
    OpType.NON_MAX_SUPPRESSION_V4: nms.non_max_suppression_v4,
    OpType.NON_MAX_SUPPRESSION_V5: nms.non_max_suppression_v5,
}
KERNELS.update(_INDEX_KERNELS)
# All but the arithmetic ones (TFLite runs those on float32/int32 only) move, pick or compare
# elements: 8-bit tensors keep their scale and zero point through them.
DTYPE_AGNOSTIC = DTYPE_AGNOSTIC | (frozenset(_INDEX_KERNELS) - {
    OpType.RANGE, OpType.BUCKETIZE, OpType.SEGMENT_SUM, OpType.UNSORTED_SEGMENT_SUM, OpType.UNSORTED_SEGMENT_PROD,
    OpType.UNSORTED_SEGMENT_MAX, OpType.UNSORTED_SEGMENT_MIN, OpType.NON_MAX_SUPPRESSION_V4,
    OpType.NON_MAX_SUPPRESSION_V5})

# 8-bit (int8/uint8) kernels, where TFLite's integer arithmetic differs from the float kernel's.
QUANT_KERNELS: dict[OpType, Kernel] = {
    OpType.CONV_2D: qconv.conv_2d,
    OpType.DEPTHWISE_CONV_2D: qconv.depthwise_conv_2d,
    OpType.TRANSPOSE_CONV: qconv.transpose_conv,
    OpType.FULLY_CONNECTED: qconv.fully_connected,
    OpType.BATCH_MATMUL: qconv.batch_matmul,
    OpType.SQUARED_DIFFERENCE: qew.squared_difference,
    OpType.LESS: qmath.less,
    OpType.LESS_EQUAL: qmath.less_equal,
    OpType.GREATER: qmath.greater,
    OpType.GREATER_EQUAL: qmath.greater_equal,
    OpType.EQUAL: qmath.equal,
    OpType.NOT_EQUAL: qmath.not_equal,
    OpType.RELU_0_TO_1: qmath.relu_0_to_1,
    OpType.GELU: qmath.gelu,
    OpType.RSQRT: qmath.rsqrt,  # int8 only: the check refuses uint8, as TFLite does
    OpType.L2_NORMALIZATION: qmath.l2_normalization,
    OpType.REDUCE_PROD: qmath.reduce_prod,
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
    OpType.UNIDIRECTIONAL_SEQUENCE_LSTM: hybrid_lstm.unidirectional_sequence_lstm,
}

# Recurrent, SVDF, 3-D convolution, sparse embedding and StableHLO-era kernels (runtime/ops/registry_seq.py).
from runtime.ops import registry_seq as _seq  # noqa: E402
KERNELS.update(_seq.KERNELS); HYBRID_KERNELS.update(_seq.HYBRID_KERNELS); QUANT_KERNELS.update(_seq.QUANT_KERNELS)  # noqa: E702
DTYPE_AGNOSTIC = DTYPE_AGNOSTIC | _seq.DTYPE_AGNOSTIC
# Complex-number, bit-cast, random and StableHLO gather/scatter/window kernels (runtime/ops/registry_misc.py).
from runtime.ops import registry_misc as _misc  # noqa: E402
KERNELS.update(_misc.KERNELS); DTYPE_AGNOSTIC = DTYPE_AGNOSTIC | _misc.DTYPE_AGNOSTIC  # noqa: E702
# Control flow and resource variables (runtime/ops/control.py).
from runtime.ops import control as _control  # noqa: E402
KERNELS.update(_control.KERNELS)

_EIGHT_BIT = ("int8", "uint8")

def _with_params(spec: custom_ops.CustomOp) -> Kernel:
    """A custom op's kernel, handed its decoded parameters as node.params (decoded once per node)."""
    def run(node: Node, *inputs):
        if "custom_params" not in node.cache:
            node.cache["custom_params"] = custom_ops.params(spec, node.op.custom_options,
                                                            node.graph.describe_op(node.index))
        return spec.kernel(node, *inputs)
    run.__name__ = spec.name
    return run



def select_kernel(op, graph) -> Kernel | None:
    """The kernel for one op, by the element types it sees; None when the testbed has none.

    Float data with 8-bit constant weights (in any slot: a CIFG LSTM has none in slot 1) is a
    dynamic-range op, which only a hybrid kernel may run: a float kernel would read the raw
    integers as values and answer wrongly without a word."""
    if op.type is OpType.CUSTOM:
        spec = custom_ops.lookup(op.custom_code)
        return _with_params(spec) if spec is not None else None
    if op.type in _control.KERNELS:  # they hand values of any type on untouched, 8-bit or hybrid alike
        return _control.KERNELS[op.type]
    first = data_tensor(op, graph)
    if first is not None and first.dtype.np.name in _EIGHT_BIT and op.type is not OpType.DEQUANTIZE:
        if op.type in QUANT_KERNELS:
            return QUANT_KERNELS[op.type]
        return KERNELS.get(op.type) if op.type in DTYPE_AGNOSTIC else None
    if op.type is OpType.QUANTIZE:
        return QUANT_KERNELS[op.type]
    if first is not None and first.dtype.np.kind == "f" and _has_8bit_weights(op, graph):
        return HYBRID_KERNELS.get(op.type)
    return KERNELS.get(op.type)


def data_tensor(op, graph):
    """The input whose element type picks the kernel: the op's data input where it has a fixed
    slot (DATA_INPUT), else its first run-time input; None when every input is constant."""
    if op.type in DATA_INPUT:
        k = DATA_INPUT[op.type]
        t = op.inputs[k] if k < len(op.inputs) else -1
        return graph.tensors[t] if t >= 0 else None
    return next((graph.tensors[t] for t in op.inputs if t >= 0 and not graph.tensors[t].is_constant), None)


def _has_8bit_weights(op, graph) -> bool:
    return any(t >= 0 and graph.tensors[t].is_constant and graph.tensors[t].dtype.np.name in _EIGHT_BIT
               for t in op.inputs[1:])
