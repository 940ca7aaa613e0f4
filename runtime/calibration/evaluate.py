"""Simulated latencies of measurement rows at vectors of parameter values: each model loaded and planned once, re-timed by pricing its charges."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from runtime.calibration.rows import DELEGATES, Row, model_key
from runtime.ir.errors import DelegateError, TestbedError
from runtime.ir.yamlcheck import Key, dotted
from sim.charge import Pricer

__all__ = ["OnStep", "CalibrationError", "Param", "Counts", "RowSim", "Evaluator"]

# Told of work as it finishes: (done, total, label). A fit cannot know its count of simulations
# ahead, so it reports against the most it may take (max_nfev residuals and Jacobians).
OnStep = Callable[[int, int, str], None]


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

        try:
            delegates, rest = parse_flags(list(DELEGATES[row.delegate]) + list(row.flags), profile)
        except DelegateError as exc:   # a flag's value: the message names the flag, not the row
            raise CalibrationError(f"{row.source}: flags: {exc}") from None
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
