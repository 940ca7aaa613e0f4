"""The prior profiles of today's Snapdragon phones (Galaxy S23, S24, S25, the Snapdragon 8 Elite, 8 Elite Gen 5
and 7 Gen 4 QRDs) load and run MobileNet v1: int8 on the HTP through the QNN delegate, float on the GPU, with
sane figures; the Galaxy S25 is the 8 Elite QRD's profile scaled by the Galaxy variant's clocks."""

from __future__ import annotations

import json
import math
import re

import pytest
import yaml

from runtime.calibration.aihub import DEVICES
from runtime.cli.main import main
from runtime.ir.errors import ProfileError
from sim.cost import Precision
from sim.dsp import has_htp
from sim.profile import PROFILE_DIR, list_profiles, load_profile
from sim.spec import UnitKind

PRIORS = {"galaxy_s23": 73, "galaxy_s24": 75, "sd8_elite_qrd": 79, "galaxy_s25": 79, "sd8_elite_gen5_qrd": 81,
          "sd7_gen4_qrd": 73}
# The Galaxy S25 is derived, never fitted: a shipped phone of its own with no prior.
S25 = str(PROFILE_DIR / "galaxy_s25.yaml")


def _prior(name: str) -> str:
    return S25 if name == "galaxy_s25" else str(PROFILE_DIR / "priors" / f"{name}.yaml")


def _run(tmp_path, name: str, *argv: str) -> dict:
    out = tmp_path / "run.json"
    assert main(["benchmark", "--zoo", "mobilenet_v1", "--device", _prior(name), "--timing_only",
                 "--num_runs=1", "--warmup_runs=0", f"--output_json={out}", *argv]) == 0
    return json.loads(out.read_text())


@pytest.mark.parametrize("name", PRIORS)
def test_each_prior_loads_with_its_htp_and_positive_numbers(name):
    profile = load_profile(_prior(name))
    assert profile.name == name
    dsp = profile.unit("dsp")
    assert has_htp(dsp) and dsp.extras["htp_arch"] == PRIORS[name]
    assert {Precision.INT8, Precision.FLOAT16} <= set(dsp.macs_per_s)  # QNN runs float graphs in fp16 here
    for unit in profile.units:
        numbers = [*unit.macs_per_s.values(), *unit.elem_per_s.values(), *unit.active_w.values(), unit.bandwidth]
        assert all(x > 0 for x in numbers), unit.name
    assert profile.units_of(UnitKind.GPU)
    assert dsp.mech.htp is not None and dsp.mech.htp.vtcm_bytes > 0      # the Hexagon NPU's mechanisms


def test_every_number_of_a_prior_says_what_it_is():
    """spec / derived / assumed / first estimate on the line of every number (the derived S25's scales
    say it in the comments above them, checked by the test below)."""
    number = re.compile(r"^(-?[0-9.]+|\[[0-9., ]+\])$")
    for name in set(PRIORS) - {"galaxy_s25"}:
        for n, line in enumerate((PROFILE_DIR / "priors" / f"{name}.yaml").read_text().splitlines(), 1):
            body = line.split("#")[0]
            if ":" in body and number.match(body.split(":", 1)[1].strip()):
                assert any(w in line.split("#", 1)[-1] for w in ("spec", "derived", "assumed", "first estimate")), \
                    f"{name}.yaml:{n}: {line.strip()}"


def test_ai_hub_names_the_new_qrds():
    assert DEVICES["Snapdragon 8 Elite Gen 5 QRD"] == "sd8_elite_gen5_qrd"
    assert DEVICES["Snapdragon 7 Gen 4 QRD"] == "sd7_gen4_qrd"


def test_galaxy_s25_is_the_8_elite_at_the_galaxy_clocks():
    s25, qrd = load_profile("galaxy_s25"), load_profile("sd8_elite_qrd")   # the shipped (calibrated) 8 Elite
    assert "never fitted" in s25.description and s25.calibration == ()
    for unit, factor in (("cpu_big", 4.0 / 3.925), ("gpu", 1.2 / 1.1), ("dsp", 1.0), ("cpu_big", 4.0 / 3.925)):
        for p, rate in qrd.unit(unit).macs_per_s.items():
            assert math.isclose(s25.unit(unit).macs_per_s[p], rate * factor, rel_tol=1e-12), (unit, p)
        for p, rate in qrd.unit(unit).elem_per_s.items():
            assert math.isclose(s25.unit(unit).elem_per_s[p], rate * factor, rel_tol=1e-12), (unit, p)
    assert s25.unit("dsp") == qrd.unit("dsp") and s25.dram == qrd.dram and s25.copy == qrd.copy


def test_a_derived_profile_follows_its_base(tmp_path, monkeypatch):
    """The base is read when the derived profile loads: change the base, the derived phone follows."""
    import sim.profile as sp

    priors = tmp_path / "priors"
    priors.mkdir()
    base = yaml.safe_load((PROFILE_DIR / "priors" / "sd8_elite_qrd.yaml").read_text())
    base["units"]["gpu"]["gmacs"]["float32"] = 1100
    (priors / "sd8_elite_qrd.yaml").write_text(yaml.safe_dump(base))
    monkeypatch.setattr(sp, "PROFILE_DIR", tmp_path)
    s25 = sp.load_profile(_prior("galaxy_s25"))
    assert math.isclose(s25.unit("gpu").macs_per_s[Precision.FLOAT32], 1.2e12, rel_tol=1e-12)
    (tmp_path / "sd8_elite_qrd.yaml").write_text(yaml.safe_dump({**base, "name": "sd8_elite_qrd"}))
    base["units"]["gpu"]["gmacs"]["float32"] = 2200                      # a calibrated profile wins over the prior
    (tmp_path / "sd8_elite_qrd.yaml").write_text(yaml.safe_dump(base))
    assert math.isclose(sp.load_profile(_prior("galaxy_s25")).unit("gpu").macs_per_s[Precision.FLOAT32], 2.4e12,
                        rel_tol=1e-12)


@pytest.mark.parametrize("derive, message", [
    ({"base": "nowhere"}, r"derive\.base: no profile 'nowhere'"),
    ({"base": "sd8_elite_qrd", "scale": {"units.gpu.nope": [1, 2]}}, r"derive\.scale\.units\.gpu\.nope: the base profile has no"),
    ({"base": "sd8_elite_qrd", "scale": {"units.gpu.gmacs": 1.1}}, r"must be a \[new, old\] pair"),
    ({"base": "sd8_elite_qrd", "scale": {"units.gpu.kind": [1, 2]}}, r"is not a number or a mapping of numbers"),
    ({"base": "sd8_elite_qrd", "sclae": {}}, r"derive\.sclae: unknown key"),
    # a name the file system refuses was an OSError (File name too long); a base is a shipped name, never a path
    ({"base": "a" * 300}, r"bad\.yaml:\d+: derive\.base: no profile 'a+\.\.\.a+' to derive from; a base is a shipped"),
    ({"base": "../profiles/pixel4"}, r"derive\.base: no profile '\.\./profiles/pixel4' to derive from"),
    # a base that derives named the base's file, with no line or key of the file that names it
    ({"base": "galaxy_s25"}, r"bad\.yaml:\d+: derive\.base: galaxy_s25 derives from another profile itself"),
    # overlapping scales multiplied the GPU's float32 rate twice, silently
    ({"base": "sd8_elite_qrd", "scale": {"units.gpu.gmacs": [2, 1], "units.gpu.gmacs.float32": [2, 1]}},
     r"derive\.scale\.units\.gpu\.gmacs\.float32: overlaps the scale of units\.gpu\.gmacs"),
    # an infinite factor was blamed on the base's number it made infinite (units.gpu.gmacs.float32, line 1)
    ({"base": "sd8_elite_qrd", "scale": {"units.gpu.gmacs": [1e299, 1e-299]}},
     r"bad\.yaml:\d+: derive\.scale\.units\.gpu\.gmacs: 1e\+299 / 1e-299 is not a factor a float can hold"),
])
def test_a_bad_derive_names_its_key(tmp_path, derive, message):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"name": "bad", "description": "a bad derived phone", "derive": derive}))
    with pytest.raises(ProfileError, match=message):
        load_profile(str(path))


DERIVED = """\
name: mine
description: a phone derived from the Pixel 4
derive:
  base: pixel4
  scale:
    units.gpu: [2, 1]
"""


def _line(text: str, fragment: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if fragment in line)


def _derive_error(tmp_path, text: str) -> str:
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError) as info:
        load_profile(str(path))
    return str(info.value)


def test_a_scaled_figure_a_key_refuses_names_the_scale_line(tmp_path):
    """Scaling every number of the GPU doubles its channel_align to 8.0, which is no integer: the error
    named the base's key at line 1 of the derived file; it names the line of the scale that made it."""
    error = _derive_error(tmp_path, DERIVED)
    assert error.startswith(f"{tmp_path / 'mine.yaml'}:{_line(DERIVED, 'units.gpu:')}: units.gpu.channel_align: "
                            f"must be an integer >= 1, got 8.0"), error


def test_a_figure_the_base_gives_points_at_derive_base(tmp_path):
    """The file's own units replace the Pixel 4's, whose NNAPI devices name units no longer there."""
    text = DERIVED.replace("  scale:\n    units.gpu: [2, 1]\n", "") + (
        "units:\n  cpu: {kind: cpu, gmacs: {float32: 1}, gelems: {float32: 1}, bandwidth_gbs: 1, dispatch_us: 1, "
        "active_w: 1, idle_w: 0}\n")
    error = _derive_error(tmp_path, text)
    assert f"mine.yaml:{_line(text, 'base: pixel4')}: nnapi.devices[0].unit: names unit" in error, error


def test_a_scale_of_a_section_the_file_sets_itself_is_refused(tmp_path):
    """The file's units replaced the base's whole section, and the scale of units.gpu went with it, silently."""
    text = DERIVED.replace("units.gpu: [2, 1]", "units.gpu.gmacs: [2, 1]") + (
        "units:\n  cpu: {kind: cpu, gmacs: {float32: 1}, gelems: {float32: 1}, bandwidth_gbs: 1, dispatch_us: 1, "
        "active_w: 1, idle_w: 0}\n")
    error = _derive_error(tmp_path, text)
    assert f"mine.yaml:{_line(text, 'units.gpu.gmacs')}: derive.scale.units.gpu.gmacs: the file sets units " \
           f"itself" in error, error


@pytest.mark.parametrize("key", ["name", "description"])
def test_a_derived_profile_names_and_describes_its_own_phone(tmp_path, key):
    """Without its own name, the derived phone's records were labelled pixel4 beside the Pixel 4's."""
    text = "".join(line + "\n" for line in DERIVED.splitlines() if not line.startswith(key)).replace(
        "units.gpu: [2, 1]", "units.gpu.gmacs: [2, 1]")
    assert f"mine.yaml:1: {key}: required key is missing: a derived profile names" in _derive_error(tmp_path, text)


@pytest.fixture(scope="module")
def zoo_graphs() -> dict:
    return {}


@pytest.fixture
def zoo_built_once(monkeypatch, zoo_graphs):
    """The benchmark runs below build MobileNet v1 (float, and int8: its calibration runs the float
    model on samples) once per module, not for each of the fifteen runs: a zoo build is a pure
    function of its name, arguments and quantization, and a Graph is frozen."""
    from runtime.cli import common

    build = common.load_model

    def load_model(source, names):
        if source.zoo is None or source.samples is not None:
            return build(source, names)
        key = (source.zoo, repr(source.zoo_args), source.quantization, source.seed)
        if key not in zoo_graphs:
            zoo_graphs[key] = build(source, names)
        return zoo_graphs[key]

    monkeypatch.setattr(common, "load_model", load_model)
    return zoo_graphs


# the S25 is the 8 Elite QRD at other clocks (checked number by number below): no run of its own
@pytest.mark.parametrize("name", [p for p in PRIORS if p != "galaxy_s25"])
def test_mobilenet_int8_on_the_htp_beats_the_cpu_and_float_runs_on_the_gpu(tmp_path, name, zoo_built_once):
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
