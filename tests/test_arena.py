"""TFLite's arena planner (runtime/measure/arena.py): properties on random lifetimes, an independent planner
written here, libstdc++'s orders, and every tensor's offset against LiteRT's own addresses."""

from __future__ import annotations

import collections
import pathlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from runtime.measure import arena
from runtime.measure.footprint import graph_arena
from runtime.measure.libstdcxx import cxx_sort, unordered_set_order
from runtime.model.tflite_read import load

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


# -- random lifetimes ---------------------------------------------------------------------------------

@st.composite
def lifetimes(draw) -> list[arena.Lifetime]:
    """Tensors of distinct sizes (so the sort has no ties to settle), each alive over a stretch of
    nodes; a few alive from node 0 to the end, as graph inputs are."""
    n = draw(st.integers(1, 30))
    sizes = draw(st.lists(st.integers(1, 5000), min_size=n, max_size=n, unique=True))
    lives = []
    for t, size in enumerate(sizes):
        if draw(st.integers(0, 9)) == 0:
            lives.append(arena.Lifetime(t, size, 0, arena.NEVER))
            continue
        first = draw(st.integers(0, 20))
        last = draw(st.one_of(st.integers(first, 25), st.just(arena.NEVER)))
        lives.append(arena.Lifetime(t, size, first, last))
    return lives


def _overlap(a: arena.Lifetime, b: arena.Lifetime) -> bool:
    return a.first <= b.last and b.first <= a.last


def _reference_plan(lives: list[arena.Lifetime], align: int) -> dict[int, int]:
    """The planner's rules, written out plainly: whole-inference tensors first by index, then by
    decreasing size; each goes into the tightest gap left between the tensors already placed whose
    lifetimes overlap its own, measured from the end of the tensor before the gap (as
    simple_memory_arena.cc measures it), or after all of them."""
    whole = sorted((x for x in lives if x.first == 0 and x.last == arena.NEVER), key=lambda x: x.tensor)
    rest = sorted((x for x in lives if not (x.first == 0 and x.last == arena.NEVER)), key=lambda x: -x.size)
    placed: list[tuple[int, arena.Lifetime]] = []
    for x in whole + rest:
        conflicts = sorted(((o, y) for o, y in placed if _overlap(x, y)), key=lambda p: p[0])
        end, choice, tightest = 0, None, None
        for o, y in conflicts:
            start = -(-end // align) * align
            if start + x.size <= o and (tightest is None or o - start < tightest):
                choice, tightest = start, o - end
            end = max(end, o + y.size)
        placed.append((choice if choice is not None else -(-end // align) * align, x))
    return {y.tensor: o for o, y in placed}


@settings(max_examples=150, deadline=None)
@given(lifetimes(), st.sampled_from([1, 16, 64]))
def test_random_lifetimes(lives, align):
    offsets = arena.assign(lives, align)
    by_tensor = {x.tensor: x for x in lives}
    size = arena.arena_size(offsets, by_tensor)
    for a in lives:
        assert offsets[a.tensor] % align == 0
        for b in lives:
            if a.tensor < b.tensor and _overlap(a, b):  # live at once: their bytes never meet
                assert (offsets[a.tensor] + a.size <= offsets[b.tensor]
                        or offsets[b.tensor] + b.size <= offsets[a.tensor])
    nodes = {x.first for x in lives} | {x.last for x in lives if x.last != arena.NEVER}
    assert size >= max(arena.live_bytes(by_tensor, k) for k in nodes)
    assert offsets == _reference_plan(lives, align)


def test_best_fit_takes_the_tightest_gap_not_the_first():
    # gaps of 256 (at 0) and 128 (at 512) between live tensors: a 100-byte tensor takes the tighter
    placed = [arena.Allocation(256, 256, 0, 9), arena.Allocation(640, 64, 0, 9)]
    assert arena.best_fit(placed, 100, 0, 9, 64) == 512
    assert arena.best_fit(placed, 300, 0, 9, 64) == 704          # no gap holds it: after the last
    assert arena.best_fit(placed, 300, 10, 12, 64) == 0          # nobody else is alive then


# -- libstdc++'s orders (golden outputs of g++ 12's std::sort and std::unordered_set<int>) --------------

def test_cxx_sort_leaves_equal_keys_where_libstdcxx_does():
    items = [((i * 7919) % 13, i) for i in range(40)]
    cxx_sort(items, lambda a, b: a[0] < b[0])
    assert [i for _, i in items] == [39, 26, 0, 13, 20, 33, 7, 1, 27, 14, 8, 34, 21, 15, 2, 28, 35, 9, 22, 16, 29,
                                     3, 36, 23, 10, 17, 4, 30, 24, 37, 11, 31, 18, 5, 12, 38, 25, 32, 19, 6]


@given(st.lists(st.integers(0, 6), max_size=120))
def test_cxx_sort_sorts(keys):
    items = list(enumerate(keys))
    cxx_sort(items, lambda a, b: a[1] < b[1])
    assert [k for _, k in items] == sorted(keys)
    assert sorted(i for i, _ in items) == list(range(len(keys)))


def test_unordered_set_iteration_order():
    assert unordered_set_order([86, 90, 91, 92, 93]) == [93, 92, 91, 90, 86]
    keys = [5, 18, 31, 44, 57, 70, 83, 96, 109, 122, 135, 148, 161, 174, 0, 13]   # a rehash at the 14th
    assert unordered_set_order(keys) == [13, 0, 174, 5, 18, 31, 44, 57, 70, 83, 96, 109, 122, 135, 148, 161]


# -- models: the planner's offsets against LiteRT's ------------------------------------------------------

litert = pytest.importorskip("ai_edge_litert.interpreter")

MODELS = [*sorted((FIXTURES / "models").glob("*.tflite")),
          *(FIXTURES / "quant" / f"{name}.tflite" for name in (
              "mobilenet_v1_dynamic", "mobilenet_v2_fp16", "lstm_dynamic", "dense_dynamic", "unet_style_int8",
              "op_transpose_conv__valid_s2_int8", "mobilenet_v1_uint8_io", "efficientnet_style_int8")),
          *(FIXTURES / "tasks" / f"{name}.tflite" for name in (
              "detection_ssd", "text_mobilebert_int8", "recurrent_gru", "classification_mobilenet_v3")),
          FIXTURES / "sparse" / "conv_sparse.tflite", FIXTURES / "published" / "pose_detection.tflite",
          FIXTURES / "ops" / "shape__dynamic_reshape.tflite", FIXTURES / "ops" / "div__4d_scalar.tflite"]


def _addresses(it) -> dict[int, int]:
    """Each tensor's address as LiteRT's Python API shows it: a view of the tensor's own buffer,
    except for 0-d tensors (copied: their address says nothing) and tensors without bytes."""
    out = {}
    for d in it.get_tensor_details():
        try:
            a = it.tensor(d["index"])()
        except ValueError:      # not allocated (yet)
            continue
        if a is not None and a.nbytes and not a.flags["OWNDATA"]:
            out[d["index"]] = a.__array_interface__["data"][0]
    return out


def _agree(offsets: dict[int, int], sizes, addresses: dict[int, int]) -> tuple[int, list]:
    """How many of our offsets LiteRT shows, and those that differ, from the base most agree on."""
    seen = {t: o for t, o in offsets.items() if sizes[t] and t in addresses}
    if not seen:
        return 0, []
    base = collections.Counter(addresses[t] - o for t, o in seen.items()).most_common(1)[0][0]
    return len(seen), [(t, addresses[t] - base, o) for t, o in seen.items() if addresses[t] - base != o]


def _check(content: bytes, graph) -> tuple[int, int]:
    cpu = graph_arena(graph)
    it = litert.Interpreter(model_content=content, experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    early = {t: o for t, o in cpu.plan.offsets.items() if cpu.plan.lifetimes[t].first <= cpu.first_segment}
    seen, wrong = _agree(early, cpu.sizes, _addresses(it))
    assert not wrong, f"(tensor, LiteRT's offset, ours): {wrong[:5]}"
    kept, wrong = _agree(dict(cpu.plan.persistent_offsets), cpu.sizes, _addresses(it))
    assert not wrong, f"persistent arena (tensor, LiteRT's offset, ours): {wrong[:5]}"
    if cpu.first_segment < len(cpu.nodes) - 1:    # the rest is planned at the first invoke
        for d in it.get_input_details():
            it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
        it.invoke()
        late, wrong = _agree(dict(cpu.plan.offsets), cpu.sizes, _addresses(it))
        assert not wrong and late > seen, f"after the first invoke: {wrong[:5]}"
    return seen, kept


@pytest.mark.parametrize("path", MODELS, ids=[f"{p.parent.name}/{p.stem}" for p in MODELS])
def test_offsets_equal_litert(path):
    seen, _ = _check(path.read_bytes(), load(path))
    assert seen >= 1


@pytest.mark.parametrize("name,quantization", [("mobilenet_v1", "none"), ("mobilenet_v1", "int8"),
                                               ("mobilenet_v2", "float16"), ("squeezenet", "dynamic_range"),
                                               ("tiny_cnn", "uint8")])
def test_zoo_offsets_equal_litert(name, quantization):
    from runtime.model.loader import ModelSource, load_model
    from runtime.model.tflite_write import dumps

    graph = load_model(ModelSource(zoo=name, quantization=quantization))
    seen, kept = _check(dumps(graph), graph)
    assert seen >= 10 and (kept > 0) == (quantization in ("float16", "dynamic_range"))


def test_mobilenet_v1_arena_figures():
    """The zoo's MobileNet v1 1.0/224: LiteRT's arena holds the input, the two largest activations
    alive at once, and the rest fitted around them."""
    from runtime.model.loader import ModelSource, load_model

    cpu = graph_arena(load_model(ModelSource(zoo="mobilenet_v1")))
    assert cpu.plan.size == 5419008 and cpu.plan.persistent_size == 0
    own = {t: life for t, life in cpu.plan.lifetimes.items() if t not in cpu.plan.shared}
    assert cpu.plan.size >= max(arena.live_bytes(own, k) for k in range(len(cpu.nodes)))
