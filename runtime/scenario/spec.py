"""What a scenario cell is made of (model, delegates, CPU, inputs, runs) and the section checks all scenarios share.

runtime/scenario/load.py reads plain scenarios and expands the matrix, handing apps scenarios to
runtime/scenario/apps.py; both build their cells from these specs, check the sections they have in common
(device, model, delegates, cpu) here, and label matrix cells alike. It imports neither of them.
"""

from __future__ import annotations

import enum
import inspect
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from delegates.compile_cache import token_problem
from delegates.kinds import BUILTIN_KINDS, EXTERNAL
from runtime.limits import counts as limits
from runtime.ir.yamlcheck import Ctx, Key, freeze, integer, kind, mapping, member, number, suggest, text

__all__ = ["Quantization", "Distribution", "DELEGATE_KINDS", "ModelSpec", "DelegateSpec", "CpuSpec", "InputSpec",
           "RunSpec"]


class Quantization(enum.Enum):
    NONE = "none"
    FLOAT16 = "float16"
    DYNAMIC_RANGE = "dynamic_range"
    INT8 = "int8"
    UINT8 = "uint8"


class Distribution(enum.Enum):
    GAUSSIAN = "gaussian"
    UNIFORM = "uniform"
    FILE = "file"


DELEGATE_KINDS = (*BUILTIN_KINDS, EXTERNAL)


@dataclass(frozen=True)
class ModelSpec:
    """A zoo model by name and builder arguments, or a .tflite file; and the quantization to apply."""

    zoo: str | None = None
    args: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    path: Path | None = None
    quantization: Quantization = Quantization.NONE


@dataclass(frozen=True)
class DelegateSpec:
    """One delegate to apply; its options are checked by the delegate factory, not here."""

    kind: str
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    factory: str | None = None          # external delegates: "package.module:callable"
    entry_point: str | None = None      # or an installed plugin's name (group delegate_testbed.delegates)


@dataclass(frozen=True)
class CpuSpec:
    threads: int | None = None


@dataclass(frozen=True)
class InputSpec:
    distribution: Distribution = Distribution.GAUSSIAN
    seed: int = 0
    low: float = 0.0
    high: float = 1.0
    file: Path | None = None
    where: str = field(default="", compare=False)   # "FILE:LINE: inputs.file" for errors found at run time


@dataclass(frozen=True)
class RunSpec:
    warmup: int = 1
    count: int = 50


# Key tree of the schema: a dict is a section with known keys, None a leaf, FREE a mapping of any keys.
FREE = "free"
SCHEMA: dict[str, Any] = {
    "name": None, "description": None, "device": None, "api_level": None,
    "model": {"zoo": None, "args": FREE, "path": None, "quantization": None},
    "delegates": None, "cpu": {"threads": None},
    "inputs": {"distribution": None, "seed": None, "low": None, "high": None, "file": None},
    "runs": {"warmup": None, "count": None}, "streams": None, "timing_only": None, "matrix": None,
    # concurrent apps over a span of simulated time (runtime/scenario/apps.py)
    "apps": None, "duration_s": None, "thermal": {"ambient_c": None, "platform_w": None}, "trace_s": None,
}
_FACTORY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


@dataclass(frozen=True)
class Load:
    """What one load knows besides the document: the caller's trust, the shipped profiles."""

    allow_external: bool
    profiles: tuple[str, ...]
    allow_outside: bool = False     # cache folders and model tokens may lead outside the output folder


# Delegate options naming where a compiled program is cached: the GPU delegate's serialization_dir,
# NNAPI's and QNN's cache_dir (folders, relative to the output folder -o) and model_token (a file name in them).
CACHE_DIR_OPTIONS = ("serialization_dir", "cache_dir")
TOKEN_OPTIONS = ("model_token",)
ALLOW_OUTSIDE_FLAG = "--allow-paths-outside-output"


# ---- sections both kinds of scenario have


def check_device(ctx: Ctx, value: Any, path: Key, known: tuple[str, ...]) -> tuple[str, Path | None]:
    name = text(ctx, value, path)
    if "/" in name or os.sep in name or name.endswith((".yaml", ".yml")):
        found = ctx.file(name, path, "device profile file")
        return found.stem, found
    if name not in known:
        raise ctx.fail(path, f"unknown device profile '{name}'{suggest(name, known)} (shipped: "
                             f"{', '.join(known)}; or give a path to a profile .yaml file)")
    return name, None


def check_model(ctx: Ctx, value: Any, path: Key) -> ModelSpec:
    m = mapping(ctx, value, path, SCHEMA["model"])
    if ("zoo" in m) == ("path" in m):
        raise ctx.fail(path, "give exactly one of zoo (a model name) or path (a .tflite file)")
    q_path = path + ("quantization",)
    quant = Quantization(member(ctx, m.get("quantization", "none"), q_path,
                                 tuple(q.value for q in Quantization)))
    if "path" in m:
        if "args" in m:
            raise ctx.fail(path + ("args",), "args are for zoo models; a .tflite file is used as it is")
        if quant is not Quantization.NONE:
            raise ctx.fail(q_path, "quantization applies to zoo models only; a .tflite file is used as it is")
        return ModelSpec(path=ctx.file(m["path"], path + ("path",), "model file"))
    name = _zoo_name(ctx, m["zoo"], path + ("zoo",))
    args = _zoo_args(ctx, name, m.get("args", {}), path + ("args",))
    return ModelSpec(zoo=name, args=freeze(args), quantization=quant)


def _zoo_name(ctx: Ctx, value: Any, path: Key) -> str:
    from runtime.zoo import MODELS
    name = text(ctx, value, path)
    if name not in MODELS:
        raise ctx.fail(path, f"unknown zoo model '{name}'{suggest(name, MODELS)} (known: "
                             f"{', '.join(sorted(MODELS))})")
    return name


def _zoo_args(ctx: Ctx, name: str, value: Any, path: Key) -> dict[str, Any]:
    from runtime.zoo import MODELS, arg_problem
    params = inspect.signature(MODELS[name]).parameters
    args = mapping(ctx, value, path)
    for key, arg in args.items():
        if key not in params:
            raise ctx.fail(path + (key,), f"zoo model '{name}' takes no argument '{key}'{suggest(key, params)} "
                                          f"(it takes {', '.join(params)})")
        default = params[key].default
        if isinstance(default, int) and not isinstance(default, bool):
            integer(ctx, arg, path + (key,), least=None)
        elif isinstance(default, float):
            number(ctx, arg, path + (key,))
        problem = arg_problem(name, key, arg)  # the range the builder works in (runtime.zoo.LIMITS)
        if problem:
            raise ctx.fail(path + (key,), problem)
    return dict(args)


def check_delegates(ctx: Ctx, value: Any, path: Key, load: Load) -> tuple[DelegateSpec, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ctx.fail(path, f"expected a list of delegates, got {kind(value)}")
    return tuple(_delegate(ctx, item, path + (i,), load) for i, item in enumerate(value))


def _delegate(ctx: Ctx, item: Any, path: Key, load: Load) -> DelegateSpec:
    if isinstance(item, str):
        name, options = item, None
    elif isinstance(item, dict) and len(item) == 1:
        ((name, options),) = mapping(ctx, item, path).items()
    else:
        raise ctx.fail(path, f"expected one delegate, as `gpu` or `gpu: {{options}}`, got {kind(item)}")
    path += (name,)
    member(ctx, name, path, DELEGATE_KINDS)
    options = mapping(ctx, {} if options is None else options, path)
    if name == EXTERNAL:
        return _external(ctx, options, path, load)
    _check_cache_paths(ctx, options, path, load)
    return DelegateSpec(name, freeze(options))


def _check_cache_paths(ctx: Ctx, options: Mapping[str, Any], path: Key, load: Load) -> None:
    """A scenario's cache folders stay inside the output folder and its tokens are plain file names,
    unless the user allows otherwise: a scenario file from elsewhere may not write where it likes."""
    if load.allow_outside:
        return
    allow = f"; or run with {ALLOW_OUTSIDE_FLAG} (allow_paths_outside_output=True in the API) if you trust this file"
    for key in CACHE_DIR_OPTIONS:
        if key in options:
            why = outside_reason(str(options[key]))
            if why:
                raise ctx.fail(path + (key,), f"must be a folder inside the output folder (-o), written relative to "
                                              f"it: {why}{allow}")
    for key in TOKEN_OPTIONS:
        if key in options:
            why = token_problem(str(options[key]))
            if why:
                raise ctx.fail(path + (key,), f"must be a plain file name: {why}{allow}")


def outside_reason(folder: str) -> str | None:
    """Why a folder relative to the output folder may lead outside it (absolute, a drive, `..`, `~`), or None."""
    parts = re.split(r"[/\\]", folder)
    if folder.startswith(("/", "\\")) or os.path.isabs(folder) or re.match(r"^[A-Za-z]:", folder):
        return f"'{folder}' is absolute"
    if ".." in parts:
        return f"'{folder}' climbs out with '..'"
    if folder.startswith("~"):
        return f"'{folder}' names a home folder"
    if "\0" in folder:
        return "it holds a NUL character"
    return None


def _external(ctx: Ctx, m: dict[str, Any], path: Key, load: Load) -> DelegateSpec:
    mapping(ctx, m, path, ("path", "entry_point", "options"))
    if "path" not in m and "entry_point" not in m:
        raise ctx.fail(path + ("path",), "required key missing: the delegate factory as 'package.module:callable' "
                                         "(or entry_point: an installed plugin's name)")
    if "path" in m and "entry_point" in m:
        raise ctx.fail(path + ("entry_point",), "give path or entry_point, not both")
    options = mapping(ctx, m.get("options") or {}, path + ("options",))
    _check_cache_paths(ctx, options, path + ("options",), load)
    options = freeze(options)
    if "entry_point" in m:
        from delegates.external import PLUGIN_GROUP, plugin_names

        name, installed = text(ctx, m["entry_point"], path + ("entry_point",)), plugin_names()
        if name not in installed:
            shown = ", ".join(installed) if installed else "none is installed"
            raise ctx.fail(path + ("entry_point",), f"no installed delegate plugin '{name}'{suggest(name, installed)} "
                                                    f"(entry points of group {PLUGIN_GROUP}: {shown})")
        return DelegateSpec(EXTERNAL, options, entry_point=name)
    factory = text(ctx, m["path"], path + ("path",))
    if not _FACTORY.match(factory):
        raise ctx.fail(path + ("path",), f"'{factory}' is not of the form 'package.module:callable'")
    if not load.allow_external:
        raise ctx.fail(path + ("path",), f"'{factory}' would import and run Python code named by the scenario; "
                                         f"pass --allow-external-delegates to dtb run (allow_external_delegates="
                                         f"True in the API) if you trust this file, or install the delegate as a "
                                         f"plugin and name its entry_point")
    return DelegateSpec(EXTERNAL, options, factory)


def check_cpu(ctx: Ctx, value: Any, path: Key) -> CpuSpec:
    m = mapping(ctx, value, path, SCHEMA["cpu"])
    return CpuSpec(integer(ctx, m["threads"], path + ("threads",), most=limits.MAX_THREADS) if "threads" in m else None)


# ---- labels


def cell_label(cell: tuple[tuple[str, Any], ...]) -> str:
    tails = [key.rsplit(".", 1)[-1] for key, _ in cell]
    return " ".join(f"{tail if tails.count(tail) == 1 else key}={_show(value, key == 'delegates')}"
                    for (key, value), tail in zip(cell, tails))


def _show(value: Any, delegates: bool = False) -> str:
    if delegates and isinstance(value, list):
        return "+".join(_show_delegate(d) for d in value) or "cpu"
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, dict):
        return ",".join(f"{k}={_show(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "[" + ",".join(_show(v) for v in value) + "]"
    return str(value)


def _show_delegate(entry: Any) -> str:
    if not isinstance(entry, dict) or len(entry) != 1:
        return _show(entry)
    ((name, options),) = entry.items()
    return f"{name}({_show(options)})" if options else str(name)
