"""The one model loader: a .tflite file or a zoo model, quantized, the same for the CLI, scenarios and Python."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from runtime.ir import errors
from runtime.ir.errors import ModelError
from runtime.ir.graph import DType, Graph, Op, Tensor
from runtime.ir.optypes import OpType
from runtime.model.tflite_write import dumps, save


def _two_input_model(path):
    """ADD of two float inputs, then a ReLU: calibration must see both inputs."""
    a, b = Tensor("a", (1, 4), DType.FLOAT32), Tensor("b", (1, 4), DType.FLOAT32)
    s, y = Tensor("sum", (1, 4), DType.FLOAT32), Tensor("y", (1, 4), DType.FLOAT32)
    save(Graph((a, b, s, y), (Op(OpType.ADD, (0, 1), (2,)), Op(OpType.RELU, (2,), (3,))), (0, 1), (3,)), path)
    return path


def _cli_args(**kw) -> argparse.Namespace:
    base = {"graph": None, "zoo": None, "zoo_args": [], "quantization": "none"}
    return argparse.Namespace(**{**base, **kw})


def test_cli_runner_and_python_api_load_the_same_quantized_zoo_model():
    from runtime.cli.common import model_from_flags as cli_load
    from runtime.model.loader import ModelSource, load_model
    from runtime.sweep.runner import build_model
    from runtime.scenario.load import ModelSpec, Quantization

    api = load_model(ModelSource(zoo="tiny_cnn", zoo_args={"resolution": 16}, quantization="int8"))
    cli = cli_load(_cli_args(zoo="tiny_cnn", zoo_args=["resolution=16"], quantization="int8")).graph
    runner = build_model(ModelSpec(zoo="tiny_cnn", args={"resolution": 16}, quantization=Quantization.INT8))
    assert dumps(api) == dumps(cli) == dumps(runner)


def test_runner_calibrates_every_input_of_a_model(tmp_path):
    from runtime.model.loader import ModelSource, load_model
    from runtime.sweep.runner import build_model
    from runtime.scenario.load import ModelSpec, Quantization

    path = _two_input_model(tmp_path / "two.tflite")
    graph = build_model(ModelSpec(path=path, quantization=Quantization.INT8))
    assert [graph.tensors[t].dtype for t in graph.inputs] == [DType.INT8, DType.INT8]
    assert dumps(graph) == dumps(load_model(ModelSource(path=path, quantization="int8")))


def test_given_samples_calibrate_instead_of_the_seed(tmp_path):
    from runtime.model.loader import ModelSource, calibration_samples, load_model

    path = _two_input_model(tmp_path / "two.tflite")
    seeded = load_model(ModelSource(path=path, quantization="int8"))
    assert dumps(seeded) == dumps(load_model(ModelSource(path=path, quantization="int8",
                                                         samples=calibration_samples(seeded))))
    # inputs that do not cancel: an ADD output of all zeros would get a degenerate scale, which LiteRT's ADD
    # refuses (its rescaling multiplier must stay below one)
    wide = [[np.full((1, 4), 50.0, np.float32), np.full((1, 4), -20.0, np.float32)]]
    other = load_model(ModelSource(path=path, quantization="int8", samples=wide))
    assert other.tensors[other.inputs[0]].quant.scale != seeded.tensors[seeded.inputs[0]].quant.scale


@pytest.mark.parametrize("source, message", [
    ({}, "give exactly one of --graph FILE.tflite or --zoo NAME"),
    ({"zoo": "tiny_cnn", "path": "m.tflite"}, "give exactly one of --graph FILE.tflite or --zoo NAME"),
    ({"path": "missing.tflite"}, "missing.tflite"),
    ({"path": "m.tflite", "zoo_args": {"alpha": 1}}, "--zoo_args applies to --zoo models only"),
    ({"zoo": "tiny_cnn", "zoo_args": {"depth": 3}}, "has no argument 'depth'"),
    ({"zoo": "tiny_cnn", "quantization": "int4"}, "--quantization must be one of none, float16"),
])
def test_errors_are_model_errors_naming_the_flag_or_file(source, message):
    from runtime.model.loader import FLAGS, ModelSource, load_model

    with pytest.raises(ModelError) as exc:
        load_model(ModelSource(**source), FLAGS)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_scenario_names_are_keys():
    from runtime.model.loader import KEYS, ModelSource, load_model

    with pytest.raises(errors.TestbedError, match="model.args applies to model.zoo models only"):
        load_model(ModelSource(path="m.tflite", zoo_args={"alpha": 1}), KEYS)



def test_an_op_code_set_only_in_builtin_code_reads_as_that_op():
    """TFLite takes the larger of builtin_code and deprecated_builtin_code (schema_utils.cc GetBuiltinCode);
    ai-edge-quantizer writes the QUANTIZE and DEQUANTIZE it adds with the deprecated field left 0."""
    import tflite

    from runtime.model.tflite_read import loads

    x, y, z = (Tensor(n, (1, 4), DType.FLOAT32) for n in "xyz")
    graph = Graph((x, y, z), (Op(OpType.MUL, (0, 0), (1,)), Op(OpType.RELU, (1,), (2,))), (0,), (2,))
    buf = bytearray(dumps(graph))
    model = tflite.Model.GetRootAs(buf, 0)
    for i in range(model.OperatorCodesLength()):
        oc = model.OperatorCodes(i)
        field = oc._tab.Offset(4)           # deprecated_builtin_code, an int8
        assert field and oc.DeprecatedBuiltinCode() > 0
        buf[oc._tab.Pos + field] = 0
    assert tflite.Model.GetRootAs(buf, 0).OperatorCodes(0).BuiltinCode() == 0     # the package's own reading
    assert [op.type for op in loads(bytes(buf)).ops] == [OpType.MUL, OpType.RELU]
