"""Simulation properties over random phones: energy is the integral of power, units never run over
capacity, faster units never slow an inference, and the same run twice gives the same trace."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from hypothesis import given, strategies as st

from delegates.registry import make_delegate
from runtime.interpreter.api import Interpreter
from runtime.testing.profiles import MAX_FACTOR, MIN_FACTOR, profile_data, profiles, scaled
from runtime.zoo import build
from sim.power import DRAM_RAIL, power_steps
from sim.profile import load_profile, profile_from_dict
from sim.soc import SoC
from sim.spec import UnitKind
from sim.trace import Kind

MODELS = {
    "mobilenet_v1": lambda: build("mobilenet_v1", alpha=0.25, resolution=32, classes=10),
    "tiny_cnn": lambda: build("tiny_cnn", resolution=16),
}
_BUILT: dict = {}


def model(name: str):
    if name not in _BUILT:
        _BUILT[name] = MODELS[name]()
    return _BUILT[name]


@dataclass(frozen=True)
class Stream:
    """One interpreter on the shared phone: GPU delegate or CPU only, its threads, its runs."""

    gpu: bool
    threads: int
    runs: int


stream = st.builds(Stream, st.booleans(), st.integers(1, 5), st.integers(1, 2))
streams = st.lists(stream, min_size=1, max_size=2)


def run_streams(profile, graph, plan: list[Stream]) -> tuple[SoC, list[Interpreter]]:
    """Interpreters sharing one SoC, each running its inferences as a SimPy process, as
    runtime.sweep.runner.simulate drives streams."""
    soc = SoC(profile)
    its = [Interpreter(graph=graph, experimental_delegates=[make_delegate("gpu", profile)] if s.gpu else [],
                       soc=soc, num_threads=s.threads, timing_only=True, stream=k) for k, s in enumerate(plan)]
    for it in its:
        it.allocate_tensors()

    def process(it: Interpreter, runs: int):
        for _ in range(runs):
            yield from it.simulation.inference_process()

    for it, s in zip(its, plan):
        soc.env.process(process(it, s.runs))
    soc.env.run()
    return soc, its


@given(profiles())
def test_generated_profiles_pass_the_loaders_checks(profile):
    """Every drawn phone, written back in the YAML's units, is accepted by the profile loader and
    read back as the same phone (to rounding of the unit conversions)."""
    again = profile_from_dict(profile_data(profile), "<generated>")
    _assert_close(profile_data(again), profile_data(profile))


def _assert_close(got, want, path="profile"):
    if isinstance(want, dict):
        assert got.keys() == want.keys(), path
        for k in want:
            _assert_close(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, list):
        assert len(got) == len(want), path
        for k, (g, w) in enumerate(zip(got, want)):
            _assert_close(g, w, f"{path}[{k}]")
    elif isinstance(want, float):
        assert math.isclose(got, want, rel_tol=1e-12), path
    else:
        assert got == want, path


def ratio(a: float, b: float) -> float:
    return a / b if b else 1.0  # a figure the base profile leaves at zero stays zero


@given(profiles())
def test_profile_factors_stay_within_the_stated_range(profile):
    base = load_profile(profile.name)
    checks = [ratio(profile.dram.bandwidth, base.dram.bandwidth), ratio(profile.copy.sync_s, base.copy.sync_s),
              ratio(profile.copy.bandwidth, base.copy.bandwidth)]
    for u, b in zip(profile.units, base.units):
        checks += [ratio(u.bandwidth, b.bandwidth), ratio(u.dispatch_s, b.dispatch_s), ratio(u.idle_w, b.idle_w)]
        checks += [ratio(u.macs_per_s[p], b.macs_per_s[p]) for p in b.macs_per_s]
        checks += [ratio(u.active_w[p], b.active_w[p]) for p in b.active_w]
        for p in b.active_w:  # one power factor for a unit: still above idle where the base was
            assert (u.active_w[p] >= u.idle_w) == (b.active_w[p] >= b.idle_w)
    assert all(MIN_FACTOR * (1 - 1e-12) <= c <= MAX_FACTOR * (1 + 1e-12) for c in checks)


def _integral(steps, t0: float, t1: float) -> dict[str, float]:
    """∫ power dt over [t0, t1] of the step functions power_steps returns."""
    total: dict[str, list[float]] = {}
    ends = [t for t, _ in steps[1:]] + [math.inf]
    for (t, level), t_next in zip(steps, ends):
        lo, hi = max(t, t0), min(t_next, t1)
        for rail, watts in level.items():
            total.setdefault(rail, []).append(watts * max(0.0, hi - lo))
    return {rail: math.fsum(parts) for rail, parts in total.items()}


@given(profiles(), st.sampled_from(sorted(MODELS)), streams, st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_energy_is_power_integrated_over_time_plus_dram_bytes(profile, name, plan, a, b):
    soc, _ = run_streams(profile, model(name), plan)
    span = soc.env.now
    windows = [(0.0, span), (min(a, b) * span, max(a, b) * span)]
    steps = power_steps(soc.trace.intervals, soc.rails)
    for t0, t1 in windows:
        energy = soc.energy(t0, t1)
        want = _integral(steps, t0, t1)
        # DRAM also pays per byte: every byte of the intervals that end inside the window.
        moved = sum(iv.bytes for iv in soc.trace.intervals
                    if t0 < iv.end <= t1 or iv.start == iv.end == t0)
        want[DRAM_RAIL] += moved * profile.dram.energy_per_byte
        assert energy.keys() == want.keys()
        for rail in want:
            assert math.isclose(energy[rail], want[rail], rel_tol=1e-9, abs_tol=1e-15), (rail, t0, t1)


def _peak_load(intervals, cost) -> float:
    """The most capacity in use at any instant; intervals are half-open, so one that ends at t
    frees its share before one starting at t takes it."""
    events = sorted([(iv.start, 1, cost(iv)) for iv in intervals if iv.end > iv.start]
                    + [(iv.end, 0, -cost(iv)) for iv in intervals if iv.end > iv.start])
    load = peak = 0
    for _, _, delta in events:
        load += delta
        peak = max(peak, load)
    return peak


@given(profiles(), st.sampled_from(sorted(MODELS)), st.lists(stream, min_size=2, max_size=2))
def test_no_unit_runs_more_at_once_than_its_capacity(profile, name, plan):
    soc, _ = run_streams(profile, model(name), plan)
    lanes: dict[str, list] = {}
    for iv in soc.trace.intervals:
        lanes.setdefault(iv.lane, []).append(iv)
    engines = {f"copy{k}" for k in range(profile.copy.engines)}
    assert set(lanes) <= set(soc.units) | engines
    for lane, ivs in lanes.items():
        spec = soc.units[lane].spec if lane in soc.units else None
        if spec is not None and spec.kind is UnitKind.CPU:
            def cores(iv, n=spec.cores):
                # an op of a stream with T threads holds min(T, cores) cores; a fixed hold takes one
                return min(max(1, plan[iv.stream].threads), n) if iv.kind is Kind.OP else 1

            assert _peak_load(ivs, cores) <= spec.cores, lane
        else:  # an accelerator or one copy engine: one thing at a time
            assert _peak_load(ivs, lambda iv: 1) <= 1, lane


def _latency(profile, graph, gpu: bool) -> tuple[float, set[str]]:
    """One inference's simulated latency, and the units it kept busy."""
    it = Interpreter(graph=graph, experimental_delegates=[make_delegate("gpu", profile)] if gpu else [],
                     device=profile, num_threads=4, timing_only=True)
    it.allocate_tensors()
    it.invoke()
    soc = it.simulation.soc
    return it.simulation.latencies[-1], {iv.lane for iv in soc.trace.intervals if iv.lane in soc.units}


@given(profiles(), st.sampled_from(sorted(MODELS)), st.booleans(), st.floats(1.0, 16.0), st.data())
def test_latency_never_grows_when_a_unit_computes_faster(profile, name, gpu, factor, data):
    graph = model(name)
    slow, busy = _latency(profile, graph, gpu)
    # any unit, but half the time one the inference uses (speeding up an idle one changes nothing)
    unit = data.draw(st.sampled_from(sorted(busy)) | st.sampled_from([u.name for u in profile.units]), label="unit")
    fast, _ = _latency(scaled(profile, unit, factor), graph, gpu)
    assert fast <= slow


@given(profiles(), st.sampled_from(sorted(MODELS)), streams)
def test_the_same_phone_and_model_twice_give_identical_traces(profile, name, plan):
    def once():
        soc, its = run_streams(profile, model(name), plan)
        return soc.trace.intervals, soc.trace.inferences, [it.simulation.latencies for it in its]

    first, second = once(), once()
    assert first[0] and first[1]
    assert first == second


def test_scaled_speeds_up_exactly_one_unit_and_refuses_bad_input():
    base = load_profile("pixel4")
    fast = scaled(base, "gpu", 2.0)
    assert fast.unit("gpu").macs_per_s == {p: 2 * r for p, r in base.unit("gpu").macs_per_s.items()}
    assert fast.unit("gpu").elem_per_s == {p: 2 * r for p, r in base.unit("gpu").elem_per_s.items()}
    assert [u for u in fast.units if u.name != "gpu"] == [u for u in base.units if u.name != "gpu"]
    with pytest.raises(KeyError, match="ane"):
        scaled(base, "ane", 2.0)
    with pytest.raises(ValueError):
        scaled(base, "gpu", 0.0)
