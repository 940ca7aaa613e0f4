"""The simulation's record: every busy interval, copy and init step, with the power it drew."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Kind", "Interval", "Span", "Trace"]


class Kind(enum.Enum):
    OP = "op"            # one op's compute on a unit
    COPY = "copy"        # a boundary crossing: CPU <-> accelerator memory, layout/dtype conversion
    INVOKE = "invoke"    # fixed per-partition call cost (FastRPC, driver execution, GPU sync)
    INIT = "init"        # one-time compile / graph preparation / weight upload


@dataclass(frozen=True)
class Interval:
    """One thing a lane did: [start, end) in simulated seconds, the rail it loaded, bytes it moved.

    `watts` is the power *above the rail's idle level* while it ran, so a rail's energy is its
    idle power over the span plus the sum of watts x duration of its intervals."""

    lane: str
    name: str
    kind: Kind
    start: float
    end: float
    rail: str
    watts: float
    bytes: int = 0
    stream: int = 0
    inference: int = -1            # -1: initialisation, before any inference
    args: tuple[tuple[str, Any], ...] = ()

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def joules(self) -> float:
        return self.seconds * self.watts


@dataclass(frozen=True)
class Span:
    """One inference of one stream, [start, end) in simulated seconds (k: its number in the stream)."""

    stream: int
    k: int
    start: float
    end: float


@dataclass
class Trace:
    """Append-only list of intervals plus the inference spans, in simulated time."""

    intervals: list[Interval] = field(default_factory=list)
    inferences: list[Span] = field(default_factory=list)

    def add(self, interval: Interval) -> None:
        self.intervals.append(interval)

    def mark(self, stream: int, k: int, start: float, end: float) -> None:
        self.inferences.append(Span(stream, k, start, end))
