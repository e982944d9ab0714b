/*
 * THUnary.c -- the unary elementwise kernels and their dtype rules.
 *
 * Three families of inner loops, each generated from one table of
 * formulas (Note [Unary formulas]):
 *   float loops      float32 -> float32 and float64 -> float64;
 *   predicate loops  float32/float64 -> bool (isnan, ...);
 *   integer loops    integer -> same integer (relu, square).
 * Everything else an op can do to a non-float input (convert it to the
 * default float first, copy it, refuse it) is decided once, by the rules of
 * Note [Unary dtype rules] in THUnary.h, before any loop runs.
 */
#include "THUnary.h"

#include "THIter.h"
#include "THParallel.h"

#include <float.h>
#include <stdio.h>
#include <string.h>
#include <tgmath.h>

/* 1/sqrt(2), for the exact gelu (M_SQRT1_2 is not ISO C). */
#define TH_SQRT1_2 0.70710678118654752440

/* ---- per-op facts ------------------------------------------------------- */

static const struct {
    const char *name;
    THUnaryRule rule;
} op_info[TH_NUM_UNARY_OPS] = {
#define TH_UNARY_INFO(name, pyname, rule) [TH_UNARY_##name] = {pyname, rule},
    TH_FORALL_UNARY_OPS(TH_UNARY_INFO)
#undef TH_UNARY_INFO
};

const char *
THUnary_name(THUnaryOp op)
{
    return op_info[op].name;
}

THUnaryArgs
THUnaryArgs_default(THDtype default_float)
{
    THUnaryArgs args = {.default_float = default_float};
    return args;
}


/* ---- the values a loop reads besides its input -------------------------- */

/* Prepared once per call for the dtype the loop computes in, so the loops
 * only ever convert in-range values (converting an out-of-range double to
 * float is undefined behaviour in C). */
typedef struct {
    double ten_pow;    /* round_decimals: 10^|decimals| */
    bool divide;       /* round_decimals: decimals < 0 */
    double nan, posinf, neginf; /* nan_to_num's replacements */
} LoopParams;

/* v, or an infinity of its sign when it is beyond the float dtype's range. */
static double
saturate(double v, THDtype dtype)
{
    double max = dtype == TH_Float32 ? FLT_MAX : DBL_MAX;
    return fabs(v) > max ? copysign((double)INFINITY, v) : v;
}

static LoopParams
loop_params(const THUnaryArgs *args, THDtype dtype)
{
    double max = dtype == TH_Float32 ? FLT_MAX : DBL_MAX;
    /* in double: -INT64_MIN would overflow an int64_t */
    double exponent = fabs((double)args->decimals);
    LoopParams p = {
        .ten_pow = saturate(pow(10.0, exponent), dtype),
        .divide = args->decimals < 0,
        .nan = saturate(args->nan, dtype),
        .posinf = args->has_posinf ? saturate(args->posinf, dtype) : max,
        .neginf = args->has_neginf ? saturate(args->neginf, dtype) : -max,
    };
    return p;
}

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
 * `scalar_t`, and `p`, the call's LoopParams.  The same expression is
 * compiled once per dtype.  <tgmath.h> makes the math functions
 * type-generic: exp(x) calls expf when x is a float and exp when it is a
 * double, so float32 is computed in float32 as PyTorch does.  That only
 * holds while every operand is a scalar_t: a bare constant like 0.5 is a
 * double and would silently promote the float32 computation, so constants
 * are written (scalar_t)0.5 (integer constants like 1 are harmless).
 */

#define GELU_TANH_K 0.7978845608028654 /* sqrt(2 / pi) */
#define GELU_TANH_C 0.044715

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
    _(silu, x / (1 + vexp(-x)))                                              \
    _(frac, x - trunc(x))                                                    \
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

/* The dtypes each family is generated for (names from TH_FORALL_DTYPES). */
#define TH_FORALL_FLOAT_DTYPES(_, extra) \
    _(extra, Float32, float)             \
    _(extra, Float64, double)
#define TH_FORALL_INTEGER_DTYPES(_, extra) \
    _(extra, UInt8, uint8_t)               \
    _(extra, Int8, int8_t)                 \
    _(extra, Int16, int16_t)               \
    _(extra, Int32, int32_t)               \
    _(extra, Int64, int64_t)

/* Note [Vector clones]
 * ~~~~~~~~~~~~~~~~~~~~~
 * The build targets baseline x86-64 (SSE2, 4 floats a vector) so one
 * binary runs everywhere.  gcc's target_clones compiles each loop twice,
 * once more for x86-64-v3 (AVX2 + FMA: 8 floats a vector), and picks the
 * copy for the running CPU when the library loads (an ifunc).  That more
 * than doubles the speed of the vectorised loops (exp: 2.4 -> 0.9 ns an
 * element) for about 300 KB of code.  FMA contracts a * b + c, so results
 * may differ in the last bit between the two copies. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) \
    && __GNUC__ >= 12
#define TH_VECTOR_CLONES \
    __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define TH_VECTOR_CLONES
#endif

/* ---- loops: unary_<name>_<Dtype>(data, strides, n, ctx) --------------------
 *
 * data[0] is the output (of out_t), data[1] the input (of in_t); they
 * may be the same memory (in-place ops).  As in THCopy.c, the contiguous
 * branch repeats the strided loop with constant strides so the compiler can
 * vectorise it (where the formula calls libm it stays a scalar call). */
#define TH_DEFINE_UNARY_LOOP(name, formula, Dtype, in_t, out_t)          \
    TH_VECTOR_CLONES                                                         \
    static void unary_##name##_##Dtype(char **data, const int64_t *strides, \
                                       int64_t n, void *ctx)                 \
    {                                                                        \
        typedef in_t scalar_t; /* the name the formulas use */               \
        const LoopParams *p = ctx;                                           \
        (void)p;                                                             \
        if (strides[0] == sizeof(out_t) && strides[1] == sizeof(in_t)) { \
            out_t *out = (out_t *)data[0];                                   \
            const in_t *in = (const in_t *)data[1];                  \
            for (int64_t k = 0; k < n; k++) {                                \
                scalar_t x = in[k];                                          \
                out[k] = (out_t)(formula);                                   \
            }                                                                \
            return;                                                          \
        }                                                                    \
        for (int64_t k = 0; k < n; k++) {                                    \
            scalar_t x = *(const in_t *)(data[1] + k * strides[1]);      \
            *(out_t *)(data[0] + k * strides[0]) = (out_t)(formula);         \
        }                                                                    \
    }

#define TH_DEFINE_SAME_TYPE_LOOP(op, Dtype, in_t) \
    TH_APPLY(TH_DEFINE_UNARY_LOOP, TH_UNPAREN op, Dtype, in_t, in_t)
#define TH_DEFINE_PREDICATE_LOOP(op, Dtype, in_t) \
    TH_APPLY(TH_DEFINE_UNARY_LOOP, TH_UNPAREN op, Dtype, in_t, bool)

#define TH_FLOAT_LOOPS(name, formula) \
    TH_FORALL_FLOAT_DTYPES(TH_DEFINE_SAME_TYPE_LOOP, (name, formula))
#define TH_PREDICATE_LOOPS(name, formula, int_value) \
    TH_FORALL_FLOAT_DTYPES(TH_DEFINE_PREDICATE_LOOP, (name, formula))
#define TH_INTEGER_LOOPS(name, formula) \
    TH_FORALL_INTEGER_DTYPES(TH_DEFINE_SAME_TYPE_LOOP, (name, formula))

TH_FORALL_FLOAT_FORMULAS(TH_FLOAT_LOOPS)
TH_FORALL_PREDICATE_FORMULAS(TH_PREDICATE_LOOPS)
TH_FORALL_INTEGER_FORMULAS(TH_INTEGER_LOOPS)

/* unary_loops[op][input dtype]; NULL where no loop exists (the dtype rules
 * convert, copy or refuse such inputs before a loop is looked up). */
#define TH_LOOP_ENTRY(op, Dtype, scalar_t) \
    TH_APPLY(TH_LOOP_ENTRY_, TH_UNPAREN op, Dtype)
#define TH_LOOP_ENTRY_(name, Dtype) \
    [TH_UNARY_##name][TH_##Dtype] = unary_##name##_##Dtype,
#define TH_FLOAT_ENTRIES(name, formula) \
    TH_FORALL_FLOAT_DTYPES(TH_LOOP_ENTRY, (name))
#define TH_PREDICATE_ENTRIES(name, formula, int_value) \
    TH_FORALL_FLOAT_DTYPES(TH_LOOP_ENTRY, (name))
#define TH_INTEGER_ENTRIES(name, formula) \
    TH_FORALL_INTEGER_DTYPES(TH_LOOP_ENTRY, (name))

static const THLoop unary_loops[TH_NUM_UNARY_OPS][TH_NUM_DTYPES] = {
    TH_FORALL_FLOAT_FORMULAS(TH_FLOAT_ENTRIES)
    TH_FORALL_PREDICATE_FORMULAS(TH_PREDICATE_ENTRIES)
    TH_FORALL_INTEGER_FORMULAS(TH_INTEGER_ENTRIES)
};

/* What a predicate answers for every element of an integer tensor. */
static const bool predicate_integer_value[TH_NUM_UNARY_OPS] = {
#define TH_PREDICATE_VALUE(name, formula, int_value) \
    [TH_UNARY_##name] = int_value,
    TH_FORALL_PREDICATE_FORMULAS(TH_PREDICATE_VALUE)
#undef TH_PREDICATE_VALUE
};

/* out[k] = *(bool *)ctx: a predicate on an integer tensor. */
static void
fill_bool_loop(char **data, const int64_t *strides, int64_t n, void *ctx)
{
    bool value = *(const bool *)ctx;
    for (int64_t k = 0; k < n; k++) {
        *(bool *)(data[0] + k * strides[0]) = value;
    }
}

/* ---- dtype rules (Note [Unary dtype rules]) ----------------------------- */

static int
refuse_dtype(THUnaryOp op, THDtype input)
{
    if (op == TH_UNARY_relu) {
        return THError_set(TH_ERR_RUNTIME,
                           "Boolean inputs not supported for relu");
    }
    return THError_set(TH_ERR_RUNTIME, "\"%s\" not implemented for '%s'",
                       op_info[op].name, THDtype_scalarTypeName(input));
}

int
THUnary_resultType(THUnaryOp op, THDtype input, const THUnaryArgs *args,
                   THDtype *out)
{
    THUnaryRule rule = op_info[op].rule;
    if (rule == TH_UNARY_PREDICATE) {
        *out = TH_Bool;
        return 0;
    }
    if (THDtype_isFloating(input)) {
        *out = input;
        return 0;
    }
    switch (rule) {
    case TH_UNARY_TO_FLOAT:
        *out = args->default_float;
        return 0;
    case TH_UNARY_FLOAT_ONLY:
        return refuse_dtype(op, input);
    case TH_UNARY_ROUNDING:
    case TH_UNARY_INTEGER:
        if (input == TH_Bool) {
            if (op != TH_UNARY_square) {
                return refuse_dtype(op, input);
            }
            *out = TH_Int64; /* PyTorch: square(bool) is pow(bool, 2) */
            return 0;
        }
        *out = input;
        return 0;
    default: /* TH_UNARY_IDENTITY */
        *out = input;
        return 0;
    }
}

/* True when op(input) is input's values unchanged (an integer floor, an
 * integer nan_to_num). */
static bool
is_plain_copy(THUnaryOp op, THDtype input)
{
    THUnaryRule rule = op_info[op].rule;
    return !THDtype_isFloating(input)
           && (rule == TH_UNARY_ROUNDING || rule == TH_UNARY_IDENTITY);
}

/* PyTorch's canCast: no floating into integral, nothing else into bool. */
static bool
can_cast(THDtype from, THDtype to)
{
    if (THDtype_isFloating(from) && !THDtype_isFloating(to)) {
        return false;
    }
    return from == TH_Bool || to != TH_Bool;
}

/* ---- running the kernel ------------------------------------------------- */

/* The tensor the loop reads: the input itself (retained), or the input
 * converted to the dtype the loop computes in (a new tensor laid out like
 * the input). */
static THTensor *
new_kernel_input(THTensor *input, THDtype result, bool predicate)
{
    if (predicate || input->dtype == result) {
        THTensor_retain(input);
        return input;
    }
    return THTensor_newCast(input, result, false);
}

/* dst = op(src); dst has the result dtype and src's shape.  Runs on the
 * worker threads for large tensors; nothing here can fail after
 * THIter_initOperands. */
static int
run_kernel(THUnaryOp op, THTensor *dst, THTensor *src,
           const THUnaryArgs *args)
{
    THIterOperand operands[2] = {THIterOperand_fromTensor(dst),
                                 THIterOperand_fromTensor(src)};
    THIter iter;
    if (THIter_initOperands(&iter, 2, operands, dst->ndim, dst->sizes) < 0) {
        return -1;
    }
    if (op_info[op].rule == TH_UNARY_PREDICATE
        && !THDtype_isFloating(src->dtype)) {
        bool value = predicate_integer_value[op];
        THIter_runParallel(&iter, fill_bool_loop, &value, TH_PARALLEL_GRAIN);
        return 0;
    }
    LoopParams params = loop_params(args, src->dtype);
    THIter_runParallel(&iter, unary_loops[op][src->dtype], &params,
                       TH_PARALLEL_GRAIN);
    return 0;
}

THTensor *
THTensor_newUnary(THUnaryOp op, THTensor *input, const THUnaryArgs *args)
{
    THDtype result = input->dtype;
    if (THUnary_resultType(op, input->dtype, args, &result) < 0) {
        return NULL;
    }
    if (is_plain_copy(op, input->dtype)) {
        return THTensor_newClone(input);
    }
    bool predicate = op_info[op].rule == TH_UNARY_PREDICATE;
    THTensor *src = new_kernel_input(input, result, predicate);
    if (src == NULL) {
        return NULL;
    }
    THTensor *dst;
    if (src != input) {
        /* a fresh converted copy: compute in place in it */
        THTensor_retain(src);
        dst = src;
    }
    else {
        dst = THTensor_newEmptyLike(input, result);
    }
    if (dst != NULL && run_kernel(op, dst, src, args) < 0) {
        THTensor_release(dst);
        dst = NULL;
    }
    THTensor_release(src);
    return dst;
}

/* ---- out= and in-place -------------------------------------------------- */

static int
check_same_shape(THUnaryOp op, const THTensor *out, const THTensor *input)
{
    bool same = out->ndim == input->ndim;
    for (int d = 0; same && d < out->ndim; d++) {
        same = out->sizes[d] == input->sizes[d];
    }
    if (same) {
        return 0;
    }
    char want[256], got[256];
    THTensor_formatSizes(want, sizeof(want), input->ndim, input->sizes);
    THTensor_formatSizes(got, sizeof(got), out->ndim, out->sizes);
    return THError_set(TH_ERR_RUNTIME,
                       "%s(): the out tensor has shape %s but the result has "
                       "shape %s",
                       op_info[op].name, got, want);
}

/* Refuses an out that cannot receive the result; see Note [Unary dtype
 * rules] for the dtype part. */
static int
check_out(THUnaryOp op, const THTensor *out, const THTensor *input,
          THDtype result)
{
    if (check_same_shape(op, out, input) < 0) {
        return -1;
    }
    const char *result_name = THDtype_scalarTypeName(result);
    const char *out_name = THDtype_scalarTypeName(out->dtype);
    if (op_info[op].rule == TH_UNARY_PREDICATE && out->dtype != TH_Bool) {
        return THError_set(TH_ERR_RUNTIME,
                           "%s does not support non-boolean outputs.",
                           op_info[op].name);
    }
    if (is_plain_copy(op, input->dtype) && op_info[op].rule
        == TH_UNARY_ROUNDING && out->dtype != result) {
        return THError_set(TH_ERR_RUNTIME,
                           "Found dtype %s but expected %s", out_name,
                           result_name);
    }
    if (!can_cast(result, out->dtype)) {
        return THError_set(TH_ERR_RUNTIME,
                           "result type %s can't be cast to the desired "
                           "output type %s",
                           result_name, out_name);
    }
    if (THTensor_checkWritable(out) < 0) {
        return -1;
    }
    return THTensor_checkNoInternalOverlap(out);
}

/* out = op(src) through a temporary of the result dtype, then copied (and
 * converted) into out; THTensor_copy bumps out's version. */
static int
unary_through_temporary(THUnaryOp op, THTensor *out, THTensor *src,
                        THDtype result, const THUnaryArgs *args)
{
    THTensor *tmp = THTensor_newEmptyLike(src, result);
    if (tmp == NULL) {
        return -1;
    }
    int status = run_kernel(op, tmp, src, args);
    if (status == 0) {
        status = THTensor_copy(out, tmp);
    }
    THTensor_release(tmp);
    return status;
}

int
THTensor_unaryOut(THUnaryOp op, THTensor *out, THTensor *input,
                  const THUnaryArgs *args)
{
    THDtype result = input->dtype;
    if (THUnary_resultType(op, input->dtype, args, &result) < 0
        || check_out(op, out, input, result) < 0) {
        return -1;
    }
    if (is_plain_copy(op, input->dtype)) {
        return THTensor_copy(out, input);
    }
    bool predicate = op_info[op].rule == TH_UNARY_PREDICATE;
    THTensor *src = new_kernel_input(input, result, predicate);
    if (src == NULL) {
        return -1;
    }
    int status;
    if (out->dtype != result || THTensor_overlapsPartially(out, src)) {
        status = unary_through_temporary(op, out, src, result, args);
    }
    else {
        status = run_kernel(op, out, src, args);
        if (status == 0) {
            THTensor_bumpVersion(out);
        }
    }
    THTensor_release(src);
    return status;
}
