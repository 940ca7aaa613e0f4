"""Which TFLite ops the NNAPI delegate maps, at which feature level: NNAPIDelegateKernel::Validate."""

from __future__ import annotations

from delegates import rulekit as rk
from delegates.api import Rule
from runtime.ir.graph import DType, Graph, Op
from runtime.ir.optypes import OpType
from runtime.ir.options import Activation
from sim.npu import NNAPI_VERSION, api_level_for_feature

__all__ = ["MIN_LEVEL", "MAX_VERSION", "rule_table", "common_rules", "at_least", "is_hybrid"]

T = OpType

# The NNAPI feature level each mapped op needs (ExpectMinAndroidSdkVersion); 1 = API 27.
MIN_LEVEL: dict[OpType, int] = {
    **{t: 1 for t in (T.ADD, T.MUL, T.AVERAGE_POOL_2D, T.MAX_POOL_2D, T.L2_POOL_2D, T.CONV_2D,
                      T.DEPTHWISE_CONV_2D, T.FULLY_CONNECTED, T.HARD_SWISH, T.SOFTMAX, T.RESHAPE,
                      T.RESIZE_BILINEAR, T.L2_NORMALIZATION, T.LOCAL_RESPONSE_NORMALIZATION,
                      T.LSH_PROJECTION, T.CONCATENATION, T.DEQUANTIZE, T.FLOOR, T.RELU,
                      T.RELU_N1_TO_1, T.RELU6, T.LOGISTIC, T.TANH, T.RNN, T.SPACE_TO_DEPTH,
                      T.DEPTH_TO_SPACE, T.EMBEDDING_LOOKUP, T.HASHTABLE_LOOKUP)},
    **{t: 2 for t in (T.SUB, T.DIV, T.PAD, T.SQUEEZE, T.SPACE_TO_BATCH_ND, T.BATCH_TO_SPACE_ND,
                      T.STRIDED_SLICE, T.TRANSPOSE, T.MEAN, T.SQUARED_DIFFERENCE, T.LSTM, T.SVDF)},
    **{t: 3 for t in (T.ARG_MAX, T.ARG_MIN, T.RESIZE_NEAREST_NEIGHBOR, T.UNIDIRECTIONAL_SEQUENCE_LSTM,
                      T.UNIDIRECTIONAL_SEQUENCE_RNN, T.BIDIRECTIONAL_SEQUENCE_LSTM, T.ABS, T.EXP,
                      T.LOG, T.RSQRT, T.POW, T.SIN, T.SQRT, T.SLICE, T.TRANSPOSE_CONV, T.MAXIMUM,
                      T.MINIMUM, T.CAST, T.LEAKY_RELU, T.PRELU, T.TILE, T.LOGICAL_OR, T.LOGICAL_AND,
                      T.LOGICAL_NOT, T.LESS, T.LESS_EQUAL, T.GREATER, T.GREATER_EQUAL, T.EQUAL,
                      T.NOT_EQUAL, T.NEG, T.TOPK_V2, T.SELECT, T.GATHER, T.EXPAND_DIMS, T.SPLIT,
                      T.LOG_SOFTMAX, T.QUANTIZE, T.REDUCE_ANY, T.REDUCE_MIN, T.REDUCE_MAX,
                      T.REDUCE_PROD, T.SUM, T.PADV2)},
    **{t: 4 for t in (T.SPLIT_V, T.ELU, T.FILL, T.PACK, T.UNPACK, T.DENSIFY)},
    T.BATCH_MATMUL: 6,
    T.MIRROR_PAD: 7,
}

# Highest op version Validate accepts (ExpectMaxOpVersion / ExpectOpVersion).
MAX_VERSION: dict[OpType, int] = {
    **{t: 1 for t in (T.L2_POOL_2D, T.RESHAPE, T.SQUEEZE, T.LOCAL_RESPONSE_NORMALIZATION,
                      T.LSH_PROJECTION, T.FLOOR, T.DIV, T.UNIDIRECTIONAL_SEQUENCE_RNN, T.ABS, T.EXP,
                      T.LOG, T.RSQRT, T.POW, T.SIN, T.SQRT, T.RNN, T.SVDF, T.EMBEDDING_LOOKUP,
                      T.HASHTABLE_LOOKUP, T.CAST, T.LEAKY_RELU, T.PRELU, T.TILE, T.LOGICAL_OR,
                      T.LOGICAL_AND, T.LOGICAL_NOT, T.BIDIRECTIONAL_SEQUENCE_LSTM, T.EXPAND_DIMS,
                      T.LOG_SOFTMAX, T.REDUCE_PROD, T.SUM, T.ELU, T.FILL)},
    **{t: 2 for t in (T.ADD, T.ARG_MAX, T.ARG_MIN, T.MUL, T.AVERAGE_POOL_2D, T.MAX_POOL_2D,
                      T.SOFTMAX, T.UNIDIRECTIONAL_SEQUENCE_LSTM, T.L2_NORMALIZATION, T.CONCATENATION,
                      T.DEQUANTIZE, T.RELU, T.RELU_N1_TO_1, T.RELU6, T.LOGISTIC, T.TANH, T.PAD,
                      T.PADV2, T.SPACE_TO_BATCH_ND, T.BATCH_TO_SPACE_ND, T.STRIDED_SLICE,
                      T.TRANSPOSE, T.SLICE, T.SPACE_TO_DEPTH, T.MEAN, T.LESS, T.LESS_EQUAL,
                      T.GREATER, T.GREATER_EQUAL, T.EQUAL, T.NOT_EQUAL, T.NEG, T.TOPK_V2, T.SELECT,
                      T.GATHER, T.SPLIT_V, T.QUANTIZE, T.REDUCE_ANY, T.REDUCE_MIN, T.REDUCE_MAX,
                      T.PACK, T.SQUARED_DIFFERENCE)},
    **{t: 3 for t in (T.SUB, T.DEPTHWISE_CONV_2D, T.RESIZE_BILINEAR, T.RESIZE_NEAREST_NEIGHBOR,
                      T.TRANSPOSE_CONV, T.LSTM, T.MAXIMUM, T.MINIMUM, T.SPLIT)},
    **{t: 5 for t in (T.CONV_2D, T.FULLY_CONNECTED)},
}


_VERSION = {t: rk.max_version(v, "Unsupported operation version: NNAPI maps versions up to {limit}.")
            for t, v in MAX_VERSION.items()}
_QUANT = frozenset({DType.UINT8, DType.INT8})


def _first(op: Op, graph: Graph) -> DType | None:
    return rk.input_dtype(op, graph, 0)


def float_or_quant8(op: Op, graph: Graph) -> bool:
    """Input must be float32 or 8-bit quantized."""
    return _first(op, graph) in (_QUANT | {DType.FLOAT32})


def float_only(op: Op, graph: Graph) -> bool:
    """NNAPI only supports floating point input."""
    return _first(op, graph) is DType.FLOAT32


# IsHybridOperator reads the weights of an LSTM at input 2: its input-to-input weights (1) are optional.
_LSTM_WEIGHTS = frozenset({T.LSTM, T.UNIDIRECTIONAL_SEQUENCE_LSTM, T.BIDIRECTIONAL_SEQUENCE_LSTM})


def is_hybrid(op: Op, graph: Graph) -> bool:
    """IsHybridOperator: float input, 8-bit weights (dynamic-range quantization)."""
    weights = 2 if op.type in _LSTM_WEIGHTS else 1
    return _first(op, graph) is DType.FLOAT32 and rk.input_dtype(op, graph, weights) in _QUANT


def not_hybrid(op: Op, graph: Graph) -> bool:
    """Hybrid version of this op is not supported by NN API."""
    return not is_hybrid(op, graph)


def conv_has_bias(op: Op, graph: Graph) -> bool:
    """Conv2D with omitted bias not supported"""
    return len(op.inputs) == 3 and op.inputs[2] >= 0


def no_activation(op: Op, graph: Graph) -> bool:
    """No activation function supported"""
    return rk.activation(op) is Activation.NONE


def rank_at_most_4(op: Op, graph: Graph) -> bool:
    """Input rank should be <= 4"""
    return all(len(graph.tensors[t].shape) <= 4 for t in op.inputs[:2] if t >= 0)


def constant_second_input(op: Op, graph: Graph) -> bool:
    """The shape/size/permutation input tensor must be constant."""
    return len(op.inputs) > 1 and rk.is_const(graph, op.inputs[1])


def rank_4_input(op: Op, graph: Graph) -> bool:
    """Input should have rank 4"""
    return len(graph.tensors[op.inputs[0]].shape) == 4


def constant_transpose_conv_inputs(op: Op, graph: Graph) -> bool:
    """Dynamically-sized tensors not supported."""
    return len(op.inputs) > 1 and rk.is_const(graph, op.inputs[0]) and rk.is_const(graph, op.inputs[1])


def non_empty_input(op: Op, graph: Graph) -> bool:
    """NN API pad ops do not support input tensors with no elements"""
    return 0 not in graph.tensors[op.inputs[0]].shape


def float32_div(op: Op, graph: Graph) -> bool:
    """NNAPI only support float div."""
    return _first(op, graph) is DType.FLOAT32


def non_scalar_output(op: Op, graph: Graph) -> bool:
    """NNAPI does not support generating a scalar as output."""
    return len(graph.tensors[op.outputs[0]].shape) > 0


def constant_int32_axis(op: Op, graph: Graph) -> bool:
    """NNAPI only supports constant int32 axis tensor."""
    axis = 2 if op.type is T.SPLIT_V else 0
    t = rk.tensor(op, graph, axis)
    return t is not None and t.dtype is DType.INT32 and rk.is_const(graph, op.inputs[axis])


def int32_positions(op: Op, graph: Graph) -> bool:
    """Positions type should be one of kTfLiteInt32"""
    return rk.input_dtype(op, graph, 1) is DType.INT32


def pack_axis_not_last(op: Op, graph: Graph) -> bool:
    """NNAPI does not support axis being the last dimension"""
    axis = rk.option(op, "axis", 0)
    return axis != -1 and axis != len(graph.tensors[op.inputs[0]].shape)


def int32_index_output(op: Op, graph: Graph) -> bool:
    """NNAPI only supports int32 output."""
    # NNAPIDelegateKernel::Validate, kTfLiteBuiltinArgMax / kTfLiteBuiltinArgMin
    # (tensorflow/lite/delegates/nnapi/nnapi_delegate.cc): output_type must be kTfLiteInt32
    return graph.tensors[op.outputs[0]].dtype is DType.INT32


def dequantize_input(op: Op, graph: Graph) -> bool:
    """DEQUANTIZE input must be uint8 or int8."""
    return _first(op, graph) in _QUANT


def quant_scale_positive(op: Op, graph: Graph) -> bool:
    """Quantization scale should be > 0."""
    q = graph.tensors[op.outputs[0]].quant
    return q is not None and all(s > 0 for s in q.scale)


def densify_constant(op: Op, graph: Graph) -> bool:
    """Only DENSIFY of constant sparse weights is delegated."""
    return rk.is_const(graph, op.inputs[0])


def _level_rules(level: int) -> dict[str, Rule]:
    """Checks whose outcome depends on the feature level: closures over it, docstrings static."""

    def per_tensor_before_1_2(op: Op, graph: Graph) -> bool:
        """Per-channel quantized convolution not supported before NNAPI 1.2."""
        q = graph.tensors[op.inputs[1]].quant
        return level >= 3 or q is None or len(q.scale) <= 1

    def hybrid_since_1_2(op: Op, graph: Graph) -> bool:
        """Hybrid operators not supported before NNAPI 1.2"""
        # From 1.2 on the delegate puts a DEQUANTIZE in front of the weights (nnapi_delegate.cc,
        # AddDequantizeOperatorsWhereNeeded): the driver runs a float op.
        return level >= 3 or not is_hybrid(op, graph)

    def dilation_since_1_2(op: Op, graph: Graph) -> bool:
        """NNAPI supports dilated convolutions since NNAPI 1.2."""
        return level >= 3 or (rk.option(op, "dilation_w_factor", 1) == 1
                              and rk.option(op, "dilation_h_factor", 1) == 1)

    def keep_num_dims_since_1_3(op: Op, graph: Graph) -> bool:
        """keep_num_dims needs NNAPI 1.3 (Android API level 30)."""
        return level >= 4 or not rk.option(op, "keep_num_dims", False)

    def float_before_1_2(op: Op, graph: Graph) -> bool:
        """NNAPI 1.0 & 1.1 only support float input for this op."""
        return level >= 3 or _first(op, graph) is DType.FLOAT32

    def no_align_corners_before_1_3(op: Op, graph: Graph) -> bool:
        """NNAPI before 1.3 supports neither align_corners nor half_pixel_centers."""
        return level >= 4 or not (rk.option(op, "align_corners", False)
                                  or rk.option(op, "half_pixel_centers", False))

    def uint8_output_before_1_3(op: Op, graph: Graph) -> bool:
        """Output should be kTfLiteUInt8."""
        return level >= 4 or graph.tensors[op.outputs[0]].dtype is DType.UINT8

    def softmax_rank_before_1_2(op: Op, graph: Graph) -> bool:
        """Before API level 29 only 2D and 4D input tensors were supported."""
        return level >= 3 or len(graph.tensors[op.inputs[0]].shape) in (2, 4)

    return {f.__name__: f for f in (hybrid_since_1_2, per_tensor_before_1_2, dilation_since_1_2,
                                    keep_num_dims_since_1_3, float_before_1_2, no_align_corners_before_1_3,
                                    uint8_output_before_1_3, softmax_rank_before_1_2)}


def common_rules(level: int) -> tuple[Rule, ...]:
    def int8_since_1_2(op: Op, graph: Graph) -> bool:
        """NN API supports int8 type since version 1.2 (Android API level 29)."""
        return level >= 3 or all(t.dtype is not DType.INT8 for t in rk.live_tensors(op, graph))

    return (int8_since_1_2,)


def _specific(level: int) -> dict[OpType, tuple[Rule, ...]]:
    r = _level_rules(level)
    resize = (rank_4_input, float_or_quant8, constant_second_input, r["no_align_corners_before_1_3"])
    return {
        **{t: (float_or_quant8,) for t in (T.ADD, T.MUL, T.AVERAGE_POOL_2D, T.MAX_POOL_2D,
                                           T.HARD_SWISH, T.RELU, T.RELU_N1_TO_1, T.RELU6, T.LOGISTIC,
                                           T.SPACE_TO_DEPTH, T.DEPTH_TO_SPACE, T.MAXIMUM, T.MINIMUM,
                                           T.LEAKY_RELU, T.PRELU, T.REDUCE_MIN, T.REDUCE_MAX)},
        **{t: (float_only,) for t in (T.ABS, T.EXP, T.LOG, T.RSQRT, T.POW, T.SIN, T.SQRT, T.ELU,
                                      T.L2_POOL_2D, T.LOG_SOFTMAX, T.SUM, T.REDUCE_PROD)},
        T.CONV_2D: (r["hybrid_since_1_2"], conv_has_bias, r["per_tensor_before_1_2"], r["dilation_since_1_2"]),
        T.DEPTHWISE_CONV_2D: (r["dilation_since_1_2"],),
        T.FULLY_CONNECTED: (r["hybrid_since_1_2"], r["keep_num_dims_since_1_3"]),
        T.UNIDIRECTIONAL_SEQUENCE_LSTM: (not_hybrid,),
        T.SOFTMAX: (float_or_quant8, rank_at_most_4, r["softmax_rank_before_1_2"]),
        T.RESHAPE: (float_or_quant8, constant_second_input),
        T.RESIZE_BILINEAR: (*resize, r["float_before_1_2"]),
        T.RESIZE_NEAREST_NEIGHBOR: resize,
        T.CONCATENATION: (no_activation, rank_at_most_4),
        T.L2_NORMALIZATION: (no_activation,),
        T.TANH: (r["float_before_1_2"],),
        T.SUB: (r["float_before_1_2"], rank_at_most_4),
        T.DIV: (float32_div,),
        T.PAD: (float_or_quant8, non_empty_input, r["float_before_1_2"]),
        T.PADV2: (float_or_quant8, non_empty_input),
        T.MEAN: (r["float_before_1_2"], non_scalar_output),
        T.TRANSPOSE: (constant_second_input,),
        T.TRANSPOSE_CONV: (constant_transpose_conv_inputs,),
        T.SPLIT: (constant_int32_axis,), T.SPLIT_V: (constant_int32_axis,),
        T.GATHER: (int32_positions,),
        T.ARG_MAX: (int32_index_output,), T.ARG_MIN: (int32_index_output,),
        T.PACK: (pack_axis_not_last,),
        T.DEQUANTIZE: (dequantize_input,),
        T.QUANTIZE: (r["uint8_output_before_1_3"], quant_scale_positive),
        T.DENSIFY: (densify_constant,),
        T.SQUARED_DIFFERENCE: (rank_at_most_4,),
    }


def rule_table(level: int) -> dict[OpType, tuple[Rule, ...]]:
    """Op type -> (minimum level, version ceiling, Validate's checks) for a target feature level."""
    specific = _specific(level)
    return {t: (at_least(need, level), *_v(t), *specific.get(t, ())) for t, need in MIN_LEVEL.items()}


def _v(op_type: OpType) -> tuple[Rule, ...]:
    return (_VERSION[op_type],) if op_type in _VERSION else ()


def at_least(need: int, level: int) -> Rule:
    """The op's minimum feature level; the reason names the Android API level that ships it."""
    api = api_level_for_feature(need)
    return rk.rule(f"Needs Android API level {api} ({NNAPI_VERSION[need]}) or newer.",
                   lambda op, graph: level >= need, f"needs_api_{api}")
