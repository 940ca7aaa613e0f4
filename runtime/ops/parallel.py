"""Split a vectorised kernel's output rows across worker threads (NumPy releases the GIL in ufuncs)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable

_state = {"threads": 1, "pool": None}

# Below this many output elements a second thread costs more in hand-off than it saves.
MIN_PARALLEL_ELEMENTS = 64 * 1024


def set_num_threads(n: int) -> None:
    """Threads the elementwise kernels may use (BLAS keeps its own setting)."""
    n = max(1, int(n))
    if n != _state["threads"]:
        if _state["pool"] is not None:
            _state["pool"].shutdown(wait=True)
        _state["pool"] = ThreadPoolExecutor(max_workers=n - 1) if n > 1 else None
        _state["threads"] = n


def num_threads() -> int:
    return _state["threads"]


def row_split(work: Callable[[int, int], None], rows: int, elements: int) -> None:
    """Run work(lo, hi) over [0, rows), split in contiguous chunks, one per thread."""
    n = min(_state["threads"], rows)
    if n <= 1 or elements < MIN_PARALLEL_ELEMENTS:
        work(0, rows)
        return
    bounds = [rows * k // n for k in range(n + 1)]
    futures = [_state["pool"].submit(work, bounds[k], bounds[k + 1]) for k in range(1, n)]
    work(bounds[0], bounds[1])
    for f in futures:
        f.result()
