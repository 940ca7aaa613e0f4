"""Sweep execution (local or Dask) under the runner: where each cell runs (the guard before a big sweep: runtime/sweep/guard.py).

Each cell runs through `run_cell` wherever it runs (in this process, or as a task on a Dask worker),
and comes back as its record (JSON) and its trace events (compressed JSON); this process stores each one
in the output folder's results.db as it finishes (runtime/sweep/results_db.py). Nothing in a cell depends
on the host's clock, so both executors store the same bytes. Dask is imported only when asked for.
What runs one cell is the runner's run_scenario, handed in by runtime/sweep/runner.py: this module imports
nothing above it (a Dask worker unpickles the function by name, importing the runner there).
"""

from __future__ import annotations

import argparse
import contextlib
import copyreg
import itertools
import json
import logging
import os
import secrets
import socket
import sys
import threading
import time
from types import MappingProxyType
from typing import Callable, Iterator, Sequence

from runtime.ir.errors import DelegateError, TestbedError
from runtime.measure.record import strict_json
from runtime.sweep.guard import sized_seconds

__all__ = ["EXECUTORS", "ExecutorError", "CellPool", "executor_arg", "check_address", "run_cell"]

EXECUTORS = ("local", "dask")
CONNECT_SECONDS = 20.0         # how long reaching a Dask scheduler may take
# the schemes of Dask's comm layer (distributed.comm.registry; inproc only reaches a scheduler in this process)
SCHEMES = ("tcp", "tls", "ws", "wss", "ucx", "inproc")

Done = Callable[[int, str, bytes], None]
RunScenario = Callable[[object], tuple]   # a cell -> (its record, its SoC): runtime.sweep.runner.run_scenario


class ExecutorError(TestbedError):
    """The cells cannot run on Dask: a bad or unreachable scheduler address, or a cell that failed,
    never returned or lost its worker there (named in the message)."""


def check_address(address: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of a Dask scheduler address `[SCHEME://]HOST:PORT`; ExecutorError naming it
    when it is not one (checked before anything starts, without reaching the network)."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    why = _address_problem(scheme, rest)
    if why:
        raise ExecutorError(f"--executor dask={address!r}: not a Dask scheduler address ({why}); expected "
                            f"[SCHEME://]HOST:PORT with SCHEME one of {', '.join(SCHEMES)}")
    if scheme == "inproc":
        return scheme, rest, None
    host, _, port = rest.rpartition(":")
    return scheme, host.strip("[]"), int(port)


def _address_problem(scheme: str, rest: str) -> str | None:
    if scheme not in SCHEMES:
        return f"unknown scheme {scheme!r}"
    if not rest.isprintable() or any(c.isspace() or c in "/?#@" for c in rest):
        return "a space, control character or one of / ? # @ in it"
    if scheme == "inproc":
        return None if rest else "no address after inproc://"
    host, colon, port = rest.rpartition(":")
    if not colon or not port:
        return "no port"
    if not port.isdigit() or not 0 < int(port) < 65536:
        return f"port {port!r} is not a number from 1 to 65535"
    if not host or host.startswith("[") != host.endswith("]") or (":" in host and not host.startswith("[")):
        return "no host" if not host else f"host {host!r} is not a name or an address ([...] around IPv6)"
    return None


def executor_arg(text: str) -> tuple[str, str | None]:
    """--executor: `local`, `dask` (a LocalCluster on this machine) or `dask=ADDRESS` (a scheduler)."""
    kind, _, address = text.partition("=")
    if kind not in EXECUTORS or ("=" in text and (kind == "local" or not address)):
        raise argparse.ArgumentTypeError(f"expected local, dask or dask=ADDRESS, got {text!r}")
    return kind, address or None


# ---- one cell, wherever it runs -----------------------------------------------------------------

def run_cell(run_scenario: RunScenario, sc, k: int, budget: float | None = None) -> tuple[int, str, bytes]:
    """Cell k run by `run_scenario`: (k, its record as JSON, its trace events packed for results.db); a
    delegate failing names the cell."""
    from runtime.sweep.results_db import pack_events
    from runtime.measure.chrome_trace import chrome_trace

    try:
        with _budget(budget):
            record, soc = run_scenario(sc)
    except DelegateError as exc:
        raise DelegateError(f"{_where(sc)}: {exc}") from exc
    events = chrome_trace(soc, sc.label or sc.name, pid=k + 1)["traceEvents"]
    return k, json.dumps(strict_json(record), allow_nan=False), pack_events(events)


def _where(sc) -> str:
    return f"{sc.source}" + (f" ({sc.label})" if sc.label else "")


def _budget(seconds: float | None):
    if seconds is None:   # the caller's budget (dtb run sets it around the whole run), or the default
        return contextlib.nullcontext()
    from delegates.guard import time_budget

    return time_budget(seconds)


class CellPool:
    """Where the cells run: `with CellPool(("dask", None), workers) as pool: ... pool.run(...)`.

    A LocalCluster starts on a thread of its own as the executor is entered, so that its workers
    spawn and import while this process loads and checks the scenario; a scheduler at an address is
    reached when the cells are run. Leaving the block shuts the cluster down."""

    def __init__(self, executor: tuple[str, str | None] = ("local", None), workers: int | None = None):
        (self.kind, self.address), self.workers = executor, workers
        if self.kind == "dask" and self.address:
            check_address(self.address)   # before a scenario is loaded or anything starts
        self._stack = contextlib.ExitStack()
        self._client = None
        self._start_error: BaseException | None = None
        self._starting: threading.Thread | None = None
        self._closing: threading.Thread | None = None

    def __enter__(self) -> "CellPool":
        if self.kind == "dask" and not self.address:
            self._starting = threading.Thread(target=self._start, name="dask-cluster", daemon=True)
            self._starting.start()
        return self

    def _start(self) -> None:
        try:
            self._client = self._stack.enter_context(_client(self.address, self.workers))
        except BaseException as exc:  # noqa: BLE001 - raised again on the caller's thread by run()
            self._start_error = exc

    def __exit__(self, *exc_info) -> None:
        if self._starting is not None:
            self._starting.join()
        if self._closing is not None:
            self._closing.join()
        self._stack.close()

    def run(self, run_scenario: RunScenario, cells: Sequence, todo: Sequence[int], done: Done,
            budget: float | None = None, cell_timeout: float | None = None) -> None:
        """Run the cells numbered in `todo` with `run_scenario`, calling done(k, record_json, packed_events)
        in this process as each finishes (in cell order locally, in finishing order on Dask). On Dask, a
        cell that raises, loses its worker or runs past `cell_timeout` seconds (None: no limit) stops the
        sweep with an ExecutorError naming it; the cells done() was called for stay done."""
        if cell_timeout is not None and self.kind != "dask":
            raise ExecutorError("a cell time limit (--cell_timeout_secs) needs --executor dask: a cell running "
                                "here cannot be stopped")
        if self.kind == "local":
            for k in todo:
                done(*run_cell(run_scenario, cells[k], k))
            return
        if self._starting is not None:
            self._starting.join()
        if self._start_error is not None:
            raise self._start_error
        if self._client is None:
            self._client = self._stack.enter_context(_client(self.address, self.workers))
        _run_dask(self._client, run_scenario, cells, todo, done, budget, cell_timeout)
        # nothing more runs here: the cluster shuts down while the caller exports the results
        self._closing = threading.Thread(target=self._stack.close, name="dask-close")
        self._closing.start()


# ---- Dask --------------------------------------------------------------------------------------

def _proxy(items: dict) -> MappingProxyType:
    return MappingProxyType(items)


def _pickle_proxy(m: MappingProxyType):
    return _proxy, (dict(m),)


def _run_dask(client, run_scenario: RunScenario, cells, todo, done: Done, budget,
              cell_timeout: float | None = None) -> None:
    copyreg.pickle(MappingProxyType, _pickle_proxy)   # a Scenario holds its mappings read-only
    pending, run = iter(_longest_first(cells, todo)), secrets.token_hex(6)   # keys unique per run
    slots = max(1, sum(client.nthreads().values()))
    # a few cells queued per worker, not all; with a time limit only as many as run at once, so a
    # cell's clock starts when it starts
    window = slots if cell_timeout is not None else 4 * slots
    running: dict = {}   # future -> (cell, when it was handed over)
    finishing = threading.Event()   # set as any future finishes (Dask calls back on a thread of its own)

    def top_up() -> None:
        for k in itertools.islice(pending, window - len(running)):
            future = client.submit(run_cell, run_scenario, cells[k], k, budget, key=f"dtb-cell-{run}-{k}")
            running[future] = (k, time.monotonic())
            future.add_done_callback(lambda _: finishing.set())

    top_up()
    try:
        while running:
            for future in _finished(finishing, running, cells, cell_timeout):
                del running[future]
                done(*_result(future, cells))
                future.release()
            top_up()
    finally:
        if running:
            client.cancel(list(running))


def _finished(finishing: threading.Event, running: dict, cells, cell_timeout: float | None) -> list:
    """The futures of `running` that have finished, waiting for one; ExecutorError naming the cell that
    has run longer than cell_timeout."""
    finishing.clear()   # before looking: a future finishing from here on sets it again
    finished = [future for future in running if future.done()]
    if finished:
        return finished
    timeout = None
    if cell_timeout is not None:
        k, started = min(running.values(), key=lambda item: item[1])
        timeout = started + cell_timeout - time.monotonic()
        if timeout <= 0:
            raise ExecutorError(f"{_where(cells[k])}: did not finish within {cell_timeout:g} s on a Dask worker "
                                f"(--cell_timeout_secs); the cells finished before it are in results.db, and "
                                f"--resume goes on from them")
    finishing.wait(timeout)
    return [future for future in running if future.done()]


def _longest_first(cells, todo: Sequence[int]) -> list[int]:
    """The cells with the most work first (by the guard's estimate, when it sized their models), so the
    last to finish are short ones and no worker idles long at the end; else in matrix order."""
    seconds = {k: sized_seconds(cells[k]) for k in todo}
    if any(s is None for s in seconds.values()):
        return list(todo)
    return sorted(todo, key=lambda k: -seconds[k])


def _quiet_worker() -> None:
    """Run on each LocalCluster worker: no Python callback on every garbage collection (Dask's GC
    diagnosis), which a simulation allocating millions of small objects pays for at every one."""
    from distributed.gc import disable_gc_diagnosis

    disable_gc_diagnosis(force=True)


def _result(future, cells) -> tuple[int, str, bytes]:
    """The task's result. A worker that died running it (as many times as Dask retries), or an error
    raised in it, is one line naming the cell; the cells stored before stay for --resume."""
    from distributed import KilledWorker

    sc = cells[int(str(future.key).rsplit("-", 1)[-1])]
    resume = "the cells finished before it are in results.db, and --resume goes on from them"
    try:
        return future.result()
    except KilledWorker:
        raise ExecutorError(f"{_where(sc)}: the Dask worker running this cell died (killed, or out of memory); "
                            f"{resume}") from None
    except TestbedError as exc:
        named = str(exc) if str(exc).startswith(str(sc.source)) else f"{_where(sc)}: {exc}"
        try:   # the same kind of error (a DelegateError stays one), now naming the cell
            error = type(exc)(named)
        except Exception:   # noqa: BLE001 - an error type whose constructor takes more than a message
            error = ExecutorError(named)
        raise error from None
    except Exception as exc:   # noqa: BLE001 - whatever the cell raised on the worker, named in one line
        message = " ".join(str(exc).split())
        raise ExecutorError(f"{_where(sc)}: the cell failed on a Dask worker: {type(exc).__name__}: {message}; "
                            f"{resume}") from None


def _remote_client(Client, address: str):
    """A client of the scheduler at `address`, or an ExecutorError naming it: the host is tried with a
    plain connection first (a refused port is one line at once, not CONNECT_SECONDS of retries)."""
    scheme, host, port = check_address(address)
    unreachable = f"cannot reach the Dask scheduler at {address}"
    if port is not None:
        try:
            socket.create_connection((host, port), timeout=CONNECT_SECONDS).close()
        except OSError as exc:   # refused, no route, a name that does not resolve, a time-out
            raise ExecutorError(f"{unreachable}: {exc.strerror or exc}") from None
    # A Client that failed to connect closes itself when collected and reports that close timing out as an
    # "Exception ignored" traceback: held back here, as the failure is already this one line.
    previous = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: None if "Client" in repr(unraisable.object) else previous(unraisable)
    try:
        outcome: dict = {}

        def connect() -> None:
            try:
                outcome["client"] = Client(address, timeout=f"{CONNECT_SECONDS:g}s", set_as_default=False)
            except BaseException as exc:  # noqa: BLE001 - told on the caller's thread below
                outcome["error"] = exc

        # on its own thread: a listener that accepts and never answers holds Client's handshake forever,
        # whatever its timeout (the thread is left behind, a daemon, and goes with the process)
        thread = threading.Thread(target=connect, name="dask-connect", daemon=True)
        thread.start()
        thread.join(2 * CONNECT_SECONDS)
        if "client" in outcome:
            return outcome["client"]
        error = outcome.pop("error", None)
        if error is not None and not isinstance(error, (OSError, TimeoutError, ValueError)):
            raise error
        message = " ".join(str(error).split()) if error is not None else \
            f"no answer within {2 * CONNECT_SECONDS:g} s"
        del error
        import gc

        gc.collect()
        raise ExecutorError(f"{unreachable}: {message} (is it a Dask scheduler?)")
    finally:
        sys.unraisablehook = previous


@contextlib.contextmanager
def _client(address: str | None, workers: int | None) -> Iterator:
    """A client of the scheduler at `address`, or of a LocalCluster: one single-threaded worker process
    per core (the kernels hold the GIL between NumPy calls, so processes, not threads)."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as exc:
        raise TestbedError(f"--executor dask needs dask.distributed: pip install 'dask[distributed]' ({exc})") from None
    if address:
        with contextlib.closing(_remote_client(Client, address)) as client:
            yield client
        return
    import dask

    affinity = getattr(os, "sched_getaffinity", None)   # Linux only: the cores this process may use
    n = workers or (len(affinity(0)) if affinity is not None else os.cpu_count() or 1)
    # The workers' statistical profiler samples the running cell's stack every 10 ms, their event loop
    # ticks every 20 ms, and glibc returns every freed block over 64 KB to the system at once
    # (MALLOC_TRIM_THRESHOLD_): each a tax on a simulation allocating as it goes, buying nothing here.
    # One BLAS thread per worker stays: the workers, not BLAS, share the cores.
    quiet = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s",
             "distributed.nanny.pre-spawn-environ": {"OMP_NUM_THREADS": 1, "MKL_NUM_THREADS": 1,
                                                     "OPENBLAS_NUM_THREADS": 1}}
    # closing(), not the objects' own `with`: Client's sets a context variable, and CellPool may open
    # the cluster on one thread and close it on another. The scheduler serves HTTP (health, metrics)
    # even without a dashboard, on port 8787 unless told otherwise, and warns "Port 8787 is already in
    # use" when another cluster has it: ":0" takes any free port, so a second run says nothing.
    with dask.config.set(quiet), \
            contextlib.closing(LocalCluster(n_workers=n, threads_per_worker=1, processes=True, memory_limit=0,
                                            dashboard_address=":0", silence_logs=logging.CRITICAL)) as cluster, \
            contextlib.closing(Client(cluster, set_as_default=False)) as client:
        client.run(_quiet_worker)
        yield client
