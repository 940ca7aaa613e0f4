"""Runs models in LiteRT (the numerical oracle) in a child process and returns their outputs.

A child process keeps a LiteRT crash from taking the test session down, and keeps its native
libraries out of the process whose kernels are under test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

_CHILD = r'''
import json, sys
import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType
jobs = json.load(open(sys.argv[1]))
def make(job):
    # The reference resolver lacks a few ops (ELU, for one); then the optimised kernels answer.
    errors = []
    for resolver in job["resolvers"]:
        try:
            it = Interpreter(model_path=job["model"], num_threads=1,
                             experimental_op_resolver_type=getattr(OpResolverType, resolver))
            it.allocate_tensors()
            return it, resolver
        except Exception as exc:
            errors.append(f"{resolver}: {type(exc).__name__}: {exc}")
    raise RuntimeError("; ".join(errors))
for job in jobs:
    try:
        it, resolver = make(job)
        feeds = np.load(job["inputs"])
        outs = {"resolver": np.array(resolver)}
        for run in range(job["invokes"]):
            for d in it.get_input_details():
                it.set_tensor(d["index"], feeds[str(d["index"])])
            it.invoke()
            for d in it.get_output_details():
                outs[f"{run}:{d['index']}"] = it.get_tensor(d["index"])
        np.savez(job["out"], **outs)
    except Exception as exc:  # reported to the parent, which fails the one test
        open(job["out"] + ".err", "w").write(f"{type(exc).__name__}: {exc}")
'''


def available() -> bool:
    try:
        import ai_edge_litert.interpreter  # noqa: F401
    except ImportError:
        return False
    return True


def run_litert(jobs: list[tuple[str, dict[int, np.ndarray]]],
               resolvers: tuple[str, ...] = ("BUILTIN_REF", "BUILTIN_WITHOUT_DEFAULT_DELEGATES"),
               invokes: int = 1) -> list[dict[str, np.ndarray] | str]:
    """For each (model path, {input index: array}) return {"run:index": output, "resolver": name}
    or an error string; the first resolver that can build the model is used."""
    with tempfile.TemporaryDirectory() as tmp:
        spec = []
        for k, (model, feeds) in enumerate(jobs):
            feed_path = os.path.join(tmp, f"in{k}.npz")
            np.savez(feed_path, **{str(i): v for i, v in feeds.items()})
            spec.append({"model": os.path.abspath(model), "inputs": feed_path, "resolvers": list(resolvers),
                         "invokes": invokes, "out": os.path.join(tmp, f"out{k}.npz")})
        job_file = os.path.join(tmp, "jobs.json")
        with open(job_file, "w") as f:
            json.dump(spec, f)
        proc = subprocess.run([sys.executable, "-c", _CHILD, job_file], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"LiteRT child process failed ({proc.returncode}): {proc.stderr[-2000:]}")
        results: list[dict[str, np.ndarray] | str] = []
        for job in spec:
            if os.path.exists(job["out"] + ".err"):
                with open(job["out"] + ".err") as f:
                    results.append(f.read())
            else:
                with np.load(job["out"]) as z:
                    results.append({key: z[key] for key in z.files})
        return results


def seeded_inputs(details: list[dict], seed: int = 0) -> dict[int, np.ndarray]:
    """One reproducible input per model input: gaussian floats, small non-negative integers."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for d in details:
        shape, dtype = tuple(int(s) for s in d["shape"]), np.dtype(d["dtype"])
        if dtype.kind == "f":
            feeds[d["index"]] = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            feeds[d["index"]] = rng.integers(0, 2, shape).astype(dtype)
        else:
            feeds[d["index"]] = rng.integers(0, 4, shape).astype(dtype)
    return feeds
