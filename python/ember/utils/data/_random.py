"""The random draws of samplers and loaders, in one place.

A `generator` argument is duck-typed: None (ember's default generator), a
NumPy ``numpy.random.Generator``, or any generator ember's random functions
accept once they take ``generator=``.  Every draw goes through
`_numpy_rng`, so switching to ember's own generator (ember.randperm,
ember.multinomial with generator=) changes this file only.
"""
import numpy as np

import ember

_SEED_BOUND = 2**63 - 1


def draw_seed(generator=None):
    """A fresh int64 seed (torch: ``torch.empty((), dtype=torch.int64).random_()``)."""
    if isinstance(generator, np.random.Generator):
        return int(generator.integers(0, _SEED_BOUND))
    if generator is None:
        return int(ember.randint(0, _SEED_BOUND, ()).item())
    return int(ember.randint(0, _SEED_BOUND, (), generator=generator).item())


def _numpy_rng(generator):
    if isinstance(generator, np.random.Generator):
        return generator
    # Like RandomSampler without a generator in PyTorch: a seed drawn from
    # the default generator, so ember.manual_seed makes the order repeat.
    return np.random.default_rng(draw_seed(generator))


def randperm(n, generator=None):
    return _numpy_rng(generator).permutation(n).tolist()


def randint(high, size, generator=None):
    return _numpy_rng(generator).integers(0, high, size).tolist()


def multinomial(weights, num_samples, replacement, generator=None):
    p = np.asarray(weights, dtype=np.float64)
    return _numpy_rng(generator).choice(
        len(p), size=num_samples, replace=replacement, p=p / p.sum()).tolist()
