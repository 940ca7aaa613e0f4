"""The built-in delegates' support answers on zoo models and one-op graphs, and the ops table."""

from __future__ import annotations

import pytest

from delegates import coreml, gpu, hexagon, nnapi_rules
from delegates.api import Delegate, DelegateError
from delegates.coreml import CoreMlDelegate, CoreMlDevices, CoreMlOptions
from delegates.gpu import GpuDelegate, GpuOptions, Priority
from delegates.hexagon import HexagonDelegate, HexagonOptions
from delegates.qnn import QnnDelegate
from delegates.nnapi import NnapiDelegate, NnapiOptions
from delegates.rulekit import doc
from delegates.table import supported_ops_table
from runtime.ir.graph import DType
from runtime.ir.optypes import OpType
from runtime.ir.options import (Conv2DOptions, Padding, Pool2DOptions, ReducerOptions, ReshapeOptions,
                             SoftmaxOptions)
from tests.delegate_kit import android, const, iphone, live, single_op, verdicts, zoo

HEXAGON_FLOAT_REASON = doc(hexagon.eight_bit_data)


def _all_delegates():
    return [GpuDelegate(), HexagonDelegate(), CoreMlDelegate(), NnapiDelegate(NnapiOptions(), android())]


# -- zoo models -------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["mobilenet_v1", "mobilenet_v2"])
def test_hexagon_rejects_every_op_of_a_float_model(model):
    answers = verdicts(HexagonDelegate(), zoo(model))
    assert answers and all(not a.ok and a.reason == HEXAGON_FLOAT_REASON for a in answers)


@pytest.mark.parametrize("model", ["mobilenet_v1", "mobilenet_v2"])
def test_hexagon_takes_nearly_all_of_the_int8_model(model):
    answers = verdicts(HexagonDelegate(), zoo(model, "int8"))
    assert sum(a.ok for a in answers) >= 0.9 * len(answers)


def test_coreml_takes_nothing_of_an_int8_model_and_most_of_the_float_one():
    delegate = CoreMlDelegate()
    assert not any(verdicts(delegate, zoo("mobilenet_v2", "int8")))
    taken = verdicts(delegate, zoo("mobilenet_v2"))
    assert sum(a.ok for a in taken) >= len(taken) - 1  # the rank-2 RESHAPE stays on the CPU


def test_gpu_takes_float_and_int8_models_but_int8_only_with_quant_enabled():
    int8 = zoo("mobilenet_v1", "int8")
    assert all(verdicts(GpuDelegate(), zoo("mobilenet_v1")))
    assert all(verdicts(GpuDelegate(), int8))
    refused = verdicts(GpuDelegate(GpuOptions(enable_quant=False)), int8)
    assert all(a.reason == "OP is supported, but tensor type/shape isn't compatible." for a in refused)


# -- GPU --------------------------------------------------------------------------------------


def test_gpu_rejects_a_rank_5_tensor():
    graph, op = single_op(OpType.ADD, [live((1, 2, 2, 2, 3)), live((1, 2, 2, 2, 3), name="y")],
                          live((1, 2, 2, 2, 3), name="z"))
    answer = GpuDelegate().is_node_supported(op, graph)
    assert not answer.ok and answer.reason == "OP is supported, but tensor type/shape isn't compatible."


def test_gpu_rejects_an_op_version_above_its_ceiling():
    w, b = const([[[[1.0]]]], DType.FLOAT32, "w"), const([0.0], DType.FLOAT32, "b")
    args = ([live((1, 4, 4, 1)), w, b], live((1, 4, 4, 1), name="y"), Conv2DOptions())
    assert GpuDelegate().is_node_supported(*reversed(single_op(OpType.CONV_2D, *args, version=6)))
    answer = GpuDelegate().is_node_supported(*reversed(single_op(OpType.CONV_2D, *args, version=7)))
    assert answer.reason == "Max version supported: 6."


def test_gpu_quantize_ops_need_quant_enabled():
    graph, op = single_op(OpType.QUANTIZE, [live((1, 4))], live((1, 4), DType.INT8, "q"))
    assert GpuDelegate().is_node_supported(op, graph)
    answer = GpuDelegate(GpuOptions(enable_quant=False)).is_node_supported(op, graph)
    assert answer.reason == "Operation is not supported."


@pytest.mark.parametrize("options, mode", [
    (GpuOptions(), "FLOAT16"),
    (GpuOptions(is_precision_loss_allowed=False), "FLOAT32_VIEW"),
    (GpuOptions(priorities=(Priority.MAX_PRECISION, Priority.MIN_LATENCY)), "FLOAT32_VIEW"),
    (GpuOptions(is_precision_loss_allowed=False, priorities=(Priority.MIN_LATENCY,)), "FLOAT16"),
])
def test_gpu_numeric_mode_follows_precision_options(options, mode):
    assert GpuDelegate(options).numeric_mode(zoo("mobilenet_v1", "int8")) == mode


# -- the reason is the rule's docstring -----------------------------------------------------


def _conv(dtype, stride=1, version=1):
    w, b = const([[[[1]]]], dtype, "w"), const([0], DType.INT32 if dtype is DType.INT8 else dtype, "b")
    opts = Conv2DOptions(stride_w=stride, stride_h=stride)
    return single_op(OpType.CONV_2D, [live((1, 8, 8, 1), dtype), w, b], live((1, 8, 8, 1), dtype, "y"),
                     opts, version)


def _pool(padding, size, dtype=DType.INT8):
    opts = Pool2DOptions(padding=padding, filter_width=size, filter_height=size)
    return single_op(OpType.MAX_POOL_2D, [live((1, 16, 16, 1), dtype)], live((1, 16, 16, 1), dtype, "y"),
                     opts, 2)


def _softmax(beta):
    return single_op(OpType.SOFTMAX, [live((1, 10))], live((1, 10), name="y"), SoftmaxOptions(beta))


def _reshape(target):
    return single_op(OpType.RESHAPE, [live((1, 4, 4, 2)), const(target)], live(tuple(target), name="y"),
                     ReshapeOptions(tuple(target)))


def _mean(keep_dims, axes):
    return single_op(OpType.MEAN, [live((1, 4, 4, 2)), const(axes)], live((1, 1, 1, 2), name="y"),
                     ReducerOptions(keep_dims))


def _sum():
    return single_op(OpType.SUM, [live((1, 4, 4, 2), DType.INT8), const([1, 2])],
                     live((1, 2), DType.INT8, "y"), ReducerOptions(False))


@pytest.mark.parametrize("delegate, case, rule", [
    (HexagonDelegate(), _conv(DType.INT8, stride=4, version=3), hexagon.stride_at_most_3),
    (HexagonDelegate(), _pool(Padding.SAME, 13), hexagon.small_max_pool_window),
    (HexagonDelegate(), _sum(), hexagon.never),
    (HexagonDelegate(), _conv(DType.FLOAT32), hexagon.eight_bit_data),
    (GpuDelegate(), _softmax(2.0), gpu.softmax_beta_one),
    (CoreMlDelegate(), _softmax(0.5), coreml.softmax_beta_one),
    (CoreMlDelegate(), _mean(False, [1, 2]), coreml.mean_over_height_width),
    (CoreMlDelegate(), _conv(DType.INT8), coreml.float_input),
    (CoreMlDelegate(CoreMlOptions(coreml_version=2)), _reshape([1, 8, 4]), None),
    (NnapiDelegate(NnapiOptions(accelerator_name="nnapi-reference"), android(30)),
     _reshape([1, 2, 16]), None),
])
def test_refusal_reason_is_the_rule_docstring(delegate, case, rule):
    graph, op = case
    answer = delegate.is_node_supported(op, graph)
    if rule is None:
        assert answer.ok, answer.reason
    else:
        assert not answer.ok and answer.reason == doc(rule)


def test_coreml_reshape_only_with_version_2():
    graph, op = _reshape([1, 8, 4])
    answer = CoreMlDelegate(CoreMlOptions(coreml_version=3)).is_node_supported(op, graph)
    assert answer.reason == "RESHAPE runs only with coreml_version 2."


def test_every_rule_has_a_reason():
    for delegate in _all_delegates():
        for rules in (*delegate.rule_table().values(), delegate.common_rules()):
            assert all(r.__doc__ and doc(r) for r in rules)


# -- Core ML and Hexagon availability, partition defaults -------------------------------------


def test_coreml_without_neural_engine_supports_nothing_unless_all_devices():
    graph = zoo("mobilenet_v1")
    answers = verdicts(CoreMlDelegate(profile=iphone(neural_engine=False)), graph)
    assert all(not a.ok and "does not have Neural Engine" in a.reason for a in answers)
    anyway = CoreMlDelegate(CoreMlOptions(enabled_devices=CoreMlDevices.ALL), iphone(neural_engine=False))
    assert any(verdicts(anyway, graph)) and anyway.unit_name == "gpu"
    assert CoreMlDelegate(profile=iphone()).unit_name == "ane"
    assert not any(verdicts(CoreMlDelegate(profile=android()), graph))


def test_coreml_version_must_be_2_or_3():
    with pytest.raises(DelegateError, match="coreml_version"):
        CoreMlDelegate(CoreMlOptions(coreml_version=4))
    assert CoreMlDelegate(CoreMlOptions(coreml_version=0)).config.coreml_version == 3


def test_hexagon_needs_a_dsp():
    no_dsp = HexagonDelegate(profile=android(units=("gpu",)))
    assert not any(verdicts(no_dsp, zoo("mobilenet_v1", "int8")))
    assert HexagonDelegate(profile=android()).unit_name == "dsp"


@pytest.mark.parametrize("delegate, most, fewest", [
    (GpuDelegate(), 1, 0), (GpuDelegate(GpuOptions(max_delegated_partitions=0)), 1, 0),
    (GpuDelegate(GpuOptions(max_delegated_partitions=3)), 3, 0),
    (HexagonDelegate(), 4, 2), (HexagonDelegate(HexagonOptions(max_delegated_partitions=7,
                                                                min_nodes_per_partition=5)), 7, 5),
    (CoreMlDelegate(), 0, 2), (NnapiDelegate(NnapiOptions(), android()), 3, 0),
    (NnapiDelegate(NnapiOptions(max_number_delegated_partitions=-1), android()), 0, 0),
])
def test_effective_partition_limits(delegate, most, fewest):
    assert (delegate.options.max_delegated_partitions, delegate.options.min_nodes_per_partition) == (most, fewest)


def test_hexagon_caps_partitions_at_16_with_a_warning():
    delegate = HexagonDelegate(HexagonOptions(max_delegated_partitions=40))
    assert delegate.options.max_delegated_partitions == 16
    assert delegate.warnings and "40" in delegate.warnings[0]
    assert not HexagonDelegate(HexagonOptions(max_delegated_partitions=16)).warnings


def test_framework_attributes():
    # the class whose log_lines the delegate uses: its own, or SimpleDelegate's line (Delegate's)
    expected = {GpuDelegate: ("TfLiteGpuDelegateV2", GpuDelegate, True, False),
                HexagonDelegate: ("TfLiteHexagonDelegate", Delegate, False, False),
                CoreMlDelegate: ("TfLiteCoreMlDelegate", CoreMlDelegate, True, False),
                NnapiDelegate: ("TfLiteNnapiDelegate", Delegate, False, True)}
    for delegate in _all_delegates():
        writer = next(c for c in type(delegate).__mro__ if "log_lines" in vars(c))
        assert (delegate.name, writer, delegate.fp16_dequant_rule,
                delegate.allows_dynamic_tensors) == expected[type(delegate)]


@pytest.mark.parametrize("delegate, mode, unit", [
    (GpuDelegate(), "FLOAT16", "gpu"), (HexagonDelegate(), "INTEGER", "dsp"),
    (CoreMlDelegate(), "FLOAT16", "ane"),
    (NnapiDelegate(NnapiOptions(accelerator_name="test-npu"), android()), "INTEGER", "npu"),
])
def test_create_kernel_runs_in_the_delegates_mode_and_unit(delegate, mode, unit):
    kernel_module = pytest.importorskip("delegates.kernel")

    class Partition:
        graph = zoo("mobilenet_v1", "int8")
        nodes = ()

    kernel = delegate.create_kernel(Partition())
    assert isinstance(kernel, kernel_module.UnitKernel)
    assert (kernel.mode.name, kernel.unit) == (mode, unit)


# -- the supported-ops table ------------------------------------------------------------------


def test_table_lists_every_op_of_every_rule_table():
    delegates = _all_delegates()
    text = supported_ops_table(delegates)
    header, _, *rows = text.split("\n\n")[0].splitlines()
    assert header.split("|")[2:-1] == [" gpu ", " hexagon ", " coreml ", " nnapi "]
    cells = {row.split("|")[1].strip(): [c.strip() for c in row.split("|")[2:-1]] for row in rows}
    for column, delegate in enumerate(delegates):
        table = delegate.rule_table()
        for op_type, rules in table.items():
            cell = cells[op_type.name][column]
            assert cell == "yes" if not rules else all(doc(r).rstrip(".") in cell for r in rules)
        assert all(cells[name][column] == "-" for name in cells if OpType[name] not in table)


def test_table_by_name_notes_the_rules_every_op_passes():
    text = supported_ops_table(["hexagon", "gpu"])
    sum_row = next(line for line in text.splitlines() if line.startswith("| SUM |"))
    assert doc(hexagon.never).rstrip(".") in sum_row.split("|")[2]
    assert "- hexagon, every op: " in text and doc(hexagon.eight_bit_data).rstrip(".") in text


def test_nnapi_rule_table_names_each_minimum_level():
    table = NnapiDelegate(NnapiOptions(), android(27)).rule_table()
    assert set(table) == set(nnapi_rules.MIN_LEVEL)
    assert "API level 28" in doc(table[OpType.PAD][0])
    assert "API level 33" in doc(table[OpType.BATCH_MATMUL][0])


@pytest.mark.parametrize("cls", [GpuDelegate, HexagonDelegate, CoreMlDelegate, NnapiDelegate, QnnDelegate])
def test_builtin_delegates_share_one_create_kernel(cls):
    from delegates.builtin import BuiltinDelegate

    assert issubclass(cls, BuiltinDelegate) and "create_kernel" not in vars(cls)


def test_the_shared_kernel_runs_on_the_delegates_unit_in_its_mode():
    from delegates.kernel import UnitKernel
    from runtime.interpreter.delegation import DelegateStep, apply_delegates

    delegate = GpuDelegate(GpuOptions(is_precision_loss_allowed=True))
    steps = [s for s in apply_delegates(zoo("mobilenet_v1"), [delegate]).plan if isinstance(s, DelegateStep)]
    assert steps and all(isinstance(s.kernel, UnitKernel) for s in steps)
    assert {(s.kernel.unit, s.kernel.mode.name) for s in steps} == {("gpu", "FLOAT16")}
