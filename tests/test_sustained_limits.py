"""Sustained (apps:) runs stay bounded: durations, rates, frame counts, queue sizes, trace_s and the
monitor's tick have limits checked at load with FILE:LINE, generated damaged documents load within
them or fail in one line, and a run at (scaled-down) limits does a counted, bounded amount of work."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.cli.main import main
from runtime.ir.errors import ScenarioError
from runtime.limits import counts as limits
from runtime.scenario import apps as apps_module
from runtime.scenario.apps import DEFAULT_QUEUE, MAX_DURATION_S, MAX_RATE_HZ
from runtime.scenario.load import load_scenario
from runtime.sweep.app_streams import TICK_S, run_apps
from runtime.sweep.runner import check_file
from sim.profile import PROFILE_DIR

TINY = "{zoo: tiny_cnn}"
SLOW = "{zoo: mobilenet_v1}"      # ~8.6 ms a frame on the Pixel 4's GPU


def doc(apps: list[dict], duration="1", extra: str = "", device: str = "pixel4") -> str:
    lines = [f"device: {device}", f"duration_s: {duration}", *([extra] if extra else []), "apps:"]
    for a in apps:
        lines.append(f"  - name: {a['name']}")
        lines += [f"    {k}: {v}" for k, v in a.items() if k != "name"]
    return "\n".join(lines) + "\n"


def write(tmp_path: Path, text: str, name: str = "apps.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def refused(path: Path, key: str) -> str:
    with pytest.raises(ScenarioError) as info:
        check_file(path)
    message = str(info.value)
    assert re.match(rf"^{re.escape(str(path))}:\d+: {re.escape(key)}: ", message) and "\n" not in message, message
    return message


# ---- each limit, at its line

def test_queue_size_is_bounded_and_only_for_a_queueing_app(tmp_path):
    over = write(tmp_path, doc([{"name": "a", "model": TINY, "rate_hz": 10, "when_busy": "queue",
                                 "queue_size": limits.MAX_QUEUE + 1}]))
    assert "must be at most 1,000 (frames waiting behind the running one)" in refused(over, "apps[0].queue_size")
    zero = write(tmp_path, doc([{"name": "a", "model": TINY, "rate_hz": 10, "when_busy": "queue", "queue_size": 0}]))
    refused(zero, "apps[0].queue_size")
    dropping = write(tmp_path, doc([{"name": "a", "model": TINY, "rate_hz": 10, "queue_size": 5}]))
    assert "only with when_busy: queue" in refused(dropping, "apps[0].queue_size")
    (sc,) = check_file(write(tmp_path, doc([{"name": "a", "model": TINY, "rate_hz": 10, "when_busy": "queue"},
                                            {"name": "b", "model": TINY, "rate_hz": 10}])))
    assert [(a.queue_size, a.waiting) for a in sc.apps] == [(DEFAULT_QUEUE, DEFAULT_QUEUE), (DEFAULT_QUEUE, 0)]


def test_trace_s_keeps_at_most_max_trace_frames_and_its_default_shrinks_to_fit(tmp_path):
    fast = [{"name": f"a{i}", "model": TINY, "rate_hz": 1000} for i in range(8)]    # 8,000 frames a second
    message = refused(write(tmp_path, doc(fast, 10, "trace_s: 2")), "trace_s")
    assert "16,000 frames; the limit is 10,000 (at most 1.25 s at these rates)" in message
    (sc,) = check_file(write(tmp_path, doc(fast, 10), "default.yaml"))
    assert sc.trace_s < 1.25 and sum(a.frames(sc.trace_s) for a in sc.apps) <= limits.MAX_TRACE_FRAMES
    (sc,) = check_file(write(tmp_path, doc(fast, 10, f"trace_s: {sc.trace_s!r}"), "again.yaml"))  # written back: loads


def thermal_profile(tmp_path: Path, tick_ms: float) -> Path:
    text = (PROFILE_DIR / "pixel4.yaml").read_text(encoding="utf-8")
    text, n = re.subn(r"(?m)^(\s*)tick_ms: *100\b", rf"\g<1>tick_ms: {tick_ms:g}", text)
    assert n == 1
    path = tmp_path / f"tick{tick_ms:g}.yaml"
    path.write_text(text)
    return path


def test_the_monitor_ticks_over_duration_s_are_bounded_by_the_profiles_tick(tmp_path):
    fine = thermal_profile(tmp_path, 1)          # 1 ms: an hour would be 3.6 million ticks
    path = write(tmp_path, doc([{"name": "a", "model": TINY, "rate_hz": 1}], 3600, device=str(fine)))
    with pytest.raises(ScenarioError, match=rf"^{re.escape(str(path))}:2: duration_s: 3600 s at the pixel4 profile's "
                                            r"thermal tick_ms of 1 ms is 3,600,000 monitor ticks; the limit is 100,000$"):
        check_file(path)
    at_limit = write(tmp_path, doc([{"name": "a", "model": TINY, "rate_hz": 1}], 100, device=str(fine)), "ok.yaml")
    assert check_file(at_limit)                 # 100 s / 1 ms: exactly the limit
    off = write(tmp_path, doc([{"name": "a", "model": TINY, "rate_hz": 1}], 3600, "thermal: false",
                              device=str(fine)), "off.yaml")
    assert check_file(off)                     # no thermal model: the monitor folds every 100 ms
    assert math.ceil(3600 / TICK_S) <= limits.MAX_MONITOR_TICKS


def test_the_command_line_says_the_limit_in_one_line(tmp_path, capsys):
    path = write(tmp_path, doc([{"name": "a", "model": TINY, "rate_hz": 10, "when_busy": "queue",
                                 "queue_size": 10 ** 9}]))
    assert main(["run", str(path), "--check"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and f"{path}:8: apps[0].queue_size" in err, err


# ---- generated damaged documents

NUMBERS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10 ** 30, 10 ** 30),
                    st.sampled_from([0, 1, 1e-9, 1e308, "1e999", "'10'", "[]", "{}", "true", "null", "~", ".nan",
                                     "-.inf", "0x10", "1_000", MAX_DURATION_S, MAX_RATE_HZ, limits.MAX_QUEUE,
                                     limits.MAX_QUEUE + 1, 3600.0001]))


def show(value) -> str:
    return repr(value) if isinstance(value, float) else str(value)


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(apps=st.integers(1, 20), duration=NUMBERS, rate=NUMBERS, queue=st.one_of(st.none(), NUMBERS),
       trace=st.one_of(st.none(), NUMBERS), busy=st.sampled_from(["drop", "queue", "later", "[]"]))
def test_generated_apps_documents_load_within_the_limits_or_fail_in_one_line(tmp_path, apps, duration, rate, queue,
                                                                             trace, busy):
    items = [{"name": f"a{i}", "model": TINY, "rate_hz": show(rate), "when_busy": busy,
              **({} if queue is None else {"queue_size": show(queue)})} for i in range(apps)]
    path = write(tmp_path, doc(items, show(duration), "" if trace is None else f"trace_s: {show(trace)}"))
    try:
        cells = check_file(path)
    except ScenarioError as exc:
        message = str(exc)
        assert message.startswith(f"{path}:") and "\n" not in message and "Traceback" not in message, message
        return
    for sc in cells:      # what loads is inside every limit that bounds the run's events and memory
        frames = sum(a.frames(sc.duration_s) for a in sc.apps)
        assert 0 < sc.duration_s <= MAX_DURATION_S and frames <= limits.MAX_INFERENCES
        assert all(0 < a.rate_hz <= MAX_RATE_HZ and 0 <= a.waiting <= limits.MAX_QUEUE for a in sc.apps)
        assert sum(a.frames(sc.trace_s) for a in sc.apps if sc.trace_s > 0) <= limits.MAX_TRACE_FRAMES
        assert len(sc.apps) <= limits.MAX_STREAMS and math.ceil(sc.duration_s / 0.1) <= limits.MAX_MONITOR_TICKS


# ---- a run at the limits does bounded work

def test_a_full_queue_drops_so_the_backlog_after_duration_s_is_bounded(tmp_path):
    """mobilenet_v1 fed every millisecond: without a bound, all 300 frames would wait and run after the
    0.3 s; with queue_size 4 at most 4 wait behind the running one, the rest are dropped."""
    (sc,) = load_scenario(write(tmp_path, doc([{"name": "a", "model": SLOW, "rate_hz": 1000, "when_busy": "queue",
                                                "queue_size": 4, "delegates": "[gpu: {}]"}], 0.3)))
    (rec,), soc = run_apps(sc)
    f, service_s = rec["frames"], rec["service_ms"]["avg"] / 1e3
    assert f["arrived"] == 300 and f["completed"] + f["dropped"] == 300 and f["dropped"] > 0
    # every frame ran, or waited; the work done is what 0.3 s of service takes, plus the queue
    assert f["completed"] <= math.ceil(0.3 / service_s) + 4 + 1
    # after duration_s only the running frame and the 4 queued ones remain (each service at most twice the mean)
    assert rec["run"]["simulated_s"] <= 0.3 + (4 + 1) * 2 * service_s
    assert rec["latency_ms"]["max"] / 1e3 <= (4 + 2) * 2 * service_s
    assert rec["app"]["queue_size"] == 4


def test_at_scaled_down_limits_the_trace_and_the_monitor_hold_a_counted_amount(tmp_path, monkeypatch):
    """The real limits (1,000,000 frames, 10,000 traced) take about an hour of host time at tiny_cnn's
    rate here; the same bounds, scaled down, are counted on a short run: the intervals kept are those of
    the frames within trace_s, the monitor's samples one a tick."""
    monkeypatch.setattr(limits, "MAX_TRACE_FRAMES", 30)
    items = [{"name": "a", "model": TINY, "rate_hz": 100}, {"name": "b", "model": TINY, "rate_hz": 50}]
    refused(write(tmp_path, doc(items, 2, "trace_s: 0.5")), "trace_s")       # 75 frames' trace > 30
    (sc,) = load_scenario(write(tmp_path, doc(items, 2, "trace_s: 0.2"), "ok.yaml"))   # 20 + 10 frames: at the limit
    records, soc = run_apps(sc)
    kept = {(iv.stream, iv.inference) for iv in soc.trace.intervals if iv.inference >= 0}
    assert len(kept) <= limits.MAX_TRACE_FRAMES == 30
    assert sum(r["frames"]["completed"] for r in records) == 300          # while every frame ran
    monitor = soc.monitor
    ticks = math.ceil(records[0]["run"]["simulated_s"] / monitor.tick_s - 1e-9)
    assert len(monitor.samples) <= ticks + 1 and ticks <= limits.MAX_MONITOR_TICKS


def test_frames_that_outlast_duration_s_by_the_monitors_limit_are_refused(tmp_path, monkeypatch, capsys):
    """A profile whose figures make a frame take ages (here 2 s of dispatch per op, a frame 14 s; with
    a bandwidth_gbs of 1.0e-290 a frame took 1e281 s, and `dtb run` ticked the monitor for ever) gets
    as many ticks after duration_s as duration_s may have, then the run stops naming the apps still running."""
    monkeypatch.setattr(limits, "MAX_MONITOR_TICKS", 50)     # 5 s at the Pixel 4's 100 ms tick
    text = (PROFILE_DIR / "pixel4.yaml").read_text(encoding="utf-8")
    text, n = re.subn(r"(?m)^(    dispatch_us:) *5\.988\b", r"\g<1> 2.0e+6", text)   # the big cores'
    assert n == 1
    slow = tmp_path / "slow_cpu.yaml"
    slow.write_text(text)
    path = write(tmp_path, doc([{"name": "cam", "model": TINY, "rate_hz": 1}], 1, device=str(slow)))
    (sc,) = load_scenario(path)
    with pytest.raises(ScenarioError, match=rf"^{re.escape(str(path))}: app cam: a frame still runs 5 s of simulated "
                                            r"time after duration_s \(50 monitor ticks, the limit\)"):
        run_apps(sc)
    assert main(["run", str(path), "-o", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "app cam: a frame still runs" in err and not (tmp_path / "out").exists()


def test_the_limits_are_stated_in_the_scenarios_readme():
    text = (Path(__file__).parent.parent / "scenarios" / "README.md").read_text(encoding="utf-8")
    for figure in ("queue_size", f"{limits.MAX_QUEUE:,}", f"{limits.MAX_TRACE_FRAMES:,}",
                   f"{limits.MAX_MONITOR_TICKS:,}", f"{int(MAX_DURATION_S)}", f"{int(MAX_RATE_HZ)}"):
        assert figure in text, figure
    assert apps_module.DEFAULT_QUEUE == DEFAULT_QUEUE
