"""Every support rule of the built-in delegates: one op it lets through, one it refuses with its reason.

Each case names a delegate and a rule (by __name__; a tag tells apart generated rules that share a
name) and gives two one-op graphs: one the delegate accepts and one it refuses, where the reason
must be exactly that rule's docstring. test_every_rule_has_a_case collects the rules from every
delegate's rule table and common rules, so a rule added without a case fails the suite.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

from delegates.api import Delegate
from delegates.coreml import CoreMlDelegate, CoreMlOptions
from delegates.gpu import GpuDelegate, GpuOptions
from delegates.hexagon import HexagonDelegate
from delegates.nnapi import NnapiDelegate, NnapiOptions
from delegates.qnn import HtpPrecision, QnnBackend, QnnDelegate, QnnOptions
from delegates.registry import CLASSES
from delegates.rulekit import doc
from runtime.ir.graph import DType, Graph, Op, QuantParams, Tensor
from runtime.ir.optypes import OpType as T
from runtime.ir.options import (Activation, AddOptions, ConcatenationOptions, Conv2DOptions, Conv3DOptions,
                             DepthwiseConv2DOptions, FullyConnectedOptions, MirrorPadMode,
                             GatherOptions, MirrorPadOptions, PackOptions, Pool2DOptions, ReducerOptions,
                             ResizeBilinearOptions, SoftmaxOptions, StridedSliceOptions,
                             TransposeConvOptions)
from sim.cost import Precision
from sim.profile import load_profile
from tests.delegate_kit import ALL, android, const, device, live, qualcomm, single_op

F, H, I8, U8, I16, I32, I64 = (DType.FLOAT32, DType.FLOAT16, DType.INT8, DType.UINT8, DType.INT16,
                               DType.INT32, DType.INT64)
IMG = (1, 4, 4, 3)
OneOp = tuple[Graph, Op]

# -- the delegates under test ---------------------------------------------------------------------

ALL_OPS = frozenset(t.name for t in T)


def nnapi(api: int = 34, level: int = 7, precisions=ALL) -> NnapiDelegate:
    """NNAPI on a phone at `api` whose one device ("test-accel") lists every op type."""
    accel = device("test-accel", "npu", level, ALL_OPS, precisions)
    return NnapiDelegate(NnapiOptions(), android(api, devices=(accel,)))


@functools.lru_cache(maxsize=None)
def _iphone_xs():
    return load_profile("iphone_xs")


def coreml(version: int = 3) -> CoreMlDelegate:
    return CoreMlDelegate(CoreMlOptions(coreml_version=version), _iphone_xs())


def hexagon() -> HexagonDelegate:
    return HexagonDelegate(profile=android())


def qnn(**options) -> QnnDelegate:
    """QNN on a phone with a v75 HTP that runs float16 (fp16=False in options: one that does not)."""
    fp16 = options.pop("fp16", True)
    return QnnDelegate(QnnOptions(**options), qualcomm(75, fp16=fp16))


DEFAULT: dict[str, Callable[[], Delegate]] = {"gpu": GpuDelegate, "hexagon": hexagon,
                                              "coreml": coreml, "nnapi": nnapi, "qnn": qnn}

# Every configuration whose rules are collected: the rules are closures over options and levels.
CONFIGS: dict[str, list[Callable[[], Delegate]]] = {
    "gpu": [GpuDelegate, lambda: GpuDelegate(GpuOptions(enable_quant=False))],
    "hexagon": [hexagon],
    "coreml": [lambda: coreml(2), lambda: coreml(3)],
    "nnapi": [functools.partial(nnapi, api) for api in range(27, 36)] + [lambda: nnapi(27, level=0),
                                                                        lambda: integer_nnapi()],
    "qnn": [qnn, lambda: qnn(htp_precision=HtpPrecision.QUANTIZED), lambda: qnn(fp16=False),
            lambda: qnn(backend_type=QnnBackend.GPU)],
}


def integer_nnapi() -> NnapiDelegate:
    """NNAPI whose one device computes 8-bit integers only (a DSP or an Edge TPU)."""
    return nnapi(precisions={Precision.INT8})


def arg_max(out: DType) -> OneOp:
    """ARG_MAX of a float image over its channels, writing indices of type `out`."""
    return single_op(T.ARG_MAX, [live(IMG, F, "x"), const([3], I32, "axis")], live(IMG[:3], out, "y"))


def at(api: int, **kw) -> Callable[[], NnapiDelegate]:
    return functools.partial(nnapi, api, **kw)


# -- one-op graphs, one helper per op family -----------------------------------------------------


def _q(dtype: DType, scales=(0.1,)) -> QuantParams | None:
    return QuantParams(tuple(scales), (0,) * len(scales)) if dtype in (I8, U8) else None


def _operand(values, dtype: DType, is_const: bool, name: str) -> Tensor:
    return const(values, dtype, name) if is_const else live(np.shape(values), dtype, name)


def unary(kind, dtype=F, shape=IMG, *, n=1, out=None, options=None, version=1, src=None) -> OneOp:
    """An elementwise op on `n` inputs; `out` replaces the output (its dtype, quantization)."""
    inputs = [src] if src is not None else [live(shape, dtype, f"x{i}") for i in range(n)]
    return single_op(kind, inputs, out or live(shape, dtype, "y"), options, version)


def binary(kind, a=F, b=None, shapes=(IMG, IMG), *, options=None, version=1, b_const=False) -> OneOp:
    b = b or a
    other = (const(np.ones(shapes[1]), b, "b") if b_const else live(shapes[1], b, "b"))
    return single_op(kind, [live(shapes[0], a, "a"), other], live(shapes[0], a, "y"), options, version)


def conv(kind=T.CONV_2D, dtype=F, shape=IMG, *, options=None, version=1, bias=True, wshape=None,
         live_weights=False, live_bias=False, per_channel=False, bias_dtype=None) -> OneOp:
    """CONV_2D (weights [8,3,3,C]) or DEPTHWISE_CONV_2D (weights [1,3,3,C]) with a bias."""
    wshape = wshape or ((8, 3, 3, shape[3]) if kind is T.CONV_2D else (1, 3, 3, shape[3]))
    scales = tuple(0.1 + 0.01 * i for i in range(wshape[0] if kind is T.CONV_2D else wshape[3]))
    quant = _q(dtype, scales if per_channel else (0.1,))
    data = None if live_weights else np.ones(wshape, dtype.np)
    weights = Tensor("w", wshape, dtype, quant=quant, data=data)
    bias_dtype = bias_dtype or (I32 if dtype in (I8, U8) else F)
    inputs = [live(shape, dtype), weights]
    if bias:
        inputs.append(_operand(np.zeros(wshape[0] if kind is T.CONV_2D else wshape[3]), bias_dtype,
                               not live_bias, "bias"))
    out = live(shape[:3] + (wshape[0] if kind is T.CONV_2D else wshape[3],), dtype, "y")
    return single_op(kind, inputs, out, options, version)


def fully_connected(dtype=F, *, options=None, version=1, live_weights=False, live_bias=False,
                    per_channel=False, bias_dtype=None) -> OneOp:
    """FULLY_CONNECTED of a [1, 8] input by [4, 8] weights and a bias."""
    quant = _q(dtype, (0.1, 0.2, 0.3, 0.4) if per_channel else (0.1,))
    data = None if live_weights else np.ones((4, 8), dtype.np)
    weights = Tensor("w", (4, 8), dtype, quant=quant, data=data)
    bias = _operand(np.zeros(4), bias_dtype or (I32 if dtype in (I8, U8) else F), not live_bias, "bias")
    return single_op(T.FULLY_CONNECTED, [live((1, 8), dtype), weights, bias], live((1, 4), dtype, "y"),
                     options, version)


def pool(kind=T.AVERAGE_POOL_2D, dtype=F, *, options=None, version=1) -> OneOp:
    return single_op(kind, [live(IMG, dtype)], live(IMG, dtype, "y"), options or Pool2DOptions(), version)


def with_operand(kind, values, dtype=F, shape=IMG, *, vdtype=I32, is_const=True, out_shape=None,
                 options=None, version=1) -> OneOp:
    """Data and one integer operand: PAD paddings, MEAN axes, RESHAPE shape, RESIZE size, TRANSPOSE
    permutation, ARG_MAX axis, GATHER positions."""
    inputs = [live(shape, dtype), _operand(values, vdtype, is_const, "operand")]
    out = live(shape if out_shape is None else out_shape, dtype, "y")
    return single_op(kind, inputs, out, options, version)


def pad(kind=T.PAD, dtype=F, shape=IMG, pads=((0, 0), (1, 1), (1, 1), (0, 0)), **kw) -> OneOp:
    return with_operand(kind, pads, dtype, shape, **kw)


def slicing(kind=T.SLICE, dtype=F, *, is_const=True, options=None, version=1, vdtype=I32) -> OneOp:
    """SLICE (begin, size) or STRIDED_SLICE (begin, end, strides) of a [1, 4, 4, 3] input."""
    bounds = ([0, 0, 0, 0], [1, 2, 2, 3]) if kind is T.SLICE else ([0, 0, 0, 0], [1, 2, 2, 3], [1, 1, 1, 1])
    inputs = [live(IMG, dtype)] + [_operand(v, vdtype, is_const, f"b{i}") for i, v in enumerate(bounds)]
    return single_op(kind, inputs, live((1, 2, 2, 3), dtype, "y"), options, version)


def split(dtype=F, *, is_const=True, vdtype=I32) -> OneOp:
    """SPLIT (axis first) of a [1, 4, 4, 3] input into one piece."""
    return single_op(T.SPLIT, [_operand(3, vdtype, is_const, "axis"), live(IMG, dtype)],
                     live(IMG, dtype, "y"))


def joined(kind=T.CONCATENATION, dtypes=(F, F), *, options=None, version=1) -> OneOp:
    """CONCATENATION or PACK of [1, 4, 4, 3] inputs."""
    inputs = [live(IMG, d, f"x{i}") for i, d in enumerate(dtypes)]
    shape = (1, 4, 4, 3 * len(dtypes)) if kind is T.CONCATENATION else (len(dtypes), *IMG)
    return single_op(kind, inputs, live(shape, dtypes[0], "y"), options, version)


def transpose_conv(dtype=F, *, wdtype=None, const_shape=True, live_weights=False, options=None,
                   version=1) -> OneOp:
    """TRANSPOSE_CONV: (output shape, [3, 3, 3, 3] weights, input)."""
    wdtype = wdtype or dtype
    weights = Tensor("w", (3, 3, 3, 3), wdtype, quant=_q(wdtype),
                     data=None if live_weights else np.ones((3, 3, 3, 3), wdtype.np))
    inputs = [_operand([1, 4, 4, 3], I32, const_shape, "shape"), weights, live(IMG, dtype)]
    return single_op(T.TRANSPOSE_CONV, inputs, live(IMG, dtype, "y"), options or TransposeConvOptions(),
                     version)


def lstm(n_inputs: int) -> OneOp:
    inputs = [live((1, 4), F, "x")] + [const(np.ones((4, 4)), F, f"w{i}") for i in range(n_inputs - 1)]
    return single_op(T.LSTM, inputs, live((1, 4), F, "y"))


def hybrid_conv() -> OneOp:
    """A dynamic-range CONV_2D: float input, int8 weights with a scale, float bias."""
    weights = Tensor("w", (8, 3, 3, 3), I8, quant=_q(I8), data=np.ones((8, 3, 3, 3), np.int8))
    return single_op(T.CONV_2D, [live(IMG), weights, const(np.zeros(8), F, "bias")],
                     live((1, 4, 4, 8), F, "y"))


def sequence_lstm(weights: DType = F) -> OneOp:
    """UNIDIRECTIONAL_SEQUENCE_LSTM of a [1, 2, 4] input: eight gate matrices, four biases, the
    two state variables; int8 weights make it the hybrid one."""
    gate = lambda k: Tensor(f"w{k}", (4, 4), weights, quant=_q(weights),  # noqa: E731
                            data=np.ones((4, 4), weights.np))
    inputs = [live((1, 2, 4), F, "x"), *[gate(k) for k in range(8)], *[None] * 3,
              *[const(np.zeros(4), F, f"b{k}") for k in range(4)], None, None,
              live((1, 4), F, "h"), live((1, 4), F, "c")]
    tensors = [t for t in inputs if t is not None]
    slots = iter(range(len(tensors)))
    index = [-1 if t is None else next(slots) for t in inputs]
    graph = Graph((*tensors, live((1, 2, 4), F, "y")),
                  (Op(T.UNIDIRECTIONAL_SEQUENCE_LSTM, tuple(index), (len(tensors),)),), (0,), (len(tensors),))
    return graph, graph.ops[0]


def quantize(out_dtype=I8, scale=0.1) -> OneOp:
    out = Tensor("y", IMG, out_dtype, quant=QuantParams((scale,), (0,)))
    return unary(T.QUANTIZE, F, out=out)


# -- the cases ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    delegate: str
    rule: str
    accept: OneOp | None           # None: the rule refuses every op of its type
    reject: OneOp
    ok_with: Callable[[], Delegate]
    bad_with: Callable[[], Delegate]
    tag: str = ""

    @property
    def id(self) -> str:
        return f"{self.delegate}-{self.rule}" + (f"-{self.tag}" if self.tag else "")


def custom(code: str) -> OneOp:
    """A float custom op on one image (MediaPipe's MaxPoolingWithArgmax2D when the GPU takes it)."""
    import struct

    tensors = (live(IMG, F, "x"), live(IMG, F, "v"), live(IMG, F, "i"))
    op = Op(T.CUSTOM, (0,), (1, 2), custom_code=code, custom_options=struct.pack("<6i", 1, 1, 1, 1, 1, 0))
    return Graph(tensors, (op,), (0,), (1, 2)), op


def case(delegate, rule, accept, reject, *, ok_with=None, bad_with=None, tag="") -> Case:
    ok_with = ok_with or DEFAULT[delegate]
    return Case(delegate, rule, accept, reject, ok_with, bad_with or ok_with, tag)


A = Activation
GPU = [
    case("gpu", "gpu_custom_op", custom("MaxPoolingWithArgmax2D"), custom("VendorOnlyOp")),
    case("gpu", "max_version_1", with_operand(T.RESHAPE, [1, 48], out_shape=(1, 48)),
         with_operand(T.RESHAPE, [1, 48], out_shape=(1, 48), version=2)),
    case("gpu", "max_version_2", unary(T.SOFTMAX, version=2), unary(T.SOFTMAX, version=3)),
    case("gpu", "max_version_3", with_operand(T.RESIZE_BILINEAR, [8, 8], version=3),
         with_operand(T.RESIZE_BILINEAR, [8, 8], version=4)),
    case("gpu", "max_version_4", with_operand(T.TRANSPOSE, [0, 2, 1, 3], version=4),
         with_operand(T.TRANSPOSE, [0, 2, 1, 3], version=5)),
    case("gpu", "max_version_6", conv(version=6), conv(version=7)),
    case("gpu", "max_version_9", fully_connected(version=9), fully_connected(version=10)),
    case("gpu", "fused_activation_supported", binary(T.ADD, options=AddOptions(A.RELU6)),
         binary(T.ADD, options=AddOptions(A.SIGN_BIT))),
    case("gpu", "softmax_beta_one", unary(T.SOFTMAX, options=SoftmaxOptions(1.0)),
         unary(T.SOFTMAX, options=SoftmaxOptions(2.0))),
    case("gpu", "default_weights_format", fully_connected(options=FullyConnectedOptions()),
         fully_connected(options=FullyConnectedOptions(weights_format=1))),
    case("gpu", "constant_axes", with_operand(T.MEAN, [1, 2]), with_operand(T.MEAN, [1, 2], is_const=False)),
    case("gpu", "constant_paddings", pad(), pad(is_const=False)),
    case("gpu", "reflect_mirror_pad", pad(T.MIRROR_PAD, options=MirrorPadOptions(MirrorPadMode.REFLECT)),
         pad(T.MIRROR_PAD, options=MirrorPadOptions(MirrorPadMode.SYMMETRIC))),
    case("gpu", "constant_slice_parameters", slicing(), slicing(is_const=False)),
    case("gpu", "no_ellipsis_or_new_axis", slicing(T.STRIDED_SLICE, options=StridedSliceOptions()),
         slicing(T.STRIDED_SLICE, options=StridedSliceOptions(new_axis_mask=1))),
    case("gpu", "constant_permutation", with_operand(T.TRANSPOSE, [0, 2, 1, 3]),
         with_operand(T.TRANSPOSE, [0, 2, 1, 3], is_const=False)),
    case("gpu", "basic_lstm_kernel", lstm(5), lstm(4)),
    case("gpu", "tensor_types", binary(T.ADD, I8), binary(T.ADD, I32)),
]

HEXAGON = [
    case("hexagon", "rank_at_most_4", binary(T.ADD, I8), binary(T.ADD, I8, shapes=((1,) + IMG,) * 2)),
    case("hexagon", "eight_bit_data", binary(T.ADD, U8), binary(T.ADD, F)),
    case("hexagon", "integer_tensors", unary(T.RELU, I8, version=2),
         unary(T.RELU, I8, out=live(IMG, I64, "y"), version=2)),
    case("hexagon", "max_version_1", with_operand(T.RESHAPE, [1, 48], I8, out_shape=(1, 48)),
         with_operand(T.RESHAPE, [1, 48], I8, out_shape=(1, 48), version=2)),
    case("hexagon", "max_version_2", unary(T.SOFTMAX, I8, version=2), unary(T.SOFTMAX, I8, version=3)),
    case("hexagon", "max_version_3", conv(dtype=I8, version=3), conv(dtype=I8, version=4)),
    case("hexagon", "max_version_4", fully_connected(I8, version=4), fully_connected(I8, version=5)),
    case("hexagon", "version_2", unary(T.RELU, I8, version=2), unary(T.RELU, I8, version=1)),
    case("hexagon", "input_types", binary(T.ADD, I8), binary(T.ADD, I8, I32), tag="binary"),
    case("hexagon", "input_types", with_operand(T.ARG_MAX, [3], I8, out_shape=(1, 4, 4)),
         with_operand(T.ARG_MAX, [3], I8, vdtype=I64, out_shape=(1, 4, 4)), tag="axis"),
    case("hexagon", "input_types", conv(dtype=I8), conv(dtype=I8, bias_dtype=I8), tag="conv"),
    case("hexagon", "input_types", fully_connected(I8), fully_connected(I8, bias_dtype=I8), tag="fc"),
    case("hexagon", "input_types", binary(T.SQUARED_DIFFERENCE, I8, version=2),
         binary(T.SQUARED_DIFFERENCE, U8, version=2), tag="int8_binary"),
    case("hexagon", "input_types", unary(T.RSQRT, I8, version=2), unary(T.RSQRT, U8, version=2),
         tag="int8_unary"),
    case("hexagon", "input_types", unary(T.LOGISTIC, I8), unary(T.LOGISTIC, I8, n=2), tag="unary"),
    case("hexagon", "relu_or_no_activation", binary(T.ADD, I8, options=AddOptions(A.RELU_N1_TO_1)),
         binary(T.ADD, I8, options=AddOptions(A.TANH))),
    case("hexagon", "no_activation", pool(dtype=I8), pool(dtype=I8, options=Pool2DOptions(
        fused_activation_function=A.RELU))),
    case("hexagon", "small_max_pool_window",
         pool(T.MAX_POOL_2D, I8, options=Pool2DOptions(padding=1, filter_width=13, filter_height=13)),
         pool(T.MAX_POOL_2D, I8, options=Pool2DOptions(padding=0, filter_width=13, filter_height=13))),
    case("hexagon", "stride_at_most_3", conv(dtype=I8, options=Conv2DOptions(stride_w=3, stride_h=3)),
         conv(dtype=I8, options=Conv2DOptions(stride_w=4))),
    case("hexagon", "no_dilation", conv(dtype=I8, options=Conv2DOptions()),
         conv(dtype=I8, options=Conv2DOptions(dilation_h_factor=2))),
    case("hexagon", "dilation_only_with_stride_1",
         conv(T.DEPTHWISE_CONV_2D, I8, options=DepthwiseConv2DOptions(dilation_w_factor=2)),
         conv(T.DEPTHWISE_CONV_2D, I8, options=DepthwiseConv2DOptions(stride_w=2, dilation_w_factor=2))),
    case("hexagon", "depth_multiplier_1",
         conv(T.DEPTHWISE_CONV_2D, I8, (1, 4, 4, 1), wshape=(1, 3, 3, 2),
              options=DepthwiseConv2DOptions(depth_multiplier=2)),
         conv(T.DEPTHWISE_CONV_2D, I8, wshape=(1, 3, 3, 6),
              options=DepthwiseConv2DOptions(depth_multiplier=2))),
    case("hexagon", "filter_height_at_least_2", conv(T.DEPTHWISE_CONV_2D, I8, wshape=(1, 2, 1, 3)),
         conv(T.DEPTHWISE_CONV_2D, I8, wshape=(1, 1, 3, 3))),
    case("hexagon", "per_tensor_weights", fully_connected(I8), fully_connected(I8, per_channel=True)),
    case("hexagon", "constant_bias", fully_connected(I8), fully_connected(I8, live_bias=True)),
    case("hexagon", "plain_fully_connected", fully_connected(I8, options=FullyConnectedOptions()),
         fully_connected(I8, options=FullyConnectedOptions(keep_num_dims=True))),
    case("hexagon", "second_input_constant", pad(dtype=I8), pad(dtype=I8, is_const=False)),
    case("hexagon", "split_axis_constant", split(I8), split(I8, is_const=False)),
    case("hexagon", "slice_bounds_constant", slicing(dtype=I8), slicing(dtype=I8, is_const=False)),
    case("hexagon", "strided_bounds_constant", slicing(T.STRIDED_SLICE, I8),
         slicing(T.STRIDED_SLICE, I8, is_const=False)),
    case("hexagon", "no_ellipsis_or_new_axis", slicing(T.STRIDED_SLICE, I8),
         slicing(T.STRIDED_SLICE, I8, options=StridedSliceOptions(ellipsis_mask=1))),
    case("hexagon", "resize_size_documented", with_operand(T.RESIZE_BILINEAR, [65, 65], I8),
         with_operand(T.RESIZE_BILINEAR, [8, 66], I8)),
    case("hexagon", "same_or_valid_padding", transpose_conv(I8, options=TransposeConvOptions(padding=1)),
         transpose_conv(I8, options=TransposeConvOptions(padding=2))),
    case("hexagon", "transpose_conv_inputs", transpose_conv(I8), transpose_conv(I8, wdtype=I32)),
    case("hexagon", "all_inputs_8bit", joined(dtypes=(I8, U8)), joined(dtypes=(I8, I32))),
    # TFLite's IsNodeSupportedByHexagon returns false for SUM outright: nothing to accept.
    case("hexagon", "never", None, with_operand(T.SUM, [1, 2], I8)),
]

COREML = [
    case("coreml", "float_input", binary(T.ADD), binary(T.ADD, I8)),
    case("coreml", "max_version_1", unary(T.RELU), unary(T.RELU, version=2)),
    case("coreml", "max_version_2", conv(T.DEPTHWISE_CONV_2D, version=2),
         conv(T.DEPTHWISE_CONV_2D, version=3)),
    case("coreml", "max_version_6", fully_connected(version=6), fully_connected(version=7)),
    case("coreml", "binary_input_types", binary(T.ADD, F, H, b_const=True), binary(T.ADD, F, I32)),
    case("coreml", "broadcastable", binary(T.MUL, shapes=(IMG, (1, 1, 1, 3))),
         binary(T.MUL, shapes=(IMG, (1, 4, 4, 2)))),
    case("coreml", "no_activation", pool(), pool(options=Pool2DOptions(fused_activation_function=A.RELU))),
    case("coreml", "concat_channel_axis", joined(options=ConcatenationOptions(axis=-1)),
         joined(options=ConcatenationOptions(axis=1))),
    case("coreml", "not_sign_bit", conv(options=Conv2DOptions(fused_activation_function=A.RELU)),
         conv(options=Conv2DOptions(fused_activation_function=A.SIGN_BIT))),
    case("coreml", "constant_kernel", conv(), conv(live_weights=True)),
    case("coreml", "constant_bias", conv(), conv(live_bias=True)),
    case("coreml", "constant_output_shape", transpose_conv(), transpose_conv(const_shape=False)),
    case("coreml", "fully_connected_form", fully_connected(), fully_connected(live_weights=True)),
    case("coreml", "mean_over_height_width", with_operand(T.MEAN, [1, 2], options=ReducerOptions(True)),
         with_operand(T.MEAN, [3], options=ReducerOptions(True))),
    case("coreml", "constant_hw_padding", pad(), pad(pads=((1, 1), (0, 0), (0, 0), (0, 0)))),
    case("coreml", "reflect_mode", pad(T.MIRROR_PAD, options=MirrorPadOptions(MirrorPadMode.REFLECT)),
         pad(T.MIRROR_PAD, options=MirrorPadOptions(MirrorPadMode.SYMMETRIC))),
    case("coreml", "coreml_version_2", with_operand(T.RESHAPE, [1, 4, 12], out_shape=(1, 4, 12)),
         with_operand(T.RESHAPE, [1, 4, 12], out_shape=(1, 4, 12)), ok_with=lambda: coreml(2),
         bad_with=lambda: coreml(3)),
    case("coreml", "reshape_target", with_operand(T.RESHAPE, [1, 4, 12], out_shape=(1, 4, 12)),
         with_operand(T.RESHAPE, [1, 48], out_shape=(1, 48)), ok_with=lambda: coreml(2)),
    case("coreml", "constant_size", with_operand(T.RESIZE_BILINEAR, [8, 8]),
         with_operand(T.RESIZE_BILINEAR, [8, 8], is_const=False)),
    case("coreml", "softmax_beta_one", unary(T.SOFTMAX), unary(T.SOFTMAX, options=SoftmaxOptions(0.5))),
]

NNAPI = [
    case("nnapi", "needs_api_27", binary(T.ADD), binary(T.ADD), ok_with=at(27), bad_with=at(27, level=0)),
    case("nnapi", "needs_api_28", pad(), pad(), ok_with=at(28), bad_with=at(27)),
    case("nnapi", "needs_api_29", unary(T.ABS), unary(T.ABS), ok_with=at(29), bad_with=at(28)),
    case("nnapi", "needs_api_30", unary(T.ELU), unary(T.ELU), ok_with=at(30), bad_with=at(29)),
    case("nnapi", "needs_api_33", binary(T.BATCH_MATMUL, shapes=((1, 4, 4),) * 2),
         binary(T.BATCH_MATMUL, shapes=((1, 4, 4),) * 2), ok_with=at(33), bad_with=at(32)),
    case("nnapi", "needs_api_34", pad(T.MIRROR_PAD), pad(T.MIRROR_PAD), ok_with=at(34), bad_with=at(33)),
    case("nnapi", "max_version_1", unary(T.FLOOR), unary(T.FLOOR, version=2)),
    case("nnapi", "max_version_2", binary(T.ADD, version=2), binary(T.ADD, version=3)),
    case("nnapi", "max_version_3", binary(T.SUB, version=3), binary(T.SUB, version=4)),
    case("nnapi", "max_version_5", conv(version=5), conv(version=6)),
    case("nnapi", "float_or_quant8", binary(T.MUL, U8), binary(T.MUL, I32)),
    case("nnapi", "float_only", unary(T.ABS), unary(T.ABS, I8)),
    case("nnapi", "conv_has_bias", conv(), conv(bias=False)),
    case("nnapi", "no_activation", joined(options=ConcatenationOptions(axis=3)),
         joined(options=ConcatenationOptions(axis=3, fused_activation_function=A.RELU))),
    case("nnapi", "rank_at_most_4", binary(T.SQUARED_DIFFERENCE),
         binary(T.SQUARED_DIFFERENCE, shapes=((1,) + IMG,) * 2)),
    case("nnapi", "constant_second_input", with_operand(T.RESHAPE, [1, 48], out_shape=(1, 48)),
         with_operand(T.RESHAPE, [1, 48], out_shape=(1, 48), is_const=False)),
    case("nnapi", "rank_4_input", with_operand(T.RESIZE_BILINEAR, [8, 8]),
         with_operand(T.RESIZE_BILINEAR, [8, 8], shape=(4, 4, 3))),
    case("nnapi", "constant_transpose_conv_inputs", transpose_conv(), transpose_conv(live_weights=True)),
    case("nnapi", "non_empty_input", pad(), pad(shape=(1, 0, 4, 3))),
    case("nnapi", "float32_div", binary(T.DIV), binary(T.DIV, I32)),
    case("nnapi", "non_scalar_output", with_operand(T.MEAN, [1, 2], out_shape=(1, 3)),
         with_operand(T.MEAN, [0, 1, 2, 3], out_shape=())),
    case("nnapi", "constant_int32_axis", split(), split(is_const=False)),
    case("nnapi", "int32_positions", with_operand(T.GATHER, [0, 2]),
         with_operand(T.GATHER, [0, 2], vdtype=I64)),
    case("nnapi", "pack_axis_not_last", joined(T.PACK, options=PackOptions(2, axis=0)),
         joined(T.PACK, options=PackOptions(2, axis=4))),
    case("nnapi", "dequantize_input", unary(T.DEQUANTIZE, I8, out=live(IMG, F, "y")),
         unary(T.DEQUANTIZE, I16, out=live(IMG, F, "y"))),
    case("nnapi", "quant_scale_positive", quantize(scale=0.1), quantize(scale=0.0)),
    case("nnapi", "densify_constant", unary(T.DENSIFY, src=const(np.ones(IMG), F, "x")),
         unary(T.DENSIFY)),
    case("nnapi", "per_tensor_before_1_2", conv(dtype=I8, per_channel=True), conv(dtype=I8, per_channel=True),
         ok_with=at(29), bad_with=at(28)),
    case("nnapi", "dilation_since_1_2", conv(options=Conv2DOptions(dilation_w_factor=2)),
         conv(options=Conv2DOptions(dilation_w_factor=2)), ok_with=at(29), bad_with=at(28)),
    case("nnapi", "keep_num_dims_since_1_3",
         fully_connected(options=FullyConnectedOptions(keep_num_dims=True)),
         fully_connected(options=FullyConnectedOptions(keep_num_dims=True)), ok_with=at(30), bad_with=at(29)),
    case("nnapi", "float_before_1_2", unary(T.TANH, U8), unary(T.TANH, U8), ok_with=at(29), bad_with=at(28)),
    case("nnapi", "no_align_corners_before_1_3",
         with_operand(T.RESIZE_BILINEAR, [8, 8], options=ResizeBilinearOptions(align_corners=True)),
         with_operand(T.RESIZE_BILINEAR, [8, 8], options=ResizeBilinearOptions(align_corners=True)),
         ok_with=at(30), bad_with=at(29)),
    case("nnapi", "uint8_output_before_1_3", quantize(I8), quantize(I8), ok_with=at(30), bad_with=at(29)),
    case("nnapi", "softmax_rank_before_1_2", unary(T.SOFTMAX, shape=(1, 4, 3)),
         unary(T.SOFTMAX, shape=(1, 4, 3)), ok_with=at(29), bad_with=at(28)),
    case("nnapi", "int8_since_1_2", binary(T.ADD, I8), binary(T.ADD, I8), ok_with=at(29), bad_with=at(28)),
    case("nnapi", "device_supports_op", binary(T.ADD, I8), binary(T.ADD, I8),
         bad_with=lambda: nnapi(precisions={Precision.FLOAT32})),
    case("nnapi", "hybrid_since_1_2", hybrid_conv(), hybrid_conv(), ok_with=at(29), bad_with=at(28)),
    case("nnapi", "not_hybrid", sequence_lstm(), sequence_lstm(I8)),
    case("nnapi", "int32_index_output", arg_max(I32), arg_max(I64)),
    case("nnapi", "integer_device_types", binary(T.ADD, I8), unary(T.RELU, I8, out=live(IMG, I64, "y")),
         ok_with=integer_nnapi, bad_with=integer_nnapi),
]

def operands(kind, *values, dtype=F, shape=IMG, const_at=None, out_shape=None, options=None) -> OneOp:
    """Data, then integer operands (constant unless their position is left out of `const_at`)."""
    keep = range(len(values)) if const_at is None else const_at
    inputs = [live(shape, dtype)] + [_operand(v, I32, k in keep, f"v{k}") for k, v in enumerate(values)]
    return single_op(kind, inputs, live(out_shape or shape, dtype, "y"), options)


def one_hot(static=True, dtype=F) -> OneOp:
    inputs = [live((4,), I32, "indices"), _operand(np.int32(3), I32, static, "depth"),
              const(1, dtype, "on"), const(0, dtype, "off")]
    return single_op(T.ONE_HOT, inputs, live((4, 3), dtype, "y"))


def outputs_of(kind, inputs, outputs) -> OneOp:
    """One op with several outputs (SPLIT_V's pieces, TOPK_V2's values and indices)."""
    tensors = (*inputs, *outputs)
    op = Op(kind, tuple(range(len(inputs))), tuple(range(len(inputs), len(tensors))))
    graph = Graph(tensors, (op,), tuple(i for i, t in enumerate(inputs) if not t.is_constant),
                  op.outputs)
    return graph, op


def split_v(pieces=2, *, static=(0, 1), vdtype=I32) -> OneOp:
    """SPLIT_V of a [1, 4, 4, 3] input along its height into `pieces` (size_splits, then the axis)."""
    sizes = [4 // pieces] * pieces
    inputs = [live(IMG), _operand(sizes, I32, 0 in static, "sizes"), _operand(1, vdtype, 1 in static, "axis")]
    return outputs_of(T.SPLIT_V, inputs, [live((1, 4 // pieces, 4, 3), F, f"y{i}") for i in range(pieces)])


def top_k(static=True) -> OneOp:
    inputs = [live(IMG), _operand(np.int32(2), I32, static, "k")]
    return outputs_of(T.TOPK_V2, inputs, [live((1, 4, 4, 2), F, "values"), live((1, 4, 4, 2), I32, "indices")])


def scatter_nd(static=True) -> OneOp:
    """SCATTER_ND of two [4, 3] rows into a [4, 4, 3] output of zeros."""
    inputs = [live((2, 1), I32, "indices"), live((2, 4, 3), F, "updates"),
              _operand([4, 4, 3], I32, static, "shape")]
    return single_op(T.SCATTER_ND, inputs, live((4, 4, 3), F, "y"))


def pad_v2(dtype=F, *, static=True) -> OneOp:
    inputs = [live(IMG, dtype), const(((0, 0), (1, 1), (1, 1), (0, 0)), I32, "pads"),
              _operand(0, dtype, static, "value")]
    return single_op(T.PADV2, inputs, live((1, 6, 6, 3), dtype, "y"))


def update_slice(shape=IMG, update=(1, 1, 4, 3), vdtype=I32, *, is_const=False) -> OneOp:
    """DYNAMIC_UPDATE_SLICE of an `update` block into a `shape` operand at start indices [0, 1, 0, ...]."""
    start = _operand([0, 1, 0, 0][:len(shape)], vdtype, is_const, "start")
    inputs = [live(shape, F, "operand"), live(update, F, "update"), start]
    return single_op(T.DYNAMIC_UPDATE_SLICE, inputs, live(shape, F, "y"))


def conv_3d(activation=A.NONE) -> OneOp:
    """CONV_3D of a [1, 2, 4, 4, 3] input by [1, 1, 1, 3, 8] weights."""
    inputs = [live((1, 2, 4, 4, 3)), const(np.ones((1, 1, 1, 3, 8)), F, "w")]
    return single_op(T.CONV_3D, inputs, live((1, 2, 4, 4, 8), F, "y"),
                     Conv3DOptions(fused_activation_function=activation))


QNN = [
    case("qnn", "fused_activation_supported", binary(T.ADD, options=AddOptions(A.TANH)),
         binary(T.ADD, options=AddOptions(A.SIGN_BIT))),
    case("qnn", "fused_activation_supported", conv_3d(A.RELU6), conv_3d(A.SIGN_BIT), tag="conv_3d"),
    case("qnn", "fused_activation_supported",
         pool(T.L2_POOL_2D, options=Pool2DOptions(fused_activation_function=A.RELU)),
         pool(T.L2_POOL_2D, options=Pool2DOptions(fused_activation_function=A.SIGN_BIT)), tag="l2_pool"),
    case("qnn", "static_axis", with_operand(T.ARG_MAX, [3], out_shape=(1, 4, 4)),
         with_operand(T.ARG_MAX, [3], is_const=False, out_shape=(1, 4, 4))),
    case("qnn", "static_paddings", pad(), pad(is_const=False)),
    case("qnn", "pad_data_types", pad(dtype=I8), pad(dtype=I32)),
    case("qnn", "pad_data_types", pad(T.MIRROR_PAD, H, options=MirrorPadOptions(MirrorPadMode.REFLECT)),
         pad(T.MIRROR_PAD, DType.BOOL, options=MirrorPadOptions(MirrorPadMode.REFLECT)), tag="mirror"),
    case("qnn", "static_pad_value", pad_v2(I8), pad_v2(static=False)),
    case("qnn", "static_permutation", with_operand(T.TRANSPOSE, [0, 2, 1, 3]),
         with_operand(T.TRANSPOSE, [0, 2, 1, 3], is_const=False)),
    case("qnn", "static_slice", slicing(), slicing(is_const=False)),
    case("qnn", "static_slice", slicing(), slicing(vdtype=I64), tag="int64"),
    case("qnn", "static_strided_slice", slicing(T.STRIDED_SLICE, options=StridedSliceOptions()),
         slicing(T.STRIDED_SLICE, is_const=False, options=StridedSliceOptions())),
    case("qnn", "static_strided_slice", slicing(T.STRIDED_SLICE, options=StridedSliceOptions()),
         slicing(T.STRIDED_SLICE, vdtype=I64, options=StridedSliceOptions()), tag="int64"),
    case("qnn", "no_ellipsis_mask", slicing(T.STRIDED_SLICE, options=StridedSliceOptions(new_axis_mask=1)),
         slicing(T.STRIDED_SLICE, options=StridedSliceOptions(ellipsis_mask=1))),
    case("qnn", "static_split_axis", split(), split(is_const=False)),
    case("qnn", "static_split_axis", split(), split(vdtype=I64), tag="int64"),
    # splitv_op_builder.cc builds one piece as a RESHAPE, whatever its operands
    case("qnn", "static_split_v", split_v(1, static=()), split_v(2, static=(0,))),
    case("qnn", "static_split_v", split_v(2, vdtype=I32), split_v(2, vdtype=I64), tag="int64"),
    case("qnn", "static_block", operands(T.SPACE_TO_BATCH_ND, [2, 2], [[0, 0], [0, 0]], out_shape=(4, 2, 2, 3)),
         operands(T.SPACE_TO_BATCH_ND, [2, 2], [[0, 0], [0, 0]], const_at=(0,), out_shape=(4, 2, 2, 3))),
    case("qnn", "static_one_hot", one_hot(), one_hot(static=False)),
    case("qnn", "one_hot_value_types", one_hot(dtype=U8), one_hot(dtype=I32)),
    case("qnn", "static_axes_vector", with_operand(T.MEAN, [1, 2]), with_operand(T.MEAN, 1)),
    case("qnn", "static_axes_vector", with_operand(T.SUM, [1, 2]), with_operand(T.SUM, [1, 2], vdtype=I64),
         tag="int64"),
    case("qnn", "static_multiples", with_operand(T.TILE, [1, 2, 1, 1], out_shape=(1, 8, 4, 3)),
         with_operand(T.TILE, [1, 2, 1, 1], is_const=False, out_shape=(1, 8, 4, 3))),
    case("qnn", "static_shape", scatter_nd(), scatter_nd(static=False)),
    case("qnn", "static_k", top_k(), top_k(static=False)),
    case("qnn", "broadcast_input_types", with_operand(T.BROADCAST_TO, [2, 4, 4, 3], I8, out_shape=(2, 4, 4, 3)),
         with_operand(T.BROADCAST_TO, [2, 4, 4, 3], I16, out_shape=(2, 4, 4, 3))),
    case("qnn", "update_slice_form", update_slice(), update_slice(vdtype=I64, is_const=True)),
    case("qnn", "update_slice_form", update_slice(), update_slice((8,), (2,)), tag="rank_1"),
    case("qnn", "gather_batch_dims_0", with_operand(T.GATHER, [0, 2], options=GatherOptions(batch_dims=0)),
         with_operand(T.GATHER, [0, 2], options=GatherOptions(batch_dims=1))),
    case("qnn", "single_static_axis", with_operand(T.REVERSE_V2, [1]), with_operand(T.REVERSE_V2, [1, 2])),
    case("qnn", "htp_tensor_types", binary(T.ADD), binary(T.ADD, I64)),
    case("qnn", "htp_quantized_types", binary(T.ADD, I8), binary(T.ADD),
         ok_with=lambda: qnn(htp_precision=HtpPrecision.QUANTIZED)),
    case("qnn", "htp_without_fp16", binary(T.ADD, I16), binary(T.ADD), ok_with=lambda: qnn(fp16=False)),
    case("qnn", "gpu_tensor_types", binary(T.ADD), binary(T.ADD, I8),
         ok_with=lambda: qnn(backend_type=QnnBackend.GPU)),
]

CASES = GPU + HEXAGON + COREML + NNAPI + QNN


def _rule_of(case_: Case, delegate: Delegate, op: Op):
    """The case's rule among those the delegate runs for this op (its table row, then common rules)."""
    rules = (*delegate.rule_table().get(op.type, ()), *delegate.common_rules())
    found = [r for r in rules if r.__name__ == case_.rule]
    assert len(found) == 1, f"{case_.id}: {len(found)} rules named {case_.rule} for {op.type.name}"
    return found[0]


def _key(name: str, r) -> tuple[str, str, str]:
    return name, r.__name__, doc(r)


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_rule_accepts_one_op_and_rejects_another_with_its_reason(c: Case):
    if c.accept is not None:
        graph, op = c.accept
        answer = c.ok_with().is_node_supported(op, graph)
        assert answer.ok, answer.reason
    graph, op = c.reject
    delegate = c.bad_with()
    answer = delegate.is_node_supported(op, graph)
    expected = doc(_rule_of(c, delegate, op))
    assert not answer.ok
    assert answer.reason == expected


def test_every_rule_has_a_case():
    assert set(CONFIGS) == set(CLASSES)
    declared = {_key(name, r) for name, makers in CONFIGS.items() for make in makers
                for d in [make()] for rules in (*d.rule_table().values(), d.common_rules()) for r in rules}
    covered = {_key(c.delegate, _rule_of(c, d, op)) for c in CASES for d in [c.bad_with()]
               for op in [c.reject[1]]}
    assert sorted(declared - covered) == []
    assert len({c.id for c in CASES}) == len(CASES)


def test_rules_that_share_a_name_are_told_apart_by_their_reason():
    reasons = {doc(_rule_of(c, c.bad_with(), c.reject[1])) for c in HEXAGON if c.rule == "input_types"}
    assert len(reasons) == sum(c.rule == "input_types" for c in HEXAGON) == 7
