"""Atomic file writes: a result file is either the old one or the whole new one, never half written."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = ["write_text"]


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write `text` to a temporary file beside `path`, then rename it over `path`.

    open(..., "x") rather than mkstemp: the file gets the umask's mode, not mkstemp's private 0600."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
