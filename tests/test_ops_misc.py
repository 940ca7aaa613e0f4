"""Complex-number ops (RFFT2D, REAL, IMAG, COMPLEX_ABS), BITCAST, the random draws (RANDOM_UNIFORM,
RANDOM_STANDARD_NORMAL, MULTINOMIAL, STABLEHLO_RNG_BIT_GENERATOR) and the StableHLO gather, scatter and
reduce-window ops against LiteRT's reference kernels (BUILTIN_REF), on single-op models written with
the testbed's own writer (scatter and reduce-window with their body subgraphs), each invoked three
times so that the generators' state is carried from invoke to invoke on both sides.

Floats are held to 1e-5 of each output's range, everything else bit for bit: the random draws give
LiteRT's numbers exactly (Philox-4x32-10 keyed by the op's seeds; measured when written, ai-edge-litert
2.3.0 on x86-64: uniform and multinomial draws equal, normal draws within one float32 ulp).

LiteRT behaviours the kernels reproduce, each pinned below: only the low 32 bits of a random op's seeds
count; MULTINOMIAL skips a fixed 512 x ceil4(samples) x batch blocks of its generator per invoke;
STABLEHLO_GATHER clips start indices into the operand; STABLEHLO_SCATTER skips updates past the end of
a dimension, applies repeated targets one after the other, and keeps a NaN already in the operand under
a maximum or minimum body. Where LiteRT reads or writes memory it does not own (a negative scatter
target, an implicit trailing index vector dimension) or answers with something else than the op defines
(RFFT2D of width 1), the testbed refuses the model with one ModelError line.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import tempfile

import numpy as np
import pytest

from runtime.ops import opcheck
from runtime.ir import options as opt
from runtime.ir.errors import ModelError
from runtime.ir.graph import DType, Graph, Op, Tensor
from runtime.interpreter.api import Interpreter
from runtime.ir.optypes import OpType
from runtime.model.tflite_write import save
from tests.litert_oracle import available, run_litert

F16, F32, F64, C64, C128 = DType.FLOAT16, DType.FLOAT32, DType.FLOAT64, DType.COMPLEX64, DType.COMPLEX128
I8, I16, I32, I64, U8, U16, U32, U64, BOOL = (DType.INT8, DType.INT16, DType.INT32, DType.INT64, DType.UINT8,
                                              DType.UINT16, DType.UINT32, DType.UINT64, DType.BOOL)
INVOKES = 3
RW = opt.RngAlgorithm

# -- building single-op models ------------------------------------------------------------------------


def tensor(name, dtype=F32, shape=(), data=None, sig=None, quant=None) -> Tensor:
    if data is not None:
        data = np.asarray(data, dtype.np)
        shape = data.shape
    return Tensor(name, tuple(shape), dtype, quant=quant, data=data, shape_signature=sig)


def const(values, dtype=I32, name="c") -> Tensor:
    return tensor(name, dtype, data=values)


def values(rng, shape, dtype: DType) -> np.ndarray:
    if dtype.np.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype.np)
    if dtype.np.kind == "f":
        return rng.standard_normal(shape).astype(dtype.np)
    if dtype is BOOL:
        return rng.integers(0, 2, shape).astype(bool)
    info = np.iinfo(dtype.np)
    return rng.integers(max(info.min, -300), min(info.max, 300) + 1, shape).astype(dtype.np)


def body(op_types, dtype: DType) -> Graph:
    """A body subgraph of scalars: (a, b) -> each op in turn; no op: it returns b (scatter's "replace")."""
    tensors = [Tensor("lhs", (), dtype), Tensor("rhs", (), dtype)]
    tensors += [Tensor(f"out{k}", (), dtype) for k in range(len(op_types))]
    ops = tuple(Op(t, (0 if k == 0 else k + 1, 1), (k + 2,)) for k, t in enumerate(op_types))
    return Graph(tuple(tensors), ops, (0, 1), (len(tensors) - 1,), name="body")


@dataclasses.dataclass
class Case:
    label: str
    graph: Graph
    feeds: dict[int, np.ndarray]


def case(label, op_type, inputs, outputs, options=None, feeds=None, subgraphs=(), seed=0) -> Case:
    """A one-op model. `outputs`: (dtype, shape) per output; a shape of None is the one the op's
    check computes, a shape with -1 is dynamic (declared 1 there, with a shape signature).
    Non-constant inputs are model inputs, fed `feeds` or random values."""
    n = len(inputs)
    op = Op(op_type, tuple(range(n)), tuple(range(n, n + len(outputs))), options)
    live = tuple(k for k, t in enumerate(inputs) if not t.is_constant)
    rng = np.random.default_rng(seed)
    feeds = dict(feeds or {})
    for k in live:
        feeds.setdefault(k, values(rng, inputs[k].shape, inputs[k].dtype))
    computed = None
    if any(shape is None for _, shape in outputs):
        draft = Graph((*inputs, *(Tensor(f"y{j}", (), d) for j, (d, _) in enumerate(outputs))), (op,), live,
                      op.outputs, subgraphs=tuple(subgraphs))
        computed, _ = opcheck.check_op(draft, 0, lambda t: draft.tensors[t].shape,
                                       lambda t: feeds.get(t, draft.tensors[t].data))
    outs = []
    for j, (d, shape) in enumerate(outputs):
        sig = None
        if shape is None:
            shape = computed[j]
        elif -1 in shape:
            sig, shape = tuple(shape), tuple(1 if s == -1 else s for s in shape)
        outs.append(Tensor(f"y{j}", tuple(shape), d, shape_signature=sig))
    graph = Graph((*inputs, *outs), (op,), live, op.outputs, name=label, subgraphs=tuple(subgraphs))
    return Case(label, graph, feeds)


# -- cases per op -------------------------------------------------------------------------------------


def rfft2d_cases():
    out = []
    for shape, lengths in [((2, 5, 6), [4, 8]), ((2, 5, 6), [8, 4]), ((2, 5, 6), [2, 2]), ((5, 6), [1, 4]),
                           ((3, 4), [16, 8]), ((2, 2, 3, 4), [4, 4]), ((1, 8, 8), [8, 8])]:
        out.append(case(f"{list(shape)} fft {lengths}", OpType.RFFT2D,
                        [tensor("x", F32, shape), const(lengths, I32, "fft_length")], [(C64, None)],
                        opt.Rfft2dOptions()))
    out.append(case("fft_length at run time", OpType.RFFT2D,
                    [tensor("x", F32, (3, 5)), tensor("fft_length", I32, (2,))],
                    [(C64, (-1, -1))], opt.Rfft2dOptions(), feeds={1: np.array([4, 8], np.int32)}))
    return out


def complex_part_cases(op_type):
    def make():
        return [case(f"{d.name} {list(shape)}", op_type, [tensor("x", d, shape)], [(F32 if d is C64 else F64, None)],
                     seed=len(shape))
                for d in (C64, C128) for shape in [(2, 3), (7,), (), (2, 1, 4)]]
    return make


def bitcast_cases():
    rows = [(F32, (2, 3), I32), (F32, (2, 3), U8), (I8, (3, 4), F32), (I16, (2, 4), F64), (C64, (3,), F32),
            (U64, (2,), I32), (I32, (), U8), (F16, (5,), I16), (C128, (2,), C64), (U8, (2, 2, 8), I64)]
    return [case(f"{a.name} {list(shape)} -> {b.name}", OpType.BITCAST, [tensor("x", a, shape)], [(b, None)],
                 opt.BitcastOptions(), seed=k) for k, (a, shape, b) in enumerate(rows)]


def random_cases(op_type):
    def make():
        out = [case(f"{list(shape)} seeds {seeds}", op_type, [const(list(shape), I32, "shape")], [(F32, None)],
                    opt.RandomOptions(*seeds))
               for shape, seeds in [((3, 5), (7, 11)), ((7,), (1, 0)), ((2, 3, 1), (0, 5)), ((1,), (-9, 3)),
                                    ((4, 4), (-1, 2**40)), ((0, 3), (5, 5))]]
        out.append(case("shape at run time", op_type, [tensor("shape", I32, (2,))], [(F32, (-1, -1))],
                        opt.RandomOptions(3, 4), feeds={0: np.array([3, 2], np.int32)}))
        return out
    return make


def multinomial_cases():
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((3, 4)).astype(np.float32)
    logits[1, 2] = -np.inf
    logits[2, :] = [np.nan, 0.5, np.inf, -1.0]
    out = [case(f"{n} samples {dtype.name} seeds {seeds}", OpType.MULTINOMIAL,
                [tensor("logits", F32, (3, 4)), const(n, I32, "n")], [(dtype, None)], opt.RandomOptions(*seeds),
                feeds={0: logits})
           for n, dtype, seeds in [(5, I64, (3, 4)), (7, I32, (1, 0)), (1, I64, (0, 9))]]
    out.append(case("one class", OpType.MULTINOMIAL, [tensor("logits", F32, (2, 1)), const(3, I32, "n")],
                    [(I64, None)], opt.RandomOptions(8, 8)))
    out.append(case("num_samples at run time", OpType.MULTINOMIAL, [tensor("logits", F32, (2, 5)), tensor("n", I32)],
                    [(I64, (2, -1))], opt.RandomOptions(6, 1), feeds={1: np.array(6, np.int32)}))
    return out


def rng_bit_generator_cases():
    out = []
    state = np.array([0x123456789ABCDEF0, 2**64 - 2, 77], np.uint64)
    for algorithm in RW:
        for size in (2,) if algorithm is RW.THREEFRY else (2, 3):
            for dtype, shape in [(I32, (3, 5)), (U64, (7,)), (U32, (2, 3)), (I64, ())]:
                out.append(case(f"{algorithm.name} state {size} {dtype.name} {list(shape)}",
                                OpType.STABLEHLO_RNG_BIT_GENERATOR, [tensor("state", U64, (size,))],
                                [(U64, (size,)), (dtype, shape)], opt.StablehloRngBitGeneratorOptions(algorithm),
                                feeds={0: state[:size]}))
    return out


def gather(offset, collapsed, starts, ivd, sizes):
    return opt.StablehloGatherOptions(offset_dims=offset, collapsed_slice_dims=collapsed, start_index_map=starts,
                                      index_vector_dim=ivd, slice_sizes=sizes)


def stablehlo_gather_cases():
    out = []
    # tf.gather(x, idx, axis=1): start indices clipped into [0, 4] (7 -> 4, -3 -> 0)
    for dtype in (F32, I8, I64, F16, U16):
        out.append(case(f"axis 1 {dtype.name}", OpType.STABLEHLO_GATHER, [tensor("x", dtype, (3, 5, 4)),
                                                                          tensor("i", I32, (6, 1))],
                        [(dtype, None)], gather((0, 2), (1,), (1,), 1, (3, 1, 4)),
                        feeds={1: np.array([[0], [4], [2], [7], [-3], [1]], np.int32)}))
    # gather_nd-like: two indices pick rows of the last dimension; int64 indices
    out.append(case("nd", OpType.STABLEHLO_GATHER, [tensor("x", F32, (3, 5, 4)), tensor("i", I64, (4, 2))],
                    [(F32, None)], gather((1,), (0, 1), (0, 1), 1, (1, 1, 3)),
                    feeds={1: np.array([[0, 0], [2, 4], [1, 2], [2, 3]], np.int64)}))
    # index vectors along dimension 0, batch dims interleaved with offset dims, nothing collapsed
    out.append(case("index dim 0", OpType.STABLEHLO_GATHER, [tensor("x", I32, (6, 7)), tensor("i", I32, (2, 3, 2))],
                    [(I32, None)], gather((1, 3), (), (1, 0), 0, (2, 3)),
                    feeds={1: np.array([[[0, 5], [2, 6], [1, 3]], [[1, 0], [9, 4], [2, -1]]], np.int32)}))
    # a block taken from a constant table (slices of the whole operand)
    out.append(case("whole rows", OpType.STABLEHLO_GATHER, [const(np.arange(12.0).reshape(4, 3), F32, "table"),
                                                            tensor("i", I32, (2, 1))],
                    [(F32, None)], gather((1, 2), (), (0,), 1, (2, 3)), feeds={1: np.array([[3], [1]], np.int32)}))
    return out


def scatter(window, inserted, to_operand, ivd, body_index=1):
    return opt.StablehloScatterOptions(update_window_dims=window, inserted_window_dims=inserted,
                                       scatter_dims_to_operand_dims=to_operand, index_vector_dim=ivd,
                                       update_computation_subgraph_index=body_index)


SCATTER_BODIES = {"replace": (), "add": (OpType.STABLEHLO_ADD,), "multiply": (OpType.STABLEHLO_MULTIPLY,),
                  "maximum": (OpType.STABLEHLO_MAXIMUM,), "minimum": (OpType.STABLEHLO_MINIMUM,)}


def stablehlo_scatter_cases():
    out = []
    rng = np.random.default_rng(7)
    rows = np.array([[1], [3], [1], [7], [4], [1]], np.int32)   # row 1 three times, row 7 past the end
    for name, ops in SCATTER_BODIES.items():
        for dtype in (F32, I32, I8, F16):
            x, u = values(rng, (5, 3), dtype), values(rng, (6, 3), dtype)
            if dtype is F32:   # a NaN in the operand stays under max/min; a NaN update is passed over
                x[0, 0], u[1, 2], x[3, 2] = np.nan, np.nan, np.nan
            out.append(case(f"rows {name} {dtype.name}", OpType.STABLEHLO_SCATTER,
                            [tensor("x", dtype, (5, 3)), tensor("i", I32, (6, 1)), tensor("u", dtype, (6, 3))],
                            [(dtype, None)], scatter((1,), (0,), (0,), 1), feeds={0: x, 1: rows, 2: u},
                            subgraphs=(body(ops, dtype),)))
    # element updates (no window), int64 indices along dimension 0, both operand dimensions; the
    # last target [-1, 9] is past the end of dimension 1, so LiteRT skips it despite the -1
    idx = np.array([[0, 2, 2, 1, 5, -1], [1, 0, 0, 3, 0, 9]], np.int64)
    for name in ("add", "replace"):
        out.append(case(f"elements {name}", OpType.STABLEHLO_SCATTER,
                        [tensor("x", F32, (3, 4)), tensor("i", I64, (2, 6)), tensor("u", F32, (6,))], [(F32, None)],
                        scatter((), (0, 1), (0, 1), 0), feeds={1: idx}, subgraphs=(body(SCATTER_BODIES[name], F32),),
                        seed=3))
    # windows of [2, 2] into a [4, 5, 3] operand: window dims are update dims 0 and 2, the scatter
    # dim is update dim 1; indices map to operand dims 2 and 0
    out.append(case("windows", OpType.STABLEHLO_SCATTER,
                    [tensor("x", F32, (4, 5, 3)), tensor("i", I32, (3, 2)), tensor("u", F32, (2, 3, 5))],
                    [(F32, None)], scatter((0, 2), (2,), (2, 0), 1),
                    feeds={1: np.array([[0, 1], [2, 3], [1, 0]], np.int32)},
                    subgraphs=(body(SCATTER_BODIES["add"], F32),), seed=4))
    return out


def window(dims, strides=(), base=(), dilations=(), padding=(), index=1):
    return opt.StablehloReduceWindowOptions(window_dimensions=dims, window_strides=strides, base_dilations=base,
                                            window_dilations=dilations, padding=padding, body_subgraph_index=index)


def stablehlo_reduce_window_cases():
    out = []
    geometry = [
        ("plain", (4, 6), window((2, 3))),
        ("strided dilated", (5, 7), window((2, 2), (2, 3), (1, 1), (2, 2))),
        ("base dilation and padding", (4, 6), window((2, 3), (1, 2), (2, 1), (1, 1), (1, 0, 0, 2))),
        ("cropping", (6, 5), window((2, 2), (1, 1), (1, 1), (1, 1), (-1, 0, 1, -2))),
        ("3-d", (2, 4, 3), window((1, 2, 2), (1, 2, 1), (1, 2, 1), (1, 1, 2), (0, 0, 1, 1, 0, 1))),
    ]
    bodies = [("add", (OpType.STABLEHLO_ADD,), (F32, I32, I8, F64)), ("ADD", (OpType.ADD,), (F32,)),
              ("max", (OpType.STABLEHLO_MAXIMUM,), (F32, I64)), ("min", (OpType.MINIMUM,), (F32, U8)),
              ("mul", (OpType.STABLEHLO_MULTIPLY,), (F32, I32)), ("and", (OpType.LOGICAL_AND,), (BOOL,)),
              ("or", (OpType.LOGICAL_OR,), (BOOL,))]
    for name, ops, dtypes in bodies:
        for dtype in dtypes:
            for label, shape, o in geometry[:3] if dtype is not F32 else geometry:
                init = {F32: 0.5, F64: -1.0, BOOL: name == "and"}.get(dtype, 1 if name == "mul" else 0)
                out.append(case(f"{name} {dtype.name} {label}", OpType.STABLEHLO_REDUCE_WINDOW,
                                [tensor("x", dtype, shape), const(init, dtype, "init")], [(dtype, None)], o,
                                subgraphs=(body(ops, dtype),), seed=len(out)))
    return out


CASES = {
    "rfft2d": rfft2d_cases, "real": complex_part_cases(OpType.REAL), "imag": complex_part_cases(OpType.IMAG),
    "complex_abs": complex_part_cases(OpType.COMPLEX_ABS), "bitcast": bitcast_cases,
    "random_uniform": random_cases(OpType.RANDOM_UNIFORM),
    "random_standard_normal": random_cases(OpType.RANDOM_STANDARD_NORMAL), "multinomial": multinomial_cases,
    "stablehlo_rng_bit_generator": rng_bit_generator_cases, "stablehlo_gather": stablehlo_gather_cases,
    "stablehlo_scatter": stablehlo_scatter_cases, "stablehlo_reduce_window": stablehlo_reduce_window_cases,
}


# -- running both -------------------------------------------------------------------------------------


def run_testbed(c: Case, path: str, invokes: int = INVOKES) -> list[list[np.ndarray]]:
    it = Interpreter(model_path=path)
    it.allocate_tensors()
    runs = []
    for _ in range(invokes):
        for k, v in c.feeds.items():
            it.set_tensor(k, v)
        it.invoke()
        runs.append([it.get_tensor(t) for t in c.graph.outputs])
    return runs


@functools.lru_cache(maxsize=1)
def _litert_results():
    """Every case of every op through LiteRT in one child process: (cases, results) per op."""
    tmp = tempfile.mkdtemp(prefix="ops_misc_")
    built, jobs = {}, []
    for name, make in CASES.items():
        built[name] = []
        for k, c in enumerate(make()):
            path = os.path.join(tmp, f"{name}__{k}.tflite")
            save(c.graph, path)
            built[name].append((c, path, len(jobs)))
            jobs.append((path, c.feeds))
    results = run_litert(jobs, resolvers=("BUILTIN_REF",), invokes=INVOKES)
    return {name: [(c, path, results[k]) for c, path, k in rows] for name, rows in built.items()}


def assert_same(got: np.ndarray, want: np.ndarray, where: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (where, got.dtype, got.shape, want.dtype, want.shape)
    if got.dtype.kind in "fc":
        finite = np.isfinite(want)
        np.testing.assert_array_equal(np.isfinite(got), finite, err_msg=where)
        scale = max(float(np.abs(want[finite]).max()) if finite.any() else 0.0, 1.0)
        np.testing.assert_allclose(got[finite], want[finite], atol=1e-5 * scale, rtol=0, err_msg=where)
        np.testing.assert_array_equal(got[~finite], want[~finite], err_msg=where)
    else:
        np.testing.assert_array_equal(got, want, err_msg=where)


pytestmark = pytest.mark.skipif(not available(), reason="LiteRT (ai-edge-litert) is not installed")


@pytest.mark.parametrize("name", sorted(CASES))
def test_equal_to_litert_reference(name):
    for c, path, want in _litert_results()[name]:
        assert not isinstance(want, str), f"{c.label}: LiteRT refused: {want}"
        assert str(want["resolver"]) == "BUILTIN_REF", (c.label, want["resolver"])
        for run, got in enumerate(run_testbed(c, path)):
            for t, value in zip(c.graph.outputs, got):
                assert_same(value, want[f"{run}:{t}"], f"{name} {c.label} invoke {run} output {t}")


def test_random_draws_change_from_invoke_to_invoke_and_restart_with_a_new_interpreter(tmp_path):
    """A constant shape input does not make the draw a constant: each invoke draws anew, and a new
    interpreter starts the same seeded sequence again."""
    c = random_cases(OpType.RANDOM_UNIFORM)()[0]
    path = str(tmp_path / "uniform.tflite")
    save(c.graph, path)
    first, again = run_testbed(c, path), run_testbed(c, path)
    assert not np.array_equal(first[0][0], first[1][0])
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a[0], b[0])


def test_new_input_shapes_restart_the_draws_from_the_seeds():
    """resize_tensor_input then allocate_tensors prepares every node again in LiteRT, which seeds
    each generator anew: the next draw is the first one of a fresh interpreter."""
    x, s, y = tensor("x", F32, (2, 3)), tensor("s", I32, (2,)), tensor("y", F32, (2, 3))
    ops = (Op(OpType.SHAPE, (0,), (1,), opt.ShapeOptions()), Op(OpType.RANDOM_UNIFORM, (1,), (2,),
                                                                opt.RandomOptions(4, 2)))
    graph = Graph((x, s, y), ops, (0,), (2,), name="resized")
    it = Interpreter(graph=graph)
    it.allocate_tensors()
    it.invoke()
    first = it.get_tensor(2)
    it.resize_tensor_input(0, [4, 3])
    it.allocate_tensors()
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(2)[:2], first)   # the same words, four more after them


def test_unseeded_draws_differ_between_interpreters():
    """Seeds (0, 0), or any whose low 32 bits are both 0, ask for fresh entropy, as in LiteRT."""
    for seeds in [(0, 0), (1 << 32, 0)]:
        c = case("unseeded", OpType.RANDOM_UNIFORM, [const([64], I32, "shape")], [(F32, None)],
                 opt.RandomOptions(*seeds))
        draws = []
        for _ in range(2):
            it = Interpreter(graph=c.graph)
            it.allocate_tensors()
            it.invoke()
            draws.append(it.get_tensor(c.graph.outputs[0]))
        assert not np.array_equal(*draws)
        assert ((draws[0] >= 0) & (draws[0] < 1)).all()


def test_rfft2d_feeding_complex_abs_equals_litert(tmp_path):
    """A magnitude spectrum, as audio front ends compute it: two ops, a complex64 tensor between."""
    x, n = tensor("x", F32, (2, 8, 8)), const([8, 8], I32, "fft_length")
    spectrum, magnitude = tensor("spectrum", C64, (2, 8, 5)), tensor("magnitude", F32, (2, 8, 5))
    ops = (Op(OpType.RFFT2D, (0, 1), (2,), opt.Rfft2dOptions()), Op(OpType.COMPLEX_ABS, (2,), (3,)))
    graph = Graph((x, n, spectrum, magnitude), ops, (0,), (3,), name="spectrum")
    feeds = {0: values(np.random.default_rng(9), (2, 8, 8), F32)}
    path = str(tmp_path / "spectrum.tflite")
    save(graph, path)
    want = run_litert([(path, feeds)], resolvers=("BUILTIN_REF",))[0]
    got = run_testbed(Case("spectrum", graph, feeds), path, invokes=1)[0][0]
    assert_same(got, want["0:3"], "rfft2d -> complex_abs")
    np.testing.assert_allclose(got, np.abs(np.fft.rfft2(feeds[0].astype(np.float64))), rtol=1e-5, atol=1e-5)


def test_multinomial_skips_its_generator_by_a_fixed_amount_per_invoke():
    """The draws of the second invoke come from the generator skipped batch x ceil4(samples) x 512
    blocks past the first invoke's start, not from where the first invoke's draws ended."""
    from runtime.ops.random import Philox, uint64_to_double

    c = multinomial_cases()[1]   # 7 samples, batch 3, seeds (1, 0)
    it = Interpreter(graph=c.graph)
    it.allocate_tensors()
    for _ in range(2):
        it.set_tensor(0, c.feeds[0])
        it.invoke()
    rng = Philox(1, 0)
    rng.skip(3 * 8 * 2 * 256)
    words = rng.blocks(11).reshape(-1, 2)
    u = uint64_to_double(words[:, 0], words[:, 1])
    row0 = np.exp(c.feeds[0][0].astype(np.float64) - c.feeds[0][0].max()).cumsum()
    want = np.searchsorted(row0, u[:7] * row0[-1], side="right")
    np.testing.assert_array_equal(it.get_tensor(c.graph.outputs[0])[0], want)


def test_empty_outputs():
    """Outputs with no elements (LiteRT's Python binding cannot read an empty int64 tensor)."""
    c = case("no samples", OpType.MULTINOMIAL, [tensor("logits", F32, (3, 4)), const(0, I32, "n")], [(I64, None)],
             opt.RandomOptions(2, 2))
    assert run_testbed(c, _saved(c), invokes=2)[1][0].shape == (3, 0)


def _saved(c: Case) -> str:
    path = os.path.join(tempfile.mkdtemp(prefix="ops_misc_"), "model.tflite")
    save(c.graph, path)
    return path


def test_tensor_details_list_the_temporaries_litert_adds(tmp_path):
    """RFFT2D's four FFT work areas (added in Prepare) and STABLEHLO_REDUCE_WINDOW's dilated and
    padded copies (added in Init, typed in Prepare) appear in the tensor list as in BUILTIN_REF's."""
    from ai_edge_litert import interpreter as litert

    def plain(d):
        return {k: (v.tolist() if isinstance(v, np.ndarray) else plain(v) if isinstance(v, dict) else v)
                for k, v in d.items()}

    for c in rfft2d_cases()[:3] + stablehlo_reduce_window_cases()[:3]:
        path = str(tmp_path / "model.tflite")
        save(c.graph, path)
        ours = Interpreter(model_path=path)
        ref = litert.Interpreter(model_path=path, experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)
        for it in (ours, ref):
            it.allocate_tensors()
        got, want = [plain(d) for d in ours.get_tensor_details()], [plain(d) for d in ref.get_tensor_details()]
        assert got == want and len(got) > len(c.graph.tensors), c.label


# -- bodies LiteRT refuses, and so does the testbed --------------------------------------------------


def _refused_bodies():
    f = tensor("x", F32, (5, 3))
    scatter_ins = [f, tensor("i", I32, (2, 1)), tensor("u", F32, (2, 3))]
    feeds = {1: np.array([[0], [2]], np.int32)}
    rows = [
        ("scatter with TFLite's ADD", OpType.STABLEHLO_SCATTER, scatter_ins, scatter((1,), (0,), (0,), 1),
         (OpType.ADD,)),
        ("scatter with two ops", OpType.STABLEHLO_SCATTER, scatter_ins, scatter((1,), (0,), (0,), 1),
         (OpType.STABLEHLO_ADD, OpType.STABLEHLO_MULTIPLY)),
        ("reduce_window with SUB", OpType.STABLEHLO_REDUCE_WINDOW, [tensor("x", F32, (4, 6)), const(0.0, F32, "init")],
         window((2, 2)), (OpType.SUB,)),
        ("reduce_window with no op", OpType.STABLEHLO_REDUCE_WINDOW, [tensor("x", F32, (4, 6)), const(0.0, F32, "i")],
         window((2, 2)), ()),
    ]
    return [(label, case(label, op_type, ins, [(F32, (5, 3) if op_type is OpType.STABLEHLO_SCATTER else (3, 5))],
                         o, feeds=feeds, subgraphs=(body(ops, F32),)))
            for label, op_type, ins, o, ops in rows]


def test_bodies_litert_does_not_know_are_refused(tmp_path):
    cases = _refused_bodies()
    jobs = []
    for k, (_, c) in enumerate(cases):
        path = str(tmp_path / f"body{k}.tflite")
        save(c.graph, path)
        jobs.append((path, c.feeds))
    for (label, c), (path, _), want in zip(cases, jobs, run_litert(jobs, resolvers=("BUILTIN_REF",))):
        assert isinstance(want, str), f"{label}: LiteRT ran it"
        with pytest.raises(ModelError, match=r"op #0 STABLEHLO_\w+: the body \(subgraph 1\) holds") as info:
            Interpreter(model_path=path)
        assert str(info.value).startswith(path) and "\n" not in str(info.value)


def test_rfft2d_of_width_one_is_refused_because_litert_answers_something_else(tmp_path):
    """LiteRT's FFT library returns x[0] - x[0]j-like values for a width-1 transform, not the DFT."""
    c = case("width 1", OpType.RFFT2D, [tensor("x", F32, (4, 3)), const([4, 1], I32, "fft_length")],
             [(C64, (4, 1))], opt.Rfft2dOptions())
    path = str(tmp_path / "w1.tflite")
    save(c.graph, path)
    want = run_litert([(path, c.feeds)], resolvers=("BUILTIN_REF",))[0]["0:2"]
    assert not np.allclose(want[:, 0], np.fft.rfft2(c.feeds[0][:, :1], s=(4, 1))[:, 0])
    with pytest.raises(ModelError, match=r"op #0 RFFT2D: input tensor #1 'fft_length' \(fft_length\) is \[4, 1\]"):
        Interpreter(model_path=path)


def test_negative_scatter_target_is_refused_when_it_runs():
    c = case("negative", OpType.STABLEHLO_SCATTER, [tensor("x", F32, (5, 3)), tensor("i", I32, (2, 1)),
                                                   tensor("u", F32, (2, 3))],
             [(F32, (5, 3))], scatter((1,), (0,), (0,), 1), feeds={1: np.array([[1], [-1]], np.int32)},
             subgraphs=(body((), F32),))
    it = Interpreter(graph=c.graph)
    it.allocate_tensors()
    for k, v in c.feeds.items():
        it.set_tensor(k, v)
    with pytest.raises(ModelError, match=r"op #0 STABLEHLO_SCATTER: update \[1, 0\] targets a negative index"):
        it.invoke()


# -- damaged models: one ModelError line, nothing allocated -------------------------------------------


def _graph(op_type, inputs, outputs, options=None, subgraphs=()) -> Graph:
    n = len(inputs)
    op = Op(op_type, tuple(range(n)), tuple(range(n, n + len(outputs))), options)
    live = tuple(k for k, t in enumerate(inputs) if not t.is_constant)
    return Graph((*inputs, *outputs), (op,), live, op.outputs, name="damaged", subgraphs=tuple(subgraphs))


def _refuse(graph: Graph, pattern: str, limit: int | None = None, feeds=None):
    with pytest.raises(ModelError, match=pattern) as info:
        it = Interpreter(graph=graph, memory_limit=limit)
        it.allocate_tensors()
        for k, value in (feeds or {}).items():
            it.set_tensor(k, value)
        it.invoke()
    assert "\n" not in str(info.value)


_ADD_BODY = (body((OpType.STABLEHLO_ADD,), F32),)
DAMAGED = [
    (OpType.RFFT2D, [tensor("x", F32, (4, 6)), const([4, 6], I32, "n")], [(C64, (4, 4))], opt.Rfft2dOptions(),
     r"\[4, 6\]; the FFT library takes powers of two only"),
    (OpType.RFFT2D, [tensor("x", I32, (4, 6)), const([4, 4], I32, "n")], [(C64, (4, 3))], opt.Rfft2dOptions(),
     r"input tensor #0 'x' \(input\) is INT32; RFFT2D takes FLOAT32"),
    (OpType.RFFT2D, [tensor("x", F32, (4, 6)), const([4, 4, 4], I32, "n")], [(C64, (4, 3))], opt.Rfft2dOptions(),
     r"\(fft_length\) has shape \[3\]; \[2\] expected"),
    (OpType.RFFT2D, [tensor("x", F32, (6,)), const([4, 4], I32, "n")], [(C64, (4, 3))], opt.Rfft2dOptions(),
     r"has shape \[6\]; rank 2 to 16 expected"),
    (OpType.REAL, [tensor("x", F32, (3,))], [(F32, (3,))], None, r"\(input\) is FLOAT32; REAL takes COMPLEX64"),
    (OpType.IMAG, [tensor("x", C64, (3,))], [(F64, (3,))], None, r"output tensor #1 'y0' is FLOAT64, FLOAT32 expected"),
    (OpType.COMPLEX_ABS, [tensor("x", C128, (3,))], [(F64, (4,))], None, r"declared \[4\], but the op computes \[3\]"),
    (OpType.BITCAST, [tensor("x", I8, (3, 2))], [(F32, (3,))], opt.BitcastOptions(),
     r"has shape \[3, 2\]; a INT8 input cast to FLOAT32 needs a last dimension of 4"),
    (OpType.BITCAST, [tensor("x", I16, ())], [(I32, ())], opt.BitcastOptions(), r"needs a last dimension of 2"),
    (OpType.RANDOM_UNIFORM, [const([2, 3], I64, "s")], [(F32, (2, 3))], opt.RandomOptions(1, 2),
     r"\(shape\) is INT64; RANDOM_UNIFORM takes INT32"),
    (OpType.RANDOM_STANDARD_NORMAL, [const([2, 3], I32, "s")], [(F64, (2, 3))], opt.RandomOptions(1, 2),
     r"output tensor #1 'y0' is FLOAT64; FLOAT32 expected"),
    (OpType.RANDOM_UNIFORM, [const([2, -3], I32, "s")], [(F32, (2, 3))], opt.RandomOptions(1, 2),
     r"\(shape\) is \[2, -3\]; dimensions must be >= 0"),
    (OpType.MULTINOMIAL, [tensor("l", F32, (2, 3, 1)), const(3, I32, "n")], [(I64, (2, 3))], opt.RandomOptions(1, 2),
     r"\(logits\) has shape \[2, 3, 1\]; rank 2 expected"),
    (OpType.MULTINOMIAL, [tensor("l", F32, (2, 3)), const(-3, I32, "n")], [(I64, (2, 3))], opt.RandomOptions(1, 2),
     r"\(num_samples\) is -3; it must be >= 0"),
    (OpType.MULTINOMIAL, [tensor("l", F32, (2, 0)), const(3, I32, "n")], [(I64, (2, 3))], opt.RandomOptions(1, 2),
     r"at least one class expected"),
    (OpType.MULTINOMIAL, [tensor("l", F32, (2, 3)), const(3, I32, "n")], [(F32, (2, 3))], opt.RandomOptions(1, 2),
     r"is FLOAT32; INT64 or INT32 expected"),
    (OpType.STABLEHLO_RNG_BIT_GENERATOR, [tensor("s", U64, (4,))], [(U64, (4,)), (I32, (3,))],
     opt.StablehloRngBitGeneratorOptions(RW.PHILOX), r"holds 4 values; PHILOX takes 2 or 3"),
    (OpType.STABLEHLO_RNG_BIT_GENERATOR, [tensor("s", U64, (3,))], [(U64, (3,)), (I32, (3,))],
     opt.StablehloRngBitGeneratorOptions(RW.THREEFRY), r"holds 3 values; THREEFRY takes 2"),
    (OpType.STABLEHLO_RNG_BIT_GENERATOR, [tensor("s", I64, (2,))], [(U64, (2,)), (I32, (3,))],
     opt.StablehloRngBitGeneratorOptions(), r"\(initial state\) is INT64; STABLEHLO_RNG_BIT_GENERATOR takes UINT64"),
    (OpType.STABLEHLO_GATHER, [tensor("x", F32, (3, 5)), tensor("i", I32, (2, 1))], [(F32, (2, 6))],
     gather((1,), (0,), (0,), 1, (1, 6)), r"size 6 does not fit dimension 1 of the operand \[3, 5\]"),
    (OpType.STABLEHLO_GATHER, [tensor("x", F32, (3, 5)), tensor("i", I32, (2,))], [(F32, (2, 5))],
     gather((1,), (0,), (0,), 1, (1, 5)), r"options.index_vector_dim is 1, not a dimension of input tensor #1 'i'"),
    (OpType.STABLEHLO_GATHER, [tensor("x", F32, (3, 5)), tensor("i", I32, (2, 1))], [(F32, (2, 5))],
     gather((1,), (0, 0), (0,), 1, (1, 5)), r"options.collapsed_slice_dims is \[0, 0\]; it names a dimension twice"),
    (OpType.STABLEHLO_GATHER, [tensor("x", F32, (3, 5)), tensor("i", I32, (2, 2))], [(F32, (2, 5))],
     gather((1,), (0,), (0,), 1, (1, 5)), r"holds index vectors of 2 values along dimension 1; 1 expected"),
    (OpType.STABLEHLO_GATHER, [tensor("x", BOOL, (3, 5)), tensor("i", I32, (2, 1))], [(BOOL, (2, 5))],
     gather((1,), (0,), (0,), 1, (1, 5)), r"\(operand\) is BOOL; STABLEHLO_GATHER takes"),
    (OpType.STABLEHLO_SCATTER, [tensor("x", F32, (5, 3)), tensor("i", I32, (2, 1)), tensor("u", F32, (2, 3))],
     [(F32, (5, 3))], scatter((1,), (0,), (0,), 1, body_index=4), r"update_computation_subgraph_index is 4, but the "
                                                                 r"model has 2 subgraphs"),
    (OpType.STABLEHLO_SCATTER, [tensor("x", F32, (5, 3)), tensor("i", I32, (2, 1)), tensor("u", F32, (3, 3))],
     [(F32, (5, 3))], scatter((1,), (0,), (0,), 1), r"has scatter dimensions \[3\]; the indices' batch dimensions "
                                                   r"\[2\] expected"),
    (OpType.STABLEHLO_SCATTER, [tensor("x", F32, (5, 3)), tensor("i", I32, (2, 1)), tensor("u", F32, (2, 3))],
     [(F32, (5, 3))], scatter((1,), (), (0,), 1), r"must together count the operand's 2 dimensions"),
    (OpType.STABLEHLO_SCATTER, [tensor("x", F32, (5, 3)), tensor("i", I32, (2, 1)), tensor("u", I32, (2, 3))],
     [(F32, (5, 3))], scatter((1,), (0,), (0,), 1), r"\(updates\) is INT32; the operand's FLOAT32 expected"),
    (OpType.STABLEHLO_REDUCE_WINDOW, [tensor("x", F32, (4, 6)), const(0.0, F32, "init")], [(F32, (3, 5))],
     window((2,)), r"options.window_dimensions is \[2\]; one size per input dimension \(2\) expected"),
    (OpType.STABLEHLO_REDUCE_WINDOW, [tensor("x", F32, (4, 6)), const(0.0, F32, "init")], [(F32, (3, 5))],
     window((2, 2), (1, 0)), r"options.window_strides is \[1, 0\]; every value must be at least 1"),
    (OpType.STABLEHLO_REDUCE_WINDOW, [tensor("x", F32, (4, 6)), const(0.0, F32, "init")], [(F32, (3, 5))],
     window((2, 2), padding=(0, 0, -4, -3)), r"padding by \[0, 0, -4, -3\] gives \[4, -1\]"),
    (OpType.STABLEHLO_REDUCE_WINDOW, [tensor("x", F32, (4, 6)), const(0, I32, "init")], [(F32, (3, 5))],
     window((2, 2)), r"\(init value\) is INT32; the input's FLOAT32 expected"),
    (OpType.STABLEHLO_REDUCE_WINDOW, [tensor("x", F32, (4, 6)), const(0.0, F32, "init")], [(F32, (3, 5))],
     window((2, 2), padding=(1, 1)), r"options.padding is \[1, 1\]; 4 values \(or none\) expected"),
    (OpType.STABLEHLO_REDUCE_WINDOW, [tensor("x", F32, (4, 6)), const(0.0, F32, "init")], [(F32, (5, 6))],
     window((1 << 20, 1), padding=(1 << 20, 0, 0, 0)), r"has 1048576 elements; the testbed's kernel takes at most"),
]


@pytest.mark.parametrize("op_type,inputs,outputs,options,pattern", DAMAGED,
                         ids=[f"{row[0].name}-{k}" for k, row in enumerate(DAMAGED)])
def test_damaged_models_are_refused_naming_op_and_tensor(op_type, inputs, outputs, options, pattern):
    outs = [Tensor(f"y{j}", shape, dtype) for j, (dtype, shape) in enumerate(outputs)]
    subgraphs = _ADD_BODY if op_type in (OpType.STABLEHLO_SCATTER, OpType.STABLEHLO_REDUCE_WINDOW) else ()
    _refuse(_graph(op_type, inputs, outs, options, subgraphs), rf"op #0 {op_type.name}: .*{pattern}")


def test_options_table_of_another_type_is_refused():
    graph = _graph(OpType.RANDOM_UNIFORM, [const([2], I32, "s")], [Tensor("y", (2,), F32)], opt.Rfft2dOptions())
    _refuse(graph, r"op #0 RANDOM_UNIFORM: builtin options are Rfft2dOptions, RandomOptions expected")


@pytest.mark.parametrize("op_type,inputs,out,options,feeds", [
    (OpType.RANDOM_UNIFORM, [const([1 << 16, 1 << 16], I32, "s")], (F32, (1 << 16, 1 << 16)), opt.RandomOptions(1, 1),
     None),
    (OpType.RANDOM_STANDARD_NORMAL, [tensor("s", I32, (2,))], (F32, (-1, -1)), opt.RandomOptions(1, 1),
     {0: np.array([1 << 15, 1 << 15], np.int32)}),
    (OpType.RFFT2D, [tensor("x", F32, (2, 3)), const([1 << 15, 1 << 15], I32, "n")], (C64, (1 << 15, (1 << 14) + 1)),
     opt.Rfft2dOptions(), None),
    (OpType.MULTINOMIAL, [tensor("l", F32, (4, 3)), tensor("n", I32)], (I64, (4, -1)), opt.RandomOptions(1, 1),
     {1: np.array(1 << 30, np.int32)}),
])
def test_absurd_sizes_are_refused_before_allocating(op_type, inputs, out, options, feeds):
    import tracemalloc

    dtype, shape = out
    sig = shape if -1 in shape else None
    y = Tensor("y", tuple(1 if d == -1 else d for d in shape), dtype, shape_signature=sig)
    graph = _graph(op_type, inputs, [y], options)
    tracemalloc.start()
    try:
        _refuse(graph, rf"(op #0 {op_type.name}|the model needs).*(memory limit|above 2\*\*31)", limit=64 << 20,
                feeds=feeds)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20


def test_delegates_refuse_the_new_ops_with_a_reason():
    from delegates.registry import CLASSES as DELEGATES
    from delegates.registry import make_delegate
    from sim.profile import load_profile

    phone = load_profile("pixel4")
    asked = 0
    for make in (rfft2d_cases, stablehlo_gather_cases, random_cases(OpType.RANDOM_UNIFORM)):
        graph = make()[0].graph
        for name in DELEGATES:
            try:
                delegate = make_delegate(name, phone)
            except Exception:  # a delegate this phone does not have
                continue
            verdict = delegate.is_node_supported(graph.ops[0], graph)
            assert not verdict.ok and verdict.reason, (name, graph.ops[0].type.name)
            asked += 1
    assert asked >= 9


def test_every_new_op_has_a_cost_class_and_is_costed_from_its_shapes():
    from runtime.ops.registry_misc import KERNELS
    from sim.cost import Precision
    from sim.work import CLASSES, describe

    assert set(KERNELS) <= set(CLASSES)
    for make in CASES.values():
        c = make()[0]
        shapes = [t.shape for t in c.graph.tensors]
        work = describe(c.graph.ops[0], c.graph, shapes, Precision.FLOAT32)
        assert work.bytes_written > 0 or not any(np.prod(shapes[t]) for t in c.graph.outputs), c.label


def test_mutated_models_run_or_fail_with_one_line(tmp_path):
    """The model fuzzer's mutations (tests/fuzz_models.py) on these ops' single-op models: each case
    runs, or ends in one ModelError line naming the file, found by the checks before a kernel
    raises anything. Cases whose op was turned into an op outside this file are left out."""
    from runtime.ops.registry_misc import KERNELS
    from tests import fuzz_models as fm

    ours = {t.name for t in KERNELS}
    sources = []
    for name, make in CASES.items():
        for k, c in enumerate(make()[:2]):
            path = tmp_path / f"{name}_{k}.tflite"
            save(c.graph, path)
            sources.append(path)
    fm.check_mutations(sources, ours, tmp_path, seed=2025, cases=120)
