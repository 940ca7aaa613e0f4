"""Typed, frozen options for the TFLite builtin ops the testbed runs (field names follow schema.fbs).

The common ops' classes are made here; the others' (runtime/ir/options_extra.py) on first use, through
FOR_OP, TABLES or a name of this module: importing every class up front cost more than the rest of the IR.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from runtime.ir.options_base import (INT64, Activation, CombinerType, LSTMKernelType, MirrorPadMode,  # noqa: F401
                                     Padding, ReduceWindowFunction, RngAlgorithm)


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


_TABLES: dict[str, type] = {
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


_FOR_OP: dict[str, type] = {
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
    "REDUCE_PROD": ReducerOptions, "REDUCE_ANY": ReducerOptions, "REDUCE_ALL": ReducerOptions,
    "L2_POOL_2D": Pool2DOptions,
}

# What runtime/ir/options_extra.py holds, named here so that a lookup of anything else (an op without
# options, an unknown table) answers without making its classes; tests/test_graph.py checks the lists.
EXTRA_MODULE = "runtime.ir.options_extra"
EXTRA_OPS = frozenset({
    "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "TILE", "BROADCAST_TO", "FILL", "RANGE", "RANK", "ONE_HOT",
    "GATHER_ND", "SCATTER_ND", "REVERSE_V2", "REVERSE_SEQUENCE", "MATRIX_DIAG", "MATRIX_SET_DIAG",
    "SPARSE_TO_DENSE", "WHERE", "UNIQUE", "TOPK_V2", "SEGMENT_SUM", "UNSORTED_SEGMENT_SUM",
    "UNSORTED_SEGMENT_PROD", "UNSORTED_SEGMENT_MAX", "UNSORTED_SEGMENT_MIN", "DYNAMIC_UPDATE_SLICE", "BUCKETIZE",
    "NON_MAX_SUPPRESSION_V4", "NON_MAX_SUPPRESSION_V5", "ARG_MAX", "ARG_MIN", "CUMSUM", "GELU", "L2_NORMALIZATION",
    "LOCAL_RESPONSE_NORMALIZATION", "FAKE_QUANT", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL",
    "NOT_EQUAL", "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT", "SELECT", "SELECT_V2", "POW", "FLOOR_DIV",
    "FLOOR_MOD", "SQUARE", "ZEROS_LIKE", "ADD_N", "COS", "SIGN", "BITWISE_XOR", "RIGHT_SHIFT", "RNN",
    "UNIDIRECTIONAL_SEQUENCE_RNN", "BIDIRECTIONAL_SEQUENCE_RNN", "LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM", "SVDF",
    "CONV_3D", "CONV_3D_TRANSPOSE", "EMBEDDING_LOOKUP_SPARSE", "REDUCE_WINDOW", "STABLEHLO_PAD", "DILATE", "IF",
    "WHILE", "CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "RFFT2D", "BITCAST", "RANDOM_UNIFORM",
    "RANDOM_STANDARD_NORMAL", "MULTINOMIAL", "STABLEHLO_GATHER", "STABLEHLO_SCATTER", "STABLEHLO_REDUCE_WINDOW",
    "STABLEHLO_RNG_BIT_GENERATOR"
})
EXTRA_TABLES = frozenset({
    "BatchToSpaceNDOptions", "SpaceToBatchNDOptions", "TileOptions", "BroadcastToOptions", "FillOptions",
    "RangeOptions", "RankOptions", "OneHotOptions", "GatherNdOptions", "ScatterNdOptions", "ReverseV2Options",
    "ReverseSequenceOptions", "MatrixDiagOptions", "MatrixSetDiagOptions", "SparseToDenseOptions", "WhereOptions",
    "UniqueOptions", "TopKV2Options", "SegmentSumOptions", "UnsortedSegmentSumOptions",
    "UnsortedSegmentProdOptions", "UnsortedSegmentMaxOptions", "UnsortedSegmentMinOptions",
    "DynamicUpdateSliceOptions", "BucketizeOptions", "NonMaxSuppressionV4Options", "NonMaxSuppressionV5Options",
    "ArgMaxOptions", "ArgMinOptions", "CumsumOptions", "GeluOptions", "L2NormOptions",
    "LocalResponseNormalizationOptions", "FakeQuantOptions", "LessOptions", "LessEqualOptions", "GreaterOptions",
    "GreaterEqualOptions", "EqualOptions", "NotEqualOptions", "LogicalAndOptions", "LogicalOrOptions",
    "LogicalNotOptions", "SelectOptions", "SelectV2Options", "PowOptions", "FloorDivOptions", "FloorModOptions",
    "SquareOptions", "ZerosLikeOptions", "AddNOptions", "CosOptions", "SignOptions", "BitwiseXorOptions",
    "RightShiftOptions", "RNNOptions", "SequenceRNNOptions", "BidirectionalSequenceRNNOptions", "LSTMOptions",
    "BidirectionalSequenceLSTMOptions", "SVDFOptions", "Conv3DOptions", "EmbeddingLookupSparseOptions",
    "ReduceWindowOptions", "StablehloPadOptions", "DilateOptions", "IfOptions", "WhileOptions", "CallOnceOptions",
    "VarHandleOptions", "ReadVariableOptions", "AssignVariableOptions", "Rfft2dOptions", "BitcastOptions",
    "RandomOptions", "StablehloGatherOptions", "StablehloScatterOptions", "StablehloReduceWindowOptions",
    "StablehloRngBitGeneratorOptions"
})


def _extra():
    return importlib.import_module(EXTRA_MODULE)


class _Registry(Mapping):
    """A read-only name -> class table: the common classes at once, the others loaded when first asked for."""

    def __init__(self, common: dict[str, type], extra: frozenset[str], attribute: str):
        self._common, self._extra, self._attribute = common, extra, attribute

    def __getitem__(self, key: str) -> type:
        if key in self._common:
            return self._common[key]
        if key in self._extra:
            return getattr(_extra(), self._attribute)[key]
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return key in self._common or key in self._extra

    def __iter__(self) -> Iterator[str]:
        yield from self._common
        yield from (k for k in getattr(_extra(), self._attribute) if k not in self._common)

    def __len__(self) -> int:
        return len(self._common) + len(self._extra - self._common.keys())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self)!r})"


# Which schema table each typed options class is read from (BuiltinOptions union member name).
TABLES: Mapping[str, type] = _Registry(_TABLES, EXTRA_TABLES, "TABLES")
# The options class each op reads when its model stores no options table (defaults then apply).
FOR_OP: Mapping[str, type] = _Registry(_FOR_OP, EXTRA_OPS, "FOR_OP")


def __getattr__(name: str):
    """The classes of runtime/ir/options_extra.py, as names of this module (made on first use)."""
    if name in EXTRA_TABLES:
        return getattr(_extra(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
