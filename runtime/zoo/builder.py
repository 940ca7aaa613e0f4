"""GraphBuilder: build a Graph op by op while running it on a sample input, so shapes and statistics are known."""

from __future__ import annotations

from typing import Any

import numpy as np

from runtime.ir.graph import DType, Graph, Op, Tensor
from runtime.ops import KERNELS, Node
from runtime.ir.optypes import OpType
from runtime.ir.options import FOR_OP
from runtime.ops.validate import validate_graph


class GraphBuilder:
    """Each added op is evaluated at once on the sample values, which gives its output shapes
    and lets layers fold batch-norm from the activations they really produce."""

    def __init__(self, name: str, seed: int = 0):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.tensors: list[Tensor] = []
        self.ops: list[Op] = []
        self.values: list[np.ndarray] = []
        self.inputs: list[int] = []

    def _add_tensor(self, name: str, value: np.ndarray, const: bool) -> int:
        self.tensors.append(Tensor(name=name, shape=value.shape, dtype=DType.from_numpy(value.dtype),
                                   data=value if const else None))
        self.values.append(value)
        return len(self.tensors) - 1

    def input(self, name: str, shape: tuple[int, ...], dtype=np.float32) -> int:
        sample = self.rng.standard_normal(shape).astype(dtype)
        t = self._add_tensor(name, sample, const=False)
        self.inputs.append(t)
        return t

    def const(self, name: str, value: Any, dtype=None) -> int:
        return self._add_tensor(name, np.asarray(value, dtype=dtype), const=True)

    def value(self, t: int) -> np.ndarray:
        return self.values[t]

    def shape(self, t: int) -> tuple[int, ...]:
        return self.tensors[t].shape

    def evaluate(self, op_type: OpType, arrays: list[np.ndarray | None], options: Any = None,
                 inputs: tuple[int, ...] = ()) -> tuple[np.ndarray, ...]:
        """Run an op's kernel on arrays without adding it (used to measure before folding)."""
        if options is None and op_type.name in FOR_OP:
            options = FOR_OP[op_type.name]()
        op = Op(type=op_type, inputs=inputs, outputs=(), options=options)
        graph = Graph(tensors=tuple(self.tensors), ops=(op,), inputs=(), outputs=())
        out = KERNELS[op_type](Node(0, op, graph), *arrays)
        return out if isinstance(out, tuple) else (out,)

    def op(self, op_type: OpType, inputs: list[int], options: Any = None, name: str | None = None):
        """Add an op; returns its output tensor index (a tuple when it has several outputs)."""
        if options is None and op_type.name in FOR_OP:
            options = FOR_OP[op_type.name]()
        arrays = [self.values[t] if t >= 0 else None for t in inputs]
        results = self.evaluate(op_type, arrays, options, tuple(inputs))
        base = name or f"{op_type.name.lower()}_{len(self.ops)}"
        outs = tuple(self._add_tensor(base if len(results) == 1 else f"{base}:{k}", np.asarray(r), False)
                     for k, r in enumerate(results))
        self.ops.append(Op(type=op_type, inputs=tuple(inputs), outputs=outs, options=options))
        return outs[0] if len(outs) == 1 else outs

    def build(self, outputs: list[int]) -> Graph:
        return validate_graph(Graph(tensors=tuple(self.tensors), ops=tuple(self.ops), inputs=tuple(self.inputs),
                     outputs=tuple(outputs), name=self.name))
