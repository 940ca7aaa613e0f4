"""Data-movement kernels: reshape, transpose, concat, pad, slicing, split, pack, gather, space<->depth."""

from __future__ import annotations

import numpy as np

from runtime.ops.base import Node, activate, axis_of
from runtime.ir.options import MirrorPadMode


def reshape(node: Node, x: np.ndarray, shape: np.ndarray | None = None) -> np.ndarray:
    if shape is not None and np.asarray(shape).ndim == 1 and np.asarray(shape).size:
        target = [int(d) for d in shape]
    elif node.options is not None and node.options.new_shape:
        target = list(node.options.new_shape)
    else:
        target = list(node.output().shape)
    try:
        return x.reshape(target)
    except ValueError:
        raise node.fail(f"cannot reshape {list(x.shape)} to {target}") from None


def squeeze(node: Node, x: np.ndarray) -> np.ndarray:
    dims = node.options.squeeze_dims if node.options else ()
    if not dims:
        return np.squeeze(x)
    return np.squeeze(x, axis=tuple(axis_of(d, x.ndim, node) for d in dims))


def expand_dims(node: Node, x: np.ndarray, axis: np.ndarray) -> np.ndarray:
    a = int(np.asarray(axis).reshape(-1)[0])
    if a < 0:
        a += x.ndim + 1
    return np.expand_dims(x, a)


def transpose(node: Node, x: np.ndarray, perm: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.transpose(x, [int(p) for p in perm]))


def concatenation(node: Node, *xs: np.ndarray) -> np.ndarray:
    o = node.options
    out = np.concatenate(xs, axis=axis_of(o.axis, xs[0].ndim, node))
    return activate(out, o.fused_activation_function) if out.dtype.kind == "f" else out


def _pad_widths(node: Node, x: np.ndarray, paddings: np.ndarray):
    p = np.asarray(paddings).reshape(-1, 2)
    if p.shape[0] != x.ndim:
        raise node.fail(f"paddings have {p.shape[0]} rows for an input of rank {x.ndim}")
    return [(int(a), int(b)) for a, b in p]


def pad(node: Node, x: np.ndarray, paddings: np.ndarray) -> np.ndarray:
    # Quantized tensors pad with the zero point, so "zero" means the real value 0 (PAD keeps its
    # input's quantization, so the input's zero point is the output's).
    q = node.input(0).quant
    fill = q.zero_point[0] if q is not None and x.dtype.kind in "iu" else 0
    return np.pad(x, _pad_widths(node, x, paddings), constant_values=fill)


def padv2(node: Node, x: np.ndarray, paddings: np.ndarray, value: np.ndarray | None = None) -> np.ndarray:
    fill = np.asarray(value).reshape(-1)[0] if value is not None else 0
    return np.pad(x, _pad_widths(node, x, paddings), constant_values=fill)


def mirror_pad(node: Node, x: np.ndarray, paddings: np.ndarray) -> np.ndarray:
    mode = "reflect" if node.options.mode is MirrorPadMode.REFLECT else "symmetric"
    return np.pad(x, _pad_widths(node, x, paddings), mode=mode)


def _bit(mask: int, i: int) -> bool:
    return bool(mask >> i & 1)


def strided_slice(node: Node, x: np.ndarray, begin: np.ndarray, end: np.ndarray,
                  strides: np.ndarray | None = None) -> np.ndarray:
    o = node.options
    begin, end = [int(v) for v in begin], [int(v) for v in end]
    strides = [int(v) for v in strides] if strides is not None else [1] * len(begin)
    index: list = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides)):
        if s == 0:
            raise node.fail(f"stride {i} is zero")
        if _bit(o.ellipsis_mask, i):
            index.append(Ellipsis)
        elif _bit(o.new_axis_mask, i):
            index.append(np.newaxis)
        elif _bit(o.shrink_axis_mask, i):
            index.append(b)
        else:
            stop = b + e if o.offset else e
            index.append(slice(None if _bit(o.begin_mask, i) else b,
                               None if _bit(o.end_mask, i) else stop, s))
    return np.array(x[tuple(index)], copy=True)


def slice_(node: Node, x: np.ndarray, begin: np.ndarray, size: np.ndarray) -> np.ndarray:
    index = tuple(slice(int(b), None if int(s) < 0 else int(b) + int(s)) for b, s in zip(begin, size))
    return np.array(x[index], copy=True)


def split(node: Node, axis: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, ...]:
    a = axis_of(int(np.asarray(axis).reshape(-1)[0]), x.ndim, node)
    n = node.options.num_splits
    if x.shape[a] % n:
        raise node.fail(f"dimension {a} of size {x.shape[a]} does not split into {n} equal parts")
    return tuple(np.ascontiguousarray(p) for p in np.split(x, n, axis=a))


def split_v(node: Node, x: np.ndarray, sizes: np.ndarray, axis: np.ndarray) -> tuple[np.ndarray, ...]:
    a = axis_of(int(np.asarray(axis).reshape(-1)[0]), x.ndim, node)
    sizes = [int(s) for s in sizes]
    if -1 in sizes:
        sizes[sizes.index(-1)] = x.shape[a] - (sum(sizes) + 1)
    cuts = np.cumsum(sizes)[:-1]
    return tuple(np.ascontiguousarray(p) for p in np.split(x, cuts, axis=a))


def pack(node: Node, *xs: np.ndarray) -> np.ndarray:
    return np.stack(xs, axis=axis_of(node.options.axis, xs[0].ndim + 1, node))


def unpack(node: Node, x: np.ndarray) -> tuple[np.ndarray, ...]:
    a = axis_of(node.options.axis, x.ndim, node)
    return tuple(np.ascontiguousarray(p) for p in np.moveaxis(x, a, 0))


def shape(node: Node, x: np.ndarray) -> np.ndarray:
    return np.array(x.shape, dtype=node.output().dtype.np)


def gather(node: Node, params: np.ndarray, indices: np.ndarray) -> np.ndarray:
    o = node.options
    axis = axis_of(o.axis, params.ndim, node)
    bad = (indices < 0) | (indices >= params.shape[axis])
    if np.any(bad):
        raise node.fail(f"gather index {int(indices[bad].reshape(-1)[0])} out of range [0, {params.shape[axis]})")
    bd = o.batch_dims % indices.ndim if o.batch_dims < 0 else o.batch_dims
    if bd == 0:
        return np.take(params, indices, axis=axis)
    lead = params.shape[:bd]
    p = params.reshape(-1, *params.shape[bd:])
    ix = indices.reshape(-1, *indices.shape[bd:])
    parts = [np.take(p[k], ix[k], axis=axis - bd) for k in range(p.shape[0])]
    return np.stack(parts).reshape(*lead, *parts[0].shape)


def depth_to_space(node: Node, x: np.ndarray) -> np.ndarray:
    b = node.options.block_size
    n, h, w, c = x.shape
    y = x.reshape(n, h, w, b, b, c // (b * b)).transpose(0, 1, 3, 2, 4, 5)
    return np.ascontiguousarray(y.reshape(n, h * b, w * b, c // (b * b)))


def space_to_depth(node: Node, x: np.ndarray) -> np.ndarray:
    b = node.options.block_size
    n, h, w, c = x.shape
    y = x.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5)
    return np.ascontiguousarray(y.reshape(n, h // b, w // b, b * b * c))
