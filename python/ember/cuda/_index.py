"""Indexing along a dim on the GPU: gather (and index_select) and scatter-add
(and index_add), from two kernel templates.

Both walk a shape S element by element (linear index i, innermost dim
first) and read one index k per element:

  gather      out[i] = input[c with c[dim] = k]        S = the result's shape
  scatter_add target[c with c[dim] = k] += alpha * source[i]    S = source's

where c are i's coordinates and k = index[i's offset by the index's
strides].  index_select(input, dim, idx) is the gather whose index has
stride 0 in every dim but `dim`; index_add the scatter-add likewise.  The
sums of scatter-add are atomicAdd: with repeated indices the order of the
additions (and so a float result's last bit) varies between runs, as in
PyTorch's CUDA kernels.

An index outside [0, size) stops nothing on the device; the kernel
records it in a two-word error slot (flag, value), and the host reads the
slot after the launch and raises the CPU operators' errors.
"""

import ctypes
import functools

from . import _kernels, _pointwise

__all__ = ["DTYPES", "INDEX_DTYPES", "kernel_name", "kernel_source", "kernel_parameters",
           "headers", "EmberIndexGeometry", "geometry"]

PRELUDE_NAME = "ember_index.h"
DTYPES = _pointwise.DTYPES
INDEX_DTYPES = ("int32", "int64")
ATOMIC_DTYPES = ("float32", "float64", "int32")  # atomicAdd's types
MAX_DIMS = _kernels.MAX_DIMS

_PRELUDE = f"""\
#ifndef EMBER_INDEX_H
#define EMBER_INDEX_H
#include "{_pointwise.PRELUDE_NAME}"

/* S's sizes and three tensors' element strides, innermost dim first: the
 * tensor indexed along `dim` (gathered from or scattered into), the other
 * one (the result or the source, walked in order) and the index. */
typedef struct {{
    int64_t sizes[EMBER_MAX_DIMS];
    int64_t indexed_strides[EMBER_MAX_DIMS];
    int64_t other_strides[EMBER_MAX_DIMS];
    int64_t index_strides[EMBER_MAX_DIMS];
    int64_t dim_size;  /* the indexed tensor's size along dim */
    int32_t ndim, dim; /* dim counted innermost first */
}} EmberIndexGeometry;

typedef struct {{
    int64_t indexed, other, index;
}} EmberIndexOffsets;

/* The offsets of linear index i, the indexed tensor's without dim's term. */
static __device__ __forceinline__ EmberIndexOffsets
ember_index_offsets(int64_t i, const EmberIndexGeometry &g)
{{
    EmberIndexOffsets o = {{0, 0, 0}};
#pragma unroll 1
    for (int d = 0; d < EMBER_MAX_DIMS; d++) {{
        if (d == g.ndim) {{
            break;
        }}
        int64_t coordinate = i % g.sizes[d];
        i /= g.sizes[d];
        if (d != g.dim) {{
            o.indexed += coordinate * g.indexed_strides[d];
        }}
        o.other += coordinate * g.other_strides[d];
        o.index += coordinate * g.index_strides[d];
    }}
    return o;
}}

/* k itself when in [0, size) (no wrapping of negative indices, as in
 * PyTorch's gather and scatter), else -1 after recording the bad value. */
static __device__ __forceinline__ int64_t
ember_checked_index(int64_t k, int64_t size, int64_t *error)
{{
    if (k < 0 || k >= size) {{
        error[1] = k;
        error[0] = 1;
        return -1;
    }}
    return k;
}}
#endif
"""


def _check_key(kind, dtype, index_dtype):
    if kind not in ("gather", "scatter_add") or dtype not in DTYPES \
            or index_dtype not in INDEX_DTYPES \
            or (kind == "scatter_add" and dtype not in ATOMIC_DTYPES):
        raise ValueError(f"no {kind} kernel for {dtype} with {index_dtype} indices")


def kernel_name(kind, dtype, index_dtype):
    return f"ember_{kind}_{dtype}_{index_dtype}"


@functools.cache
def kernel_source(kind, dtype, index_dtype):
    _check_key(kind, dtype, index_dtype)
    ctype, itype = DTYPES[dtype][1], DTYPES[index_dtype][1]
    name = kernel_name(kind, dtype, index_dtype)
    if kind == "gather":
        params = f"{ctype} *out, const {ctype} *in"
        body = "out[o.other] = in[o.indexed + k * g.indexed_strides[g.dim]];"
    else:
        params = f"{ctype} *target, const {ctype} *source"
        body = ("atomicAdd(&target[o.indexed + k * g.indexed_strides[g.dim]],\n"
                "                  alpha * source[o.other]);")
    return (f'#include "{PRELUDE_NAME}"\n\n'
            f'extern "C" __global__ void\n'
            f"{name}({params}, const {itype} *index, int64_t n, EmberIndexGeometry g,\n"
            f"{' ' * (len(name) + 1)}{ctype} alpha, int64_t *error)\n"
            f"{{\n"
            f"    (void)alpha;\n"
            f"    EMBER_FOR_EACH_INDEX(i, n) {{\n"
            f"        EmberIndexOffsets o = ember_index_offsets(i, g);\n"
            f"        int64_t k = ember_checked_index((int64_t)index[o.index], g.dim_size, error);\n"
            f"        if (k >= 0) {{\n"
            f"            {body}\n"
            f"        }}\n"
            f"    }}\n"
            f"}}\n")


def kernel_parameters(kind, dtype, index_dtype):
    ctype, itype = DTYPES[dtype][1], DTYPES[index_dtype][1]
    first = ("out", "in") if kind == "gather" else ("target", "source")
    return [(f"{ctype} *", first[0]), (f"const {ctype} *", first[1]),
            (f"const {itype} *", "index"), ("int64_t", "n"),
            ("EmberIndexGeometry", "g"), (ctype, "alpha"), ("int64_t *", "error")]


def headers():
    return dict(_pointwise.headers(), **{PRELUDE_NAME: _PRELUDE})


class EmberIndexGeometry(ctypes.Structure):
    _fields_ = [("sizes", ctypes.c_int64 * MAX_DIMS),
                ("indexed_strides", ctypes.c_int64 * MAX_DIMS),
                ("other_strides", ctypes.c_int64 * MAX_DIMS),
                ("index_strides", ctypes.c_int64 * MAX_DIMS),
                ("dim_size", ctypes.c_int64), ("ndim", ctypes.c_int32),
                ("dim", ctypes.c_int32)]


def geometry(shape, dim, dim_size, indexed_strides, other_strides, index_strides):
    """The kernel's geometry from outermost-first sizes and strides."""
    ndim = len(shape)
    if ndim > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} dimensions, got {ndim}")
    g = EmberIndexGeometry(ndim=ndim, dim=ndim - 1 - dim, dim_size=dim_size)
    for d in range(ndim):
        inner = ndim - 1 - d
        g.sizes[inner] = shape[d]
        g.indexed_strides[inner] = indexed_strides[d]
        g.other_strides[inner] = other_strides[d]
        g.index_strides[inner] = index_strides[d]
    return g
