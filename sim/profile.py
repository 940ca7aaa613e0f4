"""Phone profiles: read a YAML file written in human units, validate every key, build a spec.Profile."""

from __future__ import annotations

import dataclasses
import enum
import functools
import os
from pathlib import Path
from typing import Any, Mapping

from runtime.ir.errors import ProfileError
from runtime.ir.files import FileTooLarge, read_bytes
from runtime.ir.optypes import OpType
from runtime.ir.yamlcheck import MAX_BYTES, MAX_CHARS, Key, parse
from sim.band import parse_error_band
from sim.cost import OpClass, Precision
from sim.htp import FIRST_HTP
from sim.htp import Htp
from sim.mechanisms import Mechanisms
from sim.profile_derive import base_names, base_path, derive
from sim.profile_parse import (GIGA, MICRO, MILLI, PICO, F, choice, ProfileCtx, duration, fields, flag,
                               parse_fraction, parse_integer, parse_mapping, parse_names, nonneg, parse_positive,
                               parse_scale, show_value, parse_table, parse_text)
from sim.spec import CopySpec, DramSpec, NnapiDeviceSpec, Profile, UnitKind, UnitSpec
from sim.thermal_profile import check_units, parse_thermal

__all__ = ["load_profile", "list_profiles", "with_api_level", "profile_from_dict", "profile_files", "read_profile_text",
           "DriverPreference", "Platform", "EXTRAS", "PROFILE_DIR"]

PROFILE_DIR = Path(__file__).parent / "profiles"


class Platform(enum.Enum):
    ANDROID = "android"
    IOS = "ios"


class DriverPreference(enum.Enum):
    """NNAPI execution preferences a driver may trade speed for power under."""

    LOW_POWER = "low_power"
    FAST_SINGLE_ANSWER = "fast_single_answer"
    SUSTAINED_SPEED = "sustained_speed"


# The `extras` a unit kind may carry, and what each means to the device model that reads it.
EXTRAS: Mapping[UnitKind, Mapping[str, str]] = {
    UnitKind.CPU: {}, UnitKind.ANE: {},
    UnitKind.GPU: {
        "opengl_rate_scale": "rate multiplier on the OpenGL backend (OpenCL is the reference)",
        "opengl_dispatch_scale": "per-op dispatch multiplier on the OpenGL backend",
        "fp16_bytes_scale": "bytes a float16 tensor moves relative to the float32 tensor",
        "sustained_rate_scale": "rate multiplier under the SUSTAINED_SPEED inference preference",
    },
    UnitKind.DSP: {
        "hvx_contexts": "HVX vector contexts the DSP runs in parallel",
        "powersave_rate_scale": "rate multiplier at the delegate's highest powersave level",
        "powersave_power_scale": "active-power multiplier at the highest powersave level",
        "htp_arch": "Hexagon Tensor Processor (HTP) version, 68 for v68 and later (73, 75, 79, ...); absent: a DSP "
                    "without one, which Qualcomm's QNN delegate cannot use (its HTP backend needs v68+)",
    },
    UnitKind.NPU: {"sram_mb": "on-chip memory; weights beyond it stream from DRAM on every inference"},
}


def _pair(ctx: ProfileCtx, value: Any, path: Key) -> tuple[float, float]:
    if not isinstance(value, list) or len(value) != 2:
        raise ctx.fail(path, f"must be a [rate scale, power scale] pair, got {show_value(value)}")
    return tuple(parse_scale()(ctx, v, path + (i,)) for i, v in enumerate(value))


def _preferences(ctx: ProfileCtx, value: Any, path: Key) -> dict[str, tuple[float, float]]:
    table = parse_table(DriverPreference, "execution preference", _pair)(ctx, value, path)
    return {pref.value: pair for pref, pair in table.items()}   # the spec keys them by name


def _extras(ctx: ProfileCtx, value: Any, path: Key) -> dict[str, float]:
    """Positive numbers; a *_scale one multiplies the unit's rate, power or dispatch."""
    return {k: (parse_scale() if k.endswith("_scale") else parse_positive())(ctx, v, path + (k,))
            for k, v in parse_mapping(ctx, value, path).items()}


# Counts the simulator builds or pads by: a unit's cores beyond the most threads a run asks for
# (runtime.limits.counts.MAX_THREADS) are never used, each copy engine is an object of the simulation, and a
# tile, alignment or vector of more than MAX_WIDTH elements or bytes is no phone's (an integer of 400 digits
# made an OverflowError, copy engines of 10**8 filled the memory).
MAX_CORES = MAX_ENGINES = 64
MAX_WIDTH = 1024

_DRAM = {"bandwidth_gbs": F("bandwidth", True, parse_positive(times=GIGA)),
         "pj_per_byte": F("energy_per_byte", True, nonneg(per=PICO)),
         "idle_w": F("idle_w", False, nonneg())}
_COPY = {"bandwidth_gbs": F("bandwidth", True, parse_positive(times=GIGA)),
         "sync_us": F("sync_s", True, duration(MICRO)),
         "engines": F("engines", False, parse_integer(1, MAX_ENGINES))}
_UNIT = {"kind": F("kind", True, choice(UnitKind, "unit kind")),
         "cores": F("cores", False, parse_integer(1, MAX_CORES)),
         "gmacs": F("macs_per_s", True, parse_table(Precision, "precision", parse_positive(times=GIGA))),
         "gelems": F("elem_per_s", True, parse_table(Precision, "precision", parse_positive(times=GIGA))),
         "bandwidth_gbs": F("bandwidth", True, parse_positive(times=GIGA)),
         "dispatch_us": F("dispatch_s", True, duration(MICRO)),
         "active_w": F("active_w", True, lambda ctx, v, p: v),   # checked once the precisions are known
         "idle_w": F("idle_w", True, nonneg()),
         "efficiency": F("efficiency", False, parse_table(OpClass, "op class", parse_fraction)),
         "init_ms": F("init_s", False, duration(MILLI)),
         "cached_init_ms": F("cached_init_s", False, duration(MILLI)),
         "invoke_us": F("invoke_s", False, duration(MICRO)),
         "channel_align": F("channel_align", False, parse_integer(1, MAX_WIDTH)),
         "convert_gbs": F("convert_per_s", False, parse_positive(times=GIGA)),
         "extras": F("extras", False, _extras),
         "mechanisms": F("mech", False, lambda ctx, v, p: _mechanisms(ctx, v, p))}
def _tile(ctx: ProfileCtx, value: Any, path: Key) -> tuple[int, int]:
    if not isinstance(value, list) or len(value) != 2:
        raise ctx.fail(path, f"must be a [rows, columns] pair, got {show_value(value)}")
    return tuple(parse_integer(1, MAX_WIDTH)(ctx, v, path + (i,)) for i, v in enumerate(value))


KIBI = 1024
_MECH = {"join_us": F("join_s", False, duration(MICRO)),
         "gemm_tile": F("gemm_tile", False, _tile),
         "gemm_depth_overhead": F("gemm_depth_overhead", False, nonneg()),
         "vector_bytes": F("vector_bytes", False, parse_integer(1, MAX_WIDTH)),
         "cache_kb": F("cache_bytes", False, nonneg(times=KIBI)),
         "cache_gbs": F("cache_bandwidth", False, parse_positive(times=GIGA)),
         "occupancy_items": F("occupancy_items", False, nonneg()),
         "im2col": F("im2col", False, flag),
         "im2col_row_ns": F("im2col_row_s", False, duration(1e9)),
         "winograd_min_slices": F("winograd_min_slices", False, parse_integer(0)),
         "winograd_min_tiles": F("winograd_min_tiles", False, parse_integer(0))}


MEBI = 1 << 20
# The Hexagon NPU's mechanisms (sim/htp.py), allowed only on a dsp unit with an HTP (htp_arch >= 68).
_HTP = {"hmx_depth": F("depth_tile", False, parse_integer(1, MAX_WIDTH)),
        "crouton_int8": F("block_int8", False, _tile),
        "crouton_fp16": F("block_fp16", False, _tile),
        "vtcm_mb": F("vtcm_bytes", False, nonneg(times=MEBI)),
        "vtcm_gbs": F("vtcm_bandwidth", False, parse_positive(times=GIGA)),
        "float_edge_gbs": F("float_edge_bandwidth", False, parse_positive(times=GIGA))}


def _mechanisms(ctx: ProfileCtx, value: Any, path: Key) -> Mechanisms:
    """A unit's `mechanisms:` section switches the non-roofline cost mechanisms on; any HTP key
    (sim/htp.py) gives the unit the Hexagon NPU's mechanisms."""
    table = parse_mapping(ctx, value, path)
    general = fields(ctx, {k: v for k, v in table.items() if k not in _HTP}, path, {**_MECH, **_HTP})
    htp_keys = {k: v for k, v in table.items() if k in _HTP}
    htp = Htp(**fields(ctx, htp_keys, path, _HTP)) if htp_keys else None
    return Mechanisms(enabled=True, htp=htp, **general)


def _check_htp(ctx: ProfileCtx, f: Mapping[str, Any], path: Key) -> None:
    """HTP mechanisms describe a Hexagon NPU: a dsp unit whose htp_arch is 68 or later."""
    mech = f.get("mech")
    if mech is None or mech.htp is None:
        return
    if f["kind"] is not UnitKind.DSP or f.get("extras", {}).get("htp_arch", 0) < FIRST_HTP:
        keys = ", ".join(_HTP)
        raise ctx.fail(path + ("mechanisms",), f"the HTP mechanisms ({keys}) need a dsp unit with extras.htp_arch "
                                                 f">= {FIRST_HTP} (a Hexagon NPU)")


_DEVICE = {"name": F("name", True, parse_text),
           "unit": F("unit", True, parse_text),
           "feature_level": F("feature_level", True, parse_integer(27)),
           "ops": F("ops", True, parse_names(OpType, "op type", by_name=True)),
           "precisions": F("precisions", True, parse_names(Precision, "precision")),
           "compile_ms": F("compile_s", False, duration(MILLI)),
           "cached_compile_ms": F("cached_compile_s", False, duration(MILLI)),
           "execution_us": F("execution_s", False, duration(MICRO)),
           "rate_scale": F("rate_scale", False, parse_scale()),
           "preference": F("preference", False, lambda ctx, v, p: _preferences(ctx, v, p))}
_NNAPI = {"devices": F("devices", True, lambda ctx, v, p: _devices(ctx, v, p))}
_TOP = {"name": F("name", True, parse_text),
        "description": F("description", True, parse_text),
        "os": F("os", True, choice(Platform, "os")),
        "os_version": F("os_version", False, parse_text),
        "calibration": F("calibration", False, lambda ctx, v, p: _calibration(ctx, v, p)),
        "api_level": F("api_level", True, parse_integer(0)),
        "has_neural_engine": F("has_neural_engine", False, flag),
        "dram": F("dram", True, lambda ctx, v, p: DramSpec(**fields(ctx, v, p, _DRAM))),
        "copy": F("copy", True, lambda ctx, v, p: CopySpec(**fields(ctx, v, p, _COPY))),
        "units": F("units", True, lambda ctx, v, p: _units(ctx, v, p)),
        "nnapi": F("nnapi_devices", False, lambda ctx, v, p: fields(ctx, v, p, _NNAPI)["devices"]),
        "thermal": F("thermal", False, lambda ctx, v, p: _thermal(ctx, v, p)),
        "error_band": F("error_band", False, lambda ctx, v, p: parse_error_band(ctx, v, p))}


def _thermal(ctx: ProfileCtx, value: Any, path: Key):
    """The optional `thermal:` section (sim/thermal_profile.py; only long app runs read it)."""
    return parse_thermal(ctx, value, path)


def _calibration(ctx: ProfileCtx, value: Any, path: Key) -> tuple[tuple[str, str], ...]:
    """Where a calibrated profile came from: its prior profile and the measurements it was fitted to."""
    table = parse_mapping(ctx, value, path)
    for key in ("prior", "measurements"):
        if key not in table:
            raise ctx.fail(path + (key,), "required key is missing")
    return tuple((k, parse_text(ctx, v, path + (k,)) if k != "rows" else str(parse_integer(1)(ctx, v, path + (k,))))
                 for k, v in table.items())



def _units(ctx: ProfileCtx, value: Any, path: Key) -> tuple[UnitSpec, ...]:
    units = tuple(_unit(ctx, name, raw, path + (name,)) for name, raw in parse_mapping(ctx, value, path).items())
    if not any(u.kind is UnitKind.CPU for u in units):
        raise ctx.fail(path, "no unit of kind cpu; every profile needs one to run what no delegate takes")
    return units


def _unit(ctx: ProfileCtx, name: str, raw: Any, path: Key) -> UnitSpec:
    return ctx.remembered(raw, path, lambda: _parse_unit(ctx, name, raw, path))


def _parse_unit(ctx: ProfileCtx, name: str, raw: Any, path: Key) -> UnitSpec:
    f = fields(ctx, raw, path, _UNIT)
    runs = set(f["macs_per_s"])
    if set(f["elem_per_s"]) != runs:
        odd = sorted(p.value for p in runs ^ set(f["elem_per_s"]))
        raise ctx.fail(path + ("gelems",),
                       f"must name the same precisions as gmacs (differs in {', '.join(odd)})")
    f["active_w"] = _unit_power(ctx, f["active_w"], runs, path + ("active_w",))
    if f.get("cached_init_s", 0.0) > f.get("init_s", 0.0):
        raise ctx.fail(path + ("cached_init_ms",), "must not exceed init_ms")
    _check_htp(ctx, f, path)
    allowed = EXTRAS[f["kind"]]
    for key in f.get("extras", {}):
        if key not in allowed:
            known = ", ".join(allowed) or "none"
            raise ctx.fail(path + ("extras", key),
                           f"unknown extra for a {f['kind'].value} unit; known: {known}")
    return UnitSpec(name=name, **f)


def _unit_power(ctx: ProfileCtx, raw: Any, runs: set[Precision], path: Key) -> dict[Precision, float]:
    """One power for every precision the unit runs, or a mapping with exactly those precisions."""
    if not isinstance(raw, dict):
        return dict.fromkeys(runs, nonneg()(ctx, raw, path))
    watts = parse_table(Precision, "precision", nonneg())(ctx, raw, path)
    for p in sorted(set(watts) ^ runs, key=lambda p: p.value):
        raise ctx.fail(path + (p.value,), "the unit runs no such precision (gmacs has no rate for it)"
                       if p in watts else "required key is missing: the unit runs this precision")
    return watts


def _devices(ctx: ProfileCtx, raw: Any, path: Key) -> tuple[NnapiDeviceSpec, ...]:
    if not isinstance(raw, list):
        raise ctx.fail(path, f"must be a list of devices, got {show_value(raw)}")
    devices = tuple(_device(ctx, item, path + (i,)) for i, item in enumerate(raw))
    for i, d in enumerate(devices):
        if any(e.name == d.name for e in devices[:i]):
            raise ctx.fail(path + (i, "name"), f"device {show_value(d.name)} listed twice")
    return devices


def _device(ctx: ProfileCtx, raw: Any, path: Key) -> NnapiDeviceSpec:
    return ctx.remembered(raw, path, lambda: _parse_device(ctx, raw, path))


def _parse_device(ctx: ProfileCtx, raw: Any, path: Key) -> NnapiDeviceSpec:
    f = fields(ctx, raw, path, _DEVICE)
    if f.get("cached_compile_s", 0.0) > f.get("compile_s", 0.0):
        raise ctx.fail(path + ("cached_compile_ms",), "must not exceed compile_ms")
    return NnapiDeviceSpec(**f)


def _cross_check(ctx: ProfileCtx, f: Mapping[str, Any]) -> None:
    """What no single key can show: devices on units that exist, precisions those units run."""
    units = {u.name: u for u in f["units"]}
    for i, d in enumerate(f.get("nnapi_devices", ())):
        path = ("nnapi", "devices", i)
        if d.unit not in units:
            raise ctx.fail(path + ("unit",), f"names unit {show_value(d.unit)}, which the profile does not define "
                                             f"(units: {', '.join(units)})")
        runs = units[d.unit].macs_per_s
        for p in sorted(d.precisions, key=lambda p: p.value):
            if p not in runs:
                raise ctx.fail(path + ("precisions",),
                               f"{p.value}: unit {show_value(d.unit)} has no {p.value} rate")
    if f.get("nnapi_devices") and f["os"] is not Platform.ANDROID:
        raise ctx.fail(("nnapi",), "NNAPI devices need os: android")
    if f.get("has_neural_engine") and not any(u.kind is UnitKind.ANE for u in f["units"]):
        raise ctx.fail(("has_neural_engine",), "is true but no unit has kind ane")


def profile_from_dict(data: Any, source: str = "<profile>",
                      lines: Mapping[Key, int] | None = None, memo: dict | None = None) -> Profile:
    """Validate plain data (as parsed from YAML, human units) and build the Profile it describes.

    `lines` maps key paths to line numbers so errors can name them; without it they name the key
    only. `memo` (sim.profile_parse.ProfileCtx.memo): sections parsed before, kept by the caller,
    who never changes a mapping once it was parsed."""
    ctx = ProfileCtx(source, lines or {}, memo)
    f = fields(ctx, data, (), _TOP)
    _cross_check(ctx, f)
    if f.get("thermal") is not None:
        check_units(ctx, f["thermal"], {u.name for u in f["units"]})
    f["os"] = f["os"].value
    return Profile(**f)


def with_api_level(profile: Profile, api_level: int | None) -> Profile:
    """The profile on another Android release: NNAPI's feature level (and so what each driver is
    asked to run) follows the API level; each driver keeps its own level, the lower one applies."""
    if api_level is None:
        return profile
    if profile.os != Platform.ANDROID.value:
        raise ProfileError(f"{profile.name}: an API level applies to Android phones only ({profile.name} "
                           f"runs {profile.os})")
    if isinstance(api_level, bool) or not isinstance(api_level, int) or not 21 <= api_level <= 40:
        raise ProfileError(f"{profile.name}: API level must be an integer in 21..40, got {api_level!r}")
    return dataclasses.replace(profile, api_level=api_level, os_version=f"Android API {api_level}")


def list_profiles() -> list[str]:
    """Names of the profiles shipped with the package, for load_profile(name)."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def load_profile(name_or_path: str | os.PathLike) -> Profile:
    """A shipped profile by bare name ("pixel4"), or any profile YAML file by path."""
    path = resolve(name_or_path)
    source = str(path)
    try:
        text = read_profile_text(path)   # a FIFO or a device is refused, not read forever
    except FileNotFoundError:
        raise ProfileError(f"{source}: no such profile file") from None
    except OSError as exc:
        raise ProfileError(f"{source}: cannot read the profile: {exc}") from None
    data, lines = parse(text, source, ProfileError)
    if isinstance(data, dict) and "derive" in data:   # another phone's profile and published differences
        data, lines = derive(ProfileCtx(source, lines), data, PROFILE_DIR, _base_data)
    return profile_from_dict(data, source, lines)


def read_profile_text(path: Path) -> str:
    """A profile file's text (universal newlines), from a regular file of at most MAX_BYTES bytes of
    UTF-8; OSError as opening it raises (NotRegularFile for a FIFO, a device or a folder)."""
    try:
        data = read_bytes(path, limit=MAX_BYTES)
    except FileTooLarge:
        raise ProfileError(f"{path}:1: the file is over {MAX_BYTES:,} bytes; the limit is {MAX_CHARS:,} characters") \
            from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ProfileError(f"{path}:{line}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _base_data(path: Path) -> Any:
    """A derived profile's base as plain data, checked first so its errors name its own file and line;
    one that derives in turn is returned unchecked, for `derive` to refuse (no chains, no cycles)."""
    data = parse(read_profile_text(path), str(path), ProfileError)[0]
    if not (isinstance(data, dict) and "derive" in data):
        load_profile(path)
    return data


def profile_files(path: Path) -> tuple[Path, ...]:
    """The files a profile's figures are read from: the file and, for a derived profile, its base; what
    a cache of its results must compare, so a refitted base is not taken for the same phone."""
    try:
        st = os.stat(path)
    except OSError:
        return (Path(path),)
    name = _base_name(str(path), st.st_mtime_ns, st.st_size)
    return (Path(path),) if name is None else (Path(path), base_path(PROFILE_DIR, name))


@functools.lru_cache(maxsize=256)
def _base_name(path: str, mtime_ns: int, size: int) -> str | None:
    """The shipped profile a version of a file derives from; None for a plain or unreadable one."""
    try:
        data = parse(read_profile_text(Path(path)), path, ProfileError)[0]
    except (OSError, ProfileError):   # loading it says what is wrong
        return None
    spec = data.get("derive") if isinstance(data, dict) else None
    name = spec.get("base") if isinstance(spec, dict) else None
    return name if isinstance(name, str) and name in base_names(PROFILE_DIR) else None


def resolve(name_or_path: str | os.PathLike) -> Path:
    text = os.fspath(name_or_path)
    bare = isinstance(name_or_path, str) and "/" not in text and os.sep not in text \
        and not text.endswith((".yaml", ".yml"))
    if not bare:
        return Path(text)
    path = PROFILE_DIR / f"{text}.yaml"
    if not path.is_file():
        raise ProfileError(f"unknown profile {show_value(text)}; shipped profiles: {', '.join(list_profiles())} "
                           "(or give a path to a .yaml file)")
    return path
