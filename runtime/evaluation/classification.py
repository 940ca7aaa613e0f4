"""Image-task evaluation as TFLite's evaluation tools do it: images, preprocessing, label files, top-K, batched runs."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from runtime.ir.errors import ModelError, TestbedError

__all__ = ["CROP_FRACTION", "IMAGE_EXTENSIONS", "ImageInput", "Normalization", "Runner", "Tally", "Timing",
           "central_crop", "dequantized", "input_spec", "list_images", "load_image", "preprocess", "read_denylist",
           "read_lines", "resize_bilinear", "select_images", "time_one_image", "to_input", "top_k",
           "topk_accuracies", "topk_counts"]

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg")
# ImageClassificationStage's kCroppingFraction: a square central crop of 87.5% of the shorter side.
CROP_FRACTION = 0.875


# -- files ---------------------------------------------------------------------------------------


def list_images(folder: str | os.PathLike, flag: str = "--ground_truth_images_path") -> list[Path]:
    """The folder's PNG and JPEG files in file-name order (TFLite's GetSortedFileNames); other files
    are not images and are left out, so a README beside the images does not shift the labels."""
    root = Path(folder)
    if not root.is_dir():
        raise TestbedError(f"{flag} {folder}: no such directory")
    try:
        names = sorted(e.name for e in os.scandir(root) if e.is_file() and e.name.lower().endswith(IMAGE_EXTENSIONS))
    except OSError as exc:
        raise TestbedError(f"{flag} {folder}: cannot list it: {exc.strerror}") from None
    if not names:
        raise TestbedError(f"{flag} {folder}: no PNG or JPEG image in it")
    return [root / n for n in names]


def read_lines(path: str | os.PathLike, flag: str) -> list[str]:
    """A label file's lines, stripped (a CRLF file reads as a LF one); blank lines at the end do not count."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TestbedError(f"{flag} {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TestbedError(f"{flag} {path}: cannot read it: {getattr(exc, 'strerror', None) or exc}") from None
    lines = [line.strip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def read_denylist(path: str | os.PathLike, count: int, flag: str = "--denylist_file_path") -> set[int]:
    """The ILSVRC denylist: 1-based image indices, one a line; returned 0-based."""
    deny = set()
    for n, line in enumerate(read_lines(path, flag), 1):
        if not line:
            continue
        try:
            index = int(line)
        except ValueError:
            raise TestbedError(f"{flag} {path} line {n}: {line!r} is not an image index") from None
        if not 1 <= index <= count:
            raise TestbedError(f"{flag} {path} line {n}: image {index} is out of range (there are {count} "
                               f"images, numbered from 1)")
        deny.add(index - 1)
    return deny


def select_images(count: int, deny: set[int] = frozenset(), num_images: int = 0) -> list[int]:
    """Indices left after the denylist, then the first `num_images` of them (0: all), as TFLite filters."""
    kept = [i for i in range(count) if i not in deny]
    return kept[:num_images] if num_images > 0 else kept


# -- preprocessing -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Normalization:
    """Float inputs get (x - mean) / std. Quantized inputs get, by `quantized`:
    "raw": TFLite's tool's bytes whatever the input's quantization (uint8: the pixel; int8: the pixel
    - 128; truncated toward zero as its static_cast does); "quantize": (x - mean) / std quantized
    with the input's scale and zero point; "auto": raw when the input's quantization reads those
    bytes as (x - mean) / std to within one step (a model quantized for TFLite's tool), else quantize."""

    mean: float = 127.5
    std: float = 127.5
    quantized: str = "auto"


@dataclass(frozen=True)
class ImageInput:
    """What an image becomes: the model input's height, width, type and quantization."""

    height: int
    width: int
    dtype: np.dtype
    scale: float = 0.0
    zero_point: int = 0


def input_spec(graph, model: str) -> ImageInput:
    """The one input of an image model, [1, height, width, 3] of float32, uint8 or int8."""
    if len(graph.inputs) != 1:
        raise ModelError(f"{model}: an image model has one input, this one has {len(graph.inputs)}")
    t = graph.tensors[graph.inputs[0]]
    shape = tuple(t.shape)
    if len(shape) != 4 or shape[0] != 1 or shape[3] != 3 or min(shape) < 1:
        raise ModelError(f"{model}: input '{t.name}' is {list(shape)}, not an RGB image [1, height, width, 3]")
    if t.dtype.name not in ("FLOAT32", "UINT8", "INT8"):
        raise ModelError(f"{model}: input '{t.name}' is {t.dtype.name}; images go to FLOAT32, UINT8 or INT8 inputs")
    q = t.quant
    scale, zp = (float(q.scale[0]), int(q.zero_point[0])) if q is not None and len(q.scale) else (0.0, 0)
    return ImageInput(shape[1], shape[2], np.dtype(t.dtype.np), scale, zp)


def load_image(path: str | os.PathLike) -> np.ndarray:
    """A PNG or JPEG as float32 RGB [height, width, 3] (grey, palette and alpha images converted)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            im.load()
            rgb = im.convert("RGB")
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        reason = str(exc).split(" '")[0] if isinstance(exc, UnidentifiedImageError) else str(exc)
        raise TestbedError(f"cannot read image {path}: {reason or type(exc).__name__}") from None
    return np.asarray(rgb, np.float32)


def _round(x: float) -> int:
    """C's round(): halves away from zero (Python's round() goes to even)."""
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def central_crop(image: np.ndarray, fraction: float = CROP_FRACTION) -> np.ndarray:
    """TFLite's square central crop: min(round(f*h), round(f*w)) on both sides."""
    h, w = image.shape[:2]
    side = max(1, min(_round(fraction * h), _round(fraction * w)))
    top, left = _round((h - side) / 2.0), _round((w - side) / 2.0)
    return image[top:top + side, left:left + side]


def _axis(size_in: int, size_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    scale = np.float32(size_in) / np.float32(size_out)
    v = np.arange(size_out, dtype=np.float32) * scale  # align_corners and half_pixel_centers both false
    lo = np.maximum(np.floor(v), 0).astype(np.int64)
    hi = np.minimum(np.ceil(v), size_in - 1).astype(np.int64)
    return lo, hi, (v - lo.astype(np.float32)).astype(np.float32)


def resize_bilinear(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """tflite::reference_ops::ResizeBilinear on float32, summed in the same order."""
    y0, y1, dy = _axis(image.shape[0], height)
    x0, x1, dx = _axis(image.shape[1], width)
    dy, dx, one = dy[:, None, None], dx[None, :, None], np.float32(1)
    top, bottom = image[y0], image[y1]
    a, c, b, d = top[:, x0], top[:, x1], bottom[:, x0], bottom[:, x1]
    return ((a * (one - dy)) * (one - dx) + (b * dy) * (one - dx)) + (c * (one - dy)) * dx + (d * dy) * dx


def _raw_fits(spec: ImageInput, norm: Normalization) -> bool:
    """Whether TFLite's raw bytes, read through the input's quantization, are (x - mean) / std
    within one quantization step: scale * std = 1 (1%) and the byte that means 0 is the mean (+-1)."""
    offset = 128 if spec.dtype == np.int8 else 0
    return abs(spec.scale * norm.std - 1) <= 0.01 and abs(offset + spec.zero_point - norm.mean) <= 1


def to_input(pixels: np.ndarray, spec: ImageInput, norm: Normalization = Normalization()) -> np.ndarray:
    """Resized float pixels (0..255) as the input's type."""
    if spec.dtype.kind == "f":
        # NormalizationParams: (x - mean) * scale, scale = 1 / std in float (AddDefaultNormalizationStep)
        return ((pixels - np.float32(norm.mean)) * np.float32(1.0 / norm.std)).astype(spec.dtype)
    info = np.iinfo(spec.dtype)
    if norm.quantized == "raw" or not spec.scale or (norm.quantized == "auto" and _raw_fits(spec, norm)):
        # ImagePreprocessingStage: int8 subtracts 128, then static_cast truncates toward zero
        raw = pixels - np.float32(128) if spec.dtype == np.int8 else pixels
        return np.clip(np.trunc(raw), info.min, info.max).astype(spec.dtype)
    q = ((pixels.astype(np.float64) - norm.mean) / norm.std) / spec.scale
    q = np.sign(q) * np.floor(np.abs(q) + 0.5) + spec.zero_point  # TfLiteRound, as QUANTIZE rounds
    return np.clip(q, info.min, info.max).astype(spec.dtype)


def preprocess(path: str | os.PathLike, spec: ImageInput, norm: Normalization = Normalization(),
               crop: float | None = CROP_FRACTION) -> np.ndarray:
    """One image file as the model's input [height, width, 3]: decode, central crop (None: none),
    bilinear resize to the input size, then normalise or quantize."""
    image = load_image(path)
    if crop is not None:
        image = central_crop(image, crop)
    return to_input(resize_bilinear(image, spec.height, spec.width), spec, norm)


# -- top-K ---------------------------------------------------------------------------------------


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """[images, k] class indices by descending score; ties keep the lower index first (std::stable_sort)."""
    return np.argsort(-np.asarray(scores, np.float64), axis=1, kind="stable")[:, :k]


def topk_counts(top: np.ndarray, truth: Sequence[int]) -> np.ndarray:
    """Per K, how many images have their true class among the first K (TopkAccuracyEvalStage's counts)."""
    top = np.asarray(top)
    hit = top == np.asarray(truth, np.int64)[:, None]
    return np.cumsum(hit, axis=1).clip(max=1).sum(axis=0)


def topk_accuracies(counts: Sequence[int], runs: int) -> list[float]:
    """count / runs as TFLite stores it (float32)."""
    return [float(np.float32(c) / np.float32(runs)) if runs else 0.0 for c in counts]


def dequantized(value: np.ndarray, quantization: tuple[float, int]) -> np.ndarray:
    scale, zero_point = quantization
    value = np.asarray(value, np.float64)
    return (value - zero_point) * scale if scale else value


class Tally:
    """Top-K counts of an evaluated run and of its CPU reference over the same images, their top-1
    agreement and the mean absolute difference of their (dequantized) scores."""

    def __init__(self, k: int, quantization: tuple[float, int] = (0.0, 0)):
        self.k, self.quantization = k, quantization
        self.counts, self.reference_counts = np.zeros(k, np.int64), np.zeros(k, np.int64)
        self.runs = self.agree = 0
        self._diff, self._values = 0.0, 0

    def add(self, scores: np.ndarray, reference: np.ndarray, truth: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Count a chunk of images ([n, classes] scores of both runs); returns both runs' top-K."""
        top, ref_top = top_k(scores, self.k), top_k(reference, self.k)
        self.counts += topk_counts(top, truth)
        self.reference_counts += topk_counts(ref_top, truth)
        self.runs += len(top)
        self.agree += int((top[:, 0] == ref_top[:, 0]).sum())
        d = np.abs(dequantized(scores, self.quantization) - dequantized(reference, self.quantization))
        self._diff, self._values = self._diff + float(d.sum()), self._values + d.size
        return top, ref_top

    def accuracies(self, reference: bool = False) -> list[float]:
        return topk_accuracies(self.reference_counts if reference else self.counts, self.runs)

    @property
    def mean_abs_diff(self) -> float:
        return self._diff / self._values if self._values else 0.0


# -- running -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """One simulated batch-1 inference after a warm-up: seconds, millijoules, and its outputs."""

    seconds: float
    energy_mj: float
    outputs: tuple[np.ndarray, ...]


def time_one_image(it, image: np.ndarray) -> Timing:
    """Warm up, then one measured batch-1 inference of `image` on the interpreter's simulated phone."""
    from runtime.measure.figures import measure

    it.set_tensor(it.get_input_details()[0]["index"], image[None])
    for _ in range(2):
        it.invoke()
    simulation = it.simulation
    m = measure(simulation.soc, simulation.soc.trace.inferences, 1)
    outputs = tuple(it.get_tensor(d["index"]) for d in it.get_output_details())
    return Timing(simulation.latencies[-1], m.energy_mj, outputs)


class Runner:
    """Runs images through one interpreter configuration, `batch` images per invoke when the model
    takes a resized batch dimension (and its batched outputs are [batch, ...] with the same first
    row as a batch-1 run), else one at a time: every image gets the same outputs either way."""

    def __init__(self, make: Callable, batch: int, single=None, first: Timing | None = None):
        """`make()` builds the configuration's interpreter; `single`, one already allocated at batch 1
        (the timing run's); `first`, that run's outputs, for the first image `run` will be given."""
        self._make, self._single, self._first = make, single, first
        self.batched, self.batch = self._batched(batch) if batch > 1 else (None, 1)

    @property
    def single(self):
        if self._single is None:
            self._single = self._make()
            self._single.allocate_tensors()
        return self._single

    def _batched(self, batch: int):
        try:
            it = self._make()
            base = [tuple(d["shape"]) for d in it.get_output_details()]
            d = it.get_input_details()[0]
            it.resize_tensor_input(d["index"], [batch, *d["shape"][1:]])
            it.allocate_tensors()
        except (TestbedError, ValueError, RuntimeError):  # op checks, memory limit: no batching
            return None, 1
        got = [tuple(d["shape"]) for d in it.get_output_details()]
        if any(s[:1] != (1,) or g != (batch, *s[1:]) for s, g in zip(base, got)):
            return None, 1  # e.g. TFLite_Detection_PostProcess: its outputs stay [1, ...]
        return it, batch

    def run(self, images: np.ndarray) -> list[np.ndarray]:
        """Outputs for `images` [n, height, width, 3]: one array per model output, [n, ...]."""
        first, self._first = self._first, None
        if self.batched is None or len(images) == 1:
            return self._one_by_one(images)
        chunks = [self._invoke(self.batched, self._padded(images[i:i + self.batch]))
                  for i in range(0, len(images), self.batch)]
        outs = [np.concatenate([c[k] for c in chunks])[:len(images)] for k in range(len(chunks[0]))]
        if first is not None and not all(np.array_equal(o[:1], f) for o, f in zip(outs, first.outputs)):
            self.batched, self.batch = None, 1  # the batched graph computes differently: one at a time
            return self._one_by_one(images)
        return outs

    def _padded(self, images: np.ndarray) -> np.ndarray:
        """A last, short chunk filled up with copies of its last image (outputs dropped): one allocation."""
        short = self.batch - len(images)
        return np.concatenate([images, np.repeat(images[-1:], short, axis=0)]) if short else images

    def _one_by_one(self, images: np.ndarray) -> list[np.ndarray]:
        outs = [self._invoke(self.single, images[i:i + 1]) for i in range(len(images))]
        return [np.concatenate([o[k] for o in outs]) for k in range(len(outs[0]))]

    @staticmethod
    def _invoke(it, images: np.ndarray) -> list[np.ndarray]:
        it.set_tensor(it.get_input_details()[0]["index"], images)
        it.invoke()
        return [it.get_tensor(d["index"]) for d in it.get_output_details()]
