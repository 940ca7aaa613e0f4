"""Walks an execution plan on a simulated phone: CPU ops on the CPU, delegated partitions on their unit."""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Generator, Iterator, Sequence

import numpy as np

from runtime.interpreter import hook_values
from runtime.interpreter.delegate_invoke import invoke_partition
from runtime.interpreter.delegation import CpuStep, DelegateStep, Plan
from runtime.ir.errors import DelegateError
from runtime.ir.graph import DType, Graph
from runtime.interpreter.model_state import one_pass
from runtime.ops.opcheck_control import calls
from sim.charge import Begin, Charge, Compute, Crossing, Hold, Run, Bill, Timeline, sequential
from sim.cost import OpClass, Precision, Work
from sim.numerics import NumericMode, is_quantized, op_precision, op_precision_on
from sim.soc import SoC
from sim.trace import Kind
from sim.unit import Scales, Tag, Unit
from sim.work import BANDED, describe, graph_tensor_bytes, op_class, tensor_bytes

__all__ = ["Executor", "OpJob", "PartitionJob"]

# TFLite prints its delegation lines through its logger; so do we (the CLI shows them).
_LOG = logging.getLogger("delegate_testbed")

_VIEWS = (NumericMode.FLOAT32_VIEW, NumericMode.FLOAT16)
_MATRIX = (OpClass.CONV, OpClass.GEMM)   # ops an HTP runs on its matrix unit, in its own layout


@dataclass(frozen=True)
class OpJob:
    """One op's cost on its unit, fixed when the plan is built (shapes are static per allocation),
    and what its trace slice shows besides (node, output shape and type, delegate)."""

    op: int
    work: Work
    args: tuple[tuple[str, object], ...] = ()
    unit: Unit | None = None       # inside a partition: another unit than the partition's (NNAPI steps)
    scales: Scales | None = None


@dataclass(frozen=True)
class PartitionJob:
    step: DelegateStep
    unit: Unit
    mode: NumericMode
    scales: Scales
    ops: tuple[OpJob, ...]
    inputs: tuple[tuple[int, int], ...]      # (tensor, bytes crossing in)
    outputs: tuple[tuple[int, int], ...]     # (tensor, bytes crossing out)
    to_float: int                            # elements (de)quantized on the CPU at the boundary
    weights: int                             # constant bytes uploaded at init
    float_edge_bytes: int = 0                # bytes a float16 graph reads at its float32 edges: its image before
                                             # the first matrix op, its outputs (sim/htp.float_edge_seconds)


def _scales(step: DelegateStep, unit: Unit) -> Scales:
    """A delegate may move its unit off the nominal point (backend, execution preference)."""
    return hook_values.scales(step.delegate, unit)


class Executor:
    """The simulated side of an Interpreter. Math happens when a step runs (host time, never
    counted); simulated time comes only from the cost model, so results are deterministic."""

    def __init__(self, graph: Graph, plan: Plan, soc: SoC, shapes: Sequence[tuple[int, ...]], threads: int,
                 folded: frozenset[int], run_cpu: Callable[[int], object], values: list):
        """`run_cpu(op)` runs one op's math; for a control-flow op it returns what the subgraphs it
        ran executed (runtime.interpreter.model_state.ModelState.ran's form), which is charged too."""
        self.graph, self.plan, self.soc, self.threads = graph, plan, soc, max(1, threads)
        self.folded, self.run_cpu, self.values = folded, run_cpu, values
        self.shapes = list(shapes)
        self._placed: Counter = Counter()   # unit -> weight bytes of the delegated ops before, in plan order
        self._readers = graph.consumers()   # tensor -> the ops that read it (_streamed, per partition)
        self.jobs = [self._job(step) for step in plan]
        self._works = _run_works(plan, self.jobs)
        self.control = frozenset(i for i, op in enumerate(graph.ops) if calls(op))  # IF, WHILE, CALL_ONCE
        self._subgraph_works: dict = {}
        self.nonfinite: Counter = Counter()   # (delegate, output tensor) -> invokes that gave NaN or inf

    def on(self, soc: SoC, threads: int | None = None) -> "Executor":
        """The same plan on another phone with the same units (a calibration re-times one plan on
        many profiles): the work descriptions are kept; units, scales and costs are the new phone's.
        `threads` re-times it at another CPU thread count (which changes no partition or work)."""
        new = copy.copy(self)
        new.soc = soc
        if threads is not None:
            new.threads = max(1, threads)
        new.jobs = list(self.jobs)
        for k, works in self._works:
            if k >= 0:   # a partition (the CPU's jobs name no unit)
                new.jobs[k] = _moved(self.jobs[k], soc)
        return new

    # -- building the jobs --------------------------------------------------------------------

    def _work(self, op_index: int, precision: Precision, align: int) -> Work:
        return describe(self.graph.ops[op_index], self.graph, self.shapes, precision, align)

    def _job(self, step):
        if isinstance(step, CpuStep):
            if step.op in self.folded:
                return None
            op = self.graph.ops[step.op]
            return OpJob(step.op, self._work(step.op, op_precision(op, self.graph), 1), self._args(step.op))
        return self._partition_job(step)

    def _partition_job(self, step: DelegateStep) -> PartitionJob:
        try:
            unit = self.soc.unit(hook_values.kernel_unit(step.delegate, step.kernel) or _unit_for(step, self.soc))
        except KeyError as exc:  # a delegate made for another phone than the one it runs on
            raise DelegateError(f"{step.delegate.name}: {exc.args[0]}") from None
        # a kernel of the delegate's own (no mode) is charged as the CPU reference computes
        mode = hook_values.mode(step.delegate, step.kernel)
        graph, part = self.graph, step.partition
        ops = []
        streamed = self._streamed(part)
        fused = hook_values.fused_nodes(step.delegate, part)
        absorbed = hook_values.absorbed_nodes(step.delegate, part)
        elsewhere = hook_values.node_units(step.delegate, part)
        for i in part.nodes:
            if i in self.folded:
                continue
            own = self._unit(step, elsewhere[i]) if i in elsewhere else None
            runs_on = own or unit
            precision = op_precision_on(graph.ops[i], graph, mode, runs_on.runs)
            if not runs_on.runs(precision):
                raise DelegateError(f"{graph.describe_op(i)}: the {runs_on.name} of {self.soc.profile.name} "
                                    f"has no {precision.value} rate")
            work = self._work(i, precision, runs_on.channel_align)
            if i in fused:
                work = _linked(work, graph.ops[i], graph, self.shapes, runs_on.channel_align)
            if i in absorbed:
                work = _absorbed(work)
            # where weights fill a unit's on-chip memory in plan order (sim/mechanisms.sram_resident),
            # and which of its tensors cross the partition's boundary (sim/htp.vtcm_split)
            work = dataclasses.replace(work, weights_before=self._placed[runs_on.name],
                                       edge_bytes=self._edge_bytes(graph.ops[i], part, precision,
                                                                   runs_on.channel_align),
                                       # a linked op reads only its side input, never streamed (_linked)
                                       streamed_bytes=0 if i in fused else sum(
                                           graph_tensor_bytes(graph, self.shapes, t, precision, runs_on.channel_align)
                                           for t in streamed.get(i, ())))
            self._placed[runs_on.name] += work.weight_bytes
            ops.append(OpJob(i, work, self._args(i) + (("delegate", step.delegate.name),), own,
                              _scales(step, own) if own is not None else None))
        inputs = [t for t in part.inputs if not graph.tensors[t].is_constant]
        to_float = sum(int(np.prod(self.shapes[t])) for t in (*inputs, *part.outputs)
                       if mode in _VIEWS and is_quantized(graph.tensors[t]))
        weights = {t for i in part.nodes for t in graph.ops[i].inputs if t >= 0 and graph.tensors[t].is_constant}
        return PartitionJob(step, unit, mode, _scales(step, unit), tuple(ops),
                             tuple((t, self._bytes(t)) for t in inputs),
                             tuple((t, self._bytes(t)) for t in part.outputs), to_float,
                             sum(self._bytes(t) for t in weights),
                             self._flat_input_bytes(inputs, ops) + self._flat_output_bytes(part.outputs, ops))

    def _flat_input_bytes(self, inputs: Sequence[int], ops: Sequence[OpJob]) -> int:
        """Float32 bytes that the float16 ops before the partition's first convolution or fully
        connected op read from its float32 inputs and from what those ops make of them: the image's
        normalisation, padding and any filter up to the first matrix op (sim/htp.float_edge_seconds).
        An element-wise op by one scalar constant reads nothing here: it treats every value alike."""
        graph = self.graph
        flat = {t for t in inputs if graph.tensors[t].dtype is DType.FLOAT32}
        total = 0
        for job in ops:
            node = graph.ops[job.op]
            read = [t for t in node.inputs if t >= 0 and t in flat]
            if not read or job.work.precision is not Precision.FLOAT16 or job.work.op_class in _MATRIX:
                continue
            flat.update(t for t in node.outputs if t >= 0)
            if not self._by_scalar(node, job.work):
                total += sum(self._bytes(t) for t in read)
        return total

    def _flat_output_bytes(self, outputs: Sequence[int], ops: Sequence[OpJob]) -> int:
        """Float16 bytes of the partition's float32 outputs that its float16 ops make: each is read once
        as it leaves in float32, in the app's layout (sim/htp.float_edge_seconds)."""
        graph = self.graph
        made = {t for job in ops if job.work.precision is Precision.FLOAT16 for t in graph.ops[job.op].outputs}
        return sum(tensor_bytes(self.shapes[t], Precision.FLOAT16) for t in outputs
                   if t in made and graph.tensors[t].dtype is DType.FLOAT32)

    def _by_scalar(self, node, work: Work) -> bool:
        """An element-wise op whose constant operand is one value (a scale or shift for every channel)."""
        return work.op_class is OpClass.ELEMENTWISE and any(
            t >= 0 and self.graph.tensors[t].is_constant and int(np.prod(self.shapes[t])) == 1 for t in node.inputs)

    def _edge_bytes(self, op, part, precision: Precision, align: int) -> int:
        """Bytes, as the unit stores them, of the op's tensors the partition takes in or gives out."""
        edges = set(part.inputs) | set(part.outputs)
        return sum(graph_tensor_bytes(self.graph, self.shapes, t, precision, align)
                   for t in (*op.inputs, *op.outputs)
                   if t >= 0 and t in edges and not self.graph.tensors[t].is_constant)

    def _streamed(self, part) -> dict[int, list[int]]:
        """Per node of the partition, the tensors it passes to the node after it in plan order, or takes
        from the node before, that no other op reads and the app never sees, both nodes walking rows
        (sim/work.BANDED): the pair can run band by band in an HTP's VTCM (sim/htp.vtcm_split)."""
        graph, nodes = self.graph, [n for n in part.nodes if n not in self.folded]
        readers, outputs = self._readers, set(graph.outputs)
        out: dict[int, list[int]] = {}
        for a, b in zip(nodes, nodes[1:]):
            if op_class(graph.ops[a].type) not in BANDED or op_class(graph.ops[b].type) not in BANDED:
                continue
            for t in graph.ops[a].outputs:
                if t >= 0 and t not in outputs and readers.get(t) == [b]:
                    out.setdefault(a, []).append(t)
                    out.setdefault(b, []).append(t)
        return out

    def _unit(self, step: DelegateStep, name: str) -> Unit:
        try:
            return self.soc.unit(name)
        except KeyError as exc:
            raise DelegateError(f"{step.delegate.name}: {exc.args[0]}") from None

    def _args(self, i: int) -> tuple[tuple[str, object], ...]:
        out = self.graph.ops[i].outputs[0] if self.graph.ops[i].outputs else -1
        if out < 0:
            return (("node", i),)
        return (("node", i), ("shape", str(list(self.shapes[out]))), ("dtype", self.graph.tensors[out].dtype.name))

    def _bytes(self, t: int) -> int:
        """A tensor's bytes as the CPU holds it: what a boundary copy moves."""
        return tensor_bytes(self.shapes[t], self.graph.tensors[t].dtype)

    # -- SimPy processes ----------------------------------------------------------------------

    def initialize(self, tag: Tag = Tag()) -> Generator:
        """Delegate init: compile / graph preparation on the unit, then the weights uploaded."""
        for job in self.jobs:
            if not isinstance(job, PartitionJob):
                continue
            delegate = job.step.delegate
            seconds = hook_values.seconds(delegate, "init_seconds", delegate.init_seconds, job.unit.spec, self.graph)
            precision = job.ops[0].work.precision if job.ops else Precision.FLOAT32
            yield from job.unit.hold(seconds, f"{job.step.delegate.name} init", Kind.INIT, tag, precision,
                                     job.scales)
            if job.weights:
                yield from self.soc.copy(job.weights, "weights upload", tag, job.unit.spec.convert_per_s)

    def inference(self, tag: Tag, math: bool = True) -> Generator:
        """One invoke: every step in plan order, charging the simulated phone as it goes."""
        for charge in self.charges(tag, math):
            yield from charge.run(self.soc, tag)

    def charges(self, tag: Tag, math: bool = True) -> Iterator[Charge]:
        """One invoke's charges in plan order; with `math`, each step's math runs as its charges
        are drawn (an op's before its compute, a partition's after its inputs have crossed)."""
        cpu = self.soc.cpu
        for step, job in zip(self.plan, self.jobs):
            if isinstance(step, CpuStep):
                if job is not None:  # None: a constant-only op, computed once at allocation
                    ran = self.run_cpu(step.op) if math else None
                    yield Compute(cpu, job.work, threads=self.threads, args=job.args)
                    if step.op in self.control:
                        yield from self._subgraph_ops(step.op, ran, tag)
            else:
                yield from self._partition(job, math)

    def alone(self) -> Timeline | None:
        """One timing-only invoke on an otherwise idle phone, its charges summed without SimPy
        (sim.charge.sequential: the same costs, the same clock). None where the charges depend on
        the invoke's place in a run (control flow charges one pass, the first run's branch
        differing), which only the simulation itself tells."""
        if self.control:
            return None
        return sequential(self.charges(Tag(), math=False), self.soc)

    def _subgraph_ops(self, i: int, ran, tag: Tag) -> Iterator[Charge]:
        """A control-flow op costs what it runs: each op of its subgraphs, charged on the CPU at the
        shapes it ran at, as often as it ran (every iteration of a WHILE). Without the math
        (timing-only) nothing tells the branch or the trip count: one pass is charged instead
        (runtime.interpreter.model_state.one_pass). The ops show in the trace under the control op's node."""
        if not isinstance(ran, Counter):
            ran = one_pass(self.graph, self.graph.ops[i], first=tag.inference == 0)
        for (k, j, shapes), n in ran.items():
            work = self._subgraph_work(k, j, shapes)
            args = (("node", i), ("subgraph", k), ("subgraph_op", j))
            for _ in range(n):
                yield Compute(self.soc.cpu, work, threads=self.threads, args=args)

    def _subgraph_work(self, k: int, j: int, shapes) -> Work:
        key = (k, j, shapes)
        if key not in self._subgraph_works:
            sub = self.graph.subgraph(k)
            op = sub.ops[j]
            self._subgraph_works[key] = describe(op, sub, dict(shapes), op_precision(op, sub), 1)
        return self._subgraph_works[key]

    def _step(self, job: PartitionJob, op: OpJob, unit: Unit) -> Iterator[Charge]:
        """Inside one delegated partition the work moves to another unit (NNAPI's runtime splits a
        model into steps, one per driver): the op's inputs go through shared memory and the new
        driver pays its own execution call."""
        name = job.step.delegate.name
        nbytes = sum(self._bytes(t) for t in self.graph.ops[op.op].inputs
                     if t >= 0 and not self.graph.tensors[t].is_constant)
        if nbytes:
            yield Crossing(nbytes, f"{name} step inputs")
        seconds = hook_values.seconds(job.step.delegate, "step_seconds", job.step.delegate.step_seconds, unit.spec)
        if seconds:
            yield Hold(unit, seconds, f"{name} step", Kind.INVOKE, op.work.precision, op.scales or job.scales)

    def _boundary_convert(self, job: PartitionJob, name: str) -> Iterator[Charge]:
        if job.to_float:  # 8-bit <-> float at the edge of a float-view partition, on the CPU
            work = Work(name, OpClass.ELEMENTWISE, Precision.FLOAT32, elem_ops=job.to_float,
                        bytes_read=job.to_float, bytes_written=4 * job.to_float)
            yield Compute(self.soc.cpu, work, threads=self.threads)

    def _partition(self, job: PartitionJob, math: bool) -> Iterator[Charge]:
        yield from self._entry(job)
        if math:  # watched and checked: a hang, a crash or a malformed output is a DelegateError
            name = job.step.delegate.name
            outputs, nonfinite = invoke_partition(job.step, {t: self.values[t] for t, _ in job.inputs},
                                                  self.graph, self.shapes)
            for t, _ in job.outputs:
                self.values[t] = outputs[t]
            for t in nonfinite:
                _flag_nonfinite(self.nonfinite, name, self.graph, t)
        yield from self._invoke(job)
        current = job.unit
        for op in job.ops:
            unit = op.unit or job.unit
            if unit is not current:  # the driver's runtime moves on to another device's step
                yield from self._step(job, op, unit)
                current = unit
            yield Compute(unit, op.work, op.scales or job.scales, args=op.args)
        yield from self._exit(job)

    def _entry(self, job: PartitionJob) -> Iterator[Charge]:
        """The partition's inputs: converted at the edge where the unit computes in float, then copied in."""
        name = job.step.delegate.name
        yield from self._boundary_convert(job, f"{name} input conversion")
        moved_in = sum(b for _, b in job.inputs)
        if moved_in:
            yield Crossing(moved_in, f"{name} inputs", job.unit.spec.convert_per_s)

    def _invoke(self, job: PartitionJob) -> Iterator[Charge]:
        """The delegate's call that starts the partition (e.g. an NNAPI driver's execution call), then its graph."""
        precision = job.ops[0].work.precision if job.ops else Precision.FLOAT32
        delegate = job.step.delegate
        seconds = hook_values.seconds(delegate, "invoke_seconds", delegate.invoke_seconds, job.unit.spec)
        if seconds:
            yield Hold(job.unit, seconds, f"{delegate.name} invoke", Kind.INVOKE, precision, job.scales)
        edges = job.unit.float_edge_seconds(job.float_edge_bytes, job.scales)
        if edges:
            yield Hold(job.unit, edges, f"{delegate.name} float edges", Kind.INVOKE, Precision.FLOAT16, job.scales)
        yield Begin(job.unit)

    def _exit(self, job: PartitionJob) -> Iterator[Charge]:
        name = job.step.delegate.name
        moved_out = sum(b for _, b in job.outputs)
        if moved_out:
            yield Crossing(moved_out, f"{name} outputs", job.unit.spec.convert_per_s)
        yield from self._boundary_convert(job, f"{name} output conversion")

    # -- priced as arrays ---------------------------------------------------------------------

    def bill(self) -> Bill | None:
        """The charges `alone` sums, regrouped for pricing as arrays (sim.charge.Pricer): the CPU's
        ops between partitions and each partition's ops as runs, the calls and crossings as fixed
        seconds on this executor's phone. None where `alone` is."""
        if self.control:
            return None
        runs: list[Run] = []
        fixed = [0.0]
        for k, works in self._works:
            if k < 0:   # the CPU's ops between two partitions
                runs.append(Run(self.soc.cpu.name, works, threads=self.threads))
                continue
            job = self.jobs[k]
            self._billed(self._entry(job), runs, fixed)
            begins = self._billed(self._invoke(job), runs, fixed)
            if any(op.unit is not None for op in job.ops):   # a partition over several units: op by op
                self._billed(self._partition_ops(job), runs, fixed, begins and job.unit)
            else:
                runs.append(Run(job.unit.name, works, job.scales, 1, begins))
            self._billed(self._exit(job), runs, fixed)
        return Bill(tuple(runs), fixed[0])

    def _partition_ops(self, job: PartitionJob) -> Iterator[Charge]:
        """_partition's ops and the steps between units, without the math."""
        current = job.unit
        for op in job.ops:
            unit = op.unit or job.unit
            if unit is not current:
                yield from self._step(job, op, unit)
                current = unit
            yield Compute(unit, op.work, op.scales or job.scales, args=op.args)

    def _billed(self, charges: Iterator[Charge], runs: list[Run], fixed: list[float],
                 begun: Unit | None = None) -> bool:
        """Adds charges to a bill; True where they end with a graph's Begin (the next run begins it).
        `begun`: a unit whose graph began just before them (its first run begins it)."""
        pending = False
        for charge in charges:
            if isinstance(charge, Compute):
                first = begun is not None and charge.unit is begun
                runs.append(Run(charge.unit.name, (charge.work,), charge.scale, charge.threads, first))
                begun = None if first else begun
            elif isinstance(charge, Begin):
                pending = True
            else:
                fixed[0] += charge.alone(self.soc)
        return pending


def _run_works(plan: Plan, jobs: list) -> tuple[tuple[int, tuple[Work, ...]], ...]:
    """The plan as Executor.bill walks it: (-1, the CPU's works between partitions) or (the
    partition's job index, its ops' works). Built once per plan, so a bill on another phone
    names the same tuples (sim.charge.Pricer knows them by identity)."""
    out, cpu = [], []
    for k, (step, job) in enumerate(zip(plan, jobs)):
        if isinstance(step, CpuStep):
            if job is not None:
                cpu.append(job.work)
            continue
        if cpu:
            out.append((-1, tuple(cpu)))
            cpu = []
        out.append((k, tuple(op.work for op in job.ops)))
    if cpu:
        out.append((-1, tuple(cpu)))
    return tuple(out)


def _moved(job: PartitionJob, soc: SoC) -> PartitionJob:
    """A partition's job on another phone's units of the same names and layouts."""
    def same(unit: Unit) -> Unit:
        new = soc.unit(unit.name)
        if new.channel_align != unit.channel_align:
            raise DelegateError(f"{unit.name}: another channel layout than the plan was built for")
        return new

    ops = job.ops
    if any(op.unit is not None for op in ops):
        ops = tuple(op if op.unit is None else
                    dataclasses.replace(op, unit=same(op.unit), scales=_scales(job.step, same(op.unit)))
                    for op in ops)
    unit = same(job.unit)
    return dataclasses.replace(job, unit=unit, scales=_scales(job.step, unit), ops=ops)


def _linked(work: Work, op, graph: Graph, shapes, align: int) -> Work:
    """An op linked into its producer's kernel: its arithmetic still runs, but it has no launch,
    its linked input never leaves the GPU's registers and its output is the producer's write."""
    from sim.work import graph_tensor_bytes

    live = sorted(graph_tensor_bytes(graph, shapes, t, work.precision, align) for t in op.inputs
                  if t >= 0 and not graph.tensors[t].is_constant)
    side = sum(live[:-1])   # the largest live input is the linked one (an ADD's operands are alike)
    return dataclasses.replace(work, fused=True, bytes_read=side, bytes_written=0, weight_bytes=0)


def _absorbed(work: Work) -> Work:
    """An op whose work the node before it does (the delegate's absorbed_nodes): no launch, no
    arithmetic, no bytes of its own; it stays in the plan, timed as nothing."""
    return dataclasses.replace(work, fused=True, macs=0, elem_ops=0, bytes_read=0, bytes_written=0,
                               weight_bytes=0, gemm=None)


def _flag_nonfinite(counts: Counter, delegate: str, graph: Graph, t: int) -> None:
    """NaN or infinity in a delegate's output is not an error (a float16 overflow can do it), but the
    record says so, and the log says it once per tensor."""
    if not counts[(delegate, t)]:
        _LOG.warning(f"{delegate} returned NaN or infinity in {graph.describe_tensor(t)}")
    counts[(delegate, t)] += 1


def _unit_for(step: DelegateStep, soc: SoC) -> str:
    """A delegate without a kernel-level unit: its `unit` attribute names a kind; take the first
    unit of that kind (a Python delegate declared for "gpu" runs on the phone's GPU)."""
    kind = step.delegate.unit
    for name, unit in soc.units.items():
        if unit.spec.kind.value == kind or name == kind:
            return name
    raise DelegateError(f"{step.delegate.name} runs on a {kind} unit, which {soc.profile.name} does not have")
