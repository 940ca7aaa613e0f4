"""The Hexagon NPU's mechanisms (sim/htp.py): crouton and HMX tiles, VTCM residency and the QNN delegate's
htp_vtcm_size, the fp16 / int8 rates, the ops a QNN graph runs inside a convolution. Each alone as a pure
function, then its effect on a simulated op or a tiny graph on a phone whose HTP has them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import yaml

from delegates.qnn import QnnDelegate, QnnOptions
from delegates.qnn_rewrites import htp_absorbed_nodes, htp_fused_nodes, htp_inplace_concats
from runtime.interpreter.api import Interpreter
from runtime.ir.errors import ProfileError
from runtime.ir.optypes import OpType
from runtime.ir.options import Activation, ConcatenationOptions, Padding
from runtime.zoo import layers as L
from runtime.zoo.builder import GraphBuilder
from sim import htp as hx
from sim.cost import OpClass, Precision, Rates, Work, compute_seconds, op_cost
from sim.mechanisms import Mechanisms
from sim.profile import PROFILE_DIR, load_profile, profile_from_dict
from sim.soc import SoC
from sim.trace import Kind
from sim.unit import Scales
from sim.work import describe
from tests.sim_kit import calibrated_int8

S24 = PROFILE_DIR / "priors" / "galaxy_s24.yaml"
PLAIN_HTP = Path(__file__).parent / "fixtures" / "profiles" / "htp_test.yaml"   # an HTP without mechanisms
MIB = 1 << 20


# -- each mechanism alone ------------------------------------------------------------------------


def test_a_crouton_is_computed_whole():
    assert hx.crouton_efficiency(8, 8, 32, (8, 8), 32) == 1.0
    assert hx.crouton_efficiency(7, 7, 1000, (8, 8), 32) == pytest.approx(7 * 7 * 1000 / (8 * 8 * 1024))
    # a float16 crouton is 8 x 4: an 8x4 output fills one, and half of an 8-bit crouton
    assert hx.crouton_efficiency(8, 4, 32, (8, 4), 32) == 1.0
    assert hx.crouton_efficiency(8, 4, 32, (8, 8), 32) == 0.5
    assert hx.crouton_efficiency(8, 8, 33, (8, 8), 32) == pytest.approx(33 / 64)


def test_the_hmx_takes_its_reduction_in_steps_of_32():
    assert hx.hmx_efficiency(8, 8, 32, 16, (8, 8), 32) == 0.5        # a 1x1 conv over 16 channels
    assert hx.hmx_efficiency(8, 8, 32, 576, (8, 8), 32) == 1.0       # 3x3 over 64
    assert hx.hmx_efficiency(8, 8, 32, 147, (8, 8), 32) == pytest.approx(147 / 160)   # 7x7 over 3
    assert hx.hmx_efficiency(8, 8, 16, 64, (8, 8), 32) == 0.5        # 16 output channels in a 32 one


def test_a_grouped_convolution_fills_32_channels_of_the_hmx_per_group():
    # 8 input channels a group (XLSR) fill a quarter of each step, however many taps the filter has
    assert hx.hmx_efficiency(8, 8, 32, 72, (8, 8), 32, group_depth=8) == 0.25
    assert hx.hmx_efficiency(8, 8, 32, 72, (8, 8), 32) == 0.75                        # read as one reduction
    assert hx.hmx_efficiency(8, 8, 32, 9 * 48, (8, 8), 32, group_depth=48) == 0.75    # RegNet's 48: 64
    assert hx.hmx_efficiency(8, 8, 32, 9 * 32, (8, 8), 32, group_depth=32) == 1.0     # ResNeXt's widest


def test_a_grouped_conv_2d_carries_its_group_depth_into_its_work():
    b = GraphBuilder("grouped")
    x = b.input("x", (1, 8, 8, 32))
    grouped = b.op(OpType.CONV_2D, [x, b.const("w", np.zeros((32, 3, 3, 8), np.float32)), -1])
    dense = b.op(OpType.CONV_2D, [grouped, b.const("v", np.zeros((32, 3, 3, 32), np.float32)), -1])
    graph = b.build([dense])
    shapes = [t.shape for t in graph.tensors]
    assert [describe(op, graph, shapes, Precision.INT8).group_depth for op in graph.ops] == [8, 0]
    # a unit that pads channels to 4 stores a 3-channel image 4 wide: its dense filter is still not grouped
    b = GraphBuilder("rgb")
    rgb = b.op(OpType.CONV_2D, [b.input("x", (1, 8, 8, 3)), b.const("w", np.zeros((8, 3, 3, 3), np.float32)), -1])
    graph = b.build([rgb])
    assert describe(graph.ops[0], graph, [t.shape for t in graph.tensors], Precision.FLOAT32, 4).group_depth == 0


def test_a_pool_is_tiled_by_the_input_it_walks_not_its_output():
    # an SE block's global average pool: a 16x16 input, a 1x1 output, one 8x8 crouton with one real pixel
    b = GraphBuilder("squeeze")
    x = b.input("x", (1, 16, 16, 32))
    pooled = L.global_avg_pool(b, x)
    conv = b.op(OpType.CONV_2D, [pooled, b.const("w", np.zeros((32, 1, 1, 32), np.float32)), -1])
    graph = b.build([conv])
    shapes = [t.shape for t in graph.tensors]
    pool, one = (describe(op, graph, shapes, Precision.INT8) for op in graph.ops)
    assert pool.spatial == (16, 16) and one.spatial == (1, 1)
    htp = _rates(hx.Htp())
    # its input fills whole croutons: the pool costs its element ops, not 64 times them
    assert compute_seconds(pool, htp) == pytest.approx(compute_seconds(pool, _rates(None)))


def test_vtcm_keeps_the_intermediates_that_fit_and_spills_the_rest():
    # 1000 activation bytes, 200 of them the partition's input or output, 50 of weights
    assert hx.vtcm_split(1000, 200, 50, 4096) == (250, 800)
    assert hx.vtcm_split(1000, 200, 50, 0) == (1050, 0)               # no VTCM: all from DRAM
    assert hx.vtcm_split(2000, 0, 0, 1000) == (1000, 1000)            # half fits: half spills
    assert hx.vtcm_split(2000, 0, 0, 500) == (1500, 500)
    assert hx.vtcm_split(100, 500, 0, 4096) == (100, 0)                # edge bytes never exceed the op's


def test_intermediates_streamed_between_neighbours_never_spill():
    # 10,000 activation bytes over 1,000 of VTCM, 8,000 of them passed to or from the op's neighbour:
    # those stay on chip, and the 2,000 held bytes take the VTCM there is (half of them fit)
    assert hx.vtcm_split(10_000, 0, 0, 1000, 8000) == (1000, 9000)
    assert hx.vtcm_split(10_000, 0, 0, 1000, 0) == (9000, 1000)          # none streamed: as before
    assert hx.vtcm_split(10_000, 0, 0, 1000, 10_000) == (0, 10_000)      # all of it streamed
    assert hx.vtcm_split(10_000, 2000, 0, 1000, 10_000) == (2000, 8000)  # the partition's edges still cross
    assert hx.vtcm_split(10_000, 0, 0, 0, 8000) == (10_000, 0)           # no VTCM: no streaming either


def test_vtcm_memory_time_and_share():
    assert hx.htp_memory_seconds(1000, 4000, 1e3, 4e3) == 2.0
    assert hx.htp_memory_seconds(1000, 4000, 1e3, 0.0) == 1.0          # no VTCM bandwidth given: free
    assert hx.vtcm_share(8 * MIB, 0) == 8 * MIB                        # 0: the device's whole VTCM
    assert hx.vtcm_share(8 * MIB, 2) == 2 * MIB
    assert hx.vtcm_share(8 * MIB, 64) == 8 * MIB                       # never more than it has


# -- on a simulated op ---------------------------------------------------------------------------------

_BYTES = {Precision.INT8: 1, Precision.FLOAT16: 2}


def _rates(htp: hx.Htp | None) -> Rates:
    table = {Precision.INT8: 1e12, Precision.FLOAT16: 5e11}
    return Rates(table, table, bandwidth=1e10, mech=Mechanisms(enabled=htp is not None, htp=htp))


def _conv(cout: int, precision: Precision = Precision.INT8, cin: int = 64, hw: int = 16, edge: int = 0) -> Work:
    """A 3x3 convolution's work on a hw x hw output."""
    size = _BYTES[precision]
    weights = 9 * cin * cout * size
    return Work("conv", OpClass.CONV, precision, macs=hw * hw * cout * 9 * cin,
                bytes_read=hw * hw * cin * size + weights, bytes_written=hw * hw * cout * size,
                gemm=(hw * hw, cout, 9 * cin), channels=cout, spatial=(hw, hw), weight_bytes=weights,
                edge_bytes=edge)


def test_16_output_channels_cost_what_32_cost_on_the_hmx():
    htp, plain = _rates(hx.Htp()), _rates(None)
    assert compute_seconds(_conv(16), htp) == pytest.approx(compute_seconds(_conv(32), htp))
    assert compute_seconds(_conv(16), plain) == pytest.approx(compute_seconds(_conv(32), plain) / 2)


def test_float16_runs_at_the_fp16_rate_in_its_own_crouton():
    htp = _rates(hx.Htp())
    # 16x16 outputs fill whole croutons either way: the time follows the rates, 2:1 here
    assert compute_seconds(_conv(32, Precision.FLOAT16), htp) == pytest.approx(2 * compute_seconds(_conv(32), htp))
    # a 4-wide output fills a float16 crouton but half of an 8-bit one
    narrow = dataclasses.replace(_conv(32), spatial=(16, 4), macs=16 * 4 * 32 * 9 * 64)
    assert compute_seconds(dataclasses.replace(narrow, precision=Precision.FLOAT16), htp) == pytest.approx(
        compute_seconds(narrow, htp))


def test_a_depthwise_filter_runs_on_the_hvx_at_four_macs_a_byte_lane():
    assert hx.hvx_mac_rate(1e9, "int8") == 4e9 and hx.hvx_mac_rate(1e9, "float16") == 1e9
    htp, plain = _rates(hx.Htp()), _rates(None)      # element rates 1e12 / 5e11, MAC rates the same
    dw = Work("dw", OpClass.DEPTHWISE, Precision.INT8, macs=16 * 16 * 32 * 9, bytes_read=16 * 16 * 32,
              bytes_written=16 * 16 * 32, channels=32, spatial=(16, 16))
    half = dataclasses.replace(dw, precision=Precision.FLOAT16)
    # on the HVX: 4 MACs per 8-bit lane, 1 per float16 lane, 8:1 where the MAC table says 2:1
    assert compute_seconds(dw, htp) == pytest.approx(dw.macs / 4e12)
    assert compute_seconds(half, htp) == pytest.approx(8 * compute_seconds(dw, htp))
    assert compute_seconds(half, plain) == pytest.approx(2 * compute_seconds(dw, plain))
    # a convolution stays on the HMX's MAC rate
    assert compute_seconds(_conv(32), htp) == pytest.approx(_conv(32).macs / 1e12)


def test_an_8_bit_add_rescales_its_inputs_in_several_hvx_slots_an_output():
    assert hx.requant_scale("ADD", "int8") == hx.HVX_REQUANT_OPS == hx.requant_scale("MUL", "int8")
    assert hx.requant_scale("ADD", "float16") == 1 and hx.requant_scale("RELU", "int8") == 1
    add = Work("ADD", OpClass.ELEMENTWISE, Precision.INT8, elem_ops=16 * 16 * 32, bytes_read=2 * 16 * 16 * 32,
               bytes_written=16 * 16 * 32, channels=32, spatial=(16, 16))
    relu = dataclasses.replace(add, op="RELU")
    htp = _rates(hx.Htp())
    assert compute_seconds(add, htp) == pytest.approx(hx.HVX_REQUANT_OPS * compute_seconds(relu, htp))
    # in float16 the same add is one pass at the float16 lanes' rate (half the 8-bit rate here)
    half = dataclasses.replace(add, precision=Precision.FLOAT16)
    assert compute_seconds(half, htp) == pytest.approx(2 * compute_seconds(relu, htp))
    # only an HTP's HVX rescales so: without the HTP's mechanisms an 8-bit add is one pass
    assert compute_seconds(add, _rates(None)) == pytest.approx(compute_seconds(relu, _rates(None)))


def test_an_htp_op_reads_its_intermediates_from_vtcm():
    work = _conv(64)
    in_vtcm = op_cost(work, _rates(hx.Htp(vtcm_bytes=8 * MIB)))
    assert in_vtcm.bytes == work.weight_bytes                          # activations stay on chip
    assert op_cost(work, _rates(hx.Htp())).bytes == work.bytes          # no VTCM: the roofline's bytes
    edged = op_cost(dataclasses.replace(work, edge_bytes=16 * 16 * 64), _rates(hx.Htp(vtcm_bytes=8 * MIB)))
    assert edged.bytes == work.weight_bytes + 16 * 16 * 64             # the partition's input comes from DRAM


def test_the_htp_vtcm_size_option_sets_the_vtcm_the_unit_uses():
    soc = SoC(load_profile(S24))
    dsp = soc.unit("dsp")
    big = _conv(256, cin=256, hw=64)            # 1 MiB in, 1 MiB out: fits 8 MB, not 1 MB
    assert dsp.cost(big, Scales(), None).bytes == big.weight_bytes
    assert dsp.cost(big, Scales(vtcm_mb=1), None).bytes > big.weight_bytes + MIB // 2
    delegate = QnnDelegate(QnnOptions(htp_vtcm_size=1), soc.profile)
    assert delegate.unit_scales(dsp).vtcm_mb == 1
    assert QnnDelegate(QnnOptions(), soc.profile).unit_scales(dsp) == Scales()


# -- the profile keys ------------------------------------------------------------------------------------


def test_the_galaxy_s24_prior_gives_its_htp_the_mechanisms():
    dsp = load_profile(S24).unit("dsp")
    assert dsp.mech.htp == hx.Htp(32, (8, 8), (8, 4), 8 * MIB, 384e9, 6e9)
    assert dsp.macs_per_s[Precision.FLOAT16] == dsp.macs_per_s[Precision.INT8] / 2


def test_htp_keys_on_a_dsp_without_an_htp_are_refused_by_name():
    data = yaml.safe_load((PROFILE_DIR / "pixel3.yaml").read_text())
    data["units"]["dsp"]["mechanisms"] = {"vtcm_mb": 8}
    with pytest.raises(ProfileError, match=r"units\.dsp\.mechanisms: the HTP mechanisms .* extras\.htp_arch >= 68"):
        profile_from_dict(data, "p.yaml")
    data["units"]["dsp"]["mechanisms"] = {"vtcm_kb": 8}
    with pytest.raises(ProfileError, match=r"units\.dsp\.mechanisms\.vtcm_kb: unknown key.*vtcm_mb"):
        profile_from_dict(data, "p.yaml")


def test_the_ops_on_a_float_image_pay_per_byte_they_read():
    assert hx.float_edge_seconds(600_000, 3e9) == pytest.approx(2e-4)
    assert hx.float_edge_seconds(1_200_000, 3e9) == pytest.approx(2 * hx.float_edge_seconds(600_000, 3e9))
    assert hx.float_edge_seconds(0, 3e9) == 0.0
    assert hx.float_edge_seconds(600_000, 0.0) == 0.0          # no rate in the profile: the mechanism is off


# -- one QNN graph: fused ops, and the effects on a tiny model --------------------------------------------


def _residual() -> tuple:
    """conv -> RELU -> conv -> ADD(residual): the RELU and the ADD follow convolutions."""
    b = GraphBuilder("residual", 0)
    x = b.input("input", (1, 8, 8, 32))
    a = L.conv(b, x, 32, 1, 1, name="c0")
    r = b.op(OpType.RELU, [a], None, "relu")
    c = L.conv(b, r, 32, 3, 1, name="c1")
    return b.build([b.op(OpType.ADD, [c, x], None, "add")])


def test_activations_and_adds_after_a_convolution_are_fused():
    graph = _residual()
    kinds = {i: op.type for i, op in enumerate(graph.ops)}
    fused = htp_fused_nodes(graph, range(len(graph.ops)))
    assert {kinds[i] for i in fused} == {OpType.RELU, OpType.ADD}
    assert htp_fused_nodes(graph, [i for i in kinds if kinds[i] is not OpType.CONV_2D]) == frozenset()


def _activations() -> tuple:
    """A convolution and a depthwise convolution, each followed by its own RELU6, then a RELU after
    another convolution (activations as ops of their own, not fused options)."""
    b = GraphBuilder("activations", 0)
    x = b.input("input", (1, 8, 8, 32))
    c = b.op(OpType.RELU6, [L.conv(b, x, 32, 1, 1, act=Activation.NONE, name="c0")], None, "conv_relu6")
    d = b.op(OpType.RELU6, [L.depthwise(b, c, act=Activation.NONE, name="d0")], None, "dw_relu6")
    return b.build([b.op(OpType.RELU, [L.conv(b, d, 32, 1, 1, act=Activation.NONE, name="c1")], None, "conv_relu")])


def test_the_hmx_absorbs_the_activations_qualcomm_documents_per_arithmetic():
    graph = _activations()
    names = {i: graph.tensors[op.outputs[0]].name for i, op in enumerate(graph.ops)}
    fused = htp_fused_nodes(graph, range(len(graph.ops)))
    assert {names[i] for i in fused} == {"conv_relu6", "dw_relu6", "conv_relu"}
    # float16: a clamp after a convolution, not a plain ReLU; nothing after a depthwise one (HVX)
    assert {names[i] for i in htp_absorbed_nodes(graph, fused)} == {"conv_relu6"}
    # int8: the plain ReLU too
    q = calibrated_int8(graph, seed=1, samples=2)
    qnames = {i: q.tensors[op.outputs[0]].name for i, op in enumerate(q.ops)}
    absorbed = htp_absorbed_nodes(q, htp_fused_nodes(q, range(len(q.ops))))
    assert {qnames[i] for i in absorbed} == {"conv_relu6", "conv_relu"}


def test_an_absorbed_activation_takes_no_time_only_where_the_htp_has_its_mechanisms():
    graph = calibrated_int8(_activations(), seed=1, samples=2)
    ops = _by_name(graph, _dsp_ops(graph, str(S24)))
    assert ops["conv_relu6"].end == ops["conv_relu6"].start and ops["conv_relu6"].bytes == 0
    assert ops["conv_relu"].end == ops["conv_relu"].start
    assert ops["dw_relu6"].end > ops["dw_relu6"].start          # an HVX pass over the depthwise output
    plain = _by_name(graph, _dsp_ops(graph, str(PLAIN_HTP)))
    assert plain["conv_relu6"].end > plain["conv_relu6"].start


def _by_name(graph, intervals) -> dict:
    """The DSP's op intervals by the name of the tensor each op writes."""
    return {graph.tensors[graph.ops[dict(iv.args)["node"]].outputs[0]].name: iv for iv in intervals}


def _dsp_ops(graph, device, **options) -> list:
    it = Interpreter(graph=graph, device=device, num_threads=4,
                     experimental_delegates=[QnnDelegate(QnnOptions(**options), load_profile(device))])
    it.allocate_tensors()
    rng = np.random.default_rng(0)
    for t in graph.inputs:
        tensor = graph.tensors[t]
        it.set_tensor(t, rng.integers(-5, 5, tensor.shape).astype(tensor.dtype.np))
    it.invoke()
    return [iv for iv in it.simulation.soc.trace.intervals if iv.lane == "dsp" and iv.kind is Kind.OP]


def test_fused_ops_pay_no_dispatch_only_where_the_htp_has_its_mechanisms():
    graph = _residual()
    fused = [iv for name, iv in _by_name(graph, _dsp_ops(graph, str(S24))).items() if name in ("relu", "add")]
    plain = [iv for name, iv in _by_name(graph, _dsp_ops(graph, str(PLAIN_HTP))).items() if name in ("relu", "add")]
    assert len(fused) == len(plain) == 2
    s24, generic = load_profile(S24).unit("dsp"), load_profile(PLAIN_HTP).unit("dsp")
    assert all(iv.end - iv.start < s24.dispatch_s for iv in fused)     # linked into the convolution
    assert all(iv.end - iv.start >= generic.dispatch_s for iv in plain)


def _wide(skip: bool = False) -> tuple:
    """Three 1x1 convolutions whose 96x96x64 intermediates (1.2 MB in float16) outgrow 1 MB of VTCM;
    with `skip`, the first one's output is also added to the second's, so it is held across an op."""
    b = GraphBuilder("wide", 0)
    x = b.input("input", (1, 96, 96, 8))
    first = L.conv(b, x, 64, 1, 1, name="c0")
    second = L.conv(b, first, 64, 1, 1, name="c1")
    if skip:
        second = b.op(OpType.ADD, [second, first], None, "skip")
    return b.build([L.conv(b, second, 8, 1, 1, name="c2")])


def _edges(graph, device) -> list:
    it = Interpreter(graph=graph, device=device, num_threads=4,
                     experimental_delegates=[QnnDelegate(QnnOptions(), load_profile(device))])
    it.allocate_tensors()
    it.invoke()
    return [iv for iv in it.simulation.soc.trace.intervals if iv.name.endswith("float edges")]


def _normalised(per_channel: bool = True) -> tuple:
    """A 32x32x3 float image normalised (SUB, MUL: by one value per channel, or by a scalar), padded,
    then convolved, and an ADD after the convolution: the ops of a classifier's first layer."""
    b = GraphBuilder("normalised", 0)
    x = b.input("image", (1, 32, 32, 3))
    shape = (1, 1, 1, 3) if per_channel else ()
    x = b.op(OpType.SUB, [x, b.const("mean", np.full(shape, 0.45, np.float32))])
    x = b.op(OpType.MUL, [x, b.const("scale", np.full(shape, 4.4, np.float32))])
    x = b.op(OpType.PAD, [x, b.const("pads", np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32))])
    x = L.conv(b, x, 32, 3, 1, padding=Padding.VALID, name="c0")
    x = b.op(OpType.ADD, [x, b.const("bias2", np.full((1, 1, 1, 32), 0.1, np.float32))])
    return b.build([x])


def test_a_float_graph_pays_for_each_op_on_its_float32_image_before_the_first_convolution():
    rate = load_profile(S24).unit("dsp").mech.htp.float_edge_bandwidth
    assert rate > 0
    image = 32 * 32 * 3 * 4                               # float32 bytes each op before the conv reads
    output = 32 * 32 * 32 * 2                             # the float32 output, read once in float16
    (edges,) = _edges(_normalised(), str(S24))            # SUB, MUL and PAD; not the ADD after the conv
    assert edges.end - edges.start == pytest.approx((3 * image + output) / rate)
    (scalar,) = _edges(_normalised(per_channel=False), str(S24))   # a scalar SUB and MUL read nothing here
    assert scalar.end - scalar.start == pytest.approx((image + output) / rate)
    (wide,) = _edges(_wide(), str(S24))                   # the first op is a convolution: the output alone
    assert wide.end - wide.start == pytest.approx(96 * 96 * 8 * 2 / rate)
    assert _edges(calibrated_int8(_normalised(), seed=1, samples=2), str(S24)) == []   # QUANTIZE first
    assert _edges(_normalised(), str(PLAIN_HTP)) == []    # an HTP without the mechanism


def test_a_smaller_vtcm_share_sends_held_intermediates_to_dram():
    graph = _wide(skip=True)
    whole = _dsp_ops(graph, str(S24))
    small = _dsp_ops(graph, str(S24), htp_vtcm_size=1)
    assert sum(iv.bytes for iv in small) > sum(iv.bytes for iv in whole) + MIB // 4
    assert sum(iv.end - iv.start for iv in small) > sum(iv.end - iv.start for iv in whole)


def test_a_chain_of_convolutions_runs_band_by_band_in_any_vtcm_share():
    chain = _wide()
    whole = _dsp_ops(chain, str(S24))
    small = _dsp_ops(chain, str(S24), htp_vtcm_size=1)
    assert [iv.bytes for iv in small] == [iv.bytes for iv in whole]   # each intermediate goes to its neighbour alone
    streamed = _by_name(chain, small)["c0"]
    held = _by_name(_wide(skip=True), _dsp_ops(_wide(skip=True), str(S24), htp_vtcm_size=1))["c0"]
    assert streamed.bytes == 96 * 96 * 8 * 2 + (64 * 8 + 64) * 2   # its input and weights, nothing of its output
    assert held.bytes > streamed.bytes + MIB // 8         # read by the next op and by the ADD after it: it spills
    skip = _by_name(_wide(skip=True), _dsp_ops(_wide(skip=True), str(S24), htp_vtcm_size=1))["skip"]
    assert skip.bytes > MIB // 16                         # the ADD linked into c1 reads that held tensor back


def test_a_concatenation_of_whole_croutons_is_written_in_place():
    b = GraphBuilder("concat", 0)
    x = b.input("input", (1, 16, 16, 8))
    left, right, odd = L.conv(b, x, 64, 1, 1, name="l"), L.conv(b, x, 32, 1, 1, name="r"), L.conv(b, x, 24, 1, 1, name="o")
    aligned = b.op(OpType.CONCATENATION, [left, right], ConcatenationOptions(axis=3), "aligned")
    shifted = b.op(OpType.CONCATENATION, [odd, L.conv(b, x, 32, 1, 1, name="p")], ConcatenationOptions(axis=-1), "shifted")
    graph = b.build([aligned, shifted])
    names = {graph.tensors[graph.ops[i].outputs[0]].name for i in htp_inplace_concats(graph, range(len(graph.ops)))}
    assert names == {"aligned"}                         # 24 channels before the second input: not a crouton boundary
    assert htp_inplace_concats(graph, [i for i, op in enumerate(graph.ops) if op.type is OpType.CONCATENATION]) == frozenset()
    ops = _by_name(graph, _dsp_ops(graph, str(S24)))
    assert ops["aligned"].end == ops["aligned"].start and ops["aligned"].bytes == 0
    assert ops["shifted"].end > ops["shifted"].start    # a copy across croutons
    plain = _by_name(graph, _dsp_ops(graph, str(PLAIN_HTP)))
    assert plain["aligned"].end > plain["aligned"].start


def test_a_float_model_takes_longer_on_the_htp_than_its_int8_twin():
    graph = _wide()
    as_float = _dsp_ops(graph, str(S24))
    as_int8 = _dsp_ops(calibrated_int8(graph, seed=1, samples=2), str(S24))
    assert {dict(iv.args)["precision"] for iv in as_float} == {"float16"}
    assert {dict(iv.args)["precision"] for iv in as_int8} == {"int8"}
    ratio = sum(iv.end - iv.start for iv in as_float) / sum(iv.end - iv.start for iv in as_int8)
    assert 1.5 < ratio <= 2.0 + 1e-9     # half the MAC rate, twice the bytes


# -- the DMA fetches weights ahead ---------------------------------------------------------------------


def test_weights_fetched_while_the_op_before_computes_come_off_the_memory_time():
    # an op computing 5 s with 1 s of memory traffic banks 4 s of DMA time, capped by VTCM's room
    assert hx.weight_prefetch(5.0, 1.0, 1.0, 0.0, 10.0) == (1.0, 4.0)
    assert hx.weight_prefetch(5.0, 1.0, 1.0, 0.0, 3.0) == (1.0, 3.0)
    # the next op, weight-bound (3 s of weights in 3.5 s of memory), finds 3 s fetched already
    assert hx.weight_prefetch(0.5, 3.5, 3.0, 4.0, 10.0) == (0.5, 1.0)
    # only weights are fetched ahead: activation traffic stays on the op's path
    assert hx.weight_prefetch(0.0, 3.5, 1.0, 4.0, 10.0) == (2.5, 3.0)
    assert hx.prefetch_room(8 * MIB, 4 * MIB) == 1.0            # half of VTCM at the DMA's bandwidth
    assert hx.prefetch_room(0, 4 * MIB) == 0.0


def test_on_the_htp_a_weight_bound_op_after_a_compute_bound_one_runs_sooner():
    soc = SoC(load_profile(S24))
    dsp, plain = soc.unit("dsp"), SoC(load_profile(PLAIN_HTP)).unit("dsp")
    heavy = _conv(256, cin=256, hw=64)                                      # compute-bound
    weights = dataclasses.replace(_conv(512, cin=512, hw=2), spatial=(2, 2))  # 2.4 MB of weights, little compute
    bw = soc.profile.unit("dsp").bandwidth
    light = dsp.cost(weights, Scales(), bw)
    assert light.memory_s > light.compute_s
    dsp.begin_graph()
    alone = dsp.seconds(light, weights, Scales(), bw, 1)
    dsp.begin_graph()
    dsp.seconds(dsp.cost(heavy, Scales(), bw), heavy, Scales(), bw, 1)
    after = dsp.seconds(light, weights, Scales(), bw, 1)
    assert alone == light.seconds and after < alone
    # a DSP without the HTP's mechanisms fetches nothing ahead
    cost = plain.cost(weights, Scales(), bw)
    plain.seconds(plain.cost(heavy, Scales(), bw), heavy, Scales(), bw, 1)
    assert plain.seconds(cost, weights, Scales(), bw, 1) == cost.seconds


# -- what a calibration fits ------------------------------------------------------------------------------


def test_an_htp_fits_its_float16_rate_call_costs_vector_efficiencies_and_bandwidths_a_v6x_dsp_does_not():
    from runtime.calibration.fit import candidate_params

    htp = [p.name for p in candidate_params(yaml.safe_load(S24.read_text()), {"dsp"})]
    v6x = [p.name for p in candidate_params(yaml.safe_load((PROFILE_DIR / "priors" / "pixel3.yaml").read_text()),
                                            {"dsp"})]
    extra = ["units.dsp.gmacs.float16", "units.dsp.gmacs.int8", "units.dsp.invoke_us",
             "units.dsp.mechanisms.vtcm_gbs", "units.dsp.mechanisms.float_edge_gbs",
             "units.dsp.efficiency.transcendental", "units.dsp.efficiency.pool", "units.dsp.bandwidth_gbs",
             "copy.sync_us", "copy.bandwidth_gbs"]    # the crossing's cost: AI Hub's rows bound it
    assert htp == v6x + extra and not set(extra) & set(v6x)
