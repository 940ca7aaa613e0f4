"""Qualcomm's QNN delegate: its options (flags, key:value strings), its order before the GPU delegate,
the phone it needs (an HTP), the unit and numeric mode it runs in, and the kit and table on it.
Each support rule's accept / refuse case is in test_delegate_rules.py with the other delegates'."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from delegates.api import DelegateError
from delegates.gpu import GpuDelegate
from delegates.qnn import GpuPrecision, HtpPerformanceMode, HtpPrecision, LogLevel, QnnBackend, QnnDelegate, QnnOptions
from delegates.qnn_rules import TABLE, fused_activation_supported
from delegates.registry import make_delegate, parse_flags
from delegates.table import supported_ops_table
from runtime.cli.main import main
from runtime.conformance.kit import run_conformance
from runtime.interpreter.api import Interpreter
from runtime.interpreter.delegation import apply_delegates
from runtime.model import tflite_read
from runtime.ir.graph import DType, Graph, Op, QuantParams, Tensor
from runtime.ir.optypes import OpType
from runtime.ir.options import ArgMaxOptions
from runtime.zoo import build
from runtime.zoo.quantize import to_int8
from sim.cost import Precision
from sim.dsp import DspUnit
from sim.profile import load_profile
from sim.soc import SoC
from tests.delegate_kit import qualcomm, verdicts, zoo
from tests.external_delegates import __name__ as EXTERNAL_MODULE

HTP_PHONE = str(Path(__file__).parent / "fixtures" / "profiles" / "htp_test.yaml")
QNN_LIB = "--external_delegate_path=/vendor/lib64/libQnnTFLiteDelegate.so"


def _only(argv):
    delegates, rest = parse_flags(argv, qualcomm())
    assert rest == [] and len(delegates) == 1
    return delegates[0]


# -- options -----------------------------------------------------------------------------------


def test_qnn_flags_set_the_options():
    d = _only(["--use_qnn", "--qnn_backend_type=gpu", "--qnn_gpu_precision=fp32", "--qnn_log_level", "info",
               "--qnn_htp_use_conv_hmx=false", "--qnn_htp_device_id=1"])
    assert isinstance(d, QnnDelegate) and d.unit == "gpu" and d.unit_name == "gpu"
    assert d.config == QnnOptions(backend_type=QnnBackend.GPU, gpu_precision=GpuPrecision.FP32,
                                  log_level=LogLevel.INFO, htp_use_conv_hmx=False, htp_device_id=1)


def test_defaults_are_the_c_api_initialisers():
    """QNN_DELEGATE_HTP_OPTION_INIT (delegate API 0.24): fp16, conv HMX on; the HTP backend."""
    d = _only(["--use_qnn"])
    assert d.config == QnnOptions() and d.config.htp_precision is HtpPrecision.FP16 and d.config.htp_use_conv_hmx
    assert d.unit == "dsp" and d.unit_name == "dsp" and d.platform_refusal is None


@pytest.mark.parametrize("text,mode", [("2", HtpPerformanceMode.BURST), ("burst", HtpPerformanceMode.BURST),
                                       ("0", HtpPerformanceMode.DEFAULT), ("8", HtpPerformanceMode.BALANCED),
                                       ("9", HtpPerformanceMode.EXTREME_POWER_SAVER),
                                       ("high_performance", HtpPerformanceMode.HIGH_PERFORMANCE)])
def test_performance_mode_takes_the_documented_number_or_name(text, mode):
    assert _only(["--use_qnn", f"--qnn_htp_performance_mode={text}"]).config.htp_performance_mode is mode
    assert make_delegate("qnn", htp_performance_mode=text).config.htp_performance_mode is mode


def test_the_qnn_library_as_an_external_delegate_is_the_built_in_one():
    d = _only([QNN_LIB, "--external_delegate_options=backend_type:htp;htp_precision:0;htp_performance_mode:2"])
    assert isinstance(d, QnnDelegate)
    assert d.config == QnnOptions(htp_precision=HtpPrecision.QUANTIZED,
                                  htp_performance_mode=HtpPerformanceMode.BURST)
    gpu = _only(["--external_delegate_path=libQnnTFLiteDelegate.so", "--external_delegate_options=backend_type:gpu"])
    assert gpu.config.backend_type is QnnBackend.GPU


def test_other_external_paths_still_load_their_factory():
    d = _only([f"--external_delegate_path={EXTERNAL_MODULE}:make", "--external_delegate_options=threshold:3"])
    assert not isinstance(d, QnnDelegate)


@pytest.mark.parametrize("argv,message", [
    (["--use_qnn", "--qnn_htp_precision=fp17"], "--qnn_htp_precision must be one of quantized (0), fp16 (1), not 'fp17'"),
    (["--use_qnn", "--qnn_htp_performance_mode=10"], "--qnn_htp_performance_mode must be one of default (0), "),
    (["--use_qnn", "--qnn_backend_type=dsp"], "--qnn_backend_type must be one of htp, gpu, not 'dsp'"),
    (["--use_qnn", "--qnn_htp_use_fold_relu=maybe"], "--qnn_htp_use_fold_relu must be true or false"),
    (["--use_qnn", "--qnn_htp_vtcm_size=-4"], "--qnn_htp_vtcm_size must be >= 0, not -4"),
    (["--use_qnn", "--qnn_htp_num_hvx_threads=two"], "--qnn_htp_num_hvx_threads must be int, not 'two'"),
    ([QNN_LIB, "--external_delegate_options=htp_precision:1"], "libQnnTFLiteDelegate.so needs backend_type"),
    ([QNN_LIB, "--external_delegate_options=backend_type:htp;htp_precison:1"],
     "--external_delegate_options 'htp_precison': the QNN delegate has no option 'htp_precison'"),
    ([QNN_LIB, "--external_delegate_options=backend_type:npu"],
     "--external_delegate_options 'backend_type' must be one of htp, gpu, not 'npu'"),
    ([QNN_LIB, "--external_delegate_options=backend_type:htp;gpu_precision:5"],
     "--external_delegate_options 'gpu_precision' must be one of user_provided (0), fp32 (1), fp16 (2), hybrid (3)"),
])
def test_bad_options_give_one_error_naming_the_option(argv, message):
    with pytest.raises(DelegateError) as info:
        parse_flags(argv, qualcomm())
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("argv,message", [
    (["--use_qnn", "--qnn_htp_vtcm_size=" + "9" * 400],
     "--qnn_htp_vtcm_size must be at most 4294967295 (a uint32_t in the QNN delegate's C API), not a number of 400 digits"),
    (["--use_qnn", f"--qnn_htp_device_id={2**64}"], f"--qnn_htp_device_id must be at most 4294967295"),
    ([QNN_LIB, "--external_delegate_options=backend_type:htp;htp_num_hvx_threads:4294967296"],
     "'htp_num_hvx_threads' must be at most 4294967295"),
    (["--use_qnn", "--qnn_htp_vtcm_size=1_0"], "--qnn_htp_vtcm_size must be int, not '1_0'"),
])
def test_integer_options_are_the_c_apis_uint32(argv, message):
    """A 400-digit htp_vtcm_size was taken, and failed after delegation as 'TfLiteQnnDelegate
    unit_scales failed: OverflowError'; 2**64 was taken though the C field is a uint32_t."""
    with pytest.raises(DelegateError) as info:
        parse_flags(argv, qualcomm())
    assert message in str(info.value)
    with pytest.raises(DelegateError, match="must be at most 4294967295"):
        make_delegate("qnn", qualcomm(), htp_vtcm_size=10**400)
    with pytest.raises(DelegateError, match="must be int, not inf"):
        make_delegate("qnn", qualcomm(), htp_vtcm_size=float("inf"))
    assert make_delegate("qnn", qualcomm(), htp_vtcm_size=2**32 - 1).config.htp_vtcm_size == 2**32 - 1


def test_a_huge_vtcm_size_on_the_cli_is_one_error_before_delegation(capsys):
    assert main(["benchmark", "--zoo", "tiny_cnn", "--device", HTP_PHONE, "--use_qnn",
                 "--qnn_htp_vtcm_size=" + "9" * 400]) == 1
    out, err = capsys.readouterr()
    assert "nodes delegated" not in out and "unit_scales" not in err and "must be at most 4294967295" in err


@pytest.mark.parametrize("options,warning", [
    ({"backend_type": "gpu", "htp_precision": "quantized"},
     "QNN delegate: htp_precision quantized has no effect with backend_type gpu (it is an option of the HTP backend)"),
    ({"gpu_precision": "fp32"},
     "QNN delegate: gpu_precision fp32 has no effect with backend_type htp (it is an option of the GPU backend)"),
])
def test_an_option_of_the_other_backend_warns(options, warning):
    assert make_delegate("qnn", qualcomm(), **options).warnings == [warning]
    assert make_delegate("qnn", qualcomm()).warnings == []


def test_the_other_backends_options_warn_on_the_cli(capsys):
    assert main(["benchmark", "--zoo", "tiny_cnn", "--device", HTP_PHONE, "--num_runs", "1", "--warmup_runs", "0",
                 QNN_LIB, "--external_delegate_options=backend_type:gpu;htp_precision:0"]) == 0
    assert ("dtb benchmark: warning: QNN delegate: htp_precision quantized has no effect with backend_type gpu"
            in capsys.readouterr().err)


def test_an_htp_device_id_the_phone_lacks_takes_no_op():
    d = _only(["--use_qnn", "--qnn_htp_device_id=1"])
    assert d.platform_refusal == ("QNN delegate: qualcomm_v75 has 1 HTP (htp_device_id 0), so htp_device_id 1 "
                                  "cannot open")
    assert _only(["--use_qnn", "--qnn_htp_device_id=0"]).platform_refusal is None


def test_a_bare_boolean_qnn_flag_is_true():
    """--qnn_profiling alone was refused with 'needs a value', unlike every other boolean flag."""
    d = _only(["--use_qnn", "--qnn_profiling", "--qnn_htp_use_conv_hmx", "false"])
    assert d.config.profiling is True and d.config.htp_use_conv_hmx is False


def test_qnn_flags_without_use_qnn_warn_that_they_do_nothing(capsys):
    assert main(["benchmark", "--zoo", "tiny_cnn", "--device", HTP_PHONE, "--num_runs", "1", "--warmup_runs", "0",
                 "--qnn_backend_type=gpu", "--external_delegate_options=backend_type:htp"]) == 0
    err = capsys.readouterr().err
    assert "dtb benchmark: warning: --qnn_backend_type has no effect: --use_qnn is not on" in err
    assert ("dtb benchmark: warning: --external_delegate_options has no effect: no --external_delegate_path names "
            "a delegate") in err


def test_help_groups_the_qnn_flags_under_qnn(capsys):
    with pytest.raises(SystemExit):
        main(["benchmark", "--help"])
    out = capsys.readouterr().out
    qnn = out[out.index("\nQNN:"):out.index("\nExternal delegate:")]
    assert "--use_qnn" in qnn and "--qnn_gpu_precision" in qnn and "--qnn_profiling [BOOL]" in qnn
    assert "--qnn_" not in out[out.index("\nGPU:"):out.index("\nHexagon:")]


def test_inference_diff_refuses_delegate_qnn_with_use_qnn_false(capsys):
    assert main(["inference-diff", "--zoo", "tiny_cnn", "--device", HTP_PHONE, "--delegate", "qnn",
                 "--use_qnn=false", "--num_runs", "1"]) == 1
    assert "--delegate qnn and --use_qnn=false contradict each other" in capsys.readouterr().err


def test_a_bad_option_on_the_cli_exits_non_zero_without_a_traceback(capsys):
    assert main(["benchmark", "--zoo", "tiny_cnn", "--device", HTP_PHONE, "--use_qnn",
                 "--qnn_htp_precision=fp17"]) != 0
    err = capsys.readouterr().err
    assert "--qnn_htp_precision must be one of quantized (0), fp16 (1)" in err and "Traceback" not in err


# -- order ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["--use_qnn", "--use_gpu"], ["--use_gpu", "--use_qnn"],
                                  ["--use_gpu", QNN_LIB, "--external_delegate_options=backend_type:htp"]])
def test_qnn_comes_before_the_gpu_whatever_the_flag_order(argv):
    delegates, _ = parse_flags(argv, qualcomm())
    assert [type(d) for d in delegates] == [QnnDelegate, GpuDelegate]


def test_other_external_delegates_keep_their_flag_order():
    delegates, _ = parse_flags(["--use_gpu", f"--external_delegate_path={EXTERNAL_MODULE}:make",
                                "--use_qnn"], qualcomm())
    assert isinstance(delegates[0], QnnDelegate) and isinstance(delegates[1], GpuDelegate)
    assert not isinstance(delegates[2], (QnnDelegate, GpuDelegate))


def test_the_gpu_gets_what_the_qnn_delegate_leaves():
    """A float model: with htp_precision fp16 the HTP takes it all; with quantized the GPU does."""
    graph = zoo("mobilenet_v1")
    phone = qualcomm()
    fp16 = apply_delegates(graph, [QnnDelegate(profile=phone), GpuDelegate()])
    assert [r.nodes_delegated for r in fp16.per_delegate] == [len(graph.ops), 0]
    assert fp16.log[0] == (f"TfLiteQnnDelegate delegate: {len(graph.ops)} nodes delegated out of {len(graph.ops)} "
                           f"nodes with 1 partitions.")
    quantized = apply_delegates(graph, [QnnDelegate(QnnOptions(htp_precision=HtpPrecision.QUANTIZED), phone),
                                        GpuDelegate()])
    assert [r.nodes_delegated for r in quantized.per_delegate] == [0, len(graph.ops)]


# -- the phone it needs ------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ["pixel3", "pixel4"])
def test_a_hexagon_without_htp_refuses_the_whole_model(profile):
    phone = load_profile(profile)
    d = QnnDelegate(profile=phone)
    assert d.platform_refusal == (f"QNN delegate: {profile} has no Qualcomm HTP (a Hexagon v68 or later NPU), "
                                  f"so backend_type htp cannot open")
    assert {v.reason for v in verdicts(d, zoo("mobilenet_v1", "int8"))} == {d.platform_refusal}


def test_an_htp_before_v68_is_no_htp_and_the_gpu_backend_needs_a_gpu():
    assert QnnDelegate(profile=qualcomm(66)).platform_refusal is not None
    assert QnnDelegate(profile=qualcomm(68)).platform_refusal is None
    no_gpu = QnnDelegate(QnnOptions(backend_type=QnnBackend.GPU), qualcomm(gpu=False))
    assert no_gpu.platform_refusal == "QNN delegate: qualcomm_v75 has no GPU for backend_type gpu"


def test_htp_arch_is_a_dsp_extra_in_profiles():
    assert load_profile(HTP_PHONE).unit("dsp").extras["htp_arch"] == 75


def _dsp(profile) -> DspUnit:
    return SoC(profile).unit("dsp")


def test_only_a_dsp_with_an_htp_runs_float16():
    assert _dsp(qualcomm(75)).runs(Precision.FLOAT16) and _dsp(qualcomm(75)).runs(Precision.INT8)
    assert not _dsp(qualcomm(None)).runs(Precision.FLOAT16)        # a float16 rate alone is not enough
    assert not _dsp(qualcomm(75, fp16=False)).runs(Precision.FLOAT16)
    assert not _dsp(qualcomm(75)).runs(Precision.FLOAT32)


# -- how it runs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("options,mode,expected", [
    (QnnOptions(), "float", "FLOAT16"), (QnnOptions(), "int8", "INTEGER"),
    (QnnOptions(backend_type=QnnBackend.GPU), "float", "FLOAT16"),
    (QnnOptions(backend_type=QnnBackend.GPU, gpu_precision=GpuPrecision.FP32), "float", "FLOAT32_VIEW"),
])
def test_numeric_mode(options, mode, expected):
    assert QnnDelegate(options, qualcomm()).numeric_mode(zoo("mobilenet_v1", mode)) == expected


def test_a_quantized_model_with_float_ends_stays_integer():
    """QUANTIZE in and DEQUANTIZE out: the float edges do not make the HTP partition float16."""
    graph = build("tiny_cnn")
    sample = np.random.default_rng(0).standard_normal(graph.tensors[graph.inputs[0]].shape).astype(np.float32)
    with_ends = to_int8(graph, [sample], io="float")
    assert {with_ends.ops[0].type, with_ends.ops[-1].type} == {OpType.QUANTIZE, OpType.DEQUANTIZE}
    assert QnnDelegate(profile=qualcomm()).numeric_mode(with_ends) == "INTEGER"


def test_the_float_edges_of_a_quantized_model_run_on_an_htp_without_a_float32_rate():
    """AI Hub's w8a8 files start with a QUANTIZE and end with a DEQUANTIZE, both counted as NPU ops:
    a dsp unit with only int8 / float16 rates charges them on its integer path, not a placement error."""
    graph = build("tiny_cnn")
    sample = np.random.default_rng(0).standard_normal(graph.tensors[graph.inputs[0]].shape).astype(np.float32)
    with_ends = to_int8(graph, [sample], io="float")
    phone = load_profile(str(Path(__file__).parent.parent / "sim" / "profiles" / "priors" / "galaxy_s24.yaml"))
    assert not phone.unit("dsp").macs_per_s.get(Precision.FLOAT32)
    it = Interpreter(graph=with_ends, experimental_delegates=[QnnDelegate(profile=phone)], device=phone,
                     timing_only=True)
    it.allocate_tensors()
    it.invoke()
    ops = [iv for iv in it.simulation.soc.trace.intervals if iv.name in ("QUANTIZE", "DEQUANTIZE")]
    assert ops and {iv.rail for iv in ops} == {"dsp"}


def _int8_with_a_float_argmax():
    """tiny_cnn in int8 with float I/O and an ARG_MAX on its float output, as AI Hub's w8a8
    segmentation files end (DEQUANTIZE, then the class index per pixel in float)."""
    graph = build("tiny_cnn")
    sample = np.random.default_rng(0).standard_normal(graph.tensors[graph.inputs[0]].shape).astype(np.float32)
    q = to_int8(graph, [sample], io="float")
    out = q.outputs[0]
    axis = Tensor("argmax_axis", (1,), DType.INT32, data=np.array([len(q.tensors[out].shape) - 1], np.int32))
    index = Tensor("argmax", q.tensors[out].shape[:-1], DType.INT32)
    tensors = (*q.tensors, axis, index)
    ops = (*q.ops, Op(OpType.ARG_MAX, (out, len(q.tensors)), (len(q.tensors) + 1,), ArgMaxOptions(DType.INT32.code)))
    return Graph(tensors, ops, q.inputs, (len(q.tensors) + 1,), q.name + "+argmax", q.signatures), sample


def test_a_quantized_model_with_a_float_tail_keeps_its_integer_ops_integer():
    """One QNN graph, each op in its own tensors' types: the convolutions in int8, the ARG_MAX after
    the DEQUANTIZE in float16, where the whole partition used to be charged in float16."""
    graph, sample = _int8_with_a_float_argmax()
    phone = load_profile(HTP_PHONE)
    delegate = QnnDelegate(profile=phone)
    assert delegate.numeric_mode(graph) == "MIXED"
    outs, precisions = [], {}
    for delegates in ([], [delegate]):
        it = Interpreter(graph=graph, experimental_delegates=delegates, device=phone)
        it.allocate_tensors()
        it.set_tensor(graph.inputs[0], sample)
        it.invoke()
        outs.append(it.get_tensor(graph.outputs[0]))
        for iv in it.simulation.soc.trace.intervals:
            if iv.rail == "dsp" and iv.name in ("CONV_2D", "ARG_MAX", "QUANTIZE"):
                precisions.setdefault(iv.name, set()).add(dict(iv.args)["precision"])
    assert precisions == {"CONV_2D": {"int8"}, "QUANTIZE": {"int8"}, "ARG_MAX": {"float16"}}
    np.testing.assert_array_equal(outs[1], outs[0])   # integer ops exact; float16 keeps a clear argmax


def _int8_mask_graph() -> Graph:
    """An all-int8 graph whose LESS writes a bool mask that a SELECT_V2 reads: no float op anywhere."""
    q = QuantParams((0.05,), (0,))
    x, zero = Tensor("x", (1, 8, 8, 4), DType.INT8, q), Tensor("zero", (1,), DType.INT8, q, np.zeros(1, np.int8))
    mask, y = Tensor("mask", (1, 8, 8, 4), DType.BOOL), Tensor("y", (1, 8, 8, 4), DType.INT8, q)
    return Graph((x, zero, mask, y), (Op(OpType.LESS, (0, 1), (2,)), Op(OpType.SELECT_V2, (2, 1, 0), (3,))), (0,), (3,))


@pytest.mark.parametrize("precision", [HtpPrecision.FP16, HtpPrecision.QUANTIZED])
def test_an_int8_graph_with_a_bool_mask_runs_on_the_htp(precision):
    """Was: the rules took the LESS (the HTP holds bool), then the partition ran in the integer
    kernels' mode, which refuses bool: 'Node number 2 (TfLiteQnnDelegate) failed to prepare', and
    dtb benchmark stopped with 'Failed to apply QNN delegate.' (text_mobilebert_int8.tflite with
    htp_precision quantized too)."""
    graph, phone = _int8_mask_graph(), load_profile(HTP_PHONE)
    delegate = QnnDelegate(QnnOptions(htp_precision=precision), phone)
    assert delegate.numeric_mode(graph) == "MIXED"
    x = np.arange(-128, 128, dtype=np.int8).reshape(1, 8, 8, 4)
    outs = []
    for delegates in ([], [delegate]):
        it = Interpreter(graph=graph, experimental_delegates=delegates, device=phone)
        assert not [r.error for r in it.simulation.delegation.per_delegate if r.error]
        it.allocate_tensors()
        it.set_tensor(0, x)
        it.invoke()
        outs.append(it.get_tensor(3))
    np.testing.assert_array_equal(outs[1], outs[0])
    assert {iv.rail for iv in it.simulation.soc.trace.intervals if iv.name in ("LESS", "SELECT_V2")} == {"dsp"}


def test_an_int8_gather_by_int32_indices_is_charged_on_the_integer_path():
    """Was: 'dtb benchmark: error: op #0 GATHER: the dsp of galaxy_s24 has no float32 rate' for
    text_cnn_int8.tflite on every HTP phone: a GATHER from a constant int8 table reads only int32
    run-time indices, so it was charged in float32, a rate the HTP does not have."""
    graph = tflite_read.load(Path(__file__).parent / "fixtures" / "tasks" / "text_cnn_int8.tflite")
    assert graph.ops[0].type is OpType.GATHER
    phone = load_profile("galaxy_s24")
    it = Interpreter(graph=graph, experimental_delegates=[QnnDelegate(profile=phone)], device=phone, timing_only=True)
    it.allocate_tensors()
    it.invoke()
    gather = [iv for iv in it.simulation.soc.trace.intervals if iv.name == "GATHER"]
    assert gather and {(iv.rail, dict(iv.args)["precision"]) for iv in gather} == {("dsp", "int8")}


def test_a_float_model_runs_in_float16_on_the_htp():
    graph = build("tiny_cnn")
    x = np.random.default_rng(0).standard_normal(graph.tensors[graph.inputs[0]].shape).astype(np.float32)
    outs = []
    for delegates in ([], [QnnDelegate(profile=load_profile(HTP_PHONE))]):
        it = Interpreter(graph=graph, device=HTP_PHONE, experimental_delegates=delegates)
        it.allocate_tensors()
        it.set_tensor(graph.inputs[0], x)
        it.invoke()
        outs.append(it.get_tensor(graph.outputs[0]))
    assert not np.array_equal(outs[0], outs[1])                 # float16 really ran
    np.testing.assert_allclose(outs[1], outs[0], atol=2e-3)     # softmax outputs, float16 rounding


def test_power_saver_modes_use_the_profiles_powersave_scales():
    unit = _dsp(load_profile(HTP_PHONE))
    saver = QnnDelegate(QnnOptions(htp_performance_mode=HtpPerformanceMode.POWER_SAVER))
    assert (saver.unit_scales(unit).rate, saver.unit_scales(unit).power) == (0.6, 0.5)
    burst = QnnDelegate(QnnOptions(htp_performance_mode=HtpPerformanceMode.BURST))
    assert (burst.unit_scales(unit).rate, burst.unit_scales(unit).power) == (1.0, 1.0)


def test_a_cached_context_binary_shortens_the_second_init(tmp_path):
    spec = load_profile(HTP_PHONE).unit("dsp")
    spec = type(spec)(**{**spec.__dict__, "cached_init_s": spec.init_s / 10})
    d = QnnDelegate(QnnOptions(cache_dir=str(tmp_path), model_token="m"))
    graph = zoo("mobilenet_v1", "int8")
    assert d.init_seconds(spec, graph) == spec.init_s
    assert d.init_seconds(spec, graph) == spec.cached_init_s
    assert QnnDelegate().init_seconds(spec, graph) == spec.init_s


def test_output_json_names_the_kind_qnn(tmp_path, capsys):
    out = tmp_path / "run.json"
    assert main(["benchmark", "--zoo", "tiny_cnn", "--device", HTP_PHONE, QNN_LIB,
                 "--external_delegate_options=backend_type:htp", "--num_runs=1", "--warmup_runs=0",
                 f"--output_json={out}"]) == 0
    assert "TfLiteQnnDelegate delegate:" in capsys.readouterr().out
    record = json.loads(out.read_text())
    assert [(d["kind"], d["name"]) for d in record["delegates"]] == [("qnn", "TfLiteQnnDelegate")]


# -- the kit and the table ---------------------------------------------------------------------------


def test_the_qnn_delegate_passes_the_conformance_kit():
    phone = load_profile(HTP_PHONE)
    ops = ["ADD", "CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "SOFTMAX", "MEAN", "RESHAPE"]
    report = run_conformance(lambda: QnnDelegate(profile=phone), phone, examples=2, ops=ops)
    assert report.ok, report.to_text()
    modes = {(c.dtype, c.mode) for c in report.cases if c.op == "CONV_2D"}
    assert ("float32", "float16") in modes and ("int8", "integer") in modes


def test_the_fused_activation_rule_is_on_the_builders_that_apply_one():
    """The builders in qnn_compose_graph.cc that pass fused_activation_function to AddFusedActivationNode.
    CONV_3D and L2_POOL_2D were taken with any activation; L2_NORMALIZATION's builder never reads it."""
    applied = {OpType.ADD, OpType.SUB, OpType.MUL, OpType.DIV, OpType.CONCATENATION, OpType.FULLY_CONNECTED,
               OpType.CONV_2D, OpType.CONV_3D, OpType.TRANSPOSE_CONV, OpType.DEPTHWISE_CONV_2D,
               OpType.AVERAGE_POOL_2D, OpType.MAX_POOL_2D, OpType.L2_POOL_2D}
    assert {t for t, rules in TABLE.items() if fused_activation_supported in rules} == applied


def test_supported_ops_table_has_a_qnn_column(capsys):
    text = supported_ops_table(["qnn"])
    assert ("| STRIDED_SLICE | Only ellipsis_mask 0 is supported; Begin, end and strides must be constant int32 "
            "tensors |") in text
    assert "| RESHAPE | yes |" in text and "| LSTM |" not in text
    assert "- qnn, every op: Run-time tensors must be float32/float16 (run in float16)" in text
    assert main(["supported-ops", "--delegate", "qnn"]) == 0
    assert capsys.readouterr().out == text
