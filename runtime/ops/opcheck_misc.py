"""Op checks (TFLite's Prepare, and what its Eval refuses) for the complex-number ops, BITCAST, the random
draws and the StableHLO gather/scatter/window ops (runtime/ops/registry_misc.py). Registered in
runtime/ops/opcheck.py's _RULES; every rule checks its own output types.

Each rule gets the op under check (runtime.ops.opcheck_base.OpCheck) and returns its output shapes, None where
only a run-time value can tell. Where LiteRT's kernel would read or write outside a tensor (an
index vector dimension past the indices' rank, a negative scatter target) the model is refused:
LiteRT's answer there is undefined."""

from __future__ import annotations

import math
from typing import Sequence

from runtime.ir.graph import DType
from runtime.ir.optypes import OpType

F16, F32, F64, C64, C128 = DType.FLOAT16, DType.FLOAT32, DType.FLOAT64, DType.COMPLEX64, DType.COMPLEX128
I8, I16, I32, I64, BOOL = DType.INT8, DType.INT16, DType.INT32, DType.INT64, DType.BOOL
U8, U16, U32, U64 = DType.UINT8, DType.UINT16, DType.UINT32, DType.UINT64
_MAX_DIM = 2**31 - 1
# Work a windowed kernel may take (output elements x window elements): beyond it a model is damage.
_MAX_STEPS = 1 << 31
# Window elements the reduce-window kernel steps through one at a time (each a pass over the output).
_MAX_TAPS = 1 << 16
# The StableHLO parameter structs hold at most 8 values per attribute (TFLITE_STABLEHLO_*_MAX_DIMENSION_COUNT).
_MAX_ATTR = 8
# Element types the StableHLO gather and scatter kernels instantiate.
_SLICE_TYPES = (F16, F32, F64, I8, I16, I32, I64, U8, U16, U32, U64)
# Element types stablehlo_reduce_window.cc dispatches on (BOOL as int8).
_WINDOW_TYPES = (BOOL, I8, I16, I32, I64, U8, F32, F64)
# Element types GetSizeOfType knows, which BITCAST reinterprets.
_SIZED_TYPES = (F16, F32, F64, C64, C128, I8, I16, I32, I64, U8, U16, U32, U64, BOOL)


def _fmt(shape: Sequence[int]) -> str:
    return str(list(shape))


def _out_type(c, allowed: Sequence[DType], j: int = 0) -> DType:
    dtype = c.out_tensor(j).dtype
    if dtype not in allowed:
        names = " or ".join(d.name for d in allowed)
        raise c.fail(f"{c.out_name(j)} is {dtype.name}; {names} expected")
    return dtype


def _rank(c, k: int, lo: int, hi: int, what: str) -> tuple[int, ...]:
    s = c.shape(k)
    if not lo <= len(s) <= hi:
        want = f"rank {lo}" if lo == hi else f"rank {lo} to {hi}"
        raise c.fail(f"{c.name(k)} ({what}) has shape {_fmt(s)}; {want} expected")
    return s


def _dims(c, field: str, rank: int, *, distinct: bool = True, size: int | None = None) -> list[int]:
    """An options vector of dimension numbers, each in [0, rank), distinct where asked."""
    values = list(getattr(c.opts, field))
    if len(values) > _MAX_ATTR:
        raise c.fail(f"options.{field} has {len(values)} values; LiteRT's parameters hold at most {_MAX_ATTR}")
    if size is not None and len(values) != size:
        raise c.fail(f"options.{field} is {values}: {len(values)} values, {size} expected")
    if any(not 0 <= v < rank for v in values):
        raise c.fail(f"options.{field} is {values}; each must be a dimension in [0, {rank})")
    if distinct and len(set(values)) != len(values):
        raise c.fail(f"options.{field} is {values}; it names a dimension twice")
    return values


def _body(c, field: str, known: dict):
    """What the body subgraph named by options.<field> computes, from the bodies LiteRT's kernel knows."""
    from runtime.ops.stablehlo_index import body_ops

    k = getattr(c.opts, field)
    ops = body_ops(c.graph, k)
    if ops is None:
        count = len(getattr(c.graph, "subgraphs", ())) + 1
        raise c.fail(f"options.{field} is {k}, but the model has {count} subgraph{'s' if count > 1 else ''}")
    if ops not in known:
        held = ", ".join(t.name for t in ops) or "no ops"
        kinds = sorted({" ".join(t.name for t in key) or "none" for key in known})
        raise c.fail(f"the body (subgraph {k}) holds {held}; LiteRT's kernel takes one op of {', '.join(kinds)}")
    return known[ops]


# -- complex numbers ----------------------------------------------------------------------------------


def _rfft2d(c):
    c.arity(2, 2, 1)
    c.typed(0, (F32,), "input")
    x = _rank(c, 0, 2, 16, "input")
    c.typed(1, (I32,), "fft_length")
    if c.shape(1) != (2,):
        raise c.fail(f"{c.name(1)} (fft_length) has shape {_fmt(c.shape(1))}; [2] expected")
    _out_type(c, (C64,))
    lengths = c.ints(1, "fft_length", size=2)
    if lengths is None:
        return [None]
    h, w = lengths
    if any(n < 1 or n & (n - 1) for n in lengths):
        raise c.fail(f"{c.name(1)} (fft_length) is {lengths}; the FFT library takes powers of two only")
    if w < 2:
        raise c.fail(f"{c.name(1)} (fft_length) is {lengths}; LiteRT's FFT library does not compute a "
                     f"transform of width 1 (its answer is not the DFT)")
    return [(*x[:-2], h, w // 2 + 1)]


def _complex_part(c):
    """REAL, IMAG, COMPLEX_ABS: complex64 -> float32, complex128 -> float64, same shape."""
    c.arity(1, 1, 1)
    dtype = c.typed(0, (C64, C128), "input")
    c.out_type(F32 if dtype is C64 else F64)
    return [c.shape(0)]


def _bitcast(c):
    c.arity(1, 1, 1)
    a = c.typed(0, _SIZED_TYPES, "input")
    b = _out_type(c, _SIZED_TYPES)
    x = c.shape(0)
    wa, wb = a.np.itemsize, b.np.itemsize
    if wa > wb:
        return [(*x, wa // wb)]
    if wa < wb:
        if not x or x[-1] != wb // wa:
            raise c.fail(f"{c.name(0)} has shape {_fmt(x)}; a {a.name} input cast to {b.name} needs a last "
                         f"dimension of {wb // wa}")
        return [x[:-1]]
    return [x]


# -- random draws -------------------------------------------------------------------------------------


def _random(c):
    """RANDOM_UNIFORM, RANDOM_STANDARD_NORMAL: float32 of the shape the int32 vector input gives."""
    c.arity(1, 1, 1)
    c.typed(0, (I32,), "shape")
    _rank(c, 0, 1, 1, "shape")
    _out_type(c, (F32,))
    dims = c.ints(0, "shape")
    if dims is None:
        return [None]
    if any(d < 0 for d in dims):
        raise c.fail(f"{c.name(0)} (shape) is {dims}; dimensions must be >= 0")
    return [tuple(dims)]


def _multinomial(c):
    c.arity(2, 2, 1)
    c.typed(0, (F32,), "logits")
    batch, classes = _rank(c, 0, 2, 2, "logits")
    if classes < 1:
        raise c.fail(f"{c.name(0)} (logits) has shape {_fmt((batch, classes))}; at least one class expected")
    c.typed(1, (I32,), "num_samples")
    _rank(c, 1, 0, 0, "num_samples")
    _out_type(c, (I64, I32))
    n = c.ints(1, "num_samples", size=1)
    if n is None:
        return [None]
    if n[0] < 0:
        raise c.fail(f"{c.name(1)} (num_samples) is {n[0]}; it must be >= 0")
    return [(batch, n[0])]


def _rng_bit_generator(c):
    """State uint64 [2] (Threefry) or [2] / [3] (Philox, the default); the new state has its shape,
    the random bits fill the output as declared (LiteRT takes its shape from the model)."""
    from runtime.ir.options import RngAlgorithm

    c.arity(1, 1, 2)
    c.typed(0, (U64,), "initial state")
    (size,) = _rank(c, 0, 1, 1, "initial state")
    algorithm = c.opts.algorithm
    sizes = (2,) if algorithm is RngAlgorithm.THREEFRY else (2, 3)
    if size not in sizes:
        raise c.fail(f"{c.name(0)} (initial state) holds {size} values; {algorithm.name} takes "
                     f"{' or '.join(map(str, sizes))}")
    _out_type(c, (U64,), 0)
    _out_type(c, (I32, I64, U32, U64), 1)
    out = c.out_tensor(1)
    if out.is_dynamic:
        raise c.fail(f"{c.out_name(1)} has a dynamic shape; LiteRT fills the shape the model declares")
    return [(size,), out.shape]


# -- StableHLO gather / scatter / reduce_window --------------------------------------------------------


def _index_vectors(c, k: int, size: int) -> tuple[int, ...]:
    """The indices input: int32 or int64, its index_vector_dim a real dimension of `size` entries;
    returns the batch shape (the other dimensions, in order)."""
    c.typed(k, (I32, I64), "indices")
    s = c.shape(k)
    ivd = c.opts.index_vector_dim
    if not 0 <= ivd < len(s):
        raise c.fail(f"options.index_vector_dim is {ivd}, not a dimension of {c.name(k)} {_fmt(s)} (LiteRT reads "
                     f"past the shape for an implicit trailing index dimension)")
    if s[ivd] != size:
        raise c.fail(f"{c.name(k)} (indices) holds index vectors of {s[ivd]} values along dimension {ivd}; "
                     f"{size} expected")
    return s[:ivd] + s[ivd + 1:]


def _stablehlo_gather(c):
    c.arity(2, 2, 1)
    dtype = c.typed(0, _SLICE_TYPES, "operand")
    x = _rank(c, 0, 0, _MAX_ATTR, "operand")
    rank = len(x)
    o = c.opts
    sizes = list(o.slice_sizes)
    if len(sizes) != rank:
        raise c.fail(f"options.slice_sizes is {sizes}; one size per operand dimension ({rank}) expected")
    for d, (n, s) in enumerate(zip(x, sizes)):
        if not 0 <= s <= n:
            raise c.fail(f"options.slice_sizes is {sizes}; size {s} does not fit dimension {d} of the operand "
                         f"{_fmt(x)}")
    collapsed = _dims(c, "collapsed_slice_dims", rank)
    if any(sizes[d] != 1 for d in collapsed):
        raise c.fail(f"options.collapsed_slice_dims {collapsed} must name dimensions of slice size 1 "
                     f"(slice_sizes {sizes})")
    starts = _dims(c, "start_index_map", rank)
    batch = _index_vectors(c, 1, len(starts))
    result_rank = len(batch) + rank - len(collapsed)
    offset = _dims(c, "offset_dims", result_rank, size=rank - len(collapsed))
    c.out_type(dtype)
    kept = iter(sizes[d] for d in range(rank) if d not in collapsed)
    walk = iter(batch)
    return [tuple(next(kept) if p in offset else next(walk) for p in range(result_rank))]


def _stablehlo_scatter(c):
    from runtime.ops.stablehlo_index import SCATTER_BODIES

    c.arity(3, 3, 1)
    dtype = c.typed(0, _SLICE_TYPES, "operand")
    x = _rank(c, 0, 0, _MAX_ATTR, "operand")
    if c.tensor(2).dtype is not dtype:
        raise c.fail(f"{c.name(2)} (updates) is {c.tensor(2).dtype.name}; the operand's {dtype.name} expected")
    u = _rank(c, 2, 0, _MAX_ATTR, "updates")
    c.out_type(dtype)
    _body(c, "update_computation_subgraph_index", SCATTER_BODIES)
    rank = len(x)
    window = _dims(c, "update_window_dims", len(u))
    inserted = _dims(c, "inserted_window_dims", rank)
    if len(window) + len(inserted) != rank:
        raise c.fail(f"options.update_window_dims {window} and inserted_window_dims {inserted} must together "
                     f"count the operand's {rank} dimensions")
    to_operand = _dims(c, "scatter_dims_to_operand_dims", rank)
    batch = _index_vectors(c, 1, len(to_operand))
    scattered = tuple(n for a, n in enumerate(u) if a not in window)
    if scattered != tuple(batch):
        raise c.fail(f"{c.name(2)} (updates) {_fmt(u)} has scatter dimensions {_fmt(scattered)}; the indices' "
                     f"batch dimensions {_fmt(batch)} expected")
    return [x]


def padded_shape(x: Sequence[int], base: Sequence[int], pad: Sequence[int]) -> list[int]:
    """The input's shape once dilated by `base` and padded (cropped where negative) by `pad`."""
    return [(d - 1) * b + 1 + pad[2 * a] + pad[2 * a + 1] if d else pad[2 * a] + pad[2 * a + 1]
            for a, (d, b) in enumerate(zip(x, base))]


def _stablehlo_reduce_window(c):
    from runtime.ops.stablehlo import window_output_shape
    from runtime.ops.stablehlo_index import WINDOW_BODIES, window_attributes

    c.arity(2, 2, 1)
    dtype = c.typed(0, _WINDOW_TYPES, "input")
    x = _rank(c, 0, 1, 6, "input")
    if c.tensor(1).dtype is not dtype:
        raise c.fail(f"{c.name(1)} (init value) is {c.tensor(1).dtype.name}; the input's {dtype.name} expected")
    if math.prod(c.shape(1)) < 1:
        raise c.fail(f"{c.name(1)} (init value) is empty")
    c.out_type(dtype)
    _body(c, "body_subgraph_index", WINDOW_BODIES)
    o, rank = c.opts, len(x)
    if len(o.window_dimensions) != rank:
        raise c.fail(f"options.window_dimensions is {list(o.window_dimensions)}; one size per input dimension "
                     f"({rank}) expected")
    for field, size in (("window_strides", rank), ("base_dilations", rank), ("window_dilations", rank),
                        ("padding", 2 * rank)):
        values = getattr(o, field)
        if values and len(values) != size:
            raise c.fail(f"options.{field} is {list(values)}; {size} values (or none) expected")
    window, strides, base, dilations, pad = window_attributes(o, rank)
    for field, values in (("window_dimensions", window), ("window_strides", strides), ("base_dilations", base),
                          ("window_dilations", dilations)):
        if any(not 1 <= v <= _MAX_DIM for v in values):
            raise c.fail(f"options.{field} is {values}; every value must be at least 1")
    if any(abs(p) > _MAX_DIM for p in pad):
        raise c.fail(f"options.padding is {pad}; each amount must lie within 2**31")
    if any(d == 0 and b > 1 for d, b in zip(x, base)):
        raise c.fail(f"{c.name(0)} has shape {_fmt(x)}; an empty dimension cannot be dilated (base_dilations {base})")
    padded = padded_shape(x, base, pad)
    if any(not 0 <= n <= _MAX_DIM for n in padded):
        raise c.fail(f"dilating {_fmt(x)} by {base} and padding by {pad} gives {padded}")
    if any(pad) and not math.prod(padded):
        raise c.fail(f"padding {_fmt(x)} by {pad} leaves nothing ({padded}); LiteRT refuses an empty padded input")
    if any((w - 1) * r + 1 > _MAX_DIM for w, r in zip(window, dilations)):
        raise c.fail(f"window {window} dilated by {dilations} is larger than 2**31")
    out = window_output_shape(padded, window, strides, dilations)
    if math.prod(window) > _MAX_TAPS and math.prod(out):
        raise c.fail(f"a window of {window} has {math.prod(window)} elements; the testbed's kernel takes at most "
                     f"{_MAX_TAPS} (it steps through them one at a time)")
    if math.prod(out) * math.prod(window) > _MAX_STEPS:
        raise c.fail(f"a window of {window} over {math.prod(out)} outputs is more work than the testbed takes")
    return [tuple(out)]


RULES = {
    OpType.RFFT2D: _rfft2d,
    **{t: _complex_part for t in (OpType.REAL, OpType.IMAG, OpType.COMPLEX_ABS)},
    OpType.BITCAST: _bitcast,
    OpType.RANDOM_UNIFORM: _random, OpType.RANDOM_STANDARD_NORMAL: _random, OpType.MULTINOMIAL: _multinomial,
    OpType.STABLEHLO_RNG_BIT_GENERATOR: _rng_bit_generator,
    OpType.STABLEHLO_GATHER: _stablehlo_gather, OpType.STABLEHLO_SCATTER: _stablehlo_scatter,
    OpType.STABLEHLO_REDUCE_WINDOW: _stablehlo_reduce_window,
}


def scratch_bytes(op_type: OpType, ins: list, outs: list) -> int:
    """Temporaries these kernels allocate beyond the generic few copies of the output
    (runtime/limits/memory.py adds them): the scatter's per-update flat indices and masks, the gather's
    per-dimension index arrays, the generator's 64-bit words, the FFT's float64 working copies."""
    n_out = sum(math.prod(s) for s in outs)
    if op_type is OpType.STABLEHLO_SCATTER and len(ins) > 2 and ins[2] is not None:
        return 32 * math.prod(ins[2])
    if op_type is OpType.STABLEHLO_GATHER and ins and ins[0] is not None:
        return 8 * (len(ins[0]) + 1) * n_out
    if op_type in (OpType.RANDOM_UNIFORM, OpType.RANDOM_STANDARD_NORMAL, OpType.STABLEHLO_RNG_BIT_GENERATOR):
        return 48 * n_out
    if op_type is OpType.MULTINOMIAL and ins and ins[0] is not None:
        return 48 * (math.prod(ins[0]) + n_out)   # cumulative sums, then a sort of sums and targets
    if op_type is OpType.RFFT2D:
        return 32 * n_out
    return 0
