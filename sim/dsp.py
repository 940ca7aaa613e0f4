"""The Hexagon DSP: 8-bit integer HVX arithmetic, reached through a remote call per partition."""

from __future__ import annotations

from sim.cost import Precision
from sim.unit import Unit

__all__ = ["DspUnit"]


class DspUnit(Unit):
    """Only int8/uint8 work: the profile lists an int8 rate and nothing else. Each delegated
    partition invocation pays the profile's FastRPC cost (invoke_s); the graph is prepared once at
    init (init_s). Its low active power is what makes it win on energy."""

    def runs(self, precision: Precision) -> bool:
        return precision is Precision.INT8 and super().runs(precision)
