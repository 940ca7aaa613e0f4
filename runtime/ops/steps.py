"""The plan's step and the one step loop that runs it, for the Interpreter and the plain evaluator alike."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from runtime.ir.errors import ModelError
from runtime.ir.graph import Graph
from runtime.ops.base import Kernel, Node

__all__ = ["PlanStep", "run_steps", "named"]


@dataclass(frozen=True)
class PlanStep:
    """One op of a plan: the kernel chosen for it when the plan was built, the Node it sees, and
    the tensors it reads (-1: an omitted optional input) and writes."""

    kernel: Kernel
    node: Node
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]

    @property
    def index(self) -> int:
        return self.node.index


# The check of a guarded op right before it runs: (node, strict shapes).
Precheck = Callable[[Node, bool], None]


def run_steps(plan: Iterable[PlanStep], values: list, graph: Graph, check: bool,
              guard: Sequence[int] | frozenset = frozenset(), precheck: Precheck | None = None) -> None:
    """Walk plan steps over one subgraph's tensor values: the main graph's, or one a control-flow
    op runs (runtime/interpreter/model_state.py). `check`: outputs must have their declared shapes; `guard`:
    ops checked by `precheck(node, check)` right before they run."""
    for step in plan:
        node = step.node
        if guard and node.index in guard:
            precheck(node, check)
        args = [values[t] if t >= 0 else None for t in step.inputs]
        while args and args[-1] is None:
            args.pop()
        try:
            result = step.kernel(node, *args)
        except ModelError as exc:
            raise _prefixed(exc, graph) from None
        except (ArithmeticError, LookupError, ValueError, TypeError, AttributeError) as exc:
            raise _prefixed(node.fail(f"{type(exc).__name__}: {exc}"), graph) from exc
        if not isinstance(result, tuple):
            result = (result,)
        if len(result) != len(step.outputs):
            raise _prefixed(node.fail(f"kernel produced {len(result)} outputs, the op declares "
                                      f"{len(step.outputs)}"), graph)
        try:
            for t, value in zip(step.outputs, result):
                values[t] = _conform(node, t, np.asarray(value), check)
        except ModelError as exc:
            raise _prefixed(exc, graph) from None


def _conform(node: Node, t: int, value: np.ndarray, check_shape: bool) -> np.ndarray:
    tensor = node.graph.tensors[t]
    if value.dtype != tensor.dtype.np:
        raise node.fail(f"kernel produced {value.dtype} for {node.graph.describe_tensor(t)} "
                        f"declared {tensor.dtype.name}")
    if check_shape and value.shape != tensor.shape and not tensor.is_dynamic:
        raise node.fail(f"kernel produced shape {list(value.shape)} for {node.graph.describe_tensor(t)} "
                        f"declared {list(tensor.shape)}")
    return value


@contextlib.contextmanager
def named(graph: Graph):
    """Re-raise a ModelError raised inside the block with the model's file in front."""
    try:
        yield
    except ModelError as exc:
        labelled = _prefixed(exc, graph)
        if labelled is exc:
            raise
        raise labelled from None


def _prefixed(exc: ModelError, graph: Graph) -> ModelError:
    """The error naming the model's file first, as the reader's errors do."""
    label = graph.label
    text = str(exc)
    return exc if text.startswith(f"{label}:") else ModelError(f"{label}: {text}")
