"""CUDA sources of the reductions (sum/mean/prod/amax/amin/argmax/argmin,
var/std, the vector norms, logsumexp), of softmax/log_softmax and of the
scans cumsum/cumprod, from two templates, and the host side of a launch.

What a reduction accumulates in (TH_ACC_<Name>: uint64 for bool and the
integers, which wraps like PyTorch's int64; the dtype itself for floats,
float32 for float16 and bfloat16: Note [Reducing half precision on the
device]),
what it stores (TH_RES_<Name>), the NaN-propagating max/min step, the
arg-reductions' "better" test and the floating reductions' per-element
and finishing math (squared deviations, var's divisor, the p-norm terms,
logsumexp's shift, softmax's scale) come from c/th/THReduceFormulas.h,
and exp from c/th/THFloatFormulas.h: the texts the CPU's kernels
(THReduce.c) include.

The block template (Note [Reduction passes]): one block computes one
output (blocks loop over outputs past the grid) in one or more passes over
the output's reduced extent; in each pass every thread folds the elements
r = threadIdx.x, + blockDim.x, ... in order, then the block combines the
threads' partials in a shared-memory tree (blockDim.x a power of two; no
warp shuffles, so the CPU emulation runs the same code) and every thread
reads the result, which the next pass may use.  Then thread 0 stores the
reduction's value, or (softmax, a "line" op) the block rewrites the whole
line from the passes' results.  The scan template runs one line per
thread, sequentially, as the CPU's scans do.  Geometries (rank classes):

  contiguous  a dense input viewed as [outer, reduced, inner] (one dim, or
              every dim with outer = inner = 1), a dense output;
  strided     the kept dims' sizes and strides (input and output) and the
              reduced dims' sizes and strides (input; and output for the
              line ops and scans, whose output has the input's shape), each
              an EmberStrides.

Float sums (sum, mean, prod, var's passes, norm1/norm2/normp, logsumexp's
and softmax's sums of exps) add in another order than the CPU's pairwise
sums (Note [Accurate sums] in THReduce.c), so they agree to rounding, not
bit for bit, except where the CPU also sums in double and the sum is exact
(float32 softmax over lines the CPU takes in tiles); integer sums and products
(wrapping, exact), max/min, the arg-reductions (first index of the best; a
NaN is the best), the inf norms and every scan are exact.
"""

import ctypes
import math
from collections import namedtuple

import ember

from . import _kernels, _launch, _pointwise

__all__ = ["REDUCTIONS", "RANK_CLASSES", "CALLS", "kernel_dtypes", "kernel_name",
           "kernel_source", "kernel_parameters", "headers", "plan", "plan_call", "arguments",
           "launch_config"]

HEADER_NAME = "THReduceFormulas.h"
PRELUDE_NAME = "ember_reduce.h"
RANK_CLASSES = ("contiguous", "strided")
DTYPES = _pointwise.DTYPES
# float16 and bfloat16 reduce with float32's recipe (Note [Reducing half
# precision on the device]).
HALVES = tuple(_pointwise.LOOP_DTYPES)
FLOATS = ("float32", "float64", *HALVES)
ALL = tuple(DTYPES)

# op -> (the input dtypes it has a kernel for, as the CPU; its result dtype:
# "res" TH_RES_<Name>, "same" the input's, "int64" an index, "float" the
# compute dtype (float32 for integer inputs); its template: "reduce" one
# value per output, "line" the line rewritten (block template), "scan").
Reduction = namedtuple("Reduction", "dtypes result kind")
REDUCTIONS = {
    "sum": Reduction(ALL, "res", "reduce"),
    "prod": Reduction(ALL, "res", "reduce"),
    "mean": Reduction(FLOATS, "same", "reduce"),
    "amax": Reduction(ALL, "same", "reduce"),
    "amin": Reduction(ALL, "same", "reduce"),
    # PyTorch (and the CPU): "argmax(): does not support bool input"
    "argmax": Reduction(tuple(d for d in ALL if d != "bool"), "int64", "reduce"),
    "argmin": Reduction(tuple(d for d in ALL if d != "bool"), "int64", "reduce"),
    "var": Reduction(FLOATS, "same", "reduce"),
    "std": Reduction(FLOATS, "same", "reduce"),
    # linalg.vector_norm by its order p, as the CPU's kernels (THReduce.c)
    "norm1": Reduction(FLOATS, "same", "reduce"),
    "norm2": Reduction(FLOATS, "same", "reduce"),
    "norm_inf": Reduction(FLOATS, "same", "reduce"),
    "norm_neg_inf": Reduction(FLOATS, "same", "reduce"),
    "normp": Reduction(FLOATS, "same", "reduce"),
    # integer inputs compute in float32, ember's default dtype
    "logsumexp": Reduction(ALL, "float", "reduce"),
    "softmax": Reduction(FLOATS, "same", "line"),
    "log_softmax": Reduction(FLOATS, "same", "line"),
    "cumsum": Reduction(ALL, "res", "scan"),
    "cumprod": Reduction(ALL, "res", "scan"),
}
RES_DTYPES = {d: (d if d in FLOATS else "int64") for d in DTYPES}

# Note [Reducing half precision on the device]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# As the CPU (Note [Reducing half precision] in c/th/THReduce.c), a
# float16 or bfloat16 reduction is float32's: each element is widened to
# float32 on load (ember_widen), the passes accumulate in float32's types
# (TH_ACC_Float32, and double where float32's recipe sums in double), and
# the result is rounded once to the 16-bit dtype as it is stored
# (ember_store); a scan rounds each running value, and softmax each
# element.  So where the CPU's float32 kernel and the device's agree bit
# for bit (max/min, the arg-reductions, the inf norms, the scans), the
# half-precision results agree too.


def kernel_dtypes(op):
    return list(REDUCTIONS[op].dtypes)


def compute_dtype(op, dtype):
    """The dtype a kernel computes in (`scalar_t`)."""
    if dtype in HALVES:
        return "float32"
    return "float32" if REDUCTIONS[op].result == "float" and dtype not in FLOATS else dtype


def result_dtype(op, dtype):
    kind = REDUCTIONS[op].result
    return {"res": RES_DTYPES[dtype], "same": dtype, "int64": "int64",
            "float": dtype if dtype in FLOATS else compute_dtype(op, dtype)}[kind]


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
#define INT64_MAX_VALUE 9223372036854775807LL

/* Where one output's elements are: contiguous inputs are [outer, reduce,
 * inner]; strided ones use `kept` (sizes, input and output strides of the
 * kept dims) and `reduced` (sizes and input strides of the reduced dims;
 * output strides for the line ops and scans, unused otherwise). */
typedef struct {{
    int64_t reduce, inner;
}} EmberReduceShape;

/* An arg-reduction's partial: the best value and its index. */
template <typename T> struct EmberArgBest {{
    T value;
    int64_t index;
}};

/* One pass's combine over the block (Note [Reduction passes]): each
 * thread's partial goes into `partials`, a tree halves the live threads
 * (blockDim.x a power of two) and every thread returns the block's
 * result. */
template <typename Pass>
static __device__ __forceinline__ typename Pass::acc_t
ember_block_combine(typename Pass::acc_t *partials, typename Pass::acc_t acc)
{{
    const unsigned t = threadIdx.x;
    partials[t] = acc;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {{
        if (t < half) {{
            partials[t] = Pass::combine(partials[t], partials[t + half]);
        }}
        __syncthreads();
    }}
    typename Pass::acc_t total = partials[0];
    __syncthreads(); /* every thread has read partials[0] before it is reused */
    return total;
}}
#endif
"""

# ---- what each op computes ----------------------------------------------------------
#
# Note [Reduction passes]
# ~~~~~~~~~~~~~~~~~~~~~~~
# A block-template op is a list of passes and an ending.  A pass folds every
# element `v` (the input converted to the op's load type; `r` its index in
# the reduced extent) into an accumulator and combines two partials; its
# value, computed from the combined accumulator `acc` and the extent `n`,
# is named and visible to the later passes and the ending.  One pass is a
# plain reduction; var is two (the mean, then the squared deviations from
# it: the CPU's exact two-pass), logsumexp and softmax are max-then-sum
# (the sum of exps shifted by the max).  The ending is the stored value
# (a "reduce" op, from thread 0) or the value of each element of the line
# (a "line" op, every thread its elements).  Every expression may read the
# call's `param` (var's correction, a norm's p).
Pass = namedtuple("Pass", "name acc_t identity fold combine value_t value")
Recipe = namedtuple("Recipe", "load_t passes ending")

# sum/mean/prod and the scans: (fold, identity); combine is the fold.
_SUM_LIKE = {"sum": ("acc + v", "0"), "mean": ("acc + v", "0"), "prod": ("acc * v", "1"),
             "cumsum": ("acc + v", "0"), "cumprod": ("acc * v", "1")}


def _sum_pass(name, acc_t, term, value="acc"):
    return Pass(name, acc_t, "0", f"acc + {term}", "acc + other", acc_t, value)


def _max_pass(name, dtype, step="TH_MAX_STEP", term="v", identity=None):
    identity = identity or _lowest(dtype, step == "TH_MAX_STEP")
    return Pass(name, "scalar_t", identity, f"{step}(acc, {term})", f"{step}(acc, other)",
                "scalar_t", "acc")


def _recipe(op, dtype):
    """The op's passes and ending for input `dtype` (Note [Reduction passes])."""
    compute = compute_dtype(op, dtype)
    name = DTYPES[compute][0]
    exp = f"exp_{DTYPES[compute][0]}"  # THFloatFormulas.h's, as the CPU's softmax
    if op in ("sum", "mean", "prod"):
        fold, identity = _SUM_LIKE[op]
        acc_t = f"TH_ACC_{name}"
        ending = "total / (scalar_t)n" if op == "mean" else f"(TH_RES_{name})total"
        return Recipe(acc_t, [Pass("total", acc_t, identity, fold, fold.replace("v", "other"),
                                   acc_t, "acc")], ending)
    if op in ("amax", "amin"):
        step = "TH_MAX_STEP" if op == "amax" else "TH_MIN_STEP"
        return Recipe("scalar_t", [_max_pass("best", compute, step)], "best")
    if op in ("argmax", "argmin"):
        better = "TH_ARG_BETTER_MAX" if op == "argmax" else "TH_ARG_BETTER_MIN"
        # A strictly better value wins; between equals (or two NaNs) the
        # lower index, so the tree finds the first best, as the CPU's scan.
        take = (f"{better}(other.value, acc.value) || (!{better}(acc.value, other.value) "
                f"&& other.index < acc.index)")
        best = Pass("index", "EmberArgBest<scalar_t>",
                    f"{_lowest(compute, op == 'argmax')}, INT64_MAX_VALUE",
                    "combine(acc, acc_t{v, r})", f"{take} ? other : acc", "int64_t",
                    "acc.index")
        return Recipe("scalar_t", [best], "index")
    if op in ("var", "std"):
        passes = [_sum_pass("mean", "scalar_t", "v", "acc / (scalar_t)n"),
                  _sum_pass("m2", "scalar_t", "TH_SQUARED_DEVIATION(v, mean)")]
        take_sqrt = "true" if op == "std" else "false"
        return Recipe("scalar_t", passes,
                      f"(scalar_t)TH_VAR_FINISH((double)m2, n, param, {take_sqrt})")
    if op == "norm1":
        return Recipe("scalar_t", [_sum_pass("total", "scalar_t", "TH_ABS(v)")], "total")
    if op == "norm2":
        return Recipe("scalar_t", [_sum_pass("total", "scalar_t", "TH_SQUARE(v)")],
                      "(scalar_t)sqrt((double)total)")
    if op == "norm_inf":  # |v| >= 0: 0 is max's identity
        return Recipe("scalar_t", [_max_pass("best", compute, term="TH_ABS(v)",
                                             identity="0")], "best")
    if op == "norm_neg_inf":
        return Recipe("scalar_t", [_max_pass("best", compute, "TH_MIN_STEP", "TH_ABS(v)",
                                             "(scalar_t)INFINITY")], "best")
    if op == "normp":
        return Recipe("double", [_sum_pass("total", "double", "TH_NORM_P_TERM(v, param)")],
                      "(scalar_t)TH_NORM_P_FINISH(total, param)")
    if op == "logsumexp":
        passes = [_max_pass("best", compute),
                  _sum_pass("total", "double",
                            f"(double){exp}(v - (scalar_t)TH_LSE_SHIFT((double)best))")]
        return Recipe("scalar_t", passes, "(scalar_t)TH_LSE_FINISH(total, (double)best)")
    if op in ("softmax", "log_softmax"):
        # the sum of exps in double, as the CPU's
        value = ("TH_SOFTMAX_SCALE(scalar_t, acc)" if op == "softmax"
                 else "TH_LOG_SOFTMAX_SHIFT(scalar_t, best, acc)")
        total = _sum_pass("total", "double", f"(double){exp}(v - best)")
        passes = [_max_pass("best", compute), total._replace(name="normalizer",
                                                           value_t="scalar_t", value=value)]
        ending = f"{exp}(v - best) * normalizer" if op == "softmax" else "v - normalizer"
        return Recipe("scalar_t", passes, ending)
    raise ValueError(f"{op} is not a block-template op")


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


# ---- the sources ------------------------------------------------------------------------

def _geometry(rank_class, line):
    """(parameters, input base of output o, step of element r, output base,
    output step) as C text; a line's output has the input's shape (a
    reduction's has the kept dims)."""
    if rank_class == "contiguous":
        base = "(o / shape.inner) * shape.reduce * shape.inner + o % shape.inner"
        return ("EmberReduceShape shape", base, "r * shape.inner", base if line else "o",
                "r * shape.inner")
    return ("EmberStrides kept, EmberStrides reduced", "ember_offsets(o, kept).in",
            "ember_offsets(r, reduced).in", "ember_offsets(o, kept).out",
            "ember_offsets(r, reduced).out")


def _pass_struct(k, p, load_t, earlier):
    """struct pass<k>: the pass's identity, fold, combine and value."""
    values = "".join(f", {t} {n}" for t, n in earlier)
    unused = "".join(f" (void){n};" for _, n in earlier)
    return f"""struct pass{k} {{
    typedef {p.acc_t} acc_t;
    typedef {p.value_t} value_t;
    static __device__ __forceinline__ acc_t
    identity()
    {{
        acc_t acc = {{{p.identity}}};
        return acc;
    }}
    static __device__ __forceinline__ acc_t
    combine(acc_t acc, acc_t other)
    {{
        return {p.combine};
    }}
    static __device__ __forceinline__ acc_t
    fold(acc_t acc, {load_t} v, int64_t r, double param{values})
    {{
        (void)r; (void)param;{unused}
        return {p.fold};
    }}
    static __device__ __forceinline__ value_t
    value(acc_t acc, int64_t n, double param{values})
    {{
        (void)n; (void)param;{unused}
        return {p.value};
    }}
}};
"""


def _block_source(op, dtype, rank_class, name):
    recipe = _recipe(op, dtype)
    in_t, out_t = DTYPES[dtype][1], DTYPES[result_dtype(op, dtype)][1]
    # what `finish` and `element` compute, rounded into out_t by ember_store
    value_t = DTYPES[_pointwise.loop_dtype(result_dtype(op, dtype))][1]
    params, in_base, in_step, out_base, out_step = _geometry(
        rank_class, REDUCTIONS[op].kind == "line")
    structs, shared, body, earlier = [], [], [], []
    for k, p in enumerate(recipe.passes):
        structs.append(_pass_struct(k, p, recipe.load_t, earlier))
        args = "".join(f", {n}" for _, n in earlier)
        shared.append(f"    __shared__ ops::pass{k}::acc_t partials{k}[EMBER_REDUCE_MAX_THREADS];\n")
        body.append(f"""\
        ops::pass{k}::acc_t acc{k} = ops::pass{k}::identity();
        for (int64_t r = t; r < n_reduce; r += blockDim.x) {{
            acc{k} = ops::pass{k}::fold(acc{k}, (ops::load_t)ember_widen(in[base + {in_step}]), r,
                                    param{args});
        }}
        acc{k} = ember_block_combine<ops::pass{k}>(partials{k}, acc{k});
        const ops::pass{k}::value_t {p.name} = ops::pass{k}::value(acc{k}, n_reduce, param{args});
""")
        earlier.append((p.value_t, p.name))
    values = "".join(f", {t} {n}" for t, n in earlier)
    args = "".join(f", {n}" for _, n in earlier)
    unused = "".join(f" (void){n};" for _, n in earlier)
    if REDUCTIONS[op].kind == "reduce":
        ending = f"""\
static __device__ __forceinline__ {value_t}
finish(int64_t n, double param{values})
{{
    (void)n; (void)param;{unused}
    return ({value_t})({recipe.ending});
}}
"""
        store = f"""\
        if (t == 0) {{
            ember_store(out[{out_base}], ops::finish(n_reduce, param{args}));
        }}
"""
    else:
        ending = f"""\
static __device__ __forceinline__ {value_t}
element(load_t v, double param{values})
{{
    (void)param;{unused}
    return ({value_t})({recipe.ending});
}}
"""
        store = f"""\
        const int64_t out_base = {out_base};
        for (int64_t r = t; r < n_reduce; r += blockDim.x) {{
            ember_store(out[out_base + {out_step}],
                        ops::element((ops::load_t)ember_widen(in[base + {in_step}]),
                                     param{args}));
        }}
"""
    indent = " " * (len(name) + 1)
    return f"""#include "{PRELUDE_NAME}"

namespace {name}_ops {{
typedef {DTYPES[compute_dtype(op, dtype)][1]} scalar_t;
typedef {recipe.load_t} load_t;
{"".join(structs)}{ending}}}

/* One block per output (Note [Reduction passes]): in each pass every thread
 * folds every blockDim.x-th element of the output's reduced extent and the
 * block combines the partials (blockDim.x a power of two, at most
 * EMBER_REDUCE_MAX_THREADS). */
extern "C" __global__ void
{name}({out_t} *out, const {in_t} *in, int64_t n_out, int64_t n_reduce,
{indent}{params}, double param)
{{
    namespace ops = {name}_ops;
{"".join(shared)}    const unsigned t = threadIdx.x;
    for (int64_t o = blockIdx.x; o < n_out; o += gridDim.x) {{
        const int64_t base = {in_base};
{"".join(body)}{store}    }}
}}
"""


def _scan_source(op, dtype, rank_class, name):
    """One line per thread, in order: the CPU's running value (the input
    converted to the result dtype, accumulated in TH_ACC_<Name>; for the
    half-precision dtypes, float32's, each running value rounded as it is
    stored)."""
    out_dtype = result_dtype(op, dtype)
    out_t = DTYPES[out_dtype][1]
    out_name, value_t = DTYPES[_pointwise.loop_dtype(out_dtype)]
    fold, identity = _SUM_LIKE[op]
    params, in_base, in_step, out_base, out_step = _geometry(rank_class, True)
    indent = " " * (len(name) + 1)
    return f"""#include "{PRELUDE_NAME}"

extern "C" __global__ void
{name}({out_t} *out, const {DTYPES[dtype][1]} *in, int64_t n_out, int64_t n_reduce,
{indent}{params}, double param)
{{
    (void)param;
    EMBER_FOR_EACH_INDEX(o, n_out) {{
        const int64_t base = {in_base};
        const int64_t out_base = {out_base};
        TH_ACC_{out_name} acc = {identity};
        for (int64_t r = 0; r < n_reduce; r++) {{
            const TH_ACC_{out_name} v =
                (TH_ACC_{out_name})({value_t})ember_widen(in[base + {in_step}]);
            acc = {fold};
            ember_store(out[out_base + {out_step}], ({value_t})acc);
        }}
    }}
}}
"""


def kernel_source(op, dtype, rank_class):
    """The CUDA C++ source of one reduction kernel (it includes PRELUDE_NAME)."""
    _check_key(op, dtype, rank_class)
    name = kernel_name(op, dtype, rank_class)
    if REDUCTIONS[op].kind == "scan":
        return _scan_source(op, dtype, rank_class, name)
    return _block_source(op, dtype, rank_class, name)


def kernel_parameters(op, dtype, rank_class):
    out_t = DTYPES[result_dtype(op, dtype)][1]
    result = [(f"{out_t} *", "out"), (f"const {DTYPES[dtype][1]} *", "in"),
              ("int64_t", "n_out"), ("int64_t", "n_reduce")]
    if rank_class == "contiguous":
        result.append(("EmberReduceShape", "shape"))
    else:
        result += [("EmberStrides", "kept"), ("EmberStrides", "reduced")]
    return result + [("double", "param")]


def headers():
    return dict(_pointwise.headers(), **{HEADER_NAME: _kernels.header_text(HEADER_NAME),
                                         PRELUDE_NAME: _PRELUDE})


# ---- the host side ---------------------------------------------------------------------

class EmberReduceShape(ctypes.Structure):
    _fields_ = [("reduce", ctypes.c_int64), ("inner", ctypes.c_int64)]


Plan = namedtuple("Plan", "op key out_dtype out_shape n_out n_reduce shape strides param")


def _wrap_dim(d, ndim):
    if not -max(ndim, 1) <= d < max(ndim, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-max(ndim, 1)}, {max(ndim, 1) - 1}], but got {d})")
    return d % max(ndim, 1)


def _dims(ndim, dim):
    if dim is None:
        return list(range(ndim))
    dims = {_wrap_dim(d, ndim) for d in ([dim] if isinstance(dim, int) else dim)}
    return sorted(dims) if ndim else []  # a 0-d tensor's dim 0 (or -1) reduces nothing


def norm_kernel(p):
    """The kernel of linalg.vector_norm's order p (THTensor_newNorm's choice)."""
    if p == 1 or p == 2:
        return f"norm{int(p)}"
    if math.isinf(p):
        return "norm_inf" if p > 0 else "norm_neg_inf"
    return "normp"


def _check_dtype(op, kernel, dtype, dim, ndim):
    """The CPU operator's error for a dtype it refuses."""
    name = _pointwise.SCALAR_TYPE_NAMES.get(dtype, dtype)
    if dtype in REDUCTIONS[kernel].dtypes:
        if REDUCTIONS[kernel].result == "float" and dtype not in FLOATS \
                and ember.get_default_dtype() != ember.float32:
            raise NotImplementedError(f"ember.cuda: {op} of {dtype} computes in float32 only "
                                      "(the default dtype is not float32)")
        return
    if op in ("var", "std"):
        raise RuntimeError("std and var only support floating point and complex dtypes")
    if op == "norm":
        raise RuntimeError("linalg.vector_norm: Expected a floating point or complex tensor "
                           f"as input. Got {name}")
    if op == "mean":
        raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either "
                           f"a floating point or complex dtype. Got: {name}")
    if op in ("softmax", "log_softmax"):
        last = "lastdim_" if dim in (-1, max(ndim, 1) - 1) else ""  # c/python/Reduce.c's
        raise NotImplementedError(f'"{op}_{last}kernel_impl" not implemented for \'{name}\'')
    if dtype == "bool":
        raise RuntimeError(f"{op}(): does not support bool input")
    # PyTorch's dispatch raises NotImplementedError (a RuntimeError) here
    raise NotImplementedError(f'"{op}_cuda" not implemented for \'{name}\'')


def _reduce_geometry(tensor, reduced):
    """(rank class, packed shape or strides) of a reduction over `reduced`."""
    shape, strides = tuple(tensor.shape), tuple(tensor.stride())
    kept = [d for d in range(len(shape)) if d not in reduced]
    one_run = len(reduced) == len(shape) or reduced == list(range(reduced[0], reduced[-1] + 1))
    if tensor.is_contiguous() and one_run:
        inner = math.prod(shape[reduced[-1] + 1:]) if reduced else 1
        return "contiguous", EmberReduceShape(reduce=math.prod(shape[d] for d in reduced),
                                              inner=inner)
    kept_sizes = [shape[d] for d in kept]
    out_strides = _pointwise._contiguous_strides(kept_sizes)
    return "strided", (
        _kernels.pack_strides(kept_sizes, [strides[d] for d in kept], out_strides),
        _kernels.pack_strides([shape[d] for d in reduced], [strides[d] for d in reduced],
                              [0] * len(reduced)))


def _line_geometry(tensor, dim):
    """(rank class, packed) of a line op along `dim`: the output is a new
    contiguous tensor of the input's shape."""
    shape, strides = tuple(tensor.shape), tuple(tensor.stride())
    if tensor.is_contiguous() or not shape:
        inner = math.prod(shape[dim + 1:]) if shape else 1
        return "contiguous", EmberReduceShape(reduce=shape[dim] if shape else 1, inner=inner)
    out_strides = _pointwise._contiguous_strides(shape)
    kept = [d for d in range(len(shape)) if d != dim]
    return "strided", (
        _kernels.pack_strides([shape[d] for d in kept], [strides[d] for d in kept],
                              [out_strides[d] for d in kept]),
        _kernels.pack_strides([shape[dim]], [strides[dim]], [out_strides[dim]]))


def plan(op, tensor, dim=None, keepdim=False, *, correction=1, p=2):
    """The kernel key, result and launch extents of `op` over `dim` of
    `tensor` (only its metadata is read).  Reductions take dim None (every
    dim), an int or a tuple, and keepdim; softmax, log_softmax and the
    scans one dim (their result has the input's shape).  "norm" is
    linalg.vector_norm of order `p`; var and std take `correction`."""
    dtype = str(tensor.dtype).removeprefix("ember.")
    kernel = norm_kernel(p) if op == "norm" else op
    if kernel not in REDUCTIONS:
        raise ValueError(f"no reduction named {op!r}")
    _check_dtype(op, kernel, dtype, dim, tensor.ndim)
    param = {"norm": p, "var": correction, "std": correction}.get(op, 0)
    shape = tuple(tensor.shape)
    if REDUCTIONS[kernel].kind != "reduce":
        if not isinstance(dim, int):
            raise TypeError(f"{op}(): argument 'dim' must be int, not {type(dim).__name__}")
        d = _wrap_dim(dim, len(shape))
        n = shape[d] if shape else 1
        rank_class, packed = _line_geometry(tensor, d)
        n_out = math.prod(s for k, s in enumerate(shape) if k != d)
        return Plan(op, (kernel, dtype, rank_class), result_dtype(kernel, dtype), shape,
                    n_out, n, shape, packed, param)
    reduced = _dims(len(shape), dim)
    n_reduce = math.prod(shape[d] for d in reduced)
    if n_reduce == 0 and kernel in ("amax", "amin", "argmax", "argmin"):
        raise IndexError(f"{op}(): Expected reduction dim to be specified for input.numel() == 0.")
    if n_reduce == 0 and kernel in ("norm_inf", "norm_neg_inf") or n_reduce == 0 and p < 0:
        which = "negative" if not math.isinf(p) else "inf" if p > 0 else "-inf"
        raise RuntimeError(f"linalg.vector_norm cannot compute the {which} norm on an empty "
                           "tensor because the operation does not have an identity")
    out_shape = tuple(1 if d in reduced else shape[d] for d in range(len(shape))) if keepdim \
        else tuple(shape[d] for d in range(len(shape)) if d not in reduced)
    n_out = math.prod(shape[d] for d in range(len(shape)) if d not in reduced)
    rank_class, packed = _reduce_geometry(tensor, reduced)
    return Plan(op, (kernel, dtype, rank_class), result_dtype(kernel, dtype), out_shape, n_out,
                n_reduce, shape, packed, param)


# The launcher's call names (Note [One dispatch point] in c/python/Device.c;
# a method's with "Tensor.") -> (plan's op, the names of the positional
# arguments after the input, in PyTorch's signatures).
_DIM_KEEPDIM = ("dim", "keepdim")
CALLS = {
    **{op: (op, _DIM_KEEPDIM) for op in ("sum", "mean", "prod", "amax", "amin", "argmax",
                                         "argmin", "logsumexp")},
    "var": ("var", ("dim", "unbiased", "keepdim")),
    "std": ("std", ("dim", "unbiased", "keepdim")),
    "norm": ("norm", ("p", "dim", "keepdim")),
    **{op: (op, ("dim",)) for op in ("softmax", "log_softmax", "cumsum", "cumprod")},
}


# The calls with PyTorch's dtype= (the input is converted first, as the
# CPU's new_input_as in THReduce.c does).
DTYPE_CALLS = {"sum", "mean", "prod", "softmax", "log_softmax", "cumsum", "cumprod", "norm"}


def pop_dtype(name, kwargs):
    """The dtype= of a call named in CALLS (removed from kwargs), or None."""
    dtype = kwargs.pop("dtype", None)
    op = CALLS[name.removeprefix("Tensor.")][0]
    if dtype is not None and op not in DTYPE_CALLS:
        raise TypeError(f"{op}() got an unexpected keyword argument 'dtype'")
    return dtype


def plan_call(name, args, kwargs):
    """plan() for a call as the launcher receives it: ("var", (t, 1),
    {"correction": 0}) or ("Tensor.softmax", (t, -1), {}).  A dtype= must
    be the input's: the launcher converts the input to it first."""
    op, names = CALLS[name.removeprefix("Tensor.")]
    tensor, *positional = args
    if len(positional) > len(names) or set(names[:len(positional)]) & set(kwargs):
        raise TypeError(f"{op}() got an unexpected combination of arguments")
    kwargs = dict(kwargs)
    dtype = pop_dtype(name, kwargs)
    if dtype is not None and dtype != tensor.dtype:
        raise ValueError(f"{op}(dtype={dtype}): convert the input to {dtype} first")
    bound = dict(zip(names, positional), **kwargs)
    unbiased = bound.pop("unbiased", None)
    if unbiased is not None:
        bound["correction"] = int(unbiased)
    if op == "norm" and bound.get("p", 2) in (None, "fro"):
        bound["p"] = 2  # the Frobenius norm of the flattened input
    return plan(op, tensor, **bound)


def launch_config(p, sms=None):
    """((grid,), (block,)) of a plan's kernel: a block per output, or (the
    scans) a thread per line."""
    if REDUCTIONS[p.key[0]].kind == "scan":
        return _launch.launch_config(p.n_out, sms)
    return _launch.reduce_launch_config(p.n_out, p.n_reduce, sms)


def arguments(p, out_ptr, in_ptr):
    """The kernel's arguments as ctypes values, in its parameter order."""
    args = [ctypes.c_void_p(out_ptr), ctypes.c_void_p(in_ptr), ctypes.c_int64(p.n_out),
            ctypes.c_int64(p.n_reduce)]
    geometry = [p.strides] if p.key[2] == "contiguous" else list(p.strides)
    return args + geometry + [ctypes.c_double(p.param)]
