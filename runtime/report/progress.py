"""Progress of long commands on stderr: a bar with an ETA on a terminal, a plain line every 10 s elsewhere."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import TextIO

__all__ = ["Progress", "INTERVAL_S"]

INTERVAL_S = 10.0     # seconds of host time between two plain lines (a log file, CI)
REDRAW_S = 1.0        # on a terminal, how often the timer redraws the bar while a step runs long
_clock = time.monotonic


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def _columns(stream: TextIO) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return 0


class Progress:
    """`progress(done, total, label)` as work finishes; `clear()` before printing to stdout; `close()`.

    On a terminal a tqdm bar, drawn once `delay` seconds have passed (a command that ends sooner shows
    nothing) and redrawn every REDRAW_S by a timer thread, so a step that runs long (a model loading,
    a delegate preparing) still shows its elapsed time moving; elsewhere a line `PREFIX: 12/40 cells done, 0:36 elapsed, about 1:36 left` every
    INTERVAL_S seconds from a timer thread, so a long cell still reports that the run is alive."""

    def __init__(self, prefix: str, unit: str, stream: TextIO | None = None, delay: float = 0.0,
                 leave: bool = True, total: int = 0):
        self.prefix, self.unit, self.delay, self.leave = prefix, unit, delay, leave
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = _clock()
        self.done, self.total = 0, total
        self.first: int | None = None       # done when the first report came (resumed cells)
        self.label = ""                     # what the step under way is doing (note)
        self._bar = None
        self._lock = threading.Lock()
        self._drawing = threading.RLock()
        self._stop = threading.Event()
        self._timer: threading.Thread | None = None

    def __call__(self, done: int, total: int, label: str = "") -> None:
        with self._lock:
            self.done, self.total = done, total
            if self.first is None:
                self.first = done
        if self.tty:
            self._draw(label)
        if self._timer is None:
            self._timer = threading.Thread(target=self._tick, name="progress", daemon=True)
            self._timer.start()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def note(self, label: str) -> None:
        """What the step under way is doing (a fold's simulations so far), shown after the count, so a
        long step still changes what the terminal shows."""
        with self._lock:
            self.label = label
        if self._bar is not None:
            self._bar.set_postfix_str(label)

    def step(self) -> None:
        """One more done (the total grows if the work outruns it: --min_secs runs more)."""
        self(self.done + 1, max(self.total, self.done + 1))

    def _draw(self, label: str) -> None:
        with self._drawing:   # the caller's thread and the timer's may both draw
            if self._bar is None:
                if _clock() - self.start < self.delay:
                    return
                from tqdm import tqdm

                wide = _columns(self.stream) > 0   # a pty of no size (script, some CI): tqdm would draw nothing
                self._bar = tqdm(total=self.total, initial=self.done, unit=self.unit, file=self.stream,
                                 leave=self.leave, dynamic_ncols=wide, ncols=None if wide else 80,
                                 nrows=None if wide else 24, mininterval=0.2)
                if label:
                    self._bar.set_postfix_str(label)
            self._bar.total = max(self.total, self.done)
            self._bar.update(self.done - self._bar.n)

    def _tick(self) -> None:
        while not self._stop.wait(REDRAW_S if self.tty else INTERVAL_S):
            self.beat()

    def beat(self) -> None:
        """The timer's sign of life while a step runs long (a model loading, a delegate preparing, a
        fold fitting): on a terminal the bar, drawn once the delay has passed and redrawn so its
        elapsed time moves; elsewhere the plain line."""
        if not self.tty:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
            return
        with self._lock:
            label = self.label
        self._draw(label)
        if self._bar is not None:
            self._bar.refresh()

    def line(self) -> str:
        """The plain progress line: done / total, time so far and the time left at the rate so far."""
        with self._lock:
            done, total, first, label = self.done, self.total, self.first or 0, self.label
        elapsed = _clock() - self.start
        left = f", about {_duration(elapsed / (done - first) * (total - done))} left" if done > first else ""
        note = f" ({label})" if label else ""
        return f"{self.prefix}: {done}/{total} {self.unit}s done{note}, {_duration(elapsed)} elapsed{left}"

    def clear(self) -> None:
        """Take the bar off the terminal line, so stdout's next line starts clean (redrawn on the next step)."""
        if self._bar is not None:
            self._bar.clear()

    def close(self) -> None:
        self._stop.set()
        if self._timer is not None:
            self._timer.join()
        with self._drawing:
            if self._bar is not None:
                self._bar.close()
                self._bar = None
