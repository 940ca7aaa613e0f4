"""Dynamic-range ("hybrid") kernels: float activations against int8 constant weights, quantized per
row or per image at run time as TFLite does (tflite-integer-arithmetic §4, tflite/kernels/lstm_eval.cc).

Integer sums are exact (float BLAS on chunks small enough to stay exact); every float step after
them is the float32 operation, in the order, that LiteRT's x86 kernels perform, so given the same
inputs the outputs are LiteRT's bit for bit (tests/test_hybrid.py). Sparse weights arrive here
already densified by the reader. The hybrid LSTM step, on these quantizers, is in hybrid_lstm.py.
"""

from __future__ import annotations

import numpy as np

from runtime.ops import quant
from runtime.ops import conv
from runtime.ops.base import Node, activate, pad_before
from runtime.ops.qconv import exact_matmul

F32 = np.float32
# |q| <= 128 against |w| <= 128 (int8 weights, inputs quantized to int8).
_PRODUCT = 128 * 128
# (q - zp) spans up to 255 when the input zero point is subtracted before the sum.
_OFFSET_PRODUCT = 255 * 128
_EXACT = 2**24


# -- input quantizers ------------------------------------------------------------------------------
# LiteRT's x86 wheels define USE_NEON (NEON_2_SSE) and so quantize with the NEON variants in
# optimized/neon_tensor_utils.cc, not the portable ones: the asymmetric range is a float32
# difference, and the first (size & ~7) elements of a row round by truncating x + 0.5 in float32.

def _round_neon(v: np.ndarray) -> np.ndarray:
    """Rounding of a row of float32 products as the NEON quantizers do: RoundToNearest (x + ±0.5 in
    float32, then truncation) on the vectorised part, std::round on the tail past size & ~7."""
    half = np.where(v < 0, F32(-0.5), F32(0.5))
    r = np.trunc((v + half).astype(F32)).astype(np.float64)
    tail = v.shape[1] & ~7
    r[:, tail:] = quant.round_half_away(v[:, tail:])
    return r


def quantize_symmetric(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: q = round(x * 127/R), R = max|x|; returns (q as float32, scaling factor R/127).
    A row of zeros gets q = 0 and scaling factor 1."""
    r = np.maximum(np.abs(rows.min(axis=1)), np.abs(rows.max(axis=1)))
    zero = r == 0
    safe = np.where(zero, F32(1), r)
    sf = np.where(zero, F32(1), safe / F32(127)).astype(F32)
    inv = (F32(127) / safe).astype(F32)
    q = np.clip(_round_neon((rows * inv[:, None]).astype(F32)), -127, 127)
    q[zero] = 0
    return q.astype(F32), sf


def quantize_asymmetric(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row over [min(0, x), max(0, x)] onto [-128, 127]: returns (q, scaling factor, zero point).
    The range is a float32 difference; the scale and zero-point choice then run in double."""
    rmin = np.minimum(rows.min(axis=1), F32(0))
    rmax = np.maximum(rows.max(axis=1), F32(0))
    same = rmin == rmax
    scale = np.where(same, 1.0, (rmax - rmin).astype(F32).astype(np.float64) / 255.0)
    rmin, rmax = rmin.astype(np.float64), rmax.astype(np.float64)
    zmin, zmax = -128.0 - rmin / scale, 127.0 - rmax / scale
    zpd = np.where(128.0 + np.abs(rmin / scale) < 127.0 + np.abs(rmax / scale), zmin, zmax)
    zp = np.where(zpd <= -128, -128.0, np.where(zpd >= 127, 127.0, quant.round_half_away(zpd)))
    zp = np.where(same, 0.0, zp)
    sf = scale.astype(F32)
    inv = (1.0 / sf.astype(np.float64)).astype(F32)  # 1.0 / float: a double division, stored as float
    # round(x * inv) first, then the integer offset.
    q = np.clip(_round_neon((rows * inv[:, None]).astype(F32)) + zp[:, None], -128, 127)
    q[same] = 0
    return q.astype(F32), sf, zp


def quantize_rows(rows: np.ndarray, asymmetric: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if asymmetric:
        return quantize_asymmetric(rows)
    q, sf = quantize_symmetric(rows)
    return q, sf, np.zeros(len(rows))


# -- weights ---------------------------------------------------------------------------------------

def _weight_scales(node: Node, k: int, channels: int) -> np.ndarray:
    """The weight scales of input k as float32, one per output channel (a single scale repeated)."""
    t = node.input(k)
    if t.dtype.np != np.int8:
        raise node.fail(f"{t.dtype.name} weights '{t.name}' with float input: only int8 hybrid weights "
                        f"are supported")
    q = t.quant
    if q is None:
        raise node.fail(f"int8 weights '{t.name}' carry no quantization scale")
    if any(z != 0 for z in q.zero_point):
        raise node.fail(f"int8 weights '{t.name}' have a non-zero zero point; hybrid kernels need "
                        f"symmetric weights")
    if len(q.scale) not in (1, channels):
        raise node.fail(f"weights '{t.name}' have {len(q.scale)} scales for {channels} output channels")
    return np.broadcast_to(np.asarray(q.scale, F32), (channels,))


def matvec(q: np.ndarray, wt: np.ndarray, rowsum: np.ndarray, zp: np.ndarray, scale: np.ndarray,
            acc: np.ndarray) -> np.ndarray:
    """acc + f32(dot - rowsum * zp) * scale, the float steps of MatrixBatchVectorMultiplyAccumulate:
    the int32 sum turns float, is scaled, then added to the accumulator."""
    dot = exact_matmul(_PRODUCT, wide=True)(q, wt)
    dot -= rowsum[None, :] * zp[:, None]
    return (acc + dot.astype(F32) * scale).astype(F32)


def _transposed(node: Node, key: str, w: np.ndarray):
    """Weights [out, in] as float32 [in, out] for BLAS, with their row sums (for zero points)."""
    return node.cached(key, lambda: (np.ascontiguousarray(w.T, dtype=F32), w.astype(np.int64).sum(axis=1)))


# -- FULLY_CONNECTED (kernels/fully_connected.cc: EvalHybridDense) ---------------------------------

def fully_connected(node: Node, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    o = node.options
    units, depth = w.shape
    if x.size % depth:
        raise node.fail(f"input of shape {list(x.shape)} does not split into rows of {depth}")
    s_w = _weight_scales(node, 1, units)
    per_channel = len(node.input(1).quant.scale) > 1
    rows = x.reshape(-1, depth)
    out = np.zeros((len(rows), units), F32) if bias is None else np.tile(bias.astype(F32), (len(rows), 1))
    # An all-zero input leaves the bias: TFLite skips quantization and the matmul.
    if rows.any():
        q, sf, zp = quantize_rows(rows, o.asymmetric_quantize_inputs)
        # Per-tensor weights fold s_w into the row's factor; per-channel multiplies per output.
        scale = (sf[:, None] * s_w[None, :]).astype(F32) if per_channel else (sf * s_w[0]).astype(F32)[:, None]
        wt, rowsum = _transposed(node, "wt", w)
        out = matvec(q, wt, rowsum, zp, scale, out)
    out = activate(out, o.fused_activation_function)
    return out.reshape(*x.shape[:-1], units) if o.keep_num_dims else out


# -- CONV_2D (kernels/conv.cc: EvalHybridPerChannel / EvalHybrid) ----------------------------------

def _bias_and_clamp(node: Node, out: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    if bias is not None:
        out += bias.astype(F32)
    return activate(out, node.options.fused_activation_function)


def conv_2d(node: Node, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """Distinct per-channel scales take the per-channel kernel: each image quantized asymmetrically,
    acc * s_w[c] * sf_b; otherwise HybridConv: each image symmetric, acc * (sf_b * s_w)."""
    cout = w.shape[0]
    s_w = _weight_scales(node, 1, cout)
    n = x.shape[0]
    images = x.reshape(n, -1)
    if np.any(s_w != s_w[0]):
        q, sf, zp = quantize_asymmetric(images)
        # Taps outside the image are skipped, i.e. they hold the real value 0, so pad q - zp with 0.
        offset = (q - zp.astype(F32)[:, None]).reshape(x.shape)
        sums, shape = conv.conv_sums(node, offset, w, exact_matmul(_OFFSET_PRODUCT))
        acc = sums.reshape(n, -1, cout).astype(F32)
        out = (acc * s_w).astype(F32) * sf[:, None, None]
    else:
        q, sf = quantize_symmetric(images)
        sf = (sf * s_w[0]).astype(F32)
        sums, shape = conv.conv_sums(node, q.reshape(x.shape), w, exact_matmul(_PRODUCT))
        out = sums.reshape(n, -1, cout).astype(F32) * sf[:, None, None]
    return _bias_and_clamp(node, out.astype(F32).reshape(shape), bias)


# -- DEPTHWISE_CONV_2D (reference/integer_ops/depthwise_conv.h: DepthwiseConvHybridPerChannel) ------

def depthwise_conv_2d(node: Node, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    _, kh, kw, cout = w.shape
    if kh * kw * _OFFSET_PRODUCT > _EXACT:
        raise node.fail(f"filter {kh}x{kw} is too large for exact float32 sums")
    s_w = _weight_scales(node, 1, cout)
    n = x.shape[0]
    q, sf, zp = quantize_asymmetric(x.reshape(n, -1))
    offset = (q - zp.astype(F32)[:, None]).reshape(x.shape)
    acc = conv.depthwise_sums(node, offset, w)
    # Unlike CONV_2D, the two scales are multiplied together first.
    scale = (s_w[None, :] * sf[:, None]).astype(F32)
    out = acc * scale[:, None, None, :]
    return _bias_and_clamp(node, out.astype(F32), bias)


# -- TRANSPOSE_CONV (kernels/transpose_conv.cc: EvalHybrid -> reference_ops::HybridTransposeConv) -----

def transpose_conv(node: Node, output_shape: np.ndarray, w: np.ndarray, x: np.ndarray,
                   bias: np.ndarray | None = None) -> np.ndarray:
    """Each image quantized asymmetrically; every input element scatters float32 contributions
    acc * s_w[oc] * sf_b into a zeroed output, in input raster order, then bias and clamp."""
    o = node.options
    cout, kh, kw, cin = w.shape
    s_w = _weight_scales(node, 1, cout)
    n, h, wd, _ = x.shape
    q, sf, zp = quantize_asymmetric(x.reshape(n, -1))
    offset = (q - zp.astype(F32)[:, None]).reshape(x.shape)
    oh, ow = int(output_shape[1]), int(output_shape[2])
    sh, sw = o.stride_h, o.stride_w
    pt, _ = pad_before(o.padding, oh, kh, sh)
    pl, _ = pad_before(o.padding, ow, kw, sw)
    canvas = np.zeros((n, max((h - 1) * sh + kh, pt + oh), max((wd - 1) * sw + kw, pl + ow), cout), F32)
    wf = node.cached("wf", lambda: w.astype(F32))
    scale = sf[:, None, None, None]
    # For one output cell, input raster order (row, column, then channel) is taps in reverse
    # order, then channels: each step below adds one term to every cell, in LiteRT's sequence.
    for ky in reversed(range(kh)):
        for kx in reversed(range(kw)):
            window = canvas[:, ky:ky + sh * (h - 1) + 1:sh, kx:kx + sw * (wd - 1) + 1:sw]
            for ic in range(cin):
                term = ((offset[..., ic:ic + 1] * wf[:, ky, kx, ic]).astype(F32) * s_w).astype(F32) * scale
                window += term.astype(F32)
    out = np.ascontiguousarray(canvas[:, pt:pt + oh, pl:pl + ow])
    return _bias_and_clamp(node, out, bias)
