"""Issue 13's functions written over other operators (python/ember/_functions.py):
isclose, allclose, equal, meshgrid, take_along_dim, diff, kron, cdist,
tril_indices, triu_indices, flatten, unflatten, block_diag, cartesian_prod,
rot90, vander.  Values against NumPy, semantics and messages against PyTorch
(skipped without it), gradients by gradcheck.
"""

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


def leaf(*shape, seed=0):
    return ember.tensor(rand(*shape, seed=seed), requires_grad=True)


# ---- values against NumPy ------------------------------------------------------

def test_isclose_allclose_equal():
    a = np.array([1.0, math.inf, -math.inf, math.nan, 1.0, 0.0])
    b = np.array([1.0 + 1e-9, math.inf, math.inf, math.nan, 1.1, 1e-9])
    for equal_nan in (False, True):
        np.testing.assert_array_equal(
            ember.isclose(ember.tensor(a), ember.tensor(b), equal_nan=equal_nan).numpy(),
            np.isclose(a, b, equal_nan=equal_nan))
    assert ember.tensor(a[:2]).allclose(ember.tensor(b[:2]))
    assert not ember.allclose(ember.tensor(a), ember.tensor(b))
    assert ember.allclose(ember.tensor([1.0]), ember.tensor([1.05]), rtol=0.1)
    ints = ember.tensor([1, 2, 3])
    np.testing.assert_array_equal(ember.isclose(ints, ember.tensor([1, 3, 3]), atol=1).numpy(),
                                  [True, True, True])
    assert ember.equal(ints, ember.tensor([1, 2, 3])) is True
    assert ints.equal(ember.tensor([1, 2])) is False
    with pytest.raises(RuntimeError, match="rtol must be greater than or equal to zero"):
        ember.isclose(ints, ints, rtol=-1)


def test_meshgrid_against_numpy():
    x, y, z = np.arange(3.0), np.arange(4.0) * 2, np.array([5.0, 6.0])
    for indexing in ("ij", "xy"):
        grids = ember.meshgrid(ember.tensor(x), ember.tensor(y), ember.tensor(z),
                               indexing=indexing)
        expected = np.meshgrid(x, y, z, indexing=indexing)
        for g, e in zip(grids, expected):
            np.testing.assert_array_equal(g.numpy(), e)
    single = ember.meshgrid([ember.tensor(2.0), ember.tensor(x)])
    assert [tuple(g.shape) for g in single] == [(1, 3), (1, 3)]
    with pytest.raises(RuntimeError, match="Expected 0D or 1D tensor"):
        ember.meshgrid(ember.ones(2, 2), ember.ones(2))


def test_tril_triu_indices_against_numpy():
    for rows, cols, offset in [(3, 3, 0), (4, 3, -1), (3, 5, 2), (0, 3, 0), (3, 4, -5)]:
        for name, np_fn in (("tril_indices", np.tril_indices),
                            ("triu_indices", np.triu_indices)):
            result = getattr(ember, name)(rows, cols, offset)
            assert result.dtype == ember.int64 and result.shape[0] == 2
            np.testing.assert_array_equal(result.numpy(),
                                          np.stack(np_fn(rows, offset, cols)))
    assert ember.tril_indices(3, 3, dtype=ember.int32).dtype == ember.int32


def test_take_along_dim_against_numpy():
    x = rand(3, 4)
    idx = np.argsort(x, axis=1)
    np.testing.assert_array_equal(
        ember.take_along_dim(ember.tensor(x), ember.tensor(idx), dim=1).numpy(),
        np.take_along_axis(x, idx, axis=1))
    # broadcast indices, dim=None (flattened)
    np.testing.assert_array_equal(
        ember.tensor(x).take_along_dim(ember.tensor([[0, 2]]), 1).numpy(),
        np.take_along_axis(x, np.array([[0, 2]] * 3), axis=1))
    np.testing.assert_array_equal(
        ember.take_along_dim(ember.tensor(x), ember.tensor([5, 0])).numpy(), x.ravel()[[5, 0]])


@pytest.mark.parametrize("n, dim", [(1, -1), (2, 0), (3, 1), (0, 1)])
def test_diff_against_numpy(n, dim):
    x, pre, post = rand(4, 5), rand(4, 5, seed=1)[:2], rand(4, 5, seed=2)[:1]
    np.testing.assert_allclose(ember.tensor(x).diff(n, dim).numpy(), np.diff(x, n, axis=dim))
    if dim == 0:
        np.testing.assert_allclose(
            ember.diff(ember.tensor(x), n, dim, prepend=ember.tensor(pre),
                       append=ember.tensor(post)).numpy(),
            np.diff(x, n, axis=dim, prepend=pre, append=post))
    flags = np.array([True, False, False, True])
    np.testing.assert_array_equal(ember.diff(ember.tensor(flags)).numpy(), np.diff(flags))


def test_kron_against_numpy():
    for a_shape, b_shape in [((2, 3), (4, 5)), ((3,), (2, 2)), ((2, 1, 3), (3,))]:
        a, b = rand(*a_shape), rand(*b_shape, seed=1)
        np.testing.assert_allclose(ember.kron(ember.tensor(a), ember.tensor(b)).numpy(),
                                   np.kron(a, b))


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.5, math.inf])
def test_cdist_against_numpy(p):
    a, b = rand(2, 3, 4), rand(2, 5, 4, seed=1)
    gaps = np.abs(a[:, :, None, :] - b[:, None, :, :])
    if p == 0:
        expected = (gaps != 0).sum(-1).astype(np.float64)
    elif math.isinf(p):
        expected = gaps.max(-1)
    else:
        expected = (gaps ** p).sum(-1) ** (1 / p)
    np.testing.assert_allclose(ember.cdist(ember.tensor(a), ember.tensor(b), p=p).numpy(),
                               expected, rtol=1e-12)


def test_flatten_unflatten():
    x = ember.tensor(rand(2, 3, 4))
    assert ember.flatten(x).shape == (24,)
    assert ember.flatten(x, 1).shape == (2, 12)
    assert ember.unflatten(x, 2, (2, -1)).shape == (2, 3, 2, 2)
    assert x.unflatten(-1, [4, 1]).shape == (2, 3, 4, 1)
    np.testing.assert_array_equal(ember.unflatten(ember.flatten(x, 0, 1), 0, (2, 3)).numpy(),
                                  x.numpy())
    with pytest.raises(RuntimeError, match="don't multiply up to the size of dim"):
        ember.unflatten(x, 1, (2, 2))


def test_block_diag_cartesian_prod_rot90_vander():
    blocks = [np.array([[1.0, 2.0]]), np.array(3.0), np.array([4.0, 5.0]), rand(2, 2)]
    result = ember.block_diag(*[ember.tensor(b) for b in blocks]).numpy()
    expected = np.zeros((5, 7))
    expected[0, 0:2], expected[1, 2], expected[2, 3:5], expected[3:5, 5:7] = (
        blocks[0], blocks[1], blocks[2], blocks[3])
    np.testing.assert_array_equal(result, expected)
    assert ember.block_diag(ember.tensor([[1]]), ember.tensor([[2.0]])).dtype == ember.float32
    product = ember.cartesian_prod(ember.tensor([1, 2]), ember.tensor([3, 4, 5])).numpy()
    np.testing.assert_array_equal(product, [[a, b] for a in (1, 2) for b in (3, 4, 5)])
    x = rand(3, 4, 2)
    for k in (-1, 0, 1, 2, 3, 5):
        np.testing.assert_array_equal(ember.tensor(x).rot90(k, [0, 1]).numpy(),
                                      np.rot90(x, k, (0, 1)))
        np.testing.assert_array_equal(ember.rot90(ember.tensor(x), k, [2, 0]).numpy(),
                                      np.rot90(x, k, (2, 0)))
    v = np.array([1.0, 2.0, -3.0])
    for n in (None, 0, 1, 5):
        for increasing in (False, True):
            np.testing.assert_array_equal(
                ember.vander(ember.tensor(v), N=n, increasing=increasing).numpy(),
                np.vander(v, n, increasing=increasing))
    assert ember.vander(ember.tensor([1, 2])).dtype == ember.int64


# ---- semantics and messages against PyTorch ------------------------------------------

@needs_torch
@pytest.mark.parametrize("call", [
    lambda m: m.isclose(m.ones(2), m.ones(2, dtype=m.float64)),
    lambda m: m.isclose(m.ones(2), m.ones(2), atol=-1.0),
    lambda m: m.meshgrid(m.ones(2), indexing="yx"),
    lambda m: m.diff(m.tensor(1.0)),
    lambda m: m.diff(m.ones(3), n=-1),
    lambda m: m.cdist(m.ones(3), m.ones(2, 3)),
    lambda m: m.cdist(m.ones(2, 3), m.ones(2, 4)),
    lambda m: m.cdist(m.ones(2, 3), m.ones(2, 3), p=-1.0),
    lambda m: m.block_diag(m.ones(1, 1, 1)),
    lambda m: m.cartesian_prod(m.ones(2, 2)),
    lambda m: m.rot90(m.ones(2, 2), 1, [0, 1, 2]),
    lambda m: m.rot90(m.ones(2), 1, [0, 1]),
    lambda m: m.rot90(m.ones(2, 2), 1, [1, 1]),
    lambda m: m.vander(m.ones(2, 2)),
    lambda m: m.vander(m.ones(2), N=-1),
    lambda m: m.take_along_dim(m.ones(2, 2), m.ones(2, 2, dtype=m.int32), 1),
    lambda m: m.take_along_dim(m.ones(2, 2), m.ones(2, dtype=m.int64), 1),
])
def test_errors_match_torch(call):
    with pytest.raises(Exception) as expected:
        call(torch)
    with pytest.raises(type(expected.value)) as info:
        call(ember)
    assert str(info.value) == str(expected.value)


@needs_torch
def test_grids_are_views_and_results_match_torch():
    x, y = rand(3), rand(4, seed=1)
    mine = ember.meshgrid(ember.tensor(x), ember.tensor(y), indexing="xy")
    theirs = torch.meshgrid(torch.tensor(x), torch.tensor(y), indexing="xy")
    for m, t in zip(mine, theirs):
        assert tuple(m.stride()) == t.stride()
        np.testing.assert_array_equal(m.numpy(), t.numpy())
    a, b = rand(4, 3), rand(6, 3, seed=2)
    b[2] = a[1]  # a zero distance
    np.testing.assert_allclose(ember.cdist(ember.tensor(a), ember.tensor(b)).numpy(),
                               torch.cdist(torch.tensor(a), torch.tensor(b)).numpy(),
                               rtol=1e-12, atol=1e-12)


# ---- gradients ----------------------------------------------------------------------

@pytest.mark.parametrize("fn, make", [
    (lambda a, b: ember.cdist(a, b), lambda: (leaf(2, 3, 4), leaf(2, 5, 4, seed=1))),
    (lambda a, b: ember.cdist(a, b, p=1.5), lambda: (leaf(3, 4), leaf(5, 4, seed=1))),
    (lambda a, b: ember.cdist(a, b, p=math.inf), lambda: (leaf(3, 4), leaf(5, 4, seed=1))),
    (ember.kron, lambda: (leaf(2, 3), leaf(3, 2, seed=1))),
    (lambda a, p: ember.diff(a, 2, 0, prepend=p), lambda: (leaf(4, 3), leaf(1, 3, seed=1))),
    (lambda a: ember.take_along_dim(a, ember.tensor([[0, 0], [2, 1]]), 1),
     lambda: (leaf(2, 3),)),
    (lambda a, b: ember.block_diag(a, b), lambda: (leaf(2, 3), leaf(2, seed=1))),
    (lambda a, b: ember.cartesian_prod(a, b), lambda: (leaf(2), leaf(3, seed=1))),
    (lambda a: ember.rot90(a, 3, [1, 2]), lambda: (leaf(2, 3, 4),)),
    (lambda a: ember.vander(a, 4), lambda: (leaf(3),)),
    (lambda a, b: ember.meshgrid(a, b, indexing="xy")[0] * ember.meshgrid(a, b)[1].t(),
     lambda: (leaf(3), leaf(2, seed=1))),
    (lambda a: ember.unflatten(a, 1, (2, 2)).sum(2), lambda: (leaf(3, 4),)),
])
def test_gradcheck(fn, make):
    assert gradcheck(fn, make())


def test_cdist_zero_distance_gradient_is_zero():
    a = ember.tensor([[1.0, 2.0]], dtype=ember.float64, requires_grad=True)
    ember.cdist(a, ember.tensor([[1.0, 2.0]], dtype=ember.float64)).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [[0.0, 0.0]])
