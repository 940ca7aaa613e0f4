"""Converter-made models whose shapes are computed at run time: SHAPE -> STRIDED_SLICE -> PACK, as
Keras' Conv2DTranspose and Reshape emit them when they read the batch size (tests/shape_chains.py
grafts the chain onto the converter-made fixtures). They run on the reference kernels, match
LiteRT, and their int32 shape ops cost on any unit a delegate hands them to."""

from __future__ import annotations

import numpy as np
import pytest

from delegates.registry import make_delegate
from runtime.cli import main as cli
from runtime.interpreter.api import Interpreter
from runtime.ir.optypes import OpType
from runtime.model.tflite_read import load
from runtime.model.tflite_write import save
from runtime.zoo.quantize import quantize
from tests.conftest import FIXTURES
from tests.litert_oracle import available, run_litert
from sim.profile import load_profile
from sim.trace import Kind
from tests.shape_chains import runtime_se_reshapes, runtime_transpose_conv_shapes

QUANT = FIXTURES / "quant"
needs_litert = pytest.mark.skipif(not available(), reason="LiteRT (ai-edge-litert) is not installed")


def _feeds(it: Interpreter, seed: int) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for d in it.get_input_details():
        shape, dtype = tuple(d["shape"]), np.dtype(d["dtype"])
        if dtype == np.int8:
            feeds[d["index"]] = rng.integers(-128, 128, shape).astype(dtype)
        else:
            feeds[d["index"]] = rng.standard_normal(shape).astype(dtype)
    return feeds


def _ours(path, feeds) -> dict[int, np.ndarray]:
    it = Interpreter(model_path=path)
    it.allocate_tensors()
    for i, v in feeds.items():
        it.set_tensor(i, v)
    it.invoke()
    return {d["index"]: it.get_tensor(d["index"]) for d in it.get_output_details()}


def _runtime_unet(tmp_path, source: str):
    graph = load(FIXTURES / source)
    if "_int8" not in source:
        graph = quantize(graph, "dynamic_range")
    graph = runtime_transpose_conv_shapes(graph)
    conv = next(op for op in graph.ops if op.type is OpType.TRANSPOSE_CONV)
    producer = graph.producers()[conv.inputs[0]]
    assert graph.ops[producer].type is OpType.PACK and not graph.tensors[conv.inputs[0]].is_constant
    path = tmp_path / "unet_runtime_shape.tflite"
    save(graph, path)
    return path


@needs_litert
def test_int8_unet_with_run_time_transpose_conv_shape_is_bit_exact_with_litert(tmp_path):
    path = _runtime_unet(tmp_path, "quant/unet_style_int8.tflite")
    for seed in range(2):
        feeds = _feeds(Interpreter(model_path=path), seed)
        want = run_litert([(str(path), feeds)], resolvers=("BUILTIN_REF",))[0]
        assert not isinstance(want, str), want
        for index, got in _ours(path, feeds).items():
            ref = want[f"0:{index}"]
            assert got.dtype == ref.dtype == np.int8
            np.testing.assert_array_equal(got, ref)


@needs_litert
def test_dynamic_range_unet_with_run_time_transpose_conv_shape_matches_litert(tmp_path):
    # The hybrid TRANSPOSE_CONV must be chosen by its data input too, not by the int32 shape in
    # front of it (the float kernel would read the int8 weights as values).
    path = _runtime_unet(tmp_path, "models/unet_style.tflite")
    feeds = _feeds(Interpreter(model_path=path), 0)
    want = run_litert([(str(path), feeds)], resolvers=("BUILTIN_REF",))[0]
    assert not isinstance(want, str), want
    for index, got in _ours(path, feeds).items():
        ref = want[f"0:{index}"]
        span = float(ref.max() - ref.min())
        # the float parity tolerance of tests/test_litert_parity.py: 1e-5 of the output range
        assert float(np.abs(got - ref).max()) <= 1e-5 * span


# -- cost of the int32 shape ops on a unit -----------------------------------------------------------

def _se_efficientnet(tmp_path):
    """EfficientNet-style int8 model whose squeeze-and-excitation reshapes read the batch at run time."""
    graph = runtime_se_reshapes(load(QUANT / "efficientnet_style_int8.tflite"))
    path = tmp_path / "efficientnet_se_runtime_reshape.tflite"
    save(graph, path)
    return path


def _op_intervals(path, device: str, kind: str, **options):
    profile = load_profile(device)
    it = Interpreter(model_path=path, experimental_delegates=[make_delegate(kind, profile, **options)],
                     device=profile, timing_only=True)
    it.allocate_tensors()
    it.invoke()
    return [iv for iv in it.simulation.soc.trace.intervals if iv.kind is Kind.OP]


@pytest.mark.parametrize("device", ["pixel4", "pixel3"])
def test_int32_shape_ops_on_the_nnapi_dsp_cost_without_a_float_rate(tmp_path, device):
    ops = _op_intervals(_se_efficientnet(tmp_path), device, "nnapi", max_number_delegated_partitions=0)
    slices = [iv for iv in ops if iv.name == "STRIDED_SLICE"]
    assert slices and {iv.lane for iv in slices} == {"dsp"}
    # data movement on the DSP's integer path: no float rate needed, and no arithmetic charged
    assert {dict(iv.args)["precision"] for iv in slices} == {"int8"}
    assert all(dict(iv.args)["macs"] == 0 for iv in slices)


def test_int32_shape_ops_keep_float32_costs_on_units_that_have_it(tmp_path):
    # On the CPU (and any unit with a float32 rate) int32 -> int32 ops cost what they always did.
    ops = _op_intervals(_se_efficientnet(tmp_path), "pixel4", "gpu")
    shape_ops = [iv for iv in ops if iv.name in ("STRIDED_SLICE", "PACK")]
    assert shape_ops and {dict(iv.args)["precision"] for iv in shape_ops} == {"float32"}


@pytest.mark.parametrize("argv", [
    ["benchmark", "--device", "pixel4", "--use_nnapi", "--num_runs", "2"],
    ["benchmark", "--device", "pixel3", "--use_nnapi", "--num_runs", "2"],
    ["inference-diff", "--device", "pixel4", "--delegate", "nnapi", "--num_runs", "2"],
], ids=["benchmark-pixel4", "benchmark-pixel3", "inference-diff"])
def test_cli_runs_the_runtime_reshape_model_on_nnapi(tmp_path, argv, capsys):
    path = _se_efficientnet(tmp_path)
    assert cli.main([argv[0], "--graph", str(path), *argv[1:]]) == 0, capsys.readouterr().err
