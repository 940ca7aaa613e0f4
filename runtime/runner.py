"""Runs scenarios on simulated phones and writes results.json, results.csv, trace.json and report.md."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from runtime import tflite_io
from runtime.atomic import write_text
from runtime.delegation import CpuStep
from runtime.errors import ScenarioError, TestbedError
from runtime.graph import Graph
from runtime.interpreter import Interpreter
from runtime.measure import measure, output_diff
from sim.soc import SoC
from sim.work import footprint, tensor_bytes

__all__ = ["build_model", "make_inputs", "simulate", "run_scenario", "run_file", "record_fields", "unit_footprint"]

Progress = Callable[[int, int, str], None]
_MODELS: dict[tuple, Graph] = {}
_CALIBRATION_SAMPLES = 4


def build_model(spec, source: Path | None = None) -> Graph:
    """The scenario's model: a .tflite file, or a zoo builder quantized as asked (cached per process,
    since int8 calibration runs the float model several times)."""
    if spec.path is not None:
        return tflite_io.load(spec.path)
    key = (spec.zoo, tuple(sorted(dict(spec.args).items())), spec.quantization.value)
    if key not in _MODELS:
        from runtime.zoo import build
        from runtime.zoo.quantize import CALIBRATED, quantize

        graph = build(spec.zoo, **dict(spec.args))
        mode = spec.quantization.value
        if mode != "none":
            shape = graph.tensors[graph.inputs[0]].shape
            rng = np.random.default_rng(1234)
            samples = [rng.standard_normal(shape).astype(np.float32) for _ in range(_CALIBRATION_SAMPLES)]
            graph = quantize(graph, mode, representative_data=samples if mode in CALIBRATED else None)
        _MODELS[key] = graph
    return _MODELS[key]


def _random_input(tensor, rng: np.random.Generator, distribution: str, low: float, high: float) -> np.ndarray:
    shape = tensor.shape
    x = (rng.uniform(low, high, shape) if distribution == "uniform" else rng.standard_normal(shape))
    if tensor.dtype.np.kind == "f":
        return x.astype(tensor.dtype.np)
    if tensor.quant is not None:  # a quantized input: the float sample on the tensor's grid
        info = np.iinfo(tensor.dtype.np)
        q = np.round(x / tensor.quant.scale[0]) + tensor.quant.zero_point[0]
        return np.clip(q, info.min, info.max).astype(tensor.dtype.np)
    info = np.iinfo(tensor.dtype.np) if tensor.dtype.np.kind in "iu" else None
    return (np.clip(np.round(x * 10), info.min, info.max) if info else x > 0).astype(tensor.dtype.np)


def make_inputs(graph: Graph, spec, k: int) -> dict[int, np.ndarray]:
    """Inputs of run k: seeded random per run, or the arrays of a .npy/.npz file (same every run)."""
    if spec.file is not None:
        data = np.load(spec.file)
        if isinstance(data, np.ndarray):
            return {graph.inputs[0]: data.astype(graph.tensors[graph.inputs[0]].dtype.np)}
        names = {graph.tensors[t].name: t for t in graph.inputs}
        missing = sorted(set(names) - set(data.files))
        if missing:
            raise ScenarioError(f"{spec.file}: no array for input '{missing[0]}' (it has {', '.join(data.files)})")
        return {t: data[n].astype(graph.tensors[t].dtype.np) for n, t in names.items()}
    rng = np.random.default_rng([spec.seed, k])
    return {t: _random_input(graph.tensors[t], rng, spec.distribution.value, spec.low, spec.high)
            for t in graph.inputs}


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
    return out


def _diffs(graph: Graph, reference: list[dict], test: list[dict]) -> list[dict]:
    """inference_diff's figures per output over the runs: mean of per-run mean |diff|, their std, max."""
    rows = []
    for t in graph.outputs:
        per_run = [output_diff(r[t], s[t]) for r, s in zip(reference, test)]
        avg = [p[0] for p in per_run]
        rows.append({"output": graph.tensors[t].name, "avg_error": float(np.mean(avg)),
                     "std_dev": float(np.std(avg)), "max": float(max(p[2] for p in per_run))})
    return rows


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
    m = measure(soc, soc.trace.inferences, warmup, unit_footprint(sim))
    record = record_fields(m, sim.delegation, kinds, graph)
    record["output_diff"] = _diffs(graph, _reference(graph, feeds), outputs) if reference and feeds else []
    return record, soc


def _ms(stats) -> dict[str, float]:
    return {k: (v if k == "count" else v * 1e3) for k, v in stats.__dict__.items()}


def record_fields(m, delegation, kinds: Sequence[str], graph: Graph) -> dict[str, Any]:
    """The measured part of a results.json record (shared with `dtb benchmark --output_json`)."""
    return {
        "model": {"name": graph.name, "nodes": len(graph.ops)},
        "delegates": _delegate_records(delegation, kinds),
        "placement": {str(k): v for k, v in sorted(delegation.placement().items())},
        "latency_ms": _ms(m.latency),
        "init_ms": m.init_s * 1e3,
        "boundary": {"crossings": m.boundary.crossings, "bytes": m.boundary.bytes, "ms": m.boundary.seconds * 1e3,
                     "mj": m.boundary.joules * 1e3, "share": m.boundary.share},
        "energy": {"total_mj": m.energy_mj, "avg_power_w": m.avg_power_w, "peak_power_w": m.peak_power_w,
                   "rails": {r.rail: {"active_mj": r.active_mj, "total_mj": r.total_mj} for r in m.energy}},
        "per_op": [{"node": o.node, "unit": o.unit, "first_ms": o.first_s * 1e3, "avg_ms": o.avg_s * 1e3,
                    "count": o.count} for o in m.per_op],
        "footprint_bytes": dict(m.footprint),
        "log": list(delegation.log),
    }


def _delegate_factory(specs, profile) -> Callable[[], list]:
    from delegates.registry import load_external, make_delegate

    def make() -> list:
        out = []
        for spec in specs:
            if spec.factory:
                out.append(load_external(spec.factory, {k: str(v) for k, v in dict(spec.options).items()}))
            else:
                out.append(make_delegate(spec.kind, profile, **dict(spec.options)))
        return out

    make()  # fail early, before anything runs, on a bad option
    return make


def run_scenario(sc, progress: Progress | None = None) -> tuple[dict, SoC]:
    """One matrix cell: build the model and the phone, run, measure; the record of results.json."""
    from sim.profile import load_profile

    profile = load_profile(sc.device_file or sc.device)
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
    from sim.profile import load_profile

    try:
        _delegate_factory(sc.delegates, load_profile(sc.device_file or sc.device))
    except TestbedError as exc:
        where = f"{sc.source}" + (f" ({sc.label})" if sc.label else "")
        raise ScenarioError(f"{where}: {exc}") from exc


def run_file(path: str | os.PathLike, out_dir: str | os.PathLike, progress: Progress | None = None) -> dict:
    """Every cell of a scenario file; writes results.json, results.csv, trace.json and report.md."""
    from runtime.scenario import load_scenario
    from runtime.trace import chrome_trace, write_trace

    cells = load_scenario(path)
    for sc in cells:  # every cell's phone and delegate options checked before anything runs
        _check_cell(sc)
    records, traces = [], []
    for k, sc in enumerate(cells):
        record, soc = run_scenario(sc, progress)
        records.append(record)
        traces.append(chrome_trace(soc, sc.label or sc.name, pid=k + 1))
        if progress:
            progress(k + 1, len(cells), f"cell {sc.label}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results = {"schema": 1, "scenario": str(path), "records": records}
    write_text(out / "results.json", json.dumps(results, indent=1, sort_keys=True))
    write_trace(out / "trace.json", traces)
    _write_reports(out, results)
    return results


def _write_reports(out: Path, results: dict) -> None:
    from runtime.report import render

    write_text(out / "report.md", render(results, "md"))
    write_text(out / "results.csv", render(results, "csv"))
