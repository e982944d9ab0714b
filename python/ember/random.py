"""ember.random: the default generator's state (PyTorch's torch.random), and
ember.normal's overloads.

The bit generator is xoshiro256** (c/th/THRandom.h), not PyTorch's Mersenne
Twister: a seed gives the same numbers on every machine, but not the numbers
PyTorch gives for that seed, and get_rng_state() is ember's own 40 bytes.
"""

import numbers

import ember
from ember import _C
from ember.autograd.formulas.indexing import _broadcast_shape

__all__ = ["default_generator", "manual_seed", "seed", "initial_seed",
           "get_rng_state", "set_rng_state"]

default_generator = _C.default_generator
seed = _C.seed


def manual_seed(seed):
    """Seeds the CPU generator and the CUDA one (as torch.manual_seed);
    returns the CPU generator."""
    generator = _C.manual_seed(seed)
    from .cuda import _random
    _random.default_generator.manual_seed(seed)
    return generator

initial_seed = _C.initial_seed


def get_rng_state():
    """The default generator's state, a uint8 tensor."""
    return default_generator.get_state()


def set_rng_state(new_state):
    """Restores the default generator to a get_rng_state() result."""
    default_generator.set_state(new_state)


def _check_std(std):
    if isinstance(std, ember.Tensor):
        if std.numel() and not bool((std >= 0).all()):
            raise RuntimeError("normal expects all elements of std >= 0.0")
    elif not std >= 0.0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")


def normal(mean, std=1.0, size=None, *, generator=None, out=None, dtype=None,
           layout=None, device=None, pin_memory=False, requires_grad=False):
    """normal(mean, std, *, generator=None): draws from N(mean, std**2) with
    mean and std tensors (broadcast together) or a tensor and a number;
    normal(mean, std, size, *, generator=None, dtype=None): numbers, a new
    tensor of `size`.  The tensor forms are mean + std * noise, so they are
    differentiable in mean and std as PyTorch's are."""
    if out is not None:
        raise TypeError("normal(): out= is not supported yet")
    _check_std(std)
    tensors = [t for t in (mean, std) if isinstance(t, ember.Tensor)]
    if not tensors:
        if size is None:
            raise TypeError("normal() missing required argument 'size' (mean and "
                            "std are numbers)")
        if not isinstance(mean, numbers.Real) or not isinstance(std, numbers.Real):
            raise TypeError(f"normal(): mean and std must be numbers or tensors, got "
                            f"{type(mean).__name__} and {type(std).__name__}")
        noise = ember.randn(size, generator=generator, dtype=dtype, device=device)
        result = noise.mul_(std).add_(mean)
        return result.requires_grad_() if requires_grad else result
    if size is not None:
        raise TypeError("normal(): size= is only accepted when mean and std are numbers")
    if len(tensors) == 2:
        # a mismatch is reported by mean + std * noise below
        shape = _broadcast_shape(mean.shape, std.shape)
        noise_dtype = ember.result_type(mean, std)
    else:
        shape, noise_dtype = tensors[0].shape, tensors[0].dtype
    if not noise_dtype.is_floating_point:
        raise RuntimeError(f"normal expects floating-point mean and std, got {noise_dtype}")
    noise = ember.randn(shape, generator=generator, dtype=noise_dtype)
    return mean + std * noise
