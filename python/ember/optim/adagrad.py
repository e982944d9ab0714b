"""Adagrad: divide by the root of the sum of all squared gradients."""

import ember

from .optimizer import _check_fused, _check_lr, _PerParameterOptimizer, _scalar_state, _update_gradient

__all__ = ["Adagrad"]


class Adagrad(_PerParameterOptimizer):
    """PyTorch's Adagrad; the update at step t (per parameter p, gradient g):

        g = -g if maximize;  g = g + weight_decay * p
        clr = lr / (1 + (t - 1) * lr_decay)
        sum = sum + g * g               (sum starts at initial_accumulator_value)
        p = p - clr * g / (sqrt(sum) + eps)

    Dense gradients only.  foreach=True runs the same per-tensor loop; fused
    is accepted for the signature and state layout and runs it too.
    """

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0,
                 initial_accumulator_value=0, eps=1e-10, foreach=None, *,
                 maximize=False, differentiable=False, fused=None):
        _check_lr(lr)
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(
                f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value,
                        foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        _check_fused(fused, foreach, differentiable)
        # Unlike the others, Adagrad's state exists from construction on
        # (parameters of groups added later get theirs at their first step).
        for group in self.param_groups:
            for param in group["params"]:
                self._init_state(param, group)

    def _init_state(self, param, group):
        state = self.state[param]
        if len(state) == 0:
            state["step"] = _scalar_state(0.0)
            state["sum"] = ember.full_like(param, group["initial_accumulator_value"])
        return state

    def _update(self, param, group):
        state = self._init_state(param, group)
        state["step"].add_(1)
        step = state["step"].item()
        grad = _update_gradient(param, group)
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        state_sum = state["sum"]
        state_sum.add_(grad * grad)
        std = state_sum.sqrt().add_(group["eps"])
        param.add_(grad / std, alpha=-clr)
