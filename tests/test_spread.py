"""What held-out folds say about each fitted parameter (runtime/calibration/spread.py)."""

from __future__ import annotations

import math

import pytest

from runtime.calibration.evaluate import Param
from runtime.calibration.fit import CrossValidation, Fit, Fold
from runtime.calibration.spread import spreads

POOL = Param(("units", "dsp", "efficiency", "pool"), 0.4, 0.05, 1.0, "dsp")
CONV = Param(("units", "dsp", "efficiency", "conv"), 0.4, 0.05, 1.0, "dsp")
GPU = Param(("units", "gpu", "dispatch_us"), 15.0, 2.0, 120.0, "gpu")


def _fit(params, values, informed=None) -> Fit:
    return Fit(tuple(params), tuple(values), (), (), 1, tuple(informed) if informed is not None else ())


def _cv(*folds) -> CrossValidation:
    return CrossValidation((), tuple(Fold(label, (k,), fit) for k, (label, fit) in enumerate(folds)))


def test_the_fold_that_moves_a_parameter_most_is_named_with_its_range():
    full = _fit([POOL, CONV], [0.7, 0.47])
    cv = _cv(("family inception", _fit([POOL, CONV], [0.17, 0.46])),
             ("family resnet", _fit([POOL, CONV], [0.99, 0.57])),
             ("family unet", _fit([POOL, CONV], [0.69, 0.47])))
    pool, conv = spreads(full, cv)
    assert pool.param is POOL and (pool.low, pool.high) == (0.17, 0.99)
    assert pool.widest == "family inception" and pool.ratio == pytest.approx(0.17 / 0.7)
    assert conv.widest == "family resnet" and conv.ratio == pytest.approx(0.57 / 0.47)
    assert pool.swing == pytest.approx(abs(math.log(0.17 / 0.7)))


def test_widest_swing_first_whether_up_or_down():
    full = _fit([POOL, CONV], [0.5, 0.5])
    cv = _cv(("a", _fit([POOL, CONV], [0.45, 1.0])), ("b", _fit([POOL, CONV], [0.55, 0.5])))
    assert [s.param for s in spreads(full, cv)] == [CONV, POOL]   # x2 moves more than x0.9 or x1.1
    down = _cv(("a", _fit([POOL, CONV], [0.2, 0.6])))
    assert [s.param for s in spreads(full, down)] == [POOL, CONV]  # x0.4 moves more than x1.2


def test_a_parameter_no_row_moves_or_no_fold_fitted_is_left_out():
    full = _fit([POOL, CONV, GPU], [0.7, 0.47, 15.0], informed=[True, True, False])
    # the gpu's rows were all in one family: the fold holding it out fits no gpu parameter at all
    cv = _cv(("family a", _fit([POOL, CONV], [0.6, 0.5])), ("family b", _fit([POOL], [0.8])))
    out = spreads(full, cv)
    assert [s.param for s in out] == [POOL, CONV]
    assert (out[1].low, out[1].high, out[1].widest) == (0.5, 0.5, "family a")   # only the fold that fitted it


def test_cross_validation_keeps_each_folds_fit_and_what_it_held(tmp_path):
    from runtime.calibration.fit import cross_validate
    from runtime.cli.calibrate import calibrate_files

    header = "model,args,quantization,device,delegate,threads,latency_ms,flags,family\n"
    rows = [(96, "cpu", 0.9, "small"), (96, "gpu", 1.4, "small"), (128, "cpu", 1.3, "big")]
    csv = tmp_path / "m.csv"
    csv.write_text(header + "".join(f"mobilenet_v1,alpha=0.25;resolution={r},none,pixel4,{d},4,{ms},,{fam}\n"
                                    for r, d, ms, fam in rows))
    _, _, evaluator, params = calibrate_files([str(csv)], "pixel4")
    cv = cross_validate(evaluator, params)
    assert [(f.label, f.held) for f in cv.folds] == [("family big", (2,)), ("family small", (0, 1))]
    assert [p.row.latency_ms for p in cv.predictions] == [0.9, 1.4, 1.3]     # the rows' own order
    # holding out the only gpu rows leaves a fit with no gpu parameter in it
    big, small = cv.folds
    assert any(p.unit == "gpu" for p in big.fit.params) and not any(p.unit == "gpu" for p in small.fit.params)
