"""Issue 12's Fold/Unfold layers, Softmax2d, ChannelShuffle with
F.channel_shuffle, LocalResponseNorm with F.local_response_norm and RReLU
with F.rrelu/rrelu_: values and every gradient against PyTorch in float64
and float32 (batched, unbatched, empty batches), reprs, error messages,
gradchecks; RReLU's random slopes checked by their properties under a
fixed ember.manual_seed, never by PyTorch's random stream.  Pure Python
over existing operators."""

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.autograd import gradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional

from torch_pairs import DTYPES, DTYPE_IDS, check_same, pair, tolerance  # noqa: E402


def compare(ours_fn, theirs_fn, shape, dtypes, seed=0, **tol):
    """Forward values and the input gradient of a weighted sum, both sides."""
    array = np.random.default_rng(seed).standard_normal(shape)
    ours_x, theirs_x = pair(array, dtypes)
    ours, theirs = ours_fn(ours_x), theirs_fn(theirs_x)
    tol = tol or tolerance(dtypes)
    check_same(ours, theirs, **tol)
    assert ours.dtype == ours_x.dtype
    weights = np.random.default_rng(seed + 1).standard_normal(tuple(theirs.shape))
    (ours * ember.tensor(weights, dtype=dtypes[0])).sum().backward()
    (theirs * torch.tensor(weights, dtype=dtypes[1])).sum().backward()
    check_same(ours_x.grad, theirs_x.grad, **tol)


def same_error(kind, ours_fn, theirs_fn):
    with pytest.raises(kind) as ours:
        ours_fn()
    with pytest.raises(kind) as theirs:
        theirs_fn()
    assert str(ours.value) == str(theirs.value)


# ---- Fold / Unfold -------------------------------------------------------------------

UNFOLD_CASES = [  # (kernel_size, dilation, padding, stride, input shape)
    (2, 1, 0, 1, (2, 3, 4, 5)), ((2, 3), 1, 1, 1, (2, 2, 5, 4)),
    (3, 2, 1, (2, 1), (1, 2, 7, 6)), ((1, 2), (2, 1), (0, 1), 2, (3, 4, 5)),   # unbatched
    (2, 1, 0, 1, (0, 3, 4, 5)),
]


@pytest.mark.parametrize("kernel, dilation, padding, stride, shape", UNFOLD_CASES)
@pytest.mark.parametrize("dtypes", DTYPES, ids=DTYPE_IDS)
def test_unfold_and_fold_modules_match_torch(kernel, dilation, padding, stride, shape, dtypes):
    ours, theirs = (nn.Unfold(kernel, dilation, padding, stride),
                    torch.nn.Unfold(kernel, dilation, padding, stride))
    assert repr(ours) == repr(theirs)
    compare(ours, theirs, shape, dtypes)
    columns = theirs(torch.zeros(shape)).shape
    output_size = shape[-2:]
    ours, theirs = (nn.Fold(output_size, kernel, dilation, padding, stride),
                    torch.nn.Fold(output_size, kernel, dilation, padding, stride))
    assert repr(ours) == repr(theirs)
    compare(ours, theirs, tuple(columns), dtypes)


def test_fold_of_unfold_counts_the_overlaps_as_torch():
    x = ember.ones(1, 2, 4, 5, dtype=ember.float64)
    counts = nn.Fold((4, 5), 2)(nn.Unfold(2)(x))
    expected = torch.nn.Fold((4, 5), 2)(torch.nn.Unfold(2)(torch.ones(1, 2, 4, 5,
                                                                      dtype=torch.float64)))
    check_same(counts, expected)


def test_fold_and_unfold_gradcheck():
    x = ember.tensor(np.random.default_rng(0).standard_normal((1, 2, 4, 4)), requires_grad=True)
    assert gradcheck(nn.Unfold((2, 3), padding=1, stride=(1, 2)), (x,))
    cols = ember.tensor(np.random.default_rng(1).standard_normal((1, 8, 9)), requires_grad=True)
    assert gradcheck(nn.Fold((4, 4), 2, stride=1), (cols,))


# ---- Softmax2d -------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (3, 4, 5), (0, 3, 2, 2)])
@pytest.mark.parametrize("dtypes", DTYPES, ids=DTYPE_IDS)
def test_softmax2d_matches_torch(shape, dtypes):
    assert repr(nn.Softmax2d()) == repr(torch.nn.Softmax2d())
    compare(nn.Softmax2d(), torch.nn.Softmax2d(), shape, dtypes)


@pytest.mark.parametrize("shape", [(3, 4), (1, 2, 3, 4, 5)])
def test_softmax2d_rank_error_matches_torch(shape):
    same_error(ValueError, lambda: nn.Softmax2d()(ember.ones(shape)),
               lambda: torch.nn.Softmax2d()(torch.ones(shape)))


def test_softmax2d_gradcheck():
    x = ember.tensor(np.random.default_rng(0).standard_normal((2, 3, 2, 2)), requires_grad=True)
    assert gradcheck(nn.Softmax2d(), (x,))


# ---- ChannelShuffle --------------------------------------------------------------------

@pytest.mark.parametrize("groups, shape", [(2, (2, 4, 3)), (3, (2, 6, 2, 3)), (1, (1, 5, 2)),
                                           (4, (1, 8, 1, 2, 2)), (2, (0, 4, 3)),
                                           (6, (2, 6, 3))])
@pytest.mark.parametrize("dtypes", DTYPES, ids=DTYPE_IDS)
def test_channel_shuffle_matches_torch(groups, shape, dtypes):
    compare(lambda x: F.channel_shuffle(x, groups), lambda x: TF.channel_shuffle(x, groups),
            shape, dtypes)
    compare(nn.ChannelShuffle(groups), torch.nn.ChannelShuffle(groups), shape, dtypes)


def test_channel_shuffle_of_integers_and_repr():
    ours = F.channel_shuffle(ember.arange(24).reshape(2, 6, 2), 3)
    theirs = TF.channel_shuffle(torch.arange(24).reshape(2, 6, 2), 3)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert repr(nn.ChannelShuffle(3)) == repr(torch.nn.ChannelShuffle(3))


@pytest.mark.parametrize("shape, groups", [((2, 4), 2), ((2, 5, 3), 2), ((2, 4, 3), 0),
                                           ((2, 4, 3), -2)])
def test_channel_shuffle_errors_match_torch(shape, groups):
    same_error(RuntimeError, lambda: F.channel_shuffle(ember.ones(shape), groups),
               lambda: TF.channel_shuffle(torch.ones(shape), groups))


# ---- LocalResponseNorm -----------------------------------------------------------------

LRN_CASES = [  # (size, alpha, beta, k, shape)
    (2, 1e-4, 0.75, 1.0, (2, 5, 7)), (3, 0.5, 0.75, 2.0, (2, 6, 3, 4)),
    (5, 1e-2, 0.5, 1.0, (1, 7, 2, 3, 2)), (4, 1.0, 1.5, 0.5, (3, 4, 2, 2)),
    (1, 0.3, 0.75, 1.0, (2, 3, 4)), (8, 0.2, 0.75, 1.0, (2, 3, 4)),   # window wider than C
]


@pytest.mark.parametrize("size, alpha, beta, k, shape", LRN_CASES)
@pytest.mark.parametrize("dtypes", DTYPES, ids=DTYPE_IDS)
def test_local_response_norm_matches_torch(size, alpha, beta, k, shape, dtypes):
    compare(lambda x: F.local_response_norm(x, size, alpha, beta, k),
            lambda x: TF.local_response_norm(x, size, alpha, beta, k), shape, dtypes)
    ours, theirs = nn.LocalResponseNorm(size, alpha, beta, k), \
        torch.nn.LocalResponseNorm(size, alpha, beta, k)
    assert repr(ours) == repr(theirs)
    compare(ours, theirs, shape, dtypes, seed=5)


def test_local_response_norm_empty_and_errors():
    assert tuple(F.local_response_norm(ember.ones(0, 3, 4), 2).shape) == (0, 3, 4)
    same_error(ValueError, lambda: F.local_response_norm(ember.ones(3, 4), 2),
               lambda: TF.local_response_norm(torch.ones(3, 4), 2))
    assert repr(nn.LocalResponseNorm(2)) == repr(torch.nn.LocalResponseNorm(2))


def test_local_response_norm_gradcheck():
    x = ember.tensor(np.random.default_rng(0).standard_normal((2, 4, 3, 2)), requires_grad=True)
    assert gradcheck(lambda t: F.local_response_norm(t, 3, 0.5, 0.75, 1.0), (x,))


# ---- RReLU -----------------------------------------------------------------------------

BOUNDARY = np.array([-3.0, -1.0, -0.25, -1e-3, 0.0, 1e-3, 0.5, 2.0])


@pytest.mark.parametrize("lower, upper", [(1 / 8, 1 / 3), (0.1, 0.3), (0.2, 0.2)])
@pytest.mark.parametrize("dtypes", DTYPES, ids=DTYPE_IDS)
def test_rrelu_eval_matches_torch(lower, upper, dtypes):
    compare(lambda x: F.rrelu(x, lower, upper), lambda x: TF.rrelu(x, lower, upper),
            (3, 4, 5), dtypes)
    ours_x, theirs_x = pair(BOUNDARY, dtypes)
    ours, theirs = nn.RReLU(lower, upper).eval(), torch.nn.RReLU(lower, upper).eval()
    check_same(ours(ours_x), theirs(theirs_x))
    ours(ours_x).sum().backward()
    theirs(theirs_x).sum().backward()
    check_same(ours_x.grad, theirs_x.grad, **tolerance(dtypes))   # x = 0 included


@pytest.mark.parametrize("dtypes", DTYPES, ids=DTYPE_IDS)
def test_rrelu_training_draws_a_slope_per_negative_element(dtypes):
    lower, upper = 0.1, 0.4
    x = ember.tensor(np.random.default_rng(0).standard_normal(20000).astype(dtypes[2]),
                     requires_grad=True)
    ember.manual_seed(3)
    out = F.rrelu(x, lower, upper, training=True)
    values, inputs = out.detach().numpy(), x.detach().numpy()
    positive = inputs > 0
    np.testing.assert_array_equal(values[positive], inputs[positive])
    slopes = values[~positive] / inputs[~positive]
    assert slopes.min() >= lower - 1e-6 and slopes.max() <= upper + 1e-6
    assert abs(slopes.mean() - (lower + upper) / 2) < 0.005
    assert abs(slopes.var() - (upper - lower) ** 2 / 12) < 0.001    # uniform
    assert len(np.unique(np.round(slopes, 5))) > 1000                # one per element
    out.sum().backward()
    grad = x.grad.numpy()
    np.testing.assert_array_equal(grad[positive], 1.0)
    np.testing.assert_allclose(grad[~positive], slopes, rtol=1e-5)
    # the module is the function; the seed fixes the slopes
    ember.manual_seed(3)
    np.testing.assert_array_equal(nn.RReLU(lower, upper)(x).detach().numpy(), values)


def test_rrelu_gradient_at_zero_is_its_drawn_slope_as_torch():
    x = ember.zeros(1000, dtype=ember.float64, requires_grad=True)
    ember.manual_seed(0)
    out = F.rrelu(x, 0.1, 0.3, training=True)
    out.sum().backward()
    assert (out.detach().numpy() == 0).all()
    assert (x.grad.numpy() >= 0.1).all() and (x.grad.numpy() <= 0.3).all()
    assert x.grad.numpy().std() > 0.03
    t = torch.zeros(1000, dtype=torch.float64, requires_grad=True)
    TF.rrelu(t, 0.1, 0.3, training=True).sum().backward()
    assert (t.grad.numpy() >= 0.1).all() and t.grad.numpy().std() > 0.03


@pytest.mark.parametrize("dtypes", DTYPES, ids=DTYPE_IDS)
def test_rrelu_with_equal_bounds_trains_as_torch(dtypes):
    compare(lambda x: F.rrelu(x, 0.2, 0.2, True), lambda x: TF.rrelu(x, 0.2, 0.2, True),
            (4, 5), dtypes)


def test_rrelu_inplace_forms():
    x = ember.tensor(BOUNDARY)
    ember.manual_seed(1)
    assert F.rrelu_(x, 0.1, 0.3, training=True) is x
    ember.manual_seed(1)
    expected = F.rrelu(ember.tensor(BOUNDARY), 0.1, 0.3, True)
    np.testing.assert_array_equal(x.numpy(), expected.numpy())
    y = ember.tensor(BOUNDARY)
    assert nn.RReLU(inplace=True).eval()(y) is y
    np.testing.assert_allclose(y.numpy(), TF.rrelu(torch.tensor(BOUNDARY)).numpy())
    leaf = ember.tensor(BOUNDARY, requires_grad=True)
    ember.manual_seed(2)
    out = F.rrelu(leaf * 1.0, 0.1, 0.3, True, inplace=True)
    out.sum().backward()
    negative = BOUNDARY < 0
    np.testing.assert_allclose(leaf.grad.numpy()[negative],
                               out.detach().numpy()[negative] / BOUNDARY[negative])


def test_rrelu_gradcheck_with_reseeded_slopes():
    x = ember.tensor([-2.1, -0.7, -0.2, 0.3, 1.4], dtype=ember.float64, requires_grad=True)

    def seeded(t):
        ember.manual_seed(4)
        return F.rrelu(t, 0.1, 0.5, True)

    assert gradcheck(seeded, (x,))
    assert gradcheck(lambda t: F.rrelu(t, 0.1, 0.5, False), (x,))


@pytest.mark.parametrize("training", [True, False])
def test_rrelu_bound_error_matches_torch(training):
    same_error(RuntimeError, lambda: F.rrelu(ember.ones(3), 0.5, 0.2, training),
               lambda: TF.rrelu(torch.ones(3), 0.5, 0.2, training))


def test_rrelu_reprs_match_torch():
    for args in ((), (0.1, 0.3), (0.1, 0.3, True), (0.5, 0.1)):
        assert repr(nn.RReLU(*args)) == repr(torch.nn.RReLU(*args))
    assert nn.RReLU.__constants__ == torch.nn.RReLU.__constants__


def test_new_modules_are_exported_where_torch_has_them():
    for name, module in (("Fold", "fold"), ("Unfold", "fold"),
                         ("ChannelShuffle", "channelshuffle"),
                         ("LocalResponseNorm", "normalization"), ("RReLU", "activation"),
                         ("Softmax2d", "activation")):
        ours = getattr(nn, name)
        assert ours is getattr(nn.modules, name)
        assert ours.__module__ == f"ember.nn.modules.{module}"
        assert getattr(torch.nn, name).__module__ == f"torch.nn.modules.{module}"
    for name in ("rrelu", "rrelu_", "local_response_norm", "channel_shuffle"):
        assert name in F.__all__
