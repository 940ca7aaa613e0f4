"""Chrome Trace Event JSON of a simulated run, as Perfetto and chrome://tracing open it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

from runtime.ir.atomic import write_text
from sim.power import power_steps
from sim.trace import Interval

__all__ = ["chrome_trace", "write_trace"]

_US = 1e6  # trace timestamps are microseconds


def _lanes(intervals: Iterable[Interval], units: Iterable[str]) -> dict[str, int]:
    """One lane (thread) per unit in profile order, then one per copy engine as they appear."""
    lanes = {name: k + 1 for k, name in enumerate(units)}
    for iv in intervals:
        lanes.setdefault(iv.lane, len(lanes) + 1)
    return lanes


def _slice(iv: Interval, pid: int, tid: int) -> dict[str, Any]:
    args = {"bytes": iv.bytes, "energy_mJ": iv.joules * 1e3, "stream": iv.stream, "inference": iv.inference}
    args.update({k: (v if isinstance(v, (int, float, str, bool)) else str(v)) for k, v in iv.args})
    return {"name": iv.name, "cat": iv.kind.value, "ph": "X", "ts": iv.start * _US, "dur": iv.seconds * _US,
            "pid": pid, "tid": tid, "args": args}


def _counters(intervals: list[Interval], rails: dict[str, float], pid: int,
              dram_joules_per_byte: float) -> list[dict[str, Any]]:
    """One counter track per rail ("power <rail>", watts), an event wherever its level changes."""
    events, last = [], {}
    for t, level in power_steps(intervals, rails, dram_joules_per_byte):
        for rail, watts in level.items():
            if last.get(rail) != watts:
                events.append({"name": f"power {rail}", "ph": "C", "ts": t * _US, "pid": pid,
                               "args": {"W": watts}})
                last[rail] = watts
    return events


def chrome_trace(soc, label: str = "", pid: int = 1) -> dict[str, Any]:
    """The trace of one SoC as a Trace Event Format object (JSON-ready)."""
    intervals = list(soc.trace.intervals)
    lanes = _lanes(intervals, soc.units)
    name = f"{soc.profile.name} {label}".strip()
    events: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}}]
    events += [{"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": lane}}
               for lane, tid in lanes.items()]
    events += [_slice(iv, pid, lanes[iv.lane]) for iv in intervals]
    events += [{"name": f"inference {span.k}", "cat": "inference", "ph": "X", "ts": span.start * _US,
                "dur": (span.end - span.start) * _US, "pid": pid, "tid": 0, "args": {"stream": span.stream}}
               for span in soc.trace.inferences]
    events += _counters(intervals, soc.rails, pid, soc.profile.dram.energy_per_byte)
    events += _monitor_counters(getattr(soc, "monitor", None), pid)
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def _monitor_counters(monitor, pid: int) -> list[dict[str, Any]]:
    """A long run's monitor (sim/monitor.py): die and skin temperature and the SoC's power every tick,
    each throttled unit's clock wherever the governor moved it. None in every other run: no events."""
    if monitor is None:
        return []
    events = [{"name": "temperature", "ph": "C", "ts": s.t * _US, "pid": pid,
               "args": {"die_C": s.die_c, "skin_C": s.skin_c}} for s in monitor.samples]
    events += [{"name": "power soc (tick)", "ph": "C", "ts": s.t * _US, "pid": pid, "args": {"W": s.soc_w}}
               for s in monitor.samples]
    events += [{"name": f"frequency {c.unit}", "ph": "C", "ts": c.t * _US, "pid": pid, "args": {"MHz": c.mhz}}
               for c in monitor.changes]
    return events


def write_trace(path: str | os.PathLike, traces: list[dict[str, Any]]) -> Path:
    """Merge several traces (one process each) into one file, written atomically."""
    path = Path(path)
    merged = {"traceEvents": [e for t in traces for e in t["traceEvents"]], "displayTimeUnit": "ms"}
    write_text(path, json.dumps(merged))
    return path
