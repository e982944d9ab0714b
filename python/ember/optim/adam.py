"""Adam (and, with decoupled_weight_decay, AdamW)."""

import ember

from .optimizer import _check_fused, _check_lr, _lerp_, _PerParameterOptimizer, _update_gradient

__all__ = ["Adam"]


def _check_adam_args(lr, betas, eps, weight_decay):
    _check_lr(lr)
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


class Adam(_PerParameterOptimizer):
    """PyTorch's Adam; the update at step t (per parameter p, gradient g):

        g = -g if maximize
        p = p * (1 - lr * wd)          if decoupled_weight_decay (AdamW)
        g = g + wd * p                 otherwise (L2 penalty)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        v_max = max(v_max, v)          with amsgrad, used in place of v below
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=0, amsgrad=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        _check_adam_args(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable,
                        fused=fused, decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)
        _check_fused(fused, foreach, differentiable)

    _setstate_defaults = {"amsgrad": False, "maximize": False,
                          "decoupled_weight_decay": False}

    def _update(self, param, group):
        buffers = ["exp_avg", "exp_avg_sq"] + (["max_exp_avg_sq"] if group["amsgrad"] else [])
        state = self._lazy_state(param, buffers)
        beta1, beta2 = group["betas"]
        state["step"].add_(1)
        step = state["step"].item()
        step_size = group["lr"] / (1 - beta1**step)
        bias_correction2_sqrt = (1 - beta2**step)**0.5
        if self._one_pass(param, group, state, step_size, bias_correction2_sqrt):
            return
        grad = _update_gradient(param, group)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        _lerp_(exp_avg, grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).add_(grad * grad, alpha=1 - beta2)
        if group["amsgrad"]:
            ember.maximum(state["max_exp_avg_sq"], exp_avg_sq, out=state["max_exp_avg_sq"])
            second_moment = state["max_exp_avg_sq"]
        else:
            second_moment = exp_avg_sq
        denom = second_moment.sqrt().div_(bias_correction2_sqrt).add_(group["eps"])
        # param.addcdiv_(exp_avg, denom, value=-step_size), reusing denom.
        param.add_(ember.div(exp_avg, denom, out=denom), alpha=-step_size)

    @staticmethod
    def _one_pass(param, group, state, step_size, bias_correction2_sqrt):
        """The update above in one pass over memory, the same bits (Note [One
        pass per parameter] in c/th/THOptim.h); False where the kernel does
        not take the tensors (then nothing changed)."""
        if group.get("differentiable") or isinstance(group["lr"], ember.Tensor):
            return False
        beta1, beta2 = group["betas"]
        return ember._C._adam_step_(
            param, param.grad, state["exp_avg"], state["exp_avg_sq"],
            state.get("max_exp_avg_sq"), group["lr"], group["weight_decay"],
            group["decoupled_weight_decay"], beta1, beta2, group["eps"], step_size,
            bias_correction2_sqrt, group["amsgrad"], group["maximize"])
