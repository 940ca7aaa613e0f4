"""Control-flow (IF, WHILE, CALL_ONCE) and resource-variable (VAR_HANDLE, READ/ASSIGN_VARIABLE) kernels."""

from __future__ import annotations

import numpy as np

from runtime.ops.base import Kernel, Node
from runtime.ir.optypes import OpType

__all__ = ["KERNELS", "STATEFUL", "if_", "while_", "call_once", "var_handle", "read_variable", "assign_variable"]


def _state(node: Node):
    """The interpreter's shared state; a node built outside an interpreter has none."""
    if node.model_state is None:
        raise node.fail("runs other subgraphs or resource variables, which only an interpreter holds")
    return node.model_state


def _entered(node: Node):
    """The state, told that a control-flow op starts (loop iterations are counted per op of the main graph)."""
    return _state(node).enter(node)


def _flag(node: Node, value: np.ndarray, what: str) -> bool:
    """A bool tensor of one element (tflite/kernels/if.cc Prepare, while.cc CheckCondOutput)."""
    value = np.asarray(value)
    if value.dtype != np.bool_ or value.size != 1:
        raise node.fail(f"{what} is {value.dtype} of shape {list(value.shape)}; one bool expected")
    return bool(value.reshape(-1)[0])


def if_(node: Node, cond, *inputs):
    """if.cc: the condition picks the then or else subgraph, which runs on the other inputs; its
    outputs are the op's."""
    o = node.options
    branch = o.then_subgraph_index if _flag(node, cond, "the condition") else o.else_subgraph_index
    return _entered(node).run(branch, inputs, node)


def while_(node: Node, *inputs):
    """while.cc: run the cond subgraph on the loop values; while it answers true, the body subgraph
    turns them into the next values. A body never run leaves the inputs as outputs. Unlike
    TFLite, the iterations are bounded (the interpreter's while_limit): a model must not hang."""
    o, state = node.options, _entered(node)
    values, done = tuple(inputs), 0
    while _flag(node, state.run(o.cond_subgraph_index, values, node)[0], "the cond subgraph's output"):
        state.spend(node)
        values = state.run(o.body_subgraph_index, values, node)
        done += 1
    # The body's outputs come back as copies already; inputs passed through are copied as TFLite does.
    return values if done else tuple(np.array(v, copy=True) for v in values)


def call_once(node: Node):
    """call_once.cc: the init subgraph runs at the first invoke of the interpreter's life (it
    sets up variables and tables); afterwards the op does nothing."""
    _entered(node).call_once(node.options.init_subgraph_index, node)
    return ()


def var_handle(node: Node):
    """var_handle.cc: a resource id per (container, shared_name), the same for every VAR_HANDLE
    naming that pair, in every subgraph of the model."""
    o = node.options
    rid = _state(node).resource_id(o.container, o.shared_name)
    out = node.output(0)
    return np.full(out.shape, rid, out.dtype.np)


def _resource(node: Node, handle) -> int:
    handle = np.asarray(handle)
    if handle.size != 1:
        raise node.fail(f"the resource handle has {handle.size} elements; one expected")
    try:
        return int(handle.reshape(-1)[0])
    except (TypeError, ValueError):
        raise node.fail("the resource handle holds no resource id") from None


def read_variable(node: Node, handle):
    """read_variable.cc: the variable's value, as last assigned; reading one never assigned fails."""
    value = _state(node).read(_resource(node, handle), node)
    out = node.output(0)
    if value.dtype != out.dtype.np:
        raise node.fail(f"the variable holds {value.dtype}, the output is declared {out.dtype.name}")
    return np.array(value, copy=True)


def assign_variable(node: Node, handle, value):
    """assign_variable.cc: the variable takes a copy of the value (its shape and type too)."""
    _state(node).assign(_resource(node, handle), np.array(value, copy=True))
    return ()


KERNELS: dict[OpType, Kernel] = {
    OpType.IF: if_, OpType.WHILE: while_, OpType.CALL_ONCE: call_once, OpType.VAR_HANDLE: var_handle,
    OpType.READ_VARIABLE: read_variable, OpType.ASSIGN_VARIABLE: assign_variable,
}

# Ops with effects beyond their outputs (they run subgraphs or touch variables): never folded into
# allocation however constant their inputs, never handed to a delegate.
STATEFUL = frozenset(KERNELS)
