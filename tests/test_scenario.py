"""Scenario files: shipped scenarios load, matrices expand in order, every mistake names file, line and key."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from runtime.ir.errors import ScenarioError
from runtime.scenario.load import (DelegateSpec, Distribution, Quantization, known_profiles, load_scenario,
                              scenario_from_text)

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
HEAD = "device: pixel3\nmodel:\n  zoo: tiny_cnn\n"     # a valid start; cases append to it (lines 1-3)

SHIPPED = {
    "gpu_float_mobilenet.yaml": ["delegates=cpu", "delegates=gpu(precision_loss_allowed=true,backend=cl)"],
    "hexagon_int8_vs_float.yaml": ["quantization=none", "quantization=int8"],
    "coreml_iphone_xs.yaml": ["delegates=cpu", "delegates=coreml"],
    "nnapi_per_accelerator.yaml": ["delegates=nnapi(accelerator_name=google-edgetpu)",
                                   "delegates=nnapi(accelerator_name=qti-dsp)",
                                   "delegates=nnapi(accelerator_name=qti-gpu)", "delegates=nnapi"],
    "many_partitions.yaml": ["delegates=cpu", "delegates=coreml"],
    "phones_cpu_gpu.yaml": [f"device={d} delegates={k}" for d in ("pixel3", "pixel4", "iphone_xs")
                            for k in ("cpu", "gpu")],
    "int8_by_phone.yaml": [f"device={d} delegates={k}" for d in ("pixel3", "pixel4")
                           for k in ("cpu", "hexagon", "nnapi")],
    "published_check.yaml": [f"zoo={m} device={d} delegates={k}" for m in ("mobilenet_v1", "squeezenet")
                             for d in ("pixel3", "pixel4", "iphone_xs") for k in ("cpu", "gpu", "nnapi")],
    "sustained_camera.yaml": ["sustained_camera"],   # concurrent apps for 600 s (tests/test_apps.py)
    "sustained_camera_phones.yaml": ["device=pixel3", "device=pixel4", "device=iphone_xs"],
    "todays_phones.yaml": [f"device={d} path=../sim/profiles/measurements/aihub/{m}_{p}.tflite.xz delegates={k}"
                           for d in ("galaxy_s23", "galaxy_s24", "sd8_elite_qrd", "galaxy_s25")
                           for p in ("float", "w8a8")
                           for m in ("resnet18", "resnet50", "resnet101", "resnext50", "googlenet", "mobilenet_v2",
                                     "mobilenet_v3_large", "squeezenet1_1", "efficientnet_b0", "regnet",
                                     "shufflenet_v2", "densenet121")
                           for k in ("cpu", "gpu", "qnn")],
}


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def error_of(path: Path) -> str:
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    return str(info.value)


# ---- shipped scenarios


def test_every_shipped_scenario_is_listed():
    assert sorted(p.name for p in SCENARIOS.glob("*.yaml")) == sorted(SHIPPED)


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_scenario_expands_to_its_cells(name):
    cells = load_scenario(SCENARIOS / name)
    assert [c.label for c in cells] == SHIPPED[name]
    assert all(c.name == Path(name).stem and c.source == (SCENARIOS / name).resolve() for c in cells)
    assert all(hasattr(c, "apps") or c.runs.warmup == 1 and c.runs.count == 10 for c in cells)
    assert all(c.description for c in cells)
    assert SCENARIOS.joinpath(name).read_text().startswith("# ")


def test_shipped_scenarios_say_what_they_vary():
    hexagon = load_scenario(SCENARIOS / "hexagon_int8_vs_float.yaml")
    assert [c.model.quantization for c in hexagon] == [Quantization.NONE, Quantization.INT8]
    assert all(c.device == "pixel3" and [d.kind for d in c.delegates] == ["hexagon"] for c in hexagon)
    nnapi = load_scenario(SCENARIOS / "nnapi_per_accelerator.yaml")
    assert [dict(c.delegates[0].options) for c in nnapi] == [
        {"accelerator_name": "google-edgetpu"}, {"accelerator_name": "qti-dsp"}, {"accelerator_name": "qti-gpu"}, {}]
    phones = load_scenario(SCENARIOS / "phones_cpu_gpu.yaml")
    assert [(c.device, tuple(d.kind for d in c.delegates)) for c in phones] == [
        ("pixel3", ()), ("pixel3", ("gpu",)), ("pixel4", ()), ("pixel4", ("gpu",)),
        ("iphone_xs", ()), ("iphone_xs", ("gpu",))]
    lstm = load_scenario(SCENARIOS / "many_partitions.yaml")[0].model
    assert lstm.zoo is None and lstm.path.name == "lstm_unrolled.tflite" and lstm.path.is_file()


def test_known_profiles_are_the_simulators():
    from sim.profile import list_profiles
    assert known_profiles() == tuple(list_profiles())
    assert {"pixel3", "pixel4", "iphone_xs", "generic"} <= set(known_profiles())


# ---- the schema and the matrix


def test_defaults_and_name_from_file_stem(tmp_path):
    (s,) = load_scenario(write(tmp_path, HEAD, "my_run.yaml"))
    assert (s.name, s.label, s.cell, s.device, s.device_file) == ("my_run", "my_run", (), "pixel3", None)
    assert (s.model.zoo, dict(s.model.args), s.model.quantization) == ("tiny_cnn", {}, Quantization.NONE)
    assert (s.delegates, s.cpu.threads, s.streams, s.timing_only) == ((), None, 1, False)
    assert (s.inputs.distribution, s.inputs.seed, s.runs.warmup, s.runs.count) == (Distribution.GAUSSIAN, 0, 1, 50)


def test_every_key_is_read(tmp_path):
    text = ("name: full\ndescription: all keys\ndevice: pixel4\n"
            "model: {zoo: mobilenet_v1, args: {alpha: 0.25, resolution: 96}, quantization: dynamic_range}\n"
            "delegates:\n  - gpu: {backend: gl}\n  - hexagon\n  - external: {path: 'pkg.mod:make', options: {a: 1}}\n"
            "cpu: {threads: 2}\ninputs: {distribution: uniform, low: -1, high: 2.5, seed: 7}\n"
            "runs: {warmup: 0, count: 3}\nstreams: 2\ntiming_only: true\n")
    (s,) = load_scenario(write(tmp_path, text), allow_external_delegates=True)
    assert (s.name, s.description, s.device) == ("full", "all keys", "pixel4")
    assert dict(s.model.args) == {"alpha": 0.25, "resolution": 96}
    assert s.model.quantization is Quantization.DYNAMIC_RANGE
    assert s.delegates == (DelegateSpec("gpu", {"backend": "gl"}), DelegateSpec("hexagon", {}),
                           DelegateSpec("external", {"a": 1}, "pkg.mod:make"))
    assert (s.cpu.threads, s.streams, s.timing_only, s.runs.warmup, s.runs.count) == (2, 2, True, 0, 3)
    assert (s.inputs.distribution, s.inputs.low, s.inputs.high, s.inputs.seed) == (Distribution.UNIFORM, -1.0, 2.5, 7)


def test_matrix_is_a_cartesian_product_in_key_order(tmp_path):
    text = HEAD + "matrix:\n  runs.count: [1, 2]\n  device: [pixel3, pixel4, generic]\n"
    cells = load_scenario(write(tmp_path, text))
    assert [c.cell for c in cells] == [(("runs.count", n), ("device", d)) for n in (1, 2)
                                       for d in ("pixel3", "pixel4", "generic")]
    assert [(c.runs.count, c.device) for c in cells] == [(n, d) for n in (1, 2) for d in ("pixel3", "pixel4", "generic")]
    assert cells[4].label == "count=2 device=pixel4"


def test_matrix_values_reach_nested_and_free_keys(tmp_path):
    text = ("device: pixel3\nmodel: {zoo: mobilenet_v1}\ninputs: {seed: 1}\nmatrix:\n"
            "  model.args.alpha: [0.25, 0.5]\n  model.args.seed: [3]\n  inputs.seed: [4]\n")
    cells = load_scenario(write(tmp_path, text))
    assert [dict(c.model.args) for c in cells] == [{"alpha": 0.25, "seed": 3}, {"alpha": 0.5, "seed": 3}]
    assert all(c.inputs.seed == 4 for c in cells)
    # two keys ending in `seed`: the label spells both out
    assert cells[0].label == "alpha=0.25 model.args.seed=3 inputs.seed=4"


def test_matrix_may_supply_a_required_key(tmp_path):
    cells = load_scenario(write(tmp_path, "model: {zoo: tiny_cnn}\nmatrix:\n  device: [pixel3]\n"))
    assert [c.device for c in cells] == ["pixel3"]


def test_delegate_lists_label_as_kinds(tmp_path):
    text = HEAD + "matrix:\n  delegates: [[], [gpu, {nnapi: {}}], [{hexagon: {min_nodes_per_partition: 1}}]]\n"
    assert [c.label for c in load_scenario(write(tmp_path, text))] == [
        "delegates=cpu", "delegates=gpu+nnapi", "delegates=hexagon(min_nodes_per_partition=1)"]


def test_relative_paths_resolve_against_the_scenario_folder(tmp_path):
    for name in ("models/m.tflite", "phones/p.yaml"):
        write(tmp_path, "placeholder", name)
    np.savez(write(tmp_path, "", "data/x.npz"), input=np.zeros((1, 4), np.float32))
    text = "device: ../phones/p.yaml\nmodel: {path: ../models/m.tflite}\ninputs: {file: ../data/x.npz}\n"
    (s,) = load_scenario(write(tmp_path, text, "sub/s.yaml"))
    assert s.model.path == (tmp_path / "models/m.tflite").resolve()
    assert s.inputs == dataclasses.replace(s.inputs, distribution=Distribution.FILE,
                                           file=(tmp_path / "data/x.npz").resolve())
    assert (s.device, s.device_file) == ("p", (tmp_path / "phones/p.yaml").resolve())


def test_scenario_from_text_uses_the_given_source(tmp_path):
    write(tmp_path, "x", "m.tflite")
    (s,) = scenario_from_text("device: pixel3\nmodel: {path: m.tflite}\n", tmp_path / "t.yaml")
    assert (s.name, s.model.path) == ("t", (tmp_path / "m.tflite").resolve())


def test_scenarios_are_read_only(tmp_path):
    (s,) = load_scenario(write(tmp_path, HEAD + "delegates: [{gpu: {x: [1]}}]\n"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.streams = 2
    with pytest.raises(TypeError):
        s.delegates[0].options["x"] = 2
    assert s.delegates[0].options["x"] == (1,)


# ---- errors: (text, line, key path, words in the message)

ERRORS = [
    (HEAD + "streem: 2\n", 4, "streem", "did you mean 'streams'"),
    ("device: pixel3\nmodel:\n  zoo: tiny_cnn\n  quantisation: int8\n", 4, "model.quantisation",
     "did you mean 'quantization'"),
    (HEAD + "runs:\n  count: 5\n  warmpu: 1\n", 6, "runs.warmpu", "did you mean 'warmup'"),
    ("model:\n  zoo: tiny_cnn\n", 1, "device", "required key missing"),
    ("\ndevice: pixel3\n", 2, "model", "required key missing"),
    ("device: pixel3\nmodel:\n  zoo: tiny_cnn\n  path: m.tflite\n", 2, "model", "exactly one of zoo"),
    ("device: pixel3\nmodel:\n  args: {}\n", 2, "model", "exactly one of zoo"),
    ("device: pixel3\nmodel:\n  zoo: mobilenet_v3\n", 3, "model.zoo", "did you mean 'mobilenet_v2'"),
    ("device: pixel3\nmodel:\n  zoo: mobilenet_v1\n  args:\n    resolutoin: 96\n", 5, "model.args.resolutoin",
     "did you mean 'resolution'"),
    ("device: pixel3\nmodel:\n  zoo: mobilenet_v1\n  args: {resolution: 96.5}\n", 4, "model.args.resolution",
     "expected an integer"),
    ("device: pixel3\nmodel:\n  zoo: tiny_cnn\n  quantization: int4\n", 4, "model.quantization",
     "not one of none, float16, dynamic_range, int8"),
    ("device: pixel3\nmodel:\n  path: missing.tflite\n", 3, "model.path", "does not exist"),
    ("device: pixel5\nmodel: {zoo: tiny_cnn}\n", 1, "device", "did you mean 'pixel"),
    ("device: phones/none.yaml\nmodel: {zoo: tiny_cnn}\n", 1, "device", "does not exist"),
    ("device: 4\nmodel: {zoo: tiny_cnn}\n", 1, "device", "expected a non-empty string, got an integer"),
    (HEAD + "delegates:\n  - gpu: {}\n  - hexagn: {}\n", 6, "delegates[1].hexagn", "did you mean 'hexagon'"),
    (HEAD + "delegates: {gpu: {}}\n", 4, "delegates", "expected a list of delegates"),
    (HEAD + "delegates:\n  - {gpu: {}, nnapi: {}}\n", 5, "delegates[0]", "expected one delegate"),
    (HEAD + "delegates:\n  - gpu: [1]\n", 5, "delegates[0].gpu", "expected a mapping"),
    (HEAD + "delegates:\n  - external: {options: {}}\n", 5, "delegates[0].external.path", "required key missing"),
    (HEAD + "delegates:\n  - external:\n      path: mod.factory\n", 6, "delegates[0].external.path",
     "package.module:callable"),
    (HEAD + "runs:\n  count: 0\n", 5, "runs.count", "must be a positive integer"),
    (HEAD + "runs:\n  warmup: -1\n", 5, "runs.warmup", "must be at least 0"),
    (HEAD + "streams: 1.5\n", 4, "streams", "expected an integer, got a number"),
    (HEAD + "streams: true\n", 4, "streams", "expected an integer, got a boolean"),
    (HEAD + "cpu:\n  threads: 0\n", 5, "cpu.threads", "must be a positive integer"),
    (HEAD + "timing_only: yes please\n", 4, "timing_only", "expected true or false"),
    (HEAD + "inputs: {distribution: normal}\n", 4, "inputs.distribution", "not one of gaussian, uniform"),
    (HEAD + "inputs:\n  file: x.npy\n", 5, "inputs.file", "does not exist"),
    (HEAD + "inputs:\n  low: 0\n", 5, "inputs.low", "uniform distribution only"),
    (HEAD + "inputs:\n  distribution: uniform\n  low: 1\n  high: 1\n", 7, "inputs.high", "must be above low"),
    (HEAD + "matrix:\n  model.quantisation: [int8]\n", 5, "matrix.model.quantisation",
     "did you mean 'model.quantization'"),
    (HEAD + "matrix:\n  model.args.alpha.x: [1]\n", 5, "matrix.model.args.alpha.x", "not a scenario key path"),
    (HEAD + "matrix:\n  name: [a, b]\n", 5, "matrix.name", "cannot vary"),
    (HEAD + "matrix:\n  device: []\n", 5, "matrix.device", "non-empty list"),
    (HEAD + "matrix:\n  device: pixel4\n", 5, "matrix.device", "non-empty list"),
    (HEAD + "matrix: {}\n", 4, "matrix", "at least one key path"),
    (HEAD + "matrix:\n  model: [{zoo: tiny_cnn}]\n  model.quantization: [int8]\n", 6, "matrix.model.quantization",
     "overlaps matrix key 'model'"),
    ("device: pixel3\nmodel: tiny_cnn\nmatrix:\n  model.quantization: [int8]\n", 4, "matrix.model.quantization[0]",
     "model is not a mapping"),
    # a bad matrix value is reported at its matrix entry, under the key path it sets
    (HEAD + "matrix:\n  device:\n    - pixel4\n    - pixel9\n", 7, "device", "unknown device profile 'pixel9'"),
    (HEAD + "matrix:\n  delegates:\n    - []\n    - [gpu: {}, nnapi: 3]\n", 7, "delegates[1].nnapi",
     "expected a mapping"),
    (HEAD + "device: pixel3\n", 4, "device", "duplicate key"),
]


@pytest.mark.parametrize("text, line, key, words", ERRORS)
def test_error_names_file_line_and_key(tmp_path, text, line, key, words):
    path = write(tmp_path, text)
    message = error_of(path)
    assert message.startswith(f"{path}:{line}: {key}: "), message
    assert words in message, message


def test_quantizing_a_tflite_file_is_reported_at_the_matrix_entry(tmp_path):
    write(tmp_path, "x", "m.tflite")
    path = write(tmp_path, "device: pixel3\nmodel: {path: m.tflite}\nmatrix:\n  model.quantization:\n"
                           "    - none\n    - int8\n")
    assert error_of(path).startswith(f"{path}:6: model.quantization: quantization applies to zoo models only")


@pytest.mark.parametrize("text, line, words", [
    ("device: pixel3\nmodel: {zoo: tiny_cnn\n", 3, "invalid YAML"),
    ("device: pixel3\n  model: x\n", 2, "invalid YAML"),
    ("device: [pixel3\n", 2, "invalid YAML"),
    ("", 1, "empty"),
    ("- device\n", 1, "expected a mapping, got a list"),
    ("a: &x [*x]\n", 1, "recursive alias"),
])
def test_malformed_documents(tmp_path, text, line, words):
    path = write(tmp_path, text)
    message = error_of(path)
    assert message.startswith(f"{path}:{line}: ") and words in message, message


def test_missing_scenario_file_is_named(tmp_path):
    path = tmp_path / "nope.yaml"
    assert error_of(path) == f"{path}: no such scenario file"


def test_a_folder_is_not_a_scenario(tmp_path):
    assert error_of(tmp_path).startswith(f"{tmp_path}: cannot read the scenario")


# Documents built from the schema's own keys and arbitrary values: loading either works or says why.
_KEYS = st.sampled_from(["device", "model", "zoo", "path", "args", "quantization", "delegates", "gpu",
                         "external", "inputs", "file", "runs", "count", "matrix", "device.x", "streams", "1"])
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False),
                     st.sampled_from(["pixel3", "tiny_cnn", "gpu", "int8", "", "a/b.yaml", "m:f"]))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(_KEYS, inner, max_size=3)), max_leaves=12)


@given(st.dictionaries(_KEYS, _VALUES, max_size=6))
def test_any_document_loads_or_raises_scenario_error(document):
    try:
        scenario_from_text(yaml.safe_dump(document), "fuzz.yaml")
    except ScenarioError as exc:
        assert str(exc).startswith("fuzz.yaml:")


@pytest.mark.parametrize("options, message", [
    ("{htp_vtcm_size: .inf}", "qnn option 'htp_vtcm_size' must be int, not inf"),
    ("{htp_vtcm_size: 8.7}", "qnn option 'htp_vtcm_size' must be int, not 8.7"),
    ("{htp_vtcm_size: true}", "qnn option 'htp_vtcm_size' must be int, not True"),
    ("{library_path: null}", "qnn option 'library_path' must be text, not None"),
])
def test_a_delegate_option_of_the_wrong_kind_stops_dtb_run_in_one_line(tmp_path, capsys, options, message):
    """`.inf` for an integer option was an OverflowError traceback; 8.7 ran as 8, true as 1 MB of VTCM."""
    from runtime.cli.main import main

    path = tmp_path / "qnn.yaml"
    path.write_text(f"device: galaxy_s24\nmodel:\n  zoo: tiny_cnn\ndelegates:\n  - qnn: {options}\n")
    assert main(["run", "--check", str(path)]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_dtb_run_says_once_what_a_delegate_said_of_its_options(tmp_path, capsys):
    """An option of the QNN backend not in use changes nothing: dtb benchmark warned, dtb run kept quiet."""
    import json

    from runtime.cli.main import main

    path = tmp_path / "qnn.yaml"
    path.write_text("device: galaxy_s24\nmodel:\n  zoo: tiny_cnn\n  args: {resolution: 16}\ntiming_only: true\n"
                    "runs: {warmup: 0, count: 1}\nmatrix:\n  cpu.threads: [1, 2]\n"
                    "delegates:\n  - qnn: {backend_type: gpu, htp_precision: quantized}\n")
    assert main(["run", str(path), "-o", str(tmp_path / "out")]) == 0
    said = "QNN delegate: htp_precision quantized has no effect with backend_type gpu"
    warned = [line for line in capsys.readouterr().err.splitlines() if said in line]
    assert len(warned) == 1 and warned[0].startswith("dtb run: warning: ")   # two cells, said once
    records = json.loads((tmp_path / "out" / "results.json").read_text())["records"]
    assert all(any(said in w for w in r["delegate_warnings"]) for r in records) and len(records) == 2
