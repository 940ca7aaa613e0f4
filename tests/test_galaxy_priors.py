"""The prior profiles of today's Snapdragon phones (Galaxy S23, S24, Snapdragon 8 Elite QRD) load and run
MobileNet v1: int8 on the HTP through the QNN delegate, float on the GPU, with sane figures."""

from __future__ import annotations

import json

import pytest

from runtime.cli.main import main
from sim.cost import Precision
from sim.dsp import has_htp
from sim.profile import PROFILE_DIR, list_profiles, load_profile
from sim.spec import UnitKind

PRIORS = {"galaxy_s23": 73, "galaxy_s24": 75, "sd8_elite_qrd": 79}


def _prior(name: str) -> str:
    return str(PROFILE_DIR / "priors" / f"{name}.yaml")


def _run(tmp_path, name: str, *argv: str) -> dict:
    out = tmp_path / "run.json"
    assert main(["benchmark", "--zoo", "mobilenet_v1", "--device", _prior(name), "--timing_only",
                 "--num_runs=1", "--warmup_runs=0", f"--output_json={out}", *argv]) == 0
    return json.loads(out.read_text())


@pytest.mark.parametrize("name", PRIORS)
def test_each_prior_loads_with_its_htp_and_positive_numbers(name):
    profile = load_profile(_prior(name))
    assert profile.name == name and name not in list_profiles()     # a prior, not a shipped phone
    dsp = profile.unit("dsp")
    assert has_htp(dsp) and dsp.extras["htp_arch"] == PRIORS[name]
    assert {Precision.INT8, Precision.FLOAT16} <= set(dsp.macs_per_s)  # QNN runs float graphs in fp16 here
    for unit in profile.units:
        numbers = [*unit.macs_per_s.values(), *unit.elem_per_s.values(), *unit.active_w.values(), unit.bandwidth]
        assert all(x > 0 for x in numbers), unit.name
    assert profile.units_of(UnitKind.GPU)


@pytest.mark.parametrize("name", PRIORS)
def test_mobilenet_int8_on_the_htp_beats_the_cpu_and_float_runs_on_the_gpu(tmp_path, name):
    cpu = _run(tmp_path, name, "--quantization", "int8")
    htp = _run(tmp_path, name, "--quantization", "int8", "--use_qnn")
    gpu = _run(tmp_path, name, "--use_gpu")
    assert set(htp["placement"].values()) == {"TfLiteQnnDelegate"}
    assert set(gpu["placement"].values()) == {"TfLiteGpuDelegateV2"}
    assert 0 < htp["latency_ms"]["avg"] < cpu["latency_ms"]["avg"]
    assert gpu["latency_ms"]["avg"] > 0
    for record, unit in ((htp, "dsp"), (gpu, "gpu"), (cpu, "cpu_big")):
        assert record["energy"]["rails"][unit]["active_mj"] > 0
        assert all(rail["total_mj"] >= 0 for rail in record["energy"]["rails"].values())
