"""ember.accelerator: which accelerator, if any, this process can use (as
PyTorch's torch.accelerator).  None yet: ember runs on the CPU."""

from . import cuda

__all__ = ["is_available", "current_accelerator", "device_count"]


def is_available():
    return cuda.is_available()


def device_count():
    return cuda.device_count()


def current_accelerator(check_available=False):
    """The accelerator's device, or None when there is none."""
    return None
