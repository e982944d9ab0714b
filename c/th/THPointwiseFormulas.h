/*
 * THPointwiseFormulas.h -- the value of one element of THPointwise's
 * operators (arithmetic, comparisons, logical and bitwise ops, where,
 * clamp...), for the CPU loops (THPointwise.c, THFused.c, through
 * THFormulas.h) and the CUDA kernels (python/ember/cuda/_kernels.py).
 *
 * Like THFloatFormulas.h, whose portability block it uses, this file is
 * written in the common subset of C11 and CUDA C++ (Note [One formula, two
 * compilers]): helpers are TH_FORMULA_FN, and the formulas are macros
 * expanded per dtype, EXPR_<OP>(Name, ctype, a, b, P), with `Name` the
 * dtype's name in THTensor.h's X-macros (Float32, Int64, Bool...).
 * ember.cuda reads the TH_POINTWISE_*_OPS tables below out of this file's
 * text to learn which dtypes each operator has a kernel for and whether
 * it gives bool, and writes EXPR_<OP>(...) into its kernels.
 */
#ifndef TH_POINTWISE_FORMULAS_H
#define TH_POINTWISE_FORMULAS_H

#include "THFloatFormulas.h"

/* ---- dtype categories ---------------------------------------------------- */

/* TH_KIND_<Name>(b, i, f) picks the argument for the dtype's category:
 * bool, integer or floating.  Loops use it to pick a formula (integer
 * division is not float division) and to decide which dtypes an operator
 * has a loop for.  A new dtype needs a line here: the build fails until it
 * has one. */
#define TH_KIND_Bool(b, i, f) b
#define TH_KIND_UInt8(b, i, f) i
#define TH_KIND_Int8(b, i, f) i
#define TH_KIND_Int16(b, i, f) i
#define TH_KIND_Int32(b, i, f) i
#define TH_KIND_Int64(b, i, f) i
#define TH_KIND_Float32(b, i, f) f
#define TH_KIND_Float64(b, i, f) f
#define TH_KIND_Float16(b, i, f) f
#define TH_KIND_BFloat16(b, i, f) f

#define TH_CAT(a, b) TH_CAT_(a, b)
#define TH_CAT_(a, b) a##b

/* ---- scalar helpers -------------------------------------------------------- */

/* Note [Integer arithmetic wraps]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * PyTorch's integer tensors wrap around on overflow; C's signed overflow is
 * undefined.  So integer add, sub, mul, neg and pow compute in uint64_t
 * (defined to wrap) and convert back, which keeps the low bits: the same
 * result as wrapping in the narrow type.  GCC narrows the arithmetic again
 * when vectorising.  Division and remainder compute in int64_t (exact for
 * every integer dtype) with the one overflowing case, INT64_MIN / -1,
 * handled apart; the divisor is never 0 (checked before running). */

TH_FORMULA_FN int64_t
int_neg(int64_t a)
{
    return (int64_t)(0 - (uint64_t)a);
}

TH_FORMULA_FN int64_t
int_div_trunc(int64_t a, int64_t b)
{
    return b == -1 ? int_neg(a) : a / b;
}

TH_FORMULA_FN int64_t
int_div_floor(int64_t a, int64_t b)
{
    if (b == -1) {
        return int_neg(a);
    }
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* Python's %: the result has the divisor's sign. */
TH_FORMULA_FN int64_t
int_remainder(int64_t a, int64_t b)
{
    if (b == -1) {
        return 0;
    }
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

/* C's %: the result has the dividend's sign. */
TH_FORMULA_FN int64_t
int_fmod(int64_t a, int64_t b)
{
    return b == -1 ? 0 : a % b;
}

/* Negative exponents give 0 except for bases 1 and -1, as in PyTorch. */
TH_FORMULA_FN int64_t
int_pow(int64_t base, int64_t exp)
{
    if (exp < 0) {
        if (base == 1) {
            return 1;
        }
        if (base == -1) {
            return exp % 2 == 0 ? 1 : -1;
        }
        return 0;
    }
    uint64_t result = 1, b = (uint64_t)base;
    while (exp != 0) {
        if (exp & 1) {
            result *= b;
        }
        b *= b;
        exp >>= 1;
    }
    return (int64_t)result;
}

TH_FORMULA_FN int64_t
int_abs(int64_t a)
{
    return a < 0 ? int_neg(a) : a;
}

TH_FORMULA_FN int64_t
int_sign(int64_t a)
{
    return (a > 0) - (a < 0);
}

/* PyTorch's shifts: a shift by a negative amount or by the width or more
 * gives 0 to the left and the sign fill to the right.  `bits` is the
 * dtype's width; values arrive sign-extended (or zero-extended) to 64 bits,
 * so one arithmetic right shift by at most 63 serves every dtype. */
TH_FORMULA_FN int64_t
int_lshift(int64_t a, int64_t b, int bits)
{
    return (b < 0 || b >= bits) ? 0 : (int64_t)((uint64_t)a << b);
}

TH_FORMULA_FN int64_t
int_rshift(int64_t a, int64_t b)
{
    return a >> ((b < 0 || b > 63) ? 63 : b);
}

/* Floating helpers for float and double (math function suffix f / none). */
#define TH_DEFINE_FLOAT_HELPERS(ctype, f)                                    \
    /* Python's //: floor of the exact quotient, as NumPy and PyTorch */     \
    TH_FORMULA_FN ctype fp_div_floor_##ctype(ctype a, ctype b)               \
    {                                                                        \
        if (b == 0) {                                                        \
            return a / b;                                                    \
        }                                                                    \
        ctype mod = fmod##f(a, b);                                           \
        ctype div = (a - mod) / b;                                           \
        if (mod != 0 && (b < 0) != (mod < 0)) {                              \
            div -= 1;                                                        \
        }                                                                    \
        if (div == 0) {                                                      \
            return copysign##f((ctype)0, a / b);                             \
        }                                                                    \
        ctype floordiv = floor##f(div);                                      \
        return div - floordiv > (ctype)0.5 ? floordiv + 1 : floordiv;        \
    }                                                                        \
    TH_FORMULA_FN ctype fp_remainder_##ctype(ctype a, ctype b)               \
    {                                                                        \
        ctype mod = fmod##f(a, b);                                           \
        return (mod != 0 && (b < 0) != (mod < 0)) ? mod + b : mod;           \
    }                                                                        \
    /* NaN-propagating, as torch.maximum / torch.minimum */                  \
    TH_FORMULA_FN ctype fp_max_##ctype(ctype a, ctype b)                     \
    {                                                                        \
        return (a > b || a != a) ? a : b;                                    \
    }                                                                        \
    TH_FORMULA_FN ctype fp_min_##ctype(ctype a, ctype b)                     \
    {                                                                        \
        return (a < b || a != a) ? a : b;                                    \
    }                                                                        \
    /* sign(NaN) is 0 in PyTorch */                                          \
    TH_FORMULA_FN ctype fp_sign_##ctype(ctype a)                             \
    {                                                                        \
        return (ctype)((a > 0) - (a < 0));                                   \
    }                                                                        \
    /* log(e^a + e^b) = max + log1p(e^-|a - b|); equal infinities would */    \
    /* give inf - inf = NaN there, so they are their own answer */           \
    TH_FORMULA_FN ctype fp_logaddexp_##ctype(ctype a, ctype b)               \
    {                                                                        \
        if (isinf(a) && a == b) {                                            \
            return a;                                                        \
        }                                                                    \
        ctype m = a > b ? a : b;                                             \
        return m + log1p##f(exp##f(-fabs##f(a - b)));                        \
    }                                                                        \
    TH_FORMULA_FN ctype fp_logaddexp2_##ctype(ctype a, ctype b)              \
    {                                                                        \
        if (isinf(a) && a == b) {                                            \
            return a;                                                        \
        }                                                                    \
        ctype m = a > b ? a : b;                                             \
        return m + log1p##f(exp2##f(-fabs##f(a - b)))                        \
                       * (ctype)1.44269504088896340736; /* 1 / ln 2 */       \
    }                                                                        \
    /* x log y with 0 log y = 0 unless y is NaN (PyTorch's xlogy) */          \
    TH_FORMULA_FN ctype fp_xlogy_##ctype(ctype x, ctype y)                   \
    {                                                                        \
        if (isnan(y)) {                                                      \
            return y;                                                        \
        }                                                                    \
        return x == 0 ? 0 : x * log##f(y);                                   \
    }                                                                        \
    /* PyTorch's lerp: from whichever end is nearer, so that weight 1 */      \
    /* gives `end` exactly */                                                \
    TH_FORMULA_FN ctype fp_lerp_##ctype(ctype start, ctype end, ctype w)     \
    {                                                                        \
        return fabs##f(w) < (ctype)0.5 ? start + w * (end - start)           \
                                       : end - (end - start) * (1 - w);      \
    }
TH_DEFINE_FLOAT_HELPERS(float, f)
TH_DEFINE_FLOAT_HELPERS(double, )
#undef TH_DEFINE_FLOAT_HELPERS

#define TH_FLOAT_FN(name, ctype) TH_CAT(name, TH_FN_SUFFIX_##ctype)
#define TH_FN_SUFFIX_float f
#define TH_FN_SUFFIX_double

/* ---- the formulas ------------------------------------------------------------
 * EXPR_<OP>(Name, ctype, a, b, P): the value for one element.  a and b are
 * ctype values, P is the loop's ctype parameter (alpha).  A formula is only
 * expanded for the categories its operator has loops for (OPS_* below). */
#define U64(x) ((uint64_t)(x))
#define EXPR_ADD(Name, ctype, a, b, P) \
    TH_KIND_##Name((a) || (b), (ctype)(U64(a) + U64(b)), (a) + (b))
#define EXPR_ADD_ALPHA(Name, ctype, a, b, P)                        \
    TH_KIND_##Name((a) || ((P) && (b)),                             \
                   (ctype)(U64(a) + U64(P) * U64(b)), (a) + (P) * (b))
#define EXPR_SUB(Name, ctype, a, b, P) \
    TH_KIND_##Name(0, (ctype)(U64(a) - U64(b)), (a) - (b))
#define EXPR_SUB_ALPHA(Name, ctype, a, b, P) \
    TH_KIND_##Name(0, (ctype)(U64(a) - U64(P) * U64(b)), (a) - (P) * (b))
#define EXPR_MUL(Name, ctype, a, b, P) \
    TH_KIND_##Name((a) && (b), (ctype)(U64(a) * U64(b)), (a) * (b))
#define EXPR_DIV(Name, ctype, a, b, P) ((a) / (b))
#define EXPR_DIV_TRUNC(Name, ctype, a, b, P)                  \
    TH_KIND_##Name(0, (ctype)int_div_trunc((a), (b)),         \
                   TH_FLOAT_FN(trunc, ctype)((a) / (b)))
#define EXPR_DIV_FLOOR(Name, ctype, a, b, P) \
    TH_KIND_##Name(0, (ctype)int_div_floor((a), (b)), fp_div_floor_##ctype((a), (b)))
#define EXPR_REMAINDER(Name, ctype, a, b, P) \
    TH_KIND_##Name(0, (ctype)int_remainder((a), (b)), fp_remainder_##ctype((a), (b)))
#define EXPR_FMOD(Name, ctype, a, b, P) \
    TH_KIND_##Name(0, (ctype)int_fmod((a), (b)), TH_FLOAT_FN(fmod, ctype)((a), (b)))
#define EXPR_POW(Name, ctype, a, b, P) \
    TH_KIND_##Name(0, (ctype)int_pow((a), (b)), TH_FLOAT_FN(pow, ctype)((a), (b)))
#define EXPR_MAXIMUM(Name, ctype, a, b, P) \
    TH_KIND_##Name((a) || (b), (a) > (b) ? (a) : (b), fp_max_##ctype((a), (b)))
#define EXPR_MINIMUM(Name, ctype, a, b, P) \
    TH_KIND_##Name((a) && (b), (a) < (b) ? (a) : (b), fp_min_##ctype((a), (b)))
#define EXPR_ATAN2(Name, ctype, a, b, P) TH_FLOAT_FN(atan2, ctype)((a), (b))
#define EXPR_HYPOT(Name, ctype, a, b, P) TH_FLOAT_FN(hypot, ctype)((a), (b))
#define EXPR_COPYSIGN(Name, ctype, a, b, P) \
    TH_FLOAT_FN(copysign, ctype)((a), (b))
#define EXPR_LOGADDEXP(Name, ctype, a, b, P) fp_logaddexp_##ctype((a), (b))
#define EXPR_LOGADDEXP2(Name, ctype, a, b, P) fp_logaddexp2_##ctype((a), (b))
#define EXPR_XLOGY(Name, ctype, a, b, P) fp_xlogy_##ctype((a), (b))
#define EXPR_EQ(Name, ctype, a, b, P) ((a) == (b))
#define EXPR_NE(Name, ctype, a, b, P) ((a) != (b))
#define EXPR_LT(Name, ctype, a, b, P) ((a) < (b))
#define EXPR_LE(Name, ctype, a, b, P) ((a) <= (b))
#define EXPR_GT(Name, ctype, a, b, P) ((a) > (b))
#define EXPR_GE(Name, ctype, a, b, P) ((a) >= (b))
#define EXPR_LOGICAL_AND(Name, ctype, a, b, P) (((a) != 0) & ((b) != 0))
#define EXPR_LOGICAL_OR(Name, ctype, a, b, P) (((a) != 0) | ((b) != 0))
#define EXPR_LOGICAL_XOR(Name, ctype, a, b, P) (((a) != 0) != ((b) != 0))
#define EXPR_BITWISE_AND(Name, ctype, a, b, P) \
    TH_KIND_##Name((a) && (b), (ctype)((a) & (b)), 0)
#define EXPR_BITWISE_OR(Name, ctype, a, b, P) \
    TH_KIND_##Name((a) || (b), (ctype)((a) | (b)), 0)
#define EXPR_BITWISE_XOR(Name, ctype, a, b, P) \
    TH_KIND_##Name((a) != (b), (ctype)((a) ^ (b)), 0)
#define EXPR_LSHIFT(Name, ctype, a, b, P) \
    (ctype)int_lshift((a), (b), 8 * (int)sizeof(ctype))
#define EXPR_RSHIFT(Name, ctype, a, b, P) (ctype)int_rshift((a), (b))
/* Unary: EXPR_<OP>(Name, ctype, a). */
#define EXPR_NEG(Name, ctype, a) TH_KIND_##Name(0, (ctype)int_neg(a), -(a))
#define EXPR_ABS(Name, ctype, a) \
    TH_KIND_##Name(0, (ctype)int_abs(a), TH_FLOAT_FN(fabs, ctype)(a))
#define EXPR_SIGN(Name, ctype, a) \
    TH_KIND_##Name((a), (ctype)int_sign(a), fp_sign_##ctype(a))
#define EXPR_BITWISE_NOT(Name, ctype, a) TH_KIND_##Name(!(a), (ctype)~(a), 0)
#define EXPR_LOGICAL_NOT(Name, ctype, a) ((a) == 0)
/* Ternary: EXPR_<OP>(Name, ctype, a, b, c, P), P the `value` of addcmul
 * and addcdiv. */
#define EXPR_WHERE(Name, ctype, c, a, b, P) ((c) ? (a) : (b))
/* min(max(x, lo), hi): hi wins when lo > hi, as in PyTorch. */
#define CLAMP_INT(x, lo, hi) \
    (((x) < (lo) ? (lo) : (x)) > (hi) ? (hi) : ((x) < (lo) ? (lo) : (x)))
#define EXPR_CLAMP(Name, ctype, x, lo, hi, P)                      \
    TH_KIND_##Name(0, CLAMP_INT((x), (lo), (hi)),                  \
                   fp_min_##ctype(fp_max_##ctype((x), (lo)), (hi)))
#define EXPR_LERP(Name, ctype, start, end, w, P) \
    fp_lerp_##ctype((start), (end), (w))
/* self + value * t1 * t2 and self + value * t1 / t2, in PyTorch's order */
#define EXPR_ADDCMUL(Name, ctype, a, b, c, P)                      \
    TH_KIND_##Name(0, (ctype)(U64(a) + U64(P) * U64(b) * U64(c)),  \
                   (a) + (P) * (b) * (c))
#define EXPR_ADDCDIV(Name, ctype, a, b, c, P) ((a) + (P) * (b) / (c))

/* ---- which dtypes each operator computes in -------------------------------
 *
 * Which categories (bool, integer, floating) each operator has loops for,
 * and its output (SAME as the inputs, or BOOLEAN).  The rest are refused
 * with PyTorch's "not implemented for" message; integer inputs of true
 * division, atan2, copysign and xlogy are promoted to a floating dtype
 * before that. */
#define TH_POINTWISE_BINARY_OPS(_)         \
    _(ADD, 1, 1, 1, SAME)                  \
    _(ADD_ALPHA, 1, 1, 1, SAME)            \
    _(SUB, 0, 1, 1, SAME)                  \
    _(SUB_ALPHA, 0, 1, 1, SAME)            \
    _(MUL, 1, 1, 1, SAME)                  \
    _(DIV, 0, 0, 1, SAME)                  \
    _(DIV_TRUNC, 0, 1, 1, SAME)            \
    _(DIV_FLOOR, 0, 1, 1, SAME)            \
    _(REMAINDER, 0, 1, 1, SAME)            \
    _(FMOD, 0, 1, 1, SAME)                 \
    _(POW, 0, 1, 1, SAME)                  \
    _(MAXIMUM, 1, 1, 1, SAME)              \
    _(MINIMUM, 1, 1, 1, SAME)              \
    _(ATAN2, 0, 0, 1, SAME)                \
    _(HYPOT, 0, 0, 1, SAME)                \
    _(COPYSIGN, 0, 0, 1, SAME)             \
    _(LOGADDEXP, 0, 0, 1, SAME)            \
    _(LOGADDEXP2, 0, 0, 1, SAME)           \
    _(XLOGY, 0, 0, 1, SAME)                \
    _(EQ, 1, 1, 1, BOOLEAN)                \
    _(NE, 1, 1, 1, BOOLEAN)                \
    _(LT, 1, 1, 1, BOOLEAN)                \
    _(LE, 1, 1, 1, BOOLEAN)                \
    _(GT, 1, 1, 1, BOOLEAN)                \
    _(GE, 1, 1, 1, BOOLEAN)                \
    _(LOGICAL_AND, 1, 1, 1, BOOLEAN)       \
    _(LOGICAL_OR, 1, 1, 1, BOOLEAN)        \
    _(LOGICAL_XOR, 1, 1, 1, BOOLEAN)       \
    _(BITWISE_AND, 1, 1, 0, SAME)          \
    _(BITWISE_OR, 1, 1, 0, SAME)           \
    _(BITWISE_XOR, 1, 1, 0, SAME)          \
    _(LSHIFT, 0, 1, 0, SAME)               \
    _(RSHIFT, 0, 1, 0, SAME)
#define TH_POINTWISE_UNARY_OPS(_)          \
    _(NEG, 0, 1, 1, SAME)                  \
    _(ABS, 0, 1, 1, SAME)                  \
    _(SIGN, 1, 1, 1, SAME)                 \
    _(BITWISE_NOT, 1, 1, 0, SAME)          \
    _(LOGICAL_NOT, 1, 1, 1, BOOLEAN)
/* The first input's type: BOOLEAN (where's condition) or SAME. */
#define TH_POINTWISE_TERNARY_OPS(_)        \
    _(WHERE, 1, 1, 1, BOOLEAN)             \
    _(CLAMP, 0, 1, 1, SAME)                \
    _(LERP, 0, 0, 1, SAME)                 \
    _(ADDCMUL, 0, 1, 1, SAME)              \
    _(ADDCDIV, 0, 0, 1, SAME)

#endif /* TH_POINTWISE_FORMULAS_H */
