"""A CPU cluster: cores shared by the ops in flight, NEON float32 and int8 (dot-product) rates."""

from __future__ import annotations

import simpy

from sim.spec import UnitSpec
from sim.unit import Unit

__all__ = ["CpuCluster"]


class CpuCluster(Unit):
    """Cores are a pool: an op with T threads takes min(T, cores) of them, so two streams on a
    4-core cluster with 4 threads each run one after the other. Active power in the profile is the
    whole cluster's with every core busy; an op on k cores draws k/cores of the step above idle."""

    def __init__(self, soc, spec: UnitSpec):
        super().__init__(soc, spec)
        self.cores = simpy.Container(self.env, capacity=spec.cores, init=spec.cores)

    def _used(self, threads: int) -> int:
        return max(1, min(threads, self.spec.cores))

    def _acquire(self, threads: int):
        return self.cores.get(self._used(threads))

    def _release(self, request, threads: int) -> None:
        self.cores.put(self._used(threads))

    def _share(self, threads: int) -> float:
        return self._used(threads) / self.spec.cores
