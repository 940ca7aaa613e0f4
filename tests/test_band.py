"""Error bands: what a cross-validation measured per delegate, carried by the profile to every printed latency,
and the warning when a model lies outside the rows a band was measured on."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
import yaml

from delegates.kinds import DelegateKind
from runtime.calibration.band import error_band
from runtime.calibration.evaluate import Evaluator
from runtime.calibration.fit import Prediction
from runtime.calibration.files import read_measurements
from runtime.calibration.rows import DELEGATES, read_csv
from runtime.cli.calibrate import row_models
from runtime.cli.main import main
from runtime.ir.errors import ProfileError
from runtime.ir.yamlcheck import parse
from runtime.report.render import render
from runtime.scenario.load import ModelSpec, Quantization
from runtime.sweep.cell import build_model
from sim.band import (BandDelegate, ModelPrecision, SHARE_MARGIN, delegate_band, model_traits, outside,
                      parse_error_band, render_error_band)
from sim.cost import OpClass
from sim.profile import PROFILE_DIR, load_profile
from sim.profile_parse import ProfileCtx

HEADER = "model,args,quantization,device,delegate,threads,latency_ms\n"
# Every phone fitted to a measurement file ships the band its cross-validation measured (`dtb calibrate --cv -o`).
SHIPPED = tuple(sorted(p.stem for p in (PROFILE_DIR / "measurements").glob("*.csv")))


def graph(zoo: str, quantization: str = "none", **args):
    return build_model(ModelSpec(zoo=zoo, args=tuple(sorted(args.items())), quantization=Quantization(quantization)))


# -- a model's traits -------------------------------------------------------------------------------

def test_band_delegates_are_the_calibration_rows_delegates():
    assert {d.value for d in BandDelegate} == {"cpu", *(k.value for k in DelegateKind)} == set(DELEGATES)


@pytest.mark.parametrize("quantization, precision", [("none", "float32"), ("float16", "float16"),
                                                     ("dynamic_range", "dynamic_range"), ("int8", "int8"),
                                                     ("uint8", "uint8")])
def test_a_models_precision_is_read_from_its_multiply_add_ops(quantization, precision):
    if quantization == "dynamic_range":   # weights under 1024 elements stay float (TFLite's threshold): larger ones
        traits = model_traits(graph("mobilenet_v1", quantization, alpha=0.25, resolution=96))
        assert ModelPrecision.DYNAMIC_RANGE in traits.precisions
        return
    traits = model_traits(graph("tiny_cnn", quantization, resolution=16))
    assert traits.precisions == {ModelPrecision(precision)}


def test_traits_count_macs_parameters_and_op_class_shares():
    small, large = (model_traits(graph("mobilenet_v1", alpha=1.0, resolution=r)) for r in (128, 224))
    # MobileNet v1 1.0 is 569 M multiply-adds at 224 and 4.2 M parameters (Howard et al. 2017, table 8)
    assert 560e6 < large.macs < 580e6 and 4.1e6 < large.params < 4.3e6
    assert small.params == large.params and small.macs < large.macs
    shares = dict(large.shares)
    assert sum(shares.values()) == pytest.approx(1.0)
    assert shares[OpClass.CONV] == pytest.approx(15 / 31) and shares[OpClass.DEPTHWISE] == pytest.approx(13 / 31)
    assert small.shares == large.shares
    assert model_traits(graph("mobilenet_v1", "uint8", alpha=1.0, resolution=128)).macs == small.macs
    # a float16 model's DEQUANTIZE of its weights runs once, not per inference: the op mix is the float model's
    half = model_traits(graph("mobilenet_v1", "float16", alpha=1.0, resolution=128))
    assert half.shares == small.shares and half.precisions == {ModelPrecision.FLOAT16}


# -- a delegate's band ------------------------------------------------------------------------------

def test_the_band_is_the_median_and_90th_percentile_of_the_absolute_errors():
    traits = [model_traits(graph("tiny_cnn", resolution=r)) for r in (16, 24)]
    band = delegate_band("gpu", [0.1, -0.2, 0.05, -0.4], traits)
    assert band.rows == 4 and band.median_pct == 15.0
    assert band.p90_pct == pytest.approx(round(float(np.percentile([5, 10, 20, 40], 90)), 1)) == 34.0
    assert band.coverage.models == 2 and band.coverage.macs == (traits[0].macs, traits[1].macs)


def test_error_band_groups_held_out_rows_by_delegate(tmp_path):
    """The band computation on a tiny row set, with made-up held-out predictions (no cross-validation run)."""
    text = HEADER + "".join(f"tiny_cnn,resolution={r},{q},pixel4,{d},1,{ms}\n" for r, q, d, ms in [
        (16, "none", "cpu", 1.0), (16, "none", "gpu", 2.0), (24, "uint8", "cpu", 1.0), (24, "uint8", "nnapi", 1.0)])
    rows = read_csv(text, "m.csv")
    data, _ = parse((PROFILE_DIR / "priors" / "pixel4.yaml").read_text(), "p", ValueError)
    evaluator = Evaluator(rows, data, "p", row_models)
    predicted = [Prediction(r, r.latency_ms * f) for r, f in zip(rows, (1.1, 0.5, 1.3, 1.02))]
    band = error_band(evaluator, predicted)
    assert [b.delegate.value for b in band.delegates] == ["cpu", "gpu", "nnapi"]    # no hexagon, no coreml rows
    cpu, gpu, nnapi = band.delegates
    assert (cpu.rows, cpu.median_pct, cpu.p90_pct) == (2, 20.0, pytest.approx(28.0))
    assert (gpu.rows, gpu.median_pct, nnapi.median_pct) == (1, 50.0, 2.0)
    assert cpu.coverage.precisions == {ModelPrecision.FLOAT32, ModelPrecision.UINT8}
    assert gpu.coverage.precisions == {ModelPrecision.FLOAT32} and gpu.coverage.models == 1
    # written and read back as a profile section
    written = yaml.safe_load("\n".join(render_error_band(band)))["error_band"]
    back = parse_error_band(ProfileCtx("p", {}), written, ("error_band",))
    assert [(b.delegate, b.rows, b.median_pct, b.p90_pct, b.coverage.macs, b.coverage.precisions)
            for b in back.delegates] == [(b.delegate, b.rows, b.median_pct, b.p90_pct, b.coverage.macs,
                                          b.coverage.precisions) for b in band.delegates]
    for got, want in zip(back.delegates, band.delegates):
        for (c1, lo1, hi1), (c2, lo2, hi2) in zip(got.coverage.shares, want.coverage.shares):
            assert c1 == c2 and lo1 == pytest.approx(lo2, abs=1e-4) and hi1 == pytest.approx(hi2, abs=1e-4)


@pytest.mark.parametrize("edit, message", [
    (lambda b: b.update(gpu2=b.pop("gpu")), "error_band.gpu2: unknown delegate"),
    (lambda b: b["gpu"].pop("p90_pct"), "error_band.gpu.p90_pct: required key is missing"),
    (lambda b: b["gpu"].update(macs=[5, 1]), "error_band.gpu.macs: least 5 exceeds most 1"),
    (lambda b: b["gpu"].update(precisions=["int4"]), "error_band.gpu.precisions: must be a list of precisions"),
    (lambda b: b["gpu"].update(precisions=[["float32"]]), "error_band.gpu.precisions: must be a list of precisions"),
    (lambda b: b["gpu"]["op_share"].update(convolution=[0, 1]), "error_band.gpu.op_share.convolution: unknown op"),
    (lambda b: b["gpu"].update(median_pct=-1), "error_band.gpu.median_pct: must be a percentage"),
])
def test_a_bad_error_band_names_the_file_line_and_key(tmp_path, edit, message):
    data = yaml.safe_load((PROFILE_DIR / "pixel4.yaml").read_text())
    edit(data["error_band"])
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ProfileError, match=rf"p\.yaml:\d+: {message}"):
        load_profile(path)


# -- the shipped phones -----------------------------------------------------------------------------

@pytest.mark.parametrize("phone", SHIPPED)
def test_each_shipped_phone_carries_a_band_per_delegate_its_measurements_have(phone):
    rows = read_measurements(PROFILE_DIR / "measurements" / f"{phone}.csv")
    band = load_profile(phone).error_band
    assert band is not None
    by_delegate = {d: sum(r.delegate == d for r in rows) for d in {r.delegate for r in rows}}
    assert {b.delegate.value: b.rows for b in band.delegates} == by_delegate
    for b in band.delegates:
        assert 0 <= b.median_pct <= b.p90_pct
        models = {(r.model, r.args, r.quantization) for r in rows if r.delegate == b.delegate.value}
        assert b.coverage.models == len(models)


def test_the_generic_phone_has_no_band():
    assert load_profile("generic").error_band is None


def test_a_model_like_the_fitted_ones_is_inside_and_one_unlike_them_is_outside():
    cpu = load_profile("pixel4").error_band.of("cpu").coverage
    # MobileNet v1 at another input size than the fitted 224: same op mix, MACs between MobileNet and SqueezeNet
    assert outside(model_traits(graph("mobilenet_v1", alpha=1.0, resolution=256)), cpu) == ()
    phrases = outside(model_traits(graph("mobilenet_v2", "dynamic_range")), cpu)
    assert phrases == ("ELEMENTWISE share 15%, not in fitted rows", "MACs 301 M < fitted min 569 M",
                       "precision dynamic_range not in fitted rows (float32, uint8)")
    tiny = outside(model_traits(graph("tiny_cnn", "int8", resolution=16)), cpu)
    assert any(p.startswith("params") and "< fitted min" in p for p in tiny)
    assert any(p.startswith("precision int8") for p in tiny)


def test_a_share_counts_as_outside_only_beyond_the_margin():
    cpu = load_profile("pixel4").error_band.of("cpu").coverage
    base = model_traits(graph("mobilenet_v1", alpha=1.0, resolution=224))
    lo, hi = next((lo, hi) for c, lo, hi in cpu.shares if c is OpClass.CONV)

    def with_conv(share):
        shares = tuple((c, share if c is OpClass.CONV else s) for c, s in base.shares)
        return outside(type(base)(base.macs, base.params, base.precisions, shares), cpu)

    assert with_conv(hi + 0.9 * SHARE_MARGIN) == () == with_conv(lo - 0.9 * SHARE_MARGIN)
    assert with_conv(hi + 1.1 * SHARE_MARGIN)[0].startswith("CONV share") and "> fitted max" in \
        with_conv(hi + 1.1 * SHARE_MARGIN)[0]
    assert with_conv(lo - 1.1 * SHARE_MARGIN) == (f"CONV share {lo - 1.1 * SHARE_MARGIN:.0%} < fitted min {lo:.0%}",)


# -- every printed latency carries its band -----------------------------------------------------------

BENCH = ["benchmark", "--device", "pixel4", "--timing_only", "--num_runs", "1", "--warmup_runs", "0"]


def test_benchmark_prints_the_band_and_warns_outside_the_fitted_rows(capsys, tmp_path):
    gpu = load_profile("pixel4").error_band.of("gpu")
    assert main([*BENCH, "--zoo", "mobilenet_v1", "--zoo_args", "alpha=1.0,resolution=256", "--use_gpu"]) == 0
    out, err = capsys.readouterr()
    timing = next(ln for ln in out.splitlines() if ln.startswith("Inference timings in us:"))
    avg_us = float(timing.rsplit("Inference (avg): ", 1)[1])
    assert f"Latency with the fitted error band: avg={avg_us / 1e3:.2f} ms (fitted band: median " \
           f"{gpu.median_pct:.1f}%, p90 {gpu.p90_pct:.1f}% on {gpu.rows} gpu rows)" in out
    assert err == ""
    assert main([*BENCH, "--zoo", "mobilenet_v2", "--output_json", str(tmp_path / "r.json")]) == 0
    out, err = capsys.readouterr()
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["error_band"]["delegate"] == "cpu" and record["error_band"]["rows"] == 3
    assert record["outside_fit"] == ["ELEMENTWISE share 15%, not in fitted rows", "MACs 301 M < fitted min 569 M"]
    assert "(fitted band: median" in out and "on 3 cpu rows)" in out
    assert err == ("dtb benchmark: warning: the model lies outside what pixel4's cpu figures were fitted to: "
                   "ELEMENTWISE share 15%, not in fitted rows; MACs 301 M < fitted min 569 M\n")


@pytest.mark.parametrize("device, flags, phrase", [
    ("generic", [], "no band: not fitted"), ("pixel4", ["--use_hexagon"], "no band: no hexagon rows in the fit")])
def test_a_latency_without_a_band_says_why(capsys, device, flags, phrase):
    argv = ["benchmark", "--zoo", "tiny_cnn", "--quantization", "int8", "--device", device, "--timing_only",
            "--num_runs", "1", "--warmup_runs", "0", *flags]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert f"({phrase})" in out and err == ""


SCENARIO = """name: band
device: pixel4
timing_only: true
runs: {warmup: 0, count: 1}
matrix:
  model:
    - {zoo: mobilenet_v1, args: {alpha: 1.0, resolution: 256}}
    - {zoo: tiny_cnn, args: {resolution: 16}}
  delegates: [[], [gpu]]
"""


def test_run_records_summary_and_reports_carry_the_band_and_the_warning(tmp_path, capsys):
    (tmp_path / "s.yaml").write_text(SCENARIO)
    assert main(["run", str(tmp_path / "s.yaml"), "-o", str(tmp_path / "out")]) == 0
    out, err = capsys.readouterr()
    records = json.loads((tmp_path / "out" / "results.json").read_text())["records"]
    band = load_profile("pixel4").error_band
    for rec in records:
        delegate = "gpu" if rec["delegates"] else "cpu"
        b = band.of(delegate)
        assert rec["error_band"] == {"delegate": delegate, "rows": b.rows, "median_pct": b.median_pct,
                                     "p90_pct": b.p90_pct, "note": f"fitted band: median {b.median_pct:.1f}%, "
                                                                   f"p90 {b.p90_pct:.1f}% on {b.rows} {delegate} rows"}
        assert (rec["outside_fit"] == []) == (rec["model"]["name"] == "mobilenet_v1"), rec["outside_fit"]
        assert f"{b.median_pct:.1f} / {b.p90_pct:.1f} ({b.rows} {delegate} rows)" in \
            next(ln for ln in out.splitlines() if ln.startswith(rec["label"]))
    warnings = err.splitlines()
    assert len(warnings) == 2 and all(w.startswith("dtb run: warning: ") and "tiny_cnn" in w and
                                      "MACs" in w for w in warnings), warnings
    results = {"scenario": "band", "records": records}
    md = render(results, "md")
    assert "Fitted error band" in md and md.count("Warning: the model lies outside the fitted rows") == 2
    assert f"median {band.of('gpu').median_pct:.1f}%" in md
    assert "Fitted error band" in render(results, "html")
    csv_text = render(results, "csv")
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    assert sorted(r["error_band.delegate"] for r in rows) == ["cpu", "cpu", "gpu", "gpu"]
    for row, rec in zip(rows, records):
        assert float(row["error_band.median_pct"]) == rec["error_band"]["median_pct"]
        assert float(row["error_band.p90_pct"]) == rec["error_band"]["p90_pct"]
        assert row["outside_fit"] == "; ".join(rec["outside_fit"])

