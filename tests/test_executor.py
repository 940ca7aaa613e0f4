"""End to end on the simulated phones: delegation, boundary crossings, energy, streams, determinism."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from delegates.api import Delegate, DelegateKernel, DelegateOptions, Support
from delegates.registry import make_delegate
from runtime.ir.graph import Graph
from runtime.interpreter.api import Interpreter
from runtime.measure.figures import measure
from runtime.ir.optypes import OpType
from runtime.sweep.runner import simulate
from runtime.scenario.load import InputSpec
from runtime.zoo import build
from runtime.zoo import layers as L
from runtime.zoo.builder import GraphBuilder
from sim.profile import load_profile
from tests.sim_kit import calibrated_int8
from sim.trace import Kind

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.fixture(scope="module")
def mobilenet():
    return build("mobilenet_v1", alpha=0.25, resolution=64, classes=10)


@pytest.fixture(scope="module")
def mobilenet_int8(mobilenet):
    return calibrated_int8(mobilenet, seed=5, samples=4)


@pytest.fixture(scope="module")
def split_graph():
    """conv x3, then a LOG_SOFTMAX the GPU refuses, then conv x2: two GPU partitions of 3 and 2."""
    b = GraphBuilder("split", 0)
    x = b.input("input", (1, 8, 8, 4))
    for k in range(3):
        x = L.conv(b, x, 4, 3, 1, name=f"a{k}")
    x = b.op(OpType.LOG_SOFTMAX, [x], None, "logsoftmax")
    for k in range(2):
        x = L.conv(b, x, 4, 3, 1, name=f"b{k}")
    return b.build([x])


def feed(it: Interpreter, graph: Graph, rng: np.random.Generator) -> None:
    """Seeded Gaussian inputs, on the tensor's grid for a quantized input."""
    for t in graph.inputs:
        tensor = graph.tensors[t]
        x = rng.standard_normal(tensor.shape)
        if tensor.quant is not None:
            x = np.clip(np.round(x / tensor.quant.scale[0]) + tensor.quant.zero_point[0], -128, 127)
        it.set_tensor(t, x.astype(tensor.dtype.np))


def run(graph: Graph, device="pixel4", delegates=(), runs=3, threads=4, **kw):
    """Simulate and measure; returns (interpreter, measurement, outputs of the last run)."""
    it = Interpreter(graph=graph, experimental_delegates=list(delegates), device=device, num_threads=threads, **kw)
    it.allocate_tensors()
    rng = np.random.default_rng(0)
    for _ in range(runs):
        feed(it, graph, rng)
        it.invoke()
    soc = it.simulation.soc
    return it, measure(soc, soc.trace.inferences, 1), [it.get_tensor(t) for t in graph.outputs]


def plain(graph: Graph, runs=3):
    it = Interpreter(graph=graph, num_threads=1)
    it.allocate_tensors()
    rng = np.random.default_rng(0)
    for _ in range(runs):
        feed(it, graph, rng)
        it.invoke()
    return [it.get_tensor(t) for t in graph.outputs]


def rail(m, name):
    return next(r for r in m.energy if r.rail == name)


def test_cpu_only_simulation_computes_what_the_plain_interpreter_does(mobilenet):
    _, m, outs = run(mobilenet)
    for a, b in zip(outs, plain(mobilenet)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert m.latency.avg > 0 and m.boundary.crossings == 0


def test_gpu_runs_in_float16_close_to_but_not_equal_to_the_cpu(mobilenet):
    prof = load_profile("pixel4")
    it, m, outs = run(mobilenet, delegates=[make_delegate("gpu", prof)])
    ref = plain(mobilenet)
    assert not np.array_equal(outs[0], ref[0])
    assert np.max(np.abs(outs[0] - ref[0])) < 1e-2
    assert m.boundary.crossings == 2 and m.init_s > 0


def test_float_model_on_hexagon_delegates_nothing_and_spends_cpu_energy_only(mobilenet):
    prof = load_profile("pixel3")
    it, m, _ = run(mobilenet, "pixel3", [make_delegate("hexagon", prof)])
    rep = it.simulation.delegation.per_delegate[0]
    assert rep.nodes_delegated == 0 and rep.partitions == 0
    assert rail(m, "dsp").active_mj == 0 and rail(m, "gpu").active_mj == 0
    assert rail(m, "cpu_big").active_mj > 0
    assert "0 nodes delegated out of" in " ".join(it.simulation.delegation.log)


def test_int8_model_on_hexagon_delegates_nearly_all_and_is_exact(mobilenet_int8):
    prof = load_profile("pixel3")
    it, m, outs = run(mobilenet_int8, "pixel3", [make_delegate("hexagon", prof)])
    rep = it.simulation.delegation.per_delegate[0]
    assert rep.nodes_delegated >= rep.total_nodes - 2
    np.testing.assert_array_equal(outs[0], plain(mobilenet_int8)[0])
    assert rail(m, "dsp").active_mj > 0


def test_coreml_takes_nothing_of_an_int8_model(mobilenet_int8):
    prof = load_profile("iphone_xs")
    it, _, _ = run(mobilenet_int8, "iphone_xs", [make_delegate("coreml", prof)], threads=2)
    assert it.simulation.delegation.per_delegate[0].nodes_delegated == 0


def test_nnapi_at_api_27_leaves_pad_on_the_cpu_and_takes_it_at_28():
    b = GraphBuilder("padded", 0)
    x = L.conv(b, b.input("input", (1, 8, 8, 4)), 4, 3, 1, name="c0")
    x = b.op(OpType.PAD, [x, b.const("pads", np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32))], None, "pad")
    graph = b.build([L.conv(b, x, 4, 3, 1, name="c1")])
    pad = next(i for i, op in enumerate(graph.ops) if op.type is OpType.PAD)
    for level, expected in ((27, "CPU"), (28, "TfLiteNnapiDelegate")):
        prof = dataclasses.replace(load_profile("pixel3"), api_level=level)
        it, _, outs = run(graph, prof, [make_delegate("nnapi", prof, disallow_nnapi_cpu=False)])
        assert it.simulation.delegation.placement()[pad] == expected, level
        np.testing.assert_allclose(outs[0], plain(graph)[0], rtol=1e-5, atol=1e-5)


def test_gpu_with_one_partition_keeps_the_largest(split_graph):
    prof = load_profile("pixel4")
    it, m, _ = run(split_graph, delegates=[make_delegate("gpu", prof)])
    where = it.simulation.delegation.placement()
    assert [where[i] != "CPU" for i in range(len(split_graph.ops))] == [True] * 3 + [False] * 3
    assert m.boundary.crossings == 2


class DepthwiseOnGpu(Delegate):
    """A user's Python delegate: takes depthwise convolutions only, runs them on the GPU unit with
    its own kernel (the CPU math, here)."""

    name = "DepthwiseDelegate"
    unit = "gpu"

    def is_node_supported(self, op, graph):
        return Support(op.type is OpType.DEPTHWISE_CONV_2D, "only depthwise convolutions")

    def create_kernel(self, partition):
        from delegates.kernel import UnitKernel

        return UnitKernel(partition, "REFERENCE", "gpu")


def test_more_partitions_mean_more_crossings_and_more_boundary_time(mobilenet):
    _, one, _ = run(mobilenet, delegates=[DepthwiseOnGpu(DelegateOptions(max_delegated_partitions=1))])
    _, many, outs = run(mobilenet, delegates=[DepthwiseOnGpu()])
    assert many.boundary.crossings > one.boundary.crossings >= 2
    assert many.boundary.seconds > one.boundary.seconds
    np.testing.assert_allclose(outs[0], plain(mobilenet)[0], rtol=1e-5, atol=1e-6)


class FailingKernel(DelegateKernel):
    def invoke(self, inputs):
        from runtime.ir.errors import DelegateError

        raise DelegateError("the accelerator hung")


class FailsOnInvoke(DepthwiseOnGpu):
    def create_kernel(self, partition):
        return FailingKernel(partition)


def test_a_delegate_failing_in_invoke_raises_delegate_error(mobilenet):
    from runtime.ir.errors import DelegateError

    with pytest.raises(DelegateError, match="hung"):
        run(mobilenet, delegates=[FailsOnInvoke()], runs=1)


def test_timing_only_charges_the_same_time_without_the_math(mobilenet):
    prof = load_profile("pixel4")
    _, full, _ = run(mobilenet, delegates=[make_delegate("gpu", prof)])
    _, fast, outs = run(mobilenet, delegates=[make_delegate("gpu", prof)], timing_only=True)
    assert fast.latency == full.latency and fast.energy == full.energy
    assert not np.any(outs[0])


def test_the_same_run_twice_gives_identical_figures(mobilenet):
    def once():
        prof = load_profile("pixel4")
        record, soc = simulate(mobilenet, prof, lambda: [make_delegate("gpu", prof)], 4, 1, 3, 1, False,
                               InputSpec(), kinds=["gpu"])
        return json.dumps(record, sort_keys=True), soc.trace.intervals

    assert once() == once()


def test_two_streams_contend_for_the_phone(mobilenet):
    prof = load_profile("pixel4")
    alone, _ = simulate(mobilenet, prof, lambda: [], 4, 1, 3, 1, True, InputSpec(), reference=False)
    both, soc = simulate(mobilenet, prof, lambda: [], 4, 1, 3, 2, True, InputSpec(), reference=False)
    assert both["latency_ms"]["avg"] > alone["latency_ms"]["avg"]
    ops = sorted((iv for iv in soc.trace.intervals if iv.lane == "cpu_big" and iv.kind is Kind.OP),
                 key=lambda iv: iv.start)
    assert all(a.end <= b.start for a, b in zip(ops, ops[1:]))  # 4 threads each: the 4 cores in turn


def test_no_op_starts_before_its_inputs_are_produced(mobilenet):
    it, _, _ = run(mobilenet, delegates=[DepthwiseOnGpu()], runs=2)
    graph, trace = mobilenet, it.simulation.soc.trace
    producer = graph.producers()
    ends = {}
    for iv in trace.intervals:
        node = dict(iv.args).get("node")
        if iv.kind is Kind.OP and node is not None:
            ends[(iv.inference, node)] = iv.end
            for t in graph.ops[node].inputs:
                if t in producer and (iv.inference, producer[t]) in ends:
                    assert iv.start >= ends[(iv.inference, producer[t])]


def _latency(graph, profile, delegates):
    it = Interpreter(graph=graph, experimental_delegates=delegates, device=profile, num_threads=4,
                     timing_only=True)
    it.allocate_tensors()
    it.invoke()
    it.invoke()
    return it.simulation.latencies[-1]


@settings(max_examples=15, deadline=None)
@given(st.floats(1.0, 8.0), st.sampled_from(["gpu", "cpu_big", "dram"]))
def test_latency_never_grows_when_a_unit_gets_faster(split_graph, factor, which):
    base = load_profile("pixel4")

    def faster(p, f):
        if which == "dram":
            return dataclasses.replace(p, dram=dataclasses.replace(p.dram, bandwidth=p.dram.bandwidth * f))
        units = tuple(dataclasses.replace(u, macs_per_s={k: v * f for k, v in u.macs_per_s.items()},
                                          elem_per_s={k: v * f for k, v in u.elem_per_s.items()},
                                          bandwidth=u.bandwidth * f)
                      if u.name == which else u for u in p.units)
        return dataclasses.replace(p, units=units)

    slow = _latency(split_graph, base, [make_delegate("gpu", base)])
    fast = _latency(split_graph, faster(base, factor), [make_delegate("gpu", base)])
    assert fast <= slow


@settings(max_examples=15, deadline=None)
@given(st.floats(0.0, 1e-3), st.floats(0.05, 1.0))
def test_dearer_boundary_crossings_never_reduce_latency(split_graph, extra_sync, bandwidth_scale):
    base = load_profile("pixel4")
    dear = dataclasses.replace(base, copy=dataclasses.replace(
        base.copy, sync_s=base.copy.sync_s + extra_sync, bandwidth=base.copy.bandwidth * bandwidth_scale))
    assert _latency(split_graph, dear, [make_delegate("gpu", base)]) >= _latency(
        split_graph, base, [make_delegate("gpu", base)])


def test_invoke_with_cpu_fallback_reruns_on_the_cpu_after_a_delegate_fails(mobilenet):
    it = Interpreter(graph=mobilenet, experimental_delegates=[FailsOnInvoke()], device="pixel4")
    it.allocate_tensors()
    x = np.random.default_rng(0).standard_normal(mobilenet.tensors[mobilenet.inputs[0]].shape).astype(np.float32)
    it.set_tensor(mobilenet.inputs[0], x)
    it.invoke_with_cpu_fallback()
    ref = Interpreter(graph=mobilenet)
    ref.allocate_tensors()
    ref.set_tensor(mobilenet.inputs[0], x)
    ref.invoke()
    np.testing.assert_allclose(it.get_tensor(mobilenet.outputs[0]), ref.get_tensor(mobilenet.outputs[0]),
                               rtol=1e-5, atol=1e-6)
    simulation = it.simulation
    assert simulation.delegation.restored and "running on the CPU" in simulation.delegation.log[-1]
    assert all(not hasattr(step, "partition") for step in simulation.delegation.plan)
    it.invoke()  # later invokes stay on the CPU
    assert len(simulation.latencies) == 2


def make_depthwise_delegate(max_partitions: int = 0) -> Delegate:
    """A factory as a user writes one, loaded by `module:factory` path."""
    return DepthwiseOnGpu(DelegateOptions(max_delegated_partitions=max_partitions))


def test_a_python_delegate_plugs_in_by_module_and_factory_and_runs(mobilenet):
    from delegates.external import load_external

    delegate = load_external("tests.test_executor:make_depthwise_delegate", {"max_partitions": "2"})
    it, m, outs = run(mobilenet, delegates=[delegate])
    rep = it.simulation.delegation.per_delegate[0]
    assert rep.delegate == "DepthwiseDelegate" and rep.partitions == 2
    assert m.boundary.crossings >= 4
    np.testing.assert_allclose(outs[0], plain(mobilenet)[0], rtol=1e-5, atol=1e-6)


def test_two_streams_conserve_bytes_and_dram_energy(mobilenet):
    prof = load_profile("pixel4")
    _, one = simulate(mobilenet, prof, lambda: [], 4, 0, 2, 1, True, InputSpec(), reference=False)
    _, two = simulate(mobilenet, prof, lambda: [], 4, 0, 2, 2, True, InputSpec(), reference=False)
    bytes_of = lambda soc: sum(iv.bytes for iv in soc.trace.intervals)  # noqa: E731
    assert bytes_of(two) == 2 * bytes_of(one) and two.dram.bytes_moved == 2 * one.dram.bytes_moved
    # every op's work is charged once per stream: the same MACs, whatever the contention did to time
    macs = lambda soc: sum(dict(iv.args).get("macs", 0) for iv in soc.trace.intervals)  # noqa: E731
    assert macs(two) == 2 * macs(one)
    for soc in (one, two):  # the rails account for all of the energy: idle over the span + active
        span = soc.env.now
        total = sum(soc.energy(0.0, span).values())
        idle = sum(soc.rails.values()) * span
        active = sum(iv.joules for iv in soc.trace.intervals)
        dram = bytes_of(soc) * soc.profile.dram.energy_per_byte
        assert total == pytest.approx(idle + active + dram, rel=1e-12)


_CHILD = """
import json, sys
from runtime.sweep.runner import simulate
from runtime.scenario.load import InputSpec
from runtime.zoo import build
from delegates.registry import make_delegate
from sim.profile import load_profile
g = build("mobilenet_v1", alpha=0.25, resolution=64, classes=10)
p = load_profile("pixel4")
record, _ = simulate(g, p, lambda: [make_delegate("gpu", p)], 4, 1, 2, 2, False, InputSpec(), kinds=["gpu"])
sys.stdout.write(json.dumps(record, sort_keys=True))
"""


def test_figures_are_identical_in_another_process_under_load(mobilenet):
    import subprocess
    import sys
    import threading

    stop = threading.Event()

    def burn():  # load the host while the child runs: simulated figures must not notice
        while not stop.is_set():
            sum(i * i for i in range(10000))

    load = threading.Thread(target=burn)
    load.start()
    try:
        child = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, check=True,
                               cwd=str(__import__("pathlib").Path(__file__).parents[1]))
    finally:
        stop.set()
        load.join()
    prof = load_profile("pixel4")
    here, _ = simulate(mobilenet, prof, lambda: [make_delegate("gpu", prof)], 4, 1, 2, 2, False, InputSpec(),
                       kinds=["gpu"])
    assert child.stdout == json.dumps(here, sort_keys=True)
