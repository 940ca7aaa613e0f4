"""The Snapdragon phones' measurement files: AI Hub's published rows as the calibration reads them."""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import io
from pathlib import Path

import pytest

from runtime.calibration.rows import read_csv

ROOT = Path(__file__).resolve().parent.parent
MEASUREMENTS = ROOT / "sim" / "profiles" / "measurements"
TABLE = ROOT.parent / "shared" / "reference" / "calibration" / "aihub_tflite.tsv"
PHONES = ("galaxy_s23", "galaxy_s24", "sd8_elite_qrd", "sd8_elite_gen5_qrd", "sd7_gen4_qrd")


def _script():
    spec = importlib.util.spec_from_file_location("make_aihub_rows", ROOT / "tests" / "fixtures" / "make_aihub_rows.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("phone", PHONES)
def test_every_row_names_a_rebuilt_model_its_family_and_its_op_split(phone):
    rows = read_csv((MEASUREMENTS / f"{phone}.csv").read_text(), f"{phone}.csv")
    assert rows and {r.device for r in rows} == {phone}
    for row in rows:
        assert (MEASUREMENTS / row.model).is_file(), row.model
        assert row.family and row.split is not None and row.split.total > 0
        assert row.delegate == "qnn" or row.split.npu == 0     # the NPU's rows are the QNN delegate's


def test_no_published_row_is_dropped_silently():
    """Every row of the phones' releases is either in a measurement file or listed as unbuilt."""
    unbuilt = list(csv.DictReader(io.StringIO((MEASUREMENTS / "aihub" / "unbuilt.tsv").read_text()), delimiter="\t"))
    for row in unbuilt:
        assert not (MEASUREMENTS / "aihub" / row["missing file"]).is_file(), row
        # nor under the model's own name: a component renamed between releases (SqueezeNet-1_1, then
        # SqueezeNet-1.1) once made a rebuilt model's rows look unbuilt
        assert not (MEASUREMENTS / "aihub" / f"{row['model_id']}_{row['precision']}.tflite.xz").is_file(), row
    script = _script()
    if not TABLE.is_file():
        pytest.skip("AI Hub's table is not beside the project")
    table = list(csv.DictReader(io.StringIO(TABLE.read_text(encoding="utf-8")), delimiter="\t"))
    for phone, (device, release) in script.PHONES.items():
        published = sum(1 for r in table if r["device"] == device and r["source_version"] == release)
        written = len(read_csv((MEASUREMENTS / f"{phone}.csv").read_text(), phone))
        assert written + sum(1 for r in unbuilt if r["phone"] == phone) == published, phone


def test_the_files_are_what_the_script_writes_from_the_table(tmp_path, monkeypatch):
    if not TABLE.is_file():
        pytest.skip("AI Hub's table is not beside the project")
    script = _script()
    monkeypatch.setattr(script, "OUT", tmp_path)
    (tmp_path / "aihub").mkdir()
    for f in (MEASUREMENTS / "aihub").glob("*.tflite.xz"):
        (tmp_path / "aihub" / f.name).symlink_to(f)
    monkeypatch.setattr(script, "MODELS", tmp_path / "aihub")
    monkeypatch.setattr("sys.argv", ["make_aihub_rows.py", "--table", str(TABLE)])
    with io.StringIO() as out, contextlib.redirect_stdout(out):
        assert script.main() == 0
    for phone in PHONES:
        assert (tmp_path / f"{phone}.csv").read_text() == (MEASUREMENTS / f"{phone}.csv").read_text(), phone
    assert (tmp_path / "aihub" / "unbuilt.tsv").read_text() == (MEASUREMENTS / "aihub" / "unbuilt.tsv").read_text()
