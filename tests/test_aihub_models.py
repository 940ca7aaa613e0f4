"""The rebuilt AI Hub models (sim/profiles/measurements/aihub/): each file in the manifest is what models.tsv says.

Kept cheap: each file is decompressed through the loader's own xz reader and only its flatbuffer's
tables are read (op codes, tensor types, the weights' bytes), no kernel runs; the smallest models
are also read whole into a Graph through the loader.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import tflite

from runtime.model.loader import ModelSource, load_model
from runtime.model.tflite_read import builtin_code, model_bytes

FOLDER = Path(__file__).resolve().parent.parent / "sim" / "profiles" / "measurements" / "aihub"
MANIFEST = FOLDER / "models.tsv"
COLUMNS = ["model_id", "component", "precision", "file", "ops", "aihub_total_layers", "aihub_release", "match",
           "why"]
_OPS = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
_TYPES = {v: k for k, v in vars(tflite.TensorType).items() if not k.startswith("_")}
_WEIGHTED = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"}


def _rows() -> list[dict[str, str]]:
    with MANIFEST.open(newline="") as f:
        reader = csv.DictReader(f, delimiter="\t")
        assert reader.fieldnames == COLUMNS
        return list(reader)


ROWS = _rows()


def test_the_manifest_lists_every_file_in_the_folder_once():
    files = [r["file"] for r in ROWS]
    assert len(files) == len(set(files)) and files
    assert sorted(files) == sorted(p.name for p in FOLDER.glob("*.tflite.xz"))
    for r in ROWS:   # a model of several components (MediaPipe's) names its file by component too
        named = (f"{r['model_id']}_{r['precision']}.tflite.xz", f"{r['model_id']}_{r['component']}_{r['precision']}.tflite.xz")
        assert r["file"] in named and r["precision"] in ("float", "w8a8")


def test_the_match_column_says_what_the_counts_say():
    for r in ROWS:
        if not r["aihub_total_layers"]:
            assert r["match"] == "not published"
            continue
        diff = int(r["ops"]) - int(r["aihub_total_layers"])
        assert r["match"] == ("yes" if diff == 0 else f"no ({diff:+d})"), r["file"]
        assert diff == 0 or r["why"], f"{r['file']}: a count that differs needs its reason"


def _op_name(model, op) -> str:
    return _OPS[builtin_code(model.OperatorCodes(op.OpcodeIndex()))]


def _summary(buf: bytes) -> tuple[list[str], list[str], list[str]]:
    """Op names, input/output types, and the weight types of the weighted ops, from the flatbuffer's tables."""
    model = tflite.Model.GetRootAs(buf, 0)
    graph = model.Subgraphs(0)
    ops = [graph.Operators(i) for i in range(graph.OperatorsLength())]
    names = [_op_name(model, op) for op in ops]
    inputs = [_TYPES[graph.Tensors(t).Type()] for t in graph.InputsAsNumpy()]
    outputs = [_TYPES[graph.Tensors(t).Type()] for t in graph.OutputsAsNumpy()]
    weights = [_TYPES[graph.Tensors(op.Inputs(1)).Type()] for op, name in zip(ops, names) if name in _WEIGHTED]
    return names, (inputs, outputs), weights


def _stored(buf: bytes, buffer) -> np.ndarray:
    """A buffer's bytes: inline, or after the flatbuffer at `offset` (as ai-edge-quantizer writes them)."""
    if buffer.Offset() > 1:
        return np.frombuffer(buf, np.uint8, buffer.Size(), buffer.Offset())
    data = buffer.DataAsNumpy()
    return data if isinstance(data, np.ndarray) else np.zeros(0, np.uint8)


def _weights_zeroed(buf: bytes) -> bool:
    model = tflite.Model.GetRootAs(buf, 0)
    graph = model.Subgraphs(0)
    ops = [graph.Operators(i) for i in range(graph.OperatorsLength())]
    weights = [graph.Tensors(op.Inputs(1)) for op in ops if _op_name(model, op) in _WEIGHTED]
    data = [_stored(buf, model.Buffers(w.Buffer())) for w in weights]
    return all(d.size and not d.any() for d in data)


@pytest.mark.parametrize("row", ROWS, ids=[r["file"] for r in ROWS])
def test_each_file_has_the_manifests_op_count_float_io_and_zeroed_weights(row):
    buf = model_bytes(FOLDER / row["file"])      # the loader's own xz reader; a big file takes a second or two
    names, (inputs, outputs), weights = _summary(buf)
    assert len(names) == int(row["ops"])
    # AI Hub's files take float32 and give float32, w8a8 too; a segmentation model may give its uint8 class mask.
    assert set(inputs) == {"FLOAT32"} and set(outputs) in ({"FLOAT32"}, {"UINT8"})
    assert weights and set(weights) == {"INT8" if row["precision"] == "w8a8" else "FLOAT32"}
    if row["precision"] == "w8a8":
        assert names[0] == "QUANTIZE" and (names[-1] == "DEQUANTIZE" or outputs == ["UINT8"])
    assert _weights_zeroed(buf)


# Building a Graph of a large model takes seconds: the smallest models stand for the rest.
WHOLE = [r for r in ROWS if r["model_id"] in ("resnet18", "squeezenet1_1", "quicksrnetsmall")]


@pytest.mark.parametrize("row", WHOLE, ids=[r["file"] for r in WHOLE])
def test_a_small_file_loads_whole_with_its_weights_zeroed(row):
    graph = load_model(ModelSource(path=FOLDER / row["file"]))
    assert len(graph.ops) == int(row["ops"])
    weighted = [op for op in graph.ops if op.type.name in _WEIGHTED]
    assert weighted
    for op in weighted:
        weight = graph.tensors[op.inputs[1]]
        assert weight.data is not None and weight.data.size and not weight.data.any()   # zeroed, still stored


def test_the_w8a8_mobilenet_v2_keeps_each_relu6_as_its_own_op_after_its_convolution():
    # AI Hub's w8a8 MobileNet v2 has 108 ops: the 35 ReLU6 are not fused (the fixture's split_relu6);
    # loading it whole also checks the repacked flatbuffer and its relocated weight buffers
    graph = load_model(ModelSource(path=FOLDER / "mobilenet_v2_w8a8.tflite.xz"))
    producer = {t: op for op in graph.ops for t in op.outputs}
    relu6 = [op for op in graph.ops if op.type.name == "RELU6"]
    assert len(graph.ops) == 108 and len(relu6) == 35
    for op in relu6:
        conv = producer[op.inputs[0]]
        assert conv.type.name in ("CONV_2D", "DEPTHWISE_CONV_2D")
        assert conv.options.fused_activation_function.name == "NONE"
        assert graph.tensors[op.inputs[0]].dtype == graph.tensors[op.outputs[0]].dtype


@pytest.mark.parametrize("name", ["quicksrnetsmall_w8a8.tflite.xz", "xlsr_w8a8.tflite.xz"])
def test_the_w8a8_super_resolution_files_clip_in_int8(name):
    # AI Hub's w8a8 files run Hardtanh(0, 1) in int8 (the fixture's int8_clips); ai-edge-quantizer alone
    # would leave each clip in float32 between a DEQUANTIZE and a QUANTIZE
    graph = load_model(ModelSource(path=FOLDER / name))
    clips = [op for op in graph.ops if op.type.name == "RELU_0_TO_1"]
    assert clips
    for op in clips:
        assert graph.tensors[op.inputs[0]].dtype.name == graph.tensors[op.outputs[0]].dtype.name == "INT8"
    assert [op.type.name for op in graph.ops].count("DEQUANTIZE") == 1
