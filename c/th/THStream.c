/*
 * THStream.c -- streaming-store copies.  See Note [Streaming stores] in
 * THStream.h.
 */
#include "THStream.h"

#include "THBlas.h"
#include "THGeneral.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TH_STREAM_X86 1
#endif

/* ---- the copy families -------------------------------------------------- */

/* copy_<family>(dst, src, n): plain copies up to dst's first WIDTH-byte
 * boundary (a streaming store must be aligned), streaming stores of
 * WIDTH bytes, a plain copy of the rest.  src may be anywhere. */
#define TH_DEFINE_STREAM_COPY(family, target_attr, WIDTH, VT, LOADU, STREAM) \
    target_attr static void copy_##family(char *dst, const char *src,       \
                                          size_t n)                         \
    {                                                                       \
        size_t head = (size_t)(-(uintptr_t)dst & (WIDTH - 1));              \
        if (head > n) {                                                     \
            head = n;                                                       \
        }                                                                   \
        memcpy(dst, src, head);                                             \
        size_t i = head;                                                    \
        for (; i + WIDTH <= n; i += WIDTH) {                                \
            VT v = LOADU((const VT *)(src + i));                            \
            STREAM((VT *)(dst + i), v);                                     \
        }                                                                   \
        memcpy(dst + i, src + i, n - i);                                    \
    }

#if TH_STREAM_X86
TH_DEFINE_STREAM_COPY(avx512, __attribute__((target("avx512f"))), 64,
                      __m512i, _mm512_loadu_si512, _mm512_stream_si512)
TH_DEFINE_STREAM_COPY(avx2, __attribute__((target("avx2"))), 32, __m256i,
                      _mm256_loadu_si256, _mm256_stream_si256)
TH_DEFINE_STREAM_COPY(sse2, , 16, __m128i, _mm_loadu_si128,
                      _mm_stream_si128)
#endif

static void
copy_generic(char *dst, const char *src, size_t n)
{
    memcpy(dst, src, n);
}

typedef struct {
    const char *name;
    const char *cpu_feature; /* for __builtin_cpu_supports; NULL: none */
    void (*copy)(char *dst, const char *src, size_t n);
} StreamFamily;

/* Best first. */
static const StreamFamily stream_families[] = {
#if TH_STREAM_X86
    {"avx512", "avx512f", copy_avx512},
    {"avx2", "avx2", copy_avx2},
    {"sse2", NULL, copy_sse2},
#endif
    {"generic", NULL, copy_generic},
};
#define NUM_STREAM_FAMILIES \
    ((int)(sizeof(stream_families) / sizeof(stream_families[0])))

static bool
family_supported(const StreamFamily *family)
{
#if TH_STREAM_X86
    __builtin_cpu_init();
    /* __builtin_cpu_supports wants a string literal. */
    if (family->cpu_feature != NULL
        && strcmp(family->cpu_feature, "avx512f") == 0) {
        return __builtin_cpu_supports("avx512f");
    }
    if (family->cpu_feature != NULL
        && strcmp(family->cpu_feature, "avx2") == 0) {
        return __builtin_cpu_supports("avx2");
    }
#endif
    return family->cpu_feature == NULL;
}

/* The family in use; NULL until first use (a race only stores the same
 * pointer twice). */
static _Atomic(const StreamFamily *) active_family;

static const StreamFamily *
current_family(void)
{
    const StreamFamily *family = atomic_load(&active_family);
    if (family == NULL) {
        int i = 0;
        while (!family_supported(&stream_families[i])) {
            i++; /* the last two ("sse2" on x86-64, "generic") need nothing */
        }
        family = &stream_families[i];
        atomic_store(&active_family, family);
    }
    return family;
}

const char *
THStream_kernelName(void)
{
    return current_family()->name;
}

int
THStream_setKernel(const char *name)
{
    for (int i = 0; i < NUM_STREAM_FAMILIES; i++) {
        if (strcmp(stream_families[i].name, name) == 0) {
            if (!family_supported(&stream_families[i])) {
                return THError_set(TH_ERR_RUNTIME,
                                   "streaming-store kernel '%s' is not "
                                   "supported by this CPU",
                                   name);
            }
            atomic_store(&active_family, &stream_families[i]);
            return 0;
        }
    }
    return THError_set(TH_ERR_VALUE, "unknown streaming-store kernel '%s'",
                       name);
}

void
THStream_copy(void *dst, const void *src, size_t n)
{
    current_family()->copy(dst, src, n);
}

void
THStream_fence(void)
{
#if TH_STREAM_X86
    _mm_sfence();
#else
    atomic_thread_fence(memory_order_seq_cst);
#endif
}

/* ---- when to stream ----------------------------------------------------- */

/* 0 until first use, or after THStream_setThreshold(0). */
static _Atomic size_t threshold_bytes;

/* A quarter of the last-level cache that one core shares with its
 * neighbours (the GEMM's blocking reads the same sizes, THBlas_cacheSizes).
 * A streamed result is not in the cache for the next operation, so the
 * threshold is where that costs less than the read-for-ownership and the
 * evicted inputs it saves.  One thread's `add(a, b, out=c)` followed by
 * `c.sum()` on this 32 MiB-L3 Zen 4 VM (thread CPU time, streamed and
 * plain alternated, median of 15 ratios, two runs, load ~3.7): a 4 MiB
 * result streamed ran at 0.83-0.84x the plain stores' speed, 6 MiB
 * 1.06-1.13x, 8 MiB 1.13-1.14x, 12-24 MiB 1.09-1.15x; `add(out=)` alone
 * gains from 4 MiB (1.07-1.49x) to 64 MiB (1.15-1.17x).  Half the cache,
 * the threshold before, left the 8-16 MiB results' gain unused.  (The C
 * library's sysconf reports 320 MiB of L3 on this VM, whose cores share 32
 * MiB; with it no result under 160 MiB streamed.) */
static size_t
default_threshold(void)
{
    int64_t caches[3];
    THBlas_cacheSizes(caches);
    return (size_t)caches[2] / 4;
}

size_t
THStream_threshold(void)
{
    size_t bytes = atomic_load(&threshold_bytes);
    if (bytes == 0) {
        bytes = default_threshold();
        atomic_store(&threshold_bytes, bytes);
    }
    return bytes;
}

void
THStream_setThreshold(size_t nbytes)
{
    atomic_store(&threshold_bytes, nbytes);
}
