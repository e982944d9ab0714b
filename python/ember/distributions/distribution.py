"""Distribution: the base of every ember distribution, as PyTorch's.

A distribution has a batch_shape (independent distributions side by side)
and an event_shape (the shape of one draw); a sample of sample_shape has
the shape sample_shape + batch_shape + event_shape.  With validate_args
(on by default, as in PyTorch), the parameters are checked against
arg_constraints when the distribution is built, and the values given to
log_prob against its support.
"""

import numbers

import ember

from . import constraints
from .utils import broadcast_all, lazy_property

__all__ = ["Distribution"]


class Distribution:
    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value):
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=ember.Size(), event_shape=ember.Size(),
                 validate_args=None):
        self._batch_shape = ember.Size(batch_shape)
        self._event_shape = ember.Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            self._check_parameters()

    def _check_parameters(self):
        for param, constraint in self.arg_constraints.items():
            if constraints.is_dependent(constraint):
                continue
            if param not in self.__dict__ and isinstance(getattr(type(self), param),
                                                         lazy_property):
                continue   # not given: computed from a parameter already checked
            value = getattr(self, param)
            if not bool(constraint.check(value).all()):
                raise ValueError(
                    f"Expected parameter {param} ({type(value).__name__} of shape "
                    f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                    f"constraint {constraint!r}, but found invalid values:\n{value}")

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    @property
    def arg_constraints(self):
        raise NotImplementedError

    @property
    def support(self):
        raise NotImplementedError

    @property
    def mean(self):
        raise NotImplementedError(f"{type(self)} does not implement mean")

    @property
    def mode(self):
        raise NotImplementedError(f"{type(self)} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError(f"{type(self)} does not implement variance")

    @property
    def stddev(self):
        return self.variance.sqrt()

    def expand(self, batch_shape, _instance=None):
        raise NotImplementedError

    def sample(self, sample_shape=ember.Size()):
        """A draw without gradient (rsample's, where there is one)."""
        with ember.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=ember.Size()):
        raise NotImplementedError

    def sample_n(self, n):
        return self.sample(ember.Size((n,)))

    def log_prob(self, value):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def enumerate_support(self, expand=True):
        raise NotImplementedError

    def perplexity(self):
        return ember.exp(self.entropy())

    def _extended_shape(self, sample_shape=ember.Size()):
        return ember.Size(tuple(sample_shape) + tuple(self._batch_shape) +
                          tuple(self._event_shape))

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a "
                f"custom __init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def _validate_sample(self, value):
        """log_prob's checks of value: a tensor, the event shape at its right,
        broadcastable with the batch, inside the support."""
        if not isinstance(value, ember.Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = value.dim() - len(self._event_shape)
        if tuple(value.shape[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError(f"The right-most size of value must match event_shape: "
                             f"{value.size()} vs {self._event_shape}.")
        actual_shape = value.size()
        expected_shape = self._batch_shape + self._event_shape
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: "
                                 f"{actual_shape} vs {expected_shape}.")
        support = self.support
        if not bool(support.check(value).all()):
            raise ValueError(
                f"Expected value argument ({type(value).__name__} of shape "
                f"{tuple(value.shape)}) to be within the support ({support!r}) of the "
                f"distribution {self!r}, but found invalid values:\n{value}")

    def __repr__(self):
        shown = []
        for name in self.arg_constraints:
            if name in self.__dict__:
                value = self.__dict__[name]
                # one element shows itself (a 0-d tensor formats as its number)
                shown.append(f"{name}: {value if value.numel() == 1 else value.size()}")
        return f"{type(self).__name__}({', '.join(shown)})"


class _BroadcastParameters(Distribution):
    """A distribution whose parameters (named in _parameters) broadcast
    together: numbers or tensors in, one batch shape, expand() by expanding
    each."""
    _parameters = ()

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(type(self), _instance)
        batch_shape = ember.Size(batch_shape)
        for name in self._parameters:
            setattr(new, name, getattr(self, name).expand(batch_shape))
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _set_parameters(self, values, validate_args):
        tensors = broadcast_all(*values)
        for name, tensor in zip(self._parameters, tensors):
            setattr(self, name, tensor)
        numbers_only = all(isinstance(v, numbers.Number) for v in values)
        batch_shape = ember.Size() if numbers_only else tensors[0].size()
        Distribution.__init__(self, batch_shape, validate_args=validate_args)
