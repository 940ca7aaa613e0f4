"""Failure-injecting delegates: one factory per fault, `make_<case>`, loadable as
`dtb benchmark --external_delegate_path=tests.faulty_delegates:make_<case>`.

Each delegate takes every op of the model onto the phone's GPU and computes the real outputs with the
CPU reference kernels, except for its one fault. CASES gives each fault the stage where it shows and
words the error must contain:

- "load":   the factory or what it returns is wrong: a DelegateError before anything is applied;
- "apply":  a callback fails while the delegate is applied: TFLite restores the original plan (the
            CLI stops with benchmark_model's "Failed to apply" message, or runs on the CPU with
            --cpu_fallback);
- "invoke": the kernel fails or returns something malformed: a DelegateError (or, through
            InvokeWithCPUFallback, the inference again on the CPU);
- "flag":   NaN or infinity in an output: not an error, but flagged in the record.

The hanging faults wait on RELEASE, which the tests set when they finish, so abandoned threads end.
Before waiting they call each function in ON_HANG: a test's fake clock jumps there, so the time
budget runs out on the hanging call and on no other, however slow the machine.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

from delegates.api import Delegate, Support
from delegates.kernel import UnitKernel
from sim.numerics import NumericMode

RELEASE = threading.Event()
ON_HANG: list = []    # callables run as a hanging fault starts to wait


class Boom(Exception):
    """A delegate's own exception type, unrelated to anything the testbed knows."""


CASES: dict[str, tuple[str, str]] = {
    # the factory and the object it returns
    "factory_raises": ("load", "failed to initialise: no accelerator"),
    "factory_hangs": ("load", "did not return within"),
    "factory_returns_none": ("load", "returned NoneType, not a Delegate"),
    "bad_options": ("load", "options must be a delegates.api.DelegateOptions"),
    # while the delegate is applied (TFLite: ModifyGraphWithDelegate fails, the plan is restored)
    "supported_raises": ("apply", "is_node_supported: RuntimeError: is_node_supported broke"),
    "supported_custom": ("apply", "is_node_supported: Boom: a custom exception"),
    "supported_hangs": ("apply", "is_node_supported did not return within"),
    "supported_returns_none": ("apply", "is_node_supported returned None, not a Support or a bool"),
    "supported_returns_string": ("apply", "is_node_supported returned str 'yes', not a Support or a bool"),
    "supported_exits": ("apply", "SystemExit"),
    "create_raises": ("apply", "create_kernel: RuntimeError: create_kernel broke"),
    "create_custom": ("apply", "create_kernel: Boom: a custom exception"),
    "create_returns_none": ("apply", "create_kernel returned None, not a delegates.api.DelegateKernel"),
    "create_returns_object": ("apply", "create_kernel returned object"),
    "create_hangs": ("apply", "create_kernel did not return within"),
    "prepare_raises": ("apply", "prepare: RuntimeError: prepare broke"),
    "prepare_custom": ("apply", "prepare: Boom: a custom exception"),
    "prepare_hangs": ("apply", "prepare did not return within"),
    # in an invoke
    "invoke_raises": ("invoke", "FaultyDelegate invoke failed: RuntimeError: invoke broke"),
    "invoke_custom": ("invoke", "FaultyDelegate invoke failed: Boom: a custom exception"),
    "invoke_hangs": ("invoke", "FaultyDelegate invoke did not return within"),
    "invoke_returns_none": ("invoke", "FaultyDelegate invoke returned None; expected a mapping"),
    "invoke_returns_list": ("invoke", "FaultyDelegate invoke returned a list of 1 items; expected a mapping"),
    "invoke_missing_output": ("invoke", "FaultyDelegate returned no value for tensor #"),
    "output_wrong_shape": ("invoke", "FaultyDelegate returned a float32 array of shape [1, 10, 2] for tensor #"),
    "output_wrong_dtype": ("invoke", "FaultyDelegate returned a float64 array of shape [1, 10] for tensor #"),
    "output_strings": ("invoke", "FaultyDelegate returned a <U4 array of shape [1, 10] for tensor #"),
    "output_scalar": ("invoke", "FaultyDelegate returned a float for tensor #"),
    "output_none": ("invoke", "FaultyDelegate returned None for tensor #"),
    # NaN or infinity: flagged, not refused
    "output_nan": ("flag", "NaN or infinity"),
    "output_inf": ("flag", "NaN or infinity"),
}


def _hang() -> None:
    for hook in ON_HANG:
        hook()
    RELEASE.wait()


class FaultyKernel(UnitKernel):
    """The reference kernels' outputs, except for the kernel's fault."""

    def __init__(self, partition, fault: str):
        super().__init__(partition, NumericMode.REFERENCE, None)
        self.fault = fault

    def prepare(self) -> None:
        fault = self.fault
        if fault == "prepare_raises":
            raise RuntimeError("prepare broke")
        if fault == "prepare_custom":
            raise Boom("a custom exception")
        if fault == "prepare_hangs":
            _hang()
        super().prepare()

    def invoke(self, inputs):
        fault = self.fault
        if fault == "invoke_raises":
            raise RuntimeError("invoke broke")
        if fault == "invoke_custom":
            raise Boom("a custom exception")
        if fault == "invoke_hangs":
            _hang()
        outputs = super().invoke(inputs)
        t = self.partition.outputs[0]
        real = outputs[t]
        if fault == "invoke_returns_none":
            return None
        if fault == "invoke_returns_list":
            return [real]
        if fault == "invoke_missing_output":
            return {}
        bad = {
            "output_wrong_shape": lambda: np.repeat(real[..., None], 2, axis=-1),
            "output_wrong_dtype": lambda: real.astype(np.float64),
            "output_strings": lambda: np.full(real.shape, "oops"),
            "output_scalar": lambda: 1.5,
            "output_none": lambda: None,
            "output_nan": lambda: np.where(np.arange(real.size).reshape(real.shape) == 0, np.nan, real).astype(real.dtype),
            "output_inf": lambda: np.full_like(real, np.inf),
        }
        if fault in bad:
            outputs = {**outputs, t: bad[fault]()}
        return outputs


class FaultyDelegate(Delegate):
    """Takes every op onto the GPU; fails as `fault` says."""

    name = "FaultyDelegate"
    unit = "gpu"

    def __init__(self, fault: str):
        super().__init__()
        self.fault = fault

    def is_node_supported(self, op, graph):
        fault = self.fault
        if fault == "supported_raises":
            raise RuntimeError("is_node_supported broke")
        if fault == "supported_custom":
            raise Boom("a custom exception")
        if fault == "supported_hangs":
            _hang()
        if fault == "supported_returns_none":
            return None
        if fault == "supported_returns_string":
            return "yes"
        if fault == "supported_exits":
            sys.exit(3)
        return Support(True)

    def create_kernel(self, partition):
        fault = self.fault
        if fault == "create_raises":
            raise RuntimeError("create_kernel broke")
        if fault == "create_custom":
            raise Boom("a custom exception")
        if fault == "create_hangs":
            _hang()
        if fault == "create_returns_none":
            return None
        if fault == "create_returns_object":
            return object()
        return FaultyKernel(partition, fault)


def _factory(case: str):
    def make() -> Delegate:
        if case == "factory_raises":
            raise RuntimeError("no accelerator")
        if case == "factory_hangs":
            _hang()
        if case == "factory_returns_none":
            return None  # type: ignore[return-value]
        delegate = FaultyDelegate(case)
        if case == "bad_options":
            delegate.options = {"max_delegated_partitions": "2"}  # type: ignore[assignment]
        return delegate

    make.__name__ = make.__qualname__ = f"make_{case}"
    return make


for _case in CASES:
    globals()[f"make_{_case}"] = _factory(_case)

assert len(CASES) == 31
