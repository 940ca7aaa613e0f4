"""The delegate interface a user implements in Python, after TFLite's SimpleDelegate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping

import numpy as np

from runtime.ir.errors import DelegateError
from runtime.ir.graph import Graph, Op

if TYPE_CHECKING:  # the framework's and the simulator's types; delegates only read them
    from runtime.ir.partition import Partition
    from sim.numerics import NumericMode
    from sim.spec import Profile, UnitSpec
    from sim.unit import Scales, Unit

__all__ = ["Support", "DelegateOptions", "DelegationSummary", "Delegate", "DelegateKernel", "DelegateError",
           "Rule", "check_rules"]


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


@dataclass(frozen=True)
class DelegationSummary:
    """What applying one delegate to the plan came to: the figures its log lines report."""

    delegated: int                 # nodes its partitions replace
    total: int                     # nodes of the plan it was applied to
    previewed: int                 # partitions of every supported node, before the largest-N / min-nodes choice
    chosen: int                    # partitions that choice kept
    unsupported: tuple[str, ...]   # "OPNAME: reason" per refused node, sorted, each once (GraphPartitionHelper)


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
    """One delegated partition, after TFLite's SimpleDelegateKernelInterface: prepared once, invoked
    every inference. Every hook the framework uses is declared here with its default.

    `invoke` gets the partition's input tensors (index -> array) and returns its outputs the same
    way. Raise DelegateError for a failure; in prepare, TFLite then restores the CPU plan."""

    mode: NumericMode | str | None = None
    """The numeric mode the kernel computes in (sim.numerics.NumericMode or its name: REFERENCE,
    FLOAT32_VIEW, FLOAT16, INTEGER, MIXED); it sets the precision each op is charged at and the
    conformance kit's tolerance.
    When: the plan is built (each allocation); the conformance kit judges outputs.
    Default: None, a kernel of the delegate's own: charged as REFERENCE, judged with the own-kernel
    tolerance."""

    unit: str | None = None
    """The name of the phone's unit this kernel runs on (a profile unit name, e.g. "gpu", "cdsp").
    When: the plan is built (each allocation).
    Default: None: the first unit of the delegate's `unit` kind."""

    def __init__(self, partition: "Partition"):
        self.partition = partition

    def prepare(self) -> None:
        """Build whatever the partition needs (compile, upload weights); TFLite's Prepare.
        When: once, while the delegate is applied, after it has created all its kernels.
        Default: nothing to prepare."""

    def invoke(self, inputs: Mapping[int, np.ndarray]) -> dict[int, np.ndarray]:
        """The partition's outputs (tensor index -> array of the tensor's type and shape) from its
        inputs (tensor index -> array); TFLite's Eval.
        When: every inference, on the delegate's watched thread.
        Default: raises DelegateError (a kernel must implement it)."""
        raise DelegateError(f"{type(self).__name__} does not implement invoke()")


class Delegate:
    """Base of every delegate, after TFLite's SimpleDelegateInterface: every hook the framework uses
    is declared here with its default, so a delegate overrides only what it does differently (a
    user's delegate: `is_node_supported` and `create_kernel`). The framework partitions, never the
    delegate."""

    name: str = "PythonDelegate"
    """The delegate's name in log lines, reports and the plan's placement; TFLite's Name().
    When: applying it, and in every report.
    Default: "PythonDelegate"."""

    unit: str = "cpu"
    """The kind of simulated unit its partitions run on ("cpu", "gpu", "dsp", "ane", "npu"; a unit's
    name works too); the simulator charges that unit's costs for each delegated op.
    When: the plan is built, for a kernel that names no unit of its own.
    Default: "cpu"."""

    options: DelegateOptions
    """How many partitions to keep and how small one may be (TFLite's SimpleDelegate options).
    When: applying it (the largest-N / min-nodes choice).
    Default: DelegateOptions(): no limit, no minimum."""

    allows_dynamic_tensors: bool = False
    """Whether it takes a plan with dynamic-sized tensors (kTfLiteDelegateFlagsAllowDynamicTensors);
    if not, on such a plan it is not applied and TFLite's warning is logged.
    When: before applying it.
    Default: False."""

    fp16_dequant_rule: bool = False
    """TFLite's FP16GraphPartitionHelper: a DEQUANTIZE of float16 weights is not asked about, and is
    delegated only when all its consumers are in the largest partition (the GPU and Core ML delegates).
    When: applying it.
    Default: False: every node is asked."""

    platform_refusal: str | None = None
    """Why the phone offers none of this delegate (Core ML on a phone that is not iOS, NNAPI on one
    that is not Android, Hexagon without a Hexagon DSP): one line naming the delegate and the phone.
    TFLite's delegate then takes no op and says little; the run's record and the CLI say this.
    When: set at construction, from the profile; read when it is applied.
    Default: None, the platform has it."""

    warnings: tuple[str, ...] | list[str] = ()
    """What the delegate said of its options when it was made: an option it caps (the Hexagon
    delegate's partition limit), ignores (an NNAPI accelerator name before Android 10) or cannot use
    (the QNN delegate's options of its other backend). TFLite logs these; the CLI prints each once.
    When: set at construction; read by the CLI after the flags are parsed.
    Default: none."""

    def __init__(self, options: DelegateOptions | None = None):
        self.options = options or DelegateOptions()

    def is_node_supported(self, op: Op, graph: Graph) -> Support:
        """Whether the delegate takes this node and, if not, why (the reason users read); pure, no
        printing. TFLite's IsNodeSupportedByDelegate; a bool is taken too.
        When: applying it, once per node of the plan, on the delegate's watched thread.
        Default: refuses every op."""
        return Support(False, "this delegate supports no op")

    def create_kernel(self, partition: "Partition") -> DelegateKernel:
        """The kernel that runs one partition the framework formed; TFLite's
        CreateDelegateKernelInterface and the kernel's Init.
        When: applying it, once per partition kept, on the delegate's watched thread.
        Default: raises DelegateError (a delegate must implement it)."""
        raise DelegateError(f"{self.name} does not implement create_kernel()")

    def log_lines(self, summary: DelegationSummary) -> list[str]:
        """The lines this delegate's TFLite counterpart logs when it is applied, before the graph is
        rewritten (the framework adds Subgraph's own "Replacing ..." line).
        When: applying it, once, after the partitions are chosen.
        Default: SimpleDelegate's line (delegates/utils/simple_delegate.cc), which counts the
        partitions before the largest-N / min-nodes choice."""
        return [f"{self.name} delegate: {summary.delegated} nodes delegated out of {summary.total} nodes "
                f"with {summary.previewed} partitions."]

    def fused_nodes(self, partition: "Partition") -> frozenset[int]:
        """Nodes of the partition the delegate links into the kernel of the node producing their
        input: no launch of their own, no round trip of the intermediate through memory.
        When: the plan is built (each allocation).
        Default: none (the GPU delegate links element-wise ops as TFLite's GPU delegate does)."""
        return frozenset()

    def absorbed_nodes(self, partition: "Partition") -> frozenset[int]:
        """Nodes of the partition whose work the backend does inside the node before them, at no
        cost of their own (an HTP convolution's output stage clamps to a ReLU's range): timed as
        nothing, still counted as the delegate's nodes.
        When: the plan is built (each allocation).
        Default: none (the QNN delegate's HTP absorbs the activations Qualcomm documents)."""
        return frozenset()

    def node_units(self, partition: "Partition") -> dict[int, str]:
        """Nodes of the partition that run on another unit than the kernel's (node -> profile unit
        name): NNAPI's runtime splits a model across the drivers that support its ops.
        When: the plan is built (each allocation).
        Default: none, every node runs on the kernel's unit."""
        return {}

    def unit_scales(self, unit: "Unit") -> "Scales":
        """How the delegate moves a unit off the profile's nominal point (a backend, an execution
        preference, a power-save level): scales of its rate, power and dispatch cost.
        When: the plan is built, for the partition's unit and every other unit it runs nodes on.
        Default: Scales(), the unit as the profile describes it."""
        from sim.unit import Scales  # here, so importing the API does not import the simulator

        return Scales()

    def init_seconds(self, spec: "UnitSpec", graph: Graph) -> float:
        """Simulated seconds the delegate's init takes on its unit (shader compilation, a driver's
        model compilation, a cache read), charged for each partition.
        When: once, at the interpreter's first allocation.
        Default: the unit's `init_s` from the profile."""
        return spec.init_s

    def invoke_seconds(self, spec: "UnitSpec") -> float:
        """Simulated seconds of the fixed cost of one invoke of a partition on its unit (a driver's
        execution call), before its ops run.
        When: every inference, for each partition.
        Default: the unit's `invoke_s` from the profile."""
        return spec.invoke_s

    def step_seconds(self, spec: "UnitSpec") -> float:
        """What it costs to start the partition's work on another of its units (NNAPI: that
        driver's execution call), paid each time the work moves to another unit.
        When: every inference, at each move between units inside a partition.
        Default: 0."""
        return 0.0

    def devices_for(self, partition: "Partition") -> tuple[str, ...]:
        """The profile's NNAPI devices (by name, main device first) the partition runs on: the
        profile entries besides its units whose figures its timing reads.
        When: a calibration, to know which fitted parameters a measurement informs.
        Default: () (no driver devices)."""
        return ()

    def use_profile(self, profile: "Profile") -> None:
        """Read its costs from another profile of the same phone (same units and devices, other
        figures); which node goes where does not change.
        When: a calibration re-times a plan on each candidate profile.
        Default: nothing to re-read (the framework re-reads the units itself)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
