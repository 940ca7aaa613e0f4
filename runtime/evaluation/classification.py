"""Image-task evaluation as TFLite's evaluation tools do it: images, preprocessing, label files, top-K, batched runs."""

from __future__ import annotations

import contextlib
import math
import os
import re
import stat
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from runtime.ir.errors import ModelError, TestbedError

__all__ = ["CROP_FRACTION", "IMAGE_EXTENSIONS", "MAX_IMAGE_PIXELS", "MAX_TEXT_BYTES", "PREPROCESS_COPIES",
           "ImageInput", "Normalization", "Runner", "Tally", "Timing", "central_crop", "check_finite",
           "check_preprocessing", "dequantized", "image_size", "input_spec", "list_images", "load_image",
           "load_pixels", "preprocess", "read_bytes", "read_denylist", "read_lines", "read_text", "resize_bilinear",
           "select_images", "time_one_image", "to_input", "top_k", "topk_accuracies", "topk_counts"]

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg")
# ImageClassificationStage's kCroppingFraction: a square central crop of 87.5% of the shorter side.
CROP_FRACTION = 0.875
# The most pixels one image may have, read from its header before anything is decoded: a
# 50-megapixel photo (8160 x 6120) fits, and decodes to at most 200 MB (8-bit RGBA). Pillow's own
# guard only warns below 89 million pixels and the decoded image is copied twice more here.
MAX_IMAGE_PIXELS = 50_000_000
# The formats TFLite's evaluation tools decode. Pillow would open many more from their headers
# (EPS through Ghostscript, TIFF, ...); a file named .png holding one of them is refused.
_FORMATS = ("PNG", "JPEG")
# Label, denylist and ground-truth text files: ImageNet's 50,000 labels take under 1 MB.
MAX_TEXT_BYTES = 64 << 20
# Float32 copies of the model's input that preprocessing one image holds at its peak (the resize's
# four corners, its weighted sums, the converted result; the quantize path works in float64): 9.0 at
# most in tests/test_fuzz_eval.py.
PREPROCESS_COPIES = 10


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


def read_bytes(path: str | os.PathLike, flag: str, limit: int = MAX_TEXT_BYTES) -> bytes:
    """A regular file's bytes, at most `limit` of them: a FIFO or a device (/dev/zero) is refused
    before it is opened, since reading it would block or never end."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise TestbedError(f"{flag} {path}: not a regular file")
        if info.st_size > limit:
            raise TestbedError(f"{flag} {path}: {info.st_size:,} bytes, above the limit of {limit:,} bytes for it")
        with open(path, "rb") as f:
            data = f.read(limit + 1)  # the file may have grown since the stat
    except FileNotFoundError:
        raise TestbedError(f"{flag} {path}: no such file") from None
    except (OSError, ValueError) as exc:
        raise TestbedError(f"{flag} {path}: cannot read it: {getattr(exc, 'strerror', None) or exc}") from None
    if len(data) > limit:
        raise TestbedError(f"{flag} {path}: above the limit of {limit:,} bytes for it")
    return data


def read_text(path: str | os.PathLike, flag: str, limit: int = MAX_TEXT_BYTES) -> str:
    """A regular file's UTF-8 text, as read_bytes reads it."""
    try:
        return read_bytes(path, flag, limit).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TestbedError(f"{flag} {path}: cannot read it: not UTF-8 text (byte {exc.start})") from None


def read_lines(path: str | os.PathLike, flag: str) -> list[str]:
    """A label file's lines, stripped (a CRLF file reads as a LF one); blank lines at the end do not count."""
    lines = [line.strip() for line in read_text(path, flag).splitlines()]
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

    def __post_init__(self):
        for flag, v in (("--input_mean", self.mean), ("--input_std", self.std)):
            if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not math.isfinite(v):
                raise TestbedError(f"{flag} {v!r}: not a finite number")
        if not self.std > 0:
            raise TestbedError(f"--input_std {self.std!r}: must be above 0")
        if self.quantized not in ("auto", "raw", "quantize"):
            raise TestbedError(f"--quantized_input {self.quantized!r}: must be auto, raw or quantize")
        # The float path computes in float32: the darkest and brightest pixel must stay finite there,
        # else every score is NaN and top-K would rank NaNs.
        ends = _normalised(np.array([0, 255], np.float32), self)
        if not np.isfinite(ends).all():
            raise TestbedError(f"--input_mean {self.mean!r} --input_std {self.std!r}: (pixel - mean) / std is "
                               f"{ends[0]} .. {ends[1]} in float32, not finite")


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


def _too_big(path, pixels: int | None, width: int = 0, height: int = 0, limit: int = MAX_IMAGE_PIXELS):
    size = (f"{width} x {height} = {pixels:,} pixels" if width else f"{pixels:,} pixels" if pixels
            else f"more than {limit:,} pixels")
    return TestbedError(f"cannot read image {path}: its header says {size}, above the limit of {limit:,} "
                        f"pixels (refused before decoding)")


@contextlib.contextmanager
def _opened(path: str | os.PathLike, max_pixels: int):
    """The image with its header read and its size checked, nothing decoded yet."""
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # the limit here is lower
            im = Image.open(path, formats=_FORMATS)
    except Image.DecompressionBombError as exc:  # Pillow's guard, above 179 million pixels
        found = re.search(r"\((\d+) pixels\)", str(exc))
        raise _too_big(path, int(found.group(1)) if found else None, limit=max_pixels) from None
    except UnidentifiedImageError:
        raise TestbedError(f"cannot read image {path}: not a PNG or JPEG image") from None
    except Exception as exc:  # noqa: BLE001 - Pillow's parsers raise many types on damaged headers
        raise _unreadable(path, exc) from None
    with im:
        if min(im.size) < 1:
            raise TestbedError(f"cannot read image {path}: its header says {im.width} x {im.height} pixels")
        if im.width * im.height > max_pixels:
            raise _too_big(path, im.width * im.height, im.width, im.height, max_pixels)
        yield im


def _unreadable(path, exc: Exception) -> TestbedError:
    reason = " ".join(str(exc).split()) or type(exc).__name__
    return TestbedError(f"cannot read image {path}: {reason[:200]}")


def image_size(path: str | os.PathLike, max_pixels: int = MAX_IMAGE_PIXELS) -> tuple[int, int]:
    """A PNG or JPEG's width and height from its header (no pixel decoded), within the pixel limit."""
    with _opened(path, max_pixels) as im:
        return im.width, im.height


def load_pixels(path: str | os.PathLike, max_pixels: int = MAX_IMAGE_PIXELS) -> np.ndarray:
    """A PNG or JPEG as uint8 RGB [height, width, 3] (grey, palette and alpha images converted).
    Its header is checked first: not PNG or JPEG, or more than `max_pixels` pixels, is refused
    before decoding. Any failure of the decoder is a TestbedError naming the file."""
    with _opened(path, max_pixels) as im:
        try:
            im.load()
            rgb = im if im.mode == "RGB" else im.convert("RGB")
            return np.asarray(rgb, np.uint8)
        except Exception as exc:  # noqa: BLE001 - a decoder given damaged bytes raises what it raises
            raise _unreadable(path, exc) from None


def load_image(path: str | os.PathLike, max_pixels: int = MAX_IMAGE_PIXELS) -> np.ndarray:
    """A PNG or JPEG as float32 RGB [height, width, 3], as load_pixels reads it."""
    return load_pixels(path, max_pixels).astype(np.float32)


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
    # Corners gathered in one step: image[y0] first would hold height x (the image's width) pixels,
    # gigabytes for a 1 x 50,000,000 image. uint8 pixels are promoted to float32 exactly.
    y0, y1, x0, x1 = y0[:, None], y1[:, None], x0[None, :], x1[None, :]
    a, c, b, d = image[y0, x0], image[y0, x1], image[y1, x0], image[y1, x1]
    return ((a * (one - dy)) * (one - dx) + (b * dy) * (one - dx)) + (c * (one - dy)) * dx + (d * dy) * dx


def _raw_fits(spec: ImageInput, norm: Normalization) -> bool:
    """Whether TFLite's raw bytes, read through the input's quantization, are (x - mean) / std
    within one quantization step: scale * std = 1 (1%) and the byte that means 0 is the mean (+-1)."""
    offset = 128 if spec.dtype == np.int8 else 0
    return abs(spec.scale * norm.std - 1) <= 0.01 and abs(offset + spec.zero_point - norm.mean) <= 1


def _normalised(pixels: np.ndarray, norm: Normalization) -> np.ndarray:
    # NormalizationParams: (x - mean) * scale, scale = 1 / std in float (AddDefaultNormalizationStep)
    with np.errstate(over="ignore", invalid="ignore"):  # Normalization refuses what overflows
        return (pixels - np.float32(norm.mean)) * np.float32(1.0 / norm.std)


def to_input(pixels: np.ndarray, spec: ImageInput, norm: Normalization = Normalization()) -> np.ndarray:
    """Resized float pixels (0..255) as the input's type."""
    if spec.dtype.kind == "f":
        return _normalised(pixels, norm).astype(spec.dtype)
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
    image = load_pixels(path)
    if crop is not None:
        image = central_crop(image, crop)
    return to_input(resize_bilinear(image, spec.height, spec.width), spec, norm)


def check_preprocessing(spec: ImageInput, model: str, limit: int | None = None) -> None:
    """Refuse, by the memory limit (runtime.limits.memory), a model input whose preprocessing alone
    would need more: checked before the first image is decoded."""
    from runtime.limits import memory

    need = PREPROCESS_COPIES * spec.height * spec.width * 3 * 4
    limit = memory.resolve_limit(limit)
    if need > limit:
        raise ModelError(f"{model}: preprocessing one image to its input [1, {spec.height}, {spec.width}, 3] "
                         f"needs {memory.format_bytes(need)}, above the memory limit of {memory.format_bytes(limit)}")


def check_finite(outputs: Sequence[np.ndarray], images: Sequence[str], run: str) -> None:
    """Refuse float outputs ([images, ...] each) holding NaN or infinity: no accuracy is counted
    over them (a stable sort would rank NaN scores and report a Top-1 all the same)."""
    for k, out in enumerate(outputs):
        out = np.asarray(out)
        if out.dtype.kind != "f" or not out.size:
            continue
        bad = ~np.isfinite(out.reshape(len(out), -1)).all(axis=1)
        if bad.any():
            i = int(np.argmax(bad))
            kind = "NaN" if np.isnan(out[i]).any() else "infinity"
            raise TestbedError(f"image {images[i]}: output {k} of {run} holds {kind}; no result is reported over "
                               f"non-finite outputs (do --input_mean / --input_std suit this model?)")


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
