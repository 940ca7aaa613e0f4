"""8-bit elementwise kernels as TFLite's reference kernels compute them: ADD/SUB/MUL rescaling,
ReLU family, PRELU, LEAKY_RELU, HARD_SWISH, LUT LOGISTIC/TANH, QUANTIZE (§2.4-2.6, 2.11-2.13, 2.19-2.20)."""

from __future__ import annotations

import numpy as np

from runtime.ops import quant
from runtime.ops.base import Node
from runtime.ir.options import Activation

_LEFT_SHIFT = 20  # ADD/SUB scale inputs up by 2**20 before rescaling (int8 and uint8)


def input_quant(node: Node, k: int):
    t = node.input(k) if k >= 0 else node.output()
    return np.float64(t.quant.scale[0]), int(t.quant.zero_point[0])


def _out(node: Node, v: np.ndarray, dtype, act=Activation.NONE) -> np.ndarray:
    s, zp = input_quant(node, -1)
    lo, hi = quant.activation_range(act, s, zp, dtype)
    return np.clip(v, lo, hi).astype(dtype)


def add_multipliers(s1: float, s2: float, so: float) -> tuple[float, float, float]:
    """ADD/SUB's three real rescaling multipliers (inputs to the common scale, it to the output's),
    computed as add.cc's Prepare does; LiteRT stops unless each is in (0, 1)."""
    with np.errstate(over="ignore"):  # a product past float32's range is inf, as in C: a multiplier of 0
        twice_max = np.float64(np.float32(2 * max(np.float32(s1), np.float32(s2))))
        out = twice_max / np.float64(np.float32((1 << _LEFT_SHIFT) * np.float32(so)))
    return float(np.float64(s1) / twice_max), float(np.float64(s2) / twice_max), float(out)


def _add_params(node: Node):
    (s1, _), (s2, _), (so, _) = input_quant(node, 0), input_quant(node, 1), input_quant(node, -1)
    return tuple(quant.quantize_multiplier(m) for m in add_multipliers(s1, s2, so))


def _scaled(q: np.ndarray, zp: int, m) -> np.ndarray:
    v = (q.astype(np.int64) - zp) << _LEFT_SHIFT
    return quant.rdbpot(quant.srdhm(v, m[0]), -m[1])


def _add_sub(sign: int):
    def kernel(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        m1, m2, mo = node.cached("add", lambda: _add_params(node))
        total = _scaled(a, input_quant(node, 0)[1], m1) + sign * _scaled(b, input_quant(node, 1)[1], m2)
        v = quant.rdbpot(quant.srdhm(total, mo[0]), -mo[1]) + input_quant(node, -1)[1]
        return _out(node, v, a.dtype, node.options.fused_activation_function)
    return kernel


add = _add_sub(+1)
sub = _add_sub(-1)


def mul(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    def params():
        (s1, _), (s2, _), (so, _) = input_quant(node, 0), input_quant(node, 1), input_quant(node, -1)
        with np.errstate(over="ignore", under="ignore"):  # float32 inf or 0, as LiteRT's float arithmetic gives
            return quant.quantize_multiplier(np.float64(np.float32(np.float32(s1) * np.float32(s2)) / np.float32(so)))
    m, sh = node.cached("mul", params)
    prod = (a.astype(np.int64) - input_quant(node, 0)[1]) * (b.astype(np.int64) - input_quant(node, 1)[1])
    return _out(node, quant.mbqm(prod, m, sh) + input_quant(node, -1)[1], a.dtype, node.options.fused_activation_function)


def _relu_x(act: Activation):
    def kernel(node: Node, x: np.ndarray) -> np.ndarray:
        (s_in, zp_in), (s_out, zp_out) = input_quant(node, 0), input_quant(node, -1)
        m, sh = node.cached("relu", lambda: quant.quantize_multiplier(np.float64(np.float32(s_in) / np.float32(s_out))))
        v = quant.mbqm(x.astype(np.int64) - zp_in, m, sh) + zp_out
        return _out(node, v, x.dtype, act)
    return kernel


relu = _relu_x(Activation.RELU)
relu6 = _relu_x(Activation.RELU6)
relu_n1_to_1 = _relu_x(Activation.RELU_N1_TO_1)


def _two_multipliers(node: Node, negative_scale: np.float32):
    s_in, s_out = np.float32(input_quant(node, 0)[0]), np.float32(input_quant(node, -1)[0])
    pos = quant.quantize_multiplier(np.float64(s_in / s_out))
    neg = quant.quantize_multiplier(np.float64(np.float32(s_in * negative_scale) / s_out))
    return pos, neg


def prelu(node: Node, x: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    s_a, zp_a = input_quant(node, 1)
    pos, neg = node.cached("prelu", lambda: _two_multipliers(node, np.float32(s_a)))
    v = x.astype(np.int64) - input_quant(node, 0)[1]
    a = alpha.astype(np.int64) - zp_a
    o = np.where(v >= 0, quant.mbqm(v, *pos), quant.mbqm(v * a, *neg))
    return _out(node, o + input_quant(node, -1)[1], x.dtype)


def leaky_relu(node: Node, x: np.ndarray) -> np.ndarray:
    pos, neg = node.cached("leaky", lambda: _two_multipliers(node, np.float32(node.options.alpha)))
    v = x.astype(np.int64) - input_quant(node, 0)[1]
    o = np.where(v >= 0, quant.mbqm(v, *pos), quant.mbqm(v, *neg))
    return _out(node, o + input_quant(node, -1)[1], x.dtype)


def lookup_table(fn):
    """LOGISTIC/TANH: a 256-entry table built in float32 at prepare, then a lookup (§2.11)."""
    def kernel(node: Node, x: np.ndarray) -> np.ndarray:
        def table():
            (s_in, zp_in), (s_out, zp_out) = input_quant(node, 0), input_quant(node, -1)
            lo, hi = quant.RANGES[x.dtype]
            codes = np.arange(lo, hi + 1)
            xf = np.float32(s_in) * (codes - zp_in).astype(np.float32)
            yf = fn(xf.astype(np.float32))
            r = quant.round_half_away(np.float32(yf * np.float32(np.float32(1) / np.float32(s_out))))
            return np.clip(r + zp_out, lo, hi).astype(x.dtype)
        lo = quant.RANGES[x.dtype][0]
        return node.cached("lut", table)[x.astype(np.int64) - lo]
    return kernel


def _sigmoid32(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (np.float32(1) / (np.float32(1) + np.exp(-x))).astype(np.float32)


logistic = lookup_table(_sigmoid32)
tanh = lookup_table(lambda x: np.tanh(x).astype(np.float32))


def _m16(m32: np.ndarray) -> np.ndarray:
    """An int32 multiplier reduced to int16 as DownScaleInt32ToInt16Multiplier does."""
    m32 = np.asarray(m32, np.int64)
    return np.where(m32 >= 2**31 - 1 - 2**15, 32767, (m32 + 2**15) >> 16)


def _srdhm16(a, b):
    return (np.asarray(a, np.int64) * np.asarray(b, np.int64) + (1 << 14)) >> 15


def _sat_shl16(v, e):
    return np.clip(np.asarray(v, np.int64) << e, -32768, 32767)


def hard_swish(node: Node, x: np.ndarray) -> np.ndarray:
    """int16 fixed-point hard-swish (§2.12)."""
    def params():
        s_in, s_out = np.float32(input_quant(node, 0)[0]), np.float32(input_quant(node, -1)[0])
        hires = np.float32(np.float32(1.0 / 128.0) * s_in)
        mo, oe = quant.quantize_multiplier(np.float64(np.float32(hires / s_out)))
        mr, re = quant.quantize_multiplier(np.float64(np.float32(hires / np.float32(3.0 / 32768.0))))
        return int(_m16(mo)), int(oe), int(_m16(mr)), int(re)
    mo, oe, mr, re = node.cached("hswish", params)
    if oe > 0:
        raise node.fail("output scale too small for the int8 hard-swish (needs input/128 <= output scale)")
    hv = 128 * (x.astype(np.int64) - input_quant(node, 0)[1])
    pre = _srdhm16(hv, mo)
    if re > 0:
        r = _sat_shl16(_srdhm16(_sat_shl16(hv, re - 1), mr), 1)
    else:
        r = _srdhm16(hv, mr)
        if re < 0:
            r = quant.rdbpot(r, -re)
    r = (r + 32768) >> 1
    prod = r * pre
    o = np.where(prod < 0, -((-prod) >> 15), prod >> 15)  # trunc-div by 2**15
    return _out(node, quant.rdbpot(o, -oe) + input_quant(node, -1)[1], x.dtype)


def quantize(node: Node, x: np.ndarray) -> np.ndarray:
    """float -> int (divide, round half away), or int -> int requantisation (§2.13)."""
    y = node.output()
    if x.dtype.kind == "f":
        q = y.quant
        return quant.quantize(x, q.scale, q.zero_point, y.dtype.np, q.axis if q.per_channel else None)
    (s_in, zp_in), (s_out, zp_out) = input_quant(node, 0), input_quant(node, -1)
    m, sh = node.cached("requant", lambda: quant.quantize_multiplier(s_in / s_out))
    lo, hi = quant.RANGES[y.dtype.np]
    return np.clip(quant.mbqm(x.astype(np.int64) - zp_in, m, sh) + zp_out, lo, hi).astype(y.dtype.np)


def squared_difference(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Inputs scaled up by 2**7, rescaled to a common scale, differenced, squared, requantised."""
    shift = 7

    def params():
        (s1, _), (s2, _), (so, _) = input_quant(node, 0), input_quant(node, 1), input_quant(node, -1)
        twice_max = 2.0 * max(np.float32(s1), np.float32(s2))  # double here, unlike ADD
        return (quant.quantize_multiplier(np.float64(np.float32(s1)) / twice_max),
                quant.quantize_multiplier(np.float64(np.float32(s2)) / twice_max),
                quant.quantize_multiplier(twice_max * twice_max / ((1 << 2 * shift) * np.float64(np.float32(so)))))

    m1, m2, mo = node.cached("sqdiff", params)
    da = quant.rdbpot(quant.srdhm((a.astype(np.int64) - input_quant(node, 0)[1]) << shift, m1[0]), -m1[1])
    db = quant.rdbpot(quant.srdhm((b.astype(np.int64) - input_quant(node, 1)[1]) << shift, m2[0]), -m2[1])
    d = da - db
    return _out(node, quant.mbqm(d * d, *mo) + input_quant(node, -1)[1], a.dtype)
