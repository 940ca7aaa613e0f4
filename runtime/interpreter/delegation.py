"""Applies delegates to a graph as TFLite does, from support queries to prepared kernels and log lines."""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from typing import Collection, Sequence, Union

import numpy as np

from delegates import guard
from delegates.registry import is_builtin
from delegates.api import Delegate, DelegateKernel, DelegationSummary, Support
from runtime.ir.errors import DelegateError
from runtime.ir.graph import DType, Graph, Op, OpType
from runtime.ir.partition import Partition, PlanNode, Subset, largest_partitions, partition_plan

__all__ = ["CpuStep", "DelegateStep", "Plan", "UnsupportedOp", "DelegateReport", "Delegation",
           "apply_delegates", "said_warnings", "RESTORED"]

# Subgraph::ModifyGraphWithDelegateImpl after RemoveAllDelegates (tflite/core/subgraph.cc).
RESTORED = "Restored original execution plan after delegate application failure."
# Subgraph::ModifyGraphWithDelegateImpl (tflite/core/subgraph.cc): a warning, not a restore.
STATIC_ONLY = ("Attempting to use a delegate that only supports static-sized tensors with a graph that has "
               "dynamic-sized tensors (tensor#{} is a dynamic-sized tensor).")
FP16_DEQUANTIZE = ("float16 weights: this DEQUANTIZE is delegated only when all its consumers are in the "
                   "largest partition")


@dataclass(frozen=True)
class CpuStep:
    """One op left to the CPU kernels."""

    op: int


@dataclass(frozen=True)
class DelegateStep:
    """One delegated partition: the node TFLite puts in the plan in place of its ops."""

    partition: Partition
    delegate: Delegate = field(compare=False)
    kernel: DelegateKernel = field(compare=False)


Plan = tuple[Union[CpuStep, DelegateStep], ...]


@dataclass(frozen=True)
class UnsupportedOp:
    """An op a delegate did not take, and why."""

    op: int
    name: str
    reason: str


@dataclass(frozen=True)
class DelegateReport:
    """What one delegate took. `unsupported`: ops it refused; `declined`: ops it accepted but the
    largest-N / min-nodes choice left on the CPU; `error`: why it was removed, if it was."""

    delegate: str
    nodes_delegated: int
    total_nodes: int
    partitions: int
    unsupported: tuple[UnsupportedOp, ...] = ()
    declined: tuple[UnsupportedOp, ...] = ()
    error: str = ""
    platform_refusal: str = ""   # the phone offers none of this delegate (Delegate.platform_refusal)
    warnings: tuple[str, ...] = ()   # what it said of its options when made (Delegate.warnings)
    max_delegated_partitions: int = 0   # the limits it was cut with (its DelegateOptions; <= 0: none)
    min_nodes_per_partition: int = 0
    over_limit: int = 0                 # supported nodes left out by max_delegated_partitions alone



@dataclass(frozen=True)
class Delegation:
    """The execution plan after every delegate, TFLite's log lines, and a report per delegate."""

    plan: Plan
    log: tuple[str, ...]
    per_delegate: tuple[DelegateReport, ...]
    restored: bool = False

    def delegated_ops(self) -> list[int]:
        """Op indices the delegates run, in plan order."""
        return [i for step in self.plan if isinstance(step, DelegateStep) for i in step.partition.nodes]

    def placement(self) -> dict[int, str]:
        """Op index -> "CPU" or the name of the delegate that runs it."""
        where: dict[int, str] = {}
        for step in self.plan:
            if isinstance(step, CpuStep):
                where[step.op] = "CPU"
            else:
                where.update(dict.fromkeys(step.partition.nodes, step.partition.delegate))
        return where


class _Failure(Exception):
    """A delegate failed: the log lines TFLite prints for it, before the restore."""

    def __init__(self, *lines: str):
        super().__init__(lines[0])
        self.lines = lines


def apply_delegates(graph: Graph, delegates: Sequence[Delegate], dynamic: Collection[int] = ()) -> Delegation:
    """Apply `delegates` in order, each to the plan the previous ones left (their nodes are opaque
    and never offered again). Nothing is raised to the caller:

    - an exception from a delegate removes every delegate, as TFLite's RemoveAllDelegates: the
      original CPU plan comes back, the log says so, and no later delegate is applied. So does an
      external delegate's callback that does not return within the time budget (delegates.guard;
      built-in delegates run in simulated time and are never watched), an answer that is
      not a Support or bool, a kernel that is not a DelegateKernel, or a delegate whose name, unit
      or options are unsound;
    - a delegate without `allows_dynamic_tensors`, on a plan where a node writes one of the
      `dynamic` tensors, is not applied: TFLite logs a warning and returns kTfLiteApplicationError
      without touching the plan, so earlier delegates stay and later ones are still tried."""
    cpu: Plan = tuple(CpuStep(i) for i in range(len(graph.ops)))
    plan, log, reports = cpu, [], []
    node_number = len(graph.ops)  # TFLite numbers delegate nodes after the model's own
    for delegate in delegates:
        static_only = not delegate.allows_dynamic_tensors
        blocked = _first_dynamic(graph, plan, dynamic) if static_only else None
        if blocked is not None:
            log.append(STATIC_ONLY.format(blocked))
            reports.append(DelegateReport(delegate.name, 0, len(plan), 0, error=log[-1],
                                          platform_refusal=_refusal(delegate), warnings=said_warnings(delegate)))
            continue
        try:
            _check(delegate)
            plan, report = _apply_one(graph, plan, delegate, log, node_number)
        except _Failure as failure:
            log.extend((*failure.lines, RESTORED))
            undone = [r if r.error else dataclasses.replace(
                r, nodes_delegated=0, partitions=0, error=f"removed when {delegate.name} failed") for r in reports]
            failed = DelegateReport(_name(delegate), 0, len(plan), 0, error=str(failure))
            return Delegation(cpu, tuple(log), (*undone, failed), restored=True)
        node_number += report.partitions
        reports.append(report)
    return Delegation(plan, tuple(log), tuple(reports))


def _apply_one(graph: Graph, plan: Plan, delegate: Delegate, log: list[str],
               node_number: int) -> tuple[Plan, DelegateReport]:
    """One delegate as TFLite's delegate helpers and ReplaceNodeSubsetsWithDelegateKernels do it:
    ask, preview, choose, re-partition, log, create the kernels, prepare them."""
    nodes = [_plan_node(graph, step) for step in plan]
    answers = _Answers.collect(graph, plan, delegate)
    ready = _always_ready(graph)
    preview = partition_plan(nodes, answers.supported, ready, graph.outputs)
    options = delegate.options
    chosen = largest_partitions(preview, options.max_delegated_partitions, options.min_nodes_per_partition)
    selected = {i for s in chosen for i in s.nodes} | answers.fp16_dequantizes(nodes, chosen)
    final = partition_plan(nodes, selected, ready, graph.outputs) if selected else ()
    previewed = sum(s.delegated for s in preview)
    summary = DelegationSummary(len(selected), len(plan), previewed, len(chosen), tuple(sorted(answers.messages)))
    log.extend(_log_lines(delegate, summary))
    if selected:
        # Subgraph::ReplaceNodeSubsetsWithDelegateKernels (tensorflow/lite/core/subgraph.cc, TF 2.10-2.16;
        # later LiteRT ends the line "for subgraph 0.").
        log.append(f"Replacing {len(selected)} out of {len(plan)} node(s) with delegate ({delegate.name}) "
                   f"node, yielding {len(final)} partitions for the whole graph.")
    new_plan, created = _rebuild(graph, plan, final, delegate) if selected else (plan, ())
    _prepare(created, delegate, node_number)
    taken = {plan[i].op for i in selected}
    refused = tuple(n for n in answers.notes if n.op not in taken)
    declined = _declined(graph, plan, preview, chosen, options)
    kept = {id(c) for c in chosen}
    over = sum(len(s.nodes) for s in preview if s.delegated and id(s) not in kept
               and len(s.nodes) >= options.min_nodes_per_partition)
    report = DelegateReport(delegate.name, len(selected), len(plan), len(created), refused, declined,
                            platform_refusal=_refusal(delegate), warnings=said_warnings(delegate),
                            max_delegated_partitions=options.max_delegated_partitions,
                            min_nodes_per_partition=options.min_nodes_per_partition, over_limit=over)
    return new_plan, report


def _refusal(delegate: Delegate) -> str:
    refusal = delegate.platform_refusal
    return refusal if isinstance(refusal, str) else ""


def said_warnings(delegate: Delegate) -> tuple[str, ...]:
    """Delegate.warnings, the lines that are text (a record carries them; they change no plan)."""
    said = delegate.warnings
    return tuple(w for w in said if isinstance(w, str)) if isinstance(said, (list, tuple)) else ()


def _watched(delegate: Delegate, what: str, body):
    """body(call), where call(name, fn, *args) runs one callback; any exception becomes a delegate
    failure. An external delegate's callbacks run on its watched thread (delegates.guard), each
    within the time budget, one hand-off for a whole loop of callbacks; a built-in delegate's run
    here, unwatched, so its outcome never hangs on how busy the host is."""
    def run(mark):
        def call(name: str, fn, *args):
            mark(name)
            try:
                return fn(*args)
            except _Failure:
                raise
            except (Exception, SystemExit) as exc:  # a delegate's bug must restore the CPU plan too, as in TFLite
                raise _failure(name, exc) from None
        return body(call)

    try:
        return run(lambda _: None) if is_builtin(delegate) else guard.run(run, what)
    except _Failure:
        raise
    except Exception as exc:  # a call past the budget, or SystemExit and the like from delegate code
        raise _failure(what, exc) from None


def _failure(what: str, exc: Exception) -> _Failure:
    text = str(exc) or type(exc).__name__
    return _Failure(text if isinstance(exc, DelegateError) else f"{what}: {type(exc).__name__}: {text}")


def _name(delegate: Delegate) -> str:
    """The delegate's name for the report, or its class's when the name itself is unsound."""
    try:
        name = delegate.name
    except Exception:  # a failing property: check_delegate reports it; the report still needs a name
        name = None
    return name if isinstance(name, str) and name else type(delegate).__name__


def _check(delegate: Delegate) -> None:
    """The attributes partitioning reads must be sound before the delegate is asked anything."""
    from delegates.external import check_delegate

    try:
        check_delegate(delegate, _name(delegate))
    except DelegateError as exc:
        raise _Failure(str(exc)) from None


def _support(answer, what: str) -> Support:
    """is_node_supported's answer: a Support, or a bool (TFLite's own callback returns one)."""
    if isinstance(answer, Support):
        if not isinstance(answer.ok, (bool, np.bool_)):
            raise _Failure(f"{what} returned a Support whose ok is {_kind(answer.ok)}, not a bool")
        return answer if isinstance(answer.reason, str) else Support(bool(answer.ok), str(answer.reason))
    if isinstance(answer, (bool, np.bool_)):
        return Support(bool(answer))
    raise _Failure(f"{what} returned {_kind(answer)}, not a Support or a bool")


def _kind(value) -> str:
    return "None" if value is None else f"{type(value).__name__} {value!r:.60}"


def _kernel(kernel, what: str) -> DelegateKernel:
    if not isinstance(kernel, DelegateKernel):
        raise _Failure(f"{what} returned {_kind(kernel)}, not a delegates.api.DelegateKernel")
    return kernel


def _rebuild(graph: Graph, plan: Plan, subsets: Sequence[Subset],
             delegate: Delegate) -> tuple[Plan, tuple[DelegateStep, ...]]:
    """The plan in subset order, and its new delegate nodes: CPU subsets keep their steps, each
    delegated one becomes one node whose kernel is created (TFLite's Init) as it is added."""
    what = f"{delegate.name} create_kernel"

    def body(call) -> tuple[Plan, tuple[DelegateStep, ...]]:
        steps: list[CpuStep | DelegateStep] = []
        created: list[DelegateStep] = []
        for s in subsets:
            if not s.delegated:
                steps.extend(plan[i] for i in s.nodes)
                continue
            ops = tuple(plan[i].op for i in s.nodes)
            partition = Partition(graph, ops, s.inputs, s.outputs, delegate.name)
            kernel = _kernel(call(what, delegate.create_kernel, partition), what)
            created.append(DelegateStep(partition, delegate, kernel))
            steps.append(created[-1])
        return tuple(steps), tuple(created)

    return _watched(delegate, what, body)


def _prepare(created: Sequence[DelegateStep], delegate: Delegate, node_number: int) -> None:
    what = f"{delegate.name} prepare"
    current = [node_number]

    def body(call) -> None:
        for number, step in enumerate(created, node_number):
            current[0] = number
            call(what, step.kernel.prepare)

    try:
        _watched(delegate, what, body)
    except _Failure as failure:  # Subgraph::PrepareOpsStartingAt names the node
        raise _Failure(*failure.lines, f"Node number {current[0]} ({delegate.name}) failed to prepare.") from None


class _Answers:
    """A delegate's support answers over one plan, with TFLite's fp16 bookkeeping
    (FP16GraphPartitionHelper in tensorflow/lite/delegates/utils.cc, TF 2.3-2.12)."""

    def __init__(self) -> None:
        self.supported: set[int] = set()
        self.notes: list[UnsupportedOp] = []
        self.messages: set[str] = set()  # "OPNAME: reason", as GraphPartitionHelper collects them
        self.dequantize_at: dict[int, int] = {}  # fp16 DEQUANTIZE output tensor -> plan position
        self.consumers: Counter = Counter()  # input slots reading each of those tensors

    @classmethod
    def collect(cls, graph: Graph, plan: Plan, delegate: Delegate) -> "_Answers":
        """Every answer; an external delegate's asked on its watched thread, each within the budget."""
        what = f"{delegate.name} is_node_supported"
        return _watched(delegate, what, lambda call: cls._collect(graph, plan, delegate, call, what))

    @classmethod
    def _collect(cls, graph: Graph, plan: Plan, delegate: Delegate, call, what: str) -> "_Answers":
        fp16 = delegate.fp16_dequant_rule
        answers = cls()
        for pos, step in enumerate(plan):
            if isinstance(step, DelegateStep):
                # TFLite asks about an earlier delegate's node too; GPU answers its generic refusal.
                answers.messages.add(f"DELEGATE {step.partition.delegate}: Operation is not supported.")
                answers._count(step.partition.inputs)
                continue
            op = graph.ops[step.op]
            answers._count(op.inputs)
            if fp16 and _is_fp16_dequantize(op, graph):
                answers.dequantize_at[op.outputs[0]] = pos
                answers.notes.append(UnsupportedOp(step.op, op.name, FP16_DEQUANTIZE))
                answers.messages.add(f"{_tflite_name(op)}: ")  # it refuses with no detail
                continue
            answer = _support(call(what, delegate.is_node_supported, op, graph), what)
            if answer:
                answers.supported.add(pos)
            else:
                reason = answer.reason
                answers.notes.append(UnsupportedOp(step.op, op.name, reason))
                answers.messages.add(f"{_tflite_name(op)}: {reason}")
        return answers

    def _count(self, inputs: Sequence[int]) -> None:
        if self.dequantize_at:
            self.consumers.update(t for t in inputs if t in self.dequantize_at)

    def fp16_dequantizes(self, nodes: Sequence[PlanNode], chosen: Sequence[Subset]) -> set[int]:
        """fp16 DEQUANTIZEs whose every consumer lies in the first (largest) chosen partition."""
        if not chosen or not self.dequantize_at:
            return set()
        inside = Counter(t for i in chosen[0].nodes for t in nodes[i].inputs if t in self.dequantize_at)
        return {self.dequantize_at[t] for t, n in inside.items() if n == self.consumers[t]}


def _log_lines(delegate: Delegate, summary: DelegationSummary) -> list[str]:
    """The delegate's own line(s) before the graph is rewritten (its log_lines hook), asked like
    every other callback of the application (an external delegate's on its watched thread)."""
    what = f"{delegate.name} log_lines"
    lines = _watched(delegate, what, lambda call: call(what, delegate.log_lines, summary))
    if not isinstance(lines, (list, tuple)) or not all(isinstance(line, str) for line in lines):
        raise _Failure(f"{what} returned {_kind(lines)}, not a list of str")
    return _capped(what, lines)


MAX_LOG_LINES = 100      # a delegate's own lines kept from one application; the rest are counted
MAX_LOG_LINE_CHARS = 1000


def _capped(what: str, lines: Sequence[str]) -> list[str]:
    """At most MAX_LOG_LINES lines of at most MAX_LOG_LINE_CHARS each, so a delegate logging a
    million lines cannot flood the terminal, the record or memory."""
    kept = [line if len(line) <= MAX_LOG_LINE_CHARS else line[:MAX_LOG_LINE_CHARS] + " [cut]"
            for line in lines[:MAX_LOG_LINES]]
    if len(lines) > MAX_LOG_LINES:
        kept.append(f"({what} gave {len(lines) - MAX_LOG_LINES} more lines, not shown)")
    return kept


def _declined(graph: Graph, plan: Plan, preview: Sequence[Subset], chosen: Sequence[Subset],
              options) -> tuple[UnsupportedOp, ...]:
    taken = {id(s) for s in chosen}
    notes = []
    for s in preview:
        if not s.delegated or id(s) in taken:
            continue
        if len(s.nodes) < options.min_nodes_per_partition:
            why = (f"supported, but its partition of {len(s.nodes)} node(s) is below "
                   f"min_nodes_per_partition ({options.min_nodes_per_partition})")
        else:
            why = (f"supported, but its partition of {len(s.nodes)} node(s) is not among the "
                   f"{options.max_delegated_partitions} largest (max_delegated_partitions)")
        notes.extend(UnsupportedOp(plan[i].op, graph.ops[plan[i].op].name, why) for i in s.nodes)
    return tuple(sorted(notes, key=lambda n: n.op))


# -- plan nodes --------------------------------------------------------------------------------

_CONTROL_FLOW = frozenset({OpType.IF, OpType.WHILE, OpType.CALL_ONCE})


def _plan_node(graph: Graph, step: CpuStep | DelegateStep) -> PlanNode:
    """An op, or an earlier delegate's node as TFLite adds it: the partition's inputs and outputs.
    Side effects as Subgraph::OpMightHaveSideEffect: a resource tensor, or control flow."""
    if isinstance(step, CpuStep):
        op = graph.ops[step.op]
        ins, outs, flow = op.inputs, op.outputs, op.type in _CONTROL_FLOW
    else:
        ins, outs, flow = step.partition.inputs, step.partition.outputs, False
    resource = any(t >= 0 and graph.tensors[t].dtype is DType.RESOURCE for t in (*ins, *outs))
    return PlanNode(tuple(ins), tuple(outs), flow or resource)


def _always_ready(graph: Graph) -> set[int]:
    ready = set(graph.inputs)
    ready.update(t for t, x in enumerate(graph.tensors) if x.is_constant or x.is_variable)
    return ready


def _is_fp16_dequantize(op: Op, graph: Graph) -> bool:
    if op.type is not OpType.DEQUANTIZE or not op.inputs or op.inputs[0] < 0:
        return False
    source = graph.tensors[op.inputs[0]]
    return source.dtype is DType.FLOAT16 and source.is_constant


def _tflite_name(op: Op) -> str:
    """GetOpNameByRegistration (tflite/util.cc): custom ops as "CUSTOM name"."""
    return f"CUSTOM {op.custom_code}" if op.type is OpType.CUSTOM and op.custom_code else op.type.name


# -- dynamic shapes ----------------------------------------------------------------------------

def _first_dynamic(graph: Graph, plan: Plan, dynamic: Collection[int]) -> int | None:
    """The tensor TFLite's PrepareOpsStartingAt finds: the first dynamic output of the first node,
    in plan order, to have one; -1 when only a model output is (TFLite's index is then unset);
    None when the plan shows no dynamic tensor."""
    if not dynamic:
        return None
    for step in plan:
        outs = graph.ops[step.op].outputs if isinstance(step, CpuStep) else step.partition.outputs
        for t in outs:
            if t in dynamic:
                return t
    return -1 if any(t in dynamic for t in graph.outputs) else None
