"""The old weight and spectral normalisation hooks (nn.utils.weight_norm,
nn.utils.spectral_norm and their removers) against PyTorch: outputs and
every gradient over a few training steps from the same weights, state_dict
keys and round trips, eval behaviour, reprs and error messages.  Pure
Python over existing operators."""

import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.autograd import gradcheck
from ember.nn.utils.spectral_norm import SpectralNorm
from ember.nn.utils.weight_norm import _weight_norm, norm_except_dim

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def to_ember_state(torch_module):
    return {k: ember.tensor(v.detach().numpy().copy()) for k, v in torch_module.state_dict().items()}


def twins(make, seed=0):
    """The same float64 layer in both libraries (ember's loaded from torch's)."""
    torch.manual_seed(seed)
    theirs = make(torch.nn).double()
    ours = make(nn).double()
    ours.load_state_dict(to_ember_state(theirs))
    return ours, theirs


def close(a, b, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=atol)


def train_side_by_side(ours, theirs, input_shape, steps=3, lr=0.1, seed=1):
    """SGD steps on both; outputs, every gradient and the parameters after
    each step must agree."""
    rng = np.random.default_rng(seed)
    opt_ours = ember.optim.SGD(ours.parameters(), lr=lr)
    opt_theirs = torch.optim.SGD(theirs.parameters(), lr=lr)
    for _ in range(steps):
        x = rng.standard_normal(input_shape)
        out_ours = ours(ember.tensor(x))
        out_theirs = theirs(torch.tensor(x))
        close(out_ours, out_theirs)
        (out_ours ** 2).sum().backward()
        (out_theirs ** 2).sum().backward()
        named_theirs = dict(theirs.named_parameters())
        for name, p in ours.named_parameters():
            close(p.grad, named_theirs[name].grad)
        opt_ours.step()
        opt_theirs.step()
        opt_ours.zero_grad()
        opt_theirs.zero_grad()
    ref = theirs.state_dict()
    for key, value in ours.state_dict().items():
        close(value, ref[key])


LAYERS = {
    "linear": (lambda m: m.Linear(5, 4), (3, 5)),
    "conv1d": (lambda m: m.Conv1d(3, 4, 3), (2, 3, 7)),
    "conv2d": (lambda m: m.Conv2d(2, 3, 2), (2, 2, 5, 5)),
    "convtranspose1d": (lambda m: m.ConvTranspose1d(3, 2, 3), (2, 3, 6)),
}


# ---- weight_norm ------------------------------------------------------------

def test_norm_except_dim_matches_torch():
    v = np.random.default_rng(0).standard_normal((3, 4, 5))
    for dim in (-1, 0, 1, 2, -2, -3):
        for p in (2, 3):
            close(norm_except_dim(ember.tensor(v), p, dim), torch.norm_except_dim(torch.tensor(v), p, dim))
    g = np.random.default_rng(1).standard_normal((1, 4, 1))
    close(_weight_norm(ember.tensor(v), ember.tensor(g), 1), torch._weight_norm(torch.tensor(v), torch.tensor(g), 1))


@pytest.mark.parametrize("layer", sorted(LAYERS))
@pytest.mark.parametrize("dim", [0, 1, None, -1, -2])
def test_weight_norm_trains_like_torch(layer, dim):
    make, shape = LAYERS[layer]
    if dim == -2 and layer == "linear":
        dim = 1
    ours, theirs = twins(make)
    nn.utils.weight_norm(ours, dim=dim)
    torch.nn.utils.weight_norm(theirs, dim=dim)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert ours.weight_g.shape == tuple(theirs.weight_g.shape)
    close(ours.weight, theirs.weight)
    assert "weight" not in ours._parameters
    train_side_by_side(ours, theirs, shape)


def test_weight_norm_state_dict_round_trip_and_remove():
    ours, theirs = twins(LAYERS["conv1d"][0])
    nn.utils.weight_norm(ours, name="weight", dim=0)
    torch.nn.utils.weight_norm(theirs, name="weight", dim=0)
    train_side_by_side(ours, theirs, (2, 3, 7), steps=1)
    # A fresh weight-normed layer loads the other's checkpoint.
    fresh = nn.utils.weight_norm(nn.Conv1d(3, 4, 3).double())
    result = fresh.load_state_dict(ours.state_dict())
    assert repr(result) == "<All keys matched successfully>"
    x = np.random.default_rng(5).standard_normal((2, 3, 7))
    close(fresh(ember.tensor(x)), theirs(torch.tensor(x)))
    nn.utils.remove_weight_norm(ours)
    torch.nn.utils.remove_weight_norm(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert isinstance(ours.weight, nn.Parameter)
    assert not ours._forward_pre_hooks
    train_side_by_side(ours, theirs, (2, 3, 7), steps=2)
    assert repr(ours) == repr(theirs).replace("torch", "ember")


def test_weight_norm_errors_and_warning():
    ours, theirs = nn.Linear(3, 2), torch.nn.Linear(3, 2)
    with pytest.warns(FutureWarning) as ours_warn:
        nn.utils.weight_norm(ours)
    with pytest.warns(FutureWarning) as theirs_warn:
        torch.nn.utils.weight_norm(theirs)
    assert str(ours_warn[0].message) == str(theirs_warn[0].message)
    for utils, module in ((nn.utils, ours), (torch.nn.utils, theirs)):
        with pytest.raises(RuntimeError) as info:
            utils.weight_norm(module)
        assert str(info.value) == "Cannot register two weight_norm hooks on the same parameter weight"
    for utils, module in ((nn.utils, nn.Linear(3, 2)), (torch.nn.utils, torch.nn.Linear(3, 2))):
        with pytest.raises(ValueError) as info:
            utils.remove_weight_norm(module, "bias")
        assert str(info.value) == "weight_norm of 'bias' not found in Linear(in_features=3, out_features=2, bias=True)"


def test_weight_norm_gradcheck():
    rng = np.random.default_rng(3)
    v = ember.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    for dim in (0, 1, -1):
        g = ember.tensor(np.abs(rng.standard_normal(tuple(norm_except_dim(v, 2, dim).shape))) + 0.5,
                         requires_grad=True)
        assert gradcheck(lambda a, b: _weight_norm(a, b, dim), (v, g))


# ---- spectral_norm ----------------------------------------------------------

@pytest.mark.parametrize("layer", sorted(LAYERS))
@pytest.mark.parametrize("n_power_iterations", [1, 3])
def test_spectral_norm_trains_like_torch(layer, n_power_iterations):
    make, shape = LAYERS[layer]
    torch.manual_seed(0)
    theirs = torch.nn.utils.spectral_norm(make(torch.nn).double(), n_power_iterations=n_power_iterations)
    ours = nn.utils.spectral_norm(make(nn).double(), n_power_iterations=n_power_iterations)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert ours.state_dict()._metadata[""] == theirs.state_dict()._metadata[""]
    ours.load_state_dict(to_ember_state(theirs))   # u and v too
    train_side_by_side(ours, theirs, shape)
    # u and v follow the power iteration in training...
    close(ours.weight_u, theirs.weight_u)
    close(ours.weight_v, theirs.weight_v)
    # ...and stay put in eval, where the weight is the last one seen.
    ours.eval(), theirs.eval()
    u_before = ours.weight_u.clone()
    x = np.random.default_rng(9).standard_normal(shape)
    close(ours(ember.tensor(x)), theirs(torch.tensor(x)))
    close(ours.weight_u, u_before, rtol=0, atol=0)
    close(ours.weight, theirs.weight)


def test_spectral_norm_dim_for_transposed_convolutions():
    ours = nn.utils.spectral_norm(nn.ConvTranspose2d(3, 5, 2))
    theirs = torch.nn.utils.spectral_norm(torch.nn.ConvTranspose2d(3, 5, 2))
    assert ours.weight_u.shape == tuple(theirs.weight_u.shape) == (5,)
    assert ours.weight_v.shape == tuple(theirs.weight_v.shape) == (12,)


def test_spectral_norm_remove_and_round_trip():
    ours, theirs = nn.Linear(4, 3).double(), torch.nn.Linear(4, 3).double()
    nn.utils.spectral_norm(ours)
    torch.nn.utils.spectral_norm(theirs)
    ours.load_state_dict(to_ember_state(theirs))
    train_side_by_side(ours, theirs, (2, 4), steps=2)
    saved = ours.state_dict()
    fresh = nn.utils.spectral_norm(nn.Linear(4, 3).double())
    fresh.load_state_dict(saved)
    fresh.eval(), theirs.eval()
    x = np.random.default_rng(2).standard_normal((2, 4))
    close(fresh(ember.tensor(x)), theirs(torch.tensor(x)))
    nn.utils.remove_spectral_norm(ours)
    torch.nn.utils.remove_spectral_norm(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert ours.state_dict()._metadata == {"": {"version": 1}}
    close(ours.weight, theirs.weight)
    assert not ours._forward_pre_hooks and not ours._state_dict_hooks
    assert not ours._load_state_dict_pre_hooks


def test_spectral_norm_loads_version_0_checkpoint():
    """A checkpoint without weight_v and without the version stamp (the
    layout before PyTorch 1.1) loads through the load pre-hook."""
    torch.manual_seed(0)
    theirs = torch.nn.utils.spectral_norm(torch.nn.Linear(4, 3).double())
    theirs(torch.randn(2, 4, dtype=torch.float64))
    old = {k: v for k, v in theirs.state_dict().items() if k != "weight_v"}
    old["weight"] = theirs.weight.detach()
    mine = {k: ember.tensor(v.detach().numpy()) for k, v in old.items()}
    ours = nn.utils.spectral_norm(nn.Linear(4, 3).double())
    fresh_theirs = torch.nn.utils.spectral_norm(torch.nn.Linear(4, 3).double())
    ours.load_state_dict(mine)
    fresh_theirs.load_state_dict(old)
    close(ours.weight_v, fresh_theirs.weight_v, rtol=1e-8)
    ours.eval(), fresh_theirs.eval()
    x = np.random.default_rng(1).standard_normal((2, 4))
    close(ours(ember.tensor(x)), fresh_theirs(torch.tensor(x)), rtol=1e-8)


def test_spectral_norm_errors():
    for lib in (nn, torch.nn):
        with pytest.raises(ValueError) as info:
            lib.utils.spectral_norm(lib.Linear(2, 2), n_power_iterations=0)
        assert str(info.value) == "Expected n_power_iterations to be positive, but got n_power_iterations=0"
        with pytest.raises(ValueError) as info:
            lib.utils.spectral_norm(lib.Linear(2, 2, bias=False), name="bias")
        assert str(info.value) == "`SpectralNorm` cannot be applied as parameter `bias` is None"
        module = lib.utils.spectral_norm(lib.Linear(2, 2))
        with pytest.raises(RuntimeError) as info:
            lib.utils.spectral_norm(module)
        assert str(info.value) == "Cannot register two spectral_norm hooks on the same parameter weight"
        with pytest.raises(ValueError) as info:
            lib.utils.remove_spectral_norm(module, "bias")
        assert str(info.value) == "spectral_norm of 'bias' not found in Linear(in_features=2, out_features=2, bias=True)"


def test_spectral_norm_sigma_gradcheck():
    """The differentiable part: weight / (u . W v) with u, v fixed."""
    rng = np.random.default_rng(4)
    u = ember.tensor(rng.standard_normal(3))
    v = ember.tensor(rng.standard_normal(8))
    w = ember.tensor(rng.standard_normal((3, 2, 4)), requires_grad=True)
    fn = SpectralNorm(dim=0)
    assert gradcheck(lambda t: t / ember.dot(u, ember.mv(fn.reshape_weight_to_matrix(t), v)), (w,))
