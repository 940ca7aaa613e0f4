"""Published models (MediaPipe's face, hand, iris, pose and segmentation models, copied unmodified; see
tests/fixtures/published/NOTICE.md): they load, match LiteRT's reference kernels, and run on every
shipped phone under every delegate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from runtime.model import tflite_read as tflite_io
from runtime.ir.graph import Graph, Op, Tensor
from runtime.interpreter.api import Interpreter
from runtime.ir.options import Padding, TransposeConvOptions
from runtime.ir.optypes import OpType
from runtime.model.tflite_write import save
from tests import litert_oracle

PUBLISHED = Path(__file__).parent / "fixtures" / "published"
# (file, task) for every published model; the segmentation models carry MediaPipe's custom
# Convolution2DTransposeBias, which LiteRT's own resolver lacks (checked on a builtin twin below).
MODELS = {
    "face_detection_short_range.tflite": "detection",
    "face_detection_full_range_sparse.tflite": "detection",
    "palm_detection_lite.tflite": "detection",
    "pose_detection.tflite": "detection",
    "face_landmark.tflite": "landmarks",
    "hand_landmark_lite.tflite": "landmarks",
    "iris_landmark.tflite": "landmarks",
    "hand_recrop.tflite": "landmarks",
    "selfie_segmentation.tflite": "segmentation",
    "selfie_segmentation_landscape.tflite": "segmentation",
}
CUSTOM = {"selfie_segmentation.tflite", "selfie_segmentation_landscape.tflite"}
# Float outputs agree within 1e-5 of their range (BLAS sums in another order than the reference
# loops). The segmentation models' mask, a sigmoid after a deep decoder, amplifies that rounding:
# LiteRT's own optimised kernels land 0.6e-5-0.85e-5 from its reference there, and ours 1.2e-5-1.6e-5.
TOLERANCE = {name: 2e-5 for name in CUSTOM}
# Bounded by the arithmetic, not by one machine: every op rounds its float32 output once (2^-24 of
# its value) and BLAS may sum a product in another order than LiteRT's loops (about one rounding
# more), so an output can carry two roundings per op on its way. The op count bounds that way.
UNIT_ROUNDOFF = 2.0 ** -24
PHONES = ("pixel3", "pixel4", "iphone_xs")
DELEGATES = ("gpu", "hexagon", "coreml", "nnapi")


def _inputs(graph: Graph, seed: int = 0) -> dict[int, np.ndarray]:
    """Image-like inputs in [-1, 1], the range these models normalise their pixels to."""
    rng = np.random.default_rng(seed)
    return {t: rng.uniform(-1, 1, graph.tensors[t].shape).astype(np.float32) for t in graph.inputs}


def _run(graph: Graph, feeds: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
    it = Interpreter(graph=graph)
    it.allocate_tensors()
    for t, v in feeds.items():
        it.set_tensor(t, v)
    it.invoke()
    return {t: it.get_tensor(t) for t in graph.outputs}


def builtin_twin(graph: Graph) -> Graph:
    """The same model with MediaPipe's Convolution2DTransposeBias written as TFLite's own
    TRANSPOSE_CONV with its bias input: MediaPipe's SAME padding (half of max(0, k - (h-1) % s - 1)
    before) is what TRANSPOSE_CONV computes from the output size, so the two are one computation."""
    from runtime.ops.mediapipe import parse_transpose, transpose_shapes

    tensors, ops = list(graph.tensors), []
    for op in graph.ops:
        if op.type is OpType.CUSTOM and op.custom_code == "Convolution2DTransposeBias":
            p = parse_transpose(op.custom_options)
            x, w, b = (graph.tensors[t] for t in op.inputs)
            out = transpose_shapes([x.shape, w.shape, b.shape], p)[0]
            tensors.append(Tensor(f"{graph.tensors[op.outputs[0]].name}/shape", (4,), _int32(),
                                  data=np.array(out, np.int32)))
            options = TransposeConvOptions(Padding.SAME, p.stride_w, p.stride_h)
            ops.append(Op(OpType.TRANSPOSE_CONV, (len(tensors) - 1, op.inputs[1], op.inputs[0], op.inputs[2]),
                          op.outputs, options, version=3))
        else:
            ops.append(op)
    return Graph(tuple(tensors), tuple(ops), graph.inputs, graph.outputs, signatures=graph.signatures)


def _int32():
    from runtime.ir.graph import DType

    return DType.INT32


def _within_range(name: str, ours: dict, theirs: dict, n_ops: int) -> None:
    limit = max(TOLERANCE.get(name, 1e-5), 2 * UNIT_ROUNDOFF * n_ops)
    for t, got in ours.items():
        want = theirs[f"0:{t}"]
        span = max(float(np.ptp(want)), float(np.max(np.abs(want))), 1e-6)
        err = float(np.max(np.abs(got.astype(np.float64) - want))) / span
        assert err <= limit, f"{name} output tensor #{t}: off by {err:.2e} of its range"


@pytest.mark.skipif(not litert_oracle.available(), reason="LiteRT is not installed")
def test_published_models_match_litert(tmp_path):
    jobs, ours, n_ops = [], {}, {}
    for name in MODELS:
        graph = tflite_io.load(PUBLISHED / name)
        n_ops[name] = len(graph.ops)
        feeds = _inputs(graph)
        ours[name] = _run(graph, feeds)
        path = PUBLISHED / name
        if name in CUSTOM:
            path = tmp_path / name
            save(builtin_twin(graph), path)
        jobs.append((str(path), feeds))
    results = litert_oracle.run_litert(jobs, resolvers=("BUILTIN_REF",))
    for name, theirs in zip(MODELS, results):
        assert not isinstance(theirs, str), f"{name}: {theirs}"
        _within_range(name, ours[name], theirs, n_ops[name])


def test_the_models_cover_three_tasks():
    assert set(MODELS.values()) == {"detection", "landmarks", "segmentation"}
    assert all((PUBLISHED / name).is_file() for name in MODELS)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_published_model_runs_on_every_phone_under_every_delegate(name):
    run_everywhere(tflite_io.load(PUBLISHED / name), name)


def run_everywhere(graph: Graph, name: str) -> None:
    """Timing-only, one inference on every shipped phone: on the CPU and under each delegate, which
    must not fail in prepare and quietly fall back to the CPU."""
    from delegates.registry import make_delegate
    from sim.profile import load_profile

    for phone_name in PHONES:
        phone = load_profile(phone_name)
        cpu = Interpreter(graph=graph, device=phone, num_threads=4, timing_only=True)
        cpu.allocate_tensors()
        cpu.invoke()
        for kind in DELEGATES:
            it = Interpreter(graph=graph, experimental_delegates=[make_delegate(kind, phone)], device=phone,
                             num_threads=4, timing_only=True)
            it.allocate_tensors()
            it.invoke()
            assert it.simulation.latencies[-1] > 0, (name, phone_name, kind)
            # a delegate failing in prepare falls back to the CPU quietly: that is a bug here
            assert not it.simulation.delegation.restored, (name, phone_name, kind, it.simulation.delegation.log)
