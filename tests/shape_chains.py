"""Run-time shape chains grafted onto converter-made fixtures: SHAPE -> STRIDED_SLICE -> PACK.

TensorFlow's converter keeps this chain when a Keras layer reads its batch size at run time:
Conv2DTranspose stacks (batch, height, width, filters) into its output_shape, and Reshape
(EfficientNet's squeeze-and-excitation block, after GlobalAveragePooling2D) stacks (batch, 1, 1,
channels) into its new shape. The batch comes from SHAPE of the layer's input, cut out by a
STRIDED_SLICE with shrink_axis_mask=1; everything else is a constant int32 scalar.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from runtime.ir.graph import DType, Graph, Op, Tensor
from runtime.ir.optypes import OpType
from runtime.ir.options import PackOptions, ReducerOptions, ShapeOptions, StridedSliceOptions
from runtime.ops.validate import validate_graph

__all__ = ["runtime_transpose_conv_shapes", "runtime_se_reshapes"]


class _Surgery:
    """New tensors are appended; new ops go in front of the op they feed, so the order stays valid."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.tensors = list(graph.tensors)
        self.ops: list[Op] = list(graph.ops)
        self.before: dict[int, list[Op]] = {}

    def tensor(self, name: str, shape, dtype: DType = DType.INT32, data=None, quant=None) -> int:
        self.tensors.append(Tensor(name, tuple(shape), dtype, quant, data))
        return len(self.tensors) - 1

    def const(self, name: str, value) -> int:
        value = np.asarray(value, np.int32)
        return self.tensor(name, value.shape, data=value)

    def stacked_shape(self, at: int, source: int, dims: tuple[int, ...], prefix: str) -> int:
        """(batch of `source`, *dims) as a run-time int32 vector, computed just before op `at`."""
        rank = len(self.tensors[source].shape)
        shape = self.tensor(f"{prefix}/Shape", (rank,))
        batch = self.tensor(f"{prefix}/strided_slice", ())
        begin, end, step = (self.const(f"{prefix}/strided_slice/stack{k}", [v]) for k, v in
                            (("", 0), ("_1", 1), ("_2", 1)))
        rest = [self.const(f"{prefix}/stack/{k + 1}", d) for k, d in enumerate(dims)]
        stacked = self.tensor(f"{prefix}/stack", (1 + len(dims),))
        self.before.setdefault(at, []).extend([
            Op(OpType.SHAPE, (source,), (shape,), ShapeOptions()),
            Op(OpType.STRIDED_SLICE, (shape, begin, end, step), (batch,), StridedSliceOptions(shrink_axis_mask=1)),
            Op(OpType.PACK, (batch, *rest), (stacked,), PackOptions(values_count=1 + len(dims), axis=0)),
        ])
        return stacked

    def finish(self, name: str) -> Graph:
        ops = []
        for i, op in enumerate(self.ops):
            ops.extend(self.before.get(i, ()))
            ops.append(op)
        ops.extend(self.before.get(len(self.ops), ()))
        return validate_graph(dataclasses.replace(self.graph, tensors=tuple(self.tensors), ops=tuple(ops),
                                   name=name, source=""))


def runtime_transpose_conv_shapes(graph: Graph) -> Graph:
    """Every TRANSPOSE_CONV's constant output_shape replaced by the chain Conv2DTranspose emits."""
    s = _Surgery(graph)
    for i, op in enumerate(graph.ops):
        if op.type is not OpType.TRANSPOSE_CONV:
            continue
        out_shape = tuple(int(d) for d in graph.tensors[op.inputs[0]].data)
        stacked = s.stacked_shape(i, op.inputs[2], out_shape[1:], f"conv2d_transpose_{i}")
        s.ops[i] = dataclasses.replace(op, inputs=(stacked, *op.inputs[1:]))
    return s.finish(f"{graph.name}:runtime_transpose_conv_shape")


def runtime_se_reshapes(graph: Graph) -> Graph:
    """Every MEAN that keeps its dims becomes GlobalAveragePooling2D ([N, C], keep_dims false)
    followed by Keras' Reshape((1, 1, C)) with its batch read at run time; the reshape writes the
    MEAN's old output tensor, so its readers are unchanged."""
    s = _Surgery(graph)
    for i, op in enumerate(graph.ops):
        if op.type is not OpType.MEAN or not getattr(op.options, "keep_dims", False):
            continue
        old = graph.tensors[op.outputs[0]]
        if len(old.shape) != 4:
            continue
        pooled = s.tensor(f"{old.name}/pooled", (old.shape[0], old.shape[-1]), old.dtype, quant=old.quant)
        s.ops[i] = dataclasses.replace(op, outputs=(pooled,), options=ReducerOptions(keep_dims=False))
        stacked = s.stacked_shape(i + 1, pooled, old.shape[1:], f"reshape_{i}")
        s.before.setdefault(i + 1, []).append(Op(OpType.RESHAPE, (pooled, stacked), op.outputs))
    return s.finish(f"{graph.name}:runtime_se_reshape")
