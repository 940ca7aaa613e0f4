"""The plan and its one step loop: the graph checked once per plan build, steps as named records,
and the plain evaluator walking the same loop as the Interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.interpreter import Interpreter
from runtime.ops import opcheck, steps
from runtime.ops.evaluate import evaluate
from runtime.ops.steps import PlanStep
from runtime.zoo import build


@pytest.fixture(scope="module")
def graph():
    return build("tiny_cnn", resolution=16)


def _counting(monkeypatch, module, name) -> list:
    calls = []
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_the_graph_is_checked_once_when_the_plan_is_built(graph, monkeypatch):
    calls = _counting(monkeypatch, opcheck, "check_graph")
    it = Interpreter(graph=graph)
    it.allocate_tensors()
    it.invoke()
    assert calls == [graph]


def test_each_interpreter_checks_its_graph_itself(graph, monkeypatch):
    """No finding is kept between plan builds: a second interpreter on the same graph checks it again."""
    calls = _counting(monkeypatch, opcheck, "check_graph")
    Interpreter(graph=graph)
    Interpreter(graph=graph)
    assert calls == [graph, graph]


def test_plan_steps_are_named_records(graph):
    it = Interpreter(graph=graph)
    plan = [*it._folded, *it._plan]
    assert len(plan) == len(graph.ops) and all(isinstance(s, PlanStep) for s in plan)
    assert [s.index for s in plan] == sorted(s.index for s in plan)
    assert all(s.inputs == graph.ops[s.index].inputs and s.outputs == graph.ops[s.index].outputs for s in plan)


def test_the_plain_evaluator_walks_the_interpreters_step_loop(graph, monkeypatch):
    from runtime.interpreter import api
    from runtime.ops import evaluate as plain

    assert plain.run_steps is api.run_steps is steps.run_steps
    walks = _counting(monkeypatch, plain, "run_steps")
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(graph.tensors[graph.inputs[0]].shape).astype(np.float32) for _ in range(3)]
    values = list(evaluate(graph, iter([[x] for x in xs])))
    assert len(walks) == len(xs)
    it = Interpreter(graph=graph)
    it.allocate_tensors()
    it.set_tensor(graph.inputs[0], xs[-1])
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(graph.outputs[0]), values[-1][graph.outputs[0]])


def test_the_simulation_records_named_spans_and_allocations(graph):
    from runtime.interpreter.executor import OpJob
    from runtime.interpreter.simulation import AllocatedTensors
    from sim.trace import Span

    it = Interpreter(graph=graph, device="pixel4")
    it.allocate_tensors()
    it.invoke()
    it.invoke()
    spans = it.simulation.soc.trace.inferences
    assert all(isinstance(s, Span) for s in spans) and [s.k for s in spans] == [0, 1]
    assert all(s.stream == 0 and s.end > s.start for s in spans)
    assert isinstance(it.simulation._allocation, AllocatedTensors)
    assert all(isinstance(job, OpJob) for job in it.simulation.executor.jobs if job is not None)


def test_output_diff_is_a_named_record():
    from runtime.measure.figures import OutputDiff, output_diff

    d = output_diff(np.array([1.0, 2.0]), np.array([1.5, 2.0]))
    assert d == OutputDiff(mean=0.25, std=0.25, max=0.5)
