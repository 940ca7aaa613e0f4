"""Times a 40-cell timing-only sweep run serially and on a 2-worker Dask LocalCluster; their results must match.

Usage: python benchmarks/sweep_dask.py [--workers 2] [--count 300] [--repeat 1] [--min-ratio 1.6]
Writes the scenario (phones x delegates x models x threads, timing_only: true, `--count` runs a cell)
into a temporary folder, runs `dtb run` on it as a fresh process with `--executor local` and with
`--executor dask --workers N` (whole wall time: interpreter start, imports, cluster start and shutdown,
export), asserts that the two results.json (and trace.json) are byte for byte the same, and prints
both times and their ratio. With --repeat, the order alternates so a busy machine hits both alike.
Exits 1 when the median ratio is below --min-ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = """\
description: 40 timing-only cells, each about a second of host time
device: pixel4
model: {{zoo: mobilenet_v1, args: {{alpha: 0.25, resolution: 96}}}}
runs: {{warmup: 1, count: {count}}}
timing_only: true
matrix:
  device: [pixel3, pixel4]
  delegates: [[], [gpu]]
  model:
    - {{zoo: mobilenet_v1, args: {{alpha: 0.25, resolution: 96}}}}
    - {{zoo: mobilenet_v2, args: {{alpha: 0.35, resolution: 96}}}}
  cpu.threads: [1, 2, 3, 4, 8]
"""


def _run(scenario: Path, out: Path, *flags: str) -> float:
    """Wall seconds of one `dtb run` in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "runtime.cli.main", "run", str(scenario), "-o", str(out), *flags],
                          cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"dtb run {' '.join(flags)} failed: {done.stderr.strip()}")
    return seconds


def _once(folder: Path, scenario: Path, workers: int, dask_first: bool, k: int) -> tuple[float, float]:
    serial, dask = folder / f"serial{k}", folder / f"dask{k}"
    runs = [("dask", lambda: _run(scenario, dask, "--executor", "dask", "--workers", str(workers))),
            ("serial", lambda: _run(scenario, serial, "--executor", "local"))]
    times = dict((name, run()) for name, run in (runs if dask_first else runs[::-1]))
    for name in ("results.json", "trace.json"):
        assert (serial / name).read_bytes() == (dask / name).read_bytes(), f"{name} differs"
    return times["serial"], times["dask"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--count", type=int, default=400, help="runs per cell (0.5-1 s of host time a cell here)")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--min-ratio", type=float, default=1.6)
    args = p.parse_args()
    print(f"host: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    ratios = []
    with tempfile.TemporaryDirectory(prefix="dtb-sweep-dask-") as tmp:
        folder = Path(tmp)
        scenario = folder / "sweep40.yaml"
        scenario.write_text(SCENARIO.format(count=args.count))
        for k in range(args.repeat):
            serial, dask = _once(folder, scenario, args.workers, dask_first=bool(k % 2), k=k)
            ratios.append(serial / dask)
            print(f"run {k + 1}: serial {serial:.1f} s, dask ({args.workers} workers) {dask:.1f} s, "
                  f"ratio {serial / dask:.2f}x; results.json identical", flush=True)
    ratio = statistics.median(ratios)
    print(f"median ratio {ratio:.2f}x (target {args.min_ratio:.2f}x), load average now {os.getloadavg()[0]:.2f}")
    return 0 if ratio >= args.min_ratio else 1


if __name__ == "__main__":
    sys.exit(main())
