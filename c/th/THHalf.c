/*
 * THHalf.c -- bulk conversions between float32 and the 16-bit formats
 * (THHalf.h).  The float16 ones run the F16C instructions (8 values per
 * instruction) when the CPU has them, picked once at run time like
 * THBlas.c's kernels; the bfloat16 ones are bit operations, which the
 * compiler vectorises for bfloat16 -> float32 and which are written on
 * vector types for AVX-512 and AVX2 the other way (the compiler does not
 * vectorise the NaN test on its own).
 */
#include "THHalf.h"

#include <stdbool.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TH_HAVE_F16C_PATH 1
#endif

#ifdef TH_HAVE_F16C_PATH
#define TH_TARGET_F16C __attribute__((target("avx,f16c")))

static bool
cpu_has_f16c(void)
{
    static int cached = -1; /* a benign race: every thread stores the same */
    if (cached < 0) {
        cached = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
    }
    return cached;
}

TH_TARGET_F16C static int64_t
half_to_float_f16c(const THHalf *in, float *out, int64_t n)
{
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(in + k));
        _mm256_storeu_ps(out + k, _mm256_cvtph_ps(h));
    }
    return k;
}

TH_TARGET_F16C static int64_t
half_from_float_f16c(const float *in, THHalf *out, int64_t n)
{
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + k),
                                    _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(out + k), h);
    }
    return k;
}
#endif

void
THHalf_toFloatN(const THHalf *in, float *out, int64_t n)
{
    int64_t k = 0;
#ifdef TH_HAVE_F16C_PATH
    if (cpu_has_f16c()) {
        k = half_to_float_f16c(in, out, n);
    }
#endif
    for (; k < n; k++) {
        out[k] = THHalf_toFloat(in[k]);
    }
}

void
THHalf_fromFloatN(const float *in, THHalf *out, int64_t n)
{
    int64_t k = 0;
#ifdef TH_HAVE_F16C_PATH
    if (cpu_has_f16c()) {
        k = half_from_float_f16c(in, out, n);
    }
#endif
    for (; k < n; k++) {
        out[k] = THHalf_fromFloat(in[k]);
    }
}

void
THBFloat16_toFloatN(const THBFloat16 *in, float *out, int64_t n)
{
    for (int64_t k = 0; k < n; k++) {
        out[k] = THBFloat16_toFloat(in[k]);
    }
}

#ifdef TH_HAVE_F16C_PATH
/* float32 -> bfloat16 on whole vectors: THBFloat16_fromFloat's rounding on
 * every lane, NaN lanes replaced by 0xffff through the comparison's
 * all-ones mask, and the 32-bit results narrowed to 16 bits.  Written once
 * with GCC vector extensions and compiled for AVX-512 (16 lanes) and AVX2
 * (8 lanes), picked at run time: the compiler does not vectorise the
 * scalar loop's NaN branch in a build without -march. */
#define TH_DEFINE_BF16_FROM_FLOAT(name, lanes, target_attr)                \
    typedef uint32_t name##_words __attribute__((vector_size(4 * lanes))); \
    typedef uint16_t name##_halves __attribute__((vector_size(2 * lanes)));\
    target_attr static int64_t name(const float *in, THBFloat16 *out,      \
                                    int64_t n)                             \
    {                                                                      \
        int64_t k = 0;                                                     \
        for (; k + lanes <= n; k += lanes) {                               \
            name##_words bits;                                             \
            memcpy(&bits, in + k, sizeof(bits));                           \
            name##_words rounded =                                         \
                (bits + 0x7fff + ((bits >> 16) & 1)) >> 16;                \
            name##_words nan = (name##_words)((bits & 0x7fffffff)          \
                                              > 0x7f800000);               \
            rounded = (rounded & ~nan) | (0xffff & nan);                   \
            name##_halves narrow =                                         \
                __builtin_convertvector(rounded, name##_halves);           \
            memcpy(out + k, &narrow, sizeof(narrow));                      \
        }                                                                  \
        return k;                                                          \
    }

TH_DEFINE_BF16_FROM_FLOAT(bfloat16_from_float_avx512, 16,
                          __attribute__((target("avx512f,avx512bw"))))
TH_DEFINE_BF16_FROM_FLOAT(bfloat16_from_float_avx2, 8,
                          __attribute__((target("avx2"))))
#endif

void
THBFloat16_fromFloatN(const float *in, THBFloat16 *out, int64_t n)
{
    int64_t k = 0;
#ifdef TH_HAVE_F16C_PATH
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512bw")) {
        k = bfloat16_from_float_avx512(in, out, n);
    } else if (__builtin_cpu_supports("avx2")) {
        k = bfloat16_from_float_avx2(in, out, n);
    }
#endif
    for (; k < n; k++) {
        out[k] = THBFloat16_fromFloat(in[k]);
    }
}
