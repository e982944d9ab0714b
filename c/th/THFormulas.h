/*
 * THFormulas.h -- the value of one element, for every elementwise operator.
 *
 * The eager loops (THPointwise.c, THUnary.c) and the fused interpreter
 * (THFused.c) expand these same macros and inline functions, so an
 * operator computes the same bits whichever path runs it.  Two families:
 *
 *   EXPR_<OP>(Name, ctype, a, b, P)   THPointwise's operators, for every
 *                                    dtype category (TH_KIND_<Name>);
 *   TH_FORALL_FLOAT_FORMULAS(_)       THUnary's float formulas, one C
 *                                    expression in `x` (Note [Unary
 *                                    formulas]), plus the predicate and
 *                                    integer tables: THFloatFormulas.h,
 *                                    which the CUDA kernels share (Note
 *                                    [One formula, two compilers]).
 *
 * Note [No FMA contraction]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~
 * The library is compiled with -ffp-contract=off (setup.py): gcc would
 * otherwise fuse a * b + c into one FMA instruction in the AVX2 copies of
 * a loop (target_clones, target("avx2,fma")) but not in the baseline
 * ones, and the fused interpreter, whose instructions are separate loops,
 * could never match a contracted eager formula.  Without contraction every
 * formula rounds after each operation, as written, on every CPU.
 */
#ifndef TH_FORMULAS_H
#define TH_FORMULAS_H

#include "THTensor.h"

#include <float.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <tgmath.h>

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

/* A number (bool, int64 or double) as a ctype, the way eager converts a
 * wrapped number to the compute dtype (Note [Wrapped numbers] in
 * THPointwise.h): an int64 converts directly, never through double. */
#define TH_SCALAR_AS(ctype, number)                                    \
    ((number).dtype == TH_Float64 ? (ctype)(number).value.d            \
     : (number).dtype == TH_Int64 ? (ctype)(number).value.i            \
                                  : (ctype)(number).value.b)

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

static inline int64_t
int_neg(int64_t a)
{
    return (int64_t)(0 - (uint64_t)a);
}

static inline int64_t
int_div_trunc(int64_t a, int64_t b)
{
    return b == -1 ? int_neg(a) : a / b;
}

static inline int64_t
int_div_floor(int64_t a, int64_t b)
{
    if (b == -1) {
        return int_neg(a);
    }
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* Python's %: the result has the divisor's sign. */
static inline int64_t
int_remainder(int64_t a, int64_t b)
{
    if (b == -1) {
        return 0;
    }
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

/* C's %: the result has the dividend's sign. */
static inline int64_t
int_fmod(int64_t a, int64_t b)
{
    return b == -1 ? 0 : a % b;
}

/* Negative exponents give 0 except for bases 1 and -1, as in PyTorch. */
static inline int64_t
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

static inline int64_t
int_abs(int64_t a)
{
    return a < 0 ? int_neg(a) : a;
}

static inline int64_t
int_sign(int64_t a)
{
    return (a > 0) - (a < 0);
}

/* PyTorch's shifts: a shift by a negative amount or by the width or more
 * gives 0 to the left and the sign fill to the right.  `bits` is the
 * dtype's width; values arrive sign-extended (or zero-extended) to 64 bits,
 * so one arithmetic right shift by at most 63 serves every dtype. */
static inline int64_t
int_lshift(int64_t a, int64_t b, int bits)
{
    return (b < 0 || b >= bits) ? 0 : (int64_t)((uint64_t)a << b);
}

static inline int64_t
int_rshift(int64_t a, int64_t b)
{
    return a >> ((b < 0 || b > 63) ? 63 : b);
}

/* Floating helpers for float and double (math function suffix f / none). */
#define TH_DEFINE_FLOAT_HELPERS(ctype, f)                                    \
    /* Python's //: floor of the exact quotient, as NumPy and PyTorch */     \
    static inline ctype fp_div_floor_##ctype(ctype a, ctype b)               \
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
            return copysign##f(0, a / b);                                    \
        }                                                                    \
        ctype floordiv = floor##f(div);                                      \
        return div - floordiv > (ctype)0.5 ? floordiv + 1 : floordiv;        \
    }                                                                        \
    static inline ctype fp_remainder_##ctype(ctype a, ctype b)               \
    {                                                                        \
        ctype mod = fmod##f(a, b);                                           \
        return (mod != 0 && (b < 0) != (mod < 0)) ? mod + b : mod;           \
    }                                                                        \
    /* NaN-propagating, as torch.maximum / torch.minimum */                  \
    static inline ctype fp_max_##ctype(ctype a, ctype b)                     \
    {                                                                        \
        return (a > b || a != a) ? a : b;                                    \
    }                                                                        \
    static inline ctype fp_min_##ctype(ctype a, ctype b)                     \
    {                                                                        \
        return (a < b || a != a) ? a : b;                                    \
    }                                                                        \
    /* sign(NaN) is 0 in PyTorch */                                          \
    static inline ctype fp_sign_##ctype(ctype a)                             \
    {                                                                        \
        return (ctype)((a > 0) - (a < 0));                                   \
    }                                                                        \
    /* log(e^a + e^b) = max + log1p(e^-|a - b|); equal infinities would */    \
    /* give inf - inf = NaN there, so they are their own answer */           \
    static inline ctype fp_logaddexp_##ctype(ctype a, ctype b)               \
    {                                                                        \
        if (isinf(a) && a == b) {                                            \
            return a;                                                        \
        }                                                                    \
        ctype m = a > b ? a : b;                                             \
        return m + log1p##f(exp##f(-fabs##f(a - b)));                        \
    }                                                                        \
    static inline ctype fp_logaddexp2_##ctype(ctype a, ctype b)              \
    {                                                                        \
        if (isinf(a) && a == b) {                                            \
            return a;                                                        \
        }                                                                    \
        ctype m = a > b ? a : b;                                             \
        return m + log1p##f(exp2##f(-fabs##f(a - b)))                        \
                       * (ctype)1.44269504088896340736; /* 1 / ln 2 */       \
    }                                                                        \
    /* x log y with 0 log y = 0 unless y is NaN (PyTorch's xlogy) */          \
    static inline ctype fp_xlogy_##ctype(ctype x, ctype y)                   \
    {                                                                        \
        if (isnan(y)) {                                                      \
            return y;                                                        \
        }                                                                    \
        return x == 0 ? 0 : x * log##f(y);                                   \
    }                                                                        \
    /* PyTorch's lerp: from whichever end is nearer, so that weight 1 */      \
    /* gives `end` exactly */                                                \
    static inline ctype fp_lerp_##ctype(ctype start, ctype end, ctype w)     \
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

#include "THFloatFormulas.h"

#endif /* TH_FORMULAS_H */
