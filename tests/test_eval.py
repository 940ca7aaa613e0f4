"""dtb eval classification / detection: TFLite's preprocessing, top-K and COCO mAP as direct computations give
them (LiteRT for the CPU, each delegate's own outputs for the delegates), batching, and one-line errors."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from runtime.cli.main import main
from runtime.cli.common import cpp_float, profile_from_flags
from runtime.evaluation.classification import (Normalization, Runner, central_crop, input_spec, list_images, preprocess,
                                read_denylist, resize_bilinear, select_images, to_input, top_k, topk_counts)
from runtime.interpreter.api import Interpreter
from runtime.ir import errors
from tests import litert_oracle

TASKS = Path(__file__).parent / "fixtures" / "tasks"
EVAL = Path(__file__).parent / "fixtures" / "eval"
LABELS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
# (device, delegate flags) of every configuration a test sweeps; hexagon only where the model is 8-bit.
CONFIGS = [("pixel4", ()), ("pixel4", ("--use_gpu",)), ("pixel4", ("--use_nnapi",)), ("pixel4", ("--use_hexagon",)),
           ("iphone_xs", ("--use_coreml",))]


def cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def ok(*argv) -> str:
    code, out, err = cli(*argv)
    assert code == 0, err
    return out


def values(out: str, prefix: str) -> list[str]:
    """The value of every line starting with `prefix` ("Top-1 Accuracy: 0.5" -> "0.5")."""
    return [line[len(prefix):].split()[0] for line in out.splitlines() if line.startswith(prefix)]


def configs_for(model: Path) -> list[tuple[str, tuple[str, ...]]]:
    quantized = Interpreter(model_path=model).get_input_details()[0]["dtype"] != np.float32
    return [c for c in CONFIGS if quantized or "--use_hexagon" not in c[1]]


def oracle_outputs(model: Path, inputs: np.ndarray) -> list[list[np.ndarray]]:
    """LiteRT's outputs (in output order) for each input image, batch 1."""
    if not litert_oracle.available():
        pytest.fail("LiteRT (ai-edge-litert) is the oracle of these tests; install the test extra")
    index = Interpreter(model_path=model).get_input_details()[0]["index"]
    details = Interpreter(model_path=model).get_output_details()
    results = litert_oracle.run_litert([(str(model), {index: x[None]}) for x in inputs],
                                       resolvers=("BUILTIN_REF", "BUILTIN_WITHOUT_DEFAULT_DELEGATES"))
    for r in results:
        assert not isinstance(r, str), r
    return [[r[f"0:{d['index']}"] for d in details] for r in results]


def outputs_of(model: Path, inputs: np.ndarray, device: str, flags=()) -> list[list[np.ndarray]]:
    """The testbed's outputs through the Python API, one image at a time, with the delegates of `flags`."""
    from delegates.registry import parse_flags

    profile = profile_from_flags(device)
    it = Interpreter(model_path=model, experimental_delegates=parse_flags(list(flags), profile)[0], device=profile)
    it.allocate_tensors()
    outs = []
    for x in inputs:
        it.set_tensor(it.get_input_details()[0]["index"], x[None])
        it.invoke()
        outs.append([it.get_tensor(d["index"]) for d in it.get_output_details()])
    return outs


# -- preprocessing, top-K: the pieces --------------------------------------------------------------


def test_central_crop_rounds_as_c_does():
    image = np.arange(40 * 45 * 3, dtype=np.float32).reshape(40, 45, 3)
    crop = central_crop(image)  # side min(round(35.0), round(39.375)) = 35; start round(2.5) = 3, round(5.0) = 5
    assert crop.shape == (35, 35, 3)
    np.testing.assert_array_equal(crop, image[3:38, 5:40])


def _naive_resize(image: np.ndarray, oh: int, ow: int) -> np.ndarray:
    """tflite::reference_ops::ResizeBilinear (no align_corners, no half-pixel centers), element by element."""
    h, w = image.shape[:2]
    sy, sx = np.float32(h) / np.float32(oh), np.float32(w) / np.float32(ow)
    out = np.zeros((oh, ow, 3), np.float32)
    one = np.float32(1)
    for y in range(oh):
        iy = np.float32(y) * sy
        y0, y1 = max(int(np.floor(iy)), 0), min(int(np.ceil(iy)), h - 1)
        for x in range(ow):
            ix = np.float32(x) * sx
            x0, x1 = max(int(np.floor(ix)), 0), min(int(np.ceil(ix)), w - 1)
            fy, fx = iy - np.float32(y0), ix - np.float32(x0)
            out[y, x] = (image[y0, x0] * (one - fy) * (one - fx) + image[y1, x0] * fy * (one - fx)
                         + image[y0, x1] * (one - fy) * fx + image[y1, x1] * fy * fx)
    return out


@pytest.mark.parametrize("shape,size", [((35, 35), (32, 32)), ((20, 31), (32, 24)), ((64, 64), (64, 64))])
def test_resize_is_tflite_bilinear(shape, size):
    image = np.random.default_rng(0).integers(0, 256, (*shape, 3)).astype(np.float32)
    np.testing.assert_array_equal(resize_bilinear(image, *size), _naive_resize(image, *size))


def test_input_conversions():
    from runtime.evaluation.classification import ImageInput

    pixels = np.array([[[0.0, 127.6, 255.0]]], np.float32)
    np.testing.assert_allclose(to_input(pixels, ImageInput(1, 1, np.dtype(np.float32))), [[[-1, 0.1 / 127.5, 1]]],
                               rtol=0, atol=1e-7)
    # int8 quantized for TFLite's tool (scale 1/127.5, zero point -1): its bytes, pixel - 128 truncated
    int8 = ImageInput(1, 1, np.dtype(np.int8), 1 / 127.5, -1)
    np.testing.assert_array_equal(to_input(pixels, int8), [[[-128, 0, 127]]])
    # uint8 quantized on another range: the normalised value is quantized with the input's own scale
    uint8 = ImageInput(1, 1, np.dtype(np.uint8), 0.0378, 130)
    want = np.clip(np.floor(np.array([-1, 0.1 / 127.5, 1]) / 0.0378 + 0.5) + 130, 0, 255)
    np.testing.assert_array_equal(to_input(pixels, uint8), [[want]])
    np.testing.assert_array_equal(to_input(pixels, uint8, Normalization(quantized="raw")), [[[0, 127, 255]]])


def test_top_k_keeps_ties_in_index_order_and_counts_cumulatively():
    scores = np.array([[1, 3, 3, 0], [-128, 5, 5, 5]], np.int8)
    np.testing.assert_array_equal(top_k(scores, 3), [[1, 2, 0], [1, 2, 3]])
    np.testing.assert_array_equal(topk_counts(top_k(scores, 4), [0, 0]), [0, 0, 1, 2])


def test_denylist_is_one_based_and_num_images_applies_after_it(tmp_path):
    deny = tmp_path / "deny.txt"
    deny.write_text("2\n\n4\n")
    assert select_images(5, read_denylist(deny, 5), 2) == [0, 2]
    assert select_images(5, read_denylist(deny, 5)) == [0, 2, 4]


def test_images_are_listed_in_file_name_order_without_other_files(tmp_path):
    for name in ("b.png", "a.JPG", "c.jpeg", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    assert [p.name for p in list_images(tmp_path)] == ["a.JPG", "b.png", "c.jpeg"]


# -- a classifier made here: tiny_cnn on images of every kind --------------------------------------


def _write_images(folder: Path, count: int, seed: int, size=None) -> None:
    """PNG (RGB, grey, palette, RGBA) and JPEG images of assorted sizes."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(count):
        h, w = size or (int(rng.integers(30, 70)), int(rng.integers(30, 70)))
        rgb = Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
        image = [rgb, rgb.convert("L"), rgb.convert("P"), rgb.convert("RGBA")][i % 4]
        image.save(folder / f"img_{i:03d}.{'jpg' if i % 5 == 4 else 'png'}")


@pytest.fixture(scope="module")
def tiny_set(tmp_path_factory) -> Path:
    """tiny_cnn (float and int8) with 14 images, labels and ground truth: a dataset of our own."""
    from runtime.model.loader import ModelSource, load_model
    from runtime.model.tflite_write import save

    root = tmp_path_factory.mktemp("cls")
    _write_images(root / "images", 14, seed=1)
    (root / "labels.txt").write_text("\n".join(LABELS) + "\n")
    truth = np.random.default_rng(2).integers(0, 10, 14)
    (root / "truth.txt").write_text("\n".join(LABELS[t] for t in truth) + "\n")
    for quantization in ("none", "int8"):
        graph = load_model(ModelSource(zoo="tiny_cnn", quantization=quantization))
        save(graph, str(root / f"tiny_{quantization}.tflite"))
    return root


def classify(root: Path, model: Path, *extra, images="images", truth="truth.txt", labels="labels.txt") -> str:
    return ok("eval", "classification", "--model_file", model, "--ground_truth_images_path", root / images,
              "--ground_truth_labels", root / truth, "--model_output_labels", root / labels, *extra)


def _direct_topk(outputs: list[list[np.ndarray]], truth: list[int]) -> list[str]:
    """Top-1..Top-min(10, classes) accuracy lines computed directly: a stable sort by descending score."""
    classes = outputs[0][0].size
    k = min(10, classes)
    hits = np.zeros(k)
    for outs, t in zip(outputs, truth):
        v = outs[0].reshape(-1).astype(np.float64)
        order = sorted(range(classes), key=lambda c: -v[c])[:k]
        if t in order:
            hits[order.index(t):] += 1
    return [cpp_float(np.float32(h) / np.float32(len(truth))) for h in hits]


def _inputs(model: Path, paths, crop=0.875) -> np.ndarray:
    from runtime.model.tflite_read import load

    spec = input_spec(load(model), str(model))
    return np.stack([preprocess(p, spec, Normalization(), crop) for p in paths])


def _check_classification(root, model, paths, truth, images="images", gt="truth.txt", labels="labels.txt",
                          extra=()):
    """Every configuration's Top-K lines against a direct computation: LiteRT's outputs for the CPU,
    the testbed's own (Python API, batch 1) for each delegate; and the CPU-reference comparison."""
    inputs = _inputs(model, paths)
    litert = oracle_outputs(model, inputs)
    cpu = outputs_of(model, inputs, "pixel4")
    for device, flags in configs_for(model):
        out = classify(root, model, "--device", device, *flags, *extra, images=images, truth=gt, labels=labels)
        own = outputs_of(model, inputs, device, flags) if flags else cpu
        want = _direct_topk(own if flags else litert, truth)
        assert [values(out, f"Top-{i + 1} Accuracy: ")[0] for i in range(len(want))] == want, (device, flags)
        assert not values(out, f"Top-{len(want) + 1} Accuracy: ")
        assert values(out, "Num evaluation runs: ") == [str(len(paths))]
        assert values(out, "CPU reference (1 thread): Top-1 Accuracy: ") == _direct_topk(litert, truth)[:1]
        agree = sum(int(np.argmax(a[0]) == np.argmax(b[0])) for a, b in zip(own, cpu))
        m = re.search(r"top-1 agreement=(\S+) \((\d+) of (\d+) images\) mean_abs_output_diff=(\S+)", out)
        assert m and int(m.group(2)) == agree and int(m.group(3)) == len(paths)
        q = Interpreter(model_path=model).get_output_details()[0]["quantization"]
        deq = lambda o: (o.astype(np.float64) - q[1]) * q[0] if q[0] else o.astype(np.float64)  # noqa: E731
        diff = np.mean([np.abs(deq(a[0]) - deq(b[0])).mean() for a, b in zip(own, cpu)])
        assert float(m.group(4)) == pytest.approx(diff, rel=1e-5, abs=1e-12)
        assert re.search(r"^Simulated per image on \S+ with .* \(batch 1\): latency=\d+\(us\) energy=[0-9.e+-]+\(mJ\)$",
                         out, re.M)
    return out


@pytest.mark.parametrize("quantization", ["none", "int8"])
def test_classification_matches_direct_topk_on_every_delegate(tiny_set, quantization):
    paths = list_images(tiny_set / "images")
    truth = [LABELS.index(t) for t in (tiny_set / "truth.txt").read_text().split()]
    _check_classification(tiny_set, tiny_set / f"tiny_{quantization}.tflite", paths, truth)


def test_latency_and_energy_are_benchmarks_batch_1_figures(tiny_set):
    model = tiny_set / "tiny_none.tflite"
    out = classify(tiny_set, model, "--use_gpu")
    bench = ok("benchmark", "--graph", model, "--use_gpu", "--num_threads", "1", "--num_runs", "2")
    us = re.search(r"Inference \(avg\): (\S+)", bench).group(1)
    mj = re.search(r"Energy per inference \(mJ\): total=(\S+)", bench).group(1)
    assert values(out, "Inference latency: avg=") == [f"{us}(us),"]
    assert f"latency={us}(us) energy={mj}(mJ)" in out


def test_classification_file_and_batches_give_identical_results(tiny_set, tmp_path):
    model = tiny_set / "tiny_none.tflite"
    texts = []
    for batch in ("1", "5", "16"):
        path = tmp_path / f"out{batch}.json"
        out = classify(tiny_set, model, "--use_gpu", "--batch_size", batch, "--output_file_path", path)
        texts.append((out, path.read_text()))
    assert texts[1] == texts[0] and texts[2] == texts[0]
    record = json.loads(texts[0][1])
    assert record["num_runs"] == 14 and len(record["images"]) == 14 and len(record["topk_accuracies"]) == 10
    assert [p.name for p in tmp_path.iterdir()] and not list(tmp_path.glob(".*.tmp"))


def test_runner_outputs_do_not_depend_on_the_batch(tiny_set):
    from delegates.registry import parse_flags

    model = tiny_set / "tiny_int8.tflite"
    inputs = _inputs(model, list_images(tiny_set / "images"))
    profile = profile_from_flags("pixel4")

    def make():
        return Interpreter(model_path=model, experimental_delegates=parse_flags(["--use_nnapi"], profile)[0],
                           device=profile)

    one, six = Runner(make, 1), Runner(make, 6)
    assert six.batch == 6
    np.testing.assert_array_equal(six.run(inputs)[0], one.run(inputs)[0])


def test_runner_falls_back_to_one_at_a_time_when_the_first_image_differs(tiny_set):
    from runtime.evaluation.classification import Timing

    model = tiny_set / "tiny_none.tflite"
    inputs = _inputs(model, list_images(tiny_set / "images"))[:5]
    make = lambda: Interpreter(model_path=model)  # noqa: E731
    exact = Runner(make, 1).run(inputs)[0]
    wrong = Timing(0.0, 0.0, (exact[:1] + 1,))  # as if the batched graph had computed image 0 otherwise
    runner = Runner(make, 4, first=wrong)
    assert runner.batch == 4
    np.testing.assert_array_equal(runner.run(inputs)[0], exact)
    assert runner.batch == 1 and runner.batched is None


def test_denylist_and_num_images_choose_the_images(tiny_set):
    model = tiny_set / "tiny_none.tflite"
    (tiny_set / "deny.txt").write_text("1\n3\n")
    out = classify(tiny_set, model, "--denylist_file_path", tiny_set / "deny.txt", "--num_images", "5")
    paths = list_images(tiny_set / "images")
    chosen = [paths[i] for i in (1, 3, 4, 5, 6)]
    truth = [LABELS.index(t) for t in (tiny_set / "truth.txt").read_text().split()]
    want = _direct_topk(oracle_outputs(model, _inputs(model, chosen)), [truth[i] for i in (1, 3, 4, 5, 6)])
    assert values(out, "Num evaluation runs: ") == ["5"] and values(out, "Top-1 Accuracy: ") == want[:1]


def test_fewer_than_ten_classes_print_as_many_k(tmp_path):
    from runtime.model.loader import ModelSource, load_model
    from runtime.model.tflite_write import save

    model = tmp_path / "three.tflite"
    save(load_model(ModelSource(zoo="tiny_cnn", zoo_args="classes=3")), str(model))
    _write_images(tmp_path / "images", 4, seed=3)
    (tmp_path / "labels.txt").write_text("a\nb\nc\n")
    (tmp_path / "truth.txt").write_text("a\nb\nc\na\n")
    out = classify(tmp_path, model)
    assert values(out, "Top-3 Accuracy: ") == ["1"] and not values(out, "Top-4 Accuracy: ")


def test_help_lists_the_delegate_flags():
    with contextlib.redirect_stdout(io.StringIO()) as buf, pytest.raises(SystemExit) as exit_:
        main(["eval", "classification", "--help"])
    out = buf.getvalue()
    assert exit_.value.code == 0 and "--use_gpu" in out and "batch-1" in out and "--denylist_file_path" in out


# -- a detector: the SSD fixture, ground truth made from its own detections ------------------------


def _coco_results(outputs: list[list[np.ndarray]], sizes: list[tuple[int, int]]) -> list[dict]:
    """Detections as COCO results, written out directly: category = class + 1, boxes in pixels."""
    results = []
    for image_id, (outs, (w, h)) in enumerate(zip(outputs, sizes), 1):
        boxes, classes, scores, count = (o.reshape(-1) for o in outs)
        for i in range(int(count[0])):
            y0, x0, y1, x1 = (float(v) for v in boxes[4 * i:4 * i + 4])
            results.append({"image_id": image_id, "category_id": int(classes[i]) + 1, "score": float(scores[i]),
                            "bbox": [x0 * w, y0 * h, (x1 - x0) * w, (y1 - y0) * h]})
    return results


def _pycocotools(gt_path: Path, results: list[dict]) -> list[float]:
    """AP at IoU 0.50, 0.55, ... 0.95, then AP@[.50:.95], straight from pycocotools."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(gt_path))
        ev = COCOeval(gt, gt.loadRes(results), "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    p = ev.eval["precision"][:, :, :, 0, -1]
    per_iou = [float(p[t][p[t] > -1].mean()) if (p[t] > -1).any() else -1.0 for t in range(10)]
    assert per_iou[0] == pytest.approx(ev.stats[1]) and per_iou[5] == pytest.approx(ev.stats[2])
    return per_iou + [float(ev.stats[0])]


@pytest.fixture(scope="module")
def ssd_set(tmp_path_factory) -> Path:
    """Images for the SSD fixture and COCO ground truth: its CPU detections, moved a few pixels."""
    root = tmp_path_factory.mktemp("det")
    _write_images(root / "images", 8, seed=4, size=(72, 90))
    model = TASKS / "detection_ssd.tflite"
    paths = list_images(root / "images")
    found = _coco_results(oracle_outputs(model, _inputs(model, paths, crop=None)), [(90, 72)] * len(paths))
    rng = np.random.default_rng(5)
    anns = [{"id": k, "image_id": r["image_id"], "category_id": r["category_id"], "iscrowd": 0,
             "bbox": [v + float(rng.uniform(-3, 3)) for v in r["bbox"][:2]] + r["bbox"][2:],
             "area": r["bbox"][2] * r["bbox"][3]} for k, r in enumerate(found[::2], 1) if r["bbox"][2] > 0]
    truth = {"images": [{"id": i, "file_name": p.name, "width": 90, "height": 72} for i, p in enumerate(paths, 1)],
             "annotations": anns, "categories": [{"id": k + 1, "name": f"class{k}"} for k in range(5)]}
    (root / "truth.json").write_text(json.dumps(truth))
    (root / "classes.txt").write_text("\n".join(f"class{k}" for k in range(5)) + "\n")
    return root


def detect(root: Path, model: Path, *extra, images="images", truth="truth.json", classes="classes.txt") -> str:
    return ok("eval", "detection", "--model_file", model, "--ground_truth_images_path", root / images,
              "--ground_truth_json", root / truth, "--classes_file", root / classes, *extra)


def _map_lines(out: str) -> list[str]:
    return [*(v.rstrip(",") for v in values(out, "Average Precision [IOU Threshold=")), *values(out, "Overall mAP: ")]


def _check_detection(root, model, paths, sizes, images="images", gt="truth.json", classes="classes.txt", extra=()):
    """Every configuration's AP lines against pycocotools run directly on that configuration's
    detections: LiteRT's for the CPU, the testbed's own (Python API, batch 1) for each delegate."""
    inputs = _inputs(model, paths, crop=None)
    litert = oracle_outputs(model, inputs)
    for device, flags in configs_for(model):
        out = detect(root, model, "--device", device, *flags, *extra, images=images, truth=gt, classes=classes)
        mine = outputs_of(model, inputs, device, flags) if flags else litert
        want = _pycocotools(root / gt, _coco_results(mine, sizes))
        aps = [line.split("]: ")[1] for line in out.splitlines() if line.startswith("Average Precision [IOU")]
        assert aps == [cpp_float(v) for v in want[:10]], (device, flags)
        assert values(out, "Overall mAP: ") == [cpp_float(want[10])]
        summary = f"mAP@[.50:.95]: {cpp_float(want[10])} mAP@.50: {cpp_float(want[0])} mAP@.75: {cpp_float(want[5])}"
        assert summary in out
        cpu = _pycocotools(root / gt, _coco_results(litert, sizes))
        assert f"CPU reference (1 thread): mAP@[.50:.95]: {cpp_float(cpu[10])} " in out
    return want


@pytest.mark.parametrize("name", ["detection_ssd.tflite", "detection_ssd_uint8.tflite"])
def test_detection_matches_pycocotools_on_every_delegate(ssd_set, name):
    paths = list_images(ssd_set / "images")
    want = _check_detection(ssd_set, TASKS / name, paths, [(90, 72)] * len(paths))
    if name == "detection_ssd.tflite":
        assert 0 < want[10] < 1  # ground truth near, not on, the detections: a real mAP


def test_detection_is_not_batched_and_writes_its_file(ssd_set, tmp_path):
    model = TASKS / "detection_ssd.tflite"
    make = lambda: Interpreter(model_path=model)  # noqa: E731
    assert Runner(make, 8).batch == 1  # TFLite_Detection_PostProcess writes [1, ...] whatever the batch
    path = tmp_path / "det.json"
    out = detect(ssd_set, model, "--output_file_path", path, "--num_images", "3")
    record = json.loads(path.read_text())
    assert record["num_runs"] == 3 and values(out, "Num evaluation runs: ") == ["3"]
    assert {d["image_id"] for d in record["detections"]} <= {1, 2, 3}
    assert record["map"] == pytest.approx(float(values(out, "Overall mAP: ")[0]), rel=1e-5)


def test_classes_file_may_start_with_the_background(ssd_set, tmp_path):
    (tmp_path / "classes.txt").write_text("background\n" + (ssd_set / "classes.txt").read_text())
    plain = detect(ssd_set, TASKS / "detection_ssd.tflite", "--num_images", "3")
    with_background = detect(ssd_set, TASKS / "detection_ssd.tflite", "--num_images", "3",
                             classes=tmp_path / "classes.txt")
    assert with_background == plain


# -- errors: one line naming what is wrong, exit 1, no file ----------------------------------------


def _broken_images(root: Path, tmp_path: Path) -> Path:
    """A copy of the images with the last one (in file-name order) damaged: the run fails at its end."""
    folder = tmp_path / "broken"
    shutil.copytree(root / "images", folder)
    last = list_images(folder)[-1]
    last.with_name("zz_broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot an image")
    last.unlink()
    return folder


def _fails(argv, message: str, out: Path) -> None:
    code, stdout, err = cli(*argv, "--output_file_path", out)
    assert code == 1, stdout
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert message in err, err
    assert not out.exists() and not list(out.parent.glob(f".{out.name}*"))


@pytest.mark.parametrize("change,message", [
    ({"--model_file": "missing.tflite"}, "missing.tflite"),
    ({"--ground_truth_images_path": "no_folder"}, "--ground_truth_images_path {tmp}/no_folder: no such directory"),
    ({"--ground_truth_images_path": "BROKEN"}, "cannot read image {tmp}/broken/zz_broken.png"),
    ({"--ground_truth_labels": "short.txt"}, "--ground_truth_labels {tmp}/short.txt has 3 labels for the 14 images"),
    ({"--ground_truth_labels": "stranger.txt"}, "--ground_truth_labels {tmp}/stranger.txt line 1: 'cat' is not a "
                                                "label"),
    ({"--model_output_labels": "short.txt"}, "--model_output_labels {tmp}/short.txt has 3 labels; the model's output "
                                             "has 10 scores"),
    ({"--denylist_file_path": "deny.txt"}, "--denylist_file_path {tmp}/deny.txt line 2: image 15 is out of range"),
    ({"--model_file": "DETECTOR"}, "a classifier has one output, a score vector; this model has 4"),
])
def test_classification_errors(tiny_set, tmp_path, change, message):
    (tmp_path / "short.txt").write_text("zero\none\ntwo\n")
    (tmp_path / "stranger.txt").write_text("cat\n" * 14)
    (tmp_path / "deny.txt").write_text("1\n15\n")
    special = {"BROKEN": _broken_images(tiny_set, tmp_path) if "BROKEN" in change.values() else None,
               "DETECTOR": TASKS / "detection_ssd.tflite"}
    args = {"--model_file": tiny_set / "tiny_none.tflite", "--ground_truth_images_path": tiny_set / "images",
            "--ground_truth_labels": tiny_set / "truth.txt", "--model_output_labels": tiny_set / "labels.txt"}
    args.update({k: special.get(v) or tmp_path / v for k, v in change.items()})
    argv = ["eval", "classification", *[str(x) for kv in args.items() for x in kv]]
    _fails(argv, message.format(tmp=tmp_path), tmp_path / "out.json")


@pytest.mark.parametrize("change,message", [
    ({"--model_file": "CLASSIFIER"}, "a detector has 4 outputs"),
    ({"--ground_truth_json": "not.json"}, "--ground_truth_json {tmp}/not.json: not JSON"),
    ({"--ground_truth_json": "bad_box.json"}, "--ground_truth_json {tmp}/bad_box.json: annotations[0]: 'bbox' must "
                                              "be 4"),
    ({"--ground_truth_json": "other.json"}, "is not among the images of --ground_truth_json {tmp}/other.json"),
    ({"--classes_file": "short.txt"}, "--classes_file {tmp}/short.txt has 3 class names; the model's "
                                      "TFLite_Detection_PostProcess has 5 classes"),
    ({"--ground_truth_images_path": "BROKEN"}, "cannot read image {tmp}/broken/zz_broken.png"),
])
def test_detection_errors(ssd_set, tiny_set, tmp_path, change, message):
    truth = json.loads((ssd_set / "truth.json").read_text())
    (tmp_path / "not.json").write_text("{images: []")
    (tmp_path / "bad_box.json").write_text(json.dumps({**truth, "annotations": [{"id": 1, "image_id": 1,
                                                                                 "category_id": 1, "bbox": [1, 2]}]}))
    (tmp_path / "other.json").write_text(json.dumps({**truth, "images": truth["images"][1:], "annotations": []}))
    (tmp_path / "short.txt").write_text("a\nb\nc\n")
    if "BROKEN" in change.values():
        _broken_images(ssd_set, tmp_path)
        truth["images"][-1]["file_name"] = "zz_broken.png"
        (tmp_path / "broken.json").write_text(json.dumps(truth))
    special = {"CLASSIFIER": tiny_set / "tiny_none.tflite", "BROKEN": tmp_path / "broken"}
    args = {"--model_file": TASKS / "detection_ssd.tflite", "--ground_truth_images_path": ssd_set / "images",
            "--ground_truth_json": tmp_path / "broken.json" if "BROKEN" in change.values() else ssd_set / "truth.json",
            "--classes_file": ssd_set / "classes.txt"}
    args.update({k: special.get(v) or tmp_path / v for k, v in change.items()})
    argv = ["eval", "detection", *[str(x) for kv in args.items() for x in kv]]
    _fails(argv, message.format(tmp=tmp_path), tmp_path / "out.json")


def test_output_folder_must_exist(tiny_set, tmp_path):
    code, _, err = cli("eval", "classification", "--model_file", tiny_set / "tiny_none.tflite",
                       "--ground_truth_images_path", tiny_set / "images",
                       "--ground_truth_labels", tiny_set / "truth.txt",
                       "--model_output_labels", tiny_set / "labels.txt",
                       "--output_file_path", tmp_path / "no" / "o.json")
    want = f"dtb eval classification: error: cannot write {tmp_path}/no/o.json: no such directory {tmp_path}/no"
    assert code == 1 and err.strip() == want


def test_api_raises_the_projects_errors(tmp_path):
    from runtime.evaluation.classification import load_image
    from runtime.evaluation.detection import load_coco

    (tmp_path / "x.png").write_text("text")
    with pytest.raises(errors.TestbedError, match="x.png"):
        load_image(tmp_path / "x.png")
    with pytest.raises(errors.TestbedError, match="no such file"):
        load_coco(tmp_path / "none.json")


# -- the trained fixtures (tests/fixtures/eval), every variant present -----------------------------


def _fixtures(task: str, stem: str) -> list[Path]:
    return sorted((EVAL / task).glob(f"{stem}_*.tflite"))


@pytest.mark.parametrize("model", _fixtures("digits", "digits"), ids=lambda p: p.stem)
def test_digits_fixture_accuracy_on_every_delegate(model):
    root = EVAL / "digits"
    labels = (root / "labels.txt").read_text().split()
    truth = [labels.index(t) for t in (root / "ground_truth_labels.txt").read_text().split()]
    n = 16  # the first 16 images in each configuration: the sweep stays quick
    paths = list_images(root / "images")[:n]
    out = _check_classification(root, model, paths, truth[:n], gt="ground_truth_labels.txt", extra=("--num_images", n))
    assert float(values(out, "CPU reference (1 thread): Top-1 Accuracy: ")[0]) > 0.85  # a trained classifier


@pytest.mark.parametrize("model", _fixtures("shapes", "shapes"), ids=lambda p: p.stem)
def test_shapes_fixture_map_on_every_delegate(model, tmp_path):
    root = EVAL / "shapes"
    truth = json.loads((root / "ground_truth.json").read_text())
    paths = list_images(root / "images")[:16]
    by_name = {im["file_name"]: im for im in truth["images"]}
    # ground truth for the first 16 images only, ids renumbered 1.. as the direct computation numbers them
    ids = {by_name[p.name]["id"]: k for k, p in enumerate(paths, 1)}
    small = {"images": [{**by_name[p.name], "id": ids[by_name[p.name]["id"]]} for p in paths],
             "annotations": [{**a, "image_id": ids[a["image_id"]]} for a in truth["annotations"]
                             if a["image_id"] in ids],
             "categories": truth["categories"]}
    (tmp_path / "truth.json").write_text(json.dumps(small))
    shutil.copy(root / "classes.txt", tmp_path / "classes.txt")
    sizes = [(by_name[p.name]["width"], by_name[p.name]["height"]) for p in paths]
    want = _check_detection(tmp_path, model, paths, sizes, images=root / "images", extra=("--num_images", 16))
    assert want[0] > 0.5  # a trained detector: AP at IoU 0.5 on these 16 images


def test_fixture_folders_hold_what_the_tests_sweep():
    for task, stem in (("digits", "digits"), ("shapes", "shapes")):
        if (EVAL / task).is_dir():
            assert [p.stem for p in _fixtures(task, stem)] == [f"{stem}_{v}" for v in
                                                              ("dynamic", "float16", "float32", "int8")]


def test_classification_shows_images_done_on_a_terminal_and_keeps_stdout(tiny_set, monkeypatch):
    import itertools

    from runtime.report import progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    model = tiny_set / "tiny_none.tflite"
    plain = classify(tiny_set, model, "--batch_size", "4")
    ticks, tty = itertools.count(), Tty()
    monkeypatch.setattr(progress, "_clock", lambda: next(ticks) * 1.0)   # a host second between reports
    out, code = io.StringIO(), None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(tty):
        code = main([str(a) for a in ("eval", "classification", "--model_file", model, "--ground_truth_images_path",
                                      tiny_set / "images", "--ground_truth_labels", tiny_set / "truth.txt",
                                      "--model_output_labels", tiny_set / "labels.txt", "--batch_size", "4")])
    assert code == 0 and out.getvalue() == plain
    assert re.search(r"\b\d+/14 \[", tty.getvalue()) and "image" in tty.getvalue()   # chunks of 4 of 14 images
