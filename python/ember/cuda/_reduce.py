"""CUDA sources of the reductions sum/mean/prod/amax/amin/argmax/argmin,
from one block-reduction template, and the host side of a launch.

What a reduction accumulates in (TH_ACC_<Name>: uint64 for bool and the
integers, which wraps like PyTorch's int64; the dtype itself for floats),
what it stores (TH_RES_<Name>), the NaN-propagating max/min step and the
arg-reductions' "better" test come from c/th/THReduceFormulas.h, the
text the CPU's kernels (THReduce.c) include.

One block computes one output (blocks loop over outputs past the grid):
each thread folds the elements r = threadIdx.x, + blockDim.x, ... of its
output's reduced extent, in order, then the block combines the threads'
partials in a shared-memory tree (blockDim.x a power of two; no warp
shuffles, so the CPU emulation runs the same code).  Rank classes:

  contiguous  a dense input viewed as [outer, reduced, inner] (one dim, or
              every dim with outer = inner = 1), a dense output;
  strided     the kept dims' sizes and strides (input and output) and the
              reduced dims' sizes and strides, each an EmberStrides.

Sums and products of floats add in another order than the CPU's pairwise
sums (Note [Accurate sums] in THReduce.c), so they agree to rounding, not
bit for bit; integer sums and products (wrapping, exact), max/min and the
arg-reductions (first index of the best; a NaN is the best) are exact.
"""

import ctypes
import functools
import math
from collections import namedtuple

from . import _kernels, _pointwise

__all__ = ["REDUCTIONS", "RANK_CLASSES", "kernel_dtypes", "kernel_name", "kernel_source",
           "kernel_parameters", "headers", "plan", "arguments"]

HEADER_NAME = "THReduceFormulas.h"
PRELUDE_NAME = "ember_reduce.h"
RANK_CLASSES = ("contiguous", "strided")
DTYPES = _pointwise.DTYPES

# reduction -> (the dtypes it has a kernel for, as the CPU; its result
# dtype: "res" TH_RES_<Name>, "same" the input's, "int64" an index).
Reduction = namedtuple("Reduction", "dtypes result")
REDUCTIONS = {
    "sum": Reduction(tuple(DTYPES), "res"),
    "prod": Reduction(tuple(DTYPES), "res"),
    "mean": Reduction(("float32", "float64"), "same"),
    "amax": Reduction(tuple(DTYPES), "same"),
    "amin": Reduction(tuple(DTYPES), "same"),
    # PyTorch (and the CPU): "argmax(): does not support bool input"
    "argmax": Reduction(tuple(d for d in DTYPES if d != "bool"), "int64"),
    "argmin": Reduction(tuple(d for d in DTYPES if d != "bool"), "int64"),
}
RES_DTYPES = {d: (d if d.startswith("float") else "int64") for d in DTYPES}


def kernel_dtypes(op):
    return list(REDUCTIONS[op].dtypes)


def result_dtype(op, dtype):
    kind = REDUCTIONS[op].result
    return RES_DTYPES[dtype] if kind == "res" else dtype if kind == "same" else "int64"


def kernel_name(op, dtype, rank_class):
    return f"ember_reduce_{op}_{dtype}_{rank_class}"


def _check_key(op, dtype, rank_class):
    if op not in REDUCTIONS:
        raise ValueError(f"no reduction named {op!r}")
    if dtype not in REDUCTIONS[op].dtypes:
        raise ValueError(f"{op} has no kernel for {dtype!r}")
    if rank_class not in RANK_CLASSES:
        raise ValueError(f"rank class must be one of {RANK_CLASSES}, not {rank_class!r}")


_PRELUDE = f"""\
#ifndef EMBER_REDUCE_H
#define EMBER_REDUCE_H
#include "{_pointwise.PRELUDE_NAME}"
#include "{HEADER_NAME}"

/* A block reduction has at most this many threads (a power of two). */
#define EMBER_REDUCE_MAX_THREADS 512

/* Where one output's elements are: contiguous inputs are [outer, reduce,
 * inner]; strided ones use `kept` (sizes, input and output strides of the
 * kept dims) and `reduced` (sizes and input strides of the reduced dims;
 * its out_strides are unused). */
typedef struct {{
    int64_t reduce, inner;
}} EmberReduceShape;

/* An arg-reduction's partial: the best value and its index. */
template <typename T> struct EmberArgBest {{
    T value;
    int64_t index;
}};
#endif
"""

# sum/mean/prod: (fold, combine, identity), C in `acc`, `v` (an element
# converted to the accumulator type) and `other` (another partial).
_SUM_LIKE = {
    "sum": ("acc + v", "acc + other", "0"),
    "mean": ("acc + v", "acc + other", "0"),
    "prod": ("acc * v", "acc * other", "1"),
}


def _pieces(op, dtype):
    """(partial type, identity, fold `acc = f(acc, v, r)`, combine
    `acc = f(acc, other)`, result expression) as C text."""
    name, ctype = DTYPES[dtype]
    if op in _SUM_LIKE:
        fold, combine, identity = _SUM_LIKE[op]
        acc_t = f"TH_ACC_{name}"
        result = "acc / (scalar_t)count" if op == "mean" else f"(TH_RES_{name})acc"
        return acc_t, identity, fold, combine, result
    lowest = _lowest(dtype, op in ("amax", "argmax"))
    if op in ("amax", "amin"):
        step = "TH_MAX_STEP" if op == "amax" else "TH_MIN_STEP"
        return ctype, lowest, f"{step}(acc, v)", f"{step}(acc, other)", "acc"
    better = "TH_ARG_BETTER_MAX" if op == "argmax" else "TH_ARG_BETTER_MIN"
    # A strictly better value wins; between equals (or two NaNs) the lower
    # index, so the tree finds the first best, as the CPU's scan does.
    take = (f"{better}(other.value, acc.value) || (!{better}(acc.value, other.value) "
            f"&& other.index < acc.index)")
    return (f"EmberArgBest<{ctype}>", f"{lowest}, INT64_MAX_VALUE",
            f"(EmberArgBest<{ctype}>{{v, r}})", take, "acc.index")


def _lowest(dtype, for_max):
    """The identity of max (min): a value no element is better than."""
    if dtype == "bool":
        return "false" if for_max else "true"
    if dtype.startswith("float"):
        return "-(scalar_t)INFINITY" if for_max else "(scalar_t)INFINITY"
    bits = 8 * ctypes.sizeof(_pointwise.CTYPES[dtype])
    if dtype.startswith("uint"):
        return "(scalar_t)0" if for_max else f"(scalar_t){(1 << bits) - 1}u"
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return f"(scalar_t)({low + 1} - 1)" if for_max else f"(scalar_t){high}"


def kernel_source(op, dtype, rank_class):
    """The CUDA C++ source of one reduction kernel (it includes PRELUDE_NAME)."""
    _check_key(op, dtype, rank_class)
    name = kernel_name(op, dtype, rank_class)
    _, ctype = DTYPES[dtype]
    acc_t, identity, fold, combine, result = _pieces(op, dtype)
    out_t = DTYPES[result_dtype(op, dtype)][1]
    is_arg = op.startswith("arg")
    fold_stmt = (f"{{ {acc_t} other = {fold}; if ({combine}) acc = other; }}" if is_arg
                 else f"acc = {fold};")
    combine_stmt = (f"if ({combine}) acc = other;" if is_arg else f"acc = {combine};")
    if rank_class == "contiguous":
        where = ("EmberReduceShape shape",
                 "(o / shape.inner) * shape.reduce * shape.inner + o % shape.inner",
                 "r * shape.inner", "o")
    else:
        where = ("EmberStrides kept, EmberStrides reduced",
                 "ember_offsets(o, kept).in", "ember_offsets(r, reduced).in",
                 "ember_offsets(o, kept).out")
    params, base, step, out_at = where
    return f"""#include "{PRELUDE_NAME}"
#ifndef INT64_MAX_VALUE
#define INT64_MAX_VALUE 9223372036854775807LL
#endif

namespace {name}_ops {{
typedef {ctype} scalar_t;
typedef {acc_t} acc_t;
TH_FORMULA_FN acc_t
identity()
{{
    acc_t acc = {{{identity}}};
    return acc;
}}
TH_FORMULA_FN acc_t
fold(acc_t acc, scalar_t element, int64_t r)
{{
    (void)r;
    {'scalar_t' if is_arg or op in ('amax', 'amin') else acc_t} v = element;
    {fold_stmt}
    return acc;
}}
TH_FORMULA_FN acc_t
combine(acc_t acc, acc_t other)
{{
    {combine_stmt}
    return acc;
}}
TH_FORMULA_FN {out_t}
finish(acc_t acc, int64_t count)
{{
    (void)count;
    return ({out_t})({result});
}}
}}

/* One block per output: each thread folds every blockDim.x-th element of
 * the output's reduced extent, then a shared-memory tree combines the
 * threads' partials (blockDim.x a power of two, at most
 * EMBER_REDUCE_MAX_THREADS). */
extern "C" __global__ void
{name}({out_t} *out, const {ctype} *in, int64_t n_out, int64_t n_reduce,
{' ' * (len(name) + 1)}{params})
{{
    namespace ops = {name}_ops;
    __shared__ ops::acc_t partials[EMBER_REDUCE_MAX_THREADS];
    const unsigned t = threadIdx.x;
    for (int64_t o = blockIdx.x; o < n_out; o += gridDim.x) {{
        const int64_t base = {base};
        ops::acc_t acc = ops::identity();
        for (int64_t r = t; r < n_reduce; r += blockDim.x) {{
            acc = ops::fold(acc, in[base + {step}], r);
        }}
        partials[t] = acc;
        __syncthreads();
        for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {{
            if (t < half) {{
                partials[t] = ops::combine(partials[t], partials[t + half]);
            }}
            __syncthreads();
        }}
        if (t == 0) {{
            out[{out_at}] = ops::finish(partials[0], n_reduce);
        }}
        __syncthreads(); /* partials[0] is read before the next output */
    }}
}}
"""


def kernel_parameters(op, dtype, rank_class):
    out_t = DTYPES[result_dtype(op, dtype)][1]
    result = [(f"{out_t} *", "out"), (f"const {DTYPES[dtype][1]} *", "in"),
              ("int64_t", "n_out"), ("int64_t", "n_reduce")]
    if rank_class == "contiguous":
        return result + [("EmberReduceShape", "shape")]
    return result + [("EmberStrides", "kept"), ("EmberStrides", "reduced")]


def headers():
    return dict(_pointwise.headers(), **{HEADER_NAME: _kernels.header_text(HEADER_NAME),
                                         PRELUDE_NAME: _PRELUDE})


# ---- the host side ---------------------------------------------------------------------

class EmberReduceShape(ctypes.Structure):
    _fields_ = [("reduce", ctypes.c_int64), ("inner", ctypes.c_int64)]


Plan = namedtuple("Plan", "op key out_dtype out_shape n_out n_reduce shape strides")


def _dims(ndim, dim):
    if dim is None:
        return list(range(ndim))
    dims = [dim] if isinstance(dim, int) else list(dim)
    out = []
    for d in dims:
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[{-max(ndim, 1)}, {max(ndim, 1) - 1}], but got {d})")
        out.append(d % max(ndim, 1))
    return sorted(set(out))


def plan(op, tensor, dim=None, keepdim=False):
    """The kernel key, result and launch extents of `op` over `dim` (None:
    every dim) of `tensor` (only its metadata is read)."""
    dtype = str(tensor.dtype).removeprefix("ember.")
    if op not in REDUCTIONS:
        raise ValueError(f"no reduction named {op!r}")
    if dtype not in REDUCTIONS[op].dtypes:
        raise RuntimeError(f"{op}(): does not support {dtype} input" if dtype == "bool"
                           else f'"{op}_cuda" not implemented for '
                                f"'{_pointwise.SCALAR_TYPE_NAMES.get(dtype, dtype)}'")
    shape, strides = tuple(tensor.shape), tuple(tensor.stride())
    reduced = _dims(len(shape), dim)
    kept = [d for d in range(len(shape)) if d not in reduced]
    n_reduce = math.prod(shape[d] for d in reduced)
    if n_reduce == 0 and op not in ("sum", "prod", "mean"):
        raise IndexError(f"{op}(): Expected reduction dim to be specified for input.numel() == 0.")
    out_shape = tuple(1 if d in reduced else shape[d] for d in range(len(shape))) if keepdim \
        else tuple(shape[d] for d in kept)
    n_out = math.prod(shape[d] for d in kept)
    one_run = len(reduced) == len(shape) or reduced == list(range(reduced[0], reduced[-1] + 1))
    if tensor.is_contiguous() and one_run:
        inner = math.prod(shape[reduced[-1] + 1:]) if reduced else 1
        rank_class, packed = "contiguous", EmberReduceShape(reduce=n_reduce, inner=inner)
    else:
        kept_sizes = [shape[d] for d in kept]
        out_strides = _pointwise._contiguous_strides(kept_sizes)
        rank_class = "strided"
        packed = (_kernels.pack_strides(kept_sizes, [strides[d] for d in kept], out_strides),
                  _kernels.pack_strides([shape[d] for d in reduced], [strides[d] for d in reduced],
                                        [0] * len(reduced)))
    return Plan(op, (op, dtype, rank_class), result_dtype(op, dtype), out_shape, n_out,
                n_reduce, shape, packed)


def arguments(p, out_ptr, in_ptr):
    """The kernel's arguments as ctypes values, in its parameter order."""
    args = [ctypes.c_void_p(out_ptr), ctypes.c_void_p(in_ptr), ctypes.c_int64(p.n_out),
            ctypes.c_int64(p.n_reduce)]
    return args + ([p.strides] if p.key[2] == "contiguous" else list(p.strides))
