"""Post-training quantizers (runtime/zoo/quantize.py): every zoo model, and the converter-made float
models in tests/fixtures/models, in every mode loads and runs in LiteRT's reference kernels and agrees
with the testbed (int8 bit for bit; float16 and dynamic range within REL_TOL of the output's range),
the rewritten graphs follow the converter's conventions, int8 outputs track the float model, and
misuse fails with a clear ModelError."""

from __future__ import annotations

import numpy as np
import pytest

from runtime import zoo
from runtime.ir.errors import ModelError
from runtime.ir.graph import DType
from runtime.interpreter.api import Interpreter
from runtime.ops import HYBRID_KERNELS
from runtime.ir.optypes import OpType
from runtime.ir.options import Activation, ConcatenationOptions, FullyConnectedOptions, ReducerOptions
from runtime.model.tflite_read import load
from runtime.model.tflite_write import save
from runtime.zoo import layers as L
from runtime.zoo.builder import GraphBuilder
from runtime.zoo.quantize import quantize, to_dynamic_range, to_float16, to_int8
from tests.conftest import FIXTURES
from tests.litert_oracle import available, run_litert

MODELS = {
    "mobilenet_v1": {"alpha": 0.25, "resolution": 96, "classes": 100},
    "mobilenet_v2": {"alpha": 0.35, "resolution": 96, "classes": 100},
    "squeezenet": {"resolution": 96, "classes": 100},
    "tiny_cnn": {},
}
VARIANTS = {
    "float16": ("float16", {}),
    "dynamic_range": ("dynamic_range", {}),
    "int8": ("int8", {"io": "int8"}),
    "int8_float_io": ("int8", {"io": "float"}),
}
# Float models made by TensorFlow's converter (MEAN, MUL, LOGISTIC, PAD, TRANSPOSE_CONV,
# RESIZE_BILINEAR, CONCATENATION...); the LSTM one has no int8 form and is tested for the error.
FIXTURE_MODELS = sorted(f"converted_{p.stem}" for p in (FIXTURES / "models").glob("*.tflite")
                        if not p.stem.endswith("_fp16") and p.stem != "lstm")
SEEDS = (0, 1)
CALIBRATION = 8
# float16 and dynamic-range models compute in float32 kernels that sum in another order than
# LiteRT's reference loops; on these 30-70 layer models the unquantized float graphs already differ
# from LiteRT by up to 3e-5 of the output range, so both are held to 1e-4 of it, or to twice the gap
# LiteRT's own optimised / XNNPACK kernels show against its reference kernels on the same input,
# whichever is larger. (The hybrid ops themselves are exact: same integer sums, same float32 scale
# products; measured 2e-7 of the range.)
REL_TOL = 1e-4

# Known cases, reported rather than hidden (none at present). mobilenet_v2 in dynamic range once
# was: the testbed's float DEPTHWISE_CONV_2D sums in another order (outputs differ by ~1 ulp), which
# can move one input of the next hybrid CONV_2D's on-the-fly quantization by a step; LiteRT's own
# optimised kernels show gaps of the same kind, and the tolerance above now counts them.
KNOWN: dict[tuple[str, str], str] = {}


def _cases():
    for model in [*MODELS, *FIXTURE_MODELS]:
        for variant in VARIANTS:
            reason = KNOWN.get((model, variant))
            marks = [pytest.mark.xfail(strict=False, reason=reason)] if reason else []
            yield pytest.param(model, variant, marks=marks, id=f"{model}-{variant}")


def representative(shape, n=CALIBRATION, seed=1000):
    return [np.random.default_rng(seed + k).standard_normal(shape).astype(np.float32) for k in range(n)]


def _representative_for(g, n=CALIBRATION, seed=1000):
    """One list of arrays per sample, one array per model input."""
    shapes = [g.tensors[t].shape for t in g.inputs]
    return [[np.random.default_rng(seed + k * len(shapes) + i).standard_normal(s).astype(np.float32)
             for i, s in enumerate(shapes)] for k in range(n)]


def _feed(detail: dict, seed: int) -> np.ndarray:
    """A seeded gaussian input, quantized with the input's own parameters for int8 inputs."""
    x = np.random.default_rng(seed).standard_normal(tuple(detail["shape"])).astype(np.float32)
    if detail["dtype"] == np.int8:
        scale, zp = detail["quantization"]
        q = np.trunc(x / np.float32(scale) + np.copysign(0.5, x)) + zp
        return np.clip(q, -128, 127).astype(np.int8)
    return x


def _run(graph_or_path, feeds: dict[int, np.ndarray] | None = None, seed: int = 0) -> Interpreter:
    it = (Interpreter(graph=graph_or_path) if not isinstance(graph_or_path, str)
          else Interpreter(model_path=graph_or_path))
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], feeds[d["index"]] if feeds else _feed(d, seed))
    it.invoke()
    return it


@pytest.fixture(scope="module")
def float_models():
    graphs = {name: zoo.build(name, **kw) for name, kw in MODELS.items()}
    graphs.update({name: load(FIXTURES / "models" / f"{name.removeprefix('converted_')}.tflite")
                   for name in FIXTURE_MODELS})
    return graphs


@pytest.fixture(scope="module")
def quantized(float_models, tmp_path_factory):
    """(model, variant) -> (graph, .tflite path), each written with the testbed's writer."""
    out = tmp_path_factory.mktemp("quantized")
    result = {}
    for model, g in float_models.items():
        rep = _representative_for(g)
        for variant, (mode, kw) in VARIANTS.items():
            q = quantize(g, mode, rep if mode == "int8" else None, **kw)
            path = str(out / f"{model}_{variant}.tflite")
            save(q, path)
            result[model, variant] = q, path
    return result


@pytest.fixture(scope="module")
def litert(quantized):
    """LiteRT's BUILTIN_REF outputs for every quantized model and seed, from one child process."""
    if not available():
        pytest.skip("LiteRT (ai-edge-litert) is not installed")
    keys, jobs = [], []
    for (model, variant), (q, path) in quantized.items():
        details = Interpreter(graph=q).get_input_details()
        for seed in SEEDS:
            keys.append((model, variant, seed))
            jobs.append((path, {d["index"]: _feed(d, seed) for d in details}))
    ref = run_litert(jobs, resolvers=("BUILTIN_REF",))
    # LiteRT's own spread for the float-computing variants: its optimised and XNNPACK kernels
    # against its reference ones, on the same inputs.
    floaty = [k for k, key in enumerate(keys) if not key[1].startswith("int8")]
    gaps = {k: 0.0 for k in floaty}
    for resolver in ("BUILTIN_WITHOUT_DEFAULT_DELEGATES", "AUTO"):
        for k, other in zip(floaty, run_litert([jobs[k] for k in floaty], resolvers=(resolver,))):
            if isinstance(other, dict) and isinstance(ref[k], dict):
                gaps[k] = max(gaps[k], max(float(np.abs(other[n] - ref[k][n]).max()) for n in ref[k]
                                           if n != "resolver"))
    return {key: (jobs[k][1], ref[k], gaps.get(k, 0.0)) for k, key in enumerate(keys)}


def _skip_missing_hybrid_kernels(q) -> None:
    """A hybrid op the testbed has no kernel for would silently run the float kernel on raw int8
    weights; say so instead of reporting a numerical mismatch."""
    def hybrid(op):
        ins = [q.tensors[t] for t in op.inputs if t >= 0]
        return (any(t.is_constant and t.dtype is DType.INT8 for t in ins)
                and any(not t.is_constant and t.dtype is DType.FLOAT32 for t in ins))
    missing = sorted({op.type.name for op in q.ops if hybrid(op) and op.type not in HYBRID_KERNELS})
    if missing:
        pytest.xfail(f"the testbed has no hybrid (float input, int8 weights) kernel for {', '.join(missing)} yet")


@pytest.mark.parametrize("model,variant", list(_cases()))
def test_litert_runs_the_model_and_agrees_with_the_testbed(model, variant, quantized, litert):
    q, path = quantized[model, variant]
    if variant == "dynamic_range":
        _skip_missing_hybrid_kernels(q)
    for seed in SEEDS:
        feeds, want, litert_gap = litert[model, variant, seed]
        if isinstance(want, str):
            pytest.fail(f"LiteRT (BUILTIN_REF) could not run {model} {variant}: {want}")
        try:
            it = _run(path, feeds)
        except ModelError as exc:
            if "is not supported by the testbed" in str(exc):
                pytest.xfail(f"testbed kernel missing: {exc}")
            raise
        for d in it.get_output_details():
            got, ref = it.get_tensor(d["index"]), want[f"0:{d['index']}"]
            assert got.dtype == ref.dtype and got.shape == ref.shape
            if variant.startswith("int8"):
                np.testing.assert_array_equal(got, ref, err_msg=f"{model} {variant} seed {seed}")
            else:
                span = max(float(ref.max() - ref.min()), 1e-6)
                err = float(np.abs(got.astype(np.float64) - ref).max())
                limit = max(REL_TOL * span, 2 * litert_gap)
                assert err <= limit, f"{model} {variant} seed {seed}: {err:.3g} > {limit:.3g} (LiteRT's own {litert_gap:.3g})"


# -- the rewritten graphs follow the converter's conventions ----------------------------------------


def _qp(t):
    return tuple(np.float32(t.quant.scale)), t.quant.zero_point


@pytest.mark.parametrize("model", sorted(MODELS))
def test_int8_graph_conventions(model, quantized):
    q, _ = quantized[model, "int8"]
    for t in q.inputs + q.outputs:
        assert q.tensors[t].dtype is DType.INT8
    versions = {OpType.CONV_2D: 3, OpType.DEPTHWISE_CONV_2D: 3, OpType.FULLY_CONNECTED: 4, OpType.ADD: 2,
                OpType.AVERAGE_POOL_2D: 2, OpType.MAX_POOL_2D: 2, OpType.CONCATENATION: 2, OpType.MEAN: 2,
                OpType.SOFTMAX: 2, OpType.RESHAPE: 1}
    for op in q.ops:
        assert op.version == versions[op.type], op
        ins = [q.tensors[t] for t in op.inputs if t >= 0]
        out = q.tensors[op.outputs[0]]
        assert out.dtype is DType.INT8 and not out.quant.per_channel
        if op.type in (OpType.CONV_2D, OpType.DEPTHWISE_CONV_2D, OpType.FULLY_CONNECTED):
            x, w, b = ins
            axis = 3 if op.type is OpType.DEPTHWISE_CONV_2D else 0
            assert w.dtype is DType.INT8 and w.quant.axis == axis and len(w.quant.scale) == w.shape[axis]
            assert set(w.quant.zero_point) == {0} and w.data.min() >= -127
            # Each channel uses the full symmetric range.
            assert (np.abs(np.moveaxis(w.data, axis, 0)).reshape(w.shape[axis], -1).max(axis=1) == 127).all()
            assert b.dtype is DType.INT32 and set(b.quant.zero_point) == {0}
            want = (np.float64(np.float32(x.quant.scale[0])) * np.float32(w.quant.scale)).astype(np.float32)
            np.testing.assert_array_equal(np.float32(b.quant.scale), want)
        elif op.type in (OpType.MAX_POOL_2D, OpType.AVERAGE_POOL_2D, OpType.RESHAPE, OpType.CONCATENATION):
            for x in ins:
                if x.dtype is DType.INT8:
                    assert _qp(x) == _qp(out), f"{op.type.name} changes parameters"
        elif op.type is OpType.SOFTMAX:
            assert _qp(out) == ((np.float32(1 / 256),), (-128,))


def test_int8_float_io_adds_quantize_and_dequantize(quantized):
    q, _ = quantized["mobilenet_v1", "int8_float_io"]
    plain, _ = quantized["mobilenet_v1", "int8"]
    assert [q.tensors[t].dtype for t in q.inputs + q.outputs] == [DType.FLOAT32, DType.FLOAT32]
    assert (q.ops[0].type, q.ops[0].version) == (OpType.QUANTIZE, 1)
    assert (q.ops[-1].type, q.ops[-1].version) == (OpType.DEQUANTIZE, 2)
    assert q.ops[0].inputs == q.inputs and q.ops[-1].outputs == q.outputs
    assert _qp(q.tensors[q.ops[0].outputs[0]]) == _qp(plain.tensors[plain.inputs[0]])
    assert [s.key for s in q.signatures] == [s.key for s in plain.signatures]


@pytest.mark.parametrize("model", sorted(MODELS))
def test_float16_graph_conventions(model, float_models, quantized):
    g, (q, _) = float_models[model], quantized[model, "float16"]
    halves = [t for t in q.tensors if t.is_constant and t.dtype is DType.FLOAT16]
    assert not [t for t in q.tensors if t.is_constant and t.dtype is DType.FLOAT32]
    deq = [op for op in q.ops if op.type is OpType.DEQUANTIZE]
    assert len(deq) == len(halves) and all(op.version == 3 for op in deq)
    assert q.ops[:len(deq)] == tuple(deq), "DEQUANTIZE ops come first"
    by_name = {t.name: t for t in g.tensors if t.is_constant}
    for t in halves:
        np.testing.assert_array_equal(t.data, np.clip(by_name[t.name].data, -65504, 65504).astype(np.float16))
    assert [op.type for op in q.ops[len(deq):]] == [op.type for op in g.ops]


def test_float16_clamps_to_the_float16_range():
    b = GraphBuilder("big")
    x = b.input("x", (1, 4))
    w = b.const("w", np.array([[1e6, -1e6, 1.0, 65519.0]] * 2, np.float32))
    y = b.op(OpType.FULLY_CONNECTED, [x, w, -1], FullyConnectedOptions())
    q = to_float16(b.build([y]))
    half = next(t for t in q.tensors if t.dtype is DType.FLOAT16)
    np.testing.assert_array_equal(half.data[0], np.float16([65504, -65504, 1, 65504]))


@pytest.mark.parametrize("model", sorted(MODELS))
def test_dynamic_range_graph_conventions(model, float_models, quantized):
    g, (q, _) = float_models[model], quantized[model, "dynamic_range"]
    versions = {OpType.CONV_2D: 5, OpType.DEPTHWISE_CONV_2D: 6, OpType.FULLY_CONNECTED: 12}
    seen = 0
    for op, orig in zip(q.ops, g.ops):
        assert op.type is orig.type and q.tensors[op.inputs[0]].dtype is DType.FLOAT32
        if op.type not in versions:
            continue
        w, w0 = q.tensors[op.inputs[1]], g.tensors[orig.inputs[1]]
        if w0.data.size < 1024:
            assert w.dtype is DType.FLOAT32
        else:
            seen += 1
            axis = 3 if op.type is OpType.DEPTHWISE_CONV_2D else 0
            assert w.dtype is DType.INT8 and w.quant.axis == axis and len(w.quant.scale) == w.shape[axis]
            deq = w.data * np.float32(w.quant.scale).reshape([-1 if d == axis else 1 for d in range(w.data.ndim)])
            step = np.float32(w.quant.scale).max()
            assert np.abs(deq - w0.data).max() <= 0.5 * step * 1.001
        assert q.tensors[op.inputs[2]].dtype is DType.FLOAT32  # biases stay float
        if op.type is OpType.FULLY_CONNECTED:
            assert op.options.asymmetric_quantize_inputs == (w.dtype is DType.INT8)
        # One operator code per builtin: ops left in float share the hybrid ops' version.
        assert op.version == max(o.version for o in q.ops if o.type is op.type)
    assert seen > 0 or model == "tiny_cnn"  # tiny_cnn's weights are all under 1024 elements


# -- a small graph with the sharing rules: fixed outputs, requantize, concatenation ---------------------


def _mixed_graph():
    """conv -> (logistic | relu conv) -> concat -> max pool -> tanh -> mean -> FC -> softmax, and
    min(relu6 conv, conv) -> mean as a second output."""
    b = GraphBuilder("mixed", seed=3)
    x = b.input("input", (1, 12, 12, 3))
    c = L.conv(b, x, 8, 3, 1, Activation.NONE, name="c0")
    s = b.op(OpType.LOGISTIC, [c], None, "sigmoid")
    r = L.conv(b, c, 8, 1, 1, Activation.RELU, name="c1")
    y = b.op(OpType.CONCATENATION, [s, r], ConcatenationOptions(axis=3), "concat")
    y = L.pool(b, y, 2, 2, name="pool")
    t = b.op(OpType.TANH, [y], None, "tanh")
    axes = b.const("axes", np.array([1, 2], np.int32))
    t = b.op(OpType.MEAN, [t, axes], ReducerOptions(False), "mean")
    u = L.conv(b, c, 4, 1, 1, Activation.RELU6, name="c2")
    v = L.conv(b, c, 4, 1, 1, Activation.NONE, name="c3")
    m = b.op(OpType.MINIMUM, [u, v], None, "minimum")
    m = b.op(OpType.MEAN, [m, axes], ReducerOptions(False), "mean2")
    return b.build([L.dense_classifier(b, t, 5), m])


def test_int8_sharing_rules_on_a_mixed_graph(tmp_path):
    g = _mixed_graph()
    rep = representative(g.tensors[g.inputs[0]].shape)
    q = to_int8(g, rep)
    p = {t.name: _qp(t) for t in q.tensors if t.quant is not None and not t.is_constant}
    assert p["sigmoid"] == ((np.float32(1 / 256),), (-128,))
    assert p["tanh"] == ((np.float32(1 / 128),), (0,))
    # The sigmoid's fixed parameters cannot be the concat's: a requantizing QUANTIZE goes between,
    # and every input of the concat has the concat's parameters, kept through the pool.
    (requant,) = [op for op in q.ops if op.type is OpType.QUANTIZE]
    assert q.tensors[requant.inputs[0]].name == "sigmoid"
    assert _qp(q.tensors[requant.outputs[0]]) == p["c1"] == p["concat"] == p["pool"]
    # MINIMUM's inputs take its output's parameters (the converter's backward propagation), so
    # the relu6 conv is not quantized over its own wider range.
    assert p["c2"] == p["c3"] == p["minimum"]
    it = Interpreter(graph=g)
    it.allocate_tensors()
    lo, hi = np.inf, -np.inf
    for sample in rep:
        it.set_tensor(g.inputs[0], sample)
        it.invoke()
        v = it.get_tensor(next(k for k, t in enumerate(g.tensors) if t.name == "minimum"))
        lo, hi = min(lo, float(v.min())), max(hi, float(v.max()))
    scale = np.float32((max(hi, 0.0) - min(lo, 0.0)) / 255)
    assert p["minimum"][0][0] == scale
    assert [op.version for op in q.ops if op.type in (OpType.LOGISTIC, OpType.MINIMUM, OpType.TANH)] == [2, 2, 2]
    if not available():
        pytest.skip("LiteRT (ai-edge-litert) is not installed")
    path = str(tmp_path / "mixed.tflite")
    save(q, path)
    feeds = {d["index"]: _feed(d, 5) for d in Interpreter(graph=q).get_input_details()}
    (want,) = run_litert([(path, feeds)], resolvers=("BUILTIN_REF",))
    assert not isinstance(want, str), want
    got = _run(path, feeds)
    for d in got.get_output_details():
        np.testing.assert_array_equal(got.get_tensor(d["index"]), want[f"0:{d['index']}"])


# -- int8 outputs track the float model -----------------------------------------------------------------


def test_int8_tiny_cnn_tracks_the_float_model(float_models, quantized):
    g, (q, _) = float_models["tiny_cnn"], quantized["tiny_cnn", "int8_float_io"]
    for seed in range(5):
        want = _run(g, seed=seed).get_tensor(g.outputs[0])
        got = _run(q, seed=seed).get_tensor(q.outputs[0])
        assert np.abs(got - want).max() < 0.05
        assert got.argmax() == want.argmax()


@pytest.mark.parametrize("model", sorted(MODELS))
def test_int8_activations_track_the_float_model_layer_by_layer(model, float_models, quantized):
    """The zoo's deep random networks amplify any perturbation (input noise of 1e-3 already moves
    MobileNet v1's probabilities by 0.01), so end-to-end agreement is only asserted for tiny_cnn;
    here every early layer, dequantized, must stay within a few quantization steps of float."""
    g, (q, _) = float_models[model], quantized[model, "int8_float_io"]
    ref, got = _run(g, seed=7), _run(q, seed=7)
    names = {t.name: k for k, t in enumerate(q.tensors)}
    for op in g.ops[:4]:
        t = q.tensors[names[g.tensors[op.outputs[0]].name]]
        deq = (got.get_tensor(names[t.name]).astype(np.float64) - t.quant.zero_point[0]) * t.quant.scale[0]
        want = ref.get_tensor(op.outputs[0]).astype(np.float64)
        rel = np.linalg.norm(deq - want) / np.linalg.norm(want)
        assert rel < 0.05, f"{t.name}: relative error {rel:.3f}"


# -- misuse -----------------------------------------------------------------------------------------------


@pytest.fixture
def tiny(float_models):
    return float_models["tiny_cnn"]


def test_int8_needs_a_representative_dataset(tiny):
    with pytest.raises(ModelError, match="representative dataset"):
        quantize(tiny, "int8")
    with pytest.raises(ModelError, match="no samples"):
        to_int8(tiny, [])


def test_unknown_mode_and_bad_arguments(tiny):
    with pytest.raises(ModelError, match="unknown quantization mode 'int4'.*float16, dynamic_range, int8"):
        quantize(tiny, "int4")
    with pytest.raises(ModelError, match="io must be 'int8' or 'float'"):
        quantize(tiny, "int8", representative(tiny.tensors[tiny.inputs[0]].shape, 1), io="uint8")
    with pytest.raises(ModelError, match="takes no representative_data"):
        quantize(tiny, "float16", [np.zeros((1, 32, 32, 3), np.float32)])


def test_representative_data_forms(tiny):
    shape = tiny.tensors[tiny.inputs[0]].shape
    samples = representative(shape, 3)
    as_list = to_int8(tiny, samples)
    as_callable = to_int8(tiny, lambda: iter(samples))
    as_dicts = to_int8(tiny, [{"input": s} for s in samples])
    for other in (as_callable, as_dicts):
        assert [_qp(t) for t in other.tensors if t.quant] == [_qp(t) for t in as_list.tensors if t.quant]
    with pytest.raises(ModelError, match=r"sample 0: array of shape \[1, 8, 8, 3\]"):
        to_int8(tiny, [np.zeros((1, 8, 8, 3), np.float32)])
    with pytest.raises(ModelError, match="names input 'image'"):
        to_int8(tiny, [{"image": samples[0]}])


def test_an_op_without_an_int8_form_is_named():
    b = GraphBuilder("exp")
    x = b.input("x", (1, 4, 4, 2))
    y = L.conv(b, x, 2, 1, 1, Activation.NONE, name="c")
    y = b.op(OpType.EXP, [y], None, "exp")
    g = b.build([y])
    with pytest.raises(ModelError, match=r"op #1 EXP has no int8 form"):
        to_int8(g, representative((1, 4, 4, 2), 1))
    # float16 and dynamic range leave such ops in float.
    assert to_float16(g).ops[-1].type is OpType.EXP and to_dynamic_range(g).ops[-1].type is OpType.EXP


def test_the_lstm_fixture_has_no_int8_form_but_quantizes_otherwise():
    g = load(FIXTURES / "models" / "lstm.tflite")
    with pytest.raises(ModelError, match=r"op #0 UNIDIRECTIONAL_SEQUENCE_LSTM has no int8 form"):
        to_int8(g, _representative_for(g, 1))
    assert any(t.dtype is DType.FLOAT16 for t in to_float16(g).tensors)


def test_quantized_models_are_not_quantized_again(quantized):
    q, _ = quantized["tiny_cnn", "int8"]
    with pytest.raises(ModelError, match="needs a float model"):
        to_float16(q)
    h, _ = quantized["tiny_cnn", "float16"]
    with pytest.raises(ModelError, match="already FLOAT16"):
        to_dynamic_range(h)
