"""What a conformance run found: one row per case, the failures, and a plain-text table."""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Verdict", "CaseResult", "ConformanceReport"]


class Verdict(enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    REJECTED = "rejected"


@dataclass(frozen=True)
class CaseResult:
    """One generated instance (or lifecycle case) and how the delegate did on it.

    `max_error` and `tolerance` are in `unit`: "steps" (quantization steps of an 8-bit output) or
    "abs" (absolute difference of float outputs); None when nothing was compared."""

    op: str
    dtype: str
    index: int
    shapes: str
    options: str
    verdict: Verdict
    max_error: float | None = None
    tolerance: float | None = None
    unit: str = ""
    mode: str = ""
    message: str = ""
    case_id: str = ""

    @property
    def name(self) -> str:
        """A short stable label, e.g. 'CONV_2D/int8/2' or 'lifecycle/prepare' (the pytest item id)."""
        return self.case_id or f"{self.op}/{self.dtype}/{self.index}"


def _number(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "steps":
        return f"{value:g} st"
    return f"{value:.2e}"


_COLUMNS = ("op", "dtype", "shapes", "options", "mode", "verdict", "error", "tolerance", "message")


@dataclass(frozen=True)
class ConformanceReport:
    """Every case of one run. `unclaimed`: op/dtype pairs the delegate took no instance of, with
    the reason it gave; `notes`: what the run adjusted or could not do."""

    delegate: str
    device: str
    seed: int
    examples: int
    cases: tuple[CaseResult, ...]
    unclaimed: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def failures(self) -> tuple[CaseResult, ...]:
        return tuple(c for c in self.cases if c.verdict is Verdict.FAIL)

    @property
    def ok(self) -> bool:
        return not self.failures

    def count(self, verdict: Verdict) -> int:
        return sum(c.verdict is verdict for c in self.cases)

    def summary(self) -> str:
        unclaimed = {pair for pair, _ in self.unclaimed}
        claimed = len({f"{c.op}/{c.dtype}" for c in self.cases if c.op != "lifecycle"} - unclaimed)
        status = "PASS" if self.ok else "FAIL"
        return (f"{status}: {self.delegate} on {self.device} (seed {self.seed}, {self.examples} examples "
                f"per op): {self.count(Verdict.PASS)} passed, {self.count(Verdict.FAIL)} failed, "
                f"{self.count(Verdict.REJECTED)} rejected; {claimed} op/dtype pairs claimed, "
                f"{len(self.unclaimed)} not claimed")

    def to_text(self, width: int = 60) -> str:
        """The cases as an aligned table, then the unclaimed pairs grouped by reason."""
        rows = [_COLUMNS] + [(c.op, c.dtype, c.shapes, c.options, c.mode, c.verdict.value,
                              _number(c.max_error, c.unit), _number(c.tolerance, c.unit),
                              _clip(c.message, width)) for c in self.cases]
        sizes = [max(len(r[k]) for r in rows) for k in range(len(_COLUMNS))]
        lines = ["  ".join(cell.ljust(size) for cell, size in zip(row, sizes)).rstrip() for row in rows]
        lines.insert(1, "  ".join("-" * size for size in sizes))
        by_reason: dict[str, list[str]] = {}
        for pair, reason in self.unclaimed:
            by_reason.setdefault(reason or "(no reason given)", []).append(pair)
        if by_reason:
            lines.append("")
            lines.append("Not claimed:")
            lines.extend(f"  {', '.join(pairs)} -- {reason}" for reason, pairs in by_reason.items())
        lines.extend(f"Note: {note}" for note in self.notes)
        return "\n".join(lines)


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 3] + "..."
