"""Issue 12's 3-D pooling (MaxPool3d, AvgPool3d, AdaptiveAvgPool3d,
AdaptiveMaxPool3d and their functional forms) and max unpooling
(MaxUnpool1d/2d/3d, F.max_unpool*) against PyTorch: values, PyTorch's flat
indices (ties included: the first maximum in (d, h, w) order), every
gradient in float64 and float32, batched, unbatched and empty batches,
reprs, error messages, gradchecks.  Pure Python over the 2-D pooling
kernels and other gated operators (Note [Separable 3-D pooling])."""

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.autograd import gradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional

from torch_pairs import DTYPES, DTYPE_IDS, check_same, pair, tolerance  # noqa: E402


def sample(shape, ties=False, seed=0):
    rng = np.random.default_rng(seed)
    if ties:   # few distinct values: most windows hold their maximum twice
        return rng.integers(0, 3, shape).astype(np.float64)
    return rng.standard_normal(shape)


def compare(ours_fn, theirs_fn, array, dtypes, indices=False):
    """Values (and indices), then the input gradient of a weighted sum
    (PyTorch's adaptive backward refuses an empty output: forward only)."""
    ours_x, theirs_x = pair(array, dtypes)
    ours, theirs = ours_fn(ours_x), theirs_fn(theirs_x)
    if indices:
        (ours, ours_i), (theirs, theirs_i) = ours, theirs
        assert ours_i.dtype == ember.int64
        np.testing.assert_array_equal(ours_i.numpy(), theirs_i.numpy())
    check_same(ours, theirs, **tolerance(dtypes))
    assert ours.dtype == ours_x.dtype
    if theirs.numel() == 0 and ours_x.numel() != 0:
        return
    weights = np.random.default_rng(9).standard_normal(tuple(theirs.shape))
    (ours * ember.tensor(weights, dtype=dtypes[0])).sum().backward()
    (theirs * torch.tensor(weights, dtype=dtypes[1])).sum().backward()
    check_same(ours_x.grad, theirs_x.grad, **tolerance(dtypes))


def same_error(kind, ours_fn, theirs_fn):
    with pytest.raises(kind) as ours:
        ours_fn()
    with pytest.raises(kind) as theirs:
        theirs_fn()
    assert str(ours.value) == str(theirs.value)


# ---- max_pool3d ----------------------------------------------------------------------

MAX_CASES = [   # (kwargs, input shape)
    (dict(kernel_size=2), (2, 3, 4, 4, 4)),
    (dict(kernel_size=(2, 3, 2), stride=(1, 2, 1), padding=(1, 1, 0)), (2, 2, 5, 6, 7)),
    (dict(kernel_size=3, stride=2, padding=1, ceil_mode=True), (1, 2, 6, 5, 7)),
    (dict(kernel_size=(2, 2, 3), stride=1, padding=(1, 0, 1), dilation=(2, 1, 2)),
     (1, 2, 6, 4, 7)),
    (dict(kernel_size=(3, 2, 2), stride=(2, 1, 3), dilation=(2, 2, 1), ceil_mode=True),
     (2, 1, 8, 6, 7)),
    (dict(kernel_size=2, stride=1), (3, 4, 3, 5)),           # unbatched (C, D, H, W)
    (dict(kernel_size=2), (0, 3, 4, 4, 4)),                  # empty batch
]


@pytest.mark.parametrize("kwargs, shape", MAX_CASES)
@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
@pytest.mark.parametrize("dtypes", DTYPES, ids=DTYPE_IDS)
def test_max_pool3d_matches_torch(kwargs, shape, ties, dtypes):
    array = sample(shape, ties)
    compare(lambda x: F.max_pool3d(x, **kwargs, return_indices=True),
            lambda x: TF.max_pool3d(x, **kwargs, return_indices=True), array, dtypes, True)
    compare(lambda x: F.max_pool3d(x, **kwargs), lambda x: TF.max_pool3d(x, **kwargs),
            array, dtypes)
    ours, theirs = nn.MaxPool3d(**kwargs), torch.nn.MaxPool3d(**kwargs)
    assert repr(ours) == repr(theirs)
    compare(ours, theirs, array, dtypes)


def test_max_pool3d_windows_of_minus_infinity_name_torch_indices():
    array = np.full((1, 1, 4, 3, 3), -np.inf)
    array[0, 0, 3, 2, 2] = 1.0
    for kwargs in (dict(kernel_size=3, stride=1, padding=1),
                   dict(kernel_size=(3, 2, 2), stride=2, padding=(1, 1, 0), ceil_mode=True),
                   dict(kernel_size=2, stride=1, padding=1, dilation=(2, 1, 1))):
        ours_x, theirs_x = pair(array)
        ours, ours_i = F.max_pool3d(ours_x, **kwargs, return_indices=True)
        theirs, theirs_i = TF.max_pool3d(theirs_x, **kwargs, return_indices=True)
        np.testing.assert_array_equal(ours.detach().numpy(), theirs.detach().numpy())
        np.testing.assert_array_equal(ours_i.numpy(), theirs_i.numpy())
        ours.sum().backward()
        theirs.sum().backward()
        np.testing.assert_array_equal(ours_x.grad.numpy(), theirs_x.grad.numpy())


def test_max_pool3d_of_integers_matches_torch():
    array = np.random.default_rng(0).integers(-50, 50, (2, 2, 4, 5, 4))
    ours = F.max_pool3d(ember.tensor(array), 2, 1, 1, return_indices=True)
    theirs = TF.max_pool3d(torch.tensor(array), 2, 1, 1, return_indices=True)
    for o, t in zip(ours, theirs):
        assert str(o.dtype).removeprefix("ember.") == str(t.dtype).removeprefix("torch.")
        np.testing.assert_array_equal(o.numpy(), t.numpy())


# ---- avg_pool3d ----------------------------------------------------------------------

AVG_CASES = [
    (dict(kernel_size=2), (2, 3, 4, 4, 4)),
    (dict(kernel_size=(3, 2, 3), stride=(2, 1, 2), padding=1), (2, 2, 5, 6, 7)),
    (dict(kernel_size=(3, 2, 3), stride=(2, 1, 2), padding=1, count_include_pad=False),
     (2, 2, 5, 6, 7)),
    (dict(kernel_size=3, stride=2, padding=1, ceil_mode=True), (1, 2, 6, 5, 8)),
    (dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
     (1, 2, 6, 5, 8)),
    (dict(kernel_size=(2, 3, 2), stride=1, padding=(1, 1, 0), divisor_override=5),
     (1, 2, 4, 5, 3)),
    (dict(kernel_size=2, stride=1, padding=1, ceil_mode=True, count_include_pad=False),
     (3, 4, 3, 5)),                                           # unbatched
    (dict(kernel_size=2), (0, 3, 4, 4, 4)),
]


@pytest.mark.parametrize("kwargs, shape", AVG_CASES)
@pytest.mark.parametrize("dtypes", DTYPES, ids=DTYPE_IDS)
def test_avg_pool3d_matches_torch(kwargs, shape, dtypes):
    array = sample(shape)
    compare(lambda x: F.avg_pool3d(x, **kwargs), lambda x: TF.avg_pool3d(x, **kwargs),
            array, dtypes)
    ours, theirs = nn.AvgPool3d(**kwargs), torch.nn.AvgPool3d(**kwargs)
    assert repr(ours) == repr(theirs)
    compare(ours, theirs, array, dtypes)


# ---- adaptive pooling ------------------------------------------------------------------

ADAPTIVE_CASES = [
    (2, (2, 3, 4, 4, 4)), ((3, 4, 2), (2, 2, 5, 6, 7)), ((None, 2, 5), (1, 2, 6, 5, 3)),
    ((7, 1, 3), (1, 2, 3, 5, 2)),    # more outputs than inputs: overlapping windows
    (1, (3, 4, 3, 5)), ((0, 2, 2), (1, 2, 3, 4, 4)), (2, (0, 3, 4, 4, 4)),
]


@pytest.mark.parametrize("output_size, shape", ADAPTIVE_CASES)
@pytest.mark.parametrize("dtypes", DTYPES, ids=DTYPE_IDS)
def test_adaptive_avg_pool3d_matches_torch(output_size, shape, dtypes):
    compare(lambda x: F.adaptive_avg_pool3d(x, output_size),
            lambda x: TF.adaptive_avg_pool3d(x, output_size), sample(shape), dtypes)
    ours, theirs = nn.AdaptiveAvgPool3d(output_size), torch.nn.AdaptiveAvgPool3d(output_size)
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("output_size, shape", ADAPTIVE_CASES)
@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
@pytest.mark.parametrize("dtypes", DTYPES, ids=DTYPE_IDS)
def test_adaptive_max_pool3d_matches_torch(output_size, shape, ties, dtypes):
    array = sample(shape, ties)
    compare(lambda x: F.adaptive_max_pool3d(x, output_size, True),
            lambda x: TF.adaptive_max_pool3d(x, output_size, True), array, dtypes, True)
    ours = nn.AdaptiveMaxPool3d(output_size, True)
    theirs = torch.nn.AdaptiveMaxPool3d(output_size, True)
    assert repr(ours) == repr(theirs)
    compare(ours, theirs, array, dtypes, True)


# ---- max unpooling ---------------------------------------------------------------------

UNPOOL_CASES = [   # (spatial dims, kernel, stride, padding, input shape, output_size)
    (1, 2, None, 0, (2, 3, 8), None), (1, 3, 2, 1, (2, 7), None), (1, 2, 2, 0, (1, 2, 7), [7]),
    (2, 2, None, 0, (2, 3, 4, 6), None), (2, (2, 3), (1, 2), (1, 1), (1, 2, 5, 7), None),
    (2, 2, 2, 0, (3, 5, 5), (5, 5)), (2, 2, 2, 0, (1, 3, 5, 5), (1, 3, 5, 5)),
    (3, 2, None, 0, (1, 2, 4, 4, 6), None),
    (3, (2, 3, 2), 2, (1, 1, 0), (2, 1, 5, 6, 4), (5, 6, 4)),
    (3, 2, 2, 0, (2, 5, 4, 5), (5, 4, 5)),
]


@pytest.mark.parametrize("spatial, kernel, stride, padding, shape, output_size", UNPOOL_CASES)
@pytest.mark.parametrize("dtypes", DTYPES, ids=DTYPE_IDS)
def test_max_unpool_inverts_torch_pooling(spatial, kernel, stride, padding, shape, output_size,
                                          dtypes):
    pool = getattr(TF, f"max_pool{spatial}d")
    theirs_pooled, theirs_indices = pool(torch.tensor(sample(shape)), kernel, stride, padding,
                                         return_indices=True)
    indices = ember.tensor(theirs_indices.numpy())
    name = f"max_unpool{spatial}d"
    compare(lambda x: getattr(F, name)(x, indices, kernel, stride, padding, output_size),
            lambda x: getattr(TF, name)(x, theirs_indices, kernel, stride, padding,
                                        output_size),
            theirs_pooled.numpy(), dtypes)
    module = f"MaxUnpool{spatial}d"
    ours, theirs = getattr(nn, module)(kernel, stride, padding), \
        getattr(torch.nn, module)(kernel, stride, padding)
    assert repr(ours) == repr(theirs)
    compare(lambda x: ours(x, indices, output_size), lambda x: theirs(x, theirs_indices,
                                                                     output_size),
            theirs_pooled.numpy(), dtypes)


def test_max_unpool_of_our_own_pooling_round_trips():
    x = ember.tensor(sample((1, 2, 4, 6, 4)))
    pooled, indices = nn.MaxPool3d(2, return_indices=True)(x)
    restored = nn.MaxUnpool3d(2)(pooled, indices)
    theirs = torch.nn.MaxUnpool3d(2)(*torch.nn.MaxPool3d(2, return_indices=True)(
        torch.tensor(x.numpy())))
    check_same(restored, theirs)


UNPOOL_ERRORS = [
    ("max_unpool2d", (1, 1, 2, 2), (1, 1, 2, 2), 99, {}),
    ("max_unpool2d", (1, 1, 2, 2), (1, 1, 2, 2), -1, {}),
    ("max_unpool3d", (1, 1, 2, 2, 2), (1, 1, 2, 2, 2), 99, {}),
    ("max_unpool1d", (1, 1, 2), (1, 1, 2), 99, {}),
    ("max_unpool2d", (1, 1, 2, 2), (1, 1, 2, 2), 0, dict(output_size=(9, 9))),
    ("max_unpool2d", (1, 1, 2, 2), (1, 1, 2, 2), 0, dict(output_size=(9,))),
    ("max_unpool2d", (1, 1, 2, 2), (1, 1, 2, 3), 0, {}),
    ("max_unpool2d", (2, 2), (2, 2), 0, {}),
    ("max_unpool3d", (2, 2, 2), (2, 2, 2), 0, {}),
    ("max_unpool2d", (1, 0, 2, 2), (1, 0, 2, 2), 0, {}),
]


@pytest.mark.parametrize("name, shape, index_shape, value, kwargs", UNPOOL_ERRORS)
def test_max_unpool_errors_match_torch(name, shape, index_shape, value, kwargs):
    kind = ValueError if "output_size" in kwargs else RuntimeError
    same_error(kind, lambda: getattr(F, name)(ember.ones(shape),
                                              ember.full(index_shape, value, dtype=ember.int64),
                                              2, **kwargs),
               lambda: getattr(TF, name)(torch.ones(shape), torch.full(index_shape, value), 2,
                                         **kwargs))
    if not kwargs:
        same_error(RuntimeError,
                   lambda: getattr(F, name)(ember.ones(shape),
                                            ember.zeros(index_shape, dtype=ember.int32), 2),
                   lambda: getattr(TF, name)(torch.ones(shape),
                                             torch.zeros(index_shape, dtype=torch.int32), 2))


# ---- gradchecks and errors ------------------------------------------------------------

def test_gradchecks():
    x = ember.tensor(sample((1, 2, 4, 5, 4)), requires_grad=True)
    assert gradcheck(lambda t: F.max_pool3d(t, (2, 3, 2), (1, 2, 1), (1, 1, 0),
                                            ceil_mode=True), (x,))
    assert gradcheck(lambda t: F.avg_pool3d(t, 3, 2, 1, True, False), (x,))
    assert gradcheck(lambda t: F.avg_pool3d(t, 2, 1, divisor_override=3), (x,))
    assert gradcheck(lambda t: F.adaptive_avg_pool3d(t, (3, 2, 3)), (x,))
    assert gradcheck(lambda t: F.adaptive_max_pool3d(t, (3, 2, 3)), (x,))
    pooled, indices = F.max_pool3d(x.detach(), 2, return_indices=True)
    pooled.requires_grad_(True)
    assert gradcheck(lambda t: F.max_unpool3d(t, indices, 2, output_size=(4, 5, 4)), (pooled,))


X = (1, 2, 4, 4, 4)
POOL_ERRORS = [
    ("max_pool3d", (2, 4, 4), (2,), {}), ("max_pool3d", X, ((0, 2, 2),), {}),
    ("max_pool3d", X, ((0, 2, 2), 1), {}), ("max_pool3d", X, (2, (0, 1, 1)), {}),
    ("max_pool3d", X, (2, (-1, 1, 1)), {}), ("max_pool3d", X, (2, 1, (2, 0, 0)), {}),
    ("max_pool3d", X, (2, 1, (0, -1, 0)), {}), ("max_pool3d", X, (2, 1, 0, (0, 1, 1)), {}),
    ("max_pool3d", (1, 2, 1, 4, 4), (2,), {}), ("max_pool3d", X, ((2, 2),), {}),
    ("max_pool3d", X, (2, (1, 1)), {}), ("max_pool3d", X, (2, 1, (1, 1)), {}),
    ("max_pool3d", X, (2, 1, 0, (1, 1)), {}), ("max_pool3d", (1, 0, 4, 4, 4), (2,), {}),
    ("max_pool3d", (0, 4, 4, 4), (2,), {}),
    ("avg_pool3d", (2, 4, 4), (2,), {}), ("avg_pool3d", X, (2, 1, (2, 0, 0)), {}),
    ("avg_pool3d", X, (2, (0, 1, 1)), {}), ("avg_pool3d", X, (2,), dict(divisor_override=0)),
    ("avg_pool3d", (1, 2, 1, 4, 4), (2,), {}), ("avg_pool3d", X, ((0, 2, 2), 1), {}),
    ("avg_pool3d", X, ((2, 2),), {}), ("avg_pool3d", X, (2, (1, 1)), {}),
    ("avg_pool3d", X, (2, 1, (1, 1)), {}), ("avg_pool3d", (1, 0, 4, 4, 4), (2,), {}),
    ("avg_pool3d", X, ((3, 2, 2), 1, (1, 1, 2)), {}),
    ("adaptive_avg_pool3d", (4, 4), (2,), {}), ("adaptive_avg_pool3d", X, ((-1, 2, 2),), {}),
    ("adaptive_avg_pool3d", X, ((2, 2),), {}), ("adaptive_avg_pool3d", (1, 2, 0, 4, 4), (2,), {}),
    ("adaptive_max_pool3d", (4, 4), (2,), {}), ("adaptive_max_pool3d", X, ((-1, 2, 2),), {}),
    ("adaptive_max_pool3d", X, ((2, 2),), {}), ("adaptive_max_pool3d", (1, 2, 0, 4, 4), (2,), {}),
]


@pytest.mark.parametrize("name, shape, args, kwargs", POOL_ERRORS)
def test_pool3d_errors_match_torch(name, shape, args, kwargs):
    same_error(RuntimeError, lambda: getattr(F, name)(ember.ones(shape), *args, **kwargs),
               lambda: getattr(TF, name)(torch.ones(shape), *args, **kwargs))


@pytest.mark.parametrize("name", ["adaptive_avg_pool3d", "adaptive_max_pool3d"])
def test_adaptive_pool3d_of_integers_is_refused_as_torch(name):
    same_error(NotImplementedError, lambda: getattr(F, name)(ember.ones(X, dtype=ember.int64), 2),
               lambda: getattr(TF, name)(torch.ones(X, dtype=torch.int64), 2))


def test_modules_are_exported_where_torch_has_them():
    for name in ("MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d", "AdaptiveMaxPool3d",
                 "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d"):
        assert getattr(nn, name) is getattr(nn.modules, name)
        assert getattr(nn, name).__module__ == "ember.nn.modules.pooling"
        assert getattr(torch.nn, name).__module__ == "torch.nn.modules.pooling"


def test_padded_max_pool2d_of_integers_matches_torch():
    # the 2-D composite once padded integers with -inf, which int64 cannot hold
    array = np.random.default_rng(1).integers(-50, 50, (2, 3, 5, 4))
    ours = F.max_pool2d(ember.tensor(array), 3, 2, 1, return_indices=True)
    theirs = TF.max_pool2d(torch.tensor(array), 3, 2, 1, return_indices=True)
    for o, t in zip(ours, theirs):
        np.testing.assert_array_equal(o.numpy(), t.numpy())
