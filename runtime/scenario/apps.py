"""Scenarios of concurrent apps: several models on their units at their frame rates, for a span of simulated time.

A document with an `apps:` list is one of these (runtime/scenario/load.py hands it here, cell by cell):

    device, api_level, name, description, matrix     as in any scenario
    apps            list of apps, each {name, model, delegates, rate_hz, when_busy: drop | queue, queue_size,
                    cpu: {threads}}
    duration_s      simulated seconds frames arrive for (required)
    thermal         true | false | {ambient_c, platform_w}: the profile's thermal model (on by default when
                    the profile has one); platform_w is heat outside the modelled units (display, camera)
    trace_s         seconds of op-level trace kept for trace.json (default 2, or less when the apps' frames in
                    it would pass limits.MAX_TRACE_FRAMES; the counters cover the whole run)
    timing_only     default true: a sustained workload needs the costs, not the math

A frame that arrives while the app's previous one still runs is dropped (`drop`, what camera pipelines
do) or waits its turn (`queue`, behind at most queue_size others; a frame finding the queue full is
dropped). Errors read FILE:LINE: key.path, as every scenario error does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.limits import counts as limits
from runtime.ir.yamlcheck import Ctx, Key, flag, freeze, integer, kind, mapping, member, number, text
from runtime.scenario.spec import (CpuSpec, DelegateSpec, ModelSpec, RunSpec, check_cpu, check_delegates, check_device, cell_label,
                                   check_model)

__all__ = ["AppSpec", "ThermalRun", "AppsScenario", "apps_scenario", "APPS_KEYS", "WHEN_BUSY", "MAX_DURATION_S", "DEFAULT_QUEUE"]

APPS_KEYS = ("apps", "duration_s", "thermal", "trace_s")   # keys that make a document an apps scenario
WHEN_BUSY = ("drop", "queue")
MAX_DURATION_S = 3600.0          # an hour of simulated time; the frames are bounded by limits.MAX_INFERENCES too
MAX_RATE_HZ = 1000.0
DEFAULT_QUEUE = 64               # frames waiting behind the running one with when_busy: queue
_APP = ("name", "model", "delegates", "rate_hz", "when_busy", "queue_size", "cpu")
_NOT_WITH_APPS = ("model", "delegates", "cpu", "inputs", "runs", "streams")


@dataclass(frozen=True)
class AppSpec:
    """One app: a model with its delegates, fed `rate_hz` frames a second."""

    name: str
    model: ModelSpec
    rate_hz: float
    delegates: tuple[DelegateSpec, ...] = ()
    when_busy: str = "drop"
    cpu: CpuSpec = CpuSpec()
    queue_size: int = DEFAULT_QUEUE

    @property
    def waiting(self) -> int:
        """How many frames may wait behind the running one: none when frames are dropped."""
        return self.queue_size if self.when_busy == "queue" else 0

    def frames(self, duration_s: float) -> int:
        """Frames arriving in [0, duration): at 0, 1/rate, 2/rate, ..."""
        return max(1, math.ceil(duration_s * self.rate_hz - 1e-9))


@dataclass(frozen=True)
class ThermalRun:
    """What the scenario asks of the thermal model: None = on when the profile has one."""

    enabled: bool | None = None
    ambient_c: float | None = None        # None: the profile's
    platform_w: float = 0.0
    where: str = field(default="", compare=False)   # "FILE:LINE: thermal" for errors found when the cell is checked


@dataclass(frozen=True)
class AppsScenario:
    """One matrix cell of an apps scenario, fully checked; paths are absolute."""

    name: str
    source: Path
    device: str
    apps: tuple[AppSpec, ...]
    duration_s: float
    description: str = ""
    device_file: Path | None = None
    api_level: int | None = None
    thermal: ThermalRun = ThermalRun()
    trace_s: float = 2.0
    timing_only: bool = True
    cell: tuple[tuple[str, Any], ...] = ()
    label: str = ""
    duration_where: str = field(default="", compare=False)   # "FILE:LINE: duration_s", for the monitor's tick check

    # What the file-wide bound (runtime/scenario/load.py, limits.MAX_INFERENCES) and the sweep's host-time
    # estimate multiply (streams x (warmup + count)): every frame of every app, as one stream's runs.
    @property
    def streams(self) -> int:
        return 1

    @property
    def runs(self) -> RunSpec:
        return RunSpec(0, sum(a.frames(self.duration_s) for a in self.apps))


def apps_scenario(ctx: Ctx, doc: dict[str, Any], source: Path, cell: tuple[tuple[str, Any], ...], load) -> AppsScenario:
    """A cell's document with `apps:` as an AppsScenario (runtime/scenario/load.py's `_scenario` hands it over)."""
    for key in ("device", "apps", "duration_s"):
        if key not in doc:
            raise ctx.fail((key,), "required key missing")
    for key in _NOT_WITH_APPS:
        if key in doc:
            raise ctx.fail((key,), f"not used with apps: each app names its own {key}" if key in _APP else
                                   "not used with apps: frames arrive at each app's rate_hz for duration_s")
    device, device_file = check_device(ctx, doc["device"], ("device",), load.profiles)
    duration = number(ctx, doc["duration_s"], ("duration_s",), 0.001, MAX_DURATION_S)
    apps = _apps(ctx, doc["apps"], ("apps",), load)
    frames = sum(a.frames(duration) for a in apps)
    if frames > limits.MAX_INFERENCES:
        raise ctx.fail(("duration_s",), f"the apps ask for {frames:,} frames in {duration:g} s; the limit is "
                                        f"{limits.MAX_INFERENCES:,}")
    name = text(ctx, doc.get("name", source.stem), ("name",))
    return AppsScenario(
        name=name, source=source.resolve(), device=device, device_file=device_file, apps=apps, duration_s=duration,
        description=text(ctx, doc["description"], ("description",)) if "description" in doc else "",
        api_level=integer(ctx, doc["api_level"], ("api_level",), least=21, most=40) if "api_level" in doc else None,
        thermal=_thermal(ctx, doc.get("thermal"), ("thermal",)),
        trace_s=_trace_s(ctx, doc, apps, duration),
        timing_only=flag(ctx, doc.get("timing_only", True), ("timing_only",)),
        cell=tuple((k, freeze(v)) for k, v in cell), label=cell_label(cell) if cell else name,
        duration_where=ctx.where(("duration_s",)))


def _trace_frames(apps: tuple[AppSpec, ...], seconds: float) -> int:
    return sum(a.frames(seconds) for a in apps) if seconds > 0 else 0


def _trace_s(ctx: Ctx, doc: dict[str, Any], apps: tuple[AppSpec, ...], duration: float) -> float:
    """Every interval of a frame arriving within trace_s is kept until the run ends (sim/monitor.py), so
    the frames in it are bounded as a benchmark's runs are."""
    if "trace_s" not in doc:
        fits = (limits.MAX_TRACE_FRAMES - len(apps)) / sum(a.rate_hz for a in apps)   # each app's ceil: one more
        return min(2.0, duration, fits)
    seconds = number(ctx, doc["trace_s"], ("trace_s",), 0.0, duration)
    frames = _trace_frames(apps, seconds)
    if frames > limits.MAX_TRACE_FRAMES:
        raise ctx.fail(("trace_s",), f"keeps the trace of {frames:,} frames; the limit is "
                                     f"{limits.MAX_TRACE_FRAMES:,} (at most "
                                     f"{limits.MAX_TRACE_FRAMES / sum(a.rate_hz for a in apps):g} s at these rates)")
    return seconds


def _apps(ctx: Ctx, value: Any, path: Key, load) -> tuple[AppSpec, ...]:
    if not isinstance(value, list) or not value:
        raise ctx.fail(path, f"expected a non-empty list of apps, got {kind(value)}")
    if len(value) > limits.MAX_STREAMS:
        raise ctx.fail(path, f"must list at most {limits.MAX_STREAMS} apps (streams sharing one phone), got {len(value)}")
    apps = tuple(_app(ctx, item, path + (i,), load) for i, item in enumerate(value))
    for i, app in enumerate(apps):
        if any(other.name == app.name for other in apps[:i]):
            raise ctx.fail(path + (i, "name"), f"app name '{app.name}' is used twice")
    return apps


def _app(ctx: Ctx, value: Any, path: Key, load) -> AppSpec:
    m = mapping(ctx, value, path, _APP)
    for key in ("name", "model", "rate_hz"):
        if key not in m:
            raise ctx.fail(path + (key,), "required key missing")
    when_busy = member(ctx, m.get("when_busy", "drop"), path + ("when_busy",), WHEN_BUSY)
    if "queue_size" in m and when_busy != "queue":
        raise ctx.fail(path + ("queue_size",), "only with when_busy: queue (a dropping app keeps no queue)")
    return AppSpec(name=text(ctx, m["name"], path + ("name",)), model=check_model(ctx, m["model"], path + ("model",)),
                   rate_hz=_rate(ctx, m["rate_hz"], path + ("rate_hz",)),
                   delegates=check_delegates(ctx, m.get("delegates"), path + ("delegates",), load),
                   when_busy=when_busy, cpu=check_cpu(ctx, m.get("cpu", {}), path + ("cpu",)),
                   queue_size=integer(ctx, m.get("queue_size", DEFAULT_QUEUE), path + ("queue_size",), least=1,
                                      most=limits.MAX_QUEUE, why=" (frames waiting behind the running one)"))


def _rate(ctx: Ctx, value: Any, path: Key) -> float:
    rate = number(ctx, value, path, None, MAX_RATE_HZ)
    if rate <= 0:
        raise ctx.fail(path, f"must be above 0 (frames per second), got {value:g}")
    return rate


def _thermal(ctx: Ctx, value: Any, path: Key) -> ThermalRun:
    if value is None:
        return ThermalRun(where=ctx.where(path))
    if isinstance(value, bool):
        return ThermalRun(enabled=value, where=ctx.where(path))
    m = mapping(ctx, value, path, ("ambient_c", "platform_w"))
    ambient = number(ctx, m["ambient_c"], path + ("ambient_c",), -20.0, 60.0) if "ambient_c" in m else None
    platform = number(ctx, m.get("platform_w", 0.0), path + ("platform_w",), 0.0, 20.0)
    return ThermalRun(True, ambient, platform, where=ctx.where(path))
