"""Measurement files by type: CSV rows, AI Hub's perf.yaml or profile-job results, benchmark_model logs."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

from runtime.calibration import aihub
from runtime.calibration.rows import MeasurementError, MeasurementWarning, Row, read_csv, read_log

__all__ = ["Measurements", "read_file", "read_measurements"]


@dataclass(frozen=True)
class Measurements:
    """A file's rows, and one line per published measurement that gave none (saying why)."""

    rows: tuple[Row, ...]
    skipped: tuple[str, ...] = ()


def read_file(path: str | Path, device: str | None = None, model: str | None = None) -> Measurements:
    """By file type: .csv rows, AI Hub's perf.yaml (.yaml/.yml) or profile-job results (.json), else a
    benchmark_model log; checked, errors name file:line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MeasurementError(f"{path}: cannot read the measurements: {exc}") from None
    if path.suffix.lower() == ".csv":
        return Measurements(tuple(read_csv(text, str(path))))
    if aihub.is_aihub_file(path):
        found = aihub.read_aihub(path, text, device, model)
        return Measurements(found.rows, tuple(s.line for s in found.skipped))
    return Measurements(tuple(read_log(text, str(path), device, model)))


def read_measurements(path: str | Path, device: str | None = None, model: str | None = None) -> list[Row]:
    """read_file's rows; each skipped measurement is a MeasurementWarning, so none goes unsaid."""
    found = read_file(path, device, model)
    for line in found.skipped:
        warnings.warn(line, MeasurementWarning, stacklevel=2)
    return list(found.rows)
