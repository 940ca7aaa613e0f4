"""8-bit CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV and FULLY_CONNECTED, bit-exact with TFLite's
reference kernels: exact integer sums (float BLAS on chunks small enough to stay exact), then the
requantisation each kernel uses (see tflite-integer-arithmetic §2.1-2.3, §2.18)."""

from __future__ import annotations

import numpy as np

from runtime.ops import quant
from runtime.ops import conv
from runtime.ops.base import Node
from runtime.ops.fast_select import conv_work, fast

_EXACT = 2**24  # float32 holds every integer up to this exactly


def exact_matmul(bound: int, wide: bool = False):
    """A matmul on integer-valued float32 operands whose products are at most `bound` in size:
    K is cut into chunks whose partial sums stay exact in float32, summed in float64."""
    chunk = max(1, _EXACT // bound)

    def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if a.shape[-1] <= chunk:
            return np.matmul(a, b).astype(np.float64) if wide else np.matmul(a, b, out=out)
        total = np.zeros(a.shape[:-1] + b.shape[-1:], np.float64)
        for lo in range(0, a.shape[-1], chunk):
            total += np.matmul(a[..., lo:lo + chunk], b[lo:lo + chunk])
        return total

    return matmul


def _offset(q: np.ndarray, zero_point: int) -> np.ndarray:
    return q.astype(np.float32) - np.float32(zero_point)


def _bound(x: np.ndarray, subtract_weight_zp: bool) -> int:
    """Largest |(x - zp_x)(w - zp_w)|: 255 * 128 for int8 weights, 255 * 255 once zp_w is subtracted."""
    return 255 * (255 if subtract_weight_zp else 128)


def _raw_bound(x: np.ndarray, subtract_weight_zp: bool) -> int:
    """Largest |x (w - zp_w)| on raw inputs: 128 * 128 for int8, 255 * 255 for uint8."""
    return 255 * 255 if subtract_weight_zp else 128 * 128


def _raw_bias(node: Node, wf: np.ndarray, bias, channel_axis: int):
    """The bias that lets convolutions sum raw inputs: Σ(x - zp_x)w = Σxw - zp_x Σw per output
    channel, provided padding holds zp_x (the real value 0). That spares the offset pass, and int8
    products shrink to 2**14, so K = 1024 sums are still exact in one float32 GEMM."""
    def correction():
        axes = tuple(a for a in range(wf.ndim) if a != channel_axis % wf.ndim)
        return -int(node.input(0).quant.zero_point[0]) * wf.sum(axes, dtype=np.float64).astype(np.int64)

    corr = node.cached("zp_correction", correction)
    return corr if bias is None else corr + np.asarray(bias, np.int64)


def _weights(node: Node, w: np.ndarray, subtract_zp: bool) -> np.ndarray:
    def make():
        q = node.input(1).quant
        zp = np.asarray(q.zero_point, np.float32) if subtract_zp else np.float32(0)
        if subtract_zp and q.per_channel:
            shape = [1] * w.ndim
            shape[q.axis] = -1
            zp = zp.reshape(shape)
        return w.astype(np.float32) - zp
    return node.cached("wq", make)


def _multipliers(node: Node, channels: int, float32_product: bool):
    """Per output channel (M, shift) for s_in * s_w[c] / s_out (§1.6)."""
    def make():
        s_in = node.input(_data_input(node)).quant.scale[0]
        s_out = node.output().quant.scale[0]
        s_w = np.broadcast_to(np.asarray(node.input(1).quant.scale, np.float64), (channels,))
        if float32_product:
            real = (np.float32(s_in) * s_w.astype(np.float32)).astype(np.float64) / np.float64(s_out)
        else:
            real = np.float64(s_in) * s_w / np.float64(s_out)
        return quant.quantize_multiplier(real)
    return node.cached("multipliers", make)


def _data_input(node: Node) -> int:
    return 2 if node.op.type.name == "TRANSPOSE_CONV" else 0


def _finish(node: Node, acc: np.ndarray, bias, m, sh, dtype, acc_bound: int) -> np.ndarray:
    """int32 accumulator + bias -> requantised, offset by zp_out, clamped to the activation range.
    Per-channel parameters are tiled along whole output rows, so NumPy's inner loops run over
    W*C elements instead of C; constant biases are folded into the fused requantizer, which may
    clamp `acc` (a scratch array) in place."""
    shape = acc.shape
    width = shape[-2] * shape[-1] if acc.ndim >= 2 else shape[-1]
    reps = width // shape[-1]
    y = node.output().quant
    lo, hi = node.cached("activation_range", lambda: quant.activation_range(
        node.options.fused_activation_function, y.scale[0], y.zero_point[0], dtype))

    def tile(v):
        return np.tile(np.broadcast_to(np.asarray(v, np.int64), (shape[-1],)), reps)

    flat = acc.reshape(-1, width)
    if _constant_bias(node):
        make = lambda: quant.clamped_requantizer(tile(m), tile(sh), None if bias is None else tile(bias),
                                                 y.zero_point[0], acc_bound, lo, hi, dtype)
        requantize = node.cached(f"requant{width}", make)
        out = node.buffer("requantized", flat.shape, dtype)
        return requantize(flat, out).reshape(shape)
    out = quant.requantizer(tile(m), tile(sh), None, y.zero_point[0], acc_bound)(flat.astype(np.int64) + tile(bias))
    return np.clip(out, lo, hi, out=out).astype(dtype).reshape(shape)


def _constant_bias(node: Node) -> bool:
    """No bias tensor, or a constant one: the bias (with any zero-point fold) is fixed."""
    t = node.input(3 if node.op.type.name == "TRANSPOSE_CONV" else 2)
    return t is None or t.is_constant


def conv_2d(node: Node, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    # numba (runtime/ops/fast_qconv.py): the same integers, requantised in one pass; None: not handled.
    grouped = x.shape[3] != w.shape[3]   # the fast kernel computes one group; grouped ones run here
    f = None if grouped else fast("fast_qconv", conv_work(node, x, w))
    if f is not None and (out := f.conv_2d(node, x, w, bias)) is not None:
        return out
    legacy = x.dtype == np.uint8  # uint8 subtracts zp_w and forms the scale product in float32
    wf = _weights(node, w, subtract_zp=legacy)
    zp = node.input(0).quant.zero_point[0]
    sums, shape = conv.conv_sums(node, x, wf, exact_matmul(_raw_bound(x, legacy)), pad_value=zp)
    m, sh = _multipliers(node, w.shape[0], float32_product=legacy)
    return _finish(node, sums.reshape(shape), _raw_bias(node, wf, bias, 0), m, sh, x.dtype,
                   wf[0].size * _raw_bound(x, legacy))


def depthwise_conv_2d(node: Node, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    f = fast("fast_qconv", conv_work(node, x, w))
    if f is not None and (out := f.depthwise_conv_2d(node, x, w, bias)) is not None:
        return out
    legacy = x.dtype == np.uint8
    if w.shape[1] * w.shape[2] * _raw_bound(x, legacy) > _EXACT:
        raise node.fail(f"filter {w.shape[1]}x{w.shape[2]} is too large for exact float32 sums")
    wf = _weights(node, w, subtract_zp=legacy)
    sums = conv.depthwise_sums(node, x, wf, pad_value=node.input(0).quant.zero_point[0])
    m, sh = _multipliers(node, w.shape[3], float32_product=legacy)
    return _finish(node, sums, _raw_bias(node, wf, bias, 3), m, sh, x.dtype,
                   w.shape[1] * w.shape[2] * _raw_bound(x, legacy))


def transpose_conv(node: Node, output_shape: np.ndarray, w: np.ndarray, x: np.ndarray,
                   bias: np.ndarray | None = None) -> np.ndarray:
    legacy = x.dtype == np.uint8
    wf = _weights(node, w, subtract_zp=legacy)
    sums = conv.transpose_sums(node, output_shape, wf, _offset(x, node.input(2).quant.zero_point[0]),
                               exact_matmul(_bound(x, legacy), wide=True))
    m, sh = _multipliers(node, w.shape[0], float32_product=legacy)
    return _finish(node, sums, bias, m, sh, x.dtype, w.size * _bound(x, legacy))


def fully_connected(node: Node, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """The reference kernel requantises in double: round(acc * s_in * s_w / s_out) (§2.3)."""
    o = node.options
    wq = node.input(1).quant
    units, depth = w.shape
    subtract = not wq.per_channel  # per-channel int8 ignores the weight zero point
    wt = node.cached("wt", lambda: np.ascontiguousarray(_weights(node, w, subtract).T))
    acc = exact_matmul(_bound(x, subtract), wide=True)(_offset(x, node.input(0).quant.zero_point[0])
                                                       .reshape(-1, depth), wt)
    if bias is not None:
        acc += bias.astype(np.float64)
    y = node.output().quant

    def effective():
        s_w = np.broadcast_to(np.asarray(wq.scale, np.float64), (units,))
        return np.float64(node.input(0).quant.scale[0]) * s_w / np.float64(y.scale[0])

    q = quant.round_half_away(acc * node.cached("effective", effective)) + y.zero_point[0]
    lo, hi = quant.activation_range(o.fused_activation_function, y.scale[0], y.zero_point[0], x.dtype)
    out = np.clip(q, lo, hi).astype(x.dtype)
    return out.reshape(*x.shape[:-1], units) if o.keep_num_dims else out


def batch_matmul(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact integer products of offset operands, one MBQM with s_a * s_b (float32) / s_out."""
    o = node.options
    qa, qb, y = node.input(0).quant, node.input(1).quant, node.output().quant
    fa, fb = _offset(a, qa.zero_point[0]), _offset(b, qb.zero_point[0])
    if o.adj_x:
        fa = np.swapaxes(fa, -1, -2)
    if o.adj_y:
        fb = np.swapaxes(fb, -1, -2)
    k = fa.shape[-1]
    acc = np.matmul(fa.astype(np.float64), fb.astype(np.float64)) if k * 65025 > _EXACT else np.matmul(fa, fb)
    m, sh = node.cached("multiplier", lambda: quant.quantize_multiplier(
        np.float64(np.float32(np.float32(qa.scale[0]) * np.float32(qb.scale[0]))) / np.float64(y.scale[0])))
    lo, hi = quant.RANGES[a.dtype]
    return np.clip(quant.mbqm(acc.astype(np.int64), m, sh) + y.zero_point[0], lo, hi).astype(a.dtype)
