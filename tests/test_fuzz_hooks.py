"""Generated damaged answers from every hook of an external delegate, and wrong use of the Python API:
each is one DelegateError (or TypeError / ValueError / RuntimeError) naming what was wrong, never a
traceback, a hang, a made-up figure or wrong outputs."""

from __future__ import annotations

import math
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from delegates import guard
from delegates.api import Support
from delegates.guard import DelegateTimeout, time_budget
from runtime.interpreter.api import Interpreter
from runtime.interpreter.delegation import MAX_LOG_LINES
from runtime.ir.errors import DelegateError
from runtime.zoo import build
from sim.unit import Scales
from tests.external_delegates import exits_in_invoke
from tests.faulty_delegates import FaultyDelegate, FaultyKernel

ROOT = Path(__file__).resolve().parent.parent
HANG_GUARD_S = 120       # only against a hang: never a pass criterion on speed
FEW = settings(max_examples=12, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# Damaged answers of every kind the issue names: NaN, negative, infinite, absurdly large, wrong type.
BAD_NUMBERS = st.sampled_from([math.nan, -1, -1e-9, math.inf, -math.inf, 1e300, 3601.0, "x", None, [1.0],
                               (0.1,), {}, True, b"1", complex(1, 0)]) | st.floats(max_value=-1e-12) \
    | st.floats(min_value=3600.001, allow_infinity=True) | st.text(max_size=5)
BAD_SCALES = st.sampled_from([None, 1.0, "fast", [1, 1, 1, 1], {"rate": 1.0}]) | st.builds(
    Scales, rate=st.sampled_from([math.nan, 0.0, -1.0, math.inf, 1e300]), power=st.just(1.0))
BAD_NODE_UNITS = st.sampled_from([None, [1], "gpu", 5, {0: 5}, {0: None}, {0: ""}, {"0": "gpu"}, {10**6: "gpu"},
                                  {-1: "gpu"}, {True: "gpu"}, {0: ["gpu"]}])
BAD_FUSED = st.sampled_from([None, 5, "1", {"a": 1}, [10**6], [-1], ["0"], [None], [True], [1.5]])
BAD_MODES = st.sampled_from([5, "fast", "", [], 1.5, object()])
BAD_UNITS = st.sampled_from([5, "", ["gpu"], 1.5, "no_such_unit"])


@pytest.fixture(scope="module")
def graph():
    return build("tiny_cnn", resolution=16)


@pytest.fixture(scope="module", autouse=True)
def release_hung_calls():
    yield
    RELEASE.set()


RELEASE = threading.Event()


class HookKernel(FaultyKernel):
    """The reference outputs; `mode` and `unit` as the test sets them."""


class HookDelegate(FaultyDelegate):
    """Every op onto the GPU, with the hooks named in `answers` answering what they hold (a callable
    is called with the hook's arguments)."""

    name = "HookDelegate"

    def __init__(self, **answers):
        super().__init__("none")
        self.answers = answers
        for hook, answer in answers.items():
            if hook in ("mode", "unit"):
                continue
            setattr(self, hook, answer if callable(answer) else (lambda *_, a=answer: a))

    def create_kernel(self, partition):
        kernel = HookKernel(partition, "none")
        for attr in ("mode", "unit"):
            if attr in self.answers:
                setattr(kernel, attr, self.answers[attr])
        return kernel


def run(graph, delegate, fallback: bool = False, budget: float = 5.0) -> np.ndarray:
    with time_budget(budget):
        it = Interpreter(graph=graph, experimental_delegates=[delegate], device="pixel4")
        it.allocate_tensors()
        it.set_tensor(graph.inputs[0], sample(graph))
        (it.invoke_with_cpu_fallback if fallback else it.invoke)()
        return it.get_tensor(graph.outputs[0])


def sample(graph):
    return np.random.default_rng(0).standard_normal(graph.tensors[graph.inputs[0]].shape).astype(np.float32)


def refused(graph, hook: str, **answers) -> str:
    """The one-line DelegateError the damaged answer gives, checked to name the delegate and the hook."""
    with pytest.raises(DelegateError) as info:
        run(graph, HookDelegate(**answers))
    text = str(info.value)
    assert "\n" not in text and "HookDelegate" in text and hook in text, text
    return text


@FEW
@given(hook=st.sampled_from(["init_seconds", "invoke_seconds"]), value=BAD_NUMBERS)
def test_a_damaged_seconds_hook_is_refused_naming_it(graph, hook, value):
    refused(graph, hook, **{hook: value})


@FEW
@given(value=BAD_SCALES)
def test_damaged_unit_scales_are_refused(graph, value):
    refused(graph, "unit_scales", unit_scales=value)


@FEW
@given(value=BAD_NODE_UNITS)
def test_damaged_node_units_are_refused(graph, value):
    refused(graph, "node_units", node_units=value)


@FEW
@given(value=BAD_FUSED)
def test_damaged_fused_nodes_are_refused(graph, value):
    refused(graph, "fused_nodes", fused_nodes=value)


@FEW
@given(value=BAD_FUSED)
def test_damaged_absorbed_nodes_are_refused(graph, value):
    refused(graph, "absorbed_nodes", absorbed_nodes=value)


@FEW
@given(value=BAD_MODES)
def test_a_damaged_kernel_mode_is_refused(graph, value):
    refused(graph, "mode", mode=value)


@FEW
@given(value=BAD_UNITS)
def test_a_damaged_kernel_unit_is_refused(graph, value):
    refused(graph, "unit", unit=value)


@FEW
@given(hook=st.sampled_from(["init_seconds", "invoke_seconds", "unit_scales", "node_units", "fused_nodes",
                             "absorbed_nodes"]),
       exc=st.sampled_from([RuntimeError("broke"), KeyError("k"), ZeroDivisionError(), SystemExit(3)]))
def test_an_exception_in_a_hook_is_a_delegate_error_naming_it(graph, hook, exc):
    def fails(*_):
        raise exc
    refused(graph, hook, **{hook: fails})


@pytest.mark.parametrize("value", [5, ["no"], b"x"])
def test_a_damaged_platform_refusal_restores_the_cpu_plan(graph, value):
    """platform_refusal is read when the delegate is applied: TFLite's rule, the CPU plan back."""
    with time_budget(5.0):
        it = Interpreter(graph=graph, experimental_delegates=[HookDelegate(platform_refusal=value)], device="pixel4")
    delegation = it.simulation.delegation
    assert delegation.restored
    assert "platform_refusal" in delegation.per_delegate[-1].error


@pytest.mark.parametrize("ok", ["no", None, 1, np.array([True, False])])
def test_a_support_whose_ok_is_no_bool_restores_the_cpu_plan_naming_it(graph, ok):
    """These failed inside Python's bool() with its words ("__bool__ should return bool, returned
    str"); now the message says what the delegate returned. TFLite's rule: the CPU plan back."""
    with time_budget(5.0):
        it = Interpreter(graph=graph, experimental_delegates=[HookDelegate(is_node_supported=Support(ok))],
                         device="pixel4")
    delegation = it.simulation.delegation
    assert delegation.restored
    assert "HookDelegate is_node_supported returned a Support whose ok is" in delegation.per_delegate[-1].error


def test_invoke_seconds_failing_falls_back_to_the_cpu(graph):
    """InvokeWithCPUFallback's rule holds for a damaged timing hook as for a failing kernel."""
    cpu = Interpreter(graph=graph)
    cpu.allocate_tensors()
    cpu.set_tensor(graph.inputs[0], sample(graph))
    cpu.invoke()
    got = run(graph, HookDelegate(invoke_seconds=math.nan), fallback=True)
    np.testing.assert_array_equal(got, cpu.get_tensor(graph.outputs[0]))


@pytest.mark.parametrize("hook", ["init_seconds", "invoke_seconds", "unit_scales"])
def test_a_hook_that_never_returns_is_stopped_within_the_budget(graph, hook):
    """The budget covers the timing hooks too, init as well as invoke; the hung thread ends when
    RELEASE is set after the tests."""
    def hangs(*_):
        RELEASE.wait()
        return 0.0
    with pytest.raises(DelegateTimeout, match=f"HookDelegate {hook} did not return within 0.2 s"):
        run(graph, HookDelegate(**{hook: hangs}), budget=0.2)


def test_a_budget_of_zero_means_none(graph):
    """0 turns the watching off: the hooks run as plain calls, and a damaged one is still refused."""
    calls = []

    def init(spec, g):
        calls.append(threading.current_thread())
        return 0.001
    run(graph, HookDelegate(init_seconds=init), budget=0)
    assert calls == [threading.current_thread()]
    with pytest.raises(DelegateError, match="HookDelegate invoke_seconds returned nan"):
        run(graph, HookDelegate(invoke_seconds=math.nan), budget=0)
    assert guard.budget() == 5.0 or guard.budget() >= 0


def test_a_million_log_lines_are_capped(graph):
    lines = [f"line {i}" for i in range(10**6)]
    with time_budget(5.0):
        it = Interpreter(graph=graph, experimental_delegates=[HookDelegate(log_lines=lines)], device="pixel4")
    log = it.simulation.delegation.log
    own = [line for line in log if line.startswith("line ")]
    assert len(own) == MAX_LOG_LINES
    assert any(f"gave {10**6 - MAX_LOG_LINES} more lines" in line for line in log)


@pytest.mark.parametrize("how", ["sys", "os"])
@pytest.mark.parametrize("budget", [5.0, 0])
def test_exiting_in_invoke_is_a_delegate_error(graph, how, budget):
    with pytest.raises(DelegateError, match="^ExitingDelegate invoke(: | failed: )SystemExit"):
        run(graph, exits_in_invoke(how), budget=budget)


@pytest.mark.parametrize("how", ["sys", "os"])
def test_exiting_in_invoke_on_the_cli_leaves_a_non_zero_exit(how, tmp_path):
    argv = [sys.executable, "-m", "runtime.cli.main", "benchmark", "--zoo", "tiny_cnn", "--zoo_args",
            "resolution=16", "--device", "pixel4", "--num_runs", "2",
            "--external_delegate_path", "tests.external_delegates:exits_in_invoke",
            "--external_delegate_options", f"how:{how}"]
    done = subprocess.run(argv, cwd=ROOT, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "SystemExit" in done.stderr, done.stderr


# -- the Python API ----------------------------------------------------------------------------

WRONG = st.one_of(st.integers(), st.floats(allow_nan=True), st.lists(st.integers(), max_size=2), st.none().map(lambda _: {}),
                  st.binary(max_size=3))


@FEW
@given(value=WRONG)
def test_a_device_of_a_wrong_type_is_a_type_error_naming_it(graph, value):
    with pytest.raises(TypeError, match="Interpreter: device must be"):
        Interpreter(graph=graph, device=value)


@FEW
@given(name=st.sampled_from(["model_path", "model_content"]), value=st.one_of(st.integers(), st.floats(),
                                                                              st.lists(st.integers(), max_size=2)))
def test_a_model_source_of_a_wrong_type_is_a_type_error_naming_it(name, value):
    with pytest.raises(TypeError, match=f"Interpreter: {name} must be"):
        Interpreter(**{name: value})


@FEW
@given(name=st.sampled_from(["soc", "stream", "experimental_delegates"]), value=st.one_of(st.text(max_size=3),
                                                                                           st.floats(), st.binary(max_size=2)))
def test_other_arguments_of_a_wrong_type_are_named(graph, name, value):
    with pytest.raises(TypeError, match=f"Interpreter: {name} must be"):
        Interpreter(graph=graph, **{name: value})


@pytest.mark.parametrize("value", ["2", 2.0, True, None.__class__])
def test_num_threads_of_a_wrong_type_has_litert_wording(graph, value):
    with pytest.raises(ValueError, match="^type of num_threads should be int$"):
        Interpreter(graph=graph, num_threads=value)


class BlockingKernel(FaultyKernel):
    """Holds an invoke until the test lets it go, so a second thread's call surely overlaps it."""

    entered = threading.Event()
    go = threading.Event()

    def invoke(self, inputs):
        type(self).entered.set()
        type(self).go.wait(HANG_GUARD_S)
        return super().invoke(inputs)


class BlockingDelegate(FaultyDelegate):
    name = "BlockingDelegate"

    def create_kernel(self, partition):
        return BlockingKernel(partition, "none")


def test_one_interpreter_from_two_threads_at_once_is_an_error(graph):
    with time_budget(0):
        it = Interpreter(graph=graph, experimental_delegates=[BlockingDelegate("none")], device="pixel4")
        it.allocate_tensors()
        it.set_tensor(graph.inputs[0], sample(graph))
        errors = []
        first = threading.Thread(target=lambda: errors.append(_call(it.invoke)))
        first.start()
        assert BlockingKernel.entered.wait(HANG_GUARD_S)
        for call in (it.invoke, it.allocate_tensors, lambda: it.set_tensor(graph.inputs[0], sample(graph)),
                     lambda: it.get_tensor(graph.outputs[0])):
            with pytest.raises(RuntimeError, match="in use by another thread"):
                call()
        BlockingKernel.go.set()
        first.join(HANG_GUARD_S)
    assert not first.is_alive() and errors == [None]
    cpu = Interpreter(graph=graph)
    cpu.allocate_tensors()
    cpu.set_tensor(graph.inputs[0], sample(graph))
    cpu.invoke()
    np.testing.assert_array_equal(it.get_tensor(graph.outputs[0]), cpu.get_tensor(graph.outputs[0]))


def _call(fn):
    try:
        fn()
    except Exception as exc:  # reported to the test's thread
        return exc
    return None


def test_two_interpreters_in_two_threads_finish_with_their_own_outputs(graph):
    inputs = [np.random.default_rng(seed).standard_normal(graph.tensors[graph.inputs[0]].shape).astype(np.float32)
              for seed in (1, 2)]
    expected = []
    for x in inputs:
        cpu = Interpreter(graph=graph)
        cpu.allocate_tensors()
        cpu.set_tensor(graph.inputs[0], x)
        cpu.invoke()
        expected.append(cpu.get_tensor(graph.outputs[0]))
    got: dict[int, list] = {0: [], 1: []}

    def work(k):
        it = Interpreter(graph=graph, experimental_delegates=[FaultyDelegate("none")], device="pixel4")
        it.allocate_tensors()
        for _ in range(5):
            it.set_tensor(graph.inputs[0], inputs[k])
            it.invoke()
            got[k].append(it.get_tensor(graph.outputs[0]))

    with time_budget(5.0):
        threads = [threading.Thread(target=work, args=(k,)) for k in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(HANG_GUARD_S)
    assert not any(t.is_alive() for t in threads)
    for k in (0, 1):
        assert len(got[k]) == 5
        for out in got[k]:
            np.testing.assert_array_equal(out, expected[k])
