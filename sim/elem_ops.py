"""How many element operations one output of an op costs, by op type (exp and kin as short polynomials)."""

from __future__ import annotations

from typing import Mapping

from runtime.ir.optypes import OpType

__all__ = ["EXP_OPS", "ELEM_OPS_PER_OUTPUT", "LSTM_UNIT_OPS"]

# exp/log by range reduction plus a degree-5..7 polynomial: about 8 multiply-adds per element
# (the same order as XNNPACK's and the Adreno compiler's expansions).
EXP_OPS = 8
ELEM_OPS_PER_OUTPUT: Mapping[OpType, int] = {
    OpType.SQUARED_DIFFERENCE: 2, OpType.LEAKY_RELU: 2, OpType.PRELU: 2, OpType.HARD_SWISH: 4,
    OpType.QUANTIZE: 3, OpType.DEQUANTIZE: 2,          # scale, round/offset, clamp
    OpType.EXP: EXP_OPS, OpType.LOG: EXP_OPS, OpType.ELU: EXP_OPS + 2,
    OpType.LOGISTIC: EXP_OPS + 2, OpType.TANH: EXP_OPS + 3,
    OpType.SQRT: EXP_OPS // 2, OpType.RSQRT: EXP_OPS // 2,
    OpType.SOFTMAX: EXP_OPS + 4, OpType.LOG_SOFTMAX: EXP_OPS + 4,  # max, subtract, exp, sum, scale
    OpType.RESIZE_BILINEAR: 4,                          # four taps weighted per output
    OpType.SIN: EXP_OPS, OpType.COS: EXP_OPS, OpType.ATAN2: EXP_OPS + 2,
    OpType.POW: 2 * EXP_OPS,                            # exp(b * log(a))
    OpType.GELU: EXP_OPS + 5,                           # erfc or tanh, a cube, scale and offset
    OpType.LOCAL_RESPONSE_NORMALIZATION: 2 * EXP_OPS + 4,  # a window of squares, then a power
    OpType.FLOOR_DIV: 2, OpType.FLOOR_MOD: 3, OpType.FAKE_QUANT: 5,  # divide + floor; clamp, scale, round, back
}

# Per LSTM cell unit and step: three sigmoids and two tanh, plus the bias adds and state update.
LSTM_UNIT_OPS = 3 * ELEM_OPS_PER_OUTPUT[OpType.LOGISTIC] + 2 * ELEM_OPS_PER_OUTPUT[OpType.TANH] + 8
