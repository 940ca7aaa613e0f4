"""TFLite's fixed-point helpers against their defining C semantics, written out the slow way."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from runtime.ops import quant

i32 = st.integers(quant.INT32_MIN, quant.INT32_MAX)


def c_srdhm(a: int, b: int) -> int:
    # gemmlowp: nudge by sign, then C truncating division by 2**31.
    if a == b == quant.INT32_MIN:
        return quant.INT32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    v = ab + nudge
    return int(v / 2**31) if abs(v) < 2**53 else (abs(v) // 2**31) * (1 if v >= 0 else -1)


def c_rdbpot(x: int, e: int) -> int:
    mask = (1 << e) - 1
    rem = x & mask
    thr = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> e) + (1 if rem > thr else 0)


@given(i32, i32)
def test_srdhm_matches_gemmlowp(a, b):
    assert int(quant.srdhm(a, b)) == c_srdhm(a, b)


@given(i32, st.integers(0, 31))
def test_rdbpot_is_round_half_away(x, e):
    assert int(quant.rdbpot(x, e)) == c_rdbpot(x, e)
    exact = x / 2**e
    assert int(quant.rdbpot(x, e)) == int(math.copysign(math.floor(abs(exact) + 0.5), exact)) or e > 52


@given(st.floats(1e-9, 1e6, allow_nan=False))
def test_quantize_multiplier_represents_the_real(real):
    m, shift = quant.quantize_multiplier(real)
    m, shift = int(m), int(shift)
    if m:
        assert 2**30 <= m < 2**31
        assert abs(m * 2.0 ** (shift - 31) - real) <= real * 2**-30


def test_quantize_multiplier_examples():
    assert [int(v) for v in quant.quantize_multiplier(1.0)] == [2**30, 1]
    assert [int(v) for v in quant.quantize_multiplier(0.5)] == [2**30, 0]
    assert [int(v) for v in quant.quantize_multiplier(0.0)] == [0, 0]


def test_round_half_away_differs_from_numpy_on_ties():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5], np.float32)
    np.testing.assert_array_equal(quant.round_half_away(x), [1, 2, 3, -1, -3])


@given(st.integers(-(2**24), 2**24), st.floats(1e-4, 0.99))
def test_mbqm_approximates_real_product(x, real):
    m, shift = quant.quantize_multiplier(real)
    assert abs(int(quant.mbqm(x, m, shift)) - x * real) <= 1.0


@given(st.lists(st.integers(-(2**26), 2**26), min_size=1, max_size=40), st.floats(1e-6, 0.999),
       st.integers(-(2**20), 2**20), st.integers(-128, 127))
def test_fused_requantizer_equals_step_by_step(acc, real, bias, zp):
    m, shift = quant.quantize_multiplier(real)
    acc = np.array(acc, np.int64)
    want = quant.mbqm(acc + bias, m, shift) + zp
    got = quant.requantizer(m, shift, bias, zp, acc_bound=2**26)(acc)
    np.testing.assert_array_equal(got, want)


def test_fused_requantizer_per_channel_and_fallback():
    rng = np.random.default_rng(0)
    acc = rng.integers(-(2**24), 2**24, (50, 8))
    m, sh = quant.quantize_multiplier(rng.uniform(1e-5, 3.0, 8))  # some > 1: pre-shift fallback
    bias = rng.integers(-5000, 5000, 8)
    np.testing.assert_array_equal(quant.requantizer(m, sh, bias, -3, 2**24)(acc),
                                  quant.mbqm(acc + bias, m, sh) - 3)
    m, sh = quant.quantize_multiplier(rng.uniform(1e-5, 0.9, 8))
    np.testing.assert_array_equal(quant.requantizer(m, sh, bias, 7, 2**24)(acc),
                                  quant.mbqm(acc + bias, m, sh) + 7)


@pytest.mark.parametrize("activation", [(-128, 127), (-20, 90), (-7, 127), (0, 90)])
def test_clamped_requantizer_equals_clipped_mbqm_exhaustively(activation):
    """Every accumulator in range, so ties and clamp edges of the float64 path are all hit."""
    rng = np.random.default_rng(3)
    lo, hi = activation
    for bound in (300, 40000):
        m, sh = quant.quantize_multiplier(np.exp(rng.uniform(np.log(1e-5), np.log(0.999), 6)))
        bias = rng.integers(-3000, 3000, 6)
        f = quant.clamped_requantizer(m, sh, bias, -7, bound, lo, hi, np.int8)
        acc = np.arange(-bound, bound + 1)[:, None].repeat(6, 1)
        want = np.clip(quant.mbqm(acc + bias, m, sh) - 7, lo, hi).astype(np.int8)
        for dtype in (np.float32, np.float64):
            np.testing.assert_array_equal(f(acc.astype(dtype)), want)
