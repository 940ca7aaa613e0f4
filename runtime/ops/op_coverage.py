"""Which builtin ops LiteRT's reference resolver runs, and why the testbed leaves each remaining op out."""

from __future__ import annotations

from runtime.ir.optypes import OpType

__all__ = ["REFERENCE_OPS", "UNSUPPORTED", "implemented", "coverage"]

# The builtin ops BuiltinRefOpResolver registers (tflite/kernels/register_ref.cc in LiteRT): the
# kernels TFLite holds itself to, and the ones the testbed's kernels are held to.
REFERENCE_OPS: frozenset[OpType] = frozenset(OpType[name] for name in """
ABS HARD_SWISH RELU RELU_N1_TO_1 RELU_0_TO_1 RELU6 TANH LOGISTIC AVERAGE_POOL_2D MAX_POOL_2D L2_POOL_2D
CONV_2D DEPTHWISE_CONV_2D SVDF RNN BIDIRECTIONAL_SEQUENCE_RNN UNIDIRECTIONAL_SEQUENCE_RNN EMBEDDING_LOOKUP
EMBEDDING_LOOKUP_SPARSE FULLY_CONNECTED LSH_PROJECTION HASHTABLE_LOOKUP SOFTMAX CONCATENATION ADD
SPACE_TO_BATCH_ND BATCH_TO_SPACE_ND MUL L2_NORMALIZATION BROADCAST_TO LOCAL_RESPONSE_NORMALIZATION LSTM
BIDIRECTIONAL_SEQUENCE_LSTM UNIDIRECTIONAL_SEQUENCE_LSTM PAD PADV2 RESHAPE RESIZE_BILINEAR
RESIZE_NEAREST_NEIGHBOR SKIP_GRAM SPACE_TO_DEPTH DEPTH_TO_SPACE GATHER TRANSPOSE MEAN DIV SUB SPLIT SPLIT_V
SQUEEZE STRIDED_SLICE EXP TOPK_V2 LOG LOG_SOFTMAX CAST DEQUANTIZE PRELU MAXIMUM MINIMUM ARG_MAX ARG_MIN
GREATER GREATER_EQUAL LESS LESS_EQUAL FLOOR NEG CUMSUM SELECT SELECT_V2 SLICE SIN COS TRANSPOSE_CONV TILE
SUM REDUCE_PROD REDUCE_MAX REDUCE_MIN REDUCE_ANY REDUCE_ALL EXPAND_DIMS SPARSE_TO_DENSE EQUAL NOT_EQUAL
SQRT RSQRT SHAPE RANK POW FAKE_QUANT PACK ONE_HOT LOGICAL_OR LOGICAL_AND LOGICAL_NOT UNPACK FLOOR_DIV
SQUARE RFFT2D ZEROS_LIKE FLOOR_MOD RANGE LEAKY_RELU SQUARED_DIFFERENCE FILL MIRROR_PAD UNIQUE REVERSE_V2
ADD_N GATHER_ND WHERE REVERSE_SEQUENCE MATRIX_DIAG QUANTIZE MATRIX_SET_DIAG IF WHILE
NON_MAX_SUPPRESSION_V4 NON_MAX_SUPPRESSION_V5 SCATTER_ND DENSIFY BATCH_MATMUL CONV_3D IMAG REAL
COMPLEX_ABS CONV_3D_TRANSPOSE BROADCAST_ARGS MULTINOMIAL RANDOM_STANDARD_NORMAL BUCKETIZE RANDOM_UNIFORM
GELU DYNAMIC_UPDATE_SLICE UNSORTED_SEGMENT_PROD UNSORTED_SEGMENT_MAX UNSORTED_SEGMENT_MIN
UNSORTED_SEGMENT_SUM ATAN2 SIGN CALL_ONCE VAR_HANDLE READ_VARIABLE ASSIGN_VARIABLE BITCAST BITWISE_XOR
RIGHT_SHIFT STABLEHLO_SCATTER STABLEHLO_ADD STABLEHLO_MULTIPLY STABLEHLO_MAXIMUM STABLEHLO_MINIMUM DILATE
STABLEHLO_RNG_BIT_GENERATOR REDUCE_WINDOW STABLEHLO_REDUCE_WINDOW STABLEHLO_GATHER STABLEHLO_PAD
STABLEHLO_COMPOSITE
""".split())

_NOT_A_KERNEL = "a marker of the schema, not an op a model runs"
_NOT_IN_REFERENCE = "LiteRT's reference resolver has no kernel for it either"
_STRINGS = "works on string tensors (hashing text), which no kernel here computes on"
_SUBGRAPHS = ("runs a decomposition subgraph with StableHLO semantics; only IF, WHILE and CALL_ONCE run "
              "subgraphs here")
_RESOURCES = "keeps a hash table resource (string keys and values), which no kernel here implements"

# Every builtin op without a kernel here, and why: a user reading `dtb list ops` learns whether an
# op is missing on purpose. tests/test_op_coverage.py fails for any op neither implemented nor here.
UNSUPPORTED: dict[OpType, str] = {
    OpType.DELEGATE: _NOT_A_KERNEL,
    OpType.PLACEHOLDER_FOR_GREATER_OP_CODES: _NOT_A_KERNEL,
    OpType.CUSTOM: "custom ops run through the custom op registry (runtime/ops/custom_ops.py), by custom code",
    OpType.CALL: "a removed op: the schema keeps its number, TFLite has no kernel",
    OpType.CONCAT_EMBEDDINGS: "a removed op: the schema keeps its number, TFLite has no kernel",
    OpType.HASHTABLE_LOOKUP: _STRINGS,
    OpType.LSH_PROJECTION: _STRINGS,
    OpType.SKIP_GRAM: _STRINGS,
    OpType.HASHTABLE: _RESOURCES,
    OpType.HASHTABLE_FIND: _RESOURCES,
    OpType.HASHTABLE_IMPORT: _RESOURCES,
    OpType.HASHTABLE_SIZE: _RESOURCES,
    OpType.STABLEHLO_COMPOSITE: _SUBGRAPHS,
    # The other StableHLO ops: the converter lowers StableHLO to TFLite's own ops, and LiteRT's
    # reference resolver runs none of these either.
    **{op: _NOT_IN_REFERENCE for op in OpType if op.name.startswith("STABLEHLO_") and op not in REFERENCE_OPS},
}


def implemented() -> frozenset[OpType]:
    """Builtin ops with a kernel in one of the registries."""
    from runtime.ops import HYBRID_KERNELS, KERNELS, QUANT_KERNELS

    return frozenset(KERNELS) | frozenset(QUANT_KERNELS) | frozenset(HYBRID_KERNELS)


def coverage() -> tuple[int, int]:
    """(ops of the reference resolver with a kernel here, ops the reference resolver runs)."""
    return len(REFERENCE_OPS & implemented()), len(REFERENCE_OPS)
