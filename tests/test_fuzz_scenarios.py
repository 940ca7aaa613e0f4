"""Hypothesis-driven mutations of the shipped scenarios and profiles (tests/fuzz_scenarios.py), a bounded
number per test run, through the API and the command line: each loads, or fails with one line naming the
file; never a traceback, never a hang (no answer in 60 s). `python -m tests.fuzz_scenarios --cases 5000` is the
long run. Files the long runs found crashing on are kept as fixed cases below."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz_scenarios import CRASH, HANG, MODES, OK, REJECTED, Case, Worker, make_case

# 150 cases (1.75 mutations each on average): every kind x mode some 25 times, each of the nine
# structural and fourteen textual mutations about ten times; more cases only repeat those paths on
# other random values, which is what HYPOTHESIS_PROFILE=nightly (2,500) and the long run are for.
EXAMPLES = 2500 if os.environ.get("HYPOTHESIS_PROFILE") == "nightly" else 150
# Files the harness found crashing the loader before it was hardened (`--seed 11`, 24 crashes in 600
# cases: RecursionError, !!float abc, !!int x, !!int 0x, !!bool maybe, !!timestamp zz, a bad date, a
# 5,000-digit integer, control characters reported over two lines), one per kind of failure.
FIXED = sorted((Path(__file__).parent / "fixtures" / "fuzz_scenarios").glob("*.yaml"))


@pytest.fixture(scope="module")
def worker():
    w = Worker(timeout=120)   # a hang guard only: a slow case on a busy host is no failure
    yield w
    w.close()


def check(worker: Worker, case: Case) -> str:
    outcome, detail, _ = worker.run(case)   # HANG only past the worker's hang guard, never for being slow
    assert outcome in (OK, REJECTED), (f"{outcome} on a mutated {case.kind} ({case.seed_file}, {case.mode}): "
                                       f"{detail}\n--- the file ---\n{case.text[:4000]}")
    return outcome


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False), kind=st.sampled_from(["scenario", "profile"]),
       mode=st.sampled_from(MODES))
def test_mutated_scenarios_and_profiles_load_or_fail_in_one_line(worker, rng, kind, mode):
    check(worker, make_case(rng, kind, mode))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path", FIXED, ids=lambda p: p.stem)
def test_files_that_once_crashed_now_load_or_fail_in_one_line(worker, path, mode):
    kind, seed = path.stem.split("_", 1)
    check(worker, Case(kind, seed.rsplit("_", 1)[0] + ".yaml", mode, path.read_text(encoding="utf-8")))


def test_the_harness_reports_a_hang_and_goes_on():
    w = Worker(timeout=0.5)
    try:
        outcome, detail, _ = w.run(Case("scenario", "x.yaml", "sleep", "30"))
        assert (outcome, detail) == (HANG, "no answer in 0.5 s")
        w.timeout = 120   # the cases below answer: only a hang guard, however busy the host
        assert w.run(Case("scenario", "x.yaml", "api", "device: pixel4\nmodel: {zoo: tiny_cnn}\n"))[0] == OK
        assert w.run(Case("scenario", "x.yaml", "api", "device: pixel4\nmodel: {zoo: tiny_cnn}\nruns: 1\n"))[0] == REJECTED
    finally:
        w.close()
    assert CRASH not in (OK, REJECTED)


def test_the_harness_parses_a_text_once_and_hands_out_copies():
    from tests import fuzz_scenarios as fs

    text = "a: [1, 2]\nb: &x {c: 1}\nd: *x\n"
    first = fs._parse(text)
    first["a"].append(3)   # a mutation of one case's document
    assert fs._parse(text) == {"a": [1, 2], "b": {"c": 1}, "d": {"c": 1}}
    assert fs._parsed.cache_info().hits >= 1
    for broken in ("\0", "a: [\n", fs._bomb(9), "loop: &l [*l]\n", "k: " + "[" * 20000 + "]" * 20000 + "\n"):
        assert fs._parse(broken) is None
