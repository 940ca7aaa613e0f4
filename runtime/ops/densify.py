"""DENSIFY: the reader already expanded the sparse constant, so the op only hands on a dense copy."""

from __future__ import annotations

import numpy as np

from runtime.ops.base import Node


def densify(node: Node, x: np.ndarray) -> np.ndarray:
    # tflite_io densifies sparse constants at load time (LiteRT does it once, in Prepare).
    return np.array(x, copy=True)
