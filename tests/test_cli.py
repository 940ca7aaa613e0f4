"""The dtb command line: happy paths, and one clear line with a non-zero exit for bad input."""

from __future__ import annotations

import subprocess
import sys

import pytest

from runtime.cli import main


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
    proc = subprocess.run([sys.executable, "-m", "runtime.cli", "infer", "--graph", str(path)],
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
    from runtime.graph import DType, Graph, Op, OpType, Tensor
    from runtime.tflite_write import save

    x, y = Tensor("x", (2, 3), DType.FLOAT32), Tensor("y", (2, 3), DType.FLOAT32)
    path = tmp_path / "gelu.tflite"
    save(Graph((x, y), (Op(OpType.GELU, (0,), (1,)),), (0,), (1,)), path)
    proc = subprocess.run([sys.executable, "-m", "runtime.cli", "infer", "--graph", str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (f"dtb infer: error: {path}: op #0 GELU (version 1, FLOAT32) is not supported "
                                   f"by the testbed's reference kernels")


def test_infer_shows_quantized_outputs_as_real_values(tmp_path, capsys):
    import numpy as np

    from runtime import zoo
    from runtime.tflite_write import save
    from runtime.zoo.quantize import quantize

    samples = [np.random.default_rng(k).standard_normal((1, 32, 32, 3)).astype(np.float32) for k in range(4)]
    path = tmp_path / "tiny_int8.tflite"
    save(quantize(zoo.build("tiny_cnn"), "int8", samples), path)
    assert main(["infer", "--graph", str(path)]) == 0
    out = capsys.readouterr().out
    assert "int8, dequantized" in out and "top-5: " in out
