"""TFLite_Detection_PostProcess, the custom op ending SSD detectors: box decoding and non-max suppression.

Follows TFLite's kernel (tflite/kernels/detection_postprocess.cc): boxes are decoded from
center-size encodings against the anchors in double precision and stored as float32 corners;
scores at or above the threshold are sorted (stably) by score and greedily kept unless they
overlap a kept box by more than the IoU threshold. "Fast" NMS runs once over each anchor's best
class score; "regular" NMS runs per class and merges the classes' picks by score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from runtime.ops.base import Node
from runtime.ops.custom_spec import CustomOp, flex_options

NAME = "TFLite_Detection_PostProcess"
# TFLite's default when a model's options leave detections_per_class out.
DETECTIONS_PER_CLASS = 100
# Output rows (max_detections x max_classes_per_detection) a model may ask for: real detectors
# ask for 10-100; far larger is damage that would allocate without bound.
MAX_OUTPUT_ROWS = 1 << 20


@dataclass(frozen=True)
class DetectionParams:
    max_detections: int
    max_classes_per_detection: int
    detections_per_class: int
    use_regular_nms: bool
    score_threshold: float
    iou_threshold: float
    num_classes: int
    scale: tuple[float, float, float, float]     # y, x, h, w

    @property
    def rows(self) -> int:
        return self.max_detections * self.max_classes_per_detection


def _int(m: dict, key: str, default: int = 0) -> int:
    v = m.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{key} is {v!r}, a number expected")
    return int(v)


def _float(m: dict, key: str) -> float:
    v = m.get(key, 0.0)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"{key} is {v!r}, a number expected")
    return float(np.float32(v))   # the kernel keeps its parameters as float


def parse(blob: bytes) -> DetectionParams:
    """The op's FlexBuffer map; absent keys read as 0, as flexbuffers' null does in TFLite."""
    m = flex_options(blob)
    return DetectionParams(
        max_detections=_int(m, "max_detections"),
        max_classes_per_detection=_int(m, "max_classes_per_detection"),
        detections_per_class=_int(m, "detections_per_class", DETECTIONS_PER_CLASS),
        use_regular_nms=bool(m.get("use_regular_nms", False)),
        score_threshold=_float(m, "nms_score_threshold"),
        iou_threshold=_float(m, "nms_iou_threshold"),
        num_classes=_int(m, "num_classes"),
        scale=tuple(_float(m, k) for k in ("y_scale", "x_scale", "h_scale", "w_scale")))


def shapes(ins: Sequence[tuple[int, ...]], p: DetectionParams) -> list[tuple[int, ...]]:
    """TFLite's Prepare: three inputs of ranks 3, 3 and 2 sharing the box count; four outputs."""
    if len(ins) != 3:
        raise ValueError(f"has {len(ins)} inputs, 3 expected (box encodings, class predictions, anchors)")
    boxes, scores, anchors = ins
    if len(boxes) != 3 or len(scores) != 3 or len(anchors) != 2:
        raise ValueError(f"input shapes {list(boxes)}, {list(scores)}, {list(anchors)}; ranks 3, 3 and 2 expected")
    if boxes[0] != 1 or scores[0] != 1:
        raise ValueError("batch size must be 1")
    if boxes[2] < 4 or anchors[1] != 4:
        raise ValueError(f"box encodings need at least 4 values per box and anchors exactly 4 "
                         f"(got {boxes[2]} and {anchors[1]})")
    if scores[1] != boxes[1] or anchors[0] != boxes[1]:
        raise ValueError(f"box counts differ: {boxes[1]} encodings, {scores[1]} score rows, {anchors[0]} anchors")
    _check_params(p, scores[2])
    n = p.rows
    return [(1, n, 4), (1, n), (1, n), (1,)]


def _check_params(p: DetectionParams, with_background: int) -> None:
    if p.num_classes <= 0 or not 0 <= with_background - p.num_classes <= 1:
        raise ValueError(f"num_classes {p.num_classes} does not fit {with_background} class scores per box "
                         f"(the same, or one more for the background)")
    if p.max_detections < 0 or p.max_classes_per_detection <= 0 or p.detections_per_class < 0:
        raise ValueError("max_detections, max_classes_per_detection and detections_per_class must be "
                         "non-negative (max_classes_per_detection positive)")
    if p.rows > MAX_OUTPUT_ROWS:
        raise ValueError(f"max_detections x max_classes_per_detection is {p.rows}, above {MAX_OUTPUT_ROWS}")
    if p.use_regular_nms and min(p.detections_per_class, p.max_detections) <= 0:
        raise ValueError("regular NMS needs detections_per_class and max_detections above 0")
    if not 0.0 < p.iou_threshold <= 1.0:
        raise ValueError(f"nms_iou_threshold {p.iou_threshold} must be in (0, 1]")
    if not all(math.isfinite(s) and s != 0.0 for s in p.scale):
        raise ValueError(f"box scales {list(p.scale)} must be finite and non-zero")


def _dequantized(node: Node, k: int, x: np.ndarray) -> np.ndarray:
    """8-bit inputs as TFLite reads them: (value - zero point) x scale in float32."""
    if x.dtype == np.float32:
        return x
    q = node.input(k).quant
    zp, scale = np.float32(q.zero_point[0]), np.float32(q.scale[0])
    return (x.astype(np.float32) - zp) * scale


def decode(enc: np.ndarray, anchors: np.ndarray, scale: tuple[float, ...]) -> np.ndarray:
    """Corner boxes (ymin, xmin, ymax, xmax) from center-size encodings, in double then float32."""
    e, a = enc[:, :4].astype(np.float64), anchors.astype(np.float64)
    sy, sx, sh, sw = (float(s) for s in scale)
    yc = (e[:, 0] / sy * a[:, 2] + a[:, 0]).astype(np.float32)
    xc = (e[:, 1] / sx * a[:, 3] + a[:, 1]).astype(np.float32)
    with np.errstate(over="ignore"):
        hh = (0.5 * np.exp(e[:, 2] / sh) * a[:, 2]).astype(np.float32)
        hw = (0.5 * np.exp(e[:, 3] / sw) * a[:, 3]).astype(np.float32)
    return np.stack([yc - hh, xc - hw, yc + hh, xc + hw], axis=1)


def _iou(boxes: np.ndarray, i: int, others: np.ndarray) -> np.ndarray:
    """Intersection over union of box i with each of `others`, in float32 as the kernel computes it."""
    b, o = boxes[i], boxes[others]
    area_i = (b[2] - b[0]) * (b[3] - b[1])
    area_o = (o[:, 2] - o[:, 0]) * (o[:, 3] - o[:, 1])
    inter = (np.maximum(np.minimum(b[2], o[:, 2]) - np.maximum(b[0], o[:, 0]), np.float32(0))
             * np.maximum(np.minimum(b[3], o[:, 3]) - np.maximum(b[1], o[:, 1]), np.float32(0)))
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / (area_i + area_o - inter)
    return np.where((area_i <= 0) | (area_o <= 0), np.float32(0), iou)


def nms(boxes: np.ndarray, scores: np.ndarray, limit: int, p: DetectionParams) -> list[int]:
    """Greedy single-class NMS over the boxes scoring at least the threshold, best first."""
    keep = np.flatnonzero(scores >= np.float32(p.score_threshold))
    order = keep[np.argsort(-scores[keep], kind="stable")]
    active = np.ones(order.size, bool)
    selected: list[int] = []
    for i in range(order.size):
        if len(selected) >= min(order.size, limit) or not active.any():
            break
        if not active[i]:
            continue
        selected.append(int(order[i]))
        active[i] = False
        rest = np.flatnonzero(active[i + 1:]) + i + 1
        if rest.size:
            active[rest[_iou(boxes, order[i], order[rest]) > np.float32(p.iou_threshold)]] = False
    return selected


def _fast(boxes, scores, p: DetectionParams, out):
    """One NMS over each anchor's best class; every kept anchor reports its top classes."""
    per_anchor = min(p.max_classes_per_detection, p.num_classes)
    if per_anchor == 1:
        top = np.argmax(scores, axis=1)[:, None]
    else:
        top = np.argsort(-scores, axis=1, kind="stable")[:, :per_anchor]
    best = scores[np.arange(scores.shape[0]), top[:, 0]]
    selected = nms(boxes, best, p.max_detections, p)
    det_boxes, det_classes, det_scores = out
    for row, anchor in enumerate(selected):
        slots = p.max_classes_per_detection * row + np.arange(per_anchor)
        det_boxes[slots] = boxes[anchor]
        det_classes[slots] = top[anchor]
        det_scores[slots] = scores[anchor, top[anchor]]
    return len(selected)


def _regular(boxes, scores, p: DetectionParams, out):
    """NMS per class; the classes' picks merged by score (earlier classes first on ties), capped."""
    per_class = min(p.detections_per_class, p.max_detections)
    picked: list[tuple[float, int, int]] = []         # (score, anchor, class)
    for cls in range(p.num_classes):
        column = scores[:, cls]
        new = [(float(column[a]), a, cls) for a in nms(boxes, column, per_class, p)]
        merged = sorted(picked + new, key=lambda t: -t[0])   # stable: the earlier list wins ties
        picked = merged[:p.max_detections]
    det_boxes, det_classes, det_scores = out
    for row, (score, anchor, cls) in enumerate(picked):
        det_boxes[row], det_classes[row], det_scores[row] = boxes[anchor], cls, score
    return len(picked)


def detection_postprocess(node: Node, enc: np.ndarray, cls: np.ndarray, anchors: np.ndarray):
    p: DetectionParams = node.params
    _check_params(p, cls.shape[2])
    boxes = decode(_dequantized(node, 0, enc)[0], _dequantized(node, 2, anchors), p.scale)
    if np.any((boxes[:, 0] > boxes[:, 2]) | (boxes[:, 1] > boxes[:, 3])):
        raise node.fail("a decoded box has its minimum above its maximum (negative anchor size?)")
    scores = _dequantized(node, 1, cls)[0][:, cls.shape[2] - p.num_classes:]
    n = p.rows
    out = (np.zeros((n, 4), np.float32), np.zeros(n, np.float32), np.zeros(n, np.float32))
    count = (_regular if p.use_regular_nms else _fast)(boxes, scores, p, out)
    return (out[0][None], out[1][None], out[2][None], np.array([count], np.float32))


_DATA = frozenset({"float32", "uint8"})
SPECS = (CustomOp(NAME, detection_postprocess, parse, shapes, input_types=(_DATA,) * 3,
                  output_types=("float32",) * 4),)
