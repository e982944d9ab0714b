/*
 * THDtype.c -- tables about dtypes, generated from TH_FORALL_DTYPES.
 * See Note [Dtype X-macro] in THDtype.h.
 */
#include "THDtype.h"

#include "THGeneral.h"

#include <float.h>
#include <string.h>

static const int itemsizes[TH_NUM_DTYPES] = {
#define TH_DTYPE_SIZE(Name, ctype, pyname) sizeof(ctype),
    TH_FORALL_DTYPES(TH_DTYPE_SIZE)
#undef TH_DTYPE_SIZE
};

static const char *const names[TH_NUM_DTYPES] = {
#define TH_DTYPE_NAME(Name, ctype, pyname) pyname,
    TH_FORALL_DTYPES(TH_DTYPE_NAME)
#undef TH_DTYPE_NAME
};

/* Native byte order, standard sizes: the formats NumPy exports.  int64 may
 * come as 'l' or 'q' depending on the platform's C long; both are accepted
 * below by size. */
static const char *const buffer_formats[TH_NUM_DTYPES] = {
    "?", "B", "b", "h", "i", "q", "f", "d",
    "e", /* float16: PEP 3118's half */
    NULL, /* bfloat16 has no struct-module code: not exported as a buffer */
};

bool
THDtype_isValid(int dtype)
{
    return dtype >= 0 && dtype < TH_NUM_DTYPES;
}

int
THDtype_itemsize(THDtype dtype)
{
    return THDtype_isValid(dtype) ? itemsizes[dtype] : 0;
}

const char *
THDtype_name(THDtype dtype)
{
    return THDtype_isValid(dtype) ? names[dtype] : "invalid";
}

bool
THDtype_isFloating(THDtype dtype)
{
    return dtype == TH_Float32 || dtype == TH_Float64 || THDtype_isHalf(dtype);
}

double
THDtype_floatingMax(THDtype dtype)
{
    switch (dtype) {
    case TH_Float16: return 65504.0;
    case TH_BFloat16: return 0x1.fep127;
    case TH_Float32: return FLT_MAX;
    default: return DBL_MAX;
    }
}

bool
THDtype_isHalf(THDtype dtype)
{
    return dtype == TH_Float16 || dtype == TH_BFloat16;
}

THDtype
THDtype_computeDtype(THDtype dtype)
{
    return THDtype_isHalf(dtype) ? TH_Float32 : dtype;
}

bool
THDtype_isIntegral(THDtype dtype, bool include_bool)
{
    if (dtype == TH_Bool) {
        return include_bool;
    }
    return THDtype_isValid(dtype) && !THDtype_isFloating(dtype);
}

const char *
THDtype_bufferFormat(THDtype dtype)
{
    return THDtype_isValid(dtype) ? buffer_formats[dtype] : NULL;
}

/* Maps one struct-module type character plus the exporter's itemsize to a
 * dtype.  Integer characters are matched by signedness and size, because C's
 * 'l' is 8 bytes on Linux but 4 on Windows. */
static int
dtype_from_code(char code, int itemsize, THDtype *out)
{
    const char *signed_codes = "bhilq";
    const char *unsigned_codes = "BHILQ";
    if (code == '?' && itemsize == 1) {
        *out = TH_Bool;
        return 0;
    }
    if (code == 'f' && itemsize == 4) {
        *out = TH_Float32;
        return 0;
    }
    if (code == 'e' && itemsize == 2) {
        *out = TH_Float16;
        return 0;
    }
    if (code == 'd' && itemsize == 8) {
        *out = TH_Float64;
        return 0;
    }
    if (code != '\0' && strchr(signed_codes, code) != NULL) {
        switch (itemsize) {
        case 1: *out = TH_Int8; return 0;
        case 2: *out = TH_Int16; return 0;
        case 4: *out = TH_Int32; return 0;
        case 8: *out = TH_Int64; return 0;
        default: break;
        }
    }
    if (code != '\0' && strchr(unsigned_codes, code) != NULL
        && itemsize == 1) {
        *out = TH_UInt8;
        return 0;
    }
    return -1;
}

int
THDtype_fromBufferFormat(const char *format, int itemsize, THDtype *out)
{
    if (format == NULL) {
        format = "B"; /* PEP 3118: a NULL format means unsigned bytes */
    }
    /* '@' and '=' are native order; '<' is native on the little-endian
     * machines we build for.  '>' and '!' are big-endian: refused. */
    char order = format[0];
    if (order == '@' || order == '=' || order == '<') {
        format++;
    }
    else if (order == '>' || order == '!') {
        return THError_set(TH_ERR_TYPE,
                           "buffer has non-native byte order (format '%s'); "
                           "convert it first, e.g. a.astype(a.dtype."
                           "newbyteorder('='))",
                           format);
    }
    if (format[0] != '\0' && format[1] == '\0'
        && dtype_from_code(format[0], itemsize, out) == 0) {
        return 0;
    }
    return THError_set(TH_ERR_TYPE,
                       "can't convert a buffer of format '%s' (itemsize %d): "
                       "the only supported types are: bool, uint8, int8, "
                       "int16, int32, int64, float16, float32 and float64",
                       format, itemsize);
}

/* Two floating dtypes: the wider one, where float16 and bfloat16 are the
 * narrowest; the two of them together give float32, which holds both (as
 * in PyTorch). */
static THDtype
promote_floating(THDtype a, THDtype b)
{
    if (THDtype_isHalf(a) && THDtype_isHalf(b)) {
        return TH_Float32;
    }
    if (THDtype_isHalf(a) || THDtype_isHalf(b)) {
        return THDtype_isHalf(a) ? b : a;
    }
    return a > b ? a : b;
}

THDtype
THDtype_promote(THDtype a, THDtype b)
{
    if (a == b) {
        return a;
    }
    bool a_float = THDtype_isFloating(a);
    bool b_float = THDtype_isFloating(b);
    if (a_float || b_float) {
        if (a_float && b_float) {
            return promote_floating(a, b);
        }
        return a_float ? a : b;
    }
    if (a == TH_Bool) {
        return b;
    }
    if (b == TH_Bool) {
        return a;
    }
    /* uint8 with a signed type: the smallest signed type holding both. */
    if (a == TH_UInt8 || b == TH_UInt8) {
        THDtype other = a == TH_UInt8 ? b : a;
        return other == TH_Int8 ? TH_Int16 : other;
    }
    return a > b ? a : b;
}

/* PyTorch's names for the dtypes in its messages: the ScalarType ("Float",
 * as in "expected scalar type Float") and the C++ element type ("float"). */
#define TH_SCALAR_TYPE_NAMES(_) \
    _(Bool, "Bool", "bool")                \
    _(UInt8, "Byte", "unsigned char")      \
    _(Int8, "Char", "signed char")         \
    _(Int16, "Short", "short int")         \
    _(Int32, "Int", "int")                 \
    _(Int64, "Long", "long int")           \
    _(Float32, "Float", "float")           \
    _(Float64, "Double", "double")         \
    _(Float16, "Half", "c10::Half")        \
    _(BFloat16, "BFloat16", "c10::BFloat16")

const char *
THDtype_scalarTypeName(THDtype dtype)
{
    switch (dtype) {
#define TH_NAME_CASE(Name, scalar, cpp) \
    case TH_##Name: return scalar;
        TH_SCALAR_TYPE_NAMES(TH_NAME_CASE)
#undef TH_NAME_CASE
    default: return "invalid";
    }
}

const char *
THDtype_cppTypeName(THDtype dtype)
{
    switch (dtype) {
#define TH_NAME_CASE(Name, scalar, cpp) \
    case TH_##Name: return cpp;
        TH_SCALAR_TYPE_NAMES(TH_NAME_CASE)
#undef TH_NAME_CASE
    default: return "invalid";
    }
}
