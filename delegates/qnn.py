"""Qualcomm's QNN delegate (TfLiteQnnDelegate, libQnnTFLiteDelegate.so): its options and which ops it takes.

Options: the QNN TFLite delegate's C API (QnnTFLiteDelegate.h, TfLiteQnnDelegateOptions and its
HTP / GPU backend options) and its external-delegate key:value strings (Qualcomm AI Engine Direct
docs, "External Delegate Options", docs.qualcomm.com 80-63442-10 / 80-70014-54). Op support:
delegates/qnn_rules.py.
"""

from __future__ import annotations

import enum
import os
import typing
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from delegates import rulekit as rk
from delegates.api import DelegateError, DelegateOptions, Rule, Support
from delegates.builtin import BuiltinDelegate
from delegates.external import CodedEnum, coerce, parse_int
from delegates.qnn_rewrites import htp_absorbed_nodes, htp_fused_nodes, htp_inplace_concats
from delegates.qnn_rules import GPU_FLOAT, HTP_FP16, HTP_NO_FP16, HTP_QUANTIZED, TABLE, rule_table
from runtime.ir.graph import Graph, Op
from runtime.ir.optypes import OpType
from sim import numerics as nm
from sim.cost import Precision
from sim.dsp import has_htp
from sim.htp import FIRST_HTP
from sim.spec import UnitKind

__all__ = ["QnnDelegate", "QnnOptions", "QnnBackend", "HtpPrecision", "HtpPerformanceMode", "HtpPerfCtrlStrategy",
           "HtpPdSession", "HtpOptimizationStrategy", "GpuPrecision", "GpuPerformanceMode", "LogLevel",
           "LIBRARY", "is_qnn_library", "options_from_strings"]

# The library benchmark_model's --external_delegate_path names for this delegate.
LIBRARY = "libQnnTFLiteDelegate.so"


class QnnBackend(enum.Enum):
    """backend_type: the QNN backend library the graph is opened with (mandatory, no default)."""

    HTP = "htp"   # the Hexagon Tensor Processor, the phone's NPU
    GPU = "gpu"   # Adreno, through QNN's own GPU backend


# Each enum below lists its members in the order of the C enum, so a member's code is the number the
# external-delegate options take (QnnTFLiteDelegate.h); the names are the docs' names for them.
class HtpPrecision(CodedEnum):
    QUANTIZED = "quantized"   # kHtpQuantized: quantized networks only
    FP16 = "fp16"             # kHtpFp16: float graphs run in float16, quantized ones stay quantized


class HtpPerformanceMode(CodedEnum):
    DEFAULT = "default"
    SUSTAINED_HIGH_PERFORMANCE = "sustained_high_performance"
    BURST = "burst"
    HIGH_PERFORMANCE = "high_performance"
    POWER_SAVER = "power_saver"
    LOW_POWER_SAVER = "low_power_saver"
    HIGH_POWER_SAVER = "high_power_saver"
    LOW_BALANCED = "low_balanced"
    BALANCED = "balanced"
    EXTREME_POWER_SAVER = "extreme_power_saver"


class HtpPerfCtrlStrategy(CodedEnum):
    MANUAL = "manual"
    AUTO = "auto"


class HtpPdSession(CodedEnum):
    UNSIGNED = "unsigned"
    SIGNED = "signed"


class HtpOptimizationStrategy(CodedEnum):
    INFERENCE = "inference"
    PREPARE = "prepare"
    INFERENCE_O3 = "inference_o3"


class GpuPrecision(CodedEnum):
    USER_PROVIDED = "user_provided"   # obey the precisions the TFLite graph has
    FP32 = "fp32"
    FP16 = "fp16"
    HYBRID = "hybrid"


class GpuPerformanceMode(CodedEnum):
    DEFAULT = "default"
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"


class LogLevel(CodedEnum):
    OFF = "off"
    ERROR = "error"
    WARN = "warn"
    INFO = "info"
    VERBOSE = "verbose"
    DEBUG = "debug"


@dataclass(frozen=True)
class QnnOptions:
    """TfLiteQnnDelegateOptions by their external-delegate keys. Defaults: QNN_DELEGATE_HTP_OPTION_INIT
    and QNN_DELEGATE_GPU_OPTION_INIT of delegate API 0.24 (HTP: fp16, conv HMX on; GPU: fp16)."""

    backend_type: QnnBackend = QnnBackend.HTP
    htp_precision: HtpPrecision = HtpPrecision.FP16
    htp_performance_mode: HtpPerformanceMode = HtpPerformanceMode.DEFAULT
    htp_perf_ctrl_strategy: HtpPerfCtrlStrategy = HtpPerfCtrlStrategy.MANUAL
    htp_pd_session: HtpPdSession = HtpPdSession.UNSIGNED
    htp_optimization_strategy: HtpOptimizationStrategy = HtpOptimizationStrategy.INFERENCE
    htp_use_conv_hmx: bool = True
    htp_use_fold_relu: bool = False
    htp_vtcm_size: int = 0          # MB; 0: the device's default VTCM share
    htp_num_hvx_threads: int = 0    # 0: the default thread count
    htp_device_id: int = 0          # which HTP on a SoC with several
    gpu_precision: GpuPrecision = GpuPrecision.FP16
    gpu_performance_mode: GpuPerformanceMode = GpuPerformanceMode.DEFAULT
    log_level: LogLevel = LogLevel.OFF
    profiling: bool = False
    library_path: str = ""
    skel_library_dir: str = ""
    cache_dir: str = ""
    model_token: str = ""

    def __post_init__(self):
        for name in _COUNTS:
            problem = count_problem(parse_int(getattr(self, name), f"qnn option '{name}'"))
            if problem:
                raise DelegateError(f"qnn option '{name}' {problem}")


_HINTS = typing.get_type_hints(QnnOptions)
# The options the C API keeps as uint32_t (QnnTFLiteDelegate.h: vtcm_size, num_hvx_threads, device_id).
_COUNTS = tuple(name for name, hint in _HINTS.items() if hint is int)
UINT32_MAX = 2**32 - 1


def count_problem(value: int) -> str | None:
    """Why a uint32_t option cannot take `value` (a huge one shown by its digit count), or None."""
    if value < 0:
        return f"must be >= 0, not {value}"
    if value > UINT32_MAX:
        shown = value if value < 10**30 else f"a number of {len(str(value))} digits"
        return f"must be at most {UINT32_MAX} (a uint32_t in the QNN delegate's C API), not {shown}"
    return None


def options_from_strings(values: Mapping[str, Any], where: Callable[[str], str]) -> QnnOptions:
    """QnnOptions from text values by key (flags, key:value strings, scenario options); a bad key or
    value raises DelegateError naming it as `where(key)` does."""
    typed = {}
    for key, value in values.items():
        if key not in _HINTS:
            raise DelegateError(f"{where(key)}: the QNN delegate has no option '{key}'; it takes "
                                f"{', '.join(_HINTS)}")
        typed[key] = coerce(_HINTS[key], value, where(key))
        problem = count_problem(typed[key]) if key in _COUNTS else None
        if problem:
            raise DelegateError(f"{where(key)} {problem}")
    return QnnOptions(**typed)


def other_backend_options(options: QnnOptions) -> list[str]:
    """One warning per option of the other backend set away from its default (htp_* with backend_type
    gpu, gpu_* with htp): the delegate reads only its backend's options, so it has no effect."""
    other = "gpu_" if options.backend_type is QnnBackend.HTP else "htp_"
    default = QnnOptions()
    return [f"QNN delegate: {name} {_text(getattr(options, name))} has no effect with backend_type "
            f"{options.backend_type.value} (it is an option of the {other[:-1].upper()} backend)"
            for name in _HINTS if name.startswith(other) and getattr(options, name) != getattr(default, name)]


def _text(value: Any) -> str:
    return value.value if isinstance(value, enum.Enum) else str(value).lower() if isinstance(value, bool) else str(value)


def is_qnn_library(path: str) -> bool:
    """Whether an external delegate path names Qualcomm's QNN delegate library."""
    return os.path.basename(path) == LIBRARY


# -- the delegate ----------------------------------------------------------------------------------

# Performance modes that vote the HTP's clock down: the profile's powersave scales apply.
_SAVERS = frozenset({HtpPerformanceMode.POWER_SAVER, HtpPerformanceMode.LOW_POWER_SAVER,
                     HtpPerformanceMode.HIGH_POWER_SAVER, HtpPerformanceMode.EXTREME_POWER_SAVER})


def _htp_units(profile) -> list:
    return [u for u in profile.units_of(UnitKind.DSP) if has_htp(u)]


class QnnDelegate(BuiltinDelegate):
    """Takes what QNN's HTP backend (or its GPU backend) builds: quantized ops as integers, float ops in
    float16 on an HTP with htp_precision fp16; no partition limit."""

    name = "TfLiteQnnDelegate"
    fp16_dequant_rule = False
    allows_dynamic_tensors = False   # the plugin converts ranked tensors only (ConvertTensor)

    def __init__(self, options: QnnOptions | None = None, profile=None):
        super().__init__(DelegateOptions())
        self.config = options or QnnOptions()
        self.warnings = other_backend_options(self.config)
        htp = self.config.backend_type is QnnBackend.HTP
        self.unit = "dsp" if htp else "gpu"
        units = (_htp_units(profile) if htp else list(profile.units_of(UnitKind.GPU))) if profile else None
        index = self.config.htp_device_id if htp else 0
        spec = units[index] if units and index < len(units) else None
        self.unit_name = spec.name if spec is not None else self.unit
        self.platform_refusal = (self._refusal(profile) if units == [] else
                                 self._no_device(profile, len(units)) if units and spec is None else None)
        self._fp16 = htp and self.config.htp_precision is HtpPrecision.FP16
        self._common = (self._types_rule(spec),)
        # the graph rewrites are a mechanism of the HTP's profile (sim/htp.py): without it, as before
        self._fuses = htp and spec is not None and spec.mech.htp is not None

    def _refusal(self, profile) -> str:
        if self.config.backend_type is QnnBackend.HTP:
            return (f"QNN delegate: {profile.name} has no Qualcomm HTP (a Hexagon v{FIRST_HTP} or later NPU), "
                    f"so backend_type htp cannot open")
        return f"QNN delegate: {profile.name} has no GPU for backend_type gpu"

    def _no_device(self, profile, count: int) -> str:
        return (f"QNN delegate: {profile.name} has {count} HTP{'s' if count > 1 else ''} (htp_device_id 0"
                f"{f' to {count - 1}' if count > 1 else ''}), so htp_device_id {self.config.htp_device_id} cannot open")

    def _types_rule(self, spec) -> Rule:
        if self.config.backend_type is QnnBackend.GPU:
            return GPU_FLOAT
        if not self._fp16:
            return HTP_QUANTIZED
        if spec is not None and Precision.FLOAT16 not in spec.macs_per_s:
            return HTP_NO_FP16
        return HTP_FP16

    def rule_table(self) -> dict[OpType, tuple[Rule, ...]]:
        return rule_table(self.config)

    def common_rules(self) -> tuple[Rule, ...]:
        return self._common

    def is_node_supported(self, op: Op, graph: Graph) -> Support:
        if self.platform_refusal:
            return Support(False, self.platform_refusal)
        return rk.judge(op, graph, TABLE, "Operation is not supported by the QNN delegate.", before=self._common)

    def numeric_mode(self, graph: Graph, nodes=None) -> str:
        """HTP: each op in its tensors' types, as the plugin converts them: integer kernels for a
        quantized partition, float16 for a float one, both (mixed) where a quantized partition
        holds float ops, or bool masks (a comparison's output, which the HTP holds as QNN's
        BOOL_8 and the integer kernels' mode does not). GPU: gpu_precision's float16 (fp16,
        hybrid) or float32 (fp32, user_provided of a float32 graph)."""
        if self.config.backend_type is QnnBackend.GPU:
            fp32 = self.config.gpu_precision in (GpuPrecision.FP32, GpuPrecision.USER_PROVIDED)
            return "FLOAT32_VIEW" if fp32 else "FLOAT16"
        ops = [graph.ops[i] for i in (nodes if nodes is not None else range(len(graph.ops)))]
        floats = [nm.computes_in_float(op, graph) for op in ops]
        if not any(floats):
            # the HTP types (HTP_FP16 / HTP_QUANTIZED) take bool, the integer kernels do not
            return "INTEGER" if all(rk.off_integer_path(op, graph) is None for op in ops) else "MIXED"
        quantized = any(not f and any(nm.is_quantized(graph.tensors[t]) for t in (*op.inputs, *op.outputs)
                                      if t >= 0 and not graph.tensors[t].is_constant)
                        for op, f in zip(ops, floats))
        return "MIXED" if quantized else "FLOAT16"

    def fused_nodes(self, partition) -> frozenset[int]:
        """The HTP runs the partition as one QNN graph, which its backend rewrites before running:
        activations and element-wise ops after a convolution run inside it (sim/htp's croutons stay
        in VTCM, no op of their own). Only on a profile that gives the HTP its mechanisms."""
        if not self._fuses:
            return frozenset()
        return htp_fused_nodes(partition.graph, partition.nodes)

    def absorbed_nodes(self, partition) -> frozenset[int]:
        """The activations the HTP's matrix unit applies in the output stage of the convolution before
        them (htp_absorbed_nodes), and the concatenations whose inputs are written in place
        (htp_inplace_concats): no pass of their own. Only where the partition is fused."""
        if not self._fuses:
            return frozenset()
        graph, nodes = partition.graph, partition.nodes
        return htp_absorbed_nodes(graph, htp_fused_nodes(graph, nodes)) | htp_inplace_concats(graph, nodes)

    def unit_scales(self, unit):
        """A power-saver performance vote lowers the HTP's clock: the profile's powersave scales;
        htp_vtcm_size sets the VTCM the graph gets (sim/htp.vtcm_share)."""
        from sim.unit import Scales

        if self.config.backend_type is not QnnBackend.HTP:
            return Scales()
        vtcm = float(self.config.htp_vtcm_size)
        if self.config.htp_performance_mode not in _SAVERS:
            return Scales(vtcm_mb=vtcm)
        extras = unit.spec.extras
        return Scales(rate=extras.get("powersave_rate_scale", 1.0), power=extras.get("powersave_power_scale", 1.0),
                      vtcm_mb=vtcm)

    def init_seconds(self, spec, graph) -> float:
        """Graph preparation on the backend; with cache_dir and model_token, a later init reads the
        compiled context binary instead (the delegate's RESTORE mode)."""
        from delegates import compile_cache

        cfg = self.config
        key = f"qnn-{cfg.backend_type.value}"
        warm = compile_cache.is_warm(cfg.cache_dir or None, cfg.model_token or None, key, graph)
        compile_cache.store(cfg.cache_dir or None, cfg.model_token or None, key, graph)
        return spec.cached_init_s if warm else spec.init_s

    def partition_mode(self, partition) -> str:
        return self.numeric_mode(partition.graph, partition.nodes)
