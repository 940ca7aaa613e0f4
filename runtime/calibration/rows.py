"""Latency measurements to calibrate against: CSV rows and TFLite benchmark_model logs, read into Rows."""

from __future__ import annotations

import csv
import math
import re
import sys
from dataclasses import dataclass, field
from typing import Mapping

from delegates.kinds import DelegateKind
from runtime.ir.errors import TestbedError

__all__ = ["Row", "OpSplit", "MeasurementError", "MeasurementWarning", "read_csv", "read_log", "DELEGATES",
           "model_key", "family_key", "MAX_ROWS", "MAX_FIELD", "parse_number", "LATENCY_MS",
           "LATENCY_TEXT"]

# The delegate column's values and the benchmark_model flags each stands for.
DELEGATES: Mapping[str, tuple[str, ...]] = {
    "cpu": (), **{kind.value: (f"--{kind.flag}=true",) for kind in DelegateKind},
}
_COLUMNS = ("model", "args", "quantization", "device", "delegate", "threads", "latency_ms")
# Columns a file may add: extra delegate flags, the model family cross-validation holds out together,
# and the op split per unit the measurement reported (Qualcomm AI Hub's layer counts).
_SPLIT_COLUMNS = ("npu_ops", "gpu_ops", "cpu_ops")
_MAX_FLAGS = 16
_QUANTIZATIONS = ("none", "float16", "dynamic_range", "int8", "uint8")
_MAX_THREADS = 64
# Limits that keep a measurement file's reading and the fit bounded: a published set has tens to
# hundreds of rows, and every row is one simulation per step of the fit.
MAX_ROWS = 1000
MAX_FIELD = 1000            # characters in one CSV field or one number
MAX_LINE = 10 * MAX_FIELD   # characters in one CSV line
# The latencies a measurement may state, in milliseconds: [1 ns, about 3 hours). The fit divides by
# the measured latency and takes its log, so zero (or a subnormal) would leave it no finite start.
LATENCY_MS = (1e-6, 1e7)
LATENCY_TEXT = "[1e-6, 1e7)"
# A number as a measurement file writes it: ASCII digits, one point, an optional exponent (no
# "1_000", no "inf"/"nan", no non-ASCII digits, all of which float() would take).
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


class MeasurementError(TestbedError, ValueError):
    """A measurement file the calibration cannot use; the message names the file and line."""


class MeasurementWarning(UserWarning):
    """A published measurement that gave no row (its model file is missing, its job failed)."""


@dataclass(frozen=True)
class OpSplit:
    """How many of a model's ops ran on each unit in a measurement: the NPU (the QNN delegate's), the
    GPU (the GPU delegate's) and the CPU, as Qualcomm AI Hub's profiles count them."""

    npu: int
    gpu: int
    cpu: int

    @property
    def total(self) -> int:
        return self.npu + self.gpu + self.cpu


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
    family: str = ""                               # the model family held out together ("": the model alone)
    split: OpSplit | None = None                   # the op split per unit the measurement reported

    @property
    def label(self) -> str:
        args = ",".join(f"{k}={v}" for k, v in self.args)
        quant = "" if self.quantization == "none" else f" {self.quantization}"
        return f"{self.model}{'(' + args + ')' if args else ''}{quant}"


def model_key(row: Row) -> tuple:
    """What identifies a model across rows."""
    return row.model, row.args, row.quantization


def family_key(row: Row) -> tuple:
    """What cross-validation holds out together: the row's model family where the file names one
    (ResNet-18, -50 and -101, float and int8), else its model alone."""
    return ("family", row.family) if row.family else model_key(row)


# -- CSV -------------------------------------------------------------------------------------------


def read_csv(text: str, source: str) -> list[Row]:
    """Rows with the columns model, args, quantization, device, delegate, threads, latency_ms
    (args as `alpha=0.25;resolution=128`; other columns, such as source, are kept as comments)."""
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):   # before csv, whose own limit's error names no line
        if len(line) > MAX_LINE:
            raise MeasurementError(f"{source}:{n}: a line of {len(line)} characters (the limit is {MAX_LINE})")
    reader = csv.DictReader(lines)
    try:
        names = [(n or "").strip() for n in reader.fieldnames or ()]
        twice = sorted({n for n in names if n and names.count(n) > 1})
        if twice:   # csv keeps the last column of a name, so the other one's values would go unread
            raise MeasurementError(f"{source}:1: column(s) named more than once: {', '.join(twice)}")
        missing = [c for c in _COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise MeasurementError(f"{source}:1: missing column(s) {', '.join(missing)}; "
                                   f"expected {', '.join(_COLUMNS)}")
        rows = []
        for raw in reader:
            rows.append(_csv_row(raw, f"{source}:{reader.line_num}"))
            if len(rows) > MAX_ROWS:
                raise MeasurementError(f"{source}:{reader.line_num}: more than {MAX_ROWS} measurement rows "
                                       f"(the limit; calibrate from a subset)")
    except csv.Error as exc:   # a field over csv's size limit, a NUL byte, a broken quote
        raise MeasurementError(f"{source}:{reader.line_num}: not CSV: {exc}") from None
    if not rows:
        raise MeasurementError(f"{source}: no measurement rows")
    return rows


def _csv_row(raw: Mapping[str, str], where: str) -> Row:
    short = [c for c in _COLUMNS if raw.get(c) is None]
    if short:   # fields past the header's are kept as comments, as in the shipped files
        raise MeasurementError(f"{where}: fewer fields than the header names (no {', '.join(short)})")
    for key, value in raw.items():
        if isinstance(value, str) and len(value) > MAX_FIELD:
            raise MeasurementError(f"{where}: {key}: a field of {len(value)} characters (the limit is {MAX_FIELD})")
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
               _threads(raw["threads"], where), _latency(raw["latency_ms"], where), where,
               flags=_flags(raw.get("flags") or "", where), family=(raw.get("family") or "").strip(),
               split=_split(raw, where))


def _flags(text: str, where: str) -> tuple[str, ...]:
    """Extra benchmark_model delegate flags, separated by spaces (`--use_gpu=true`)."""
    flags = tuple(text.split())
    if len(flags) > _MAX_FLAGS:
        raise MeasurementError(f"{where}: flags: {len(flags)} flags (the limit is {_MAX_FLAGS})")
    for flag in flags:
        if not flag.startswith("--") or len(flag) < 3:
            raise MeasurementError(f"{where}: flags: {flag!r} is not a --flag")
        refused = _refused_flag(flag)
        if refused:
            raise MeasurementError(f"{where}: flags: {flag[:80]!r} {refused}; a measurement row may not")
    return flags


# Flags whose values the delegates write their compilation cache to (a folder anywhere).
_CACHE_FLAGS = ("delegate_serialize_dir", "qnn_cache_dir")


def _refused_flag(flag: str) -> str | None:
    """Why a row's flag would run code or write files (the fit only times inferences), or None. An
    external delegate is imported and called; only Qualcomm's QNN library, which the built-in QNN
    delegate stands for, runs nothing."""
    from delegates.qnn import is_qnn_library

    name, _, value = flag[2:].partition("=")
    if name in _CACHE_FLAGS:
        return "names a folder to write a compilation cache to"
    if name == "external_delegate_path" and not is_qnn_library(value):
        return "names an external delegate, whose code would run"
    if name == "external_delegate_options":   # key:value;key:value, as the QNN library reads them
        keys = {item.partition(":")[0].strip() for item in value.split(";")}
        return "names a folder to write a compilation cache to" if "cache_dir" in keys else None
    return None


def _split(raw: Mapping[str, str], where: str) -> OpSplit | None:
    """The npu_ops / gpu_ops / cpu_ops columns: all three counts, or none."""
    cells = {c: (raw.get(c) or "").strip() for c in _SPLIT_COLUMNS}
    if not any(cells.values()):
        return None
    counts = []
    for column, text in cells.items():
        if not text:
            raise MeasurementError(f"{where}: {column}: empty; give {', '.join(_SPLIT_COLUMNS)} together or none")
        value = parse_number(text, f"{where}: {column}")
        if not isinstance(value, int) or value < 0:
            raise MeasurementError(f"{where}: {column}: must be a whole number of ops, got {text!r}")
        counts.append(value)
    return OpSplit(*counts)


def _args(text: str, where: str) -> tuple[tuple[str, float | int], ...]:
    out = []
    for part in filter(None, (p.strip() for p in re.split(r"[;,]", text))):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise MeasurementError(f"{where}: args: {part!r} is not key=value")
        if key.strip() in (k for k, _ in out):   # the model would be built with one of them, silently
            raise MeasurementError(f"{where}: args: {key.strip()!r} given more than once")
        out.append((key.strip(), parse_number(value.strip(), f"{where}: args: {key.strip()}")))
    return tuple(out)


def parse_number(text: str, where: str) -> float | int:
    """A decimal number, strictly (see _NUMBER), finite, not subnormal; an int when written as one."""
    if len(text) > MAX_FIELD or not _NUMBER.fullmatch(text):
        shown = repr(text) if len(text) <= 40 else f"{text[:40]!r}... ({len(text)} characters)"
        raise MeasurementError(f"{where}: {shown} is not a number")
    value = float(text)
    if not math.isfinite(value):
        raise MeasurementError(f"{where}: {text!r} is out of range (not a finite number)")
    if value != 0 and abs(value) < sys.float_info.min:   # subnormal: no measurement is that small
        raise MeasurementError(f"{where}: {text!r} is too small to be a measurement (a subnormal number)")
    if value.is_integer() and not re.search(r"[.eE]", text):
        return int(text)
    return value





def _threads(text: str, where: str) -> int:
    value = parse_number((text or "").strip(), f"{where}: threads")
    if not isinstance(value, int) or not 1 <= value <= _MAX_THREADS:
        raise MeasurementError(f"{where}: threads: must be an integer in 1..{_MAX_THREADS}, got {text!r}")
    return value


def _latency(text: str, where: str) -> float:
    value = float(parse_number((text or "").strip(), f"{where}: latency_ms"))
    if not LATENCY_MS[0] <= value < LATENCY_MS[1]:
        raise MeasurementError(f"{where}: latency_ms: must be a number of milliseconds in {LATENCY_TEXT}, got {text!r}")
    return value


# -- benchmark_model logs ----------------------------------------------------------------------------

_PARAM = re.compile(r"^\s*([A-Za-z#][A-Za-z0-9 #/()-]*?): \[(.*)\]\s*$")
_TIMINGS, _AVG = "Inference timings in us: ", "Inference (avg): "
_AVG_VALUE = re.compile(r"[^\s,]*")
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
        avg = _avg_us(line)
        if avg is not None:
            where = f"{source}:{n}"
            us = float(parse_number(avg, f"{where}: Inference (avg)"))
            rows.append(_log_row(params, us / 1e3, where, device, model, _per_type(lines, n, source)))
            if len(rows) > MAX_ROWS:
                raise MeasurementError(f"{where}: more than {MAX_ROWS} benchmark runs (the limit; calibrate "
                                       f"from a subset)")
            params = {}                      # the next run prints its own header
    if not rows:
        raise MeasurementError(f"{source}: no 'Inference timings in us' line: not a benchmark_model log")
    return rows


def _avg_us(line: str) -> str | None:
    """The Inference (avg) figure of a timings line, as written; None for another line. Two finds, not a
    regex search: `TIMINGS.*?AVG` searched a line repeating TIMINGS without AVG in quadratic time (a
    megabyte line took minutes)."""
    start = line.find(_TIMINGS)
    at = -1 if start < 0 else line.find(_AVG, start + len(_TIMINGS))
    return None if at < 0 else _AVG_VALUE.match(line, at + len(_AVG)).group(0)


def _log_row(params: Mapping[str, str], ms: float, where: str, device: str | None, model: str | None,
             per_type: tuple[tuple[str, float], ...]) -> Row:
    graph = model or params.get("Graph")
    if not graph:
        raise MeasurementError(f"{where}: the log names no model (no 'Graph: [...]' line); give --model")
    delegate = next((d for k, d in _SWITCH.items() if d and params.get(k, "0") in ("1", "true")), "cpu")
    threads = (params.get("Num threads") or params.get("#threads used for CPU inference") or "1").strip()
    zoo, args, quant = _graph_spec(graph, where)
    return Row(zoo, args, quant, device or params.get("Device", ""), delegate,
               _threads(threads, where), _latency(repr(ms), where), where, per_type=per_type)


def _graph_spec(graph: str, where: str) -> tuple[str, tuple, str]:
    """`zoo:NAME?alpha=0.25,resolution=128&quantization=uint8` (what dtb benchmark prints for a zoo
    model) or a file path; errors name `where` (the file and line) and the Graph."""
    if not graph.startswith("zoo:"):
        return graph, (), "none"
    name, _, query = graph[4:].partition("?")
    args_text, _, quant = query.partition("&quantization=")
    shown = graph if len(graph) <= 80 else f"{graph[:80]}..."
    quant = quant or "none"
    if quant not in _QUANTIZATIONS:
        raise MeasurementError(f"{where}: Graph {shown}: quantization {quant[:40]!r} is not one of "
                               f"{', '.join(_QUANTIZATIONS)}")
    return name, _args(args_text, f"{where}: Graph {shown}"), quant


def _per_type(lines: list[str], start: int, source: str) -> tuple[tuple[str, float], ...]:
    """The op-profiling summary printed after the timings line at `start` (1-based), if this run
    has one before the next run begins."""
    for k in range(start, len(lines)):
        if "Inference timings in us" in lines[k] or lines[k].lstrip().startswith("Graph: ["):
            return ()
        if _SUMMARY in lines[k]:
            out = []
            for n in range(k + 3, len(lines) + 1):   # indices, not a copy of the rest of the log per run
                cells = lines[n - 1].split()
                if len(cells) < 3 or not cells[0][0].isalpha():
                    break
                out.append((cells[0], float(parse_number(cells[2], f"{source}:{n}: {cells[0]}: avg_ms"))))
            return tuple(out)
    return ()
