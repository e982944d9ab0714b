"""Issue 12's dropout and padding layers: Dropout1d/2d/3d, AlphaDropout and
FeatureAlphaDropout (and their functional forms) checked by the properties
of their masks under a fixed ember.manual_seed (one draw per channel, the
scaling, the SELU-preserving affine map, statistics), never by PyTorch's
random stream; their deterministic cases (eval, p = 0, p = 1), warnings,
errors and reprs against PyTorch.  The padding layers against PyTorch:
values and gradients in float64 and float32, batched and unbatched, reprs
and errors.  Pure Python over existing operators."""

import math
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.autograd import gradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional

from torch_pairs import DTYPES, pair  # noqa: E402

ALPHA = 1.7580993408473766   # SELU's scale * alpha: the negative saturation


def check_same(ours, theirs, rtol=1e-12, atol=1e-12):
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(),
                               rtol=rtol, atol=atol)


def positive_input(shape, seed=0, dtype=np.float64):
    """Values in [0.5, 1.5): never zero, so a zero in the output is a drop."""
    return np.random.default_rng(seed).uniform(0.5, 1.5, shape).astype(dtype)


# ---- channel-wise dropout ---------------------------------------------------------

FEATURE_CASES = [   # (function, module, shape, channel dims: leading dims one draw covers)
    ("dropout1d", nn.Dropout1d, (6, 40, 5), 2),
    ("dropout1d", nn.Dropout1d, (40, 5), 1),          # unbatched (C, L)
    ("dropout2d", nn.Dropout2d, (6, 40, 3, 4), 2),
    ("dropout3d", nn.Dropout3d, (6, 40, 2, 3, 2), 2),
    ("dropout3d", nn.Dropout3d, (40, 2, 3, 2), 1),    # unbatched (C, D, H, W)
]


@pytest.mark.parametrize("name, module, shape, lead", FEATURE_CASES)
@pytest.mark.parametrize("dtypes", DTYPES, ids=["float64", "float32"])
def test_feature_dropout_drops_whole_channels_and_scales_the_rest(name, module, shape,
                                                                  lead, dtypes):
    p = 0.4
    x = ember.tensor(positive_input(shape, dtype=dtypes[2]), requires_grad=True)
    ember.manual_seed(7)
    out = getattr(F, name)(x, p, training=True)
    assert out.shape == x.shape and out.dtype == x.dtype
    ratio = (out / x).detach().numpy().reshape(math.prod(shape[:lead]), -1)
    per_channel = ratio[:, :1]
    # one draw per (sample, channel): every element of a channel shares it
    np.testing.assert_allclose(ratio, np.broadcast_to(per_channel, ratio.shape), rtol=1e-6)
    assert (np.isclose(per_channel, 0) | np.isclose(per_channel, 1 / (1 - p))).all()
    dropped = (per_channel == 0).mean()
    assert 0.2 < dropped < 0.6      # ~p over 240 (or 40) draws
    # the gradient is the same mask, scaled
    weights = ember.tensor(positive_input(shape, seed=1, dtype=dtypes[2]))
    (out * weights).sum().backward()
    expected = (out / x).detach() * weights
    np.testing.assert_allclose(x.grad.numpy(), expected.numpy(), rtol=1e-6)
    # and the module is the function with the module's p
    ember.manual_seed(7)
    np.testing.assert_array_equal(module(p)(x).detach().numpy(), out.detach().numpy())


@pytest.mark.parametrize("name, module, shape, lead", FEATURE_CASES)
def test_feature_dropout_statistics_with_a_fixed_seed(name, module, shape, lead):
    ember.manual_seed(2024)
    x = ember.ones(shape)
    drops = []
    for _ in range(50):
        out = getattr(F, name)(x, 0.3)
        drops.append((out.reshape(math.prod(shape[:lead]), -1)[:, 0] == 0).float().mean().item())
    assert abs(np.mean(drops) - 0.3) < 0.03
    # the seed fixes the masks
    ember.manual_seed(5)
    first = getattr(F, name)(x, 0.5)
    ember.manual_seed(5)
    np.testing.assert_array_equal(getattr(F, name)(x, 0.5).numpy(), first.numpy())


@pytest.mark.parametrize("name, shape", [("dropout1d", (2, 3, 4)), ("dropout1d", (3, 4)),
                                         ("dropout2d", (2, 3, 4, 5)),
                                         ("dropout3d", (2, 3, 2, 2, 2)),
                                         ("dropout3d", (3, 2, 2, 2))])
@pytest.mark.parametrize("dtypes", DTYPES, ids=["float64", "float32"])
def test_deterministic_cases_match_torch(name, shape, dtypes):
    array = np.random.default_rng(3).standard_normal(shape)
    for p, training in ((0.5, False), (0.0, True), (1.0, True)):
        ours_x, theirs_x = pair(array, dtypes)
        ours = getattr(F, name)(ours_x, p, training)
        theirs = getattr(TF, name)(theirs_x, p, training)
        check_same(ours, theirs)
        ours.sum().backward()
        theirs.sum().backward()
        check_same(ours_x.grad, theirs_x.grad)


@pytest.mark.parametrize("name, shape", [("dropout1d", (0, 3, 4)), ("dropout2d", (0, 3, 4, 5)),
                                         ("dropout3d", (0, 3, 2, 2, 2)),
                                         ("alpha_dropout", (0, 3)),
                                         ("feature_alpha_dropout", (0, 3, 2))])
def test_empty_batch_keeps_its_shape(name, shape):
    out = getattr(F, name)(ember.zeros(shape), 0.5, True)
    assert tuple(out.shape) == tuple(getattr(TF, name)(torch.zeros(shape), 0.5, True).shape)


@pytest.mark.parametrize("name", ["dropout1d", "dropout2d", "dropout3d"])
def test_inplace_writes_the_input(name):
    shape = {"dropout1d": (30, 4), "dropout2d": (2, 30, 3, 3), "dropout3d": (30, 2, 2, 2)}[name]
    x = ember.tensor(positive_input(shape))
    before = x.numpy().copy()
    ember.manual_seed(11)
    out = getattr(F, name)(x, 0.5, True, inplace=True)
    assert out is x and tuple(x.shape) == shape
    ember.manual_seed(11)
    expected = getattr(F, name)(ember.tensor(before), 0.5, True)
    np.testing.assert_array_equal(x.numpy(), expected.numpy())
    assert (x.numpy() == 0).any() and (x.numpy() != before).any()


def test_inplace_through_autograd_gives_the_masked_gradient():
    leaf = ember.tensor(positive_input((30, 4)), requires_grad=True)
    ember.manual_seed(1)
    out = F.dropout1d(leaf * 2, 0.5, True, inplace=True)     # unbatched: through a view
    out.sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), (out / leaf).detach().numpy())
    assert (leaf.grad.numpy() == 0).any()


def test_feature_dropout_gradcheck_with_a_reseeded_mask():
    for name, shape in (("dropout1d", (2, 5, 3)), ("dropout2d", (2, 5, 2, 2)),
                        ("dropout3d", (5, 2, 1, 2)), ("alpha_dropout", (3, 4)),
                        ("feature_alpha_dropout", (2, 5, 3))):
        x = ember.tensor(np.random.default_rng(0).standard_normal(shape), requires_grad=True)

        def fixed_mask(t, name=name):
            ember.manual_seed(3)
            return getattr(F, name)(t, 0.4, True)

        assert gradcheck(fixed_mask, (x,))


def test_dropout1d_rejects_other_ranks_as_torch():
    for shape in ((3,), (2, 3, 4, 5)):
        with pytest.raises(RuntimeError) as ours:
            F.dropout1d(ember.ones(shape))
        with pytest.raises(RuntimeError) as theirs:
            TF.dropout1d(torch.ones(shape))
        assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("name, shape", [("dropout2d", (2, 3, 4)), ("dropout2d", (2, 3)),
                                         ("dropout2d", (2, 3, 4, 5, 6)),
                                         ("dropout3d", (2, 3, 4)), ("dropout3d", (2, 3, 4, 5)),
                                         ("dropout2d", (2, 3, 4, 5))])
def test_dropout2d_3d_warnings_match_torch(name, shape):
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        getattr(F, name)(ember.ones(shape), 0.5, False)
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        getattr(TF, name)(torch.ones(shape), 0.5, False)
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]
    assert all(w.filename == __file__ for w in ours)   # pointed at the caller


def test_feature_dropout_of_a_vector_fails_as_torch():
    with pytest.raises(RuntimeError) as ours, pytest.warns(UserWarning, match="1-D input"):
        F.dropout2d(ember.ones(4), 0.5, True)
    with pytest.raises(RuntimeError) as theirs:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            TF.dropout2d(torch.ones(4), 0.5, True)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("name", ["dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
                                  "feature_alpha_dropout"])
@pytest.mark.parametrize("p", [-0.1, 1.5])
def test_bad_probability_messages_match_torch(name, p):
    with pytest.raises(ValueError) as ours:
        getattr(F, name)(ember.ones(2, 3, 4, 5), p)
    with pytest.raises(ValueError) as theirs:
        getattr(TF, name)(torch.ones(2, 3, 4, 5), p)
    assert str(ours.value) == str(theirs.value)
    module = {"dropout1d": "Dropout1d", "dropout2d": "Dropout2d", "dropout3d": "Dropout3d",
              "alpha_dropout": "AlphaDropout",
              "feature_alpha_dropout": "FeatureAlphaDropout"}[name]
    with pytest.raises(ValueError) as ours:
        getattr(nn, module)(p)
    with pytest.raises(ValueError) as theirs:
        getattr(torch.nn, module)(p)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("name", ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d",
                                  "AlphaDropout", "FeatureAlphaDropout"])
def test_module_reprs_and_modes_match_torch(name):
    for args in ((), (0.25,), (0.25, True)):
        assert repr(getattr(nn, name)(*args)) == repr(getattr(torch.nn, name)(*args))
    ours, theirs = getattr(nn, name)(0.3), getattr(torch.nn, name)(0.3)
    assert ours.__constants__ == ["p", "inplace"]
    ours.eval()
    theirs.eval()
    array = np.random.default_rng(0).standard_normal((2, 3, 2, 2, 2))
    if name == "Dropout1d":
        array = array[:, :, :, 0, 0]
    elif name == "Dropout2d":
        array = array[:, :, :, :, 0]
    ours_x, theirs_x = pair(array)
    check_same(ours(ours_x), theirs(theirs_x))


# ---- alpha dropout ---------------------------------------------------------------

def _alpha_constants(p):
    a = 1 / math.sqrt((ALPHA ** 2 * p + 1) * (1 - p))
    return a, ALPHA * a * p


@pytest.mark.parametrize("dtypes", DTYPES, ids=["float64", "float32"])
def test_alpha_dropout_is_the_selu_preserving_affine_map(dtypes):
    p = 0.2
    a, b = _alpha_constants(p)
    x = ember.tensor(np.random.default_rng(4).standard_normal((50, 40)).astype(dtypes[2]),
                     requires_grad=True)
    ember.manual_seed(9)
    out = F.alpha_dropout(x, p, training=True)
    kept = np.isclose(out.detach().numpy(), a * x.detach().numpy() + b, rtol=1e-5, atol=1e-6)
    dropped = np.isclose(out.detach().numpy(), b - ALPHA * a, rtol=1e-5)
    assert (kept | dropped).all()
    assert abs(dropped.mean() - p) < 0.03
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, a, 0.0), rtol=1e-6)


def test_alpha_dropout_keeps_zero_mean_and_unit_variance():
    ember.manual_seed(0)
    x = ember.randn(200000, dtype=ember.float64)
    out = F.alpha_dropout(x, 0.3, training=True)
    assert abs(out.mean().item()) < 0.01
    assert abs(out.std().item() - 1.0) < 0.01


@pytest.mark.parametrize("shape", [(6, 40, 3, 2), (6, 40)])
def test_feature_alpha_dropout_draws_once_per_channel(shape):
    p = 0.5
    a, b = _alpha_constants(p)
    x = ember.tensor(positive_input(shape))
    ember.manual_seed(13)
    out = nn.FeatureAlphaDropout(p).train()(x).numpy().reshape(shape[0] * shape[1], -1)
    flat = x.numpy().reshape(shape[0] * shape[1], -1)
    kept = np.isclose(out, a * flat + b).all(axis=1)
    dropped = np.isclose(out, b - ALPHA * a).all(axis=1)
    assert (kept ^ dropped).all()
    assert 0.35 < dropped.mean() < 0.65


@pytest.mark.parametrize("name", ["alpha_dropout", "feature_alpha_dropout"])
@pytest.mark.parametrize("dtypes", DTYPES, ids=["float64", "float32"])
def test_alpha_deterministic_cases_match_torch(name, dtypes):
    array = np.random.default_rng(3).standard_normal((2, 3, 4))
    for p, training in ((0.5, False), (0.0, True), (1.0, True)):
        ours_x, theirs_x = pair(array, dtypes)
        check_same(getattr(F, name)(ours_x, p, training), getattr(TF, name)(theirs_x, p, training))
    # the functional default is training=False, as PyTorch's
    ours_x, theirs_x = pair(array, dtypes)
    check_same(getattr(F, name)(ours_x), getattr(TF, name)(theirs_x))


def test_alpha_dropout_module_ignores_inplace_as_torch():
    x = ember.tensor(positive_input((4, 5)))
    before = x.numpy().copy()
    ember.manual_seed(0)
    out = nn.AlphaDropout(0.5, inplace=True)(x)
    assert out is not x
    np.testing.assert_array_equal(x.numpy(), before)
    inplace = F.alpha_dropout(x, 0.5, True, inplace=True)
    assert inplace is x and not np.array_equal(x.numpy(), before)


# ---- padding layers --------------------------------------------------------------

PADDING_CASES = [   # (class name, constructor args, input shape)
    ("ZeroPad1d", (2,), (2, 3, 4)), ("ZeroPad1d", ((1, 3),), (3, 4)),
    ("ZeroPad1d", ((-1, 2),), (2, 3, 4)),
    ("ZeroPad2d", (1,), (2, 3, 4, 5)), ("ZeroPad2d", ((1, 0, 2, 3),), (3, 4, 5)),
    ("ZeroPad2d", ((0, -1, 2, -2),), (1, 2, 4, 5)),
    ("ZeroPad3d", (1,), (1, 2, 2, 3, 4)), ("ZeroPad3d", ((1, 0, 2, 1, 0, 2),), (2, 2, 3, 4)),
    ("ConstantPad1d", (2, 3.5), (2, 3, 4)), ("ConstantPad1d", ((0, 1), -1.0), (3, 4)),
    ("ConstantPad2d", ((1, 2, 0, 1), 0.5), (2, 3, 4, 5)), ("ConstantPad2d", (1, 2.0), (3, 4, 5)),
    ("ConstantPad3d", (1, -2.0), (1, 2, 2, 3, 4)),
    ("ConstantPad3d", ((0, 1, 1, 0, 2, 0), 7.0), (2, 2, 3, 4)),
    ("ReflectionPad1d", (2,), (2, 3, 4)), ("ReflectionPad1d", ((3, 1),), (3, 4)),
    ("ReflectionPad2d", (1,), (2, 3, 4, 5)), ("ReflectionPad2d", ((2, 0, 1, 3),), (3, 4, 5)),
    ("ReflectionPad3d", (1,), (1, 2, 2, 3, 4)),
    ("ReflectionPad3d", ((1, 0, 2, 1, 0, 1),), (2, 2, 3, 4)),
    ("ReplicationPad1d", (2,), (2, 3, 4)), ("ReplicationPad1d", ((5, 1),), (3, 4)),
    ("ReplicationPad2d", (2,), (2, 3, 4, 5)), ("ReplicationPad2d", ((0, 3, 1, 2),), (3, 4, 5)),
    ("ReplicationPad3d", (1,), (1, 2, 2, 3, 4)),
    ("ReplicationPad3d", ((2, 0, 1, 1, 0, 3),), (2, 2, 3, 4)),
    ("CircularPad1d", (2,), (2, 3, 4)), ("CircularPad1d", ((3, 1),), (3, 4)),
    ("CircularPad2d", (1,), (2, 3, 4, 5)), ("CircularPad2d", ((2, 0, 1, 3),), (3, 4, 5)),
    ("CircularPad3d", (1,), (1, 2, 2, 3, 4)),
    ("CircularPad3d", ((1, 0, 2, 1, 0, 1),), (2, 2, 3, 4)),
    ("ReflectionPad2d", (1,), (0, 3, 4, 5)),      # empty batch
]


@pytest.mark.parametrize("name, args, shape", PADDING_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(PADDING_CASES)])
@pytest.mark.parametrize("dtypes", DTYPES, ids=["float64", "float32"])
def test_padding_values_gradients_and_reprs_match_torch(name, args, shape, dtypes):
    ours_module, theirs_module = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(ours_module) == repr(theirs_module)
    assert ours_module.padding == theirs_module.padding
    array = np.random.default_rng(len(shape)).standard_normal(shape)
    ours_x, theirs_x = pair(array, dtypes)
    ours, theirs = ours_module(ours_x), theirs_module(theirs_x)
    assert ours.dtype == ours_x.dtype
    check_same(ours, theirs, rtol=1e-6)
    weights = np.random.default_rng(1).standard_normal(tuple(theirs.shape))
    (ours * ember.tensor(weights, dtype=dtypes[0])).sum().backward()
    (theirs * torch.tensor(weights, dtype=dtypes[1])).sum().backward()
    check_same(ours_x.grad, theirs_x.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name, args, shape", [("ReflectionPad2d", ((2, 0, 1, 3),), (1, 3, 4, 5)),
                                              ("ReplicationPad3d", (1,), (1, 2, 2, 3, 2)),
                                              ("CircularPad1d", ((3, 1),), (2, 4)),
                                              ("ConstantPad2d", ((1, -1, 0, 2), 1.5),
                                               (2, 3, 3))])
def test_padding_gradcheck(name, args, shape):
    x = ember.tensor(np.random.default_rng(0).standard_normal(shape), requires_grad=True)
    assert gradcheck(getattr(nn, name)(*args), (x,))


@pytest.mark.parametrize("name, shape", [("CircularPad1d", (2, 3, 4, 5)), ("CircularPad1d", (4,)),
                                         ("CircularPad2d", (4, 5)),
                                         ("CircularPad3d", (2, 3, 4, 5, 6, 7))])
def test_circular_padding_rank_errors_match_torch(name, shape):
    with pytest.raises(ValueError) as ours:
        getattr(nn, name)(1)(ember.ones(shape))
    with pytest.raises(ValueError) as theirs:
        getattr(torch.nn, name)(1)(torch.ones(shape))
    assert str(ours.value) == str(theirs.value)


def test_reflection_padding_too_wide_fails_as_torch():
    with pytest.raises(RuntimeError) as ours:
        nn.ReflectionPad1d(4)(ember.ones(1, 2, 4))
    with pytest.raises(RuntimeError) as theirs:
        torch.nn.ReflectionPad1d(4)(torch.ones(1, 2, 4))
    assert str(ours.value) == str(theirs.value)


def test_padding_modules_are_exported_where_torch_has_them():
    from ember.nn.modules import padding
    for name in padding.__all__:
        assert getattr(nn, name) is getattr(padding, name)
        assert getattr(nn.modules, name) is getattr(padding, name)
        assert hasattr(torch.nn.modules.padding, name)
    from ember.nn.modules import dropout
    for name in dropout.__all__:
        assert getattr(nn, name) is getattr(dropout, name)
        assert hasattr(torch.nn.modules.dropout, name)
