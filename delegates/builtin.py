"""The base of the built-in delegates (GPU, Hexagon, Core ML, NNAPI, QNN): rule tables and one shared create_kernel."""

from __future__ import annotations

from delegates.api import Delegate, DelegateKernel, Rule
from runtime.ir.graph import Graph
from runtime.ir.optypes import OpType

__all__ = ["BuiltinDelegate"]


class BuiltinDelegate(Delegate):
    """A built-in delegate: support decided by a rule table, math run by UnitKernel on the unit
    named `unit_name` in the numeric mode `numeric_mode` gives."""

    unit_name: str = "cpu"
    """The simulated unit its kernels run on (set by each delegate, often from the phone's profile)."""

    def rule_table(self) -> dict[OpType, tuple[Rule, ...]]:
        """Per op type, the rules a node of that type must pass (delegates/table.py lists them)."""
        raise NotImplementedError(f"{type(self).__name__} must give its rule table")

    def common_rules(self) -> tuple[Rule, ...]:
        """Rules every node must pass, whatever its type."""
        return ()

    def numeric_mode(self, graph: Graph) -> str:
        """The NumericMode name its unit computes `graph` in (sim/numerics.py)."""
        raise NotImplementedError(f"{type(self).__name__} must give its numeric mode")

    def partition_mode(self, partition) -> str:
        """The NumericMode name one partition runs in: the graph's mode, unless a delegate decides per
        partition (QNN's HTP: float16 only where a partition computes in float)."""
        return self.numeric_mode(partition.graph)

    def float_nodes(self, partition) -> frozenset[int]:
        """Nodes of the partition that run in float on a unit that otherwise computes in integer
        (NNAPI hands an integer model's float ops to a float driver); none by default."""
        return frozenset()

    def create_kernel(self, partition) -> DelegateKernel:
        # Imported here: delegates/kernel.py pulls in every kernel of runtime/ops, which a
        # delegate only needs once it runs a partition.
        from delegates.kernel import UnitKernel

        floats = self.float_nodes(partition)
        return UnitKernel(partition, self.partition_mode(partition), self.unit_name, floats)
