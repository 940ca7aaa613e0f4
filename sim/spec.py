"""What a phone profile describes: its units, DRAM, copy path and NNAPI devices, as frozen dataclasses."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Mapping

from sim.band import ErrorBand
from sim.cost import OpClass, Precision, Rates
from sim.mechanisms import Mechanisms
from sim.thermal import ThermalSpec

__all__ = ["UnitKind", "UnitSpec", "DramSpec", "CopySpec", "NnapiDeviceSpec", "Profile"]


class UnitKind(enum.Enum):
    CPU = "cpu"
    GPU = "gpu"
    DSP = "dsp"
    ANE = "ane"
    NPU = "npu"


@dataclass(frozen=True)
class UnitSpec:
    """One compute unit. Rates are for the whole unit (a CPU cluster: per core, see `cores`)."""

    name: str                                  # "cpu_big", "cpu_little", "gpu", "dsp", "ane", "npu:<device>"
    kind: UnitKind
    macs_per_s: Mapping[Precision, float]      # peak MAC/s per precision it runs; absent = cannot run
    elem_per_s: Mapping[Precision, float]      # peak element ops/s per precision
    bandwidth: float                           # bytes/s from DRAM
    dispatch_s: float                          # per-op launch / scheduling cost
    active_w: Mapping[Precision, float]        # power while busy, per precision
    idle_w: float                              # power while idle (powered, clock-gated)
    efficiency: Mapping[OpClass, float] = field(default_factory=dict)
    cores: int = 1                             # CPU: cores in the cluster; rates above are per core
    init_s: float = 0.0                        # one-time compile / graph preparation per delegate
    cached_init_s: float = 0.0                 # the same with a warm serialization / compilation cache
    invoke_s: float = 0.0                      # per delegated-partition invocation (FastRPC, sync)
    channel_align: int = 1                     # 4 on the GPU (PHWC4 slices)
    convert_per_s: float = 0.0                 # layout/dtype conversion rate at the boundary; 0 = none
    extras: Mapping[str, float] = field(default_factory=dict)  # kind-specific factors (see profile docs)
    mech: Mechanisms = Mechanisms()            # non-roofline mechanisms (sim/mechanisms.py)

    def rates(self, threads: int = 1, scale: float = 1.0) -> Rates:
        """The cost model's view: per-core rates times a DVFS / backend scale, and the cores the op
        may use (the cost function decides how many it really keeps busy)."""
        return Rates({p: r * scale for p, r in self.macs_per_s.items()},
                     {p: r * scale for p, r in self.elem_per_s.items()},
                     self.bandwidth, self.dispatch_s, self.efficiency,
                     max(1, min(threads, self.cores)), self.mech, self.sram_bytes)

    @property
    def sram_bytes(self) -> float:
        """On-chip memory for weights (the `sram_mb` extra, in MiB); 0 where the unit has none."""
        return self.extras.get("sram_mb", 0.0) * (1 << 20)


@dataclass(frozen=True)
class DramSpec:
    """The shared DRAM: every unit and copy contends for its bandwidth."""

    bandwidth: float            # bytes/s, the whole bus
    energy_per_byte: float      # joules per byte moved
    idle_w: float = 0.0         # background (self-refresh) power


@dataclass(frozen=True)
class CopySpec:
    """The CPU <-> accelerator copy path used at partition boundaries."""

    bandwidth: float            # bytes/s of one copy engine
    sync_s: float               # fixed latency per crossing (cache flush, fence, ION map)
    engines: int = 1


@dataclass(frozen=True)
class NnapiDeviceSpec:
    """One device an NNAPI driver exposes, and what getSupportedOperationsForDevices answers for it."""

    name: str                                   # "google-edgetpu", "qti-dsp", "qti-gpu", "nnapi-reference"
    unit: str                                   # the UnitSpec name whose hardware executes it
    feature_level: int                          # NNAPI feature level the driver implements
    ops: frozenset[str]                         # TFLite op type names the driver accepts
    precisions: frozenset[Precision]            # activation precisions it runs
    compile_s: float = 0.0                      # model compilation at delegate init
    cached_compile_s: float = 0.0               # with cache_dir + model_token
    execution_s: float = 0.0                    # per-execution driver overhead
    rate_scale: float = 1.0                     # the driver's kernels' speed relative to the unit's rates
    # execution preference -> (rate scale, power scale): how a driver trades speed for power
    preference: Mapping[str, tuple[float, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class Profile:
    """A simulated phone."""

    name: str
    description: str
    os: str                                     # "android" or "ios"
    api_level: int                              # Android API level (0 on iOS)
    units: tuple[UnitSpec, ...]
    dram: DramSpec
    copy: CopySpec
    nnapi_devices: tuple[NnapiDeviceSpec, ...] = ()
    has_neural_engine: bool = False
    os_version: str = ""                        # the OS the profile's figures stand for ("Android 10")
    calibration: tuple[tuple[str, str], ...] = ()  # prior / measurements / rows of a fitted profile
    thermal: ThermalSpec | None = None          # heat network, DVFS levels, trips (sim/thermal.py)
    error_band: ErrorBand | None = None         # cross-validated |error| per delegate (sim/band.py); None: not fitted

    def unit(self, name: str) -> UnitSpec:
        for u in self.units:
            if u.name == name:
                return u
        raise KeyError(f"profile {self.name!r} has no unit {name!r}")

    def units_of(self, kind: UnitKind) -> tuple[UnitSpec, ...]:
        return tuple(u for u in self.units if u.kind is kind)
