"""Factories the registry tests load as external delegates ("tests.external_delegates:make")."""

from __future__ import annotations

from delegates.api import Delegate, Support


class CountingDelegate(Delegate):
    """Takes the first `threshold` ops it is asked about; records the options it was given."""

    name = "CountingDelegate"

    def __init__(self, threshold: int, label: str, strict: bool, scale: float):
        super().__init__()
        self.threshold, self.label, self.strict, self.scale = threshold, label, strict, scale

    def is_node_supported(self, op, graph) -> Support:
        return Support(op.version <= self.threshold, "version above the threshold")


def make(threshold: int = 1, label: str = "plain", strict: bool = False, scale: float = 1.0) -> Delegate:
    return CountingDelegate(threshold, label, strict, scale)


def untyped(**options):
    delegate = CountingDelegate(1, "untyped", False, 1.0)
    delegate.raw = options
    return delegate


def not_a_delegate():
    return 42


def failing(threshold: int = 1):
    raise RuntimeError("no accelerator here")


def exits_in_invoke(how: str = "sys") -> Delegate:
    """Every op onto the GPU; its kernel ends the process in invoke: sys.exit(0) ("sys") or os._exit(0) ("os")."""
    import os
    import sys

    from tests.faulty_delegates import FaultyDelegate, FaultyKernel

    class ExitingKernel(FaultyKernel):
        def invoke(self, inputs):
            if how == "os":
                os._exit(0)
            sys.exit(0)

    class ExitingDelegate(FaultyDelegate):
        name = "ExitingDelegate"

        def create_kernel(self, partition):
            return ExitingKernel(partition, "none")

    return ExitingDelegate("none")
