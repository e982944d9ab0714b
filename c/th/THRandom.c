/*
 * THRandom.c -- xoshiro256** and the distributions built on it.
 * See THRandom.h.
 */
#include "THRandom.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static THGenerator default_generator;
static bool default_seeded = false;

static uint64_t
rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* splitmix64: spreads one 64-bit seed over the 256-bit state. */
static uint64_t
splitmix64(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

void
THGenerator_seed(THGenerator *gen, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) {
        gen->state[i] = splitmix64(&x);
    }
    gen->seed = seed;
}

THGenerator *
THGenerator_default(void)
{
    if (!default_seeded) {
        THGenerator_seed(&default_generator, TH_DEFAULT_SEED);
        default_seeded = true;
    }
    return &default_generator;
}

uint64_t
THGenerator_next(THGenerator *gen)
{
    uint64_t *s = gen->state;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double
THGenerator_uniform01(THGenerator *gen)
{
    return (double)(THGenerator_next(gen) >> 11) * 0x1.0p-53;
}

/* A float in [0, 1) with 24 random bits: every float32 draw is exactly
 * representable, so rounding can never produce 1.0. */
static float
uniform01_float(THGenerator *gen)
{
    return (float)(THGenerator_next(gen) >> 40) * 0x1.0p-24f;
}

static int
check_fresh_floating(const THTensor *tensor, const char *what)
{
    if (!THDtype_isFloating(tensor->dtype)) {
        return THError_set(TH_ERR_TYPE, "\"%s\" not implemented for '%s'",
                           what, THDtype_name(tensor->dtype));
    }
    /* The draws fill the block linearly: any dense layout will do. */
    if (!THTensor_isNonOverlappingAndDense(tensor)) {
        return THError_set(TH_ERR_RUNTIME, "%s needs a dense tensor", what);
    }
    return THTensor_checkWritable(tensor);
}

/* Stores draw number i of a floating tensor, rounded once to its dtype
 * (the 16-bit formats round the float32 value to nearest even, as casts
 * do; PyTorch also draws them in float32). */
static void
store_draw(char *data, int64_t i, THDtype dtype, double value)
{
    switch (dtype) {
    case TH_Float64: ((double *)data)[i] = value; break;
    case TH_Float32: ((float *)data)[i] = (float)value; break;
    case TH_Float16: ((THHalf *)data)[i] = THHalf_fromFloat((float)value); break;
    case TH_BFloat16: ((THBFloat16 *)data)[i] = THBFloat16_fromFloat((float)value); break;
    default: break; /* check_fresh_floating admits only the four above */
    }
}

/* The next 16-bit float below `bits` (a finite float16 or bfloat16: both
 * are sign and magnitude with the sign in bit 15). */
static uint16_t
narrow_below(uint16_t bits)
{
    if ((bits & 0x7fff) == 0) {
        return 0x8001; /* below +-0: the negative subnormal nearest zero */
    }
    return (bits & 0x8000) ? (uint16_t)(bits + 1) : (uint16_t)(bits - 1);
}

/* uniform for float16/bfloat16: u has the format's significant bits (11
 * and 8, PyTorch's too), so every u in [0, 1) is exact in it; lo + u *
 * range is rounded once, and a value that rounds up to `high` steps down
 * one step of the format, keeping the range half-open where it can. */
#define TH_DEFINE_UNIFORM_NARROW(Type, digits)                                 \
    static void uniform_##Type(Type *out, int64_t n, THGenerator *gen,          \
                               double low, double high)                        \
    {                                                                          \
        float lo = (float)low, range = (float)(high - low);                    \
        for (int64_t i = 0; i < n; i++) {                                      \
            float u = (float)(THGenerator_next(gen) >> (64 - digits))          \
                      * (1.0f / (float)(1 << digits));                         \
            Type v = Type##_fromFloat(lo + u * range);                         \
            if (!(Type##_toFloat(v) < high)) {                                 \
                Type below = {.bits = narrow_below(v.bits)};                   \
                v = Type##_toFloat(below) >= low ? below : v;                  \
            }                                                                  \
            out[i] = v;                                                        \
        }                                                                      \
    }

TH_DEFINE_UNIFORM_NARROW(THHalf, 11)
TH_DEFINE_UNIFORM_NARROW(THBFloat16, 8)
#undef TH_DEFINE_UNIFORM_NARROW

int
THTensor_uniform(THTensor *tensor, THGenerator *gen, double low, double high)
{
    if (check_fresh_floating(tensor, "uniform") < 0) {
        return -1;
    }
    if (low > high) {
        return THError_set(TH_ERR_RUNTIME,
                           "uniform_ expects to return a [from, to) range, "
                           "but found from=%g > to=%g",
                           low, high);
    }
    char *data = THTensor_data(tensor);
    if (tensor->dtype == TH_Float16) {
        uniform_THHalf((THHalf *)data, tensor->numel, gen, low, high);
    }
    else if (tensor->dtype == TH_BFloat16) {
        uniform_THBFloat16((THBFloat16 *)data, tensor->numel, gen, low, high);
    }
    else if (tensor->dtype == TH_Float32) {
        float *out = (float *)data;
        float lo = (float)low, hi = (float)high, range = (float)(high - low);
        for (int64_t i = 0; i < tensor->numel; i++) {
            float v = lo + uniform01_float(gen) * range;
            /* rounding can carry lo + u * range up to high itself (u = 1 -
             * 2^-24 in uniform(1, 2)); keep the range half-open */
            out[i] = lo < hi && !(v < hi) ? nextafterf(hi, lo) : v;
        }
    }
    else {
        double *out = (double *)data;
        for (int64_t i = 0; i < tensor->numel; i++) {
            double v = low + THGenerator_uniform01(gen) * (high - low);
            out[i] = low < high && !(v < high) ? nextafter(high, low) : v;
        }
    }
    return 0;
}

int
THTensor_normal(THTensor *tensor, THGenerator *gen, double mean, double std)
{
    if (check_fresh_floating(tensor, "normal") < 0) {
        return -1;
    }
    if (!(std >= 0.0)) {
        return THError_set(TH_ERR_RUNTIME,
                           "normal expects std >= 0.0, but found std %g",
                           std);
    }
    char *data = THTensor_data(tensor);
    /* Box-Muller: two uniforms give two independent standard normals.
     * 1 - u keeps the logarithm's argument in (0, 1]. */
    for (int64_t i = 0; i < tensor->numel; i += 2) {
        double u1 = 1.0 - THGenerator_uniform01(gen);
        double u2 = THGenerator_uniform01(gen);
        double radius = sqrt(-2.0 * log(u1));
        double angle = 6.283185307179586476925 * u2; /* 2 pi */
        double pair[2] = {radius * cos(angle), radius * sin(angle)};
        for (int64_t j = 0; j < 2 && i + j < tensor->numel; j++) {
            store_draw(data, i + j, tensor->dtype, mean + std * pair[j]);
        }
    }
    return 0;
}

uint64_t
THGenerator_bounded(THGenerator *gen, uint64_t range)
{
    /* The high word of x * range is uniform on [0, range) except for the
     * low words below 2^64 mod range, which are redrawn (Lemire, "Fast
     * random integer generation in an interval", 2019): no division in
     * the common case. */
    unsigned __int128 product =
        (unsigned __int128)THGenerator_next(gen) * range;
    if ((uint64_t)product < range) {
        uint64_t threshold = (0 - range) % range;
        while ((uint64_t)product < threshold) {
            product = (unsigned __int128)THGenerator_next(gen) * range;
        }
    }
    return (uint64_t)(product >> 64);
}

/* Note [random_'s float ends]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * random_ draws an int64 in [from, to) and converts it to the dtype, which
 * rounds beyond 2^digits: bfloat16's 299 is 300, so random_(0, 300) could
 * store `to` itself.  PyTorch's update_from/update_to move each end inward
 * by one step of the format where from + 1 rounds below from or to - 1
 * rounds up to to; the ends that remain beyond +-2^digits only warn. */

/* value -> dtype -> int64, as C's (and PyTorch's) static casts. */
static int64_t
through_dtype(THDtype dtype, int64_t value)
{
#define TH_THROUGH_CASE(Name, ctype, py)                                   \
    case TH_##Name:                                                         \
        return (int64_t)TH_TO_FLOAT_##Name(TH_FROM_FLOAT_##Name(value));
    switch (dtype) {
        TH_FORALL_DTYPES(TH_THROUGH_CASE)
    default:
        return value;
    }
#undef TH_THROUGH_CASE
}

/* One step of a `digits`-bit format at |value|: 2^(floor(log2|value|) -
 * digits + 1). */
static int64_t
float_step(int64_t value, int digits)
{
    uint64_t magnitude = value < 0 ? 0 - (uint64_t)value : (uint64_t)value;
    int floor_log2 = magnitude == 0 ? 0 : 63 - __builtin_clzll(magnitude);
    return (int64_t)1 << (floor_log2 - digits + 1);
}

static int64_t
update_from(THDtype dtype, int64_t from, int digits)
{
    int64_t plus_one = through_dtype(dtype, from + 1);
    return plus_one < from ? plus_one + float_step(from + 1, digits) : from;
}

static int64_t
update_to(THDtype dtype, int64_t to, int digits)
{
    int64_t minus_one = through_dtype(dtype, to - 1);
    return minus_one >= to ? minus_one - float_step(to - 1, digits) : to;
}

/* The largest integer random_() without `to` draws: the dtype's largest
 * value, 2^digits for a float dtype. */
static int64_t
largest_exact(THDtype dtype)
{
    switch (dtype) {
    case TH_Bool: return 1;
    case TH_UInt8: return UINT8_MAX;
    case TH_Int8: return INT8_MAX;
    case TH_Int16: return INT16_MAX;
    case TH_Int32: return INT32_MAX;
    case TH_Float32: return (int64_t)1 << 24;
    case TH_Float64: return (int64_t)1 << 53;
    case TH_Float16: return (int64_t)1 << 11;
    case TH_BFloat16: return (int64_t)1 << 8;
    default: return INT64_MAX;
    }
}

/* The dtype's finite range, as doubles (PyTorch's check_from_to_in_range). */
static void
dtype_limits(THDtype dtype, double *lowest, double *largest)
{
    switch (dtype) {
    case TH_Bool: *lowest = 0; *largest = 1; return;
    case TH_UInt8: *lowest = 0; *largest = UINT8_MAX; return;
    case TH_Int8: *lowest = INT8_MIN; *largest = INT8_MAX; return;
    case TH_Int16: *lowest = INT16_MIN; *largest = INT16_MAX; return;
    case TH_Int32: *lowest = INT32_MIN; *largest = INT32_MAX; return;
    case TH_Float16: *largest = 65504.0; break;
    case TH_BFloat16: *largest = 3.3895313892515355e38; break;
    case TH_Float32: *largest = FLT_MAX; break;
    case TH_Float64: *largest = DBL_MAX; break;
    default: *lowest = (double)INT64_MIN; *largest = (double)INT64_MAX; return;
    }
    *lowest = -*largest;
}

static int
check_in_range(THDtype dtype, int64_t from, int64_t to_inc,
               THRandintRange *range)
{
    double lowest, largest;
    dtype_limits(dtype, &lowest, &largest);
    const int64_t ends[2] = {from, to_inc};
    const char *const names[2] = {"from", "to - 1"};
    for (int e = 0; e < 2; e++) {
        if (!((double)ends[e] >= lowest && (double)ends[e] <= largest)) {
            return THError_set(TH_ERR_RUNTIME, "%s is out of bounds for %s",
                               names[e], THDtype_cppTypeName(dtype));
        }
    }
    if (THDtype_isFloating(dtype)) {
        int64_t exact = largest_exact(dtype);
        range->inexact_from = from < -exact || from > exact;
        range->inexact_to = to_inc < -exact || to_inc > exact;
    }
    return 0;
}

static int
range_to(THDtype dtype, int64_t from, int64_t to, THRandintRange *range)
{
    if (from >= to) {
        return THError_set(TH_ERR_RUNTIME,
                           "random_ expects 'from' to be less than 'to', but "
                           "got from=%lld >= to=%lld",
                           (long long)from, (long long)to);
    }
    if (THDtype_isFloating(dtype)) {
        from = update_from(dtype, from, range->digits);
        to = update_to(dtype, to, range->digits);
        if (from >= to) {
            return THError_set(TH_ERR_RUNTIME,
                               "random_ expects 'from' casted to dtype to be "
                               "less than 'to' casted to dtype, but got "
                               "from=%lld >= to=%lld",
                               (long long)from, (long long)to);
        }
    }
    range->low = from;
    range->range = (uint64_t)to - (uint64_t)from;
    return check_in_range(dtype, from, to - 1, range);
}

static int
range_to_largest(THDtype dtype, int64_t from, THRandintRange *range)
{
    int64_t to_inc = largest_exact(dtype);
    if (THDtype_isFloating(dtype)) {
        from = update_from(dtype, from, range->digits);
        if (from >= to_inc) {
            return THError_set(TH_ERR_RUNTIME,
                               "random_ expects 'from' casted to dtype to be "
                               "less than or equal to 'to_inc' casted to "
                               "dtype, but got from=%lld > to_inc=%lld",
                               (long long)from, (long long)to_inc);
        }
    }
    range->low = from;
    range->range = (uint64_t)to_inc - (uint64_t)from + 1;
    return check_in_range(dtype, from, to_inc, range);
}

int
THRandom_randintRange(THDtype dtype, int64_t low, const int64_t *high,
                      THRandintRange *range)
{
    *range = (THRandintRange){
        .digits = THDtype_isFloating(dtype)
                      ? __builtin_ctzll((uint64_t)largest_exact(dtype))
                      : 0};
    if (high != NULL) {
        return range_to(dtype, low, *high, range);
    }
    if (low != INT64_MIN) {
        return range_to_largest(dtype, low, range);
    }
    /* every int64: only the dtypes whose conversion takes them all */
    if (dtype != TH_Int64 && dtype != TH_Float32 && dtype != TH_Float64
        && dtype != TH_BFloat16) {
        return THError_set(TH_ERR_RUNTIME,
                           "\"random_full_64_bits_range_kernel_cpu\" not "
                           "implemented for '%s'",
                           THDtype_scalarTypeName(dtype));
    }
    range->low = INT64_MIN;
    range->range = 0;
    return 0;
}

/* range 0: all 2^64 int64s, each draw as it comes */
#define TH_RANDINT_CASE(Name, ctype, py)                                  \
    case TH_##Name:                                                       \
        for (int64_t i = 0; i < tensor->numel; i++) {                     \
            uint64_t offset = range->range == 0                           \
                                  ? THGenerator_next(gen)                 \
                                  : THGenerator_bounded(gen, range->range); \
            ((ctype *)data)[i] = TH_FROM_FLOAT_##Name(                    \
                (int64_t)((uint64_t)range->low + offset));                \
        }                                                                 \
        break;

static int
fill_randint(THTensor *tensor, THGenerator *gen, const THRandintRange *range)
{
    if (!THTensor_isNonOverlappingAndDense(tensor)) {
        return THError_set(TH_ERR_RUNTIME, "randint needs a dense tensor");
    }
    if (THTensor_checkWritable(tensor) < 0) {
        return -1;
    }
    char *data = THTensor_data(tensor);
    switch (tensor->dtype) {
        TH_FORALL_DTYPES(TH_RANDINT_CASE)
    default:
        break;
    }
    return 0;
}
#undef TH_RANDINT_CASE

int
THTensor_randint(THTensor *tensor, THGenerator *gen, int64_t low,
                 int64_t high)
{
    THRandintRange range;
    if (THRandom_randintRange(tensor->dtype, low, &high, &range) < 0) {
        return -1;
    }
    return fill_randint(tensor, gen, &range);
}

/* random_ of a dense tensor: [low, high), or [low, largest exact]. */
static int
sample_randint(THTensor *tensor, THGenerator *gen, const THDistribution *dist)
{
    THRandintRange range;
    if (THRandom_randintRange(tensor->dtype, dist->low,
                              dist->high_is_max ? NULL : &dist->high, &range)
        < 0) {
        return -1;
    }
    return fill_randint(tensor, gen, &range);
}

int
THTensor_exponential(THTensor *tensor, THGenerator *gen, double lambd)
{
    if (!THDtype_isFloating(tensor->dtype)) {
        return THError_set(TH_ERR_RUNTIME,
                           "Exponential distribution is a continuous "
                           "probability distribution. dtype must be a "
                           "floating point but you specified %s",
                           THDtype_name(tensor->dtype));
    }
    if (check_fresh_floating(tensor, "exponential") < 0) {
        return -1;
    }
    if (!(lambd > 0.0)) {
        return THError_set(TH_ERR_RUNTIME,
                           "exponential_ expects lambda > 0.0, but found "
                           "lambda=%g",
                           lambd);
    }
    char *data = THTensor_data(tensor);
    /* 1 - u lies in (0, 1], so the logarithm is finite. */
    for (int64_t i = 0; i < tensor->numel; i++) {
        store_draw(data, i, tensor->dtype, -log(1.0 - THGenerator_uniform01(gen)) / lambd);
    }
    return 0;
}

#define TH_BERNOULLI_CASE(Name, ctype, py)                                \
    case TH_##Name:                                                       \
        for (int64_t i = 0; i < tensor->numel; i++) {                     \
            ((ctype *)data)[i] =                                          \
                TH_FROM_FLOAT_##Name(THGenerator_uniform01(gen) < p);     \
        }                                                                 \
        break;

int
THTensor_bernoulli(THTensor *tensor, THGenerator *gen, double p)
{
    if (!(p >= 0.0 && p <= 1.0)) {
        return THError_set(TH_ERR_RUNTIME,
                           "bernoulli_ expects p to be in [0, 1], but got "
                           "p=%g",
                           p);
    }
    if (!THTensor_isNonOverlappingAndDense(tensor)) {
        return THError_set(TH_ERR_RUNTIME, "bernoulli needs a dense tensor");
    }
    if (THTensor_checkWritable(tensor) < 0) {
        return -1;
    }
    char *data = THTensor_data(tensor);
    switch (tensor->dtype) {
        TH_FORALL_DTYPES(TH_BERNOULLI_CASE)
    default:
        break;
    }
    return 0;
}
#undef TH_BERNOULLI_CASE

/* ---- generator state and seeds ------------------------------------------- */

void
THGenerator_getState(const THGenerator *gen,
                     uint8_t state[TH_GENERATOR_STATE_SIZE])
{
    uint64_t words[5] = {gen->state[0], gen->state[1], gen->state[2],
                         gen->state[3], gen->seed};
    for (int w = 0; w < 5; w++) {
        for (int b = 0; b < 8; b++) {
            state[8 * w + b] = (uint8_t)(words[w] >> (8 * b));
        }
    }
}

int
THGenerator_setState(THGenerator *gen, const uint8_t *state, int64_t size)
{
    if (size != TH_GENERATOR_STATE_SIZE) {
        return THError_set(TH_ERR_RUNTIME,
                           "Expected an RNG state of size %d but found the "
                           "input RNG state size to be %lld",
                           TH_GENERATOR_STATE_SIZE, (long long)size);
    }
    uint64_t words[5] = {0, 0, 0, 0, 0};
    for (int w = 0; w < 5; w++) {
        for (int b = 0; b < 8; b++) {
            words[w] |= (uint64_t)state[8 * w + b] << (8 * b);
        }
    }
    if ((words[0] | words[1] | words[2] | words[3]) == 0) {
        /* xoshiro256** would return 0 forever from this state */
        return THError_set(TH_ERR_RUNTIME,
                           "invalid RNG state: the xoshiro256** state words "
                           "are all zero");
    }
    memcpy(gen->state, words, sizeof(gen->state));
    gen->seed = words[4];
    return 0;
}

uint64_t
THGenerator_nondeterministicSeed(void)
{
    uint64_t seed = 0;
    FILE *urandom = fopen("/dev/urandom", "rb");
    bool read_ok = urandom != NULL && fread(&seed, sizeof(seed), 1, urandom) == 1;
    if (urandom != NULL) {
        fclose(urandom);
    }
    if (!read_ok) {
        /* no /dev/urandom: the clock and an address, well mixed */
        uint64_t mix = (uint64_t)time(NULL) ^ (uint64_t)clock()
                       ^ (uint64_t)(uintptr_t)&seed;
        seed = splitmix64(&mix);
    }
    return seed;
}

/* ---- in-place sampling --------------------------------------------------- */

/* Fills a dense tensor with draws from `dist`. */
static int
fill_dense(THTensor *tensor, THGenerator *gen, const THDistribution *dist)
{
    switch (dist->kind) {
    case TH_DIST_UNIFORM:
        return THTensor_uniform(tensor, gen, dist->a, dist->b);
    case TH_DIST_NORMAL:
        return THTensor_normal(tensor, gen, dist->a, dist->b);
    case TH_DIST_RANDINT:
        return sample_randint(tensor, gen, dist);
    case TH_DIST_EXPONENTIAL:
        return THTensor_exponential(tensor, gen, dist->a);
    case TH_DIST_BERNOULLI:
        return THTensor_bernoulli(tensor, gen, dist->a);
    }
    return THError_set(TH_ERR_VALUE, "unknown distribution %d",
                       (int)dist->kind);
}

int
THTensor_sample_(THTensor *tensor, THGenerator *gen,
                 const THDistribution *dist)
{
    if (THTensor_checkWritable(tensor) < 0) {
        return -1;
    }
    if (THTensor_isNonOverlappingAndDense(tensor)) {
        if (fill_dense(tensor, gen, dist) < 0) {
            return -1;
        }
        THTensor_bumpVersion(tensor);
        return 0;
    }
    /* A strided view: draw into a fresh tensor, then copy (which checks
     * for overlapping elements and bumps the version). */
    THTensor *fresh = THTensor_newEmpty(tensor->ndim, tensor->sizes,
                                        tensor->dtype, TH_DEVICE_CPU);
    int status = fresh == NULL ? -1 : fill_dense(fresh, gen, dist);
    if (status == 0) {
        status = THTensor_copy(tensor, fresh);
    }
    THTensor_release(fresh);
    return status;
}

/* ---- samplers that make their result --------------------------------------- */

/* The values of `tensor` as a fresh row-major float64 tensor (or the tensor
 * itself, retained, when it already is one). */
static THTensor *
contiguous_float64(THTensor *tensor)
{
    THTensor *cast = THTensor_newCast(tensor, TH_Float64, false);
    if (cast == NULL) {
        return NULL;
    }
    THTensor *contiguous = THTensor_newContiguous(cast);
    THTensor_release(cast);
    return contiguous;
}

int64_t
THRandom_defaultHigh(THDtype dtype)
{
    int64_t largest = largest_exact(dtype);
    return largest == INT64_MAX ? INT64_MAX : largest + 1;
}

/* Fisher-Yates, from the end: position i swaps with a uniform j <= i.  The
 * j of a block of positions are drawn first and their elements prefetched,
 * which hides the cache misses of the random reads on large n; the draws
 * and the swaps happen in the same order as one at a time. */
#define TH_SHUFFLE_BLOCK 32
#define TH_RANDPERM_CASE(Name, ctype, py)                                  \
    case TH_##Name: {                                                      \
        ctype *out = (ctype *)THTensor_data(result);                       \
        for (int64_t i = 0; i < n; i++) {                                  \
            out[i] = TH_FROM_FLOAT_##Name(i);                              \
        }                                                                  \
        for (int64_t i = n - 1; i > 0;) {                                  \
            int64_t block = i < TH_SHUFFLE_BLOCK ? i : TH_SHUFFLE_BLOCK;   \
            int64_t js[TH_SHUFFLE_BLOCK];                                  \
            for (int64_t k = 0; k < block; k++) {                          \
                js[k] = (int64_t)THGenerator_bounded(gen,                  \
                                                     (uint64_t)(i - k) + 1); \
                __builtin_prefetch(&out[js[k]], 1);                        \
            }                                                              \
            for (int64_t k = 0; k < block; k++, i--) {                     \
                ctype swap = out[i];                                       \
                out[i] = out[js[k]];                                       \
                out[js[k]] = swap;                                         \
            }                                                              \
        }                                                                  \
        break;                                                             \
    }

THTensor *
THTensor_newRandperm(int64_t n, THDtype dtype, THGenerator *gen)
{
    if (n > THRandom_defaultHigh(dtype)) {
        THError_set(TH_ERR_RUNTIME,
                    "n is too large for result tensor type: '%s'",
                    THDtype_name(dtype));
        return NULL;
    }
    THTensor *result = THTensor_newEmpty(1, &n, dtype, TH_DEVICE_CPU);
    if (result == NULL) {
        return NULL;
    }
    switch (dtype) {
        TH_FORALL_DTYPES(TH_RANDPERM_CASE)
    default:
        break;
    }
    return result;
}
#undef TH_RANDPERM_CASE
#undef TH_SHUFFLE_BLOCK

#define TH_BERNOULLI_TENSOR_CASE(Name, ctype, py)                          \
    case TH_##Name:                                                        \
        for (int64_t i = 0; i < n; i++) {                                  \
            ((ctype *)out)[i] =                                            \
                TH_FROM_FLOAT_##Name(THGenerator_uniform01(gen) < p[i]);   \
        }                                                                  \
        break;

THTensor *
THTensor_newBernoulli(THTensor *probs, THDtype dtype, THGenerator *gen)
{
    THTensor *values = contiguous_float64(probs);
    if (values == NULL) {
        return NULL;
    }
    const double *p = (const double *)THTensor_data(values);
    int64_t n = values->numel;
    for (int64_t i = 0; i < n; i++) {
        if (!(p[i] >= 0.0 && p[i] <= 1.0)) {
            THTensor_release(values);
            THError_set(TH_ERR_RUNTIME, "Expected p_in >= 0 && p_in <= 1 to "
                                        "be true, but got false.");
            return NULL;
        }
    }
    THTensor *result = THTensor_newEmpty(probs->ndim, probs->sizes, dtype,
                                         TH_DEVICE_CPU);
    if (result != NULL) {
        char *out = THTensor_data(result);
        switch (dtype) {
            TH_FORALL_DTYPES(TH_BERNOULLI_TENSOR_CASE)
        default:
            break;
        }
    }
    THTensor_release(values);
    return result;
}
#undef TH_BERNOULLI_TENSOR_CASE

/* Poisson(rate) for a small rate: count the uniforms whose running product
 * stays above e^-rate (Knuth); about rate + 1 draws. */
static double
poisson_small(THGenerator *gen, double rate)
{
    double limit = exp(-rate), product = THGenerator_uniform01(gen);
    double count = 0;
    while (product > limit) {
        product *= THGenerator_uniform01(gen);
        count++;
    }
    return count;
}

/* Poisson(rate) for rate >= 10: Hormann's transformed rejection with
 * squeeze (PTRS, "The transformed rejection method for generating Poisson
 * random variables", 1993); about 1.15 pairs of draws per sample. */
static double
poisson_large(THGenerator *gen, double rate)
{
    double root = sqrt(rate), log_rate = log(rate);
    double b = 0.931 + 2.53 * root;
    double a = -0.059 + 0.02483 * b;
    double inv_alpha = 1.1239 + 1.1328 / (b - 3.4);
    double v_r = 0.9277 - 3.6224 / (b - 2);
    for (;;) {
        double u = THGenerator_uniform01(gen) - 0.5;
        double v = THGenerator_uniform01(gen);
        double us = 0.5 - fabs(u);
        double k = floor((2 * a / us + b) * u + rate + 0.43);
        if (us >= 0.07 && v <= v_r) {
            return k; /* the squeeze: accepted without the logarithms */
        }
        if (k < 0 || (us < 0.013 && v > us)) {
            continue;
        }
        if (log(v) + log(inv_alpha) - log(a / (us * us) + b)
            <= -rate + k * log_rate - lgamma(k + 1)) {
            return k;
        }
    }
}

THTensor *
THTensor_newPoisson(THTensor *rates, THGenerator *gen)
{
    if (!THDtype_isFloating(rates->dtype)) {
        THError_set(TH_ERR_TYPE, "\"poisson\" not implemented for '%s'",
                    THDtype_name(rates->dtype));
        return NULL;
    }
    THTensor *values = contiguous_float64(rates);
    if (values == NULL) {
        return NULL;
    }
    const double *rate = (const double *)THTensor_data(values);
    int64_t n = values->numel;
    for (int64_t i = 0; i < n; i++) {
        if (!(rate[i] >= 0.0) || isinf(rate[i])) {
            THTensor_release(values);
            THError_set(TH_ERR_RUNTIME, "invalid Poisson rate, expected "
                                        "rate to be non-negative");
            return NULL;
        }
    }
    THTensor *result = THTensor_newEmpty(rates->ndim, rates->sizes,
                                         rates->dtype, TH_DEVICE_CPU);
    if (result != NULL) {
        char *out = THTensor_data(result);
        for (int64_t i = 0; i < n; i++) {
            double count = rate[i] == 0.0 ? 0.0
                           : rate[i] < 10.0 ? poisson_small(gen, rate[i])
                                            : poisson_large(gen, rate[i]);
            store_draw(out, i, rates->dtype, count);
        }
    }
    THTensor_release(values);
    return result;
}

/* ---- multinomial ------------------------------------------------------- */

/* Checks one row of weights: finite, none negative, a positive sum, and
 * (without replacement) at least `nsamples` positive ones. */
static int
check_weights(const double *w, int64_t ncat, int64_t nsamples,
              bool replacement)
{
    double total = 0;
    int64_t positive = 0;
    for (int64_t c = 0; c < ncat; c++) {
        if (!(w[c] >= 0.0) || isinf(w[c])) {
            return THError_set(TH_ERR_RUNTIME,
                               "probability tensor contains either `inf`, "
                               "`nan` or element < 0");
        }
        total += w[c];
        positive += w[c] > 0.0;
    }
    if (!(total > 0.0)) {
        return THError_set(TH_ERR_RUNTIME, "invalid multinomial distribution "
                                           "(sum of probabilities <= 0)");
    }
    if (!replacement && positive < nsamples) {
        return THError_set(TH_ERR_RUNTIME,
                           "invalid multinomial distribution (with "
                           "replacement=False, not enough non-negative "
                           "category to sample)");
    }
    return 0;
}

/* With replacement, few draws: each is the first category whose running
 * sum of weights exceeds u * total (binary search in the cumulative sums,
 * log2(ncat) reads a draw). */
static int
sample_by_search(const double *w, int64_t ncat, int64_t nsamples,
                 int64_t *out, THGenerator *gen)
{
    double *cumulative = TH_mallocArray(ncat, sizeof(double), "multinomial");
    if (cumulative == NULL) {
        return -1;
    }
    double total = 0;
    int64_t last_positive = 0;
    for (int64_t c = 0; c < ncat; c++) {
        total += w[c];
        cumulative[c] = total;
        last_positive = w[c] > 0.0 ? c : last_positive;
    }
    for (int64_t s = 0; s < nsamples; s++) {
        double target = THGenerator_uniform01(gen) * total;
        /* the answer lies in [lo, hi]; rounding may put target at total
         * itself, and then the last category with weight is right */
        int64_t lo = 0, hi = last_positive;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (cumulative[mid] > target) {
                hi = mid;
            }
            else {
                lo = mid + 1;
            }
        }
        out[s] = lo;
    }
    free(cumulative);
    return 0;
}

/* One column of an alias table: keep the column's own category with
 * probability `keep`, else take `alias`. */
typedef struct {
    double keep;
    int64_t alias;
} AliasColumn;

/* Builds Walker's alias table (Vose's construction): weights scaled to a
 * mean of 1; each column below 1 is topped up from one above 1, which is
 * then its alias.  `pending` is scratch for ncat indices: the columns
 * below 1 stack up from its start, those at or above 1 from its end. */
static void
build_alias_table(const double *w, int64_t ncat, AliasColumn *table,
                  int64_t *pending)
{
    double total = 0;
    int64_t some_positive = 0;
    for (int64_t c = 0; c < ncat; c++) {
        total += w[c];
        some_positive = w[c] > 0.0 ? c : some_positive;
    }
    int64_t nsmall = 0, large_start = ncat;
    for (int64_t c = 0; c < ncat; c++) {
        table[c].keep = w[c] * ((double)ncat / total);
        table[c].alias = some_positive;
        if (table[c].keep < 1.0) {
            pending[nsmall++] = c;
        }
        else {
            pending[--large_start] = c;
        }
    }
    while (nsmall > 0 && large_start < ncat) {
        int64_t small = pending[--nsmall], large = pending[large_start];
        table[small].alias = large;
        table[large].keep -= 1.0 - table[small].keep;
        if (table[large].keep < 1.0) {
            large_start++; /* `large` moves to the small stack */
            pending[nsmall++] = large;
        }
    }
    /* What is left is 1 up to rounding, except a zero weight, which must
     * never be drawn (its alias is a category with weight). */
    for (int64_t k = 0; k < nsmall; k++) {
        int64_t c = pending[k];
        table[c].keep = w[c] > 0.0 ? 1.0 : 0.0;
    }
    for (int64_t k = large_start; k < ncat; k++) {
        table[pending[k]].keep = 1.0;
    }
}

/* With replacement, many draws: Walker's alias method, a column chosen
 * uniformly and one comparison, so one random read a draw after an O(ncat)
 * table. */
static int
sample_by_alias(const double *w, int64_t ncat, int64_t nsamples,
                int64_t *out, THGenerator *gen)
{
    AliasColumn *table = TH_mallocArray(ncat, sizeof(AliasColumn),
                                        "multinomial");
    int64_t *pending = TH_mallocArray(ncat, sizeof(int64_t), "multinomial");
    if (table == NULL || pending == NULL) {
        free(table);
        free(pending);
        return -1;
    }
    build_alias_table(w, ncat, table, pending);
    free(pending);
    for (int64_t s = 0; s < nsamples; s++) {
        int64_t column = (int64_t)THGenerator_bounded(gen, (uint64_t)ncat);
        bool keep = THGenerator_uniform01(gen) < table[column].keep;
        out[s] = keep ? column : table[column].alias;
    }
    free(table);
    return 0;
}

/* The alias table costs a few passes over the categories; the search,
 * log2(ncat) cache misses a draw: the table wins for many draws. */
static bool
alias_is_cheaper(int64_t ncat, int64_t nsamples)
{
    double search_cost = (double)nsamples * log2((double)ncat + 1);
    return search_cost > 4.0 * (double)ncat;
}

/* A max-heap on key of (key, category) pairs: the nsamples smallest keys
 * seen so far, the largest on top. */
typedef struct {
    double key;
    int64_t category;
} KeyedCategory;

static void
sift_down(KeyedCategory *heap, int64_t size, int64_t at)
{
    for (;;) {
        int64_t largest = at, left = 2 * at + 1, right = left + 1;
        if (left < size && heap[left].key > heap[largest].key) {
            largest = left;
        }
        if (right < size && heap[right].key > heap[largest].key) {
            largest = right;
        }
        if (largest == at) {
            return;
        }
        KeyedCategory swap = heap[at];
        heap[at] = heap[largest];
        heap[largest] = swap;
        at = largest;
    }
}

/* Without replacement, by the exponential race (Efraimidis and Spirakis):
 * category c "arrives" at time E_c / w_c with E_c ~ Exponential(1); the
 * first nsamples to arrive, in arrival order, are distributed as nsamples
 * draws without replacement. */
static int
sample_without_replacement(const double *w, int64_t ncat, int64_t nsamples,
                           int64_t *out, THGenerator *gen)
{
    KeyedCategory *heap = TH_mallocArray(nsamples, sizeof(KeyedCategory),
                                         "multinomial");
    if (heap == NULL) {
        return -1;
    }
    int64_t size = 0;
    for (int64_t c = 0; c < ncat; c++) {
        if (w[c] == 0.0) {
            continue; /* never arrives */
        }
        double key = -log(1.0 - THGenerator_uniform01(gen)) / w[c];
        if (size < nsamples) {
            heap[size++] = (KeyedCategory){key, c};
            if (size == nsamples) {
                for (int64_t at = size / 2 - 1; at >= 0; at--) {
                    sift_down(heap, size, at);
                }
            }
        }
        else if (key < heap[0].key) {
            heap[0] = (KeyedCategory){key, c};
            sift_down(heap, size, 0);
        }
    }
    /* heap sort: the latest arrival goes last */
    for (int64_t end = size - 1; end >= 0; end--) {
        out[end] = heap[0].category;
        heap[0] = heap[end];
        sift_down(heap, end, 0);
    }
    free(heap);
    return 0;
}

static int
check_multinomial_args(const THTensor *probs, int64_t nsamples,
                       bool replacement)
{
    if (probs->ndim != 1 && probs->ndim != 2) {
        return THError_set(TH_ERR_RUNTIME, "prob_dist must be 1 or 2 dim");
    }
    if (!THDtype_isFloating(probs->dtype)) {
        return THError_set(TH_ERR_RUNTIME,
                           "multinomial only supports floating-point dtypes "
                           "for input, got: %s",
                           THDtype_name(probs->dtype));
    }
    if (nsamples <= 0) {
        return THError_set(TH_ERR_RUNTIME,
                           "cannot sample n_sample <= 0 samples");
    }
    if (!replacement && nsamples > probs->sizes[probs->ndim - 1]) {
        return THError_set(TH_ERR_RUNTIME,
                           "cannot sample n_sample > prob_dist.size(-1) "
                           "samples without replacement");
    }
    return 0;
}

THTensor *
THTensor_newMultinomial(THTensor *probs, int64_t nsamples, bool replacement,
                        THGenerator *gen)
{
    if (check_multinomial_args(probs, nsamples, replacement) < 0) {
        return NULL;
    }
    int64_t ncat = probs->sizes[probs->ndim - 1];
    int64_t rows = probs->ndim == 2 ? probs->sizes[0] : 1;
    THTensor *weights = contiguous_float64(probs);
    if (weights == NULL) {
        return NULL;
    }
    const double *w = (const double *)THTensor_data(weights);
    for (int64_t r = 0; r < rows; r++) {
        if (check_weights(w + r * ncat, ncat, nsamples, replacement) < 0) {
            THTensor_release(weights);
            return NULL;
        }
    }
    int64_t sizes[2] = {rows, nsamples};
    THTensor *result = THTensor_newEmpty(probs->ndim, sizes + 2 - probs->ndim,
                                         TH_Int64, TH_DEVICE_CPU);
    int status = result == NULL ? -1 : 0;
    for (int64_t r = 0; r < rows && status == 0; r++) {
        const double *row = w + r * ncat;
        int64_t *out = (int64_t *)THTensor_data(result) + r * nsamples;
        status = !replacement ? sample_without_replacement(row, ncat, nsamples,
                                                           out, gen)
                 : alias_is_cheaper(ncat, nsamples)
                     ? sample_by_alias(row, ncat, nsamples, out, gen)
                     : sample_by_search(row, ncat, nsamples, out, gen);
    }
    if (status < 0) {
        THTensor_release(result);
        result = NULL;
    }
    THTensor_release(weights);
    return result;
}
