"""The on-disk compilation cache of the GPU (serialization) and NNAPI (cache_dir + token) delegates.

The token is part of a file name in the cache folder, so it may hold no path separator: a token of
`../../x` would write outside the folder the user named."""

from __future__ import annotations

import hashlib
from pathlib import Path

from delegates.api import DelegateError
from runtime.ir.atomic import write_text
from runtime.ir.graph import Graph

__all__ = ["fingerprint", "is_warm", "store", "token_problem", "check_token", "MAX_TOKEN"]

MAX_TOKEN = 128      # characters; with the delegate and fingerprint, well inside a file name's 255 bytes


def token_problem(token: str) -> str | None:
    """Why a model token cannot be a plain file name in the cache folder, or None."""
    if any(sep in token for sep in ("/", "\\")):
        return f"{token!r} holds a path separator"
    if token in (".", ".."):
        return f"{token!r} names a folder"
    if any(ord(c) < 32 for c in token):
        return f"{token!r} holds a control character"
    if len(token) > MAX_TOKEN:
        return f"it is {len(token):,} characters long; at most {MAX_TOKEN}"
    return None


def check_token(token: str | None, what: str) -> None:
    """DelegateError naming `what` (a flag or option) when the token is not a plain file name."""
    why = token_problem(token) if token else None
    if why:
        raise DelegateError(f"{what} must be a plain file name: {why}")


def fingerprint(graph: Graph) -> str:
    """What the compiled program depends on: op types, options and tensor shapes/types (not values)."""
    h = hashlib.sha256()
    for op in graph.ops:
        h.update(repr((op.type.name, op.version, op.options, op.inputs, op.outputs)).encode())
    for t in graph.tensors:
        h.update(repr((t.shape, t.dtype.name)).encode())
    return h.hexdigest()[:16]


def _path(directory: str, token: str, delegate: str, graph: Graph) -> Path:
    check_token(token, f"the {delegate} delegate's model_token")
    return Path(directory) / f"{token}.{delegate}.{fingerprint(graph)}.bin"


def is_warm(directory: str | None, token: str | None, delegate: str, graph: Graph) -> bool:
    """True when an earlier init left a compiled program for this model, token and delegate."""
    return bool(directory and token) and _path(directory, token, delegate, graph).is_file()


def store(directory: str | None, token: str | None, delegate: str, graph: Graph) -> None:
    """Leave the compiled program's marker (atomically), as the delegate writes its cache after init."""
    if not (directory and token):
        return
    path = _path(directory, token, delegate, graph)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, fingerprint(graph))
