"""Lazy modules (nn.LazyLinear, LazyConv1d/2d/3d, LazyConvTranspose1d/2d/3d,
LazyBatchNorm1d/2d/3d, nn.parameter.UninitializedParameter/Buffer) against
PyTorch: reprs and state_dicts before the first forward, the inferred
shapes and the class they become, an optimizer built before the first
forward training exactly as torch's (same weights copied after
initialisation), loading an eager checkpoint without a forward, errors.
Pure Python over existing operators."""

import copy

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.nn.parameter import UninitializedBuffer, UninitializedParameter, is_lazy

torch = pytest.importorskip("torch")


def close(a, b, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=atol)


def as_ember_text(text):
    return text.replace("torch", "ember")


LAZY = [
    ("LazyLinear", (3,), {}, (4, 5)),
    ("LazyLinear", (2,), {"bias": False}, (2, 3, 6)),
    ("LazyConv1d", (4, 3), {"padding": 1}, (2, 3, 7)),
    ("LazyConv1d", (4, 3), {"groups": 2}, (2, 6, 7)),
    ("LazyConv2d", (3, 2), {"stride": 2}, (2, 2, 6, 6)),
    ("LazyConv2d", (3, 2), {}, (2, 5, 5)),                 # unbatched
    ("LazyConv3d", (2, 2), {"bias": False}, (1, 2, 4, 4, 4)),
    ("LazyConvTranspose1d", (2, 3), {}, (2, 3, 5)),
    ("LazyConvTranspose2d", (2, 2), {"stride": 2}, (1, 3, 4, 4)),
    ("LazyConvTranspose3d", (2, 2), {}, (1, 2, 3, 3, 3)),
    ("LazyBatchNorm1d", (), {}, (6, 4)),
    ("LazyBatchNorm1d", (), {"affine": False}, (6, 4, 3)),
    ("LazyBatchNorm2d", (), {"momentum": None}, (3, 2, 4, 4)),
    ("LazyBatchNorm3d", (), {"track_running_stats": False}, (2, 3, 2, 2, 2)),
]


@pytest.mark.parametrize("name,args,kwargs,shape", LAZY)
def test_lazy_module_matches_torch(name, args, kwargs, shape):
    ours = getattr(nn, name)(*args, **kwargs, dtype=ember.float64)
    theirs = getattr(torch.nn, name)(*args, **kwargs, dtype=torch.float64)
    assert repr(ours) == repr(theirs)
    # Beside the eager class, as torch's (ember keeps batch norm in
    # normalization.py where torch has batchnorm.py).
    assert type(ours).__module__ == ours.cls_to_become.__module__
    assert [(k, repr(v) if is_lazy(v) else v.tolist()) for k, v in ours.state_dict().items()] == \
        [(k, repr(v) if isinstance(v, torch.nn.parameter.UninitializedTensorMixin) else v.tolist())
         for k, v in theirs.state_dict().items()]
    assert ours.has_uninitialized_params() == theirs.has_uninitialized_params()
    # Optimizers built before the first forward (their state is made at
    # the first step, from the materialised parameters).
    has_params = len(list(theirs.parameters())) > 0
    if has_params:
        opt = ember.optim.SGD(ours.parameters(), lr=0.01, momentum=0.9)
        topt = torch.optim.SGD(theirs.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    out, tout = ours(ember.tensor(x)), theirs(torch.tensor(x))
    assert type(ours).__name__ == type(theirs).__name__ == name[4:]
    assert repr(ours) == repr(theirs)
    assert not ours.has_uninitialized_params() if hasattr(ours, "has_uninitialized_params") else True
    assert not hasattr(ours, "_initialize_hook") and not ours._forward_pre_hooks
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for (key, value), tvalue in zip(ours.state_dict().items(), theirs.state_dict().values()):
        assert tuple(value.shape) == tuple(tvalue.shape), key
        assert type(value) is ember.Tensor
    for p in ours.parameters():
        assert type(p) is nn.Parameter and p.dtype == ember.float64
    # Same weights (the random init differs), then training side by side
    # with the optimizers made before the forward.
    with ember.no_grad():
        for value, tvalue in zip(ours.state_dict().values(), theirs.state_dict().values()):
            value.copy_(ember.tensor(tvalue.numpy()))
    # A weighted loss: with sum(out ** 2) alone a batch norm's bias
    # gradient is zero up to rounding.
    weights = rng.standard_normal(tuple(tout.shape))
    for step in range(3):
        x = rng.standard_normal(shape)
        out, tout = ours(ember.tensor(x)), theirs(torch.tensor(x))
        close(out, tout)
        if not has_params:
            continue
        (out ** 2 + out * ember.tensor(weights)).sum().backward()
        (tout ** 2 + tout * torch.tensor(weights)).sum().backward()
        for p, q in zip(ours.parameters(), theirs.parameters()):
            close(p.grad, q.grad, rtol=1e-9)
        opt.step(), topt.step(), opt.zero_grad(), topt.zero_grad()
    for value, tvalue in zip(ours.state_dict().values(), theirs.state_dict().values()):
        close(value, tvalue, rtol=1e-9)


@pytest.mark.parametrize("name,args,eager", [
    ("LazyLinear", (3,), lambda lib: lib.nn.Linear(5, 3)),
    ("LazyConv2d", (4, 3), lambda lib: lib.nn.Conv2d(2, 4, 3)),
    ("LazyBatchNorm2d", (), lambda lib: lib.nn.BatchNorm2d(3)),
])
def test_eager_checkpoint_loads_into_lazy_module(name, args, eager):
    torch.manual_seed(0)
    source = eager(torch)
    if isinstance(source, torch.nn.BatchNorm2d):
        source(torch.randn(4, 3, 2, 2) * 3 + 1)
    theirs = getattr(torch.nn, name)(*args)
    theirs.load_state_dict(source.state_dict())
    ours = getattr(nn, name)(*args)
    result = ours.load_state_dict({k: ember.tensor(v.numpy()) for k, v in source.state_dict().items()})
    assert repr(result) == "<All keys matched successfully>"
    # Still the lazy class (materialised), as torch's, until a forward.
    assert type(ours).__name__ == type(theirs).__name__ == name
    assert not ours.has_uninitialized_params()
    for value, tvalue in zip(ours.state_dict().values(), theirs.state_dict().values()):
        close(value, tvalue, rtol=1e-6)
    shape = {"LazyLinear": (2, 5), "LazyConv2d": (1, 2, 5, 5), "LazyBatchNorm2d": (2, 3, 2, 2)}[name]
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    ours.eval(), theirs.eval()
    close(ours(ember.tensor(x)), theirs(torch.tensor(x)), rtol=1e-5, atol=1e-6)
    assert type(ours).__name__ == type(theirs).__name__ == name[4:]


def test_lazy_linear_checks_loaded_width():
    for lib in (ember, torch):
        module = lib.nn.LazyLinear(3)
        module.load_state_dict(lib.nn.Linear(5, 3).state_dict())
        with pytest.raises(AssertionError) as info:
            module(lib.ones(2, 4))
        assert str(info.value) == ("The in_features inferred from input: 4 is not equal to "
                                   "in_features from self.weight: 5")


def test_uninitialized_parameter_behaviour():
    messages = []
    for lib in (ember, torch):
        p = lib.nn.parameter.UninitializedParameter()
        entry = [repr(p), p.requires_grad, isinstance(p, lib.nn.Parameter)]
        with pytest.raises(RuntimeError) as info:
            p.shape
        entry.append(str(info.value))
        entry.append(tuple(p.size()))
        with pytest.raises(ValueError, match="Attempted to use an uninitialized parameter in"):
            p.numel()
        p.materialize((2, 3))
        entry += [type(p).__name__, tuple(p.shape), p.requires_grad]
        b = lib.nn.parameter.UninitializedBuffer()
        entry += [repr(b), b.requires_grad]
        b.materialize((4,), dtype=lib.float64)
        entry += [type(b).__name__, tuple(b.shape), str(b.dtype).split(".")[1]]
        messages.append(entry)
    assert messages[0] == messages[1]
    lazy = nn.LazyLinear(2)
    replica = copy.deepcopy(lazy)
    assert isinstance(replica.weight, UninitializedParameter) and replica.weight is not lazy.weight
    assert isinstance(nn.LazyBatchNorm1d().running_mean, UninitializedBuffer)


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_lazy_errors_match_torch():
    results = []
    for lib in (ember, torch):
        entry = []
        with pytest.raises(RuntimeError) as info:
            lib.nn.LazyConv2d(4, 3)(lib.ones(2, 5, 5, 5, 5))
        entry.append(as_ember_text(str(info.value)))
        with pytest.raises(ValueError) as info:
            lib.nn.LazyConv1d(4, 3, groups=2)(lib.ones(1, 3, 5))
        entry.append(str(info.value))
        with pytest.raises(ValueError) as info:
            lib.nn.LazyBatchNorm2d()(lib.ones(2, 3))
        entry.append(str(info.value))
        for utils in (lib.nn.utils.weight_norm, lib.nn.utils.spectral_norm):
            with pytest.raises(ValueError) as info:
                utils(lib.nn.LazyLinear(3))
            entry.append(str(info.value))
        results.append(entry)
    assert results[0] == results[1]


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_lazy_inside_sequential_and_to_double():
    torch.manual_seed(0)
    ours = nn.Sequential(nn.LazyLinear(4), nn.ReLU(), nn.LazyLinear(2)).double()
    theirs = torch.nn.Sequential(torch.nn.LazyLinear(4), torch.nn.ReLU(), torch.nn.LazyLinear(2)).double()
    x = np.random.default_rng(0).standard_normal((3, 5))
    ours(ember.tensor(x)), theirs(torch.tensor(x))
    assert repr(ours) == repr(theirs)
    assert all(p.dtype == ember.float64 for p in ours.parameters())
    ours.load_state_dict({k: ember.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    close(ours(ember.tensor(x)), theirs(torch.tensor(x)))
