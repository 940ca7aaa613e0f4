"""What every kernel shares: the Node a kernel sees, fused activations, padding, error wrapping."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from runtime.ir.errors import ModelError
from runtime.ir.graph import Graph, Op, Tensor
from runtime.ir.options import Activation, Padding, options_or_default

Kernel = Callable[..., Any]


@dataclass(eq=False)
class Node:
    """One op as its kernel sees it: options, tensor metadata, and a cache for prepared constants."""

    index: int
    op: Op
    graph: Graph
    cache: dict[str, Any] = field(default_factory=dict)
    # What the interpreter shares across the model's subgraphs (runtime/interpreter/model_state.py): the
    # control-flow and resource-variable kernels run subgraphs and keep variables through it.
    model_state: Any = None

    @property
    def options(self) -> Any:
        """The op's options; its type's defaults where a graph built in code stores none."""
        o = self.op.options
        return o if o is not None else options_or_default(self.op.type.name, None)

    @property
    def params(self) -> Any:
        """A custom op's parameters, as its registration decoded the op's bytes (None for builtins)."""
        return self.cache.get("custom_params")

    def input(self, k: int) -> Tensor | None:
        t = self.op.inputs[k] if k < len(self.op.inputs) else -1
        return self.graph.tensors[t] if t >= 0 else None

    def output(self, k: int = 0) -> Tensor:
        return self.graph.tensors[self.op.outputs[k]]

    def cached(self, key: str, make: Callable[[], Any]) -> Any:
        """Compute a derived constant (a reshaped filter, an index table) once per node."""
        try:
            return self.cache[key]
        except KeyError:
            value = self.cache[key] = make()
            return value

    def buffer(self, key: str, shape: tuple[int, ...], dtype=np.float32, fill: float | None = None) -> np.ndarray:
        """A scratch or output array reused across invokes, as TFLite's arena reuses memory;
        this also spares the page faults of a fresh large allocation every inference.
        `fill` initialises a new buffer (e.g. the zero border of a padded copy)."""
        buf = self.cache.get(key)
        if buf is None or buf.shape != tuple(shape) or buf.dtype != dtype:
            buf = self.cache[key] = np.empty(shape, dtype) if fill is None else np.full(shape, fill, dtype)
        return buf

    def fail(self, message: str) -> ModelError:
        return ModelError(f"{self.graph.describe_op(self.index)}: {message}")


_ACT_RANGE = {
    Activation.RELU: (0.0, None),
    Activation.RELU6: (0.0, 6.0),
    Activation.RELU_N1_TO_1: (-1.0, 1.0),
}


def activate(x: np.ndarray, act: Activation) -> np.ndarray:
    """Apply a fused activation in place where possible, as TFLite's float kernels clamp."""
    if act is Activation.NONE:
        return x
    if act in _ACT_RANGE:
        lo, hi = _ACT_RANGE[act]
        return np.clip(x, lo, hi, out=x if x.flags.writeable else None)
    if act is Activation.TANH:
        return np.tanh(x)
    if act is Activation.SIGN_BIT:
        return np.signbit(x).astype(x.dtype)
    raise ModelError(f"unknown fused activation {act}")


def out_size(padding: Padding, size: int, k: int, stride: int, dilation: int = 1) -> int:
    """Output extent along one axis (tflite/kernels/padding.h)."""
    eff = (k - 1) * dilation + 1
    if padding is Padding.SAME:
        return (size + stride - 1) // stride
    return (size - eff + stride) // stride


def pad_before(padding: Padding, size: int, k: int, stride: int, dilation: int = 1) -> tuple[int, int]:
    """(pad_before, pad_after) for one axis; the odd remainder goes after, as TFLite does."""
    out = out_size(padding, size, k, stride, dilation)
    eff = (k - 1) * dilation + 1
    total = max((out - 1) * stride + eff - size, 0)
    return total // 2, total - total // 2


def axis_of(axis: int, rank: int, node: Node) -> int:
    if not -rank <= axis < max(rank, 1):
        raise node.fail(f"axis {axis} is out of range for rank {rank}")
    return axis % max(rank, 1)


def as_float32(x: np.ndarray) -> np.ndarray:
    return x if x.dtype == np.float32 else x.astype(np.float32)
