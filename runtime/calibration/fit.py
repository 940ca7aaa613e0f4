"""Fit a phone profile's physical parameters to measured latencies (bounded least squares on log latency)."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from runtime.ir.errors import TestbedError
from runtime.calibration.rows import DELEGATES, Row, family_key, model_key
from runtime.ir.yamlcheck import Key, dotted
from sim.charge import Pricer
from sim.htp import FIRST_HTP

__all__ = ["Param", "Fit", "RowSim", "Evaluator", "Counts", "candidate_params", "fit", "cross_validate",
           "CalibrationError", "PRIOR_WEIGHT", "SPREAD", "OnStep"]

# Told of work as it finishes: (done, total, label). A fit cannot know its count of simulations
# ahead, so it reports against the most it may take (max_nfev residuals and Jacobians).
OnStep = Callable[[int, int, str], None]

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


class CalibrationError(TestbedError, ValueError):
    """Calibration cannot run as asked (no rows for the phone, a model that does not load, ...)."""


@dataclass(frozen=True)
class Param:
    """One fitted number: its key path in the profile YAML (human units), prior value and bounds."""

    path: Key
    prior: float
    lo: float
    hi: float
    unit: str             # the unit (or "nnapi:<device>") whose rows inform it

    @property
    def name(self) -> str:
        return dotted(self.path)


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
# float16 rate (its 2:1 ratio to int8 is assumed), the per-invocation FastRPC / graph-execute cost and
# the VTCM bandwidth (sim/htp.py). A Hexagon v6x DSP fits exactly as before.
_HTP_PARAMS: tuple[tuple[Key, float], ...] = (
    (("gmacs", "float16"), math.inf), (("gmacs", "int8"), math.inf), (("invoke_us",), math.inf),
    (("mechanisms", "vtcm_gbs"), math.inf),
    # the weights stream from DRAM every inference (VTCM holds activations, not a ResNet's weights), so
    # the NPU's share of the bus is what separates a model of many parameters from one of many MACs
    (("bandwidth_gbs",), math.inf))


def _unit_params(unit: Mapping[str, Any]) -> tuple[tuple[Key, float], ...]:
    params = _UNIT_PARAMS.get(unit["kind"], ())
    extras = unit.get("extras") or {}
    if unit["kind"] == "dsp" and isinstance(extras, Mapping) and extras.get("htp_arch", 0) >= FIRST_HTP:
        params += _HTP_PARAMS
    return params


def _get(data: Any, path: Key) -> Any:
    for key in path:
        data = data[key]
    return data


def _with_values(data: Any, values: Sequence[tuple[Key, float]]) -> Any:
    """`data` with the values set at their key paths, copying only the mappings and lists on
    those paths (the rest is shared with `data`, which is left as it was)."""
    out = copy.copy(data)
    copied = {id(out)}
    for path, value in values:
        node = out
        for key in path[:-1]:
            child = node[key]
            if id(child) not in copied:
                child = copy.copy(child)
                node[key] = child
                copied.add(id(child))
            node = child
        node[path[-1]] = value
    return out


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
    for i, device in enumerate((data.get("nnapi") or {}).get("devices", ())):
        key = f"nnapi:{device['name']}"
        if key in used and float(device.get("execution_us", 0)) > 0:
            prior = float(device["execution_us"])
            params.append(Param(("nnapi", "devices", i, "execution_us"), prior, prior / SPREAD,
                                prior * SPREAD, key))
    return params


# -- the simulation of one row ----------------------------------------------------------------------


@dataclass
class Counts:
    """The work a calibration did, counted (what tests hold the fast path to: counts, never seconds)."""

    models: int = 0          # models loaded (zoo builds, quantizations, .tflite reads)
    plans: int = 0           # interpreters built: delegates applied, partitions formed, work described
    profiles: int = 0        # profiles built from parameter vectors (one per evaluation of a row set)
    summed: int = 0          # row timings from their charges without SimPy (priced as arrays, or summed)
    simulations: int = 0     # row timings by a SimPy run (rows whose charges depend on the run)
    reused: int = 0          # row timings asked again at the same values, answered from the first


class RowSim:
    """One measurement's model on the simulated phone, built once; `run(profile)` re-times it on a
    profile with other numbers (same units and devices), reusing the partitioning and the work
    descriptions, and returns the simulated milliseconds and the per-op-type milliseconds.

    A single timing-only inference alone on the phone is a plain sequence of charges (ops on units,
    fixed calls, boundary copies), each a pure function of the profile: the re-timing sums them
    (runtime.interpreter.executor.Executor.alone), the figures the SimPy run gives to the last bit.
    A plan whose charges depend on the run (control flow) is simulated instead, and counted so.

    Rows that differ only in the thread count share one plan (`like`): threads move no partition."""

    def __init__(self, row: Row, graph, profile, like: "RowSim | None" = None, counts: Counts | None = None):
        self.row, self.graph = row, graph
        self.counts = counts if counts is not None else Counts()
        if like is not None:
            self.it, self._executor, self.used = like.it, like._executor, like.used
            return
        from delegates.registry import parse_flags
        from runtime.interpreter.api import Interpreter

        delegates, rest = parse_flags(list(DELEGATES[row.delegate]) + list(row.flags), profile)
        if rest:
            raise CalibrationError(f"{row.source}: unknown delegate flags {' '.join(rest)}")
        refused = [d.platform_refusal for d in delegates if d.platform_refusal]
        if refused:   # else the run is all CPU, and the fit would take a delegate's latency for the CPU's
            raise CalibrationError(f"{row.source}: delegate {row.delegate}: {refused[0]}; a measurement through a "
                                   f"delegate the phone does not have cannot be fitted")
        self.it = Interpreter(graph=graph, experimental_delegates=delegates, num_threads=row.threads,
                              device=profile, timing_only=True)
        self.it.allocate_tensors()
        self.counts.plans += 1
        self._executor = self.it.simulation.executor
        self.used = self._used()

    @property
    def stateful(self) -> bool:
        """Whether re-timing must simulate: the plan's charges depend on the run (control flow)."""
        return bool(self._executor.control)

    def _used(self) -> set[str]:
        from runtime.interpreter.executor import PartitionJob

        simulation = self.it.simulation
        used = {simulation.soc.cpu.name}
        for job in simulation.executor.jobs:
            if not isinstance(job, PartitionJob):      # a CPU op
                continue
            used.update(u.name for u in (job.unit, *(op.unit for op in job.ops if op.unit is not None)))
            used.update(f"nnapi:{d}" for d in job.step.delegate.devices_for(job.step.partition))
        return used

    @property
    def priced(self) -> bool:
        """Whether the row is re-timed by pricing its bill as arrays (sim.charge.Pricer): its
        latency alone is fitted, and its charges do not depend on the run."""
        return not self.row.per_type and not self.stateful

    def bill(self, profile, soc):
        """The row's charges on `soc` (built from `profile`) as a sim.charge.Bill."""
        self._use(profile)
        self.counts.summed += 1
        return self._executor.on(soc, self.row.threads).bill()

    def _use(self, profile) -> None:
        from runtime.interpreter.delegation import DelegateStep

        for step in self.it.simulation.delegation.plan:
            if isinstance(step, DelegateStep):  # a delegate reading its costs from the profile it was made for
                step.delegate.use_profile(profile)

    def run(self, profile, soc=None) -> tuple[float, dict[str, float]]:
        """The row on `profile` (`soc`: a phone built from it, shared by the rows of one evaluation;
        summing charges leaves it idle)."""
        from sim.soc import SoC

        self._use(profile)
        executor = self._executor.on(soc or SoC(profile), self.row.threads)
        timeline = executor.alone()
        if timeline is None:
            return self.simulate(profile)
        self.counts.summed += 1
        # the per-type figures only a row with an op profile is fitted to
        return timeline.seconds * 1e3, _per_type_summed(timeline) if self.row.per_type else {}

    def simulate(self, profile) -> tuple[float, dict[str, float]]:
        """The row's inference run by SimPy on a phone of its own (what `run` sums, where it can)."""
        from runtime.interpreter.delegation import DelegateStep
        from sim.soc import SoC

        simulation = self.it.simulation
        simulation.soc = SoC(profile)
        for step in simulation.delegation.plan:
            if isinstance(step, DelegateStep):
                step.delegate.use_profile(profile)
        simulation.executor = self._executor.on(simulation.soc, self.row.threads)
        seconds = simulation.invoke()
        self.counts.simulations += 1
        return seconds * 1e3, _per_type(simulation.soc.trace)


def _per_type(trace) -> dict[str, float]:
    """Simulated milliseconds per CPU op type of the last inference (what the op profiler sums; a
    delegated partition is one node of the delegate's type, which the total latency already covers)."""
    out: dict[str, float] = {}
    last = max((iv.inference for iv in trace.intervals), default=-1)
    for iv in trace.intervals:
        if iv.inference == last and iv.kind.value == "op" and not any(k == "delegate" for k, _ in iv.args):
            out[iv.name] = out.get(iv.name, 0.0) + (iv.end - iv.start) * 1e3
    return out


def _per_type_summed(timeline) -> dict[str, float]:
    """_per_type's figures from summed charges: the ops' own intervals, outside delegated partitions."""
    from sim.charge import Compute

    out: dict[str, float] = {}
    for c, start, end in timeline.spans():
        if isinstance(c, Compute) and not any(k == "delegate" for k, _ in c.args):
            out[c.work.op] = out.get(c.work.op, 0.0) + (end - start) * 1e3
    return out


# Per unit name, the units of this many distinct specs are kept to share op costs with: the fit's
# current point and the Jacobian's steps away from it, which move one unit's spec each.
_KEPT_UNITS = 4
# Parameter vectors whose row timings are kept (a fit evaluates a few hundred; a --cv run some thousands).
_KEPT_RESULTS = 20_000


class Evaluator:
    """Simulated latencies of every row for a vector of parameter values. Each model is loaded once
    and each (model, delegate flags) planned once, however many rows measured it."""

    def __init__(self, rows: Sequence[Row], data: Mapping[str, Any], source: str, models: Callable[[Row], Any],
                 on_row: OnStep | None = None, summed: bool = True):
        """`summed=False` times every row by a SimPy run every time it is asked (the way calibration
        went before rows were summed: benchmarks/calibrate_fit.py compares the two)."""
        from sim.profile import profile_from_dict

        self.rows, self.data, self.source = list(rows), copy.deepcopy(data), source
        self._from_dict = profile_from_dict
        self.counts = Counts()
        self.summed = summed
        self._units: dict[str, list] = {}   # unit name -> units of recent evaluations, newest first
        self._results: dict[tuple, dict[int, tuple]] = {}   # (names, values) -> row -> (ms, per type)
        self._uncached: dict[int, tuple] = {}
        self._pricer = Pricer()
        self._parsed: dict = {}   # the units and devices no parameter moved are not parsed again
        base = profile_from_dict(self.data, source)
        graphs: dict[tuple, Any] = {}
        plans: dict[tuple, RowSim] = {}
        self.sims = []
        for row in self.rows:   # each new model builds and plans: seconds apiece for large models
            key = model_key(row)
            if key not in graphs:
                graphs[key] = models(row)
                self.counts.models += 1
            plan = (key, row.delegate, row.flags)
            like = plans.get(plan)
            if like is not None and like.stateful:   # a simulated row keeps its own run count
                like = None
            row_sim = RowSim(row, graphs[key], base, like, self.counts)
            plans.setdefault(plan, row_sim)
            self.sims.append(row_sim)
            if on_row:
                on_row(len(self.sims), len(self.rows), row.label)

    def profile(self, params: Sequence[Param], values: Sequence[float]):
        data = _with_values(self.data, [(p.path, float(v)) for p, v in zip(params, values)])
        self.counts.profiles += 1
        return self._from_dict(data, self.source, memo=self._parsed)

    def run(self, params: Sequence[Param], values: Sequence[float],
            rows: Sequence[int] | None = None) -> list[tuple[float, dict[str, float]]]:
        """(ms, per-type ms) of the rows (all by default) at the values. A row already timed at the
        same values is not timed again: every cross-validation fold starts from the prior and takes
        its first Jacobian there, and a fit ends where its last step was evaluated."""
        chosen = list(range(len(self.sims))) if rows is None else list(rows)
        if not self.summed:
            profile = self.profile(params, values)
            return [self.sims[i].simulate(profile) for i in chosen]
        key = (tuple(p.name for p in params), tuple(float(v) for v in values))
        known = self._results.setdefault(key, {})
        missing = [i for i in chosen if i not in known]
        self.counts.reused += len(chosen) - len(missing)
        if missing:
            profile = self.profile(params, values)
            soc = self._soc(profile)
            fast = [i for i in missing if self.sims[i].priced]
            for i, seconds in zip(fast, self._pricer.seconds([self.sims[i].bill(profile, soc) for i in fast], soc)):
                known[i] = (seconds * 1e3, {})
            for i in missing:
                if self.sims[i].priced:
                    continue
                result = self.sims[i].run(profile, soc)
                if not self.sims[i].stateful:   # a simulated row's figures may depend on its run count
                    known[i] = result
                else:
                    self._uncached[i] = result
        out = [known[i] if i in known else self._uncached.pop(i) for i in chosen]
        if len(self._results) > _KEPT_RESULTS:
            self._results.clear()
        return out

    def _soc(self, profile):
        """A phone for summing rows on; a unit the vector left as it was keeps its op costs."""
        from sim.soc import SoC

        soc = SoC(profile)
        for name, unit in soc.units.items():
            recent = self._units.setdefault(name, [])
            if not any(unit.share_costs(other) for other in recent):
                recent.insert(0, unit)
                del recent[_KEPT_UNITS:]
        return soc


# -- the fit ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fit:
    params: tuple[Param, ...]
    values: tuple[float, ...]
    simulated: tuple[float, ...]      # ms per row at the fitted values
    rows: tuple[Row, ...]
    evaluations: int

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
        return jac

    if not params:
        results = run(np.zeros(0))
        return Fit((), (), tuple(ms for ms, _ in results), tuple(sub), count[0])
    result = least_squares(residual_and_keep, np.zeros(len(params)), jac=jacobian_cached, bounds=(lo, hi),
                           method="trf", x_scale=1.0, max_nfev=max_nfev, xtol=1e-4, ftol=1e-6,
                           loss="cauchy", f_scale=ROBUST_SCALE)
    final = run(result.x)
    return Fit(tuple(params), tuple(float(v) for v in values(result.x)), tuple(ms for ms, _ in final),
               tuple(sub), count[0])


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


def cross_validate(evaluator: Evaluator, params: Sequence[Param], on_fold: OnStep | None = None,
                   on_run: OnStep | None = None) -> list[Prediction]:
    """Leave one model family out (a model alone where the rows name no family): fit on every other
    family's rows, predict the held-out family's rows. `on_fold(done, folds, label)` as each fold
    starts and once all are done; `on_run` is each fold's fit's."""
    keys = sorted({family_key(r) for r in evaluator.rows}, key=str)
    out: dict[int, Prediction] = {}
    for k, key in enumerate(keys):
        held = [i for i, r in enumerate(evaluator.rows) if family_key(r) == key]
        train = [i for i in range(len(evaluator.rows)) if i not in held]
        if on_fold:
            first = evaluator.rows[held[0]]
            on_fold(k, len(keys), f"without {'family ' + first.family if first.family else first.label}")
        fitted = fit(evaluator, params, train, on_run=on_run)
        results = evaluator.run(fitted.params, fitted.values, held)
        for i, (ms, _) in zip(held, results):
            out[i] = Prediction(evaluator.rows[i], ms)
    if on_fold:
        on_fold(len(keys), len(keys), "")
    return [out[i] for i in sorted(out)]
