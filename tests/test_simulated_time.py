"""A built-in delegate's outcome never hangs on host time: no watchdog on simulated delegates; the time
budget watches external delegates only, and every command that runs delegates takes its flag."""

from __future__ import annotations

import time

import numpy as np
import pytest

from delegates import guard
from delegates.kernel import UnitKernel
from delegates.registry import is_builtin, make_delegate
from runtime.cli.main import main
from runtime.interpreter.api import Interpreter
from runtime.zoo import build
from sim.profile import load_profile
from tests import faulty_delegates

BUDGET = 0.05   # host seconds; every hindered delegate call below takes several times this


@pytest.fixture(scope="module")
def graph():
    return build("tiny_cnn", resolution=16)


@pytest.fixture(scope="module")
def int8_graph(graph):
    from runtime.zoo.quantize import quantize

    rng = np.random.default_rng(1)
    shape = graph.tensors[graph.inputs[0]].shape
    return quantize(graph, "int8", [rng.standard_normal(shape).astype(np.float32) for _ in range(4)])


def _input(graph) -> np.ndarray:
    tensor = graph.tensors[graph.inputs[0]]
    rng = np.random.default_rng(0)
    if tensor.dtype.np == np.float32:
        return rng.standard_normal(tensor.shape).astype(np.float32)
    return rng.integers(-100, 100, tensor.shape).astype(tensor.dtype.np)


def _figures(graph, kind: str, device: str) -> tuple:
    """Placement, per-run latencies, energy and outputs of two runs with one built-in delegate."""
    profile = load_profile(device)
    it = Interpreter(graph=graph, experimental_delegates=[make_delegate(kind, profile)], device=profile)
    it.allocate_tensors()
    it.set_tensor(graph.inputs[0], _input(graph))
    for _ in range(2):
        it.invoke()
    simulation = it.simulation
    energy = sum(iv.end - iv.start for iv in simulation.soc.trace.intervals)
    return (tuple(sorted(simulation.delegation.placement().items())), tuple(simulation.latencies), energy,
            it.get_tensor(graph.outputs[0]).tobytes())


def _slow_host(monkeypatch) -> list[int]:
    """Every delegate kernel call sleeps past the budget, and the host clocks jump an hour a read:
    a watchdog on these calls would fire on every one of them. Returns the count of hindered calls."""
    hindered = [0]
    for hook in ("prepare", "invoke"):
        real = getattr(UnitKernel, hook)

        def slow(self, *args, _real=real):
            hindered[0] += 1
            time.sleep(3 * BUDGET)
            return _real(self, *args)

        monkeypatch.setattr(UnitKernel, hook, slow)
    for clock in ("monotonic", "perf_counter"):
        real_clock, jumps = getattr(time, clock), [0]

        def jumping(_real=real_clock, _jumps=jumps):
            _jumps[0] += 1
            return _real() + 3600.0 * _jumps[0]

        monkeypatch.setattr(time, clock, jumping)
    return hindered


@pytest.mark.parametrize("kind,device,int8", [("gpu", "pixel4", False), ("nnapi", "pixel4", True),
                                              ("hexagon", "pixel3", True), ("coreml", "iphone_xs", False)])
def test_a_slow_host_gives_a_built_in_delegate_the_same_figures(request, monkeypatch, kind, device, int8):
    graph = request.getfixturevalue("int8_graph" if int8 else "graph")
    calm = _figures(graph, kind, device)
    assert any(where != "CPU" for _, where in calm[0]), f"{kind} took no op: the test would prove nothing"
    with guard.time_budget(BUDGET):
        hindered = _slow_host(monkeypatch)
        slow = _figures(graph, kind, device)
    assert hindered[0] >= 3   # prepare and both invokes really were slowed past the budget
    assert slow == calm


def test_built_in_means_the_registry_s_own_classes_only():
    profile = load_profile("pixel4")
    assert all(is_builtin(make_delegate(kind, profile)) for kind in ("gpu", "nnapi", "hexagon", "coreml"))
    assert not is_builtin(faulty_delegates.make_prepare_raises())

    class Mine(type(make_delegate("gpu"))):   # a user's subclass runs the user's code: watched
        pass

    assert not is_builtin(Mine())


class SlowPrepare(faulty_delegates.FaultyDelegate):
    """A user's delegate whose prepare takes several budgets of host time (and then returns)."""

    def __init__(self):
        super().__init__("slow_prepare")   # no fault of the family: only the sleep below

    def create_kernel(self, partition):
        kernel = super().create_kernel(partition)
        real = kernel.prepare
        kernel.prepare = lambda: time.sleep(4 * BUDGET) or real()
        return kernel


def make_slow() -> SlowPrepare:
    return SlowPrepare()


def test_an_external_delegate_still_times_out_and_the_message_names_budget_and_flag(graph):
    with guard.time_budget(BUDGET):
        it = Interpreter(graph=graph, experimental_delegates=[make_slow()])
    log = " ".join(it.simulation.delegation.log)
    assert f"did not return within {BUDGET:g} s" in log
    assert "--delegate_timeout_secs" in log and "DTB_DELEGATE_TIMEOUT" in log


_COMMANDS = [
    ["benchmark", "--zoo", "tiny_cnn"],
    ["inference-diff", "--zoo", "tiny_cnn"],
    ["partition", "--zoo", "tiny_cnn"],
    ["run", "scenario.yaml"],
    ["eval", "classification", "--zoo", "tiny_cnn", "--ground_truth_images_path", "d",
     "--ground_truth_labels", "l", "--model_output_labels", "m"],
    ["eval", "detection", "--zoo", "tiny_cnn", "--ground_truth_images_path", "d",
     "--ground_truth_json", "j", "--classes_file", "c"],
]


@pytest.mark.parametrize("argv", [*_COMMANDS, ["conformance", "--delegate", "gpu"]], ids=lambda a: " ".join(a[:2]))
def test_every_command_that_runs_delegates_takes_the_budget_flag(argv, capsys):
    """Each parser reads the flag itself: a bad value is its usage error naming the flag (a command
    without the flag would call it an unrecognized argument or a delegate flag it does not know)."""
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--delegate_timeout_secs", "-1"])
    assert exit_.value.code == 2
    assert "argument --delegate_timeout_secs: must be a number of seconds >= 0" in capsys.readouterr().err


def test_the_flag_sets_the_budget_an_external_delegate_gets(capsys):
    code = main(["benchmark", "--zoo", "tiny_cnn", "--zoo_args", "resolution=16", "--device", "pixel4",
                 "--num_runs", "1", "--delegate_timeout_secs", str(BUDGET),
                 "--external_delegate_path", "tests.test_simulated_time:make_slow"])
    out, err = capsys.readouterr()
    assert code != 0 and "Traceback" not in err
    assert f"within {BUDGET:g} s" in out + err and "--delegate_timeout_secs" in out + err


def test_inference_diff_runs_with_the_flag(capsys):
    code = main(["inference-diff", "--zoo", "tiny_cnn", "--zoo_args", "resolution=16", "--device", "pixel4",
                 "--delegate", "gpu", "--num_runs", "1", "--delegate_timeout_secs", "0"])
    assert code == 0, capsys.readouterr().err
