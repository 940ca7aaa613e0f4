"""The enums and helpers of the op options (runtime/ir/options.py and options_extra.py share them)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Padding", "Activation", "MirrorPadMode", "LSTMKernelType", "CombinerType", "ReduceWindowFunction",
           "RngAlgorithm", "INT64", "empty"]


class Padding(enum.IntEnum):
    SAME = 0
    VALID = 1


class Activation(enum.IntEnum):
    NONE = 0
    RELU = 1
    RELU_N1_TO_1 = 2
    RELU6 = 3
    TANH = 4
    SIGN_BIT = 5


class MirrorPadMode(enum.IntEnum):
    REFLECT = 0
    SYMMETRIC = 1


class LSTMKernelType(enum.IntEnum):
    FULL = 0
    BASIC = 1


class CombinerType(enum.IntEnum):
    SUM = 0
    MEAN = 1
    SQRTN = 2


class ReduceWindowFunction(enum.IntEnum):
    UNSUPPORTED = 0
    ADD = 1
    MUL = 2
    MINIMUM = 3
    MAXIMUM = 4
    ALL = 5
    ANY = 6


class RngAlgorithm(enum.IntEnum):
    DEFAULT = 0
    PHILOX = 1
    THREEFRY = 2


# Marks an options vector the schema stores as int64 (the writer would otherwise write int32).
INT64 = {"int64": True}


def empty(name: str, module: str) -> type:
    """An options class without fields, `name` of `module` (a frozen dataclass, as the others)."""
    return dataclass(frozen=True)(type(name, (), {"__module__": module, "__doc__": f"{name} (no fields)."}))
