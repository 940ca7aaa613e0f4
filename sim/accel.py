"""An NPU behind an NNAPI-like driver: a unit whose rates and precisions the profile names."""

from __future__ import annotations

from sim.unit import Unit

__all__ = ["NpuUnit"]


class NpuUnit(Unit):
    """An Edge-TPU-class accelerator. What it accepts is the driver's answer (sim/npu.py); how
    fast and at what power it runs is this unit's profile entry, scaled by the execution
    preference the NNAPI delegate passes."""
