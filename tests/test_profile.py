"""Phone profiles: shipped files load, human units convert, bad files fail naming file, line and key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from runtime.ir.errors import ProfileError
from sim.cost import OpClass, Precision
from sim.profile import EXTRAS, PROFILE_DIR, list_profiles, load_profile, profile_from_dict, with_api_level
from sim.spec import Profile, UnitKind

SHIPPED = ["generic", "iphone_xs", "pixel3", "pixel4"]

# A small valid profile; each error case below breaks one line of it.
BASE = """\
name: tiny
description: a test phone
os: android
api_level: 29
dram:
  bandwidth_gbs: 10
  pj_per_byte: 20
  idle_w: 0.05
copy:
  bandwidth_gbs: 4
  sync_us: 50
units:
  cpu:
    kind: cpu
    cores: 2
    gmacs: {float32: 1, int8: 4}
    gelems: {float32: 1, int8: 4}
    bandwidth_gbs: 3
    dispatch_us: 2
    active_w: 0.5
    idle_w: 0.01
    efficiency: {conv: 0.5, depthwise: 0.25}
  gpu:
    kind: gpu
    gmacs: {float32: 100, float16: 200}
    gelems: {float32: 100, float16: 200}
    bandwidth_gbs: 12
    dispatch_us: 20
    active_w: {float32: 2.0, float16: 1.5}
    idle_w: 0.05
    init_ms: 400
    cached_init_ms: 40
    invoke_us: 7
    channel_align: 4
    convert_gbs: 4
    extras: {opengl_rate_scale: 0.5}
nnapi:
  devices:
    - name: vendor-gpu
      unit: gpu
      feature_level: 29
      ops: [CONV_2D, ADD]
      precisions: [float32]
      compile_ms: 300
      cached_compile_ms: 30
      execution_us: 250
      preference: {low_power: [0.6, 0.5]}
"""


def write(tmp_path: Path, text: str, name: str = "phone.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def line_of(text: str, fragment: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if fragment in line)


def load_error(path: Path) -> str:
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    return str(info.value)


# ---- the shipped profiles

@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_profile_loads_by_name(name):
    profile = load_profile(name)
    assert isinstance(profile, Profile) and profile.name == name
    assert profile.units_of(UnitKind.CPU)
    for device in profile.nnapi_devices:
        assert device.precisions <= set(profile.unit(device.unit).macs_per_s)


def test_list_profiles_lists_the_shipped_four():
    assert set(SHIPPED) <= set(list_profiles())


def test_load_by_path_equals_load_by_name():
    assert load_profile(PROFILE_DIR / "pixel3.yaml") == load_profile("pixel3")
    assert load_profile(str(PROFILE_DIR / "pixel3.yaml")) == load_profile("pixel3")


def test_android_profiles_expose_their_nnapi_devices():
    pixel3, pixel4 = load_profile("pixel3"), load_profile("pixel4")
    # TFLite's published Pixel 3 figures were measured on Android 10: the profile stands for that OS
    assert pixel3.api_level == 29 and pixel3.os_version == "Android 10" and pixel4.api_level == 29
    assert with_api_level(pixel3, 28).api_level == 28
    with pytest.raises(ProfileError, match="Android phones only"):
        with_api_level(load_profile("iphone_xs"), 28)
    assert [d.name for d in pixel3.nnapi_devices] == ["qti-dsp", "qti-gpu", "nnapi-reference"]
    units = {d.name: d.unit for d in pixel4.nnapi_devices}
    assert list(units) == ["google-edgetpu", "qti-dsp", "qti-gpu", "nnapi-reference"]
    assert units == {"google-edgetpu": "npu", "qti-dsp": "dsp", "qti-gpu": "gpu",
                     "nnapi-reference": "cpu_big"}
    assert pixel4.unit("npu").kind is UnitKind.NPU
    assert pixel4.nnapi_devices[0].ops >= {"CONV_2D", "DEPTHWISE_CONV_2D", "SOFTMAX", "RESHAPE"}


def test_iphone_has_a_neural_engine_and_no_nnapi():
    xs = load_profile("iphone_xs")
    assert xs.os == "ios" and xs.api_level == 0 and xs.has_neural_engine and not xs.nnapi_devices
    assert set(xs.unit("ane").macs_per_s) == {Precision.FLOAT16}


@pytest.mark.parametrize("name", ["pixel3", "pixel4"])
def test_hexagon_runs_int8_only_and_gpu_slices_four_channels(name):
    profile = load_profile(name)
    assert set(profile.unit("dsp").macs_per_s) == {Precision.INT8}
    gpu = profile.unit("gpu")
    assert gpu.channel_align == 4
    assert gpu.macs_per_s[Precision.FLOAT16] == 2 * gpu.macs_per_s[Precision.FLOAT32]
    assert gpu.cached_init_s < gpu.init_s
    assert gpu.efficiency[OpClass.DEPTHWISE] < gpu.efficiency[OpClass.CONV]


@pytest.mark.parametrize("name", SHIPPED)
def test_every_number_in_a_shipped_profile_has_a_sourced_comment(name):
    path = PROFILE_DIR / f"{name}.yaml"
    lines = path.read_text(encoding="utf-8").splitlines()
    numbers = [n for n in _scalars(yaml.compose(path.read_text(encoding="utf-8")))
               if n.tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")]
    assert numbers
    for node in numbers:
        line = lines[node.start_mark.line]
        assert "#" in line, f"{path.name}:{node.start_mark.line + 1} has a number without a comment"
        comment = line.split("#", 1)[1]
        assert re.search(r"spec|3rd-party|derived|fitted|assumed", comment), f"{path.name}: {line.strip()}"


def _scalars(node):
    if isinstance(node, yaml.ScalarNode):
        yield node
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from _scalars(item)
    elif isinstance(node, yaml.MappingNode):
        for _, value in node.value:
            yield from _scalars(value)


def test_shipped_extras_are_documented():
    for name in SHIPPED:
        for unit in load_profile(name).units:
            assert set(unit.extras) <= set(EXTRAS[unit.kind])


# ---- human units

def test_human_units_convert_to_si(tmp_path):
    p = load_profile(write(tmp_path, BASE))
    cpu, gpu, dev = p.unit("cpu"), p.unit("gpu"), p.nnapi_devices[0]
    assert cpu.macs_per_s == {Precision.FLOAT32: 1e9, Precision.INT8: 4e9}
    assert cpu.dispatch_s == 2e-6 and cpu.bandwidth == 3e9 and cpu.cores == 2
    assert cpu.active_w == {Precision.FLOAT32: 0.5, Precision.INT8: 0.5}   # one figure for every precision
    assert cpu.efficiency == {OpClass.CONV: 0.5, OpClass.DEPTHWISE: 0.25}
    assert gpu.init_s == 0.4 and gpu.cached_init_s == 0.04 and gpu.invoke_s == 7e-6
    assert gpu.convert_per_s == 4e9 and gpu.channel_align == 4 and gpu.extras == {"opengl_rate_scale": 0.5}
    assert p.dram.bandwidth == 10e9 and p.dram.energy_per_byte == 20e-12 and p.dram.idle_w == 0.05
    assert p.copy.bandwidth == 4e9 and p.copy.sync_s == 50e-6 and p.copy.engines == 1
    assert dev.compile_s == 0.3 and dev.cached_compile_s == 0.03 and dev.execution_s == 250e-6
    assert dev.ops == {"CONV_2D", "ADD"} and dev.precisions == {Precision.FLOAT32}
    assert dev.preference == {"low_power": (0.6, 0.5)}


def test_profile_from_dict_names_the_key_without_a_line():
    data = yaml.safe_load(BASE)
    data["units"]["gpu"]["dispatch_us"] = -1
    with pytest.raises(ProfileError) as info:
        profile_from_dict(data, "dict-source")
    assert str(info.value) == "dict-source: units.gpu.dispatch_us: must be a number >= 0, got -1"


# ---- bad files. Each case: the text of BASE to replace, its replacement, a fragment of the line the
# error must name, the key path it must name, and a phrase of the complaint.

def bad(case_id: str, old: str, new: str, at: str, key: str, complaint: str):
    return pytest.param(old, new, at, key, complaint, id=case_id)


BAD = [
    bad("unknown top key", "api_level: 29\n", "api_level: 29\nflavour: vanilla\n", "flavour:", "flavour",
        "unknown key"),
    bad("unknown unit key", "    cores: 2\n", "    cores: 2\n    turbo: 3\n", "turbo:", "units.cpu.turbo",
        "unknown key"),
    bad("unknown device key", "      unit: gpu\n", "      unit: gpu\n      vendor: x\n", "vendor:",
        "nnapi.devices[0].vendor", "unknown key"),
    bad("unknown dram key", "  pj_per_byte: 20\n", "  pj_per_byte: 20\n  ranks: 2\n", "ranks:", "dram.ranks",
        "unknown key"),
    bad("missing required key", "    kind: cpu\n", "", "  cpu:", "units.cpu.kind", "required key is missing"),
    bad("missing top key", "os: android\n", "", "name: tiny", "os", "required key is missing"),
    bad("device on a missing unit", "      unit: gpu\n", "      unit: npu\n", "unit: npu",
        "nnapi.devices[0].unit", "does not define"),
    bad("no cpu unit", "    kind: cpu\n", "    kind: dsp\n", "units:", "units", "no unit of kind cpu"),
    bad("negative rate", "gmacs: {float32: 100, float16: 200}", "gmacs: {float32: 100, float16: -5}",
        "float16: -5", "units.gpu.gmacs.float16", "must be a positive number, got -5"),
    # 9e299 passes the bound every number has, but not once converted: 9e308 bytes/s is infinite as a
    # float, and the copy time of a partition boundary became NaN (a traceback in `dtb benchmark`)
    bad("bandwidth that overflows in bytes/s", "  bandwidth_gbs: 4\n", "  bandwidth_gbs: 9.0e+299\n",
        "bandwidth_gbs: 9.0e+299", "copy.bandwidth_gbs", "must be a positive number of at most 1e+09, got 9e+299"),
    # Figures outside [1e-9, 1e9] in the YAML's units: each loaded, and the run crashed or reported nonsense.
    bad("subnormal rate", "gmacs: {float32: 1,", "gmacs: {float32: 1.0e-320,", "float32: 1.0e-320",
        "units.cpu.gmacs.float32", "must be a positive number of at least 1e-09, got 1e-320"),   # OverflowError
    bad("vanishing efficiency", "conv: 0.5,", "conv: 1.0e-300,", "conv: 1.0e-300", "units.cpu.efficiency.conv",
        "must be a fraction in (0, 1] of at least 1e-09"),   # a rate times it was 0: ZeroDivisionError
    bad("subnormal time", "    dispatch_us: 2\n", "    dispatch_us: 1.0e-320\n", "dispatch_us: 1.0e-320",
        "units.cpu.dispatch_us", "must be a number >= 0 of at least 1e-09 (or 0)"),
    bad("power that overflows an energy", "    active_w: 0.5\n", "    active_w: 1.0e+299\n", "active_w: 1.0e+299",
        "units.cpu.active_w", "must be a number >= 0 of at most 1e+09"),   # energy per inference was inf
    # a delegate's fixed cost is refused beyond an hour without naming the key: the profile names it
    bad("init beyond an hour", "    init_ms: 400\n", "    init_ms: 1.0e+7\n", "init_ms: 1.0e+7", "units.gpu.init_ms",
        "must be a number >= 0 of at most 3.6e+06, got 10000000.0"),
    bad("scale beyond a thousandfold", "{opengl_rate_scale: 0.5}", "{opengl_rate_scale: 1.0e+4}",
        "opengl_rate_scale", "units.gpu.extras.opengl_rate_scale", "must be a positive number of at most 1000"),
    bad("preference beyond a thousandfold", "[0.6, 0.5]", "[0.6, 5000]", "low_power:",
        "nnapi.devices[0].preference.low_power[1]", "of at most 1000"),
    # integers without an upper bound: 10**8 copy engines filled the memory, a 400-digit alignment was an
    # OverflowError
    bad("copy engines beyond 64", "  sync_us: 50\n", "  sync_us: 50\n  engines: 100000000\n", "engines:",
        "copy.engines", "must be an integer in [1, 64], got 100000000"),
    bad("channel alignment of 400 digits", "    channel_align: 4\n", f"    channel_align: {'9' * 400}\n",
        "channel_align: 999", "units.gpu.channel_align", "must be an integer in [1, 1024]"),
    bad("cores beyond 64", "    cores: 2\n", "    cores: 1000000\n", "cores: 1000000", "units.cpu.cores",
        "must be an integer in [1, 64]"),
    bad("zero bandwidth", "    bandwidth_gbs: 12\n", "    bandwidth_gbs: 0\n", "bandwidth_gbs: 0",
        "units.gpu.bandwidth_gbs", "must be a positive number, got 0"),
    bad("negative power", "    idle_w: 0.01\n", "    idle_w: -0.2\n", "idle_w: -0.2", "units.cpu.idle_w",
        "got -0.2"),
    bad("negative time", "  sync_us: 50\n", "  sync_us: -50\n", "sync_us: -50", "copy.sync_us", "got -50"),
    bad("string for a number", "    dispatch_us: 2\n", "    dispatch_us: fast\n", "dispatch_us: fast",
        "units.cpu.dispatch_us", "must be a number >= 0, got 'fast'"),
    bad("bool for a number", "    invoke_us: 7\n", "    invoke_us: true\n", "invoke_us: true",
        "units.gpu.invoke_us", "got True"),
    bad("float for an integer", "    cores: 2\n", "    cores: 2.5\n", "cores: 2.5", "units.cpu.cores",
        "must be an integer >= 1, got 2.5"),
    bad("list for a mapping", "gelems: {float32: 1, int8: 4}", "gelems: [1, 4]", "gelems: [1, 4]",
        "units.cpu.gelems", "must be a mapping"),
    bad("unknown precision", "gmacs: {float32: 1,", "gmacs: {float64: 1,", "float64: 1",
        "units.cpu.gmacs.float64", "unknown precision"),
    bad("unknown op class", "depthwise: 0.25", "dwconv: 0.25", "dwconv: 0.25", "units.cpu.efficiency.dwconv",
        "unknown op class"),
    bad("unknown op type", "ops: [CONV_2D, ADD]", "ops: [CONV_2D, CONVOLUTION]", "CONVOLUTION",
        "nnapi.devices[0].ops[1]", "unknown op type 'CONVOLUTION'"),
    bad("unknown unit kind", "    kind: gpu\n", "    kind: tpu\n", "kind: tpu", "units.gpu.kind",
        "unknown unit kind"),
    bad("unknown preference", "{low_power: [0.6, 0.5]}", "{eco: [0.6, 0.5]}", "eco:",
        "nnapi.devices[0].preference.eco", "unknown execution preference"),
    bad("preference not a pair", "[0.6, 0.5]", "[0.6]", "low_power:", "nnapi.devices[0].preference.low_power",
        "pair"),
    bad("device precision the unit lacks", "precisions: [float32]", "precisions: [int8]",
        "precisions: [int8]", "nnapi.devices[0].precisions", "no int8 rate"),
    bad("power for a precision not run", "float16: 1.5}", "float16: 1.5, int8: 1.0}", "int8: 1.0",
        "units.gpu.active_w.int8", "runs no such precision"),
    bad("power missing a precision", "{float32: 2.0, float16: 1.5}", "{float32: 2.0}",
        "active_w: {float32: 2.0}", "units.gpu.active_w.float16", "required key is missing"),
    bad("gelems differ from gmacs", "gelems: {float32: 100, float16: 200}", "gelems: {float32: 100}",
        "gelems: {float32: 100}", "units.gpu.gelems", "same precisions as gmacs"),
    bad("extra unknown to the kind", "{opengl_rate_scale: 0.5}", "{hvx_contexts: 2}", "hvx_contexts",
        "units.gpu.extras.hvx_contexts", "unknown extra for a gpu unit"),
    bad("cache slower than cold", "    cached_init_ms: 40\n", "    cached_init_ms: 4000\n",
        "cached_init_ms: 4000", "units.gpu.cached_init_ms", "must not exceed init_ms"),
    bad("efficiency above one", "conv: 0.5,", "conv: 1.5,", "conv: 1.5", "units.cpu.efficiency.conv",
        "fraction in (0, 1]"),
    bad("duplicate key", "    cores: 2\n", "    cores: 2\n    cores: 3\n", "cores: 3", "units.cpu.cores",
        "duplicate key"),
    bad("duplicate device", "  devices:\n",
        "  devices:\n    - {name: vendor-gpu, unit: cpu, feature_level: 29, ops: [ADD],"
        " precisions: [int8]}\n",
        "- name: vendor-gpu", "nnapi.devices[1].name", "listed twice"),
    bad("neural engine without an ane unit", "api_level: 29\n", "api_level: 29\nhas_neural_engine: true\n",
        "has_neural_engine", "has_neural_engine", "no unit has kind ane"),
    bad("nnapi on ios", "os: android", "os: ios", "nnapi:", "nnapi", "need os: android"),
    bad("unknown os", "os: android", "os: symbian", "os: symbian", "os", "unknown os 'symbian'"),
]


@pytest.mark.parametrize("old, new, at, key, complaint", BAD)
def test_bad_profile_names_file_line_and_key(tmp_path, old, new, at, key, complaint):
    assert BASE.count(old) == 1
    text = BASE.replace(old, new)
    error = load_error(write(tmp_path, text, "broken_phone.yaml"))
    assert f"broken_phone.yaml:{line_of(text, at)}: {key}: " in error
    assert complaint in error


def test_the_error_for_a_negative_rate_reads_as_documented(tmp_path):
    text = BASE.replace("float16: 200}", "float16: -5}", 1)
    path = write(tmp_path, text, "pixel4.yaml")
    line = line_of(text, "float16: -5")
    assert load_error(path) == f"{path}:{line}: units.gpu.gmacs.float16: must be a positive number, got -5"


@pytest.mark.parametrize("text, line", [
    ("name: tiny\nunits: [cpu, gpu\n", 3),      # unclosed flow sequence: the parser stops at the end
    ("name: tiny\n  bad indent: 1\n", 2),
    ("name: tiny\nunits:\n\t- tab\n", 3),
    ("a: 1\n---\nb: 2\n", 2),                  # two documents in one file
])
def test_invalid_yaml_names_the_line(tmp_path, text, line):
    error = load_error(write(tmp_path, text, "bad_syntax.yaml"))
    assert f"bad_syntax.yaml:{line}: invalid YAML" in error


@pytest.mark.parametrize("text", ["", "# only a comment\n", "- a list\n", "just text\n"])
def test_a_file_that_is_not_a_mapping_is_rejected(tmp_path, text):
    error = load_error(write(tmp_path, text, "empty.yaml"))
    assert error.startswith(f"{tmp_path / 'empty.yaml'}:1: ")


def test_a_missing_file_names_its_path(tmp_path):
    path = tmp_path / "nowhere" / "phone.yaml"
    assert load_error(path) == f"{path}: no such profile file"


def test_an_unknown_bare_name_lists_the_shipped_profiles():
    with pytest.raises(ProfileError, match="unknown profile 'pixel99'.*pixel3, pixel4"):
        load_profile("pixel99")


def test_a_directory_is_not_a_profile(tmp_path):
    assert "cannot read the profile" in load_error(tmp_path)


def test_a_huge_file_is_refused_without_being_read(tmp_path):
    """A sparse file of 64 MB (as well 3 GB: a MemoryError) was read and decoded whole before its length
    was refused."""
    import tracemalloc

    path = tmp_path / "huge.yaml"
    with path.open("wb") as f:
        f.truncate(64 << 20)
    tracemalloc.start()
    try:
        error = load_error(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert error == f"{path}:1: the file is over 4,000,000 bytes; the limit is 1,000,000 characters"
    assert peak < 16 << 20, peak


def test_bytes_that_are_not_utf8_name_their_line(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(BASE.replace("a test phone", "a t\xe9st phone").encode("latin-1"))
    error = load_error(path)
    assert error.startswith(f"{path}:{line_of(BASE, 'a test phone')}: not UTF-8 text ("), error


def test_an_alias_that_contains_itself_is_an_error_not_a_recursion(tmp_path):
    error = load_error(write(tmp_path, "name: &x [1, *x]\n", "loop.yaml"))
    assert "loop.yaml:1: name[1]: an alias contains itself" in error
