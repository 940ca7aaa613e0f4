"""A phone's heat as pure functions: a die -> skin -> air RC network, DVFS levels and the governor's trips.

The network has two nodes. The die (the SoC with its package and the DRAM stacked on it) takes the
power the trace records on every rail; the skin (the phone's body near the SoC, where the skin
sensors sit) takes the heat the die passes on plus what the scenario's platform (display, camera
sensor) dissipates, and gives it to the air:

    C_die  dT_die/dt  = P_die - (T_die - T_skin) / R_die
    C_skin dT_skin/dt = (T_die - T_skin) / R_die + P_skin - (T_skin - T_air) / R_skin

With the powers held over a step the system is linear, so a step is exact: the steady state plus the
matrix exponential of the step applied to the distance from it (no integration error, any step size).

A unit's clock is a list of DVFS levels (frequency and active power relative to the top level; CMOS
dynamic power goes as f * V^2). The governor is the staircase Qualcomm's thermal-engine "monitor"
algorithm and the kernel's trip points implement: a trip switches on when its sensor reaches `at_c`
and off only once it falls below `clear_c` (the hysteresis), and a unit runs at the deepest level any
of its switched-on trips asks for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

__all__ = ["Level", "Trip", "UnitThermal", "Network", "ThermalSpec", "SENSORS", "steady_state", "rc_step",
           "network_step", "trip_on", "governed_level"]

SENSORS = ("die", "skin")


@dataclass(frozen=True)
class Level:
    """One DVFS operating point: its clock and its active power relative to the unit's top level."""

    mhz: float
    power: float


@dataclass(frozen=True)
class Trip:
    """A thermal trip: on at `at_c` on `sensor`, off below `clear_c`; while on, the unit runs at
    `level` (an index into its levels) or deeper."""

    sensor: str
    at_c: float
    clear_c: float
    level: int


@dataclass(frozen=True)
class UnitThermal:
    """A unit's DVFS levels (fastest first; the first is the profile's nominal point) and its trips."""

    unit: str
    levels: tuple[Level, ...]
    trips: tuple[Trip, ...]

    def scales(self, level: int) -> tuple[float, float]:
        """(rate, power) multipliers at a level: throughput goes with the clock; power is the level's."""
        top, here = self.levels[0], self.levels[level]
        return here.mhz / top.mhz, here.power


@dataclass(frozen=True)
class Network:
    """Thermal capacitances (J/K) and resistances (K/W) of the die -> skin -> air chain."""

    die_c: float
    die_r: float          # die to skin
    skin_c: float
    skin_r: float         # skin to air

    @property
    def r_total(self) -> float:
        return self.die_r + self.skin_r


@dataclass(frozen=True)
class ThermalSpec:
    """A phone's thermal model: the network, the air it starts in, how often temperatures are
    updated and the governor decides, and the units it throttles."""

    network: Network
    ambient_c: float
    tick_s: float
    governor_s: float
    units: tuple[UnitThermal, ...]


def steady_state(net: Network, p_die: float, p_skin: float, ambient_c: float) -> tuple[float, float]:
    """(die, skin) temperatures the powers settle at: all heat leaves through the skin's resistance,
    the die's own power also through the die's. With p_skin = 0, T_die = ambient + P * R_total."""
    skin = ambient_c + (p_die + p_skin) * net.skin_r
    return skin + p_die * net.die_r, skin


def rc_step(temp: float, target: float, dt: float, tau: float) -> float:
    """One node of capacitance C behind resistance R (tau = RC) after dt: an exponential approach."""
    return target + (temp - target) * math.exp(-dt / tau)


def _expm2(a: Sequence[Sequence[float]], t: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """exp(A t) of a 2x2 matrix with real eigenvalues (an RC network's always are), in closed form."""
    (a11, a12), (a21, a22) = a
    half = (a11 + a22) / 2
    disc = max(0.0, half * half - (a11 * a22 - a12 * a21))
    root = math.sqrt(disc)
    l1, l2 = half + root, half - root
    if root > 1e-12 * max(1.0, abs(half)):
        e1, e2 = math.exp(l1 * t), math.exp(l2 * t)
        c0 = (l1 * e2 - l2 * e1) / (l1 - l2)
        c1 = (e1 - e2) / (l1 - l2)
    else:  # repeated eigenvalue: exp(lt) (I + t (A - l I))
        e = math.exp(half * t)
        c0, c1 = e * (1 - half * t), e * t
    return ((c0 + c1 * a11, c1 * a12), (c1 * a21, c0 + c1 * a22))


def network_step(net: Network, temps: tuple[float, float], p_die: float, p_skin: float, ambient_c: float,
                 dt: float) -> tuple[float, float]:
    """(die, skin) temperatures after dt seconds with the powers held: exact for any dt."""
    if dt <= 0:
        return temps
    g1, g2 = 1 / net.die_r, 1 / net.skin_r
    a = ((-g1 / net.die_c, g1 / net.die_c), (g1 / net.skin_c, -(g1 + g2) / net.skin_c))
    ss = steady_state(net, p_die, p_skin, ambient_c)
    x = (temps[0] - ss[0], temps[1] - ss[1])
    (m11, m12), (m21, m22) = _expm2(a, dt)
    return ss[0] + m11 * x[0] + m12 * x[1], ss[1] + m21 * x[0] + m22 * x[1]


def trip_on(was_on: bool, temp_c: float, trip: Trip) -> bool:
    """A trip's state after a sample: on at or above `at_c`, off below `clear_c`, else as it was."""
    if temp_c >= trip.at_c:
        return True
    if temp_c < trip.clear_c:
        return False
    return was_on


def governed_level(unit: UnitThermal, states: Sequence[bool], temps: Mapping[str, float]) -> tuple[int, list[bool]]:
    """The governor's decision for a unit: each trip's new state from its sensor, and the deepest
    level the trips that are on ask for (0, the top clock, when none is)."""
    new = [trip_on(was, temps[t.sensor], t) for was, t in zip(states, unit.trips)]
    level = max((t.level for t, on in zip(unit.trips, new) if on), default=0)
    return min(level, len(unit.levels) - 1), new
