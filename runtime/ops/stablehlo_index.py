"""STABLEHLO_GATHER, STABLEHLO_SCATTER and STABLEHLO_REDUCE_WINDOW as LiteRT's kernels compute them
(tflite/kernels/stablehlo_gather.cc, stablehlo_scatter.cc, stablehlo_reduce_window.cc). Every element
type is moved or combined as raw values: 8-bit data is not requantized, integer arithmetic wraps.

Scatter and reduce-window name a body subgraph; LiteRT's kernels run no body but read the type of its
one op (scatter: none at all means "replace") and apply that computation themselves. The checks
(runtime/ops/opcheck_misc.py) refuse every other body before a kernel runs."""

from __future__ import annotations

import itertools
import math

import numpy as np

from runtime.ops.base import Node
from runtime.ops.stablehlo import REDUCERS, pad_positions, window_output_shape
from runtime.ir.options import ReduceWindowFunction
from runtime.ir.optypes import OpType

# -- body subgraphs ---------------------------------------------------------------------------------

# scatter: the update computations stablehlo_scatter.cc recognises (only StableHLO op codes).
SCATTER_BODIES = {
    (): "update", (OpType.STABLEHLO_ADD,): "add", (OpType.STABLEHLO_MULTIPLY,): "multiply",
    (OpType.STABLEHLO_MAXIMUM,): "maximum", (OpType.STABLEHLO_MINIMUM,): "minimum",
}
# reduce_window: one op, a TFLite builtin or its StableHLO twin (GetBodyFunction). The kernel would
# take STABLEHLO_AND and STABLEHLO_OR too, but LiteRT has no kernel for them, so no model holding one loads.
WINDOW_BODIES = {
    (OpType.ADD,): ReduceWindowFunction.ADD, (OpType.STABLEHLO_ADD,): ReduceWindowFunction.ADD,
    (OpType.MUL,): ReduceWindowFunction.MUL, (OpType.STABLEHLO_MULTIPLY,): ReduceWindowFunction.MUL,
    (OpType.MAXIMUM,): ReduceWindowFunction.MAXIMUM, (OpType.STABLEHLO_MAXIMUM,): ReduceWindowFunction.MAXIMUM,
    (OpType.MINIMUM,): ReduceWindowFunction.MINIMUM, (OpType.STABLEHLO_MINIMUM,): ReduceWindowFunction.MINIMUM,
    (OpType.LOGICAL_AND,): ReduceWindowFunction.ALL, (OpType.LOGICAL_OR,): ReduceWindowFunction.ANY,
}


def body_ops(graph, k: int) -> tuple[OpType, ...] | None:
    """The op types of subgraph k of the model (0: the main graph), in plan order; None when the
    model has no subgraph k."""
    subgraphs = getattr(graph, "subgraphs", ())
    if not 0 <= k <= len(subgraphs):
        return None
    return tuple(op.type for op in (graph if k == 0 else subgraphs[k - 1]).ops)


# -- STABLEHLO_GATHER ---------------------------------------------------------------------------------


def stablehlo_gather(node: Node, x: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Each batch position reads a slice_sizes block of the operand. Its start comes from the
    index vector (scattered to operand dimensions by start_index_map) and is clipped so that the
    whole block lies inside the operand, as ClipStartingIndex does. The block's non-collapsed
    dimensions become the output's offset_dims, the batch dimensions fill the rest in order."""
    o = node.options
    rank, sizes = x.ndim, o.slice_sizes
    vectors = np.moveaxis(indices.astype(np.int64, copy=False), o.index_vector_dim, -1)
    batch = vectors.shape[:-1]
    kept = [d for d in range(rank) if d not in o.collapsed_slice_dims]
    block = (1,) * len(kept)
    starts = [np.zeros(batch, np.int64)] * rank
    for k, d in enumerate(o.start_index_map):
        starts[d] = vectors[..., k]
    where = []
    for d in range(rank):
        start = np.clip(starts[d], 0, max(x.shape[d] - sizes[d], 0)).reshape(batch + block)
        if d in kept:
            j = kept.index(d)
            start = start + np.arange(sizes[d]).reshape((1,) * len(batch) + block[:j] + (-1,) + block[j + 1:])
        where.append(start)
    picked = x[tuple(where)] if rank else np.broadcast_to(x, batch)
    picked = np.broadcast_to(picked, batch + tuple(sizes[d] for d in kept))
    return np.ascontiguousarray(picked.transpose(_gather_order(len(batch), len(kept), o.offset_dims)))


def _gather_order(batch: int, kept: int, offset_dims) -> list[int]:
    """Output axis p takes the next block axis where p is an offset dim, else the next batch axis."""
    order, b, s = [], 0, batch
    for p in range(batch + kept):
        if p in offset_dims:
            order.append(s)
            s += 1
        else:
            order.append(b)
            b += 1
    return order


# -- STABLEHLO_SCATTER --------------------------------------------------------------------------------


def stablehlo_scatter(node: Node, x: np.ndarray, indices: np.ndarray, updates: np.ndarray) -> np.ndarray:
    """The operand with every update combined into the element it targets, one at a time in the
    updates' row-major order (each reads the output as it stands, so repeated targets accumulate).
    Targets past the end of a dimension are skipped, as LiteRT's IsInBounds does; a negative one
    would make LiteRT write another element than it names, so it is refused."""
    o = node.options
    how = SCATTER_BODIES[body_ops(node.graph, o.update_computation_subgraph_index)]
    target, inside = _scatter_targets(node, x.shape, indices, updates.shape)
    out = np.array(x, copy=True).reshape(-1)
    flat, values = target[inside], updates[inside]
    if how == "update":  # the last update to an element stays
        last = len(flat) - 1 - np.unique(flat[::-1], return_index=True)[1]
        out[flat[last]] = values[last]
    elif how in ("add", "multiply"):
        getattr(np, how).at(out, flat, values)
    else:
        _extremum_at(out, flat, values, how == "maximum", x.reshape(-1))
    return out.reshape(x.shape)


def _scatter_targets(node: Node, shape, indices: np.ndarray, ushape) -> tuple[np.ndarray, np.ndarray]:
    """(flat operand index, in bounds) per update element. Update dimensions that are not window
    dimensions walk the indices' batch dimensions in order; window dimension k (in the order
    update_window_dims lists them) walks the k-th operand dimension not in inserted_window_dims."""
    o = node.options
    vectors = np.moveaxis(indices.astype(np.int64, copy=False), o.index_vector_dim, -1)
    scatter_axes = [a for a in range(len(ushape)) if a not in o.update_window_dims]
    placed = [1] * len(ushape)
    for j, a in enumerate(scatter_axes):
        placed[a] = vectors.shape[j]
    windows = [d for d in range(len(shape)) if d not in o.inserted_window_dims]
    flat = np.zeros(ushape, np.int64)
    inside = np.ones(ushape, bool)
    negative = np.zeros(ushape, bool)
    for d, size in enumerate(shape):
        coord = np.zeros((1,) * len(ushape), np.int64)
        if d in o.scatter_dims_to_operand_dims:
            coord = vectors[..., list(o.scatter_dims_to_operand_dims).index(d)].reshape(placed)
        if d in windows:
            a = o.update_window_dims[windows.index(d)]
            coord = coord + np.arange(ushape[a]).reshape([-1 if k == a else 1 for k in range(len(ushape))])
        coord = np.broadcast_to(coord, ushape)
        negative |= coord < 0
        inside &= coord < size
        flat = flat * size + np.clip(coord, 0, size)
    if (negative & inside).any():  # LiteRT skips an update only when some index is past the end
        where = tuple(int(i) for i in np.argwhere(negative & inside)[0])
        raise node.fail(f"update {list(where)} targets a negative index of the operand; LiteRT's kernel checks "
                        f"only the upper bound and would write another element")
    return flat, inside & ~negative


def _extremum_at(out: np.ndarray, flat: np.ndarray, values: np.ndarray, biggest: bool, original: np.ndarray) -> None:
    """std::max(acc, update) keeps acc unless acc < update: a NaN update is passed over and a NaN
    already in the operand stays. fmax/fmin skip NaN updates; the operand's NaNs are put back."""
    if out.dtype.kind != "f":
        (np.maximum if biggest else np.minimum).at(out, flat, values)
        return
    (np.fmax if biggest else np.fmin).at(out, flat, values)
    nan = np.isnan(original)
    out[nan] = original[nan]


# -- STABLEHLO_REDUCE_WINDOW --------------------------------------------------------------------------


def window_attributes(o, rank: int) -> tuple[list[int], ...]:
    """(window, strides, base dilations, window dilations, padding) with the parser's defaults for
    the absent ones: strides and dilations 1, padding 0 (flatbuffer_conversions.cc)."""
    ones = (1,) * rank
    return (list(o.window_dimensions), list(o.window_strides or ones), list(o.base_dilations or ones),
            list(o.window_dilations or ones), list(o.padding or (0,) * (2 * rank)))


def stablehlo_reduce_window(node: Node, x: np.ndarray, init: np.ndarray) -> np.ndarray:
    """The input dilated (base_dilations) and padded or cropped (padding), both filled with the
    init value, then reduced over each window exactly as REDUCE_WINDOW does: every output starts
    at the init value and takes its window's elements one at a time in row-major order."""
    o = node.options
    fn = REDUCERS[WINDOW_BODIES[body_ops(node.graph, o.body_subgraph_index)]]
    window, strides, base, dilations, pad = window_attributes(o, x.ndim)
    is_bool = x.dtype == np.bool_
    data = x.astype(np.int8) if is_bool else x
    value = np.asarray(init).reshape(-1)[0]
    if any(b != 1 for b in base) or any(pad):
        axes = [pad_positions(d, pad[2 * a], pad[2 * a + 1], base[a] - 1) for a, d in enumerate(x.shape)]
        padded = np.full([a[0] for a in axes], value, data.dtype)
        padded[np.ix_(*(a[2] for a in axes))] = data[np.ix_(*(a[1] for a in axes))]
        data = padded
    out_shape = window_output_shape(data.shape, window, strides, dilations)
    acc = np.full(out_shape, value, data.dtype)
    if math.prod(out_shape):
        with np.errstate(over="ignore", invalid="ignore"):
            for tap in itertools.product(*(range(w) for w in window)):
                taken = tuple(slice(t * r, t * r + s * (n - 1) + 1, s)
                              for t, r, s, n in zip(tap, dilations, strides, out_shape))
                acc = fn(acc, data[taken]).astype(data.dtype, copy=False)
    return acc != 0 if is_bool else acc
