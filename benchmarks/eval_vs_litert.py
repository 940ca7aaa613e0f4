"""Images per second of `dtb eval classification` against a LiteRT XNNPACK loop over the same images.

Usage: python benchmarks/eval_vs_litert.py [--images 1000] [--precision float32|int8] [--num_threads 2]

The image folder holds the digits classifier's 629 held-out images (tests/fixtures/eval/digits)
copied under new names until it has --images files. Both sides decode and preprocess every image
the same way (runtime.evaluation.classification.preprocess: TFLite's central crop, resize and normalisation);
LiteRT then invokes one image at a time, as TFLite's own evaluation tool does, and `dtb eval`
runs as a user runs it on the CPU (batched on the host where the model allows). Prints the
wall time of each, images per second, and the ratio dtb / LiteRT.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402

from runtime.cli.main import main as dtb  # noqa: E402
from runtime.evaluation.classification import input_spec, list_images, preprocess  # noqa: E402
from runtime.model.tflite_read import load  # noqa: E402

DIGITS = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "eval", "digits")


def _folder(tmp: str, count: int) -> tuple[str, str]:
    """An image folder of `count` files and its ground-truth labels file."""
    source = list_images(os.path.join(DIGITS, "images"))
    labels = open(os.path.join(DIGITS, "ground_truth_labels.txt")).read().split()
    folder = os.path.join(tmp, "images")
    os.makedirs(folder)
    truth = []
    for k in range(count):
        shutil.copyfile(source[k % len(source)], os.path.join(folder, f"img_{k:05d}.png"))
        truth.append(labels[k % len(source)])
    path = os.path.join(tmp, "labels.txt")
    with open(path, "w") as f:
        f.write("\n".join(truth) + "\n")
    return folder, path


def _litert(model: str, folder: str, threads: int) -> float:
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=model, num_threads=threads)
    it.allocate_tensors()
    spec = input_spec(load(model), model)
    inp, out = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    start = time.perf_counter()
    for path in list_images(folder):
        it.set_tensor(inp, preprocess(path, spec)[None])
        it.invoke()
        it.get_tensor(out).argmax()
    return time.perf_counter() - start


def _dtb(model: str, folder: str, truth: str, threads: int, warm_up: bool = False) -> float:
    argv = ["eval", "classification", "--model_file", model, "--ground_truth_images_path", folder,
            "--ground_truth_labels", truth, "--model_output_labels", os.path.join(DIGITS, "labels.txt"),
            "--num_interpreter_threads", str(threads)] + (["--num_images", "16"] if warm_up else [])
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        code = dtb(argv)
    seconds = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"dtb {' '.join(argv)} exited {code}")
    return seconds


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=1000)
    p.add_argument("--precision", default="float32", choices=("float32", "float16", "dynamic", "int8"))
    p.add_argument("--num_threads", type=int, default=2)
    args = p.parse_args(argv)
    model = os.path.join(DIGITS, f"digits_{args.precision}.tflite")
    with tempfile.TemporaryDirectory() as tmp:
        folder, truth = _folder(tmp, args.images)
        _dtb(model, folder, truth, args.num_threads, warm_up=True)  # loads (or compiles) the kernels once
        ours = _dtb(model, folder, truth, args.num_threads)
        theirs = _litert(model, folder, args.num_threads)
    n = args.images
    print(f"digits_{args.precision}, {n} images, {args.num_threads} threads")
    print(f"  dtb eval classification   {ours:7.2f} s  {n / ours:8.1f} images/s")
    print(f"  LiteRT (XNNPACK) loop     {theirs:7.2f} s  {n / theirs:8.1f} images/s")
    print(f"  dtb images/s / LiteRT images/s: {theirs / ours:.2f}")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    raise SystemExit(main())
