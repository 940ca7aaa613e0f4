"""What reports add for app-stream records (runtime/sweep/app_streams.py): frames, the sustained figure, energy, heat."""

from __future__ import annotations

from typing import Any

__all__ = ["is_app", "app_blocks", "csv_columns", "csv_values", "summary_lines"]

_CSV = ("app.name", "app.rate_hz", "app.when_busy", "frames.arrived", "frames.completed", "frames.dropped",
        "frames.deadline_misses", "sustained.p50_first_ms", "sustained.p50_last_ms", "sustained.rise",
        "energy.stream_mj", "run.soc_mj", "thermal.skin_c.max", "thermal.die_c.max")


def is_app(rec: dict) -> bool:
    return isinstance(rec.get("frames"), dict) and isinstance(rec.get("app"), dict)


def _get(rec: dict, dotted: str) -> Any:
    node: Any = rec
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _num(x: Any, fmt: str = ".2f") -> str:
    return format(x, fmt) if _is_num(x) else "-"


def _dict(x: Any) -> dict:
    """A section of the record as a mapping; anything else (a hand-edited results file) reads as none."""
    return x if isinstance(x, dict) else {}


def _rise(x: Any) -> str:
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return "-"
    return f"{round(x * 100, 1) + 0.0:+.1f}%"   # + 0.0: a rise of -1e-12 reads +0.0%, not -0.0%


def app_blocks(rec: dict) -> list[tuple]:
    """Report blocks of one app stream: its frames, how its latency moved, its energy and the phone's heat."""
    if not is_app(rec):
        return []
    app, f, sus = rec["app"], rec["frames"], _dict(rec.get("sustained"))
    lat = rec["latency_ms"]
    units = app.get("units")
    on = ", ".join(map(str, units)) if isinstance(units, list) else "-"
    blocks: list[tuple] = [
        ("p", f"App {app.get('name')}: {_num(app.get('rate_hz'), 'g')} frames/s on {on}, "
              f"a frame arriving while one runs is {'dropped' if app.get('when_busy') == 'drop' else 'queued'}; "
              f"{_num(rec.get('duration_s'), 'g')} s simulated."),
        ("h", 3, "Frames"),
        ("table", ("Arrived", "Completed", "Dropped", "Deadline misses", "p50 ms", "p90 ms", "p99 ms"),
         [(str(f.get("arrived")), str(f.get("completed")), str(f.get("dropped")), str(f.get("deadline_misses")),
           _num(lat.get("p50")), _num(lat.get("p90")), _num(lat.get("p99")))]),
        ("table", (f"p50 ms, first {_num(sus.get('first_s'), 'g')} s", f"p50 ms, last {_num(sus.get('last_s'), 'g')} s",
                   "Rise"), [(_num(sus.get("p50_first_ms")), _num(sus.get("p50_last_ms")), _rise(sus.get("rise")))]),
    ]
    run = _dict(rec.get("run"))
    if run:
        stream, soc = rec["energy"].get("stream_mj", 0), run.get("soc_mj")
        share = stream / soc if _is_num(stream) and _is_num(soc) and soc else 0.0
        blocks.append(("p", f"Energy: {_num(rec['energy'].get('stream_mj'), '.1f')} mJ over the run "
                            f"({share * 100:.1f}% of the SoC's {_num(run.get('soc_mj'), '.1f')} mJ, which includes "
                            f"{_num(run.get('idle_mj'), '.1f')} mJ of idle power no stream is charged)."))
    heat = rec.get("thermal")
    if isinstance(heat, dict):
        per_unit = {unit: _dict(u) for unit, u in _dict(heat.get("units")).items()}
        rows = [(unit, _num(u.get("final_mhz"), "g"), _num(u.get("min_mhz"), "g"), _num(u.get("first_throttle_s"), ".1f"))
                for unit, u in per_unit.items()]
        blocks += [("h", 3, "Heat"),
                   ("p", f"Ambient {_num(heat.get('ambient_c'), 'g')} C, platform {_num(heat.get('platform_w'), 'g')} W; "
                         f"skin max {_num(_get(heat, 'skin_c.max'), '.1f')} C, die max {_num(_get(heat, 'die_c.max'), '.1f')} C."),
                   ("table", ("Unit", "Final MHz", "Lowest MHz", "First throttled at s"), rows)]
    return blocks


def csv_columns(records: list[dict]) -> list[str]:
    return list(_CSV) if any(is_app(r) for r in records) else []


def csv_values(rec: dict) -> dict[str, Any]:
    if not is_app(rec):
        return {}
    return {key: ("" if _get(rec, key) is None else _get(rec, key)) for key in _CSV}


def summary_lines(records: list[dict]) -> list[str]:
    """`dtb run`'s lines for app streams: the sustained figure and the frames' fate, then the heat."""
    apps = [r for r in records if is_app(r)]
    if not apps:
        return []
    rows = [("app stream", "p50 first ms", "p50 last ms", "rise", "p99 ms", "frames", "misses", "drops", "mJ/frame")]
    for r in apps:
        s, f = r.get("sustained") or {}, r["frames"]
        rows.append((str(r.get("label")), f"{_num(s.get('p50_first_ms'), '.3f')} ({_num(s.get('first_s'), 'g')} s)",
                     f"{_num(s.get('p50_last_ms'), '.3f')} ({_num(s.get('last_s'), 'g')} s)", _rise(s.get("rise")),
                     _num(r["latency_ms"].get("p99"), ".3f"), str(f.get("completed")), str(f.get("deadline_misses")),
                     str(f.get("dropped")), _num(r["energy"].get("total_mj"), ".3f")))
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))) for row in rows]
    seen = set()
    for r in apps:
        heat = r.get("thermal")
        key = (r.get("scenario"), str(r.get("cell")))
        if not isinstance(heat, dict) or key in seen:
            continue
        seen.add(key)
        clocks = ", ".join(f"{u} {_num(v.get('final_mhz'), 'g')} MHz (first throttled at {_num(v.get('first_throttle_s'), '.0f')} s)"
                           if v.get("first_throttle_s") is not None else f"{u} {_num(v.get('final_mhz'), 'g')} MHz"
                           for u, v in (heat.get("units") or {}).items())
        lines.append(f"heat: skin max {_num(_get(heat, 'skin_c.max'), '.1f')} C, die max {_num(_get(heat, 'die_c.max'), '.1f')} C; "
                     f"{clocks}; SoC {_num(_get(r, 'run.soc_mj'), '.0f')} mJ over {_num(_get(r, 'run.simulated_s'), '.0f')} s")
    return lines
