"""The project's Python files parsed once per test session, for the tests that read the code itself
(floors and imports in test_layers, delegate kinds and hooks in test_contract): each of their checks
walked every file anew, and parsing the three packages takes seconds."""

from __future__ import annotations

import ast
import functools
import os
import pathlib


def tree(path: pathlib.Path) -> ast.Module:
    """The file's syntax tree: one object while the file is unchanged, so callers only read it."""
    return _parsed(*_identity(path))


def nodes(path: pathlib.Path) -> tuple[ast.AST, ...]:
    """Every node of the file, in ast.walk's order."""
    return _walked(*_identity(path))


def _identity(path: pathlib.Path) -> tuple[pathlib.Path, int, int]:
    """A file as the caches know it: an edited file (a test run while editing) is read again."""
    stat = os.stat(path)
    return pathlib.Path(path), stat.st_mtime_ns, stat.st_size


@functools.lru_cache(maxsize=None)
def _parsed(path: pathlib.Path, mtime_ns: int, size: int) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


@functools.lru_cache(maxsize=None)
def _walked(path: pathlib.Path, mtime_ns: int, size: int) -> tuple[ast.AST, ...]:
    return tuple(ast.walk(_parsed(path, mtime_ns, size)))
