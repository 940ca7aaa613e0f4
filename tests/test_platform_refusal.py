"""A delegate on a phone whose platform has none of it (Core ML on a Pixel, NNAPI or Hexagon on an
iPhone) takes no op, as TFLite's would; the testbed says so instead of handing back CPU rows in
silence: one warning line on stderr naming the delegate and the phone, and `platform_refusal` in
the run's record (results.json, `dtb benchmark --output_json`)."""

from __future__ import annotations

import json

import pytest

from delegates.registry import make_delegate
from runtime.cli import main as cli
from runtime.sweep.runner import run_file
from sim.profile import load_profile

REFUSED = {
    ("coreml", "pixel4"): "Core ML delegate: pixel4 is not an iOS device",
    ("nnapi", "iphone_xs"): "NNAPI delegate: iphone_xs is not an Android device",
    ("hexagon", "iphone_xs"): "Hexagon delegate: iphone_xs has no Hexagon DSP",
    # the retired Hexagon delegate's hexagon_nn runs on Hexagon 680-690, not on today's tensor processors
    ("hexagon", "galaxy_s24"): "Hexagon delegate: galaxy_s24's Hexagon is an HTP (v75), which the delegate's "
                               "hexagon_nn library does not run on (Hexagon 680-690 only; the QNN delegate, "
                               "--use_qnn, runs on it)",
}
AT_HOME = [("coreml", "iphone_xs"), ("nnapi", "pixel4"), ("hexagon", "pixel3"), ("hexagon", "pixel4"),
           ("gpu", "pixel4"), ("gpu", "iphone_xs"), ("qnn", "galaxy_s24")]


@pytest.mark.parametrize("kind, phone", sorted(REFUSED))
def test_a_delegate_names_the_platform_that_refuses_it(kind, phone):
    assert make_delegate(kind, load_profile(phone)).platform_refusal == REFUSED[kind, phone]


@pytest.mark.parametrize("kind, phone", AT_HOME)
def test_a_delegate_on_its_own_platform_has_no_refusal(kind, phone):
    assert make_delegate(kind, load_profile(phone)).platform_refusal is None


def _warnings(err: str) -> list[str]:
    """Warning lines but the one saying tiny_cnn lies outside the phone's fitted rows (tests/test_band.py)."""
    return [line for line in err.splitlines() if "warning" in line and "figures were fitted to:" not in line]


@pytest.mark.parametrize("kind, phone", sorted(REFUSED))
def test_benchmark_warns_once_on_stderr_and_records_the_refusal(kind, phone, tmp_path, capsys):
    out = tmp_path / "run.json"
    argv = ["benchmark", "--zoo", "tiny_cnn", "--zoo_args", "resolution=16", "--device", phone, f"--use_{kind}",
            "--num_runs", "2", "--warmup_runs", "1", "--output_json", str(out)]
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    assert _warnings(captured.err) == [f"dtb benchmark: warning: {REFUSED[kind, phone]}; it takes no op"]
    assert "warning" not in captured.out
    record = json.loads(out.read_text())
    assert record["platform_refusal"] == REFUSED[kind, phone]
    assert record["delegates"][0]["nodes_delegated"] == 0


def test_benchmark_on_the_right_platform_stays_quiet(tmp_path, capsys):
    out = tmp_path / "run.json"
    argv = ["benchmark", "--zoo", "tiny_cnn", "--zoo_args", "resolution=16", "--device", "pixel4", "--use_gpu",
            "--num_runs", "2", "--warmup_runs", "1", "--output_json", str(out)]
    assert cli.main(argv) == 0
    assert _warnings(capsys.readouterr().err) == []
    assert json.loads(out.read_text())["platform_refusal"] is None


SCENARIO = """
description: tiny CNN on the Pixel 4 with every delegate, Core ML among them
device: pixel4
model: {zoo: tiny_cnn, args: {resolution: 16}}
runs: {warmup: 1, count: 2}
matrix:
  delegates: [[], [coreml: {}], [gpu: {}]]
"""


def test_run_records_the_refusal_and_warns_once(tmp_path, capsys):
    path = tmp_path / "sc.yaml"
    path.write_text(SCENARIO)
    assert cli.main(["run", str(path), "-o", str(tmp_path / "out")]) == 0
    assert _warnings(capsys.readouterr().err) == [
        "dtb run: warning: Core ML delegate: pixel4 is not an iOS device; it takes no op"]
    records = json.loads((tmp_path / "out" / "results.json").read_text())["records"]
    assert [r["platform_refusal"] for r in records] == [None, "Core ML delegate: pixel4 is not an iOS device", None]


def test_run_file_record_carries_the_field(tmp_path):
    path = tmp_path / "sc.yaml"
    path.write_text(SCENARIO)
    results = run_file(path, tmp_path / "out")
    assert results["records"][1]["platform_refusal"] == "Core ML delegate: pixel4 is not an iOS device"
