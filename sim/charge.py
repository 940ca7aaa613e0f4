"""One inference's charges on a phone (ops on units, fixed holds, boundary copies): run under SimPy, or summed alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generator, Iterable, Iterator, Union

from sim.cost import Precision, Work
from sim.soc import SoC
from sim.trace import Kind
from sim.unit import Scales, Tag, Unit

__all__ = ["Compute", "Hold", "Crossing", "Begin", "Charge", "Timeline", "sequential"]


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
