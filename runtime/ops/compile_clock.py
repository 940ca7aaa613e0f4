"""Host seconds spent compiling fast kernels, readable without importing numba (the delegate guard asks on every call)."""

from __future__ import annotations

import time

__all__ = ["CompileClock", "CLOCK", "compile_seconds"]


class CompileClock:
    """Host seconds numba has spent compiling, the compile under way included: a delegate's time
    budget (delegates/guard.py) does not count them, so a first call on a cold cache, which
    compiles its kernels, is not taken for a hung delegate. runtime/ops/fast_jit.py feeds it numba's
    compile events; until a fast kernel module is imported nothing compiles and it reads 0."""

    def __init__(self) -> None:
        self.done, self.depth, self.since = 0.0, 0, 0.0

    def start(self) -> None:
        if self.depth == 0:
            self.since = time.monotonic()
        self.depth += 1

    def end(self) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.done += time.monotonic() - self.since

    def seconds(self) -> float:
        return self.done + (time.monotonic() - self.since if self.depth else 0.0)


CLOCK = CompileClock()


def compile_seconds() -> float:
    """Host seconds spent compiling kernels so far in this process (a running total)."""
    return CLOCK.seconds()
