"""A batch of images gets, image for image, the bits each image gets alone: the float kernels
choose their path and cut their sums per image (runtime/ops/fast_select.py, fast_gemm.Plan,
conv.conv_sums, dense.py). `dtb eval` batches on that promise."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from runtime.interpreter.api import Interpreter
from runtime.ir.graph import DType, Graph, Op, Tensor
from runtime.ir.optypes import OpType
from runtime.ir.options import Activation, FullyConnectedOptions, Padding
from runtime.ops import dense, fast_select
from runtime.ops.base import Node
from tests.test_fast_kernels import Case, REFERENCE, build

DIGITS = os.path.join(os.path.dirname(__file__), "fixtures", "eval", "digits", "digits_float32.tflite")


class _Node:
    def __init__(self):
        self.cache = {}

    def cached(self, key, make):
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]


def _fc_graph(n: int, depth: int, units: int, w: np.ndarray) -> Graph:
    tensors = (Tensor("x", (n, depth), DType.FLOAT32), Tensor("w", (units, depth), DType.FLOAT32, None, w),
               Tensor("y", (n, units), DType.FLOAT32))
    op = Op(OpType.FULLY_CONNECTED, (0, 1, -1), (2,), FullyConnectedOptions(Activation.NONE, 0, False, False))
    return Graph(tensors, (op,), (0,), (2,))


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 20), st.integers(1, 300), st.integers(1, 130), st.integers(0, 2**16))
def test_fully_connected_rows_do_not_depend_on_their_batch(n, depth, units, seed):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((units, depth)).astype(np.float32)
    x = rng.standard_normal((n, depth)).astype(np.float32)
    batch = dense.fully_connected(Node(0, (g := _fc_graph(n, depth, units, w)).ops[0], g), x, w)
    i = int(rng.integers(n))
    g1 = _fc_graph(1, depth, units, w)
    np.testing.assert_array_equal(batch[i:i + 1], dense.fully_connected(Node(0, g1.ops[0], g1), x[i:i + 1], w))


@pytest.mark.parametrize("kernels", fast_select.CHOICES)
@pytest.mark.parametrize("depth,units", [(64, 10), (512, 128), (37, 5), (1024, 200)])
def test_fully_connected_batch_equals_one_by_one(kernels, depth, units):
    """(512, 128) and (37, 5) are shapes where BLAS's sgemm rounds a row differently as rows are added."""
    rng = np.random.default_rng(depth)
    w = rng.standard_normal((units, depth)).astype(np.float32)
    x = rng.standard_normal((9, depth)).astype(np.float32)
    with fast_select.using(kernels):
        batch = dense.fully_connected(Node(0, (g := _fc_graph(9, depth, units, w)).ops[0], g), x, w)
        for i in range(len(x)):
            g1 = _fc_graph(1, depth, units, w)
            np.testing.assert_array_equal(batch[i:i + 1], dense.fully_connected(Node(0, g1.ops[0], g1), x[i:i + 1], w))


# Convolutions on both sides of every choice a plan makes (by rows or by columns, one piece or
# several, im2col or x itself, the fast or the reference kernel by work), and shapes where BLAS's
# sgemm rounds a row differently as rows are added (37x5, 512x128, 32x1000, 96x24).
_CONVS = [
    Case("conv", "float32", n=5, h=7, w=7, cin=64, cout=512, kh=1, kw=1),  # by columns, several pieces
    Case("conv", "float32", n=4, h=16, w=16, cin=32, cout=64),  # by rows, several pieces
    Case("conv", "float32", n=3, h=9, w=9, cin=3, cout=8, stride=(2, 2)),  # below the work threshold
    Case("conv", "float32", n=3, h=4, w=4, cin=256, cout=256, padding=Padding.VALID),  # by columns, im2col
    Case("conv", "float32", n=5, h=3, w=3, cin=37, cout=5, kh=1, kw=1),
    Case("conv", "float32", n=5, h=2, w=2, cin=512, cout=128, kh=1, kw=1),
    Case("conv", "float32", n=5, h=1, w=1, cin=32, cout=1000, kh=1, kw=1),
    Case("conv", "float32", n=5, h=12, w=12, cin=96, cout=24, kh=1, kw=1),
    Case("conv", "int8", n=5, h=7, w=7, cin=64, cout=512, kh=1, kw=1),
    Case("depthwise", "float32", n=3, h=20, w=20, cin=32),
]


@pytest.mark.parametrize("kernels", fast_select.CHOICES)
@pytest.mark.parametrize("case", _CONVS, ids=lambda c: f"{c.kind}-{c.dtype}-{c.n}x{c.h}x{c.w}x{c.cin}-{c.cout}")
def test_convolution_batch_equals_one_by_one(kernels, case):
    graph, args = build(case)
    kernel = REFERENCE[case.kind, case.dtype != "float32"]  # the op's entry: it picks the fast kernel or not
    with fast_select.using(kernels):
        batch = np.array(kernel(Node(0, graph.ops[0], graph), *args))
        for i in range(case.n):
            g1 = _one_image(graph)
            one = kernel(Node(0, g1.ops[0], g1), args[0][i:i + 1], *args[1:])
            np.testing.assert_array_equal(batch[i:i + 1], one)


def _one_image(graph: Graph) -> Graph:
    """The same single-op graph with its input and output at batch 1 (the same weights)."""
    ends = set(graph.inputs) | set(graph.outputs)
    return dataclasses.replace(graph, tensors=tuple(
        dataclasses.replace(t, shape=(1, *t.shape[1:])) if k in ends else t for k, t in enumerate(graph.tensors)))


@pytest.mark.parametrize("kernels", fast_select.CHOICES)
def test_a_trained_model_batched_gives_each_image_its_own_outputs(kernels):
    rng = np.random.default_rng(0)
    with fast_select.using(kernels):
        one = Interpreter(model_path=DIGITS)
        one.allocate_tensors()
        inp, out = one.get_input_details()[0], one.get_output_details()[0]["index"]
        batch = Interpreter(model_path=DIGITS)
        batch.resize_tensor_input(inp["index"], [6, *inp["shape"][1:]])
        batch.allocate_tensors()
        x = rng.random((6, *inp["shape"][1:]), dtype=np.float32)
        batch.set_tensor(inp["index"], x)
        batch.invoke()
        got = batch.get_tensor(out)
        for i in range(6):
            one.set_tensor(inp["index"], x[i:i + 1])
            one.invoke()
            np.testing.assert_array_equal(got[i:i + 1], one.get_tensor(out))


def test_the_evaluation_runner_keeps_its_batches_on_a_float_model():
    """Runner checks a batch's first image against its batch-1 run and falls back to one image
    per invoke on any difference: on a float model it now keeps batching."""
    from runtime.evaluation.classification import Runner, Timing

    rng = np.random.default_rng(1)
    make = lambda: Interpreter(model_path=DIGITS, num_threads=2)  # noqa: E731
    single = make()
    single.allocate_tensors()
    inp = single.get_input_details()[0]
    images = rng.random((11, *inp["shape"][1:]), dtype=np.float32)
    single.set_tensor(inp["index"], images[:1])
    single.invoke()
    first = Timing(0.0, 0.0, tuple(single.get_tensor(d["index"]) for d in single.get_output_details()))
    runner = Runner(make, 4, single=single, first=first)
    outs = runner.run(images)
    assert runner.batch == 4 and runner.batched is not None
    assert outs[0].shape[0] == 11
    for i in (0, 5, 10):  # the padded last chunk too
        single.set_tensor(inp["index"], images[i:i + 1])
        single.invoke()
        np.testing.assert_array_equal(outs[0][i:i + 1], single.get_tensor(single.get_output_details()[0]["index"]))
