"""Runs scenarios on simulated phones and writes results.json, results.csv, trace.json and report.md.

The output folder is checked and locked before any cell runs, and the four files replace the old ones
as a set (runtime/outdir.py). Non-finite figures are written as JSON null, so every file is strict JSON.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from runtime.ir.atomic import write_text
from runtime.delegation import CpuStep
from runtime.ir.errors import ScenarioError, TestbedError
from runtime.ir.graph import Graph
from runtime.interpreter import Interpreter
from runtime.footprint import memory_record
from runtime.measure import measure, output_diff
from sim.soc import SoC
from sim.work import footprint, tensor_bytes

__all__ = ["build_model", "make_inputs", "simulate", "run_scenario", "run_file", "record_fields", "unit_footprint",
           "strict_json", "load_device"]

Progress = Callable[[int, int, str], None]
_MODELS: dict[tuple, Graph] = {}


def build_model(spec, source: Path | None = None) -> Graph:
    """The scenario's model (a ModelSpec) through the one loader: a .tflite file, or a zoo builder,
    quantized as asked; zoo models are cached per process, since int8 calibration runs the float
    model several times."""
    from runtime.loader import KEYS, ModelSource, load_model

    model = ModelSource(path=spec.path, zoo=spec.zoo, zoo_args=dict(spec.args), quantization=spec.quantization.value)
    if spec.path is not None:
        return load_model(model, KEYS)
    key = (spec.zoo, tuple(sorted(dict(spec.args).items())), spec.quantization.value)
    if key not in _MODELS:
        _MODELS[key] = load_model(model, KEYS)
    return _MODELS[key]


def _random_input(tensor, rng: np.random.Generator, distribution: str, low: float, high: float) -> np.ndarray:
    shape = tensor.shape
    x = (rng.uniform(low, high, shape) if distribution == "uniform" else rng.standard_normal(shape))
    if tensor.dtype.np.kind in "fc":  # a complex input gets the sample as its real part
        return x.astype(tensor.dtype.np)
    if tensor.quant is not None:  # a quantized input: the float sample on the tensor's grid
        info = np.iinfo(tensor.dtype.np)
        q = np.round(x / tensor.quant.scale[0]) + tensor.quant.zero_point[0]
        return np.clip(q, info.min, info.max).astype(tensor.dtype.np)
    info = np.iinfo(tensor.dtype.np) if tensor.dtype.np.kind in "iu" else None
    return (np.clip(np.round(x * 10), info.min, info.max) if info else x > 0).astype(tensor.dtype.np)


def make_inputs(graph: Graph, spec, k: int) -> dict[int, np.ndarray]:
    """Inputs of run k: seeded random per run, or the arrays of a .npy/.npz file (same every run).
    A file's arrays must match the model's inputs (names, shapes, values the input type can hold),
    or this raises ScenarioError naming the file, the array and the input."""
    if spec.file is not None:
        return _file_inputs(graph, spec)
    rng = np.random.default_rng([spec.seed, k])
    return {t: _random_input(graph.tensors[t], rng, spec.distribution.value, spec.low, spec.high)
            for t in graph.inputs}


_INPUT_FILES: dict[tuple, dict[str, np.ndarray]] = {}


def _read_input_file(path: Path, where: str) -> dict[str, np.ndarray]:
    """The file's arrays ('' for a .npy), read once per file version; no pickles."""
    try:
        st = path.stat()
        key = (str(path), st.st_mtime_ns, st.st_size)
        if key not in _INPUT_FILES:
            loaded = np.load(path, allow_pickle=False)
            if isinstance(loaded, np.ndarray):
                arrays = {"": loaded}
            else:
                with loaded:
                    arrays = {n: loaded[n] for n in loaded.files}
            _INPUT_FILES.clear()   # one file at a time: a cell reads the same file every run
            _INPUT_FILES[key] = arrays
        return _INPUT_FILES[key]
    except Exception as exc:  # noqa: BLE001 - the file changed since the scenario was loaded, or is corrupt
        raise ScenarioError(f"{where}: {path}: cannot be read: {' '.join(str(exc).split())}") from None


def _file_inputs(graph: Graph, spec) -> dict[int, np.ndarray]:
    where = spec.where or str(spec.file)
    arrays = _read_input_file(spec.file, where)
    names = {graph.tensors[t].name: t for t in graph.inputs}
    if "" in arrays:
        if len(graph.inputs) != 1:
            raise ScenarioError(f"{where}: {spec.file} holds one array but the model has {len(graph.inputs)} inputs "
                                f"({', '.join(names)}): give a .npz with an array named after each")
        pairs = [("", graph.inputs[0])]
    else:
        missing = [n for n in names if n not in arrays]
        if missing:
            raise ScenarioError(f"{where}: {spec.file} has no array for input '{missing[0]}' (it has "
                                f"{', '.join(sorted(arrays)) or 'none'})")
        pairs = [(n, names[n]) for n in names]
    return {t: _conform_input(arrays[n], graph, t, f"{where}: {spec.file}: array '{n or graph.tensors[t].name}'")
            for n, t in pairs}


def _conform_input(array: np.ndarray, graph: Graph, t: int, what: str) -> np.ndarray:
    tensor = graph.tensors[t]
    target = np.dtype(tensor.dtype.np)
    if array.shape != tuple(tensor.shape):
        raise ScenarioError(f"{what} has shape {list(array.shape)}; input '{tensor.name}' is {list(tensor.shape)}")
    if array.dtype.kind not in "biuf":
        raise ScenarioError(f"{what} holds {array.dtype} values; input '{tensor.name}' takes {target}")
    if target.kind in "iub" and array.size:
        info = np.iinfo(target) if target.kind != "b" else None
        low, high = (info.min, info.max) if info else (0, 1)
        values = array.astype(np.float64) if array.dtype.kind == "f" else array
        if (array.dtype.kind == "f" and not np.all(np.isfinite(values) & (np.round(values) == values))) \
                or values.min() < low or values.max() > high:
            raise ScenarioError(f"{what} holds values that are not {target} (integers in [{low}, {high}]); "
                                f"input '{tensor.name}' is {target}")
    return array.astype(target)


def unit_footprint(sim) -> dict[str, int]:
    """Bytes each unit holds: the CPU the tensors of its ops, an accelerator its partitions' tensors
    as it stores them (padded channels, its precision)."""
    graph, ex = sim.graph, sim.executor
    cpu = {t for step in ex.plan if isinstance(step, CpuStep)
           for t in (*graph.ops[step.op].inputs, *graph.ops[step.op].outputs) if t >= 0}
    sizes = {sim.soc.cpu.name: sum(tensor_bytes(ex.shapes[t], graph.tensors[t].dtype) for t in cpu)}
    for job in ex.jobs:
        if hasattr(job, "step") and job.ops:   # a delegated partition
            sizes[job.unit.name] = sizes.get(job.unit.name, 0) + footprint(
                graph, job.step.partition.nodes, ex.shapes, job.ops[0].work.precision, job.unit.channel_align)
    return sizes


def _delegate_records(delegation, kinds: Sequence[str]) -> list[dict]:
    out = []
    for kind, rep in zip(kinds, delegation.per_delegate):
        out.append({"kind": kind, "name": rep.delegate, "nodes_delegated": rep.nodes_delegated,
                    "total_nodes": rep.total_nodes, "partitions": rep.partitions,
                    "unsupported": [{"op": u.op, "name": u.name, "reason": u.reason} for u in rep.unsupported]})
        if rep.error:  # the delegate failed while applied (TFLite restored the plan), or was not applied
            out[-1]["error"] = rep.error
    return out


def _diffs(graph: Graph, reference: list[dict], test: list[dict]) -> list[dict]:
    """inference_diff's figures per output over the runs: mean of per-run mean |diff|, their std, max.
    NaN or infinity in an output makes its figures None (null in results.json)."""
    rows = []
    for t in graph.outputs:
        with np.errstate(invalid="ignore", over="ignore"):
            per_run = [output_diff(r[t], s[t]) for r, s in zip(reference, test)]
            avg = [p[0] for p in per_run]
            row = {"output": graph.tensors[t].name, "avg_error": float(np.mean(avg)),
                   "std_dev": float(np.std(avg)), "max": float(max(p[2] for p in per_run))}
        rows.append({k: _finite(v) for k, v in row.items()})
    return rows


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def strict_json(value: Any) -> Any:
    """`value` with every NaN or infinity replaced by None, so json.dumps(allow_nan=False) accepts it."""
    if isinstance(value, float):
        return _finite(value)
    if isinstance(value, Mapping):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


def nonfinite_records(counts: Mapping, graph: Graph) -> list[dict]:
    """The record's flags for delegate outputs that held NaN or infinity: which delegate, which tensor,
    in how many invokes."""
    return [{"delegate": d, "tensor": graph.tensors[t].name, "index": t, "invokes": n}
            for (d, t), n in sorted(counts.items(), key=lambda kv: (kv[0][0], kv[0][1]))]


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
    sim = its[0].simulation
    units = unit_footprint(sim)
    m = measure(soc, soc.trace.inferences, warmup, units, memory_record(sim, units))
    nonfinite = sum((it.simulation.nonfinite for it in its), Counter())
    record = record_fields(m, sim.delegation, kinds, graph, nonfinite, its[0].estimated_ops)
    record["output_diff"] = _diffs(graph, _reference(graph, feeds), outputs) if reference and feeds else []
    return record, soc


def _ms(stats) -> dict[str, float]:
    return {k: (v if k == "count" else v * 1e3) for k, v in stats.__dict__.items()}


def record_fields(m, delegation, kinds: Sequence[str], graph: Graph, nonfinite: Mapping | None = None,
                  estimated: Sequence[int] = ()) -> dict[str, Any]:
    """The measured part of a results.json record (shared with `dtb benchmark --output_json`).
    `nonfinite`: (delegate name, tensor) -> invokes whose output held NaN or infinity. `estimated`:
    ops a timing-only run costed from their shapes because no kernel runs them."""
    return {
        "nonfinite": nonfinite_records(nonfinite or {}, graph),
        "estimated": [graph.describe_op(i) for i in estimated],
        "model": {"name": graph.name, "nodes": len(graph.ops)},
        "delegates": _delegate_records(delegation, kinds),
        # a delegate on a phone that has none of it takes no op: the record says why (None: no such delegate)
        "platform_refusal": "; ".join(r.platform_refusal for r in delegation.per_delegate if r.platform_refusal)
                            or None,
        "placement": {str(k): v for k, v in sorted(delegation.placement().items())},
        "latency_ms": _ms(m.latency),
        "init_ms": m.init_s * 1e3,
        "boundary": {"crossings": m.boundary.crossings, "bytes": m.boundary.bytes, "ms": m.boundary.seconds * 1e3,
                     "mj": m.boundary.joules * 1e3, "share": m.boundary.share},
        "energy": {"total_mj": m.energy_mj, "avg_power_w": m.avg_power_w, "peak_power_w": m.peak_power_w,
                   "rails": {r.rail: {"active_mj": r.active_mj, "total_mj": r.total_mj} for r in m.energy}},
        "per_op": [{"node": o.node, "unit": o.unit, "first_ms": o.first_s * 1e3, "avg_ms": o.avg_s * 1e3,
                    "count": o.count, "mem_bytes": o.mem_bytes} for o in m.per_op],
        "footprint_bytes": dict(m.footprint),
        # weights, TFLite's CPU arena, each delegate unit's buffers (runtime/footprint.py)
        **({"memory": m.memory.as_json()} if m.memory is not None else {}),
        "log": list(delegation.log),
    }


def _delegate_factory(specs, profile) -> Callable[[], list]:
    from delegates.registry import load_external, load_plugin, make_delegate

    def make() -> list:
        out = []
        for spec in specs:
            options = {k: str(v) for k, v in dict(spec.options).items()}
            if spec.entry_point:
                out.append(load_plugin(spec.entry_point, options))
            elif spec.factory:  # the scenario was loaded with allow_external_delegates
                out.append(load_external(spec.factory, options, declared=True))
            else:
                out.append(make_delegate(spec.kind, profile, **dict(spec.options)))
        return out

    make()  # fail early, before anything runs, on a bad option
    return make


_PROFILES: dict[tuple, Any] = {}


def load_device(sc):
    """The cell's phone profile, read once per file version (a 10,000-cell matrix on one phone
    reads its profile once)."""
    from sim.profile import PROFILE_DIR, load_profile

    path = sc.device_file or PROFILE_DIR / f"{sc.device}.yaml"
    try:
        st = os.stat(path)
        key = (str(path), st.st_mtime_ns, st.st_size)
    except OSError:
        return load_profile(sc.device_file or sc.device)   # let the loader say what is wrong
    if key not in _PROFILES:
        if len(_PROFILES) > 64:
            _PROFILES.clear()
        _PROFILES[key] = load_profile(sc.device_file or sc.device)
    return _PROFILES[key]


def cell_profile(sc):
    """The cell's phone, on the API level the scenario asks for (`api_level:`)."""
    from runtime.ir.errors import ProfileError
    from sim.profile import with_api_level

    try:
        return with_api_level(load_device(sc), sc.api_level)
    except ProfileError as exc:
        if sc.api_level is None:
            raise
        raise ScenarioError(f"{sc.source}: api_level: {exc}") from None


def run_scenario(sc, progress: Progress | None = None) -> tuple[dict, SoC]:
    """One matrix cell: build the model and the phone, run, measure; the record of results.json.
    A cell of concurrent apps (runtime/apps.py) gives a list: a record per app stream."""
    if hasattr(sc, "apps"):
        from runtime.apps import run_apps
        return run_apps(sc, progress)
    profile = cell_profile(sc)
    graph = build_model(sc.model, sc.source)
    threads = sc.cpu.threads if sc.cpu.threads else 4 if profile.os == "android" else 2
    record, soc = simulate(graph, profile, _delegate_factory(sc.delegates, profile), threads, sc.runs.warmup,
                           sc.runs.count, sc.streams, sc.timing_only, sc.inputs,
                           kinds=[d.kind for d in sc.delegates], progress=progress)
    record = {"scenario": sc.name, "label": sc.label, "cell": {k: _plain(v) for k, v in sc.cell},
              "device": profile.name, **record, "threads": threads, "streams": sc.streams,
              "warmup": sc.runs.warmup, "runs": sc.runs.count, "timing_only": sc.timing_only}
    record["model"].update({"name": sc.model.zoo or str(sc.model.path.name),
                            "quantization": sc.model.quantization.value})
    return record, soc


def _plain(value: Any) -> Any:
    """Matrix values as JSON has them (delegate specs as their kinds)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "kind"):
        return value.kind
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value if isinstance(value, (int, float, str, bool)) or value is None else str(value)


def _check_cell(sc) -> None:
    """The cell's phone and delegates (created once and dropped), and its input file against the model."""
    where = f"{sc.source}" + (f" ({sc.label})" if sc.label else "")
    try:
        if hasattr(sc, "apps"):
            from runtime.apps import check_apps
            return check_apps(sc)
        _delegate_factory(sc.delegates, cell_profile(sc))
        if sc.inputs.file is not None:
            make_inputs(build_model(sc.model, sc.source), sc.inputs, 0)
    except ScenarioError:
        raise
    except TestbedError as exc:
        raise ScenarioError(f"{where}: {exc}") from exc


def check_file(path: str | os.PathLike, allow_external_delegates: bool = False) -> tuple:
    """Load the scenario and check every cell as run_file does before it runs anything; the cells."""
    from runtime.scenario import load_scenario

    cells = load_scenario(path, allow_external_delegates)
    for sc in cells:
        _check_cell(sc)
    return cells


def run_file(path: str | os.PathLike, out_dir: str | os.PathLike, progress: Progress | None = None,
             allow_external_delegates: bool = False, overwrite: bool = False, *, resume: bool = False,
             executor: tuple[str, str | None] = ("local", None), workers: int | None = None, yes: bool = False,
             budget: float | None = None) -> dict:
    """Every cell of a scenario file; writes results.json, results.csv, trace.json and report.md
    (and manifest.json, written last). Before any cell runs: a sweep of over sweep.GUARD_CELLS cells
    or estimated at an hour or more is refused unless `yes` (runtime/sweep.py), the output folder is
    checked and locked, the scenario loaded and every cell checked; a folder holding another
    scenario's results is refused unless `overwrite` (runtime/outdir.py). Each cell goes into the
    folder's results.db as it finishes, and `resume` skips the cells it holds (runtime/results_db.py);
    the four files are exported from it at the end. `executor`: ("local", None) runs the cells here,
    ("dask", ADDRESS or None) as Dask tasks (`workers` processes on a LocalCluster; `budget`: the
    delegate time budget there). `progress(done, total, label)` is called as cells finish. A
    delegate failing while a cell runs is a DelegateError naming the file and the cell."""
    from runtime import sweep
    from runtime.outdir import ResultsFolder, check_output_path
    from runtime.results_db import CellStore

    out = Path(out_dir)
    check_output_path(out)
    sweep.guard_count(path, yes)          # before the matrix is expanded
    with sweep.Executor(executor, workers) as pool:   # a LocalCluster starts beside the loading
        cells = check_file(path, allow_external_delegates)
        sweep.guard_time(path, cells, yes)
        with ResultsFolder(out, path, overwrite) as folder, CellStore(out, path, cells, resume, overwrite) as store:
            def done(k: int, record_json: str, events: bytes) -> None:
                store.put(k, record_json, events)
                if progress:
                    progress(len(store.done), len(cells), f"cell {cells[k].label}")

            if progress:
                progress(len(store.done), len(cells), "")
            pool.run(cells, [k for k in range(len(cells)) if k not in store.done], done, budget)
            records = [r for stored in store.records() for r in (stored if isinstance(stored, list) else [stored])]
            results = strict_json({"schema": 1, "scenario": str(path), "records": records})   # apps: one a stream
            folder.commit(_writers(results, store.write_trace))
    return results


def _writers(results: dict, write_trace: Callable[[Path], object]) -> dict[str, Callable[[Path], object]]:
    from runtime.report import render

    return {
        "results.json": lambda p: write_text(p, json.dumps(results, indent=1, sort_keys=True, allow_nan=False)),
        "results.csv": lambda p: write_text(p, render(results, "csv")),
        "report.md": lambda p: write_text(p, render(results, "md")),
        "trace.json": write_trace,
    }
