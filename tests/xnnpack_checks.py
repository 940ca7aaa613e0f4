"""The Check* helpers of the XNNPACK-like test delegate: static weights, quantization, node parameters."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Sequence

import numpy as np

from runtime.ir.graph import DType, Graph, Op, OpType, Tensor
from runtime.ir.options import Activation, Padding

if TYPE_CHECKING:
    from tests.xnnpack_like import XnnpackLike


XNN_MAX_TENSOR_DIMS = 6

F32 = np.float32


class Refused(Exception):
    """One failed Check*: the reason XNNPACK would log."""


def no(reason: str) -> None:
    raise Refused(reason)



def unpacks_static_weights(op: Op, graph: Graph, quasi_static: set[int]) -> bool:
    """PrepareOpsToDelegate's "prepare to unpack FP16/INT8 tensors" test."""
    if op.type is not OpType.DEQUANTIZE or len(op.inputs) != 1 or len(op.outputs) != 1 or op.inputs[0] < 0:
        return False
    src, dst = graph.tensors[op.inputs[0]], graph.tensors[op.outputs[0]]
    static = _is_static(src) or op.inputs[0] in quasi_static
    int8_ok = src.dtype is DType.INT8 and src.quant is not None
    return static and (src.dtype is DType.FLOAT16 or int8_ok) and dst.dtype is DType.FLOAT32


def _is_static(t: Tensor) -> bool:
    """kTfLiteMmapRo with data: a constant buffer (variables live in the arena even when initialised)."""
    return t.is_constant and not t.is_variable


def legacy_params(t: Tensor) -> tuple[float, int]:
    """TfLiteTensor.params: the single scale and zero point of a per-tensor quantized tensor."""
    if t.quant is not None and len(t.quant.scale) == 1:
        return float(F32(t.quant.scale[0])), int(t.quant.zero_point[0])
    return 0.0, 0


def normal_positive(scales: Sequence[float]) -> bool:
    return all(math.isfinite(s) and s > 0 and abs(F32(s)) >= np.finfo(F32).tiny for s in scales)


class Checks:
    """The Check* helpers of xnnpack_delegate.cc for one node; each raises Refused on failure."""

    def __init__(self, delegate: XnnpackLike, op: Op, graph: Graph, quasi_static):
        self.d, self.op, self.graph, self.quasi_static = delegate, op, graph, quasi_static
        self.opts = op.options

    # node shape

    def t(self, index: int) -> Tensor:
        return self.graph.tensors[index]

    def num_inputs(self, lo: int, hi: int | None = None) -> None:
        hi = lo if hi is None else hi
        if not lo <= len(self.op.inputs) <= hi:
            no(f"unexpected number of inputs ({len(self.op.inputs)}) in {self.op.name} node")

    def num_outputs(self, lo: int, hi: int | None = None) -> None:
        hi = lo if hi is None else hi
        if not lo <= len(self.op.outputs) <= hi:
            no(f"unexpected number of outputs ({len(self.op.outputs)}) in {self.op.name} node")

    def io(self, ins: tuple[int, int] | int, outs: int = 1) -> None:
        lo, hi = (ins, ins) if isinstance(ins, int) else ins
        self.num_inputs(lo, hi)
        self.num_outputs(outs)

    def option(self, field: str, default):
        return getattr(self.opts, field, default)

    # tensor types (CheckTensor*Type)

    def _qs8_per_tensor(self, t: Tensor) -> bool:
        return self.d.qs8 and t.quant is not None and t.quant.axis == 0 and len(t.quant.scale) == 1

    def _qu8_per_tensor(self, t: Tensor) -> bool:
        return (self.d.qu8 and t.quant is not None and t.quant.axis == 0 and len(t.quant.scale) == 1
                and len(t.quant.zero_point) == 1)

    def _type_error(self, index: int, what: str) -> None:
        no(f"{what}: unsupported type {self.t(index).dtype.name} in tensor #{index}")

    def float32(self, index: int) -> None:
        if self.t(index).dtype is not DType.FLOAT32:
            self._type_error(index, "CheckTensorFloat32Type")

    def float_any(self, index: int) -> None:
        if self.t(index).dtype not in (DType.FLOAT32, DType.FLOAT16):
            self._type_error(index, "CheckTensorFloatType")

    def float32_or_qint8(self, index: int) -> None:
        t = self.t(index)
        if t.dtype is DType.FLOAT32 or (t.dtype is DType.INT8 and self._qs8_per_tensor(t)):
            return
        self._type_error(index, "CheckTensorFloat32OrQInt8Type")

    def qint8_or_quint8(self, index: int) -> None:
        t = self.t(index)
        if (t.dtype is DType.INT8 and self._qs8_per_tensor(t)) or (t.dtype is DType.UINT8 and self._qu8_per_tensor(t)):
            return
        self._type_error(index, "CheckTensorQInt8OrQUInt8Type")

    def float32_or_quint8(self, index: int) -> None:
        """CheckTensorFloat32OrQUInt8Type: float32, or per-tensor quantized int8 / uint8."""
        t = self.t(index)
        if t.dtype is DType.FLOAT32:
            return
        if (t.dtype is DType.INT8 and self._qs8_per_tensor(t)) or (t.dtype is DType.UINT8 and self._qu8_per_tensor(t)):
            return
        self._type_error(index, "CheckTensorFloat32OrQUInt8Type")

    def float32_or_qcint8(self, index: int, quantized_dimension: int) -> None:
        """CheckTensorFloat32OrQCInt8Type: float32, or int8 per-tensor / per-channel along the
        expected dimension with valid scales, or per-tensor uint8."""
        t = self.t(index)
        if t.dtype is DType.FLOAT32:
            return
        q = t.quant
        if t.dtype is DType.INT8 and self.d.qs8:
            if q is None:
                no(f"unsupported quantization type in tensor #{index}")
            if len(q.scale) > 1 and q.axis != quantized_dimension:
                no(f"unsupported quantized dimension {q.axis} in tensor #{index}")
            if len(q.scale) > 1:
                if not 0 <= q.axis < len(t.shape) or t.shape[q.axis] != len(q.scale) or not normal_positive(q.scale):
                    no(f"Channelwise quantized tensor #{index} has invalid quantization parameters")
            elif not normal_positive(q.scale) or not -128 <= q.zero_point[0] <= 127:
                no(f"Quantized tensor #{index} has invalid quantization parameters")
            return
        if t.dtype is DType.UINT8 and self.d.qu8:
            if not self._qu8_per_tensor(t):
                no(f"unsupported quantization type in tensor #{index}")
            if not normal_positive(q.scale) or not 0 <= q.zero_point[0] <= 255:
                no(f"Quantized tensor #{index} has invalid quantization parameters")
            return
        self._type_error(index, "CheckTensorFloat32OrQCInt8Type")

    def fc_filter_type(self, index: int) -> None:
        """CheckTensorFloat32OrFloat16OrQCInt4OrQCInt8Type with quantized dimension 0."""
        t = self.t(index)
        if t.dtype in (DType.FLOAT32, DType.FLOAT16):
            return
        if t.dtype in (DType.INT8, DType.INT4) and self.d.qs8:
            q = t.quant
            if q is None:
                no(f"missing scale quantization parameters in tensor #{index}")
            if len(q.scale) > 1 and q.axis != 0:
                no(f"unsupported quantized dimension {q.axis} in tensor #{index}")
            if t.dtype is DType.INT4 and (not t.shape or len(q.scale) != t.shape[q.axis]):
                no(f"4 bit weights must be per channel and not per tensor quantized in tensor #{index}")
            return
        if t.dtype is DType.UINT8 and self.d.qu8:
            if not self._qu8_per_tensor(t):
                no(f"unsupported quantization type in tensor #{index}")
            return
        self._type_error(index, "CheckTensorFloat32OrFloat16OrQCInt4OrQCInt8Type")

    def bias_type(self, index: int) -> None:
        """CheckTensorFloat32OrFloat16OrQCInt32Type."""
        t = self.t(index)
        if t.dtype in (DType.FLOAT32, DType.FLOAT16):
            return
        if t.dtype is DType.INT32 and self.d.qs8:
            q = t.quant
            if q is None or q.axis != 0:
                no(f"unsupported quantization type in tensor #{index}")
            if not normal_positive(q.scale):
                no(f"Quantized tensor #{index} has invalid quantization parameters")
            if len(q.scale) > 1 and (not t.shape or t.shape[0] != len(q.scale)):
                no(f"Channelwise quantized tensor #{index} has invalid quantization parameters")
            return
        self._type_error(index, "CheckTensorFloat32OrFloat16OrQCInt32Type")

    def int32(self, index: int) -> None:
        if self.t(index).dtype is not DType.INT32:
            self._type_error(index, "CheckTensorType")

    # shapes and allocation

    def rank(self, index: int, lo: int, hi: int | None = None) -> None:
        """CheckTensorShape: rank in [lo, hi] and every dimension positive."""
        hi = lo if hi is None else hi
        shape = self.t(index).shape
        if not lo <= len(shape) <= hi:
            no(f"unsupported number of shape dimensions ({len(shape)}) in tensor #{index} in "
                f"{self.op.name} node: {lo if lo == hi else f'{lo}..{hi}'} dimensions expected")
        if any(d <= 0 for d in shape):
            no(f"invalid num of elements in tensor #{index} in {self.op.name} node")

    def static(self, index: int) -> None:
        """CheckTensorStaticAllocation: a read-only constant buffer."""
        if not _is_static(self.t(index)):
            no(f"invalid allocation type in tensor #{index} in {self.op.name} node: expected static "
                f"read-only tensor")

    def static_weights(self, index: int) -> None:
        """Static, unless a DEQUANTIZE XNNPACK unpacks itself produces it (quasi-static)."""
        if index not in self.quasi_static:
            self.static(index)

    def shape_tensor(self, index: int, squeeze_dims: bool) -> None:
        """CheckShapeTensorShape: 1-D, or (squeeze_dims) leading dimensions all 1."""
        shape = self.t(index).shape
        if len(shape) != 1 and not (squeeze_dims and all(d == 1 for d in shape[:-1])):
            no(f"unexpected number of shape dimensions ({len(shape)}) in shape tensor #{index} in "
                f"{self.op.name} node: expected a 1D tensor")

    # parameters

    def activation(self, value) -> None:
        """ConvertActivationToOutputRange: NONE, RELU, RELU_N1_TO_1 and RELU6 become output ranges."""
        if value is None:
            return
        if int(value) not in (Activation.NONE, Activation.RELU, Activation.RELU_N1_TO_1, Activation.RELU6):
            name = Activation(int(value)).name if int(value) in Activation._value2member_map_ else str(int(value))
            no(f"unsupported fused activation ({name})")

    def padding(self) -> None:
        if int(self.option("padding", Padding.SAME)) not in (Padding.SAME, Padding.VALID):
            no("invalid padding mode")

    def pooling(self) -> None:
        """CheckPoolingParams."""
        sw, sh = self.option("stride_w", 1), self.option("stride_h", 1)
        fw, fh = self.option("filter_width", 1), self.option("filter_height", 1)
        if sw <= 0 or sh <= 0:
            no(f"invalid stride in {self.op.name} node")
        if fw <= 0 or fh <= 0:
            no(f"invalid filter size in {self.op.name} node")
        if sw > fw:
            no(f"unsupported width stride {sw} exceeding filter width {fw} in {self.op.name} node")
        if sh > fh:
            no(f"unsupported height stride {sh} exceeding filter height {fh} in {self.op.name} node")
        if fw == 1 and fh == 1 and max(sw, sh) > 1:
            no(f"unsupported pooling with 1x1 filter and {sw}x{sh} stride in {self.op.name} node")
        self.padding()
        self.activation(self.option("fused_activation_function", Activation.NONE))

    def input_output_scale(self, a: int, out: int, lo: float, hi: float) -> None:
        """CheckTensorsInputOutputScale (same 8-bit type only): lo <= in/out < hi in float32."""
        ta, to = self.t(a), self.t(out)
        if ta.dtype is not to.dtype or ta.dtype not in (DType.INT8, DType.UINT8):
            return
        ratio = F32(ta.quant.scale[0]) / F32(to.quant.scale[0])
        if not F32(lo) <= ratio < F32(hi):
            no(f"unsupported input-to-output scale in {self.op.name} node")

    def product_output_scale(self, a: int, b: int, out: int, lo: float, hi: float) -> None:
        """CheckTensorsInputProductOutputScale (all three the same 8-bit type only)."""
        ta, tb, to = self.t(a), self.t(b), self.t(out)
        if not (ta.dtype is tb.dtype is to.dtype) or ta.dtype not in (DType.INT8, DType.UINT8):
            return
        ratio = (F32(ta.quant.scale[0]) * F32(tb.quant.scale[0])) / F32(to.quant.scale[0])
        if not F32(lo) <= ratio < F32(hi):
            no(f"unsupported input-product-to-output scale in {self.op.name}")


