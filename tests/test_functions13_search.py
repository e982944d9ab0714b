"""Issue 13's scans and search/count ops (c/th/THScan.c, c/th/THSearch.c):
logcumsumexp, cummax, cummin, searchsorted, bucketize, bincount, histc.

NumPy is the value oracle (np.searchsorted, np.bincount, np.histogram,
np.maximum.accumulate, np.logaddexp.accumulate); PyTorch checks ties, NaN
handling and the error messages (those tests skip without it).
"""

import functools
import math

import numpy as np
import pytest

import ember
from ember.autograd import gradcheck

try:
    import torch
except ImportError:  # pragma: no cover - torch is optional
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")


def rand(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape)


def raises_like_torch(ember_call, torch_call):
    with pytest.raises(Exception) as expected:
        torch_call()
    with pytest.raises(RuntimeError) as info:
        ember_call()
    assert str(info.value) == str(expected.value)


# ---- scans --------------------------------------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_logcumsumexp_values(dim, dtype):
    x = (rand(3, 4) * 30).astype(dtype)
    x[0, 1] = -np.inf
    expected = np.logaddexp.accumulate(x, axis=dim)
    result = ember.tensor(x).t().t().logcumsumexp(dim)  # a non-contiguous path too
    assert result.dtype == ember.tensor(x).dtype
    np.testing.assert_allclose(result.numpy(), expected, rtol=2e-6 if dtype == np.float32
                               else 1e-14)
    with np.errstate(invalid="ignore"):
        special = np.array([-np.inf, 1.0, np.inf, np.nan, 2.0])
        np.testing.assert_array_equal(ember.logcumsumexp(ember.tensor(special), 0).numpy(),
                                      [-np.inf, 1.0, np.inf, np.nan, np.nan])


def test_logcumsumexp_integer_and_out():
    with pytest.raises(RuntimeError, match="\"logcumsumexp_out_cpu\" not implemented for "
                                           "'Long'"):
        ember.logcumsumexp(ember.tensor([1, 2]), 0)
    out = ember.empty(2)
    assert ember.logcumsumexp(ember.tensor([0.0, 0.0]), 0, out=out) is out
    np.testing.assert_allclose(out.numpy(), [0.0, math.log(2)], rtol=1e-6)


@pytest.mark.parametrize("name, accumulate", [("cummax", np.fmax.accumulate),
                                              ("cummin", np.fmin.accumulate)])
@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.bool_])
def test_cummax_cummin_values(name, accumulate, dtype):
    x = (rand(4, 5) * 3).round().astype(dtype)
    for dim in (0, 1):
        result = getattr(ember, name)(ember.tensor(x), dim)
        assert type(result).__name__ == name and len(result) == 2
        assert result.values is result[0] and result.indices is result[1]
        np.testing.assert_array_equal(result.values.numpy(), accumulate(x, axis=dim))
        # each index points at an element holding the running value
        picked = np.take_along_axis(x, result.indices.numpy(), axis=dim)
        np.testing.assert_array_equal(picked, result.values.numpy())
        assert result.indices.dtype == ember.int64


@needs_torch
@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cummax_ties_and_nan_match_torch(name):
    x = np.array([[1.0, 3.0, 3.0, np.nan, 2.0, 5.0], [2.0, 2.0, 1.0, 1.0, 0.0, 0.0]])
    mine = getattr(ember.tensor(x), name)(1)
    theirs = getattr(torch.tensor(x), name)(1)
    np.testing.assert_array_equal(mine.values.numpy(), theirs.values.numpy())
    np.testing.assert_array_equal(mine.indices.numpy(), theirs.indices.numpy())
    scalar = getattr(ember, name)(ember.tensor(2.5), 0)
    assert scalar.values.item() == 2.5 and scalar.indices.item() == 0
    with pytest.raises(IndexError):
        getattr(ember, name)(ember.ones(2, 3), 2)


def test_scan_gradients():
    x = ember.tensor(rand(3, 4) * 3, requires_grad=True)
    weights = ember.tensor([[1.0], [-2.0], [0.5]], dtype=ember.float64)
    assert gradcheck(lambda t: ember.logcumsumexp(t, 1) * weights, (x,))
    assert gradcheck(lambda t: ember.logcumsumexp(t, 0), (x,))
    assert gradcheck(lambda t: ember.cummax(t, 1).values, (x,))
    assert gradcheck(lambda t: t.cummin(0)[0], (x,))
    # huge inputs: the log-space backward stays finite
    y = ember.tensor([[1e3, -1e3, 2e3]], dtype=ember.float64, requires_grad=True)
    ember.logcumsumexp(y, 1).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), [[2.0, 0.0, 1.0]])


# ---- searchsorted, bucketize -----------------------------------------------------------

@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_against_numpy(side):
    seq = np.sort(np.random.default_rng(1).integers(0, 10, 20)).astype(np.float64)
    values = np.random.default_rng(2).integers(-1, 12, (3, 5)).astype(np.float64)
    result = ember.searchsorted(ember.tensor(seq), ember.tensor(values), side=side)
    assert result.dtype == ember.int64
    np.testing.assert_array_equal(result.numpy(), np.searchsorted(seq, values, side=side))
    right = ember.searchsorted(ember.tensor(seq), ember.tensor(values),
                               right=side == "right", out_int32=True)
    assert right.dtype == ember.int32
    np.testing.assert_array_equal(right.numpy(), np.searchsorted(seq, values, side=side))
    # one sorted line per line of values
    seqs = np.sort(rand(3, 6), axis=1)
    vals = rand(3, 4, seed=3)
    rows = ember.searchsorted(ember.tensor(seqs), ember.tensor(vals), side=side).numpy()
    for r in range(3):
        np.testing.assert_array_equal(rows[r], np.searchsorted(seqs[r], vals[r], side=side))


def test_searchsorted_sorter_numbers_and_promotion():
    seq = np.array([3.0, 1.0, 2.0, 5.0])
    sorter = np.argsort(seq)
    values = np.array([0.5, 2.0, 4.0, 9.0])
    result = ember.searchsorted(ember.tensor(seq), ember.tensor(values),
                                sorter=ember.tensor(sorter))
    np.testing.assert_array_equal(result.numpy(), np.searchsorted(seq, values, sorter=sorter))
    number = ember.searchsorted(ember.tensor([1.0, 2.0, 3.0]), 2.0, side="right")
    assert number.ndim == 0 and number.item() == 2
    # int sequence, float values: compared after promotion
    assert ember.searchsorted(ember.tensor([1, 2, 3]), ember.tensor([1.5])).tolist() == [1]
    out = ember.empty(4, dtype=ember.int64)
    assert ember.searchsorted(ember.tensor(np.sort(seq)), ember.tensor(values), out=out) is out
    buckets = ember.bucketize(ember.tensor([[1, 5], [2, 3]]), ember.tensor([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(buckets.numpy(), [[0, 3], [1, 2]])
    np.testing.assert_array_equal(
        ember.bucketize(ember.tensor([1, 5, 2]), ember.tensor([1, 2, 3]), right=True).numpy(),
        [1, 3, 2])


@needs_torch
def test_searchsorted_nan_matches_torch():
    seq, values = [1.0, math.nan, 3.0], [math.nan, 2.0, 5.0, 1.0]
    for right in (False, True):
        np.testing.assert_array_equal(
            ember.searchsorted(ember.tensor(seq), ember.tensor(values), right=right).numpy(),
            torch.searchsorted(torch.tensor(seq), torch.tensor(values), right=right).numpy())


@needs_torch
@pytest.mark.parametrize("call", [
    lambda m: m.searchsorted(m.ones(2, 3), m.ones(3, 3)),
    lambda m: m.searchsorted(m.tensor(1.0), m.ones(3)),
    lambda m: m.searchsorted(m.ones(3), m.ones(3), side="left", right=True),
    lambda m: m.searchsorted(m.ones(3), m.ones(3), side="lft"),
    lambda m: m.searchsorted(m.ones(3), m.ones(3), sorter=m.tensor([0, 1, 2], dtype=m.int32)),
    lambda m: m.searchsorted(m.ones(3), m.ones(3), sorter=m.tensor([0, 1])),
    lambda m: m.searchsorted(m.ones(3), m.ones(3), sorter=m.tensor([0, 1, 5])),
    lambda m: m.bucketize(m.ones(2), m.ones(2, 2)),
])
def test_search_errors_match_torch(call):
    raises_like_torch(lambda: call(ember), lambda: call(torch))


# ---- bincount, histc -------------------------------------------------------------------

def test_bincount_against_numpy():
    x = np.random.default_rng(4).integers(0, 7, 50)
    np.testing.assert_array_equal(ember.bincount(ember.tensor(x)).numpy(), np.bincount(x))
    w = rand(50)
    result = ember.tensor(x).bincount(ember.tensor(w), minlength=10)
    assert result.dtype == ember.float64
    np.testing.assert_allclose(result.numpy(), np.bincount(x, w, minlength=10))
    w32 = ember.tensor(w.astype(np.float32))
    assert ember.bincount(ember.tensor(x), weights=w32).dtype == ember.float32
    ints = ember.bincount(ember.tensor(x), weights=ember.tensor(x))
    assert ints.dtype == ember.float64
    empty = ember.bincount(ember.tensor([], dtype=ember.int64))
    assert empty.shape == (0,) and empty.dtype == ember.int64
    np.testing.assert_array_equal(
        ember.bincount(ember.tensor(np.array([1, 2], dtype=np.uint8)), minlength=4).numpy(),
        [0, 1, 1, 0])


@needs_torch
@pytest.mark.parametrize("call", [
    lambda m: m.bincount(m.tensor([1, -1, 3])),
    lambda m: m.bincount(m.tensor([1.0, 3.0])),
    lambda m: m.bincount(m.ones(2, 2, dtype=m.int64)),
    lambda m: m.bincount(m.tensor([1, 1, 3]), weights=m.tensor([0.5, 1.0])),
    lambda m: m.bincount(m.tensor([1, 1, 3]), minlength=-1),
    lambda m: m.histc(m.tensor([1, 2]), bins=4),
    lambda m: m.histc(m.tensor([1.0, 2.0]), bins=0),
    lambda m: m.histc(m.tensor([1.0, 2.0]), bins=3, min=3, max=1),
    lambda m: m.histc(m.tensor([1.0, 2.0]), bins=3, min=math.inf),
])
def test_count_errors_match_torch(call):
    raises_like_torch(lambda: call(ember), lambda: call(torch))


@functools.lru_cache(maxsize=None)
def _numpy_histogram(dtype, bins, value_range):
    """np.histogram's counts, computed once per case: the debug NumPy of
    the refcount gate leaks a reference in it (through np.linspace)."""
    return np.histogram(rand(200).astype(dtype), bins=bins, range=value_range)[0]


def test_histc_nan_range():
    # (PyTorch prints the NaN of its data range as "-nan")
    with pytest.raises(RuntimeError, match=r"torch.histc: range of \[-?nan, -?nan\] is not "
                                           "finite"):
        ember.histc(ember.tensor([1.0, 2.0, math.nan]), bins=4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_histc_against_numpy(dtype):
    x = rand(200).astype(dtype)
    result = ember.histc(ember.tensor(x), bins=7, min=-1, max=1.5)
    assert result.dtype == ember.tensor(x).dtype
    np.testing.assert_array_equal(result.numpy(), _numpy_histogram(dtype, 7, (-1.0, 1.5)))
    # min == max: the data's range; a constant input widens it by 1
    np.testing.assert_array_equal(ember.tensor(x).histc(10).numpy(),
                                  _numpy_histogram(dtype, 10, None))
    np.testing.assert_array_equal(ember.histc(ember.tensor([1.0, 1.0, 1.0]), bins=3).numpy(),
                                  [0.0, 3.0, 0.0])
    out = ember.empty(4)
    assert ember.histc(ember.tensor([1.0, 2.0, 1.0]), 4, 0, 3, out=out) is out
    np.testing.assert_array_equal(out.numpy(), [0.0, 2.0, 1.0, 0.0])


def test_search_and_count_have_no_gradient():
    x = ember.tensor([0.5, 1.5], requires_grad=True)
    assert not ember.searchsorted(ember.tensor([1.0, 2.0]), x).requires_grad
    assert not ember.histc(x, 2).requires_grad
