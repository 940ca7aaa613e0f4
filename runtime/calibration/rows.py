"""Latency measurements to calibrate against: CSV rows and TFLite benchmark_model logs, read into Rows."""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field
from typing import Mapping

from delegates.kinds import DelegateKind
from runtime.ir.errors import TestbedError

__all__ = ["Row", "MeasurementError", "MeasurementWarning", "read_csv", "read_log", "DELEGATES", "model_key"]

# The delegate column's values and the benchmark_model flags each stands for.
DELEGATES: Mapping[str, tuple[str, ...]] = {
    "cpu": (), **{kind.value: (f"--{kind.flag}=true",) for kind in DelegateKind},
}
_COLUMNS = ("model", "args", "quantization", "device", "delegate", "threads", "latency_ms")
_QUANTIZATIONS = ("none", "float16", "dynamic_range", "int8", "uint8")
_MAX_THREADS = 64


class MeasurementError(TestbedError, ValueError):
    """A measurement file the calibration cannot use; the message names the file and line."""


class MeasurementWarning(UserWarning):
    """A published measurement that gave no row (its model file is missing, its job failed)."""


@dataclass(frozen=True)
class Row:
    """One measured latency: which model, on which phone, through which delegate, how many threads.

    `model` is a zoo name (with `args` and `quantization`) or a .tflite path. `per_type` holds the
    op profiler's milliseconds per node type when the measurement came with one."""

    model: str
    args: tuple[tuple[str, float | int], ...]
    quantization: str
    device: str
    delegate: str
    threads: int
    latency_ms: float
    source: str                                    # file:line, for messages and comments
    flags: tuple[str, ...] = ()                    # extra benchmark_model delegate flags
    per_type: tuple[tuple[str, float], ...] = field(default=())

    @property
    def label(self) -> str:
        args = ",".join(f"{k}={v}" for k, v in self.args)
        quant = "" if self.quantization == "none" else f" {self.quantization}"
        return f"{self.model}{'(' + args + ')' if args else ''}{quant}"


def model_key(row: Row) -> tuple:
    """What identifies a model across rows (leave-one-model-out holds out every row of one key)."""
    return row.model, row.args, row.quantization


# -- CSV -------------------------------------------------------------------------------------------


def read_csv(text: str, source: str) -> list[Row]:
    """Rows with the columns model, args, quantization, device, delegate, threads, latency_ms
    (args as `alpha=0.25;resolution=128`; other columns, such as source, are kept as comments)."""
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in _COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise MeasurementError(f"{source}:1: missing column(s) {', '.join(missing)}; "
                               f"expected {', '.join(_COLUMNS)}")
    rows = [_csv_row(raw, f"{source}:{n}") for n, raw in enumerate(reader, 2)]
    if not rows:
        raise MeasurementError(f"{source}: no measurement rows")
    return rows


def _csv_row(raw: Mapping[str, str], where: str) -> Row:
    model = (raw["model"] or "").strip()
    if not model:
        raise MeasurementError(f"{where}: model: empty")
    quant = (raw["quantization"] or "none").strip()
    if quant not in _QUANTIZATIONS:
        raise MeasurementError(f"{where}: quantization: {quant!r} is not one of {', '.join(_QUANTIZATIONS)}")
    delegate = (raw["delegate"] or "").strip()
    if delegate not in DELEGATES:
        raise MeasurementError(f"{where}: delegate: {delegate!r} is not one of {', '.join(DELEGATES)}")
    return Row(model, _args((raw["args"] or "").strip(), where), quant, (raw["device"] or "").strip(), delegate,
               _threads(raw["threads"], where), _latency(raw["latency_ms"], where), where)


def _args(text: str, where: str) -> tuple[tuple[str, float | int], ...]:
    out = []
    for part in filter(None, (p.strip() for p in re.split(r"[;,]", text))):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise MeasurementError(f"{where}: args: {part!r} is not key=value")
        out.append((key.strip(), _number(value.strip(), f"{where}: args: {key.strip()}")))
    return tuple(out)


def _number(text: str, where: str) -> float | int:
    try:
        value = float(text)
    except ValueError:
        raise MeasurementError(f"{where}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise MeasurementError(f"{where}: {text!r} is not a finite number")
    return int(value) if value.is_integer() and "." not in text else value


def _threads(text: str, where: str) -> int:
    value = _number((text or "").strip(), f"{where}: threads")
    if not isinstance(value, int) or not 1 <= value <= _MAX_THREADS:
        raise MeasurementError(f"{where}: threads: must be an integer in 1..{_MAX_THREADS}, got {text!r}")
    return value


def _latency(text: str, where: str) -> float:
    value = float(_number((text or "").strip(), f"{where}: latency_ms"))
    if not 0 < value < 1e7:
        raise MeasurementError(f"{where}: latency_ms: must be a positive number of milliseconds, got {text!r}")
    return value


# -- benchmark_model logs ----------------------------------------------------------------------------

_PARAM = re.compile(r"^\s*([A-Za-z#][A-Za-z0-9 #/()-]*?): \[(.*)\]\s*$")
_TIMINGS = re.compile(r"Inference timings in us: .*?Inference \(avg\): ([0-9.eE+-]+)")
_SWITCH = {"Use gpu": "gpu", "Use NNAPI": "nnapi", "Use nnapi": "nnapi", "Use Hexagon": "hexagon",
           "Use CoreML": "coreml", "Use xnnpack": None}
_SUMMARY = "Summary by node type"


def read_log(text: str, source: str, device: str | None = None, model: str | None = None) -> list[Row]:
    """One row per benchmark run in a benchmark_model log: the "Inference timings in us" line's
    Inference (avg), the run's parameter lines (Graph, Num threads, Use gpu/NNAPI/Hexagon/CoreML)
    and, with --enable_op_profiling, the "Summary by node type" table's milliseconds per type."""
    rows, params = [], {}
    # Newer benchmark_model builds prefix every line with its log level ("INFO: ").
    lines = [ln[6:] if ln.startswith("INFO: ") else ln for ln in text.splitlines()]
    for n, line in enumerate(lines, 1):
        m = _PARAM.match(line)
        if m and "timings" not in line:
            params[m.group(1)] = m.group(2)
            continue
        t = _TIMINGS.search(line)
        if t:
            rows.append(_log_row(params, float(t.group(1)) / 1e3, f"{source}:{n}", device, model,
                                 _per_type(lines, n)))
            params = {}                      # the next run prints its own header
    if not rows:
        raise MeasurementError(f"{source}: no 'Inference timings in us' line: not a benchmark_model log")
    return rows


def _log_row(params: Mapping[str, str], ms: float, where: str, device: str | None, model: str | None,
             per_type: tuple[tuple[str, float], ...]) -> Row:
    graph = model or params.get("Graph")
    if not graph:
        raise MeasurementError(f"{where}: the log names no model (no 'Graph: [...]' line); give --model")
    delegate = next((d for k, d in _SWITCH.items() if d and params.get(k, "0") in ("1", "true")), "cpu")
    threads = params.get("Num threads") or params.get("#threads used for CPU inference") or "1"
    zoo, args, quant = _graph_spec(graph)
    return Row(zoo, args, quant, device or params.get("Device", ""), delegate,
               _threads(threads, where), _latency(str(ms), where), where, per_type=per_type)


def _graph_spec(graph: str) -> tuple[str, tuple, str]:
    """`zoo:NAME?alpha=0.25,resolution=128&quantization=uint8` (what dtb benchmark prints for a zoo
    model) or a file path."""
    if not graph.startswith("zoo:"):
        return graph, (), "none"
    name, _, query = graph[4:].partition("?")
    args_text, _, quant = query.partition("&quantization=")
    return name, _args(args_text, graph), quant or "none"


def _per_type(lines: list[str], start: int) -> tuple[tuple[str, float], ...]:
    """The op-profiling summary printed after the timings line at `start` (1-based), if this run
    has one before the next run begins."""
    for k in range(start, len(lines)):
        if "Inference timings in us" in lines[k] or lines[k].lstrip().startswith("Graph: ["):
            return ()
        if _SUMMARY in lines[k]:
            out = []
            for line in lines[k + 2:]:
                cells = line.split()
                if len(cells) < 3 or not cells[0][0].isalpha():
                    break
                out.append((cells[0], float(cells[2])))
            return tuple(out)
    return ()
