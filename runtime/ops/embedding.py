"""EMBEDDING_LOOKUP_SPARSE (tflite/kernels/embedding_lookup_sparse.cc): weighted rows of an embedding
table summed per row of a sparse tensor (ids, indices, dense_shape), then SUM, MEAN or SQRTN."""

from __future__ import annotations

import numpy as np

from runtime.ops.base import Node
from runtime.ir.options import CombinerType

F32 = np.float32


def embedding_lookup_sparse(node: Node, ids: np.ndarray, indices: np.ndarray, dense_shape: np.ndarray,
                            weights: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Lookups go to the output row their indices name (all but the last index; row-major). Like
    LiteRT, consecutive lookups into the same row form a run that is combined when the next row
    starts: unsorted indices that come back to a row combine it again on top of its earlier result."""
    combiner = node.options.combiner
    dims = [int(d) for d in dense_shape.reshape(-1)]
    rows = table.shape[0]
    ids = ids.reshape(-1).astype(np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= rows):
        bad = int(ids[(ids < 0) | (ids >= rows)][0])
        raise node.fail(f"id {bad} is out of range for an embedding table of {rows} rows")
    lead = indices.astype(np.int64)[:, :len(dims) - 1]
    if lead.size and np.any((lead < 0) | (lead >= np.array(dims[:-1]))):
        raise node.fail(f"indices fall outside dense_shape {dims}")
    width = int(np.prod(table.shape[1:], dtype=np.int64))
    buckets = int(np.prod(dims[:-1], dtype=np.int64))
    bucket = np.ravel_multi_index(lead.T, dims[:-1]) if lead.shape[1] else np.zeros(len(ids), np.int64)
    out = np.zeros((buckets, width), F32)
    flat = table.reshape(rows, width).astype(F32)
    w = weights.reshape(-1).astype(F32)
    # Runs of equal buckets, in lookup order.
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]]) if len(ids) else np.zeros(0, np.int64)
    ends = np.r_[starts[1:], len(ids)]
    with np.errstate(divide="ignore", invalid="ignore"):
        for lo, hi in zip(starts, ends):
            row = bucket[lo]
            contrib = (flat[ids[lo:hi]] * w[lo:hi, None]).astype(F32)
            # Added one lookup at a time in float32: cumsum keeps that order.
            out[row] = np.cumsum(np.vstack([out[row][None], contrib]), axis=0, dtype=F32)[-1]
            if combiner is CombinerType.MEAN:
                out[row] /= np.cumsum(w[lo:hi], dtype=F32)[-1]
            elif combiner is CombinerType.SQRTN:
                out[row] /= np.sqrt(np.cumsum((w[lo:hi] * w[lo:hi]).astype(F32), dtype=F32)[-1])
    return out.reshape(*dims[:-1], *table.shape[1:])
