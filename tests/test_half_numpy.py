"""float16 and bfloat16 without PyTorch: NumPy's float16 (round to
nearest even) is the oracle for float16 casts and for operators computed in
float32 and rounded once; bfloat16 is checked through its defining
property, the top 16 bits of a float32.  (test_half.py compares every bit
with PyTorch where it is installed; these run in the leak gates too.)
"""

import numpy as np
import pytest

import ember

ALL16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)


def test_every_float16_pattern_to_float32_like_numpy():
    halves = ALL16.view(np.float16)
    ours = ember.from_numpy(halves).float().numpy()
    expected = halves.astype(np.float32)
    not_nan = ~np.isnan(expected)
    np.testing.assert_array_equal(ours[not_nan].view(np.uint32),
                                  expected[not_nan].view(np.uint32))
    assert np.isnan(ours[~not_nan]).all()


def test_float32_to_float16_rounds_like_numpy():
    lows = np.array([0x0000, 0x0FFF, 0x1000, 0x1001, 0x3000, 0x7FFF, 0x8000,
                     0xFFFF], dtype=np.uint32)
    patterns = (np.arange(65536, dtype=np.uint32)[:, None] << 16 | lows).ravel()
    source = patterns.view(np.float32)
    source = source[~np.isnan(source)]
    with np.errstate(over="ignore"):  # NumPy warns on overflow to inf
        expected = source.astype(np.float16).view(np.uint16)
    ours = ember.from_numpy(source).to(ember.float16).numpy()
    np.testing.assert_array_equal(ours.view(np.uint16), expected)
    # the strided (scalar) loop gives the same bits
    strided = ember.from_numpy(source)[::7].to(ember.float16).numpy()
    np.testing.assert_array_equal(strided.view(np.uint16), expected[::7])


def test_bfloat16_is_the_rounded_top_half_of_float32():
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**32, size=200_000, dtype=np.uint64).astype(np.uint32)
    source = bits.view(np.float32)
    source = source[~np.isnan(source)]
    back = ember.from_numpy(source).to(ember.bfloat16).float().numpy()
    low = back.view(np.uint32) & 0xFFFF
    assert not low.any()  # a bfloat16 is a float32 with 16 zero low bits
    # and the nearer of the two bfloat16 values around the source
    down = (source.view(np.uint32) & 0xFFFF0000).view(np.float32).astype(np.float64)
    up = ((source.view(np.uint32) & 0xFFFF0000) + 0x10000).view(np.float32).astype(np.float64)
    wide, got = source.astype(np.float64), back.astype(np.float64)
    finite = np.isfinite(up) & np.isfinite(got)
    nearest = np.minimum(np.abs(wide - down), np.abs(wide - up))
    assert (np.abs(wide - got)[finite] == nearest[finite]).all()


@pytest.mark.parametrize("op", [lambda a, b: a + b, lambda a, b: a * b,
                                lambda a, b: a / b, lambda a, b: a - b])
def test_float16_elementwise_is_float32_rounded_once(op):
    rng = np.random.default_rng(3)
    a = rng.standard_normal(5000).astype(np.float16)
    b = rng.standard_normal(5000).astype(np.float16)
    ours = op(ember.from_numpy(a), ember.from_numpy(b)).numpy()
    expected = op(a.astype(np.float32), b.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(ours, expected)


def test_float16_reductions_and_matmul_accumulate_in_float32():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((40, 300)).astype(np.float16)
    b = rng.standard_normal((300, 20)).astype(np.float16)
    ea, eb = ember.from_numpy(a), ember.from_numpy(b)
    wide = a.astype(np.float32)
    np.testing.assert_allclose(ea.sum(1).numpy(), wide.sum(1).astype(np.float16), rtol=1e-3)
    np.testing.assert_allclose(ea.mean().item(), wide.mean(), rtol=1e-3)
    np.testing.assert_array_equal(ea.amax(0).numpy(), a.max(0))
    np.testing.assert_array_equal(ea.exp().numpy(), np.exp(wide).astype(np.float16))
    np.testing.assert_allclose((ea @ eb).numpy().astype(np.float32),
                               (wide @ b.astype(np.float32)).astype(np.float16),
                               rtol=2e-3, atol=2e-3)
    bf = ea.bfloat16()
    assert (bf @ eb.bfloat16()).dtype is ember.bfloat16
    np.testing.assert_allclose(bf.sum(1).float().numpy(),
                               bf.float().numpy().sum(1), rtol=1e-2, atol=1e-2)


def test_half_gradients_keep_the_dtype():
    for dtype in (ember.float16, ember.bfloat16):
        x = ember.tensor([[0.5, -1.0], [2.0, 0.25]], dtype=dtype, requires_grad=True)
        ((x @ x).exp().sum() + x.sum()).backward()
        assert x.grad.dtype is dtype
        wide = x.detach().float().requires_grad_()
        ((wide @ wide).exp().sum() + wide.sum()).backward()
        np.testing.assert_allclose(x.grad.float().numpy(), wide.grad.numpy(), rtol=2e-2)
