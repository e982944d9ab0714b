/*
 * THRandom.c -- xoshiro256** and the distributions built on it.
 * See THRandom.h.
 */
#include "THRandom.h"

#include <math.h>

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

int
THTensor_uniform(THTensor *tensor, THGenerator *gen, double low, double high)
{
    if (check_fresh_floating(tensor, "uniform") < 0) {
        return -1;
    }
    char *data = THTensor_data(tensor);
    if (tensor->dtype == TH_Float32) {
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
            double value = mean + std * pair[j];
            if (tensor->dtype == TH_Float32) {
                ((float *)data)[i + j] = (float)value;
            }
            else {
                ((double *)data)[i + j] = value;
            }
        }
    }
    return 0;
}

/* A uniform draw from [0, range) by rejection: draws above the largest
 * multiple of range are thrown away, so every value is equally likely. */
static uint64_t
bounded(THGenerator *gen, uint64_t range)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % range;
    uint64_t x;
    do {
        x = THGenerator_next(gen);
    } while (x >= limit);
    return x % range;
}

#define TH_RANDINT_CASE(Name, ctype, py)                                  \
    case TH_##Name:                                                       \
        for (int64_t i = 0; i < tensor->numel; i++) {                     \
            ((ctype *)data)[i] = TH_FROM_FLOAT_##Name(                    \
                (int64_t)((uint64_t)low + bounded(gen, range)));          \
        }                                                                 \
        break;

int
THTensor_randint(THTensor *tensor, THGenerator *gen, int64_t low,
                 int64_t high)
{
    if (low >= high) {
        return THError_set(TH_ERR_RUNTIME,
                           "random_ expects 'from' to be less than 'to', but "
                           "got from=%lld >= to=%lld",
                           (long long)low, (long long)high);
    }
    if (!THTensor_isNonOverlappingAndDense(tensor)) {
        return THError_set(TH_ERR_RUNTIME, "randint needs a dense tensor");
    }
    if (THTensor_checkWritable(tensor) < 0) {
        return -1;
    }
    uint64_t range = (uint64_t)high - (uint64_t)low;
    char *data = THTensor_data(tensor);
    switch (tensor->dtype) {
        TH_FORALL_DTYPES(TH_RANDINT_CASE)
    default:
        break;
    }
    return 0;
}
#undef TH_RANDINT_CASE
