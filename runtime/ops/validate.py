"""Structural checks on a Graph, each failure naming the op and tensor at fault."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

from runtime.ir.errors import ModelError
from runtime.ir.graph import Graph, printable
from runtime.ops import opcheck

__all__ = ["ModelChecks", "check_model", "validate_graph", "MAX_RANK", "MAX_ELEMENTS"]


@dataclass(frozen=True)
class ModelChecks:
    """The op checks' findings for the main graph and for each subgraph it may run (None for a
    subgraph only another signature runs: it is prepared only when it runs)."""

    main: opcheck.Checked
    subgraphs: tuple[opcheck.Checked | None, ...]     # subgraph k at k - 1

    def of(self, k: int) -> opcheck.Checked | None:
        return self.main if k == 0 else self.subgraphs[k - 1]


def check_model(graph: Graph) -> ModelChecks:
    """Every check, once: the structure of each subgraph, the calls between them, and every op a
    kernel runs (inputs, options, quantization, output shapes). ModelError names what is at fault.
    An interpreter's plan is built on its findings; nothing keeps them elsewhere."""
    _check_structure(graph)
    subgraphs = _check_subgraphs(graph)
    return ModelChecks(opcheck.check_graph(graph), subgraphs)


def validate_graph(graph):
    """Raise ModelError naming the op and tensor at fault; return the graph when sound (the gate a
    reader or builder passes its graph through)."""
    check_model(graph)
    return graph


def _check_structure(graph) -> None:
    _check_indices(graph, len(graph.tensors))
    _check_tensors(graph)
    _check_constants(graph)
    _check_dataflow(graph)


def _check_subgraphs(graph) -> tuple[opcheck.Checked | None, ...]:
    """The model's other subgraphs: the calls between them (indices in range, no recursion), each
    one as sound as the main graph, then the ops of those the main graph may run (they may look
    into the subgraphs they call; other signatures' subgraphs are prepared only when they run).
    Returns the op checks' findings per subgraph (None: one the main graph never runs)."""
    from runtime.ops.opcheck_control import check_calls, reachable

    check_calls(graph)
    runs = set(reachable(graph))
    found: list[opcheck.Checked | None] = [None] * len(graph.subgraphs)
    for k in range(1, len(graph.subgraphs) + 1):
        with _naming(graph, k):
            if graph.subgraph(k).subgraphs:
                raise ModelError("holds subgraphs of its own; only the main graph may")
            _check_structure(graph.subgraph(k))
    for k in sorted(runs - {0}):
        with _naming(graph, k):
            found[k - 1] = opcheck.check_graph(graph.subgraph(k), model=graph)
    return tuple(found)


@contextlib.contextmanager
def _naming(graph, k: int):
    """A ModelError raised inside the block names subgraph k first."""
    try:
        yield
    except ModelError as exc:
        raise ModelError(f"{graph.describe_subgraph(k)}: {exc}") from None


# TFLite's kernels handle up to 6 dimensions; NumPy stops at 64. Beyond this a shape is damage.
MAX_RANK = 16
# No tensor this large fits any memory; the bound keeps element counts exact in float64 too.
MAX_ELEMENTS = 2**48


# A zero point is a value of its tensor's type (LiteRT's API returns them as int32).
_ZERO_POINTS = {"INT8": (-128, 127), "UINT8": (0, 255), "INT16": (-32768, 32767)}


def _check_tensors(graph) -> None:
    for t, tensor in enumerate(graph.tensors):
        shape = tensor.shape
        if len(shape) > MAX_RANK:
            raise ModelError(f"{graph.describe_tensor(t)} has rank {len(shape)}; at most {MAX_RANK} is supported")
        if any(d < 0 for d in shape):
            raise ModelError(f"{graph.describe_tensor(t)} has shape {list(shape)}; dimensions must be >= 0")
        if math.prod(shape) > MAX_ELEMENTS:
            raise ModelError(f"{graph.describe_tensor(t)} has shape {list(shape)}: "
                             f"{math.prod(shape)} elements, more than any memory holds")
        q = tensor.quant
        if q is None:
            continue
        if len(q.scale) != len(q.zero_point) or not q.scale:
            raise ModelError(f"{graph.describe_tensor(t)} has {len(q.scale)} quantization scales but "
                             f"{len(q.zero_point)} zero points")
        if not all(map(math.isfinite, q.scale)):
            raise ModelError(f"{graph.describe_tensor(t)} has a non-finite quantization scale")
        lo, hi = _ZERO_POINTS.get(tensor.dtype.name, (-(2**31), 2**31 - 1))
        if min(q.zero_point) < lo or max(q.zero_point) > hi:
            bad = next(z for z in q.zero_point if not lo <= z <= hi)
            raise ModelError(f"{graph.describe_tensor(t)} has zero point {bad}, outside [{lo}, {hi}] for "
                             f"{tensor.dtype.name}")
        if len(q.scale) > 1 and not (0 <= q.axis < len(shape) and shape[q.axis] == len(q.scale)):
            raise ModelError(f"{graph.describe_tensor(t)} of shape {list(shape)} has {len(q.scale)} "
                             f"per-channel scales along dimension {q.axis}")
    for s in graph.signatures:
        for kind, pairs in (("input", s.inputs), ("output", s.outputs)):
            for name, t in pairs:
                if not 0 <= t < len(graph.tensors):
                    raise ModelError(f"signature '{printable(s.key)}' {kind} '{printable(name)}' refers to tensor "
                                     f"#{t}, but the graph has {len(graph.tensors)} tensors")


def _check_indices(graph, n: int) -> None:
    for kind, ids in (("input", graph.inputs), ("output", graph.outputs)):
        for t in ids:
            if not 0 <= t < n:
                raise ModelError(f"graph {kind} refers to tensor #{t}, but the graph has {n} tensors")
    for t in graph.inputs:  # the checks read a constant's data; an input's would come at run time
        if graph.tensors[t].is_constant:
            raise ModelError(f"graph input {graph.describe_tensor(t)} is a constant (it has a data buffer)")
    for i, op in enumerate(graph.ops):
        for t in op.inputs:
            if not -1 <= t < n:
                raise ModelError(f"{graph.describe_op(i)} reads dangling tensor #{t} (graph has {n})")
        for t in op.outputs:
            if not 0 <= t < n:
                raise ModelError(f"{graph.describe_op(i)} writes dangling tensor #{t} (graph has {n})")


def _check_constants(graph) -> None:
    for t, tensor in enumerate(graph.tensors):
        if tensor.data is not None and tensor.data.size != math.prod(tensor.shape):
            raise ModelError(f"{graph.describe_tensor(t)}: constant data has {tensor.data.size} "
                             f"elements but shape {list(tensor.shape)}")


def _check_dataflow(graph) -> None:
    ready = set(graph.inputs)
    ready.update(t for t, tensor in enumerate(graph.tensors) if tensor.is_constant or tensor.is_variable)
    written: dict[int, int] = {}
    for i, op in enumerate(graph.ops):
        for t in op.inputs:
            if t >= 0 and t not in ready:
                later = " (written later)" if any(t in o.outputs for o in graph.ops[i:]) else ""
                raise ModelError(f"{graph.describe_op(i)} uses {graph.describe_tensor(t)} "
                                 f"before it is defined{later}")
        for t in op.outputs:
            if t in written:
                raise ModelError(f"{graph.describe_op(i)} writes {graph.describe_tensor(t)}, "
                                 f"already written by {graph.describe_op(written[t])}")
            if graph.tensors[t].is_constant:
                raise ModelError(f"{graph.describe_op(i)} writes constant {graph.describe_tensor(t)}")
            written[t] = i
            ready.add(t)
    for t in graph.outputs:
        if t not in ready:
            raise ModelError(f"graph output {graph.describe_tensor(t)} is never produced")


