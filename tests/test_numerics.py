"""Units compute in their own number formats: float16 close to float32, integer bit-exact, float views."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from delegates.kernel import UnitKernel
from runtime.ir.errors import DelegateError
from runtime.interpreter.api import Interpreter
from runtime.zoo import build
from runtime.zoo.quantize import to_float16, to_int8
from sim.numerics import NumericMode

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def whole(graph):
    """The whole graph as one partition (what a delegate that takes every op would get)."""
    consts = {t for t, x in enumerate(graph.tensors) if x.is_constant}
    inputs = tuple(sorted({t for op in graph.ops for t in op.inputs if t >= 0 and t not in consts}
                          - {t for op in graph.ops for t in op.outputs}))
    return SimpleNamespace(graph=graph, nodes=tuple(range(len(graph.ops))), inputs=inputs,
                           outputs=tuple(graph.outputs), delegate="test")


def cpu(graph, x):
    it = Interpreter(graph=graph)
    it.allocate_tensors()
    it.set_tensor(graph.inputs[0], x)
    it.invoke()
    return it.get_tensor(graph.outputs[0])


def unit_run(graph, x, mode):
    kernel = UnitKernel(whole(graph), mode, "test-unit")
    kernel.prepare()
    return kernel.invoke({graph.inputs[0]: x})[graph.outputs[0]]


@pytest.fixture(scope="module")
def tiny():
    return build("tiny_cnn", resolution=16)


@pytest.fixture(scope="module")
def sample(tiny):
    return np.random.default_rng(0).standard_normal(tiny.tensors[tiny.inputs[0]].shape).astype(np.float32)


@pytest.fixture(scope="module")
def tiny_int8(tiny):
    shape = tiny.tensors[tiny.inputs[0]].shape
    rng = np.random.default_rng(1)
    return to_int8(tiny, [rng.standard_normal(shape).astype(np.float32) for _ in range(8)])


def test_reference_mode_equals_the_cpu(tiny, sample):
    np.testing.assert_array_equal(unit_run(tiny, sample, NumericMode.REFERENCE), cpu(tiny, sample))


def test_float16_differs_from_float32_but_within_float16_precision(tiny, sample):
    ref, half = cpu(tiny, sample), unit_run(tiny, sample, NumericMode.FLOAT16)
    assert not np.array_equal(ref, half)
    # every value rounded to fp16 after each of ~10 ops: a few fp16 ulps (2**-11) of the range
    assert np.max(np.abs(ref - half)) <= 10 * 2.0 ** -11 * max(1.0, np.max(np.abs(ref)))
    assert np.array_equal(half, half.astype(np.float16).astype(np.float32))


def test_float16_model_runs_in_float16(tiny, sample):
    g16 = to_float16(tiny)
    half = unit_run(g16, sample, "FLOAT16")
    assert np.max(np.abs(half - cpu(tiny, sample))) < 1e-2


def test_integer_mode_is_bit_exact_with_the_cpu_integer_kernels(tiny_int8, sample):
    scale, zp = tiny_int8.tensors[tiny_int8.inputs[0]].quant.scale[0], tiny_int8.tensors[tiny_int8.inputs[0]].quant.zero_point[0]
    q = np.clip(np.round(sample / scale) + zp, -128, 127).astype(np.int8)
    np.testing.assert_array_equal(unit_run(tiny_int8, q, NumericMode.INTEGER), cpu(tiny_int8, q))


def test_float_view_of_an_int8_model_stays_within_a_few_quantization_steps(tiny_int8, sample):
    t_in, t_out = tiny_int8.tensors[tiny_int8.inputs[0]], tiny_int8.tensors[tiny_int8.outputs[0]]
    q = np.clip(np.round(sample / t_in.quant.scale[0]) + t_in.quant.zero_point[0], -128, 127).astype(np.int8)
    ref = cpu(tiny_int8, q).astype(np.int32)
    for mode in ("FLOAT32_VIEW", "FLOAT16"):
        got = unit_run(tiny_int8, q, mode)
        assert got.dtype == np.int8
        assert np.max(np.abs(got.astype(np.int32) - ref)) <= 3, mode


def test_integer_mode_refuses_a_float_partition(tiny, sample):
    with pytest.raises(DelegateError, match="8-bit integer"):
        UnitKernel(whole(tiny), NumericMode.INTEGER, "dsp").prepare()


def test_float16_rounding_equals_numpys_conversion_bit_for_bit():
    from sim.numerics import round_fp16

    rng = np.random.default_rng(3)
    x = (rng.standard_normal(200_000) * np.exp(rng.uniform(-30, 14, 200_000))).astype(np.float32)
    x[:9] = [0.0, -0.0, 65504, 65519.99, 65520, np.inf, -np.inf, np.nan, 2.0 ** -24]
    x = np.concatenate([x, np.float32(1) + np.arange(-4096, 4096, dtype=np.float32) * np.float32(2.0 ** -23)])
    with np.errstate(over="ignore"):
        ref = x.astype(np.float16).astype(np.float32)
    got = round_fp16(x.copy())
    assert np.array_equal(ref.view(np.uint32)[~np.isnan(ref)], got.view(np.uint32)[~np.isnan(ref)])
    assert np.isnan(got[np.isnan(ref)]).all()


@pytest.mark.parametrize("value", [1e-30, 1e6, -np.inf, 0.5, 1e-7])
def test_float16_rounding_keeps_a_scalar_a_scalar_with_special_values_too(value):
    """A 0-d float32 constant (a layer norm's epsilon, 1e-7 or 1e-12, is a float16 subnormal or
    zero) goes through the special-value path: once an error, which failed the GPU delegate's
    prepare on a MobileBERT-style model."""
    from sim.numerics import round_fp16

    x = np.array(value, np.float32)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).astype(np.float32)
    got = round_fp16(x)
    assert got.shape == () and got.dtype == np.float32
    assert got.tobytes() == want.tobytes()
