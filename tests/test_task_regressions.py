"""Bugs the task models (tests/test_task_models.py) found, each pinned on the smallest model that shows it:
int8 RSQRT (the layer norm of a fully quantized transformer) was refused, and a tensor whose shape
only the run tells (a WHILE body's growing slice) was checked at its placeholder shape."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.ir.errors import ModelError
from runtime.ir.graph import DType, Graph, Op, QuantParams, Tensor
from runtime.interpreter.api import Interpreter
from runtime.ir.optypes import OpType
from runtime.ir.options import ConcatenationOptions
from runtime.model.tflite_write import save
from runtime.ops.validate import validate_graph
from tests.litert_oracle import available, run_litert

litert = pytest.mark.skipif(not available(), reason="LiteRT (ai-edge-litert) is not installed")


def _rsqrt(s_in: float, zp_in: int, s_out: float, zp_out: int, n: int, dtype=DType.INT8) -> Graph:
    x = Tensor("x", (1, n), dtype, QuantParams((s_in,), (zp_in,)))
    y = Tensor("y", (1, n), dtype, QuantParams((s_out,), (zp_out,)))
    return Graph((x, y), (Op(OpType.RSQRT, (0,), (1,)),), (0,), (1,))


def _run(graph: Graph, feeds: dict[int, np.ndarray]) -> list[np.ndarray]:
    it = Interpreter(graph=graph)
    it.allocate_tensors()
    for t, v in feeds.items():
        it.set_tensor(t, v)
    it.invoke()
    return [it.get_tensor(t) for t in graph.outputs]


@litert
def test_int8_rsqrt_is_bit_exact_over_every_code(tmp_path):
    """Every input code at or above the zero point (q == zp gives the largest code), over scales
    from a layer norm's variance (tiny, output scale large) to wide ones."""
    cases = [(0.001, -128, 0.05, -128), (0.02, -10, 0.3, -100), (0.5, 0, 0.01, 0), (3e-5, -120, 2.0, -128),
             (0.1, 100, 0.1, 20)]
    rng = np.random.default_rng(7)
    cases += [(float(rng.uniform(1e-4, 1.0)), int(rng.integers(-128, 100)), float(rng.uniform(1e-3, 1.0)),
               int(rng.integers(-128, 127))) for _ in range(6)]
    jobs, ours = [], []
    for k, (s_in, zp_in, s_out, zp_out) in enumerate(cases):
        codes = np.arange(zp_in, 128, dtype=np.int8)[None]
        graph = _rsqrt(s_in, zp_in, s_out, zp_out, codes.shape[1])
        path = tmp_path / f"rsqrt{k}.tflite"
        save(graph, path)
        jobs.append((str(path), {0: codes}))
        ours.append(_run(graph, {0: codes})[0])
    for case, got, want in zip(cases, ours, run_litert(jobs, resolvers=("BUILTIN_REF",))):
        assert not isinstance(want, str), (case, want)
        np.testing.assert_array_equal(got, want["0:1"], err_msg=str(case))


def test_int8_rsqrt_refuses_an_input_below_its_zero_point():
    graph = _rsqrt(0.01, -5, 0.1, 0, 3)
    with pytest.raises(ModelError, match="op #0 RSQRT: Rsqrt is only defined for positive values"):
        _run(graph, {0: np.array([[-5, 10, -6]], np.int8)})


def test_uint8_rsqrt_is_refused_as_tflite_refuses_it():
    with pytest.raises(ModelError, match="RSQRT takes FLOAT32 or INT8"):
        Interpreter(graph=_rsqrt(0.01, 0, 0.1, 0, 3, DType.UINT8))


def _growing_slice() -> Graph:
    """x[:n] (SLICE with a run-time size, declared [1, 1] with signature [-1, -1], as the converter
    writes a WHILE body's slice of its time-major buffer) concatenated with y along axis 0."""
    tensors = (Tensor("x", (4, 3), DType.FLOAT32), Tensor("size", (2,), DType.INT32),
               Tensor("y", (2, 3), DType.FLOAT32),
               Tensor("begin", (2,), DType.INT32, data=np.zeros(2, np.int32)),
               Tensor("part", (1, 1), DType.FLOAT32, shape_signature=(-1, -1)),
               Tensor("out", (3, 3), DType.FLOAT32, shape_signature=(-1, 3)))
    ops = (Op(OpType.SLICE, (0, 3, 1), (4,)), Op(OpType.CONCATENATION, (4, 2), (5,), ConcatenationOptions(0)))
    return Graph(tensors, ops, (0, 1, 2), (5,))


@litert
def test_a_dynamic_tensor_is_checked_at_its_run_time_shape_not_its_placeholder(tmp_path):
    graph = _growing_slice()
    validate_graph(graph)  # was: CONCATENATION input [2, 3] does not concatenate with [1, 1]
    rng = np.random.default_rng(0)
    path = tmp_path / "slice.tflite"
    save(graph, path)
    for n in (1, 3):
        feeds = {0: rng.standard_normal((4, 3)).astype(np.float32), 1: np.array([n, -1], np.int32),
                 2: rng.standard_normal((2, 3)).astype(np.float32)}
        got = _run(graph, feeds)[0]
        want = run_litert([(str(path), feeds)], resolvers=("BUILTIN_REF",))[0]
        assert not isinstance(want, str), want
        np.testing.assert_array_equal(got, want["0:5"])
        assert got.shape == (n + 2, 3)


def test_a_dynamic_tensor_still_meets_its_consumers_checks_when_it_runs():
    graph = _growing_slice()
    feeds = {0: np.zeros((4, 3), np.float32), 1: np.array([2, 2], np.int32), 2: np.zeros((2, 3), np.float32)}
    with pytest.raises(ModelError, match="CONCATENATION"):
        _run(graph, feeds)
