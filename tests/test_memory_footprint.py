"""The simulated phone's memory: benchmark_model's memory lines, per-op memory in the op-profiling
tables, and the results record's `memory` section (runtime/measure/footprint.py)."""

from __future__ import annotations

import json
import re

import pytest

from delegates.registry import make_delegate
from runtime.cli.main import main
from runtime.measure.footprint import graph_arena, memory_record
from runtime.interpreter.api import Interpreter
from runtime.model.loader import ModelSource, load_model
from runtime.sweep.runner import unit_footprint
from sim.profile import load_profile

ZOO = ["--zoo", "tiny_cnn", "--zoo_args", "resolution=32", "--num_runs", "2", "--timing_only"]


def _sim(graph, delegates=(), device="pixel4"):
    phone = load_profile(device)
    it = Interpreter(graph=graph, device=phone, timing_only=True, num_threads=4,
                     experimental_delegates=[make_delegate(d, phone) for d in delegates])
    it.allocate_tensors()
    return it.simulation


@pytest.fixture(scope="module")
def mobilenet():
    return load_model(ModelSource(zoo="mobilenet_v1", zoo_args={"alpha": 0.25, "resolution": 128}))


def test_benchmark_prints_the_memory_lines(capsys):
    assert main(["benchmark", *ZOO]) == 0
    out = capsys.readouterr().out
    line = re.search(r"^Memory footprint delta from the start of the tool \(MB\): init=(\S+) overall=(\S+)$", out, re.M)
    assert line and 0 < float(line.group(1)) <= float(line.group(2))
    assert "peak memory footprint" not in out
    assert out.index("Inference timings in us") < line.start() < out.index("Energy per inference")
    assert main(["benchmark", *ZOO, "--report_peak_memory_footprint=true"]) == 0
    peak = re.search(r"^Overall peak memory footprint \(MB\) via periodic monitoring: (\S+)$", capsys.readouterr().out, re.M)
    assert peak and float(peak.group(1)) == float(line.group(2))


def test_memory_lines_are_the_records_figures(mobilenet):
    from runtime.cli.profile_tables import memory_lines

    simulation = _sim(mobilenet)
    memory = memory_record(simulation, unit_footprint(simulation))
    cpu = graph_arena(mobilenet)
    weights = sum(t.data.nbytes for t in mobilenet.tensors if t.is_constant)
    assert (memory.weights, memory.cpu_arena, memory.delegates) == (weights, cpu.plan.size, {})
    assert memory.init == memory.overall == memory.peak == weights + cpu.plan.size
    assert memory_lines(memory, True) == [
        f"Memory footprint delta from the start of the tool (MB): init={memory.init / 2**20:g} "
        f"overall={memory.overall / 2**20:g}",
        f"Overall peak memory footprint (MB) via periodic monitoring: {memory.peak / 2**20:g}"]


def test_delegate_buffers_per_unit_and_the_arena_left_to_the_cpu(mobilenet):
    cpu_only, gpu = _sim(mobilenet), _sim(mobilenet, ["gpu"])
    alone, shared = memory_record(cpu_only, unit_footprint(cpu_only)), memory_record(gpu, unit_footprint(gpu))
    # fully delegated: the CPU arena holds only the graph's input and output; the GPU its buffers
    io = sum(graph_arena(mobilenet).sizes[t] for t in (*mobilenet.inputs, *mobilenet.outputs))
    assert shared.cpu_arena < alone.cpu_arena and shared.cpu_arena <= io + 64
    assert shared.delegates == {"gpu": unit_footprint(gpu)["gpu"]} and shared.delegates["gpu"] > 0
    assert shared.init == shared.weights + shared.cpu_arena + shared.delegates["gpu"]


def test_op_profiling_shows_per_op_memory(capsys):
    assert main(["benchmark", *ZOO, "--enable_op_profiling=true"]) == 0
    out = capsys.readouterr().out
    table = out[out.index("== Run Order =="):out.index("== Top by Computation Time")]
    rows = [line.split("\t") for line in table.splitlines()[2:] if line.count("\t") == 9]
    mem = {row[2 + 7]: (row[1].strip(), float(row[7])) for row in rows}
    assert mem and all(kb > 0 for kind, kb in mem.values() if kind != "RESHAPE")  # RESHAPE takes its input's
    summary = out[out.index("== Summary by node type =="):].splitlines()
    conv = next(line.split("\t") for line in summary if line.split("\t")[1:2] and line.split("\t")[1].strip() == "CONV_2D")
    assert float(conv[6]) == pytest.approx(sum(kb for kind, kb in mem.values() if kind == "CONV_2D"), abs=2e-3)


def test_node_memory_is_outputs_and_scratch():
    from runtime.measure.footprint import node_memory

    graph = load_model(ModelSource(zoo="mobilenet_v1", zoo_args={"alpha": 0.25, "resolution": 128},
                                   quantization="dynamic_range"))
    cpu = graph_arena(graph)
    mem = node_memory(cpu)
    for k, node in enumerate(cpu.nodes):
        own = [t for t in node.outputs if t not in cpu.plan.shared]
        assert mem[k] == sum(cpu.sizes[t] for t in (*own, *node.temporaries)
                             if t in cpu.plan.offsets or t in cpu.plan.persistent_offsets)
    assert any(node.temporaries for node in cpu.nodes)   # a hybrid conv's quantized input, row sums, ...


def test_output_json_and_results_have_the_memory_section(tmp_path, capsys):
    out = tmp_path / "b.json"
    assert main(["benchmark", *ZOO, "--use_gpu", f"--output_json={out}"]) == 0
    record = json.loads(out.read_text())
    memory = record["memory"]
    assert set(memory) == {"weights_bytes", "cpu_arena_bytes", "cpu_persistent_arena_bytes", "cpu_heap_bytes",
                           "delegate_bytes", "init_bytes", "overall_bytes", "peak_bytes"}
    assert memory["delegate_bytes"] == {k: v for k, v in record["footprint_bytes"].items() if k == "gpu"}
    assert memory["init_bytes"] == (memory["weights_bytes"] + memory["cpu_arena_bytes"] + memory["cpu_heap_bytes"]
                                    + memory["cpu_persistent_arena_bytes"] + sum(memory["delegate_bytes"].values()))
    assert all("mem_bytes" in row for row in record["per_op"])
    line = re.search(r"init=(\S+) overall=(\S+)", capsys.readouterr().out)
    assert float(line.group(1)) == pytest.approx(memory["init_bytes"] / 2**20, rel=1e-5)


def test_scenario_records_have_the_memory_section(tmp_path):
    from runtime.sweep.runner import run_file

    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: mem\ndevice: pixel4\nmodel: {zoo: tiny_cnn, args: {resolution: 32}}\n"
                        "runs: {count: 2, warmup: 1}\ntiming_only: true\n"
                        "matrix:\n  delegates: [[], [gpu]]\n")
    results = run_file(scenario, tmp_path / "out")
    cpu, gpu = results["records"]
    assert cpu["memory"]["delegate_bytes"] == {} and gpu["memory"]["delegate_bytes"]["gpu"] > 0
    assert gpu["memory"]["cpu_arena_bytes"] < cpu["memory"]["cpu_arena_bytes"]
    rows = {row["node"]: row["mem_bytes"] for row in cpu["per_op"]}
    assert sum(rows.values()) > 0


def _upsampled(side: int):
    """A 64x64x8 float input resized to side x side: kilobytes in, hundreds of megabytes out."""
    import numpy as np

    from runtime.ir.graph import DType, Graph, Op, Tensor
    from runtime.ir.optypes import OpType
    from runtime.ir.options import ResizeNearestNeighborOptions

    tensors = (Tensor("x", (1, 64, 64, 8), DType.FLOAT32),
               Tensor("size", (2,), DType.INT32, data=np.array([side, side], np.int32)),
               Tensor("y", (1, side, side, 8), DType.FLOAT32))
    op = Op(OpType.RESIZE_NEAREST_NEIGHBOR, (0, 1), (2,), ResizeNearestNeighborOptions())
    return Graph(tensors, (op,), (0,), (2,), name="upsampled")


def test_a_timing_only_plan_is_held_to_what_it_allocates():
    """Timing-only, no op's math runs: a model whose activations exceed the limit is still timed
    (Qualcomm AI Hub's UNet needed 26 GiB by the full plan's count); run for real, it is refused."""
    from runtime.ir.errors import ModelError

    graph, limit = _upsampled(4096), 64 << 20     # a 512 MiB output against a 64 MiB limit
    with pytest.raises(ModelError, match="above the memory limit of 64.0 MiB"):
        Interpreter(graph=graph, memory_limit=limit)
    phone = load_profile("pixel4")
    for delegates in ([], [make_delegate("gpu", phone)]):
        it = Interpreter(graph=graph, device=phone, timing_only=True, memory_limit=limit,
                         experimental_delegates=delegates)
        it.allocate_tensors()
        it.invoke()
        assert [iv.name for iv in it.simulation.soc.trace.intervals if iv.kind.value == "op"] == \
            ["RESIZE_NEAREST_NEIGHBOR"]
