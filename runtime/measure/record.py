"""The fields of a results.json record that plain cells, app streams and `dtb benchmark` records share.

Non-finite figures become None (JSON null) so every file is strict JSON. Used by runtime/sweep/runner.py,
runtime/sweep/app_streams.py, runtime/sweep/executors.py and the dtb commands; it imports none of them.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from runtime.interpreter.delegation import CpuStep
from runtime.interpreter.executor import PartitionJob
from runtime.ir.graph import Graph
from runtime.measure.band import band_json, run_band
from runtime.measure.figures import output_diff
from runtime.report.status import delegates_status
from runtime.scenario.spec import DelegateSpec
from sim.work import footprint, tensor_bytes

__all__ = ["record_fields", "unit_footprint", "strict_json", "nonfinite_records", "status_fields", "band_fields"]


def unit_footprint(simulation) -> dict[str, int]:
    """Bytes each unit holds: the CPU the tensors of its ops, an accelerator its partitions' tensors
    as it stores them (padded channels, its precision)."""
    graph, ex = simulation.graph, simulation.executor
    cpu = {t for step in ex.plan if isinstance(step, CpuStep)
           for t in (*graph.ops[step.op].inputs, *graph.ops[step.op].outputs) if t >= 0}
    sizes = {simulation.soc.cpu.name: sum(tensor_bytes(ex.shapes[t], graph.tensors[t].dtype) for t in cpu)}
    for job in ex.jobs:
        if isinstance(job, PartitionJob) and job.ops:   # a delegated partition
            sizes[job.unit.name] = sizes.get(job.unit.name, 0) + footprint(
                graph, job.step.partition.nodes, ex.shapes, job.ops[0].work.precision, job.unit.channel_align)
    return sizes


def delegate_records(delegation, kinds: Sequence[str]) -> list[dict]:
    out = []
    for kind, rep in zip(kinds, delegation.per_delegate):
        out.append({"kind": kind, "name": rep.delegate, "nodes_delegated": rep.nodes_delegated,
                    "total_nodes": rep.total_nodes, "partitions": rep.partitions,
                    "unsupported": [{"op": u.op, "name": u.name, "reason": u.reason} for u in rep.unsupported],
                    # the cut's limits, and the supported ops they left on the CPU
                    "max_delegated_partitions": rep.max_delegated_partitions,
                    "min_nodes_per_partition": rep.min_nodes_per_partition, "declined": len(rep.declined),
                    "over_partition_limit": rep.over_limit})
        if rep.error:  # the delegate failed while applied (TFLite restored the plan), or was not applied
            out[-1]["error"] = rep.error
    return out


def status_fields(delegates: Sequence[Mapping]) -> dict[str, Any]:
    """A record's `status` (ok, none_delegated or failed) and `error` (None unless failed), from its
    delegate entries: every report reads them from here rather than guessing from the figures."""
    status, error = delegates_status(delegates)
    return {"status": status.value, "error": error or None}


def diffs(graph: Graph, reference: list[dict], test: list[dict]) -> list[dict]:
    """inference_diff's figures per output over the runs: mean of per-run mean |diff|, their std, max.
    NaN or infinity in an output makes its figures None (null in results.json)."""
    rows = []
    for t in graph.outputs:
        with np.errstate(invalid="ignore", over="ignore"):
            per_run = [output_diff(r[t], s[t]) for r, s in zip(reference, test)]
            avg = [p.mean for p in per_run]
            row = {"output": graph.tensors[t].name, "avg_error": float(np.mean(avg)),
                   "std_dev": float(np.std(avg)), "max": float(max(p.max for p in per_run))}
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


def stats_ms(stats) -> dict[str, float]:
    return {k: (v if k == "count" else v * 1e3) for k, v in stats.__dict__.items()}


def record_fields(m, delegation, kinds: Sequence[str], graph: Graph, nonfinite: Mapping | None = None,
                  estimated: Sequence[int] = (), profile=None) -> dict[str, Any]:
    """The measured part of a results.json record (shared with `dtb benchmark --output_json`).
    `nonfinite`: (delegate name, tensor) -> invokes whose output held NaN or infinity. `estimated`:
    ops a timing-only run costed from their shapes because no kernel runs them. `profile`: the phone,
    whose fitted error band the latency carries (runtime/measure/band.py)."""
    delegates = delegate_records(delegation, kinds)
    return {
        **(band_fields(profile, graph, delegation, kinds) if profile is not None else {}),
        "nonfinite": nonfinite_records(nonfinite or {}, graph),
        "estimated": [graph.describe_op(i) for i in estimated],
        "model": {"name": graph.name, "nodes": len(graph.ops)},
        "delegates": delegates,
        **status_fields(delegates),
        # a delegate on a phone that has none of it takes no op: the record says why (None: no such delegate)
        "platform_refusal": "; ".join(r.platform_refusal for r in delegation.per_delegate if r.platform_refusal)
                            or None,
        # what the delegates said of their options (an option of the QNN backend not in use, a capped limit)
        "delegate_warnings": list(dict.fromkeys(w for r in delegation.per_delegate for w in r.warnings)),
        "placement": {str(k): v for k, v in sorted(delegation.placement().items())},
        "latency_ms": stats_ms(m.latency),
        "init_ms": m.init_s * 1e3,
        "boundary": {"crossings": m.boundary.crossings, "bytes": m.boundary.bytes, "ms": m.boundary.seconds * 1e3,
                     "mj": m.boundary.joules * 1e3, "share": m.boundary.share},
        "energy": {"total_mj": m.energy_mj, "avg_power_w": m.avg_power_w, "peak_power_w": m.peak_power_w,
                   "rails": {r.rail: {"active_mj": r.active_mj, "total_mj": r.total_mj} for r in m.energy}},
        "per_op": [{"node": o.node, "unit": o.unit, "first_ms": o.first_s * 1e3, "avg_ms": o.avg_s * 1e3,
                    "count": o.count, "mem_bytes": o.mem_bytes} for o in m.per_op],
        "footprint_bytes": dict(m.footprint),
        # weights, TFLite's CPU arena, each delegate unit's buffers (runtime/measure/footprint.py)
        **({"memory": m.memory.as_json()} if m.memory is not None else {}),
        "log": list(delegation.log),
    }


def band_fields(profile, graph: Graph, delegation, kinds: Sequence[str]) -> dict[str, Any]:
    """A record's `error_band` (the fitted band its latency carries) and `outside_fit` (how the model
    lies outside the rows that band was measured on; empty when inside)."""
    rb = run_band(profile, graph, delegation, kinds)
    return {"error_band": band_json(rb), "outside_fit": list(rb.outside)}


def plain_value(value: Any) -> Any:
    """Matrix values as JSON has them (delegate specs as their kinds)."""
    if isinstance(value, (list, tuple)):
        return [plain_value(v) for v in value]
    if isinstance(value, DelegateSpec):
        return value.kind
    if isinstance(value, Mapping):
        return {k: plain_value(v) for k, v in value.items()}
    return value if isinstance(value, (int, float, str, bool)) or value is None else str(value)
