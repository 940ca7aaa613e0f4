"""Options of the less common builtin ops (index, maths, sequence, control flow, StableHLO-era), made on first use.

runtime/ir/options.py imports this module the first time one of its classes is asked for: making
its ~80 frozen dataclasses costs about as much as the rest of the IR, and most models need none.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runtime.ir.options_base import (INT64, Activation, CombinerType, LSTMKernelType, Padding, ReduceWindowFunction,
                                     RngAlgorithm, empty)

__all__ = ["FOR_OP", "TABLES"]


def _empty(name: str) -> type:
    return empty(name, __name__)


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


# -- recurrent, SVDF, 3-D convolution, sparse embedding and StableHLO-era ops (runtime/ops/rnn.py,
# lstm_variants.py, svdf.py, conv3d.py, stablehlo.py, embedding.py). StablehloPadOptions,
# ReduceWindowOptions and DilateOptions live in the schema's second options union
# (builtin_options_2); the reader and writer pick the union by table name.


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


@dataclass(frozen=True)
class EmbeddingLookupSparseOptions:
    combiner: CombinerType = CombinerType.SUM


@dataclass(frozen=True)
class ReduceWindowOptions:
    reduce_function: ReduceWindowFunction = ReduceWindowFunction.UNSUPPORTED


@dataclass(frozen=True)
class StablehloPadOptions:
    edge_padding_low: tuple[int, ...] = field(default=(), metadata=INT64)
    edge_padding_high: tuple[int, ...] = field(default=(), metadata=INT64)
    interior_padding: tuple[int, ...] = field(default=(), metadata=INT64)


DilateOptions = _empty("DilateOptions")

_SEQ_OPTIONS = {
    "RNN": RNNOptions, "UNIDIRECTIONAL_SEQUENCE_RNN": SequenceRNNOptions,
    "BIDIRECTIONAL_SEQUENCE_RNN": BidirectionalSequenceRNNOptions, "LSTM": LSTMOptions,
    "BIDIRECTIONAL_SEQUENCE_LSTM": BidirectionalSequenceLSTMOptions, "SVDF": SVDFOptions,
    "CONV_3D": Conv3DOptions, "CONV_3D_TRANSPOSE": Conv3DOptions,
    "EMBEDDING_LOOKUP_SPARSE": EmbeddingLookupSparseOptions, "REDUCE_WINDOW": ReduceWindowOptions,
    "STABLEHLO_PAD": StablehloPadOptions, "DILATE": DilateOptions,
}


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


# -- complex numbers, bit casts, random draws and the StableHLO gather/scatter/window ops
# (runtime/ops/complex.py, random.py, stablehlo_index.py). StableHLO tables live in the second
# options union; their index vectors are int64 in the schema. A body subgraph index counts the
# model's subgraphs from 0 (the main graph).


@dataclass(frozen=True)
class RandomOptions:
    """RANDOM_UNIFORM, RANDOM_STANDARD_NORMAL and MULTINOMIAL. LiteRT keeps only each seed's low
    32 bits; both 0 there asks for fresh seeds from the system's entropy, as LiteRT draws them
    (such a model's numbers are never repeatable)."""

    seed: int = 0
    seed2: int = 0


@dataclass(frozen=True)
class StablehloGatherOptions:
    offset_dims: tuple[int, ...] = field(default=(), metadata=INT64)
    collapsed_slice_dims: tuple[int, ...] = field(default=(), metadata=INT64)
    start_index_map: tuple[int, ...] = field(default=(), metadata=INT64)
    index_vector_dim: int = 0
    slice_sizes: tuple[int, ...] = field(default=(), metadata=INT64)
    indices_are_sorted: bool = False


@dataclass(frozen=True)
class StablehloScatterOptions:
    indices_are_sorted: bool = False
    update_window_dims: tuple[int, ...] = field(default=(), metadata=INT64)
    inserted_window_dims: tuple[int, ...] = field(default=(), metadata=INT64)
    scatter_dims_to_operand_dims: tuple[int, ...] = field(default=(), metadata=INT64)
    index_vector_dim: int = 0
    unique_indices: bool = False
    update_computation_subgraph_index: int = 0


@dataclass(frozen=True)
class StablehloReduceWindowOptions:
    window_dimensions: tuple[int, ...] = field(default=(), metadata=INT64)
    window_strides: tuple[int, ...] = field(default=(), metadata=INT64)
    base_dilations: tuple[int, ...] = field(default=(), metadata=INT64)
    window_dilations: tuple[int, ...] = field(default=(), metadata=INT64)
    padding: tuple[int, ...] = field(default=(), metadata=INT64)   # (low, high) per dimension
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

# Every op above with its options class, and the classes by schema table name (runtime/ir/options.py
# serves both from FOR_OP and TABLES once this module is loaded).
FOR_OP: dict[str, type] = {**_INDEX_OPTIONS, **_MATH_OPTIONS, **_SEQ_OPTIONS, **_CONTROL_OPTIONS, **_MISC_OPTIONS}
TABLES: dict[str, type] = {cls.__name__: cls for cls in FOR_OP.values()}
