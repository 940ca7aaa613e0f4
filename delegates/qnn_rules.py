"""Which ops Qualcomm's QNN delegate takes: the op builders LiteRT's Qualcomm plugin maps each TFLite op with
(google-ai-edge/LiteRT, litert/vendors/qualcomm/compiler/qnn_compose_graph.cc and core/builders/*.cc), each
refusal there a rule here, and the tensor types each backend runs."""

from __future__ import annotations

from typing import Callable

from delegates import rulekit as rk
from delegates.api import Rule
from runtime.ir.graph import DType, Graph, Op, Tensor
from runtime.ir.optypes import OpType
from runtime.ir.options import Activation

__all__ = ["TABLE", "rule_table", "HTP_FP16", "HTP_QUANTIZED", "HTP_NO_FP16", "GPU_FLOAT"]


# -- rules shared by every op ------------------------------------------------------------------

_QUANT = frozenset({DType.INT8, DType.UINT8, DType.INT16})
_INDEX = frozenset({DType.INT32, DType.BOOL})


def _live_dtypes(op: Op, graph: Graph) -> set[DType]:
    return {t.dtype for t in rk.live_tensors(op, graph)}


def _types_rule(allowed: frozenset[DType], reason: str, name: str) -> Rule:
    return rk.rule(reason, lambda op, graph: _live_dtypes(op, graph) <= allowed, name)


# The HTP's tensor types: 8- and 16-bit fixed point, int32, bool, and float16 where the SoC has it
# (the QNN HTP backend's data types; a float32 graph runs as float16 with htp_precision fp16, the
# external-delegate options' "precision for fp32 graphs"). A float op under htp_precision quantized
# stays on the CPU.
HTP_FP16 = _types_rule(_QUANT | _INDEX | rk.FLOATS,
                       "Run-time tensors must be float32/float16 (run in float16), 8/16-bit quantized, int32 or "
                       "bool.", "htp_tensor_types")
HTP_QUANTIZED = _types_rule(_QUANT | _INDEX,
                            "htp_precision is quantized: float ops stay on the CPU; run-time tensors must be "
                            "8/16-bit quantized, int32 or bool.", "htp_quantized_types")
HTP_NO_FP16 = _types_rule(_QUANT | _INDEX,
                          "This phone's HTP runs no float16 (its profile gives it no float16 rate): float ops "
                          "stay on the CPU; run-time tensors must be 8/16-bit quantized, int32 or bool.",
                          "htp_without_fp16")
# QNN's GPU backend computes float32 or float16 (gpu_precision); indices and masks stay int32 / bool.
GPU_FLOAT = _types_rule(rk.FLOATS | _INDEX,
                        "QNN's GPU backend takes float models: run-time tensors must be float32/float16, int32 "
                        "or bool.", "gpu_tensor_types")

# -- per-op rules --------------------------------------------------------------------------------


def fused_activation_supported(op: Op, graph: Graph) -> bool:
    """Fused activation must be NONE, RELU, RELU_N1_TO_1, RELU6 or TANH."""
    # op_builder.cc AddFusedActivationNode: any other value is logged and dropped, so it is refused here
    return rk.activation(op) in (Activation.NONE, Activation.RELU, Activation.RELU_N1_TO_1, Activation.RELU6,
                                 Activation.TANH)


def _static(*indices: int, int32: bool = False) -> Callable[[Op, Graph], bool]:
    """Inputs `indices` are constant (and int32 where a builder reads them with GetTensorData<int32_t>,
    which gives nothing for an int64 tensor)."""
    def test(op: Op, graph: Graph) -> bool:
        return all(k < len(op.inputs) and op.inputs[k] >= 0 and graph.tensors[op.inputs[k]].is_constant
                   and (not int32 or graph.tensors[op.inputs[k]].dtype is DType.INT32) for k in indices)

    return test


def _fixed_point(t: Tensor, dtypes: frozenset[DType]) -> bool:
    """A quantized tensor of one of `dtypes`: the plugin converts it to one of QNN's fixed-point types."""
    return t.dtype in dtypes and t.quant is not None


static_axis = rk.rule("The axis must be a constant tensor.", _static(1), "static_axis")
static_paddings = rk.rule("Paddings must be a constant tensor.", _static(1), "static_paddings")
static_permutation = rk.rule("The permutation must be a constant tensor.", _static(1), "static_permutation")
static_slice = rk.rule("Begin and size must be constant int32 tensors.", _static(1, 2, int32=True), "static_slice")
static_strided_slice = rk.rule("Begin, end and strides must be constant int32 tensors.",
                               _static(1, 2, 3, int32=True), "static_strided_slice")
static_split_axis = rk.rule("The split axis must be a constant int32 tensor.", _static(0, int32=True),
                            "static_split_axis")
static_block = rk.rule("Block shape and crops/paddings must be constant tensors.", _static(1, 2), "static_block")
static_one_hot = rk.rule("Depth, on value and off value must be constant tensors.", _static(1, 2, 3),
                         "static_one_hot")
static_multiples = rk.rule("Multiples must be a constant tensor.", _static(1), "static_multiples")
static_shape = rk.rule("The output shape must be a constant tensor.", _static(2), "static_shape")


def static_split_v(op: Op, graph: Graph) -> bool:
    """With two or more outputs, size_splits and the axis must be constant tensors, the axis int32."""
    # splitv_op_builder.cc: one output is built as a RESHAPE before either operand is read
    return len(op.outputs) < 2 or (_static(1)(op, graph) and _static(2, int32=True)(op, graph))


def static_axes_vector(op: Op, graph: Graph) -> bool:
    """Reduction axes must be a constant 1-D int32 tensor."""
    axes = rk.tensor(op, graph, 1)
    return axes is not None and axes.is_constant and len(axes.shape) == 1 and axes.dtype is DType.INT32


def static_k(op: Op, graph: Graph) -> bool:
    """k must be one constant 32-bit integer."""
    # qnn_compose_graph.cc BuildTopkV2Op: a k not static or not of 1 element, or not int32/uint32, builds nothing
    k = rk.tensor(op, graph, 1)
    return k is not None and k.is_constant and k.dtype in (DType.INT32, DType.UINT32) and k.data.size == 1


def pad_data_types(op: Op, graph: Graph) -> bool:
    """The data must be float32/float16 or 8/16-bit quantized."""
    # pad_op_builder.cc BuildPadOp: any other input type is "Unsupported input tensor type."
    x = rk.tensor(op, graph, 0)
    return x is not None and (x.dtype in rk.FLOATS or _fixed_point(x, _QUANT))


def static_pad_value(op: Op, graph: Graph) -> bool:
    """The pad value must be a constant float32 or 8-bit quantized tensor."""
    # pad_op_builder.cc reads it with GetTensorData: float for float data, int8/uint8 for quantized data
    value = rk.tensor(op, graph, 2)
    return value is None or (value.is_constant
                             and (value.dtype is DType.FLOAT32 or _fixed_point(value, rk.EIGHT_BIT)))


def one_hot_value_types(op: Op, graph: Graph) -> bool:
    """On and off values must be float32 or 8-bit quantized."""
    # onehot_op_builder.cc takes uint8, int8 and uint16 fixed point or float32 values, no other type
    on = rk.tensor(op, graph, 2)
    return on is not None and (on.dtype is DType.FLOAT32 or _fixed_point(on, rk.EIGHT_BIT))


def broadcast_input_types(op: Op, graph: Graph) -> bool:
    """The input must be float32, int32, bool or 8/16-bit quantized."""
    # broadcast_to_op_builder.cc makes the zeros it adds for these types only
    x = rk.tensor(op, graph, 0)
    return x is not None and (x.dtype in (DType.FLOAT32, DType.INT32, DType.BOOL) or _fixed_point(x, _QUANT))


def update_slice_form(op: Op, graph: Graph) -> bool:
    """Start indices must be int32, and the operand of rank 2 or more."""
    # dynamic_update_slice_op_builder.cc: it selects rows of dimension 1 by the int32 start indices
    x, start = rk.tensor(op, graph, 0), rk.tensor(op, graph, 2)
    return x is not None and start is not None and len(x.shape) >= 2 and start.dtype is DType.INT32


def gather_batch_dims_0(op: Op, graph: Graph) -> bool:
    """batch_dims must be 0."""
    return int(rk.option(op, "batch_dims", 0)) == 0


def no_ellipsis_mask(op: Op, graph: Graph) -> bool:
    """Only ellipsis_mask 0 is supported."""
    return not rk.option(op, "ellipsis_mask", 0)


def single_static_axis(op: Op, graph: Graph) -> bool:
    """The axis must be one constant int32 value."""
    axis = rk.tensor(op, graph, 1)
    return axis is not None and axis.is_constant and axis.dtype is DType.INT32 and axis.data.size == 1


_ACT = (fused_activation_supported,)
_REDUCE = (static_axes_vector,)
# Ops LiteRT's Qualcomm plugin builds without further conditions (qnn_compose_graph.cc, kOpBuilders;
# L2_NORMALIZATION's builder reads none of its options, so its fused activation is not applied).
_PLAIN = (
    OpType.ABS, OpType.BATCH_MATMUL, OpType.CAST, OpType.CEIL, OpType.COS, OpType.DEPTH_TO_SPACE,
    OpType.DEQUANTIZE, OpType.ELU, OpType.EMBEDDING_LOOKUP, OpType.EQUAL, OpType.EXP, OpType.FLOOR,
    OpType.FLOOR_DIV, OpType.FLOOR_MOD, OpType.GATHER_ND, OpType.GELU, OpType.GREATER, OpType.GREATER_EQUAL,
    OpType.HARD_SWISH, OpType.L2_NORMALIZATION, OpType.LEAKY_RELU, OpType.LESS, OpType.LESS_EQUAL, OpType.LOG,
    OpType.LOG_SOFTMAX, OpType.LOGICAL_AND, OpType.LOGICAL_NOT, OpType.LOGICAL_OR, OpType.LOGISTIC,
    OpType.MAXIMUM, OpType.MINIMUM, OpType.NEG, OpType.NOT_EQUAL, OpType.PACK, OpType.POW, OpType.PRELU,
    OpType.QUANTIZE, OpType.RELU, OpType.RELU_0_TO_1, OpType.RELU_N1_TO_1, OpType.RELU6, OpType.RESHAPE,
    OpType.RESIZE_BILINEAR, OpType.RESIZE_NEAREST_NEIGHBOR, OpType.ROUND, OpType.RSQRT, OpType.SELECT,
    OpType.SELECT_V2, OpType.SIGN, OpType.SIN, OpType.SOFTMAX, OpType.SPACE_TO_DEPTH, OpType.SQRT, OpType.SQUARE,
    OpType.SQUARED_DIFFERENCE, OpType.TANH, OpType.UNPACK,
)

# Op type -> the conditions its builder checks before it emits QNN ops, in that order.
TABLE: dict[OpType, tuple[Rule, ...]] = {
    **{t: () for t in _PLAIN},
    # qnn_compose_graph.cc: the builders that pass fused_activation_function to AddFusedActivationNode
    OpType.ADD: _ACT, OpType.SUB: _ACT, OpType.MUL: _ACT, OpType.DIV: _ACT,
    OpType.CONCATENATION: _ACT, OpType.CONV_2D: _ACT, OpType.CONV_3D: _ACT, OpType.DEPTHWISE_CONV_2D: _ACT,
    OpType.TRANSPOSE_CONV: _ACT, OpType.FULLY_CONNECTED: _ACT,
    OpType.AVERAGE_POOL_2D: _ACT, OpType.MAX_POOL_2D: _ACT, OpType.L2_POOL_2D: _ACT,
    OpType.ARG_MAX: (static_axis,), OpType.ARG_MIN: (static_axis,), OpType.CUMSUM: (static_axis,),  # arg_min_max / cumsum_op_builder.cc
    OpType.GATHER: (gather_batch_dims_0,),                                      # gather_op_builder.cc
    OpType.MEAN: _REDUCE, OpType.SUM: _REDUCE, OpType.REDUCE_MAX: _REDUCE, OpType.REDUCE_MIN: _REDUCE,
    OpType.REDUCE_ANY: _REDUCE, OpType.REDUCE_ALL: _REDUCE,                    # reduce_op_builder.cc
    OpType.PAD: (static_paddings, pad_data_types), OpType.PADV2: (static_paddings, pad_data_types, static_pad_value),
    OpType.MIRROR_PAD: (static_paddings, pad_data_types),                       # pad_op_builder.cc
    OpType.SLICE: (static_slice,),                                              # slice_op_builder.cc
    OpType.STRIDED_SLICE: (no_ellipsis_mask, static_strided_slice),             # strided_slice_op_builder.cc
    OpType.TRANSPOSE: (static_permutation,),                                    # transpose_op_builder.cc
    OpType.SPLIT: (static_split_axis,), OpType.SPLIT_V: (static_split_v,),      # split(v)_op_builder.cc
    OpType.REVERSE_V2: (single_static_axis,),                                   # reverse_op_builder.cc
    OpType.BATCH_TO_SPACE_ND: (static_block,), OpType.SPACE_TO_BATCH_ND: (static_block,),  # spatial_transform_nd
    OpType.ONE_HOT: (static_one_hot, one_hot_value_types),                      # onehot_op_builder.cc
    OpType.TILE: (static_multiples,),                                           # tile_op_builder.cc
    OpType.SCATTER_ND: (static_shape,),                                         # scatter_nd_op_builder.cc
    OpType.TOPK_V2: (static_k,),                                                # qnn_compose_graph.cc
    OpType.BROADCAST_TO: (broadcast_input_types,),                              # broadcast_to_op_builder.cc
    OpType.DYNAMIC_UPDATE_SLICE: (update_slice_form,),                          # dynamic_update_slice_op_builder.cc
}


def rule_table(options: object = None) -> dict[OpType, tuple[Rule, ...]]:
    """The rule table; the QNN delegate's options change no op's rules (its backend and precision change the
    type rules above, which the delegate applies before the table)."""
    return dict(TABLE)
