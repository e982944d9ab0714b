"""ember.cuda.Stream and Event: thin wrappers over CuPy's, with PyTorch's API.

A stream is a queue of GPU work; work on one stream runs in order, work on
two may overlap.  ember launches every kernel (and takes every cuBLAS
product) on the *current* stream, which is CuPy's current stream: the
legacy default stream until `with ember.cuda.stream(s):` makes `s` current.
Streams made here are blocking ones (they synchronise with the legacy
default stream), as PyTorch's are by default.

An event is a marker in a stream: `record()` puts it there, `wait()` makes
another stream wait for it, `elapsed_time()` measures between two.

    start, end = ember.cuda.Event(enable_timing=True), ember.cuda.Event(enable_timing=True)
    start.record(); y = x @ x; end.record(); end.synchronize()
    start.elapsed_time(end)      # milliseconds
"""

import contextlib

__all__ = ["Stream", "Event", "current_stream", "default_stream", "stream"]


def _cupy():
    from . import _lazy_init
    _lazy_init()  # the reason when there is no GPU or no CuPy
    import cupy
    return cupy


class Stream:
    """torch.cuda.Stream(device=None, priority=0) over a cupy.cuda.Stream."""

    def __init__(self, device=None, priority=0, *, _wrapping=None):
        cupy = _cupy()
        if _wrapping is not None:
            self._stream = _wrapping
        else:
            from . import _device_index
            with cupy.cuda.Device(_device_index(device)):
                self._stream = cupy.cuda.Stream(non_blocking=False, priority=priority)

    @property
    def cuda_stream(self):
        """The cudaStream_t handle as an int (0: the legacy default stream)."""
        return self._stream.ptr

    @property
    def device(self):
        import ember
        return ember.device("cuda", self._stream.device_id)

    def synchronize(self):
        self._stream.synchronize()

    def query(self):
        """True when all the work queued on this stream has finished."""
        return self._stream.done

    def wait_event(self, event):
        self._stream.wait_event(event._event)

    def wait_stream(self, other):
        """Work queued here after this call waits for `other`'s work so far."""
        self.wait_event(other.record_event())

    def record_event(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and self.cuda_stream == other.cuda_stream

    def __hash__(self):
        return hash(self.cuda_stream)

    def __repr__(self):
        return f"<ember.cuda.Stream device={self.device} cuda_stream={self.cuda_stream:#x}>"


class Event:
    """torch.cuda.Event(enable_timing=False, blocking=False, interprocess=False)."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        cupy = _cupy()
        if interprocess:
            raise NotImplementedError("ember.cuda.Event(interprocess=True) is not supported")
        self._event = cupy.cuda.Event(block=blocking, disable_timing=not enable_timing)
        self._cupy = cupy

    def record(self, stream=None):
        self._event.record(current_stream()._stream if stream is None else stream._stream)

    def wait(self, stream=None):
        (current_stream() if stream is None else stream).wait_event(self)

    def query(self):
        return self._event.done

    def synchronize(self):
        self._event.synchronize()

    def elapsed_time(self, end_event):
        """Milliseconds from this event to `end_event` (both recorded, timed)."""
        return self._cupy.cuda.get_elapsed_time(self._event, end_event._event)


def current_stream(device=None):
    """The stream ember's kernels are queued on now."""
    return Stream(_wrapping=_cupy().cuda.get_current_stream())


def default_stream(device=None):
    """The legacy default stream (handle 0)."""
    return Stream(_wrapping=_cupy().cuda.Stream.null)


@contextlib.contextmanager
def stream(s):
    """`with ember.cuda.stream(s):` queues ember's work on `s` (None: no change)."""
    if s is None:
        yield
        return
    with s._stream:
        yield
