"""Op checks for the ops whose output sizes come from input values: batch<->space, FILL, RANGE, TOPK, segments, NMS."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from runtime.ir.graph import DType
from runtime.ir.optypes import OpType
from runtime.ops.opcheck_base import fmt
from runtime.ops.opcheck_index import EIGHT_BIT, INDEX, MAX_DIM, MOVE_TYPES, check_dims, check_scalar, check_vector

F32, F16, F64 = DType.FLOAT32, DType.FLOAT16, DType.FLOAT64
I8, U8, I16, I32, I64, BOOL = DType.INT8, DType.UINT8, DType.INT16, DType.INT32, DType.INT64, DType.BOOL


def _out_types(c, j: int, allowed: Sequence[DType], what: str) -> DType:
    dtype = c.out_tensor(j).dtype
    if dtype not in allowed:
        names = " or ".join(d.name for d in allowed)
        raise c.fail(f"{c.out_name(j)} ({what}) is {dtype.name}; {names} expected")
    return dtype


def _same_quant(c, k: int = 0, j: int = 0) -> None:
    """8-bit data moved as it is: TFLite requires the output's scale and zero point to be the input's."""
    x, y = c.tensor(k), c.out_tensor(j)
    if x.dtype not in EIGHT_BIT:
        return
    qx, qy = x.quant, y.quant
    same = (qx is None and qy is None) or (qx is not None and qy is not None and qx.zero_point[:1] == qy.zero_point[:1]
                                            and np.float32(qx.scale[0]) == np.float32(qy.scale[0]))
    if not same:
        raise c.fail(f"{c.out_name(j)} has another scale or zero point than {c.name(k)}; "
                     f"{c.op.type.name} moves 8-bit values unchanged, so TFLite requires them equal")


def _rank_in(c, k: int, lo: int, hi: int) -> tuple[int, ...]:
    s = c.shape(k)
    if not lo <= len(s) <= hi:
        raise c.fail(f"{c.name(k)} has shape {fmt(s)}; rank {lo} to {hi} expected")
    return s


# -- batch <-> space -------------------------------------------------------------------------------

_BATCH_SPACE_TYPES = (F32, I8, U8, I16, I32, I64)


def _block_and_pairs(c, what: str):
    x = _rank_in(c, 0, 3, 4)
    c.typed(0, _BATCH_SPACE_TYPES, "input")
    m = len(x) - 2
    c.typed(1, (I32,), "block_shape")
    c.typed(2, (I32,), what)
    block = check_vector(c, 1, "block_shape", size=m)
    if c.shape(2) != (m, 2):
        raise c.fail(f"{c.name(2)} ({what}) has shape {fmt(c.shape(2))}; {fmt((m, 2))} expected")
    pairs = c.ints(2, what)
    _same_quant(c)
    if block is not None and any(b < 1 for b in block):
        raise c.fail(f"{c.name(1)} (block_shape) is {block}; every block size must be >= 1")
    if pairs is not None and any(p < 0 for p in pairs):
        raise c.fail(f"{c.name(2)} ({what}) is {pairs}; they must be >= 0")
    return x, m, block, pairs


def _batch_to_space_nd(c):
    c.arity(3, 3, 1)
    x, m, block, crops = _block_and_pairs(c, "crops")
    if block is None or crops is None:
        return [None]
    blocks = math.prod(block)
    if x[0] % blocks:
        raise c.fail(f"{c.name(0)} has batch {x[0]}, not a multiple of the block size product {blocks}")
    spatial = []
    for i in range(m):
        size = x[1 + i] * block[i] - crops[2 * i] - crops[2 * i + 1]
        if size < 0:
            raise c.fail(f"crops {crops[2 * i:2 * i + 2]} remove more than dimension {1 + i} of "
                         f"{x[1 + i]} x block {block[i]}")
        spatial.append(size)
    return [(x[0] // blocks, *spatial, *x[1 + m:])]


def _space_to_batch_nd(c):
    c.arity(3, 3, 1)
    x, m, block, pads = _block_and_pairs(c, "paddings")
    if block is None or pads is None:
        return [None]
    spatial = []
    for i in range(m):
        size = x[1 + i] + pads[2 * i] + pads[2 * i + 1]
        if size % block[i]:
            raise c.fail(f"dimension {1 + i} of {c.name(0)} {fmt(x)}, padded to {size}, is not a multiple of "
                         f"block size {block[i]}")
        spatial.append(size // block[i])
    return [(x[0] * math.prod(block), *spatial, *x[1 + m:])]


# -- shapes made from values -----------------------------------------------------------------------


def _tile(c):
    c.arity(2, 2, 1)
    x = c.shape(0)
    c.typed(0, MOVE_TYPES, "input")
    c.typed(1, INDEX, "multiples")
    mult = check_vector(c, 1, "multiples", size=len(x))
    if mult is None:
        return [None]
    if any(m < 0 for m in mult):
        raise c.fail(f"{c.name(1)} (multiples) is {mult}; they must be >= 0")
    return [tuple(d * m for d, m in zip(x, mult))]


def _broadcast_to(c):
    c.arity(2, 2, 1)
    x = c.shape(0)
    c.typed(0, MOVE_TYPES, "input")
    c.typed(1, INDEX, "shape")
    if c.shape(1) and c.shape(1)[0] > 8:
        raise c.fail(f"{c.name(1)} (shape) has {c.shape(1)[0]} dimensions; BROADCAST_TO supports at most 8")
    shape = check_dims(c, 1, "shape")
    if shape is None:
        return [None]
    if len(x) > len(shape) or any(d != 1 and d != s for d, s in zip(x[::-1], shape[::-1])):
        raise c.fail(f"{c.name(0)} of shape {fmt(x)} does not broadcast to {list(shape)}")
    return [shape]


def _broadcast_args(c):
    c.arity(2, 2, 1)
    c.typed(0, INDEX, "shape")
    c.same_type(0, 1)
    a, b = check_vector(c, 0, "shape"), check_vector(c, 1, "shape")
    n = max(c.shape(0)[0], c.shape(1)[0])
    if a is not None and b is not None:
        a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
        for k, (p, q) in enumerate(zip(a, b)):
            if p != 1 and q != 1 and p != q:
                raise c.fail(f"shapes {a} and {b} do not broadcast (dimension {k}: {p} vs {q})")
    return [(n,)]


def _fill(c):
    c.arity(2, 2, 1)
    c.typed(0, INDEX, "dims")
    check_scalar(c, 1, "value", (F32, I8, U8, I16, I32, I64, BOOL))
    if c.tensor(1).dtype in EIGHT_BIT:
        _same_quant(c, 1)
    dims = check_dims(c, 0, "dims")
    return [dims]


def range_size(start, limit, delta) -> int:
    """Elements RANGE makes: integers by exact division, floats by float32 ceil(|(limit - start) /
    delta|), as tflite/kernels/range.cc; raises ValueError where TFLite refuses."""
    if delta == 0:
        raise ValueError("delta is 0")
    if (start > limit and delta > 0) or (start < limit and delta < 0):
        raise ValueError(f"delta {delta} does not lead from start {start} to limit {limit}")
    if isinstance(start, (np.floating, float)):
        with np.errstate(all="ignore"):
            size = np.ceil(np.abs((np.float32(limit) - np.float32(start)) / np.float32(delta)))
        if not np.isfinite(size):
            raise ValueError(f"start {start}, limit {limit}, delta {delta} give no finite size")
        return int(size)
    return (abs(int(limit) - int(start)) + abs(int(delta)) - 1) // abs(int(delta))


def _range(c):
    c.arity(3, 3, 1)
    start = check_scalar(c, 0, "start", (I32, I64, F32))
    c.same_type(0, 1, 2)
    limit, delta = check_scalar(c, 1, "limit"), check_scalar(c, 2, "delta")
    if start is None or limit is None or delta is None:
        return [None]
    try:
        n = range_size(start, limit, delta)
    except ValueError as exc:
        raise c.fail(f"start {start}, limit {limit}, delta {delta}: {exc}") from None
    if n > MAX_DIM:
        raise c.fail(f"start {start}, limit {limit}, delta {delta} make {n} elements, above 2**31 - 1")
    return [(n,)]


def _rank(c):
    c.arity(1, 1, 1)
    c.shape(0)
    c.out_type(I32)
    return [()]


def _one_hot(c):
    c.arity(4, 4, 1)
    x = c.shape(0)
    c.typed(0, INDEX, "indices")
    depth = check_scalar(c, 1, "depth", (I32,))
    c.typed(2, (F32, I8, U8, I32, I64, BOOL), "on_value")
    c.same_type(2, 3)
    check_scalar(c, 2, "on_value")
    check_scalar(c, 3, "off_value")
    axis = c.opts.axis
    if not -1 <= axis <= len(x):
        raise c.fail(f"options.axis is {axis}; -1 to {len(x)} expected for indices of rank {len(x)}")
    if depth is None:
        return [None]
    if not 0 <= depth <= MAX_DIM:
        raise c.fail(f"{c.name(1)} (depth) is {depth}; it must be >= 0")
    a = len(x) if axis == -1 else axis
    return [x[:a] + (int(depth),) + x[a:]]


# -- value-dependent selections --------------------------------------------------------------------


def _where(c):
    c.arity(1, 1, 1)
    x = c.shape(0)
    c.typed(0, (BOOL, F32, I8, U8, I32, I64), "condition")
    c.out_type(I64)
    v = c.value(0)
    return [None if v is None else (int(np.count_nonzero(v)), len(x))]


def _unique(c):
    c.arity(1, 1, 2)
    x = c.rank(0, 1)
    c.typed(0, (F32, I8, U8, I16, I32, I64), "input")
    idx = c.opts.idx_out_type
    want = {2: I32, 4: I64}.get(idx)
    if want is None:
        raise c.fail(f"options.idx_out_type is {idx}; INT32 (2) or INT64 (4) expected")
    if c.out_tensor(0).dtype is not c.tensor(0).dtype:
        raise c.fail(f"{c.out_name(0)} is {c.out_tensor(0).dtype.name}; the input's {c.tensor(0).dtype.name} expected")
    c.out_type(want, 1)
    v = c.value(0)
    return [None if v is None else (int(np.unique(v).size),), x]


def _topk(c):
    c.arity(2, 2, 2)
    x = c.shape(0)
    c.typed(0, (F32, I8, U8, I16, I32, I64), "input")
    k = check_scalar(c, 1, "k", (I32,), vector_ok=True)
    if c.out_tensor(0).dtype is not c.tensor(0).dtype:
        raise c.fail(f"{c.out_name(0)} is {c.out_tensor(0).dtype.name}; the input's {c.tensor(0).dtype.name} expected")
    _out_types(c, 1, (I32,), "indices")
    _same_quant(c)
    if not x:
        raise c.fail(f"{c.name(0)} is a scalar; TOPK_V2 needs rank 1 or more")
    if k is None:
        return [None, None]
    if not 0 <= k <= x[-1]:
        raise c.fail(f"{c.name(1)} (k) is {k}; it must be in [0, {x[-1]}], the last dimension of {c.name(0)}")
    return [x[:-1] + (int(k),)] * 2


def _segment_ids(c, data: tuple[int, ...], rank_one: bool):
    c.typed(0, (F32, I32), "data")
    c.typed(1, (I32,), "segment_ids")
    ids = c.shape(1)
    if (rank_one and len(ids) != 1) or len(ids) > len(data) or data[:len(ids)] != ids or not ids:
        raise c.fail(f"{c.name(1)} (segment_ids) of shape {fmt(ids)} is not a prefix of data {fmt(data)}")
    return ids


def _segment_sum(c):
    c.arity(2, 2, 1)
    data = c.shape(0)
    _segment_ids(c, data, rank_one=True)
    ids = c.value(1)
    if ids is None:
        return [None]
    ids = [int(v) for v in np.asarray(ids).reshape(-1)]
    # Ids are sorted and step by 0 or 1 (tflite/kernels/segment_sum.cc: no empty segment between).
    steps = [b - a for a, b in zip(ids, ids[1:])]
    if ids and (ids[0] < 0 or any(d not in (0, 1) for d in steps)):
        raise c.fail(f"{c.name(1)} (segment_ids) {ids[:16]} do not rise by 0 or 1 from one to the next")
    return [((ids[-1] + 1) if ids else 0,) + data[1:]]


def _unsorted_segment(c):
    c.arity(3, 3, 1)
    data = c.shape(0)
    ids = _segment_ids(c, data, rank_one=False)
    n = check_scalar(c, 2, "num_segments", (I32,), vector_ok=True)
    values = c.value(1)
    if n is None or values is None:
        return [None]
    if not 0 <= n <= MAX_DIM:
        raise c.fail(f"{c.name(2)} (num_segments) is {n}; it must be >= 0")
    top = int(np.max(values)) if np.size(values) else -1
    if top >= n:
        raise c.fail(f"{c.name(1)} (segment_ids) holds {top}, not below num_segments {n}")
    return [(int(n),) + data[len(ids):]]


def _nms(c):
    soft = c.op.type is OpType.NON_MAX_SUPPRESSION_V5
    c.arity(6 if soft else 5, 6 if soft else 5, 3 if soft else 2)
    boxes = c.rank(0, 2)
    c.typed(0, (F32,), "boxes")
    c.typed(1, (F32,), "scores")
    if boxes[1] != 4 or c.shape(1) != boxes[:1]:
        raise c.fail(f"boxes {fmt(boxes)} and scores {fmt(c.shape(1))} must be [n, 4] and [n]")
    for k, what in ((3, "iou_threshold"), (4, "score_threshold")) + (((5, "soft_nms_sigma"),) if soft else ()):
        check_scalar(c, k, what, (F32,))
    if soft:
        sigma = check_scalar(c, 5, "soft_nms_sigma")
        if sigma is not None and not sigma >= 0:
            raise c.fail(f"{c.name(5)} (soft_nms_sigma) is {sigma}; it must be >= 0")
    _out_types(c, 0, (I32,), "selected indices")
    if soft:
        _out_types(c, 1, (F32,), "selected scores")
    _out_types(c, len(c.op.outputs) - 1, (I32,), "number selected")
    n = check_scalar(c, 2, "max_output_size", (I32,))
    if n is not None and n < 0:
        raise c.fail(f"{c.name(2)} (max_output_size) is {n}; it must be >= 0")
    # A constant max_output_size fixes the selection outputs' length (padded with zeros);
    # otherwise they hold exactly the boxes selected.
    picked = (int(n),) if n is not None and c.tensor(2).is_constant else None
    return [picked, picked, ()] if soft else [picked, ()]


RULES = {
    OpType.BATCH_TO_SPACE_ND: _batch_to_space_nd, OpType.SPACE_TO_BATCH_ND: _space_to_batch_nd,
    OpType.TILE: _tile, OpType.BROADCAST_TO: _broadcast_to, OpType.BROADCAST_ARGS: _broadcast_args,
    OpType.FILL: _fill, OpType.RANGE: _range, OpType.RANK: _rank, OpType.ONE_HOT: _one_hot, OpType.WHERE: _where,
    OpType.UNIQUE: _unique, OpType.TOPK_V2: _topk, OpType.SEGMENT_SUM: _segment_sum,
    **{t: _unsorted_segment for t in (OpType.UNSORTED_SEGMENT_SUM, OpType.UNSORTED_SEGMENT_PROD,
                                      OpType.UNSORTED_SEGMENT_MAX, OpType.UNSORTED_SEGMENT_MIN)},
    OpType.NON_MAX_SUPPRESSION_V4: _nms, OpType.NON_MAX_SUPPRESSION_V5: _nms,
}

# Ops whose outputs take a type of their own, checked by their rules above.
OWN_OUTPUT_TYPE = frozenset({
    OpType.RANK, OpType.WHERE, OpType.UNIQUE, OpType.TOPK_V2, OpType.NON_MAX_SUPPRESSION_V4,
    OpType.NON_MAX_SUPPRESSION_V5,
})
