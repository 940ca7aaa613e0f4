"""A matrix cell's inputs to a run, built from its Scenario: the model, the input arrays, the phone, the delegates.

Shared by runtime/sweep/runner.py (plain cells), runtime/sweep/app_streams.py (app streams) and runtime/sweep/executors.py (the
guard sizes models); it imports none of them. Models and phone profiles are cached per process.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from runtime.ir.errors import ScenarioError
from runtime.ir.graph import Graph

__all__ = ["build_model", "make_inputs", "cached_profile", "cell_profile"]

_MODELS: dict[tuple, Graph] = {}


def build_model(spec, source: Path | None = None) -> Graph:
    """The scenario's model (a ModelSpec) through the one loader: a .tflite file, or a zoo builder,
    quantized as asked; zoo models are cached per process, since int8 calibration runs the float
    model several times."""
    from runtime.model.loader import KEYS, ModelSource, load_model

    model = ModelSource(path=spec.path, zoo=spec.zoo, zoo_args=dict(spec.args), quantization=spec.quantization.value)
    if spec.path is not None:
        return load_model(model, KEYS)
    key = (spec.zoo, tuple(sorted(dict(spec.args).items())), spec.quantization.value)
    if key not in _MODELS:
        _MODELS[key] = load_model(model, KEYS)
    return _MODELS[key]


def _random_input(tensor, rng: np.random.Generator, distribution: str, low: float, high: float) -> np.ndarray:
    shape = tensor.shape
    x = (rng.uniform(low, high, shape) if distribution == "uniform" else rng.standard_normal(shape))
    if tensor.dtype.np.kind in "fc":  # a complex input gets the sample as its real part
        return x.astype(tensor.dtype.np)
    if tensor.quant is not None:  # a quantized input: the float sample on the tensor's grid
        info = np.iinfo(tensor.dtype.np)
        q = np.round(x / tensor.quant.scale[0]) + tensor.quant.zero_point[0]
        return np.clip(q, info.min, info.max).astype(tensor.dtype.np)
    info = np.iinfo(tensor.dtype.np) if tensor.dtype.np.kind in "iu" else None
    return (np.clip(np.round(x * 10), info.min, info.max) if info else x > 0).astype(tensor.dtype.np)


def make_inputs(graph: Graph, spec, k: int) -> dict[int, np.ndarray]:
    """Inputs of run k: seeded random per run, or the arrays of a .npy/.npz file (same every run).
    A file's arrays must match the model's inputs (names, shapes, values the input type can hold),
    or this raises ScenarioError naming the file, the array and the input."""
    if spec.file is not None:
        return _file_inputs(graph, spec)
    rng = np.random.default_rng([spec.seed, k])
    return {t: _random_input(graph.tensors[t], rng, spec.distribution.value, spec.low, spec.high)
            for t in graph.inputs}


_INPUT_FILES: dict[tuple, dict[str, np.ndarray]] = {}


def _read_input_file(path: Path, where: str) -> dict[str, np.ndarray]:
    """The file's arrays ('' for a .npy), read once per file version; no pickles."""
    try:
        st = path.stat()
        key = (str(path), st.st_mtime_ns, st.st_size)
        if key not in _INPUT_FILES:
            loaded = np.load(path, allow_pickle=False)
            if isinstance(loaded, np.ndarray):
                arrays = {"": loaded}
            else:
                with loaded:
                    arrays = {n: loaded[n] for n in loaded.files}
            _INPUT_FILES.clear()   # one file at a time: a cell reads the same file every run
            _INPUT_FILES[key] = arrays
        return _INPUT_FILES[key]
    except Exception as exc:  # noqa: BLE001 - the file changed since the scenario was loaded, or is corrupt
        raise ScenarioError(f"{where}: {path}: cannot be read: {' '.join(str(exc).split())}") from None


def _file_inputs(graph: Graph, spec) -> dict[int, np.ndarray]:
    where = spec.where or str(spec.file)
    arrays = _read_input_file(spec.file, where)
    names = {graph.tensors[t].name: t for t in graph.inputs}
    if "" in arrays:
        if len(graph.inputs) != 1:
            raise ScenarioError(f"{where}: {spec.file} holds one array but the model has {len(graph.inputs)} inputs "
                                f"({', '.join(names)}): give a .npz with an array named after each")
        pairs = [("", graph.inputs[0])]
    else:
        missing = [n for n in names if n not in arrays]
        if missing:
            raise ScenarioError(f"{where}: {spec.file} has no array for input '{missing[0]}' (it has "
                                f"{', '.join(sorted(arrays)) or 'none'})")
        pairs = [(n, names[n]) for n in names]
    return {t: conform_input(arrays[n], graph, t, f"{where}: {spec.file}: array '{n or graph.tensors[t].name}'")
            for n, t in pairs}


def conform_input(array: np.ndarray, graph: Graph, t: int, what: str) -> np.ndarray:
    tensor = graph.tensors[t]
    target = np.dtype(tensor.dtype.np)
    if array.shape != tuple(tensor.shape):
        raise ScenarioError(f"{what} has shape {list(array.shape)}; input '{tensor.name}' is {list(tensor.shape)}")
    if array.dtype.kind not in "biuf":
        raise ScenarioError(f"{what} holds {array.dtype} values; input '{tensor.name}' takes {target}")
    if target.kind in "iub" and array.size:
        info = np.iinfo(target) if target.kind != "b" else None
        low, high = (info.min, info.max) if info else (0, 1)
        values = array.astype(np.float64) if array.dtype.kind == "f" else array
        if (array.dtype.kind == "f" and not np.all(np.isfinite(values) & (np.round(values) == values))) \
                or values.min() < low or values.max() > high:
            raise ScenarioError(f"{what} holds values that are not {target} (integers in [{low}, {high}]); "
                                f"input '{tensor.name}' is {target}")
    return array.astype(target)


def delegate_factory(specs, profile) -> Callable[[], list]:
    from delegates.external import load_external, load_plugin
    from delegates.registry import make_delegate

    def make() -> list:
        out = []
        for spec in specs:
            options = {k: str(v) for k, v in dict(spec.options).items()}
            if spec.entry_point:
                out.append(load_plugin(spec.entry_point, options))
            elif spec.factory:  # the scenario was loaded with allow_external_delegates
                out.append(load_external(spec.factory, options, declared=True))
            else:
                out.append(make_delegate(spec.kind, profile, **dict(spec.options)))
        return out

    make()  # fail early, before anything runs, on a bad option
    return make


PROFILES: dict[tuple, Any] = {}


def cached_profile(sc):
    """The cell's phone profile, read once per file version (a 10,000-cell matrix on one phone
    reads its profile once)."""
    from sim.profile import PROFILE_DIR, load_profile, profile_files

    path = sc.device_file or PROFILE_DIR / f"{sc.device}.yaml"
    try:   # a derived phone's base too: a refitted base is another phone
        key = tuple(_version(p) for p in profile_files(path))
    except OSError:
        return load_profile(sc.device_file or sc.device)   # let the loader say what is wrong
    if key not in PROFILES:
        if len(PROFILES) > 64:
            PROFILES.clear()
        PROFILES[key] = load_profile(sc.device_file or sc.device)
    return PROFILES[key]


def _version(path) -> tuple:
    st = os.stat(path)
    return str(path), st.st_mtime_ns, st.st_size


def cell_profile(sc):
    """The cell's phone, on the API level the scenario asks for (`api_level:`)."""
    from runtime.ir.errors import ProfileError
    from sim.profile import with_api_level

    try:
        return with_api_level(cached_profile(sc), sc.api_level)
    except ProfileError as exc:
        if sc.api_level is None:
            raise
        raise ScenarioError(f"{sc.source}: api_level: {exc}") from None
