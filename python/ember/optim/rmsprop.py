"""RMSprop: scale the step by a running RMS of the gradient."""

from .optimizer import _check_lr, _lerp_, _PerParameterOptimizer, _update_gradient

__all__ = ["RMSprop"]


class RMSprop(_PerParameterOptimizer):
    """PyTorch's RMSprop; the update (per parameter p with gradient g):

        g = -g if maximize;  g = g + weight_decay * p
        v = alpha * v + (1 - alpha) * g * g                  (square_avg)
        m = m + (1 - alpha) * (g - m)                        (grad_avg, centered)
        avg = sqrt(v - m * m) if centered else sqrt(v);  avg = avg + eps
        buf = momentum * buf + g / avg;  p = p - lr * buf    (momentum > 0)
        p = p - lr * g / avg                                 (otherwise)

    foreach=True runs the same per-tensor loop.
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0,
                 momentum=0, centered=False, capturable=False, foreach=None,
                 maximize=False, differentiable=False):
        _check_lr(lr)
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps,
                        centered=centered, weight_decay=weight_decay,
                        capturable=capturable, foreach=foreach, maximize=maximize,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    _setstate_defaults = {"momentum": 0, "centered": False, "maximize": False}

    def _update(self, param, group):
        buffers = (["square_avg"] + (["momentum_buffer"] if group["momentum"] > 0 else [])
                   + (["grad_avg"] if group["centered"] else []))
        state = self._lazy_state(param, buffers)
        alpha = group["alpha"]
        state["step"].add_(1)
        grad = _update_gradient(param, group)
        square_avg = state["square_avg"]
        square_avg.mul_(alpha).add_(grad * grad, alpha=1 - alpha)
        if group["centered"]:
            grad_avg = _lerp_(state["grad_avg"], grad, 1 - alpha)
            avg = square_avg.add(grad_avg * grad_avg, alpha=-1).sqrt_()
        else:
            avg = square_avg.sqrt()
        avg.add_(group["eps"])
        if group["momentum"] > 0:
            buf = state["momentum_buffer"]
            buf.mul_(group["momentum"]).add_(grad / avg)
            param.add_(buf, alpha=-group["lr"])
        else:
            param.add_(grad / avg, alpha=-group["lr"])
