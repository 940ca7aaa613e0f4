"""PNG plots of a results object and its Chrome trace, for the HTML report."""

from __future__ import annotations

import io
from typing import Any

__all__ = ["plot_images"]

_CAT_COLORS = {"op": "C0", "copy": "C3", "invoke": "C2", "init": "C7"}
_OTHER_COLOR = "C4"

Bars = list[tuple[float, float, str]]  # (start ms from the inference's start, duration ms, cat)


def _figure(width: float, height: float):
    # A bare Figure renders through Agg without pyplot, so no display is needed and the caller's
    # pyplot backend and open figures are left alone.
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _png(fig) -> bytes:
    buf = io.BytesIO()
    # No Software/date chunks: the same results must give the same bytes.
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


# One row per cell, bars drawn sideways: a label is read horizontally, in full, whatever its length,
# and the figure grows a row at a time, so 50 cells stay as readable as 3.
_ROW_INCHES = 0.22
_LABEL_FONT = 8
_CHAR_INCHES = 0.06     # an average character at the label font, so long labels widen the figure


def _cells_figure(labels: list[str], width: float, height: float):
    """A figure with room for a row per cell and for its longest label beside the plot area."""
    longest = max((len(label) for label in labels), default=0)
    return _figure(max(width, width - 2.5 + _CHAR_INCHES * longest), max(height, 1.4 + _ROW_INCHES * len(labels)))


def _cell_rows(ax, labels: list[str]) -> None:
    """The cells down the y axis, first at the top."""
    ax.set_yticks(range(len(labels)), labels, fontsize=_LABEL_FONT)
    ax.set_ylim(len(labels) - 0.5, -0.5)


def _plot_latency_energy(records: list[dict], labels: list[str]) -> bytes:
    fig = _cells_figure(labels, 9, 3.6)
    lat_ax, energy_ax = fig.subplots(1, 2, sharey=True)
    y = range(len(records))
    lat_ax.barh(y, [r["latency_ms"]["avg"] for r in records], color="C0", label="avg")
    lat_ax.scatter([r["latency_ms"]["p90"] for r in records], y, color="k", marker="|", s=120, label="p90",
                   zorder=3)
    lat_ax.set(title="Latency per inference", xlabel="ms")
    lat_ax.legend(fontsize=8)
    energy_ax.barh(y, [r["energy"]["total_mj"] for r in records], color="C1")
    energy_ax.set(title="Energy per inference", xlabel="mJ")
    _cell_rows(lat_ax, labels)
    energy_ax.tick_params(axis="y", labelleft=False)
    return _png(fig)


def _plot_rails(records: list[dict], labels: list[str]) -> bytes:
    rails = list(dict.fromkeys(r for rec in records for r in rec["energy"]["rails"]))
    fig = _cells_figure(labels, 9, 3.8)
    ax = fig.subplots()
    left = [0.0] * len(records)
    for i, rail in enumerate(rails):
        widths = [rec["energy"]["rails"].get(rail, {}).get("total_mj", 0.0) for rec in records]
        ax.barh(range(len(records)), widths, left=left, label=rail, color=f"C{i % 10}")
        left = [a + w for a, w in zip(left, widths)]
    ax.set(title="Energy per rail, per inference", xlabel="mJ")
    _cell_rows(ax, labels)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _png(fig)


def _inference_spans(events: list[dict]) -> dict[int, list[tuple[float, int, int]]]:
    """(start µs, stream, inference number) of every inference slice, per process."""
    spans: dict[int, list[tuple[float, int, int]]] = {}
    for e in events:
        number = str(e.get("name", "")).rsplit(" ", 1)[-1]
        if e.get("ph") == "X" and e.get("cat") == "inference" and isinstance(e.get("pid"), int) \
                and number.isdigit():
            spans.setdefault(e["pid"], []).append((e["ts"], e.get("args", {}).get("stream", 0), int(number)))
    return spans


def _lane_bars(events: list[dict], pid: int, first: tuple[float, int, int]) -> dict[Any, Bars]:
    """Per lane (tid), the slices of one inference of one stream."""
    start, stream, k = first
    lanes: dict[Any, Bars] = {}
    for e in events:
        args = e.get("args", {})
        if e.get("ph") == "X" and e.get("pid") == pid and e.get("cat") != "inference" \
                and args.get("inference") == k and args.get("stream", 0) == stream:
            lanes.setdefault(e.get("tid"), []).append(((e["ts"] - start) / 1e3, e["dur"] / 1e3, e["cat"]))
    return lanes


def timeline_rows(trace: dict, records: list[dict]) -> list[tuple[str, Bars]]:
    """(row name, bars) per lane that worked in the first steady inference of each process."""
    events = [e for e in trace.get("traceEvents", []) if isinstance(e, dict)]
    names = {(e.get("pid"), e.get("tid")): e.get("args", {}).get("name") for e in events
             if e.get("ph") == "M" and e.get("name") in ("thread_name", "process_name")}
    rows = []
    for pid, spans in sorted(_inference_spans(events).items()):
        # The runner numbers processes from 1 in record order, so the record tells the warm-up count.
        rec = records[pid - 1] if 0 < pid <= len(records) else {}
        steady = [s for s in spans if s[2] >= int(rec.get("warmup", 0))]
        if not steady:
            continue
        process = names.get((pid, None)) or f"pid {pid}"
        lanes = _lane_bars(events, pid, min(steady))
        rows += [(f"{process}: {names.get((pid, tid)) or tid}", bars)
                 for tid, bars in sorted(lanes.items(), key=lambda item: str(item[0]))]
    return rows


def _plot_timeline(rows: list[tuple[str, Bars]]) -> bytes:
    from matplotlib.patches import Patch

    fig = _figure(9, 1.4 + 0.32 * len(rows))
    ax = fig.subplots()
    cats = sorted({cat for _, bars in rows for *_, cat in bars})
    for i, (_, bars) in enumerate(rows):
        for cat in cats:
            ax.broken_barh([(s, d) for s, d, c in bars if c == cat], (i - 0.4, 0.8),
                           facecolors=_CAT_COLORS.get(cat, _OTHER_COLOR), edgecolor="white", linewidth=0.3)
    ax.set_yticks(range(len(rows)), [name for name, _ in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set(title="First steady inference: units and copy engines", xlabel="ms from the inference's start")
    ax.legend(handles=[Patch(color=_CAT_COLORS.get(c, _OTHER_COLOR), label=c) for c in cats], fontsize=8,
              loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _png(fig)


def plot_images(records: list[dict], labels: list[str], trace: dict | None = None) -> list[tuple[str, bytes]]:
    """(caption, PNG bytes): latency and energy, energy per rail, and a timeline when the trace has one."""
    if not records:
        return []
    import matplotlib.style

    # The default style keeps the pictures independent of any matplotlibrc on the machine.
    with matplotlib.style.context("default"):
        images = [("Latency and energy per inference", _plot_latency_energy(records, labels)),
                  ("Energy per rail", _plot_rails(records, labels))]
        rows = timeline_rows(trace, records) if isinstance(trace, dict) else []
        if rows:
            images.append(("Timeline of the first steady inference", _plot_timeline(rows)))
    return images
