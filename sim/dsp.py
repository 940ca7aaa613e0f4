"""The Hexagon DSP: 8-bit integer HVX arithmetic (and float16 on an HTP), reached through a remote call per partition."""

from __future__ import annotations

from sim.cost import Precision
from sim.spec import UnitSpec
from sim.unit import Unit

__all__ = ["DspUnit", "has_htp", "FIRST_HTP"]


# The first Hexagon with a tensor processor (HTP) is v68 (Snapdragon 888); LiteRT's Qualcomm SoC table
# (litert/vendors/qualcomm/supported_soc.csv) lists SM8350 as v68, SM8550 v73, SM8650 v75, SM8750 v79.
FIRST_HTP = 68


class DspUnit(Unit):
    """int8/uint8 work, and float16 where the profile gives the unit an HTP (`htp_arch` extra)
    and a float16 rate. Each delegated partition invocation pays the profile's FastRPC cost
    (invoke_s); the graph is prepared once at init (init_s). Its low active power is what makes it
    win on energy."""

    def runs(self, precision: Precision) -> bool:
        allowed = (Precision.INT8, Precision.FLOAT16) if has_htp(self.spec) else (Precision.INT8,)
        return precision in allowed and super().runs(precision)


def has_htp(spec: UnitSpec) -> bool:
    """Whether a DSP unit carries a Hexagon Tensor Processor (v68 or later)."""
    return spec.extras.get("htp_arch", 0) >= FIRST_HTP
