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

Built with -O2 -ffp-contract=off, the CPU build's floating-point rule.
"""

import ctypes
import os
import shutil
import subprocess

from ember.cuda import _kernels

EMULATION_HEADER = r"""
#ifndef EMBER_CUDA_EMULATION_H
#define EMBER_CUDA_EMULATION_H
#include <stdint.h>
#include <string.h>

#define __global__
#define __device__
#define __forceinline__ inline

struct ember_dim3 {
    unsigned x, y, z;
};
static ember_dim3 blockIdx, threadIdx, blockDim, gridDim;

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
    done = subprocess.run([compiler(), "-std=c++17", "-O2", "-ffp-contract=off", "-fPIC",
                           "-shared", "-Wall", "-Wno-unknown-pragmas", "-Werror",
                           "-I", directory, source, "-o", library],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"g++ could not compile the {dtype} kernels:\n{done.stderr}")
    return ctypes.CDLL(library)
