"""optim.Rprop, optim.ASGD, lr_scheduler.PolynomialLR, nn.Buffer and
utils.data.StackDataset against PyTorch: parameters, state and state_dict
after several steps with the same gradients for every option, round trips
of state_dict, reprs, error messages.  Pure Python over existing
operators."""

import itertools
import pickle

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.optim as optim
from ember.optim import lr_scheduler
from ember.utils.data import DataLoader, StackDataset, TensorDataset

torch = pytest.importorskip("torch")

SHAPES = [(3, 2), (4,)]


def make_params(seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    values = [rng.standard_normal(shape).astype(dtype) for shape in SHAPES]
    return ([nn.Parameter(ember.tensor(v.copy())) for v in values],
            [torch.nn.Parameter(torch.tensor(v.copy())) for v in values])


def run_steps(ours, theirs, params, tparams, steps=6, seed=1, dtype=np.float64):
    """Steps both with the same gradients; every few steps the gradient
    repeats its sign or flips it, exercising Rprop's three cases."""
    rng = np.random.default_rng(seed)
    grads = [rng.standard_normal(p.shape).astype(dtype) for p in tparams]
    for step in range(steps):
        for p, q, grad in zip(params, tparams, grads):
            if step % 3 == 1:
                grad = -grad
            elif step % 3 == 2:
                grad = grad * 0.5
                grad[..., 0] = 0.0
            p.grad = ember.tensor(grad.copy())
            q.grad = torch.tensor(grad.copy())
        ours.step()
        theirs.step()
        grads = [rng.standard_normal(p.shape).astype(dtype) for p in tparams]


def assert_same(params, tparams, rtol=1e-12, atol=1e-14):
    for p, q in zip(params, tparams):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=rtol, atol=atol)


def assert_same_state(ours, theirs, rtol=1e-12, ignore=()):
    state, tstate = ours.state_dict(), theirs.state_dict()
    assert [{k: v for k, v in g.items() if k not in ignore} for g in state["param_groups"]] == \
        [{k: v for k, v in g.items() if k not in ignore} for g in tstate["param_groups"]]
    assert list(state["state"]) == list(tstate["state"])
    for key, value in state["state"].items():
        assert list(value) == list(tstate["state"][key])
        for name, tensor in value.items():
            expected = tstate["state"][key][name]
            assert str(tensor.dtype).split(".")[1] == str(expected.dtype).split(".")[1], name
            np.testing.assert_allclose(tensor.numpy(), expected.numpy(), rtol=rtol, atol=1e-14)


RPROP_OPTIONS = [dict(), dict(lr=0.05), dict(etas=(0.3, 1.5)), dict(step_sizes=(1e-3, 0.02)),
                 dict(maximize=True), dict(foreach=True), dict(foreach=False)]


@pytest.mark.parametrize("options", RPROP_OPTIONS)
def test_rprop_matches_torch(options):
    params, tparams = make_params()
    ours, theirs = optim.Rprop(params, **options), torch.optim.Rprop(tparams, **options)
    run_steps(ours, theirs, params, tparams)
    assert_same(params, tparams)
    assert_same_state(ours, theirs)


ASGD_OPTIONS = [dict(), dict(lr=0.1, lambd=1e-2, alpha=0.5), dict(t0=3), dict(t0=0, lr=0.05),
                dict(weight_decay=0.1), dict(maximize=True), dict(foreach=True)]


@pytest.mark.parametrize("options", ASGD_OPTIONS)
def test_asgd_matches_torch(options):
    """ember runs PyTorch's single-tensor update for foreach=True too;
    torch's foreach kernel computes eta in float32 tensors instead of a
    float64 scalar, so it agrees to float32 rounding only."""
    params, tparams = make_params()
    reference = {**options, "foreach": False}
    ours, theirs = optim.ASGD(params, **options), torch.optim.ASGD(tparams, **reference)
    run_steps(ours, theirs, params, tparams, steps=8)
    assert_same(params, tparams)
    assert_same_state(ours, theirs, ignore=("foreach",))
    if options.get("foreach"):
        params, tparams = make_params()
        ours, theirs = optim.ASGD(params, **options), torch.optim.ASGD(tparams, **options)
        run_steps(ours, theirs, params, tparams, steps=8)
        assert_same(params, tparams, rtol=1e-6)
        assert_same_state(ours, theirs, rtol=1e-6)


@pytest.mark.parametrize("name", ["Rprop", "ASGD"])
def test_float32_parameters(name):
    params, tparams = make_params(dtype=np.float32)
    ours, theirs = getattr(optim, name)(params, lr=0.1), getattr(torch.optim, name)(tparams, lr=0.1)
    run_steps(ours, theirs, params, tparams, dtype=np.float32)
    assert_same(params, tparams, rtol=1e-6, atol=1e-7)
    assert_same_state(ours, theirs, rtol=1e-6)


@pytest.mark.parametrize("name,options", [("Rprop", dict(lr=0.02)), ("ASGD", dict(t0=2, lr=0.05))])
def test_state_dict_round_trip(name, options):
    params, tparams = make_params()
    ours, theirs = getattr(optim, name)(params, **options), getattr(torch.optim, name)(tparams, **options)
    run_steps(ours, theirs, params, tparams, steps=3)
    # Fresh optimizers load the states (ours through pickle, as a
    # checkpoint would) and continue alike.  Loading casts the floating
    # state but "step" to the parameter's dtype, in both libraries.
    copy_params = [nn.Parameter(p.detach().clone()) for p in params]
    copy_tparams = [torch.nn.Parameter(q.detach().clone()) for q in tparams]
    restored = getattr(optim, name)(copy_params)
    restored.load_state_dict(pickle.loads(pickle.dumps(ours.state_dict())))
    restored_theirs = getattr(torch.optim, name)(copy_tparams)
    restored_theirs.load_state_dict(theirs.state_dict())
    assert_same_state(restored, restored_theirs)
    run_steps(restored, restored_theirs, copy_params, copy_tparams, steps=3, seed=5)
    assert_same(copy_params, copy_tparams)
    assert_same_state(restored, restored_theirs)
    # torch's state dict (converted) loads as well.
    converted = theirs.state_dict()
    converted = {"param_groups": converted["param_groups"],
                 "state": {k: {n: ember.tensor(t.numpy()) for n, t in v.items()}
                           for k, v in converted["state"].items()}}
    other = getattr(optim, name)([nn.Parameter(p.detach().clone()) for p in params])
    other.load_state_dict(converted)
    for key, value in other.state_dict()["state"].items():
        for field, tensor in value.items():
            np.testing.assert_allclose(tensor.numpy(), theirs.state_dict()["state"][key][field].numpy())


def test_reprs_and_defaults():
    for name in ("Rprop", "ASGD"):
        params, tparams = make_params()
        assert repr(getattr(optim, name)(params)) == repr(getattr(torch.optim, name)(tparams))
        assert getattr(optim, name)(params).defaults == getattr(torch.optim, name)(tparams).defaults


def test_errors():
    for lib in (ember, torch):
        p = lib.nn.Parameter(lib.zeros(2))
        cases = [(lambda: lib.optim.Rprop([p], lr=-1.0), "Invalid learning rate: -1.0"),
                 (lambda: lib.optim.Rprop([p], etas=(1.5, 1.2)), "Invalid eta values: 1.5, 1.2"),
                 (lambda: lib.optim.ASGD([p], lr=-0.5), "Invalid learning rate: -0.5"),
                 (lambda: lib.optim.ASGD([p], weight_decay=-1), "Invalid weight_decay value: -1")]
        for make, message in cases:
            with pytest.raises(ValueError) as info:
                make()
            assert str(info.value) == message


# ---- PolynomialLR ----------------------------------------------------------

@pytest.mark.parametrize("total_iters,power", [(5, 1.0), (4, 2.0), (7, 0.5)])
def test_polynomial_lr_matches_torch(total_iters, power):
    params, tparams = make_params()
    ours = optim.SGD([{"params": params[:1]}, {"params": params[1:], "lr": 0.3}], lr=0.1)
    theirs = torch.optim.SGD([{"params": tparams[:1]}, {"params": tparams[1:], "lr": 0.3}], lr=0.1)
    sched = lr_scheduler.PolynomialLR(ours, total_iters=total_iters, power=power)
    tsched = torch.optim.lr_scheduler.PolynomialLR(theirs, total_iters=total_iters, power=power)
    for _ in range(total_iters + 3):
        np.testing.assert_allclose(sched.get_last_lr(), tsched.get_last_lr(), rtol=1e-13, atol=1e-16)
        ours.step(), theirs.step(), sched.step(), tsched.step()
    assert sched.get_last_lr() == [0.0, 0.0]
    state, tstate = sched.state_dict(), tsched.state_dict()
    assert sorted(state) == sorted(tstate)
    assert {k: state[k] for k in ("total_iters", "power", "last_epoch", "base_lrs")} == \
        {k: tstate[k] for k in ("total_iters", "power", "last_epoch", "base_lrs")}


def test_polynomial_lr_closed_form_and_resume():
    params, _ = make_params()
    opt = optim.SGD(params, lr=1.0)
    sched = lr_scheduler.PolynomialLR(opt, total_iters=4, power=2.0)
    for _ in range(2):
        opt.step(), sched.step()
    assert sched._get_closed_form_lr() == [(1 - 2 / 4) ** 2]
    np.testing.assert_allclose(sched.get_last_lr(), [(1 - 2 / 4) ** 2], rtol=1e-14)
    resumed = lr_scheduler.PolynomialLR(optim.SGD(make_params()[0], lr=1.0), total_iters=4, power=2.0)
    resumed.load_state_dict(sched.state_dict())
    assert resumed.last_epoch == 2 and resumed.power == 2.0


# ---- nn.Buffer -------------------------------------------------------------

def test_buffer_assignment_matches_torch():
    results = []
    for lib in (ember, torch):
        module = lib.nn.Linear(2, 2)
        module.hidden = lib.nn.Buffer(lib.ones(2), persistent=False)
        module.count = lib.nn.Buffer(lib.zeros(1))
        assert isinstance(module.count, lib.nn.Buffer)
        assert not isinstance(module.count + 1, lib.nn.Buffer)
        assert not isinstance(lib.ones(1), lib.nn.Buffer)
        module.count = lib.ones(3)              # a plain tensor keeps the slot
        module.hidden = lib.nn.Buffer(lib.ones(4), persistent=True)
        entry = [list(module.state_dict()), [n for n, _ in module.named_buffers()],
                 module.hidden.shape[0], module.count.shape[0],
                 lib.nn.Buffer(lib.ones(1, requires_grad=True)).requires_grad,
                 lib.nn.Buffer().shape[0]]
        module.other = 3
        with pytest.raises(KeyError) as info:
            module.other = lib.nn.Buffer(lib.ones(1))
        entry.append(str(info.value))
        with pytest.raises(TypeError) as info:
            module.count = 3
        entry.append(str(info.value).replace("torch", "ember"))
        results.append(entry)
    assert results[0] == results[1]


# ---- StackDataset ----------------------------------------------------------

def test_stack_dataset_matches_torch():
    x, y = np.arange(12.0).reshape(6, 2), np.arange(6)
    ours = StackDataset(TensorDataset(ember.tensor(x)), [f"s{i}" for i in range(6)])
    theirs = torch.utils.data.StackDataset(torch.utils.data.TensorDataset(torch.tensor(x)),
                                           [f"s{i}" for i in range(6)])
    assert len(ours) == len(theirs) == 6
    assert ours[2][1] == theirs[2][1] == "s2"
    assert ours[2][0][0].tolist() == theirs[2][0][0].tolist()
    named = StackDataset(image=list(range(6)), label=list(y * 10))
    named_theirs = torch.utils.data.StackDataset(image=list(range(6)), label=list(y * 10))
    assert named[4] == named_theirs[4] == {"image": 4, "label": 40}
    assert named.__getitems__([1, 3]) == named_theirs.__getitems__([1, 3])
    assert StackDataset(list(range(6)), list(y)).__getitems__([0, 5]) == \
        torch.utils.data.StackDataset(list(range(6)), list(y)).__getitems__([0, 5])
    batches = list(DataLoader(named, batch_size=4))
    tbatches = list(torch.utils.data.DataLoader(named_theirs, batch_size=4))
    for batch, tbatch in zip(batches, tbatches):
        assert batch["image"].tolist() == tbatch["image"].tolist()
        assert batch["label"].tolist() == tbatch["label"].tolist()


def test_stack_dataset_errors():
    for module in (ember.utils.data, torch.utils.data):
        for args, kwargs, message in (
                (([1, 2], [1]), {}, "Size mismatch between datasets"),
                ((), {"a": [1], "b": [1, 2]}, "Size mismatch between datasets"),
                ((), {}, "At least one dataset should be passed"),
                (([1],), {"a": [1]}, "Supported either ``tuple``- (via ``args``) or``dict``- "
                                     "(via ``kwargs``) like input/output, but both types are given.")):
            with pytest.raises(ValueError) as info:
                module.StackDataset(*args, **kwargs)
            assert str(info.value) == message


def test_asgd_under_float64_default_dtype():
    """The scalar state follows the default dtype (float64 here)."""
    old, told = ember.get_default_dtype(), torch.get_default_dtype()
    ember.set_default_dtype(ember.float64)
    torch.set_default_dtype(torch.float64)
    try:
        params, tparams = make_params()
        ours, theirs = optim.ASGD(params, t0=2), torch.optim.ASGD(tparams, t0=2)
        run_steps(ours, theirs, params, tparams)
        assert_same(params, tparams)
        assert_same_state(ours, theirs)
        assert ours.state[params[0]]["eta"].dtype == ember.float64
    finally:
        ember.set_default_dtype(old)
        torch.set_default_dtype(told)
