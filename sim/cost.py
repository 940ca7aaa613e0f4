"""Pure cost functions: a work description and a unit's rates in, seconds and bytes out (energy: sim/power.py)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Mapping

from sim import htp as hx
from sim import mechanisms as mx
from sim.mechanisms import Mechanisms

__all__ = ["OpClass", "Precision", "Work", "Rates", "OpCost", "op_cost", "copy_seconds", "mac_rate", "on_hvx",
           "padded_channels", "dram_bytes", "winograd_work", "LANE_BYTES",
           "work_vtcm_split", "lane_share"]


class OpClass(enum.Enum):
    """Families of ops that reach different fractions of a unit's peak rate."""

    CONV = "conv"              # CONV_2D, TRANSPOSE_CONV: dense MACs with good reuse
    DEPTHWISE = "depthwise"    # few MACs per byte; rarely near peak
    GEMM = "gemm"              # FULLY_CONNECTED, BATCH_MATMUL, LSTM gates
    ELEMENTWISE = "elementwise"
    TRANSCENDENTAL = "transcendental"  # exp/log/tanh/logistic/softmax: several element ops each
    POOL = "pool"
    REDUCE = "reduce"
    RESIZE = "resize"
    DATA = "data"              # reshape, concat, pad, transpose, slice: bytes only


class Precision(enum.Enum):
    """The arithmetic a unit runs an op in; rates and power may differ per precision."""

    FLOAT32 = "float32"
    FLOAT16 = "float16"
    INT8 = "int8"


@dataclass(frozen=True)
class Work:
    """What one op asks of a unit: multiply-accumulates, other element operations, and bytes moved."""

    op: str
    op_class: OpClass
    precision: Precision
    macs: int = 0
    elem_ops: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    # Shape facts the mechanisms need (sim/mechanisms.py); 0 / None where they do not apply.
    gemm: tuple[int, int, int] | None = None   # (rows, columns, depth) of a GEMM-shaped op
    rows: int = 0                              # output rows a CPU kernel splits over threads
    channels: int = 0                          # output channels, unpadded (SIMD lanes run along them)
    items: int = 0                             # GPU work items: output pixels x slices of channels
    im2col_bytes: int = 0                      # a CPU convolution's patch matrix, written and read back
    im2col_rows: int = 0                       # the row copies (memcpy calls) that build it
    fused: bool = False                        # linked into the producing kernel: no launch of its own
    weight_bytes: int = 0                      # constant inputs among bytes_read (weights, biases)
    weights_before: int = 0                    # weight bytes of the ops before it on its unit, in plan order
    spatial: tuple[int, int] = (0, 0)          # height and width of the NHWC tensor its loop walks (HTP croutons)
    edge_bytes: int = 0                        # bytes of its tensors that cross its partition's boundary
    winograd_tiles: int = 0                    # 4x4 output tiles of a 3x3, stride-1, undilated convolution
    group_depth: int = 0                       # input channels per group of a grouped convolution (0: not grouped)
    streamed_bytes: int = 0                    # activation bytes it passes to or takes from its plan neighbour alone

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    def __hash__(self) -> int:
        # A Work keys every op-cost cache lookup (sim/unit.py), hundreds of thousands in a calibration;
        # its fields never change, so their hash is computed once (equality stays field by field).
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash(tuple(getattr(self, f) for f in self.__dataclass_fields__))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __getstate__(self) -> dict:
        # the cached hash stays in this process: another (a Dask worker) hashes strings differently
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}


@dataclass(frozen=True)
class Rates:
    """A unit's throughput as its profile sets it (all rates per second, for the whole unit)."""

    macs_per_s: Mapping[Precision, float]
    elem_per_s: Mapping[Precision, float]
    bandwidth: float                       # bytes/s the unit reaches from DRAM
    dispatch_s: float = 0.0                # fixed cost per op (kernel launch, scheduling)
    efficiency: Mapping[OpClass, float] = field(default_factory=dict)  # fraction of peak, default 1
    threads: int = 1                       # cores the op may use; the rates above are per core
    mech: Mechanisms = Mechanisms()        # non-roofline mechanisms (off by default)
    sram_bytes: float = 0.0                # on-chip memory that keeps weights between inferences


@dataclass(frozen=True)
class OpCost:
    """Time of one op and how it splits; `bound` says which term set the time."""

    seconds: float
    compute_s: float
    memory_s: float
    dispatch_s: float
    bytes: int                             # moved to and from DRAM (weights held on chip are not)

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s >= self.memory_s else "memory"


def _rate(table: Mapping[Precision, float], precision: Precision, what: str) -> float:
    rate = table.get(precision)
    if not rate or rate <= 0:
        raise ValueError(f"the unit has no {what} rate for {precision.value}")
    return rate


LANE_BYTES = {Precision.FLOAT32: 4, Precision.FLOAT16: 2, Precision.INT8: 1}


def parallelism(work: Work, rates: Rates) -> float:
    """Threads the op effectively runs on: all of them on the plain roofline; with mechanisms, what
    TFLite's kernels split it into (ruy's rule for GEMMs, row splits otherwise)."""
    if not rates.mech.enabled:
        return float(rates.threads)
    return mx.threads_used(work.gemm, work.op_class is OpClass.DEPTHWISE, work.macs, work.rows, rates.threads)


def shape_efficiency(work: Work, rates: Rates) -> float:
    """How much of the per-class efficiency the op's shape lets the kernel reach (1 without mechanisms)."""
    mech = rates.mech
    if not mech.enabled:
        return 1.0
    eff = mx.gpu_occupancy(work.items, mech.occupancy_items)
    if work.gemm is not None:
        eff *= mx.gemm_shape_efficiency(*work.gemm, mech.gemm_tile, mech.gemm_depth_overhead)
    eff *= lane_share(work, mech)
    if mech.htp is not None:
        eff *= htp_efficiency(work, mech.htp)
    return eff


def lane_share(work: Work, mech: Mechanisms) -> float:
    """A depthwise op's share of its SIMD lanes (sim/mechanisms.lane_efficiency); 1 for the rest."""
    if work.op_class is OpClass.DEPTHWISE and mech.vector_bytes:
        return mx.lane_efficiency(work.channels, mech.vector_bytes // LANE_BYTES[work.precision])
    return 1.0


def htp_efficiency(work: Work, htp: hx.Htp) -> float:
    """The HTP's share of its peak an op's shape and arithmetic let it reach: its tiles (htp_tiles),
    and for an 8-bit ADD, SUB or MUL the rescaling of its inputs, several slots an output on the HVX
    (sim/htp.requant_scale)."""
    return htp_tiles(work, htp) / hx.requant_scale(work.op, work.precision.value)


def htp_tiles(work: Work, htp: hx.Htp) -> float:
    """The HTP's tiles: a convolution on the HMX computes whole croutons and whole reduction steps
    (sim/htp.hmx_efficiency); a depthwise convolution or element-wise op on the HVX computes whole
    croutons of its output, a pool whole croutons of its input (sim/htp.crouton_efficiency; `spatial`
    is the tensor the op walks, sim/work.py). 16-bit values use the float16 crouton, 8-bit ones the
    int8 crouton."""
    height, width = work.spatial
    if not height or not width:
        return 1.0
    block = htp.block_int8 if work.precision is Precision.INT8 else htp.block_fp16
    if work.op_class is OpClass.CONV and work.gemm is not None:
        return hx.hmx_efficiency(height, width, work.channels, work.gemm[2], block, htp.depth_tile,
                                 work.group_depth)
    if work.op_class in (OpClass.DEPTHWISE, OpClass.POOL, OpClass.ELEMENTWISE):
        return hx.crouton_efficiency(height, width, work.channels, block, htp.depth_tile)
    return 1.0


def on_hvx(work: Work, rates: Rates) -> bool:
    """An HTP's depthwise convolution: its MACs run on the HVX vector unit (sim/htp.hvx_mac_rate)."""
    return rates.mech.htp is not None and work.op_class is OpClass.DEPTHWISE


def mac_rate(work: Work, rates: Rates) -> float:
    """The peak MACs/s the op's multiply-adds run at: the unit's MAC rate for its precision, or on an
    HTP's HVX, its element rate times the lane's MACs (sim/htp.hvx_mac_rate)."""
    if on_hvx(work, rates):
        return hx.hvx_mac_rate(_rate(rates.elem_per_s, work.precision, "element-op"), work.precision.value)
    return _rate(rates.macs_per_s, work.precision, "MAC")


def compute_seconds(work: Work, rates: Rates, threads: float | None = None) -> float:
    """MACs and element ops at the unit's peak for the precision, scaled by the op class's
    efficiency, the op's shape efficiency and the threads it runs on."""
    if work.precision not in rates.macs_per_s and work.precision not in rates.elem_per_s:
        # Even a pure data-movement op must not run in a precision the unit lacks: it would be
        # charged bytes only and hide a placement error.
        raise ValueError(f"the unit has no rates for {work.precision.value}")
    if not work.macs and not work.elem_ops:
        return 0.0
    eff = rates.efficiency.get(work.op_class, 1.0) * shape_efficiency(work, rates)
    eff *= parallelism(work, rates) if threads is None else threads
    seconds = 0.0
    if work.macs:
        seconds += work.macs / (mac_rate(work, rates) * eff)
    if work.elem_ops:
        seconds += work.elem_ops / (_rate(rates.elem_per_s, work.precision, "element-op") * eff)
    return seconds


def dram_bytes(work: Work, rates: Rates) -> int:
    """The op's bytes less the weights its unit keeps in on-chip memory (sim/mechanisms.sram_resident)
    and, on an HTP, less the activations its VTCM holds (sim/htp.vtcm_split)."""
    if rates.mech.htp is not None:
        return work_vtcm_split(work, rates.mech.htp)[0]
    return work.bytes - mx.sram_resident(work.weight_bytes, work.weights_before, rates.sram_bytes)


def work_vtcm_split(work: Work, htp: hx.Htp) -> tuple[int, int]:
    """(DRAM bytes, VTCM bytes) of an op on an HTP (sim/htp.vtcm_split over its activations and weights)."""
    weights = min(work.weight_bytes, work.bytes)
    return hx.vtcm_split(work.bytes - weights, work.edge_bytes, weights, htp.vtcm_bytes, work.streamed_bytes)


def memory_seconds(work: Work, rates: Rates, bandwidth: float | None = None) -> float:
    """DRAM bytes over the bandwidth the op gets, a cache-resident working set at cache speed; on
    an HTP, the bytes its VTCM holds at the VTCM's bandwidth."""
    bw = bandwidth or rates.bandwidth
    if rates.mech.htp is not None:
        dram, onchip = work_vtcm_split(work, rates.mech.htp)
        return hx.htp_memory_seconds(dram, onchip, bw, rates.mech.htp.vtcm_bandwidth)
    moved = dram_bytes(work, rates)
    if rates.mech.enabled:
        bw = mx.cache_bandwidth(moved, bw, rates.mech.cache_bytes, rates.mech.cache_bandwidth)
    return moved / bw


def im2col_seconds(work: Work, rates: Rates, bandwidth: float | None = None) -> float:
    """The patch copy a CPU convolution makes before its GEMM: a pass of its own on one thread, not
    overlapped: a fixed cost per row copied plus the bytes over the bandwidth."""
    mech = rates.mech
    if not (mech.enabled and mech.im2col and work.im2col_bytes):
        return 0.0
    bw = mx.cache_bandwidth(work.im2col_bytes, bandwidth or rates.bandwidth, mech.cache_bytes, mech.cache_bandwidth)
    return work.im2col_rows * mech.im2col_row_s + work.im2col_bytes / bw


def winograd_work(work: Work, rates: Rates) -> tuple[Work, int]:
    """The work a GPU really does for a convolution it runs as Winograd F(4x4, 3x3)
    (sim/mechanisms.winograd), and its kernel count; the op and one kernel otherwise."""
    mech = rates.mech
    if not (mech.enabled and mech.winograd_min_slices and work.winograd_tiles and work.gemm):
        return work, 1
    _, cout, depth = work.gemm
    plan = mx.winograd(work.winograd_tiles, depth // 9, cout, mech.winograd_min_slices, mech.winograd_min_tiles)
    if plan is None:
        return work, 1
    moved = plan.elements * LANE_BYTES[work.precision] // 2
    return replace(work, macs=plan.macs, items=plan.items, bytes_read=work.bytes_read + moved,
                   bytes_written=work.bytes_written + moved), plan.kernels


def op_cost(work: Work, rates: Rates, bandwidth: float | None = None) -> OpCost:
    """dispatch + max(compute, memory): compute and memory traffic overlap, as in Arm's Vela estimate.

    `bandwidth` overrides the unit's own when the caller knows the DRAM share it gets. A fused op
    (linked into its producer's kernel) pays no dispatch; an op on several threads pays a fork/join;
    a convolution the GPU runs as Winograd pays its three kernels and their transformed tensors."""
    work, kernels = winograd_work(work, rates)
    threads = parallelism(work, rates)
    compute = compute_seconds(work, rates, threads)
    memory = memory_seconds(work, rates, bandwidth)
    fixed = 0.0 if work.fused else rates.dispatch_s * kernels
    if rates.mech.enabled:
        fixed += mx.fork_join_seconds(threads, rates.mech.join_s) + im2col_seconds(work, rates, bandwidth)
    return OpCost(fixed + max(compute, memory), compute, memory, fixed, dram_bytes(work, rates))


def copy_seconds(nbytes: int, bandwidth: float, sync_s: float = 0.0, convert_per_s: float = 0.0) -> float:
    """A boundary crossing: a fixed sync latency, the bytes over the copy path, and any layout or
    dtype conversion pass over the same bytes (0 rate means no conversion)."""
    seconds = sync_s + nbytes / bandwidth
    if convert_per_s > 0:
        seconds += nbytes / convert_per_s
    return seconds


def padded_channels(channels: int, align: int) -> int:
    """Channels rounded up to the unit's slice width: the GPU stores 4 channels per slice (PHWC4)."""
    # Integer ceiling: float division would round wrong past 2**53 channels x elements.
    return channels if align <= 1 else -(-channels // align) * align
