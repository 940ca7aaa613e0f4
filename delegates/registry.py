"""Delegate providers: TFLite benchmark/registrar flags or scenario names -> delegates. External
delegates ("package.module:factory" and installed plugins) are loaded by delegates.external."""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from delegates.api import Delegate, DelegateError, DelegateOptions
from delegates.compile_cache import check_token
from delegates.coreml import CoreMlDelegate, CoreMlDevices, CoreMlOptions
from delegates.external import FALSE, TRUE, parse_bool, coerce, load_external, parse_external_options
from delegates.gpu import GpuBackend, GpuDelegate, GpuOptions, InferencePreference, Priority
from delegates.hexagon import HexagonDelegate, HexagonOptions
from delegates.kinds import EXTERNAL, DelegateKind
from delegates.nnapi import ExecutionPreference, NnapiDelegate, NnapiOptions
from delegates import qnn
from delegates.qnn import QnnDelegate, QnnOptions

__all__ = ["PROVIDERS", "Provider", "BUILTIN", "CLASSES", "make_delegate", "parse_flags", "flag_table", "is_builtin", "default_limits",
           "given_flags", "owner", "unused_flags"]


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
        values[field] = coerce(hints[field], value, f"{name} option '{key}'")
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
    "use_qnn": (bool, False),
    # --qnn_<key> for each of the QNN delegate's external-delegate keys; "" leaves its default (a bare
    # boolean one is true, as the other delegates' boolean flags)
    **{f"qnn_{name}": (bool if hint is bool else str, "") for name, hint in typing.get_type_hints(QnnOptions).items()},
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
        return parse_bool(text, where)
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
            taken = following is not None and following.lower() in (*TRUE, *FALSE)
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
    for name in ("delegate_serialize_token", "qnn_model_token"):   # a file name in the cache folder
        check_token(flags[name], f"--{name}")
    wanted = sorted((_rank(kind, flags), where[f], kind) for f, kind in _SWITCHES.items() if f in given and flags[f])
    return [_FROM_FLAGS[kind](flags, profile) for _, _, kind in wanted], rest


def given_flags(argv: Sequence[str]) -> dict[str, Any]:
    """The delegate flags argv gives, by name, read as parse_flags reads them."""
    return _scan(argv)[0]


def owner(flag: str) -> str:
    """The delegate kind a flag belongs to: the first kind its name names (qnn_gpu_precision is QNN's,
    disable_nnapi_cpu NNAPI's, external_delegate_options the external delegate's); "" for the flags
    several delegates read (max_delegated_partitions, delegate_serialize_dir, ...)."""
    kinds = {*(kind.value for kind in PROVIDERS), EXTERNAL}
    return next((part for part in flag.split("_") if part in kinds), "")


def unused_flags(argv: Sequence[str]) -> list[str]:
    """One line per flag given for a delegate that the flags do not turn on (--qnn_htp_precision
    without --use_qnn, --external_delegate_options without --external_delegate_path): it has no
    effect, as in benchmark_model, but here it says so."""
    given, _, _ = _scan(argv)
    switch = {kind: flag for flag, kind in _SWITCHES.items()}
    on = {kind for flag, kind in _SWITCHES.items() if given.get(flag)}
    return [f"--{name} has no effect: {_off(switch[owner(name)])}"
            for name in given if name not in _SWITCHES and owner(name) and owner(name) not in on]


def _off(switch: str) -> str:
    return "no --external_delegate_path names a delegate" if switch == "external_delegate_path" else \
        f"--{switch} is not on"


def _rank(kind: str, flags: Mapping[str, Any]) -> int:
    """QNN's delegate is applied first, whatever the flags' order, as Qualcomm AI Hub runs TFLite
    models (QNN, then the GPU delegate on what is left, then the CPU); the others in flag order."""
    is_qnn = kind == DelegateKind.QNN.value or (kind == EXTERNAL and qnn.is_qnn_library(flags["external_delegate_path"]))
    return 0 if is_qnn else 1


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


def _qnn(flags: Mapping[str, Any], profile) -> Delegate:
    given = {name: flags[f"qnn_{name}"] for name in typing.get_type_hints(QnnOptions) if flags[f"qnn_{name}"] != ""}
    return QnnDelegate(qnn.options_from_strings(given, lambda key: f"--qnn_{key}"), profile)


def _external(flags: Mapping[str, Any], profile) -> Delegate:
    options = parse_external_options(flags["external_delegate_options"])
    path = flags["external_delegate_path"]
    if qnn.is_qnn_library(path):
        return _qnn_library(path, options, profile)
    return load_external(path, options)


def _qnn_library(path: str, options: Mapping[str, str], profile) -> Delegate:
    """Qualcomm's delegate library named as an external delegate: the built-in QNN delegate, its
    key:value options read as the library reads them (backend_type is mandatory there)."""
    check_token(options.get("model_token"), "--external_delegate_options 'model_token'")
    if "backend_type" not in options:
        raise DelegateError(f"--external_delegate_options: {path} needs backend_type (htp or gpu), which the "
                            f"QNN delegate requires")
    return QnnDelegate(qnn.options_from_strings(options, lambda key: f"--external_delegate_options '{key}'"),
                       profile)


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
    DelegateKind.QNN: Provider(QnnDelegate, QnnOptions, QnnDelegate, _qnn),
}
# The same table by kind name, for callers holding names: name -> (options class, constructor).
BUILTIN: dict[str, tuple[type, Callable[[Any, Any], Delegate]]] = {
    kind.value: (p.options, p.build) for kind, p in PROVIDERS.items()}
CLASSES: dict[str, type[Delegate]] = {kind.value: p.delegate for kind, p in PROVIDERS.items()}
# --use_gpu and the like, and an external delegate's path, turn a delegate on.
_SWITCHES = {**{kind.flag: kind.value for kind in PROVIDERS}, "external_delegate_path": EXTERNAL}
_FROM_FLAGS = {**{kind.value: p.from_flags for kind, p in PROVIDERS.items()}, EXTERNAL: _external}


def is_builtin(delegate: Delegate) -> bool:
    """Whether `delegate` is one of the built-in simulated delegates (its exact class, not a user's subclass):
    their work is charged in simulated time, so no host-time budget watches their calls; any other
    delegate (external, a plugin, a user's Python class) runs the user's code and is watched."""
    return type(delegate) in _BUILTIN_TYPES


_BUILTIN_TYPES = frozenset(CLASSES.values())


def default_limits(kind: str) -> tuple[DelegateOptions, DelegateOptions]:
    """The partition limits a built-in kind gets by default each way in: (a bare --use_<kind> of
    benchmark_model's flags: dtb benchmark, dtb partition; the delegate's own options default:
    dtb run scenarios, make_delegate, the Python API). They differ where TFLite's do: NNAPI's
    provider passes --max_delegated_partitions=0 (no limit) while StatefulNnApiDelegate::Options
    keeps max_number_delegated_partitions = 3."""
    provider = PROVIDERS[DelegateKind(kind)]
    flags = {name: default for name, (_, default) in _FLAGS.items()}
    return provider.from_flags(flags, None).options, provider.build(provider.options(), None).options
