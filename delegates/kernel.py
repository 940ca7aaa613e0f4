"""The kernel of the built-in delegates: a partition's ops run with the runtime's kernels in a unit's numeric mode."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from delegates import rulekit as rk
from delegates.api import DelegateKernel
from runtime.ir.errors import DelegateError
from runtime.ir.graph import Graph
from runtime.ops import Node, select_kernel
from sim import numerics as nm
from sim.numerics import NumericMode

__all__ = ["UnitKernel"]

_VIEWS = (NumericMode.FLOAT32_VIEW, NumericMode.FLOAT16)


def _identity(node: Node, x: np.ndarray) -> np.ndarray:
    return x


class UnitKernel(DelegateKernel):
    """Runs a delegated partition's real math as the unit would: float16, a float view of an
    8-bit model, integer kernels, or each op in its own types (mixed). Timing is charged
    separately by the simulator."""

    def __init__(self, partition, mode: NumericMode | str, unit: str, float_nodes: frozenset[int] = frozenset()):
        super().__init__(partition)
        self.mode = NumericMode.of(mode)
        self.unit = unit
        # nodes the delegate hands to a unit that computes in float (NNAPI splits a model across
        # drivers): an integer model's float ops run there, so the integer check leaves them out
        self.float_nodes = frozenset(float_nodes)
        self._steps: list = []
        self._constants: dict[int, np.ndarray] = {}

    def prepare(self) -> None:
        graph = self.partition.graph
        view = nm.float_view(graph) if self.mode in _VIEWS else graph
        if self.mode is NumericMode.INTEGER:
            self._check_integer(graph)
        self._steps = [self._step(i, graph, view) for i in self.partition.nodes]
        self._constants = {}
        for i in self.partition.nodes:
            for t in view.ops[i].inputs:
                if t >= 0 and view.tensors[t].is_constant:
                    data = view.tensors[t].data
                    half = self.mode in (NumericMode.FLOAT16, NumericMode.MIXED)   # float weights in float16
                    self._constants[t] = nm.round_fp16(data) if half else data

    def _step(self, i: int, graph: Graph, view: Graph):
        op = view.ops[i]
        if self.mode in _VIEWS and nm.is_conversion(op, graph):
            kernel = _identity
        else:
            kernel = select_kernel(op, view)
        if kernel is None:
            raise DelegateError(f"{graph.describe_op(i)}: no kernel to run it in {self.mode.value} mode "
                                f"on the {self.unit}")
        return kernel, Node(i, op, view), op.inputs, op.outputs

    def _check_integer(self, graph: Graph) -> None:
        """The delegates' support checks ask the same question (rulekit.off_integer_path) before
        they accept an op for an integer unit, so this refuses only what a delegate of one's own
        accepted wrongly."""
        for i in self.partition.nodes:
            t = None if i in self.float_nodes else rk.off_integer_path(graph.ops[i], graph)
            if t is not None:
                raise DelegateError(f"{graph.describe_op(i)}: {rk.integer_refusal(graph, t, self.unit)}")

    def invoke(self, inputs: Mapping[int, np.ndarray]) -> dict[int, np.ndarray]:
        graph, mode = self.partition.graph, self.mode
        values = dict(self._constants)
        values.update(nm.convert_inputs(inputs, graph, mode))
        for kernel, node, ins, outs in self._steps:
            args = [values.get(t) if t >= 0 else None for t in ins]
            while args and args[-1] is None:
                args.pop()
            try:
                result = kernel(node, *args)
            except DelegateError:
                raise
            except Exception as exc:
                raise DelegateError(f"{graph.describe_op(node.index)} failed on the {self.unit}: "
                                    f"{type(exc).__name__}: {exc}") from exc
            result = result if isinstance(result, tuple) else (result,)
            for t, value in zip(outs, result):
                values[t] = nm.settle(np.asarray(value), graph.tensors[t], mode)
        return {t: nm.from_mode(values[t], graph.tensors[t], mode) for t in self.partition.outputs}
