"""What one simulated run cost, derived from the trace: latency, boundary overhead, energy, footprint."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from sim.power import power_steps
from sim.trace import Interval, Kind, Span

__all__ = ["LatencyStats", "Boundary", "RailEnergy", "OpTime", "Measurement", "latency_stats", "measure",
           "output_diff", "OutputDiff"]


@dataclass(frozen=True)
class LatencyStats:
    """Seconds. `first` is inference 0; warm-up = the first `warmup` runs; the rest are steady."""

    count: int
    first: float
    warmup_avg: float
    avg: float
    std: float
    min: float
    max: float
    p50: float
    p90: float
    p99: float


@dataclass(frozen=True)
class Boundary:
    """Partition-boundary overhead per steady inference: copies, remote calls, edge conversions."""

    crossings: float
    bytes: float
    seconds: float
    joules: float
    share: float            # of the average latency


@dataclass(frozen=True)
class RailEnergy:
    rail: str
    active_mj: float        # above the rail's idle power, per inference
    total_mj: float         # including idle power, per inference


@dataclass(frozen=True)
class OpTime:
    """Steady-state time of one plan node (an op on the CPU, or a delegate's partition)."""

    node: str
    unit: str
    first_s: float
    avg_s: float
    count: int
    mem_bytes: int = 0      # what TFLite's arena planner allocates for the node (runtime/measure/footprint.py)


@dataclass(frozen=True)
class Measurement:
    latency: LatencyStats
    init_s: float
    boundary: Boundary
    energy: tuple[RailEnergy, ...]
    energy_mj: float                    # per steady inference, all rails
    avg_power_w: float
    peak_power_w: float
    per_op: tuple[OpTime, ...]
    footprint: tuple[tuple[str, int], ...]
    memory: Any = None      # runtime.measure.footprint.MemoryRecord: weights, CPU arena, delegate buffers


def latency_stats(spans: Sequence[float], warmup: int) -> LatencyStats:
    spans = [float(s) for s in spans]
    if not spans:
        raise ValueError("no inference was run")
    steady = np.array(spans[warmup:] or spans[-1:], np.float64)
    warm = spans[:warmup] or [spans[0]]
    pct = lambda q: float(np.percentile(steady, q, method="linear"))  # noqa: E731
    return LatencyStats(len(steady), spans[0], math.fsum(warm) / len(warm), float(steady.mean()),
                        float(steady.std()), float(steady.min()), float(steady.max()), pct(50), pct(90), pct(99))


def boundary_interval(iv: Interval) -> bool:
    return iv.kind in (Kind.COPY, Kind.INVOKE) or (iv.kind is Kind.OP and iv.name.endswith(" conversion"))


def _boundary(steady: list[Interval], n: int, latency: float, joules_per_byte: float) -> Boundary:
    edge = [iv for iv in steady if boundary_interval(iv)]
    copies = [iv for iv in edge if iv.kind is Kind.COPY]
    seconds = math.fsum(iv.seconds for iv in edge) / n
    joules = (math.fsum(iv.joules for iv in edge) + sum(iv.bytes for iv in edge) * joules_per_byte) / n
    return Boundary(len(copies) / n, sum(dict(iv.args).get("payload_bytes", 0) for iv in copies) / n,
                    seconds, joules, seconds / latency if latency > 0 else 0.0)


def per_op_times(intervals: list[Interval]) -> tuple[OpTime, ...]:
    """Time per plan node in one inference: a CPU op by its index, a delegate's partitions as one
    node named after it (as TFLite's op profiler shows a delegate kernel), in order of first
    appearance. Every row is the same statistic: the node's op work summed within an inference,
    averaged over the inferences it ran in; `first` is the earliest of them. Copies, invoke calls
    and edge conversions are the boundary's (measured apart), not a node's."""
    runs: dict[tuple[str, str], dict[tuple[int, int], float]] = {}
    for iv in intervals:
        if iv.inference < 0 or iv.kind is not Kind.OP or boundary_interval(iv):
            continue
        args = dict(iv.args)
        key = (f"{args['delegate']}" if "delegate" in args else f"{iv.name}:{args.get('node', '')}", iv.lane)
        per_run = runs.setdefault(key, {})
        per_run[(iv.inference, iv.stream)] = per_run.get((iv.inference, iv.stream), 0.0) + iv.seconds
    return tuple(OpTime(node, lane, per_run[min(per_run)], math.fsum(per_run.values()) / len(per_run), len(per_run))
                 for (node, lane), per_run in runs.items())


def measure(soc, spans: Sequence[Span], warmup: int,
            footprint: dict[str, int] | None = None, memory: Any = None) -> Measurement:
    """Measure the inferences `spans` recorded on `soc`'s trace; `memory`
    (a runtime.measure.footprint.MemoryRecord) gives each per-op row its bytes."""
    ordered = sorted(spans, key=lambda s: (s.k, s.stream))
    stats = latency_stats([s.end - s.start for s in ordered], warmup)
    steady = [s for s in ordered if s.k >= warmup] or ordered[-1:]
    t0, t1 = min(s.start for s in steady), max(s.end for s in steady)
    n = len(steady)
    keys = {(s.stream, s.k) for s in steady}
    intervals = soc.trace.intervals
    steady_ivs = [iv for iv in intervals if (iv.stream, iv.inference) in keys]
    init = [iv for iv in intervals if iv.inference < 0]
    init_s = max((iv.end for iv in init), default=0.0) - min((iv.start for iv in init), default=0.0)
    joules = soc.energy(t0, t1)
    active = _active_energy(steady_ivs, joules_per_byte=soc.profile.dram.energy_per_byte)
    rails = tuple(RailEnergy(r, 1e3 * active.get(r, 0.0) / n, 1e3 * j / n) for r, j in sorted(joules.items()))
    total = math.fsum(joules.values())
    levels = [sum(level.values()) for t, level in power_steps(steady_ivs, soc.rails, soc.profile.dram.energy_per_byte) if t0 <= t < t1]
    return Measurement(stats, init_s, _boundary(steady_ivs, n, stats.avg, soc.profile.dram.energy_per_byte),
                       rails, 1e3 * total / n, total / (t1 - t0) if t1 > t0 else 0.0,
                       max(levels, default=sum(soc.rails.values())),
                       _with_memory(per_op_times(intervals), memory), tuple(sorted((footprint or {}).items())), memory)


def _with_memory(rows: tuple[OpTime, ...], memory: Any) -> tuple[OpTime, ...]:
    nodes = memory.nodes if memory is not None else {}
    return tuple(replace(o, mem_bytes=nodes.get(o.node, 0)) for o in rows)


def _active_energy(intervals: list[Interval], joules_per_byte: float) -> dict[str, float]:
    out: dict[str, float] = {}
    for iv in intervals:
        out[iv.rail] = out.get(iv.rail, 0.0) + iv.joules
        out["dram"] = out.get("dram", 0.0) + iv.bytes * joules_per_byte
    return out


@dataclass(frozen=True)
class OutputDiff:
    """inference_diff's figures for one output: mean absolute difference, its std dev, and the max."""

    mean: float
    std: float
    max: float


def output_diff(reference: np.ndarray, test: np.ndarray) -> OutputDiff:
    """The absolute differences between two values of one output, summed up as inference_diff does."""
    d = np.abs(np.asarray(reference, np.float64) - np.asarray(test, np.float64))
    return OutputDiff(float(d.mean()), float(d.std()), float(d.max())) if d.size else OutputDiff(0.0, 0.0, 0.0)
