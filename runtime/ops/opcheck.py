"""Per-op checks made before any kernel runs: the inputs, options and quantization each kernel
relies on, and the output shapes it will produce (TFLite's Prepare, for the ops the testbed runs)."""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from runtime.ir import options as opt
from runtime.ir.errors import ModelError
from runtime.ir.graph import DType, Graph, Tensor, printable
from runtime.ir.optypes import DATA_INPUT, OpType
from runtime.ops.opcheck_math import RULES as _MATH_RULES, float_in_out
from runtime.ops.opcheck_index import OWN_OUTPUT_TYPE as _INDEX_OWN_TYPES, RULES as _INDEX_RULES
from runtime.ops.opcheck_seq import RULES as _SEQ_RULES
from runtime.ops.opcheck_misc import RULES as _MISC_RULES
from runtime.ops.opcheck_control import RULES as _CONTROL_RULES, resource_allowed

__all__ = ["Checked", "check_graph", "check_op", "check_options", "checked", "derived_constants", "out_size",
           "pad_amounts", "pool_taps"]

Shape = tuple[int, ...]
ShapeOf = Callable[[int], Shape]
ValueOf = Callable[[int], "np.ndarray | None"]

# Element types no kernel computes on (NumPy object arrays; packed int4 is refused by name when
# the plan is built).
_NO_KERNEL_TYPES = {DType.STRING, DType.RESOURCE, DType.VARIANT, DType.BFLOAT16}
_EIGHT_BIT = {DType.INT8, DType.UINT8}
_INDEX_TYPES = {DType.INT32, DType.INT64}
_QRANGE = {DType.INT8: (-128, 127), DType.UINT8: (0, 255), DType.INT32: (-(2**31), 2**31 - 1)}
# Scales the 8-bit kernels can take: their float32 arithmetic (a fused activation's bound over the
# scale, a multiplier from a ratio of scales) stays finite. Real models' scales lie far inside.
_SCALES = (2.0**-100, 2.0**100)

# Ops whose 8-bit kernels read scales and zero points (runtime/ops/q*.py); on 8-bit data the
# others only move elements, or have no 8-bit kernel and are refused when the plan is built.
_QUANT_KERNEL_OPS = frozenset({
    OpType.CONV_2D, OpType.DEPTHWISE_CONV_2D, OpType.TRANSPOSE_CONV, OpType.FULLY_CONNECTED,
    OpType.BATCH_MATMUL, OpType.SQUARED_DIFFERENCE, OpType.ADD, OpType.SUB, OpType.MUL, OpType.RELU,
    OpType.RELU6, OpType.RELU_N1_TO_1, OpType.PRELU, OpType.LEAKY_RELU, OpType.LOGISTIC, OpType.TANH,
    OpType.HARD_SWISH, OpType.QUANTIZE, OpType.AVERAGE_POOL_2D, OpType.MAX_POOL_2D, OpType.MEAN,
    OpType.SUM, OpType.SOFTMAX, OpType.CONCATENATION, OpType.RSQRT,
})

# The schema's options table of ops that have one but no typed class here (read as GenericOptions).
_GENERIC_TABLES = {
    OpType.PAD: "PadOptions", OpType.PADV2: "PadV2Options", OpType.EXPAND_DIMS: "ExpandDimsOptions",
    OpType.TRANSPOSE: "TransposeOptions", OpType.SLICE: "SliceOptions", OpType.EXP: "ExpOptions",
    OpType.LOG_SOFTMAX: "LogSoftmaxOptions", OpType.ABS: "AbsOptions", OpType.NEG: "NegOptions",
    OpType.HARD_SWISH: "HardSwishOptions", OpType.MAXIMUM: "MaximumMinimumOptions",
    OpType.MINIMUM: "MaximumMinimumOptions", OpType.SQUARED_DIFFERENCE: "SquaredDifferenceOptions",
    OpType.DEQUANTIZE: "DequantizeOptions", OpType.QUANTIZE: "QuantizeOptions",
    OpType.DENSIFY: "DensifyOptions",
}

def out_size(padding: opt.Padding, size: int, k: int, stride: int, dilation: int = 1) -> int:
    """Output extent along one axis (tflite/kernels/padding.h), as runtime.ops.base computes it."""
    eff = (k - 1) * dilation + 1
    if padding is opt.Padding.SAME:
        return (size + stride - 1) // stride
    return (size - eff + stride) // stride


def pad_amounts(padding: opt.Padding, size: int, k: int, stride: int, dilation: int = 1) -> tuple[int, int]:
    """(before, after) padding along one axis; the odd one goes after."""
    out = out_size(padding, size, k, stride, dilation)
    total = max((out - 1) * stride + (k - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def pool_taps(size: int, out: int, k: int, stride: int, before: int) -> tuple[int, int, int, int]:
    """The filter taps along one axis that reach the image for some output, [first, end), and
    the padding (before, after) those taps need. Taps outside it read only padding for every
    window, which changes neither a max nor an in-image sum: a huge SAME window costs no more
    than the image."""
    first = max(0, before - (out - 1) * stride)
    end = min(k, before + size)
    return first, end, max(0, before - first), max(0, (out - 1) * stride - before + end - size)


def _fmt(shape: Sequence[int]) -> str:
    return str(list(shape))


class _Op:
    """One op under check: its input shapes and known values, and messages naming op, tensor and field."""

    __slots__ = ("graph", "index", "op", "opts", "shape_of", "value_of", "deferred", "eight_bit", "model")

    def __init__(self, graph: Graph, index: int, shape_of: ShapeOf, value_of: ValueOf, model: Graph | None = None):
        self.graph, self.index, self.op = graph, index, graph.ops[index]
        self.model = graph if model is None else model  # the main graph, holding the subgraphs ops may run
        self.opts = opt.options_or_default(self.op.type.name, self.op.options)
        self.shape_of, self.value_of = shape_of, value_of
        self.deferred = False
        k = DATA_INPUT.get(self.op.type)
        data = (self.op.inputs[k] if k < len(self.op.inputs) else -1) if k is not None else None
        first = (graph.tensors[data] if data >= 0 else None) if data is not None else next(
            (graph.tensors[t] for t in self.op.inputs if t >= 0 and not graph.tensors[t].is_constant), None)
        # The same choice runtime.ops.select_kernel makes: 8-bit data takes the integer kernel.
        self.eight_bit = (first is not None and first.dtype in _EIGHT_BIT and self.op.type is not OpType.DEQUANTIZE
                          and self.op.type in _QUANT_KERNEL_OPS)

    def check_subgraph(self, sub: Graph, shapes: dict[int, Shape]) -> None:
        """Check another subgraph of the model at the input shapes this op hands it (IF, WHILE)."""
        check_graph(sub, shapes, strict=False, model=self.model)

    # -- naming ---------------------------------------------------------------------------------

    def fail(self, message: str) -> ModelError:
        return ModelError(f"{self.graph.describe_op(self.index)}: {message}")

    def slot(self, k: int) -> int:
        return self.op.inputs[k] if k < len(self.op.inputs) else -1

    def name(self, k: int) -> str:
        t = self.slot(k)
        return f"input {self.graph.describe_tensor(t)}" if t >= 0 else f"input {k}"

    def out_name(self, j: int = 0) -> str:
        return f"output {self.graph.describe_tensor(self.op.outputs[j])}"

    # -- access ---------------------------------------------------------------------------------

    def has(self, k: int) -> bool:
        return self.slot(k) >= 0

    def tensor(self, k: int) -> Tensor:
        t = self.slot(k)
        if t < 0:
            raise self.fail(f"input {k} is required but absent")
        return self.graph.tensors[t]

    def out_tensor(self, j: int = 0) -> Tensor:
        return self.graph.tensors[self.op.outputs[j]]

    def shape(self, k: int) -> Shape:
        self.tensor(k)
        return tuple(self.shape_of(self.slot(k)))

    def rank(self, k: int, *ranks: int, positive: bool = False) -> Shape:
        s = self.shape(k)
        if ranks and len(s) not in ranks:
            want = " or ".join(str(r) for r in ranks)
            raise self.fail(f"{self.name(k)} has shape {_fmt(s)}; rank {want} expected")
        if positive and any(d < 1 for d in s):
            raise self.fail(f"{self.name(k)} has shape {_fmt(s)}; every dimension must be at least 1")
        return s

    def arity(self, lo: int, hi: int | None, outs: int | None) -> None:
        n = len(self.op.inputs)
        if n < lo or (hi is not None and n > hi):
            want = f"{lo}" if hi == lo else (f"at least {lo}" if hi is None else f"{lo} to {hi}")
            raise self.fail(f"has {n} inputs, {want} expected")
        for k in range(lo):
            if self.slot(k) < 0:
                raise self.fail(f"input {k} is required but absent")
        if outs is not None and len(self.op.outputs) != outs:
            raise self.fail(f"has {len(self.op.outputs)} outputs, {outs} expected")
        if not self.op.outputs:
            raise self.fail("has no outputs")

    def value(self, k: int) -> np.ndarray | None:
        """The value of input k when known (a constant; at run time, any tensor); else None, and
        the op's output shapes are then checked again when it runs."""
        v = self.value_of(self.slot(k))
        if v is None:
            self.deferred = True
        return v

    def ints(self, k: int, what: str, size: int | None = None, min_size: int = 0) -> list[int] | None:
        """Input k's integer values, flattened, or None when not known before the op runs."""
        tensor = self.tensor(k)
        if tensor.dtype not in _INDEX_TYPES:
            raise self.fail(f"{self.name(k)} ({what}) is {tensor.dtype.name}; INT32 or INT64 expected")
        n = math.prod(self.shape(k))
        if size is not None and n != size:
            raise self.fail(f"{self.name(k)} ({what}) has {n} values, {size} expected")
        if n < min_size:
            raise self.fail(f"{self.name(k)} ({what}) has {n} values, at least {min_size} expected")
        v = self.value(k)
        return None if v is None else [int(x) for x in np.asarray(v).reshape(-1)]

    def option(self, field: str, lo: int | None = None, hi: int | None = None) -> int:
        value = getattr(self.opts, field)
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            bound = f">= {lo}" if hi is None else (f"<= {hi}" if lo is None else f"in [{lo}, {hi}]")
            raise self.fail(f"options.{field} is {value}, must be {bound}")
        return value

    def axis(self, value: int, rank: int, field: str) -> int:
        if not -rank <= value < rank:
            raise self.fail(f"{field} {value} is out of range for rank {rank}")
        return value % rank

    def typed(self, k: int, allowed, what: str) -> DType:
        """Input k's element type, which must be one of `allowed`; `what` names its role."""
        dtype = self.tensor(k).dtype
        if dtype not in allowed:
            names = ", ".join(d.name for d in allowed)
            raise self.fail(f"{self.name(k)} ({what}) is {dtype.name}; {self.op.type.name} takes {names}")
        return dtype

    def same_type(self, *ks: int) -> None:
        types = {self.tensor(k).dtype for k in ks}
        if len(types) > 1:
            listed = ", ".join(f"{self.name(k)} is {self.tensor(k).dtype.name}" for k in ks)
            raise self.fail(f"input types differ: {listed}")

    def out_type(self, dtype: DType, j: int = 0) -> None:
        if self.out_tensor(j).dtype is not dtype:
            raise self.fail(f"{self.out_name(j)} is {self.out_tensor(j).dtype.name}, {dtype.name} expected")

    # -- quantization ---------------------------------------------------------------------------

    def quantized(self, *slots: int | str) -> None:
        """Per-tensor quantization on each named input (or "out"), as an 8-bit kernel reads it."""
        for k in slots:
            tensor, label = (self.out_tensor(), self.out_name()) if k == "out" else (self.tensor(k), self.name(k))
            q = tensor.quant
            if q is None:
                raise self.fail(f"{label} is {tensor.dtype.name} without quantization parameters, "
                                f"which the 8-bit kernel needs")
            if not _SCALES[0] <= q.scale[0] <= _SCALES[1]:
                raise self.fail(f"{label} has quantization scale {q.scale[0]:.7g}; the 8-bit kernel needs a positive "
                                f"scale in [2**-100, 2**100]")
            lo, hi = _QRANGE.get(tensor.dtype, (-(2**31), 2**31 - 1))
            if not lo <= q.zero_point[0] <= hi:
                raise self.fail(f"{label} has zero point {q.zero_point[0]} outside {tensor.dtype.name}'s "
                                f"range [{lo}, {hi}]")

    def weights(self, k: int, channels: int, axis: int) -> None:
        """8-bit weights: quantized per tensor or per channel along the output-channel axis."""
        tensor = self.tensor(k)
        q = tensor.quant
        if q is None:
            raise self.fail(f"{self.name(k)} is {tensor.dtype.name} weights without quantization parameters")
        if len(q.scale) not in (1, channels):
            raise self.fail(f"{self.name(k)} has {len(q.scale)} quantization scales for {channels} output channels")
        if len(q.scale) > 1 and channels > 1 and q.axis != axis:
            raise self.fail(f"{self.name(k)} is quantized along dimension {q.axis}; the kernel needs {axis}")
        if not all(map(math.isfinite, q.scale)) or min(q.scale) < 0 or max(q.scale) > _SCALES[1]:
            raise self.fail(f"{self.name(k)} has a quantization scale that is negative, non-finite or above 2**100")


# -- geometry -------------------------------------------------------------------------------------


def _window(c: _Op, x: Shape, kh: int, kw: int, dilated: bool) -> tuple[int, int]:
    """Strides, dilations and padding of a windowed op; its output height and width."""
    o = c.opts
    if not isinstance(o.padding, opt.Padding):
        raise c.fail(f"options.padding is {o.padding!r}, not SAME or VALID")
    sh, sw = c.option("stride_h", 1), c.option("stride_w", 1)
    dh = c.option("dilation_h_factor", 1) if dilated else 1
    dw = c.option("dilation_w_factor", 1) if dilated else 1
    _, h, w, _ = x
    for axis, size, k, d in (("height", h, kh, dh), ("width", w, kw, dw)):
        eff = (k - 1) * d + 1
        if o.padding is opt.Padding.VALID and eff > size:
            raise c.fail(f"filter {axis} {k}" + (f" (dilated to {eff})" if d > 1 else "")
                         + f" exceeds the input {axis} {size} with VALID padding")
    return out_size(o.padding, h, kh, sh, dh), out_size(o.padding, w, kw, sw, dw)


def _bias(c: _Op, k: int, channels: int) -> None:
    if c.has(k):
        b = c.rank(k, 1)
        if b[0] != channels:
            raise c.fail(f"{c.name(k)} has shape {_fmt(b)}; {channels} values (one per output channel) expected")
        if c.eight_bit and c.tensor(k).dtype is not DType.INT32:
            raise c.fail(f"{c.name(k)} is {c.tensor(k).dtype.name}; an 8-bit op takes an INT32 bias")


def _hybrid(c: _Op, data: int, k: int, channels: int, axis: int) -> None:
    """Float data with 8-bit constant weights (dynamic-range quantization): the hybrid kernels
    need int8 weights with symmetric scales, one per tensor or per output channel."""
    x, w = c.tensor(data), c.tensor(k)
    if x.dtype.np.kind != "f" or not w.is_constant or w.dtype not in _EIGHT_BIT:
        return
    name = printable(w.name)
    if w.dtype is not DType.INT8:
        raise c.fail(f"{w.dtype.name} weights '{name}' with float input: only int8 hybrid weights are supported")
    if w.quant is None:
        raise c.fail(f"int8 weights '{name}' carry no quantization scale")
    c.weights(k, channels, axis)
    if any(z != 0 for z in w.quant.zero_point):
        raise c.fail(f"int8 weights '{name}' have a non-zero zero point; hybrid kernels need symmetric weights")


def _weights_type(c: _Op, data: int, k: int) -> None:
    if c.eight_bit and c.tensor(k).dtype is not c.tensor(data).dtype:
        raise c.fail(f"{c.name(k)} is {c.tensor(k).dtype.name} weights for {c.tensor(data).dtype.name} data")


# -- rules: each returns the op's output shapes (None where only the run can tell) ---------------


def _binary(c: _Op):
    c.arity(2, 2, 1)
    a, b = c.shape(0), c.shape(1)
    x, y = c.tensor(0), c.tensor(1)
    # Float data with 8-bit constant weights is left to the plan, which names the missing hybrid kernel.
    if x.dtype is not y.dtype and not (x.dtype.np.kind == "f" and y.is_constant and y.dtype in _EIGHT_BIT):
        c.same_type(0, 1)
    try:
        out = tuple(np.broadcast_shapes(a, b))
    except ValueError:
        raise c.fail(f"shapes {_fmt(a)} of {c.graph.describe_tensor(c.slot(0))} and {_fmt(b)} of "
                     f"{c.graph.describe_tensor(c.slot(1))} do not broadcast") from None
    if c.eight_bit:
        c.quantized(0, 1, "out")
    return [out]


def _unary(c: _Op):
    c.arity(1, 1, 1)
    x = c.shape(0)
    if c.eight_bit:
        c.quantized(0, "out")
    return [x]


def _rsqrt(c: _Op):
    """elementwise.cc IsRsqrtSupportedType: float32 or int8 (and int16), never uint8."""
    if c.tensor(0).dtype is DType.UINT8:
        raise c.fail(f"{c.name(0)} is UINT8; RSQRT takes FLOAT32 or INT8")
    return _unary(c)


def _softmax(c: _Op):
    c.arity(1, 1, 1)
    x = c.shape(0)
    if not x or x[-1] < 1:
        raise c.fail(f"{c.name(0)} has shape {_fmt(x)}; softmax needs a last dimension of at least 1")
    if c.eight_bit:
        c.quantized(0)
        beta = c.opts.beta if c.opts is not None else 1.0
        if not (math.isfinite(beta) and beta > 0):
            raise c.fail(f"options.beta is {beta:.7g}; the 8-bit kernel needs a positive finite beta")
    return [x]


def _leaky_relu(c: _Op):
    out = _unary(c)
    if c.eight_bit and not math.isfinite(c.opts.alpha):
        raise c.fail(f"options.alpha is {c.opts.alpha}; the 8-bit kernel needs a finite alpha")
    return out


def _dequantize(c: _Op):
    c.arity(1, 1, 1)
    x = c.tensor(0)
    if x.dtype.np.kind in "iu":
        if x.quant is None:
            raise c.fail(f"{c.name(0)} is {x.dtype.name} without quantization parameters")
    elif x.dtype is not DType.FLOAT16:
        raise c.fail(f"{c.name(0)} is {x.dtype.name}; DEQUANTIZE reads quantized integers or FLOAT16")
    c.out_type(DType.FLOAT32)
    return [c.shape(0)]


def _quantize(c: _Op):
    c.arity(1, 1, 1)
    y = c.out_tensor()
    if y.dtype is DType.INT16:  # 16x8 quantization: the plan refuses it, naming the tensor
        return [c.shape(0)]
    if y.dtype not in _EIGHT_BIT:
        raise c.fail(f"{c.out_name()} is {y.dtype.name}; QUANTIZE writes INT8 or UINT8")
    x = c.tensor(0)
    if x.dtype.np.kind == "f":
        if y.quant is None:
            raise c.fail(f"{c.out_name()} has no quantization parameters")
        if not all(math.isfinite(s) and s > 0 for s in y.quant.scale):
            raise c.fail(f"{c.out_name()} has a zero, negative or non-finite quantization scale")
    elif x.dtype in _EIGHT_BIT:
        c.quantized(0, "out")
    else:
        raise c.fail(f"{c.name(0)} is {x.dtype.name}; QUANTIZE reads float or 8-bit data")
    return [c.shape(0)]


def _cast(c: _Op):
    c.arity(1, 1, 1)
    return [c.shape(0)]


def _conv(c: _Op):
    c.arity(2, 3, 1)
    x = c.rank(0, 4, positive=True)
    w = c.rank(1, 4, positive=True)
    cout, kh, kw, cin = w
    if x[3] != cin:
        raise c.fail(f"{c.name(0)} has {x[3]} channels, filter {c.name(1)} of shape {_fmt(w)} expects {cin}"
                     + (" (grouped convolution is not supported)" if x[3] % cin == 0 else ""))
    _bias(c, 2, cout)
    oh, ow = _window(c, x, kh, kw, dilated=True)
    if c.eight_bit:
        _weights_type(c, 0, 1)
        c.quantized(0, "out")
        c.weights(1, cout, 0)
    _hybrid(c, 0, 1, cout, 0)
    return [(x[0], oh, ow, cout)]


def _depthwise(c: _Op):
    c.arity(2, 3, 1)
    x = c.rank(0, 4, positive=True)
    w = c.rank(1, 4, positive=True)
    _, kh, kw, cout = w
    if w[0] != 1:
        raise c.fail(f"filter {c.name(1)} has shape {_fmt(w)}; its first dimension must be 1")
    if cout % x[3]:
        raise c.fail(f"filter {c.name(1)} has {cout} channels, not a multiple of the {x[3]} channels of {c.name(0)}")
    _bias(c, 2, cout)
    oh, ow = _window(c, x, kh, kw, dilated=True)
    if c.eight_bit:
        _weights_type(c, 0, 1)
        c.quantized(0, "out")
        c.weights(1, cout, 3)
    _hybrid(c, 0, 1, cout, 3)
    # The integer kernels sum a filter's products exactly in float32 (runtime/ops/qconv.py, hybrid.py).
    product = (255 * 255 if c.tensor(0).dtype is DType.UINT8 else 128 * 128) if c.eight_bit else 255 * 128
    if (c.eight_bit or c.tensor(1).dtype in _EIGHT_BIT) and kh * kw * product > 2**24:
        raise c.fail(f"filter {c.name(1)} of {kh}x{kw} is too large for exact float32 sums")
    return [(x[0], oh, ow, cout)]


def _transpose_conv(c: _Op):
    c.arity(3, 4, 1)
    w = c.rank(1, 4, positive=True)
    x = c.rank(2, 4, positive=True)
    cout, kh, kw, cin = w
    if x[3] != cin:
        raise c.fail(f"{c.name(2)} has {x[3]} channels, filter {c.name(1)} of shape {_fmt(w)} expects {cin}")
    _bias(c, 3, cout)
    o = c.opts
    if not isinstance(o.padding, opt.Padding):
        raise c.fail(f"options.padding is {o.padding!r}, not SAME or VALID")
    c.option("stride_h", 1)
    c.option("stride_w", 1)
    if c.eight_bit:
        _weights_type(c, 2, 1)
        c.quantized(2, "out")
        c.weights(1, cout, 0)
    _hybrid(c, 2, 1, cout, 0)
    shape = c.ints(0, "output shape", size=4)
    if shape is None:
        return [None]
    if any(d < 1 for d in shape) or shape[0] != x[0] or shape[3] != cout:
        raise c.fail(f"{c.name(0)} asks for output shape {shape}; positive, batch {x[0]} and {cout} channels expected")
    return [tuple(shape)]


def _fully_connected(c: _Op):
    c.arity(2, 3, 1)
    o = c.opts
    x = c.rank(0)
    w = c.rank(1, 2, positive=True)
    units, depth = w
    if o.weights_format != 0:
        raise c.fail(f"options.weights_format is {o.weights_format}; only the default layout (0) is supported")
    size = math.prod(x)
    if not x or size % depth:
        raise c.fail(f"{c.name(0)} of shape {_fmt(x)} does not split into rows of {depth} for weights {c.name(1)}")
    if o.keep_num_dims and x[-1] != depth:
        raise c.fail(f"{c.name(0)} has shape {_fmt(x)}; keep_num_dims needs its last dimension to be {depth}")
    _bias(c, 2, units)
    if c.eight_bit:
        _weights_type(c, 0, 1)
        c.quantized(0, "out")
        c.weights(1, units, 0)
    _hybrid(c, 0, 1, units, 0)
    return [x[:-1] + (units,) if o.keep_num_dims else (size // depth, units)]


def _batch_matmul(c: _Op):
    c.arity(2, 2, 1)
    o = c.opts
    a, b = c.shape(0), c.shape(1)
    if len(a) < 2 or len(b) < 2:
        raise c.fail(f"{c.name(0)} {_fmt(a)} and {c.name(1)} {_fmt(b)} must both have rank 2 or more")
    m, k = (a[-1], a[-2]) if o.adj_x else (a[-2], a[-1])
    k2, n = (b[-1], b[-2]) if o.adj_y else (b[-2], b[-1])
    if k != k2:
        raise c.fail(f"inner dimensions differ: {k} of {c.name(0)} {_fmt(a)}, {k2} of {c.name(1)} {_fmt(b)}")
    try:
        batch = tuple(np.broadcast_shapes(a[:-2], b[:-2]))
    except ValueError:
        raise c.fail(f"batch dimensions of {_fmt(a)} and {_fmt(b)} do not broadcast") from None
    if c.eight_bit:
        c.quantized(0, 1, "out")
    return [batch + (m, n)]


def _pool(c: _Op):
    c.arity(1, 1, 1)
    x = c.rank(0, 4, positive=True)
    kh, kw = c.option("filter_height", 1), c.option("filter_width", 1)
    oh, ow = _window(c, x, kh, kw, dilated=False)
    if c.eight_bit:
        c.quantized("out")
    return [(x[0], oh, ow, x[3])]


def _l2_pool(c: _Op):
    out = _pool(c)
    float_in_out(c)
    return out


def _reduce(c: _Op):
    c.arity(2, 2, 1)
    x = c.shape(0)
    axes = c.ints(1, "axes")
    if axes is None:
        return [None]
    picked = {c.axis(a, len(x), "reduction axis") for a in axes}
    if c.op.type in (OpType.REDUCE_MAX, OpType.REDUCE_MIN) and any(x[a] == 0 for a in picked):
        raise c.fail(f"{c.name(0)} has shape {_fmt(x)}; cannot take a maximum or minimum over an empty axis")
    if c.eight_bit:
        c.quantized(0, "out")
    if c.opts.keep_dims:
        return [tuple(1 if a in picked else d for a, d in enumerate(x))]
    return [tuple(d for a, d in enumerate(x) if a not in picked)]


def _concatenation(c: _Op):
    c.arity(1, None, 1)
    shapes = [c.shape(k) for k in range(len(c.op.inputs))]
    rank = len(shapes[0])
    if rank < 1:
        raise c.fail(f"{c.name(0)} is a scalar; CONCATENATION needs rank 1 or more")
    axis = c.axis(c.opts.axis, rank, "options.axis")
    c.same_type(*range(len(shapes)))
    for k, s in enumerate(shapes):
        if len(s) != rank or any(d != e for a, (d, e) in enumerate(zip(s, shapes[0])) if a != axis):
            raise c.fail(f"{c.name(k)} has shape {_fmt(s)}, which does not concatenate with {_fmt(shapes[0])} "
                         f"along axis {axis}")
    if c.eight_bit:
        c.quantized(*range(len(shapes)), "out")
        y = c.out_tensor().quant
        for k in range(len(shapes)):
            q = c.tensor(k).quant
            if c.tensor(k).dtype is DType.INT8 and (np.float32(q.scale[0]) != np.float32(y.scale[0])
                                                     or q.zero_point[0] != y.zero_point[0]):
                raise c.fail(f"int8 {c.name(k)} has scale/zero point {q.scale[0]}/{q.zero_point[0]}, the output "
                             f"{y.scale[0]}/{y.zero_point[0]}; TFLite requires them equal")
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return [tuple(out)]


def _pad(c: _Op):
    c.arity(2, 3 if c.op.type is OpType.PADV2 else 2, 1)
    x = c.shape(0)
    pads = c.ints(1, "paddings", size=2 * len(x))
    if c.op.type is OpType.PADV2 and c.has(2) and math.prod(c.shape(2)) < 1:
        raise c.fail(f"{c.name(2)} (the pad value) is empty")
    if pads is None:
        return [None]
    mode = getattr(c.opts, "mode", None) if c.op.type is OpType.MIRROR_PAD else None
    out = []
    for a, d in enumerate(x):
        before, after = pads[2 * a], pads[2 * a + 1]
        if before < 0 or after < 0:
            raise c.fail(f"{c.name(1)} pads dimension {a} by {[before, after]}; paddings must be >= 0")
        if mode is not None:
            most = d - 1 if mode is opt.MirrorPadMode.REFLECT else d
            if max(before, after) > most:
                raise c.fail(f"{c.name(1)} pads dimension {a} of size {d} by {[before, after]}; "
                             f"{mode.name} allows at most {max(most, 0)}")
        out.append(d + before + after)
    return [tuple(out)]


def _resolve_shape(c: _Op, size: int, target: list[int], where: str) -> Shape:
    if any(d < -1 for d in target) or target.count(-1) > 1:
        raise c.fail(f"{where} {target} is not a shape (dimensions >= 0, at most one -1)")
    known = math.prod(d for d in target if d != -1)
    if -1 in target:
        if known == 0 or size % known:
            raise c.fail(f"cannot reshape {size} elements to {where} {target}")
        return tuple(size // known if d == -1 else d for d in target)
    if known != size:
        raise c.fail(f"cannot reshape {_fmt(c.shape(0))} ({size} elements) to {where} {target}")
    return tuple(target)


def _reshape(c: _Op):
    c.arity(1, 2, 1)
    x = c.shape(0)
    if c.has(1) and len(c.shape(1)) == 1 and c.shape(1)[0] > 0:
        target = c.ints(1, "new shape")
        if target is None:
            return [None]
        where = c.name(1)
    elif c.opts is not None and c.opts.new_shape:
        target, where = list(c.opts.new_shape), "options.new_shape"
    else:
        target, where = list(c.out_tensor().shape), f"the declared shape of {c.out_name()}"
    return [_resolve_shape(c, math.prod(x), target, where)]


def _squeeze(c: _Op):
    c.arity(1, 1, 1)
    x = c.shape(0)
    dims = c.opts.squeeze_dims if c.opts is not None else ()
    if not dims:
        return [tuple(d for d in x if d != 1)]
    picked = [c.axis(d, len(x), "options.squeeze_dims entry") for d in dims]
    if len(set(picked)) != len(picked):
        raise c.fail(f"options.squeeze_dims {list(dims)} repeats an axis")
    for a in picked:
        if x[a] != 1:
            raise c.fail(f"options.squeeze_dims names axis {a} of {c.name(0)} {_fmt(x)}, which is not 1")
    return [tuple(d for a, d in enumerate(x) if a not in picked)]


def _expand_dims(c: _Op):
    c.arity(2, 2, 1)
    x = c.shape(0)
    axis = c.ints(1, "axis", min_size=1)
    if axis is None:
        return [None]
    a = axis[0]
    if not -(len(x) + 1) <= a <= len(x):
        raise c.fail(f"{c.name(1)} is {a}, out of range for rank {len(x)} + 1")
    a = a + len(x) + 1 if a < 0 else a
    return [x[:a] + (1,) + x[a:]]


def _transpose(c: _Op):
    c.arity(2, 2, 1)
    x = c.shape(0)
    perm = c.ints(1, "permutation", size=len(x))
    if perm is None:
        return [None]
    if sorted(perm) != list(range(len(x))):
        raise c.fail(f"{c.name(1)} is {perm}, not a permutation of the {len(x)} axes of {c.name(0)}")
    return [tuple(x[p] for p in perm)]


def _strided_slice(c: _Op):
    c.arity(3, 4, 1)
    x = c.shape(0)
    n = math.prod(c.shape(1))
    begin = c.ints(1, "begin")
    end = c.ints(2, "end", size=n)
    strides = c.ints(3, "strides", size=n) if c.has(3) else [1] * n
    if begin is None or end is None or strides is None:
        return [None]
    o = c.opts
    index: list = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides)):
        if s == 0:
            raise c.fail(f"{c.name(3)} entry {i} is 0")
        if o.ellipsis_mask >> i & 1:
            index.append(Ellipsis)
        elif o.new_axis_mask >> i & 1:
            index.append(None)
        elif o.shrink_axis_mask >> i & 1:
            index.append(b)
        else:
            stop = b + e if o.offset else e
            index.append(slice(None if o.begin_mask >> i & 1 else b, None if o.end_mask >> i & 1 else stop, s))
    # The kernel indexes with NumPy; a zero-stride view of the input's shape gives the same
    # result shape (or error) without allocating anything.
    try:
        return [np.broadcast_to(np.zeros((), np.uint8), x)[tuple(index)].shape]
    except (IndexError, ValueError, TypeError) as exc:
        raise c.fail(f"begin {begin}, end {end}, strides {strides} do not slice {c.name(0)} {_fmt(x)}: {exc}") from None


def _slice(c: _Op):
    c.arity(3, 3, 1)
    x = c.shape(0)
    begin = c.ints(1, "begin", size=len(x))
    size = c.ints(2, "size", size=len(x))
    if begin is None or size is None:
        return [None]
    out = []
    for a, (d, b, s) in enumerate(zip(x, begin, size)):
        if not 0 <= b <= d or s < -1 or (s >= 0 and b + s > d):
            raise c.fail(f"begin {b} and size {s} do not fit dimension {a} of {c.name(0)} {_fmt(x)}")
        out.append(d - b if s == -1 else s)
    return [tuple(out)]


def _split(c: _Op):
    c.arity(2, 2, None)
    x = c.shape(1)
    n = c.option("num_splits", 1)
    if n != len(c.op.outputs):
        raise c.fail(f"options.num_splits is {n}, but the op has {len(c.op.outputs)} outputs")
    axis = c.ints(0, "axis", min_size=1)
    if axis is None:
        return [None] * n
    a = c.axis(axis[0], len(x), "split axis")
    if x[a] % n:
        raise c.fail(f"dimension {a} of {c.name(1)} {_fmt(x)} does not split into {n} equal parts")
    return [x[:a] + (x[a] // n,) + x[a + 1:]] * n


def _split_v(c: _Op):
    c.arity(3, 3, None)
    x = c.shape(0)
    n = len(c.op.outputs)
    sizes = c.ints(1, "size_splits", size=n)
    axis = c.ints(2, "axis", min_size=1)
    if sizes is None or axis is None:
        return [None] * n
    a = c.axis(axis[0], len(x), "split axis")
    if any(s < -1 for s in sizes) or sizes.count(-1) > 1:
        raise c.fail(f"{c.name(1)} {sizes} has a size below -1 or more than one -1")
    rest = x[a] - sum(s for s in sizes if s != -1)
    if (rest < 0) if -1 in sizes else (rest != 0):
        raise c.fail(f"{c.name(1)} {sizes} does not split dimension {a} of size {x[a]}")
    return [x[:a] + (rest if s == -1 else s,) + x[a + 1:] for s in sizes]


def _pack(c: _Op):
    c.arity(1, None, 1)
    n = len(c.op.inputs)
    c.option("values_count", n, n)
    shapes = [c.shape(k) for k in range(n)]
    c.same_type(*range(n))
    for k, s in enumerate(shapes):
        if s != shapes[0]:
            raise c.fail(f"{c.name(k)} has shape {_fmt(s)}, {c.name(0)} {_fmt(shapes[0])}; PACK needs them equal")
    x = shapes[0]
    a = c.axis(c.opts.axis, len(x) + 1, "options.axis")
    return [x[:a] + (n,) + x[a:]]


def _unpack(c: _Op):
    c.arity(1, 1, None)
    x = c.shape(0)
    if not x:
        raise c.fail(f"{c.name(0)} is a scalar; UNPACK needs rank 1 or more")
    a = c.axis(c.opts.axis, len(x), "options.axis")
    c.option("num", x[a], x[a])
    if len(c.op.outputs) != x[a]:
        raise c.fail(f"has {len(c.op.outputs)} outputs for dimension {a} of size {x[a]}")
    return [x[:a] + x[a + 1:]] * x[a]


def _shape(c: _Op):
    c.arity(1, 1, 1)
    if c.out_tensor().dtype not in _INDEX_TYPES:
        raise c.fail(f"{c.out_name()} is {c.out_tensor().dtype.name}; SHAPE writes INT32 or INT64")
    return [(len(c.shape(0)),)]


def _gather(c: _Op):
    c.arity(2, 2, 1)
    p, i = c.shape(0), c.shape(1)
    if c.tensor(1).dtype not in _INDEX_TYPES:
        raise c.fail(f"{c.name(1)} (indices) is {c.tensor(1).dtype.name}; INT32 or INT64 expected")
    if not p:
        raise c.fail(f"{c.name(0)} is a scalar; GATHER needs rank 1 or more")
    o = c.opts
    axis = c.axis(o.axis, len(p), "options.axis")
    bd = o.batch_dims
    if bd < 0:
        if not i:
            raise c.fail(f"options.batch_dims is {bd}, but the indices are a scalar")
        bd %= len(i)
    if bd > axis or bd > len(i) or p[:bd] != i[:bd]:
        raise c.fail(f"options.batch_dims {o.batch_dims} does not fit params {_fmt(p)}, indices {_fmt(i)}, "
                     f"axis {axis}")
    if bd and math.prod(p[:bd]) < 1:
        raise c.fail(f"options.batch_dims {bd} spans an empty batch of {_fmt(p)}")
    return [p[:axis] + i[bd:] + p[axis + 1:]]


def _depth_to_space(c: _Op):
    c.arity(1, 1, 1)
    n, h, w, ch = c.rank(0, 4)
    b = c.option("block_size", 1)
    if ch % (b * b):
        raise c.fail(f"{c.name(0)} has {ch} channels, not a multiple of block_size {b} squared")
    return [(n, h * b, w * b, ch // (b * b))]


def _space_to_depth(c: _Op):
    c.arity(1, 1, 1)
    n, h, w, ch = c.rank(0, 4)
    b = c.option("block_size", 1)
    if h % b or w % b:
        raise c.fail(f"{c.name(0)} is {h}x{w}, not divisible by block_size {b}")
    return [(n, h // b, w // b, ch * b * b)]


def _resize(c: _Op):
    c.arity(2, 2, 1)
    x = c.rank(0, 4, positive=True)
    o = c.opts
    if c.op.type is OpType.RESIZE_BILINEAR and o.align_corners and o.half_pixel_centers:
        raise c.fail("options.align_corners and options.half_pixel_centers cannot both be set")
    size = c.ints(1, "size", size=2)
    if size is None:
        return [None]
    if min(size) < 1:
        raise c.fail(f"{c.name(1)} asks for output size {size}; both must be positive")
    return [(x[0], size[0], size[1], x[3])]


# UNIDIRECTIONAL_SEQUENCE_LSTM input slots (tflite/kernels/lstm_shared.h).
_W_X, _W_H, _PEEP, _LSTM_BIAS = (1, 2, 3, 4), (5, 6, 7, 8), (9, 10, 11), (12, 13, 14, 15)
_PROJ_W, _PROJ_B, _H_STATE, _C_STATE, _NORM = 16, 17, 18, 19, (20, 21, 22, 23)


def _lstm(c: _Op):
    c.arity(1, 24, 1)
    o = c.opts
    x = c.rank(0, 3)
    if c.tensor(0).dtype in _EIGHT_BIT:  # lstm_eval's EvalInteger8x8_16 / 8x8_8: no kernel here yet
        raise c.fail(f"{c.name(0)} is {c.tensor(0).dtype.name}: full-integer LSTMs (8-bit activations, 16-bit "
                     f"cell state) are not supported; float32 and dynamic-range (int8 weights) LSTMs are")
    steps, batch, features = (x[0], x[1], x[2]) if o.time_major else (x[1], x[0], x[2])
    for k in (_H_STATE, _C_STATE):
        if not c.tensor(k).is_variable:
            raise c.fail(f"{c.name(k)} (the {'output' if k == _H_STATE else 'cell'} state) must be a variable tensor")
    h_state, c_state = c.rank(_H_STATE, 2), c.rank(_C_STATE, 2)
    units, out = c_state[1], h_state[1]
    if c_state[0] != batch or h_state[0] != batch:
        raise c.fail(f"state shapes {_fmt(h_state)} and {_fmt(c_state)} do not match batch {batch}")

    def need(k: int, shape: Shape, what: str) -> None:
        got = c.shape(k)
        if got != shape:
            raise c.fail(f"{c.name(k)} ({what}) has shape {_fmt(got)}, {_fmt(shape)} expected")

    gates = (1, 2, 3) if not c.has(_W_X[0]) else (0, 1, 2, 3)
    for g in gates:
        need(_W_X[g], (units, features), "input weights")
        need(_W_H[g], (units, out), "recurrent weights")
    for k in (*_PEEP, *_LSTM_BIAS, *(n for n in _NORM if n < len(c.op.inputs))):
        if c.has(k):
            need(k, (units,), "per-cell vector")
    if c.has(_PROJ_W):
        need(_PROJ_W, (out, units), "projection weights")
        if c.has(_PROJ_B):
            need(_PROJ_B, (out,), "projection bias")
    elif out != units:
        raise c.fail(f"output state has {out} units, the cell {units}, and there is no projection")
    if c.tensor(0).dtype.np.kind == "f":  # dynamic-range weights: int8, one scale each
        if c.opts.diagonal_recurrent_tensors and any(
                c.has(k) and c.tensor(k).is_constant and c.tensor(k).dtype in _EIGHT_BIT for k in _W_H):
            raise c.fail("options.diagonal_recurrent_tensors: a hybrid LSTM with diagonal recurrent weights is "
                         "not supported")
        for k in (*_W_X, *_W_H, *_PEEP, _PROJ_W):
            w = c.tensor(k) if c.has(k) else None
            if w is not None and w.is_constant and w.dtype in _EIGHT_BIT:
                if w.dtype is not DType.INT8 or w.quant is None or len(w.quant.scale) != 1:
                    raise c.fail(f"{c.name(k)} is {w.dtype.name} weights of a hybrid LSTM; INT8 with one "
                                 f"quantization scale expected")
    return [(steps, batch, out) if o.time_major else (batch, steps, out)]


def _densify(c: _Op):
    c.arity(1, 1, 1)
    return [c.shape(0)]


def _custom(c: _Op):
    """A registered custom op checks its inputs and parameters itself; an op no registry knows keeps
    the shapes the file declares (it runs only timing-only, costed from them)."""
    import runtime.ops  # noqa: F401  (registers the custom ops published models carry)
    from runtime.ops import custom_ops as custom

    spec = custom.lookup(c.op.custom_code)
    if spec is None:
        return [None] * len(c.op.outputs)
    where = c.graph.describe_op(c.index)
    params = custom.params(spec, c.op.custom_options, where)
    if spec.input_types is not None:
        if len(c.op.inputs) != len(spec.input_types):
            raise c.fail(f"has {len(c.op.inputs)} inputs, {len(spec.input_types)} expected")
        for k, allowed in enumerate(spec.input_types):
            if c.tensor(k).dtype.np.name not in allowed:
                raise c.fail(f"{c.name(k)} is {c.tensor(k).dtype.name}; {' or '.join(sorted(allowed))} expected")
    if spec.output_types is not None:
        if len(c.op.outputs) != len(spec.output_types):
            raise c.fail(f"has {len(c.op.outputs)} outputs, {len(spec.output_types)} expected")
        for j, want in enumerate(spec.output_types):
            if c.out_tensor(j).dtype.np.name != want:
                raise c.fail(f"{c.out_name(j)} is {c.out_tensor(j).dtype.name}, {want} expected")
    if spec.shapes is None:
        return [None] * len(c.op.outputs)
    try:
        outs = [tuple(int(d) for d in s) for s in spec.shapes([c.shape(k) for k in range(len(c.op.inputs))], params)]
    except (ValueError, TypeError) as exc:
        raise c.fail(str(exc)) from None
    if len(outs) != len(c.op.outputs) or any(d < 0 for s in outs for d in s):
        raise c.fail(f"computes output shapes {[list(s) for s in outs]} for {len(c.op.outputs)} outputs")
    return outs


_RULES: dict[OpType, Callable[[_Op], list]] = {
    OpType.CUSTOM: _custom,
    **{t: _binary for t in (OpType.ADD, OpType.SUB, OpType.MUL, OpType.DIV, OpType.MAXIMUM, OpType.MINIMUM,
                            OpType.SQUARED_DIFFERENCE)},
    OpType.LEAKY_RELU: _leaky_relu,
    **{t: _unary for t in (OpType.RELU, OpType.RELU_N1_TO_1, OpType.RELU6, OpType.ELU,
                           OpType.LOGISTIC, OpType.TANH, OpType.EXP, OpType.LOG, OpType.SQRT,
                           OpType.ABS, OpType.NEG, OpType.HARD_SWISH)},
    OpType.RSQRT: _rsqrt,
    OpType.PRELU: _binary, OpType.SOFTMAX: _softmax, OpType.LOG_SOFTMAX: _softmax,
    OpType.CAST: _cast, OpType.DEQUANTIZE: _dequantize, OpType.QUANTIZE: _quantize, OpType.DENSIFY: _densify,
    OpType.CONV_2D: _conv, OpType.DEPTHWISE_CONV_2D: _depthwise, OpType.TRANSPOSE_CONV: _transpose_conv,
    OpType.FULLY_CONNECTED: _fully_connected, OpType.BATCH_MATMUL: _batch_matmul,
    OpType.AVERAGE_POOL_2D: _pool, OpType.MAX_POOL_2D: _pool, OpType.L2_POOL_2D: _l2_pool,
    **{t: _reduce for t in (OpType.MEAN, OpType.SUM, OpType.REDUCE_MAX, OpType.REDUCE_MIN)},
    OpType.CONCATENATION: _concatenation, OpType.PAD: _pad, OpType.PADV2: _pad, OpType.MIRROR_PAD: _pad,
    OpType.RESHAPE: _reshape, OpType.SQUEEZE: _squeeze, OpType.EXPAND_DIMS: _expand_dims,
    OpType.TRANSPOSE: _transpose, OpType.STRIDED_SLICE: _strided_slice, OpType.SLICE: _slice,
    OpType.SPLIT: _split, OpType.SPLIT_V: _split_v, OpType.PACK: _pack, OpType.UNPACK: _unpack,
    OpType.SHAPE: _shape, OpType.GATHER: _gather, OpType.DEPTH_TO_SPACE: _depth_to_space,
    OpType.SPACE_TO_DEPTH: _space_to_depth, OpType.RESIZE_BILINEAR: _resize,
    OpType.RESIZE_NEAREST_NEIGHBOR: _resize, OpType.UNIDIRECTIONAL_SEQUENCE_LSTM: _lstm,
    **_MATH_RULES,  # comparisons, logic, selection, elementwise maths, arg/reductions, norms
    **_INDEX_RULES,  # batch<->space, gather/scatter, shapes from values, segments, top-k, NMS
    **_SEQ_RULES,  # recurrent ops, SVDF, 3-D convolutions, sparse embedding, StableHLO-era ops
    **_MISC_RULES,  # complex numbers, BITCAST, random draws, StableHLO gather/scatter/reduce_window
    **_CONTROL_RULES,  # IF, WHILE, CALL_ONCE and resource variables (runtime/ops/opcheck_control.py)
}


def check_options(graph: Graph, i: int) -> None:
    """The op carries options of its own type (a RESHAPE never Pool2DOptions), as its kernel reads them."""
    op = graph.ops[i]
    if op.type not in _RULES:
        return
    options = op.options
    if options is None:  # a graph built in code: the defaults, as when a file stores no table
        return
    typed = opt.FOR_OP.get(op.type.name)
    if typed is not None:
        if type(options) is not typed:
            got = _options_name(options)
            raise ModelError(f"{graph.describe_op(i)}: builtin options are {got}, {typed.__name__} expected")
        return
    table = _GENERIC_TABLES.get(op.type)
    if not (isinstance(options, opt.GenericOptions) and options.table == table):
        want = f"{table} or none" if table else "none"
        raise ModelError(f"{graph.describe_op(i)}: builtin options are {_options_name(options)}, {want} expected")


def _options_name(options) -> str:
    return options.table if isinstance(options, opt.GenericOptions) else type(options).__name__


def check_op(graph: Graph, i: int, shape_of: ShapeOf, value_of: ValueOf,
             model: Graph | None = None) -> tuple[list, bool]:
    """(output shapes, deferred) for op i; ModelError naming op, tensor and field when a kernel
    could not run it. `deferred`: some output shape depends on a value known only when it runs.
    `model`: the main graph when `graph` is another subgraph of it (None: `graph` is the main one)."""
    op = graph.ops[i]
    rule = _RULES.get(op.type)
    if rule is None:
        return [None] * len(op.outputs), False
    check_options(graph, i)
    c = _Op(graph, i, shape_of, value_of, model)
    for t in (*op.inputs, *op.outputs):
        if t >= 0 and graph.tensors[t].dtype in _NO_KERNEL_TYPES and not (
                graph.tensors[t].dtype is DType.RESOURCE and resource_allowed(op, t)):  # variable handles
            raise c.fail(f"{graph.describe_tensor(t)} is {graph.tensors[t].dtype.name}, a type the kernels "
                         f"do not compute on")
    outs = rule(c)
    _check_types(c)
    return outs, c.deferred


# The input whose element type the outputs carry (the data input), where it is not input 0.
_DATA_INPUT = DATA_INPUT
# Ops whose outputs take a type of their own (checked by their rules), or float from hybrid kernels.
_OWN_OUTPUT_TYPE = frozenset({OpType.CUSTOM, OpType.CAST, OpType.DEQUANTIZE, OpType.QUANTIZE, OpType.SHAPE})
_OWN_OUTPUT_TYPE |= frozenset(_MATH_RULES) | {OpType.L2_POOL_2D}  # runtime/ops/opcheck_math.py checks every output type
_OWN_OUTPUT_TYPE |= _INDEX_OWN_TYPES  # runtime/ops/opcheck_index.py checks theirs
_OWN_OUTPUT_TYPE |= frozenset(_SEQ_RULES)  # runtime/ops/opcheck_seq.py checks every output type
_OWN_OUTPUT_TYPE |= frozenset(_MISC_RULES)  # so does runtime/ops/opcheck_misc.py
_OWN_OUTPUT_TYPE |= frozenset(_CONTROL_RULES)  # runtime/ops/opcheck_control.py checks them against the subgraphs
# Float kernels that compute in floating point whatever they are given: an integer input would
# come out as float64 where the model declares an integer.
_FLOAT_ONLY = frozenset({
    OpType.EXP, OpType.LOG, OpType.SQRT, OpType.RSQRT, OpType.TANH, OpType.LOGISTIC, OpType.ELU, OpType.SOFTMAX,
    OpType.LOG_SOFTMAX, OpType.HARD_SWISH, OpType.CONV_2D, OpType.DEPTHWISE_CONV_2D, OpType.TRANSPOSE_CONV,
    OpType.FULLY_CONNECTED, OpType.AVERAGE_POOL_2D, OpType.MAX_POOL_2D, OpType.UNIDIRECTIONAL_SEQUENCE_LSTM,
})


def _check_types(c: _Op) -> None:
    """Each output has the type its kernel produces: the data input's (float32 where a float
    kernel runs 8-bit weights or computes in floating point)."""
    kind = c.op.type
    if kind in _OWN_OUTPUT_TYPE:
        return
    data = c.tensor(_DATA_INPUT.get(kind, 0))
    if data.dtype is DType.INT16 and data.quant is not None:  # 16x8: the plan refuses it, naming the tensor
        return
    if kind in _FLOAT_ONLY and not c.eight_bit and data.dtype is not DType.FLOAT32:
        raise c.fail(f"{c.name(_DATA_INPUT.get(kind, 0))} is {data.dtype.name}; the float kernel takes FLOAT32"
                     + (" (or 8-bit data with its quantization)" if kind in _QUANT_KERNEL_OPS else ""))
    for j, t in enumerate(c.op.outputs):
        if c.graph.tensors[t].dtype is not data.dtype:
            raise c.fail(f"{c.out_name(j)} is {c.graph.tensors[t].dtype.name}, but the kernel produces "
                         f"{data.dtype.name} (the type of {c.name(_DATA_INPUT.get(kind, 0))})")


@dataclass(frozen=True)
class Checked:
    """What the checks found: every tensor's shape as the kernels will see it, and the ops whose
    output shapes hang on values known only at run time (checked again right before they run)."""

    shapes: tuple[Shape, ...]
    deferred: frozenset[int]
    varying: frozenset[int]     # tensors whose shape may differ at run time from `shapes`


def check_graph(graph: Graph, input_shapes: dict[int, Shape] | None = None, strict: bool = True,
                model: Graph | None = None) -> Checked:
    """Run every op's check in plan order, propagating shapes from the graph inputs. `strict`: each
    computed output shape must be the declared one (unless the tensor's signature marks it dynamic).
    `model`: the main graph when `graph` is another of its subgraphs."""
    tensors = graph.tensors
    shapes: list[Shape] = [t.shape for t in tensors]
    varying: set[int] = set()
    for t, s in (input_shapes or {}).items():
        if tuple(s) != shapes[t]:
            shapes[t] = tuple(s)
            varying.add(t)
    known = derived_constants(graph)
    value_of = lambda t: tensors[t].data if t >= 0 and tensors[t].is_constant else None  # noqa: E731
    deferred: set[int] = set()
    unknown: set[int] = set()  # shapes only the run will tell (checked then)
    for i, op in enumerate(graph.ops):
        if unknown and any(t in unknown for t in op.inputs if t >= 0):
            deferred.add(i)
            unknown.update(op.outputs)
            varying.update(op.outputs)
            continue
        outs, late = check_op(graph, i, shapes.__getitem__, value_of, model)
        if op.type in _RULES and (late or any(t in varying for t in op.inputs if t >= 0)):
            deferred.add(i)
            varying.update(t for t in op.outputs if t not in known)
        for t, s in zip(op.outputs, outs):
            if s is None:
                # A shape only the run tells: not strict, or a tensor whose signature marks it
                # dynamic (its declared shape is a placeholder, as a WHILE body's growing slice).
                if not strict or tensors[t].is_dynamic:
                    unknown.add(t)
                continue
            declared = tensors[t].shape
            if strict and s != declared and not _fits_signature(tensors[t], s):
                raise ModelError(f"{graph.describe_op(i)}: output {graph.describe_tensor(t)} is declared "
                                 f"{_fmt(declared)}, but the op computes {_fmt(s)}")
            if s != declared:
                varying.add(t)
            shapes[t] = s
    return Checked(tuple(shapes), frozenset(deferred), frozenset(varying))


def _fits_signature(tensor: Tensor, shape: Shape) -> bool:
    sig = tensor.shape_signature
    return (sig is not None and tensor.is_dynamic and len(sig) == len(shape)
            and all(s == -1 or s == d for s, d in zip(sig, shape)))


def derived_constants(graph: Graph) -> set[int]:
    """Tensors fixed before the first invoke: constants, and outputs of ops that read only those."""
    known = {t for t, x in enumerate(graph.tensors) if x.is_constant and not x.is_variable}
    for op in graph.ops:
        ins = [t for t in op.inputs if t >= 0]
        if ins and all(t in known for t in ins):
            known.update(op.outputs)
    return known


_CACHE: "weakref.WeakKeyDictionary[Graph, Checked]" = weakref.WeakKeyDictionary()


def is_checked(graph: Graph) -> bool:
    return graph in _CACHE


def checked(graph: Graph, model: Graph | None = None) -> Checked:
    """check_graph(graph), computed once per graph object (`model`: as check_graph's)."""
    found = _CACHE.get(graph)
    if found is None:
        found = _CACHE[graph] = check_graph(graph, model=model)
    return found
