"""Typed, frozen options for the TFLite builtin ops the testbed runs (field names follow schema.fbs)."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Padding(enum.IntEnum):
    SAME = 0
    VALID = 1


class Activation(enum.IntEnum):
    NONE = 0
    RELU = 1
    RELU_N1_TO_1 = 2
    RELU6 = 3
    TANH = 4
    SIGN_BIT = 5


class MirrorPadMode(enum.IntEnum):
    REFLECT = 0
    SYMMETRIC = 1


@dataclass(frozen=True)
class AddOptions:
    fused_activation_function: Activation = Activation.NONE
    pot_scale_int16: bool = True


@dataclass(frozen=True)
class SubOptions(AddOptions):
    pass


@dataclass(frozen=True)
class MulOptions:
    fused_activation_function: Activation = Activation.NONE


@dataclass(frozen=True)
class DivOptions(MulOptions):
    pass


@dataclass(frozen=True)
class Conv2DOptions:
    padding: Padding = Padding.SAME
    stride_w: int = 1
    stride_h: int = 1
    fused_activation_function: Activation = Activation.NONE
    dilation_w_factor: int = 1
    dilation_h_factor: int = 1


@dataclass(frozen=True)
class DepthwiseConv2DOptions:
    padding: Padding = Padding.SAME
    stride_w: int = 1
    stride_h: int = 1
    depth_multiplier: int = 1
    fused_activation_function: Activation = Activation.NONE
    dilation_w_factor: int = 1
    dilation_h_factor: int = 1


@dataclass(frozen=True)
class TransposeConvOptions:
    padding: Padding = Padding.SAME
    stride_w: int = 1
    stride_h: int = 1
    fused_activation_function: Activation = Activation.NONE


@dataclass(frozen=True)
class FullyConnectedOptions:
    fused_activation_function: Activation = Activation.NONE
    weights_format: int = 0
    keep_num_dims: bool = False
    asymmetric_quantize_inputs: bool = False


@dataclass(frozen=True)
class BatchMatMulOptions:
    adj_x: bool = False
    adj_y: bool = False
    asymmetric_quantize_inputs: bool = False


@dataclass(frozen=True)
class Pool2DOptions:
    padding: Padding = Padding.SAME
    stride_w: int = 1
    stride_h: int = 1
    filter_width: int = 1
    filter_height: int = 1
    fused_activation_function: Activation = Activation.NONE


@dataclass(frozen=True)
class ReducerOptions:
    keep_dims: bool = False


@dataclass(frozen=True)
class ConcatenationOptions:
    axis: int = 0
    fused_activation_function: Activation = Activation.NONE


@dataclass(frozen=True)
class MirrorPadOptions:
    mode: MirrorPadMode = MirrorPadMode.REFLECT


@dataclass(frozen=True)
class ReshapeOptions:
    new_shape: tuple[int, ...] = ()


@dataclass(frozen=True)
class SqueezeOptions:
    squeeze_dims: tuple[int, ...] = ()


@dataclass(frozen=True)
class StridedSliceOptions:
    begin_mask: int = 0
    end_mask: int = 0
    ellipsis_mask: int = 0
    new_axis_mask: int = 0
    shrink_axis_mask: int = 0
    offset: bool = False


@dataclass(frozen=True)
class SplitOptions:
    num_splits: int = 1


@dataclass(frozen=True)
class SplitVOptions(SplitOptions):
    pass


@dataclass(frozen=True)
class PackOptions:
    values_count: int = 0
    axis: int = 0


@dataclass(frozen=True)
class UnpackOptions:
    num: int = 0
    axis: int = 0


@dataclass(frozen=True)
class ShapeOptions:
    out_type: int = 2  # TensorType INT32


@dataclass(frozen=True)
class GatherOptions:
    axis: int = 0
    batch_dims: int = 0


@dataclass(frozen=True)
class LeakyReluOptions:
    alpha: float = 0.2


@dataclass(frozen=True)
class SoftmaxOptions:
    beta: float = 1.0


@dataclass(frozen=True)
class ResizeBilinearOptions:
    align_corners: bool = False
    half_pixel_centers: bool = False


@dataclass(frozen=True)
class ResizeNearestNeighborOptions(ResizeBilinearOptions):
    pass


@dataclass(frozen=True)
class DepthToSpaceOptions:
    block_size: int = 1


@dataclass(frozen=True)
class SpaceToDepthOptions(DepthToSpaceOptions):
    pass


@dataclass(frozen=True)
class CastOptions:
    in_data_type: int = 0
    out_data_type: int = 0


@dataclass(frozen=True)
class UnidirectionalSequenceLSTMOptions:
    fused_activation_function: Activation = Activation.NONE
    cell_clip: float = 0.0
    proj_clip: float = 0.0
    time_major: bool = False
    asymmetric_quantize_inputs: bool = False
    diagonal_recurrent_tensors: bool = False


@dataclass(frozen=True)
class GenericOptions:
    """Options of an op the testbed has no typed form for: (name, value) pairs as stored."""

    table: str = ""
    fields: tuple[tuple[str, object], ...] = ()


# Which schema table each typed options class is read from (BuiltinOptions union member name).
TABLES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        AddOptions, SubOptions, MulOptions, DivOptions, Conv2DOptions, DepthwiseConv2DOptions,
        TransposeConvOptions, FullyConnectedOptions, BatchMatMulOptions, Pool2DOptions,
        ReducerOptions, ConcatenationOptions, MirrorPadOptions, ReshapeOptions, SqueezeOptions,
        StridedSliceOptions, SplitOptions, SplitVOptions, PackOptions, UnpackOptions, ShapeOptions,
        GatherOptions, LeakyReluOptions, SoftmaxOptions, ResizeBilinearOptions,
        ResizeNearestNeighborOptions, DepthToSpaceOptions, SpaceToDepthOptions, CastOptions,
        UnidirectionalSequenceLSTMOptions,
    )
}


# The options class each op reads when its model stores no options table (defaults then apply).
FOR_OP: dict[str, type] = {
    "ADD": AddOptions, "SUB": SubOptions, "MUL": MulOptions, "DIV": DivOptions,
    "CONV_2D": Conv2DOptions, "DEPTHWISE_CONV_2D": DepthwiseConv2DOptions,
    "TRANSPOSE_CONV": TransposeConvOptions, "FULLY_CONNECTED": FullyConnectedOptions,
    "BATCH_MATMUL": BatchMatMulOptions, "AVERAGE_POOL_2D": Pool2DOptions, "MAX_POOL_2D": Pool2DOptions,
    "MEAN": ReducerOptions, "SUM": ReducerOptions, "REDUCE_MAX": ReducerOptions,
    "REDUCE_MIN": ReducerOptions, "CONCATENATION": ConcatenationOptions,
    "MIRROR_PAD": MirrorPadOptions, "RESHAPE": ReshapeOptions, "SQUEEZE": SqueezeOptions,
    "STRIDED_SLICE": StridedSliceOptions, "SPLIT": SplitOptions, "SPLIT_V": SplitVOptions,
    "PACK": PackOptions, "UNPACK": UnpackOptions, "SHAPE": ShapeOptions, "GATHER": GatherOptions,
    "LEAKY_RELU": LeakyReluOptions, "SOFTMAX": SoftmaxOptions,
    "RESIZE_BILINEAR": ResizeBilinearOptions, "RESIZE_NEAREST_NEIGHBOR": ResizeNearestNeighborOptions,
    "DEPTH_TO_SPACE": DepthToSpaceOptions, "SPACE_TO_DEPTH": SpaceToDepthOptions,
    "CAST": CastOptions, "UNIDIRECTIONAL_SEQUENCE_LSTM": UnidirectionalSequenceLSTMOptions,
}


_DEFAULTS: dict[str, object] = {}


def options_or_default(op_name: str, options):
    """An op's options, or its class's defaults when none are stored (None for ops without a class)."""
    if options is not None:
        return options
    try:
        return _DEFAULTS[op_name]
    except KeyError:
        cls = FOR_OP.get(op_name)
        value = _DEFAULTS[op_name] = cls() if cls else None
        return value
