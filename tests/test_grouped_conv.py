"""Grouped CONV_2D (input channels a multiple of the filter's, as ResNeXt and RegNet export): LiteRT the judge."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from runtime.interpreter.api import Interpreter
from runtime.ir.errors import ModelError
from runtime.ir.graph import DType, QuantParams, Tensor
from runtime.ir.optypes import OpType
from runtime.ir.options import Activation, Conv2DOptions, Padding
from runtime.model.tflite_write import save
from tests.delegate_kit import single_op
from tests.litert_oracle import available, run_litert

pytestmark = pytest.mark.skipif(not available(), reason="LiteRT (ai-edge-litert) is not installed")

F32, I8, I32 = DType.FLOAT32, DType.INT8, DType.INT32


def _float_model(rng, groups: int, stride: int, padding: Padding):
    cin, per_out = 3, 2
    w = rng.standard_normal((groups * per_out, 3, 3, cin)).astype(np.float32)
    b = rng.standard_normal(groups * per_out).astype(np.float32)
    tensors = [Tensor("x", (1, 7, 7, groups * cin), F32), Tensor("w", w.shape, F32, data=w),
               Tensor("b", b.shape, F32, data=b)]
    out = 7 if padding is Padding.SAME else 5
    out = -(-out // stride) if padding is Padding.SAME else (7 - 3) // stride + 1
    return single_op(OpType.CONV_2D, tensors, Tensor("y", (1, out, out, groups * per_out), F32),
                     Conv2DOptions(padding, stride, stride, Activation.RELU))[0]


def _int8_model(rng, groups: int):
    cin, per_out = 4, 3
    cout = groups * per_out
    w = rng.integers(-127, 128, (cout, 3, 3, cin)).astype(np.int8)
    b = rng.integers(-500, 500, cout).astype(np.int32)
    scales = tuple(float(s) for s in rng.uniform(0.002, 0.02, cout))
    tensors = [Tensor("x", (1, 6, 6, groups * cin), I8, quant=QuantParams((0.05,), (3,))),
               Tensor("w", w.shape, I8, data=w, quant=QuantParams(scales, (0,) * cout, 0)),
               Tensor("b", b.shape, I32, data=b, quant=QuantParams(tuple(0.05 * s for s in scales), (0,) * cout, 0))]
    return single_op(OpType.CONV_2D, tensors, Tensor("y", (1, 6, 6, cout), I8, quant=QuantParams((0.2,), (-5,))),
                     Conv2DOptions(Padding.SAME, 1, 1, Activation.NONE))[0]


def _both(tmp_path, graph, feed):
    path = tmp_path / "m.tflite"
    save(graph, path)
    theirs = run_litert([(str(path), {graph.inputs[0]: feed})])[0]
    assert not isinstance(theirs, str), theirs
    it = Interpreter(model_path=str(path))
    it.allocate_tensors()
    it.set_tensor(graph.inputs[0], feed)
    it.invoke()
    return it.get_tensor(graph.outputs[0]), next(v for k, v in theirs.items() if k.startswith("0:"))


@pytest.mark.parametrize("groups, stride, padding", [(2, 1, Padding.SAME), (4, 2, Padding.VALID), (1, 1, Padding.SAME)])
def test_float_grouped_conv_matches_litert(tmp_path, groups, stride, padding):
    rng = np.random.default_rng(groups * 10 + stride)
    graph = _float_model(rng, groups, stride, padding)
    ours, theirs = _both(tmp_path, graph, rng.standard_normal(graph.tensors[graph.inputs[0]].shape).astype(np.float32))
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


def test_int8_per_channel_grouped_conv_matches_litert_exactly(tmp_path):
    rng = np.random.default_rng(3)
    graph = _int8_model(rng, 3)
    ours, theirs = _both(tmp_path, graph, rng.integers(-128, 128, (1, 6, 6, 12)).astype(np.int8))
    np.testing.assert_array_equal(ours, theirs)


def test_channels_that_do_not_form_groups_are_one_error_naming_the_op():
    rng = np.random.default_rng(0)
    graph = _float_model(rng, 2, 1, Padding.SAME)
    bad = list(graph.tensors)
    bad[0] = Tensor("x", (1, 7, 7, 5), F32)   # 5 channels: not a multiple of the filter's 3
    with pytest.raises(ModelError, match="CONV_2D.*has 5 channels.*expects 3, or a multiple of it"):
        Interpreter(graph=dataclasses.replace(graph, tensors=tuple(bad))).allocate_tensors()
