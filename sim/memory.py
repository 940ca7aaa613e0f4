"""The shared DRAM that every unit and copy draws bandwidth from, and the copy engines."""

from __future__ import annotations

import simpy

from sim.spec import CopySpec, DramSpec

__all__ = ["Dram"]


class Dram:
    """Bandwidth is divided when a transfer starts: a unit asking for `want` bytes/s while others
    are in flight gets want x bus / total demand (never more than it asked for). Transfers already
    running keep their rate, so the split is deterministic and costs O(1) per transfer; a transfer
    that overlaps others is slower, which is the contention that matters for concurrent streams."""

    def __init__(self, env: simpy.Environment, spec: DramSpec, copy: CopySpec):
        self.env = env
        self.spec = spec
        self.copy_spec = copy
        # engines handed out by name, so each gets its own lane in the trace
        self.copy_engines = simpy.Store(env)
        self.copy_engines.items = [f"copy{k}" for k in range(max(1, copy.engines))]
        self._demand: dict[int, float] = {}
        self._next = 0
        self.bytes_moved = 0

    def acquire(self, want: float) -> tuple[int, float]:
        """Register a transfer asking for `want` bytes/s; returns its token and granted bandwidth."""
        token = self._next
        self._next += 1
        self._demand[token] = want
        return token, self._grant(want, sum(self._demand.values()))

    def alone(self, want: float) -> float:
        """The bandwidth `acquire` grants a transfer with no other in flight (a single inference
        on an otherwise idle phone): the same split, over its own demand only."""
        return self._grant(want, want)

    def _grant(self, want: float, total: float) -> float:
        granted = want * min(1.0, self.spec.bandwidth / total)
        return min(granted, self.spec.bandwidth)

    def release(self, token: int, nbytes: int) -> None:
        del self._demand[token]
        self.bytes_moved += nbytes
