"""8-bit SOFTMAX with gemmlowp's fixed-point exp and reciprocal, as TFLite's reference kernel (§2.10)."""

from __future__ import annotations

import numpy as np

from runtime.ops import quant
from runtime.ops.base import Node

_DIFF_INT_BITS = 5      # kScaledDiffIntegerBits
_ACC_INT_BITS = 12      # kAccumulationIntegerBits
_EXP_BARREL = ((24, 1672461947), (25, 1302514674), (26, 790015084), (27, 290630308), (28, 39332535),
               (29, 720401), (30, 242))


def _mul(a, b):
    return quant.srdhm(a, b)


def _sat_shl(v, e: int):
    limit = (1 << (31 - e)) - 1
    return np.where(v > limit, quant.INT32_MAX, np.where(v < -limit - 1, quant.INT32_MIN, v << e))


def exp_on_negative_values(a: np.ndarray) -> np.ndarray:
    """exp(a) for a <= 0 in Q5.26, result in Q0.31 (gemmlowp exp_on_negative_values)."""
    quarter = 1 << 24
    r = (a & (quarter - 1)) - quarter
    x = (r << 5) + (1 << 28)
    x2 = _mul(x, x)
    x3 = _mul(x2, x)
    x4 = _mul(x2, x2)
    t = quant.rdbpot(_mul(quant.rdbpot(x4, 2) + x3, 715827883) + x2, 1)
    c = 1895147668
    res = quant.wrap32(c + _mul(c, x + t))
    rem = r - a
    for bit, k in _EXP_BARREL:
        res = np.where(rem & (1 << bit), _mul(res, k), res)
    return np.where(a == 0, quant.INT32_MAX, res)


def one_over_one_plus_x(s: np.ndarray) -> np.ndarray:
    """1 / (1 + s) for s in [0, 1) in Q0.31, by three Newton-Raphson steps in Q2.29."""
    half = (s + (1 << 31)) >> 1
    x = 1515870810 + _mul(half, -1010580540)
    for _ in range(3):
        x = x + _sat_shl(_mul(x, (1 << 29) - _mul(half, x)), 2)
    return _sat_shl(x, 1)


def softmax(node: Node, q: np.ndarray) -> np.ndarray:
    def params():
        s_in = np.float64(node.input(0).quant.scale[0])
        beta = np.float64(np.float32(node.options.beta))
        real = min(beta * s_in * (1 << (31 - _DIFF_INT_BITS)), (1 << 31) - 1.0)
        m, lsh = (int(v) for v in quant.quantize_multiplier(real))
        radius = int(np.floor(((1 << _DIFF_INT_BITS) - 1) * (1 << (31 - _DIFF_INT_BITS)) / (1 << lsh)))
        return m, lsh, -radius

    m, lsh, diff_min = node.cached("softmax", params)
    x = q.astype(np.int64)
    d = x - x.max(axis=-1, keepdims=True)
    live = d >= diff_min
    e = exp_on_negative_values(_mul(d << lsh, m))
    total = quant.wrap32(np.sum(np.where(live, quant.rdbpot(e, _ACC_INT_BITS), 0), axis=-1, keepdims=True))
    headroom = 32 - np.floor(np.log2(total.astype(np.float64))).astype(np.int64) - 1  # clz32, total > 0
    bits_over_unit = _ACC_INT_BITS - headroom
    shifted = quant.wrap32((total << headroom) - (1 << 31))
    recip = one_over_one_plus_x(shifted)
    lo, hi = quant.RANGES[q.dtype]
    out = quant.rdbpot(_mul(recip, e), bits_over_unit + 31 - 8) + lo
    return np.where(live, np.clip(out, lo, hi), lo).astype(q.dtype)
