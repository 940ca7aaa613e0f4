"""Op checks for the 3-D convolutions, the StableHLO-era window, pad and elementwise ops and EMBEDDING_LOOKUP_SPARSE."""

from __future__ import annotations

import math

from runtime.ir import options as opt
from runtime.ir.graph import DType
from runtime.ir.optypes import OpType
from runtime.ops.opcheck_base import fmt
from runtime.ops.opcheck_seq import check_activation, check_outs

F16, F32, F64 = DType.FLOAT16, DType.FLOAT32, DType.FLOAT64
I8, I16, I32, I64, U8, BOOL = DType.INT8, DType.INT16, DType.INT32, DType.INT64, DType.UINT8, DType.BOOL
_RAW_TYPES = (F16, F32, F64, I8, I16, I32, I64, U8, DType.UINT16, DType.UINT32, DType.UINT64, BOOL)
# Work a windowed kernel may take (output elements x window elements): beyond it a model is damage.
_MAX_STEPS = 1 << 31
_MAX_DIM = 2**31 - 1


# -- CONV_3D, CONV_3D_TRANSPOSE ---------------------------------------------------------------------


def _conv3d_options(c) -> None:
    if not isinstance(c.opts.padding, opt.Padding):
        raise c.fail(f"options.padding is {c.opts.padding!r}, not SAME or VALID")
    check_activation(c)
    for f in ("stride_d", "stride_h", "stride_w", "dilation_d_factor", "dilation_h_factor", "dilation_w_factor"):
        c.option(f, 1, _MAX_DIM)


def _axes(o):
    return ((o.stride_d, o.dilation_d_factor), (o.stride_h, o.dilation_h_factor), (o.stride_w, o.dilation_w_factor))


def _operands(c, data: int, filt: int, bias: int, in_axis: int, out_axis: int):
    """The float32 5-D data and filter with matching channels (the filter's `in_axis`), and a bias,
    if present, of one value per output channel (the filter's `out_axis`)."""
    for k, what in ((data, "input"), (filt, "filter")):
        c.typed(k, (F32,), what)
    x = c.rank(data, 5, positive=True)
    w = c.rank(filt, 5, positive=True)
    if x[4] != w[in_axis]:
        raise c.fail(f"{c.name(data)} has {x[4]} channels, filter {c.name(filt)} of shape {fmt(w)} "
                     f"expects {w[in_axis]}")
    if c.has(bias):
        c.typed(bias, (F32,), "bias")
        if math.prod(c.shape(bias)) != w[out_axis]:
            raise c.fail(f"{c.name(bias)} has shape {fmt(c.shape(bias))}; {w[out_axis]} values "
                         "(one per output channel) expected")
    return x, w


def _conv3d(c):
    c.arity(2, 3, 1)
    _conv3d_options(c)
    x, w = _operands(c, 0, 1, 2, 3, 4)
    o = c.opts
    out = []
    for axis, size, k, (stride, dil) in zip("DHW", x[1:4], w[:3], _axes(o)):
        eff = (k - 1) * dil + 1
        n = (size + stride - 1) // stride if o.padding is opt.Padding.SAME else (size - eff + stride) // stride
        if n < 1:
            raise c.fail(f"filter extent {eff} along {axis} exceeds the input's {size} with VALID padding")
        out.append(n)
    check_outs(c, F32)
    return [(x[0], *out, w[4])]


def _conv3d_transpose(c):
    c.arity(3, 4, 1)
    _conv3d_options(c)
    x, w = _operands(c, 2, 1, 3, 4, 3)
    if c.tensor(0).dtype is not I32:
        raise c.fail(f"{c.name(0)} (output shape) is {c.tensor(0).dtype.name}; INT32 expected")
    shape = c.ints(0, "output shape", size=5)
    check_outs(c, F32)
    if shape is None:
        return [None]
    if any(d < 1 or d > _MAX_DIM for d in shape) or shape[0] != x[0] or shape[4] != w[3]:
        raise c.fail(f"{c.name(0)} asks for output shape {shape}; positive, batch {x[0]} and {w[3]} channels expected")
    o = c.opts
    for axis, target, size, k, (stride, dil) in zip("DHW", shape[1:4], x[1:4], w[:3], _axes(o)):
        eff = (k - 1) * dil + 1
        n = (target + stride - 1) // stride if o.padding is opt.Padding.SAME else (target - eff + stride) // stride
        if n != size:
            raise c.fail(f"output {axis} {target} maps back to {n} input cells with this filter, stride and "
                         f"padding, but {c.name(2)} has {size}")
    return [tuple(shape)]


# -- EMBEDDING_LOOKUP_SPARSE ------------------------------------------------------------------------


def _embedding_lookup_sparse(c):
    c.arity(5, 5, 1)
    o = c.opts
    if not isinstance(o.combiner, opt.CombinerType):
        raise c.fail(f"options.combiner is {o.combiner!r}, not SUM, MEAN or SQRTN")
    ids = c.rank(0, 1)
    idx = c.rank(1, 2)
    dense = c.rank(2, 1)
    weights = c.rank(3, 1)
    table = c.shape(4)
    for k, what in ((0, "ids"), (1, "indices"), (2, "dense shape")):
        c.typed(k, (I32,), what)
    c.typed(3, (F32,), "weights")
    c.typed(4, (F32,), "embedding table")
    if len(table) < 2:
        raise c.fail(f"{c.name(4)} (embedding table) has shape {fmt(table)}; rank 2 or more expected")
    if not idx[0] == ids[0] == weights[0]:
        raise c.fail(f"{c.name(0)}, {c.name(1)} and {c.name(3)} describe {ids[0]}, {idx[0]} and {weights[0]} "
                     f"lookups; they must agree")
    if idx[1] < 1 or dense[0] != idx[1]:
        raise c.fail(f"{c.name(2)} (dense shape) has {dense[0]} values for indices of rank {idx[1]}; they must "
                     f"agree and be at least 1")
    check_outs(c, F32)
    dims = c.ints(2, "dense shape")
    if dims is None:
        return [None]
    if any(d < 0 or d > _MAX_DIM for d in dims):
        raise c.fail(f"{c.name(2)} (dense shape) is {dims}; dimensions must be >= 0")
    return [tuple(dims[:-1]) + tuple(table[1:])]


# -- StableHLO-era ops ------------------------------------------------------------------------------


def _stablehlo_binary(c):
    c.arity(2, 2, 1)
    dtype = c.typed(0, _RAW_TYPES, "lhs")
    if c.tensor(1).dtype is not dtype:
        raise c.fail(f"{c.name(0)} is {dtype.name}, {c.name(1)} {c.tensor(1).dtype.name}; they must agree")
    a, b = c.shape(0), c.shape(1)
    if a != b:
        raise c.fail(f"{c.name(0)} {fmt(a)} and {c.name(1)} {fmt(b)} differ; {c.op.type.name} does not broadcast")
    check_outs(c, dtype)
    return [a]


def _pad_value(c, k: int, dtype: DType) -> None:
    if c.tensor(k).dtype is not dtype:
        raise c.fail(f"{c.name(k)} (padding value) is {c.tensor(k).dtype.name}; the input's {dtype.name} expected")
    if math.prod(c.shape(k)) < 1:
        raise c.fail(f"{c.name(k)} (padding value) is empty")


def _stablehlo_pad(c):
    c.arity(2, 2, 1)
    dtype = c.typed(0, _RAW_TYPES, "operand")
    _pad_value(c, 1, dtype)
    x = c.shape(0)
    if not 1 <= len(x) <= 8:
        raise c.fail(f"{c.name(0)} has rank {len(x)}; STABLEHLO_PAD takes rank 1 to 8")
    o = c.opts
    fields = ("edge_padding_low", "edge_padding_high", "interior_padding")
    for f in fields:
        if len(getattr(o, f)) != len(x):
            raise c.fail(f"options.{f} has {len(getattr(o, f))} values for rank {len(x)}")
    out = []
    for a, (d, lo, hi, it) in enumerate(zip(x, *(getattr(o, f) for f in fields))):
        if it < 0:
            raise c.fail(f"options.interior_padding[{a}] is {it}; it must be >= 0")
        n = d + max(d - 1, 0) * it + lo + hi
        if not 0 <= n <= _MAX_DIM:
            raise c.fail(f"padding dimension {a} of size {d} by low {lo}, high {hi}, interior {it} gives {n}")
        out.append(n)
    check_outs(c, dtype)
    return [tuple(out)]


def _dilate(c):
    c.arity(3, 3, 1)
    dtype = c.typed(0, _RAW_TYPES, "input")
    x = c.shape(0)
    if not x:
        raise c.fail(f"{c.name(0)} is a scalar; DILATE takes rank 1 or more")
    _pad_value(c, 2, dtype)
    if c.tensor(1).dtype is not I32:
        raise c.fail(f"{c.name(1)} (dilations) is {c.tensor(1).dtype.name}; INT32 expected")
    if len(c.shape(1)) != 1:
        raise c.fail(f"{c.name(1)} (dilations) has shape {fmt(c.shape(1))}; a vector expected")
    d = c.ints(1, "dilations", size=len(x))
    check_outs(c, dtype)
    if d is None:
        return [None]
    out = []
    for a, (s, k) in enumerate(zip(x, d)):
        if not 1 <= k <= _MAX_DIM:
            raise c.fail(f"{c.name(1)} (dilations) is {d}; every factor must be at least 1")
        n = (s - 1) * k + 1
        if not 0 <= n <= _MAX_DIM:
            raise c.fail(f"dilating dimension {a} of size {s} by {k} gives {n}")
        out.append(n)
    return [tuple(out)]


_WINDOW_TYPES = (BOOL, I8, I16, I32, I64, U8, F32, F64)


def _reduce_window(c):
    from runtime.ops.stablehlo import window_output_shape

    c.arity(5, 5, 1)
    f = c.opts.reduce_function
    if not isinstance(f, opt.ReduceWindowFunction) or f is opt.ReduceWindowFunction.UNSUPPORTED:
        raise c.fail(f"options.reduce_function is {getattr(f, 'name', f)}; ADD, MUL, MINIMUM, MAXIMUM, ALL or ANY "
                     f"expected")
    dtype = c.typed(0, _WINDOW_TYPES, "input")
    x = c.shape(0)
    if not 1 <= len(x) <= 6:
        raise c.fail(f"{c.name(0)} has rank {len(x)}; REDUCE_WINDOW takes rank 1 to 6")
    _pad_value(c, 1, dtype)
    attrs = []
    for k, what in ((2, "window shape"), (3, "window strides"), (4, "window dilations")):
        if c.tensor(k).dtype is not I64 or not c.tensor(k).is_constant:
            raise c.fail(f"{c.name(k)} ({what}) must be a constant INT64 tensor")
        values = c.ints(k, what, size=len(x))
        if any(not 1 <= v <= _MAX_DIM for v in values):
            raise c.fail(f"{c.name(k)} ({what}) is {values}; every value must be at least 1")
        attrs.append(values)
    out = window_output_shape(x, *attrs)
    if math.prod(out) * math.prod(attrs[0]) > _MAX_STEPS:
        raise c.fail(f"a window of {attrs[0]} over {math.prod(out)} outputs is more work than the testbed takes")
    check_outs(c, dtype)
    return [tuple(out)]


RULES = {
    OpType.CONV_3D: _conv3d, OpType.CONV_3D_TRANSPOSE: _conv3d_transpose,
    OpType.EMBEDDING_LOOKUP_SPARSE: _embedding_lookup_sparse,
    **{t: _stablehlo_binary for t in (OpType.STABLEHLO_ADD, OpType.STABLEHLO_MULTIPLY, OpType.STABLEHLO_MAXIMUM,
                                      OpType.STABLEHLO_MINIMUM)},
    OpType.STABLEHLO_PAD: _stablehlo_pad, OpType.DILATE: _dilate, OpType.REDUCE_WINDOW: _reduce_window,
}
