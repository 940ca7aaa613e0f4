"""TFLite's integer arithmetic as vectorised NumPy: multipliers, gemmlowp rounding, requantisation.

Everything follows tflite/kernels/internal/common.h and quantization_util.cc in the default
("double rounding") build, as LiteRT's reference kernels are compiled.
"""

from __future__ import annotations

import numpy as np

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
RANGES = {np.dtype(np.int8): (-128, 127), np.dtype(np.uint8): (0, 255), np.dtype(np.int16): (-32768, 32767),
          np.dtype(np.int32): (INT32_MIN, INT32_MAX)}


def round_half_away(x) -> np.ndarray:
    """std::round (TfLiteRound): halves go away from zero, unlike np.round's half-to-even.
    Exact for float32 inputs widened to float64, and for doubles below 2**52."""
    x = np.asarray(x, np.float64)
    r = np.floor(np.abs(x))
    r += (np.abs(x) - r) >= 0.5
    return np.copysign(r, x)


def quantize_multiplier(real) -> tuple[np.ndarray, np.ndarray]:
    """QuantizeMultiplier: real ~= M * 2**(shift - 31), M in [2**30, 2**31) (elementwise)."""
    real = np.asarray(real, np.float64)
    q, shift = np.frexp(real)
    m = round_half_away(q * 2.0**31).astype(np.int64)
    carry = m == 2**31
    m = np.where(carry, 2**30, m)
    shift = np.where(carry, shift + 1, shift).astype(np.int64)
    tiny = (shift < -31) | (real == 0)
    return np.where(tiny, 0, m), np.where(tiny, 0, shift)


def srdhm(a, b) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul: (a*b + 2**30) >> 31, saturating MIN*MIN to MAX."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    out = a * b
    out += 1 << 30
    out >>= 31
    if np.any(b == INT32_MIN):  # multipliers never are; skip the mask pass in the common case
        out = np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, out)
    return out


def rdbpot(x, exponent) -> np.ndarray:
    """RoundingDivideByPOT: x / 2**exponent rounded half away from zero (0 <= exponent <= 31)."""
    x = np.asarray(x, np.int64)
    e = np.asarray(exponent, np.int64)
    if not np.any(e):
        return x
    if np.all(e > 0):
        # (x + 2**(e-1) - [x < 0]) >> e rounds half away from zero in four passes.
        out = x + (np.int64(1) << (e - 1))
        out -= x < 0
        out >>= e
        return out
    mask = (np.int64(1) << e) - 1
    threshold = (mask >> 1) + (x < 0)
    out = x >> e
    out += (x & mask) > threshold
    return out


def wrap32(x) -> np.ndarray:
    """Two's-complement int32 wrap-around, as C's int32 arithmetic does."""
    return np.asarray(x, np.int64).astype(np.int32).astype(np.int64)


def mbqm(x, m, shift) -> np.ndarray:
    """MultiplyByQuantizedMultiplier: the pre-shift, a rounding high multiply, a rounding shift."""
    shift = np.asarray(shift, np.int64)
    x = np.asarray(x, np.int64)
    if np.any(shift > 0):  # the int32 pre-shift can wrap; most multipliers are < 1 and skip it
        x = wrap32(x << np.maximum(shift, 0))
    return rdbpot(srdhm(x, m), np.maximum(-shift, 0))


def activation_range(act, scale: float, zero_point: int, dtype) -> tuple[int, int]:
    """CalculateActivationRangeQuantized: the fused activation as integer clamp bounds."""
    from runtime.options import Activation

    qmin, qmax = RANGES[np.dtype(dtype)]

    def q(v: float) -> int:
        return zero_point + int(round_half_away(np.float32(v) / np.float32(scale)))

    if act is Activation.RELU:
        return max(qmin, q(0.0)), qmax
    if act is Activation.RELU6:
        return max(qmin, q(0.0)), min(qmax, q(6.0))
    if act is Activation.RELU_N1_TO_1:
        return max(qmin, q(-1.0)), min(qmax, q(1.0))
    return qmin, qmax


def quantize(x, scale, zero_point, dtype, axis: int | None = None) -> np.ndarray:
    """float -> integer as TFLite's QUANTIZE: float32 division, ties away from zero, clamp."""
    scale = np.asarray(scale, np.float32)
    zero_point = np.asarray(zero_point, np.int64)
    if axis is not None and scale.size > 1:
        shape = [1] * np.ndim(x)
        shape[axis] = -1
        scale, zero_point = scale.reshape(shape), zero_point.reshape(shape)
    q = round_half_away(np.asarray(x, np.float32) / scale) + zero_point
    lo, hi = RANGES[np.dtype(dtype)]
    return np.clip(q, lo, hi).astype(dtype)


def requantizer(m, shift, bias=None, zero_point: int = 0, acc_bound: int = 2**31):
    """A fused MBQM for accumulators: returns f(acc) = MBQM(acc + bias, m, shift) + zero_point.

    For the usual multipliers (< 1, so no pre-shift) the high multiply and the rounding shift
    fold into one: floor((P + 2**30) / 2**31) rounded half away at 2**e equals
    (P + 2**30 + h*2**31 - [P < -2**30]*2**31) >> (31 + e) with h = 2**(e-1), because nested
    floor-divisions by powers of two combine. Bias and zero point ride along as multiples.
    Falls back to the step-by-step form when a pre-shift is needed or int64 could overflow.
    """
    m = np.asarray(m, np.int64)
    shift = np.asarray(shift, np.int64)
    b = np.zeros_like(m) if bias is None else np.asarray(bias, np.int64)
    e = np.maximum(-shift, 0)
    if np.any(shift > 0) or np.any(m == INT32_MIN) or np.any(e > 30):
        return lambda acc: mbqm(np.asarray(acc, np.int64) + b, m, shift) + zero_point
    # Python integers for the overflow check: every term of the fused sum must fit in int64.
    worst = (acc_bound * int(np.max(m, initial=0)) + int(np.max(np.abs(b * m), initial=0))
             + 2**30 + 2**61 + abs(zero_point) * 2 ** (31 + int(np.max(e, initial=0))))
    if worst >= 2**62:
        return lambda acc: mbqm(np.asarray(acc, np.int64) + b, m, shift) + zero_point
    half = np.where(e > 0, np.int64(1) << np.maximum(e - 1, 0), 0)
    total = 31 + e
    base = b * m + (1 << 30) + (half << 31) + (np.int64(zero_point) << total)
    threshold = (half << 31) + (np.int64(zero_point) << total)
    down = np.where(e > 0, np.int64(1) << 31, 0)

    def apply(acc: np.ndarray) -> np.ndarray:
        q = np.asarray(acc).astype(np.int64)
        q *= m
        q += base
        np.subtract(q, down, out=q, where=q < threshold)
        q >>= total
        return q

    return apply
