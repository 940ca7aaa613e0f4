"""Measures what the simulation adds on top of the kernels: the same model, plain CPU vs on a simulated phone.

Usage: python benchmarks/sim_overhead.py [--device pixel4] [--model mobilenet_v1] [--delegate gpu]
                                         [--num_threads 2] [--runs 30]
Runs the zoo model with the plain CPU interpreter and with the same interpreter on the simulated
phone (CPU only, or with --delegate), alternating so host noise hits both alike; prints the median
wall milliseconds per inference of each, the overhead as a share of the plain run, and the wall time
of a timing-only simulated inference (costs charged, math skipped).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402

from delegates.registry import make_delegate  # noqa: E402
from runtime import zoo  # noqa: E402
from runtime.interpreter.api import Interpreter  # noqa: E402
from sim.profile import load_profile  # noqa: E402


def _ready(graph, x, threads, **kw) -> Interpreter:
    it = Interpreter(graph=graph, num_threads=threads, **kw)
    it.allocate_tensors()
    it.set_tensor(graph.inputs[0], x)
    it.invoke()  # warm-up: prepared filters, buffers
    return it


def _once_ms(it: Interpreter) -> float:
    start = time.perf_counter()
    it.invoke()
    return (time.perf_counter() - start) * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="pixel4")
    ap.add_argument("--model", default="mobilenet_v1")
    ap.add_argument("--delegate", default=None, help="gpu, hexagon, coreml or nnapi (default: CPU only)")
    ap.add_argument("--num_threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args(argv)
    graph = zoo.build(args.model)
    x = np.random.default_rng(0).standard_normal(graph.tensors[graph.inputs[0]].shape).astype(np.float32)
    profile = load_profile(args.device)
    delegates = lambda: [make_delegate(args.delegate, profile)] if args.delegate else []  # noqa: E731
    plain = _ready(graph, x, args.num_threads)
    simulated = _ready(graph, x, args.num_threads, device=profile, experimental_delegates=delegates())
    timing = _ready(graph, x, args.num_threads, device=profile, experimental_delegates=delegates(),
                    timing_only=True)
    a, b, c = [], [], []
    for _ in range(args.runs):
        a.append(_once_ms(plain))
        b.append(_once_ms(simulated))
        c.append(_once_ms(timing))
    pa, pb, pc = statistics.median(a), statistics.median(b), statistics.median(c)
    where = f"{args.device} {'+ ' + args.delegate if args.delegate else 'CPU only'}"
    print(f"{args.model}, {args.num_threads} threads, median of {args.runs} (wall ms per inference)")
    print(f"plain CPU interpreter      {pa:8.2f}")
    print(f"simulated ({where}) {pb:8.2f}   overhead {100 * (pb - pa) / pa:+.1f}% of the plain run")
    print(f"timing-only simulation     {pc:8.3f}   ({100 * pc / pa:.1f}% of the plain run)")
    print(f"simulated latency          {simulated.simulation.latencies[-1] * 1e3:8.2f} (simulated ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
