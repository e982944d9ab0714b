"""RAdam: Adam whose adaptive step is switched on once its variance is tractable."""

import ember

from .adam import _check_adam_args
from .optimizer import Optimizer, _lerp_, _scalar_state, _use_grad

__all__ = ["RAdam"]


class RAdam(Optimizer):
    """PyTorch's RAdam; the update at step t (per parameter p, gradient g):

        g = -g if maximize
        p = p * (1 - lr * wd)   if decoupled_weight_decay,  else g = g + wd * p
        m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g
        m_hat = m / (1 - beta1**t)
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * t * beta2**t / (1 - beta2**t)
        if rho_t > 5:
            r = sqrt((rho_t - 4) (rho_t - 2) rho_inf / ((rho_inf - 4) (rho_inf - 2) rho_t))
            p = p - lr * m_hat * r * sqrt(1 - beta2**t) / (sqrt(v) + eps)
        else:
            p = p - lr * m_hat

    foreach=True runs the same per-tensor loop.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=0, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        _check_adam_args(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("maximize", False)
            group.setdefault("decoupled_weight_decay", False)

    def _init_state(self, param):
        state = self.state[param]
        if len(state) == 0:
            state["step"] = _scalar_state(0.0)
            state["exp_avg"] = ember.zeros_like(param)
            state["exp_avg_sq"] = ember.zeros_like(param)
        return state

    @_use_grad
    def step(self):
        self._step_each_param()

    def _update(self, param, group):
        state = self._init_state(param)
        beta1, beta2 = group["betas"]
        lr, weight_decay = group["lr"], group["weight_decay"]
        grad = -param.grad if group["maximize"] else param.grad
        state["step"].add_(1)
        step = state["step"].item()
        if weight_decay != 0:
            if group["decoupled_weight_decay"]:
                param.mul_(1 - lr * weight_decay)
            else:
                grad = grad.add(param, alpha=weight_decay)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        _lerp_(exp_avg, grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).add_(grad * grad, alpha=1 - beta2)
        bias_correction2 = 1 - beta2**step
        step_direction = exp_avg / (1 - beta1**step) * lr
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * beta2**step / bias_correction2
        if rho_t > 5.0:
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                    / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            adaptive_lr = bias_correction2**0.5 / exp_avg_sq.sqrt().add_(group["eps"])
            step_direction = step_direction * adaptive_lr * rect
        param.add_(step_direction, alpha=-1.0)
