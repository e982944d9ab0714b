"""Issue 13's scatter_reduce (c/th/THIndex.c): sum, prod, mean, amax, amin,
with and without include_self, the in-place form, errors and derivatives.

NumPy's ufunc.at is the value oracle; PyTorch checks messages and gradients
(skipped without it).
"""

import numpy as np
import pytest

import ember
from ember.autograd import gradcheck

try:
    import torch
except ImportError:  # pragma: no cover - torch is optional
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")

UFUNCS = {"sum": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}
IDENTITY = {"sum": 0, "prod": 1, "mean": 0}


def reference(input, dim, index, src, reduce, include_self):
    """scatter_reduce along dim 0 or 1 of 2-D arrays, with ufunc.at."""
    out = input.copy()
    rows, cols = np.indices(index.shape)
    target = (index, cols) if dim == 0 else (rows, index)
    written = np.zeros(input.shape, dtype=bool)
    written[target] = True
    if not include_self:
        if reduce in IDENTITY:
            out[written] = IDENTITY[reduce]
        elif np.issubdtype(input.dtype, np.floating):
            out[written] = -np.inf if reduce == "amax" else np.inf
        else:
            info = np.iinfo(input.dtype)
            out[written] = info.min if reduce == "amax" else info.max
    values = src[: index.shape[0], : index.shape[1]]
    if reduce == "mean":
        np.add.at(out, target, values)
        counts = np.full(input.shape, 1 if include_self else 0)
        np.add.at(counts, target, 1)
        counts = np.maximum(counts, 1)
        if np.issubdtype(input.dtype, np.floating):
            return out / counts
        return out // counts
    UFUNCS[reduce].at(out, target, values)
    return out


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_values_against_numpy(reduce, include_self):
    rng = np.random.default_rng(0)
    for dtype in (np.float64, np.float32, np.int64):
        for dim in (0, 1):
            input = (rng.normal(size=(4, 5)) * 4).round().astype(dtype)
            src = (rng.normal(size=(5, 6)) * 4).round().astype(dtype)
            index = rng.integers(0, input.shape[dim], size=(3, 4))
            result = ember.tensor(input).scatter_reduce(
                dim, ember.tensor(index), ember.tensor(src), reduce, include_self=include_self)
            expected = reference(input, dim, index, src, reduce, include_self)
            assert result.dtype == ember.tensor(input).dtype
            np.testing.assert_allclose(result.numpy(), expected, rtol=1e-6)


def test_inplace_function_and_nan():
    x = ember.tensor([5.0, 1.0, 1.0])
    index = ember.tensor([0, 0, 2])
    assert x.scatter_reduce_(0, index, ember.tensor([1.0, 2.0, float("nan")]), "amax",
                             include_self=False) is x
    out = x.numpy()
    assert out[0] == 2.0 and out[1] == 1.0 and np.isnan(out[2])
    y = ember.scatter_reduce(ember.zeros(3, dtype=ember.int64), 0, index,
                             ember.tensor([1, 2, 4]), "mean")
    assert y.tolist() == [1, 0, 2]


@needs_torch
@pytest.mark.parametrize("call", [
    lambda m: m.zeros(3).scatter_reduce(0, m.tensor([0, 0, 2]), m.ones(3), "lol"),
    lambda m: m.zeros(3).scatter_reduce(0, m.tensor([0, 0, 2]), m.ones(3, dtype=m.float64),
                                        "sum"),
    lambda m: m.zeros(3).scatter_reduce(0, m.tensor([0.0]), m.ones(3), "sum"),
])
def test_errors_match_torch(call):
    with pytest.raises(RuntimeError) as expected:
        call(torch)
    with pytest.raises(RuntimeError) as info:
        call(ember)
    assert str(info.value) == str(expected.value)


def test_error_leaves_self_untouched():
    x = ember.ones(3)
    with pytest.raises(RuntimeError):
        x.scatter_reduce_(0, ember.tensor([0, 1]), ember.ones(2, dtype=ember.float64), "amax",
                          include_self=False)
    assert x.tolist() == [1.0, 1.0, 1.0]


def _leaves(seed=0):
    rng = np.random.default_rng(seed)
    # distinct values: amax/amin are differentiable away from ties
    input = ember.tensor(rng.permutation(12).reshape(3, 4) + 0.5, dtype=ember.float64,
                         requires_grad=True)
    src = ember.tensor(rng.permutation(6).reshape(2, 3) * 1.7 + 0.25, dtype=ember.float64,
                       requires_grad=True)
    index = ember.tensor(rng.integers(0, 3, size=(2, 3)))
    return input, index, src


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_gradcheck(reduce, include_self):
    input, index, src = _leaves()
    assert gradcheck(lambda a, b: ember.scatter_reduce(a, 0, index, b, reduce,
                                                       include_self=include_self),
                     (input, src))


@needs_torch
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_gradients_match_torch_with_ties(reduce, include_self):
    input = np.array([[1.0, 2.0, 3.0], [2.0, 2.0, 0.5]])
    src = np.array([[2.0, 1.0, 3.0], [2.0, 4.0, 0.5]])
    index = np.array([[0, 1, 0], [0, 1, 1]])
    grads = []
    for m in (ember, torch):
        a = m.tensor(input, requires_grad=True)
        b = m.tensor(src, requires_grad=True)
        out = a.scatter_reduce(0, m.tensor(index), b, reduce, include_self=include_self)
        (out * m.tensor([[1.0, -2.0, 3.0], [0.5, 1.0, 2.0]], dtype=m.float64)).sum().backward()
        grads.append((a.grad.numpy(), b.grad.numpy()))
    for mine, theirs in zip(*grads):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12)


@needs_torch
@pytest.mark.parametrize("include_self", [True, False])
def test_prod_gradients_at_zeros_match_torch(include_self):
    """A zero's gradient is the product of the other values (and 0 where a
    second zero meets it), not grad * result / 0: PyTorch's masked formula."""
    input = np.array([[2.0, 0.0, 3.0], [1.0, 5.0, 0.0]])
    src = np.array([[0.0, 4.0, 2.0, 0.0], [3.0, 0.0, 0.0, 7.0]])
    index = np.array([[0, 0, 1, 2], [1, 2, 2, 0]])
    grads = []
    for m in (ember, torch):
        a = m.tensor(input, requires_grad=True)
        b = m.tensor(src, requires_grad=True)
        out = a.scatter_reduce(1, m.tensor(index), b, "prod", include_self=include_self)
        out.backward(m.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=m.float64))
        grads.append((a.grad.numpy(), b.grad.numpy()))
    for mine, theirs in zip(*grads):
        assert np.isfinite(mine).all()
        np.testing.assert_array_equal(mine, theirs)
