/*
 * THDtype.h -- the element types a tensor can hold.
 *
 * Note [Dtype X-macro]
 * ~~~~~~~~~~~~~~~~~~~~
 * Every piece of dtype-generic code is generated from the one list below
 * instead of being written once per type.  TH_FORALL_DTYPES(_) calls
 * _(Name, ctype, python_name) for each dtype, in the order of the enum
 * (which is also the type-promotion order within a category).  To add a
 * dtype, add one line here; every table built from the macro follows.
 * The rejected alternative, a `generic/` file included once per type as old
 * TH did, hides the expansion behind the preprocessor's include machinery;
 * an X-macro keeps each generated family visible at its point of use.
 */
#ifndef TH_DTYPE_H
#define TH_DTYPE_H

#include <stdbool.h>
#include <stdint.h>

#include "THHalf.h"

/* The dtypes whose ctype is a C arithmetic type: kernels that compute on
 * elements are generated from this list. */
#define TH_FORALL_ARITH_DTYPES(_)      \
    _(Bool, bool, "bool")              \
    _(UInt8, uint8_t, "uint8")         \
    _(Int8, int8_t, "int8")            \
    _(Int16, int16_t, "int16")         \
    _(Int32, int32_t, "int32")         \
    _(Int64, int64_t, "int64")         \
    _(Float32, float, "float32")       \
    _(Float64, double, "float64")

/* Note [Half-precision dtypes]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * float16 (IEEE binary16) and bfloat16 (the top half of a float32) are
 * storage formats: their ctypes are structs holding the 16 bits (THHalf.h),
 * so C arithmetic on them does not compile by accident.  Operators compute
 * on them in float32 and round once when storing (PyTorch does the same on
 * CPU): the pointwise, unary and reduction families pick float32 as the
 * kernel dtype and convert on the way in and out (THDtype_computeDtype).
 * Only the casts (THCopy.c) and matmul's packing (THBlas.c) touch the bits.
 * They come last in the enum so tables built from TH_FORALL_ARITH_DTYPES
 * fill the first entries of a [TH_NUM_DTYPES] array. */
#define TH_FORALL_HALF_DTYPES(_)         \
    _(Float16, THHalf, "float16")        \
    _(BFloat16, THBFloat16, "bfloat16")

#define TH_FORALL_DTYPES(_) \
    TH_FORALL_ARITH_DTYPES(_) TH_FORALL_HALF_DTYPES(_)

/* The same lists again, for the inner loop of a nested expansion (casts from
 * every dtype to every dtype): the preprocessor never expands a macro inside
 * its own expansion, so a table of pairs needs a second name for the list.
 * These also pass `extra` (the outer element, parenthesised) through to
 * each call: _(extra, Name, ctype, python_name).  The unit tests check that
 * the lists agree (test_dtype_xmacro_lists_agree in
 * c/tests/test_dtype.c). */
#define TH_FORALL_ARITH_DTYPES_INNER(_, extra) \
    _(extra, Bool, bool, "bool")              \
    _(extra, UInt8, uint8_t, "uint8")         \
    _(extra, Int8, int8_t, "int8")            \
    _(extra, Int16, int16_t, "int16")         \
    _(extra, Int32, int32_t, "int32")         \
    _(extra, Int64, int64_t, "int64")         \
    _(extra, Float32, float, "float32")       \
    _(extra, Float64, double, "float64")
#define TH_FORALL_DTYPES_INNER(_, extra)        \
    TH_FORALL_ARITH_DTYPES_INNER(_, extra)      \
    _(extra, Float16, THHalf, "float16")        \
    _(extra, BFloat16, THBFloat16, "bfloat16")

/* One element converted between dtypes by their names, for code generated
 * over every dtype: TH_CONVERT(Src, Dst, x) is C's conversion between
 * arithmetic types, and goes through float32 to or from a half-precision
 * dtype (Note [Half conversions bit for bit] in THHalf.h). */
#define TH_CONVERT(Src, Dst, x) TH_FROM_FLOAT_##Dst(TH_TO_FLOAT_##Src(x))
#define TH_TO_FLOAT_Bool(x) (x)
#define TH_TO_FLOAT_UInt8(x) (x)
#define TH_TO_FLOAT_Int8(x) (x)
#define TH_TO_FLOAT_Int16(x) (x)
#define TH_TO_FLOAT_Int32(x) (x)
#define TH_TO_FLOAT_Int64(x) (x)
#define TH_TO_FLOAT_Float32(x) (x)
#define TH_TO_FLOAT_Float64(x) (x)
#define TH_TO_FLOAT_Float16(x) THHalf_toFloat(x)
#define TH_TO_FLOAT_BFloat16(x) THBFloat16_toFloat(x)
#define TH_FROM_FLOAT_Bool(x) ((bool)(x))
#define TH_FROM_FLOAT_UInt8(x) ((uint8_t)(x))
#define TH_FROM_FLOAT_Int8(x) ((int8_t)(x))
#define TH_FROM_FLOAT_Int16(x) ((int16_t)(x))
#define TH_FROM_FLOAT_Int32(x) ((int32_t)(x))
#define TH_FROM_FLOAT_Int64(x) ((int64_t)(x))
#define TH_FROM_FLOAT_Float32(x) ((float)(x))
#define TH_FROM_FLOAT_Float64(x) ((double)(x))
#define TH_FROM_FLOAT_Float16(x) THHalf_fromFloat((float)(x))
#define TH_FROM_FLOAT_BFloat16(x) THBFloat16_fromFloat((float)(x))

/* Helpers for nested expansions: TH_APPLY(m, TH_UNPAREN extra, ...) calls
 * m with the parenthesised `extra` spread into separate arguments. */
#define TH_UNPAREN(...) __VA_ARGS__
#define TH_APPLY(m, ...) m(__VA_ARGS__)

typedef enum {
#define TH_DTYPE_ENUM(Name, ctype, pyname) TH_##Name,
    TH_FORALL_DTYPES(TH_DTYPE_ENUM)
#undef TH_DTYPE_ENUM
    TH_NUM_DTYPES
} THDtype;

/* Bytes per element; 0 for an invalid dtype. */
int THDtype_itemsize(THDtype dtype);
/* "float32", ...; "invalid" for an out-of-range value. */
const char *THDtype_name(THDtype dtype);
bool THDtype_isValid(int dtype);
bool THDtype_isFloating(THDtype dtype);
bool THDtype_isIntegral(THDtype dtype, bool include_bool);
/* float16 and bfloat16 (Note [Half-precision dtypes]). */
bool THDtype_isHalf(THDtype dtype);
/* The dtype kernels compute in for values of `dtype`: float32 for the
 * half-precision dtypes, the dtype itself otherwise. */
THDtype THDtype_computeDtype(THDtype dtype);
/* The largest finite value of a floating dtype. */
double THDtype_floatingMax(THDtype dtype);
/* The struct-module format character of the buffer protocol ("?", "b", ...),
 * and the dtype for one; returns -1 (with a TH error) for an unsupported
 * format. */
const char *THDtype_bufferFormat(THDtype dtype);
int THDtype_fromBufferFormat(const char *format, int itemsize,
                             THDtype *out);
/* The dtype both operands are converted to when combined (the promotion
 * lattice: bool < integers < floating; within integers, by range). */
THDtype THDtype_promote(THDtype a, THDtype b);

/* PyTorch's names for a dtype in its error messages: the ScalarType
 * ("Float", "Long") and the C++ element type ("float", "long int"). */
const char *THDtype_scalarTypeName(THDtype dtype);
const char *THDtype_cppTypeName(THDtype dtype);

#endif /* TH_DTYPE_H */
