"""Converter-made quantized models (tests/fixtures/quant) against LiteRT's reference kernels:
every int8/uint8 model bit-exact, including float-interface ones (QUANTIZE/DEQUANTIZE are exact);
float16-weight models within the gap LiteRT's own kernels show against each other: over several
inputs, the largest difference of the optimised and XNNPACK kernels from the reference ones,
doubled (or 1e-5 of the output range if larger). Float sums in another order differ by an ulp or
so per layer and deep models carry that to the output, for LiteRT's kernels as for ours. 16x8
models are rejected by name. Dynamic-range
models are held to their own measured tolerance in tests/test_hybrid.py."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.ir.errors import ModelError
from runtime.interpreter.api import Interpreter
from tests.conftest import FIXTURES
from tests.litert_oracle import available, run_litert, seeded_inputs

QUANT = FIXTURES / "quant"
MODELS = sorted(p for p in QUANT.glob("*.tflite") if not p.stem.endswith("_dynamic") and "16x8" not in p.stem)
REJECTED = sorted(QUANT.glob("*16x8*.tflite"))


def _inputs(it: Interpreter, seed: int) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for d in it.get_input_details():
        dtype = np.dtype(d["dtype"])
        if dtype in (np.int8, np.uint8):
            info = np.iinfo(dtype)
            feeds[d["index"]] = rng.integers(info.min, info.max + 1, tuple(d["shape"])).astype(dtype)
        else:
            feeds.update(seeded_inputs([d], seed))
    return feeds


@pytest.fixture(scope="module")
def oracle():
    if not available():
        pytest.skip("LiteRT (ai-edge-litert) is not installed")
    jobs = [(str(p), _inputs(Interpreter(model_path=p), k)) for k, p in enumerate(MODELS)]
    results = run_litert(jobs, resolvers=("BUILTIN_REF",), invokes=1)
    spread = {p: _float_spread(p) for p in MODELS if p.stem.endswith("_fp16")}
    return {p: (feeds, r, spread.get(p)) for p, (_, feeds), r in zip(MODELS, jobs, results)}


FLOAT_INPUTS = 4


def _float_spread(path) -> tuple[list, float]:
    """Seeded inputs, LiteRT's reference outputs for each, and the largest gap between LiteRT's
    optimised / XNNPACK kernels and its reference kernels over those inputs."""
    jobs = [(str(path), _inputs(Interpreter(model_path=path), 100 + k)) for k in range(FLOAT_INPUTS)]
    ref = run_litert(jobs, resolvers=("BUILTIN_REF",))
    gap = 0.0
    for resolver in ("BUILTIN_WITHOUT_DEFAULT_DELEGATES", "AUTO"):
        for r, o in zip(ref, run_litert(jobs, resolvers=(resolver,))):
            gap = max(gap, max(float(np.abs(o[k] - r[k]).max()) for k in r if k != "resolver"))
    return [(feeds, r) for (_, feeds), r in zip(jobs, ref)], gap


def _invoked(path, feeds: dict[int, np.ndarray]) -> Interpreter:
    it = Interpreter(model_path=path)
    it.allocate_tensors()
    for index, value in feeds.items():
        it.set_tensor(index, value)
    it.invoke()
    return it


@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_bit_exact_with_litert_reference(path, oracle):
    feeds, want, spread = oracle[path]
    if spread is not None:
        return _check_float_model(path, *spread)
    if isinstance(want, str):
        pytest.fail(f"LiteRT could not run {path.name}: {want}")
    it = _invoked(path, feeds)
    for d in it.get_output_details():
        got, ref = it.get_tensor(d["index"]), want[f"0:{d['index']}"]
        assert got.dtype == ref.dtype and got.shape == ref.shape
        np.testing.assert_array_equal(got, ref, err_msg=f"{path.name} output {d['name']}")


def _check_float_model(path, cases, litert_gap: float) -> None:
    worst, span = 0.0, 0.0
    for feeds, want in cases:
        it = _invoked(path, feeds)
        for d in it.get_output_details():
            ref = want[f"0:{d['index']}"]
            worst = max(worst, float(np.abs(it.get_tensor(d["index"]) - ref).max()))
            span = max(span, float(ref.max() - ref.min()))
    assert worst <= max(1e-5 * max(span, 1e-3), 2 * litert_gap), (path.name, worst, litert_gap)


@pytest.mark.parametrize("path", REJECTED, ids=[p.stem for p in REJECTED])
def test_16x8_models_are_rejected_naming_a_tensor(path):
    with pytest.raises(ModelError, match=r"tensor #\d+ '.*' uses int16 activations"):
        Interpreter(model_path=path)
