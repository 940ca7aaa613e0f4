"""SOFTMAX (with beta) and LOG_SOFTMAX over the last axis, in float32 as TFLite's reference."""

from __future__ import annotations

import numpy as np

from runtime.ops.base import Node


def softmax(node: Node, x: np.ndarray) -> np.ndarray:
    beta = np.float32(node.options.beta if node.options is not None else 1.0)
    e = np.exp((x - x.max(axis=-1, keepdims=True)) * beta)
    return e / e.sum(axis=-1, keepdims=True, dtype=np.float32)


def log_softmax(node: Node, x: np.ndarray) -> np.ndarray:
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True, dtype=np.float32))
