"""Runs scenarios on simulated phones and writes results.json, results.csv, trace.json and report.md.

The output folder is checked and locked before any cell runs, and the four files replace the old ones
as a set (runtime/sweep/outdir.py). Non-finite figures are written as JSON null, so every file is strict JSON.
A cell's parts are built by runtime/sweep/cell.py and its record's shared fields by runtime/measure/record.py; a cell
of concurrent apps runs in runtime/sweep/app_streams.py; runtime/sweep/executors.py runs the cells (here or on Dask) with the
run_scenario this module hands it.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Callable, Sequence

from runtime.sweep import executors as sweep
from runtime.sweep import guard
from runtime.sweep.app_streams import check_apps, run_apps
# Some of these are used here; the rest stay importable from runtime.sweep.runner for the dtb commands and
# the tests (PROFILES: a test empties the profile cache through it).
from runtime.sweep.cell import (PROFILES, conform_input, delegate_factory, build_model, cell_profile,  # noqa: F401
                          cached_profile, make_inputs)
from runtime.measure.footprint import memory_record
from runtime.interpreter.api import Interpreter
from runtime.ir.atomic import write_text
from runtime.ir.errors import ScenarioError, TestbedError
from runtime.ir.graph import Graph
from runtime.measure.figures import measure
from runtime.scenario.apps import AppsScenario
from runtime.measure.record import diffs, plain_value, record_fields, strict_json, unit_footprint
from sim.soc import SoC

__all__ = ["build_model", "make_inputs", "simulate", "run_scenario", "run_file", "record_fields", "unit_footprint",
           "strict_json", "cached_profile"]

Progress = Callable[[int, int, str], None]


def _reference(graph: Graph, inputs: list[dict]) -> list[dict]:
    """The CPU single-thread reference outputs for the same inputs (plain interpreter)."""
    it = Interpreter(graph=graph, num_threads=1)
    it.allocate_tensors()
    outs = []
    for feed in inputs:
        for t, x in feed.items():
            it.set_tensor(t, x)
        it.invoke()
        outs.append({t: it.get_tensor(t) for t in graph.outputs})
    return outs


def simulate(graph: Graph, profile, delegates_for_stream: Callable[[], list], threads: int, warmup: int,
             runs: int, streams: int, timing_only: bool, input_spec, reference: bool = True,
             kinds: Sequence[str] = (), progress: Progress | None = None) -> tuple[dict, SoC]:
    """Run `streams` interpreters of the graph on one simulated phone, warmup + runs each, and
    measure. Each stream gets its own delegate instances (as each TFLite interpreter would)."""
    soc = SoC(profile)
    its = [Interpreter(graph=graph, experimental_delegates=delegates_for_stream(), soc=soc, num_threads=threads,
                       timing_only=timing_only, stream=s) for s in range(streams)]
    for it in its:
        it.allocate_tensors()
    total, done = streams * (warmup + runs), [0]
    feeds: list[dict] = []
    outputs: list[dict] = []

    def stream_process(s: int, it: Interpreter):
        for k in range(warmup + runs):
            feed = make_inputs(graph, input_spec, k)
            for t, x in feed.items():
                it.set_tensor(t, x)
            yield from it.simulation.inference_process()
            if s == 0 and k >= warmup and not timing_only:
                feeds.append(feed)
                outputs.append({t: it.get_tensor(t) for t in graph.outputs})
            done[0] += 1
            if progress:
                progress(done[0], total, f"stream {s} run {k}")

    for s, it in enumerate(its):
        soc.env.process(stream_process(s, it))
    soc.env.run()
    simulation = its[0].simulation
    units = unit_footprint(simulation)
    m = measure(soc, soc.trace.inferences, warmup, units, memory_record(simulation, units))
    nonfinite = sum((it.simulation.nonfinite for it in its), Counter())
    record = record_fields(m, simulation.delegation, kinds, graph, nonfinite, its[0].estimated_ops, profile)
    record["output_diff"] = diffs(graph, _reference(graph, feeds), outputs) if reference and feeds else []
    return record, soc


def run_scenario(sc, progress: Progress | None = None) -> tuple[dict, SoC]:
    """One matrix cell: build the model and the phone, run, measure; the record of results.json.
    A cell of concurrent apps (runtime/sweep/app_streams.py) gives a list: a record per app stream."""
    if isinstance(sc, AppsScenario):
        return run_apps(sc, progress)
    profile = cell_profile(sc)
    graph = build_model(sc.model, sc.source)
    threads = sc.cpu.threads if sc.cpu.threads else 4 if profile.os == "android" else 2
    record, soc = simulate(graph, profile, delegate_factory(sc.delegates, profile), threads, sc.runs.warmup,
                           sc.runs.count, sc.streams, sc.timing_only, sc.inputs,
                           kinds=[d.kind for d in sc.delegates], progress=progress)
    record = {"scenario": sc.name, "label": sc.label, "cell": {k: plain_value(v) for k, v in sc.cell},
              "device": profile.name, **record, "threads": threads, "streams": sc.streams,
              "warmup": sc.runs.warmup, "runs": sc.runs.count, "timing_only": sc.timing_only}
    record["model"].update({"name": sc.model.zoo or str(sc.model.path.name),
                            "quantization": sc.model.quantization.value})
    return record, soc


def _check_cell(sc) -> None:
    """The cell's phone and delegates (created once and dropped), and its input file against the model."""
    where = f"{sc.source}" + (f" ({sc.label})" if sc.label else "")
    try:
        if isinstance(sc, AppsScenario):
            return check_apps(sc)
        delegate_factory(sc.delegates, cell_profile(sc))
        if sc.inputs.file is not None:
            make_inputs(build_model(sc.model, sc.source), sc.inputs, 0)
    except ScenarioError:
        raise
    except TestbedError as exc:
        raise ScenarioError(f"{where}: {exc}") from exc


def check_file(path: str | os.PathLike, allow_external_delegates: bool = False,
               allow_paths_outside_output: bool = False) -> tuple:
    """Load the scenario and check every cell as run_file does before it runs anything; the cells."""
    from runtime.scenario.load import load_scenario

    cells = load_scenario(path, allow_external_delegates, allow_paths_outside_output)
    for sc in cells:
        _check_cell(sc)
    return cells


def run_file(path: str | os.PathLike, out_dir: str | os.PathLike, progress: Progress | None = None,
             allow_external_delegates: bool = False, overwrite: bool = False, *, resume: bool = False,
             executor: tuple[str, str | None] = ("local", None), workers: int | None = None, yes: bool = False,
             budget: float | None = None, cell_timeout: float | None = None,
             allow_paths_outside_output: bool = False) -> dict:
    """Every cell of a scenario file; writes results.json, results.csv, trace.json and report.md
    (and manifest.json, written last). Before any cell runs: a sweep of over guard.GUARD_CELLS cells
    or estimated at an hour or more is refused unless `yes` (runtime/sweep/guard.py), the output folder is
    checked and locked, the scenario loaded and every cell checked; a folder holding another
    scenario's results is refused unless `overwrite` (runtime/sweep/outdir.py). Each cell goes into the
    folder's results.db as it finishes, and `resume` skips the cells it holds (runtime/sweep/results_db.py);
    the four files are exported from it at the end. `executor`: ("local", None) runs the cells here,
    ("dask", ADDRESS or None) as Dask tasks (`workers` processes on a LocalCluster; `budget`: the
    delegate time budget there; `cell_timeout`: seconds a cell may run there, None for no limit; a cell
    failing there is an ExecutorError naming it). `progress(done, total, label)` is called as cells finish. A
    delegate failing while a cell runs is a DelegateError naming the file and the cell. Delegate cache
    folders are relative to `out_dir` and stay inside it unless `allow_paths_outside_output`
    (runtime/sweep/cache_dirs.py)."""
    from runtime.sweep.outdir import ResultsFolder, check_output_path
    from runtime.sweep.results_db import CellStore
    from runtime.sweep.cache_dirs import place_cache_dirs

    out = Path(out_dir)
    check_output_path(out)
    guard.guard_count(path, yes)          # before the matrix is expanded
    with sweep.CellPool(executor, workers) as pool:   # a LocalCluster starts beside the loading
        cells = check_file(path, allow_external_delegates, allow_paths_outside_output)
        placed = place_cache_dirs(cells, out, allow_paths_outside_output)   # run so; the cells' keys stay as written
        guard.guard_time(path, cells, yes)
        with ResultsFolder(out, path, overwrite) as folder, CellStore(out, path, cells, resume, overwrite) as store:
            def done(k: int, record_json: str, events: bytes) -> None:
                store.put(k, record_json, events)
                if progress:
                    progress(len(store.done), len(cells), f"cell {cells[k].label}")

            if progress:
                progress(len(store.done), len(cells), "")
            # handed over rather than imported by sweep.py (which sits below this module), and read from this
            # module as the run starts, so a run_scenario replaced here (as tests do) is the one that runs
            pool.run(run_scenario, placed, [k for k in range(len(cells)) if k not in store.done], done, budget,
                     cell_timeout)
            records = [r for stored in store.records() for r in (stored if isinstance(stored, list) else [stored])]
            results = strict_json({"schema": 1, "scenario": str(path), "records": records})   # apps: one a stream
            folder.commit(_writers(results, store.write_trace))
    return results


def _writers(results: dict, write_trace: Callable[[Path], object]) -> dict[str, Callable[[Path], object]]:
    from runtime.report.render import render

    return {
        "results.json": lambda p: write_text(p, json.dumps(results, indent=1, sort_keys=True, allow_nan=False)),
        "results.csv": lambda p: write_text(p, render(results, "csv")),
        "report.md": lambda p: write_text(p, render(results, "md")),
        "trace.json": write_trace,
    }
