"""Qualcomm AI Hub's files as calibration input: perf.yaml in its older (microseconds) and newer (milliseconds)
formats, a profile job's JSON, rows whose model file is missing listed, damaged files one clear error."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

from runtime.calibration.aihub import read_aihub, read_perf_yaml, read_profile_json
from runtime.calibration.files import read_file, read_measurements
from runtime.calibration.rows import MeasurementError, MeasurementWarning
from runtime.cli import main as cli
from runtime.model.tflite_write import save
from runtime.zoo import build
from sim.profile import PROFILE_DIR

FIXTURES = Path(__file__).parent / "fixtures" / "aihub"
NEW, OLD, JOB = FIXTURES / "new" / "tiny_cnn" / "perf.yaml", FIXTURES / "old" / "tiny_cnn" / "perf.yaml", \
    FIXTURES / "profile_job.json"
S23 = str(PROFILE_DIR / "priors" / "galaxy_s23.yaml")


def _jobs(path: Path):
    return read_perf_yaml(path.read_text(), str(path), "tiny_cnn")


def test_the_newer_format_reads_milliseconds_and_layer_counts_per_precision_and_device():
    found, failed = _jobs(NEW)
    got = {(m.precision, m.device): (m.inference_ms, m.npu_layers, m.gpu_layers, m.cpu_layers, m.delegate)
           for m in found}
    assert got == {("float", "Samsung Galaxy S23"): (0.25, 6, 0, 0, "qnn"),
                   ("float", "Samsung Galaxy S24"): (0.18, 5, 0, 1, "qnn"),
                   ("w8a8", "Samsung Galaxy S23"): (0.125, 8, 0, 0, "qnn")}     # qnn_dlc jobs are not TFLite
    assert [(s.precision, s.device, s.reason) for s in failed] == [("w8a8", "Samsung Galaxy S24",
                                                                    "job_status Failed, no time")]
    assert found[0].source.startswith(f"{NEW}:")


def test_the_older_format_stores_microseconds():
    found, failed = _jobs(OLD)
    got = {(m.precision, m.device): (m.inference_ms, m.delegate) for m in found}
    assert got == {("fp16", "Samsung Galaxy S23"): (0.25, "qnn"), ("fp16", "Samsung Galaxy S24"): (0.9, "gpu")}
    assert failed == []


def test_a_profile_jobs_json_counts_ops_per_compute_unit():
    m = read_profile_json(JOB.read_text(), str(JOB), "tiny_cnn", "galaxy_s23")
    assert (m.inference_ms, m.npu_layers, m.gpu_layers, m.cpu_layers, m.delegate) == (0.25, 2, 1, 1, "qnn")


def _folder_with_model(tmp_path: Path, fixture: Path, name: str) -> Path:
    folder = tmp_path / "tiny_cnn"
    folder.mkdir()
    shutil.copy(fixture, folder / "perf.yaml")
    save(build("tiny_cnn"), folder / name)
    return folder / "perf.yaml"


def test_rows_for_one_phone_use_the_model_file_and_list_the_ones_not_found(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    perf = _folder_with_model(tmp_path, NEW, "tiny_cnn_float.tflite")
    found = read_file(perf, device="galaxy_s23")
    [row] = found.rows
    assert (row.model, row.device, row.delegate, row.latency_ms) == (str(perf.parent / "tiny_cnn_float.tflite"),
                                                                     "galaxy_s23", "qnn", 0.25)
    [line] = found.skipped
    assert line.startswith(f"{perf}:") and "tiny_cnn w8a8 on Samsung Galaxy S23: model file not found" in line
    assert "tiny_cnn_w8a8.tflite" in line
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert len(read_measurements(perf, device="Samsung Galaxy S23")) == 1
    assert [str(w.message) for w in seen if w.category is MeasurementWarning] == [line]


def test_the_npu_and_the_gpu_together_run_qnn_then_the_gpu_delegate(tmp_path):
    save(build("tiny_cnn"), tmp_path / "tiny_cnn.tflite")
    rows = read_aihub(JOB, JOB.read_text(), "galaxy_s23", str(tmp_path / "tiny_cnn.tflite")).rows
    assert [(r.delegate, r.flags) for r in rows] == [("qnn", ("--use_gpu=true",))]


def test_a_phone_the_file_never_measured_is_an_error_naming_the_phones_it_has():
    with pytest.raises(MeasurementError, match=r"no TFLite measurement on pixel4; the file has Samsung Galaxy S23, "
                                               r"Samsung Galaxy S24"):
        read_file(NEW, device="pixel4")


@pytest.mark.parametrize("fixture, old, new, message", [
    (NEW, "inference_time_milliseconds: 0.25", "inference_time_milliseconds: fast",
     r"perf.yaml:\d+: precisions.float.components.Tiny-CNN.performance_metrics.Samsung Galaxy S23.tflite"
     r".inference_time_milliseconds: must be a positive number, got 'fast'"),
    (NEW, "              layer_counts:\n                total: 6\n                npu: 6\n", "",
     r"perf.yaml:\d+: precisions.float.components.Tiny-CNN.performance_metrics.Samsung Galaxy S23.tflite"
     r".layer_counts: required key is missing"),
    (NEW, "precisions:", "precision:", r"perf.yaml:\d+: neither 'precisions' .* nor 'models'"),
    (OLD, "inference_time: 250.0", "inference_time: -1", r"perf.yaml:\d+: models\[0\].performance_metrics\[0\]"
     r".torchscript_onnx_tflite.inference_time: must be a positive number, got -1"),
    (OLD, "        layers_on_npu: 6\n", "        layers_on_npu: six\n", r"layer_info.layers_on_npu: must be an "
     r"integer >= 0, got 'six'"),
    (OLD, "    reference_device_info:\n      name: Samsung Galaxy S23\n", "    reference_device_info:\n",
     r"perf.yaml:\d+: models\[0\].performance_metrics\[0\].reference_device_info.name: required key is missing"),
    (OLD, "  performance_metrics:\n  - torchscript", "  performance_metric:\n  - torchscript",
     r"models\[0\].performance_metrics: required key is missing"),
    (JOB, '"estimated_inference_time": 250', '"estimated_inference_times": 250',
     r"profile_job.json: execution_summary.estimated_inference_time: required key is missing"),
    (JOB, '"compute_unit": "CPU"', '"compute_unit": "TPU"',
     r"profile_job.json: execution_detail\[3\].compute_unit: must be one of NPU, GPU, CPU, got 'TPU'"),
    (JOB, '"execution_detail": [', '"execution_detail": [,', r"profile_job.json:\d+: invalid JSON"),
    # a unit that is a list or a mapping (unhashable), a time too large for a float, or one that is
    # zero in milliseconds, a device named by a number: each once a Python traceback
    (JOB, '"compute_unit": "CPU"', '"compute_unit": ["CPU"]',
     r"profile_job.json: execution_detail\[3\].compute_unit: must be one of NPU, GPU, CPU, got \['CPU'\]"),
    (JOB, '"compute_unit": "CPU"', '"compute_unit": {"unit": "CPU"}',
     r"execution_detail\[3\].compute_unit: must be one of NPU, GPU, CPU, got \{'unit': 'CPU'\}"),
    pytest.param(JOB, '"estimated_inference_time": 250', '"estimated_inference_time": 1' + "0" * 400,
                 r"profile_job.json: execution_summary.estimated_inference_time: must be a positive number, got 1000",
                 id="json-401-digit-time"),
    (JOB, '"estimated_inference_time": 250', '"estimated_inference_time": 4.9e-324',
     r"profile_job.json: execution_summary.estimated_inference_time: 4.94066e-324 us \(0 ms\) is not a latency "
     r"in \[1e-6, 1e7\) ms"),
    (JOB, '"estimated_inference_time": 250', '"estimated_inference_time": 1e300', r"is not a latency in"),
    pytest.param(NEW, "inference_time_milliseconds: 0.25", "inference_time_milliseconds: 1" + "0" * 400,
                 r"perf.yaml:\d+: precisions.float.*inference_time_milliseconds: must be a positive number, got 1000",
                 id="yaml-401-digit-time"),
    (OLD, "inference_time: 250.0", "inference_time: 0.0000001", r"perf.yaml:\d+: models\[0\].performance_metrics"
     r"\[0\].torchscript_onnx_tflite.inference_time: 1e-07 us \(1e-10 ms\) is not a latency in"),
    (NEW, "          Samsung Galaxy S24:", "          24:", r"perf.yaml:40: precisions.float.components.Tiny-CNN"
     r".performance_metrics.24: a device name must be a non-empty string, got 24"),
    (NEW, "          Samsung Galaxy S24:", "          2024-01-01:", r"performance_metrics.2024-01-01: a device name "
     r"must be a non-empty string, got datetime.date"),
    # json keeps the last of two values of a key (the first went unread), as YAML and CSV readers refuse
    (JOB, '"estimated_inference_time": 250', '"estimated_inference_time": 250, "estimated_inference_time": 1',
     r"profile_job.json: invalid JSON: key 'estimated_inference_time' given twice"),
])
def test_a_damaged_file_is_one_error_naming_the_file_and_key(tmp_path, fixture, old, new, message):
    text = fixture.read_text()
    assert old in text
    path = tmp_path / fixture.name
    path.write_text(text.replace(old, new))
    with pytest.raises(MeasurementError, match=message) as info:
        read_file(path, device="galaxy_s23")
    assert str(info.value).startswith(str(path)) and "\n" not in str(info.value)


@pytest.mark.parametrize("text, message", [
    ("[" * 100_000 + "]" * 100_000, "invalid JSON: nested too deeply"),
    ('{"execution_summary": {"estimated_inference_time": 1' + "0" * 5000 + '}}', "invalid JSON: Exceeds the limit"),
], ids=["nested-100000-deep", "5001-digit-integer"])
def test_json_the_decoder_cannot_build_is_one_error_naming_the_file(tmp_path, text, message):
    path = tmp_path / "profile_job.json"
    path.write_text(text)
    with pytest.raises(MeasurementError, match=rf"^{path}: {message}") as info:
        read_file(path, device="galaxy_s23")
    assert "\n" not in str(info.value)


def test_a_precision_too_long_for_a_file_name_is_a_skipped_row_not_an_os_error(tmp_path):
    """The model file's name is built from the precision: a 300-character one once raised ENAMETOOLONG from
    the file system (an OSError traceback) instead of listing the row as not found."""
    path = tmp_path / "tiny_cnn" / "perf.yaml"
    path.parent.mkdir()
    path.write_text(NEW.read_text().replace("  float:", "  " + "f" * 300 + ":"))
    found = read_file(path, device="galaxy_s23")
    assert found.rows == () and len(found.skipped) == 2
    assert found.skipped[0].startswith(f"{path}:") and "model file not found" in found.skipped[0]


def test_a_profile_jobs_model_may_be_a_tflite_xz(tmp_path):
    """--model m.tflite.xz (as the rebuilt models are kept) was looked for as m.tflite.tflite and never found."""
    import lzma

    save(build("tiny_cnn"), tmp_path / "tiny_cnn.tflite")
    model = tmp_path / "tiny_cnn.tflite.xz"
    model.write_bytes(lzma.compress((tmp_path / "tiny_cnn.tflite").read_bytes(), format=lzma.FORMAT_XZ))
    (tmp_path / "tiny_cnn.tflite").unlink()
    found = read_aihub(JOB, JOB.read_text(), "galaxy_s23", str(model))
    assert [r.model for r in found.rows] == [str(model)] and found.skipped == ()


def test_op_split_lists_the_rows_whose_model_file_is_missing(tmp_path, capsys, monkeypatch):
    """--op_split read the files' rows alone: the w8a8 job without a model file was dropped unsaid."""
    monkeypatch.chdir(tmp_path)
    perf = _folder_with_model(tmp_path, NEW, "tiny_cnn_float.tflite")
    assert cli.main(["calibrate", str(perf), "--base", S23, "--op_split"]) == 0
    err = capsys.readouterr().err
    assert err.count("skipped: ") == 1 and "tiny_cnn w8a8 on Samsung Galaxy S23: model file not found" in err
    (perf.parent / "tiny_cnn_float.tflite").unlink()
    assert cli.main(["calibrate", str(perf), "--base", S23, "--op_split"]) == 1
    err = capsys.readouterr().err
    assert err.count("skipped: ") == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == "dtb calibrate: error: no measurement row to check (every one was skipped)"


def test_a_device_the_base_does_not_match_is_named_whatever_the_files_device_keys(tmp_path):
    """The error listing the file's phones once sorted a number beside names (a TypeError)."""
    path = tmp_path / "perf.yaml"
    path.write_text(NEW.read_text().replace("          Samsung Galaxy S24:", "          24:"))
    with pytest.raises(MeasurementError, match=r"performance_metrics.24: a device name must be a non-empty string"):
        read_file(path, device="pixel4")


def test_a_profile_job_of_zero_milliseconds_is_refused_on_the_command_line(tmp_path, capsys):
    """4.9e-324 us is 0 ms: the fit once divided by it (ZeroDivisionError) after building the model."""
    save(build("tiny_cnn"), tmp_path / "tiny_cnn.tflite")
    path = tmp_path / "tiny_cnn.json"
    path.write_text(JOB.read_text().replace('"estimated_inference_time": 250', '"estimated_inference_time": 4.9e-324'))
    assert cli.main(["calibrate", str(path), "--base", S23, "--device", "galaxy_s23", "--max_nfev", "1"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"{path}: execution_summary.estimated_inference_time: " in err and "is not a latency" in err


def test_calibrate_on_a_perf_yaml_fits_the_found_rows_and_lists_the_rest(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    perf = _folder_with_model(tmp_path, NEW, "tiny_cnn_float.tflite")
    out = tmp_path / "s23.yaml"
    assert cli.main(["calibrate", str(perf), "--base", S23, "-o", str(out), "--max_nfev", "2"]) == 0
    captured = capsys.readouterr()
    assert "skipped: " in captured.err and "tiny_cnn w8a8 on Samsung Galaxy S23: model file not found" in captured.err
    assert out.is_file()


def test_calibrate_with_no_model_file_at_all_exits_with_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["calibrate", str(NEW), "--base", S23]) == 1
    err = capsys.readouterr().err
    assert err.count("skipped: ") == 2
    assert err.strip().splitlines()[-1].startswith("dtb calibrate: error: no measurement row to fit")
