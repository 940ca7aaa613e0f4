"""What a model holds in the simulated phone's memory: its weights, the CPU arena TFLite's planner
lays out (runtime/measure/arena.py), the persistent and heap tensors, and each delegate unit's buffers."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from runtime.measure import arena
from runtime.interpreter.delegation import CpuStep
from runtime.interpreter.executor import PartitionJob
from runtime.ir.graph import Graph
from runtime.ir.optypes import OpType
from runtime.ops.dynamic import computed_in_prepare, dynamic_outputs
from runtime.ops.temporaries import node_temporaries, shape_inputs
from sim.mechanisms import sram_resident

__all__ = ["INPLACE", "CpuArena", "cpu_arena", "graph_arena", "node_memory", "MemoryRecord", "node_key",
           "memory_record"]

# TfLiteRegistration.inplace_operator of the kernels LiteRT's reference resolver registers: the ops
# whose first output may take the bytes of an input it reads last. ADD, SUB, MUL, DIV and SOFTMAX
# write over an input of the same size; RESHAPE, SQUEEZE and EXPAND_DIMS leave the data as it is
# (kTfLiteInplaceOpDataUnmodified). tests/test_arena.py holds these to LiteRT's tensor addresses.
_BINARY = arena.INPUT0_SHARED | arena.INPUT0_SHARED << 1
_SAME_DATA = arena.INPUT0_SHARED | arena.DATA_UNMODIFIED
INPLACE: dict[OpType, int] = {
    OpType.ADD: _BINARY, OpType.SUB: _BINARY, OpType.MUL: _BINARY, OpType.DIV: _BINARY,
    OpType.SOFTMAX: arena.INPUT0_SHARED,
    OpType.RESHAPE: _SAME_DATA, OpType.SQUEEZE: _SAME_DATA, OpType.EXPAND_DIMS: _SAME_DATA,
}


@dataclass(frozen=True)
class CpuArena:
    """The planner's view of one execution plan: its nodes (one per plan step), every tensor's bytes
    and allocation type (the model's tensors, then the kernels' temporaries), and the plan."""

    nodes: tuple[arena.PlannerNode, ...]
    sizes: tuple[int, ...]
    kinds: tuple[str, ...]
    plan: arena.ArenaPlan
    first_segment: int          # the last node AllocateTensors allocates for (the rest: at the first invoke)
    dynamic_bytes: int = 0      # kTfLiteDynamic tensors, on the heap once they run
    prepared_bytes: int = 0     # kTfLitePersistentRo values computed in Prepare, on the heap

    def init_size(self) -> int:
        """The arena's bytes after AllocateTensors (the nodes up to the first dynamic output)."""
        early = [t for t, life in self.plan.lifetimes.items() if life.first <= self.first_segment]
        return max((self.plan.offsets[t] + self.sizes[t] for t in early if t in self.plan.offsets and self.sizes[t]),
                   default=0)


def _tensor_bytes(shape: Sequence[int], itemsize: int) -> int:
    return math.prod(int(d) for d in shape) * itemsize


def _kinds(graph: Graph, slots: Sequence, cpu_ops: Sequence[int], folded: set[int], dynamic: Sequence[int]) -> list[str]:
    """Where TFLite puts each tensor, the model's then the temporaries. Outside the arena: constants
    (kTfLiteMmapRo), values computed in Prepare (kTfLitePersistentRo), outputs whose shape hangs on
    run-time values and strings (kTfLiteDynamic); but a RESHAPE whose shape is not known in Prepare
    keeps its output in the arena with its input's bytes (reshape.cc returns kTfLiteOutputShapeNotKnown
    and sizes it at Eval). In the persistent arena: variables, and weights a DENSIFY or a DEQUANTIZE of
    constants computes once and keeps (densify.cc, dequantize.cc)."""
    kept = {t for i in cpu_ops for t in graph.ops[i].outputs
            if graph.ops[i].type in _KEPT and graph.tensors[graph.ops[i].inputs[0]].is_constant}
    late = {t for i in dynamic if graph.ops[i].type is not OpType.RESHAPE for t in graph.ops[i].outputs} | \
        {t for t, x in enumerate(graph.tensors) if x.dtype.name == "STRING"}
    own = [arena.PERSISTENT if x.is_variable or (t in kept and t not in late)
           else arena.OUTSIDE if x.is_constant or t in late or t in folded else arena.ARENA
           for t, x in enumerate(graph.tensors)]
    where = {"arena": arena.ARENA, "persistent": arena.PERSISTENT, "dynamic": arena.OUTSIDE}
    return own + [where[tmp.allocation] for _, tmp in slots]


def _prepare_time(graph: Graph) -> tuple[set[int], list[int]]:
    """(tensors the kernels compute in Prepare and keep on the heap, kTfLitePersistentRo: what the ops
    of runtime/ops/dynamic._PREPARE_COMPUTES make of constants and each other; ops whose Prepare
    makes an output dynamic: a shape input not known before inference, variable reads, control flow
    with dynamic branches, runtime/ops/dynamic.py)."""
    known = {t for t, x in enumerate(graph.tensors) if x.is_constant and not x.is_variable}
    folded: set[int] = set()
    direct: list[int] = []
    for i, op in enumerate(graph.ops):
        outs = [t for t in op.outputs if t >= 0]
        if any(t >= 0 and t not in known for t in shape_inputs(op)) or dynamic_outputs(graph, op):
            direct.append(i)
        elif computed_in_prepare(op, known):
            known.update(outs)
            folded.update(outs)
    return folded, direct


# Ops that compute constant weights once but keep them in the persistent arena (kTfLiteArenaRwPersistent),
# which a later kernel does not count as known in its Prepare.
_KEPT = frozenset({OpType.DENSIFY, OpType.DEQUANTIZE})


def cpu_arena(graph: Graph, steps: Sequence, shapes: Sequence[Sequence[int]]) -> CpuArena:
    """TFLite's arena over an execution plan: CpuStep nodes with their kernels' temporaries, and a
    delegate's node with the partition's boundary tensors (tensors inside a partition are the
    delegate's, never in the CPU arena)."""
    cpu_ops = [s.op for s in steps if isinstance(s, CpuStep)]
    slots = node_temporaries(graph, shapes, set(cpu_ops))
    n = len(graph.tensors)
    sizes = [_tensor_bytes(shapes[t], x.dtype.np.itemsize) for t, x in enumerate(graph.tensors)]
    sizes += [_tensor_bytes(tmp.shape, tmp.dtype.np.itemsize) if tmp.dtype is not None and not tmp.at_eval else 0
              for _, tmp in slots]
    folded, dynamic = _prepare_time(graph)
    kinds = _kinds(graph, slots, cpu_ops, folded, dynamic)
    temps: dict[int, list[int]] = {}
    for k, (i, _) in enumerate(slots):
        temps.setdefault(i, []).append(n + k)
    nodes = tuple(_node(graph, step, temps) for step in steps)
    position = {s.op: k for k, s in enumerate(steps) if isinstance(s, CpuStep)}
    cuts = sorted(position[i] for i in dynamic if i in position)
    variables = [t for t, x in enumerate(graph.tensors) if x.is_variable]
    plan = arena.plan_arena(nodes, sizes, kinds, graph.inputs, graph.outputs, variables, cuts)
    first = cuts[0] if cuts else len(nodes) - 1
    late = {t for i in dynamic for t in graph.ops[i].outputs} | {n + k for k, (_, tmp) in enumerate(slots)
                                                                if tmp.allocation == "dynamic"}
    return CpuArena(nodes, tuple(sizes), tuple(kinds), plan, first, sum(sizes[t] for t in late if t >= 0),
                    sum(sizes[t] for t in folded if kinds[t] == arena.OUTSIDE))


def _node(graph: Graph, step, temps: Mapping[int, list[int]]) -> arena.PlannerNode:
    if isinstance(step, CpuStep):
        op = graph.ops[step.op]
        return arena.PlannerNode(tuple(op.inputs), tuple(op.outputs), tuple(temps.get(step.op, ())),
                                 INPLACE.get(op.type, 0))
    part = step.partition
    return arena.PlannerNode(tuple(part.inputs), tuple(part.outputs))


def graph_arena(graph: Graph, shapes: Sequence[Sequence[int]] | None = None) -> CpuArena:
    """The arena of the whole graph on the CPU kernels (no delegate), at its declared shapes."""
    return cpu_arena(graph, [CpuStep(i) for i in range(len(graph.ops))],
                     shapes if shapes is not None else [x.shape for x in graph.tensors])


def node_memory(cpu: CpuArena) -> list[int]:
    """Per plan step, the bytes the planner allocates for it: its outputs that get bytes of their
    own (an output sharing its input's takes none) and its temporaries, in either arena. This is
    what the op-profiling tables show as a node's memory."""
    placed = {**cpu.plan.offsets, **cpu.plan.persistent_offsets}
    rows = []
    for k, node in enumerate(cpu.nodes):
        own = [t for t in node.outputs if t in placed and cpu.plan.lifetimes[t].first == k]
        rows.append(sum(cpu.sizes[t] for t in (*own, *node.temporaries) if t in placed))
    return rows


@dataclass(frozen=True)
class MemoryRecord:
    """Bytes the simulated phone holds for the model. `init`: after AllocateTensors and the
    delegates' init; `overall`: after the runs (the arena grows at the first invoke past a dynamic
    tensor, and dynamic tensors get their bytes then); `peak`: the most held at once, which is
    `overall`, since nothing is given back while the interpreter lives."""

    weights: int                   # the model's constant buffers (the mapped file)
    cpu_arena: int                 # TFLite's arena, its high-water mark
    cpu_arena_init: int            # the same after AllocateTensors
    cpu_persistent: int            # the persistent arena: variables, weights dequantized once, kept scratch
    cpu_heap: int                  # values computed in Prepare (kTfLitePersistentRo), on the heap
    cpu_dynamic: int               # kTfLiteDynamic tensors, on the heap once they run
    delegates: Mapping[str, int]   # unit -> its partitions' tensors as it stores them
    nodes: Mapping[str, int] = field(default_factory=dict)  # per-op row (op:index, or delegate) -> node_memory
    # unit with on-chip weight memory -> (weight bytes it keeps on chip, bytes streamed from DRAM per inference)
    on_chip: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def init(self) -> int:
        return (self.weights + self.cpu_arena_init + self.cpu_persistent + self.cpu_heap
                + sum(self.delegates.values()))

    @property
    def overall(self) -> int:
        return self.init - self.cpu_arena_init + self.cpu_arena + self.cpu_dynamic

    @property
    def peak(self) -> int:
        return self.overall

    def as_json(self) -> dict:
        return {"weights_bytes": self.weights, "cpu_arena_bytes": self.cpu_arena,
                "cpu_persistent_arena_bytes": self.cpu_persistent, "cpu_heap_bytes": self.cpu_heap + self.cpu_dynamic,
                "delegate_bytes": dict(sorted(self.delegates.items())), "init_bytes": self.init,
                "overall_bytes": self.overall, "peak_bytes": self.peak,
                **({"on_chip_weights": {unit: {"cached_bytes": c, "streamed_bytes": s}
                                        for unit, (c, s) in sorted(self.on_chip.items())}} if self.on_chip else {})}


def node_key(graph: Graph, step) -> str:
    """A plan step's name in the per-op rows (runtime/measure/figures.py): op:index, or the delegate's name."""
    return f"{graph.ops[step.op].name}:{step.op}" if isinstance(step, CpuStep) else step.delegate.name


def memory_record(simulation, footprint: Mapping[str, int]) -> MemoryRecord:
    """The phone's memory for a simulation: `footprint` is runtime.measure.record.unit_footprint(sim), whose
    accelerator entries are the delegates' buffers (their partitions' tensors as each unit stores them)."""
    graph, plan = simulation.graph, simulation.delegation.plan
    cpu = cpu_arena(graph, plan, simulation.executor.shapes)
    weights = sum(x.data.nbytes for x in graph.tensors if x.is_constant and not x.is_variable)
    delegates = {unit: n for unit, n in footprint.items() if unit != simulation.soc.cpu.name}
    nodes: dict[str, int] = {}
    for step, n in zip(plan, node_memory(cpu)):
        nodes[node_key(graph, step)] = nodes.get(node_key(graph, step), 0) + n
    return MemoryRecord(weights, cpu.plan.size, cpu.init_size(), cpu.plan.persistent_size, cpu.prepared_bytes,
                        cpu.dynamic_bytes, delegates, nodes, on_chip_weights(simulation.executor))


def on_chip_weights(executor) -> dict[str, tuple[int, int]]:
    """Per unit with on-chip weight memory (a profile's `sram_mb`) that runs delegated ops: the weight
    bytes it keeps on chip between inferences and those it streams from DRAM on every one, as the
    cost model charges them (sim/mechanisms.sram_resident)."""
    out: dict[str, tuple[int, int]] = {}
    for job in executor.jobs:
        for op in job.ops if isinstance(job, PartitionJob) else ():
            unit = op.unit or job.unit
            sram, w = unit.spec.sram_bytes, op.work
            if sram <= 0:
                continue
            kept = sram_resident(w.weight_bytes, w.weights_before, sram)
            cached, streamed = out.get(unit.name, (0, 0))
            out[unit.name] = (cached + kept, streamed + w.weight_bytes - kept)
    return out

