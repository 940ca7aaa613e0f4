"""Memory limits: the bytes a plan needs, computed from shapes alone before anything is allocated,
and the limit they are held to (by default half of the machine's physical memory)."""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

from runtime.ir.errors import ModelError
from runtime.ir.graph import Graph
from runtime.ops.opcheck import pad_amounts, pool_taps
from runtime.ops.opcheck_misc import scratch_bytes as misc_scratch
from runtime.ir.optypes import OpType
from runtime.ir.options import Padding, options_or_default

__all__ = ["ENV_VAR", "Need", "default_limit", "limit_scope", "resolve_limit", "format_bytes", "plan_need",
           "timing_need", "check_need", "op_scratch", "array_bytes"]

ENV_VAR = "DTB_MEMORY_LIMIT_MB"
_FALLBACK = 4 << 30  # where the machine does not say how much memory it has
_scoped: int | None = None  # set by limit_scope (the CLI's --memory_limit_mb)

Shape = Sequence[int]


def physical_memory() -> int | None:
    """The machine's physical memory in bytes, or None where the OS does not say."""
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    return pages * size if pages > 0 and size > 0 else None


@contextlib.contextmanager
def limit_scope(limit: int | None) -> Iterator[None]:
    """Within the block, default_limit() is `limit` (bytes; None leaves it as it is)."""
    global _scoped
    previous = _scoped
    if limit is not None:
        _scoped = resolve_limit(limit)
    try:
        yield
    finally:
        _scoped = previous


def default_limit() -> int:
    """The innermost limit_scope's limit; else $DTB_MEMORY_LIMIT_MB if set; else half of physical
    memory (4 GiB where the machine does not say)."""
    if _scoped is not None:
        return _scoped
    text = os.environ.get(ENV_VAR)
    if text:
        try:
            mb = float(text)
        except ValueError:
            raise ModelError(f"{ENV_VAR}={text!r} is not a number of megabytes") from None
        if not (math.isfinite(mb) and mb > 0):
            raise ModelError(f"{ENV_VAR}={text!r} must be a positive number of megabytes")
        return int(mb * (1 << 20))
    total = physical_memory()
    return total // 2 if total else _FALLBACK


def resolve_limit(limit: int | float | None) -> int:
    """A memory limit in bytes: the given one, or the default."""
    if limit is None:
        return default_limit()
    # At least one byte: a fraction would truncate to a limit of 0, which every reader refuses.
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not (math.isfinite(limit) and limit >= 1):
        raise ValueError(f"memory_limit must be a positive number of bytes, not {limit!r}")
    return int(limit)


def format_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def array_bytes(shape: Shape, itemsize: int) -> int:
    return math.prod(shape) * itemsize


@dataclass(frozen=True)
class Need:
    """What a plan holds at once: constants, every activation (the interpreter keeps them all),
    each node's kept scratch (padded inputs, patch matrices), the largest op's temporaries, and
    what delegates hold of their partitions."""

    constants: int
    activations: int
    scratch: int
    delegates: int
    largest: str           # the part that dominates, described
    largest_bytes: int

    @property
    def total(self) -> int:
        return self.constants + self.activations + self.scratch + self.delegates

    def describe(self) -> str:
        parts = [("activations", self.activations), ("constants", self.constants), ("scratch", self.scratch),
                 ("delegate buffers", self.delegates)]
        listed = ", ".join(f"{name} {format_bytes(n)}" for name, n in parts if n)
        return f"{format_bytes(self.total)} ({listed})"


def plan_need(graph: Graph, shapes: Sequence[Shape], delegated: Iterable[int] = ()) -> Need:
    """The bytes the interpreter's plan needs at these tensor shapes; `delegated`: op indices a
    delegate runs (their tensors are held again, as float32, by the delegate)."""
    tensors = graph.tensors
    constants = activations = 0
    largest, largest_bytes = "", -1
    for t, tensor in enumerate(tensors):
        item = tensor.dtype.np.itemsize
        if tensor.is_constant:
            n = tensor.data.nbytes * (2 if tensor.is_variable else 1)  # a variable is copied to reset it
            constants += n
        else:
            n = array_bytes(shapes[t], item)
            activations += n
        if n > largest_bytes:
            largest, largest_bytes = (f"{graph.describe_tensor(t)} {list(shapes[t])} {tensor.dtype.name}"), n
    kept = peak = 0
    for i, op in enumerate(graph.ops):
        keep, temp = op_scratch(graph, i, shapes.__getitem__)
        kept += keep
        peak = max(peak, temp)
        if keep > largest_bytes:
            largest, largest_bytes = f"the scratch {graph.describe_op(i)} keeps", keep
    delegate = 0
    touched: set[int] = set()
    for i in delegated:
        op = graph.ops[i]
        touched.update(t for t in (*op.inputs, *op.outputs) if t >= 0)
        delegate += op_scratch(graph, i, shapes.__getitem__)[0]
    delegate += sum(math.prod(shapes[t]) * max(4, tensors[t].dtype.np.itemsize) for t in touched)
    return Need(constants, activations, kept + peak, delegate, largest, largest_bytes)


def timing_need(graph: Graph, shapes: Sequence[Shape], folded: Iterable[int], delegated: Iterable[int] = ()) -> Need:
    """What a timing-only plan holds: no op's math runs at invoke, so nothing is allocated but the
    constants, the graph's inputs, what folding the constant-only ops computes once at allocation
    (their outputs, their scratch and the largest one's temporaries) and the copies of their
    weights the delegates' kernels keep (`delegated`: op indices, as float32 at most). A model
    whose activations would not fit can still be timed."""
    tensors = graph.tensors
    folded = list(folded)
    constants = sum(t.data.nbytes for t in tensors if t.is_constant)
    held = [*graph.inputs, *(t for i in folded for t in graph.ops[i].outputs if t >= 0)]
    activations = sum(array_bytes(shapes[t], tensors[t].dtype.np.itemsize) for t in set(held)
                      if not tensors[t].is_constant)
    kept = peak = 0
    for i in folded:
        keep, temp = op_scratch(graph, i, shapes.__getitem__)
        kept, peak = kept + keep, max(peak, temp)
    weights = {t for i in delegated for t in graph.ops[i].inputs if t >= 0 and tensors[t].is_constant}
    delegate = sum(math.prod(shapes[t]) * max(4, tensors[t].dtype.np.itemsize) for t in weights)
    parts = [("the constants", constants), ("the inputs and folded outputs", activations), ("scratch", kept + peak),
             ("the delegates' weights", delegate)]
    largest, largest_bytes = max(parts, key=lambda p: p[1])
    return Need(constants, activations, kept + peak, delegate, largest, largest_bytes)


def check_need(need: Need, limit: int, label: str, what: str = "the model") -> None:
    if need.total > limit:
        raise ModelError(f"{label}: {what} needs {need.describe()}, above the memory limit of "
                         f"{format_bytes(limit)}; the largest part is {need.largest} "
                         f"({format_bytes(need.largest_bytes)})")


# -- per-op scratch ---------------------------------------------------------------------------------


def op_scratch(graph: Graph, i: int, shape_of: Callable[[int], Shape]) -> tuple[int, int]:
    """(bytes a node keeps across invokes, bytes of its temporaries while it runs): the padded
    copies, patch matrices, cached weights and output buffers runtime/ops allocate."""
    op = graph.ops[i]
    ins = [tuple(shape_of(t)) if t >= 0 else None for t in op.inputs]
    outs = [tuple(shape_of(t)) for t in op.outputs]
    o = options_or_default(op.type.name, op.options)
    out = sum(math.prod(s) for s in outs)
    # Temporaries while it runs: the 8-bit kernels widen inputs and output to int64 (and clip,
    # requantize, where() each make one); float kernels a few copies of their output (where(), exp, clip).
    eight_bit = any(graph.tensors[t].dtype.np.itemsize == 1 for t in (*op.inputs, *op.outputs) if t >= 0)
    if eight_bit:
        temp = 8 * (sum(math.prod(s) for s in ins if s is not None) + 3 * out)
    else:
        temp = 4 * sum(math.prod(s) * graph.tensors[t].dtype.np.itemsize for t, s in zip(op.outputs, outs))
    if op.type is OpType.DEPTHWISE_CONV_2D and len(ins) > 1 and ins[0] and ins[1] and ins[0][-1] != ins[1][-1]:
        temp += 4 * math.prod(ins[0][:-1]) * ins[1][-1]  # the input repeated per depth multiplier
    temp += misc_scratch(op.type, ins, outs)  # index arrays, generator words, FFT copies (runtime/ops/opcheck_misc.py)
    try:
        keep = _kept(op.type, o, ins, outs)
    except (TypeError, ValueError, IndexError, AttributeError):  # shapes the checks refuse anyway
        keep = 0
    return keep, temp


# Recurrent ops and SVDF (runtime/ops/lstm.py, hybrid_lstm.py, rnn.py, lstm_variants.py, svdf.py).
_RECURRENT = frozenset({OpType.UNIDIRECTIONAL_SEQUENCE_LSTM, OpType.LSTM, OpType.BIDIRECTIONAL_SEQUENCE_LSTM,
                        OpType.RNN, OpType.UNIDIRECTIONAL_SEQUENCE_RNN, OpType.BIDIRECTIONAL_SEQUENCE_RNN,
                        OpType.SVDF})


def _kept(kind: OpType, o, ins: list, outs: list) -> int:
    f32 = 4
    if kind is OpType.CONV_2D and len(ins) > 1 and len(ins[0]) == 4 and len(ins[1]) == 4:
        # runtime/ops/conv.py: the reshaped filter, the output rows, the padded input and the
        # patch matrix (neither for a 1x1 stride-1 unpadded filter); 8-bit: its requantized rows.
        n, h, w, cin = ins[0]
        cout, kh, kw, _ = ins[1]
        _, oh, ow, _ = outs[0]
        pt, pb = pad_amounts(o.padding, h, kh, o.stride_h, o.dilation_h_factor)
        pl, pr = pad_amounts(o.padding, w, kw, o.stride_w, o.dilation_w_factor)
        pads = pt + pb + pl + pr
        padded = n * (h + pt + pb) * (w + pl + pr) * cin if pads else 0
        pointwise = kh == kw == 1 and o.stride_h == o.stride_w == 1 and not pads
        cols = 0 if pointwise else n * oh * ow * kh * kw * cin
        return f32 * (padded + cols + 2 * n * oh * ow * cout + 2 * cout * kh * kw * cin)
    if kind is OpType.DEPTHWISE_CONV_2D and len(ins) > 1 and len(ins[0]) == 4 and len(ins[1]) == 4:
        # The stride-phase planes of the padded input, the filter tiled along an output row,
        # the output and one scratch block the size of the output.
        n, h, w, cin = ins[0]
        _, kh, kw, cout = ins[1]
        _, oh, ow, _ = outs[0]
        pt, pb = pad_amounts(o.padding, h, kh, o.stride_h, o.dilation_h_factor)
        pl, pr = pad_amounts(o.padding, w, kw, o.stride_w, o.dilation_w_factor)
        phases = n * (h + pt + pb + o.stride_h) * (w + pl + pr + o.stride_w) * cout
        return f32 * (phases + kh * kw * ow * cout + 2 * n * oh * ow * cout)
    if kind is OpType.TRANSPOSE_CONV and len(ins) > 2 and len(ins[1]) == 4 and len(ins[2]) == 4:
        cout, kh, kw, _ = ins[1]
        n, h, w, cin = ins[2]
        _, oh, ow, _ = outs[0]
        pt, _ = pad_amounts(o.padding, oh, kh, o.stride_h)
        pl, _ = pad_amounts(o.padding, ow, kw, o.stride_w)
        canvas = n * max((h - 1) * o.stride_h + kh, pt + oh) * max((w - 1) * o.stride_w + kw, pl + ow) * cout
        return 8 * (n * h * w * kh * kw * cout + canvas + cout * kh * kw * cin)
    if kind in (OpType.AVERAGE_POOL_2D, OpType.MAX_POOL_2D) and ins and len(ins[0]) == 4:
        n, h, w, c = ins[0]
        _, oh, ow, _ = outs[0]
        rows = _pool_extent(o.padding, h, oh, o.filter_height, o.stride_h)
        cols = _pool_extent(o.padding, w, ow, o.filter_width, o.stride_w)
        return 8 * (n * rows * cols * c + 2 * n * oh * ow * c)
    if kind in (OpType.FULLY_CONNECTED, OpType.BATCH_MATMUL) and len(ins) > 1:
        return 8 * (math.prod(ins[1]) + 2 * sum(math.prod(s) for s in outs))
    if kind in (OpType.RESIZE_BILINEAR, OpType.RESIZE_NEAREST_NEIGHBOR) and ins and len(ins[0]) == 4:
        n, h, w, c = ins[0]
        _, oh, ow, _ = outs[0]
        return 8 * (2 * n * oh * w * c + 6 * n * oh * ow * c)
    if kind in _RECURRENT:  # weights prepared as float32 (hybrid: with row sums), outputs per step
        return 8 * (sum(math.prod(s) for s in ins[1:] if s is not None) + 2 * sum(math.prod(s) for s in outs))
    return 0


def _pool_extent(padding: Padding, size: int, out: int, k: int, stride: int) -> int:
    """Rows (or columns) of the padded copy a pool makes: only the taps that reach the image."""
    _, _, top, bottom = pool_taps(size, out, k, stride, pad_amounts(padding, size, k, stride)[0])
    return size + top + bottom
