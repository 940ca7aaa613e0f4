"""The accuracy tables of docs/accuracy.md are what benchmarks/accuracy_table.py prints: a sample of rows recomputed on every image."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("accuracy_table", ROOT / "benchmarks" / "accuracy_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _page_rows() -> set[str]:
    return {line for line in (ROOT / "docs" / "accuracy.md").read_text().splitlines() if line.startswith("| ")}


# The rows that carry the page's point: an 8-bit model gains a little on the float16 GPU and
# matches the CPU exactly on the integer delegates; and a row where the delegate takes nothing.
SAMPLE = [("classification", "int8", "pixel4", ""), ("classification", "int8", "pixel4", "gpu"),
          ("classification", "int8", "pixel3", "hexagon"), ("detection", "int8", "iphone_xs", "gpu"),
          ("detection", "float16", "pixel4", "nnapi")]


@pytest.mark.parametrize("task,precision,phone,delegate", SAMPLE)
def test_accuracy_page_row_is_reproduced(task, precision, phone, delegate):
    table = _script()
    pattern, flags = table._task_flags(task)
    record = table._one(task, pattern.format(precision), flags, phone, delegate, 0)
    row = table._row(task, precision, phone, delegate, record)
    assert row in _page_rows(), f"docs/accuracy.md lacks this row (rerun benchmarks/accuracy_table.py): {row}"
