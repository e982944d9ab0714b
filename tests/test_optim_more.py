"""The optimizers beyond SGD/Adam against torch.optim (RMSprop, Adagrad,
Adadelta, Adamax, NAdam, RAdam, LBFGS, and Adam/AdamW's amsgrad+maximize):
identical gradients on both sides must give the same parameters and the
same per-parameter state after every step, the same state_dict layout,
round trips that continue identically, and PyTorch's argument errors.
Tests that need torch take the `torch` fixture; the rest run without it.
"""

import inspect
import os
import re
import tempfile

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.optim as optim


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


SHAPES = [(3, 2), (4,)]


def make_params(torch, dtype=np.float64, seed=0):
    """Two parameters with equal values in ember and torch."""
    rng = np.random.default_rng(seed)
    values = [rng.standard_normal(shape).astype(dtype) for shape in SHAPES]
    ember_params = [nn.Parameter(ember.from_numpy(v.copy())) for v in values]
    torch_params = [torch.nn.Parameter(torch.from_numpy(v.copy())) for v in values]
    return ember_params, torch_params


def set_grads(torch, ember_params, torch_params, rng, dtype=np.float64):
    for ep, tp in zip(ember_params, torch_params):
        grad = rng.standard_normal(tuple(tp.shape)).astype(dtype)
        ep.grad = ember.from_numpy(grad.copy())
        tp.grad = torch.from_numpy(grad.copy())


def assert_same(ember_opt, torch_opt, ember_params, torch_params, rtol, atol):
    """Same parameters, same param_groups, same state keys, dtypes and values."""
    for ep, tp in zip(ember_params, torch_params):
        np.testing.assert_allclose(ep.detach().numpy(), tp.detach().numpy(), rtol=rtol, atol=atol)
    es, ts = ember_opt.state_dict(), torch_opt.state_dict()
    assert es["param_groups"] == ts["param_groups"]
    assert es["state"].keys() == ts["state"].keys()
    for index, torch_state in ts["state"].items():
        state = es["state"][index]
        assert state.keys() == torch_state.keys()
        for key, value in torch_state.items():
            assert str(state[key].dtype).split(".")[1] == str(value.dtype).split(".")[1], key
            np.testing.assert_allclose(state[key].numpy(), value.numpy(), rtol=rtol, atol=atol,
                                       err_msg=key)


def step_both(torch, name, options, steps=6, dtype=np.float64, seed=1, rtol=1e-11, atol=1e-13):
    """Builds ember's and torch's `name` with `options` over equal
    parameters, steps both `steps` times with equal random gradients and
    compares everything after every step; returns both sides."""
    ember_params, torch_params = make_params(torch, dtype)
    e = getattr(optim, name)(ember_params, **options)
    t = getattr(torch.optim, name)(torch_params, **options)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        set_grads(torch, ember_params, torch_params, rng, dtype)
        e.step()
        t.step()
        assert_same(e, t, ember_params, torch_params, rtol, atol)
    return e, t, ember_params, torch_params


CASES = [
    ("RMSprop", {}),
    ("RMSprop", dict(centered=True)),
    ("RMSprop", dict(momentum=0.9, weight_decay=0.1)),
    ("RMSprop", dict(centered=True, momentum=0.5, maximize=True, alpha=0.9)),
    ("Adagrad", {}),
    ("Adagrad", dict(lr_decay=0.1, initial_accumulator_value=0.3)),
    ("Adagrad", dict(weight_decay=0.1, maximize=True, eps=1e-6)),
    ("Adadelta", {}),
    ("Adadelta", dict(rho=0.5, weight_decay=0.1, maximize=True, lr=0.5)),
    ("Adamax", {}),
    ("Adamax", dict(betas=(0.3, 0.8), weight_decay=0.1, maximize=True)),
    ("NAdam", {}),
    ("NAdam", dict(weight_decay=0.1, momentum_decay=0.1)),
    ("NAdam", dict(weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", {}),
    ("RAdam", dict(betas=(0.9, 0.6))),  # rho_t > 5 from step 2 on: the rectified branch
    ("RAdam", dict(betas=(0.5, 0.6), weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict(betas=(0.8, 0.7), weight_decay=0.1, maximize=True)),
    ("Adam", dict(amsgrad=True, maximize=True, betas=(0.4, 0.9))),
    ("AdamW", dict(amsgrad=True, maximize=True, weight_decay=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, maximize=True)),
]


def case_id(case):
    name, options = case
    return name + "".join(f",{k}={v}" for k, v in options.items())


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("foreach", [False, True])
def test_matches_torch_every_step(torch, case, foreach):
    name, options = case
    step_both(torch, name, dict(options, foreach=foreach), steps=8 if name == "RAdam" else 6)


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam"])
def test_float32_matches_torch(torch, name):
    options = {"RMSprop": dict(centered=True, momentum=0.9), "RAdam": dict(betas=(0.9, 0.6))}
    step_both(torch, name, dict(options.get(name, {}), foreach=False), dtype=np.float32,
              rtol=1e-5, atol=1e-6)


def signature(function):
    """Parameter names, kinds and defaults (not annotations)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta",
                                  "Adamax", "NAdam", "RAdam", "LBFGS"])
def test_constructor_signature_matches_torch(torch, name):
    assert signature(getattr(optim, name)) == signature(getattr(torch.optim, name))
    assert signature(getattr(optim, name).step) == signature(getattr(torch.optim, name).step)


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam",
                                  "LBFGS"])
def test_param_group_keys_and_defaults_match_torch(torch, name):
    ember_params, torch_params = make_params(torch)
    e = getattr(optim, name)(ember_params)
    t = getattr(torch.optim, name)(torch_params)
    assert e.state_dict()["param_groups"] == t.state_dict()["param_groups"]
    assert e.defaults == t.defaults


@pytest.mark.parametrize("name,options", [("RMSprop", dict(centered=True, momentum=0.9)),
                                          ("Adagrad", dict(lr_decay=0.1)),
                                          ("Adadelta", {}), ("Adamax", {}),
                                          ("NAdam", dict(decoupled_weight_decay=True,
                                                         weight_decay=0.1)),
                                          ("RAdam", dict(betas=(0.9, 0.6))),
                                          ("AdamW", dict(amsgrad=True))])
def test_state_dict_round_trip_continues_like_torch(torch, name, options):
    """Three steps, then each side's state_dict (ember's through
    ember.save/ember.load) into a fresh optimizer over copies of the
    parameters, three more steps: the same on both sides.  (Loading casts
    floating-point state other than "step" to the parameter's dtype, on
    both sides: NAdam's mu_product becomes float64 here.)"""
    e, t, ember_params, torch_params = step_both(torch, name, options, steps=3)
    ember_copies = [nn.Parameter(p.detach().clone()) for p in ember_params]
    torch_copies = [torch.nn.Parameter(p.detach().clone()) for p in torch_params]
    ember_resumed = getattr(optim, name)(ember_copies, **options)
    torch_resumed = getattr(torch.optim, name)(torch_copies, **options)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "optim.safetensors")
        ember.save(e.state_dict(), path)
        ember_resumed.load_state_dict(ember.load(path))
    torch_resumed.load_state_dict(t.state_dict())
    assert_same(ember_resumed, torch_resumed, ember_copies, torch_copies, rtol=1e-11, atol=1e-13)
    rng = np.random.default_rng(7)
    for _ in range(3):
        set_grads(torch, ember_copies, torch_copies, rng)
        ember_resumed.step()
        torch_resumed.step()
        assert_same(ember_resumed, torch_resumed, ember_copies, torch_copies,
                    rtol=1e-11, atol=1e-13)


def test_add_param_group_with_its_own_options(torch):
    ember_params, torch_params = make_params(torch)
    e = optim.RMSprop(ember_params[:1], lr=0.01)
    t = torch.optim.RMSprop(torch_params[:1], lr=0.01)
    e.add_param_group({"params": ember_params[1:], "lr": 0.1, "centered": True})
    t.add_param_group({"params": torch_params[1:], "lr": 0.1, "centered": True})
    rng = np.random.default_rng(3)
    for _ in range(4):
        set_grads(torch, ember_params, torch_params, rng)
        e.step()
        t.step()
        assert_same(e, t, ember_params, torch_params, rtol=1e-11, atol=1e-13)
    assert "grad_avg" in e.state[ember_params[1]] and "grad_avg" not in e.state[ember_params[0]]


def test_adagrad_state_exists_before_the_first_step(torch):
    ember_params, torch_params = make_params(torch)
    e = optim.Adagrad(ember_params, initial_accumulator_value=0.5)
    t = torch.optim.Adagrad(torch_params, initial_accumulator_value=0.5)
    assert_same(e, t, ember_params, torch_params, rtol=0, atol=0)


BAD_ARGUMENTS = [
    ("RMSprop", dict(lr=-1.0)), ("RMSprop", dict(eps=-1.0)), ("RMSprop", dict(momentum=-1.0)),
    ("RMSprop", dict(weight_decay=-1.0)), ("RMSprop", dict(alpha=-1.0)),
    ("Adagrad", dict(lr_decay=-1.0)), ("Adagrad", dict(initial_accumulator_value=-1.0)),
    ("Adagrad", dict(eps=-1.0)), ("Adadelta", dict(rho=1.5)), ("Adadelta", dict(eps=-1.0)),
    ("Adamax", dict(betas=(1.0, 0.9))), ("Adamax", dict(betas=(0.9, -0.1))),
    ("NAdam", dict(momentum_decay=-1.0)), ("NAdam", dict(weight_decay=-1.0)),
    ("RAdam", dict(betas=(0.9, 1.0))), ("LBFGS", dict(lr=-0.5)),
]


@pytest.mark.parametrize("case", BAD_ARGUMENTS, ids=case_id)
def test_argument_errors_match_torch(torch, case):
    name, options = case
    with pytest.raises(ValueError) as expected:
        getattr(torch.optim, name)([torch.nn.Parameter(torch.zeros(1))], **options)
    with pytest.raises(ValueError, match="^" + re.escape(str(expected.value)) + "$"):
        getattr(optim, name)([nn.Parameter(ember.zeros(1))], **options)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adagrad"])
@pytest.mark.parametrize("options", [dict(fused=True, differentiable=True),
                                     dict(fused=True, foreach=True)])
def test_fused_conflicts_match_torch(torch, name, options):
    with pytest.raises(RuntimeError) as expected:
        getattr(torch.optim, name)([torch.nn.Parameter(torch.zeros(1))], **options)
    with pytest.raises(RuntimeError, match="^" + re.escape(str(expected.value)) + "$"):
        getattr(optim, name)([nn.Parameter(ember.zeros(1))], **options)


def test_fused_runs_the_same_update(torch):
    step_both(torch, "Adagrad", dict(fused=True, lr_decay=0.1), steps=4)


def test_lbfgs_rejects_parameter_groups(torch):
    groups = [{"params": [nn.Parameter(ember.zeros(1))]}, {"params": [nn.Parameter(ember.zeros(1))]}]
    torch_groups = [{"params": [torch.nn.Parameter(torch.zeros(1))]},
                    {"params": [torch.nn.Parameter(torch.zeros(1))]}]
    with pytest.raises(ValueError) as expected:
        torch.optim.LBFGS(torch_groups)
    with pytest.raises(ValueError, match=re.escape(str(expected.value))):
        optim.LBFGS(groups)


# ---- LBFGS -------------------------------------------------------------------

def rosenbrock(x):
    """The n-dimensional Rosenbrock function; its minimum 0 is at all-ones."""
    return ((1 - x[:-1]) ** 2).sum() + 100 * ((x[1:] - x[:-1] ** 2) ** 2).sum()


START = np.array([-1.2, 1.0, 0.5, -0.3])


def rosenbrock_closure(opt, x):
    """LBFGS's closure: zero the gradient, return rosenbrock(x) backpropagated."""
    def evaluate():
        opt.zero_grad()
        loss = rosenbrock(x)
        loss.backward()
        return loss
    return evaluate


def lbfgs_pair(torch, **options):
    ex = nn.Parameter(ember.from_numpy(START.copy()))
    tx = torch.nn.Parameter(torch.from_numpy(START.copy()))
    e, t = optim.LBFGS([ex], **options), torch.optim.LBFGS([tx], **options)
    return (e, ex, rosenbrock_closure(e, ex)), (t, tx, rosenbrock_closure(t, tx))


def lbfgs_state_summary(opt, x):
    """The LBFGS state as plain numbers, comparable across the libraries."""
    state = opt.state[x]
    return {"func_evals": state["func_evals"], "n_iter": state["n_iter"],
            "t": float(state["t"]), "H_diag": float(state["H_diag"]),
            "prev_loss": state["prev_loss"], "history": len(state["old_dirs"]),
            "d": state["d"].detach().numpy(), "ro": [float(r) for r in state["ro"]]}


@pytest.mark.parametrize("options", [dict(lr=0.1, max_iter=5, history_size=3),
                                     dict(lr=1, max_iter=5, history_size=4,
                                          line_search_fn="strong_wolfe"),
                                     dict(lr=1, max_iter=20, line_search_fn="strong_wolfe",
                                          tolerance_change=1e-12)])
def test_lbfgs_matches_torch_on_rosenbrock(torch, options):
    (e, ex, ember_closure), (t, tx, torch_closure) = lbfgs_pair(torch, **options)
    for _ in range(6):
        ember_loss = e.step(ember_closure)
        torch_loss = t.step(torch_closure)
        assert float(ember_loss) == pytest.approx(torch_loss.item(), rel=1e-12, abs=1e-14)
        np.testing.assert_allclose(ex.detach().numpy(), tx.detach().numpy(), rtol=1e-9, atol=1e-12)
        got, want = lbfgs_state_summary(e, ex), lbfgs_state_summary(t, tx)
        np.testing.assert_allclose(got.pop("d"), want.pop("d"), rtol=1e-7, atol=1e-12)
        np.testing.assert_allclose(got.pop("ro"), want.pop("ro"), rtol=1e-7)
        assert got == pytest.approx(want, rel=1e-7)
    assert sorted(e.state_dict()["state"][0]) == sorted(t.state_dict()["state"][0])
    assert e.state_dict()["param_groups"] == t.state_dict()["param_groups"]


def test_lbfgs_state_dict_round_trip_continues_like_torch(torch):
    """Two steps, the state through ember.save/ember.load into a fresh
    LBFGS over a copy of the parameter, two more steps: as torch going on."""
    options = dict(max_iter=4, history_size=3, line_search_fn="strong_wolfe")
    (e, ex, ember_closure), (t, tx, torch_closure) = lbfgs_pair(torch, **options)
    for _ in range(2):
        e.step(ember_closure)
        t.step(torch_closure)
    copy = nn.Parameter(ex.detach().clone())
    resumed = optim.LBFGS([copy], **options)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "lbfgs.safetensors")
        ember.save(e.state_dict(), path)
        resumed.load_state_dict(ember.load(path))
    for _ in range(2):
        resumed.step(rosenbrock_closure(resumed, copy))
        t.step(torch_closure)
        np.testing.assert_allclose(copy.detach().numpy(), tx.detach().numpy(), rtol=1e-9,
                                   atol=1e-12)
    assert resumed.state[copy]["func_evals"] == t.state[tx]["func_evals"]


def test_lbfgs_strong_wolfe_converges_on_rosenbrock():
    """From the classic start (-1.2, 1) to the minimum (1, 1).  (The 4-d
    START has a local minimum near (-0.78, 0.61, 0.38, 0.15), where torch
    stops too.)"""
    x = nn.Parameter(ember.tensor([-1.2, 1.0], dtype=ember.float64))
    opt = optim.LBFGS([x], max_iter=100, line_search_fn="strong_wolfe",
                      tolerance_grad=1e-10, tolerance_change=1e-14)
    for _ in range(5):
        opt.step(rosenbrock_closure(opt, x))
    np.testing.assert_allclose(x.detach().numpy(), np.ones(2), atol=1e-6)


def test_lbfgs_rejects_an_unknown_line_search():
    x = nn.Parameter(ember.from_numpy(START.copy()))
    opt = optim.LBFGS([x], line_search_fn="backtracking")
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        opt.step(rosenbrock_closure(opt, x))


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam"])
def test_minimises_a_quadratic(name):
    """Without torch: each optimizer brings sum((x - 3)^2) down (Adadelta,
    whose first steps are ~sqrt(eps), slowly)."""
    x = nn.Parameter(ember.zeros(5, dtype=ember.float64))
    opt = getattr(optim, name)([x], lr=1.0 if name == "Adadelta" else 0.1)
    first = None
    for _ in range(100):
        opt.zero_grad()
        loss = ((x - 3) ** 2).sum()
        loss.backward()
        opt.step()
        first = loss.item() if first is None else first
    assert ((x - 3) ** 2).sum().item() < (0.9 if name == "Adadelta" else 0.5) * first
