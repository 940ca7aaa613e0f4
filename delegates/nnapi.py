"""The NNAPI delegate (TfLiteNnapiDelegate): options, device choice and which ops it hands the driver.

Device choice. With accelerator_name (Android 10+, API 29) the partitions run on that device and an
op is kept only when the driver says the device supports it. Without a name the simulator still
runs each model on one device, chosen per model: of the devices the driver lists (nnapi-reference
left out when disallow_nnapi_cpu applies, API 29+), the one that supports the most of the model's
ops; ties go to a real accelerator before nnapi-reference, then the higher feature level, then the
driver's order. The target feature level is the lower of the phone's and the device's.
`device`, `feature_level`, `unit` and `unit_name` describe the device of the last model asked about.
"""

from __future__ import annotations

import enum
import weakref
from dataclasses import dataclass

from delegates import nnapi_rules
from delegates import rulekit as rk
from delegates.api import YES, DelegateError, DelegateOptions, Rule, Support
from delegates.builtin import BuiltinDelegate
from runtime.ir.graph import DType, Graph, Op
from runtime.ir.optypes import OpType
from sim.cost import Precision
from sim.npu import REFERENCE_DEVICE, NnapiDriver
from sim.spec import NnapiDeviceSpec

__all__ = ["NnapiDelegate", "NnapiOptions", "ExecutionPreference"]

_DEVICE_SELECTION_API = 29  # ANeuralNetworks_getDevice and friends arrived with NNAPI 1.2
_FLOAT_PRECISIONS = frozenset({Precision.FLOAT32, Precision.FLOAT16})


class ExecutionPreference(enum.Enum):
    UNDEFINED = "undefined"
    LOW_POWER = "low_power"
    FAST_SINGLE_ANSWER = "fast_single_answer"
    SUSTAINED_SPEED = "sustained_speed"


@dataclass(frozen=True)
class NnapiOptions:
    """StatefulNnApiDelegate::Options; max_number_delegated_partitions <= 0 means no limit."""

    accelerator_name: str | None = None
    execution_preference: ExecutionPreference = ExecutionPreference.UNDEFINED
    allow_fp16: bool = False
    disallow_nnapi_cpu: bool = True
    max_number_delegated_partitions: int = 3
    cache_dir: str | None = None
    model_token: str | None = None
    use_burst_computation: bool = False


@dataclass(frozen=True)
class _Binding:
    """One device's view: the feature level it targets and the rules that follow from it."""

    device: NnapiDeviceSpec | None
    level: int
    table: dict[OpType, tuple[Rule, ...]]
    after: tuple[Rule, ...]
    runs_float: bool = True   # the device computes float ops (an integer model's float ops may run there)


def _is_weight_expander(op: Op, graph: Graph) -> bool:
    """A DEQUANTIZE of constant float16 weights or a DENSIFY of constant sparse weights."""
    if op.type is OpType.DEQUANTIZE:
        src = rk.tensor(op, graph, 0)
        return src is not None and src.is_constant and src.dtype is DType.FLOAT16
    return op.type is OpType.DENSIFY and rk.is_const(graph, op.inputs[0])


class NnapiDelegate(BuiltinDelegate):
    """Hands ops to the phone's NNAPI driver, up to 3 partitions by default."""

    name = "TfLiteNnapiDelegate"
    fp16_dequant_rule = False
    allows_dynamic_tensors = True

    def __init__(self, options: NnapiOptions | None = None, profile=None):
        self.config = options or NnapiOptions()
        super().__init__(DelegateOptions(max(self.config.max_number_delegated_partitions, 0)))
        self.profile = profile
        self.api_level = profile.api_level if profile is not None else 0
        self.driver = NnapiDriver(profile) if profile is not None else None
        self.warnings: list[str] = []
        self._modes: "weakref.WeakKeyDictionary[Graph, str]" = weakref.WeakKeyDictionary()
        self._candidates = [self._bind(d) for d in self._devices()]
        self.unavailable = self._availability()
        self.platform_refusal = self._refusal()
        # per model: (binding, None for an ordinary model or the whole-model verdict)
        self._models: "weakref.WeakKeyDictionary[Graph, tuple[_Binding, Support | None]]" = \
            weakref.WeakKeyDictionary()
        self._adopt(self._candidates[0] if self._candidates else self._bind(None))

    # -- devices ------------------------------------------------------------------------------

    def _devices(self) -> list[NnapiDeviceSpec]:
        """The named accelerator, or every device the driver may pick, best first."""
        if self.driver is None or self.driver.feature_level == 0:
            return []
        names = self.driver.device_names()
        wanted = self.config.accelerator_name
        if wanted and self.api_level < _DEVICE_SELECTION_API:
            self.warnings.append(f"accelerator_name {wanted!r} ignored: device selection needs Android "
                                 f"API level {_DEVICE_SELECTION_API}")
        elif wanted:
            if wanted not in names:
                raise DelegateError(f"Could not find the specified NNAPI accelerator: {wanted}. "
                                    f"Must be one of: {{{','.join(names)}}}.")
            return [self.driver.device(wanted)]
        skip_cpu = self.config.disallow_nnapi_cpu and self.api_level >= _DEVICE_SELECTION_API
        devices = [self.driver.device(n) for n in names if not (skip_cpu and n == REFERENCE_DEVICE)]
        return sorted(devices, key=self._rank, reverse=True)

    def _rank(self, device: NnapiDeviceSpec) -> tuple:
        order = self.driver.device_names().index(device.name)
        return device.name != REFERENCE_DEVICE, self.driver.device_level(device.name), -order

    def _bind(self, device: NnapiDeviceSpec | None) -> _Binding:
        level = self.driver.feature_level if self.driver is not None else 0
        if device is None:
            return _Binding(None, level, nnapi_rules.rule_table(level), nnapi_rules.common_rules(level))
        level = min(level, self.driver.device_level(device.name))
        relaxed = self.config.allow_fp16
        asks_driver = rk.rule(
            f"The NNAPI driver reports that {device.name} does not support this op at its precision.",
            lambda op, graph: self.driver.supported_operations([device.name], [op], graph, relaxed)[0],
            "device_supports_op")
        runs_float = bool(device.precisions & _FLOAT_PRECISIONS)
        integer_only = () if runs_float else (self._integer_rule(device),)
        return _Binding(device, level, nnapi_rules.rule_table(level),
                        (*nnapi_rules.common_rules(level), asks_driver, *integer_only), runs_float)

    def _integer_rule(self, device: NnapiDeviceSpec) -> Rule:
        """An integer-only device runs an 8-bit model's ops in the unit's integer kernels, which hold
        8-bit data and int32 only (delegates/kernel.py): the rule their prepare applies, asked first."""
        return rk.rule(
            f"{device.name} computes 8-bit integer models only: an op of an 8-bit model that reads or writes "
            f"another type (a float tensor, an INT64 index) needs a device that computes in float.",
            lambda op, graph: self._numeric_mode(graph) != "INTEGER" or rk.off_integer_path(op, graph) is None,
            "integer_device_types")

    def _availability(self) -> str | None:
        if self.profile is None:
            return "NNAPI needs an Android device profile."
        if self.driver.feature_level == 0:
            return (f"NNAPI needs Android API level 27 (8.1) or newer; {self.profile.name} has API "
                    f"level {self.api_level}.")
        if not self._candidates:
            return ("No NNAPI device to run on: nnapi-reference is excluded (disallow_nnapi_cpu) and "
                    "the driver lists no other.")
        return None

    def _refusal(self) -> str | None:
        """The phone offers no NNAPI: not Android, too old an Android, or no device to run on."""
        if self.profile is None or not self.unavailable:
            return None
        name = self.profile.name
        if self.profile.os != "android":
            return f"NNAPI delegate: {name} is not an Android device"
        if self.driver.feature_level == 0:
            return f"NNAPI delegate: {name} runs Android API level {self.api_level}; NNAPI needs 27 or newer"
        return f"NNAPI delegate: {name} has no NNAPI device to run on (disallow_nnapi_cpu excludes nnapi-reference)"

    def _adopt(self, binding: _Binding) -> None:
        self._binding = binding
        self.device, self.feature_level = binding.device, binding.level
        kinds = {u.name: u.kind.value for u in self.profile.units} if self.profile is not None else {}
        self.unit_name = binding.device.unit if binding.device is not None else "npu"
        self.unit = kinds.get(self.unit_name, "npu")

    # -- support ------------------------------------------------------------------------------

    def rule_table(self) -> dict[OpType, tuple[Rule, ...]]:
        return dict(self._binding.table)

    def common_rules(self) -> tuple[Rule, ...]:
        return self._binding.after

    def is_node_supported(self, op: Op, graph: Graph) -> Support:
        """The model's main device answers; an op it refuses goes to the best other device that
        takes it (NNAPI's runtime splits a model across drivers), else the main device's reason."""
        if self.unavailable:
            return Support(False, self.unavailable)
        binding, verdict = self._model(graph)
        if verdict is not None:
            return verdict
        answer = self._single(op, graph, binding)
        return answer if answer or self._other(op, graph, binding) is None else YES

    def _other(self, op: Op, graph: Graph, main: _Binding) -> _Binding | None:
        """The best-ranked other device that runs `op` ( _candidates are in rank order)."""
        return next((b for b in self._candidates if b is not main and self._single(op, graph, b)), None)

    def _device_of(self, i: int, graph: Graph) -> _Binding:
        binding, _ = self._model(graph)
        op = graph.ops[i]
        if self._single(op, graph, binding):
            return binding
        return self._other(op, graph, binding) or binding

    def node_units(self, partition) -> dict[int, str]:
        """Ops the model's main device refuses run on another driver's unit."""
        graph = partition.graph
        main, _ = self._model(graph)
        out = {}
        for i in partition.nodes:
            b = self._device_of(i, graph)
            if b is not main and b.device is not None:
                out[i] = b.device.unit
        self._adopt(main)
        return out

    def devices_for(self, partition) -> tuple[str, ...]:
        """The NNAPI devices a delegated partition runs on, its main device first."""
        graph = partition.graph
        main, _ = self._model(graph)
        names = [main.device.name] if main.device is not None else []
        for i in partition.nodes:
            b = self._device_of(i, graph)
            if b.device is not None and b.device.name not in names:
                names.append(b.device.name)
        self._adopt(main)
        return tuple(names)

    def step_seconds(self, spec) -> float:
        """A step on another driver pays that driver's execution call."""
        device = self._device_on(spec.name)
        return device.execution_s if device is not None else 0.0

    def _device_on(self, unit_name: str) -> NnapiDeviceSpec | None:
        """The (best-ranked) device on a unit, as the current profile describes it."""
        name = next((b.device.name for b in self._candidates if b.device is not None and b.device.unit == unit_name),
                    None)
        return self.driver.device(name) if name is not None else None

    def use_profile(self, profile) -> None:
        """Read the devices' costs (execution call, rate scale, preferences) from another profile of
        the same phone: what a calibration does when it re-times a plan with other numbers. Which
        device takes which op does not change."""
        self.profile, self.driver = profile, NnapiDriver(profile)
        if self.device is not None:
            self.device = self.driver.device(self.device.name)

    def _model(self, graph: Graph) -> tuple[_Binding, Support | None]:
        entry = self._models.get(graph)
        if entry is None:
            binding = max(self._candidates, key=lambda b: (self._count(b, graph), self._rank(b.device)))
            weighty = any(_is_weight_expander(o, graph) for o in graph.ops)
            entry = (binding, self._whole_model(graph, binding) if weighty else None)
            self._models[graph] = entry
        self._adopt(entry[0])
        return entry

    def _count(self, binding: _Binding, graph: Graph) -> int:
        if len(self._candidates) == 1:
            return 0
        return sum(bool(self._single(op, graph, binding)) for op in graph.ops
                   if not _is_weight_expander(op, graph))

    @staticmethod
    def _single(op: Op, graph: Graph, binding: _Binding) -> Support:
        return rk.judge(op, graph, binding.table, "Unsupported operation type.", after=binding.after)

    def _whole_model(self, graph: Graph, binding: _Binding) -> Support:
        """float16 or sparse weights: NNAPI takes such a model whole or not at all."""
        for i, op in enumerate(graph.ops):
            answer = YES if _is_weight_expander(op, graph) else self._single(op, graph, binding)
            if not answer:
                return Support(False, "NNAPI delegates a model with float16 or sparse weights only "
                                      f"when every op is supported; {graph.describe_op(i)} is not: "
                                      f"{answer.reason}")
        return YES

    # -- execution ----------------------------------------------------------------------------

    def _numeric_mode(self, graph: Graph) -> str:
        """numeric_mode, once per model: the support rules ask it for every op."""
        mode = self._modes.get(graph)
        if mode is None:
            mode = self._modes[graph] = self.numeric_mode(graph)
        return mode

    def numeric_mode(self, graph: Graph) -> str:
        # any 8-bit activation (a model input feeding a DEQUANTIZE counts): the driver runs the
        # model's integer path; float16 is for float models only
        eight_bit = any(graph.tensors[t].dtype in rk.EIGHT_BIT and not graph.tensors[t].is_constant
                        for op in graph.ops for t in (*op.inputs, *op.outputs) if t >= 0)
        if eight_bit:
            return "INTEGER"
        if self.config.allow_fp16:
            return "FLOAT16"
        # A dynamic-range model: the delegate hands NNAPI its int8 weights behind a DEQUANTIZE
        # (nnapi_delegate.cc, AddDequantizeOperatorsWhereNeeded), so the driver computes a float op
        # on dequantized weights, never the CPU's hybrid kernel: the float view.
        hybrid = any(t.is_constant and t.dtype in rk.EIGHT_BIT and t.quant is not None for t in graph.tensors)
        return "FLOAT32_VIEW" if hybrid else "REFERENCE"

    def compile_seconds(self, warm: bool = False) -> float:
        """Compilation at init on the chosen device; cache_dir + model_token make a warm run cheap."""
        if self.device is None:
            return 0.0
        return self.driver.compile_seconds(self.device.name, self.config.cache_dir,
                                           self.config.model_token, warm)

    def init_seconds(self, spec, graph) -> float:
        """Model compilation by the driver; cache_dir + model_token make later inits warm."""
        from delegates import compile_cache

        cfg = self.config
        warm = compile_cache.is_warm(cfg.cache_dir, cfg.model_token, "nnapi", graph)
        compile_cache.store(cfg.cache_dir, cfg.model_token, "nnapi", graph)
        return self.compile_seconds(warm)

    def invoke_seconds(self, spec) -> float:
        """Each execution goes through the driver: its per-execution cost (which for a DSP device
        includes the remote call) replaces the unit's own invoke cost."""
        return self.driver.device(self.device.name).execution_s if self.device is not None else spec.invoke_s

    def unit_scales(self, unit):
        """The driver's answer to the execution preference: (rate, power) scales of the device on
        that unit, times the rate its driver's kernels reach there (nnapi-reference: plain C++)."""
        from sim.unit import Scales

        device = self._device_on(unit.name) if self._device_on(unit.name) is not None else self.device
        if device is None:
            return Scales()
        rate, power = self.driver.preference_scales(device.name, self.config.execution_preference)
        return Scales(rate=rate * device.rate_scale, power=power)

    def float_nodes(self, partition) -> frozenset[int]:
        """The partition's nodes NNAPI runs on a device that computes in float (an integer model's
        float ops on qti-gpu); the kernel runs on the main device's unit afterwards."""
        graph = partition.graph
        main, _ = self._model(graph)
        floats = frozenset(i for i in partition.nodes if self._device_of(i, graph).runs_float)
        self._adopt(main)
        return floats
