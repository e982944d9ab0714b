"""The host side of ember's generated kernels: launch shapes, arguments, cubins.

Nothing here needs a GPU, so all of it is unit-tested on the CPU:

  launch_config(numel)            grid and block of an elementwise kernel;
  reduce_launch_config(n_out, n)  grid and block of a block reduction;
  kernel_params(args)             the `void **` array cuLaunchKernel takes:
                                  one pointer to each argument's bytes;
  compile_cached(source, arch)    NVRTC's cubin and resource report, kept
                                  on disk keyed by a hash of the source,
                                  the headers, the arch and NVRTC's version.

A kernel's cache key is (operator, dtypes, rank class, arch): the source
is a function of the first three, the cubin of the source and the arch.
"""

import ctypes
import functools
import hashlib
import json
import os
from collections import namedtuple

__all__ = ["DEFAULT_SM_COUNT", "ELEMENTWISE_THREADS", "MAX_REDUCE_THREADS",
           "sm_count", "launch_config", "reduce_launch_config", "kernel_params",
           "cache_dir", "compile_cached", "Compiled"]

# An H100/H200 has 132 SMs, an A100 108: when no device can be asked, the
# larger keeps a grid-stride loop's grid big enough for either.
DEFAULT_SM_COUNT = 132
ELEMENTWISE_THREADS = 256
# Resident blocks per SM an elementwise grid aims for: 8 x 256 threads
# fills an SM's 2048 thread slots (at <= 32 registers a thread; at 64 the
# hardware runs half of them, and the grid-stride loop covers the rest).
BLOCKS_PER_SM = 8
MAX_REDUCE_THREADS = 512
MIN_REDUCE_THREADS = 32  # one warp


@functools.cache
def sm_count(device=None):
    """The device's multiprocessor count, or DEFAULT_SM_COUNT without one.
    Asked once per device: every launch plans its grid with it, and the
    question costs ~120 us (a failing `import cupy` searches sys.path each
    time; CuPy's `attributes` reads every attribute of the device)."""
    try:
        import cupy
        with cupy.cuda.Device(device or 0) as d:
            return d.attributes["MultiProcessorCount"]
    except Exception:  # no CuPy, no driver or no device: plan for a default
        return DEFAULT_SM_COUNT


def _ceil_div(a, b):
    return -(-a // b)


def launch_config(numel, sms=None, threads=ELEMENTWISE_THREADS):
    """((grid,), (block,)) for a grid-stride elementwise kernel over numel
    elements: one element per thread up to BLOCKS_PER_SM blocks per SM,
    then each thread loops.  Never an empty grid (CUDA refuses one)."""
    if numel < 0:
        raise ValueError(f"numel must be non-negative, got {numel}")
    sms = sms or sm_count()
    blocks = max(1, min(_ceil_div(numel, threads), sms * BLOCKS_PER_SM))
    return (blocks,), (threads,)


def _power_of_two_at_least(n):
    return 1 << max(0, (n - 1).bit_length())


def reduce_launch_config(n_out, n_reduce, sms=None):
    """((grid,), (block,)) for a block reduction: one block per output
    (blocks loop over outputs past the grid), a power of two of threads
    (the shared-memory tree halves it) between a warp and
    MAX_REDUCE_THREADS, no more than the reduced extent needs."""
    if n_out < 0 or n_reduce < 0:
        raise ValueError("reduction extents must be non-negative")
    threads = min(MAX_REDUCE_THREADS, max(MIN_REDUCE_THREADS, _power_of_two_at_least(n_reduce)))
    sms = sms or sm_count()
    per_sm = max(1, 2048 // threads)
    blocks = max(1, min(n_out, sms * per_sm))
    return (blocks,), (threads,)


def kernel_params(args):
    """The array of argument addresses cuLaunchKernel (and the CPU
    emulation's launchers) take, from ctypes values in the kernel's
    parameter order.  The caller keeps `args` alive while it is used."""
    params = (ctypes.c_void_p * len(args))()
    for k, a in enumerate(args):
        params[k] = ctypes.cast(ctypes.pointer(a), ctypes.c_void_p)
    return params


# ---- compiled kernels, cached on disk ----------------------------------------------

Compiled = namedtuple("Compiled", "cubin registers spill_bytes")


def cache_dir():
    """Where cubins are kept: $EMBER_KERNEL_CACHE, else ~/.cache/ember/kernels."""
    if path := os.environ.get("EMBER_KERNEL_CACHE"):
        return path
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ember", "kernels")


def _cache_key(source, arch, headers):
    from . import _nvrtc
    h = hashlib.sha256()
    for part in (repr(_nvrtc.version()), arch, source, *sorted(headers.items())):
        h.update(repr(part).encode())
    return h.hexdigest()


def compile_cached(source, arch, headers, name="kernel.cu", directory=None):
    """_nvrtc.compile's cubin, {kernel: registers} and {kernel: spill
    bytes}, read from the disk cache (`directory`, else cache_dir()) when
    this exact compile ran before."""
    from . import _nvrtc
    directory = directory or cache_dir()
    stem = os.path.join(directory, _cache_key(source, arch, headers))
    try:
        with open(stem + ".json") as f:
            report = json.load(f)
        with open(stem + ".cubin", "rb") as f:
            return Compiled(f.read(), report["registers"], report["spills"])
    except (OSError, ValueError, KeyError):
        pass
    cubin, registers, spills, _ = _nvrtc.compile(source, arch, headers, name=name)
    try:
        os.makedirs(directory, exist_ok=True)
        # written under temporary names and renamed: readers never see half
        for suffix, data, mode in ((".cubin", cubin, "wb"),
                                   (".json", json.dumps({"registers": registers,
                                                         "spills": spills}), "w")):
            tmp = f"{stem}{suffix}.{os.getpid()}"
            with open(tmp, mode) as f:
                f.write(data)
            os.replace(tmp, stem + suffix)
    except OSError:
        pass  # a read-only cache only costs the next compile
    return Compiled(cubin, registers, spills)
