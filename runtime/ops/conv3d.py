"""CONV_3D and CONV_3D_TRANSPOSE in float32 (tflite/kernels/conv3d.cc, conv3d_transpose.cc and their
reference kernels): NDHWC data, filters [D, H, W, in, out] and [D, H, W, out, in].

Both run one BLAS product per filter tap, over the block of positions where that tap lands inside
the volume: no padded copy or patch matrix is built, so a large dilation or padding costs nothing.
Padding as the 2-D convolutions (the odd cell after, tflite/kernels/padding.h); taps outside the
volume are skipped, as the reference kernels skip them.
"""

from __future__ import annotations

import numpy as np

from runtime.ops.base import Node, activate, out_size, pad_before

F32 = np.float32


def _axes(o):
    return ((o.stride_d, o.dilation_d_factor), (o.stride_h, o.dilation_h_factor), (o.stride_w, o.dilation_w_factor))


def tap_range(out: int, size: int, pad: int, stride: int, offset: int) -> tuple[int, int]:
    """Outputs [lo, hi) whose input o * stride - pad + offset falls inside [0, size)."""
    lo = max(0, -((offset - pad) // stride))               # ceil((pad - offset) / stride)
    hi = min(out, (size - 1 + pad - offset) // stride + 1) if size - 1 + pad - offset >= 0 else 0
    return lo, max(lo, hi)


def conv_3d(node: Node, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    o = node.options
    n, *size, _ = x.shape
    kernel, cout = w.shape[:3], w.shape[4]
    axes = _axes(o)
    outs = [out_size(o.padding, s, k, st, dl) for s, k, (st, dl) in zip(size, kernel, axes)]
    pads = [pad_before(o.padding, s, k, st, dl)[0] for s, k, (st, dl) in zip(size, kernel, axes)]
    acc = np.zeros((n, *outs, cout), F32)
    xf, wf = x.astype(F32, copy=False), w.astype(F32, copy=False)
    for tap in np.ndindex(*kernel):
        ranges = [tap_range(out, s, p, st, t * dl) for out, s, p, t, (st, dl) in zip(outs, size, pads, tap, axes)]
        if any(lo >= hi for lo, hi in ranges):
            continue
        src = tuple(slice(lo * st - p + t * dl, (hi - 1) * st - p + t * dl + 1, st)
                    for (lo, hi), p, t, (st, dl) in zip(ranges, pads, tap, axes))
        dst = tuple(slice(lo, hi) for lo, hi in ranges)
        acc[(slice(None), *dst)] += xf[(slice(None), *src)] @ wf[tap]
    if bias is not None:
        acc += bias.astype(F32).reshape(-1)
    return activate(acc, o.fused_activation_function)


def conv_3d_transpose(node: Node, output_shape: np.ndarray, w: np.ndarray, x: np.ndarray,
                      bias: np.ndarray | None = None) -> np.ndarray:
    """Every input cell scatters input x filter into the outputs it reaches; contributions past
    the requested output are dropped (reference/conv3d_transpose.h)."""
    o = node.options
    n, *size, _ = x.shape
    kernel = w.shape[:3]
    shape = [int(v) for v in np.asarray(output_shape).reshape(-1)]
    target, axes = shape[1:4], _axes(o)
    pads = [pad_before(o.padding, t, k, st, dl)[0] for t, k, (st, dl) in zip(target, kernel, axes)]
    out = np.zeros((n, *target, shape[4]), F32)
    xf, wf = x.astype(F32, copy=False), w.astype(F32, copy=False)
    for tap in np.ndindex(*kernel):
        # Input cell i lands at i * stride - pad + tap * dilation: the inputs that land inside.
        ranges = [_inputs_inside(s, t_out, p, st, t * dl) for s, t_out, p, t, (st, dl)
                  in zip(size, target, pads, tap, axes)]
        if any(lo >= hi for lo, hi in ranges):
            continue
        dst = tuple(slice(lo * st - p + t * dl, (hi - 1) * st - p + t * dl + 1, st)
                    for (lo, hi), p, t, (st, dl) in zip(ranges, pads, tap, axes))
        src = tuple(slice(lo, hi) for lo, hi in ranges)
        out[(slice(None), *dst)] += xf[(slice(None), *src)] @ wf[tap].T
    if bias is not None:
        out += bias.astype(F32).reshape(-1)
    return activate(out, o.fused_activation_function)


def _inputs_inside(size: int, target: int, pad: int, stride: int, offset: int) -> tuple[int, int]:
    """Inputs [lo, hi) whose position i * stride - pad + offset falls inside [0, target)."""
    return tap_range(size, target, pad, stride, offset)
