"""The random operators.  A draw is a step function of its parameters
(bernoulli of p, poisson of the rate), so, as PyTorch's BernoulliBackward0
and PoissonBackward0 do, their nodes give each input a zero gradient; the
in-place samplers (uniform_, normal_, ...) overwrite every value and give
the old values a zero gradient, like fill_.  multinomial's integer result
records nothing.  ember.normal(mean, std) with tensors is a composition of
differentiable operators (python/ember/random.py) and needs no formula."""

import ember

from ._common import (check_inplace, commit_inplace, edges_of, meta_of,
                      nondifferentiable, record, register)
from .pointwise import _ZeroBackward

nondifferentiable("multinomial")


def _zero_node(prefix):
    return type(f"{prefix}Backward0", (_ZeroBackward,), {"__slots__": ()})


def _register_sampler(name, node_class):
    """ember.name(input, ...): the C sampler's values, zero gradient."""
    op = getattr(ember._C, name)

    @register(name)
    def handler(input, *args, **kwargs):
        node = node_class(edges_of(input))
        node.metas = (meta_of(input),)
        return record(node, op(input, *args, **kwargs))
    handler.__name__ = name


def _register_inplace_sampler(name, node_class):
    """x.name(...): fresh draws replace every value of x (Note [In-place
    operations] in _common.py)."""
    @register(name)
    def handler(self, *args, **kwargs):
        check_inplace(self)
        new_values = ember.empty_like(self)
        getattr(new_values, name)(*args, **kwargs)
        node = node_class(edges_of(self))
        node.metas = (meta_of(self),)
        return commit_inplace(self, record(node, new_values))
    handler.__name__ = name


_register_sampler("bernoulli", _zero_node("Bernoulli"))
_register_sampler("poisson", _zero_node("Poisson"))
for _name, _prefix in {"uniform_": "Uniform", "normal_": "Normal", "random_": "Random",
                       "exponential_": "Exponential", "bernoulli_": "Bernoulli"}.items():
    _register_inplace_sampler(_name, _zero_node(_prefix))
del _name, _prefix
