"""How long `dtb calibrate` takes to fit a profile to 100 rows (target: under 60 s on this machine).

The rows are simulated on the shipped Pixel 3 profile with its CPU and GPU efficiencies scaled by
known factors (so the fit has work to do), over MobileNet v1 widths and input sizes, float32 and
uint8, CPU / GPU / NNAPI, and SqueezeNet and MobileNet v2 at several sizes. Model building and
quantization are timed apart from the fit.

    python benchmarks/calibrate_fit.py [--rows 100]
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml  # noqa: E402

from runtime.calibration.fit import Evaluator, candidate_params, fit, load_base  # noqa: E402
from runtime.cli.calibrate import row_models  # noqa: E402
from runtime.calibration.rows import Row  # noqa: E402

FACTORS = {("units", "cpu_big", "efficiency", "conv"): 1.15, ("units", "gpu", "efficiency", "conv"): 0.9}


def _grid():
    for alpha in (0.25, 0.5, 0.75, 1.0):
        for res in (128, 160, 192, 224):
            args = (("alpha", alpha), ("resolution", res))
            for d in ("cpu", "gpu", "nnapi"):
                yield "mobilenet_v1", args, "none", d
            for d in ("cpu", "nnapi"):
                yield "mobilenet_v1", args, "uint8", d
    for res in (128, 160, 192, 224):
        for d in ("cpu", "gpu", "nnapi"):
            yield "squeezenet", (("resolution", res),), "none", d
    for alpha in (0.5, 1.0):
        for res in (128, 224):
            for d in ("cpu", "gpu"):
                yield "mobilenet_v2", (("alpha", alpha), ("resolution", res)), "none", d


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100)
    args = ap.parse_args()
    data, _, _, path = load_base("pixel3")
    truth = copy.deepcopy(data)
    for key, factor in FACTORS.items():
        node = truth
        for k in key[:-1]:
            node = node[k]
        node[key[-1]] *= factor
    specs = list(_grid())[:args.rows]
    t0 = time.perf_counter()
    rows = [Row(m, a, q, "pixel3", d, 4, 1.0, f"grid:{i}") for i, (m, a, q, d) in enumerate(specs)]
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "truth.yaml").write_text(yaml.safe_dump(truth))
        sim_truth = Evaluator(rows, truth, "truth", row_models)
        measured = [ms for ms, _ in sim_truth.run([], [])]
    rows = [Row(r.model, r.args, r.quantization, r.device, r.delegate, r.threads, ms, r.source)
            for r, ms in zip(rows, measured)]
    evaluator = Evaluator(rows, data, str(path), row_models)
    build_s = time.perf_counter() - t0
    params = candidate_params(data, set().union(*(s.used for s in evaluator.sims)))
    t1 = time.perf_counter()
    result = fit(evaluator, params)
    fit_s = time.perf_counter() - t1
    print(f"rows: {len(rows)}  parameters: {len(result.params)}  simulations of the row set: {result.evaluations}")
    print(f"models built and partitioned: {build_s:.1f} s   fit: {fit_s:.1f} s (target < 60 s)")
    for p, v in zip(result.params, result.values):
        print(f"  {p.name:45s} {v / p.prior:7.4f} x prior")
    return 0


if __name__ == "__main__":
    sys.exit(main())
