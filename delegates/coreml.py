"""The Core ML delegate (Apple Neural Engine): float ops only, after coreml_delegate.mm and its builders."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass

from delegates import rulekit as rk
from delegates.api import DelegateError, DelegateOptions, DelegationSummary, Rule, Support
from delegates.builtin import BuiltinDelegate
from runtime.ir.graph import DType, Graph, Op
from runtime.ir.optypes import OpType
from runtime.ir.options import Activation, MirrorPadMode
from sim.spec import UnitKind

__all__ = ["CoreMlDelegate", "CoreMlOptions", "CoreMlDevices", "TABLE", "rule_table"]

_MIN_NODES = 2  # kMinNodesPerCoreMlDelegate
_NO_ANE = ("This device does not have Neural Engine, so Core ML delegate will not be enabled. If you "
           "want to run Core ML delegate anyway, set enabled_devices option to "
           "TfLiteCoreMlDelegateAllDevices (or enabledDevices to .allDevices in Swift).")
_NOT_IOS = "CoreML acceleration is unsupported on this platform."


class CoreMlDevices(enum.Enum):
    NEURAL_ENGINE = "neural_engine"
    ALL = "all"


@dataclass(frozen=True)
class CoreMlOptions:
    """TfLiteCoreMlDelegateOptions. coreml_version 0 means the newest (3); 0 partitions means all."""

    enabled_devices: CoreMlDevices = CoreMlDevices.NEURAL_ENGINE
    coreml_version: int = 3
    max_delegated_partitions: int = 0
    min_nodes_per_partition: int = 0


# -- rules shared by every op ------------------------------------------------------------------


def float_input(op: Op, graph: Graph) -> bool:
    """Core ML delegate takes float models only: the op's input must be float32."""
    index = 2 if op.type is OpType.TRANSPOSE_CONV else 0
    return rk.input_dtype(op, graph, index) is DType.FLOAT32


COMMON: tuple[Rule, ...] = (float_input,)

# -- per-op rules ------------------------------------------------------------------------------

_V1 = rk.max_version(1, "Only op version {limit} is supported.")
_V2 = rk.max_version(2, "Op version above {limit} is not supported.")
_V6 = rk.max_version(6, "Op version above {limit} is not supported.")


def _float_or_const_fp16(graph: Graph, t: int) -> bool:
    tensor = graph.tensors[t]
    return tensor.dtype is DType.FLOAT32 or (tensor.dtype is DType.FLOAT16 and tensor.is_constant)


def binary_input_types(op: Op, graph: Graph) -> bool:
    """Both inputs must be float32 (or a constant float16)."""
    return len(op.inputs) >= 2 and all(_float_or_const_fp16(graph, t) for t in op.inputs[:2])


def _as_4d(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (1,) * (4 - len(shape)) + tuple(shape)


def broadcastable(op: Op, graph: Graph) -> bool:
    """Broadcast only as [B,C,H,W] with [B,C,1,1], [B,1,H,W] or [B,1,1,1], rank <= 4."""
    a, b = (graph.tensors[t] for t in op.inputs[:2])
    if len(a.shape) > 4 or len(b.shape) > 4:
        return False
    (b0, h0, w0, c0), (b1, h1, w1, c1) = _as_4d(a.shape), _as_4d(b.shape)
    scalar_const = any(t.is_constant and t.data.size == 1 for t in (a, b))
    if b0 != b1 and not scalar_const:
        return False
    if (h0, w0) != (h1, w1) and (h0, w0) != (1, 1) and (h1, w1) != (1, 1):
        return False
    return c0 == c1 or c0 == 1 or c1 == 1


def no_activation(op: Op, graph: Graph) -> bool:
    """No fused activation is supported."""
    return rk.activation(op) is Activation.NONE


def concat_channel_axis(op: Op, graph: Graph) -> bool:
    """At least 2 inputs, concatenated along the channel axis."""
    rank = len(graph.tensors[op.inputs[0]].shape)
    axis = rk.option(op, "axis", 0)
    return len(op.inputs) >= 2 and ((rank == 3 and axis in (2, -1)) or (rank == 4 and axis in (3, -1)))


def not_sign_bit(op: Op, graph: Graph) -> bool:
    """Fused activation SIGN_BIT is not supported."""
    return rk.activation(op) is not Activation.SIGN_BIT


def constant_kernel(op: Op, graph: Graph) -> bool:
    """Weights must be constant, kernel at most 16384 high and wide."""
    w = rk.tensor(op, graph, 1)
    return (w is not None and rk.is_const(graph, op.inputs[1]) and len(w.shape) == 4
            and w.shape[1] <= 16384 and w.shape[2] <= 16384)


def constant_bias(op: Op, graph: Graph) -> bool:
    """Bias must be constant."""
    return len(op.inputs) < 3 or op.inputs[2] < 0 or rk.is_const(graph, op.inputs[2])


def constant_output_shape(op: Op, graph: Graph) -> bool:
    """The output shape input must be constant."""
    return rk.is_const(graph, op.inputs[0])


def fully_connected_form(op: Op, graph: Graph) -> bool:
    """Constant float weights and bias, default weights format, all input dims but the last 1."""
    x, w = rk.tensor(op, graph, 0), rk.tensor(op, graph, 1)
    bias_ok = len(op.inputs) < 3 or op.inputs[2] < 0 or (
        rk.is_const(graph, op.inputs[2]) and graph.tensors[op.inputs[2]].dtype in rk.FLOATS)
    return (int(rk.option(op, "weights_format", 0)) == 0 and w is not None and w.dtype in rk.FLOATS
            and rk.is_const(graph, op.inputs[1]) and x.shape[-1] == _size(x.shape) and bias_ok)


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def mean_over_height_width(op: Op, graph: Graph) -> bool:
    """keep_dims, a 4-D input, reducing over height and width only."""
    axes = rk.const_values(op, graph, 1)
    return (bool(rk.option(op, "keep_dims", False)) and len(graph.tensors[op.inputs[0]].shape) == 4
            and axes is not None and all((a + 4) % 4 in (1, 2) for a in axes))


def constant_hw_padding(op: Op, graph: Graph) -> bool:
    """Constant [4, 2] paddings on height and width only (no batch or channel padding)."""
    pads = rk.tensor(op, graph, 1)
    if pads is None or not pads.is_constant or pads.shape != (4, 2):
        return False
    flat = [int(v) for v in pads.data.reshape(-1)]
    return flat[0] == flat[1] == 0 and flat[6] == flat[7] == 0


def reflect_mode(op: Op, graph: Graph) -> bool:
    """Only REFLECT mode is supported for MIRROR_PAD."""
    return int(rk.option(op, "mode", MirrorPadMode.REFLECT)) == MirrorPadMode.REFLECT


def reshape_target(op: Op, graph: Graph) -> bool:
    """Target rank 3 or 4, from options or a constant int32 shape vector."""
    if len(op.inputs) < 2:
        return len(rk.option(op, "new_shape", ())) in (3, 4)
    shape = graph.tensors[op.inputs[1]]
    return (shape.is_constant and shape.dtype is DType.INT32 and len(shape.shape) == 1
            and shape.shape[0] in (3, 4))


def constant_size(op: Op, graph: Graph) -> bool:
    """Output size of ResizeBilinear should be constant."""
    return len(op.inputs) > 1 and rk.is_const(graph, op.inputs[1])


def softmax_beta_one(op: Op, graph: Graph) -> bool:
    """Only beta == 1.0 is supported."""
    return float(rk.option(op, "beta", 1.0)) == 1.0


def reshape_needs_version_2(version: int) -> Rule:
    def coreml_version_2(op: Op, graph: Graph) -> bool:
        """RESHAPE runs only with coreml_version 2."""
        return version < 3

    return coreml_version_2


_CONV = (_V1, not_sign_bit, constant_kernel, constant_bias)

# Op type -> IsNodeSupportedByDelegate's checks (version first, as there).
TABLE: dict[OpType, tuple[Rule, ...]] = {
    OpType.ADD: (_V1, binary_input_types, broadcastable),
    OpType.MUL: (_V1, binary_input_types, broadcastable),
    OpType.AVERAGE_POOL_2D: (_V1, no_activation),
    OpType.MAX_POOL_2D: (_V1, no_activation),
    OpType.CONCATENATION: (_V1, no_activation, concat_channel_axis),
    OpType.CONV_2D: _CONV,
    OpType.DEPTHWISE_CONV_2D: (_V2, *_CONV[1:]),
    OpType.TRANSPOSE_CONV: (_V1, constant_kernel, constant_output_shape),
    OpType.FULLY_CONNECTED: (_V6, fully_connected_form, not_sign_bit),
    OpType.HARD_SWISH: (_V1,), OpType.LOGISTIC: (_V1,), OpType.RELU: (_V1,),
    OpType.RELU_N1_TO_1: (_V1,), OpType.RELU6: (_V1,), OpType.TANH: (_V1,),
    OpType.MEAN: (_V1, mean_over_height_width),
    OpType.MIRROR_PAD: (_V1, reflect_mode, constant_hw_padding),
    OpType.PAD: (_V1, constant_hw_padding), OpType.PADV2: (_V1, constant_hw_padding),
    OpType.RESHAPE: (_V1, reshape_target),
    OpType.RESIZE_BILINEAR: (_V1, constant_size),
    OpType.SOFTMAX: (_V1, softmax_beta_one),
}


def rule_table(options: CoreMlOptions) -> dict[OpType, tuple[Rule, ...]]:
    table = dict(TABLE)
    rules = table[OpType.RESHAPE]
    table[OpType.RESHAPE] = (rules[0], reshape_needs_version_2(options.coreml_version), *rules[1:])
    return table


def _version(options: CoreMlOptions) -> CoreMlOptions:
    if options.coreml_version == 0:  # "the newest version available on the device"
        return dataclasses.replace(options, coreml_version=3)
    if options.coreml_version not in (2, 3):
        raise DelegateError(f"coreml_version must be 2 or 3, not {options.coreml_version}")
    return options


class CoreMlDelegate(BuiltinDelegate):
    """Takes float ops onto the Neural Engine through Core ML; every partition of 2+ nodes by default."""

    name = "TfLiteCoreMlDelegate"
    unit = "ane"
    fp16_dequant_rule = True
    allows_dynamic_tensors = False

    def __init__(self, options: CoreMlOptions | None = None, profile=None):
        self.config = _version(options or CoreMlOptions())
        most, fewest = self.config.max_delegated_partitions, self.config.min_nodes_per_partition
        super().__init__(DelegateOptions(max(most, 0), fewest if fewest > 0 else _MIN_NODES))
        self._table = rule_table(self.config)
        self.unavailable = self._availability(profile)
        self.platform_refusal = self._refusal(profile)
        self.unit, self.unit_name = self._placement(profile)

    def _refusal(self, profile) -> str | None:
        if self.unavailable is None:
            return None
        if profile.os != "ios":
            return f"Core ML delegate: {profile.name} is not an iOS device"
        return f"Core ML delegate: {profile.name} has no Neural Engine and enabled_devices is neural_engine"

    def _availability(self, profile) -> str | None:
        if profile is None:
            return None
        if profile.os != "ios":
            return _NOT_IOS
        if not profile.has_neural_engine and self.config.enabled_devices is not CoreMlDevices.ALL:
            return _NO_ANE
        return None

    def _placement(self, profile) -> tuple[str, str]:
        """(unit kind, unit name): the Neural Engine when there is one; Core ML's 'all devices'
        otherwise lands on the GPU."""
        if profile is None:
            return "ane", "ane"
        for kind in ((UnitKind.ANE,) if profile.has_neural_engine else ()) + (UnitKind.GPU,):
            units = profile.units_of(kind)
            if units:
                return kind.value, units[0].name
        return "ane", "ane"

    def rule_table(self) -> dict[OpType, tuple[Rule, ...]]:
        return dict(self._table)

    def common_rules(self) -> tuple[Rule, ...]:
        return COMMON

    def is_node_supported(self, op: Op, graph: Graph) -> Support:
        if self.unavailable:
            return Support(False, self.unavailable)
        return rk.judge(op, graph, self._table, "Operation is not supported by the Core ML delegate.",
                        before=COMMON)

    def numeric_mode(self, graph: Graph) -> str:
        return "FLOAT16"

    def log_lines(self, summary: DelegationSummary) -> list[str]:
        """DelegatePrepare (delegates/coreml/coreml_delegate.mm) counts the partitions before the
        largest-N / min-nodes choice."""
        return [f"CoreML delegate: {summary.delegated} nodes delegated out of {summary.total} nodes, "
                f"with {summary.previewed} partitions."]

