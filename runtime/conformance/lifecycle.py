"""Lifecycle cases of the conformance kit: the delegate under test made to fail at one callback."""

from __future__ import annotations

import enum
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from delegates import contract
from delegates.api import Delegate, DelegateKernel, Support
from runtime.ir.errors import DelegateError
from runtime.ir.graph import Graph, Op

__all__ = ["FailAt", "FaultyDelegate", "lifecycle_case"]


class FailAt(enum.Enum):
    """The callback that raises. The testbed has no delegate-level Initialize (SimpleDelegate's),
    so the first callback is is_node_supported; create_kernel is the kernel's Init."""

    IS_NODE_SUPPORTED = "is_node_supported"
    CREATE_KERNEL = "create_kernel"
    PREPARE = "prepare"
    INVOKE = "invoke"


def _injected(at: FailAt) -> DelegateError:
    return DelegateError(f"conformance: failure injected in {at.value}")


# The callbacks the wrappers fail in; they forward every other declared hook.
_FAILING = frozenset({FailAt.IS_NODE_SUPPORTED.value, FailAt.CREATE_KERNEL.value, FailAt.PREPARE.value,
                      FailAt.INVOKE.value})


def _adopt(wrapper: Any, inner: Any, owner: type) -> None:
    """Every hook the API declares on `owner`, except the failing callbacks, becomes the wrapped
    object's own (its bound methods, its attributes' values), so the framework sees the real one."""
    for hook in contract.hooks(owner):
        if hook.name not in _FAILING:
            setattr(wrapper, hook.name, hook.of(inner))


class _FaultyKernel(DelegateKernel):
    """The real kernel, except that `at` raises; every other hook (mode, unit) is the real one's."""

    def __init__(self, inner: DelegateKernel, at: FailAt):
        super().__init__(inner.partition)
        self.inner, self.at = inner, at
        _adopt(self, inner, DelegateKernel)

    def prepare(self) -> None:
        if self.at is FailAt.PREPARE:
            raise _injected(self.at)
        self.inner.prepare()

    def invoke(self, inputs: Mapping[int, np.ndarray]) -> dict[int, np.ndarray]:
        if self.at is FailAt.INVOKE:
            raise _injected(self.at)
        return self.inner.invoke(inputs)


class FaultyDelegate(Delegate):
    """Wraps a delegate and fails at one callback; its name, unit, options and every other declared
    hook are the wrapped delegate's, so the framework treats it exactly as the real one."""

    def __init__(self, inner: Delegate, at: FailAt):
        super().__init__(inner.options)
        self.inner, self.at = inner, at
        _adopt(self, inner, Delegate)

    def is_node_supported(self, op: Op, graph: Graph) -> Support:
        if self.at is FailAt.IS_NODE_SUPPORTED:
            raise _injected(self.at)
        return self.inner.is_node_supported(op, graph)

    def create_kernel(self, partition) -> DelegateKernel:
        if self.at is FailAt.CREATE_KERNEL:
            raise _injected(self.at)
        return _FaultyKernel(self.inner.create_kernel(partition), self.at)


def _one(graph: Graph, inputs: Sequence[np.ndarray], reference: Sequence[np.ndarray],
         faulty: FaultyDelegate, device: Any) -> str:
    """'' when the failure is handled as TFLite handles it, else what went wrong."""
    from runtime.interpreter.api import Interpreter

    it = Interpreter(graph=graph, experimental_delegates=[faulty], device=device, num_threads=1)
    delegation = it.simulation.delegation
    late = faulty.at is FailAt.INVOKE
    if late and delegation.restored:
        return f"the delegate failed before invoke: {delegation.per_delegate[-1].error}"
    if not late and not delegation.restored:
        return "apply_delegates did not restore the CPU plan"
    it.allocate_tensors()
    for t, x in zip(graph.inputs, inputs):
        it.set_tensor(t, x)
    if late:
        it.invoke_with_cpu_fallback()
        if not it.simulation.delegation.restored:
            return "invoke_with_cpu_fallback did not fall back to the CPU"
    else:
        it.invoke()
    for t, want in zip(graph.outputs, reference):
        if not np.array_equal(it.get_tensor(t), want):
            return f"output {graph.describe_tensor(t)} differs from the CPU reference after the fallback"
    return ""


def lifecycle_case(factory: Callable[[], Delegate], at: FailAt, graph: Graph, inputs: Sequence[np.ndarray],
                   reference: Sequence[np.ndarray], device: Any) -> str:
    """The delegate made to fail at `at` on a graph it takes; '' when handled, else the problem.

    A failure in is_node_supported, create_kernel or prepare must leave the CPU plan
    (delegation.restored) and CPU outputs; one in invoke must be recovered by
    invoke_with_cpu_fallback()."""
    try:
        return _one(graph, inputs, reference, FaultyDelegate(factory(), at), device)
    except Exception as exc:  # anything escaping the framework is the finding
        return f"{type(exc).__name__}: {exc}"
