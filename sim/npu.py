"""The NNAPI-like driver's answer side: devices, feature level, supported operations, compile cost."""

from __future__ import annotations

import enum
from typing import Sequence

from runtime.ir.graph import DType, Graph, Op
from sim.cost import Precision
from sim.spec import NnapiDeviceSpec, Profile

__all__ = ["NnapiDriver", "feature_level_for_api", "api_level_for_feature", "op_precision",
           "NNAPI_VERSION", "REFERENCE_DEVICE"]

REFERENCE_DEVICE = "nnapi-reference"

# Android API level -> NNAPI feature level. 27-30 are NNAPI 1.0-1.3; 31 (and 12L's 32) is feature
# level 5; 33 and 34 brought the updatable feature levels 6 and 7.
_FEATURE_LEVELS = {27: 1, 28: 2, 29: 3, 30: 4, 31: 5, 32: 5, 33: 6, 34: 7}
NNAPI_VERSION = {1: "NNAPI 1.0", 2: "NNAPI 1.1", 3: "NNAPI 1.2", 4: "NNAPI 1.3", 5: "feature level 5",
                 6: "feature level 6", 7: "feature level 7"}

_PRECISIONS = {DType.INT8: Precision.INT8, DType.UINT8: Precision.INT8,
               DType.FLOAT32: Precision.FLOAT32, DType.FLOAT16: Precision.FLOAT16}


def feature_level_for_api(api_level: int) -> int:
    """0 below API 27 (no NNAPI); the newest known level above API 34."""
    if api_level < 27:
        return 0
    return _FEATURE_LEVELS.get(api_level, max(_FEATURE_LEVELS.values()))


def api_level_for_feature(level: int) -> int:
    """The first Android API level that ships a feature level."""
    return min(api for api, fl in _FEATURE_LEVELS.items() if fl >= level)


def op_precision(op: Op, graph: Graph) -> Precision | None:
    """The op's activation precision: its first run-time input, or its first output when every input
    is constant. None for integer index or boolean data, which constrains no device."""
    live = [t for t in op.inputs if t >= 0 and not graph.tensors[t].is_constant]
    first = live[0] if live else (op.outputs[0] if op.outputs else -1)
    return _PRECISIONS.get(graph.tensors[first].dtype) if first >= 0 else None


def _preference_key(preference) -> str:
    key = preference.value if isinstance(preference, enum.Enum) else str(preference)
    key = key.lower()
    # NNAPI's documented default when the app leaves the preference unset
    return "fast_single_answer" if key in ("", "undefined") else key


class NnapiDriver:
    """What a phone's NNAPI runtime answers: its devices, feature level and per-device support."""

    def __init__(self, profile: Profile):
        self.profile = profile
        self.api_level = profile.api_level
        self._devices = {d.name: d for d in profile.nnapi_devices}

    @property
    def feature_level(self) -> int:
        return feature_level_for_api(self.api_level)

    def device_names(self) -> tuple[str, ...]:
        """ANeuralNetworks_getDevice order: the profile's order."""
        return tuple(self._devices)

    def device(self, name: str) -> NnapiDeviceSpec:
        try:
            return self._devices[name]
        except KeyError:
            raise KeyError(f"{self.profile.name} has no NNAPI device {name!r}; it has "
                           f"{', '.join(self._devices) or 'none'}") from None

    def device_level(self, name: str) -> int:
        """The device's NNAPI feature level; a profile may give it as the Android API level (>= 27)
        the driver shipped with."""
        level = self.device(name).feature_level
        return feature_level_for_api(level) if level >= 27 else level

    def supported_operations(self, device_names: Sequence[str], ops: Sequence[Op], graph: Graph,
                             relaxed: bool = False) -> tuple[bool, ...]:
        """getSupportedOperationsForDevices: an op is supported when any named device lists its type
        and runs its activation precision. `relaxed` (relaxComputationFloat32toFloat16) lets a
        float16 device take float32 ops."""
        devices = [self.device(n) for n in device_names]
        return tuple(any(self._runs(d, op, graph, relaxed) for d in devices) for op in ops)

    @staticmethod
    def _runs(device: NnapiDeviceSpec, op: Op, graph: Graph, relaxed: bool) -> bool:
        if op.name not in device.ops:
            return False
        precision = op_precision(op, graph)
        if precision is None or precision in device.precisions:
            return True
        return relaxed and precision is Precision.FLOAT32 and Precision.FLOAT16 in device.precisions

    def compile_seconds(self, device: str, cache_dir: str | None = None, token: str | None = None,
                        warm: bool = False) -> float:
        """Model compilation at delegate init; a warm cache needs both cache_dir and model_token."""
        spec = self.device(device)
        return spec.cached_compile_s if (cache_dir and token and warm) else spec.compile_s

    def preference_scales(self, device: str, preference) -> tuple[float, float]:
        """(rate scale, power scale) the driver applies for an execution preference; a preference
        the profile does not describe changes nothing."""
        return tuple(self.device(device).preference.get(_preference_key(preference), (1.0, 1.0)))
