"""Sorting along a dim on the GPU: sort, argsort and topk from one kernel.

The kernel sorts the CPU's (key, index) items (Note [Sort keys] in
c/th/THSort.h): each element's 64-bit unsigned key, whose order is
PyTorch's element order (NaN after +inf, -0.0 tied with 0.0), complemented
for a descending sort, and its position in the lane.  Items compare by key
and then by position, a total order, so any correct sorting network gives
exactly the stable order, which is the CPU's and PyTorch's `stable=True`
order whatever `stable` says: ties keep their input order, NaNs come last
ascending and first descending.  A float16 or bfloat16 element's key is
its float32 widening's (exact, Note [Half precision on the device]), as
THSort.c's keys of the 16-bit dtypes are, and the values are copied as
their bits: the kernel never rounds.

Note [One block sorts one lane]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Each block takes a lane (blocks loop over lanes past the grid), loads its
items into a scratch row of `padded` items in global memory (the lane's
length rounded up to a power of two; the padding items, (all ones,
INT64_MAX), sort after every real one), and runs a bitonic sorting network
over the row: log2(padded) stages of up to log2(padded) steps, each step
comparing and swapping padded / 2 disjoint pairs, shared by the block's
threads, with a barrier between steps.  Then the first `count` items give
the lane's values (read back from the input by position, keys are never
decoded) and indices: count is the lane's length for sort and k for topk.

Limits: the work is O(n log^2 n) per lane, on one multiprocessor per lane
(a lane never spreads over blocks), and the scratch is 16 bytes per padded
item per block of the grid.  That is right for the many short lanes of a
batch of rows (the common case: softmax-sized rows, top-k of logits) and
slow, though correct, for one very long lane.
"""

import ctypes
import functools

from . import _pointwise

__all__ = ["DTYPES", "SORT_THREADS", "kernel_name", "kernel_source", "kernel_parameters",
           "headers", "padded_length", "launch_config"]

PRELUDE_NAME = "ember_sort.h"
DTYPES = _pointwise.DTYPES
SORT_THREADS = 256
# Lanes sorted at once, one per block: the scratch holds one padded row
# for each.
MAX_BLOCKS = 1024

_PRELUDE = f"""\
#ifndef EMBER_SORT_H
#define EMBER_SORT_H
#include "{_pointwise.PRELUDE_NAME}"

/* Note [Sort keys] in c/th/THSort.h, as THSort.c's key_of_int and
 * key_of_double compute them. */
#define EMBER_SIGN_BIT (1ull << 63)

static __device__ __forceinline__ uint64_t
ember_key_of_int(int64_t value)
{{
    return (uint64_t)value ^ EMBER_SIGN_BIT;
}}

static __device__ __forceinline__ uint64_t
ember_key_of_double(double value)
{{
    if (value != value) {{
        return ~0ull; /* NaN: after +inf */
    }}
    uint64_t bits = double_bits(value == 0 ? 0.0 : value); /* -0.0 ties 0.0 */
    return (bits & EMBER_SIGN_BIT) ? ~bits : bits | EMBER_SIGN_BIT;
}}

static __device__ __forceinline__ uint64_t ember_sort_key(float v) {{ return ember_key_of_double(v); }}
static __device__ __forceinline__ uint64_t ember_sort_key(double v) {{ return ember_key_of_double(v); }}
static __device__ __forceinline__ uint64_t
ember_sort_key(ember_float16 v) {{ return ember_key_of_double(ember_widen(v)); }}
static __device__ __forceinline__ uint64_t
ember_sort_key(ember_bfloat16 v) {{ return ember_key_of_double(ember_widen(v)); }}
template <typename T>
static __device__ __forceinline__ uint64_t ember_sort_key(T v) {{ return ember_key_of_int((int64_t)v); }}

/* Items compare by key, then by position: a total order. */
static __device__ __forceinline__ bool
ember_item_less(uint64_t key_a, int64_t index_a, uint64_t key_b, int64_t index_b)
{{
    return key_a < key_b || (key_a == key_b && index_a < index_b);
}}

/* One step of the bitonic network over `padded` items: pair p (of
 * padded / 2) is (lo, lo + stride), which is put in ascending order when
 * lo's bit `size` is clear and in descending order when it is set. */
static __device__ __forceinline__ void
ember_bitonic_step(uint64_t *keys, int64_t *positions, int64_t padded, int64_t size,
                   int64_t stride)
{{
    for (int64_t p = threadIdx.x; p < padded / 2; p += blockDim.x) {{
        int64_t lo = 2 * p - (p & (stride - 1));
        int64_t hi = lo + stride;
        bool ascending = (lo & size) == 0;
        if (ember_item_less(keys[hi], positions[hi], keys[lo], positions[lo]) == ascending) {{
            uint64_t key = keys[lo];
            int64_t position = positions[lo];
            keys[lo] = keys[hi];
            positions[lo] = positions[hi];
            keys[hi] = key;
            positions[hi] = position;
        }}
    }}
}}
#endif
"""

_KERNEL = """\
#include "{prelude}"

/* Note [One block sorts one lane]: in is lanes x n (dense), values and
 * indices lanes x count, keys and positions gridDim.x x padded scratch. */
extern "C" __global__ void
{name}(const {ctype} *in, {ctype} *values, int64_t *indices, uint64_t *keys,
{pad}int64_t *positions, int64_t lanes, int64_t n, int64_t padded, int64_t count,
{pad}int32_t descending)
{{
    keys += blockIdx.x * padded;
    positions += blockIdx.x * padded;
    for (int64_t lane = blockIdx.x; lane < lanes; lane += gridDim.x) {{
        const {ctype} *row = in + lane * n;
        for (int64_t i = threadIdx.x; i < padded; i += blockDim.x) {{
            uint64_t key = i < n ? ember_sort_key(row[i]) : ~0ull;
            keys[i] = descending && i < n ? ~key : key;
            positions[i] = i < n ? i : (int64_t)(~0ull >> 1); /* padding: last */
        }}
        __syncthreads();
        for (int64_t size = 2; size <= padded; size *= 2) {{
            for (int64_t stride = size / 2; stride > 0; stride /= 2) {{
                ember_bitonic_step(keys, positions, padded, size, stride);
                __syncthreads();
            }}
        }}
        for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {{
            values[lane * count + j] = row[positions[j]];
            indices[lane * count + j] = positions[j];
        }}
        __syncthreads(); /* the scratch row is the next lane's */
    }}
}}
"""


def kernel_name(dtype):
    return f"ember_sort_{dtype}"


@functools.cache
def kernel_source(dtype):
    if dtype not in DTYPES:
        raise ValueError(f"no sort kernel for {dtype}")
    name = kernel_name(dtype)
    return _KERNEL.format(prelude=PRELUDE_NAME, name=name, ctype=DTYPES[dtype][1],
                          pad=" " * (len(name) + 1))


def kernel_parameters(dtype):
    ctype = DTYPES[dtype][1]
    return [(f"const {ctype} *", "in"), (f"{ctype} *", "values"), ("int64_t *", "indices"),
            ("uint64_t *", "keys"), ("int64_t *", "positions"), ("int64_t", "lanes"),
            ("int64_t", "n"), ("int64_t", "padded"), ("int64_t", "count"),
            ("int32_t", "descending")]


def headers():
    return dict(_pointwise.headers(), **{PRELUDE_NAME: _PRELUDE})


def padded_length(n):
    """n rounded up to a power of two (at least 2: one pair)."""
    return max(2, 1 << (n - 1).bit_length())


def launch_config(lanes, padded):
    """((grid,), (block,)): a block per lane, up to MAX_BLOCKS at once, of
    a thread per pair of the network (padded / 2) up to SORT_THREADS, and
    at least a warp."""
    return (max(1, min(lanes, MAX_BLOCKS)),), (max(32, min(SORT_THREADS, padded // 2)),)


def arguments(values_in, values, indices, keys, positions, lanes, n, padded, count,
              descending):
    """The kernel's arguments in its parameter order (data pointers)."""
    return [ctypes.c_void_p(values_in), ctypes.c_void_p(values), ctypes.c_void_p(indices),
            ctypes.c_void_p(keys), ctypes.c_void_p(positions), ctypes.c_int64(lanes),
            ctypes.c_int64(n), ctypes.c_int64(padded), ctypes.c_int64(count),
            ctypes.c_int32(int(descending))]
