"""UNIDIRECTIONAL_SEQUENCE_LSTM in float32: gates by BLAS per time step, state kept in variable tensors."""

from __future__ import annotations

import numpy as np

from runtime.ops.base import Node, activate
from runtime.ops.elementwise import logistic

# Input slots (tflite/kernels/lstm_shared.h).
W_X = (1, 2, 3, 4)        # input-to-{input, forget, cell, output} weights
W_H = (5, 6, 7, 8)        # recurrent-to-{input, forget, cell, output} weights
PEEP = (9, 10, 11)        # cell-to-{input, forget, output} peepholes
BIAS = (12, 13, 14, 15)
PROJ_W, PROJ_B = 16, 17
H_STATE, C_STATE = 18, 19
NORM = (20, 21, 22, 23)


def _layer_norm(v: np.ndarray, coeff: np.ndarray | None) -> np.ndarray:
    if coeff is None:
        return v
    mean = v.mean(axis=-1, keepdims=True)
    var = ((v - mean) ** 2).mean(axis=-1, keepdims=True)
    return (v - mean) / np.sqrt(var + np.float32(1e-8)) * coeff


def _sigmoid(node: Node, v: np.ndarray) -> np.ndarray:
    return logistic(node, v)


def unidirectional_sequence_lstm(node: Node, *ins: np.ndarray) -> np.ndarray:
    o = node.options
    arg = lambda k: ins[k] if k < len(ins) else None  # noqa: E731
    x, h, c = ins[0], arg(H_STATE), arg(C_STATE)
    if h is None or c is None:
        raise node.fail("LSTM needs its output-state and cell-state variable tensors")
    seq = x if o.time_major else np.swapaxes(x, 0, 1)  # -> [time, batch, features]
    cifg = arg(W_X[0]) is None
    outs = []
    for t in range(seq.shape[0]):
        g = []
        for k in range(4):
            if k == 0 and cifg:
                g.append(None)
                continue
            v = seq[t] @ arg(W_X[k]).T + h @ arg(W_H[k]).T
            if k in (0, 1) and arg(PEEP[k]) is not None:
                v = v + c * arg(PEEP[k])
            v = _layer_norm(v, arg(NORM[k]))
            g.append(v + arg(BIAS[k]) if arg(BIAS[k]) is not None else v)
        f = _sigmoid(node, g[1])
        i = np.float32(1) - f if cifg else _sigmoid(node, g[0])
        c_new = f * c + i * activate(g[2].copy(), o.fused_activation_function)
        if o.cell_clip > 0:
            c_new = np.clip(c_new, -o.cell_clip, o.cell_clip)
        go = g[3] + c_new * arg(PEEP[2]) if arg(PEEP[2]) is not None else g[3]
        h_new = _sigmoid(node, go) * activate(c_new.copy(), o.fused_activation_function)
        if arg(PROJ_W) is not None:
            h_new = h_new @ arg(PROJ_W).T + (arg(PROJ_B) if arg(PROJ_B) is not None else 0)
            if o.proj_clip > 0:
                h_new = np.clip(h_new, -o.proj_clip, o.proj_clip)
        h, c = h_new.astype(np.float32), c_new.astype(np.float32)
        outs.append(h)
    # The state tensors are variables: TFLite carries them over to the next invoke.
    ins[H_STATE][...] = h
    ins[C_STATE][...] = c
    out = np.stack(outs)
    return out if o.time_major else np.ascontiguousarray(np.swapaxes(out, 0, 1))
