"""Index, gather/scatter, batch<->space, segment, top-k and NMS kernels against LiteRT's reference
kernels (BUILTIN_REF), on single-op models written with the testbed's own writer, over several
shapes and every element type TFLite takes; and damaged models refused with one ModelError line."""

from __future__ import annotations

import dataclasses
import functools
import os
import tempfile

import numpy as np
import pytest

from runtime.ops import opcheck
from runtime.ir import options as opt
from runtime.ir.errors import ModelError
from runtime.ir.graph import DType, Graph, Op, QuantParams, Tensor
from runtime.interpreter.api import Interpreter
from runtime.ir.optypes import DATA_INPUT, OpType
from runtime.model.tflite_write import save
from tests.litert_oracle import available, run_litert

F32, F64, I8, U8, I16, I32, I64, BOOL = (DType.FLOAT32, DType.FLOAT64, DType.INT8, DType.UINT8, DType.INT16,
                                         DType.INT32, DType.INT64, DType.BOOL)
DATA = (F32, I8, U8, I32, I64)

# The highest version of each op LiteRT's reference resolver registers (a model may name any
# version up to it; the converter writes higher ones for the newer element types).
VERSIONS = {
    OpType.BATCH_TO_SPACE_ND: 4, OpType.SPACE_TO_BATCH_ND: 4, OpType.TILE: 2, OpType.BROADCAST_TO: 4,
    OpType.BROADCAST_ARGS: 1, OpType.FILL: 5, OpType.RANGE: 1, OpType.RANK: 1, OpType.ONE_HOT: 1,
    OpType.GATHER_ND: 6, OpType.SCATTER_ND: 1, OpType.REVERSE_V2: 4, OpType.REVERSE_SEQUENCE: 1,
    OpType.MATRIX_DIAG: 1, OpType.MATRIX_SET_DIAG: 1, OpType.SPARSE_TO_DENSE: 3, OpType.WHERE: 2,
    OpType.UNIQUE: 1, OpType.TOPK_V2: 3, OpType.SEGMENT_SUM: 1, OpType.UNSORTED_SEGMENT_SUM: 1,
    OpType.UNSORTED_SEGMENT_PROD: 1, OpType.UNSORTED_SEGMENT_MAX: 1, OpType.UNSORTED_SEGMENT_MIN: 1,
    OpType.DYNAMIC_UPDATE_SLICE: 6, OpType.EMBEDDING_LOOKUP: 5, OpType.BUCKETIZE: 1,
    OpType.NON_MAX_SUPPRESSION_V4: 1, OpType.NON_MAX_SUPPRESSION_V5: 1,
}
# The reference resolver has no SEGMENT_SUM at any version: it is held to the builtin kernel.
NOT_IN_REFERENCE = {"segment_sum"}


# -- building single-op models ----------------------------------------------------------------------


def q8(dtype: DType) -> QuantParams | None:
    return QuantParams((0.05,), (3 if dtype is U8 else -2,)) if dtype in (I8, U8) else None


def tensor(name, dtype=F32, shape=(), data=None, quant="auto", sig=None) -> Tensor:
    if data is not None:
        data = np.asarray(data, dtype.np)
        shape = data.shape
    return Tensor(name, tuple(shape), dtype, quant=q8(dtype) if quant == "auto" else quant, data=data,
                  shape_signature=sig)


def const(values, dtype=I32, name="c") -> Tensor:
    return tensor(name, dtype, data=values, quant=None if dtype not in (I8, U8) else "auto")


def values(rng, shape, dtype: DType) -> np.ndarray:
    if dtype.np.kind == "f":
        return rng.standard_normal(shape).astype(dtype.np)
    if dtype is BOOL:
        return rng.integers(0, 2, shape).astype(bool)
    info = np.iinfo(dtype.np)
    return rng.integers(max(info.min, -300), min(info.max, 300) + 1, shape).astype(dtype.np)


@dataclasses.dataclass
class Case:
    label: str
    graph: Graph
    feeds: dict[int, np.ndarray]


def case(label, op_type, inputs, outputs, options=None, feeds=None, rng=None, version=None) -> Case:
    """A one-op model. `outputs`: (dtype, shape, quant) per output; a shape of None is computed by
    the op's check (the declared shape), a shape with -1 is dynamic (declared 1 there, with a
    shape signature). Non-constant inputs are model inputs, fed `feeds` or random values."""
    n = len(inputs)
    placeholder = [Tensor(f"y{j}", (), d, quant=q) for j, (d, _, q) in enumerate(outputs)]
    op = Op(op_type, tuple(range(n)), tuple(range(n, n + len(outputs))), options,
            version or VERSIONS[op_type])
    live = tuple(k for k, t in enumerate(inputs) if not t.is_constant)
    graph = Graph((*inputs, *placeholder), (op,), live, op.outputs, name=label)
    feeds = dict(feeds or {})
    rng = rng or np.random.default_rng(0)
    for k in live:
        feeds.setdefault(k, values(rng, inputs[k].shape, inputs[k].dtype))
    value_of = lambda t: feeds.get(t, graph.tensors[t].data)  # noqa: E731
    computed = None
    if any(shape is None for _, shape, _ in outputs):  # (a damaged case declares its shapes)
        computed, _ = opcheck.check_op(graph, 0, lambda t: graph.tensors[t].shape, value_of)
    outs = []
    for j, (d, shape, q) in enumerate(outputs):
        if shape is None:
            shape, sig = computed[j], None
        else:
            sig = tuple(shape) if -1 in shape else None
            shape = tuple(1 if s == -1 else s for s in shape)
        outs.append(Tensor(f"y{j}", tuple(shape), d, quant=q, shape_signature=sig))
    return Case(label, Graph((*inputs, *outs), (op,), live, op.outputs, name=label), feeds)


def same(x: Tensor):
    """An output spec with the input's type and quantization (data moved as it is)."""
    return (x.dtype, None, x.quant)


# -- cases per op ---------------------------------------------------------------------------------


def batch_to_space_cases():
    out = []
    geometry = [((4, 2, 3, 2), [2, 2], [[0, 0], [0, 1]]), ((8, 1, 2, 3), [2, 4], [[0, 1], [1, 2]]),
                ((6, 4, 3), [3], [[1, 2]]), ((2, 3, 3, 1), [1, 2], [[0, 0], [0, 0]])]
    for dtype in (F32, I8, U8, I16, I32, I64):
        for g, (shape, block, crops) in enumerate(geometry):
            x = tensor("x", dtype, shape)
            out.append(case(f"{dtype.name}_{g}", OpType.BATCH_TO_SPACE_ND,
                            [x, const(block, name="block"), const(crops, name="crops")], [same(x)]))
    return out


def space_to_batch_cases():
    out = []
    geometry = [((1, 4, 4, 2), [2, 2], [[0, 0], [0, 0]]), ((2, 3, 5, 3), [2, 3], [[1, 0], [0, 1]]),
                ((1, 5, 2), [3], [[1, 0]]), ((1, 2, 2, 1), [2, 2], [[1, 1], [2, 0]])]
    for dtype in (F32, I8, U8, I16, I32, I64):
        for g, (shape, block, pads) in enumerate(geometry):
            x = tensor("x", dtype, shape)
            out.append(case(f"{dtype.name}_{g}", OpType.SPACE_TO_BATCH_ND,
                            [x, const(block, name="block"), const(pads, name="pads")], [same(x)]))
    # Dilated convolutions' pattern: block and paddings computed before they are used.
    x = tensor("x", F32, (1, 6, 6, 2))
    out.append(case("live_paddings", OpType.SPACE_TO_BATCH_ND,
                    [x, const([2, 2], name="block"), tensor("pads", I32, (2, 2))],
                    [(F32, (-1, -1, -1, 2), None)], feeds={2: np.array([[2, 2], [0, 2]], np.int32)}))
    return out


def tile_cases():
    out = []
    for dtype in (F32, I8, U8, I16, I32, I64, BOOL):
        for m, (shape, mult) in enumerate([((2, 3), [2, 1]), ((1, 2, 2), [3, 2, 1]), ((4,), [0])]):
            for itype in (I32, I64):
                x = tensor("x", dtype, shape)
                out.append(case(f"{dtype.name}_{m}_{itype.name}", OpType.TILE, [x, const(mult, itype, "m")],
                                [same(x)]))
    return out


def broadcast_to_cases():
    out = []
    for dtype in (F32, I8, U8, I16, I32, I64, BOOL):
        for m, (shape, target) in enumerate([((3,), [2, 3]), ((2, 1), [2, 4]), ((1, 1, 3), [2, 1, 2, 3]),
                                             ((), [2, 2])]):
            x = tensor("x", dtype, shape)
            out.append(case(f"{dtype.name}_{m}", OpType.BROADCAST_TO, [x, const(target, I64 if m % 2 else I32, "s")],
                            [same(x)]))
    return out


def broadcast_args_cases():
    out = []
    for itype in (I32, I64):
        for m, (a, b) in enumerate([([2, 1, 3], [4, 1]), ([1], [5, 6]), ([7, 1], [7, 3])]):
            out.append(case(f"{itype.name}_{m}", OpType.BROADCAST_ARGS,
                            [tensor("a", itype, (len(a),)), tensor("b", itype, (len(b),))], [(itype, None, None)],
                            feeds={0: np.array(a, itype.np), 1: np.array(b, itype.np)}))
    return out


def fill_cases():
    out = []
    for dtype in (F32, I32, I64, BOOL, I8, U8, I16):
        for itype in (I32, I64):
            v = tensor("v", dtype, ())
            out.append(case(f"{dtype.name}_{itype.name}", OpType.FILL, [const([2, 3, 1], itype, "dims"), v],
                            [same(v)], opt.FillOptions()))
    out.append(case("live_dims", OpType.FILL, [tensor("dims", I32, (2,)), const(1.5, F32, "v")],
                    [(F32, (-1, -1), None)], feeds={0: np.array([3, 4], np.int32)}))
    return out


def range_cases():
    out = []
    spans = {F32: [(0.5, 4.0, 0.3), (3.0, -2.0, -0.7), (0.1, 10.0, 0.1)],
             I32: [(0, 10, 3), (5, -7, -2), (3, 4, 1)], I64: [(-4, 9, 4), (10, 0, -3)]}
    for dtype, rows in spans.items():
        for m, (s, e, d) in enumerate(rows):
            ins = [const(s, dtype, "start"), const(e, dtype, "limit"), const(d, dtype, "delta")]
            out.append(case(f"{dtype.name}_{m}", OpType.RANGE, ins, [(dtype, None, None)], opt.RangeOptions()))
    ins = [tensor("start", F32), tensor("limit", F32), tensor("delta", F32)]
    out.append(case("live", OpType.RANGE, ins, [(F32, (-1,), None)], opt.RangeOptions(),
                    feeds={0: np.float32(-1.0), 1: np.float32(7.3), 2: np.float32(0.9)}))
    return out


def rank_cases():
    return [case(f"{dtype.name}_{len(shape)}", OpType.RANK, [tensor("x", dtype, shape)], [(I32, None, None)])
            for dtype in (F32, I8, BOOL) for shape in [(), (3,), (2, 1, 4)]]


def one_hot_cases():
    out = []
    for dtype in (F32, I32, I64, I8, U8, BOOL):
        for itype in (I32, I64):
            for axis in (-1, 0, 1):
                idx = tensor("i", itype, (2, 3))
                on, off = (True, False) if dtype is BOOL else (5, -1 if dtype is not U8 else 7)
                ins = [idx, const(4, I32, "depth"), const(on, dtype, "on"), const(off, dtype, "off")]
                out.append(case(f"{dtype.name}_{itype.name}_{axis}", OpType.ONE_HOT, ins,
                                [(dtype, None, q8(dtype))], opt.OneHotOptions(axis),
                                feeds={0: np.array([[0, 3, -1], [4, 2, 1]], itype.np)}))
    return out


def gather_nd_cases():
    out = []
    for dtype in (F32, I8, U8, I16, I32, I64, BOOL):
        for itype in (I16, I32, I64):
            for m, (shape, ix) in enumerate([((3, 4), [[0, 1], [2, 3], [1, 0]]), ((3, 4, 2), [[2], [0]]),
                                             ((2, 3), [[[1, 2]], [[0, 0]]])]):
                x = tensor("x", dtype, shape)
                out.append(case(f"{dtype.name}_{itype.name}_{m}", OpType.GATHER_ND, [x, const(ix, itype, "ix")],
                                [same(x)]))
    x = tensor("x", F32, (4, 3))
    out.append(case("live_indices", OpType.GATHER_ND, [x, tensor("ix", I32, (2, 2))], [same(x)],
                    feeds={1: np.array([[3, 2], [0, 1]], np.int32)}))
    return out


def scatter_nd_cases():
    out = []
    for dtype in (F32, I8, U8, I32, I64, BOOL):
        for itype in (I32,):
            u = tensor("u", dtype, (4, 3))
            ix = const([[1], [3], [1], [0]], itype, "ix")  # a repeated index: the updates add up
            out.append(case(f"{dtype.name}_{itype.name}", OpType.SCATTER_ND, [ix, u, const([5, 3], itype, "shape")],
                            [same(u)], opt.ScatterNdOptions()))
    u = tensor("u", F32, (2,))
    out.append(case("elements", OpType.SCATTER_ND, [const([[0, 1], [2, 2]], I32, "ix"), u, const([3, 3], I32, "s")],
                    [same(u)], opt.ScatterNdOptions()))
    return out


def reverse_v2_cases():
    out = []
    for dtype in (F32, I8, U8, I16, I32, I64, BOOL):
        for m, (shape, axes) in enumerate([((2, 3, 4), [1]), ((5,), [0]), ((2, 3, 4), [-1]), ((3, 2), [0, 1])]):
            x = tensor("x", dtype, shape)
            out.append(case(f"{dtype.name}_{m}", OpType.REVERSE_V2, [x, const(axes, I32, "axis")], [same(x)]))
    return out


def reverse_sequence_cases():
    out = []
    for dtype in (F32, I16, I32, I64, U8):
        for itype in (I32, I64):
            for seq, batch, shape, lengths in [(1, 0, (3, 5, 2), [5, 0, 3]), (0, 2, (4, 2, 3), [1, 4, 2])]:
                x = tensor("x", dtype, shape)
                out.append(case(f"{dtype.name}_{itype.name}_{seq}{batch}", OpType.REVERSE_SEQUENCE,
                                [x, const(lengths, itype, "len")], [same(x)], opt.ReverseSequenceOptions(seq, batch)))
    return out


def matrix_diag_cases():
    out = []
    for dtype in (F32, I8, U8, I16, I32, I64):
        for shape in [(3,), (2, 4)]:
            x = tensor("x", dtype, shape)
            out.append(case(f"{dtype.name}_{len(shape)}", OpType.MATRIX_DIAG, [x], [same(x)]))
    return out


def matrix_set_diag_cases():
    out = []
    for dtype in (F32, I8, U8, I16, I32, I64):
        for shape in [(3, 3), (2, 3, 5), (4, 2)]:
            x = tensor("x", dtype, shape)
            d = tensor("d", dtype, shape[:-2] + (min(shape[-2:]),))
            out.append(case(f"{dtype.name}_{len(shape)}_{shape[-1]}", OpType.MATRIX_SET_DIAG, [x, d], [same(x)]))
    return out


def sparse_to_dense_cases():
    out = []
    for dtype in (F32, I32, I64, I8, U8):
        for itype in (I32, I64):
            v = tensor("v", dtype, (3,))
            ins = [const([[0, 1], [2, 0], [1, 3]], itype, "ix"), const([3, 4], itype, "shape"), v,
                   const(7 if dtype is not F32 else 0.5, dtype, "default")]
            out.append(case(f"{dtype.name}_{itype.name}", OpType.SPARSE_TO_DENSE, ins, [same(v)],
                            opt.SparseToDenseOptions(False)))
    v = tensor("v", F32, ())
    out.append(case("scalar_value_1d", OpType.SPARSE_TO_DENSE,
                    [const([4, 0, 2], I32, "ix"), const([6], I32, "shape"), v, const(-1.0, F32, "default")],
                    [same(v)], opt.SparseToDenseOptions(False)))
    out.append(case("scalar_index", OpType.SPARSE_TO_DENSE,
                    [const(2, I32, "ix"), const([5], I32, "shape"), v, const(0.0, F32, "default")],
                    [same(v)], opt.SparseToDenseOptions(False)))
    return out


def where_cases():
    out = []
    for dtype in (BOOL, F32, I32, I64, I8, U8):
        for shape in [(6,), (3, 4), (2, 2, 3)]:
            x = tensor("x", dtype, shape, quant=None)
            rng = np.random.default_rng(len(shape))
            feed = (rng.integers(0, 3, shape) * (rng.integers(0, 2, shape))).astype(dtype.np)
            out.append(case(f"{dtype.name}_{len(shape)}", OpType.WHERE, [x], [(I64, (-1, len(shape)), None)],
                            opt.WhereOptions(), feeds={0: feed}))
    return out


def unique_cases():
    out = []
    for dtype in (F32, I8, U8, I16, I32, I64):
        for idx in (I32, I64):
            x = tensor("x", dtype, (9,))
            feed = np.array([3, 1, 3, 0, 1, 7, 7, 2, 3]).astype(dtype.np)
            out.append(case(f"{dtype.name}_{idx.name}", OpType.UNIQUE, [x],
                            [(dtype, (-1,), x.quant), (idx, (9,), None)], opt.UniqueOptions(idx.code),
                            feeds={0: feed}))
    return out


def topk_cases():
    out = []
    for dtype in (F32, I8, U8, I16, I32, I64):
        for shape, k in [((7,), 3), ((2, 6), 6), ((2, 2, 5), 1), ((4,), 0)]:
            x = tensor("x", dtype, shape)
            rng = np.random.default_rng(k)
            feed = rng.integers(0, 4, shape).astype(dtype.np)  # many ties
            out.append(case(f"{dtype.name}_{len(shape)}_{k}", OpType.TOPK_V2, [x, const(k, I32, "k")],
                            [same(x), (I32, None, None)], opt.TopKV2Options(), feeds={0: feed}))
    x = tensor("x", F32, (3, 8))
    out.append(case("live_k", OpType.TOPK_V2, [x, tensor("k", I32, ())], [(F32, (3, -1), None), (I32, (3, -1), None)],
                    opt.TopKV2Options(), feeds={1: np.int32(5)}))
    return out


def segment_sum_cases():
    out = []
    for dtype in (F32, I32):
        for shape, ids in [((5, 3), [0, 0, 1, 2, 2]), ((4,), [0, 1, 1, 2]), ((3, 2, 2), [0, 0, 0])]:
            x = tensor("x", dtype, shape)
            out.append(case(f"{dtype.name}_{len(shape)}_{ids[-1]}", OpType.SEGMENT_SUM, [x, const(ids, I32, "ids")],
                            [same(x)], opt.SegmentSumOptions()))
    return out


def unsorted_segment_cases(op_type):
    def make():
        out = []
        for dtype in (F32, I32):
            for shape, ids, n in [((5, 3), [2, 0, -1, 2, 0], 4), ((2, 3), [[1, 0, 1], [0, 3, -1]], 4),
                                  ((4,), [1, 1, 1, 1], 2)]:
                x = tensor("x", dtype, shape)
                out.append(case(f"{dtype.name}_{len(shape)}_{n}", op_type,
                                [x, const(ids, I32, "ids"), const(n, I32, "n")], [same(x)],
                                opt.FOR_OP[op_type.name]()))
        return out
    return make


def dynamic_update_slice_cases():
    out = []
    for dtype in (F32, DType.FLOAT16, I8, U8, I16, I32, I64, BOOL):
        for itype in (I32, I64):
            for start in ([1, 2], [-3, 9], [0, 0]):
                x, u = tensor("x", dtype, (4, 5)), tensor("u", dtype, (2, 3))
                out.append(case(f"{dtype.name}_{itype.name}_{start}", OpType.DYNAMIC_UPDATE_SLICE,
                                [x, u, const(start, itype, "start")], [same(x)]))
    return out


def embedding_lookup_cases():
    out = []
    ids = const([2, 0, 2, 3], I32, "ids")
    for dtype in (F32, I8, U8):
        table = tensor("table", dtype, (4, 3, 2))
        out.append(case(f"{dtype.name}", OpType.EMBEDDING_LOOKUP, [ids, table], [same(table)]))
    rng = np.random.default_rng(3)
    for dtype in (I8, U8):  # dynamic-range tables: rows dequantized with their scale
        for scales in [(0.25,), (0.5, 0.125, 2.0, 0.75)]:
            data = values(rng, (4, 5), dtype)
            table = tensor("table", dtype, data=data, quant=QuantParams(scales, (0,) * len(scales)))
            out.append(case(f"hybrid_{dtype.name}_{len(scales)}", OpType.EMBEDDING_LOOKUP,
                            [tensor("ids", I32, (3,)), table], [(F32, None, None)],
                            feeds={0: np.array([3, 1, 3], np.int32)}))
    return out


def bucketize_cases():
    out = []
    bounds = (-1.0, 0.0, 0.5, 2.0, 2.0, 10.0)
    for dtype in (F32, F64, I32, I64):
        x = tensor("x", dtype, (3, 4))
        feed = np.array([[-3, -1, 0, 0.5], [1, 2, 3, 10], [11, -0.5, 2.0, 9.99]]).astype(dtype.np)
        out.append(case(dtype.name, OpType.BUCKETIZE, [x], [(I32, None, None)], opt.BucketizeOptions(bounds),
                        feeds={0: feed}))
    return out


def _boxes(rng, n):
    centre = rng.uniform(0, 10, (n, 2))
    size = rng.uniform(0.5, 4, (n, 2))
    boxes = np.concatenate([centre - size / 2, centre + size / 2], axis=1)
    flip = rng.integers(0, 2, n).astype(bool)  # corners in either order
    boxes[flip] = boxes[flip][:, [2, 3, 0, 1]]
    return boxes.astype(np.float32)


def nms_cases(soft: bool):
    def make():
        out = []
        op_type = OpType.NON_MAX_SUPPRESSION_V5 if soft else OpType.NON_MAX_SUPPRESSION_V4
        settings = [(10, 0.5, 0.0, 0.5), (4, 0.3, 0.4, 1.0), (20, 0.7, -1.0, 0.0), (0, 0.5, 0.0, 0.3),
                    (6, 1.0, 0.2, 2.0)]
        for m, (max_out, iou, score, sigma) in enumerate(settings):
            for n, ties in ((12, False), (30, True)):
                rng = np.random.default_rng(10 * m + n)
                scores = (rng.integers(0, 5, n) / 5 if ties else rng.uniform(0, 1, n)).astype(np.float32)
                ins = [tensor("boxes", F32, (n, 4)), tensor("scores", F32, (n,)), const(max_out, I32, "max"),
                       const(iou, F32, "iou"), const(score, F32, "score")]
                outs = [(I32, (max_out,), None)]
                if soft:
                    ins.append(const(sigma, F32, "sigma"))
                    outs.append((F32, (max_out,), None))
                outs.append((I32, (), None))
                out.append(case(f"{m}_{n}", op_type, ins, outs, feeds={0: _boxes(rng, n), 1: scores}))
        # max_output_size computed at run time: exactly the selected boxes come out.
        rng = np.random.default_rng(99)
        ins = [tensor("boxes", F32, (15, 4)), tensor("scores", F32, (15,)), tensor("max", I32, ()),
               const(0.4, F32, "iou"), const(0.1, F32, "score")]
        outs = [(I32, (-1,), None)] + ([(F32, (-1,), None)] if soft else []) + [(I32, (), None)]
        if soft:
            ins.append(const(0.5, F32, "sigma"))
        out.append(case("live_max", op_type, ins, outs, feeds={0: _boxes(rng, 15), 1: rng.uniform(0, 1, 15)
                                                               .astype(np.float32), 2: np.int32(8)}))
        return out
    return make


CASES = {
    "batch_to_space_nd": batch_to_space_cases, "space_to_batch_nd": space_to_batch_cases, "tile": tile_cases,
    "broadcast_to": broadcast_to_cases, "broadcast_args": broadcast_args_cases, "fill": fill_cases,
    "range": range_cases, "rank": rank_cases, "one_hot": one_hot_cases, "gather_nd": gather_nd_cases,
    "scatter_nd": scatter_nd_cases, "reverse_v2": reverse_v2_cases, "reverse_sequence": reverse_sequence_cases,
    "matrix_diag": matrix_diag_cases, "matrix_set_diag": matrix_set_diag_cases,
    "sparse_to_dense": sparse_to_dense_cases, "where": where_cases, "unique": unique_cases, "topk_v2": topk_cases,
    "segment_sum": segment_sum_cases,
    **{t.name.lower(): unsorted_segment_cases(t) for t in (OpType.UNSORTED_SEGMENT_SUM, OpType.UNSORTED_SEGMENT_PROD,
                                                         OpType.UNSORTED_SEGMENT_MAX, OpType.UNSORTED_SEGMENT_MIN)},
    "dynamic_update_slice": dynamic_update_slice_cases, "embedding_lookup": embedding_lookup_cases,
    "bucketize": bucketize_cases, "non_max_suppression_v4": nms_cases(False),
    "non_max_suppression_v5": nms_cases(True),
}


# -- running both ---------------------------------------------------------------------------------


def run_testbed(c: Case, path: str) -> list[np.ndarray]:
    it = Interpreter(model_path=path)
    it.allocate_tensors()
    for k, v in c.feeds.items():
        it.set_tensor(k, v)
    it.invoke()
    return [it.get_tensor(t) for t in c.graph.outputs]


@functools.lru_cache(maxsize=1)
def _litert_results():
    """Every case of every op through LiteRT in one child process: (cases, results) per op."""
    tmp = tempfile.mkdtemp(prefix="ops_index_")
    built, jobs = {}, []
    for name, make in CASES.items():
        built[name] = []
        for k, c in enumerate(make()):
            path = os.path.join(tmp, f"{name}__{k}_{c.label}.tflite")
            save(c.graph, path)
            built[name].append((c, path, len(jobs)))
            jobs.append((path, c.feeds))
    results = run_litert(jobs, resolvers=("BUILTIN_REF", "BUILTIN_WITHOUT_DEFAULT_DELEGATES"))
    return {name: [(c, path, results[k]) for c, path, k in rows] for name, rows in built.items()}


def assert_same(got: np.ndarray, want: np.ndarray, where: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (where, got.dtype, got.shape, want.dtype, want.shape)
    if got.dtype.kind == "f":
        scale = max(float(np.abs(want).max()) if want.size else 0.0, 1.0)
        np.testing.assert_allclose(got, want, atol=1e-5 * scale, rtol=0, err_msg=where)
    else:
        np.testing.assert_array_equal(got, want, err_msg=where)


pytestmark = pytest.mark.skipif(not available(), reason="LiteRT (ai-edge-litert) is not installed")


@pytest.mark.parametrize("name", sorted(CASES))
def test_equal_to_litert_reference(name):
    for c, path, want in _litert_results()[name]:
        assert not isinstance(want, str), f"{c.label}: LiteRT refused: {want}"
        resolver = "BUILTIN_WITHOUT_DEFAULT_DELEGATES" if name in NOT_IN_REFERENCE else "BUILTIN_REF"
        assert str(want["resolver"]) == resolver, (c.label, want["resolver"])
        got = run_testbed(c, path)
        for t, value in zip(c.graph.outputs, got):
            assert_same(value, want[f"0:{t}"], f"{name} {c.label} output {t}")


def test_where_feeding_gather_nd_equals_litert(tmp_path):
    """x[x > 0] as converters write it: WHERE's dynamic [n, 2] output indexes GATHER_ND, so the
    second op's shape is known only once the first has run."""
    x, cond = tensor("x", F32, (3, 4)), tensor("cond", BOOL, (3, 4))
    idx = tensor("idx", I64, (1, 2), sig=(-1, 2))
    y = tensor("y", F32, (1,), sig=(-1,))
    ops = (Op(OpType.WHERE, (1,), (2,), opt.WhereOptions(), 2), Op(OpType.GATHER_ND, (0, 2), (3,), None, 6))
    graph = Graph((x, cond, idx, y), ops, (0, 1), (3,), name="where_gather")
    rng = np.random.default_rng(5)
    feeds = {0: values(rng, (3, 4), F32), 1: values(rng, (3, 4), BOOL)}
    path = str(tmp_path / "where_gather.tflite")
    save(graph, path)
    want = run_litert([(path, feeds)], resolvers=("BUILTIN_REF",))[0]
    got = run_testbed(Case("where_gather", graph, feeds), path)[0]
    assert_same(got, want["0:3"], "where -> gather_nd")
    np.testing.assert_array_equal(got, feeds[0][feeds[1]])


# -- values only the run can judge: refused like LiteRT refuses them --------------------------------


def _refused_cases():
    xs = tensor("x", F32, (3, 4))
    u, v = tensor("u", F32, (2,)), tensor("v", F32, (2,))
    boxes, scores = tensor("boxes", F32, (4, 4)), tensor("scores", F32, (4,))
    four = {0: np.array([[0, 0, 1, 1]] * 4, np.float32), 1: np.array([0.9, 0.8, 0.7, 0.6], np.float32)}
    rows = [
        ("out of range", OpType.GATHER_ND, [xs, tensor("ix", I32, (2, 2))], [(F32, (2,), None)], None,
         {1: np.array([[3, 0], [0, 1]], np.int32)}),
        # [0, 5] lies inside the flattened params, but not inside dimension 1: LiteRT refuses it too.
        ("past a dimension", OpType.GATHER_ND, [xs, tensor("ix", I32, (2, 2))], [(F32, (2,), None)], None,
         {1: np.array([[0, 5], [0, 1]], np.int32)}),
        ("negative", OpType.GATHER_ND, [xs, tensor("ix", I32, (2, 2))], [(F32, (2,), None)], None,
         {1: np.array([[1, -1], [0, 1]], np.int32)}),
        ("out of range", OpType.SCATTER_ND, [tensor("ix", I32, (2, 2)), u, const([3, 3], I32, "s")],
         [(F32, (3, 3), None)], opt.ScatterNdOptions(), {0: np.array([[0, 3], [1, 1]], np.int32)}),
        ("out of range", OpType.SPARSE_TO_DENSE, [tensor("ix", I32, (2, 2)), const([3, 3], I32, "shape"), v,
                                                  const(0.0, F32, "d")], [(F32, (3, 3), None)],
         opt.SparseToDenseOptions(False), {0: np.array([[0, 3], [1, 1]], np.int32)}),
        ("out of range", OpType.EMBEDDING_LOOKUP, [tensor("ids", I32, (2,)), tensor("table", F32, (4, 2))],
         [(F32, (2, 2), None)], None, {0: np.array([1, 4], np.int32)}),
        ("id past num_segments", OpType.UNSORTED_SEGMENT_SUM,
         [tensor("x", F32, (5,)), tensor("ids", I32, (5,)), const(3, I32, "n")], [(F32, (-1,), None)],
         opt.UnsortedSegmentSumOptions(), {1: np.array([0, 1, 3, 0, 0], np.int32)}),
        ("ids with a gap", OpType.SEGMENT_SUM, [tensor("x", F32, (4,)), tensor("ids", I32, (4,))],
         [(F32, (-1,), None)], opt.SegmentSumOptions(), {1: np.array([0, 0, 2, 2], np.int32)}),
        ("axis out of range", OpType.REVERSE_V2, [tensor("x", F32, (2, 3)), tensor("axis", I32, (1,))],
         [(F32, (2, 3), None)], None, {1: np.array([2], np.int32)}),
        ("k above the row", OpType.TOPK_V2, [tensor("x", F32, (4,)), tensor("k", I32, ())],
         [(F32, (-1,), None), (I32, (-1,), None)], opt.TopKV2Options(), {1: np.int32(5)}),
        ("negative dims", OpType.FILL, [tensor("dims", I32, (2,)), const(1.0, F32, "v")], [(F32, (-1, -1), None)],
         opt.FillOptions(), {0: np.array([2, -1], np.int32)}),
        ("negative depth", OpType.ONE_HOT, [tensor("i", I32, (3,)), tensor("d", I32, ()), const(1.0, F32, "on"),
                                            const(0.0, F32, "off")], [(F32, (3, -1), None)], opt.OneHotOptions(-1),
         {0: np.array([0, 1, 2], np.int32), 1: np.int32(-2)}),
        ("delta 0", OpType.RANGE, [tensor("s", I32), tensor("l", I32), tensor("d", I32)], [(I32, (-1,), None)],
         opt.RangeOptions(), {0: np.int32(0), 1: np.int32(5), 2: np.int32(0)}),
        ("delta the wrong way", OpType.RANGE, [tensor("s", I32), tensor("l", I32), tensor("d", I32)],
         [(I32, (-1,), None)], opt.RangeOptions(), {0: np.int32(0), 1: np.int32(5), 2: np.int32(-1)}),
        ("negative sigma", OpType.NON_MAX_SUPPRESSION_V5,
         [boxes, scores, const(3, I32, "max"), const(0.5, F32, "iou"), const(0.0, F32, "st"), tensor("sigma", F32)],
         [(I32, (3,), None), (F32, (3,), None), (I32, (), None)], None, {**four, 5: np.float32(-1)}),
        ("negative max_output_size", OpType.NON_MAX_SUPPRESSION_V4,
         [boxes, scores, tensor("max", I32), const(0.5, F32, "iou"), const(0.0, F32, "st")],
         [(I32, (-1,), None), (I32, (), None)], None, {**four, 2: np.int32(-1)}),
        ("crops past the block", OpType.BATCH_TO_SPACE_ND,
         [tensor("x", F32, (4, 1, 1, 1)), const([2, 2], I32, "b"), tensor("crops", I32, (2, 2))],
         [(F32, (1, -1, -1, 1), None)], None, {2: np.array([[1, 2], [0, 0]], np.int32)}),
    ]
    return [case(f"{op_type.name} {label}", op_type, ins, outs, options, feeds)
            for label, op_type, ins, outs, options, feeds in rows]


def test_run_time_values_refused_as_litert_refuses_them(tmp_path):
    cases = _refused_cases()
    jobs = []
    for k, c in enumerate(cases):
        path = str(tmp_path / f"bad{k}.tflite")
        save(c.graph, path)
        jobs.append((path, c.feeds))
    results = run_litert(jobs, resolvers=("BUILTIN_REF", "BUILTIN_WITHOUT_DEFAULT_DELEGATES"))
    for c, (path, _), want in zip(cases, jobs, results):
        assert isinstance(want, str), f"{c.label}: LiteRT ran it"
        with pytest.raises(ModelError) as info:
            run_testbed(c, path)
        text = str(info.value)
        assert text.startswith(f"{path}: op #0 {c.graph.ops[0].type.name}") and "\n" not in text, (c.label, text)


# -- what LiteRT does that one might not expect -----------------------------------------------------


def test_nms_selects_a_box_again_when_it_does_not_overlap_itself(tmp_path):
    """LiteRT's reference NMS puts a selected candidate back in its queue (TensorFlow's does not).
    Popped again, it is compared with itself: an IoU of 1 drops it, unless the box has no area
    (IoU 0) or the IoU threshold is above 1. Then the same box is selected again and again, up to
    the number of candidates. The testbed does the same."""
    jobs, cases = [], []
    for label, iou, first in [("no area", 0.5, [0, 0, 0, 0]), ("threshold above 1", 1.5, [0, 0, 1, 1])]:
        boxes = np.array([first, [0, 0, 1, 1], [0, 0, 1, 1.1], [5, 5, 6, 6]], np.float32)
        c = case(label, OpType.NON_MAX_SUPPRESSION_V4,
                 [tensor("boxes", F32, (4, 4)), tensor("scores", F32, (4,)), const(6, I32, "max"),
                  const(iou, F32, "iou"), const(0.0, F32, "st")], [(I32, (6,), None), (I32, (), None)],
                 feeds={0: boxes, 1: np.array([0.9, 0.8, 0.7, 0.6], np.float32)})
        path = str(tmp_path / f"nms{len(jobs)}.tflite")
        save(c.graph, path)
        jobs.append((path, c.feeds))
        cases.append(c)
    for c, (path, _), want in zip(cases, jobs, run_litert(jobs, resolvers=("BUILTIN_REF",))):
        got = run_testbed(c, path)
        np.testing.assert_array_equal(want["0:5"], [0, 0, 0, 0, 0, 0])
        assert int(want["0:6"]) == 4
        for t, value in zip(c.graph.outputs, got):
            assert_same(value, want[f"0:{t}"], c.label)


def test_matrix_diag_of_bool_is_refused_because_litert_writes_no_diagonal(tmp_path):
    """LiteRT's reference MATRIX_DIAG accepts BOOL but does not write a diagonal matrix (for the
    diagonal [T, F, T] its output's first row is [T, F, T]); the testbed refuses BOOL rather than
    answer differently."""
    x = tensor("x", BOOL, (3,))
    c = case("bool", OpType.MATRIX_DIAG, [x], [(BOOL, (3, 3), None)], feeds={0: np.array([True, False, True])})
    path = str(tmp_path / "diag.tflite")
    save(c.graph, path)
    want = run_litert([(path, c.feeds)], resolvers=("BUILTIN_REF",))[0]["0:1"]
    assert not np.array_equal(want, np.diag([True, False, True]))
    with pytest.raises(ModelError, match=r"op #0 MATRIX_DIAG: input tensor #0 'x' \(diagonal\) is BOOL"):
        Interpreter(model_path=path)


def test_hybrid_embedding_lookup_reads_uint8_tables_as_int8():
    """A uint8 table looked up into float32 is read as int8 by LiteRT (embedding_lookup.cc casts
    the table's bytes to int8_t): 200 with scale 0.5 comes out as -28.0, not 100.0. The equality
    test above covers it on random tables; this pins one value."""
    table = tensor("table", U8, data=np.array([[200, 3]], np.uint8), quant=QuantParams((0.5,), (0,)))
    c = case("u8", OpType.EMBEDDING_LOOKUP, [tensor("ids", I32, (1,)), table], [(F32, None, None)],
             feeds={0: np.array([0], np.int32)})
    it = Interpreter(graph=c.graph)
    it.allocate_tensors()
    it.set_tensor(0, c.feeds[0])
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(2), [[-28.0, 1.5]])


def test_empty_outputs():
    """Outputs with no elements (LiteRT's Python binding cannot read them, so they are checked here)."""
    got = {}
    for label, op_type, ins, outs, options in [
        ("range", OpType.RANGE, [const(3, I32, "s"), const(3, I32, "l"), const(1, I32, "d")], [(I32, None, None)],
         opt.RangeOptions()),
        ("topk", OpType.TOPK_V2, [const([[1.0, 2.0]], F32, "x"), const(0, I32, "k")],
         [(F32, None, None), (I32, None, None)], opt.TopKV2Options()),
        ("where", OpType.WHERE, [tensor("c", BOOL, (2, 3))], [(I64, (-1, 2), None)], opt.WhereOptions()),
    ]:
        c = case(label, op_type, ins, outs, options, feeds={0: np.zeros((2, 3), bool)} if label == "where" else None)
        it = Interpreter(graph=c.graph)
        it.allocate_tensors()
        for k, value in c.feeds.items():
            it.set_tensor(k, value)
        it.invoke()
        got[label] = [it.get_tensor(t).shape for t in c.graph.outputs]
    assert got == {"range": [(0,)], "topk": [(1, 0), (1, 0)], "where": [(0, 2)]}


def test_segment_sum_is_missing_from_litert_reference_resolver(tmp_path):
    """SEGMENT_SUM is held to LiteRT's builtin kernel: its reference resolver has none."""
    c = segment_sum_cases()[0]
    path = str(tmp_path / "segment_sum.tflite")
    save(c.graph, path)
    want = run_litert([(path, c.feeds)], resolvers=("BUILTIN_REF",))[0]
    assert isinstance(want, str) and "SEGMENT_SUM" in want


# -- damaged models: one ModelError line, nothing allocated ---------------------------------------


def _refuse(graph: Graph, pattern: str, limit: int | None = None, feeds=None):
    with pytest.raises(ModelError, match=pattern) as info:
        it = Interpreter(graph=graph, memory_limit=limit)
        it.allocate_tensors()
        for k, value in (feeds or {}).items():
            it.set_tensor(k, value)
        it.invoke()
    assert "\n" not in str(info.value)


def _graph(op_type, inputs, outputs, options=None) -> Graph:
    n = len(inputs)
    op = Op(op_type, tuple(range(n)), tuple(range(n, n + len(outputs))), options, VERSIONS.get(op_type, 1))
    live = tuple(k for k, t in enumerate(inputs) if not t.is_constant)
    return Graph((*inputs, *outputs), (op,), live, op.outputs, name="damaged")


@pytest.mark.parametrize("op_type,inputs,out,options,pattern", [
    (OpType.BATCH_TO_SPACE_ND, [tensor("x", F32, (5, 2, 2, 1)), const([2, 2], I32, "b"), const([[0, 0], [0, 0]])],
     (1, 4, 4, 1), None, r"batch 5, not a multiple of the block size product 4"),
    (OpType.BATCH_TO_SPACE_ND, [tensor("x", F32, (4, 2, 2, 1)), const([2, 0], I32, "b"), const([[0, 0], [0, 0]])],
     (1, 4, 4, 1), None, r"block_shape\) is \[2, 0\]; every block size must be >= 1"),
    (OpType.BATCH_TO_SPACE_ND, [tensor("x", F32, (4, 2, 2, 1)), const([2, 2], I32, "b"), const([[0, -1], [0, 0]])],
     (1, 4, 4, 1), None, r"crops\) is \[0, -1, 0, 0\]; they must be >= 0"),
    (OpType.BATCH_TO_SPACE_ND, [tensor("x", F32, (4, 2, 2, 1, 1)), const([2, 2], I32, "b"), const([[0, 0]] * 2)],
     (1, 4, 4, 1, 1), None, r"rank 3 to 4 expected"),
    (OpType.SPACE_TO_BATCH_ND, [tensor("x", F32, (1, 3, 4, 1)), const([2, 2], I32, "b"), const([[0, 0], [0, 0]])],
     (4, 2, 2, 1), None, r"padded to 3, is not a multiple of block size 2"),
    (OpType.SPACE_TO_BATCH_ND, [tensor("x", F32, (1, 4, 4, 1)), const([2], I32, "b"), const([[0, 0], [0, 0]])],
     (4, 2, 2, 1), None, r"block_shape\) has 1 values, 2 expected"),
    (OpType.TILE, [tensor("x", F32, (2, 3)), const([2, -1], I32, "m")], (4, 3), None, r"must be >= 0"),
    (OpType.TILE, [tensor("x", F32, (2, 3)), const([2.0, 1.0], F32, "m")], (4, 3), None, r"FLOAT32; TILE takes"),
    (OpType.BROADCAST_TO, [tensor("x", F32, (2, 3)), const([4, 3], I32, "s")], (4, 3), None,
     r"shape \[2, 3\] does not broadcast to \[4, 3\]"),
    (OpType.GATHER_ND, [tensor("x", F32, (2, 3)), const([[0, 1, 2]], I32, "ix")], (1,), None,
     r"index 3 dimensions of params \[2, 3\]"),
    (OpType.GATHER_ND, [tensor("x", F32, (2, 3)), const([[0, 3]], I32, "ix")], (1,), None,
     r"holds \[0, 3\], out of range for dimensions \[2, 3\]"),
    (OpType.SCATTER_ND, [const([[0], [1]], I32, "ix"), tensor("u", F32, (2, 3)), const([4, 2], I32, "s")], (4, 2),
     opt.ScatterNdOptions(), r"updates \[2, 3\] do not match indices \[2, 1\] into shape \[4, 2\]"),
    (OpType.ONE_HOT, [tensor("i", I32, (3,)), const(4, I32, "d"), const(1.0, F32, "on"), const(0, I32, "off")],
     (3, 4), opt.OneHotOptions(-1), r"input types differ"),
    (OpType.ONE_HOT, [tensor("i", I32, (3,)), const(4, I32, "d"), const(1.0, F32, "on"), const(0.0, F32, "off")],
     (3, 4), opt.OneHotOptions(2), r"options.axis is 2; -1 to 1 expected"),
    (OpType.REVERSE_V2, [tensor("x", F32, (2, 3)), const([1, -1], I32, "a")], (2, 3), None, r"repeats an axis"),
    (OpType.REVERSE_SEQUENCE, [tensor("x", F32, (2, 3)), const([4, 1], I32, "n")], (2, 3),
     opt.ReverseSequenceOptions(1, 0), r"\[4, 1\] are not all in \[0, 3\]"),
    (OpType.REVERSE_SEQUENCE, [tensor("x", F32, (2, 3)), const([1, 1], I32, "n")], (2, 3),
     opt.ReverseSequenceOptions(0, 0), r"seq_dim and options.batch_dim are both dimension 0"),
    (OpType.MATRIX_SET_DIAG, [tensor("x", F32, (3, 4)), tensor("d", F32, (4,))], (3, 4), None,
     r"diagonal \[4\] does not fit input \[3, 4\]"),
    (OpType.SPARSE_TO_DENSE, [const([[0, 1]], I32, "ix"), const([3], I32, "s"), tensor("v", F32, (1,)),
                              const(0.0, F32, "d")], (3,), opt.SparseToDenseOptions(), r"do not index an output"),
    (OpType.UNIQUE, [tensor("x", F32, (2, 2))], None, opt.UniqueOptions(), r"rank 1 expected"),
    (OpType.SEGMENT_SUM, [tensor("x", F32, (4, 2)), const([0, 0, 1], I32, "ids")], (2, 2), opt.SegmentSumOptions(),
     r"is not a prefix of data \[4, 2\]"),
    (OpType.UNSORTED_SEGMENT_MAX, [tensor("x", I8, (3,)), const([0, 0, 1], I32, "ids"), const(2, I32, "n")], (2,),
     opt.UnsortedSegmentMaxOptions(), r"\(data\) is INT8; UNSORTED_SEGMENT_MAX takes FLOAT32, INT32"),
    (OpType.DYNAMIC_UPDATE_SLICE, [tensor("x", F32, (2, 2)), tensor("u", F32, (3, 1)), const([0, 0], I32, "s")],
     (2, 2), None, r"update \[3, 1\] does not fit in operand \[2, 2\]"),
    (OpType.EMBEDDING_LOOKUP, [tensor("ids", I32, (2,)), tensor("t", F32, (4,))], (2,), None, r"rank 2 or more"),
    (OpType.BUCKETIZE, [tensor("x", F32, (3,))], (3,), opt.BucketizeOptions((1.0, 0.0)), r"are not sorted"),
    (OpType.NON_MAX_SUPPRESSION_V4, [tensor("b", F32, (3, 5)), tensor("s", F32, (3,)), const(2, I32, "m"),
                                     const(0.5, F32, "i"), const(0.0, F32, "t")], (2,), None,
     r"must be \[n, 4\] and \[n\]"),
    (OpType.RANK, [tensor("x", F32, (2, 3))], (), None, r"output tensor #1 'y0' is FLOAT32, INT32 expected"),
])
def test_damaged_models_are_refused_naming_op_and_tensor(op_type, inputs, out, options, pattern):
    if out is None:
        outs = [Tensor("y0", (4,), inputs[0].dtype), Tensor("y1", (4,), I32)]
    else:
        own = {OpType.RANK: F32, OpType.BUCKETIZE: I32}  # RANK's is the damage under test
        dtype = own.get(op_type) or inputs[DATA_INPUT.get(op_type, 0)].dtype
        outs = [Tensor("y0", out, dtype, quant=q8(dtype))]
        if op_type is OpType.NON_MAX_SUPPRESSION_V4:
            outs = [Tensor("y0", out, I32), Tensor("y1", (), I32)]
    _refuse(_graph(op_type, inputs, outs, options), rf"op #0 {op_type.name}: .*{pattern}")


def test_options_table_of_another_type_is_refused():
    graph = _graph(OpType.TILE, [tensor("x", F32, (2,)), const([2], I32, "m")], [Tensor("y", (4,), F32)],
                   opt.OneHotOptions())
    _refuse(graph, r"op #0 TILE: builtin options are OneHotOptions, TileOptions expected")


def test_8bit_batch_to_space_keeps_its_quantization():
    x = tensor("x", I8, (4, 1, 1, 2))
    y = Tensor("y", (1, 2, 2, 2), I8, quant=QuantParams((0.1,), (0,)))
    graph = _graph(OpType.BATCH_TO_SPACE_ND, [x, const([2, 2], I32, "b"), const([[0, 0], [0, 0]], I32, "c")], [y])
    _refuse(graph, r"another scale or zero point than input tensor #0 'x'")


@pytest.mark.parametrize("op_type,inputs,out,options,feeds", [
    (OpType.FILL, [const([1 << 16, 1 << 16], I32, "dims"), const(1.0, F32, "v")], (1 << 16, 1 << 16),
     opt.FillOptions(), None),
    (OpType.FILL, [tensor("dims", I32, (2,)), const(1.0, F32, "v")], (-1, -1), opt.FillOptions(),
     {0: np.array([1 << 16, 1 << 16], np.int32)}),
    (OpType.TILE, [tensor("x", F32, (2, 2)), tensor("m", I32, (2,))], (-1, -1), None,
     {1: np.array([1 << 15, 1 << 15], np.int32)}),
    (OpType.RANGE, [tensor("s", F32), tensor("l", F32), tensor("d", F32)], (-1,), opt.RangeOptions(),
     {0: np.float32(0), 1: np.float32(2e9), 2: np.float32(1)}),
    (OpType.ONE_HOT, [tensor("i", I32, (1000,)), tensor("d", I32, ()), const(1.0, F32, "on"), const(0.0, F32, "off")],
     (1000, -1), opt.OneHotOptions(-1), {1: np.int32(1 << 24)}),
    (OpType.BROADCAST_TO, [tensor("x", F32, (1,)), tensor("s", I32, (3,))], (-1, -1, -1), None,
     {1: np.array([1 << 12, 1 << 12, 1 << 12], np.int32)}),
])
def test_absurd_sizes_are_refused_before_allocating(op_type, inputs, out, options, feeds):
    import tracemalloc

    sig = out if -1 in out else None
    dtype = inputs[1].dtype if op_type is OpType.FILL else inputs[2].dtype if op_type is OpType.ONE_HOT \
        else inputs[0].dtype
    y = Tensor("y", tuple(1 if d == -1 else d for d in out), dtype, shape_signature=sig)
    graph = _graph(op_type, inputs, [y], options)
    tracemalloc.start()
    try:
        _refuse(graph, rf"(op #0 {op_type.name}|the model needs).*(memory limit|above 2\*\*31)", limit=64 << 20,
                feeds=feeds)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20


def test_delegates_refuse_the_new_ops_with_a_reason():
    from delegates.registry import CLASSES as DELEGATES
    from sim.profile import load_profile
    from delegates.registry import make_delegate

    phone = load_profile("pixel4")
    graph = batch_to_space_cases()[0].graph
    asked = 0
    for name in DELEGATES:
        try:
            delegate = make_delegate(name, phone)
        except Exception:  # a delegate this phone does not have
            continue
        verdict = delegate.is_node_supported(graph.ops[0], graph)
        assert not verdict.ok and verdict.reason, name
        asked += 1
    assert asked >= 3


def test_mutated_index_op_models_run_or_fail_with_one_line(tmp_path):
    """The model fuzzer's mutations (tests/fuzz_models.py) on these ops' single-op models: each case
    runs, or ends in one ModelError line naming the file, found by the checks before a kernel
    raises anything. Cases whose op was turned into an op outside this file are left out."""
    from tests import fuzz_models as fm

    ours = {t.name for t in VERSIONS}
    sources = []
    for name, make in CASES.items():
        for k, c in enumerate(make()[:2]):
            path = tmp_path / f"{name}_{k}.tflite"
            save(c.graph, path)
            sources.append(path)
    fm.check_mutations(sources, ours, tmp_path, seed=2024, cases=150)


def test_lookups_cost_the_rows_they_read_not_the_table():
    from sim.cost import OpClass, Precision
    from sim.work import describe

    ids, table = tensor("ids", I32, (5,)), const(np.zeros((1000, 16), np.float32), F32, "table")
    rows = tensor("rows", F32, (5, 16))
    graph = _graph(OpType.EMBEDDING_LOOKUP, [ids, table], [rows])
    work = describe(graph.ops[0], graph, [t.shape for t in graph.tensors], Precision.FLOAT32)
    assert work.op_class is OpClass.DATA and work.bytes_read == 5 * 4 + 5 * 16 * 4
    graph = _graph(OpType.GATHER_ND, [table, tensor("ix", I32, (5, 1))], [rows])
    work = describe(graph.ops[0], graph, [t.shape for t in graph.tensors], Precision.FLOAT32)
    assert work.bytes_read == 5 * 16 * 4 + 5 * 4
