"""The delegate conformance kit: a delegate's claimed ops run against the CPU reference, plus its failure handling.

For every op type the delegate claims (it supports at least one generated instance), each
instance it supports runs with a fresh delegate and with the CPU reference on the same seeded
inputs, and the outputs must agree within the tolerance of the kernel's numeric mode. Lifecycle
cases make it fail at each callback; contract cases check its declared hooks. The kit sits on top
of the runtime (it drives Interpreters), so it imports the runtime lazily.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from delegates.api import Delegate, DelegateError
from runtime.conformance.contract import contract_problems
from runtime.conformance.lifecycle import FailAt, lifecycle_case
from runtime.conformance.report import CaseResult, ConformanceReport, Verdict
from runtime.ir.graph import DType, Tensor
from runtime.ir.optypes import OpType
from runtime.limits.counts import MAX_CONFORMANCE_EXAMPLES
from sim.numerics import NumericMode

__all__ = ["Tolerance", "TOLERANCES", "PlannedCase", "ConformanceRun", "run_conformance",
           "resolve_factory", "compare"]


@dataclass(frozen=True)
class Tolerance:
    """How far a delegate may stray from the CPU reference: float outputs by a fraction of the
    reference output's span (max(max - min, max |y|), at least the largest |input|), 8-bit outputs
    by quantization steps."""

    relative: float
    steps: int
    why: str


TOLERANCES: dict[NumericMode | None, Tolerance] = {
    NumericMode.REFERENCE: Tolerance(1e-5, 0, "the CPU's own kernels in float32; integer ops exact"),
    NumericMode.FLOAT32_VIEW: Tolerance(1e-5, 2, "float32 kernels; on 8-bit models a float view whose "
                                        "fake-quantized output may land a step off on either rounding"),
    NumericMode.FLOAT16: Tolerance(1e-2, 2, "float16 rounds inputs, weights and every op's output to 11 "
                                   "significant bits (2**-11 ~ 4.9e-4 each); 1e-2 of the span covers a few "
                                   "such roundings adding up across a reduction, and stays far below a "
                                   "wrong result; 8-bit outputs: as the float32 view"),
    NumericMode.INTEGER: Tolerance(0.0, 0, "TFLite's integer arithmetic is exact"),
    NumericMode.MIXED: Tolerance(1e-2, 2, "integer ops exact, float ops in float16: as float16"),
    None: Tolerance(1e-4, 1, "a kernel of the delegate's own: float32 in any summation order, one "
                             "rounding step on 8-bit outputs"),
}

_EIGHT_BIT = (DType.INT8, DType.UINT8)


def compare(got: np.ndarray, want: np.ndarray, tensor: Tensor, tol: Tolerance,
            floor: float = 0.0) -> tuple[float, float, str, str]:
    """(error, limit, unit, problem) for one output; problem is '' when within the limit. A float
    output's scale is its span, but at least `floor` (the largest float input magnitude): float16
    rounds the inputs too, so an output far smaller than its inputs (a + b ~ 0, a ReLU cutting
    most values) still carries their rounding error."""
    got = np.asarray(got)
    if got.dtype != want.dtype or got.shape != want.shape:
        return np.inf, 0.0, "", (f"output '{tensor.name}' is {got.dtype}{list(got.shape)}, the reference "
                                 f"{want.dtype}{list(want.shape)}")
    if want.size == 0:
        return 0.0, 0.0, "abs", ""
    int_diff = float(np.abs(got.astype(np.int64) - want.astype(np.int64)).max()) if want.dtype.kind in "iu" else 0.0
    if tensor.dtype in _EIGHT_BIT and tensor.quant is not None:
        error, limit, unit = int_diff, float(tol.steps), "steps"
    elif want.dtype.kind == "f":
        w, g = want.astype(np.float64), got.astype(np.float64)
        span = max(float(np.ptp(w)), float(np.abs(w).max()), floor) or 1.0  # all zeros: a unit scale
        error = float(np.abs(g - w).max()) if np.isfinite(g).all() else np.inf
        limit, unit = tol.relative * span, "abs"
    else:  # integers with no quantization (indices, shapes) must be exact
        error, limit, unit = int_diff, 0.0, "abs"
    problem = "" if error <= limit else f"output '{tensor.name}' off by {error:.3g} {unit} (limit {limit:.3g})"
    return error, limit, unit, problem


def resolve_factory(factory: Callable[[], Delegate] | str) -> Callable[[], Delegate]:
    """A callable making fresh delegates; a "package.module:factory" path is loaded (and checked) now."""
    if isinstance(factory, str):
        from delegates.external import load_external

        load_external(factory)  # a bad path fails here, before any case runs
        return functools.partial(load_external, factory)
    if not callable(factory):
        raise DelegateError(f"a delegate factory must be callable or 'package.module:factory', "
                            f"not {type(factory).__name__}")
    return factory


@dataclass(frozen=True)
class PlannedCase:
    """One instance and the delegate's support answer for it (`error`: is_node_supported raised)."""

    case: Any  # runtime.testing.ops.OpCase
    index: int
    supported: bool
    reason: str = ""
    error: str = ""

    @property
    def op(self) -> str:
        return self.case.op_type.name

    @property
    def dtype(self) -> str:
        return self.case.dtype

    @property
    def name(self) -> str:
        return f"{self.op}/{self.dtype}/{self.index}"


@functools.lru_cache(maxsize=1024)
def _instances(op_type: OpType, dtype: str, examples: int, seed: int) -> tuple:
    """The generated instances; instance k depends on (seed, op, dtype, k) only, and graphs are
    immutable, so every run in the process shares them."""
    from runtime.testing.ops import case_rng, generate

    return tuple(generate(op_type, dtype, case_rng(seed, op_type.name, dtype, k)) for k in range(examples))


def _ops(ops: Iterable[OpType | str] | None) -> tuple[OpType, ...]:
    from runtime.testing.ops import OPS

    if ops is None:
        return OPS
    chosen = []
    for op in ops:
        op_type = op if isinstance(op, OpType) else OpType.__members__.get(str(op).strip().upper())
        if op_type not in OPS:
            raise DelegateError(f"no conformance cases for op '{op}'; ops: {', '.join(o.name for o in OPS)}")
        chosen.append(op_type)
    if not chosen:   # `--ops ,`: checking no op would pass, vacuously
        raise DelegateError(f"no op given to check; ops: {', '.join(o.name for o in OPS)}")
    return tuple(dict.fromkeys(chosen))


def _run(graph, inputs: Sequence[np.ndarray], delegates: list, device: Any):
    from runtime.interpreter.api import Interpreter

    it = Interpreter(graph=graph, experimental_delegates=delegates or None,
                     device=device if delegates else None, num_threads=1)
    it.allocate_tensors()
    for t, x in zip(graph.inputs, inputs):
        it.set_tensor(t, x)
    it.invoke()
    return [it.get_tensor(t) for t in graph.outputs], it


def _mode(kernel: Any) -> NumericMode | None:
    """The kernel's numeric mode; None for a kernel of the delegate's own (no mode, or one the
    testbed does not know: the contract case names it)."""
    if kernel.mode is None:
        return None
    try:
        return NumericMode.of(kernel.mode)
    except (KeyError, TypeError):
        return None


class ConformanceRun:
    """One delegate against the kit: `plan()` asks it about every instance (cheap); `execute()`
    runs one planned case; `lifecycle()` one failure-injection case; `report()` does it all."""

    def __init__(self, delegate_factory: Callable[[], Delegate] | str, device: Any = "generic",
                 examples: int = 10, seed: int = 0, ops: Iterable[OpType | str] | None = None):
        from sim.profile import load_profile

        if isinstance(examples, bool) or not isinstance(examples, int) or examples < 1:
            raise DelegateError(f"examples must be at least 1, not {examples!r}")
        if examples > MAX_CONFORMANCE_EXAMPLES:
            raise DelegateError(f"examples must be at most {MAX_CONFORMANCE_EXAMPLES:,} (each is generated and kept "
                                f"for every op and dtype before the first runs), not {examples:,}")
        self.factory = resolve_factory(delegate_factory)
        self.profile = load_profile(device) if isinstance(device, str) else device
        self.device = device if isinstance(device, str) else getattr(device, "name", str(device))
        self.examples, self.seed, self.ops = examples, seed, _ops(ops)
        self.notes: list[str] = []
        self._planned: tuple[PlannedCase, ...] | None = None
        self.unclaimed: tuple[tuple[str, str], ...] = ()

    def fresh(self) -> Delegate:
        """A new delegate from the factory. Its min_nodes_per_partition is lowered to 1: every
        graph here has one op, and a partition-size policy is not what the cases test."""
        delegate = self.factory()
        if not isinstance(delegate, Delegate):
            raise DelegateError(f"the factory returned {type(delegate).__name__}, not a Delegate")
        if delegate.options.min_nodes_per_partition > 1:
            note = (f"min_nodes_per_partition lowered from {delegate.options.min_nodes_per_partition} to 1 "
                    f"for single-op graphs")
            if note not in self.notes:
                self.notes.append(note)
            delegate.options = dataclasses.replace(delegate.options, min_nodes_per_partition=1)
        return delegate

    def plan(self) -> tuple[PlannedCase, ...]:
        """Every instance of every claimed op/dtype pair, plus the rejections without a reason
        among unclaimed pairs; unclaimed pairs themselves go to `unclaimed`."""
        if self._planned is not None:
            return self._planned
        from runtime.testing.ops import supported_dtypes

        planned, unclaimed = [], []
        for op_type in self.ops:
            for dtype in supported_dtypes(op_type):
                probe = self.fresh()
                answers = [self._ask(probe, case, k)
                           for k, case in enumerate(_instances(op_type, dtype, self.examples, self.seed))]
                if any(a.supported or a.error for a in answers):
                    planned.extend(answers)
                else:
                    unclaimed.append((f"{op_type.name}/{dtype}", answers[0].reason))
                    planned.extend(a for a in answers if not a.reason.strip())
        self._planned, self.unclaimed = tuple(planned), tuple(unclaimed)
        return self._planned

    @staticmethod
    def _ask(delegate: Delegate, case, k: int) -> PlannedCase:
        try:
            answer = delegate.is_node_supported(case.op, case.graph)
        except Exception as exc:  # the kit reports it rather than stopping
            return PlannedCase(case, k, False, error=f"{type(exc).__name__}: {exc}")
        return PlannedCase(case, k, bool(answer), str(getattr(answer, "reason", "") or ""))

    def _inputs(self, p: PlannedCase) -> list[np.ndarray]:
        from runtime.testing.ops import case_rng, sample_inputs

        return sample_inputs(p.case, case_rng(self.seed, p.op, p.dtype, p.index, "inputs"))

    def execute(self, p: PlannedCase) -> CaseResult:
        """Run one planned case: a support answer to judge, or the delegate against the CPU."""
        row = functools.partial(CaseResult, p.op, p.dtype, p.index, p.case.shapes, p.case.options)
        if p.error:
            return row(Verdict.FAIL, message=f"is_node_supported raised {p.error}")
        if not p.supported:
            return (row(Verdict.REJECTED, message=p.reason) if p.reason.strip()
                    else row(Verdict.FAIL, message="rejected without a reason (Support.reason is empty)"))
        graph, inputs = p.case.graph, self._inputs(p)
        reference, _ = _run(graph, inputs, [], None)
        try:
            delegate = self.fresh()
            outputs, it = _run(graph, inputs, [delegate], self.profile)
        except Exception as exc:
            return row(Verdict.FAIL, message=f"{type(exc).__name__}: {exc}")
        delegation = it.simulation.delegation
        if delegation.restored:
            return row(Verdict.FAIL, message=f"failed while being applied: {delegation.per_delegate[-1].error}")
        placement = delegation.placement()
        off = [i for i, op in enumerate(graph.ops)
               if op.type is p.case.op_type and placement.get(i) != delegate.name]
        if off:
            return row(Verdict.FAIL, message=f"claimed, but {graph.describe_op(off[0])} ran on "
                                             f"{placement.get(off[0])}")
        from runtime.interpreter.delegation import DelegateStep

        kernel = next(s.kernel for s in delegation.plan if isinstance(s, DelegateStep))
        return self._judge(row, graph, inputs, outputs, reference, _mode(kernel))

    @staticmethod
    def _judge(row, graph, inputs, outputs, reference, mode: NumericMode | None) -> CaseResult:
        tol = TOLERANCES[mode]
        floor = max((float(np.abs(x).max(initial=0.0)) for x in inputs if x.dtype.kind == "f"), default=0.0)
        worst = (-1.0, 0.0, 0.0, "", "")
        for t, got, want in zip(graph.outputs, outputs, reference):
            error, limit, unit, problem = compare(got, want, graph.tensors[t], tol, floor)
            ratio = error / limit if limit else (np.inf if error else 0.0)
            if ratio > worst[0]:
                worst = (ratio, error, limit, unit, problem)
        _, error, limit, unit, problem = worst
        label = mode.value if mode is not None else "own kernel"
        return row(Verdict.FAIL if problem else Verdict.PASS, error, limit, unit, label, problem)

    def lifecycle(self, at: FailAt) -> CaseResult | None:
        """One failure-injection case on the first instance the delegate takes (None: it takes none)."""
        target = next((p for p in self.plan() if p.supported), None)
        if target is None:
            return None
        inputs = self._inputs(target)
        reference, _ = _run(target.case.graph, inputs, [], None)
        problem = lifecycle_case(self.fresh, at, target.case.graph, inputs, reference, self.profile)
        return CaseResult("lifecycle", target.dtype, 0, target.case.shapes, f"fail in {at.value}",
                          Verdict.FAIL if problem else Verdict.PASS,
                          message=problem or f"CPU outputs after the failure (on {target.name})",
                          case_id=f"lifecycle/{at.value}")

    def contract(self) -> tuple[CaseResult, ...]:
        """One failed case per declared hook (delegates.api) the delegate or its kernel breaks: the
        wrong type, a signature the runtime cannot call, a call that raises or returns the wrong type,
        checked on the first instance it takes. A delegate keeping the contract adds no row."""
        target = next((p for p in self.plan() if p.supported), None)
        graph = target.case.graph if target is not None else None
        try:
            problems = contract_problems(self.fresh(), graph, self.profile)
        except Exception as exc:  # anything escaping the checks is the finding
            problems = [("Delegate", f"checking the contract raised {type(exc).__name__}: {exc}")]
        dtype, shapes = (target.dtype, target.case.shapes) if target is not None else ("-", "-")
        return tuple(CaseResult("contract", dtype, 0, shapes, f"hook {hook}", Verdict.FAIL, message=message,
                                case_id=f"contract/{hook}") for hook, message in problems)

    def report(self) -> ConformanceReport:
        cases = [self.execute(p) for p in self.plan()]
        lifecycle = [self.lifecycle(at) for at in FailAt]
        if None in lifecycle:
            self.notes.append("lifecycle cases not run: the delegate takes none of the generated graphs")
        cases.extend(c for c in lifecycle if c is not None)
        cases.extend(self.contract())
        name = self.fresh().name
        return ConformanceReport(name, self.device, self.seed, self.examples, tuple(cases), self.unclaimed,
                                 tuple(self.notes))


def run_conformance(delegate_factory: Callable[[], Delegate] | str, device: Any = "generic", examples: int = 10,
                    seed: int = 0, ops: Iterable[OpType | str] | None = None) -> ConformanceReport:
    """Run the kit on a delegate factory (or "package.module:factory") on a device profile; the
    same arguments give the same report."""
    return ConformanceRun(delegate_factory, device, examples, seed, ops).report()
