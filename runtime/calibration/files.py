"""Measurement files by type: CSV rows, AI Hub's perf.yaml or profile-job results, benchmark_model logs."""

from __future__ import annotations

import stat
import warnings
from dataclasses import dataclass
from pathlib import Path

from runtime.calibration import aihub
from runtime.calibration.rows import MeasurementError, MeasurementWarning, Row, read_csv, read_log

__all__ = ["Measurements", "read_file", "read_measurements", "MAX_BYTES"]

# A measurement file larger than this is refused before it is read (a published set is kilobytes;
# MAX_ROWS rows of a benchmark_model log with op profiling are a few megabytes).
MAX_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class Measurements:
    """A file's rows, and one line per published measurement that gave none (saying why)."""

    rows: tuple[Row, ...]
    skipped: tuple[str, ...] = ()


def read_file(path: str | Path, device: str | None = None, model: str | None = None) -> Measurements:
    """By file type: .csv rows, AI Hub's perf.yaml (.yaml/.yml) or profile-job results (.json), else a
    benchmark_model log; checked, errors name file:line."""
    path = Path(path)
    text = _read_text(path)
    if path.suffix.lower() == ".csv":
        return Measurements(tuple(read_csv(text, str(path))))
    if aihub.is_aihub_file(path):
        found = aihub.read_aihub(path, text, device, model)
        return Measurements(found.rows, tuple(s.line for s in found.skipped))
    return Measurements(tuple(read_log(text, str(path), device, model)))


def _read_text(path: Path) -> str:
    """The file's text: a regular file (a FIFO or a device would block or never end) of at most MAX_BYTES."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise MeasurementError(f"{path}: not a regular file (a folder, FIFO or device); give a measurement file")
        if info.st_size > MAX_BYTES:
            raise MeasurementError(f"{path}: {info.st_size} bytes, over the limit of {MAX_BYTES} for a measurement file")
        with path.open("rb") as f:
            data = f.read(MAX_BYTES + 1)   # the file may have grown since stat
        if len(data) > MAX_BYTES:
            raise MeasurementError(f"{path}: over the limit of {MAX_BYTES} bytes for a measurement file")
        return data.decode("utf-8").removeprefix("\ufeff")   # a spreadsheet's "CSV UTF-8" starts with a BOM
    except OSError as exc:
        raise MeasurementError(f"{path}: cannot read the measurements: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise MeasurementError(f"{path}: cannot read the measurements: not UTF-8 text ({exc.reason} at byte "
                               f"{exc.start})") from None


def read_measurements(path: str | Path, device: str | None = None, model: str | None = None) -> list[Row]:
    """read_file's rows; each skipped measurement is a MeasurementWarning, so none goes unsaid."""
    found = read_file(path, device, model)
    for line in found.skipped:
        warnings.warn(line, MeasurementWarning, stacklevel=2)
    return list(found.rows)
