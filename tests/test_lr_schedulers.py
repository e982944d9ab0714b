"""The learning-rate schedulers against torch.optim.lr_scheduler: the same
optimizers and schedules must give the same lrs (and cycled momenta) after
every step, the same state_dict keys, round trips that continue
identically, and PyTorch's argument errors.  Tests that need torch take
the `torch` fixture; the closed-form checks at the end run without it.
"""

import inspect
import math
import re

import pytest

import ember
import ember.nn as nn
import ember.optim as optim
from ember.optim import lr_scheduler


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def ember_optimizer(kind="SGD"):
    """Two param groups with different lrs (no gradients: steps only
    mark the optimizer as stepped)."""
    groups = [{"params": [nn.Parameter(ember.zeros(2))]},
              {"params": [nn.Parameter(ember.zeros(3))], "lr": 0.5}]
    if kind == "SGD":
        return optim.SGD(groups, lr=0.1, momentum=0.9)
    return getattr(optim, kind)(groups, lr=0.1)


def torch_optimizer(torch, kind="SGD"):
    groups = [{"params": [torch.nn.Parameter(torch.zeros(2))]},
              {"params": [torch.nn.Parameter(torch.zeros(3))], "lr": 0.5}]
    if kind == "SGD":
        return torch.optim.SGD(groups, lr=0.1, momentum=0.9)
    return getattr(torch.optim, kind)(groups, lr=0.1)


def hyper_parameters(optimizer):
    """What a scheduler may change: lr, momentum, beta1 of every group, flat
    (-1 for a hyper-parameter the optimizer does not have)."""
    return [value for group in optimizer.param_groups
            for value in (group["lr"], group.get("momentum", -1), group.get("betas", (-1,))[0])]


def run(optimizer, scheduler, steps):
    """The lrs and momenta, then get_last_lr(), after construction and every step."""
    record = [hyper_parameters(optimizer) + scheduler.get_last_lr()]
    for _ in range(steps):
        optimizer.step()
        scheduler.step()
        record.append(hyper_parameters(optimizer) + scheduler.get_last_lr())
    return record


def both(torch, make, kind="SGD"):
    """(ember's optimizer and scheduler, torch's): make(lr_scheduler module, optimizer)."""
    e_opt, t_opt = ember_optimizer(kind), torch_optimizer(torch, kind)
    return (e_opt, make(lr_scheduler, e_opt)), (t_opt, make(torch.optim.lr_scheduler, t_opt))


class Power:
    """A callable object (its __dict__ goes into LambdaLR's state_dict)."""

    def __init__(self, base):
        self.base = base

    def __call__(self, epoch):
        return self.base**epoch


SCHEDULES = {
    "LambdaLR": lambda m, o: m.LambdaLR(o, lambda e: 0.95**e),
    "LambdaLR-per-group": lambda m, o: m.LambdaLR(o, [lambda e: 1 / (1 + e), Power(0.9)]),
    "MultiplicativeLR": lambda m, o: m.MultiplicativeLR(o, lambda e: 0.9 if e % 2 else 0.97),
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, [3, 7, 7, 12], gamma=0.5),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, 0.9),
    "LinearLR": lambda m, o: m.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=8),
    "LinearLR-decay": lambda m, o: m.LinearLR(o, start_factor=1.0, end_factor=0.1),
    "ConstantLR": lambda m, o: m.ConstantLR(o, factor=0.5, total_iters=4),
    "OneCycleLR-cos": lambda m, o: m.OneCycleLR(o, max_lr=1.0, total_steps=31),
    "OneCycleLR-linear": lambda m, o: m.OneCycleLR(o, max_lr=[1.0, 2.0], total_steps=31,
                                                   anneal_strategy="linear", pct_start=0.2),
    "OneCycleLR-three-phase": lambda m, o: m.OneCycleLR(o, max_lr=1.0, epochs=4,
                                                        steps_per_epoch=8, three_phase=True,
                                                        div_factor=10.0),
    "OneCycleLR-no-momentum": lambda m, o: m.OneCycleLR(o, max_lr=1.0, total_steps=40,
                                                        cycle_momentum=False),
    "CyclicLR-triangular": lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1,
                                                   step_size_up=4),
    "CyclicLR-triangular2": lambda m, o: m.CyclicLR(o, base_lr=[0.01, 0.02], max_lr=0.1,
                                                    step_size_up=3, step_size_down=5,
                                                    mode="triangular2"),
    "CyclicLR-exp-range": lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=5,
                                                  mode="exp_range", gamma=0.95,
                                                  base_momentum=0.7, max_momentum=0.95),
    "CyclicLR-scale-fn": lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=3,
                                                 scale_fn=Power(0.97), scale_mode="iterations",
                                                 cycle_momentum=False),
    "CosineAnnealingWarmRestarts": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=5),
    "CosineAnnealingWarmRestarts-mult": lambda m, o: m.CosineAnnealingWarmRestarts(
        o, T_0=3, T_mult=2, eta_min=0.01),
    "SequentialLR": lambda m, o: m.SequentialLR(
        o, [m.LinearLR(o, start_factor=0.1, total_iters=5), m.ExponentialLR(o, 0.9)],
        milestones=[5]),
    "SequentialLR-three": lambda m, o: m.SequentialLR(
        o, [m.ConstantLR(o, factor=0.5, total_iters=3), m.StepLR(o, 4, 0.5),
            m.CosineAnnealingLR(o, T_max=6)], milestones=[6, 14]),
    "ChainedScheduler": lambda m, o: m.ChainedScheduler(
        [m.ConstantLR(o, factor=0.5, total_iters=6), m.ExponentialLR(o, 0.9)]),
    "ChainedScheduler-optimizer": lambda m, o: m.ChainedScheduler(
        [m.LinearLR(o, start_factor=0.2, total_iters=10), m.MultiStepLR(o, [4, 9])],
        optimizer=o),
}


def assert_records_equal(got, want):
    assert len(got) == len(want)
    for step, (g, w) in enumerate(zip(got, want)):
        assert g == pytest.approx(w, rel=1e-12, abs=1e-15), f"step {step}"


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedule_matches_torch(torch, name):
    (e_opt, e_sched), (t_opt, t_sched) = both(torch, SCHEDULES[name])
    assert_records_equal(run(e_opt, e_sched, 30), run(t_opt, t_sched, 30))


@pytest.mark.parametrize("name", [n for n in lr_scheduler.__all__ if n != "LRScheduler"])
def test_constructor_signature_matches_torch(torch, name):
    def signature(function):
        return [(p.name, p.kind, p.default)
                for p in inspect.signature(function).parameters.values()]

    assert signature(getattr(lr_scheduler, name)) == signature(
        getattr(torch.optim.lr_scheduler, name))


@pytest.mark.parametrize("name", ["OneCycleLR-cos", "OneCycleLR-three-phase",
                                  "CyclicLR-exp-range"])
def test_momentum_cycling_of_beta1_matches_torch(torch, name):
    (e_opt, e_sched), (t_opt, t_sched) = both(torch, SCHEDULES[name], kind="Adam")
    assert_records_equal(run(e_opt, e_sched, 30), run(t_opt, t_sched, 30))
    assert e_opt.param_groups[0]["betas"][1] == 0.999


def comparable(state):
    """A scheduler state_dict with the nested schedulers' states opened up."""
    state = dict(state)
    if "_schedulers" in state:
        state["_schedulers"] = [comparable(s) for s in state["_schedulers"]]
    return state


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_state_dict_round_trip_continues_like_torch(torch, name):
    """12 steps; a fresh optimizer and scheduler load both state dicts and
    take 10 more steps: the same lrs as torch's scheduler going on."""
    make = SCHEDULES[name]
    (e_opt, e_sched), (t_opt, t_sched) = both(torch, make)
    run(e_opt, e_sched, 12)
    run(t_opt, t_sched, 12)
    e_state, t_state = comparable(e_sched.state_dict()), comparable(t_sched.state_dict())
    assert sorted(e_state) == sorted(t_state)
    for key in ("lr_lambdas", "_scale_fn_custom"):
        assert e_state.get(key) == t_state.get(key)

    resumed_opt = ember_optimizer()
    resumed_sched = make(lr_scheduler, resumed_opt)
    resumed_opt.load_state_dict(e_opt.state_dict())
    resumed_sched.load_state_dict(e_sched.state_dict())
    got = run(resumed_opt, resumed_sched, 10)[1:]
    assert_records_equal(got, run(t_opt, t_sched, 10)[1:])


@pytest.mark.parametrize("name", ["MultiStepLR", "OneCycleLR-three-phase", "CyclicLR-exp-range",
                                  "SequentialLR-three"])
def test_state_dict_survives_ember_save(tmp_path, name):
    """Saved with ember.save and loaded into a fresh scheduler, the state
    continues the schedule exactly (MultiStepLR's closed form included)."""
    make = SCHEDULES[name]
    opt = ember_optimizer()
    sched = make(lr_scheduler, opt)
    run(opt, sched, 9)
    ember.save({"optim": opt.state_dict(), "sched": sched.state_dict()},
               str(tmp_path / "checkpoint.safetensors"))
    checkpoint = ember.load(str(tmp_path / "checkpoint.safetensors"))
    resumed_opt = ember_optimizer()
    resumed = make(lr_scheduler, resumed_opt)
    resumed_opt.load_state_dict(checkpoint["optim"])
    resumed.load_state_dict(checkpoint["sched"])
    assert run(resumed_opt, resumed, 8) == run(opt, sched, 8)
    if name == "MultiStepLR":
        with pytest.warns(UserWarning):
            resumed.step(20)  # the closed form
        assert resumed.get_last_lr() == pytest.approx([0.1 * 0.5**4, 0.5 * 0.5**4])


def test_lambda_state_dict_restores_callable_objects_only(torch):
    (e_opt, e_sched), (t_opt, t_sched) = both(torch, SCHEDULES["LambdaLR-per-group"])
    state = e_sched.state_dict()
    assert state["lr_lambdas"] == [None, {"base": 0.9}] == t_sched.state_dict()["lr_lambdas"]
    other_opt = ember_optimizer()
    other = lr_scheduler.LambdaLR(other_opt, [lambda e: 1.0, Power(0.5)])
    other.load_state_dict(state)
    assert other.lr_lambdas[1].base == 0.9
    assert other.lr_lambdas[0](3) == 1.0  # a plain function is kept, not replaced


PLATEAU_METRICS = [5.0, 4.0, 4.0, 3.9999, 3.99995, 4.1, 3.0, 3.0, 3.0, 3.0, 2.999, 3.5,
                   3.5, 3.5, 3.5, 3.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5]


@pytest.mark.parametrize("mode", ["min", "max"])
@pytest.mark.parametrize("threshold_mode", ["rel", "abs"])
@pytest.mark.parametrize("options", [dict(patience=1), dict(patience=2, cooldown=2,
                                                             factor=0.5, threshold=0.01),
                                     dict(patience=0, min_lr=[0.02, 0.3]),
                                     dict(patience=0, factor=0.9, eps=0.02)])
def test_reduce_lr_on_plateau_matches_torch(torch, mode, threshold_mode, options):
    sign = 1 if mode == "min" else -1

    def make(module, opt):
        return module.ReduceLROnPlateau(opt, mode=mode, threshold_mode=threshold_mode,
                                        **options)

    (e_opt, e_sched), (t_opt, t_sched) = both(torch, make)
    for metric in PLATEAU_METRICS:
        e_sched.step(ember.tensor(sign * metric, dtype=ember.float64))  # a loss tensor
        t_sched.step(torch.tensor(sign * metric, dtype=torch.float64))
        assert hyper_parameters(e_opt) == pytest.approx(hyper_parameters(t_opt), rel=1e-12)
        assert e_sched.get_last_lr() == pytest.approx(t_sched.get_last_lr(), rel=1e-12)
        e_state, t_state = e_sched.state_dict(), t_sched.state_dict()
        assert e_state.keys() == t_state.keys()
        for key, value in t_state.items():
            numeric = isinstance(value, (int, float, list)) and not isinstance(value, bool)
            assert e_state[key] == (pytest.approx(value, rel=1e-12) if numeric else value), key

    resumed_opt = ember_optimizer()
    resumed = make(lr_scheduler, resumed_opt)
    resumed_opt.load_state_dict(e_opt.state_dict())
    resumed.load_state_dict(e_sched.state_dict())
    for metric in [0.5, 0.5, 0.5, 0.4]:
        resumed.step(sign * metric)
        t_sched.step(sign * metric)
        assert resumed.get_last_lr() == pytest.approx(t_sched.get_last_lr(), rel=1e-12)


def test_reduce_lr_on_plateau_needs_min_lrs_for_new_groups(torch):
    opt = ember_optimizer()
    sched = lr_scheduler.ReduceLROnPlateau(opt, patience=0, min_lr=[0.0, 0.0])
    opt.add_param_group({"params": [nn.Parameter(ember.zeros(1))]})
    t_opt = torch_optimizer(torch)
    t_sched = torch.optim.lr_scheduler.ReduceLROnPlateau(t_opt, patience=0, min_lr=[0.0, 0.0])
    t_opt.add_param_group({"params": [torch.nn.Parameter(torch.zeros(1))]})
    for s in (sched, t_sched):
        s.step(1.0)
    with pytest.raises(RuntimeError) as expected:
        t_sched.step(2.0)
    with pytest.raises(RuntimeError, match=re.escape(str(expected.value))):
        sched.step(2.0)


BAD_ARGUMENTS = {
    "ConstantLR": lambda m, o: m.ConstantLR(o, factor=1.5),
    "LinearLR-start": lambda m, o: m.LinearLR(o, start_factor=0),
    "LinearLR-end": lambda m, o: m.LinearLR(o, end_factor=1.5),
    "LambdaLR-count": lambda m, o: m.LambdaLR(o, [lambda e: 1.0]),
    "OneCycleLR-steps": lambda m, o: m.OneCycleLR(o, max_lr=1.0),
    "OneCycleLR-total": lambda m, o: m.OneCycleLR(o, max_lr=1.0, total_steps=0),
    "OneCycleLR-epochs": lambda m, o: m.OneCycleLR(o, max_lr=1.0, epochs=0, steps_per_epoch=2),
    "OneCycleLR-pct": lambda m, o: m.OneCycleLR(o, max_lr=1.0, total_steps=5, pct_start=1.5),
    "OneCycleLR-anneal": lambda m, o: m.OneCycleLR(o, max_lr=1.0, total_steps=5,
                                                   anneal_strategy="step"),
    "OneCycleLR-max-lr": lambda m, o: m.OneCycleLR(o, max_lr=[1.0], total_steps=5),
    "CyclicLR-mode": lambda m, o: m.CyclicLR(o, 0.1, 1.0, mode="square"),
    "WarmRestarts-T0": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=0),
    "WarmRestarts-Tmult": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=0),
    "Plateau-factor": lambda m, o: m.ReduceLROnPlateau(o, factor=1.0),
    "Plateau-mode": lambda m, o: m.ReduceLROnPlateau(o, mode="up"),
    "Plateau-threshold-mode": lambda m, o: m.ReduceLROnPlateau(o, threshold_mode="log"),
    "Plateau-min-lrs": lambda m, o: m.ReduceLROnPlateau(o, min_lr=[0.1]),
    "SequentialLR-milestones": lambda m, o: m.SequentialLR(o, [m.ExponentialLR(o, 0.9)], [3]),
    "SequentialLR-empty": lambda m, o: m.SequentialLR(o, [], []),
    "SequentialLR-plateau": lambda m, o: m.SequentialLR(
        o, [m.ExponentialLR(o, 0.9), m.ReduceLROnPlateau(o)], [3]),
    "ChainedScheduler-empty": lambda m, o: m.ChainedScheduler([]),
}


@pytest.mark.parametrize("name", sorted(BAD_ARGUMENTS))
def test_argument_errors_match_torch(torch, name):
    make = BAD_ARGUMENTS[name]
    with pytest.raises((ValueError, TypeError)) as expected:
        make(torch.optim.lr_scheduler, torch_optimizer(torch))
    with pytest.raises(expected.type, match="^" + re.escape(str(expected.value)) + "$"):
        make(lr_scheduler, ember_optimizer())


@pytest.mark.parametrize("make", [
    lambda m, o: m.MultiplicativeLR(o, 0.9),
    lambda m, o: m.OneCycleLR(o, max_lr=1.0, total_steps=5),
    lambda m, o: m.CyclicLR(o, 0.1, 1.0),
], ids=["MultiplicativeLR-not-callable", "OneCycleLR-no-momentum", "CyclicLR-no-momentum"])
def test_errors_with_adagrad_match_torch(torch, make):
    with pytest.raises((ValueError, TypeError)) as expected:
        make(torch.optim.lr_scheduler, torch_optimizer(torch, "Adagrad"))
    with pytest.raises(expected.type, match="^" + re.escape(str(expected.value)) + "$"):
        make(lr_scheduler, ember_optimizer("Adagrad"))


def test_one_cycle_refuses_steps_past_the_end(torch):
    for module, opt in ((lr_scheduler, ember_optimizer()),
                        (torch.optim.lr_scheduler, torch_optimizer(torch))):
        sched = module.OneCycleLR(opt, max_lr=1.0, total_steps=3)
        for _ in range(3):
            opt.step()
            sched.step()
        with pytest.raises(ValueError, match="Tried to step 4 times. The specified number "
                                             "of total steps is 3"):
            sched.step()


def test_warm_restarts_fractional_epochs_match_torch(torch):
    (e_opt, e_sched), (t_opt, t_sched) = both(torch, SCHEDULES["CosineAnnealingWarmRestarts-mult"])
    for epoch in [0.5, 1.25, 2.9, 3.0, 7.5, 9.0, 20.2, 4.0]:
        e_sched.step(epoch)
        t_sched.step(epoch)
        assert e_sched.get_last_lr() == pytest.approx(t_sched.get_last_lr(), rel=1e-12)
        assert (e_sched.T_cur, e_sched.T_i, e_sched.last_epoch) == pytest.approx(
            (t_sched.T_cur, t_sched.T_i, t_sched.last_epoch))


# ---- without torch -------------------------------------------------------------

def test_exponential_and_multistep_closed_forms():
    opt = ember_optimizer()
    exponential = lr_scheduler.ExponentialLR(opt, 0.5)
    for epoch in range(1, 6):
        opt.step()
        exponential.step()
        assert exponential.get_last_lr() == pytest.approx([0.1 * 0.5**epoch, 0.5 * 0.5**epoch])
    opt = ember_optimizer()
    multistep = lr_scheduler.MultiStepLR(opt, [2, 4])
    lrs = []
    for _ in range(5):
        opt.step()
        multistep.step()
        lrs.append(multistep.get_last_lr()[0])
    assert lrs == pytest.approx([0.1, 0.01, 0.01, 0.001, 0.001])


def test_one_cycle_peaks_at_pct_start_and_moves_momentum_against_the_lr():
    opt = ember_optimizer()
    sched = lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=22, pct_start=0.5)
    assert opt.param_groups[0]["lr"] == pytest.approx(1.0 / 25)
    assert opt.param_groups[0]["momentum"] == pytest.approx(0.95)
    for _ in range(10):
        opt.step()
        sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(1.0)  # end of phase 1: step 0.5 * 22 - 1
    assert opt.param_groups[0]["momentum"] == pytest.approx(0.85)
    for _ in range(11):
        opt.step()
        sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(1.0 / 25 / 1e4)
    assert opt.param_groups[0]["momentum"] == pytest.approx(0.95)


def test_reduce_lr_on_plateau_waits_patience_then_cooldown():
    opt = ember_optimizer()
    sched = lr_scheduler.ReduceLROnPlateau(opt, patience=2, cooldown=1, factor=0.5)
    lrs = []
    for metric in [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]:
        sched.step(metric)
        lrs.append(sched.get_last_lr()[0])
    assert lrs == pytest.approx([0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.025])


def test_sequential_lr_switches_at_the_milestone():
    opt = ember_optimizer()
    sched = lr_scheduler.SequentialLR(opt, [lr_scheduler.ConstantLR(opt, 0.1, total_iters=10),
                                            lr_scheduler.ExponentialLR(opt, 0.5)], [2])
    lrs = [sched.get_last_lr()[0]]
    for _ in range(4):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    assert lrs == pytest.approx([0.01, 0.01, 0.1, 0.05, 0.025])
    assert math.isclose(opt.param_groups[1]["lr"], 0.5 * 0.25)
