"""Damaged `dtb eval` data, generated: images (absurd headers, decompression bombs, truncated files,
wrong magic, flipped bytes), COCO ground truth (mutated field by field), normalisations that overflow
and models whose input would not fit. Each is refused with one line (TestbedError in the API, exit 1
on the command line) before the work it would cost: no pixel decoded, nothing preprocessed."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import random
import struct
import subprocess
import sys
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageFile

from runtime.cli.main import main
from runtime.evaluation import classification as cls
from runtime.evaluation.classification import (MAX_IMAGE_PIXELS, PREPROCESS_COPIES, ImageInput, Normalization,
                                               check_finite, check_preprocessing, image_size, load_pixels, preprocess)
from runtime.evaluation.detection import MAX_JSON_DEPTH, check_detections, coco_map, load_coco
from runtime.ir import errors

ROOT = Path(__file__).resolve().parent.parent
SHAPES = ROOT / "tests" / "fixtures" / "eval" / "shapes"
DIGITS = ROOT / "tests" / "fixtures" / "eval" / "digits"


def one_line(exc: pytest.ExceptionInfo, *parts: str) -> str:
    message = str(exc.value)
    assert "\n" not in message and len(message) < 400, message
    for part in parts:
        assert part in message, message
    return message


def cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def fails_in_one_line(argv, *parts: str) -> str:
    code, out, err = cli(*argv)
    assert code == 1, out + err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for part in parts:
        assert part in err, err
    return err


@pytest.fixture
def decodes(monkeypatch) -> list:
    """Every image Pillow starts to decode (ImageFile.load), recorded."""
    calls = []
    load = ImageFile.ImageFile.load

    def counted(self):
        calls.append(self.size)
        return load(self)

    monkeypatch.setattr(ImageFile.ImageFile, "load", counted)
    return calls


# -- images ----------------------------------------------------------------------------------------


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_claiming(width: int, height: int, idat: bytes = b"") -> bytes:
    """A valid PNG header (IHDR, 8-bit RGB) claiming width x height, then a tiny IDAT: a bomb's shape."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(idat or b"\0" * 64, 9))
            + _chunk(b"IEND", b""))


def jpeg_claiming(width: int, height: int) -> bytes:
    """A real small JPEG whose SOF0 header is rewritten to claim width x height."""
    buf = io.BytesIO()
    Image.new("RGB", (16, 16), (200, 10, 10)).save(buf, "JPEG")
    data = bytearray(buf.getvalue())
    sof = data.index(b"\xff\xc0")
    data[sof + 5:sof + 9] = struct.pack(">HH", height, width)
    return bytes(data)


def good_images(rng: random.Random) -> dict[str, bytes]:
    """A PNG (RGB, grey, palette or RGBA) and a JPEG of a random small size."""
    out = {}
    for fmt in ("PNG", "JPEG"):
        w, h = rng.randint(1, 40), rng.randint(1, 40)
        im = Image.frombytes("RGB", (w, h), bytes(rng.getrandbits(8) for _ in range(w * h * 3)))
        if fmt == "PNG":
            im = im.convert(rng.choice(["RGB", "L", "P", "RGBA"]))
        buf = io.BytesIO()
        im.save(buf, fmt)
        out[fmt] = buf.getvalue()
    return out


# Headers over the limit, from just over it to Pillow's own bomb range and beyond (a JPEG holds 16 bits a side).
_BIG = [("png", 100_000, 100_000), ("png", 1, MAX_IMAGE_PIXELS + 1), ("png", MAX_IMAGE_PIXELS + 1, 1),
        ("png", 7072, 7072), ("png", 9500, 9500), ("png", 13_400, 13_400), ("png", 2**31 - 1, 2**31 - 1),
        ("jpeg", 7072, 7072), ("jpeg", 9500, 9500), ("jpeg", 13_400, 13_400), ("jpeg", 65_535, 65_535),
        ("jpeg", 65_535, 800)]


@pytest.mark.parametrize("kind,width,height", _BIG)
def test_absurd_headers_are_refused_before_decoding(tmp_path, decodes, kind, width, height):
    path = tmp_path / f"bomb.{kind}"
    path.write_bytes(png_claiming(width, height) if kind == "png" else jpeg_claiming(width, height))
    for read in (load_pixels, image_size, lambda p: preprocess(p, ImageInput(8, 8, np.dtype(np.float32)))):
        with pytest.raises(errors.TestbedError) as info:
            read(path)
        one_line(info, str(path), "above the limit of 50,000,000 pixels (refused before decoding)")
    assert decodes == []


def test_a_decompression_bomb_is_refused_by_the_stated_limit_not_decoded(tmp_path, decodes):
    # 8,000 x 8,000 zero pixels: 192 MB decoded from a file of a few hundred kilobytes
    row = b"\0" + b"\0" * (8000 * 3)
    path = tmp_path / "bomb.png"
    path.write_bytes(png_claiming(8000, 8000, row * 8000))
    assert path.stat().st_size < 400_000
    with pytest.raises(errors.TestbedError) as info:
        load_pixels(path)
    one_line(info, "8000 x 8000 = 64,000,000 pixels, above the limit")
    assert decodes == []
    assert load_pixels(path, max_pixels=64_000_000).shape == (8000, 8000, 3)  # the limit is the only reason


def _damaged(rng: random.Random, good: dict[str, bytes]) -> tuple[str, bytes]:
    """One damaged image file: truncated, bytes flipped or overwritten, or another format's bytes."""
    fmt = rng.choice(["PNG", "JPEG"])
    data = bytearray(good[fmt])
    how = rng.choice(["truncate", "flip", "overwrite", "magic", "zero_size", "other_format"])
    if how == "truncate":
        data = data[:rng.randrange(0, len(data))]
    elif how == "flip":
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif how == "overwrite":
        at = rng.randrange(len(data))
        data[at:at + 4] = rng.choice([b"\xff\xff\xff\xff", b"\0\0\0\0", b"\x7f\xff\xff\xff"])
    elif how == "magic":
        data[:rng.randint(1, 8)] = bytes(rng.getrandbits(8) for _ in range(8))[:rng.randint(1, 8)]
    elif how == "zero_size":
        data = bytearray(png_claiming(0, rng.choice([0, 5])) if fmt == "PNG" else jpeg_claiming(0, 7))
    else:
        buf = io.BytesIO()
        kind = rng.choice(["GIF", "BMP", "TIFF", "WEBP", "ICO"])
        Image.new("RGB", (4, 4)).save(buf, kind)
        data = bytearray(buf.getvalue())
    return f"{fmt}/{how}", bytes(data)


def test_generated_damaged_images_decode_or_fail_in_one_line(tmp_path):
    """300 generated files (seeded): each decodes to uint8 RGB or is a one-line TestbedError naming it;
    another format's bytes (GIF, BMP, TIFF, WebP, ICO) are never decoded."""
    rng = random.Random(20261127)
    outcomes = {"decoded": 0, "refused": 0}
    for case in range(300):
        if case % 20 == 0:
            good = good_images(rng)
        what, data = _damaged(rng, good)
        path = tmp_path / f"case_{case}.png"
        path.write_bytes(data)
        try:
            pixels = load_pixels(path)
        except errors.TestbedError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc) and len(str(exc)) < 400, (what, str(exc))
            outcomes["refused"] += 1
            continue
        assert not what.endswith("other_format"), what
        assert pixels.dtype == np.uint8 and pixels.ndim == 3 and pixels.shape[2] == 3, what
        assert pixels.shape[0] * pixels.shape[1] <= MAX_IMAGE_PIXELS
        outcomes["decoded"] += 1
    assert outcomes["refused"] > 150 and outcomes["decoded"] > 10, outcomes  # both ways were exercised


@pytest.mark.parametrize("kind", ["GIF", "BMP", "TIFF", "EPS"])
def test_only_png_and_jpeg_are_opened(tmp_path, decodes, kind):
    path = tmp_path / "image.png"
    if kind == "EPS":  # Pillow would hand this to Ghostscript
        path.write_bytes(b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nshowpage\n")
    else:
        Image.new("RGB", (4, 4)).save(path, kind)
    with pytest.raises(errors.TestbedError) as info:
        load_pixels(path)
    one_line(info, f"cannot read image {path}: not a PNG or JPEG image")
    assert decodes == []


def test_preprocessing_holds_at_most_the_stated_copies_of_the_input(tmp_path):
    """Measured (tracemalloc counts NumPy's buffers): the peak of preprocessing one image, beyond the
    decoded image itself, is under PREPROCESS_COPIES float32 copies of the model input; a 1 x 40,000
    image resized without a crop does not hold 300 rows of its width."""
    sizes = [((30, 20), (224, 224)), ((300, 400), (64, 300)), ((1, 40_000), (300, 300)), ((40_000, 1), (300, 300))]
    for (h, w), (height, width) in sizes:
        path = tmp_path / f"{h}x{w}.png"
        Image.new("RGB", (w, h), (1, 2, 3)).save(path)
        for dtype, scale in ((np.float32, 0.0), (np.uint8, 0.02), (np.int8, 0.02)):
            for crop in (0.875, None):
                spec = ImageInput(height, width, np.dtype(dtype), scale, 3)
                tracemalloc.start()
                try:
                    preprocess(path, spec, Normalization(quantized="quantize"), crop)
                    peak = tracemalloc.get_traced_memory()[1]
                finally:
                    tracemalloc.stop()
                decoded = 2 * h * w * 3  # Pillow's buffer and its copy as an array
                assert peak - decoded <= PREPROCESS_COPIES * height * width * 3 * 4, ((h, w), spec, crop, peak)


# -- the memory limit ------------------------------------------------------------------------------


def test_an_input_that_needs_gigabytes_is_refused_by_the_memory_limit():
    with pytest.raises(errors.ModelError) as info:
        check_preprocessing(ImageInput(100_000, 100_000, np.dtype(np.float32)), "big.tflite", limit=8 << 30)
    one_line(info, "big.tflite: preprocessing one image to its input [1, 100000, 100000, 3] needs 1117.6 GiB, "
                   "above the memory limit of 8.0 GiB")
    check_preprocessing(ImageInput(224, 224, np.dtype(np.float32)), "m", limit=8 << 30)


@pytest.mark.parametrize("limit_mb,message", [
    ("0.5", "the model needs 1.6 MiB (activations 180.2 KiB, constants 143.4 KiB, scratch 1.3 MiB), above the "
            "memory limit of 512.0 KiB"),
    ("0.1", "preprocessing one image to its input [1, 32, 32, 3] needs 120.0 KiB, above the memory limit of "
            "102.4 KiB"),
])
def test_the_command_line_refuses_by_the_memory_limit_before_decoding_an_image(tmp_path, decodes, limit_mb, message):
    """Both limits stop the run before the first image: the plan's (the Interpreter's) and preprocessing's."""
    err = fails_in_one_line(["eval", "classification", "--model_file", DIGITS / "digits_float32.tflite",
                             "--ground_truth_images_path", DIGITS / "images",
                             "--ground_truth_labels", DIGITS / "ground_truth_labels.txt",
                             "--model_output_labels", DIGITS / "labels.txt", "--memory_limit_mb", limit_mb,
                             "--output_file_path", tmp_path / "out.json"], message)
    assert "digits_float32.tflite" in err
    assert decodes == [] and not (tmp_path / "out.json").exists()


# -- normalisation and non-finite outputs ----------------------------------------------------------


@pytest.mark.parametrize("mean,std,message", [
    (float("nan"), 127.5, "--input_mean nan: not a finite number"),
    (127.5, float("inf"), "--input_std inf: not a finite number"),
    (127.5, 0.0, "--input_std 0.0: must be above 0"),
    (127.5, -1.0, "--input_std -1.0: must be above 0"),
    (1e39, 1.0, "(pixel - mean) / std is -inf .. -inf in float32, not finite"),
    (0.0, 1e-40, "(pixel - mean) / std is nan .. inf in float32, not finite"),
    (-3e38, 0.5, "not finite"),
    (True, 1.0, "--input_mean True: not a finite number"),
    ("1", 1.0, "--input_mean '1': not a finite number"),
])
def test_normalisations_that_are_not_finite_are_refused(mean, std, message):
    with pytest.raises(errors.TestbedError) as info:
        Normalization(mean, std)
    one_line(info, message)


@given(mean=st.floats(allow_nan=True, allow_infinity=True), std=st.floats(allow_nan=True, allow_infinity=True))
@settings(max_examples=300, deadline=None, database=None, derandomize=True)
def test_every_accepted_normalisation_gives_finite_inputs(mean, std):
    try:
        norm = Normalization(mean, std)
    except errors.TestbedError as exc:
        assert "\n" not in str(exc)
        return
    pixels = np.array([[[0, 128, 255]]], np.float32)
    spec = ImageInput(1, 1, np.dtype(np.float32))
    assert np.isfinite(cls.to_input(pixels, spec, norm)).all()
    for dtype in (np.uint8, np.int8):
        cls.to_input(pixels, ImageInput(1, 1, np.dtype(dtype), 0.02, 3), Normalization(mean, std, "quantize"))


def test_nan_scores_are_refused_not_ranked():
    scores = np.array([[0.1, 0.9], [np.nan, 0.2]], np.float32)
    with pytest.raises(errors.TestbedError) as info:
        check_finite([scores], ["a.png", "b.png"], "the CPU reference")
    one_line(info, "image b.png: output 0 of the CPU reference holds NaN; no result is reported")
    check_finite([np.array([[3, 4]], np.uint8)], ["a.png"], "x")  # integer scores are always finite
    boxes, classes, count = np.zeros((1, 2, 4)), np.zeros((1, 2)), np.array([1.0])
    check_detections([boxes, classes, np.array([[0.5, np.nan]]), count], "c.png", "r")  # row 2 is not counted
    with pytest.raises(errors.TestbedError) as info:
        check_detections([boxes, classes, np.array([[np.inf, 0]]), count], "c.png", "the run on GPU")
    one_line(info, "image c.png: the scores output of the run on GPU holds NaN or infinity")
    with pytest.raises(errors.TestbedError):
        check_detections([boxes, classes, np.zeros((1, 2)), np.array([np.nan])], "c.png", "r")


def _classify(tmp_path, *flags):
    return ["eval", "classification", "--model_file", DIGITS / "digits_float32.tflite",
            "--ground_truth_images_path", DIGITS / "images", "--num_images", "3",
            "--ground_truth_labels", DIGITS / "ground_truth_labels.txt",
            "--model_output_labels", DIGITS / "labels.txt", "--output_file_path", tmp_path / "out.json", *flags]


def test_scores_made_non_finite_by_the_normalisation_give_no_accuracy(tmp_path):
    # finite inputs of about 3e38 overflow inside the model (its first convolution sums to infinity): NaN scores
    err = fails_in_one_line(_classify(tmp_path, "--input_mean=-3e38", "--input_std", "1"),
                            "holds NaN; no result is reported over non-finite outputs")
    assert "Top-1" not in err and not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("flags,code,message", [
    (("--input_mean", "nan"), 2, "--input_mean"),
    (("--input_std", "1e-45"), 1, "not finite"),
    (("--input_mean", "3e38", "--input_std", "0.5"), 1, "not finite"),
])
def test_the_command_line_refuses_normalisations_in_one_line(tmp_path, flags, code, message):
    c, out, err = cli(*_classify(tmp_path, *flags))
    assert c == code and "Traceback" not in err and message in err and "Top-1" not in out, (c, err)
    assert not (tmp_path / "out.json").exists()


# -- COCO ground truth -----------------------------------------------------------------------------


def small_truth() -> dict:
    """The first 4 images of the shapes fixture with their annotations."""
    truth = json.loads((SHAPES / "ground_truth.json").read_text())
    ids = {im["id"] for im in truth["images"][:4]}
    return {"images": truth["images"][:4], "categories": truth["categories"],
            "annotations": [a for a in truth["annotations"] if a["image_id"] in ids]}


def results_for(truth: dict, rng: random.Random) -> list[dict]:
    """Detections near the ground truth boxes, with scores: what a detector would give."""
    out = []
    for a in truth["annotations"][:40]:
        box = a.get("bbox")
        if isinstance(box, list) and len(box) == 4 and all(isinstance(v, (int, float)) for v in box):
            out.append({"image_id": a["image_id"], "category_id": a["category_id"], "score": rng.random(),
                        "bbox": [float(v) + rng.uniform(-2, 2) for v in box]})
    return out


def write_json(tmp_path, doc, name="truth.json") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def nested(levels: int):
    doc: list = []
    for _ in range(levels - 1):
        doc = [doc]
    return doc


def _set(doc, key, index, field, value):
    return {**doc, key: [dict(e, **{field: value}) if i == index else e for i, e in enumerate(doc[key])]}


def _without(doc, key, index, field):
    return {**doc, key: [{k: v for k, v in e.items() if k != field} if i == index else e
                         for i, e in enumerate(doc[key])]}


T = small_truth()
_A, _C, _I = T["annotations"], T["categories"], T["images"]


@pytest.mark.parametrize("doc,message", [
    ({**T, "annotations": _A + [dict(_A[1], bbox=[1, 1, 5, 5])]}, f"annotations[{len(_A)}]: 'id' {_A[1]['id']} is "
                                                                   f"also annotations[1]'s"),
    ({**T, "categories": _C + [{"id": 99, "name": _C[0]["name"]}]}, f"categories[{len(_C)}]: 'name' "
                                                                     f"{_C[0]['name']!r} is also categories[0]'s"),
    ({**T, "images": _I + [dict(_I[0], id=999, file_name="other/" + _I[0]["file_name"])]},
     f"images[{len(_I)}]: 'file_name' 'other/{_I[0]['file_name']}' names the same image file as images[0]'s"),
    (_set(T, "annotations", 0, "image_id", float(_A[0]["image_id"])), "annotations[0]: 'image_id' "
                                                                      f"{float(_A[0]['image_id'])} is not an image id"),
    (_set(T, "annotations", 0, "category_id", True), "annotations[0]: 'category_id' True is not a category id"),
    (_set(T, "annotations", 0, "id", "7"), "annotations[0]: 'id' '7' must be an integer"),
    (_set(T, "images", 0, "id", 2**64), "images[0]: 'id' 18446744073709551616 must be an integer"),
    (_set(T, "categories", 0, "id", None), "categories[0]: 'id' None must be an integer"),
    (_set(T, "annotations", 0, "area", "12"), "annotations[0]: 'area' '12' must be a finite number, 0 or more"),
    (_set(T, "annotations", 0, "area", -1), "annotations[0]: 'area' -1 must be a finite number"),
    (_set(T, "annotations", 0, "area", 10**400), "annotations[0]: 'area' 1000"),
    (_set(T, "annotations", 0, "bbox", [0, 0, 1e200, 1e200]), "annotations[0]: 'bbox' width x height must be a "
                                                              "finite number"),
    (_set(_without(T, "annotations", 0, "area"), "annotations", 0, "bbox", [0, 0, 1e300, 1e300]),
     "annotations[0]: 'bbox' width x height must be a finite number"),
    (_set(T, "annotations", 0, "iscrowd", "0"), "annotations[0]: 'iscrowd' '0' must be 0 or 1"),
    (_set(T, "annotations", 0, "iscrowd", True), "annotations[0]: 'iscrowd' True must be 0 or 1"),
    (_set(T, "annotations", 0, "iscrowd", 2), "annotations[0]: 'iscrowd' 2 must be 0 or 1"),
    (_set(T, "annotations", 0, "segmentation", nested(MAX_JSON_DEPTH)), f"nested more than {MAX_JSON_DEPTH} levels"),
    (json.dumps(T)[:-1] + ', "info": ' + "[" * 10_000 + "]" * 10_000 + "}", f"nested more than {MAX_JSON_DEPTH} levels"),
    ("[" * 200_000 + "]" * 200_000, f"nested more than {MAX_JSON_DEPTH} levels"),
    ('{"images": [{"id": ' + "9" * 5000 + "}]}", "not JSON that can be read"),
    (json.dumps(_set(T, "annotations", 0, "area", float("nan"))), "'area' nan must be a finite number"),
])
def test_coco_ground_truth_that_would_change_the_map_is_refused(tmp_path, doc, message):
    path = write_json(tmp_path, doc)
    with pytest.raises(errors.TestbedError) as info:
        load_coco(path)
    one_line(info, f"--ground_truth_json {path}: ", message)


@pytest.mark.parametrize("what", ["fifo", "device", "directory", "binary"])
def test_ground_truth_that_is_not_a_json_file_is_refused_without_reading_it(tmp_path, what):
    path = tmp_path / "truth.json"
    if what == "fifo":
        os.mkfifo(path)  # opening it would block until a writer came
    elif what == "device":
        path = Path("/dev/zero")  # reading it would never end
    elif what == "directory":
        path.mkdir()
    else:
        path.write_bytes(b"\n\x92\x01\x08\xff\xfe binary proto")
    with pytest.raises(errors.TestbedError) as info:
        load_coco(path)
    one_line(info, f"--ground_truth_json {path}: ", "not JSON text" if what == "binary" else "not a regular file")


_ODD = [None, True, False, 0, -1, 1.0, 1.5, "1", "", "x" * 300, [], {}, [1, 2], {"a": 1}, 2**63, -(2**63) - 1,
        10**300, float("nan"), float("inf"), -0.0, 1e308, [[[[[[]]]]]]]


@st.composite
def mutated_truth(draw) -> dict:
    """The small shapes ground truth with 1 to 4 mutations: a field set to an odd value or removed,
    an entry duplicated or removed, a list or the whole document replaced."""
    doc = json.loads(json.dumps(T))
    for _ in range(draw(st.integers(1, 4))):
        key = draw(st.sampled_from(["images", "annotations", "categories"]))
        entries = doc.get(key)
        how = draw(st.sampled_from(["set", "set", "set", "remove_field", "duplicate", "drop", "replace_list"]))
        if not isinstance(entries, list) or not entries or how == "replace_list":
            doc[key] = draw(st.sampled_from(_ODD + [[{}], [{"id": 1}]]))
            continue
        i = draw(st.integers(0, len(entries) - 1))
        if not isinstance(entries[i], dict):
            continue
        fields = sorted(entries[i]) + ["id", "area", "iscrowd", "name", "width"]
        field = draw(st.sampled_from(fields))
        if how == "set":
            entries[i] = dict(entries[i], **{field: draw(st.sampled_from(_ODD + [entries[0].get(field)]))})
        elif how == "remove_field":
            entries[i] = {k: v for k, v in entries[i].items() if k != field}
        elif how == "duplicate":
            entries.append(dict(entries[i]))
        else:
            entries.pop(i)
    return doc


@settings(max_examples=200, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(doc=mutated_truth(), seed=st.integers(0, 2**16))
def test_mutated_coco_ground_truth_is_refused_in_one_line_or_scored(tmp_path, doc, seed):
    """Whatever load_coco accepts, pycocotools scores without an error and every AP is a number."""
    path = write_json(tmp_path, json.dumps(doc))
    try:
        truth = load_coco(path)
    except errors.TestbedError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(f"--ground_truth_json {path}: "), str(exc)
        return
    ids = [im["id"] for im in truth.dataset["images"]]
    result = coco_map(truth, results_for(truth.dataset, random.Random(seed)), ids)
    for value in (*result.per_iou, result.map, result.map50, result.map75):
        assert math.isfinite(value) and (value == -1 or 0 <= value <= 1), result


def test_detection_refuses_duplicate_category_names_on_the_command_line(tmp_path):
    doc = json.loads((SHAPES / "ground_truth.json").read_text())
    doc["categories"].append({"id": 999, "name": doc["categories"][0]["name"]})
    path = write_json(tmp_path, doc)
    fails_in_one_line(["eval", "detection", "--model_file", SHAPES / "shapes_float32.tflite",
                       "--ground_truth_images_path", SHAPES / "images", "--ground_truth_json", path,
                       "--classes_file", SHAPES / "classes.txt", "--output_file_path", tmp_path / "o.json"],
                      f"dtb eval detection: error: --ground_truth_json {path}: categories[", "is also categories[0]'s")
    assert not (tmp_path / "o.json").exists()


def test_a_bomb_among_the_images_stops_the_command_in_one_line(tmp_path):
    """In a real process (a hang guard of 300 s, not a speed criterion): exit 1, one line, no file."""
    images = tmp_path / "images"
    images.mkdir()
    for i, p in enumerate(sorted((DIGITS / "images").iterdir())[:2]):
        (images / f"a{i}.png").write_bytes(p.read_bytes())
    (images / "b_bomb.png").write_bytes(png_claiming(100_000, 100_000))
    (tmp_path / "truth.txt").write_text("0\n0\n0\n")
    argv = [sys.executable, "-m", "runtime.cli.main", *map(str, _classify(tmp_path))]
    argv[argv.index("--ground_truth_images_path") + 1] = str(images)
    argv[argv.index("--ground_truth_labels") + 1] = str(tmp_path / "truth.txt")
    argv[argv.index("--num_images") + 1] = "0"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert (f"cannot read image {images}/b_bomb.png: its header says 10,000,000,000 pixels, above the limit of "
            "50,000,000 pixels (refused before decoding)") in done.stderr
    assert not (tmp_path / "out.json").exists()
