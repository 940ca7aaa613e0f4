"""The numba set-up every fast kernel module shares: jit decorators with on-disk caching, thread count."""

from __future__ import annotations

import collections
import contextlib
import math
import sys
import threading
import time
import weakref

import numba
import numba.core.event

from runtime.ops import parallel
from runtime.ops.compile_clock import CLOCK, compile_seconds

__all__ = ["jit", "pjit", "threads", "run", "compile_seconds"]

_state: dict = {}
_ours: "weakref.WeakSet" = weakref.WeakSet()   # the dispatchers made here: their compiles are announced
COMPILING = ("compiling the testbed's fast kernels for this machine (a minute or two, once: numba caches "
             "them on disk for later runs)")
_OPTIONS = dict(nogil=True, fastmath=False, boundscheck=False, error_model="numpy")


def _compile(fn, **extra):
    """cache=True keeps the machine code on disk. numba writes it to the module's __pycache__,
    or, where the installed package is read-only, to the user's cache folder ($XDG_CACHE_HOME/numba
    or ~/.cache/numba; $NUMBA_CACHE_DIR overrides both), so an installed copy also compiles only
    once. Only if no cache folder is writable at all does it compile afresh in every process."""
    try:
        made = numba.njit(cache=True, **_OPTIONS, **extra)(fn)
    except RuntimeError:  # "cannot cache function ...: no locator available": nowhere writable
        made = numba.njit(cache=False, **_OPTIONS, **extra)(fn)
    _ours.add(made)
    return made


def jit(fn):
    """Compile `fn` on its first call's types: no GIL, no fast-math (float sums must round as
    the reference's do: no FMA contraction, no reassociation), no bounds checks."""
    return _compile(fn)


def pjit(fn):
    """jit, with prange loops run on numba's thread pool (its threading layer: TBB, OpenMP or
    its own workqueue, whichever the installation has). The pool hands out work without the
    GIL in a few microseconds, where a Python thread pool takes tens per hand-off."""
    return _compile(fn, parallel=True)


class _CompileEvents(numba.core.event.Listener):
    """numba's compile events: counted on the clock delegates/guard.py reads (runtime/ops/compile_clock.py),
    and said once on stderr the first time one of our kernels compiles."""

    def __init__(self) -> None:
        self.said = False

    def on_start(self, event) -> None:
        CLOCK.start()
        self._announce(event)

    def _announce(self, event) -> None:
        """One stderr line the first time one of our kernels compiles: a cold cache costs a minute or
        two of silence otherwise. numba fires this event only on a real compile, never when it
        loads the code from its cache (numba/core/dispatcher.py, Dispatcher.compile)."""
        if self.said or (event.data or {}).get("dispatcher") not in _ours:
            return
        self.said = True
        print(COMPILING, file=sys.stderr, flush=True)

    def on_end(self, event) -> None:
        CLOCK.end()


numba.core.event.register("numba:compile", _CompileEvents())


def threads() -> int:
    """The kernels' thread count (parallel.num_threads), at most the threads numba started."""
    return max(1, min(parallel.num_threads(), numba.config.NUMBA_NUM_THREADS))


# A parallel loop ends only when every thread of the team has joined it. When another process
# keeps a core busy, numba's worker may wait a whole scheduler slice for it (loops of 0.2 ms were
# seen taking 8-60 ms, often), where one thread alone would have finished long before. So each
# loop (per node and input shape) first runs twice on one thread, which sets the time to beat; a
# loop on several threads slower than that by STALL_SECONDS is a stall, and STALLS of them within
# WINDOW_SECONDS (one alone can be a hiccup of a quiet machine) mark the machine as contended:
# every loop then runs on one thread for BACK_OFF_SECONDS before trying again. This only ever
# changes which thread computes a piece, never a result.
STALL_SECONDS = 0.0005
STALLS, WINDOW_SECONDS, BACK_OFF_SECONDS = 3, 0.5, 1.0
_contended = {"until": 0.0, "stalls": collections.deque(maxlen=STALLS)}


def run(driver, nthreads: int, node, *args) -> None:
    """driver(*args), a pjit function whose last argument is its loop's piece bounds, its prange
    loop on `nthreads` threads (or one, see above) with pieces dealt out one at a time (chunk
    size 1: a thread that starts late leaves its share to the others). Both settings are numba's
    per calling thread; the caller's own are put back, so user code sharing the thread keeps
    them. (Set here rather than inside the driver, which numba could then not cache.)"""
    key = f"fast_single{id(args[-1])}"  # the bounds: one array per node and input shape
    calls, best = node.cache.get(key, (0, math.inf))
    if nthreads > 1 and (calls < 2 or time.monotonic() < _contended["until"]):
        nthreads = 1
    get_threads, set_threads, get_chunk, set_chunk, lock = _settings()
    threads_before, chunk_before = get_threads(), get_chunk()
    if threads_before != nthreads:
        set_threads(nthreads)
    if chunk_before != 1:
        set_chunk(1)
    start = time.perf_counter()
    try:
        with lock:
            driver(*args)
    finally:
        if threads_before != nthreads:
            set_threads(threads_before)
        if chunk_before != 1:
            set_chunk(chunk_before)
    elapsed = time.perf_counter() - start
    if nthreads == 1:  # the first call may compile or load the code: not a bar to beat
        node.cache[key] = (calls + 1, best if calls == 0 else min(best, elapsed))
    elif elapsed > best + STALL_SECONDS:
        now, stalls = time.monotonic(), _contended["stalls"]
        stalls.append(now)
        if len(stalls) == stalls.maxlen and now - stalls[0] < WINDOW_SECONDS:
            _contended["until"] = now + BACK_OFF_SECONDS
            stalls.clear()


def _settings():
    """numba's getters and setters of the thread count and chunk size, and a lock for parallel
    loops. The public functions check that the thread pool is up, under two locks, on every
    call; once it is up, their C entry points (where this numba has them) skip that: a few
    microseconds an op. numba's own workqueue layer (used where neither TBB nor OpenMP is
    installed) aborts the process when two threads run parallel loops at once, so with it the
    loops take turns; the other layers run them side by side."""
    found = _state.get("settings")
    if found is None:
        public = (numba.get_num_threads, numba.set_num_threads, numba.get_parallel_chunksize,
                  numba.set_parallel_chunksize)
        numba.get_num_threads()  # starts the pool (and sets the C entry points)
        try:
            from numba.np.ufunc import parallel as pool

            found = (pool._get_num_threads, pool._set_num_threads, pool._get_parallel_chunksize,
                     pool._set_parallel_chunksize)
        except (ImportError, AttributeError):
            found = public
        if not all(callable(f) for f in found):
            found = public
        try:
            layer = numba.threading_layer()
        except ValueError:  # not known yet: assume the worst
            layer = "workqueue"
        found = (*found, threading.Lock() if layer == "workqueue" else contextlib.nullcontext())
        _state["settings"] = found
    return found
