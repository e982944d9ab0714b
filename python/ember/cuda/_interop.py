"""Zero-copy exchange of CUDA memory: __cuda_array_interface__ and DLPack's streams.

Two protocols lend device memory between libraries (CuPy, Numba, PyTorch,
JAX) without copying it:

  __cuda_array_interface__  a dict (version 3): the address, shape, byte
      strides and element type, and the stream on which the producer last
      wrote the memory (`None`: nothing to wait for).  The consumer keeps
      the producer object alive for as long as it uses the memory.
  DLPack                    a capsule (c/python/Numpy.c); the consumer
      passes its stream to __dlpack__(stream=...), and the producer makes
      that stream wait for its own pending work before handing the memory
      over.

ember queues its kernels on the current stream (CuPy's: the legacy
default stream, handle 0 and named 1 in both protocols, unless
`with ember.cuda.stream(s)` picked another).  So ember exports that
stream, and when a consumer reads on some other stream s, ember records an
event on its stream and makes s wait for it: the same handshake PyTorch's
Tensor.__dlpack__ does with its current stream.

    t = ember.as_tensor(cupy_array)      # shares the array's memory
    cupy.asarray(t)                      # shares the tensor's (CuPy reads
                                         # t.__cuda_array_interface__)
"""

import ember

from .. import _C

__all__ = ["TYPESTRS", "cuda_array_interface", "from_cuda_array_interface",
           "dlpack_stream_handshake"]

# NumPy's array-interface type strings (little-endian machines).  PyTorch's
# table has no bfloat16 either: NumPy has no such type to name it.
TYPESTRS = {
    ember.bool: "|b1", ember.uint8: "|u1", ember.int8: "|i1", ember.int16: "<i2",
    ember.int32: "<i4", ember.int64: "<i8", ember.float16: "<f2", ember.float32: "<f4",
    ember.float64: "<f8",
}
_DTYPES = {typestr: dtype for dtype, typestr in TYPESTRS.items()}
# The legacy default stream, as both protocols name it.
LEGACY_DEFAULT_STREAM = 1


def _current_stream():
    """The stream ember queues on, named as the protocols name streams (the
    legacy default stream until CUDA is in use: nothing of ember's queued)."""
    if not ember.cuda.is_initialized():
        return LEGACY_DEFAULT_STREAM
    import cupy
    return cupy.cuda.get_current_stream().ptr or LEGACY_DEFAULT_STREAM


def consumer_stream():
    """The stream ember.from_dlpack asks a CUDA producer to order its work
    before (called from c/python/Numpy.c)."""
    return _current_stream()


def cuda_array_interface(tensor):
    """Tensor.__cuda_array_interface__: version 3, PyTorch's checks."""
    if not tensor.is_cuda:
        raise AttributeError(
            f"Can't get __cuda_array_interface__ on non-CUDA tensor type: {tensor.type()} "
            "If CUDA data is required use tensor.cuda() to copy tensor to device memory.")
    if tensor.requires_grad:
        raise RuntimeError(
            "Can't get __cuda_array_interface__ on Variable that requires grad. "
            "If gradients aren't required, use var.detach() to get Variable that "
            "doesn't require grad.")
    if tensor.dtype not in TYPESTRS:
        raise TypeError(f"__cuda_array_interface__ has no type string for {tensor.dtype}")
    itemsize = tensor.element_size()
    strides = None if tensor.is_contiguous() else tuple(s * itemsize for s in tensor.stride())
    address = tensor.data_ptr() if tensor.numel() > 0 else 0
    return {"typestr": TYPESTRS[tensor.dtype], "shape": tuple(tensor.shape),
            "strides": strides, "data": (address, False), "version": 3,
            "stream": _current_stream()}


def _check_interface(interface):
    """(address, shape, element strides or None, dtype, read_only, stream)
    of a __cuda_array_interface__ dict, with the errors CuPy and Numba give
    for what they cannot import."""
    if not isinstance(interface, dict):
        raise TypeError(f"__cuda_array_interface__ must be a dict, not "
                        f"{type(interface).__name__}")
    version = interface.get("version", 0)
    if not isinstance(version, int) or not 0 <= version <= 3:
        raise ValueError(f"__cuda_array_interface__ version {version!r} is not supported "
                         "(ember reads versions 0 to 3)")
    if interface.get("mask") is not None:
        raise ValueError("__cuda_array_interface__ with a mask is not supported")
    typestr = interface["typestr"]
    if typestr not in _DTYPES:
        raise TypeError(f"__cuda_array_interface__: unsupported type string {typestr!r} "
                        f"(ember reads {', '.join(sorted(_DTYPES))})")
    dtype = _DTYPES[typestr]
    shape = tuple(interface["shape"])
    address, read_only = interface["data"]
    if address == 0 and any(shape) and 0 not in shape:
        raise ValueError("__cuda_array_interface__: a null data pointer for a non-empty array")
    strides = interface.get("strides")
    if strides is not None:
        itemsize = int(typestr[2:])
        if len(strides) != len(shape):
            raise ValueError(f"__cuda_array_interface__: {len(strides)} strides for "
                             f"{len(shape)} dimensions")
        if any(s % itemsize for s in strides):
            raise ValueError("__cuda_array_interface__: strides must be multiples of the "
                             f"element size ({itemsize} bytes)")
        strides = tuple(s // itemsize for s in strides)
    return address, shape, strides, dtype, bool(read_only), interface.get("stream")


def _order(first, then):
    """Work queued on CuPy stream `then` from now on waits for what `first`
    has queued so far (an event recorded on one, waited for on the other)."""
    import cupy
    event = cupy.cuda.Event(disable_timing=True)
    event.record(first)
    then.wait_event(event)


def _wait_for(stream):
    """Orders ember's stream after the producer's `stream` (version 3's
    "stream" key: None or absent means nothing to wait for)."""
    if stream is None or not ember.cuda.is_initialized() or stream == _current_stream():
        return  # nothing of ember's can run before the producer's work
    if stream == 0:
        raise ValueError("__cuda_array_interface__: stream 0 is disallowed (ambiguous)")
    import cupy
    _order(cupy.cuda.ExternalStream(stream), cupy.cuda.get_current_stream())


def from_cuda_array_interface(obj):
    """A CUDA tensor over the memory `obj` lends through
    __cuda_array_interface__; it keeps `obj` alive as long as it lives."""
    address, shape, strides, dtype, read_only, stream = _check_interface(
        obj.__cuda_array_interface__)
    _wait_for(stream)
    return _C._tensor_over_cuda_memory(obj, address, shape, strides, dtype, read_only)


def dlpack_stream_handshake(tensor, stream):
    """__dlpack__(stream=...): a consumer that reads on `stream` waits for
    ember's pending work (called by Tensor.__dlpack__ before it exports)."""
    if not isinstance(stream, int) or isinstance(stream, bool):
        raise TypeError("stream must be ``int`` or ``none``")
    if not tensor.is_cuda or stream == -1:
        return  # -1: the consumer asks for no synchronisation
    if stream == 0:
        raise ValueError("__dlpack__: stream 0 is disallowed for CUDA (ambiguous); pass 1 "
                         "for the legacy default stream")
    if not ember.cuda.is_initialized() or stream == _current_stream():
        return  # nothing of ember's queued, or queued on the consumer's stream
    import cupy
    _order(cupy.cuda.get_current_stream(), cupy.cuda.ExternalStream(stream))
