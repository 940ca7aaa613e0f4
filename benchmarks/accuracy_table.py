"""The accuracy tables of docs/accuracy.md: `dtb eval` on the committed trained models, per precision, phone and delegate.

Usage: python benchmarks/accuracy_table.py [--num_images N] [--task classification|detection]

Runs `dtb eval classification` on the digits classifier and `dtb eval detection` on the shapes
detector (tests/fixtures/eval/, rebuilt by make_eval_models.py there), in each precision (float32,
float16 weights, dynamic range, int8), on each shipped phone with the CPU and each delegate that
applies there (Hexagon takes only 8-bit models; Core ML runs on the iPhone), and prints one
Markdown table per task: top-1 (classifier) or mAP@[.50:.95] (detector), the simulated latency and
energy per image, and the top-1 agreement with the CPU reference.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from runtime.cli.main import main as dtb  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "eval")
PRECISIONS = ("float32", "float16", "dynamic", "int8")
PHONES = {"pixel3": ("", "gpu", "nnapi", "hexagon"), "pixel4": ("", "gpu", "nnapi", "hexagon"),
          "iphone_xs": ("", "gpu", "coreml")}


def _task_flags(task: str) -> tuple[str, list[str]]:
    if task == "classification":
        d = os.path.join(ROOT, "digits")
        return os.path.join(d, "digits_{}.tflite"), [
            "--ground_truth_images_path", os.path.join(d, "images"),
            "--ground_truth_labels", os.path.join(d, "ground_truth_labels.txt"),
            "--model_output_labels", os.path.join(d, "labels.txt")]
    d = os.path.join(ROOT, "shapes")
    return os.path.join(d, "shapes_{}.tflite"), [
        "--ground_truth_images_path", os.path.join(d, "images"),
        "--ground_truth_json", os.path.join(d, "ground_truth.json"),
        "--classes_file", os.path.join(d, "classes.txt")]


def _one(task: str, model: str, flags: list[str], phone: str, delegate: str, num_images: int) -> dict | None:
    """The eval's JSON record, or None when the delegate does not apply (it refuses the model)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "eval.json")
        argv = ["eval", task, "--model_file", model, *flags, "--device", phone, "--num_images", str(num_images),
                "--output_file_path", out] + ([f"--use_{delegate}"] if delegate else [])
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = dtb(argv)
        if code != 0:
            raise SystemExit(f"dtb {' '.join(argv)} exited {code}")
        with open(out) as f:
            return json.load(f)


def _row(task: str, precision: str, phone: str, delegate: str, r: dict) -> str:
    simulation = r["simulated_per_image"]
    if task == "classification":
        score = f"{r['topk_accuracies'][0]:.4f}"
        agree = f"{r['top1_agreement']:.4f}"
    else:
        score = f"{r['map']:.4f}"
        agree = f"{r['reference_map']:.4f}"
    return (f"| {precision} | {phone} | {delegate or 'CPU'} | {r['delegated_ops']} of {r['ops']} | {score} | "
            f"{agree} | {simulation['latency_us'] / 1e3:.2f} | {simulation['energy_mj']:.3f} |")


def table(task: str, num_images: int) -> list[str]:
    pattern, flags = _task_flags(task)
    score, other = (("top-1", "top-1 agreement with CPU") if task == "classification"
                    else ("mAP@[.50:.95]", "CPU reference mAP"))
    lines = [f"| precision | phone | delegate | ops delegated | {score} | {other} | ms / image | mJ / image |",
             "|---|---|---|---|---|---|---|---|"]
    for precision in PRECISIONS:
        for phone, delegates in PHONES.items():
            for delegate in delegates:
                if delegate == "hexagon" and precision != "int8":
                    continue  # the Hexagon delegate takes 8-bit models only
                r = _one(task, pattern.format(precision), flags, phone, delegate, num_images)
                lines.append(_row(task, precision, phone, delegate, r))
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num_images", type=int, default=0, help="images per run (0: all)")
    p.add_argument("--task", choices=("classification", "detection"), action="append")
    args = p.parse_args(argv)
    for task in args.task or ("classification", "detection"):
        print(f"\n{task} ({'digits' if task == 'classification' else 'shapes'})\n")
        for line in table(task, args.num_images):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
