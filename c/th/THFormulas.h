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
 *                                    integer tables.
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

/* ---- unary formulas -------------------------------------------------------- */

/* 1/sqrt(2), for the exact gelu (M_SQRT1_2 is not ISO C). */
#define TH_SQRT1_2 0.70710678118654752440

/* The values a unary formula reads besides x (`p`), prepared once per call
 * for the dtype the loop computes in (THUnary.c: loop_params). */
/* Prepared once per call for the dtype the loop computes in, so the loops
 * only ever convert in-range values (converting an out-of-range double to
 * float is undefined behaviour in C). */
typedef struct {
    double ten_pow;    /* round_decimals: 10^|decimals| */
    bool divide;       /* round_decimals: decimals < 0 */
    double nan, posinf, neginf; /* nan_to_num's replacements */
} THUnaryParams;

/* ---- special functions: lgamma, digamma, trigamma, erfinv --------------------
 *
 * Each is computed in double; float32 rounds the double result (at least
 * as accurate as PyTorch's float32 kernels). */

/* lgamma_r: glibc's lgamma writes the global `signgam`, a data race when
 * the loops run on several threads.  lgamma_r is POSIX-adjacent, not ISO
 * C: <math.h> hides it under -std=c11 (the C unit tests), so it is
 * declared here too (the same declaration as glibc's). */
extern double lgamma_r(double x, int *signp);

static inline double
th_lgamma(double x)
{
    int sign;
    return lgamma_r(x, &sign);
}

/* The asymptotic series of digamma and trigamma need x >= this. */
#define TH_PSI_ASYMPTOTIC_FROM 10.0

/* digamma(x) = d/dx log Gamma(x):
 *   x < 0:   reflection, psi(x) = psi(1 - x) - pi / tan(pi x), with tan
 *            taken of x's fractional part (same value, exact argument);
 *   x < 10:  recurrence, psi(x) = psi(x + 1) - 1 / x;
 *   x >= 10: psi(x) = log x - 1/(2x) - sum B_2k / (2k x^2k).
 * As PyTorch: psi(+-0) = -+inf, negative integers and -inf give NaN. */
static inline double
th_digamma(double x)
{
    if (x == 0) {
        return copysign((double)INFINITY, -x);
    }
    if (x < 0) {
        if (x == trunc(x)) {
            return NAN;
        }
        const double pi = 3.14159265358979323846;
        return th_digamma(1 - x) - pi / tan(pi * (x - trunc(x)));
    }
    double shift = 0;
    while (x < TH_PSI_ASYMPTOTIC_FROM) {
        shift -= 1 / x;
        x += 1;
    }
    /* B_2k / 2k for k = 1..7: 1/12, -1/120, 1/252, -1/240, 1/132,
     * -691/32760, 1/12 (Horner in z = 1/x^2) */
    double z = 1 / (x * x);
    double series =
        z * (1.0 / 12 + z * (-1.0 / 120 + z * (1.0 / 252 + z * (-1.0 / 240
        + z * (1.0 / 132 + z * (-691.0 / 32760 + z * (1.0 / 12)))))));
    return shift + log(x) - 0.5 / x - series;
}

/* trigamma(x) = psi'(x) (digamma's derivative), the same three ways:
 *   x < 0:   psi1(x) = pi^2 / sin^2(pi x) - psi1(1 - x);
 *   x < 10:  psi1(x) = psi1(x + 1) + 1 / x^2;
 *   x >= 10: psi1(x) = 1/x + 1/(2x^2) + sum B_2k / x^(2k+1). */
static inline double
th_trigamma(double x)
{
    if (x <= 0 && x == trunc(x)) {
        return INFINITY;
    }
    const double pi = 3.14159265358979323846;
    if (x < 0) {
        double s = sin(pi * (x - trunc(x)));
        return pi * pi / (s * s) - th_trigamma(1 - x);
    }
    double shift = 0;
    while (x < TH_PSI_ASYMPTOTIC_FROM) {
        shift += 1 / (x * x);
        x += 1;
    }
    /* B_2k for k = 1..7: 1/6, -1/30, 1/42, -1/30, 5/66, -691/2730, 7/6 */
    double z = 1 / (x * x);
    double series =
        z * (1.0 / 6 + z * (-1.0 / 30 + z * (1.0 / 42 + z * (-1.0 / 30
        + z * (5.0 / 66 + z * (-691.0 / 2730 + z * (7.0 / 6)))))));
    return shift + (1 + 0.5 / x + series) / x;
}

/* erfinv(y): Winitzki's closed form (relative error < 2e-3) refined by
 * Halley's method on f(x) = erf(x) - y, whose step with u = f / f' is
 * x -= u / (1 + x u) (since f'' = -2x f').  Each step triples the correct
 * digits, so three reach double precision.  For |y| > 1/2, f is evaluated
 * as (1 - |y|) - erfc(x): 1 - |y| is exact there and erfc keeps the tail's
 * relative precision.  erfinv(+-1) = +-inf, |y| > 1 gives NaN. */
static inline double
th_erfinv(double y)
{
    double a = fabs(y);
    if (!(a < 1)) {
        return a == 1 ? copysign((double)INFINITY, y) : NAN;
    }
    if (a == 0) {
        return y; /* keeps -0.0 */
    }
    const double winitzki_a = 0.147, pi = 3.14159265358979323846;
    const double two_over_sqrt_pi = 1.12837916709551257390;
    double l = log((1 - a) * (1 + a)); /* log(1 - a^2), exact factors */
    double t = 2 / (pi * winitzki_a) + l / 2;
    double x = sqrt(sqrt(t * t - l / winitzki_a) - t);
    for (int step = 0; step < 3; step++) {
        double f = a <= 0.5 ? erf(x) - a : (1 - a) - erfc(x);
        double u = f / (two_over_sqrt_pi * exp(-x * x));
        x -= u / (1 + x * u);
    }
    return copysign(x, y);
}

/* x from double back to the formula's dtype (tgmath can't pick these). */
#define TH_SPECIAL_FN(fn, x) ((__typeof__(x))fn((double)(x)))

/* ---- a vectorisable float32 exp --------------------------------------------
 *
 * Note [Vectorisable exp]
 * ~~~~~~~~~~~~~~~~~~~~~~~
 * gcc never vectorises a loop that calls expf (without -ffast-math it has
 * no vector exp to call), and exp dominates exp, sigmoid, silu and tanh.
 * So for float32 we evaluate exp (and below, tanh and log) with plain
 * arithmetic, which gcc does vectorise (4 lanes with the baseline SSE2),
 * about 5x faster than expf:
 *   exp(x) = 2^n * exp(r),  n = round(x / ln 2),  r = x - n ln 2 in
 *   [-ln2/2, ln2/2] (ln 2 split in two so n * ln2_hi is exact),
 *   exp(r) by Cephes' degree-6 polynomial,
 *   2^n built from its exponent bits, as 2^(n/2) * 2^(n - n/2) so both
 *   factors are normal floats and results that overflow to inf or fall
 *   into the subnormals come out right.
 * Measured against exp() in double over 23M float32 inputs: at most 0.98
 * ulp (expf: 0.5); nan, +-inf and the overflow/underflow edges as expf.
 * Conditionals are written as bitwise selects: under -ftrapping-math (the
 * default) gcc will not turn `c ? a * b : a` on floats into vector code.
 */

static inline uint32_t
float_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof(b));
    return b;
}

static inline float
bits_float(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof(f));
    return f;
}

static inline uint64_t
double_bits(double f)
{
    uint64_t b;
    memcpy(&b, &f, sizeof(b));
    return b;
}

static inline double
bits_double(uint64_t b)
{
    double f;
    memcpy(&f, &b, sizeof(f));
    return f;
}

/* cond ? a : b, branch-free (Note [Vectorisable exp]). */
static inline float
select_Float32(bool cond, float a, float b)
{
    uint32_t mask = -(uint32_t)cond;
    return bits_float((float_bits(a) & mask) | (float_bits(b) & ~mask));
}

static inline double
select_Float64(bool cond, double a, double b)
{
    uint64_t mask = -(uint64_t)cond;
    return bits_double((double_bits(a) & mask) | (double_bits(b) & ~mask));
}

static inline float
exp_Float32(float x)
{
    /* beyond +-150 the result is inf or 0 anyway; this keeps n small */
    x = select_Float32(x > 150.0f, 150.0f, x);
    x = select_Float32(x < -150.0f, -150.0f, x);
    /* adding 1.5 * 2^23 rounds x / ln 2 to an integer held in the low
     * mantissa bits of t */
    const float shifter = 12582912.0f;
    float t = x * 1.44269504088896341f + shifter;
    float n = t - shifter;
    int32_t ni = (int32_t)(float_bits(t) - float_bits(shifter));
    float r = x - n * 0.693359375f;   /* ln 2, high bits: n * it is exact */
    r = r - n * -2.12194440e-4f;      /* ln 2, the rest */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * r * r + r + 1.0f;
    int32_t n1 = ni / 2, n2 = ni - n1;
    float s1 = bits_float((uint32_t)(n1 + 127) << 23);
    float s2 = bits_float((uint32_t)(n2 + 127) << 23);
    return y * s1 * s2;
}

static inline double
exp_Float64(double x)
{
    return exp(x);
}

/* tanh from the same pieces (Cephes' tanhf): x + x^3 P(x^2) for
 * |x| < 0.625, else 1 - 2 / (exp(2|x|) + 1) with x's sign; both are
 * computed and one selected.  At most 1.3 ulp over all float32 inputs
 * (tanhf: 2.2). */
static inline float
tanh_Float32(float x)
{
    float a = fabs(x);
    float big = 1.0f - 2.0f / (exp_Float32(a + a) + 1.0f);
    big = select_Float32(x < 0, -big, big);
    float z = x * x;
    float p = -5.70498872745e-3f;
    p = p * z + 2.06390887954e-2f;
    p = p * z - 5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z - 3.33332819422e-1f;
    /* the select keeps tanh(-0.0) == -0.0 (x + x z p would give +0.0) */
    float small = select_Float32(x == 0, x, x + x * z * p);
    return select_Float32(a < 0.625f, small, big);
}

static inline double
tanh_Float64(double x)
{
    return tanh(x);
}

/* log the same way (Cephes' logf): x = m 2^e with m in [sqrt(1/2),
 * sqrt(2)) read from the bits (subnormals scaled by 2^25 first), then
 * log(x) = log(m) + e ln 2 with a degree-9 polynomial for log(m).  At most
 * 0.82 ulp over all float32 inputs (logf: 0.81). */
static inline float
log_Float32(float x)
{
    bool subnormal = x < FLT_MIN;
    uint32_t bits = float_bits(select_Float32(subnormal, x * 33554432.0f, x));
    int32_t e = (int32_t)((bits >> 23) & 0xff) - 126;
    float m = bits_float((bits & 0x007fffffu) | 0x3f000000u); /* [0.5, 1) */
    bool low = m < 0.707106781186547524f;
    e = e - (int32_t)low - (subnormal ? 25 : 0);
    float f = select_Float32(low, m + m, m) - 1.0f;
    float fe = (float)e;
    float z = f * f;
    float y = 7.0376836292e-2f;
    y = y * f - 1.1514610310e-1f;
    y = y * f + 1.1676998740e-1f;
    y = y * f - 1.2420140846e-1f;
    y = y * f + 1.4249322787e-1f;
    y = y * f - 1.6668057665e-1f;
    y = y * f + 2.0000714765e-1f;
    y = y * f - 2.4999993993e-1f;
    y = y * f + 3.3333331174e-1f;
    y = y * f * z + -2.12194440e-4f * fe - 0.5f * z;
    float r = f + y + 0.693359375f * fe;
    r = select_Float32(x == 0, -INFINITY, r);
    r = select_Float32(x == INFINITY, INFINITY, r);
    /* `|`, not `||`: no branch (Note [Vectorisable exp]) */
    return select_Float32((x < 0) | (x != x), NAN, r);
}

static inline double
log_Float64(double x)
{
    return log(x);
}

#define vexp(x) _Generic((x), float: exp_Float32, double: exp_Float64)(x)
#define vlog(x) _Generic((x), float: log_Float32, double: log_Float64)(x)
#define vtanh(x) _Generic((x), float: tanh_Float32, double: tanh_Float64)(x)
#define vselect(c, a, b) \
    _Generic((a), float: select_Float32, double: select_Float64)(c, a, b)

/* sigmoid(x) = 1 / (1 + exp(-x)), evaluated through e = exp(-|x|), which
 * lies in (0, 1]: 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0.
 * Nothing overflows, and for very negative x the result keeps its tiny
 * value instead of flushing to zero. */
#define TH_DEFINE_SIGMOID(Name, scalar_t)                 \
    static inline scalar_t sigmoid_##Name(scalar_t x)     \
    {                                                     \
        scalar_t e = vexp(-fabs(x));                      \
        return vselect(x < 0, e, (scalar_t)1) / (1 + e);  \
    }
TH_DEFINE_SIGMOID(Float32, float)
TH_DEFINE_SIGMOID(Float64, double)
#define stable_sigmoid(x) \
    _Generic((x), float: sigmoid_Float32, double: sigmoid_Float64)(x)

/* ---- formulas --------------------------------------------------------------
 *
 * Note [Unary formulas]
 * ~~~~~~~~~~~~~~~~~~~~~
 * Each formula is one C expression in `x`, the input element, of type
 * `scalar_t`, and `p`, the call's THUnaryParams.  The same expression is
 * compiled once per dtype.  <tgmath.h> makes the math functions
 * type-generic: exp(x) calls expf when x is a float and exp when it is a
 * double, so float32 is computed in float32 as PyTorch does.  That only
 * holds while every operand is a scalar_t: a bare constant like 0.5 is a
 * double and would silently promote the float32 computation, so constants
 * are written (scalar_t)0.5 (integer constants like 1 are harmless).
 */

#define GELU_TANH_K 0.7978845608028654 /* sqrt(2 / pi) */
#define GELU_TANH_C 0.044715
#define GELU_INV_SQRT_2PI 0.3989422804014327 /* 1 / sqrt(2 pi) */

/* gelu's derivatives, for GeluBackward0: one pass instead of a dozen
 * composite operators.  They follow the order of PyTorch's
 * GeluBackward kernels: cdf + x pdf, and for the tanh form
 * 0.5 (1 + t) + 0.5 x (1 - t^2) u'(x) with t = tanh(u(x)). */
#define TH_DEFINE_GELU_DERIVATIVES(Name, scalar_t)                          \
    static inline scalar_t gelu_derivative_##Name(scalar_t x)              \
    {                                                                      \
        scalar_t cdf = (scalar_t)0.5 * (1 + erf(x * (scalar_t)TH_SQRT1_2)); \
        scalar_t pdf = vexp((scalar_t)-0.5 * x * x)                        \
                       * (scalar_t)GELU_INV_SQRT_2PI;                      \
        return cdf + x * pdf;                                              \
    }                                                                      \
    static inline scalar_t gelu_tanh_derivative_##Name(scalar_t x)         \
    {                                                                      \
        scalar_t x_sq = x * x;                                             \
        scalar_t t = vtanh((scalar_t)GELU_TANH_K                           \
                           * (x + (scalar_t)GELU_TANH_C * x_sq * x));      \
        scalar_t du_dx = (scalar_t)GELU_TANH_K                             \
                         * (1 + 3 * (scalar_t)GELU_TANH_C * x_sq);         \
        return (scalar_t)0.5 * (1 + t)                                     \
               + (scalar_t)0.5 * x * (1 - t * t) * du_dx;                  \
    }
TH_DEFINE_GELU_DERIVATIVES(Float32, float)
TH_DEFINE_GELU_DERIVATIVES(Float64, double)
#define gelu_derivative(x) \
    _Generic((x), float: gelu_derivative_Float32, double: gelu_derivative_Float64)(x)
#define gelu_tanh_derivative(x)                           \
    _Generic((x), float: gelu_tanh_derivative_Float32,    \
             double: gelu_tanh_derivative_Float64)(x)

/* _(name, formula): float -> same float. */
#define TH_FORALL_FLOAT_FORMULAS(_)                                          \
    _(exp, vexp(x))                                                          \
    _(exp2, exp2(x))                                                         \
    _(expm1, expm1(x))                                                       \
    _(log, vlog(x))                                                          \
    _(log2, log2(x))                                                         \
    _(log10, log10(x))                                                       \
    _(log1p, log1p(x))                                                       \
    _(sqrt, sqrt(x))                                                         \
    _(rsqrt, 1 / sqrt(x))                                                    \
    _(reciprocal, 1 / x)                                                     \
    _(sin, sin(x))                                                           \
    _(cos, cos(x))                                                           \
    _(tan, tan(x))                                                           \
    _(asin, asin(x))                                                         \
    _(acos, acos(x))                                                         \
    _(atan, atan(x))                                                         \
    _(sinh, sinh(x))                                                         \
    _(cosh, cosh(x))                                                         \
    _(tanh, vtanh(x))                                                        \
    _(sigmoid, stable_sigmoid(x))                                            \
    _(erf, erf(x))                                                           \
    _(erfc, erfc(x))                                                         \
    _(gelu, x * (scalar_t)0.5 * (1 + erf(x * (scalar_t)TH_SQRT1_2)))          \
    _(gelu_tanh,                                                             \
      (scalar_t)0.5 * x                                                      \
          * (1 + vtanh((scalar_t)GELU_TANH_K                                 \
                      * (x + (scalar_t)GELU_TANH_C * x * x * x))))           \
    _(_gelu_derivative, gelu_derivative(x))                                  \
    _(_gelu_tanh_derivative, gelu_tanh_derivative(x))                        \
    _(silu, x / (1 + vexp(-x)))                                              \
    _(frac, x - trunc(x))                                                    \
    _(lgamma, TH_SPECIAL_FN(th_lgamma, x))                                   \
    _(digamma, TH_SPECIAL_FN(th_digamma, x))                                 \
    _(_trigamma, TH_SPECIAL_FN(th_trigamma, x))                              \
    _(erfinv, TH_SPECIAL_FN(th_erfinv, x))                                   \
    /* sin(pi x) / (pi x), 1 at 0 */                                         \
    _(sinc, x == 0 ? (scalar_t)1                                             \
                   : sin((scalar_t)3.14159265358979323846 * x)               \
                         / ((scalar_t)3.14159265358979323846 * x))           \
    /* rint rounds half to even in the default rounding mode */              \
    _(round_decimals, p->divide ? rint(x / (scalar_t)p->ten_pow)             \
                                      * (scalar_t)p->ten_pow                 \
                                : rint(x * (scalar_t)p->ten_pow)             \
                                      / (scalar_t)p->ten_pow)                \
    _(floor, floor(x))                                                       \
    _(ceil, ceil(x))                                                         \
    _(round, rint(x))                                                        \
    _(trunc, trunc(x))                                                       \
    _(nan_to_num,                                                            \
      vselect(isnan(x), (scalar_t)p->nan,                                    \
              vselect(x == (scalar_t)INFINITY, (scalar_t)p->posinf,          \
                      vselect(x == -(scalar_t)INFINITY, (scalar_t)p->neginf, \
                              x))))                                          \
    /* written so that relu(nan) is nan and relu(-0.0) is -0.0 */            \
    _(relu, x < 0 ? 0 : x)                                                   \
    _(square, x * x)

/* _(name, formula, value for integer inputs): float -> bool. */
#define TH_FORALL_PREDICATE_FORMULAS(_)           \
    _(isnan, isnan(x), false)                     \
    _(isinf, isinf(x), false)                     \
    _(isfinite, isfinite(x), true)                \
    _(isposinf, x == (scalar_t)INFINITY, false)   \
    _(isneginf, x == -(scalar_t)INFINITY, false)

/* _(name, formula): integer -> same integer.  square multiplies in
 * uint64_t, where overflow wraps as PyTorch's int64 does (signed overflow
 * is undefined behaviour in C); the conversion back keeps the low bits. */
#define TH_FORALL_INTEGER_FORMULAS(_) \
    _(relu, x > 0 ? x : 0)            \
    _(square, (scalar_t)((uint64_t)x * (uint64_t)x))

#endif /* TH_FORMULAS_H */
