"""BATCH_TO_SPACE_ND and SPACE_TO_BATCH_ND: blocks of the spatial dimensions moved to or from the batch."""

from __future__ import annotations

import numpy as np

from runtime.ops.base import Node


def _block(block_shape: np.ndarray) -> list[int]:
    return [int(b) for b in np.asarray(block_shape).reshape(-1)]


def _pairs(values: np.ndarray, m: int) -> list[tuple[int, int]]:
    flat = [int(v) for v in np.asarray(values).reshape(-1)]
    return [(flat[2 * i], flat[2 * i + 1]) for i in range(m)]


def batch_to_space_nd(node: Node, x: np.ndarray, block_shape: np.ndarray, crops: np.ndarray) -> np.ndarray:
    # Batch index b = (block offset) * out_batch + out_b, the block offset's first spatial
    # coordinate the most significant (tflite/kernels/internal/reference/batch_to_space_nd.h).
    block = _block(block_shape)
    m = len(block)
    batch, spatial, rest = x.shape[0], x.shape[1:1 + m], x.shape[1 + m:]
    out_batch = batch // int(np.prod(block, dtype=np.int64))
    y = x.reshape(*block, out_batch, *spatial, *rest)
    order = [m] + [a for i in range(m) for a in (m + 1 + i, i)] + list(range(2 * m + 1, y.ndim))
    y = y.transpose(order).reshape(out_batch, *(s * b for s, b in zip(spatial, block)), *rest)
    index = (slice(None),) + tuple(slice(lo, y.shape[1 + i] - hi) for i, (lo, hi) in enumerate(_pairs(crops, m)))
    return np.ascontiguousarray(y[index])


def space_to_batch_nd(node: Node, x: np.ndarray, block_shape: np.ndarray, paddings: np.ndarray) -> np.ndarray:
    # Padding is the real value 0: a quantized tensor pads with its zero point, which SPACE_TO_BATCH_ND
    # shares with its output (tflite/kernels/space_to_batch_nd.cc).
    block = _block(block_shape)
    m = len(block)
    q = node.input(0).quant
    fill = q.zero_point[0] if q is not None and x.dtype.kind in "iu" else 0
    pads = [(0, 0)] + _pairs(paddings, m) + [(0, 0)] * (x.ndim - 1 - m)
    p = np.pad(x, pads, constant_values=fill)
    batch, rest = p.shape[0], p.shape[1 + m:]
    shape = [batch]
    for s, b in zip(p.shape[1:1 + m], block):
        shape += [s // b, b]
    y = p.reshape(*shape, *rest)
    order = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + list(range(2 * m + 1, y.ndim))
    out_batch = batch * int(np.prod(block, dtype=np.int64))
    return np.ascontiguousarray(y.transpose(order).reshape(out_batch, *shape[1::2], *rest))
