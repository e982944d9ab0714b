"""Adamax: Adam with the infinity norm in place of the second moment."""

import ember

from .adam import _check_adam_args
from .optimizer import Optimizer, _lerp_, _scalar_state, _use_grad

__all__ = ["Adamax"]


class Adamax(Optimizer):
    """PyTorch's Adamax; the update at step t (per parameter p, gradient g):

        g = -g if maximize;  g = g + weight_decay * p
        m = beta1 * m + (1 - beta1) * g                      (exp_avg)
        u = max(beta2 * u, |g| + eps)                        (exp_inf)
        p = p - lr / (1 - beta1**t) * m / u

    foreach=True runs the same per-tensor loop.
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=0, foreach=None, *, maximize=False,
                 differentiable=False, capturable=False):
        _check_adam_args(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize,
                        differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("maximize", False)

    def _init_state(self, param):
        state = self.state[param]
        if len(state) == 0:
            state["step"] = _scalar_state(0.0)
            state["exp_avg"] = ember.zeros_like(param)
            state["exp_inf"] = ember.zeros_like(param)
        return state

    @_use_grad
    def step(self):
        self._step_each_param()

    def _update(self, param, group):
        state = self._init_state(param)
        beta1, beta2 = group["betas"]
        grad = -param.grad if group["maximize"] else param.grad
        state["step"].add_(1)
        if group["weight_decay"] != 0:
            grad = grad.add(param, alpha=group["weight_decay"])
        exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
        _lerp_(exp_avg, grad, 1 - beta1)
        ember.maximum(exp_inf.mul_(beta2), grad.abs().add_(group["eps"]), out=exp_inf)
        clr = group["lr"] / (1 - beta1 ** state["step"].item())
        param.add_(exp_avg / exp_inf, alpha=-clr)
