/*
 * test_stream.c -- the streaming-store copy of THStream.h in every family
 * this CPU runs: every alignment of source and destination and lengths
 * around the vector widths, with guard bytes on both sides.
 */
#include "th_test.h"

#define GUARD 64
#define MAX_LEN 300

static void
check_copy(int dst_offset, int src_offset, size_t n)
{
    _Alignas(64) unsigned char dst[GUARD + 64 + MAX_LEN + GUARD];
    _Alignas(64) unsigned char src[64 + MAX_LEN];
    for (size_t i = 0; i < sizeof(src); i++) {
        src[i] = (unsigned char)(i * 7 + 1);
    }
    memset(dst, 0xA5, sizeof(dst));
    unsigned char *to = dst + GUARD + dst_offset;
    THStream_copy(to, src + src_offset, n);
    THStream_fence();
    CHECK_MSG(memcmp(to, src + src_offset, n) == 0,
              "%s: dst+%d src+%d n=%zu copied wrong", THStream_kernelName(),
              dst_offset, src_offset, n);
    bool guards_intact = true;
    for (unsigned char *p = dst; p < to; p++) {
        guards_intact &= *p == 0xA5;
    }
    for (unsigned char *p = to + n; p < dst + sizeof(dst); p++) {
        guards_intact &= *p == 0xA5;
    }
    CHECK_MSG(guards_intact, "%s: dst+%d src+%d n=%zu wrote outside",
              THStream_kernelName(), dst_offset, src_offset, n);
}

static void
test_stream_copy_every_family(void)
{
    static const char *const families[] = {"generic", "sse2", "avx2",
                                           "avx512"};
    static const size_t lengths[] = {0, 1, 15, 16, 17, 31, 32, 33, 63, 64,
                                     65, 127, 128, 129, 191, 255, MAX_LEN};
    const char *saved = THStream_kernelName();
    int ran = 0;
    for (int f = 0; f < 4; f++) {
        if (THStream_setKernel(families[f]) < 0) {
            THError_clear(); /* not on this CPU */
            continue;
        }
        ran++;
        for (int dst_offset = 0; dst_offset < 64; dst_offset += 3) {
            for (int src_offset = 0; src_offset < 64; src_offset += 13) {
                for (size_t l = 0; l < sizeof(lengths) / sizeof(*lengths);
                     l++) {
                    check_copy(dst_offset, src_offset, lengths[l]);
                }
            }
        }
    }
    CHECK(ran >= 1); /* "generic" runs everywhere */
    CHECK_OK(THStream_setKernel(saved));
    CHECK(THStream_setKernel("avx1024") < 0);
    THError_clear();
}

static void
test_stream_threshold(void)
{
    size_t saved = THStream_threshold();
    CHECK(saved > 0);
    THStream_setThreshold(4096);
    CHECK_EQ_INT(THStream_threshold(), 4096);
    THStream_setThreshold(0); /* back to the default */
    CHECK_EQ_INT(THStream_threshold(), saved);
    int64_t caches[3]; /* the default: a quarter of the L3 the GEMM blocks for */
    THBlas_cacheSizes(caches);
    CHECK_EQ_INT(THStream_threshold(), caches[2] / 4);
}

TH_TEST_SUITE(stream) = {
    TH_TEST(test_stream_copy_every_family),
    TH_TEST(test_stream_threshold),
    TH_TEST_END,
};
