"""Runs an apps scenario: every app's frames on one simulated phone for duration_s, with the SoC's monitor
heating the phone and throttling its units; one results.json record per app stream.

Frames of an app arrive at t0, t0 + 1/rate, ...; a frame that arrives while the app's previous one is
still running is dropped (`drop`) or waits (`queue`). Latency is arrival to result (the wait
included); a deadline miss is a completed frame whose result comes after the next frame's arrival.
The apps contend for the phone as any streams do: units are SimPy resources of capacity one, the CPU
cluster a pool of cores, the DRAM bandwidth split between transfers in flight (sim/memory.py).

Energy per stream: every interval the trace records carries its stream (Tag), and the monitor hands
each tick's intervals to a ledger that integrates them per stream with sim/power.py before they are
folded away. The SoC's total is the streams' sum plus the rails' idle power over the run.
"""

from __future__ import annotations

import math
from collections import defaultdict, deque
from typing import Any, Callable, Sequence

import numpy as np
import simpy

from runtime.sweep.cell import delegate_factory, build_model, cell_profile, make_inputs
from runtime.interpreter.api import Interpreter
from runtime.limits import counts as limits
from runtime.interpreter.executor import PartitionJob
from runtime.ir.errors import ScenarioError
from runtime.measure.figures import boundary_interval, per_op_times, latency_stats
from runtime.measure.record import (band_fields, delegate_records, stats_ms, plain_value, nonfinite_records,
                                    status_fields, unit_footprint)
from runtime.scenario.spec import InputSpec
from sim.monitor import interval_joules
from sim.soc import SoC
from sim.trace import Interval, Kind

__all__ = ["run_apps", "check_apps", "Ledger", "TICK_S", "FIRST_S", "LAST_S"]

Progress = Callable[[int, int, str], None]
TICK_S = 0.1              # the monitor's tick without a thermal model (with one, the profile's tick_ms)
FIRST_S, LAST_S = 10.0, 60.0   # the sustained figure: p50 over the first 10 s of frames vs the last 60 s


class Ledger:
    """Energy and boundary overhead per stream, from the intervals the monitor folds each tick."""

    def __init__(self, joules_per_byte: float):
        self.jpb = joules_per_byte
        self.joules: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.all_joules: dict[str, float] = defaultdict(float)    # the same intervals, not split: the check
        self.boundary: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0, 0, 0])  # s, J, copies, payload

    def fold(self, intervals: Sequence[Interval]) -> None:
        groups: dict[int, list[Interval]] = {}
        for iv in intervals:
            groups.setdefault(iv.stream, []).append(iv)
        for rail, j in interval_joules(intervals, self.jpb).items():
            self.all_joules[rail] += j
        for stream, ivs in groups.items():
            mine = self.joules[stream]
            for rail, j in interval_joules(ivs, self.jpb).items():
                mine[rail] += j
            edge = self.boundary[stream]
            for iv in ivs:
                if boundary_interval(iv):
                    edge[0] += iv.seconds
                    edge[1] += iv.joules + iv.bytes * self.jpb
                    if iv.kind is Kind.COPY:
                        edge[2] += 1
                        edge[3] += dict(iv.args).get("payload_bytes", 0)

    def stream_joules(self, stream: int) -> float:
        return math.fsum(self.joules[stream].values()) if stream in self.joules else 0.0


class _Stream:
    """One app: its interpreter on the shared phone, and the fate of each of its frames."""

    def __init__(self, k: int, spec, soc: SoC, profile, timing_only: bool):
        self.k, self.spec, self.soc, self.timing_only = k, spec, soc, timing_only
        self.graph = build_model(spec.model)
        self.threads = spec.cpu.threads or (4 if profile.os == "android" else 2)
        self.it = Interpreter(graph=self.graph, experimental_delegates=delegate_factory(spec.delegates, profile)(),
                              soc=soc, num_threads=self.threads, timing_only=timing_only, stream=k)
        self.it.allocate_tensors()   # delegate init, on the phone's clock before the frames start
        self.frames: list[tuple[int, float, float, float]] = []     # (frame, arrival, start, end)
        self.dropped = 0
        self.arrived = 0

    def run(self, t0: float, duration_s: float, tick: Callable[[], None]):
        """The SimPy process body: frames at the app's rate until duration_s; those waiting at duration_s
        finish. Frames arriving while one runs wait in a queue of spec.waiting places (none for `drop`);
        a frame finding it full is dropped, so what is left to run after duration_s is bounded."""
        env, simulation, spec = self.soc.env, self.it.simulation, self.spec
        period, n = 1.0 / spec.rate_hz, spec.frames(duration_s)
        self.arrived, k, waiting = n, 0, deque()
        while waiting or k < n:
            if not waiting:
                at = t0 + k * period
                if env.now < at:
                    yield env.timeout(at - env.now)
                waiting.append(k)
                k += 1
            frame = waiting.popleft()
            if not self.timing_only:
                for t, x in make_inputs(self.graph, InputSpec(seed=self.k), frame).items():
                    self.it.set_tensor(t, x)
            start = env.now
            yield from simulation.inference_process()
            end = env.now
            self.frames.append((frame, t0 + frame * period, start, end))
            tick()
            while k < n and t0 + k * period < end:     # the frames that arrived while this one ran
                if len(waiting) < spec.waiting:
                    waiting.append(k)
                else:
                    self.dropped += 1
                k += 1

    def units(self) -> list[str]:
        """The units its work ran on: each delegated partition's, and the CPU's when any op stayed there."""
        names = set()
        for job in self.it.simulation.executor.jobs:
            if isinstance(job, PartitionJob):      # a delegated partition, and the other units its nodes run on
                names |= {job.unit.name, *(op.unit.name for op in job.ops if op.unit is not None)}
            elif job is not None:         # an op on the CPU (None: a constant folded at allocation)
                names.add(self.soc.cpu.name)
        return sorted(names)


def _thermal_on(sc, profile) -> bool:
    asked = sc.thermal.enabled
    if asked and profile.thermal is None:
        raise ScenarioError(f"{sc.thermal.where or sc.source}: the {profile.name} profile has no thermal section "
                            f"(sim/profiles/pixel4.yaml has one; or set thermal: false)")
    return profile.thermal is not None if asked is None else asked


def _tick_s(sc, profile) -> float:
    """The monitor's tick for the cell, refused when duration_s would take more than
    limits.MAX_MONITOR_TICKS of them (a profile's tick_ms of 0.001 over an hour: 3.6 billion)."""
    thermal = _thermal_on(sc, profile)
    tick = profile.thermal.tick_s if thermal else TICK_S
    ticks = math.ceil(sc.duration_s / tick - 1e-9)
    if ticks > limits.MAX_MONITOR_TICKS:
        where = sc.duration_where or f"{sc.source}: duration_s"
        raise ScenarioError(f"{where}: {sc.duration_s:g} s at the {profile.name} profile's "
                            f"{'thermal tick_ms' if thermal else 'monitor tick'} of {tick * 1e3:g} ms is {ticks:,} "
                            f"monitor ticks; the limit is {limits.MAX_MONITOR_TICKS:,}")
    return tick


def check_apps(sc) -> None:
    """What run_file checks of a cell before anything runs: the phone, each app's delegates, the thermal
    ask, the monitor's ticks."""
    profile = cell_profile(sc)
    _tick_s(sc, profile)
    for app in sc.apps:
        delegate_factory(app.delegates, profile)


def run_apps(sc, progress: Progress | None = None) -> tuple[list[dict], SoC]:
    """One cell of an apps scenario: a record per app stream, and the SoC (for trace.json)."""
    profile = cell_profile(sc)
    thermal = _thermal_on(sc, profile)
    tick_s = _tick_s(sc, profile)
    soc = SoC(profile)
    streams = [_Stream(k, app, soc, profile, sc.timing_only) for k, app in enumerate(sc.apps)]
    ledger = Ledger(profile.dram.energy_per_byte)
    t0 = soc.env.now
    monitor = soc.start_monitor(tick_s, thermal=thermal, ambient_c=sc.thermal.ambient_c,
                                platform_w=sc.thermal.platform_w if thermal else 0.0, retain_s=sc.trace_s,
                                listeners=[ledger.fold])
    total, done = sum(app.frames(sc.duration_s) for app in sc.apps), [0]

    def tick() -> None:
        done[0] += 1
        if progress and done[0] % 500 == 0:
            progress(done[0], total, f"{sc.label} t={soc.env.now - t0:.0f}s")

    procs = [soc.env.process(s.run(t0, sc.duration_s, tick)) for s in streams]
    _run_to_end(sc, profile, soc, procs, tick_s)
    monitor.flush()
    run = _run_fields(sc, soc, streams, ledger, t0)
    heat = _thermal_fields(sc, monitor, t0) if thermal else None
    return [_record(sc, profile, s, ledger, run, heat, len(streams), t0) for s in streams], soc


def _run_to_end(sc, profile, soc: SoC, procs: list, tick_s: float) -> None:
    """Run until every stream's last frame is done, or refuse: the frames waiting at duration_s get at
    most limits.MAX_MONITOR_TICKS more ticks, as duration_s itself. A profile whose figures make a
    frame last for ages (bandwidth_gbs: 1.0e-290) would otherwise tick the monitor for ever."""
    finished = simpy.AllOf(soc.env, procs)
    overrun_s = limits.MAX_MONITOR_TICKS * tick_s
    soc.env.run(until=soc.env.any_of([finished, soc.env.timeout(sc.duration_s + overrun_s)]))
    if not finished.triggered:
        running = ", ".join(app.name for app, proc in zip(sc.apps, procs) if proc.is_alive)
        raise ScenarioError(f"{sc.source}: app {running}: a frame still runs {overrun_s:g} s of simulated time "
                            f"after duration_s ({limits.MAX_MONITOR_TICKS:,} monitor ticks, the limit); the "
                            f"{profile.name} profile's figures make its frames take that long")


def _run_fields(sc, soc: SoC, streams: list[_Stream], ledger: Ledger, t0: float) -> dict[str, Any]:
    span = soc.env.now - t0
    idle = math.fsum(soc.rails.values()) * span
    per = {s.spec.name: 1e3 * ledger.stream_joules(s.k) for s in streams}
    return {"duration_s": sc.duration_s, "simulated_s": span, "idle_mj": 1e3 * idle,
            "streams_mj": per, "soc_mj": math.fsum(per.values()) + 1e3 * idle,
            "check_mj": 1e3 * math.fsum(ledger.all_joules.values()) + 1e3 * idle}


def _thermal_fields(sc, monitor, t0: float) -> dict[str, Any]:
    samples, end = monitor.samples, monitor.env.now
    units = {}
    for name in monitor.levels:
        changes = [c for c in monitor.changes if c.unit == name]
        residency: dict[str, float] = defaultdict(float)
        for c, nxt in zip(changes, changes[1:] + [None]):
            residency[f"{c.mhz:g}"] += (nxt.t if nxt else end) - c.t
        throttled = [c.t - t0 for c in changes if c.level > 0]
        units[name] = {"final_mhz": changes[-1].mhz, "min_mhz": min(c.mhz for c in changes),
                       "first_throttle_s": throttled[0] if throttled else None, "changes": len(changes) - 1,
                       "residency_s": dict(residency)}
    return {"ambient_c": monitor.ambient_c, "platform_w": monitor.platform_w,
            "die_c": {"max": max((s.die_c for s in samples), default=monitor.ambient_c), "final": monitor.temps[0]},
            "skin_c": {"max": max((s.skin_c for s in samples), default=monitor.ambient_c), "final": monitor.temps[1]},
            "soc_w_avg": math.fsum(s.soc_w for s in samples) / len(samples) if samples else 0.0, "units": units}


def _p50(values: list[float]) -> float | None:
    return float(np.percentile(np.array(values, np.float64), 50, method="linear")) * 1e3 if values else None


def _sustained(sc, frames: list[tuple[int, float, float, float]], t0: float) -> dict[str, Any]:
    """p50 latency of the frames arriving in the first FIRST_S seconds against the last LAST_S (each at
    most half the run): how far the app slowed as the phone heated."""
    first_s, last_s = min(FIRST_S, sc.duration_s / 2), min(LAST_S, sc.duration_s / 2)
    first = _p50([end - at for _, at, _, end in frames if at < t0 + first_s])
    last = _p50([end - at for _, at, _, end in frames if at >= t0 + sc.duration_s - last_s])
    rise = (last / first - 1) if first and last is not None else None
    return {"first_s": first_s, "last_s": last_s, "p50_first_ms": first, "p50_last_ms": last, "rise": rise}


def _record(sc, profile, s: _Stream, ledger: Ledger, run: dict, heat: dict | None, n: int,
            t0: float) -> dict[str, Any]:
    simulation, spec = s.it.simulation, s.spec
    period = 1.0 / spec.rate_hz
    done = max(1, len(s.frames))
    latency = latency_stats([end - at for _, at, _, end in s.frames], 0)
    misses = sum(1 for k, at, _, end in s.frames if end > t0 + (k + 1) * period)
    joules = ledger.joules[s.k] if s.k in ledger.joules else {}
    stream_j = ledger.stream_joules(s.k)
    service = sum(end - start for _, _, start, end in s.frames) / done
    edge = ledger.boundary[s.k] if s.k in ledger.boundary else [0.0, 0.0, 0, 0]
    init = [iv for iv in s.soc.trace.intervals if iv.stream == s.k and iv.inference < 0]
    span = run["simulated_s"]
    delegates = delegate_records(simulation.delegation, [d.kind for d in spec.delegates])
    return {
        "scenario": sc.name, "label": f"{sc.label} app={spec.name}", "cell": {k: plain_value(v) for k, v in sc.cell},
        "device": profile.name,
        "app": {"name": spec.name, "rate_hz": spec.rate_hz, "when_busy": spec.when_busy, "queue_size": spec.waiting,
                "units": s.units()},
        "model": {"name": spec.model.zoo or str(spec.model.path.name), "nodes": len(s.graph.ops),
                  "quantization": spec.model.quantization.value},
        "delegates": delegates, **status_fields(delegates),
        "platform_refusal": "; ".join(r.platform_refusal for r in simulation.delegation.per_delegate
                                      if r.platform_refusal) or None,
        "placement": {str(k): v for k, v in sorted(simulation.delegation.placement().items())},
        "latency_ms": stats_ms(latency),
        **band_fields(profile, s.graph, simulation.delegation, [d.kind for d in spec.delegates]),
        "service_ms": {"avg": service * 1e3},
        "frames": {"arrived": s.arrived, "completed": len(s.frames), "dropped": s.dropped, "deadline_misses": misses},
        "sustained": _sustained(sc, s.frames, t0),
        "init_ms": (max((iv.end for iv in init), default=0.0) - min((iv.start for iv in init), default=0.0)) * 1e3,
        "boundary": {"crossings": edge[2] / done, "bytes": edge[3] / done, "ms": edge[0] / done * 1e3,
                     "mj": edge[1] / done * 1e3, "share": edge[0] / done / service if service > 0 else 0.0},
        "energy": {"total_mj": 1e3 * stream_j / done, "avg_power_w": stream_j / span if span > 0 else 0.0,
                   "stream_mj": 1e3 * stream_j,
                   "rails": {r: {"active_mj": 1e3 * j / done, "total_mj": 1e3 * j / done} for r, j in sorted(joules.items())}},
        "run": run, "thermal": heat,
        "per_op": [{"node": o.node, "unit": o.unit, "first_ms": o.first_s * 1e3, "avg_ms": o.avg_s * 1e3,
                    "count": o.count} for o in per_op_times([iv for iv in s.soc.trace.intervals if iv.stream == s.k])],
        "footprint_bytes": unit_footprint(simulation),
        "output_diff": [], "nonfinite": nonfinite_records(simulation.nonfinite, s.graph),
        "estimated": [s.graph.describe_op(i) for i in s.it.estimated_ops],
        "log": list(simulation.delegation.log),
        "threads": s.threads, "streams": n, "duration_s": sc.duration_s, "timing_only": sc.timing_only,
    }
