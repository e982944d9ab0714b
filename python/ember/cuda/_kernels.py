"""The CUDA sources of ember's elementwise unary kernels, from the CPU's formulas.

Every floating-point unary operator's math is one expression in `x` in
c/th/THFloatFormulas.h's TH_FORALL_FLOAT_FORMULAS table (Note [One formula,
two compilers]).  This module reads those expressions out of the header's
text and wraps each in a kernel, so the GPU computes what the CPU computes:

    kernel_source("exp", "float32", "contiguous")  ->  CUDA C++ source
    compiled_kernel("exp", "float32", "contiguous", "sm_90")  ->  cubin

The predicates of TH_FORALL_PREDICATE_FORMULAS (isnan, isinf, isfinite,
isposinf, isneginf) get the same kernels with a bool result.

A kernel is specialised on (operator, dtype, rank class):

  contiguous   input and output dense and in the same order: one linear
               index per element;
  strided      any sizes and strides up to MAX_DIMS dimensions, passed in
               an EmberStrides struct (see `pack_strides`); each element's
               input and output offsets are computed from its linear index.

Kernels are `extern "C"`, grid-stride loops over int64 indices, and take
the call's THUnaryParams (round's decimals, nan_to_num's replacements) by
value.  Compiled cubins are cached per (operator, dtype, rank class, arch).
"""

import ctypes
import functools
import os
import re
from collections import namedtuple

__all__ = ["DTYPES", "RANK_CLASSES", "MAX_DIMS", "float_formulas", "predicate_formulas",
           "kernel_name",
           "kernel_source", "kernel_parameters", "headers", "compiled_kernel", "THUnaryParams",
           "EmberStrides", "pack_strides"]

HEADER_NAME = "THFloatFormulas.h"
PRELUDE_NAME = "ember_elementwise.h"
HALF_NAME = "ember_half.h"

# ember dtype name -> the C type of an element in memory; the formulas
# compute in COMPUTE_CTYPES (float32 for the half-precision dtypes, Note
# [Half precision on the device]).
DTYPES = {"float32": "float", "float64": "double", "float16": "ember_float16",
          "bfloat16": "ember_bfloat16"}
COMPUTE_CTYPES = {"float32": "float", "float64": "double", "float16": "float",
                  "bfloat16": "float"}
RANK_CLASSES = ("contiguous", "strided")
# Every ember tensor has at most this many dimensions (TH_MAX_DIMS in
# c/th/THTensor.h), so one strided kernel serves them all.
MAX_DIMS = 32


def _header_path(name):
    """A formulas header shipped in this package (a link to c/th's in the
    source tree, a copy in a wheel)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), name)


@functools.cache
def header_text(name=HEADER_NAME):
    with open(_header_path(name)) as f:
        return f.read()


def _logical_lines(text):
    """The header's text without comments, one line per preprocessor line
    (backslash continuations joined)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return text.replace("\\\n", " ").splitlines()


def _xmacro_entries(body):
    """The `_(a, b, ...)` entries of an X-macro's body, each as a list of its
    top-level arguments (commas inside parentheses don't split)."""
    entries, i = [], 0
    while (start := body.find("_(", i)) != -1:
        depth, args, arg_start = 0, [], start + 2
        for j in range(start + 1, len(body)):
            c = body[j]
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    args.append(body[arg_start:j])
                    break
            elif c == "," and depth == 1:
                args.append(body[arg_start:j])
                arg_start = j + 1
        else:
            raise ValueError(f"unbalanced parentheses in {body[start:]!r}")
        entries.append([" ".join(a.split()) for a in args])
        i = j + 1
    return entries


def xmacro(text, macro):
    """The entries of X-macro `macro` (`#define macro(_) _(...) ...`) in a
    header's text, each as the list of its arguments."""
    prefix = f"#define {macro}(_)"
    for line in _logical_lines(text):
        if line.strip().startswith(prefix):
            return _xmacro_entries(line.strip()[len(prefix):])
    raise ValueError(f"no X-macro {macro} in the header")


@functools.cache
def float_formulas():
    """{operator: formula} from TH_FORALL_FLOAT_FORMULAS, in its order."""
    return {name: formula for name, formula in xmacro(header_text(), "TH_FORALL_FLOAT_FORMULAS")}


Predicate = namedtuple("Predicate", "formula integer_value")


@functools.cache
def predicate_formulas():
    """{operator: Predicate} from TH_FORALL_PREDICATE_FORMULAS (isnan,
    isinf, ...: a float's bool), with the value every integer (and bool)
    element gives, in the header's order."""
    return {name: Predicate(formula, value == "true") for name, formula, value
            in xmacro(header_text(), "TH_FORALL_PREDICATE_FORMULAS")}


def _formula(op):
    """(formula, result C type or None for the input's) of op."""
    if op in predicate_formulas():
        return predicate_formulas()[op].formula, "bool"
    return float_formulas()[op], None


# ---- the sources ----------------------------------------------------------------

# Shared by every elementwise kernel: the formulas, the grid-stride loop's
# bounds and the strided offsets.  Its include guard lets many kernel
# sources be compiled as one program.
_PRELUDE = f"""\
#ifndef EMBER_ELEMENTWISE_H
#define EMBER_ELEMENTWISE_H
#include "{HEADER_NAME}"

#include "{HALF_NAME}"

#define EMBER_MAX_DIMS {MAX_DIMS}

/* Sizes and element strides, innermost dimension first (pack_strides). */
typedef struct {{
    int64_t sizes[EMBER_MAX_DIMS];
    int64_t in_strides[EMBER_MAX_DIMS];
    int64_t out_strides[EMBER_MAX_DIMS];
    int32_t ndim;
}} EmberStrides;

typedef struct {{
    int64_t in, out;
}} EmberOffsets;

/* The element offsets of linear index i (row-major over `sizes`).  The
 * loop is unrolled to constant indices so the struct stays in the kernel's
 * parameter space instead of being copied to local memory. */
static __device__ __forceinline__ EmberOffsets
ember_offsets(int64_t i, const EmberStrides &s)
{{
    EmberOffsets o = {{0, 0}};
#pragma unroll 1
    for (int d = 0; d < EMBER_MAX_DIMS; d++) {{
        if (d == s.ndim) {{
            break;
        }}
        int64_t coordinate = i % s.sizes[d];
        i /= s.sizes[d];
        o.in += coordinate * s.in_strides[d];
        o.out += coordinate * s.out_strides[d];
    }}
    return o;
}}

/* A grid-stride loop: each thread takes every (grid size)-th element, so
 * any grid covers any n.  Indices are int64: a tensor may pass 2^31. */
#define EMBER_FOR_EACH_INDEX(i, n)                                          \\
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \\
         i += (int64_t)blockDim.x * gridDim.x)
#endif
"""

_CONTIGUOUS = """\
extern "C" __global__ void
{name}(const {ctype} *in, {out_ctype} *out, int64_t n, THUnaryParams params)
{{
    EMBER_FOR_EACH_INDEX(i, n) {{
        ember_store(out[i], {ns}::formula(({ns}::scalar_t)ember_widen(in[i]), &params));
    }}
}}
"""

_STRIDED = """\
extern "C" __global__ void
{name}(const {ctype} *in, {out_ctype} *out, int64_t n, EmberStrides strides,
{indent}THUnaryParams params)
{{
    EMBER_FOR_EACH_INDEX(i, n) {{
        EmberOffsets o = ember_offsets(i, strides);
        ember_store(out[o.out], {ns}::formula(({ns}::scalar_t)ember_widen(in[o.in]), &params));
    }}
}}
"""


def kernel_name(op, dtype, rank_class):
    return f"ember_unary_{op}_{dtype}_{rank_class}"


def _check_key(op, dtype, rank_class):
    if op not in float_formulas() and op not in predicate_formulas():
        raise ValueError(f"no floating-point unary formula named {op!r}")
    if dtype not in DTYPES:
        raise ValueError(f"unary kernels are generated for {sorted(DTYPES)}, not {dtype!r}")
    if rank_class not in RANK_CLASSES:
        raise ValueError(f"rank class must be one of {RANK_CLASSES}, not {rank_class!r}")


def kernel_source(op, dtype, rank_class):
    """The CUDA C++ source of one unary kernel (it includes PRELUDE_NAME):
    a float formula's result has the input's dtype, a predicate's is bool."""
    _check_key(op, dtype, rank_class)
    name, ctype = kernel_name(op, dtype, rank_class), DTYPES[dtype]
    ns = f"{name}_formula"
    scalar_t = COMPUTE_CTYPES[dtype]
    text, result_t = _formula(op)
    result_t = result_t or "scalar_t"
    # The formula reads `x` (a scalar_t) and `p` (the THUnaryParams), as in
    # THUnary.c's loops (Note [Unary formulas]).
    formula = (f"namespace {ns} {{\n"
               f"typedef {scalar_t} scalar_t;\n"
               f"TH_FORMULA_FN {result_t}\n"
               f"formula(scalar_t x, const THUnaryParams *p)\n"
               f"{{\n"
               f"    (void)p;\n"
               f"    return ({result_t})({text});\n"
               f"}}\n"
               f"}}\n")
    template = _CONTIGUOUS if rank_class == "contiguous" else _STRIDED
    kernel = template.format(name=name, ctype=ctype, out_ctype=_out_ctype(op, dtype), ns=ns,
                             indent=" " * (len(name) + 1))
    return f'#include "{PRELUDE_NAME}"\n\n{formula}\n{kernel}'


# Note [Half precision on the device]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# float16 and bfloat16 are storage formats on the device as on the CPU
# (Note [Half-precision dtypes] in c/th/THDtype.h): an element is a struct
# holding its 16 bits, so arithmetic on it does not compile by accident;
# ember_widen turns it into the float32 the formulas compute in, exactly,
# and ember_store rounds a float32 result into it once, to nearest even.
# Both are c/th/THHalf.h's scalar conversions (Note [Half conversions bit
# for bit]) written as integer operations only: no cuda_fp16.h, so the
# same text compiles under NVRTC and g++ (the emulation), and the bits,
# NaNs and subnormals included, are the CPU's.  For every other type
# ember_widen is the identity and ember_store a C conversion.
_HALF = """\
#ifndef EMBER_HALF_H
#define EMBER_HALF_H
#if defined(__CUDACC_RTC__)
typedef unsigned short uint16_t;
#endif

typedef struct {
    uint16_t bits;
} ember_float16;

typedef struct {
    uint16_t bits;
} ember_bfloat16;

static __device__ __forceinline__ uint32_t
ember_float_bits(float value)
{
    union {
        float value;
        uint32_t bits;
    } pun;
    pun.value = value;
    return pun.bits;
}

static __device__ __forceinline__ float
ember_float_from_bits(uint32_t bits)
{
    union {
        uint32_t bits;
        float value;
    } pun;
    pun.bits = bits;
    return pun.value;
}

/* float16 -> float32, exact; a NaN keeps its payload and becomes quiet. */
static __device__ __forceinline__ float
ember_widen(ember_float16 half)
{
    uint32_t sign = (uint32_t)(half.bits & 0x8000) << 16;
    uint32_t exponent = (half.bits >> 10) & 0x1f;
    uint32_t mantissa = half.bits & 0x3ff;
    if (exponent == 0x1f) {
        uint32_t quiet = mantissa != 0 ? 0x400000 : 0;
        return ember_float_from_bits(sign | 0x7f800000 | quiet | (mantissa << 13));
    }
    if (exponent == 0) {
        if (mantissa == 0) {
            return ember_float_from_bits(sign);
        }
        /* a subnormal, mantissa * 2^-24: normalise the significand */
        uint32_t biased = 113; /* float32's biased exponent of 2^-14 */
        while ((mantissa & 0x400) == 0) {
            mantissa <<= 1;
            biased--;
        }
        return ember_float_from_bits(sign | (biased << 23) | ((mantissa & 0x3ff) << 13));
    }
    return ember_float_from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

static __device__ __forceinline__ float
ember_widen(ember_bfloat16 value)
{
    return ember_float_from_bits((uint32_t)value.bits << 16);
}

template <typename T>
static __device__ __forceinline__ T
ember_widen(T value)
{
    return value;
}

/* float32 -> float16, to nearest even: inf from 65520 up, subnormals
 * below 2^-14, a NaN quiet with the top 10 bits of its payload. */
static __device__ __forceinline__ void
ember_store(ember_float16 &out, float value)
{
    uint32_t bits = ember_float_bits(value);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000);
    uint32_t abs = bits & 0x7fffffff;
    if (abs > 0x7f800000) {
        out.bits = sign | 0x7e00 | (uint16_t)((abs >> 13) & 0x3ff);
    }
    else if (abs >= 0x477ff000) {
        out.bits = sign | 0x7c00;
    }
    else if (abs < 0x38800000) {
        uint32_t exponent = abs >> 23;
        uint32_t kept = 0;
        if (exponent >= 102) { /* else below 2^-25: zero */
            uint32_t significand = (abs & 0x7fffff) | 0x800000;
            uint32_t shift = 126 - exponent;
            uint32_t dropped = significand & ((1u << shift) - 1);
            uint32_t halfway = 1u << (shift - 1);
            kept = significand >> shift;
            kept += dropped > halfway || (dropped == halfway && (kept & 1));
        }
        out.bits = sign | (uint16_t)kept;
    }
    else {
        uint32_t odd = (abs >> 13) & 1;
        out.bits = sign | (uint16_t)((abs - (112u << 23) + 0xfff + odd) >> 13);
    }
}

/* float32 -> bfloat16, to nearest even on the bits; every NaN 0xffff. */
static __device__ __forceinline__ void
ember_store(ember_bfloat16 &out, float value)
{
    uint32_t bits = ember_float_bits(value);
    out.bits = (bits & 0x7fffffff) > 0x7f800000
                   ? 0xffff
                   : (uint16_t)((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

template <typename T, typename V>
static __device__ __forceinline__ void
ember_store(T &out, V value)
{
    out = (T)value;
}
#endif
"""


def headers():
    """{include name: text} for every header the kernel sources include."""
    return {HEADER_NAME: header_text(), PRELUDE_NAME: _PRELUDE, HALF_NAME: _HALF}


# ---- compiling -------------------------------------------------------------------

CompiledKernel = namedtuple("CompiledKernel", "name cubin registers spill_bytes")


@functools.cache
def compiled_kernel(op, dtype, rank_class, arch):
    """The kernel compiled to a cubin for `arch` (cached per key)."""
    from . import _nvrtc
    name = kernel_name(op, dtype, rank_class)
    cubin, registers, spills, _ = _nvrtc.compile(
        kernel_source(op, dtype, rank_class), arch, headers(), name=f"{name}.cu")
    return CompiledKernel(name, cubin, registers[name], spills[name])


def _out_ctype(op, dtype):
    """The C type of a kernel's result element: bool for a predicate."""
    return "bool" if op in predicate_formulas() else DTYPES[dtype]


def kernel_parameters(dtype, rank_class, op=None):
    """[(C type, name)] of a unary kernel's parameters, in order (op: for
    a predicate's bool result)."""
    result = [(f"const {DTYPES[dtype]} *", "in"), (f"{_out_ctype(op, dtype)} *", "out"),
              ("int64_t", "n")]
    if rank_class == "strided":
        result.append(("EmberStrides", "strides"))
    return result + [("THUnaryParams", "params")]


# ---- the host side: the kernels' struct arguments -------------------------------

class THUnaryParams(ctypes.Structure):
    """c/th/THFloatFormulas.h's THUnaryParams, field for field."""
    _fields_ = [("ten_pow", ctypes.c_double), ("divide", ctypes.c_bool),
                ("nan", ctypes.c_double), ("posinf", ctypes.c_double),
                ("neginf", ctypes.c_double)]


class EmberStrides(ctypes.Structure):
    """The strided kernels' EmberStrides (the prelude above)."""
    _fields_ = [("sizes", ctypes.c_int64 * MAX_DIMS),
                ("in_strides", ctypes.c_int64 * MAX_DIMS),
                ("out_strides", ctypes.c_int64 * MAX_DIMS),
                ("ndim", ctypes.c_int32)]


def pack_strides(shape, in_strides, out_strides):
    """EmberStrides for a strided kernel: sizes and element strides
    (outermost first, as Tensor.stride()) stored innermost first."""
    ndim = len(shape)
    if not len(in_strides) == len(out_strides) == ndim:
        raise ValueError("shape, in_strides and out_strides must have the same length")
    if ndim > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} dimensions, got {ndim}")
    s = EmberStrides(ndim=ndim)
    for d, (size, a, b) in enumerate(zip(reversed(shape), reversed(in_strides),
                                         reversed(out_strides))):
        s.sizes[d], s.in_strides[d], s.out_strides[d] = size, a, b
    return s
