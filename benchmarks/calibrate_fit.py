"""How long `dtb calibrate` takes, and the work it does, against re-timing every row by a SimPy run.

Synthetic rows (the default, ~200 of them, what a phone's Qualcomm AI Hub set holds) are simulated
on the shipped Pixel 3 profile with its CPU and GPU efficiencies scaled by known factors (so the fit
has work to do): MobileNet v1 widths and input sizes in float32 and uint8, SqueezeNet and MobileNet v2
at several sizes, CPU at 1 and 4 threads, GPU, NNAPI. Or a measurement file against its base profile.

Reported, in CPU seconds of this process (the host may be shared: compare ratios, not seconds):
model building and planning; one evaluation of every row, priced (the fit's way: each row's charges
as a sim.charge.Bill, each unit's ops priced at once as arrays) and simulated by SimPy (the way
before); the fit; with --cv the leave-one-model-out cross-validation, and whether the whole stays
within its target (the Pixel 3's 43 rows at most 60 s, ~200 rows at most 600 s); with --old the fit
again the old way, and whether it gives the same numbers. The counts are the fit's work: model
loads, plans built, profiles built, rows priced, rows simulated, row timings reused.

    python benchmarks/calibrate_fit.py [--rows 200] [--cv] [--old]
    python benchmarks/calibrate_fit.py --measurements sim/profiles/measurements/pixel3.csv --base pixel3 --cv
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runtime.calibration.base import load_base  # noqa: E402
from runtime.calibration.evaluate import Evaluator  # noqa: E402
from runtime.calibration.fit import candidate_params, cross_validate, fit  # noqa: E402
from runtime.calibration.rows import Row  # noqa: E402
from runtime.cli.calibrate import calibrate_files, row_models  # noqa: E402

FACTORS = {("units", "cpu_big", "efficiency", "conv"): 1.15, ("units", "gpu", "efficiency", "conv"): 0.9}
FLOAT = (("cpu", 4), ("cpu", 1), ("gpu", 4), ("nnapi", 4))
UINT8 = (("cpu", 4), ("cpu", 1), ("nnapi", 4))


def _grid():
    for alpha in (0.25, 0.5, 0.75, 1.0):
        for res in (128, 160, 192, 224):
            args = (("alpha", alpha), ("resolution", res))
            for d, t in FLOAT:
                yield "mobilenet_v1", args, "none", d, t
            for d, t in UINT8:
                yield "mobilenet_v1", args, "uint8", d, t
    for res in (128, 160, 192, 224):
        for d, t in FLOAT:
            yield "squeezenet", (("resolution", res),), "none", d, t
    for alpha in (0.35, 0.5, 0.75, 1.0):
        for res in (96, 128, 160, 192, 224):
            for d, t in FLOAT:
                yield "mobilenet_v2", (("alpha", alpha), ("resolution", res)), "none", d, t


def _synthetic(count: int):
    """Rows measured on the scaled profile, the base profile's data and its path."""
    data, _, _, path = load_base("pixel3")
    truth = copy.deepcopy(data)
    for key, factor in FACTORS.items():
        node = truth
        for k in key[:-1]:
            node = node[k]
        node[key[-1]] *= factor
    rows = [Row(m, a, q, "pixel3", d, t, 1.0, f"grid:{i}") for i, (m, a, q, d, t) in enumerate(_grid())][:count]
    measured = [ms for ms, _ in Evaluator(rows, truth, "truth", row_models).run([], [])]
    rows = [Row(r.model, r.args, r.quantization, r.device, r.delegate, r.threads, ms, r.source)
            for r, ms in zip(rows, measured)]
    return rows, data, str(path)


def _cpu(fn):
    t0 = time.process_time()
    out = fn()
    return out, time.process_time() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200, help="synthetic rows (at most %(default)s in the grid's order)")
    ap.add_argument("--measurements", help="a measurement file to fit instead of synthetic rows")
    ap.add_argument("--base", default="pixel3", help="the base profile of --measurements")
    ap.add_argument("--cv", action="store_true", help="also time the leave-one-model-out cross-validation")
    ap.add_argument("--old", action="store_true", help="also fit the old way (every row simulated): minutes")
    args = ap.parse_args()

    def build():
        if args.measurements:
            rows, (data, _, _, path), evaluator, _ = calibrate_files([args.measurements], args.base)
            return rows, data, str(path), evaluator
        rows, data, source = _synthetic(args.rows)
        return rows, data, source, Evaluator(rows, data, source, row_models)

    (rows, data, source, evaluator), build_s = _cpu(build)
    params = candidate_params(data, set().union(*(s.used for s in evaluator.sims)))
    prior = [p.prior for p in params]
    moved = [v * 1.001 for v in prior]
    summed, sum_s = _cpu(lambda: evaluator.run(params, moved))
    profile = evaluator.profile(params, moved)
    simulated, sim_s = _cpu(lambda: [s.simulate(profile) for s in evaluator.sims])
    worst = max(abs(a / b - 1) for (a, _), (b, _) in zip(summed, simulated))
    print(f"rows: {len(rows)}  parameters: {len(params)}  models built and planned: {build_s:.1f} s CPU")
    print(f"one evaluation of every row: priced {sum_s * 1e3:.0f} ms, simulated {sim_s * 1e3:.0f} ms "
          f"({sim_s / sum_s:.1f}x); largest relative difference {worst:.1e}")
    result, fit_s = _cpu(lambda: fit(evaluator, params))
    print(f"fit: {fit_s:.1f} s CPU, {result.evaluations} evaluations of the row set")
    if args.cv:
        _, cv_s = _cpu(lambda: cross_validate(evaluator, params))
        print(f"cross-validation: {cv_s:.1f} s CPU")
    c = evaluator.counts
    print(f"work: {c.models} model loads, {c.plans} plans, {c.profiles} profiles, {c.summed} rows priced, "
          f"{c.simulations} rows simulated, {c.reused} row timings reused")
    total = build_s + fit_s + (cv_s if args.cv else 0.0)
    print(f"total: {total:.1f} s CPU")
    if args.cv:
        target = 60.0 if len(rows) <= 50 else 600.0
        print(f"target: at most {target:.0f} s CPU for {len(rows)} rows with --cv: "
              f"{'met' if total <= target else 'NOT met'} ({total / target:.2f} of it)")
    if args.old:
        old = Evaluator(rows, data, source, row_models, summed=False)
        slow, old_s = _cpu(lambda: fit(old, params))
        # the two add each row's op times in another order: the same fit to far more digits than a profile keeps
        same = all(abs(a / b - 1) < 1e-6 for a, b in zip(slow.values, result.values))
        print(f"fit the old way: {old_s:.1f} s CPU ({old_s / fit_s:.1f}x the priced fit); same numbers to 6 digits: "
              f"{same}")
    for p, v in zip(result.params, result.values):
        print(f"  {p.name:45s} {v / p.prior:7.4f} x prior")
    return 0


if __name__ == "__main__":
    sys.exit(main())
