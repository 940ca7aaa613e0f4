"""Whether a results record's delegates ran, failed, or claimed nothing, read from its `delegates` entries.

One rule for every output (dtb run's summary, report.md and HTML, results.csv, results.json and
inference-diff): a delegate entry with an `error` failed, and the cell's figures are the CPU's (TFLite
removed every delegate and restored the original plan, or reran the failed invoke on the CPU); a cell
whose delegates all applied cleanly yet took no op claimed nothing, which is not a failure.
"""

from __future__ import annotations

import enum
from typing import Any, Mapping, Sequence

__all__ = ["CellStatus", "delegates_status", "record_status", "REMOVED_PREFIX"]

# The error runtime/interpreter/delegation.py gives the delegates applied before the one that failed:
# they did nothing wrong, so the cell's error names the one that did.
REMOVED_PREFIX = "removed when "


class CellStatus(enum.Enum):
    """What became of the delegates a cell asked for."""

    OK = "ok"                          # no delegate asked for, or at least one took ops and none failed
    NONE_DELEGATED = "none_delegated"  # every delegate applied without error, and none took an op
    FAILED = "failed"                  # a delegate failed (applied, prepared or invoked); the CPU ran instead


def _cause(delegates: Sequence[Mapping[str, Any]]) -> str:
    errors = [str(d["error"]) for d in delegates if isinstance(d, Mapping) and d.get("error")]
    own = [e for e in errors if not e.startswith(REMOVED_PREFIX)] or errors
    return "; ".join(dict.fromkeys(own))


def delegates_status(delegates: Sequence[Mapping[str, Any]]) -> tuple[CellStatus, str]:
    """The status of a record's `delegates` entries and, when failed, the error (else '')."""
    cause = _cause(delegates)
    if cause:
        return CellStatus.FAILED, cause
    if delegates and not any(d.get("nodes_delegated") for d in delegates if isinstance(d, Mapping)):
        return CellStatus.NONE_DELEGATED, ""
    return CellStatus.OK, ""


def record_status(rec: Mapping[str, Any]) -> tuple[CellStatus, str]:
    """A record's status: its `status` and `error` keys when it has them, else read from its delegates
    (records written before those keys existed, such as cells an older run left in results.db)."""
    if "status" not in rec:
        return delegates_status(rec.get("delegates") or ())
    try:
        status = CellStatus(rec["status"])
    except ValueError:
        known = ", ".join(s.value for s in CellStatus)
        raise ValueError(f"key 'status' is not one of {known}: {rec['status']!r}") from None
    return status, str(rec.get("error") or "")
