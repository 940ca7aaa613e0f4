"""Per-op checks made before any kernel runs: the inputs, options and quantization each kernel
relies on, and the output shapes it will produce (TFLite's Prepare, for the ops the testbed runs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


from runtime.ir import options as opt
from runtime.ir.errors import ModelError
from runtime.ir.graph import DType, Graph, Tensor
from runtime.ir.optypes import DATA_INPUT, OpType
from runtime.ops.opcheck_base import (Shape, ShapeOf, ValueOf, NO_KERNEL_TYPES, QUANT_KERNEL_OPS,
                                      GENERIC_TABLES, out_size, pad_amounts, pool_taps, fmt, OpCheck)
from runtime.ops.opcheck_nn import (binary, unary, rsqrt, check_softmax, leaky_relu, dequantize, check_quantize,
                                    check_cast, conv, depthwise, transpose_conv, fully_connected,
                                    batch_matmul, pool, l2_pool, reduce, check_resize, lstm, densify, check_custom)
from runtime.ops.opcheck_shape import (check_concatenation, check_pad, check_reshape, squeeze, expand_dims, transpose,
                                       strided_slice, check_slice, check_split, split_v, pack, unpack, check_shape,
                                       check_gather, depth_to_space, space_to_depth)
from runtime.ops.opcheck_math import RULES as _MATH_RULES
from runtime.ops.opcheck_index import OWN_OUTPUT_TYPE as _INDEX_OWN_TYPES, RULES as _INDEX_RULES
from runtime.ops.opcheck_sizing import OWN_OUTPUT_TYPE as _SIZING_OWN_TYPES, RULES as _SIZING_RULES
from runtime.ops.opcheck_seq import RULES as _SEQ_RULES
from runtime.ops.opcheck_window import RULES as _WINDOW_RULES
from runtime.ops.opcheck_misc import RULES as _MISC_RULES
from runtime.ops.opcheck_control import RULES as _CONTROL_RULES, resource_allowed

__all__ = ["Checked", "check_graph", "check_op", "check_options", "derived_constants", "out_size",
           "pad_amounts", "pool_taps"]


_RULES: dict[OpType, Callable[[OpCheck], list]] = {
    OpType.CUSTOM: check_custom,
    **{t: binary for t in (OpType.ADD, OpType.SUB, OpType.MUL, OpType.DIV, OpType.MAXIMUM, OpType.MINIMUM,
                            OpType.SQUARED_DIFFERENCE)},
    OpType.LEAKY_RELU: leaky_relu,
    **{t: unary for t in (OpType.RELU, OpType.RELU_N1_TO_1, OpType.RELU6, OpType.ELU,
                           OpType.LOGISTIC, OpType.TANH, OpType.EXP, OpType.LOG, OpType.SQRT,
                           OpType.ABS, OpType.NEG, OpType.HARD_SWISH)},
    OpType.RSQRT: rsqrt,
    OpType.PRELU: binary, OpType.SOFTMAX: check_softmax, OpType.LOG_SOFTMAX: check_softmax,
    OpType.CAST: check_cast, OpType.DEQUANTIZE: dequantize, OpType.QUANTIZE: check_quantize, OpType.DENSIFY: densify,
    OpType.CONV_2D: conv, OpType.DEPTHWISE_CONV_2D: depthwise, OpType.TRANSPOSE_CONV: transpose_conv,
    OpType.FULLY_CONNECTED: fully_connected, OpType.BATCH_MATMUL: batch_matmul,
    OpType.AVERAGE_POOL_2D: pool, OpType.MAX_POOL_2D: pool, OpType.L2_POOL_2D: l2_pool,
    **{t: reduce for t in (OpType.MEAN, OpType.SUM, OpType.REDUCE_MAX, OpType.REDUCE_MIN)},
    OpType.CONCATENATION: check_concatenation, OpType.PAD: check_pad, OpType.PADV2: check_pad, OpType.MIRROR_PAD: check_pad,
    OpType.RESHAPE: check_reshape, OpType.SQUEEZE: squeeze, OpType.EXPAND_DIMS: expand_dims,
    OpType.TRANSPOSE: transpose, OpType.STRIDED_SLICE: strided_slice, OpType.SLICE: check_slice,
    OpType.SPLIT: check_split, OpType.SPLIT_V: split_v, OpType.PACK: pack, OpType.UNPACK: unpack,
    OpType.SHAPE: check_shape, OpType.GATHER: check_gather, OpType.DEPTH_TO_SPACE: depth_to_space,
    OpType.SPACE_TO_DEPTH: space_to_depth, OpType.RESIZE_BILINEAR: check_resize,
    OpType.RESIZE_NEAREST_NEIGHBOR: check_resize, OpType.UNIDIRECTIONAL_SEQUENCE_LSTM: lstm,
    **_MATH_RULES,  # comparisons, logic, selection, elementwise maths, arg/reductions, norms
    **_SIZING_RULES,  # batch<->space, shapes from values, WHERE, UNIQUE, top-k, segments, NMS
    **_INDEX_RULES,  # gather/scatter, reversal, diagonals, DYNAMIC_UPDATE_SLICE, EMBEDDING_LOOKUP, BUCKETIZE
    **_SEQ_RULES,  # recurrent ops: RNN, LSTM and SVDF
    **_WINDOW_RULES,  # 3-D convolutions, sparse embedding, StableHLO-era ops
    **_MISC_RULES,  # complex numbers, BITCAST, random draws, StableHLO gather/scatter/reduce_window
    **_CONTROL_RULES,  # IF, WHILE, CALL_ONCE and resource variables (runtime/ops/opcheck_control.py)
}


def check_options(graph: Graph, i: int) -> None:
    """The op carries options of its own type (a RESHAPE never Pool2DOptions), as its kernel reads them."""
    op = graph.ops[i]
    if op.type not in _RULES:
        return
    options = op.options
    if options is None:  # a graph built in code: the defaults, as when a file stores no table
        return
    typed = opt.FOR_OP.get(op.type.name)
    if typed is not None:
        if type(options) is not typed:
            got = _options_name(options)
            raise ModelError(f"{graph.describe_op(i)}: builtin options are {got}, {typed.__name__} expected")
        return
    table = GENERIC_TABLES.get(op.type)
    if not (isinstance(options, opt.GenericOptions) and options.table == table):
        want = f"{table} or none" if table else "none"
        raise ModelError(f"{graph.describe_op(i)}: builtin options are {_options_name(options)}, {want} expected")


def _options_name(options) -> str:
    return options.table if isinstance(options, opt.GenericOptions) else type(options).__name__


def check_op(graph: Graph, i: int, shape_of: ShapeOf, value_of: ValueOf,
             model: Graph | None = None) -> tuple[list, bool]:
    """(output shapes, deferred) for op i; ModelError naming op, tensor and field when a kernel
    could not run it. `deferred`: some output shape depends on a value known only when it runs.
    `model`: the main graph when `graph` is another subgraph of it (None: `graph` is the main one)."""
    op = graph.ops[i]
    rule = _RULES.get(op.type)
    if rule is None:
        return [None] * len(op.outputs), False
    check_options(graph, i)
    c = OpCheck(graph, i, shape_of, value_of, model, check_graph)
    for t in (*op.inputs, *op.outputs):
        if t >= 0 and graph.tensors[t].dtype in NO_KERNEL_TYPES and not (
                graph.tensors[t].dtype is DType.RESOURCE and resource_allowed(op, t)):  # variable handles
            raise c.fail(f"{graph.describe_tensor(t)} is {graph.tensors[t].dtype.name}, a type the kernels "
                         f"do not compute on")
    outs = rule(c)
    _check_types(c)
    return outs, c.deferred


# The input whose element type the outputs carry (the data input), where it is not input 0.
_DATA_INPUT = DATA_INPUT
# Ops whose outputs take a type of their own (checked by their rules), or float from hybrid kernels.
_OWN_OUTPUT_TYPE = frozenset({OpType.CUSTOM, OpType.CAST, OpType.DEQUANTIZE, OpType.QUANTIZE, OpType.SHAPE})
_OWN_OUTPUT_TYPE |= frozenset(_MATH_RULES) | {OpType.L2_POOL_2D}  # runtime/ops/opcheck_math.py checks every output type
_OWN_OUTPUT_TYPE |= _SIZING_OWN_TYPES | _INDEX_OWN_TYPES  # runtime/ops/opcheck_{sizing,index}.py check theirs
_OWN_OUTPUT_TYPE |= frozenset(_SEQ_RULES) | frozenset(_WINDOW_RULES)  # opcheck_{seq,window}.py check every one
_OWN_OUTPUT_TYPE |= frozenset(_MISC_RULES)  # so does runtime/ops/opcheck_misc.py
_OWN_OUTPUT_TYPE |= frozenset(_CONTROL_RULES)  # runtime/ops/opcheck_control.py checks them against the subgraphs
# Float kernels that compute in floating point whatever they are given: an integer input would
# come out as float64 where the model declares an integer.
_FLOAT_ONLY = frozenset({
    OpType.EXP, OpType.LOG, OpType.SQRT, OpType.RSQRT, OpType.TANH, OpType.LOGISTIC, OpType.ELU, OpType.SOFTMAX,
    OpType.LOG_SOFTMAX, OpType.HARD_SWISH, OpType.CONV_2D, OpType.DEPTHWISE_CONV_2D, OpType.TRANSPOSE_CONV,
    OpType.FULLY_CONNECTED, OpType.AVERAGE_POOL_2D, OpType.MAX_POOL_2D, OpType.UNIDIRECTIONAL_SEQUENCE_LSTM,
})


def _check_types(c: OpCheck) -> None:
    """Each output has the type its kernel produces: the data input's (float32 where a float
    kernel runs 8-bit weights or computes in floating point)."""
    kind = c.op.type
    if kind in _OWN_OUTPUT_TYPE:
        return
    data = c.tensor(_DATA_INPUT.get(kind, 0))
    if data.dtype is DType.INT16 and data.quant is not None:  # 16x8: the plan refuses it, naming the tensor
        return
    if kind in _FLOAT_ONLY and not c.eight_bit and data.dtype is not DType.FLOAT32:
        raise c.fail(f"{c.name(_DATA_INPUT.get(kind, 0))} is {data.dtype.name}; the float kernel takes FLOAT32"
                     + (" (or 8-bit data with its quantization)" if kind in QUANT_KERNEL_OPS else ""))
    for j, t in enumerate(c.op.outputs):
        if c.graph.tensors[t].dtype is not data.dtype:
            raise c.fail(f"{c.out_name(j)} is {c.graph.tensors[t].dtype.name}, but the kernel produces "
                         f"{data.dtype.name} (the type of {c.name(_DATA_INPUT.get(kind, 0))})")


@dataclass(frozen=True)
class Checked:
    """What the checks found: every tensor's shape as the kernels will see it, and the ops whose
    output shapes hang on values known only at run time (checked again right before they run)."""

    shapes: tuple[Shape, ...]
    deferred: frozenset[int]
    varying: frozenset[int]     # tensors whose shape may differ at run time from `shapes`


def check_graph(graph: Graph, input_shapes: dict[int, Shape] | None = None, strict: bool = True,
                model: Graph | None = None) -> Checked:
    """Run every op's check in plan order, propagating shapes from the graph inputs. `strict`: each
    computed output shape must be the declared one (unless the tensor's signature marks it dynamic).
    `model`: the main graph when `graph` is another of its subgraphs."""
    tensors = graph.tensors
    shapes: list[Shape] = [t.shape for t in tensors]
    varying: set[int] = set()
    for t, s in (input_shapes or {}).items():
        if tuple(s) != shapes[t]:
            shapes[t] = tuple(s)
            varying.add(t)
    known = derived_constants(graph)
    value_of = lambda t: tensors[t].data if t >= 0 and tensors[t].is_constant else None  # noqa: E731
    deferred: set[int] = set()
    unknown: set[int] = set()  # shapes only the run will tell (checked then)
    for i, op in enumerate(graph.ops):
        if unknown and any(t in unknown for t in op.inputs if t >= 0):
            deferred.add(i)
            unknown.update(op.outputs)
            varying.update(op.outputs)
            continue
        outs, late = check_op(graph, i, shapes.__getitem__, value_of, model)
        if op.type in _RULES and (late or any(t in varying for t in op.inputs if t >= 0)):
            deferred.add(i)
            varying.update(t for t in op.outputs if t not in known)
        for t, s in zip(op.outputs, outs):
            if s is None:
                # A shape only the run tells: not strict, or a tensor whose signature marks it
                # dynamic (its declared shape is a placeholder, as a WHILE body's growing slice).
                if not strict or tensors[t].is_dynamic:
                    unknown.add(t)
                continue
            declared = tensors[t].shape
            if strict and s != declared and not _fits_signature(tensors[t], s):
                raise ModelError(f"{graph.describe_op(i)}: output {graph.describe_tensor(t)} is declared "
                                 f"{fmt(declared)}, but the op computes {fmt(s)}")
            if s != declared:
                varying.add(t)
            shapes[t] = s
    return Checked(tuple(shapes), frozenset(deferred), frozenset(varying))


def _fits_signature(tensor: Tensor, shape: Shape) -> bool:
    sig = tensor.shape_signature
    return (sig is not None and tensor.is_dynamic and len(sig) == len(shape)
            and all(s == -1 or s == d for s, d in zip(sig, shape)))


def derived_constants(graph: Graph) -> set[int]:
    """Tensors fixed before the first invoke: constants, and outputs of ops that read only those."""
    known = {t for t, x in enumerate(graph.tensors) if x.is_constant and not x.is_variable}
    for op in graph.ops:
        ins = [t for t in op.inputs if t >= 0]
        if ins and all(t in known for t in ins):
            known.update(op.outputs)
    return known
