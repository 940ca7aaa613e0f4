"""The model zoo: builders by name, so scenarios and the CLI can ask for `mobilenet_v1(alpha=0.5)`."""

from __future__ import annotations

import inspect
import math
from typing import Any, Callable

from runtime.ir.errors import ModelError
from runtime.ir.graph import Graph
from runtime.zoo import models

MODELS: dict[str, Callable[..., Graph]] = {
    "mobilenet_v1": models.mobilenet_v1,
    "mobilenet_v2": models.mobilenet_v2,
    "squeezenet": models.squeezenet,
    "tiny_cnn": models.tiny_cnn,
}


# Where the builders are known to build and run, and what keeps a model small enough to build
# (a builder runs every layer on a sample input while it builds): resolution and alpha set the
# activations' size, classes the classifier's weights. Below its minimum resolution SqueezeNet's
# pooling stack leaves nothing; below alpha 1/32 MobileNet v1's first layer has no channels.
LIMITS: dict[str, tuple[float, float]] = {"resolution": (8, 512), "alpha": (0.05, 2.0), "classes": (1, 10_000),
                                          "seed": (0, 2**32 - 1)}
_MODEL_LIMITS: dict[str, dict[str, tuple[float, float]]] = {"squeezenet": {"resolution": (35, 512)}}


def arg_problem(name: str, key: str, value: Any) -> str | None:
    """What is wrong with `value` for argument `key` of zoo model `name` (its type from the
    builder's default, its range from LIMITS), or None when it is fine."""
    default = inspect.signature(MODELS[name]).parameters[key].default
    if isinstance(default, int) and not isinstance(default, bool):
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be an integer, got {value!r}"
    elif isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"must be a number, got {value!r}"
        if not math.isfinite(value):
            return f"must be a finite number, got {value!r}"
    low, high = _MODEL_LIMITS.get(name, {}).get(key) or LIMITS.get(key, (None, None))
    if low is not None and not low <= value <= high:
        shown = value if abs(value) < 10 ** 15 else "a huge number"
        return f"must be in [{low}, {high}] for {name}, got {shown}"
    return None


def build(name: str, **kwargs: Any) -> Graph:
    """Build a zoo model by name; unknown names or arguments, and values out of range, raise
    ModelError naming them."""
    if name not in MODELS:
        raise ModelError(f"unknown zoo model '{name}'; known: {', '.join(sorted(MODELS))}")
    params = inspect.signature(MODELS[name]).parameters
    for key, value in kwargs.items():
        if key not in params:
            raise ModelError(f"zoo model '{name}' has no argument '{key}'; it takes {', '.join(params)}")
        problem = arg_problem(name, key, value)
        if problem:
            raise ModelError(f"zoo model '{name}': {key} {problem}")
    return MODELS[name](**kwargs)
