"""Which error band a run's latency carries, how the model compares with the band's fitted rows, and how both read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from runtime.ir.graph import Graph
from sim.band import DelegateBand, model_traits, outside

__all__ = ["RunBand", "run_band", "band_json", "band_phrase", "warning_text"]


@dataclass(frozen=True)
class RunBand:
    """The band of one run: the delegate whose calibration rows it stands on ("cpu" when no delegate
    took an op), that delegate's band or why there is none, and how the model lies outside its rows."""

    phone: str
    delegate: str
    band: DelegateBand | None
    note: str                         # why there is no band ("" when there is one)
    outside: tuple[str, ...]          # phrases of sim/band.py's outside(); empty when inside


def run_band(profile, graph: Graph, delegation, kinds: Sequence[str]) -> RunBand:
    """A calibration row runs the CPU alone or one delegate: a run is judged by the rows of the one
    delegate that took ops (the CPU's when none did); no rows combine two delegates."""
    took = [k for k, r in zip(kinds, delegation.per_delegate) if r.nodes_delegated > 0 and not r.error]
    delegate = "+".join(took) or "cpu"
    if profile.error_band is None:
        return RunBand(profile.name, delegate, None, "not fitted", ())
    if len(took) > 1:
        return RunBand(profile.name, delegate, None, f"no fitted rows run {' and '.join(took)} together", ())
    band = profile.error_band.of(delegate)
    if band is None:
        return RunBand(profile.name, delegate, None, f"no {delegate} rows in the fit", ())
    return RunBand(profile.name, delegate, band, "", outside(model_traits(graph), band.coverage))


def band_phrase(rb: RunBand) -> str:
    """What follows a latency: "fitted band: median 11.7%, p90 15.6% on 2 gpu rows" or "no band: not fitted"."""
    if rb.band is None:
        return f"no band: {rb.note}"
    return f"fitted band: median {rb.band.median_pct:.1f}%, p90 {rb.band.p90_pct:.1f}% on {rb.band.rows} " \
           f"{rb.delegate} rows"


def warning_text(phone: str, delegate: str, phrases: Sequence[str]) -> str | None:
    """The one-line warning when the model lies outside the band's fitted rows (None when inside);
    a RunBand's fields or a results.json record's (device, error_band.delegate, outside_fit)."""
    if not phrases:
        return None
    return f"the model lies outside what {phone}'s {delegate} figures were fitted to: {'; '.join(phrases)}"


def band_json(rb: RunBand) -> dict[str, Any]:
    """results.json's `error_band` field: the delegate, rows and percentages (None without a band) and the note."""
    b = rb.band
    return {"delegate": rb.delegate, "rows": b.rows if b else 0, "median_pct": b.median_pct if b else None,
            "p90_pct": b.p90_pct if b else None, "note": band_phrase(rb)}
