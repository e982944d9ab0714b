"""Adamax: Adam with the infinity norm in place of the second moment."""

import ember

from .adam import _check_adam_args
from .optimizer import _lerp_, _PerParameterOptimizer, _update_gradient

__all__ = ["Adamax"]


class Adamax(_PerParameterOptimizer):
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

    def _update(self, param, group):
        state = self._lazy_state(param, ["exp_avg", "exp_inf"])
        beta1, beta2 = group["betas"]
        state["step"].add_(1)
        grad = _update_gradient(param, group)
        exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
        _lerp_(exp_avg, grad, 1 - beta1)
        ember.maximum(exp_inf.mul_(beta2), grad.abs().add_(group["eps"]), out=exp_inf)
        clr = group["lr"] / (1 - beta1 ** state["step"].item())
        param.add_(exp_avg / exp_inf, alpha=-clr)
