"""The op split check (NPU / GPU / CPU ops beside AI Hub's layer counts), the measurement columns that carry it,
and cross-validation by model family."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.calibration import op_split
from runtime.calibration.op_split import SplitCheck, check_splits, simulated_split, summarize
from runtime.calibration.rows import MeasurementError, OpSplit, Row, family_key, model_key, read_csv
from runtime.cli.main import main
from sim.profile import load_profile
from tests.delegate_kit import qualcomm, zoo

HEADER = "model,args,quantization,device,delegate,threads,latency_ms,flags,family,npu_ops,gpu_ops,cpu_ops\n"


def _row(**kw) -> Row:
    base = dict(model="m.tflite", args=(), quantization="none", device="p", delegate="qnn", threads=4,
                latency_ms=1.0, source="t:1")
    return Row(**{**base, **kw})


# -- the columns ---------------------------------------------------------------------------------


def test_the_optional_columns_are_read():
    rows = read_csv(HEADER + "a.tflite,,none,p,qnn,4,1.5,--use_gpu=true,resnet,70,2,3\n"
                             "b.tflite,,none,p,cpu,4,2,,,,,\n", "m.csv")
    assert rows[0].flags == ("--use_gpu=true",) and rows[0].family == "resnet"
    assert rows[0].split == OpSplit(70, 2, 3) and rows[0].split.total == 75
    assert rows[1].flags == () and rows[1].family == "" and rows[1].split is None


def test_a_file_without_the_columns_reads_as_before():
    rows = read_csv("model,args,quantization,device,delegate,threads,latency_ms\nm.tflite,,none,p,cpu,4,1\n", "m.csv")
    assert rows[0].split is None and rows[0].family == "" and rows[0].flags == ()


@pytest.mark.parametrize("cells, message", [
    ("--use_gpu=true,f,70,,3", "m.csv:2: gpu_ops: empty; give npu_ops, gpu_ops, cpu_ops together or none"),
    ("--use_gpu=true,f,70,-1,3", "m.csv:2: gpu_ops: must be a whole number of ops, got '-1'"),
    ("--use_gpu=true,f,70,1.5,3", "m.csv:2: gpu_ops: must be a whole number of ops, got '1.5'"),
    ("--use_gpu=true,f,70,x,3", "m.csv:2: gpu_ops: 'x' is not a number"),
    ("use_gpu=true,f,1,1,1", "m.csv:2: flags: 'use_gpu=true' is not a --flag"),
    (" ".join(["--a"] * 17) + ",f,1,1,1", "m.csv:2: flags: 17 flags (the limit is 16)"),
])
def test_bad_columns_name_the_file_line_and_column(cells, message):
    with pytest.raises(MeasurementError) as err:
        read_csv(HEADER + f"a.tflite,,none,p,qnn,4,1,{cells}\n", "m.csv")
    assert str(err.value) == message


def test_a_family_holds_rows_of_several_models_together():
    a, b, c = _row(model="r18.tflite", family="resnet"), _row(model="r50.tflite", family="resnet"), _row()
    assert family_key(a) == family_key(b) != family_key(c)
    assert family_key(c) == model_key(c)        # no family: the model alone, as before


def test_cross_validation_holds_out_a_family_at_once(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from runtime.calibration import fit
    from runtime.cli.calibrate import calibrate_files

    lines = [f"mobilenet_v1,alpha=0.25;resolution={r},none,pixel4,{d},4,{ms},,{fam},,,\n"
             for r, d, ms, fam in [(32, "cpu", 0.9, "small"), (32, "gpu", 1.4, "small"), (40, "cpu", 1.3, "small"),
                                   (48, "cpu", 1.8, "big")]]
    csv = tmp_path / "m.csv"
    csv.write_text(HEADER + "".join(lines))
    _, _, evaluator, params = calibrate_files([str(csv)], "pixel4")
    trained = []   # each fold's training rows; the fit itself is not what this checks

    def prior_fit(ev, ps, train, **kw):
        trained.append(sorted(train))
        return SimpleNamespace(params=ps, values=[p.prior for p in ps])

    monkeypatch.setattr(fit, "fit", prior_fit)
    folds = []
    predictions = fit.cross_validate(evaluator, params, on_fold=lambda *a: folds.append(a)).predictions
    assert [(d, n) for d, n, _ in folds] == [(0, 2), (1, 2), (2, 2)]   # three models, two families: two folds
    assert sorted(trained) == [[0, 1, 2], [3]] and len(predictions) == 4
    assert {label for _, _, label in folds[:2]} == {"without family small", "without family big"}


# -- the simulated split ---------------------------------------------------------------------------


def test_aihub_runtime_puts_a_float_model_on_the_npu():
    graph = zoo("mobilenet_v1")
    assert simulated_split(graph, qualcomm()) == OpSplit(len(graph.ops), 0, 0)


def test_what_the_qnn_delegate_leaves_goes_to_the_gpu_then_the_cpu():
    graph = zoo("mobilenet_v1")
    quantized = ("--use_qnn=true", "--qnn_htp_precision=quantized", "--use_gpu=true")
    assert simulated_split(graph, qualcomm(), quantized) == OpSplit(0, len(graph.ops), 0)
    no_gpu = ("--use_qnn=true", "--qnn_htp_precision=quantized")
    assert simulated_split(graph, qualcomm(), no_gpu) == OpSplit(0, 0, len(graph.ops))


def test_a_phone_without_an_htp_leaves_the_npu_count_at_zero():
    graph = zoo("mobilenet_v1")
    split = simulated_split(graph, load_profile("pixel3"))
    assert split.npu == 0 and split.gpu == len(graph.ops)


def test_each_model_is_partitioned_once(monkeypatch):
    calls = []
    real = op_split.simulated_split
    monkeypatch.setattr(op_split, "simulated_split", lambda g, p, *a: calls.append(g) or real(g, p, *a))
    graph = zoo("mobilenet_v1")
    n = len(graph.ops)
    rows = [_row(model="a", split=OpSplit(n, 0, 0)), _row(model="a", latency_ms=2.0, split=OpSplit(n - 1, 1, 0)),
            _row(model="b", split=OpSplit(n, 0, 0)), _row(model="c")]            # c reports no split
    checks = check_splits(rows, lambda row: graph, qualcomm())
    assert len(calls) == 2 and len(checks) == 3
    assert [c.agrees for c in checks] == [True, False, True]


def test_a_zoo_model_is_partitioned_once_per_arguments_and_quantization(monkeypatch):
    """Rows of one zoo name with other arguments or quantization are other graphs: each was once given
    the first row's split (squeezenet float16 checked against plain squeezenet's 40 ops, not its 92)."""
    calls = []
    monkeypatch.setattr(op_split, "simulated_split", lambda g, p, *a: calls.append(g) or OpSplit(len(calls), 0, 0))
    rows = [_row(model="squeezenet", split=OpSplit(1, 0, 0)),
            _row(model="squeezenet", quantization="float16", split=OpSplit(1, 0, 0)),
            _row(model="squeezenet", args=(("alpha", 0.5),), split=OpSplit(1, 0, 0)),
            _row(model="squeezenet", latency_ms=2.0, split=OpSplit(1, 0, 0))]
    checks = check_splits(rows, lambda row: model_key(row), qualcomm())
    assert calls == [model_key(r) for r in rows[:3]]
    assert [c.simulated.npu for c in checks] == [1, 2, 3, 1]


def test_summary_counts_only_rows_whose_op_count_matches():
    checks = [SplitCheck(_row(split=OpSplit(5, 0, 0)), OpSplit(5, 0, 0)),
              SplitCheck(_row(split=OpSplit(4, 0, 1)), OpSplit(5, 0, 0)),
              SplitCheck(_row(split=OpSplit(9, 0, 0)), OpSplit(5, 0, 0))]   # the rebuilt file has 5 ops, not 9
    assert [c.total_matches for c in checks] == [True, True, False]
    assert summarize(checks) == op_split.SplitSummary(rows=3, same_total=2, agree=1)


# -- the command -----------------------------------------------------------------------------------


def test_calibrate_op_split_prints_the_table_and_the_share(tmp_path, capsys):
    from runtime.model.tflite_write import save

    graph = zoo("mobilenet_v1")
    n = len(graph.ops)
    save(graph, tmp_path / "m.tflite")
    phone = tmp_path / "phone.yaml"
    phone.write_text(Path("tests/fixtures/profiles/htp_test.yaml").read_text())
    name = load_profile(str(phone)).name
    (tmp_path / "rows.csv").write_text(HEADER + f"m.tflite,,none,{name},qnn,4,1,,,{n},0,0\n"
                                                f"m.tflite,,none,{name},qnn,4,1,,,{n - 2},2,0\n"
                                                f"m.tflite,,none,{name},qnn,4,1,,,{n + 1},0,0\n")
    assert main(["calibrate", str(tmp_path / "rows.csv"), "--base", str(phone), "--op_split"]) == 0
    out = capsys.readouterr().out
    assert out.count("agrees") == 1 + 1 and "DIFFERS" in out and "other op count" in out
    assert f"op split agrees on 1 of 2 rows whose op count matches (50%); 1 of 3 rows have another op count" in out


def test_a_csvs_relative_model_path_is_relative_to_the_csv(tmp_path, monkeypatch):
    from runtime.cli.calibrate import local_model_path

    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "m.tflite").write_bytes(b"")
    monkeypatch.chdir("/")
    row = _row(model="models/m.tflite", source=f"{tmp_path / 'rows.csv'}:2")
    assert local_model_path(row) == tmp_path / "models" / "m.tflite"


def test_op_split_without_split_columns_is_one_clear_error(tmp_path, capsys):
    (tmp_path / "rows.csv").write_text("model,args,quantization,device,delegate,threads,latency_ms\n"
                                       "mobilenet_v1,alpha=0.25;resolution=96,none,pixel4,cpu,4,1\n")
    assert main(["calibrate", str(tmp_path / "rows.csv"), "--base", "pixel4", "--op_split"]) != 0
    err = capsys.readouterr().err
    assert "reports an op split" in err and "Traceback" not in err
