"""The dtb command line: happy paths, and one clear line with a non-zero exit for bad input."""

from __future__ import annotations

import subprocess
import sys

import pytest

from runtime.cli.main import main


def test_infer_zoo_model(capsys):
    assert main(["infer", "--model", "tiny_cnn", "--num_runs", "2"]) == 0
    out = capsys.readouterr().out
    assert "top-5:" in out and "zoo:tiny_cnn" in out


def test_export_then_infer_and_inspect(tmp_path, capsys):
    path = str(tmp_path / "m.tflite")
    assert main(["export", "--model", "mobilenet_v1", "--model-arg", "alpha=0.25",
                 "--model-arg", "resolution=64", "-o", path]) == 0
    assert main(["infer", "--graph", path]) == 0
    assert main(["inspect", "--graph", path]) == 0
    out = capsys.readouterr().out
    assert "DEPTHWISE_CONV_2D" in out


def test_list(capsys):
    assert main(["list", "models"]) == 0
    assert "mobilenet_v1(alpha=1.0" in capsys.readouterr().out
    assert main(["list", "ops"]) == 0
    assert "CONV_2D" in capsys.readouterr().out


@pytest.mark.parametrize("content,message", [
    (b"hello, I am text\n", "is not a TFLite model"),
    (None, "is truncated or malformed"),
])
def test_bad_model_file_is_one_line(tmp_path, content, message):
    path = tmp_path / "bad.tflite"
    if content is None:
        main(["export", "--model", "tiny_cnn", "-o", str(path)])
        content = path.read_bytes()[:500]
    path.write_bytes(content)
    proc = subprocess.run([sys.executable, "-m", "runtime.cli.main", "infer", "--graph", str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and message in proc.stderr and "bad.tflite" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unknown_zoo_model_and_argument(capsys):
    assert main(["infer", "--model", "resnet9000"]) == 1
    assert "unknown zoo model 'resnet9000'" in capsys.readouterr().err
    assert main(["infer", "--model", "tiny_cnn", "--model-arg", "depth=3"]) == 1
    assert "has no argument 'depth'" in capsys.readouterr().err


def test_unknown_op_is_one_line(tmp_path):
    from runtime.ir.graph import DType, Graph, Op, OpType, Tensor
    from runtime.model.tflite_write import save

    x, y = Tensor("x", (2, 3), DType.FLOAT32), Tensor("y", (2, 3), DType.FLOAT32)
    path = tmp_path / "delegate_op.tflite"
    save(Graph((x, y), (Op(OpType.DELEGATE, (0,), (1,)),), (0,), (1,)), path)
    proc = subprocess.run([sys.executable, "-m", "runtime.cli.main", "infer", "--graph", str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (f"dtb infer: error: {path}: op #0 DELEGATE (version 1, FLOAT32) is not supported "
                                   f"by the testbed's reference kernels (timing-only runs cost it from its shapes)")


def test_infer_shows_quantized_outputs_as_real_values(tmp_path, capsys):
    import numpy as np

    from runtime import zoo
    from runtime.model.tflite_write import save
    from runtime.zoo.quantize import quantize

    samples = [np.random.default_rng(k).standard_normal((1, 32, 32, 3)).astype(np.float32) for k in range(4)]
    path = tmp_path / "tiny_int8.tflite"
    save(quantize(zoo.build("tiny_cnn"), "int8", samples), path)
    assert main(["infer", "--graph", str(path)]) == 0
    out = capsys.readouterr().out
    assert "int8, dequantized" in out and "top-5: " in out


# -- one set of model flags --------------------------------------------------------------------------

MODEL_COMMANDS = ["infer", "inspect", "export", "benchmark", "inference-diff", "partition"]


def _help(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", MODEL_COMMANDS)
def test_every_model_command_takes_the_same_model_flags(capsys, command):
    import re

    out = _help(capsys, command)
    for flag in ("--graph", "--zoo", "--zoo_args", "--quantization"):
        assert re.search(rf"(?<![\w-]){flag}(?![\w-])", out), f"{command} has no {flag}"


def test_inspect_infer_and_export_take_zoo_flags(capsys, tmp_path):
    assert main(["inspect", "--zoo", "mobilenet_v1", "--zoo_args", "alpha=0.25,resolution=64"]) == 0
    assert "zoo:mobilenet_v1" in capsys.readouterr().out
    assert main(["infer", "--zoo", "tiny_cnn", "--zoo_args", "resolution=16", "--quantization", "int8"]) == 0
    assert "int8, dequantized" in capsys.readouterr().out
    path = tmp_path / "q.tflite"
    assert main(["export", "--zoo", "tiny_cnn", "--quantization", "float16", "-o", str(path)]) == 0
    assert main(["inspect", "--graph", str(path)]) == 0
    assert "DEQUANTIZE" in capsys.readouterr().out


def test_old_model_spellings_are_aliases(capsys):
    assert main(["inspect", "--model", "tiny_cnn", "--model-arg", "resolution=16", "--model-arg", "classes=3"]) == 0
    assert main(["benchmark", "--model", "tiny_cnn", "--model-arg", "resolution=16", "--num_runs", "1"]) == 0
    assert "zoo:tiny_cnn?resolution=16&quantization=none" in capsys.readouterr().out


def test_inference_diff_takes_tflite_model_file_flag(capsys, tmp_path):
    path = tmp_path / "m.tflite"
    assert main(["export", "--zoo", "tiny_cnn", "--zoo_args", "resolution=16", "-o", str(path)]) == 0
    assert main(["inference-diff", "--model_file", str(path), "--delegate", "gpu", "--num_runs", "2"]) == 0
    assert "OutputDiff[0]: avg_error=" in capsys.readouterr().out


def test_model_flag_mistakes_are_one_line(capsys):
    assert main(["inspect"]) == 1
    assert "give exactly one of --graph FILE.tflite or --zoo NAME" in capsys.readouterr().err
    assert main(["export", "--zoo", "tiny_cnn", "--zoo_args", "resolution", "-o", "x.tflite"]) == 1
    assert "--zoo_args: 'resolution' is not key=value" in capsys.readouterr().err
    # The last one won, silently, whether in one flag or in two.
    for zoo_args in (["resolution=16,resolution=32"], ["resolution=16", "--zoo_args", "resolution=32"]):
        assert main(["infer", "--zoo", "tiny_cnn", "--zoo_args", *zoo_args]) == 1
        assert "dtb infer: error: --zoo_args: 'resolution' is given twice (16 and 32)" in capsys.readouterr().err


@pytest.mark.parametrize("flag,value,message", [
    ("--num_threads", "0", "must be -1 (all big cores) or at least 1"),   # was the Interpreter's traceback
    ("--num_threads", "-5", "must be -1 (all big cores) or at least 1"),
    ("--num_runs", "0", "must be at least 1"),                            # ran once, silently
    ("--num_runs", "-1", "must be 0 or more"),
    ("--num_runs", "100000000000", "must be at most 10000"),              # ran for days
    ("--seed", "-1", "must be 0 or more"),                                # numpy's traceback
    ("--seed", str(2**64), "must be at most 9223372036854775807"),
])
def test_infer_arguments_out_of_range_are_one_usage_line(capsys, monkeypatch, flag, value, message):
    from runtime.cli import infer

    calls = []

    def invoke(self):  # a run that should not have started stops at once instead of running on
        calls.append(1)
        if len(calls) > 3:
            raise AssertionError("dtb infer kept invoking")
    monkeypatch.setattr(infer.Interpreter, "invoke", invoke)
    with pytest.raises(SystemExit) as exit_:
        main(["infer", "--zoo", "tiny_cnn", flag, value])
    assert exit_.value.code == 2 and not calls
    err = capsys.readouterr().err
    assert f"dtb infer: error: argument {flag}: {message}" in err and "Traceback" not in err


def test_export_to_a_folder_an_empty_name_or_a_fifo_is_one_line(tmp_path, capsys):
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for output, message in ((str(tmp_path), "it is a directory, not a regular file"),
                            (f"{tmp_path}{os.sep}", "it is a directory, not a regular file"),
                            ("", "cannot write to an empty file name"),
                            (str(fifo), "it is a FIFO, not a regular file")):  # was replaced by a file
        assert main(["export", "--zoo", "tiny_cnn", "-o", output]) == 1
        err = capsys.readouterr().err
        assert err.startswith("dtb export: error: cannot write") and message in err and err.count("\n") == 1, err
    assert fifo.is_fifo() and sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


def test_export_without_permission_to_write_is_one_line_and_leaves_no_temporary_file(tmp_path, capsys,
                                                                                       monkeypatch):
    import os

    def refuse(src, dst):
        raise PermissionError(13, "Permission denied", str(dst))
    monkeypatch.setattr(os, "replace", refuse)  # root may write anywhere: the refusal is simulated
    out = tmp_path / "m.tflite"
    assert main(["export", "--zoo", "tiny_cnn", "-o", str(out)]) == 1
    assert capsys.readouterr().err == f"dtb export: error: cannot write {out}: Permission denied\n"
    assert list(tmp_path.iterdir()) == []


def _inspect_rows(out: str) -> dict[str, set[str]]:
    """op name -> what `dtb inspect` says runs it, over the op rows of its table."""
    rows: dict[str, set[str]] = {}
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0].isdigit():
            has = "custom kernel" if line.endswith("custom kernel") else \
                "cost only" if line.endswith("cost only") else parts[-1]
            rows.setdefault(parts[1], set()).add(has)
    return rows


def test_inspect_says_which_ops_have_a_kernel_custom_kernel_or_only_a_cost(tmp_path, capsys):
    from runtime.ir.graph import DType, Graph, Op, Tensor
    from runtime.ir.optypes import OpType
    from runtime.model.tflite_write import save

    assert main(["inspect", "--graph", "tests/fixtures/published/selfie_segmentation.tflite"]) == 0
    rows = _inspect_rows(capsys.readouterr().out)
    assert rows["Convolution2DTransposeBias"] == {"custom kernel"} and rows["CONV_2D"] == {"kernel"}
    assert main(["inspect", "--graph", "tests/fixtures/quant/mobilenet_v1_int8_float_io.tflite"]) == 0
    assert _inspect_rows(capsys.readouterr().out)["QUANTIZE"] == {"kernel"}
    # a custom op no kernel is registered for: listed as cost only, and the model still inspects
    tensors = (Tensor("x", (2, 3), DType.FLOAT32), Tensor("y", (2, 3), DType.FLOAT32))
    path = tmp_path / "unknown.tflite"
    save(Graph(tensors, (Op(OpType.CUSTOM, (0,), (1,), custom_code="NoSuchOp"),), (0,), (1,)), path)
    assert main(["inspect", "--graph", str(path)]) == 0
    out = capsys.readouterr().out
    assert _inspect_rows(out)["NoSuchOp"] == {"cost only"}
    assert "ops: 0 kernel, 0 custom kernel, 1 cost only" in out
