/*
 * THBlasBF16.c -- bfloat16 products on the CPU's bfloat16 dot-product
 * instruction (AVX512-BF16's vdpbf16ps), for THBlas_gemmTensor.  See
 * THBlas.h.
 *
 * Note [bfloat16 GEMM on the dot-product instruction]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * vdpbf16ps reads two vectors of 32 bfloat16 values as 16 pairs and adds
 * each pair's dot product into one float32 lane:
 *
 *     acc[j] += x[2j + 1] * y[2j + 1]  then  acc[j] += x[2j] * y[2j]
 *
 * The products are exact in float32 (8-bit significands), each addition
 * rounds to nearest even, and -- the instruction ignores MXCSR -- subnormal
 * inputs and results are flushed to zero, as in PyTorch's oneDNN kernels,
 * which use the same instruction.  So a bfloat16 GEMM is Note [GEMM
 * blocking]'s loop nest over *pairs* of k: packing stores A's two values
 * of row i at k = 2p and 2p + 1 as one 32-bit word, and B's two values of
 * column j at the same k as another; per pair step the micro-kernel loads
 * two vectors of B (32 columns) and broadcasts one word of A per row: a
 * 14 x 32 tile of float32 accumulators, as in the float32 AVX-512 kernel,
 * with twice the multiply-adds per instruction.  An odd k pads the last
 * pair with a zero.  C is float32 here; THBlas_gemmTensor rounds it into
 * bfloat16 once (Note [Half-precision matmul] in THBlas.c).
 *
 * Both operands pack alike: a micro-panel is `width` lines (A's rows or
 * B's columns) read along k, one word per line per pair step.  Where k
 * runs along memory in each line (a row-major A; the W.t() of a linear
 * layer as B) a word is one 32-bit load; where the lines are adjacent in
 * memory (a row-major B) two rows of B are interleaved by two permutes per
 * 32 columns; any other layout goes one value at a time.
 */
#include "THBlas.h"

#include "THGeneral.h"
#include "THParallel.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define BF16_MR 14 /* rows of the tile: 28 accumulators + 2 B vectors */
#define BF16_NR 32 /* columns: two vectors of 16 float32 */
/* Products with fewer multiply-adds than this stay on one thread (the
 * float32 GEMM's threshold). */
#define BF16_PARALLEL_WORK ((int64_t)1 << 18)

#if defined(__x86_64__)
#include <immintrin.h>
#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))
#define BF16_HAVE_KERNEL 1
#endif

static int64_t
min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static int64_t
round_up(int64_t x, int64_t multiple)
{
    return (x + multiple - 1) / multiple * multiple;
}

bool
THBlas_bf16DotAvailable(void)
{
#ifdef BF16_HAVE_KERNEL
    __builtin_cpu_init();
    return strcmp(THBlas_kernelName(), "avx512") == 0
           && __builtin_cpu_supports("avx512bw")
           && __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
}

#ifdef BF16_HAVE_KERNEL

/* ---- packing ---------------------------------------------------------------- */

/* The word holding the bfloat16 values lo (low half) and hi. */
static inline uint32_t
pair_word(uint16_t lo, uint16_t hi)
{
    return (uint32_t)lo | (uint32_t)hi << 16;
}

/* Where each pair is one 32-bit word in memory (elem_stride 1): for
 * lines l < width and pairs p below the returned count (at most whole),
 * dst[p * width_full + l] = the word at line l's value 2p.  Four lines
 * at a time go as 4 x 4 blocks of words, transposed in registers (the
 * float32 packing's Note [Packing by 4x4 transposes] in THBlas.c, on
 * words); the lines left over go a word at a time. */
BF16_TARGET static int64_t
pack_word_lines(int64_t whole, int width, const uint16_t *src,
                int64_t line_stride, int width_full, uint32_t *dst)
{
    int64_t blocked = whole / 4 * 4;
    int l = 0;
    for (; l + 4 <= width; l += 4) {
        const uint16_t *line = src + l * line_stride;
        for (int64_t p = 0; p < blocked; p += 4) {
            __m128 r0 = _mm_loadu_ps((const float *)(line + 2 * p));
            __m128 r1 = _mm_loadu_ps((const float *)(line + line_stride + 2 * p));
            __m128 r2 = _mm_loadu_ps((const float *)(line + 2 * line_stride + 2 * p));
            __m128 r3 = _mm_loadu_ps((const float *)(line + 3 * line_stride + 2 * p));
            _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
            uint32_t *out = dst + p * width_full + l;
            _mm_storeu_ps((float *)out, r0);
            _mm_storeu_ps((float *)(out + width_full), r1);
            _mm_storeu_ps((float *)(out + 2 * width_full), r2);
            _mm_storeu_ps((float *)(out + 3 * width_full), r3);
        }
    }
    for (; l < width; l++) {
        const uint16_t *line = src + l * line_stride;
        for (int64_t p = 0; p < blocked; p++) {
            uint32_t word;
            memcpy(&word, line + 2 * p, sizeof(word));
            dst[p * width_full + l] = word;
        }
    }
    return blocked;
}

/* One micro-panel: for lines l < width and pairs p < ceil(kc / 2),
 * dst[p * width_full + l] = (line_l[2p], line_l[2p + 1]), where line_l[q]
 * is src[l * line_stride + q * elem_stride], a value past kc is 0, and the
 * lines from width to width_full are zero. */
BF16_TARGET static void
pack_pairs(int64_t kc, int width_full, int width, const uint16_t *src,
           int64_t line_stride, int64_t elem_stride, uint32_t *dst)
{
    int64_t pairs = (kc + 1) / 2, whole = kc / 2;
    if (width == width_full && width == BF16_NR && line_stride == 1) {
        /* adjacent lines: interleave rows 2p and 2p + 1 (lanes j and
         * 32 + j of the permute's two sources) */
        const __m512i low = _mm512_set_epi16(
            47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8,
            39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
        const __m512i high = _mm512_add_epi16(low, _mm512_set1_epi16(16));
        for (int64_t p = 0; p < pairs; p++) {
            const uint16_t *row = src + 2 * p * elem_stride;
            __m512i even = _mm512_loadu_si512(row);
            __m512i odd = p < whole ? _mm512_loadu_si512(row + elem_stride)
                                    : _mm512_setzero_si512();
            _mm512_storeu_si512(dst + p * BF16_NR,
                                _mm512_permutex2var_epi16(even, low, odd));
            _mm512_storeu_si512(dst + p * BF16_NR + 16,
                                _mm512_permutex2var_epi16(even, high, odd));
        }
        return;
    }
    int64_t p_words = elem_stride == 1 ? pack_word_lines(whole, width, src,
                                                         line_stride,
                                                         width_full, dst)
                                       : 0;
    for (int l = 0; l < width; l++) {
        const uint16_t *line = src + l * line_stride;
        for (int64_t p = p_words; p < pairs; p++) {
            uint16_t hi = 2 * p + 1 < kc ? line[(2 * p + 1) * elem_stride] : 0;
            dst[p * width_full + l] = pair_word(line[2 * p * elem_stride], hi);
        }
    }
    for (int l = width; l < width_full; l++) {
        for (int64_t p = 0; p < pairs; p++) {
            dst[p * width_full + l] = 0;
        }
    }
}

/* ---- the micro-kernel ------------------------------------------------------- */

/* c[mr x nr] = beta * c + alpha * (a-panel @ b-panel) over `pairs` pair
 * steps; beta == 0 writes without reading c. */
BF16_TARGET static void
ukernel_bf16(int64_t pairs, const uint32_t *a, const uint32_t *b, float alpha,
             float beta, float *c, int64_t c_rs, int64_t c_cs, int mr, int nr)
{
    __m512 acc[BF16_MR][2];
    for (int i = 0; i < BF16_MR; i++) {
        acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    }
    _Pragma("GCC unroll 2")
    for (int64_t p = 0; p < pairs; p++) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + p * BF16_NR);
        __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + p * BF16_NR + 16);
        const uint32_t *a_step = a + p * BF16_MR;
        for (int i = 0; i < BF16_MR; i++) {
            __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a_step[i]);
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
        }
    }
    if (mr == BF16_MR && nr == BF16_NR && c_cs == 1) {
        for (int i = 0; i < BF16_MR; i++) {
            for (int v = 0; v < 2; v++) {
                float *out = c + i * c_rs + v * 16;
                __m512 value = _mm512_mul_ps(_mm512_set1_ps(alpha), acc[i][v]);
                if (beta != 0) {
                    value = _mm512_add_ps(
                        value, _mm512_mul_ps(_mm512_set1_ps(beta),
                                             _mm512_loadu_ps(out)));
                }
                _mm512_storeu_ps(out, value);
            }
        }
        return;
    }
    float tile[BF16_MR][BF16_NR];
    for (int i = 0; i < BF16_MR; i++) {
        _mm512_storeu_ps(tile[i], acc[i][0]);
        _mm512_storeu_ps(tile[i] + 16, acc[i][1]);
    }
    for (int i = 0; i < mr; i++) {
        for (int j = 0; j < nr; j++) {
            float *out = c + i * c_rs + j * c_cs;
            *out = beta == 0 ? alpha * tile[i][j]
                             : alpha * tile[i][j] + beta * *out;
        }
    }
}

/* ---- blocking and the loop nest --------------------------------------------- */

typedef struct {
    int64_t kc, mc, nc; /* kc: values of k (even); mc, nc: rows, columns */
} BF16Blocking;

/* Note [GEMM blocking from the cache sizes] in THBlas.c, for 2-byte
 * values, except KC: the A block in half of L2 and the B block in half of
 * L3 as there, but the B micro-panel in a quarter of L2, not half of L1.
 * Per pair step the kernel reads 128 bytes of B for 28 dot products
 * (about 28 cycles), which L2 serves easily, so what bounds KC is the C
 * tile's loads and stores, once per KC block.  On the Zen 4 this was
 * measured on (32K L1, 1M L2), one thread, 1024 x 1024 x 1024: KC 256
 * (the L1 rule) ran at 139-154 GFLOP/s, 512 at 171-176 and 1024 at 183-187
 * (thread CPU time, best of 25, machine shared). */
static BF16Blocking
bf16_blocking(void)
{
    int64_t caches[3];
    THBlas_cacheSizes(caches);
    BF16Blocking b;
    b.kc = caches[1] / 4 / (BF16_NR * 2) / 16 * 16;
    b.kc = b.kc < 64 ? 64 : b.kc > 1024 ? 1024 : b.kc;
    b.mc = caches[1] / 2 / (b.kc * 2) / BF16_MR * BF16_MR;
    b.mc = b.mc < BF16_MR ? BF16_MR : b.mc > 4088 ? 4088 : b.mc;
    b.nc = caches[2] / 2 / (b.kc * 2) / BF16_NR * BF16_NR;
    b.nc = b.nc < BF16_NR ? BF16_NR : b.nc > 16384 ? 16384 : b.nc;
    return b;
}

typedef struct {
    int64_t m, n, k;
    float alpha, beta;
    const uint16_t *a, *b;
    float *c;
    int64_t a_rs, a_cs, b_rs, b_cs, c_rs, c_cs;
} BF16Product;

/* Packs B's micro-panels [panel0, panel1) of the block at columns jc
 * (nc wide) and k pc (kc long) into b_pack (the block's layout). */
BF16_TARGET static void
pack_b_panels(const BF16Product *g, int64_t jc, int64_t nc, int64_t pc,
              int64_t kc, int64_t panel0, int64_t panel1, uint32_t *b_pack)
{
    int64_t pairs = (kc + 1) / 2;
    const uint16_t *b_block = g->b + pc * g->b_rs + jc * g->b_cs;
    for (int64_t panel = panel0; panel < panel1; panel++) {
        int64_t jr = panel * BF16_NR;
        pack_pairs(kc, BF16_NR, (int)min64(BF16_NR, nc - jr),
                   b_block + jr * g->b_cs, g->b_cs, g->b_rs,
                   b_pack + jr * pairs);
    }
}

/* C's rows [row0, row1) and columns [jc, jc + nc) from the packed B block
 * at k pc: packs A a block of rows at a time into a_pack and runs the
 * tiles. */
BF16_TARGET static void
multiply_packed_b(const BF16Product *g, const BF16Blocking *bl, int64_t row0,
                  int64_t row1, int64_t jc, int64_t nc, int64_t pc,
                  int64_t kc, const uint32_t *b_pack, uint32_t *a_pack)
{
    int64_t pairs = (kc + 1) / 2;
    float beta_block = pc == 0 ? g->beta : 1.0f;
    int64_t mc_step = THBlas_balancedStep(row1 - row0, bl->mc, BF16_MR);
    for (int64_t ic = row0; ic < row1; ic += mc_step) {
        int64_t mc = min64(mc_step, row1 - ic);
        const uint16_t *a_block = g->a + ic * g->a_rs + pc * g->a_cs;
        for (int64_t ir = 0; ir < mc; ir += BF16_MR) {
            pack_pairs(kc, BF16_MR, (int)min64(BF16_MR, mc - ir),
                       a_block + ir * g->a_rs, g->a_rs, g->a_cs,
                       a_pack + ir * pairs);
        }
        for (int64_t jr = 0; jr < nc; jr += BF16_NR) {
            for (int64_t ir = 0; ir < mc; ir += BF16_MR) {
                float *tile = g->c + (ic + ir) * g->c_rs + (jc + jr) * g->c_cs;
                ukernel_bf16(pairs, a_pack + ir * pairs, b_pack + jr * pairs,
                             g->alpha, beta_block, tile, g->c_rs, g->c_cs,
                             (int)min64(BF16_MR, mc - ir),
                             (int)min64(BF16_NR, nc - jr));
            }
        }
    }
}

/* THBlasLoopNest's steps, on a BF16Nest. */
typedef struct {
    const BF16Product *g;
    const BF16Blocking *bl;
} BF16Nest;

static void
pack_b_step(void *ctx, const THBlasBlockOfB *block, int64_t panel0,
            int64_t panel1, void *b_pack)
{
    const BF16Nest *bn = ctx;
    pack_b_panels(bn->g, block->jc, block->nc, block->pc, block->kc, panel0,
                  panel1, b_pack);
}

static void
multiply_step(void *ctx, const THBlasBlockOfB *block, int64_t row0,
              int64_t row1, const void *b_pack, void *a_pack)
{
    const BF16Nest *bn = ctx;
    multiply_packed_b(bn->g, bn->bl, row0, row1, block->jc, block->nc,
                      block->pc, block->kc, b_pack, a_pack);
}

/* Note [GEMM blocking]'s loop nest for *bn's product, k >= 1. */
static THBlasLoopNest
loop_nest_of(const BF16Nest *bn)
{
    const BF16Product *g = bn->g;
    const BF16Blocking *bl = bn->bl;
    int64_t pairs = (min64(g->k, bl->kc) + 1) / 2;
    return (THBlasLoopNest){
        .m = g->m, .n = g->n, .k = g->k,
        .mr = BF16_MR, .nr = BF16_NR,
        .nc = bl->nc, .kc_step = THBlas_balancedStep(g->k, bl->kc, 16),
        .a_bytes = (size_t)(round_up(min64(g->m, bl->mc), BF16_MR) * pairs * 4),
        .b_bytes = (size_t)(round_up(min64(g->n, bl->nc), BF16_NR) * pairs * 4),
        .pack_b = pack_b_step,
        .multiply = multiply_step,
        .ctx = (void *)bn,
    };
}

/* k == 0: c = beta * c (beta == 0 writes zeros without reading c). */
static void
scale_c(const BF16Product *g)
{
    for (int64_t i = 0; i < g->m; i++) {
        for (int64_t j = 0; j < g->n; j++) {
            float *out = g->c + i * g->c_rs + j * g->c_cs;
            *out = g->beta == 0 ? 0.0f : g->beta * *out;
        }
    }
}

/* ---- threads ---------------------------------------------------------------- */

/* The batch's products cut into units -- bands of MR rows of one product
 * (or NR columns, when it is wider than tall) -- numbered product after
 * product, so that THParallel_for shares out one range of units per
 * thread whether the batch has one large product or many small ones; a
 * thread runs each product's part of its range as one band, with one
 * workspace for all of them. */
typedef struct {
    BF16Product first; /* product 0; product i is offset by offsets[][i] */
    const int64_t *offsets[3];
    BF16Blocking blocking;
    bool split_rows;
    int64_t unit, units_per_product;
    atomic_bool out_of_memory;
} BF16Job;

static BF16Product
band_of(const BF16Job *job, int64_t product, int64_t first_unit,
        int64_t end_unit)
{
    BF16Product g = job->first;
    if (job->offsets[0] != NULL) {
        g.a += job->offsets[0][product];
        g.b += job->offsets[1][product];
        g.c += job->offsets[2][product];
    }
    int64_t first = first_unit * job->unit;
    if (job->split_rows) {
        g.m = min64(end_unit * job->unit, g.m) - first;
        g.a += first * g.a_rs;
        g.c += first * g.c_rs;
    } else {
        g.n = min64(end_unit * job->unit, g.n) - first;
        g.b += first * g.b_cs;
        g.c += first * g.c_cs;
    }
    return g;
}

static void
run_units(int64_t begin, int64_t end, void *ctx)
{
    BF16Job *job = ctx;
    /* one workspace for every band: they all have the first's shape or
     * a smaller one */
    BF16Nest first = {&job->first, &job->blocking};
    void *a_pack = NULL, *b_pack = NULL;
    bool packed = job->first.k > 0;
    if (packed) {
        THBlasLoopNest nest = loop_nest_of(&first);
        if (!THBlas_allocPackBuffers(&a_pack, nest.a_bytes, &b_pack,
                                     nest.b_bytes)) {
            atomic_store(&job->out_of_memory, true);
            return;
        }
    }
    int64_t per = job->units_per_product;
    for (int64_t u = begin; u < end;) {
        int64_t product = u / per, first_unit = u % per;
        int64_t stop = min64(end - product * per, per);
        BF16Product band = band_of(job, product, first_unit, stop);
        if (packed) {
            BF16Nest bn = {&band, &job->blocking};
            THBlasLoopNest band_nest = loop_nest_of(&bn);
            THBlas_runLoopNest(&band_nest, a_pack, b_pack);
        } else {
            scale_c(&band);
        }
        u = product * per + stop;
    }
    free(a_pack);
    free(b_pack);
}

#endif /* BF16_HAVE_KERNEL */

int
THBlas_gemmBF16Batched(int64_t batch, int64_t m, int64_t n, int64_t k,
                       float alpha, THBlasMatrix a, const int64_t *a_offsets,
                       THBlasMatrix b, const int64_t *b_offsets, float beta,
                       THBlasMatrix c, const int64_t *c_offsets)
{
#ifdef BF16_HAVE_KERNEL
    if (!THBlas_bf16DotAvailable()) {
        return THError_set(TH_ERR_RUNTIME,
                           "THBlas_gemmBF16Batched: the CPU has no bfloat16 "
                           "dot-product instruction in use");
    }
    if (batch == 0 || m == 0 || n == 0) {
        return 0;
    }
    if (alpha == 0) {
        k = 0; /* A and B are not read (THBlas.h) */
    }
    BF16Job job = {
        .first = {m, n, k, alpha, beta, (const uint16_t *)a.data,
                  (const uint16_t *)b.data, (float *)c.data, a.row_stride,
                  a.col_stride, b.row_stride, b.col_stride, c.row_stride,
                  c.col_stride},
        .offsets = {a_offsets, b_offsets, c_offsets},
        .blocking = bf16_blocking(),
        .split_rows = m >= n,
    };
    int64_t work = m * n * (k > 0 ? k : 1);
    if (batch == 1 && k > 0 && job.split_rows && work >= BF16_PARALLEL_WORK
        && THParallel_getNumThreads() > 1) {
        /* Note [One packed B for all threads] in THBlas.c */
        BF16Nest whole = {&job.first, &job.blocking};
        THBlasLoopNest nest = loop_nest_of(&whole);
        return THBlas_runLoopNest(&nest, NULL, NULL)
                   ? 0
                   : THError_set(TH_ERR_MEMORY, "out of memory allocating "
                                                "GEMM packing buffers");
    }
    job.unit = job.split_rows ? BF16_MR : BF16_NR;
    job.units_per_product = ((job.split_rows ? m : n) + job.unit - 1) / job.unit;
    atomic_init(&job.out_of_memory, false);
    int64_t unit_work = job.unit * (job.split_rows ? n : m) * (k > 0 ? k : 1);
    THParallel_for(batch * job.units_per_product,
                   BF16_PARALLEL_WORK / 2 / unit_work + 1, run_units, &job);
    if (atomic_load(&job.out_of_memory)) {
        return THError_set(TH_ERR_MEMORY,
                           "out of memory allocating GEMM packing buffers");
    }
    return 0;
#else
    (void)batch, (void)m, (void)n, (void)k, (void)alpha, (void)a;
    (void)a_offsets, (void)b, (void)b_offsets, (void)beta, (void)c;
    (void)c_offsets;
    return THError_set(TH_ERR_RUNTIME,
                       "THBlas_gemmBF16Batched: no bfloat16 dot-product "
                       "kernel on this architecture");
#endif
}
