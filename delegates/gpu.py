"""The GPU delegate (TfLiteGpuDelegateV2): its options and which ops it takes, after model_builder.cc."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from delegates import rulekit as rk
from delegates.api import DelegateOptions, DelegationSummary, Rule, Support
from delegates.builtin import BuiltinDelegate
from runtime.ir.graph import DType, Graph, Op
from runtime.ir.optypes import OpType
from runtime.ir.options import Activation, MirrorPadMode

__all__ = ["GpuDelegate", "GpuOptions", "GpuBackend", "InferencePreference", "Priority", "TABLE",
           "MAX_VERSION", "rule_table", "compatible_tensors"]


class InferencePreference(enum.Enum):
    FAST_SINGLE_ANSWER = "fast_single_answer"
    SUSTAINED_SPEED = "sustained_speed"
    BALANCED = "balanced"


class Priority(enum.Enum):
    AUTO = "auto"
    MAX_PRECISION = "max_precision"
    MIN_LATENCY = "min_latency"
    MIN_MEMORY_USAGE = "min_memory_usage"


class GpuBackend(enum.Enum):
    OPENCL = "cl"
    OPENGL = "gl"


@dataclass(frozen=True)
class GpuOptions:
    """TfLiteGpuDelegateOptionsV2 as the benchmark tool sets it (precision loss and quant on)."""

    is_precision_loss_allowed: bool = True
    inference_preference: InferencePreference = InferencePreference.FAST_SINGLE_ANSWER
    priorities: tuple[Priority, ...] = ()
    enable_quant: bool = True
    backend: GpuBackend = GpuBackend.OPENCL
    max_delegated_partitions: int = 1
    serialization_dir: str | None = None
    model_token: str | None = None

    @property
    def uses_fp16(self) -> bool:
        """Explicit priorities win over the legacy flag: float16 unless MAX_PRECISION comes first."""
        ranked = [p for p in self.priorities if p is not Priority.AUTO]
        if ranked:
            return ranked[0] is not Priority.MAX_PRECISION
        return self.is_precision_loss_allowed


# -- per-op rules -------------------------------------------------------------------------------


def fused_activation_supported(op: Op, graph: Graph) -> bool:
    """Unsupported fused activation: SIGN_BIT."""
    return rk.activation(op) is not Activation.SIGN_BIT


def softmax_beta_one(op: Op, graph: Graph) -> bool:
    """Softmax.beta != 1 is not supported."""
    return float(rk.option(op, "beta", 1.0)) == 1.0


def default_weights_format(op: Op, graph: Graph) -> bool:
    """Unsupported FullyConnected weights format."""
    return int(rk.option(op, "weights_format", 0)) == 0


def constant_axes(op: Op, graph: Graph) -> bool:
    """Reduction axes must be a constant tensor."""
    return len(op.inputs) > 1 and rk.is_const(graph, op.inputs[1])


def constant_paddings(op: Op, graph: Graph) -> bool:
    """Paddings must be a constant tensor."""
    return len(op.inputs) > 1 and rk.is_const(graph, op.inputs[1])


def reflect_mirror_pad(op: Op, graph: Graph) -> bool:
    """Only Reflective padding is supported for Mirror Pad operation."""
    return int(rk.option(op, "mode", MirrorPadMode.REFLECT)) == MirrorPadMode.REFLECT


def constant_slice_parameters(op: Op, graph: Graph) -> bool:
    """Slice begin, end/size and strides must be constant tensors."""
    return all(rk.is_const(graph, t) for t in op.inputs[1:])


def no_ellipsis_or_new_axis(op: Op, graph: Graph) -> bool:
    """STRIDED_SLICE with ellipsis_mask or new_axis_mask is not supported."""
    return not rk.option(op, "ellipsis_mask", 0) and not rk.option(op, "new_axis_mask", 0)


def constant_permutation(op: Op, graph: Graph) -> bool:
    """Transpose permutation must be a constant tensor."""
    return len(op.inputs) > 1 and rk.is_const(graph, op.inputs[1])


def basic_lstm_kernel(op: Op, graph: Graph) -> bool:
    """Only the basic LSTM kernel (5 inputs) is supported."""
    return len(op.inputs) == 5


def gpu_custom_op(op: Op, graph: Graph) -> bool:
    """Custom op has no GPU kernel: the GPU delegate's custom parsers cover MediaPipe's Convolution2DTransposeBias, MaxPoolingWithArgmax2D and MaxUnpooling2D (and custom ops registered with gpu=True)."""
    import runtime.ops  # noqa: F401  (registers the custom ops published models carry)
    from runtime.ops.custom_ops import lookup

    spec = lookup(op.custom_code)
    return spec is not None and spec.gpu


# Highest op versions the GPU delegate accepts (gpu_compatibility.cc); others have no ceiling here.
MAX_VERSION: dict[OpType, int] = {
    OpType.CONV_2D: 6, OpType.DEPTHWISE_CONV_2D: 6, OpType.FULLY_CONNECTED: 9,
    OpType.CONCATENATION: 2, OpType.PAD: 2, OpType.AVERAGE_POOL_2D: 2, OpType.MAX_POOL_2D: 2,
    OpType.SOFTMAX: 2, OpType.RESHAPE: 1, OpType.RESIZE_BILINEAR: 3,
    OpType.RESIZE_NEAREST_NEIGHBOR: 3, OpType.STRIDED_SLICE: 4, OpType.TRANSPOSE: 4,
    OpType.TRANSPOSE_CONV: 3,
}
_VERSION: dict[OpType, Rule] = {t: rk.max_version(v, "Max version supported: {limit}.")
                                for t, v in MAX_VERSION.items()}


def _v(op_type: OpType) -> tuple[Rule, ...]:
    return (_VERSION[op_type],) if op_type in _VERSION else ()


_ACT = (fused_activation_supported,)
_PLAIN = (
    OpType.ABS, OpType.BATCH_MATMUL, OpType.CAST, OpType.COS, OpType.DEPTH_TO_SPACE, OpType.ELU,
    OpType.EXP, OpType.FLOOR, OpType.GATHER, OpType.HARD_SWISH, OpType.LEAKY_RELU, OpType.LOG,
    OpType.LOGISTIC, OpType.MAXIMUM, OpType.MINIMUM, OpType.NEG, OpType.PACK, OpType.POW,
    OpType.PRELU, OpType.RELU, OpType.RELU_N1_TO_1, OpType.RELU6, OpType.RSQRT, OpType.SELECT,
    OpType.SELECT_V2, OpType.SIN, OpType.SPACE_TO_DEPTH, OpType.SPLIT, OpType.SPLIT_V, OpType.SQRT,
    OpType.SQUARE, OpType.SQUARED_DIFFERENCE, OpType.TANH, OpType.TILE, OpType.UNPACK,
    OpType.EQUAL, OpType.NOT_EQUAL, OpType.GREATER, OpType.GREATER_EQUAL, OpType.LESS,
    OpType.LESS_EQUAL, OpType.LOGICAL_AND, OpType.QUANTIZE, OpType.DEQUANTIZE,
)

# Op type -> the rules its parser's IsSupported checks, in that order.
TABLE: dict[OpType, tuple[Rule, ...]] = {
    **{t: () for t in _PLAIN},
    OpType.ADD: _ACT, OpType.SUB: _ACT, OpType.MUL: _ACT, OpType.DIV: _ACT,
    OpType.AVERAGE_POOL_2D: (*_v(OpType.AVERAGE_POOL_2D), *_ACT),
    OpType.MAX_POOL_2D: (*_v(OpType.MAX_POOL_2D), *_ACT),
    OpType.CONCATENATION: (*_v(OpType.CONCATENATION), *_ACT),
    OpType.CONV_2D: (*_v(OpType.CONV_2D), *_ACT),
    OpType.DEPTHWISE_CONV_2D: (*_v(OpType.DEPTHWISE_CONV_2D), *_ACT),
    OpType.TRANSPOSE_CONV: _v(OpType.TRANSPOSE_CONV),
    OpType.FULLY_CONNECTED: (*_v(OpType.FULLY_CONNECTED), default_weights_format, *_ACT),
    OpType.SOFTMAX: (*_v(OpType.SOFTMAX), softmax_beta_one),
    OpType.RESHAPE: _v(OpType.RESHAPE),
    OpType.RESIZE_BILINEAR: _v(OpType.RESIZE_BILINEAR),
    OpType.RESIZE_NEAREST_NEIGHBOR: _v(OpType.RESIZE_NEAREST_NEIGHBOR),
    OpType.PAD: (*_v(OpType.PAD), constant_paddings),
    OpType.PADV2: (constant_paddings,),
    OpType.MIRROR_PAD: (constant_paddings, reflect_mirror_pad),
    OpType.MEAN: (constant_axes,), OpType.SUM: (constant_axes,), OpType.REDUCE_MAX: (constant_axes,),
    OpType.REDUCE_MIN: (constant_axes,), OpType.REDUCE_PROD: (constant_axes,),
    OpType.SLICE: (constant_slice_parameters,),
    OpType.STRIDED_SLICE: (*_v(OpType.STRIDED_SLICE), constant_slice_parameters,
                           no_ellipsis_or_new_axis),
    OpType.TRANSPOSE: (*_v(OpType.TRANSPOSE), constant_permutation),
    OpType.LSTM: (basic_lstm_kernel,),
    OpType.CUSTOM: (gpu_custom_op,),
}

# 8-bit conversions exist only when quantized models are enabled (allow_quant_ops).
_QUANT_ONLY = (OpType.QUANTIZE, OpType.DEQUANTIZE)

# Types beyond float (and 8-bit) that particular ops may read or write (GetOpsToReplace).
_LOGICAL = (OpType.EQUAL, OpType.NOT_EQUAL, OpType.GREATER, OpType.GREATER_EQUAL, OpType.LESS,
            OpType.LESS_EQUAL)
_EXTRA_IN: dict[OpType, frozenset[DType]] = {
    OpType.CAST: frozenset({DType.BOOL, DType.INT32}),
    OpType.SELECT: frozenset({DType.BOOL}), OpType.SELECT_V2: frozenset({DType.BOOL}),
    OpType.LOGICAL_AND: frozenset({DType.BOOL}), OpType.GATHER: frozenset({DType.INT32}),
}
_EXTRA_OUT: dict[OpType, frozenset[DType]] = {
    **{t: frozenset({DType.BOOL}) for t in _LOGICAL},
    OpType.CAST: frozenset({DType.INT32, DType.BOOL}), OpType.LOGICAL_AND: frozenset({DType.BOOL}),
}


def _allowed(ids: tuple[int, ...], kinds: frozenset[DType], graph: Graph) -> bool:
    for t in ids:
        if t < 0:
            continue
        tensor = graph.tensors[t]
        if len(tensor.shape) >= 5 or (not tensor.is_constant and tensor.dtype not in kinds):
            return False
    return True


def compatible_tensors(enable_quant: bool) -> Rule:
    """The tensor check every op passes last: rank < 5, run-time tensors float (8-bit if enabled)."""
    base = rk.FLOATS | (rk.EIGHT_BIT if enable_quant else frozenset())

    def tensor_types(op: Op, graph: Graph) -> bool:
        """OP is supported, but tensor type/shape isn't compatible."""
        return (_allowed(op.inputs, base | _EXTRA_IN.get(op.type, frozenset()), graph)
                and _allowed(op.outputs, base | _EXTRA_OUT.get(op.type, frozenset()), graph))

    return tensor_types


def rule_table(options: GpuOptions) -> dict[OpType, tuple[Rule, ...]]:
    if options.enable_quant:
        return dict(TABLE)
    return {t: rules for t, rules in TABLE.items() if t not in _QUANT_ONLY}


class GpuDelegate(BuiltinDelegate):
    """Takes float ops (8-bit ones as a float view when quant is enabled) into one GPU partition."""

    name = "TfLiteGpuDelegateV2"
    unit = "gpu"
    unit_name = "gpu"
    fp16_dequant_rule = True
    allows_dynamic_tensors = False

    def __init__(self, options: GpuOptions | None = None):
        self.config = options or GpuOptions()
        limit = self.config.max_delegated_partitions
        super().__init__(DelegateOptions(max_delegated_partitions=limit if limit > 0 else 1))
        self._table = rule_table(self.config)
        self._after = (compatible_tensors(self.config.enable_quant),)

    def rule_table(self) -> dict[OpType, tuple[Rule, ...]]:
        return dict(self._table)

    def common_rules(self) -> tuple[Rule, ...]:
        return self._after

    def is_node_supported(self, op: Op, graph: Graph) -> Support:
        return rk.judge(op, graph, self._table, "Operation is not supported.", after=self._after)

    def numeric_mode(self, graph: Graph) -> str:
        return "FLOAT16" if self.config.uses_fp16 else "FLOAT32_VIEW"

    def log_lines(self, summary: DelegationSummary) -> list[str]:
        """GetOpsToReplace (delegates/gpu/common/model_builder.cc): the refused ops and the split
        between GPU and CPU, or nothing when every node runs on the GPU."""
        n, total = summary.delegated, summary.total
        if not summary.unsupported or total <= n:
            return []
        tail = (f"{n} operations will run on the GPU, and the remaining {total - n}" if n
                else f"No operations will run on the GPU, and all {total}")
        return ["Following operations are not supported by GPU delegate:", *summary.unsupported,
                f"{tail} operations will run on the CPU."]


    # -- what it costs on the simulated GPU ---------------------------------------------------

    def fused_nodes(self, partition) -> frozenset[int]:
        """TFLite's GPU delegate links element-wise nodes into the kernel that produces their input
        (gpu/common/gpu_model.cc, MergeElementwiseNodes): the ADD of a residual and a standalone
        activation after a convolution add code to its shader instead of a kernel launch."""
        return linked_nodes(partition.graph, partition.nodes)

    def unit_scales(self, unit):
        """The backend's rate and launch cost, and the sustained-speed preference's lower clock."""
        from sim.unit import Scales

        base = unit.backend_scales(self.config.backend.value)
        if self.config.inference_preference is InferencePreference.SUSTAINED_SPEED:
            rate = unit.spec.extras.get("sustained_rate_scale", 1.0)
            base = Scales(base.rate * rate, base.power * rate, base.dispatch, clock=rate)   # a clock: a governor caps it
        return base

    def init_seconds(self, spec, graph) -> float:
        """Shader compilation; with a serialization dir and token, the first init writes the
        compiled programs and later ones read them (TFLite: up to 90% less init time)."""
        from delegates import compile_cache

        cfg = self.config
        warm = compile_cache.is_warm(cfg.serialization_dir, cfg.model_token, "gpu", graph)
        compile_cache.store(cfg.serialization_dir, cfg.model_token, "gpu", graph)
        return spec.cached_init_s if warm else spec.init_s


# Element-wise ops TFLite's GPU delegate can link into the preceding kernel's shader.
_LINKABLE = frozenset({
    OpType.ADD, OpType.SUB, OpType.MUL, OpType.DIV, OpType.MAXIMUM, OpType.MINIMUM,
    OpType.SQUARED_DIFFERENCE, OpType.RELU, OpType.RELU6, OpType.RELU_N1_TO_1, OpType.LEAKY_RELU,
    OpType.PRELU, OpType.HARD_SWISH, OpType.LOGISTIC, OpType.TANH, OpType.ELU, OpType.ABS, OpType.NEG,
    OpType.EXP, OpType.LOG, OpType.SQRT, OpType.RSQRT})


def linked_nodes(graph, nodes) -> frozenset[int]:
    """Nodes with a run-time input that is the only use of a tensor another node of the same
    partition produced: the producer's kernel computes them in place, in one launch."""
    producer = {t: i for i in nodes for t in graph.ops[i].outputs}
    uses = rk.tensor_uses(graph)
    outputs = set(graph.outputs)
    linked = set()
    for i in nodes:
        op = graph.ops[i]
        if op.type not in _LINKABLE:
            continue
        live = [t for t in op.inputs if t >= 0 and not graph.tensors[t].is_constant]
        if any(t in producer and uses.get(t) == 1 and t not in outputs for t in live):
            linked.add(i)
    return frozenset(linked)
