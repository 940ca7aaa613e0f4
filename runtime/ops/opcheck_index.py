"""Op checks for the index ops: gather/scatter by index, reversal, diagonals, update slices, lookups, buckets.

The ops of runtime/ops/index.py that read or write elements at given indices: what TFLite's Prepare (and,
for values known only at run time, its Eval) refuses, and the output shapes. Registered in
runtime/ops/opcheck.py's _RULES. Its helpers for scalar, vector and shape inputs serve
runtime/ops/opcheck_sizing.py as well.

Each rule gets the op under check (runtime.ops.opcheck_base.OpCheck) and returns its output shapes, None where
only a run-time value can tell (the op is then checked again on those values, before its kernel
runs)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from runtime.ir.graph import DType
from runtime.ir.optypes import OpType
from runtime.ops.opcheck_base import fmt

F32, F16, F64 = DType.FLOAT32, DType.FLOAT16, DType.FLOAT64
I8, U8, I16, I32, I64, BOOL = DType.INT8, DType.UINT8, DType.INT16, DType.INT32, DType.INT64, DType.BOOL
INDEX = (I32, I64)
EIGHT_BIT = (I8, U8)
# TFLite's shape-carrying ints are int32; a dimension above that is damage, whatever it asks for.
MAX_DIM = 2**31 - 1
MOVE_TYPES = (F32, I8, U8, I16, I32, I64, BOOL)


def check_scalar(c, k: int, what: str, allowed: Sequence[DType] | None = None, vector_ok: bool = False):
    """The value of a scalar input (rank 0; [1] where `vector_ok`), or None until it is known."""
    if allowed is not None:
        c.typed(k, allowed, what)
    s = c.shape(k)
    if s and not (vector_ok and s == (1,)):
        raise c.fail(f"{c.name(k)} ({what}) has shape {fmt(s)}; a scalar expected")
    v = c.value(k)
    return None if v is None else np.asarray(v).reshape(-1)[0]


def check_vector(c, k: int, what: str, size: int | None = None) -> list[int] | None:
    """A 1-D int32/int64 input's values (None until known)."""
    s = c.shape(k)
    if len(s) != 1:
        raise c.fail(f"{c.name(k)} ({what}) has shape {fmt(s)}; rank 1 expected")
    return c.ints(k, what, size=size)


def check_dims(c, k: int, what: str) -> tuple[int, ...] | None:
    """An output shape given as values: each dimension in [0, 2**31)."""
    dims = check_vector(c, k, what)
    if dims is None:
        return None
    if any(not 0 <= d <= MAX_DIM for d in dims):
        raise c.fail(f"{c.name(k)} ({what}) is {dims}; dimensions must be in [0, 2**31)")
    return tuple(dims)


# -- gather / scatter ------------------------------------------------------------------------------


def _gather_nd(c):
    c.arity(2, 2, 1)
    p, i = c.shape(0), c.shape(1)
    c.typed(0, MOVE_TYPES, "params")
    c.typed(1, (I16, I32, I64), "indices")
    if not p or not i:
        raise c.fail(f"params {fmt(p)} and indices {fmt(i)} must both have rank 1 or more")
    k = i[-1]
    if k > len(p):
        raise c.fail(f"{c.name(1)} (indices) of shape {fmt(i)} index {k} dimensions of params {fmt(p)}")
    _in_range(c, 1, p[:k], "indices")
    return [i[:-1] + p[k:]]


def _in_range(c, k: int, dims: Sequence[int], what: str) -> None:
    """Constant indices (rows of len(dims) values) checked now; others when the kernel runs."""
    v = c.value_of(c.slot(k))
    if v is None or not len(dims):
        return
    ix = np.asarray(v, np.int64).reshape(-1, len(dims))
    bad = (ix < 0) | (ix >= np.asarray(dims, np.int64))
    if np.any(bad):
        row = ix[int(np.argmax(bad.any(axis=1)))].tolist()
        raise c.fail(f"{c.name(k)} ({what}) holds {row}, out of range for dimensions {fmt(dims)}")


def _scatter_nd(c):
    c.arity(3, 3, 1)
    i, u = c.shape(0), c.shape(1)
    c.typed(0, (I32,), "indices")
    c.typed(1, (F32, I8, U8, I32, I64, BOOL), "updates")
    c.same_type(0, 2)
    if not i:
        raise c.fail(f"{c.name(0)} (indices) is a scalar; rank 1 or more expected")
    shape = check_dims(c, 2, "shape")
    if shape is None:
        return [None]
    k = i[-1]
    if k > len(shape) or u != i[:-1] + shape[k:]:
        raise c.fail(f"updates {fmt(u)} do not match indices {fmt(i)} into shape {list(shape)}")
    _in_range(c, 0, shape[:k], "indices")
    return [shape]


def _reverse_v2(c):
    c.arity(2, 2, 1)
    x = c.shape(0)
    c.typed(0, MOVE_TYPES, "input")
    c.typed(1, (I32,), "axis")
    axes = check_vector(c, 1, "axis")
    if axes is not None:
        picked = [c.axis(a, len(x), "reversed axis") for a in axes]
        if len(set(picked)) != len(picked):
            raise c.fail(f"{c.name(1)} (axis) {axes} repeats an axis")
    return [x]


def _reverse_sequence(c):
    c.arity(2, 2, 1)
    x = c.shape(0)
    c.typed(0, (F32, I16, I32, I64, U8), "input")
    c.typed(1, INDEX, "seq_lengths")
    if not x:
        raise c.fail(f"{c.name(0)} is a scalar; REVERSE_SEQUENCE needs rank 2 or more")
    seq = c.axis(c.opts.seq_dim, len(x), "options.seq_dim")
    batch = c.axis(c.opts.batch_dim, len(x), "options.batch_dim")
    if seq == batch:
        raise c.fail(f"options.seq_dim and options.batch_dim are both dimension {seq}")
    lengths = check_vector(c, 1, "seq_lengths", size=x[batch])
    if lengths is not None and any(not 0 <= n <= x[seq] for n in lengths):
        raise c.fail(f"{c.name(1)} (seq_lengths) {lengths} are not all in [0, {x[seq]}]")
    return [x]


# Not BOOL: LiteRT's kernels take it but do not write a diagonal matrix (tests/test_ops_index.py).
_DIAG_TYPES = (F32, I8, U8, I16, I32, I64)


def _matrix_diag(c):
    c.arity(1, 1, 1)
    d = c.shape(0)
    c.typed(0, _DIAG_TYPES, "diagonal")
    if not d:
        raise c.fail(f"{c.name(0)} is a scalar; MATRIX_DIAG needs rank 1 or more")
    return [d + (d[-1],)]


def _matrix_set_diag(c):
    c.arity(2, 2, 1)
    x, d = c.shape(0), c.shape(1)
    c.typed(0, _DIAG_TYPES, "input")
    c.same_type(0, 1)
    if len(x) < 2 or d != x[:-2] + (min(x[-2:]),):
        raise c.fail(f"diagonal {fmt(d)} does not fit input {fmt(x)}; {fmt(x[:-2] + (min(x[-2:]),))} expected"
                     if len(x) >= 2 else f"{c.name(0)} has shape {fmt(x)}; rank 2 or more expected")
    return [x]


def _sparse_to_dense(c):
    c.arity(4, 4, 1)
    i, v = c.shape(0), c.shape(2)
    c.typed(0, INDEX, "indices")
    c.typed(1, INDEX, "output_shape")
    c.typed(2, (F32, I8, U8, I32, I64), "values")
    c.same_type(2, 3)
    check_scalar(c, 3, "default_value")
    if len(i) > 2:
        raise c.fail(f"{c.name(0)} (indices) has shape {fmt(i)}; rank 0 to 2 expected")
    shape = check_dims(c, 1, "output_shape")
    count = 1 if len(i) == 0 else i[0]
    width = i[1] if len(i) == 2 else 1
    if v not in ((), (1,), (count,)) and not (v == (count,)):
        raise c.fail(f"{c.name(2)} (values) has shape {fmt(v)}; a scalar or {count} values expected")
    if shape is None:
        return [None]
    if width != len(shape):
        raise c.fail(f"{c.name(0)} (indices) of shape {fmt(i)} do not index an output of shape {list(shape)}")
    _in_range(c, 0, shape, "indices")
    return [shape]


# -- update slices, lookups, buckets ---------------------------------------------------------------


def _dynamic_update_slice(c):
    c.arity(3, 3, 1)
    x, u = c.shape(0), c.shape(1)
    c.typed(0, (F32, F16, I8, U8, I16, I32, I64, BOOL), "operand")
    c.same_type(0, 1)
    c.typed(2, INDEX, "start_indices")
    if len(u) != len(x) or any(a > b for a, b in zip(u, x)):
        raise c.fail(f"update {fmt(u)} does not fit in operand {fmt(x)}")
    check_vector(c, 2, "start_indices", size=len(x))
    return [x]


def _embedding_lookup(c):
    c.arity(2, 2, 1)
    ids = c.rank(0, 1)
    c.typed(0, (I32,), "lookup ids")
    table = c.shape(1)
    value = c.tensor(1)
    if len(table) < 2:
        raise c.fail(f"{c.name(1)} (the table) has shape {fmt(table)}; rank 2 or more expected")
    c.typed(1, (F32, I8, U8), "table")
    out = c.out_tensor()
    if value.dtype in EIGHT_BIT and out.dtype is F32:  # dequantized rows (dynamic-range tables)
        q = value.quant
        if q is None:
            raise c.fail(f"{c.name(1)} is {value.dtype.name} without quantization parameters; a float "
                         f"lookup dequantizes with them")
        if any(z != 0 for z in q.zero_point):
            raise c.fail(f"{c.name(1)} has a non-zero zero point; TFLite dequantizes lookups symmetrically")
        if len(q.scale) not in (1, table[0]) or (len(q.scale) > 1 and q.axis != 0):
            raise c.fail(f"{c.name(1)} has {len(q.scale)} scales along dimension {q.axis}; one, or one per row, "
                         f"expected")
        if not all(math.isfinite(s) for s in q.scale):
            raise c.fail(f"{c.name(1)} has a non-finite quantization scale")
    elif out.dtype is not value.dtype:
        raise c.fail(f"{c.out_name()} is {out.dtype.name}, but the table is {value.dtype.name}")
    _in_range(c, 0, table[:1], "lookup ids")
    return [ids + table[1:]]


def _bucketize(c):
    c.arity(1, 1, 1)
    c.typed(0, (F32, F64, I32, I64), "input")
    c.out_type(I32)
    bounds = c.opts.boundaries
    if any(not b <= a for a, b in zip(bounds[1:], bounds)) or any(math.isnan(b) for b in bounds):
        raise c.fail(f"options.boundaries {list(bounds)[:8]} are not sorted")
    return [c.shape(0)]


RULES = {
    OpType.GATHER_ND: _gather_nd, OpType.SCATTER_ND: _scatter_nd, OpType.REVERSE_V2: _reverse_v2,
    OpType.REVERSE_SEQUENCE: _reverse_sequence, OpType.MATRIX_DIAG: _matrix_diag,
    OpType.MATRIX_SET_DIAG: _matrix_set_diag, OpType.SPARSE_TO_DENSE: _sparse_to_dense,
    OpType.DYNAMIC_UPDATE_SLICE: _dynamic_update_slice, OpType.EMBEDDING_LOOKUP: _embedding_lookup,
    OpType.BUCKETIZE: _bucketize,
}

# Ops whose outputs take a type of their own, checked by their rules above.
OWN_OUTPUT_TYPE = frozenset({OpType.EMBEDDING_LOOKUP, OpType.BUCKETIZE})
