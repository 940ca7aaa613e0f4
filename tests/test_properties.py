"""Properties over generated graphs and quantization parameters (hypothesis, 'ci' profile)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from runtime.ir.graph import DType, Graph, Op, QuantParams, Tensor
from runtime.interpreter.api import Interpreter
from runtime.ir.optypes import OpType
from runtime.ir.options import Activation, AddOptions, MulOptions
from runtime.testing.strategies import float_graphs, quant_params, quantized_arrays
from runtime.model.tflite_write import dumps
from tests.test_published_models import UNIT_ROUNDOFF
from runtime.zoo.builder import GraphBuilder

try:
    from ai_edge_litert.interpreter import Interpreter as LiteRT, OpResolverType
except ImportError:  # the oracle; CI installs it
    LiteRT = None


def _run(interpreter_cls, data: bytes, feeds: dict[int, np.ndarray], **kw) -> list[np.ndarray]:
    it = interpreter_cls(model_content=data, **kw)
    it.allocate_tensors()
    for index, value in feeds.items():
        it.set_tensor(index, value)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


@pytest.mark.skipif(LiteRT is None, reason="LiteRT (ai-edge-litert) is not installed")
@settings(max_examples=30)
@given(float_graphs(), st.integers(0, 2**16))
def test_generated_graphs_match_litert_reference(graph, seed):
    data = dumps(graph)
    x = graph.tensors[graph.inputs[0]]
    feeds = {graph.inputs[0]: np.random.default_rng(seed).standard_normal(x.shape).astype(np.float32)}
    ours = _run(Interpreter, data, feeds)
    ref = _run(LiteRT, data, feeds, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    for got, want in zip(ours, ref):
        # Relative to the output's range, or to its magnitude when a random graph squeezes the
        # range (a clamped or near-constant output), so one-ulp reorderings still pass.
        # At least two float32 roundings per op of the graph (see tests/test_published_models.py).
        scale = max(float(want.max() - want.min()), float(np.abs(want).max()), 1e-3)
        assert np.abs(got - want).max() <= max(1e-5, 2 * UNIT_ROUNDOFF * len(graph.ops)) * scale


def _binary_int8(op_type, qa, qb, qy, act, shape):
    a, b = Tensor("a", shape, DType.INT8, qa), Tensor("b", shape, DType.INT8, qb)
    y = Tensor("y", shape, DType.INT8, qy)
    opts = AddOptions(act) if op_type is OpType.ADD else MulOptions(act)
    return Graph((a, b, y), (Op(op_type, (0, 1), (2,), opts, version=2),), (0, 1), (2,))


def _deq(q: np.ndarray, p: QuantParams) -> np.ndarray:
    return (q.astype(np.float64) - p.zero_point[0]) * p.scale[0]


@given(st.sampled_from([OpType.ADD, OpType.MUL]), quant_params(), quant_params(), quant_params(),
       st.sampled_from([Activation.NONE, Activation.RELU]), st.data())
def test_int8_arithmetic_stays_in_range_and_within_a_step_of_float(op_type, qa, qb, qy, act, data):
    shape = (2, 5)
    if op_type is OpType.ADD and max(qa.scale[0], qb.scale[0]) * 2 >= qy.scale[0] * 2**20:
        return  # TFLite requires the output scale to bound the rescaled sum
    a, b = data.draw(quantized_arrays(shape)), data.draw(quantized_arrays(shape))
    it = Interpreter(graph=_binary_int8(op_type, qa, qb, qy, act, shape))
    it.allocate_tensors()
    it.set_tensor(0, a)
    it.set_tensor(1, b)
    it.invoke()
    out = it.get_tensor(2)
    assert out.dtype == np.int8  # so within [-128, 127] by construction; check the arithmetic
    real = _deq(a, qa) + _deq(b, qb) if op_type is OpType.ADD else _deq(a, qa) * _deq(b, qb)
    if act is Activation.RELU:
        real = np.maximum(real, 0)
    ideal = np.clip(np.round(real / qy.scale[0]) + qy.zero_point[0], -128, 127)
    assert np.abs(out.astype(int) - ideal).max() <= 1


@given(st.integers(0, 2**16))
def test_int8_conv_within_a_step_of_float_conv_on_dequantized_inputs(seed):
    from runtime.ir.options import Conv2DOptions, Padding

    rng = np.random.default_rng(seed)
    cin, cout = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    s_in, zp_in, s_out, zp_out = float(rng.uniform(0.01, 0.1)), int(rng.integers(-20, 20)), \
        float(rng.uniform(0.05, 0.5)), int(rng.integers(-20, 20))
    w = rng.integers(-127, 128, (cout, 3, 3, cin)).astype(np.int8)
    s_w = rng.uniform(0.001, 0.02, cout)
    x = rng.integers(-128, 128, (1, 6, 5, cin)).astype(np.int8)
    b = GraphBuilder("t")
    qx, qy = QuantParams((s_in,), (zp_in,)), QuantParams((s_out,), (zp_out,))
    qw = QuantParams(tuple(s_w), (0,) * cout, 0)
    graph = Graph((Tensor("x", x.shape, DType.INT8, qx), Tensor("w", w.shape, DType.INT8, qw, w),
                   Tensor("y", (1, 6, 5, cout), DType.INT8, qy)),
                  (Op(OpType.CONV_2D, (0, 1), (2,), Conv2DOptions(Padding.SAME)),), (0,), (2,))
    it = Interpreter(graph=graph)
    it.allocate_tensors()
    it.set_tensor(0, x)
    it.invoke()
    got = it.get_tensor(2).astype(int)
    xf = ((x.astype(np.float64) - zp_in) * s_in).astype(np.float32)
    wf = (w.astype(np.float64) * s_w[:, None, None, None]).astype(np.float32)
    real = b.evaluate(OpType.CONV_2D, [xf, wf], Conv2DOptions(Padding.SAME))[0].astype(np.float64)
    ideal = np.clip(np.round(real / s_out) + zp_out, -128, 127)
    assert np.abs(got - ideal).max() <= 1
