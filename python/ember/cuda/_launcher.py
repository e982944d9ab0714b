"""The CUDA launcher: where ember's C dispatch sends calls on CUDA tensors.

Note [One dispatch point] in c/python/Device.c: every C entry point whose
tensors live on CUDA calls launch(name, args, kwargs) instead of its CPU
kernels.  ember.cuda registers it on first use when CuPy sees a GPU.

So far it moves data between host and device memory: to()/cpu()/cuda(),
copy_ across devices, and what reads values on the host (item(), float(),
numpy(force=True), tolist(), printing).  A copy is one cudaMemcpy (through
CuPy) of a contiguous block: layout changes, dtype conversions and
broadcasting happen on the CPU side of the copy, with ember's CPU kernels.
Everything else raises NotImplementedError naming the operator: ember's
CUDA kernels are not written yet.
"""

import ember

from .. import _C

# cudaMemcpyKind
_HOST_TO_DEVICE = 1
_DEVICE_TO_HOST = 2
_DEVICE_TO_DEVICE = 3


def _memcpy(destination, source, kind):
    """Copies source's bytes into destination (both dense, same dtype and size)."""
    nbytes = source.numel() * source.element_size()
    if nbytes:
        import cupy
        cupy.cuda.runtime.memcpy(destination.data_ptr(), source.data_ptr(), nbytes, kind)


def _dense_on_device(tensor, operation):
    if not tensor.is_contiguous():
        raise NotImplementedError(
            f"ember.cuda: {operation} of a non-contiguous CUDA tensor needs a CUDA "
            "kernel, which ember does not have yet")
    return tensor


def _to_host(tensor):
    """A new CPU tensor with the values of a CUDA tensor."""
    source = _dense_on_device(tensor, "copying to the host")
    host = ember.empty(source.shape, dtype=source.dtype)
    _memcpy(host, source, _DEVICE_TO_HOST)
    return host


def _to_device(tensor):
    """A new CUDA tensor with the values of a CPU tensor."""
    source = tensor.contiguous()
    device = ember.empty(source.shape, dtype=source.dtype, device="cuda")
    _memcpy(device, source, _HOST_TO_DEVICE)
    return device


def _device_type(device):
    """'cpu' or 'cuda' for a device argument (a bare int is a CUDA index)."""
    return "cuda" if isinstance(device, int) else ember.device(device).type


def _target_of(tensor, args, kwargs):
    """(device type, dtype) that to(*args, **kwargs) asks for."""
    device, dtype = tensor.device.type, tensor.dtype
    for arg in args:
        if isinstance(arg, ember.Tensor):
            device, dtype = arg.device.type, arg.dtype
        elif isinstance(arg, ember.dtype):
            dtype = arg
        else:
            device = _device_type(arg)
    if kwargs.get("device") is not None:
        device = _device_type(kwargs["device"])
    if kwargs.get("dtype") is not None:
        dtype = kwargs["dtype"]
    return device, dtype


def _to(tensor, *args, **kwargs):
    device, dtype = _target_of(tensor, args, kwargs)
    if device == "cpu":  # from CUDA: copy, then convert on the CPU
        return _to_host(tensor).to(dtype)
    if tensor.is_cuda:  # cuda -> cuda with another dtype, or copy=True
        if dtype != tensor.dtype:
            return _to_device(_to_host(tensor).to(dtype))
        result = ember.empty(tensor.shape, dtype=dtype, device="cuda")
        _memcpy(result, _dense_on_device(tensor, "copying"), _DEVICE_TO_DEVICE)
        return result
    return _to_device(tensor.to(dtype))  # from the CPU: convert, then copy


def _copy_(destination, source, non_blocking=False):
    _dense_on_device(destination, "copy_ into")
    if not source.is_cuda:
        staged = source.to(destination.dtype).expand(destination.shape).contiguous()
        _memcpy(destination, staged, _HOST_TO_DEVICE)
    elif not destination.is_cuda:
        destination.copy_(_to_host(source))
    elif source.shape == destination.shape and source.dtype == destination.dtype:
        _memcpy(destination, _dense_on_device(source, "copy_ from"), _DEVICE_TO_DEVICE)
    else:
        staged = _to_host(source).to(destination.dtype).expand(destination.shape)
        _memcpy(destination, staged.contiguous(), _HOST_TO_DEVICE)
    return destination


def _on_host(method):
    return lambda tensor, *args, **kwargs: getattr(_to_host(tensor), method)(*args, **kwargs)


_HANDLERS = {
    "Tensor.to": _to,
    "Tensor.copy_": _copy_,
    "Tensor.item": _on_host("item"),
    "Tensor.tolist": _on_host("tolist"),
    "Tensor.numpy": _on_host("numpy"),
    "__float__": _on_host("__float__"),
    "__int__": _on_host("__int__"),
    "__index__": _on_host("__index__"),
    "__bool__": _on_host("__bool__"),
}


def launch(name, args, kwargs):
    """Runs one call whose tensors live on CUDA (see the module's docstring)."""
    handler = _HANDLERS.get(name)
    if handler is None:
        raise NotImplementedError(
            f"ember.cuda: '{name}' has no CUDA kernel yet (ember moves tensors to and "
            "from the GPU, but runs no operator there so far)")
    return handler(*args, **kwargs)


def register():
    """Installs launch() for 'cuda' unless a launcher is there already."""
    previous = _C._register_device_backend("cuda", launch)
    if previous is not None:
        _C._register_device_backend("cuda", previous)
