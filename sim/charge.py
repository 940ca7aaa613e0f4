"""One inference's charges on a phone (ops on units, fixed holds, boundary copies): run under SimPy, summed alone, or priced as arrays."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generator, Iterable, Iterator, Sequence, Union

import numpy as np

from sim.cost import Precision, Work
from sim.price import Facts, facts, layout, price
from sim.soc import SoC
from sim.trace import Kind
from sim.unit import Scales, Tag, Unit

__all__ = ["Compute", "Hold", "Crossing", "Begin", "Charge", "Timeline", "sequential", "Run", "Bill", "Pricer"]


@dataclass(frozen=True)
class Compute:
    """One op's work on a unit (sim.unit.Unit.execute)."""

    unit: Unit
    work: Work
    scale: Scales = Scales()
    threads: int = 1
    args: tuple[tuple[str, Any], ...] = ()

    def run(self, soc: SoC, tag: Tag) -> Generator:
        return self.unit.execute(self.work, tag, self.scale, self.threads, self.args)

    def alone(self, soc: SoC) -> float:
        return self.unit.alone_seconds(self.work, self.scale, self.threads)


@dataclass(frozen=True)
class Hold:
    """A fixed time on a unit: a delegate's invoke call, a driver's step (sim.unit.Unit.hold)."""

    unit: Unit
    seconds: float
    name: str
    kind: Kind
    precision: Precision
    scale: Scales = Scales()

    def run(self, soc: SoC, tag: Tag) -> Generator:
        return self.unit.hold(self.seconds, self.name, self.kind, tag, self.precision, self.scale)

    def alone(self, soc: SoC) -> float:
        return self.seconds


@dataclass(frozen=True)
class Crossing:
    """Bytes over the copy path, with any layout or dtype conversion (sim.soc.SoC.copy)."""

    nbytes: int
    name: str
    convert_per_s: float = 0.0

    def run(self, soc: SoC, tag: Tag) -> Generator:
        return soc.copy(self.nbytes, self.name, tag, self.convert_per_s)

    def alone(self, soc: SoC) -> float:
        return soc.copy_alone(self.nbytes, self.convert_per_s)


@dataclass(frozen=True)
class Begin:
    """A delegated partition's graph starts on its unit, taking no time: the HTP's weight DMA starts
    with nothing fetched ahead (sim.unit.Unit.begin_graph), in a SimPy run and in a sum alike."""

    unit: Unit

    def run(self, soc: SoC, tag: Tag) -> Generator:
        self.unit.begin_graph()
        yield from ()

    def alone(self, soc: SoC) -> float:
        self.unit.begin_graph()
        return 0.0


Charge = Union[Compute, Hold, Crossing, Begin]


@dataclass(frozen=True)
class Timeline:
    """Charges one after another and the simulated second each ended, from the inference's start."""

    charges: tuple[Charge, ...]
    ends: tuple[float, ...]

    @property
    def seconds(self) -> float:
        return self.ends[-1] if self.ends else 0.0

    def spans(self) -> Iterator[tuple[Charge, float, float]]:
        """(charge, start, end) in order."""
        start = 0.0
        for charge, end in zip(self.charges, self.ends):
            yield charge, start, end
            start = end


def sequential(charges: Iterable[Charge], soc: SoC) -> Timeline:
    """The charges one after another on an otherwise idle phone, as one SimPy process alone runs
    them: each waits for nothing (no other process holds a unit, the DRAM or a copy engine) and
    takes exactly the cost its `run` would time out for. The clock advances as SimPy's does
    (now + delay, in order), so the figures are the SimPy run's to the last bit."""
    done, ends, now = [], [], 0.0
    for charge in charges:
        now = now + charge.alone(soc)
        done.append(charge)
        ends.append(now)
    return Timeline(tuple(done), tuple(ends))


# -- priced as arrays ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """Ops one after another on one unit (by name) at one scale and thread count: a Bill's part.
    `begins`: a delegated graph starts with it (sim.unit.Unit.begin_graph, as a Begin charge)."""

    unit: str
    works: tuple[Work, ...]
    scale: Scales = Scales()
    threads: int = 1
    begins: bool = False


@dataclass(frozen=True)
class Bill:
    """One inference alone as `sequential` sums it, regrouped: its ops as runs per unit, and the
    seconds of everything else (calls, crossings) on the phone it was drawn up for."""

    runs: tuple[Run, ...]
    fixed_s: float


# Runs whose indices a catalog remembers (a phone's rows have a few hundred).
_KNOWN_RUNS = 20_000


class _Catalog:
    """The distinct ops a unit of one layout was asked for, and their facts (sim.price.facts)."""

    def __init__(self) -> None:
        self.index: dict[Work, int] = {}
        self.works: list[Work] = []
        self.facts: Facts | None = None
        self._known: dict[int, tuple[tuple[Work, ...], np.ndarray]] = {}   # id(works) -> (works, indices)

    def indices(self, works: tuple[Work, ...]) -> np.ndarray:
        """Where the ops are among the catalog's (added where new). A bill re-made on another
        phone names the same tuple of works: its indices are found by the tuple's identity."""
        known = self._known.get(id(works))
        if known is not None and known[0] is works:
            return known[1]
        ix = self._indices(works)
        if len(self._known) > _KNOWN_RUNS:   # one-op runs of a partition over several units are new each time
            self._known.clear()
        self._known[id(works)] = (works, ix)   # the tuple is kept: its id stays its own
        return ix

    def _indices(self, works: Sequence[Work]) -> np.ndarray:
        index = self.index
        for w in works:
            if w not in index:
                index[w] = len(self.works)
                self.works.append(w)
                self.facts = None
        return np.fromiter((index[w] for w in works), dtype=np.intp, count=len(works))

    def facts_for(self, rates) -> Facts:
        if self.facts is None:
            self.facts = facts(self.works, rates)
        return self.facts


class Pricer:
    """The seconds of many bills on one phone at a time, each unit's ops priced at once as arrays
    (sim.price): a calibration re-times the same plans on hundreds of profiles, and what no rate
    moves (each op's facts) is taken once per unit layout, not once per profile. Each op's figure
    is the one `sequential` sums (sim.cost.op_cost's); only the order of the additions differs."""

    def __init__(self) -> None:
        self._catalogs: dict[tuple, _Catalog] = {}

    def seconds(self, bills: Sequence[Bill], soc: SoC) -> list[float]:
        groups: dict[tuple, list[Run]] = {}
        for bill in bills:
            for run in bill.runs:
                groups.setdefault((run.unit, run.scale, run.threads), []).append(run)
        priced: dict[tuple, tuple] = {}
        for key, members in groups.items():
            name, scale, threads = key
            unit = soc.unit(name)
            rates = unit.rates_at(threads, unit.clocked(scale))
            catalog = self._catalogs.setdefault((name, layout(rates)), _Catalog())
            ops = {id(run): catalog.indices(run.works) for run in members}
            priced[key] = (unit, price(catalog.facts_for(rates), rates, unit.alone_bandwidth()), ops)
        totals = []
        for bill in bills:   # in order: a unit's state (the HTP's prefetch) runs from op to op
            total = bill.fixed_s
            for run in bill.runs:
                unit, costs, ops = priced[(run.unit, run.scale, run.threads)]
                total += unit.run_seconds(costs, ops[id(run)], run.begins)
            totals.append(total)
        return totals
