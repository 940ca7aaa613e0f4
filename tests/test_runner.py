"""Running scenario files: the files written, identical results for the same scenario, the trace's tracks."""

from __future__ import annotations

import json
import re

import pytest

from runtime.sweep.runner import run_file

SCENARIO = """
description: tiny CNN on the Pixel 3, CPU vs GPU vs Hexagon on int8
device: pixel3
model: {zoo: tiny_cnn, args: {resolution: 16}}
runs: {warmup: 1, count: 3}
matrix:
  delegates: [[], [gpu: {}]]
"""


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    path = tmp_path_factory.mktemp("sc") / "tiny.yaml"
    path.write_text(SCENARIO)
    return path


def test_run_file_writes_every_result_file(scenario, tmp_path):
    results = run_file(scenario, tmp_path / "out")
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["manifest.json", "report.md", "results.csv", "results.db", "results.json", "trace.json"]
    on_disk = json.loads((tmp_path / "out" / "results.json").read_text())
    assert on_disk == json.loads(json.dumps(results, sort_keys=True))
    cpu, gpu = on_disk["records"]
    assert cpu["delegates"] == [] and gpu["delegates"][0]["nodes_delegated"] > 0
    assert gpu["boundary"]["crossings"] >= 2 and cpu["boundary"]["crossings"] == 0
    assert gpu["output_diff"][0]["avg_error"] > 0 and cpu["latency_ms"]["count"] == 3
    assert "| " in (tmp_path / "out" / "report.md").read_text()


def test_the_same_scenario_twice_gives_identical_results_json(scenario, tmp_path):
    run_file(scenario, tmp_path / "a")
    run_file(scenario, tmp_path / "b")
    assert (tmp_path / "a" / "results.json").read_bytes() == (tmp_path / "b" / "results.json").read_bytes()
    assert (tmp_path / "a" / "trace.json").read_bytes() == (tmp_path / "b" / "trace.json").read_bytes()


def test_trace_json_parses_with_one_counter_track_per_rail_and_a_lane_per_unit(scenario, tmp_path):
    from sim.profile import load_profile

    run_file(scenario, tmp_path)
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    profile = load_profile("pixel3")
    rails = {u.name for u in profile.units} | {"dram"}
    for pid in (1, 2):
        counters = {e["name"] for e in events if e["ph"] == "C" and e["pid"] == pid}
        assert counters == {f"power {r}" for r in rails}
        lanes = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == pid}
        assert {u.name for u in profile.units} <= lanes
    gpu_slices = [e for e in events if e["ph"] == "X" and e["pid"] == 2 and e["cat"] == "copy"]
    assert gpu_slices and all(e["dur"] > 0 and "bytes" in e["args"] for e in gpu_slices)
    ops = [e for e in events if e["ph"] == "X" and e["cat"] == "op" and "node" in e["args"]]
    assert ops and all({"shape", "dtype", "bytes", "macs", "precision"} <= set(e["args"]) for e in ops)


def test_a_broken_scenario_writes_nothing(tmp_path):
    from runtime.ir.errors import ScenarioError

    bad = tmp_path / "bad.yaml"
    bad.write_text("device: pixel3\nmodel: {zoo: tiny_cnn}\ndelegates: [warp_drive: {}]\n")
    with pytest.raises(ScenarioError, match="bad.yaml:3"):
        run_file(bad, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_bad_delegate_option_in_a_later_cell_fails_before_anything_runs(tmp_path):
    from runtime.ir.errors import ScenarioError

    bad = tmp_path / "late.yaml"
    bad.write_text("device: pixel3\nmodel: {zoo: tiny_cnn}\nmatrix:\n  delegates: [[], [gpu: {warp: 9}]]\n")
    with pytest.raises(ScenarioError, match=r"late.yaml.*gpu.*warp"):
        run_file(bad, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_per_op_rows_are_times_per_inference_for_ops_and_partitions_alike(scenario, tmp_path):
    """Every row of per_op is one plan node's time in one inference: a CPU op's, or all of a
    delegate's partitions' ops together (its invoke call and copies are boundary, not a node)."""
    for rec in run_file(scenario, tmp_path / "out")["records"]:
        inferences = rec["streams"] * (rec["warmup"] + rec["runs"])
        delegates = {d["name"] for d in rec["delegates"]}
        placed = {where for where in rec["placement"].values()} - {"CPU"}
        for row in rec["per_op"]:
            assert row["count"] == inferences, row
            assert row["node"] in delegates or re.fullmatch(r"[A-Z0-9_]+:\d+", row["node"]), row
            # the same work every inference: the first run is one of the same sample
            assert row["first_ms"] == pytest.approx(row["avg_ms"], rel=0.5), row
        assert {row["node"] for row in rec["per_op"]} >= placed
        assert sum(row["avg_ms"] for row in rec["per_op"]) <= rec["latency_ms"]["avg"] * (1 + 1e-9)
