"""The SoC's monitor for long runs: a periodic SimPy process that heats the thermal network with the
power the trace records, lets the governor set each unit's DVFS level, and folds old intervals away.

Every tick it takes the intervals the trace gained since the last one (each recorded when it ends, so
an op running across a tick counts in the tick it ends in: a shift of at most one op, far below the
die's time constant), hands them to its listeners (a runner's per-stream energy ledger), converts them
to watts with sim/power.py, steps the network (sim/thermal.py) and, every governor period, moves each
throttled unit to the level its trips ask for. Intervals that start after the retention window are
dropped once folded, so a ten-minute run keeps the memory of its first seconds only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

from sim.power import active_energy
from sim.thermal import ThermalSpec, UnitThermal, governed_level, network_step
from sim.trace import Interval
from sim.unit import Scales

__all__ = ["Monitor", "Sample", "LevelChange", "interval_joules"]

Listener = Callable[[Sequence[Interval]], None]


@dataclass(frozen=True)
class Sample:
    """Temperatures at a tick (after it) and the SoC's power over the tick (die rails, watts)."""

    t: float
    die_c: float
    skin_c: float
    soc_w: float


@dataclass(frozen=True)
class LevelChange:
    t: float
    unit: str
    level: int
    mhz: float


def interval_joules(intervals: Sequence[Interval], joules_per_byte: float) -> dict[str, float]:
    """Active joules per rail of whole intervals, their bytes on the DRAM rail (sim/power.py)."""
    return active_energy(intervals, joules_per_byte)


class Monitor:
    """Created and started by SoC.start_monitor once every interpreter is allocated (their init runs
    the environment to the end, which a process ticking forever would never let happen)."""

    def __init__(self, soc, tick_s: float, thermal: ThermalSpec | None = None, ambient_c: float | None = None,
                 platform_w: float = 0.0, retain_s: float | None = None, listeners: Sequence[Listener] = ()):
        self.soc, self.env = soc, soc.env
        self.tick_s = thermal.tick_s if thermal else tick_s
        self.thermal = thermal
        self.ambient_c = ambient_c if ambient_c is not None else (thermal.ambient_c if thermal else 25.0)
        self.platform_w = platform_w
        self.listeners = list(listeners)
        self.start = self.env.now
        self.retain_until = None if retain_s is None else self.start + retain_s
        self.temps = (self.ambient_c, self.ambient_c)        # a phone at rest starts at the air's temperature
        self.samples: list[Sample] = []
        self.changes: list[LevelChange] = []
        self._cursor = len(soc.trace.intervals)              # init intervals before the start are not ours
        self._last = self.start
        self._ticks = 0
        self._every = max(1, round(thermal.governor_s / thermal.tick_s)) if thermal else 1
        self._units: list[UnitThermal] = list(thermal.units) if thermal else []
        self._states = {u.unit: [False] * len(u.trips) for u in self._units}
        self.levels = {u.unit: 0 for u in self._units}
        for u in self._units:
            self.changes.append(LevelChange(self.start, u.unit, 0, u.levels[0].mhz))

    def process(self):
        """The SimPy process body: a tick every tick_s, for as long as the environment runs."""
        while True:
            yield self.env.timeout(self.tick_s)
            self.tick()

    def tick(self) -> None:
        """Fold what the trace gained since the last tick; heat; govern every governor period."""
        now, trace = self.env.now, self.soc.trace
        new = trace.intervals[self._cursor:]
        for listener in self.listeners:
            listener(new)
        if self.thermal is not None and now > self._last:
            self._heat(new, now - self._last)
            self._ticks += 1
            if self._ticks % self._every == 0:
                self._govern(now)
        self._last = now
        if self.retain_until is not None and new:   # (recorded in end order: any may start in the window)
            trace.intervals[self._cursor:] = [iv for iv in new if iv.start < self.retain_until]
        self._cursor = len(trace.intervals)

    def flush(self) -> None:
        """A last, partial tick at the end of the run, so every interval is folded."""
        if self.env.now > self._last or len(self.soc.trace.intervals) > self._cursor:
            self.tick()

    def _heat(self, new: Sequence[Interval], dt: float) -> None:
        joules = interval_joules(new, self.soc.profile.dram.energy_per_byte)
        soc_w = math.fsum(joules.values()) / dt + math.fsum(self.soc.rails.values())
        self.temps = network_step(self.thermal.network, self.temps, soc_w, self.platform_w, self.ambient_c, dt)
        self.samples.append(Sample(self.env.now, self.temps[0], self.temps[1], soc_w))

    def _govern(self, now: float) -> None:
        temps = {"die": self.temps[0], "skin": self.temps[1]}
        for u in self._units:
            level, self._states[u.unit] = governed_level(u, self._states[u.unit], temps)
            if level != self.levels[u.unit]:
                self.levels[u.unit] = level
                rate, power = u.scales(level)
                self.soc.unit(u.unit).dvfs = None if level == 0 else Scales(rate, power)
                self.changes.append(LevelChange(now, u.unit, level, u.levels[level].mhz))

