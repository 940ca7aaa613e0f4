"""RNN, UNIDIRECTIONAL_SEQUENCE_RNN and BIDIRECTIONAL_SEQUENCE_RNN: h = act(W x [+ W_aux aux] + R h + b)
per step, the hidden state kept in variable tensors across invokes; float32 and hybrid (int8 weights).

Both paths follow tflite/kernels/internal/kernel_utils.cc (RnnBatchStep): the output starts as the
bias, each product is added to it in turn, then the fused activation is applied by
tensor_utils::ApplyActivationToVector (Eigen's tanh for TANH, so runtime/ops/hybrid_lstm.py's eigen_tanh).
The hybrid step quantizes the input and the hidden state per batch row, as the hybrid LSTM does.
"""

from __future__ import annotations

import numpy as np

from runtime.ops.base import Node, activate
from runtime.ops.hybrid import matvec, quantize_rows
from runtime.ops.hybrid_lstm import eigen_tanh
from runtime.ir.options import Activation

F32 = np.float32


def _activation(v: np.ndarray, act: Activation) -> np.ndarray:
    return eigen_tanh(v) if act is Activation.TANH else activate(v, act)


# -- one cell: weights prepared once, then a step function (x, aux, h) -> new h ---------------------

class _FloatCell:
    def __init__(self, w: np.ndarray, r: np.ndarray, b: np.ndarray, w_aux: np.ndarray | None):
        self.wt, self.rt, self.b = w.T.astype(F32), r.T.astype(F32), b.astype(F32)
        self.aux_t = None if w_aux is None else w_aux.T.astype(F32)

    def __call__(self, x: np.ndarray, aux: np.ndarray | None, h: np.ndarray, act: Activation) -> np.ndarray:
        acc = np.tile(self.b, (len(x), 1))
        acc += x @ self.wt
        if self.aux_t is not None:
            acc += aux @ self.aux_t
        acc += h @ self.rt
        return _activation(acc, act)


class _HybridCell:
    """int8 weights, one scale each (their params.scale); inputs quantized per row at run time."""

    def __init__(self, node: Node, slots: tuple[int, int, int | None], w, r, b, w_aux, asymmetric: bool):
        def prep(k: int, m: np.ndarray):
            scale = F32(node.input(k).quant.scale[0])
            return np.ascontiguousarray(m.T, dtype=F32), m.astype(np.int64).sum(axis=1), scale

        self.w, self.r = prep(slots[0], w), prep(slots[1], r)
        self.aux = None if w_aux is None else prep(slots[2], w_aux)
        self.b, self.asym = b.astype(F32), asymmetric

    def _add(self, acc: np.ndarray, v: np.ndarray, prepared) -> np.ndarray:
        # An all-zero operand is skipped, as LiteRT does (its products would add exactly 0).
        if not v.any():
            return acc
        wt, rowsum, scale = prepared
        q, sf, zp = quantize_rows(np.ascontiguousarray(v, dtype=F32), self.asym)
        return matvec(q, wt, rowsum, zp, (sf * scale).astype(F32)[:, None], acc)

    def __call__(self, x: np.ndarray, aux: np.ndarray | None, h: np.ndarray, act: Activation) -> np.ndarray:
        acc = np.tile(self.b, (len(x), 1))
        acc = self._add(acc, x, self.w)
        if self.aux is not None:
            acc = self._add(acc, aux, self.aux)
        acc = self._add(acc, h, self.r)
        return _activation(acc, act)


def _cell(node: Node, key: str, slots: tuple[int, int, int | None], w, r, b, w_aux, hybrid: bool):
    """Hybrid weights are constants (the checks require it), so they are prepared once; float
    weights may be run-time tensors and are read afresh."""
    if not hybrid:
        return _FloatCell(w, r, b, w_aux)
    return node.cached(key, lambda: _HybridCell(node, slots, w, r, b, w_aux,
                                                bool(node.options.asymmetric_quantize_inputs)))


def _run(cell, seq: np.ndarray, aux: np.ndarray | None, h: np.ndarray, act: Activation,
         reverse: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Steps over a time-major [time, batch, features] sequence; (outputs, last state)."""
    steps = range(seq.shape[0] - 1, -1, -1) if reverse else range(seq.shape[0])
    out = np.empty((seq.shape[0], *h.shape), F32)
    h = h.astype(F32)
    for t in steps:
        h = cell(seq[t], None if aux is None else aux[t], h, act).astype(F32)
        out[t] = h
    return out, h


def _time_major(x: np.ndarray, time_major: bool) -> np.ndarray:
    return x if time_major else np.swapaxes(x, 0, 1)


# -- the ops ----------------------------------------------------------------------------------------

def _rnn(node: Node, x, w, r, b, h, hybrid: bool) -> np.ndarray:
    """RNN (tflite/kernels/basic_rnn.cc): one step over a [batch, input] input."""
    cell = _cell(node, "cell", (1, 2, None), w, r, b, None, hybrid)
    out = cell(x.astype(F32), None, h.astype(F32), node.options.fused_activation_function).astype(F32)
    h[...] = out  # the state is a variable: TFLite carries it over to the next invoke
    return out


def rnn(node: Node, x, w, r, b, h) -> np.ndarray:
    return _rnn(node, x, w, r, b, h, hybrid=False)


def rnn_hybrid(node: Node, x, w, r, b, h) -> np.ndarray:
    return _rnn(node, x, w, r, b, h, hybrid=True)


def _sequence_rnn(node: Node, x, w, r, b, h, hybrid: bool) -> np.ndarray:
    """UNIDIRECTIONAL_SEQUENCE_RNN (tflite/kernels/unidirectional_sequence_rnn.cc). Batch-major
    input runs one batch row at a time in LiteRT; rows are independent, so all run at once here."""
    o = node.options
    cell = _cell(node, "cell", (1, 2, None), w, r, b, None, hybrid)
    out, last = _run(cell, _time_major(x, o.time_major).astype(F32), None, h, o.fused_activation_function)
    h[...] = last
    return out if o.time_major else np.ascontiguousarray(np.swapaxes(out, 0, 1))


def unidirectional_sequence_rnn(node: Node, x, w, r, b, h) -> np.ndarray:
    return _sequence_rnn(node, x, w, r, b, h, hybrid=False)


def unidirectional_sequence_rnn_hybrid(node: Node, x, w, r, b, h) -> np.ndarray:
    return _sequence_rnn(node, x, w, r, b, h, hybrid=True)


# BIDIRECTIONAL_SEQUENCE_RNN input slots (tflite/kernels/bidirectional_sequence_rnn.cc).
FW = (1, 2, 3, 4)   # input weights, recurrent weights, bias, hidden state
BW = (5, 6, 7, 8)
AUX, FW_AUX_W, BW_AUX_W = 9, 10, 11


def _bidirectional_rnn(node: Node, ins: tuple, hybrid: bool):
    """Two RNNs over the sequence, the backward one from the last step to the first.

    An auxiliary input with auxiliary weights feeds both cells (stacking with cross links); one
    without them replaces the input of the backward cell. LiteRT's kernel does the latter only for
    time-major input: its batch-major loops read the backward cell's steps from `input` whatever
    the auxiliary input. Its hybrid time-major path also runs the whole forward-then-backward
    pass max_time times over (an outer loop over time around the per-step loops), each pass
    starting from the states the previous one left; both are reproduced, as LiteRT answers."""
    o = node.options
    arg = lambda k: ins[k] if k < len(ins) else None  # noqa: E731
    x, aux = ins[0], arg(AUX)
    w_fw_aux, w_bw_aux = arg(FW_AUX_W), arg(BW_AUX_W)
    use_aux = w_fw_aux is not None
    bw_x = aux if (aux is not None and not use_aux and o.time_major) else x
    real_aux = aux if use_aux else None
    fw = _cell(node, "fw", (FW[0], FW[1], FW_AUX_W), arg(FW[0]), arg(FW[1]), arg(FW[2]), w_fw_aux, hybrid)
    bw = _cell(node, "bw", (BW[0], BW[1], BW_AUX_W), arg(BW[0]), arg(BW[1]), arg(BW[2]), w_bw_aux, hybrid)
    act = o.fused_activation_function
    seq = _time_major(x, o.time_major).astype(F32)
    bw_seq = _time_major(bw_x, o.time_major).astype(F32)
    aux_seq = None if real_aux is None else _time_major(real_aux, o.time_major).astype(F32)
    h_fw, h_bw = ins[FW[3]], ins[BW[3]]
    passes = max(seq.shape[0], 1) if (hybrid and o.time_major) else 1
    for _ in range(passes):
        out_fw, last_fw = _run(fw, seq, aux_seq, h_fw, act)
        h_fw[...] = last_fw
        out_bw, last_bw = _run(bw, bw_seq, aux_seq, h_bw, act, reverse=True)
        h_bw[...] = last_bw
    outs = (np.concatenate([out_fw, out_bw], axis=-1),) if o.merge_outputs else (out_fw, out_bw)
    outs = tuple(v if o.time_major else np.ascontiguousarray(np.swapaxes(v, 0, 1)) for v in outs)
    return outs if len(outs) > 1 else outs[0]


def bidirectional_sequence_rnn(node: Node, *ins: np.ndarray):
    return _bidirectional_rnn(node, ins, hybrid=False)


def bidirectional_sequence_rnn_hybrid(node: Node, *ins: np.ndarray):
    return _bidirectional_rnn(node, ins, hybrid=True)
