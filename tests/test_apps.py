"""Concurrent apps for a span of simulated time: frames, drops and misses, contention, energy per stream,
the phone heating until the governor clocks the GPU down, and the schema's one-line errors."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from runtime.sweep.app_streams import run_apps
from runtime.ir.errors import ScenarioError
from runtime.sweep.runner import check_file, run_file
from runtime.scenario.load import load_scenario, scenario_from_text
from runtime.measure.chrome_trace import chrome_trace
from sim.profile import PROFILE_DIR

CAMERA = "{zoo: mobilenet_v1, args: {alpha: 0.5, resolution: 160}}"   # ~4 ms on the Pixel 4's GPU
AUDIO = "{zoo: mobilenet_v1, args: {alpha: 0.25, resolution: 96}, quantization: int8}"
HANDS = "{zoo: tiny_cnn}"


def apps_doc(apps: str, duration: float = 1.0, extra: str = "", device: str = "pixel4") -> str:
    return f"device: {device}\nduration_s: {duration}\n{extra}apps:\n{apps}"


def app(name: str, model: str, rate: float, delegates: str = "[]", more: str = "") -> str:
    return (f"  - name: {name}\n    model: {model}\n    delegates: {delegates}\n    rate_hz: {rate}\n"
            + "".join(f"    {line}\n" for line in more.splitlines()))


def load(tmp_path: Path, text: str, name: str = "apps.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return load_scenario(path)[0]


def by_app(records: list[dict]) -> dict[str, dict]:
    return {r["app"]["name"]: r for r in records}


# ---- streams on their units

def test_different_models_on_different_units_each_get_their_frames_and_percentiles(tmp_path):
    sc = load(tmp_path, apps_doc(app("camera", CAMERA, 30, "[gpu: {}]") +
                                 app("audio", AUDIO, 10, "[nnapi: {accelerator_name: qti-dsp}]") +
                                 app("hands", HANDS, 15, more="cpu: {threads: 2}"), duration=2.0))
    records, soc = run_apps(sc)
    rec = by_app(records)
    assert {k: r["app"]["units"] for k, r in rec.items()} == {"camera": ["gpu"], "audio": ["dsp"], "hands": ["cpu_big"]}
    for name, rate in (("camera", 30), ("audio", 10), ("hands", 15)):
        r = rec[name]
        assert r["frames"]["arrived"] == math.ceil(2.0 * rate) == r["frames"]["completed"] == r["latency_ms"]["count"]
        assert r["frames"]["dropped"] == r["frames"]["deadline_misses"] == 0
        lat = r["latency_ms"]
        assert 0 < lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
        assert r["label"] == f"apps app={name}" and r["streams"] == 3 and r["timing_only"] is True
    assert rec["camera"]["thermal"]["units"]["gpu"]["final_mhz"] == 585   # two seconds heat nothing
    # each app's latency carries the band of the delegate that ran it, and says when its model is unlike the fit
    assert [rec[n]["error_band"]["delegate"] for n in ("camera", "audio", "hands")] == ["gpu", "nnapi", "cpu"]
    assert rec["hands"]["outside_fit"] and any("int8" in p for p in rec["audio"]["outside_fit"])


def test_a_frame_arriving_while_one_runs_is_dropped_or_queued(tmp_path):
    slow = "{zoo: mobilenet_v1}"     # ~8.6 ms on the GPU, fed every 5 ms
    drop = by_app(run_apps(load(tmp_path, apps_doc(app("cam", slow, 200, "[gpu: {}]"), 0.5)))[0])["cam"]
    f = drop["frames"]
    assert f["arrived"] == 100 and f["dropped"] > 0 and f["completed"] + f["dropped"] == 100
    assert f["deadline_misses"] == f["completed"]      # each result comes after the next frame arrived
    queue = by_app(run_apps(load(tmp_path, apps_doc(app("cam", slow, 200, "[gpu: {}]", "when_busy: queue"), 0.5),
                                 "q.yaml"))[0])["cam"]
    assert queue["frames"]["dropped"] == 0 and queue["frames"]["completed"] == 100
    # waiting frames pile up: the latency (arrival to result) grows far past the inference's own time
    assert queue["latency_ms"]["max"] > 10 * drop["latency_ms"]["max"]
    assert queue["service_ms"]["avg"] == pytest.approx(drop["service_ms"]["avg"], rel=0.05)


def test_a_stream_alone_is_faster_than_with_another_on_the_same_unit(tmp_path):
    alone = by_app(run_apps(load(tmp_path, apps_doc(app("a", CAMERA, 30, "[gpu: {}]"))))[0])["a"]
    shared = by_app(run_apps(load(tmp_path, apps_doc(app("a", CAMERA, 30, "[gpu: {}]") +
                                                     app("b", "{zoo: mobilenet_v2}", 30, "[gpu: {}]")), "b.yaml"))[0])["a"]
    assert shared["latency_ms"]["avg"] > alone["latency_ms"]["avg"] * 1.2
    assert shared["latency_ms"]["p99"] > alone["latency_ms"]["p99"]


def test_energy_per_stream_sums_to_the_socs_total(tmp_path):
    text = apps_doc(app("camera", CAMERA, 30, "[gpu: {}]") + app("hands", HANDS, 20), 1.0, "trace_s: 1.0\n")
    records, soc = run_apps(load(tmp_path, text))
    run = records[0]["run"]
    assert math.fsum(run["streams_mj"].values()) + run["idle_mj"] == pytest.approx(run["soc_mj"], rel=1e-12)
    assert run["check_mj"] == pytest.approx(run["soc_mj"], rel=1e-9)
    # trace_s covers the run: nothing was folded away, so the whole-SoC integral of sim/power.py agrees
    t0, t1 = soc.monitor.start, soc.env.now
    assert 1e3 * math.fsum(soc.energy(t0, t1).values()) == pytest.approx(run["soc_mj"], rel=1e-9)
    for r in records:   # each stream's share is its own intervals (their Tag), whole
        mine = [iv for iv in soc.trace.intervals if iv.stream == records.index(r) and iv.inference >= 0]
        direct = math.fsum(iv.joules + iv.bytes * soc.profile.dram.energy_per_byte for iv in mine)
        assert r["energy"]["stream_mj"] == pytest.approx(1e3 * direct, rel=1e-9)
        assert r["energy"]["total_mj"] == pytest.approx(r["energy"]["stream_mj"] / r["frames"]["completed"])


def test_a_long_run_folds_its_trace_away_and_keeps_the_same_figures(tmp_path):
    text = apps_doc(app("camera", CAMERA, 30, "[gpu: {}]"), 3.0)
    kept, soc_kept = run_apps(dataclasses.replace(load(tmp_path, text, "k.yaml"), trace_s=3.0))
    folded, soc_folded = run_apps(dataclasses.replace(load(tmp_path, text, "f.yaml"), trace_s=0.5))
    assert len(soc_folded.trace.intervals) < len(soc_kept.trace.intervals) / 3
    for key in ("latency_ms", "frames", "energy", "boundary"):
        assert folded[0][key] == kept[0][key]


# ---- heat

def hot_profile(tmp_path: Path) -> Path:
    """The Pixel 4 with a skin of a sixth of its capacitance: what takes minutes takes seconds."""
    text = (PROFILE_DIR / "pixel4.yaml").read_text(encoding="utf-8")
    assert text.count("    c_j_per_k: 25 ") == 1
    path = tmp_path / "hot_pixel4.yaml"
    path.write_text(text.replace("    c_j_per_k: 25 ", "    c_j_per_k: 4 "), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def hot(tmp_path_factory) -> dict[str, tuple[dict, object]]:
    """A minute of a camera app on a hot phone in a warm room, once per GPU inference preference."""
    tmp_path = tmp_path_factory.mktemp("hot")
    runs = {}
    for preference in ("fast_single_answer", "sustained_speed"):
        text = apps_doc(app("camera", CAMERA, 30, f"[gpu: {{inference_preference: {preference}}}]"), 60,
                        "thermal: {ambient_c: 30, platform_w: 3}\n", device=str(hot_profile(tmp_path)))
        records, soc = run_apps(load(tmp_path, text, f"{preference}.yaml"))
        runs[preference] = records[0], soc
    return runs


def test_a_sustained_run_heats_the_phone_and_the_gpu_streams_latency_rises(hot):
    fast, soc = hot["fast_single_answer"]
    heat, s = fast["thermal"], fast["sustained"]
    assert heat["skin_c"]["max"] > 41 and heat["units"]["gpu"]["first_throttle_s"] is not None
    assert heat["units"]["gpu"]["final_mhz"] < 585
    assert s["p50_last_ms"] > s["p50_first_ms"] * 1.05 and s["rise"] > 0.05
    # temperature and frequency counters in the Chrome trace
    events = chrome_trace(soc, "hot")["traceEvents"]
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert {"temperature", "frequency gpu", "frequency cpu_big", "power soc (tick)"} <= counters
    temps = [e["args"]["skin_C"] for e in events if e["name"] == "temperature"]
    assert temps[-1] > temps[0] + 10 and len(temps) == pytest.approx(600, abs=2)   # a sample every 100 ms


def test_sustained_speed_starts_slower_and_throttles_less_than_fast_single_answer(hot):
    (fast, _), (slow, _) = hot["fast_single_answer"], hot["sustained_speed"]
    assert slow["sustained"]["p50_first_ms"] > fast["sustained"]["p50_first_ms"] * 1.05   # a lower clock from the start
    assert slow["sustained"]["rise"] < fast["sustained"]["rise"] / 2                      # that the heat bites less


def test_thermal_false_keeps_the_clocks(tmp_path):
    text = apps_doc(app("camera", CAMERA, 30, "[gpu: {}]"), 1.0, "thermal: false\n")
    records, soc = run_apps(load(tmp_path, text))
    assert records[0]["thermal"] is None and soc.monitor.thermal is None and soc.unit("gpu").dvfs is None


# ---- the file, end to end

def test_run_file_writes_a_record_per_stream_and_reports_them(tmp_path):
    path = tmp_path / "two.yaml"
    path.write_text(apps_doc(app("camera", CAMERA, 30, "[gpu: {}]") + app("hands", HANDS, 15), 1.0))
    results = run_file(path, tmp_path / "out")
    assert [r["label"] for r in results["records"]] == ["two app=camera", "two app=hands"]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "### Frames" in report and "### Heat" in report and "p50 ms, first 0.5 s" in report
    head = (tmp_path / "out" / "results.csv").read_text().splitlines()[0].split(",")
    assert {"frames.completed", "frames.dropped", "frames.deadline_misses", "sustained.rise"} <= set(head)
    trace = json.loads((tmp_path / "out" / "trace.json").read_text())
    assert any(e["name"] == "temperature" and e["ph"] == "C" for e in trace["traceEvents"])


def test_the_shipped_sustained_scenario_loads_as_ten_minutes_of_three_apps():
    (sc,) = check_file(Path(__file__).parent.parent / "scenarios" / "sustained_camera.yaml")
    assert sc.duration_s == 600 and [a.name for a in sc.apps] == ["camera", "audio", "hands"]
    assert [a.rate_hz for a in sc.apps] == [30, 10, 15] and sc.timing_only and sc.thermal.platform_w == 2.5


# ---- the schema

@pytest.mark.parametrize("text, line, key, complaint", [
    (apps_doc(app("a", HANDS, 0)), 7, "apps[0].rate_hz", "must be above 0"),
    (apps_doc(app("a", HANDS, 10, more="when_busy: sometimes")), 8, "apps[0].when_busy", "is not one of drop, queue"),
    (apps_doc(app("a", HANDS, 10) + app("a", HANDS, 5)), 8, "apps[1].name", "used twice"),
    (apps_doc(app("a", "{zoo: tiny_cnn, quantization: int9}", 10)), 5, "apps[0].model.quantization", "int9"),
    (apps_doc(app("a", HANDS, 10, "[gpu2]")), 6, "apps[0].delegates[0].gpu2", "did you mean"),
    (apps_doc(app("a", HANDS, 10), 0), 2, "duration_s", "must be in"),
    (apps_doc(app("a", HANDS, 1000), 3600), 2, "duration_s", "3,600,000 frames"),
    (apps_doc(app("a", HANDS, 10), 1, "thermal: {ambient: 3}\n"), 3, "thermal.ambient", "unknown key"),
    (apps_doc(app("a", HANDS, 10), 1, "model: {zoo: tiny_cnn}\n"), 3, "model", "each app names its own model"),
    (apps_doc(app("a", HANDS, 10), 1, "runs: {count: 3}\n"), 3, "runs", "not used with apps"),
    ("device: pixel4\napps: []\nduration_s: 1\n", 2, "apps", "non-empty list"),
    ("device: pixel4\napps:\n" + app("a", HANDS, 10), 1, "duration_s", "required key missing"),
    ("device: pixel4\nmodel: {zoo: tiny_cnn}\nthermal: true\n", 1, "apps", "required key missing"),
])
def test_a_bad_apps_scenario_names_file_line_and_key(tmp_path, text, line, key, complaint):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: {key}: ") and complaint in message and "\n" not in message, message


def test_thermal_on_a_phone_without_a_thermal_model_fails_at_check_naming_the_line(tmp_path):
    path = tmp_path / "generic.yaml"   # the made-up generic phone has no thermal model
    path.write_text(apps_doc(app("a", HANDS, 10), 1, "thermal: {ambient_c: 30}\n", device="generic"))
    with pytest.raises(ScenarioError, match=rf"^{path}:3: thermal: the generic profile has no thermal section"):
        check_file(path)
    path.write_text(apps_doc(app("a", HANDS, 10), 1, device="generic"))   # not asked for: runs without
    assert check_file(path)[0].thermal.enabled is None


def test_an_apps_matrix_varies_the_air_and_the_apps(tmp_path):
    text = apps_doc(app("a", HANDS, 10), 1) + "matrix:\n  thermal.ambient_c: [20, 35]\n  duration_s: [1, 2]\n"
    cells = scenario_from_text(text, tmp_path / "m.yaml")
    assert [(c.thermal.ambient_c, c.duration_s) for c in cells] == [(20, 1), (20, 2), (35, 1), (35, 2)]
    assert cells[0].label == "ambient_c=20 duration_s=1"


def test_the_keys_that_make_an_apps_scenario_are_scenario_keys():
    import runtime.scenario.spec as scenario
    from runtime.scenario.apps import APPS_KEYS

    assert set(APPS_KEYS) <= set(scenario.SCHEMA)
    assert all(f'"{key}"' in Path(scenario.__file__).read_text() for key in APPS_KEYS)
