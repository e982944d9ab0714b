"""Run ember's CUDA kernel sources on the CPU: compiled as host C++ by g++.

The kernel sources of ember.cuda._kernels are CUDA C++ whose only CUDA-isms
are the qualifiers (__global__, __device__, __forceinline__) and the thread
coordinates (blockIdx, threadIdx, blockDim, gridDim).  EMULATION_HEADER
defines the qualifiers away and the coordinates as globals, and each kernel
gets an `emulate_<kernel>(grid, block, ...)` launcher that runs every
(block, thread) of the grid in turn.  One thread at a time is exactly a GPU
for kernels without shared memory or synchronisation, which elementwise
kernels are.  The formulas then call the C library's math (through
libstdc++'s overloads) as the CPU build does, so the results must match the
CPU operators bit for bit (Note [One formula, two compilers] in
c/th/THFloatFormulas.h).

Reductions use shared memory and __syncthreads(): their launcher
(`ember_emulate_launch_cooperative`) runs a block's threads at once, one
std::thread each, with __syncthreads() a std::barrier and __shared__
variables static (one copy, the block's, since blocks run one at a time).
That is a real block: the tree's steps interleave across threads as on a
GPU, within the barriers.

Built with -ffp-contract=off, the CPU build's floating-point rule.
"""

import hashlib

import ctypes
import os
import shutil
import subprocess

from ember.cuda import _kernels, _launch

EMULATION_HEADER = r"""
#ifndef EMBER_CUDA_EMULATION_H
#define EMBER_CUDA_EMULATION_H
#include <stdint.h>
#include <string.h>

#include <barrier>
#include <memory>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static

struct ember_dim3 {
    unsigned x, y, z;
};
static ember_dim3 blockIdx, blockDim, gridDim;
static thread_local ember_dim3 threadIdx;
static std::unique_ptr<std::barrier<>> ember_block_barrier;

/* Sequential launches need no atomicity: a read, an add (or a compare),
 * a write. */
template <typename T>
static inline T
atomicAdd(T *address, T value)
{
    T old = *address;
    *address = old + value;
    return old;
}

template <typename Word> /* unsigned int and unsigned long long, as CUDA's */
static inline Word
atomicCAS(Word *address, Word compare, Word value)
{
    Word old = *address;
    *address = old == compare ? value : old;
    return old;
}

static inline void
__syncthreads()
{
    ember_block_barrier->arrive_and_wait();
}

/* Every (block, thread) of a one-dimensional grid, one after another. */
template <typename Kernel, typename... Args>
static void
ember_emulate_launch(Kernel kernel, unsigned grid, unsigned block, Args... args)
{
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    for (unsigned b = 0; b < grid; b++) {
        for (unsigned t = 0; t < block; t++) {
            blockIdx = {b, 0, 0};
            threadIdx = {t, 0, 0};
            kernel(args...);
        }
    }
}

/* Every block in turn, its threads at once (kernels with __syncthreads). */
template <typename Kernel, typename... Args>
static void
ember_emulate_launch_cooperative(Kernel kernel, unsigned grid, unsigned block,
                                 Args... args)
{
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    ember_block_barrier = std::make_unique<std::barrier<>>(block);
    for (unsigned b = 0; b < grid; b++) {
        blockIdx = {b, 0, 0};
        std::vector<std::thread> threads;
        for (unsigned t = 0; t < block; t++) {
            threads.emplace_back([=] {
                threadIdx = {t, 0, 0};
                kernel(args...);
            });
        }
        for (std::thread &thread : threads) {
            thread.join();
        }
    }
    ember_block_barrier.reset();
}
#endif
"""

# The kernels' parameters after `in, out, n` (struct arguments arrive as
# pointers from ctypes and are passed on by value, as a launch would).
_EXTRA_PARAMS = {
    "contiguous": (("THUnaryParams", "params"),),
    "strided": (("EmberStrides", "strides"), ("THUnaryParams", "params")),
}


def _launcher(op, dtype, rank_class):
    name, ctype = _kernels.kernel_name(op, dtype, rank_class), _kernels.DTYPES[dtype]
    extra = _EXTRA_PARAMS[rank_class]
    params = "".join(f", const {t} *{v}" for t, v in extra)
    args = "".join(f", *{v}" for _, v in extra)
    return (f'extern "C" void\nemulate_{name}(unsigned grid, unsigned block, '
            f"const {ctype} *in, {ctype} *out, int64_t n{params})\n"
            f"{{\n    ember_emulate_launch({name}, grid, block, in, out, n{args});\n}}\n")


def emulation_source(dtype):
    """Every unary kernel of `dtype`, each with its launcher, as one C++ file."""
    parts = ['#include "cuda_emulation.h"']
    for op in _kernels.float_formulas():
        for rank_class in _kernels.RANK_CLASSES:
            parts.append(_kernels.kernel_source(op, dtype, rank_class))
            parts.append(_launcher(op, dtype, rank_class))
    return "\n".join(parts)


def params_launcher(name, parameters, cooperative=False):
    """`emulate_<name>(grid, block, void **params)`: the kernel's arguments
    as cuLaunchKernel takes them (ember.cuda._launch.kernel_params), read
    back by the types of `parameters` [(C type, name)]."""
    unpack = ", ".join(f"*({t} *)params[{k}]" for k, (t, _) in enumerate(parameters))
    launch = "ember_emulate_launch_cooperative" if cooperative else "ember_emulate_launch"
    return (f'extern "C" void\nemulate_{name}(unsigned grid, unsigned block, void **params)\n'
            f"{{\n    {launch}({name}, grid, block, {unpack});\n}}\n")


def _run_compiler(arguments):
    """g++ -shared with the flags every emulation library shares, plus
    `arguments`.  The compiler runs without the sanitizer preload: under the
    ASan gate (LD_PRELOAD=libasan.so) LeakSanitizer would report g++'s own
    leaks as its exit status."""
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("LD_PRELOAD", "ASAN_OPTIONS", "LSAN_OPTIONS")}
    return subprocess.run([compiler(), "-std=c++20", "-ffp-contract=off", "-fPIC", "-shared",
                           "-Wall", "-Wno-unknown-pragmas", "-Werror", *arguments],
                          capture_output=True, text=True, env=environment)


def build_sources(stem, sources, headers, directory):
    """Compile the C++ `sources` (one translation unit, with the emulation
    header and `headers`) into `directory`/`stem`-<hash>.so and load it;
    an identical earlier build is reused."""
    headers = dict(headers, **{"cuda_emulation.h": EMULATION_HEADER})
    text = '#include "cuda_emulation.h"\n' + "\n".join(sources)
    digest = hashlib.sha256(repr((text, sorted(headers.items()))).encode()).hexdigest()[:16]
    library = os.path.join(directory, f"{stem}-{digest}.so")
    if not os.path.exists(library):
        include = os.path.join(directory, f"include-{digest}")
        os.makedirs(include, exist_ok=True)
        for include_name, header in headers.items():
            with open(os.path.join(include, include_name), "w") as f:
                f.write(header)
        source = os.path.join(directory, f"{stem}-{digest}.cc")
        with open(source, "w") as f:
            f.write(text)
        tmp = f"{library}.{os.getpid()}"
        done = _run_compiler(["-O1", "-pthread", "-Wno-unused-function", "-I", include,
                              source, "-o", tmp])
        if done.returncode != 0:
            raise RuntimeError(f"g++ could not compile {stem}:\n{done.stderr[-6000:]}")
        os.replace(tmp, library)
    return ctypes.CDLL(library)


def compiler():
    return shutil.which(os.environ.get("CXX", "g++"))


def build(dtype, directory):
    """Compile `dtype`'s kernels into a shared library in `directory`; load it."""
    headers = dict(_kernels.headers(), **{"cuda_emulation.h": EMULATION_HEADER})
    for include_name, text in headers.items():
        with open(os.path.join(directory, include_name), "w") as f:
            f.write(text)
    source = os.path.join(directory, f"unary_{dtype}.cc")
    with open(source, "w") as f:
        f.write(emulation_source(dtype))
    library = os.path.join(directory, f"unary_{dtype}.so")
    done = _run_compiler(["-O2", "-pthread", "-I", directory, source, "-o", library])
    if done.returncode != 0:
        raise RuntimeError(f"g++ could not compile the {dtype} kernels:\n{done.stderr}")
    return ctypes.CDLL(library)


class EmulatedRuntime:
    """ember.cuda's kernel runtime (ember.cuda._runtime) on the CPU: each
    kernel's own source compiled by g++ with the emulation header, launched
    on host memory, and memcpy a memmove.  With a host allocator installed
    for 'cuda', ember's whole CUDA path (the C dispatch, the launcher's
    plans, the arguments, the kernels) runs on a machine without a GPU."""

    def __init__(self, directory):
        self.directory = directory
        self.launches = []  # kernel names, in launch order
        self._functions = {}

    def memcpy(self, destination, source, nbytes, kind):
        ctypes.memmove(destination, source, nbytes)

    def preload(self, stem, kernels):
        """Compiles `kernels` (ember.cuda._runtime.Kernel values) into one
        library `stem`, one g++ run for all (each run's cost is mostly the
        headers), and launches them from it afterwards."""
        kernels = [kernel for kernel in kernels if kernel.name not in self._functions]
        if not kernels:
            return
        sources, headers = [], {}
        for kernel in kernels:
            sources += [kernel.source,
                        params_launcher(kernel.name, kernel.parameters, kernel.cooperative)]
            headers.update(kernel.headers)
        library = build_sources(stem, sources, headers, self.directory)
        for kernel in kernels:
            self._functions[kernel.name] = getattr(library, f"emulate_{kernel.name}")

    def launch(self, kernel, grid, block, arguments):
        function = self._functions.get(kernel.name)
        if function is None:
            launcher = params_launcher(kernel.name, kernel.parameters, kernel.cooperative)
            library = build_sources(kernel.name, [kernel.source, launcher], kernel.headers,
                                    self.directory)
            function = self._functions[kernel.name] = getattr(library, f"emulate_{kernel.name}")
        self.launches.append(kernel.name)
        function(ctypes.c_uint(grid), ctypes.c_uint(block), _launch.kernel_params(arguments))

    def matmul(self, out, a, b):
        """cuBLAS's part, which is a library's and not ember's: NumPy's
        matmul on the same host memory (what is tested is ember's side of
        the call: shapes, strides, dtypes, the result, autograd)."""
        import numpy as np
        self.launches.append("matmul")
        np.matmul(_host_array(a), _host_array(b), out=_host_array(out))


def _host_array(tensor):
    """An ndarray over the host memory an emulated CUDA tensor lives in."""
    import numpy as np
    itemsize = tensor.element_size()
    span = itemsize * (1 + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride())))
    base = np.frombuffer((ctypes.c_char * span).from_address(tensor.data_ptr()),
                         dtype=str(tensor.dtype).removeprefix("ember."))
    return np.lib.stride_tricks.as_strided(base, tuple(tensor.shape),
                                           tuple(s * itemsize for s in tensor.stride()))
