"""Times the testbed's CPU reference interpreter against LiteRT on the same .tflite and thread count.

Usage: python benchmarks/cpu_vs_litert.py [--graph M.tflite] [--quantize int8] [--num_threads 2] [--runs 30]
                                          [--compile-time]
Without --graph it writes the zoo's MobileNet v1 1.0 224 to a temporary .tflite first: float32,
or with --quantize int8 fully integer-quantized by the testbed's own post-training quantizer.
Prints the median milliseconds per inference of each and the ratios testbed / LiteRT.
The testbed runs its default (numba) kernels; DTB_KERNELS=numpy times the NumPy reference ones.
--compile-time also reports, from fresh processes, the numba kernels' first-run cost with an empty
on-disk cache (compiling) and with the cache it left (loading): import, first inference, and the
steady inference time after it.
"""

from __future__ import annotations

import argparse
import os
import json
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402

from runtime.interpreter.api import Interpreter  # noqa: E402
from runtime.model.loader import ModelSource, load_model  # noqa: E402
from runtime.model.tflite_write import save  # noqa: E402


def _median_ms(interpreter, runs: int) -> float:
    d = interpreter.get_input_details()[0]
    rng = np.random.default_rng(0)
    if np.dtype(d["dtype"]).kind == "f":
        x = rng.standard_normal(d["shape"]).astype(d["dtype"])
    else:
        info = np.iinfo(d["dtype"])
        x = rng.integers(info.min, info.max + 1, d["shape"]).astype(d["dtype"])
    interpreter.set_tensor(d["index"], x)
    interpreter.invoke()  # warm-up: caches, lazy preparation
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        interpreter.invoke()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


_FIRST_RUN = r"""
import json, sys, time
start = time.perf_counter()
sys.path.insert(0, sys.argv[3])
import numpy as np
from runtime.interpreter.api import Interpreter
imported = time.perf_counter()
it = Interpreter(model_path=sys.argv[1], num_threads=int(sys.argv[2]))
it.allocate_tensors()
d = it.get_input_details()[0]
it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
t = time.perf_counter()
it.invoke()
first = time.perf_counter() - t
steady = []
for _ in range(5):
    t = time.perf_counter()
    it.invoke()
    steady.append(time.perf_counter() - t)
print(json.dumps({"import": imported - start, "first": first, "steady": sorted(steady)[2]}))
"""


def _first_runs(path: str, threads: int) -> list[tuple[str, dict]]:
    """Cold then warm numba cache, each in a fresh process; the cache goes to a temporary folder
    ($NUMBA_CACHE_DIR), so the user's own cache is neither used nor touched."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        for label in ("cold cache (compiles)", "warm cache (loads)"):
            done = subprocess.run([sys.executable, "-c", _FIRST_RUN, path, str(threads), root], env=env,
                                  capture_output=True, text=True, check=True)
            rows.append((label, json.loads(done.stdout.strip().splitlines()[-1])))
    return rows


def _litert(path: str, threads: int, resolver: str):
    from ai_edge_litert.interpreter import Interpreter as LiteRT, OpResolverType

    it = LiteRT(model_path=path, num_threads=threads,
                experimental_op_resolver_type=getattr(OpResolverType, resolver))
    it.allocate_tensors()
    return it


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--graph", help=".tflite model (default: zoo MobileNet v1 1.0 224 float)")
    p.add_argument("--quantize", choices=["int8"], help="quantize the zoo model first (ignored with --graph)")
    p.add_argument("--num_threads", type=int, default=2)
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--compile-time", action="store_true",
                   help="also time first runs with a cold and a warm numba cache (fresh processes)")
    args = p.parse_args(argv)
    first_runs = []
    with tempfile.TemporaryDirectory() as tmp:
        path = args.graph
        if path is None:
            path = os.path.join(tmp, "mobilenet_v1_1.0_224.tflite")
            graph = load_model(ModelSource(zoo="mobilenet_v1", zoo_args={"alpha": 1.0, "resolution": 224},
                                           quantization=args.quantize or "none", seed=1))
            save(graph, path)
        if args.compile_time:
            first_runs = _first_runs(path, args.num_threads)
        ours = Interpreter(model_path=path, num_threads=args.num_threads)
        ours.allocate_tensors()
        rows = [("testbed CPU reference", _median_ms(ours, args.runs))]
        for label, resolver in (("LiteRT (XNNPACK)", "AUTO"),
                                ("LiteRT without default delegates", "BUILTIN_WITHOUT_DEFAULT_DELEGATES")):
            rows.append((label, _median_ms(_litert(path, args.num_threads, resolver), args.runs)))
    label = args.graph or f"zoo mobilenet_v1 1.0 224 {args.quantize or 'float'}"
    print(f"model: {label}, threads: {args.num_threads}, "
          f"runs: {args.runs} (median ms per inference)")
    # OpenBLAS's kernel choice (which the environment may pin) sets the testbed's GEMM speed.
    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(auto-detect)')}")
    for label, ms in rows:
        print(f"  {label:34s} {ms:8.2f} ms")
    ours_ms = rows[0][1]
    for label, ms in rows[1:]:
        print(f"  testbed / {label:24s} {ours_ms / ms:8.2f}x")
    for label, t in first_runs:
        print(f"  first run, {label:23s} import {t['import']:6.2f} s, first inference {t['first']:6.2f} s, "
              f"then {t['steady'] * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
