"""Op costs priced as arrays (sim.price, sim.charge.Pricer) equal sim.cost.op_cost's, op by op, on every unit kind."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from runtime.calibration.base import load_base
from runtime.calibration.evaluate import Evaluator
from runtime.calibration.fit import candidate_params
from runtime.calibration.rows import Row
from runtime.cli.calibrate import row_models
from sim.charge import Compute, Pricer, Run, Bill
from sim.cost import OpClass, Precision, Work, op_cost
from sim.price import facts, layout, price
from sim.profile import PROFILE_DIR
from sim.soc import SoC
from sim.unit import Scales, Tag

MODELS = PROFILE_DIR.parent.parent / "tests" / "fixtures" / "models"
_FLOAT = ("mobilenet_v1.tflite", "resnet_style.tflite", "unet_style.tflite", "efficientnet.tflite")
_INT8 = ("mobilenet_v1", (("alpha", 0.25), ("resolution", 96)), "int8")
# per phone, the delegates whose units its rows reach: every unit kind with mechanisms on and off
_PHONES = {"pixel3": ("cpu", "gpu", "nnapi", "hexagon"), "iphone_xs": ("cpu", "coreml", "gpu"),
           "galaxy_s24": ("cpu", "gpu", "qnn")}


def _rows(phone: str) -> list[Row]:
    rows = []
    for delegate in _PHONES[phone]:
        for threads in ((1, 4) if delegate == "cpu" else (4,)):
            rows += [Row(str(MODELS / name), (), "none", phone, delegate, threads, 1.0, f"{delegate}{threads}:{name}")
                     for name in _FLOAT]
            model, args, quant = _INT8
            rows.append(Row(model, args, quant, phone, delegate, threads, 1.0, f"{delegate}{threads}:int8"))
    return rows


@pytest.fixture(scope="module", params=sorted(_PHONES))
def evaluator(request):
    phone = request.param
    base = str(PROFILE_DIR / "priors" / "galaxy_s24.yaml") if phone == "galaxy_s24" else phone
    data, _, _, path = load_base(base)
    return Evaluator(_rows(phone), data, str(path), row_models)


def _groups(evaluator, profile):
    """Every op the rows charge on `profile`, by (unit, scale, threads)."""
    soc = SoC(profile)
    out: dict[tuple, list] = {}
    for row_sim in evaluator.sims:
        row_sim.bill(profile, soc)   # the delegates read the profile's costs
        for c in row_sim._executor.on(soc, row_sim.row.threads).charges(Tag(), math=False):
            if isinstance(c, Compute):
                out.setdefault((c.unit, c.scale, c.threads), []).append(c.work)
    return out


def _moved(evaluator, factor: float):
    params = candidate_params(evaluator.data, set().union(*(s.used for s in evaluator.sims)))
    values = [min(p.hi, p.prior * (factor if k % 2 else 1 / factor)) for k, p in enumerate(params)]
    return evaluator.profile(params, values)


def _assert_same(works, rates, bandwidth, taken_under=None):
    got = price(facts(works, taken_under or rates), rates, bandwidth)
    want = [op_cost(w, rates, bandwidth) for w in works]
    for name, field in (("seconds", "seconds"), ("compute", "compute_s"), ("memory", "memory_s"),
                        ("dispatch", "dispatch_s")):
        np.testing.assert_allclose(getattr(got, name), [getattr(c, field) for c in want], rtol=1e-12, atol=0,
                                   err_msg=name)


def test_priced_arrays_equal_op_cost_on_every_unit(evaluator):
    profile = _moved(evaluator, 1.0)
    groups = _groups(evaluator, profile)
    kinds = set()
    for (unit, scale, threads), works in groups.items():
        kinds.add(unit.spec.kind.value)
        _assert_same(works, unit.rates_at(threads, scale), unit.alone_bandwidth())
    assert len(kinds) >= 3, kinds


def test_facts_taken_at_one_rate_price_right_at_another(evaluator):
    """What the Pricer relies on: facts depend on a unit's layout only, never on a rate a fit moves."""
    before, after = _groups(evaluator, _moved(evaluator, 1.0)), _groups(evaluator, _moved(evaluator, 1.7))
    by_name = {(u.name, s, t): (u, w) for (u, s, t), w in before.items()}
    checked = 0
    for (unit, scale, threads), works in after.items():
        old, old_works = by_name[(unit.name, scale, threads)]
        rates, old_rates = unit.rates_at(threads, scale), old.rates_at(threads, scale)
        assert layout(rates) == layout(old_rates)
        if rates != old_rates:
            checked += 1
        _assert_same(works, rates, unit.alone_bandwidth(), taken_under=old_rates)
    assert checked, "the moved profile moved no unit's rates"


def test_a_precision_the_unit_lacks_is_op_costs_error():
    data, _, _, path = load_base("pixel3")
    from sim.profile import profile_from_dict

    dsp = SoC(profile_from_dict(data, str(path))).unit("dsp")
    rates = dsp.rates_at(1, Scales())
    work = Work("CONV_2D", OpClass.CONV, Precision.FLOAT32, macs=1000, bytes_read=100)
    with pytest.raises(ValueError) as want:
        op_cost(work, rates)
    with pytest.raises(ValueError) as got:
        facts([work], rates)
    assert str(got.value) == str(want.value)
    no_macs = dataclasses.replace(rates, macs_per_s={Precision.INT8: 0.0})
    int8 = dataclasses.replace(work, precision=Precision.INT8)
    with pytest.raises(ValueError, match="no MAC rate for int8"):
        price(facts([int8], rates), no_macs)


def test_the_pricer_sums_each_ledger_as_sequential_does(evaluator):
    """Tallies of every row at a moved profile, priced together, against the same rows summed
    charge by charge (sim.charge.sequential through Executor.alone)."""
    profile = _moved(evaluator, 1.3)
    soc = SoC(profile)
    bills = [s.bill(profile, soc) for s in evaluator.sims]
    priced = Pricer().seconds(bills, soc)
    for row_sim, seconds in zip(evaluator.sims, priced):
        alone = row_sim._executor.on(SoC(profile), row_sim.row.threads).alone().seconds
        assert seconds == pytest.approx(alone, rel=1e-12), row_sim.row.label


def test_a_run_that_begins_a_graph_resets_the_htps_prefetch():
    """A run after a compute-heavy one on the HTP finds its weights fetched ahead, unless it
    begins a graph of its own (then it pays them, as op_cost says)."""
    data, _, _, path = load_base(str(PROFILE_DIR / "priors" / "galaxy_s24.yaml"))
    from sim.profile import profile_from_dict

    soc = SoC(profile_from_dict(data, str(path)))
    weights = Work("CONV_2D", OpClass.CONV, Precision.INT8, macs=10**6, bytes_read=2 << 20, bytes_written=4096,
                   weight_bytes=2 << 20, gemm=(64, 64, 256), spatial=(8, 8), channels=64)
    heavy = Work("CONV_2D", OpClass.CONV, Precision.INT8, macs=5 * 10**8, bytes_read=4096, bytes_written=4096,
                 gemm=(64, 64, 4096), spatial=(8, 8), channels=64)
    first = Bill((Run("dsp", (heavy,), begins=True),), 0.0)
    fresh = Pricer().seconds([first, Bill((Run("dsp", (weights,), begins=True),), 0.0)], soc)
    carried = Pricer().seconds([first, Bill((Run("dsp", (weights,)),), 0.0)], soc)
    dsp = soc.unit("dsp")
    assert fresh[1] == pytest.approx(op_cost(weights, dsp.rates_at(1, Scales()), dsp.alone_bandwidth()).seconds,
                                     rel=1e-12)
    assert carried[1] < 0.9 * fresh[1]
