/*
 * memory_bandwidth.c -- what one core can read and write, for comparing
 * ember's memory-bound kernels with the machine's ceiling (ember issue 15).
 * Built and driven by tools/memory_bandwidth.py, which times each variant
 * against PyTorch's sum and NumPy's add on the same buffers.
 *
 * Read variants sum (or OR together) x[0, n); write variants compute
 * c = a + b.  Every variant takes any alignment: loads are unaligned,
 * streaming stores start at c's first 64-byte boundary.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define AVX2 __attribute__((target("avx2"), noinline))
#define AVX512 __attribute__((target("avx512f"), noinline))

static volatile float sink; /* keeps the sums alive */

AVX2 static float
total_of(__m256 v)
{
    float t[8];
    _mm256_storeu_ps(t, v);
    return ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
}

/* The read ceiling: loads ORed together, no arithmetic to wait for. */
AVX2 static void
read_or(const float *x, int64_t n)
{
    __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(),
                      _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int64_t i = 0; i + 32 <= n; i += 32) {
        for (int k = 0; k < 4; k++) {
            acc[k] = _mm256_or_si256(
                acc[k], _mm256_loadu_si256((const __m256i *)(x + i + 8 * k)));
        }
    }
    sink = total_of(_mm256_castsi256_ps(_mm256_or_si256(
        _mm256_or_si256(acc[0], acc[1]), _mm256_or_si256(acc[2], acc[3]))));
}

/* `streams` parts of x walked side by side, 8 ymm accumulators between
 * them, a prefetch `ahead` bytes ahead of each part (0: none). */
AVX2 static void
sum_ymm(const float *x, int64_t n, int streams, int64_t ahead)
{
    __m256 acc[8];
    for (int k = 0; k < 8; k++) {
        acc[k] = _mm256_setzero_ps();
    }
    const int per_stream = 8 / streams; /* vectors per part per step */
    const int64_t part = n / streams / 64 * 64;
    for (int64_t i = 0; i < part; i += 8 * per_stream) {
        for (int s = 0; s < streams; s++) {
            const float *p = x + s * part + i;
            for (int v = 0; v < per_stream; v++) {
                if (ahead != 0 && v % 2 == 0) { /* once per 64-byte line */
                    _mm_prefetch((const char *)(p + 8 * v) + ahead,
                                 _MM_HINT_T0);
                }
                acc[s * per_stream + v] = _mm256_add_ps(
                    acc[s * per_stream + v], _mm256_loadu_ps(p + 8 * v));
            }
        }
    }
    float rest = 0;
    for (int64_t i = streams * part; i < n; i++) {
        rest += x[i];
    }
    for (int k = 1; k < 8; k++) {
        acc[0] = _mm256_add_ps(acc[0], acc[k]);
    }
    sink = rest + total_of(acc[0]);
}

AVX512 static void
sum_zmm(const float *x, int64_t n)
{
    __m512 acc[8];
    for (int k = 0; k < 8; k++) {
        acc[k] = _mm512_setzero_ps();
    }
    int64_t i = 0;
    for (; i + 128 <= n; i += 128) {
        for (int k = 0; k < 8; k++) {
            acc[k] = _mm512_add_ps(acc[k], _mm512_loadu_ps(x + i + 16 * k));
        }
    }
    float rest = 0;
    for (; i < n; i++) {
        rest += x[i];
    }
    for (int k = 1; k < 8; k++) {
        acc[0] = _mm512_add_ps(acc[0], acc[k]);
    }
    sink = rest + _mm512_reduce_add_ps(acc[0]);
}

/* Elements before c's first 64-byte boundary (computed with plain stores). */
static int64_t
head_of(const float *c, int64_t n)
{
    int64_t head = (int64_t)((-(uintptr_t)c & 63) / sizeof(float));
    return head < n ? head : n;
}

__attribute__((noinline)) static void
add_plain(const float *a, const float *b, float *c, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        c[i] = a[i] + b[i];
    }
}

/* The sum streamed out 32 or 64 bytes at a time as it is computed. */
AVX2 static void
add_stream_ymm(const float *a, const float *b, float *c, int64_t n)
{
    int64_t i = head_of(c, n);
    add_plain(a, b, c, i);
    for (; i + 8 <= n; i += 8) {
        _mm256_stream_ps(c + i, _mm256_add_ps(_mm256_loadu_ps(a + i),
                                              _mm256_loadu_ps(b + i)));
    }
    add_plain(a + i, b + i, c + i, n - i);
    _mm_sfence();
}

AVX512 static void
add_stream_zmm(const float *a, const float *b, float *c, int64_t n)
{
    int64_t i = head_of(c, n);
    add_plain(a, b, c, i);
    for (; i + 16 <= n; i += 16) {
        _mm512_stream_ps(c + i, _mm512_add_ps(_mm512_loadu_ps(a + i),
                                              _mm512_loadu_ps(b + i)));
    }
    add_plain(a + i, b + i, c + i, n - i);
    _mm_sfence();
}

/* ember's fused loop: 128 bytes of sums into a local array that GCC keeps
 * in registers, streamed out with SSE2 stores. */
static void
add_stream_chunks(const float *a, const float *b, float *c, int64_t n)
{
    int64_t i = head_of(c, n);
    add_plain(a, b, c, i);
    for (; i + 32 <= n; i += 32) {
        float chunk[32];
        for (int j = 0; j < 32; j++) {
            chunk[j] = a[i + j] + b[i + j];
        }
        for (int q = 0; q < 8; q++) {
            _mm_stream_ps(c + i + 4 * q, _mm_loadu_ps(chunk + 4 * q));
        }
    }
    add_plain(a + i, b + i, c + i, n - i);
    _mm_sfence();
}

AVX512 static void
copy_stream_zmm(float *dst, const float *src, int64_t n)
{
    for (int64_t i = 0; i < n; i += 16) {
        _mm512_stream_ps(dst + i, _mm512_load_ps(src + i));
    }
}

/* ember's block path: 8 KB computed into L1, then streamed out. */
static void
add_blocks(const float *a, const float *b, float *c, int64_t n)
{
    _Alignas(64) float block[2048];
    int64_t i = head_of(c, n);
    add_plain(a, b, c, i);
    for (; i + 2048 <= n; i += 2048) {
        add_plain(a + i, b + i, block, 2048);
        copy_stream_zmm(c + i, block, 2048);
    }
    add_plain(a + i, b + i, c + i, n - i);
    _mm_sfence();
}

/* The variants by number, in the order of memory_bandwidth.py's lists. */
void
run_read(int variant, const float *x, int64_t n)
{
    switch (variant) {
    case 0: read_or(x, n); break;
    case 1: sum_ymm(x, n, 1, 0); break;
    case 2: sum_zmm(x, n); break;
    case 3: sum_ymm(x, n, 2, 0); break;
    case 4: sum_ymm(x, n, 4, 0); break;
    case 5: sum_ymm(x, n, 1, 1024); break;
    case 6: sum_ymm(x, n, 1, 8192); break;
    }
}

void
run_write(int variant, const float *a, const float *b, float *c, int64_t n)
{
    switch (variant) {
    case 0: add_plain(a, b, c, n); break;
    case 1: add_stream_ymm(a, b, c, n); break;
    case 2: add_stream_zmm(a, b, c, n); break;
    case 3: add_stream_chunks(a, b, c, n); break;
    case 4: add_blocks(a, b, c, n); break;
    }
}
