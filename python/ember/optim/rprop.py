"""Rprop: resilient backpropagation, a per-weight step size driven by the
sign of the gradient alone."""

import ember

from .optimizer import _check_lr, _PerParameterOptimizer

__all__ = ["Rprop"]


class Rprop(_PerParameterOptimizer):
    """PyTorch's Rprop; per parameter p with gradient g (-g if maximize),
    the previous gradient `prev` and the step sizes `step_size` (lr at
    first), element by element:

        g * prev > 0:  step_size *= etaplus        (same sign: speed up)
        g * prev < 0:  step_size *= etaminus, g = 0 (sign flip: slow down,
                                                     and skip this step)
        g * prev = 0:  step_size unchanged
        step_size clamped to step_sizes = (min, max)
        p = p - sign(g) * step_size;  prev = g

    foreach=True runs the same per-tensor loop.
    """

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach,
                        maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def _update(self, param, group):
        grad = -param.grad if group["maximize"] else param.grad
        state = self._lazy_state(param, ["prev"])
        if "step_size" not in state:
            state["step_size"] = ember.full_like(grad, float(group["lr"]))
        etaminus, etaplus = group["etas"]
        step_size_min, step_size_max = group["step_sizes"]
        prev, step_size = state["prev"], state["step_size"]
        state["step"].add_(1)
        sign = grad.mul(prev).sign()
        factor = ember.where(sign.gt(0), ember.full_like(sign, etaplus),
                             ember.where(sign.lt(0), ember.full_like(sign, etaminus),
                                         ember.ones_like(sign)))
        step_size.mul_(factor).clamp_(step_size_min, step_size_max)
        # After a sign flip the gradient is forgotten: no step now, and the
        # next comparison starts afresh.
        grad = ember.where(factor.eq(etaminus), ember.zeros_like(grad), grad)
        param.addcmul_(grad.sign(), step_size, value=-1)
        prev.copy_(grad)
