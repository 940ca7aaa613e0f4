"""Work descriptions of the recurrent ops, SVDF, the 3-D convolutions, EMBEDDING_LOOKUP_SPARSE and the
StableHLO-era ops; sim/work.py merges them into its tables.

A recurrent op applies every gate matrix once per step and batch row, so its MACs are the matrix
elements times the rows it steps through (time x batch), both directions for the bidirectional
ops; its element ops are the activations and state updates per unit and row."""

from __future__ import annotations

import math
from typing import Mapping

from sim import elem_ops as _work   # the shared per-output operation counts
from runtime.ir.optypes import OpType
from sim.cost import OpClass

_G, _C, _E, _R, _D = OpClass.GEMM, OpClass.CONV, OpClass.ELEMENTWISE, OpClass.REDUCE, OpClass.DATA

CLASSES: Mapping[OpType, OpClass] = {
    OpType.RNN: _G, OpType.UNIDIRECTIONAL_SEQUENCE_RNN: _G, OpType.BIDIRECTIONAL_SEQUENCE_RNN: _G,
    OpType.LSTM: _G, OpType.BIDIRECTIONAL_SEQUENCE_LSTM: _G, OpType.SVDF: _G,
    OpType.CONV_3D: _C, OpType.CONV_3D_TRANSPOSE: _C,
    OpType.STABLEHLO_ADD: _E, OpType.STABLEHLO_MULTIPLY: _E, OpType.STABLEHLO_MAXIMUM: _E,
    OpType.STABLEHLO_MINIMUM: _E,
    # a weighted sum of looked-up rows; a window reduction (each input element taken about once)
    OpType.EMBEDDING_LOOKUP_SPARSE: _R, OpType.REDUCE_WINDOW: _R,
    OpType.STABLEHLO_PAD: _D, OpType.DILATE: _D,
}

# Weight matrices (stored in blocks by the GPU, so padded along both dimensions).
_RNN_MATRICES = frozenset({1, 2})
_BIRNN_MATRICES = frozenset({1, 2, 5, 6, 10, 11})
_LSTM_MATRICES = frozenset({1, 2, 3, 4, 5, 6, 7, 8, 16})
_BILSTM_MATRICES = frozenset({*range(1, 9), 16, *range(18, 26), 33, *range(40, 48)})
MATRIX_SLOTS: Mapping[OpType, frozenset[int]] = {
    OpType.RNN: _RNN_MATRICES, OpType.UNIDIRECTIONAL_SEQUENCE_RNN: _RNN_MATRICES,
    OpType.BIDIRECTIONAL_SEQUENCE_RNN: _BIRNN_MATRICES, OpType.LSTM: _LSTM_MATRICES,
    OpType.BIDIRECTIONAL_SEQUENCE_LSTM: _BILSTM_MATRICES, OpType.SVDF: frozenset({1, 2}),
    OpType.CONV_3D: frozenset({1}), OpType.CONV_3D_TRANSPOSE: frozenset({1}),
}


def _n(shape) -> int:
    return math.prod(int(d) for d in shape) if shape is not None else 0


def _matrices(op, ins: list) -> int:
    return sum(_n(ins[k]) for k in MATRIX_SLOTS[op.type] if k < len(ins) and ins[k] is not None)


def _recurrent(units_ops: int):
    """MACs: matrices x rows stepped; element ops: units_ops per output value and step."""
    def family(op, ins: list, outs: list) -> tuple[int, int]:
        rows = _n(ins[0][:-1]) if ins and ins[0] else 0
        units = sum(s[-1] for s in outs if s)
        return rows * _matrices(op, ins), rows * units * units_ops
    return family


def _rnn_ops() -> int:
    return _work.ELEM_OPS_PER_OUTPUT[OpType.TANH] + 2       # bias add, activation


def _lstm_ops() -> int:
    return _work.LSTM_UNIT_OPS


def _rnn(op, ins, outs):
    return _recurrent(_rnn_ops())(op, ins, outs)


def _lstm(op, ins, outs):
    return _recurrent(_lstm_ops())(op, ins, outs)


def _svdf(op, ins: list, outs: list) -> tuple[int, int]:
    """The feature matrix on each batch row, then every filter's memory against its time weights."""
    batch = ins[0][0] if ins and ins[0] else 0
    return batch * _matrices(op, ins), _n(outs[0]) * 2


def _conv3d(op, ins: list, outs: list) -> tuple[int, int]:
    kd, kh, kw, cin, _ = ins[1]
    return _n(outs[0]) * kd * kh * kw * cin, 0


def _conv3d_transpose(op, ins: list, outs: list) -> tuple[int, int]:
    kd, kh, kw, cout, _ = ins[1]
    return _n(ins[2]) * kd * kh * kw * cout, 0


def _embedding_lookup_sparse(op, ins: list, outs: list) -> tuple[int, int]:
    """A multiply-add per looked-up element, plus the combiner's divide per output."""
    lookups, width = ins[0][0], _n(ins[4][1:])
    return 0, 2 * lookups * width + _n(outs[0])


def _elementwise(op, ins, outs) -> tuple[int, int]:
    return 0, _n(outs[0])


def _per_input(op, ins, outs) -> tuple[int, int]:
    return 0, _n(ins[0])


def _moves(op, ins, outs) -> tuple[int, int]:
    return 0, 0


FAMILIES = {
    OpType.RNN: _rnn, OpType.UNIDIRECTIONAL_SEQUENCE_RNN: _rnn, OpType.BIDIRECTIONAL_SEQUENCE_RNN: _rnn,
    OpType.LSTM: _lstm, OpType.BIDIRECTIONAL_SEQUENCE_LSTM: _lstm, OpType.SVDF: _svdf,
    OpType.CONV_3D: _conv3d, OpType.CONV_3D_TRANSPOSE: _conv3d_transpose,
    OpType.EMBEDDING_LOOKUP_SPARSE: _embedding_lookup_sparse, OpType.REDUCE_WINDOW: _per_input,
    OpType.STABLEHLO_ADD: _elementwise, OpType.STABLEHLO_MULTIPLY: _elementwise,
    OpType.STABLEHLO_MAXIMUM: _elementwise, OpType.STABLEHLO_MINIMUM: _elementwise,
    OpType.STABLEHLO_PAD: _moves, OpType.DILATE: _moves,
}


def read_shapes(op, ins: list, outs: list) -> list | None:
    """EMBEDDING_LOOKUP_SPARSE reads the rows it looks up, not its whole table (None: every input)."""
    if op.type is OpType.EMBEDDING_LOOKUP_SPARSE and len(ins) > 4 and ins[0] and ins[4]:
        return [*ins[:4], (ins[0][0], *ins[4][1:])]
    return None
