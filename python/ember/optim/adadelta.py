"""Adadelta: steps whose units follow from running RMS of gradient and step."""

import ember

from .optimizer import Optimizer, _check_lr, _scalar_state, _use_grad

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
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

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("maximize", False)

    def _init_state(self, param):
        state = self.state[param]
        if len(state) == 0:
            state["step"] = _scalar_state(0.0)
            state["square_avg"] = ember.zeros_like(param)
            state["acc_delta"] = ember.zeros_like(param)
        return state

    @_use_grad
    def step(self):
        self._step_each_param()

    def _update(self, param, group):
        state = self._init_state(param)
        rho, eps = group["rho"], group["eps"]
        grad = -param.grad if group["maximize"] else param.grad
        state["step"].add_(1)
        if group["weight_decay"] != 0:
            grad = grad.add(param, alpha=group["weight_decay"])
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        square_avg.mul_(rho).add_(grad * grad, alpha=1 - rho)
        std = square_avg.add(eps).sqrt_()
        delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
        acc_delta.mul_(rho).add_(delta * delta, alpha=1 - rho)
        param.add_(delta, alpha=-group["lr"])
