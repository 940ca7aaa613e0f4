"""Single-op test graphs for every op the CPU reference runs, in float32, int8 and uint8.

Each generator makes its choices through `Picks`, so the same code serves two drivers: a seeded
NumPy Generator (`generate`, reproducible runs such as the delegate conformance kit) and
hypothesis (`single_op_graphs`, `single_op_cases`, which shrink like any strategy). Float graphs
are built with the zoo's GraphBuilder, so shapes are consistent by construction; int8 graphs are
the float graph through the converter's int8 quantizer (runtime.zoo.quantize.to_int8), uint8
graphs its legacy uint8 twin (runtime.testing.op_quant).

Op/dtype pairs left out because the CPU reference has no kernel for them (`UNSUPPORTED`):
DIV, EXP, LOG_SOFTMAX, ABS, NEG, SQRT and RSQRT in int8 and uint8 (no TFLite 8-bit kernel in the
testbed, and the int8 quantizer refuses all but LOG_SOFTMAX), and QUANTIZE / DEQUANTIZE in
float32 (a float model has no 8-bit tensor to convert from or to).
"""

from __future__ import annotations

import dataclasses
import enum
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from hypothesis import reject
from hypothesis import strategies as st

from runtime.ir.errors import ModelError
from runtime.ir.graph import Graph
from runtime.ir.optypes import OpType
from runtime.testing import op_builders as ob
from runtime.testing.op_builders import Domain, Picks
from runtime.testing.op_quant import quantized_graph

__all__ = ["DTYPES", "OPS", "UNSUPPORTED", "Domain", "Picks", "RngPicks", "OpCase", "generate",
           "case_rng", "sample_inputs", "supported_dtypes", "single_op_cases", "single_op_graphs"]

DTYPES = ("float32", "int8", "uint8")

# Ops with no 8-bit kernel in the CPU reference (see the module docstring).
_FLOAT_ONLY = frozenset({OpType.DIV, OpType.EXP, OpType.LOG_SOFTMAX, OpType.ABS, OpType.NEG,
                         OpType.SQRT, OpType.RSQRT})
_EIGHT_BIT_ONLY = frozenset({OpType.QUANTIZE, OpType.DEQUANTIZE})

OPS: tuple[OpType, ...] = tuple(ob.BUILDERS) + tuple(_EIGHT_BIT_ONLY)

UNSUPPORTED: frozenset[tuple[OpType, str]] = frozenset(
    {(op, dt) for op in _FLOAT_ONLY for dt in ("int8", "uint8")}
    | {(op, "float32") for op in _EIGHT_BIT_ONLY})


def supported_dtypes(op_type: OpType) -> tuple[str, ...]:
    """The dtypes the generators make for `op_type` (those the CPU reference runs)."""
    return tuple(dt for dt in DTYPES if (op_type, dt) not in UNSUPPORTED)


class RngPicks(Picks):
    """Choices from a seeded NumPy Generator: the same seed gives the same graphs."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi + 1))

    def choice(self, options: Sequence[Any]) -> Any:
        return options[int(self.rng.integers(len(options)))]


class _DrawPicks(Picks):
    """Choices drawn by hypothesis, so failing graphs shrink."""

    def __init__(self, draw: Callable):
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def choice(self, options: Sequence[Any]) -> Any:
        return self.draw(st.sampled_from(list(options)))


@dataclass(frozen=True)
class OpCase:
    """One generated single-op graph and what its inputs may hold (a Domain per graph input)."""

    op_type: OpType
    dtype: str
    graph: Graph
    domains: tuple[Domain, ...]

    @property
    def shapes(self) -> str:
        """'1x5x5x3 w4x3x3x3 -> 1x3x3x4': live inputs, the weights if any, then outputs."""
        g, op = self.graph, self.op
        dims = lambda t: "x".join(map(str, g.tensors[t].shape)) or "scalar"  # noqa: E731
        live = [dims(t) for t in op.inputs if t >= 0 and not g.tensors[t].is_constant]
        weight = ob.WEIGHT_INPUT.get(self.op_type)
        if weight is not None:
            live.append("w" + dims(op.inputs[weight]))
        return f"{','.join(live)} -> {','.join(dims(t) for t in op.outputs)}"

    @property
    def options(self) -> str:
        """The op's options that differ from their defaults, e.g. 'padding=VALID stride_h=2'."""
        opts = self.op.options
        if opts is None or not dataclasses.is_dataclass(opts):
            return ""
        parts = []
        for f in dataclasses.fields(opts):
            value = getattr(opts, f.name)
            if value != f.default:
                shown = value.name if isinstance(value, enum.Enum) else value
                parts.append(f"{f.name.replace('fused_activation_function', 'act')}={shown}")
        return " ".join(parts)

    @property
    def op(self):
        return next(op for op in self.graph.ops if op.type is self.op_type)


def _build(p: Picks, op_type: OpType, dtype: str) -> OpCase:
    if (op_type, dtype) in UNSUPPORTED:
        raise ValueError(f"no {dtype} {op_type.name} graphs: the CPU reference cannot run them")
    if op_type in _EIGHT_BIT_ONLY:
        graph, domains = ob.conversion_graph(p, op_type, dtype)
        return OpCase(op_type, dtype, graph, domains)
    if op_type not in ob.BUILDERS:
        raise ValueError(f"no generator for {op_type.name}; generated ops: {', '.join(o.name for o in OPS)}")
    ctx = ob.Context(p, dtype)
    outputs = ob.BUILDERS[op_type](ctx)
    graph = ctx.b.build(list(outputs))
    if dtype != "float32":
        graph = quantized_graph(graph, ctx.domains, dtype, p.seed())
    return OpCase(op_type, dtype, graph, tuple(ctx.domains))


def case_rng(seed: int, *keys: str | int) -> np.random.Generator:
    """A Generator for (seed, keys...) that is stable across processes (no salted str hash)."""
    words = [seed] + [zlib.crc32(k.encode()) if isinstance(k, str) else int(k) for k in keys]
    return np.random.default_rng(words)


# 8-bit draws a case may take before its last refusal is raised (see generate).
REDRAWS = 8


def generate(op_type: OpType | str, dtype: str = "float32",
             rng: np.random.Generator | int = 0) -> OpCase:
    """One reproducible case: the same op, dtype and seed (or Generator state) give the same graph.

    An 8-bit draw whose calibrated quantization LiteRT would refuse is drawn again from the same
    Generator (so still reproducibly): an ADD with a fused ReLU6 whose calibration samples all come
    out negative has an all-zero output, which the converter gives a range of +-1e-6, and no
    rescaling multiplier in (0, 1)."""
    op_type = OpType[op_type] if isinstance(op_type, str) else op_type
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    for _ in range(0 if dtype == "float32" else REDRAWS - 1):
        try:
            return _build(RngPicks(rng), op_type, dtype)
        except ModelError:
            continue   # refused: drawn again, from where the Generator now stands
    return _build(RngPicks(rng), op_type, dtype)


def sample_inputs(case: OpCase, rng: np.random.Generator) -> list[np.ndarray]:
    """Input values for one run: float inputs from their Domain, 8-bit inputs over the whole range
    (saturation included)."""
    arrays = []
    for t, domain in zip(case.graph.inputs, case.domains):
        tensor = case.graph.tensors[t]
        if tensor.dtype.np.kind in "iu":
            info = np.iinfo(tensor.dtype.np)
            arrays.append(rng.integers(info.min, info.max + 1, tensor.shape).astype(tensor.dtype.np))
        else:
            arrays.append(ob.sample(domain, tensor.shape, rng))
    return arrays


@st.composite
def single_op_cases(draw, op_type: OpType | str, dtype: str = "float32") -> OpCase:
    """A valid small single-op case (graph plus input domains) of `op_type` in `dtype`; an 8-bit draw
    whose calibrated quantization LiteRT would refuse is rejected, as generate draws it again."""
    op_type = OpType[op_type] if isinstance(op_type, str) else op_type
    try:
        return _build(_DrawPicks(draw), op_type, dtype)
    except ModelError:
        if dtype == "float32":
            raise
        reject()


def single_op_graphs(op_type: OpType | str, dtype: str = "float32"):
    """A strategy for valid small graphs of one `op_type` op in "float32", "int8" or "uint8":
    varied shapes and options, TFLite's quantization for the 8-bit ones."""
    return single_op_cases(op_type, dtype).map(lambda case: case.graph)
