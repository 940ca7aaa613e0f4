"""An interpreter's state across a model's subgraphs (plans, resource variables, CALL_ONCE) and their runner."""

from __future__ import annotations

import math
from collections import Counter
from typing import Callable, Sequence

import numpy as np

from runtime.limits import memory
from runtime.ops import opcheck
from runtime.ir.errors import ModelError
from runtime.ir.graph import Graph, printable
from runtime.ops.opcheck_control import calls, reachable
from runtime.ir.options import options_or_default
from runtime.ir.optypes import OpType
from runtime.ops.validate import ModelChecks

__all__ = ["ModelState", "WHILE_LIMIT"]

# Iterations the WHILE loops under one op of the main graph may run (a loop's own and those of
# loops nested in its subgraphs) before they are stopped with a ModelError. TFLite has no bound;
# a tool must have one, or a loop whose condition never turns false hangs it. Real loops
# (sequence steps, decoding, non-max suppression) run far fewer; an iteration of the smallest
# loop takes some 50 microseconds here, so reaching the limit takes about a minute.
WHILE_LIMIT = 1_000_000


class ModelState:
    """One interpreter's view of the model beyond subgraph 0.

    `checks`: the model's op checks, made once as the interpreter's plan is built;
    `build(graph, state)` makes a subgraph's plan (the interpreter's own, kernels from select_kernel);
    `run_steps(plan, values, graph, check, guard, precheck)` walks a plan as the interpreter walks
    subgraph 0's; `room()` is what the memory limit leaves after the main graph's plan."""

    def __init__(self, model: Graph, checks: ModelChecks, build: Callable[[Graph, "ModelState"], list],
                 run_steps: Callable, room: Callable[[], int], while_limit: int | None = None):
        self.model, self._run_steps, self._room = model, run_steps, room
        self.while_limit = WHILE_LIMIT if while_limit is None else _limit(while_limit)
        self._ids: dict[tuple[str, str], int] = {}
        self._names: dict[int, tuple[str, str]] = {}
        self._variables: dict[int, np.ndarray] = {}
        self._initialized: set[int] = set()
        self.ran: Counter = Counter()     # (subgraph, op, shapes) -> times run since last taken
        self.recording = False            # whether `ran` is kept (a simulation charges those ops)
        self._spent = 0                   # WHILE iterations under the current op of the main graph
        # The subgraphs the main graph may run; the others (other signatures) get no plan.
        runs = reachable(model)[1:]
        count = len(model.subgraphs) + 1
        self._plans: list = [None] * count
        self._checked: list = [None] * count
        self._values: list[list | None] = [None] * count
        for k in runs:
            sub = model.subgraph(k)
            self._plans[k] = _named(model, k, lambda: build(sub, self))
            self._checked[k] = checks.of(k)
        self._need = sum(memory.plan_need(model.subgraph(k), self._checked[k].shapes).total for k in runs)
        self._name_resources()

    def check_memory(self) -> None:
        """The other subgraphs' bytes (constants, activations, scratch: TFLite gives each an arena)
        fit in what the memory limit leaves after the main graph's plan."""
        if self._need and self._need > self._room():
            raise ModelError(f"the model's other subgraphs need {memory.format_bytes(self._need)}, more than the "
                             f"{memory.format_bytes(max(self._room(), 0))} the memory limit leaves after the "
                             f"main graph")

    # -- resource variables (tflite/experimental/resource) -----------------------------------

    def _name_resources(self) -> None:
        """Resource ids in the order TFLite's VAR_HANDLE Init hands them out: subgraph by
        subgraph, op by op, a new id for each new (container, shared_name)."""
        for g in (self.model, *self.model.subgraphs):
            for op in g.ops:
                if op.type is OpType.VAR_HANDLE:
                    o = options_or_default(op.type.name, op.options)
                    self.resource_id(o.container, o.shared_name)

    def resource_id(self, container: str, shared_name: str) -> int:
        key = (container, shared_name)
        if key not in self._ids:
            self._ids[key] = len(self._ids)
            self._names[self._ids[key]] = key
        return self._ids[key]

    def read(self, rid: int, node) -> np.ndarray:
        if rid not in self._variables:
            raise node.fail(f"reads resource variable {self._describe(rid)} before any ASSIGN_VARIABLE gave it "
                            f"a value")
        return self._variables[rid]

    def assign(self, rid: int, value: np.ndarray) -> None:
        self._variables[rid] = value

    def _describe(self, rid: int) -> str:
        container, name = self._names.get(rid, ("", f"#{rid}"))
        return f"'{printable(container)}/{printable(name)}'" if container else f"'{printable(name)}'"

    def save(self) -> tuple:
        """The variables and CALL_ONCE state, to put back after a run that must leave no trace."""
        return dict(self._variables), set(self._initialized)

    def restore(self, saved: tuple) -> None:
        self._variables, self._initialized = dict(saved[0]), set(saved[1])
        self.ran.clear()

    def reset_variable_tensors(self) -> None:
        """Variable tensors of the other subgraphs back to their initial values, as LiteRT's
        ResetVariableTensors does for every subgraph. Resource variables and CALL_ONCE keep their
        state: LiteRT's reset_all_variables leaves them alone too (checked against LiteRT 2.3)."""
        for k, values in enumerate(self._values):
            if values is not None:
                _initial_variables(self.model.subgraph(k), values)

    # -- running subgraphs ---------------------------------------------------------------------

    def call_once(self, k: int, caller) -> None:
        """Run init subgraph k unless it ran already in this interpreter's life."""
        if k not in self._initialized:
            self.run(k, (), caller)
            self._initialized.add(k)

    def run(self, k: int, inputs: Sequence[np.ndarray], caller) -> tuple[np.ndarray, ...]:
        """Subgraph k on `inputs`; copies of its outputs (TFLite copies between subgraphs too).
        A fault inside names the calling op, the subgraph, and the op in it."""
        sub = self.model.subgraph(k)
        if len(inputs) != len(sub.inputs):
            raise caller.fail(f"passes {len(inputs)} values to {self.model.describe_subgraph(k)}, which takes "
                              f"{len(sub.inputs)}")
        values = self._arena(k)
        for t, value in zip(sub.inputs, inputs):
            values[t] = value
        # Inputs of the declared shapes: the load-time checks hold. Others (TFLite resizes a
        # subgraph's inputs to what it is given): every op is checked as it runs.
        static = all(np.shape(v) == sub.tensors[t].shape for t, v in zip(sub.inputs, inputs))
        guard = self._checked[k].deferred if static else frozenset(range(len(sub.ops)))
        try:
            self._run_steps(self._plans[k], values, sub, static, guard,
                            lambda node, strict: self._precheck(k, values, node, strict))
            outputs = tuple(np.array(values[t], copy=True) for t in sub.outputs)
            if self.recording:
                self._record(k, values)
        except ModelError as exc:
            raise caller.fail(f"{self.model.describe_subgraph(k)}: {_unlabelled(exc, sub)}") from None
        finally:
            _release(sub, values)
        return outputs

    def enter(self, node) -> "ModelState":
        """A control-flow op starts; one of the main graph starts a fresh count of loop iterations."""
        if node.graph is self.model:
            self._spent = 0
        return self

    def spend(self, node) -> None:
        """One more WHILE iteration; past while_limit (counted under one op of the main graph, nested
        loops included, so loops in loops stay bounded too) the loop stops with a ModelError."""
        self._spent += 1
        if self._spent > self.while_limit:
            raise node.fail(f"its condition still holds after {self.while_limit} loop iterations (its own and "
                            f"those of loops around or inside it), the interpreter's while_limit")

    def take_ran(self) -> Counter:
        """The subgraph ops run since the last call, with the shapes they ran at (for costing)."""
        ran, self.ran = self.ran, Counter()
        return ran

    def _arena(self, k: int) -> list:
        """Subgraph k's tensors, kept across runs as TFLite keeps a subgraph's: constants, and
        variable tensors with their state."""
        if self._values[k] is None:
            sub = self.model.subgraph(k)
            values = [t.data if t.is_constant else None for t in sub.tensors]
            _initial_variables(sub, values)
            self._values[k] = values
        return self._values[k]

    def _record(self, k: int, values: list) -> None:
        sub = self.model.subgraph(k)
        for j, op in enumerate(sub.ops):
            shapes = tuple((t, np.shape(values[t])) for t in (*op.inputs, *op.outputs) if t >= 0)
            self.ran[(k, j, shapes)] += 1

    def _precheck(self, k: int, values: list, node, strict: bool) -> None:
        """The interpreter's check before an op whose shapes only the run tells: shapes from the
        values it reads, and its outputs' and scratch bytes held to the memory limit."""
        sub, i = self.model.subgraph(k), node.index
        shape_of = lambda t: values[t].shape if values[t] is not None else sub.tensors[t].shape  # noqa: E731
        outs, _ = opcheck.check_op(sub, i, shape_of, values.__getitem__, model=self.model)
        for t, shape in zip(sub.ops[i].outputs, outs):
            tensor = sub.tensors[t]
            if strict and shape is not None and shape != tensor.shape and not tensor.is_dynamic:
                raise node.fail(f"output {sub.describe_tensor(t)} is declared {list(tensor.shape)}, but the op "
                                f"computes {list(shape)} from its inputs")
        grown = {t: s for t, s in zip(sub.ops[i].outputs, outs) if s is not None}
        scratch = sum(memory.op_scratch(sub, i, lambda t: grown[t] if t in grown else shape_of(t)))
        total = scratch + sum(math.prod(s) * sub.tensors[t].dtype.np.itemsize for t, s in grown.items())
        room = self._room() - self._need
        if total > room:
            raise node.fail(f"its outputs {[list(s) for s in grown.values()]} and scratch take "
                            f"{memory.format_bytes(total)}, more than the {memory.format_bytes(max(room, 0))} "
                            f"the memory limit leaves")


def _limit(limit) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"while_limit should be an int >= 0, got {limit!r}")
    return limit


def _named(model: Graph, k: int, make: Callable):
    """A fault found building subgraph k's plan, naming the subgraph."""
    try:
        return make()
    except ModelError as exc:
        raise ModelError(f"{model.describe_subgraph(k)}: {_unlabelled(exc, model.subgraph(k))}") from None


def _unlabelled(exc: ModelError, graph: Graph) -> str:
    """A message without the file in front (the outermost caller puts it back once)."""
    text = str(exc)
    return text[len(graph.label) + 2:] if text.startswith(f"{graph.label}: ") else text


def _initial_variables(graph: Graph, values: list) -> None:
    for t, tensor in enumerate(graph.tensors):
        if tensor.is_variable:
            values[t] = (np.array(tensor.data, copy=True) if tensor.is_constant
                         else np.zeros(tensor.shape, tensor.dtype.np))


def _release(graph: Graph, values: list) -> None:
    """Intermediates go once a run is over (TFLite releases a subgraph's arena after WHILE and
    CALL_ONCE); constants and variable tensors stay."""
    for t, tensor in enumerate(graph.tensors):
        if not tensor.is_constant and not tensor.is_variable:
            values[t] = None


def one_pass(model: Graph, op, first: bool) -> Counter:
    """What a control-flow op runs when its math is skipped (timing-only), in ModelState.ran's
    form. Nothing then tells which branch an IF takes or how often a WHILE turns, so this is one
    pass at the declared shapes: an IF's then branch, a WHILE's cond and body once, a CALL_ONCE's
    init subgraph at the first invoke only; control flow inside counted the same way."""
    total: Counter = Counter()
    for field, k in calls(op):
        if field == "else_subgraph_index" or (field == "init_subgraph_index" and not first):
            continue
        sub = model.subgraph(k)
        for j, inner in enumerate(sub.ops):
            total[(k, j, tuple((t, sub.tensors[t].shape) for t in (*inner.inputs, *inner.outputs) if t >= 0))] += 1
            total.update(one_pass(model, inner, first))
    return total
