"""SVDF (tflite/kernels/svdf.cc, reference/svdf.h): a rank-r factorised fully connected layer with a
memory of past feature activations, kept in a variable state tensor across invokes.

Per invoke: the state [batch, filters * memory] (each filter's memory contiguous) shifts one step
to the left, the newest column takes W_feature x, each filter's memory is dotted with its row of
W_time, the rank consecutive filters of a unit are summed, then bias and activation.
Float32, hybrid (int8 feature weights, per-row input quantization; the time weights dequantized and
the time products done in float) and full integer (int8 input and output, int16 state and time
weights, int32 bias).
"""

from __future__ import annotations

import numpy as np

from runtime.ops import quant
from runtime.ops.base import Node, activate
from runtime.ops.hybrid import matvec, quantize_rows
from runtime.ops.hybrid_lstm import eigen_tanh
from runtime.ops.qconv import exact_matmul
from runtime.ir.options import Activation

F32 = np.float32


def _shift(state: np.ndarray, batch: int, filters: int, memory: int) -> np.ndarray:
    """The state as [batch, filters, memory] with every filter's memory moved one step older.
    (LiteRT shifts the whole buffer by one element; the element each filter receives from its
    neighbour lands in the newest slot, which is overwritten next.)"""
    s = state.reshape(batch, filters, memory)
    s[:, :, :-1] = s[:, :, 1:].copy()
    return s


def _time_sum(s: np.ndarray, w_time: np.ndarray, rank: int, dtype) -> np.ndarray:
    """Each filter's memory dotted with its time weights, then the rank filters of a unit summed."""
    per_filter = np.einsum("bfm,fm->bf", s.astype(dtype), w_time.astype(dtype))
    batch, filters = per_filter.shape
    return per_filter.reshape(batch, filters // rank, rank).sum(axis=2, dtype=dtype)


def _finish(node: Node, out: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    if bias is not None:
        out = out + bias.astype(F32)
    act = node.options.fused_activation_function
    return (eigen_tanh(out.astype(F32)) if act is Activation.TANH else activate(out.astype(F32), act)).astype(F32)


def svdf(node: Node, x, w_feature, w_time, bias=None, state=None) -> np.ndarray:
    rank = node.options.rank
    batch, filters, memory = x.shape[0], w_feature.shape[0], w_time.shape[1]
    s = _shift(state, batch, filters, memory)
    s[:, :, -1] = x.astype(F32) @ w_feature.T.astype(F32)
    return _finish(node, _time_sum(s, w_time, rank, F32), bias)


def svdf_hybrid(node: Node, x, w_feature, w_time, bias=None, state=None) -> np.ndarray:
    """EvalHybridSVDF: the feature product is the hybrid matrix-vector product (acc starts at 0);
    the time weights are int8 * scale in float32, computed once."""
    o = node.options
    batch, filters, memory = x.shape[0], w_feature.shape[0], w_time.shape[1]

    def prep():
        fscale, tscale = (F32(node.input(k).quant.scale[0]) for k in (1, 2))
        wt = np.ascontiguousarray(w_feature.T, dtype=F32)
        return wt, w_feature.astype(np.int64).sum(axis=1), fscale, (w_time.astype(F32) * tscale).astype(F32)

    wt, rowsum, fscale, w_time_f = node.cached("svdf", prep)
    s = _shift(state, batch, filters, memory)
    acc = np.zeros((batch, filters), F32)
    rows = np.ascontiguousarray(x, dtype=F32)
    if rows.any():   # an all-zero input leaves the products at 0, as LiteRT skips them
        q, sf, zp = quantize_rows(rows, bool(o.asymmetric_quantize_inputs))
        acc = matvec(q, wt, rowsum, zp, (sf * fscale).astype(F32)[:, None], acc)
    s[:, :, -1] = acc
    return _finish(node, _time_sum(s, w_time_f, o.rank, F32), bias)


def svdf_int8(node: Node, x, w_feature, w_time, bias=None, state=None) -> np.ndarray:
    """EvalIntegerSVDF: the feature sums rescaled into the int16 state (saturating), int32 time
    sums, bias, then the output rescale. LiteRT requires a RELU activation here but applies none:
    the result is only clamped to int8."""
    batch, filters, memory = x.shape[0], w_feature.shape[0], w_time.shape[1]
    tin, tw, ts, tt, tout = node.input(0), node.input(1), node.input(4), node.input(2), node.output()
    # Prepare: both effective scales in double from the float32 scales.
    m1, sh1 = quant.quantize_multiplier(float(tin.quant.scale[0]) * float(tw.quant.scale[0])
                                        / float(ts.quant.scale[0]))
    m2, sh2 = quant.quantize_multiplier(float(ts.quant.scale[0]) * float(tt.quant.scale[0])
                                        / float(tout.quant.scale[0]))
    s = _shift(state, batch, filters, memory)
    centred = x.astype(np.int64) - int(tin.quant.zero_point[0])
    dot = exact_matmul(128 * 255)(centred.astype(F32), np.ascontiguousarray(w_feature.T, dtype=F32)).astype(np.int64)
    s[:, :, -1] = np.clip(quant.mbqm(quant.wrap32(dot), m1, sh1), -32768, 32767)
    per_filter = np.einsum("bfm,fm->bf", s.astype(np.int64), w_time.astype(np.int64))
    acc = per_filter.reshape(batch, filters // node.options.rank, node.options.rank).sum(axis=2)
    if bias is not None:
        acc = acc + bias.astype(np.int64)
    acc = quant.wrap32(acc)   # int32 sums wrap
    out = quant.mbqm(acc, m2, sh2) + int(tout.quant.zero_point[0])
    return np.clip(out, -128, 127).astype(np.int8)
