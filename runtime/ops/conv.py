"""Float convolutions: CONV_2D via im2col + BLAS (or ordered.py), DEPTHWISE_CONV_2D via shifted multiply-adds, TRANSPOSE_CONV."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from runtime.ops.base import Node, activate, as_float32, pad_before, out_size
from runtime.ops.opcheck_base import conv_groups
from runtime.ops.fast_select import conv_work, fast
from runtime.ops.ordered import in_dynamic_range_model, ordered_matmul
from runtime.ops.parallel import row_split


def _geometry(node: Node, x_shape, kh: int, kw: int):
    """Output size and (top, bottom, left, right) padding for a convolution-like op."""
    o = node.options
    dh, dw = getattr(o, "dilation_h_factor", 1), getattr(o, "dilation_w_factor", 1)
    _, h, w, _ = x_shape
    oh = out_size(o.padding, h, kh, o.stride_h, dh)
    ow = out_size(o.padding, w, kw, o.stride_w, dw)
    pt, pb = pad_before(o.padding, h, kh, o.stride_h, dh)
    pl, pr = pad_before(o.padding, w, kw, o.stride_w, dw)
    return oh, ow, (pt, pb, pl, pr)


def _padded(node: Node, x: np.ndarray, pads, pad_value: float = 0.0) -> np.ndarray:
    """x as float32 inside a border of `pad_value` (0, or an integer input's zero point); the
    bordered buffer is kept, so only the interior is copied (and converted, in the same pass)."""
    pt, pb, pl, pr = pads
    if not any(pads):
        return as_float32(x)
    n, h, w, c = x.shape
    xp = node.buffer("padded", (n, h + pt + pb, w + pl + pr, c), np.float32, fill=pad_value)
    xp[:, pt:pt + h, pl:pl + w] = x
    return xp


def _im2col(node: Node, xp: np.ndarray, oh: int, ow: int, kh: int, kw: int, cout: int) -> np.ndarray:
    """Patches as rows [N*OH*OW, KH*KW*C]: one copy per filter row, each window's (KW, C) block
    read as one strided run rather than KW separate channel-length pieces."""
    o = node.options
    n, _, _, c = xp.shape
    sh, sw, dh, dw = o.stride_h, o.stride_w, o.dilation_h_factor, o.dilation_w_factor
    if kw * c <= _SHORT_RUN and cout > 1:  # one output channel is a GEMV, whose sums differ
        return _im2col_transposed(node, xp, oh, ow, kh, kw)
    cols = node.buffer("cols", (n, oh, ow, kh, kw, c))
    for ky in range(kh):
        rows = xp[:, ky * dh:ky * dh + sh * (oh - 1) + 1:sh]
        s0, s1, s2, s3 = rows.strides
        # In bounds: the padded width covers (ow - 1) * sw + (kw - 1) * dw + 1 columns.
        cols[:, :, :, ky] = as_strided(rows, (n, oh, ow, kw, c), (s0, s1, sw * s2, dw * s2, s3), writeable=False)
    return cols.reshape(n * oh * ow, kh * kw * c)


# Below this many elements per (KW, C) window run, e.g. a first layer on RGB, each copy's inner
# loop is too short to be efficient, and patches are better gathered one tap at a time.
_SHORT_RUN = 24


def _im2col_transposed(node: Node, xp: np.ndarray, oh: int, ow: int, kh: int, kw: int) -> np.ndarray:
    """The same patch matrix, built as its transpose [KH*KW*C, N*OH*OW]: one copy per tap whose
    inner loop runs along an output row. BLAS takes the transposed view without a copy; sgemm
    packs A the same either way, so the sums are bit-identical (not so sgemv's, for Cout = 1)."""
    o = node.options
    n, _, _, c = xp.shape
    sh, sw, dh, dw = o.stride_h, o.stride_w, o.dilation_h_factor, o.dilation_w_factor
    cols = node.buffer("cols_t", (kh, kw, c, n, oh, ow))
    for ky in range(kh):
        for kx in range(kw):
            window = xp[:, ky * dh:ky * dh + sh * (oh - 1) + 1:sh, kx * dw:kx * dw + sw * (ow - 1) + 1:sw]
            cols[ky, kx] = window.transpose(3, 0, 1, 2)
    return cols.reshape(kh * kw * c, n * oh * ow).T


def conv_sums(node: Node, x: np.ndarray, w: np.ndarray, matmul=np.matmul, pad_value: float = 0.0) -> np.ndarray:
    """Σ over taps and input channels, as rows [N*OH*OW, Cout]; padding holds `pad_value`; no
    bias. `matmul` lets the integer kernels swap in their exact product; x may be integer."""
    cout, kh, kw, cin = w.shape
    groups = conv_groups(x.shape[3], cin, cout)
    if groups is None:
        raise node.fail(f"input has {x.shape[3]} channels, filter expects {cin} (or a multiple dividing its "
                        f"{cout} outputs into groups)")
    if groups > 1:
        return _grouped_sums(node, x, w, groups, matmul, pad_value)
    o = node.options
    oh, ow, pads = _geometry(node, x.shape, kh, kw)
    w2 = node.cached("w2", lambda: np.ascontiguousarray(w.transpose(1, 2, 3, 0).reshape(kh * kw * cin, cout),
                                                         dtype=np.float32))
    if kh == kw == 1 and o.stride_h == o.stride_w == 1 and not any(pads):
        cols = as_float32(x).reshape(-1, cin)
    else:
        cols = _im2col(node, _padded(node, x, pads, pad_value), oh, ow, kh, kw, cout)
    out = node.buffer("out", (cols.shape[0], cout))
    step = oh * ow
    if matmul is not np.matmul or x.shape[0] == 1 or not step:  # exact or ordered sums: any row count
        return matmul(cols, w2, out=out), (x.shape[0], oh, ow, cout)
    for r in range(0, cols.shape[0], step):  # BLAS's float sums for a row move with the row count:
        matmul(cols[r:r + step], w2, out=out[r:r + step])  # image by image, as each runs alone
    return out, (x.shape[0], oh, ow, cout)


def _grouped_sums(node: Node, x: np.ndarray, w: np.ndarray, groups: int, matmul, pad_value: float):
    """A grouped convolution as TFLite's reference kernel computes it: group g's filters read only its
    block of input channels; the outputs keep the filters' order."""
    cout, _, _, cin = w.shape
    per = cout // groups
    parts = [conv_sums(_group_node(node, g), x[..., g * cin:(g + 1) * cin], w[g * per:(g + 1) * per],
                       matmul, pad_value) for g in range(groups)]
    shape = parts[0][1][:3] + (cout,)
    return np.concatenate([sums for sums, _ in parts], axis=1), shape


def _group_node(node: Node, g: int) -> Node:
    """The node as one group's product sees it: its own cache, so each group keeps its own filter and buffers."""
    return Node(node.index, node.op, node.graph, node.cached(f"group{g}", dict), node.model_state)


def _ordered(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    out[...] = ordered_matmul(a, b)
    return out


def conv_2d(node: Node, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    # Feeding a hybrid op's run-time quantization, an ulp matters: reference_ops::Conv's order then.
    dynamic_range = in_dynamic_range_model(node.graph)
    grouped = x.shape[3] != w.shape[3]   # the fast kernels compute one group; grouped ones run here
    if not dynamic_range and not grouped and (f := fast("fast_conv", conv_work(node, x, w))) is not None:  # runtime/ops/fast_conv.py
        return f.conv_2d(node, x, w, bias)
    out, shape = conv_sums(node, x, w, _ordered if dynamic_range else np.matmul)
    if bias is not None:
        out += bias
    return activate(out.reshape(shape), node.options.fused_activation_function)


def _phases(node: Node, x: np.ndarray, pads, sh: int, sw: int, pad_value: float,
            needed: set[tuple[int, int]]) -> dict[tuple[int, int], np.ndarray]:
    """Split the padded input into stride phases, so that every tap becomes a stride-1 window
    whose (width, channel) axes merge into one long contiguous row for NumPy's inner loop.
    Each phase plane is filled straight from x (no padded copy first); borders are kept. Only
    the `needed` phases are built (a stride above the filter size leaves most unread)."""
    if sh == sw == 1:
        return {(0, 0): _padded(node, x, pads, pad_value)}
    pt, pb, pl, pr = pads
    n, h, w, c = x.shape

    def along(p: int, before: int, size: int, total: int, stride: int):
        """Plane length, first in-image plane index, first image index, for phase p."""
        first = max(0, -(-(before - p) // stride))
        return -(-(total - p) // stride), first, p + first * stride - before

    planes = {}
    for py, px in sorted(needed):
        ph, j0, r0 = along(py, pt, h, h + pt + pb, sh)
        pw, i0, c0 = along(px, pl, w, w + pl + pr, sw)
        plane = node.buffer(f"phase{py},{px}", (n, ph, pw, c), np.float32, fill=pad_value)
        inner = x[:, r0::sh, c0::sw] if r0 < h and c0 < w else x[:, :0, :0]
        plane[:, j0:j0 + inner.shape[1], i0:i0 + inner.shape[2]] = inner
        planes[(py, px)] = plane
    return planes


def depthwise_conv_2d(node: Node, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    if (f := fast("fast_conv", conv_work(node, x, w))) is not None:  # the same sums in the same order, in numba
        return f.depthwise_conv_2d(node, x, w, bias)
    out = depthwise_sums(node, x, w, bias)
    return activate(out, node.options.fused_activation_function)


def depthwise_filter(node: Node, x: np.ndarray, w: np.ndarray) -> tuple[int, int, int, int]:
    """(KH, KW, Cout, depth multiplier) of a DEPTHWISE_CONV_2D filter [1, KH, KW, Cout] over x's
    channels, whose multiple Cout must be."""
    _, kh, kw, cout = w.shape
    cin = x.shape[3]
    mult = cout // cin if cin else 1
    if cin * mult != cout:
        raise node.fail(f"filter has {cout} channels, not a multiple of the input's {cin}")
    return kh, kw, cout, mult


def depthwise_sums(node: Node, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None,
                   pad_value: float = 0.0) -> np.ndarray:
    """Per-channel Σ over taps (+ bias), padding holds `pad_value`, float32 [N, OH, OW, Cout]."""
    o = node.options
    kh, kw, cout, mult = depthwise_filter(node, x, w)
    n = x.shape[0]
    if mult > 1:
        x = np.repeat(x, mult, axis=3)  # output channel c*mult+m reads input channel c
    oh, ow, pads = _geometry(node, x.shape, kh, kw)
    sh, sw, dh, dw = o.stride_h, o.stride_w, o.dilation_h_factor, o.dilation_w_factor
    planes = _phases(node, x, pads, sh, sw, pad_value,
                     {(ky * dh % sh, kx * dw % sw) for ky in range(kh) for kx in range(kw)})
    # Per tap: (plane, row offset, column offset, weights tiled along the output row).
    wrow = node.cached("wrow", lambda: np.tile(w[0][:, :, None, :].astype(np.float32), (1, 1, ow, 1))
                       .reshape(kh, kw, ow * cout))
    taps = [(planes[(ky * dh % sh, kx * dw % sw)], ky * dh // sh, kx * dw // sw, wrow[ky, kx])
            for ky in range(kh) for kx in range(kw)]
    out = node.buffer("out", (n, oh, ow * cout))
    brow = None if bias is None else node.cached("brow", lambda: np.tile(bias.astype(np.float32), ow))

    def rows(lo: int, hi: int) -> None:
        # Each thread keeps its own scratch row block across invokes (no page faults per call).
        acc, tmp = out[:, lo:hi], node.buffer(f"tmp{lo}", (n, hi - lo, ow * cout))
        for k, (p, oy, ox, wr) in enumerate(taps):
            view = p[:, oy + lo:oy + hi, ox:ox + ow].reshape(n, hi - lo, ow * cout)
            if k == 0:
                np.multiply(view, wr, out=acc)
            else:
                np.multiply(view, wr, out=tmp)
                acc += tmp
        if brow is not None:
            acc += brow

    row_split(rows, oh, out.size)
    return out.reshape(n, oh, ow, cout)


def transpose_conv(node: Node, output_shape: np.ndarray, w: np.ndarray, x: np.ndarray,
                   bias: np.ndarray | None = None) -> np.ndarray:
    out = transpose_sums(node, output_shape, w, x)
    if bias is not None:
        out += bias
    return activate(out, node.options.fused_activation_function)


def transpose_sums(node: Node, output_shape: np.ndarray, w: np.ndarray, x: np.ndarray,
                   matmul=np.matmul) -> np.ndarray:
    """Scatter every input pixel's products into the output (col2im), cropped by the padding."""
    o = node.options
    cout, kh, kw, cin = w.shape
    n, h, wd, _ = x.shape
    oh, ow = int(output_shape[1]), int(output_shape[2])
    pt, _ = pad_before(o.padding, oh, kh, o.stride_h)
    pl, _ = pad_before(o.padding, ow, kw, o.stride_w)
    w2 = node.cached("w2", lambda: np.ascontiguousarray(w.reshape(cout, kh * kw, cin).transpose(2, 1, 0)
                                                         .reshape(cin, kh * kw * cout), dtype=np.float32))
    cols = matmul(x.reshape(-1, cin), w2).reshape(n, h, wd, kh, kw, cout)
    ch = max((h - 1) * o.stride_h + kh, pt + oh)
    cw = max((wd - 1) * o.stride_w + kw, pl + ow)
    canvas = np.zeros((n, ch, cw, cout), cols.dtype)
    for ky in range(kh):
        for kx in range(kw):
            canvas[:, ky:ky + o.stride_h * (h - 1) + 1:o.stride_h,
                   kx:kx + o.stride_w * (wd - 1) + 1:o.stride_w, :] += cols[:, :, :, ky, kx, :]
    return np.ascontiguousarray(canvas[:, pt:pt + oh, pl:pl + ow, :])
