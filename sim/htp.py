"""The Hexagon NPU's (HTP) cost mechanisms: HMX tiles in the crouton layout and VTCM residency, each a pure function."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FIRST_HTP", "Htp", "crouton_efficiency", "hmx_efficiency", "vtcm_split", "htp_memory_seconds", "vtcm_share",
           "weight_prefetch", "prefetch_room", "float_edge_seconds", "HVX_MACS_PER_LANE", "hvx_mac_rate",
           "HVX_REQUANT_OPS", "REQUANTIZING", "requant_scale"]

# The first Hexagon with a tensor processor (HTP) is v68 (Snapdragon 888); LiteRT's Qualcomm SoC table
# (litert/vendors/qualcomm/supported_soc.csv) lists SM8350 as v68, SM8550 v73, SM8650 v75, SM8750 v79.
FIRST_HTP = 68


@dataclass(frozen=True)
class Htp:
    """An HTP unit's mechanism parameters (a dsp unit's `mechanisms:` in the profile).

    depth_tile: channels per crouton and per step of the HMX's reduction (32). block_int8 /
    block_fp16: the crouton's rows x columns of an 8-bit / a 16-bit activation (8 x 8 and 8 x 4:
    both 2 KB with 32 channels). vtcm_bytes: the on-chip tightly coupled memory the graph may use;
    vtcm_bandwidth: bytes/s the HMX and HVX read and write it at (0: as fast as the compute, free).
    float_edge_bandwidth: bytes/s at which a float16 graph reads its float32 edges: its image before
    its first convolution, its outputs (float_edge_seconds; 0: free)."""

    depth_tile: int = 32
    block_int8: tuple[int, int] = (8, 8)
    block_fp16: tuple[int, int] = (8, 4)
    vtcm_bytes: float = 0.0
    vtcm_bandwidth: float = 0.0
    float_edge_bandwidth: float = 0.0


# Multiply-adds a depthwise filter retires per element-op slot of the HVX (the profile's `gelems`, which
# counts byte lanes for 8-bit values and 16-bit lanes for float16), by precision. The instruction set
# gives one a lane: vrmpy multiplies four 8-bit pairs into each 32-bit lane, 128 products a 1024-bit
# vector, and a float16 lane multiplies one pair (Hexagon V6x HVX Programmer's Reference: vrmpy; the
# qf16 vmpy of v68 and later). The 8-bit figure, 4, is assumed from AI Hub's rows, not derived: the
# S24's fit runs 8-bit depthwise at 2.2 TMAC/s (efficiency 0.53 of 4 x 1024 G), which one product a
# byte slot at the element rate the priors assume (4 contexts x 128 byte lanes x ~2 GHz) cannot
# reach; where the rest comes from (more multiply slots a packet, contexts or clock than assumed) is
# not published.
HVX_MACS_PER_LANE = {"int8": 4, "float16": 1}


def hvx_mac_rate(elem_per_s: float, precision: str) -> float:
    """MACs/s a depthwise convolution gets from the HVX vector unit, whose element rate the profile's
    `gelems` gives. The HMX is built for dot products down many channels (Qualcomm AI Runtime docs,
    "HTP network design recommendations: Avoid low depth activations"); a depthwise filter reduces
    over one channel's taps only, so the HTP is assumed to run it on its HVX (Qualcomm does not say
    which unit does). An 8-bit filter then runs at four times the element rate and a float16 one at
    the element rate (HVX_MACS_PER_LANE: the 4 is assumed from the rows): 8:1 with 64 float16 lanes
    against 128 8-bit ones, where the HMX's float16:int8 ratio would give 2-4:1."""
    return elem_per_s * HVX_MACS_PER_LANE.get(precision, 1)


# Element-op slots an 8-bit ADD, SUB or MUL takes per output on the HVX, where a plain 8-bit pass (a
# clamp, a copy) takes one. Its inputs each carry their own scale, so no output can add the bytes as
# they are: each input is widened to 16 and 32 bits, multiplied by its own fixed-point rescale, the
# two summed, shifted back, offset by the output's zero point, packed to bytes and clamped (LiteRT's
# integer ADD and MUL kernels, kernels/internal/reference/integer_ops/add.h and mul.h; XNNPACK's HVX
# kernel for the 8-bit add, src/qs8-vadd/hvx.c.in, takes about 26 vector instructions per 128 outputs
# where a plain pass takes 3-4: 4-9 plain passes, as the two arithmetic slots of an HVX packet pair
# them). The 4 is the low end of that range, and what the S24's and the 8 Elite Gen 5's fits give
# when it is fitted per phone (4.0 and 3.1); a float16 add adds its halves as they are.
HVX_REQUANT_OPS = 4
REQUANTIZING = frozenset({"ADD", "SUB", "MUL"})


def requant_scale(op: str, precision: str) -> float:
    """How many element-op slots an HVX op takes per output against a plain pass: HVX_REQUANT_OPS for
    an 8-bit ADD, SUB or MUL (it rescales each input), 1 for anything else and for float16."""
    return HVX_REQUANT_OPS if precision == "int8" and op in REQUANTIZING else 1.0


def _padded(n: int, tile: int) -> int:
    return -(-n // tile) * tile if tile > 1 else n


def crouton_efficiency(height: int, width: int, channels: int, block: tuple[int, int], depth: int) -> float:
    """Share of real values among the stored ones of an activation in the crouton layout: the HTP
    keeps an NHWC activation in blocks of rows x columns x 32 channels and computes whole blocks,
    so a 7x7x1000 output costs what 8x8x1024 costs. Source: the crouton layouts Apache TVM's
    Hexagon schedules use for the HTP (python/tvm/topi/hexagon/utils.py: "nhwc-8h8w32c" for
    uint8, "nhwc-8h2w32c2w" for float16, 8 x 4 x 32), and Qualcomm AI Engine Direct's HTP docs
    ("Tensors and Memory Layout": d32 and crouton layouts of the HTP core)."""
    if height <= 0 or width <= 0 or channels <= 0:
        return 1.0
    rows, cols = block
    stored = _padded(height, rows) * _padded(width, cols) * _padded(channels, depth)
    return height * width * channels / stored


def hmx_efficiency(height: int, width: int, channels: int, reduction: int, block: tuple[int, int],
                   depth: int, group_depth: int = 0) -> float:
    """Share of the HMX matrix unit a convolution keeps busy: its output in whole croutons
    (crouton_efficiency) and its reduction (the filter's kh x kw x input channels) in whole steps
    of 32, so a 1x1 convolution over 16 channels wastes half of every step. Source: as for
    crouton_efficiency; the reduction step is the crouton's depth (assumed: the HMX consumes one
    crouton depth of weights per step; Qualcomm publishes no HMX micro-architecture).
    A grouped convolution (group_depth input channels a group) reduces over each group alone: a
    group of 8 channels fills a quarter of a 32-channel step at every filter tap. Source:
    Qualcomm's QNN HTP docs ("HTP network design recommendations", "Number of channels": in a
    grouped convolution, have more channels in a group, up to the hardware's capacity of 32)."""
    out = crouton_efficiency(height, width, channels, block, depth)
    if reduction <= 0:
        return out
    if group_depth > 0 and reduction % group_depth == 0:
        return out * group_depth / _padded(group_depth, depth)
    return out * reduction / _padded(reduction, depth)


def vtcm_split(activation_bytes: int, edge_bytes: int, weight_bytes: int, vtcm_bytes: float,
               streamed_bytes: int = 0) -> tuple[int, int]:
    """(DRAM bytes, VTCM bytes) of one op inside a QNN graph: the graph's intermediate activations
    live in VTCM when the op's activations fit it, and spill to DRAM only by the share that does
    not fit; the graph's inputs and outputs (edge_bytes, shared buffers the CPU reads and writes)
    and the weights come from DRAM each inference. Source: Qualcomm AI Engine Direct's HTP docs
    (VTCM is the HTP's on-chip scratch memory its ops tile their tensors into; the QNN HTP
    backend's vtcm_mb option sets how much of it a graph gets) and the Hexagon SDK's VTCM
    manager (HAP_vtcm_mgr.h); that weights are not kept across inferences is assumed.

    streamed_bytes, the intermediates the op passes to or takes from the op next to it and to no
    other, never spill, however large: the two ops run band by band of rows, each band in VTCM, so
    the whole tensor never exists at once (depth-first tiling, as Arm's Vela cascades the ops of an
    Ethos-U graph in stripes to keep their feature maps in SRAM: ethos-u-vela, cascade_builder.py;
    that the HTP's graph preparation does the same is assumed: it is what lets AI Hub's UNet, with
    52 MB activations a layer, run at its convolutions' MAC rate). Only the tensors held across
    other ops (a skip connection, a tensor read twice) take the VTCM share that is left."""
    activation_bytes, edge_bytes = max(0, activation_bytes), max(0, edge_bytes)
    edge = min(edge_bytes, activation_bytes)
    inner = activation_bytes - edge
    if vtcm_bytes <= 0 or inner == 0:
        return activation_bytes + max(0, weight_bytes), 0
    streamed = min(max(0, streamed_bytes), inner)
    fits = min(1.0, vtcm_bytes / max(1, activation_bytes - streamed))
    onchip = streamed + int((inner - streamed) * fits)
    return activation_bytes - onchip + max(0, weight_bytes), onchip


def htp_memory_seconds(dram_bytes: int, vtcm_bytes: int, dram_bandwidth: float, vtcm_bandwidth: float) -> float:
    """Time the op's bytes take: DRAM bytes over the unit's DRAM share, VTCM bytes over the VTCM's
    bandwidth (free where the profile gives none: VTCM is read at the compute's pace)."""
    seconds = dram_bytes / dram_bandwidth
    if vtcm_bandwidth > 0:
        seconds += vtcm_bytes / vtcm_bandwidth
    return seconds


def vtcm_share(device_bytes: float, requested_mb: float) -> float:
    """The VTCM a graph gets: the QNN delegate's htp_vtcm_size in MB (0: the device's whole VTCM),
    never more than the device has. Source: QNN TFLite delegate options (QnnTFLiteDelegate.h,
    vtcm_size: "0 means the maximum available")."""
    if requested_mb <= 0:
        return device_bytes
    return min(device_bytes, requested_mb * (1 << 20))



def weight_prefetch(compute_s: float, memory_s: float, weight_s: float, banked_s: float,
                    room_s: float) -> tuple[float, float]:
    """(memory time left on the op's path, DMA time banked for the ops after it). The HTP's DMA engine
    moves the next ops' weights from DRAM into VTCM while the current op computes: weight time
    already fetched ahead (banked_s) comes off this op's memory time, and the time the op computes
    beyond its own memory traffic lets the DMA run further ahead, up to what VTCM has room for
    (room_s). Source: the Hexagon SDK's DMA engine for asynchronous DDR <-> VTCM transfers,
    double-buffered so transfers overlap computation (Hexagon SDK docs, "VTCM" and the user DMA)."""
    used = min(max(0.0, banked_s), max(0.0, weight_s), max(0.0, memory_s))
    memory = memory_s - used
    slack = max(0.0, compute_s - memory)
    return memory, min(max(0.0, room_s), banked_s - used + slack)


def prefetch_room(vtcm_bytes: float, dram_bandwidth: float) -> float:
    """Seconds of weight traffic VTCM can hold ahead: half of it (double buffering: the other half
    holds the running op's tensors; the half is assumed), at the DRAM bandwidth the DMA gets."""
    return 0.0 if vtcm_bytes <= 0 or dram_bandwidth <= 0 else vtcm_bytes / 2 / dram_bandwidth


def float_edge_seconds(edge_bytes: int, bandwidth: float) -> float:
    """Time an execute of a float16 QNN graph spends at its float32 edges: on the ops that work on its
    float32 image before its first convolution, and on its float32 outputs. Qualcomm's QNN HTP docs
    ("QNN HTP-FP16 Op Package": a float32 graph keeps its APP_WRITE and APP_READ tensors in float32 and
    the HTP computes in float16) leave the change of type and layout to the graph; the HTP's own layout
    holds 32 channels a crouton, and its design recommendations ("Number of channels"; "Use
    space-to-depth transformation") say that activations of few channels match the hardware poorly.
    The form is assumed from AI Hub's rows: each op between the image and the first convolution or
    fully connected op (a per-channel normalising SUB and MUL, a PAD, a depthwise filter) reads its
    float32 input bytes, each float32 output is read once in float16 as it leaves, and `edge_bytes`,
    their sum, take this rate; an element-wise op by one scalar and the ops from the first
    convolution on cost nothing here. So a 224x224 classifier that normalises and pads its 600 KB
    image pays three passes (about 0.3 ms beyond its int8 twin), MediaPipe's face landmark net, whose
    first op is a convolution and whose outputs are small, almost nothing (0.151 ms in all on the
    S24, 0.04 ms beyond its int8 twin), a low-resolution FFNet five passes over 6.3 MB (about 5 ms
    beyond its twin), and QuickSRNet Small its 3 MB float32 output (about 0.3 ms beyond what its MACs
    explain). An 8-bit graph's edges are QUANTIZE / DEQUANTIZE ops instead, costed as ops. The rate
    is fitted per phone."""
    return max(0, edge_bytes) / bandwidth if bandwidth > 0 else 0.0
