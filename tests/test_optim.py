"""ember.optim against torch.optim: the same gradients, set by hand on both
sides, must give the same parameters after several steps, for every
option combination; state_dict layout, load_state_dict, errors and the
learning-rate schedules must match too.
"""

import itertools
import math
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.optim as optim
from ember.optim import lr_scheduler


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def to_numpy(t):
    return t.detach().numpy()


SHAPES = [(3, 2), (4,)]


def make_params(torch, seed=0):
    """Two float64 parameters with equal values in ember and torch."""
    rng = np.random.default_rng(seed)
    values = [rng.standard_normal(shape) for shape in SHAPES]
    ember_params = [nn.Parameter(ember.from_numpy(v.copy())) for v in values]
    torch_params = [torch.nn.Parameter(torch.from_numpy(v.copy())) for v in values]
    return ember_params, torch_params


def run_steps(torch, ember_opt, torch_opt, ember_params, torch_params, steps=5, seed=1):
    """Sets identical random gradients on both sides and steps both."""
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        for ep, tp in zip(ember_params, torch_params):
            grad = rng.standard_normal(tuple(tp.shape))
            ep.grad = ember.from_numpy(grad.copy())
            tp.grad = torch.from_numpy(grad.copy())
        ember_opt.step()
        torch_opt.step()


def assert_params_equal(ember_params, torch_params, rtol=1e-12, atol=1e-14):
    for ep, tp in zip(ember_params, torch_params):
        np.testing.assert_allclose(to_numpy(ep), tp.detach().numpy(), rtol=rtol, atol=atol)


def assert_state_equal(ember_opt, torch_opt):
    """Same state_dict: param_groups equal, state tensors equal."""
    es, ts = ember_opt.state_dict(), torch_opt.state_dict()
    assert es["param_groups"] == ts["param_groups"]
    assert es["state"].keys() == ts["state"].keys()
    for index, state in es["state"].items():
        assert state.keys() == ts["state"][index].keys()
        for key, value in state.items():
            np.testing.assert_allclose(to_numpy(value), ts["state"][index][key].numpy(),
                                       rtol=1e-12, atol=1e-14)
            assert str(value.dtype).split(".")[1] == str(ts["state"][index][key].dtype).split(".")[1]


SGD_OPTIONS = [
    dict(momentum=m, dampening=d, weight_decay=wd, nesterov=n, maximize=mx)
    for m, d, wd, n, mx in itertools.product([0, 0.9], [0, 0.3], [0, 0.05], [False, True],
                                             [False, True])
    if not (n and (m == 0 or d != 0))
]


@pytest.mark.parametrize("options", SGD_OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_sgd_matches_torch(torch, options):
    ember_params, torch_params = make_params(torch)
    e = optim.SGD(ember_params, lr=0.1, **options)
    t = torch.optim.SGD(torch_params, lr=0.1, foreach=False, **options)
    run_steps(torch, e, t, ember_params, torch_params)
    assert_params_equal(ember_params, torch_params)
    es, ts = e.state_dict(), t.state_dict()
    assert es["param_groups"][0] | {"foreach": None} == ts["param_groups"][0] | {"foreach": None}
    assert_state_equal_except_foreach(e, t)


def assert_state_equal_except_foreach(ember_opt, torch_opt):
    """assert_state_equal, ignoring the foreach flag the torch side was given."""
    for group in torch_opt.param_groups:
        group["foreach"] = None
    assert_state_equal(ember_opt, torch_opt)


ADAM_OPTIONS = [
    dict(weight_decay=wd, amsgrad=a, maximize=mx, betas=b)
    for wd, a, mx, b in itertools.product([0, 0.1], [False, True], [False, True],
                                          [(0.9, 0.999), (0.5, 0.9)])
]


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
@pytest.mark.parametrize("options", ADAM_OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_adam_and_adamw_match_torch(torch, name, options):
    ember_params, torch_params = make_params(torch)
    e = getattr(optim, name)(ember_params, lr=0.05, eps=1e-6, **options)
    t = getattr(torch.optim, name)(torch_params, lr=0.05, eps=1e-6, foreach=False, **options)
    run_steps(torch, e, t, ember_params, torch_params, steps=6)
    assert_params_equal(ember_params, torch_params, rtol=1e-10, atol=1e-12)
    assert_state_equal_except_foreach(e, t)


def test_adam_decoupled_weight_decay_flag_equals_adamw(torch):
    ember_params, torch_params = make_params(torch)
    e = optim.Adam(ember_params, lr=0.05, weight_decay=0.2, decoupled_weight_decay=True)
    t = torch.optim.AdamW(torch_params, lr=0.05, weight_decay=0.2, foreach=False)
    run_steps(torch, e, t, ember_params, torch_params)
    assert_params_equal(ember_params, torch_params, rtol=1e-10)


def test_param_groups_and_skipped_params(torch):
    ember_params, torch_params = make_params(torch)
    e = optim.SGD([{"params": ember_params[:1], "lr": 0.5}, {"params": ember_params[1:]}],
                  lr=0.1, momentum=0.9)
    t = torch.optim.SGD([{"params": torch_params[:1], "lr": 0.5}, {"params": torch_params[1:]}],
                        lr=0.1, momentum=0.9)
    run_steps(torch, e, t, ember_params, torch_params, steps=2)
    # A parameter without a gradient is left alone (and gets no state).
    ember_params[1].grad = None
    torch_params[1].grad = None
    before = to_numpy(ember_params[1]).copy()
    e.step()
    t.step()
    assert np.array_equal(to_numpy(ember_params[1]), before)
    assert_params_equal(ember_params, torch_params)
    assert e.state_dict()["param_groups"] == t.state_dict()["param_groups"]
    assert repr(e) == repr(t)


def test_add_param_group(torch):
    ember_params, _ = make_params(torch)
    e = optim.Adam(ember_params[:1], lr=0.1)
    e.add_param_group({"params": ember_params[1], "betas": (0.5, 0.6)})
    assert e.param_groups[1]["lr"] == 0.1 and e.param_groups[1]["betas"] == (0.5, 0.6)
    assert e.param_groups[1]["params"] == [ember_params[1]]
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        e.add_param_group({"params": [ember_params[0]]})


def test_named_parameters(torch):
    e_model, t_model = nn.Linear(2, 3), torch.nn.Linear(2, 3)
    e = optim.SGD(e_model.named_parameters(), lr=0.1)
    t = torch.optim.SGD(t_model.named_parameters(), lr=0.1)
    assert e.param_groups[0]["param_names"] == ["weight", "bias"]
    assert e.state_dict()["param_groups"] == t.state_dict()["param_groups"]
    assert e.param_groups[0]["params"] == [e_model.weight, e_model.bias]
    with pytest.raises(ValueError, match="cannot add param group without names"):
        e.add_param_group({"params": [nn.Parameter(ember.ones(1))]})
    with pytest.raises(ValueError, match="Some param names are missing"):
        optim.SGD([("w", nn.Parameter(ember.ones(1))), nn.Parameter(ember.ones(1))])


def test_constructor_errors_match_torch(torch):
    def same_error(ember_call, torch_call):
        with pytest.raises(Exception) as torch_info:
            torch_call()
        with pytest.raises(type(torch_info.value)) as ember_info:
            ember_call()
        assert str(ember_info.value) == str(torch_info.value).replace("torch", "ember")

    ep, tp = nn.Parameter(ember.ones(2)), torch.nn.Parameter(torch.ones(2))
    same_error(lambda: optim.SGD([], lr=0.1), lambda: torch.optim.SGD([], lr=0.1))
    same_error(lambda: optim.SGD(ep, lr=0.1), lambda: torch.optim.SGD(tp, lr=0.1))
    same_error(lambda: optim.SGD([ep], lr=-1), lambda: torch.optim.SGD([tp], lr=-1))
    same_error(lambda: optim.SGD([ep], momentum=-1), lambda: torch.optim.SGD([tp], momentum=-1))
    same_error(lambda: optim.SGD([ep], weight_decay=-1), lambda: torch.optim.SGD([tp], weight_decay=-1))
    same_error(lambda: optim.SGD([ep], nesterov=True), lambda: torch.optim.SGD([tp], nesterov=True))
    same_error(lambda: optim.SGD([1.0]), lambda: torch.optim.SGD([1.0]))
    same_error(lambda: optim.SGD([{"params": {ep}}]), lambda: torch.optim.SGD([{"params": {tp}}]))
    same_error(lambda: optim.SGD([ep]).add_param_group([ep]),
               lambda: torch.optim.SGD([tp]).add_param_group([tp]))
    with pytest.warns(UserWarning, match="duplicate parameters"):
        same_error(lambda: optim.SGD([ep, ep], lr=0.1).add_param_group({"params": [ep]}),
                   lambda: torch.optim.SGD([tp, tp], lr=0.1).add_param_group({"params": [tp]}))
    for kwargs in [dict(lr=-1), dict(eps=-1), dict(betas=(1.0, 0.9)), dict(betas=(0.9, -0.1)),
                   dict(weight_decay=-1)]:
        same_error(lambda: optim.Adam([ep], **kwargs), lambda: torch.optim.Adam([tp], **kwargs))
        same_error(lambda: optim.AdamW([ep], **kwargs), lambda: torch.optim.AdamW([tp], **kwargs))


def test_non_leaf_is_rejected():
    if not hasattr(ember, "autograd"):
        pytest.skip("ember.autograd is not available")
    p = nn.Parameter(ember.ones(2))
    try:
        non_leaf = p * 2
    except NotImplementedError as exc:
        pytest.skip(f"autograd formula missing: {exc}")
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        optim.SGD([non_leaf], lr=0.1)


def test_zero_grad():
    p = nn.Parameter(ember.ones(2))
    opt = optim.SGD([p], lr=0.1)
    p.grad = ember.ones(2)
    opt.zero_grad(set_to_none=False)
    assert to_numpy(p.grad).tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None


@pytest.mark.parametrize("name,kwargs", [("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
                                         ("Adam", dict(lr=0.05, amsgrad=True)),
                                         ("AdamW", dict(lr=0.05))])
def test_state_dict_round_trip_continues_identically(torch, name, kwargs):
    ember_params, torch_params = make_params(torch)
    e = getattr(optim, name)(ember_params, **kwargs)
    t = getattr(torch.optim, name)(torch_params, foreach=False, **kwargs)
    run_steps(torch, e, t, ember_params, torch_params, steps=3)
    # A fresh optimizer on (copies of) the parameters, loaded from e's state.
    resumed_params = [nn.Parameter(p.detach().clone()) for p in ember_params]
    resumed = getattr(optim, name)(resumed_params, lr=123.0)
    resumed.load_state_dict(e.state_dict())
    assert resumed.param_groups[0]["lr"] == kwargs["lr"]
    assert resumed.param_groups[0]["params"] == resumed_params
    run_steps(torch, resumed, t, resumed_params, torch_params, steps=3, seed=5)
    assert_params_equal(resumed_params, torch_params, rtol=1e-10)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        resumed.load_state_dict({"state": {}, "param_groups": []})
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        resumed.load_state_dict({"state": {}, "param_groups": [{"params": [0]}]})


def test_load_state_dict_casts_state_to_param_dtype():
    p = nn.Parameter(ember.ones(2, dtype=ember.float64))
    opt = optim.Adam([p])
    state = {"state": {0: {"step": ember.tensor(3.0), "exp_avg": ember.ones(2),
                           "exp_avg_sq": ember.ones(2)}},
             "param_groups": [dict(opt.state_dict()["param_groups"][0])]}
    opt.load_state_dict(state)
    assert opt.state[p]["exp_avg"].dtype == ember.float64
    assert opt.state[p]["step"].dtype == ember.float32


def test_training_loop_decreases_loss():
    """End to end with autograd: a linear fit with SGD and Adam."""
    if not hasattr(ember, "autograd"):
        pytest.skip("ember.autograd is not available")
    ember.manual_seed(0)
    x = ember.randn(32, 3)
    y = x.matmul(ember.tensor([[1.0], [-2.0], [0.5]])) + 0.3
    for make in (lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9), lambda ps: optim.Adam(ps, lr=0.05)):
        model = nn.Linear(3, 1)
        opt = make(model.parameters())
        losses = []
        try:
            for _ in range(60):
                opt.zero_grad()
                loss = nn.functional.mse_loss(model(x), y)
                loss.backward()
                opt.step()
                losses.append(loss.item())
        except NotImplementedError as exc:
            pytest.skip(f"autograd formula missing: {exc}")
        assert losses[-1] < 0.05 * losses[0]


# ---- schedulers --------------------------------------------------------------------

def lr_sequences(torch, make_ember, make_torch, epochs=25, lr=0.1):
    ep, tp = nn.Parameter(ember.ones(1)), torch.nn.Parameter(torch.ones(1))
    e_opt, t_opt = optim.SGD([ep], lr=lr), torch.optim.SGD([tp], lr=lr)
    e_sched, t_sched = make_ember(e_opt), make_torch(t_opt)
    e_lrs, t_lrs = [e_sched.get_last_lr()[0]], [t_sched.get_last_lr()[0]]
    for _ in range(epochs):
        e_opt.step()
        t_opt.step()
        e_sched.step()
        t_sched.step()
        e_lrs.append(e_sched.get_last_lr()[0])
        t_lrs.append(t_sched.get_last_lr()[0])
        assert e_opt.param_groups[0]["lr"] == e_lrs[-1]
    return e_lrs, t_lrs, e_sched, t_sched


@pytest.mark.parametrize("step_size,gamma", [(3, 0.5), (1, 0.9)])
def test_step_lr_matches_torch(torch, step_size, gamma):
    e_lrs, t_lrs, e_sched, t_sched = lr_sequences(
        torch, lambda o: lr_scheduler.StepLR(o, step_size, gamma),
        lambda o: torch.optim.lr_scheduler.StepLR(o, step_size, gamma))
    assert e_lrs == pytest.approx(t_lrs, rel=1e-14)
    assert e_sched.state_dict().keys() == t_sched.state_dict().keys()


@pytest.mark.parametrize("T_max,eta_min", [(10, 0.0), (7, 0.01)])
def test_cosine_annealing_matches_torch(torch, T_max, eta_min):
    e_lrs, t_lrs, e_sched, t_sched = lr_sequences(
        torch, lambda o: lr_scheduler.CosineAnnealingLR(o, T_max, eta_min),
        lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max, eta_min), epochs=30)
    assert e_lrs == pytest.approx(t_lrs, rel=1e-12, abs=1e-15)
    assert e_sched.state_dict().keys() == t_sched.state_dict().keys()
    assert e_sched.state_dict()["_last_lr"] == pytest.approx(t_sched.state_dict()["_last_lr"])


def test_scheduler_closed_form_and_resume(torch):
    p = nn.Parameter(ember.ones(1))
    opt = optim.SGD([p], lr=1.0)
    sched = lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    opt.step()  # (no gradient: a no-op) before the scheduler, as it should be
    with pytest.warns(UserWarning, match="The epoch parameter in `scheduler.step\\(\\)`"):
        sched.step(5)
    assert sched.get_last_lr() == [0.25]
    resumed = lr_scheduler.StepLR(opt, step_size=2, gamma=0.5, last_epoch=5)
    assert resumed.base_lrs == [1.0]
    with pytest.raises(KeyError, match="param 'initial_lr' is not specified in param_groups\\[0\\]"):
        lr_scheduler.StepLR(optim.SGD([p], lr=1.0), 2, last_epoch=3)
    state = sched.state_dict()
    other = lr_scheduler.StepLR(optim.SGD([nn.Parameter(ember.ones(1))], lr=1.0), 9)
    other.load_state_dict(state)
    assert other.step_size == 2 and other.last_epoch == 5
    with pytest.raises(TypeError, match="list is not an Optimizer"):
        lr_scheduler.StepLR([], 1)


def test_scheduler_warnings_match_torch(torch):
    def record(make_opt, make_sched):
        opt = make_opt()
        sched = make_sched(opt)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sched.step()       # before any optimizer.step()
            sched.get_lr()     # outside step()
        return [str(w.message) for w in caught]

    got = record(lambda: optim.SGD([nn.Parameter(ember.ones(1))], lr=1.0),
                 lambda o: lr_scheduler.CosineAnnealingLR(o, 4))
    want = record(lambda: torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=1.0),
                  lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, 4))
    assert got == want and len(got) == 2
    assert math.isclose(0.5 * (1 + math.cos(math.pi / 4)), 0.8535533905932737)


def test_module_and_optimizer_state_survive_ember_save():
    """A checkpoint (model and optimizer state) through ember.save/load
    resumes to the same parameters as training straight on."""
    if not hasattr(ember, "save"):
        pytest.skip("ember.save is not available")
    import os
    import tempfile

    def make():
        model = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4))
        return model, optim.AdamW(model.parameters(), lr=0.1)

    def train(model, opt, seed):
        rng = np.random.default_rng(seed)
        for p in model.parameters():
            p.grad = ember.from_numpy(rng.standard_normal(tuple(p.shape)).astype(np.float32))
        opt.step()

    model, opt = make()
    train(model, opt, 0)
    resumed_model, resumed_opt = make()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "checkpoint.safetensors")
        ember.save({"model": model.state_dict(), "optim": opt.state_dict()}, path)
        checkpoint = ember.load(path)
    resumed_model.load_state_dict(checkpoint["model"])
    resumed_opt.load_state_dict(checkpoint["optim"])
    train(model, opt, 1)
    train(resumed_model, resumed_opt, 1)
    for p, q in zip(model.parameters(), resumed_model.parameters()):
        np.testing.assert_array_equal(to_numpy(p), to_numpy(q))
