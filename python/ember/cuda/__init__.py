"""ember.cuda: the CUDA device's module, as PyTorch's torch.cuda, through CuPy.

ember runs CUDA tensors through CuPy (`pip install ember[cuda]`): their
memory comes from CuPy's memory pool (CupyAllocator, installed for device
'cuda' in ember.memory's registry on first use), and ember's C operators
hand calls on CUDA tensors to the launcher registered for the device (Note
[One dispatch point] in c/python/Device.c).

`is_available()` and `device_count()` never raise: without CuPy, without an
NVIDIA driver or without a GPU they answer False and 0.  Every use of a CUDA
device then raises a RuntimeError that names what is missing, as PyTorch's
CUDA build does ("Found no NVIDIA driver on your system...", "No CUDA GPUs
are available"); PyTorch's CPU build says "Torch not compiled with CUDA
enabled", and ember says that CuPy is not installed.

The probe runs once (importing CuPy takes seconds, so not at `import
ember`), on the first call that needs it.  Seeding needs no GPU (the
generator is a Philox key and a counter, ember/cuda/_random.py), so
programs may call manual_seed everywhere, as with PyTorch.
"""

from .. import _C
from .. import memory as _memory
from . import _random
from . import amp  # noqa: F401  (ember.cuda.amp, the deprecated aliases)

__all__ = [
    "is_available", "device_count", "is_initialized", "init", "current_device",
    "set_device", "get_device_name", "get_device_capability",
    "get_device_properties", "synchronize", "empty_cache", "memory_allocated",
    "max_memory_allocated", "reset_peak_memory_stats", "memory_reserved",
    "max_memory_reserved", "manual_seed", "manual_seed_all", "seed", "seed_all",
    "is_bf16_supported", "get_arch_list", "CupyAllocator", "Stream", "Event",
    "current_stream", "default_stream", "stream",
]

INSTALL_LINE = "pip install ember[cuda]"

# CUDA runtime error codes (cuda_runtime_api.h's cudaError_t).
_CUDA_ERROR_INSUFFICIENT_DRIVER = 35
_CUDA_ERROR_NO_DEVICE = 100

# PyTorch's messages for a CUDA build on a machine without a driver or GPU.
NO_DRIVER = ("Found no NVIDIA driver on your system. Please check that you have an "
             "NVIDIA GPU and installed a driver from "
             "http://www.nvidia.com/Download/index.aspx")
NO_GPU = "No CUDA GPUs are available"

# The probe's answer: None until probed, then (device_count, reason), where
# reason is None when CUDA is usable, else the message that says why not.
_probed = None
_initialized = False


def _import_cupy():
    """CuPy, or None when it cannot be imported."""
    try:
        import cupy
    except ImportError:
        return None
    return cupy


def _runtime_failure(error):
    """The message for a CUDARuntimeError raised while counting devices."""
    status = getattr(error, "status", None)
    if status == _CUDA_ERROR_INSUFFICIENT_DRIVER:
        return f"{NO_DRIVER} (CuPy: {error})"
    if status == _CUDA_ERROR_NO_DEVICE:
        return NO_GPU
    return f"CUDA is not usable: CuPy could not count the devices: {error}"


def _probe():
    """(device_count, reason): reason is None when CUDA is usable. Never raises."""
    global _probed
    if _probed is not None:
        return _probed
    cupy = _import_cupy()
    if cupy is None:
        _probed = (0, "ember's CUDA support needs CuPy, which is not installed: "
                      f"install it with `{INSTALL_LINE}`")
        return _probed
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # CUDARuntimeError, or a missing libcuda (OSError)
        _probed = (0, _runtime_failure(error))
        return _probed
    _probed = (count, None) if count > 0 else (0, NO_GPU)
    return _probed


def is_available():
    """True when CuPy, an NVIDIA driver and at least one GPU are there."""
    return _probe()[1] is None


def device_count():
    """How many GPUs CuPy sees (0 without CuPy, a driver or a GPU)."""
    return _probe()[0]


def is_initialized():
    return _initialized


def _lazy_init():
    """Readies CUDA on first use, or raises the RuntimeError saying what is missing.

    The C core calls it (as PyTorch's torch.cuda._lazy_init) when a CUDA use
    finds no allocator installed for the device, or no launcher: it installs
    CupyAllocator, the launcher of ember.cuda._launcher and the runtime that
    loads and launches its kernels (ember.cuda._runtime.CupyRuntime), each
    unless one was installed already (say one of the tests').
    """
    global _initialized
    reason = _probe()[1]
    if reason is not None:
        raise RuntimeError(reason)
    if _initialized:
        return
    if _memory.get_allocator("cuda") is None:
        _memory.set_allocator(CupyAllocator(), "cuda")
    from . import _launcher, _runtime
    if _runtime._current is None:
        _runtime.use(_runtime.CupyRuntime())
    _launcher.register()
    _initialized = True


init = _lazy_init


def _device_index(device):
    """The index of `device` (None, an int, 'cuda:0', an ember.device), checked."""
    if device is None:
        index = 0
    elif isinstance(device, int):
        index = device
    else:
        from .._device import device as _device_type
        parsed = _device_type(device)
        if parsed.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {parsed}")
        index = 0 if parsed.index is None else parsed.index
    _lazy_init()
    if not 0 <= index < device_count():
        raise RuntimeError("CUDA error: invalid device ordinal")
    return index


def current_device():
    """The index of the current device: always 0 (ember's core has one CUDA device)."""
    _lazy_init()
    return 0


def set_device(device):
    """Only cuda:0 can be current: ember's core has one CUDA device."""
    if _device_index(device) != 0:
        raise RuntimeError("ember runs CUDA tensors on cuda:0 only")


def get_device_properties(device=None):
    """CuPy's property dict of the device (cudaDeviceProp's fields)."""
    index = _device_index(device)
    return _import_cupy().cuda.runtime.getDeviceProperties(index)


def get_device_name(device=None):
    name = get_device_properties(device)["name"]
    return name.decode() if isinstance(name, bytes) else name


def get_device_capability(device=None):
    """(major, minor) compute capability, e.g. (9, 0) for an H100/H200."""
    properties = get_device_properties(device)
    return properties["major"], properties["minor"]


def get_arch_list():
    """The architectures ember compiles its kernels for (none without CUDA)."""
    if not is_available():
        return []
    major, minor = get_device_capability()
    return [f"sm_{major}{minor}"]


def is_bf16_supported(including_emulation=True):
    return is_available() and get_device_capability()[0] >= 8


def synchronize(device=None):
    """Waits for every kernel on the device to finish."""
    _device_index(device)
    _import_cupy().cuda.runtime.deviceSynchronize()


def memory_allocated(device=None):
    """Bytes of CUDA memory ember's tensors hold now (ember.memory.stats('cuda'))."""
    return _memory.stats("cuda")["allocated_bytes"]


def max_memory_allocated(device=None):
    return _memory.stats("cuda")["peak_allocated_bytes"]


def reset_peak_memory_stats(device=None):
    _memory.reset_peak_stats("cuda")


def memory_reserved(device=None):
    """Bytes CuPy's memory pool holds (used or cached); 0 before CUDA is used."""
    if not _initialized:
        return 0
    return _import_cupy().get_default_memory_pool().total_bytes()


max_memory_reserved = memory_reserved


def empty_cache():
    """Gives the blocks CuPy's pool caches back to the driver (nothing before first use)."""
    if _initialized:
        _import_cupy().get_default_memory_pool().free_all_blocks()


class CupyAllocator:
    """CUDA memory from CuPy's memory pool, in ember.memory's allocator protocol.

    malloc keeps CuPy's MemoryPointer until ember frees the block, so the
    pool does not reuse memory a tensor still holds; with CuPy's default
    allocator (the pool) ember and CuPy code in one process share one pool.
    """

    def __init__(self):
        self._alloc = _import_cupy().cuda.alloc
        self.blocks = {}  # address -> the cupy.cuda.MemoryPointer that owns it

    def malloc(self, nbytes):
        pointer = self._alloc(nbytes)
        self.blocks[pointer.ptr] = pointer
        return pointer.ptr

    def free(self, address):
        del self.blocks[address]  # back to CuPy's pool

    def __repr__(self):
        return f"CupyAllocator(live_blocks={len(self.blocks)})"


def manual_seed(seed):
    """Seeds ember's CUDA generator (a Philox key: ember/cuda/_random.py).
    No GPU is needed to seed it, as in PyTorch."""
    _random.default_generator.manual_seed(seed)


manual_seed_all = manual_seed  # one device


def seed():
    """Seeds the CUDA generator from the operating system's entropy."""
    import os
    manual_seed(int.from_bytes(os.urandom(8), "little"))


seed_all = seed


def initial_seed():
    _lazy_init()
    return _random.default_generator.initial_seed()


def get_rng_state(device="cuda"):
    """The CUDA generator's state: 16 bytes (seed, offset) in a uint8 tensor."""
    _lazy_init()
    return _C.from_numpy(_random.default_generator.get_state().copy())


def set_rng_state(new_state, device="cuda"):
    _lazy_init()
    _random.default_generator.set_state(new_state.numpy())


_C._set_device_initializer("cuda", _lazy_init)

from .streams import Event, Stream, current_stream, default_stream, stream  # noqa: E402
