"""The on-disk compilation cache of the GPU (serialization) and NNAPI (cache_dir + token) delegates."""

from __future__ import annotations

import hashlib
from pathlib import Path

from runtime.ir.atomic import write_text
from runtime.ir.graph import Graph

__all__ = ["fingerprint", "is_warm", "store"]


def fingerprint(graph: Graph) -> str:
    """What the compiled program depends on: op types, options and tensor shapes/types (not values)."""
    h = hashlib.sha256()
    for op in graph.ops:
        h.update(repr((op.type.name, op.version, op.options, op.inputs, op.outputs)).encode())
    for t in graph.tensors:
        h.update(repr((t.shape, t.dtype.name)).encode())
    return h.hexdigest()[:16]


def _path(directory: str, token: str, delegate: str, graph: Graph) -> Path:
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
