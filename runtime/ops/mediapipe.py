"""MediaPipe's custom ops that its published segmentation models carry (float32 only, as MediaPipe's kernels).

Their parameters are raw C structs in the op's bytes, not FlexBuffers: TfLiteTransposeConvParams
(padding, stride_w, stride_h) and TfLitePoolParams (padding, stride_w, stride_h, filter_w,
filter_h, activation), each field a little-endian int32. The kernels follow
mediapipe/util/tflite/operations/{transpose_conv_bias,max_pool_argmax,max_unpooling}.cc, and TFLite's
GPU delegate has kernels for all three.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from runtime.ops.base import Node, activate
from runtime.ops.custom_spec import CustomOp
from runtime.ir.options import Activation

# TfLitePadding and TfLiteFusedActivation as the C API numbers them.
_SAME, _VALID = 1, 2
_ACTIVATIONS = {0: Activation.NONE, 1: Activation.RELU, 2: Activation.RELU_N1_TO_1, 3: Activation.RELU6,
                4: Activation.TANH, 5: Activation.SIGN_BIT}
_MAX_WINDOW = 1 << 12     # strides and filter sizes real models use are single digits


@dataclass(frozen=True)
class StructParams:
    padding: int
    stride_w: int
    stride_h: int
    filter_w: int = 1
    filter_h: int = 1
    activation: int = 0


def _ints(blob: bytes, count: int, what: str) -> tuple[int, ...]:
    if len(blob) < 4 * count:
        raise ValueError(f"{what} needs {4 * count} bytes of parameters, the op has {len(blob)}")
    return struct.unpack_from(f"<{count}i", blob)


def _checked(p: StructParams) -> StructParams:
    if p.padding not in (_SAME, _VALID):
        raise ValueError(f"padding {p.padding} is neither SAME (1) nor VALID (2)")
    for name in ("stride_w", "stride_h", "filter_w", "filter_h"):
        if not 1 <= getattr(p, name) <= _MAX_WINDOW:
            raise ValueError(f"{name} is {getattr(p, name)}, must be in [1, {_MAX_WINDOW}]")
    if p.activation not in _ACTIVATIONS:
        raise ValueError(f"fused activation {p.activation} is not one TFLite defines")
    return p


def parse_transpose(blob: bytes) -> StructParams:
    return _checked(StructParams(*_ints(blob, 3, "Convolution2DTransposeBias")))


def parse_pool(blob: bytes) -> StructParams:
    return _checked(StructParams(*_ints(blob, 6, "a pooling op")))


def _padding(stride: int, in_size: int, k: int, out_size: int) -> int:
    """TFLite's ComputePadding with dilation 1: half the overhang, never negative."""
    return max(((out_size - 1) * stride + k - in_size) // 2, 0)


def _float_inputs(ins: Sequence[tuple], ranks: Sequence[int], what: str) -> None:
    if len(ins) != len(ranks) or any(len(s) != r for s, r in zip(ins, ranks)):
        raise ValueError(f"{what} takes inputs of ranks {list(ranks)}, got shapes {[list(s) for s in ins]}")


# -- Convolution2DTransposeBias -----------------------------------------------------------------------


def _transpose_pads(p: StructParams, h: int, w: int, kh: int, kw: int) -> tuple[int, int]:
    if p.padding != _SAME:
        return 0, 0
    return max(0, kh - (h - 1) % p.stride_h - 1), max(0, kw - (w - 1) % p.stride_w - 1)


def transpose_shapes(ins, p: StructParams):
    _float_inputs(ins, (4, 4, 1), "Convolution2DTransposeBias")
    x, wt, bias = ins
    if wt[3] != x[3] or bias[0] != wt[0]:
        raise ValueError(f"weights {list(wt)} do not fit input {list(x)} and bias {list(bias)}")
    ph, pw = _transpose_pads(p, x[1], x[2], wt[1], wt[2])
    return [(x[0], p.stride_h * (x[1] - 1) + wt[1] - ph, p.stride_w * (x[2] - 1) + wt[2] - pw, wt[0])]


def transpose_conv_bias(node: Node, x: np.ndarray, w: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Scatter each input pixel's products over the output (col2im), then crop half the padding."""
    p: StructParams = node.params
    cout, kh, kw, cin = w.shape
    n, h, wd, _ = x.shape
    ph, pw = _transpose_pads(p, h, wd, kh, kw)
    oh, ow = p.stride_h * (h - 1) + kh - ph, p.stride_w * (wd - 1) + kw - pw
    w2 = node.cached("w2", lambda: np.ascontiguousarray(
        w.reshape(cout, kh * kw, cin).transpose(2, 1, 0).reshape(cin, kh * kw * cout), dtype=np.float32))
    cols = (x.reshape(-1, cin) @ w2).reshape(n, h, wd, kh, kw, cout)
    canvas = np.zeros((n, (h - 1) * p.stride_h + kh, (wd - 1) * p.stride_w + kw, cout), np.float32)
    for ky in range(kh):
        for kx in range(kw):
            canvas[:, ky:ky + p.stride_h * (h - 1) + 1:p.stride_h,
                   kx:kx + p.stride_w * (wd - 1) + 1:p.stride_w] += cols[:, :, :, ky, kx]
    top, left = ph // 2, pw // 2
    return canvas[:, top:top + oh, left:left + ow] + bias


# -- MaxPoolingWithArgmax2D ----------------------------------------------------------------------------


def _pool_out(p: StructParams, h: int, w: int) -> tuple[int, int]:
    if p.padding == _SAME:
        return (h + p.stride_h - 1) // p.stride_h, (w + p.stride_w - 1) // p.stride_w
    return (h - p.filter_h + p.stride_h) // p.stride_h, (w - p.filter_w + p.stride_w) // p.stride_w


def argmax_shapes(ins, p: StructParams):
    _float_inputs(ins, (4,), "MaxPoolingWithArgmax2D")
    n, h, w, c = ins[0]
    oh, ow = _pool_out(p, h, w)
    if oh < 1 or ow < 1:
        raise ValueError(f"a {p.filter_h}x{p.filter_w} window does not fit a {h}x{w} input")
    return [(n, oh, ow, c), (n, oh, ow, c)]


def max_pool_argmax(node: Node, x: np.ndarray):
    """Each window's maximum and where in the window it lies (row-major, the first of equal
    maxima), written as a float with 0.1 added so that a later truncation gives the integer."""
    p: StructParams = node.params
    n, h, w, c = x.shape
    oh, ow = _pool_out(p, h, w)
    pt, pl = _padding(p.stride_h, h, p.filter_h, oh), _padding(p.stride_w, w, p.filter_w, ow)
    span_h, span_w = (oh - 1) * p.stride_h + p.filter_h, (ow - 1) * p.stride_w + p.filter_w
    padded = np.full((n, max(span_h, pt + h), max(span_w, pl + w), c), -np.inf, np.float32)
    padded[:, pt:pt + h, pl:pl + w] = x
    taps = np.stack([padded[:, fy:fy + (oh - 1) * p.stride_h + 1:p.stride_h,
                            fx:fx + (ow - 1) * p.stride_w + 1:p.stride_w]
                     for fy in range(p.filter_h) for fx in range(p.filter_w)])
    where = np.argmax(taps, axis=0)
    best = np.take_along_axis(taps, where[None], axis=0)[0]
    best = np.where(np.isneginf(best), np.finfo(np.float32).min, best).astype(np.float32)
    index = (where + np.float32(0.1)).astype(np.float32)
    return activate(best, _ACTIVATIONS[p.activation]), index


# -- MaxUnpooling2D ----------------------------------------------------------------------------------


def unpool_shapes(ins, p: StructParams):
    _float_inputs(ins, (4, 4), "MaxUnpooling2D")
    x, idx = ins
    if tuple(idx) != tuple(x):
        raise ValueError(f"indices {list(idx)} must have the input's shape {list(x)}")
    return [(x[0], x[1] * p.filter_h, x[2] * p.filter_w, x[3])]


def max_unpooling(node: Node, x: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Put each value back where its window's argmax says; positions outside the output are skipped."""
    p: StructParams = node.params
    n, h, w, c = x.shape
    oh, ow = h * p.filter_h, w * p.filter_w
    pt, pl = _padding(p.stride_h, oh, p.filter_h, h), _padding(p.stride_w, ow, p.filter_w, w)
    idx = np.trunc(np.nan_to_num(indices, nan=0.0, posinf=2**30, neginf=-2**30)).astype(np.int64)
    dy, dx = np.fix(idx / p.filter_w).astype(np.int64), np.fmod(idx, p.filter_w)   # C's / and %
    ys = np.arange(h)[None, :, None, None] * p.stride_h - pt + dy
    xs = np.arange(w)[None, None, :, None] * p.stride_w - pl + dx
    ok = (ys >= 0) & (ys < oh) & (xs >= 0) & (xs < ow)
    b = np.broadcast_to(np.arange(n)[:, None, None, None], x.shape)
    ch = np.broadcast_to(np.arange(c)[None, None, None, :], x.shape)
    out = np.zeros((n, oh, ow, c), np.float32)
    out[b[ok], ys[ok], xs[ok], ch[ok]] = x[ok]
    return out


_F = frozenset({"float32"})
SPECS = (
    CustomOp("Convolution2DTransposeBias", transpose_conv_bias, parse_transpose, transpose_shapes, gpu=True,
             input_types=(_F,) * 3, output_types=("float32",)),
    CustomOp("MaxPoolingWithArgmax2D", max_pool_argmax, parse_pool, argmax_shapes, gpu=True,
             input_types=(_F,), output_types=("float32",) * 2),
    CustomOp("MaxUnpooling2D", max_unpooling, parse_pool, unpool_shapes, gpu=True,
             input_types=(_F,) * 2, output_types=("float32",)),
)
