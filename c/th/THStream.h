/*
 * THStream.h -- copying blocks out to memory with non-temporal
 * ("streaming") stores, for results too large to stay in the cache.
 *
 * Note [Streaming stores]
 * ~~~~~~~~~~~~~~~~~~~~~~~
 * An ordinary store to a line that is not cached first reads the line
 * (read-for-ownership), so `c = a + b` over arrays larger than the
 * last-level cache moves four arrays' worth of memory (a, b, c read, c
 * written back) for three.  A non-temporal store fills a write-combining
 * buffer and sends whole lines to memory without reading them, and leaves
 * the cache to the inputs: one thread's `add(out=)` of 16M floats runs
 * ~1.3x faster with them on Zen 1, ~1.2x on Zen 4 (with the fused loops).
 * They lose when the result would have been read again from the cache, so
 * the pointwise driver streams only a result of at least
 * THStream_threshold() bytes (a quarter of the last-level cache a core
 * shares, as the GEMM's blocking detects it; measured in THStream.c), and
 * only when the result shares no memory with an input (an in-place
 * `a += b` has just loaded every line it writes).
 *
 * The binary and unary operators compute and stream in one loop,
 * TH_STREAM_CHUNK bytes at a time (Note [Fused streaming loops] in
 * THPointwise.c).  For the others the driver computes each block of
 * TH_STREAM_BLOCK bytes with the operator's ordinary loop into a buffer
 * that stays in L1, then THStream_copy moves the block out: every operator
 * and dtype streams, and the numbers are those of the ordinary loop (Note
 * [No FMA contraction]).
 * The copy comes in kernel families like the GEMM's (Note [GEMM kernel
 * families]): 64-byte stores (AVX-512), 32-byte (AVX2), 16-byte (SSE2, on
 * every x86-64) and, elsewhere, a plain memcpy.  Streaming stores are
 * weakly ordered: a thread calls THStream_fence after its last copy, before
 * anyone may read the result.
 */
#ifndef TH_STREAM_H
#define TH_STREAM_H

#include <stddef.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <emmintrin.h>
#endif

/* Bytes computed per block: a quarter of a 32 KiB L1 data cache. */
#define TH_STREAM_BLOCK 8192

/* Bytes a fused streaming loop computes before storing them: two cache
 * lines (Note [Fused streaming loops] in THPointwise.c).  The driver hands
 * such a loop a result that starts on a TH_STREAM_ALIGN boundary. */
#define TH_STREAM_CHUNK 128
#define TH_STREAM_ALIGN 64

/* dst[0, TH_STREAM_CHUNK) = chunk[0, TH_STREAM_CHUNK) with streaming
 * stores, dst aligned to TH_STREAM_ALIGN.  Inlined into loops that compute
 * `chunk` as a local array, which GCC then keeps in registers.  16-byte
 * SSE2 stores, which every x86-64 has (the loops are built for the
 * baseline); elsewhere a plain copy. */
static inline void
THStream_storeChunk(void *dst, const void *chunk)
{
#if defined(__x86_64__) && defined(__GNUC__)
    for (int q = 0; q < TH_STREAM_CHUNK / 16; q++) {
        _mm_stream_si128((__m128i *)dst + q,
                         _mm_loadu_si128((const __m128i *)chunk + q));
    }
#else
    memcpy(dst, chunk, TH_STREAM_CHUNK);
#endif
}

/* dst[0, n) = src[0, n) with streaming stores (plain ones for the bytes
 * before dst's first vector boundary and after its last). */
void THStream_copy(void *dst, const void *src, size_t n);
/* Orders the streaming stores before any later store (sfence). */
void THStream_fence(void);

/* The smallest result, in bytes, that the pointwise driver streams. */
size_t THStream_threshold(void);
/* Sets it (0 restores the default); tests use a small one. */
void THStream_setThreshold(size_t nbytes);

/* The copy family in use ("avx512", "avx2", "sse2" or "generic"), and
 * selecting one (-1 with a TH error when unknown or unsupported here). */
const char *THStream_kernelName(void);
int THStream_setKernel(const char *name);

#endif /* TH_STREAM_H */
