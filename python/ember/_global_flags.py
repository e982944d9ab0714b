"""Process-wide settings PyTorch programs make at the top level:
the default device, float32 matmul precision, deterministic algorithms.

ember's CPU kernels always multiply float32 in float32 and give the same
bits on every run of a given thread count, so the last two are kept as set
and change nothing; the default device is checked, as only 'cpu' exists.
"""

import warnings

from . import _C
from ._device import device as _device

_default_device = _device("cpu")
_matmul_precision = "highest"
_deterministic = {"mode": False, "warn_only": False}


def set_default_device(device):
    """Makes `device` the default of the factories; only the CPU exists here,
    so anything else raises the error a factory would raise for it."""
    global _default_device
    device = _device("cpu" if device is None else device)
    _C.empty(0, device=str(device))   # the factories' own check of the device
    if device.type != "cpu":
        raise RuntimeError(f"set_default_device({str(device)!r}): ember's factories "
                           "create CPU tensors by default; another default device is "
                           "not supported yet")
    _default_device = device


def get_default_device():
    return _default_device


def set_float32_matmul_precision(precision):
    global _matmul_precision
    if precision not in ("highest", "high", "medium"):
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the "
                      f"current set_float32_matmul_precision call has no effect.")
        return
    _matmul_precision = precision


def get_float32_matmul_precision():
    return _matmul_precision


def use_deterministic_algorithms(mode, *, warn_only=False):
    _deterministic.update(mode=bool(mode), warn_only=bool(warn_only))


def are_deterministic_algorithms_enabled():
    return _deterministic["mode"]


def is_deterministic_algorithms_warn_only_enabled():
    return _deterministic["warn_only"]
