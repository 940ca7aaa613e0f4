"""Apple's Neural Engine: float16 only, a model compiled at init, data converted on entry and exit."""

from __future__ import annotations

from sim.cost import Precision
from sim.unit import Unit

__all__ = ["AneUnit"]


class AneUnit(Unit):
    """Core ML runs the delegated float graph in float16 on the Neural Engine; the compile at init
    is the profile's init_s, the entry/exit conversion its convert rate (charged at the boundary)."""

    def runs(self, precision: Precision) -> bool:
        return precision is Precision.FLOAT16 and super().runs(precision)
