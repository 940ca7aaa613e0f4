"""The one model loader: a .tflite file or a zoo builder with its arguments, then post-training quantization."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from runtime.ir.errors import ModelError, TestbedError
from runtime.ir.graph import Graph

__all__ = ["CALIBRATION_SAMPLES", "CALIBRATION_SEED", "FLAGS", "KEYS", "ModelSource", "Names", "QUANTIZATIONS",
           "calibration_samples", "load_model", "parse_zoo_args"]

QUANTIZATIONS = ("none", "float16", "dynamic_range", "int8", "uint8")
CALIBRATION_SAMPLES = 4
CALIBRATION_SEED = 1234


@dataclass(frozen=True)
class Names:
    """How the caller spells each part of a model source, so an error names what the user wrote."""

    path: str = "path"
    zoo: str = "zoo"
    zoo_args: str = "zoo_args"
    quantization: str = "quantization"


FLAGS = Names("--graph", "--zoo", "--zoo_args", "--quantization")
KEYS = Names("model.path", "model.zoo", "model.args", "model.quantization")


@dataclass(frozen=True)
class ModelSource:
    """A .tflite path or a zoo model name (exactly one), the zoo builder's arguments (a mapping, or
    the command line's "K=V,K=V" text), the quantization, and its calibration data: `samples` (each
    one float32 array per graph input, in input order), or CALIBRATION_SAMPLES seeded Gaussian
    samples drawn from `seed`."""

    path: str | os.PathLike | None = None
    zoo: str | None = None
    zoo_args: Mapping[str, Any] | str = field(default_factory=dict)
    quantization: str = "none"
    samples: Sequence | None = None
    seed: int = CALIBRATION_SEED


def calibration_samples(graph: Graph, seed: int = CALIBRATION_SEED,
                        count: int = CALIBRATION_SAMPLES) -> list[list[np.ndarray]]:
    """`count` standard-normal samples, each with one array for every graph input."""
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(graph.tensors[t].shape).astype(np.float32) for t in graph.inputs]
            for _ in range(count)]


def load_model(source: ModelSource, names: Names = Names()) -> Graph:
    """The Graph `source` describes; a ModelError naming the file, or the flag or key in `names`."""
    _check(source, names)
    graph = _read(source.path) if source.path is not None else _build(source, names)
    return _quantize(graph, source, names)


def _check(source: ModelSource, names: Names) -> None:
    if (source.path is None) == (source.zoo is None):
        raise ModelError(f"give exactly one of {names.path} FILE.tflite or {names.zoo} NAME")
    if source.path is not None and source.zoo_args:
        raise ModelError(f"{names.zoo_args} applies to {names.zoo} models only")
    if source.quantization not in QUANTIZATIONS:
        raise ModelError(f"{names.quantization} must be one of {', '.join(QUANTIZATIONS)}, "
                         f"not {source.quantization!r}")


def parse_zoo_args(text: str, names: Names = Names()) -> dict[str, Any]:
    """"alpha=0.5,resolution=128" as {"alpha": 0.5, "resolution": 128}: int, else float, else the text."""
    args: dict[str, Any] = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ModelError(f"{names.zoo_args}: '{pair}' is not key=value")
        if key in args:  # which one was meant is the user's to say (repeated flags are joined)
            raise ModelError(f"{names.zoo_args}: '{key}' is given twice ({args[key]!r} and {_scalar(value)!r})")
        args[key] = _scalar(value)
    return args


def _scalar(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def _read(path: str | os.PathLike) -> Graph:
    from runtime.model import tflite_read as tflite_io

    return tflite_io.load(path)


def _build(source: ModelSource, names: Names) -> Graph:
    import runtime.zoo as zoo

    args = parse_zoo_args(source.zoo_args, names) if isinstance(source.zoo_args, str) else dict(source.zoo_args)
    try:
        return zoo.build(source.zoo, **args)
    except TestbedError:
        raise
    except (TypeError, ValueError, ZeroDivisionError) as exc:  # a value the builder cannot use
        raise ModelError(f"{names.zoo_args}: zoo model '{source.zoo}' cannot be built with {args}: "
                         f"{' '.join(str(exc).split())}") from None


def _quantize(graph: Graph, source: ModelSource, names: Names) -> Graph:
    from runtime.zoo.quantize import CALIBRATED, quantize

    mode = source.quantization
    if mode == "none":
        return graph
    samples = None
    if mode in CALIBRATED:
        samples = source.samples if source.samples is not None else calibration_samples(graph, source.seed)
    try:
        return quantize(graph, mode, representative_data=samples)
    except ModelError as exc:  # e.g. a model that is already quantized: say which model and which flag
        model = source.path if source.path is not None else f"zoo model '{source.zoo}'"
        raise ModelError(f"{model}: {names.quantization} {mode}: {exc}") from None
