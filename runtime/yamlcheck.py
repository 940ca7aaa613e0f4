"""Checked YAML: plain data plus the line of every key path, and value checks whose errors say FILE:LINE: key.path."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping

import yaml

from runtime.errors import TestbedError

__all__ = ["Key", "Ctx", "dotted", "parse", "kind", "suggest", "mapping", "text", "flag", "integer", "number",
           "member", "freeze", "overlay"]

Key = tuple[str | int, ...]


@dataclass(frozen=True)
class Ctx:
    """Where values came from, so every error names the file, line and key path."""

    source: str
    folder: Path                        # relative paths in the file resolve against this
    lines: Mapping[Key, int]
    error: type[TestbedError]

    def fail(self, path: Key, message: str) -> TestbedError:
        # A missing key has no line of its own: point at the nearest enclosing key that has one.
        line = next((self.lines[path[:n]] for n in range(len(path), -1, -1) if path[:n] in self.lines), 1)
        where = f"{self.source}:{line}"
        return self.error(f"{where}: {dotted(path)}: {message}" if path else f"{where}: {message}")

    def file(self, value: Any, path: Key, what: str) -> Path:
        """An existing file named by `value`, relative to `folder` unless absolute."""
        found = (self.folder / Path(text(self, value, path)).expanduser()).resolve()
        if not found.is_file():
            raise self.fail(path, f"{what} {found} does not exist")
        return found


def dotted(path: Key) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def parse(text_: str, source: str, error: type[TestbedError]) -> tuple[Any, dict[Key, int]]:
    """The document as plain data and a key path -> line table; an empty document is an error."""
    try:
        loader = yaml.SafeLoader(text_)
        try:
            node = loader.get_single_node()
            if node is None:
                raise error(f"{source}:1: the file is empty")
            lines: dict[Key, int] = {(): node.start_mark.line + 1}
            _index(node, (), lines, (source, error))
            return loader.construct_document(node), lines
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}" if mark else source
        raise error(f"{where}: invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise error(f"{source}: invalid YAML: {exc}") from None


def _index(node: yaml.Node, path: Key, lines: dict[Key, int], where: tuple[str, type[TestbedError]],
           above: frozenset[int] = frozenset(), done: set[int] | None = None) -> None:
    """Record the line of every key and list item; PyYAML would silently keep the last of duplicate keys.

    An aliased node is walked once (its later uses keep the alias's line), so nested aliases cannot
    blow up; one that contains itself is an error."""
    source, error = where
    if id(node) in above:
        raise error(f"{source}:{node.start_mark.line + 1}: {dotted(path)}: an alias contains itself "
                    f"(a recursive alias)")
    done = set() if done is None else done
    if id(node) in done:
        return
    done.add(id(node))
    above = above | {id(node)}
    if isinstance(node, yaml.MappingNode):
        for key_node, value in node.value:
            sub = path + (str(key_node.value),)
            if sub in lines:
                raise error(f"{source}:{key_node.start_mark.line + 1}: {dotted(sub)}: duplicate key")
            lines[sub] = key_node.start_mark.line + 1
            _index(value, sub, lines, where, above, done)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[path + (i,)] = item.start_mark.line + 1
            _index(item, path + (i,), lines, where, above, done)


# ---- value checks: each takes (ctx, value, path) and returns the checked value


def kind(value: Any) -> str:
    """How a value reads in an error message."""
    if value is None:
        return "nothing"
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
             dict: "a mapping"}
    if value == []:
        return "an empty list"
    return names.get(type(value), type(value).__name__)


def suggest(word: str, choices: Iterable[Any]) -> str:
    close = difflib.get_close_matches(word, [str(c) for c in choices], n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def mapping(ctx: Ctx, value: Any, path: Key, known: Iterable[str] | None = None) -> dict[str, Any]:
    """A mapping with string keys, all of them in `known` when given."""
    if not isinstance(value, dict):
        raise ctx.fail(path, f"expected a mapping, got {kind(value)}")
    allowed = None if known is None else tuple(known)
    for key in value:
        if not isinstance(key, str):
            raise ctx.fail(path + (str(key),), f"keys must be strings, got {kind(key)}")
        if allowed is not None and key not in allowed:
            raise ctx.fail(path + (key,), f"unknown key{suggest(key, allowed)}")
    return value


def text(ctx: Ctx, value: Any, path: Key) -> str:
    if not isinstance(value, str) or not value:
        raise ctx.fail(path, f"expected a non-empty string, got {kind(value)}")
    return value


def flag(ctx: Ctx, value: Any, path: Key) -> bool:
    if not isinstance(value, bool):
        raise ctx.fail(path, f"expected true or false, got {kind(value)}")
    return value


def integer(ctx: Ctx, value: Any, path: Key, least: int | None = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ctx.fail(path, f"expected an integer, got {kind(value)}")
    if least is not None and value < least:
        raise ctx.fail(path, "must be a positive integer" if least == 1 else f"must be at least {least}")
    return value


def number(ctx: Ctx, value: Any, path: Key) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ctx.fail(path, f"expected a number, got {kind(value)}")
    return float(value)


def member(ctx: Ctx, value: Any, path: Key, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        shown = f"'{value}'" if isinstance(value, str) else kind(value)
        hint = suggest(value, allowed) if isinstance(value, str) else ""
        raise ctx.fail(path, f"{shown} is not one of {', '.join(allowed)}{hint}")
    return value


def freeze(value: Any) -> Any:
    """A read-only deep copy: mappings become MappingProxyType, lists tuples."""
    if isinstance(value, dict):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value


def overlay(ctx: Ctx, doc: dict[str, Any], lines: dict[Key, int], target: tuple[str, ...], entry: Key,
            value: Any) -> None:
    """Set `value`, written at key path `entry`, at key path `target` of `doc`, creating mappings on the way;
    its lines move along, so errors in it point where it was written."""
    for n, part in enumerate(target[:-1]):
        doc = doc.setdefault(part, {})
        if not isinstance(doc, dict):
            raise ctx.fail(entry, f"cannot set {'.'.join(target)}: {'.'.join(target[:n + 1])} is not a mapping")
    doc[target[-1]] = value
    for key in [k for k in lines if k[:len(target)] == target]:
        del lines[key]
    for key in [k for k in lines if k[:len(entry)] == entry]:
        lines[target + key[len(entry):]] = lines[key]
