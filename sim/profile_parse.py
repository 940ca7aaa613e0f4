"""The checks profile YAML is read with: typed values in human units, key schemas, FILE:LINE: key.path errors."""

from __future__ import annotations

import enum
import functools
import reprlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from runtime.ir.errors import ProfileError
from runtime.ir.yamlcheck import Key, dotted

Check = Callable[["ProfileCtx", Any, Key], Any]


@dataclass(frozen=True)
class ProfileCtx:
    """Where values came from, so every error can name the file, line and key path."""

    source: str
    lines: Mapping[Key, int]
    # Sections already parsed, by the identity of their raw mapping: (raw, path, value). A caller
    # that builds many profiles from data differing in a few numbers, copying only what it changes
    # (a calibration), shares one; a section whose mapping is the same object is not parsed again.
    memo: dict[int, tuple[Any, Key, Any]] | None = None

    def remembered(self, raw: Any, path: Key, parse: Callable[[], Any]) -> Any:
        """parse(), or what it gave for this very mapping at this path before (with a memo)."""
        if self.memo is None:
            return parse()
        hit = self.memo.get(id(raw))
        if hit is not None and hit[0] is raw and hit[1] == path:
            return hit[2]
        value = parse()
        self.memo[id(raw)] = (raw, path, value)   # raw is kept, so its id is not reused
        return value

    def fail(self, path: Key, message: str) -> ProfileError:
        # A missing key has no line of its own: point at the nearest enclosing key that has one.
        line = next((self.lines[path[:n]] for n in range(len(path), -1, -1) if path[:n] in self.lines), None)
        where = f"{self.source}:{line}" if line else self.source
        return ProfileError(f"{where}: {dotted(path)}: {message}" if path else f"{where}: {message}")


show_value = reprlib.repr   # a bad value may be a huge aliased list: show its start only


def parse_number(ctx: ProfileCtx, value: Any, path: Key, want: str, ok: Callable[[float], bool]) -> float:
    # abs() < 1e300 also rejects inf, nan and ints too large for a float
    good = isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < 1e300
    if not good or not ok(value):
        raise ctx.fail(path, f"must be {want}, got {show_value(value)}")
    return float(value)


# Every figure lies in [LEAST, MOST] in the YAML's units (0 too where 0 is allowed): the simulator
# multiplies and divides figures (work by a rate times an efficiency times a scale, a time by a power), and
# beyond that window a product overflows to inf or vanishes to 0 as a float (1e-320 GB/s made a
# ZeroDivisionError, a 1e293 us dispatch at 1e299 W an infinite energy).
LEAST, MOST = 1e-9, 1e9
# A fixed cost longer than an hour is no phone's (runtime.interpreter.hook_values.MAX_SECONDS refuses it
# from a delegate, without naming the profile key that set it).
MAX_SECONDS = 3600.0
# A factor the profile puts on a unit's rate, power or dispatch (a backend's, a preference's): a delegate
# multiplies two of them in the answer runtime.interpreter.hook_values holds to MAX_SCALE (1e6).
MAX_FACTOR = 1e3


# Dividing by an exact power of ten rounds once, so 2 us becomes 2e-6 exactly as written.
def _converted(want: str, ok: Callable[[float], bool], times: float, per: float, most: float = MOST) -> Check:
    """A number in a human unit, converted to SI, within [LEAST, most] (or 0 where `ok` takes it);
    one outside is refused with the bound it crossed."""
    def check(ctx: ProfileCtx, value: Any, path: Key) -> float:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > most:   # inf too
            raise ctx.fail(path, f"must be {want} of at most {most:g}, got {show_value(value)}")
        number = parse_number(ctx, value, path, want, ok)
        if 0 < number < LEAST:
            zero = " (or 0)" if ok(0) else ""
            raise ctx.fail(path, f"must be {want} of at least {LEAST:g}{zero}, got {show_value(value)}")
        return number * times / per
    return check


def parse_positive(times: float = 1.0, per: float = 1.0) -> Check:
    return _converted("a positive number", lambda x: x > 0, times, per)


def nonneg(times: float = 1.0, per: float = 1.0) -> Check:
    return _converted("a number >= 0", lambda x: x >= 0, times, per)


def parse_scale() -> Check:
    return _converted("a positive number", lambda x: x > 0, 1.0, 1.0, MAX_FACTOR)


def duration(per: float, positive: bool = False) -> Check:
    """A time in a unit of `per` per second (MICRO for us), at most an hour and at most MOST."""
    want, ok = ("a positive number", lambda x: x > 0) if positive else ("a number >= 0", lambda x: x >= 0)
    return _converted(want, ok, 1.0, per, min(MOST, MAX_SECONDS * per))


def parse_fraction(ctx: ProfileCtx, value: Any, path: Key) -> float:
    return _converted("a fraction in (0, 1]", lambda x: 0 < x <= 1, 1.0, 1.0)(ctx, value, path)


def parse_integer(least: int, most: int | None = None) -> Check:
    def check(ctx: ProfileCtx, value: Any, path: Key) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ctx.fail(path, f"must be an integer >= {least}, got {show_value(value)}")
        if most is not None and value > most:
            raise ctx.fail(path, f"must be an integer in [{least}, {most}], got {show_value(value)}")
        return value
    return check


def parse_text(ctx: ProfileCtx, value: Any, path: Key) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ctx.fail(path, f"must be a non-empty string, got {show_value(value)}")
    return value


def flag(ctx: ProfileCtx, value: Any, path: Key) -> bool:
    if value is not True and value is not False:
        raise ctx.fail(path, f"must be true or false, got {show_value(value)}")
    return value


def _member(ctx: ProfileCtx, kind: type[enum.Enum], value: Any, path: Key, what: str) -> Any:
    names = [m.value for m in kind]
    if value not in names:
        raise ctx.fail(path, f"unknown {what} {show_value(value)}; expected one of {', '.join(names)}")
    return kind(value)


def choice(kind: type[enum.Enum], what: str) -> Check:
    return lambda ctx, v, p: _member(ctx, kind, v, p, what)


def parse_mapping(ctx: ProfileCtx, value: Any, path: Key) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ctx.fail(path, f"must be a mapping, got {show_value(value)}")
    for key in value:
        if not isinstance(key, str):
            raise ctx.fail(path + (str(key),), f"keys must be names, got {show_value(key)}")
    return value


def parse_table(kind: type[enum.Enum], what: str, check: Check) -> Check:
    """A mapping keyed by an Enum's values (precisions, op classes), each value checked."""
    def run(ctx: ProfileCtx, value: Any, path: Key) -> dict[Any, Any]:
        table = parse_mapping(ctx, value, path)
        if not table:
            raise ctx.fail(path, f"must name at least one {what}")
        return {_member(ctx, kind, k, path + (k,), what): check(ctx, v, path + (k,))
                for k, v in table.items()}
    return run


@functools.lru_cache(maxsize=None)
def _known_names(kind: type[enum.Enum], by_name: bool) -> dict[str, enum.Enum]:
    return {m.name if by_name else m.value: m for m in kind}


def parse_names(kind: type[enum.Enum], what: str, by_name: bool = False) -> Check:
    """A non-empty list of distinct Enum names (op types) or values (precisions)."""
    def run(ctx: ProfileCtx, value: Any, path: Key) -> frozenset[str] | frozenset[Any]:
        if not isinstance(value, list) or not value:
            raise ctx.fail(path, f"must be a non-empty list of {what} names, got {show_value(value)}")
        known = _known_names(kind, by_name)
        seen: set[str] = set()
        for i, item in enumerate(value):
            if not isinstance(item, str) or item not in known:
                raise ctx.fail(path + (i,), f"unknown {what} {show_value(item)}")
            if item in seen:
                raise ctx.fail(path + (i,), f"{what} {show_value(item)} listed twice")
            seen.add(item)
        return frozenset(value) if by_name else frozenset(known[x] for x in value)
    return run


@dataclass(frozen=True)
class F:
    """One YAML key: the spec field it fills, whether it must be there, and its check."""

    field: str
    required: bool
    check: Check


GIGA, MICRO, MILLI, PICO = 1e9, 1e6, 1e3, 1e12   # "per" divisors for us/ms/pJ, a multiplier for G


def fields(ctx: ProfileCtx, value: Any, path: Key, schema: Mapping[str, F]) -> dict[str, Any]:
    """Check a mapping against a schema: no unknown keys, no missing ones; values by spec field name."""
    table = parse_mapping(ctx, value, path)
    for key in table:
        if key not in schema:
            raise ctx.fail(path + (key,), f"unknown key; expected one of {', '.join(schema)}")
    for key, f in schema.items():
        if f.required and key not in table:
            raise ctx.fail(path + (key,), "required key is missing")
    return {schema[k].field: schema[k].check(ctx, v, path + (k,)) for k, v in table.items()}
