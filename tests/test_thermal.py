"""The thermal model: the RC network's exact steps, the governor's trips, DVFS on a unit, the profile's section."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from runtime.sweep.app_streams import run_apps
from runtime.ir.errors import ProfileError
from runtime.scenario.load import load_scenario
from sim.cost import OpClass, Precision, Work
from sim.profile import PROFILE_DIR, list_profiles, load_profile
from sim.soc import SoC
from sim.thermal import (Level, Network, Trip, UnitThermal, governed_level, network_step, rc_step, steady_state,
                         trip_on)
from sim.unit import Scales, Tag

NET = Network(die_c=3.0, die_r=8.0, skin_c=25.0, skin_r=5.0)


# ---- the network

def test_steady_state_is_ambient_plus_power_times_the_total_resistance():
    die, skin = steady_state(NET, 2.0, 0.0, 25.0)
    assert die == pytest.approx(25.0 + 2.0 * NET.r_total) and skin == pytest.approx(25.0 + 2.0 * NET.skin_r)
    # platform heat enters at the skin: it warms the die only through the skin
    die2, skin2 = steady_state(NET, 2.0, 1.0, 25.0)
    assert skin2 - skin == pytest.approx(1.0 * NET.skin_r) and die2 - die == pytest.approx(1.0 * NET.skin_r)
    # a long step lands on it, whatever the start
    assert network_step(NET, (80.0, 10.0), 2.0, 0.0, 25.0, 1e5) == pytest.approx((die, skin), abs=1e-9)


def test_one_node_approaches_exponentially_with_time_constant_rc():
    assert rc_step(25.0, 35.0, 10.0, 10.0) == pytest.approx(35.0 - 10.0 * math.exp(-1))
    # a die with (almost) no capacitance: the skin is one RC node, tau = R_skin x C_skin
    net = Network(die_c=1e-9, die_r=8.0, skin_c=25.0, skin_r=5.0)
    tau, rise = net.skin_r * net.skin_c, 2.0 * net.skin_r
    for t in (0.5 * tau, tau, 3 * tau):
        _, skin = network_step(net, (25.0, 25.0), 2.0, 0.0, 25.0, t)
        assert skin == pytest.approx(25.0 + rise * (1 - math.exp(-t / tau)), rel=1e-6)


def test_steps_are_exact_so_the_tick_does_not_matter():
    one = network_step(NET, (25.0, 25.0), 3.0, 1.0, 25.0, 60.0)
    temps = (25.0, 25.0)
    for _ in range(600):
        temps = network_step(NET, temps, 3.0, 1.0, 25.0, 0.1)
    assert temps == pytest.approx(one, rel=1e-9)
    assert one[0] > one[1] > 25.0   # heat flows from the die through the skin to the air


# ---- the governor

GPU = UnitThermal("gpu", (Level(600, 1.0), Level(500, 0.7), Level(400, 0.5)),
                  (Trip("skin", 40.0, 38.0, 1), Trip("skin", 42.0, 40.0, 2), Trip("die", 90.0, 88.0, 2)))


def test_a_trip_switches_on_above_its_threshold_and_off_below_its_clear_point():
    trip = Trip("skin", 40.0, 38.0, 1)
    assert not trip_on(False, 39.9, trip) and trip_on(False, 40.0, trip)
    assert trip_on(True, 38.5, trip)            # inside the hysteresis: stays on
    assert not trip_on(False, 38.5, trip)       # ... and off stays off
    assert not trip_on(True, 37.9, trip)


def test_the_governor_steps_down_above_a_trip_and_up_below_trip_minus_hysteresis():
    states = [False] * 3
    level, states = governed_level(GPU, states, {"skin": 39.0, "die": 60.0})
    assert level == 0
    level, states = governed_level(GPU, states, {"skin": 40.5, "die": 60.0})
    assert level == 1
    level, states = governed_level(GPU, states, {"skin": 42.5, "die": 60.0})
    assert level == 2
    level, states = governed_level(GPU, states, {"skin": 41.0, "die": 60.0})   # below 42, above its clear 40
    assert level == 2
    level, states = governed_level(GPU, states, {"skin": 39.0, "die": 60.0})   # second trip clears, first holds
    assert level == 1
    level, states = governed_level(GPU, states, {"skin": 37.0, "die": 95.0})   # the die alone can throttle
    assert level == 2
    level, states = governed_level(GPU, states, {"skin": 37.0, "die": 60.0})
    assert level == 0
    assert GPU.scales(1) == (500 / 600, 0.7)


# ---- DVFS on a unit

def _gpu_op() -> Work:
    return Work("CONV_2D", OpClass.CONV, Precision.FLOAT16, macs=50_000_000, bytes_read=1000, bytes_written=1000)


def _run_op(soc, scale=Scales()):
    soc.env.process(soc.unit("gpu").execute(_gpu_op(), Tag(0, 0), scale))
    soc.env.run()
    return soc.trace.intervals[-1]


def test_a_dvfs_level_slows_compute_and_cuts_power_and_a_delegate_clock_caps_instead_of_compounding():
    profile = load_profile("pixel4")
    nominal = _run_op(SoC(profile))
    soc = SoC(profile)
    soc.unit("gpu").dvfs = Scales(0.85, 0.7)
    slowed = _run_op(soc)
    assert slowed.seconds > nominal.seconds * 1.1 and slowed.watts < nominal.watts * 0.75
    # SUSTAINED_SPEED's lower clock (0.8) is already below a 0.85 level: nothing changes
    sustained = Scales(0.8, 0.8, clock=0.8)
    assert soc.unit("gpu").clocked(sustained) == sustained
    # below it, the level's clock runs instead of 0.8 x the level
    soc.unit("gpu").dvfs = Scales(0.6, 0.4)
    assert soc.unit("gpu").clocked(sustained) == Scales(pytest.approx(0.6), pytest.approx(0.4), 1.0, 0.6)
    assert SoC(profile).unit("gpu").clocked(sustained) is sustained   # no governor: untouched


# ---- the profile's section

PHONES = ["pixel3", "pixel4", "iphone_xs"]
NOT_A_PHONE = {"generic"}   # round numbers for no real device: nothing to take a thermal model from
# Today's Snapdragon phones have no thermal section yet (their clock tables and trips are not written):
# a sustained scenario runs them at their nominal clocks. Listed so that the gap is a decision, not a miss.
NO_THERMAL_YET = {"galaxy_s23", "galaxy_s24", "sd8_elite_qrd", "galaxy_s25", "sd8_elite_gen5_qrd", "sd7_gen4_qrd"}


def _gpu_thermal(phone: str) -> UnitThermal:
    return next(u for u in load_profile(phone).thermal.units if u.unit == "gpu")


def test_every_shipped_phone_profile_has_a_thermal_section_with_a_gpu_entry():
    shipped = set(list_profiles()) - NOT_A_PHONE - NO_THERMAL_YET
    assert set(PHONES) <= shipped
    assert all(load_profile(p).thermal is None for p in NO_THERMAL_YET)
    for phone in sorted(shipped):
        profile = load_profile(phone)
        spec = profile.thermal
        assert spec is not None, f"{phone}.yaml has no thermal section"
        assert {u.unit for u in spec.units} <= {u.name for u in profile.units}, phone
        gpu = _gpu_thermal(phone)
        assert len(gpu.levels) >= 3 and {t.sensor for t in gpu.trips} == {"skin", "die"}, phone
        # active power falls faster than the clock (f V^2)
        assert all(lv.power < lv.mhz / gpu.levels[0].mhz for lv in gpu.levels[1:]), phone
    # the Snapdragon phones' levels are their kernels' GPU power levels
    assert [lv.mhz for lv in _gpu_thermal("pixel4").levels] == [585, 499.2, 427, 345, 257]
    assert [lv.mhz for lv in _gpu_thermal("pixel3").levels] == [710, 675, 596, 520, 414, 342, 257]


# A GPU stream heavy enough to heat the phone (~86 ms a frame on the Pixel 4's GPU at 5 fps, about
# half the time busy) for the ten minutes of scenarios/sustained_camera.yaml, with its 2.5 W of display
# and camera besides. The heat follows the GPU's busy share and power, not the frame count: half the
# frames of twice the work (alpha 1.4 at 10 fps before) heat the phone alike (Pixel 4: skin 42.1 vs
# 42.3 C, first throttle at 291 vs 276 s, both down to 427 MHz, p50 up 36% vs 35%) at half the host
# time. Apps run timing-only: 3,000 frames of a 31-node graph are a few seconds of host time.
STREAM, RATE_HZ = "{zoo: mobilenet_v1, args: {alpha: 2.0, resolution: 448}}", 5


@pytest.mark.parametrize("phone", PHONES)
def test_a_ten_minute_gpu_stream_heats_the_phone_until_it_throttles_and_its_latency_rises(tmp_path, phone):
    path = tmp_path / f"{phone}.yaml"
    path.write_text(f"device: {phone}\nduration_s: 600\nthermal: {{platform_w: 2.5}}\napps:\n"
                    f"  - name: camera\n    model: {STREAM}\n    delegates: [gpu: {{}}]\n    rate_hz: {RATE_HZ}\n")
    (record,), _ = run_apps(load_scenario(path)[0])
    heat, s, gpu = record["thermal"], record["sustained"], _gpu_thermal(phone)
    assert record["timing_only"] is True and record["frames"]["completed"] == 600 * RATE_HZ
    first_trip = min(t.at_c for t in gpu.trips if t.sensor == "skin")
    assert heat["skin_c"]["max"] >= first_trip
    throttled = heat["units"]["gpu"]
    # clocked down before the last minute the steady figure is taken over, and still down at the end
    assert throttled["first_throttle_s"] is not None and throttled["first_throttle_s"] < 600 - s["last_s"]
    assert throttled["final_mhz"] < gpu.levels[0].mhz
    assert s["p50_last_ms"] > s["p50_first_ms"] * 1.05 and s["rise"] > 0.05


@pytest.mark.parametrize("old, new, key, complaint", [
    ("clear_c: 39.1, level: 1}", "clear_c: 41.5, level: 1}", "thermal.units.gpu.trips[0].clear_c", "below at_c"),
    ("sensor: skin, at_c: 42,", "sensor: case, at_c: 42,", "thermal.units.gpu.trips[1].sensor", "unknown sensor"),
    ("- [499.2, 0.71]", "- [599.2, 0.71]", "thermal.units.gpu.levels[1][0]", "fastest first"),
    ("c_j_per_k: 25 ", "c_j_per_k: -25 ", "thermal.skin.c_j_per_k", "positive"),
    # 1e-300 J/K (and K/W) made every temperature NaN, written as null, and no trip ever fired
    ("c_j_per_k: 3 ", "c_j_per_k: 1.0e-300 ", "thermal.die.c_j_per_k", "of at least 1e-09"),
    ("tick_ms: 100 ", "tick_ms: 1.0e+300 ", "thermal.tick_ms", "of at most 3.6e+06"),
    ("    gpu:\n      levels:", "    gpu2:\n      levels:", "thermal.units.gpu2", "does not define"),
])
def test_a_bad_thermal_section_names_file_line_and_key(tmp_path: Path, old, new, key, complaint):
    text = (PROFILE_DIR / "pixel4.yaml").read_text(encoding="utf-8")
    assert text.count(old) == 1
    path = tmp_path / "phone.yaml"
    path.write_text(text.replace(old, new), encoding="utf-8")
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    message = str(info.value)
    line = next(n for n, l in enumerate(path.read_text().splitlines(), 1) if new.splitlines()[0] in l)
    assert message.startswith(f"{path}:") and f": {key}: " in message and complaint in message, message
    assert f"{path}:{line}:" in message or key.endswith("gpu2")
