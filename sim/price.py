"""Op costs priced as arrays: many ops on one unit at once (the fit's path), held to sim.cost.op_cost by tests.

sim.cost.op_cost prices one op; a calibration prices the same few thousand ops on hundreds of
profiles that differ only in a unit's rates. `facts` takes, once per op, everything op_cost derives
from the op and the unit's layout (threads used, tile and lane padding, Winograd's rewrite, bytes
kept on chip): none of it moves when a rate does. `price` then evaluates op_cost's formula over the
ops' facts as NumPy arrays, in op_cost's order of operations, so each op's figure is op_cost's.
What a rate is and what the layout is: `layout`, the key the facts are valid under.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from sim import cost as cx
from sim import htp as hx
from sim.cost import OpClass, Precision, Rates, Work

__all__ = ["Facts", "Priced", "facts", "price", "layout"]

_CLASSES = tuple(OpClass)
_PRECISIONS = tuple(Precision)


def layout(rates: Rates) -> tuple:
    """What of a unit's rates the facts depend on: its threads, mechanism switches, tiles, lanes and
    on-chip memories; not its rates, efficiencies, bandwidths or fixed costs (what a calibration fits)."""
    m = rates.mech
    htp = m.htp
    return (rates.threads, rates.sram_bytes, tuple(sorted(p.value for p in rates.macs_per_s)),
            tuple(sorted(p.value for p in rates.elem_per_s)), m.enabled, m.gemm_tile, m.vector_bytes,
            m.cache_bytes, m.im2col, m.winograd_min_slices, m.winograd_min_tiles,
            None if htp is None else (htp.depth_tile, htp.block_int8, htp.block_fp16, htp.vtcm_bytes))


@dataclass(frozen=True)
class Facts:
    """Per op (one array entry each), what op_cost uses that no rate moves."""

    precision: np.ndarray      # index into Precision
    op_class: np.ndarray       # index into OpClass
    macs: np.ndarray           # after a GPU's Winograd rewrite
    elem: np.ndarray
    threads: np.ndarray        # the threads it effectively runs on
    occupancy_items: np.ndarray  # GPU work items (0: not a grid)
    gemm_pad: np.ndarray       # real share of the GEMM's whole tiles (1 without a GEMM shape)
    gemm_depth: np.ndarray     # the GEMM's depth (0 without a GEMM shape)
    lane: np.ndarray           # a depthwise op's share of its SIMD lanes
    tiles: np.ndarray          # an HTP op's share of its whole croutons and reduction steps
    dispatches: np.ndarray     # kernels launched (0 for a fused op)
    dram: np.ndarray           # bytes to and from DRAM
    vtcm: np.ndarray           # bytes to and from an HTP's VTCM
    weight: np.ndarray         # weight bytes among them (an HTP's DMA fetches them ahead)
    im2col_rows: np.ndarray
    im2col_bytes: np.ndarray


@dataclass(frozen=True)
class Priced:
    """Per op, op_cost's figures: seconds = dispatch + max(compute, memory); the weight bytes an
    HTP's DMA may fetch ahead; and the rates and DRAM bandwidth they were priced at."""

    seconds: np.ndarray
    compute: np.ndarray
    memory: np.ndarray
    dispatch: np.ndarray
    weight: np.ndarray
    rates: Rates
    bandwidth: float


def _one(work: Work, rates: Rates) -> tuple:
    if work.precision not in rates.macs_per_s and work.precision not in rates.elem_per_s:
        raise ValueError(f"the unit has no rates for {work.precision.value}")
    work, kernels = cx.winograd_work(work, rates)
    mech = rates.mech
    enabled = mech.enabled
    gemm = work.gemm if enabled and work.gemm is not None and min(work.gemm) > 0 else None
    pad = 1.0
    if gemm is not None:
        m, n, _ = gemm
        mr, nr = mech.gemm_tile
        pad = m * n / (-(-m // mr) * mr * -(-n // nr) * nr)
    lane = cx.lane_share(work, mech) if enabled else 1.0
    tiles = cx.htp_efficiency(work, mech.htp) if enabled and mech.htp is not None else 1.0
    if mech.htp is not None:
        dram, vtcm = cx.work_vtcm_split(work, mech.htp)
    else:
        dram, vtcm = cx.dram_bytes(work, rates), 0
    im2col = enabled and mech.im2col and work.im2col_bytes
    return (_PRECISIONS.index(work.precision), _CLASSES.index(work.op_class), work.macs, work.elem_ops,
            cx.parallelism(work, rates), work.items if enabled else 0, pad, gemm[2] if gemm else 0, lane, tiles,
            0 if work.fused else kernels, dram, vtcm, min(work.weight_bytes, dram),
            work.im2col_rows if im2col else 0, work.im2col_bytes if im2col else 0)


def facts(works: Sequence[Work], rates: Rates) -> Facts:
    """The ops' facts on a unit with these rates (only its `layout` matters)."""
    cols = list(zip(*(_one(w, rates) for w in works))) if works else [()] * 16
    ints = (0, 1)
    return Facts(*(np.array(c, dtype=np.int64 if k in ints else np.float64) for k, c in enumerate(cols)))


def _table(table, what: str, wanted: np.ndarray, used: np.ndarray) -> np.ndarray:
    """A rate per precision, indexed by the ops' precision; an op that needs a missing rate is op_cost's error."""
    rates = np.array([table.get(p) or 0.0 for p in _PRECISIONS], dtype=np.float64)
    out = rates[wanted]
    missing = used & ~(out > 0)
    if missing.any():
        raise ValueError(f"the unit has no {what} rate for {_PRECISIONS[int(wanted[missing][0])].value}")
    return out


def _cache_bandwidth(working: np.ndarray, bw: float, cache_bytes: float, cache_bw: float) -> np.ndarray:
    """sim.mechanisms.cache_bandwidth over arrays of working sets."""
    out = np.full(working.shape, bw, dtype=np.float64)
    if cache_bytes <= 0 or cache_bw <= bw:
        return out
    hit = np.minimum(1.0, cache_bytes / np.where(working > 0, working, 1.0))
    blended = 1.0 / (hit / cache_bw + (1.0 - hit) / bw)
    return np.where(working > 0, blended, out)


def _mac_table(f: Facts, rates: Rates) -> np.ndarray:
    """sim.cost.mac_rate per op: an HTP's depthwise ops at its HVX rate, every other op at the MAC rate."""
    if rates.mech.htp is None:
        return _table(rates.macs_per_s, "MAC", f.precision, f.macs > 0)
    hvx = f.op_class == _CLASSES.index(OpClass.DEPTHWISE)
    lanes = np.array([hx.HVX_MACS_PER_LANE.get(p.value, 1) for p in _PRECISIONS], dtype=np.float64)
    vector = _table(rates.elem_per_s, "element-op", f.precision, hvx & (f.macs > 0)) * lanes[f.precision]
    matrix = _table(rates.macs_per_s, "MAC", f.precision, ~hvx & (f.macs > 0))
    return np.where(hvx, vector, matrix)


def _compute(f: Facts, rates: Rates) -> np.ndarray:
    mech = rates.mech
    eff = np.array([rates.efficiency.get(c, 1.0) for c in _CLASSES])[f.op_class]
    if mech.enabled:
        full = mech.occupancy_items
        shape = (np.minimum(1.0, f.occupancy_items / full) if full > 0 else np.ones_like(f.macs))
        shape = np.where(f.occupancy_items > 0, shape, 1.0)
        depth = np.divide(f.gemm_depth, f.gemm_depth + mech.gemm_depth_overhead, out=np.ones_like(f.macs),
                          where=f.gemm_depth > 0)
        shape = np.where(f.gemm_depth > 0, shape * (f.gemm_pad * depth), shape)
        eff = eff * (shape * f.lane * f.tiles)
    eff = eff * f.threads
    macs = _mac_table(f, rates)
    elem = _table(rates.elem_per_s, "element-op", f.precision, f.elem > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        seconds = np.where(f.macs > 0, f.macs / (macs * eff), 0.0)
        return seconds + np.where(f.elem > 0, f.elem / (elem * eff), 0.0)


def _memory(f: Facts, rates: Rates, bw: float) -> np.ndarray:
    mech = rates.mech
    if mech.htp is not None:
        seconds = f.dram / bw
        return seconds + f.vtcm / mech.htp.vtcm_bandwidth if mech.htp.vtcm_bandwidth > 0 else seconds
    if mech.enabled:
        return f.dram / _cache_bandwidth(f.dram, bw, mech.cache_bytes, mech.cache_bandwidth)
    return f.dram / bw


def price(f: Facts, rates: Rates, bandwidth: float | None = None) -> Priced:
    """op_cost of every op of `f` at these rates (the layout `f` was taken under), as arrays."""
    bw = bandwidth or rates.bandwidth
    mech = rates.mech
    compute = _compute(f, rates)
    memory = _memory(f, rates, bw)
    fixed = rates.dispatch_s * f.dispatches
    if mech.enabled:   # op_cost's order: dispatch + (fork/join + im2col)
        copy = f.im2col_rows * mech.im2col_row_s + f.im2col_bytes / _cache_bandwidth(
            f.im2col_bytes, bw, mech.cache_bytes, mech.cache_bandwidth)
        fixed = fixed + (np.where(f.threads > 1, mech.join_s, 0.0) + np.where(f.im2col_bytes > 0, copy, 0.0))
    return Priced(fixed + np.maximum(compute, memory), compute, memory, fixed, f.weight, rates, bw)

