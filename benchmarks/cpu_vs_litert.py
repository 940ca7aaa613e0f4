"""Times the testbed's CPU reference interpreter against LiteRT on the same .tflite and thread count.

Usage: python benchmarks/cpu_vs_litert.py [--graph M.tflite] [--quantize int8] [--num_threads 2] [--runs 30]
Without --graph it writes the zoo's MobileNet v1 1.0 224 to a temporary .tflite first: float32,
or with --quantize int8 fully integer-quantized by the testbed's own post-training quantizer.
Prints the median milliseconds per inference of each and the ratios testbed / LiteRT.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402

from runtime.interpreter import Interpreter  # noqa: E402
from runtime.loader import ModelSource, load_model  # noqa: E402
from runtime.tflite_write import save  # noqa: E402


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
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.graph
        if path is None:
            path = os.path.join(tmp, "mobilenet_v1_1.0_224.tflite")
            graph = load_model(ModelSource(zoo="mobilenet_v1", zoo_args={"alpha": 1.0, "resolution": 224},
                                           quantization=args.quantize or "none", seed=1))
            save(graph, path)
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
