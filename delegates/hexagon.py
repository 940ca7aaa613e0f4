"""The Hexagon DSP delegate (TfLiteHexagonDelegate): 8-bit ops only, after hexagon/utils.cc."""

from __future__ import annotations

from dataclasses import dataclass

from delegates import rulekit as rk
from delegates.api import DelegateOptions, Rule, Support
from delegates.builtin import BuiltinDelegate
from runtime.ir.graph import DType, Graph, Op
from runtime.ir.optypes import OpType
from runtime.ir.options import Activation, Padding
from sim.dsp import has_htp
from sim.spec import UnitKind

__all__ = ["HexagonDelegate", "HexagonOptions", "TABLE", "COMMON", "rule_table"]

_DEFAULT_PARTITIONS = 4      # kMaxHexagonGraphs
_MOST_PARTITIONS = 16        # kMaxMaxHexagonGraphs: more "causes problems" on the DSP
_MIN_NODES = 2               # kMinNodesPerHexagonGraph
_UNAVAILABLE = ("Could not create Hexagon delegate: platform may not support delegate or "
                "required libraries are missing")


@dataclass(frozen=True)
class HexagonOptions:
    """TfLiteHexagonDelegateOptions; 0 partitions / nodes mean the delegate's defaults (4 / 2)."""

    powersave_level: int = 0
    print_graph_profile: bool = False
    max_delegated_partitions: int = 0
    min_nodes_per_partition: int = 0
    enable_dynamic_batch_size: bool = False


_I8 = rk.EIGHT_BIT
_I32 = frozenset({DType.INT32})


def _types(*per_input: frozenset[DType]):
    """InputsWithCorrectTypes: exactly these inputs (absent optional ones skipped), each of a type."""

    def test(op: Op, graph: Graph) -> bool:
        if len(op.inputs) != len(per_input):
            return False
        return all(t < 0 or graph.tensors[t].dtype in kinds for t, kinds in zip(op.inputs, per_input))

    return test


def _typed(reason: str, *per_input: frozenset[DType]) -> Rule:
    return rk.rule(reason, _types(*per_input), "input_types")


# -- rules shared by every op ------------------------------------------------------------------

rank_at_most_4 = rk.rank_at_most(4, "Hexagon handles tensors of rank <= 4 only.")


def eight_bit_data(op: Op, graph: Graph) -> bool:
    """Hexagon runs 8-bit (uint8/int8) models only: a float op stays on the CPU."""
    index = {OpType.TRANSPOSE_CONV: 2, OpType.SPLIT: 1}.get(op.type, 0)
    return rk.input_dtype(op, graph, index) in _I8


def integer_tensors(op: Op, graph: Graph) -> bool:
    """Hexagon holds 8-bit data and int32 only: an op reading or writing another type (an INT64
    index, a float tensor inside the model) stays on the CPU."""
    # the DSP kernel's own check at prepare (delegates/kernel.py): asked here so prepare never refuses
    return rk.off_integer_path(op, graph) is None


COMMON: tuple[Rule, ...] = (rank_at_most_4, eight_bit_data, integer_tensors)

# -- per-op rules ------------------------------------------------------------------------------


def relu_or_no_activation(op: Op, graph: Graph) -> bool:
    """Fused activation must be RELU, RELU6, RELU_N1_TO_1 or none."""
    return rk.activation(op) in (Activation.NONE, Activation.RELU, Activation.RELU6,
                                 Activation.RELU_N1_TO_1)


def no_activation(op: Op, graph: Graph) -> bool:
    """No fused activation is supported."""
    return rk.activation(op) is Activation.NONE


def stride_at_most_3(op: Op, graph: Graph) -> bool:
    """Stride must be <= 3."""
    return rk.option(op, "stride_h", 1) <= 3 and rk.option(op, "stride_w", 1) <= 3


def _dilated(op: Op) -> bool:
    return rk.option(op, "dilation_h_factor", 1) != 1 or rk.option(op, "dilation_w_factor", 1) != 1


def no_dilation(op: Op, graph: Graph) -> bool:
    """Dilation is not supported."""
    return not _dilated(op)


def dilation_only_with_stride_1(op: Op, graph: Graph) -> bool:
    """Dilation is supported only with stride 1."""
    return not _dilated(op) or (rk.option(op, "stride_h", 1) == 1 and rk.option(op, "stride_w", 1) == 1)


def depth_multiplier_1(op: Op, graph: Graph) -> bool:
    """depth_multiplier must be 1, or the input depth 1 without dilation."""
    if rk.option(op, "depth_multiplier", 1) == 1:
        return True
    shape = rk.tensor(op, graph, 0).shape
    return not _dilated(op) and len(shape) == 4 and shape[3] == 1


def filter_height_at_least_2(op: Op, graph: Graph) -> bool:
    """Filter height must be >= 2."""
    shape = rk.tensor(op, graph, 1).shape
    return len(shape) < 2 or shape[1] >= 2


def per_tensor_weights(op: Op, graph: Graph) -> bool:
    """Per-channel quantized weights are not supported for FULLY_CONNECTED."""
    quant = rk.tensor(op, graph, 1).quant
    return quant is None or len(quant.scale) <= 1


def constant_bias(op: Op, graph: Graph) -> bool:
    """Bias must be constant (or absent)."""
    return len(op.inputs) < 3 or op.inputs[2] < 0 or rk.is_const(graph, op.inputs[2])


def plain_fully_connected(op: Op, graph: Graph) -> bool:
    """keep_num_dims must be false and weights in the default format."""
    return not rk.option(op, "keep_num_dims", False) and int(rk.option(op, "weights_format", 0)) == 0


def small_max_pool_window(op: Op, graph: Graph) -> bool:
    """MAX_POOL_2D with SAME padding and a filter >= 13 is not supported."""
    big = rk.option(op, "filter_height", 1) >= 13 or rk.option(op, "filter_width", 1) >= 13
    return not (big and int(rk.option(op, "padding", Padding.SAME)) == Padding.SAME)


def _const_inputs(*indices: int):
    return lambda op, graph: all(k < len(op.inputs) and rk.is_const(graph, op.inputs[k]) for k in indices)


second_input_constant = rk.rule("The axis/size/paddings input must be constant.", _const_inputs(1),
                                "second_input_constant")
split_axis_constant = rk.rule("The split axis must be constant.", _const_inputs(0), "split_axis_constant")
slice_bounds_constant = rk.rule("Begin and size must be constant.", _const_inputs(1, 2),
                                "slice_bounds_constant")
strided_bounds_constant = rk.rule("Begin, end and strides must be constant.", _const_inputs(1, 2, 3),
                                  "strided_bounds_constant")


def resize_size_documented(op: Op, graph: Graph) -> bool:
    """Output size must have 2 elements, each <= 65 (the documented limit)."""
    size = rk.const_values(op, graph, 1)
    return size is not None and len(size) == 2 and all(v <= 65 for v in size)


def no_ellipsis_or_new_axis(op: Op, graph: Graph) -> bool:
    """Ellipsis and new-axis masks are not supported."""
    return not rk.option(op, "ellipsis_mask", 0) and not rk.option(op, "new_axis_mask", 0)


def same_or_valid_padding(op: Op, graph: Graph) -> bool:
    """Padding must be SAME or VALID."""
    return int(rk.option(op, "padding", Padding.SAME)) in (Padding.SAME, Padding.VALID)


def transpose_conv_inputs(op: Op, graph: Graph) -> bool:
    """Inputs must be (int32 shape, 8-bit weights, 8-bit input[, int32 bias])."""
    kinds = (_I32, _I8, _I8, _I32)[:len(op.inputs)]
    return len(op.inputs) in (3, 4) and _types(*kinds)(op, graph)


def all_inputs_8bit(op: Op, graph: Graph) -> bool:
    """All inputs must be uint8 or int8."""
    return all(graph.tensors[t].dtype in _I8 for t in op.inputs if t >= 0)


def never(op: Op, graph: Graph) -> bool:
    """SUM is always rejected: the DSP recomputes its output range, shifting dequantized values."""
    return False


_BINARY = _typed("Both inputs must be uint8 or int8.", _I8, _I8)
_AXIS = _typed("Inputs must be (uint8/int8 data, int32 axis/size/paddings).", _I8, _I32)
_CONV = _typed("Inputs must be (8-bit input, 8-bit weights, int32 bias).", _I8, _I8, _I32)
_FC = _typed("Inputs must be (8-bit input, 8-bit weights, int32 bias or none).", _I8, _I8, _I32)
_INT8_BINARY = _typed("Both inputs must be int8.", frozenset({DType.INT8}), frozenset({DType.INT8}))
_INT8_UNARY = _typed("The input must be int8.", frozenset({DType.INT8}))
_UNARY = _typed("Exactly one uint8/int8 input.", _I8)


def _version(limit: int, exact: bool = False) -> Rule:
    if exact:
        return rk.rule(f"Only op version {limit} is supported.", lambda op, g: op.version == limit,
                       f"version_{limit}")
    return rk.max_version(limit, "Op version above {limit} is not supported.")


_V1, _V2, _V3, _V4, _ONLY_V2 = _version(1), _version(2), _version(3), _version(4), _version(2, True)

# Op type -> (version allowlist, then IsNodeSupportedByHexagon's checks), in TFLite's order.
TABLE: dict[OpType, tuple[Rule, ...]] = {
    OpType.ADD: (_V2, _BINARY, relu_or_no_activation),
    OpType.SUB: (_V2, _BINARY, relu_or_no_activation),
    OpType.MUL: (_V2, _BINARY, relu_or_no_activation),
    OpType.SUM: (_V1, never),
    OpType.MEAN: (_V2, _AXIS, second_input_constant),
    OpType.MIRROR_PAD: (_V2, _AXIS, second_input_constant),
    OpType.PAD: (_V2, _AXIS, second_input_constant),
    OpType.FULLY_CONNECTED: (_V4, _FC, per_tensor_weights, constant_bias, relu_or_no_activation,
                             plain_fully_connected),
    OpType.CONCATENATION: (_V2, all_inputs_8bit),
    OpType.MAX_POOL_2D: (_V2, _UNARY, small_max_pool_window, no_activation),
    OpType.AVERAGE_POOL_2D: (_V2, _UNARY, no_activation),
    OpType.TRANSPOSE_CONV: (_V3, transpose_conv_inputs, stride_at_most_3, same_or_valid_padding),
    OpType.CONV_2D: (_V3, _CONV, relu_or_no_activation, stride_at_most_3, no_dilation),
    OpType.DEPTHWISE_CONV_2D: (_V3, _CONV, dilation_only_with_stride_1, relu_or_no_activation,
                               stride_at_most_3, depth_multiplier_1, filter_height_at_least_2),
    OpType.RESHAPE: (_V1,),
    OpType.SOFTMAX: (_V2, _UNARY),
    OpType.HARD_SWISH: (_V1, _UNARY), OpType.RELU: (_ONLY_V2, _UNARY), OpType.RELU6: (_V2, _UNARY),
    OpType.TANH: (_V2, _UNARY), OpType.LOGISTIC: (_V2, _UNARY),
    OpType.RESIZE_NEAREST_NEIGHBOR: (_V3, _AXIS, second_input_constant),
    OpType.RESIZE_BILINEAR: (_V3, _AXIS, second_input_constant, resize_size_documented),
    OpType.L2_NORMALIZATION: (_V2, _UNARY, no_activation),
    OpType.ARG_MAX: (_V2, _AXIS), OpType.ARG_MIN: (_V2, _AXIS),
    OpType.SPLIT: (_V2, split_axis_constant),
    OpType.NEG: (_V1, _UNARY), OpType.TRANSPOSE: (_V2, _AXIS),
    OpType.SPACE_TO_DEPTH: (_V2, _UNARY), OpType.DEPTH_TO_SPACE: (_V2, _UNARY),
    OpType.QUANTIZE: (_V2, _UNARY),
    OpType.MINIMUM: (_V2, _BINARY), OpType.MAXIMUM: (_V2, _BINARY),
    OpType.SLICE: (_V2, slice_bounds_constant),
    OpType.PACK: (_V2, all_inputs_8bit),
    OpType.STRIDED_SLICE: (_V2, strided_bounds_constant, no_ellipsis_or_new_axis),
    OpType.SQUARED_DIFFERENCE: (_ONLY_V2, _INT8_BINARY),
    OpType.RSQRT: (_ONLY_V2, _INT8_UNARY),
}


def _refusal(profile, dsps) -> str | None:
    """Why the phone offers the delegate no DSP: none at all, or only a Hexagon Tensor Processor (v68
    and later), which the delegate's hexagon_nn library does not run on: TFLite's Hexagon delegate guide
    lists Hexagon 680, 682, 685 and 690 (Snapdragon 820-855); Qualcomm's QNN delegate replaced it."""
    if dsps is None:
        return None
    if not dsps:
        return f"Hexagon delegate: {profile.name} has no Hexagon DSP"
    if all(has_htp(d) for d in dsps):
        arch = dsps[0].extras.get("htp_arch")
        return (f"Hexagon delegate: {profile.name}'s Hexagon is an HTP (v{int(arch)}), which the delegate's hexagon_nn "
                f"library does not run on (Hexagon 680-690 only; the QNN delegate, --use_qnn, runs on it)")
    return None


def rule_table(options: HexagonOptions | None = None) -> dict[OpType, tuple[Rule, ...]]:
    return dict(TABLE)


class HexagonDelegate(BuiltinDelegate):
    """Takes 8-bit ops onto the DSP, up to 4 partitions of at least 2 nodes by default."""

    name = "TfLiteHexagonDelegate"
    unit = "dsp"
    fp16_dequant_rule = False

    def __init__(self, options: HexagonOptions | None = None, profile=None):
        self.config = options or HexagonOptions()
        self.warnings: list[str] = []
        super().__init__(DelegateOptions(self._max_partitions(), self.config.min_nodes_per_partition
                                         if self.config.min_nodes_per_partition > 0 else _MIN_NODES))
        self.allows_dynamic_tensors = self.config.enable_dynamic_batch_size
        dsps = list(profile.units_of(UnitKind.DSP)) if profile is not None else None
        self.unit_name = dsps[0].name if dsps else "dsp"
        self.platform_refusal = _refusal(profile, dsps)
        # TFLite's TfLiteHexagonDelegateCreate returns null on a phone it cannot run on: no op is taken
        self.unavailable = _UNAVAILABLE if self.platform_refusal else None

    def _max_partitions(self) -> int:
        limit = self.config.max_delegated_partitions
        if limit <= 0:
            return _DEFAULT_PARTITIONS
        if limit > _MOST_PARTITIONS:
            self.warnings.append(f"Hexagon delegate: cannot have this many {limit} partitions, and will "
                                 f"cap to at most {_MOST_PARTITIONS} partitions.")
            return _MOST_PARTITIONS
        return limit

    def rule_table(self) -> dict[OpType, tuple[Rule, ...]]:
        return rule_table(self.config)

    def common_rules(self) -> tuple[Rule, ...]:
        return COMMON

    def is_node_supported(self, op: Op, graph: Graph) -> Support:
        if self.unavailable:
            return Support(False, self.unavailable)
        return rk.judge(op, graph, TABLE, "Operation is not supported by the Hexagon delegate.",
                        before=COMMON)

    def numeric_mode(self, graph: Graph) -> str:
        return "INTEGER"

    def unit_scales(self, unit):
        """A non-zero powersave level lowers the DSP's clock: slower, and less power drawn."""
        from sim.unit import Scales

        if self.config.powersave_level <= 0:
            return Scales()
        extras = unit.spec.extras
        return Scales(rate=extras.get("powersave_rate_scale", 1.0), power=extras.get("powersave_power_scale", 1.0))

