"""8-bit comparisons, RELU_0_TO_1, GELU, L2_NORMALIZATION, REDUCE_PROD and int8 RSQRT as TFLite's integer
kernels compute them (comparisons.cc + reference/comparisons.h, activations.cc, elementwise.cc,
reference/l2normalization.h and reference/integer_ops/l2normalization.h, reduce.cc + reference/reduce.h,
with the fixed-point helpers of internal/common.h)."""

from __future__ import annotations

import numpy as np

from runtime.ops import quant
from runtime.ops import mathops
from runtime.ops.base import Node
from runtime.ops.compare import comparison
from runtime.ops.qelementwise import lookup_table, input_quant
from runtime.ops.reduce import reduce_axes

_LEFT_SHIFT = 8  # comparisons scale both sides up by 2**8 before rescaling


def _rescaled(node: Node, k: int, q: np.ndarray) -> np.ndarray:
    """(q - zp) * 2**8 times the input's own scale as a fixed-point multiplier (no output scale:
    both sides land on the common real-number grid, so equal reals compare equal)."""
    scale, zp = input_quant(node, k)
    m, sh = node.cached(f"cmp{k}", lambda: quant.quantize_multiplier(scale))
    return quant.rdbpot(quant.srdhm((q.astype(np.int64) - zp) << _LEFT_SHIFT, m), -sh)


less, less_equal, greater, greater_equal, equal, not_equal = (
    comparison(fn, _rescaled) for fn in (np.less, np.less_equal, np.greater, np.greater_equal, np.equal, np.not_equal))


def relu_0_to_1(node: Node, x: np.ndarray) -> np.ndarray:
    """ReluX with bounds 0 and 1 (activations.cc QuantizedReluX): requantise, then clamp to
    [zp_out, zp_out + roundf(1 / s_out)] within the type's range."""
    (s_in, zp_in), (s_out, zp_out) = input_quant(node, 0), input_quant(node, -1)
    m, sh = node.cached("relu", lambda: quant.quantize_multiplier(np.float64(np.float32(s_in) / np.float32(s_out))))
    qmin, qmax = quant.RANGES[x.dtype]
    lo = max(qmin, zp_out)
    hi = min(qmax, zp_out + int(quant.round_half_away(np.float32(1.0) / np.float32(s_out))))
    v = quant.mbqm(x.astype(np.int64) - zp_in, m, sh) + zp_out
    return np.clip(v, lo, hi).astype(x.dtype)


_gelu_exact = lookup_table(mathops.gelu_exact)
_gelu_tanh = lookup_table(mathops.gelu_tanh)


def gelu(node: Node, x: np.ndarray) -> np.ndarray:
    """A 256-entry table of the float32 GELU built at prepare (LUTPopulate), then a lookup."""
    return (_gelu_tanh if node.options.approximate else _gelu_exact)(node, x)


def _inv_sqrt(acc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GetInvSqrtQuantizedMultiplierExp with reverse_shift -1, per row: 1/sqrt(acc) as a
    multiplier and a (left) shift, by five Newton-Raphson steps in gemmlowp Q3.28 fixed point."""
    acc = np.asarray(acc, np.int64)
    small = acc <= 1
    v = np.where(small, 4, acc)
    shift = np.full(v.shape, 11, np.int64)
    big = v >= 1 << 29  # an int32 sum reaches at most 2**31 - 1: one step of /4 suffices
    v = np.where(big, v >> 2, v)
    shift += big
    clz = 32 - np.frexp(v.astype(np.float64))[1].astype(np.int64)  # exact: v < 2**29 < 2**53
    pairs = (clz - 1) // 2 - 1
    shift -= pairs
    v = v << (2 * pairs)
    srdhm, rdbpot = quant.srdhm, quant.rdbpot
    half_input = rdbpot(v >> 1, 1)
    half_three = (1 << 28) + (1 << 27)
    x = np.full(v.shape, 1 << 28, np.int64)
    for _ in range(5):
        x3 = _sat_shl(srdhm(srdhm(x, x), x), 6)
        x = _sat_shl(_wrap(srdhm(half_three, x) - srdhm(half_input, x3)), 3)
    x = srdhm(x, 1518500250)  # times sqrt(2)/2 in Q0.31
    neg = shift < 0
    x = np.where(neg, x << np.where(neg, -shift, 0), x)
    shift = np.where(neg, 0, shift)
    return np.where(small, 2**31 - 1, x), np.where(small, 0, -shift)


def _sat_shl(v: np.ndarray, e: int) -> np.ndarray:
    """gemmlowp SaturatingRoundingMultiplyByPOT for a positive exponent."""
    limit = (1 << (31 - e)) - 1
    return np.where(v > limit, 2**31 - 1, np.where(v < -limit, -(2**31), v << e))


def _wrap(v: np.ndarray) -> np.ndarray:
    return quant.wrap32(v)


def l2_normalization(node: Node, x: np.ndarray) -> np.ndarray:
    """Each vector along the last axis scaled by 1/sqrt(sum of (q - zp)^2) in fixed point, onto the
    output's fixed grid of 1/128 (zero point 0 for int8, 128 for uint8)."""
    zp = input_quant(node, 0)[1]
    d = x.astype(np.int64) - zp
    m, sh = _inv_sqrt(np.einsum("...i,...i->...", d, d))
    m, sh = m[..., None], sh[..., None]
    if x.dtype == np.int8:  # reference_integer_ops: MBQM with the shift raised by 7 (Q0.7 output)
        out = quant.mbqm(d, m, sh + 7)
        return np.clip(out, -128, 127).astype(np.int8)
    # uint8 (reference_ops): 128 * diff through MBQM's smaller-than-one form, then + 128.
    out = quant.rdbpot(quant.srdhm(128 * d, m), np.maximum(-sh, 0)) + 128
    return np.clip(out, 0, 255).astype(np.uint8)


_RSQRT_SHIFT = 20  # elementwise.cc keeps 1/sqrt(q - zp) as an integer scaled by 2**20


def rsqrt(node: Node, x: np.ndarray) -> np.ndarray:
    """int8 RSQRT (elementwise.cc RsqrtEvalQuantizedInt8): 1/sqrt(q - zp) by the fixed-point inverse
    square root, scaled by 2**20, then rescaled by 1 / (sqrt(s_in) * s_out) (float32 product, as the
    C++ computes it) onto the output grid; q == zp gives the largest code, q < zp is refused."""
    (s_in, zp_in), (s_out, zp_out) = input_quant(node, 0), input_quant(node, -1)

    def table():
        codes = np.arange(-128, 128, dtype=np.int64)
        value = np.maximum(codes - zp_in, 0)
        m, sh = _inv_sqrt(value)
        data = quant.mbqm(1, m, sh + _RSQRT_SHIFT)
        scale = np.float32(np.sqrt(np.float32(s_in))) * np.float32(s_out)
        om, osh = quant.quantize_multiplier(1.0 / np.float64(scale))
        out = quant.mbqm(data, om, osh - _RSQRT_SHIFT) + zp_out
        return np.where(value == 0, 127, np.clip(out, -128, 127)).astype(np.int8)

    if np.any(x.astype(np.int64) < zp_in):
        raise node.fail("Rsqrt is only defined for positive values: an input is below its zero point")
    return node.cached("rsqrt", table)[x.astype(np.int64) + 128]


def prod_multiplier(s_in: float, s_out: float, n: int) -> tuple[int, int]:
    """REDUCE_PROD's per-step multiplier: s_in / s_out ** (1/n) in double (GetQuantProdScaling),
    so that n rescaled multiplications carry s_in**n / s_out in all."""
    m, sh = quant.quantize_multiplier(np.float64(s_in) / np.power(np.float64(s_out), 1.0 / n))
    return int(m), int(sh)


def _mbqm64(x: np.ndarray, m: int, sh: int) -> np.ndarray:
    """MultiplyByQuantizedMultiplier's int64 overload: the multiplier rounded to 16 bits, one
    rounding shift (half up), the result cut to int32."""
    m16 = (m + (1 << 15)) >> 16 if m < 0x7FFF0000 else 0x7FFF
    total = 15 - sh
    return quant.wrap32((x * m16 + (1 << (total - 1))) >> total)


def reduce_prod(node: Node, x: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """The product over the reduced positions in row-major order, each multiplication rescaled
    (reference_ops::QuantizedReduceProd), then one more rescale and the output zero point."""
    axes = reduce_axes(node, x, axis)
    (s_in, zp_in), (s_out, zp_out) = input_quant(node, 0), input_quant(node, -1)
    kept = [a for a in range(x.ndim) if a not in axes]
    n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    m, sh = node.cached(f"prod{n}", lambda: prod_multiplier(s_in, s_out, n))
    rows = np.transpose(x, kept + list(axes)).reshape(-1, n).astype(np.int64) - zp_in
    acc = rows[:, 0]
    for k in range(1, n):  # sequential, as the rescaling after each step rounds
        acc = _mbqm64(acc * rows[:, k], m, sh)
    lo, hi = quant.RANGES[x.dtype]
    out = np.clip(_mbqm64(acc, m, sh) + zp_out, lo, hi).astype(x.dtype)
    shape = [1 if a in axes else d for a, d in enumerate(x.shape)] if node.options.keep_dims \
        else [x.shape[a] for a in kept]
    return out.reshape(shape)
