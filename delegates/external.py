"""External delegates: factories named "package.module:factory" and installed plugins (entry points)."""

from __future__ import annotations

import contextlib
import enum
import importlib
import inspect
import math
import os
import re
import sys
import typing
from typing import Any, Callable, Iterator, Mapping

from delegates import guard
from delegates.api import Delegate, DelegateError, DelegateOptions

__all__ = ["CodedEnum", "PLUGIN_GROUP", "load_external", "load_plugin", "plugin_names", "parse_external_options",
           "declares_delegate", "check_delegate"]

# Option values as text (flags, scenario files, "key:value" options) read as their declared types; kept
# here, below delegates.registry, which reads its benchmark flags with them too.
TRUE, FALSE = ("true", "1"), ("false", "0")


def parse_bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE or text in FALSE:
        return text in TRUE
    raise DelegateError(f"{where} must be true or false (1 or 0), not {value!r}")


class CodedEnum(enum.Enum):
    """An option whose C API numbers its values (0, 1, ... in declaration order) while its docs name
    them: either is accepted, as the number is what the delegate's key:value options take."""

    @property
    def code(self) -> int:
        return list(type(self)).index(self)

    @classmethod
    def _missing_(cls, value: Any):
        text = str(value).strip()
        return next((m for m in cls if str(m.code) == text), None)


def _enum(kind: type[enum.Enum], value: Any, where: str) -> enum.Enum:
    if isinstance(value, kind):
        return value
    text = str(value).strip().lower()
    for member in kind:
        if text in (member.name.lower(), str(member.value).lower()):
            return member
    if issubclass(kind, CodedEnum) and not isinstance(value, bool):
        found = kind._missing_(text)
        if found is not None:
            return found
    choices = ", ".join(f"{m.value} ({m.code})" if isinstance(m, CodedEnum) else str(m.value) for m in kind)
    raise DelegateError(f"{where} must be one of {choices}, not {_shown(value)}")


# Numbers as C's strtol / strtod read them: ASCII digits, an optional sign, point and exponent; not
# Python's own spellings (1_000, non-ASCII digits), which the delegate libraries would not read.
_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_FLOAT_TEXT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def _shown(value: Any) -> str:
    """A value as a message shows it: a scenario's mapping as the dict it was written as."""
    return repr(dict(value)) if isinstance(value, Mapping) else repr(value)


def parse_int(value: Any, where: str) -> int:
    """An integer option: an int, or its digits as text. A bool, a fraction or any float (which int()
    would truncate: 8.7 -> 8, true -> 1) is refused, as is infinity or NaN."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = value.strip() if isinstance(value, str) else None
    if text is None or not _INT_TEXT.fullmatch(text):
        raise DelegateError(f"{where} must be int, not {_shown(value)}")
    try:
        return int(text)
    except ValueError:  # more digits than Python converts
        raise DelegateError(f"{where} must be int, not {len(text)} digits") from None


def parse_float(value: Any, where: str) -> float:
    """A finite number option: an int, a float or its text; NaN, infinities and numbers beyond a
    float's range are refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise DelegateError(f"{where} must be float, not {_shown(value)}")
    text = value.strip() if isinstance(value, str) else None
    if text is not None and not _FLOAT_TEXT.fullmatch(text):
        raise DelegateError(f"{where} must be float, not {value!r}")
    try:
        number = float(value if text is None else text)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise DelegateError(f"{where} must be a finite float, not {value!r:.40}")
    return number


def parse_text(value: Any, where: str) -> str:
    """A text option: a string, or a number (a token of digits written as one); not null, a bool, a
    list or a mapping, whose Python spelling would become the option's text."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise DelegateError(f"{where} must be text, not {_shown(value)}")
    return str(value)


def coerce(hint: Any, value: Any, where: str) -> Any:
    """A scenario value (often a string) as the option's declared type."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if value is None and type(None) in typing.get_args(hint):
        return None
    if typing.get_origin(hint) is tuple:
        if not isinstance(value, (str, list, tuple)):
            raise DelegateError(f"{where} must be a list (or text of comma-separated items), not {_shown(value)}")
        items = value.split(",") if isinstance(value, str) else list(value)
        return tuple(coerce(args[0], item, where) for item in items)
    if args:  # X | None
        return coerce(args[0], value, where)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum(hint, value, where)
    if hint is bool:
        return parse_bool(value, where)
    if hint in _PARSERS:
        return _PARSERS[hint](value, where)
    try:
        return hint(value)
    except (TypeError, ValueError, OverflowError):
        raise DelegateError(f"{where} must be {hint.__name__}, not {_shown(value)}") from None


_PARSERS: dict[type, Callable[[Any, str], Any]] = {int: parse_int, float: parse_float, str: parse_text}


def parse_external_options(text: str) -> dict[str, str]:
    """'key1:value1;key2:value2' as the external delegate provider reads it."""
    options = {}
    for item in filter(None, (part.strip() for part in text.split(";"))):
        key, colon, value = item.partition(":")
        key = key.strip()
        if not colon or not key:
            raise DelegateError(f"--external_delegate_options: '{item}' is not key:value")
        if key in options:   # the delegate would read one of the two values and drop the other
            raise DelegateError(f"--external_delegate_options: '{key}' is given twice ({options[key]!r} and "
                                f"{value.strip()!r}); give it once")
        options[key] = value.strip()
    return options


PLUGIN_GROUP = "delegate_testbed.delegates"


def _plugins() -> dict[str, Any]:
    """Installed plugins by name: entry points of PLUGIN_GROUP (listing them imports nothing)."""
    from importlib.metadata import entry_points

    try:
        found = entry_points(group=PLUGIN_GROUP)
    except Exception:  # a broken installed distribution must not break the testbed
        return {}
    return {ep.name: ep for ep in found}


def plugin_names() -> tuple[str, ...]:
    """Names of the installed delegate plugins."""
    return tuple(sorted(_plugins()))


def load_plugin(name: str, options: Mapping[str, str] | None = None) -> Delegate:
    """An installed plugin's factory (an entry point of PLUGIN_GROUP, as `pkg.mod:factory`), called
    with `options` like an external delegate's."""
    plugins = _plugins()
    if name not in plugins:
        shown = ", ".join(sorted(plugins)) or "none is installed"
        raise DelegateError(f"no delegate plugin '{name}' (entry points of group {PLUGIN_GROUP}: {shown})")
    where = f"delegate plugin '{name}' ({plugins[name].value})"
    try:
        factory = guard.call(f"{where}: loading", plugins[name].load)
    except DelegateError:
        raise
    except Exception as exc:
        raise DelegateError(f"{where}: cannot load: {type(exc).__name__}: {exc}") from None
    if not callable(factory):
        raise DelegateError(f"{where} is not callable")
    return _make(factory, options or {}, where)


@contextlib.contextmanager
def _current_folder_importable() -> Iterator[None]:
    """The current folder first on sys.path while a factory's module is imported, as `python -m`
    has it: the `dtb` console script's path starts at its own bin folder, so `mypkg.mine:make`
    beside the user would not be found. Taken off again after, so nothing else is shadowed."""
    try:
        cwd = os.getcwd()
    except OSError:  # the current folder was removed
        yield
        return
    added = cwd not in sys.path and "" not in sys.path
    if added:
        sys.path.insert(0, cwd)
        importlib.invalidate_caches()
    try:
        yield
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)


def _factory(path: str) -> Callable[..., Any]:
    module_name, colon, attr = path.partition(":")
    if not colon or not module_name or not attr:
        raise DelegateError(f"external delegate '{path}' must be given as package.module:factory"
                            f" (or the name of an installed delegate plugin)")
    try:
        with _current_folder_importable():
            module = guard.call(f"external delegate '{path}': importing {module_name}", importlib.import_module,
                                module_name)
    except DelegateError:
        raise
    except Exception as exc:  # ImportError, or whatever the module's own code raised
        raise DelegateError(f"external delegate '{path}': cannot import {module_name}: "
                            f"{type(exc).__name__}: {exc}") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise DelegateError(f"external delegate '{path}': {module_name} has no callable '{attr}'")
    return factory


def _typed_options(factory: Callable[..., Any], options: Mapping[str, str], where: str) -> dict[str, Any]:
    """String values converted where the factory annotates a parameter int, float or bool."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # no signature to read (some builtins): pass the options as they are
        return dict(options)
    try:
        hints = typing.get_type_hints(factory)
    except Exception:  # unresolvable annotations: fall back to their text
        hints = {n: p.annotation for n, p in params.items()}
    open_ended = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    converters = {int: int, float: float, bool: bool, "int": int, "float": float, "bool": bool}
    typed = {}
    for key, value in options.items():
        if key not in params and not open_ended:
            raise DelegateError(f"{where} takes no option '{key}'")
        kind = converters.get(hints.get(key))
        option = f"{where} option '{key}'"
        typed[key] = value if kind is None else (parse_bool(value, option) if kind is bool
                                                 else coerce(kind, value, option))
    return typed


def declares_delegate(factory: Callable[..., Any]) -> bool:
    """Whether `factory` says, before it is called, that it makes a Delegate: it is a Delegate
    subclass, or its return annotation is one."""
    if isinstance(factory, type):
        return issubclass(factory, Delegate)
    try:
        returns = typing.get_type_hints(factory).get("return")
    except Exception:
        return False
    return isinstance(returns, type) and issubclass(returns, Delegate)


def load_external(path: str, options: Mapping[str, str] | None = None, declared: bool = False) -> Delegate:
    """Import the module only now, call factory(**options), and insist on a Delegate back before
    anything else of it is used. A name without ':' is an installed plugin's (load_plugin).

    `declared` (a factory named by a scenario file, allowed with --allow-external-delegates): the
    factory must also declare that it makes a Delegate (declares_delegate) or it is not called at
    all, so a scenario naming `os:system` runs nothing even when external delegates are allowed."""
    if ":" not in path and path in _plugins():
        return load_plugin(path, options)
    factory = _factory(path)
    if declared and not declares_delegate(factory):
        raise DelegateError(f"external delegate '{path}' does not declare that it makes a Delegate, so it is "
                            f"not called: a factory named by a scenario must be a Delegate subclass or be "
                            f"annotated '-> Delegate'")
    return _make(factory, options or {}, f"external delegate '{path}'")


def _make(factory: Callable[..., Any], options: Mapping[str, str], where: str) -> Delegate:
    kwargs = _typed_options(factory, options, where)
    try:
        delegate = guard.call(f"{where}: its factory", lambda: factory(**kwargs))
    except DelegateError:
        raise
    except Exception as exc:
        raise DelegateError(f"{where} failed to initialise: {exc}") from exc
    if not isinstance(delegate, Delegate):
        raise DelegateError(f"{where} returned {type(delegate).__name__}, not a Delegate")
    check_delegate(delegate, where)
    return delegate


def check_delegate(delegate: Delegate, where: str = "") -> None:
    """DelegateError unless the attributes the framework reads are sound: `name` and `unit` non-empty
    strings, `options` a DelegateOptions of integers, `platform_refusal` None or a str."""
    where = where or f"delegate {type(delegate).__name__}"
    try:
        name, unit, options, refusal = delegate.name, delegate.unit, delegate.options, delegate.platform_refusal
    except Exception as exc:
        raise DelegateError(f"{where}: reading its name, unit, options and platform_refusal failed: {type(exc).__name__}: "
                            f"{exc}") from None
    for attr, value in (("name", name), ("unit", unit)):
        if not isinstance(value, str) or not value:
            raise DelegateError(f"{where}: its {attr} must be a non-empty string, not {type(value).__name__} "
                                f"{value!r:.40}")
    if refusal is not None and not isinstance(refusal, str):
        raise DelegateError(f"{where}: its platform_refusal must be None or a str, not {type(refusal).__name__} "
                            f"{refusal!r:.40}")
    if not isinstance(options, DelegateOptions):
        raise DelegateError(f"{where}: its options must be a delegates.api.DelegateOptions, not "
                            f"{type(options).__name__}")
    for attr in ("max_delegated_partitions", "min_nodes_per_partition"):
        value = getattr(options, attr)
        if isinstance(value, bool) or not isinstance(value, int):
            raise DelegateError(f"{where}: options.{attr} must be an integer, not {type(value).__name__}")
