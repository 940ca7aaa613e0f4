"""The NNAPI delegate's support answer and the NNAPI-like driver behind it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from delegates.api import DelegateError
from delegates.nnapi import ExecutionPreference, NnapiDelegate, NnapiOptions
from delegates.registry import make_delegate
from runtime.ir.graph import DType, Graph, QuantParams, Tensor
from runtime.interpreter.api import Interpreter
from runtime.ir.optypes import OpType
from runtime.model.tflite_read import load
from sim.cost import Precision
from sim.npu import NnapiDriver, feature_level_for_api, op_precision
from sim.numerics import dequantize_array
from sim.profile import load_profile
from sim.trace import Kind
from tests.conftest import FIXTURES
from tests.delegate_kit import DEVICES, android, const, device, live, single_op, verdicts, zoo


def _pad():
    return single_op(OpType.PAD, [live((1, 4, 4, 3)), const([[0, 0], [1, 1], [1, 1], [0, 0]])],
                     live((1, 6, 6, 3), name="y"))


def test_pad_needs_api_28():
    graph, op = _pad()
    refused = NnapiDelegate(NnapiOptions(), android(27)).is_node_supported(op, graph)
    assert not refused.ok and "API level 28" in refused.reason
    assert NnapiDelegate(NnapiOptions(), android(28)).is_node_supported(op, graph)


def test_below_api_27_nothing_is_supported():
    answers = verdicts(NnapiDelegate(NnapiOptions(), android(26)), zoo("mobilenet_v1"))
    assert all(not a.ok and "API level 27" in a.reason for a in answers)
    assert not any(verdicts(NnapiDelegate(NnapiOptions()), zoo("mobilenet_v1")))


def test_unknown_accelerator_fails_with_tflites_wording():
    with pytest.raises(DelegateError) as err:
        NnapiDelegate(NnapiOptions(accelerator_name="qti-htp"), android())
    assert str(err.value) == ("Could not find the specified NNAPI accelerator: qti-htp. "
                              "Must be one of: {test-gpu,test-npu,nnapi-reference}.")


def test_named_accelerator_keeps_only_what_its_driver_supports():
    int8 = zoo("mobilenet_v1", "int8")
    on_npu = NnapiDelegate(NnapiOptions(accelerator_name="test-npu"), android())
    answers = verdicts(on_npu, int8)
    refused = [op.type for op, a in zip(int8.ops, answers) if not a]
    assert refused == [OpType.SOFTMAX]  # the test NPU lists no SOFTMAX
    assert "test-npu does not support" in answers[-1].reason
    assert on_npu.unit_name == "npu" and on_npu.unit == "npu"
    on_gpu = NnapiDelegate(NnapiOptions(accelerator_name="test-gpu"), android())
    assert not any(verdicts(on_gpu, int8))  # float-only device


def test_without_a_name_each_model_runs_on_the_device_that_takes_most_of_it():
    delegate = NnapiDelegate(NnapiOptions(), android())
    assert all(verdicts(delegate, zoo("mobilenet_v1")))
    assert delegate.device.name == "test-gpu" and delegate.numeric_mode(zoo("mobilenet_v1")) == "REFERENCE"
    verdicts(delegate, zoo("mobilenet_v1", "int8"))
    assert delegate.device.name == "test-npu" and delegate.unit_name == "npu"


def test_nnapi_reference_only_when_the_cpu_is_allowed():
    only_cpu = android(devices=[d for d in DEVICES if d.name == "nnapi-reference"])
    blocked = verdicts(NnapiDelegate(NnapiOptions(), only_cpu), zoo("mobilenet_v1"))
    assert all(not a.ok and "nnapi-reference is excluded" in a.reason for a in blocked)
    allowed = NnapiDelegate(NnapiOptions(disallow_nnapi_cpu=False), only_cpu)
    assert all(verdicts(allowed, zoo("mobilenet_v1"))) and allowed.unit_name == "cpu_big"


def test_float16_model_is_delegated_whole_or_not_at_all():
    fp16 = zoo("mobilenet_v1", "float16")
    whole = verdicts(NnapiDelegate(NnapiOptions(accelerator_name="nnapi-reference"), android()), fp16)
    assert all(whole)
    partial = verdicts(NnapiDelegate(NnapiOptions(accelerator_name="test-npu", allow_fp16=True),
                                     android()), fp16)
    assert all(not a.ok and "only when every op is supported" in a.reason and "SOFTMAX" in a.reason
               for a in partial)


def test_allow_fp16_lets_a_float16_device_take_float_ops():
    fp16_only = android(devices=[device("half", "npu", 4, {"ADD"}, {Precision.FLOAT16})])
    graph, op = single_op(OpType.ADD, [live((1, 4)), live((1, 4), name="b")], live((1, 4), name="y"))
    assert not NnapiDelegate(NnapiOptions(), fp16_only).is_node_supported(op, graph)
    relaxed = NnapiDelegate(NnapiOptions(allow_fp16=True), fp16_only)
    assert relaxed.is_node_supported(op, graph) and relaxed.numeric_mode(graph) == "FLOAT16"


def test_int8_needs_nnapi_1_2():
    graph, op = single_op(OpType.ADD, [live((1, 4), DType.INT8), live((1, 4), DType.INT8, "b")],
                          live((1, 4), DType.INT8, "y"))
    old = NnapiDelegate(NnapiOptions(), android(28)).is_node_supported(op, graph)
    assert not old.ok and "since version 1.2" in old.reason
    assert NnapiDelegate(NnapiOptions(), android(29)).is_node_supported(op, graph)


def test_target_level_is_capped_by_the_device():
    delegate = NnapiDelegate(NnapiOptions(accelerator_name="test-gpu"), android(31))
    assert delegate.feature_level == 3 and delegate.driver.feature_level == 5


def test_a_device_level_given_as_an_api_level_is_read_as_a_feature_level():
    phone = android(31, devices=[device("old-dsp", "dsp", 28, {"ADD"}, {Precision.INT8})])
    assert NnapiDriver(phone).device_level("old-dsp") == 2
    assert NnapiDelegate(NnapiOptions(), phone).feature_level == 2


def test_accelerator_name_is_ignored_before_api_29():
    delegate = NnapiDelegate(NnapiOptions(accelerator_name="no-such-device"), android(28))
    assert delegate.warnings and not delegate.unavailable


# -- the driver -------------------------------------------------------------------------------


@pytest.mark.parametrize("api, level", [(26, 0), (27, 1), (28, 2), (29, 3), (30, 4), (31, 5), (33, 6),
                                        (34, 7), (40, 7)])
def test_feature_level_follows_the_api_level(api, level):
    assert feature_level_for_api(api) == level
    driver = NnapiDriver(android(api))
    assert (driver.feature_level, driver.api_level) == (level, api)


def test_driver_lists_and_finds_devices():
    driver = NnapiDriver(android())
    assert driver.device_names() == ("test-gpu", "test-npu", "nnapi-reference")
    assert driver.device("test-npu").unit == "npu"
    with pytest.raises(KeyError, match="no-such"):
        driver.device("no-such")


def test_supported_operations_checks_type_and_precision_on_any_named_device():
    driver = NnapiDriver(android())
    int8, float32 = zoo("mobilenet_v1", "int8"), zoo("mobilenet_v1")
    assert op_precision(int8.ops[0], int8) is Precision.INT8
    assert op_precision(float32.ops[0], float32) is Precision.FLOAT32
    softmax = [op for op in int8.ops if op.type is OpType.SOFTMAX]
    assert driver.supported_operations(["test-npu"], softmax, int8) == (False,)
    assert driver.supported_operations(["test-npu", "nnapi-reference"], softmax, int8) == (True,)
    assert driver.supported_operations(["test-gpu"], int8.ops[:2], int8) == (False, False)
    assert driver.supported_operations(["test-gpu"], float32.ops[:2], float32) == (True, True)


def test_compile_time_uses_the_cache_only_when_warm_and_fully_configured():
    driver = NnapiDriver(android())
    assert driver.compile_seconds("test-npu", None, None, warm=True) == 0.5
    assert driver.compile_seconds("test-npu", "/cache", "token", warm=False) == 0.5
    assert driver.compile_seconds("test-npu", "/cache", "token", warm=True) == 0.05


def test_preference_scales_follow_the_profile():
    driver = NnapiDriver(android())
    assert driver.preference_scales("test-npu", ExecutionPreference.LOW_POWER) == (0.5, 0.4)
    # NNAPI's default when the preference is left unset is fast_single_answer
    assert driver.preference_scales("test-npu", "undefined") == (1.2, 1.1)
    assert driver.preference_scales("test-gpu", ExecutionPreference.SUSTAINED_SPEED) == (1.0, 1.0)


def test_shipped_profiles_build_delegates():
    profile_module = pytest.importorskip("sim.profile")
    try:
        phone = profile_module.load_profile("pixel4")
    except Exception as exc:  # the profile set is still being written
        pytest.skip(f"pixel4 profile not loadable: {exc}")
    delegate = NnapiDelegate(NnapiOptions(disallow_nnapi_cpu=False), phone)
    assert delegate.unavailable is None and delegate.unit_name in {u.name for u in phone.units}
    assert any(verdicts(delegate, zoo("mobilenet_v1", "int8")))


# -- hybrid (dynamic-range) ops: float activations, int8 weights -----------------------------------

def _hybrid(op_type: OpType, w_shape, x_shape, y_shape, options=None):
    rng = np.random.default_rng(0)
    w = Tensor("w", w_shape, DType.INT8, QuantParams((0.02,), (0,)),
               rng.integers(-127, 128, w_shape).astype(np.int8))
    b = const(np.zeros(w_shape[0], np.float32), DType.FLOAT32, "b")
    return single_op(op_type, [live(x_shape), w, b], live(y_shape, name="y"), options)


HYBRID_OPS = {
    "conv": lambda: _hybrid(OpType.CONV_2D, (8, 3, 3, 4), (1, 8, 8, 4), (1, 8, 8, 8)),
    "fully_connected": lambda: _hybrid(OpType.FULLY_CONNECTED, (8, 64), (1, 64), (1, 8)),
}


@pytest.mark.parametrize("kind", sorted(HYBRID_OPS))
def test_hybrid_ops_are_refused_before_nnapi_1_2_and_taken_since(kind):
    # nnapi_delegate.cc, Validate: "Hybrid operators not supported before NNAPI 1.2"; from API 29
    # on, AddDequantizeOperatorsWhereNeeded dequantizes the weights into a float operation.
    graph, op = HYBRID_OPS[kind]()
    devices = (device("test-gpu", "gpu", 7, {"CONV_2D", "FULLY_CONNECTED"}, {Precision.FLOAT32}),)
    refused = NnapiDelegate(NnapiOptions(), android(28, devices)).is_node_supported(op, graph)
    assert not refused.ok and refused.reason == "Hybrid operators not supported before NNAPI 1.2"
    assert NnapiDelegate(NnapiOptions(), android(29, devices)).is_node_supported(op, graph)


def test_a_hybrid_lstm_is_never_delegated():
    graph = load(FIXTURES / "quant" / "lstm_dynamic.tflite")
    fixture = next(op for op in graph.ops if op.type is OpType.UNIDIRECTIONAL_SEQUENCE_LSTM)
    # version 2: the hybrid LSTM with symmetric input quantization, inside NNAPI's version ceiling
    op = dataclasses.replace(fixture, version=2,
                             options=dataclasses.replace(fixture.options, asymmetric_quantize_inputs=False))
    graph = dataclasses.replace(graph, ops=tuple(op if o is fixture else o for o in graph.ops))
    answer = NnapiDelegate(NnapiOptions(disallow_nnapi_cpu=False), load_profile("pixel4")).is_node_supported(op, graph)
    assert not answer.ok and answer.reason == "Hybrid version of this op is not supported by NN API."


def _dequantized(graph: Graph) -> Graph:
    """The model with its int8 weights replaced by float32 ones: what NNAPI is handed."""
    tensors = tuple(dataclasses.replace(t, dtype=DType.FLOAT32, quant=None,
                                        data=dequantize_array(t.data, t))
                    if t.is_constant and t.dtype is DType.INT8 and t.quant is not None else t
                    for t in graph.tensors)
    return dataclasses.replace(graph, tensors=tensors, source="")


@pytest.mark.parametrize("phone", ["pixel4", "generic"])
def test_hybrid_convolutions_run_in_float_on_the_device_nnapi_picks(phone):
    path = FIXTURES / "quant" / "resnet_style_dynamic.tflite"
    graph = load(path)
    hybrid = [i for i, op in enumerate(graph.ops) if op.type is OpType.CONV_2D
              and graph.tensors[op.inputs[1]].dtype is DType.INT8]
    assert hybrid
    profile = load_profile(phone)
    it = Interpreter(model_path=path, device=profile,
                     experimental_delegates=[make_delegate("nnapi", profile, max_number_delegated_partitions=0)])
    it.allocate_tensors()
    x = np.random.default_rng(1).standard_normal(graph.tensors[graph.inputs[0]].shape).astype(np.float32)
    it.set_tensor(graph.inputs[0], x)
    it.invoke()
    units = {u.name: u for u in profile.units}
    ops = {dict(iv.args)["node"]: iv for iv in it.simulation.soc.trace.intervals
           if iv.kind is Kind.OP and iv.inference == 0}
    assert all(ops[i].lane != "cpu_big" for i in hybrid)
    for i in hybrid:  # the weights were dequantized: float32 work, which the unit has a rate for
        assert dict(ops[i].args)["precision"] == "float32"
        assert units[ops[i].lane].macs_per_s.get(Precision.FLOAT32)
    # and the math is the float model's on the dequantized weights, not the CPU's hybrid kernel
    ref = Interpreter(graph=_dequantized(graph))
    ref.allocate_tensors()
    ref.set_tensor(graph.inputs[0], x)
    ref.invoke()
    np.testing.assert_array_equal(it.get_tensor(graph.outputs[0]), ref.get_tensor(graph.outputs[0]))


@pytest.mark.parametrize("phone", ["pixel4", "generic"])
def test_benchmark_runs_a_dynamic_range_model_on_nnapi(phone, capsys):
    from runtime.cli import main as cli

    argv = ["benchmark", "--graph", str(FIXTURES / "quant" / "mobilenet_v1_dynamic.tflite"), "--device", phone,
            "--use_nnapi", "--num_runs", "2"]
    assert cli.main(argv) == 0, capsys.readouterr().err
