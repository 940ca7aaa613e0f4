"""The output folder of `dtb run`: checked before any cell runs, locked while a run writes, another
scenario's results never silently overwritten, and a killed run never leaves a mix of two runs."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.sweep import runner
from runtime.cli.main import main
from runtime.sweep.outdir import MANIFEST, OutputFolderError, ResultsFolder
from runtime.sweep.runner import run_file

ROOT = Path(__file__).resolve().parent.parent
FILES = ["results.json", "results.csv", "report.md", "trace.json"]
TINY = "device: pixel4\nmodel: {{zoo: tiny_cnn, args: {{resolution: 16}}}}\nruns: {{warmup: 0, count: {count}}}\n"


def scenario(tmp_path: Path, name: str = "a.yaml", count: int = 1) -> Path:
    path = tmp_path / name
    path.write_text(TINY.format(count=count))
    return path


def consistent(out: Path) -> dict:
    """The folder's manifest, after checking that every file it lists is the one it describes."""
    manifest = json.loads((out / MANIFEST).read_text())
    for name, digest in manifest["files"].items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest, name
    return manifest


@pytest.fixture
def no_cells_run(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a cell ran")
    monkeypatch.setattr(runner, "run_scenario", refuse)


@pytest.mark.parametrize("make_out", [
    lambda tmp: (tmp / "file.txt").write_text("x") and tmp / "file.txt",
    lambda tmp: (tmp / "file.txt").write_text("x") and tmp / "file.txt" / "sub",
    lambda tmp: Path("/proc/definitely/not/here"),
    lambda tmp: tmp / ("x" * 300),
])
def test_an_unusable_output_folder_fails_before_any_cell_runs(tmp_path, capsys, no_cells_run, make_out):
    out = make_out(tmp_path)
    path = scenario(tmp_path)
    with pytest.raises(OutputFolderError, match="output folder"):
        run_file(path, out)
    assert main(["run", str(path), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("dtb run: error: output folder ") and err.count("\n") == 1 and "Traceback" not in err


def test_each_run_writes_a_manifest_last_naming_the_set(tmp_path):
    path = scenario(tmp_path)
    run_file(path, tmp_path / "out")
    manifest = consistent(tmp_path / "out")
    assert sorted(manifest["files"]) == sorted(FILES) and manifest["scenario"] == str(path.resolve())
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted([*FILES, MANIFEST, "results.db"])


def test_another_scenario_is_refused_unless_overwrite_is_asked_for(tmp_path, capsys):
    a, b = scenario(tmp_path, "a.yaml"), scenario(tmp_path, "b.yaml", count=2)
    out = tmp_path / "out"
    run_file(a, out)
    before = (out / "results.json").read_bytes()
    with pytest.raises(OutputFolderError, match=r"holds the results of another scenario \(.*a\.yaml\); pass --overwrite"):
        run_file(b, out)
    assert (out / "results.json").read_bytes() == before
    assert main(["run", str(b), "-o", str(out)]) == 1 and "--overwrite" in capsys.readouterr().err
    run_file(a, out)                                  # the same scenario again: replaces its own results
    assert main(["run", str(b), "-o", str(out), "--overwrite"]) == 0
    assert consistent(out)["scenario"] == str(b.resolve())


def test_a_folder_from_before_manifests_is_judged_by_its_results_json(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text(json.dumps({"schema": 1, "scenario": "elsewhere.yaml", "records": []}))
    with pytest.raises(OutputFolderError, match="another scenario"):
        run_file(scenario(tmp_path), out)


def test_a_folder_in_use_is_refused(tmp_path):
    path = scenario(tmp_path)
    with ResultsFolder(tmp_path / "out", tmp_path / "other.yaml"):
        with pytest.raises(OutputFolderError, match=r"in use by another dtb run \(pid \d+, scenario .*other\.yaml\)"):
            run_file(path, tmp_path / "out")
    run_file(path, tmp_path / "out")   # free again once the other run is done
    assert not (tmp_path / "out" / ".dtb-lock").exists()


def test_a_failed_run_leaves_no_empty_folder_and_no_lock(tmp_path, monkeypatch):
    from runtime.ir.errors import DelegateError

    def broken(*args, **kwargs):
        raise DelegateError("boom")
    monkeypatch.setattr(runner, "run_scenario", broken)
    with pytest.raises(DelegateError, match="boom"):
        run_file(scenario(tmp_path), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_commit_cut_short_is_finished_by_the_next_run(tmp_path):
    """What SIGKILL in the middle of the renames leaves: no manifest, two files of the new run in
    place and two of the old one, the rest of the new set in its staging folder."""
    a, b = scenario(tmp_path, "a.yaml"), scenario(tmp_path, "b.yaml", count=2)
    out, spare = tmp_path / "out", tmp_path / "spare"
    run_file(a, out)
    run_file(b, spare)
    staging = out / ".dtb-staging-99999-dead"
    staging.mkdir()
    for name in FILES:
        (staging / name).write_bytes((spare / name).read_bytes())
    (staging / MANIFEST).write_bytes((spare / MANIFEST).read_bytes())
    (out / MANIFEST).unlink()
    for name in FILES[:2]:
        os.replace(staging / name, out / name)
    with pytest.raises(OutputFolderError, match="another scenario"):   # b's run is completed first ...
        run_file(a, out)
    assert consistent(out)["scenario"] == str(b.resolve())             # ... and the folder holds b's set
    assert not list(out.glob(".dtb-staging-*"))


def test_staging_of_a_run_killed_before_its_commit_is_dropped(tmp_path):
    a = scenario(tmp_path)
    out = tmp_path / "out"
    run_file(a, out)
    (out / ".dtb-staging-99999-dead").mkdir()
    (out / ".dtb-staging-99999-dead" / "results.json").write_text("{half")
    run_file(a, out)
    consistent(out)
    assert not list(out.glob(".dtb-staging-*"))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_killing_dtb_run_never_leaves_a_mix_of_runs(tmp_path, signum):
    out = tmp_path / "out"
    run_file(scenario(tmp_path, "a.yaml", count=1), out)
    before = consistent(out)
    a = scenario(tmp_path, "a.yaml", count=3000)   # seconds of runs, then the commit
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "runtime.cli.main", "run", str(a), "-o", str(out)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not list(out.glob(".dtb-lock")) and time.monotonic() < deadline:   # the run has the folder
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err
    after = consistent(out)   # one run's whole set: the old one, or the new one if the run had finished
    assert after == before or proc.returncode == 0
    assert not list(out.glob("*.tmp")) and not list(out.glob(".*.tmp"))
    if signum == signal.SIGTERM:                # cleaned up on the way out
        assert not list(out.glob(".dtb-*"))
    run_file(scenario(tmp_path, "a.yaml", count=1), out)    # and the next run finds a usable folder
    consistent(out)
    assert not list(out.glob(".dtb-staging-*"))
