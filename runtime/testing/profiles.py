"""Hypothesis strategies for simulated phones: shipped profiles with every speed, power and copy figure rescaled.

`profiles()` draws a Profile from a shipped one (or one you pass) by scaling each unit's rates,
DRAM bandwidth, dispatch cost and power, the DRAM's bandwidth and energy per byte, and the copy
path's sync latency and bandwidth, each by its own factor in [0.25, 4]. Every factor is positive
and active and idle power share one factor, so what the profile loader checks still holds: rates
and bandwidths positive, powers and latencies non-negative, active power above idle. `scaled()`
speeds up one unit's arithmetic, for monotonicity properties; `profile_data()` writes a Profile
back in the YAML's human units, so a generated phone can be checked by the loader itself.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from hypothesis import strategies as st

from sim.profile import list_profiles, load_profile
from sim.spec import Profile, UnitSpec

__all__ = ["profiles", "scaled", "factors", "profile_data", "MIN_FACTOR", "MAX_FACTOR"]

MIN_FACTOR, MAX_FACTOR = 0.25, 4.0

# Log-uniform over [1/4, 4]: as many slower phones as faster ones, shrinking towards the base (1).
factors = st.floats(-2.0, 2.0).map(lambda e: 2.0 ** e)


@functools.lru_cache(maxsize=None)
def _shipped(name: str) -> Profile:
    return load_profile(name)  # profiles are frozen: one parse per process is enough


def _times(table, factor: float) -> dict:
    return {k: v * factor for k, v in table.items()}


def _unit(u: UnitSpec, rate: float, bandwidth: float, dispatch: float, power: float) -> UnitSpec:
    return dataclasses.replace(u, macs_per_s=_times(u.macs_per_s, rate), elem_per_s=_times(u.elem_per_s, rate),
                               bandwidth=u.bandwidth * bandwidth, dispatch_s=u.dispatch_s * dispatch,
                               active_w=_times(u.active_w, power), idle_w=u.idle_w * power)


@st.composite
def profiles(draw, base: Profile | str | None = None) -> Profile:
    """A phone near `base` (a Profile, a shipped profile's name, or any shipped one when None)."""
    if base is None:
        base = draw(st.sampled_from(list_profiles()))
    profile = _shipped(base) if isinstance(base, str) else base
    units = tuple(_unit(u, draw(factors), draw(factors), draw(factors), draw(factors)) for u in profile.units)
    dram = dataclasses.replace(profile.dram, bandwidth=profile.dram.bandwidth * draw(factors),
                               energy_per_byte=profile.dram.energy_per_byte * draw(factors))
    copy = dataclasses.replace(profile.copy, bandwidth=profile.copy.bandwidth * draw(factors),
                               sync_s=profile.copy.sync_s * draw(factors))
    return dataclasses.replace(profile, units=units, dram=dram, copy=copy)


def scaled(profile: Profile, unit: str, factor: float) -> Profile:
    """`profile` with one unit's MAC and element-op rates (every precision) multiplied by `factor`."""
    if not factor > 0:
        raise ValueError(f"a rate factor must be positive, got {factor!r}")
    profile.unit(unit)  # KeyError naming the profile when it has no such unit
    units = tuple(dataclasses.replace(u, macs_per_s=_times(u.macs_per_s, factor),
                                      elem_per_s=_times(u.elem_per_s, factor)) if u.name == unit else u
                  for u in profile.units)
    return dataclasses.replace(profile, units=units)


def _precisions(table) -> dict[str, float]:
    return {p.value: v for p, v in table.items()}


def _unit_data(u: UnitSpec) -> dict[str, Any]:
    data: dict[str, Any] = {
        "kind": u.kind.value, "cores": u.cores, "gmacs": _precisions(_times(u.macs_per_s, 1e-9)),
        "gelems": _precisions(_times(u.elem_per_s, 1e-9)), "bandwidth_gbs": u.bandwidth / 1e9,
        "dispatch_us": u.dispatch_s * 1e6, "active_w": _precisions(u.active_w), "idle_w": u.idle_w,
        "init_ms": u.init_s * 1e3, "cached_init_ms": u.cached_init_s * 1e3, "invoke_us": u.invoke_s * 1e6,
        "channel_align": u.channel_align, "extras": dict(u.extras)}
    if u.efficiency:
        data["efficiency"] = {c.value: v for c, v in u.efficiency.items()}
    if u.convert_per_s:
        data["convert_gbs"] = u.convert_per_s / 1e9
    return data


def profile_data(profile: Profile) -> dict[str, Any]:
    """The profile as plain data in the YAML's units, what sim.profile.profile_from_dict reads."""
    data: dict[str, Any] = {
        "name": profile.name, "description": profile.description, "os": profile.os,
        "api_level": profile.api_level, "has_neural_engine": profile.has_neural_engine,
        "dram": {"bandwidth_gbs": profile.dram.bandwidth / 1e9, "pj_per_byte": profile.dram.energy_per_byte * 1e12,
                 "idle_w": profile.dram.idle_w},
        "copy": {"bandwidth_gbs": profile.copy.bandwidth / 1e9, "sync_us": profile.copy.sync_s * 1e6,
                 "engines": profile.copy.engines},
        "units": {u.name: _unit_data(u) for u in profile.units}}
    if profile.nnapi_devices:
        data["nnapi"] = {"devices": [
            {"name": d.name, "unit": d.unit, "feature_level": d.feature_level, "ops": sorted(d.ops),
             "precisions": sorted(p.value for p in d.precisions), "compile_ms": d.compile_s * 1e3,
             "cached_compile_ms": d.cached_compile_s * 1e3, "execution_us": d.execution_s * 1e6,
             **({"preference": {k: list(v) for k, v in d.preference.items()}} if d.preference else {})}
            for d in profile.nnapi_devices]}
    return data
