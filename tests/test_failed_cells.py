"""A cell whose delegate failed reads as failed in every output of `dtb run` (the printed summary, report.md,
the HTML report, results.csv, results.json) and `inference-diff` refuses to compare when the delegate under
test did not run; a delegate that claimed no op is told apart from one that failed."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from runtime.cli.main import main
from runtime.interpreter.api import Interpreter
from runtime.report.render import render
from runtime.report.status import CellStatus, delegates_status, record_status

FAULTY = "tests.faulty_delegates"
EVERY_OP = "every op is supported"
# cell 0: the delegate fails while it is applied (TFLite restores the CPU plan); cell 1: the CPU alone;
# cell 2: Hexagon on a float model claims nothing, which is no failure
SCENARIO = ("device: pixel4\nmodel: {zoo: tiny_cnn, args: {resolution: 16}}\nruns: {warmup: 0, count: 2}\n"
            f"matrix:\n  delegates: [[external: {{path: '{FAULTY}:make_create_raises'}}], [], [hexagon: {{}}]]\n")
CAUSE = "FaultyDelegate create_kernel: RuntimeError: create_kernel broke"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One `dtb run` of SCENARIO: its output folder and what it printed."""
    folder = tmp_path_factory.mktemp("failed_cells")
    path = folder / "s.yaml"
    path.write_text(SCENARIO)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["run", str(path), "-o", str(folder / "out"), "--allow-external-delegates"])
    assert code == 0
    return folder / "out", out.getvalue()


def _sections(report: str) -> list[str]:
    """report.md's per-cell sections, in cell order."""
    return report.split("\n## ")[2:]


def test_results_json_gives_every_record_a_status(run):
    records = json.loads((run[0] / "results.json").read_text())["records"]
    assert [(r["status"], r["error"]) for r in records] == [("failed", CAUSE), ("ok", None), ("none_delegated", None)]


def test_results_csv_has_an_error_column(run):
    rows = list(csv.DictReader(io.StringIO((run[0] / "results.csv").read_text())))
    assert [row["error"] for row in rows] == [CAUSE, "", ""]


def test_summary_marks_the_failed_cell(run):
    lines = run[1].splitlines()
    assert lines[1].split()[-1] == "FAILED"             # not 0/7: the CPU's figures, not the delegate's
    assert lines[2].split()[-1] == "0/7" and lines[3].split()[-1] == "0/7"   # the CPU; Hexagon claimed nothing
    assert lines[4] == (f"FAILED delegates=external(path={FAULTY}:make_create_raises): {CAUSE}; the CPU ran "
                        f"instead, so its figures are the CPU's")
    assert sum("FAILED" in line for line in lines) == 2


def test_report_md_marks_the_failed_cell(run):
    report = (run[0] / "report.md").read_text()
    summary = [line for line in report.splitlines() if line.startswith("| delegates=")]
    head = next(line for line in report.splitlines() if line.startswith("| Label"))
    column = head.split(" | ").index("Delegated nodes")
    assert [row.split(" | ")[column] for row in summary] == ["FAILED", "0", "0"]
    failed, cpu, hexagon = _sections(report)
    assert f"FAILED: {CAUSE}. The delegates were removed and the CPU ran the model instead" in failed
    assert EVERY_OP not in failed and "Not known: the delegate failed" in failed
    assert "FAILED" not in cpu + hexagon and "CPU only: no delegate was applied." in cpu
    assert "Hexagon runs 8-bit (uint8/int8) models only" in hexagon   # claimed nothing, each op's reason


def test_html_report_marks_the_failed_cell(run):
    assert main(["report", str(run[0] / "results.json"), "--format", "html", "-o", str(run[0] / "r.html")]) == 0
    page = (run[0] / "r.html").read_text()
    assert "<td>FAILED</td>" in page and f"<p>FAILED: {CAUSE}. The delegates were removed" in page
    assert EVERY_OP not in page


def test_html_plots_label_the_failed_cell(run, monkeypatch):
    import runtime.report.render as render_module

    seen = []
    monkeypatch.setattr(render_module, "plot_images", lambda records, labels, trace: seen.extend(labels) or [])
    render(json.loads((run[0] / "results.json").read_text()), "html")
    assert seen == [f"delegates=external(path={FAULTY}:make_create_raises) (FAILED: the CPU ran)", "delegates=cpu",
                    "delegates=hexagon"]


def test_a_delegate_that_claims_nothing_is_not_said_to_support_every_op(run):
    record = json.loads((run[0] / "results.json").read_text())["records"][2]
    for d in record["delegates"]:
        d["unsupported"] = []   # a delegate that gives no reason (as one the phone lacks)
    report = render({"scenario": "s", "records": [record]}, "md")
    assert EVERY_OP not in report and "No op delegated: TfLiteHexagonDelegate claimed none of the 7 ops." in report


def test_a_record_without_status_is_read_from_its_delegates(run):
    """Cells an older run left in results.db have no status: the reports read it from the delegates."""
    records = json.loads((run[0] / "results.json").read_text())["records"]
    for r in records:
        del r["status"], r["error"]
    assert [record_status(r) for r in records] == [(CellStatus.FAILED, CAUSE), (CellStatus.OK, ""),
                                                   (CellStatus.NONE_DELEGATED, "")]
    assert "| FAILED |" in render({"records": records}, "md")


def test_an_unknown_status_is_refused(run):
    from runtime.ir.errors import TestbedError

    record = json.loads((run[0] / "results.json").read_text())["records"][1]
    with pytest.raises(TestbedError, match="record 0: key 'status' is not one of ok, none_delegated, failed: 'fine'"):
        render({"records": [{**record, "status": "fine"}]}, "md")


def test_the_cpu_fallback_after_a_failed_invoke_marks_every_delegate():
    """InvokeWithCPUFallback removes every delegate: the reports must not show them as running."""
    from runtime.measure.record import delegate_records
    from runtime.zoo import MODELS
    from tests.faulty_delegates import make_invoke_raises

    graph = MODELS["tiny_cnn"](resolution=16)
    it = Interpreter(graph=graph, experimental_delegates=[make_invoke_raises()], device="pixel4")
    it.allocate_tensors()
    it.set_tensor(graph.inputs[0], np.zeros(graph.tensors[graph.inputs[0]].shape, np.float32))
    assert delegates_status(delegate_records(it.simulation.delegation, ["external"])) == (CellStatus.OK, "")
    it.invoke_with_cpu_fallback()
    status, error = delegates_status(delegate_records(it.simulation.delegation, ["external"]))
    assert status is CellStatus.FAILED
    assert error == "removed after an invoke failed: FaultyDelegate invoke failed: RuntimeError: invoke broke"


# -- inference-diff ----------------------------------------------------------------------------------------


def _diff(capsys, *flags: str) -> tuple[int, str, str]:
    code = main(["inference-diff", "--zoo", "tiny_cnn", "--device", "pixel4", "--num_runs", "2", *flags])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("flags,why", [
    ((f"--external_delegate_path={FAULTY}:make_create_raises",), CAUSE),                     # failed: the CPU ran
    ((f"--external_delegate_path={FAULTY}:make_prepare_raises",), "FaultyDelegate prepare: RuntimeError"),
    (("--delegate", "hexagon"), "TfLiteHexagonDelegate claimed none of the 7 ops"),         # nothing delegated
    (("--use_hexagon",), "TfLiteHexagonDelegate claimed none of the 7 ops"),                # TFLite's own flag
    ((f"--external_delegate_path={FAULTY}:make_invoke_raises",), "FaultyDelegate invoke failed"),
])
def test_inference_diff_refuses_when_the_delegate_under_test_did_not_run(capsys, flags, why):
    code, out, err = _diff(capsys, *flags)
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err and why in err
    assert "avg_error" not in out          # no difference is printed as if the delegate had been compared
    if "invoke" not in why:
        assert "the delegate under test did not run" in err


def test_inference_diff_still_compares_a_delegate_that_ran_and_the_cpu(capsys):
    assert _diff(capsys, "--delegate", "gpu")[0] == 0
    assert _diff(capsys)[0] == 0      # no delegate: the CPU's threads against the single-thread reference
