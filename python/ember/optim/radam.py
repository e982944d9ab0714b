"""RAdam: Adam whose adaptive step is switched on once its variance is tractable."""

from .adam import _check_adam_args
from .optimizer import _lerp_, _PerParameterOptimizer, _update_gradient

__all__ = ["RAdam"]


class RAdam(_PerParameterOptimizer):
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

    _setstate_defaults = {"maximize": False, "decoupled_weight_decay": False}

    def _update(self, param, group):
        state = self._lazy_state(param, ["exp_avg", "exp_avg_sq"])
        beta1, beta2 = group["betas"]
        state["step"].add_(1)
        step = state["step"].item()
        grad = _update_gradient(param, group)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        _lerp_(exp_avg, grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).add_(grad * grad, alpha=1 - beta2)
        bias_correction2 = 1 - beta2**step
        step_direction = exp_avg / (1 - beta1**step) * group["lr"]
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * beta2**step / bias_correction2
        if rho_t > 5.0:
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                    / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            adaptive_lr = bias_correction2**0.5 / exp_avg_sq.sqrt().add_(group["eps"])
            step_direction = step_direction * adaptive_lr * rect
        param.add_(step_direction, alpha=-1.0)
