"""Registry entries of the recurrent, SVDF, 3-D convolution, sparse embedding and StableHLO-era kernels;
runtime/ops/__init__.py merges them into its registries."""

from __future__ import annotations

from runtime.ops import conv3d, embedding, lstm_variants as lv, rnn, stablehlo as shlo, svdf
from runtime.ops.base import Kernel
from runtime.ir.optypes import OpType

KERNELS: dict[OpType, Kernel] = {
    OpType.RNN: rnn.rnn,
    OpType.UNIDIRECTIONAL_SEQUENCE_RNN: rnn.unidirectional_sequence_rnn,
    OpType.BIDIRECTIONAL_SEQUENCE_RNN: rnn.bidirectional_sequence_rnn,
    OpType.LSTM: lv.lstm_step,
    OpType.BIDIRECTIONAL_SEQUENCE_LSTM: lv.bidirectional_sequence_lstm,
    OpType.SVDF: svdf.svdf,
    OpType.CONV_3D: conv3d.conv_3d,
    OpType.CONV_3D_TRANSPOSE: conv3d.conv_3d_transpose,
    OpType.EMBEDDING_LOOKUP_SPARSE: embedding.embedding_lookup_sparse,
    OpType.STABLEHLO_ADD: shlo.stablehlo_add,
    OpType.STABLEHLO_MULTIPLY: shlo.stablehlo_multiply,
    OpType.STABLEHLO_MAXIMUM: shlo.stablehlo_maximum,
    OpType.STABLEHLO_MINIMUM: shlo.stablehlo_minimum,
    OpType.STABLEHLO_PAD: shlo.stablehlo_pad,
    OpType.DILATE: shlo.dilate,
    OpType.REDUCE_WINDOW: shlo.reduce_window,
}

# Float activations against int8 constant weights.
HYBRID_KERNELS: dict[OpType, Kernel] = {
    OpType.RNN: rnn.rnn_hybrid,
    OpType.UNIDIRECTIONAL_SEQUENCE_RNN: rnn.unidirectional_sequence_rnn_hybrid,
    OpType.BIDIRECTIONAL_SEQUENCE_RNN: rnn.bidirectional_sequence_rnn_hybrid,
    OpType.LSTM: lv.lstm_step_hybrid,
    OpType.BIDIRECTIONAL_SEQUENCE_LSTM: lv.bidirectional_sequence_lstm_hybrid,
    OpType.SVDF: svdf.svdf_hybrid,
}

# 8-bit data with TFLite's integer arithmetic.
QUANT_KERNELS: dict[OpType, Kernel] = {
    OpType.SVDF: svdf.svdf_int8,
}

# Raw-value kernels: 8-bit tensors are computed on as plain integers (no requantization).
DTYPE_AGNOSTIC = frozenset({
    OpType.STABLEHLO_ADD, OpType.STABLEHLO_MULTIPLY, OpType.STABLEHLO_MAXIMUM, OpType.STABLEHLO_MINIMUM,
    OpType.STABLEHLO_PAD, OpType.DILATE, OpType.REDUCE_WINDOW,
})
