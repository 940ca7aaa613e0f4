"""Per-op checks (TFLite's Prepare) for comparisons, logic, selection, elementwise maths, arg/reductions
and normalisations; runtime.ops.opcheck registers RULES and lets them check their own output types."""

from __future__ import annotations

import math

import numpy as np

from runtime.ir.graph import DType
from runtime.ir.optypes import OpType

Shape = tuple[int, ...]

F32, F64, I8, U8, I16, U16, I32, U32, I64, BOOL = (
    DType.FLOAT32, DType.FLOAT64, DType.INT8, DType.UINT8, DType.INT16, DType.UINT16, DType.INT32, DType.UINT32,
    DType.INT64, DType.BOOL)
_EIGHT_BIT = {I8, U8}
_INDEX_CODES = {2: I32, 4: I64}  # TensorType codes an ARG_MAX/ARG_MIN may write
# The 8-bit L2 norm sums (q - zp)**2 in int32: this many terms of 255**2 always fit.
_L2_DEPTH = (2**31 - 1) // (255 * 255)
# The 8-bit REDUCE_PROD rescales after every multiplication, a loop over the reduced elements.
_PROD_STEPS = 1 << 16


def _fmt(shape) -> str:
    return str(list(shape))


def _types(c, allowed: set, *ks: int) -> DType:
    """Inputs `ks` share one element type out of `allowed`; that type."""
    dtypes = [c.tensor(k).dtype for k in ks]
    for k, d in zip(ks, dtypes):
        if d is not dtypes[0]:
            raise c.fail(f"input types differ: {c.name(ks[0])} is {dtypes[0].name}, {c.name(k)} is {d.name}")
    if dtypes[0] not in allowed:
        names = "/".join(sorted(t.name for t in allowed))
        raise c.fail(f"{c.name(ks[0])} is {dtypes[0].name}; {c.op.type.name} takes {names}")
    return dtypes[0]


def _out(c, dtype: DType) -> None:
    for j in range(len(c.op.outputs)):
        c.out_type(dtype, j)


def _broadcast(c, *ks: int) -> Shape:
    shapes = [c.shape(k) for k in ks]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        each = [f"{_fmt(s)} of {c.graph.describe_tensor(c.slot(k))}" for k, s in zip(ks, shapes)]
        listed = ", ".join(each[:-1]) + " and " + each[-1]
        raise c.fail(f"shapes {listed} do not broadcast") from None


def _axis_value(c, k: int, rank: int, what: str, int32_only: bool = False) -> int | None:
    """The single axis held by input k (INT32, or INT64 too), in [0, rank); None until known."""
    if int32_only and c.tensor(k).dtype is not I32:
        raise c.fail(f"{c.name(k)} ({what}) is {c.tensor(k).dtype.name}; INT32 expected")
    values = c.ints(k, what, size=1)
    return None if values is None else c.axis(values[0], rank, what)


def _per_tensor(c, *slots) -> None:
    """8-bit tensors the integer kernels read with one scale and zero point each."""
    c.quantized(*slots)
    for k in slots:
        t = c.out_tensor() if k == "out" else c.tensor(k)
        if len(t.quant.scale) != 1:
            raise c.fail(f"{c.out_name() if k == 'out' else c.name(k)} has {len(t.quant.scale)} scales; the 8-bit "
                         f"kernel reads one per tensor")


# -- comparisons, logic, selection ---------------------------------------------------------------

_ORDERED = {F32, I16, I32, I64, I8, U8}


def _compare(allowed: set):
    def rule(c):
        c.arity(2, 2, 1)
        dtype = _types(c, allowed, 0, 1)
        out = _broadcast(c, 0, 1)
        if dtype in _EIGHT_BIT:
            # comparisons.cc turns each scale into a multiplier below 1 (a scale of 1 or more
            # would take a negative rounding shift, undefined in TFLite's arithmetic).
            _per_tensor(c, 0, 1)
            for k in (0, 1):
                if c.tensor(k).quant.scale[0] >= 1:
                    raise c.fail(f"{c.name(k)} has quantization scale {c.tensor(k).quant.scale[0]:.7g}; the 8-bit "
                                 f"comparison needs scales below 1")
        elif c.tensor(0).quant is not None and dtype is I16:
            raise c.fail(f"{c.name(0)} is a quantized INT16; the testbed compares INT16 only unquantized")
        _out(c, BOOL)
        return [out]
    return rule


def _logical(c):
    c.arity(2, 2, 1)
    _types(c, {BOOL}, 0, 1)
    _out(c, BOOL)
    return [_broadcast(c, 0, 1)]


def _logical_not(c):
    c.arity(1, 1, 1)
    _types(c, {BOOL}, 0)
    _out(c, BOOL)
    return [c.shape(0)]


def _select(c):
    c.arity(3, 3, 1)
    _types(c, {BOOL}, 0)
    dtype = c.tensor(1).dtype
    _types(c, {dtype}, 1, 2)
    _out(c, dtype)
    cond, x, y = c.shape(0), c.shape(1), c.shape(2)
    if all(math.prod(s) == 1 for s in (cond, x, y, c.out_tensor().shape)):
        return [c.out_tensor().shape]  # select.cc keeps the declared shape of one-element outputs
    if cond == x == y:
        return [x]
    if c.op.type is OpType.SELECT_V2:
        out = _broadcast(c, 0, 1, 2)
        if len(out) > 5:  # the broadcasting kernel (BroadcastSelect5DSlow) handles up to 5 dimensions
            raise c.fail(f"broadcasting {_fmt(cond)}, {_fmt(x)} and {_fmt(y)} gives rank {len(out)}; at most 5")
        return [out]
    if x != y:
        raise c.fail(f"{c.name(1)} {_fmt(x)} and {c.name(2)} {_fmt(y)} differ; SELECT needs them equal")
    if not (cond == () or (len(cond) == 1 and len(x) >= 1 and cond[0] == x[0])):
        raise c.fail(f"condition {c.name(0)} has shape {_fmt(cond)}; SELECT takes a condition shaped like the "
                     f"inputs {_fmt(x)}, a scalar, or one value per row")
    return [x]


# -- elementwise maths ---------------------------------------------------------------------------


def _unary(allowed: set, eight_bit: bool = False):
    def rule(c):
        c.arity(1, 1, 1)
        dtype = _types(c, allowed, 0)
        _out(c, dtype)
        if eight_bit and dtype in _EIGHT_BIT:
            _per_tensor(c, 0, "out")
        return [c.shape(0)]
    return rule


def _binary(allowed: set, zero_divisor: set = frozenset()):
    """Two inputs of one type that broadcast; `zero_divisor`: types whose constant divisor may not
    hold a 0 (TFLite refuses it when the op runs; a constant one is refused here already)."""
    def rule(c):
        c.arity(2, 2, 1)
        dtype = _types(c, allowed, 0, 1)
        out = _broadcast(c, 0, 1)
        _out(c, dtype)
        if dtype in zero_divisor and c.tensor(1).is_constant and not np.all(c.tensor(1).data):
            raise c.fail(f"{c.name(1)} (the divisor) holds 0: division by 0")
        return [out]
    return rule


def _atan2(c):
    c.arity(2, 2, 1)
    dtype = _types(c, {F32, F64}, 0, 1)
    # atan2.cc checks only that the ranks agree and then reads both inputs element for element.
    if c.shape(0) != c.shape(1):
        raise c.fail(f"{c.name(0)} {_fmt(c.shape(0))} and {c.name(1)} {_fmt(c.shape(1))} differ; ATAN2 does "
                     f"not broadcast")
    _out(c, dtype)
    return [c.shape(0)]


def _pow(c):
    out = _binary({F32, I32})(c)
    t = c.tensor(1)
    if t.dtype is I32 and t.is_constant and np.any(t.data < 0):
        raise c.fail(f"{c.name(1)} (the exponent) is negative, which TFLite's int32 POW refuses")
    return out


def _add_n(c):
    c.arity(2, None, 1)
    n = len(c.op.inputs)
    dtype = _types(c, {F32, I32}, *range(n))
    for k in range(1, n):
        if c.shape(k) != c.shape(0):
            raise c.fail(f"{c.name(k)} has shape {_fmt(c.shape(k))}, {c.name(0)} {_fmt(c.shape(0))}; ADD_N "
                         f"needs them equal")
    _out(c, dtype)
    return [c.shape(0)]


def _fake_quant(c):
    out = _unary({F32})(c)
    o = c.opts
    if o.narrow_range:
        raise c.fail("options.narrow_range is set; TFLite's FAKE_QUANT refuses it at run time")
    c.option("num_bits", 1, 16)
    if not (math.isfinite(o.min) and math.isfinite(o.max) and o.min < o.max):
        raise c.fail(f"options.min {o.min} and options.max {o.max} are not a finite range with min < max")
    return out


# -- arg / reductions ----------------------------------------------------------------------------


def _arg_min_max(c):
    c.arity(2, 2, 1)
    _types(c, {F32, U8, I8, I32, BOOL}, 0)
    x = c.shape(0)
    if not x:
        raise c.fail(f"{c.name(0)} is a scalar; {c.op.type.name} needs rank 1 or more")
    want = _INDEX_CODES.get(c.opts.output_type)
    if want is None:
        raise c.fail(f"options.output_type is {c.opts.output_type}; INT32 (2) or INT64 (4) expected")
    _out(c, want)
    a = _axis_value(c, 1, len(x), "axis")
    if a is None:
        return [None]
    if x[a] == 0:
        raise c.fail(f"{c.name(0)} has shape {_fmt(x)}; cannot take {c.op.type.name} over an empty axis")
    return [x[:a] + x[a + 1:]]


def _cumsum(c):
    c.arity(2, 2, 1)
    dtype = _types(c, {F32, I32, I64}, 0)
    x = c.shape(0)
    if not x:
        raise c.fail(f"{c.name(0)} is a scalar; CUMSUM needs rank 1 or more")
    _out(c, dtype)
    _axis_value(c, 1, len(x), "axis", int32_only=True)
    return [x]


def _reduce(allowed: set):
    def rule(c):
        c.arity(2, 2, 1)
        dtype = _types(c, allowed, 0)
        _out(c, dtype)
        if c.tensor(1).dtype is not I32:
            raise c.fail(f"{c.name(1)} (axes) is {c.tensor(1).dtype.name}; INT32 expected")
        x = c.shape(0)
        if dtype is I8:
            _per_tensor(c, 0, "out")
        axes = c.ints(1, "axes")
        if axes is None:
            return [None]
        picked = {c.axis(a, len(x), "reduction axis") for a in axes}
        if dtype is I8:
            _prod_scaling(c, math.prod(x[a] for a in picked))
        if c.opts.keep_dims:
            return [tuple(1 if a in picked else d for a, d in enumerate(x))]
        return [tuple(d for a, d in enumerate(x) if a not in picked)]
    return rule


def _prod_scaling(c, n: int) -> None:
    """The 8-bit REDUCE_PROD rescales every step by s_in / s_out ** (1/n); its int64 rescaling takes
    shifts up to 7 only (a factor below 128)."""
    if n < 1:
        raise c.fail(f"{c.name(0)} has shape {_fmt(c.shape(0))}; the 8-bit product over no elements is undefined")
    if n > _PROD_STEPS:  # each step rounds, so the kernel takes them one after another
        raise c.fail(f"{c.name(0)} has shape {_fmt(c.shape(0))}: an 8-bit product over {n} elements; the testbed's "
                     f"step-by-step integer product takes at most {_PROD_STEPS}")
    from runtime.ops.qmath import prod_multiplier

    _, shift = prod_multiplier(c.tensor(0).quant.scale[0], c.out_tensor().quant.scale[0], n)
    if shift > 7:
        raise c.fail(f"the scales of {c.name(0)} and {c.out_name()} make a per-step factor of 2**{shift - 1} or more; "
                     f"the 8-bit REDUCE_PROD takes factors below 128")


# -- normalisation and pooling -------------------------------------------------------------------


def _l2_norm(c):
    c.arity(1, 1, 1)
    dtype = _types(c, {F32, I8, U8}, 0)
    x = c.shape(0)
    if not x:
        raise c.fail(f"{c.name(0)} is a scalar; L2_NORMALIZATION needs rank 1 or more")
    _out(c, dtype)
    if c.opts.fused_activation_function != 0:
        raise c.fail(f"options.fused_activation_function is {c.opts.fused_activation_function.name}; TFLite's "
                     f"L2_NORMALIZATION supports none")
    if dtype in _EIGHT_BIT:
        _per_tensor(c, 0, "out")
        q = c.out_tensor().quant
        zp = 0 if dtype is I8 else 128
        if np.float32(q.scale[0]) != np.float32(1 / 128) or q.zero_point[0] != zp:
            raise c.fail(f"{c.out_name()} has scale {q.scale[0]:.7g} and zero point {q.zero_point[0]}; the 8-bit "
                         f"L2_NORMALIZATION writes scale 1/128, zero point {zp}")
        if x[-1] > _L2_DEPTH:
            raise c.fail(f"{c.name(0)} has {x[-1]} values per vector; the int32 sum of squares holds {_L2_DEPTH}")
    return [x]


def _lrn(c):
    c.arity(1, 1, 1)
    _types(c, {F32}, 0)
    x = c.rank(0, 4)
    _out(c, F32)
    return [x]


def float_in_out(c) -> None:
    """Input 0 and every output are float32 (L2_POOL_2D: its geometry is the pools' own rule, in
    runtime/ops/opcheck.py, which adds this)."""
    _types(c, {F32}, 0)
    _out(c, F32)


_CMP_ORDERED = _compare(_ORDERED)
_CMP_EQUALITY = _compare(_ORDERED | {BOOL})
_INTS = {I8, U8, I16, U16, I32, U32}

RULES = {
    OpType.LESS: _CMP_ORDERED, OpType.LESS_EQUAL: _CMP_ORDERED, OpType.GREATER: _CMP_ORDERED,
    OpType.GREATER_EQUAL: _CMP_ORDERED, OpType.EQUAL: _CMP_EQUALITY,
    # comparisons.cc leaves NOT_EQUAL's output unwritten for unquantized INT16: not offered.
    OpType.NOT_EQUAL: _compare({F32, I32, I64, I8, U8, BOOL}),
    OpType.LOGICAL_AND: _logical, OpType.LOGICAL_OR: _logical, OpType.LOGICAL_NOT: _logical_not,
    OpType.SELECT: _select, OpType.SELECT_V2: _select,
    **{t: _unary({F32}) for t in (OpType.FLOOR, OpType.CEIL, OpType.ROUND, OpType.SIN, OpType.COS, OpType.SQUARE)},
    OpType.SIGN: _unary({F32, F64, I32}), OpType.ZEROS_LIKE: _unary({F32, I32, I64}),
    OpType.RELU_0_TO_1: _unary({F32, I8, U8}, eight_bit=True), OpType.GELU: _unary({F32, I8, U8}, eight_bit=True),
    OpType.FAKE_QUANT: _fake_quant,
    OpType.POW: _pow, OpType.FLOOR_DIV: _binary({F32, I32, I16, I8}, zero_divisor={F32, I32, I16, I8}),
    OpType.FLOOR_MOD: _binary({F32, I8, I16, I32, I64}, zero_divisor={I8, I16, I32, I64}),
    OpType.ATAN2: _atan2, OpType.ADD_N: _add_n,
    OpType.BITWISE_XOR: _binary(_INTS), OpType.RIGHT_SHIFT: _binary(_INTS),
    OpType.ARG_MAX: _arg_min_max, OpType.ARG_MIN: _arg_min_max, OpType.CUMSUM: _cumsum,
    OpType.REDUCE_PROD: _reduce({F32, I32, I64, I8}), OpType.REDUCE_ANY: _reduce({BOOL}),
    OpType.REDUCE_ALL: _reduce({BOOL}),
    OpType.L2_NORMALIZATION: _l2_norm, OpType.LOCAL_RESPONSE_NORMALIZATION: _lrn,
}
