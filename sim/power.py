"""Energy and power from recorded intervals: each rail's idle power plus what its busy intervals drew."""

from __future__ import annotations

import math
from typing import Iterable, Mapping

from sim.trace import Interval

__all__ = ["rail_energy", "active_energy", "power_steps", "DRAM_RAIL"]

DRAM_RAIL = "dram"


def _clip(iv: Interval, t0: float, t1: float) -> float:
    return max(0.0, min(iv.end, t1) - max(iv.start, t0))


def rail_energy(intervals: Iterable[Interval], idle_w: Mapping[str, float], t0: float, t1: float,
                dram_joules_per_byte: float = 0.0) -> dict[str, float]:
    """Joules per rail over [t0, t1]: the integral of each rail's power step function.

    DRAM energy also counts every byte moved by intervals that end inside the window."""
    span = t1 - t0
    extra: dict[str, list[float]] = {rail: [] for rail in idle_w}
    moved = 0
    for iv in intervals:
        overlap = _clip(iv, t0, t1)
        if overlap > 0 or (iv.start == iv.end and t0 <= iv.start < t1):
            extra.setdefault(iv.rail, []).append(overlap * iv.watts)
        if t0 < iv.end <= t1 or (iv.end == t0 == iv.start):
            moved += iv.bytes
    energy = {rail: idle_w.get(rail, 0.0) * span + math.fsum(parts) for rail, parts in extra.items()}
    energy[DRAM_RAIL] = energy.get(DRAM_RAIL, idle_w.get(DRAM_RAIL, 0.0) * span) + moved * dram_joules_per_byte
    return energy


def active_energy(intervals: Iterable[Interval], dram_joules_per_byte: float = 0.0) -> dict[str, float]:
    """Joules per rail that whole intervals drew above their rails' idle power (watts x their own
    duration), and their bytes on the DRAM rail: what a long run's ledger folds tick by tick (the
    intervals are whole there, so rail_energy's clipping to a window has nothing to clip)."""
    parts: dict[str, list[float]] = {}
    moved = 0
    for iv in intervals:
        parts.setdefault(iv.rail, []).append(iv.seconds * iv.watts)
        moved += iv.bytes
    energy = {rail: math.fsum(p) for rail, p in parts.items()}
    if moved and dram_joules_per_byte:
        energy[DRAM_RAIL] = energy.get(DRAM_RAIL, 0.0) + moved * dram_joules_per_byte
    return energy


def power_steps(intervals: Iterable[Interval], idle_w: Mapping[str, float],
                dram_joules_per_byte: float = 0.0) -> list[tuple[float, dict[str, float]]]:
    """The power of every rail as a step function: (time, {rail: watts}) at each change, for counter
    tracks. Sums of overlapping intervals are kept exact by rebuilding each level from the active set.

    With `dram_joules_per_byte`, an interval's bytes also load the DRAM rail evenly over its
    duration, so the steps integrate to the whole energy (not only the rails' own)."""
    events: list[tuple[float, int, int]] = []
    ivs = [iv for iv in intervals if iv.end > iv.start]
    for k, iv in enumerate(ivs):
        events.append((iv.start, 1, k))
        events.append((iv.end, 0, k))
    events.sort()
    active: set[int] = set()
    steps: list[tuple[float, dict[str, float]]] = [(0.0, dict(idle_w))]
    i = 0
    while i < len(events):
        t = events[i][0]
        while i < len(events) and events[i][0] == t:
            _, starting, k = events[i]
            (active.add if starting else active.discard)(k)
            i += 1
        level = dict(idle_w)
        for k in active:
            iv = ivs[k]
            level[iv.rail] = level.get(iv.rail, 0.0) + iv.watts
            if dram_joules_per_byte and iv.bytes:
                level[DRAM_RAIL] = level.get(DRAM_RAIL, 0.0) + iv.bytes * dram_joules_per_byte / iv.seconds
        steps.append((t, level))
    return steps
