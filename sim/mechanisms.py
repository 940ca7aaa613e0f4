"""Cost mechanisms real runtimes have beyond the roofline: each one small pure function with its source."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim.htp import Htp

__all__ = ["Mechanisms", "ruy_threads", "depthwise_threads", "row_split", "threads_used",
           "gemm_shape_efficiency", "lane_efficiency", "cache_bandwidth", "gpu_occupancy",
           "fork_join_seconds", "reduction_items", "sram_resident", "RUY_LOG2_MACS_PER_THREAD", "DEPTHWISE_MULS_PER_THREAD",
           "GPU_REDUCE_GROUP", "Winograd", "winograd", "WINOGRAD_POINTS"]

# ruy (TFLite's GEMM library since TF 2.3, ruy/ctx.cc `GetThreadCount`): the thread count grows by
# one power of two per 2**15 multiply-adds of the GEMM with each dimension rounded up to a power
# of two; a small GEMM stays on one thread.
RUY_LOG2_MACS_PER_THREAD = 15
# TFLite's optimized depthwise convolution (`HowManyConvThreads` in
# kernels/internal/optimized/depthwiseconv_multithread.h): one more thread per 8192 multiplies,
# then the work is split along output rows (or batches), so 7 rows over 4 threads is 2+2+2+1.
DEPTHWISE_MULS_PER_THREAD = 1 << 13


@dataclass(frozen=True)
class Mechanisms:
    """A unit's non-roofline cost parameters; `enabled` false (the default) is the plain roofline.

    join_s: fork/join cost of an op spread over more than one CPU thread (thread-pool wake-up and
    barrier). gemm_tile / gemm_depth_overhead: the GEMM micro-kernel's tile (rows x columns of the
    output computed at once; partial tiles cost a full one) and its fixed cost per tile, in units of
    depth (packing, accumulator load and store). vector_bytes: SIMD register width (depthwise work
    runs along channels, padded to whole vectors: 16 bytes hold 4 float32 or 16 int8 lanes). cache_bytes / cache_bandwidth:
    the last-level cache a working set can live in and its bandwidth. occupancy_items: parallel work
    items (output slices of 4 channels) needed to fill a GPU; smaller grids leave it partly idle.
    im2col: convolutions other than 1x1/stride 1 first copy their patches into a GEMM operand
    (TFLite's optimized CPU Conv), which moves bytes the roofline does not count; it runs on one
    thread, one memcpy per filter row and output pixel, each paying im2col_row_s besides its bytes.
    htp: a Hexagon NPU's tiles and VTCM (sim/htp.py); None on every other unit.
    winograd_min_slices / winograd_min_tiles: a GPU's Winograd F(4x4, 3x3) rule (0: never), the
    slices of 4 channels both sides of a 3x3 convolution and the 4x4 output tiles it needs."""

    enabled: bool = False
    join_s: float = 0.0
    gemm_tile: tuple[int, int] = (1, 1)
    gemm_depth_overhead: float = 0.0
    vector_bytes: int = 0
    cache_bytes: float = 0.0
    cache_bandwidth: float = 0.0
    occupancy_items: float = 0.0
    im2col: bool = False
    im2col_row_s: float = 0.0
    htp: Htp | None = None
    winograd_min_slices: int = 0
    winograd_min_tiles: int = 0


def _ceil_log2(n: int) -> int:
    return max(0, (max(1, int(n)) - 1).bit_length())


def ruy_threads(m: int, n: int, k: int, max_threads: int) -> int:
    """Threads ruy gives an m x n x k GEMM: 2**(ceil_log2 m + ceil_log2 n + ceil_log2 k - 15), capped."""
    guess = _ceil_log2(m) + _ceil_log2(n) + _ceil_log2(k) - RUY_LOG2_MACS_PER_THREAD
    return max(1, min(max_threads, 1 << max(0, min(guess, 30))))


def row_split(rows: int, threads: int) -> float:
    """Effective parallelism of `rows` equal work items split statically over `threads`: the op
    lasts as long as the thread with the most rows (7 rows on 4 threads run like 3.5 threads)."""
    if rows <= 0 or threads <= 1:
        return 1.0
    used = min(threads, rows)
    return rows / math.ceil(rows / used)


def depthwise_threads(muls: int, rows: int, max_threads: int) -> float:
    """TFLite's depthwise threading: one thread per 8192 multiplies, capped, rows split evenly."""
    wanted = max(1, min(max_threads, muls // DEPTHWISE_MULS_PER_THREAD))
    return row_split(rows, wanted)


def threads_used(gemm: tuple[int, int, int] | None, depthwise: bool, macs: int, rows: int,
                 max_threads: int) -> float:
    """Effective threads of one CPU op: ruy's rule for GEMM-shaped ops, TFLite's row split for
    depthwise convolutions, and a row split for the rest (element-wise kernels split their rows)."""
    if max_threads <= 1:
        return 1.0
    if gemm is not None:
        return float(ruy_threads(*gemm, max_threads))
    if depthwise:
        return depthwise_threads(macs, rows, max_threads)
    return row_split(rows, max_threads) if rows else float(max_threads)


def gemm_shape_efficiency(m: int, n: int, k: int, tile: tuple[int, int], depth_overhead: float) -> float:
    """Fraction of a GEMM kernel's peak an m x n x k product reaches: the output is computed in
    whole tiles (a 49 x 1001 output on 8 x 8 tiles computes 56 x 1008) and every tile pays a fixed
    cost worth `depth_overhead` steps of depth, so a shallow K (a 1x1 conv over 8 channels) runs
    far below peak. Source: ruy's kernel layout (8x8 float / int8 tiles on arm64 NEON)."""
    if m <= 0 or n <= 0 or k <= 0:
        return 1.0
    mr, nr = tile
    padded = math.ceil(m / mr) * mr * math.ceil(n / nr) * nr
    return (m * n / padded) * (k / (k + depth_overhead))


def lane_efficiency(channels: int, lanes: int) -> float:
    """Depthwise kernels vectorise along channels: 8 int8 channels fill half of a 16-lane vector."""
    if lanes <= 1 or channels <= 0:
        return 1.0
    return channels / (math.ceil(channels / lanes) * lanes)


def cache_bandwidth(working_set: int, dram_bandwidth: float, cache_bytes: float, cache_bw: float) -> float:
    """Bandwidth an op sees: a working set that fits the last-level cache streams at cache speed; a
    larger one gets the cached share at cache speed and the rest from DRAM (harmonic blend)."""
    if cache_bytes <= 0 or cache_bw <= dram_bandwidth or working_set <= 0:
        return dram_bandwidth
    hit = min(1.0, cache_bytes / working_set)
    return 1.0 / (hit / cache_bw + (1.0 - hit) / dram_bandwidth)


def gpu_occupancy(items: int, full: float) -> float:
    """Fraction of the GPU a grid of `items` work items keeps busy (one item per output slice of 4
    channels and pixel, as TFLite's GPU kernels map them): a 7x7x1024 output (12,544 items) fills
    less of it than a 112x112x32 one."""
    if full <= 0 or items <= 0:
        return 1.0
    return min(1.0, items / full)


# TFLite's GPU delegate runs a reduction (MEAN, SUM, ... and a global average pooling, which its
# graph transforms turn into MEAN: global_pooling_to_reduce_op.cc) with a work group of up to 256
# threads sharing each output (tasks/reduce.cc), not one thread per output.
GPU_REDUCE_GROUP = 256


def reduction_items(outputs: int, reduced: int, group: int = GPU_REDUCE_GROUP) -> int:
    """GPU work items of a reduction: a work group per output, a thread per reduced element up to
    the group's size (a 64x64x16 -> 1x1x16 mean keeps 4 x 256 threads busy, not 4)."""
    return max(0, outputs) * max(1, min(group, reduced))


def fork_join_seconds(threads: float, join_s: float) -> float:
    """Waking the thread pool and waiting at the barrier: paid once by every op run on >1 thread."""
    return join_s if threads > 1 else 0.0


def sram_resident(weight_bytes: int, weights_before: int, sram_bytes: float) -> int:
    """Bytes of an op's weights its unit holds in on-chip memory between inferences, read from
    there instead of DRAM: the model's weights fill the memory in plan order, and what does not
    fit streams from DRAM on every inference. Source: Coral's Edge TPU compiler documentation
    ("Parameter data caching": roughly 8 MB of SRAM caches the model's parameter data; parameters
    beyond it are fetched from external memory each inference, which costs latency)."""
    if sram_bytes <= 0 or weight_bytes <= 0:
        return 0
    return max(0, min(weight_bytes, int(sram_bytes) - weights_before))


# Winograd F(4x4, 3x3) as TFLite's GPU delegate runs it (selectors/operation_selector.cc,
# WinogradFromNode): three kernels, winograd_4x4_to_36 (each 6x6 input tile to 36 points, B^T d B),
# a batched 1x1 convolution over the 36 points (convolution_winograd_4x4_6x6), winograd_36_to_4x4
# (A^T m A back to a 4x4 output tile). flops_util.cc counts the middle kernel at a quarter of the
# direct convolution's flops: 36 products per tile instead of 16 x 9.
WINOGRAD_POINTS = 36
# The transforms are counted as dense matrix products (no credit for the zeros and ones of B and A).
WINOGRAD_INPUT_MACS = 2 * 6 * 6 * 6      # B^T d B: two 6x6 by 6x6 products per tile and input channel
WINOGRAD_OUTPUT_MACS = 4 * 6 * 6 + 4 * 6 * 4  # A^T m A: (4x6)(6x6) then (4x6)(6x4) per tile and output channel


@dataclass(frozen=True)
class Winograd:
    """What a convolution costs the GPU once it is run as Winograd F(4x4, 3x3): its multiply-adds
    (the 36-point products and both transforms), the elements of the two transformed tensors it
    writes and reads back, its work items (36 points x tiles x output slices) and its kernels."""

    macs: int
    elements: int
    items: int
    kernels: int = 3


def winograd(tiles: int, cin: int, cout: int, min_slices: int, min_tiles: int) -> Winograd | None:
    """The Winograd plan of a 3x3, stride-1, undilated convolution over `tiles` 4x4 output tiles,
    or None where the delegate keeps the direct kernel: it takes Winograd only when both sides have
    at least `min_slices` slices of 4 channels and the output at least `min_tiles` tiles
    (IsRecommendedForWinograd4x4To6x6: 32 slices and 128 tiles on Adreno 6xx, 16 and 32 on most
    other GPUs). 256 -> 256 channels at 56x56 then costs 3.7x fewer multiply-adds."""
    if min_slices <= 0 or tiles <= 0:
        return None
    if -(-cin // 4) < min_slices or -(-cout // 4) < min_slices or tiles < min_tiles:
        return None
    macs = tiles * (WINOGRAD_POINTS * cin * cout + WINOGRAD_INPUT_MACS * cin + WINOGRAD_OUTPUT_MACS * cout)
    elements = 2 * WINOGRAD_POINTS * tiles * (cin + cout)   # each transformed tensor written, then read
    return Winograd(macs, elements, WINOGRAD_POINTS * tiles * -(-cout // 4))
