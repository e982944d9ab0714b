"""ember.cuda: the CUDA device's module, as PyTorch's torch.cuda.

This build has no CUDA backend yet, so `is_available()` is False and
`device_count()` is 0.  What PyTorch's CPU-only build answers without a
GPU, this module answers the same way: the seeding functions are silently
ignored (PyTorch documents this, so programs may call them everywhere),
the memory counters read 0 and `empty_cache()` does nothing.  Anything that
needs a device (current_device, synchronize, get_device_name, ...) raises.
"""

from . import amp  # noqa: F401  (ember.cuda.amp, the deprecated aliases)

__all__ = [
    "is_available", "device_count", "is_initialized", "init", "current_device",
    "set_device", "get_device_name", "get_device_capability",
    "get_device_properties", "synchronize", "empty_cache", "memory_allocated",
    "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed",
    "is_bf16_supported", "get_arch_list",
]


def is_available():
    return False


def device_count():
    return 0


def is_initialized():
    return False


def get_arch_list():
    return []


def is_bf16_supported(including_emulation=True):
    return False


def _no_device(*args, **kwargs):
    raise RuntimeError("ember.cuda: no CUDA device is available: this ember build "
                       "runs tensors on the CPU only")


init = current_device = set_device = get_device_name = _no_device
get_device_capability = get_device_properties = synchronize = _no_device
initial_seed = get_rng_state = set_rng_state = _no_device


def _zero_bytes(device=None):
    return 0


memory_allocated = max_memory_allocated = _zero_bytes
memory_reserved = max_memory_reserved = _zero_bytes


def empty_cache():
    """Nothing is cached without a device."""


def _ignored_seed(seed=None):
    """Seeds every CUDA generator; silently ignored without CUDA (as PyTorch)."""


manual_seed = manual_seed_all = _ignored_seed


def seed():
    """Ignored without CUDA (as PyTorch)."""


def seed_all():
    """Ignored without CUDA (as PyTorch)."""
