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


# -- index, gather/scatter, batch<->space and selection ops (runtime/ops/index.py, batch_space.py,
# segment.py, nms.py). Most of their tables are empty; typed all the same so that a table of
# another type is refused by name.


@dataclass(frozen=True)
class BatchToSpaceNDOptions:
    pass


@dataclass(frozen=True)
class SpaceToBatchNDOptions:
    pass


@dataclass(frozen=True)
class TileOptions:
    pass


@dataclass(frozen=True)
class BroadcastToOptions:
    pass


@dataclass(frozen=True)
class FillOptions:
    pass


@dataclass(frozen=True)
class RangeOptions:
    pass


@dataclass(frozen=True)
class RankOptions:
    pass


@dataclass(frozen=True)
class OneHotOptions:
    axis: int = 0


@dataclass(frozen=True)
class GatherNdOptions:
    pass


@dataclass(frozen=True)
class ScatterNdOptions:
    pass


@dataclass(frozen=True)
class ReverseV2Options:
    pass


@dataclass(frozen=True)
class ReverseSequenceOptions:
    seq_dim: int = 0
    batch_dim: int = 0


@dataclass(frozen=True)
class MatrixDiagOptions:
    pass


@dataclass(frozen=True)
class MatrixSetDiagOptions:
    pass


@dataclass(frozen=True)
class SparseToDenseOptions:
    validate_indices: bool = False


@dataclass(frozen=True)
class WhereOptions:
    pass


@dataclass(frozen=True)
class UniqueOptions:
    idx_out_type: int = 2  # TensorType INT32


@dataclass(frozen=True)
class TopKV2Options:
    pass


@dataclass(frozen=True)
class SegmentSumOptions:
    pass


@dataclass(frozen=True)
class UnsortedSegmentSumOptions:
    pass


@dataclass(frozen=True)
class UnsortedSegmentProdOptions:
    pass


@dataclass(frozen=True)
class UnsortedSegmentMaxOptions:
    pass


@dataclass(frozen=True)
class UnsortedSegmentMinOptions:
    pass


@dataclass(frozen=True)
class DynamicUpdateSliceOptions:
    pass


@dataclass(frozen=True)
class BucketizeOptions:
    boundaries: tuple[float, ...] = ()

    def __post_init__(self) -> None:  # the schema stores float32 values; ints given in code are floats too
        object.__setattr__(self, "boundaries", tuple(float(b) for b in self.boundaries))


@dataclass(frozen=True)
class NonMaxSuppressionV4Options:
    pass


@dataclass(frozen=True)
class NonMaxSuppressionV5Options:
    pass


_INDEX_OPTIONS = {
    "BATCH_TO_SPACE_ND": BatchToSpaceNDOptions, "SPACE_TO_BATCH_ND": SpaceToBatchNDOptions, "TILE": TileOptions,
    "BROADCAST_TO": BroadcastToOptions, "FILL": FillOptions, "RANGE": RangeOptions, "RANK": RankOptions,
    "ONE_HOT": OneHotOptions, "GATHER_ND": GatherNdOptions, "SCATTER_ND": ScatterNdOptions,
    "REVERSE_V2": ReverseV2Options, "REVERSE_SEQUENCE": ReverseSequenceOptions, "MATRIX_DIAG": MatrixDiagOptions,
    "MATRIX_SET_DIAG": MatrixSetDiagOptions, "SPARSE_TO_DENSE": SparseToDenseOptions, "WHERE": WhereOptions,
    "UNIQUE": UniqueOptions, "TOPK_V2": TopKV2Options, "SEGMENT_SUM": SegmentSumOptions,
    "UNSORTED_SEGMENT_SUM": UnsortedSegmentSumOptions, "UNSORTED_SEGMENT_PROD": UnsortedSegmentProdOptions,
    "UNSORTED_SEGMENT_MAX": UnsortedSegmentMaxOptions, "UNSORTED_SEGMENT_MIN": UnsortedSegmentMinOptions,
    "DYNAMIC_UPDATE_SLICE": DynamicUpdateSliceOptions, "BUCKETIZE": BucketizeOptions,
    "NON_MAX_SUPPRESSION_V4": NonMaxSuppressionV4Options, "NON_MAX_SUPPRESSION_V5": NonMaxSuppressionV5Options,
}
TABLES.update({cls.__name__: cls for cls in _INDEX_OPTIONS.values()})
FOR_OP.update(_INDEX_OPTIONS)


# -- comparisons, logic, selection, elementwise maths, normalisations and arg/reductions
# (runtime/ops/compare.py, mathops.py, norm.py, argreduce.py, qmath.py). Empty tables typed too,
# so that a table of another type is refused by name. Defaults are the schema's (zeros), which is
# what TFLite's kernels see when a model stores no table.


@dataclass(frozen=True)
class ArgMaxOptions:
    output_type: int = 0  # TensorType; the kernels write INT32 (2) or INT64 (4) and refuse the rest


@dataclass(frozen=True)
class ArgMinOptions(ArgMaxOptions):
    pass


@dataclass(frozen=True)
class CumsumOptions:
    exclusive: bool = False
    reverse: bool = False


@dataclass(frozen=True)
class GeluOptions:
    approximate: bool = False


@dataclass(frozen=True)
class L2NormOptions:
    fused_activation_function: Activation = Activation.NONE


@dataclass(frozen=True)
class LocalResponseNormalizationOptions:
    radius: int = 0
    bias: float = 0.0
    alpha: float = 0.0
    beta: float = 0.0


@dataclass(frozen=True)
class FakeQuantOptions:
    min: float = 0.0
    max: float = 0.0
    num_bits: int = 0
    narrow_range: bool = False


def _empty(name: str) -> type:
    return dataclass(frozen=True)(type(name, (), {"__module__": __name__, "__doc__": f"{name} (no fields)."}))


LessOptions, LessEqualOptions, GreaterOptions, GreaterEqualOptions, EqualOptions, NotEqualOptions = (
    _empty(n) for n in ("LessOptions", "LessEqualOptions", "GreaterOptions", "GreaterEqualOptions",
                        "EqualOptions", "NotEqualOptions"))
LogicalAndOptions, LogicalOrOptions, LogicalNotOptions, SelectOptions, SelectV2Options = (
    _empty(n) for n in ("LogicalAndOptions", "LogicalOrOptions", "LogicalNotOptions", "SelectOptions",
                        "SelectV2Options"))
PowOptions, FloorDivOptions, FloorModOptions, SquareOptions, ZerosLikeOptions, AddNOptions = (
    _empty(n) for n in ("PowOptions", "FloorDivOptions", "FloorModOptions", "SquareOptions", "ZerosLikeOptions",
                        "AddNOptions"))
CosOptions, SignOptions, BitwiseXorOptions, RightShiftOptions = (
    _empty(n) for n in ("CosOptions", "SignOptions", "BitwiseXorOptions", "RightShiftOptions"))

_MATH_OPTIONS = {
    "ARG_MAX": ArgMaxOptions, "ARG_MIN": ArgMinOptions, "CUMSUM": CumsumOptions, "GELU": GeluOptions,
    "L2_NORMALIZATION": L2NormOptions, "LOCAL_RESPONSE_NORMALIZATION": LocalResponseNormalizationOptions,
    "FAKE_QUANT": FakeQuantOptions, "LESS": LessOptions, "LESS_EQUAL": LessEqualOptions,
    "GREATER": GreaterOptions, "GREATER_EQUAL": GreaterEqualOptions, "EQUAL": EqualOptions,
    "NOT_EQUAL": NotEqualOptions, "LOGICAL_AND": LogicalAndOptions, "LOGICAL_OR": LogicalOrOptions,
    "LOGICAL_NOT": LogicalNotOptions, "SELECT": SelectOptions, "SELECT_V2": SelectV2Options, "POW": PowOptions,
    "FLOOR_DIV": FloorDivOptions, "FLOOR_MOD": FloorModOptions, "SQUARE": SquareOptions,
    "ZEROS_LIKE": ZerosLikeOptions, "ADD_N": AddNOptions, "COS": CosOptions, "SIGN": SignOptions,
    "BITWISE_XOR": BitwiseXorOptions, "RIGHT_SHIFT": RightShiftOptions,
}
TABLES.update({cls.__name__: cls for cls in _MATH_OPTIONS.values()})
FOR_OP.update(_MATH_OPTIONS)
FOR_OP.update({"REDUCE_PROD": ReducerOptions, "REDUCE_ANY": ReducerOptions, "REDUCE_ALL": ReducerOptions,
               "L2_POOL_2D": Pool2DOptions})


# -- recurrent, SVDF, 3-D convolution, sparse embedding and StableHLO-era ops (runtime/ops/rnn.py,
# lstm_variants.py, svdf.py, conv3d.py, stablehlo.py, embedding.py). StablehloPadOptions,
# ReduceWindowOptions and DilateOptions live in the schema's second options union
# (builtin_options_2); the reader and writer pick the union by table name.

from dataclasses import field as _field  # noqa: E402

# Marks an options vector the schema stores as int64 (the writer would otherwise write int32).
INT64 = {"int64": True}


@dataclass(frozen=True)
class RNNOptions:
    fused_activation_function: Activation = Activation.NONE
    asymmetric_quantize_inputs: bool = False


@dataclass(frozen=True)
class SequenceRNNOptions:
    time_major: bool = False
    fused_activation_function: Activation = Activation.NONE
    asymmetric_quantize_inputs: bool = False


@dataclass(frozen=True)
class BidirectionalSequenceRNNOptions:
    time_major: bool = False
    fused_activation_function: Activation = Activation.NONE
    merge_outputs: bool = False
    asymmetric_quantize_inputs: bool = False


class LSTMKernelType(enum.IntEnum):
    FULL = 0
    BASIC = 1


@dataclass(frozen=True)
class LSTMOptions:
    fused_activation_function: Activation = Activation.NONE
    cell_clip: float = 0.0
    proj_clip: float = 0.0
    kernel_type: LSTMKernelType = LSTMKernelType.FULL
    asymmetric_quantize_inputs: bool = False


@dataclass(frozen=True)
class BidirectionalSequenceLSTMOptions:
    fused_activation_function: Activation = Activation.NONE
    cell_clip: float = 0.0
    proj_clip: float = 0.0
    merge_outputs: bool = False
    time_major: bool = True  # the schema's default (version 3 added the field)
    asymmetric_quantize_inputs: bool = False


@dataclass(frozen=True)
class SVDFOptions:
    rank: int = 1
    fused_activation_function: Activation = Activation.NONE
    asymmetric_quantize_inputs: bool = False


@dataclass(frozen=True)
class Conv3DOptions:
    """CONV_3D and CONV_3D_TRANSPOSE. The schema's stride defaults are 0 (a file storing none is
    refused by the checks); a graph built in code gets 1."""

    padding: Padding = Padding.SAME
    stride_d: int = 1
    stride_w: int = 1
    stride_h: int = 1
    fused_activation_function: Activation = Activation.NONE
    dilation_d_factor: int = 1
    dilation_w_factor: int = 1
    dilation_h_factor: int = 1


class CombinerType(enum.IntEnum):
    SUM = 0
    MEAN = 1
    SQRTN = 2


@dataclass(frozen=True)
class EmbeddingLookupSparseOptions:
    combiner: CombinerType = CombinerType.SUM


class ReduceWindowFunction(enum.IntEnum):
    UNSUPPORTED = 0
    ADD = 1
    MUL = 2
    MINIMUM = 3
    MAXIMUM = 4
    ALL = 5
    ANY = 6


@dataclass(frozen=True)
class ReduceWindowOptions:
    reduce_function: ReduceWindowFunction = ReduceWindowFunction.UNSUPPORTED


@dataclass(frozen=True)
class StablehloPadOptions:
    edge_padding_low: tuple[int, ...] = _field(default=(), metadata=INT64)
    edge_padding_high: tuple[int, ...] = _field(default=(), metadata=INT64)
    interior_padding: tuple[int, ...] = _field(default=(), metadata=INT64)


DilateOptions = _empty("DilateOptions")

_SEQ_OPTIONS = {
    "RNN": RNNOptions, "UNIDIRECTIONAL_SEQUENCE_RNN": SequenceRNNOptions,
    "BIDIRECTIONAL_SEQUENCE_RNN": BidirectionalSequenceRNNOptions, "LSTM": LSTMOptions,
    "BIDIRECTIONAL_SEQUENCE_LSTM": BidirectionalSequenceLSTMOptions, "SVDF": SVDFOptions,
    "CONV_3D": Conv3DOptions, "CONV_3D_TRANSPOSE": Conv3DOptions,
    "EMBEDDING_LOOKUP_SPARSE": EmbeddingLookupSparseOptions, "REDUCE_WINDOW": ReduceWindowOptions,
    "STABLEHLO_PAD": StablehloPadOptions, "DILATE": DilateOptions,
}
TABLES.update({cls.__name__: cls for cls in _SEQ_OPTIONS.values()})
FOR_OP.update(_SEQ_OPTIONS)


# -- control flow and resource variables (runtime/ops/control.py). Subgraph indices count the
# model's subgraphs from 0 (the main graph); VarHandleOptions names a variable by its strings.


@dataclass(frozen=True)
class IfOptions:
    then_subgraph_index: int = 0
    else_subgraph_index: int = 0


@dataclass(frozen=True)
class WhileOptions:
    cond_subgraph_index: int = 0
    body_subgraph_index: int = 0


@dataclass(frozen=True)
class CallOnceOptions:
    init_subgraph_index: int = 0


@dataclass(frozen=True)
class VarHandleOptions:
    container: str = ""
    shared_name: str = ""


ReadVariableOptions, AssignVariableOptions = (_empty(n) for n in ("ReadVariableOptions", "AssignVariableOptions"))

_CONTROL_OPTIONS = {
    "IF": IfOptions, "WHILE": WhileOptions, "CALL_ONCE": CallOnceOptions, "VAR_HANDLE": VarHandleOptions,
    "READ_VARIABLE": ReadVariableOptions, "ASSIGN_VARIABLE": AssignVariableOptions,
}
TABLES.update({cls.__name__: cls for cls in _CONTROL_OPTIONS.values()})
FOR_OP.update(_CONTROL_OPTIONS)


# -- complex numbers, bit casts, random draws and the StableHLO gather/scatter/window ops
# (runtime/ops/complex.py, random.py, stablehlo_index.py). StableHLO tables live in the second
# options union; their index vectors are int64 in the schema. A body subgraph index counts the
# model's subgraphs from 0 (the main graph).


class RngAlgorithm(enum.IntEnum):
    DEFAULT = 0
    PHILOX = 1
    THREEFRY = 2


@dataclass(frozen=True)
class RandomOptions:
    """RANDOM_UNIFORM, RANDOM_STANDARD_NORMAL and MULTINOMIAL. LiteRT keeps only each seed's low
    32 bits; both 0 there asks for fresh seeds from the system's entropy, as LiteRT draws them
    (such a model's numbers are never repeatable)."""

    seed: int = 0
    seed2: int = 0


@dataclass(frozen=True)
class StablehloGatherOptions:
    offset_dims: tuple[int, ...] = _field(default=(), metadata=INT64)
    collapsed_slice_dims: tuple[int, ...] = _field(default=(), metadata=INT64)
    start_index_map: tuple[int, ...] = _field(default=(), metadata=INT64)
    index_vector_dim: int = 0
    slice_sizes: tuple[int, ...] = _field(default=(), metadata=INT64)
    indices_are_sorted: bool = False


@dataclass(frozen=True)
class StablehloScatterOptions:
    indices_are_sorted: bool = False
    update_window_dims: tuple[int, ...] = _field(default=(), metadata=INT64)
    inserted_window_dims: tuple[int, ...] = _field(default=(), metadata=INT64)
    scatter_dims_to_operand_dims: tuple[int, ...] = _field(default=(), metadata=INT64)
    index_vector_dim: int = 0
    unique_indices: bool = False
    update_computation_subgraph_index: int = 0


@dataclass(frozen=True)
class StablehloReduceWindowOptions:
    window_dimensions: tuple[int, ...] = _field(default=(), metadata=INT64)
    window_strides: tuple[int, ...] = _field(default=(), metadata=INT64)
    base_dilations: tuple[int, ...] = _field(default=(), metadata=INT64)
    window_dilations: tuple[int, ...] = _field(default=(), metadata=INT64)
    padding: tuple[int, ...] = _field(default=(), metadata=INT64)   # (low, high) per dimension
    body_subgraph_index: int = 0


@dataclass(frozen=True)
class StablehloRngBitGeneratorOptions:
    algorithm: RngAlgorithm = RngAlgorithm.DEFAULT


Rfft2dOptions, BitcastOptions = (_empty(n) for n in ("Rfft2dOptions", "BitcastOptions"))

_MISC_OPTIONS = {
    "RFFT2D": Rfft2dOptions, "BITCAST": BitcastOptions, "RANDOM_UNIFORM": RandomOptions,
    "RANDOM_STANDARD_NORMAL": RandomOptions, "MULTINOMIAL": RandomOptions,
    "STABLEHLO_GATHER": StablehloGatherOptions, "STABLEHLO_SCATTER": StablehloScatterOptions,
    "STABLEHLO_REDUCE_WINDOW": StablehloReduceWindowOptions,
    "STABLEHLO_RNG_BIT_GENERATOR": StablehloRngBitGeneratorOptions,
}
TABLES.update({cls.__name__: cls for cls in _MISC_OPTIONS.values()})
FOR_OP.update(_MISC_OPTIONS)
