"""Damaged `dtb calibrate` inputs: generated CSVs, benchmark_model logs, base profiles and outputs give one line."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from runtime.calibration.files import read_file
from runtime.calibration.base import load_base
from runtime.calibration.rows import MAX_FIELD, MAX_ROWS, MeasurementError, read_csv, read_log
from runtime.cli import main as cli
from runtime.ir.errors import ProfileError
from sim.profile import PROFILE_DIR

HEADER = "model,args,quantization,device,delegate,threads,latency_ms\n"
GOOD = ["tiny_cnn", "", "none", "pixel3", "cpu", "1", "2.0"]
LOG_TIMINGS = "Inference timings in us: Init: 10, First inference: 20, Warmup (avg): 30, Inference (avg): {}\n"
# Numbers a measurement file must refuse; float() takes several of them.
BAD_NUMBERS = ["1.2.6", "e", "+-", "abc", "inf", "-inf", "nan", "1e999", "1e-310", "4.9e-324", "1_000", "١٢",
               "0x10", "1e", ".", "--1", "x" * 200_000, "9" * (MAX_FIELD + 1)]
FIELDS = {"threads": 5, "latency_ms": 6}
SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _csv(*rows: list[str]) -> str:
    return HEADER + "".join(",".join(r) + "\n" for r in rows)


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# -- numbers, strictly, with file and line -----------------------------------------------------------

@pytest.mark.parametrize("value", BAD_NUMBERS, ids=lambda v: v[:12])
@pytest.mark.parametrize("column", sorted(FIELDS))
def test_every_damaged_number_names_file_line_and_column(value, column):
    row = list(GOOD)
    row[FIELDS[column]] = value
    with pytest.raises(MeasurementError) as info:
        read_csv(_csv(GOOD, row), "m.csv")
    message = str(info.value)
    assert "\n" not in message and len(message) < 400
    assert message.startswith("m.csv:3:"), message


@pytest.mark.parametrize("value", BAD_NUMBERS, ids=lambda v: v[:12])
def test_damaged_args_number_and_log_timings_are_refused(value):
    with pytest.raises(MeasurementError, match=r"m.csv:2: (.*args: alpha|args: a field of|a line of)"):
        read_csv(_csv(["tiny_cnn", f"alpha={value}", "none", "pixel3", "cpu", "1", "2"]), "m.csv")
    if len(value) < 100:   # the timings line only matches digits, points, e and signs
        log = "Graph: [tiny_cnn.tflite]\n" + LOG_TIMINGS.format(value)
        try:
            read_log(log, "b.log")
        except MeasurementError as exc:
            assert str(exc).startswith("b.log:2: ") or "no 'Inference timings" in str(exc), exc
        else:
            pytest.fail(f"{value!r} read as a latency")


def test_log_op_profile_numbers_are_strict():
    log = ("Graph: [tiny_cnn.tflite]\n" + LOG_TIMINGS.format("1500") + "Summary by node type\n"
           "node type  count  avg_ms  avg %\nCONV_2D  2  1.2.6  50%\n")
    with pytest.raises(MeasurementError, match=r"^b.log:5: CONV_2D: avg_ms: '1.2.6' is not a number"):
        read_log(log, "b.log")
    assert read_log(log.replace("1.2.6", "0.75"), "b.log")[0].per_type == (("CONV_2D", 0.75),)


@pytest.mark.parametrize("graph, message", [
    ("zoo:tiny_cnn?alpha=abc", r"Graph zoo:tiny_cnn\?alpha=abc: args: alpha: 'abc' is not a number"),
    ("zoo:tiny_cnn?=5", r"Graph zoo:tiny_cnn\?=5: args: '=5' is not key=value"),
    ("zoo:tiny_cnn?alpha=0.5&quantization=int4", r"Graph zoo:tiny_cnn\?alpha=0.5&quantization=int4: quantization "
                                                 r"'int4' is not one of none, float16"),
])
def test_a_damaged_graph_line_names_the_log_file_and_line(graph, message):
    """The Graph line's zoo arguments and quantization, checked as a CSV row's are (once: no file named)."""
    with pytest.raises(MeasurementError, match=rf"^b.log:2: {message}"):
        read_log(f"Graph: [{graph}]\n" + LOG_TIMINGS.format("1500"), "b.log")


def test_a_column_or_an_argument_given_twice_is_refused_not_overwritten():
    """csv keeps the last of two same-named columns and the row's args kept both: one value went unread."""
    with pytest.raises(MeasurementError, match=r"^m.csv:1: column\(s\) named more than once: model$"):
        read_csv(HEADER.replace("\n", ",model\n") + ",".join(GOOD) + ",squeezenet\n", "m.csv")
    row = ["mobilenet_v1", "alpha=0.5;alpha=0.25"] + GOOD[2:]
    with pytest.raises(MeasurementError, match=r"^m.csv:2: args: 'alpha' given more than once$"):
        read_csv(_csv(row), "m.csv")


def test_a_csv_saved_with_a_byte_order_mark_reads_its_first_column(tmp_path):
    """A spreadsheet's "CSV UTF-8" starts with U+FEFF, which made the first column '\ufeffmodel' (missing)."""
    (tmp_path / "m.csv").write_bytes(b"\xef\xbb\xbf" + _csv(GOOD).encode())
    [row] = read_file(tmp_path / "m.csv").rows
    assert (row.model, row.latency_ms) == ("tiny_cnn", 2.0)


FLAGS_HEADER = HEADER.replace("\n", ",flags\n")


@pytest.mark.parametrize("flags, refused", [
    ("--external_delegate_path=os:system --external_delegate_options=command:true",
     "'--external_delegate_path=os:system' names an external delegate, whose code would run"),
    ("--use_gpu=true --delegate_serialize_dir=/tmp/cache --delegate_serialize_token=t",
     "'--delegate_serialize_dir=/tmp/cache' names a folder to write a compilation cache to"),
    ("--use_qnn=true --qnn_cache_dir=/tmp/cache --qnn_model_token=t",
     "'--qnn_cache_dir=/tmp/cache' names a folder to write a compilation cache to"),
    ("--external_delegate_path=libQnnTFLiteDelegate.so --external_delegate_options=backend_type:htp;cache_dir:/tmp",
     "'--external_delegate_options=backend_type:htp;cache_dir:/tmp' names a folder to write a compilation cache to"),
], ids=["external-code", "gpu-cache", "qnn-cache", "qnn-library-cache"])
def test_a_rows_flags_may_neither_run_code_nor_write_files(flags, refused):
    """The flags column went to the delegates as given: os:system was imported and called with the row's
    options, and a cache folder anywhere was created and written to, by reading a measurement file."""
    with pytest.raises(MeasurementError) as info:
        read_csv(FLAGS_HEADER + ",".join(GOOD) + f",{flags}\n", "m.csv")
    assert str(info.value) == f"m.csv:2: flags: {refused}; a measurement row may not"


def test_a_rows_qnn_library_flags_are_read():
    """Qualcomm's QNN library as an external delegate is the built-in QNN delegate: it runs nothing."""
    flags = "--external_delegate_path=/data/local/tmp/libQnnTFLiteDelegate.so --external_delegate_options=backend_type:htp"
    [row] = read_csv(FLAGS_HEADER + ",".join(GOOD) + f",{flags}\n", "m.csv")
    assert row.flags == tuple(flags.split())


class _Hung(BaseException):
    """Raised from SIGALRM: a BaseException, so no handler on the way swallows it."""


def test_a_log_line_repeating_the_timings_header_is_read_in_linear_time():
    """A hang guard (120 s), not a speed criterion: the regex search this replaced read a line repeating
    "Inference timings in us: " in quadratic time (13 s for 250 KB, 3 minutes for 1 MB, so this 4 MB
    line about 50 minutes and a 32 MB log days); it now takes milliseconds."""
    def hung(*_):
        raise _Hung("read_log still reading a 4 MB line after 120 s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(120)
    try:
        with pytest.raises(MeasurementError, match="^b.log: no 'Inference timings in us' line"):
            read_log("Graph: [zoo:tiny_cnn]\n" + "Inference timings in us: " * 160_000, "b.log")
        rows = read_log("Inference timings in us: " * 1000 + LOG_TIMINGS.format("1500"), "b.log", model="zoo:tiny_cnn")
        assert [r.latency_ms for r in rows] == [1.5]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _damage(rng: random.Random, text: str) -> str:
    """One of a few damages a hand-edited or truncated CSV shows."""
    lines = text.splitlines()
    k = rng.randrange(1, len(lines))
    cells = lines[k].split(",")
    kind = rng.randrange(6)
    if kind == 0:
        cells[rng.randrange(len(cells))] = rng.choice(BAD_NUMBERS[:16])
    elif kind == 1:
        cells = cells[:rng.randrange(len(cells))]
    elif kind == 2:
        cells += ["x"] * rng.randint(1, 3)
    elif kind == 3:
        cells[0] = '"' + cells[0]
    elif kind == 4:
        cells[4] = rng.choice(["gpu2", "", "CPU", "nnapi;gpu"])
    else:
        cells[2] = rng.choice(["int4", "fp32", ""]) or "bogus"
    lines[k] = ",".join(cells)
    return "\n".join(lines) + "\n"


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 6))
def test_generated_damaged_csvs_give_one_line_naming_file_and_line(seed, rows):
    rng = random.Random(seed)
    text = _damage(rng, _csv(*[GOOD] * rows))
    try:
        read_csv(text, "m.csv")
    except MeasurementError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("m.csv:"), exc
    # else the damage happened to leave a valid row (an extra column named by no header is kept)


@SETTINGS
@given(text=st.text(st.characters(codec="utf-8"), max_size=300))
def test_arbitrary_text_as_a_log_or_csv_is_rows_or_one_line(text):
    for reader, name in ((read_log, "b.log"), (read_csv, "m.csv")):
        try:
            rows = reader(HEADER + text if reader is read_csv else text, name)
        except MeasurementError as exc:
            assert "\n" not in str(exc) and str(exc).startswith(name), exc
        else:
            assert all(1e-6 <= r.latency_ms < 1e7 for r in rows)


# -- limits: rows, bytes, FIFOs ----------------------------------------------------------------------

def test_row_and_run_limits_are_stated():
    with pytest.raises(MeasurementError, match=f"more than {MAX_ROWS} measurement rows"):
        read_csv(_csv(*[GOOD] * 5000), "m.csv")
    log = ("Graph: [tiny_cnn.tflite]\n" + LOG_TIMINGS.format("1500")) * 3000
    with pytest.raises(MeasurementError, match=f"b.log:{2 * MAX_ROWS + 2}: more than {MAX_ROWS} benchmark runs"):
        read_log(log, "b.log")
    assert len(read_csv(_csv(*[GOOD] * MAX_ROWS), "m.csv")) == MAX_ROWS


def test_a_fifo_a_folder_and_binary_are_refused_without_reading(tmp_path):
    fifo = tmp_path / "m.csv"
    os.mkfifo(fifo)   # no writer: reading it would block forever
    with pytest.raises(MeasurementError, match="not a regular file"):
        read_file(fifo)
    with pytest.raises(MeasurementError, match="not a regular file"):
        read_file(tmp_path)
    (tmp_path / "b.log").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(MeasurementError, match="not UTF-8"):
        read_file(tmp_path / "b.log")


# -- the base profile ----------------------------------------------------------------------------------

BASES = {
    "a string": ("just text\n", "must be a mapping"),
    "a list": ("- 1\n- 2\n", "must be a mapping"),
    "no name": ("os: android\nunits: {}\n", "name: must be a non-empty string"),
    "a numeric name": ("name: 3\n", "name: must be a non-empty string"),
    "calibration a list": ("name: x\ncalibration: [1]\n", ":2: calibration: must be a mapping"),
    "prior a number": ("name: x\ncalibration:\n  prior: 5\n", ":3: calibration.prior: must be a profile"),
    "prior a mapping": ("name: x\ncalibration:\n  prior: {a: 1}\n", "calibration.prior: must be a profile"),
    "prior a folder": ("name: x\ncalibration:\n  prior: .\n", "cannot read the profile"),
    "prior missing": ("name: x\ncalibration:\n  prior: nowhere.yaml\n", "cannot read the profile"),
    # refused as `derive: unknown key`, with no line, as if a derived profile were not a profile
    "derived": ("name: x\ndescription: x\nderive:\n  base: pixel3\n",
                ":3: derive: a derived profile cannot be a calibration base: its figures are its base's, scaled; give "
                "its base 'pixel3' as --base"),
}


@pytest.mark.parametrize("case", sorted(BASES))
def test_damaged_base_profiles_are_profile_errors_naming_the_key(tmp_path, case):
    text, message = BASES[case]
    (tmp_path / "base.yaml").write_text(text)
    with pytest.raises(ProfileError, match=message) as info:
        load_base(str(tmp_path / "base.yaml"))
    assert "\n" not in str(info.value)


def test_a_prior_that_is_not_a_mapping_is_a_profile_error(tmp_path):
    (tmp_path / "prior.yaml").write_text("- not\n- a mapping\n")
    (tmp_path / "base.yaml").write_text("name: x\ncalibration:\n  prior: prior.yaml\n")
    with pytest.raises(ProfileError, match="prior.yaml: a profile must be a mapping"):
        load_base(str(tmp_path / "base.yaml"))


def test_a_base_or_prior_that_is_not_utf8_is_a_profile_error(tmp_path):
    """A Latin-1 profile raised UnicodeDecodeError (a traceback on the command line)."""
    (tmp_path / "latin1.yaml").write_bytes(b"name: t\xe9l\xe9phone\n")
    (tmp_path / "base.yaml").write_text("name: x\ncalibration:\n  prior: latin1.yaml\n")
    for name in ("latin1.yaml", "base.yaml"):
        with pytest.raises(ProfileError, match=r"latin1.yaml:1: not UTF-8 text") as info:
            load_base(str(tmp_path / name))
        assert "\n" not in str(info.value)


@pytest.mark.parametrize("kind", ["base", "prior"])
def test_a_fifo_as_the_base_or_its_prior_exits_1_without_hanging(tmp_path, kind):
    """The base was read with read_text(), which waits forever on a FIFO (and reads /dev/zero without end).
    A subprocess, so a regression that blocks is stopped by the hang guard."""
    os.mkfifo(tmp_path / "fifo.yaml")
    (tmp_path / "base.yaml").write_text("name: x\ncalibration:\n  prior: fifo.yaml\n")
    (tmp_path / "m.csv").write_text(_csv(GOOD))
    base = tmp_path / ("fifo.yaml" if kind == "base" else "base.yaml")
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-m", "runtime.cli.main", "calibrate", str(tmp_path / "m.csv"), "--base",
                           str(base)], capture_output=True, text=True, timeout=120, cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip() == f"dtb calibrate: error: {tmp_path / 'fifo.yaml'}: cannot read the profile: it is a " \
                                  f"FIFO, not a regular file", done.stderr


# -- the command line: one line, exit 1, checked before the fit -------------------------------------

def _calibrate(capsys, *argv) -> tuple[int, str]:
    code = cli.main(["calibrate", *map(str, argv)])
    return code, _one_line(capsys) if code else ""


def test_op_split_with_an_output_is_refused_before_anything_runs(tmp_path, capsys):
    # --op_split fits nothing: -o was accepted and silently not written
    (tmp_path / "m.csv").write_text(_csv(GOOD))
    code, line = _calibrate(capsys, tmp_path / "m.csv", "--base", "pixel3", "--op_split", "-o", tmp_path / "p.yaml")
    assert code == 1 and line == ("dtb calibrate: error: --op_split fits nothing, so -o has no profile to write; "
                                  "drop one of them"), line
    assert not (tmp_path / "p.yaml").exists()


@pytest.mark.parametrize("kind", ["folder", "slash", "unwritable", "long", "no folder"])
def test_bad_output_is_one_line_before_any_model_is_built(tmp_path, capsys, monkeypatch, kind):
    import runtime.cli.calibrate as calibrate

    (tmp_path / "m.csv").write_text(_csv(GOOD))
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    out = {"folder": tmp_path, "slash": f"{tmp_path}/new/", "unwritable": locked / "p.yaml",
           "long": tmp_path / ("p" * 250 + ".yaml"), "no folder": tmp_path / "none" / "p.yaml"}[kind]
    if kind == "unwritable" and os.access(locked, os.W_OK):
        pytest.skip("running as root (or a user every folder is writable to): no folder can be made unwritable")
    built = []
    monkeypatch.setattr(calibrate, "calibrate_files", lambda *a, **k: built.append(a))
    code, line = _calibrate(capsys, tmp_path / "m.csv", "--base", "pixel3", "-o", out)
    assert code == 1 and "cannot write" in line and not built, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["locked", "m.csv"]


def test_a_delegate_the_phone_does_not_have_is_refused(tmp_path, capsys):
    (tmp_path / "m.csv").write_text(_csv(["tiny_cnn", "", "none", "pixel3", "coreml", "1", "2.0"]))
    code, line = _calibrate(capsys, tmp_path / "m.csv", "--base", "pixel3", "--max_nfev", "1")
    assert code == 1 and "m.csv:2: delegate coreml" in line and "does not have" in line, line


def test_a_csv_cannot_make_calibrate_run_a_command(tmp_path, capsys):
    marker = tmp_path / "ran"
    (tmp_path / "m.csv").write_text(FLAGS_HEADER + ",".join(GOOD) + ",--external_delegate_path=os:system "
                                    f"--external_delegate_options=command:touch${{IFS}}{marker}\n")
    code, line = _calibrate(capsys, tmp_path / "m.csv", "--base", "pixel3", "--max_nfev", "1")
    assert code == 1 and f"m.csv:2: flags: '--external_delegate_path=os:system'" in line, line
    assert not marker.exists()


def test_a_bad_flag_value_names_the_row(tmp_path, capsys):
    """The delegates' own message named the flag alone, not the file and line it came from."""
    (tmp_path / "m.csv").write_text(FLAGS_HEADER + ",".join(GOOD) + ",--use_gpu=banana\n")
    code, line = _calibrate(capsys, tmp_path / "m.csv", "--base", "pixel3", "--max_nfev", "1")
    assert code == 1 and line == (f"dtb calibrate: error: {tmp_path / 'm.csv'}:2: flags: --use_gpu must be true or "
                                  f"false (1 or 0), not 'banana'"), line


def _calibrated_base(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the shipped calibrated Pixel 3 profile and of the prior it names."""
    (tmp_path / "priors").mkdir()
    prior = tmp_path / "priors" / "pixel3.yaml"
    prior.write_text((PROFILE_DIR / "priors" / "pixel3.yaml").read_text())
    (tmp_path / "pixel3.yaml").write_text((PROFILE_DIR / "pixel3.yaml").read_text())
    return tmp_path / "pixel3.yaml", prior


def test_output_naming_the_prior_of_a_calibrated_base_is_refused(tmp_path, capsys):
    """The prior was replaced by a profile naming itself as its prior: its values gone, and both files
    refused as --base from then on."""
    base, prior = _calibrated_base(tmp_path)
    (tmp_path / "m.csv").write_text(_csv(GOOD))
    before = prior.read_text()
    code, line = _calibrate(capsys, tmp_path / "m.csv", "--base", base, "--max_nfev", "1", "-o", prior)
    assert code == 1 and line == (f"dtb calibrate: error: cannot write {prior}: it is the prior profile {prior}; "
                                  f"give the fitted profile a file name of its own"), line
    assert prior.read_text() == before


def test_output_naming_a_rows_model_file_is_refused_before_it_is_built(tmp_path, capsys, monkeypatch):
    import runtime.cli.calibrate as calibrate
    from runtime.model.tflite_write import save
    from runtime.zoo import build

    save(build("tiny_cnn"), tmp_path / "m.tflite")
    before = (tmp_path / "m.tflite").read_bytes()
    (tmp_path / "m.csv").write_text(_csv(["m.tflite", *GOOD[1:]]))
    built = []
    monkeypatch.setattr(calibrate, "Evaluator", lambda *a, **k: built.append(a))
    code, line = _calibrate(capsys, tmp_path / "m.csv", "--base", "pixel3", "--max_nfev", "1", "-o",
                            tmp_path / "m.tflite")
    assert code == 1 and line == (f"dtb calibrate: error: cannot write {tmp_path / 'm.tflite'}: it is the model file "
                                  f"of {tmp_path / 'm.csv'}:2; give the fitted profile a file name of its own"), line
    assert (tmp_path / "m.tflite").read_bytes() == before and not built


@pytest.mark.parametrize("device, measurements", [("my phone: pro", "m.csv"), ("*x", "run #2.csv"),
                                                  ("[x]", "a: b.csv"), ("'q", "#1.csv"), ("x # y", "m.csv")])
def test_the_written_profile_reads_back_whatever_the_names(tmp_path, capsys, device, measurements):
    """The phone's name and the measurements' file name were written as they were: ': ', a leading '*',
    '[' or quote made the profile invalid YAML, and ' #' cut the name short."""
    import yaml

    from sim.profile import load_profile

    (tmp_path / measurements).write_text(_csv(GOOD))
    out = tmp_path / "out.yaml"
    assert cli.main(["calibrate", str(tmp_path / measurements), "--base", "pixel3", "--device", device,
                     "--max_nfev", "1", "-o", str(out)]) == 0
    capsys.readouterr()
    assert load_profile(str(out)).name == device
    assert yaml.safe_load(out.read_text())["calibration"]["measurements"] == measurements
    assert load_base(str(out))[3].resolve() == (PROFILE_DIR / "priors" / "pixel3.yaml").resolve()


def test_a_device_name_a_profile_cannot_hold_is_refused_before_the_fit(tmp_path, capsys, monkeypatch):
    """--device of Latin-1 bytes (kept by Python as surrogates) raised UnicodeEncodeError when the
    profile was written, after the whole fit."""
    import runtime.cli.calibrate as calibrate

    (tmp_path / "m.csv").write_text(_csv(GOOD))
    built = []
    monkeypatch.setattr(calibrate, "calibrate_files", lambda *a, **k: built.append(a))
    device = os.fsdecode(b"t\xe9l\xe9phone")
    code, line = _calibrate(capsys, tmp_path / "m.csv", "--base", "pixel3", "--device", device, "-o",
                            tmp_path / "out.yaml")
    assert code == 1 and "--device 't\\udce9l\\udce9phone' is not UTF-8 text" in line and not built, line
    assert not (tmp_path / "out.yaml").exists()


def test_a_fit_that_cannot_start_names_the_rows(monkeypatch):
    import numpy as np
    from runtime.calibration import fit as fitting
    from runtime.calibration.evaluate import CalibrationError
    from runtime.calibration.rows import read_csv as rows_of

    rows = rows_of(_csv(GOOD, GOOD), "m.csv")
    with pytest.raises(CalibrationError, match=r"the fit cannot start: .* 1 row\(s\) .*m.csv:3 \(tiny_cnn, cpu: nan ms\)"):
        fitting._residuals(rows, [(2.0, {}), (float("nan"), {})], np.zeros(0))


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_generated_damaged_files_on_the_command_line(tmp_path_factory, capsys, seed):
    rng = random.Random(seed)
    folder = tmp_path_factory.mktemp("cal")
    kind = rng.choice(["csv", "log", "base"])
    if kind == "csv":
        path = folder / "m.csv"
        path.write_text(_damage(rng, _csv(GOOD, GOOD)).replace(",cpu,", ",coreml,") if rng.random() < 0.2
                        else _damage(rng, _csv(GOOD)))
        argv = [path, "--base", "pixel3"]
    elif kind == "log":
        path = folder / "b.log"
        path.write_text("Graph: [zoo:tiny_cnn]\nNum threads: [" + rng.choice(["0", "x", "1.5", "99", "1e3"]) + "]\n"
                        + LOG_TIMINGS.format(rng.choice(["1500", "1.2.6", "1e999", "-"])))
        argv = [path, "--base", "pixel3"]
    else:
        base = folder / "base.yaml"
        base.write_text(rng.choice([text for text, _ in BASES.values()]))
        (folder / "m.csv").write_text(_csv(GOOD))
        argv = [folder / "m.csv", "--base", base]
    code = cli.main(["calibrate", *map(str, argv), "--max_nfev", "1", "-o", str(folder)])   # -o a folder: refused first
    assert code == 1
    _one_line(capsys)
    code = cli.main(["calibrate", *map(str, argv), "--max_nfev", "1", "-o", str(folder / "out.yaml")])
    err = capsys.readouterr().err
    if code == 0:   # the damage left a valid file: tiny_cnn fitted in one step
        assert (folder / "out.yaml").is_file()
    else:
        assert code == 1 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert not (folder / "out.yaml").exists()


def test_a_log_whose_model_file_is_missing_says_so_once(tmp_path, capsys):
    (tmp_path / "b.log").write_text("Graph: [missing.tflite]\n" + LOG_TIMINGS.format("1500"))
    code, line = _calibrate(capsys, tmp_path / "b.log", "--base", "pixel3", "--max_nfev", "1")
    assert code == 1 and line == (f"dtb calibrate: error: {tmp_path / 'b.log'}:2: model missing.tflite not found "
                                  f"(nor missing.tflite beside the measurements or in the current folder)"), line


def test_a_fifo_on_the_real_command_line_exits_1_without_hanging(tmp_path):
    """A subprocess, so a regression that blocks on the FIFO is stopped by the hang guard."""
    fifo = tmp_path / "m.csv"
    os.mkfifo(fifo)
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-m", "runtime.cli.main", "calibrate", str(fifo), "--base", "pixel3"],
                          capture_output=True, text=True, timeout=120, cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "not a regular file" in done.stderr, done.stderr
