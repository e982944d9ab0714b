"""nn.DataParallel on one device (PyTorch's torch.nn.DataParallel).

PyTorch's DataParallel splits each batch across GPUs, runs a replica of the
module on each and gathers the outputs.  With no GPU it keeps the module and
calls it directly (device_ids == []); with one GPU it moves the module
there and runs the whole batch on it.  Those two are what ember does, with
the same attributes and the same `module.` prefix on state_dict keys (so
checkpoints of DataParallel-wrapped models load either way).  ember runs on
one device: asking for several raises (Note [One device]).
"""

import warnings
from itertools import chain

import ember

from ..modules.module import Module

__all__ = ["DataParallel", "data_parallel"]

# Note [One device]: ember has no replicate / scatter / gather across
# GPUs, so device_ids naming more than one device is refused with this
# message rather than silently run on one (which would change, e.g., the
# per-replica batch-norm statistics).  Left to its default on a machine
# with several GPUs, DataParallel uses the current one and says so.
_SEVERAL_DEVICES = (
    "ember's DataParallel runs on one device, but device_ids={} asks for {} "
    "devices; pass one device (e.g. device_ids=[0]) or use "
    "ember.nn.parallel.DistributedDataParallel with one process per GPU")


def _device_index(device):
    """The CUDA index in an int, "cuda:1" or ember.device; None -> current."""
    if device is None:
        return ember.cuda.current_device()
    if isinstance(device, str):
        device = ember.device(device)
    if isinstance(device, ember.device):
        if device.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {device}")
        return ember.cuda.current_device() if device.index is None else device.index
    return int(device)


def _pick_devices(device_ids):
    """The list of CUDA indices to use, [] without CUDA; raises for more
    than one (Note [One device])."""
    if not ember.cuda.is_available():
        return []
    if device_ids is None:
        if ember.cuda.device_count() > 1:
            warnings.warn(
                f"ember's DataParallel runs on one device: using cuda:{ember.cuda.current_device()} "
                f"of the {ember.cuda.device_count()} visible", stacklevel=3)
        return [ember.cuda.current_device()]
    device_ids = [_device_index(device) for device in device_ids]
    if len(device_ids) > 1:
        raise RuntimeError(_SEVERAL_DEVICES.format(device_ids, len(device_ids)))
    if not device_ids:
        raise RuntimeError("no available devices were found")
    return device_ids


def _to_device(value, device):
    """`value` with every tensor in it (through tuples, lists and dicts)
    moved to `device`: scattering over one device."""
    if isinstance(value, ember.Tensor):
        return value.to(device)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_to_device(item, device) for item in value))
    if isinstance(value, (tuple, list)):
        return type(value)(_to_device(item, device) for item in value)
    if isinstance(value, dict):
        return type(value)((key, _to_device(item, device)) for key, item in value.items())
    return value


def _check_module_device(module, device):
    for tensor in chain(module.parameters(), module.buffers()):
        if tensor.device != device:
            raise RuntimeError(
                "module must have its parameters and buffers "
                f"on device {device} (device_ids[0]) but found one of "
                f"them on device: {tensor.device}")


class DataParallel(Module):
    """DataParallel(module, device_ids=None, output_device=None, dim=0)."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        device_ids = _pick_devices(device_ids)
        if not device_ids:
            self.module = module
            self.device_ids = []
            return
        self.dim = dim
        self.module = module
        self.device_ids = device_ids
        self.output_device = _device_index(device_ids[0] if output_device is None else output_device)
        self.src_device_obj = ember.device("cuda", self.device_ids[0])
        self.module.to(self.src_device_obj)

    def forward(self, *inputs, **kwargs):
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        _check_module_device(self.module, self.src_device_obj)
        output = self.module(*_to_device(inputs, self.src_device_obj),
                             **_to_device(kwargs, self.src_device_obj))
        return _to_device(output, ember.device("cuda", self.output_device))


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None):
    """The functional form: module(*inputs, **module_kwargs) on the one
    device (PyTorch's raises without a device, as this does)."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    if not ember.cuda.is_available():
        raise RuntimeError("device type could not be determined")
    device_ids = _pick_devices(device_ids)
    output_device = _device_index(device_ids[0] if output_device is None else output_device)
    source = ember.device("cuda", device_ids[0])
    _check_module_device(module, source)
    output = module(*_to_device(inputs, source), **_to_device(module_kwargs or {}, source))
    return _to_device(output, ember.device("cuda", output_device))
