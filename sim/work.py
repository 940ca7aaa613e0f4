"""Work descriptions of ops: MACs, element ops and bytes moved, as a unit in a given precision sees them."""

from __future__ import annotations

import math
from typing import Callable, Iterable, Mapping, Sequence

from runtime.ir.graph import DType, Graph, Op
from runtime.ir.optypes import OpType
from sim import mechanisms as mx
from sim.cost import OpClass, Precision, Work, padded_channels
# Element operations per output (exp, log, tanh, ...), shared with sim/work_seq.py and sim/work_misc.py.
from sim.elem_ops import ELEM_OPS_PER_OUTPUT, EXP_OPS, LSTM_UNIT_OPS as _LSTM_UNIT_OPS

__all__ = ["BANDED", "CLASSES", "DEFAULT_CLASS", "PRECISION_BYTES", "ELEM_OPS_PER_OUTPUT", "EXP_OPS",
           "op_class", "describe", "tensor_bytes", "graph_tensor_bytes", "footprint", "stored_shapes"]

Shape = tuple[int, ...]

PRECISION_BYTES: Mapping[Precision, int] = {Precision.FLOAT32: 4, Precision.FLOAT16: 2, Precision.INT8: 1}

# Tensors holding values take the unit's precision; int32 biases, shapes, indices and masks keep
# their own width whatever the unit computes in.
_VALUE_DTYPES = frozenset({DType.FLOAT32, DType.FLOAT16, DType.INT8, DType.UINT8})

_E, _T, _P, _R, _D = (OpClass.ELEMENTWISE, OpClass.TRANSCENDENTAL, OpClass.POOL, OpClass.REDUCE,
                      OpClass.DATA)
CLASSES: Mapping[OpType, OpClass] = {
    OpType.CONV_2D: OpClass.CONV, OpType.TRANSPOSE_CONV: OpClass.CONV,
    OpType.DEPTHWISE_CONV_2D: OpClass.DEPTHWISE,
    OpType.FULLY_CONNECTED: OpClass.GEMM, OpType.BATCH_MATMUL: OpClass.GEMM,
    OpType.UNIDIRECTIONAL_SEQUENCE_LSTM: OpClass.GEMM,
    OpType.ADD: _E, OpType.SUB: _E, OpType.MUL: _E, OpType.DIV: _E, OpType.MAXIMUM: _E,
    OpType.MINIMUM: _E, OpType.SQUARED_DIFFERENCE: _E, OpType.RELU: _E, OpType.RELU_N1_TO_1: _E,
    OpType.RELU6: _E, OpType.LEAKY_RELU: _E, OpType.PRELU: _E, OpType.HARD_SWISH: _E, OpType.ABS: _E,
    OpType.NEG: _E, OpType.CAST: _E, OpType.QUANTIZE: _E, OpType.DEQUANTIZE: _E,
    OpType.LOGISTIC: _T, OpType.TANH: _T, OpType.EXP: _T, OpType.LOG: _T, OpType.ELU: _T,
    OpType.SQRT: _T, OpType.RSQRT: _T, OpType.SOFTMAX: _T, OpType.LOG_SOFTMAX: _T,
    OpType.AVERAGE_POOL_2D: _P, OpType.MAX_POOL_2D: _P,
    OpType.MEAN: _R, OpType.SUM: _R, OpType.REDUCE_MAX: _R, OpType.REDUCE_MIN: _R,
    OpType.RESIZE_BILINEAR: OpClass.RESIZE, OpType.RESIZE_NEAREST_NEIGHBOR: OpClass.RESIZE,
    OpType.CONCATENATION: _D, OpType.PAD: _D, OpType.PADV2: _D, OpType.MIRROR_PAD: _D,
    OpType.RESHAPE: _D, OpType.SQUEEZE: _D, OpType.EXPAND_DIMS: _D, OpType.TRANSPOSE: _D,
    OpType.STRIDED_SLICE: _D, OpType.SLICE: _D, OpType.SPLIT: _D, OpType.SPLIT_V: _D,
    OpType.PACK: _D, OpType.UNPACK: _D, OpType.SHAPE: _D, OpType.GATHER: _D,
    OpType.DEPTH_TO_SPACE: _D, OpType.SPACE_TO_DEPTH: _D, OpType.DENSIFY: _D,
    # comparisons, logic, selection and cheap elementwise maths (a compare, a pick, a shift per output)
    **{t: _E for t in (OpType.LESS, OpType.LESS_EQUAL, OpType.GREATER, OpType.GREATER_EQUAL, OpType.EQUAL,
                       OpType.NOT_EQUAL, OpType.LOGICAL_AND, OpType.LOGICAL_OR, OpType.LOGICAL_NOT, OpType.SELECT,
                       OpType.SELECT_V2, OpType.FLOOR, OpType.CEIL, OpType.ROUND, OpType.SQUARE, OpType.FLOOR_DIV,
                       OpType.FLOOR_MOD, OpType.SIGN, OpType.ADD_N, OpType.ZEROS_LIKE, OpType.RELU_0_TO_1,
                       OpType.FAKE_QUANT, OpType.BITWISE_XOR, OpType.RIGHT_SHIFT)},
    **{t: _T for t in (OpType.SIN, OpType.COS, OpType.POW, OpType.ATAN2, OpType.GELU,
                       OpType.LOCAL_RESPONSE_NORMALIZATION)},
    **{t: _R for t in (OpType.ARG_MAX, OpType.ARG_MIN, OpType.CUMSUM, OpType.REDUCE_PROD, OpType.REDUCE_ANY,
                       OpType.REDUCE_ALL, OpType.L2_NORMALIZATION)},
    OpType.L2_POOL_2D: _P,
    # index, gather/scatter and batch<->space ops move elements; segment sums add them up;
    # top-k, unique and NMS compare them
    **{t: _D for t in (OpType.BATCH_TO_SPACE_ND, OpType.SPACE_TO_BATCH_ND, OpType.TILE, OpType.BROADCAST_TO,
                       OpType.BROADCAST_ARGS, OpType.FILL, OpType.RANGE, OpType.RANK, OpType.ONE_HOT,
                       OpType.GATHER_ND, OpType.SCATTER_ND, OpType.REVERSE_V2, OpType.REVERSE_SEQUENCE,
                       OpType.MATRIX_DIAG, OpType.MATRIX_SET_DIAG, OpType.SPARSE_TO_DENSE, OpType.WHERE,
                       OpType.DYNAMIC_UPDATE_SLICE, OpType.EMBEDDING_LOOKUP)},
    **{t: _R for t in (OpType.SEGMENT_SUM, OpType.UNSORTED_SEGMENT_SUM, OpType.UNSORTED_SEGMENT_PROD,
                       OpType.UNSORTED_SEGMENT_MAX, OpType.UNSORTED_SEGMENT_MIN, OpType.TOPK_V2, OpType.UNIQUE,
                       OpType.BUCKETIZE, OpType.NON_MAX_SUPPRESSION_V4, OpType.NON_MAX_SUPPRESSION_V5)},
    # control flow and variables copy values into and out of subgraphs and variables (memcpy in
    # if.cc, while.cc, read_variable.cc); the ops their subgraphs run are charged as ops of their own
    **{t: _D for t in (OpType.IF, OpType.WHILE, OpType.CALL_ONCE, OpType.VAR_HANDLE, OpType.READ_VARIABLE,
                       OpType.ASSIGN_VARIABLE)},
}

# An op type the testbed has no kernel for can still be asked about (a support table, a
# partition estimate). Its arithmetic is unknown, so it is charged only what every op surely
# pays: reading its inputs and writing its outputs. Inventing element ops would be a guess.
DEFAULT_CLASS = OpClass.DATA


# Weight matrices the GPU stores in 4x4 (output x input) blocks, so both their first and last
# dimensions are padded; every other value tensor pads only its last (channel) dimension.
_MATRIX_SLOTS: Mapping[OpType, frozenset[int]] = {
    OpType.CONV_2D: frozenset({1}), OpType.TRANSPOSE_CONV: frozenset({1}),
    OpType.FULLY_CONNECTED: frozenset({1}),
    OpType.UNIDIRECTIONAL_SEQUENCE_LSTM: frozenset({1, 2, 3, 4, 5, 6, 7, 8, 16}),
}
_LSTM_CELL_STATE = 19

# SHAPE reads only its input's metadata; a gather or slice reads only the elements it picks.
_READS_NOTHING = frozenset({OpType.SHAPE, OpType.RANK})
_READS_AS_OUTPUT = frozenset({OpType.GATHER, OpType.SLICE, OpType.STRIDED_SLICE, OpType.GATHER_ND})


def op_class(op_type: OpType) -> OpClass:
    """The op family that sets which fraction of peak a unit reaches; DEFAULT_CLASS when unknown."""
    return CLASSES.get(op_type, DEFAULT_CLASS)


# Op classes that walk their output row by row, each row from a few rows of their input: a chain of them can
# run band by band (sim/htp.vtcm_split's streamed bytes). A GEMM, a reduction or a data op needs its whole input.
BANDED = frozenset({OpClass.CONV, OpClass.DEPTHWISE, OpClass.POOL, OpClass.ELEMENTWISE})


def tensor_bytes(shape: Sequence[int], kind: Precision | DType, channel_align: int = 1) -> int:
    """Bytes of a tensor stored with its last dimension padded to `channel_align`; `kind` is the
    precision the values are held in, or the tensor's own dtype for shape and index tensors."""
    size = PRECISION_BYTES[kind] if isinstance(kind, Precision) else kind.np.itemsize
    return _elements(_pad(tuple(shape), channel_align)) * size


def graph_tensor_bytes(graph: Graph, shapes: Sequence[Sequence[int]], t: int, precision: Precision,
                       channel_align: int = 1) -> int:
    """Bytes of graph tensor t at its run-time shape, as a unit in `precision` stores it (boundary copies)."""
    tensor = graph.tensors[t]
    return _stored_bytes(tensor.dtype, _stored(tensor.dtype, shapes[t], channel_align, False), precision)


def stored_shapes(op: Op, graph: Graph, shapes: Sequence[Sequence[int]],
                  channel_align: int = 1) -> tuple[list[Shape | None], list[Shape]]:
    """Input shapes by slot (None where an optional input is absent) and output shapes, as stored."""
    matrices = _MATRIX_SLOTS.get(op.type, frozenset())
    ins = [None if t < 0 else _stored(graph.tensors[t].dtype, shapes[t], channel_align, k in matrices)
           for k, t in enumerate(op.inputs)]
    outs = [_stored(graph.tensors[t].dtype, shapes[t], channel_align, False) for t in op.outputs]
    return ins, outs


def describe(op: Op, graph: Graph, shapes: Sequence[Sequence[int]], precision: Precision,
             channel_align: int = 1) -> Work:
    """What `op` asks of a unit running it in `precision` whose tensors pad channels to `channel_align`.

    `shapes[t]` is tensor t's shape at run time. Every present input is read once (constant
    weights too: they come from DRAM on every inference) and every output written once."""
    ins, outs = stored_shapes(op, graph, shapes, channel_align)
    cls, family = _kind(op)
    macs, elem_ops = family(op, ins, outs)
    dtypes = [graph.tensors[t].dtype if t >= 0 else None for t in op.inputs]
    reads = [(_stored_bytes(d, s, precision), t) for d, s, t in zip(dtypes, _read_shapes(op, ins, outs), op.inputs)
             if s is not None]
    read = sum(n for n, _ in reads)
    weights = sum(n for n, t in reads if graph.tensors[t].is_constant)
    written = sum(_stored_bytes(graph.tensors[t].dtype, s, precision) for t, s in zip(op.outputs, outs))
    out = outs[0] if outs else ()   # as stored: the GPU's padded channels are real work to it
    return Work(op.name, cls, precision, macs=macs, elem_ops=elem_ops, bytes_read=read, bytes_written=written,
                gemm=_gemm_shape(op, ins, outs), rows=_rows(out), channels=out[-1] if out else 0,
                im2col_bytes=_im2col_bytes(op, ins, outs, precision), im2col_rows=_im2col_rows(op, ins, outs),
                items=_items(op, ins, outs, cls, channel_align), weight_bytes=weights,
                spatial=_spatial(_walked(cls, ins, out)),
                winograd_tiles=_winograd_tiles(op, ins, outs), group_depth=_group_depth(op, shapes))


def _group_depth(op: Op, shapes: Sequence[Sequence[int]]) -> int:
    """Input channels per group of a grouped CONV_2D (its filter reads fewer channels than its input
    has); 0 for an ordinary convolution and other ops. Read from the tensors' own shapes: a unit that
    pads channels (a GPU's slices of 4) would make a 3-channel input look wider than its filter."""
    if op.type is not OpType.CONV_2D or len(op.inputs) < 2 or min(op.inputs[:2]) < 0:
        return 0
    depth = shapes[op.inputs[1]][-1]
    return depth if depth < shapes[op.inputs[0]][-1] else 0


def _walked(cls: OpClass, ins: list, out: Shape) -> Shape:
    """The tensor whose layout an op's loop walks: a pool's input (it reads every input crouton; a
    global pool's 1x1 output, one crouton of 64 pixels with one real, says nothing of its work),
    every other op's output."""
    if cls is OpClass.POOL and ins and ins[0] is not None:
        return ins[0]
    return out


def _spatial(shape: Shape) -> tuple[int, int]:
    """(rows, columns) of an NHWC tensor, batches stacked as rows; (0, 0) for other ranks."""
    return (shape[0] * shape[1], shape[2]) if len(shape) == 4 else (0, 0)


def footprint(graph: Graph, op_indices: Iterable[int], shapes: Sequence[Sequence[int]],
              precision: Precision, channel_align: int = 1) -> int:
    """Bytes of the distinct tensors the given ops touch, each stored as the unit stores it."""
    sizes: dict[int, int] = {}
    for i in op_indices:
        op = graph.ops[i]
        ins, outs = stored_shapes(op, graph, shapes, channel_align)
        for t, s in zip(op.inputs + op.outputs, ins + outs):
            if s is not None:
                sizes[t] = max(sizes.get(t, 0), _stored_bytes(graph.tensors[t].dtype, s, precision))
    return sum(sizes.values())


def _elements(shape: Sequence[int]) -> int:
    return math.prod(int(d) for d in shape)


def _pad(shape: Shape, align: int, first: bool = False) -> Shape:
    if align <= 1 or not shape:
        return shape
    dims = list(shape)
    dims[-1] = padded_channels(dims[-1], align)
    if first and len(dims) > 1:
        dims[0] = padded_channels(dims[0], align)
    return tuple(dims)


def _stored(dtype: DType, shape: Sequence[int], align: int, matrix: bool) -> Shape:
    shape = tuple(int(d) for d in shape)
    return _pad(shape, align, matrix) if dtype in _VALUE_DTYPES else shape


def _stored_bytes(dtype: DType, shape: Shape, precision: Precision) -> int:
    return tensor_bytes(shape, precision if dtype in _VALUE_DTYPES else dtype)


def _read_shapes(op: Op, ins: list[Shape | None], outs: list[Shape]) -> list[Shape | None]:
    if op.type in _READS_NOTHING:
        return [None] * len(ins)
    if op.type in _READS_AS_OUTPUT and ins and outs:
        return [outs[0]] + ins[1:]
    if op.type in _SEQ_CLASSES:
        return _seq_read_shapes(op, ins, outs) or ins
    if op.type in _MISC_CLASSES:
        return _misc_read_shapes(op, ins, outs) or ins
    if op.type is OpType.EMBEDDING_LOOKUP and len(ins) > 1 and outs:  # the rows looked up, not the table
        return [ins[0], outs[0]]
    return ins


def _rows(shape: Shape) -> int:
    """The dimension TFLite's kernels split across threads: output height of an NHWC tensor,
    else the outermost dimension larger than one."""
    if len(shape) == 4:
        return shape[1] * shape[0]
    return next((d for d in shape if d > 1), 1) if shape else 0


def _im2col_bytes(op: Op, ins: list, outs: list, precision: Precision) -> int:
    """Bytes a CPU convolution writes and reads back to lay its patches out as a GEMM operand:
    TFLite's optimized Conv runs im2col unless the filter is 1x1 with stride 1 and no dilation."""
    if op.type is not OpType.CONV_2D or ins[1] is None or not outs:
        return 0
    _, kh, kw, cin = ins[1]
    o = op.options
    if kh == kw == 1 and getattr(o, "stride_h", 1) == getattr(o, "stride_w", 1) == 1:
        return 0
    return 2 * _elements(outs[0][:-1]) * kh * kw * cin * PRECISION_BYTES[precision]


def _im2col_rows(op: Op, ins: list, outs: list) -> int:
    """Row copies of that im2col: one memcpy per filter row per output pixel, on one thread
    (tflite/kernels/internal/optimized/im2col_utils.h, ExtractPatchIntoBufferColumn)."""
    if not _im2col_bytes(op, ins, outs, Precision.INT8):
        return 0
    return _elements(outs[0][:-1]) * ins[1][1]


def _winograd_tiles(op: Op, ins: list, outs: list) -> int:
    """4x4 output tiles of a convolution Winograd F(4x4, 3x3) can compute: 3x3 filter, stride 1, no
    dilation (IsSuitableForWinograd4x4To6x6, tflite/delegates/gpu/common/winograd_util.cc); 0 otherwise."""
    if op.type is not OpType.CONV_2D or ins[1] is None or not outs or len(outs[0]) != 4:
        return 0
    o = op.options
    strides = (getattr(o, "stride_h", 1), getattr(o, "stride_w", 1))
    dilations = (getattr(o, "dilation_h_factor", 1), getattr(o, "dilation_w_factor", 1))
    if tuple(ins[1][1:3]) != (3, 3) or strides != (1, 1) or dilations != (1, 1):
        return 0
    return outs[0][0] * -(-outs[0][1] // 4) * -(-outs[0][2] // 4)


def _gemm_shape(op: Op, ins: list, outs: list) -> tuple[int, int, int] | None:
    """(rows, columns, depth) of the GEMM a convolution (im2col) or a fully connected layer runs."""
    if op.type is OpType.CONV_2D and ins[1] is not None and outs:
        cout, kh, kw, cin = ins[1]
        return _elements(outs[0][:-1]), outs[0][-1], kh * kw * cin
    if op.type is OpType.FULLY_CONNECTED and ins[1] is not None and outs:
        cout, cin = ins[1]
        return _elements(outs[0][:-1]), cout, cin
    return None


# Each family maps (op, input shapes by slot, output shapes) to (MACs, element ops).
Family = Callable[[Op, list, list], tuple[int, int]]


def _conv(op: Op, ins: list, outs: list) -> tuple[int, int]:
    _, kh, kw, cin = ins[1]
    return _elements(outs[0]) * kh * kw * cin, 0


def _depthwise(op: Op, ins: list, outs: list) -> tuple[int, int]:
    _, kh, kw, _ = ins[1]
    return _elements(outs[0]) * kh * kw, 0


def _transpose_conv(op: Op, ins: list, outs: list) -> tuple[int, int]:
    cout, kh, kw, _ = ins[1]
    return _elements(ins[2]) * kh * kw * cout, 0


def _fully_connected(op: Op, ins: list, outs: list) -> tuple[int, int]:
    cout, cin = ins[1]
    return _elements(outs[0][:-1]) * cout * cin, 0


def _batch_matmul(op: Op, ins: list, outs: list) -> tuple[int, int]:
    adj_x = bool(getattr(op.options, "adj_x", False))
    k = ins[0][-2] if adj_x else ins[0][-1]
    return _elements(outs[0]) * k, 0


def _lstm(op: Op, ins: list, outs: list) -> tuple[int, int]:
    """Every gate and projection matrix is applied once per step and batch row (time x batch)."""
    rows = _elements(ins[0][:-1])
    weights = sum(_elements(ins[k]) for k in _MATRIX_SLOTS[op.type] if k < len(ins) and ins[k] is not None)
    units = ins[_LSTM_CELL_STATE][-1] if len(ins) > _LSTM_CELL_STATE and ins[_LSTM_CELL_STATE] else 0
    return rows * weights, rows * units * _LSTM_UNIT_OPS


def _pool(op: Op, ins: list, outs: list) -> tuple[int, int]:
    window = getattr(op.options, "filter_height", 1) * getattr(op.options, "filter_width", 1)
    return 0, _elements(outs[0]) * window


def _per_output(op: Op, ins: list, outs: list) -> tuple[int, int]:
    return 0, sum(_elements(s) for s in outs) * ELEM_OPS_PER_OUTPUT.get(op.type, 1)


def _reduce(op: Op, ins: list, outs: list) -> tuple[int, int]:
    return 0, _elements(ins[0])


def _no_arithmetic(op: Op, ins: list, outs: list) -> tuple[int, int]:
    return 0, 0


def _is_global_average_pool(op: Op, ins: list, outs: list) -> bool:
    """A window over the whole input and no padding (what the GPU delegate turns into a MEAN)."""
    if op.type is not OpType.AVERAGE_POOL_2D or not ins or ins[0] is None or len(ins[0]) != 4:
        return False
    o = op.options
    return (getattr(o, "filter_height", 0) == ins[0][1] and getattr(o, "filter_width", 0) == ins[0][2]
            and tuple(outs[0][1:3]) == (1, 1))


def _items(op: Op, ins: list, outs: list, cls: OpClass, channel_align: int) -> int:
    """Parallel GPU work items: an output slice of channel_align channels each, and for reductions a
    work group per output (sim/mechanisms.py reduction_items)."""
    if not outs:
        return 0
    outputs = _elements(outs[0]) // max(1, channel_align)
    if (cls is OpClass.REDUCE or _is_global_average_pool(op, ins, outs)) and ins and ins[0] is not None:
        return mx.reduction_items(outputs, _elements(ins[0]) // max(1, _elements(outs[0])))
    return outputs


def _custom_transpose_conv(op: Op, ins: list, outs: list) -> tuple[int, int]:
    """MediaPipe's Convolution2DTransposeBias: data in slot 0, OHWI weights in slot 1."""
    cout, kh, kw, _ = ins[1]
    return _elements(ins[0]) * kh * kw * cout, 0


# Custom ops costed by what their kernels compute, by custom code; any other custom op moves its
# bytes only (the time a user without its kernel gets, timing-only).
CUSTOM_KINDS: Mapping[str, tuple[OpClass, Family]] = {
    "Convolution2DTransposeBias": (OpClass.CONV, _custom_transpose_conv),
    "MaxPoolingWithArgmax2D": (OpClass.POOL, _reduce),          # every input element compared once
    "MaxUnpooling2D": (OpClass.DATA, _no_arithmetic),
    "TFLite_Detection_PostProcess": (OpClass.REDUCE, _reduce),  # decoding and thresholding each box
}


def _kind(op: Op) -> tuple[OpClass, Family]:
    if op.type is OpType.CUSTOM and op.custom_code in CUSTOM_KINDS:
        return CUSTOM_KINDS[op.custom_code]
    cls = op_class(op.type)
    return cls, _FAMILIES.get(op.type) or _CLASS_FAMILIES.get(cls, _no_arithmetic)


_FAMILIES: Mapping[OpType, Family] = {
    OpType.CONV_2D: _conv, OpType.DEPTHWISE_CONV_2D: _depthwise, OpType.TRANSPOSE_CONV: _transpose_conv,
    OpType.FULLY_CONNECTED: _fully_connected, OpType.BATCH_MATMUL: _batch_matmul,
    OpType.UNIDIRECTIONAL_SEQUENCE_LSTM: _lstm,
}
_CLASS_FAMILIES: Mapping[OpClass, Family] = {
    OpClass.ELEMENTWISE: _per_output, OpClass.TRANSCENDENTAL: _per_output, OpClass.RESIZE: _per_output,
    OpClass.POOL: _pool, OpClass.REDUCE: _reduce, OpClass.DATA: _no_arithmetic,
}

# Recurrent ops, SVDF, 3-D convolutions, sparse embedding and StableHLO-era ops (sim/work_seq.py).
from sim.work_seq import CLASSES as _SEQ_CLASSES, FAMILIES as _SEQ_FAMILIES, MATRIX_SLOTS as _SEQ_MATRICES  # noqa: E402
from sim.work_seq import read_shapes as _seq_read_shapes  # noqa: E402
CLASSES.update(_SEQ_CLASSES)
_FAMILIES.update(_SEQ_FAMILIES)
_MATRIX_SLOTS.update(_SEQ_MATRICES)
# Complex numbers, BITCAST, random draws, StableHLO gather/scatter/reduce_window (sim/work_misc.py).
from sim.work_misc import CLASSES as _MISC_CLASSES, FAMILIES as _MISC_FAMILIES  # noqa: E402
from sim.work_misc import read_shapes as _misc_read_shapes  # noqa: E402
CLASSES.update(_MISC_CLASSES)
_FAMILIES.update(_MISC_FAMILIES)
