"""Recurrent ops, SVDF, the 3-D convolutions, EMBEDDING_LOOKUP_SPARSE and the StableHLO-era ops against
LiteRT's reference kernels (BUILTIN_REF), on generated single-op models run twice, so that state kept in
variable tensors is carried into the second invoke on both sides.

Float models are held to 1e-5 of each output's range (BLAS sums round in another order than
LiteRT's loops; measured when written, ai-edge-litert 2.3.0 on x86-64: at most 2.4e-7). Hybrid
(int8-weight), 8-bit and raw-value models are held to LiteRT bit for bit.

LiteRT behaviours the kernels reproduce, each pinned by a test below:
- BIDIRECTIONAL_SEQUENCE_RNN, hybrid, time-major: an extra loop over time around the per-step
  loops runs the whole forward-then-backward pass max_time times, each pass starting from the
  state the previous one left; the output is the last pass's.
- BIDIRECTIONAL_SEQUENCE_RNN, batch-major: an auxiliary input without auxiliary weights is ignored
  (the time-major path feeds it to the backward cell, as the op defines).
- EMBEDDING_LOOKUP_SPARSE combines runs of consecutive lookups into the same output row: unsorted
  indices that return to a row combine it again on top of its earlier result.
- SVDF on 8-bit data requires the RELU activation and then applies none.
LiteRT behaviours that are not reproduced (they read or write memory they do not own):
- BIDIRECTIONAL_SEQUENCE_LSTM, batch-major with merge_outputs: lstm_eval offsets each batch row's
  output state by the merged width, past the state tensor for batch > 1; compared with batch 1
  only, and the testbed keeps what the op defines (batch-major equals time-major).
- BIDIRECTIONAL_SEQUENCE_RNN, hybrid with auxiliary weights: Prepare never sets the auxiliary
  input's quantization temporary, and LiteRT often crashes; compared only where it survives.
"""

from __future__ import annotations

import dataclasses
import os
import weakref

import numpy as np
import pytest

from runtime.ir.errors import ModelError
from runtime.ir.graph import DType, Graph, Op, QuantParams, Tensor
from runtime.interpreter.api import Interpreter
from runtime.ir.optypes import OpType
from runtime.ir.options import (Activation, BidirectionalSequenceLSTMOptions, BidirectionalSequenceRNNOptions,
                             CombinerType, Conv3DOptions, EmbeddingLookupSparseOptions, LSTMKernelType,
                             LSTMOptions, Padding, ReduceWindowFunction, ReduceWindowOptions, RNNOptions,
                             SequenceRNNOptions, StablehloPadOptions, SVDFOptions)
from runtime.model.tflite_read import load, loads
from runtime.model.tflite_write import dumps, save
from tests.litert_oracle import available, run_litert

F32 = np.float32
FLOAT_REL_TOL = 1e-5
INVOKES = 2
SEEDS = (0, 1)

needs_litert = pytest.mark.skipif(not available(), reason="LiteRT (ai-edge-litert) is not installed")


# -- building single-op models ---------------------------------------------------------------------

# The inputs each built graph is fed (values chosen by its builder).
FEEDS: "weakref.WeakKeyDictionary[Graph, dict]" = weakref.WeakKeyDictionary()


class Model:
    """Tensors added one by one; the op and the graph at the end."""

    def __init__(self, rng):
        self.rng, self.tensors, self.feeds = rng, [], {}

    def add(self, t: Tensor) -> int:
        self.tensors.append(t)
        return len(self.tensors) - 1

    def live(self, name, shape, dtype=DType.FLOAT32, value=None, quant=None) -> int:
        k = self.add(Tensor(name, tuple(shape), dtype, quant=quant))
        self.feeds[k] = value if value is not None else (self.rng.standard_normal(shape) * 2).astype(F32)
        return k

    def const(self, name, data, dtype=DType.FLOAT32, quant=None) -> int:
        data = np.asarray(data, dtype.np)
        return self.add(Tensor(name, data.shape, dtype, quant=quant, data=data))

    def weights(self, name, shape, hybrid=False, scale=0.3) -> int:
        if hybrid:
            q = QuantParams((float(self.rng.uniform(2e-3, 2e-2)),), (0,))
            return self.const(name, self.rng.integers(-127, 128, shape), DType.INT8, q)
        return self.const(name, self.rng.standard_normal(shape) * scale)

    def state(self, name, shape, dtype=DType.FLOAT32, quant=None) -> int:
        return self.add(Tensor(name, tuple(shape), dtype, quant=quant, is_variable=True))

    def out(self, name, shape, dtype=DType.FLOAT32, quant=None) -> int:
        return self.add(Tensor(name, tuple(shape), dtype, quant=quant))

    def graph(self, op_type, ins, outs, options=None, version=1) -> Graph:
        outs = tuple(outs) if isinstance(outs, (list, tuple)) else (outs,)
        op = Op(op_type, tuple(ins), outs, options, version)
        g = Graph(tuple(self.tensors), (op,), tuple(self.feeds), outs)
        FEEDS[g] = dict(self.feeds)
        return g


def _dims(rng, lo, hi, n=1):
    v = [int(x) for x in rng.integers(lo, hi, n)]
    return v if n > 1 else v[0]


def rnn(rng, hybrid=False, act=Activation.TANH, asym=False):
    m = Model(rng)
    batch, n_in, units = _dims(rng, 1, 4), _dims(rng, 2, 9), _dims(rng, 2, 9)
    x = m.live("x", (batch, n_in))
    ins = (x, m.weights("w", (units, n_in), hybrid), m.weights("r", (units, units), hybrid),
           m.const("b", rng.standard_normal(units)), m.state("h", (batch, units)))
    return m.graph(OpType.RNN, ins, m.out("y", (batch, units)), RNNOptions(act, asym), 3 if hybrid else 1)


def seq_rnn(rng, hybrid=False, time_major=False, act=Activation.TANH, asym=False):
    m = Model(rng)
    batch, steps, n_in, units = _dims(rng, 1, 4), _dims(rng, 1, 6), _dims(rng, 2, 9), _dims(rng, 2, 9)
    shape = (steps, batch, n_in) if time_major else (batch, steps, n_in)
    ins = (m.live("x", shape), m.weights("w", (units, n_in), hybrid), m.weights("r", (units, units), hybrid),
           m.const("b", rng.standard_normal(units)), m.state("h", (batch, units)))
    return m.graph(OpType.UNIDIRECTIONAL_SEQUENCE_RNN, ins, m.out("y", shape[:2] + (units,)),
                   SequenceRNNOptions(time_major, act, asym), 3 if hybrid else 1)


def bi_rnn(rng, hybrid=False, time_major=False, merge=False, aux=None, asym=False, act=Activation.TANH):
    """aux: None, "weights" (stacking with cross links) or "input" (the backward cell's input)."""
    m = Model(rng)
    batch, steps, n_in = _dims(rng, 1, 4), _dims(rng, 1, 6), _dims(rng, 2, 9)
    units = _dims(rng, 2, 9, 2)
    shape = (steps, batch, n_in) if time_major else (batch, steps, n_in)
    ins = [m.live("x", shape)]
    for d, u in zip(("fw", "bw"), units):
        ins += [m.weights(f"{d}_w", (u, n_in), hybrid), m.weights(f"{d}_r", (u, u), hybrid),
                m.const(f"{d}_b", rng.standard_normal(u)), m.state(f"{d}_h", (batch, u))]
    if aux:
        ins.append(m.live("aux", shape))
        ins += [m.weights("fw_aux_w", (units[0], n_in), hybrid), m.weights("bw_aux_w", (units[1], n_in), hybrid)] \
            if aux == "weights" else [-1, -1]
    else:
        ins += [-1, -1, -1]
    outs = [m.out("y", shape[:2] + (sum(units),))] if merge else \
        [m.out("y_fw", shape[:2] + (units[0],)), m.out("y_bw", shape[:2] + (units[1],))]
    return m.graph(OpType.BIDIRECTIONAL_SEQUENCE_RNN, ins, outs,
                   BidirectionalSequenceRNNOptions(time_major, act, merge, asym), 3 if hybrid else 1)


def _lstm_cell(m, rng, pre, n_in, cell, out, batch, hybrid, cifg=False, peephole=False, projection=False,
               norm=False):
    """The 17 cell tensors in slot order, the two states, and the layer-norm coefficients."""
    slots = [-1] * 17
    for g in range(4):
        if g == 0 and cifg:
            continue
        slots[g] = m.weights(f"{pre}wx{g}", (cell, n_in), hybrid)
        slots[4 + g] = m.weights(f"{pre}wh{g}", (cell, out), hybrid)
        slots[11 + g] = m.const(f"{pre}b{g}", rng.standard_normal(cell) * 0.5)
    if peephole:
        for g in range(1 if cifg else 0, 3):
            slots[8 + g] = m.weights(f"{pre}p{g}", (cell,), hybrid)
    if projection:
        slots[15] = m.weights(f"{pre}pw", (out, cell), hybrid)
        slots[16] = m.const(f"{pre}pb", rng.standard_normal(out) * 0.1)
    states = [m.state(f"{pre}h", (batch, out)), m.state(f"{pre}c", (batch, cell))]
    coeffs = [-1 if (g == 0 and cifg) else m.const(f"{pre}ln{g}", rng.uniform(0.5, 1.5, cell))
              for g in range(4)] if norm else []
    return slots, states, coeffs


def lstm(rng, hybrid=False, asym=False, cell_clip=0.0, proj_clip=0.0, **kw):
    m = Model(rng)
    batch, n_in, cell = _dims(rng, 1, 4), _dims(rng, 2, 9), _dims(rng, 2, 9)
    out = _dims(rng, 2, 9) if kw.get("projection") else cell
    x = m.live("x", (batch, n_in))
    slots, states, coeffs = _lstm_cell(m, rng, "", n_in, cell, out, batch, hybrid, **kw)
    return m.graph(OpType.LSTM, [x, *slots, *states, *coeffs], m.out("y", (batch, out)),
                   LSTMOptions(Activation.TANH, cell_clip, proj_clip, asymmetric_quantize_inputs=asym),
                   4 if hybrid else 1)


def bi_lstm(rng, hybrid=False, asym=False, time_major=True, merge=False, aux=None, batch=None, cell_clip=0.0,
            **kw):
    m = Model(rng)
    batch = batch or _dims(rng, 1, 4)
    steps, n_in, cell = _dims(rng, 1, 6), _dims(rng, 2, 9), _dims(rng, 2, 9)
    out = _dims(rng, 2, 9) if kw.get("projection") else cell
    aux_width = _dims(rng, 2, 9) if aux == "weights" else n_in
    shape = (steps, batch, n_in) if time_major else (batch, steps, n_in)
    ins = [m.live("x", shape)]
    fw, fw_states, _ = _lstm_cell(m, rng, "fw_", n_in, cell, out, batch, hybrid, **kw)
    bw, bw_states, _ = _lstm_cell(m, rng, "bw_", n_in, cell, out, batch, hybrid, **kw)
    ins += [*fw, *bw, *fw_states, *bw_states]
    if aux:
        ins.append(m.live("aux", shape[:2] + (aux_width,)))
        if aux == "weights":
            for pre in ("fw_", "bw_"):
                ins += [-1 if (g == 0 and kw.get("cifg")) else m.weights(f"{pre}aux{g}", (cell, aux_width), hybrid)
                        for g in range(4)]
        else:
            ins += [-1] * 8
    else:
        ins += [-1] * 9
    outs = [m.out("y", shape[:2] + (2 * out,))] if merge else \
        [m.out("y_fw", shape[:2] + (out,)), m.out("y_bw", shape[:2] + (out,))]
    return m.graph(OpType.BIDIRECTIONAL_SEQUENCE_LSTM, ins, outs,
                   BidirectionalSequenceLSTMOptions(Activation.TANH, cell_clip, 0.0, merge, time_major, asym),
                   3 if hybrid else 1)


def _q(scale, zp=0) -> QuantParams:
    return QuantParams((float(scale),), (int(zp),))


def svdf(rng, mode="float", act=Activation.RELU, asym=False, bias=True):
    m = Model(rng)
    batch, n_in, units, rank, memory = (_dims(rng, 1, 4), _dims(rng, 2, 9), _dims(rng, 1, 5), _dims(rng, 1, 3),
                                        _dims(rng, 1, 5))
    filters = units * rank
    if mode == "int8":
        x = m.live("x", (batch, n_in), DType.INT8, rng.integers(-128, 128, (batch, n_in)).astype(np.int8),
                   _q(0.05, rng.integers(-5, 5)))
        wf = m.const("wf", rng.integers(-127, 128, (filters, n_in)), DType.INT8, _q(rng.uniform(2e-3, 2e-2)))
        wt = m.const("wt", rng.integers(-30000, 30000, (filters, memory)), DType.INT16, _q(rng.uniform(1e-5, 1e-4)))
        b = m.const("b", rng.integers(-2000, 2000, units), DType.INT32, _q(1e-5)) if bias else -1
        state = m.state("s", (batch, filters * memory), DType.INT16, _q(rng.uniform(1e-4, 1e-3)))
        y = m.out("y", (batch, units), DType.INT8, _q(0.05, rng.integers(-5, 5)))
    else:
        x = m.live("x", (batch, n_in))
        hybrid = mode == "hybrid"
        wf, wt = m.weights("wf", (filters, n_in), hybrid, 1.0), m.weights("wt", (filters, memory), hybrid, 1.0)
        b = m.const("b", rng.standard_normal(units)) if bias else -1
        state, y = m.state("s", (batch, filters * memory)), m.out("y", (batch, units))
    return m.graph(OpType.SVDF, (x, wf, wt, b, state), y, SVDFOptions(rank, act, asym),
                   {"float": 1, "hybrid": 4, "int8": 3}[mode])


def _conv3d_geometry(rng, padding, transpose):
    size = _dims(rng, 1 if transpose else 2, 5 if transpose else 7, 3)
    kernel, strides = _dims(rng, 1, 4, 3), _dims(rng, 1, 3, 3)
    dilations = [1 if s > 1 else _dims(rng, 1, 3) for s in strides]
    if padding is Padding.VALID and not transpose:
        for a in range(3):
            while (kernel[a] - 1) * dilations[a] + 1 > size[a]:
                kernel[a] -= 1
    return size, kernel, strides, dilations


# Conv3DOptions takes padding, stride_d, stride_w, stride_h, activation, dilation d, w, h (schema order).
def conv3d(rng, padding=Padding.SAME, act=Activation.NONE, bias=True):
    m = Model(rng)
    n, cin, cout = _dims(rng, 1, 3), _dims(rng, 1, 4), _dims(rng, 1, 4)
    size, kernel, strides, dil = _conv3d_geometry(rng, padding, False)
    out = [(s + st - 1) // st if padding is Padding.SAME else (s - (k - 1) * d - 1 + st) // st
           for s, k, st, d in zip(size, kernel, strides, dil)]
    ins = [m.live("x", (n, *size, cin)), m.const("w", rng.standard_normal((*kernel, cin, cout)))]
    if bias:
        ins.append(m.const("b", rng.standard_normal(cout)))
    opts = Conv3DOptions(padding, strides[0], strides[2], strides[1], act, dil[0], dil[2], dil[1])
    return m.graph(OpType.CONV_3D, ins, m.out("y", (n, *out, cout)), opts)


def conv3d_transpose(rng, padding=Padding.SAME, act=Activation.NONE, bias=True):
    m = Model(rng)
    n, cin, cout = _dims(rng, 1, 3), _dims(rng, 1, 4), _dims(rng, 1, 4)
    size, kernel, strides, dil = _conv3d_geometry(rng, padding, True)
    out = [s * st if padding is Padding.SAME else (s - 1) * st + (k - 1) * d + 1
           for s, k, st, d in zip(size, kernel, strides, dil)]
    ins = [m.const("shape", [n, *out, cout], DType.INT32), m.const("w", rng.standard_normal((*kernel, cout, cin))),
           m.live("x", (n, *size, cin))]
    if bias:
        ins.append(m.const("b", rng.standard_normal(cout)))
    opts = Conv3DOptions(padding, strides[0], strides[2], strides[1], act, dil[0], dil[2], dil[1])
    return m.graph(OpType.CONV_3D_TRANSPOSE, ins, m.out("y", (n, *out, cout)), opts)


def _values(rng, shape, dtype: DType) -> np.ndarray:
    if dtype.np.kind == "f":
        return (rng.standard_normal(shape) * 3).astype(dtype.np)
    if dtype is DType.BOOL:
        return rng.integers(0, 2, shape).astype(bool)
    info = np.iinfo(dtype.np)
    # 8-bit values over their whole range, so that sums and products wrap; wider ones small.
    lo, hi = (info.min, info.max) if dtype.np.itemsize == 1 else (max(-1000, info.min), 1000)
    return rng.integers(lo, hi, shape, endpoint=True).astype(dtype.np)


def stablehlo_binary(rng, op_type, dtype):
    m = Model(rng)
    shape = tuple(_dims(rng, 1, 5) for _ in range(_dims(rng, 1, 4)))
    a = m.live("a", shape, dtype, _values(rng, shape, dtype))
    b = m.live("b", shape, dtype, _values(rng, shape, dtype))
    return m.graph(op_type, (a, b), m.out("y", shape, dtype))


def stablehlo_pad(rng, dtype):
    m = Model(rng)
    rank = _dims(rng, 1, 4)
    shape = [_dims(rng, 1, 5) for _ in range(rank)]
    low, high, interior = ([_dims(rng, -2, 3) for _ in range(rank)], [_dims(rng, -2, 3) for _ in range(rank)],
                           [_dims(rng, 0, 3) for _ in range(rank)])
    out = []
    for a, (d, lo, it) in enumerate(zip(shape, low, interior)):
        n = d + (d - 1) * it + lo + high[a]
        if n < 1:
            high[a] += 1 - n
            n = 1
        out.append(n)
    x = m.live("x", shape, dtype, _values(rng, shape, dtype))
    value = m.const("v", _values(rng, (), dtype), dtype)
    return m.graph(OpType.STABLEHLO_PAD, (x, value), m.out("y", out, dtype),
                   StablehloPadOptions(tuple(low), tuple(high), tuple(interior)))


def dilate(rng, dtype):
    m = Model(rng)
    rank = _dims(rng, 1, 4)
    shape = [_dims(rng, 1, 5) for _ in range(rank)]
    factors = [_dims(rng, 1, 4) for _ in range(rank)]
    x = m.live("x", shape, dtype, _values(rng, shape, dtype))
    ins = (x, m.const("d", factors, DType.INT32), m.const("v", _values(rng, (), dtype), dtype))
    return m.graph(OpType.DILATE, ins, m.out("y", [(s - 1) * f + 1 for s, f in zip(shape, factors)], dtype))


def reduce_window(rng, dtype, fn):
    from runtime.ops.stablehlo import window_output_shape

    m = Model(rng)
    rank = _dims(rng, 1, 4)
    shape = [_dims(rng, 2, 7) for _ in range(rank)]
    window, strides, dil = ([_dims(rng, 1, 4) for _ in range(rank)], [_dims(rng, 1, 3) for _ in range(rank)],
                            [_dims(rng, 1, 3) for _ in range(rank)])
    init = np.ones((), dtype.np) if fn is ReduceWindowFunction.MUL else _values(rng, (), dtype)
    ins = (m.live("x", shape, dtype, _values(rng, shape, dtype)), m.const("init", init, dtype),
           m.const("window", window, DType.INT64), m.const("strides", strides, DType.INT64),
           m.const("dilations", dil, DType.INT64))
    out = window_output_shape(shape, window, strides, dil)
    return m.graph(OpType.REDUCE_WINDOW, ins, m.out("y", out, dtype), ReduceWindowOptions(fn))


def embedding_lookup_sparse(rng, combiner, sort=True, lookup_rank=2, ids=None, indices=None, weights=None,
                            dense=None, table_rows=None):
    m = Model(rng)
    n = len(ids) if ids is not None else _dims(rng, 1, 7)
    rows = table_rows or _dims(rng, 2, 6)
    width = [_dims(rng, 1, 4) for _ in range(_dims(rng, 1, 3))]
    dense = dense or [_dims(rng, 1, 4) for _ in range(lookup_rank)]
    if indices is None:
        indices = np.stack([rng.integers(0, d, n) for d in dense], 1)
        if sort:
            indices = indices[np.lexsort(indices.T[::-1])]
    ids = np.asarray(ids if ids is not None else rng.integers(0, rows, n), np.int32)
    weights = np.asarray(weights if weights is not None else rng.uniform(0.2, 2, n), F32)
    ins = (m.live("ids", (n,), DType.INT32, ids), m.live("indices", (n, len(dense)), DType.INT32,
                                                             np.asarray(indices, np.int32)),
           m.const("dense_shape", dense, DType.INT32), m.live("weights", (n,), DType.FLOAT32, weights),
           m.const("table", rng.standard_normal((rows, *width))))
    return m.graph(OpType.EMBEDDING_LOOKUP_SPARSE, ins, m.out("y", (*dense[:-1], *width)),
                   EmbeddingLookupSparseOptions(combiner))


def unsorted_mean_lookup(rng):
    """Lookups into rows 0, 1, then 0 again: LiteRT averages row 0's two runs one after the other."""
    return embedding_lookup_sparse(rng, CombinerType.MEAN, ids=[0, 1, 2], indices=[[0, 0], [1, 0], [0, 1]],
                                   weights=[1.0, 1.0, 3.0], dense=[2, 2], table_rows=3)


# Families: name -> (maker(rng) -> Graph, exact). Float families are held to FLOAT_REL_TOL.
D, T = DType, OpType
FAMILIES = {
    "rnn": (lambda r: rnn(r), False),
    "rnn_relu6": (lambda r: rnn(r, act=Activation.RELU6), False),
    "rnn_hybrid": (lambda r: rnn(r, hybrid=True), True),
    "rnn_hybrid_asymmetric": (lambda r: rnn(r, hybrid=True, asym=True), True),
    "seq_rnn_batch_major": (lambda r: seq_rnn(r), False),
    "seq_rnn_time_major": (lambda r: seq_rnn(r, time_major=True), False),
    "seq_rnn_hybrid_batch_major": (lambda r: seq_rnn(r, hybrid=True), True),
    "seq_rnn_hybrid_time_major_asymmetric": (lambda r: seq_rnn(r, hybrid=True, time_major=True, asym=True), True),
    "bi_rnn_batch_major": (lambda r: bi_rnn(r), False),
    "bi_rnn_time_major_merged": (lambda r: bi_rnn(r, time_major=True, merge=True), False),
    "bi_rnn_aux_weights": (lambda r: bi_rnn(r, aux="weights"), False),
    "bi_rnn_time_major_aux_weights": (lambda r: bi_rnn(r, time_major=True, aux="weights"), False),
    "bi_rnn_time_major_aux_input": (lambda r: bi_rnn(r, time_major=True, aux="input"), False),
    "bi_rnn_batch_major_aux_input": (lambda r: bi_rnn(r, aux="input"), False),
    "bi_rnn_hybrid_batch_major": (lambda r: bi_rnn(r, hybrid=True), True),
    "bi_rnn_hybrid_time_major": (lambda r: bi_rnn(r, hybrid=True, time_major=True), True),
    "bi_rnn_hybrid_time_major_merged_asymmetric":
        (lambda r: bi_rnn(r, hybrid=True, time_major=True, merge=True, asym=True), True),
    "lstm": (lambda r: lstm(r), False),
    "lstm_cifg_peephole_clip": (lambda r: lstm(r, cifg=True, peephole=True, cell_clip=1.0), False),
    "lstm_projection_layer_norm": (lambda r: lstm(r, projection=True, norm=True, proj_clip=0.5), False),
    "lstm_hybrid": (lambda r: lstm(r, hybrid=True), True),
    "lstm_hybrid_asymmetric_peephole_projection":
        (lambda r: lstm(r, hybrid=True, asym=True, peephole=True, projection=True), True),
    "lstm_hybrid_layer_norm_cifg": (lambda r: lstm(r, hybrid=True, norm=True, cifg=True), True),
    "bi_lstm_time_major": (lambda r: bi_lstm(r), False),
    "bi_lstm_batch_major_merged": (lambda r: bi_lstm(r, time_major=False, merge=True, batch=1), False),
    "bi_lstm_cifg_peephole_projection":
        (lambda r: bi_lstm(r, cifg=True, peephole=True, projection=True, cell_clip=1.0), False),
    "bi_lstm_aux_weights": (lambda r: bi_lstm(r, aux="weights", merge=True), False),
    "bi_lstm_batch_major_aux_input": (lambda r: bi_lstm(r, time_major=False, aux="input"), False),
    "bi_lstm_hybrid_time_major": (lambda r: bi_lstm(r, hybrid=True), True),
    "bi_lstm_hybrid_batch_major_merged_asymmetric":
        (lambda r: bi_lstm(r, hybrid=True, time_major=False, merge=True, asym=True, batch=1), True),
    "bi_lstm_hybrid_peephole_projection": (lambda r: bi_lstm(r, hybrid=True, peephole=True, projection=True), True),
    "bi_lstm_hybrid_aux_input": (lambda r: bi_lstm(r, hybrid=True, time_major=False, aux="input"), True),
    "bi_lstm_hybrid_aux_weights_asymmetric": (lambda r: bi_lstm(r, hybrid=True, aux="weights", asym=True), True),
    "bi_lstm_hybrid_batch_major_aux_weights_cifg":
        (lambda r: bi_lstm(r, hybrid=True, time_major=False, aux="weights", cifg=True, batch=1), True),
    "svdf": (lambda r: svdf(r), False),
    "svdf_tanh_no_bias": (lambda r: svdf(r, act=Activation.TANH, bias=False), False),
    "svdf_hybrid": (lambda r: svdf(r, mode="hybrid"), True),
    "svdf_hybrid_asymmetric": (lambda r: svdf(r, mode="hybrid", asym=True, act=Activation.NONE), True),
    "svdf_int8": (lambda r: svdf(r, mode="int8"), True),
    "svdf_int8_no_bias": (lambda r: svdf(r, mode="int8", bias=False), True),
    "conv3d_same": (lambda r: conv3d(r), False),
    "conv3d_valid_relu6": (lambda r: conv3d(r, Padding.VALID, Activation.RELU6), False),
    "conv3d_transpose_same": (lambda r: conv3d_transpose(r), False),
    "conv3d_transpose_valid_relu_no_bias": (lambda r: conv3d_transpose(r, Padding.VALID, Activation.RELU, False),
                                            False),
    **{f"{op.name.lower()}_{dt.name.lower()}": (lambda r, op=op, dt=dt: stablehlo_binary(r, op, dt), True)
       for op in (T.STABLEHLO_ADD, T.STABLEHLO_MULTIPLY, T.STABLEHLO_MAXIMUM, T.STABLEHLO_MINIMUM)
       for dt in (D.FLOAT32, D.INT8, D.INT32, D.BOOL, D.FLOAT16)},
    **{f"stablehlo_pad_{dt.name.lower()}": (lambda r, dt=dt: stablehlo_pad(r, dt), True)
       for dt in (D.FLOAT32, D.INT8, D.INT64)},
    **{f"dilate_{dt.name.lower()}": (lambda r, dt=dt: dilate(r, dt), True) for dt in (D.FLOAT32, D.UINT8, D.BOOL)},
    **{f"reduce_window_{fn.name.lower()}_{dt.name.lower()}": (lambda r, dt=dt, fn=fn: reduce_window(r, dt, fn), True)
       for fn in list(ReduceWindowFunction)[1:] for dt in (D.FLOAT32, D.INT32, D.BOOL)},
    **{f"embedding_lookup_sparse_{c.name.lower()}": (lambda r, c=c: embedding_lookup_sparse(r, c), True)
       for c in CombinerType},
    "embedding_lookup_sparse_mean_unsorted_rank3":
        (lambda r: embedding_lookup_sparse(r, CombinerType.MEAN, sort=False, lookup_rank=3), True),
    "embedding_lookup_sparse_sqrtn_rank1":
        (lambda r: embedding_lookup_sparse(r, CombinerType.SQRTN, lookup_rank=1), True),
    "embedding_lookup_sparse_mean_revisited_row": (unsorted_mean_lookup, True),
}


# -- running both sides ----------------------------------------------------------------------------

def ours(path, feeds, invokes=INVOKES) -> dict[str, np.ndarray]:
    it = Interpreter(model_path=path)
    it.allocate_tensors()
    outs = {}
    for run in range(invokes):
        for index, value in feeds.items():
            it.set_tensor(index, value)
        it.invoke()
        for d in it.get_output_details():
            outs[f"{run}:{d['index']}"] = it.get_tensor(d["index"])
    return outs


def build(name: str, seed: int) -> tuple[Graph, dict[int, np.ndarray]]:
    g = FAMILIES[name][0](np.random.default_rng(seed))
    return g, FEEDS[g]


@pytest.fixture(scope="module")
def parity(tmp_path_factory):
    """{family: [(path, ours, LiteRT's)]}, every model of every family run in one LiteRT child."""
    tmp = tmp_path_factory.mktemp("seq_ops")
    jobs, names = [], []
    for name in FAMILIES:
        for seed in SEEDS:
            g, feeds = build(name, seed)
            path = str(tmp / f"{name}_{seed}.tflite")
            save(g, path)
            jobs.append((path, feeds))
            names.append(name)
    ref = run_litert(jobs, resolvers=("BUILTIN_REF",), invokes=INVOKES)
    out: dict[str, list] = {}
    for name, (path, feeds), r in zip(names, jobs, ref):
        assert not isinstance(r, str), f"{os.path.basename(path)}: LiteRT: {r}"
        assert str(r["resolver"]) == "BUILTIN_REF"
        out.setdefault(name, []).append((path, ours(path, feeds), r))
    return out


def _span(ref: np.ndarray) -> float:
    return max(float(ref.max() - ref.min()), 1e-3) if ref.size else 1.0


@needs_litert
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_matches_litert_reference_kernels(parity, family):
    exact = FAMILIES[family][1]
    for path, mine, ref in parity[family]:
        keys = [k for k in ref if k != "resolver"]
        assert sorted(keys) == sorted(mine), path
        for key in keys:
            a, b = mine[key], ref[key]
            assert a.shape == b.shape and a.dtype == b.dtype, f"{os.path.basename(path)} {key}: {a.shape} {b.shape}"
            if exact or b.dtype.kind != "f":
                assert np.array_equal(a, b, equal_nan=True), f"{os.path.basename(path)} {key}: not bit-exact"
            else:
                err = float(np.abs(a.astype(np.float64) - b).max()) / _span(b) if b.size else 0.0
                assert err <= FLOAT_REL_TOL, f"{os.path.basename(path)} {key}: error {err:.3g} x range"


STATEFUL = [f for f in FAMILIES if f.split("_")[0] in ("rnn", "seq", "bi", "lstm", "svdf")]


@needs_litert
@pytest.mark.parametrize("family", STATEFUL)
def test_state_is_carried_into_the_second_invoke(parity, family):
    """The same input twice gives another output the second time: the variable state moved on."""
    for path, mine, ref in parity[family]:
        for key in [k for k in mine if k.startswith("0:")]:
            again = "1:" + key[2:]
            if mine[key].size and np.any(ref[key] != ref[again]):
                assert np.any(mine[key] != mine[again]), path
    assert any(np.any(m[k] != m["1:" + k[2:]]) for _, m, _ in parity[family] for k in m if k.startswith("0:"))


# -- LiteRT behaviours worth knowing -----------------------------------------------------------------

def _run_graph(graph: Graph, feeds: dict, invokes: int = 1) -> list[np.ndarray]:
    it = Interpreter(graph=graph)
    it.allocate_tensors()
    for _ in range(invokes):
        for t, v in feeds.items():
            it.set_tensor(t, v)
        it.invoke()
    return [it.get_tensor(t) for t in graph.outputs]


def _to_batch_major(graph: Graph, feeds: dict) -> tuple[Graph, dict]:
    """The same model with its sequence tensors [time, batch, ...] swapped to [batch, time, ...]."""
    seq = {t for t in (*graph.inputs, *graph.outputs) if len(graph.tensors[t].shape) == 3}
    tensors = tuple(dataclasses.replace(t, shape=(t.shape[1], t.shape[0], t.shape[2])) if k in seq else t
                    for k, t in enumerate(graph.tensors))
    op = graph.ops[0]
    op = dataclasses.replace(op, options=dataclasses.replace(op.options, time_major=False))
    return (dataclasses.replace(graph, tensors=tensors, ops=(op,)),
            {t: np.ascontiguousarray(np.swapaxes(v, 0, 1)) if t in seq else v for t, v in feeds.items()})


@needs_litert
def test_hybrid_time_major_bidirectional_rnn_repeats_its_pass_per_time_step(parity):
    """LiteRT's answer (matched bit for bit above) is not the batch-major answer on the same data:
    it is what max_time passes over the sequence give; one pass gives the batch-major answer."""
    seen = 0
    for seed in SEEDS:
        g, feeds = build("bi_rnn_hybrid_time_major", seed)
        steps = g.tensors[g.inputs[0]].shape[0]
        if steps < 2:
            continue
        seen += 1
        time_major = _run_graph(g, feeds)
        bm, bm_feeds = _to_batch_major(g, feeds)
        batch_major = [np.swapaxes(v, 0, 1) for v in _run_graph(bm, bm_feeds)]
        assert not all(np.array_equal(a, b) for a, b in zip(time_major, batch_major))
        # max_time invokes of the batch-major op, state carried, end where LiteRT's one invoke does.
        repeated = [np.swapaxes(v, 0, 1) for v in _run_graph(bm, bm_feeds, invokes=steps)]
        assert all(np.array_equal(a, b) for a, b in zip(time_major, repeated))
    assert seen


def _without_aux(graph: Graph, feeds: dict) -> list[np.ndarray]:
    """The same bidirectional RNN run with its auxiliary input (slot 9) taken away."""
    op = graph.ops[0]
    bare = dataclasses.replace(graph, ops=(dataclasses.replace(op, inputs=op.inputs[:9] + (-1, -1, -1)),),
                               inputs=graph.inputs[:1])
    return _run_graph(bare, {graph.inputs[0]: feeds[graph.inputs[0]]})


def test_batch_major_bidirectional_rnn_ignores_an_auxiliary_input_without_weights():
    g, feeds = build("bi_rnn_batch_major_aux_input", 0)
    assert all(np.array_equal(a, b) for a, b in zip(_run_graph(g, feeds), _without_aux(g, feeds)))
    # Time-major, the same auxiliary input is the backward cell's input.
    g, feeds = build("bi_rnn_time_major_aux_input", 0)
    assert not np.array_equal(_run_graph(g, feeds)[1], _without_aux(g, feeds)[1])


def test_batch_major_merged_bidirectional_lstm_keeps_each_batch_row_its_own_state():
    """With batch > 1 LiteRT's batch-major merged BiLSTM misplaces the state rows (see the module
    docstring); the testbed answers as the time-major op does."""
    for seed in SEEDS:
        g, feeds = bi_lstm_graph(seed)
        tm = _run_graph(g, feeds, invokes=2)
        bm, bm_feeds = _to_batch_major(g, feeds)
        got = _run_graph(bm, bm_feeds, invokes=2)
        np.testing.assert_allclose(np.swapaxes(got[0], 0, 1), tm[0], rtol=1e-5, atol=1e-6)


def bi_lstm_graph(seed):
    return build_custom(lambda r: bi_lstm(r, merge=True, batch=3, peephole=True), seed)


@needs_litert
def test_revisited_sparse_rows_are_combined_per_run(parity):
    """Row 0 gets lookups 0 and 2, with row 1's between them: LiteRT (matched above) divides the first
    run by its weight, adds the second and divides by that run's weight, not by their total."""
    _, mine, ref = parity["embedding_lookup_sparse_mean_revisited_row"][0]
    g, feeds = build("embedding_lookup_sparse_mean_revisited_row", SEEDS[0])
    table = g.tensors[g.ops[0].inputs[4]].data
    runs = (table[0] * 1.0 / 1.0 + table[2] * 3.0) / 3.0
    key = next(k for k in ref if k.startswith("0:"))
    np.testing.assert_allclose(ref[key][0], runs, rtol=1e-6)
    assert not np.allclose(ref[key][0], (table[0] + 3 * table[2]) / 4.0)
    assert np.array_equal(mine[key], ref[key])


@needs_litert
def test_eight_bit_svdf_takes_relu_but_applies_none(parity):
    """Outputs below the output zero point (negative values) come out of LiteRT, and ours match."""
    below = 0
    for family in ("svdf_int8", "svdf_int8_no_bias"):
        for (path, mine, ref), seed in zip(parity[family], SEEDS):
            zp = build(family, seed)[0].tensors[load(path).outputs[0]].quant.zero_point[0]
            below += sum(int(np.sum(ref[k].astype(int) < zp)) for k in ref if k != "resolver")
    assert below > 0


@needs_litert
def test_hybrid_bidirectional_rnn_with_auxiliary_weights_where_litert_survives(tmp_path):
    """LiteRT runs this configuration on an uninitialised temporary and often crashes: each model
    goes to its own child process; where one survives, the answers agree bit for bit."""
    compared = 0
    for seed in range(3):
        g, feeds = build_custom(lambda r: bi_rnn(r, hybrid=True, aux="weights"), seed)
        path = str(tmp_path / f"aux_{seed}.tflite")
        save(g, path)
        try:
            [ref] = run_litert([(path, feeds)], resolvers=("BUILTIN_REF",), invokes=INVOKES)
        except RuntimeError:      # the child crashed
            continue
        if isinstance(ref, str):
            continue
        mine = ours(path, feeds)
        assert all(np.array_equal(mine[k], ref[k]) for k in mine)
        compared += 1
    if not compared:
        pytest.skip("LiteRT crashed on every model of this configuration")


def build_custom(make, seed):
    g = make(np.random.default_rng(seed))
    return g, FEEDS[g]


# -- damaged models: one ModelError line naming the op ------------------------------------------------

def _with_tensor(g: Graph, k: int, **changes) -> Graph:
    tensors = list(g.tensors)
    tensors[k] = dataclasses.replace(tensors[k], **changes)
    return dataclasses.replace(g, tensors=tuple(tensors))


def _with_op(g: Graph, **changes) -> Graph:
    return dataclasses.replace(g, ops=(dataclasses.replace(g.ops[0], **changes),))


def _with_options(g: Graph, **changes) -> Graph:
    return _with_op(g, options=dataclasses.replace(g.ops[0].options, **changes))


def _input(g: Graph, slot: int) -> int:
    return g.ops[0].inputs[slot]


def _wrong_shape(g, slot, shape):
    t = _input(g, slot)
    data = g.tensors[t].data
    return _with_tensor(g, t, shape=tuple(shape),
                        data=None if data is None else np.zeros(shape, data.dtype))


def _one_output(g: Graph) -> Graph:
    first = g.ops[0].outputs[:1]
    return dataclasses.replace(_with_op(g, outputs=first), outputs=first)


def _rnn0():
    return build("rnn", 0)[0]


DAMAGED = {
    "rnn_state_not_variable": (lambda: _with_tensor(_rnn0(), _input(_rnn0(), 4), is_variable=False), "variable"),
    "rnn_recurrent_weights_wrong_shape": (lambda: _wrong_shape(_rnn0(), 2, (3, 2)), "recurrent weights"),
    "rnn_four_inputs": (lambda: _with_op(_rnn0(), inputs=_rnn0().ops[0].inputs[:4]), "inputs"),
    "rnn_uint8_weights": (lambda: _with_tensor(build("rnn_hybrid", 0)[0], 1, dtype=DType.UINT8,
                                               data=np.zeros(build("rnn_hybrid", 0)[0].tensors[1].shape, np.uint8)),
                          "INT8"),
    "seq_rnn_rank2_input": (lambda: _wrong_shape(build("seq_rnn_time_major", 0)[0], 0, (2, 3)), "rank 3"),
    "bi_rnn_one_output_unmerged": (lambda: _one_output(build("bi_rnn_batch_major", 0)[0]), "outputs"),
    "bi_rnn_one_aux_weight": (lambda: _with_op(build("bi_rnn_aux_weights", 0)[0], inputs=build(
        "bi_rnn_aux_weights", 0)[0].ops[0].inputs[:11] + (-1,)), "auxiliary"),
    "lstm_basic_kernel": (lambda: _with_options(build("lstm", 0)[0], kernel_type=LSTMKernelType.BASIC), "BASIC"),
    "lstm_21_inputs": (lambda: _with_op(build("lstm", 0)[0], inputs=build("lstm", 0)[0].ops[0].inputs + (-1,)),
                       "20"),
    "lstm_negative_clip": (lambda: _with_options(build("lstm", 0)[0], cell_clip=-1.0), "cell_clip"),
    "lstm_cell_state_wrong_batch": (lambda: _wrong_shape(build("lstm", 0)[0], 19, (9, 3)), "batch"),
    "bi_lstm_47_inputs": (lambda: _with_op(build("bi_lstm_time_major", 0)[0],
                                           inputs=build("bi_lstm_time_major", 0)[0].ops[0].inputs[:47]), "48"),
    "bi_lstm_backward_state_not_variable": (lambda: _with_tensor(build("bi_lstm_time_major", 0)[0], _input(
        build("bi_lstm_time_major", 0)[0], 38), is_variable=False), "variable"),
    "svdf_rank_zero": (lambda: _with_options(build("svdf", 0)[0], rank=0), "rank"),
    "svdf_state_wrong_size": (lambda: _wrong_shape(build("svdf", 0)[0], 4, (1, 1)), "state"),
    "svdf_int8_tanh": (lambda: _with_options(build("svdf_int8", 0)[0], fused_activation_function=Activation.TANH),
                       "RELU"),
    "conv3d_zero_stride": (lambda: _with_options(build("conv3d_same", 0)[0], stride_h=0), "stride_h"),
    "conv3d_channels_mismatch": (lambda: _wrong_shape(build("conv3d_same", 0)[0], 1, (1, 1, 1, 9, 2)), "channels"),
    "conv3d_filter_too_big_valid": (lambda: _with_options(_wrong_shape(build("conv3d_same", 0)[0], 1, (
        40, 1, 1, build("conv3d_same", 0)[0].tensors[0].shape[4], 2)), padding=Padding.VALID), "exceeds"),
    "conv3d_transpose_shape_mismatch": (lambda: _with_tensor(build("conv3d_transpose_same", 0)[0], 0, data=np.array(
        [1, 99, 99, 99, 1], np.int32)), "output shape"),
    "stablehlo_add_shapes_differ": (lambda: _wrong_shape(build("stablehlo_add_float32", 0)[0], 1, (7, 7, 7, 7)),
                                    "broadcast"),
    "stablehlo_pad_negative_interior": (lambda: _with_options(build("stablehlo_pad_float32", 0)[0], interior_padding=(
        -1,) * len(build("stablehlo_pad_float32", 0)[0].tensors[0].shape)), "interior"),
    "stablehlo_pad_short_options": (lambda: _with_options(build("stablehlo_pad_float32", 0)[0], edge_padding_low=()),
                                    "edge_padding_low"),
    "dilate_zero_factor": (lambda: _with_tensor(build("dilate_float32", 0)[0], 1, data=np.zeros(
        build("dilate_float32", 0)[0].tensors[1].shape, np.int32)), "at least 1"),
    "reduce_window_unsupported_function": (lambda: _with_options(build("reduce_window_add_float32", 0)[0],
                                                                 reduce_function=ReduceWindowFunction.UNSUPPORTED),
                                           "reduce_function"),
    "reduce_window_int32_window": (lambda: _with_tensor(build("reduce_window_add_float32", 0)[0], 2, dtype=DType.INT32,
                                                        data=build("reduce_window_add_float32", 0)[0].tensors[2].data
                                                        .astype(np.int32)), "INT64"),
    "embedding_lookup_sparse_dense_shape_mismatch": (lambda: _wrong_shape(build(
        "embedding_lookup_sparse_sum", 0)[0], 2, (5,)), "dense shape"),
}


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_damaged_models_give_one_model_error_line(tmp_path, case):
    make, fragment = DAMAGED[case]
    graph = make()
    path = tmp_path / f"{case}.tflite"
    save(graph, path)
    with pytest.raises(ModelError) as info:
        it = Interpreter(model_path=str(path))
        it.allocate_tensors()
        it.invoke()
    message = str(info.value)
    assert "\n" not in message and "op #0" in message and fragment in message, message


def test_out_of_range_ids_at_run_time_are_a_model_error():
    g, feeds = build("embedding_lookup_sparse_sum", 0)
    ids = g.inputs[0]
    it = Interpreter(graph=g)
    it.allocate_tensors()
    for t, v in feeds.items():
        it.set_tensor(t, v)
    it.set_tensor(ids, np.full_like(feeds[ids], 99))
    with pytest.raises(ModelError, match=r"op #0 EMBEDDING_LOOKUP_SPARSE: id 99 is out of range"):
        it.invoke()


def test_a_huge_reduce_window_is_refused_before_it_runs():
    m = Model(np.random.default_rng(0))
    ins = (m.live("x", (4000, 4000)), m.const("init", 0.0), m.const("window", [2000, 2000], DType.INT64),
           m.const("strides", [1, 1], DType.INT64), m.const("dilations", [1, 1], DType.INT64))
    g = m.graph(OpType.REDUCE_WINDOW, ins, m.out("y", (2001, 2001)), ReduceWindowOptions(ReduceWindowFunction.ADD))
    with pytest.raises(ModelError, match="op #0 REDUCE_WINDOW: a window of .* more work"):
        Interpreter(graph=g).allocate_tensors()


# -- options round trip, cost and delegates -------------------------------------------------------------

@pytest.mark.parametrize("family", ["bi_rnn_time_major_merged", "bi_lstm_batch_major_merged", "svdf_hybrid",
                                    "conv3d_valid_relu6", "stablehlo_pad_int8", "reduce_window_maximum_int32",
                                    "embedding_lookup_sparse_sqrtn", "lstm_hybrid"])
def test_options_survive_the_file(family):
    g, _ = build(family, 1)
    back = loads(dumps(g))
    assert back.ops[0].options == g.ops[0].options
    assert back.ops[0].inputs == g.ops[0].inputs


def test_stablehlo_tables_live_in_the_second_options_union(tmp_path):
    import tflite

    g, _ = build("stablehlo_pad_float32", 0)
    path = tmp_path / "pad.tflite"
    save(g, path)
    op = tflite.Model.GetRootAs(path.read_bytes(), 0).Subgraphs(0).Operators(0)
    assert op.BuiltinOptionsType() == 0 and op.BuiltinOptions2Type() != 0
    assert load(path).ops[0].options == g.ops[0].options


def test_recurrent_macs_are_the_gate_matmuls_times_the_steps():
    from sim.cost import OpClass, Precision
    from sim.work import describe

    g, _ = build("seq_rnn_time_major", 0)
    steps, batch, n_in = g.tensors[g.inputs[0]].shape
    units = g.tensors[g.outputs[0]].shape[-1]
    work = describe(g.ops[0], g, [t.shape for t in g.tensors], Precision.FLOAT32)
    assert work.op_class is OpClass.GEMM
    assert work.macs == steps * batch * (units * n_in + units * units)

    g, _ = build("bi_lstm_time_major", 0)
    steps, batch, _ = g.tensors[g.inputs[0]].shape
    matrices = sum(g.tensors[t].data.size for k, t in enumerate(g.ops[0].inputs)
                   if t >= 0 and (1 <= k <= 8 or 18 <= k <= 25 or k in (16, 33)))
    work = describe(g.ops[0], g, [t.shape for t in g.tensors], Precision.FLOAT32)
    assert work.macs == steps * batch * matrices and work.elem_ops > 0


def test_conv3d_macs_and_class():
    from sim.cost import OpClass, Precision
    from sim.work import describe

    g, _ = build("conv3d_same", 0)
    kd, kh, kw, cin, _ = g.tensors[1].shape
    work = describe(g.ops[0], g, [t.shape for t in g.tensors], Precision.FLOAT32)
    assert work.op_class is OpClass.CONV
    assert work.macs == int(np.prod(g.tensors[g.outputs[0]].shape)) * kd * kh * kw * cin


@pytest.mark.parametrize("family", ["seq_rnn_hybrid_batch_major", "bi_lstm_time_major", "svdf", "conv3d_same",
                                    "reduce_window_add_float32", "embedding_lookup_sparse_mean"])
def test_simulated_phone_runs_and_charges_the_ops(family):
    from sim.trace import Kind

    g, feeds = build(family, 0)
    it = Interpreter(graph=g, device="pixel4")
    it.allocate_tensors()
    for t, v in feeds.items():
        it.set_tensor(t, v)
    it.invoke()
    ops = [iv for iv in it.simulation.soc.trace.intervals if iv.kind is Kind.OP]
    assert ops and all(iv.seconds > 0 for iv in ops)
    np.testing.assert_array_equal(it.get_tensor(g.outputs[0]), _run_graph(g, feeds)[0])


@pytest.mark.parametrize("kind", ["gpu", "hexagon", "coreml"])
def test_delegates_refuse_the_new_ops_with_a_reason(kind):
    from delegates.registry import make_delegate
    from sim.profile import load_profile

    profile = load_profile("iphone_xs" if kind == "coreml" else "pixel4")
    delegate = make_delegate(kind, profile)
    for family in ("seq_rnn_batch_major", "bi_lstm_time_major", "svdf", "conv3d_same", "stablehlo_add_float32",
                   "reduce_window_add_float32", "embedding_lookup_sparse_sum"):
        g, _ = build(family, 0)
        verdict = delegate.is_node_supported(g.ops[0], g)
        assert not verdict and verdict.reason, (kind, family)
