"""What every simulated compute unit shares: its SimPy resource, op execution and power accounting."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Generator, Protocol

import numpy as np
import simpy

from sim.cost import OpCost, Precision, Rates, Work, op_cost
from sim.price import Priced
from sim.htp import vtcm_share
from sim.spec import UnitSpec
from sim.memory import Dram
from sim.trace import Interval, Kind, Trace

__all__ = ["Unit", "Scales", "Tag"]


@dataclass(frozen=True)
class Scales:
    """How a delegate's options move a unit off its nominal point: DVFS / execution preference /
    backend. `rate` multiplies throughput, `power` multiplies active power, `dispatch` the launch cost.
    `clock` is the part of that which is a lower clock the delegate asks for (the GPU's
    SUSTAINED_SPEED), already in `rate` and `power`: a thermal governor's level caps the clock
    instead of compounding with it (Unit.clocked). `vtcm_mb`: the on-chip memory an HTP graph
    asks for (the QNN delegate's htp_vtcm_size; 0: all the unit has, sim/htp.vtcm_share)."""

    rate: float = 1.0
    power: float = 1.0
    dispatch: float = 1.0
    clock: float = 1.0
    vtcm_mb: float = 0.0


@dataclass(frozen=True)
class Tag:
    """Which inference of which stream a piece of work belongs to (-1: initialisation)."""

    stream: int = 0
    inference: int = -1


class Board(Protocol):
    """What a unit needs of the SoC it sits on (sim/soc.py builds the units and is one)."""

    env: simpy.Environment
    dram: Dram
    trace: Trace


class Unit:
    """One compute unit. Subclasses say which precisions it runs and how it pads data; the cost
    comes from sim.cost, the power from the profile; every busy interval goes to the trace."""

    def __init__(self, soc: Board, spec: UnitSpec):
        self.soc = soc
        self.env: simpy.Environment = soc.env
        self.spec = spec
        self.name = spec.name
        self.rail = spec.name
        self.resource = simpy.Resource(self.env, capacity=1)
        self._rates_cache: dict[tuple[int, Scales], Rates] = {}
        self._cost_cache: dict[tuple, OpCost] = {}
        # The DVFS level a thermal governor set (sim/monitor.py): multiplies rate and active power on top
        # of the delegate's scales. None, the profile's nominal clock, in every run without a governor.
        self.dvfs: Scales | None = None

    # -- what the unit can run --------------------------------------------------------------------

    def runs(self, precision: Precision) -> bool:
        return bool(self.spec.macs_per_s.get(precision)) or bool(self.spec.elem_per_s.get(precision))

    @property
    def channel_align(self) -> int:
        return self.spec.channel_align

    def active_watts(self, precision: Precision, scale: Scales, share: float = 1.0) -> float:
        """Power above idle while busy: the profile's active power for the precision (or the
        highest it lists), times the delegate's power scale and the share of the unit in use."""
        table = self.spec.active_w
        watts = table.get(precision, max(table.values(), default=self.spec.idle_w))
        return max(0.0, (watts * scale.power - self.spec.idle_w) * share)

    def cost(self, work: Work, scale: Scales, bandwidth: float | None, threads: int = 1) -> OpCost:
        """The op's cost (a pure function of these), remembered: a sustained run asks for the same
        few thousand (op, clock, DRAM share) combinations hundreds of thousands of times."""
        key = (work, scale, bandwidth, threads)
        cost = self._cost_cache.get(key)
        if cost is None:
            if len(self._cost_cache) > 100_000:   # contended DRAM shares vary: keep the memory bounded
                self._cost_cache.clear()
            cost = self._cost_cache[key] = op_cost(work, self.rates_at(threads, scale), bandwidth)
        return cost

    def share_costs(self, other: "Unit") -> bool:
        """Remember op costs together with `other` when both have the same spec (the cost is a pure
        function of the spec and the cache key): a calibration re-times the same plans on profiles
        that differ in one number, and a unit that number does not touch need not cost its ops again."""
        if other is self or other.spec != self.spec:
            return False
        self._cost_cache, self._rates_cache = other._cost_cache, other._rates_cache
        return True

    def rates_at(self, threads: int, scale: Scales) -> Rates:
        """The unit's rates for a thread count and scale, built once (every op asks for them)."""
        key = (threads, scale)
        rates = self._rates_cache.get(key)
        if rates is None:
            rates = self.spec.rates(threads, scale.rate)
            if scale.dispatch != 1.0:
                rates = dataclasses.replace(rates, dispatch_s=rates.dispatch_s * scale.dispatch)
            htp = rates.mech.htp
            if htp is not None and scale.vtcm_mb:
                htp = dataclasses.replace(htp, vtcm_bytes=vtcm_share(htp.vtcm_bytes, scale.vtcm_mb))
                rates = dataclasses.replace(rates, mech=dataclasses.replace(rates.mech, htp=htp))
            self._rates_cache[key] = rates
        return rates

    def seconds(self, cost: OpCost, work: Work, scale: Scales, bandwidth: float, threads: int) -> float:
        """How long the op holds the unit: its cost's time (a unit that overlaps one op's memory
        traffic with another's compute, the HTP, says otherwise)."""
        return cost.seconds

    def begin_graph(self) -> None:
        """A delegated partition starts on this unit (the HTP's DMA starts with nothing fetched ahead)."""

    def float_edge_seconds(self, edge_bytes: int, scale: Scales) -> float:
        """What one execute of a float16 graph pays to read `edge_bytes` at its float32 edges (nothing
        here; an HTP with its mechanisms: sim.htp.float_edge_seconds)."""
        return 0.0

    def alone_cost(self, work: Work, scale: Scales = Scales(), threads: int = 1) -> OpCost:
        """What `execute` charges for the op when nothing else runs on the phone (one inference
        alone): the same cost, at the DRAM share a transfer with no other in flight is granted."""
        return self.cost(work, self.clocked(scale), self.alone_bandwidth(), threads)

    def alone_seconds(self, work: Work, scale: Scales = Scales(), threads: int = 1) -> float:
        """How long `execute` holds the unit for that op alone, through the same `seconds` (so the
        HTP's prefetch state advances as it does in a SimPy run)."""
        cost = self.alone_cost(work, scale, threads)
        return self.seconds(cost, work, self.clocked(scale), self.alone_bandwidth(), threads)

    def alone_bandwidth(self) -> float:
        """The DRAM bandwidth an op gets with no other transfer in flight."""
        return min(self.soc.dram.alone(self.spec.bandwidth), self.spec.bandwidth)

    def run_seconds(self, priced: Priced, ops: np.ndarray, begins: bool) -> float:
        """Seconds of a run of ops one after another, priced as arrays (sim.price; `ops` indexes
        them): what `alone_seconds` sums over them. `begins`: a delegated graph starts with the run."""
        if begins:
            self.begin_graph()
        return float(priced.seconds[ops].sum())

    # -- SimPy processes ------------------------------------------------------------------------

    def _acquire(self, threads: int):
        return self.resource.request()

    def _release(self, request, threads: int) -> None:
        self.resource.release(request)

    def _share(self, threads: int) -> float:
        return 1.0

    def clocked(self, scale: Scales) -> Scales:
        """The delegate's scales at the unit's current DVFS level (read when an op starts: a level
        change reaches the next op, as a clock change reaches the next kernel). The slower of the
        two clocks runs: a delegate already holding the unit below the level loses nothing to it."""
        level = self.dvfs
        if level is None or level.rate >= scale.clock:
            return scale
        return dataclasses.replace(scale, rate=scale.rate / scale.clock * level.rate,
                                   power=scale.power / scale.clock * level.power, clock=level.rate)

    def execute(self, work: Work, tag: Tag, scale: Scales = Scales(), threads: int = 1,
                args: tuple[tuple[str, Any], ...] = ()) -> Generator:
        """Run one op: wait for the unit, take a DRAM share, hold for dispatch + max(compute, memory)."""
        request = self._acquire(threads)
        yield request
        scale = self.clocked(scale)
        try:
            token, granted = self.soc.dram.acquire(self.spec.bandwidth)
            bandwidth = min(granted, self.spec.bandwidth)
            cost = self.cost(work, scale, bandwidth, threads)
            start = self.env.now
            yield self.env.timeout(self.seconds(cost, work, scale, bandwidth, threads))
            self.soc.dram.release(token, cost.bytes)
        finally:
            self._release(request, threads)
        self.soc.trace.add(Interval(
            self.name, work.op, Kind.OP, start, self.env.now, self.rail,
            self.active_watts(work.precision, scale, self._share(threads)), cost.bytes, tag.stream,
            tag.inference, (("precision", work.precision.value), ("macs", work.macs),
                            ("bound", cost.bound), *args)))
        return cost

    def hold(self, seconds: float, name: str, kind: Kind, tag: Tag, precision: Precision,
             scale: Scales = Scales(), nbytes: int = 0) -> Generator:
        """Keep the unit busy for a fixed time (compilation, a remote call, a weight upload)."""
        request = self._acquire(1)
        yield request
        scale = self.clocked(scale)   # a fixed-time step: the clock changes its power only
        try:
            start = self.env.now
            yield self.env.timeout(seconds)
        finally:
            self._release(request, 1)
        self.soc.trace.add(Interval(self.name, name, kind, start, self.env.now, self.rail,
                                    self.active_watts(precision, scale, self._share(1)), nbytes,
                                    tag.stream, tag.inference))
