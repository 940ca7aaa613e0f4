"""Dynamic-range ("hybrid") kernels and sparse weights against LiteRT.

Tolerance. The issue asks dynamic-range models to match LiteRT within the tolerance LiteRT's own
kernels show against each other, so every comparison below runs the same models and inputs
through BUILTIN_REF and BUILTIN_WITHOUT_DEFAULT_DELEGATES, takes the largest gap between the two
(as a fraction of the reference output's range) as the yardstick, and allows our outputs that
gap from BUILTIN_REF, but never less than YARDSTICK_FLOOR. Measured when this was written
(ai-edge-litert 2.3.0, x86-64): on the generated single-op models the two resolvers differ by up
to 1.6e-7 x range (per-channel CONV_2D / DEPTHWISE_CONV_2D) and agree exactly on FULLY_CONNECTED,
TRANSPOSE_CONV and UNIDIRECTIONAL_SEQUENCE_LSTM, which run the same code under both; the floor, 2.5e-7 x range
(about two float32 roundings of the largest output), keeps those families meaningful. On the
converter-made fixtures they differ by up to 1.4e-7 x range, except mobilenet_v1_dynamic, 4.2e-2:
there the optimised float kernels upstream of a hybrid conv move one activation across a rounding
boundary of the per-image input quantization, a whole quantization step. Ours: bit-exact with
BUILTIN_REF on every generated model (asserted separately), within 1.5e-7 x range on the fixtures,
whose float ops (MEAN, SOFTMAX) are not bit-exact (float CONV_2D and FULLY_CONNECTED sum in
LiteRT's reference order there, see runtime/ops/ordered.py); the fixture LSTM's own
output was bit-exact too.

Why bit-exact is possible: LiteRT's x86 wheels quantize inputs with the NEON routines (through
NEON_2_SSE), so runtime/ops/hybrid.py reproduces their float32 range, truncating rounding and
scale arithmetic, and runtime/ops/hybrid_lstm.py the hybrid LSTM's Eigen tanh/logistic (packet vs
scalar paths by alignment) and glibc expf; test_neon_rounding_ties pins the rounding on inputs where
the portable C code would round differently.

Sparse fixtures (tests/fixtures/sparse, made by make_sparse_fixtures.py) hold only float ops,
whose BLAS sums are not bit-exact, so they use the float parity tolerance of
test_litert_parity.py (1e-5 x range); measured: at most 1.6e-7 x range.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from runtime.ir.errors import ModelError
from runtime.ir.graph import DType, Graph, Op, QuantParams, Tensor
from runtime.interpreter.api import Interpreter
from runtime.ops import HYBRID_KERNELS, hybrid, select_kernel
from runtime.ir.optypes import OpType
from runtime.ir.options import (Activation, Conv2DOptions, DepthwiseConv2DOptions, FullyConnectedOptions, Padding,
                             TransposeConvOptions, UnidirectionalSequenceLSTMOptions)
from runtime.model.tflite_write import save
from tests.conftest import FIXTURES
from tests.litert_oracle import available, run_litert, seeded_inputs

pytestmark = pytest.mark.skipif(not available(), reason="LiteRT (ai-edge-litert) is not installed")

YARDSTICK_FLOOR = 2.5e-7
FLOAT_REL_TOL = 1e-5
CASES = 10
INVOKES = 2
REF, OPT = "BUILTIN_REF", "BUILTIN_WITHOUT_DEFAULT_DELEGATES"
F32 = np.float32


def qt(name, shape, dtype, scale, zp=0, data=None, axis=0):
    scale = tuple(float(s) for s in np.atleast_1d(scale))
    zp = tuple(int(z) for z in np.broadcast_to(np.atleast_1d(zp), (len(scale),)))
    return Tensor(name, tuple(shape), dtype, QuantParams(scale, zp, axis), data)


def w8(rng, shape):
    return rng.integers(-127, 128, shape).astype(np.int8)


def fvec(rng, n, scale=1.0):
    return (rng.standard_normal(n) * scale).astype(F32)


# -- generated single-op models -----------------------------------------------------------------

def fully_connected(rng, per_channel: bool, asymmetric: bool) -> Graph:
    depth, units = int(rng.integers(1, 700)), int(rng.integers(1, 12))
    keep = bool(rng.integers(0, 2))
    x_shape = (2, int(rng.integers(1, 4)), depth) if keep else (int(rng.integers(1, 4)), depth)
    y_shape = x_shape[:-1] + (units,) if keep else (x_shape[0], units)
    w = qt("w", (units, depth), DType.INT8, rng.uniform(5e-4, 5e-3, units if per_channel else 1), 0,
           w8(rng, (units, depth)))
    act = Activation([0, 1, 3][int(rng.integers(0, 3))])
    opts = FullyConnectedOptions(act, keep_num_dims=keep, asymmetric_quantize_inputs=asymmetric)
    tensors = (Tensor("x", x_shape, DType.FLOAT32), w, Tensor("b", (units,), DType.FLOAT32, data=fvec(rng, units)),
               Tensor("y", y_shape, DType.FLOAT32))
    return Graph(tensors, (Op(OpType.FULLY_CONNECTED, (0, 1, 2), (3,), opts, version=9),), (0,), (3,))


def convolution(rng, depthwise: bool, per_channel: bool) -> Graph:
    n, h, wd, cin = (int(v) for v in (rng.integers(1, 3), rng.integers(3, 10), rng.integers(3, 10), rng.integers(1, 6)))
    k, stride = int(rng.integers(1, 4)), int(rng.integers(1, 3))
    dilation = int(rng.integers(1, 3)) if stride == 1 and k > 1 else 1
    pad = Padding(int(rng.integers(0, 2)))
    eff = (k - 1) * dilation + 1
    if pad is Padding.VALID and (h < eff or wd < eff):
        pad = Padding.SAME
    act = Activation([0, 1, 3][int(rng.integers(0, 3))])
    mult = int(rng.integers(1, 3)) if depthwise else 1
    cout = cin * mult if depthwise else int(rng.integers(1, 6))
    scales = rng.uniform(1e-3, 2e-2, cout) if per_channel else np.full(cout, 0.01)
    if depthwise:
        w = qt("w", (1, k, k, cout), DType.INT8, scales, 0, w8(rng, (1, k, k, cout)), axis=3)
        opts, op = DepthwiseConv2DOptions(pad, stride, stride, mult, act, dilation, dilation), OpType.DEPTHWISE_CONV_2D
    else:
        w = qt("w", (cout, k, k, cin), DType.INT8, scales, 0, w8(rng, (cout, k, k, cin)))
        opts, op = Conv2DOptions(pad, stride, stride, act, dilation, dilation), OpType.CONV_2D
    oh = -(-h // stride) if pad is Padding.SAME else (h - eff) // stride + 1
    ow = -(-wd // stride) if pad is Padding.SAME else (wd - eff) // stride + 1
    bias = Tensor("b", (cout,), DType.FLOAT32, data=fvec(rng, cout))
    tensors = (Tensor("x", (n, h, wd, cin), DType.FLOAT32), w, bias, Tensor("y", (n, oh, ow, cout), DType.FLOAT32))
    return Graph(tensors, (Op(op, (0, 1, 2), (3,), opts, version=6 if depthwise else 5),), (0,), (3,))


def transpose_conv(rng, per_channel: bool) -> Graph:
    n, h, wd, cin, cout, k = (int(v) for v in (rng.integers(1, 3), rng.integers(2, 7), rng.integers(2, 7),
                                               rng.integers(1, 5), rng.integers(1, 5), rng.integers(1, 4)))
    stride, pad = int(rng.integers(1, 3)), Padding(int(rng.integers(0, 2)))
    oh = h * stride if pad is Padding.SAME else (h - 1) * stride + k
    ow = wd * stride if pad is Padding.SAME else (wd - 1) * stride + k
    scales = rng.uniform(1e-3, 2e-2, cout) if per_channel else np.full(cout, 0.01)
    act = Activation([0, 1, 3][int(rng.integers(0, 3))])
    tensors = (Tensor("shape", (4,), DType.INT32, data=np.array([n, oh, ow, cout], np.int32)),
               qt("w", (cout, k, k, cin), DType.INT8, scales, 0, w8(rng, (cout, k, k, cin))),
               Tensor("x", (n, h, wd, cin), DType.FLOAT32), Tensor("b", (cout,), DType.FLOAT32, data=fvec(rng, cout)),
               Tensor("y", (n, oh, ow, cout), DType.FLOAT32))
    op = Op(OpType.TRANSPOSE_CONV, (0, 1, 2, 3), (4,), TransposeConvOptions(pad, stride, stride, act), version=4)
    return Graph(tensors, (op,), (2,), (4,))


def lstm(rng, asymmetric=True, peephole=False, projection=False, norm=False, time_major=False, clip=0.0,
         batch=2) -> Graph:
    n_in, n_cell, steps = int(rng.integers(3, 20)), int(rng.integers(4, 24)), 5
    n_out = int(rng.integers(3, 12)) if projection else n_cell
    tensors, ins = [], [-1] * 24

    def add(t):
        tensors.append(t)
        return len(tensors) - 1

    def weights(name, shape):
        return add(qt(name, shape, DType.INT8, rng.uniform(2e-3, 2e-2), 0, w8(rng, shape)))

    ins[0] = add(Tensor("x", (steps, batch, n_in) if time_major else (batch, steps, n_in), DType.FLOAT32))
    for k, g in enumerate("ifco"):
        ins[1 + k] = weights(f"w_x{g}", (n_cell, n_in))
        ins[5 + k] = weights(f"w_h{g}", (n_cell, n_out))
        ins[12 + k] = add(Tensor(f"b_{g}", (n_cell,), DType.FLOAT32, data=fvec(rng, n_cell, 0.5)))
        if norm:
            coeff = rng.uniform(0.5, 1.5, n_cell).astype(F32)
            ins[20 + k] = add(Tensor(f"ln_{g}", (n_cell,), DType.FLOAT32, data=coeff))
    if peephole:
        for k, g in enumerate("ifo"):
            ins[9 + k] = weights(f"peep_{g}", (n_cell,))
    if projection:
        ins[16] = weights("proj_w", (n_out, n_cell))
        ins[17] = add(Tensor("proj_b", (n_out,), DType.FLOAT32, data=fvec(rng, n_out, 0.1)))
    ins[18] = add(Tensor("h", (batch, n_out), DType.FLOAT32, is_variable=True))
    ins[19] = add(Tensor("c", (batch, n_cell), DType.FLOAT32, is_variable=True))
    y = add(Tensor("y", (steps, batch, n_out) if time_major else (batch, steps, n_out), DType.FLOAT32))
    while ins[-1] == -1:
        ins.pop()
    opts = UnidirectionalSequenceLSTMOptions(Activation.TANH, clip, 0.0, time_major, asymmetric)
    return Graph(tuple(tensors), (Op(OpType.UNIDIRECTIONAL_SEQUENCE_LSTM, tuple(ins), (y,), opts, version=3),),
                 (0,), (y,))


MAKERS = {
    "fc_per_tensor_symmetric": lambda rng: fully_connected(rng, False, False),
    "fc_per_tensor_asymmetric": lambda rng: fully_connected(rng, False, True),
    "fc_per_channel_symmetric": lambda rng: fully_connected(rng, True, False),
    "fc_per_channel_asymmetric": lambda rng: fully_connected(rng, True, True),
    "conv_per_channel": lambda rng: convolution(rng, False, True),
    "conv_equal_scales": lambda rng: convolution(rng, False, False),
    "depthwise_per_channel": lambda rng: convolution(rng, True, True),
    "depthwise_equal_scales": lambda rng: convolution(rng, True, False),
    "transpose_conv_per_channel": lambda rng: transpose_conv(rng, True),
    "transpose_conv_equal_scales": lambda rng: transpose_conv(rng, False),
    "lstm_asymmetric": lambda rng: lstm(rng),
    "lstm_symmetric": lambda rng: lstm(rng, asymmetric=False),
    "lstm_peephole_clip": lambda rng: lstm(rng, peephole=True, clip=0.5),
    "lstm_projection": lambda rng: lstm(rng, projection=True),
    "lstm_layer_norm": lambda rng: lstm(rng, norm=True, batch=3),
    "lstm_time_major": lambda rng: lstm(rng, time_major=True, batch=3),
    "lstm_everything": lambda rng: lstm(rng, peephole=True, projection=True, norm=True, clip=1.0),
}


def _span(ref: np.ndarray) -> float:
    return max(float(ref.max() - ref.min()), 1e-3) if ref.size else 1.0


def _ours(path, feeds, invokes=INVOKES):
    it = Interpreter(model_path=path)
    it.allocate_tensors()
    outs = {}
    for run in range(invokes):
        for index, value in feeds.items():
            it.set_tensor(index, value)
        it.invoke()
        for d in it.get_output_details():
            outs[f"{run}:{d['index']}"] = it.get_tensor(d["index"])
    return outs


def _compare(jobs, invokes=INVOKES):
    """(ours, reference, optimised) outputs per job; LiteRT failures fail the test."""
    ref = run_litert(jobs, resolvers=(REF,), invokes=invokes)
    opt = run_litert(jobs, resolvers=(OPT,), invokes=invokes)
    rows = []
    for (path, feeds), r, o in zip(jobs, ref, opt):
        assert not isinstance(r, str), f"{os.path.basename(path)}: {r}"
        assert not isinstance(o, str), f"{os.path.basename(path)}: {o}"
        assert str(r["resolver"]) == REF
        rows.append((path, _ours(path, feeds, invokes), r, o))
    return rows


def _gap(a, b, keys) -> float:
    return max(float(np.abs(a[k].astype(np.float64) - b[k]).max()) / _span(b[k]) for k in keys)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hybrid")
    jobs, names = [], []
    for name, make in MAKERS.items():
        for seed in range(CASES):
            rng = np.random.default_rng(seed)
            g = make(rng)
            path = str(tmp / f"{name}_{seed}.tflite")
            save(g, path)
            x = g.tensors[g.inputs[0]]
            jobs.append((path, {g.inputs[0]: (rng.standard_normal(x.shape) * 3).astype(F32)}))
            names.append(name)
    return names, _compare(jobs)


def test_generated_models_select_the_hybrid_kernels(generated):
    for path, *_ in generated[1]:
        g = Interpreter(model_path=path).graph
        assert select_kernel(g.ops[0], g) is HYBRID_KERNELS[g.ops[0].type], path


@pytest.mark.parametrize("family", sorted(MAKERS))
def test_generated_models_within_litert_yardstick(generated, family):
    names, rows = generated
    rows = [row for name, row in zip(names, rows) if name == family]
    keys = [k for k in rows[0][2] if k != "resolver"]
    yardstick = max(_gap(o, r, keys) for _, _, r, o in rows)
    tolerance = max(yardstick, YARDSTICK_FLOOR)
    for path, ours, r, _ in rows:
        err = _gap(ours, r, keys)
        assert err <= tolerance, f"{os.path.basename(path)}: error {err:.3g} x range > {tolerance:.3g}"


@pytest.mark.parametrize("family", sorted(MAKERS))
def test_generated_models_bit_exact_with_reference_resolver(generated, family):
    """Stronger than the issue asks: the kernels reproduce LiteRT's arithmetic step for step."""
    names, rows = generated
    for name, (path, ours, r, _) in zip(names, rows):
        if name == family:
            for key in ours:
                np.testing.assert_array_equal(ours[key], r[key], err_msg=f"{os.path.basename(path)} {key}")


# -- targeted cases -----------------------------------------------------------------------------

def _fc_graph(x_shape, w, asymmetric, scales=0.01, bias=None, act=Activation.NONE):
    units = w.shape[0]
    tensors = [Tensor("x", x_shape, DType.FLOAT32), qt("w", w.shape, DType.INT8, scales, 0, w),
               Tensor("y", (x_shape[0], units), DType.FLOAT32)]
    inputs = (0, 1)
    if bias is not None:
        tensors.insert(2, Tensor("b", (units,), DType.FLOAT32, data=bias))
        inputs = (0, 1, 2)
    opts = FullyConnectedOptions(act, asymmetric_quantize_inputs=asymmetric)
    return Graph(tuple(tensors), (Op(OpType.FULLY_CONNECTED, inputs, (len(tensors) - 1,), opts, version=9),),
                 (0,), (len(tensors) - 1,))


@pytest.mark.parametrize("asymmetric", [False, True])
def test_neon_rounding_ties(tmp_path, asymmetric):
    """0.5 - 2**-25 times a scale of exactly 1 (R = 127) rounds to 1 on the first 8 elements, where
    LiteRT's NEON quantizer truncates x + 0.5 in float32, and to 0 on the tail, where it calls
    std::round: the portable C code would give 0 for both."""
    below = np.nextafter(F32(0.5), F32(0))
    row = np.array([127, below, -below, 2.5, -2.5, 1.5, below + 1, 3 * below, 5, 6, 7, below, -below, below], F32)
    if not asymmetric:
        q, _ = hybrid.quantize_symmetric(row[None])
        assert q[0, 1] == 1 and q[0, 11] == 0
    x = np.stack([row, -row])
    g = _fc_graph(x.shape, w8(np.random.default_rng(0), (5, row.size)), asymmetric)
    path = str(tmp_path / "ties.tflite")
    save(g, path)
    ((_, ours, r, _),) = _compare([(path, {0: x})], invokes=1)
    np.testing.assert_array_equal(ours["0:2"], r["0:2"])


def test_all_zero_input_gives_the_bias(tmp_path):
    bias = fvec(np.random.default_rng(1), 4)
    g = _fc_graph((3, 16), w8(np.random.default_rng(2), (4, 16)), True, bias=bias, act=Activation.RELU)
    path = str(tmp_path / "zeros.tflite")
    save(g, path)
    ((_, ours, r, _),) = _compare([(path, {0: np.zeros((3, 16), F32)})], invokes=1)
    np.testing.assert_array_equal(ours["0:3"], np.tile(np.maximum(bias, 0), (3, 1)))
    np.testing.assert_array_equal(ours["0:3"], r["0:3"])


def _run_graph(g: Graph) -> None:
    it = Interpreter(graph=g)
    it.allocate_tensors()
    it.invoke()


def test_hybrid_weights_must_be_symmetric_int8():
    w = w8(np.random.default_rng(0), (3, 8))
    x, _, y = _fc_graph((1, 8), w, False).tensors
    op = _fc_graph((1, 8), w, False).ops

    shifted = Graph((x, qt("w", w.shape, DType.INT8, 0.01, 3, w), y), op, (0,), (2,))
    with pytest.raises(ModelError, match=r"op #0 FULLY_CONNECTED: int8 weights 'w' have a non-zero zero point"):
        _run_graph(shifted)
    unsigned = Graph((x, qt("w", w.shape, DType.UINT8, 0.01, 0, w.view(np.uint8)), y), op, (0,), (2,))
    with pytest.raises(ModelError, match=r"op #0 FULLY_CONNECTED: UINT8 weights 'w' with float input"):
        _run_graph(unsigned)


# -- converter-made dynamic-range fixtures --------------------------------------------------------

DYNAMIC = sorted((FIXTURES / "quant").glob("*_dynamic.tflite"))


@pytest.fixture(scope="module")
def dynamic_runs():
    jobs = []
    for path in DYNAMIC:
        details = Interpreter(model_path=path).get_input_details()
        jobs.append((str(path), seeded_inputs(details, seed=len(path.name))))
    return dict(zip(DYNAMIC, _compare(jobs))) if jobs else {}


@pytest.mark.skipif(not DYNAMIC, reason="no tests/fixtures/quant/*_dynamic.tflite fixtures yet")
@pytest.mark.parametrize("path", DYNAMIC, ids=[p.stem for p in DYNAMIC])
def test_dynamic_range_fixture_within_litert_yardstick(path, dynamic_runs):
    if not path.exists():
        pytest.skip(f"{path.name} disappeared (fixtures being regenerated)")
    _, ours, r, o = dynamic_runs[path]
    keys = [k for k in r if k != "resolver"]
    tolerance = max(_gap(o, r, keys), YARDSTICK_FLOOR)
    err = _gap(ours, r, keys)
    assert err <= tolerance, f"{path.name}: error {err:.3g} x range > yardstick {tolerance:.3g}"


def test_dynamic_fixtures_use_hybrid_kernels():
    present = [p for p in DYNAMIC if p.exists()]
    if not present:
        pytest.skip("no dynamic-range fixtures yet")
    used = set()
    for path in present:
        g = Interpreter(model_path=path).graph
        used |= {op.type for op in g.ops if select_kernel(op, g) is HYBRID_KERNELS.get(op.type)}
    assert used & {OpType.FULLY_CONNECTED, OpType.CONV_2D, OpType.DEPTHWISE_CONV_2D}, used


# -- float ops upstream of a hybrid op ------------------------------------------------------------
# Every hybrid op quantizes its input per image (or row): one ulp of difference in a float op in
# front of it can move an element across a rounding boundary, a whole quantization step, which the
# following hybrid ops carry and amplify. So in a dynamic-range model the float sums must be
# LiteRT's reference sums bit for bit, not merely within an ulp.

def _float_then_hybrid(rng, op_type: OpType) -> Graph:
    """A float CONV_2D (3x3 over 24 channels) or FULLY_CONNECTED (depth 96), small enough to stay
    float under the converter's 1024-element rule, feeding a hybrid CONV_2D / FULLY_CONNECTED."""
    if op_type is OpType.CONV_2D:
        x, mid, out = (1, 12, 12, 24), (1, 12, 12, 4), (1, 12, 12, 40)
        wf = Tensor("wf", (4, 3, 3, 24), DType.FLOAT32, data=(rng.standard_normal((4, 3, 3, 24)) * 0.3).astype(F32))
        wq = qt("wq", (40, 3, 3, 4), DType.INT8, rng.uniform(1e-3, 1e-2, 40), 0, w8(rng, (40, 3, 3, 4)))
        opts = Conv2DOptions(Padding.SAME, 1, 1, Activation.RELU6)
        first = Op(op_type, (0, 1, 2), (3,), opts, version=1)
        second = Op(op_type, (3, 4, 5), (6,), Conv2DOptions(Padding.SAME, 1, 1), version=5)
    else:
        x, mid, out = (4, 96), (4, 8), (4, 200)
        wf = Tensor("wf", (8, 96), DType.FLOAT32, data=(rng.standard_normal((8, 96)) * 0.3).astype(F32))
        wq = qt("wq", (200, 8), DType.INT8, 0.01, 0, w8(rng, (200, 8)))
        first = Op(op_type, (0, 1, 2), (3,), FullyConnectedOptions(Activation.RELU6), version=1)
        second = Op(op_type, (3, 4, 5), (6,), FullyConnectedOptions(asymmetric_quantize_inputs=True), version=9)
    tensors = (Tensor("x", x, DType.FLOAT32), wf, Tensor("bf", mid[-1:], DType.FLOAT32, data=fvec(rng, mid[-1])),
               Tensor("mid", mid, DType.FLOAT32), wq,
               Tensor("bq", out[-1:], DType.FLOAT32, data=fvec(rng, out[-1])), Tensor("y", out, DType.FLOAT32))
    return Graph(tensors, (first, second), (0,), (3, 6))  # the float sums are an output too


@pytest.mark.parametrize("op_type", [OpType.CONV_2D, OpType.FULLY_CONNECTED], ids=["conv", "fully_connected"])
def test_float_sums_feeding_a_hybrid_op_are_litert_reference_sums(tmp_path, op_type):
    jobs = []
    for seed in range(6):
        rng = np.random.default_rng(seed)
        g = _float_then_hybrid(rng, op_type)
        path = str(tmp_path / f"{op_type.name.lower()}_{seed}.tflite")
        save(g, path)
        jobs.append((path, {0: rng.standard_normal(g.tensors[0].shape).astype(F32)}))
    for (path, feeds), want in zip(jobs, run_litert(jobs, resolvers=(REF,))):
        assert not isinstance(want, str), want
        ours = _ours(path, feeds, invokes=1)
        for key in ("0:3", "0:6"):
            np.testing.assert_array_equal(ours[key], want[key], err_msg=f"{os.path.basename(path)} {key}")


def test_dynamic_range_mobilenet_v2_matches_litert_on_standard_normal_inputs(tmp_path):
    """MobileNet v2 (0.5, 160) quantized as the converter does: its small convolutions stay float
    and feed hybrid ones; on standard-normal inputs an ulp there used to flip an input rounding of
    the next hybrid CONV_2D (0.008 off) and end 25% of the output range away."""
    from runtime.zoo import build
    from runtime.zoo.quantize import quantize

    graph = quantize(build("mobilenet_v2", alpha=0.5, resolution=160), "dynamic_range")
    path = str(tmp_path / "mobilenet_v2_dynamic.tflite")
    save(graph, path)
    x = graph.tensors[graph.inputs[0]]
    jobs = [(path, {graph.inputs[0]: np.random.default_rng(seed).standard_normal(x.shape).astype(F32)})
            for seed in range(3)]
    for (_, feeds), want in zip(jobs, run_litert(jobs, resolvers=(REF,))):
        assert not isinstance(want, str), want
        keys = [k for k in want if k != "resolver"]
        err = _gap(_ours(path, feeds, invokes=1), want, keys)
        assert err <= FLOAT_REL_TOL, f"error {err:.3g} x range"


# -- sparse weights -------------------------------------------------------------------------------

SPARSE = FIXTURES / "sparse"
SPARSE_MODELS = ["dense_1x4", "dense_batch", "dense_random", "dense_random_int32", "conv_sparse"]


def _sparse_tensors(path):
    import tflite

    model = tflite.Model.GetRootAs(path.read_bytes(), 0)
    sg = model.Subgraphs(0)
    # tensor index -> (tensor, number of values actually stored)
    return {i: (sg.Tensors(i), model.Buffers(sg.Tensors(i).Buffer()).DataLength() // 4)
            for i in range(sg.TensorsLength()) if sg.Tensors(i).Sparsity() is not None}


@pytest.mark.parametrize("name", SPARSE_MODELS)
def test_sparse_fixture_matches_litert(name):
    path = SPARSE / f"{name}.tflite"
    sparse = _sparse_tensors(path)
    assert sparse, f"{name} holds no sparse tensor"
    it = Interpreter(model_path=path)
    g = it.graph
    for i, (t, stored) in sparse.items():
        # Densified at load into the dense shape; the zeros the format left out come back.
        dense = g.tensors[i].data
        assert dense.shape == tuple(t.ShapeAsNumpy())
        assert 0 < np.count_nonzero(dense) <= stored < dense.size
    if name in ("dense_random", "dense_random_int32", "conv_sparse"):
        assert g.ops[0].type is OpType.DENSIFY
    feeds = seeded_inputs(it.get_input_details(), seed=3)
    ((_, ours, r, o),) = _compare([(str(path), feeds)], invokes=1)
    keys = [k for k in r if k != "resolver"]
    err = _gap(ours, r, keys)
    assert err <= FLOAT_REL_TOL, f"{name}: error {err:.3g} x range"


def test_sparse_index_vector_types_densify_alike():
    """uint8/uint16 (what the converter picks) and int32 segments/indices give the same weights."""
    small = Interpreter(model_path=SPARSE / "dense_random.tflite").graph
    wide = Interpreter(model_path=SPARSE / "dense_random_int32.tflite").graph
    (i,) = _sparse_tensors(SPARSE / "dense_random.tflite")
    np.testing.assert_array_equal(small.tensors[i].data, wide.tensors[i].data)
    assert 0.1 < np.count_nonzero(small.tensors[i].data) / small.tensors[i].data.size < 0.35


def test_malformed_sparsity_names_the_tensor():
    with pytest.raises(ModelError, match=r"malformed_segments.tflite: tensor #\d+ '.+' has malformed sparsity: "
                                         r"level 1 has inconsistent CSR segments/indices"):
        Interpreter(model_path=SPARSE / "malformed_segments.tflite")


def test_densify_matches_a_hand_built_block_layout(monkeypatch):
    """A 4x8 matrix in 2x2 blocks, block rows dense, block columns CSR, stored as
    traversal order (0, 1, 2, 3) with block_map (0, 1): the reader's expansion, checked by hand."""
    from runtime.model.tflite_read import densify_sparse

    class Meta:
        def __init__(self, fmt, size=0, segments=None, indices=None):
            self.fmt, self.size, self.seg, self.idx = fmt, size, segments, indices

        def Format(self):
            return self.fmt

        def DenseSize(self):
            return self.size

    class Sparsity:
        def __init__(self, metas):
            self.metas = metas

        def TraversalOrderAsNumpy(self):
            return np.array([0, 1, 2, 3], np.int32)

        def BlockMapAsNumpy(self):
            return np.array([0, 1], np.int32)

        def DimMetadataLength(self):
            return len(self.metas)

        def DimMetadata(self, k):
            return self.metas[k]

    dense = np.zeros((4, 8), F32)
    dense[0:2, 2:4] = [[1, 2], [3, 4]]
    dense[2:4, 0:2] = [[5, 6], [7, 8]]
    dense[2:4, 6:8] = [[9, 10], [11, 12]]
    metas = [Meta(0, 2), Meta(1, segments=[0, 1, 3], indices=[1, 0, 3]), Meta(0, 2), Meta(0, 2)]
    # The index vectors are flatbuffer tables in a real file; here plain lists stand in for them.
    monkeypatch.setattr("runtime.model.tflite_read._index_vector",
                        lambda m, which, bad, level: np.asarray(m.seg if which == "segments" else m.idx, np.int64))
    values = np.arange(1, 13, dtype=F32).view(np.uint8)
    np.testing.assert_array_equal(densify_sparse(Sparsity(metas), (4, 8), DType.FLOAT32, values, "t"), dense)
