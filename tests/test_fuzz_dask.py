"""Sweeps on Dask that go wrong: a bad scheduler address (generated), a refused or silent one, a cell
that raises, kills its worker or never returns. Each is one line naming the address or the cell, the
finished cells stay in results.db, and --resume goes on from them. Only loopback clusters, shut down."""

from __future__ import annotations

import os
import random
import socket
import string
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from runtime.sweep import executors, runner
from runtime.sweep.executors import CellPool, ExecutorError, check_address
from runtime.sweep.results_db import CellStore
from runtime.sweep.runner import run_file

ROOT = Path(__file__).resolve().parent.parent
FILES = ("results.json", "results.csv", "report.md", "trace.json")
QUICK = """\
device: pixel4
model: {zoo: tiny_cnn, args: {resolution: 16}}
runs: {warmup: 0, count: 3}
timing_only: true
matrix:
  device: [pixel3, pixel4]
  delegates: [[], [gpu]]
  cpu.threads: [1, 2]
"""
BAD = "device=pixel4 delegates=gpu threads=1"   # the cell the tests make fail
REAL = runner.run_scenario
FLAG = "DTB_TEST_FAILING_CELL"   # names a file: while it exists, the BAD cell fails as the file says


def failing(sc):
    """run_scenario, except that the BAD cell fails as the file named by $DTB_TEST_FAILING_CELL says, while it
    exists (the workers import this module by name and inherit the variable)."""
    flag = os.environ.get(FLAG, "")
    if sc.label == BAD and flag and os.path.exists(flag):
        how = Path(flag).read_text()
        if how == "kill":
            os._exit(9)
        if how == "hang":
            threading.Event().wait()
        raise ValueError("a cell\nthat raises")
    return REAL(sc)


# ---- addresses ---------------------------------------------------------------------------------------

def generated_addresses(seed: int, n: int) -> list[str]:
    """Damaged scheduler addresses: random text, a valid one with a part cut, changed or added."""
    rng = random.Random(seed)
    parts = ["tcp://", "tls://", "foo://", "http://", "tcp:/", "://", "", "inproc://"]
    hosts = ["127.0.0.1", "localhost", "[::1]", "::1", "", " ", "a b", "host/x", "[::1", "\x00"]
    ports = [":8786", ":", ":0", ":65536", ":-1", ":86x", ":99999999999999999999", "", ":8786:1"]
    out = []
    for _ in range(n):
        if rng.random() < 0.3:
            out.append("".join(rng.choice(string.printable) for _ in range(rng.randint(0, 40))))
        else:
            out.append(rng.choice(parts) + rng.choice(hosts) + rng.choice(ports) + rng.choice(["", "/", "?x", "#"]))
    return out


def test_generated_bad_addresses_are_one_line_naming_them_or_well_formed():
    refused = 0
    for address in generated_addresses(7, 400):
        try:
            scheme, host, port = check_address(address)
        except ExecutorError as exc:
            refused += 1
            assert "\n" not in str(exc) and repr(address) in str(exc)
            continue
        # what passes is well formed: a known scheme, a host without spaces, a port in range
        assert scheme in executors.SCHEMES and host and not any(c.isspace() for c in host)
        assert port is None or 0 < port < 65536
    assert refused > 300   # most of them are damaged


@pytest.mark.parametrize("address, why", [("garbage", "no port"), ("foo://127.0.0.1:8786", "unknown scheme 'foo'")])
def test_a_bad_address_stops_dtb_run_before_anything_starts(tmp_path, address, why):
    path = tmp_path / "sweep.yaml"
    path.write_text(QUICK)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "runtime.cli.main", "run", str(path), "-o", str(tmp_path / "out"),
                           "--executor", f"dask={address}"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert why in done.stderr and repr(address) in done.stderr
    assert not (tmp_path / "out").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_refused_address_is_one_line_at_once(tmp_path):
    address = f"tcp://127.0.0.1:{_free_port()}"
    with pytest.raises(ExecutorError, match="cannot reach the Dask scheduler at " + address) as info:
        with CellPool(("dask", address)) as pool:
            pool.run(REAL, [], [0], lambda *a: None)
    assert "\n" not in str(info.value) and "refused" in str(info.value).lower()


def test_a_listener_that_is_no_scheduler_is_one_line_without_a_traceback(monkeypatch, capsys):
    monkeypatch.setattr(executors, "CONNECT_SECONDS", 1.0)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
        with pytest.raises(ExecutorError, match="cannot reach the Dask scheduler") as info:
            with CellPool(("dask", address)) as pool:
                pool.run(REAL, [], [0], lambda *a: None)
    assert "\n" not in str(info.value) and address in str(info.value)
    assert "Traceback" not in capsys.readouterr().err


# ---- cells that fail on a worker -----------------------------------------------------------------

def _warm(_) -> None:
    """Run on each worker first: its imports and first cell done, every test cell takes a fraction of a
    second there, far below the time limit the hanging cell is stopped by."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "warm.yaml"
        path.write_text(QUICK)
        for sc in runner.check_file(path)[:2]:
            REAL(sc)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two single-threaded worker processes on 127.0.0.1; a task is not retried after its worker dies."""
    import dask
    from dask.distributed import Client, LocalCluster

    os.environ[FLAG] = str(tmp_path_factory.mktemp("flag") / "fail")   # before the workers start
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address=None, memory_limit=0)
    try:
        with Client(cluster.scheduler_address, set_as_default=False) as client:
            client.run(_warm, str(ROOT / "scenarios"))
        yield cluster.scheduler_address
    finally:
        cluster.close(timeout=60)
        del os.environ[FLAG]


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    base = tmp_path_factory.mktemp("whole")
    path = base / "sweep.yaml"
    path.write_text(QUICK)
    run_file(path, base / "out")
    return path, base / "out"


@pytest.mark.parametrize("how, said", [("raise", "the cell failed on a Dask worker: ValueError: a cell that raises"),
                                       ("kill", "the Dask worker running this cell died"),
                                       ("hang", "did not finish within 10 s on a Dask worker")])
def test_a_failing_cell_is_named_its_finished_cells_kept_and_resume_goes_on(cluster, whole, tmp_path, monkeypatch,
                                                                            how, said):
    path, out = whole[0], tmp_path / "out"
    Path(os.environ[FLAG]).write_text(how)
    monkeypatch.setattr(runner, "run_scenario", failing)
    with pytest.raises(ExecutorError) as info:
        # with a time limit one cell per worker at a time: a killed worker takes only the cell it ran with it
        run_file(path, out, executor=("dask", cluster), cell_timeout={"raise": None, "kill": 600.0, "hang": 10.0}[how])
    message = str(info.value)
    assert "\n" not in message and f"({BAD})" in message and said in message, message
    assert "--resume goes on from them" in message
    cells = runner.check_file(path)
    with CellStore(out, path, cells, resume=True) as store:
        kept = set(store.done)
    assert kept and len(kept) < len(cells)   # some finished cells, not the failing one
    os.unlink(os.environ[FLAG])
    monkeypatch.setattr(runner, "run_scenario", REAL)
    ran = []
    monkeypatch.setattr(runner, "run_scenario", lambda sc: ran.append(sc.label) or REAL(sc))
    run_file(path, out, resume=True)   # goes on here, from what the Dask run stored
    assert BAD in ran and len(ran) == len(cells) - len(kept)
    for name in FILES:
        assert (out / name).read_bytes() == (whole[1] / name).read_bytes(), name


def test_a_cell_time_limit_needs_dask(whole, tmp_path):
    with pytest.raises(ExecutorError, match="needs --executor dask"):
        run_file(whole[0], tmp_path / "out", cell_timeout=5.0)
