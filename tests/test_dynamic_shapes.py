"""Which RESHAPE outputs are dynamic-sized, against LiteRT: TFLite computes a shape in Prepare only
through a few ops (runtime/ops/dynamic._PREPARE_COMPUTES); a shape any other op computes, even
from constants, is known only when it runs, and the RESHAPE fed by it gets a dynamic output (which
a static-shape delegate then declines)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from runtime.ir.graph import DType, Graph, Op, Tensor
from runtime.ir.optypes import OpType
from runtime.ir import options as O
from runtime.ops.dynamic import dynamic_tensors
from runtime.model.tflite_write import save
from tests.litert_oracle import available

I32 = DType.INT32


def _const(name, values) -> Tensor:
    a = np.array(values, np.int32)
    return Tensor(name, a.shape, I32, data=a)


def _shape_by(kind: str) -> Graph:
    """x [2, 3, 4] -> SHAPE -> (the op of `kind`) -> the shape of a RESHAPE of x."""
    tensors = [Tensor("x", (2, 3, 4), DType.FLOAT32), Tensor("s", (3,), I32)]
    ops = [Op(OpType.SHAPE, (0,), (1,), O.ShapeOptions())]

    def add(t: Tensor) -> int:
        tensors.append(t)
        return len(tensors) - 1

    def op(kind, ins, options=None, shape=(3,)) -> int:
        out = add(Tensor(f"t{len(tensors)}", shape, I32))
        ops.append(Op(kind, tuple(ins), (out,), options))
        return out

    ss = lambda b, e, shrink=0: op(OpType.STRIDED_SLICE, (1, add(_const("b", [b])), add(_const("e", [e])),  # noqa: E731
                                                          add(_const("st", [1]))),
                                   O.StridedSliceOptions(shrink_axis_mask=shrink), () if shrink else (e - b,))
    made = {
        "shape": lambda: 1,
        "mul": lambda: op(OpType.MUL, (1, add(_const("k", [1, 1, 1]))), O.MulOptions()),
        "add": lambda: op(OpType.ADD, (1, add(_const("k", [0, 0, 0]))), O.AddOptions()),
        "sub": lambda: op(OpType.SUB, (1, add(_const("k", [0, 0, 0]))), O.SubOptions()),
        "gather": lambda: op(OpType.GATHER, (1, add(_const("i", [0, 1, 2]))), O.GatherOptions()),
        "strided_slice": lambda: ss(0, 3),
        "slice": lambda: op(OpType.SLICE, (1, add(_const("b", [0])), add(_const("n", [3])))),
        "concatenation": lambda: op(OpType.CONCATENATION, (ss(0, 1), ss(1, 3)), O.ConcatenationOptions(0)),
        "pack": lambda: op(OpType.PACK, (ss(0, 1, 1), ss(1, 2, 1), add(Tensor("n", (), I32, data=np.array(4, np.int32)))),
                           O.PackOptions(3, 0)),
        "pack_of_constants": lambda: op(OpType.PACK, tuple(add(Tensor(f"c{v}", (), I32, data=np.array(v, np.int32)))
                                                           for v in (2, 3, 4)), O.PackOptions(3, 0)),
        "add_of_constants": lambda: op(OpType.ADD, (add(_const("p", [2, 3, 4])), add(_const("q", [0, 0, 0]))),
                                       O.AddOptions()),
        "reshape": lambda: op(OpType.RESHAPE, (1, add(_const("n", [3]))), O.ReshapeOptions()),
        "reduce_prod_then_concatenation": lambda: op(
            OpType.CONCATENATION, (op(OpType.REDUCE_PROD, (1, add(_const("ax", [0]))), O.ReducerOptions(True), (1,)),
                                   add(_const("one", [1]))), O.ConcatenationOptions(0), (2,)),
        "reduce_max_then_concatenation": lambda: op(
            OpType.CONCATENATION, (op(OpType.REDUCE_MAX, (1, add(_const("ax", [0]))), O.ReducerOptions(True), (1,)),
                                   add(_const("six", [6]))), O.ConcatenationOptions(0), (2,)),
    }
    shape = made[kind]()
    out_shape = {"reduce_prod_then_concatenation": (24, 1), "reduce_max_then_concatenation": (4, 6)}.get(kind, (2, 3, 4))
    y = add(Tensor("y", out_shape, DType.FLOAT32))
    ops.append(Op(OpType.RESHAPE, (0, shape), (y,), O.ReshapeOptions()))
    return Graph(tuple(tensors), tuple(ops), (0,), (y,))


KINDS = ["shape", "mul", "add", "sub", "gather", "strided_slice", "slice", "concatenation", "pack",
         "pack_of_constants", "add_of_constants", "reshape", "reduce_prod_then_concatenation",
         "reduce_max_then_concatenation"]

# A child process (LiteRT's native code stays out of this one): is each model's RESHAPE shape
# already computed after allocate_tensors, before any invoke (TFLite's kTfLitePersistentRo)?
_CHILD = r'''
import json, sys
import numpy as np
from ai_edge_litert.interpreter import Interpreter
out = {}
for path, shape_tensor in json.load(open(sys.argv[1])):
    it = Interpreter(model_path=path)
    it.allocate_tensors()
    before = it.get_tensor(shape_tensor).copy()
    d = it.get_input_details()[0]
    it.set_tensor(d["index"], np.ones(d["shape"], np.float32))
    it.invoke()
    out[path] = bool(np.array_equal(before, it.get_tensor(shape_tensor)))
print(json.dumps(out))
'''


@pytest.mark.skipif(not available(), reason="ai-edge-litert is not installed")
def test_a_reshape_is_dynamic_exactly_when_litert_computes_its_shape_only_at_run_time(tmp_path):
    jobs, graphs = [], {}
    for kind in KINDS:
        g = _shape_by(kind)
        path = str(tmp_path / f"{kind}.tflite")
        save(g, path)
        jobs.append((path, g.ops[-1].inputs[1]))
        graphs[path] = (kind, g)
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    done = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "jobs.json")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    in_prepare = json.loads(done.stdout.strip().splitlines()[-1])
    got = {kind: g.outputs[0] in dynamic_tensors(g) for path, (kind, g) in graphs.items()}
    want = {graphs[path][0]: not known for path, known in in_prepare.items()}
    assert got == want
    # the pattern a converter leaves for a dynamic batch, Shape -> StridedSlice -> Pack -> Reshape
    assert got["pack"] and not got["strided_slice"] and not got["concatenation"]
