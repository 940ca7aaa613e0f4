"""External delegate code on a watched thread: a call that outlives its time budget becomes a DelegateError.

Every call into an external delegate (a "module:factory" path, a plugin, a user's own Delegate class:
its factory, is_node_supported, create_kernel, log_lines, prepare, invoke) runs on a worker thread (one per calling thread, reused) while the caller waits at most the budget for
it. A call that does not return in time is abandoned: Python cannot stop a thread, so the stuck call keeps
its daemon thread (and whatever it holds) until the process exits, and later calls get a new worker.
The budget is per call, not per batch: asking a delegate about 10,000 ops gives each answer the budget.
The built-in delegates are never watched (delegates.registry.is_builtin): their work is charged in
simulated time, so whether they succeed must not hang on how busy the host is.

The budget defaults to DEFAULT_BUDGET_S, or to the DTB_DELEGATE_TIMEOUT environment variable (seconds);
`set_budget` / `time_budget` change it (the CLI's --delegate_timeout_secs); 0 turns the watching off
(calls then run on the caller's thread, as plain calls).

Delegate code that calls sys.exit or os._exit fails its call (a DelegateError) instead of ending the
process: os._exit is replaced, once, by a function that raises SystemExit on a thread running delegate
code and exits as before anywhere else.
"""

from __future__ import annotations

import contextlib
import math
import os
import queue
import threading
import time
from typing import Any, Callable, Iterator

from runtime.ir.errors import DelegateError
from runtime.ops.compile_clock import compile_seconds

__all__ = ["DEFAULT_BUDGET_S", "DelegateTimeout", "budget", "set_budget", "time_budget", "call", "run",
           "timeout_message"]

DEFAULT_BUDGET_S = 5.0
_IDLE_S = 30.0      # a worker with nothing to do for this long ends; the next call starts another


class DelegateTimeout(DelegateError):
    """A delegate call did not return within the budget; it was abandoned on its thread."""


def _from_env() -> float:
    text = os.environ.get("DTB_DELEGATE_TIMEOUT", "")
    try:
        value = float(text)
    except ValueError:
        return DEFAULT_BUDGET_S
    return value if math.isfinite(value) and value >= 0 else DEFAULT_BUDGET_S


_state = {"budget": _from_env()}


def budget() -> float:
    """Seconds each external delegate call may take (0: not watched)."""
    return _state["budget"]


def set_budget(seconds: float) -> float:
    """Set the budget for every later call; returns the previous one."""
    seconds = float(seconds)
    if not (math.isfinite(seconds) and seconds >= 0):
        raise ValueError(f"a delegate time budget must be a number of seconds >= 0, not {seconds!r}")
    previous, _state["budget"] = _state["budget"], seconds
    return previous


@contextlib.contextmanager
def time_budget(seconds: float) -> Iterator[None]:
    previous = set_budget(seconds)
    try:
        yield
    finally:
        set_budget(previous)


class _Worker:
    """One daemon thread running the jobs of one calling thread, in order."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.stamp: tuple[str, float] | None = None     # the call in progress and when it started
        self.done = False
        threading.Thread(target=self._serve, name="delegate-calls", daemon=True).start()

    def mark(self, what: str) -> None:
        """A new delegate call starts: its budget counts from now, less the time spent compiling
        kernels meanwhile (a first call on a cold cache compiles them: slow, not hung)."""
        self.stamp = (what, time.monotonic(), compile_seconds())

    def _serve(self) -> None:
        _local.serving = self
        _local.in_delegate = True  # this thread runs nothing but delegate code
        while True:
            try:
                body, reply = self.jobs.get(timeout=_IDLE_S)
            except queue.Empty:
                with self.lock:
                    if self.jobs.empty():
                        self.done = True
                        return
                continue
            try:
                outcome = (True, body(self.mark), "")
            except BaseException as exc:  # noqa: BLE001 - a delegate's SystemExit is its failure too
                outcome = (False, exc, self.stamp[0] if self.stamp else "")
            self.stamp = None
            reply.put(outcome)

    def submit(self, body: Callable, reply: queue.SimpleQueue) -> bool:
        with self.lock:
            if self.done:
                return False
            self.jobs.put((body, reply))
            return True


_local = threading.local()
_real_exit = os._exit


def _exit_from_delegate(code: int = 0) -> None:
    """os._exit as delegate code sees it: raised as SystemExit (which the runtime turns into the
    delegate's DelegateError) instead of ending the process, which would skip every cleanup and
    could leave exit status 0 over an unfinished run. Anyone else's call exits as before."""
    if getattr(_local, "in_delegate", False):
        raise SystemExit(f"os._exit({code}) called by delegate code")
    _real_exit(code)


def _trap_exit() -> None:
    if os._exit is not _exit_from_delegate:
        os._exit = _exit_from_delegate


@contextlib.contextmanager
def _delegate_code() -> Iterator[None]:
    """The calling thread runs delegate code: its os._exit is trapped meanwhile."""
    _trap_exit()
    before = getattr(_local, "in_delegate", False)
    _local.in_delegate = True
    try:
        yield
    finally:
        _local.in_delegate = before


def timeout_message(name: str, limit: float) -> str:
    """What a user reads when an external delegate's call outlives the budget: the budget, and how to change it."""
    return (f"{name} did not return within {limit:g} s, the time budget of an external delegate's call; "
            f"the call was abandoned on its thread. Give --delegate_timeout_secs SECONDS (or set "
            f"DTB_DELEGATE_TIMEOUT) for a longer budget, 0 for none")


def run(body: Callable[[Callable[[str], None]], Any], what: str = "delegate call") -> Any:
    """body(mark) on the worker; body calls mark(what) before each delegate call, and each call
    gets the budget from its mark. Returns body's result or raises its exception unchanged;
    DelegateTimeout names the call that did not return."""
    limit = budget()
    serving = getattr(_local, "serving", None)
    if not limit or serving is not None:  # unwatched, or already on a worker (a delegate calling delegates)
        with _delegate_code():
            try:
                return body(serving.mark if serving is not None else (lambda _: None))
            except SystemExit as exc:  # sys.exit or os._exit in delegate code: its failure, not the end
                raise DelegateError(f"{what}: SystemExit: {exc}") from exc
    _trap_exit()
    reply: queue.SimpleQueue = queue.SimpleQueue()
    worker = getattr(_local, "worker", None)
    if worker is None or not worker.submit(body, reply):
        worker = _local.worker = _Worker()
        worker.submit(body, reply)
    answered = False
    try:
        while True:
            stamp = worker.stamp
            wait = limit if stamp is None else stamp[1] + limit + compile_seconds() - stamp[2] - time.monotonic()
            try:
                ok, value, failed_in = reply.get(timeout=max(wait, 0.0))
            except queue.Empty:
                if stamp is not None and stamp[1] + limit + compile_seconds() - stamp[2] > time.monotonic():
                    continue  # the call compiled kernels meanwhile: its budget moved on by that time
                # no delegate call has started yet: the worker thread is still being scheduled or running
                # the runtime's own code before its first mark, which the budget does not time (a busy
                # host must not turn that into a delegate's timeout)
                if stamp is None:
                    continue
                if worker.stamp is stamp:  # no new call started while we waited: this one is stuck
                    raise DelegateTimeout(timeout_message(stamp[0], limit)) from None
                continue
            answered = True
            if ok:
                return value
            if not isinstance(value, Exception):  # SystemExit or the like from delegate code: its failure,
                raise DelegateError(f"{failed_in or what}: {type(value).__name__}: {value}") from value  # not the end
            raise value
    finally:
        if not answered:  # stuck, or the caller was interrupted: never queue behind that call
            _local.worker = None


def call(what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args) as one watched delegate call."""
    def body(mark: Callable[[str], None]) -> Any:
        mark(what)
        return fn(*args)

    return run(body, what)
