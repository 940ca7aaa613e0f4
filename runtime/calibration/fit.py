"""Fit a phone profile's physical parameters to measured latencies (bounded least squares on log latency)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from runtime.calibration.evaluate import CalibrationError, Evaluator, OnStep, Param
from runtime.calibration.rows import Row, family_key
from runtime.ir.yamlcheck import Key
from sim.htp import FIRST_HTP

__all__ = ["Fit", "Prediction", "Fold", "CrossValidation", "candidate_params", "fit", "cross_validate", "PRIOR_WEIGHT",
           "SPREAD"]


# How strongly each parameter is held to its prior: a residual of PRIOR_WEIGHT x log(value/prior)
# beside each row's log(simulated/measured). At 0.1 a parameter moves a factor e away from its prior
# only if that buys about 10% on one row, so few rows cannot push it to an absurd value.
PRIOR_WEIGHT = 0.1
# Residuals beyond about this much (log latency, ~15%) count less and less (scipy's Cauchy loss,
# which redescends): a row no mechanism explains is left as an outlier instead of dragging every
# parameter halfway toward it (a soft-L1 loss would settle between two contradicting rows).
ROBUST_SCALE = 0.15
# A parameter stays within [prior / SPREAD, prior x SPREAD] (and efficiencies at most 1).
SPREAD = 8.0
# A fitted value this close (relatively) to an end of its range is reported as sitting on it.
BOUND_TOLERANCE = 1e-3



# Per unit kind, the physical parameters a calibration may move: (key path under the unit, cap).
_UNIT_PARAMS: Mapping[str, tuple[tuple[Key, float], ...]] = {
    "cpu": ((("efficiency", "conv"), 1.0), (("efficiency", "depthwise"), 1.0),
            (("dispatch_us",), math.inf), (("mechanisms", "join_us"), math.inf),
            (("mechanisms", "gemm_depth_overhead"), math.inf), (("gmacs", "int8"), math.inf),
            (("bandwidth_gbs",), math.inf), (("mechanisms", "cache_gbs"), math.inf),
            (("mechanisms", "im2col_row_ns"), math.inf)),
    "gpu": ((("efficiency", "conv"), 1.0), (("efficiency", "depthwise"), 1.0), (("dispatch_us",), math.inf),
            (("invoke_us",), math.inf), (("mechanisms", "occupancy_items"), math.inf),
            (("efficiency", "pool"), 1.0)),
    "dsp": ((("efficiency", "conv"), 1.0), (("efficiency", "depthwise"), 1.0), (("dispatch_us",), math.inf)),
    "ane": ((("efficiency", "conv"), 1.0), (("efficiency", "depthwise"), 1.0), (("dispatch_us",), math.inf)),
    "npu": ((("efficiency", "conv"), 1.0), (("efficiency", "depthwise"), 1.0), (("dispatch_us",), math.inf)),
}

# A dsp unit that is a Hexagon NPU (extras.htp_arch >= 68) adds the numbers its priors assume: the
# float16 rate (its 2:1 ratio to int8 is assumed), the per-invocation FastRPC / graph-execute cost, the
# cost at a float graph's edges and the VTCM bandwidth (sim/htp.py), and the HVX's efficiency on
# transcendental ops and pools (an HTP computes sigmoid, GELU and the pools of EfficientNet, ConvNeXt
# and Inception on its vector unit, whose kernels Qualcomm does not publish). A Hexagon v6x DSP fits
# exactly as before.
_HTP_PARAMS: tuple[tuple[Key, float], ...] = (
    (("gmacs", "float16"), math.inf), (("gmacs", "int8"), math.inf), (("invoke_us",), math.inf),
    (("mechanisms", "vtcm_gbs"), math.inf), (("mechanisms", "float_edge_gbs"), math.inf),
    (("efficiency", "transcendental"), 1.0), (("efficiency", "pool"), 1.0),
    # the weights stream from DRAM every inference (VTCM holds activations, not a ResNet's weights), so
    # the NPU's share of the bus is what separates a model of many parameters from one of many MACs
    (("bandwidth_gbs",), math.inf))


def _is_htp(unit: Mapping[str, Any]) -> bool:
    extras = unit.get("extras") or {}
    return unit["kind"] == "dsp" and isinstance(extras, Mapping) and extras.get("htp_arch", 0) >= FIRST_HTP


def _unit_params(unit: Mapping[str, Any]) -> tuple[tuple[Key, float], ...]:
    params = _UNIT_PARAMS.get(unit["kind"], ())
    return params + _HTP_PARAMS if _is_htp(unit) else params


def _crossing_params(data: Mapping[str, Any], unit: str) -> list[Param]:
    """A CPU <-> HTP crossing's fixed cost and copy rate (`copy.sync_us`, `copy.bandwidth_gbs`), informed
    by the HTP's rows where no public figure is: AI Hub's smallest models bound the fixed cost from
    above (MediaPipe's gesture classifier runs in 0.07 ms on the S24), and the models with the largest
    inputs and outputs (super-resolution nets' 3 MB float32 outputs, UNet's 10 MB input) the rate."""
    out = []
    for key in ("sync_us", "bandwidth_gbs"):
        try:
            prior = float(data["copy"][key])
        except (KeyError, TypeError):
            continue
        if prior > 0:
            out.append(Param(("copy", key), prior, prior / SPREAD, prior * SPREAD, unit))
    return out


def _get(data: Any, path: Key) -> Any:
    for key in path:
        data = data[key]
    return data



def candidate_params(data: Mapping[str, Any], used: set[str]) -> list[Param]:
    """The parameters of the units the rows used (and the NNAPI devices' per-execution costs),
    each present in the base profile with a positive value."""
    params = []
    for name, unit in data["units"].items():
        if name not in used:
            continue
        for sub, cap in _unit_params(unit):
            path = ("units", name, *sub)
            try:
                prior = float(_get(data, path))
            except (KeyError, TypeError, IndexError):
                continue
            if prior > 0:
                params.append(Param(path, prior, prior / SPREAD, min(cap, prior * SPREAD), name))
        if _is_htp(unit) and not any(p.path[0] == "copy" for p in params):   # one crossing, whichever HTP uses it
            params += _crossing_params(data, name)
    for i, device in enumerate((data.get("nnapi") or {}).get("devices", ())):
        key = f"nnapi:{device['name']}"
        if key in used and float(device.get("execution_us", 0)) > 0:
            prior = float(device["execution_us"])
            params.append(Param(("nnapi", "devices", i, "execution_us"), prior, prior / SPREAD,
                                prior * SPREAD, key))
    return params


# -- the fit ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fit:
    params: tuple[Param, ...]
    values: tuple[float, ...]
    simulated: tuple[float, ...]      # ms per row at the fitted values
    rows: tuple[Row, ...]
    evaluations: int
    # per parameter: whether any row's latency moved with it (a float16 rate on int8-only rows does
    # not): one that none moves stays at its prior, and a written profile says so
    informed: tuple[bool, ...] = ()

    def is_informed(self, k: int) -> bool:
        return self.informed[k] if k < len(self.informed) else True

    def bound_hit(self, k: int) -> str | None:
        """'upper' or 'lower' where parameter k settled on that end of its range (within 0.1%): the
        rows asked for more than the range allows, usually a cost the profile's mechanisms price
        wrong; None inside its range or where no row moves it."""
        p, v = self.params[k], self.values[k]
        if not self.is_informed(k):
            return None
        if math.isfinite(p.hi) and v >= p.hi * (1 - BOUND_TOLERANCE):
            return "upper"
        if v <= p.lo * (1 + BOUND_TOLERANCE):
            return "lower"
        return None

    def errors(self) -> list[float]:
        return [s / r.latency_ms - 1 for s, r in zip(self.simulated, self.rows)]


def _residuals(rows: Sequence[Row], results, x: np.ndarray) -> np.ndarray:
    bad = [f"{row.source} ({row.label}, {row.delegate}: {ms!r} ms)" for row, (ms, _) in zip(rows, results)
           if not (math.isfinite(ms) and ms > 0)]
    if bad:   # log() of it would be a math error or a NaN that least_squares refuses without saying why
        shown = "; ".join(bad[:5]) + (f"; and {len(bad) - 5} more" if len(bad) > 5 else "")
        raise CalibrationError(f"the fit cannot start: the simulated latency of {len(bad)} row(s) is not a positive "
                               f"finite number: {shown}")
    out = []
    for row, (ms, per_type) in zip(rows, results):
        out.append(math.log(ms / row.latency_ms))
        for op_type, measured in row.per_type:
            if measured > 0 and op_type in per_type:
                out.append(0.5 * math.log(max(per_type.get(op_type, 0.0), 1e-6) / measured))
    return np.concatenate([np.array(out), PRIOR_WEIGHT * x])


def fit(evaluator: Evaluator, params: Sequence[Param], rows: Sequence[int] | None = None,
        max_nfev: int = 30, on_run: OnStep | None = None) -> Fit:
    """Bounded least squares (scipy's trust-region reflective) on log latency over the rows
    (indices into the evaluator's rows; all by default), each parameter in log space about its
    prior, pulled toward it. The Jacobian re-times only the rows that use a parameter's unit.
    `on_run(done, most, label)` after each simulation of the row set (or of the rows a Jacobian
    column re-times)."""
    from scipy.optimize import least_squares

    idx = list(range(len(evaluator.rows))) if rows is None else list(rows)
    sub = [evaluator.rows[i] for i in idx]
    params = [p for p in params if any(p.unit in evaluator.sims[i].used for i in idx)]
    priors = np.array([p.prior for p in params])
    lo = np.log([p.lo / p.prior for p in params])
    hi = np.log([p.hi / p.prior for p in params])
    count = [0]
    most = max_nfev * (len(params) + 1) + 1   # residuals, Jacobian columns, the final run

    def values(x):
        return priors * np.exp(x)

    def run(x, only=None):
        count[0] += 1
        chosen = idx if only is None else [idx[k] for k in only]
        out = evaluator.run(params, values(x), chosen)
        if on_run:
            on_run(count[0], max(most, count[0]), f"{len(chosen)} rows")
        return out

    last: dict[str, Any] = {"x": None, "results": None}
    informed = [False] * len(params)

    def residual_and_keep(x):
        last["x"], last["results"] = x.copy(), run(x)
        return _residuals(sub, last["results"], x)

    def jacobian_cached(x):
        if last["x"] is None or not np.array_equal(last["x"], x):
            residual_and_keep(x)
        base = _residuals(sub, last["results"], x)
        jac = np.zeros((base.size, len(params)))
        for j, p in enumerate(params):
            step = 1e-3 if x[j] + 1e-3 <= hi[j] else -1e-3
            xj = x.copy()
            xj[j] += step
            touched = [k for k, i in enumerate(idx) if p.unit in evaluator.sims[i].used]
            full = _merge(touched, run(xj, touched), last["results"])
            jac[:, j] = (_residuals(sub, full, xj) - base) / step
            informed[j] = informed[j] or bool(np.any(jac[:base.size - len(params), j]))
        return jac

    if not params:
        results = run(np.zeros(0))
        return Fit((), (), tuple(ms for ms, _ in results), tuple(sub), count[0])
    result = least_squares(residual_and_keep, np.zeros(len(params)), jac=jacobian_cached, bounds=(lo, hi),
                           method="trf", x_scale=1.0, max_nfev=max_nfev, xtol=1e-4, ftol=1e-6,
                           loss="cauchy", f_scale=ROBUST_SCALE)
    final = run(result.x)
    return Fit(tuple(params), tuple(float(v) for v in values(result.x)), tuple(ms for ms, _ in final),
               tuple(sub), count[0], tuple(informed))


def _merge(touched, moved, base):
    out = list(base)
    for k, r in zip(touched, moved):
        out[k] = r
    return out


# -- cross-validation -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Prediction:
    row: Row
    simulated: float

    @property
    def error(self) -> float:
        return self.simulated / self.row.latency_ms - 1


@dataclass(frozen=True)
class Fold:
    """One fold of a cross-validation: what it held out ("family X", or a model's label where the
    rows name no family), those rows (indices into the evaluator's rows), and the fit on the rest."""

    label: str
    held: tuple[int, ...]
    fit: Fit


@dataclass(frozen=True)
class CrossValidation:
    """Every row predicted with its family held out (in the evaluator's row order), and the folds."""

    predictions: tuple[Prediction, ...]
    folds: tuple[Fold, ...]


def cross_validate(evaluator: Evaluator, params: Sequence[Param], on_fold: OnStep | None = None,
                   on_run: OnStep | None = None, max_nfev: int = 30) -> CrossValidation:
    """Leave one model family out (a model alone where the rows name no family): fit on every other
    family's rows (each fit at most `max_nfev` iterations, as the whole fit), predict the held-out
    family's rows. `on_fold(done, folds, label)` as each fold starts and once all are done; `on_run` is
    each fold's fit's."""
    keys = sorted({family_key(r) for r in evaluator.rows}, key=str)
    out: dict[int, Prediction] = {}
    folds = []
    for k, key in enumerate(keys):
        held = [i for i, r in enumerate(evaluator.rows) if family_key(r) == key]
        train = [i for i in range(len(evaluator.rows)) if i not in held]
        first = evaluator.rows[held[0]]
        label = f"family {first.family}" if first.family else first.label
        if on_fold:
            on_fold(k, len(keys), f"without {label}")
        fitted = fit(evaluator, params, train, max_nfev=max_nfev, on_run=on_run)
        folds.append(Fold(label, tuple(held), fitted))
        results = evaluator.run(fitted.params, fitted.values, held)
        for i, (ms, _) in zip(held, results):
            out[i] = Prediction(evaluator.rows[i], ms)
    if on_fold:
        on_fold(len(keys), len(keys), "")
    return CrossValidation(tuple(out[i] for i in sorted(out)), tuple(folds))
