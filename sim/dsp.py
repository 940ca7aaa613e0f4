"""The Hexagon DSP: 8-bit integer HVX arithmetic (and float16 on an HTP), reached through a remote call per partition."""

from __future__ import annotations

import numpy as np

from sim.cost import OpCost, Precision, Work
from sim.price import Priced
from sim.htp import FIRST_HTP, float_edge_seconds, prefetch_room, weight_prefetch
from sim.spec import UnitSpec
from sim.unit import Unit

__all__ = ["DspUnit", "has_htp"]


class DspUnit(Unit):
    """int8/uint8 work, and float16 where the profile gives the unit an HTP (`htp_arch` extra)
    and a float16 rate. Each delegated partition invocation pays the profile's FastRPC cost
    (invoke_s); the graph is prepared once at init (init_s). Its low active power is what makes it
    win on energy."""

    def __init__(self, soc, spec: UnitSpec):
        super().__init__(soc, spec)
        self._banked = 0.0   # DMA time fetched ahead into VTCM (sim/htp.weight_prefetch)

    def runs(self, precision: Precision) -> bool:
        allowed = (Precision.INT8, Precision.FLOAT16) if has_htp(self.spec) else (Precision.INT8,)
        return precision in allowed and super().runs(precision)

    def begin_graph(self) -> None:
        self._banked = 0.0

    def float_edge_seconds(self, edge_bytes: int, scale) -> float:
        htp = self.rates_at(1, scale).mech.htp
        return 0.0 if htp is None else float_edge_seconds(edge_bytes, htp.float_edge_bandwidth)

    def seconds(self, cost: OpCost, work: Work, scale, bandwidth: float, threads: int) -> float:
        """On an HTP with its mechanisms, the op's weights may already be in VTCM: its DMA fetched
        them while the ops before it computed (sim/htp.weight_prefetch)."""
        htp = self.rates_at(threads, scale).mech.htp
        if htp is None or not htp.vtcm_bytes:
            return cost.seconds
        return self._prefetched(cost.compute_s, cost.memory_s, cost.dispatch_s,
                                min(work.weight_bytes, cost.bytes) / bandwidth,
                                prefetch_room(htp.vtcm_bytes, bandwidth))

    def _prefetched(self, compute: float, memory: float, dispatch: float, weight_s: float, room: float) -> float:
        """One op's seconds with the weights the DMA fetched ahead taken off its memory time; the
        prefetch state moves on to the next op."""
        memory, self._banked = weight_prefetch(compute, memory, weight_s, self._banked, room)
        return dispatch + max(compute, memory)

    def run_seconds(self, priced: Priced, ops: np.ndarray, begins: bool) -> float:
        """`seconds` over a run in order, the prefetch state carried from op to op."""
        htp = priced.rates.mech.htp
        if htp is None or not htp.vtcm_bytes:
            return super().run_seconds(priced, ops, begins)
        if begins:
            self.begin_graph()
        bandwidth = priced.bandwidth
        room = prefetch_room(htp.vtcm_bytes, bandwidth)
        total = 0.0
        for compute, memory, dispatch, weight in zip(priced.compute[ops].tolist(), priced.memory[ops].tolist(),
                                                     priced.dispatch[ops].tolist(), priced.weight[ops].tolist()):
            total += self._prefetched(compute, memory, dispatch, weight / bandwidth, room)
        return total


def has_htp(spec: UnitSpec) -> bool:
    """Whether a DSP unit carries a Hexagon Tensor Processor (v68 or later)."""
    return spec.extras.get("htp_arch", 0) >= FIRST_HTP
