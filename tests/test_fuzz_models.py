"""Damaged .tflite files: a bounded fuzz run (tests/fuzz_models.py), and every crash it found, fixed.

Each case may end in a run or in one ModelError line naming the file and what is wrong in it;
never another exception, a hang, or an allocation above the memory limit."""

from __future__ import annotations

import dataclasses
import json
import random
import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.model import tflite_read as tflite_io
from runtime.ir.errors import ModelError
from runtime.ir.graph import DType, Tensor
from runtime.interpreter.api import Interpreter
from runtime.ir.options import Pool2DOptions
from runtime.model.tflite_write import dumps
from runtime.cli import main as cli
from delegates.registry import make_delegate
from sim.profile import load_profile
from tests import fuzz_models as fm

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = fm.corpus()


@pytest.fixture(scope="module")
def traced():
    tracemalloc.start()
    yield
    tracemalloc.stop()


# -- the bounded run (HYPOTHESIS_PROFILE=nightly for many more; python -m tests.fuzz_models for 10,000) --


@settings(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(rng=st.randoms(use_true_random=False))
def test_mutated_models_run_or_fail_with_one_line(rng, tmp_path_factory, traced):
    source, data, steps = fm.make_case(rng, CORPUS)
    path = str(tmp_path_factory.mktemp("fuzz") / "damaged.tflite")
    out = fm.run_case(data, path, source.name, steps, rng, source=source)
    assert out.ok, f"{source.relative_to(FIXTURES)} after {steps}: {out.failures}"
    raised = [m for m in out.late if "a kernel raised" in m]
    assert not raised, f"{source.relative_to(FIXTURES)} after {steps}: a kernel saw it first: {raised}"


def test_dtb_process_on_damaged_files_prints_one_line(tmp_path):
    """The real command (not main() in this process): exit 1, one line naming the file, no traceback."""
    source = (FIXTURES / "ops" / "conv_2d__same_s1.tflite").read_bytes()
    shape = next(s for s in fm._Layout(source).sites if s.what == "tensor #0.shape[1]")
    cases = {"truncated": source[:len(source) // 2], "negative": _poke(source, shape.pos, -7),
             "strides": _graph_edit(source, lambda g: _with_options(g, 0, stride_h=0))}
    for name, data in cases.items():
        path = tmp_path / f"{name}.tflite"
        path.write_bytes(data)
        proc = subprocess.run([sys.executable, "-m", "runtime.cli.main", "benchmark", "--graph", str(path),
                               "--num_runs", "1"], capture_output=True, text=True, timeout=120)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, (name, proc.stderr)
        assert len(lines) == 1 and str(path) in lines[0], (name, proc.stderr)


def test_the_long_run_machinery_runs_cases_in_workers(tmp_path):
    """Every case is recorded, across chunks and workers (a worker's last lines too); the workers take
    the corpus the run hands them (here a few single-op fixtures) rather than reading every fixture."""
    few = [p for p in CORPUS if p.parent.name == "ops"][:12]
    summary = fm.long_run(5, 0, 2, tmp_path, fm.LIMIT_MB, cli=False, measure=True, subprocess_every=0, chunk=2,
                          paths=few)
    assert summary["cases"] == 5 and summary["failures"] == 0
    cases = [json.loads(line) for line in (tmp_path / "cases.jsonl").read_text().splitlines()]
    assert len(cases) == 5 and {FIXTURES / c["source"] for c in cases} <= set(few)


# -- helpers ------------------------------------------------------------------------------------


def _poke(data: bytes, pos: int, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into("<i", out, pos, value)
    return bytes(out)


def _graph_edit(data: bytes, edit) -> bytes:
    return dumps(edit(tflite_io.loads(data)))


def _with_options(graph, i: int, **changes):
    ops = list(graph.ops)
    ops[i] = dataclasses.replace(ops[i], options=dataclasses.replace(ops[i].options, **changes))
    return dataclasses.replace(graph, ops=tuple(ops))


def _with_op(graph, i: int, **changes):
    ops = list(graph.ops)
    ops[i] = dataclasses.replace(ops[i], **changes)
    return dataclasses.replace(graph, ops=tuple(ops))


def _with_tensor(graph, t: int, **changes):
    tensors = list(graph.tensors)
    x = tensors[t]
    fields = {"name": x.name, "shape": x.shape, "dtype": x.dtype, "quant": x.quant, "data": x.data,
              "shape_signature": x.shape_signature, "is_variable": x.is_variable, **changes}
    tensors[t] = Tensor(**fields)
    return dataclasses.replace(graph, tensors=tuple(tensors))


def _rejected(tmp_path, data: bytes, *patterns: str, name: str = "damaged.tflite", **kw) -> str:
    """The file is refused with one ModelError line naming the file and each pattern."""
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(ModelError) as info:
        it = Interpreter(model_path=str(path), **kw)
        it.allocate_tensors()
        it.invoke()
    text = str(info.value)
    assert "\n" not in text and text.startswith(str(path)), text
    for pattern in patterns:
        assert pattern in text, text
    assert info.value.__cause__ is None or isinstance(info.value.__cause__, ModelError), \
        f"a kernel raised first: {info.value.__cause__!r}"
    return text


def _fixture(*parts: str) -> bytes:
    return FIXTURES.joinpath(*parts).read_bytes()


# -- regressions: each a crash the issue reports or the fuzzer found, now one clear line ----------


@pytest.mark.parametrize("field, value, pattern", [
    ("stride_h", 0, "options.stride_h is 0, must be >= 1"),
    ("stride_w", -3, "options.stride_w is -3, must be >= 1"),
    ("dilation_h_factor", 0, "options.dilation_h_factor is 0, must be >= 1"),
])
def test_zero_and_negative_strides(tmp_path, field, value, pattern):
    data = _graph_edit(_fixture("ops", "conv_2d__same_s1.tflite"), lambda g: _with_options(g, 0, **{field: value}))
    _rejected(tmp_path, data, "op #0 CONV_2D", pattern)


@pytest.mark.parametrize("field, value, pattern", [
    ("filter_height", 0, "options.filter_height is 0"),
    ("filter_width", 2**31 - 1, "filter width 2147483647 exceeds the input width"),
])
def test_pool_filters_outside_the_input(tmp_path, field, value, pattern):
    data = _graph_edit(_fixture("ops", "max_pool_2d__valid_2x2_s2_odd.tflite"),
                       lambda g: _with_options(g, 0, **{field: value}))
    _rejected(tmp_path, data, "op #0 MAX_POOL_2D", pattern)


def test_a_huge_same_pool_window_costs_no_more_than_the_image(tmp_path):
    """SAME padding lets a window be larger than the image (TFLite clips it): the kernel reads
    only the taps that reach the image, so a window of 2**31 - 1 neither allocates nor loops."""
    data = _graph_edit(_fixture("ops", "max_pool_2d__same_3x3_s2.tflite"),
                       lambda g: _with_options(g, 0, filter_height=2**31 - 1, filter_width=2**20))
    path = tmp_path / "window.tflite"
    path.write_bytes(data)
    ref = Interpreter(model_path=str(FIXTURES / "ops" / "max_pool_2d__same_3x3_s2.tflite"))
    it = Interpreter(model_path=str(path), memory_limit=64 << 20)
    for x in (ref, it):
        x.allocate_tensors()
        inp = x.get_input_details()[0]
        x.set_tensor(inp["index"], np.random.default_rng(0).standard_normal(inp["shape"]).astype(np.float32))
        x.invoke()
    out = it.get_tensor(it.get_output_details()[0]["index"])
    # Every window covers the whole image: each output is the image's max per channel.
    x = ref.get_tensor(ref.get_input_details()[0]["index"])
    np.testing.assert_array_equal(out, np.broadcast_to(x.max(axis=(1, 2), keepdims=True), out.shape))


def test_reshape_carrying_pool_options(tmp_path):
    """Was: AttributeError: 'Pool2DOptions' object has no attribute 'new_shape'."""
    data = _graph_edit(_fixture("ops", "reshape__flatten.tflite"), lambda g: _with_op(g, 0, options=Pool2DOptions()))
    _rejected(tmp_path, data, "op #0 RESHAPE: builtin options are Pool2DOptions, ReshapeOptions expected")


def test_options_table_of_another_type_in_the_file(tmp_path):
    """The same written by a byte edit: the op's builtin_options_type names another table."""
    from tflite.BuiltinOptions import BuiltinOptions

    data = bytearray(_fixture("ops", "softmax__2d.tflite"))
    site = next(s for s in fm._Layout(bytes(data)).sites if s.what == "op #0.builtin_options_type")
    data[site.pos] = BuiltinOptions.Pool2DOptions
    _rejected(tmp_path, bytes(data), "op #0 SOFTMAX: builtin options are Pool2DOptions, SoftmaxOptions expected")


def test_missing_quantization_on_an_int8_op(tmp_path):
    """Was: AttributeError: 'NoneType' object has no attribute 'zero_point'."""
    data = _graph_edit(_fixture("quant", "op_conv_2d__same_s1_int8.tflite"),
                       lambda g: _with_tensor(g, g.ops[[o.type.name for o in g.ops].index("CONV_2D")].inputs[1],
                                              quant=None))
    _rejected(tmp_path, data, "CONV_2D", "weights without quantization parameters")


@pytest.mark.parametrize("scale, pattern", [(0.0, "quantization scale 0;"), (-1.0, "quantization scale -1;")])
def test_zero_or_negative_activation_scale(tmp_path, scale, pattern):
    def edit(g):
        t = g.ops[0].outputs[0]
        return _with_tensor(g, t, quant=dataclasses.replace(g.tensors[t].quant, scale=(scale,)))

    _rejected(tmp_path, _graph_edit(_fixture("quant", "op_relu__4d_int8.tflite"), edit), pattern)


def test_hybrid_weights_without_scales_are_refused_when_read(tmp_path):
    """Found by the fuzzer: the hybrid kernel refused it only when it ran (and the GPU delegate's
    copy of it then failed in a delegate kernel)."""
    def edit(g):
        op = next(o for o in g.ops if o.type.name == "CONV_2D" and g.tensors[o.inputs[1]].dtype.name == "INT8")
        return _with_tensor(g, op.inputs[1], quant=None)

    path = tmp_path / "hybrid.tflite"
    path.write_bytes(_graph_edit(_fixture("quant", "mobilenet_v1_dynamic.tflite"), edit))
    with pytest.raises(ModelError, match=r"hybrid.tflite: op #\d+ CONV_2D: int8 weights '.*' carry no quantization "
                                         r"scale"):
        tflite_io.load(path)


def test_output_types_are_the_kernels(tmp_path):
    """Found by the fuzzer: an int8 MEAN whose input was retyped uint8 was refused only after the
    kernel ran, and without the file's name."""
    data = bytearray(_fixture("quant", "op_mean__channels_int8.tflite"))
    site = next(s for s in fm._Layout(bytes(data)).sites if s.what == "tensor #0.type")
    data[site.pos] = 3  # UINT8
    _rejected(tmp_path, bytes(data), "op #0 MEAN: output tensor #", "is INT8, but the kernel produces UINT8")


def test_float_kernels_refuse_integer_data(tmp_path):
    from runtime.ir.graph import DType, Graph, Op, OpType

    x, y = Tensor("x", (2, 3), DType.INT32), Tensor("y", (2, 3), DType.INT32)
    path = tmp_path / "exp.tflite"
    from runtime.model.tflite_write import save

    save(Graph((x, y), (Op(OpType.EXP, (0,), (1,)),), (0,), (1,)), path)
    with pytest.raises(ModelError, match=r"exp.tflite: op #0 EXP: input tensor #0 'x' is INT32; the float kernel takes "
                                         r"FLOAT32"):
        tflite_io.load(path)


def test_quantized_softmax_beta(tmp_path):
    """Found by the fuzzer: a negative beta was a ValueError (negative shift count) in the kernel."""
    data = _graph_edit(_fixture("quant", "op_softmax__2d_int8.tflite"),
                       lambda g: _with_options(g, next(i for i, o in enumerate(g.ops) if o.type.name == "SOFTMAX"),
                                               beta=-1e-8))
    _rejected(tmp_path, data, "SOFTMAX: options.beta is -1e-08; the 8-bit kernel needs a positive finite beta")
    data = _graph_edit(_fixture("quant", "op_softmax__2d_int8.tflite"),
                       lambda g: _with_options(g, next(i for i, o in enumerate(g.ops) if o.type.name == "SOFTMAX"),
                                               beta=float("nan")))
    _rejected(tmp_path, data, "SOFTMAX: options.beta is nan")


def test_denormal_activation_scale(tmp_path):
    """Found by the fuzzer: a scale of 1e-45 made a fused RELU6's bound infinite (OverflowError)."""
    def edit(g):
        i = next(i for i, o in enumerate(g.ops) if o.type.name == "CONV_2D")
        t = g.ops[i].outputs[0]
        return _with_tensor(g, t, quant=dataclasses.replace(g.tensors[t].quant, scale=(1e-45,)))

    _rejected(tmp_path, _graph_edit(_fixture("quant", "op_conv_2d__same_s2_relu6_int8.tflite"), edit),
              "has quantization scale 1.401298e-45; the 8-bit kernel needs a positive scale in [2**-100, 2**100]")


def test_scalar_tensors_through_the_gpu_delegate(tmp_path):
    """Found by the fuzzer's long run: a valid model computing on scalars (ADD of two scalar
    constants, then LOG) came back from the GPU delegate as shape [1]: its float16 rounding made
    every scalar a one-element vector, which the executor refused as a delegate error."""
    from delegates.registry import make_delegate
    from sim.profile import load_profile

    g = tflite_io.load(FIXTURES / "ops" / "log__abs_plus1.tflite")
    scalar = g.ops[1].inputs[1]
    g = tflite_io.loads(dumps(fm._rederive(_with_op(g, 1, inputs=(scalar, scalar)))))
    assert g.tensors[g.outputs[0]].shape == ()
    phone = load_profile("pixel4")
    it = Interpreter(graph=g, device=phone, experimental_delegates=[make_delegate("gpu", phone)])
    it.allocate_tensors()
    it.set_tensor(g.inputs[0], np.ones(g.tensors[g.inputs[0]].shape, np.float32))
    it.invoke()
    assert it.get_tensor(g.outputs[0]).shape == ()


def test_squared_difference_of_two_scalars(tmp_path):
    """Found by the long run: two scalar inputs made the float kernel's in-place square a TypeError."""
    g = tflite_io.load(FIXTURES / "ops" / "squared_difference__4d_scalar.tflite")
    scalar = next(t for t in g.ops[0].inputs if not g.tensors[t].shape)
    g = tflite_io.loads(dumps(fm._rederive(_with_op(g, 0, inputs=(scalar, scalar)))))
    it = Interpreter(graph=g)
    it.allocate_tensors()
    it.invoke()
    assert it.get_tensor(g.outputs[0]).shape == () and it.get_tensor(g.outputs[0]) == 0


def test_a_constant_graph_input(tmp_path):
    """Found by the long run: a subgraph input list moved onto a RESIZE's constant size; the checks
    read the constant, the run the input fed in its place."""
    data = bytearray(_fixture("ops", "resize_bilinear__up_half_pixel.tflite"))
    site = next(s for s in fm._Layout(bytes(data)).sites if s.what == "subgraph.inputs[0]")
    size = next(t for t, x in enumerate(tflite_io.loads(bytes(data)).tensors) if x.is_constant)
    struct.pack_into("<i", data, site.pos, size)
    _rejected(tmp_path, bytes(data), f"graph input tensor #{size}", "is a constant (it has a data buffer)")


def test_binary_ops_take_one_type(tmp_path):
    """Found by the long run: MINIMUM of float32 and int32 came out float64, refused only after the
    kernel ran."""
    from runtime.ir.graph import DType, Graph, Op, OpType
    from runtime.model.tflite_write import save

    x, k, y = (Tensor("x", (2, 3), DType.FLOAT32), Tensor("k", (3,), DType.INT32, data=np.arange(3, dtype=np.int32)),
               Tensor("y", (2, 3), DType.FLOAT32))
    path = tmp_path / "minimum.tflite"
    save(Graph((x, k, y), (Op(OpType.MINIMUM, (0, 1), (2,)),), (0,), (2,)), path)
    with pytest.raises(ModelError, match=r"minimum.tflite: op #0 MINIMUM: input types differ: input tensor #0 'x' is "
                                         r"FLOAT32, input tensor #1 'k' is INT32"):
        tflite_io.load(path)


def test_op_code_versions_start_at_one(tmp_path):
    """Found by the long run: version -1 let the GPU delegate claim a dynamic-range FULLY_CONNECTED
    that the simulated GPU cannot time."""
    data = bytearray(_fixture("quant", "dense_dynamic.tflite"))
    site = next(s for s in fm._Layout(bytes(data)).sites if s.what == "opcode #0.version")
    struct.pack_into("<i", data, site.pos, -1)
    _rejected(tmp_path, bytes(data), "operator code #0 has version -1; versions start at 1")


def test_zero_point_outside_its_type(tmp_path):
    """Found by the fuzzer: a zero point of 2**31 was an OverflowError in get_output_details()."""
    data = bytearray(_fixture("quant", "op_relu__4d_int8.tflite"))
    site = next(s for s in fm._Layout(bytes(data)).sites if s.role == "zero-point")
    struct.pack_into("<q", data, site.pos, 2**31)
    _rejected(tmp_path, bytes(data), "has zero point 2147483648, outside [-128, 127] for INT8")


@pytest.mark.parametrize("fixture", ["op_conv_2d__same_s1_int8.tflite", "op_conv_2d__same_s1_per_tensor_int8.tflite"])
def test_int8_conv_filter_with_a_nonzero_zero_point(tmp_path, fixture):
    """Was run, its zero point ignored: LiteRT's conv.cc refuses it ('zero_point->data[i] != 0')."""
    def edit(g):
        w = g.ops[[o.type.name for o in g.ops].index("CONV_2D")].inputs[1]
        return _with_tensor(g, w, quant=dataclasses.replace(g.tensors[w].quant,
                                                            zero_point=(3,) * len(g.tensors[w].quant.scale)))

    _rejected(tmp_path, _graph_edit(_fixture("quant", fixture), edit), "CONV_2D: input tensor #",
              "has zero point 3; the kernel takes INT8 weights with zero point 0")


@pytest.mark.parametrize("shape, pattern", [
    ((1, -4, 4, 2), "dimensions must be >= 0"),
    ((1,) * 40, "rank 40"),
])
def test_negative_dimensions_and_absurd_ranks(tmp_path, shape, pattern):
    """Was: ValueError: negative dimensions are not allowed (from np.zeros, a traceback)."""
    data = bytearray(_fixture("ops", "relu__4d.tflite"))
    layout = fm._Layout(bytes(data))
    if len(shape) == 4:
        dims = [s for s in layout.sites if s.what.startswith("tensor #0.shape[")]
        for site, d in zip(dims, shape):
            struct.pack_into("<i", data, site.pos, d)
        _rejected(tmp_path, bytes(data), "tensor #0", pattern)
    else:
        g = tflite_io.loads(bytes(data))
        raw = dumps(g)
        # a 40-dimensional shape can only be written: the writer takes any tuple
        g2 = _with_tensor(g, 0, shape=shape)
        _rejected(tmp_path, dumps(g2), "tensor #0", pattern)
        assert raw


def test_gigabyte_shapes_are_refused_before_allocating(tmp_path):
    """Was: 20 files tried to allocate up to 198 GiB. Now the plan's bytes are computed first."""
    def edit(g):
        g = _with_tensor(g, 0, shape=(1, 200_000, 200_000, 3))
        return _with_tensor(g, 1, shape=(1, 200_000, 200_000, 3))

    data = _graph_edit(_fixture("ops", "relu__4d.tflite"), edit)
    tracemalloc.start()
    try:
        text = _rejected(tmp_path, data, "above the memory limit", "the largest part is tensor #",
                         memory_limit=1 << 30)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "GiB" in text and peak < 64 << 20


def test_memory_limit_names_figure_and_dominant_tensor(tmp_path):
    path = FIXTURES / "models" / "mobilenet_v1.tflite"
    with pytest.raises(ModelError, match=r"mobilenet_v1.tflite: the model needs [\d.]+ MiB \(activations .*\), "
                                         r"above the memory limit of 1.0 MiB; the largest part is "):
        Interpreter(model_path=str(path), memory_limit=1 << 20)
    Interpreter(model_path=str(path), memory_limit=256 << 20).allocate_tensors()


def test_memory_limit_covers_delegate_buffers(tmp_path):
    from delegates.registry import make_delegate
    from sim.profile import load_profile

    phone = load_profile("pixel4")
    path = str(FIXTURES / "models" / "mobilenet_v1.tflite")
    plain = Interpreter(model_path=path)
    limit = plain._need.total + 1024  # enough for the CPU plan, not for a GPU's copies besides
    Interpreter(model_path=path, memory_limit=limit, device=phone)
    with pytest.raises(ModelError, match="the model with its delegates needs .* delegate buffers"):
        Interpreter(model_path=path, memory_limit=limit, device=phone,
                    experimental_delegates=[make_delegate("gpu", phone)])


def test_default_limit_is_half_of_memory_or_the_environment(monkeypatch):
    from runtime.limits import memory

    monkeypatch.delenv(memory.ENV_VAR, raising=False)
    total = memory.physical_memory()
    assert memory.default_limit() == (total // 2 if total else 4 << 30)
    monkeypatch.setenv(memory.ENV_VAR, "12.5")
    assert memory.default_limit() == int(12.5 * 2**20)
    with memory.limit_scope(3 << 20):
        assert memory.default_limit() == 3 << 20
    with pytest.raises(ValueError):
        Interpreter(model_path=str(FIXTURES / "ops" / "relu__4d.tflite"), memory_limit=-1)


def test_cli_memory_flag(tmp_path, capsys):
    from runtime.cli.main import main

    path = str(FIXTURES / "models" / "mobilenet_v1.tflite")
    for command in (["benchmark", "--num_runs", "1"], ["infer"], ["inference-diff", "--num_runs", "1"]):
        assert main([*command, "--graph", path, "--memory_limit_mb", "1"]) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"{path}: the model needs" in err and "above the memory limit of 1.0 MiB" in err
    assert main(["benchmark", "--graph", path, "--num_runs", "1", "--memory_limit_mb", "200"]) == 0


@pytest.mark.parametrize("op_fixture, field, value, pattern", [
    # Was: ZeroDivisionError (the kernels divide by these).
    ("depth_to_space__b2.tflite", "block_size", 0, "options.block_size is 0, must be >= 1"),
    ("space_to_depth__b2.tflite", "block_size", 0, "options.block_size is 0, must be >= 1"),
    ("split__axis_neg1.tflite", "num_splits", 0, "options.num_splits is 0, must be >= 1"),
    ("gather__axis0.tflite", "axis", 7, "options.axis 7 is out of range"),
    ("concatenation__axis1.tflite", "axis", -9, "options.axis -9 is out of range"),
    ("unpack__axis1.tflite", "num", 9, "options.num is 9"),
    ("pack__axis1.tflite", "values_count", 0, "options.values_count is 0"),
    ("fully_connected__2d_bias.tflite", "weights_format", 1, "options.weights_format is 1"),
])
def test_option_values_the_kernels_divide_or_index_by(tmp_path, op_fixture, field, value, pattern):
    data = _graph_edit(_fixture("ops", op_fixture), lambda g: _with_options(g, len(g.ops) - 1, **{field: value}))
    _rejected(tmp_path, data, pattern)


def test_buffer_index_past_the_end(tmp_path):
    """LiteRT refuses it; it was read as 'no data'."""
    data = bytearray(_fixture("ops", "conv_2d__same_s1.tflite"))
    layout = fm._Layout(bytes(data))
    site = next(s for s in layout.sites if s.role == "buffer-index")
    struct.pack_into("<I", data, site.pos, layout.buffers + 2)
    _rejected(tmp_path, bytes(data), f"refers to buffer {layout.buffers + 2}, but the model has {layout.buffers} buffers")


def test_absent_input_is_not_read_as_the_last_tensor(tmp_path):
    """Was: validate() wrapped -1 to the last tensor and named it in the error."""
    data = _graph_edit(_fixture("ops", "conv_2d__same_s1.tflite"), lambda g: _with_op(g, 0, inputs=(-1, *g.ops[0].inputs[1:])))
    text = _rejected(tmp_path, data, "op #0 CONV_2D: input 0 is required but absent")
    last = tflite_io.load(FIXTURES / "ops" / "conv_2d__same_s1.tflite").tensors[-1].name
    assert last not in text


@pytest.mark.parametrize("edit, pattern", [
    (lambda g: _with_op(g, 0, outputs=()), "is never produced"),
    (lambda g: _with_op(g, 0, inputs=g.ops[0].inputs[:1]), "has 1 inputs, 2 to 3 expected"),
])
def test_ops_missing_inputs_or_outputs(tmp_path, edit, pattern):
    """Was: 'cannot unpack non-iterable NoneType' and IndexError deep in the kernels."""
    _rejected(tmp_path, _graph_edit(_fixture("ops", "conv_2d__same_s1.tflite"), edit), pattern)


def test_out_of_range_op_codes(tmp_path):
    data = bytearray(_fixture("ops", "log__abs_plus1.tflite"))
    layout = fm._Layout(bytes(data))
    index = next(s for s in layout.sites if s.role == "opcode-index")  # op #0's index 0 is not stored
    struct.pack_into("<I", data, index.pos, 5)
    op = index.what.split(".")[0]
    _rejected(tmp_path, bytes(data), f"{op} refers to operator code 5, but the model has {layout.opcodes}")
    data = bytearray(_fixture("ops", "relu__4d.tflite"))
    layout = fm._Layout(bytes(data))
    code = next(s for s in layout.sites if s.what == "opcode #0.builtin_code")
    struct.pack_into("<i", data, code.pos, 9999)
    _rejected(tmp_path, bytes(data), "op #0 has builtin code 9999, unknown to this schema version")


def test_names_with_control_characters_stay_on_one_line(tmp_path):
    """Found by the fuzzer: a vector length bumped into the name's bytes put newlines in the error."""
    def edit(g):
        g = _with_tensor(g, 1, name="out\nput\x00")
        return _with_tensor(g, 1, shape=(7, 7))

    text = _rejected(tmp_path, _graph_edit(_fixture("ops", "relu__4d.tflite"), edit), r"'out\nput\x00'")
    assert "\n" not in text


def test_vector_lengths_past_the_end_of_the_file(tmp_path):
    data = bytearray(_fixture("models", "mobilenet_v1.tflite"))
    site = next(s for s in fm._Layout(bytes(data)).sites if s.what == "subgraph.tensors length")
    struct.pack_into("<I", data, site.pos, 2**31 - 1)
    _rejected(tmp_path, bytes(data), "tensor claims 2147483647 entries, more than its")


def test_a_computed_reshape_is_checked_before_its_kernel_runs(tmp_path):
    """An output shape known only when the op runs (RESHAPE fed a computed shape) is checked
    then, on the values it reads, before anything is allocated."""
    from runtime.ir.graph import DType, Graph, Op, OpType, Tensor

    tensors = (Tensor("x", (2, 3), DType.FLOAT32), Tensor("shape", (2,), DType.INT32),
               Tensor("y", (3, 2), DType.FLOAT32, shape_signature=(-1, -1)))
    g = Graph(tensors, (Op(OpType.RESHAPE, (0, 1), (2,)),), (0, 1), (2,), "dyn")
    it = Interpreter(graph=g, memory_limit=1 << 20)
    it.allocate_tensors()
    it.set_tensor(0, np.ones((2, 3), np.float32))
    it.set_tensor(1, np.array([3, 2], np.int32))
    it.invoke()
    assert it.get_tensor(2).shape == (3, 2)
    it.set_tensor(1, np.array([4, 2], np.int32))
    with pytest.raises(ModelError, match=r"cannot reshape \[2, 3\] \(6 elements\)"):
        it.invoke()
    it.set_tensor(1, np.array([1, -1], np.int32))
    it.invoke()
    assert it.get_tensor(2).shape == (1, 6)


def test_resized_inputs_are_checked_and_held_to_the_limit():
    it = Interpreter(model_path=str(FIXTURES / "ops" / "conv_2d__same_s1.tflite"), memory_limit=64 << 20)
    inp = it.get_input_details()[0]
    it.resize_tensor_input(inp["index"], [64, 224, 224, inp["shape"][3]])
    with pytest.raises(ModelError, match="the model at the new input shapes needs .* above the memory limit"):
        it.allocate_tensors()
    with pytest.raises(ValueError, match="dimensions must be >= 0"):
        it.resize_tensor_input(inp["index"], [1, -224, 224, 3])


def test_fixture_models_all_still_load_and_validate_cheaply(monkeypatch):
    """The checks run on every load: one check per op (no op checked twice), and no copy of any
    tensor's data (MobileNet v2's 14 MB of weights) - work counted, not timed."""
    from runtime.ops import opcheck

    g = tflite_io.load(FIXTURES / "models" / "mobilenet_v2.tflite")
    checked, real = [], opcheck.check_op
    monkeypatch.setattr(opcheck, "check_op", lambda graph, i, *rest: checked.append(i) or real(graph, i, *rest))
    tracing = tracemalloc.is_tracing()   # the fuzz test's module fixture may have started it
    if not tracing:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        opcheck.check_graph(g)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        if not tracing:
            tracemalloc.stop()
    assert checked == list(range(len(g.ops))) and len(g.ops) == 65
    assert peak < 1 << 20, f"the checks allocated {peak:,} bytes"
    assert len(CORPUS) > 200


def test_replaying_a_saved_case(tmp_path, capsys):
    path = tmp_path / "case.tflite"
    path.write_bytes(_fixture("ops", "relu__4d.tflite")[:300])
    assert fm.main(["--replay", str(path)]) == 0
    assert '"api": "rejected"' in capsys.readouterr().out


def test_mutations_are_reproducible_from_their_seed():
    a = fm.make_case(random.Random(7), CORPUS)
    b = fm.make_case(random.Random(7), CORPUS)
    assert a[0] == b[0] and a[1] == b[1] and a[2] == b[2]


def test_nan_outputs_keep_output_json_strict(tmp_path, capsys):
    """LOG of benchmark_model's inputs (uniform in [-0.5, 0.5]) is NaN for half of them: the
    record's figures are null, never a bare NaN, so any JSON parser reads the file."""
    import json

    from runtime.cli.main import main
    from runtime.ir.graph import DType, Graph, Op, OpType
    from runtime.model.tflite_write import save

    x, y = Tensor("x", (1, 64), DType.FLOAT32), Tensor("y", (1, 64), DType.FLOAT32)
    model, record = tmp_path / "log.tflite", tmp_path / "record.json"
    save(Graph((x, y), (Op(OpType.LOG, (0,), (1,)),), (0,), (1,)), model)
    assert main(["benchmark", "--graph", str(model), "--num_runs", "1", "--output_json", str(record)]) == 0

    def bare(constant):
        raise AssertionError(f"bare {constant} in --output_json")

    diff = json.loads(record.read_text(), parse_constant=bare)["output_diff"]
    assert diff[0]["avg_error"] is None and diff[0]["max"] is None


def test_a_timing_only_read_of_a_huge_declared_output_stays_within_the_memory_limit(tmp_path):
    """Was MemoryError (24 GiB of zeros) from get_tensor after a timing-only invoke: the fuzzer set a
    dynamic RESHAPE's declared output to 2**31 - 1 rows, which a timing-only plan never computes."""
    graph = tflite_io.loads(_fixture("ops", "shape__dynamic_reshape.tflite"))
    out = graph.outputs[0]
    shape = list(graph.tensors[out].shape)
    shape[1] = 2**31 - 1
    path = tmp_path / "huge_output.tflite"
    path.write_bytes(dumps(_with_tensor(graph, out, shape=tuple(shape))))
    it = Interpreter(model_path=str(path), timing_only=True, device="pixel4", memory_limit=256 << 20)
    it.allocate_tensors()
    it.invoke()
    with pytest.raises(ModelError, match=r"needs 24\.0 GiB to read back .* above what the memory limit of 256\.0 MiB"):
        it.get_tensor(out)


def test_benchmark_names_the_file_whose_input_it_cannot_fill(tmp_path, capsys):
    """Was one line without the file: the fuzzer turned an input's type into INT16."""
    graph = tflite_io.loads(_fixture("ops", "cast__i32_input.tflite"))
    path = tmp_path / "int16_input.tflite"
    path.write_bytes(dumps(_with_tensor(graph, graph.inputs[0], dtype=DType.INT16)))
    assert cli.main(["benchmark", "--graph", str(path), "--num_runs", "1"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"dtb benchmark: error: {path}: benchmark fills inputs of types") and "is INT16" in line


def test_a_scalar_int8_tensor_through_the_gpu_delegate_stays_a_scalar(tmp_path, capsys):
    """Was 'TfLiteGpuDelegateV2 returned a int8 array of shape [1] ...; expected ... shape []': the
    float view dequantized a 0-d int8 value by a (1,)-shaped scale (the fuzzer made both of a
    LEAKY_RELU's tensors scalars)."""
    graph = tflite_io.loads(_fixture("quant", "op_leaky_relu__a0p2_int8.tflite"))
    for t in (graph.inputs[0], graph.outputs[0]):
        graph = _with_tensor(graph, t, shape=())
    path = tmp_path / "scalar.tflite"
    path.write_bytes(dumps(graph))
    assert cli.main(["benchmark", "--graph", str(path), "--num_runs", "1", "--use_gpu"]) == 0
    it = Interpreter(model_path=str(path), device="pixel4",
                     experimental_delegates=[make_delegate("gpu", load_profile("pixel4"))])
    it.allocate_tensors()
    it.set_tensor(graph.inputs[0], np.array(-50, np.int8))
    it.invoke()
    assert it.get_tensor(graph.outputs[0]).shape == ()


def test_an_8bit_mean_over_an_empty_axis_is_refused_before_it_runs(tmp_path):
    """Was a kernel's ValueError ('negative shift count') while running: the fuzzer set the channel
    axis a MEAN reduces to 0, and LiteRT's integer mean divides by the element count."""
    graph = tflite_io.loads(_fixture("quant", "op_mean__channels_int8.tflite"))
    x = graph.inputs[0]
    data = dumps(_with_tensor(graph, x, shape=(*graph.tensors[x].shape[:3], 0)))
    _rejected(tmp_path, data, "op #0 MEAN", "an 8-bit mean over an empty axis has no element to divide by")


def test_a_fully_connected_input_whose_rows_are_not_whole_images_runs(tmp_path):
    """Was 'range() arg 3 must not be zero': an input of 64 x 3 values read as 16 rows of 12 was split
    into 64 images of no row each. LiteRT reads it as 16 rows, as here."""
    graph = tflite_io.loads(_fixture("ops", "fully_connected__2d_bias.tflite"))
    graph = _with_tensor(graph, graph.inputs[0], shape=(64, 3))
    graph = _with_tensor(graph, graph.outputs[0], shape=(16, 7))
    path = tmp_path / "rows.tflite"
    path.write_bytes(dumps(graph))
    x = np.random.default_rng(0).standard_normal((64, 3)).astype(np.float32)
    it = Interpreter(model_path=str(path))
    it.allocate_tensors()
    it.set_tensor(graph.inputs[0], x)
    it.invoke()
    w, b = graph.tensors[graph.ops[0].inputs[1]].data, graph.tensors[graph.ops[0].inputs[2]].data
    np.testing.assert_allclose(it.get_tensor(graph.outputs[0]), x.reshape(16, 12) @ w.T + b, rtol=1e-5, atol=1e-5)
