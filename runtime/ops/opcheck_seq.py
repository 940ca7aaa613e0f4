"""Op checks (TFLite's Prepare) for the recurrent ops: RNN, LSTM and SVDF, in their cell, sequence and
bidirectional forms (runtime/ops/rnn.py, lstm_variants.py, svdf.py). Registered in runtime/ops/opcheck.py's
_RULES; every rule checks its own output types.

Each rule gets the op under check (runtime.ops.opcheck_base.OpCheck) and returns its output shapes, None where
only a run-time value can tell."""

from __future__ import annotations

import math
from typing import Sequence

from runtime.ir import options as opt
from runtime.ir.graph import DType
from runtime.ir.optypes import OpType
from runtime.ops.opcheck_base import fmt

F32 = DType.FLOAT32
I8, I16, I32, U8 = DType.INT8, DType.INT16, DType.INT32, DType.UINT8


def check_outs(c, dtype: DType) -> None:
    for j in range(len(c.op.outputs)):
        c.out_type(dtype, j)


def _need(c, k: int, shape: Sequence[int], what: str) -> None:
    got = c.shape(k)
    if tuple(got) != tuple(shape):
        raise c.fail(f"{c.name(k)} ({what}) has shape {fmt(got)}, {fmt(shape)} expected")


def _variable(c, k: int, what: str) -> None:
    if not c.tensor(k).is_variable:
        raise c.fail(f"{c.name(k)} ({what}) must be a variable tensor")


def _int8_weights(c, k: int, what: str) -> None:
    """Hybrid weights: constant int8 with one scale (the kernels read the tensor's single scale)."""
    t = c.tensor(k)
    if t.dtype is not I8 or not t.is_constant:
        raise c.fail(f"{c.name(k)} ({what}) is {'constant ' if t.is_constant else 'non-constant '}{t.dtype.name}; "
                     f"a hybrid kernel takes constant INT8 weights")
    q = t.quant
    if q is None or len(q.scale) != 1 or not math.isfinite(q.scale[0]):
        raise c.fail(f"{c.name(k)} ({what}) needs one finite quantization scale, as the hybrid kernel reads it")


def _weights(c, slots: Sequence[int], hybrid: bool, what: str = "weights") -> None:
    for k in slots:
        if c.has(k):
            if hybrid:
                _int8_weights(c, k, what)
            else:
                c.typed(k, (F32,), what)


def _is_hybrid(c, k: int) -> bool:
    """Float data with int8 constant weights in slot k."""
    return c.tensor(0).dtype is F32 and c.has(k) and c.tensor(k).dtype in (I8, U8)


def check_activation(c) -> None:
    act = c.opts.fused_activation_function
    if not isinstance(act, opt.Activation):
        raise c.fail(f"options.fused_activation_function is {act!r}, unknown")


# -- RNN family -------------------------------------------------------------------------------------


def _rnn_cell(c, slots: Sequence[int], batch: int, features: int, hybrid: bool, aux: int | None = None,
              aux_slot: int | None = None) -> int:
    """One RNN cell: input weights, recurrent weights, bias, hidden state (slots); its units."""
    w_in, w_rec, bias, state = slots
    units, got = c.rank(w_in, 2)
    if got != features:
        raise c.fail(f"{c.name(w_in)} (input weights) has shape {fmt((units, got))}; {features} input features "
                     f"expected")
    _need(c, w_rec, (units, units), "recurrent weights")
    _need(c, bias, (units,), "bias")
    _need(c, state, (batch, units), "hidden state")
    _variable(c, state, "hidden state")
    _weights(c, (w_in, w_rec), hybrid)
    if aux_slot is not None and c.has(aux_slot):
        _need(c, aux_slot, (units, aux), "auxiliary input weights")
        _weights(c, (aux_slot,), hybrid, "auxiliary input weights")
    c.typed(bias, (F32,), "bias")
    c.typed(state, (F32,), "hidden state")
    return units


def _rnn(c):
    c.arity(5, 5, 1)
    check_activation(c)
    c.typed(0, (F32,), "input")
    batch, features = c.rank(0, 2)
    units = _rnn_cell(c, (1, 2, 3, 4), batch, features, _is_hybrid(c, 1))
    check_outs(c, F32)
    return [(batch, units)]


def _sequence_rnn(c):
    c.arity(5, 5, 1)
    check_activation(c)
    c.typed(0, (F32,), "input")
    x = c.rank(0, 3)
    steps, batch = (x[0], x[1]) if c.opts.time_major else (x[1], x[0])
    units = _rnn_cell(c, (1, 2, 3, 4), batch, x[2], _is_hybrid(c, 1))
    check_outs(c, F32)
    return [(steps, batch, units) if c.opts.time_major else (batch, steps, units)]


def _aux_input(c, x: tuple, slot: int, with_weights: bool, own_width: bool = False) -> int:
    """An auxiliary input has the input's steps and batch; its width is the input's too, except
    where the kernel reads it with strides of its own (`own_width`: BIDIRECTIONAL_SEQUENCE_LSTM
    with auxiliary weights). LiteRT's RNN kernels step through it with the input's strides, so
    one of another width would be read out of step. Returns its width."""
    a = c.rank(slot, 3)
    c.typed(slot, (F32,), "auxiliary input")
    if (a[:2] != x[:2]) if (own_width and with_weights) else (a != x):
        use = "auxiliary input" if with_weights else "backward input"
        raise c.fail(f"{c.name(slot)} ({use}) has shape {fmt(a)}; the input's {fmt(x)} expected")
    return a[2]


def _bidirectional_rnn(c):
    c.arity(9, 12, None)
    check_activation(c)
    o = c.opts
    outs = 1 if o.merge_outputs else 2
    if len(c.op.outputs) != outs:
        raise c.fail(f"has {len(c.op.outputs)} outputs; {outs} expected with merge_outputs {bool(o.merge_outputs)}")
    c.typed(0, (F32,), "input")
    x = c.rank(0, 3)
    steps, batch = (x[0], x[1]) if o.time_major else (x[1], x[0])
    if c.has(10) != c.has(11):
        raise c.fail("the forward and backward auxiliary weights must both be present or both absent")
    with_weights = c.has(10)
    if with_weights and not c.has(9):
        raise c.fail("auxiliary input weights without an auxiliary input (input 9)")
    if c.has(9):
        _aux_input(c, x, 9, with_weights)
    hybrid = _is_hybrid(c, 1)
    if hybrid != _is_hybrid(c, 5):
        raise c.fail(f"{c.name(1)} and {c.name(5)} differ in type; both directions take the same weights type")
    fw = _rnn_cell(c, (1, 2, 3, 4), batch, x[2], hybrid, x[2], 10 if with_weights else None)
    bw = _rnn_cell(c, (5, 6, 7, 8), batch, x[2], hybrid, x[2], 11 if with_weights else None)
    check_outs(c, F32)
    shape = (lambda u: (steps, batch, u)) if o.time_major else (lambda u: (batch, steps, u))
    return [shape(fw + bw)] if o.merge_outputs else [shape(fw), shape(bw)]


# -- LSTM family ------------------------------------------------------------------------------------


def _lstm_cell(c, base: int, states: tuple[int, int], batch: int, features: int, norm: Sequence[int] = (),
               hybrid: bool = False, what: str = "") -> int:
    """One LSTM cell whose 17 tensors start at slot `base` (input-to-gate weights, recurrent
    weights, peepholes, biases, projection) and whose states are at `states`; its output units."""
    w_x, w_h = [base + g for g in range(4)], [base + 4 + g for g in range(4)]
    peep, bias = [base + 8 + g for g in range(3)], [base + 11 + g for g in range(4)]
    proj_w, proj_b = base + 15, base + 16
    for k in (w_x[1], w_x[2], w_x[3], w_h[1], w_h[2], w_h[3], bias[1], bias[2], bias[3]):
        c.tensor(k)   # required
    for k in states:
        _variable(c, k, f"{what}state")
    h_state, c_state = c.rank(states[0], 2), c.rank(states[1], 2)
    units, out = c_state[1], h_state[1]
    if c_state[0] != batch or h_state[0] != batch:
        raise c.fail(f"{what}state shapes {fmt(h_state)} and {fmt(c_state)} do not match batch {batch}")
    cifg = not c.has(w_x[0])
    if cifg != (not c.has(w_h[0])):
        raise c.fail(f"{what}input-gate weights must both be present or both absent (CIFG)")
    if cifg and c.has(bias[0]):
        raise c.fail(f"{what}a CIFG cell (no input gate) takes no input-gate bias")
    if not cifg:
        c.tensor(bias[0])
    gates = range(1, 4) if cifg else range(4)
    for g in gates:
        _need(c, w_x[g], (units, features), f"{what}input weights")
        _need(c, w_h[g], (units, out), f"{what}recurrent weights")
        _need(c, bias[g], (units,), f"{what}gate bias")
        c.typed(bias[g], (F32,), f"{what}gate bias")
    p_i, p_f, p_o = (c.has(k) for k in peep)
    if not (((p_i or cifg) and p_f and p_o) or not (p_i or p_f or p_o)):
        raise c.fail(f"{what}peephole weights must all be present or all absent (the input gate's may be "
                     f"absent in a CIFG cell)")
    for k in (*peep, *(n for n in norm if c.has(n))):
        if c.has(k):
            _need(c, k, (units,), f"{what}per-cell vector")
    for k in norm:
        if c.has(k):
            c.typed(k, (F32,), f"{what}layer-norm coefficients")
    if c.has(proj_w):
        _need(c, proj_w, (out, units), f"{what}projection weights")
        if c.has(proj_b):
            _need(c, proj_b, (out,), f"{what}projection bias")
            c.typed(proj_b, (F32,), f"{what}projection bias")
    elif out != units:
        raise c.fail(f"{what}output state has {out} units, the cell {units}, and there is no projection")
    _weights(c, [*(w_x[g] for g in gates), *(w_h[g] for g in gates), proj_w], hybrid, f"{what}weights")
    for k in peep:
        if c.has(k) and not (hybrid and c.tensor(k).dtype is I8):
            c.typed(k, (F32,), f"{what}peephole weights")
        elif c.has(k):
            _int8_weights(c, k, f"{what}peephole weights")
    for k in states:
        c.typed(k, (F32,), f"{what}state")
    return out


def _clips(c) -> None:
    for f in ("cell_clip", "proj_clip"):
        v = getattr(c.opts, f)
        if not (math.isfinite(v) and v >= 0):
            raise c.fail(f"options.{f} is {v}; a finite value >= 0 expected (0: no clipping)")


def _lstm(c):
    """LSTM (the full kernel): a [batch, input] input, the unidirectional LSTM's 20 or 24 slots."""
    o = c.opts
    if o.kernel_type is not opt.LSTMKernelType.FULL:
        raise c.fail(f"options.kernel_type is {getattr(o.kernel_type, 'name', o.kernel_type)}; only the FULL "
                     f"kernel is supported (the BASIC one is a uint8 4-output cell)")
    n = len(c.op.inputs)
    if n not in (20, 24):
        raise c.fail(f"has {n} inputs; the full LSTM kernel takes 20, or 24 with layer normalization")
    c.arity(1, n, 1)
    check_activation(c)
    _clips(c)
    c.typed(0, (F32,), "input")
    batch, features = c.rank(0, 2)
    hybrid = _is_hybrid(c, 4)
    out = _lstm_cell(c, 1, (18, 19), batch, features, norm=range(20, n), hybrid=hybrid)
    check_outs(c, F32)
    return [(batch, out)]


def _bidirectional_lstm(c):
    o = c.opts
    n = len(c.op.inputs)
    if n != 48:
        raise c.fail(f"has {n} inputs; BIDIRECTIONAL_SEQUENCE_LSTM takes 48")
    c.arity(1, 48, None)
    outs = 1 if o.merge_outputs else 2
    if len(c.op.outputs) != outs:
        raise c.fail(f"has {len(c.op.outputs)} outputs; {outs} expected with merge_outputs {bool(o.merge_outputs)}")
    check_activation(c)
    _clips(c)
    c.typed(0, (F32,), "input")
    x = c.rank(0, 3)
    steps, batch = (x[0], x[1]) if o.time_major else (x[1], x[0])
    hybrid = _is_hybrid(c, 4)
    if hybrid != _is_hybrid(c, 21):
        raise c.fail(f"{c.name(4)} and {c.name(21)} differ in type; both directions take the same weights type")
    aux_w = [k for k in range(40, 48) if c.has(k)]
    with_weights = c.has(41)
    aux_width = _aux_input(c, x, 39, with_weights, own_width=True) if c.has(39) else x[2]
    if aux_w:
        if not c.has(39):
            raise c.fail("auxiliary input weights without an auxiliary input (input 39)")
        for base in (40, 44):
            for g in range(4):
                fw_gate = c.has(1 + g) if base == 40 else c.has(18 + g)
                if c.has(base + g) != fw_gate:
                    raise c.fail(f"auxiliary weights {c.name(base + g)} must be present exactly when the gate's "
                                 f"input weights are")
                if c.has(base + g):
                    units = c.shape(2 if base == 40 else 19)[0]
                    _need(c, base + g, (units, aux_width), "auxiliary input weights")
                    _weights(c, (base + g,), hybrid, "auxiliary input weights")
    fw = _lstm_cell(c, 1, (35, 36), batch, x[2], hybrid=hybrid, what="forward ")
    bw = _lstm_cell(c, 18, (37, 38), batch, x[2], hybrid=hybrid, what="backward ")
    # LiteRT checks both directions' tensors against one cell size and one output size.
    if (c.shape(2)[0], fw) != (c.shape(19)[0], bw):
        raise c.fail(f"the forward cell has {c.shape(2)[0]} units and {fw} outputs, the backward one "
                     f"{c.shape(19)[0]} and {bw}; LiteRT requires them equal")
    check_outs(c, F32)
    shape = (lambda u: (steps, batch, u)) if o.time_major else (lambda u: (batch, steps, u))
    return [shape(fw + bw)] if o.merge_outputs else [shape(fw), shape(bw)]


# -- SVDF -------------------------------------------------------------------------------------------


def _svdf(c):
    c.arity(3, 5, 1)
    if len(c.op.inputs) != 5:
        raise c.fail(f"has {len(c.op.inputs)} inputs; SVDF takes 5 (the bias, input 3, may be absent)")
    c.tensor(4)
    check_activation(c)
    batch, features = c.rank(0, 2)
    filters, got = c.rank(1, 2, positive=True)
    if got != features:
        raise c.fail(f"{c.name(1)} (feature weights) has {got} columns for {features} input features")
    rank = c.option("rank", 1)
    if filters % rank:
        raise c.fail(f"{c.name(1)} has {filters} filters, not a multiple of options.rank {rank}")
    units = filters // rank
    tf, memory = c.rank(2, 2, positive=True)
    if tf != filters:
        raise c.fail(f"{c.name(2)} (time weights) has {tf} rows for {filters} filters")
    if c.has(3):
        _need(c, 3, (units,), "bias")
    _variable(c, 4, "state")
    _need(c, 4, (batch, memory * filters), "state")
    x = c.typed(0, (F32, I8), "input")
    if x is I8:
        _svdf_int8(c)
    elif _is_hybrid(c, 1):
        _int8_weights(c, 1, "feature weights")
        _int8_weights(c, 2, "time weights")
        for k, what in ((3, "bias"), (4, "state")):
            if c.has(k):
                c.typed(k, (F32,), what)
        check_outs(c, F32)
    else:
        for k, what in ((1, "feature weights"), (2, "time weights"), (3, "bias"), (4, "state")):
            if c.has(k):
                c.typed(k, (F32,), what)
        check_outs(c, F32)
    return [(batch, units)]


def _svdf_int8(c) -> None:
    """Full-integer SVDF: int8 input, feature weights and output, int16 time weights and state,
    int32 bias. LiteRT requires the RELU activation (and then applies none)."""
    if c.opts.fused_activation_function is not opt.Activation.RELU:
        raise c.fail(f"options.fused_activation_function is {c.opts.fused_activation_function.name}; the 8-bit "
                     f"SVDF kernel takes RELU only")
    for k, dtype, what in ((1, I8, "feature weights"), (2, I16, "time weights"), (4, I16, "state")):
        c.typed(k, (dtype,), what)
    if c.has(3):
        c.typed(3, (I32,), "bias")
    check_outs(c, I8)
    c.quantized(0, 1, 2, 4, "out")


RULES = {
    OpType.RNN: _rnn, OpType.UNIDIRECTIONAL_SEQUENCE_RNN: _sequence_rnn,
    OpType.BIDIRECTIONAL_SEQUENCE_RNN: _bidirectional_rnn, OpType.LSTM: _lstm,
    OpType.BIDIRECTIONAL_SEQUENCE_LSTM: _bidirectional_lstm, OpType.SVDF: _svdf,
}


def svdf_int16_tensors(graph) -> frozenset[int]:
    """The int16 tensors an 8-bit SVDF reads by design (its time weights and state): quantized
    int16 that is not a 16x8 activation."""
    found = set()
    for op in graph.ops:
        if op.type is OpType.SVDF and op.inputs and op.inputs[0] >= 0 and graph.tensors[op.inputs[0]].dtype is I8:
            found.update(t for k, t in enumerate(op.inputs) if k in (2, 4) and t >= 0 and graph.tensors[t].dtype is I16)
    return frozenset(found)
