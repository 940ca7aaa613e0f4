"""Reports from results.json: Markdown tables, CSV rows, HTML with PNG plots, input checks, atomic writes."""

from __future__ import annotations

import base64
import copy
import csv
import io
import json
import os
import re

import pytest

from runtime.ir import errors
from runtime.report.render import FORMATS, render, write_report
from runtime.report.plots import timeline_rows

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
GPU = "TfLiteGpuDelegateV2"


def _record(label, delegates, avg, p90, energy, rails, per_op, diffs, timing_only=False):
    return {
        "scenario": "side-by-side", "label": label, "cell": {"delegates": label.split("=")[-1]},
        "device": "pixel4", "model": {"name": "mobilenet_v1", "quantization": "none", "nodes": 31},
        "threads": 4, "streams": 1, "warmup": 1, "runs": 10, "timing_only": timing_only,
        "delegates": delegates, "placement": {"0": "CPU"},
        "latency_ms": {"count": 10, "first": avg * 1.5, "warmup_avg": avg * 1.5, "avg": avg, "std": 0.0,
                       "min": avg, "max": p90, "p50": avg, "p90": p90, "p99": p90},
        "init_ms": 405.123,
        "boundary": {"crossings": 2.0, "bytes": 606000.0, "ms": 0.384, "mj": 0.2, "share": 0.0421},
        "energy": {"total_mj": energy, "avg_power_w": 2.5, "peak_power_w": 3.9, "rails": rails},
        "per_op": per_op, "footprint_bytes": {"cpu_big": 123}, "output_diff": diffs, "log": [],
    }


def _ops(n, unit):
    return [{"node": f"CONV_2D:{k}", "unit": unit, "first_ms": 2.0 * k, "avg_ms": float(k), "count": 10}
            for k in range(n)]


def _results():
    unsupported = [{"op": 3, "name": "PAD", "reason": "padding | not 4-D"},
                   {"op": 9, "name": "PAD", "reason": "padding | not 4-D"},
                   {"op": 30, "name": "ARG_MAX", "reason": "ARG_MAX is not supported"}]
    gpu = {"kind": "gpu", "name": GPU, "nodes_delegated": 28, "total_nodes": 31, "partitions": 2,
           "unsupported": unsupported}
    hexagon = {"kind": "hexagon", "name": "TfLiteHexagonDelegate", "nodes_delegated": 31, "total_nodes": 31,
               "partitions": 1, "unsupported": []}
    cpu_rails = {"cpu_big": {"active_mj": 30.0, "total_mj": 35.5}, "dram": {"active_mj": 4.0, "total_mj": 5.0}}
    gpu_rails = {"cpu_big": {"active_mj": 2.0, "total_mj": 4.0}, "gpu": {"active_mj": 12.0, "total_mj": 15.25},
                 "dram": {"active_mj": 3.0, "total_mj": 3.5}}
    diff = [{"output": "logits", "avg_error": 1.5e-4, "std_dev": 2e-5, "max": 1.25e-3}]
    return {"schema": 1, "scenario": "scenarios/side_by_side.yaml", "records": [
        _record("delegates=gpu", [gpu], 9.1, 9.456, 22.75, gpu_rails, _ops(7, "gpu"), diff),
        _record("delegates=cpu", [], 31.004, 33.0, 40.5, cpu_rails, _ops(3, "cpu_big"), diff),
        _record("delegates=hexagon", [hexagon], 5.0, 5.5, 10.0, cpu_rails, _ops(2, "dsp"), [], timing_only=True),
    ]}


def _trace():
    """Two processes, one warm-up inference each then one steady one; slices name their inference."""
    events = []
    for pid, label in ((1, "delegates=gpu"), (2, "delegates=cpu")):
        events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": f"pixel4 {label}"}})
        events += [{"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": lane}}
                   for tid, lane in ((1, "cpu_big"), (2, "gpu"), (3, "copy0"))]
        for k, start in ((0, 0.0), (1, 20000.0)):
            events.append({"name": f"inference {k}", "cat": "inference", "ph": "X", "ts": start, "dur": 9000.0,
                           "pid": pid, "tid": 0, "args": {"stream": 0}})
            for tid, cat, ts, dur in ((1, "op", 0.0, 1000.0), (3, "copy", 1000.0, 500.0),
                                      (2, "op", 1500.0, 6000.0), (2, "invoke", 7500.0, 100.0)):
                events.append({"name": f"{cat}{tid}", "cat": cat, "ph": "X", "ts": start + ts + 10 * k,
                               "dur": dur, "pid": pid, "tid": tid, "args": {"stream": 0, "inference": k}})
        events.append({"name": "power gpu", "ph": "C", "ts": 0.0, "pid": pid, "args": {"W": 1.5}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def _md_rows(text, first_cell):
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in text.splitlines()
            if line.startswith(f"| {first_cell} ")]


def _images(html_text):
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html_text)]


# ---- Markdown ---------------------------------------------------------------------------------------

def test_md_summary_has_one_row_per_record_with_the_numbers():
    md = render(_results(), "md")
    assert md.startswith("# Delegate Testbed report: scenarios/side_by_side.yaml\n")
    header = _md_rows(md, "Label")
    assert len(header) == 1 and header[0][:5] == ["Label", "Device", "Delegates", "Avg ms", "p90 ms"]
    rows = {r[0]: r for line in ("delegates=gpu", "delegates=cpu", "delegates=hexagon")
            for r in _md_rows(md, line)}
    assert len(rows) == 3
    # a record written before error bands has none to show ("-")
    assert rows["delegates=gpu"] == ["delegates=gpu", "pixel4", "gpu", "9.10", "9.46", "-", "405.12", "2", "0.38",
                                     "4.2%", "22.75", "2.50", "28", "31", "2"]
    assert rows["delegates=cpu"][2:5] == ["CPU only", "31.00", "33.00"]
    assert rows["delegates=cpu"][-3:] == ["0", "31", "0"]
    assert rows["delegates=hexagon"][-3:] == ["31", "31", "1"]


def test_md_groups_unsupported_ops_by_type_with_counts_and_escapes_pipes():
    md = render(_results(), "md")
    assert f"| {GPU} | PAD | 2 | padding \\| not 4-D |" in md
    assert f"| {GPU} | ARG_MAX | 1 | ARG_MAX is not supported |" in md
    assert "CPU only: no delegate was applied." in md
    assert "None: every op is supported by a delegate." in md


def test_md_sections_list_top_five_ops_rails_and_diffs():
    md = render(_results(), "md")
    gpu_section = md.split("## 1. delegates=gpu on pixel4")[1].split("## 2.")[0]
    ops = [line.split(" | ")[0].strip("| ") for line in gpu_section.splitlines() if line.startswith("| CONV_2D:")]
    assert ops == ["CONV_2D:6", "CONV_2D:5", "CONV_2D:4", "CONV_2D:3", "CONV_2D:2"]
    assert "| gpu | 12.00 | 15.25 |" in gpu_section
    assert "| logits | 1.500e-04 | 2.000e-05 | 1.250e-03 |" in gpu_section
    hexagon_section = md.split("## 3. delegates=hexagon on pixel4")[1]
    assert "Not compared (timing only)." in hexagon_section


# ---- CSV --------------------------------------------------------------------------------------------

def test_csv_has_one_row_per_record_with_flat_columns():
    text = render(_results(), "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["label"] for r in rows] == ["delegates=gpu", "delegates=cpu", "delegates=hexagon"]
    gpu, cpu, _ = rows
    assert float(gpu["latency_ms.avg"]) == 9.1 and float(gpu["latency_ms.p90"]) == 9.456
    assert float(gpu["boundary.share"]) == 0.0421 and float(gpu["energy.total_mj"]) == 22.75
    assert (gpu["delegates"], gpu["nodes_delegated"], gpu["partitions"], gpu["unsupported"]) == ("gpu", "28", "2", "3")
    assert (cpu["delegates"], cpu["nodes_delegated"]) == ("", "0")
    assert float(gpu["energy.rails.gpu.total_mj"]) == 15.25 and cpu["energy.rails.gpu.total_mj"] == ""
    assert gpu["cell.delegates"] == "gpu" and float(gpu["output_diff.max"]) == 1.25e-3
    assert rows[2]["output_diff.max"] == ""


def test_csv_column_order_is_stable():
    results = _results()
    header = render(results, "csv").splitlines()[0].split(",")
    assert header[:6] == ["scenario", "label", "device", "model.name", "model.quantization", "model.nodes"]
    results["records"].reverse()
    assert render(results, "csv").splitlines()[0].split(",") == header
    assert all("," not in cell and cell for cell in header)


# ---- HTML -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("with_trace, plots", [(False, 2), (True, 3)])
def test_html_has_tables_and_png_plots(with_trace, plots):
    page = render(_results(), "html", _trace() if with_trace else None)
    assert page.startswith("<!DOCTYPE html>") and "<table>" in page and "<style>" in page
    assert "<script" not in page and "<link" not in page
    images = _images(page)
    assert len(images) == plots
    assert all(png.startswith(PNG_MAGIC) and len(png) > 1000 for png in images)
    assert page.count("<tr><td>delegates=") == 3


def test_html_escapes_text():
    results = _results()
    results["records"][0]["label"] = "<b>gpu</b>"
    page = render(results, "html")
    assert "&lt;b&gt;gpu&lt;/b&gt;" in page and "<b>gpu</b>" not in page


def test_timeline_uses_the_first_steady_inference_of_each_process():
    rows = dict(timeline_rows(_trace(), _results()["records"]))
    assert list(rows) == [f"pixel4 delegates={p}: {lane}" for p in ("gpu", "cpu")
                          for lane in ("cpu_big", "gpu", "copy0")]
    # Inference 1 (after one warm-up) starts at 20 ms; its slices are offset by 10 µs from it.
    assert rows["pixel4 delegates=gpu: gpu"] == [(1.51, 6.0, "op"), (7.51, 0.1, "invoke")]
    assert rows["pixel4 delegates=cpu: copy0"] == [(1.01, 0.5, "copy")]


def test_trace_without_steady_inference_draws_no_timeline():
    results = _results()
    for rec in results["records"]:
        rec["warmup"] = 5
    assert timeline_rows(_trace(), results["records"]) == []
    assert len(_images(render(results, "html", _trace()))) == 2


@pytest.mark.parametrize("fmt", FORMATS)
def test_rendering_is_deterministic(fmt):
    assert render(_results(), fmt, _trace()) == render(_results(), fmt, _trace())


# ---- input checks -----------------------------------------------------------------------------------

@pytest.mark.parametrize("path, key", [
    (("latency_ms", "p90"), "latency_ms.p90"),
    (("device",), "device"),
    (("energy", "rails"), "energy.rails"),
    (("per_op",), "per_op"),
])
def test_record_missing_a_key_names_record_and_key(path, key):
    results = _results()
    node = results["records"][1]
    for part in path[:-1]:
        node = node[part]
    del node[path[-1]]
    with pytest.raises(errors.TestbedError, match=rf"record 1: missing key '{re.escape(key)}'"):
        render(results, "md")


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r["delegates"][0].pop("partitions"), r"record 0: delegates\[0\]: missing key 'partitions'"),
    (lambda r: r["delegates"][0]["unsupported"][1].pop("reason"),
     r"record 0: delegates\[0\]\.unsupported\[1\]: missing key 'reason'"),
    (lambda r: r["energy"]["rails"]["gpu"].pop("total_mj"), r"record 0: energy\.rails\.gpu: missing key 'total_mj'"),
    (lambda r: r.update(init_ms="slow"), r"record 0: key 'init_ms' is not a number"),
])
def test_malformed_entries_are_named(mutate, message):
    results = _results()
    mutate(results["records"][0])
    with pytest.raises(errors.TestbedError, match=message):
        render(results, "csv")


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r["delegates"][0].update(partitions=None),
     r"record 0: delegates\[0\]: key 'partitions' is not a number"),
    (lambda r: r["delegates"][0].update(nodes_delegated="28"),
     r"record 0: delegates\[0\]: key 'nodes_delegated' is not a number"),
    (lambda r: r["per_op"][1].update(avg_ms=None), r"record 0: per_op\[1\]: key 'avg_ms' is not a number"),
    (lambda r: r["per_op"][1].update(first_ms="2"), r"record 0: per_op\[1\]: key 'first_ms' is not a number"),
    (lambda r: r["energy"]["rails"]["gpu"].update(active_mj=None),
     r"record 0: energy\.rails\.gpu: key 'active_mj' is not a number"),
    (lambda r: r.update(error_band={"median_pct": 9.1, "p90_pct": "x"}),
     r"record 0: key 'error_band\.p90_pct' is not a number"),
    (lambda r: r.update(outside_fit=3), r"record 0: key 'outside_fit' is not a list"),
    (lambda r: r.update(nonfinite={"delegate": "gpu"}), r"record 0: key 'nonfinite' is not a list"),
    (lambda r: r.update(cell="delegates=gpu"), r"record 0: key 'cell' is not an object"),
    # JSON holds integers of any size; no float does (OverflowError from the format and the plots)
    (lambda r: r.update(init_ms=10 ** 400), r"record 0: key 'init_ms' is not a number: 1000.*000$"),
    (lambda r: r["energy"].update(total_mj=10 ** 30), r"record 0: key 'energy\.total_mj' is not a number"),
])
@pytest.mark.parametrize("fmt", FORMATS)
def test_values_of_the_wrong_type_are_named_not_a_traceback(mutate, message, fmt):
    # each of these raised TypeError, ValueError or AttributeError from the formatting, a traceback in `dtb report`
    results = _results()
    mutate(results["records"][0])
    with pytest.raises(errors.TestbedError, match=message):
        render(results, fmt)


def test_a_record_without_a_cell_or_with_null_sections_still_renders():
    results = _results()
    results["records"][0].update(cell=None, outside_fit=None, nonfinite=None)
    del results["records"][1]["cell"]
    assert "delegates=gpu" in render(results, "csv") and "delegates=gpu" in render(results, "md")


def _app_record(**sections):
    """A record of an app stream (runtime/sweep/app_streams.py), its sections replaced by `sections`."""
    rec = _results()["records"][0]
    rec["energy"]["stream_mj"] = 500.0
    rec.update({"app": {"name": "camera", "rate_hz": 30, "when_busy": "drop", "units": ["gpu"]},
                "frames": {"arrived": 10, "completed": 9, "dropped": 1, "deadline_misses": 0},
                "sustained": {"first_s": 10, "last_s": 10, "p50_first_ms": 9.0, "p50_last_ms": 9.9, "rise": 0.1},
                "run": {"soc_mj": 1000.0, "idle_mj": 100.0}, "duration_s": 60,
                "thermal": {"ambient_c": 25, "platform_w": 2.5, "skin_c": {"max": 30.0}, "die_c": {"max": 50.0},
                            "units": {"gpu": {"final_mhz": 500, "min_mhz": 400, "first_throttle_s": 12.0}}}})
    for key, value in sections.items():
        section, _, field = key.partition("__")
        if field:
            rec[section][field] = value
        else:
            rec[section] = value
    return {"schema": 1, "scenario": "apps.yaml", "records": [rec]}


def test_an_app_stream_record_reports_its_frames_energy_and_heat():
    md = render(_app_record(), "md")
    assert "App camera: 30 frames/s on gpu" in md and "(50.0% of the SoC's 1000.0 mJ" in md
    assert "| gpu | 500 | 400 | 12.0 |" in md


@pytest.mark.parametrize("sections", [
    {"sustained": "x"}, {"run": ["soc_mj"]}, {"thermal__units": "gpu"}, {"thermal__units": {"gpu": 1}},
    {"app__units": None}, {"energy__stream_mj": None}, {"run__soc_mj": "1000"},
])
@pytest.mark.parametrize("fmt", FORMATS)
def test_an_app_stream_record_with_a_damaged_section_renders_it_as_unknown(sections, fmt):
    # each raised AttributeError or TypeError in runtime/report/apps.py, a traceback in `dtb report`
    assert render(_app_record(**sections), fmt)


def test_report_of_a_results_file_with_a_wrong_type_is_one_line_and_exit_1(tmp_path, capsys):
    from runtime.cli.main import main

    results = _results()
    results["records"][1]["delegates"] = [{"kind": "gpu", "name": GPU, "nodes_delegated": 3, "partitions": None}]
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    out_file = tmp_path / "report.md"
    assert main(["report", str(path), "-o", str(out_file)]) == 1
    err = capsys.readouterr().err
    assert err == (f"dtb report: error: {path}: record 1: delegates[0]: key 'partitions' is not a number: "
                   f"None\n")
    assert sorted(os.listdir(tmp_path)) == ["results.json"]


def test_report_of_a_sparse_3_gb_results_file_is_refused_unread(tmp_path, capsys):
    import tracemalloc

    from runtime.cli.main import main

    path = tmp_path / "results.json"
    with open(path, "wb") as f:
        f.truncate(3 << 30)   # sparse: no disk, but read whole it took 6 GB and a minute
    tracemalloc.start()
    try:
        assert main(["report", str(path), "-o", str(tmp_path / "report.md")]) == 1
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20
    assert capsys.readouterr().err == (f"dtb report: error: {path}: cannot read the results file: the file is "
                                       f"over 1,073,741,824 bytes\n")
    assert sorted(os.listdir(tmp_path)) == ["results.json"]


def test_report_refuses_a_results_or_trace_file_over_the_limit(tmp_path, monkeypatch):
    from runtime.report import render as render_module

    path = tmp_path / "results.json"
    path.write_text(json.dumps(_results()))
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": [{"ph": "M", "name": "x" * 100}] * (path.stat().st_size // 50)}))
    assert trace.stat().st_size > path.stat().st_size
    monkeypatch.setattr(render_module, "MAX_JSON_BYTES", trace.stat().st_size)
    write_report(path, "html")   # files of the limit's size are read
    monkeypatch.setattr(render_module, "MAX_JSON_BYTES", trace.stat().st_size - 1)
    with pytest.raises(errors.TestbedError, match=re.escape(f"{tmp_path / 'trace.json'}: cannot read the trace "
                                                            f"file: the file is over ")):
        write_report(path, "html", tmp_path / "other.html")
    monkeypatch.setattr(render_module, "MAX_JSON_BYTES", path.stat().st_size - 1)
    with pytest.raises(errors.TestbedError, match=re.escape(f"{path}: cannot read the results file: the file is "
                                                            f"over ")):
        write_report(path, "md")
    assert not (tmp_path / "other.html").exists() and not (tmp_path / "report.md").exists()


def test_results_without_records_is_an_error():
    with pytest.raises(errors.TestbedError, match="records"):
        render({"schema": 1}, "md")


def test_unknown_format_names_the_allowed_ones(tmp_path):
    with pytest.raises(ValueError, match="md, html, csv"):
        render(_results(), "pdf")
    with pytest.raises(ValueError, match="'pdf'"):
        write_report(tmp_path / "results.json", "pdf")


# ---- write_report -----------------------------------------------------------------------------------

@pytest.fixture
def results_file(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(_results()))
    return path


@pytest.mark.parametrize("fmt, name", [("md", "report.md"), ("html", "report.html"), ("csv", "results.csv")])
def test_write_report_writes_beside_results_without_temp_files(results_file, fmt, name):
    out = write_report(results_file, fmt)
    assert out == results_file.with_name(name)
    assert out.read_text(encoding="utf-8") == render(_results(), fmt)
    assert sorted(os.listdir(results_file.parent)) == sorted(["results.json", name])


def test_write_report_gives_the_report_the_mode_of_a_plain_new_file(results_file):
    plain = results_file.with_name("plain.txt")
    plain.write_text("")
    out = write_report(results_file, "md")
    assert out.stat().st_mode == plain.stat().st_mode


def test_write_report_html_draws_the_trace_beside_results(results_file):
    results_file.with_name("trace.json").write_text(json.dumps(_trace()))
    out = write_report(results_file, "html", results_file.parent / "custom.html")
    assert out.name == "custom.html" and len(_images(out.read_text(encoding="utf-8"))) == 3


def test_write_report_keeps_the_old_file_when_writing_fails(results_file, monkeypatch):
    old = results_file.with_name("report.md")
    old.write_text("old report")

    def fail(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write_report(results_file, "md")
    assert old.read_text() == "old report"
    assert sorted(os.listdir(results_file.parent)) == ["report.md", "results.json"]


def test_write_report_names_a_missing_path(tmp_path):
    missing = tmp_path / "nowhere" / "results.json"
    with pytest.raises(errors.TestbedError, match=re.escape(str(missing))):
        write_report(missing, "md")


def test_write_report_names_a_file_that_is_not_json(tmp_path):
    bad = tmp_path / "results.json"
    bad.write_text("{not json")
    with pytest.raises(errors.TestbedError, match=re.escape(str(bad)) + ".*not valid JSON"):
        write_report(bad, "csv")


def test_write_report_names_path_and_key_of_a_bad_record(tmp_path):
    results = _results()
    del results["records"][2]["boundary"]["share"]
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    with pytest.raises(errors.TestbedError, match=re.escape(str(path)) + ": record 2: missing key 'boundary.share'"):
        write_report(path, "md")
    assert os.listdir(tmp_path) == ["results.json"]


def test_records_are_not_modified():
    results = _results()
    before = copy.deepcopy(results)
    for fmt in FORMATS:
        render(results, fmt, _trace())
    assert results == before


# ---- plots with many cells --------------------------------------------------------------------------

def _many_records(n):
    rails = {"cpu_big": {"active_mj": 3.0, "total_mj": 3.5}, "gpu": {"active_mj": 1.0, "total_mj": 1.5}}
    labels = [f"device=pixel{3 + k % 2} threads={1 + k % 4} delegates=gpu+nnapi(accelerator_name=qti-dsp) "
              f"quantization={'int8' if k % 3 else 'none'} seed={k:02d}" for k in range(n)]
    return [_record(label, [], 5.0 + k, 6.0 + k, 10.0 + k, rails, _ops(2, "cpu_big"), [])
            for k, label in enumerate(labels)], labels


def _overlaps(boxes):
    return [(i, j) for i in range(len(boxes)) for j in range(i + 1, len(boxes))
            if boxes[i].overlaps(boxes[j])]


@pytest.mark.parametrize("cells", [3, 15, 50])
def test_plot_cell_labels_are_all_shown_without_overlap(monkeypatch, cells):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from runtime.report import plots as report_plots

    figures = []
    monkeypatch.setattr(report_plots, "_png", lambda fig: figures.append(fig) or PNG_MAGIC)
    records, labels = _many_records(cells)
    report_plots.plot_images(records, labels)
    assert len(figures) == 2
    for fig in figures:
        renderer = FigureCanvasAgg(fig).get_renderer()
        fig.draw(renderer)
        page, labelled = fig.bbox, 0
        for ax in fig.axes:
            for axis in (ax.xaxis, ax.yaxis):
                ticks = [t for t in axis.get_ticklabels() if t.get_visible() and t.get_text()]
                texts = [t.get_text() for t in ticks]
                if not any(label in text for text in texts for label in labels[:1]):
                    continue  # the value axis
                labelled += 1
                assert all(any(label in text for text in texts) for label in labels)
                assert all(t.get_fontsize() >= 7 for t in ticks)
                boxes = [t.get_window_extent(renderer) for t in ticks]
                assert _overlaps(boxes) == []
                assert all(page.x0 <= b.x0 and b.x1 <= page.x1 and page.y0 <= b.y0 and b.y1 <= page.y1
                           for b in boxes)
        assert labelled >= 1
