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


KERNEL = '''
from runtime.ops.fast_jit import jit


@jit
def twice(x):
    return x * 2
'''
CALL = "import sys; sys.path.insert(0, {folder!r}); import kmod; print(kmod.twice(21))"


def test_a_real_compile_is_announced_once_and_a_cache_hit_not_at_all(tmp_path):
    """A kernel made by fast_jit compiles in the first process (one line on stderr, however many
    compiles), and loads from numba's disk cache in the next (nothing said)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from runtime.ops.fast_jit import COMPILING

    (tmp_path / "kmod.py").write_text(KERNEL)
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root), "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    code = CALL.format(folder=str(tmp_path)) + "; print(kmod.twice(1.5))"   # two signatures: two compiles

    def run() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tmp_path)

    first, second = run(), run()
    assert first.returncode == 0 and first.stdout.split() == ["42", "3.0"], first.stderr
    assert first.stderr.count(COMPILING) == 1, first.stderr
    assert second.returncode == 0 and second.stdout == first.stdout
    assert COMPILING not in second.stderr and second.stderr == ""


def test_numba_functions_not_made_by_fast_jit_are_not_announced(capfd):
    import numba

    from runtime.ops.fast_jit import COMPILING

    numba.njit(lambda x: x - 1)(1)
    assert COMPILING not in capfd.readouterr().err
