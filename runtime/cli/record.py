"""One `dtb benchmark` run as a results.json record, the same fields a scenario cell gets."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from runtime.measure.figures import output_diff
from runtime.measure.record import record_fields, unit_footprint

__all__ = ["benchmark_record"]


def _diffs(pairs) -> list[dict]:
    """inference_diff's figures per output. Every benchmark run reads the same input, so the
    spread of the per-run mean errors is 0."""
    rows = []
    for name, ref, test in pairs or ():
        with np.errstate(invalid="ignore", over="ignore"):  # NaN or infinity from a delegate: null figures
            diff = output_diff(ref, test)
            avg, peak = diff.mean, diff.max
        rows.append({"output": name, "avg_error": avg, "std_dev": 0.0, "max": peak})
    return rows


def benchmark_record(args, model, profile, simulation, kinds: Sequence[str], m, warmup: int, runs: int,
                     pairs, estimated: Sequence[int] = ()) -> dict[str, Any]:
    """`pairs`: (output name, reference array, test array) per output, or None when timing only;
    `estimated`: ops costed from their shapes for want of a kernel (timing only)."""
    fields = record_fields(m, simulation.delegation, kinds, model.graph, simulation.nonfinite, estimated, profile)
    label = "+".join(kinds) or "cpu"
    return {
        "scenario": "dtb benchmark", "label": label, "cell": {"delegates": label},
        "device": profile.name,
        "threads": args.num_threads, "streams": 1, "warmup": warmup, "runs": runs,
        "timing_only": bool(args.timing_only),
        **fields,
        "model": {**fields["model"], "name": model.name, "quantization": model.quantization},
        "footprint_bytes": unit_footprint(simulation),
        "output_diff": _diffs(pairs),
    }
