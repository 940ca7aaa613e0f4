"""Reading a file the user named: only a regular file, since a FIFO, a terminal or a device may never end.

open() on a FIFO waits for a writer, read() on /dev/zero or /dev/stdin may never return: a scenario,
profile, model or input path that names one would hang the command. The file is opened without
blocking and checked with fstat (no window between the check and the read), then read as usual.
"""

from __future__ import annotations

import os
import stat
from typing import IO

__all__ = ["NotRegularFile", "FileTooLarge", "open_regular", "read_bytes", "read_text", "same_file", "special_kind"]

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


class NotRegularFile(OSError):
    """The path names something other than a regular file; str() and strerror say what it is."""

    def __init__(self, path: str, kind: str):
        super().__init__(f"it is {kind}, not a regular file")
        self.strerror, self.filename = f"it is {kind}, not a regular file", path

    def __str__(self) -> str:
        return self.strerror


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def special_kind(path: str | os.PathLike) -> str | None:
    """"a FIFO", "a directory", ... when `path` exists and is no regular file; None otherwise."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return None if stat.S_ISREG(mode) else _kind(mode)


def open_regular(path: str | os.PathLike) -> IO[bytes]:
    """The file at `path` opened for reading in binary; NotRegularFile (an OSError) for anything but a
    regular file, other OSErrors as open() raises them."""
    nonblock = getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, os.O_RDONLY | nonblock | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(os.fspath(path), _kind(mode))
        if nonblock:
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class FileTooLarge(OSError):
    """A file longer than its reader takes (read no further than that)."""

    def __init__(self, limit: int):
        super().__init__(f"the file is over {limit:,} bytes")


def read_bytes(path: str | os.PathLike, limit: int | None = None) -> bytes:
    """A regular file's bytes; with `limit`, no more than that many are read (FileTooLarge beyond)."""
    with open_regular(path) as f:
        if limit is None:
            return f.read()
        if os.fstat(f.fileno()).st_size > limit:   # a sparse 3 GB file is refused unread
            raise FileTooLarge(limit)
        data = f.read(limit + 1)   # the file may have grown since the fstat
    if len(data) > limit:
        raise FileTooLarge(limit)
    return data


def read_text(path: str | os.PathLike, encoding: str = "utf-8", limit: int | None = None) -> str:
    """As Path.read_text (universal newlines), from a regular file only, of at most `limit` bytes."""
    data = read_bytes(path, limit).decode(encoding)
    return data.replace("\r\n", "\n").replace("\r", "\n")


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two paths name one existing file (an output about to replace an input); a missing one
    (or a name that is no path, such as a shipped profile's) names no file."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False
