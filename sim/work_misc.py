"""Work descriptions of the complex-number ops, BITCAST, the random draws and the StableHLO
gather/scatter/window ops; sim/work.py merges them into its tables."""

from __future__ import annotations

import math
from typing import Mapping

from sim import elem_ops as _work   # the shared per-output operation counts
from runtime.ir.optypes import OpType
from sim.cost import OpClass

_E, _T, _R, _D = OpClass.ELEMENTWISE, OpClass.TRANSCENDENTAL, OpClass.REDUCE, OpClass.DATA

CLASSES: Mapping[OpType, OpClass] = {
    # a real FFT is multiply-adds over the slice, log2(size) passes; abs is a hypot per element
    OpType.RFFT2D: _E, OpType.COMPLEX_ABS: _T,
    OpType.REAL: _D, OpType.IMAG: _D, OpType.BITCAST: _D,
    # Philox: ten rounds of two 32-bit multiplies and xors per four words; normals add log, sqrt, sincos
    OpType.RANDOM_UNIFORM: _E, OpType.RANDOM_STANDARD_NORMAL: _T, OpType.MULTINOMIAL: _R,
    OpType.STABLEHLO_RNG_BIT_GENERATOR: _E,
    OpType.STABLEHLO_GATHER: _D, OpType.STABLEHLO_SCATTER: _D, OpType.STABLEHLO_REDUCE_WINDOW: _R,
}

_PHILOX_OPS = 16   # per word: 10 rounds x (2 multiplies + 4 xors/adds) / 4 words, plus the float conversion


def _n(shape) -> int:
    return math.prod(int(d) for d in shape) if shape is not None else 0


def _fft(op, ins, outs) -> tuple[int, int]:
    """About 2.5 N log2 N multiply-adds for a real transform of N points, per innermost slice."""
    out = outs[0]
    if len(out) < 2:
        return 0, 0
    points = out[-2] * max(2 * (out[-1] - 1), 1)
    return 0, int(_n(out[:-2]) * 2.5 * points * math.log2(max(points, 2)))


def _abs(op, ins, outs) -> tuple[int, int]:
    return 0, _n(outs[0]) * (_work.EXP_OPS // 2 + 3)   # two squares, an add, a square root


def _uniform(op, ins, outs) -> tuple[int, int]:
    return 0, _n(outs[0]) * _PHILOX_OPS


def _bits(op, ins, outs) -> tuple[int, int]:
    """Generator work per 32-bit word of the random output."""
    return 0, _n(outs[1]) * _PHILOX_OPS * 2 if len(outs) > 1 else 0


def _normal(op, ins, outs) -> tuple[int, int]:
    return 0, _n(outs[0]) * (_PHILOX_OPS + 2 * _work.EXP_OPS)


def _multinomial(op, ins, outs) -> tuple[int, int]:
    """An exp and an add per logit; per sample two words and a binary search over the classes."""
    logits = ins[0] if ins and ins[0] is not None else (0, 1)
    classes = max(int(logits[-1]), 1)
    return 0, _n(logits) * (_work.EXP_OPS + 1) + _n(outs[0]) * (2 * _PHILOX_OPS + int(math.log2(classes)) + 1)


def _scatter(op, ins, outs) -> tuple[int, int]:
    """One combine per update element."""
    return 0, _n(ins[2]) if len(ins) > 2 else 0


def _reduce_window(op, ins, outs) -> tuple[int, int]:
    window = getattr(op.options, "window_dimensions", ()) or (1,)
    return 0, _n(outs[0]) * _n(window)


def _moves(op, ins, outs) -> tuple[int, int]:
    return 0, 0


FAMILIES = {
    OpType.RFFT2D: _fft, OpType.COMPLEX_ABS: _abs, OpType.REAL: _moves, OpType.IMAG: _moves, OpType.BITCAST: _moves,
    OpType.RANDOM_UNIFORM: _uniform, OpType.RANDOM_STANDARD_NORMAL: _normal, OpType.MULTINOMIAL: _multinomial,
    OpType.STABLEHLO_RNG_BIT_GENERATOR: _bits,
    OpType.STABLEHLO_GATHER: _moves, OpType.STABLEHLO_SCATTER: _scatter,
    OpType.STABLEHLO_REDUCE_WINDOW: _reduce_window,
}


def read_shapes(op, ins: list, outs: list) -> list | None:
    """A gather reads the blocks it picks (the output's elements) and its indices, not the whole
    operand (None: every input)."""
    if op.type is OpType.STABLEHLO_GATHER and ins and outs:
        return [outs[0], *ins[1:]]
    return None
