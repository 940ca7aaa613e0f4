"""The op under check and what every op rule shares: its accessors and messages, constants, and window geometry."""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from runtime.ir import options as opt
from runtime.ir.errors import ModelError
from runtime.ir.graph import DType, Graph, Tensor, printable
from runtime.ir.optypes import DATA_INPUT, OpType

Shape = tuple[int, ...]
ShapeOf = Callable[[int], Shape]
ValueOf = Callable[[int], "np.ndarray | None"]

# Element types no kernel computes on (NumPy object arrays; packed int4 is refused by name when
# the plan is built).
NO_KERNEL_TYPES = {DType.STRING, DType.RESOURCE, DType.VARIANT, DType.BFLOAT16}
EIGHT_BIT = {DType.INT8, DType.UINT8}
INDEX_TYPES = {DType.INT32, DType.INT64}
_QRANGE = {DType.INT8: (-128, 127), DType.UINT8: (0, 255), DType.INT32: (-(2**31), 2**31 - 1)}
# Scales most 8-bit kernels take: their float32 arithmetic (a fused activation's bound over the
# scale, a multiplier from a ratio of scales) stays finite. Real models' scales lie far inside.
_SCALES = (2.0**-100, 2.0**100)
# Ops whose 8-bit kernels take any positive finite scale, denormals included, as LiteRT's do (it makes
# no range check: a published model, automl_video_traffic, has a MUL output scale of 2.97e-35), held
# to LiteRT's outputs at such scales by tests/test_quant_scales.py. ADD refuses what LiteRT's Prepare
# refuses (opcheck_nn.check_add_multipliers). (SUB's Prepare takes output multipliers ADD's refuses,
# and keeps the bound until its kernel is held to LiteRT there.)
ANY_SCALE_OPS = frozenset({OpType.ADD, OpType.MUL})

# Ops whose 8-bit kernels read scales and zero points (runtime/ops/q*.py); on 8-bit data the
# others only move elements, or have no 8-bit kernel and are refused when the plan is built.
QUANT_KERNEL_OPS = frozenset({
    OpType.CONV_2D, OpType.DEPTHWISE_CONV_2D, OpType.TRANSPOSE_CONV, OpType.FULLY_CONNECTED,
    OpType.BATCH_MATMUL, OpType.SQUARED_DIFFERENCE, OpType.ADD, OpType.SUB, OpType.MUL, OpType.RELU,
    OpType.RELU6, OpType.RELU_N1_TO_1, OpType.PRELU, OpType.LEAKY_RELU, OpType.LOGISTIC, OpType.TANH,
    OpType.HARD_SWISH, OpType.QUANTIZE, OpType.AVERAGE_POOL_2D, OpType.MAX_POOL_2D, OpType.MEAN,
    OpType.SUM, OpType.SOFTMAX, OpType.CONCATENATION, OpType.RSQRT,
})

# The schema's options table of ops that have one but no typed class here (read as GenericOptions).
GENERIC_TABLES = {
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


def fmt(shape: Sequence[int]) -> str:
    return str(list(shape))


class OpCheck:
    """One op under check: its input shapes and known values, and messages naming op, tensor and field."""

    __slots__ = ("graph", "index", "op", "opts", "shape_of", "value_of", "deferred", "eight_bit", "model", "subcheck")

    def __init__(self, graph: Graph, index: int, shape_of: ShapeOf, value_of: ValueOf, model: Graph | None = None,
                 subcheck: Callable | None = None):
        self.graph, self.index, self.op = graph, index, graph.ops[index]
        self.model = graph if model is None else model  # the main graph, holding the subgraphs ops may run
        self.opts = opt.options_or_default(self.op.type.name, self.op.options)
        self.shape_of, self.value_of = shape_of, value_of
        self.deferred = False
        self.subcheck = subcheck  # check_graph, handed down by runtime/ops/opcheck.py (it imports this module)
        k = DATA_INPUT.get(self.op.type)
        data = (self.op.inputs[k] if k < len(self.op.inputs) else -1) if k is not None else None
        first = (graph.tensors[data] if data >= 0 else None) if data is not None else next(
            (graph.tensors[t] for t in self.op.inputs if t >= 0 and not graph.tensors[t].is_constant), None)
        # The same choice runtime.ops.select_kernel makes: 8-bit data takes the integer kernel.
        self.eight_bit = (first is not None and first.dtype in EIGHT_BIT and self.op.type is not OpType.DEQUANTIZE
                          and self.op.type in QUANT_KERNEL_OPS)

    def check_subgraph(self, sub: Graph, shapes: dict[int, Shape]) -> None:
        """Check another subgraph of the model at the input shapes this op hands it (IF, WHILE)."""
        self.subcheck(sub, shapes, strict=False, model=self.model)

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
            raise self.fail(f"{self.name(k)} has shape {fmt(s)}; rank {want} expected")
        if positive and any(d < 1 for d in s):
            raise self.fail(f"{self.name(k)} has shape {fmt(s)}; every dimension must be at least 1")
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
        if tensor.dtype not in INDEX_TYPES:
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
            if self._any_scale():
                if not (math.isfinite(q.scale[0]) and q.scale[0] > 0):
                    raise self.fail(f"{label} has quantization scale {q.scale[0]:.7g}; the 8-bit kernel needs a "
                                    f"positive, finite scale")
            elif not _SCALES[0] <= q.scale[0] <= _SCALES[1]:
                raise self.fail(f"{label} has quantization scale {q.scale[0]:.7g}; the 8-bit kernel needs a positive "
                                f"scale in [2**-100, 2**100]")
            lo, hi = _QRANGE.get(tensor.dtype, (-(2**31), 2**31 - 1))
            if not lo <= q.zero_point[0] <= hi:
                raise self.fail(f"{label} has zero point {q.zero_point[0]} outside {tensor.dtype.name}'s "
                                f"range [{lo}, {hi}]")

    def _any_scale(self) -> bool:
        """An op of ANY_SCALE_OPS without a fused activation: a bound of 6 / a denormal scale would be
        infinite, which LiteRT casts to int32 as the CPU does (INT_MIN on x86-64, INT_MAX on AArch64)."""
        options = self.op.options
        return self.op.type in ANY_SCALE_OPS and (
            not isinstance(options, (opt.AddOptions, opt.MulOptions))
            or options.fused_activation_function is opt.Activation.NONE)

    def weights(self, k: int, channels: int, axis: int, symmetric: bool = False) -> None:
        """8-bit weights: quantized per tensor or per channel along the output-channel axis; with
        `symmetric`, every zero point 0 (the kernel subtracts none)."""
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
        if symmetric and any(q.zero_point):
            raise self.fail(f"{self.name(k)} has zero point {next(z for z in q.zero_point if z)}; the kernel takes "
                            f"{tensor.dtype.name} weights with zero point 0")


# -- geometry -------------------------------------------------------------------------------------


def check_window(c: OpCheck, x: Shape, kh: int, kw: int, dilated: bool) -> tuple[int, int]:
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


def check_bias(c: OpCheck, k: int, channels: int) -> None:
    if c.has(k):
        b = c.rank(k, 1)
        if b[0] != channels:
            raise c.fail(f"{c.name(k)} has shape {fmt(b)}; {channels} values (one per output channel) expected")
        if c.eight_bit and c.tensor(k).dtype is not DType.INT32:
            raise c.fail(f"{c.name(k)} is {c.tensor(k).dtype.name}; an 8-bit op takes an INT32 bias")


def check_hybrid(c: OpCheck, data: int, k: int, channels: int, axis: int) -> None:
    """Float data with 8-bit constant weights (dynamic-range quantization): the hybrid kernels
    need int8 weights with symmetric scales, one per tensor or per output channel."""
    x, w = c.tensor(data), c.tensor(k)
    if x.dtype.np.kind != "f" or not w.is_constant or w.dtype not in EIGHT_BIT:
        return
    name = printable(w.name)
    if w.dtype is not DType.INT8:
        raise c.fail(f"{w.dtype.name} weights '{name}' with float input: only int8 hybrid weights are supported")
    if w.quant is None:
        raise c.fail(f"int8 weights '{name}' carry no quantization scale")
    c.weights(k, channels, axis)
    if any(z != 0 for z in w.quant.zero_point):
        raise c.fail(f"int8 weights '{name}' have a non-zero zero point; hybrid kernels need symmetric weights")


def weights_type(c: OpCheck, data: int, k: int) -> None:
    if c.eight_bit and c.tensor(k).dtype is not c.tensor(data).dtype:
        raise c.fail(f"{c.name(k)} is {c.tensor(k).dtype.name} weights for {c.tensor(data).dtype.name} data")


def conv_groups(in_channels: int, filter_channels: int, filters: int) -> int | None:
    """How many groups a CONV_2D's channels form (TFLite's conv.cc: groups = input channels / filter
    input channels, each group's filters a contiguous block of the outputs); None when they do not divide."""
    if filter_channels <= 0 or in_channels % filter_channels or filters % (in_channels // filter_channels):
        return None
    return in_channels // filter_channels
