"""Reports of a results.json: Markdown, self-contained HTML with plots, or one CSV row per record."""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import os
import reprlib
from pathlib import Path
from typing import Any

from runtime.ir.atomic import write_text
from runtime.ir.errors import TestbedError
from runtime.ir.files import read_text
from runtime.report.apps import app_blocks, csv_columns as apps_csv_columns, csv_values as apps_csv_values
from runtime.report.plots import plot_images
from runtime.report.status import CellStatus, record_status

__all__ = ["FORMATS", "render", "render_file", "write_report"]

FORMATS = ("md", "html", "csv")
_DEFAULT_NAMES = {"md": "report.md", "html": "report.html", "csv": "results.csv"}
# A results or trace file longer than this is refused unread: one record holds a few KB and trace.json
# is bounded by limits.MAX_INFERENCES, and parsing a document takes several times its size in memory.
MAX_JSON_BYTES = 1 << 30

_NUMBERS = ("model.nodes", "latency_ms.avg", "latency_ms.p90", "init_ms", "boundary.crossings", "boundary.ms",
            "boundary.share", "energy.total_mj", "energy.avg_power_w")
_ENTRY_KEYS = {"delegates": ("kind", "name", "nodes_delegated", "partitions"),
               "per_op": ("node", "unit", "avg_ms"),
               "output_diff": ("output", "avg_error", "std_dev", "max")}
# The entries' keys the reports add up, sort or format as numbers (first_ms only when there).
_ENTRY_NUMBERS = {"delegates": ("nodes_delegated", "partitions"), "per_op": ("avg_ms", "first_ms"),
                  "output_diff": ()}
# Optional keys the reports read as lists of phrases or entries, or as a mapping (null or absent: none).
_OPTIONAL_KINDS = (("outside_fit", list, "a list"), ("nonfinite", list, "a list"), ("cell", dict, "an object"))
_LATENCY_KEYS = ("count", "first", "warmup_avg", "avg", "std", "min", "max", "p50", "p90", "p99")
_CSV_HEAD = ("scenario", "label", "device", "model.name", "model.quantization", "model.nodes", "threads",
             "streams", "warmup", "runs", "timing_only")
_CSV_TAIL = tuple(f"latency_ms.{k}" for k in _LATENCY_KEYS) + (
    "error_band.delegate", "error_band.rows", "error_band.median_pct", "error_band.p90_pct", "outside_fit",
    "init_ms", "boundary.crossings", "boundary.bytes", "boundary.ms", "boundary.mj", "boundary.share",
    "energy.total_mj", "energy.avg_power_w", "energy.peak_power_w")
_STYLE = ("body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:.5em 0 1em}"
          "th,td{border:1px solid #bbb;padding:.2em .6em}th{background:#eee}td.num{text-align:right}"
          "img{max-width:100%}")


# ---- checking the input ----------------------------------------------------------------------------

def _lookup(record: dict, dotted: str) -> Any:
    node: Any = record
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(dotted)
        node = node[part]
    return node


def _is_number(value: Any) -> bool:
    """A float, or an integer one converts to (JSON may hold an integer of 400 digits, which neither a
    format nor a plot takes: OverflowError)."""
    return isinstance(value, float) or isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63


def _shown(value: Any) -> str:
    """A bad value in an error message: its start only (it may be a long list, or an integer of 400 digits)."""
    return reprlib.repr(value)


def _check_keys(entry: Any, keys: tuple[str, ...], where: str) -> None:
    missing = [k for k in keys if not isinstance(entry, dict) or k not in entry]
    if missing:
        raise TestbedError(f"{where}: missing key '{missing[0]}'")


def _check_numbers(entry: dict, keys: tuple[str, ...], where: str) -> None:
    """Each of `keys` the entry has is a number."""
    for key in keys:
        if key in entry and not _is_number(entry[key]):
            raise TestbedError(f"{where}: key '{key}' is not a number: {_shown(entry[key])}")


def _check_entries(entries: Any, keys: tuple[str, ...], where: str, numbers: tuple[str, ...] = ()) -> None:
    if not isinstance(entries, list):
        raise TestbedError(f"{where}: expected a list")
    for j, entry in enumerate(entries):
        _check_keys(entry, keys, f"{where}[{j}]")
        _check_numbers(entry, numbers, f"{where}[{j}]")


def _check_optional(rec: dict, where: str) -> None:
    """The optional keys the reports read: lists and mappings as such, a fitted band's figures as numbers."""
    for key, kind, what in _OPTIONAL_KINDS:
        if rec.get(key) is not None and not isinstance(rec[key], kind):
            raise TestbedError(f"{where}: key '{key}' is not {what}: {_shown(rec[key])}")
    band = rec.get("error_band")
    if isinstance(band, dict) and _is_number(band.get("median_pct")) and not _is_number(band.get("p90_pct", 0)):
        raise TestbedError(f"{where}: key 'error_band.p90_pct' is not a number: {_shown(band['p90_pct'])}")


def _check_record(k: int, rec: Any) -> None:
    where = f"record {k}"
    if not isinstance(rec, dict):
        raise TestbedError(f"{where}: expected an object")
    for key in ("device", "energy.rails", *_ENTRY_KEYS, *_NUMBERS):
        try:
            value = _lookup(rec, key)
        except KeyError:
            raise TestbedError(f"{where}: missing key '{key}'") from None
        if key in _NUMBERS and not _is_number(value):
            raise TestbedError(f"{where}: key '{key}' is not a number: {_shown(value)}")
    for field, keys in _ENTRY_KEYS.items():
        _check_entries(rec[field], keys, f"{where}: {field}", _ENTRY_NUMBERS[field])
    _check_optional(rec, where)
    for j, d in enumerate(rec["delegates"]):
        _check_entries(d.get("unsupported", []), ("name", "reason"), f"{where}: delegates[{j}].unsupported")
    try:
        record_status(rec)
    except ValueError as exc:
        raise TestbedError(f"{where}: {exc}") from None
    rails = rec["energy"]["rails"]
    if not isinstance(rails, dict):
        raise TestbedError(f"{where}: key 'energy.rails' is not an object")
    for rail, entry in rails.items():
        _check_keys(entry, ("active_mj", "total_mj"), f"{where}: energy.rails.{rail}")
        _check_numbers(entry, ("active_mj", "total_mj"), f"{where}: energy.rails.{rail}")


def _as_results(data: Any) -> Any:
    """Every results file the testbed writes as one shape: `dtb run`'s results.json as it is, a
    `dtb benchmark --output_json` file (one record, on its own) as results holding that record."""
    if isinstance(data, dict) and "records" in data:
        return data
    if isinstance(data, dict) and "latency_ms" in data:
        return {"scenario": data.get("scenario"), "records": [data]}
    kind = "a Chrome trace" if isinstance(data, dict) and "traceEvents" in data else type(data).__name__
    raise TestbedError(f"not a results file ({kind}): expected `dtb run`'s results.json (a 'records' list) or "
                       f"a `dtb benchmark --output_json` record")


def _check(results: Any) -> list[dict]:
    if not isinstance(results, dict) or not isinstance(results.get("records"), list):
        raise TestbedError("results: missing key 'records' (a list of records)")
    for k, rec in enumerate(results["records"]):
        _check_record(k, rec)
    return results["records"]


# ---- content as blocks: ("h", level, text) | ("p", text) | ("table", head, rows) | ("img", alt, png) ----

def _f2(x: float) -> str:
    return f"{x:.2f}"


def _e3(x: Any) -> str:
    """An output difference; None is what results.json holds for NaN or infinity."""
    return f"{x:.3e}" if _is_number(x) else "NaN/inf" if x is None else str(x)


def _label(k: int, rec: dict) -> str:
    return str(rec.get("label") or rec.get("scenario") or f"record {k}")


def _delegates(rec: dict) -> str:
    return ", ".join(str(d["kind"]) for d in rec["delegates"]) or "CPU only"


def _failed(rec: dict) -> str:
    """The error of a record whose delegate failed (its figures are the CPU's), else ''."""
    status, error = record_status(rec)
    return (error or "a delegate failed") if status is CellStatus.FAILED else ""


def _band(rec: dict) -> str:
    """The latency's fitted error band in a table cell ("-" for a record written before bands)."""
    band = rec.get("error_band")
    if not isinstance(band, dict):
        return "-"
    if not _is_number(band.get("median_pct")):
        return str(band.get("note", "no band"))
    return f"median {band['median_pct']:.1f}%, p90 {band.get('p90_pct', 0):.1f}% ({band.get('rows')} " \
           f"{band.get('delegate')} rows)" + (" OUTSIDE FIT" if rec.get("outside_fit") else "")


def _summary_row(k: int, rec: dict) -> tuple[str, ...]:
    lat, b, e, ds = rec["latency_ms"], rec["boundary"], rec["energy"], rec["delegates"]
    delegated = "FAILED" if _failed(rec) else str(sum(d["nodes_delegated"] for d in ds))
    return (_label(k, rec), str(rec["device"]), _delegates(rec), _f2(lat["avg"]), _f2(lat["p90"]), _band(rec),
            _f2(rec["init_ms"]), f"{b['crossings']:g}", _f2(b["ms"]), f"{b['share'] * 100:.1f}%",
            _f2(e["total_mj"]), _f2(e["avg_power_w"]), delegated,
            str(rec["model"]["nodes"]), str(sum(d["partitions"] for d in ds)))


_SUMMARY_HEAD = ("Label", "Device", "Delegates", "Avg ms", "p90 ms", "Fitted error band", "Init ms", "Crossings",
                 "Boundary ms", "Boundary share", "mJ / inference", "Avg W", "Delegated nodes", "Total nodes",
                 "Partitions")


def _summary_blocks(results: dict, records: list[dict]) -> list[tuple]:
    title = f"Delegate Testbed report: {results['scenario']}" if results.get("scenario") else \
        "Delegate Testbed report"
    rows = [_summary_row(k, rec) for k, rec in enumerate(records)]
    return [("h", 1, title), ("h", 2, "Summary"), ("table", _SUMMARY_HEAD, rows)]


def _setup_line(rec: dict) -> str:
    model = rec["model"]
    parts = [f"Model {model.get('name', '?')} ({model.get('quantization', '?')}), {model['nodes']} nodes"]
    if "threads" in rec:
        parts.append(f"{rec['threads']} CPU threads")
    if "runs" in rec:
        parts.append(f"{rec.get('warmup', 0)} warm-up + {rec['runs']} runs, {rec.get('streams', 1)} stream(s)")
    return "; ".join(parts) + "."


def _failure_blocks(rec: dict) -> list[tuple]:
    error = _failed(rec)
    if not error:
        return []
    return [("p", f"FAILED: {error}. The delegates were removed and the CPU ran the model instead, as TFLite "
                  f"does: the figures below are the CPU's, not the delegate's.")]


def _claimed_nothing(rec: dict) -> str:
    """Why no op is listed for a cell whose delegates applied cleanly and took no op."""
    names = ", ".join(str(d["name"]) for d in rec["delegates"])
    why = f" ({rec['platform_refusal']})" if rec.get("platform_refusal") else ""
    return f"No op delegated: {names} claimed none of the {rec['model']['nodes']} ops{why}."


def _band_blocks(rec: dict) -> list[tuple]:
    """The latency with its fitted band, and the warning when the model lies outside the band's rows."""
    if not isinstance(rec.get("error_band"), dict):
        return []
    out = [("p", f"Latency {_f2(rec['latency_ms']['avg'])} ms avg; {rec['error_band'].get('note', '')} "
                 f"(leave-one-model-out cross-validation of {rec['device']}).")]
    if rec.get("outside_fit"):
        out.append(("p", "Warning: the model lies outside the fitted rows: " + "; ".join(map(str, rec["outside_fit"]))
                    + "."))
    return out


def _unsupported_blocks(rec: dict) -> list[tuple]:
    head = ("h", 3, "Unsupported ops")
    if not rec["delegates"]:
        return [head, ("p", "CPU only: no delegate was applied.")]
    # One row per (delegate, op type): a model repeats its op types, and the reasons rarely differ.
    groups: dict[tuple[str, str], list[str]] = {}
    for d in rec["delegates"]:
        for u in d.get("unsupported", []):
            groups.setdefault((str(d["name"]), str(u["name"])), []).append(str(u["reason"]))
    if not groups and _failed(rec):
        return [head, ("p", "Not known: the delegate failed (see above).")]
    if not groups and not any(d["nodes_delegated"] for d in rec["delegates"]):
        return [head, ("p", _claimed_nothing(rec))]
    if not groups:
        return [head, ("p", "None: every op is supported by a delegate.")]
    order = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    rows = [(name, op, str(len(reasons)), "; ".join(dict.fromkeys(reasons))) for (name, op), reasons in order]
    return [head, ("table", ("Delegate", "Op", "Count", "Reasons"), rows)]


def _record_blocks(k: int, rec: dict) -> list[tuple]:
    blocks = [("h", 2, f"{k + 1}. {_label(k, rec)} on {rec['device']}"), ("p", _setup_line(rec))]
    blocks += _failure_blocks(rec)   # before any figure: they are the CPU's
    blocks += _band_blocks(rec)
    blocks += app_blocks(rec)   # an app stream of a concurrent-apps run: frames, sustained latency, heat
    blocks += _unsupported_blocks(rec)
    rails = [(str(r), _f2(v["active_mj"]), _f2(v["total_mj"])) for r, v in rec["energy"]["rails"].items()]
    blocks += [("h", 3, "Energy per rail, per inference"), ("table", ("Rail", "Active mJ", "Total mJ"), rails)]
    top = sorted(rec["per_op"], key=lambda o: (-o["avg_ms"], str(o["node"])))[:5]
    rows = [(str(o["node"]), str(o["unit"]), _f2(o["avg_ms"]), _f2(o.get("first_ms", o["avg_ms"])),
             str(o.get("count", ""))) for o in top]
    blocks += [("h", 3, "Top ops by average time"), ("table", ("Node", "Unit", "Avg ms", "First ms", "Runs"), rows)]
    blocks.append(("h", 3, "Output differences vs the CPU reference"))
    flagged = [f"{n.get('delegate')} in '{n.get('tensor')}' ({n.get('invokes')} invokes)"
               for n in rec.get("nonfinite") or () if isinstance(n, dict)]
    if flagged:
        blocks.append(("p", "NaN or infinity in delegate outputs: " + "; ".join(flagged) + "."))
    diffs = [(str(d["output"]), _e3(d["avg_error"]), _e3(d["std_dev"]), _e3(d["max"])) for d in rec["output_diff"]]
    if not diffs:
        return blocks + [("p", "Not compared (timing only).")]
    return blocks + [("table", ("Output", "Avg error", "Std dev", "Max"), diffs)]


# ---- Markdown and HTML ---------------------------------------------------------------------------

def _numeric(cell: str) -> bool:
    try:
        float(cell.rstrip("%"))
    except ValueError:
        return False
    return True


def _right_aligned(rows: list[tuple[str, ...]], column: int) -> bool:
    return bool(rows) and all(_numeric(row[column]) for row in rows)


def _md_table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    align = ["---:" if _right_aligned(rows, i) else "---" for i in range(len(head))]
    lines = ["| " + " | ".join(map(cell, head)) + " |", "|" + "|".join(align) + "|"]
    return lines + ["| " + " | ".join(map(cell, row)) + " |" for row in rows]


def _markdown(blocks: list[tuple]) -> str:
    lines: list[str] = []
    for block in blocks:
        if block[0] == "h":
            lines.append("#" * block[1] + " " + block[2])
        elif block[0] == "p":
            lines.append(block[1])
        else:
            lines += _md_table(block[1], block[2])
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _html_table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    numeric = [_right_aligned(rows, i) for i in range(len(head))]
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f'<td class="num">{html.escape(c)}</td>' if numeric[i] else
                                    f"<td>{html.escape(c)}</td>" for i, c in enumerate(row)) + "</tr>\n"
                   for row in rows)
    return f"<table>\n<thead><tr>{th}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>"


def _html_block(block: tuple) -> str:
    if block[0] == "h":
        return f"<h{block[1]}>{html.escape(block[2])}</h{block[1]}>"
    if block[0] == "p":
        return f"<p>{html.escape(block[1])}</p>"
    if block[0] == "img":
        data = base64.b64encode(block[2]).decode("ascii")
        return f'<figure><img alt="{html.escape(block[1])}" src="data:image/png;base64,{data}"></figure>'
    return _html_table(block[1], block[2])


def _html(blocks: list[tuple]) -> str:
    title = html.escape(blocks[0][2])
    body = "\n".join(_html_block(b) for b in blocks)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{title}</title>\n'
            f"<style>{_STYLE}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")


# ---- CSV --------------------------------------------------------------------------------------------

def _csv_columns(records: list[dict]) -> list[str]:
    cells = sorted({f"cell.{k}" for r in records for k in r.get("cell") or {}})
    rails = sorted({r for rec in records for r in rec["energy"]["rails"]})
    return [*_CSV_HEAD, *cells, "delegates", "nodes_delegated", "partitions", "unsupported", "error", *_CSV_TAIL,
            *(f"energy.rails.{r}.{k}" for r in rails for k in ("active_mj", "total_mj")), "output_diff.max",
            *apps_csv_columns(records)]


def _csv_value(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return "+".join(map(str, value))
    return json.dumps(value, sort_keys=True) if isinstance(value, dict) else value


def _csv_row(rec: dict) -> dict[str, Any]:
    row = {}
    for key in (*_CSV_HEAD, *_CSV_TAIL):
        try:
            row[key] = _csv_value(_lookup(rec, key))
        except KeyError:
            row[key] = ""
    ds = rec["delegates"]
    row.update({f"cell.{k}": _csv_value(v) for k, v in (rec.get("cell") or {}).items()})
    row.update({"delegates": "+".join(str(d["kind"]) for d in ds),
                "nodes_delegated": sum(d["nodes_delegated"] for d in ds),
                "partitions": sum(d["partitions"] for d in ds),
                "unsupported": sum(len(d.get("unsupported", [])) for d in ds),
                "error": _failed(rec),
                "output_diff.max": _diff_max(rec["output_diff"]), **apps_csv_values(rec)})
    if isinstance(rec.get("outside_fit"), list):   # phrases, as the warning joins them
        row["outside_fit"] = "; ".join(map(str, rec["outside_fit"]))
    row.update({f"energy.rails.{r}.{k}": v[k] for r, v in rec["energy"]["rails"].items()
                for k in ("active_mj", "total_mj")})
    return row


def _diff_max(diffs: list[dict]) -> Any:
    values = [d["max"] for d in diffs]
    if any(v is None for v in values):   # NaN or infinity in an output (null in results.json)
        return "nan"
    return max((v for v in values if _is_number(v)), default="")


def _csv(records: list[dict]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=_csv_columns(records), restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(_csv_row(rec) for rec in records)
    return buf.getvalue()


# ---- public API -------------------------------------------------------------------------------------

def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise ValueError(f"unknown report format {fmt!r}; expected one of: {', '.join(FORMATS)}")


def render(results: dict, fmt: str = "md", trace: dict | None = None) -> str:
    """The report of a results object (results.json, or one `dtb benchmark --output_json` record) as
    text; `trace` (a Chrome trace object) adds a timeline to HTML."""
    _check_format(fmt)
    results = _as_results(results)
    records = _check(results)
    if fmt == "csv":
        return _csv(records)
    head = _summary_blocks(results, records)
    body = [b for k, rec in enumerate(records) for b in _record_blocks(k, rec)]
    if fmt == "md":
        return _markdown(head + body)
    labels = [_label(k, rec) + (" (FAILED: the CPU ran)" if _failed(rec) else "") for k, rec in enumerate(records)]
    images = [("img", alt, png) for alt, png in plot_images(records, labels, trace)]
    return _html(head + ([("h", 2, "Plots"), *images] if images else []) + body)


def _read_json(path: Path, what: str) -> Any:
    try:
        text = read_text(path, limit=MAX_JSON_BYTES)   # a FIFO, a device or a sparse 3 GB file is refused
    except FileNotFoundError:
        raise TestbedError(f"{path}: no such {what} file") from None
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise TestbedError(f"{path}: cannot read the {what} file: {reason}") from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:  # RecursionError: nesting deeper than the parser goes
        detail = f"line {e.lineno} column {e.colno}: {e.msg}" if isinstance(e, json.JSONDecodeError) else \
            " ".join(str(e).split()) or type(e).__name__
        raise TestbedError(f"{path}: not JSON: the {what} file is not valid JSON ({detail})") from None


def render_file(results_path: str | os.PathLike, fmt: str = "md", with_trace: bool = False) -> str:
    """The report of a results file (`dtb run`'s results.json or a `dtb benchmark --output_json`
    file); every error is one line naming the file. `with_trace`: HTML draws the trace.json beside it."""
    _check_format(fmt)
    path = Path(results_path)
    results = _read_json(path, "results")
    trace_path = path.with_name("trace.json")
    trace = _read_json(trace_path, "trace") if with_trace and fmt == "html" and trace_path.is_file() else None
    try:
        return render(results, fmt, trace)
    except TestbedError as e:
        raise TestbedError(f"{path}: {e}") from None


def write_report(results_path: str | os.PathLike, fmt: str, out_path: str | os.PathLike | None = None) -> Path:
    """Render results.json (and, for HTML, the trace.json beside it) to a file beside it; returns its path."""
    text = render_file(results_path, fmt, with_trace=True)
    path = Path(results_path)
    out = Path(out_path) if out_path is not None else path.with_name(_DEFAULT_NAMES[fmt])
    write_text(out, text)
    return out
