"""dtb calibrate: measurement files, the shipped profiles as its output, and recovering known factors."""

from __future__ import annotations

import contextlib
import dataclasses
import io
from pathlib import Path

import pytest
import yaml

from runtime.cli import calibrate as calibrate_cli
from runtime.cli import main as cli
from runtime.calibration.fit import fit
from runtime.cli.calibrate import fmt, calibrate_files, render_profile
from runtime.ir.errors import ScenarioError
from runtime.calibration.files import read_measurements
from runtime.calibration.rows import MeasurementError, model_key, read_csv, read_log
from runtime.ir.yamlcheck import parse
from sim.profile import PROFILE_DIR, load_profile

MEASUREMENTS = PROFILE_DIR / "measurements"
HEADER = "model,args,quantization,device,delegate,threads,latency_ms\n"


# -- reading measurements ---------------------------------------------------------------------------

def test_csv_rows_and_their_errors_name_file_and_line():
    rows = read_csv(HEADER + "mobilenet_v1,alpha=0.25;resolution=128,uint8,pixel3,nnapi,4,2.0\n", "m.csv")
    assert rows[0].args == (("alpha", 0.25), ("resolution", 128)) and rows[0].quantization == "uint8"
    assert rows[0].source == "m.csv:2"
    bad = {"gpu2": "delegate", "-1": "latency_ms", "nan": "latency_ms"}
    for value, key in bad.items():
        line = f"mobilenet_v1,,none,pixel3,{value if key == 'delegate' else 'gpu'},4," \
               f"{value if key == 'latency_ms' else '1.0'}\n"
        with pytest.raises(MeasurementError, match=f"m.csv:2: {key}"):
            read_csv(HEADER + line, "m.csv")
    with pytest.raises(MeasurementError, match="m.csv:1: missing column"):
        read_csv("model,latency_ms\nx,1\n", "m.csv")


def test_every_shipped_measurement_file_reads():
    for path in MEASUREMENTS.glob("*.csv"):
        rows = read_measurements(path)
        assert rows and {r.device for r in rows} == {path.stem}


def _benchmark_log(device: str, *flags: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["benchmark", "--device", device, "--num_runs", "1", "--warmup_runs", "0", *flags]) == 0
    return out.getvalue()


def test_a_benchmark_log_reads_back_as_the_row_it_measured():
    log = _benchmark_log("pixel4", "--zoo", "mobilenet_v1", "--zoo_args", "alpha=0.25,resolution=96",
                         "--num_threads", "2", "--use_gpu=true", "--enable_op_profiling=true")
    log += _benchmark_log("pixel4", "--zoo", "tiny_cnn", "--num_threads", "1")
    log += _benchmark_log("pixel4", "--zoo", "mobilenet_v1", "--zoo_args", "alpha=0.25,resolution=96",
                          "--quantization", "uint8", "--num_threads", "4")
    first, second, third = read_log(log, "run.log")
    assert (first.model, first.args, first.delegate, first.threads) == \
        ("mobilenet_v1", (("alpha", 0.25), ("resolution", 96)), "gpu", 2)
    assert first.per_type and second.per_type == () and second.delegate == "cpu"
    # a quantized zoo model's row says so (the known-factor round trips measure saved files instead)
    assert (third.model, third.args, third.quantization, third.threads) == \
        ("mobilenet_v1", (("alpha", 0.25), ("resolution", 96)), "uint8", 4)
    assert first.quantization == second.quantization == "none"
    with pytest.raises(MeasurementError, match="not a benchmark_model log"):
        read_log("hello\n", "x.log")


# -- the shipped profiles are the fits of the shipped measurements -------------------------------------

@pytest.fixture(scope="module")
def file_graphs() -> dict[tuple, object]:
    """Graphs of the models this module's refits read, by measurement folder and model. The five Snapdragon
    phones' rows name 44 distinct rebuilt AI Hub files over 185 rows, and decompressing and reading
    one takes up to seconds: each is read once here. A Graph is frozen, and the Evaluator already shares
    one among all rows of a model. Module scope: the graphs (gigabytes of float weights) are let go
    when the module's tests are done."""
    return {}


@pytest.fixture
def models_read_once(monkeypatch, file_graphs):
    """calibrate_files building each model once per module: row_models itself reads every file the
    first time it is asked (so its loading is what the refits test), later phones' rows get that Graph."""
    real = calibrate_cli.row_models

    def row_models(row):
        # a row's relative model path is relative to its measurement file's folder
        key = (Path(row.source.rsplit(":", 1)[0]).resolve().parent, model_key(row))
        if key not in file_graphs:
            file_graphs[key] = real(row)
        return file_graphs[key]

    monkeypatch.setattr(calibrate_cli, "row_models", row_models)
    return file_graphs


@pytest.mark.parametrize("phone", ["pixel3", "pixel4", "iphone_xs", "galaxy_s23", "galaxy_s24", "sd8_elite_qrd",
                                   "sd8_elite_gen5_qrd", "sd7_gen4_qrd"])
def test_refitting_gives_the_shipped_profile(phone, models_read_once):
    rows, (data, lines, text, path), evaluator, params = calibrate_files([str(MEASUREMENTS / f"{phone}.csv")], phone)
    assert path == PROFILE_DIR / "priors" / f"{phone}.yaml"       # a calibrated profile starts from its prior
    result = fit(evaluator, params)
    shipped_text = (PROFILE_DIR / f"{phone}.yaml").read_text()
    shipped, shipped_lines = parse(shipped_text, "shipped", ValueError)
    for k, (p, value) in enumerate(zip(result.params, result.values)):
        got = shipped
        for key in p.path:
            got = got[key]
        # to four digits, what the profile shows of every number under 10,000: a least-squares fit's
        # last digits follow the order of its floating-point sums and the BLAS / LAPACK kernel, and
        # along a flat direction (a rate and an efficiency that multiply) a rate written in full
        # (93530.119937) moves in its fifth digit from one kernel to another (seen: 3.7e-5)
        assert got == pytest.approx(float(fmt(value)), rel=1e-4), p.name
        # "fitted" only where a row moved with the number; the others keep the prior's line
        comment = shipped_text.splitlines()[shipped_lines[p.path] - 1].split("#", 1)[1].strip()
        assert comment.startswith("fitted") == result.is_informed(k), p.name
    assert shipped["calibration"]["rows"] == len(rows)
    load_profile(phone)   # and it is a valid profile


def test_every_rebuilt_model_runs_on_the_galaxy_s24_as_ai_hub_runs_it(models_read_once, capsys):
    """Every rebuilt AI Hub model of the calibration rows, float and w8a8, through the QNN delegate
    then the GPU delegate (`dtb benchmark --use_qnn=true --use_gpu=true`'s plan: the same flags,
    parsed the same way), one timing-only inference on the Galaxy S24; the graphs are the refits'."""
    from delegates.registry import parse_flags
    from runtime.interpreter.api import Interpreter

    phone = load_profile("galaxy_s24")
    rows = read_measurements(MEASUREMENTS / "galaxy_s24.csv")
    assert {r.model.rsplit("_", 1)[1] for r in rows} == {"float.tflite.xz", "w8a8.tflite.xz"}
    for row in {model_key(r): r for r in rows}.values():
        delegates, rest = parse_flags(["--use_qnn=true", "--use_gpu=true"], phone)
        assert not rest
        it = Interpreter(graph=calibrate_cli.row_models(row), experimental_delegates=delegates, device=phone,
                         num_threads=4, timing_only=True)
        it.allocate_tensors()
        it.invoke()
        assert it.simulation.soc.trace.inferences, row.model
    capsys.readouterr()
    assert cli.main(["benchmark", "--graph", str(MEASUREMENTS / "aihub" / "resnet18_w8a8.tflite.xz"),   # and the
                     "--device", "galaxy_s24", "--use_qnn=true", "--use_gpu=true", "--timing_only",   # command
                     "--num_runs", "1", "--warmup_runs", "0"]) == 0                                   # on one
    out = capsys.readouterr().out
    assert "TfLiteQnnDelegate delegate: 40 nodes delegated out of 40 nodes" in out and "Inference timings" in out


def test_render_replaces_values_in_place_and_keeps_the_rest():
    rows, (data, lines, text, path), evaluator, params = calibrate_files([str(MEASUREMENTS / "iphone_xs.csv")],
                                                                      "iphone_xs")
    result = fit(evaluator, params, max_nfev=2)
    out = render_profile(text, lines, result, "m.csv", "priors/iphone_xs.yaml")
    assert len(out.splitlines()) == len(text.splitlines()) + 5
    data2, _ = parse(out, "x", ValueError)
    assert data2["calibration"]["prior"] == "priors/iphone_xs.yaml"
    assert "# fitted: m.csv (5 rows)" in out
    # a number no row moves is written as the prior had it: value and comment
    kept = render_profile(text, lines, dataclasses.replace(result, informed=(False,) * len(result.params)), "m.csv",
                          "priors/iphone_xs.yaml")
    assert "# fitted: m.csv" not in kept
    header = ("# The prior of a calibrated profile", "# Calibrated:")   # the one line that says which it is
    assert [ln for ln in kept.splitlines()[:len(text.splitlines())] if not ln.startswith(header)] == \
        [ln for ln in text.splitlines() if not ln.startswith(header)]


def test_a_number_no_row_moves_is_kept_at_its_prior_and_not_called_fitted():
    rows, (data, lines, text, path), evaluator, params = calibrate_files([str(MEASUREMENTS / "iphone_xs.csv")],
                                                                      "iphone_xs")
    cpu = [k for k, r in enumerate(rows) if r.delegate == "cpu" and r.quantization == "none"]
    result = fit(evaluator, params, cpu, max_nfev=3)
    by_name = {p.name: k for k, p in enumerate(result.params)}
    assert result.is_informed(by_name["units.cpu_big.efficiency.conv"])
    # the CPU's float rows run no int8 op: its int8 rate moves none of them
    k = by_name["units.cpu_big.gmacs.int8"]
    assert not result.is_informed(k) and result.values[k] == result.params[k].prior


def test_a_number_fitted_onto_an_end_of_its_range_is_reported_as_such(capsys):
    from runtime.calibration.evaluate import Param
    from runtime.calibration.fit import Fit

    params = tuple(Param(("units", "dsp", "efficiency", name), 0.2, 0.025, 1.0, "dsp")
                   for name in ("pool", "transcendental", "conv", "depthwise"))
    # pool pinned at its cap, transcendental at its floor, conv inside, depthwise moved by no row
    result = Fit(params, (1.0, 0.025, 0.5, 0.025), (), (), 1, (True, True, True, False))
    assert [result.bound_hit(k) for k in range(4)] == ["upper", "lower", None, None]
    calibrate_cli._print_params(result)
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert "at its upper bound (1): the rows ask for more" in lines["units.dsp.efficiency.pool"]
    assert "at its lower bound (0.025): the rows ask for less" in lines["units.dsp.efficiency.transcendental"]
    assert "bound" not in lines["units.dsp.efficiency.conv"]
    assert "no row moves it" in lines["units.dsp.efficiency.depthwise"]


# -- round trip: known factors in, the same factors out ------------------------------------------------

# Whole-model latencies pin what most of the time depends on: the CPU's conv efficiency and its
# int8 rate. The op profiler's per-type tables also pin the depthwise efficiency (depthwise layers
# are a small share of the total) and the per-op fixed cost, which otherwise trades off against
# the fork/join cost. (On the GPU, conv efficiency and occupancy trade off on whole-model figures.)
FACTORS = {("units", "cpu_big", "efficiency", "conv"): 1.25, ("units", "cpu_big", "gmacs", "int8"): 0.8}
PROFILED = {("units", "cpu_big", "efficiency", "depthwise"): 0.8, ("units", "cpu_big", "dispatch_us"): 1.5}
MODELS = [("mobilenet_v1", "alpha=0.25,resolution=128", "none"), ("mobilenet_v1", "alpha=0.5,resolution=160", "none"),
          ("mobilenet_v1", "alpha=1.0,resolution=128", "none"), ("squeezenet", "resolution=128", "none"),
          ("mobilenet_v1", "alpha=0.5,resolution=128", "uint8"), ("mobilenet_v1", "alpha=1.0,resolution=96", "uint8")]


@pytest.fixture(scope="module")
def model_files(tmp_path_factory) -> list[Path]:
    """MODELS built (and quantized) once and saved as .tflite files, for both round trips: each is
    measured at three thread counts in each, and a zoo run builds its model anew every time
    (MobileNet v1 1.0's uint8 calibration runs the float model on samples). A zoo model's own log
    line is read back in test_a_benchmark_log_reads_back_as_the_row_it_measured."""
    from runtime.model.loader import ModelSource, load_model
    from runtime.model.tflite_write import save

    folder = tmp_path_factory.mktemp("models")
    paths = []
    for k, (zoo, args, quantization) in enumerate(MODELS):
        paths.append(folder / f"{k}_{zoo}_{quantization}.tflite")
        save(load_model(ModelSource(zoo=zoo, zoo_args=args, quantization=quantization)), paths[-1])
    return paths


@pytest.mark.parametrize("op_profiling", [False, True])
def test_calibrate_recovers_known_factors_from_benchmark_logs(tmp_path, op_profiling, model_files):
    data, lines = parse((PROFILE_DIR / "priors" / "pixel4.yaml").read_text(), "p", ValueError)
    factors = {**FACTORS, **(PROFILED if op_profiling else {})}
    for path, factor in factors.items():
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] *= factor
    phone = tmp_path / "phone.yaml"
    phone.write_text(yaml.safe_dump(data))
    log = ""
    for model in model_files:
        for flags in (["--num_threads", "1"], ["--num_threads", "2"], ["--num_threads", "4"]):
            log += _benchmark_log(str(phone), "--graph", str(model), *flags,
                                  *(["--enable_op_profiling=true"] if op_profiling else []))
    (tmp_path / "phone.log").write_text(log)
    rows, base, evaluator, params = calibrate_files([str(tmp_path / "phone.log")],
                                                    str(PROFILE_DIR / "priors" / "pixel4.yaml"), device="pixel4")
    result = fit(evaluator, params, max_nfev=60)
    fitted = dict(zip((p.path for p in result.params), zip(result.params, result.values)))
    for path, factor in factors.items():
        p, value = fitted[path]
        assert value / p.prior == pytest.approx(factor, rel=0.02), p.name


# -- the command line ---------------------------------------------------------------------------------

@pytest.mark.parametrize("content, base, message", [
    (None, "pixel4", "cannot read the measurements"),
    ("model,latency_ms\nx,1\n", "pixel4", "missing column"),
    (HEADER + "mobilenet_v1,alpha=0.25,none,pixel4,cpu,4,1\nmobilenet_v1,alpha=0.25,none,pixel3,cpu,4,1\n",
     "pixel4", "several phones (pixel3, pixel4)"),
    (HEADER + "nowhere/m.tflite,,none,pixel4,cpu,4,1\n", "pixel4", "not found"),
    (HEADER + "mobilenet_v1,alpha=0.25,none,pixel4,cpu,4,1\n", "nophone", "unknown profile"),
    ("Graph: [zoo:nomodel?&quantization=none]\nInference timings in us: Init: 1, First inference: 1, "
     "Warmup (avg): 1, Inference (avg): 1000\n", "pixel4", "unknown zoo model"),
])
def test_bad_measurements_are_one_line_naming_the_file(tmp_path, capsys, content, base, message):
    path = tmp_path / ("m.csv" if content is None or content.startswith("model") else "m.log")
    if content is not None:
        path.write_text(content)
    assert cli.main(["calibrate", str(path), "--base", base]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("dtb calibrate: error:") and message in err and "\n" not in err
    assert not list(tmp_path.glob("*.yaml"))


def test_an_unwritable_output_is_refused_before_fitting(tmp_path, capsys):
    csv = tmp_path / "m.csv"
    csv.write_text(HEADER + "mobilenet_v1,alpha=0.25;resolution=96,none,pixel4,cpu,4,0.9\n")
    assert cli.main(["calibrate", str(csv), "--base", "pixel4", "-o", str(tmp_path / "no" / "such" / "x.yaml")]) == 1
    err = capsys.readouterr()
    assert "dtb calibrate: error:" in err.err and "Calibrating" not in err.out


def test_an_output_naming_an_input_is_refused_before_fitting(tmp_path, capsys):
    """-o over a measurement file replaced the measurements with the profile; over the --base profile, the
    written profile named itself as its prior, so it could not be calibrated again."""
    csv = tmp_path / "m.csv"
    csv.write_text(HEADER + "mobilenet_v1,alpha=0.25;resolution=96,none,pixel4,cpu,4,0.9\n")
    base = tmp_path / "base.yaml"
    base.write_text(Path("tests/fixtures/profiles/htp_test.yaml").read_text())
    for out, what in ((csv, "measurement file"), (tmp_path / "." / "base.yaml", "--base profile")):
        assert cli.main(["calibrate", str(csv), "--base", str(base), "-o", str(out), "--max_nfev", "1"]) == 1
        err = capsys.readouterr()
        assert f"cannot write {out}: it is the {what}" in err.err and "Calibrating" not in err.out
    assert csv.read_text().startswith(HEADER)
    assert base.read_text() == Path("tests/fixtures/profiles/htp_test.yaml").read_text()


def test_calibrate_writes_a_loadable_profile_and_prints_the_cross_validation(tmp_path, capsys):
    csv = tmp_path / "m.csv"
    csv.write_text(HEADER + "".join(f"mobilenet_v1,alpha=0.25;resolution={r},none,pixel4,{d},4,{ms}\n"
                                    for r, d, ms in [(96, "cpu", 0.9), (96, "gpu", 1.4), (128, "cpu", 1.3),
                                                     (128, "gpu", 1.5)]))
    out = tmp_path / "mine.yaml"
    assert cli.main(["calibrate", str(csv), "--base", "pixel4", "-o", str(out), "--cv", "--max_nfev", "5",
                     "--device", "myphone"]) == 0
    text = capsys.readouterr().out
    assert "Leave-one-model-out cross-validation (4 rows)" in text and "fastest delegate agrees for" in text
    assert "Error band per delegate" in text and "band cpu      median" in text
    # each fitted parameter with its range over the folds, and the fold that moved it most
    assert "Parameters with one model held out" in text          # the rows name no family
    spread = text.split("Parameters with one model held out")[1].split("\n\n")[0].splitlines()[2:]
    assert spread and all(" without " not in line and "(x" in line for line in spread)
    mine = load_profile(out)
    # the band the cross-validation printed is the one written: per delegate, its rows and what they covered
    assert [(b.delegate.value, b.rows, b.coverage.models) for b in mine.error_band.delegates] == \
        [("cpu", 2, 2), ("gpu", 2, 2)]
    cpu = mine.error_band.of("cpu")
    assert f"band cpu      median {cpu.median_pct:.1f}%, p90 {cpu.p90_pct:.1f}% on 2 rows" in text
    assert mine.name == "myphone"
    info = dict(mine.calibration)
    assert info["rows"] == "4" and info["measurements"] == "m.csv"
    assert (out.parent / info["prior"]).resolve() == (PROFILE_DIR / "priors" / "pixel4.yaml").resolve()


def test_a_scenario_can_run_the_phone_on_another_api_level(tmp_path):
    """The per-channel int8 MobileNet needs NNAPI 1.2: the Pixel 3 on Android 10 takes it, on 9 not."""
    from runtime.sweep.runner import run_file

    text = ("device: pixel3\nmodel: {zoo: tiny_cnn, quantization: int8}\ndelegates: [nnapi: {}]\n"
            "timing_only: true\nruns: {warmup: 0, count: 1}\nmatrix:\n  api_level: [28, 29]\n")
    (tmp_path / "s.yaml").write_text(text)
    results = run_file(tmp_path / "s.yaml", tmp_path / "out")
    delegated = [r["delegates"][0]["nodes_delegated"] for r in results["records"]]
    assert delegated[0] == 0 and delegated[1] > 0
    (tmp_path / "ios.yaml").write_text(text.replace("pixel3", "iphone_xs"))
    with pytest.raises(ScenarioError, match="api_level: .*Android phones only"):
        run_file(tmp_path / "ios.yaml", tmp_path / "out2")


def test_re_timing_a_plan_on_other_numbers_equals_a_fresh_simulation():
    """The fit re-times each row's plan on each trial profile; that must be what a fresh
    interpreter on that profile simulates, NNAPI driver costs and steps included."""
    from delegates.registry import parse_flags
    from runtime.interpreter.api import Interpreter
    from runtime.calibration.rows import DELEGATES

    rows, base, evaluator, params = calibrate_files([str(MEASUREMENTS / "pixel4.csv")], "pixel4")
    values = [p.prior * (1.3 if k % 2 else 0.7) for k, p in enumerate(params)]
    assert any(p.path[0] == "nnapi" for p in params)
    profile = evaluator.profile(params, values)
    fast = [ms for ms, _ in evaluator.run(params, values)]
    for row, simulation in zip(rows, evaluator.sims):
        delegates, _ = parse_flags(list(DELEGATES[row.delegate]), profile)
        it = Interpreter(graph=simulation.graph, experimental_delegates=delegates, num_threads=row.threads,
                         device=profile, timing_only=True)
        it.allocate_tensors()
        assert it.simulation.invoke() * 1e3 == pytest.approx(fast[rows.index(row)], rel=1e-12), row.label


def test_a_device_log_with_level_prefixes_and_an_op_profile_reads(tmp_path):
    """What an Android benchmark_model run prints (INFO: prefixes, the per-node-type summary)."""
    (tmp_path / "m.tflite").write_bytes(b"")          # the Graph line names the phone's path; found here
    log = "\n".join([
        "INFO: STARTING!", "INFO: Log parameter values verbosely: [0]", "INFO: Num threads: [4]",
        "INFO: Graph: [/data/local/tmp/m.tflite]", "INFO: Enable op profiling: [1]",
        "INFO: #threads used for CPU inference: [4]", "INFO: Loaded model /data/local/tmp/m.tflite",
        "INFO: Inference timings in us: Init: 3105, First inference: 21412, Warmup (avg): 20001.5, "
        "Inference (avg): 19874.2",
        "INFO: Operator-wise Profiling Info for Regular Benchmark Runs:",
        "============================== Summary by node type ==============================",
        "\t             [Node type]\t  [count]\t  [avg ms]\t    [avg %]\t    [cdf %]\t  [mem KB]\t[times called]",
        "\t                 CONV_2D\t       15\t    16.012\t    80.623%\t    80.623%\t     0.000\t       15",
        "\t       DEPTHWISE_CONV_2D\t       13\t     3.702\t    18.640%\t    99.263%\t     0.000\t       13",
        "", "INFO: Memory footprint delta from the start of the tool (MB): init=3.1 overall=9.8"])
    (row,) = read_log(log, str(tmp_path / "phone.log"))
    assert (row.model, row.threads, row.delegate) == ("/data/local/tmp/m.tflite", 4, "cpu")
    assert row.latency_ms == pytest.approx(19.8742)
    assert row.per_type == (("CONV_2D", 16.012), ("DEPTHWISE_CONV_2D", 3.702))
    from runtime.cli.calibrate import local_model_path

    assert local_model_path(row) == tmp_path / "m.tflite"


# -- progress ------------------------------------------------------------------------------------------

FOUR_ROWS = HEADER + "".join(f"mobilenet_v1,alpha=0.25;resolution={r},none,pixel4,{d},4,{ms}\n"
                             for r, d, ms in [(96, "cpu", 0.9), (96, "gpu", 1.4), (128, "cpu", 1.3),
                                              (128, "gpu", 1.5)])


def test_rows_simulations_and_folds_each_report_progress(tmp_path):
    from runtime.calibration.fit import cross_validate

    csv = tmp_path / "m.csv"
    csv.write_text(FOUR_ROWS)
    rows_seen, runs, folds = [], [], []
    rows, base, evaluator, params = calibrate_files([str(csv)], "pixel4",
                                                    on_row=lambda *a: rows_seen.append(a))
    assert [(d, n) for d, n, _ in rows_seen] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    result = fit(evaluator, params, max_nfev=2, on_run=lambda *a: runs.append(a))
    assert [d for d, _, _ in runs] == list(range(1, result.evaluations + 1))   # one call per simulation
    assert all(d <= most for d, most, _ in runs)
    cross_validate(evaluator, params, on_fold=lambda *a: folds.append(a))
    assert [(d, n) for d, n, _ in folds] == [(0, 2), (1, 2), (2, 2)]           # two models: two folds


def test_calibrate_shows_a_bar_on_a_terminal_and_keeps_stdout_clean(tmp_path, capsys, monkeypatch):
    import itertools

    from runtime.report import progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    csv = tmp_path / "m.csv"
    csv.write_text(FOUR_ROWS)
    argv = ["calibrate", str(csv), "--base", "pixel4", "--cv", "--max_nfev", "2"]
    assert cli.main(argv) == 0
    plain = capsys.readouterr().out
    tty, ticks = Tty(), itertools.count()
    monkeypatch.setattr("sys.stderr", tty)
    monkeypatch.setattr(progress, "_clock", lambda: next(ticks) * 1.0)   # a host second between reports
    assert cli.main(argv) == 0
    assert capsys.readouterr().out == plain
    shown = tty.getvalue()
    assert "row" in shown and "simulation" in shown and "fold" in shown and "simulations" in shown
