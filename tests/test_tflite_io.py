"""Reading and writing .tflite: round trips, and one clear ModelError for every kind of bad file."""

from __future__ import annotations

import numpy as np
import pytest

from runtime import zoo

from runtime.model import tflite_read as tflite_io
from runtime.ir.errors import ModelError
from runtime.ir.graph import DType, Graph, Op, OpType, Signature, Tensor
from runtime.interpreter.api import Interpreter
from runtime.ir.options import Conv2DOptions
from runtime.model.tflite_write import dumps, save


@pytest.fixture(scope="module")
def tiny_bytes() -> bytes:
    return dumps(zoo.build("tiny_cnn"))


def test_round_trip_keeps_structure(tiny_bytes):
    g = zoo.build("tiny_cnn")
    back = tflite_io.loads(tiny_bytes)
    assert [op.type for op in back.ops] == [op.type for op in g.ops]
    assert [op.options for op in back.ops] == [op.options for op in g.ops]
    assert [(t.name, t.shape, t.dtype) for t in back.tensors] == [(t.name, t.shape, t.dtype) for t in g.tensors]
    for a, b in zip(back.tensors, g.tensors):
        if b.is_constant:
            np.testing.assert_array_equal(a.data, b.data)
    assert isinstance(back.ops[0].options, Conv2DOptions)


def test_signatures_and_extended_opcodes_round_trip():
    x = Tensor("x", (2, 3), DType.FLOAT32)
    y = Tensor("y", (2, 3), DType.FLOAT32)
    # GELU (150) only fits in the extended builtin_code field.
    g = Graph((x, y), (Op(OpType.GELU, (0,), (1,)),), (0,), (1,),
              signatures=(Signature("serving_default", (("inp", 0),), (("out", 1),)),))
    back = tflite_io.loads(dumps(g))
    assert back.ops[0].type is OpType.GELU
    assert back.signatures == g.signatures


def test_save_writes_atomically(tmp_path):
    path = tmp_path / "m.tflite"
    save(zoo.build("tiny_cnn"), path)
    assert tflite_io.load(path).ops
    assert [p.name for p in tmp_path.iterdir()] == ["m.tflite"]


def test_truncated_file(tiny_bytes, tmp_path):
    path = tmp_path / "cut.tflite"
    path.write_bytes(tiny_bytes[: len(tiny_bytes) // 3])
    with pytest.raises(ModelError, match=r"cut.tflite is truncated or malformed"):
        tflite_io.load(path)


@pytest.mark.parametrize("cut", [9, 40, 200, 1000, 3000])
def test_every_truncation_is_a_model_error(tiny_bytes, cut):
    with pytest.raises(ModelError):
        tflite_io.loads(tiny_bytes[:cut])


def test_text_file_renamed(tmp_path):
    path = tmp_path / "notes.tflite"
    path.write_text("these are my notes, not a model\n")
    with pytest.raises(ModelError, match=r"notes.tflite is not a TFLite model \(no 'TFL3' file identifier"):
        tflite_io.load(path)


def test_missing_file(tmp_path):
    with pytest.raises(ModelError, match=r"cannot read model file .*nope.tflite"):
        tflite_io.load(tmp_path / "nope.tflite")


def test_unknown_op_is_named_with_index():
    x = Tensor("x", (2, 3), DType.FLOAT32)
    y = Tensor("y", (2, 3), DType.FLOAT32)
    data = dumps(Graph((x, y), (Op(OpType.DELEGATE, (0,), (1,)),), (0,), (1,)))
    with pytest.raises(ModelError, match=r"op #0 DELEGATE \(version 1, FLOAT32\) is not supported"):
        Interpreter(model_content=data)


def test_custom_op_is_named():
    x = Tensor("x", (2, 3), DType.FLOAT32)
    y = Tensor("y", (2, 3), DType.FLOAT32)
    data = dumps(Graph((x, y), (Op(OpType.CUSTOM, (0,), (1,), custom_code="MyFancyOp"),), (0,), (1,)))
    with pytest.raises(ModelError, match=r"op #0 MyFancyOp"):
        Interpreter(model_content=data)


def test_unsupported_quantization_details_are_rejected(tiny_bytes):
    # A per-channel tensor with mismatched zero points is named by index and name.
    x = Tensor("x", (2, 3), DType.INT8)
    from runtime.ir.graph import QuantParams
    y = Tensor("y", (2, 3), DType.INT8, quant=QuantParams((0.1, 0.2), (0, 0, 0), 1))
    data = dumps(Graph((x, y), (Op(OpType.RELU, (0,), (1,)),), (0,), (1,)))
    with pytest.raises(ModelError, match=r"tensor #1 'y' has 2 scales but 3 zero points"):
        tflite_io.loads(data)


def test_a_constant_of_zero_elements_reads_as_empty_as_litert_runs_it(tmp_path):
    """MEAN over an empty axes list: the file stores no buffer for zero elements; LiteRT runs the
    op as an identity, where the reader once called the axes 'used before it is defined'."""
    import numpy as np

    from runtime.ir.graph import DType, Graph, Op, Tensor
    from runtime.interpreter.api import Interpreter
    from runtime.ir.options import ReducerOptions
    from runtime.ir.optypes import OpType
    from runtime.model.tflite_write import save
    from tests.litert_oracle import available, run_litert

    tensors = (Tensor("x", (2, 3), DType.FLOAT32), Tensor("axes", (0,), DType.INT32, data=np.zeros(0, np.int32)),
               Tensor("y", (2, 3), DType.FLOAT32))
    path = tmp_path / "empty_axes.tflite"
    save(Graph(tensors, (Op(OpType.MEAN, (0, 1), (2,), ReducerOptions(keep_dims=False)),), (0,), (2,)), path)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    it = Interpreter(model_path=str(path))
    it.allocate_tensors()
    it.set_tensor(0, x)
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(2), x)
    if available():
        np.testing.assert_array_equal(run_litert([(str(path), {0: x})])[0]["0:2"], x)


def test_an_operator_code_with_only_the_extended_field_reads_as_its_op():
    """ai-edge-quantizer writes builtin_code alone (no deprecated_builtin_code): QUANTIZE (114) must not
    read as ADD (0), which the tflite package's BuiltinCode() would give for any code under 127."""
    import importlib

    import flatbuffers

    from runtime.model.tflite_read import builtin_code

    C = importlib.import_module("tflite.OperatorCode")
    b = flatbuffers.Builder(64)
    C.OperatorCodeStart(b)
    C.OperatorCodeAddBuiltinCode(b, 114)
    b.Finish(C.OperatorCodeEnd(b))
    oc = C.OperatorCode.GetRootAs(bytes(b.Output()), 0)
    assert oc.BuiltinCode() == 0 and builtin_code(oc) == 114
