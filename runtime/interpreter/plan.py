"""The Interpreter's plan of kernels (walked by runtime/ops/steps.py's step loop) and the checks made as ops run."""

from __future__ import annotations

import numpy as np

from runtime.limits import memory
from runtime.ops import opcheck
from runtime.ir.errors import ModelError
from runtime.ir.graph import Graph
from runtime.interpreter.model_state import ModelState
from runtime.ops.opcheck_seq import svdf_int16_tensors
from runtime.ops import Node, select_kernel
from runtime.ops.control import STATEFUL
from runtime.ops.steps import PlanStep, named

__all__ = ["build_plan", "split_constant", "precheck", "delegated_ops"]


def build_plan(graph: Graph, timing_only: bool = False,
               state: ModelState | None = None) -> tuple[list[PlanStep], tuple[int, ...]]:
    """The kernel of every op, and the ops that have none. Timing-only, an op without a kernel
    is costed from its shapes and bytes like any other (a latency question needs no math)
    and stands in with zeros of its declared outputs; otherwise it is refused by name."""
    _check_quantization(graph)
    plan, estimated = [], []
    for i, op in enumerate(graph.ops):
        kernel = select_kernel(op, graph)
        if kernel is None:
            if not timing_only:
                types = "/".join(sorted({graph.tensors[t].dtype.name for t in op.inputs if t >= 0}))
                raise ModelError(f"{graph.describe_op(i)} (version {op.version}, {types}) is not supported "
                                 f"by the testbed's reference kernels (timing-only runs cost it from "
                                 f"its shapes)")
            kernel = _declared_zeros
            estimated.append(i)
        plan.append(PlanStep(kernel, Node(i, op, graph, model_state=state), op.inputs, op.outputs))
    return plan, tuple(estimated)


# Quantized element types the kernels implement: 8-bit values, int32 biases (and int8 weights).
_QUANTIZED_TYPES = {"INT8", "UINT8", "INT32"}


def _check_quantization(graph: Graph) -> None:
    """Reject quantization schemes the kernels do not implement, naming the first tensor that uses one."""
    for t, tensor in enumerate(graph.tensors):
        if tensor.dtype.name == "INT4":
            raise ModelError(f"{graph.describe_tensor(t)} holds packed int4 weights, which the testbed does "
                             f"not support")
        if tensor.quant is None:
            continue
        if tensor.dtype.name not in _QUANTIZED_TYPES and t not in svdf_int16_tensors(graph):
            what = ("int16 activations (16x8 quantization)" if tensor.dtype.name == "INT16"
                    else f"{tensor.dtype.name} quantization")
            raise ModelError(f"{graph.describe_tensor(t)} uses {what}, which the testbed does not support")
        if tensor.dtype.name == "INT32" and not tensor.is_constant:
            raise ModelError(f"{graph.describe_tensor(t)} is an int32-quantized activation, which the "
                             f"testbed does not support")


def _declared_zeros(node: Node, *_inputs):
    """Stands in for an op with no kernel in a timing-only run: zeros of its declared outputs."""
    outs = tuple(np.zeros(node.graph.tensors[t].shape, node.graph.tensors[t].dtype.np) for t in node.op.outputs)
    return outs if len(outs) != 1 else outs[0]


def split_constant(graph: Graph, plan: list[PlanStep]) -> tuple[list[PlanStep], list[PlanStep]]:
    """Ops that read only constants (DEQUANTIZE of fp16 weights, above all) run once when tensors
    are allocated, as TFLite computes and persists them in Prepare; the rest run every invoke.
    Random draws are never folded: LiteRT draws new numbers on each invoke; nor are control flow
    and resource variables."""
    from runtime.ops.registry_misc import DRAWS_RANDOM

    known = {t for t, tensor in enumerate(graph.tensors) if tensor.is_constant and not tensor.is_variable}
    folded, live = [], []
    for step in plan:
        ins = [t for t in step.inputs if t >= 0]
        # Control flow and variables act beyond their outputs: they too run at every invoke.
        if ins and all(t in known for t in ins) and step.node.op.type not in DRAWS_RANDOM | STATEFUL:
            folded.append(step)
            known.update(step.outputs)
        else:
            live.append(step)
    return folded, live


def precheck(graph: Graph, values: list, shapes: list, need: memory.Need, limit: int, node: Node,
             strict: bool) -> None:
    """An op whose output shapes depend on values (a RESHAPE fed a computed shape) or on
    resized inputs: check it on the values it is about to read, and the bytes its outputs and
    scratch will take, before its kernel allocates anything."""
    i = node.index
    shape_of = lambda t: values[t].shape if values[t] is not None else shapes[t]  # noqa: E731
    with named(graph):
        outs, _ = opcheck.check_op(graph, i, shape_of, values.__getitem__)
        op = graph.ops[i]
        for t, shape in zip(op.outputs, outs):
            tensor = graph.tensors[t]
            if strict and shape is not None and shape != tensor.shape and not tensor.is_dynamic:
                raise node.fail(f"output {graph.describe_tensor(t)} is declared {list(tensor.shape)}, "
                                f"but the op computes {list(shape)} from its inputs")
        grown = {t: s for t, s in zip(op.outputs, outs) if s is not None}
        scratch = sum(memory.op_scratch(graph, i, lambda t: grown[t] if t in grown else shape_of(t)))
        before = sum(memory.array_bytes(shape_of(t), graph.tensors[t].dtype.np.itemsize) for t in grown)
        after = sum(memory.array_bytes(s, graph.tensors[t].dtype.np.itemsize) for t, s in grown.items())
        total = need.total - before + after + scratch
        if total > limit:
            raise node.fail(f"its outputs {[list(s) for s in grown.values()]} and scratch would bring the "
                            f"model to {memory.format_bytes(total)}, above the memory limit of "
                            f"{memory.format_bytes(limit)}")


def delegated_ops(simulation) -> list[int]:
    """Op indices the simulation's delegates run (their tensors are held again by the delegate)."""
    return [] if simulation is None else simulation.delegation.delegated_ops()
