"""The temporary tensors TFLite's reference kernels add to the model's tensor list (Init and Prepare).

LiteRT's get_tensor_details() lists every tensor of the subgraph, and kernels append their own: the
on-the-fly quantized input, scaling factors and row sums of a hybrid op, a reduction's index
scratch, an LSTM's gate buffer. A kernel adds its slots with AddTensors, in Init (then they sit
untyped until Prepare) or in Prepare; Init runs for every node before any Prepare, each pass in
node order. Slots a kernel adds but never types (kTfLiteNoType) take an index yet are left out of
the list; a few are typed only when the node first runs (Eval). AllocateTensors prepares nodes in
order up to the first whose output the kernel makes dynamic (its shape hangs on a value known only
at run time); the rest are prepared by the first invoke. The rules below are those of the
reference kernels (OpResolverType.BUILTIN_REF), which are the kernels the testbed reproduces;
tests/test_interpreter.py holds them to LiteRT's list.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Collection, Sequence

from runtime.ir.graph import DType, Graph, Op
from runtime.ir.optypes import OpType

__all__ = ["Temporary", "temporaries", "node_temporaries", "shape_inputs", "dynamic_nodes", "prepared_by_allocation"]

Shape = tuple[int, ...]
F32, I32, I8 = DType.FLOAT32, DType.INT32, DType.INT8
_EIGHT_BIT = (DType.INT8, DType.UINT8)


@dataclass(frozen=True)
class Temporary:
    """One slot a kernel adds; dtype None: added but never typed, so not listed."""

    dtype: DType | None
    shape: Shape = ()
    name: str = ""
    at_eval: bool = False  # typed when the node first runs, not in Prepare
    allocation: str = "arena"  # "persistent" (kTfLiteArenaRwPersistent, kept), "dynamic" (kTfLiteDynamic, heap)


_UNTYPED = Temporary(None)


def temporaries(graph: Graph, shapes: Sequence[Sequence[int]], prepared: Collection[int],
                evaluated: Collection[int] = ()) -> list[Temporary]:
    """The slots appended to the tensor list after the model's own, in index order, for tensors of
    the given run-time shapes, once the `prepared` nodes have been prepared and the `evaluated`
    ones have run. A node a delegate took keeps the slots its Init added, never prepared."""
    shape = lambda t: tuple(int(d) for d in shapes[t])  # noqa: E731
    init, prepare = [], []
    for i, op in enumerate(graph.ops):
        rule = _rule(op)
        if rule is None:
            continue
        at_init, at_prepare = rule(op, graph, shape)
        typed = [t if i in prepared and (not t.at_eval or i in evaluated) else _UNTYPED for t in at_init]
        init += typed  # Init's slots are there from the start, typed once Prepare or Eval comes
        if i in prepared:
            prepare += [t if not t.at_eval or i in evaluated else _UNTYPED for t in at_prepare]
    return init + prepare


# Inputs that set an output's shape: unless constant, or a SHAPE output (shape.cc computes it in
# Prepare and keeps it persistent), the kernel makes its output dynamic in Prepare.
_SHAPE_INPUTS: dict[OpType, tuple[int, ...]] = {
    OpType.RESHAPE: (1,), OpType.PAD: (1,), OpType.PADV2: (1,), OpType.MIRROR_PAD: (1,),
    OpType.SLICE: (1, 2), OpType.STRIDED_SLICE: (1, 2, 3), OpType.RESIZE_BILINEAR: (1,),
    OpType.RESIZE_NEAREST_NEIGHBOR: (1,), OpType.TILE: (1,), OpType.TRANSPOSE: (1,), OpType.FILL: (0,),
    OpType.BROADCAST_TO: (1,), OpType.TRANSPOSE_CONV: (0,),
    OpType.RFFT2D: (1,), OpType.RANDOM_UNIFORM: (0,), OpType.RANDOM_STANDARD_NORMAL: (0,),
    OpType.MULTINOMIAL: (0, 1),   # random_ops.cc: logits too, unless constant
}


def shape_inputs(op: Op) -> list[int]:
    """The op's inputs whose values set its output's shape (-1: absent)."""
    return [op.inputs[k] for k in _SHAPE_INPUTS.get(op.type, ()) if k < len(op.inputs)]


def dynamic_nodes(graph: Graph) -> list[int]:
    """The nodes whose kernel makes an output dynamic in Prepare (kTfLiteDynamic: its shape hangs on
    a value that is neither constant nor a SHAPE output)."""
    persistent = {op.outputs[0] for op in graph.ops if op.type is OpType.SHAPE}
    return [i for i, op in enumerate(graph.ops)
            if any(t >= 0 and not graph.tensors[t].is_constant and t not in persistent for t in shape_inputs(op))]


def prepared_by_allocation(graph: Graph) -> list[int]:
    """The nodes AllocateTensors prepares: in order, up to and including the first whose output
    becomes dynamic (PrepareOpsStartingAt stops there; Invoke prepares the rest)."""
    first = next(iter(dynamic_nodes(graph)), None)
    return list(range(len(graph.ops) if first is None else first + 1))


def node_temporaries(graph: Graph, shapes: Sequence[Sequence[int]],
                     prepared: Collection[int]) -> list[tuple[int, Temporary]]:
    """(node, slot) for every slot kernels add, in the order of their tensor indices (Init's for
    every node, then Prepare's of the `prepared` nodes), untyped ones included: they take an index
    but no bytes. The arena planner gives each typed slot its node's lifetime."""
    shape = lambda t: tuple(int(d) for d in shapes[t])  # noqa: E731
    init, prepare = [], []
    for i, op in enumerate(graph.ops):
        rule = _rule(op)
        if rule is None:
            continue
        at_init, at_prepare = rule(op, graph, shape)
        init += [(i, t if i in prepared else _UNTYPED) for t in at_init]
        prepare += [(i, t) for t in at_prepare] if i in prepared else []
    return init + prepare


Rule = Callable[[Op, Graph, Callable[[int], Shape]], tuple[list[Temporary], list[Temporary]]]


def _size(shape: Shape) -> int:
    return math.prod(shape)


def _hybrid(op: Op, graph: Graph, weights: int = 1) -> bool:
    return (graph.tensors[op.inputs[0]].dtype is F32
            and graph.tensors[op.inputs[weights]].dtype in _EIGHT_BIT)


def _per_channel(graph: Graph, t: int) -> bool:
    """conv.cc's is_hybrid_per_channel: int8 weights with several scales, not all equal."""
    tensor = graph.tensors[t]
    scales = tensor.quant.scale if tensor.quant is not None else ()
    return tensor.dtype is I8 and len(scales) > 1 and any(s != scales[0] for s in scales)


def _conv(op, graph, shape):
    """conv.cc: im2col (the reference kernel needs it only for a hybrid conv that is not 1x1 at
    stride 1), then the quantized input, per-row scaling factors, the int32 accumulators and,
    per channel, the input offsets and "Conv_row_sums"."""
    if not _hybrid(op, graph):
        return [], []
    x, y = shape(op.inputs[0]), shape(op.outputs[0])
    cout, kh, kw, cin = graph.tensors[op.inputs[1]].shape
    o = op.options
    strided = getattr(o, "stride_h", 1) != 1 or getattr(o, "stride_w", 1) != 1
    dilated = getattr(o, "dilation_h_factor", 1) != 1 or getattr(o, "dilation_w_factor", 1) != 1
    out = []
    if strided or dilated or kh != 1 or kw != 1:
        out.append(Temporary(I8, (*y[:3], kh * kw * cin)))
    rows = _size(x) // cin
    out += [Temporary(I8, x), Temporary(F32, (rows,)), Temporary(I32, (cout, _size(y[:3])))]
    if _per_channel(graph, op.inputs[1]):
        out += [Temporary(I32, (rows,)), Temporary(I32, (cout,), "Conv_row_sums", allocation="persistent")]
    return [], out


def _depthwise(op, graph, shape):
    """depthwise_conv.cc, hybrid per channel: quantized input, scaling factor and offset per image."""
    if graph.tensors[op.inputs[0]].dtype is not F32 or graph.tensors[op.inputs[1]].dtype is not I8:
        return [], []
    x = shape(op.inputs[0])
    return [], [Temporary(I8, x), Temporary(F32, x[:1]), Temporary(I32, x[:1])]


def _fully_connected(op, graph, shape):
    """fully_connected.cc adds six slots whatever the types; a hybrid one types five of them."""
    if not _hybrid(op, graph):
        return [], [_UNTYPED] * 6
    x = shape(op.inputs[0])
    units, depth = graph.tensors[op.inputs[1]].shape
    batch = _size(x) // depth
    return [], [Temporary(graph.tensors[op.inputs[1]].dtype, x), Temporary(F32, (batch,)),
                Temporary(I32, (units, batch)), Temporary(I32, (batch,)),
                Temporary(I32, (units,), allocation="persistent"), _UNTYPED]  # the row sums, kept


def _transpose_conv(op, graph, shape):
    """transpose_conv.cc: an integer model's int32 accumulator, a hybrid one's quantized input with
    scaling factors and offsets per input pixel (the float reference kernel needs none)."""
    x = graph.tensors[op.inputs[2]]
    if x.dtype in _EIGHT_BIT:  # on the heap; with a run-time output shape, sized (and typed) in Eval
        return [], [Temporary(I32, shape(op.outputs[0]), at_eval=not graph.tensors[op.inputs[0]].is_constant,
                              allocation="dynamic")]
    if x.dtype is F32 and graph.tensors[op.inputs[1]].dtype is I8:
        xs = shape(op.inputs[2])
        pixels = (_size(xs[:3]),)
        return [], [Temporary(I8, xs), Temporary(F32, pixels), Temporary(I32, pixels)]
    return [], []


def _reduce(accumulates: bool, normalizes: bool = False) -> Rule:
    """reduce.cc: the index scratch, the resolved axes, a MEAN's or SUM's accumulator (int32 for
    8-bit data) and a fourth slot; REDUCE_MAX/MIN leave the accumulator untyped. MEAN types the
    fourth (its normalized dimensions, int32 per input dimension) when it first runs."""
    def rule(op, graph, shape):
        x = graph.tensors[op.inputs[0]]
        rank = len(shape(op.inputs[0]))
        out = [Temporary(I32, (rank,)), Temporary(I32, (_size(shape(op.inputs[1])),))]
        if accumulates:
            out.append(Temporary(I32 if x.dtype in _EIGHT_BIT else F32, (_size(shape(op.outputs[0])),)))
        else:
            out.append(_UNTYPED)
        return [], out + [Temporary(I32, (rank,), at_eval=True) if normalizes else _UNTYPED]
    return rule


def _batch_matmul(op, graph, shape):
    """batch_matmul.cc: both operands with their last two dimensions swapped, the right one named
    as its scratch buffer, and five slots only a hybrid product types."""
    def swapped(t: int) -> Shape:
        s = shape(t)
        return (*s[:-2], s[-1], s[-2])
    lhs, rhs = op.inputs[0], op.inputs[1]
    return [], [Temporary(graph.tensors[lhs].dtype, swapped(lhs)),
                Temporary(graph.tensors[rhs].dtype, swapped(rhs), "BatchMatMul_scratch_buffer"), *[_UNTYPED] * 5]


def _lstm(op, graph, shape):
    """unidirectional_sequence_lstm.cc adds twelve slots in Init. Prepare types the gate scratch
    ([batch, 4 or 5 gates x cells + 16]) and, for a hybrid LSTM, the quantized input and states,
    their scaling factors and zero points, the recovered cell weights, the accumulator and
    "Lstm_row_sums" (one row per gate matrix, more for a projection)."""
    o = op.options
    x = shape(op.inputs[0])
    batch = x[1] if getattr(o, "time_major", False) and len(x) == 3 else x[0]
    cifg = op.inputs[1] < 0
    # cells from the input-to-output weights, outputs from the recurrent-to-output ones (never CIFG-absent)
    cells, outputs = graph.tensors[op.inputs[4]].shape[0], graph.tensors[op.inputs[8]].shape[1]
    scratch = Temporary(F32, (batch, cells * (4 if cifg else 5) + 16))
    if not _hybrid(op, graph, weights=2):
        return [scratch, *[_UNTYPED] * 11], []
    rows = (6 if cifg else 8) + (math.ceil(outputs / cells) if len(op.inputs) > 16 and op.inputs[16] >= 0 else 0)
    weights = graph.tensors[op.inputs[2]].dtype
    per_batch = Temporary(F32, (batch,))
    return [scratch, Temporary(weights, x), Temporary(weights, (batch, outputs)), Temporary(weights, (batch, cells)),
            per_batch, per_batch, per_batch, Temporary(F32, (cells,)), Temporary(I32, (cells, batch)),
            per_batch, per_batch, Temporary(I32, (rows, cells), "Lstm_row_sums", allocation="persistent")], []


def _rfft2d(op, graph, shape):
    """rfft2d.cc: the FFT library's int and double work areas (2 + sqrt(n) ints, n / 2 + width / 4
    doubles for n = max(height, width / 2)), the row pointers and the [height, width + 2] buffer;
    the doubles are int64 slots. With a run-time fft_length they are sized when the node runs."""
    lengths = graph.tensors[op.inputs[1]].data
    h, w = (int(v) for v in lengths.reshape(-1)[:2]) if lengths is not None else (0, 0)
    n = max(h, w // 2)
    at_eval = lengths is None
    dims = [(2 + math.isqrt(n),), (n // 2 + w // 4,), (h,), (h, w + 2)]
    return [], [Temporary(I32 if k == 0 else DType.INT64, d, at_eval=at_eval) for k, d in enumerate(dims)]


def _stablehlo_reduce_window(op, graph, shape):
    """stablehlo_reduce_window.cc adds two slots in Init, typed in Prepare: the input dilated by the
    base dilations, then padded (both of the input's type)."""
    from runtime.ops.opcheck_misc import padded_shape
    from runtime.ops.stablehlo_index import window_attributes

    x = shape(op.inputs[0])
    _, _, base, _, pad = window_attributes(op.options, len(x))
    dilated = tuple((d - 1) * b + 1 for d, b in zip(x, base))
    dtype = graph.tensors[op.inputs[0]].dtype
    return [Temporary(dtype, dilated), Temporary(dtype, tuple(padded_shape(x, base, pad)))], []


def _detection_postprocess(op, graph, shape):
    """detection_postprocess.cc adds two slots in Init, typed in Prepare: the decoded boxes
    [boxes, 4] and the scores [boxes, classes with background], both float32."""
    boxes, scores = shape(op.inputs[0]), shape(op.inputs[1])
    return [Temporary(F32, (boxes[-2], 4)), Temporary(F32, tuple(scores[-2:]))], []


_CUSTOM_RULES: dict[str, Rule] = {"TFLite_Detection_PostProcess": _detection_postprocess}


def _rule(op: Op) -> Rule | None:
    return _CUSTOM_RULES.get(op.custom_code or "") if op.type is OpType.CUSTOM else _RULES.get(op.type)


_RULES: dict[OpType, Rule] = {
    OpType.CONV_2D: _conv,
    OpType.DEPTHWISE_CONV_2D: _depthwise,
    OpType.FULLY_CONNECTED: _fully_connected,
    OpType.TRANSPOSE_CONV: _transpose_conv,
    OpType.MEAN: _reduce(True, normalizes=True), OpType.SUM: _reduce(True),
    OpType.REDUCE_MAX: _reduce(False), OpType.REDUCE_MIN: _reduce(False),
    OpType.BATCH_MATMUL: _batch_matmul,
    OpType.UNIDIRECTIONAL_SEQUENCE_LSTM: _lstm,
    OpType.RFFT2D: _rfft2d, OpType.STABLEHLO_REDUCE_WINDOW: _stablehlo_reduce_window,
}
