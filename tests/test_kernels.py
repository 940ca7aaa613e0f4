"""The vectorised float kernels against plain-loop references, over generated shapes and options."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from runtime.ir.optypes import OpType
from runtime.ir.options import (Activation, Conv2DOptions, DepthwiseConv2DOptions, Padding, Pool2DOptions,
                             TransposeConvOptions)
from runtime.ops.parallel import set_num_threads
from runtime.zoo.builder import GraphBuilder
from tests import naive


def run(op_type, arrays, options):
    return GraphBuilder("t").evaluate(op_type, arrays, options)[0]


def close(got, want, rtol=1e-5):
    want = np.asarray(want, np.float64)
    scale = max(np.abs(want).max(), 1.0)
    np.testing.assert_allclose(got, want, atol=rtol * scale, rtol=0)


conv_case = st.fixed_dictionaries({
    "n": st.integers(1, 2), "h": st.integers(1, 9), "w": st.integers(1, 9), "cin": st.integers(1, 5),
    "cout": st.integers(1, 6), "kh": st.integers(1, 4), "kw": st.integers(1, 4),
    "sh": st.integers(1, 3), "sw": st.integers(1, 3), "dh": st.integers(1, 2), "dw": st.integers(1, 2),
    "same": st.booleans(), "act": st.sampled_from([0, 1, 2, 3]), "bias": st.booleans(),
    "seed": st.integers(0, 2**16), "threads": st.sampled_from([1, 2]),
})


def _valid(c) -> bool:
    if c["same"]:
        return True
    return c["h"] >= (c["kh"] - 1) * c["dh"] + 1 and c["w"] >= (c["kw"] - 1) * c["dw"] + 1


@given(conv_case)
def test_conv_2d_matches_loops(c):
    if not _valid(c):
        return
    rng = np.random.default_rng(c["seed"])
    x = rng.standard_normal((c["n"], c["h"], c["w"], c["cin"])).astype(np.float32)
    w = rng.standard_normal((c["cout"], c["kh"], c["kw"], c["cin"])).astype(np.float32)
    b = rng.standard_normal(c["cout"]).astype(np.float32) if c["bias"] else None
    opts = Conv2DOptions(Padding.SAME if c["same"] else Padding.VALID, c["sw"], c["sh"], Activation(c["act"]),
                         c["dw"], c["dh"])
    got = run(OpType.CONV_2D, [x, w, b], opts)
    close(got, naive.conv2d(x, w, b, (c["sh"], c["sw"]), (c["dh"], c["dw"]), c["same"], c["act"]))


@given(conv_case, st.integers(1, 3))
def test_depthwise_conv_2d_matches_loops(c, mult):
    if not _valid(c):
        return
    set_num_threads(c["threads"])
    rng = np.random.default_rng(c["seed"])
    x = rng.standard_normal((c["n"], c["h"], c["w"], c["cin"])).astype(np.float32)
    w = rng.standard_normal((1, c["kh"], c["kw"], c["cin"] * mult)).astype(np.float32)
    b = rng.standard_normal(c["cin"] * mult).astype(np.float32) if c["bias"] else None
    opts = DepthwiseConv2DOptions(Padding.SAME if c["same"] else Padding.VALID, c["sw"], c["sh"], mult,
                                  Activation(c["act"]), c["dw"], c["dh"])
    try:
        got = run(OpType.DEPTHWISE_CONV_2D, [x, w, b], opts)
    finally:
        set_num_threads(1)
    close(got, naive.depthwise(x, w, b, (c["sh"], c["sw"]), (c["dh"], c["dw"]), c["same"], mult, c["act"]))


def test_depthwise_threads_split_large_outputs_identically():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 192, 192, 32)).astype(np.float32)  # above MIN_PARALLEL_ELEMENTS
    w = rng.standard_normal((1, 3, 3, 32)).astype(np.float32)
    opts = DepthwiseConv2DOptions(Padding.SAME, 1, 1, 1)
    one = run(OpType.DEPTHWISE_CONV_2D, [x, w], opts)
    set_num_threads(2)
    try:
        two = run(OpType.DEPTHWISE_CONV_2D, [x, w], opts)
    finally:
        set_num_threads(1)
    np.testing.assert_array_equal(one, two)


@given(st.integers(1, 7), st.integers(1, 7), st.integers(1, 3), st.integers(1, 3), st.integers(1, 3),
       st.booleans(), st.sampled_from(["max", "avg"]), st.integers(0, 1000))
def test_pools_match_loops(h, w, k, s, c, same, kind, seed):
    if not same and (h < k or w < k):
        return
    x = np.random.default_rng(seed).standard_normal((1, h, w, c)).astype(np.float32)
    opts = Pool2DOptions(Padding.SAME if same else Padding.VALID, s, s, k, k)
    op = OpType.MAX_POOL_2D if kind == "max" else OpType.AVERAGE_POOL_2D
    close(run(op, [x], opts), naive.pool(x, (k, k), (s, s), same, kind))


@given(st.integers(1, 5), st.integers(1, 5), st.integers(1, 3), st.integers(1, 3), st.integers(1, 3),
       st.integers(1, 2), st.booleans(), st.booleans(), st.integers(0, 1000))
def test_transpose_conv_matches_loops(h, w, k, s, cin, cout, same, bias, seed):
    rng = np.random.default_rng(seed)
    oh, ow = (h * s, w * s) if same else ((h - 1) * s + k, (w - 1) * s + k)
    x = rng.standard_normal((1, h, w, cin)).astype(np.float32)
    wt = rng.standard_normal((cout, k, k, cin)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32) if bias else None
    opts = TransposeConvOptions(Padding.SAME if same else Padding.VALID, s, s)
    got = run(OpType.TRANSPOSE_CONV, [np.array([1, oh, ow, cout], np.int32), wt, x, b], opts)
    close(got, naive.transpose_conv(x, wt, b, (oh, ow), (s, s), same))


@pytest.mark.parametrize("op,fn", [
    (OpType.LOGISTIC, lambda x: 1 / (1 + np.exp(-x.astype(np.float64)))),
    (OpType.TANH, np.tanh),
    (OpType.HARD_SWISH, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    (OpType.ELU, lambda x: np.where(x < 0, np.expm1(x), x)),
    (OpType.RELU6, lambda x: np.clip(x, 0, 6)),
])
def test_unary_activations(op, fn):
    x = np.linspace(-20, 20, 4001, dtype=np.float32)
    close(run(op, [x], None), fn(x), rtol=1e-6)


def test_int32_div_truncates_toward_zero():
    a = np.array([7, -7, 7, -7], np.int32)
    b = np.array([2, 2, -2, -2], np.int32)
    np.testing.assert_array_equal(run(OpType.DIV, [a, b], None), [3, -3, -3, 3])
