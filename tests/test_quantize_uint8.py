"""uint8 quantization in the style of TF1's quantization-aware-trained models
(runtime/zoo/quantize_uint8.py): the graphs hold uint8 activations with one scale and zero point,
per-tensor asymmetric uint8 weights, int32 biases at s_in * s_w and no QUANTIZE/DEQUANTIZE; LiteRT's
reference kernels give the testbed's outputs bit for bit; every layer is the float layer on the
rounded weights to within one output step; the Hexagon delegate and NNAPI 1.1 take the models."""

from __future__ import annotations

import numpy as np
import pytest

from delegates import nnapi_rules
from delegates.hexagon import HexagonDelegate
from delegates.registry import make_delegate
from runtime import zoo
from runtime.cli.main import main
from runtime.ir.errors import ModelError
from runtime.ir.graph import DType
from runtime.interpreter.api import Interpreter
from runtime.ops import KERNELS, Node
from runtime.ir.optypes import OpType
from runtime.ir.options import Activation
from runtime.sweep.runner import build_model
from runtime.scenario.load import Quantization, scenario_from_text
from runtime.model.tflite_read import load
from runtime.model.tflite_write import save
from runtime.zoo.quantize import quantize, to_int8, to_uint8
from sim.profile import load_profile, with_api_level
from tests.conftest import FIXTURES
from tests.delegate_kit import verdicts
from tests.litert_oracle import available, run_litert

MODELS = {
    "mobilenet_v1": {"alpha": 0.25, "resolution": 96, "classes": 100},
    "squeezenet": {"resolution": 48, "classes": 100},
    "tiny_cnn": {},
}
# Float models from TensorFlow's converter, for the ops the zoo lacks (LOGISTIC, TANH, MUL, PAD,
# TRANSPOSE_CONV, RESIZE_BILINEAR, PACK, SPLIT, CONCATENATION of differently scaled inputs...).
FIXTURE_MODELS = sorted(f"converted_{p.stem}" for p in (FIXTURES / "models").glob("*.tflite")
                        if not p.stem.endswith("_fp16") and p.stem != "lstm")
SEEDS = (0, 1)
WEIGHTED = (OpType.CONV_2D, OpType.DEPTHWISE_CONV_2D, OpType.FULLY_CONNECTED)


def _samples(g, n=4, seed=1000):
    """n samples, each one gaussian array per model input."""
    return [[np.random.default_rng(seed + k * 10 + i).standard_normal(g.tensors[t].shape).astype(np.float32)
             for i, t in enumerate(g.inputs)] for k in range(n)]


def _to_uint8(tensor, x: np.ndarray) -> np.ndarray:
    """A float array on a uint8 tensor's grid (QUANTIZE's rounding: half away from zero)."""
    scale, zp = np.float32(tensor.quant.scale[0]), tensor.quant.zero_point[0]
    v = np.asarray(x, np.float32) / scale
    return np.clip(np.trunc(v + np.copysign(0.5, v)) + zp, 0, 255).astype(np.uint8)


def _real(tensor, q: np.ndarray) -> np.ndarray:
    return (q.astype(np.float64) - tensor.quant.zero_point[0]) * tensor.quant.scale[0]


def _gaussian(g, seed: int, k: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + 100 * k).standard_normal(g.tensors[g.inputs[k]].shape).astype(np.float32)


def _feeds(q, seed: int) -> dict[int, np.ndarray]:
    return {t: _to_uint8(q.tensors[t], _gaussian(q, seed, k)) for k, t in enumerate(q.inputs)}


def _run(graph, x: np.ndarray | dict[int, np.ndarray]) -> Interpreter:
    it = Interpreter(graph=graph)
    it.allocate_tensors()
    for t, v in (x if isinstance(x, dict) else {graph.inputs[0]: x}).items():
        it.set_tensor(t, v)
    it.invoke()
    return it


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """model -> (float graph, uint8 graph, .tflite path written with the testbed's writer)."""
    out = tmp_path_factory.mktemp("uint8")
    result = {}
    for name in [*MODELS, *FIXTURE_MODELS]:
        g = (zoo.build(name, **MODELS[name]) if name in MODELS
             else load(FIXTURES / "models" / f"{name.removeprefix('converted_')}.tflite"))
        q = quantize(g, "uint8", _samples(g))
        save(q, str(out / f"{name}.tflite"))
        result[name] = g, q, str(out / f"{name}.tflite")
    return result


# -- the graphs ---------------------------------------------------------------------------------


def _params(t):
    return tuple(np.float32(t.quant.scale)), t.quant.zero_point


@pytest.mark.parametrize("model", sorted(MODELS))
def test_uint8_graph_conventions(model, models):
    g, q, _ = models[model]
    assert [op.type for op in q.ops] == [op.type for op in g.ops], "no QUANTIZE/DEQUANTIZE added"
    assert all(op.version == 1 for op in q.ops)  # op_version.cc's uint8 versions
    for t in q.inputs + q.outputs:
        assert q.tensors[t].dtype is DType.UINT8
    for t in q.tensors:
        if t.dtype is DType.FLOAT32 or t.dtype is DType.INT8:
            pytest.fail(f"{t.name} is {t.dtype.name}")
        if t.dtype is DType.UINT8:
            assert len(t.quant.scale) == len(t.quant.zero_point) == 1 and 0 <= t.quant.zero_point[0] <= 255
    for op in q.ops:
        out = q.tensors[op.outputs[0]]
        if op.type in WEIGHTED:
            x, w, b = (q.tensors[t] for t in op.inputs)
            w0 = g.tensors[g.ops[q.ops.index(op)].inputs[1]].data
            s_w, zp_w = w.quant.scale[0], w.quant.zero_point[0]
            # FakeQuant's nudged range over [min(w, 0), max(w, 0)]: 255 steps, zero on a code.
            lo, hi = min(float(w0.min()), 0.0), max(float(w0.max()), 0.0)
            assert s_w == pytest.approx((hi - lo) / 255, rel=1e-6)
            assert zp_w == int(np.floor(-lo / s_w + 0.5))
            assert np.abs(_real(w, w.data) - w0).max() <= 0.5 * s_w * 1.001
            assert b.dtype is DType.INT32 and len(b.quant.scale) == 1 and b.quant.zero_point == (0,)
            assert np.float32(b.quant.scale[0]) == np.float32(x.quant.scale[0]) * np.float32(s_w)
            if op.options.fused_activation_function is Activation.RELU6:
                assert _params(out) == ((np.float32(6 / 255),), (0,)), "RELU6 outputs span [0, 6]"
            elif op.options.fused_activation_function is Activation.RELU:
                assert out.quant.zero_point == (0,), "RELU outputs span [0, max]"
        elif op.type in (OpType.MAX_POOL_2D, OpType.AVERAGE_POOL_2D, OpType.RESHAPE):
            assert _params(q.tensors[op.inputs[0]]) == _params(out)
        elif op.type is OpType.SOFTMAX:
            assert _params(out) == ((np.float32(1 / 256),), (0,))
        elif op.type is OpType.CONCATENATION:  # the uint8 kernel rescales: the output covers every input
            top = max(t.quant.scale[0] * (255 - t.quant.zero_point[0]) for t in (q.tensors[k] for k in op.inputs))
            assert out.quant.zero_point == (0,) and out.quant.scale[0] * 255 == pytest.approx(top, rel=1e-6)


def test_misuse_is_named(models):
    g, q, _ = models["tiny_cnn"]
    with pytest.raises(ModelError, match="uint8 quantization needs a representative dataset"):
        quantize(g, "uint8")
    with pytest.raises(ModelError, match="takes no io"):
        quantize(g, "uint8", _samples(g, 1), io="float")
    with pytest.raises(ModelError, match="uint8 quantization needs a float model"):
        to_uint8(q, _samples(g, 1))


# -- numbers: LiteRT, and the float model --------------------------------------------------------


@pytest.fixture(scope="module")
def litert(models):
    if not available():
        pytest.skip("LiteRT (ai-edge-litert) is not installed")
    keys, jobs = [], []
    for name, (g, q, path) in models.items():
        for seed in SEEDS:
            keys.append((name, seed))
            jobs.append((path, _feeds(q, seed)))
    return {key: (job[1], out) for key, job, out in zip(keys, jobs, run_litert(jobs, resolvers=("BUILTIN_REF",)))}


@pytest.mark.parametrize("model", [*sorted(MODELS), *FIXTURE_MODELS])
def test_testbed_equals_litert(model, models, litert):
    _, q, path = models[model]
    for seed in SEEDS:
        feeds, want = litert[model, seed]
        assert not isinstance(want, str), f"LiteRT could not run {model}: {want}"
        it = _run(q, feeds)
        for t in q.outputs:
            got, ref = it.get_tensor(t), want[f"0:{t}"]
            assert got.dtype == ref.dtype == np.uint8
            np.testing.assert_array_equal(got, ref, err_msg=f"{model} seed {seed}")


@pytest.mark.parametrize("model", sorted(MODELS))
def test_each_layer_is_the_float_layer_to_one_output_step(model, models):
    """The uint8 kernel sums (w_q - zp_w)(x_q - zp_x) exactly and adds the bias, i.e. the float
    layer on the dequantized input, weights and bias (the bias scale is the float32 product, off by
    2^-24 at most); requantizing with TFLite's fixed-point multiplier (off by 2^-31) and its two
    roundings moves the result by less than one output step; the fused activation and the
    clamp to the output's range are 1-Lipschitz. With the weights within half a step of the float
    ones (test above) every layer is the float layer up to quantization steps."""
    g, q, _ = models[model]
    x = _to_uint8(q.tensors[q.inputs[0]], _gaussian(g, 7))
    it = _run(q, x)
    for i, op in enumerate(q.ops):
        if op.type not in WEIGHTED:
            continue
        x, w, b, y = (q.tensors[t] for t in (*op.inputs, op.outputs[0]))
        arrays = [_real(x, it.get_tensor(op.inputs[0])), _real(w, w.data), b.data * np.float64(b.quant.scale[0])]
        want = KERNELS[op.type](Node(i, g.ops[i], g), *(a.astype(np.float32) for a in arrays))
        top = y.quant.scale[0] * (255 - y.quant.zero_point[0])
        want = np.clip(want, -y.quant.scale[0] * y.quant.zero_point[0], top)
        err = np.abs(_real(y, it.get_tensor(op.outputs[0])) - want).max()
        assert err <= y.quant.scale[0] * (1 + 1e-3) + 1e-5 * top, f"{y.name}: {err:.4g} vs step {y.quant.scale[0]:.4g}"


def test_tiny_cnn_tracks_the_float_model(models):
    g, q, _ = models["tiny_cnn"]
    x_in, y_out = q.tensors[q.inputs[0]], q.tensors[q.outputs[0]]
    for seed in range(5):
        x = _gaussian(g, seed)
        want = _run(g, x).get_tensor(g.outputs[0])
        got = _real(y_out, _run(q, _to_uint8(x_in, x)).get_tensor(q.outputs[0]))
        assert np.abs(got - want).max() < 0.05 and got.argmax() == want.argmax(), f"seed {seed}"


# -- the command line and the delegates -------------------------------------------------------------


def test_benchmark_runs_the_uint8_mobilenet_whole_on_hexagon(capsys):
    assert main(["benchmark", "--zoo", "mobilenet_v1", "--zoo_args", "alpha=0.25,resolution=96",
                 "--quantization", "uint8", "--device", "pixel3", "--use_hexagon", "--num_runs", "1"]) == 0
    out = capsys.readouterr().out
    assert "TfLiteHexagonDelegate delegate: 31 nodes delegated out of 31 nodes with 1 partitions." in out
    assert "the model graph will be completely executed by the delegate" in out


def test_a_scenario_asks_for_uint8():
    (s,) = scenario_from_text("device: pixel3\nmodel: {zoo: tiny_cnn, quantization: uint8}\n")
    assert s.model.quantization is Quantization.UINT8
    graph = build_model(s.model)
    assert graph.tensors[graph.inputs[0]].dtype is DType.UINT8
    assert {t.dtype for t in graph.tensors if t.quant is not None} == {DType.UINT8, DType.INT32}


@pytest.mark.parametrize("model", sorted(MODELS))
def test_hexagon_takes_every_op(model, models):
    _, q, _ = models[model]
    assert all(verdicts(HexagonDelegate(), q))


def test_nnapi_1_1_takes_uint8_per_tensor_but_not_int8(models):
    """NNAPI 1.0/1.1 have TENSOR_QUANT8_ASYMM (uint8, one scale and zero point) for CONV_2D,
    DEPTHWISE_CONV_2D, AVERAGE_POOL_2D, RESHAPE, SOFTMAX...; int8 arrived with 1.2. The Pixel 3
    shipped with Android 9 (API 28, NNAPI 1.1); its profile stands for Android 10, so ask for 28."""
    g, q, _ = models["mobilenet_v1"]
    level = 2  # NNAPI 1.1
    rules = nnapi_rules.rule_table(level)
    for op in q.ops:
        for rule in (*rules[op.type], *nnapi_rules.common_rules(level)):
            assert rule(op, q), f"{op.type.name}: {rule.__doc__}"
    phone = with_api_level(load_profile("pixel3"), 28)
    assert all(verdicts(make_delegate("nnapi", phone), q))
    int8 = to_int8(g, _samples(g, 2))
    refused = verdicts(make_delegate("nnapi", phone), int8)
    assert not any(refused) and all("1.2" in a.reason for a in refused)
