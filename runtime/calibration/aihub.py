"""Qualcomm AI Hub's published measurements read into calibration Rows: perf.yaml (both formats) and profile-job JSON.

perf.yaml is what quic/ai-hub-models publishes per model (qai_hub_models/models/<id>/perf.yaml).
Its older format (releases up to about v0.27) lists `models:`, each with `performance_metrics:`, a
list of one entry per device whose `torchscript_onnx_tflite` job gives `inference_time` in
MICROseconds, `precision` and `layer_info`; the newer one (v0.30 on, e.g. v0.37.0, v0.46.1) is keyed
`precisions: <precision>: components: <name>: performance_metrics: <device>: tflite:` with
`inference_time_milliseconds` and `layer_counts`. A profile job's results (qai_hub's
ProfileJob.download_profile(), saved as JSON) carry `execution_summary.estimated_inference_time` in
microseconds and one `execution_detail` entry per op with its `compute_unit` (NPU, GPU or CPU); this
is how ai-hub-models' own scorecard reads them (qai_hub_models/scorecard/results/scorecard_job.py).
"""

from __future__ import annotations

import json
import math
import reprlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from delegates.kinds import DelegateKind
from runtime.calibration.rows import LATENCY_MS, LATENCY_TEXT, MeasurementError, OpSplit, Row
from runtime.ir.yamlcheck import Key, dotted, parse

__all__ = ["AihubMeasurement", "Skipped", "AihubRows", "read_perf_yaml", "read_profile_json", "to_rows",
           "model_id_of", "read_aihub", "DEVICES", "THREADS", "is_aihub_file"]

# AI Hub's device names -> the prior profiles (sim/profiles/priors/) that stand for them.
DEVICES: Mapping[str, str] = {
    "Samsung Galaxy S23": "galaxy_s23",
    "Samsung Galaxy S24": "galaxy_s24",
    "Snapdragon 8 Elite QRD": "sd8_elite_qrd",
    "Snapdragon 8 Elite Gen 5 QRD": "sd8_elite_gen5_qrd",
    "Snapdragon 7 Gen 4 QRD": "sd7_gen4_qrd",
}
# Assumed: AI Hub does not publish the TFLite thread count of its profile jobs; TFLite's benchmark
# tools on a phone commonly run 4 threads (the big cores).
THREADS = 4
# The older format's key for a TFLite job; the others (torchscript_onnx_qnn, torchscript_onnx, ...)
# are other runtimes, which the simulator does not model.
_OLD_TFLITE = "torchscript_onnx_tflite"
_NEW_TFLITE = "tflite"
_PASSED = "Passed"


@dataclass(frozen=True)
class AihubMeasurement:
    """One TFLite profile job as AI Hub published it."""

    model_id: str
    component: str
    precision: str          # float, w8a8, ... (newer) or fp16, fp32, int8, ... (older)
    device: str             # AI Hub's device name
    inference_ms: float
    npu_layers: int
    gpu_layers: int
    cpu_layers: int
    single_component: bool
    source: str             # file:line

    @property
    def delegate(self) -> str:
        """AI Hub's TFLite default compute units: QNN on the NPU first, then the GPU delegate, then the CPU."""
        return (DelegateKind.QNN.value if self.npu_layers else DelegateKind.GPU.value if self.gpu_layers
                else "cpu")

    @property
    def file_stem(self) -> str:
        return self.model_id if self.single_component else f"{self.model_id}_{self.component}"


@dataclass(frozen=True)
class Skipped:
    """A published measurement that gives no row, and why; listed, never dropped silently."""

    source: str
    model_id: str
    precision: str
    device: str             # AI Hub's device name
    reason: str

    @property
    def line(self) -> str:
        return f"{self.source}: {self.model_id} {self.precision} on {self.device}: {self.reason}"


@dataclass(frozen=True)
class AihubRows:
    rows: tuple[Row, ...]
    skipped: tuple[Skipped, ...]


def is_aihub_file(path: Path) -> bool:
    return path.suffix.lower() in (".yaml", ".yml", ".json")


# -- perf.yaml ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Doc:
    """A parsed document and where its keys are, so every error names file:line and the key path."""

    source: str
    lines: Mapping[Key, int]

    def where(self, path: Key) -> str:
        line = next((self.lines[path[:n]] for n in range(len(path), -1, -1) if path[:n] in self.lines), None)
        return f"{self.source}:{line}" if line else self.source

    def fail(self, path: Key, message: str) -> MeasurementError:
        return MeasurementError(f"{self.where(path)}: {dotted(path)}: {message}" if path
                                else f"{self.where(path)}: {message}")

    def mapping(self, value: Any, path: Key) -> dict:
        if not isinstance(value, dict):
            raise self.fail(path, f"must be a mapping, got {type(value).__name__}")
        return value

    def listing(self, value: Any, path: Key) -> list:
        if not isinstance(value, list):
            raise self.fail(path, f"must be a list, got {type(value).__name__}")
        return value

    def get(self, table: Mapping, key: str, path: Key) -> Any:
        if key not in table:
            raise self.fail(path + (key,), "required key is missing")
        return table[key]

    def text(self, table: Mapping, key: str, path: Key) -> str:
        value = self.get(table, key, path)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(path + (key,), f"must be a non-empty string, got {value!r}")
        return value

    def positive(self, table: Mapping, key: str, path: Key) -> float:
        value = self.get(table, key, path)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0 or \
                isinstance(value, int) and value > 1e308 or not math.isfinite(value):   # float(10**400) overflows
            raise self.fail(path + (key,), f"must be a positive number, got {reprlib.repr(value)}")
        return float(value)

    def latency_ms(self, table: Mapping, key: str, path: Key, unit: str, per_ms: float) -> float:
        """A positive time in `unit` (`per_ms` of them to a millisecond), in milliseconds, within the range
        a measurement may state (a CSV row's): the fit divides by it and takes its log."""
        value = self.positive(table, key, path)
        ms = value / per_ms
        if not LATENCY_MS[0] <= ms < LATENCY_MS[1]:
            raise self.fail(path + (key,), f"{value:g} {unit} ({ms:g} ms) is not a latency in {LATENCY_TEXT} ms")
        return ms

    def name(self, value: Any, path: Key, what: str) -> str:
        """A key that names something (a device): a non-empty string, not a number, a date or null."""
        if not isinstance(value, str) or not value.strip():
            raise self.fail(path, f"{what} must be a non-empty string, got {reprlib.repr(value)}")
        return value

    def count(self, table: Mapping, key: str, path: Key) -> int:
        value = table.get(key, 0)            # the newer format leaves out units that ran nothing
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(path + (key,), f"must be an integer >= 0, got {value!r}")
        return value


def model_id_of(path: Path) -> str:
    """ai-hub-models keeps each model's perf.yaml in a folder named by its id; another file name is the id."""
    return path.parent.name if path.name == "perf.yaml" else path.stem.removesuffix(".perf").removesuffix("_perf")


def read_perf_yaml(text: str, source: str, model_id: str) -> tuple[list[AihubMeasurement], list[Skipped]]:
    """Every TFLite job of a perf.yaml in either format, and the jobs that did not pass."""
    data, lines = parse(text, source, MeasurementError)
    doc = _Doc(source, lines)
    top = doc.mapping(data, ())
    if "precisions" in top:
        return _new_format(doc, top, model_id)
    if "models" in top:
        return _old_format(doc, top, model_id)
    raise doc.fail((), "neither 'precisions' (the newer perf.yaml format) nor 'models' (the older one): "
                       "not an AI Hub perf.yaml")


def _new_format(doc: _Doc, top: Mapping, model_id: str) -> tuple[list[AihubMeasurement], list[Skipped]]:
    found, skipped = [], []
    precisions = doc.mapping(top["precisions"], ("precisions",))
    for precision, pdata in precisions.items():
        path = ("precisions", precision)
        components = doc.mapping(doc.get(doc.mapping(pdata, path), "components", path), path + ("components",))
        for component, cdata in components.items():
            cpath = path + ("components", component)
            metrics = doc.mapping(doc.mapping(cdata, cpath).get("performance_metrics", {}),
                                  cpath + ("performance_metrics",))
            for device, runtimes in metrics.items():
                dpath = cpath + ("performance_metrics", str(device))
                doc.name(device, dpath, "a device name")
                job = doc.mapping(runtimes, dpath).get(_NEW_TFLITE)
                if job is None:
                    continue
                jpath = dpath + (_NEW_TFLITE,)
                got = _new_job(doc, doc.mapping(job, jpath), jpath, model_id, component, str(precision), device,
                               len(components) == 1)
                (found if isinstance(got, AihubMeasurement) else skipped).append(got)
    return found, skipped


def _new_job(doc: _Doc, job: Mapping, path: Key, model_id: str, component: str, precision: str, device: str,
             single: bool) -> AihubMeasurement | Skipped:
    status = job.get("job_status", _PASSED)
    if status != _PASSED:
        return Skipped(doc.where(path), model_id, precision, device, f"job_status {status}, no time")
    counts = doc.mapping(doc.get(job, "layer_counts", path), path + ("layer_counts",))
    cpath = path + ("layer_counts",)
    return AihubMeasurement(model_id, component, precision, device,
                            doc.latency_ms(job, "inference_time_milliseconds", path, "ms", 1.0),
                            doc.count(counts, "npu", cpath), doc.count(counts, "gpu", cpath),
                            doc.count(counts, "cpu", cpath), single, doc.where(path))


def _old_format(doc: _Doc, top: Mapping, model_id: str) -> tuple[list[AihubMeasurement], list[Skipped]]:
    found, skipped = [], []
    models = doc.listing(top["models"], ("models",))
    for i, model in enumerate(models):
        mpath = ("models", i)
        model = doc.mapping(model, mpath)
        component = doc.text(model, "name", mpath)
        entries = doc.listing(doc.get(model, "performance_metrics", mpath), mpath + ("performance_metrics",))
        for j, entry in enumerate(entries):
            epath = mpath + ("performance_metrics", j)
            entry = doc.mapping(entry, epath)
            info = doc.mapping(doc.get(entry, "reference_device_info", epath), epath + ("reference_device_info",))
            device = doc.text(info, "name", epath + ("reference_device_info",))
            if _OLD_TFLITE in entry:
                got = _old_job(doc, doc.mapping(entry[_OLD_TFLITE], epath + (_OLD_TFLITE,)), epath + (_OLD_TFLITE,),
                               model_id, component, device, len(models) == 1)
                (found if isinstance(got, AihubMeasurement) else skipped).append(got)
    return found, skipped


def _old_job(doc: _Doc, job: Mapping, path: Key, model_id: str, component: str, device: str,
             single: bool) -> AihubMeasurement | Skipped:
    precision = doc.text(job, "precision", path)
    status = job.get("job_status", _PASSED)
    if status != _PASSED:
        return Skipped(doc.where(path), model_id, precision, device, f"job_status {status}, no time")
    info = doc.mapping(doc.get(job, "layer_info", path), path + ("layer_info",))
    ipath = path + ("layer_info",)
    ms = doc.latency_ms(job, "inference_time", path, "us", 1e3)   # the older format stores microseconds
    return AihubMeasurement(model_id, component, precision, device, ms,
                            doc.count(info, "layers_on_npu", ipath), doc.count(info, "layers_on_gpu", ipath),
                            doc.count(info, "layers_on_cpu", ipath), single, doc.where(path))


# -- a profile job's JSON ------------------------------------------------------------------------------

_UNITS = ("NPU", "GPU", "CPU")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's keys, each once: json keeps the last of two, so the other value would go unread."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {reprlib.repr(key)} given twice")
        out[key] = value
    return out


def read_profile_json(text: str, source: str, model_id: str, device: str) -> AihubMeasurement:
    """A saved ProfileJob.download_profile(): the estimated inference time (microseconds) and the ops per
    compute unit. The file names neither model nor device: the model id is the file's name, the device
    is the one calibrated."""
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise MeasurementError(f"{source}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    except ValueError as exc:   # an integer of more digits than int() converts, a key given twice
        raise MeasurementError(f"{source}: invalid JSON: {exc}") from None
    except RecursionError:      # arrays or objects nested deeper than the decoder recurses
        raise MeasurementError(f"{source}: invalid JSON: nested too deeply") from None
    doc = _Doc(source, {})
    top = doc.mapping(data, ())
    summary = doc.mapping(doc.get(top, "execution_summary", ()), ("execution_summary",))
    ms = doc.latency_ms(summary, "estimated_inference_time", ("execution_summary",), "us", 1e3)
    detail = doc.listing(doc.get(top, "execution_detail", ()), ("execution_detail",))
    counts = dict.fromkeys(_UNITS, 0)
    for i, op in enumerate(detail):
        unit = doc.get(doc.mapping(op, ("execution_detail", i)), "compute_unit", ("execution_detail", i))
        if not isinstance(unit, str) or unit not in counts:   # a list or a mapping is no key of counts
            raise doc.fail(("execution_detail", i, "compute_unit"),
                           f"must be one of {', '.join(_UNITS)}, got {reprlib.repr(unit)}")
        counts[unit] += 1
    return AihubMeasurement(model_id, model_id, "", device, ms, counts["NPU"], counts["GPU"],
                            counts["CPU"], True, source)


# -- rows ---------------------------------------------------------------------------------------------


# Precisions whose model is the float graph itself (older releases named it by the NPU's arithmetic);
# "": a profile job's results, which do not say.
_FLOAT = ("float", "fp16", "fp32", "")


def _candidates(m: AihubMeasurement, folders: Sequence[Path]) -> list[Path]:
    """<id>_<precision>.tflite, and <id>.tflite for a float model (<id>_<component> for a model of several),
    each also xz-compressed (.tflite.xz, as the rebuilt models in sim/profiles/measurements/aihub/ are kept)."""
    stems = ([f"{m.file_stem}_{m.precision}"] if m.precision else []) + \
        ([m.file_stem] if m.precision in _FLOAT else [])
    return [folder / f"{stem}{suffix}" for folder in folders for stem in stems for suffix in (".tflite", ".tflite.xz")]


def _is_file(path: Path) -> bool:
    """Whether `path` is a regular file; a name the file system refuses (a precision or component
    longer than a file name may be) names none."""
    try:
        return path.is_file()
    except OSError:
        return False


def _device_matches(published: str, wanted: str | None) -> bool:
    return wanted is None or wanted in (published, DEVICES.get(published))


def to_rows(measurements: Iterable[AihubMeasurement], folders: Sequence[Path],
            device: str | None = None) -> AihubRows:
    """Rows for the measurements on `device` (AI Hub's name or a prior's), each with the .tflite file found
    for it; a measurement whose file is in none of `folders` is listed as skipped with where it was looked for."""
    rows, skipped = [], []
    for m in measurements:
        if not _device_matches(m.device, device):
            continue
        candidates = _candidates(m, folders)
        found = next((c for c in candidates if _is_file(c)), None)
        if found is None:
            skipped.append(Skipped(m.source, m.model_id, m.precision or "(unstated precision)", m.device,
                                   f"model file not found (looked for {', '.join(map(str, candidates))})"))
            continue
        flags = (f"--{DelegateKind.GPU.flag}=true",) if m.delegate == DelegateKind.QNN.value and m.gpu_layers else ()
        rows.append(Row(str(found), (), "none", DEVICES.get(m.device, m.device), m.delegate, THREADS,
                        m.inference_ms, m.source, flags=flags, family=m.model_id,
                        split=OpSplit(m.npu_layers, m.gpu_layers, m.cpu_layers)))
    return AihubRows(tuple(rows), tuple(skipped))


def _stem(path: Path) -> str:
    """The model id a file names: its name without .json, .tflite or .tflite.xz (--model m.tflite.xz is m)."""
    name = path.name.removesuffix(".xz") if path.name.endswith(".tflite.xz") else path.name
    return Path(name).stem


def read_aihub(path: Path, text: str, device: str | None = None, model: str | None = None) -> AihubRows:
    """An AI Hub file (perf.yaml or a profile job's .json) as rows for `device`: model files are looked for
    beside the file and in the current folder (a profile job's: `model`, else the file's own name)."""
    folders = list(dict.fromkeys([path.parent, Path(".")]))
    if path.suffix.lower() == ".json":
        if not device:
            raise MeasurementError(f"{path}: a profile job's results name no device; give --device")
        model_path = Path(model) if model else None
        measurement = read_profile_json(text, str(path), _stem(model_path or path), device)
        if model_path is not None:
            folders = [model_path.parent]
        return to_rows([measurement], folders, device)
    measurements, failed = read_perf_yaml(text, str(path), model_id_of(path))
    if not measurements and not failed:
        raise MeasurementError(f"{path}: no TFLite job in this perf.yaml (only other runtimes)")
    if not any(_device_matches(m.device, device) for m in [*measurements, *failed]):
        devices = sorted({m.device for m in [*measurements, *failed]})
        raise MeasurementError(f"{path}: no TFLite measurement on {device}; the file has "
                               f"{', '.join(devices)}")
    result = to_rows(measurements, folders, device)
    return AihubRows(result.rows, tuple(s for s in failed if _device_matches(s.device, device)) + result.skipped)
