"""The delegate conformance kit: generated graphs, built-ins passing, planted bugs caught, CLI, pytest plugin."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delegates.api import Delegate, DelegateKernel, Support
from runtime.conformance.kit import TOLERANCES, run_conformance
from runtime.cli.conformance import main as conformance_main
from runtime.conformance.report import Verdict
from delegates.registry import make_delegate
from runtime.ir.graph import DType
from runtime.interpreter.api import Interpreter
from runtime.ops import KERNELS, Node
from runtime.ops import conv
from runtime.ir.optypes import OpType
from runtime.testing.ops import OPS, UNSUPPORTED, generate, single_op_cases, single_op_graphs, supported_dtypes
from sim.numerics import NumericMode
from sim.profile import load_profile

pytest_plugins = ["pytester"]

# -- delegates written the way a user would, some of them wrong ----------------------------------


class _FloatKernel(DelegateKernel):
    """Runs each op of the partition with a float kernel chosen by `pick(op)`."""

    def __init__(self, partition, pick):
        super().__init__(partition)
        self.pick = pick

    def invoke(self, inputs):
        graph = self.partition.graph
        values = dict(inputs)
        for i in self.partition.nodes:
            op = graph.ops[i]
            args = [values[t] if t in values else graph.tensors[t].data for t in op.inputs]
            values[op.outputs[0]] = self.pick(op)(Node(i, op, graph), *args)
        return {t: values[t] for t in self.partition.outputs}


class FloatOpsDelegate(Delegate):
    """Takes float32 instances of `ops`; `pick` chooses the kernel that runs an op."""

    name = "FloatOpsDelegate"

    def __init__(self, ops, pick=lambda op: KERNELS[op.type], reason="only float32 ADD and MUL"):
        super().__init__()
        self.ops, self.pick, self.reason = frozenset(ops), pick, reason

    def is_node_supported(self, op, graph):
        if op.type not in self.ops:
            return Support(False, self.reason)
        if any(graph.tensors[t].dtype is not DType.FLOAT32 for t in op.inputs if t >= 0):
            return Support(False, self.reason)
        return Support(True)

    def create_kernel(self, partition):
        return _FloatKernel(partition, self.pick)


def make_add_mul() -> Delegate:
    return FloatOpsDelegate({OpType.ADD, OpType.MUL})


def make_wrong() -> Delegate:
    """Claims ADD and MUL but runs MUL's kernel for both."""
    return FloatOpsDelegate({OpType.ADD, OpType.MUL}, pick=lambda op: KERNELS[OpType.MUL])


def make_biasless_conv() -> Delegate:
    """A convolution that forgets the bias."""
    return FloatOpsDelegate({OpType.CONV_2D}, pick=lambda op: lambda node, x, w, b=None: conv.conv_2d(node, x, w),
                            reason="only float32 CONV_2D")


def make_silent() -> Delegate:
    """Refuses everything but ADD without saying why."""
    return FloatOpsDelegate({OpType.ADD}, reason="")


class NoKernelDelegate(FloatOpsDelegate):
    """Claims ops but cannot make a kernel: every case and the invoke lifecycle case must fail."""

    def create_kernel(self, partition):
        raise RuntimeError("out of shader memory")


# -- generated graphs -----------------------------------------------------------------------------

PAIRS = [(op, dt) for op in OPS for dt in supported_dtypes(op)]


@pytest.mark.parametrize("op_type,dtype", PAIRS, ids=[f"{o.name}-{d}" for o, d in PAIRS])
def test_generated_graphs_run_on_the_cpu_reference(op_type, dtype):
    for seed in range(4):
        case = generate(op_type, dtype, seed)
        assert [op.type for op in case.graph.ops] == [op_type]
        it = Interpreter(graph=case.graph, num_threads=1)
        it.allocate_tensors()
        it.invoke()
        tensors = [case.graph.tensors[t] for t in case.graph.inputs]
        eight_bit = {t.dtype for t in tensors if t.quant is not None}
        if dtype != "float32" and op_type is not OpType.QUANTIZE:
            assert eight_bit == {DType.INT8 if dtype == "int8" else DType.UINT8}


def test_pairs_the_cpu_cannot_run_are_listed_and_refused():
    assert (OpType.DIV, "int8") in UNSUPPORTED and (OpType.QUANTIZE, "float32") in UNSUPPORTED
    with pytest.raises(ValueError, match="cannot run"):
        generate(OpType.EXP, "uint8", 0)


@pytest.mark.parametrize("op_type", [OpType.CONV_2D, OpType.DEPTHWISE_CONV_2D, OpType.FULLY_CONNECTED,
                                     OpType.TRANSPOSE_CONV])
def test_int8_weights_are_symmetric_per_channel_with_int32_bias_at_input_times_weight_scale(op_type):
    for seed in range(5):
        case = generate(op_type, "int8", seed)
        g, op = case.graph, case.op
        x, w = (2, 1) if op_type is OpType.TRANSPOSE_CONV else (0, 1)
        weights = g.tensors[op.inputs[w]]
        assert weights.dtype is DType.INT8 and set(weights.quant.zero_point) == {0}
        assert len(weights.quant.scale) == weights.shape[weights.quant.axis]
        bias_at = 3 if op_type is OpType.TRANSPOSE_CONV else 2
        if bias_at < len(op.inputs) and op.inputs[bias_at] >= 0:
            bias = g.tensors[op.inputs[bias_at]]
            expected = np.float32(g.tensors[op.inputs[x]].quant.scale[0]) * np.float32(weights.quant.scale)
            assert bias.dtype is DType.INT32
            np.testing.assert_allclose(bias.quant.scale, expected, rtol=1e-6)


def test_uint8_convolutions_use_per_tensor_asymmetric_weights():
    g = generate(OpType.CONV_2D, "uint8", 3).graph
    weights = g.tensors[g.ops[0].inputs[1]]
    assert weights.dtype is DType.UINT8 and len(weights.quant.scale) == 1


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_single_op_graphs_strategy_gives_runnable_graphs(data):
    op_type, dtype = data.draw(st.sampled_from(PAIRS))
    graph = data.draw(single_op_graphs(op_type, dtype))
    it = Interpreter(graph=graph, num_threads=1)
    it.allocate_tensors()
    it.invoke()
    assert graph.ops[0].type is op_type


@settings(max_examples=10, deadline=None)
@given(single_op_cases("CONV_2D"))
def test_cases_strategy_summarises_shapes_and_options(case):
    assert " -> " in case.shapes and case.shapes.count("w") == 1


def test_generation_is_reproducible():
    a, b = generate("CONV_2D", "int8", 7), generate("CONV_2D", "int8", 7)
    assert (a.shapes, a.options) == (b.shapes, b.options)
    assert all(np.array_equal(x.data, y.data) for x, y in zip(a.graph.tensors, b.graph.tensors)
               if x.data is not None)


@pytest.mark.parametrize("dtype, k", [("int8", 464), ("uint8", 186)])
def test_an_8_bit_draw_litert_would_refuse_is_drawn_again(dtype, k):
    """These draws are an ADD with a fused ReLU6 whose calibration samples all come out negative: an
    all-zero output the converter gives a range of +-1e-6, which LiteRT's ADD refuses. `dtb conformance
    --ops ADD --examples 465` once stopped on the kit's own case there."""
    from runtime.testing.ops import case_rng

    case = generate("ADD", dtype, case_rng(0, "ADD", dtype, k))
    again = generate("ADD", dtype, case_rng(0, "ADD", dtype, k))
    assert case.op_type is OpType.ADD and case.shapes == again.shapes   # still reproducible
    out = case.graph.tensors[case.graph.outputs[0]]
    assert out.quant.scale[0] > 1e-6


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(st.sampled_from(["int8", "uint8"]).flatmap(lambda dtype: single_op_cases("ADD", dtype)))
def test_the_8_bit_add_strategy_gives_only_graphs_litert_takes(case):
    """Hypothesis soon tries an all-negative ADD + ReLU6 (the case above); building the graph checks
    it as LiteRT's Prepare does, and the strategy rejects the draw. It once failed
    test_single_op_graphs_strategy_gives_runnable_graphs now and then."""
    it = Interpreter(graph=case.graph, num_threads=1)
    it.allocate_tensors()   # LiteRT's Prepare checks
    it.invoke()
    assert case.op_type is OpType.ADD


# -- the kit on the built-in delegates -----------------------------------------------------------

BUILTINS = [("gpu", "pixel4"), ("hexagon", "pixel3"), ("coreml", "iphone_xs"), ("nnapi", "pixel4")]


@pytest.mark.parametrize("name,device", BUILTINS)
def test_builtin_delegates_pass_the_kit(name, device):
    profile = load_profile(device)
    report = run_conformance(lambda: make_delegate(name, profile), device, examples=3)
    assert report.ok, report.to_text()
    assert report.count(Verdict.PASS) > 20
    assert [c.verdict for c in report.cases if c.op == "lifecycle"] == [Verdict.PASS] * 4


def test_modes_get_their_tolerances():
    profile = load_profile("pixel4")
    gpu = run_conformance(lambda: make_delegate("gpu", profile), "pixel4", examples=2, ops=["ADD"])
    by_dtype = {c.dtype: c for c in gpu.cases if c.op == "ADD"}
    assert by_dtype["float32"].mode == "float16"
    assert by_dtype["int8"].unit == "steps" and by_dtype["int8"].tolerance == TOLERANCES[NumericMode.FLOAT16].steps
    hexagon = run_conformance(lambda: make_delegate("hexagon", load_profile("pixel3")), "pixel3", examples=2,
                              ops=["CONV_2D"])
    assert {(c.mode, c.tolerance) for c in hexagon.cases if c.op == "CONV_2D"} == {("integer", 0.0)}


def test_reports_are_deterministic_per_seed():
    one = run_conformance(make_add_mul, examples=3, seed=5, ops=["ADD", "MUL"])
    two = run_conformance(make_add_mul, examples=3, seed=5, ops=["ADD", "MUL"])
    other = run_conformance(make_add_mul, examples=3, seed=6, ops=["ADD", "MUL"])
    assert one == two and one.to_text() == two.to_text()
    assert [c.shapes for c in one.cases] != [c.shapes for c in other.cases]


# -- planted bugs --------------------------------------------------------------------------------


def test_a_correct_custom_delegate_passes_with_its_own_kernel_tolerance():
    report = run_conformance(make_add_mul, examples=4, ops=["ADD", "MUL", "CONV_2D"])
    assert report.ok, report.to_text()
    assert {c.mode for c in report.cases if c.op != "lifecycle"} == {"own kernel"}
    assert ("CONV_2D/float32", "only float32 ADD and MUL") in report.unclaimed
    assert [c.verdict for c in report.cases if c.op == "lifecycle"] == [Verdict.PASS] * 4


def test_mul_kernel_run_for_add_fails_naming_add_only():
    report = run_conformance(make_wrong, examples=4, ops=["ADD", "MUL"])
    assert not report.ok
    assert {c.op for c in report.failures} == {"ADD"}
    assert all(c.verdict is Verdict.PASS for c in report.cases if c.op == "MUL")
    assert "ADD" in report.to_text() and report.summary().startswith("FAIL")


def test_conv_that_ignores_its_bias_fails():
    report = run_conformance(make_biasless_conv, examples=4, ops=["CONV_2D"])
    failed = report.failures
    assert failed and {c.op for c in failed} == {"CONV_2D"}
    assert all(c.max_error > c.tolerance for c in failed)


def test_rejections_without_a_reason_are_flagged():
    report = run_conformance(make_silent, examples=2, ops=["ADD", "MUL"])
    flagged = {(c.op, c.dtype) for c in report.failures}
    assert flagged == {("ADD", "int8"), ("ADD", "uint8"), ("MUL", "float32"), ("MUL", "int8"), ("MUL", "uint8")}
    assert all("without a reason" in c.message for c in report.failures)


def test_a_delegate_that_cannot_make_kernels_fails_cases_and_the_invoke_lifecycle_case():
    report = run_conformance(lambda: NoKernelDelegate({OpType.ADD}), examples=2, ops=["ADD"])
    rows = {c.name: c for c in report.cases}
    first = rows["ADD/float32/0"]
    assert first.verdict is Verdict.FAIL and "out of shader memory" in first.message
    assert rows["lifecycle/invoke"].verdict is Verdict.FAIL
    assert rows["lifecycle/prepare"].verdict is Verdict.PASS  # create_kernel fails first: CPU plan restored


# -- the contract of the declared hooks -----------------------------------------------------------


class _NoUnitArgument(FloatOpsDelegate):
    def unit_scales(self):  # the runtime passes the unit
        return None


class _SpeedAsText(FloatOpsDelegate):
    def init_seconds(self, spec, graph):
        return "fast"


class _DevicesAsList(FloatOpsDelegate):
    def devices_for(self, partition):
        return ["npu"]


class _DynamicAsText(FloatOpsDelegate):
    allows_dynamic_tensors = "yes"


class _StepRaises(FloatOpsDelegate):
    def step_seconds(self, spec):
        raise RuntimeError("no driver")


class _IntModeKernel(_FloatKernel):
    mode = 3


class _IntModeDelegate(FloatOpsDelegate):
    def create_kernel(self, partition):
        return _IntModeKernel(partition, self.pick)


class _OwnNames(FloatOpsDelegate):
    """Overrides with parameter names of its own and an optional extra: the runtime passes arguments
    by position, so this keeps the contract."""

    def init_seconds(self, unit_spec, model, extra=0.0):
        return 0.1 + extra

    def fused_nodes(self, part):
        return frozenset()


def make_devices_as_list() -> Delegate:
    """Runs every case right, but its devices_for returns a list (only a calibration calls it)."""
    return _DevicesAsList({OpType.ADD, OpType.MUL})


@pytest.mark.parametrize("cls, hook, message", [
    (_NoUnitArgument, "Delegate.unit_scales",
     "_NoUnitArgument.unit_scales() cannot be called as the runtime calls it: unit_scales(unit) -> Scales"),
    (_SpeedAsText, "Delegate.init_seconds",
     "_SpeedAsText.init_seconds(spec, graph) returned str 'fast'; the contract (delegates.api) declares float"),
    (_DevicesAsList, "Delegate.devices_for",
     "_DevicesAsList.devices_for(partition) returned list ['npu']; the contract (delegates.api) declares "
     "tuple[str, ...]"),
    (_DynamicAsText, "Delegate.allows_dynamic_tensors",
     "_DynamicAsText.allows_dynamic_tensors is str 'yes'; the contract (delegates.api) declares bool"),
    (_StepRaises, "Delegate.step_seconds", "_StepRaises.step_seconds(spec) raised RuntimeError: no driver"),
    (_IntModeDelegate, "DelegateKernel.mode",
     "_IntModeKernel.mode is int 3; the contract (delegates.api) declares NumericMode | str | None"),
])
def test_a_broken_hook_is_a_failed_contract_case(cls, hook, message):
    report = run_conformance(lambda: cls({OpType.ADD}), examples=1, ops=["ADD"])
    rows = [c for c in report.cases if c.op == "contract"]
    assert [(c.name, c.verdict, c.options, c.message) for c in rows] == [
        (f"contract/{hook}", Verdict.FAIL, f"hook {hook}", message)]
    assert not report.ok and message in report.to_text(width=200)


def test_a_delegate_keeping_the_contract_adds_no_contract_case():
    for make in (make_add_mul, lambda: _OwnNames({OpType.ADD})):
        report = run_conformance(make, examples=1, ops=["ADD"])
        assert report.ok and not [c for c in report.cases if c.op == "contract"], report.to_text()


def test_the_lifecycle_wrapper_is_the_wrapped_delegate_but_for_the_failing_callback():
    from delegates.contract import hooks
    from runtime.conformance.lifecycle import FailAt, FaultyDelegate

    inner = make_delegate("nnapi", load_profile("pixel4"))
    wrapper = FaultyDelegate(inner, FailAt.PREPARE)
    for hook in hooks(Delegate):
        if hook.name not in ("is_node_supported", "create_kernel"):
            assert getattr(wrapper, hook.name) == getattr(inner, hook.name), hook.name


def test_the_contract_is_checked_without_a_claimed_op():
    report = run_conformance(lambda: _DynamicAsText(()), examples=1, ops=["ADD"])
    assert [c.name for c in report.failures] == ["contract/Delegate.allows_dynamic_tensors"]


# -- command line and pytest plugin --------------------------------------------------------------


def test_cli_exit_codes(capsys):
    assert conformance_main(["tests.test_conformance:make_add_mul", "--ops", "ADD,MUL", "--examples", "2"]) == 0
    assert "PASS: FloatOpsDelegate" in capsys.readouterr().out
    assert conformance_main(["tests.test_conformance:make_wrong", "--ops", "ADD,MUL", "--examples", "2"]) == 1
    out = capsys.readouterr().out
    assert "FAIL: FloatOpsDelegate" in out and "ADD" in out
    assert conformance_main(["no_such_package.delegate:make"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no_such_package" in err
    builtin = ["--delegate", "gpu", "--device", "pixel4", "--ops", "SOFTMAX", "--examples", "2"]
    assert conformance_main(builtin) == 0
    assert "TfLiteGpuDelegateV2 on pixel4" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    # generated and kept for every op and dtype before the first case ran: the memory filled instead
    (["--examples", "99999999999999"], "examples must be at most 1,000"),
    # no op left once the commas were split: 0 cases, and the run printed PASS
    (["--ops", ","], "no op given to check; ops: ADD,"),
])
def test_cli_refuses_arguments_that_check_nothing_or_cannot_be_held(capsys, argv, message):
    assert conformance_main(["tests.test_conformance:make_add_mul", *argv]) == 1
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and message in captured.err and not captured.out


@pytest.fixture
def inner_pytest(pytester, monkeypatch):
    """Run pytest with only the conformance plugin (no auto-loaded entry points, so it loads once)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    return lambda *args: pytester.runpytest("-p", "runtime.conformance.pytest_plugin", "-p", "no:cacheprovider", *args)


def test_plugin_runs_one_item_per_case(inner_pytest):
    result = inner_pytest("--delegate-conformance=tests.test_conformance:make_add_mul",
                          "--conformance-ops=ADD,MUL", "--conformance-examples=2", "-v")
    # ADD and MUL in float32, 2 instances each (8-bit ones refused with a reason: not claimed), 4 lifecycle
    result.assert_outcomes(passed=8)
    result.stdout.fnmatch_lines(["*delegate_conformance::ADD?float32-0? PASSED*",
                                 "*delegate_conformance::lifecycle?invoke? PASSED*"])


def test_plugin_fails_items_of_failing_cases(inner_pytest):
    result = inner_pytest("--delegate-conformance=tests.test_conformance:make_wrong",
                          "--conformance-ops=ADD,MUL", "--conformance-examples=2")
    result.assert_outcomes(passed=6, failed=2)
    result.stdout.fnmatch_lines(["FAILED delegate_conformance::ADD?float32-0?*",
                                 "FAILED delegate_conformance::ADD?float32-1?*"])


def test_plugin_fails_the_contract_case_of_a_broken_hook(inner_pytest):
    result = inner_pytest("--delegate-conformance=tests.test_conformance:make_devices_as_list",
                          "--conformance-ops=ADD,MUL", "--conformance-examples=2")
    result.assert_outcomes(passed=8, failed=1)
    result.stdout.fnmatch_lines(["FAILED delegate_conformance::contract?Delegate.devices_for?*"])


def test_plugin_is_inert_without_its_option(inner_pytest, pytester):
    pytester.makepyfile("def test_plain():\n    assert True\n")
    result = inner_pytest()
    result.assert_outcomes(passed=1)
    assert "delegate conformance" not in result.stdout.str()


def test_plugin_reports_a_bad_factory_as_a_usage_error(inner_pytest):
    result = inner_pytest("--delegate-conformance=no_such_package.delegate:make")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--delegate-conformance*no_such_package*"])


def test_dtb_conformance_runs_the_kit(capsys):
    from runtime.cli.main import main

    assert main(["conformance", "--delegate", "hexagon", "--device", "pixel3", "--examples", "1",
                 "--ops", "ADD,CONV_2D"]) == 0
    assert "PASS" in capsys.readouterr().out
    assert main(["conformance", "no.such.module:make"]) == 1
    assert "dtb conformance: error:" in capsys.readouterr().err
