"""8-bit kernels equal LiteRT's reference kernels bit for bit, on generated single-op models
written with the testbed's own .tflite writer (random shapes, scales, zero points, options)."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

from runtime.graph import DType, Graph, Op, QuantParams, Tensor
from runtime.interpreter import Interpreter
from runtime.optypes import OpType
from runtime.options import (Activation, Conv2DOptions, DepthwiseConv2DOptions, FullyConnectedOptions,
                             Padding, TransposeConvOptions)
from runtime.tflite_write import save
from tests.litert_oracle import available, run_litert

pytestmark = pytest.mark.skipif(not available(), reason="LiteRT (ai-edge-litert) is not installed")
CASES_PER_OP = 12


def qt(name, shape, dtype, scale, zp, data=None, axis=0):
    scale = tuple(float(s) for s in np.atleast_1d(scale))
    zp = tuple(int(z) for z in np.broadcast_to(np.atleast_1d(zp), (len(scale),)))
    return Tensor(name, tuple(shape), dtype, QuantParams(scale, zp, axis), data)


def _conv_case(rng, kind):
    n, h, w = 1, int(rng.integers(3, 10)), int(rng.integers(3, 10))
    cin = int(rng.integers(1, 6))
    k = int(rng.integers(1, 4))
    stride = int(rng.integers(1, 3))
    pad = Padding(int(rng.integers(0, 2)))
    act = Activation([0, 1, 3][int(rng.integers(0, 3))])
    s_in, zp_in = float(rng.uniform(0.01, 0.1)), int(rng.integers(-20, 20))
    s_out, zp_out = float(rng.uniform(0.05, 0.5)), int(rng.integers(-20, 20))
    x = qt("x", (n, h, w, cin), DType.INT8, s_in, zp_in)
    if kind == "depthwise":
        mult = int(rng.integers(1, 3))
        cout = cin * mult
        wdata = rng.integers(-127, 128, (1, k, k, cout)).astype(np.int8)
        wt = qt("w", wdata.shape, DType.INT8, rng.uniform(0.001, 0.02, cout), 0, wdata, axis=3)
        opts = DepthwiseConv2DOptions(pad, stride, stride, mult, act)
        op_type = OpType.DEPTHWISE_CONV_2D
    else:
        cout = int(rng.integers(1, 6))
        wdata = rng.integers(-127, 128, (cout, k, k, cin)).astype(np.int8)
        wt = qt("w", wdata.shape, DType.INT8, rng.uniform(0.001, 0.02, cout), 0, wdata, axis=0)
        opts = Conv2DOptions(pad, stride, stride, act)
        op_type = OpType.CONV_2D
    if pad is Padding.VALID and (h < k or w < k):
        pad = Padding.SAME
        opts = type(opts)(**{**opts.__dict__, "padding": pad})
    oh = -(-h // stride) if pad is Padding.SAME else (h - k) // stride + 1
    ow = -(-w // stride) if pad is Padding.SAME else (w - k) // stride + 1
    bias = rng.integers(-5000, 5000, cout).astype(np.int32)
    b = qt("b", (cout,), DType.INT32, np.asarray(wt.quant.scale) * s_in, 0, bias)
    y = qt("y", (n, oh, ow, cout), DType.INT8, s_out, zp_out)
    return Graph((x, wt, b, y), (Op(op_type, (0, 1, 2), (3,), opts, version=3),), (0,), (3,))


def _fc_case(rng):
    batch, depth, units = int(rng.integers(1, 4)), int(rng.integers(1, 700)), int(rng.integers(1, 9))
    s_in, zp_in = float(rng.uniform(0.01, 0.1)), int(rng.integers(-20, 20))
    per_channel = bool(rng.integers(0, 2))
    scales = rng.uniform(0.0005, 0.005, units if per_channel else 1)
    wdata = rng.integers(-127, 128, (units, depth)).astype(np.int8)
    x = qt("x", (batch, depth), DType.INT8, s_in, zp_in)
    wt = qt("w", wdata.shape, DType.INT8, scales, 0, wdata)
    b = qt("b", (units,), DType.INT32, np.broadcast_to(scales * s_in, (units,)), 0,
           rng.integers(-3000, 3000, units).astype(np.int32))
    y = qt("y", (batch, units), DType.INT8, float(rng.uniform(0.05, 0.5)), int(rng.integers(-10, 10)))
    act = Activation([0, 1, 3][int(rng.integers(0, 3))])
    return Graph((x, wt, b, y), (Op(OpType.FULLY_CONNECTED, (0, 1, 2), (3,), FullyConnectedOptions(act),
                                    version=5 if per_channel else 4),), (0,), (3,))


def _transpose_case(rng):
    h, w, cin, cout, k = (int(v) for v in (rng.integers(2, 6), rng.integers(2, 6), rng.integers(1, 4),
                                           rng.integers(1, 4), rng.integers(1, 4)))
    stride = int(rng.integers(1, 3))
    oh, ow = h * stride, w * stride
    s_in, zp_in = float(rng.uniform(0.01, 0.1)), int(rng.integers(-20, 20))
    wdata = rng.integers(-127, 128, (cout, k, k, cin)).astype(np.int8)
    shape = Tensor("shape", (4,), DType.INT32, data=np.array([1, oh, ow, cout], np.int32))
    wt = qt("w", wdata.shape, DType.INT8, rng.uniform(0.001, 0.02, cout), 0, wdata)
    x = qt("x", (1, h, w, cin), DType.INT8, s_in, zp_in)
    y = qt("y", (1, oh, ow, cout), DType.INT8, float(rng.uniform(0.05, 0.5)), int(rng.integers(-10, 10)))
    op = Op(OpType.TRANSPOSE_CONV, (0, 1, 2), (3,), TransposeConvOptions(Padding.SAME, stride, stride), version=3)
    return Graph((shape, wt, x, y), (op,), (2,), (3,))


MAKERS = {
    "conv_2d": lambda rng: _conv_case(rng, "conv"),
    "depthwise_conv_2d": lambda rng: _conv_case(rng, "depthwise"),
    "fully_connected": _fc_case,
    "transpose_conv": _transpose_case,
}


@pytest.mark.parametrize("op", sorted(MAKERS))
def test_bit_exact_with_litert_reference(op):
    with tempfile.TemporaryDirectory() as tmp:
        jobs, graphs = [], []
        for seed in range(CASES_PER_OP):
            rng = np.random.default_rng(seed)
            g = MAKERS[op](rng)
            path = os.path.join(tmp, f"{op}_{seed}.tflite")
            save(g, path)
            x = g.tensors[g.inputs[0]]
            feeds = {g.inputs[0]: rng.integers(-128, 128, x.shape).astype(np.int8)}
            jobs.append((path, feeds))
            graphs.append(g)
        results = run_litert(jobs, resolvers=("BUILTIN_REF",))
        for (path, feeds), want in zip(jobs, results):
            assert not isinstance(want, str), want
            it = Interpreter(model_path=path)
            it.allocate_tensors()
            for index, value in feeds.items():
                it.set_tensor(index, value)
            it.invoke()
            out = it.get_output_details()[0]["index"]
            np.testing.assert_array_equal(it.get_tensor(out), want[f"0:{out}"], err_msg=os.path.basename(path))
