"""Registry entries of the complex-number, bit-cast, random and StableHLO gather/scatter/window kernels;
runtime/ops/__init__.py merges them into its registries."""

from __future__ import annotations

from runtime.ops import complex as cx, random as rnd, stablehlo_index as shi
from runtime.ops.base import Kernel
from runtime.ir.optypes import OpType

KERNELS: dict[OpType, Kernel] = {
    OpType.RFFT2D: cx.rfft2d,
    OpType.REAL: cx.real,
    OpType.IMAG: cx.imag,
    OpType.COMPLEX_ABS: cx.complex_abs,
    OpType.BITCAST: cx.bitcast,
    OpType.RANDOM_UNIFORM: rnd.random_uniform,
    OpType.RANDOM_STANDARD_NORMAL: rnd.random_standard_normal,
    OpType.MULTINOMIAL: rnd.multinomial,
    OpType.STABLEHLO_RNG_BIT_GENERATOR: rnd.stablehlo_rng_bit_generator,
    OpType.STABLEHLO_GATHER: shi.stablehlo_gather,
    OpType.STABLEHLO_SCATTER: shi.stablehlo_scatter,
    OpType.STABLEHLO_REDUCE_WINDOW: shi.stablehlo_reduce_window,
}

# Raw-value kernels: 8-bit tensors are moved or combined as plain integers (no requantization).
DTYPE_AGNOSTIC = frozenset({
    OpType.BITCAST, OpType.STABLEHLO_GATHER, OpType.STABLEHLO_SCATTER, OpType.STABLEHLO_REDUCE_WINDOW,
})

# Ops that draw from a generator kept in the node: they run on every invoke, never once when
# tensors are allocated, even when every input is a constant.
DRAWS_RANDOM = frozenset({OpType.RANDOM_UNIFORM, OpType.RANDOM_STANDARD_NORMAL, OpType.MULTINOMIAL})
