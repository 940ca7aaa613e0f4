"""NON_MAX_SUPPRESSION_V4 / V5: greedy box selection by score, with V5's Gaussian soft-NMS."""

from __future__ import annotations

import numpy as np

from runtime.ops.base import Node


class _Queue:
    """std::priority_queue ordered by score alone, with libstdc++'s push_heap / pop_heap (the
    library LiteRT is built against): among equal scores the order a candidate comes out in is the
    heap's, not its index's, and a re-pushed soft-NMS candidate takes its place the same way.
    Items are [score, index, suppress_begin]."""

    def __init__(self) -> None:
        self.heap: list[list] = []

    def __len__(self) -> int:
        return len(self.heap)

    def push(self, item: list) -> None:
        self.heap.append(item)
        self._sift_up(len(self.heap) - 1, 0, item)

    def pop(self) -> list:
        h = self.heap
        top = h[0]
        if len(h) > 1:
            last = h[-1]
            h[-1] = top
            self._adjust(0, len(h) - 1, last)
        h.pop()
        return top

    def _sift_up(self, hole: int, top: int, item: list) -> None:
        h = self.heap
        parent = (hole - 1) // 2
        while hole > top and h[parent][0] < item[0]:
            h[hole] = h[parent]
            hole = parent
            parent = (hole - 1) // 2
        h[hole] = item

    def _adjust(self, hole: int, length: int, item: list) -> None:
        h, top, child = self.heap, hole, hole
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if h[child][0] < h[child - 1][0]:
                child -= 1
            h[hole] = h[child]
            hole = child
        if length % 2 == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            h[hole] = h[child - 1]
            hole = child - 1
        self._sift_up(hole, top, item)


def _ious(boxes: np.ndarray, i: int, others: np.ndarray) -> np.ndarray:
    """IoU of box i with each of `others` in float32, as the reference computes it: corners in
    either order, and 0 when either box has no area or the union is empty."""
    a, b = boxes[i], boxes[others]
    ay0, ay1 = min(a[0], a[2]), max(a[0], a[2])
    ax0, ax1 = min(a[1], a[3]), max(a[1], a[3])
    by0, by1 = np.minimum(b[:, 0], b[:, 2]), np.maximum(b[:, 0], b[:, 2])
    bx0, bx1 = np.minimum(b[:, 1], b[:, 3]), np.maximum(b[:, 1], b[:, 3])
    area_a = (ay1 - ay0) * (ax1 - ax0)
    area_b = (by1 - by0) * (bx1 - bx0)
    zero = np.float32(0)
    inter = np.maximum(np.minimum(ay1, by1) - np.maximum(ay0, by0), zero) * \
        np.maximum(np.minimum(ax1, bx1) - np.maximum(ax0, bx0), zero)
    union = area_a + area_b - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = np.where(union == 0, zero, inter / np.where(union == 0, np.float32(1), union))
    return np.where((area_a <= 0) | (area_b <= 0), zero, iou).astype(np.float32)


def suppress(boxes: np.ndarray, scores: np.ndarray, max_out: int, iou_threshold: np.float32,
             score_threshold: np.float32, sigma: np.float32) -> tuple[list[int], list[np.float32]]:
    """The selected indices and their (soft-suppressed) scores, following
    tflite/kernels/internal/reference/non_max_suppression.h step for step: candidates above the
    score threshold in a priority queue; each popped one is compared with the boxes selected since
    its last visit, newest first; IoU >= the threshold drops it, else (sigma > 0) its score decays by
    exp(-0.5 / sigma * iou^2); it is selected only when its score did not change, and goes back in
    the queue while its score is above the threshold."""
    queue = _Queue()
    for i in np.flatnonzero(scores > score_threshold):
        queue.push([scores[i], int(i), 0])
    wanted = min(len(queue), max_out)
    scale = np.float32(-0.5) / sigma if sigma > 0 else np.float32(0)
    picked: list[int] = []
    kept: list[np.float32] = []
    while len(picked) < wanted and len(queue):
        score, index, begin = queue.pop()
        original = score
        hard = False
        if len(picked) > begin:
            # Each step j (newest selection first): a hard check on iou[j], then the decay, then
            # a stop once the score is no longer above the threshold.
            iou = _ious(boxes, index, np.asarray(picked[begin:][::-1]))
            over = np.flatnonzero(iou >= iou_threshold)
            hard_at = int(over[0]) if over.size else len(iou)
            low_at, steps = len(iou), None
            if sigma > 0:  # expf rounded to float32, one float32 multiply per step, in order
                decay = np.exp((scale * iou * iou).astype(np.float64)).astype(np.float32)
                steps = np.multiply.accumulate(np.concatenate([[score], decay]).astype(np.float32))[1:]
                low = np.flatnonzero(steps <= score_threshold)
                low_at = int(low[0]) if low.size else len(iou)
            if hard_at < len(iou) and hard_at <= low_at:
                hard = True
            elif steps is not None:
                score = steps[min(low_at, len(iou) - 1)]
        begin = len(picked)
        if not hard:
            if score == original:
                picked.append(index)
                kept.append(score)
            if score > score_threshold:
                queue.push([score, index, begin])
    return picked, kept


def _args(node: Node, boxes, scores, max_out, iou, score_threshold):
    n = int(np.asarray(max_out).reshape(-1)[0])
    if n < 0:
        raise node.fail(f"max_output_size is {n}; it must be >= 0")
    return (np.asarray(boxes, np.float32).reshape(-1, 4), np.asarray(scores, np.float32).reshape(-1), n,
            np.float32(np.asarray(iou).reshape(-1)[0]), np.float32(np.asarray(score_threshold).reshape(-1)[0]))


def _sized(node: Node, values: list, n: int, dtype) -> np.ndarray:
    """The selections padded with zeros to max_output_size when that is a constant (the output's
    size is fixed in Prepare); exactly as many as were selected when it is computed at run time."""
    out = np.asarray(values, dtype)
    if node.input(2).is_constant:
        out = np.concatenate([out, np.zeros(n - out.size, dtype)])
    return out


def non_max_suppression_v4(node: Node, boxes, scores, max_out, iou, score_threshold):
    boxes, scores, n, iou, threshold = _args(node, boxes, scores, max_out, iou, score_threshold)
    picked, _ = suppress(boxes, scores, n, iou, threshold, np.float32(0))
    return _sized(node, picked, n, np.int32), np.array(len(picked), np.int32)


def non_max_suppression_v5(node: Node, boxes, scores, max_out, iou, score_threshold, sigma):
    boxes, scores, n, iou, threshold = _args(node, boxes, scores, max_out, iou, score_threshold)
    sigma = np.float32(np.asarray(sigma).reshape(-1)[0])
    if sigma < 0:
        raise node.fail(f"soft_nms_sigma is {sigma}; it must be >= 0")
    picked, kept = suppress(boxes, scores, n, iou, threshold, sigma)
    return (_sized(node, picked, n, np.int32), _sized(node, kept, n, np.float32),
            np.array(len(picked), np.int32))
