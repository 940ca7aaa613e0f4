"""A calibrated phone's error band: the |error| its cross-validation measured per delegate, and what its fit saw."""

from __future__ import annotations

import contextlib
import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from runtime.ir.optypes import OpType
from sim.cost import OpClass, Precision

if TYPE_CHECKING:   # the graph module brings numpy: a profile read for `dtb list devices` needs neither
    from runtime.ir.graph import Graph
from sim.profile_parse import ProfileCtx, parse_integer, parse_mapping, parse_number, show_value

__all__ = ["BandDelegate", "ModelPrecision", "ModelTraits", "Coverage", "DelegateBand", "ErrorBand",
           "model_traits", "coverage", "delegate_band", "outside", "parse_error_band", "render_error_band",
           "SHARE_DIGITS", "SHARE_MARGIN"]

# Shares are written with this many decimals.
SHARE_DIGITS = 4
# An op class the fit saw counts as outside only this far (share of ops) beyond the fitted range: the
# warning is for another op mix (MobileNet v2's 26% depthwise ops against v1's 42%), not for a model a
# RESHAPE longer than the fitted ones (3% of MobileNet v1's 31 ops is one op). A class the fit never
# saw is outside at any share: nothing fitted its cost.
SHARE_MARGIN = 0.10


class BandDelegate(enum.Enum):
    """What ran a calibration row: the CPU alone, or one built-in delegate (delegates/kinds.py's names;
    sim sits below delegates, so tests/test_band.py holds the two lists equal)."""

    CPU = "cpu"
    GPU = "gpu"
    NNAPI = "nnapi"
    HEXAGON = "hexagon"
    COREML = "coreml"
    QNN = "qnn"


class ModelPrecision(enum.Enum):
    """The arithmetic a model's multiply-add ops are stored for (dtb's --quantization names)."""

    FLOAT32 = "float32"
    FLOAT16 = "float16"            # float16 weights widened by DEQUANTIZE
    DYNAMIC_RANGE = "dynamic_range"  # float activations, 8-bit weights
    INT8 = "int8"
    UINT8 = "uint8"
    INT16 = "int16"                # 16-bit activations, 8-bit weights (16x8)


@dataclass(frozen=True)
class ModelTraits:
    """What sets how far a fitted profile can be trusted on a model: its size, precision and op mix."""

    macs: int                                      # multiply-adds per inference
    params: int                                    # elements of constant tensors
    precisions: frozenset[ModelPrecision]
    shares: tuple[tuple[OpClass, float], ...]      # share of the model's ops per op class present


@dataclass(frozen=True)
class Coverage:
    """The models a delegate's rows were fitted to: how many, their size ranges, precisions, op mixes."""

    models: int
    macs: tuple[int, int]
    params: tuple[int, int]
    precisions: frozenset[ModelPrecision]
    shares: tuple[tuple[OpClass, float, float], ...]   # (class, least, most); a class not listed is 0


@dataclass(frozen=True)
class DelegateBand:
    """One delegate's leave-one-model-out |error| (percent) over its rows, and what those rows covered."""

    delegate: BandDelegate
    rows: int
    median_pct: float
    p90_pct: float
    coverage: Coverage


@dataclass(frozen=True)
class ErrorBand:
    """Every delegate band of a profile (a delegate with no calibration rows has none)."""

    delegates: tuple[DelegateBand, ...]

    def of(self, delegate: str) -> DelegateBand | None:
        return next((b for b in self.delegates if b.delegate.value == delegate), None)


# -- a model's traits -------------------------------------------------------------------------------

_MAC_CLASSES = frozenset({OpClass.CONV, OpClass.DEPTHWISE, OpClass.GEMM})
_BY_DTYPE = {"INT8": ModelPrecision.INT8, "UINT8": ModelPrecision.UINT8, "INT16": ModelPrecision.INT16,
             "FLOAT16": ModelPrecision.FLOAT16, "FLOAT32": ModelPrecision.FLOAT32}   # by DType name


def model_traits(graph: Graph) -> ModelTraits:
    """MACs, parameters, precisions and op-class shares of the main graph (sim/work.py's classes)."""
    from sim.work import describe, op_class

    shapes = [tuple(max(1, d) for d in t.shape) for t in graph.tensors]
    macs = 0
    for op in graph.ops:
        with contextlib.suppress(Exception):   # an op the cost model cannot size adds no MACs
            macs += describe(op, graph, shapes, Precision.FLOAT32).macs
    params = sum(int(t.data.size) for t in graph.tensors if t.is_constant)
    counts: dict[OpClass, int] = {}
    mix = [op for op in graph.ops if not _widens_a_constant(graph, op)]
    for op in mix:
        counts[op_class(op.type)] = counts.get(op_class(op.type), 0) + 1
    total = max(1, len(mix))
    shares = tuple((c, n / total) for c, n in sorted(counts.items(), key=lambda kv: kv[0].value))
    return ModelTraits(macs, params, _precisions(graph), shares)


def _widens_a_constant(graph: Graph, op) -> bool:
    """A DEQUANTIZE of constant weights (a float16 model's) is no part of the op mix: TFLite dequantizes
    a constant input once and keeps the result (tensorflow/lite/kernels/dequantize.cc, IsConstantTensor);
    the model's precision says float16 instead."""
    return op.type is OpType.DEQUANTIZE and bool(op.inputs) and op.inputs[0] >= 0 and \
        graph.tensors[op.inputs[0]].is_constant


def _precisions(graph: Graph) -> frozenset[ModelPrecision]:
    from runtime.ir.graph import DType
    from sim.work import op_class

    made_by = graph.producers()
    out = set()
    for op in graph.ops:
        if op_class(op.type) not in _MAC_CLASSES or len(op.inputs) < 2 or min(op.inputs[:2]) < 0:
            continue
        data, weights = graph.tensors[op.inputs[0]], graph.tensors[op.inputs[1]]
        if data.dtype is DType.FLOAT32 and weights.dtype in (DType.INT8, DType.UINT8):
            out.add(ModelPrecision.DYNAMIC_RANGE)
        elif data.dtype is DType.FLOAT32 and _widened_from_float16(graph, made_by, op.inputs[1]):
            out.add(ModelPrecision.FLOAT16)
        elif data.dtype.name in _BY_DTYPE:
            out.add(_BY_DTYPE[data.dtype.name])
    if not out:   # no multiply-add op: the inputs' type says it
        out = {_BY_DTYPE[graph.tensors[t].dtype.name] for t in graph.inputs if graph.tensors[t].dtype.name in _BY_DTYPE}
    return frozenset(out or {ModelPrecision.FLOAT32})


def _widened_from_float16(graph: Graph, made_by: dict[int, int], t: int) -> bool:
    from runtime.ir.graph import DType

    op = graph.ops[made_by[t]] if t in made_by else None
    return op is not None and op.type is OpType.DEQUANTIZE and graph.tensors[op.inputs[0]].dtype is DType.FLOAT16


# -- a delegate's band ------------------------------------------------------------------------------


def coverage(models: Sequence[ModelTraits]) -> Coverage:
    """The ranges the given (distinct) models span."""
    classes = sorted({c for m in models for c, _ in m.shares}, key=lambda c: c.value)
    shares = tuple((c, min(dict(m.shares).get(c, 0.0) for m in models), max(dict(m.shares).get(c, 0.0) for m in models))
                   for c in classes)
    return Coverage(len(models), (min(m.macs for m in models), max(m.macs for m in models)),
                    (min(m.params for m in models), max(m.params for m in models)),
                    frozenset().union(*(m.precisions for m in models)), shares)


def delegate_band(delegate: str, errors: Sequence[float], models: Sequence[ModelTraits]) -> DelegateBand:
    """The band of one delegate's held-out errors (fractions, signed) over rows of `models`."""
    import numpy as np

    absolute = np.abs(np.asarray(errors, np.float64))
    return DelegateBand(BandDelegate(delegate), len(absolute), round(float(np.median(absolute)) * 100, 1),
                        round(float(np.percentile(absolute, 90, method="linear")) * 100, 1), coverage(models))


def outside(model: ModelTraits, seen: Coverage) -> tuple[str, ...]:
    """How a model lies outside what a band's rows covered, one phrase per way (empty: inside)."""
    out = []
    have = dict(model.shares)
    for c, lo, hi in seen.shares:
        share = have.get(c, 0.0)
        if share < lo - SHARE_MARGIN:
            out.append(f"{c.name} share {share:.0%} < fitted min {lo:.0%}")
        elif share > hi + SHARE_MARGIN:
            out.append(f"{c.name} share {share:.0%} > fitted max {hi:.0%}")
    fitted = {c for c, _, _ in seen.shares}
    out += [f"{c.name} share {s:.0%}, not in fitted rows" for c, s in model.shares if c not in fitted and s > 0]
    out += _range("MACs", model.macs, seen.macs) + _range("params", model.params, seen.params)
    for p in sorted(model.precisions - seen.precisions, key=lambda p: p.value):
        out.append(f"precision {p.value} not in fitted rows ({', '.join(sorted(q.value for q in seen.precisions))})")
    return tuple(out)


def _range(what: str, value: int, span: tuple[int, int]) -> list[str]:
    if value < span[0]:
        return [f"{what} {_si(value)} < fitted min {_si(span[0])}"]
    if value > span[1]:
        return [f"{what} {_si(value)} > fitted max {_si(span[1])}"]
    return []


def _si(n: int) -> str:
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return str(n)


# -- the profile's error_band: section ----------------------------------------------------------------

_KEYS = ("rows", "median_pct", "p90_pct", "models", "precisions", "macs", "params", "op_share")


def parse_error_band(ctx: ProfileCtx, value: Any, path: tuple) -> ErrorBand:
    """`error_band:` as `dtb calibrate --cv -o` writes it: per delegate its rows, median and p90
    |error| in percent, and the models' count, precisions, MACs, parameters and op-class shares."""
    bands = []
    for name, raw in parse_mapping(ctx, value, path).items():
        here = path + (name,)
        if name not in {d.value for d in BandDelegate}:
            raise ctx.fail(here, f"unknown delegate; expected one of {', '.join(d.value for d in BandDelegate)}")
        bands.append(_delegate(ctx, BandDelegate(name), parse_mapping(ctx, raw, here), here))
    return ErrorBand(tuple(bands))


def _delegate(ctx: ProfileCtx, delegate: BandDelegate, table: dict, path: tuple) -> DelegateBand:
    for key in table:
        if key not in _KEYS:
            raise ctx.fail(path + (key,), f"unknown key; expected one of {', '.join(_KEYS)}")
    for key in _KEYS:
        if key not in table:
            raise ctx.fail(path + (key,), "required key is missing")
    pct = lambda k: parse_number(ctx, table[k], path + (k,), "a percentage >= 0", lambda x: x >= 0)  # noqa: E731
    seen = Coverage(parse_integer(1)(ctx, table["models"], path + ("models",)),
                    _span(ctx, table["macs"], path + ("macs",)), _span(ctx, table["params"], path + ("params",)),
                    _precision_set(ctx, table["precisions"], path + ("precisions",)),
                    _shares(ctx, table["op_share"], path + ("op_share",)))
    return DelegateBand(delegate, parse_integer(1)(ctx, table["rows"], path + ("rows",)), pct("median_pct"),
                        pct("p90_pct"), seen)


def _span(ctx: ProfileCtx, value: Any, path: tuple) -> tuple[int, int]:
    if not (isinstance(value, list) and len(value) == 2):
        raise ctx.fail(path, f"must be a [least, most] pair, got {show_value(value)}")
    lo, hi = (parse_integer(0)(ctx, v, path) for v in value)
    if lo > hi:
        raise ctx.fail(path, f"least {lo} exceeds most {hi}")
    return lo, hi


def _precision_set(ctx: ProfileCtx, value: Any, path: tuple) -> frozenset[ModelPrecision]:
    names = {p.value for p in ModelPrecision}
    if not isinstance(value, list) or not value or any(not isinstance(v, str) or v not in names for v in value):
        raise ctx.fail(path, f"must be a list of precisions ({', '.join(sorted(names))}), got {show_value(value)}")
    return frozenset(ModelPrecision(v) for v in value)


def _shares(ctx: ProfileCtx, value: Any, path: tuple) -> tuple[tuple[OpClass, float, float], ...]:
    out = []
    for name, pair in parse_mapping(ctx, value, path).items():
        if name not in {c.value for c in OpClass}:
            raise ctx.fail(path + (name,), f"unknown op class; expected one of {', '.join(c.value for c in OpClass)}")
        if not (isinstance(pair, list) and len(pair) == 2):
            raise ctx.fail(path + (name,), f"must be a [least, most] pair, got {show_value(pair)}")
        lo, hi = (parse_number(ctx, v, path + (name,), "a share in [0, 1]", lambda x: 0 <= x <= 1) for v in pair)
        if lo > hi:
            raise ctx.fail(path + (name,), f"least {lo} exceeds most {hi}")
        out.append((OpClass(name), lo, hi))
    return tuple(out)


def render_error_band(band: ErrorBand) -> list[str]:
    """The `error_band:` section's YAML lines (parse_error_band reads them back), every number commented."""
    lines = ["error_band:                     # written by dtb calibrate --cv: per delegate, the |error| of its rows "
             "predicted with their model held out, and the models those rows measured"]
    for b in band.delegates:
        c = b.coverage
        lines += [f"  {b.delegate.value}:",
                  _commented(f"    rows: {b.rows}", f"derived: measurement rows run on the {b.delegate.value}"),
                  _commented(f"    median_pct: {b.median_pct}", "derived: median |error| of those rows, held out"),
                  _commented(f"    p90_pct: {b.p90_pct}", "derived: 90th percentile (linear) of the same"),
                  _commented(f"    models: {c.models}", "derived: distinct models of those rows"),
                  f"    precisions: [{', '.join(sorted(p.value for p in c.precisions))}]",
                  _commented(f"    macs: [{c.macs[0]}, {c.macs[1]}]", "derived: multiply-adds per inference, least "
                                                                     "and most"),
                  _commented(f"    params: [{c.params[0]}, {c.params[1]}]", "derived: elements of constant tensors, "
                                                                           "least and most"),
                  _commented("    op_share:", "share of a model's ops per op class (sim/work.py), least and most")]
        lines += [_commented(f"      {cls.value}: [{_share(lo)}, {_share(hi)}]", "derived") for cls, lo, hi in c.shares]
    return lines


def _commented(line: str, comment: str) -> str:
    return f"{line:{max(len(line) + 1, 32)}s}# {comment}"


def _share(x: float) -> str:
    return f"{x:.{SHARE_DIGITS}f}".rstrip("0").rstrip(".")
