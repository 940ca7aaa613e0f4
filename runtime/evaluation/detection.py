"""Object-detection evaluation: COCO JSON ground truth, detector outputs as COCO results, mAP by pycocotools."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from runtime.evaluation.classification import read_bytes
from runtime.ir.errors import ModelError, TestbedError

__all__ = ["IOU_THRESHOLDS", "MAX_JSON_BYTES", "MAX_JSON_DEPTH", "CocoTruth", "Detector", "MapResult",
           "category_ids", "check_detections", "coco_map", "detector_outputs", "load_coco", "to_coco_results"]

# COCOeval's IoU thresholds, 0.50:0.05:0.95 (TFLite's AP stage uses the same ten).
IOU_THRESHOLDS = tuple(round(0.5 + 0.05 * i, 2) for i in range(10))
_FLAG = "--ground_truth_json"
# A COCO instances file nests 5 levels (the file, annotations, an annotation, segmentation, a
# polygon); deeper is not COCO, and pycocotools' deep copy would recurse through it.
MAX_JSON_DEPTH = 16
# COCO 2017's validation instances file is 25 MB, its training one 448 MB.
MAX_JSON_BYTES = 1 << 30
_ID_RANGE = (-(1 << 63), (1 << 63) - 1)  # pycocotools keeps ids in NumPy int64 arrays


# -- ground truth --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CocoTruth:
    """A checked COCO instances file: the dataset as pycocotools takes it, and its images by file name."""

    path: str
    dataset: dict
    by_name: Mapping[str, dict]


def _fail(path, where: str, what: str) -> TestbedError:
    return TestbedError(f"{_FLAG} {path}: {where}{': ' if where else ''}{what}")


def _number(v) -> bool:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an integer beyond float's range
        return False


def _integer(v) -> bool:
    """A JSON integer (not true / false, not 1.0) that fits pycocotools' int64 arrays."""
    return isinstance(v, int) and not isinstance(v, bool) and _ID_RANGE[0] <= v <= _ID_RANGE[1]


def _too_deep(data) -> bool:
    """Whether the document nests more than MAX_JSON_DEPTH levels (walked without recursion)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                return True
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    return False


def _entries(data: dict, key: str, path) -> list[dict]:
    entries = data.get(key)
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise _fail(path, "", f"'{key}' must be a list of objects (a COCO instances file)")
    return entries


def _unique(entries: list[dict], key: str, field: str, path, valid, what: str, required: bool = True) -> dict:
    """{value: index} of each entry's `field`, which must be valid and unique: a repeated id or
    name would silently merge or drop entries and change the mAP."""
    seen: dict = {}
    for i, e in enumerate(entries):
        if field not in e and not required:
            continue
        v = e.get(field)
        if not valid(v):
            raise _fail(path, f"{key}[{i}]", f"'{field}' {_shown(v)} must be {what}")
        if v in seen:
            raise _fail(path, f"{key}[{i}]", f"'{field}' {_shown(v)} is also {key}[{seen[v]}]'s")
        seen[v] = i
    return seen


def _shown(v) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_images(images: list[dict], path) -> dict[str, dict]:
    _unique(images, "images", "file_name", path, lambda v: isinstance(v, str) and v != "" and "\0" not in v,
            "a file name")
    by_name: dict[str, dict] = {}
    index: dict[str, int] = {}
    for i, im in enumerate(images):
        for key in ("width", "height"):
            if key in im and not (_number(im[key]) and im[key] > 0):
                raise _fail(path, f"images[{i}]", f"'{key}' must be a positive number")
        base = Path(im["file_name"]).name  # TFLite matches ground truth to images by file name
        if base in by_name:
            raise _fail(path, f"images[{i}]", f"'file_name' {_shown(im['file_name'])} names the same image file "
                                              f"as images[{index[base]}]'s")
        by_name[base], index[base] = im, i
    return by_name


def _check_annotation(i: int, a: dict, image_ids: dict, category_ids: dict, path, next_id: int) -> dict:
    where = f"annotations[{i}]"
    for key, ids, what in (("image_id", image_ids, "an image"), ("category_id", category_ids, "a category")):
        if not _integer(a.get(key)) or a[key] not in ids:
            raise _fail(path, where, f"'{key}' {_shown(a.get(key))} is not {what} id of the file")
    box = a.get("bbox")
    if not (isinstance(box, list) and len(box) == 4 and all(_number(v) for v in box) and box[2] >= 0 and box[3] >= 0):
        raise _fail(path, where, "'bbox' must be 4 numbers [x, y, width, height] in pixels")
    if not math.isfinite(float(box[2]) * float(box[3])):  # IoUs over it would be NaN
        raise _fail(path, where, "'bbox' width x height must be a finite number")
    area = a.get("area", float(box[2]) * float(box[3]))  # COCOeval's area ranges read it
    if not (_number(area) and area >= 0):
        raise _fail(path, where, f"'area' {_shown(area)} must be a finite number, 0 or more")
    if a.get("iscrowd", 0) not in (0, 1) or isinstance(a.get("iscrowd"), (bool, float)):
        raise _fail(path, where, f"'iscrowd' {_shown(a.get('iscrowd'))} must be 0 or 1")  # COCOeval tests it as a flag
    return {**a, "area": area, "iscrowd": a.get("iscrowd", 0), "id": a.get("id", next_id)}


def _parse(path) -> object:
    try:
        return json.loads(read_bytes(path, _FLAG, MAX_JSON_BYTES).decode("utf-8"))
    except UnicodeDecodeError:
        raise _fail(path, "", "not JSON text (TFLite's binary ground-truth proto is not read here: give the COCO "
                              "instances file it is made from)") from None
    except json.JSONDecodeError as exc:
        raise _fail(path, "", f"not JSON ({exc.msg}, line {exc.lineno}): a COCO instances file is") from None
    except RecursionError:
        raise _fail(path, "", f"nested more than {MAX_JSON_DEPTH} levels deep: not a COCO instances file") from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise _fail(path, "", f"not JSON that can be read: {' '.join(str(exc).split())[:120]}") from None


def load_coco(path: str | os.PathLike) -> CocoTruth:
    """A COCO instances JSON file (images, annotations, categories), checked so that pycocotools
    cannot fail on it later: each mistake is one line naming the file and the entry."""
    data = _parse(path)
    if not isinstance(data, dict):
        raise _fail(path, "", "not a COCO instances file (an object with images, annotations, categories)")
    if _too_deep(data):
        raise _fail(path, "", f"nested more than {MAX_JSON_DEPTH} levels deep: not a COCO instances file")
    images, annotations, categories = (_entries(data, k, path) for k in ("images", "annotations", "categories"))
    image_ids = _unique(images, "images", "id", path, _integer, "an integer")
    category_ids = _unique(categories, "categories", "id", path, _integer, "an integer")
    _unique(categories, "categories", "name", path, lambda v: isinstance(v, str) and v != "", "a name")
    by_name = _check_images(images, path)
    _unique(annotations, "annotations", "id", path, _integer, "an integer", required=False)
    free = max((a["id"] for a in annotations if "id" in a), default=0) + 1  # ids for annotations without one
    if free + len(annotations) > _ID_RANGE[1]:
        raise _fail(path, "annotations", f"no room to number the annotations without an 'id' after id {free - 1}")
    checked = [_check_annotation(i, a, image_ids, category_ids, path, free + i) for i, a in enumerate(annotations)]
    dataset = {"images": images, "annotations": checked, "categories": categories}
    return CocoTruth(str(path), dataset, by_name)


def category_ids(classes: Sequence[str], num_classes: int | None, truth: CocoTruth, classes_path,
                 flag: str = "--classes_file") -> dict[int, int]:
    """Model class index -> COCO category id, by name. A file of num_classes + 1 names starts with
    the background (as TFLite's label maps do): model class k is then line k + 1. Classes named by
    no category (background, "???") are left out: their detections are not scored."""
    offset = 0
    if num_classes is not None:
        if len(classes) not in (num_classes, num_classes + 1):
            raise TestbedError(f"{flag} {classes_path} has {len(classes)} class names; the model's "
                               f"TFLite_Detection_PostProcess has {num_classes} classes (give {num_classes} names, "
                               f"or {num_classes + 1} starting with the background)")
        offset = len(classes) - num_classes
    by_name = {c["name"]: c["id"] for c in truth.dataset["categories"]}
    mapping = {k - offset: by_name[name] for k, name in enumerate(classes) if k >= offset and name in by_name}
    if not mapping:
        raise TestbedError(f"{flag} {classes_path}: no class name is a category name of {_FLAG} {truth.path}")
    return mapping


# -- the model -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Detector:
    """A detector's outputs as TFLite's ObjectDetectionStage reads them, and its class count."""

    detections: int             # N, rows of boxes / classes / scores
    num_classes: int | None     # from TFLite_Detection_PostProcess's options, when the model ends in one


_SHAPES = (("boxes", "[1, N, 4]"), ("classes", "[1, N]"), ("scores", "[1, N]"), ("num_detections", "[1]"))


def _expected(k: int, n: int) -> tuple[int, ...]:
    return ((1, n, 4), (1, n), (1, n), (1,))[k]


def detector_outputs(graph, model: str) -> Detector:
    """The four outputs of TFLite_Detection_PostProcess, in its order: boxes [1, N, 4] (ymin, xmin,
    ymax, xmax, normalised), classes [1, N], scores [1, N], num_detections [1], all float32."""
    outs = [graph.tensors[t] for t in graph.outputs]
    if len(outs) != 4:
        raise ModelError(f"{model}: a detector has 4 outputs (boxes, classes, scores, num_detections, as "
                         f"TFLite_Detection_PostProcess writes them); this model has {len(outs)}")
    n = outs[0].shape[1] if len(outs[0].shape) == 3 else -1
    for k, (t, (what, shape)) in enumerate(zip(outs, _SHAPES)):
        if tuple(t.shape) != _expected(k, n) or t.dtype.name != "FLOAT32":
            raise ModelError(f"{model}: output {k} '{t.name}' is {t.dtype.name} {list(t.shape)}, not the "
                             f"detection {what} (FLOAT32 {shape})")
    return Detector(n, _num_classes(graph))


def _num_classes(graph) -> int | None:
    from runtime.ops.detection import NAME, parse

    for op in graph.ops:
        if op.custom_code == NAME and op.custom_options is not None:
            try:
                return parse(op.custom_options).num_classes
            except ValueError:
                return None
    return None


def to_coco_results(outputs: Sequence[np.ndarray], image_id: int, width: float, height: float,
                    categories: Mapping[int, int]) -> list[dict]:
    """One image's detector outputs as COCO results: normalised (ymin, xmin, ymax, xmax) become
    pixel [x, y, width, height]; the first num_detections rows count, as in ObjectDetectionStage."""
    boxes, classes, scores, count = (np.asarray(o, np.float64).reshape(-1) for o in outputs)
    boxes = boxes.reshape(-1, 4)
    n = max(0, min(int(count[0]) if np.isfinite(count[0]) else 0, len(boxes)))
    results = []
    for i in range(n):
        category = categories.get(int(classes[i])) if np.isfinite(classes[i]) else None
        if category is None or not np.isfinite(boxes[i]).all() or not np.isfinite(scores[i]):
            continue
        ymin, xmin, ymax, xmax = boxes[i]
        results.append({"image_id": image_id, "category_id": category, "score": float(scores[i]),
                        "bbox": [xmin * width, ymin * height, (xmax - xmin) * width, (ymax - ymin) * height]})
    return results


def check_detections(outputs: Sequence[np.ndarray], image: str, run: str) -> None:
    """Refuse a detector's outputs for one image whose counted rows (the first num_detections) or
    count hold NaN or infinity: no mAP is reported over them."""
    boxes, classes, scores, count = (np.asarray(o, np.float64).reshape(-1) for o in outputs)
    bad = None
    if not np.isfinite(count[0]):
        bad = "num_detections"
    else:
        n = max(0, min(int(count[0]), len(scores)))
        for name, rows in (("boxes", boxes.reshape(-1, 4)[:n]), ("classes", classes[:n]), ("scores", scores[:n])):
            if not np.isfinite(rows).all():
                bad = name
                break
    if bad:
        raise TestbedError(f"image {image}: the {bad} output of {run} holds NaN or infinity; no result is reported "
                           f"over non-finite outputs (do --input_mean / --input_std suit this model?)")


# -- mAP -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MapResult:
    """COCO average precision (area all, 100 detections): per IoU threshold, and COCO's summary."""

    per_iou: tuple[float, ...]      # at IOU_THRESHOLDS
    map: float                      # AP@[.50:.95], COCO's first summary number (TFLite's "Overall mAP")
    map50: float
    map75: float


def _mean_valid(p: np.ndarray) -> float:
    valid = p[p > -1]
    return float(valid.mean()) if valid.size else -1.0


def coco_map(truth: CocoTruth, results: list[dict], image_ids: Sequence[int]) -> MapResult:
    """pycocotools' bbox evaluation of `results` on the images `image_ids` (-1: no ground truth to score)."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools reports progress on stdout
        gt = COCO()
        gt.dataset = copy.deepcopy(truth.dataset)  # COCOeval marks the ground truth's boxes in place
        gt.createIndex()
        dt = gt.loadRes([dict(r) for r in results]) if results else _empty(truth)
        ev = COCOeval(gt, dt, "bbox")
        ev.params.imgIds = sorted(set(image_ids))
        ev.evaluate()
        ev.accumulate()
    precision = ev.eval["precision"][:, :, :, 0, -1]  # [iou, recall, class] for area "all", maxDets 100
    per_iou = tuple(_mean_valid(precision[t]) for t in range(len(IOU_THRESHOLDS)))
    return MapResult(per_iou, _mean_valid(precision), per_iou[0], per_iou[IOU_THRESHOLDS.index(0.75)])


def _empty(truth: CocoTruth):
    """A result set with no detection (COCO.loadRes refuses an empty list)."""
    from pycocotools.coco import COCO

    dt = COCO()
    dt.dataset = {"images": truth.dataset["images"], "categories": truth.dataset["categories"], "annotations": []}
    dt.createIndex()
    return dt
