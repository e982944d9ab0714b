"""NAdam: Adam with Nesterov momentum and a momentum-decay schedule."""

from .adam import _check_adam_args
from .optimizer import _lerp_, _PerParameterOptimizer, _update_gradient

__all__ = ["NAdam"]


class NAdam(_PerParameterOptimizer):
    """PyTorch's NAdam; the update at step t (per parameter p, gradient g):

        g = -g if maximize
        p = p * (1 - lr * wd)   if decoupled_weight_decay,  else g = g + wd * p
        mu_t = beta1 * (1 - 0.5 * 0.96**(t * momentum_decay))
        mu_product = mu_1 * ... * mu_t                       (kept in state)
        m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g
        denom = sqrt(v / (1 - beta2**t)) + eps
        p = p - lr * (1 - mu_t) / (1 - mu_product) * g / denom
              - lr * mu_{t+1} / (1 - mu_product * mu_{t+1}) * m / denom

    foreach=True runs the same per-tensor loop.
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=0, momentum_decay=4e-3, decoupled_weight_decay=False,
                 *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        _check_adam_args(lr, betas, eps, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    _setstate_defaults = {"maximize": False, "decoupled_weight_decay": False}

    def _update(self, param, group):
        state = self._lazy_state(param, ["exp_avg", "exp_avg_sq"],
                                 scalars=[("step", 0.0), ("mu_product", 1.0)])
        beta1, beta2 = group["betas"]
        lr = group["lr"]
        state["step"].add_(1)
        step = state["step"].item()
        grad = _update_gradient(param, group)
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * group["momentum_decay"]))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * group["momentum_decay"]))
        # In the scalar dtype, so that float32 state rounds as PyTorch's does.
        mu_product = state["mu_product"].mul_(mu).item()
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        _lerp_(exp_avg, grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).add_(grad * grad, alpha=1 - beta2)
        denom = exp_avg_sq.div(1 - beta2**step).sqrt().add_(group["eps"])
        param.add_(grad / denom, alpha=-lr * (1.0 - mu) / (1.0 - mu_product))
        param.add_(exp_avg / denom, alpha=-lr * mu_next / (1.0 - mu_product * mu_next))
