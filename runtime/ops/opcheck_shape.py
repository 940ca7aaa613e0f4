"""Op rules of the core data-movement ops: concatenation, padding, reshapes, transposes, slices, splits, packing, gathers, depth/space.

Each rule gets the op under check (runtime/ops/opcheck_base.py OpCheck) and returns its output shapes, None where
only the run can tell."""

from __future__ import annotations

import math

import numpy as np

from runtime.ir import options as opt
from runtime.ir.graph import DType
from runtime.ir.optypes import OpType
from runtime.ops.opcheck_base import Shape, INDEX_TYPES, fmt, OpCheck


def check_concatenation(c: OpCheck):
    c.arity(1, None, 1)
    shapes = [c.shape(k) for k in range(len(c.op.inputs))]
    rank = len(shapes[0])
    if rank < 1:
        raise c.fail(f"{c.name(0)} is a scalar; CONCATENATION needs rank 1 or more")
    axis = c.axis(c.opts.axis, rank, "options.axis")
    c.same_type(*range(len(shapes)))
    for k, s in enumerate(shapes):
        if len(s) != rank or any(d != e for a, (d, e) in enumerate(zip(s, shapes[0])) if a != axis):
            raise c.fail(f"{c.name(k)} has shape {fmt(s)}, which does not concatenate with {fmt(shapes[0])} "
                         f"along axis {axis}")
    if c.eight_bit:
        c.quantized(*range(len(shapes)), "out")
        y = c.out_tensor().quant
        for k in range(len(shapes)):
            q = c.tensor(k).quant
            if c.tensor(k).dtype is DType.INT8 and (np.float32(q.scale[0]) != np.float32(y.scale[0])
                                                     or q.zero_point[0] != y.zero_point[0]):
                raise c.fail(f"int8 {c.name(k)} has scale/zero point {q.scale[0]}/{q.zero_point[0]}, the output "
                             f"{y.scale[0]}/{y.zero_point[0]}; TFLite requires them equal")
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return [tuple(out)]


def check_pad(c: OpCheck):
    c.arity(2, 3 if c.op.type is OpType.PADV2 else 2, 1)
    x = c.shape(0)
    pads = c.ints(1, "paddings", size=2 * len(x))
    if c.op.type is OpType.PADV2 and c.has(2) and math.prod(c.shape(2)) < 1:
        raise c.fail(f"{c.name(2)} (the pad value) is empty")
    if pads is None:
        return [None]
    mode = getattr(c.opts, "mode", None) if c.op.type is OpType.MIRROR_PAD else None
    out = []
    for a, d in enumerate(x):
        before, after = pads[2 * a], pads[2 * a + 1]
        if before < 0 or after < 0:
            raise c.fail(f"{c.name(1)} pads dimension {a} by {[before, after]}; paddings must be >= 0")
        if mode is not None:
            most = d - 1 if mode is opt.MirrorPadMode.REFLECT else d
            if max(before, after) > most:
                raise c.fail(f"{c.name(1)} pads dimension {a} of size {d} by {[before, after]}; "
                             f"{mode.name} allows at most {max(most, 0)}")
        out.append(d + before + after)
    return [tuple(out)]


def _resolve_shape(c: OpCheck, size: int, target: list[int], where: str) -> Shape:
    if any(d < -1 for d in target) or target.count(-1) > 1:
        raise c.fail(f"{where} {target} is not a shape (dimensions >= 0, at most one -1)")
    known = math.prod(d for d in target if d != -1)
    if -1 in target:
        if known == 0 or size % known:
            raise c.fail(f"cannot reshape {size} elements to {where} {target}")
        return tuple(size // known if d == -1 else d for d in target)
    if known != size:
        raise c.fail(f"cannot reshape {fmt(c.shape(0))} ({size} elements) to {where} {target}")
    return tuple(target)


def check_reshape(c: OpCheck):
    c.arity(1, 2, 1)
    x = c.shape(0)
    if c.has(1) and len(c.shape(1)) == 1 and c.shape(1)[0] > 0:
        target = c.ints(1, "new shape")
        if target is None:
            return [None]
        where = c.name(1)
    elif c.opts is not None and c.opts.new_shape:
        target, where = list(c.opts.new_shape), "options.new_shape"
    else:
        target, where = list(c.out_tensor().shape), f"the declared shape of {c.out_name()}"
    return [_resolve_shape(c, math.prod(x), target, where)]


def squeeze(c: OpCheck):
    c.arity(1, 1, 1)
    x = c.shape(0)
    dims = c.opts.squeeze_dims if c.opts is not None else ()
    if not dims:
        return [tuple(d for d in x if d != 1)]
    picked = [c.axis(d, len(x), "options.squeeze_dims entry") for d in dims]
    if len(set(picked)) != len(picked):
        raise c.fail(f"options.squeeze_dims {list(dims)} repeats an axis")
    for a in picked:
        if x[a] != 1:
            raise c.fail(f"options.squeeze_dims names axis {a} of {c.name(0)} {fmt(x)}, which is not 1")
    return [tuple(d for a, d in enumerate(x) if a not in picked)]


def expand_dims(c: OpCheck):
    c.arity(2, 2, 1)
    x = c.shape(0)
    axis = c.ints(1, "axis", min_size=1)
    if axis is None:
        return [None]
    a = axis[0]
    if not -(len(x) + 1) <= a <= len(x):
        raise c.fail(f"{c.name(1)} is {a}, out of range for rank {len(x)} + 1")
    a = a + len(x) + 1 if a < 0 else a
    return [x[:a] + (1,) + x[a:]]


def transpose(c: OpCheck):
    c.arity(2, 2, 1)
    x = c.shape(0)
    perm = c.ints(1, "permutation", size=len(x))
    if perm is None:
        return [None]
    if sorted(perm) != list(range(len(x))):
        raise c.fail(f"{c.name(1)} is {perm}, not a permutation of the {len(x)} axes of {c.name(0)}")
    return [tuple(x[p] for p in perm)]


def strided_slice(c: OpCheck):
    c.arity(3, 4, 1)
    x = c.shape(0)
    n = math.prod(c.shape(1))
    begin = c.ints(1, "begin")
    end = c.ints(2, "end", size=n)
    strides = c.ints(3, "strides", size=n) if c.has(3) else [1] * n
    if begin is None or end is None or strides is None:
        return [None]
    o = c.opts
    index: list = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides)):
        if s == 0:
            raise c.fail(f"{c.name(3)} entry {i} is 0")
        if o.ellipsis_mask >> i & 1:
            index.append(Ellipsis)
        elif o.new_axis_mask >> i & 1:
            index.append(None)
        elif o.shrink_axis_mask >> i & 1:
            index.append(b)
        else:
            stop = b + e if o.offset else e
            index.append(slice(None if o.begin_mask >> i & 1 else b, None if o.end_mask >> i & 1 else stop, s))
    # The kernel indexes with NumPy; a zero-stride view of the input's shape gives the same
    # result shape (or error) without allocating anything.
    try:
        return [np.broadcast_to(np.zeros((), np.uint8), x)[tuple(index)].shape]
    except (IndexError, ValueError, TypeError) as exc:
        raise c.fail(f"begin {begin}, end {end}, strides {strides} do not slice {c.name(0)} {fmt(x)}: {exc}") from None


def check_slice(c: OpCheck):
    c.arity(3, 3, 1)
    x = c.shape(0)
    begin = c.ints(1, "begin", size=len(x))
    size = c.ints(2, "size", size=len(x))
    if begin is None or size is None:
        return [None]
    out = []
    for a, (d, b, s) in enumerate(zip(x, begin, size)):
        if not 0 <= b <= d or s < -1 or (s >= 0 and b + s > d):
            raise c.fail(f"begin {b} and size {s} do not fit dimension {a} of {c.name(0)} {fmt(x)}")
        out.append(d - b if s == -1 else s)
    return [tuple(out)]


def check_split(c: OpCheck):
    c.arity(2, 2, None)
    x = c.shape(1)
    n = c.option("num_splits", 1)
    if n != len(c.op.outputs):
        raise c.fail(f"options.num_splits is {n}, but the op has {len(c.op.outputs)} outputs")
    axis = c.ints(0, "axis", min_size=1)
    if axis is None:
        return [None] * n
    a = c.axis(axis[0], len(x), "split axis")
    if x[a] % n:
        raise c.fail(f"dimension {a} of {c.name(1)} {fmt(x)} does not split into {n} equal parts")
    return [x[:a] + (x[a] // n,) + x[a + 1:]] * n


def split_v(c: OpCheck):
    c.arity(3, 3, None)
    x = c.shape(0)
    n = len(c.op.outputs)
    sizes = c.ints(1, "size_splits", size=n)
    axis = c.ints(2, "axis", min_size=1)
    if sizes is None or axis is None:
        return [None] * n
    a = c.axis(axis[0], len(x), "split axis")
    if any(s < -1 for s in sizes) or sizes.count(-1) > 1:
        raise c.fail(f"{c.name(1)} {sizes} has a size below -1 or more than one -1")
    rest = x[a] - sum(s for s in sizes if s != -1)
    if (rest < 0) if -1 in sizes else (rest != 0):
        raise c.fail(f"{c.name(1)} {sizes} does not split dimension {a} of size {x[a]}")
    return [x[:a] + (rest if s == -1 else s,) + x[a + 1:] for s in sizes]


def pack(c: OpCheck):
    c.arity(1, None, 1)
    n = len(c.op.inputs)
    c.option("values_count", n, n)
    shapes = [c.shape(k) for k in range(n)]
    c.same_type(*range(n))
    for k, s in enumerate(shapes):
        if s != shapes[0]:
            raise c.fail(f"{c.name(k)} has shape {fmt(s)}, {c.name(0)} {fmt(shapes[0])}; PACK needs them equal")
    x = shapes[0]
    a = c.axis(c.opts.axis, len(x) + 1, "options.axis")
    return [x[:a] + (n,) + x[a:]]


def unpack(c: OpCheck):
    c.arity(1, 1, None)
    x = c.shape(0)
    if not x:
        raise c.fail(f"{c.name(0)} is a scalar; UNPACK needs rank 1 or more")
    a = c.axis(c.opts.axis, len(x), "options.axis")
    c.option("num", x[a], x[a])
    if len(c.op.outputs) != x[a]:
        raise c.fail(f"has {len(c.op.outputs)} outputs for dimension {a} of size {x[a]}")
    return [x[:a] + x[a + 1:]] * x[a]


def check_shape(c: OpCheck):
    c.arity(1, 1, 1)
    if c.out_tensor().dtype not in INDEX_TYPES:
        raise c.fail(f"{c.out_name()} is {c.out_tensor().dtype.name}; SHAPE writes INT32 or INT64")
    return [(len(c.shape(0)),)]


def check_gather(c: OpCheck):
    c.arity(2, 2, 1)
    p, i = c.shape(0), c.shape(1)
    if c.tensor(1).dtype not in INDEX_TYPES:
        raise c.fail(f"{c.name(1)} (indices) is {c.tensor(1).dtype.name}; INT32 or INT64 expected")
    if not p:
        raise c.fail(f"{c.name(0)} is a scalar; GATHER needs rank 1 or more")
    o = c.opts
    axis = c.axis(o.axis, len(p), "options.axis")
    bd = o.batch_dims
    if bd < 0:
        if not i:
            raise c.fail(f"options.batch_dims is {bd}, but the indices are a scalar")
        bd %= len(i)
    if bd > axis or bd > len(i) or p[:bd] != i[:bd]:
        raise c.fail(f"options.batch_dims {o.batch_dims} does not fit params {fmt(p)}, indices {fmt(i)}, "
                     f"axis {axis}")
    if bd and math.prod(p[:bd]) < 1:
        raise c.fail(f"options.batch_dims {bd} spans an empty batch of {fmt(p)}")
    return [p[:axis] + i[bd:] + p[axis + 1:]]


def depth_to_space(c: OpCheck):
    c.arity(1, 1, 1)
    n, h, w, ch = c.rank(0, 4)
    b = c.option("block_size", 1)
    if ch % (b * b):
        raise c.fail(f"{c.name(0)} has {ch} channels, not a multiple of block_size {b} squared")
    return [(n, h * b, w * b, ch // (b * b))]


def space_to_depth(c: OpCheck):
    c.arity(1, 1, 1)
    n, h, w, ch = c.rank(0, 4)
    b = c.option("block_size", 1)
    if h % b or w % b:
        raise c.fail(f"{c.name(0)} is {h}x{w}, not divisible by block_size {b}")
    return [(n, h // b, w // b, ch * b * b)]
