"""Scenario files: the YAML that says what to simulate, checked at load time and expanded over its matrix.

A scenario is a mapping (scenarios/README.md gives every key with examples):

    name, description     optional text; the name defaults to the file's stem
    device                required: a shipped profile name (sim/profiles) or a profile .yaml path
    model                 required: {zoo: NAME, args: {...}} or {path: FILE.tflite}, plus
                          quantization: none | float16 | dynamic_range | int8 | uint8 (zoo models only)
    delegates             list applied in order, each `KIND` or `KIND: {options}` with KIND one of gpu,
                          nnapi, hexagon, coreml, or `external: {entry_point: NAME, options: {...}}` (an
                          installed plugin) or `external: {path: "pkg.mod:factory", ...}` (refused unless
                          the caller passes allow_external_delegates=True: it imports and runs code)
    cpu: {threads}        inputs: {distribution: gaussian | uniform, seed, low, high} or {file: .npy/.npz}
    runs: {warmup, count} streams (parallel inference streams)   timing_only (skip the math)
    apps, duration_s      concurrent apps (each a model at a frame rate) for simulated seconds, with
                          thermal and trace_s: runtime/scenario/apps.py
    matrix                key path (`device`, `model.quantization`, `model.args.alpha`, ...) -> list of values

Paths are relative to the scenario file. Matrix cells are the cartesian product of the lists in the order
the keys are written, the last key varying fastest; each cell is the document with its values set and is
checked as a whole. `Scenario.cell` holds a cell's (key path, value) pairs and `Scenario.label` a short
text such as "device=pixel4 delegates=gpu quantization=int8" (the name when there is no matrix).
Delegate option keys are left to the delegate factory. Every mistake raises ScenarioError reading
`FILE:LINE: key.path: what is wrong`; a value set by the matrix is reported at its matrix entry's line.
Counts are bounded (runtime/limits/counts.py): runs, streams, threads, matrix cells and the inferences of the
whole file, so a scenario that would run for hours stops at load with the key and the bound.
"""

from __future__ import annotations

import copy
import itertools
import math
import os
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator, Mapping

from runtime.limits import counts as limits
from runtime.ir.errors import ScenarioError
from runtime.ir.files import open_regular, read_text
from runtime.ir.yamlcheck import (MAX_BYTES, Ctx, Key, flag, freeze, integer, kind, mapping, member, number, overlay,
                                   parse, suggest, text)
from runtime.scenario.apps import apps_scenario
# the specs are defined with the section checks both kinds of scenario share; importable from here as before
from runtime.scenario.spec import (FREE, SCHEMA, DELEGATE_KINDS, CpuSpec, DelegateSpec, Distribution, InputSpec,
                                   ModelSpec, Quantization, RunSpec, check_cpu, check_delegates, check_device, cell_label, Load, check_model)

__all__ = ["Quantization", "Distribution", "DELEGATE_KINDS", "ModelSpec", "DelegateSpec", "CpuSpec",
           "InputSpec", "RunSpec", "Scenario", "load_scenario", "scenario_from_text", "known_profiles"]


@dataclass(frozen=True)
class Scenario:
    """One matrix cell of a scenario file, fully checked; paths are absolute."""

    name: str
    source: Path
    device: str                         # the profile name (a profile file's stem when given by path)
    model: ModelSpec
    description: str = ""
    device_file: Path | None = None     # set when the device was given as a path
    api_level: int | None = None        # run the Android phone on another API level (None: the profile's)
    delegates: tuple[DelegateSpec, ...] = ()
    cpu: CpuSpec = CpuSpec()
    inputs: InputSpec = InputSpec()
    runs: RunSpec = RunSpec()
    streams: int = 1
    timing_only: bool = False
    cell: tuple[tuple[str, Any], ...] = ()
    label: str = ""


_FIXED = ("name", "description", "matrix")      # what a matrix may not vary


# ---- public API


def load_scenario(path: str | os.PathLike, allow_external_delegates: bool = False,
                  allow_paths_outside_output: bool = False) -> tuple[Scenario, ...]:
    """Read, check and expand a scenario file: one Scenario per matrix cell, in matrix order.

    A delegate named by module path (`external: {path: ...}`) imports and runs code, so it is refused
    unless `allow_external_delegates` is True (`dtb run --allow-external-delegates`); installed
    plugins (`external: {entry_point: NAME}`) are always allowed. Nothing is imported here. A delegate's
    cache folder (serialization_dir, cache_dir) must be relative without `..` and its model_token a plain
    file name, unless `allow_paths_outside_output` (`dtb run --allow-paths-outside-output`)."""
    p = Path(path)
    try:
        content = read_text(p, limit=MAX_BYTES)   # a FIFO, a device or a 3 GB file is refused, not read
    except FileNotFoundError:
        raise ScenarioError(f"{p}: no such scenario file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{p}: cannot read the scenario: {exc}") from None
    return scenario_from_text(content, p, allow_external_delegates, allow_paths_outside_output)


def scenario_from_text(text: str, source: str | os.PathLike = "<string>",
                       allow_external_delegates: bool = False,
                       allow_paths_outside_output: bool = False) -> tuple[Scenario, ...]:
    """As load_scenario, for YAML text; relative paths resolve against `source`'s folder."""
    src = Path(source)
    data, lines = parse(text, str(src), ScenarioError)
    ctx = Ctx(str(src), src.parent.resolve(), lines, ScenarioError)
    doc = mapping(ctx, data, (), SCHEMA)
    load = Load(allow_external_delegates, known_profiles(), allow_paths_outside_output)
    cells = tuple(_scenario(replace(ctx, lines=cell_lines), cell_doc, src, cell, load)
                  for cell_doc, cell_lines, cell in _cells(ctx, doc))
    _check_total(ctx, doc, cells)
    return cells


def known_profiles() -> tuple[str, ...]:
    """Names of the device profiles shipped with the simulator."""
    try:
        from sim.profile import list_profiles
    except ModuleNotFoundError as exc:
        if exc.name != "sim.profile":
            raise
        import sim
        return tuple(sorted(p.stem for p in (Path(sim.__file__).parent / "profiles").glob("*.yaml")))
    return tuple(list_profiles())


# ---- sections


def _scenario(ctx: Ctx, doc: dict[str, Any], source: Path, cell: tuple[tuple[str, Any], ...],
              load: Load) -> Scenario:
    if any(key in doc for key in ("apps", "duration_s", "thermal", "trace_s")):   # runtime.scenario.apps.APPS_KEYS
        return apps_scenario(ctx, doc, source, cell, load)
    for key in ("device", "model"):
        if key not in doc:
            raise ctx.fail((key,), "required key missing")
    device, device_file = check_device(ctx, doc["device"], ("device",), load.profiles)
    name = text(ctx, doc.get("name", source.stem), ("name",))
    return Scenario(
        name=name, source=source.resolve(), device=device, device_file=device_file,
        api_level=integer(ctx, doc["api_level"], ("api_level",), least=21, most=40) if "api_level" in doc else None,
        model=check_model(ctx, doc["model"], ("model",)),
        description=text(ctx, doc["description"], ("description",)) if "description" in doc else "",
        delegates=check_delegates(ctx, doc.get("delegates"), ("delegates",), load),
        cpu=check_cpu(ctx, doc.get("cpu", {}), ("cpu",)),
        inputs=_inputs(ctx, doc.get("inputs", {}), ("inputs",)),
        runs=_runs(ctx, doc.get("runs", {}), ("runs",)),
        streams=integer(ctx, doc.get("streams", 1), ("streams",), most=limits.MAX_STREAMS),
        timing_only=flag(ctx, doc.get("timing_only", False), ("timing_only",)),
        cell=tuple((k, freeze(v)) for k, v in cell), label=cell_label(cell) if cell else name)


def _inputs(ctx: Ctx, value: Any, path: Key) -> InputSpec:
    m = mapping(ctx, value, path, SCHEMA["inputs"])
    if "file" in m:
        for key in ("distribution", "seed", "low", "high"):
            if key in m:
                raise ctx.fail(path + (key,), "not used with file: the inputs come from the file")
        found = ctx.file(m["file"], path + ("file",), "input file")
        if found.suffix not in (".npy", ".npz"):
            raise ctx.fail(path + ("file",), f"input file {found} is not a .npy or .npz file")
        problem = input_file_problem(found)
        if problem:
            raise ctx.fail(path + ("file",), f"input file {found}: {problem}")
        return InputSpec(Distribution.FILE, file=found, where=ctx.where(path + ("file",)))
    dist = Distribution(member(ctx, m.get("distribution", "gaussian"), path + ("distribution",),
                                ("gaussian", "uniform")))
    seed = integer(ctx, m.get("seed", 0), path + ("seed",), least=0, most=limits.MAX_SEED)
    if dist is Distribution.GAUSSIAN:
        for key in ("low", "high"):
            if key in m:
                raise ctx.fail(path + (key,), "low and high apply to the uniform distribution only")
        return InputSpec(dist, seed)
    # within float32's range: the samples are cast to the input's float32
    low = number(ctx, m.get("low", 0.0), path + ("low",), -_FLOAT32_MAX, _FLOAT32_MAX)
    high = number(ctx, m.get("high", 1.0), path + ("high",), -_FLOAT32_MAX, _FLOAT32_MAX)
    if low >= high:
        raise ctx.fail(path + ("high",), f"must be above low ({low:g})")
    return InputSpec(dist, seed, low, high)


def _runs(ctx: Ctx, value: Any, path: Key) -> RunSpec:
    m = mapping(ctx, value, path, SCHEMA["runs"])
    return RunSpec(integer(ctx, m.get("warmup", 1), path + ("warmup",), least=0, most=limits.MAX_WARMUP),
                   integer(ctx, m.get("count", 50), path + ("count",), most=limits.MAX_RUNS))


_FLOAT32_MAX = 3.4028234663852886e38
_INPUT_KINDS = "biuf"               # bool, integers, floats: what a model input can be filled from
MAX_INPUT_ELEMENTS = 1 << 24        # per array of an input file; a model input is far smaller


def input_file_problem(path: Path) -> str | None:
    """What is wrong with a .npy / .npz input file, read from its array headers only (a compressed
    .npz can hold gigabytes in a few kilobytes): unreadable, no arrays, an array of objects,
    strings or complex numbers, or one too large. None when it is fine; shapes are checked
    against the model when the run is checked."""
    try:
        headers = read_array_headers(path)
    except Exception as exc:  # numpy's header parser meets arbitrary bytes here; any failure means unreadable
        return f"cannot be read as a {path.suffix} file ({' '.join(str(exc).split()) or type(exc).__name__})"
    if not headers:
        return "holds no arrays"
    for name, (shape, dtype) in headers.items():
        label = f"array '{name}'" if name else "the array"
        if dtype.kind not in _INPUT_KINDS or dtype.fields is not None or dtype.subdtype is not None:
            return f"{label} holds {dtype} values, not numbers (bool, integer or float)"
        size = math.prod(shape)
        if size > MAX_INPUT_ELEMENTS:
            return f"{label} has {size:,} elements; the limit is {MAX_INPUT_ELEMENTS:,}"
    return None


def read_array_headers(path: Path) -> dict[str, tuple[tuple[int, ...], Any]]:
    """Array name ('' for a .npy) -> (shape, dtype), from the .npy headers alone."""
    import numpy as np

    def header(f) -> tuple[tuple[int, ...], Any]:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise ValueError(f"unsupported .npy format version {version}")
        return tuple(shape), dtype

    if path.suffix == ".npy":
        with open_regular(path) as f:
            return {"": header(f)}
    with open_regular(path) as raw, zipfile.ZipFile(raw) as z:
        out = {}
        for info in z.infolist():
            if not info.filename.endswith(".npy"):
                continue
            with z.open(info) as f:
                out[info.filename[:-4]] = header(f)
        return out


def _values(value: Any) -> int:
    """How many values a document holds (shared, aliased parts counted each time they appear)."""
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def _check_total(ctx: Ctx, doc: dict[str, Any], cells: tuple[Scenario, ...]) -> None:
    """The inferences the whole file asks for, against limits.MAX_INFERENCES."""
    total = sum(c.streams * (c.runs.warmup + c.runs.count) for c in cells)
    if total > limits.MAX_INFERENCES:
        where = ("matrix",) if "matrix" in doc else ("runs",)
        raise ctx.fail(where, f"the scenario asks for {total:,} inferences in all (cells x streams x "
                              f"(warmup + count)); the limit is {limits.MAX_INFERENCES:,}")


# ---- the matrix


def _schema_paths(tree: Mapping[str, Any] = SCHEMA, prefix: str = "") -> Iterator[str]:
    for key, sub in tree.items():
        yield prefix + key
        if isinstance(sub, dict):
            yield from _schema_paths(sub, f"{prefix}{key}.")


def _target(ctx: Ctx, key: str, path: Key) -> tuple[str, ...]:
    parts = tuple(key.split("."))
    if parts[0] in _FIXED:
        raise ctx.fail(path, f"'{parts[0]}' cannot vary in a matrix")
    level: Any = SCHEMA
    for n, part in enumerate(parts):
        if level == FREE and part:
            return parts[:n + 1] if n + 1 == len(parts) else _bad_target(ctx, key, path)
        if not isinstance(level, dict) or part not in level:
            return _bad_target(ctx, key, path)
        level = level[part]
    return parts


def _bad_target(ctx: Ctx, key: str, path: Key) -> tuple[str, ...]:
    paths = [p for p in _schema_paths() if p.split(".")[0] not in _FIXED]
    raise ctx.fail(path, f"'{key}' is not a scenario key path{suggest(key, paths)}")


def _axes(ctx: Ctx, matrix: Any) -> list[tuple[str, tuple[str, ...], list[Any]]]:
    matrix = mapping(ctx, matrix, ("matrix",))
    if not matrix:
        raise ctx.fail(("matrix",), "expected at least one key path with a list of values")
    axes = []
    for key, values in matrix.items():
        target = _target(ctx, key, ("matrix", key))
        if not isinstance(values, list) or not values:
            raise ctx.fail(("matrix", key), f"expected a non-empty list of values, got {kind(values)}")
        for other, other_target, _ in axes:
            if target[:len(other_target)] == other_target or other_target[:len(target)] == target:
                raise ctx.fail(("matrix", key), f"overlaps matrix key '{other}'")
        axes.append((key, target, values))
    return axes


def _cells(ctx: Ctx, doc: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[Key, int], tuple]]:
    if "matrix" not in doc:
        yield doc, dict(ctx.lines), ()
        return
    axes = _axes(ctx, doc["matrix"])
    base = {k: v for k, v in doc.items() if k != "matrix"}
    cells = math.prod(len(values) for _, _, values in axes)
    if cells > limits.MAX_CELLS:
        raise ctx.fail(("matrix",), f"expands to {cells:,} cells; the limit is {limits.MAX_CELLS:,}")
    per_cell = _values(base) + sum(max(_values(v) for v in values) for _, _, values in axes)
    if cells * per_cell > limits.MAX_EXPANSION:  # each cell is a copy of the document: bound the copying
        raise ctx.fail(("matrix",), f"expands to {cells:,} cells of up to {per_cell:,} values each; the limit "
                                    f"is {limits.MAX_EXPANSION:,} values in all")
    for combo in itertools.product(*(range(len(values)) for _, _, values in axes)):
        cell_doc, lines = copy.deepcopy(base), dict(ctx.lines)
        for (key, target, values), i in zip(axes, combo):
            overlay(ctx, cell_doc, lines, target, ("matrix", key, i), copy.deepcopy(values[i]))
        yield cell_doc, lines, tuple((key, values[i]) for (key, _, values), i in zip(axes, combo))
