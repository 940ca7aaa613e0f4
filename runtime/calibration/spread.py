"""How far each fitted parameter moves when one model family is held out: which rows pin it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from runtime.calibration.evaluate import Param
from runtime.calibration.fit import CrossValidation, Fit

__all__ = ["Spread", "spreads"]


@dataclass(frozen=True)
class Spread:
    """One parameter over a cross-validation's folds: its value fitted to every row, its least and
    greatest value with one family held out, and the fold farthest from the full fit (by ratio).

    A parameter that swings when one family leaves is pinned by that family alone: held out, its
    rows are predicted with a value the other rows set, often near the prior or pushed by rows no
    mechanism explains. Measuring more models that exercise it is what steadies it."""

    param: Param
    fitted: float
    low: float
    high: float
    widest: str       # the fold's label ("family X", or a model's label)
    ratio: float      # that fold's value / fitted

    @property
    def swing(self) -> float:
        """How far the widest fold moved it (_swing of its ratio)."""
        return _swing(self.ratio)


def _swing(ratio: float) -> float:
    """|log(ratio)|: a move by a factor, the same up or down."""
    return abs(math.log(ratio)) if ratio > 0 else math.inf


def spreads(full: Fit, cv: CrossValidation) -> list[Spread]:
    """The full fit's informed parameters, each over the folds that fitted it (a fold whose rows use
    none of a parameter's unit leaves it out), widest swing first."""
    out = []
    for k, (param, fitted) in enumerate(zip(full.params, full.values)):
        if not full.is_informed(k) or fitted <= 0:
            continue
        values = [(fold.label, v) for fold in cv.folds
                  for p, v in zip(fold.fit.params, fold.fit.values) if p.path == param.path]
        if not values:
            continue
        label, value = max(values, key=lambda lv: _swing(lv[1] / fitted))
        out.append(Spread(param, fitted, min(v for _, v in values), max(v for _, v in values), label,
                          value / fitted))
    return sorted(out, key=lambda s: -s.swing)
