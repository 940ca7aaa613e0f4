"""TFLite's CPU arena planner: tensor lifetimes over an execution plan, in-place sharing, best-fit offsets.

A re-implementation of tensorflow/lite/arena_planner.cc (PlanAllocations, IdentifyInPlaceTensors,
ExecuteAllocations, CreateTensorAllocationVector) and tensorflow/lite/simple_memory_arena.cc
(SimpleMemoryArena::Allocate, the high-water mark Commit sizes the buffer to), as LiteRT 2.x has
them. Pure functions over plain data: a node is its input, output and temporary tensor ids; a
tensor is its byte size and where TFLite puts it (the arena, the persistent arena, or neither).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from runtime.measure.libstdcxx import cxx_sort, unordered_set_order

__all__ = ["ALIGNMENT", "NEVER", "ARENA", "PERSISTENT", "OUTSIDE", "INPUT0_SHARED", "DATA_UNMODIFIED",
           "PlannerNode", "Allocation", "Lifetime", "ArenaPlan", "shared_tensors", "lifetimes", "allocation_order",
           "best_fit", "place", "assign", "plan_arena", "arena_size", "live_bytes"]

ALIGNMENT = 64             # kDefaultTensorAlignment and kDefaultArenaAlignment: TFLite's defaults
NEVER = 2**31 - 1          # kNodeNotAssigned: never allocated, or never freed
_SCALAR_BYTES = 4          # kScalarTensorBytes: a tensor this small is never shared in place
_SHARABLE_INPUTS = 3       # kTfLiteMaxSharableOpInputs (tensorflow/lite/core/c/common.h)

# TfLiteAllocationType, as far as the planner cares.
ARENA = "arena"            # kTfLiteArenaRw: planned in the arena
PERSISTENT = "persistent"  # kTfLiteArenaRwPersistent: variables, persistent scratch; never freed
OUTSIDE = "outside"        # kTfLiteMmapRo constants, kTfLiteDynamic, kTfLitePersistentRo: not planned

# TfLiteInPlaceOp bits (TfLiteRegistration.inplace_operator).
DATA_UNMODIFIED = 1        # kTfLiteInplaceOpDataUnmodified: the output is the input (RESHAPE)
INPUT0_SHARED = 4          # kTfLiteInplaceOpInput0Shared; input k is INPUT0_SHARED << k


@dataclass(frozen=True)
class PlannerNode:
    """One node of the execution plan as the planner sees it (-1: an optional input left out)."""

    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    temporaries: tuple[int, ...] = ()
    inplace: int = 0       # TfLiteRegistration.inplace_operator


@dataclass(frozen=True)
class Lifetime:
    """A tensor's first and last node (NEVER: kept to the end), its bytes and its arena."""

    tensor: int
    size: int
    first: int
    last: int
    kind: str = ARENA


@dataclass(frozen=True)
class ArenaPlan:
    """Offsets in the arena and the persistent arena, their sizes (the high-water marks), and the
    tensors that share another's buffer (output -> the tensor whose bytes it uses)."""

    offsets: Mapping[int, int]
    size: int
    persistent_offsets: Mapping[int, int]
    persistent_size: int
    lifetimes: Mapping[int, Lifetime] = field(default_factory=dict)
    shared: Mapping[int, int] = field(default_factory=dict)

    def offset(self, tensor: int) -> int | None:
        """Where the tensor's bytes start in the arena (a shared tensor: its root's), or None."""
        return self.offsets.get(self.shared.get(tensor, tensor))


def _root(shared: Mapping[int, int], t: int) -> int:
    return shared.get(t, t)


def _input_refcounts(nodes: Sequence[PlannerNode], n: int, pinned: Sequence[int]) -> list[int]:
    """ArenaPlanner::refcounts_: one per pinned tensor (graph outputs, variables, inputs), one per use."""
    counts = [0] * n
    for t in pinned:
        counts[t] += 1
    for node in nodes:
        for t in node.inputs:
            if t >= 0:
                counts[t] += 1
    return counts


def _can_share(t_in: int, t_out: int, changed: bool, sizes, kinds, counts, inputs, outputs) -> bool:
    """ArenaPlanner::InputTensorCanBeShared."""
    if changed and (sizes[t_in] != sizes[t_out] or sizes[t_in] <= _SCALAR_BYTES or counts[t_in] > 1):
        return False
    if t_in in inputs or t_out in outputs:
        return False
    return kinds[t_in] == kinds[t_out] or kinds[t_in] == ARENA


def shared_tensors(nodes: Sequence[PlannerNode], sizes: Sequence[int], kinds: Sequence[str], inputs: Sequence[int],
                   outputs: Sequence[int], counts: Sequence[int]) -> dict[int, int]:
    """ArenaPlanner::IdentifyInPlaceTensors: a node's first output that may take an input's buffer
    (the input's last use, same bytes) -> the tensor that owns the bytes."""
    shared: dict[int, int] = {}
    ins, outs = set(inputs), set(outputs)
    for node in nodes:
        if not node.outputs or not node.inplace:
            continue
        changed = not node.inplace & DATA_UNMODIFIED
        out = node.outputs[0]
        chosen = next((t for k, t in enumerate(node.inputs[:_SHARABLE_INPUTS])
                       if t >= 0 and node.inplace & (INPUT0_SHARED << k)
                       and _can_share(t, out, changed, sizes, kinds, counts, ins, outs)), -1)
        if chosen < 0:
            continue
        root = _root(shared, chosen)
        if changed and counts[root] > 1:
            continue
        shared[out] = root
    return shared


def lifetimes(nodes: Sequence[PlannerNode], sizes: Sequence[int], kinds: Sequence[str], inputs: Sequence[int],
              outputs: Sequence[int], variables: Sequence[int] = ()) -> tuple[dict[int, Lifetime], dict[int, int]]:
    """ArenaPlanner::PlanAllocations and the temporaries of ExecuteAllocations: each planned tensor's
    first node (its producer; 0 for graph inputs and variables) and last (its last consumer; never
    for graph outputs, variables, inputs, and outputs nobody reads); and the in-place sharing."""
    n = len(sizes)
    pinned = [t for t in (*outputs, *variables, *inputs) if t >= 0]
    shared = shared_tensors(nodes, sizes, kinds, inputs, outputs, _input_refcounts(nodes, n, pinned))
    first, last = [NEVER] * n, [NEVER] * n
    refs = [0] * n
    for t in pinned:
        refs[t] += 1
    for t in (*variables, *inputs):
        if t >= 0:
            first[t] = 0
    for node in nodes:
        for t in node.inputs:
            if t >= 0:
                refs[_root(shared, t)] += 1
    for i, node in enumerate(nodes):
        for t in node.outputs:
            if t >= 0 and first[t] == NEVER:
                first[t] = i
        for t in node.inputs:
            if t < 0:
                continue
            r = _root(shared, t)
            refs[r] -= 1
            if refs[r] == 0 and first[r] != NEVER and last[r] == NEVER:
                last[r] = i
        for t in node.temporaries:
            first[t] = last[t] = i
    return ({t: Lifetime(t, sizes[t], first[t], last[t], kinds[t]) for t in range(n)
             if first[t] != NEVER and kinds[t] != OUTSIDE}, shared)


def _whole(life: Lifetime) -> bool:
    return life.first == 0 and life.last == NEVER


def _comes_first(a: Lifetime, b: Lifetime) -> bool:
    """CreateTensorAllocationVector's comparison: tensors alive through the whole inference first
    (by index), then by decreasing size, then by first node."""
    if _whole(a):
        return not _whole(b) or a.tensor < b.tensor
    if _whole(b):
        return False
    return a.size > b.size if a.size != b.size else a.first < b.first


def allocation_order(lives: Sequence[Lifetime]) -> list[Lifetime]:
    """ArenaPlanner::CreateTensorAllocationVector: `lives` (in the order the planner gathers them)
    sorted as its std::sort leaves them, equal keys included (runtime/measure/libstdcxx.py)."""
    order = list(lives)
    cxx_sort(order, _comes_first)
    return order


def _align(offset: int, alignment: int) -> int:
    return -(-offset // alignment) * alignment


@dataclass(frozen=True)
class Allocation:
    """One tensor placed in an arena: its offset and bytes, and the nodes it is alive over."""

    offset: int
    size: int
    first: int
    last: int


def best_fit(active: Sequence[Allocation], size: int, first: int, last: int,
             alignment: int = ALIGNMENT) -> int:
    """SimpleMemoryArena::Allocate's offset: among the gaps between the `active` allocations (ordered
    by offset) whose lifetimes overlap [first, last], the tightest that holds
    `size` bytes at an aligned offset; else the aligned end of the last of them. As in TFLite, a
    gap's tightness is measured from the unaligned end of the allocation before it."""
    best, best_fit_ = None, None
    current = 0
    for a in active:
        if a.last < first or a.first > last:
            continue
        aligned = _align(current, alignment)
        if aligned + size <= a.offset and (best_fit_ is None or a.offset - aligned < best_fit_):
            best, best_fit_ = aligned, a.offset - current
        current = max(current, a.offset + a.size)
        if best_fit_ == 0:
            break
    return best if best is not None else _align(current, alignment)


def place(life: Lifetime, active: list[Allocation], alignment: int = ALIGNMENT, keep: bool = False) -> int:
    """SimpleMemoryArena::Allocate: the offset of `life` among the `active` allocations (kept
    ordered by offset, and the new one added). `keep`: the persistent arena,
    where nothing is ever freed."""
    if life.size == 0:
        return 0
    last = NEVER if keep else life.last
    at = best_fit(active, life.size, life.first, last, alignment)
    active.insert(bisect.bisect_right([a.offset for a in active], at), Allocation(at, life.size, life.first, last))
    return at


def assign(lives: Sequence[Lifetime], alignment: int = ALIGNMENT) -> dict[int, int]:
    """Offsets of tensors in one arena, placed in TFLite's order (ExecuteAllocations over one range)."""
    active: list[Allocation] = []
    return {life.tensor: place(life, active, alignment) for life in allocation_order(lives)}


def arena_size(offsets: Mapping[int, int], lives: Mapping[int, Lifetime]) -> int:
    """The arena's bytes: the high-water mark the allocations reach (SimpleMemoryArena::Commit)."""
    return max((offsets[t] + lives[t].size for t in offsets if lives[t].size), default=0)


def _gathered(nodes: Sequence[PlannerNode], k: int, inputs: Sequence[int], variables: Sequence[int]) -> list[int]:
    """ArenaPlanner::nodes_to_tensors_[k], an unordered_set filled with the graph's variables and
    inputs (node 0 only), node k's outputs, then its temporaries, in its iteration order."""
    first = (*variables, *inputs) if k == 0 else ()
    own = (*nodes[k].outputs, *nodes[k].temporaries) if k < len(nodes) else ()   # a graph with no node
    return unordered_set_order(t for t in (*first, *own) if t >= 0)


def plan_arena(nodes: Sequence[PlannerNode], sizes: Sequence[int], kinds: Sequence[str], inputs: Sequence[int],
               outputs: Sequence[int], variables: Sequence[int] = (), segments: Sequence[int] = (),
               alignment: int = ALIGNMENT) -> ArenaPlan:
    """The whole plan. `segments`: the node indices after which TFLite stops preparing (a node
    whose output is dynamic): each later stretch is allocated when the invoke reaches it, around
    what is already placed, so the arena only grows (ExecuteAllocations per range)."""
    lives, shared = lifetimes(nodes, sizes, kinds, inputs, outputs, variables)
    # CalculateAllocations: an output shares its root only if both are in the arena with equal bytes
    shared = {t: r for t, r in shared.items() if kinds[r] == ARENA and sizes[r] == sizes[t]}
    ends = sorted({s for s in segments if 0 <= s < len(nodes) - 1}) + [max(len(nodes) - 1, 0)]
    offsets: dict[int, int] = {}
    persistent: dict[int, int] = {}
    active: list[Allocation] = []
    held: list[Allocation] = []
    start = 0
    for end in ends:
        batch = [lives[t] for k in range(start, end + 1) for t in _gathered(nodes, k, inputs, variables)
                 if t in lives and (lives[t].kind == PERSISTENT or (sizes[t] and t not in offsets))]
        for life in allocation_order(batch):
            if life.tensor in shared:
                continue
            if life.kind == ARENA:
                offsets[life.tensor] = place(life, active, alignment)
            elif life.tensor not in persistent:
                persistent[life.tensor] = place(life, held, alignment, keep=True)
        start = end + 1
    return ArenaPlan(offsets, arena_size(offsets, lives), persistent, arena_size(persistent, lives), lives, shared)


def live_bytes(lives: Mapping[int, Lifetime], node: int) -> int:
    """Bytes of the arena tensors alive at `node` (a lower bound on the arena's size, given the
    tensors that have bytes of their own: leave out those sharing another's)."""
    return sum(life.size for life in lives.values() if life.kind == ARENA and life.first <= node <= life.last)
