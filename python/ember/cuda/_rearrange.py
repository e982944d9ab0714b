"""The kernels that move elements to new places: flip, roll, repeat, tril/triu.

Each result element is one input element (or, outside tril's or triu's
triangle, a zero), so one kernel template per dtype serves them all.  It
walks the result's shape (linear index i, innermost dim first) and reads,
for result coordinate c in dim d, input coordinate

    (c + shift[d]) % in_size[d]

through the input's strides:

  flip     shift 0, in_size the size; the flipped dims read backwards: the
           host starts the input pointer at their last element and negates
           their strides, as the CPU's THTensor_newFlip does;
  roll     shift = -(the roll) mod size: result c reads input c - roll;
  repeat   the result's size is r times the input's, in_size the input's
           (a 1 for each leading dim repeat adds), so c wraps around it;
  tril     the input as it is, the elements above the diagonal-th
  triu     diagonal (tril) or below it (triu) of the two innermost dims
           stored as zero (tril_/triu_: the input is the result).

Elements move as bits (a float16 is its 16 bits), as the CPU's block moves.
The host side (`plan`) reads metadata only; the launcher allocates the
result and launches once.
"""

import ctypes
import math
from collections import namedtuple

from . import _kernels, _pointwise

__all__ = ["DTYPES", "TRIANGLES", "kernel_name", "kernel_source", "kernel_parameters",
           "headers", "EmberRearrange", "Plan", "plan", "arguments"]

HEADER_NAME = "ember_rearrange.h"
DTYPES = _pointwise.DTYPES
MAX_DIMS = _kernels.MAX_DIMS
# What the two innermost dims keep: everything, tril's or triu's triangle.
TRIANGLES = {None: 0, "tril": 1, "triu": 2}

_HEADER = f"""\
#ifndef EMBER_REARRANGE_H
#define EMBER_REARRANGE_H
#include "{_pointwise.PRELUDE_NAME}"

/* The result's sizes and strides, the input's sizes (what a coordinate
 * wraps around), shifts and strides, innermost dim first (_rearrange.py's
 * module docstring). */
typedef struct {{
    int64_t sizes[EMBER_MAX_DIMS];
    int64_t out_strides[EMBER_MAX_DIMS];
    int64_t in_sizes[EMBER_MAX_DIMS];
    int64_t shifts[EMBER_MAX_DIMS];
    int64_t in_strides[EMBER_MAX_DIMS];
    int64_t diagonal;
    int32_t ndim;
    int32_t triangle; /* 0: all, 1: tril's (col - row <= diagonal), 2: triu's */
}} EmberRearrange;

typedef struct {{
    int64_t in, out;
    bool kept; /* inside the triangle */
}} EmberRearranged;

static __device__ __forceinline__ EmberRearranged
ember_rearranged(int64_t i, const EmberRearrange &r)
{{
    EmberRearranged o = {{0, 0, true}};
    int64_t row = 0, col = 0;
#pragma unroll 1
    for (int d = 0; d < EMBER_MAX_DIMS; d++) {{
        if (d == r.ndim) {{
            break;
        }}
        int64_t c = i % r.sizes[d];
        i /= r.sizes[d];
        col = d == 0 ? c : col;
        row = d == 1 ? c : row;
        o.in += (c + r.shifts[d]) % r.in_sizes[d] * r.in_strides[d];
        o.out += c * r.out_strides[d];
    }}
    if (r.triangle != 0) {{
        o.kept = r.triangle == 1 ? col - row <= r.diagonal : col - row >= r.diagonal;
    }}
    return o;
}}
#endif
"""


def kernel_name(dtype):
    return f"ember_rearrange_{dtype}"


def kernel_source(dtype):
    """The CUDA C++ source of the dtype's kernel (it includes HEADER_NAME)."""
    if dtype not in DTYPES:
        raise ValueError(f"rearranging kernels are generated for {sorted(DTYPES)}, "
                         f"not {dtype!r}")
    ctype = DTYPES[dtype][1]
    return (f'#include "{HEADER_NAME}"\n\n'
            f'extern "C" __global__ void\n'
            f"{kernel_name(dtype)}(const {ctype} *in, {ctype} *out, int64_t n, "
            f"EmberRearrange r)\n"
            f"{{\n"
            f"    EMBER_FOR_EACH_INDEX(i, n) {{\n"
            f"        EmberRearranged o = ember_rearranged(i, r);\n"
            f"        out[o.out] = o.kept ? in[o.in] : {ctype}{{}}; /* {{}}: zero bits */\n"
            f"    }}\n"
            f"}}\n")


def kernel_parameters(dtype):
    ctype = DTYPES[dtype][1]
    return [(f"const {ctype} *", "in"), (f"{ctype} *", "out"), ("int64_t", "n"),
            ("EmberRearrange", "r")]


def headers():
    return dict(_pointwise.headers(), **{HEADER_NAME: _HEADER})


# ---- the host side ----------------------------------------------------------------

class EmberRearrange(ctypes.Structure):
    """The kernel's EmberRearrange, field for field."""
    _fields_ = [("sizes", ctypes.c_int64 * MAX_DIMS),
                ("out_strides", ctypes.c_int64 * MAX_DIMS),
                ("in_sizes", ctypes.c_int64 * MAX_DIMS),
                ("shifts", ctypes.c_int64 * MAX_DIMS),
                ("in_strides", ctypes.c_int64 * MAX_DIMS),
                ("diagonal", ctypes.c_int64),
                ("ndim", ctypes.c_int32),
                ("triangle", ctypes.c_int32)]


# What one launch reads, outermost dim first: the result's shape; per dim
# the input's size, shift and stride; the element offset the input pointer
# starts at (flip's last elements); tril's or triu's diagonal.
Plan = namedtuple("Plan", "shape in_sizes shifts in_strides in_offset triangle diagonal")


def plan(input, shape=None, flipped=(), shifts=None, triangle=None, diagonal=0):
    """The launch that makes `shape` (the input's by default, or repeat's:
    a multiple of the input's sizes, padded with leading 1s) from `input`,
    reading backwards along the dims in `flipped` and rolled by `shifts`
    (one per dim); only metadata is read."""
    lead = len(shape) - input.ndim if shape is not None else 0
    in_sizes = (1,) * lead + tuple(input.shape)
    in_strides = [0] * lead + list(input.stride())
    in_offset = 0
    for d in flipped:
        in_offset += (in_sizes[d] - 1) * in_strides[d]
        in_strides[d] = -in_strides[d]
    # result c reads input c - shift: c + (-shift mod n) wraps around n
    rolled = [(-s) % n if n else 0 for s, n in zip(shifts or [0] * len(in_sizes), in_sizes)]
    return Plan(tuple(shape or in_sizes), in_sizes, tuple(rolled), tuple(in_strides), in_offset,
                triangle, diagonal)


def arguments(plan, in_ptr, out_ptr, out_strides, itemsize):
    """The kernel's arguments as ctypes values, in its parameter order
    (sizes and strides stored innermost first)."""
    if len(plan.shape) > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} dimensions, got {len(plan.shape)}")
    r = EmberRearrange(ndim=len(plan.shape), triangle=TRIANGLES[plan.triangle],
                       diagonal=plan.diagonal)
    columns = zip(plan.shape, out_strides, plan.in_sizes, plan.shifts, plan.in_strides)
    for d, (size, out_stride, in_size, shift, in_stride) in enumerate(reversed(list(columns))):
        r.sizes[d], r.out_strides[d], r.in_sizes[d] = size, out_stride, in_size
        r.shifts[d], r.in_strides[d] = shift, in_stride
    return [ctypes.c_void_p(in_ptr + plan.in_offset * itemsize), ctypes.c_void_p(out_ptr),
            ctypes.c_int64(math.prod(plan.shape)), r]
