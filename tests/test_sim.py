"""The simulated phone: unit capacity, DRAM contention, energy as the integral of power, determinism."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from sim.cost import OpClass, Precision, Work
from sim.power import power_steps
from sim.soc import SoC
from sim.trace import Kind
from sim.unit import Tag
from tests.sim_kit import tiny_profile

F32, I8 = Precision.FLOAT32, Precision.INT8


def memory_bound(nbytes=1_000_000, precision=F32):
    return Work("ADD", OpClass.ELEMENTWISE, precision, elem_ops=1000, bytes_read=nbytes // 2,
                bytes_written=nbytes // 2)


def compute_bound(macs=10_000_000, precision=F32):
    return Work("CONV_2D", OpClass.CONV, precision, macs=macs, bytes_read=1000, bytes_written=1000)


def run(soc, *procs):
    for p in procs:
        soc.env.process(p)
    soc.env.run()


def ops_of(soc, lane):
    return [iv for iv in soc.trace.intervals if iv.lane == lane and iv.kind is Kind.OP]


def test_one_op_takes_dispatch_plus_max_of_compute_and_memory():
    soc = SoC(tiny_profile())
    gpu = soc.unit("gpu")
    work = memory_bound()
    run(soc, gpu.execute(work, Tag(0, 0)))
    (iv,) = ops_of(soc, "gpu")
    assert iv.seconds == pytest.approx(1e-6 + max(1000 / 200e9, work.bytes / 10e9), rel=1e-12)


def test_two_streams_share_dram_and_each_is_slower_than_alone():
    def alone(unit, precision=F32):
        soc = SoC(tiny_profile())
        run(soc, soc.unit(unit).execute(memory_bound(precision=precision), Tag()))
        return ops_of(soc, unit)[0].seconds

    soc = SoC(tiny_profile())
    run(soc, soc.unit("gpu").execute(memory_bound(), Tag(0)), soc.unit("npu").execute(memory_bound(precision=I8), Tag(1)))
    together = ops_of(soc, "gpu")[0].seconds + ops_of(soc, "npu")[0].seconds
    assert together > alone("gpu") + alone("npu", I8)
    # compute-bound work does not notice the bus
    soc = SoC(tiny_profile())
    run(soc, soc.unit("gpu").execute(compute_bound(), Tag(0)), soc.unit("dsp").execute(compute_bound(precision=I8), Tag(1)))
    assert ops_of(soc, "gpu")[0].seconds == pytest.approx(1e-6 + 10_000_000 / 200e9)


def test_a_unit_never_runs_two_ops_at_once_and_cpu_cores_are_a_pool():
    soc = SoC(tiny_profile())
    gpu, cpu = soc.unit("gpu"), soc.cpu
    run(soc, *(gpu.execute(compute_bound(), Tag(s)) for s in range(3)),
        *(cpu.execute(compute_bound(), Tag(s), threads=4) for s in range(2)),
        *(cpu.execute(compute_bound(), Tag(s), threads=2) for s in range(2, 4)))
    g = sorted(ops_of(soc, "gpu"), key=lambda iv: iv.start)
    assert all(a.end <= b.start for a, b in zip(g, g[1:]))
    c = sorted(ops_of(soc, "cpu_big"), key=lambda iv: iv.start)
    four = [iv for iv in c if iv.stream < 2]
    assert four[0].end <= four[1].start          # 4 threads each on 4 cores: one after the other
    two = [iv for iv in c if iv.stream >= 2]
    assert two[0].start == two[1].start          # 2 + 2 threads fit the 4 cores together


def test_threads_speed_up_compute_on_the_cpu_up_to_its_cores():
    def seconds(threads):
        soc = SoC(tiny_profile())
        run(soc, soc.cpu.execute(compute_bound(), Tag(), threads=threads))
        return ops_of(soc, "cpu_big")[0].seconds

    assert seconds(2) < seconds(1)
    assert seconds(8) == seconds(4)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["gpu", "dsp", "npu", "cpu_big", "copy"]),
                          st.integers(1, 5_000_000)), min_size=1, max_size=12))
def test_energy_equals_the_integral_of_rail_power_over_time(jobs):
    soc = SoC(tiny_profile())
    procs = []
    for k, (where, n) in enumerate(jobs):
        if where == "copy":
            procs.append(soc.copy(n, "boundary", Tag(k)))
        else:
            precision = I8 if where in ("dsp", "npu") else F32
            procs.append(soc.unit(where).execute(memory_bound(n, precision), Tag(k), threads=2))
    run(soc, *procs)
    t1 = soc.env.now
    energy = soc.energy(0.0, t1)
    steps = power_steps(soc.trace.intervals, soc.rails)
    integral = {}
    for (t, level), (t_next, _) in zip(steps, steps[1:] + [(t1, None)]):
        for rail, watts in level.items():
            integral[rail] = integral.get(rail, 0.0) + watts * (t_next - t)
    moved = sum(iv.bytes for iv in soc.trace.intervals) * soc.profile.dram.energy_per_byte
    integral["dram"] += moved
    for rail, joules in energy.items():
        assert math.isclose(joules, integral[rail], rel_tol=1e-9, abs_tol=1e-15), rail


def test_same_work_twice_gives_an_identical_trace():
    def once():
        soc = SoC(tiny_profile())
        run(soc, soc.unit("gpu").execute(memory_bound(), Tag(0)), soc.copy(123456, "in", Tag(1)),
            soc.cpu.execute(compute_bound(), Tag(2), threads=3))
        return soc.trace.intervals, soc.energy(0, soc.env.now)

    assert once() == once()


def test_a_unit_refuses_a_precision_it_has_no_rate_for():
    soc = SoC(tiny_profile())
    assert not soc.unit("dsp").runs(F32) and soc.unit("dsp").runs(I8)
    assert not soc.unit("ane").runs(F32)
    with pytest.raises(ValueError, match="float32"):
        run(soc, soc.unit("dsp").execute(compute_bound(), Tag()))


def test_power_steps_with_dram_bytes_integrate_to_the_whole_energy():
    soc = SoC(tiny_profile())
    run(soc, soc.unit("gpu").execute(memory_bound(), Tag(0)), soc.copy(500_000, "in", Tag(1)),
        soc.cpu.execute(compute_bound(), Tag(2), threads=2))
    t1 = soc.env.now
    steps = power_steps(soc.trace.intervals, soc.rails, soc.profile.dram.energy_per_byte)
    total = sum(sum(level.values()) * (t_next - t) for (t, level), (t_next, _) in zip(steps, steps[1:] + [(t1, None)]))
    assert math.isclose(total, sum(soc.energy(0.0, t1).values()), rel_tol=1e-9)
    peak = max(sum(level.values()) for _, level in steps)
    assert peak >= total / t1  # the average can never exceed the peak
