"""The calibration's fast re-timing: summed charges equal the SimPy run, and the work a fit does is counted."""

from __future__ import annotations

import pytest
import simpy

from runtime.calibration.base import load_base
from runtime.calibration.evaluate import Evaluator
from runtime.calibration.fit import candidate_params, fit
from runtime.calibration.rows import Row
from runtime.cli.calibrate import calibrate_files, row_models
from sim.profile import PROFILE_DIR

MEASUREMENTS = PROFILE_DIR / "measurements"
MODELS = PROFILE_DIR.parent.parent / "tests" / "fixtures" / "models"


@pytest.fixture(scope="module", params=["pixel3", "pixel4", "iphone_xs"])
def shipped(request):
    return calibrate_files([str(MEASUREMENTS / f"{request.param}.csv")], request.param)


def _vectors(params):
    """The prior and a vector that moves every parameter (some up, some down, within bounds)."""
    return [p.prior for p in params], [min(p.hi, p.prior * (1.3 if k % 2 else 0.7)) for k, p in enumerate(params)]


def _agree(evaluator, params):
    for values in _vectors(params):
        profile = evaluator.profile(params, values)
        summed = evaluator.run(params, values)
        for row_sim, (ms, _) in zip(evaluator.sims, summed):
            simulated, _ = row_sim.simulate(profile)
            assert ms == pytest.approx(simulated, rel=1e-9), row_sim.row.label


def test_summed_rows_equal_the_simulation_on_every_shipped_row(shipped):
    rows, base, evaluator, params = shipped
    summed = evaluator.counts.summed
    _agree(evaluator, params)
    assert evaluator.counts.summed - summed <= 2 * len(rows)
    assert not any(s.stateful for s in evaluator.sims)   # none of them needs the simulation


def test_summed_rows_equal_the_simulation_on_galaxy_s24_through_qnn():
    """Float fixture models on the HTP through QNN (float16), with CPU fallback ops and a GPU row."""
    rows = [Row(str(MODELS / name), (), "none", "galaxy_s24", "qnn", 4, 1.0, f"t:{k}")
            for k, name in enumerate(("mobilenet_v1.tflite", "resnet_style.tflite", "unet_style.tflite",
                                      "efficientnet.tflite"))]
    rows.append(Row(str(MODELS / "resnet_style.tflite"), (), "none", "galaxy_s24", "gpu", 2, 1.0, "t:gpu"))
    rows.append(Row("mobilenet_v1", (("alpha", 0.25), ("resolution", 96)), "int8", "galaxy_s24", "qnn", 4, 1.0,
                    "t:int8"))
    data, _, _, path = load_base(str(PROFILE_DIR / "priors" / "galaxy_s24.yaml"))
    evaluator = Evaluator(rows, data, str(path), row_models)
    params = candidate_params(data, set().union(*(s.used for s in evaluator.sims)))
    assert any(p.unit == "dsp" for p in params)
    _agree(evaluator, params)


def test_a_fit_loads_each_model_once_and_plans_each_delegate_once():
    """Rows of one model through three delegates at two thread counts: one model load, three plans;
    the fit's evaluations build no plan and run no SimPy."""
    args = (("alpha", 0.25), ("resolution", 96))
    rows = [Row("mobilenet_v1", args, "none", "pixel4", d, t, 1.0 + t, f"t:{d}{t}")
            for d in ("cpu", "gpu", "nnapi") for t in (1, 4)]
    data, _, _, path = load_base("pixel4")
    evaluator = Evaluator(rows, data, str(path), row_models)
    assert (evaluator.counts.models, evaluator.counts.plans) == (1, 3)
    params = candidate_params(data, set().union(*(s.used for s in evaluator.sims)))
    result = fit(evaluator, params, max_nfev=2)
    counts = evaluator.counts
    assert (counts.models, counts.plans, counts.simulations) == (1, 3, 0)
    # every row timing the fit asked for was summed or answered from an earlier one at the same values
    assert counts.summed + counts.reused >= result.evaluations and counts.summed > len(rows)
    # and the rows at another thread count are timed at it, not at the shared plan's
    ms = {r.source: s for r, s in zip(result.rows, result.simulated)}
    assert ms["t:cpu1"] > ms["t:cpu4"]


def test_an_evaluation_runs_no_simpy(shipped, monkeypatch):
    rows, base, evaluator, params = shipped
    before = (evaluator.counts.plans, evaluator.counts.simulations, evaluator.counts.summed)

    def refuse(*args, **kwargs):
        raise AssertionError("a SimPy run while evaluating rows")

    monkeypatch.setattr(simpy.Environment, "run", refuse)
    evaluator.run(params, [v * 1.01 for v in _vectors(params)[1]])   # values no test timed before
    counts = evaluator.counts
    assert (counts.plans, counts.simulations, counts.summed) == (before[0], before[1], before[2] + len(rows))


def test_a_control_flow_row_is_simulated_and_counted(tmp_path):
    """A WHILE loop's charges depend on the run (timing-only, one pass is charged and the first run
    differs): the row falls back to SimPy, is counted so, and keeps a plan of its own per thread count."""
    from runtime.model.tflite_write import save
    from tests.test_control_flow import while_model

    save(while_model(), tmp_path / "loop.tflite")
    rows = [Row(str(tmp_path / "loop.tflite"), (), "none", "pixel4", "cpu", t, 1.0, f"t:{t}") for t in (1, 2)]
    data, _, _, path = load_base("pixel4")
    evaluator = Evaluator(rows, data, str(path), row_models)
    assert all(s.stateful for s in evaluator.sims) and evaluator.counts.plans == 2
    evaluator.run([], [])
    assert evaluator.counts.simulations == 2 and evaluator.counts.summed == 0


def test_units_share_op_costs_only_with_the_same_spec():
    from sim.cost import OpClass, Precision, Work
    from sim.profile import load_profile
    from sim.soc import SoC

    one = SoC(load_profile("pixel4"))
    other = SoC(load_profile("pixel3"))
    work = Work("CONV_2D", OpClass.CONV, Precision.FLOAT32, macs=10**7, bytes_read=10**5)
    first = one.units["cpu_big"].alone_cost(work, threads=4)
    assert not other.units["cpu_big"].share_costs(one.units["cpu_big"])
    assert other.units["cpu_big"].alone_cost(work, threads=4) != first
    same = SoC(load_profile("pixel4"))
    assert same.units["cpu_big"].share_costs(one.units["cpu_big"])
    assert same.units["cpu_big"].alone_cost(work, threads=4) is first      # remembered, not costed again


def test_each_cross_validation_fold_takes_the_fits_iteration_limit():
    """--max_nfev bounds every fold's fit as it bounds the whole fit (the folds always took 30)."""
    from runtime.calibration.fit import cross_validate

    args = (("alpha", 0.25), ("resolution", 96))
    rows = [Row("mobilenet_v1", args, "none", "pixel4", "cpu", t, 1.0 + t, f"t:{t}", family=f"f{t}")
            for t in (1, 2, 4)]
    data, _, _, path = load_base("pixel4")
    evaluator = Evaluator(rows, data, str(path), row_models)
    params = candidate_params(data, set().union(*(s.used for s in evaluator.sims)))
    most = 1 * (len(params) + 1) + 1   # fit()'s bound on row-set evaluations for one iteration
    cv = cross_validate(evaluator, params, max_nfev=1)
    assert len(cv.folds) == 3 and all(f.fit.evaluations <= most for f in cv.folds)
