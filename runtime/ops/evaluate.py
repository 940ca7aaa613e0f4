"""A plain evaluator: every op of one straight-line graph in order, with the reference kernels, on one host thread.

The quantizers calibrate with it (runtime/zoo/quantize_int8.py): they take only straight-line float
graphs, so they need no delegates, no simulation, no control flow and no resource variables, all
of which live with the interpreter a floor above. It picks kernels as the interpreter does and walks
them with the interpreter's own step loop (runtime/ops/steps.py), so a calibration sees the very
activations `Interpreter.invoke` computes.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np

from runtime.ir.errors import ModelError
from runtime.ir.graph import Graph
from runtime.ops import Node, select_kernel
from runtime.ops.control import STATEFUL
from runtime.ops.registry_misc import DRAWS_RANDOM
from runtime.ops.parallel import set_num_threads
from runtime.ops.steps import PlanStep, run_steps
from runtime.ops.validate import validate_graph

__all__ = ["evaluate"]


def evaluate(graph: Graph, samples: Iterator[Sequence[np.ndarray]]) -> Iterator[list]:
    """For each sample (one array per graph input, in input order), every tensor's value after one
    pass; a graph with control flow, variables or random ops, or an op without a kernel, is refused
    by name before anything runs."""
    validate_graph(graph)
    plan = [_step(graph, i) for i in range(len(graph.ops))]
    set_num_threads(1)
    for arrays in samples:
        values: list = [t.data if t.is_constant else None for t in graph.tensors]
        for t, a in zip(graph.inputs, arrays):
            values[t] = np.asarray(a, graph.tensors[t].dtype.np)
        run_steps(plan, values, graph, check=True)
        yield values


def _step(graph: Graph, i: int) -> PlanStep:
    op = graph.ops[i]
    if op.type in STATEFUL or op.type in DRAWS_RANDOM:
        raise ModelError(f"{graph.describe_op(i)}: the plain evaluator runs straight-line graphs only")
    kernel = select_kernel(op, graph)
    if kernel is None:
        raise ModelError(f"{graph.describe_op(i)} is not supported by the testbed's reference kernels")
    return PlanStep(kernel, Node(i, op, graph), op.inputs, op.outputs)
