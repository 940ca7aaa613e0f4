"""The delegate interface a user implements in Python, after TFLite's SimpleDelegate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping

import numpy as np

from runtime.errors import DelegateError
from runtime.graph import Graph, Op

if TYPE_CHECKING:  # the framework's partition type; delegates only read it
    from runtime.partition import Partition

__all__ = ["Support", "DelegateOptions", "Delegate", "DelegateKernel", "DelegateError", "Rule",
           "check_rules"]


@dataclass(frozen=True)
class Support:
    """A delegate's answer for one node: whether it takes it and, if not, why (shown to the user)."""

    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


YES = Support(True)


@dataclass(frozen=True)
class DelegateOptions:
    """TFLite's SimpleDelegate options: <= 0 means 'no limit' and 'no minimum' respectively."""

    max_delegated_partitions: int = 0
    min_nodes_per_partition: int = 0


# A support rule: (op, graph) -> True when the rule holds. Its docstring is the user-facing reason
# given when it does not, and the line the supported-ops table prints.
Rule = Callable[[Op, Graph], bool]


def check_rules(rules, op: Op, graph: Graph) -> Support:
    """Run rules in order; the first that fails gives its docstring as the reason."""
    for rule in rules:
        if not rule(op, graph):
            return Support(False, " ".join((rule.__doc__ or rule.__name__).split()))
    return YES


class DelegateKernel:
    """One delegated partition: prepared once, invoked every inference.

    `invoke` gets the partition's input tensors (index -> array) and returns its outputs the same
    way. Raise DelegateError for a failure; in prepare, TFLite then restores the CPU plan."""

    def __init__(self, partition: "Partition"):
        self.partition = partition

    def prepare(self) -> None:
        """Build whatever the partition needs (compile, upload weights); called once."""

    def invoke(self, inputs: Mapping[int, np.ndarray]) -> dict[int, np.ndarray]:
        raise DelegateError(f"{type(self).__name__} does not implement invoke()")


class Delegate:
    """Base of every delegate. Subclasses set `name` and `unit` and override is_node_supported.

    `unit` names the kind of simulated unit the partitions run on ("cpu", "gpu", "dsp", "ane",
    "npu"); the simulator charges that unit's costs for each delegated op."""

    name: str = "PythonDelegate"
    unit: str = "cpu"

    def __init__(self, options: DelegateOptions | None = None):
        self.options = options or DelegateOptions()

    def is_node_supported(self, op: Op, graph: Graph) -> Support:
        return Support(False, "this delegate supports no op")

    def create_kernel(self, partition: "Partition") -> DelegateKernel:
        raise DelegateError(f"{self.name} does not implement create_kernel()")

    def fused_nodes(self, partition: "Partition") -> frozenset[int]:
        """Nodes of the partition the delegate links into the kernel of the node producing their
        input (no launch of their own, no round trip of the intermediate through memory). None by
        default; the GPU delegate links element-wise ops as TFLite's GPU delegate does."""
        return frozenset()

    def node_units(self, partition: "Partition") -> dict[int, str]:
        """Nodes of the partition that run on another unit than the kernel's (profile unit names):
        NNAPI's runtime splits a model across the drivers that support its ops. None by default."""
        return {}

    def step_seconds(self, unit_spec) -> float:
        """What it costs to start the partition's work on another of its units (NNAPI: that
        driver's execution call). Paid each time the work moves to another unit; 0 by default."""
        return 0.0

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
