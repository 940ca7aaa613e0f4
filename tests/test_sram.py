"""On-chip weight memory (a unit's `sram_mb`): weights that fit stay on chip between inferences and
cost no DRAM traffic; the rest stream from DRAM on every inference (sim/mechanisms.sram_resident)."""

from __future__ import annotations

import dataclasses

import pytest

from delegates.registry import parse_flags
from runtime.interpreter.api import Interpreter
from sim import mechanisms as mx
from sim.cost import OpClass, Precision, Rates, Work, op_cost
from sim.profile import load_profile
from sim.trace import Kind
from tests.delegate_kit import zoo

I8 = Precision.INT8
MIB = 1 << 20


@pytest.mark.parametrize("weights,before,sram,resident", [
    (100, 0, 1000, 100),      # fits
    (100, 950, 1000, 50),     # the memory fills up inside this op's weights
    (100, 1000, 1000, 0),     # full before it: every byte streams
    (100, 5000, 1000, 0),
    (100, 0, 0, 0),           # no on-chip memory
    (0, 0, 1000, 0),          # no weights
])
def test_weights_fill_the_on_chip_memory_in_plan_order(weights, before, sram, resident):
    assert mx.sram_resident(weights, before, sram) == resident


def _rates(sram: float) -> Rates:
    return Rates({I8: 1e12}, {I8: 1e12}, bandwidth=1e9, sram_bytes=sram)


def test_resident_weights_leave_the_memory_term_and_the_dram_bytes():
    work = Work("fc", OpClass.GEMM, I8, macs=1000, bytes_read=1_000_000 + 1000, bytes_written=100,
                weight_bytes=1_000_000)
    streamed, held = op_cost(work, _rates(0)), op_cost(work, _rates(2 * MIB))
    assert streamed.bytes == work.bytes and held.bytes == 1100
    assert held.memory_s == pytest.approx(streamed.memory_s * 1100 / work.bytes)
    assert held.seconds < streamed.seconds
    later = dataclasses.replace(work, weights_before=2 * MIB - 400_000)  # 400 KB of its 1 MB still fit
    assert op_cost(later, _rates(2 * MIB)).bytes == work.bytes - 400_000


def _edgetpu(sram_mb: float):
    """The Pixel 4 with its NPU's on-chip memory set to `sram_mb`."""
    p = load_profile("pixel4")
    units = tuple(dataclasses.replace(u, extras={**u.extras, "sram_mb": sram_mb}) if u.name.startswith("npu") else u
                  for u in p.units)
    return dataclasses.replace(p, units=units)


def _run(graph, sram_mb: float):
    profile = _edgetpu(sram_mb)
    delegates, _ = parse_flags(["--use_nnapi", "--nnapi_accelerator_name", "google-edgetpu"], profile)
    it = Interpreter(graph=graph, experimental_delegates=delegates, device=profile, timing_only=True)
    it.allocate_tensors()
    it.simulation.invoke()
    seconds = it.simulation.invoke()
    soc = it.simulation.soc
    last = max(iv.inference for iv in soc.trace.intervals)
    npu = [iv for iv in soc.trace.intervals if iv.lane.startswith("npu") and iv.kind is Kind.OP
           and iv.inference == last]
    return seconds, sum(iv.bytes for iv in npu), len(npu)


def test_a_model_streams_only_the_weights_beyond_the_npus_memory():
    graph = zoo("mobilenet_v1", "int8")
    weights = sum(t.data.nbytes for t in graph.tensors if t.is_constant)
    none, some, all_ = _run(graph, 0.0), _run(graph, weights / 2 / MIB), _run(graph, 8.0)
    assert none[2] == some[2] == all_[2] > 0            # the same ops on the NPU
    assert none[1] - all_[1] > 0.9 * weights             # ~every weight byte left DRAM's ledger
    assert all_[1] < some[1] < none[1]                   # half of them when half fit
    assert all_[0] <= some[0] <= none[0] and all_[0] < none[0]
    assert _run(graph, 16.0)[:2] == all_[:2]             # more memory than weights changes nothing


def test_the_memory_record_and_the_benchmark_say_what_stays_on_chip(capsys):
    from runtime.cli.main import main as dtb
    from runtime.measure.footprint import on_chip_weights

    graph = zoo("mobilenet_v1", "int8")
    profile = _edgetpu(0.05)      # 52 KB: most of the weights stream
    delegates, _ = parse_flags(["--use_nnapi", "--nnapi_accelerator_name", "google-edgetpu"], profile)
    it = Interpreter(graph=graph, experimental_delegates=delegates, device=profile, timing_only=True)
    it.allocate_tensors()
    (unit, (cached, streamed)), = on_chip_weights(it.simulation.executor).items()
    on_npu = sum(job.ops[k].work.weight_bytes for job in it.simulation.executor.jobs if hasattr(job, "step")
                 for k in range(len(job.ops)))
    assert unit.startswith("npu") and cached == int(0.05 * MIB) and cached + streamed == on_npu
    assert dtb(["benchmark", "--device", "pixel4", "--zoo", "mobilenet_v1", "--zoo_args", "alpha=0.25,resolution=32",
                "--quantization", "int8", "--use_nnapi", "--nnapi_accelerator_name", "google-edgetpu",
                "--num_runs", "1", "--warmup_runs", "0", "--timing_only"]) == 0
    line = [s for s in capsys.readouterr().out.splitlines() if s.startswith("On-chip weight memory of npu")]
    assert line and line[0].endswith("streamed_per_inference=0")   # a small model fits the Pixel 4's 8 MB
    assert dtb(["benchmark", "--device", "pixel4", "--zoo", "mobilenet_v1", "--zoo_args", "alpha=0.25,resolution=32",
                "--num_runs", "1", "--warmup_runs", "0", "--timing_only"]) == 0
    assert "On-chip weight memory" not in capsys.readouterr().out   # nothing on such a unit: no line
