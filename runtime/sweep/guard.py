"""The guard before a big sweep: a scenario of too many cells, or of an hour's estimated host time, needs --yes."""

from __future__ import annotations

import contextlib
import copy
import math
import os
from typing import Sequence

from runtime.ir.errors import ScenarioError, TestbedError
from runtime.ir.files import read_text
from runtime.limits import counts as limits
from runtime.scenario.apps import AppsScenario
from runtime.sweep.cell import build_model

__all__ = ["GUARD_CELLS", "GUARD_SECONDS", "GuardError", "HOW", "count_cells", "estimate", "estimate_seconds",
           "guard_count", "guard_time", "duration", "sized_seconds"]

GUARD_CELLS = 100_000          # more cells than this need --yes
GUARD_SECONDS = 3600.0         # so does an estimated hour of host time or more


class GuardError(TestbedError):
    """A sweep too big to start without --yes (yes=True)."""


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
    from runtime.ir.yamlcheck import MAX_BYTES, parse

    try:
        return parse(read_text(path, limit=MAX_BYTES), str(path), ScenarioError)[0]
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


def sized_seconds(sc) -> float | None:
    """estimate_seconds of one cell where its models were sized already (nothing is built), else None."""
    if not all(_size_key(m) in _SIZES for m in _models(sc)):
        return None
    return _cell_seconds(sc)


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
