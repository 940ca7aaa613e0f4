"""Real models of every task a phone runs (image classification, detection with post-processing,
segmentation, pose and landmarks, text, audio, recurrent): each model of the table below loads,
gives the outputs LiteRT's reference kernels give on two invokes in a row (float outputs within
1e-5 of their range or magnitude, integer outputs exactly), and runs timing-only on every shipped
phone on its CPU and under each of the four delegates. The published MediaPipe models are held to
the same checks in tests/test_published_models.py and counted here with their tasks."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.model import tflite_read as tflite_io
from runtime.interpreter.api import Interpreter
from tests import litert_oracle
from tests.conftest import FIXTURES
from tests.test_published_models import DELEGATES, PHONES, UNIT_ROUNDOFF, run_everywhere
from tests.test_published_models import MODELS as PUBLISHED

# file under tests/fixtures -> task. tasks/ is made by tests/fixtures/make_task_fixtures.py, models/
# by make_fixtures.py and quant/ by make_quant_fixtures.py (whole models only: the op-mix ones
# there exercise kernels, not a task).
MODELS = {
    # image classification
    "models/mobilenet_v1.tflite": "classification",
    "models/mobilenet_v1_fp16.tflite": "classification",
    "models/mobilenet_v2.tflite": "classification",
    "models/efficientnet.tflite": "classification",
    "models/resnet_style.tflite": "classification",
    "models/resnet_style_fp16.tflite": "classification",
    "quant/mobilenet_v1_int8.tflite": "classification",
    "quant/mobilenet_v1_int8_float_io.tflite": "classification",
    "quant/mobilenet_v1_uint8_io.tflite": "classification",
    "quant/mobilenet_v1_dynamic.tflite": "classification",
    "quant/mobilenet_v2_int8.tflite": "classification",
    "quant/mobilenet_v2_fp16.tflite": "classification",
    "quant/efficientnet_style_int8.tflite": "classification",
    "quant/resnet_style_int8.tflite": "classification",
    "quant/resnet_style_dynamic.tflite": "classification",
    "tasks/classification_mobilenet_v3.tflite": "classification",
    "tasks/classification_mobilenet_v3_int8.tflite": "classification",
    "tasks/classification_squeezenet.tflite": "classification",
    "tasks/classification_squeezenet_int8.tflite": "classification",
    "tasks/classification_shufflenet_v2.tflite": "classification",
    # detection, ending in TFLite_Detection_PostProcess
    "tasks/detection_ssd.tflite": "detection",
    "tasks/detection_ssd_int8_float_io.tflite": "detection",
    "tasks/detection_ssd_uint8.tflite": "detection",
    # segmentation
    "models/unet_style.tflite": "segmentation",
    "models/unet_style_fp16.tflite": "segmentation",
    "quant/unet_style_int8.tflite": "segmentation",
    "tasks/segmentation_deeplab.tflite": "segmentation",
    "tasks/segmentation_deeplab_int8.tflite": "segmentation",
    # pose: keypoint heatmaps
    "tasks/pose_movenet.tflite": "landmarks",
    "tasks/pose_movenet_int8.tflite": "landmarks",
    "tasks/pose_posenet.tflite": "landmarks",
    # text
    "tasks/text_mobilebert.tflite": "text",
    "tasks/text_mobilebert_int8.tflite": "text",
    "tasks/text_cnn.tflite": "text",
    "tasks/text_cnn_int8.tflite": "text",
    "tasks/text_bilstm.tflite": "text",
    # audio
    "tasks/audio_yamnet.tflite": "audio",
    "tasks/audio_yamnet_dft.tflite": "audio",
    "tasks/audio_kws_dscnn.tflite": "audio",
    "tasks/audio_kws_dscnn_int8.tflite": "audio",
    # recurrent
    "models/lstm.tflite": "recurrent",
    "models/lstm_fp16.tflite": "recurrent",
    "models/lstm_unrolled.tflite": "recurrent",
    "quant/lstm_dynamic.tflite": "recurrent",
    "tasks/recurrent_gru.tflite": "recurrent",
    "tasks/recurrent_gru_unrolled.tflite": "recurrent",
    "tasks/recurrent_gru_unrolled_int8.tflite": "recurrent",
    "tasks/recurrent_streaming.tflite": "recurrent",
}
# Models the testbed cannot run yet, kept so that the gap stays in sight: each must be refused with
# the message given; once a kernel runs it, its test fails and the model moves to MODELS.
KNOWN_GAPS = {
    # The converter's full-integer LSTM (int8 activations and weights, int16 cell state, lstm_eval's
    # EvalInteger8x8_16): float32 and dynamic-range LSTMs run, this one is refused by name.
    "tasks/text_bilstm_int8.tflite": "full-integer LSTMs",
}
ALL_TASKS = {**MODELS, **{f"published/{name}": task for name, task in PUBLISHED.items()}}
TOKENS = 512  # the text models' vocabulary; token 0 pads
INVOKES = 2  # the second catches state kept between invokes (LSTM variables, the streaming GRU)
REL_TOL = 1e-5   # or two float32 roundings per op, whichever is larger (see UNIT_ROUNDOFF's note)


def _inputs(graph, seed: int) -> dict[int, np.ndarray]:
    """Gaussian floats; full-range 8-bit values; token ids with the last quarter padding."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for t in graph.inputs:
        tensor = graph.tensors[t]
        dtype, shape = np.dtype(tensor.dtype.np), tensor.shape
        if dtype.kind == "f":
            feeds[t] = rng.standard_normal(shape).astype(dtype)
        elif dtype in (np.int8, np.uint8):
            info = np.iinfo(dtype)
            feeds[t] = rng.integers(info.min, info.max + 1, shape).astype(dtype)
        else:
            ids = rng.integers(1, TOKENS, shape)
            ids[..., shape[-1] * 3 // 4:] = 0
            feeds[t] = ids.astype(dtype)
    return feeds


def _ids(paths):
    return [p.removesuffix(".tflite") for p in paths]


@pytest.fixture(scope="module")
def oracle():
    if not litert_oracle.available():
        pytest.skip("LiteRT (ai-edge-litert) is not installed")
    feeds = {name: _inputs(tflite_io.load(FIXTURES / name), seed) for seed, name in enumerate(MODELS)}
    jobs = [(str(FIXTURES / name), feeds[name]) for name in MODELS]
    results = litert_oracle.run_litert(jobs, resolvers=("BUILTIN_REF",), invokes=INVOKES)
    return {name: (feeds[name], result) for name, result in zip(MODELS, results)}


@pytest.mark.parametrize("name", list(MODELS), ids=_ids(MODELS))
def test_matches_litert_reference(name, oracle):
    feeds, want = oracle[name]
    assert not isinstance(want, str), f"LiteRT could not run {name}: {want}"
    it = Interpreter(model_path=FIXTURES / name)
    it.allocate_tensors()
    limit = max(REL_TOL, 2 * UNIT_ROUNDOFF * len(tflite_io.load(FIXTURES / name).ops))
    for run in range(INVOKES):
        for index, value in feeds.items():
            it.set_tensor(index, value)
        it.invoke()
        for d in it.get_output_details():
            got, ref = it.get_tensor(d["index"]), want[f"{run}:{d['index']}"]
            assert got.shape == ref.shape and got.dtype == ref.dtype, (name, d["name"])
            if got.dtype.kind != "f":
                np.testing.assert_array_equal(got, ref, err_msg=f"{name} output '{d['name']}' invoke {run}")
                continue
            span = max(float(ref.max() - ref.min()), float(np.abs(ref).max())) if ref.size else 0.0
            err = float(np.abs(got.astype(np.float64) - ref).max()) if ref.size else 0.0
            assert err <= limit * max(span, 1e-3), (
                f"{name} output '{d['name']}' invoke {run}: max error {err:.3g} > {limit:.3g} x range {span:.3g}")


@pytest.mark.parametrize("name", list(MODELS), ids=_ids(MODELS))
def test_runs_on_every_phone_under_every_delegate(name, reads_once):
    run_everywhere(tflite_io.load(FIXTURES / name), name)


def test_the_table_covers_thirty_models_over_six_tasks():
    missing = [name for name in ALL_TASKS if not (FIXTURES / name).is_file()]
    assert not missing, missing
    assert len(ALL_TASKS) >= 30
    tasks = set(ALL_TASKS.values())
    assert len(tasks) >= 6 and {"classification", "detection", "segmentation", "landmarks", "text", "audio",
                                "recurrent"} <= tasks


def test_every_task_fixture_is_in_the_table():
    made = {f"tasks/{p.name}" for p in (FIXTURES / "tasks").glob("*.tflite")}
    assert made <= set(MODELS) | set(KNOWN_GAPS), sorted(made - set(MODELS) - set(KNOWN_GAPS))


@pytest.mark.parametrize("name", list(KNOWN_GAPS), ids=_ids(KNOWN_GAPS))
def test_a_known_gap_is_refused_by_name_until_a_kernel_runs_it(name):
    from runtime.ir.errors import ModelError

    with pytest.raises(ModelError, match=KNOWN_GAPS[name]):
        tflite_io.load(FIXTURES / name)


@pytest.fixture(scope="module")
def shipped_phones() -> dict:
    return {}


@pytest.fixture
def reads_once(monkeypatch, shipped_phones):
    """The in-process `dtb benchmark` runs read their model file once per test and each shipped phone
    once per module, not on every one of a model's twelve runs (reading the .tflite and parsing the
    profile's YAML were over half of each run); run_everywhere's phones are read once per module too.
    The first run of each reads it as a user's run does; a Graph and a Profile are frozen, and
    `dtb run` shares one Profile among its cells the same way."""
    import sim.profile
    from runtime.cli import common

    read_model, read_phone, graphs = common.load_model, sim.profile.load_profile, {}

    def load_model(source, names):
        if source.path is None:
            return read_model(source, names)
        key = (str(source.path), source.quantization)
        if key not in graphs:
            graphs[key] = read_model(source, names)
        return graphs[key]

    def load_profile(name):
        if name not in PHONES:
            return read_phone(name)
        if name not in shipped_phones:
            shipped_phones[name] = read_phone(name)
        return shipped_phones[name]

    monkeypatch.setattr(common, "load_model", load_model)
    monkeypatch.setattr(sim.profile, "load_profile", load_profile)
    return graphs


@pytest.mark.parametrize("name", sorted(ALL_TASKS), ids=sorted(ALL_TASKS))
def test_dtb_benchmark_runs_it_on_every_phone_under_every_delegate(name, capsys, reads_once):
    """The command a user types: `dtb benchmark --graph M --device P --use_<delegate>` (timing-only,
    one run) exits 0 for every model, phone and delegate; a delegate the phone lacks only warns. The
    one refusal allowed is TFLite's own: a delegate that takes only static shapes (GPU, Hexagon, Core
    ML) on a model with dynamic-sized tensors fails to apply, as benchmark_model reports it."""
    from runtime.cli import main as cli

    path = FIXTURES / name
    for phone in PHONES:
        for kind in DELEGATES:
            code = cli.main(["benchmark", "--graph", str(path), "--device", phone, f"--use_{kind}",
                             "--timing_only", "--num_runs", "1", "--warmup_runs", "0"])
            out, err = capsys.readouterr()
            static_only = ("only supports static-sized tensors with a graph that has dynamic-sized tensors" in out
                           and "Failed to apply" in err)
            assert code == 0 or static_only, (name, phone, kind, err)
            # the tool's warnings (refusals, a model outside the fitted rows) and notes (a default that
            # differs between commands) only: no traceback, no Python warning
            assert all(": warning: " in line or ": note: " in line or static_only
                       for line in err.splitlines() if line.strip()), (
                name, phone, kind, err)
    assert len(reads_once) == 1      # the one file, read once
