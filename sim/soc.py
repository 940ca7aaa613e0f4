"""A simulated phone: one SimPy environment, its compute units, the shared DRAM and the trace."""

from __future__ import annotations

import simpy

from sim.accel import NpuUnit
from sim.ane import AneUnit
from sim.cost import Precision, copy_seconds
from sim.cpu import CpuCluster
from sim.dsp import DspUnit
from sim.gpu import GpuUnit
from sim.memory import Dram
from sim.power import DRAM_RAIL, rail_energy
from sim.spec import Profile, UnitKind
from sim.trace import Interval, Kind, Trace
from sim.unit import Scales, Tag, Unit

__all__ = ["SoC"]

_UNIT_CLASS = {UnitKind.CPU: CpuCluster, UnitKind.GPU: GpuUnit, UnitKind.DSP: DspUnit,
               UnitKind.ANE: AneUnit, UnitKind.NPU: NpuUnit}


class SoC:
    """Owns the simulated clock. Nothing here reads the host clock: the same work gives the same
    figures on any machine."""

    def __init__(self, profile: Profile):
        self.profile = profile
        self.env = simpy.Environment()
        self.trace = Trace()
        self.dram = Dram(self.env, profile.dram, profile.copy)
        self.units: dict[str, Unit] = {u.name: _UNIT_CLASS[u.kind](self, u) for u in profile.units}
        self.monitor = None   # sim/monitor.py's periodic process, started only by long runs (start_monitor)

    def unit(self, name: str) -> Unit:
        try:
            return self.units[name]
        except KeyError:
            raise KeyError(f"the {self.profile.name} profile has no unit {name!r} "
                           f"(it has {', '.join(self.units)})") from None

    @property
    def cpu(self) -> CpuCluster:
        """The cluster the CPU kernels run on: the big one, as benchmarks pin work to big cores."""
        cpus = [u for u in self.units.values() if isinstance(u, CpuCluster)]
        return next((u for u in cpus if u.name == "cpu_big"), cpus[0])

    @property
    def rails(self) -> dict[str, float]:
        """Every power rail and its idle power: one per unit, plus DRAM."""
        rails = {name: unit.spec.idle_w for name, unit in self.units.items()}
        rails[DRAM_RAIL] = self.profile.dram.idle_w
        return rails

    def copy(self, nbytes: int, name: str, tag: Tag, convert_per_s: float = 0.0):
        """A boundary crossing on a copy engine: sync + bytes over the copy path (sharing DRAM) +
        layout/dtype conversion. The CPU drives it, so one big core's active power is charged."""
        engines = self.dram.copy_engines
        engine = yield engines.get()
        try:
            token, granted = self.dram.acquire(self.profile.copy.bandwidth)
            seconds = self._copy_seconds(nbytes, granted, convert_per_s)
            start = self.env.now
            yield self.env.timeout(seconds)
            self.dram.release(token, 2 * nbytes)  # read on one side, written on the other
        finally:
            engines.put(engine)
        cpu = self.cpu
        watts = cpu.active_watts(Precision.FLOAT32, Scales(), 1 / cpu.spec.cores)
        self.trace.add(Interval(engine, name, Kind.COPY, start, self.env.now, cpu.rail, watts, 2 * nbytes,
                                tag.stream, tag.inference, (("payload_bytes", nbytes),)))
        return seconds

    def copy_alone(self, nbytes: int, convert_per_s: float = 0.0) -> float:
        """What `copy` charges when nothing else is in flight (one inference alone on the phone)."""
        return self._copy_seconds(nbytes, self.dram.alone(self.profile.copy.bandwidth), convert_per_s)

    def _copy_seconds(self, nbytes: int, granted: float, convert_per_s: float) -> float:
        spec = self.profile.copy
        return copy_seconds(nbytes, min(granted, spec.bandwidth), spec.sync_s, convert_per_s)

    def start_monitor(self, tick_s: float, thermal: bool = True, **options):
        """Start the periodic monitor (sim/monitor.py): it folds the trace as the run goes and, with
        `thermal` and a profile that has a thermal section, heats the phone and throttles its units.
        Only after every interpreter is allocated: it ticks for as long as the environment runs."""
        from sim.monitor import Monitor

        self.monitor = Monitor(self, tick_s, self.profile.thermal if thermal else None, **options)
        self.env.process(self.monitor.process())
        return self.monitor

    def energy(self, t0: float, t1: float) -> dict[str, float]:
        """Joules per rail over [t0, t1] of simulated time."""
        return rail_energy(self.trace.intervals, self.rails, t0, t1, self.profile.dram.energy_per_byte)

