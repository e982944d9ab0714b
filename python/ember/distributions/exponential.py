"""Exponential(rate), Laplace(loc, scale) and Poisson(rate)."""

import ember

from . import constraints
from .distribution import _BroadcastParameters
from .utils import broadcast_all

__all__ = ["Exponential", "Laplace", "Poisson"]


class Exponential(_BroadcastParameters):
    """Waiting times of rate `rate` (mean 1 / rate), reparameterised."""
    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _parameters = ("rate",)

    def __init__(self, rate, validate_args=None):
        self._set_parameters((rate,), validate_args)

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return ember.zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def rsample(self, sample_shape=ember.Size()):
        shape = self._extended_shape(sample_shape)
        unit = ember.empty(shape, dtype=self.rate.dtype, device=self.rate.device).exponential_()
        return unit / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - ember.exp(-self.rate * value)

    def icdf(self, value):
        return -ember.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - ember.log(self.rate)


class Laplace(_BroadcastParameters):
    """The double exponential around loc, reparameterised."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _parameters = ("loc", "scale")

    def __init__(self, loc, scale, validate_args=None):
        self._set_parameters((loc, scale), validate_args)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return (2 ** 0.5) * self.scale

    def rsample(self, sample_shape=ember.Size()):
        shape = self._extended_shape(sample_shape)
        # u in (eps - 1, 1): log1p(-|u|) stays finite
        u = ember.empty(shape, dtype=self.loc.dtype, device=self.loc.device).uniform_(
            ember.finfo(self.loc.dtype).eps - 1, 1)
        return self.loc - self.scale * u.sign() * ember.log1p(-u.abs())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -ember.log(2 * self.scale) - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * ember.expm1(
            -(value - self.loc).abs() / self.scale)

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * ember.log1p(-2 * term.abs())

    def entropy(self):
        return 1 + ember.log(2 * self.scale)


class Poisson(_BroadcastParameters):
    """Counts of events at rate `rate`."""
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer
    _parameters = ("rate",)

    def __init__(self, rate, validate_args=None):
        self._set_parameters((rate,), validate_args)

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=ember.Size()):
        shape = self._extended_shape(sample_shape)
        with ember.no_grad():
            return ember.poisson(self.rate.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return value.xlogy(rate) - rate - (value + 1).lgamma()
