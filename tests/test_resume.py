"""results.db and `dtb run --resume`: a run killed with SIGKILL at any moment resumes to the results of an
uninterrupted run, the database is never corrupt, a changed scenario is refused, `dtb report` reads it."""

from __future__ import annotations

import contextlib
import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.sweep import runner
from runtime.cli.main import main
from runtime.sweep.results_db import DB_NAME, ResumeError, cell_key
from runtime.sweep.runner import run_file
from runtime.scenario.load import load_scenario

ROOT = Path(__file__).resolve().parent.parent
FILES = ("results.json", "results.csv", "report.md", "trace.json")
# 16 quick cells (about 0.1 s each)
QUICK = """\
device: pixel4
model: {{zoo: tiny_cnn, args: {{resolution: 16}}}}
runs: {{warmup: 0, count: {count}}}
timing_only: true
matrix:
  device: [pixel3, pixel4]
  delegates: [[], [gpu]]
  cpu.threads: {threads}
"""


def scenario(tmp_path: Path, threads=(1, 2, 3, 4), count: int = 250, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(QUICK.format(count=count, threads=list(threads)))
    return path


def dtb_run(path: Path, out: Path, *flags: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "runtime.cli.main", "run", str(path), "-o", str(out), *flags],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def stored(out: Path) -> list[tuple[int, str, str]]:
    """(index, label, key) of every stored cell, after checking the file is a sound database."""
    with sqlite3.connect(out / DB_NAME) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        rows = conn.execute("SELECT idx, label, key, record FROM cells ORDER BY idx").fetchall()
    for _, label, _, record in rows:
        assert json.loads(record)["label"] == label   # each record whole, under its own cell
    return [row[:3] for row in rows]


def stored_count(out: Path) -> int:
    """Cells results.db holds right now, read as `dtb report` reads it while a run writes."""
    try:
        with contextlib.closing(sqlite3.connect((out / DB_NAME).as_uri() + "?mode=ro", uri=True)) as conn:
            return conn.execute("SELECT count(*) FROM cells").fetchone()[0]
    except sqlite3.Error:   # not there yet, or its tables not yet made
        return 0


def kill_when(proc: subprocess.Popen, out: Path, cells: int, extra: float) -> None:
    """SIGKILL `extra` seconds after results.db holds `cells` cells (or after the start, for 0)."""
    while cells and stored_count(out) < cells and proc.poll() is None:   # polled as `dtb report` reads it
        time.sleep(0.01)
    time.sleep(extra)
    proc.kill()
    proc.communicate(timeout=60)


def test_sigkill_at_random_moments_then_resume_gives_the_uninterrupted_results(tmp_path):
    path = scenario(tmp_path)
    cells = load_scenario(path)
    # the uninterrupted run in this process (the same main(); figures depend on nothing else), the
    # killed ones in their own
    assert main(["run", str(path), "-o", str(tmp_path / "whole")]) == 0
    out, rng, kept = tmp_path / "out", random.Random(20240), set()
    # five seeded moments spread over a run: while it starts up (no cell yet), a random time after a
    # few more cells three times, and once all cells are stored (the export and its commit)
    for attempt in range(5):
        target = 0 if attempt == 0 else len(cells) if attempt == 4 else min(len(kept) + rng.randint(2, 5), len(cells))
        proc = dtb_run(path, out, "--resume")
        kill_when(proc, out, target, rng.uniform(0.0, 0.6 if attempt == 0 else 0.1))
        if (out / DB_NAME).exists():
            rows = stored(out)
            assert all(key == cell_key(cells[k]) and label == cells[k].label for k, label, key in rows)
            assert {k for k, _, _ in rows} >= kept     # a kill never loses a cell stored before it
            kept = {k for k, _, _ in rows}
    last = dtb_run(path, out, "--resume")
    _, err = last.communicate(timeout=120)   # a hang guard; communicate closes the pipes
    assert last.returncode == 0, err
    assert [k for k, _, _ in stored(out)] == list(range(len(cells)))   # every cell, exactly once
    for name in FILES:
        assert (out / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name


def test_the_files_exported_from_the_database_are_those_of_the_in_memory_path(tmp_path):
    """results.json and trace.json as run_file wrote them before results.db: every record and trace held
    in memory, runtime.measure.chrome_trace.write_trace merging the traces."""
    from runtime.sweep.runner import check_file, run_scenario, strict_json
    from runtime.measure.chrome_trace import chrome_trace, write_trace

    path = tmp_path / "mixed.yaml"
    path.write_text("device: pixel3\nmodel: {zoo: tiny_cnn, args: {resolution: 16}}\nruns: {warmup: 1, count: 2}\n"
                    "matrix:\n  delegates: [[], [gpu], [hexagon]]\n  model.quantization: [none, int8]\n")
    records, traces = [], []
    for k, sc in enumerate(check_file(path)):
        record, soc = run_scenario(sc)
        records.append(record)
        traces.append(chrome_trace(soc, sc.label or sc.name, pid=k + 1))
    results = strict_json({"schema": 1, "scenario": str(path), "records": records})
    write_trace(tmp_path / "trace.json", traces)
    assert run_file(path, tmp_path / "out") == results
    assert (tmp_path / "out" / "results.json").read_text() == json.dumps(results, indent=1, sort_keys=True)
    assert (tmp_path / "out" / "trace.json").read_bytes() == (tmp_path / "trace.json").read_bytes()


def test_a_resumed_run_runs_only_the_missing_cells(tmp_path, monkeypatch):
    path = scenario(tmp_path, threads=(1, 2), count=2)
    whole = run_file(path, tmp_path / "whole")
    out = tmp_path / "out"
    run_file(path, out)
    with sqlite3.connect(out / DB_NAME) as conn:
        conn.execute("DELETE FROM cells WHERE idx IN (1, 6)")   # what a kill before those finished leaves
    ran = []
    real = runner.run_scenario
    monkeypatch.setattr(runner, "run_scenario", lambda sc, *a: ran.append(sc.label) or real(sc, *a))
    assert run_file(path, out, resume=True) == whole
    cells = load_scenario(path)
    assert ran == [cells[1].label, cells[6].label]
    assert (out / "results.json").read_bytes() == (tmp_path / "whole" / "results.json").read_bytes()


def test_resume_refuses_a_scenario_whose_stored_cells_changed(tmp_path, capsys):
    path = scenario(tmp_path, threads=(1, 2), count=2)
    out = tmp_path / "out"
    run_file(path, out)
    before = (out / "results.json").read_bytes()
    scenario(tmp_path, threads=(1, 3), count=2)          # cell 2 is now another cell
    with pytest.raises(ResumeError, match=r"the scenario changed since its cells ran \(cell 2 "):
        run_file(path, out, resume=True)
    assert main(["run", str(path), "-o", str(out), "--resume"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot resume" in err and "without --resume" in err and "Traceback" not in err
    assert (out / "results.json").read_bytes() == before
    run_file(path, out)                                   # without --resume: a new run replaces the cells
    assert len(stored(out)) == 8


def test_resume_keeps_cells_an_edit_left_the_same(tmp_path, monkeypatch):
    path = scenario(tmp_path, threads=(1, 2), count=2)
    out = tmp_path / "out"
    run_file(path, out)
    text = QUICK.format(count=2, threads=[1, 2]).replace("[pixel3, pixel4]", "[pixel3, pixel4, iphone_xs]")
    path.write_text("# a comment moves every line\n" + text)    # 4 cells more, after the 8 stored ones
    ran = []
    real = runner.run_scenario
    monkeypatch.setattr(runner, "run_scenario", lambda sc, *a: ran.append(sc.label) or real(sc, *a))
    results = run_file(path, out, resume=True)
    assert len(results["records"]) == 12 and len(ran) == 4 and all("iphone_xs" in label for label in ran)


def test_a_changed_model_file_is_another_cell(tmp_path):
    model = tmp_path / "m.tflite"
    model.write_bytes((ROOT / "tests/fixtures/models/lstm_unrolled.tflite").read_bytes())
    path = tmp_path / "file.yaml"
    path.write_text("device: pixel4\nmodel: {path: m.tflite}\nruns: {warmup: 0, count: 1}\n")
    key = cell_key(load_scenario(path)[0])
    model.write_bytes(model.read_bytes() + b"\0")
    os.utime(model, ns=(time.time_ns() + 10**9,) * 2)
    assert cell_key(load_scenario(path)[0]) != key


def test_a_refitted_base_makes_a_derived_phone_another_cell(tmp_path, monkeypatch):
    """A derived phone's figures are its base's: the cell key compared the derived file only, so after the base
    was refitted `--resume` kept the cells of the phone as it was."""
    import sim.profile as sp
    from runtime.sweep.cell import cached_profile

    (tmp_path / "priors").mkdir()
    base = tmp_path / "priors" / "pixel4.yaml"
    base.write_text((sp.PROFILE_DIR / "priors" / "pixel4.yaml").read_text())
    monkeypatch.setattr(sp, "PROFILE_DIR", tmp_path)
    (tmp_path / "mine.yaml").write_text("name: mine\ndescription: mine\nderive:\n  base: pixel4\n")
    path = tmp_path / "file.yaml"
    path.write_text("device: ./mine.yaml\nmodel: {zoo: tiny_cnn}\nruns: {warmup: 0, count: 1}\n")
    cell = load_scenario(path)[0]
    key, bandwidth = cell_key(cell), cached_profile(cell).dram.bandwidth
    base.write_text(base.read_text().replace("bandwidth_gbs: ", "bandwidth_gbs: 1", 1))
    os.utime(base, ns=(time.time_ns() + 10**9,) * 2)
    assert cell_key(load_scenario(path)[0]) != key
    assert cached_profile(cell).dram.bandwidth != bandwidth   # nor is the phone read before used again


def test_another_scenarios_cells_are_not_replaced_without_overwrite(tmp_path):
    from runtime.sweep.outdir import OutputFolderError

    a, b = scenario(tmp_path, (1,), 2, "a.yaml"), scenario(tmp_path, (2,), 2, "b.yaml")
    out = tmp_path / "out"
    run_file(a, out)
    (out / "manifest.json").unlink()
    (out / "results.json").unlink()      # as a run killed before its first commit leaves it: only results.db
    with pytest.raises(OutputFolderError, match="holds cells of another scenario"):
        run_file(b, out)
    with pytest.raises(ResumeError, match="another scenario"):
        run_file(b, out, resume=True)
    run_file(b, out, overwrite=True)
    assert {label for _, label, _ in stored(out)} == {c.label for c in load_scenario(b)}


def test_dtb_report_reads_the_database(tmp_path, capsys):
    path = scenario(tmp_path, threads=(1, 2), count=2)
    out = tmp_path / "out"
    run_file(path, out)
    for fmt in ("md", "csv"):
        assert main(["report", str(out / "results.json"), "--format", fmt]) == 0
        from_json = capsys.readouterr()
        assert main(["report", str(out / DB_NAME), "--format", fmt]) == 0
        from_db = capsys.readouterr()
        assert from_db.out == from_json.out and from_db.err == ""
    with sqlite3.connect(out / DB_NAME) as conn:
        conn.execute("DELETE FROM cells WHERE idx > 2")      # a run still going, or killed
    assert main(["report", str(out / DB_NAME), "--format", "csv"]) == 0
    partial = capsys.readouterr()
    assert len(partial.out.splitlines()) == 1 + 3 and "holds 3 of the run's 8 cells" in partial.err
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    assert main(["report", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.db: not a readable results database" in err


def test_a_run_that_fails_before_any_cell_finishes_leaves_no_database(tmp_path, monkeypatch):
    from runtime.ir.errors import DelegateError

    def broken(*args, **kwargs):
        raise DelegateError("boom")
    monkeypatch.setattr(runner, "run_scenario", broken)
    with pytest.raises(DelegateError, match="boom"):
        run_file(scenario(tmp_path, (1,), 2), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_database_killed_before_its_tables_were_made_resumes_from_nothing(tmp_path):
    path = scenario(tmp_path, (1,), 2)
    out = tmp_path / "out"
    out.mkdir()
    (out / DB_NAME).write_bytes(b"")                      # created, then SIGKILL before the first commit
    assert len(run_file(path, out, resume=True)["records"]) == 4
    assert len(stored(out)) == 4
