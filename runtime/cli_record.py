"""One `dtb benchmark` run as a results.json record, the same fields a scenario cell gets."""

from __future__ import annotations

from typing import Any, Sequence

from runtime.delegation import CpuStep
from runtime.measure import output_diff

__all__ = ["benchmark_record"]


def _delegates(delegation, kinds: Sequence[str]) -> list[dict]:
    return [{"kind": kind, "name": rep.delegate, "nodes_delegated": rep.nodes_delegated,
             "total_nodes": rep.total_nodes, "partitions": rep.partitions,
             "unsupported": [{"op": u.op, "name": u.name, "reason": u.reason} for u in rep.unsupported]}
            for kind, rep in zip(kinds, delegation.per_delegate)]


def _footprint(sim) -> dict[str, int]:
    """Bytes each unit holds: the CPU the tensors of its ops, an accelerator its partitions' tensors
    as it stores them (padded channels, its precision)."""
    from sim.work import footprint, tensor_bytes

    graph, ex = sim.graph, sim.executor
    cpu = {t for step in ex.plan if isinstance(step, CpuStep)
           for t in (*graph.ops[step.op].inputs, *graph.ops[step.op].outputs) if t >= 0}
    sizes = {sim.soc.cpu.name: sum(tensor_bytes(ex.shapes[t], graph.tensors[t].dtype) for t in cpu)}
    for job in ex.jobs:
        if hasattr(job, "unit") and job.ops:
            sizes[job.unit.name] = sizes.get(job.unit.name, 0) + footprint(
                graph, job.step.partition.nodes, ex.shapes, job.ops[0].work.precision, job.unit.channel_align)
    return sizes


def _diffs(pairs) -> list[dict]:
    """inference_diff's figures per output. Every benchmark run reads the same input, so the
    spread of the per-run mean errors is 0."""
    rows = []
    for name, ref, test in pairs or ():
        avg, _, peak = output_diff(ref, test)
        rows.append({"output": name, "avg_error": avg, "std_dev": 0.0, "max": peak})
    return rows


def _measured(m) -> dict[str, Any]:
    b = m.boundary
    return {
        "latency_ms": {k: (v if k == "count" else v * 1e3) for k, v in vars(m.latency).items()},
        "init_ms": m.init_s * 1e3,
        "boundary": {"crossings": b.crossings, "bytes": b.bytes, "ms": b.seconds * 1e3, "mj": b.joules * 1e3,
                     "share": b.share},
        "energy": {"total_mj": m.energy_mj, "avg_power_w": m.avg_power_w, "peak_power_w": m.peak_power_w,
                   "rails": {r.rail: {"active_mj": r.active_mj, "total_mj": r.total_mj} for r in m.energy}},
        "per_op": [{"node": o.node, "unit": o.unit, "first_ms": o.first_s * 1e3, "avg_ms": o.avg_s * 1e3,
                    "count": o.count} for o in m.per_op],
    }


def benchmark_record(args, model, profile, sim, kinds: Sequence[str], m, warmup: int, runs: int,
                     pairs) -> dict[str, Any]:
    """`pairs`: (output name, reference array, test array) per output, or None when timing only."""
    delegation = sim.delegation
    label = "+".join(kinds) or "cpu"
    return {
        "scenario": "dtb benchmark", "label": label, "cell": {"delegates": label},
        "device": profile.name,
        "model": {"name": model.name, "quantization": model.quantization, "nodes": len(model.graph.ops)},
        "threads": args.num_threads, "streams": 1, "warmup": warmup, "runs": runs,
        "timing_only": bool(args.timing_only),
        "delegates": _delegates(delegation, kinds),
        "placement": {str(k): v for k, v in sorted(delegation.placement().items())},
        **_measured(m),
        "footprint_bytes": _footprint(sim),
        "output_diff": _diffs(pairs),
        "log": list(delegation.log),
    }
