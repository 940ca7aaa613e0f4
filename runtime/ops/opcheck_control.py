"""Checks (TFLite's Prepare) for control flow and resource variables, and for the calls between subgraphs."""

from __future__ import annotations

import math

from runtime.ir import options as opt
from runtime.ir.errors import ModelError
from runtime.ir.graph import DType, Graph
from runtime.ir.optypes import OpType

__all__ = ["RULES", "MAX_CALL_DEPTH", "MAX_SUBGRAPH_RUNS", "resource_allowed", "calls", "check_calls",
           "reachable"]

# Subgraphs calling subgraphs calling ...: converted models nest a few levels (a loop in a branch);
# each level is a Python call chain here, so a deep chain is refused before it overflows the stack.
MAX_CALL_DEPTH = 64
# Subgraph runs one pass through a subgraph implies (each IF branch, each loop's cond and body
# once, counted through every level). Real models need tens; a file whose calls fan out level
# after level would need billions before any loop turns twice, and is refused when read.
MAX_SUBGRAPH_RUNS = 100_000

_FIELDS = {
    OpType.IF: ("then_subgraph_index", "else_subgraph_index"),
    OpType.WHILE: ("cond_subgraph_index", "body_subgraph_index"),
    OpType.CALL_ONCE: ("init_subgraph_index",),
}
_HANDLE_TYPES = (DType.RESOURCE, DType.INT32)  # assign_variable.cc takes either as the handle


def _fmt(shape) -> str:
    return str(list(shape))


def resource_allowed(op, t: int) -> bool:
    """RESOURCE tensors (variable handles) are what these ops pass around: VAR_HANDLE makes one,
    READ_VARIABLE and ASSIGN_VARIABLE take one as input 0, IF and WHILE hand them to their
    subgraphs. No other op may read or write one."""
    if op.type is OpType.VAR_HANDLE:
        return t in op.outputs
    if op.type in (OpType.READ_VARIABLE, OpType.ASSIGN_VARIABLE):
        return bool(op.inputs) and op.inputs[0] == t and t not in op.inputs[1:] and t not in op.outputs
    if op.type is OpType.IF:
        return t not in op.inputs[:1]
    return op.type is OpType.WHILE


def calls(op) -> list[tuple[str, int]]:
    """(options field, subgraph index) of each subgraph the op runs; [] for other ops or options
    of another type (the op's check names those)."""
    fields = _FIELDS.get(op.type)
    o = opt.options_or_default(op.type.name, op.options)
    if not fields or type(o) is not opt.FOR_OP[op.type.name]:
        return []
    return [(f, getattr(o, f)) for f in fields]


def reachable(model: Graph) -> list[int]:
    """The subgraphs the main graph may run, through its control flow, in index order. Others
    are entry points of other signatures (a training step, a save): TFLite prepares those only
    when their signature runs, so their ops are neither checked nor given kernels here."""
    seen, todo = {0}, [0]
    while todo:
        for op in model.subgraph(todo.pop()).ops:
            for _, k in calls(op):
                if k not in seen and 0 <= k <= len(model.subgraphs):
                    seen.add(k)
                    todo.append(k)
    return sorted(seen)


def check_calls(model: Graph) -> None:
    """Every subgraph index a control-flow op names exists; no subgraph runs itself, directly or
    through others (TFLite would recurse until its stack gives out); calls nest at most
    MAX_CALL_DEPTH deep and fan out to at most MAX_SUBGRAPH_RUNS runs."""
    count = len(model.subgraphs) + 1
    edges: list[list[tuple[int, int]]] = []
    for k in range(count):
        g = model.subgraph(k)
        out = []
        for i, op in enumerate(g.ops):
            for field, j in calls(op):
                if not 0 <= j < count:
                    raise ModelError(f"{_where(model, k)}{g.describe_op(i)}: options.{field} is {j}, but the model "
                                     f"has {count} subgraphs")
                out.append((i, j))
        edges.append(out)
    depth, runs = [0] * count, [1] * count
    for k in _callees_first(model, edges):
        depth[k] = max((1 + depth[j] for _, j in edges[k]), default=0)
        runs[k] = 1 + sum(runs[j] for _, j in edges[k])
        if depth[k] > MAX_CALL_DEPTH:
            raise ModelError(f"{model.describe_subgraph(k)} starts a chain of {depth[k]} nested subgraph calls; "
                             f"at most {MAX_CALL_DEPTH} are supported")
        if runs[k] > MAX_SUBGRAPH_RUNS:
            raise ModelError(f"{model.describe_subgraph(k)} fans out to {runs[k]} subgraph runs through its nested "
                             f"calls; at most {MAX_SUBGRAPH_RUNS} are supported")


def _where(model: Graph, k: int) -> str:
    return f"{model.describe_subgraph(k)}: " if k else ""


def _callees_first(model: Graph, edges: list[list[tuple[int, int]]]) -> list[int]:
    """Every subgraph after the ones it calls, by an iterative depth-first walk (no Python
    recursion: a damaged file may chain thousands); a call back into the walk is recursion."""
    state = [0] * len(edges)             # 0 not seen, 1 on the current path, 2 done
    order = []
    for root in range(len(edges)):
        if state[root]:
            continue
        stack, state[root] = [(root, 0)], 1
        while stack:
            k, n = stack[-1]
            if n < len(edges[k]):
                stack[-1] = (k, n + 1)
                i, j = edges[k][n]
                if state[j] == 1:
                    raise ModelError(_recursion(model, [s for s, _ in stack], k, i, j))
                if not state[j]:
                    state[j] = 1
                    stack.append((j, 0))
                continue
            stack.pop()
            state[k] = 2
            order.append(k)
    return order


def _recursion(model: Graph, path: list[int], k: int, i: int, j: int) -> str:
    op = f"{_where(model, k)}{model.subgraph(k).describe_op(i)} runs {model.describe_subgraph(j)}"
    if j == k:
        return f"{op}, the subgraph it is in (recursion)"
    chain = " -> ".join(model.describe_subgraph(s) for s in path[path.index(j):] + [j])
    return f"{op}, which leads back to it: {chain} (recursion)"


# -- rules: each returns the op's output shapes (None where only the run can tell) ---------------


def _subgraph(c, field: str) -> Graph:
    k = getattr(c.opts, field)
    try:
        return c.model.subgraph(k)
    except ModelError as exc:
        raise c.fail(f"options.{field}: {exc}") from None


def _label(c, field: str) -> str:
    return c.model.describe_subgraph(getattr(c.opts, field))


def _all_present(c) -> None:
    for k, t in enumerate(c.op.inputs):
        if t < 0:
            raise c.fail(f"input {k} is absent; every input of {c.op.type.name} is passed on")


def _signature(c, sub: Graph, field: str, ins: list[int], outs: list[int] | None) -> None:
    """The called subgraph takes the op's values `ins` (tensor indices) one for one, of the same
    types, and gives back `outs` (None: not checked here)."""
    label = _label(c, field)
    if len(sub.inputs) != len(ins):
        raise c.fail(f"passes {len(ins)} values to {label} (options.{field}), which takes {len(sub.inputs)}")
    for n, (t, s) in enumerate(zip(ins, sub.inputs)):
        mine, theirs = c.graph.tensors[t].dtype, sub.tensors[s].dtype
        if mine is not theirs:
            raise c.fail(f"value {n} {c.graph.describe_tensor(t)} is {mine.name}, but input {n} "
                         f"{sub.describe_tensor(s)} of {label} is {theirs.name}")
    if outs is None:
        return
    if len(sub.outputs) != len(outs):
        raise c.fail(f"has {len(outs)} outputs, but {label} (options.{field}) gives {len(sub.outputs)}")
    for n, (t, s) in enumerate(zip(outs, sub.outputs)):
        mine, theirs = c.graph.tensors[t].dtype, sub.tensors[s].dtype
        if mine is not theirs:
            raise c.fail(f"output {n} {c.graph.describe_tensor(t)} is {mine.name}, but output {n} "
                         f"{sub.describe_tensor(s)} of {label} is {theirs.name}")


def _passes_shapes(c, sub: Graph, field: str, ins: list[int]) -> bool:
    """Whether the op's values have the shapes the subgraph declares for its inputs (its own
    checks hold). If not, TFLite resizes the subgraph's inputs and prepares it again: its ops are
    checked at the shapes passed, and only the run tells the outputs' shapes."""
    shapes = {s: tuple(c.shape_of(t)) for t, s in zip(ins, sub.inputs)}
    if all(shape == sub.tensors[s].shape for s, shape in shapes.items()):
        return True
    try:
        c.check_subgraph(sub, shapes)
    except ModelError as exc:
        raise c.fail(f"at the shapes it passes, {_label(c, field)} (options.{field}) fails: {exc}") from None
    return False


def _static(sub: Graph, t: int):
    tensor = sub.tensors[t]
    return None if tensor.is_dynamic else tensor.shape


def _if(c):
    """if.cc Prepare: a one-element bool condition, then both branches take the other inputs
    (same count and types) and give the op's outputs."""
    if not c.op.inputs:
        raise c.fail("has no inputs; the condition comes first")
    _all_present(c)
    cond = c.tensor(0)
    if cond.dtype is not DType.BOOL or math.prod(c.shape(0)) != 1:
        raise c.fail(f"{c.name(0)} (the condition) is {cond.dtype.name} of shape {_fmt(c.shape(0))}; one bool expected")
    ins, outs = list(c.op.inputs[1:]), list(c.op.outputs)
    shapes = None
    for field in ("then_subgraph_index", "else_subgraph_index"):
        sub = _subgraph(c, field)
        _signature(c, sub, field, ins, outs)
        mine = [_static(sub, t) for t in sub.outputs] if _passes_shapes(c, sub, field, ins) else [None] * len(outs)
        shapes = mine if shapes is None else [a if a == b else None for a, b in zip(shapes, mine)]
    return shapes


def _while(c):
    """while.cc Prepare: as many outputs as inputs; cond and body are different subgraphs; cond
    takes the loop values and answers one bool; body takes them and gives the next ones, of the
    same types."""
    _all_present(c)
    n = len(c.op.inputs)
    if len(c.op.outputs) != n:
        raise c.fail(f"has {n} inputs but {len(c.op.outputs)} outputs; a loop gives back each value it takes")
    if c.opts.cond_subgraph_index == c.opts.body_subgraph_index:
        raise c.fail(f"options.cond_subgraph_index and options.body_subgraph_index are both "
                     f"{c.opts.body_subgraph_index}; they must differ")
    ins, outs = list(c.op.inputs), list(c.op.outputs)
    cond, body = _subgraph(c, "cond_subgraph_index"), _subgraph(c, "body_subgraph_index")
    _signature(c, cond, "cond_subgraph_index", ins, None)
    if len(cond.outputs) != 1:
        raise c.fail(f"{_label(c, 'cond_subgraph_index')} (options.cond_subgraph_index) gives "
                     f"{len(cond.outputs)} outputs; one bool expected")
    flag = cond.tensors[cond.outputs[0]]
    if flag.dtype is not DType.BOOL or (not flag.is_dynamic and flag.shape not in ((), (1,))):
        raise c.fail(f"output {cond.describe_tensor(cond.outputs[0])} of {_label(c, 'cond_subgraph_index')} is "
                     f"{flag.dtype.name} of shape {_fmt(flag.shape)}; one bool expected")
    _signature(c, body, "body_subgraph_index", ins, outs)
    for n_, (a, b) in enumerate(zip(body.inputs, body.outputs)):
        if body.tensors[a].dtype is not body.tensors[b].dtype:
            raise c.fail(f"{_label(c, 'body_subgraph_index')} takes value {n_} as {body.tensors[a].dtype.name} "
                         f"but gives it back as {body.tensors[b].dtype.name}")
    # The loop keeps its shapes when the body gives back what it takes; otherwise only the run tells.
    _passes_shapes(c, cond, "cond_subgraph_index", ins)
    steady = _passes_shapes(c, body, "body_subgraph_index", ins) and all(
        _static(body, b) == body.tensors[a].shape for a, b in zip(body.inputs, body.outputs))
    return [tuple(c.shape_of(t)) if steady else None for t in ins]


def _call_once(c):
    """call_once.cc Prepare: no inputs, no outputs; the init subgraph takes and gives nothing."""
    if c.op.inputs or c.op.outputs:
        raise c.fail(f"has {len(c.op.inputs)} inputs and {len(c.op.outputs)} outputs; CALL_ONCE has none")
    sub = _subgraph(c, "init_subgraph_index")
    if sub.inputs or sub.outputs:
        raise c.fail(f"{_label(c, 'init_subgraph_index')} (options.init_subgraph_index) has {len(sub.inputs)} "
                     f"inputs and {len(sub.outputs)} outputs; an init subgraph has none")
    return []


def _handle(c, k: int) -> None:
    """A variable handle: RESOURCE (or INT32) with one element (read_variable.cc, assign_variable.cc)."""
    if c.tensor(k).dtype not in _HANDLE_TYPES:
        raise c.fail(f"{c.name(k)} (the variable handle) is {c.tensor(k).dtype.name}; RESOURCE or INT32 expected")
    if math.prod(c.shape(k)) != 1:
        raise c.fail(f"{c.name(k)} (the variable handle) has shape {_fmt(c.shape(k))}; one element expected")


def _var_handle(c):
    if c.op.inputs or len(c.op.outputs) != 1:
        raise c.fail(f"has {len(c.op.inputs)} inputs and {len(c.op.outputs)} outputs; 0 and 1 expected")
    out = c.out_tensor()
    if out.dtype not in _HANDLE_TYPES or math.prod(out.shape) != 1:
        raise c.fail(f"{c.out_name()} is {out.dtype.name} of shape {_fmt(out.shape)}; one RESOURCE (or INT32) "
                     f"handle expected")
    return [out.shape]


def _read_variable(c):
    """The output takes the variable's shape when it runs (read_variable.cc makes it dynamic)."""
    if len(c.op.inputs) != 1 or len(c.op.outputs) != 1:
        raise c.fail(f"has {len(c.op.inputs)} inputs and {len(c.op.outputs)} outputs; 1 and 1 expected")
    _all_present(c)
    _handle(c, 0)
    if c.out_tensor().dtype in (DType.RESOURCE, DType.VARIANT, DType.STRING):
        raise c.fail(f"{c.out_name()} is {c.out_tensor().dtype.name}, a type the kernels do not compute on")
    return [None]


def _assign_variable(c):
    if len(c.op.inputs) != 2 or c.op.outputs:
        raise c.fail(f"has {len(c.op.inputs)} inputs and {len(c.op.outputs)} outputs; 2 and 0 expected")
    _all_present(c)
    _handle(c, 0)
    if c.tensor(1).dtype in (DType.RESOURCE, DType.VARIANT, DType.STRING):
        raise c.fail(f"{c.name(1)} (the value) is {c.tensor(1).dtype.name}, a type the kernels do not compute on")
    return []


RULES = {
    OpType.IF: _if, OpType.WHILE: _while, OpType.CALL_ONCE: _call_once, OpType.VAR_HANDLE: _var_handle,
    OpType.READ_VARIABLE: _read_variable, OpType.ASSIGN_VARIABLE: _assign_variable,
}
