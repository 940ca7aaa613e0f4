"""The Visit*Node functions of the XNNPACK-like test delegate, one per op family, and their dispatch table."""

from __future__ import annotations

from typing import Callable

import numpy as np

from runtime.ir.graph import DType, OpType, Tensor
from runtime.ir.options import Activation, Padding
from tests.xnnpack_checks import XNN_MAX_TENSOR_DIMS, F32, Checks, legacy_params, no, normal_positive


# -- the visitors (Subgraph::Visit*Node) ------------------------------------------------------------

_FLOAT_UNARY = {OpType.ABS, OpType.CEIL, OpType.COS, OpType.EXP, OpType.FLOOR, OpType.GELU, OpType.HARD_SWISH,
                OpType.NEG, OpType.RELU_N1_TO_1, OpType.RELU, OpType.RELU6, OpType.ROUND, OpType.RSQRT,
                OpType.SIN, OpType.SQRT, OpType.SQUARE}


def _unary(c: Checks) -> None:
    c.io(1)
    x, y = c.op.inputs[0], c.op.outputs[0]
    c.rank(x, 0, XNN_MAX_TENSOR_DIMS)
    kind = c.op.type
    if kind in _FLOAT_UNARY:
        c.float_any(x)
        c.float_any(y)
    elif kind is OpType.DEQUANTIZE:
        c.qint8_or_quint8(x)
        c.float32(y)
    elif kind is OpType.ELU:
        c.float32_or_qint8(x)
        c.float32_or_qint8(y)
    elif kind in (OpType.LOGISTIC, OpType.TANH):
        c.float32_or_quint8(x)
        c.float32_or_quint8(y)
    elif kind is OpType.LEAKY_RELU:
        c.float32_or_quint8(x)
        c.float32_or_quint8(y)
        _leaky_relu_scales(c, x, y)
    elif kind is OpType.QUANTIZE:
        c.float32_or_quint8(x)
        c.qint8_or_quint8(y)
        _quantize_combination(c, x, y)


def _leaky_relu_scales(c: Checks, x: int, y: int) -> None:
    alpha = F32(c.option("alpha", 0.2))
    if not np.isfinite(alpha) or alpha == 0 or abs(alpha) < np.finfo(F32).tiny:
        no(f"unsupported alpha {float(alpha):g} in LEAKY_RELU node")
    scales = [F32(t.quant.scale[0]) if t.dtype in (DType.INT8, DType.UINT8) and t.quant and len(t.quant.scale) == 1
              and t.quant.axis == 0 else F32("nan") for t in (c.t(x), c.t(y))]
    if all(np.isfinite(s) and s != 0 for s in scales):
        positive = scales[0] / scales[1]
        if positive < F32(1 / 256) or positive > F32(128):
            no(f"unsupported positive input-to-output scale {float(positive):g} in LEAKY_RELU node")
        negative = positive * alpha
        if negative < F32(-127.99609375) or negative > F32(128) or abs(negative) < F32(1 / 256):
            no(f"unsupported negative input-to-output scale {float(negative):g} in LEAKY_RELU node")


def _xnn_datatype(t: Tensor) -> str:
    """GetXNNPackDatatype, for the per-tensor types QUANTIZE can see."""
    if t.dtype is DType.FLOAT32:
        return "fp32"
    q = t.quant
    if q is None or not normal_positive(q.scale) or len(q.scale) != 1:
        return "invalid"
    if t.dtype is DType.INT8 and -128 <= q.zero_point[0] <= 127:
        return "qint8"
    if t.dtype is DType.UINT8 and 0 <= q.zero_point[0] <= 255:
        return "quint8"
    return "invalid"


def _quantize_combination(c: Checks, x: int, y: int) -> None:
    src, dst = _xnn_datatype(c.t(x)), _xnn_datatype(c.t(y))
    if src == "fp32":
        return
    if src in ("qint8", "quint8") and src == dst:
        ratio = F32(c.t(x).quant.scale[0]) / F32(c.t(y).quant.scale[0])
        if ratio < F32(1 / 256) or ratio > F32(128):
            no("unsupported input-to-output scale in QUANTIZE node")
        return
    no(f"unsupported combination of input type ({c.t(x).dtype.name}) and output type "
        f"({c.t(y).dtype.name}) in QUANTIZE node")


def _binary(c: Checks) -> None:
    c.io(2)
    a, b = c.op.inputs
    out = c.op.outputs[0]
    c.rank(a, 0, XNN_MAX_TENSOR_DIMS)
    c.rank(b, 0, XNN_MAX_TENSOR_DIMS)
    kind = c.op.type
    if kind in (OpType.ADD, OpType.MUL, OpType.SUB):
        for t in (a, b, out):
            c.float32_or_quint8(t)
        if not c.t(a).dtype is c.t(b).dtype is c.t(out).dtype:
            no(f"unsupported mixed types in {c.op.name} operator")
    else:  # DIV, MAXIMUM, MINIMUM, PRELU, SQUARED_DIFFERENCE
        for t in (a, b, out):
            c.float32(t)
    if kind in (OpType.ADD, OpType.SUB):
        c.input_output_scale(a, out, 1 / 1024, 256)
        c.input_output_scale(b, out, 1 / 1024, 256)
    elif kind is OpType.MUL:
        c.product_output_scale(a, b, out, 1 / 65536, 256)
    elif kind is OpType.PRELU:
        c.static_weights(b)
    if kind in (OpType.ADD, OpType.SUB, OpType.MUL, OpType.DIV):
        c.activation(c.option("fused_activation_function", Activation.NONE))


def _average_pool(c: Checks) -> None:
    c.io(1)
    c.float32(c.op.inputs[0])
    c.float32(c.op.outputs[0])
    c.pooling()


def _max_pool(c: Checks) -> None:
    c.io(1)
    c.float32_or_quint8(c.op.inputs[0])
    c.float32_or_quint8(c.op.outputs[0])
    c.pooling()


def _batch_matmul(c: Checks) -> None:
    a, b = c.op.inputs[0], c.op.inputs[1]
    c.float32(a)
    rank_b = len(c.t(b).shape)
    c.float32_or_qcint8(b, rank_b - 2 if c.option("adj_y", False) else rank_b - 1)
    c.float32(c.op.outputs[0])
    for t in (a, b):
        if len(c.t(t).shape) < 2:
            no(f"Unsupported number of dimensions {len(c.t(t).shape)} for tensor #{t}, must be at least 2")


def _concatenation(c: Checks) -> None:
    c.io((2, 5))
    out = c.op.outputs[0]
    c.float32_or_quint8(out)
    if c.t(out).dtype is DType.UINT8:  # only uint8 requires matching quantization
        want = legacy_params(c.t(out))
        for t in c.op.inputs:
            if legacy_params(c.t(t)) != want:
                no("Mismatching quantization zero point or scale across an input and the output for "
                    "CONCATENATE operator")
    for t in c.op.inputs:
        c.float32_or_quint8(t)


def _conv2d(c: Checks) -> None:
    if c.option("stride_w", 1) <= 0 or c.option("stride_h", 1) <= 0:
        no("invalid stride")
    if c.option("dilation_w_factor", 1) <= 0 or c.option("dilation_h_factor", 1) <= 0:
        no("invalid dilation factor")
    c.io(3)
    x, w, bias = c.op.inputs
    out = c.op.outputs[0]
    c.float32_or_quint8(x)
    c.rank(x, 4)
    c.float32_or_qcint8(w, 0)
    c.rank(w, 4)
    c.static_weights(w)
    if bias < 0:
        no("unsupported CONV_2D node without bias")
    c.bias_type(bias)
    c.rank(bias, 1)
    c.static_weights(bias)
    c.float32_or_quint8(out)
    c.rank(out, 4)
    tx, tw, to = c.t(x).dtype, c.t(w).dtype, c.t(out).dtype
    dynamically_quantized = c.d.latest_operators and tx is DType.FLOAT32 and tw is DType.INT8
    if tx is not to or (tx is not tw and not dynamically_quantized):
        no("unsupported mixed types in CONV_2D operator")
    if c.t(x).shape[3] // c.t(w).shape[3] == 0:
        no("groups of zero is not supported by CONV_2D operator")
    c.padding()
    c.activation(c.option("fused_activation_function", Activation.NONE))


def _depthwise_conv2d(c: Checks) -> None:
    c.io(3)
    x, w, bias = c.op.inputs
    out = c.op.outputs[0]
    c.float32_or_quint8(x)
    c.rank(x, 4)
    c.float32_or_qcint8(w, 3)
    c.rank(w, 4)
    c.static_weights(w)
    if bias < 0:
        no("unsupported DEPTHWISE_CONV_2D node without bias")
    c.bias_type(bias)
    c.rank(bias, 1)
    c.static_weights(bias)
    c.float32_or_quint8(out)
    c.rank(out, 4)
    if not c.t(x).dtype is c.t(out).dtype is c.t(w).dtype:
        no("unsupported mixed types in DEPTHWISE_CONV_2D operator")
    multiplier = c.option("depth_multiplier", 1)
    if c.option("stride_w", 1) <= 0 or c.option("stride_h", 1) <= 0:
        no("invalid stride")
    if multiplier <= 0 or c.t(w).shape[3] % multiplier:
        no(f"depth multiplier {multiplier} is incompatible with number of output channels {c.t(w).shape[3]}")
    if c.option("dilation_w_factor", 1) <= 0 or c.option("dilation_h_factor", 1) <= 0:
        no("invalid dilation factor")
    c.padding()
    c.activation(c.option("fused_activation_function", Activation.NONE))


def _fully_connected(c: Checks) -> None:
    if c.op.version == 8:
        no("Unsupported version 8 of FullyConnected.")
    if c.option("weights_format", 0) != 0:
        no("unsupported non-default weights format")
    c.io((2, 3))
    x, w = c.op.inputs[0], c.op.inputs[1]
    out = c.op.outputs[0]
    c.float32_or_quint8(x)
    c.rank(w, 2)
    if not (c.d.dynamic_fully_connected and c.t(w).dtype is DType.FLOAT32):
        c.fc_filter_type(w)
        c.static_weights(w)
    if len(c.op.inputs) >= 3 and c.op.inputs[2] >= 0:
        bias = c.op.inputs[2]
        if not (c.d.dynamic_fully_connected and c.t(bias).dtype is DType.FLOAT32):
            if int(np.prod(c.t(bias).shape)) != c.t(w).shape[0]:
                no("Fully Connected: Mismatch between number of bias elements and number of output channels")
            c.bias_type(bias)
            c.static_weights(bias)
    c.float32_or_quint8(out)
    tx, tw, to = c.t(x).dtype, c.t(w).dtype, c.t(out).dtype
    dynamically_quantized = c.d.latest_operators and tx is DType.FLOAT32 and tw in (DType.INT4, DType.INT8)
    srq = tx is DType.INT8 and tw in (DType.INT4, DType.INT8)
    if tx is not to or (tx is not tw and not (dynamically_quantized or srq)):
        no("unsupported mixed types in FULLY_CONNECTED operator")
    if tw is DType.INT4 and c.t(w).shape[1] % 2 == 1:
        no("unsupported odd number of inputs channels in FULLY_CONNECTED operator")
    c.activation(c.option("fused_activation_function", Activation.NONE))


def _reduce(c: Checks) -> None:
    c.io(2)
    x, axes = c.op.inputs
    c.float32_or_quint8(x)
    c.int32(axes)
    if len(c.t(axes).shape) > 1:
        no(f"unexpected number of shape dimensions in axes tensor #{axes}: expected a 1D tensor")
    c.static(axes)
    c.float32_or_quint8(c.op.outputs[0])


def _pad(c: Checks) -> None:
    c.io(2)
    x, paddings = c.op.inputs
    out = c.op.outputs[0]
    c.float32_or_quint8(x)
    c.rank(x, 1, XNN_MAX_TENSOR_DIMS)
    c.int32(paddings)
    shape = c.t(paddings).shape
    if len(shape) != 2 or shape[0] != len(c.t(x).shape) or shape[1] != 2:
        no(f"unexpected shape of padding tensor #{paddings}")
    c.static(paddings)
    c.float32_or_quint8(out)
    c.rank(out, 1, XNN_MAX_TENSOR_DIMS)
    values = np.asarray(c.t(paddings).data).reshape(-1, 2)
    # XNNPACK loops over NumDimensions(paddings) == 2 rows here, not over every row.
    if (values[:2] < 0).any():
        no("invalid negative padding")


def _reshape(c: Checks) -> None:
    c.io((1, 2))
    x, out = c.op.inputs[0], c.op.outputs[0]
    c.float32_or_quint8(x)
    c.rank(x, 0, XNN_MAX_TENSOR_DIMS)
    c.float32_or_quint8(out)
    c.rank(out, 0, XNN_MAX_TENSOR_DIMS)
    if c.t(out).dtype in (DType.INT8, DType.UINT8) and legacy_params(c.t(x)) != legacy_params(c.t(out)):
        no("Mismatching quantization zero point or scale across the input and the output for RESHAPE operator")
    if len(c.op.inputs) == 2:
        shape = c.op.inputs[1]
        c.int32(shape)
        c.shape_tensor(shape, squeeze_dims=True)
        c.static(shape)


def _resize_bilinear(c: Checks) -> None:
    c.io(2)
    x, size = c.op.inputs
    out = c.op.outputs[0]
    c.float32_or_quint8(x)
    c.rank(x, 4)
    c.int32(size)
    c.shape_tensor(size, squeeze_dims=False)
    c.static(size)
    c.float32_or_quint8(out)
    c.rank(out, 4)
    if (np.asarray(c.t(size).data) <= 0).any():
        no("invalid output dimension in RESIZE_BILINEAR node")


def _softmax(c: Checks) -> None:
    if F32(c.option("beta", 1.0)) != F32(1.0):
        no(f"unsupported beta value {c.option('beta', 1.0):.7f} in SOFTMAX node")
    c.io(1)
    c.float32(c.op.inputs[0])
    c.float32(c.op.outputs[0])


def _split(c: Checks) -> None:
    if c.option("num_splits", 1) != len(c.op.outputs):
        no("num_splits differs from the number of outputs")
    c.num_inputs(2)
    c.num_outputs(2, 4)
    axis, x = c.op.inputs
    c.int32(axis)
    c.static(axis)
    c.float32_or_quint8(x)
    for t in c.op.outputs:
        c.float32_or_quint8(t)


def _strided_slice(c: Checks) -> None:
    if c.option("ellipsis_mask", 0) or c.option("new_axis_mask", 0) or c.option("shrink_axis_mask", 0):
        no("only strided slices without ellipsis, new-axis or shrink-axis masks are supported")
    x, begin, end, strides = c.op.inputs[:4]
    out = c.op.outputs[0]
    for t in (strides, begin, end):
        c.shape_tensor(t, squeeze_dims=False)
        c.static(t)
        c.int32(t)
        if t == strides and (np.asarray(c.t(t).data) != 1).any():
            no("stride must be 1 in STRIDED_SLICE node")
    rank = len(c.t(x).shape)
    for t in (begin, end, strides):
        if c.t(t).shape != (rank,):
            no("begin, end and strides must have one entry per input dimension in STRIDED_SLICE node")
    c.float32_or_quint8(x)
    c.float32_or_quint8(out)
    begin_mask, end_mask, offset = c.option("begin_mask", 0), c.option("end_mask", 0), c.option("offset", False)
    starts, stops = np.asarray(c.t(begin).data), np.asarray(c.t(end).data)
    for i, extent in enumerate(c.t(x).shape):
        b = 0 if begin_mask & (1 << i) else int(starts[i])
        e = 0 if end_mask & (1 << i) else (int(stops[i]) + b if offset else int(stops[i]))
        start = b + extent if b < 0 else b
        size = e + extent - start if e <= 0 else e - start
        if start + size > extent:
            no(f"offset {start} + size {size} exceeds extent {extent} in STRIDED_SLICE node for dimension {i}")


def _transpose(c: Checks) -> None:
    c.io(2)
    c.float32_or_quint8(c.op.inputs[0])
    c.static(c.op.inputs[1])


def _transpose_conv(c: Checks) -> None:
    c.io((3, 4))
    shape_t, w, x = c.op.inputs[:3]
    out = c.op.outputs[0]
    c.int32(shape_t)
    c.shape_tensor(shape_t, squeeze_dims=False)
    c.static(shape_t)
    if c.t(shape_t).shape[0] != 4:
        no("unsupported number of output shape dimensions: 4 dimensions expected")
    c.rank(w, 4)
    c.static_weights(w)
    c.float32_or_quint8(x)
    c.rank(x, 4)
    c.float32_or_qcint8(w, 0)
    if len(c.op.inputs) >= 4 and c.op.inputs[3] >= 0:
        bias = c.op.inputs[3]
        c.bias_type(bias)
        c.rank(bias, 1)
        c.static_weights(bias)
    c.float32_or_quint8(out)
    c.rank(out, 4)
    out_c, kh, kw, in_c = c.t(w).shape
    _, out_h, out_w, out_shape_c = (int(v) for v in np.asarray(c.t(shape_t).data))
    in_h, in_w = c.t(x).shape[1], c.t(x).shape[2]
    if out_c != out_shape_c:
        no("transpose convolution kernel output channel dimension doesn't match output shape channel dimension")
    if in_c != c.t(x).shape[3]:
        no("transpose convolution kernel input channel dimension doesn't match filter input channel")
    sh, sw = c.option("stride_h", 1), c.option("stride_w", 1)
    padding = int(c.option("padding", Padding.SAME))
    if padding == Padding.VALID:
        if kh > out_h or kw > out_w:
            no("output smaller than effective kernel dimensions unsupported with VALID padding in TRANSPOSE_CONV")
    elif padding == Padding.SAME:
        if (out_h + sh - 1) // sh != in_h or (out_w + sw - 1) // sw != in_w:
            no("inconsistent combination of parameters for TRANSPOSE_CONV op")
        if kh < sh or kw < sw:
            no("strides larger than effective kernel dimensions unsupported in TRANSPOSE_CONV")
    else:
        no("invalid padding mode")
    c.activation(c.option("fused_activation_function", Activation.NONE))


def _depth_to_space(c: Checks) -> None:
    c.io(1)
    c.float32_or_quint8(c.op.inputs[0])
    c.float32_or_quint8(c.op.outputs[0])
    if c.option("block_size", 1) <= 1:
        no("invalid block size in DEPTH_TO_SPACE node")


def _space_to_depth(c: Checks) -> None:
    c.io(1)
    x = c.op.inputs[0]
    c.float32_or_quint8(x)
    c.float32_or_quint8(c.op.outputs[0])
    block = c.option("block_size", 1)
    if block <= 1:
        no("block size in SPACE_TO_DEPTH node must be greater than 1")
    if c.t(x).shape[1] % block or c.t(x).shape[2] % block:
        no("SPACE_TO_DEPTH input height and width must be divisible by block_size")


def _slice(c: Checks) -> None:
    x, begin, size = c.op.inputs[:3]
    for t in (begin, size):
        c.shape_tensor(t, squeeze_dims=False)
        c.static(t)
        if c.t(t).dtype not in (DType.INT32, DType.INT64):
            c._type_error(t, "CheckTensorInt32OrInt64Type")
    if c.t(begin).shape[0] != c.t(size).shape[0]:
        no("mismatch in shape dimension 0 of begin and size tensors of SLICE operator")
    c.float32_or_quint8(x)
    c.float32_or_quint8(c.op.outputs[0])
    if (np.asarray(c.t(size).data) <= 0).any():
        no("size must be positive in SLICE node")


def _expand_dims(c: Checks) -> None:
    no("EXPAND_DIMS: VisitExpandDimsNode refuses every node in this XNNPACK version")


def _not_modelled(c: Checks) -> None:
    no(f"{c.op.name}: XNNPACK may take some of these nodes; this test delegate does not model them")


# Subgraph::VisitNode's switch in tflite/delegates/xnnpack/xnnpack_delegate.cc: an op without an
# entry here falls to its `default:` case and is refused.
VISITORS: dict[OpType, Callable[[Checks], None]] = {
    **dict.fromkeys(_FLOAT_UNARY | {OpType.DEQUANTIZE, OpType.ELU, OpType.LEAKY_RELU, OpType.LOGISTIC,
                                    OpType.QUANTIZE, OpType.TANH}, _unary),
    **dict.fromkeys((OpType.ADD, OpType.DIV, OpType.MAXIMUM, OpType.MINIMUM, OpType.MUL, OpType.PRELU,
                     OpType.SQUARED_DIFFERENCE, OpType.SUB), _binary),
    **dict.fromkeys((OpType.MEAN, OpType.SUM, OpType.REDUCE_MAX, OpType.REDUCE_MIN), _reduce),
    OpType.AVERAGE_POOL_2D: _average_pool,
    OpType.BATCH_MATMUL: _batch_matmul,
    OpType.CONCATENATION: _concatenation,
    OpType.CONV_2D: _conv2d,
    OpType.DEPTHWISE_CONV_2D: _depthwise_conv2d,
    OpType.DEPTH_TO_SPACE: _depth_to_space,
    OpType.EXPAND_DIMS: _expand_dims,
    OpType.FULLY_CONNECTED: _fully_connected,
    OpType.MAX_POOL_2D: _max_pool,
    OpType.PAD: _pad,
    OpType.RESHAPE: _reshape,
    OpType.RESIZE_BILINEAR: _resize_bilinear,
    OpType.SLICE: _slice,
    OpType.SOFTMAX: _softmax,
    OpType.SPACE_TO_DEPTH: _space_to_depth,
    OpType.SPLIT: _split,
    OpType.STRIDED_SLICE: _strided_slice,
    OpType.TRANSPOSE: _transpose,
    OpType.TRANSPOSE_CONV: _transpose_conv,
    **dict.fromkeys((OpType.VAR_HANDLE, OpType.READ_VARIABLE, OpType.ASSIGN_VARIABLE,
                     OpType.STABLEHLO_COMPOSITE, OpType.CUSTOM), _not_modelled),
}

