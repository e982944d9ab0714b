"""nn.utils.parametrize (register_parametrization, remove_parametrizations,
cached, right_inverse, is_parametrized, ...) and nn.utils.parametrizations
(weight_norm, spectral_norm, orthogonal with the matrix_exp, cayley and
householder maps) against PyTorch: outputs and every gradient over a few
training steps from the same weights, state_dict keys and round trips,
reprs, error messages; gradchecks of the new differentiable maps.  Pure
Python over existing operators."""

import copy
import pickle

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.autograd import gradcheck
from ember.nn.utils import parametrize
from ember.nn.utils.parametrizations import _geqrf, _householder_product, _matrix_exp

torch = pytest.importorskip("torch")
tparametrize = torch.nn.utils.parametrize


def to_ember_state(torch_module):
    return {k: ember.tensor(v.detach().numpy().copy()) for k, v in torch_module.state_dict().items()}


def close(a, b, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=atol)


def as_ember_text(text):
    return text.replace("torch", "ember")


def train_side_by_side(ours, theirs, input_shape, steps=3, lr=0.05, seed=1, rtol=1e-10):
    rng = np.random.default_rng(seed)
    opt_ours = ember.optim.SGD(ours.parameters(), lr=lr)
    opt_theirs = torch.optim.SGD(theirs.parameters(), lr=lr)
    for _ in range(steps):
        x = rng.standard_normal(input_shape)
        out_ours, out_theirs = ours(ember.tensor(x)), theirs(torch.tensor(x))
        close(out_ours, out_theirs, rtol=rtol)
        (out_ours ** 2).sum().backward()
        (out_theirs ** 2).sum().backward()
        named_theirs = dict(theirs.named_parameters())
        assert [n for n, _ in ours.named_parameters()] == list(named_theirs)
        for name, p in ours.named_parameters():
            close(p.grad, named_theirs[name].grad, rtol=rtol)
        for opt in (opt_ours, opt_theirs):
            opt.step()
            opt.zero_grad()
    ref = theirs.state_dict()
    assert list(ours.state_dict()) == list(ref)
    for key, value in ours.state_dict().items():
        close(value, ref[key], rtol=rtol)


def symmetric(lib):
    class Symmetric(lib.nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu()
    return Symmetric()


def scale(lib, factor):
    class Scale(lib.nn.Module):
        def forward(self, X):
            return X * factor

        def right_inverse(self, A):
            return A / factor
    return Scale()


def twin_linears(n_in=4, n_out=4, seed=0):
    torch.manual_seed(seed)
    theirs = torch.nn.Linear(n_in, n_out).double()
    ours = nn.Linear(n_in, n_out).double()
    ours.load_state_dict(to_ember_state(theirs))
    return ours, theirs


# ---- parametrize ------------------------------------------------------------

def test_register_parametrization_trains_like_torch():
    ours, theirs = twin_linears()
    parametrize.register_parametrization(ours, "weight", symmetric(ember))
    tparametrize.register_parametrization(theirs, "weight", symmetric(torch))
    assert type(ours).__name__ == type(theirs).__name__ == "ParametrizedLinear"
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == [
        "bias", "parametrizations.weight.original"]
    close(ours.weight, theirs.weight)
    assert parametrize.is_parametrized(ours) and parametrize.is_parametrized(ours, "weight")
    assert not parametrize.is_parametrized(ours, "bias")
    assert parametrize.type_before_parametrizations(ours) is nn.Linear
    train_side_by_side(ours, theirs, (3, 4))


def test_stacked_parametrizations_and_assignment():
    ours, theirs = twin_linears()
    for lib, module in ((ember, ours), (torch, theirs)):
        utils = lib.nn.utils.parametrize
        utils.register_parametrization(module, "weight", symmetric(lib))
        utils.register_parametrization(module, "weight", scale(lib, 2.0))
    assert repr(ours) == repr(theirs)
    train_side_by_side(ours, theirs, (2, 4), steps=2)
    value = np.random.default_rng(3).standard_normal((4, 4))
    value = value + value.T
    original = ours.parametrizations.weight.original
    ours.weight = ember.tensor(value)
    theirs.weight = torch.tensor(value)
    assert ours.parametrizations.weight.original is original   # updated in place
    close(ours.parametrizations.weight.original, theirs.parametrizations.weight.original)
    close(ours.weight, theirs.weight)
    train_side_by_side(ours, theirs, (2, 4), steps=2)


@pytest.mark.parametrize("leave_parametrized", [True, False])
def test_remove_parametrizations(leave_parametrized):
    ours, theirs = twin_linears()
    parametrize.register_parametrization(ours, "weight", scale(ember, 3.0))
    tparametrize.register_parametrization(theirs, "weight", scale(torch, 3.0))
    train_side_by_side(ours, theirs, (2, 4), steps=1)
    original = ours.parametrizations.weight.original
    parametrize.remove_parametrizations(ours, "weight", leave_parametrized=leave_parametrized)
    tparametrize.remove_parametrizations(theirs, "weight", leave_parametrized=leave_parametrized)
    assert type(ours) is nn.Linear and not hasattr(ours, "parametrizations")
    assert ours.weight is original and isinstance(ours.weight, nn.Parameter)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["bias", "weight"]
    close(ours.weight, theirs.weight)
    assert repr(ours) == repr(theirs)
    train_side_by_side(ours, theirs, (2, 4), steps=2)


def test_parametrized_buffer_and_state_dict_round_trip():
    for lib in (ember, torch):
        module = lib.nn.BatchNorm1d(3)
        lib.nn.utils.parametrize.register_parametrization(module, "running_var", scale(lib, 2.0))
        assert "parametrizations.running_var.original" in module.state_dict()
        assert not isinstance(module.parametrizations.running_var.original, lib.nn.Parameter)
    ours, theirs = twin_linears()
    parametrize.register_parametrization(ours, "weight", symmetric(ember))
    tparametrize.register_parametrization(theirs, "weight", symmetric(torch))
    train_side_by_side(ours, theirs, (2, 4), steps=1)
    fresh = parametrize.register_parametrization(nn.Linear(4, 4).double(), "weight", symmetric(ember))
    assert repr(fresh.load_state_dict(ours.state_dict())) == "<All keys matched successfully>"
    close(fresh.weight, theirs.weight)


def test_cached():
    calls = []

    class Counting(nn.Module):
        def forward(self, X):
            calls.append(1)
            return X * 2

    module = parametrize.register_parametrization(nn.Linear(3, 3), "weight", Counting())
    calls.clear()
    with parametrize.cached():
        first = module.weight
        with parametrize.cached():
            assert module.weight is first
        assert module.weight is first
    assert len(calls) == 1
    module.weight
    assert len(calls) == 2
    assert parametrize._cache == {}


def test_parametrize_errors():
    cases = []
    for lib in (ember, torch):
        utils = lib.nn.utils.parametrize
        messages = []

        def record(fn, messages=messages):
            with pytest.raises(Exception) as info:
                fn()
            messages.append((type(info.value).__name__, as_ember_text(str(info.value))))

        class Bad(lib.nn.Module):
            def forward(self, X):
                return X[:2]

        record(lambda: utils.remove_parametrizations(lib.nn.Linear(3, 3), "weight"))
        record(lambda: utils.register_parametrization(lib.nn.Linear(3, 3), "foo", lib.nn.Identity()))
        record(lambda: utils.register_parametrization(lib.nn.Linear(3, 3), "weight", Bad()))
        module = utils.register_parametrization(lib.nn.Linear(3, 3), "weight", lib.nn.Identity())
        record(lambda: utils.register_parametrization(module, "weight", Bad()))

        def assign(module=module, lib=lib):
            module.weight = lib.zeros(3, 3)
        record(assign)
        record(lambda: pickle.dumps(module))
        record(lambda: lib.nn.utils.parametrize.ParametrizationList([], lib.zeros(2)))
        cases.append(messages)
    assert cases[0] == cases[1]


def test_deepcopy_and_transfer():
    module = parametrize.register_parametrization(nn.Linear(3, 3), "weight", symmetric(ember))
    replica = copy.deepcopy(module)
    assert type(replica).__name__ == "ParametrizedLinear"
    assert replica.parametrizations.weight.original is not module.parametrizations.weight.original
    close(replica.weight, module.weight)
    target = nn.Linear(3, 3)
    parametrize.transfer_parametrizations_and_params(module, target)
    assert target.parametrizations.weight.original is module.parametrizations.weight.original
    close(target.weight, module.weight)


# ---- parametrizations.weight_norm -------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_parametrization_trains_like_torch(dim):
    torch.manual_seed(0)
    theirs = torch.nn.Conv1d(3, 4, 3).double()
    ours = nn.Conv1d(3, 4, 3).double()
    ours.load_state_dict(to_ember_state(theirs))
    nn.utils.parametrizations.weight_norm(ours, dim=dim)
    torch.nn.utils.parametrizations.weight_norm(theirs, dim=dim)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == [
        "bias", "parametrizations.weight.original0", "parametrizations.weight.original1"]
    train_side_by_side(ours, theirs, (2, 3, 6))


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_weight_norm_parametrization_loads_old_state_dict():
    torch.manual_seed(0)
    old = torch.nn.utils.weight_norm(torch.nn.Linear(4, 3).double())
    new_theirs = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(4, 3).double())
    new_ours = nn.utils.parametrizations.weight_norm(nn.Linear(4, 3).double())
    new_theirs.load_state_dict(old.state_dict())
    new_ours.load_state_dict(to_ember_state(old))
    close(new_ours.weight, new_theirs.weight)
    close(new_ours.parametrizations.weight.original0, old.weight_g)
    with pytest.raises(ValueError) as info:
        parametrize.remove_parametrizations(new_ours, "weight", leave_parametrized=False)
    assert str(info.value) == ("Cannot leave unparametrized (`leave_parametrized=False`) a tensor "
                               "that is parametrized in terms of a sequence of tensors.")
    parametrize.remove_parametrizations(new_ours, "weight")
    tparametrize.remove_parametrizations(new_theirs, "weight")
    assert list(new_ours.state_dict()) == list(new_theirs.state_dict())
    close(new_ours.weight, new_theirs.weight)


# ---- parametrizations.spectral_norm -----------------------------------------

@pytest.mark.parametrize("make,shape", [
    (lambda lib: lib.nn.Linear(5, 3), (2, 5)),
    (lambda lib: lib.nn.Conv2d(2, 3, 2), (2, 2, 4, 4)),
    (lambda lib: lib.nn.ConvTranspose1d(3, 2, 2), (2, 3, 5)),
])
def test_spectral_norm_parametrization_trains_like_torch(make, shape):
    torch.manual_seed(0)
    theirs = torch.nn.utils.parametrizations.spectral_norm(make(torch).double(), n_power_iterations=2)
    ours = nn.utils.parametrizations.spectral_norm(make(ember).double(), n_power_iterations=2)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert "parametrizations.weight.0._u" in ours.state_dict()
    assert repr(ours) == repr(theirs)
    ours.load_state_dict(to_ember_state(theirs))
    train_side_by_side(ours, theirs, shape)
    ours.eval(), theirs.eval()
    u = ours.parametrizations.weight[0]._u.clone()
    close(ours.weight, theirs.weight)
    close(ours.parametrizations.weight[0]._u, u, rtol=0, atol=0)


def test_spectral_norm_parametrization_errors_and_vectors():
    for lib in (ember, torch):
        with pytest.raises(IndexError) as info:
            lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(2, 2), dim=2)
        assert str(info.value) == "Dimension out of range (expected to be in range of [-2, 1] but got 2)"
        with pytest.raises(ValueError) as info:
            lib.nn.utils.parametrizations.spectral_norm(lib.nn.Linear(2, 2), name="nope")
        assert str(info.value) == ("Module 'Linear(in_features=2, out_features=2, bias=True)' has no "
                                   "parameter or buffer with name 'nope'")
    ours, theirs = twin_linears(3, 2)
    nn.utils.parametrizations.spectral_norm(ours, name="bias")
    torch.nn.utils.parametrizations.spectral_norm(theirs, name="bias")
    train_side_by_side(ours, theirs, (2, 3), steps=2)


# ---- parametrizations.orthogonal --------------------------------------------

@pytest.mark.parametrize("orthogonal_map", [None, "matrix_exp", "cayley", "householder"])
@pytest.mark.parametrize("n_in,n_out", [(4, 4), (3, 5), (5, 3)])
def test_orthogonal_trains_like_torch(orthogonal_map, n_in, n_out):
    ours, theirs = twin_linears(n_in, n_out)
    nn.utils.parametrizations.orthogonal(ours, orthogonal_map=orthogonal_map)
    torch.nn.utils.parametrizations.orthogonal(theirs, orthogonal_map=orthogonal_map)
    assert ours.parametrizations.weight[0].orthogonal_map.name == \
        theirs.parametrizations.weight[0].orthogonal_map.name
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(ours) == repr(theirs)
    # A square base is the weight's own QR; a wider one is completed at
    # random, so both take torch's through the state_dict.
    ours.load_state_dict(to_ember_state(theirs))
    close(ours.weight, theirs.weight, rtol=1e-9, atol=1e-12)
    train_side_by_side(ours, theirs, (2, n_in), rtol=1e-8)
    W = ours.weight.detach().numpy()
    gram = W.T @ W if n_out >= n_in else W @ W.T
    np.testing.assert_allclose(gram, np.eye(min(n_in, n_out)), atol=1e-12)


def test_orthogonal_square_base_is_the_weights_qr():
    ours, theirs = twin_linears(4, 4)
    nn.utils.parametrizations.orthogonal(ours)
    torch.nn.utils.parametrizations.orthogonal(theirs)
    close(ours.parametrizations.weight[0].base, theirs.parametrizations.weight[0].base, rtol=1e-12)
    close(ours.parametrizations.weight.original, theirs.parametrizations.weight.original)


def test_orthogonal_without_trivialization():
    ours, theirs = twin_linears(3, 5)
    nn.utils.parametrizations.orthogonal(ours, orthogonal_map="householder", use_trivialization=False)
    torch.nn.utils.parametrizations.orthogonal(theirs, orthogonal_map="householder",
                                               use_trivialization=False)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    close(ours.parametrizations.weight.original, theirs.parametrizations.weight.original, rtol=1e-12)
    train_side_by_side(ours, theirs, (2, 3), rtol=1e-9)
    for lib in (ember, torch):
        module = lib.nn.utils.parametrizations.orthogonal(
            lib.nn.Linear(3, 3), orthogonal_map="cayley", use_trivialization=False)
        with pytest.raises(NotImplementedError) as info:
            module.weight = lib.eye(3)
        assert str(info.value) == ("It is not possible to assign to the matrix exponential or the "
                                   "Cayley parametrizations when use_trivialization=False.")


def test_orthogonal_errors():
    for lib in (ember, torch):
        with pytest.raises(ValueError) as info:
            lib.nn.utils.parametrizations.orthogonal(lib.nn.Linear(3, 3), orthogonal_map="qr")
        assert str(info.value) == ('orthogonal_map has to be one of "matrix_exp", "cayley", '
                                   '"householder". Got: qr')
        with pytest.raises(ValueError) as info:
            lib.nn.utils.parametrizations.orthogonal(lib.nn.Linear(3, 3), name="bias")
        assert str(info.value) == "Expected a matrix or batch of matrices. Got a tensor of 1 dimensions."


def test_orthogonal_maps_match_torch_kernels():
    rng = np.random.default_rng(0)
    for scale_ in (0.1, 1.0, 7.0):
        a = rng.standard_normal((2, 4, 4)) * scale_
        close(_matrix_exp(ember.tensor(a)), torch.matrix_exp(torch.tensor(a)), rtol=1e-12, atol=1e-13)
    b = rng.standard_normal((2, 5, 3))
    X, tau = _geqrf(ember.tensor(b))
    X_t, tau_t = torch.geqrf(torch.tensor(b))
    close(X, X_t, rtol=1e-12, atol=1e-13)
    close(tau, tau_t, rtol=1e-12)
    close(_householder_product(X, tau), torch.linalg.householder_product(X_t, tau_t), rtol=1e-12, atol=1e-13)


def test_orthogonal_maps_gradcheck():
    rng = np.random.default_rng(1)
    a = ember.tensor(rng.standard_normal((3, 3)) * 1.5, requires_grad=True)
    assert gradcheck(_matrix_exp, (a,))
    A = ember.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    tau = ember.tensor(rng.uniform(0.5, 1.5, 3), requires_grad=True)
    assert gradcheck(_householder_product, (A, tau))
