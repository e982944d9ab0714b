"""Adam's one-pass kernel (c/th/THOptim.c, Note [One pass per parameter])
against the op-by-op update it replaces: the same bits for every option,
both float dtypes, special values; the fallback for what the kernel does
not take; and the private entry point's argument handling.
"""

import itertools

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.optim as optim
from ember.optim.adam import Adam

SPECIALS = [0.0, -0.0, 1e-30, -1e-30, 3e4, -7.5, 1.0]


def make_params(dtype, seed):
    rng = np.random.default_rng(seed)
    values = [rng.standard_normal((37, 5)), rng.standard_normal(70001)]  # one runs threaded
    values[0].flat[:len(SPECIALS)] = SPECIALS
    return [nn.Parameter(ember.tensor(v, dtype=dtype)) for v in values]


def train(params, make_optimizer, one_pass, seed, steps=4):
    opt = make_optimizer(params)
    if not one_pass:
        opt._one_pass = lambda *args: False
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        for p in params:
            grad = rng.standard_normal(tuple(p.shape))
            grad.flat[:len(SPECIALS)] = SPECIALS[::-1]
            p.grad = ember.tensor(grad, dtype=p.dtype)
        opt.step()
    return opt


def assert_same_bits(a, b):
    a, b = a.detach().numpy(), b.detach().numpy()
    assert a.dtype == b.dtype
    np.testing.assert_array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}"))


OPTIONS = [dict(amsgrad=amsgrad, maximize=maximize, weight_decay=wd,
                decoupled_weight_decay=decoupled, betas=betas)
           for amsgrad, maximize, (wd, decoupled), betas in itertools.product(
               [False, True], [False, True], [(0, False), (0.1, False), (0.1, True)],
               [(0.9, 0.999), (0.3, 0.5)])]  # beta1 0.3: lerp from the far end


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
@pytest.mark.parametrize("options", OPTIONS, ids=repr)
def test_one_pass_gives_the_op_by_op_bits(dtype, options):
    def make(params):
        return Adam(params, lr=0.01, eps=1e-6, **options)

    fused, plain = make_params(dtype, 0), make_params(dtype, 0)
    fused_opt = train(fused, make, one_pass=True, seed=1)
    plain_opt = train(plain, make, one_pass=False, seed=1)
    for p, q in zip(fused, plain):
        assert_same_bits(p, q)
        for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"):
            if key in plain_opt.state[q]:
                assert_same_bits(fused_opt.state[p][key], plain_opt.state[q][key])


def test_adamw_takes_the_one_pass_kernel_and_bumps_versions(monkeypatch):
    calls = []
    real = ember._C._adam_step_
    monkeypatch.setattr(ember._C, "_adam_step_", lambda *args: calls.append(real(*args)) or calls[-1])
    p = nn.Parameter(ember.randn(10))
    opt = optim.AdamW([p], lr=0.1)
    p.grad = ember.randn(10)
    versions = p._version
    opt.step()
    assert calls == [True]
    assert p._version > versions
    assert opt.state[p]["exp_avg"]._version > 0


def test_what_the_kernel_does_not_take_falls_back():
    base = ember.randn(6, 4)
    for dtype, make in [(ember.float32, lambda t: t.t()),            # not contiguous
                        (ember.float16, lambda t: t)]:                # not float32/64
        strided = nn.Parameter(make(base.clone().to(dtype)))
        reference = nn.Parameter(make(base.clone().to(dtype)).contiguous())
        opts = [optim.Adam([strided], lr=0.1), optim.Adam([reference], lr=0.1)]
        opts[1]._one_pass = lambda *args: False
        for _ in range(2):
            grad = ember.randn(*strided.shape).to(dtype)
            strided.grad, reference.grad = grad.clone(), grad.clone()
            for opt in opts:
                opt.step()
        assert_same_bits(strided.contiguous(), reference)


def test_a_tensor_learning_rate_runs_op_by_op():
    p, q = nn.Parameter(ember.ones(5)), nn.Parameter(ember.ones(5))
    a = optim.Adam([p], lr=ember.tensor(0.1))
    b = optim.Adam([q], lr=0.1)
    p.grad, q.grad = ember.full((5,), 2.0), ember.full((5,), 2.0)
    a.step()
    b.step()
    np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-6)


def entry_args(param, grad=None, exp_avg=None, exp_avg_sq=None, max_exp_avg_sq=None,
               amsgrad=False):
    grad = ember.ones_like(param) if grad is None else grad
    exp_avg = ember.zeros_like(param) if exp_avg is None else exp_avg
    exp_avg_sq = ember.zeros_like(param) if exp_avg_sq is None else exp_avg_sq
    # step 1 with lr 0.1: step_size lr / (1 - 0.9), and the update is -lr * sign(grad)
    return [param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, 0.1, 0.0, False, 0.9, 0.999,
            1e-8, 0.1 / (1 - 0.9), (1 - 0.999) ** 0.5, amsgrad, False]


def test_entry_point_says_false_for_mismatched_operands():
    p = ember.zeros(4)
    before = p.clone()
    assert not ember._C._adam_step_(*entry_args(p, grad=ember.ones(5)))
    assert not ember._C._adam_step_(*entry_args(p, grad=ember.ones(4, dtype=ember.float64)))
    assert not ember._C._adam_step_(*entry_args(p, amsgrad=True))  # no max_exp_avg_sq
    assert not ember._C._adam_step_(*entry_args(p, max_exp_avg_sq=ember.zeros(4)))
    assert_same_bits(p, before)
    assert ember._C._adam_step_(*entry_args(p))
    assert p.tolist() == pytest.approx([-0.1] * 4, rel=1e-5)


def test_entry_point_argument_errors():
    args = entry_args(ember.zeros(3))
    with pytest.raises(TypeError, match=r"takes 15 arguments \(14 given\)"):
        ember._C._adam_step_(*args[:-1])
    with pytest.raises(TypeError, match="argument 2 must be Tensor, not list"):
        ember._C._adam_step_(args[0], [1.0], *args[2:])
    with pytest.raises(TypeError, match="must be real number, not str"):
        ember._C._adam_step_(*args[:5], "0.1", *args[6:])


def test_a_number_that_rebinds_the_parameter_is_read_before_the_tensors():
    """__float__ runs Python before any tensor is taken; the kernel then
    updates the tensors the call was given (pinned), never freed memory."""
    param = ember.zeros(1000)
    original = param.data

    class Rebinding:
        def __float__(self):
            param.data = ember.zeros(3)
            return 0.1

    args = entry_args(param)
    args[5] = Rebinding()
    assert ember._C._adam_step_(*args)
    assert param.shape == (3,)
    assert original.tolist() == pytest.approx([-0.1] * 1000, rel=1e-5)
