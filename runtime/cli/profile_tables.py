"""benchmark_model's statistics lines and op-profiling tables, computed from the simulated trace."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from runtime.cli.common import cpp_float, to_us
from runtime.interpreter.delegation import CpuStep
from runtime.measure.footprint import cpu_arena, node_memory

__all__ = ["Stat", "NodeProfile", "profile_nodes", "profiling_report", "memory_lines"]


@dataclass
class Stat:
    """TFLite's Stat<int64_t> (tensorflow/core/util/stats_calculator.h): what it prints and how it
    rounds (the standard deviation is truncated to an integer)."""

    values: list[int] = field(default_factory=list)

    def add(self, value: int) -> None:
        self.values.append(int(value))

    @property
    def count(self) -> int:
        return len(self.values)

    def all_same(self) -> bool:
        return not self.values or min(self.values) == max(self.values)

    def avg(self) -> float:
        # numeric_limits<int64_t>::quiet_NaN() is 0: an empty integer Stat averages to 0
        return sum(self.values) / len(self.values) if self.values else 0.0

    def std(self) -> int:
        if self.all_same():
            return 0
        squares = math.fsum(float(v) * v for v in self.values) / len(self.values)
        return int(math.sqrt(max(0.0, squares - self.avg() ** 2)))

    def first(self) -> int:
        return self.values[0] if self.values else 0

    def line(self) -> str:
        """Stat::OutputToStream."""
        v = self.values
        if not v:
            return "count=0"
        if self.all_same():
            return f"count={len(v)} curr={v[-1]}" + ("(all same)" if len(v) > 1 else "")
        return (f"count={len(v)} first={v[0]} curr={v[-1]} min={min(v)} max={max(v)} "
                f"avg={cpp_float(self.avg())} std={self.std()}")


@dataclass
class NodeProfile:
    """One node of the execution plan as the op profiler sees it, over the regular runs."""

    type: str
    name: str
    run_order: int
    start: Stat = field(default_factory=Stat)
    elapsed: Stat = field(default_factory=Stat)
    mem_bytes: int = 0     # what the arena planner allocates for the node (runtime.measure.footprint.node_memory)


_PRE = ("input conversion", "inputs", "invoke")
_POST = ("outputs", "output conversion")


def _phase(step, iv) -> int | None:
    """Where interval `iv` falls in `step`'s invocation: 0 before its ops, 1 an op, 2 after; None
    when it is not part of that step."""
    node = dict(iv.args).get("node")
    if isinstance(step, CpuStep):
        return 1 if node == step.op else None
    if node is not None:
        return 1 if node in step.partition.nodes else None
    prefix = f"{step.partition.delegate} "
    if not iv.name.startswith(prefix):
        return None
    suffix = iv.name[len(prefix):]
    return 0 if suffix in _PRE else 2 if suffix in _POST else None


def _group(plan: Sequence, intervals: Sequence) -> list[list]:
    """Intervals of one inference, in the order they ran, cut into the plan's steps: a delegate
    step runs its boundary-in work, its ops, then its boundary-out work, so the phases only rise."""
    groups: list[list] = [[] for _ in plan]
    pos, phase = 0, 0
    for iv in intervals:
        for j in range(pos, len(plan)):
            p = _phase(plan[j], iv)
            if p is not None and (j > pos or p >= phase):
                groups[j].append(iv)
                pos, phase = j, p
                break
    return groups


def _node_names(simulation) -> list[tuple[str, str]]:
    """(type, name) per plan step as TFLite's profile summarizer labels them: the op (or the
    delegate kernel's) name, and "[outputs]:node index" (delegate nodes numbered after the model's
    own, in the order the delegates created them)."""
    graph, delegation = simulation.graph, simulation.delegation
    first = {}
    number = len(graph.ops)
    for report in delegation.per_delegate:
        first.setdefault(report.delegate, number)
        number += report.partitions
    seen: dict[str, int] = {}
    names = []
    for step in delegation.plan:
        if isinstance(step, CpuStep):
            op = graph.ops[step.op]
            outs, kind, index = op.outputs, op.name, step.op
        else:
            kind = step.partition.delegate
            index = first.get(kind, len(graph.ops)) + seen.get(kind, 0)
            seen[kind] = seen.get(kind, 0) + 1
            outs = step.partition.outputs
        tensors = ", ".join(graph.tensors[t].name for t in outs if t >= 0)
        names.append((kind, f"[{tensors}]:{index}"))
    return names


def profile_nodes(simulation, inferences: Sequence[int]) -> tuple[list[NodeProfile], Stat]:
    """Per plan step: start and elapsed microseconds in each of `inferences`; and each run's total."""
    plan = simulation.delegation.plan
    mem = node_memory(cpu_arena(simulation.graph, plan, simulation.executor.shapes))
    nodes = [NodeProfile(kind, name, k, mem_bytes=mem[k]) for k, (kind, name) in enumerate(_node_names(simulation))]
    spans = {s.k: s.start for s in simulation.soc.trace.inferences if s.stream == simulation.stream}
    by_run: dict[int, list] = {k: [] for k in inferences}
    for iv in simulation.soc.trace.intervals:
        if iv.stream == simulation.stream and iv.inference in by_run:
            by_run[iv.inference].append(iv)
    totals = Stat()
    for k in inferences:
        base, cursor, total = to_us(spans[k]), to_us(spans[k]), 0
        for node, group in zip(nodes, _group(plan, by_run[k])):
            begin = to_us(min(iv.start for iv in group)) if group else cursor
            end = to_us(max(iv.end for iv in group)) if group else begin
            node.start.add(begin - base)
            node.elapsed.add(end - begin)
            cursor, total = end, total + end - begin
        totals.add(total)
    return nodes, totals


# -- the tables (StatsCalculator::GetOutputString with TFLite's default formatter options) ---------


def _field(value, width: int) -> str:
    text = f"{value:.3f}" if isinstance(value, float) else str(value)
    return "\t" + text.rjust(width)


_HEADER = (("[node type]", 24), ("[start]", 17), ("[first]", 9), ("[avg ms]", 9), ("[%]", 8), ("[cdf%]", 8),
           ("[mem KB]", 10), ("[times called]", 9))


def _table(title: str, nodes: Sequence[NodeProfile], totals: Stat) -> list[str]:
    lines = [f"============================== {title} ==============================",
             "".join(_field(h, w) for h, w in _HEADER) + "\t[Name]"]
    total = sum(totals.values) or 1
    cumulative = 0
    for n in nodes:
        cumulative += sum(n.elapsed.values)
        lines.append(_field(n.type, 24) + _field(n.start.avg() / 1000.0, 17)
                     + _field(n.elapsed.first() / 1000.0, 9) + _field(n.elapsed.avg() / 1000.0, 9)
                     + _field(sum(n.elapsed.values) * 100.0 / total, 7) + "%"
                     + _field(cumulative * 100.0 / total, 7) + "%"
                     + _field(n.mem_bytes / 1000.0, 10) + _field(n.elapsed.count // max(1, totals.count), 9)
                     + "\t" + n.name)
    return lines + [""]


def _by_type(nodes: Sequence[NodeProfile], runs: int) -> list[str]:
    times: dict[str, int] = {}
    counts: dict[str, int] = {}
    called: dict[str, int] = {}
    mem: dict[str, int] = {}
    for n in nodes:
        mem[n.type] = mem.get(n.type, 0) + n.mem_bytes
        times[n.type] = times.get(n.type, 0) + sum(n.elapsed.values) // runs
        counts[n.type] = counts.get(n.type, 0) + 1
        called[n.type] = called.get(n.type, 0) + n.elapsed.count // runs
    accumulated = sum(times.values()) or 1
    lines = [f"Number of nodes executed: {len(nodes)}",
             "============================== Summary by node type ==============================",
             "".join(_field(h, w) for h, w in (("[Node type]", 24), ("[count]", 9), ("[avg ms]", 10),
                                               ("[avg %]", 11), ("[cdf %]", 11), ("[mem KB]", 10),
                                               ("[times called]", 10)))]
    cdf = 0.0
    for kind, us in sorted(times.items(), key=lambda item: (item[1], item[0]), reverse=True):
        share = us / accumulated * 100.0
        cdf += share
        lines.append(_field(kind, 24) + _field(counts[kind], 9) + _field(us / 1000.0, 10)
                     + _field(share, 10) + "%" + _field(cdf, 10) + "%" + _field(mem[kind] / 1000.0, 10)
                     + _field(called[kind], 9))
    return lines + [""]


def profiling_report(nodes: Sequence[NodeProfile], totals: Stat, top: int = 10) -> list[str]:
    """The lines benchmark_model prints for --enable_op_profiling after the regular runs."""
    by_time = sorted(nodes, key=lambda n: (-n.elapsed.avg(), n.run_order))[:top]
    return (["Operator-wise Profiling Info for Regular Benchmark Runs:"]
            + _table("Run Order", nodes, totals) + _table("Top by Computation Time", by_time, totals)
            + _by_type(nodes, max(1, totals.count))
            + [f"Timings (microseconds): {totals.line()}", "Memory (bytes): count=0",
               f"{len(nodes)} nodes observed", ""])


def memory_lines(memory, report_peak: bool) -> list[str]:
    """benchmark_model's memory lines (BenchmarkLoggingListener::OnBenchmarkEnd) for a
    runtime.measure.footprint.MemoryRecord, in MB of 2^20 bytes (it divides kilobytes by 1024). They come
    from the simulated phone, not the tool's RSS: the tool adds nothing, so the delta is the
    model's whole footprint, and TFLite's note that the figures are approximate is left out."""
    mb = lambda n: cpp_float(n / (1 << 20))  # noqa: E731
    lines = [f"Memory footprint delta from the start of the tool (MB): init={mb(memory.init)} "
             f"overall={mb(memory.overall)}"]
    if report_peak:
        lines.append(f"Overall peak memory footprint (MB) via periodic monitoring: {mb(memory.peak)}")
    return lines
