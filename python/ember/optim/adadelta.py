"""Adadelta: steps whose units follow from running RMS of gradient and step."""

from .optimizer import _check_lr, _PerParameterOptimizer, _update_gradient

__all__ = ["Adadelta"]


class Adadelta(_PerParameterOptimizer):
    """PyTorch's Adadelta; the update (per parameter p with gradient g):

        g = -g if maximize;  g = g + weight_decay * p
        v = rho * v + (1 - rho) * g * g                      (square_avg)
        delta = sqrt(u + eps) / sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta * delta              (acc_delta)
        p = p - lr * delta

    foreach=True runs the same per-tensor loop.
    """

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0,
                 foreach=None, *, capturable=False, maximize=False,
                 differentiable=False):
        _check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                        maximize=maximize, capturable=capturable, foreach=foreach,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _update(self, param, group):
        state = self._lazy_state(param, ["square_avg", "acc_delta"])
        rho, eps = group["rho"], group["eps"]
        state["step"].add_(1)
        grad = _update_gradient(param, group)
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        square_avg.mul_(rho).add_(grad * grad, alpha=1 - rho)
        std = square_avg.add(eps).sqrt_()
        delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
        acc_delta.mul_(rho).add_(delta * delta, alpha=1 - rho)
        param.add_(delta, alpha=-group["lr"])
