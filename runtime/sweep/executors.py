"""Sweep execution (local or Dask) under the runner: where each cell runs, and the guard before a big sweep.

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
import copy
import copyreg
import itertools
import json
import logging
import math
import os
import secrets
import threading
from pathlib import Path
from types import MappingProxyType
from typing import Callable, Iterator, Sequence

from runtime.limits import counts as limits
from runtime.sweep.cell import build_model
from runtime.ir.errors import DelegateError, ScenarioError, TestbedError
from runtime.ir.files import read_text
from runtime.measure.record import strict_json
from runtime.scenario.apps import AppsScenario

__all__ = ["EXECUTORS", "GUARD_CELLS", "GUARD_SECONDS", "GuardError", "CellPool", "executor_arg", "run_cell",
           "count_cells", "estimate", "estimate_seconds", "guard_count", "guard_time", "duration"]

EXECUTORS = ("local", "dask")
GUARD_CELLS = 100_000          # more cells than this need --yes
GUARD_SECONDS = 3600.0         # so does an estimated hour of host time or more

Done = Callable[[int, str, bytes], None]
RunScenario = Callable[[object], tuple]   # a cell -> (its record, its SoC): runtime.sweep.runner.run_scenario


class GuardError(TestbedError):
    """A sweep too big to start without --yes (yes=True)."""


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
        raise DelegateError(f"{sc.source}" + (f" ({sc.label})" if sc.label else "") + f": {exc}") from exc
    events = chrome_trace(soc, sc.label or sc.name, pid=k + 1)["traceEvents"]
    return k, json.dumps(strict_json(record), allow_nan=False), pack_events(events)


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
            budget: float | None = None) -> None:
        """Run the cells numbered in `todo` with `run_scenario`, calling done(k, record_json, packed_events)
        in this process as each finishes (in cell order locally, in finishing order on Dask)."""
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
        _run_dask(self._client, run_scenario, cells, todo, done, budget)
        # nothing more runs here: the cluster shuts down while the caller exports the results
        self._closing = threading.Thread(target=self._stack.close, name="dask-close")
        self._closing.start()


# ---- Dask --------------------------------------------------------------------------------------

def _proxy(items: dict) -> MappingProxyType:
    return MappingProxyType(items)


def _pickle_proxy(m: MappingProxyType):
    return _proxy, (dict(m),)


def _run_dask(client, run_scenario: RunScenario, cells, todo, done: Done, budget) -> None:
    from dask.distributed import as_completed

    copyreg.pickle(MappingProxyType, _pickle_proxy)   # a Scenario holds its mappings read-only
    pending, run = iter(_longest_first(cells, todo)), secrets.token_hex(6)   # keys unique per run
    window = 4 * max(1, sum(client.nthreads().values()))   # a few cells queued per worker, not all
    submit = lambda k: client.submit(run_cell, run_scenario, cells[k], k, budget,  # noqa: E731
                                     key=f"dtb-cell-{run}-{k}")
    futures = as_completed([submit(k) for k in itertools.islice(pending, window)], loop=client.loop)
    try:
        for future in futures:
            done(*_result(future, cells))
            future.release()
            for k in itertools.islice(pending, 1):
                futures.add(submit(k))
    finally:
        futures.clear()


def _longest_first(cells, todo: Sequence[int]) -> list[int]:
    """The cells with the most work first (by the guard's estimate, when it sized their models), so the
    last to finish are short ones and no worker idles long at the end; else in matrix order."""
    if not all(_size_key(m) in _SIZES for k in todo for m in _models(cells[k])):
        return list(todo)
    return sorted(todo, key=lambda k: -_cell_seconds(cells[k]))


def _quiet_worker() -> None:
    """Run on each LocalCluster worker: no Python callback on every garbage collection (Dask's GC
    diagnosis), which a simulation allocating millions of small objects pays for at every one."""
    from distributed.gc import disable_gc_diagnosis

    disable_gc_diagnosis(force=True)


def _result(future, cells) -> tuple[int, str, bytes]:
    """The task's result; a worker that died running it (three times, as Dask retries) is one line."""
    from distributed import KilledWorker

    try:
        return future.result()
    except KilledWorker as exc:
        sc = cells[int(str(future.key).rsplit("-", 1)[-1])]
        raise TestbedError(f"{sc.source} ({sc.label}): the Dask worker running this cell died: {exc}") from None


@contextlib.contextmanager
def _client(address: str | None, workers: int | None) -> Iterator:
    """A client of the scheduler at `address`, or of a LocalCluster: one single-threaded worker process
    per core (the kernels hold the GIL between NumPy calls, so processes, not threads)."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as exc:
        raise TestbedError(f"--executor dask needs dask.distributed: pip install 'dask[distributed]' ({exc})") from None
    if address:
        try:
            client = Client(address, timeout="20s", set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            raise TestbedError(f"cannot reach the Dask scheduler at {address}: {' '.join(str(exc).split())}") from None
        with contextlib.closing(client):
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
    # the cluster on one thread and close it on another
    with dask.config.set(quiet), \
            contextlib.closing(LocalCluster(n_workers=n, threads_per_worker=1, processes=True, memory_limit=0,
                                            dashboard_address=None, silence_logs=logging.CRITICAL)) as cluster, \
            contextlib.closing(Client(cluster, set_as_default=False)) as client:
        client.run(_quiet_worker)
        yield client


# ---- the guard -----------------------------------------------------------------------------------

# The estimate: cells x inferences x a host cost per inference from the model's size. Measured on a
# 2-core x86 host (benchmarks/sim_overhead.py, benchmarks/cpu_vs_litert.py): a simulated op costs
# 0.06-0.16 ms of host time without the math, and the kernels run about 25 G multiply-adds a second
# when outputs are computed (MobileNet v1 1.0/224, 569 M MACs: 22 ms), once more for the reference.
_PER_OP_S = 1e-4
_PER_MAC_S = 4e-11
_PER_CELL_S = 0.05
_SAMPLE = 32
_UNESTIMATED = 1_000   # fewer inferences than this take an hour only at 3.6 s each: not worth building models for
HOW = ("cells x streams x (warmup + count) x (0.1 ms per op, plus 40 ps per multiply-add when outputs are "
       "computed), from a sample of the cells' models; a guess within 2-3x")


def duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


def count_cells(path: str | os.PathLike) -> int | None:
    """The cells a scenario file's matrix expands to, from the parsed document alone (nothing expanded);
    None when the file does not read as a scenario (loading it then says what is wrong)."""
    data = _document(path)
    if not isinstance(data, dict):
        return None
    matrix = data.get("matrix", {})
    if not isinstance(matrix, dict) or not all(isinstance(v, list) and v for v in matrix.values()):
        return None
    return math.prod(len(v) for v in matrix.values())


def _document(path):
    from runtime.ir.yamlcheck import parse

    try:
        return parse(read_text(path), str(path), ScenarioError)[0]
    except (OSError, UnicodeDecodeError, TestbedError):
        return None


def guard_count(path: str | os.PathLike, yes: bool) -> None:
    """Before the matrix is expanded: more than GUARD_CELLS cells (within the hard limit) need `yes`."""
    count = None if yes else count_cells(path)
    if count is None or count <= GUARD_CELLS or count > limits.MAX_CELLS:
        return
    sample = _sample_cells(path, _document(path), count)
    seconds = estimate_seconds(sample) * count / len(sample) if sample else None
    raise GuardError(_refusal(path, count, seconds))


def guard_time(path: str | os.PathLike, cells: Sequence, yes: bool) -> None:
    """After loading: an estimated GUARD_SECONDS of host time or more needs `yes`."""
    seconds = None if yes else estimate(cells)
    if seconds is not None and seconds >= GUARD_SECONDS:
        raise GuardError(_refusal(path, len(cells), seconds))


def estimate(cells: Sequence) -> float | None:
    """Host seconds to run the cells one after another, from a sample of up to _SAMPLE of them; None
    under _UNESTIMATED inferences in all (an hour would take 3.6 s an inference: no models are built)."""
    if sum(sc.streams * (sc.runs.warmup + sc.runs.count) for sc in cells) < _UNESTIMATED:
        return None
    sample = cells[::max(1, len(cells) // _SAMPLE)]
    return estimate_seconds(sample) * len(cells) / len(sample)


def _refusal(path, count: int, seconds: float | None) -> str:
    shown = f"about {duration(seconds)} of host time one cell after another" if seconds is not None else \
        "time not estimated"
    return f"{path}: {count:,} cells, {shown} ({HOW}); pass --yes to run it anyway"


def _sample_cells(path, data: dict, count: int) -> list:
    """Up to _SAMPLE cells spread over the matrix, each built from the document on its own and loaded
    as a one-cell scenario (a cell that does not load is left out of the sample)."""
    from runtime.scenario.load import scenario_from_text
    import yaml

    axes = list(data["matrix"].items())
    base = {k: v for k, v in data.items() if k != "matrix"}
    out = []
    for i in range(min(_SAMPLE, count)):
        doc, index = copy.deepcopy(base), i * count // min(_SAMPLE, count)
        for key, values in reversed(axes):   # the last key varies fastest
            index, pick = divmod(index, len(values))
            _set(doc, key.split("."), copy.deepcopy(values[pick]))
        with contextlib.suppress(TestbedError, yaml.YAMLError, TypeError, ValueError):
            out.extend(scenario_from_text(yaml.safe_dump(doc), path))
    return out


def _set(doc: dict, parts: list[str], value) -> None:
    for part in parts[:-1]:
        doc = doc.setdefault(part, {}) if isinstance(doc.get(part, {}), dict) else {}
    doc[parts[-1]] = value


def estimate_seconds(cells: Sequence) -> float:
    """Host seconds to run `cells` one after another (see HOW)."""
    return sum(_cell_seconds(sc) for sc in cells)


_SIZES: dict[tuple, tuple[int, int]] = {}


def _models(sc) -> list:
    return [app.model for app in sc.apps] if isinstance(sc, AppsScenario) else [sc.model]


def _cell_seconds(sc) -> float:
    sizes = [_model_size(m) for m in _models(sc)]
    ops, macs = (sum(size[i] for size in sizes) / len(sizes) for i in (0, 1))
    inferences = sc.streams * (sc.runs.warmup + sc.runs.count)
    math_s = 0.0 if sc.timing_only else macs * _PER_MAC_S
    reference_s = 0.0 if sc.timing_only else sc.runs.count * math_s
    return _PER_CELL_S + inferences * (ops * _PER_OP_S + math_s) + reference_s


def _model_size(spec) -> tuple[int, int]:
    """(ops, multiply-adds plus other element operations) of the model, built unquantized once per model."""
    from dataclasses import replace
    from runtime.scenario.load import Quantization

    key = _size_key(spec)
    if key not in _SIZES:
        graph = build_model(replace(spec, quantization=Quantization.NONE) if spec.zoo else spec)
        _SIZES[key] = (len(graph.ops), _work(graph))
    return _SIZES[key]


def _size_key(spec) -> tuple:
    return spec.zoo, tuple(sorted(dict(spec.args).items())), str(spec.path)


def _work(graph) -> int:
    from sim.cost import Precision
    from sim.work import describe

    shapes = [tuple(max(1, d) for d in t.shape) for t in graph.tensors]
    total = 0
    for op in graph.ops:
        with contextlib.suppress(Exception):   # an op the cost model cannot size counts as no work
            w = describe(op, graph, shapes, Precision.FLOAT32)
            total += w.macs + w.elem_ops
    return total
