"""Float and integer elementwise maths as TFLite's kernels compute it: FLOOR, CEIL, ROUND, SIN, COS,
SQUARE, POW, FLOOR_DIV, FLOOR_MOD, SIGN, ATAN2, ADD_N, ZEROS_LIKE, RELU_0_TO_1, GELU, FAKE_QUANT,
BITWISE_XOR and RIGHT_SHIFT. Their 8-bit forms (RELU_0_TO_1, GELU) are in runtime/ops/qmath.py."""

from __future__ import annotations

import numpy as np

from runtime.ops import quant
from runtime.ops.base import Node

_F32 = np.float32

# -- unary ---------------------------------------------------------------------------------------


def floor(node: Node, x: np.ndarray) -> np.ndarray:
    return np.floor(x)


def ceil(node: Node, x: np.ndarray) -> np.ndarray:
    return np.ceil(x)


def round_(node: Node, x: np.ndarray) -> np.ndarray:
    # reference/round.h rounds halves to the even neighbour (unlike std::round), as np.rint does.
    return np.rint(x)


def sin(node: Node, x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # sin(inf) is NaN, as in C
        return np.sin(x)


def cos(node: Node, x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.cos(x)


def square(node: Node, x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):  # float32 overflow is inf, as in C
        return np.multiply(x, x)


def sign(node: Node, x: np.ndarray) -> np.ndarray:
    # sign.cc: 1, -1 or 0 (also for -0.0), and a NaN stays itself.
    out = (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)
    return np.where(np.isnan(x), x, out) if x.dtype.kind == "f" else out


def zeros_like(node: Node, x: np.ndarray) -> np.ndarray:
    return np.zeros_like(x)


def relu_0_to_1(node: Node, x: np.ndarray) -> np.ndarray:
    return np.clip(x, _F32(0), _F32(1)).astype(x.dtype, copy=False)


_SQRT1_2 = _F32(-np.sqrt(0.5))           # static_cast<float>(-M_SQRT1_2)
_SQRT_2_PI = _F32(np.sqrt(2.0 / np.pi))  # M_2_SQRTPI * M_SQRT1_2, rounded to float once


def gelu_exact(x: np.ndarray) -> np.ndarray:
    """0.5 x erfc(-x / sqrt 2) in float32, the erfc form TFLite uses (reference/gelu.h): it avoids
    the cancellation of 0.5 x (1 + erf(x / sqrt 2)) for large negative x."""
    from scipy import special  # scipy.special costs ~1 s of import; only an exact GELU needs it

    x = np.asarray(x, _F32)
    return ((_F32(0.5) * x) * special.erfc(x * _SQRT1_2).astype(_F32)).astype(_F32)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in reference/gelu.h's float32 order."""
    x = np.asarray(x, _F32)
    inner = x + ((_F32(0.044715) * x) * x) * x
    return ((_F32(0.5) * x) * (_F32(1) + np.tanh(_SQRT_2_PI * inner))).astype(_F32)


def gelu(node: Node, x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):  # x**3 of a large x is inf, as in C
        return (gelu_tanh if node.options.approximate else gelu_exact)(x)


def fake_quant(node: Node, x: np.ndarray) -> np.ndarray:
    """Quantize and dequantize on the range [min, max] nudged so that 0 is a grid point, with
    2**num_bits steps; all float32, ties away from zero (NudgeQuantizationRange, FakeQuantizeArray
    in quantization_util.cc). narrow_range is refused when the model is checked, as TFLite does."""
    def params():
        o = node.options
        qmin, qmax = _F32(0), _F32((1 << o.num_bits) - 1)
        lo, hi = _F32(o.min), _F32(o.max)
        scale = _F32((hi - lo) / (qmax - qmin))
        zp_from_min = _F32(qmin - lo / scale)
        zp = qmin if zp_from_min < qmin else qmax if zp_from_min > qmax else _F32(quant.round_half_away(zp_from_min))
        return scale, _F32((qmin - zp) * scale), _F32((qmax - zp) * scale), _F32(_F32(1) / scale)

    scale, nudged_min, nudged_max, inv = node.cached("fake_quant", params)
    shifted = np.minimum(nudged_max, np.maximum(nudged_min, x)) - nudged_min
    steps = quant.round_half_away(shifted * inv).astype(_F32)
    return (steps * scale + nudged_min).astype(_F32)

# -- binary (NumPy broadcasting) -----------------------------------------------------------------


def _divisor(node: Node, b: np.ndarray) -> None:
    if b.dtype.kind in "iu" and not np.all(b):
        raise node.fail("division by 0 (an integer divisor holds 0)")


def floor_div(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """floor(double(a) / double(b)) cast back to the type (reference_ops FloorDiv); TFLite
    refuses a zero divisor of any type, float included."""
    if not np.all(b):
        raise node.fail("division by 0 (the divisor holds 0)")
    with np.errstate(over="ignore", invalid="ignore"):
        return np.floor(a.astype(np.float64) / b.astype(np.float64)).astype(a.dtype)


def floor_mod(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C's truncated remainder (fmod for floats), moved into the divisor's sign (reference_ops
    FloorMod); an integer divisor of 0 is refused, a float one gives NaN."""
    _divisor(node, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.fmod(a, b)
        return np.where((r != 0) & ((b < 0) != (r < 0)), r + b, r).astype(a.dtype, copy=False)


def pow_(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":
        with np.errstate(all="ignore"):
            return np.power(a, b)
    if np.any(b < 0):  # pow.cc: "POW does not support negative value for int32"
        raise node.fail("an int32 exponent is negative, which TFLite's POW refuses")
    # std::pow in double, converted to int32: an out-of-range result becomes INT32_MIN, as the
    # x86 conversion does.
    with np.errstate(over="ignore", invalid="ignore"):
        p = np.power(a.astype(np.float64), b.astype(np.float64))
    fits = (p > -2.0**31 - 1) & (p < 2.0**31)
    return np.where(fits, np.trunc(np.where(fits, p, 0)), quant.INT32_MIN).astype(np.int32)


def atan2(node: Node, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.arctan2(y, x)


def bitwise_xor(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.bitwise_xor(a, b)


def right_shift(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # right_shift.cc clamps the shift into [0, bits - 1]; signed values shift arithmetically.
    bits = 8 * a.dtype.itemsize
    return np.right_shift(a, np.clip(b, 0, bits - 1).astype(a.dtype))


def add_n(node: Node, *xs: np.ndarray) -> np.ndarray:
    # reference_ops::AddN adds the inputs in order per element; the same order here.
    out = np.array(xs[0], copy=True)
    with np.errstate(over="ignore"):
        for x in xs[1:]:
            out += x
    return out
