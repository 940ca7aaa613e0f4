"""A path that names a FIFO, a device or a folder instead of a file: refused in one line, never read.

open() on a FIFO waits for a writer and /dev/zero never ends, so before runtime.ir.files every
surface below hung (the first round's last hang: a scenario or model path naming a FIFO). Each kind
of special file goes through each surface that reads a user's file; the API raises its error type,
the command line exits 1 with one line. A surface that hangs again is caught by the hang guard."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import pytest

from runtime.cli.main import main
from runtime.interpreter.api import Interpreter
from runtime.ir.errors import ModelError, ProfileError, ScenarioError
from runtime.ir.errors import TestbedError as AnyError
from runtime.ir.files import NotRegularFile, read_text, special_kind
from runtime.report.render import render_file
from runtime.scenario.load import load_scenario
from sim.profile import load_profile

HANG_GUARD_S = 120   # only a hang guard: the refusals read nothing
KINDS = {"fifo": "a FIFO", "device": "a character device", "folder": "a directory"}


def special(tmp_path: Path, kind: str, name: str) -> Path:
    """A FIFO or a folder at tmp_path/name, or the device /dev/zero (a file that never ends)."""
    if kind == "device":
        return Path("/dev/zero")
    path = tmp_path / name
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    return path


def bounded(fn, returned: list | None = None):
    """fn() on a thread; its exception (its value appended to `returned`), or a failure if it is still
    running after the hang guard."""
    box: dict = {}

    def body():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    thread.join(HANG_GUARD_S)
    if thread.is_alive():
        pytest.fail(f"still reading after {HANG_GUARD_S} s: a hang")
    if returned is not None and "value" in box:
        returned.append(box["value"])
    return box.get("error")


def one_line(capsys, argv: list[str]) -> str:
    codes: list = []
    error = bounded(lambda: main(argv), codes)
    err = capsys.readouterr().err
    assert error is None and codes == [1], (error, codes)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo") or not Path("/dev/zero").exists(),
                                reason="FIFOs and /dev/zero are POSIX")


@pytest.fixture(autouse=True)
def release_fifos(tmp_path):
    """A regression that blocks in open() on a FIFO is let go at the end (a writer opens it)."""
    yield
    for path in tmp_path.rglob("*"):
        if path.is_fifo():
            with contextlib.suppress(OSError):
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


@pytest.mark.parametrize("kind", KINDS)
def test_the_reader_refuses_what_is_not_a_regular_file(tmp_path, kind):
    path = special(tmp_path, kind, "x")
    error = bounded(lambda: read_text(path))
    assert isinstance(error, NotRegularFile) and isinstance(error, OSError)
    assert str(error) == f"it is {KINDS[kind]}, not a regular file" and special_kind(path) == KINDS[kind]
    plain = tmp_path / "plain.txt"
    plain.write_text("a\r\nb\rc\n")
    assert read_text(plain) == plain.read_text() and special_kind(plain) is None


@pytest.mark.parametrize("kind", KINDS)
def test_a_model_path_through_the_api_and_the_command_line(tmp_path, capsys, kind):
    path = special(tmp_path, kind, "m.tflite")
    error = bounded(lambda: Interpreter(model_path=str(path)))
    assert isinstance(error, ModelError) and f"{KINDS[kind]}, not a regular file" in str(error), error
    err = one_line(capsys, ["benchmark", "--graph", str(path), "--num_runs", "1"])
    assert f"cannot read model file {path}: it is {KINDS[kind]}" in err


@pytest.mark.parametrize("kind", KINDS)
def test_a_scenario_path_through_the_api_and_the_command_line(tmp_path, capsys, kind):
    path = special(tmp_path, kind, "s.yaml")
    error = bounded(lambda: load_scenario(path))
    assert isinstance(error, ScenarioError) and f"{path}: cannot read the scenario: it is {KINDS[kind]}" in str(error)
    for argv in (["run", str(path), "--check"], ["run", str(path), "-o", str(tmp_path / "out")]):
        assert f"it is {KINDS[kind]}, not a regular file" in one_line(capsys, argv)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", KINDS)
def test_a_profile_path_through_the_api(tmp_path, kind):
    path = special(tmp_path, kind, "p.yaml")
    error = bounded(lambda: load_profile(path))
    assert isinstance(error, ProfileError) and f"it is {KINDS[kind]}, not a regular file" in str(error), error


@pytest.mark.parametrize("key, text", [
    ("device", "device: {special}\nmodel: {{zoo: tiny_cnn}}\n"),
    ("model.path", "device: pixel4\nmodel: {{path: {special}}}\n"),
    ("inputs.file", "device: pixel4\nmodel: {{zoo: tiny_cnn, args: {{resolution: 16}}}}\ninputs: {{file: {special}}}\n"),
], ids=["device", "model.path", "inputs.file"])
@pytest.mark.parametrize("kind", KINDS)
def test_files_a_scenario_names(tmp_path, capsys, kind, key, text):
    suffix = {"device": ".yaml", "model.path": ".tflite", "inputs.file": ".npy"}[key]
    path = special(tmp_path, kind, "named" + suffix)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(text.format(special=path))
    error = bounded(lambda: load_scenario(scenario))
    assert isinstance(error, ScenarioError), error
    assert f"{key}: " in str(error) and f"{path} is {KINDS[kind]}, not a regular file" in str(error), error
    assert f"{path} is {KINDS[kind]}" in one_line(capsys, ["run", str(scenario), "--check"])


@pytest.mark.parametrize("kind", KINDS)
def test_a_results_file_for_dtb_report(tmp_path, capsys, kind):
    path = special(tmp_path, kind, "results.json")
    error = bounded(lambda: render_file(path))
    assert isinstance(error, AnyError) and f"it is {KINDS[kind]}, not a regular file" in str(error), error
    assert f"it is {KINDS[kind]}" in one_line(capsys, ["report", str(path)])


@pytest.mark.parametrize("name", ["manifest.json", "results.json"])
def test_a_fifo_among_an_output_folders_results(tmp_path, capsys, name):
    # `dtb run` reads which scenario the folder's results belong to from these two files: a FIFO there
    # hung the run, holding the folder's lock, before any cell ran
    out = tmp_path / "out"
    out.mkdir()
    special(tmp_path, "fifo", f"out/{name}")
    scenario = tmp_path / "s.yaml"
    scenario.write_text("device: pixel4\nmodel: {zoo: tiny_cnn, args: {resolution: 16}}\nruns: {warmup: 0, count: 1}\n")
    err = one_line(capsys, ["run", str(scenario), "-o", str(out)])
    assert f"holds the results of another scenario (an unreadable {name}: it is a FIFO, not a regular file)" in err
    assert (out / name).is_fifo() and sorted(p.name for p in out.iterdir()) == [name]
