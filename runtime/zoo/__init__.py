"""The model zoo: builders by name, so scenarios and the CLI can ask for `mobilenet_v1(alpha=0.5)`."""

from __future__ import annotations

import inspect
from typing import Any, Callable

from runtime.errors import ModelError
from runtime.graph import Graph
from runtime.zoo import models

MODELS: dict[str, Callable[..., Graph]] = {
    "mobilenet_v1": models.mobilenet_v1,
    "mobilenet_v2": models.mobilenet_v2,
    "squeezenet": models.squeezenet,
    "tiny_cnn": models.tiny_cnn,
}


def build(name: str, **kwargs: Any) -> Graph:
    """Build a zoo model by name; unknown names or arguments raise ModelError naming them."""
    if name not in MODELS:
        raise ModelError(f"unknown zoo model '{name}'; known: {', '.join(sorted(MODELS))}")
    params = inspect.signature(MODELS[name]).parameters
    for key in kwargs:
        if key not in params:
            raise ModelError(f"zoo model '{name}' has no argument '{key}'; it takes {', '.join(params)}")
    return MODELS[name](**kwargs)
