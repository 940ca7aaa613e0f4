"""Hybrid UNIDIRECTIONAL_SEQUENCE_LSTM step (float activations, int8 weights), bit-exact with LiteRT's x86 kernel."""

from __future__ import annotations

import numpy as np

from runtime.ops.base import Node, activate
from runtime.ops.hybrid import matvec, quantize_rows
from runtime.ops.lstm import BIAS, C_STATE, H_STATE, NORM, PEEP, PROJ_B, PROJ_W, W_H, W_X
from runtime.ir.options import Activation

F32 = np.float32


# -- UNIDIRECTIONAL_SEQUENCE_LSTM (kernels/lstm_eval.cc: LstmStepHybrid) ----------------------------

# Eigen's float tanh and logistic, as LiteRT's tensor_utils::ApplyActivationToVector evaluates them
# (Eigen built for SSE without FMA: 4-float packets, multiply and add rounded separately).

def _madd(a, b, c):
    return (a * b).astype(F32) + c


def _polevl(x: np.ndarray, coeffs) -> np.ndarray:
    p = np.full_like(x, F32(coeffs[0]))
    for c in coeffs[1:]:
        p = _madd(p, x, F32(c))
    return p


def eigen_tanh(a: np.ndarray) -> np.ndarray:
    """Eigen's ptanh_float (EIGEN_FAST_MATH): a [9/8] rational on x clamped to the point where it
    reaches 1; the scalar path uses the same formula, so element position does not matter."""
    x = np.clip(a, F32(-7.90738964080810547), F32(7.90738964080810547)).astype(F32)
    x2 = (x * x).astype(F32)
    p = _polevl(x2, (1.394553628e-8, 2.102733560e-5, 3.520756727e-3, 1.340216100e-1))
    q = _polevl(x2, (8.015776984e-7, 3.326951409e-4, 2.597254514e-2, 4.673548340e-1, 1.0))
    return (_madd((x2 * x).astype(F32), p, x) / q).astype(F32)


def _logistic_packet(a: np.ndarray) -> np.ndarray:
    """Eigen's scalar_logistic_op<float>::packetOp: exp(x/2) by Cephes range reduction and a
    degree-5 polynomial, squared, then e / (1 + e)."""
    x = (np.minimum(a, F32(16.6355324)) * F32(0.5)).astype(F32)
    m = np.floor(_madd(x, F32(1.44269504088896341), F32(0.5)))
    r = _madd(m, F32(-0.693359375), x)
    r = _madd(m, F32(2.12194440e-4), r)
    r2 = (r * r).astype(F32)
    p_even = _madd(r2, F32(4.1898667812347412109375e-2), F32(0.49999141693115234375))
    p_odd = _madd(r2, F32(8.33471305668354034423828125e-3), F32(0.16666877269744873046875))
    p = _madd(r2, _madd(r, p_odd, p_even), (r + F32(1)).astype(F32))
    e = np.ldexp(p, m.astype(np.int32)).astype(F32)
    e = (e * e).astype(F32)
    return np.where(a < F32(-104), F32(0), (e / (F32(1) + e)).astype(F32))


# glibc's expf (since 2.28, from ARM's optimized-routines): x*32/ln2 = k + r in double, a table
# for 2^(k%32 / 32), a cubic for 2^(r/32); exact in NumPy float64.
_EXP_N = 32
_EXP_SHIFT = float.fromhex("0x1.8p+52")
_EXP_INV_LN2N = float.fromhex("0x1.71547652b82fep+0") * _EXP_N
_EXP_C = (float.fromhex("0x1.c6af84b912394p-5") / _EXP_N**3, float.fromhex("0x1.ebfce50fac4f3p-3") / _EXP_N**2,
          float.fromhex("0x1.62e42ff0c52d6p-1") / _EXP_N)
_EXP_TABLE = (np.exp2(np.arange(_EXP_N) / _EXP_N).view(np.uint64)
              - (np.arange(_EXP_N, dtype=np.uint64) << np.uint64(47)))


def expf(x: np.ndarray) -> np.ndarray:
    """std::exp(float) as glibc computes it (LiteRT's scalar Eigen path calls it); only for the
    range logistic needs, x <= 16.64, where no overflow or subnormal handling arises."""
    z = _EXP_INV_LN2N * x.astype(np.float64)
    kd = (z + _EXP_SHIFT) - _EXP_SHIFT
    ki = (kd + _EXP_SHIFT).view(np.uint64)
    r = z - kd
    s = (_EXP_TABLE[(ki % np.uint64(_EXP_N)).astype(np.intp)] + (ki << np.uint64(47))).view(np.float64)
    y = (_EXP_C[0] * r + _EXP_C[1]) * (r * r) + (_EXP_C[2] * r + 1)
    return (y * s).astype(F32)


def _logistic_scalar(a: np.ndarray) -> np.ndarray:
    """The scalar operator(): e = std::exp(min(x, cutoff)), then e / (1 + e)."""
    e = expf(np.minimum(a, F32(16.6355324)))
    return (e / (F32(1) + e)).astype(F32)


def eigen_logistic(v: np.ndarray, start: int, row_stride: int) -> np.ndarray:
    """Logistic of rows that each begin `start + r * row_stride` floats into a 16-byte-aligned
    buffer: Eigen runs scalar code up to the first aligned element, 4-float packets, then a
    scalar tail, and its scalar and packet formulas round differently."""
    rows, n = v.shape
    head = (-(start + np.arange(rows) * row_stride)) % 4
    head = np.minimum(head, n)
    end = head + ((n - head) // 4) * 4
    j = np.arange(n)
    packet = (j[None, :] >= head[:, None]) & (j[None, :] < end[:, None])
    return np.where(packet, _logistic_packet(v), _logistic_scalar(v)).astype(F32)


def _lstm_weights(node: Node, ins) -> dict:
    """Per gate: transposed int8 weights, row sums and scales; peepholes dequantized once."""
    def scale_of(k: int) -> F32:
        t = node.input(k)
        if t.dtype.np != np.int8 or t.quant is None or len(t.quant.scale) != 1:
            raise node.fail(f"hybrid LSTM weights '{t.name}' must be int8 with one scale")
        return F32(t.quant.scale[0])

    def make():
        prep = {}
        for name, slots in (("x", W_X), ("h", W_H)):
            for g, k in enumerate(slots):
                if k < len(ins) and ins[k] is not None:
                    wt = np.ascontiguousarray(ins[k].T, dtype=F32)
                    prep[name, g] = (wt, ins[k].astype(np.int64).sum(axis=1), scale_of(k))
        for g, k in enumerate(PEEP):
            if k < len(ins) and ins[k] is not None:
                p = ins[k]
                # VectorScalarMultiply: the int8 peephole weights times their scale, in float32.
                prep["peep", g] = (p.astype(F32) * scale_of(k)).astype(F32) if p.dtype == np.int8 else p
        if PROJ_W < len(ins) and ins[PROJ_W] is not None:
            w = ins[PROJ_W]
            prep["proj"] = (np.ascontiguousarray(w.T, dtype=F32), w.astype(np.int64).sum(axis=1), scale_of(PROJ_W))
        return prep
    return node.cached("lstm_weights", make)


def _row_sum(v: np.ndarray) -> np.ndarray:
    """Sequential float32 sum of each row, left to right (cumsum keeps that order)."""
    return np.cumsum(v, axis=1, dtype=F32)[:, -1]


def _mean_stddev_normalize(v: np.ndarray) -> np.ndarray:
    """PortableMeanStddevNormalization (x86 LiteRT uses the portable one here):
    (v - mean) / sqrt(variance + 1e-8) per row, sums left to right, all in float32."""
    n = F32(v.shape[1])
    mean = (_row_sum(v) / n).astype(F32)
    diff = (v - mean[:, None]).astype(F32)
    var = (_row_sum((diff * diff).astype(F32)) / n).astype(F32)
    return (diff * (F32(1) / np.sqrt((var + F32(1e-8)).astype(F32)))[:, None]).astype(F32)


def unidirectional_sequence_lstm(node: Node, *ins: np.ndarray, aux: np.ndarray | None = None,
                                  aux_weights: tuple | None = None) -> np.ndarray:
    """`aux`, `aux_weights` (per gate: int8 weights and their scale, or None): the auxiliary input
    BIDIRECTIONAL_SEQUENCE_LSTM adds to every gate (runtime/ops/lstm_variants.py); it is quantized
    per step on its own, and its products come between the input's and the recurrent ones."""
    o = node.options
    if o.diagonal_recurrent_tensors:
        raise node.fail("hybrid LSTM with diagonal recurrent weights is not supported")
    arg = lambda k: ins[k] if k < len(ins) else None  # noqa: E731
    x, h, c = ins[0], arg(H_STATE), arg(C_STATE)
    if h is None or c is None:
        raise node.fail("LSTM needs its output-state and cell-state variable tensors")
    prep = _lstm_weights(node, ins)
    cifg = ("x", 0) not in prep
    asym = o.asymmetric_quantize_inputs
    act = o.fused_activation_function
    seq = x if o.time_major else np.swapaxes(x, 0, 1)  # -> [time, batch, features]
    aux_seq = None if aux is None else (aux if o.time_major else np.swapaxes(aux, 0, 1))
    if aux_weights is not None:
        prep = {**prep, **node.cached("lstm_aux_weights", lambda: {
            ("a", g): (np.ascontiguousarray(pair[0].T, dtype=F32), pair[0].astype(np.int64).sum(axis=1), F32(pair[1]))
            for g, pair in enumerate(aux_weights) if pair is not None})}
    h, c = h.astype(F32), c.astype(F32)
    n_batch, n_cell = c.shape
    # Gate scratch offsets in LiteRT's scratch buffer (input gate absent under CIFG): where Eigen's
    # packets start inside each gate depends on them.
    span = n_batch * n_cell
    offset = dict(zip((2, 1, 3), (0, span, 2 * span))) if cifg else \
        dict(zip((0, 2, 1, 3), (0, span, 2 * span, 3 * span)))

    def sigmoid(v: np.ndarray, g: int) -> np.ndarray:
        # Time-major steps activate the whole [batch, cell] block at once; batch-major ones run
        # one batch row at a time, each row n_cell floats further into the buffer.
        if o.time_major:
            return eigen_logistic(v.reshape(1, -1), offset[g], 0).reshape(v.shape)
        return eigen_logistic(v, offset[g], n_cell)

    def cell_act(v: np.ndarray) -> np.ndarray:
        return eigen_tanh(v) if act is Activation.TANH else activate(v.copy(), act)

    outs = []
    for t in range(seq.shape[0]):
        xt = np.ascontiguousarray(seq[t], dtype=F32)
        # Both the input and the output state are quantized per batch row before the gates; an
        # all-zero one is skipped (its products would add exactly 0 anyway).
        qx = quantize_rows(xt, asym) if xt.any() else None
        at = None if aux_seq is None else np.ascontiguousarray(aux_seq[t], dtype=F32)
        qa = quantize_rows(at, asym) if at is not None and at.any() else None
        qh = quantize_rows(h, asym) if h.any() else None

        def gate(g: int, peephole: int | None) -> np.ndarray:
            norm, bias = arg(NORM[g]), arg(BIAS[g])
            acc = np.zeros((n_batch, c.shape[1]), F32) if norm is not None or bias is None \
                else np.tile(bias.astype(F32), (n_batch, 1))
            for src, qv in (("x", qx), ("a", qa), ("h", qh)):
                if qv is not None and (src, g) in prep:
                    wt, rowsum, s = prep[src, g]
                    q, sf, zp = qv
                    acc = matvec(q, wt, rowsum, zp, (sf * s).astype(F32)[:, None], acc)
            if ("peep", peephole) in prep:
                acc = (acc + prep["peep", peephole] * c).astype(F32)
            if norm is not None:
                acc = _mean_stddev_normalize(acc) * norm.astype(F32)
                if bias is not None:
                    acc = (acc + bias).astype(F32)
            return acc

        # Gates in TFLite's order; the input and forget peepholes see the old cell state.
        i = None if cifg else sigmoid(gate(0, 0), 0)
        f = sigmoid(gate(1, 1), 1)
        z = cell_act(gate(2, None))
        c = (f * c).astype(F32)
        c = (c + z * ((F32(1) - f) if cifg else i)).astype(F32)
        if o.cell_clip > 0:
            c = np.clip(c, -F32(o.cell_clip), F32(o.cell_clip))
        og = sigmoid(gate(3, 2), 3)  # its peephole sees the updated cell state
        hidden = (og * cell_act(c)).astype(F32)
        if "proj" in prep:
            pb = arg(PROJ_B)
            h = np.zeros((n_batch, prep["proj"][0].shape[1]), F32) if pb is None \
                else np.tile(pb.astype(F32), (n_batch, 1))
            if hidden.any():
                wt, rowsum, s = prep["proj"]
                q, sf, zp = quantize_rows(hidden, asym)
                h = matvec(q, wt, rowsum, zp, (sf * s).astype(F32)[:, None], h)
            if o.proj_clip > 0:
                h = np.clip(h, -F32(o.proj_clip), F32(o.proj_clip))
        else:
            h = hidden
        outs.append(h)
    # The state tensors are variables: TFLite carries them over to the next invoke.
    ins[H_STATE][...] = h
    ins[C_STATE][...] = c
    out = np.stack(outs)
    return out if o.time_major else np.ascontiguousarray(np.swapaxes(out, 0, 1))
