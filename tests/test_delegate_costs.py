"""What delegate options cost on the simulated phone: backends, precision, caches, preferences, DVFS."""

from __future__ import annotations

import numpy as np
import pytest

from delegates.registry import make_delegate
from runtime.interpreter.api import Interpreter
from runtime.measure.figures import measure
from runtime.zoo import build
from sim.profile import load_profile
from tests.sim_kit import calibrated_int8
from sim.trace import Kind


@pytest.fixture(scope="module")
def net():
    return build("mobilenet_v1", alpha=0.5, resolution=96, classes=10)


@pytest.fixture(scope="module")
def net_int8(net):
    return calibrated_int8(net, seed=2, samples=3)


def measured(graph, device, kind, runs=2, **options):
    profile = load_profile(device)
    it = Interpreter(graph=graph, experimental_delegates=[make_delegate(kind, profile, **options)],
                     device=profile, num_threads=4, timing_only=True)
    it.allocate_tensors()
    for _ in range(runs):
        it.invoke()
    soc = it.simulation.soc
    return measure(soc, soc.trace.inferences, 1), soc


def test_opengl_is_slower_than_opencl(net):
    cl, _ = measured(net, "pixel4", "gpu", backend="cl")
    gl, _ = measured(net, "pixel4", "gpu", backend="gl")
    assert gl.latency.avg > cl.latency.avg


def test_float16_is_faster_than_float32_on_the_gpu(net):
    fp16, _ = measured(net, "pixel4", "gpu", is_precision_loss_allowed=True)
    fp32, _ = measured(net, "pixel4", "gpu", is_precision_loss_allowed=False)
    assert fp16.latency.avg < fp32.latency.avg


def test_the_gpu_serialization_cache_cuts_init_on_the_second_run(net, tmp_path):
    options = dict(serialization_dir=str(tmp_path), model_token="net")
    cold, _ = measured(net, "pixel4", "gpu", **options)
    warm, _ = measured(net, "pixel4", "gpu", **options)
    plain, _ = measured(net, "pixel4", "gpu")
    assert cold.init_s == pytest.approx(plain.init_s)
    assert warm.init_s < 0.5 * cold.init_s
    assert list(tmp_path.iterdir())  # the cache is a real file in the directory


def test_the_nnapi_compilation_cache_needs_both_dir_and_token(net_int8, tmp_path):
    first, _ = measured(net_int8, "pixel4", "nnapi", cache_dir=str(tmp_path), model_token="m")
    second, _ = measured(net_int8, "pixel4", "nnapi", cache_dir=str(tmp_path), model_token="m")
    no_token, _ = measured(net_int8, "pixel4", "nnapi", cache_dir=str(tmp_path))
    assert second.init_s < first.init_s and no_token.init_s == pytest.approx(first.init_s)


def test_low_power_preference_trades_speed_for_power(net_int8):
    fast, _ = measured(net_int8, "pixel4", "nnapi", accelerator_name="qti-dsp",
                       execution_preference="fast_single_answer")
    frugal, _ = measured(net_int8, "pixel4", "nnapi", accelerator_name="qti-dsp", execution_preference="low_power")
    assert frugal.latency.avg > fast.latency.avg
    dsp = lambda m: next(r for r in m.energy if r.rail == "dsp").active_mj  # noqa: E731
    assert dsp(frugal) < dsp(fast)


def test_each_hexagon_partition_pays_a_remote_call(net_int8):
    one, soc1 = measured(net_int8, "pixel3", "hexagon")
    calls = [iv for iv in soc1.trace.intervals if iv.kind is Kind.INVOKE and iv.inference == 1]
    assert len(calls) == one.boundary.crossings / 2 >= 1
    assert all(iv.seconds == pytest.approx(load_profile("pixel3").unit("dsp").invoke_s) for iv in calls)


def test_the_gpu_pads_channels_to_four_and_the_cpu_does_not(net):
    _, soc = measured(net, "pixel4", "gpu")
    gpu = [iv for iv in soc.trace.intervals if iv.lane == "gpu" and iv.kind is Kind.OP and iv.inference == 1]
    first_conv = gpu[0]  # 3 input channels, stored as 4 on the GPU
    macs = dict(first_conv.args)["macs"]
    out = net.tensors[net.ops[0].outputs[0]].shape
    k = net.tensors[net.ops[0].inputs[1]].shape
    assert macs == int(np.prod(out[:3])) * ((out[3] + 3) // 4 * 4) * k[1] * k[2] * 4


def test_each_nnapi_execution_pays_the_drivers_cost(net_int8):
    _, soc = measured(net_int8, "pixel4", "nnapi", accelerator_name="google-edgetpu")
    calls = [iv for iv in soc.trace.intervals if iv.kind is Kind.INVOKE and iv.inference == 1]
    device = next(d for d in load_profile("pixel4").nnapi_devices if d.name == "google-edgetpu")
    assert calls and all(iv.seconds == pytest.approx(device.execution_s) for iv in calls)


def test_a_delegate_made_for_another_phone_is_a_delegate_error(net_int8):
    from runtime.ir.errors import DelegateError

    delegate = make_delegate("nnapi", load_profile("pixel4"), accelerator_name="google-edgetpu")
    it = Interpreter(graph=net_int8, experimental_delegates=[delegate], device="pixel3")
    with pytest.raises(DelegateError, match="pixel3 profile has no unit 'npu'"):
        it.allocate_tensors()
