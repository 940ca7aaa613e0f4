""".tflite.xz models: read through the one loader decompressed in memory, bounded in size, damage named."""

from __future__ import annotations

import lzma
import shutil
from pathlib import Path

import pytest

from runtime.calibration.files import read_file
from runtime.cli.main import main as cli
from runtime.ir.errors import ModelError
from runtime.model import tflite_read
from runtime.model.loader import ModelSource, load_model
from runtime.model.tflite_write import dumps
from runtime.zoo import build

_DECOMPRESSOR = lzma.LZMADecompressor
NEW_PERF = Path(__file__).parent / "fixtures" / "aihub" / "new" / "tiny_cnn" / "perf.yaml"


@pytest.fixture(scope="module")
def flatbuffer() -> bytes:
    return dumps(build("tiny_cnn"))


def _xz(path: Path, content: bytes) -> Path:
    path.write_bytes(lzma.compress(content, format=lzma.FORMAT_XZ))
    return path


def test_a_tflite_xz_loads_as_the_tflite_it_holds(tmp_path, flatbuffer):
    plain = tmp_path / "m.tflite"
    plain.write_bytes(flatbuffer)
    packed = _xz(tmp_path / "m.tflite.xz", flatbuffer)
    a, b = load_model(ModelSource(path=plain)), load_model(ModelSource(path=packed))
    assert [op.type for op in a.ops] == [op.type for op in b.ops] and len(a.ops) > 0
    assert [t.shape for t in a.tensors] == [t.shape for t in b.tensors]
    assert tflite_read.model_bytes(packed) == flatbuffer


class _Counting:
    """lzma.LZMADecompressor that records every output chunk's size, to count what decompressing allocated."""

    sizes: list[int] = []

    def __init__(self, *args, **kwargs):
        self._inner = _DECOMPRESSOR(*args, **kwargs)

    def decompress(self, data, max_length=-1):
        out = self._inner.decompress(data, max_length)
        _Counting.sizes.append(len(out))
        return out

    def __getattr__(self, name):
        return getattr(self._inner, name)


def test_an_xz_bomb_stops_at_the_limit_with_one_error_naming_the_file(tmp_path, monkeypatch):
    bomb = _xz(tmp_path / "bomb.tflite.xz", bytes(8 << 20))     # 8 MiB of zeros in about a kilobyte
    assert bomb.stat().st_size < 10_000
    _Counting.sizes = []
    monkeypatch.setattr(tflite_read.lzma, "LZMADecompressor", _Counting)
    with pytest.raises(ModelError, match=rf"{bomb}: the xz stream expands to more than 1048576 bytes"):
        tflite_read.load(bomb, memory_limit=1 << 20)
    assert sum(_Counting.sizes) <= (1 << 20) + 1        # never decompressed past the limit


def test_the_limit_never_exceeds_what_a_flatbuffer_can_address():
    assert tflite_read.MAX_FLATBUFFER_BYTES == 2**31 - 1


@pytest.mark.parametrize("damage, message", [
    (lambda b: b[:len(b) // 2], "is a truncated xz stream"),
    (lambda b: b[:40] + bytes(x ^ 0x5A for x in b[40:80]) + b[80:], "is not a valid xz stream"),
    (lambda b: b"not xz at all", "is not a valid xz stream"),
])
def test_a_damaged_xz_stream_is_one_error_naming_the_file(tmp_path, flatbuffer, damage, message):
    path = tmp_path / "bad.tflite.xz"
    path.write_bytes(damage(lzma.compress(flatbuffer, format=lzma.FORMAT_XZ)))
    with pytest.raises(ModelError, match=rf"{path} {message}"):
        load_model(ModelSource(path=path))


def test_a_plain_file_named_xz_is_still_refused_as_a_model(tmp_path):
    path = _xz(tmp_path / "text.tflite.xz", b"hello, not a flatbuffer")
    with pytest.raises(ModelError, match=rf"{path} is not a TFLite model"):
        load_model(ModelSource(path=path))


def test_the_cli_benchmarks_and_inspects_an_xz_model_and_prints_its_decompressed_size(tmp_path, flatbuffer, capsys):
    path = str(_xz(tmp_path / "m.tflite.xz", flatbuffer))
    assert cli(["inspect", "--graph", path]) == 0
    assert "CONV_2D" in capsys.readouterr().out
    assert cli(["benchmark", "--graph", path, "--timing_only", "--num_runs", "2"]) == 0
    assert f"The input model file size (MB): {len(flatbuffer) / 1e6:g}" in capsys.readouterr().out


def test_the_cli_reports_a_damaged_xz_model_without_a_traceback(tmp_path, flatbuffer, capsys):
    path = tmp_path / "bad.tflite.xz"
    path.write_bytes(lzma.compress(flatbuffer, format=lzma.FORMAT_XZ)[:-30])
    assert cli(["benchmark", "--graph", str(path), "--timing_only"]) != 0
    err = capsys.readouterr().err
    assert f"{path} is" in err and "xz stream" in err and "Traceback" not in err


def test_ai_hub_rows_find_a_compressed_model_file(tmp_path, flatbuffer, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "tiny_cnn"
    folder.mkdir()
    shutil.copy(NEW_PERF, folder / "perf.yaml")
    _xz(folder / "tiny_cnn_float.tflite.xz", flatbuffer)
    [row] = read_file(folder / "perf.yaml", device="galaxy_s23").rows
    assert row.model == str(folder / "tiny_cnn_float.tflite.xz")
