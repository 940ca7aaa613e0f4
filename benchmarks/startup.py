"""Measures what `dtb` costs to start: CPU seconds of `dtb --help`, `dtb list devices` and timing-only benchmarks.

Usage: python benchmarks/startup.py [--repeats 5] [--no-bytecode-cache]
Runs each command as a child process (`python -m runtime.cli.main ...` on this checkout) `--repeats`
times and reads the child's CPU seconds (user + system) from getrusage(RUSAGE_CHILDREN) before and
after each run. The children cache the project's compiled bytecode, as an installed copy does, in a
temporary folder (PYTHONPYCACHEPREFIX), filled by one uncounted run per command first, whatever
PYTHONDONTWRITEBYTECODE says here; --no-bytecode-cache measures runs that compile every source
they import instead (the bounds are for cached runs). Prints the min and the median per command against its bound, and exits 1 when a
command's min is over its bound (or a command fails). The min is the run least disturbed by other
processes: CPU time, unlike wall time, leaves out waiting for a core, but a busy machine still
inflates it (shared caches), so the median is shown beside it.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (arguments of dtb, most CPU seconds it may take); {model} is MobileNet v1 (alpha 0.25, 128x128)
# written to a .tflite file first. A timing-only run of a file runs no kernel. A zoo model is built
# by running its layers: tiny_cnn's are all below fast_select.MIN_WORK, so no numba kernel loads
# (a zoo MobileNet's convolutions would load them, about a second more).
MODEL_ARGS = ("--zoo", "mobilenet_v1", "--zoo_args", "alpha=0.25,resolution=128")
COMMANDS: tuple[tuple[tuple[str, ...], float], ...] = (
    (("--help",), 0.3),
    (("list", "devices"), 0.3),
    (("benchmark", "--zoo", "tiny_cnn", "--timing_only"), 1.0),
    (("benchmark", "--graph", "{model}", "--timing_only"), 1.0),
)


def child_env(cache: str | None) -> dict[str, str]:
    """This checkout first on the path; bytecode cached under `cache`, or never written when None."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if cache is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env["PYTHONPYCACHEPREFIX"] = cache
    return env


def child_cpu_seconds(argv: tuple[str, ...], env: dict[str, str]) -> float:
    """CPU seconds (user + system) of one `dtb` run in a child process; a failing run raises."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "runtime.cli.main", *argv], cwd=ROOT, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"dtb {' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="runs per command (default 5)")
    ap.add_argument("--no-bytecode-cache", action="store_true",
                    help="compile every imported source of the project in every run (no .pyc cache)")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    with tempfile.TemporaryDirectory(prefix="dtb-startup-") as folder:
        model = os.path.join(folder, "mobilenet_v1_0.25_128.tflite")
        cache = None if args.no_bytecode_cache else os.path.join(folder, "pyc")
        try:
            child_cpu_seconds(("export", *MODEL_ARGS, "-o", model), child_env(cache))
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return measure(args.repeats, cache, model)


def measure(repeats: int, cache: str | None, model: str) -> int:
    env = child_env(cache)
    print("bytecode: " + ("cached (one uncounted run per command first)" if cache else "compiled in every run"))
    print(f"{'command':66s} {'min s':>7s} {'median s':>9s} {'bound s':>8s}")
    missed = []
    for spelled, bound in COMMANDS:
        argv = tuple(a.format(model=model) for a in spelled)
        try:
            if cache is not None:
                child_cpu_seconds(argv, env)   # fills the bytecode cache
            seconds = [child_cpu_seconds(argv, env) for _ in range(repeats)]
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        low, mid = min(seconds), statistics.median(seconds)
        verdict = "ok" if low <= bound else "OVER"
        name = "dtb " + " ".join(spelled).replace("{model}", "mobilenet_v1_0.25_128.tflite")
        print(f"{name:66s} {low:7.3f} {mid:9.3f} {bound:8.2f}  {verdict}")
        if low > bound:
            missed.append(name)
    if missed:
        print(f"over the bound: {', '.join(missed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
