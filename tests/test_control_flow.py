"""Multi-subgraph models (IF, WHILE, CALL_ONCE, variables) against LiteRT: damage refused, loops bounded, costs."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from runtime.model import tflite_read as tflite_io
from runtime.ops import opcheck_control
from runtime.ir import options as o
from runtime.ir.errors import ModelError
from runtime.ir.graph import DType, Graph, Op, OpType, Tensor
from runtime.interpreter.api import Interpreter
from runtime.interpreter.model_state import WHILE_LIMIT
from runtime.model.tflite_write import dumps, save
from tests.litert_oracle import available, run_litert

F, I, B, R = DType.FLOAT32, DType.INT32, DType.BOOL, DType.RESOURCE
needs_litert = pytest.mark.skipif(not available(), reason="LiteRT (ai-edge-litert) is not installed")


def t(name: str, shape=(), dtype: DType = F, data=None, signature=None) -> Tensor:
    return Tensor(name, shape, dtype, data=None if data is None else np.asarray(data, dtype.np),
                  shape_signature=signature)


def binary(kind: OpType, name: str, shape=(3,)) -> Graph:
    """A subgraph of one elementwise op on two inputs."""
    return Graph((t("a", shape), t("b", shape), t("out", shape)),
                 (Op(kind, (0, 1), (2,), o.FOR_OP[kind.name]()),), (0, 1), (2,), name=name)


def if_model(then: int = 1, other: int = 2, subgraphs=None) -> Graph:
    """cond ? x * y : x - y."""
    subs = (binary(OpType.MUL, "then"), binary(OpType.SUB, "else")) if subgraphs is None else subgraphs
    return Graph((t("cond", (), B), t("x", (3,)), t("y", (3,)), t("z", (3,))),
                 (Op(OpType.IF, (0, 1, 2), (3,), o.IfOptions(then, other)),), (0, 1, 2), (3,), name="main",
                 subgraphs=subs)


def count_cond() -> Graph:
    return Graph((t("i", (), I), t("n", (), I), t("acc", (2,)), t("x", (2,)), t("more", (), B)),
                 (Op(OpType.LESS, (0, 1), (4,)),), (0, 1, 2, 3), (4,), name="cond")


def count_body() -> Graph:
    """i + 1, and acc * 2 + x."""
    return Graph((t("i", (), I), t("n", (), I), t("acc", (2,)), t("x", (2,)), t("one", (), I, 1), t("two", (), F, 2.0),
                  t("i2", (), I), t("twice", (2,)), t("acc2", (2,))),
                 (Op(OpType.ADD, (0, 4), (6,), o.AddOptions()), Op(OpType.MUL, (2, 5), (7,), o.MulOptions()),
                  Op(OpType.ADD, (7, 3), (8,), o.AddOptions())), (0, 1, 2, 3), (6, 1, 8, 3), name="body")


def while_model(cond: int = 1, body: int = 2, subgraphs=None) -> Graph:
    """Counts i from 0 to n; outputs the accumulator and the count."""
    subs = (count_cond(), count_body()) if subgraphs is None else subgraphs
    return Graph((t("n", (), I), t("x", (2,)), t("zero", (), I, 0), t("acc0", (2,), F, [0, 0]),
                  t("i", (), I), t("n_out", (), I), t("acc", (2,)), t("x_out", (2,))),
                 (Op(OpType.WHILE, (2, 0, 3, 1), (4, 5, 6, 7), o.WhileOptions(cond, body)),), (0, 1), (6, 4),
                 name="main", subgraphs=subs)


def init_subgraph(value, name: str = "v") -> Graph:
    value = np.asarray(value, np.float32)
    return Graph((t("h", (), R), t("init", value.shape, F, value)),
                 (Op(OpType.VAR_HANDLE, (), (0,), o.VarHandleOptions("", name)),
                  Op(OpType.ASSIGN_VARIABLE, (0, 1), (), o.AssignVariableOptions())), (), (), name="init")


def state_model() -> Graph:
    """A streaming model's state: CALL_ONCE sets v = [1, 2]; each invoke outputs v + x and keeps it."""
    return Graph((t("x", (2,)), t("h", (), R), t("v", (2,)), t("y", (2,))),
                 (Op(OpType.CALL_ONCE, (), (), o.CallOnceOptions(1)),
                  Op(OpType.VAR_HANDLE, (), (1,), o.VarHandleOptions("", "v")),
                  Op(OpType.READ_VARIABLE, (1,), (2,), o.ReadVariableOptions()),
                  Op(OpType.ADD, (2, 0), (3,), o.AddOptions()),
                  Op(OpType.ASSIGN_VARIABLE, (1, 3), (), o.AssignVariableOptions())),
                 (0,), (3,), name="main", subgraphs=(init_subgraph([1, 2]),))


def loop_state_model() -> Graph:
    """A variable handle passed into a loop: the body adds x to the variable n times; the main
    graph reads it afterwards (state across invokes through a WHILE)."""
    cond = Graph((t("i", (), I), t("n", (), I), t("h", (), R), t("x", (2,)), t("more", (), B)),
                 (Op(OpType.LESS, (0, 1), (4,)),), (0, 1, 2, 3), (4,), name="cond")
    body = Graph((t("i", (), I), t("n", (), I), t("h", (), R), t("x", (2,)), t("one", (), I, 1), t("i2", (), I),
                  t("v", (2,)), t("v2", (2,))),
                 (Op(OpType.ADD, (0, 4), (5,), o.AddOptions()),
                  Op(OpType.READ_VARIABLE, (2,), (6,), o.ReadVariableOptions()),
                  Op(OpType.ADD, (6, 3), (7,), o.AddOptions()),
                  Op(OpType.ASSIGN_VARIABLE, (2, 7), (), o.AssignVariableOptions())), (0, 1, 2, 3), (5, 1, 2, 3),
                 name="body")
    return Graph((t("n", (), I), t("x", (2,)), t("zero", (), I, 0), t("h", (), R), t("i", (), I), t("n_out", (), I),
                  t("h_out", (), R), t("x_out", (2,)), t("v", (2,))),
                 (Op(OpType.CALL_ONCE, (), (), o.CallOnceOptions(3)),
                  Op(OpType.VAR_HANDLE, (), (3,), o.VarHandleOptions("", "total")),
                  Op(OpType.WHILE, (2, 0, 3, 1), (4, 5, 6, 7), o.WhileOptions(1, 2)),
                  Op(OpType.READ_VARIABLE, (6,), (8,), o.ReadVariableOptions())), (0, 1), (8,), name="main",
                 subgraphs=(cond, body, init_subgraph([0, 0], "total")))


def nested_model() -> Graph:
    """A loop whose body branches: odd steps add x to acc, even ones multiply (an IF in a WHILE)."""
    cond = count_cond()
    body = Graph((t("i", (), I), t("n", (), I), t("acc", (2,)), t("x", (2,)), t("one", (), I, 1), t("two", (), I, 2),
                  t("i2", (), I), t("rem", (), I), t("odd", (), B), t("acc2", (2,))),
                 (Op(OpType.ADD, (0, 4), (6,), o.AddOptions()), Op(OpType.FLOOR_MOD, (0, 5), (7,)),
                  Op(OpType.EQUAL, (7, 4), (8,)), Op(OpType.IF, (8, 2, 3), (9,), o.IfOptions(3, 4))),
                 (0, 1, 2, 3), (6, 1, 9, 3), name="body")
    return while_model(subgraphs=(cond, body, binary(OpType.ADD, "odd", (2,)), binary(OpType.MUL, "even", (2,))))


def counter_model() -> Graph:
    """y = 2x on a resizable input, and a count of the invokes kept in a variable."""
    return Graph((t("x", (2,), signature=(-1,)), t("two", (), F, 2.0), t("y", (2,), signature=(-1,)), t("h", (), R),
                  t("c", ()), t("one", (), F, 1.0), t("c2", ())),
                 (Op(OpType.CALL_ONCE, (), (), o.CallOnceOptions(1)),
                  Op(OpType.MUL, (0, 1), (2,), o.MulOptions()),
                  Op(OpType.VAR_HANDLE, (), (3,), o.VarHandleOptions("", "count")),
                  Op(OpType.READ_VARIABLE, (3,), (4,), o.ReadVariableOptions()),
                  Op(OpType.ADD, (4, 5), (6,), o.AddOptions()),
                  Op(OpType.ASSIGN_VARIABLE, (3, 6), (), o.AssignVariableOptions())),
                 (0,), (2, 6), name="main", subgraphs=(init_subgraph(0.0, "count"),))


def run(graph: Graph, feeds: dict[int, np.ndarray], invokes: int = 1, **kwargs) -> dict[str, np.ndarray]:
    """Ours, in the oracle's form: {"run:tensor": output}."""
    it = Interpreter(graph=graph, **kwargs)
    it.allocate_tensors()
    outs = {}
    for k in range(invokes):
        for index, value in feeds.items():
            it.set_tensor(index, value)
        it.invoke()
        for d in it.get_output_details():
            outs[f"{k}:{d['index']}"] = it.get_tensor(d["index"])
    return outs


def same_as_litert(cases: list[tuple[Graph, dict]], tmp_path, invokes: int = 1) -> None:
    paths = []
    for k, (graph, _) in enumerate(cases):
        paths.append(tmp_path / f"m{k}.tflite")
        save(graph, paths[-1])
    results = run_litert([(str(p), feeds) for p, (_, feeds) in zip(paths, cases)], invokes=invokes)
    for path, (_, feeds), want in zip(paths, cases, results):
        assert not isinstance(want, str), want
        assert str(want["resolver"]) == "BUILTIN_REF"
        ours = run(tflite_io.load(path), feeds, invokes)
        assert sorted(ours) == sorted(k for k in want if k != "resolver")
        for key, value in ours.items():
            assert value.dtype == want[key].dtype and value.shape == want[key].shape, key
            np.testing.assert_array_equal(value, want[key], err_msg=f"{path.name} {key}")


X, Y = np.array([1.5, -2, 3], np.float32), np.array([4, 0.5, -6], np.float32)


# -- the file format ---------------------------------------------------------------------------


def test_every_subgraph_and_its_options_round_trip():
    g = loop_state_model()
    back = tflite_io.loads(dumps(g))
    assert len(back.subgraphs) == 3 and back.subgraph(0) is back
    assert [s.name for s in back.subgraphs] == ["cond", "body", "init"]
    for a, b in zip((g, *g.subgraphs), (back, *back.subgraphs)):
        assert [(op.type, op.inputs, op.outputs, o.options_or_default(op.type.name, op.options)) for op in a.ops] \
            == [(op.type, op.inputs, op.outputs, op.options) for op in b.ops]
        assert [(x.name, x.shape, x.dtype) for x in a.tensors] == [(x.name, x.shape, x.dtype) for x in b.tensors]
        assert (a.inputs, a.outputs) == (b.inputs, b.outputs)
    assert back.subgraphs[2].tensors[1].data.tolist() == [0, 0]
    assert back.ops[1].options == o.VarHandleOptions("", "total")
    assert back.ops[0].options == o.CallOnceOptions(3)
    assert back.ops[2].options == o.WhileOptions(1, 2)


def test_single_subgraph_models_are_unchanged():
    g = binary(OpType.ADD, "plain")
    back = tflite_io.loads(dumps(g))
    assert back.subgraphs == () and back.subgraph(0) is back
    assert Interpreter(graph=back).num_subgraphs() == 1 and Interpreter(graph=while_model()).num_subgraphs() == 3


def test_subgraphs_of_other_signatures_are_kept_but_not_prepared(tmp_path):
    """A subgraph no control flow of the main graph runs (another signature's entry point) is
    read, checked for damage and written back, but its ops get no kernel, as TFLite prepares it
    only when its signature runs."""
    strings = Graph((t("s", (2,), DType.STRING), t("o", (2,), DType.STRING)), (Op(OpType.RELU, (0,), (1,)),),
                    (0,), (1,), name="save")
    main = binary(OpType.ADD, "main")
    g = Graph(main.tensors, main.ops, main.inputs, main.outputs, name="main", subgraphs=(strings,))
    back = tflite_io.loads(dumps(g))
    assert back.subgraphs[0].name == "save"
    assert run(back, {0: X, 1: Y})["0:2"].tolist() == (X + Y).tolist()
    broken = Graph(strings.tensors, (Op(OpType.RELU, (0,), (7,)),), (0,), (1,), name="save")
    assert load_error(Graph(main.tensors, main.ops, main.inputs, main.outputs, name="main", subgraphs=(broken,)),
                      tmp_path) == "subgraph 1 'save': op #0 RELU writes dangling tensor #7 (graph has 2)"


# -- the numbers, against LiteRT ----------------------------------------------------------------


@needs_litert
def test_if_runs_the_branch_the_condition_picks(tmp_path):
    cases = [(if_model(), {0: np.array(c), 1: X, 2: Y}) for c in (True, False)]
    same_as_litert(cases, tmp_path)
    assert run(if_model(), {0: np.array(True), 1: X, 2: Y})["0:3"].tolist() == (X * Y).tolist()


@needs_litert
@pytest.mark.parametrize("n", [0, 1, 7])
def test_while_counts_to_n_with_an_accumulator(tmp_path, n):
    x = np.array([1, -0.5], np.float32)
    same_as_litert([(while_model(), {0: np.array(n, np.int32), 1: x})], tmp_path)
    out = run(while_model(), {0: np.array(n, np.int32), 1: x})
    assert out["0:4"] == n and out["0:6"].tolist() == ((2 ** n - 1) * x).tolist()


@needs_litert
def test_a_branch_inside_a_loop(tmp_path):
    same_as_litert([(nested_model(), {0: np.array(n, np.int32), 1: np.array([1.5, -2], np.float32)})
                    for n in (0, 1, 6)], tmp_path)


@needs_litert
def test_call_once_initialises_a_variable_that_later_invokes_update(tmp_path):
    same_as_litert([(state_model(), {0: np.array([10, 20], np.float32)})], tmp_path, invokes=4)
    out = run(state_model(), {0: np.array([10, 20], np.float32)}, invokes=3)
    assert [out[f"{k}:3"].tolist() for k in range(3)] == [[11, 22], [21, 42], [31, 62]]


@needs_litert
def test_a_variable_handle_passed_through_a_loop(tmp_path):
    same_as_litert([(loop_state_model(), {0: np.array(3, np.int32), 1: np.array([1, 2], np.float32)})],
                   tmp_path, invokes=3)


_STEPS_CHILD = r'''
import json, sys
import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType
it = Interpreter(model_path=sys.argv[1], experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
it.allocate_tensors()
print(json.dumps(STEPS(it, json.loads(sys.argv[2]))))
'''


def steps(it, script: list) -> list:
    """Invokes, resets and resizes on an interpreter (ours or LiteRT's); every output of each invoke."""
    out = []
    for step in script:
        if step == "reset":
            it.reset_all_variables()
            continue
        x = np.arange(step, dtype=np.float32)
        index = it.get_input_details()[0]["index"]
        if tuple(it.get_input_details()[0]["shape"]) != x.shape:
            it.resize_tensor_input(index, x.shape)
            it.allocate_tensors()
        it.set_tensor(index, x)
        it.invoke()
        out.append([it.get_tensor(d["index"]).tolist() for d in it.get_output_details()])
    return out


def litert_steps(path, script: list) -> list:
    import inspect

    child = "import numpy as np\n" + inspect.getsource(steps) + _STEPS_CHILD.replace("STEPS", "steps")
    proc = subprocess.run([sys.executable, "-c", child, str(path), json.dumps(script)], capture_output=True,
                          text=True, check=True)
    return json.loads(proc.stdout)


@needs_litert
def test_reset_and_resize_leave_resource_variables_as_litert_does(tmp_path):
    """LiteRT's reset_all_variables resets variable tensors, not resource variables, and CALL_ONCE
    does not run again; a resize and allocate_tensors keep them too."""
    path = tmp_path / "counter.tflite"
    save(counter_model(), path)
    script = [2, 2, "reset", 2, 3, 3, "reset", 2]
    it = Interpreter(model_path=path)
    it.allocate_tensors()
    ours = steps(it, script)
    assert ours == litert_steps(path, script)
    assert [c for _, c in ours] == [1, 2, 3, 4, 5, 6]


def test_reading_a_variable_never_assigned_names_it_and_the_op():
    g = loop_state_model()
    g = Graph(g.tensors, g.ops[1:], g.inputs, g.outputs, name="main", subgraphs=g.subgraphs)  # no CALL_ONCE
    it = Interpreter(graph=g)
    it.allocate_tensors()
    it.set_tensor(0, np.array(1, np.int32))
    with pytest.raises(ModelError, match=r"op #1 WHILE: subgraph 2 'body': op #1 READ_VARIABLE: reads resource "
                                         r"variable 'total' before any ASSIGN_VARIABLE"):
        it.invoke()


def test_eight_bit_values_pass_through_untouched():
    sub = Graph((t("a", (3,), DType.INT8),), (), (0,), (0,), name="same")
    g = Graph((t("c", (), B), t("x", (3,), DType.INT8), t("y", (3,), DType.INT8)),
              (Op(OpType.IF, (0, 1), (2,), o.IfOptions(1, 1)),), (0, 1), (2,), name="main", subgraphs=(sub,))
    x = np.array([-128, 0, 127], np.int8)
    assert run(tflite_io.loads(dumps(g)), {0: np.array(False), 1: x})["0:2"].tolist() == x.tolist()


def resized_if(const=None) -> Graph:
    """An IF passing [4] values to branches declared for [3] (TFLite resizes their inputs)."""
    other = binary(OpType.SUB, "else")
    if const is not None:
        other = Graph(other.tensors[:2] + (t("out", (3,)), t("k", (3,), F, const)),
                      (Op(OpType.SUB, (0, 3), (2,), o.SubOptions()),), (0, 1), (2,), name="else")
    return Graph((t("cond", (), B), t("x", (4,)), t("y", (4,)), t("z", (4,), signature=(-1,))),
                 (Op(OpType.IF, (0, 1, 2), (3,), o.IfOptions(1, 2)),), (0, 1, 2), (3,), name="main",
                 subgraphs=(binary(OpType.MUL, "then"), other))


@needs_litert
def test_branches_run_at_the_shapes_they_are_given(tmp_path):
    x, y = np.array([1, 2, 3, 4], np.float32), np.array([5, 6, 7, 8], np.float32)
    same_as_litert([(resized_if(), {0: np.array(c), 1: x, 2: y}) for c in (True, False)], tmp_path)


# -- loops are bounded ---------------------------------------------------------------------------


def forever_model() -> Graph:
    cond = Graph((t("i", (), I), t("yes", (), B, True)), (), (0,), (1,), name="always")
    body = Graph((t("i", (), I), t("one", (), I, 1), t("i2", (), I)), (Op(OpType.ADD, (0, 1), (2,), o.AddOptions()),),
                 (0,), (2,), name="step")
    return Graph((t("i0", (), I), t("i", (), I)), (Op(OpType.WHILE, (0,), (1,), o.WhileOptions(1, 2)),), (0,), (1,),
                 name="main", subgraphs=(cond, body))


def test_a_loop_that_never_ends_stops_at_the_limit():
    it = Interpreter(graph=forever_model(), while_limit=50)
    it.allocate_tensors()
    with pytest.raises(ModelError, match=r"op #0 WHILE: its condition still holds after 50 loop iterations.*"
                                         r"while_limit"):
        it.invoke()
    assert Interpreter(graph=forever_model())._state.while_limit == WHILE_LIMIT >= 100_000


def test_the_limit_counts_the_iterations_of_nested_loops_too():
    """Outer loop of 5 steps, each running an inner loop of 5: 5 + 25 iterations."""
    outer_body = Graph((t("i", (), I), t("n", (), I), t("acc", (2,)), t("x", (2,)), t("one", (), I, 1),
                        t("i2", (), I), t("acc2", (2,)), t("j", (), I), t("n2", (), I), t("x2", (2,)),
                        t("zero", (), I, 0)),
                       (Op(OpType.ADD, (0, 4), (5,), o.AddOptions()),
                        Op(OpType.WHILE, (10, 1, 2, 3), (7, 8, 6, 9), o.WhileOptions(3, 4))),
                       (0, 1, 2, 3), (5, 1, 6, 3), name="outer")
    g = while_model(subgraphs=(count_cond(), outer_body, count_cond(), count_body()))
    feeds = {0: np.array(5, np.int32), 1: np.array([1, 1], np.float32)}
    with pytest.raises(ModelError, match="29 loop iterations"):
        run(g, feeds, while_limit=29)
    assert run(g, feeds, while_limit=30)["0:4"] == 5


# -- damaged models, refused when read -------------------------------------------------------------


def load_error(graph: Graph, tmp_path) -> str:
    path = tmp_path / "bad.tflite"
    save(graph, path)
    with pytest.raises(ModelError) as info:
        tflite_io.load(path)
    text = str(info.value)
    assert text.startswith(f"{path}: ") and "\n" not in text
    return text[len(str(path)) + 2:]


def test_a_subgraph_index_out_of_range(tmp_path):
    assert load_error(if_model(then=5), tmp_path) == \
        "op #0 IF: options.then_subgraph_index is 5, but the model has 3 subgraphs"
    assert "options.init_subgraph_index is -1" in load_error(
        Graph((), (Op(OpType.CALL_ONCE, (), (), o.CallOnceOptions(-1)),), (), (), name="main"), tmp_path)


def test_a_subgraph_that_runs_itself(tmp_path):
    assert load_error(if_model(then=0), tmp_path) == \
        "op #0 IF runs subgraph 0 'main', the subgraph it is in (recursion)"
    loop = Graph((t("c", (), B), t("a", (3,)), t("b", (3,)), t("out", (3,))),
                 (Op(OpType.IF, (0, 1, 2), (3,), o.IfOptions(1, 2)),), (0, 1, 2), (3,), name="loop")
    g = if_model(subgraphs=(loop, binary(OpType.SUB, "else")))
    assert "subgraph 1 'loop': op #0 IF runs subgraph 1 'loop', the subgraph it is in (recursion)" == \
        load_error(g, tmp_path)


def test_a_subgraph_that_runs_itself_through_another(tmp_path):
    def caller(name: str, then: int) -> Graph:
        return Graph((t("c", (), B), t("a", (3,)), t("b", (3,)), t("out", (3,))),
                     (Op(OpType.IF, (0, 1, 2), (3,), o.IfOptions(then, then)),), (0, 1, 2), (3,), name=name)
    g = if_model(subgraphs=(caller("one", 2), caller("two", 1)))
    assert "which leads back to it: subgraph 1 'one' -> subgraph 2 'two' -> subgraph 1 'one' (recursion)" in \
        load_error(g, tmp_path)


def test_mismatched_signatures(tmp_path):
    one_input = Graph((t("a", (3,)), t("out", (3,))), (Op(OpType.RELU, (0,), (1,)),), (0,), (1,), name="relu")
    assert load_error(if_model(subgraphs=(one_input, binary(OpType.SUB, "else"))), tmp_path) == \
        "op #0 IF: passes 2 values to subgraph 1 'relu' (options.then_subgraph_index), which takes 1"
    ints = Graph((t("a", (3,), I), t("b", (3,), I), t("out", (3,), I)), (Op(OpType.SUB, (0, 1), (2,)),), (0, 1), (2,),
                 name="ints")
    assert "value 0 tensor #1 'x' is FLOAT32, but input 0 tensor #0 'a' of subgraph 2 'ints' is INT32" in \
        load_error(if_model(subgraphs=(binary(OpType.MUL, "then"), ints)), tmp_path)
    two_out = Graph((t("a", (3,)), t("b", (3,)), t("out", (3,))), (), (0, 1), (0, 1), name="two")
    assert "has 1 outputs, but subgraph 1 'two' (options.then_subgraph_index) gives 2" in \
        load_error(if_model(subgraphs=(two_out, binary(OpType.SUB, "else"))), tmp_path)


def test_bad_loops(tmp_path):
    assert "options.cond_subgraph_index and options.body_subgraph_index are both 2" in \
        load_error(while_model(2, 2), tmp_path)
    counting = Graph(count_cond().tensors[:4] + (t("more", (), I),), (Op(OpType.ADD, (0, 1), (4,), o.AddOptions()),),
                     (0, 1, 2, 3), (4,), name="cond")
    assert "output tensor #4 'more' of subgraph 1 'cond' is INT32 of shape []; one bool expected" in \
        load_error(while_model(subgraphs=(counting, count_body())), tmp_path)
    assert "has 4 outputs, but subgraph 2 'cond' (options.body_subgraph_index) gives 1" in \
        load_error(while_model(subgraphs=(count_cond(), count_cond())), tmp_path)


def test_a_fault_inside_a_subgraph_names_it(tmp_path):
    body = count_body()
    broken = Graph(body.tensors, body.ops[:2] + (Op(OpType.ADD, (7, 30), (8,), o.AddOptions()),), body.inputs,
                   body.outputs, name="body")
    assert load_error(while_model(subgraphs=(count_cond(), broken)), tmp_path) == \
        "subgraph 2 'body': op #2 ADD reads dangling tensor #30 (graph has 9)"
    bad_shape = Graph(body.tensors[:8] + (t("acc2", (5,)),), body.ops, body.inputs, body.outputs, name="body")
    assert "subgraph 2 'body': op #2 ADD: output tensor #8 'acc2' is declared [5]" in \
        load_error(while_model(subgraphs=(count_cond(), bad_shape)), tmp_path)


def test_a_branch_that_cannot_take_the_shapes_passed(tmp_path):
    assert load_error(resized_if([1, 2, 3]), tmp_path) == (
        "op #0 IF: at the shapes it passes, subgraph 2 'else' (options.else_subgraph_index) fails: op #0 SUB: "
        "shapes [4] of tensor #0 'a' and [3] of tensor #3 'k' do not broadcast")


def test_resource_tensors_only_where_variables_go(tmp_path):
    g = Graph((t("h", (), R), t("h2", (), R)), (Op(OpType.VAR_HANDLE, (), (0,), o.VarHandleOptions("", "v")),
                                                Op(OpType.RELU, (0,), (1,))), (), (1,), name="main")
    assert load_error(g, tmp_path) == "op #1 RELU: tensor #0 'h' is RESOURCE, a type the kernels do not compute on"
    g = Graph((t("h", (), R), t("x", (2,)), t("v", (2,), R)),
              (Op(OpType.VAR_HANDLE, (), (0,), o.VarHandleOptions("", "v")),
               Op(OpType.ASSIGN_VARIABLE, (0, 1), (), o.AssignVariableOptions()),
               Op(OpType.READ_VARIABLE, (0,), (2,), o.ReadVariableOptions())), (1,), (2,), name="main")
    assert "op #2 READ_VARIABLE: tensor #2 'v' is RESOURCE" in load_error(g, tmp_path)


def test_an_init_subgraph_takes_and_gives_nothing(tmp_path):
    g = Graph((t("x", (3,)), t("y", (3,))), (Op(OpType.CALL_ONCE, (), (), o.CallOnceOptions(1)),
                                             Op(OpType.RELU, (0,), (1,))), (0,), (1,), name="main",
              subgraphs=(binary(OpType.ADD, "adds"),))
    assert load_error(g, tmp_path) == ("op #0 CALL_ONCE: subgraph 1 'adds' (options.init_subgraph_index) has 2 inputs "
                                       "and 1 outputs; an init subgraph has none")


def test_absurd_counts(tmp_path, monkeypatch):
    monkeypatch.setattr(tflite_io, "MAX_SUBGRAPHS", 2)
    with pytest.raises(ModelError, match=r"^<model content> has 3 subgraphs; at most 2 are supported$"):
        tflite_io.loads(dumps(if_model()))
    monkeypatch.undo()
    chain = [Graph((), (Op(OpType.CALL_ONCE, (), (), o.CallOnceOptions(k + 2)),) if k < 4 else (), (), (), name=f"c{k}")
             for k in range(5)]
    g = Graph((), (Op(OpType.CALL_ONCE, (), (), o.CallOnceOptions(1)),), (), (), name="main", subgraphs=tuple(chain))
    monkeypatch.setattr(opcheck_control, "MAX_CALL_DEPTH", 3)
    assert "starts a chain of 4 nested subgraph calls; at most 3" in load_error(g, tmp_path)
    monkeypatch.setattr(opcheck_control, "MAX_CALL_DEPTH", 64)
    # Each level runs the next one twice: 2**levels runs for one pass, though every graph is tiny.
    fan = [Graph((), tuple(Op(OpType.CALL_ONCE, (), (), o.CallOnceOptions(k + 2)) for _ in range(2)) if k < 9 else (),
                 (), (), name=f"f{k}") for k in range(10)]
    g = Graph((), (Op(OpType.CALL_ONCE, (), (), o.CallOnceOptions(1)),), (), (), name="main", subgraphs=tuple(fan))
    monkeypatch.setattr(opcheck_control, "MAX_SUBGRAPH_RUNS", 500)
    assert "subgraph 2 'f1' fans out to 511 subgraph runs through its nested calls; at most 500" in \
        load_error(g, tmp_path)


# -- on a simulated phone ----------------------------------------------------------------------------


def nested_intervals(it) -> list:
    """Trace intervals of ops run inside other subgraphs, so far."""
    return [iv for iv in it.simulation.soc.trace.intervals if "subgraph" in dict(iv.args)]


def per_invoke(it, feeds_per_invoke) -> tuple[list[int], list[float]]:
    counts = []
    for feeds in feeds_per_invoke:
        for index, value in feeds.items():
            it.set_tensor(index, value)
        before = len(nested_intervals(it))
        it.invoke()
        counts.append(len(nested_intervals(it)) - before)
    return counts, it.simulation.latencies[-len(feeds_per_invoke):]


def test_a_loop_costs_the_ops_of_every_iteration_it_runs():
    it = Interpreter(graph=while_model(), device="pixel4")
    it.allocate_tensors()
    x = np.array([1, 2], np.float32)
    counts, latencies = per_invoke(it, [{0: np.array(n, np.int32), 1: x} for n in (2, 20)])
    assert counts == [(2 + 1) * 1 + 2 * 3, (20 + 1) * 1 + 20 * 3]  # cond: 1 op, n + 1 times; body: 3 ops, n times
    assert latencies[1] > 4 * latencies[0]
    ops = {(dict(iv.args)["node"], dict(iv.args)["subgraph"], iv.name) for iv in nested_intervals(it)}
    assert ops == {(0, 1, "LESS"), (0, 2, "ADD"), (0, 2, "MUL")}  # shown under the WHILE's node


def test_without_the_math_a_loop_is_charged_one_pass():
    it = Interpreter(graph=while_model(), device="pixel4", timing_only=True)
    it.allocate_tensors()
    counts, latencies = per_invoke(it, [{}, {}])
    assert counts == [1 + 3, 1 + 3] and latencies[0] == pytest.approx(latencies[1])


@pytest.mark.parametrize("timing_only", [False, True])
def test_call_once_is_charged_at_the_first_invoke_only(timing_only):
    it = Interpreter(graph=state_model(), device="pixel4", timing_only=timing_only)
    it.allocate_tensors()
    counts, latencies = per_invoke(it, [{0: np.array([1, 2], np.float32)}] * 3)
    assert counts == [2, 0, 0] and latencies[0] > latencies[1] == pytest.approx(latencies[2])


def test_an_if_costs_the_branch_it_took():
    it = Interpreter(graph=if_model(), device="pixel4")
    it.allocate_tensors()
    per_invoke(it, [{0: np.array(c), 1: X, 2: Y} for c in (True, False)])
    assert [iv.name for iv in nested_intervals(it)] == ["MUL", "SUB"]


def partition(graph: Graph, tmp_path, capsys, *flags: str) -> str:
    from runtime.cli.main import main

    path = tmp_path / "m.tflite"
    save(graph, path)
    assert main(["partition", "--graph", str(path), "--device", "pixel4", *flags]) == 0
    return capsys.readouterr().out


def test_delegates_leave_control_flow_and_variables_on_the_cpu(tmp_path, capsys):
    out = partition(while_model(), tmp_path, capsys, "--use_gpu")
    assert "WHILE: Operation is not supported." in out and "0 of 1 ops delegated" in out
    out = partition(state_model(), tmp_path, capsys, "--use_nnapi")
    assert "1 of 5 ops delegated" in out and "3  ADD" in out
    for name in ("CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"):
        assert f"{name} " in out
    assert out.count("not on TfLiteNnapiDelegate: Unsupported operation type.") == 4


def test_a_variable_read_makes_the_graph_dynamic_for_static_only_delegates(tmp_path, capsys):
    """READ_VARIABLE's output takes the variable's shape when it runs (TFLite makes it dynamic in
    Prepare), and so do the outputs of a loop whose body reads one: a delegate that takes only
    static shapes (the GPU's) is not applied at all."""
    out = partition(state_model(), tmp_path, capsys, "--use_gpu")
    assert "0 of 5 ops delegated" in out
    assert "dynamic-sized tensors (tensor#2 is a dynamic-sized tensor)" in out
    out = partition(loop_state_model(), tmp_path, capsys, "--use_gpu")
    assert "(tensor#4 is a dynamic-sized tensor)" in out


@pytest.mark.parametrize("delegate", ["gpu", "nnapi"])
def test_state_survives_a_delegated_op_between_read_and_assign(delegate):
    from delegates.registry import make_delegate
    from sim.profile import load_profile

    phone = load_profile("pixel4")
    feeds = {0: np.array([10, 20], np.float32)}
    delegated = run(state_model(), feeds, 3, device=phone, experimental_delegates=[make_delegate(delegate, phone)])
    assert {k: v.tolist() for k, v in delegated.items()} == {"0:3": [11, 22], "1:3": [21, 42], "2:3": [31, 62]}
