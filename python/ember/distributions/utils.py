"""Helpers the distributions share: broadcasting parameters, moving
between probabilities and logits, and a property computed once."""

import numbers

import ember
import ember.nn.functional as F

__all__ = ["broadcast_all", "clamp_probs", "lazy_property", "logits_to_probs",
           "probs_to_logits"]


def broadcast_all(*values):
    """The values as tensors of one shape: numbers become tensors of the
    tensors' dtype (the default dtype when all are numbers)."""
    if not all(isinstance(v, (ember.Tensor, numbers.Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number, "
                         "ember.Tensor or objects implementing __torch_function__.")
    tensors = [v for v in values if isinstance(v, ember.Tensor)]
    dtype = tensors[0].dtype if tensors else ember.get_default_dtype()
    as_tensors = [v if isinstance(v, ember.Tensor) else ember.tensor(v, dtype=dtype)
                  for v in values]
    return ember.broadcast_tensors(*as_tensors)


def _sum_rightmost(value, dims):
    """value summed over its rightmost dims dims."""
    return value.reshape(tuple(value.shape[:value.dim() - dims]) + (-1,)).sum(-1) \
        if dims > 0 else value


def clamp_probs(probs):
    """probs kept eps away from 0 and 1, so their logs stay finite."""
    eps = ember.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    """Log-odds of binary probabilities, or the logs of categorical ones."""
    clamped = clamp_probs(probs)
    if is_binary:
        return ember.log(clamped) - ember.log1p(-clamped)
    return ember.log(clamped)


def logits_to_probs(logits, is_binary=False):
    if is_binary:
        return ember.sigmoid(logits)
    return F.softmax(logits, dim=-1)


class lazy_property:
    """A property computed on first use and then stored on the instance (a
    distribution given logits computes probs only when asked)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        with ember.enable_grad():
            value = self.wrapped(instance)
        instance.__dict__[self.wrapped.__name__] = value
        return value
