"""Converter-made quantized models (tests/fixtures/quant) against LiteRT's reference kernels:
every int8/uint8 model bit-exact, including float-interface ones (QUANTIZE/DEQUANTIZE are exact);
float16-weight models within 1e-5 of the output range; 16x8 models rejected by name. Dynamic-range
models are held to their own measured tolerance in tests/test_hybrid.py."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.errors import ModelError
from runtime.interpreter import Interpreter
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
    return {p: (feeds, r) for p, (_, feeds), r in zip(MODELS, jobs, results)}


@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_bit_exact_with_litert_reference(path, oracle):
    feeds, want = oracle[path]
    if isinstance(want, str):
        pytest.fail(f"LiteRT could not run {path.name}: {want}")
    it = Interpreter(model_path=path)
    it.allocate_tensors()
    for index, value in feeds.items():
        it.set_tensor(index, value)
    it.invoke()
    fp16 = path.stem.endswith("_fp16")
    for d in it.get_output_details():
        got, ref = it.get_tensor(d["index"]), want[f"0:{d['index']}"]
        assert got.dtype == ref.dtype and got.shape == ref.shape
        if fp16:
            span = max(float(ref.max() - ref.min()), 1e-3)
            assert np.abs(got - ref).max() <= 1e-5 * span
        else:
            np.testing.assert_array_equal(got, ref, err_msg=f"{path.name} output {d['name']}")


@pytest.mark.parametrize("path", REJECTED, ids=[p.stem for p in REJECTED])
def test_16x8_models_are_rejected_naming_a_tensor(path):
    with pytest.raises(ModelError, match=r"tensor #\d+ '.*' uses int16 activations"):
        Interpreter(model_path=path)
