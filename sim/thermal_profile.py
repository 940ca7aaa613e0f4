"""A profile's `thermal:` section: the RC network, DVFS levels and trips, checked with file:line: key errors."""

from __future__ import annotations

from typing import Any

from runtime.ir.yamlcheck import Key
from sim.profile_parse import (MILLI, ProfileCtx, F, duration, fields, parse_integer, parse_mapping, parse_number,
                               parse_positive, show_value, parse_text)
from sim.thermal import SENSORS, Level, Network, ThermalSpec, Trip, UnitThermal

__all__ = ["parse_thermal", "check_units"]


def _node(ctx: ProfileCtx, value: Any, path: Key) -> dict[str, float]:
    return fields(ctx, value, path, {"c_j_per_k": F("c", True, parse_positive()),
                                      "r_k_per_w": F("r", True, parse_positive())})


def _level(ctx: ProfileCtx, value: Any, path: Key) -> Level:
    if not isinstance(value, list) or len(value) != 2:
        raise ctx.fail(path, f"must be a [MHz, relative power] pair, got {show_value(value)}")
    mhz = parse_positive()(ctx, value[0], path + (0,))
    power = parse_number(ctx, value[1], path + (1,), "a relative power in (0, 1]", lambda x: 0 < x <= 1)
    return Level(mhz, power)


def _levels(ctx: ProfileCtx, value: Any, path: Key) -> tuple[Level, ...]:
    if not isinstance(value, list) or not value:
        raise ctx.fail(path, f"must be a non-empty list of [MHz, relative power] levels, got {show_value(value)}")
    levels = tuple(_level(ctx, v, path + (i,)) for i, v in enumerate(value))
    if levels[0].power != 1.0:
        raise ctx.fail(path + (0, 1), "the first level is the profile's nominal point: its relative power must be 1")
    for i in range(1, len(levels)):
        if levels[i].mhz >= levels[i - 1].mhz:
            raise ctx.fail(path + (i, 0), "levels must be listed fastest first, each slower than the one before")
    return levels


_TRIP = {"sensor": F("sensor", True, parse_text),
         "at_c": F("at_c", True, lambda ctx, v, p: parse_number(ctx, v, p, "a temperature", lambda x: -50 < x < 200)),
         "clear_c": F("clear_c", True, lambda ctx, v, p: parse_number(ctx, v, p, "a temperature", lambda x: -50 < x < 200)),
         "level": F("level", True, parse_integer(1))}


def _trip(ctx: ProfileCtx, value: Any, path: Key, levels: int) -> Trip:
    f = fields(ctx, value, path, _TRIP)
    if f["sensor"] not in SENSORS:
        raise ctx.fail(path + ("sensor",), f"unknown sensor {show_value(f['sensor'])}; expected one of {', '.join(SENSORS)}")
    if f["clear_c"] >= f["at_c"]:
        raise ctx.fail(path + ("clear_c",), f"must be below at_c ({f['at_c']:g}): the hysteresis is at_c - clear_c")
    if f["level"] >= levels:
        raise ctx.fail(path + ("level",), f"must be an index into the unit's {levels} levels (1 to {levels - 1})")
    return Trip(**f)


def _unit(ctx: ProfileCtx, name: str, value: Any, path: Key) -> UnitThermal:
    f = fields(ctx, value, path, {"levels": F("levels", True, _levels), "trips": F("trips", False, lambda c, v, p: v)})
    trips = f.get("trips", [])
    if not isinstance(trips, list):
        raise ctx.fail(path + ("trips",), f"must be a list of trips, got {show_value(trips)}")
    return UnitThermal(name, f["levels"], tuple(_trip(ctx, t, path + ("trips", i), len(f["levels"]))
                                                 for i, t in enumerate(trips)))


_TOP = {"ambient_c": F("ambient_c", True, lambda ctx, v, p: parse_number(ctx, v, p, "a temperature", lambda x: -50 < x < 80)),
        "tick_ms": F("tick_s", True, duration(MILLI, positive=True)),
        "governor_ms": F("governor_s", True, duration(MILLI, positive=True)),
        "die": F("die", True, _node),
        "skin": F("skin", True, _node),
        "units": F("units", False, lambda ctx, v, p: parse_mapping(ctx, v, p))}


def parse_thermal(ctx: ProfileCtx, value: Any, path: Key) -> ThermalSpec:
    """The section as a ThermalSpec; unit names are checked against the profile's units later
    (check_units), once they are known."""
    f = fields(ctx, value, path, _TOP)
    if f["governor_s"] < f["tick_s"]:
        raise ctx.fail(path + ("governor_ms",), "must be at least tick_ms: the governor reads the updated temperatures")
    net = Network(f["die"]["c"], f["die"]["r"], f["skin"]["c"], f["skin"]["r"])
    units = tuple(_unit(ctx, name, raw, path + ("units", name)) for name, raw in f.get("units", {}).items())
    return ThermalSpec(net, f["ambient_c"], f["tick_s"], f["governor_s"], units)


def check_units(ctx: ProfileCtx, thermal: ThermalSpec, units: set[str]) -> None:
    """Every throttled unit is one of the profile's."""
    for u in thermal.units:
        if u.unit not in units:
            raise ctx.fail(("thermal", "units", u.unit), f"names unit {show_value(u.unit)}, which the profile does not "
                                                         f"define (units: {', '.join(sorted(units))})")

