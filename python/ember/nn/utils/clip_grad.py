"""Gradient clipping: rescale all gradients when their joint norm is too
large (clip_grad_norm_), or clamp each element (clip_grad_value_).

The joint norm of gradients g1, g2, ... is the norm of the vector of their
norms, which equals the norm of all their elements laid end to end; the
infinity norm is the largest absolute element.  Every update is in place
and outside autograd, as PyTorch's.
"""

import warnings

import ember

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm",
           "clip_grads_with_norm_"]


def _as_list(tensors):
    return [tensors] if isinstance(tensors, ember.Tensor) else list(tensors)


def _norm(tensor, norm_type):
    if norm_type == float("inf"):
        return tensor.abs().max() if tensor.numel() else ember.zeros((), dtype=tensor.dtype)
    return ember.norm(tensor, norm_type)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of the norms of `tensors` (0 when there are none)."""
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if len(tensors) == 0:
        return ember.tensor(0.0)
    with ember.no_grad():
        total = _norm(ember.stack([_norm(t, norm_type) for t in tensors]), norm_type)
    if error_if_nonfinite and not bool(ember.isfinite(total)):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            f"non-finite, so it cannot be clipped. To disable this error and scale the "
            f"gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scales every gradient by max_norm / (total_norm + 1e-6), when that is below 1."""
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if not grads:
        return
    with ember.no_grad():
        coefficient = ember.clamp(float(max_norm) / (total_norm + 1e-6), max=1.0)
        for grad in grads:
            grad.mul_(coefficient.to(grad.dtype))


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Rescales the gradients of `parameters` so that their joint norm is at
    most max_norm; returns the joint norm before clipping."""
    parameters = _as_list(parameters)
    grads = [p.grad for p in parameters if p.grad is not None]
    total_norm = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    return total_norm


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                   foreach=None):
    warnings.warn("`ember.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`ember.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamps every gradient element to [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    with ember.no_grad():
        for param in _as_list(parameters):
            if param.grad is not None:
                param.grad.clamp_(min=-clip_value, max=clip_value)
