"""`dtb eval classification` and `dtb eval detection`: TFLite's task evaluation tools on a simulated phone."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from delegates.kinds import BUILTIN_KINDS
from runtime.cli.benchmark import PROGRESS_DELAY_S, threads
from runtime.cli.common import (add_device_flag, add_model_flags, check_writable, cpp_float, delegate_tool_parser,
                                echo_log, profile_from_flags, model_from_flags, parse_delegate_flags, to_us,
                                with_delegate_flag, write_atomic)
from runtime.evaluation.classification import (CROP_FRACTION, Normalization, Runner, Tally, Timing, check_finite,
                                                check_preprocessing, image_size, input_spec, list_images,
                                                preprocess, read_denylist, read_lines, select_images,
                                                time_one_image)
from runtime.interpreter.api import Interpreter
from runtime.report.progress import Progress
from runtime.ir.errors import ModelError, TestbedError

__all__ = ["add_parsers", "cmd_classification", "cmd_detection"]

TOP_K = 10  # TFLite's tool asks TopkAccuracyEvalStage for k = 10

_TIMING = ("Latency and energy per image are simulated for one batch-1 inference of the first image, after a "
           "warm-up, on the phone with the delegates: the simulator costs every op from its shapes, so every "
           "image costs the same (a model whose work depends on its data, through control flow, is timed on "
           "that first image). 'Inference latency' is that figure, hence its std_dev of 0. Images go through "
           "the graph --batch_size at a time on the host, when the model takes a resized batch, only to save "
           "host time: every image's outputs are those of a batch-1 run. A CPU single-thread reference run on "
           "the same images is compared with the delegated one.")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 (all) or more")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError("must be in (0, 1]")
    return value


def _finite(text: str) -> float:
    value = float(text)
    if not np.isfinite(value):
        raise argparse.ArgumentTypeError("must be a finite number")
    return value


def _std(text: str) -> float:
    value = float(text)
    if not (value > 0 and np.isfinite(value)):
        raise argparse.ArgumentTypeError("must be a positive number")
    return value


def _common_flags(sp: argparse.ArgumentParser) -> None:
    add_model_flags(sp, file_aliases=("--model_file",))
    add_device_flag(sp)
    sp.add_argument("--ground_truth_images_path", required=True, metavar="DIR",
                    help="folder of PNG / JPEG images, evaluated in file-name order (other files are ignored)")
    sp.add_argument("--output_file_path", metavar="FILE", help="write the metrics and per-image results here (JSON)")
    sp.add_argument("--num_images", type=_count, default=0, metavar="N", help="evaluate the first N images (0: all)")
    sp.add_argument("--delegate", default="", choices=("", *BUILTIN_KINDS), metavar="NAME",
                    help=f"{', '.join(BUILTIN_KINDS)} (empty: the CPU); the same as --use_NAME")
    sp.add_argument("--num_interpreter_threads", type=threads, default=1, metavar="N",
                    help="CPU threads of the evaluated run")
    sp.add_argument("--batch_size", type=_positive, default=16, metavar="N",
                    help="images per invoke on the host when the model can be batched (default 16); results "
                         "and simulated figures do not depend on it")
    sp.add_argument("--input_mean", type=_finite, default=127.5, metavar="X",
                    help="float inputs get (pixel - mean) / std (default 127.5: [-1, 1])")
    sp.add_argument("--input_std", type=_std, default=127.5, metavar="X", help="see --input_mean (default 127.5)")
    sp.add_argument("--quantized_input", choices=("auto", "raw", "quantize"), default="auto",
                    help="uint8 / int8 inputs. raw: TFLite's tool's bytes, the pixel for uint8, pixel - 128 for "
                         "int8, whatever the input's quantization; quantize: (pixel - mean) / std quantized with "
                         "the input's scale and zero point; auto (default): raw when the input's quantization "
                         "reads those bytes as (pixel - mean) / std to within one step, else quantize")


def add_parsers(sub) -> None:
    ev = sub.add_parser("eval")
    tasks = ev.add_subparsers(dest="task", required=True, metavar="{classification,detection}")
    sp = delegate_tool_parser(
        tasks, "classification", allow_abbrev=False,
        help="imagenet_image_classification: top-1..top-10 accuracy of a classifier on labelled images",
        description="TFLite's imagenet_image_classification tool. Each image is decoded, centrally cropped "
                    "(--crop_fraction of the shorter side, square), resized bilinearly to the model's input and "
                    "normalised, then Top-1..Top-10 accuracy is counted against --ground_truth_labels. " + _TIMING)
    _common_flags(sp)
    sp.add_argument("--ground_truth_labels", required=True, metavar="FILE",
                    help="one label per line, for the images in file-name order")
    sp.add_argument("--model_output_labels", required=True, metavar="FILE",
                    help="one label per line, as many as the model's output scores")
    sp.add_argument("--denylist_file_path", metavar="FILE",
                    help="images to skip: 1-based indices (in file-name order), one per line")
    sp.add_argument("--crop_fraction", type=_fraction, default=CROP_FRACTION, metavar="F",
                    help=f"central crop before the resize (default {CROP_FRACTION}, TFLite's; 1: the whole image)")
    sp.set_defaults(fn=cmd_classification, parser=sp)

    sp = delegate_tool_parser(
        tasks, "detection", allow_abbrev=False,
        help="coco_object_detection: COCO mAP of a detector ending in TFLite_Detection_PostProcess",
        description="TFLite's coco_object_detection tool. Each image is decoded, resized bilinearly to the "
                    "model's input (no crop) and normalised; the detections (boxes, classes, scores, "
                    "num_detections) are scored against COCO JSON ground truth by pycocotools: AP per IoU "
                    "threshold 0.50..0.95 and COCO's summary (mAP@[.50:.95], @.50, @.75), area all, "
                    "100 detections. " + _TIMING)
    _common_flags(sp)
    sp.add_argument("--ground_truth_json", "--ground_truth_proto", dest="ground_truth_json", required=True,
                    metavar="FILE", help="COCO instances JSON (images matched by file_name). TFLite's "
                                         "--ground_truth_proto takes a binary proto made from such a file; "
                                         "here either name takes the JSON itself")
    sp.add_argument("--classes_file", "--model_output_labels", dest="classes_file", required=True, metavar="FILE",
                    help="class names, one per line, in the model's class order (a first background line, "
                         "as in TFLite's label maps, is allowed); matched to the COCO categories by name")
    sp.set_defaults(fn=cmd_detection, parser=sp)


# -- configurations --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Setup:
    """The evaluated configuration (phone, delegates, threads) and the CPU single-thread reference."""

    profile: object
    model: object
    test: Callable[[], Interpreter]
    reference: Callable[[], Interpreter]
    names: str                  # "TfLiteGpuDelegateV2" or "the CPU (1 thread)"
    same: bool                  # no delegate and one thread: the evaluated run is the reference
    delegated: list = field(default_factory=lambda: [0])  # ops the delegates took, known once applied
    # Interpreters for the host's math: without delegates, a plain CPU interpreter computes exactly
    # what the simulated CPU does (the same kernels) without stepping a simulated phone per invoke.
    host_test: Callable[[], Interpreter] | None = None
    host_reference: Callable[[], Interpreter] | None = None


def _setup(args: argparse.Namespace, extra: list[str]) -> _Setup:
    from delegates.registry import parse_flags

    check_writable(args.output_file_path)
    profile = profile_from_flags(args.device, args.api_level)
    flags = with_delegate_flag(extra, args.delegate)
    first = parse_delegate_flags(args.parser, flags, profile)  # usage errors and refusal warnings, once
    model = model_from_flags(args)
    graph, made = model.graph, [first]

    def test() -> Interpreter:  # fresh delegates for each interpreter: a delegate may keep state
        delegates = made.pop() if made else parse_flags(flags, profile)[0]
        return Interpreter(graph=graph, experimental_delegates=delegates, device=profile,
                           num_threads=args.num_interpreter_threads)

    def reference() -> Interpreter:
        return Interpreter(graph=graph, num_threads=1, device=profile)

    def host(threads: int) -> Callable[[], Interpreter]:
        return lambda: Interpreter(graph=graph, num_threads=threads)

    n = args.num_interpreter_threads
    names = ", ".join(d.name for d in first) or ("the CPU (all big cores)" if n == -1 else
                                                 f"the CPU ({n} thread{'s' if n > 1 else ''})")
    return _Setup(profile, model, test, reference, names, not first and n == 1,
                  host_test=None if first else host(n), host_reference=host(1))


def _run(setup: _Setup, paths: Sequence[Path], prepare: Callable[[Path], np.ndarray], batch: int,
         prog: str = "dtb eval"):
    """Timings of both configurations, then (chunk indices, test outputs, reference outputs) per chunk,
    with the images done shown on stderr as they finish (a bar on a terminal, a line every 10 s elsewhere)."""
    with echo_log():  # the delegation log, as TFLite's tools print it when the delegates are applied
        test = setup.test()  # the memory limit refuses an absurd input before any image is decoded
    first = prepare(paths[0])
    setup.delegated[0] = len(test.simulation.delegation.delegated_ops())
    configs = [(test, setup.host_test or setup.test)]
    configs += [] if setup.same else [(setup.reference(), setup.host_reference)]
    runners, timings = [], []
    for it, make in configs:
        it.allocate_tensors()
        with _quiet_math():
            timing = time_one_image(it, first)
        timings.append(timing)
        simulated = make in (setup.test, setup.reference)
        # Without delegates both runs are the host's kernels, whose results do not depend on the
        # thread count: the reference's outputs are the test run's, computed once.
        if setup.host_test is None or not runners:
            runners.append(Runner(make, batch, single=it if simulated else None, first=timing))

    def chunks() -> Iterator[tuple[range, list, list]]:
        step = max(r.batch for r in runners)
        with Progress(prog, "image", delay=PROGRESS_DELAY_S, leave=False, total=len(paths)) as progress:
            for start in range(0, len(paths), step):
                idx = range(start, min(start + step, len(paths)))
                images = np.stack([first if i == 0 else prepare(paths[i]) for i in idx])
                with _quiet_math():
                    outs = [r.run(images) for r in runners]
                progress(idx.stop, len(paths), paths[idx.stop - 1].name)
                yield idx, outs[0], outs[-1]  # the same run twice when it is the reference

    return (timings if len(timings) == 2 else timings * 2), chunks()


def _quiet_math():
    """NumPy's overflow warnings off while the model runs: outputs that went non-finite are refused
    by check_finite / check_detections in one line, which the warnings' lines would break."""
    return np.errstate(all="ignore")


def _latency_lines(timing: Timing) -> list[str]:
    """TFLite's inference latency line: the simulated batch-1 figure (one run: no deviation)."""
    return [f"Inference latency: avg={cpp_float(to_us(timing.seconds))}(us), std_dev=0(us)"]


def _simulated(timing: Timing) -> str:
    return f"latency={cpp_float(to_us(timing.seconds))}(us) energy={cpp_float(timing.energy_mj)}(mJ)"


def _header(setup: _Setup, n: int) -> list[str]:
    p = setup.profile
    return [f"Simulated device: {p.name} ({p.description})", f"Num evaluation runs: {n}"]


def _write(path: str | None, record: dict) -> None:
    if path:
        from runtime.measure.record import strict_json

        write_atomic(path, json.dumps(strict_json(record), indent=1, allow_nan=False) + "\n")


def _record(setup: _Setup, task: str, n: int, timings: Sequence[Timing]) -> dict:
    return {"task": task, "model": setup.model.label, "device": setup.profile.name, "delegates": setup.names,
            "delegated_ops": setup.delegated[0], "ops": len(setup.model.graph.ops),
            "num_runs": n, "simulated_per_image": _timing_record(timings[0]),
            "reference_simulated_per_image": _timing_record(timings[1])}


def _timing_record(t: Timing) -> dict:
    return {"latency_us": to_us(t.seconds), "energy_mj": t.energy_mj}


# -- classification --------------------------------------------------------------------------------


def _scores(graph, model: str) -> tuple[int, tuple[float, int]]:
    """The classifier's one output, a score vector [1, classes]: its length and quantization."""
    if len(graph.outputs) != 1:
        raise ModelError(f"{model}: a classifier has one output, a score vector; this model has "
                         f"{len(graph.outputs)}")
    t = graph.tensors[graph.outputs[0]]
    if len(t.shape) != 2 or t.shape[0] != 1 or t.shape[1] < 1 or t.dtype.name not in ("FLOAT32", "UINT8", "INT8"):
        raise ModelError(f"{model}: output '{t.name}' is {t.dtype.name} {list(t.shape)}, not a score vector "
                         f"[1, classes] of FLOAT32, UINT8 or INT8")
    q = t.quant
    return t.shape[1], ((float(q.scale[0]), int(q.zero_point[0])) if q is not None and len(q.scale) else (0.0, 0))


def _truth_classes(args, truth: list[str], labels: list[str]) -> np.ndarray:
    index = {}
    for k, label in enumerate(labels):
        index.setdefault(label, k)
    for n, label in enumerate(truth, 1):
        if label not in index:
            raise TestbedError(f"--ground_truth_labels {args.ground_truth_labels} line {n}: {label!r} is not a "
                               f"label of --model_output_labels {args.model_output_labels}")
    return np.array([index[label] for label in truth], np.int64)


def _classification_inputs(args, classes: int):
    """The images to evaluate (after the denylist and --num_images) and their true class indices."""
    images = list_images(args.ground_truth_images_path)
    truth = read_lines(args.ground_truth_labels, "--ground_truth_labels")
    if len(truth) != len(images):
        raise TestbedError(f"--ground_truth_labels {args.ground_truth_labels} has {len(truth)} labels for the "
                           f"{len(images)} images in --ground_truth_images_path {args.ground_truth_images_path}")
    labels = read_lines(args.model_output_labels, "--model_output_labels")
    if len(labels) != classes:
        raise TestbedError(f"--model_output_labels {args.model_output_labels} has {len(labels)} labels; the "
                           f"model's output has {classes} scores")
    deny = read_denylist(args.denylist_file_path, len(images)) if args.denylist_file_path else set()
    chosen = select_images(len(images), deny, args.num_images)
    if not chosen:
        raise TestbedError(f"--denylist_file_path {args.denylist_file_path} leaves no image to evaluate")
    return [images[i] for i in chosen], _truth_classes(args, truth, labels)[chosen], labels


def cmd_classification(args: argparse.Namespace, extra: list[str]) -> int:
    norm = Normalization(args.input_mean, args.input_std, args.quantized_input)
    setup = _setup(args, extra)
    graph, label = setup.model.graph, setup.model.label
    spec = input_spec(graph, label)
    check_preprocessing(spec, label)
    classes, quant = _scores(graph, label)
    paths, truth, labels = _classification_inputs(args, classes)
    timings, chunks = _run(setup, paths, lambda p: preprocess(p, spec, norm, args.crop_fraction), args.batch_size,
                          args.parser.prog)
    tally, per_image = Tally(min(TOP_K, classes), quant), []
    for idx, (scores,), (reference,) in chunks:
        names = [paths[i].name for i in idx]
        check_finite([scores], names, f"the run on {setup.names}")
        check_finite([reference], names, "the CPU reference")
        top, ref_top = tally.add(scores, reference, truth[idx.start:idx.stop])
        per_image += [{"image": paths[i].name, "ground_truth": labels[truth[i]],
                       "top5": [labels[c] for c in row[:5]], "reference_top5": [labels[c] for c in ref_row[:5]]}
                      for i, row, ref_row in zip(idx, top, ref_top)]
    for line in _classification_lines(setup, tally, timings):
        print(line)
    record = _record(setup, "image_classification", tally.runs, timings)
    record.update(topk_accuracies=tally.accuracies(), reference_topk_accuracies=tally.accuracies(reference=True),
                  top1_agreement=tally.agree / tally.runs, mean_abs_output_diff=tally.mean_abs_diff, images=per_image)
    _write(args.output_file_path, record)
    return 0


def _classification_lines(setup: _Setup, tally: Tally, timings: Sequence[Timing]) -> list[str]:
    """TFLite's lines (its preprocessing latency aside: host time, not the phone's), then ours."""
    n = tally.runs
    return [*_header(setup, n), *_latency_lines(timings[0]),
            *(f"Top-{i + 1} Accuracy: {cpp_float(a)}" for i, a in enumerate(tally.accuracies())),
            f"Simulated per image on {setup.profile.name} with {setup.names} (batch 1): {_simulated(timings[0])}",
            f"CPU reference (1 thread): Top-1 Accuracy: {cpp_float(tally.accuracies(reference=True)[0])} "
            f"{_simulated(timings[1])}",
            f"Difference from the CPU reference: top-1 agreement={cpp_float(tally.agree / n)} ({tally.agree} of {n} "
            f"images) mean_abs_output_diff={cpp_float(tally.mean_abs_diff)}"]


# -- detection -------------------------------------------------------------------------------------


def _detection_inputs(args, truth, detector):
    """The images to evaluate, each with its ground-truth image entry, and class -> category ids."""
    from runtime.evaluation.detection import category_ids

    images = list_images(args.ground_truth_images_path)
    chosen = [images[i] for i in select_images(len(images), num_images=args.num_images)]
    for path in chosen:
        if path.name not in truth.by_name:
            raise TestbedError(f"image {path} is not among the images of --ground_truth_json {truth.path}")
    classes = read_lines(args.classes_file, "--classes_file")
    return chosen, category_ids(classes, detector.num_classes, truth, args.classes_file)


def _size(path: Path, entry: dict) -> tuple[float, float]:
    """The image's width and height in the ground truth's pixels: its entry's, else the file's."""
    if "width" in entry and "height" in entry:
        return float(entry["width"]), float(entry["height"])
    width, height = image_size(path)
    return float(width), float(height)


def cmd_detection(args: argparse.Namespace, extra: list[str]) -> int:
    from runtime.evaluation.detection import IOU_THRESHOLDS, coco_map, detector_outputs, load_coco

    norm = Normalization(args.input_mean, args.input_std, args.quantized_input)
    setup = _setup(args, extra)
    graph, label = setup.model.graph, setup.model.label
    spec = input_spec(graph, label)
    check_preprocessing(spec, label)
    detector = detector_outputs(graph, label)
    truth = load_coco(args.ground_truth_json)
    paths, categories = _detection_inputs(args, truth, detector)
    timings, chunks = _run(setup, paths, lambda p: preprocess(p, spec, norm, None), args.batch_size, args.parser.prog)
    results = _detections(chunks, paths, truth, categories, setup.names)
    ids = [truth.by_name[p.name]["id"] for p in paths]
    maps = [coco_map(truth, found, ids) for found in results]
    for line in _detection_lines(setup, len(paths), maps, timings):
        print(line)
    record = _record(setup, "object_detection", len(paths), timings)
    for key, m, found in (("", maps[0], results[0]), ("reference_", maps[1], results[1])):
        record.update({f"{key}average_precision": dict(zip(map(str, IOU_THRESHOLDS), m.per_iou)),
                       f"{key}map": m.map, f"{key}map50": m.map50, f"{key}map75": m.map75,
                       f"{key}detections": found})
    _write(args.output_file_path, record)
    return 0


def _detections(chunks, paths: Sequence[Path], truth, categories, names: str) -> tuple[list[dict], list[dict]]:
    """COCO results of the evaluated run and of the reference, image by image."""
    from runtime.evaluation.detection import check_detections, to_coco_results

    results: tuple[list, list] = ([], [])
    runs = (f"the run on {names}", "the CPU reference")
    for idx, test, ref in chunks:
        for row, i in enumerate(idx):
            entry = truth.by_name[paths[i].name]
            width, height = _size(paths[i], entry)
            for outs, found, run in zip((test, ref), results, runs):
                check_detections([o[row:row + 1] for o in outs], paths[i].name, run)
                found += to_coco_results([o[row:row + 1] for o in outs], entry["id"], width, height, categories)
    return results


def _detection_lines(setup: _Setup, n: int, maps, timings: Sequence[Timing]) -> list[str]:
    """TFLite's lines (its preprocessing latency aside), COCO's summary, then ours."""
    from runtime.evaluation.detection import IOU_THRESHOLDS

    return [*_header(setup, n), *_latency_lines(timings[0]),
            *(f"Average Precision [IOU Threshold={cpp_float(iou)}]: {cpp_float(ap)}"
              for iou, ap in zip(IOU_THRESHOLDS, maps[0].per_iou)),
            f"Overall mAP: {cpp_float(maps[0].map)}", _map_line(maps[0]),
            f"Simulated per image on {setup.profile.name} with {setup.names} (batch 1): {_simulated(timings[0])}",
            f"CPU reference (1 thread): {_map_line(maps[1])} {_simulated(timings[1])}"]


def _map_line(m) -> str:
    return f"mAP@[.50:.95]: {cpp_float(m.map)} mAP@.50: {cpp_float(m.map50)} mAP@.75: {cpp_float(m.map75)}"
