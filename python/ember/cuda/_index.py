"""Indexing on the GPU from one kernel template: gather (and index_select),
the scatters (scatter, scatter_add, scatter_reduce; index_add), and advanced
indexing's gather and put through element offsets (not bytes: the CPU's
are); plus nonzero's block kernel.

Every kind walks a shape S element by element (linear index i, innermost
dim first) and reads one index k per element:

  gather      out[i] = input[c with c[dim] = k]        S = the result's shape
  scatter     target[c with c[dim] = k] = source[i]             S = index's
  scatter_add target[c with c[dim] = k] += alpha * source[i]    S = source's
  scatter_multiply, scatter_amax, scatter_amin: the same with *=, max, min
  offsets     offsets[i] += wrap(k) * alpha     S = B, the index tensors'
                                                broadcast shape (alpha: the
                                                indexed dim's stride)
  take        out[i] = input[c + k]             k an element offset that
  put         target[c + k] = source[i]         `offsets` computed and
  put_add     target[c + k] += source[i]        checked

where c are i's coordinates and k = index[i's offset by the index's
strides].  index_select(input, dim, idx) is the gather whose index has
stride 0 in every dim but `dim`; index_add the scatter-add likewise, and
index_copy_ the scatter.  put_ is t[idx] = v (put_add with accumulate) on
its target seen as 1-d.
Advanced indexing (t[idx], t[idx] = v, index_put) is the CPU's plan of
Note [Advanced indexing] in c/th/THIndex.c: one `offsets` launch per
indexed dim sums the offsets of the positions (shape B), then one `take`
or `put` launch runs over the result's shape, where the indexed tensor has
stride 0 along B and the offsets stride 0 elsewhere.  The combining
scatters and put_add are atomic (Note [Atomic combines]): with repeated
indices the order of the combines (and so a float sum's or product's last
bit) varies between runs, as in PyTorch's CUDA kernels; scatter and put
with repeated indices store one of the values.

An index outside [0, size) (gather, the scatters) or [-size, size)
(offsets: negative indices count from the end, as in t[idx]) stops nothing
on the device; the kernel records it in a two-word error slot (flag,
value), and the host reads the slot after the launch and raises the CPU
operators' errors.  The launch still wrote every good index's element:
unlike the CPU's (Note [Validate, then write] in c/th/THIndex.c), a
failed in-place scatter leaves its target partly written, as a device-side
assert leaves PyTorch's.

nonzero runs in one block (Note [Nonzero in one block]).
"""

import ctypes
import functools
from collections import namedtuple

from . import _kernels, _pointwise

__all__ = ["DTYPES", "INDEX_DTYPES", "KINDS", "NONZERO_THREADS", "kernel_name",
           "kernel_keys", "kernel_source", "kernel_parameters", "nonzero_kernel_name", "nonzero_source",
           "nonzero_parameters", "nonzero_launch_config", "headers", "EmberIndexGeometry", "geometry"]

PRELUDE_NAME = "ember_index.h"
DTYPES = _pointwise.DTYPES
INDEX_DTYPES = ("int32", "int64")
MAX_DIMS = _kernels.MAX_DIMS
NONZERO_THREADS = 512

_PRELUDE = f"""\
#ifndef EMBER_INDEX_H
#define EMBER_INDEX_H
#include "{_pointwise.PRELUDE_NAME}"

/* S's sizes and three tensors' element strides, innermost dim first: the
 * tensor indexed along `dim` (gathered from or scattered into), the other
 * one (the result or the source, walked in order) and the index.  dim is
 * -1 for the kinds that index through element offsets (no dim). */
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

/* -1 for a position k outside [0, size), after recording k. */
static __device__ __forceinline__ int64_t
ember_index_in_range(int64_t k, int64_t position, int64_t size, int64_t *error)
{{
    if (position < 0 || position >= size) {{
        error[1] = k;
        error[0] = 1;
        return -1;
    }}
    return position;
}}

/* gather and scatter: k itself when in [0, size) (no wrapping of negative
 * indices, as in PyTorch's), else -1 after recording the bad value. */
static __device__ __forceinline__ int64_t
ember_checked_index(int64_t k, int64_t size, int64_t *error)
{{
    return ember_index_in_range(k, k, size, error);
}}

/* t[idx]: k in [-size, size) as a position in [0, size) (negative ones
 * count from the end), else -1 after recording the bad value. */
static __device__ __forceinline__ int64_t
ember_wrapped_index(int64_t k, int64_t size, int64_t *error)
{{
    return ember_index_in_range(k, k < 0 ? k + size : k, size, error);
}}

/* Note [Atomic combines]
 * ~~~~~~~~~~~~~~~~~~~~~~~
 * Scatters with repeated indices combine many values into one element at
 * once: *address = combine(*address, value) must be one atomic step.  The
 * hardware adds float, double, 32- and 64-bit integers (two's complement:
 * the unsigned add is the signed one); every other combine (a product, a
 * maximum, a narrow type's sum) is a compare-and-swap loop on the aligned
 * word that holds the element -- 64 bits for an 8-byte element, else 32
 * bits with a narrower element in its byte lane (little-endian) -- retried
 * until no other thread changed the word in between.  The combines are the
 * CPU's put loops' (c/th/THIndex.c): bool sums as `or` and multiplies as
 * `and`, integers wrap, max/min let a NaN win as maximum does, and a
 * float16 or bfloat16 element combines in float32 (ember_widen), rounded
 * once as it is stored back (Note [Half precision on the device]); a
 * scatter-add's alpha * source is that float32 product, not a rounded
 * one, as TH_DEFINE_PUT_ADD computes it. */
static __device__ __forceinline__ bool ember_sum(bool a, bool b) {{ return a || b; }}
template <typename T, typename V>
static __device__ __forceinline__ T
ember_sum(T a, V b)
{{
    T sum;
    ember_store(sum, ember_widen(a) + ember_widen(b));
    return sum;
}}

static __device__ __forceinline__ bool ember_product(bool a, bool b) {{ return a && b; }}
template <typename T, typename V>
static __device__ __forceinline__ T
ember_product(T a, V b)
{{
    T product;
    ember_store(product, ember_widen(a) * ember_widen(b));
    return product;
}}

template <typename T>
static __device__ __forceinline__ bool
ember_is_nan(T v)
{{
    return ember_widen(v) != ember_widen(v); /* false for the integers */
}}

struct EmberSum {{
    template <typename T, typename V>
    static __device__ __forceinline__ T apply(T old, V value) {{ return ember_sum(old, value); }}
}};
struct EmberProduct {{
    template <typename T, typename V>
    static __device__ __forceinline__ T apply(T old, V value) {{ return ember_product(old, value); }}
}};
struct EmberMaximum {{
    template <typename T>
    static __device__ __forceinline__ T apply(T old, T value)
    {{
        bool wins = (ember_widen(value) > ember_widen(old) || ember_is_nan(value))
                    && !ember_is_nan(old);
        return wins ? value : old;
    }}
}};
struct EmberMinimum {{
    template <typename T>
    static __device__ __forceinline__ T apply(T old, T value)
    {{
        bool wins = (ember_widen(value) < ember_widen(old) || ember_is_nan(value))
                    && !ember_is_nan(old);
        return wins ? value : old;
    }}
}};

template <int Bytes>
struct EmberWord {{
    typedef unsigned int type;
}};
template <>
struct EmberWord<8> {{
    typedef unsigned long long type;
}};

template <typename Combine, typename T, typename V>
static __device__ __forceinline__ void
ember_atomic_combine(T *address, V value)
{{
    typedef typename EmberWord<sizeof(T)>::type word_t;
    unsigned long long at = (unsigned long long)address;
    word_t *word = (word_t *)(at & ~(unsigned long long)(sizeof(word_t) - 1));
    unsigned int shift = (unsigned int)(at & (sizeof(word_t) - 1)) * 8u;
    word_t lane = ~(word_t)0 >> (8 * (sizeof(word_t) - sizeof(T)));
    word_t old = *word, assumed;
    do {{
        assumed = old;
        word_t bits = (assumed >> shift) & lane;
        T current;
        memcpy(&current, &bits, sizeof(T)); /* the word's low bytes */
        T combined = Combine::apply(current, value);
        bits = 0;
        memcpy(&bits, &combined, sizeof(T));
        old = atomicCAS(word, assumed, (assumed & ~(lane << shift)) | (bits << shift));
    }} while (old != assumed);
}}

static __device__ __forceinline__ void
ember_atomic_add(float *address, float value)
{{
    atomicAdd(address, value);
}}

static __device__ __forceinline__ void
ember_atomic_add(double *address, double value)
{{
    atomicAdd(address, value);
}}

static __device__ __forceinline__ void
ember_atomic_add(int32_t *address, int32_t value)
{{
    atomicAdd(address, value);
}}

static __device__ __forceinline__ void
ember_atomic_add(int64_t *address, int64_t value)
{{
    atomicAdd((unsigned long long *)address, (unsigned long long)value);
}}

template <typename T, typename V> /* bool, the 8- and 16-bit integers and floats */
static __device__ __forceinline__ void
ember_atomic_add(T *address, V value)
{{
    ember_atomic_combine<EmberSum>(address, value);
}}
#endif
"""

# kind -> its pointer parameters [(name, const)], how it reads k (checked
# against [0, size), wrapped into [-size, size), or an offset already
# checked) and its per-element statement.
Kind = namedtuple("Kind", "pointers index_rule body")
_AT_DIM = "target[o.indexed + k * g.indexed_strides[g.dim]]"  # scatter's element
_SCATTER = (("target", False), ("source", True))


def _scatter_combine(combine):
    """A scatter whose element takes combine(element, value) atomically
    (Note [Atomic combines])."""
    return Kind(_SCATTER, "checked", f"ember_atomic_combine<{combine}>(&{_AT_DIM}, "
                                     "source[o.other]);")


KINDS = {
    "gather": Kind((("out", False), ("in", True)), "checked",
                   "out[o.other] = in[o.indexed + k * g.indexed_strides[g.dim]];"),
    "scatter": Kind(_SCATTER, "checked", f"{_AT_DIM} = source[o.other];"),
    "scatter_add": Kind(_SCATTER, "checked",
                        f"ember_atomic_add(&{_AT_DIM}, ember_product(ember_widen(alpha), "
                        "ember_widen(source[o.other])));"),
    "scatter_multiply": _scatter_combine("EmberProduct"),
    "scatter_amax": _scatter_combine("EmberMaximum"),
    "scatter_amin": _scatter_combine("EmberMinimum"),
    "offsets": Kind((("offsets", False),), "wrapped", "offsets[o.other] += k * alpha;"),
    "take": Kind((("out", False), ("in", True)), "offset", "out[o.other] = in[o.indexed + k];"),
    "put": Kind((("target", False), ("source", True)), "offset",
                "target[o.indexed + k] = source[o.other];"),
    "put_add": Kind((("target", False), ("source", True)), "offset",
                    "ember_atomic_add(&target[o.indexed + k], source[o.other]);"),
}
_READ_INDEX = {
    "checked": "ember_checked_index((int64_t)index[o.index], g.dim_size, error)",
    "wrapped": "ember_wrapped_index((int64_t)index[o.index], g.dim_size, error)",
    "offset": "(int64_t)index[o.index]",
}


def _check_key(kind, dtype, index_dtype):
    if kind not in KINDS or dtype not in DTYPES or index_dtype not in INDEX_DTYPES \
            or (kind == "offsets" and dtype != "int64") \
            or (KINDS[kind].index_rule == "offset" and index_dtype != "int64"):
        raise ValueError(f"no {kind} kernel for {dtype} with {index_dtype} indices")


def kernel_keys():
    """Every (kind, dtype, index dtype) with a kernel."""
    keys = []
    for kind in KINDS:
        for dtype in DTYPES:
            for index_dtype in INDEX_DTYPES:
                try:
                    _check_key(kind, dtype, index_dtype)
                except ValueError:
                    continue
                keys.append((kind, dtype, index_dtype))
    return keys


def kernel_name(kind, dtype, index_dtype):
    return f"ember_{kind}_{dtype}_{index_dtype}"


@functools.cache
def kernel_source(kind, dtype, index_dtype):
    _check_key(kind, dtype, index_dtype)
    name = kernel_name(kind, dtype, index_dtype)
    params = ",\n".join(f"{' ' * (len(name) + 1)}{t} {n}" if k else f"{t} {n}"
                        for k, (t, n) in enumerate(kernel_parameters(kind, dtype, index_dtype)))
    return (f'#include "{PRELUDE_NAME}"\n\n'
            f'extern "C" __global__ void\n'
            f"{name}({params})\n"
            f"{{\n"
            f"    (void)alpha;\n"
            f"    (void)error;\n"
            f"    EMBER_FOR_EACH_INDEX(i, n) {{\n"
            f"        EmberIndexOffsets o = ember_index_offsets(i, g);\n"
            f"        int64_t k = {_READ_INDEX[KINDS[kind].index_rule]};\n"
            f"        if (k >= 0) {{ /* -1: a bad index, recorded */\n"
            f"            {KINDS[kind].body}\n"
            f"        }}\n"
            f"    }}\n"
            f"}}\n")


def kernel_parameters(kind, dtype, index_dtype):
    ctype, itype = DTYPES[dtype][1], DTYPES[index_dtype][1]
    pointers = [(f"const {ctype} *" if const else f"{ctype} *", name)
                for name, const in KINDS[kind].pointers]
    return pointers + [(f"const {itype} *", "index"), ("int64_t", "n"),
                       ("EmberIndexGeometry", "g"), (ctype, "alpha"), ("int64_t *", "error")]
# Note [Nonzero in one block]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# nonzero's result has one row per non-zero element, in row-major order, so
# where an element's row goes depends on every element before it.  One
# block of NONZERO_THREADS threads splits the elements into as many
# consecutive chunks; each thread counts its chunk, thread 0 turns the
# counts into each chunk's first row (a prefix sum over the block, in
# shared memory), and each thread writes its chunk's coordinates from
# there.  The host launches it twice: without `out` it only stores the
# total (the result's row count, which the allocation needs, read back as
# PyTorch's nonzero synchronises too), then with the result.  One block
# keeps the kernel simple and every row in order; it uses one of the GPU's
# multiprocessors, which is the kernel's limit on large inputs.
_NONZERO = """\
#include "{prelude}"

extern "C" __global__ void
{name}(const {ctype} *in, int64_t n, EmberIndexGeometry g, int64_t *out, int64_t *count)
{{
    __shared__ int64_t first_row[{threads}];
    int64_t chunk = (n + blockDim.x - 1) / blockDim.x;
    int64_t begin = (int64_t)threadIdx.x * chunk;
    int64_t end = begin + chunk < n ? begin + chunk : n;
    int64_t mine = 0;
    for (int64_t i = begin; i < end; i++) {{
        mine += ember_widen(in[ember_index_offsets(i, g).indexed]) != 0;
    }}
    first_row[threadIdx.x] = mine;
    __syncthreads();
    if (threadIdx.x == 0) {{
        int64_t total = 0;
        for (unsigned t = 0; t < blockDim.x; t++) {{
            int64_t counted = first_row[t];
            first_row[t] = total;
            total += counted;
        }}
        *count = total;
    }}
    __syncthreads();
    if (out == nullptr) {{
        return;
    }}
    int64_t row = first_row[threadIdx.x];
    for (int64_t i = begin; i < end; i++) {{
        if (ember_widen(in[ember_index_offsets(i, g).indexed]) != 0) {{
            int64_t rest = i;
            for (int d = 0; d < g.ndim; d++) {{ /* innermost first */
                out[row * g.ndim + g.ndim - 1 - d] = rest % g.sizes[d];
                rest /= g.sizes[d];
            }}
            row++;
        }}
    }}
}}
"""


def nonzero_kernel_name(dtype):
    return f"ember_nonzero_{dtype}"


@functools.cache
def nonzero_source(dtype):
    if dtype not in DTYPES:
        raise ValueError(f"no nonzero kernel for {dtype}")
    return _NONZERO.format(prelude=PRELUDE_NAME, name=nonzero_kernel_name(dtype),
                           ctype=DTYPES[dtype][1], threads=NONZERO_THREADS)


def nonzero_launch_config(n):
    """((1,), (block,)): one block, of a thread per 16 elements between a
    warp and NONZERO_THREADS (a power of two)."""
    threads = 1 << max(0, (-(-n // 16) - 1).bit_length())
    return (1,), (max(32, min(NONZERO_THREADS, threads)),)


def nonzero_parameters(dtype):
    return [(f"const {DTYPES[dtype][1]} *", "in"), ("int64_t", "n"),
            ("EmberIndexGeometry", "g"), ("int64_t *", "out"), ("int64_t *", "count")]


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
    """The kernel's geometry from outermost-first sizes and strides (dim
    None: the kinds that index through offsets)."""
    ndim = len(shape)
    if ndim > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} dimensions, got {ndim}")
    g = EmberIndexGeometry(ndim=ndim, dim=-1 if dim is None else ndim - 1 - dim,
                           dim_size=dim_size)
    for d in range(ndim):
        inner = ndim - 1 - d
        g.sizes[inner] = shape[d]
        g.indexed_strides[inner] = indexed_strides[d]
        g.other_strides[inner] = other_strides[d]
        g.index_strides[inner] = index_strides[d]
    return g
