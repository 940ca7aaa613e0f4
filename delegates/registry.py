"""Delegate providers: TFLite benchmark/registrar flags or scenario names -> delegates, plus external
delegates loaded from "package.module:factory" and installed plugins (entry points of the group
`delegate_testbed.delegates`)."""

from __future__ import annotations

import contextlib
import enum
import importlib
import inspect
import os
import sys
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

from delegates import guard
from delegates.api import Delegate, DelegateError, DelegateOptions
from delegates.coreml import CoreMlDelegate, CoreMlDevices, CoreMlOptions
from delegates.gpu import GpuBackend, GpuDelegate, GpuOptions, InferencePreference, Priority
from delegates.hexagon import HexagonDelegate, HexagonOptions
from delegates.kinds import EXTERNAL, DelegateKind
from delegates.nnapi import ExecutionPreference, NnapiDelegate, NnapiOptions

__all__ = ["PROVIDERS", "Provider", "BUILTIN", "CLASSES", "PLUGIN_GROUP", "make_delegate", "parse_flags",
           "load_external", "load_plugin", "plugin_names", "parse_external_options", "check_delegate",
           "flag_table"]

_TRUE, _FALSE = ("true", "1"), ("false", "0")


def _bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise DelegateError(f"{where} must be true or false (1 or 0), not {value!r}")


def _enum(kind: type[enum.Enum], value: Any, where: str) -> enum.Enum:
    if isinstance(value, kind):
        return value
    text = str(value).strip().lower()
    for member in kind:
        if text in (member.name.lower(), str(member.value).lower()):
            return member
    choices = ", ".join(str(m.value) for m in kind)
    raise DelegateError(f"{where} must be one of {choices}, not {value!r}")


def _coerce(hint: Any, value: Any, where: str) -> Any:
    """A scenario value (often a string) as the option's declared type."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if value is None and type(None) in typing.get_args(hint):
        return None
    if typing.get_origin(hint) is tuple:
        items = value.split(",") if isinstance(value, str) else list(value)
        return tuple(_coerce(args[0], item, where) for item in items)
    if args:  # X | None
        return _coerce(args[0], value, where)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum(hint, value, where)
    if hint is bool:
        return _bool(value, where)
    try:
        return hint(value)
    except (TypeError, ValueError):
        raise DelegateError(f"{where} must be {hint.__name__}, not {value!r}") from None


def make_delegate(name: str, profile=None, **options: Any) -> Delegate:
    """A built-in delegate by kind name (delegates.kinds: "gpu", "nnapi", ...) with options by field name."""
    if name not in BUILTIN:
        raise DelegateError(f"unknown delegate '{name}'; known: {', '.join(BUILTIN)}")
    provider = PROVIDERS[DelegateKind(name)]
    cls = provider.options
    hints = typing.get_type_hints(cls)
    aliases = provider.aliases
    values = {}
    for key, value in options.items():
        field = aliases.get(key, key)
        if field not in hints:
            raise DelegateError(f"{name} delegate has no option '{key}'; it takes {', '.join(hints)}")
        values[field] = _coerce(hints[field], value, f"{name} option '{key}'")
    return provider.build(cls(**values), profile)


# -- benchmark flags ---------------------------------------------------------------------------

_FLAGS: dict[str, tuple[type, Any]] = {
    "use_gpu": (bool, False), "gpu_precision_loss_allowed": (bool, True),
    "gpu_experimental_enable_quant": (bool, True), "gpu_backend": (str, ""),
    "gpu_inference_for_sustained_speed": (bool, False),
    "use_nnapi": (bool, False), "nnapi_accelerator_name": (str, ""),
    "nnapi_execution_preference": (str, ""), "disable_nnapi_cpu": (bool, True),
    "nnapi_allow_fp16": (bool, False), "nnapi_use_burst_mode": (bool, False),
    "use_hexagon": (bool, False), "hexagon_profiling": (bool, False), "hexagon_lib_path": (str, ""),
    "use_coreml": (bool, False), "coreml_version": (int, 0),
    "max_delegated_partitions": (int, 0), "min_nodes_per_partition": (int, 0),
    "delegate_serialize_dir": (str, ""), "delegate_serialize_token": (str, ""),
    "external_delegate_path": (str, ""), "external_delegate_options": (str, ""),
}
_CHOICES = {
    "gpu_backend": ("", "cl", "gl"),
    "nnapi_execution_preference": ("", *(p.value for p in ExecutionPreference)),
}

def flag_table() -> tuple[tuple[str, type, Any, tuple[str, ...]], ...]:
    """(name, type, default, allowed values or ()) of every delegate flag parse_flags reads, in table
    order: what `--help` shows of them."""
    return tuple((name, kind, default, _CHOICES.get(name, ())) for name, (kind, default) in _FLAGS.items())


def _value(name: str, text: str) -> Any:
    kind = _FLAGS[name][0]
    where = f"--{name}"
    if kind is bool:
        return _bool(text, where)
    if kind is int:
        try:
            return int(text)
        except ValueError:
            raise DelegateError(f"{where} must be an integer, not {text!r}") from None
    if name in _CHOICES and text not in _CHOICES[name]:
        raise DelegateError(f"{where} must be one of {', '.join(c for c in _CHOICES[name] if c)}, "
                            f"not {text!r}")
    return text


def _scan(argv: Sequence[str]) -> tuple[dict[str, Any], dict[str, int], list[str]]:
    """Known flags (as --flag=value or --flag value; a bare boolean means true) and the rest."""
    values, where, rest = {}, {}, []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, text = arg[2:].partition("=") if arg.startswith("--") else ("", "", "")
        if name not in _FLAGS:
            rest.append(arg)
            i += 1
            continue
        following = argv[i + 1] if i + 1 < len(argv) else None
        if not eq and _FLAGS[name][0] is bool:
            taken = following is not None and following.lower() in (*_TRUE, *_FALSE)
            text = following if taken else "true"
            i += taken
        elif not eq:
            if following is None or following.startswith("--"):
                raise DelegateError(f"--{name} needs a value")
            text = following
            i += 1
        values[name], where[name] = _value(name, text), i
        i += 1
    return values, where, rest


def parse_flags(argv: Sequence[str], profile=None) -> tuple[list[Delegate], list[str]]:
    """Delegates from TFLite's flags, created in the order their --use_* flags appear; the argv
    this does not know is returned for the caller's own parser."""
    given, where, rest = _scan(argv)
    flags = {name: given.get(name, default) for name, (_, default) in _FLAGS.items()}
    if flags["coreml_version"] not in (0, 2, 3):
        raise DelegateError(f"--coreml_version must be 2 or 3 (0: the newest), not {flags['coreml_version']}")
    wanted = sorted((where[f], kind) for f, kind in _SWITCHES.items() if f in given and flags[f])
    return [_FROM_FLAGS[kind](flags, profile) for _, kind in wanted], rest


def _gpu(flags: Mapping[str, Any], profile) -> Delegate:
    fp16 = flags["gpu_precision_loss_allowed"]
    priorities = (Priority.MIN_LATENCY, Priority.MIN_MEMORY_USAGE, Priority.MAX_PRECISION) if fp16 else ()
    return GpuDelegate(GpuOptions(
        is_precision_loss_allowed=fp16, priorities=priorities,
        enable_quant=flags["gpu_experimental_enable_quant"],
        inference_preference=(InferencePreference.SUSTAINED_SPEED
                              if flags["gpu_inference_for_sustained_speed"]
                              else InferencePreference.FAST_SINGLE_ANSWER),
        backend=GpuBackend.OPENGL if flags["gpu_backend"] == "gl" else GpuBackend.OPENCL,
        max_delegated_partitions=flags["max_delegated_partitions"],
        serialization_dir=flags["delegate_serialize_dir"] or None,
        model_token=flags["delegate_serialize_token"] or None))


def _nnapi(flags: Mapping[str, Any], profile) -> Delegate:
    preference = flags["nnapi_execution_preference"] or "undefined"
    return NnapiDelegate(NnapiOptions(
        accelerator_name=flags["nnapi_accelerator_name"] or None,
        execution_preference=ExecutionPreference(preference),
        allow_fp16=flags["nnapi_allow_fp16"], disallow_nnapi_cpu=flags["disable_nnapi_cpu"],
        # the provider passes the flag on whenever >= 0, so its default 0 means "no limit"
        max_number_delegated_partitions=flags["max_delegated_partitions"],
        cache_dir=flags["delegate_serialize_dir"] or None,
        model_token=flags["delegate_serialize_token"] or None,
        use_burst_computation=flags["nnapi_use_burst_mode"]), profile)


def _hexagon(flags: Mapping[str, Any], profile) -> Delegate:
    return HexagonDelegate(HexagonOptions(
        print_graph_profile=flags["hexagon_profiling"],
        max_delegated_partitions=flags["max_delegated_partitions"],
        min_nodes_per_partition=flags["min_nodes_per_partition"]), profile)


def _coreml(flags: Mapping[str, Any], profile) -> Delegate:
    # the benchmark provider always asks for all devices
    return CoreMlDelegate(CoreMlOptions(
        enabled_devices=CoreMlDevices.ALL, coreml_version=flags["coreml_version"],
        max_delegated_partitions=flags["max_delegated_partitions"],
        min_nodes_per_partition=flags["min_nodes_per_partition"]), profile)


def _external(flags: Mapping[str, Any], profile) -> Delegate:
    options = parse_external_options(flags["external_delegate_options"])
    return load_external(flags["external_delegate_path"], options)


@dataclass(frozen=True)
class Provider:
    """How one kind of built-in delegate is made: from its options by field name (scenarios,
    make_delegate), or from TFLite's benchmark flags."""

    delegate: type[Delegate]
    options: type                                            # its options dataclass
    build: Callable[[Any, Any], Delegate]                    # (options, profile) -> delegate
    from_flags: Callable[[Mapping[str, Any], Any], Delegate]  # (flags, profile) -> delegate
    aliases: Mapping[str, str] = field(default_factory=dict)  # other option names scenario files may use


# The one table of built-in delegates, one row per DelegateKind, in its order.
PROVIDERS: dict[DelegateKind, Provider] = {
    DelegateKind.GPU: Provider(GpuDelegate, GpuOptions, lambda options, profile: GpuDelegate(options), _gpu,
                               {"precision_loss_allowed": "is_precision_loss_allowed"}),
    # scenario files may use the partition knob's common name for NNAPI too
    DelegateKind.NNAPI: Provider(NnapiDelegate, NnapiOptions, NnapiDelegate, _nnapi,
                                 {"max_delegated_partitions": "max_number_delegated_partitions"}),
    DelegateKind.HEXAGON: Provider(HexagonDelegate, HexagonOptions, HexagonDelegate, _hexagon),
    DelegateKind.COREML: Provider(CoreMlDelegate, CoreMlOptions, CoreMlDelegate, _coreml),
}
# The same table by kind name, for callers holding names: name -> (options class, constructor).
BUILTIN: dict[str, tuple[type, Callable[[Any, Any], Delegate]]] = {
    kind.value: (p.options, p.build) for kind, p in PROVIDERS.items()}
CLASSES: dict[str, type[Delegate]] = {kind.value: p.delegate for kind, p in PROVIDERS.items()}
# --use_gpu and the like, and an external delegate's path, turn a delegate on.
_SWITCHES = {**{kind.flag: kind.value for kind in PROVIDERS}, "external_delegate_path": EXTERNAL}
_FROM_FLAGS = {**{kind.value: p.from_flags for kind, p in PROVIDERS.items()}, EXTERNAL: _external}

# -- external delegates ------------------------------------------------------------------------


def parse_external_options(text: str) -> dict[str, str]:
    """'key1:value1;key2:value2' as the external delegate provider reads it."""
    options = {}
    for item in filter(None, (part.strip() for part in text.split(";"))):
        key, colon, value = item.partition(":")
        if not colon or not key:
            raise DelegateError(f"--external_delegate_options: '{item}' is not key:value")
        options[key.strip()] = value.strip()
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
        typed[key] = value if kind is None else (_bool(value, option) if kind is bool
                                                 else _coerce(kind, value, option))
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
    strings, `options` a DelegateOptions of integers."""
    where = where or f"delegate {type(delegate).__name__}"
    try:
        name, unit, options = delegate.name, delegate.unit, delegate.options
    except Exception as exc:
        raise DelegateError(f"{where}: reading its name, unit and options failed: {type(exc).__name__}: "
                            f"{exc}") from None
    for attr, value in (("name", name), ("unit", unit)):
        if not isinstance(value, str) or not value:
            raise DelegateError(f"{where}: its {attr} must be a non-empty string, not {type(value).__name__} "
                                f"{value!r:.40}")
    if not isinstance(options, DelegateOptions):
        raise DelegateError(f"{where}: its options must be a delegates.api.DelegateOptions, not "
                            f"{type(options).__name__}")
    for attr in ("max_delegated_partitions", "min_nodes_per_partition"):
        value = getattr(options, attr)
        if isinstance(value, bool) or not isinstance(value, int):
            raise DelegateError(f"{where}: options.{attr} must be an integer, not {type(value).__name__}")
