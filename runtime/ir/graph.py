"""The model graph: DType, QuantParams, Tensor, Op and Graph as frozen dataclasses (runtime/ops/validate.py checks one)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from runtime.ir.errors import ModelError
from runtime.ir.optypes import OpType

__all__ = ["DType", "QuantParams", "Tensor", "Op", "Graph", "Signature", "OpType"]


class DType(enum.Enum):
    """A tensor element type; the value is (TFLite TensorType code, NumPy dtype)."""

    FLOAT32 = (0, np.float32)
    FLOAT16 = (1, np.float16)
    INT32 = (2, np.int32)
    UINT8 = (3, np.uint8)
    INT64 = (4, np.int64)
    STRING = (5, np.object_)
    BOOL = (6, np.bool_)
    INT16 = (7, np.int16)
    COMPLEX64 = (8, np.complex64)
    INT8 = (9, np.int8)
    FLOAT64 = (10, np.float64)
    COMPLEX128 = (11, np.complex128)
    UINT64 = (12, np.uint64)
    RESOURCE = (13, np.object_)
    VARIANT = (14, np.object_)
    UINT32 = (15, np.uint32)
    UINT16 = (16, np.uint16)
    INT4 = (17, np.int8)
    BFLOAT16 = (18, np.object_)

    @property
    def code(self) -> int:
        return self.value[0]

    @property
    def np(self) -> np.dtype:
        return np.dtype(self.value[1])

    @classmethod
    def from_code(cls, code: int) -> "DType":
        for member in cls:
            if member.code == code:
                return member
        raise ModelError(f"unknown tensor type code {code}")

    @classmethod
    def from_numpy(cls, dtype: Any) -> "DType":
        dtype = np.dtype(dtype)
        for member in (cls.FLOAT32, cls.FLOAT16, cls.INT32, cls.UINT8, cls.INT64, cls.BOOL,
                       cls.INT16, cls.INT8, cls.FLOAT64, cls.UINT32, cls.UINT16, cls.UINT64,
                       cls.COMPLEX64, cls.COMPLEX128):
            if member.np == dtype:
                return member
        raise ModelError(f"no TFLite tensor type for NumPy dtype {dtype}")


def printable(text: str, most: int = 120) -> str:
    """A name from a file as messages show it: control characters escaped (an error stays one
    line), and cut short when it is very long."""
    cut = len(text) > most
    text = text[:most]
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text + "..." if cut else text


@dataclass(frozen=True)
class QuantParams:
    """Affine quantization real = scale * (q - zero_point); per-channel along `axis` when len > 1."""

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    axis: int = 0

    @property
    def per_channel(self) -> bool:
        return len(self.scale) > 1


def _readonly(data: np.ndarray | None) -> np.ndarray | None:
    if data is None:
        return None
    data = np.asarray(data)
    if data.flags.writeable:
        data = data.copy()
        data.setflags(write=False)
    return data


@dataclass(frozen=True, eq=False)
class Tensor:
    """One tensor: static shape (-1 in shape_signature marks a dynamic dim) and constant data if any."""

    name: str
    shape: tuple[int, ...]
    dtype: DType
    quant: QuantParams | None = None
    data: np.ndarray | None = field(default=None, repr=False)
    shape_signature: tuple[int, ...] | None = None
    is_variable: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "data", _readonly(self.data))

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    @property
    def is_dynamic(self) -> bool:
        return self.shape_signature is not None and any(d < 0 for d in self.shape_signature)


@dataclass(frozen=True)
class Op:
    """One node: its type and version, tensor indices in and out (-1 = optional input absent)."""

    type: OpType
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: Any = None
    version: int = 1
    custom_code: str | None = None
    custom_options: bytes | None = None    # a custom op's parameters, as the file stores them (FlexBuffer)

    @property
    def name(self) -> str:
        return self.custom_code if self.type is OpType.CUSTOM and self.custom_code else self.type.name


@dataclass(frozen=True)
class Signature:
    """A named entry point: user-facing input/output names mapped to tensor indices."""

    key: str
    inputs: tuple[tuple[str, int], ...]
    outputs: tuple[tuple[str, int], ...]


@dataclass(frozen=True, eq=False)
class Graph:
    """A model: tensors, ops in execution order, and the indices of its inputs and outputs."""

    tensors: tuple[Tensor, ...]
    ops: tuple[Op, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    name: str = "model"
    signatures: tuple[Signature, ...] = ()
    source: str = ""  # the file it was read from, named in error messages
    # The model's other subgraphs (bodies of IF, WHILE and CALL_ONCE): subgraphs[k - 1] is
    # subgraph k; this graph is subgraph 0. Only the main graph holds them.
    subgraphs: tuple["Graph", ...] = ()

    @property
    def label(self) -> str:
        """What messages call the model: its file, else its name."""
        return self.source or self.name

    def subgraph(self, k: int) -> "Graph":
        """Subgraph k of the model whose main graph this is (0: this graph)."""
        if not 0 <= k <= len(self.subgraphs):
            raise ModelError(f"subgraph index {k} is out of range: the model has {len(self.subgraphs) + 1} subgraphs")
        return self if k == 0 else self.subgraphs[k - 1]

    def describe_subgraph(self, k: int) -> str:
        """What messages call subgraph k of this model."""
        name = self.subgraph(k).name
        return f"subgraph {k}" + (f" '{printable(name)}'" if name else "")

    def describe_op(self, index: int) -> str:
        return f"op #{index} {printable(self.ops[index].name)}"

    def describe_tensor(self, index: int) -> str:
        return f"tensor #{index} '{printable(self.tensors[index].name)}'"

    def producers(self) -> dict[int, int]:
        """Tensor index -> index of the op that writes it."""
        return {t: i for i, op in enumerate(self.ops) for t in op.outputs}

    def consumers(self) -> dict[int, list[int]]:
        """Tensor index -> indices of the ops that read it, in plan order."""
        users: dict[int, list[int]] = {}
        for i, op in enumerate(self.ops):
            for t in op.inputs:
                if t >= 0:
                    users.setdefault(t, []).append(i)
        return users
