"""Structural checks on a Graph, each failure naming the op and tensor at fault."""

from __future__ import annotations

import numpy as np

from runtime.errors import ModelError
from runtime.optypes import OpType

_ELEMENTWISE = {OpType.ADD, OpType.SUB, OpType.MUL, OpType.DIV, OpType.MAXIMUM, OpType.MINIMUM,
                OpType.SQUARED_DIFFERENCE}


def validate_graph(graph) -> None:
    n = len(graph.tensors)
    _check_indices(graph, n)
    _check_constants(graph)
    _check_dataflow(graph)
    for i, op in enumerate(graph.ops):
        _check_shapes(graph, i, op)


def _check_indices(graph, n: int) -> None:
    for kind, ids in (("input", graph.inputs), ("output", graph.outputs)):
        for t in ids:
            if not 0 <= t < n:
                raise ModelError(f"graph {kind} refers to tensor #{t}, but the graph has {n} tensors")
    for i, op in enumerate(graph.ops):
        for t in op.inputs:
            if not -1 <= t < n:
                raise ModelError(f"{graph.describe_op(i)} reads dangling tensor #{t} (graph has {n})")
        for t in op.outputs:
            if not 0 <= t < n:
                raise ModelError(f"{graph.describe_op(i)} writes dangling tensor #{t} (graph has {n})")


def _check_constants(graph) -> None:
    for t, tensor in enumerate(graph.tensors):
        if tensor.data is not None and tensor.data.size != int(np.prod(tensor.shape, dtype=np.int64)):
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


def _shape(graph, t: int) -> tuple[int, ...]:
    return graph.tensors[t].shape


def _check_shapes(graph, i: int, op) -> None:
    ins = [t for t in op.inputs]
    if op.type in _ELEMENTWISE and len(ins) == 2 and min(ins) >= 0:
        a, b = _shape(graph, ins[0]), _shape(graph, ins[1])
        try:
            np.broadcast_shapes(a, b)
        except ValueError:
            raise ModelError(f"{graph.describe_op(i)}: shapes {list(a)} of {graph.describe_tensor(ins[0])} "
                             f"and {list(b)} of {graph.describe_tensor(ins[1])} do not broadcast") from None
    elif op.type is OpType.CONV_2D and len(ins) >= 2:
        x, w = _shape(graph, ins[0]), _shape(graph, ins[1])
        if len(x) == 4 and len(w) == 4 and w[3] and x[3] % w[3]:
            raise ModelError(f"{graph.describe_op(i)}: input {graph.describe_tensor(ins[0])} has {x[3]} "
                             f"channels but filter {graph.describe_tensor(ins[1])} expects {w[3]}")
    elif op.type is OpType.FULLY_CONNECTED and len(ins) >= 2:
        x, w = _shape(graph, ins[0]), _shape(graph, ins[1])
        if len(w) == 2 and x and int(np.prod(x)) % w[1]:
            raise ModelError(f"{graph.describe_op(i)}: input {graph.describe_tensor(ins[0])} of shape "
                             f"{list(x)} does not split into rows of {w[1]} for weights "
                             f"{graph.describe_tensor(ins[1])}")
