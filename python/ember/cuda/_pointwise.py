"""CUDA sources of THPointwise's operators (binary, ternary and the integer
unary ones), from the CPU's formulas, and the host side of a launch.

c/th/THPointwiseFormulas.h holds each operator's per-element math as a
macro, EXPR_<OP>(Name, ctype, a, b, P), and the tables TH_POINTWISE_*_OPS
of which dtype categories (bool, integer, floating) each operator computes
in and whether it gives bool.  This module reads the tables out of the
header's text and writes, from one template, a kernel per

    (operator, input dtypes, compute dtype, rank class)

that loads each input in its own dtype, converts it to the compute dtype
(as the CPU's THTensor_newCast does before its loops), expands the same
EXPR_<OP> the CPU loops expand and stores the result:

  contiguous  every tensor operand dense in the output's order: index i;
  strided     any sizes and strides (a broadcast dim has stride 0), one
              offset per operand from the linear index.

An input is an EmberInput: a tensor's data pointer, or (data NULL) one value
passed by value, the kernel form of a Python number (Note [Wrapped numbers]
in c/th/THPointwise.h); the host converts the number to the compute dtype
as the CPU's TH_SCALAR_AS does.  `plan(op, *args)` does the CPU's type
promotion (ember.result_type, the C function) and picks the kernel.
"""

import ctypes
import functools
import math
from collections import namedtuple

import ember
from ember._tensor import _contiguous_strides

from . import _kernels

__all__ = ["ARITH_DTYPES", "DTYPES", "LOOP_DTYPES", "OPS", "MAX_OPERANDS", "ops", "kernel_dtypes", "kernel_name",
           "kernel_source", "headers", "EmberOperandStrides", "EmberInput", "plan"]

HEADER_NAME = "THPointwiseFormulas.h"
PRELUDE_NAME = "ember_pointwise.h"

# ember dtype name -> (THTensor.h's Name, C type of an element in memory).
# ARITH_DTYPES are the ones C arithmetic computes in (the other kernel
# families take these); DTYPES adds the half-precision storage formats.
ARITH_DTYPES = {
    "bool": ("Bool", "bool"), "uint8": ("UInt8", "uint8_t"), "int8": ("Int8", "int8_t"),
    "int16": ("Int16", "int16_t"), "int32": ("Int32", "int32_t"),
    "int64": ("Int64", "int64_t"), "float32": ("Float32", "float"),
    "float64": ("Float64", "double"),
}
DTYPES = dict(ARITH_DTYPES, float16=("Float16", "ember_float16"),
              bfloat16=("BFloat16", "ember_bfloat16"))
FLOATING = {"float32", "float64", "float16", "bfloat16"}
# The dtype an operator computes in when its result has this one (the CPU's
# THDtype_computeDtype): the half-precision dtypes are storage formats,
# widened to float32 on load and rounded once on store (Note [Half
# precision on the device]).
LOOP_DTYPES = {"float16": "float32", "bfloat16": "float32"}
# A half-precision number in ctypes is its 16 bits (number_as converts).
CTYPES = {"bool": ctypes.c_bool, "uint8": ctypes.c_uint8, "int8": ctypes.c_int8,
          "int16": ctypes.c_int16, "int32": ctypes.c_int32, "int64": ctypes.c_int64,
          "float32": ctypes.c_float, "float64": ctypes.c_double,
          "float16": ctypes.c_uint16, "bfloat16": ctypes.c_uint16}
# PyTorch's ScalarType names, for "not implemented for 'Int'".
SCALAR_TYPE_NAMES = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short",
                     "int32": "Int", "int64": "Long", "float32": "Float",
                     "float64": "Double", "float16": "Half", "bfloat16": "BFloat16"}
# ... and the C++ element types, for "Expected out tensor to have dtype float"
# (c/th/THDtype.c's TH_SCALAR_TYPE_NAMES).
CPP_TYPE_NAMES = {"bool": "bool", "uint8": "unsigned char", "int8": "signed char",
                  "int16": "short int", "int32": "int", "int64": "long int", "float32": "float",
                  "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16"}
RANK_CLASSES = ("contiguous", "strided")
MAX_OPERANDS = 4  # the output and up to three inputs
# Operators whose integer and bool inputs compute in the default float
# dtype (THPointwise.c: promotes_to_float).
PROMOTES_TO_FLOAT = {"div", "atan2", "copysign", "xlogy"}

# bool_output: comparisons and logical ops; bool_first: where's condition.
OpInfo = namedtuple("OpInfo", "arity bool_ok int_ok float_ok bool_output bool_first")


@functools.cache
def ops():
    """{operator: OpInfo} from the header's TH_POINTWISE_{UNARY,BINARY,
    TERNARY}_OPS tables, in their order (lower-case names)."""
    text = _kernels.header_text(HEADER_NAME)
    table = {}
    for arity, macro in ((1, "TH_POINTWISE_UNARY_OPS"), (2, "TH_POINTWISE_BINARY_OPS"),
                         (3, "TH_POINTWISE_TERNARY_OPS")):
        for name, b, i, f, kind in _kernels.xmacro(text, macro):
            # the last column is the output's type, but the first input's
            # for the ternary operators (THPointwise.c's loops)
            boolean = kind == "BOOLEAN"
            table[name.lower()] = OpInfo(arity, b == "1", i == "1", f == "1",
                                         boolean and arity < 3, boolean and arity == 3)
    return table


def _category_ok(info, dtype):
    if dtype == "bool":
        return info.bool_ok
    return info.float_ok if dtype in FLOATING else info.int_ok


def loop_dtype(dtype):
    """The dtype the formulas compute in for a result of `dtype`."""
    return LOOP_DTYPES.get(dtype, dtype)


def kernel_dtypes(op):
    """The compute dtypes `op` has a kernel for, as on the CPU."""
    return [d for d in DTYPES if _category_ok(ops()[op], d)]


def _input_types(op, compute):
    """The types the formula takes its inputs in: the loop dtype's C
    type, except where's condition (bool)."""
    ctype = DTYPES[loop_dtype(compute)][1]
    types = [ctype] * ops()[op].arity
    if ops()[op].bool_first:
        types[0] = "bool"
    return types


def kernel_name(op, in_dtypes, compute, rank_class):
    return f"ember_{op}_{'_'.join(in_dtypes)}_to_{compute}_{rank_class}"


def _check_key(op, in_dtypes, compute, rank_class):
    if op not in ops():
        raise ValueError(f"no pointwise formula named {op!r}")
    if compute not in DTYPES or not _category_ok(ops()[op], compute):
        raise ValueError(f"{op} has no kernel computing in {compute!r}")
    if len(in_dtypes) != ops()[op].arity or any(d not in DTYPES for d in in_dtypes):
        raise ValueError(f"{op} takes {ops()[op].arity} inputs of {sorted(DTYPES)}, "
                         f"not {in_dtypes!r}")
    if op == "where" and in_dtypes[0] != "bool":
        raise ValueError("where's condition must be bool")
    if rank_class not in RANK_CLASSES:
        raise ValueError(f"rank class must be one of {RANK_CLASSES}, not {rank_class!r}")


# ---- the sources ----------------------------------------------------------------

_PRELUDE = f"""\
#ifndef EMBER_POINTWISE_H
#define EMBER_POINTWISE_H
#if defined(__CUDACC_RTC__)
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
#endif
#include "{_kernels.PRELUDE_NAME}"
#include "{_kernels.HALF_NAME}"
#include "{HEADER_NAME}"

#define EMBER_MAX_OPERANDS {MAX_OPERANDS}

/* Sizes and element strides of every operand (output first), innermost
 * dimension first; a broadcast dimension has stride 0. */
typedef struct {{
    int64_t sizes[EMBER_MAX_DIMS];
    int64_t strides[EMBER_MAX_OPERANDS][EMBER_MAX_DIMS];
    int32_t ndim;
}} EmberOperandStrides;

template <int N> struct EmberOperandOffsets {{
    int64_t at[N];
}};

/* The element offsets of linear index i in the first N operands. */
template <int N>
static __device__ __forceinline__ EmberOperandOffsets<N>
ember_operand_offsets(int64_t i, const EmberOperandStrides &s)
{{
    EmberOperandOffsets<N> o;
#pragma unroll
    for (int k = 0; k < N; k++) {{
        o.at[k] = 0;
    }}
#pragma unroll 1
    for (int d = 0; d < EMBER_MAX_DIMS; d++) {{
        if (d == s.ndim) {{
            break;
        }}
        int64_t coordinate = i % s.sizes[d];
        i /= s.sizes[d];
#pragma unroll
        for (int k = 0; k < N; k++) {{
            o.at[k] += coordinate * s.strides[k][d];
        }}
    }}
    return o;
}}

/* An input operand: a tensor's elements, or (data == 0) one value for
 * every element, passed by value: a Python number.  The branch is the same
 * for every thread of the launch. */
template <typename T> struct EmberInput {{
    const T *data;
    T value;
    __device__ __forceinline__ T at(int64_t i) const
    {{
        return data != 0 ? data[i] : value;
    }}
}};
#endif
"""


def kernel_source(op, in_dtypes, compute, rank_class):
    """The CUDA C++ source of one pointwise kernel (it includes PRELUDE_NAME)."""
    in_dtypes = tuple(in_dtypes)
    _check_key(op, in_dtypes, compute, rank_class)
    info, (name_tag, ctype) = ops()[op], DTYPES[loop_dtype(compute)]
    name = kernel_name(op, in_dtypes, compute, rank_class)
    ns = f"{name}_formula"
    out_t = "bool" if info.bool_output else DTYPES[compute][1]
    formula_t = "bool" if info.bool_output else ctype
    types = _input_types(op, compute)
    params = ", ".join(f"{t} a{k}" for k, t in enumerate(types))
    expr_args = ", ".join([f"a{k}" for k in range(info.arity)] + ([] if info.arity == 1 else ["P"]))
    formula = (f"namespace {ns} {{\n"
               f"typedef {ctype} scalar_t;\n"
               f"TH_FORMULA_FN {formula_t}\n"
               f"formula({params}, scalar_t P)\n"
               f"{{\n"
               f"    (void)P;\n"
               f"    return ({formula_t})(EXPR_{op.upper()}({name_tag}, {ctype}, {expr_args}));\n"
               f"}}\n"
               f"}}\n")
    inputs = "".join(f", EmberInput<{DTYPES[d][1]}> in{k}" for k, d in enumerate(in_dtypes))
    if rank_class == "contiguous":
        extra, offsets, out_at = "", "", "i"
        loads = [f"({t})ember_widen(in{k}.at(i))" for k, t in enumerate(types)]
    else:
        extra = ", EmberOperandStrides strides"
        offsets = (f"        EmberOperandOffsets<{info.arity + 1}> o =\n"
                   f"            ember_operand_offsets<{info.arity + 1}>(i, strides);\n")
        out_at = "o.at[0]"
        loads = [f"({t})ember_widen(in{k}.at(o.at[{k + 1}]))" for k, t in enumerate(types)]
    kernel = (f'extern "C" __global__ void\n'
              f"{name}({out_t} *out{inputs}, int64_t n{extra}, {ctype} param)\n"
              f"{{\n"
              f"    EMBER_FOR_EACH_INDEX(i, n) {{\n"
              f"{offsets}"
              f"        ember_store(out[{out_at}], {ns}::formula({', '.join(loads)}, param));\n"
              f"    }}\n"
              f"}}\n")
    return f'#include "{PRELUDE_NAME}"\n\n{formula}\n{kernel}'


def kernel_parameters(op, in_dtypes, compute, rank_class):
    """[(C type, name)] of the kernel's parameters, in order (the CPU
    emulation's launchers are generated from it)."""
    info, ctype = ops()[op], DTYPES[loop_dtype(compute)][1]
    out_t = "bool" if info.bool_output else DTYPES[compute][1]
    result = [(f"{out_t} *", "out")]
    result += [(f"EmberInput<{DTYPES[d][1]}>", f"in{k}") for k, d in enumerate(in_dtypes)]
    result.append(("int64_t", "n"))
    if rank_class == "strided":
        result.append(("EmberOperandStrides", "strides"))
    result.append((ctype, "param"))
    return result


def headers():
    """{include name: text} for every header the pointwise sources include."""
    return dict(_kernels.headers(), **{HEADER_NAME: _kernels.header_text(HEADER_NAME),
                                       PRELUDE_NAME: _PRELUDE})


# ---- the host side: arguments ----------------------------------------------------------

class EmberOperandStrides(ctypes.Structure):
    _fields_ = [("sizes", ctypes.c_int64 * _kernels.MAX_DIMS),
                ("strides", (ctypes.c_int64 * _kernels.MAX_DIMS) * MAX_OPERANDS),
                ("ndim", ctypes.c_int32)]


@functools.cache
def EmberInput(dtype):
    """The ctypes mirror of EmberInput<T> for an ember dtype name."""
    return type(f"EmberInput_{dtype}", (ctypes.Structure,),
                {"_fields_": [("data", ctypes.c_void_p), ("value", CTYPES[dtype])]})


def _dtype_name(dtype):
    return str(dtype).removeprefix("ember.")


def number_as(value, dtype):
    """A Python number converted to `dtype` as the CPU's TH_SCALAR_AS does:
    C's conversions (integers wrap into narrower integer dtypes; an int
    converts to a float directly, rounding once)."""
    if dtype == "bool":
        return bool(value)
    if dtype in LOOP_DTYPES:  # its bits, rounded as the CPU's casts round
        return _half_bits(ember.tensor(number_as(value, "float32")).to(getattr(ember, dtype)))
    if dtype in FLOATING:
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2 ** 53:
            # exact rounding of a big int: NumPy casts int64 -> float32 in C
            import numpy as np
            return float(np.array(value, np.int64).astype(np.float32 if dtype == "float32"
                                                          else np.float64))
        return CTYPES[dtype](float(value)).value
    bits = 8 * ctypes.sizeof(CTYPES[dtype])
    wrapped = int(value) & ((1 << bits) - 1)
    signed = not dtype.startswith("uint")
    return wrapped - (1 << bits) if signed and wrapped >> (bits - 1) else wrapped


def _half_bits(tensor):
    """The 16 bits of a one-element float16 or bfloat16 CPU tensor."""
    return ctypes.c_uint16.from_address(tensor.data_ptr()).value


def _result_type(args):
    """torch.result_type over any number of operands, by ember's own
    (THPointwise_resultType): folded pairwise, each partial result standing
    in as a tensor with dims when any operand so far had them (0-dim
    otherwise), which keeps the categories' priorities."""
    acc = args[0]
    for other in args[1:]:
        dtype = ember.result_type(acc, other)
        dims = any(isinstance(a, ember.Tensor) and a.ndim > 0 for a in (acc, other))
        acc = ember.empty((1,) if dims else (), dtype=dtype)
    return acc.dtype if isinstance(acc, ember.Tensor) else ember.result_type(acc, acc)


def _broadcast_shape(shapes):
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(ndim):
        sizes = {s[d - ndim + len(s)] for s in shapes if d - ndim + len(s) >= 0} - {1}
        if len(sizes) > 1:
            raise RuntimeError(f"shapes {list(map(tuple, shapes))} cannot be broadcast together")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _broadcast_strides(tensor, shape):
    """tensor's element strides in the broadcast shape (0 where it repeats)."""
    lead = len(shape) - tensor.ndim
    strides = [0] * lead
    for d, (size, stride) in enumerate(zip(tensor.shape, tensor.stride())):
        strides.append(0 if size == 1 and shape[lead + d] != 1 else stride)
    return strides


Plan = namedtuple("Plan", "op key out_dtype shape numel rank_class strides values param")


def plan(op, *args, alpha=1, out_strides=None):
    """How THPointwise's `op` runs on `args` (tensors or Python numbers) as a
    kernel: the cache key (op, input dtypes, compute dtype, rank class), the
    result dtype and shape, the packed strides, the numbers converted to the
    compute dtype and alpha.  `out_strides`: an out= tensor's strides (a
    new, contiguous result otherwise).  Uses only metadata: no GPU needed."""
    if op not in ops():
        raise ValueError(f"no pointwise formula named {op!r}")
    info = ops()[op]
    if len(args) != info.arity:
        raise TypeError(f"{op} takes {info.arity} operands, got {len(args)}")
    tensors = [a for a in args if isinstance(a, ember.Tensor)]
    if not tensors:
        raise TypeError(f"{op}: at least one operand must be a tensor")
    if op == "where" and not (isinstance(args[0], ember.Tensor) and args[0].dtype == ember.bool):
        raise RuntimeError("where expected condition to be a boolean tensor")
    promoted = args[1:] if op == "where" else args
    compute = _dtype_name(_result_type(promoted))
    if op in PROMOTES_TO_FLOAT and compute not in FLOATING:
        compute = _dtype_name(ember.get_default_dtype())
    if compute not in DTYPES or not _category_ok(info, compute):
        raise RuntimeError(f'"{op}_cuda" not implemented for '
                           f"'{SCALAR_TYPE_NAMES.get(compute, compute)}'")
    shape = _broadcast_shape([tuple(t.shape) for t in tensors])
    numel = math.prod(shape)
    contiguous_out = out_strides is None or tuple(out_strides) == _contiguous_strides(shape)
    dense = contiguous_out and all(tuple(t.shape) == shape and t.is_contiguous() for t in tensors)
    rank_class = "contiguous" if dense else "strided"
    in_dtypes, values = [], []
    for k, a in enumerate(args):
        if isinstance(a, ember.Tensor):
            in_dtypes.append(_dtype_name(a.dtype))
            values.append(None)
        else:
            d = "bool" if op == "where" and k == 0 else loop_dtype(compute)
            in_dtypes.append(d)
            values.append(number_as(a, d))
    strides = None
    if rank_class == "strided":
        out_s = list(out_strides) if out_strides is not None else list(_contiguous_strides(shape))
        per_operand = [out_s] + [_broadcast_strides(a, shape) if isinstance(a, ember.Tensor)
                                 else [0] * len(shape) for a in args]
        strides = pack_operand_strides(shape, per_operand)
    key = (op, tuple(in_dtypes), compute, rank_class)
    out_dtype = "bool" if info.bool_output else compute
    return Plan(op, key, out_dtype, shape, numel, rank_class, strides, values,
                number_as(alpha, loop_dtype(compute)))


def pack_operand_strides(shape, per_operand):
    """EmberOperandStrides from the shape and each operand's element
    strides (outermost first, output first), stored innermost first."""
    ndim = len(shape)
    if ndim > _kernels.MAX_DIMS:
        raise ValueError(f"at most {_kernels.MAX_DIMS} dimensions, got {ndim}")
    if len(per_operand) > MAX_OPERANDS or any(len(s) != ndim for s in per_operand):
        raise ValueError("one stride per dimension for each of at most "
                         f"{MAX_OPERANDS} operands")
    packed = EmberOperandStrides(ndim=ndim)
    for d, size in enumerate(reversed(shape)):
        packed.sizes[d] = size
        for k, s in enumerate(per_operand):
            packed.strides[k][d] = s[ndim - 1 - d]
    return packed


def arguments(p, out_ptr, in_ptrs):
    """The kernel's arguments as ctypes values, in its parameter order:
    `out_ptr` and `in_ptrs` (None for a number operand) are device
    addresses on a GPU, host addresses in the CPU emulation."""
    op, in_dtypes, compute, rank_class = p.key
    args = [ctypes.c_void_p(out_ptr)]
    for d, ptr, value in zip(in_dtypes, in_ptrs, p.values):
        args.append(EmberInput(d)(data=ptr, value=0 if value is None else value))
    args.append(ctypes.c_int64(p.numel))
    if rank_class == "strided":
        args.append(p.strides)
    args.append(CTYPES[loop_dtype(compute)](p.param))
    return args
