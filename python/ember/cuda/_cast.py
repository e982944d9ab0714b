"""CUDA sources of the casts between ember's dtypes, and the host side of one.

to(dtype), half()/float()/..., and copy_ between dtypes on CUDA tensors
convert on the device with one kernel per

    (source dtype, destination dtype, rank class)

for every pair of the ten dtypes (THCopy.c's cast_loops, on the device):

  contiguous   source and destination dense, of one shape: index i;
  strided      any sizes and strides (a broadcast source dim has stride
               0), in an EmberStrides (_kernels.pack_strides).

Each element converts as the CPU's TH_CONVERT(Src, Dst, x) (c/th/THDtype.h):
C's conversion between arithmetic types, through float32 to or from a
half-precision dtype (ember_widen, then ember_store's one rounding to
nearest even: Note [Half precision on the device]), except a floating
value to an integer type, which C leaves undefined out of range: the
kernels spell out what the CPU does (Note [Float to integer casts]).
Within one dtype the elements move as bits, as the CPU's copy_ moves them.
"""

import ctypes

from . import _kernels, _pointwise

__all__ = ["DTYPES", "RANK_CLASSES", "kernel_name", "kernel_source", "kernel_parameters",
           "headers", "plan", "arguments"]

HEADER_NAME = "ember_cast.h"
DTYPES = _pointwise.DTYPES
RANK_CLASSES = _kernels.RANK_CLASSES
FLOATING = _pointwise.FLOATING
INTEGERS = {"uint8", "int8", "int16", "int32", "int64"}

# Note [Float to integer casts]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# C leaves converting a floating value to an integer type that cannot hold
# its truncation undefined.  ember's CPU build (x86-64) truncates into int64
# for int64, and into int32 for the narrower types, whose conversion then
# keeps the low bits; the processor gives its "integer indefinite" value,
# the type's minimum, for NaN, the infinities and values out of range.  So
# 300.0 -> int8 is 44, 1e10 -> int32 is -2^31 and NaN -> uint8 is 0.  A
# GPU's conversions saturate instead (and take NaN to 0), so the kernels
# spell the CPU's rule out with comparisons that are defined everywhere,
# and the device's casts are the CPU's bit for bit, for every value
# (PyTorch leaves these casts undefined, and its CPU and GPU disagree).
_HEADER = f"""\
#ifndef EMBER_CAST_H
#define EMBER_CAST_H
#include "{_pointwise.PRELUDE_NAME}"

/* Note [Float to integer casts] in ember/cuda/_cast.py: truncation where it
 * fits the x86 conversion's type, its minimum otherwise (NaN included). */
template <typename F>
static __device__ __forceinline__ int32_t
ember_float_to_int32(F x)
{{
    return (double)x > -2147483649.0 && (double)x < 2147483648.0
               ? (int32_t)x
               : (int32_t)(-2147483647 - 1);
}}

template <typename F>
static __device__ __forceinline__ int64_t
ember_float_to_int64(F x)
{{
    return (double)x >= -9223372036854775808.0 && (double)x < 9223372036854775808.0
               ? (int64_t)x
               : (int64_t)(-9223372036854775807LL - 1);
}}
#endif
"""

_BODY = {
    "contiguous": ("", "i", "i"),
    "strided": ("        EmberOffsets o = ember_offsets(i, strides);\n", "o.in", "o.out"),
}


def kernel_name(src, dst, rank_class):
    return f"ember_cast_{src}_to_{dst}_{rank_class}"


def _check_key(src, dst, rank_class):
    for dtype in (src, dst):
        if dtype not in DTYPES:
            raise ValueError(f"casts are generated for {sorted(DTYPES)}, not {dtype!r}")
    if rank_class not in RANK_CLASSES:
        raise ValueError(f"rank class must be one of {RANK_CLASSES}, not {rank_class!r}")


def conversion(src, dst, value):
    """C text converting `value` (the source element) as TH_CONVERT(Src,
    Dst, value) does, for ember_store to put into the destination."""
    if src == dst:
        return value  # the bits, as the CPU's copy_
    widened = f"ember_widen({value})"  # float32 for a half-precision source
    if dst in _pointwise.LOOP_DTYPES:
        return f"(float){widened}"  # TH_FROM_FLOAT_Float16's (float)(x)
    if dst in INTEGERS and src in FLOATING:
        width = 64 if dst == "int64" else 32
        return f"ember_float_to_int{width}({widened})"
    return widened


def kernel_source(src, dst, rank_class):
    """The CUDA C++ source of one cast kernel (it includes HEADER_NAME)."""
    _check_key(src, dst, rank_class)
    name = kernel_name(src, dst, rank_class)
    src_t, dst_t = DTYPES[src][1], DTYPES[dst][1]
    offsets, in_at, out_at = _BODY[rank_class]
    extra = ", EmberStrides strides" if rank_class == "strided" else ""
    value = conversion(src, dst, f"in[{in_at}]")
    return (f'#include "{HEADER_NAME}"\n\n'
            f'extern "C" __global__ void\n'
            f"{name}(const {src_t} *in, {dst_t} *out, int64_t n{extra})\n"
            f"{{\n"
            f"    EMBER_FOR_EACH_INDEX(i, n) {{\n"
            f"{offsets}"
            f"        ember_store(out[{out_at}], {value});\n"
            f"    }}\n"
            f"}}\n")


def kernel_parameters(src, dst, rank_class):
    """[(C type, name)] of the kernel's parameters, in order."""
    result = [(f"const {DTYPES[src][1]} *", "in"), (f"{DTYPES[dst][1]} *", "out"),
              ("int64_t", "n")]
    if rank_class == "strided":
        result.append(("EmberStrides", "strides"))
    return result


def headers():
    return dict(_pointwise.headers(), **{HEADER_NAME: _HEADER})


# ---- the host side ----------------------------------------------------------------

def _dtype_name(dtype):
    return str(dtype).removeprefix("ember.")


def plan(destination, source):
    """(kernel key, packed strides or None) of copying `source` (of the
    destination's shape, or broadcastable to it) into `destination`,
    converting; only metadata is read."""
    shape = tuple(destination.shape)
    source = source.expand(shape)
    dense = destination.is_contiguous() and source.is_contiguous()
    rank_class = "contiguous" if dense else "strided"
    key = (_dtype_name(source.dtype), _dtype_name(destination.dtype), rank_class)
    strides = None if dense else _kernels.pack_strides(shape, source.stride(),
                                                        destination.stride())
    return key, strides


def arguments(strides, out_ptr, in_ptr, numel):
    """The kernel's arguments as ctypes values, in its parameter order."""
    args = [ctypes.c_void_p(in_ptr), ctypes.c_void_p(out_ptr), ctypes.c_int64(numel)]
    return args if strides is None else args + [strides]
