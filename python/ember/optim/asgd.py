"""ASGD: averaged stochastic gradient descent (Polyak-Ruppert averaging)."""

import ember

from .optimizer import _check_lr, _PerParameterOptimizer, _update_gradient

__all__ = ["ASGD"]


class ASGD(_PerParameterOptimizer):
    """PyTorch's ASGD; per parameter p with gradient g at step t:

        g = -g if maximize;  g = g + weight_decay * p
        p = p * (1 - lambd * eta) - eta * g
        ax = p if mu == 1 else ax + mu * (p - ax)       (the running average)
        eta = lr / (1 + lambd * lr * t) ** alpha
        mu = 1 / max(1, t - t0)                         (averaging starts at t0)

    eta and mu live in the state as 0-d tensors of the scalar dtype (float32
    unless the default dtype is float64), are computed through a tensor of
    the default dtype and read back from the state, as PyTorch's
    single-tensor loop does, so their rounding is the same.
    foreach=True runs the same per-tensor loop.
    """

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        _check_lr(lr)
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def _update(self, param, group):
        lr, lambd = float(group["lr"]), group["lambd"]
        state = self._lazy_state(param, ["ax"], scalars=(("step", 0.0), ("eta", lr), ("mu", 1.0)))
        grad = _update_gradient(param, group)
        state["step"].add_(1)
        eta = state["eta"].item()
        param.mul_(1 - lambd * eta)
        param.add_(grad, alpha=-eta)
        mu = state["mu"].item()
        if mu != 1:
            state["ax"].add_(param.sub(state["ax"]).mul_(mu))
        else:
            state["ax"].copy_(param)
        step = state["step"].item()
        # Through a tensor of the default dtype, as PyTorch's as_tensor: the
        # new values are rounded to float32 even where the state is float64
        # (as after load_state_dict with float64 parameters).
        state["eta"].copy_(ember.tensor(lr / ((1 + lambd * lr * step) ** group["alpha"])))
        state["mu"].copy_(ember.tensor(1 / max(1, step - group["t0"])))
