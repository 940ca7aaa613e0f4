"""A delegate call's time budget leaves out the time spent compiling kernels (a cold cache is slow, not hung)."""

from __future__ import annotations

import threading
import time

import pytest

from delegates import guard


def test_a_call_that_compiles_is_not_taken_for_hung(monkeypatch):
    start = time.monotonic()
    monkeypatch.setattr(guard, "compile_seconds", lambda: time.monotonic() - start)  # all the time compiling
    with guard.time_budget(0.2):
        assert guard.call("slow first call", lambda: time.sleep(0.6) or "done") == "done"


def test_a_call_that_only_waits_still_times_out(monkeypatch):
    monkeypatch.setattr(guard, "compile_seconds", lambda: 0.0)
    release = threading.Event()   # the call waits until the test ends: late however busy the host
    try:
        with guard.time_budget(0.2), pytest.raises(guard.DelegateTimeout, match="slow call"):
            guard.call("slow call", release.wait)
    finally:
        release.set()


def test_the_compile_clock_counts_a_compile():
    import numba

    from runtime.ops.fast_jit import compile_seconds

    before = compile_seconds()
    numba.njit(lambda x: x + 1)(1)  # a fresh function: compiled now, never cached
    assert compile_seconds() > before
