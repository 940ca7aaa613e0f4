"""dtb benchmark / inference-diff / partition / list / supported-ops / run / report: TFLite's line
formats, run counts, delegation messages, op-profiling tables, JSON records and one-line errors."""

from __future__ import annotations

import io
import json
import os
import re

import pytest

from runtime.cli.main import main
from runtime.cli.common import cpp_float
from runtime.cli.profile_tables import Stat

MODELS = "tests/fixtures/models"
NUM = r"[-+0-9.e]+"
BAND = r"[0-9.]+ / [0-9.]+ \(\d+ \w+ rows\)"     # the fitted error band: median / p90 % (rows)


def run(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def fails(capsys, *argv: str) -> str:
    """The command exits 1 with exactly one stderr line and no traceback; returns that line."""
    assert main(list(argv)) == 1
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    return captured.err.strip()


# -- number formats ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value,text", [(1.96277e-05, "1.96277e-05"), (84364.24, "84364.2"), (12525.0, "12525"),
                                        (1e6, "1e+06"), (0.0, "0"), (870.557, "870.557"), (0.5, "0.5")])
def test_cpp_float_is_ostream_default(value, text):
    assert cpp_float(value) == text


@pytest.mark.parametrize("values,line", [
    ([], "count=0"),
    ([486], "count=1 curr=486"),
    ([486, 486, 486], "count=3 curr=486(all same)"),
    ([140706, 74599, 74599, 74599, 74599, 74599], "count=6 first=140706 curr=74599 min=74599 max=140706 "
                                                  "avg=85616.8 std=24636"),  # sd 24636.6, truncated
])
def test_stat_line_as_tflite_prints_it(values, line):
    assert Stat(values).line() == line


# -- benchmark ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("device", ["pixel4", "pixel3"])
def test_benchmark_lines_on_zoo_model(capsys, device):
    out = run(capsys, "benchmark", "--zoo", "tiny_cnn", "--device", device, "--use_gpu", "--warmup_runs", "2",
              "--num_runs", "3")
    lines = out.splitlines()
    assert lines[0].startswith(f"Simulated device: {device} (")
    assert re.fullmatch(r"The input model file size \(MB\): [0-9.e-]+", lines[lines.index(next(
        x for x in lines if x.startswith("The input model")))])
    assert re.search(rf"^Initialized session in {NUM}ms\.$", out, re.M)
    assert ("Explicitly applied GPU delegate, and the model graph will be completely executed by the delegate."
            in lines)
    runs = re.findall(r"^Running benchmark for at least (\d+) iterations and at least 0 seconds but terminate "
                      r"if exceeding 150 seconds\.$", out, re.M)
    assert runs == ["2", "3"]
    stat = r"count=(\d+) (?:first=\d+ curr=\d+ min=\d+ max=\d+ avg=[0-9.e+]+ std=\d+|curr=\d+(?:\(all same\))?)"
    assert [m.group(1) for m in re.finditer(rf"^{stat}$", out, re.M)] == ["2", "3"]
    m = re.search(rf"^Inference timings in us: Init: (\d+), First inference: (\d+), Warmup \(avg\): ({NUM}), "
                  rf"Inference \(avg\): ({NUM})$", out, re.M)
    assert m and int(m.group(1)) > 0 and int(m.group(2)) > 0 and float(m.group(4)) > 0
    assert re.search(rf"^Energy per inference \(mJ\): total={NUM} avg_power_w={NUM} peak_power_w={NUM}$", out, re.M)
    assert re.search(r"^Energy by rail per inference \(mJ\): .*gpu=", out, re.M)
    assert re.search(rf"^Partition boundary per inference: crossings=2 bytes={NUM} time_us={NUM} share={NUM}% "
                     rf"energy_mj={NUM}$", out, re.M)


def test_benchmark_partial_delegation_on_fixtures(capsys):
    out = run(capsys, "benchmark", "--graph", f"{MODELS}/lstm.tflite", "--device", "pixel3", "--use_gpu",
              "--num_runs", "2")
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM: Operation is not supported." in out
    assert ("Explicitly applied GPU delegate, and the model graph will be partially executed by the delegate "
            "w/ 1 delegate kernels.") in out
    assert "The input model file size (MB): 0.029016" in out  # the file's own size
    out = run(capsys, "benchmark", "--graph", f"{MODELS}/unet_style.tflite", "--device", "pixel4", "--use_nnapi",
              "--num_runs", "1")
    assert "partially executed by the delegate w/ 2 delegate kernels." in out


def test_benchmark_hexagon_on_float_model_delegates_nothing(capsys):
    out = run(capsys, "benchmark", "--zoo", "tiny_cnn", "--device", "pixel3", "--use_hexagon", "--num_runs", "1")
    assert "TfLiteHexagonDelegate delegate: 0 nodes delegated out of 7 nodes with 0 partitions." in out
    assert ("Though Hexagon delegate is explicitly applied, the model graph will not be executed by the delegate."
            in out)
    assert "Initialized session in 0ms." in out  # nothing to compile


def test_benchmark_int8_zoo_model_runs_on_hexagon(capsys, tmp_path):
    path = tmp_path / "r.json"
    out = run(capsys, "benchmark", "--zoo", "tiny_cnn", "--quantization", "int8", "--device", "pixel3",
              "--use_hexagon", "--num_runs", "1", "--output_json", str(path))
    # SimpleDelegate style counts the previewed partitions, SOFTMAX alone among them
    assert "TfLiteHexagonDelegate delegate: 5 nodes delegated out of 7 nodes with 2 partitions." in out
    record = json.loads(path.read_text())
    assert record["model"] == {"name": "tiny_cnn", "quantization": "int8", "nodes": 7}
    assert record["delegates"][0]["unsupported"][0]["name"] == "FULLY_CONNECTED"
    assert record["delegates"][0]["partitions"] == 1


def _rows(out: str, title: str) -> list[list[str]]:
    block = out.split(f"============================== {title} ==============================\n")[1]
    rows = []
    for line in block.splitlines()[1:]:
        if not line:
            break
        rows.append(line.split("\t")[1:])
    return rows


def test_op_profiling_tables_show_delegate_as_one_node(capsys):
    out = run(capsys, "benchmark", "--graph", f"{MODELS}/lstm.tflite", "--device", "pixel4", "--use_gpu",
              "--num_runs", "3", "--enable_op_profiling")
    assert "Operator-wise Profiling Info for Regular Benchmark Runs:" in out
    header = ("\t             [node type]\t          [start]\t  [first]\t [avg ms]\t     [%]\t  [cdf%]\t"
              "  [mem KB]\t[times called]\t[Name]")
    assert out.count(header + "\n") == 2
    order = _rows(out, "Run Order")
    assert [r[0].strip() for r in order] == ["UNIDIRECTIONAL_SEQUENCE_LSTM", "TfLiteGpuDelegateV2"]
    assert order[1][-1].endswith("]:2")  # delegate nodes are numbered after the model's 2 ops
    assert order[-1][5].strip() == "100.000%" and all(r[7].strip() == "1" for r in order)
    inference_us = float(re.search(rf"Inference \(avg\): ({NUM})", out).group(1))
    assert sum(float(r[3]) for r in order) * 1000 == pytest.approx(inference_us, abs=len(order) + 1)
    top = _rows(out, "Top by Computation Time")
    assert [float(r[3]) for r in top] == sorted((float(r[3]) for r in top), reverse=True)
    by_type = _rows(out, "Summary by node type")
    assert {r[0].strip() for r in by_type} == {"UNIDIRECTIONAL_SEQUENCE_LSTM", "TfLiteGpuDelegateV2"}
    assert "Number of nodes executed: 2" in out and "2 nodes observed" in out
    assert re.search(r"^Timings \(microseconds\): count=3 ", out, re.M)


def test_run_counts_and_min_secs_in_simulated_time(capsys, tmp_path):
    path = tmp_path / "r.json"
    run(capsys, "benchmark", "--zoo", "tiny_cnn", "--warmup_runs", "0", "--num_runs", "4", "--output_json", str(path))
    record = json.loads(path.read_text())
    assert (record["warmup"], record["runs"], record["latency_ms"]["count"]) == (0, 4, 4)
    out = run(capsys, "benchmark", "--zoo", "tiny_cnn", "--use_gpu", "--num_runs", "1", "--min_secs", "0.002")
    avg_us = float(re.search(rf"Inference \(avg\): ({NUM})", out).group(1))
    count = int(re.findall(r"^count=(\d+)", out, re.M)[1])
    assert (count - 1) * avg_us < 2000 <= count * (avg_us + 1)  # every run takes the same simulated time


def test_two_delegates_are_announced_and_applied_in_flag_order(capsys):
    out = run(capsys, "benchmark", "--zoo", "tiny_cnn", "--quantization", "int8", "--device", "pixel4",
              "--use_hexagon", "--use_gpu", "--num_runs", "1")
    assert "Going to apply 2 delegates one after another." in out
    assert out.index("Explicitly applied Hexagon") < out.index("Explicitly applied GPU")


def test_output_json_is_valid_atomic_and_deterministic(capsys, tmp_path):
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for path in paths:
        run(capsys, "benchmark", "--zoo", "tiny_cnn", "--use_gpu", "--num_runs", "2", "--output_json", str(path),
            "--trace", str(tmp_path / "trace.json"))
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json", "trace.json"]  # no temp files
    umask = os.umask(0)
    os.umask(umask)
    assert paths[0].stat().st_mode & 0o777 == 0o666 & ~umask
    record = json.loads(paths[0].read_text())
    for key in ("scenario", "label", "cell", "device", "model", "threads", "streams", "warmup", "runs",
                "timing_only", "delegates", "placement", "latency_ms", "init_ms", "boundary", "energy", "per_op",
                "footprint_bytes", "output_diff", "log"):
        assert key in record
    assert record["delegates"][0]["name"] == "TfLiteGpuDelegateV2" and set(record["placement"]) == set(
        map(str, range(7)))
    assert record["output_diff"][0]["output"] == "probabilities" and record["output_diff"][0]["avg_error"] > 0
    assert record["log"][-1].startswith("Replacing 7 out of 7 node(s)")
    assert json.loads((tmp_path / "trace.json").read_text())["traceEvents"]


def test_timing_only_record_has_no_output_diff(capsys, tmp_path):
    path = tmp_path / "r.json"
    run(capsys, "benchmark", "--zoo", "tiny_cnn", "--num_runs", "1", "--timing_only", "--output_json", str(path))
    record = json.loads(path.read_text())
    assert record["timing_only"] is True and record["output_diff"] == []


# -- inference-diff ----------------------------------------------------------------------------------


def _diff_lines(out: str, runs: int) -> list[tuple[float, float]]:
    assert f"Num evaluation runs: {runs}\n" in out
    for who in ("Reference", "Test"):
        assert re.search(rf"^{who} run latency: avg={NUM}\(us\), std_dev=\d+\(us\)$", out, re.M)
    return [(float(a), float(s)) for a, s in re.findall(rf"^OutputDiff\[\d+\]: avg_error=({NUM}), "
                                                       rf"std_dev=({NUM})$", out, re.M)]


def test_inference_diff_gpu_fp16_has_a_real_difference(capsys):
    out = run(capsys, "inference-diff", "--zoo", "tiny_cnn", "--device", "pixel4", "--delegate", "gpu",
              "--num_runs", "4")
    [(avg, std)] = _diff_lines(out, 4)
    assert 0 < avg < 1e-2 and std >= 0
    assert "Replacing 7 out of 7 node(s) with delegate (TfLiteGpuDelegateV2)" in out
    out = run(capsys, "inference-diff", "--zoo", "tiny_cnn", "--device", "pixel4", "--delegate", "gpu",
              "--num_runs", "4", "--gpu_precision_loss_allowed=false")
    [(avg32, _)] = _diff_lines(out, 4)
    assert avg32 < avg


def test_inference_diff_on_fixture_and_cpu(capsys):
    out = run(capsys, "inference-diff", "--graph", f"{MODELS}/lstm.tflite", "--device", "pixel3", "--delegate",
              "gpu", "--num_runs", "2")
    assert len(_diff_lines(out, 2)) == 1
    out = run(capsys, "inference-diff", "--zoo", "tiny_cnn", "--num_runs", "2")
    assert _diff_lines(out, 2) == [(0.0, 0.0)]  # the CPU against itself


# -- partition ---------------------------------------------------------------------------------------


def test_partition_lists_every_op_with_place_and_reasons(capsys):
    # the Pixel 3 as it shipped, on Android 9 (its profile stands for Android 10, as TFLite measured it)
    out = run(capsys, "partition", "--graph", f"{MODELS}/unet_style.tflite", "--device", "pixel3", "--api_level", "28",
              "--use_nnapi")
    rows = re.findall(r"^ +(\d+)  (\S+) .* (CPU|TfLiteNnapiDelegate partition \d)$", out, re.M)
    assert [int(r[0]) for r in rows] == list(range(14))
    cpu = [r[1] for r in rows if r[2] == "CPU"]
    assert cpu == ["TRANSPOSE_CONV", "RESIZE_BILINEAR"]
    assert "        not on TfLiteNnapiDelegate: Needs Android API level 29 (NNAPI 1.2) or newer." in out
    assert {r[2] for r in rows} >= {"TfLiteNnapiDelegate partition 0", "TfLiteNnapiDelegate partition 2"}
    log = out.split("Delegation log:\n")[1]
    assert log.startswith("TfLiteNnapiDelegate delegate: 12 nodes delegated out of 14 nodes with 3 partitions.")


def test_partition_explains_declined_partitions(capsys):
    out = run(capsys, "partition", "--graph", f"{MODELS}/unet_style.tflite", "--device", "pixel3", "--api_level", "28",
              "--use_nnapi", "--max_delegated_partitions=1")
    assert "is not among the 1 largest (max_delegated_partitions)" in out
    out = run(capsys, "partition", "--zoo", "tiny_cnn", "--quantization", "int8", "--device", "pixel3",
              "--use_hexagon")
    assert re.search(r"^   6  SOFTMAX .* CPU\n        not on TfLiteHexagonDelegate: supported, but its partition of "
                     r"1 node\(s\) is below min_nodes_per_partition \(2\)$", out, re.M)
    out = run(capsys, "partition", "--zoo", "tiny_cnn", "--device", "pixel4", "--use_hexagon")
    assert out.count("not on TfLiteHexagonDelegate:") == 7 and "0 of 7 ops delegated, 7 on the CPU" in out


# -- list, supported-ops -----------------------------------------------------------------------------


def test_list_everything(capsys):
    assert re.search(r"^pixel4 +Google Pixel 4", run(capsys, "list", "devices"), re.M)
    out = run(capsys, "list", "delegates")
    assert re.search(r"^gpu +TfLiteGpuDelegateV2 +--use_gpu +is_precision_loss_allowed=True", out, re.M)
    assert re.search(r"^coreml +TfLiteCoreMlDelegate", out, re.M)
    assert "tiny_cnn(resolution=32" in run(capsys, "list", "models")
    ops = run(capsys, "list", "ops")
    assert re.search(r"^CONV_2D +float, 8-bit, hybrid$", ops, re.M)
    assert re.search(r"^SKIP_GRAM +no kernel: works on string tensors", ops, re.M)
    assert re.search(r"^Convolution2DTransposeBias +custom op \(the GPU delegate takes it\)$", ops, re.M)
    from runtime.ir.optypes import OpType
    assert sum(1 for line in ops.splitlines() if line.split()[0] in OpType.__members__) == len(OpType)


def test_supported_ops_table(capsys):
    out = run(capsys, "supported-ops", "--delegate", "gpu")
    assert out.startswith("| op | gpu |\n|---|---|\n") and "| CONV_2D |" in out
    assert run(capsys, "supported-ops").startswith("| op | gpu | hexagon | coreml | nnapi |")
    # A delegate named twice was two identical columns.
    assert run(capsys, "supported-ops", "--delegate", "gpu", "--delegate", "qnn", "--delegate", "gpu").startswith(
        "| op | gpu | qnn |\n|---|---|---|\n")


# -- errors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv,message", [
    (["benchmark", "--graph", "missing.tflite"], "dtb benchmark: error: cannot read model file missing.tflite"),
    (["benchmark", "--zoo", "tiny_cnn", "--device", "pixel9"], "dtb benchmark: error: unknown profile 'pixel9'"),
    (["benchmark", "--zoo", "tiny_cnn", "--use_gpu", "--gpu_backend", "vulkan"],
     "dtb benchmark: error: --gpu_backend must be one of cl, gl, not 'vulkan'"),
    (["benchmark", "--zoo", "tiny_cnn", "--zoo_args", "depth=3"], "has no argument 'depth'"),
    (["benchmark", "--zoo", "tiny_cnn", "--zoo_args", "resolution"], "--zoo_args: 'resolution' is not key=value"),
    (["benchmark", "--zoo", "resnet9000"], "unknown zoo model 'resnet9000'"),
    (["benchmark"], "give exactly one of --graph FILE.tflite or --zoo NAME"),
    (["benchmark", "--zoo", "tiny_cnn", "--num_runs", "0"], "no regular run: give --num_runs or --min_secs"),
    (["benchmark", "--zoo", "tiny_cnn", "--use_hexagon", "--require_full_delegation"],
     "dtb benchmark: error: Disallowed CPU fallback detected."),
    (["benchmark", "--zoo", "tiny_cnn", "--output_json", "no/such/dir/r.json"], "cannot write no/such/dir/r.json"),
    (["inference-diff", "--zoo", "tiny_cnn", "--delegate", "tpu"], "dtb inference-diff: error: --delegate must be"),
    (["partition", "--zoo", "tiny_cnn", "--use_nnapi", "--nnapi_execution_preference", "fastest"],
     "dtb partition: error: --nnapi_execution_preference must be one of"),
    (["report", "missing.json"], "dtb report: error: missing.json: no such results file"),
])
def test_user_errors_are_one_line(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    assert message in fails(capsys, *argv)
    assert not any(tmp_path.iterdir())  # nothing half-written


def test_unknown_flag_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["benchmark", "--zoo", "tiny_cnn", "--use_tpu"])
    assert exc.value.code == 2
    assert "dtb benchmark: error: unrecognized arguments: --use_tpu" in capsys.readouterr().err


def test_inference_diff_runs_are_bounded_as_benchmarks_are(capsys):
    # unbounded before: --num_runs 99999999999 ran for ever, keeping every run's latency and trace
    with pytest.raises(SystemExit) as exc:
        main(["inference-diff", "--zoo", "tiny_cnn", "--num_runs", "10001"])
    assert exc.value.code == 2
    assert "dtb inference-diff: error: argument --num_runs: must be at most 10000" in capsys.readouterr().err


# -- run, report -------------------------------------------------------------------------------------

SCENARIO = """\
description: tiny CNN, CPU vs GPU
device: pixel4
model:
  zoo: tiny_cnn
runs: {warmup: 1, count: 2}
matrix:
  delegates:
    - []
    - [gpu: {}]
"""


@pytest.fixture
def scenario(tmp_path):
    pytest.importorskip("runtime.sweep.runner")
    path = tmp_path / "tiny.yaml"
    path.write_text(SCENARIO)
    return path


def test_run_prints_a_summary_per_cell(capsys, tmp_path, scenario):
    out = run(capsys, "run", str(scenario), "-o", str(tmp_path / "out"))
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["label", "latency"]
    assert re.fullmatch(rf"delegates=cpu +{NUM} +{BAND} +0\.0 +{NUM} +0/7", lines[1]), lines[1]
    assert re.fullmatch(rf"delegates=gpu +{NUM} +{BAND} +{NUM} +{NUM} +7/7", lines[2]), lines[2]
    assert json.loads((tmp_path / "out" / "results.json").read_text())["records"]
    err = capsys.readouterr().err   # no progress bar when stderr is not a terminal; tiny_cnn is unlike the
    assert all("figures were fitted to:" in ln for ln in err.splitlines()), err   # fitted rows: a warning says so


def test_run_shows_progress_on_a_terminal(capsys, tmp_path, scenario, monkeypatch):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    monkeypatch.setattr("sys.stderr", tty)
    run(capsys, "run", str(scenario), "-o", str(tmp_path / "out"))
    assert "\r" in tty.getvalue() and "2/2 [" in tty.getvalue() and "cell/s" in tty.getvalue()   # tqdm's bar


def test_report_renders_results(capsys, tmp_path, scenario):
    pytest.importorskip("runtime.report.render")
    run(capsys, "run", str(scenario), "-o", str(tmp_path / "out"))
    results = str(tmp_path / "out" / "results.json")
    assert "delegates=gpu" in run(capsys, "report", results)
    target = tmp_path / "r.csv"
    assert run(capsys, "report", results, "--format", "csv", "-o", str(target)) == f"wrote {target}\n"
    assert target.read_text().startswith("scenario,label")
    (tmp_path / "bad.json").write_text("{not json")
    assert "bad.json: not JSON" in fails(capsys, "report", str(tmp_path / "bad.json"))


def test_report_output_is_checked_before_it_replaces_anything(capsys, tmp_path, scenario):
    """-o is written beside and renamed over: a FIFO or device there would be replaced by the report, the
    results file itself overwritten by its own rendering, and an empty name taken for stdout."""
    pytest.importorskip("runtime.report.render")
    run(capsys, "run", str(scenario), "-o", str(tmp_path / "out"))
    results = tmp_path / "out" / "results.json"
    before = results.read_bytes()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert fails(capsys, "report", str(results), "-o", str(fifo)) == \
        f"dtb report: error: cannot write {fifo}: it is a FIFO, not a regular file"
    for same in (results, tmp_path / "out" / ".." / "out" / "results.json"):
        assert "it is the results file being rendered" in fails(capsys, "report", str(results), "-o", str(same))
    assert "it is the results file being rendered" in fails(capsys, "report", str(tmp_path / "out" / "results.db"),
                                                            "-o", str(tmp_path / "out" / "results.db"))
    assert "cannot write to an empty file name" in fails(capsys, "report", str(results), "-o", "")
    assert fifo.is_fifo() and results.read_bytes() == before


@pytest.mark.parametrize("text, words", [
    ("device: pixel3\nmodel: {zoo: tiny_cnn\n", "invalid YAML"),
    ("device: pixel3\nmodel: {zoo: tiny_cnn}\ndelegates: [warp: {}]\n", "warp"),
    ("device: pixel9\nmodel: {zoo: tiny_cnn}\n", "pixel9"),
    ("device: pixel3\nmodel: {path: missing.tflite}\n", "missing.tflite"),
    ("device: pixel3\nmodel: {zoo: tiny_cnn}\nmatrix:\n  turbo: [1, 2]\n", "turbo"),
    ("device: pixel3\nmodel: {zoo: tiny_cnn}\nmatrix:\n  delegates: [[], [gpu: {warp: 1}]]\n", "warp"),
])
def test_a_broken_scenario_exits_1_with_one_line_and_writes_nothing(capsys, tmp_path, text, words):
    scenario = tmp_path / "broken.yaml"
    scenario.write_text(text)
    line = fails(capsys, "run", str(scenario), "-o", str(tmp_path / "out"))
    assert "broken.yaml" in line and words in line
    assert not (tmp_path / "out").exists()


def test_report_reads_a_benchmark_output_json(capsys, tmp_path):
    path = tmp_path / "bench.json"
    run(capsys, "benchmark", "--zoo", "tiny_cnn", "--zoo_args", "resolution=16", "--use_gpu", "--num_runs", "2",
        "--output_json", str(path))
    out = run(capsys, "report", str(path))
    assert out.startswith("# Delegate Testbed report: dtb benchmark\n") and "| gpu | pixel4 | gpu |" in out
    assert "TfLiteGpuDelegateV2" in run(capsys, "report", str(path), "--format", "html")
    assert run(capsys, "report", str(path), "--format", "csv").startswith("scenario,label")


@pytest.mark.parametrize("text, words", [
    ('{"traceEvents": [], "displayTimeUnit": "ms"}', "not a results file"),
    ('{"scenario": "x.yaml", "files": {}}', "not a results file"),
    ("[1, 2]", "not a results file"),
    ('{"schema": 1, "scenario": "x", "records": [{"device": "pixel4"}]}', "record 0: missing key"),
    ("scenario,label\n", "not JSON"),
    ("[" * 100_000, "not JSON"),
])
def test_report_names_a_file_it_cannot_read(capsys, tmp_path, text, words):
    path = tmp_path / "odd.json"
    path.write_text(text)
    line = fails(capsys, "report", str(path))
    assert line.startswith(f"dtb report: error: {path}: ") and words in line


# -- delegate flags in --help ------------------------------------------------------------------------


def _help_sections(text: str) -> dict[str, str]:
    """argparse's help as {group title: its lines}."""
    sections, title = {}, ""
    for line in text.splitlines():
        if line and not line[0].isspace() and line.endswith(":"):
            title = line[:-1]
            sections[title] = ""
        elif title:
            sections[title] += line + "\n"
    return sections


@pytest.mark.parametrize("command", ["benchmark", "inference-diff", "partition"])
def test_help_lists_delegate_flags_in_a_group_per_provider(capsys, command):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    sections = _help_sections(capsys.readouterr().out)
    expected = {"GPU": ["--use_gpu", "--gpu_precision_loss_allowed", "--gpu_backend"],
                "Hexagon": ["--use_hexagon", "--hexagon_profiling"],
                "NNAPI": ["--use_nnapi", "--nnapi_accelerator_name", "--disable_nnapi_cpu"],
                "Core ML": ["--use_coreml", "--coreml_version"],
                "External delegate": ["--external_delegate_path", "--external_delegate_options"]}
    for title, flags in expected.items():
        assert title in sections, f"no '{title}' group in {sorted(sections)}"
        for flag in flags:
            assert re.search(rf"^\s+{flag}\b", sections[title], re.M), f"{flag} not under {title}"
    from delegates.registry import flag_table

    shown = "".join(sections.values())
    for name, *_ in flag_table():
        assert len(re.findall(rf"^\s+--{name}\b", shown, re.M)) == 1, name


def test_delegate_flags_parse_as_before_with_the_help_groups(capsys):
    out = run(capsys, "partition", "--zoo", "tiny_cnn", "--use_gpu", "false", "--use_nnapi",
              "--nnapi_accelerator_name=qti-dsp", "--max_delegated_partitions", "1", "--device", "pixel4")
    assert "delegates: TfLiteNnapiDelegate" in out
    with pytest.raises(SystemExit) as exc:
        main(["partition", "--zoo", "tiny_cnn", "--use_gpu", "maybe"])
    assert exc.value.code == 2 and "unrecognized arguments: maybe" in capsys.readouterr().err


def _int_and_bool_outputs(path) -> None:
    """x (float32 [2, 8]) -> ARG_MAX over the last axis (int32 [2]) and x > 0.5 (bool [2, 8])."""
    import numpy as np

    from runtime.ir.graph import DType, Graph, Op, Tensor
    from runtime.ir.optypes import OpType
    from runtime.ir.options import ArgMaxOptions
    from runtime.model.tflite_write import save

    tensors = (Tensor("x", (2, 8), DType.FLOAT32), Tensor("axis", (1,), DType.INT32, data=np.array([1], np.int32)),
               Tensor("index", (2,), DType.INT32), Tensor("half", (1,), DType.FLOAT32, data=np.array([0.5], np.float32)),
               Tensor("above", (2, 8), DType.BOOL))
    ops = (Op(OpType.ARG_MAX, (0, 1), (2,), ArgMaxOptions(DType.INT32.code)), Op(OpType.GREATER, (0, 3), (4,)))
    save(Graph(tensors, ops, (0,), (2, 4)), path)


def test_inference_diff_compares_integer_and_boolean_outputs_by_exact_match(tmp_path, capsys):
    path = tmp_path / "ints.tflite"
    _int_and_bool_outputs(path)
    out = run(capsys, "inference-diff", "--graph", str(path), "--device", "pixel4", "--num_runs", "3")
    assert "OutputDiff[0]: exact_match=true, mismatched_elements=0 of 6 (0.0000%), runs_with_mismatch=0 of 3" in out
    assert "OutputDiff[1]: exact_match=true, mismatched_elements=0 of 48 (0.0000%), runs_with_mismatch=0 of 3" in out


def test_output_mismatches_count_the_elements_and_runs_that_differ():
    import numpy as np

    from runtime.cli.tools import OutputMismatches

    m = OutputMismatches()
    m.add(np.array([1, 2, 3, 4], np.int32), np.array([1, 2, 3, 4], np.int32))
    m.add(np.array([True, False, True, False]), np.array([True, True, True, True]))
    assert (m.differ, m.elements, m.runs_differing) == (2, 8, 1)
    assert m.line(3, 2) == "OutputDiff[3]: exact_match=false, mismatched_elements=2 of 8 (25.0000%), runs_with_mismatch=1 of 2"


def test_inference_diff_shows_its_runs_on_a_terminal_once_two_seconds_pass(capsys, monkeypatch):
    import itertools

    from runtime.report import progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    argv = ["inference-diff", "--zoo", "tiny_cnn", "--zoo_args", "resolution=16", "--num_runs", "6"]
    plain = run(capsys, *argv)
    tty, ticks = Tty(), itertools.count()
    monkeypatch.setattr("sys.stderr", tty)
    monkeypatch.setattr(progress, "_clock", lambda: next(ticks) * 1.0)   # a host second between runs
    assert run(capsys, *argv) == plain
    assert re.search(r"\b\d+/6 \[", tty.getvalue()) and "run" in tty.getvalue()


@pytest.mark.parametrize("argv, warning", [
    (["--device", "pixel3", "--use_hexagon", "--max_delegated_partitions=100"],
     "dtb benchmark: warning: Hexagon delegate: cannot have this many 100 partitions, and will cap to at most 16 "
     "partitions."),
    (["--device", "pixel3", "--api_level", "28", "--use_nnapi", "--nnapi_accelerator_name=qti-dsp"],
     "dtb benchmark: warning: accelerator_name 'qti-dsp' ignored: device selection needs Android API level 29"),
    (["--device", "pixel4", "--gpu_backend=gl"], "dtb benchmark: warning: --gpu_backend has no effect: --use_gpu is not on"),
])
def test_a_delegate_option_that_changes_nothing_says_so(capsys, argv, warning):
    """The delegates kept these warnings but nothing printed them: the option was dropped silently."""
    assert main(["benchmark", "--zoo", "tiny_cnn", "--num_runs", "1", "--warmup_runs", "0", *argv]) == 0
    assert warning in capsys.readouterr().err
