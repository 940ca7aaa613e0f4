"""Shared pieces of the `dtb` tools: model, device and delegate flags, log echo, inputs, number formats."""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from runtime.ir.atomic import write_text
from runtime.ir.errors import TestbedError
from runtime.ir.files import special_kind
from runtime.ir.graph import Graph
from runtime.model.loader import CALIBRATION_SAMPLES, FLAGS, QUANTIZATIONS, ModelSource
from runtime.model.loader import load_model

__all__ = ["LoadedModel", "PROVIDER_NAMES", "QUANTIZATIONS", "add_delegate_budget_flag", "add_device_flag", "add_model_flags", "check_writable", "write_failed", "cpp_float",
           "delegate_budget", "delegate_budget_scope", "delegate_kinds", "flag_default_notes", "scenario_default_notes", "echo_log", "gaussian_inputs", "profile_from_flags", "model_from_flags", "parse_delegate_flags",
           "to_us", "tflite_bool", "uniform_inputs", "warn_lines", "warn_refusals", "with_delegate_flag", "write_atomic",
           "zoo_args_text"]

# DelegateProvider::GetName() of TFLite's providers (tflite/tools/delegates/*_delegate_provider.cc).
PROVIDER_NAMES = {"gpu": "GPU", "nnapi": "NNAPI", "hexagon": "Hexagon", "coreml": "COREML", "qnn": "QNN",
                  "external": "EXTERNAL"}


def cpp_float(x: float) -> str:
    """A number as `std::ostream << x` prints it by default: six significant digits, %g style."""
    return "%g" % float(x)


def to_us(seconds: float) -> int:
    """Simulated seconds as the integer microseconds TFLite's timers give (truncated; the epsilon
    keeps 99.9999999 us of accumulated float error from reading as 99)."""
    return int(math.floor(seconds * 1e6 + 1e-6))


def tflite_bool(text: str) -> bool:
    """TFLite's bool flag values: true/false or 1/0."""
    value = text.strip().lower()
    if value not in ("true", "false", "1", "0"):
        raise argparse.ArgumentTypeError(f"must be true or false, not {text!r}")
    return value in ("true", "1")


def memory_mb(text: str) -> int:
    """--memory_limit_mb: megabytes (a positive number), as bytes."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of megabytes, not {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError("must be a positive number of megabytes")
    return max(1, int(value * (1 << 20)))


def add_memory_flag(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--memory_limit_mb", type=memory_mb, default=None, metavar="MB",
                    help="refuse a model whose tensors, scratch and delegate buffers need more than this "
                         "(default: half of physical memory, or $DTB_MEMORY_LIMIT_MB)")


def add_model_flags(sp: argparse.ArgumentParser, file_aliases: Sequence[str] = ()) -> None:
    """The model options every command that takes a model spells the same way; `file_aliases` are
    a TFLite tool's own names for --graph (inference_diff's --model_file)."""
    add_memory_flag(sp)
    sp.add_argument("--graph", *file_aliases, dest="graph", metavar="FILE", help="path to a .tflite model")
    # --model and --model-arg: the names infer / inspect / export had before, kept working
    sp.add_argument("--zoo", "--model", dest="zoo", metavar="NAME",
                    help="zoo model name instead of a file (see `dtb list models`)")
    sp.add_argument("--zoo_args", "--model-arg", dest="zoo_args", action="append", default=[], metavar="K=V,...",
                    help="zoo builder arguments, e.g. alpha=0.5,resolution=128 (repeatable)")
    sp.add_argument("--quantization", default="none", choices=QUANTIZATIONS,
                    help="post-training quantization applied before running (int8 and uint8 calibrate on "
                         f"{CALIBRATION_SAMPLES} seeded Gaussian samples)")


# One argument group per delegate provider, as TFLite's registrar groups the flags (one provider per
# tflite/tools/delegates/*_delegate_provider.cc); flags no provider owns go to every delegate.
_PROVIDER_GROUPS = {"gpu": "GPU", "hexagon": "Hexagon", "nnapi": "NNAPI", "coreml": "Core ML", "qnn": "QNN",
                    "external": "External delegate", "": "Every delegate"}


def delegate_tool_parser(sub, name: str, **kwargs) -> argparse.ArgumentParser:
    """A subcommand that takes TFLite's delegate flags. The registry parses them from what argparse
    leaves over (in the order given, bare booleans, --flag=value), so argparse only shows them: its
    --help adds them, grouped by provider, just before printing."""
    sp = sub.add_parser(name, add_help=False, **kwargs)
    sp.add_argument("-h", "--help", action=_DelegateFlagsHelp, help="show this help message and exit")
    add_delegate_budget_flag(sp)
    sp.set_defaults(takes_delegate_flags=True)
    return sp


DELEGATE_BUDGET_HELP = ("time budget of each call into an external delegate (--external_delegate_path, a plugin, "
                        "a scenario's external: entry), in host seconds (default 5, or $DTB_DELEGATE_TIMEOUT; "
                        "0: none); a call that outlives it is a delegate error. Built-in delegates run in "
                        "simulated time and are never timed out")


def delegate_budget(text: str) -> float:
    """--delegate_timeout_secs: host seconds each external delegate call may take (0: not watched)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, not {text!r}") from None
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError("must be a number of seconds >= 0")
    return value


def add_delegate_budget_flag(sp: argparse.ArgumentParser) -> None:
    """--delegate_timeout_secs, on every command that may run an external delegate."""
    sp.add_argument("--delegate_timeout_secs", type=delegate_budget, default=None, metavar="SECONDS",
                    help=DELEGATE_BUDGET_HELP)


def delegate_budget_scope(seconds: float | None):
    """The external delegates' time budget for a command's run: `seconds`, or the default when None."""
    if seconds is None:
        return contextlib.nullcontext()
    from delegates.guard import time_budget

    return time_budget(seconds)


class _DelegateFlagsHelp(argparse.Action):
    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        _add_delegate_flag_groups(parser)
        parser.print_help()
        parser.exit()


_METAVARS = {bool: "BOOL", int: "N"}


def _provider(flag: str) -> str:
    """The provider owning a flag: the first one its name names (use_gpu, nnapi_accelerator_name,
    qnn_gpu_precision is QNN's, ...)."""
    from delegates.registry import owner

    return owner(flag)


def _add_delegate_flag_groups(sp: argparse.ArgumentParser) -> None:
    from delegates.registry import flag_table

    groups = {kind: sp.add_argument_group(title) for kind, title in _PROVIDER_GROUPS.items()}
    for name, kind, default, choices in flag_table():
        shown = repr(default) if default == "" else str(default).lower() if kind is bool else default
        values = f"one of {', '.join(c for c in choices if c)}; " if choices else ""
        groups[_provider(name)].add_argument(
            f"--{name}", nargs="?" if kind is bool else None, default=argparse.SUPPRESS,
            metavar=_METAVARS.get(kind, "VALUE"), help=f"{values}default: {shown}")
    sp.epilog = "Delegate flags apply in the order given; BOOL is true or false (1 or 0), and a bare flag is true."


def add_device_flag(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--device", default="pixel4",
                    help="phone profile name (see `dtb list devices`) or a profile .yaml path")
    sp.add_argument("--api_level", type=int, default=None, metavar="N",
                    help="run the Android phone on another API level (NNAPI's feature level follows it); "
                         "default: the profile's")


@dataclass(frozen=True)
class LoadedModel:
    graph: Graph
    label: str              # "zoo:tiny_cnn" or the file path
    name: str               # what results.json calls the model
    size_bytes: int         # the .tflite file, or the zoo model serialized
    quantization: str


def zoo_args_text(args: argparse.Namespace) -> str:
    """Every --zoo_args given, as one K=V,... text."""
    return ",".join(args.zoo_args or ())


def model_from_flags(args: argparse.Namespace) -> LoadedModel:
    """The model named by --graph or --zoo (exactly one), quantized as --quantization asks."""
    source = ModelSource(path=args.graph or None, zoo=args.zoo or None, zoo_args=zoo_args_text(args),
                         quantization=args.quantization)
    graph = load_model(source, FLAGS)
    if args.graph:
        label, name, size = args.graph, Path(args.graph).name, _file_size(args.graph)
    else:
        label, name, size = f"zoo:{args.zoo}", args.zoo, 0
    if not size or args.quantization != "none":
        from runtime.model.tflite_write import dumps

        size = len(dumps(graph))
    return LoadedModel(graph, label, name, size, args.quantization)


def _file_size(path: str) -> int:
    """The model file's size as benchmark_model prints it: the .tflite itself, so a .tflite.xz counts decompressed."""
    from runtime.model.tflite_read import XZ_SUFFIX, model_bytes

    return len(model_bytes(path)) if path.endswith(XZ_SUFFIX) else os.path.getsize(path)


def profile_from_flags(name: str, api_level: int | None = None):
    """The phone named by --device (a profile name or file), at the --api_level asked for (None: its own)."""
    from sim.profile import load_profile, with_api_level

    return with_api_level(load_profile(name), api_level)


def parse_delegate_flags(sp: argparse.ArgumentParser, extra: Sequence[str], profile) -> list:
    """TFLite's delegate flags among the arguments argparse left over; anything else is a usage error."""
    from delegates.registry import parse_flags, unused_flags

    delegates, rest = parse_flags(list(extra), profile)
    if rest:
        sp.error(f"unrecognized arguments: {' '.join(rest)}")
    warn_refusals(sp.prog, [d.platform_refusal for d in delegates if d.platform_refusal])
    warn_lines(sp.prog, [*unused_flags(extra), *delegate_warnings(delegates)])
    return delegates


def with_delegate_flag(extra: Sequence[str], delegate: str) -> list[str]:
    """The delegate flags with `--delegate NAME`'s --use_NAME added (the evaluation tools' flag); a
    --use_NAME=false among them contradicts it and is refused rather than overridden."""
    if not delegate:
        return list(extra)
    from delegates.registry import given_flags

    if given_flags(extra).get(f"use_{delegate}") is False:
        raise TestbedError(f"--delegate {delegate} and --use_{delegate}=false contradict each other; give one of them")
    return [*extra, f"--use_{delegate}"]


def delegate_warnings(delegates: Sequence) -> list[str]:
    """What the delegates said of their options when created (a partition limit capped, an option
    they cannot use): TFLite logs these as warnings, so an option that changes nothing says so."""
    from runtime.interpreter.delegation import said_warnings

    return [w for d in delegates for w in said_warnings(d)]


def warn_lines(prog: str, lines: Sequence[str]) -> None:
    """One stderr warning line per message, each said once."""
    for line in dict.fromkeys(lines):
        print(f"{prog}: warning: {line}", file=sys.stderr)


def warn_refusals(prog: str, refusals: Sequence[str]) -> None:
    """One stderr line per delegate the phone's platform refuses (each said once): it takes no op,
    and without the line its CPU rows would pass for the delegate's."""
    for refusal in dict.fromkeys(refusals):
        print(f"{prog}: warning: {refusal}; it takes no op", file=sys.stderr)


def delegate_kinds(delegates: Sequence) -> list[str]:
    """"gpu", "nnapi", ... for each delegate; "external" for one loaded from module:factory."""
    from delegates.registry import CLASSES

    return [next((k for k, cls in CLASSES.items() if isinstance(d, cls)), "external") for d in delegates]


def _limit(limit: int) -> str:
    return "max_delegated_partitions 0: no limit" if limit <= 0 else f"max_delegated_partitions {limit}"


def flag_default_notes(kinds: Sequence[str], reports: Sequence) -> list[str]:
    """dtb benchmark / dtb partition: where a built-in delegate cut with other limits than its own
    default (what dtb run and the Python API use) and that default would have cut the graph
    otherwise, one line saying so and how to get the other cut."""
    from delegates.registry import BUILTIN, default_limits

    notes = []
    for kind, rep in zip(kinds, reports):
        if kind not in BUILTIN or rep.error:
            continue
        flags, own = (o.max_delegated_partitions for o in default_limits(kind))
        used = rep.max_delegated_partitions
        if used != own and 0 < own < rep.partitions:
            source = ", benchmark_model's flag default" if used == flags else ""
            notes.append(f"{rep.delegate} kept {rep.partitions} partitions ({_limit(used)}{source}); the "
                         f"delegate's own default, which `dtb run` scenarios "
                         f"and the Python API use, is {_limit(own)} and keeps only the {own} largest: give "
                         f"--max_delegated_partitions={own} for that cut")
    return notes


def scenario_default_notes(records: Sequence[dict]) -> list[str]:
    """dtb run: where a cell's built-in delegate left supported ops on the CPU under limits other
    than benchmark_model's flag defaults (what dtb benchmark and dtb partition use), one line per
    delegate and limit saying so and how to get their cut."""
    from delegates.registry import BUILTIN, default_limits

    cells: dict[tuple, list[str]] = {}
    for rec in records:
        for d in rec.get("delegates", []):
            if d.get("kind") not in BUILTIN or not d.get("over_partition_limit"):
                continue
            flags = default_limits(d["kind"])[0].max_delegated_partitions
            used = d.get("max_delegated_partitions", flags)
            if 0 < used and (flags <= 0 or used < flags):   # the flags' cut would keep more partitions
                key = (d["name"], d["kind"], used, flags)
                cells.setdefault(key, []).append(str(rec.get("label") or rec.get("scenario", "")))
    return [f"{name} kept at most {used} partitions ({_limit(used)}) in {len(labels)} cell(s) "
            f"({', '.join(labels[:3])}{', ...' if len(labels) > 3 else ''}), leaving supported ops on the CPU; "
            f"`dtb benchmark --use_{kind}` and `dtb partition` use {_limit(flags)} (benchmark_model's flag "
            f"default): give `{kind}: {{max_delegated_partitions: {flags}}}` in the scenario for their cut"
            for (name, kind, used, flags), labels in cells.items()]


class _StdoutHandler(logging.Handler):
    """Writes to whatever sys.stdout is when a record arrives (the CLI's output may be redirected)."""

    def emit(self, record: logging.LogRecord) -> None:
        print(self.format(record), file=sys.stdout)


@contextlib.contextmanager
def echo_log() -> Iterator[None]:
    """Print the delegation log on stdout while the block runs, as benchmark_model prints its log."""
    logger = logging.getLogger("delegate_testbed")
    handler, level = _StdoutHandler(logging.INFO), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _check_input_types(graph: Graph, allowed: Sequence[str], tool: str) -> None:
    for t in graph.inputs:
        dtype = graph.tensors[t].dtype.name
        if dtype not in allowed:
            raise TestbedError(f"{graph.label}: {tool} fills inputs of types {', '.join(allowed)}; input "
                               f"'{graph.tensors[t].name}' is {dtype}")


# benchmark_model's ranges per type (tflite/tools/utils.cc GetDataRangesForType); integers inclusive.
_UNIFORM = {"FLOAT32": (-0.5, 0.5), "FLOAT16": (-0.5, 0.5), "INT32": (0, 99), "INT64": (0, 99),
            "UINT8": (0, 254), "INT8": (-127, 127), "BOOL": (0, 1)}


def uniform_inputs(graph: Graph, seed: int) -> dict[int, np.ndarray]:
    """One input set filled as benchmark_model fills it: uniform in a range per type."""
    _check_input_types(graph, tuple(_UNIFORM), "benchmark")
    rng = np.random.default_rng(seed)
    feed = {}
    for t in graph.inputs:
        tensor = graph.tensors[t]
        low, high = _UNIFORM[tensor.dtype.name]
        value = np.empty(tensor.shape, tensor.dtype.np)
        flat = value.reshape(-1)
        # Drawn in chunks into the input's own type: the same numbers as one draw of the whole
        # input, without a float64 / int64 copy of it (a large input stays within the memory limit).
        for start in range(0, flat.size, _CHUNK):
            n = min(_CHUNK, flat.size - start)
            flat[start:start + n] = (rng.uniform(low, high, n) if tensor.dtype.np.kind == "f"
                                     else rng.integers(low, high, n, endpoint=True))
        feed[t] = value
    return feed


_CHUNK = 1 << 20


_GAUSSIAN_RANGE = {"FLOAT32": (-1.0, 1.0), "FLOAT16": (-1.0, 1.0), "UINT8": (0, 255), "INT8": (-128, 127)}


def gaussian_inputs(graph: Graph, rng: np.random.Generator) -> dict[int, np.ndarray]:
    """inference_diff's inputs (inference_profiler_stage.cc): a normal(0.5, 1/3) sample redrawn
    until it lies in [0, 1), mapped onto the type's range and truncated toward zero."""
    _check_input_types(graph, tuple(_GAUSSIAN_RANGE), "inference-diff")
    feed = {}
    for t in graph.inputs:
        tensor = graph.tensors[t]
        low, high = _GAUSSIAN_RANGE[tensor.dtype.name]
        u = rng.normal(0.5, 1.0 / 3.0, tensor.shape)
        bad = (u < 0) | (u >= 1)
        while bad.any():
            u[bad] = rng.normal(0.5, 1.0 / 3.0, int(bad.sum()))
            bad = (u < 0) | (u >= 1)
        values = np.float32(low) + np.float32(high - low) * u.astype(np.float32)
        feed[t] = (values if tensor.dtype.np.kind == "f" else np.trunc(values)).astype(tensor.dtype.np)
    return feed


def check_writable(*paths: str | None) -> None:
    """Fail before a long run, not after it, when an output file's directory does not exist, or the
    path names a directory or a device (a file is written beside it and renamed over it: a device
    node would be replaced)."""
    for path in paths:
        if path is None:
            continue
        if not path:
            raise TestbedError("cannot write to an empty file name")
        if not Path(path).resolve().parent.is_dir():
            raise TestbedError(f"cannot write {path}: no such directory {Path(path).parent}")
        kind = special_kind(path)
        if kind is not None:
            raise TestbedError(f"cannot write {path}: it is {kind}, not a regular file")


def write_failed(path: str | os.PathLike, exc: OSError) -> TestbedError:
    """An output file that could not be written (no permission, a full disk), in one line."""
    return TestbedError(f"cannot write {path}: {exc.strerror or exc}")


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Write to a temporary file beside `path`, then rename: readers never see half a file."""
    try:
        write_text(path, text)
    except OSError as exc:
        raise write_failed(path, exc) from None
