"""Checked YAML: plain data plus the line of every key path, and value checks whose errors say FILE:LINE: key.path."""

from __future__ import annotations

import difflib
import math
import reprlib
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping

import yaml

from runtime.ir.errors import TestbedError
from runtime.ir.files import special_kind

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
        return self.error(f"{self.where(path)}: {message}")

    def where(self, path: Key) -> str:
        """FILE:LINE: key.path, the start of every message about `path`."""
        # A missing key has no line of its own: point at the nearest enclosing key that has one.
        line = next((self.lines[path[:n]] for n in range(len(path), -1, -1) if path[:n] in self.lines), 1)
        return f"{self.source}:{line}: {dotted(path)}" if path else f"{self.source}:{line}"

    def file(self, value: Any, path: Key, what: str) -> Path:
        """An existing file named by `value`, relative to `folder` unless absolute."""
        name = text(self, value, path)
        try:
            found = (self.folder / Path(name).expanduser()).resolve()
            exists = found.is_file()
        except (OSError, ValueError, RuntimeError) as exc:  # a NUL, a name too long, ~nobody/...
            raise self.fail(path, f"{what} {reprlib.repr(name)} cannot be used as a path: "
                                  f"{getattr(exc, 'strerror', None) or exc}") from None
        if not exists:
            kind = special_kind(found)
            raise self.fail(path, f"{what} {found} is {kind}, not a regular file" if kind else
                                  f"{what} {found} does not exist")
        return found


def dotted(path: Key) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# What a hand-written scenario or profile never needs, and what keeps a hostile one from costing
# much: nesting depth (PyYAML composes recursively), values after alias expansion (an alias bomb
# is tiny on disk and astronomically large once expanded), and the text itself.
MAX_DEPTH = 64
MAX_VALUES = 10_000
MAX_CHARS = 1_000_000
# A file of MAX_CHARS characters holds at most this many bytes (4 a character in UTF-8): readers stop
# there, since the length check above comes after the read (a 3 GB file would be read whole first).
MAX_BYTES = 4 * MAX_CHARS


class _Refused(Exception):
    """Raised inside the loader; `parse` turns it into the caller's error with the file and line."""

    def __init__(self, line: int, message: str):
        super().__init__(message)
        self.line, self.message = line, message


class _Checks:
    """What both loaders add to PyYAML's: bounds on nesting depth and expanded size while composing
    (before anything is built), and a value its tag cannot take (`!!float abc`) reported at its line."""

    def _start_checks(self) -> None:
        self._depth = 0
        self._sizes: dict[int, int] = {}     # id(node) -> values it stands for once aliases are expanded
        self._keep: list[yaml.Node] = []     # keeps those ids valid

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise _Refused(mark.line + 1, f"nested more than {MAX_DEPTH} levels deep")
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        self._measure(node)
        return node

    def _measure(self, node: yaml.Node) -> None:
        if id(node) in self._sizes:     # an alias (or a node still being composed: a recursive
            return                      # alias, which the line index reports with its key path)
        size = 1
        if isinstance(node, yaml.MappingNode):
            size += sum(self._sizes.get(id(k), 1) + self._sizes.get(id(v), 1) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            size += sum(self._sizes.get(id(item), 1) for item in node.value)
        if size > MAX_VALUES:
            raise _Refused(node.start_mark.line + 1,
                           f"holds more than {MAX_VALUES} values, counting each alias as the value it "
                           f"repeats (an alias bomb?); refused without expanding it")
        self._sizes[id(node)] = size
        self._keep.append(node)

    def construct_scalar(self, node):
        value = super().construct_scalar(node)
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:  # "\ud800" in a double-quoted scalar: not text any file can hold
                raise _Refused(node.start_mark.line + 1, f"{reprlib.repr(value)} holds a lone surrogate "
                                                         f"character, which is not text") from None
        return value

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep)
        except (yaml.YAMLError, _Refused):
            raise
        except Exception as exc:  # PyYAML's own constructors raise ValueError and others for a bad scalar
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")
            shown = reprlib.repr(node.value) if isinstance(node, yaml.ScalarNode) else "this value"
            detail = f" ({_one_line(str(exc))})" if isinstance(exc, ValueError) and str(exc) else ""
            raise _Refused(node.start_mark.line + 1, f"{shown} is not a valid {tag} value{detail}") from None


class _Loader(_Checks, yaml.SafeLoader):
    """PyYAML's pure-Python SafeLoader with the checks: it reads every document, and names what is wrong."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._start_checks()


# libyaml's scanner and parser (C) hand events to PyYAML's own composer, constructor and resolver,
# so the checks above run as they do in _Loader and the data is the same; reading a shipped
# profile takes a quarter of the time (the pure-Python scanner reads one character at a time).
# Whatever libyaml refuses is read again by _Loader, whose messages the checks and tests know.
if getattr(yaml, "__with_libyaml__", False):
    class _FastLoader(_Checks, yaml.composer.Composer, yaml.cyaml.CParser, yaml.constructor.SafeConstructor,
                      yaml.resolver.Resolver):
        def __init__(self, stream: str):
            yaml.cyaml.CParser.__init__(self, stream)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)
            yaml.composer.Composer.__init__(self)
            self._start_checks()

    _LOADERS: tuple[type, ...] = (_FastLoader, _Loader)
else:  # pragma: no cover - PyYAML built without libyaml
    _LOADERS = (_Loader,)


def parse(text_: str, source: str, error: type[TestbedError]) -> tuple[Any, dict[Key, int]]:
    """The document as plain data and a key path -> line table; an empty document is an error.

    Anything wrong is one `error` reading SOURCE:LINE: what is wrong, never a PyYAML exception:
    invalid YAML, a bad tagged value, nesting deeper than MAX_DEPTH, more than MAX_VALUES values
    once aliases are expanded (the check counts, it never expands), text over MAX_CHARS."""
    if len(text_) > MAX_CHARS:
        raise error(f"{source}:1: the file is {len(text_):,} characters long; the limit is {MAX_CHARS:,}")
    if len(_LOADERS) > 1:
        try:
            return _read(_LOADERS[0], text_, source, error)
        except Exception:  # noqa: BLE001 - any refusal: the Python loader below reads it and names the fault
            pass
    try:
        return _read(_Loader, text_, source, error)
    except _Refused as exc:
        raise error(f"{source}:{exc.line}: {exc.message}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}" if mark else source
        what = " ".join(filter(None, (exc.context, exc.problem))) or "cannot be parsed"
        raise error(f"{where}: invalid YAML: {_one_line(what)}") from None
    except yaml.reader.ReaderError as exc:
        line = text_.count("\n", 0, max(0, exc.position)) + 1
        char = exc.character if isinstance(exc.character, int) else ord(exc.character[:1] or "\0")
        raise error(f"{source}:{line}: invalid YAML: character #x{char:04x}: {exc.reason}") from None
    except yaml.YAMLError as exc:
        raise error(f"{source}: invalid YAML: {_one_line(str(exc))}") from None
    except RecursionError:  # the depth bound makes this unreachable; kept so no traceback escapes
        raise error(f"{source}: nested too deeply to read") from None


def _read(loader_class: type, text_: str, source: str, error: type[TestbedError]) -> tuple[Any, dict[Key, int]]:
    loader = loader_class(text_)
    try:
        node = loader.get_single_node()
        if node is None:
            raise error(f"{source}:1: the file is empty")
        lines: dict[Key, int] = {(): node.start_mark.line + 1}
        _index(node, (), lines, (source, error))
        return loader.construct_document(node), lines
    finally:
        loader.dispose()


def _one_line(text_: str) -> str:
    return " ".join(str(text_).split())


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


def integer(ctx: Ctx, value: Any, path: Key, least: int | None = 1, most: int | None = None,
            why: str = "") -> int:
    """An integer in [least, most]; `why` says what the upper bound protects."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ctx.fail(path, f"expected an integer, got {kind(value)}")
    if least is not None and value < least:
        raise ctx.fail(path, "must be a positive integer" if least == 1 else f"must be at least {least}")
    if most is not None and value > most:
        raise ctx.fail(path, f"must be at most {most:,}{why}, got {_big(value)}")
    return value


def number(ctx: Ctx, value: Any, path: Key, least: float | None = None, most: float | None = None) -> float:
    """A finite number (NaN and infinities are refused, as are integers beyond a float's range)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ctx.fail(path, f"expected a number, got {kind(value)}")
    if isinstance(value, int) and abs(value) > 1e308 or not math.isfinite(value):
        raise ctx.fail(path, f"must be a finite number, got {_big(value)}")
    if least is not None and value < least or most is not None and value > most:
        low = "" if least is None else f"{least:g}"
        high = "" if most is None else f"{most:g}"
        bound = f"in [{low}, {high}]" if low and high else f"at least {low}" if low else f"at most {high}"
        raise ctx.fail(path, f"must be {bound}, got {_big(value)}")
    return float(value)


def _big(value: Any) -> str:
    """A number as an error message shows it: a huge integer by its size, not its 4,000 digits."""
    if isinstance(value, int) and abs(value) >= 10 ** 15:
        return f"an integer of {len(str(abs(value)))} digits" if abs(value) < 10 ** 4000 else "a huge integer"
    return f"{value:g}" if isinstance(value, float) else str(value)


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
