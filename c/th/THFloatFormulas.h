/*
 * THFloatFormulas.h -- the value of one element of a floating-point unary
 * operator, for the CPU loops (THUnary.c, THFused.c, through THFormulas.h)
 * and the CUDA kernels (python/ember/cuda/_kernels.py).
 *
 * Note [One formula, two compilers]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * A unary operator's math is written once, here, as one expression in `x`
 * (Note [Unary formulas]).  The CPU build compiles this file as C11 (gcc);
 * ember.cuda reads the TH_FORALL_FLOAT_FORMULAS entries out of this file's
 * text, wraps each expression in a generated CUDA kernel and hands the
 * kernel and this file to NVRTC, which compiles them as CUDA C++.  So the
 * file is written in the common subset of the two languages, and the only
 * differences sit in the portability block below and in the type-generic
 * helpers (C11's _Generic, C++'s overloads).  The tests compile the same
 * kernel sources a third time, as host C++ with g++, against the C
 * library's math, and check them bit for bit against the CPU operators:
 * that proves the kernels index, stride and transcribe the formulas right.
 * On a GPU the formulas that call libm (expf, erf, lgamma...) call CUDA's
 * own math library instead, whose results can differ in the last bit; the
 * ones written in plain arithmetic (exp, log, tanh and sigmoid for
 * float32, the rounding ops, relu, nan_to_num) agree exactly, since both
 * compilers are told not to contract a * b + c into an FMA (Note [No FMA
 * contraction] in THFormulas.h; NVRTC's --fmad=false).  The binary and
 * ternary operators' formulas (THPointwiseFormulas.h) and the reductions'
 * accumulation types and steps (THReduceFormulas.h) are shared the same
 * way, by ember/cuda/_pointwise.py and ember/cuda/_reduce.py.
 */
#ifndef TH_FLOAT_FORMULAS_H
#define TH_FLOAT_FORMULAS_H

/* ---- portability: C11 (the CPU build), CUDA C++ (NVRTC), host C++ -------- */

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define TH_FORMULAS_ON_DEVICE 1
#endif

#ifdef TH_FORMULAS_ON_DEVICE
#define TH_FORMULA_FN static __device__ __forceinline__
#else
#define TH_FORMULA_FN static inline
#endif

#if defined(__CUDACC_RTC__)
/* NVRTC compiles without the C headers: the few names they would give. */
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)
#define FLT_MIN 1.17549435082228750797e-38f
#elif defined(__cplusplus)
#include <float.h>
#include <math.h> /* libstdc++'s: the float and double overloads */
#include <stdint.h>
#include <string.h>
#else
#include <float.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <tgmath.h>
#endif

/* ---- unary formulas -------------------------------------------------------- */

/* 1/sqrt(2), for the exact gelu (M_SQRT1_2 is not ISO C). */
#define TH_SQRT1_2 0.70710678118654752440

/* The values a unary formula reads besides x (`p`), prepared once per call
 * for the dtype the loop computes in (THUnary.c: loop_params), so the loops
 * only ever convert in-range values (converting an out-of-range double to
 * float is undefined behaviour in C).  A CUDA kernel takes it by value:
 * ember.cuda._kernels.THUnaryParams mirrors it field for field. */
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
 * declared here too (the same declaration as glibc's).  CUDA's lgamma
 * writes no global, and there is no lgamma_r on the device. */
#ifdef TH_FORMULAS_ON_DEVICE
TH_FORMULA_FN double
th_lgamma(double x)
{
    return lgamma(x);
}
#else
#ifdef __cplusplus
extern "C" double lgamma_r(double x, int *signp);
#else
extern double lgamma_r(double x, int *signp);
#endif

TH_FORMULA_FN double
th_lgamma(double x)
{
    int sign;
    return lgamma_r(x, &sign);
}
#endif

/* The asymptotic series of digamma and trigamma need x >= this. */
#define TH_PSI_ASYMPTOTIC_FROM 10.0

/* digamma(x) = d/dx log Gamma(x):
 *   x < 0:   reflection, psi(x) = psi(1 - x) - pi / tan(pi x), with tan
 *            taken of x's fractional part (same value, exact argument);
 *   x < 10:  recurrence, psi(x) = psi(x + 1) - 1 / x;
 *   x >= 10: psi(x) = log x - 1/(2x) - sum B_2k / (2k x^2k).
 * As PyTorch: psi(+-0) = -+inf, negative integers and -inf give NaN.
 * The reflection calls th_digamma_positive, not th_digamma: no recursion,
 * which a GPU would pay for with a call stack (and spilled registers). */
TH_FORMULA_FN double
th_digamma_positive(double x)
{
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

TH_FORMULA_FN double
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
        return th_digamma_positive(1 - x) - pi / tan(pi * (x - trunc(x)));
    }
    return th_digamma_positive(x);
}

/* trigamma(x) = psi'(x) (digamma's derivative), the same three ways:
 *   x < 0:   psi1(x) = pi^2 / sin^2(pi x) - psi1(1 - x);
 *   x < 10:  psi1(x) = psi1(x + 1) + 1 / x^2;
 *   x >= 10: psi1(x) = 1/x + 1/(2x^2) + sum B_2k / x^(2k+1). */
TH_FORMULA_FN double
th_trigamma_positive(double x)
{
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

TH_FORMULA_FN double
th_trigamma(double x)
{
    if (x <= 0 && x == trunc(x)) {
        return INFINITY;
    }
    if (x < 0) {
        const double pi = 3.14159265358979323846;
        double s = sin(pi * (x - trunc(x)));
        return pi * pi / (s * s) - th_trigamma_positive(1 - x);
    }
    return th_trigamma_positive(x);
}

/* erfinv(y): Winitzki's closed form (relative error < 2e-3) refined by
 * Halley's method on f(x) = erf(x) - y, whose step with u = f / f' is
 * x -= u / (1 + x u) (since f'' = -2x f').  Each step triples the correct
 * digits, so three reach double precision.  For |y| > 1/2, f is evaluated
 * as (1 - |y|) - erfc(x): 1 - |y| is exact there and erfc keeps the tail's
 * relative precision.  erfinv(+-1) = +-inf, |y| > 1 gives NaN. */
TH_FORMULA_FN double
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
#ifdef __cplusplus
#define TH_SPECIAL_FN(fn, x) ((decltype(x))fn((double)(x)))
#else
#define TH_SPECIAL_FN(fn, x) ((__typeof__(x))fn((double)(x)))
#endif

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
 *
 * Note [Exp without underflow]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * Below -104 the true exp(x) is under 2^-150, half the smallest subnormal,
 * so the product y * s1 * s2 rounds to +0; but a multiply whose result
 * underflows costs a microcode assist, ~35 cycles a lane on the Zen 4,
 * against ~3 for the whole of an ordinary lane.  Masked attention scores
 * and softmax inputs are -inf by the thousand (a causal block is half
 * -inf), so exp_Float32 evaluates those lanes at x = 0 and selects +0 for
 * them.  The results are bit for bit those of the plain formula on every
 * one of the 2^32 float32 inputs (checked by a C loop over all of them),
 * and a row of 128 x 256 scores with every seventh one -inf went from
 * ~2.4 to ~0.8 ns an element (one thread, thread CPU time).  Results in
 * the subnormals, between -104 and -87.3, still take the assist: they
 * are true values and rare.
 */

TH_FORMULA_FN uint32_t
float_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof(b));
    return b;
}

TH_FORMULA_FN float
bits_float(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof(f));
    return f;
}

TH_FORMULA_FN uint64_t
double_bits(double f)
{
    uint64_t b;
    memcpy(&b, &f, sizeof(b));
    return b;
}

TH_FORMULA_FN double
bits_double(uint64_t b)
{
    double f;
    memcpy(&f, &b, sizeof(f));
    return f;
}

/* cond ? a : b, branch-free (Note [Vectorisable exp]). */
TH_FORMULA_FN float
select_Float32(bool cond, float a, float b)
{
    uint32_t mask = -(uint32_t)cond;
    return bits_float((float_bits(a) & mask) | (float_bits(b) & ~mask));
}

TH_FORMULA_FN double
select_Float64(bool cond, double a, double b)
{
    uint64_t mask = -(uint64_t)cond;
    return bits_double((double_bits(a) & mask) | (double_bits(b) & ~mask));
}

TH_FORMULA_FN float
exp_Float32(float x)
{
    /* above 150 the result is inf anyway; this keeps n small.  Below
     * -104 it is +0, computed at x = 0: Note [Exp without underflow] */
    bool vanishes = x < -104.0f;
    x = select_Float32(x > 150.0f, 150.0f, x);
    x = select_Float32(vanishes, 0.0f, x);
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
    return select_Float32(vanishes, 0.0f, y * s1 * s2);
}

TH_FORMULA_FN double
exp_Float64(double x)
{
    return exp(x);
}

/* tanh from the same pieces (Cephes' tanhf): x + x^3 P(x^2) for
 * |x| < 0.625, else 1 - 2 / (exp(2|x|) + 1) with x's sign; both are
 * computed and one selected.  At most 1.3 ulp over all float32 inputs
 * (tanhf: 2.2). */
TH_FORMULA_FN float
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

TH_FORMULA_FN double
tanh_Float64(double x)
{
    return tanh(x);
}

/* log the same way (Cephes' logf): x = m 2^e with m in [sqrt(1/2),
 * sqrt(2)) read from the bits (subnormals scaled by 2^25 first), then
 * log(x) = log(m) + e ln 2 with a degree-9 polynomial for log(m).  At most
 * 0.82 ulp over all float32 inputs (logf: 0.81). */
TH_FORMULA_FN float
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

TH_FORMULA_FN double
log_Float64(double x)
{
    return log(x);
}

/* Type-generic names for the formulas: C11's _Generic picks the function
 * for x's type; C++ has overloads (TH_OVERLOADS), which NVRTC and g++ pick
 * the same way. */
#ifdef __cplusplus
#define TH_OVERLOADS(name, Float32_fn, Float64_fn)                     \
    TH_FORMULA_FN float name(float x) { return Float32_fn(x); }        \
    TH_FORMULA_FN double name(double x) { return Float64_fn(x); }
TH_OVERLOADS(vexp, exp_Float32, exp_Float64)
TH_OVERLOADS(vlog, log_Float32, log_Float64)
TH_OVERLOADS(vtanh, tanh_Float32, tanh_Float64)
TH_FORMULA_FN float
vselect(bool cond, float a, float b)
{
    return select_Float32(cond, a, b);
}
TH_FORMULA_FN double
vselect(bool cond, double a, double b)
{
    return select_Float64(cond, a, b);
}
#else
#define vexp(x) _Generic((x), float: exp_Float32, double: exp_Float64)(x)
#define vlog(x) _Generic((x), float: log_Float32, double: log_Float64)(x)
#define vtanh(x) _Generic((x), float: tanh_Float32, double: tanh_Float64)(x)
#define vselect(c, a, b) \
    _Generic((a), float: select_Float32, double: select_Float64)(c, a, b)
#endif

/* sigmoid(x) = 1 / (1 + exp(-x)), evaluated through e = exp(-|x|), which
 * lies in (0, 1]: 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0.
 * Nothing overflows, and for very negative x the result keeps its tiny
 * value instead of flushing to zero. */
#define TH_DEFINE_SIGMOID(Name, scalar_t)                 \
    TH_FORMULA_FN scalar_t sigmoid_##Name(scalar_t x)     \
    {                                                     \
        scalar_t e = vexp(-fabs(x));                      \
        return vselect(x < 0, e, (scalar_t)1) / (1 + e);  \
    }
TH_DEFINE_SIGMOID(Float32, float)
TH_DEFINE_SIGMOID(Float64, double)
#ifdef __cplusplus
TH_OVERLOADS(stable_sigmoid, sigmoid_Float32, sigmoid_Float64)
#else
#define stable_sigmoid(x) \
    _Generic((x), float: sigmoid_Float32, double: sigmoid_Float64)(x)
#endif

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
    TH_FORMULA_FN scalar_t gelu_derivative_##Name(scalar_t x)              \
    {                                                                      \
        scalar_t cdf = (scalar_t)0.5 * (1 + erf(x * (scalar_t)TH_SQRT1_2)); \
        scalar_t pdf = vexp((scalar_t)-0.5 * x * x)                        \
                       * (scalar_t)GELU_INV_SQRT_2PI;                      \
        return cdf + x * pdf;                                              \
    }                                                                      \
    TH_FORMULA_FN scalar_t gelu_tanh_derivative_##Name(scalar_t x)         \
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
#ifdef __cplusplus
TH_OVERLOADS(gelu_derivative, gelu_derivative_Float32, gelu_derivative_Float64)
TH_OVERLOADS(gelu_tanh_derivative, gelu_tanh_derivative_Float32,
             gelu_tanh_derivative_Float64)
#else
#define gelu_derivative(x) \
    _Generic((x), float: gelu_derivative_Float32, double: gelu_derivative_Float64)(x)
#define gelu_tanh_derivative(x)                           \
    _Generic((x), float: gelu_tanh_derivative_Float32,    \
             double: gelu_tanh_derivative_Float64)(x)
#endif

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
    _(asinh, asinh(x))                                                       \
    _(acosh, acosh(x))                                                       \
    _(atanh, atanh(x))                                                       \
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

#endif /* TH_FLOAT_FORMULAS_H */
