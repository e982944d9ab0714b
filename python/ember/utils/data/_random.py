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


# torch.randperm switches to a 64-bit draw per position from this n on
# (aten/src/ATen/native/TensorFactories.cpp, randperm_cpu).
_TORCH_RANDPERM_64BIT_FROM = (2**32 - 1) // 20


def torch_randperm(n, seed):
    """torch.randperm(n, generator=torch.Generator().manual_seed(seed)),
    element for element.

    PyTorch's CPU generator is a 32-bit Mersenne Twister seeded by the
    reference init_genrand with the seed's low 32 bits; NumPy's legacy
    RandomState seeded with an int is that same generator, and randint over
    the full uint32 range returns its raw outputs.  ember's own generator is
    xoshiro256** (c/th/THRandom.h), which cannot give these numbers."""
    state = np.random.RandomState(seed & 0xFFFFFFFF)
    if n < _TORCH_RANDPERM_64BIT_FROM:
        # for i < n - 1: swap r[i] with r[i + u32 % (n - i)]
        draws = state.randint(0, 2**32, size=max(n - 1, 0), dtype=np.uint32)
        positions = np.arange(max(n - 1, 0), dtype=np.uint64)
        partners = (draws.astype(np.uint64) % (np.uint64(n) - positions) + positions).tolist()
        order = list(range(n))
        for i, j in enumerate(partners):
            order[i], order[j] = order[j], order[i]
        return order
    # "inside-out": r[i] = r[z], r[z] = i with z = u64 % (i + 1), where u64
    # is two draws, the first as the high word
    words = state.randint(0, 2**32, size=2 * n, dtype=np.uint32).astype(np.uint64)
    u64 = (words[0::2] << np.uint64(32)) | words[1::2]
    partners = (u64 % np.arange(1, n + 1, dtype=np.uint64)).tolist()
    order = [0] * n
    for i, z in enumerate(partners):
        order[i] = order[z]
        order[z] = i
    return order
