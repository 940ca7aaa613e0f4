"""The error band a cross-validation measured: per delegate, the held-out |error| and the models its rows covered."""

from __future__ import annotations

from typing import Sequence

from runtime.calibration.evaluate import Evaluator
from runtime.calibration.fit import Prediction
from runtime.calibration.rows import model_key
from sim.band import BandDelegate, ErrorBand, ModelTraits, delegate_band, model_traits

__all__ = ["error_band"]


def error_band(evaluator: Evaluator, predictions: Sequence[Prediction]) -> ErrorBand:
    """One band per delegate the rows have (BandDelegate's order): the leave-one-model-out errors of
    its rows, and the traits of the distinct models those rows measured."""
    traits: dict[tuple, ModelTraits] = {}
    for row, simulation in zip(evaluator.rows, evaluator.sims):
        if model_key(row) not in traits:
            traits[model_key(row)] = model_traits(simulation.graph)
    bands = []
    for delegate in BandDelegate:
        mine = [p for p in predictions if p.row.delegate == delegate.value]
        if mine:
            models = {model_key(p.row): traits[model_key(p.row)] for p in mine}
            bands.append(delegate_band(delegate.value, [p.error for p in mine], list(models.values())))
    return ErrorBand(tuple(bands))
