"""Sweeps at scale: the Dask executor's results are the local ones byte for byte, progress on stderr (a
bar on a terminal, plain lines elsewhere, dtb benchmark's only after 2 s), and the guard before a big sweep."""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from runtime.limits import counts as limits

from runtime.report import progress

from runtime.sweep import runner

from runtime.scenario import load as scenario_module

from runtime.sweep import executors as sweep
from runtime.sweep import guard
from runtime.cli.main import main
from runtime.sweep.runner import run_file

ROOT = Path(__file__).resolve().parent.parent
FILES = ("results.json", "results.csv", "report.md", "trace.json")
SMALL = """\
device: pixel4
model: {zoo: tiny_cnn, args: {resolution: 16}}
runs: {warmup: 1, count: 3}
matrix:
  device: [pixel3, pixel4]
  delegates: [[], [gpu], [nnapi]]
"""


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@contextlib.contextmanager
def _port_taken(port: int):
    """The port held by a listening socket for the block (already taken by another program: as good)."""
    import socket

    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen()
        except OSError:
            pass
        yield


def test_the_dask_executor_writes_the_local_runs_bytes(tmp_path):
    path = write(tmp_path, SMALL)
    run_file(path, tmp_path / "local")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with _port_taken(8787):   # Dask's default HTTP port, as another cluster on the machine would hold it
        done = subprocess.run([sys.executable, "-m", "runtime.cli.main", "run", str(path), "-o",
                               str(tmp_path / "dask"), "--executor", "dask", "--workers", "2"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    # Dask's own, e.g. a port in use (the tool's own "dtb run: warning: ..." lines about the fit are meant)
    theirs = [line for line in done.stderr.splitlines() if not line.startswith("dtb run: warning: ")]
    assert not any("warning" in line.lower() for line in theirs), done.stderr
    for name in FILES:
        assert (tmp_path / "dask" / name).read_bytes() == (tmp_path / "local" / name).read_bytes(), name


def test_executor_flag_is_checked(capsys):
    assert sweep.executor_arg("dask=tcp://10.0.0.1:8786") == ("dask", "tcp://10.0.0.1:8786")
    assert sweep.executor_arg("dask") == ("dask", None) and sweep.executor_arg("local") == ("local", None)
    with pytest.raises(SystemExit):
        main(["run", "x.yaml", "--executor", "spark"])
    assert "expected local, dask or dask=ADDRESS" in capsys.readouterr().err


def test_workers_and_output_flags_are_checked(capsys):
    """--workers beyond the cap would start that many LocalCluster processes (10**9 fills the memory);
    an empty -o (an unset variable) would write the results into the current folder: both usage errors,
    found by parsing alone."""
    from runtime.cli.main import parse

    for argv, said in ((["--workers", str(10**9), "--executor", "dask"], "argument --workers: must be at most"),
                       (["--workers", "two"], "argument --workers: expected a whole number"),
                       (["-o", ""], "argument -o/--output: expected a folder name")):
        with pytest.raises(SystemExit) as exc:
            parse(["run", "x.yaml", *argv])
        assert exc.value.code == 2 and said in capsys.readouterr().err


def test_dask_is_imported_only_when_asked_for(tmp_path):
    code = (f"import sys; from runtime.sweep.runner import run_file; run_file({str(write(tmp_path, SMALL))!r}, "
            f"{str(tmp_path / 'out')!r}); print(any(m.split('.')[0] in ('dask', 'distributed') for m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr


# -- progress ------------------------------------------------------------------------------------------

LINE = re.compile(r"dtb run: \d+/6 cells done, \d+:\d\d elapsed(, about \d+:\d\d left)?")


class Lines(io.StringIO):
    """A stderr that is not a terminal and counts the lines written to it, for a cell to wait on."""

    def __init__(self) -> None:
        super().__init__()
        self.count, self.changed = 0, threading.Condition()

    def write(self, text: str) -> int:
        with self.changed:
            written = super().write(text)
            self.count += text.count("\n")
            self.changed.notify_all()
        return written

    def wait_for(self, count: int) -> None:
        with self.changed:   # the timeout only guards against a hang: a timer that never writes
            assert self.changed.wait_for(lambda: self.count >= count, timeout=120), "no progress line came"


def test_plain_progress_lines_when_stderr_is_not_a_terminal(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "INTERVAL_S", 0.01)
    lines = Lines()
    monkeypatch.setattr("sys.stderr", lines)
    real = runner.run_scenario
    # each cell waits for one more progress line: lines during every cell, however fast or slow the host
    monkeypatch.setattr(runner, "run_scenario", lambda *a: lines.wait_for(lines.count + 1) or real(*a))
    assert main(["run", str(write(tmp_path, SMALL)), "-o", str(tmp_path / "out")]) == 0
    # tiny_cnn lies outside the phones' fitted rows: those warnings aside, stderr holds progress lines only
    printed = [ln for ln in lines.getvalue().splitlines() if "figures were fitted to:" not in ln]
    assert len(printed) >= 6 and all(LINE.fullmatch(line) for line in printed), \
        [x for x in printed if not LINE.fullmatch(x)]
    assert any("left" in line for line in printed)   # a line written while cell 2 ran: one cell done


def test_no_progress_line_before_the_first_interval_has_passed(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(progress, "INTERVAL_S", 1e6)   # however long the run takes on this host
    assert main(["run", str(write(tmp_path, SMALL)), "-o", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err   # tiny_cnn lies outside the phones' fitted rows: only those warnings
    assert all("figures were fitted to:" in ln for ln in err.splitlines()), err


def test_a_bar_with_cells_and_eta_on_a_terminal(tmp_path, capsys, monkeypatch):
    tty = Tty()
    monkeypatch.setattr("sys.stderr", tty)
    assert main(["run", str(write(tmp_path, SMALL)), "-o", str(tmp_path / "out")]) == 0
    assert "6/6" in tty.getvalue() and "cell" in tty.getvalue() and "<" in tty.getvalue()   # elapsed<left


# generic: a phone with no fitted band, so stderr holds progress lines only (tiny_cnn lies outside every fitted phone's rows)
BENCH = ["benchmark", "--zoo", "tiny_cnn", "--zoo_args", "resolution=16", "--num_runs", "20", "--timing_only",
         "--device", "generic"]


def fake_clock(monkeypatch, step: float) -> None:
    ticks = itertools.count()
    monkeypatch.setattr(progress, "_clock", lambda: next(ticks) * step)


def test_benchmark_shows_progress_only_after_two_seconds_and_never_on_stdout(capsys, monkeypatch):
    tty = Tty()
    monkeypatch.setattr("sys.stderr", tty)
    fake_clock(monkeypatch, 0.001)                   # a quick benchmark (21 runs, 21 ms) shows nothing
    assert main(BENCH) == 0
    plain = capsys.readouterr().out
    assert tty.getvalue() == ""
    fake_clock(monkeypatch, 0.09)                    # 21 runs, 1.9 s: still nothing
    assert main(BENCH) == 0
    assert tty.getvalue() == "" and capsys.readouterr().out == plain
    fake_clock(monkeypatch, 0.5)                     # past 2 s at the 4th run
    assert main(BENCH) == 0
    assert capsys.readouterr().out == plain          # stdout's lines are benchmark_model's alone
    assert re.search(r"\b\d+/21 \[", tty.getvalue()) and "run" in tty.getvalue()


def test_benchmark_progress_lines_go_to_stderr_when_not_a_terminal(capsys, monkeypatch):
    monkeypatch.setattr(progress, "INTERVAL_S", 0.001)
    assert main(BENCH) == 0
    captured = capsys.readouterr()
    assert "runs done" not in captured.out
    assert all(re.fullmatch(r"dtb benchmark: \d+/21 runs done, .*", line) for line in captured.err.splitlines())


# -- the guard -----------------------------------------------------------------------------------------

def test_over_100000_cells_stop_before_the_matrix_is_expanded(tmp_path, capsys, monkeypatch):
    seeds = ", ".join(str(i) for i in range(1563))
    path = write(tmp_path, "device: pixel4\nmodel: {zoo: tiny_cnn, args: {resolution: 16}}\n"
                           f"runs: {{warmup: 0, count: 1}}\ntiming_only: true\nmatrix:\n  inputs.seed: [{seeds}]\n"
                           f"  cpu.threads: [{', '.join(str(t) for t in range(1, 65))}]\n")

    def refuse(*args, **kwargs):
        raise AssertionError("the matrix was expanded or a cell ran")
    monkeypatch.setattr(scenario_module, "load_scenario", refuse)
    monkeypatch.setattr(runner, "run_scenario", refuse)
    assert main(["run", str(path), "-o", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{path}: 100,032 cells, about " in err and "pass --yes to run it anyway" in err
    assert not (tmp_path / "out").exists()
    guard.guard_count(path, yes=True)                # --yes lets it through to the loader
    assert guard.count_cells(path) == 100_032 <= limits.MAX_CELLS


def test_a_run_estimated_at_hours_stops_before_anything_runs(tmp_path, capsys, monkeypatch):
    path = write(tmp_path, "device: pixel4\nmodel: {zoo: mobilenet_v1}\nruns: {warmup: 1, count: 10000}\n"
                           "streams: 4\nmatrix:\n  delegates: [[], [gpu], [nnapi], [hexagon]]\n")
    monkeypatch.setattr(runner, "run_scenario", lambda *a: pytest.fail("a cell ran"))
    assert main(["run", str(path), "-o", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(r": 4 cells, about \d+\.\d h of host time", err), err
    assert "multiply-add" in err and "--yes" in err and not (tmp_path / "out").exists()
    assert main(["run", str(path), "--check"]) == 0
    assert re.search(r"estimated host time, one cell after another: about \d+\.\d h", capsys.readouterr().out)


def test_a_matrix_over_the_hard_cap_is_refused_even_with_yes(tmp_path, capsys):
    values = ", ".join(str(i) for i in range(800))
    path = write(tmp_path, "device: pixel4\nmodel: {zoo: tiny_cnn}\nmatrix:\n"
                           f"  inputs.seed: [{values}]\n  runs.count: [{values}]\n")
    assert main(["run", str(path), "-o", str(tmp_path / "out"), "--yes"]) == 1
    assert f"expands to 640,000 cells; the limit is {limits.MAX_CELLS:,}" in capsys.readouterr().err


def test_a_long_step_on_a_terminal_still_shows_the_bar_and_its_note(monkeypatch):
    """A step that runs long before any work is done (a model loading) is not silent: the timer's beat
    draws the bar once the delay has passed, with what the step is doing."""
    tty = Tty()
    fake_clock(monkeypatch, 1.0)                     # each read of the clock: one second later
    p = progress.Progress("dtb inference-diff", "run", stream=tty, delay=2.0, leave=False, total=5)
    p(0, 5)                                          # 1 s: not yet
    p.note("preparing the model")
    assert tty.getvalue() == ""
    p.beat()                                         # 2 s: the bar, with the note, though nothing is done
    assert "0/5" in tty.getvalue() and "preparing the model" in tty.getvalue()
    p.close()
