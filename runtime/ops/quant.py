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
    """QuantizeMultiplier: real ~= M * 2**(shift - 31), M in [2**30, 2**31) (elementwise).

    An infinite ratio (a scale near float32's least over another's) gives M = 0, shift 0, as
    LiteRT's does: frexp(inf) leaves the exponent 0 and the mantissa's int64 conversion, cut to
    int32, is 0 on x86-64 and AArch64 alike."""
    real = np.asarray(real, np.float64)
    finite = np.isfinite(real)
    q, shift = np.frexp(np.where(finite, real, 0.0))
    m = round_half_away(q * 2.0**31).astype(np.int64)
    carry = m == 2**31
    m = np.where(carry, 2**30, m)
    shift = np.where(carry, shift + 1, shift).astype(np.int64)
    tiny = (shift < -31) | (real == 0) | ~finite
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
    """MultiplyByQuantizedMultiplier: the pre-shift, a rounding high multiply, a rounding shift.

    The pre-shift is C's `x * (1 << left_shift)` on int32: a multiplier of 2**31 or more (an output
    scale far below the inputs') shifts by 32 or more, which x86-64 and AArch64 both take modulo 32
    (SHL, LSLV on 32-bit registers), so LiteRT's outputs for such scales are those of shift % 32."""
    shift = np.asarray(shift, np.int64)
    x = np.asarray(x, np.int64)
    if np.any(shift > 0):  # the int32 pre-shift can wrap; most multipliers are < 1 and skip it
        x = wrap32(x << (np.maximum(shift, 0) & 31))
    return rdbpot(srdhm(x, m), np.maximum(-shift, 0))


def activation_range(act, scale: float, zero_point: int, dtype) -> tuple[int, int]:
    """CalculateActivationRangeQuantized: the fused activation as integer clamp bounds."""
    from runtime.ir.options import Activation

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


def _fused_terms(m, shift, b, zero_point: int, acc_bound: int):
    """(base, threshold, down, total) of the fused requantizer below, or None where it needs the
    step-by-step form: a pre-shift, or an int64 overflow risk."""
    e = np.maximum(-shift, 0)
    if np.any(shift > 0) or np.any(m == INT32_MIN) or np.any(e > 30):
        return None
    # Python integers for the overflow check: every term of the fused sum must fit in int64.
    worst = (acc_bound * int(np.max(m, initial=0)) + int(np.max(np.abs(b * m), initial=0))
             + 2**30 + 2**61 + abs(zero_point) * 2 ** (31 + int(np.max(e, initial=0))))
    if worst >= 2**62:
        return None
    half = np.where(e > 0, np.int64(1) << np.maximum(e - 1, 0), 0)
    total = 31 + e
    base = b * m + (1 << 30) + (half << 31) + (np.int64(zero_point) << total)
    threshold = (half << 31) + (np.int64(zero_point) << total)
    down = np.where(e > 0, np.int64(1) << 31, 0)
    return base, threshold, down, total


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
    terms = _fused_terms(m, shift, b, zero_point, acc_bound)
    if terms is None:
        return lambda acc: mbqm(np.asarray(acc, np.int64) + b, m, shift) + zero_point
    base, threshold, down, total = terms

    def apply(acc: np.ndarray) -> np.ndarray:
        q = np.asarray(acc).astype(np.int64)
        q *= m
        q += base
        q -= np.less(q, threshold) * down  # a masked subtract (where=) is several times slower
        q >>= total
        return q

    return apply


_ROUND_MAGIC = 1.5 * 2.0**52  # its low mantissa bits are zero; the ulp at this size is 1
_BLOCK = 32 * 1024  # accumulator elements per float64 block of the requantizer


def clamped_requantizer(m, shift, bias, zero_point: int, acc_bound: int, lo: int, hi: int, dtype):
    """f(acc, out=None) = clip(MBQM(acc + bias, m, shift) + zero_point, lo, hi) as `dtype`, for
    float accumulators holding integers |acc| <= acc_bound; f may clamp `acc` in place.

    Where provably exact it runs the fused formula in float64 instead of int64: the accumulator
    is first clamped (in its own float type) to the range that maps into [lo, hi], which bounds
    every term of (acc * m + base) / 2**total below 2**53, so each float64 multiply and add is
    exact, and the floor-division becomes a rounding (see below). That is far fewer and faster passes than int64's
    (no AVX2 int64 multiply or variable arithmetic shift), and the final clip disappears.
    """
    m = np.asarray(m, np.int64)
    shift = np.asarray(shift, np.int64)
    b = np.zeros_like(m) if bias is None else np.asarray(bias, np.int64)
    exact = requantizer(m, shift, b, zero_point, acc_bound)

    def slow(acc: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        q = exact(acc)
        q = np.clip(q, lo, hi, out=q)
        if out is None:
            return q.astype(dtype)
        out[...] = q
        return out

    terms = _fused_terms(m, shift, b, zero_point, acc_bound)
    bounds = None if terms is None else _clamp_bounds(exact, m.shape, acc_bound, lo, hi)
    if bounds is None:
        return slow
    a_lo, a_hi = bounds
    base, threshold, down, total = terms
    limit = 2**53 - 2**32  # slack for the tie correction's 2**31

    # floor(v / 2**total) is computed as round-to-nearest of (2v - 2**total + 1) / 2**(total+1):
    # that shifts the value by just under -1/2 and, v being an integer, never onto a tie. Every
    # numerator must stay below 2**53; checked in float64 (close enough with the slack, and no
    # int64 overflow in the check).
    fm, fb = 2 * m.astype(np.float64), 2 * base.astype(np.float64) - np.ldexp(1.0, total) + 1
    if not all(np.all(np.abs(v) < limit) for v in (a_lo * fm, a_hi * fm, fb, a_lo * fm + fb, a_hi * fm + fb)):
        return slow
    scale = np.ldexp(1.0, -total)  # exact powers of two
    mf, basef = m * scale, (2 * base - (np.int64(1) << total) + 1) * (scale / 2)
    if not (np.all(mf / scale == m) and np.all(basef / scale * 2 == fb)):
        return slow
    # The tie correction lowers a result only where it is below zero_point (a negative high
    # product rounded away from zero), so it is moot when the clamp keeps results at or above
    # zero_point (ReLU's), or where the clamped accumulators never reach a negative product.
    correct = lo < zero_point and bool(np.any((down > 0) & (a_lo * m + base < threshold)))
    thr, step = (2 * threshold - (np.int64(1) << total) + 1) * (scale / 2), down * scale
    rows, scratch = {}, {}  # per accumulator dtype / shape; one caller thread at a time

    def apply(acc: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if acc.dtype not in rows:
            lo_r, hi_r = a_lo.astype(acc.dtype), a_hi.astype(acc.dtype)
            ok = np.all(lo_r == a_lo) and np.all(hi_r == a_hi)
            rows[acc.dtype] = (lo_r, hi_r) if ok else None
        if out is None:
            out = np.empty(acc.shape, dtype)
        if rows[acc.dtype] is None:
            return slow(acc, out)
        lo_r, hi_r = rows[acc.dtype]
        np.maximum(acc, lo_r, out=acc)
        np.minimum(acc, hi_r, out=acc)
        # The float64 passes go block by block, so the scratch stays in cache (~10% on large layers).
        step = max(1, _BLOCK // max(1, acc.shape[-1])) if acc.ndim == 2 else max(1, len(acc))
        for start in range(0, len(acc), step):
            _finish_block(acc[start:start + step], out[start:start + step])
        return out

    def _finish_block(acc: np.ndarray, out: np.ndarray) -> None:
        y = scratch.get(acc.shape)
        if y is None:
            y = scratch[acc.shape] = np.empty(acc.shape, np.float64)
        np.copyto(y, acc)  # then a same-type multiply: faster than a mixed float32 * float64 one
        y *= mf
        y += basef
        if correct:
            y -= np.less(y, thr) * step
        # Adding 1.5 * 2**52 rounds to an integer k held in the low mantissa bits, which the
        # wrapping int64 -> 8/16-bit cast reads off: cheaper than np.floor and a float cast.
        y += _ROUND_MAGIC
        np.copyto(out, y.view(np.int64), casting="unsafe")

    return apply


def _clamp_bounds(f, shape, acc_bound: int, lo: int, hi: int):
    """Per channel, the accumulator range [a_lo, a_hi] within ±acc_bound that f (monotone, steps
    of at most 1 since every multiplier is < 1) maps into [lo, hi], with f(a_lo) = lo unless
    a_lo = -acc_bound, and likewise at the top; None when [lo, hi] is out of f's reach."""
    bottom = np.full(shape, -acc_bound, np.int64)
    top = np.full(shape, acc_bound, np.int64)
    if np.any(f(top) < lo) or np.any(f(bottom) > hi):
        return None

    def search(pred):  # the smallest a in [-B, B] with pred(a), given pred(B) holds
        a, z = bottom.copy(), top.copy()
        while np.any(a < z):
            mid = (a + z) >> 1
            ok = pred(mid)
            z = np.where(ok, mid, z)
            a = np.where(ok, a, mid + 1)
        return a

    a_lo = search(lambda a: f(a) >= lo)
    a_hi = search(lambda a: f(a + 1) > hi) if np.any(f(top) > hi) else top
    a_hi = np.where(f(top) > hi, a_hi, top)
    if np.any(f(a_lo) > hi) or np.any(f(a_hi) < lo) or np.any(a_lo > a_hi):
        return None
    return a_lo, a_hi
