"""Custom ops: the registry, TFLite_Detection_PostProcess against LiteRT, MediaPipe's ops, and what a
model with an op no registry knows can still do (timing-only, costed from its shapes)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from flatbuffers import flexbuffers

from runtime.ir.errors import ModelError
from runtime.ir.graph import DType, Graph, Op, QuantParams, Tensor
from runtime.interpreter.api import Interpreter
from runtime.ops import custom_ops as custom
from runtime.ir.optypes import OpType
from runtime.model.tflite_write import save
from tests import litert_oracle

litert = pytest.mark.skipif(not litert_oracle.available(), reason="LiteRT is not installed")

DET = "TFLite_Detection_PostProcess"


def _det_graph(n=40, classes=5, background=True, max_det=10, per_det=1, regular=False, dtype=DType.FLOAT32,
               seed=0, **overrides) -> tuple[Graph, dict[int, np.ndarray]]:
    rng = np.random.default_rng(seed)
    width = classes + int(background)
    anchors = np.stack([rng.uniform(0.1, 0.9, n), rng.uniform(0.1, 0.9, n),
                        rng.uniform(0.05, 0.4, n), rng.uniform(0.05, 0.4, n)], axis=1).astype(np.float32)
    enc = (rng.standard_normal((1, n, 4)) * 0.5).astype(np.float32)
    scores = rng.uniform(0, 1, (1, n, width)).astype(np.float32)
    params = {"max_detections": max_det, "max_classes_per_detection": per_det, "detections_per_class": 7,
              "use_regular_nms": regular, "nms_score_threshold": 0.3, "nms_iou_threshold": 0.5,
              "num_classes": classes, "y_scale": 10.0, "x_scale": 10.0, "h_scale": 5.0, "w_scale": 5.0}
    params.update(overrides)
    q = None
    if dtype is DType.UINT8:
        q = QuantParams((0.02,), (128,))
        enc = np.clip(np.round(enc / 0.02) + 128, 0, 255).astype(np.uint8)
        scores = np.clip(np.round(scores / (1 / 255)), 0, 255).astype(np.uint8)
        anchors = np.clip(np.round(anchors / (1 / 255)), 0, 255).astype(np.uint8)
    m = max_det * per_det
    tensors = (
        Tensor("boxes", (1, n, 4), dtype, quant=q),
        Tensor("scores", (1, n, width), dtype, quant=QuantParams((1 / 255,), (0,)) if q else None),
        Tensor("anchors", (n, 4), dtype, quant=QuantParams((1 / 255,), (0,)) if q else None, data=anchors),
        Tensor("det_boxes", (1, m, 4), DType.FLOAT32), Tensor("det_classes", (1, m), DType.FLOAT32),
        Tensor("det_scores", (1, m), DType.FLOAT32), Tensor("num", (1,), DType.FLOAT32))
    op = Op(OpType.CUSTOM, (0, 1, 2), (3, 4, 5, 6), custom_code=DET,
            custom_options=bytes(flexbuffers.Dumps(params)))
    return Graph(tensors, (op,), (0, 1), (3, 4, 5, 6)), {0: enc, 1: scores}


def _ours(graph, feeds):
    it = Interpreter(graph=graph)
    it.allocate_tensors()
    for i, v in feeds.items():
        it.set_tensor(i, v)
    it.invoke()
    return [it.get_tensor(t) for t in graph.outputs]


DET_CASES = {
    "fast": {},
    "fast_two_classes_each": {"per_det": 2},
    "fast_no_background": {"background": False},
    "regular": {"regular": True},
    "regular_few_per_class": {"regular": True, "detections_per_class": 2, "max_det": 6},
    "uint8": {"dtype": DType.UINT8},
    "uint8_regular": {"dtype": DType.UINT8, "regular": True},
    "many_boxes_tight_iou": {"n": 300, "nms_iou_threshold": 0.1, "max_det": 25},
}


@litert
def test_detection_postprocess_matches_litert(tmp_path):
    jobs, ours = [], []
    for name, case in DET_CASES.items():
        graph, feeds = _det_graph(**case)
        path = tmp_path / f"{name}.tflite"
        save(graph, path)
        jobs.append((str(path), feeds))
        ours.append(_ours(graph, feeds))
    for name, got, want in zip(DET_CASES, ours, litert_oracle.run_litert(jobs)):
        assert not isinstance(want, str), f"{name}: {want}"
        count = int(want["0:6"][0])
        assert count > 0, name
        assert int(got[3][0]) == count, name
        rows = count * DET_CASES[name].get("per_det", 1)
        np.testing.assert_allclose(got[0][0, :rows], want["0:3"][0, :rows], rtol=1e-6, atol=1e-7, err_msg=name)
        np.testing.assert_array_equal(got[1][0, :rows], want["0:4"][0, :rows], err_msg=name)
        np.testing.assert_array_equal(got[2][0, :rows], want["0:5"][0, :rows], err_msg=name)


@pytest.mark.parametrize("override, message", [
    ({"num_classes": 9}, "num_classes 9 does not fit 6 class scores"),
    ({"nms_iou_threshold": 0.0}, "nms_iou_threshold 0.0 must be in (0, 1]"),
    ({"max_classes_per_detection": 0}, "max_classes_per_detection positive"),
    ({"y_scale": 0.0}, "must be finite and non-zero"),
    ({"max_detections": 1 << 22}, "above"),
])
def test_detection_parameters_a_model_cannot_run_are_refused_naming_the_op(override, message):
    graph, _ = _det_graph(**override)
    with pytest.raises(ModelError, match="TFLite_Detection_PostProcess") as err:
        Interpreter(graph=graph).allocate_tensors()
    assert message in str(err.value)


def test_damaged_custom_options_are_one_line_naming_the_op():
    graph, _ = _det_graph()
    op = graph.ops[0]
    broken = Graph(graph.tensors, (Op(op.type, op.inputs, op.outputs, custom_code=DET,
                                      custom_options=b"\x07\x01\xff"),), graph.inputs, graph.outputs)
    with pytest.raises(ModelError, match="op #0 TFLite_Detection_PostProcess.*custom options cannot be read"):
        Interpreter(graph=broken).allocate_tensors()


def test_detection_reads_back_from_a_file(tmp_path):
    graph, feeds = _det_graph()
    save(graph, tmp_path / "d.tflite")
    it = Interpreter(model_path=str(tmp_path / "d.tflite"))
    it.allocate_tensors()
    assert it._graph.ops[0].custom_options == graph.ops[0].custom_options
    for i, v in feeds.items():
        it.set_tensor(i, v)
    it.invoke()
    assert int(it.get_tensor(6)[0]) == int(_ours(graph, feeds)[3][0])


# -- the registry -----------------------------------------------------------------------------------


def _one_custom(name: str, blob: bytes | None = None) -> Graph:
    tensors = (Tensor("x", (2, 3), DType.FLOAT32), Tensor("y", (2, 3), DType.FLOAT32))
    return Graph(tensors, (Op(OpType.CUSTOM, (0,), (1,), custom_code=name, custom_options=blob),), (0,), (1,))


def test_a_registered_custom_op_runs_with_its_parameters():
    def kernel(node, x):
        return x * np.float32(node.params["k"])

    custom.register_custom_op("TestScale", kernel, parse=custom.flex_options,
                              shapes=lambda ins, p: [ins[0]], input_types=[["float32"]], output_types=["float32"])
    try:
        graph = _one_custom("TestScale", bytes(flexbuffers.Dumps({"k": 3.0})))
        out = _ours(graph, {0: np.ones((2, 3), np.float32)})[0]
        assert np.all(out == 3.0)
        with pytest.raises(ValueError, match="registered already"):
            custom.register_custom_op("TestScale", kernel)
    finally:
        custom.unregister_custom_op("TestScale")


def test_a_custom_op_nobody_registered_is_refused_naming_it():
    with pytest.raises(ModelError, match="NoSuchOp.*not supported"):
        Interpreter(graph=_one_custom("NoSuchOp")).allocate_tensors()


# -- MediaPipe's ops ------------------------------------------------------------------------------


def _pool_blob(padding, sw, sh, fw, fh, act=0) -> bytes:
    return struct.pack("<6i", padding, sw, sh, fw, fh, act)


def _naive_transpose_bias(x, w, b, stride, same):
    n, h, wd, cin = x.shape
    cout, kh, kw, _ = w.shape
    ph = max(0, kh - (h - 1) % stride - 1) if same else 0
    pw = max(0, kw - (wd - 1) % stride - 1) if same else 0
    oh, ow = stride * (h - 1) + kh - ph, stride * (wd - 1) + kw - pw
    out = np.tile(b, (n, oh, ow, 1)).astype(np.float64)
    for y in range(h):
        for xx in range(wd):
            for fy in range(kh):
                for fx in range(kw):
                    oy, ox = y * stride - ph // 2 + fy, xx * stride - pw // 2 + fx
                    if 0 <= oy < oh and 0 <= ox < ow:
                        out[:, oy, ox] += x[:, y, xx] @ w[:, fy, fx, :].T
    return out


@pytest.mark.parametrize("stride, same, k", [(2, True, 3), (2, False, 2), (1, True, 3), (3, True, 4)])
def test_convolution2d_transpose_bias_matches_mediapipes_loops(stride, same, k):
    rng = np.random.default_rng(stride * 10 + k)
    x = rng.standard_normal((1, 5, 4, 3)).astype(np.float32)
    w = rng.standard_normal((6, k, k, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    want = _naive_transpose_bias(x, w, b, stride, same)
    tensors = (Tensor("x", x.shape, DType.FLOAT32), Tensor("w", w.shape, DType.FLOAT32, data=w),
               Tensor("b", b.shape, DType.FLOAT32, data=b), Tensor("y", want.shape, DType.FLOAT32))
    op = Op(OpType.CUSTOM, (0, 1, 2), (3,), custom_code="Convolution2DTransposeBias",
            custom_options=struct.pack("<3i", 1 if same else 2, stride, stride))
    got = _ours(Graph(tensors, (op,), (0,), (3,)), {0: x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_max_pool_with_argmax_then_unpooling_puts_each_maximum_back():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 6, 6, 2)).astype(np.float32)
    blob = _pool_blob(2, 2, 2, 2, 2)
    tensors = (Tensor("x", x.shape, DType.FLOAT32), Tensor("v", (1, 3, 3, 2), DType.FLOAT32),
               Tensor("i", (1, 3, 3, 2), DType.FLOAT32), Tensor("u", x.shape, DType.FLOAT32))
    ops = (Op(OpType.CUSTOM, (0,), (1, 2), custom_code="MaxPoolingWithArgmax2D", custom_options=blob),
           Op(OpType.CUSTOM, (1, 2), (3,), custom_code="MaxUnpooling2D", custom_options=blob))
    values, index, back = _ours(Graph(tensors, ops, (0,), (1, 2, 3)), {0: x})
    windows = x.reshape(1, 3, 2, 3, 2, 2).transpose(0, 1, 3, 5, 2, 4).reshape(1, 3, 3, 2, 4)
    np.testing.assert_array_equal(values, windows.max(-1))
    np.testing.assert_array_equal(np.floor(index), windows.argmax(-1))
    assert np.all(index - np.floor(index) > 0.05)                     # the +0.1 a later truncation relies on
    np.testing.assert_array_equal(back, np.where(x == np.repeat(np.repeat(values, 2, 1), 2, 2), x, 0))


def test_mediapipe_struct_parameters_are_checked():
    tensors = (Tensor("x", (1, 4, 4, 1), DType.FLOAT32), Tensor("v", (1, 2, 2, 1), DType.FLOAT32),
               Tensor("i", (1, 2, 2, 1), DType.FLOAT32))
    for blob, message in ((b"\x01\x00", "needs 24 bytes"), (_pool_blob(1, 0, 2, 2, 2), "stride_w is 0"),
                          (_pool_blob(7, 2, 2, 2, 2), "padding 7")):
        op = Op(OpType.CUSTOM, (0,), (1, 2), custom_code="MaxPoolingWithArgmax2D", custom_options=blob)
        with pytest.raises(ModelError, match=message):
            Interpreter(graph=Graph(tensors, (op,), (0,), (1, 2))).allocate_tensors()


# -- timing-only without a kernel -------------------------------------------------------------------


def _with_unknown_op() -> Graph:
    """A conv-sized tensor through an op no registry knows, then an ADD the kernels run."""
    tensors = (Tensor("x", (1, 32, 32, 8), DType.FLOAT32), Tensor("y", (1, 32, 32, 8), DType.FLOAT32),
               Tensor("z", (1, 32, 32, 8), DType.FLOAT32))
    ops = (Op(OpType.CUSTOM, (0,), (1,), custom_code="VendorMagic"), Op(OpType.ADD, (1, 0), (2,)))
    return Graph(tensors, ops, (0,), (2,))


def test_timing_only_costs_an_op_without_a_kernel_from_its_shapes():
    from sim.profile import load_profile

    graph = _with_unknown_op()
    with pytest.raises(ModelError, match="VendorMagic.*not supported"):
        Interpreter(graph=graph, device=load_profile("pixel4"))
    it = Interpreter(graph=graph, device=load_profile("pixel4"), timing_only=True)
    assert it.estimated_ops == (0,)
    it.allocate_tensors()
    it.invoke()
    ops = [iv for iv in it.simulation.soc.trace.intervals if iv.kind.value == "op"]
    assert {iv.name for iv in ops} >= {"VendorMagic", "ADD"}
    magic = next(iv for iv in ops if iv.name == "VendorMagic")
    assert magic.end > magic.start          # it costs time: its bytes at least


def test_dtb_benchmark_timing_only_says_which_ops_were_estimated(tmp_path, capsys):
    from runtime.cli import main as cli

    path = tmp_path / "vendor.tflite"
    save(_with_unknown_op(), path)
    assert cli.main(["benchmark", "--graph", str(path), "--device", "pixel4", "--num_runs", "2"]) == 1
    assert "VendorMagic" in capsys.readouterr().err
    assert cli.main(["benchmark", "--graph", str(path), "--device", "pixel4", "--num_runs", "2",
                     "--timing_only"]) == 0
    out = capsys.readouterr().out
    assert "estimated: no kernel for op #0 VendorMagic" in out
    assert "Inference timings in us" in out


def test_records_name_the_ops_costed_without_a_kernel(tmp_path, capsys):
    import json

    from runtime.cli import main as cli
    from runtime.sweep.runner import run_file

    path = tmp_path / "vendor.tflite"
    save(_with_unknown_op(), path)
    out = tmp_path / "bench.json"
    assert cli.main(["benchmark", "--graph", str(path), "--device", "pixel4", "--num_runs", "2",
                     "--timing_only", "--output_json", str(out)]) == 0
    assert json.loads(out.read_text())["estimated"] == ["op #0 VendorMagic"]
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"device: pixel3\nmodel: {{path: {path.name}}}\ntiming_only: true\n"
                        "runs: {warmup: 0, count: 1}\nmatrix:\n  delegates: [[], [gpu: {}]]\n")
    results = run_file(scenario, tmp_path / "out")
    assert [r["estimated"] for r in results["records"]] == [["op #0 VendorMagic"]] * 2
