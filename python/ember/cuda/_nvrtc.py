"""NVRTC through ctypes: CUDA C++ source to a cubin (SASS), with no GPU.

NVIDIA's runtime compiler needs neither a driver nor a device, so the
kernels ember generates can be compiled, and ptxas's resource report read,
on any machine that has the `nvidia-cuda-nvrtc` wheel (`pip install
ember[cuda]`).  CuPy's own compile path asks the driver for the device's
architecture first, which is why ember calls NVRTC directly.

    cubin, registers, spill_bytes, log = compile(source, "sm_90")

`registers` and `spill_bytes` map each kernel (its extern "C" name) to
ptxas's "Used N registers" and "N bytes spill stores" for it.
"""

import ctypes
import glob
import os
import re

__all__ = ["NVRTCError", "available", "compile", "version"]

_INSTALL_HINT = ("install it with `pip install ember[cuda]` (or `pip install "
                 "nvidia-cuda-nvrtc`)")


class NVRTCError(RuntimeError):
    """A kernel that NVRTC refused; the message carries NVRTC's log."""


def _wheel_libraries():
    """libnvrtc.so.* inside the nvidia-cuda-nvrtc wheel, newest CUDA first."""
    try:
        import nvidia  # the wheels' namespace package
    except ImportError:
        return []
    found = []
    for root in nvidia.__path__:
        found += glob.glob(os.path.join(root, "cu*", "lib", "libnvrtc.so.*"))
        found += glob.glob(os.path.join(root, "cuda_nvrtc", "lib", "libnvrtc.so.*"))
    return sorted(found, reverse=True)


_lib = None


def _library():
    global _lib
    if _lib is None:
        candidates = _wheel_libraries()
        if not candidates:
            raise ImportError("ember.cuda: NVIDIA's runtime compiler (NVRTC) is not "
                              f"installed; {_INSTALL_HINT}")
        # libnvrtc dlopens its builtins by soname through its RUNPATH
        # ($ORIGIN).  A preloaded sanitizer's dlopen interceptor hides the
        # caller, so that lookup fails under the ASan gate; loading the
        # builtins by full path first makes the soname lookup find them.
        for builtins in glob.glob(os.path.join(os.path.dirname(candidates[0]),
                                               "libnvrtc-builtins.so.*")):
            ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
        lib = ctypes.CDLL(candidates[0])
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        _lib = lib
    return _lib


def available():
    """True when the NVRTC wheel can be loaded."""
    try:
        _library()
    except (ImportError, OSError):
        return False
    return True


def _check(lib, status, what):
    if status != 0:
        raise NVRTCError(f"{what}: {lib.nvrtcGetErrorString(status).decode()}")


def version():
    """NVRTC's (major, minor) CUDA version."""
    lib = _library()
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(lib, lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return major.value, minor.value


def _read(lib, prog, size_fn, data_fn):
    size = ctypes.c_size_t()
    _check(lib, size_fn(prog, ctypes.byref(size)), size_fn.__name__)
    buf = ctypes.create_string_buffer(size.value)
    _check(lib, data_fn(prog, buf), data_fn.__name__)
    return buf.raw[:size.value]


# ptxas -v, per kernel:
#   ptxas info    : Compiling entry function 'name' for 'sm_90'
#   ptxas info    : Function properties for name
#       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
#   ptxas info    : Used 12 registers, used 0 barriers, 380 bytes cmem[0]
_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_SPILL = re.compile(r"(\d+) bytes spill stores")
_REGISTERS = re.compile(r"Used (\d+) registers")


def _resources(log):
    """{kernel: registers}, {kernel: spill store bytes} from ptxas's report."""
    registers, spills, kernel = {}, {}, None
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            kernel = m.group(1)
        elif kernel is not None and (m := _SPILL.search(line)):
            spills[kernel] = int(m.group(1))
        elif kernel is not None and (m := _REGISTERS.search(line)):
            registers[kernel] = int(m.group(1))
    return registers, spills


def compile(source, arch, headers=None, name="kernel.cu", options=()):
    """Compile CUDA C++ `source` for `arch` ("sm_80", "sm_90", ...).

    `headers` maps include names to their text (what `#include "name"`
    finds).  Floating-point contraction is off (--fmad=false), as in the
    CPU build (Note [No FMA contraction] in c/th/THFormulas.h).  Returns
    (cubin bytes, {kernel: registers}, {kernel: spill store bytes}, log);
    raises NVRTCError with NVRTC's log when the source does not compile.
    """
    lib = _library()
    headers = dict(headers or {})
    n = len(headers)
    texts = (ctypes.c_char_p * n)(*(t.encode() for t in headers.values()))
    names = (ctypes.c_char_p * n)(*(k.encode() for k in headers))
    prog = ctypes.c_void_p()
    _check(lib, lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(),
                                       n, texts, names), "nvrtcCreateProgram")
    try:
        opts = [f"--gpu-architecture={arch}", "--fmad=false", "-Xptxas", "-v", *options]
        argv = (ctypes.c_char_p * len(opts))(*(o.encode() for o in opts))
        status = lib.nvrtcCompileProgram(prog, len(opts), argv)
        log = _read(lib, prog, lib.nvrtcGetProgramLogSize,
                    lib.nvrtcGetProgramLog).rstrip(b"\0").decode(errors="replace")
        if status != 0:
            raise NVRTCError(f"NVRTC could not compile {name} for {arch} "
                             f"({lib.nvrtcGetErrorString(status).decode()}):\n{log}")
        cubin = _read(lib, prog, lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
    registers, spills = _resources(log)
    return cubin, registers, spills, log
