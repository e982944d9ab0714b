/*
 * THBlas.c -- GEMM: a packed, cache-blocked kernel for float32/float64
 * matrix products, unpacked dot/axpy kernels for their matrix-vector
 * shapes and blocks of dot products for few-column ones, and a simple
 * row-wise kernel for small products and the other dtypes.  See THBlas.h.
 *
 * Note [GEMM blocking]
 * ~~~~~~~~~~~~~~~~~~~~
 * The floating kernel is the GotoBLAS/BLIS loop nest:
 *
 *   for jc in steps of NC                       (columns of C and B)
 *     for pc in steps of KC                     (the summed dimension)
 *       pack B[pc:pc+KC, jc:jc+NC] into KC x NR micro-panels    (L3)
 *       for ic in steps of MC                   (rows of C and A)
 *         pack A[ic:ic+MC, pc:pc+KC] into MR x KC micro-panels  (L2)
 *         for jr in steps of NR, ir in steps of MR:
 *           micro-kernel: C[MR x NR tile] = beta' C + alpha A-panel @ B-panel
 *
 * Packing copies each block into the exact order the micro-kernel reads it
 * (A: MR values of one column after another; B: NR values of one row after
 * another), from any strides, and pads the edge panels with zeros; so the
 * micro-kernel always runs full MR x NR tiles over contiguous, aligned
 * memory and only its final store handles a partial tile.  The MR x NR
 * accumulators stay in vector registers for all KC steps: per step it loads
 * NR values of B, broadcasts MR values of A and issues MR * NR / VLEN
 * fused multiply-adds.  beta' is the caller's beta for the first KC block
 * and 1 for the following ones, which accumulate into C.
 *
 * Note [GEMM kernel families]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * The micro-kernel is written once with GCC vector extensions and compiled
 * three times: for AVX-512 (16 floats a vector), for AVX2+FMA (8) and as
 * portable 16-byte vectors, each inside a function carrying its own
 * __attribute__((target)).  The build therefore needs no -march flag, and
 * the family is picked once, on first use, with __builtin_cpu_supports.
 * NR is two vectors in every family; MR is each family's own: 6 for AVX2
 * (12 accumulators, two B vectors and one broadcast use 15 of its 16
 * vector registers) and for the portable build, 14 for AVX-512 (28 + 2 + 1
 * of its 32: the tile of BLIS's Skylake-X kernels, 14 x 32 floats or
 * 14 x 16 doubles, here with the vectors along the rows of C).  Each
 * family also has a narrow tile, taken when it pads m to fewer rows (Note
 * [The narrow tile]; AVX-512 has a third).  The AVX-512 kernel prefetches C's tile like the others but adds
 * no software prefetch of the packed panels (BLIS's does): the hardware
 * prefetchers follow the panels' linear streams (on a Zen 4 the kernel
 * runs near its L1 rate with A streaming from L2).  The AVX-512 kernel
 * reads A by embedded broadcasts (Note [Broadcast operands of the
 * micro-kernel]).  The packing and loop code is shared: it takes MR, NR and the
 * blocks from the family in use (Note [GEMM blocking from the cache
 * sizes]).  The matrix-vector kernels (dot, dot4, axpy4) and the
 * few-column dot_block come in the same three builds.
 */
#include "THBlas.h"

#include "THParallel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GEMM_ALIGN 64 /* a cache line, and one AVX-512 register */

/* Products with fewer multiply-adds than this skip packing. */
#define GEMM_SMALL_WORK 4096
/* Products with at most this many rows read B's panels in place (Note
 * [GEMM small products]). */
#define GEMM_FEW_ROWS 32
/* Products with at most this many panels of B columns read A in place
 * when its rows are contiguous (Note [GEMM small products]). */
#define GEMM_FEW_PANELS 4
/* Micro-kernels with fewer k steps than this do not prefetch C's tile
 * (Note [Prefetching C's tile]). */
#define GEMM_PREFETCH_C_MIN_K 128
/* Packing buffers up to this size (bytes) live on the stack. */
#define GEMM_STACK_WORKSPACE (16 << 10)
/* Products with fewer multiply-adds than this stay on one thread. */
#define GEMM_PARALLEL_WORK ((int64_t)1 << 18)

/* ---- micro-kernels (Note [GEMM kernel families]) ------------------------- */

typedef float v4sf __attribute__((vector_size(16)));
typedef float v8sf __attribute__((vector_size(32)));
typedef float v16sf __attribute__((vector_size(64)));
typedef double v2df __attribute__((vector_size(16)));
typedef double v4df __attribute__((vector_size(32)));
typedef double v8df __attribute__((vector_size(64)));

/* Note [Vector kernels call no plain code] in THGeneral.h: a kernel of a
 * family wider than SSE (VT wider than 16 bytes) ends with vzeroupper, so
 * that the baseline code it returns to never runs with the upper halves
 * in use.  Inline, as an asm statement, so it is one instruction at the
 * kernel's end and not a call (I measured no difference on the smallest
 * products: the two were within the timer's noise), and because the
 * builtin does not compile in the portable family (the test on sizeof(VT)
 * drops it there). */
#if defined(__x86_64__) && defined(__GNUC__)
#define TH_ZERO_UPPER()                                                    \
    __asm__ volatile("vzeroupper" ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", \
                     "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", \
                     "xmm12", "xmm13", "xmm14", "xmm15")
#else
#define TH_ZERO_UPPER() ((void)0)
#endif
#define TH_LEAVE_WIDE_VECTORS(VT)                                          \
    do {                                                                   \
        if (sizeof(VT) > 16) {                                             \
            TH_ZERO_UPPER();                                               \
        }                                                                  \
    } while (0)

/* row[j * cs] = values[j] + beta * row[j * cs] for j < n (beta == 0: row
 * is not read): the micro-kernel's store of a partial tile's row.  Inlined,
 * so that it runs as code of the kernel's own family: Note [Vector
 * kernels call no plain code]. */
#define TH_DEFINE_STORE_PARTIAL_ROW(T)                                     \
    __attribute__((always_inline)) static inline void store_partial_row_##T( \
        T *row, int64_t cs, int n, const T *values, T beta)                \
    {                                                                      \
        for (int j = 0; j < n; j++) {                                      \
            T *out = row + j * cs;                                         \
            *out = beta == 0 ? values[j] : values[j] + beta * *out;        \
        }                                                                  \
    }
TH_DEFINE_STORE_PARTIAL_ROW(float)
TH_DEFINE_STORE_PARTIAL_ROW(double)

/* c[MR x NR tile] = beta * c + alpha * (a-panel @ b-panel) over kc steps;
 * only the top-left mr x nr part of the tile is stored (edge tiles).
 * The A panel is packed (MR values of one column after another; a_rs is
 * not read), or with A_IN_PLACE read from A's own rows, a_rs elements
 * apart and contiguous along k (Note [GEMM small products]), or with
 * A_TAPS read in place with column p's first MR / 2 values from
 * a + a_taps[p] on and its last MR / 2 from a_rs further (MR / 2: one run
 * of MR values; Note [GEMM with a tapped A], Note [Two lines in one
 * block]; a_taps is not read otherwise).
 * beta == 0 writes without reading c.  The B panel's rows are b_rs
 * elements apart: NR when packed, B's own row stride when a small product
 * reads B in place (Note [GEMM small products]).  B and C may be anywhere,
 * so their vectors move through memcpy, which compiles to one unaligned
 * vector load or store (as fast as an aligned one on aligned data). */
#define TH_DEFINE_MICROKERNEL(T, VT, family, MR, A_IN_PLACE, A_TAPS,       \
                              EMBEDDED_BROADCASTS, target_attr, MADD)     \
    TH_DEFINE_EDGE_MICROKERNEL(T, VT, family, MR, A_IN_PLACE, A_TAPS, 0, 0, \
                               EMBEDDED_BROADCASTS, target_attr, MADD)
/* With EDGE_FIRST or EDGE_LAST (masks of rows, for A_TAPS), the k steps
 * come in threes, and the rows in EDGE_FIRST are skipped in the first of
 * each three, those in EDGE_LAST in the third (Note [Skipping a line's
 * edges]); kc is then a multiple of 3. */
#define TH_DEFINE_EDGE_MICROKERNEL(T, VT, family, MR, A_IN_PLACE, A_TAPS,  \
                                   EDGE_FIRST, EDGE_LAST,                  \
                                   EMBEDDED_BROADCASTS, target_attr, MADD) \
    target_attr static void ukernel_##T##_##family(                        \
        int64_t kc, const T *a, int64_t a_rs, const int64_t *a_taps,       \
        const T *b, int64_t b_rs, T alpha, T beta, T *c, int64_t c_rs,     \
        int64_t c_cs, int mr, int nr)                                      \
    {                                                                      \
        enum { VLEN = sizeof(VT) / sizeof(T), NR = 2 * VLEN };             \
        _Static_assert(NR <= THBLAS_MAX_NR, "a panel wider than THBLAS_MAX_NR"); \
        VT acc[MR][2]; /* Note [Registers of the micro-kernel] */          \
        /* A_IN_PLACE: row i at a + a_row[i], rows past mr repeat row 0 */ \
        int64_t a_row[MR];                                                 \
        _Pragma("GCC unroll 16")                                           \
        for (int i = 0; i < MR; i++) {                                     \
            a_row[i] = (i < mr ? i : 0) * a_rs;                            \
        }                                                                  \
        /* C is needed only at the end: Note [Prefetching C's tile] */    \
        for (int i = 0; i < (kc >= GEMM_PREFETCH_C_MIN_K ? mr : 0); i++) {  \
            __builtin_prefetch(c + i * c_rs, 1);                           \
            __builtin_prefetch(c + i * c_rs + (nr - 1) * c_cs, 1);         \
        }                                                                  \
        _Pragma("GCC unroll 16")                                           \
        for (int i = 0; i < MR; i++) {                                     \
            acc[i][0] = acc[i][1] = (VT){0};                               \
        }                                                                  \
        for (int64_t p = 0; (EDGE_FIRST | EDGE_LAST) != 0 && p < kc; p += 3) { \
            _Pragma("GCC unroll 3")                                        \
            for (int j = 0; j < 3; j++) {                                  \
                VT b0, b1;                                                 \
                memcpy(&b0, b + (p + j) * b_rs, sizeof(VT));               \
                memcpy(&b1, b + (p + j) * b_rs + VLEN, sizeof(VT));        \
                const T *a0 = a + a_taps[p + j], *a1 = a0;                 \
                const T *h0 = a0 + (a_rs - MR / 2), *h1 = h0;             \
                if (EMBEDDED_BROADCASTS) {                                 \
                    __asm__("" : "+r"(a1));                                \
                    __asm__("" : "+r"(h1));                                \
                }                                                          \
                unsigned skipped = j == 0 ? (EDGE_FIRST) : j == 2 ? (EDGE_LAST) : 0u; \
                _Pragma("GCC unroll 16")                                   \
                for (int i = 0; i < MR; i++) {                             \
                    if (skipped >> i & 1) {                                \
                        continue;                                          \
                    }                                                      \
                    T x0 = i < MR / 2 ? a0[i] : h0[i];                     \
                    T x1 = i < MR / 2 ? a1[i] : h1[i];                     \
                    acc[i][0] = MADD(x0 - (VT){0}, b0, acc[i][0]);         \
                    acc[i][1] = MADD(x1 - (VT){0}, b1, acc[i][1]);         \
                }                                                          \
                /* b0, b1 live to here: Note [Skipping a line's edges] */ \
                __asm__("" : : "v"(b0), "v"(b1));                          \
            }                                                              \
        }                                                                  \
        _Pragma("GCC unroll 4")                                            \
        for (int64_t p = 0; (EDGE_FIRST | EDGE_LAST) == 0 && p < kc; p++) { \
            VT b0, b1;                                                     \
            memcpy(&b0, b + p * b_rs, sizeof(VT));                         \
            memcpy(&b1, b + p * b_rs + VLEN, sizeof(VT));                  \
            if (A_IN_PLACE) {                                              \
                /* one pointer, MR offsets; column1 as a1 below */        \
                const T *column = a + p, *column1 = column;                \
                if (EMBEDDED_BROADCASTS) {                                 \
                    __asm__("" : "+r"(column1));                           \
                }                                                          \
                _Pragma("GCC unroll 16")                                   \
                for (int i = 0; i < MR; i++) {                             \
                    VT a0 = column[a_row[i]] - (VT){0};                    \
                    VT a1 = column1[a_row[i]] - (VT){0};                   \
                    acc[i][0] = MADD(a0, b0, acc[i][0]);                   \
                    acc[i][1] = MADD(a1, b1, acc[i][1]);                   \
                }                                                          \
                continue;                                                  \
            }                                                              \
            /* a1 reads what a0 does, as loads of its own: Note          \
             * [Broadcast operands of the micro-kernel] */                 \
            const T *a0 = A_TAPS ? a + a_taps[p] : a + p * MR, *a1 = a0;   \
            /* A_TAPS: rows MR / 2 on as rows h0[i], a_rs past a0[i] */    \
            const T *h0 = A_TAPS ? a0 + (a_rs - MR / 2) : a0, *h1 = h0;    \
            if (EMBEDDED_BROADCASTS) {                                     \
                __asm__("" : "+r"(a1));                                    \
                __asm__("" : "+r"(h1));                                    \
            }                                                              \
            _Pragma("GCC unroll 16")                                       \
            for (int i = 0; i < MR; i++) {                                 \
                T x0 = i < MR / 2 ? a0[i] : h0[i];                         \
                T x1 = i < MR / 2 ? a1[i] : h1[i];                         \
                acc[i][0] = MADD(x0 - (VT){0}, b0, acc[i][0]);             \
                acc[i][1] = MADD(x1 - (VT){0}, b1, acc[i][1]);             \
            }                                                              \
        }                                                                  \
        /* acc by constant indices only: Note [Registers of the         \
         * micro-kernel] */                                                \
        bool whole_rows = nr == NR && c_cs == 1;                           \
        _Pragma("GCC unroll 16")                                           \
        for (int i = 0; i < MR; i++) {                                     \
            if (i == mr) {                                                 \
                break;                                                     \
            }                                                              \
            T *row = c + i * c_rs;                                         \
            VT out0 = alpha * acc[i][0], out1 = alpha * acc[i][1];         \
            if (!whole_rows) {                                             \
                T lanes[NR];                                               \
                memcpy(lanes, &out0, sizeof(VT));                          \
                memcpy(lanes + VLEN, &out1, sizeof(VT));                   \
                store_partial_row_##T(row, c_cs, nr, lanes, beta);         \
                continue;                                                  \
            }                                                              \
            if (beta != 0) {                                               \
                VT old0, old1;                                             \
                memcpy(&old0, row, sizeof(VT));                            \
                memcpy(&old1, row + VLEN, sizeof(VT));                     \
                out0 += beta * old0;                                       \
                out1 += beta * old1;                                       \
            }                                                              \
            memcpy(row, &out0, sizeof(VT));                                \
            memcpy(row + VLEN, &out1, sizeof(VT));                         \
        }                                                                  \
        TH_LEAVE_WIDE_VECTORS(VT);                                         \
    }

#define TH_NO_TARGET
#define TH_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define TH_TARGET_AVX512 __attribute__((target("avx512f,avx2,fma")))

/* Note [Explicit FMA in the GEMM kernels]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * The library is built with -ffp-contract=off (Note [No FMA contraction]
 * in THFormulas.h), so `acc += a * b` compiles to a multiply and an add:
 * twice the instructions of one fused multiply-add, which capped the
 * micro-kernel at about two thirds of the BLAS libraries' rate.  A GEMM's
 * result already depends on its blocking, so the kernels that sum products
 * ask for the fused instruction by name where the family has it; the
 * portable family keeps the separate multiply and add.  MADD(x, y, acc) is
 * acc + x * y. */
#define MADD_PLAIN(x, y, acc) ((acc) + (x) * (y))
#if defined(__x86_64__)
#include <immintrin.h>
#define MADD_AVX2_FLOAT(x, y, acc) _mm256_fmadd_ps((x), (y), (acc))
#define MADD_AVX2_DOUBLE(x, y, acc) _mm256_fmadd_pd((x), (y), (acc))
#define MADD_AVX512_FLOAT(x, y, acc) _mm512_fmadd_ps((x), (y), (acc))
#define MADD_AVX512_DOUBLE(x, y, acc) _mm512_fmadd_pd((x), (y), (acc))
#endif

/* Note [Broadcast operands of the micro-kernel]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * Each k step multiplies one value of A, broadcast across a vector, into
 * both vectors of B's row.  GCC loads the broadcast once into a register
 * (vbroadcastss) and shares it between the two multiply-adds: one more
 * instruction per two.  AVX-512 can instead read the value straight from
 * memory into each multiply-add (an embedded broadcast, {1to16}), which
 * costs only a load, and the loads are not the bound; GCC folds a
 * broadcast into the instruction only when it has one use, so the AVX-512
 * kernels read the second use through a copy of the pointer that an
 * empty asm hides from the compiler (EMBEDDED_BROADCASTS).  On the Zen 4
 * this was measured on, that is a few percent of the micro-kernel's rate
 * from L1.  The kernel that reads A in place (Note [GEMM small products])
 * does the same with its column pointer: its broadcasts, through a base
 * and an index register each, had kept the shared register, and a batch
 * of 8 x 64x64x64 float32 products ran ~40 us of micro-kernel time where
 * the embedded broadcasts run ~37.5 (one thread, thread CPU time, the
 * kernel alone; 41.8 -> 38.5 us through matmul, NumPy ~38.8).  AVX2 has
 * no embedded broadcast, so its kernels keep the shared register.
 *
 * Note [Registers of the micro-kernel]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * The tile's accumulators must stay in vector registers from the first k
 * step to the store.  GCC keeps an array in registers (scalar replacement
 * of aggregates) only if nothing takes its address and every access has
 * a constant index when that pass runs, which is before the ordinary
 * unrolling of loops: so each loop over the tile's rows carries a
 * `#pragma GCC unroll` (those run earlier), and a partial tile's row
 * leaves through a copy (`lanes`, to store_partial_row) instead of a
 * memcpy of acc.  When the kernel copied acc into a scalar tile for the
 * partial store, acc lived on the stack in every call: 2 * MR vector
 * stores to zero it, loads before the k loop, stores after it and loads
 * again to write C, a store-to-load round trip per accumulator. */

/* Note [Prefetching C's tile]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * The micro-kernel reads or writes C only after its k loop, so it asks
 * for the tile's lines first (two prefetches a row) and the loop hides
 * their latency: without them 1024^3 float32 ran ~9% slower.  A kernel
 * with few k steps has little latency to hide and the prefetches, a
 * loop over the rows of the tile, are a visible share of its time: a
 * batch of 8 x 64x64x64 float32 (k = 64; C's lines are in cache from
 * the previous call) runs 1-2% faster without them (C harness, one
 * thread, thread CPU time, both builds alternating in one process:
 * best of 300 rounds 37.0 -> 36.5-36.8 us, median ratio 0.98-0.99; a
 * batch of 128x128 by k = 64 ~1%).  So kernels with fewer than
 * GEMM_PREFETCH_C_MIN_K k steps skip them; 128x128x128 and 1024^3
 * keep theirs (unchanged within noise). */

/* Rows of the tile (MR) per family: Note [GEMM kernel families]. */
#define GEMM_MR_GENERIC 6
#define GEMM_MR_AVX2 6
#define GEMM_MR_AVX512 14
/* The narrow tile's rows: Note [The narrow tile]. */
#define GEMM_MR_NARROW_GENERIC 4
#define GEMM_MR_NARROW_AVX2 4
#define GEMM_MR_NARROW_AVX512 8
/* AVX-512's tile for ten rows, between the two: Note [The narrow tile]. */
#define GEMM_MR_TEN_AVX512 10

/* The rows an edge kernel skips (Note [Skipping a line's edges]): the
 * first row or the last, or with two lines in the block (Note [Two lines
 * in one block]) each half's. */
#define EDGE_ROWS_FIRST(MR) 1u
#define EDGE_ROWS_LAST(MR) (1u << ((MR) - 1))
#define EDGE_HALVES_FIRST(MR) (1u | 1u << ((MR) / 2))
#define EDGE_HALVES_LAST(MR) (1u << ((MR) / 2 - 1) | 1u << ((MR) - 1))

/* Each family's tile and its narrow tile, for both dtypes, and the
 * family's tapped tiles that skip a line's edges. */
#define TH_DEFINE_FAMILY_KERNELS(T, VT, family, MR, MR_NARROW, EMBEDDED, target_attr, \
                                 MADD)                                                \
    TH_DEFINE_MICROKERNEL(T, VT, family, MR, false, false, EMBEDDED, target_attr,     \
                          MADD)                                                       \
    TH_DEFINE_MICROKERNEL(T, VT, family##_narrow, MR_NARROW, false, false, EMBEDDED,  \
                          target_attr, MADD)                                          \
    TH_DEFINE_MICROKERNEL(T, VT, family##_narrow_in_place, MR_NARROW, true, false,    \
                          EMBEDDED, target_attr, MADD)                                \
    TH_DEFINE_MICROKERNEL(T, VT, family##_tapped, MR, false, true, EMBEDDED,          \
                          target_attr, MADD)                                          \
    TH_DEFINE_MICROKERNEL(T, VT, family##_tapped_narrow, MR_NARROW, false, true,      \
                          EMBEDDED, target_attr, MADD)                                \
    TH_DEFINE_EDGE_MICROKERNEL(T, VT, family##_tapped_first, MR, false, true,         \
                               EDGE_ROWS_FIRST(MR), 0, EMBEDDED, target_attr, MADD)   \
    TH_DEFINE_EDGE_MICROKERNEL(T, VT, family##_tapped_last, MR, false, true, 0,       \
                               EDGE_ROWS_LAST(MR), EMBEDDED, target_attr, MADD)       \
    TH_DEFINE_EDGE_MICROKERNEL(T, VT, family##_tapped_both, MR, false, true,          \
                               EDGE_ROWS_FIRST(MR), EDGE_ROWS_LAST(MR), EMBEDDED,     \
                               target_attr, MADD)                                     \
    TH_DEFINE_EDGE_MICROKERNEL(T, VT, family##_tapped_halves, MR, false, true,        \
                               EDGE_HALVES_FIRST(MR), EDGE_HALVES_LAST(MR), EMBEDDED, \
                               target_attr, MADD)

TH_DEFINE_FAMILY_KERNELS(float, v4sf, generic, GEMM_MR_GENERIC, GEMM_MR_NARROW_GENERIC,
                         false, TH_NO_TARGET, MADD_PLAIN)
TH_DEFINE_FAMILY_KERNELS(double, v2df, generic, GEMM_MR_GENERIC, GEMM_MR_NARROW_GENERIC,
                         false, TH_NO_TARGET, MADD_PLAIN)
#if defined(__x86_64__)
TH_DEFINE_FAMILY_KERNELS(float, v8sf, avx2, GEMM_MR_AVX2, GEMM_MR_NARROW_AVX2, false,
                         TH_TARGET_AVX2, MADD_AVX2_FLOAT)
TH_DEFINE_FAMILY_KERNELS(double, v4df, avx2, GEMM_MR_AVX2, GEMM_MR_NARROW_AVX2, false,
                         TH_TARGET_AVX2, MADD_AVX2_DOUBLE)
TH_DEFINE_FAMILY_KERNELS(float, v16sf, avx512, GEMM_MR_AVX512, GEMM_MR_NARROW_AVX512, true,
                         TH_TARGET_AVX512, MADD_AVX512_FLOAT)
TH_DEFINE_FAMILY_KERNELS(double, v8df, avx512, GEMM_MR_AVX512, GEMM_MR_NARROW_AVX512, true,
                         TH_TARGET_AVX512, MADD_AVX512_DOUBLE)
TH_DEFINE_MICROKERNEL(float, v16sf, avx512_ten, GEMM_MR_TEN_AVX512, false, false, true,
                      TH_TARGET_AVX512, MADD_AVX512_FLOAT)
TH_DEFINE_MICROKERNEL(double, v8df, avx512_ten, GEMM_MR_TEN_AVX512, false, false, true,
                      TH_TARGET_AVX512, MADD_AVX512_DOUBLE)
#endif

/* The sum of v's lanes, as a tree: each level adds to every lane the
 * lane `width` away (i ^ width; the masks below), for width VLEN / 2,
 * ..., 1, so lane 0 ends with the whole sum after log2(VLEN) shuffles and
 * adds, where a lane after lane chain was VLEN dependent adds (the
 * matrix-vector rows' dot products end in one each: a 1024x1024 @
 * 1024x1 ends 256 groups of four). */
#define TH_DEFINE_LANE_SUM(T, VT, VI, family, target_attr, PARTNERS)       \
    target_attr static inline T lane_sum_##T##_##family(VT v)             \
    {                                                                      \
        const VI partners[] = PARTNERS();                                  \
        _Pragma("GCC unroll 4")                                            \
        for (size_t level = 0; level < sizeof(partners) / sizeof(VI); level++) { \
            v += __builtin_shuffle(v, partners[level]);                    \
        }                                                                  \
        return v[0];                                                       \
    }

/* sum_p x[p] * y[p] over contiguous x and y, in four vector partial sums:
 * the compiler does not vectorise a floating-point sum by itself, since
 * that reorders the additions. */
#define TH_DEFINE_DOT(T, VT, family, target_attr, MADD)                    \
    target_attr static T dot_##T##_##family(int64_t k, const T *x,         \
                                            const T *y)                    \
    {                                                                      \
        enum { VLEN = sizeof(VT) / sizeof(T) };                            \
        VT acc[4] = {{0}, {0}, {0}, {0}};                                  \
        int64_t p = 0;                                                     \
        for (; p + 4 * VLEN <= k; p += 4 * VLEN) {                         \
            for (int u = 0; u < 4; u++) {                                  \
                VT xv, yv;                                                 \
                memcpy(&xv, x + p + u * VLEN, sizeof(VT));                 \
                memcpy(&yv, y + p + u * VLEN, sizeof(VT));                 \
                acc[u] = MADD(xv, yv, acc[u]);                             \
            }                                                              \
        }                                                                  \
        T sum = lane_sum_##T##_##family((acc[0] + acc[1]) + (acc[2] + acc[3])); \
        for (; p < k; p++) {                                               \
            sum += x[p] * y[p];                                            \
        }                                                                  \
        return sum;                                                        \
    }

/* out[r] = sum_p rows[r][p] * x[p] for four contiguous rows at once: each
 * vector of x is loaded once for four rows. */
#define TH_DEFINE_DOT4(T, VT, family, target_attr, MADD)                   \
    target_attr static void dot4_##T##_##family(                          \
        int64_t k, const T *const *rows, const T *x, T *out)               \
    {                                                                      \
        enum { VLEN = sizeof(VT) / sizeof(T) };                            \
        VT acc[4][2]; /* Note [Registers of the micro-kernel] */          \
        _Pragma("GCC unroll 4")                                            \
        for (int r = 0; r < 4; r++) {                                      \
            acc[r][0] = acc[r][1] = (VT){0};                               \
        }                                                                  \
        int64_t p = 0;                                                     \
        for (; p + 2 * VLEN <= k; p += 2 * VLEN) {                         \
            VT x0, x1;                                                     \
            memcpy(&x0, x + p, sizeof(VT));                                \
            memcpy(&x1, x + p + VLEN, sizeof(VT));                         \
            _Pragma("GCC unroll 4")                                        \
            for (int r = 0; r < 4; r++) {                                  \
                VT r0, r1;                                                 \
                memcpy(&r0, rows[r] + p, sizeof(VT));                      \
                memcpy(&r1, rows[r] + p + VLEN, sizeof(VT));               \
                acc[r][0] = MADD(r0, x0, acc[r][0]);                       \
                acc[r][1] = MADD(r1, x1, acc[r][1]);                       \
            }                                                              \
        }                                                                  \
        _Pragma("GCC unroll 4")                                            \
        for (int r = 0; r < 4; r++) {                                      \
            T sum = lane_sum_##T##_##family(acc[r][0] + acc[r][1]);        \
            for (int64_t q = p; q < k; q++) {                              \
                sum += rows[r][q] * x[q];                                  \
            }                                                              \
            out[r] = sum;                                                  \
        }                                                                  \
    }

/* y[j] += s[0] * cols[0][j] + ... + s[3] * cols[3][j] over contiguous
 * columns: y is read and written once for four columns.  A plain loop the
 * compiler vectorises for the function's target. */
#define TH_DEFINE_AXPY4(T, family, target_attr)                            \
    target_attr static void axpy4_##T##_##family(                          \
        int64_t n, const T *s, const T *const *cols, T *y)                 \
    {                                                                      \
        const T *c0 = cols[0], *c1 = cols[1], *c2 = cols[2], *c3 = cols[3]; \
        T s0 = s[0], s1 = s[1], s2 = s[2], s3 = s[3];                      \
        for (int64_t j = 0; j < n; j++) {                                  \
            y[j] += s0 * c0[j] + s1 * c1[j] + s2 * c2[j] + s3 * c3[j];     \
        }                                                                  \
    }

/* Note [GEMM with few columns]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * linear's x @ W.t() with a small output layer (64x128 @ (10x128).t())
 * has fewer columns than NR: a packed tile would be mostly zero padding,
 * and packing x (a transpose, since its rows are contiguous) costs as
 * much as the product.  But both operands are contiguous along k (A's
 * rows, B's columns = W's rows), so each C[i][j] is a dot product read
 * in place.  dot_block computes ROWS x COLS of them at once, ROWS * COLS
 * = VLEN accumulators of VLEN lanes each (8 x 2 for AVX-512 float32,
 * 4 x 2 for AVX2): per VLEN values of k it loads ROWS + COLS vectors for
 * ROWS * COLS fused multiply-adds (each row's vector once, in a register:
 * folded into both of its multiply-adds, it was loaded twice and the
 * loads, not the multiply-adds, bound the loop).  A dot product ends in a
 * horizontal sum, which costs as much as several multiply-adds when done
 * alone; here the VLEN accumulators are summed together, as a tree of
 * pairings of two vectors, each two shuffles and an add.  The levels
 * first work within the 16-byte lanes (vshufps: "even lanes + odd lanes"
 * of each 16 bytes of both vectors), so that pairing acc[0] with acc[1]
 * leaves in every 16 bytes two of acc[0]'s partial sums and two of
 * acc[1]'s, and the next level one of each of four accumulators; then
 * across them (vshuff32x4: even 16-byte lanes + odd ones).  After
 * log2(VLEN) levels (VLEN - 1 pairings) lane t holds accumulator t's
 * whole sum.  Shuffles within 16 bytes are the cheap ones: the tree had
 * crossing ones (vpermt2ps) at every level and cost a quarter of the
 * block's time at k = 128.  The k % VLEN values left over are added one
 * by one.  A block of whole rows of C (C's columns contiguous, beta 0)
 * stores each row's COLS sums with one store.
 *
 * dot_block(k, a, a_rs, b, b_cs, rows, cols, alpha, beta, c, c_rs, c_cs):
 * for i < rows <= ROWS and j < cols <= COLS, C[i][j] = alpha *
 * sum_p a[i * a_rs + p] * b[j * b_cs + p] + beta * C[i][j] (beta == 0:
 * C is not read); rows and columns past `rows` and `cols` are computed on
 * a repeat of row or column 0 and dropped. */
/* The scalar end of dot_block, shared by the families: sums[r * cols
 * + s] += the products of row r and column s from p to k (the k % VLEN
 * values the vectors left).  Out of line and not vectorised: a few values
 * each, where the vectoriser's version of these loops costs more
 * instructions than the block's multiply-adds. */
#define TH_DEFINE_DOT_BLOCK_ENDS(T)                                        \
    __attribute__((noinline, optimize("no-tree-vectorize"))) static void   \
    dot_block_tail_##T(int64_t p, int64_t k, const T *const *row,          \
                       int rows, const T *const *col, int cols, T *sums)   \
    {                                                                      \
        for (int r = 0; r < rows; r++) {                                   \
            for (int s = 0; s < cols; s++) {                               \
                for (int64_t q = p; q < k; q++) {                          \
                    sums[r * cols + s] += row[r][q] * col[s][q];           \
                }                                                          \
            }                                                              \
        }                                                                  \
    }
TH_DEFINE_DOT_BLOCK_ENDS(float)
TH_DEFINE_DOT_BLOCK_ENDS(double)

/* dst[t] = shuffle(src[2t], src[2t + 1], even) + the same with `odd`,
 * for t < count: one level of Note [GEMM with few columns]'s tree. */
#define TH_PAIR_SUMS(dst, src, count, even, odd)                           \
    _Pragma("GCC unroll 8")                                                \
    for (int t = 0; t < (count); t++) {                                    \
        dst[t] = __builtin_shuffle(src[2 * t], src[2 * t + 1], even)       \
                 + __builtin_shuffle(src[2 * t], src[2 * t + 1], odd);     \
    }

/* Keeps a loaded vector in a register: GCC would otherwise fold its load
 * into each multiply-add that uses it, loading it once per use. */
#if defined(__x86_64__)
#define TH_KEEP_IN_REGISTER(v) __asm__("" : "+v"(v))
#else
#define TH_KEEP_IN_REGISTER(v) ((void)0)
#endif

#define TH_DEFINE_DOT_BLOCK(T, VT, VI, family, target_attr, MADD, MASKS)  \
    target_attr static void dot_block_##T##_##family(                     \
        int64_t k, const T *a, int64_t a_rs, const T *b, int64_t b_cs,     \
        int rows, int cols, T alpha, T beta, T *c, int64_t c_rs,           \
        int64_t c_cs)                                                      \
    {                                                                      \
        enum { VLEN = sizeof(VT) / sizeof(T),                              \
               COLS = VLEN >= 2 ? 2 : 1, ROWS = VLEN / COLS,               \
               /* lanes per 16 bytes, and the tree's levels within them */ \
               LANE_WIDTH = 16 / sizeof(T),                                \
               LANE_LEVELS = LANE_WIDTH == 4 ? 2 : 1 };                    \
        const T *row[ROWS], *col[COLS];                                    \
        for (int r = 0; r < ROWS; r++) {                                   \
            row[r] = a + (r < rows ? r : 0) * a_rs;                        \
        }                                                                  \
        for (int s = 0; s < COLS; s++) {                                   \
            col[s] = b + (s < cols ? s : 0) * b_cs;                        \
        }                                                                  \
        VT acc[VLEN];                                                      \
        _Pragma("GCC unroll 16")                                           \
        for (int t = 0; t < VLEN; t++) {                                   \
            acc[t] = (VT){0};                                              \
        }                                                                  \
        int64_t p = 0;                                                     \
        for (; p + VLEN <= k; p += VLEN) {                                 \
            VT bv[COLS];                                                   \
            for (int s = 0; s < COLS; s++) {                               \
                memcpy(&bv[s], col[s] + p, sizeof(VT));                    \
            }                                                              \
            for (int r = 0; r < ROWS; r++) {                               \
                VT av;                                                     \
                memcpy(&av, row[r] + p, sizeof(VT));                       \
                TH_KEEP_IN_REGISTER(av);                                   \
                for (int s = 0; s < COLS; s++) {                           \
                    acc[r * COLS + s] = MADD(av, bv[s], acc[r * COLS + s]); \
                }                                                          \
            }                                                              \
        }                                                                  \
        const VI masks[4] = MASKS(); /* in-lane even, odd; lane even, odd */ \
        const VI even1 = masks[0], odd1 = masks[1];                        \
        const VI even2 = LANE_LEVELS >= 2 ? masks[0] : masks[2];           \
        const VI odd2 = LANE_LEVELS >= 2 ? masks[1] : masks[3];            \
        /* the tree, one array per level so it stays in registers */      \
        VT half[VLEN / 2], quarter[VLEN / 4 + 1], eighth[VLEN / 8 + 1],    \
            sixteenth[VLEN / 16 + 1];                                      \
        TH_PAIR_SUMS(half, acc, VLEN / 2, even1, odd1);                    \
        TH_PAIR_SUMS(quarter, half, VLEN / 4, even2, odd2);                \
        TH_PAIR_SUMS(eighth, quarter, VLEN / 8, masks[2], masks[3]);       \
        TH_PAIR_SUMS(sixteenth, eighth, VLEN / 16, masks[2], masks[3]);    \
        VT total = VLEN == 2   ? half[0]                                   \
                   : VLEN == 4 ? quarter[0]                                \
                   : VLEN == 8 ? eighth[0]                                 \
                               : sixteenth[0];                             \
        if (p < k) {                                                       \
            T sums[VLEN];                                                  \
            memcpy(sums, &total, sizeof(sums));                            \
            TH_LEAVE_WIDE_VECTORS(VT); /* plain code next */               \
            dot_block_tail_##T(p, k, row, ROWS, col, COLS, sums);          \
            memcpy(&total, sums, sizeof(sums));                            \
        }                                                                  \
        total *= alpha;                                                    \
        if (beta == 0 && c_cs == 1 && cols == COLS) {                      \
            /* each row's COLS sums side by side, as C holds them */      \
            _Pragma("GCC unroll 16")                                       \
            for (int r = 0; r < ROWS; r++) {                               \
                if (r < rows) {                                            \
                    memcpy(c + r * c_rs, (T *)&total + r * COLS,           \
                           COLS * sizeof(T));                              \
                }                                                          \
            }                                                              \
            return;                                                        \
        }                                                                  \
        /* lanes taken from the register by constant indices: read back   \
         * from memory, right after the vector store, they waited on      \
         * store-to-load forwarding (a third of this function's time) */  \
        _Pragma("GCC unroll 16")                                           \
        for (int r = 0; r < ROWS; r++) {                                   \
            _Pragma("GCC unroll 2")                                        \
            for (int s = 0; s < COLS; s++) {                               \
                if (r < rows && s < cols) {                                \
                    T *out = c + r * c_rs + s * c_cs;                      \
                    T sum = total[r * COLS + s];                           \
                    *out = beta == 0 ? sum : sum + beta * *out;            \
                }                                                          \
            }                                                              \
        }                                                                  \
    }

/* The tree's shuffle masks (__builtin_shuffle indices into two vectors
 * put end to end), Note [GEMM with few columns]: within each 16 bytes,
 * the even lanes of the first vector then those of the second (and the
 * odd ones: the same plus one), for the levels inside the 16-byte lanes;
 * then the even 16-byte lanes of the first vector and of the second (and
 * the odd ones), for the levels across them. */
typedef int32_t v4si __attribute__((vector_size(16)));
typedef int32_t v8si __attribute__((vector_size(32)));
typedef int32_t v16si __attribute__((vector_size(64)));
typedef int64_t v2di __attribute__((vector_size(16)));
typedef int64_t v4di __attribute__((vector_size(32)));
typedef int64_t v8di __attribute__((vector_size(64)));
#define TREE_MASKS_2()                                                       \
    {(v2di){0, 2}, (v2di){1, 3}, (v2di){0, 2}, (v2di){1, 3}}
#define TREE_MASKS_4()                                                       \
    {(v4si){0, 2, 4, 6}, (v4si){1, 3, 5, 7}, (v4si){0, 2, 4, 6},           \
     (v4si){1, 3, 5, 7}}
#define TREE_MASKS_4D()                                                      \
    {(v4di){0, 4, 2, 6}, (v4di){1, 5, 3, 7}, (v4di){0, 1, 4, 5},           \
     (v4di){2, 3, 6, 7}}
#define TREE_MASKS_8()                                                       \
    {(v8si){0, 2, 8, 10, 4, 6, 12, 14}, (v8si){1, 3, 9, 11, 5, 7, 13, 15}, \
     (v8si){0, 1, 2, 3, 8, 9, 10, 11}, (v8si){4, 5, 6, 7, 12, 13, 14, 15}}
#define TREE_MASKS_8D()                                                      \
    {(v8di){0, 8, 2, 10, 4, 12, 6, 14}, (v8di){1, 9, 3, 11, 5, 13, 7, 15}, \
     (v8di){0, 1, 4, 5, 8, 9, 12, 13}, (v8di){2, 3, 6, 7, 10, 11, 14, 15}}
#define TREE_MASKS_16()                                                      \
    {(v16si){0, 2, 16, 18, 4, 6, 20, 22, 8, 10, 24, 26, 12, 14, 28, 30},   \
     (v16si){1, 3, 17, 19, 5, 7, 21, 23, 9, 11, 25, 27, 13, 15, 29, 31},   \
     (v16si){0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27},    \
     (v16si){4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31}}

/* lane_sum's shuffles: lane i takes lane i ^ width, width halving. */
#define PARTNERS_2() {(v2di){1, 0}}
#define PARTNERS_4() {(v4si){2, 3, 0, 1}, (v4si){1, 0, 3, 2}}
#define PARTNERS_4D() {(v4di){2, 3, 0, 1}, (v4di){1, 0, 3, 2}}
#define PARTNERS_8()                                                         \
    {(v8si){4, 5, 6, 7, 0, 1, 2, 3}, (v8si){2, 3, 0, 1, 6, 7, 4, 5},       \
     (v8si){1, 0, 3, 2, 5, 4, 7, 6}}
#define PARTNERS_8D()                                                        \
    {(v8di){4, 5, 6, 7, 0, 1, 2, 3}, (v8di){2, 3, 0, 1, 6, 7, 4, 5},       \
     (v8di){1, 0, 3, 2, 5, 4, 7, 6}}
#define PARTNERS_16()                                                        \
    {(v16si){8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7},        \
     (v16si){4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11},        \
     (v16si){2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13},        \
     (v16si){1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14}}

#define TH_DEFINE_VECTOR_KERNELS(T, VT, VI, family, target_attr, MADD, MASKS, \
                                 PARTNERS)                                  \
    TH_DEFINE_LANE_SUM(T, VT, VI, family, target_attr, PARTNERS)   \
    TH_DEFINE_DOT(T, VT, family, target_attr, MADD)                \
    TH_DEFINE_DOT4(T, VT, family, target_attr, MADD)               \
    TH_DEFINE_DOT_BLOCK(T, VT, VI, family, target_attr, MADD, MASKS) \
    TH_DEFINE_AXPY4(T, family, target_attr)

TH_DEFINE_VECTOR_KERNELS(float, v4sf, v4si, generic, TH_NO_TARGET, MADD_PLAIN,
                         TREE_MASKS_4, PARTNERS_4)
TH_DEFINE_VECTOR_KERNELS(double, v2df, v2di, generic, TH_NO_TARGET, MADD_PLAIN,
                         TREE_MASKS_2, PARTNERS_2)
#if defined(__x86_64__)
TH_DEFINE_VECTOR_KERNELS(float, v8sf, v8si, avx2, TH_TARGET_AVX2,
                         MADD_AVX2_FLOAT, TREE_MASKS_8, PARTNERS_8)
TH_DEFINE_VECTOR_KERNELS(double, v4df, v4di, avx2, TH_TARGET_AVX2,
                         MADD_AVX2_DOUBLE, TREE_MASKS_4D, PARTNERS_4D)
TH_DEFINE_VECTOR_KERNELS(float, v16sf, v16si, avx512, TH_TARGET_AVX512,
                         MADD_AVX512_FLOAT, TREE_MASKS_16, PARTNERS_16)
TH_DEFINE_VECTOR_KERNELS(double, v8df, v8di, avx512, TH_TARGET_AVX512,
                         MADD_AVX512_DOUBLE, TREE_MASKS_8D, PARTNERS_8D)
#endif

typedef void (*UKernel_float)(int64_t, const float *, int64_t, const int64_t *,
                              const float *, int64_t, float, float, float *,
                              int64_t, int64_t, int, int);
typedef void (*UKernel_double)(int64_t, const double *, int64_t, const int64_t *,
                               const double *, int64_t, double, double, double *,
                               int64_t, int64_t, int, int);

#define TH_DEFINE_DOT_BLOCK_TYPE(T)                                        \
    typedef void (*DotBlock_##T)(int64_t, const T *, int64_t, const T *,   \
                                 int64_t, int, int, T, T, T *, int64_t,    \
                                 int64_t);
TH_DEFINE_DOT_BLOCK_TYPE(float)
TH_DEFINE_DOT_BLOCK_TYPE(double)

/* A tile a product runs with, its rows and micro-kernels. */
typedef struct {
    int mr; /* for both dtypes; 0: no tile */
    UKernel_float ukernel_float;
    UKernel_double ukernel_double;
} GemmTile;

#define GEMM_MAX_TILES 3

typedef struct {
    const char *name;
    const char *cpu_features[2]; /* for __builtin_cpu_supports; NULL: none */
    int b_panel_l1_share; /* the B micro-panel fills L1 / this (Note [GEMM
                             blocking from the cache sizes]) */
    int nr_float, nr_double;
    /* the family's tile, then narrower ones (Note [The narrow tile]) */
    GemmTile tiles[GEMM_MAX_TILES];
    GemmTile in_place; /* the narrow tile reading A in place */
    GemmTile tapped; /* the family's tile reading A by taps (THBlas_gemmTapped) */
    GemmTile tapped_narrow; /* the narrow tile reading A by taps */
    /* the family's tapped tile skipping a line's edges, by THBlasRowSpan's
       edges (Note [Skipping a line's edges]; [0]: tapped's kernels) */
    GemmTile tapped_edges[8];
    void (*axpy4_float)(int64_t, const float *, const float *const *,
                        float *);
    void (*axpy4_double)(int64_t, const double *, const double *const *,
                         double *);
    float (*dot_float)(int64_t, const float *, const float *);
    double (*dot_double)(int64_t, const double *, const double *);
    void (*dot4_float)(int64_t, const float *const *, const float *,
                       float *);
    void (*dot4_double)(int64_t, const double *const *, const double *,
                        double *);
    DotBlock_float dot_block_float;
    DotBlock_double dot_block_double;
} KernelFamily;

#define TH_VECTOR_KERNELS(family)                                          \
    axpy4_float_##family, axpy4_double_##family, dot_float_##family,       \
        dot_double_##family, dot4_float_##family, dot4_double_##family,    \
        dot_block_float_##family, dot_block_double_##family

#define TH_TILE(MR, family) {MR, ukernel_float_##family, ukernel_double_##family}
/* tapped_edges: with THBLAS_EDGE_HALVES and one edge alone, one line's
 * edge (a row fewer skipped) */
#define TH_EDGE_TILES(MR, family)                                                   \
    {TH_TILE(MR, family##_tapped), TH_TILE(MR, family##_tapped_first),              \
     TH_TILE(MR, family##_tapped_last), TH_TILE(MR, family##_tapped_both),          \
     TH_TILE(MR, family##_tapped), TH_TILE(MR, family##_tapped_first),              \
     TH_TILE(MR, family##_tapped_last), TH_TILE(MR, family##_tapped_halves)}

/* Best first. */
static const KernelFamily kernel_families[] = {
#if defined(__x86_64__)
    {"avx512", {"avx512f", "fma"}, 1, 32, 16,
     {TH_TILE(GEMM_MR_AVX512, avx512), TH_TILE(GEMM_MR_TEN_AVX512, avx512_ten),
      TH_TILE(GEMM_MR_NARROW_AVX512, avx512_narrow)},
     TH_TILE(GEMM_MR_NARROW_AVX512, avx512_narrow_in_place), TH_TILE(GEMM_MR_AVX512, avx512_tapped),
     TH_TILE(GEMM_MR_NARROW_AVX512, avx512_tapped_narrow), TH_EDGE_TILES(GEMM_MR_AVX512, avx512),
     TH_VECTOR_KERNELS(avx512)},
    {"avx2", {"avx2", "fma"}, 2, 16, 8,
     {TH_TILE(GEMM_MR_AVX2, avx2), TH_TILE(GEMM_MR_NARROW_AVX2, avx2_narrow)},
     TH_TILE(GEMM_MR_NARROW_AVX2, avx2_narrow_in_place), TH_TILE(GEMM_MR_AVX2, avx2_tapped),
     TH_TILE(GEMM_MR_NARROW_AVX2, avx2_tapped_narrow), TH_EDGE_TILES(GEMM_MR_AVX2, avx2),
     TH_VECTOR_KERNELS(avx2)},
#endif
    {"generic", {NULL, NULL}, 2, 8, 4,
     {TH_TILE(GEMM_MR_GENERIC, generic), TH_TILE(GEMM_MR_NARROW_GENERIC, generic_narrow)},
     TH_TILE(GEMM_MR_NARROW_GENERIC, generic_narrow_in_place), TH_TILE(GEMM_MR_GENERIC, generic_tapped),
     TH_TILE(GEMM_MR_NARROW_GENERIC, generic_tapped_narrow),
     TH_EDGE_TILES(GEMM_MR_GENERIC, generic),
     TH_VECTOR_KERNELS(generic)},
};
#define NUM_KERNEL_FAMILIES \
    ((int)(sizeof(kernel_families) / sizeof(kernel_families[0])))

static int64_t
round_up(int64_t x, int64_t multiple)
{
    return (x + multiple - 1) / multiple * multiple;
}

/* The tile for an m-row product: the one that pads m to the fewest rows,
 * the widest of those (Note [The narrow tile]). */
static GemmTile
tile_for(const KernelFamily *family, int64_t m)
{
    GemmTile best = family->tiles[0];
    for (int t = 1; t < GEMM_MAX_TILES && family->tiles[t].mr > 0; t++) {
        if (round_up(m, family->tiles[t].mr) < round_up(m, best.mr)) {
            best = family->tiles[t];
        }
    }
    return best;
}

static bool
family_supported(const KernelFamily *family)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    for (int i = 0; i < 2; i++) {
        const char *feature = family->cpu_features[i];
        /* __builtin_cpu_supports wants a string literal. */
        if (feature == NULL) {
            continue;
        }
        if (strcmp(feature, "avx512f") == 0
            && !__builtin_cpu_supports("avx512f")) {
            return false;
        }
        if (strcmp(feature, "avx2") == 0 && !__builtin_cpu_supports("avx2")) {
            return false;
        }
        if (strcmp(feature, "fma") == 0 && !__builtin_cpu_supports("fma")) {
            return false;
        }
    }
#endif
    (void)family;
    return true;
}

/* The family in use; NULL until first use.  A data race on first use only
 * stores the same pointer twice. */
static _Atomic(const KernelFamily *) active_family;

static const KernelFamily *
current_family(void)
{
    const KernelFamily *family = atomic_load(&active_family);
    if (family == NULL) {
        int i = 0;
        while (!family_supported(&kernel_families[i])) {
            i++; /* the last ("generic") is always supported */
        }
        family = &kernel_families[i];
        atomic_store(&active_family, family);
    }
    return family;
}

const char *
THBlas_kernelName(void)
{
    return current_family()->name;
}

int
THBlas_setKernel(const char *name)
{
    for (int i = 0; i < NUM_KERNEL_FAMILIES; i++) {
        if (strcmp(kernel_families[i].name, name) == 0) {
            if (!family_supported(&kernel_families[i])) {
                return THError_set(TH_ERR_RUNTIME,
                                   "GEMM kernel '%s' is not supported by "
                                   "this CPU",
                                   name);
            }
            atomic_store(&active_family, &kernel_families[i]);
            return 0;
        }
    }
    return THError_set(TH_ERR_VALUE, "unknown GEMM kernel '%s'", name);
}

/* ---- blocking (Note [GEMM blocking from the cache sizes]) ------------------ */

/* Note [GEMM blocking from the cache sizes]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * MC, KC and NC follow BLIS's analytical model (Low et al., "Analytical
 * modeling is enough for high-performance BLIS", 2016), applied to the
 * data cache sizes the OS reports (sysfs for cpu0, else sysconf, else the
 * fallbacks below), once per process, for each family's tile and dtype:
 *   - KC: the B micro-panel (KC x NR), which every A micro-panel of the
 *     block meets in turn, fills half of L1; the other half holds the
 *     A micro-panel streaming past it (MR x KC) and the C tile's lines.
 *     The AVX-512 family's B micro-panel fills all of L1 instead
 *     (b_panel_l1_share 1): on a Zen 4 (32K L1, 1M L2), one thread,
 *     thread CPU time, the half-L1 KC of 128 ran 1024^3 at 87 GFLOP/s
 *     (float32) and 42 (float64), KC 256 at 95 and 48, KC 512 alike and
 *     KC 1024 worse (MC falls to 126 rows): twice the k steps halve C's
 *     loads and stores, and the A micro-panel and C's lines stream from
 *     L2 ahead of the kernel.  The AVX2 and portable families keep half
 *     of L1, measured on the Zen 1 below.
 *   - MC: the packed A block (MC x KC), which every B micro-panel of the
 *     block meets in turn, fills half of L2.
 *   - NC: the packed B block (KC x NC) fills half of L3 (shared by the
 *     cores, and by the A blocks passing through it).
 * Each is rounded down to what the loops need (KC to a multiple of 8, MC
 * to MR, NC to NR) and kept within bounds, so odd reports stay sane.  On
 * the Zen 1 this was tuned on (32K L1, 512K L2, 8M L3 per core complex)
 * the AVX2 float32 blocking is KC 256, MC 252, NC 4096. */

enum { CACHE_L1, CACHE_L2, CACHE_L3, NUM_CACHE_LEVELS };

static const int64_t fallback_cache_bytes[NUM_CACHE_LEVELS] = {
    32 << 10, 256 << 10, 8 << 20};

/* "32K", "8192K", "1M": sysfs's size format.  0 when unreadable. */
static int64_t
read_sysfs_size(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    long long value = 0;
    char unit = 0;
    int got = fscanf(f, "%lld%c", &value, &unit);
    fclose(f);
    if (got < 1 || value <= 0) {
        return 0;
    }
    return unit == 'K' ? value << 10 : unit == 'M' ? value << 20 : value;
}

/* Level and type of /sys/devices/system/cpu/cpu0/cache/index<i>, and its
 * size when it is a data or unified cache; 0 otherwise. */
static int64_t
sysfs_cache_bytes(int index, int *level)
{
    char path[96], type[16] = "";
    snprintf(path, sizeof(path),
             "/sys/devices/system/cpu/cpu0/cache/index%d/level", index);
    FILE *f = fopen(path, "r");
    if (f == NULL || fscanf(f, "%d", level) != 1) {
        if (f != NULL) {
            fclose(f);
        }
        return 0;
    }
    fclose(f);
    snprintf(path, sizeof(path),
             "/sys/devices/system/cpu/cpu0/cache/index%d/type", index);
    f = fopen(path, "r");
    if (f == NULL || fscanf(f, "%15s", type) != 1
        || strcmp(type, "Instruction") == 0) {
        if (f != NULL) {
            fclose(f);
        }
        return 0;
    }
    fclose(f);
    snprintf(path, sizeof(path),
             "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
    return read_sysfs_size(path);
}

static int64_t cache_bytes[NUM_CACHE_LEVELS];

/* sysfs first: sysconf reports the whole chip's L3 on some CPUs (64M on
 * this Zen 1, whose cores share 8M per complex). */
static void
detect_cache_sizes(void)
{
    for (int index = 0; index < 8; index++) {
        int level = 0;
        int64_t bytes = sysfs_cache_bytes(index, &level);
        if (bytes > 0 && level >= 1 && level <= NUM_CACHE_LEVELS) {
            cache_bytes[level - 1] = bytes;
        }
    }
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL3_CACHE_SIZE)
    const int names[NUM_CACHE_LEVELS] = {
        _SC_LEVEL1_DCACHE_SIZE, _SC_LEVEL2_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE};
    for (int level = 0; level < NUM_CACHE_LEVELS; level++) {
        long bytes = cache_bytes[level] > 0 ? 0 : sysconf(names[level]);
        if (bytes > 0) {
            cache_bytes[level] = bytes;
        }
    }
#endif
    for (int level = 0; level < NUM_CACHE_LEVELS; level++) {
        if (cache_bytes[level] <= 0) {
            cache_bytes[level] = fallback_cache_bytes[level];
        }
    }
}

static pthread_once_t cache_sizes_once = PTHREAD_ONCE_INIT;
/* THBlas_setCacheSizes's sizes; all 0: the detected ones. */
static int64_t cache_bytes_override[NUM_CACHE_LEVELS];

void
THBlas_cacheSizes(int64_t sizes[3])
{
    pthread_once(&cache_sizes_once, detect_cache_sizes);
    bool overridden = cache_bytes_override[CACHE_L1] > 0;
    memcpy(sizes, overridden ? cache_bytes_override : cache_bytes,
           sizeof(cache_bytes));
}

void
THBlas_setCacheSizes(const int64_t sizes[3])
{
    for (int level = 0; level < NUM_CACHE_LEVELS; level++) {
        cache_bytes_override[level] = sizes == NULL ? 0 : sizes[level];
    }
}

static int64_t
clamp64(int64_t x, int64_t lo, int64_t hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

/* The blocks for `family`'s kernels run with an mr-row tile. */
static THBlasBlocking
blocking_for(const KernelFamily *family, int itemsize, int mr)
{
    int64_t caches[NUM_CACHE_LEVELS];
    THBlas_cacheSizes(caches);
    THBlasBlocking b;
    b.mr = mr;
    b.nr = itemsize == 4 ? family->nr_float : family->nr_double;
    b.kc = clamp64(caches[CACHE_L1] / family->b_panel_l1_share
                       / (b.nr * itemsize) / 8 * 8,
                   64, 1024);
    b.mc = clamp64(caches[CACHE_L2] / 2 / (b.kc * itemsize) / b.mr * b.mr,
                   b.mr, 4096 / b.mr * b.mr);
    b.nc = clamp64(caches[CACHE_L3] / 2 / (b.kc * itemsize) / b.nr * b.nr,
                   b.nr, 16384);
    return b;
}

int
THBlas_blocking(THDtype dtype, THBlasBlocking *out)
{
    if (dtype != TH_Float32 && dtype != TH_Float64) {
        return THError_set(TH_ERR_VALUE,
                           "THBlas_blocking: %s does not take the packed GEMM",
                           THDtype_name(dtype));
    }
    const KernelFamily *family = current_family();
    *out = blocking_for(family, THDtype_itemsize(dtype), family->tiles[0].mr);
    return 0;
}

/* ---- scalars ---------------------------------------------------------------- */

static double
scalar_as_double(THScalar s)
{
    switch (s.dtype) {
    case TH_Bool:
        return s.value.b ? 1.0 : 0.0;
    case TH_Int64:
        return (double)s.value.i;
    default:
        return s.value.d;
    }
}

static int64_t
scalar_as_int64(THScalar s)
{
    switch (s.dtype) {
    case TH_Bool:
        return s.value.b;
    case TH_Int64:
        return s.value.i;
    default:
        return (int64_t)s.value.d;
    }
}

static bool
scalar_is_zero(THScalar s)
{
    return s.dtype == TH_Bool ? !s.value.b
           : s.dtype == TH_Int64 ? s.value.i == 0
                                 : s.value.d == 0;
}

/* ---- the row-wise kernel: every dtype ---------------------------------------
 *
 * Loop order i-k-j: the innermost loop runs along a row of B and a row of
 * C, contiguous in the common layout, so it vectorises.  The accumulation
 * type (TH_BLAS_ACC_<Name>) is uint64_t for the integer dtypes and bool:
 * unsigned arithmetic wraps instead of overflowing, and the final
 * conversion keeps the low bits, which is exactly wrap-around arithmetic in
 * the narrower type (for bool, any nonzero sum is true). */
#define TH_BLAS_ACC_Bool uint64_t
#define TH_BLAS_ACC_UInt8 uint64_t
#define TH_BLAS_ACC_Int8 uint64_t
#define TH_BLAS_ACC_Int16 uint64_t
#define TH_BLAS_ACC_Int32 uint64_t
#define TH_BLAS_ACC_Int64 uint64_t
#define TH_BLAS_ACC_Float32 float
#define TH_BLAS_ACC_Float64 double

typedef struct {
    int64_t m, n, k;
    THScalar alpha, beta;
    THBlasMatrix a, b, c;
} GemmArgs;

#define TH_DEFINE_ROWWISE_GEMM(Name, T, py)                                \
    static void gemm_rowwise_##Name(const GemmArgs *g)                     \
    {                                                                      \
        typedef TH_BLAS_ACC_##Name Acc;                                    \
        bool floating = THDtype_isFloating(TH_##Name);                     \
        Acc alpha = floating ? (Acc)scalar_as_double(g->alpha)             \
                             : (Acc)scalar_as_int64(g->alpha);             \
        Acc beta = floating ? (Acc)scalar_as_double(g->beta)               \
                            : (Acc)scalar_as_int64(g->beta);               \
        int64_t a_rs = g->a.row_stride, a_cs = g->a.col_stride;            \
        int64_t b_rs = g->b.row_stride, b_cs = g->b.col_stride;            \
        int64_t c_cs = g->c.col_stride;                                    \
        const T *a = (const T *)g->a.data;                                 \
        const T *b = (const T *)g->b.data;                                 \
        for (int64_t i = 0; i < g->m; i++) {                               \
            T *c = (T *)g->c.data + i * g->c.row_stride;                   \
            for (int64_t j = 0; j < g->n; j++) {                           \
                Acc scaled = beta == 0 ? 0 : beta * (Acc)c[j * c_cs];     \
                c[j * c_cs] = (T)scaled;                                   \
            }                                                              \
            for (int64_t p = 0; p < g->k; p++) {                           \
                Acc aip = alpha * (Acc)a[i * a_rs + p * a_cs];             \
                const T *brow = b + p * b_rs;                              \
                if (c_cs == 1 && b_cs == 1) {                              \
                    for (int64_t j = 0; j < g->n; j++) {                   \
                        c[j] = (T)((Acc)c[j] + aip * (Acc)brow[j]);        \
                    }                                                      \
                } else {                                                   \
                    for (int64_t j = 0; j < g->n; j++) {                   \
                        c[j * c_cs] = (T)((Acc)c[j * c_cs]                 \
                                          + aip * (Acc)brow[j * b_cs]);    \
                    }                                                      \
                }                                                          \
            }                                                              \
        }                                                                  \
    }
TH_FORALL_ARITH_DTYPES(TH_DEFINE_ROWWISE_GEMM)

typedef void (*RowwiseGemm)(const GemmArgs *);
static const RowwiseGemm rowwise_gemms[TH_NUM_DTYPES] = {
#define TH_ROWWISE_ENTRY(Name, T, py) gemm_rowwise_##Name,
    TH_FORALL_ARITH_DTYPES(TH_ROWWISE_ENTRY)
#undef TH_ROWWISE_ENTRY
};

/* ---- the packed kernel: float32 and float64 (Note [GEMM blocking]) ---------- */

/* The packing buffers of one thread (THBlasLoopNest's a_bytes and
 * b_bytes). */
typedef struct {
    void *a_pack; /* mc x kc (rounded up to MR) */
    void *b_pack; /* kc x nc (rounded up to NR) */
} GemmWorkspace;

static int64_t
min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Returns false when out of memory. */
static bool
workspace_alloc(GemmWorkspace *ws, const THBlasLoopNest *nest)
{
    return THBlas_allocPackBuffers(&ws->a_pack, nest->a_bytes, &ws->b_pack,
                                   nest->b_bytes);
}

static void
workspace_free(GemmWorkspace *ws)
{
    free(ws->a_pack);
    free(ws->b_pack);
}

void *
THBlas_allocPack(size_t bytes)
{
    /* aligned_alloc wants a multiple of the alignment */
    return aligned_alloc(GEMM_ALIGN, (size_t)round_up((int64_t)bytes, GEMM_ALIGN));
}

bool
THBlas_allocPackBuffers(void **a_pack, size_t a_bytes, void **b_pack,
                        size_t b_bytes)
{
    *a_pack = THBlas_allocPack(a_bytes);
    *b_pack = THBlas_allocPack(b_bytes);
    if (*a_pack == NULL || *b_pack == NULL) {
        free(*a_pack);
        free(*b_pack);
        return false;
    }
    return true;
}

/* One full line of a micro-panel (a row of B's, NR values, or a column
 * of A's, MR values): memcpy with a size known at compile time becomes a
 * few vector moves instead of a library call. */
#define TH_DEFINE_COPY_PANEL_ROW(T)                                        \
    static inline void copy_panel_row_##T(T *dst, const T *src, int nr)   \
    {                                                                      \
        switch (nr) {                                                      \
        case 4:                                                            \
            memcpy(dst, src, 4 * sizeof(T));                               \
            break;                                                         \
        case 6:                                                            \
            memcpy(dst, src, 6 * sizeof(T));                               \
            break;                                                         \
        case 8:                                                            \
            memcpy(dst, src, 8 * sizeof(T));                               \
            break;                                                         \
        case 10:                                                           \
            memcpy(dst, src, 10 * sizeof(T));                              \
            break;                                                         \
        case 14:                                                           \
            memcpy(dst, src, 14 * sizeof(T));                              \
            break;                                                         \
        case 16:                                                           \
            memcpy(dst, src, 16 * sizeof(T));                              \
            break;                                                         \
        case 32:                                                           \
            memcpy(dst, src, 32 * sizeof(T));                              \
            break;                                                         \
        default:                                                           \
            memcpy(dst, src, (size_t)nr * sizeof(T));                      \
            break;                                                         \
        }                                                                  \
    }

/* Note [Packing by 4x4 transposes]
 *
 * Both packed layouts run against the grain of a common operand: A's
 * micro-panels hold MR rows column after column, so a row-major A (rows
 * contiguous) must be transposed into them, and so must a B whose rows are
 * adjacent in memory (row stride 1: the K.t() of attention's scores) into
 * B's row-after-row panels.  One element at a time, that is a load and a
 * strided store per value: ~20% of the instructions of a 128x64 @ 64x128
 * product.  For float32 on x86-64 the packers below read four values from
 * each of four lines as four vectors, transpose the 4x4 block in registers
 * (_MM_TRANSPOSE4_PS, baseline SSE) and store four lines of the panel.  A
 * group of only two lines (MR = 6 or 14 rows) is transposed with its lines
 * loaded twice and stores two values per line.  The columns or rows left
 * over, other CPUs and float64 go one element at a time, a line at a time
 * (contiguous reads; the scattered writes stay in one panel, in L1).
 *
 * transpose_lines_T(count, width, src, stride, dst, p0): for lines
 * l < width (line l starts at src + l * stride) and p0 <= p < count,
 * dst[p * width + l] = src[l * stride + p]. */
#define TH_DEFINE_TRANSPOSE_LINES(T)                                       \
    static inline void transpose_lines_##T(int64_t count, int width,       \
                                           const T *src, int64_t stride,   \
                                           T *dst, int64_t p0)             \
    {                                                                      \
        for (int64_t l = 0; l < width; l++) {                              \
            const T *line = src + l * stride;                              \
            for (int64_t p = p0; p < count; p++) {                         \
                dst[p * width + l] = line[p];                              \
            }                                                              \
        }                                                                  \
    }
TH_DEFINE_TRANSPOSE_LINES(float)
TH_DEFINE_TRANSPOSE_LINES(double)

static inline void
pack_lines_double(int64_t count, int width, const double *src, int64_t stride,
                  double *dst)
{
    transpose_lines_double(count, width, src, stride, dst, 0);
}

static inline void
pack_lines_float(int64_t count, int width, const float *src, int64_t stride,
                 float *dst)
{
    int64_t p = 0;
#if defined(__x86_64__)
    if (width % 4 == 0 || width % 4 == 2) {
        for (; p + 4 <= count; p += 4) {
            float *out = dst + p * width;
            for (int l = 0; l < width; l += 4) {
                const float *block = src + l * stride + p;
                bool two = width - l == 2; /* lines l, l + 1, l, l + 1 */
                __m128 c0 = _mm_loadu_ps(block);
                __m128 c1 = _mm_loadu_ps(block + stride);
                __m128 c2 = two ? c0 : _mm_loadu_ps(block + 2 * stride);
                __m128 c3 = two ? c1 : _mm_loadu_ps(block + 3 * stride);
                _MM_TRANSPOSE4_PS(c0, c1, c2, c3);
                if (two) {
                    _mm_storel_pi((__m64 *)(out + l), c0);
                    _mm_storel_pi((__m64 *)(out + width + l), c1);
                    _mm_storel_pi((__m64 *)(out + 2 * width + l), c2);
                    _mm_storel_pi((__m64 *)(out + 3 * width + l), c3);
                } else {
                    _mm_storeu_ps(out + l, c0);
                    _mm_storeu_ps(out + width + l, c1);
                    _mm_storeu_ps(out + 2 * width + l, c2);
                    _mm_storeu_ps(out + 3 * width + l, c3);
                }
            }
        }
    }
#endif
    transpose_lines_float(count, width, src, stride, dst, p);
}

/* Note [Packing a column-major A]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * A column-major A (row stride 1: the dY^T of a weight gradient dY^T @ X)
 * holds each column of a micro-panel, MR values, contiguous, so packing is
 * a copy of MR values per column (copy_panel_row_T).  The order matters:
 * panel by panel, a panel reads MR values from each of KC lines cs
 * apart, and with cs a multiple of 4 KiB (1024 floats) all of those
 * lines fall in one L1 set, so the next panel's values of the same lines
 * come back from L2 or beyond, and the 4 KiB strides defeat the hardware
 * prefetcher.  Here PACK_A_COLUMNS_STEP columns of every panel
 * go at a time: those few lines are read across, front to back, while
 * they stay in L1.  On the Zen 4, one thread, perf cpu-clock: packing
 * took 22% of the time of the micro-kernel in (1024 x 700)^T @ (700 x
 * 256), an LSTM's dW_hh, panel by panel one element at a time, and 8%
 * this way; the product went from ~3.8-4.2 to ~3.6-3.8 ms. */
#define PACK_A_COLUMNS_STEP 8
/* pack_a of a column-major A (Note [Packing a column-major A]) */
#define TH_DEFINE_PACK_A_COLUMNS(T)                                        \
    static void pack_a_columns_##T(int64_t mc, int64_t kc, int mr_full,   \
                                   const T *a, int64_t cs, T *dst)         \
    {                                                                      \
        int64_t full = mc / mr_full * mr_full;                             \
        for (int64_t p0 = 0; p0 < kc; p0 += PACK_A_COLUMNS_STEP) {         \
            int64_t p1 = min64(p0 + PACK_A_COLUMNS_STEP, kc);              \
            for (int64_t ir = 0; ir < full; ir += mr_full) {               \
                T *panel = dst + ir * kc;                                  \
                for (int64_t p = p0; p < p1; p++) {                        \
                    copy_panel_row_##T(panel + p * mr_full, a + p * cs + ir, \
                                       mr_full);                           \
                }                                                          \
            }                                                              \
            if (full < mc) {                                               \
                T *panel = dst + full * kc;                                \
                for (int64_t p = p0; p < p1; p++) {                        \
                    int64_t i = 0;                                         \
                    for (; i < mc - full; i++) {                           \
                        panel[p * mr_full + i] = a[p * cs + full + i];     \
                    }                                                      \
                    for (; i < mr_full; i++) {                             \
                        panel[p * mr_full + i] = 0;                        \
                    }                                                      \
                }                                                          \
            }                                                              \
        }                                                                  \
    }

/* pack_a: the mc x kc block at `a` into MR-row micro-panels, each laid out
 * column after column (MR values per column), zero-padded to MR rows; a
 * column-major A by pack_a_columns_T (Note [Packing a column-major A]).
 * pack_b: the kc x nc block at `b` into NR-column micro-panels, each laid
 * out row after row (NR values per row), zero-padded to NR columns; a
 * row-major A and a column-major B are transposed into their panels by
 * pack_lines_T (Note [Packing by 4x4 transposes]). */
#define TH_DEFINE_PACKING(T)                                               \
    static void pack_a_##T(int64_t mc, int64_t kc, int mr_full, const T *a, \
                           int64_t rs, int64_t cs, T *dst)                 \
    {                                                                      \
        if (rs == 1) {                                                     \
            pack_a_columns_##T(mc, kc, mr_full, a, cs, dst);               \
            return;                                                        \
        }                                                                  \
        for (int64_t ir = 0; ir < mc; ir += mr_full) {                     \
            int64_t mr = min64(mr_full, mc - ir);                          \
            const T *src = a + ir * rs;                                    \
            if (cs == 1 && mr == mr_full) { /* row-major */                \
                pack_lines_##T(kc, mr_full, src, rs, dst);                 \
                dst += kc * mr_full;                                       \
                continue;                                                  \
            }                                                              \
            for (int64_t p = 0; p < kc; p++) {                             \
                int64_t i = 0;                                             \
                for (; i < mr; i++) {                                      \
                    dst[i] = src[i * rs + p * cs];                         \
                }                                                          \
                for (; i < mr_full; i++) {                                 \
                    dst[i] = 0;                                            \
                }                                                          \
                dst += mr_full;                                            \
            }                                                              \
        }                                                                  \
    }                                                                      \
    static void pack_b_##T(int64_t kc, int64_t nc, int nr_full,            \
                           const T *b, int64_t rs, int64_t cs, T *dst)     \
    {                                                                      \
        for (int64_t jr = 0; jr < nc; jr += nr_full) {                     \
            int64_t nr = min64(nr_full, nc - jr);                          \
            const T *src = b + jr * cs;                                    \
            if (rs == 1 && nr == nr_full) { /* column-major */             \
                pack_lines_##T(kc, nr_full, src, cs, dst);                 \
                dst += kc * nr_full;                                       \
                continue;                                                  \
            }                                                              \
            for (int64_t p = 0; p < kc; p++) {                             \
                const T *row = src + p * rs;                               \
                if (cs == 1 && nr == nr_full) {                            \
                    copy_panel_row_##T(dst, row, nr_full);                 \
                } else {                                                   \
                    int64_t j = 0;                                         \
                    for (; j < nr; j++) {                                  \
                        dst[j] = row[j * cs];                              \
                    }                                                      \
                    for (; j < nr_full; j++) {                             \
                        dst[j] = 0;                                        \
                    }                                                      \
                }                                                          \
                dst += nr_full;                                            \
            }                                                              \
        }                                                                  \
    }

/* THBlas.h: k = 784 runs as 200 + 200 + 200 + 184 rather than 3 x 256 +
 * 16, whose thin last block would pay the C tiles' loads and stores for
 * little work. */
int64_t
THBlas_balancedStep(int64_t extent, int64_t block, int64_t multiple)
{
    if (extent <= 0) {
        return block; /* nothing to split (and no zero to divide by) */
    }
    int64_t blocks = (extent + block - 1) / block;
    return min64(round_up((extent + blocks - 1) / blocks, multiple), block);
}

/* What the float loop nests' steps read (THBlasLoopNest's ctx). */
typedef struct {
    const GemmArgs *g;
    UKernel_float ukernel_float;
    UKernel_double ukernel_double;
    THBlasBlocking blocking; /* its mr: the tile's */
    bool b_in_place; /* Note [GEMM small products] */
    bool a_in_place; /* likewise; the tile is then the family's in_place */
} PackedProduct;

/* The columns of a block of B that the micro-kernel reads in place: its
 * full-width panels when B is read in place, else none. */
static int64_t
in_place_columns(const PackedProduct *pp, const THBlasBlockOfB *block)
{
    return pp->b_in_place ? block->nc / pp->blocking.nr * pp->blocking.nr : 0;
}

/* The steps of Note [GEMM blocking]'s loop nest (THBlasLoopNest):
 * pack_b_block packs the panels not read in place (into b_pack from its
 * start: B read in place needs room for one panel); multiply_rows packs
 * A's rows a block of MC at a time and runs the micro-kernel over the
 * tiles of those rows and the block's columns. */
#define TH_DEFINE_BLOCK_STEPS(T)                                           \
    static void pack_b_block_##T(void *ctx, const THBlasBlockOfB *block,   \
                                 int64_t panel0, int64_t panel1,           \
                                 void *b_pack)                             \
    {                                                                      \
        const PackedProduct *pp = ctx;                                     \
        const GemmArgs *g = pp->g;                                         \
        int nr = pp->blocking.nr;                                          \
        int64_t full = in_place_columns(pp, block);                        \
        int64_t first = panel0 * nr, end = min64(panel1 * nr, block->nc);  \
        if (first < full) {                                                \
            first = full;                                                  \
        }                                                                  \
        if (first >= end) {                                                \
            return;                                                        \
        }                                                                  \
        const T *b = (const T *)g->b.data + block->pc * g->b.row_stride    \
                     + (block->jc + first) * g->b.col_stride;              \
        pack_b_##T(block->kc, end - first, nr, b, g->b.row_stride,         \
                   g->b.col_stride, (T *)b_pack + (first - full) * block->kc); \
    }                                                                      \
    static void multiply_rows_##T(void *ctx, const THBlasBlockOfB *block,  \
                                  int64_t row0, int64_t row1,              \
                                  const void *b_pack, void *a_pack)        \
    {                                                                      \
        const PackedProduct *pp = ctx;                                     \
        const GemmArgs *g = pp->g;                                         \
        UKernel_##T ukernel = pp->ukernel_##T;                             \
        int mr_full = pp->blocking.mr, nr_full = pp->blocking.nr;          \
        int64_t kc = block->kc, nc = block->nc;                            \
        T alpha = (T)scalar_as_double(g->alpha);                           \
        T beta = block->pc == 0 ? (T)scalar_as_double(g->beta) : (T)1;     \
        int64_t a_rs = g->a.row_stride, a_cs = g->a.col_stride;            \
        int64_t b_rs = g->b.row_stride;                                    \
        int64_t c_rs = g->c.row_stride, c_cs = g->c.col_stride;            \
        const T *a = (const T *)g->a.data + block->pc * a_cs;              \
        const T *b_block = (const T *)g->b.data + block->pc * b_rs         \
                           + block->jc * g->b.col_stride;                  \
        T *c = (T *)g->c.data + block->jc * c_cs;                          \
        int64_t full = in_place_columns(pp, block);                        \
        int64_t mc_step = THBlas_balancedStep(row1 - row0,                 \
                                              pp->blocking.mc, mr_full);   \
        for (int64_t ic = row0; ic < row1; ic += mc_step) {                \
            int64_t mc = min64(mc_step, row1 - ic);                        \
            if (!pp->a_in_place) {                                         \
                pack_a_##T(mc, kc, mr_full, a + ic * a_rs, a_rs, a_cs,     \
                           a_pack);                                        \
            }                                                              \
            for (int64_t jr = 0; jr < nc; jr += nr_full) {                 \
                bool direct = jr < full;                                   \
                const T *panel = direct ? b_block + jr                     \
                                        : (const T *)b_pack                \
                                              + (jr - full) * kc;          \
                int64_t panel_rs = direct ? b_rs : nr_full;                \
                for (int64_t ir = 0; ir < mc; ir += mr_full) {             \
                    T *tile = c + (ic + ir) * c_rs + jr * c_cs;            \
                    const T *a_panel = pp->a_in_place                      \
                                           ? a + (ic + ir) * a_rs          \
                                           : (const T *)a_pack + ir * kc;  \
                    ukernel(kc, a_panel, a_rs, NULL, panel, panel_rs,      \
                            alpha, beta, tile, c_rs, c_cs,                 \
                            (int)min64(mr_full, mc - ir),                  \
                            (int)min64(nr_full, nc - jr));                 \
                }                                                          \
            }                                                              \
        }                                                                  \
    }

TH_DEFINE_COPY_PANEL_ROW(float)
TH_DEFINE_COPY_PANEL_ROW(double)
TH_DEFINE_PACK_A_COLUMNS(float)
TH_DEFINE_PACK_A_COLUMNS(double)
TH_DEFINE_PACKING(float)
TH_DEFINE_PACKING(double)
TH_DEFINE_BLOCK_STEPS(float)
TH_DEFINE_BLOCK_STEPS(double)

/* A float32 or float64 product's packed path: the family's tile for its
 * m (Note [The narrow tile]), the blocking for that tile, and whether B
 * is read in place (Note [GEMM small products]). */
static PackedProduct
packed_product(THDtype dtype, const GemmArgs *g)
{
    const KernelFamily *family = current_family();
    /* Note [GEMM small products] */
    int nr = dtype == TH_Float32 ? family->nr_float : family->nr_double;
    bool a_in_place = g->a.col_stride == 1 && g->n <= GEMM_FEW_PANELS * nr;
    GemmTile tile = a_in_place ? family->in_place : tile_for(family, g->m);
    PackedProduct pp = {
        .g = g,
        .ukernel_float = tile.ukernel_float,
        .ukernel_double = tile.ukernel_double,
        .blocking = blocking_for(family, THDtype_itemsize(dtype), tile.mr),
        .a_in_place = a_in_place,
    };
    pp.b_in_place = g->b.col_stride == 1
                    && (g->k * g->n <= pp.blocking.mc * pp.blocking.kc
                        || g->m <= GEMM_FEW_ROWS);
    return pp;
}

/* Its loop nest, whose steps read *pp. */
static THBlasLoopNest
loop_nest_of(THDtype dtype, const PackedProduct *pp)
{
    const GemmArgs *g = pp->g;
    const THBlasBlocking *bl = &pp->blocking;
    int itemsize = THDtype_itemsize(dtype);
    int64_t kc = min64(g->k, bl->kc);
    bool single = dtype == TH_Float32;
    return (THBlasLoopNest){
        .m = g->m, .n = g->n, .k = g->k,
        .mr = bl->mr, .nr = bl->nr,
        .nc = bl->nc, .kc_step = THBlas_balancedStep(g->k, bl->kc, 8),
        .a_bytes = pp->a_in_place ? GEMM_ALIGN /* unused */
                                  : (size_t)(round_up(min64(g->m, bl->mc), bl->mr)
                                             * kc * itemsize),
        .b_bytes = (size_t)((pp->b_in_place ? bl->nr
                                            : round_up(min64(g->n, bl->nc), bl->nr))
                            * kc * itemsize),
        .pack_b = single ? pack_b_block_float : pack_b_block_double,
        .multiply = single ? multiply_rows_float : multiply_rows_double,
        .ctx = (void *)pp,
    };
}

/* Note [One packed B for all threads]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * Split into bands of rows that are independent GEMMs, each thread
 * would pack all of B for its band: at two threads, the bfloat16
 * 1024 x 1024 x 1024 scaled from 180 to about 290 GFLOP/s on a Zen 4,
 * and float32 by 1.69-1.81x.  So a large product packs each (jc, pc)
 * block of B once, the threads taking shares of its micro-panels, and
 * then each thread multiplies its band of rows against the shared block,
 * packing its own A: two parallel loops per block of B, as BLIS shares
 * the B block among the threads of its inner loops.  The bands are
 * whole tiles (MR rows) cut as evenly as THParallel_for cuts; each
 * thread keeps one A buffer for all blocks (a slot taken in the order
 * the threads start, allocated on first use). */
typedef struct {
    const THBlasLoopNest *nest;
    THBlasBlockOfB block;
    void *b_pack;
    void *a_packs[TH_PARALLEL_MAX_THREADS];
    atomic_int next_slot; /* of a_packs, per parallel loop */
    atomic_bool out_of_memory;
} SharedBJob;

static void
run_pack_share(int64_t begin, int64_t end, void *ctx)
{
    SharedBJob *job = ctx;
    job->nest->pack_b(job->nest->ctx, &job->block, begin, end, job->b_pack);
}

static void
run_row_band(int64_t begin, int64_t end, void *ctx)
{
    SharedBJob *job = ctx;
    const THBlasLoopNest *nest = job->nest;
    /* at most one loop's chunks, so at most TH_PARALLEL_MAX_THREADS */
    int slot = atomic_fetch_add(&job->next_slot, 1);
    if (job->a_packs[slot] == NULL) {
        job->a_packs[slot] = THBlas_allocPack(nest->a_bytes);
        if (job->a_packs[slot] == NULL) {
            atomic_store(&job->out_of_memory, true);
            return;
        }
    }
    nest->multiply(nest->ctx, &job->block, begin * nest->mr,
                   min64(end * nest->mr, nest->m), job->b_pack,
                   job->a_packs[slot]);
}

/* One block of B: packed, then multiplied by all of A's rows. */
static void
run_block(SharedBJob *job, void *a_pack)
{
    const THBlasLoopNest *nest = job->nest;
    int64_t panels = (job->block.nc + nest->nr - 1) / nest->nr;
    if (a_pack != NULL) { /* on this thread */
        nest->pack_b(nest->ctx, &job->block, 0, panels, job->b_pack);
        nest->multiply(nest->ctx, &job->block, 0, nest->m, job->b_pack,
                       a_pack);
        return;
    }
    THParallel_for(panels, 1, run_pack_share, job);
    atomic_store(&job->next_slot, 0);
    THParallel_for((nest->m + nest->mr - 1) / nest->mr, 1, run_row_band, job);
}

bool
THBlas_runLoopNest(const THBlasLoopNest *nest, void *a_pack, void *b_pack)
{
    SharedBJob job = {.nest = nest, .b_pack = b_pack};
    atomic_init(&job.out_of_memory, false);
    atomic_init(&job.next_slot, 0);
    bool shared = a_pack == NULL;
    if (shared && (job.b_pack = THBlas_allocPack(nest->b_bytes)) == NULL) {
        return false;
    }
    for (int64_t jc = 0; jc < nest->n; jc += nest->nc) {
        for (int64_t pc = 0; pc < nest->k && !atomic_load(&job.out_of_memory);
             pc += nest->kc_step) {
            job.block = (THBlasBlockOfB){jc, min64(nest->nc, nest->n - jc), pc,
                                         min64(nest->kc_step, nest->k - pc)};
            run_block(&job, a_pack);
        }
    }
    if (shared) {
        free(job.b_pack);
        for (int slot = 0; slot < TH_PARALLEL_MAX_THREADS; slot++) {
            free(job.a_packs[slot]);
        }
    }
    return !atomic_load(&job.out_of_memory);
}

/* C^T = B^T @ A^T: the same product with rows and columns swapped. */
static GemmArgs
transposed_product(const GemmArgs *g)
{
    GemmArgs t = *g;
    t.m = g->n;
    t.n = g->m;
    t.a = THBlasMatrix_transposed(g->b);
    t.b = THBlasMatrix_transposed(g->a);
    t.c = THBlasMatrix_transposed(g->c);
    return t;
}

/* Matrix-vector products (m == 1 or n == 1) read each element of the
 * matrix once, so packing would only add traffic.  As a column c (m x 1)
 * = A (m x k) @ b (k x 1), they run
 *   - over contiguous rows of A: one dot product per output, four rows at
 *     a time (each vector of b loaded once for four rows);
 *   - over contiguous columns of A: c = sum_p b[p] * A[:, p], four columns
 *     at a time (c read and written once for four columns);
 *   - otherwise as the row-wise kernel on the transposed product. */
#define TH_DEFINE_GEMV(T, Name)                                            \
    static void gemv_rows_##T(const GemmArgs *g, T alpha, T beta)          \
    {                                                                      \
        const KernelFamily *family = current_family();                    \
        const T *b = (const T *)g->b.data;                                 \
        int64_t i = 0;                                                     \
        for (; i < g->m; i += 4) {                                         \
            int rows = (int)min64(4, g->m - i);                            \
            const T *row[4];                                               \
            T sum[4];                                                      \
            for (int r = 0; r < 4; r++) {                                  \
                row[r] = (const T *)g->a.data                              \
                         + (i + (r < rows ? r : 0)) * g->a.row_stride;     \
            }                                                              \
            if (rows == 4) {                                               \
                family->dot4_##T(g->k, row, b, sum);                       \
            } else {                                                       \
                for (int r = 0; r < rows; r++) {                           \
                    sum[r] = family->dot_##T(g->k, row[r], b);             \
                }                                                          \
            }                                                              \
            for (int r = 0; r < rows; r++) {                               \
                T *out = (T *)g->c.data + (i + r) * g->c.row_stride;       \
                *out = beta == 0 ? alpha * sum[r]                          \
                                 : alpha * sum[r] + beta * *out;           \
            }                                                              \
        }                                                                  \
    }                                                                      \
    static void gemv_columns_##T(const GemmArgs *g, T alpha, T beta)       \
    {                                                                      \
        const KernelFamily *family = current_family();                    \
        T *c = (T *)g->c.data;                                             \
        for (int64_t i = 0; i < g->m; i++) {                               \
            c[i] = beta == 0 ? (T)0 : beta * c[i];                         \
        }                                                                  \
        const T *b = (const T *)g->b.data;                                 \
        for (int64_t p = 0; p < g->k; p += 4) {                            \
            const T *col[4];                                               \
            T scale[4];                                                    \
            for (int q = 0; q < 4; q++) {                                  \
                bool real = p + q < g->k; /* pad with zero-scaled copies */ \
                int64_t pq = real ? p + q : p;                             \
                col[q] = (const T *)g->a.data + pq * g->a.col_stride;      \
                scale[q] = real ? alpha * b[pq * g->b.row_stride] : (T)0;  \
            }                                                              \
            family->axpy4_##T(g->m, scale, col, c);                        \
        }                                                                  \
    }                                                                      \
    static void gemv_##T(const GemmArgs *g_in)                             \
    {                                                                      \
        GemmArgs g = g_in->n == 1 ? *g_in : transposed_product(g_in);      \
        T alpha = (T)scalar_as_double(g.alpha);                            \
        T beta = (T)scalar_as_double(g.beta);                              \
        if (g.a.col_stride == 1 && g.b.row_stride == 1) {                  \
            gemv_rows_##T(&g, alpha, beta);                                \
        } else if (g.a.row_stride == 1 && g.c.row_stride == 1) {           \
            gemv_columns_##T(&g, alpha, beta);                             \
        } else {                                                           \
            GemmArgs t = transposed_product(&g);                           \
            gemm_rowwise_##Name(&t);                                       \
        }                                                                  \
    }

TH_DEFINE_GEMV(float, Float32)
TH_DEFINE_GEMV(double, Float64)

/* ---- drivers ---------------------------------------------------------------- */

static bool
is_packed_dtype(THDtype dtype)
{
    return dtype == TH_Float32 || dtype == TH_Float64;
}

static int
nr_for(THDtype dtype)
{
    const KernelFamily *family = current_family();
    return dtype == TH_Float32 ? family->nr_float : family->nr_double;
}

static int
mr_for(void)
{
    return current_family()->tiles[0].mr;
}

/* The kernel a product runs on (Note [GEMM small products]). */
typedef enum {
    GEMM_PATH_ROWWISE, /* small products, other dtypes, k == 0 */
    GEMM_PATH_GEMV,    /* m == 1 or n == 1 */
    GEMM_PATH_DOT_BLOCKS,
    GEMM_PATH_PACKED,
} GemmPath;

static GemmPath
gemm_path(THDtype dtype, const GemmArgs *g)
{
    if (!is_packed_dtype(dtype)) {
        return GEMM_PATH_ROWWISE;
    }
    if (g->m == 1 || g->n == 1) {
        return GEMM_PATH_GEMV;
    }
    if (g->n < nr_for(dtype) && g->a.col_stride == 1
        && g->b.row_stride == 1) {
        return GEMM_PATH_DOT_BLOCKS;
    }
    return g->m * g->n * g->k >= GEMM_SMALL_WORK ? GEMM_PATH_PACKED
                                                 : GEMM_PATH_ROWWISE;
}

/* Note [GEMM small products]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * Packing pays for itself when each packed value is read many times; in
 * a small product it is read few times and copying costs as much as the
 * multiply-adds.  So the path is picked by shape:
 *   - fewer columns than NR with A's rows and B's columns contiguous
 *     (linear's x @ W.t() with a small output layer): blocks of dot
 *     products read in place along both contiguous operands, where a
 *     packed tile would be mostly zero padding (Note [GEMM with few
 *     columns]);
 *   - B with contiguous rows whose whole k x n fits the A block's budget
 *     (half of L2): the micro-kernel reads B's full-width panels in place,
 *     from L2, and only the last, partial panel is packed;
 *   - likewise B with contiguous rows under an A of at most GEMM_FEW_ROWS
 *     rows (a recurrent layer's per-step h @ W_hh^T, batch 20): its few
 *     row tiles meet each B panel a few times, so packing it (a read and
 *     a write of all of B per product) cost more than it saved.  On the
 *     Zen 4, one thread, thread CPU time, (20 x 256) @ (256 x 1024) went
 *     from ~157 to ~124 us float32 and (8 x 256) @ (256 x 1024) from ~77
 *     to ~44 us; m = 32 with k, n up to 4096 ran faster too;
 *   - A with contiguous rows under at most GEMM_FEW_PANELS panels of B's
 *     columns (a batch of 64 x 64 products, linear's 64x784 @
 *     (128x784).t()): each A tile meets at most four B panels, so packing
 *     A (a transpose of its rows) cost as much as a sixth of the product;
 *     the narrow tile's micro-kernel then reads A in place
 *     (family->in_place: one pointer plus MR row offsets, the rows of a
 *     partial last tile pointed at row 0 and dropped), and 8 x 64x64x64
 *     float32 went from ~47 to ~42 us.  Up to two panels at first; four
 *     since that kernel reads A by embedded broadcasts (Note [Broadcast
 *     operands of the micro-kernel]): C harness, one thread, thread CPU
 *     time, float32, AVX-512, 64x784 @ (128x784).t() ~131 -> ~125 us,
 *     128x128 @ 128x128 38.7 -> 37.2, 64x784 @ 784x96 95.4 -> 88.2; AVX2
 *     (two to four panels: 32 to 64 columns) 128x128 @ 128x64 22.6 ->
 *     20.5 us and 64x784 @ 784x48 53.3 -> 46.5.
 * A small product's packing buffers (up to GEMM_STACK_WORKSPACE bytes)
 * live on the stack: a malloc and a free per product cost a tenth of a
 * 10 x 128 x 64 product. */
#define TH_DEFINE_DOT_BLOCKS(T)                                            \
    static void gemm_dot_blocks_##T(const GemmArgs *g)                     \
    {                                                                      \
        const KernelFamily *family = current_family();                    \
        int vlen = (sizeof(T) == 4 ? family->nr_float                      \
                                   : family->nr_double) / 2;               \
        int cols_step = vlen >= 2 ? 2 : 1, rows_step = vlen / cols_step; \
        T alpha = (T)scalar_as_double(g->alpha);                           \
        T beta = (T)scalar_as_double(g->beta);                             \
        const T *a = (const T *)g->a.data, *b = (const T *)g->b.data;      \
        T *c = (T *)g->c.data;                                             \
        int64_t a_rs = g->a.row_stride, b_cs = g->b.col_stride;            \
        int64_t c_rs = g->c.row_stride, c_cs = g->c.col_stride;            \
        /* A's rows outermost: each block of them meets all of B (fewer    \
         * than NR rows of W, which stay in cache) once */                 \
        for (int64_t i = 0; i < g->m; i += rows_step) {                    \
            for (int64_t j = 0; j < g->n; j += cols_step) {                \
                family->dot_block_##T(                                     \
                    g->k, a + i * a_rs, a_rs, b + j * b_cs, b_cs,          \
                    (int)min64(rows_step, g->m - i),                       \
                    (int)min64(cols_step, g->n - j), alpha, beta,          \
                    c + i * c_rs + j * c_cs, c_rs, c_cs);                  \
            }                                                              \
        }                                                                  \
    }
TH_DEFINE_DOT_BLOCKS(float)
TH_DEFINE_DOT_BLOCKS(double)

/* Points *ws at `room` (GEMM_STACK_WORKSPACE bytes on the caller's
 * stack) when the nest's buffers fit there, else allocates them (*heap
 * then true, for workspace_free).  Returns false when out of memory.  A
 * small product's buffers live on the stack: a malloc and a free each
 * cost a tenth of a 10 x 128 x 64 product. */
static bool
workspace_take(GemmWorkspace *ws, const THBlasLoopNest *nest,
               unsigned char *room, bool *heap)
{
    size_t a_room = (size_t)round_up((int64_t)nest->a_bytes, GEMM_ALIGN);
    *heap = a_room + nest->b_bytes > GEMM_STACK_WORKSPACE;
    if (*heap) {
        return workspace_alloc(ws, nest);
    }
    *ws = (GemmWorkspace){room, room + a_room};
    return true;
}

/* After the family's vector loops outside the micro-kernels (Note [Vector
 * kernels call no plain code] in THGeneral.h). */
static void
leave_family_vectors(void)
{
    if (strcmp(current_family()->name, "generic") != 0) {
        TH_ZERO_UPPER();
    }
}

/* One product on the calling thread.  Returns false when allocating its
 * packing buffers failed (nothing written then). */
static bool
gemm_one_thread(THDtype dtype, const GemmArgs *g)
{
    if (g->m == 0 || g->n == 0) {
        return true;
    }
    bool single = dtype == TH_Float32;
    switch (gemm_path(dtype, g)) {
    case GEMM_PATH_ROWWISE:
        rowwise_gemms[dtype](g);
        leave_family_vectors();
        return true;
    case GEMM_PATH_GEMV:
        single ? gemv_float(g) : gemv_double(g);
        leave_family_vectors();
        return true;
    case GEMM_PATH_DOT_BLOCKS:
        single ? gemm_dot_blocks_float(g) : gemm_dot_blocks_double(g);
        leave_family_vectors();
        return true;
    case GEMM_PATH_PACKED:
        break;
    }
    PackedProduct pp = packed_product(dtype, g);
    THBlasLoopNest nest = loop_nest_of(dtype, &pp);
    _Alignas(GEMM_ALIGN) unsigned char on_stack[GEMM_STACK_WORKSPACE];
    GemmWorkspace ws;
    bool heap;
    if (!workspace_take(&ws, &nest, on_stack, &heap)) {
        return false;
    }
    THBlas_runLoopNest(&nest, ws.a_pack, ws.b_pack);
    if (heap) {
        workspace_free(&ws);
    }
    return true;
}

/* One large product split over threads by bands of columns (when it is
 * wider than tall), or of rows when it does not take the packed path:
 * each band is an independent GEMM with its own packing buffers. */
typedef struct {
    THDtype dtype;
    GemmArgs whole;
    bool split_rows;
    int64_t unit; /* rows or columns per unit of work */
    atomic_bool out_of_memory;
} BandJob;

static void
run_bands(int64_t begin, int64_t end, void *ctx)
{
    BandJob *job = ctx;
    GemmArgs band = job->whole;
    int itemsize = THDtype_itemsize(job->dtype);
    int64_t first = begin * job->unit;
    if (job->split_rows) {
        band.m = min64(end * job->unit, band.m) - first;
        band.a.data += first * band.a.row_stride * itemsize;
        band.c.data += first * band.c.row_stride * itemsize;
    } else {
        band.n = min64(end * job->unit, band.n) - first;
        band.b.data += first * band.b.col_stride * itemsize;
        band.c.data += first * band.c.col_stride * itemsize;
    }
    if (!gemm_one_thread(job->dtype, &band)) {
        atomic_store(&job->out_of_memory, true);
    }
}

static int
out_of_memory(void)
{
    return THError_set(TH_ERR_MEMORY,
                       "out of memory allocating GEMM packing buffers");
}

static int64_t
work_of(int64_t m, int64_t n, int64_t k)
{
    return m * n * (k > 0 ? k : 1);
}

int
THBlas_gemm(THDtype dtype, int64_t m, int64_t n, int64_t k, THScalar alpha,
            THBlasMatrix a, THBlasMatrix b, THScalar beta, THBlasMatrix c)
{
    if (THDtype_isHalf(dtype)) { /* Note [Half-precision matmul] */
        return THError_set(TH_ERR_RUNTIME,
                           "THBlas_gemm: %s matrices go through "
                           "THBlas_gemmTensor",
                           THDtype_name(dtype));
    }
    if (scalar_is_zero(alpha)) {
        k = 0; /* A and B are not read (THBlas.h) */
    }
    GemmArgs g = {m, n, k, alpha, beta, a, b, c};
    if (!is_packed_dtype(dtype) || work_of(m, n, k) < GEMM_PARALLEL_WORK
        || THParallel_getNumThreads() == 1) {
        return gemm_one_thread(dtype, &g) ? 0 : out_of_memory();
    }
    if (m >= n && gemm_path(dtype, &g) == GEMM_PATH_PACKED) {
        /* Note [One packed B for all threads] */
        PackedProduct pp = packed_product(dtype, &g);
        THBlasLoopNest nest = loop_nest_of(dtype, &pp);
        return THBlas_runLoopNest(&nest, NULL, NULL) ? 0 : out_of_memory();
    }
    BandJob job = {.dtype = dtype, .whole = g, .split_rows = m >= n};
    job.unit = job.split_rows ? mr_for() : nr_for(dtype);
    atomic_init(&job.out_of_memory, false);
    int64_t extent = job.split_rows ? m : n;
    int64_t units = (extent + job.unit - 1) / job.unit;
    /* Each band gets at least GEMM_PARALLEL_WORK / 2 multiply-adds. */
    int64_t unit_work = job.unit * (job.split_rows ? n : m) * k;
    int64_t grain = GEMM_PARALLEL_WORK / 2 / unit_work + 1;
    THParallel_for(units, grain, run_bands, &job);
    return atomic_load(&job.out_of_memory) ? out_of_memory() : 0;
}

/* Note [One packed B for many products]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * A recurrent layer multiplies the same W_hh by a new A at every time
 * step: (B x S) h_{t-1} @ W_hh^T (S x 4H) forward, (B x 4H) dgates @ W_hh
 * backward, with a batch B of a few dozen rows.  Packing W_hh per step
 * costs as much as the product it serves (Note [GEMM small products]), so
 * those products read B in place: W_hh^T was first copied row-major, a
 * scalar transpose per forward, and every step's micro-kernel then walked
 * a panel of it with rows 4 KiB apart (1 KiB in the backward), lines
 * that share a few L1 sets.  THBlas_packB instead packs B once into the
 * micro-panels the packed kernel reads (the 4x4-transpose packer for
 * W_hh^T), every block of k after the one before, each block's panels
 * side by side:
 *
 *   block pc (kc rows) at pc * round_up(n, NR) elements, its panel of
 *   columns [j, j + NR) at j * kc within it,
 *
 * and THBlas_gemmPackedB runs each step's product on those panels: the
 * same tile, k-blocking and micro-kernel as THBlas_gemm's packed path,
 * so each element of C gets the same value.  The panels are tied to the
 * family and k-blocking in use when packed; a product after either
 * changed, or one THBlas_gemm would not run packed (m == 1: the
 * matrix-vector kernel), runs THBlas_gemm on the kept B.  With more
 * threads each takes a range of the panels, all of k: an element of C is
 * computed by one thread in one order, whatever the count. */

/* The k-blocking the packed path uses for a k-row B under `family`
 * (loop_nest_of's kc_step: it depends on the family and cache sizes, not
 * on m, whose tile only changes MR). */
static int64_t
packed_kc_step(const KernelFamily *family, THDtype dtype, int64_t k)
{
    THBlasBlocking bl = blocking_for(family, THDtype_itemsize(dtype),
                                     family->tiles[0].mr);
    return THBlas_balancedStep(k, bl.kc, 8);
}

int
THBlas_packB(THDtype dtype, int64_t k, int64_t n, THBlasMatrix b,
             THBlasPackedB *out)
{
    const KernelFamily *family = current_family();
    *out = (THBlasPackedB){.dtype = dtype, .k = k, .n = n, .b = b,
                           .family = family};
    if (!is_packed_dtype(dtype) || k <= 0 || n <= 0) {
        return 0; /* THBlas_gemm's kernels read b */
    }
    int nr = nr_for(dtype);
    int64_t width = round_up(n, nr);
    out->kc_step = packed_kc_step(family, dtype, k);
    out->panels = THBlas_allocPack((size_t)(k * width * THDtype_itemsize(dtype)));
    if (out->panels == NULL) {
        return out_of_memory();
    }
    for (int64_t pc = 0; pc < k; pc += out->kc_step) {
        int64_t kc = min64(out->kc_step, k - pc);
        if (dtype == TH_Float32) {
            pack_b_float(kc, n, nr, (const float *)b.data + pc * b.row_stride,
                         b.row_stride, b.col_stride,
                         (float *)out->panels + pc * width);
        } else {
            pack_b_double(kc, n, nr, (const double *)b.data + pc * b.row_stride,
                          b.row_stride, b.col_stride,
                          (double *)out->panels + pc * width);
        }
    }
    return 0;
}

void
THBlas_freePackedB(THBlasPackedB *packed)
{
    free(packed->panels);
    packed->panels = NULL;
}

/* A product on packed panels, its columns shared out by panels. */
typedef struct {
    const THBlasPackedB *packed;
    PackedProduct pp;
    size_t a_bytes;
    atomic_bool out_of_memory;
} PackedBJob;

/* The products' panels [begin, end), all of k, on the calling thread. */
static void
run_packed_panels(int64_t begin, int64_t end, void *ctx)
{
    PackedBJob *job = ctx;
    const THBlasPackedB *packed = job->packed;
    const GemmArgs *g = job->pp.g;
    int nr = job->pp.blocking.nr;
    int itemsize = THDtype_itemsize(packed->dtype);
    _Alignas(GEMM_ALIGN) unsigned char on_stack[GEMM_STACK_WORKSPACE];
    void *a_pack = job->a_bytes <= sizeof on_stack
                       ? (void *)on_stack
                       : THBlas_allocPack(job->a_bytes);
    if (a_pack == NULL) {
        atomic_store(&job->out_of_memory, true);
        return;
    }
    int64_t width = round_up(packed->n, nr);
    int64_t jc = begin * nr;
    for (int64_t pc = 0; pc < g->k; pc += packed->kc_step) {
        THBlasBlockOfB block = {jc, min64(end * nr, g->n) - jc, pc,
                                min64(packed->kc_step, g->k - pc)};
        const char *panels = (const char *)packed->panels
                             + (pc * width + jc * block.kc) * itemsize;
        if (packed->dtype == TH_Float32) {
            multiply_rows_float(&job->pp, &block, 0, g->m, panels, a_pack);
        } else {
            multiply_rows_double(&job->pp, &block, 0, g->m, panels, a_pack);
        }
    }
    if (a_pack != on_stack) {
        free(a_pack);
    }
}

int
THBlas_gemmPackedB(int64_t m, THScalar alpha, THBlasMatrix a,
                   const THBlasPackedB *packed, THScalar beta, THBlasMatrix c)
{
    THDtype dtype = packed->dtype;
    GemmArgs g = {m, packed->n, packed->k, alpha, beta, a, packed->b, c};
    const KernelFamily *family = current_family();
    if (packed->panels == NULL || family != packed->family
        || packed_kc_step(family, dtype, packed->k) != packed->kc_step
        || scalar_is_zero(alpha) || m == 0
        || gemm_path(dtype, &g) != GEMM_PATH_PACKED) {
        return THBlas_gemm(dtype, m, packed->n, packed->k, alpha, a, packed->b,
                           beta, c);
    }
    PackedBJob job = {.packed = packed, .pp = packed_product(dtype, &g)};
    job.pp.b_in_place = false; /* the panels are read */
    THBlasLoopNest nest = loop_nest_of(dtype, &job.pp);
    job.a_bytes = nest.a_bytes;
    atomic_init(&job.out_of_memory, false);
    int nr = job.pp.blocking.nr;
    int64_t panels = (g.n + nr - 1) / nr;
    if (work_of(m, g.n, g.k) < GEMM_PARALLEL_WORK
        || THParallel_getNumThreads() == 1) {
        run_packed_panels(0, panels, &job);
    } else {
        /* each thread's share gets at least GEMM_PARALLEL_WORK / 2 */
        int64_t grain = GEMM_PARALLEL_WORK / 2 / (m * nr * g.k) + 1;
        THParallel_for(panels, grain, run_packed_panels, &job);
    }
    return atomic_load(&job.out_of_memory) ? out_of_memory() : 0;
}

/* Many small products: each thread takes a range of them. */
typedef struct {
    THDtype dtype;
    GemmArgs first;
    const int64_t *offsets[3];
    atomic_bool out_of_memory;
} BatchJob;

static void
run_batch(int64_t begin, int64_t end, void *ctx)
{
    BatchJob *job = ctx;
    int itemsize = THDtype_itemsize(job->dtype);
    GemmArgs g = job->first;
    bool packed = gemm_path(job->dtype, &g) == GEMM_PATH_PACKED;
    /* The products of the range share one shape, so one packed path,
     * loop nest and workspace serve them all (pp and the nest read g's
     * matrices, moved to each product in turn): worked out per product,
     * they cost a twentieth of a 64 x 64 x 64 product. */
    PackedProduct pp = {0};
    THBlasLoopNest nest = {0};
    _Alignas(GEMM_ALIGN) unsigned char on_stack[GEMM_STACK_WORKSPACE];
    GemmWorkspace ws = {NULL, NULL};
    bool heap = false;
    if (packed) {
        pp = packed_product(job->dtype, &g);
        nest = loop_nest_of(job->dtype, &pp);
        if (!workspace_take(&ws, &nest, on_stack, &heap)) {
            atomic_store(&job->out_of_memory, true);
            return;
        }
    }
    for (int64_t i = begin; i < end; i++) {
        g.a.data = job->first.a.data + job->offsets[0][i] * itemsize;
        g.b.data = job->first.b.data + job->offsets[1][i] * itemsize;
        g.c.data = job->first.c.data + job->offsets[2][i] * itemsize;
        if (packed) {
            THBlas_runLoopNest(&nest, ws.a_pack, ws.b_pack);
        } else if (!gemm_one_thread(job->dtype, &g)) {
            atomic_store(&job->out_of_memory, true);
            break;
        }
    }
    if (heap) {
        workspace_free(&ws);
    }
}

/* Large products of a batch run one after another, each split over all
 * threads, unless whole products already keep every thread busy: on one
 * thread, or when they share out evenly or are many.  Then each thread
 * takes a range of them with one workspace, instead of every product
 * paying a thread hand-off and its own packing buffers (8 x 64x64x64). */
static bool
whole_products_per_thread(int64_t batch)
{
    int threads = THParallel_getNumThreads();
    return threads == 1 || batch % threads == 0 || batch >= 4 * threads;
}

int
THBlas_gemmBatched(THDtype dtype, int64_t batch, int64_t m, int64_t n,
                   int64_t k, THScalar alpha, THBlasMatrix a,
                   const int64_t *a_offsets, THBlasMatrix b,
                   const int64_t *b_offsets, THScalar beta, THBlasMatrix c,
                   const int64_t *c_offsets)
{
    if (scalar_is_zero(alpha)) {
        k = 0; /* A and B are not read (THBlas.h) */
    }
    if (THDtype_isHalf(dtype)) {
        return THError_set(TH_ERR_RUNTIME,
                           "THBlas_gemmBatched: %s matrices go through "
                           "THBlas_gemmTensor",
                           THDtype_name(dtype));
    }
    int64_t work = work_of(m, n, k);
    if (work >= GEMM_PARALLEL_WORK && !whole_products_per_thread(batch)) {
        int itemsize = THDtype_itemsize(dtype);
        for (int64_t i = 0; i < batch; i++) {
            THBlasMatrix ai = a, bi = b, ci = c;
            ai.data += a_offsets[i] * itemsize;
            bi.data += b_offsets[i] * itemsize;
            ci.data += c_offsets[i] * itemsize;
            if (THBlas_gemm(dtype, m, n, k, alpha, ai, bi, beta, ci) < 0) {
                return -1;
            }
        }
        return 0;
    }
    BatchJob job = {.dtype = dtype,
                    .first = {m, n, k, alpha, beta, a, b, c},
                    .offsets = {a_offsets, b_offsets, c_offsets}};
    atomic_init(&job.out_of_memory, false);
    int64_t grain = work >= GEMM_PARALLEL_WORK ? 1
                                               : GEMM_PARALLEL_WORK / 2 / work + 1;
    THParallel_for(batch, grain, run_batch, &job);
    return atomic_load(&job.out_of_memory) ? out_of_memory() : 0;
}

/* ---- a gathered B (Note [GEMM with a gathered B]) ---------------------------- */

/* Note [GEMM with a gathered B]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * An implicit GEMM: B exists only as a rule for finding its values (a
 * convolution's columns are windows of the input image), so instead of
 * pack_b copying a stored kc x nc block, a caller-given gather_b packs
 * each kc x NR micro-panel straight from the source, and C leaves through
 * a caller-given scatter_c an NR-column panel at a time (a convolution's
 * output columns are scattered over samples, and the bias is added on
 * the way).  The loop nest keeps the whole product's A packed once
 * (round_up(m, MR) x k, every KC block one after another) and walks B's
 * micro-panels outermost:
 *
 *   for jr in steps of NR                        (split over threads)
 *     for pc in steps of KC
 *       gather_b: B[pc:pc+KC, jr:jr+NR] into an L1-resident panel
 *       for ir in steps of MR:
 *         micro-kernel: Cpanel[ir:ir+MR] (+)= A-panel @ B-panel
 *     scatter_c(Cpanel)
 *
 * Each B value is gathered once and meets all of A from the cache, and
 * the m x NR column panel of C stays in L1 across the KC blocks; the
 * order suits the convolution's products, whose A (the weight) is small
 * and whose n (positions times samples) is large.  A larger than L2 (a
 * 3x3 convolution's weight from 256 channels on: 256 x 2304 floats) would
 * stream from L3 once per micro-panel of B, which cost about a tenth of
 * the micro-kernel's rate on a Zen 4; so the panels then go a group at a
 * time (up to PANEL_GROUP, their C panels in a quarter of L2): each KC
 * block of A serves the whole group, panel after gathered panel, from L2
 * before the next block comes, and A streams from L3 once per group.
 *
 * Note [The narrow tile]
 * ~~~~~~~~~~~~~~~~~~~~~~
 * Packed A is padded to a multiple of MR rows and the micro-kernel always
 * runs all MR: a 32-channel convolution (m = 32) under the AVX-512 tile
 * (MR = 14) computes 42 rows, 64 channels 70.  Each family therefore has
 * a second micro-kernel, the same code with a narrower tile (8 rows for
 * AVX-512, 4 for AVX2 and the portable build), which divides the usual
 * channel counts, and the batch-64 products of an MLP (m = 64: 70 rows
 * under the wide tile, 64 under the narrow one).  AVX-512 has a third,
 * of 10 rows, for the MLP's backward g.t() @ x through a 10-class output
 * (m = 10: 14 or 16 rows under the others; 28 multiply-adds of every 20
 * wasted, and (64x10).t() @ 64x128 ran 3.2 us, 2.6 with the 10-row
 * tile).  tile_for takes the tile that pads m to the fewest rows, the
 * widest of those (fewer tiles, each meeting B once), for every packed
 * product: the
 * gathered GEMM, THBlas_gemm (each thread's band of rows choosing for
 * itself) and the batched products; the blocking's MC and the packing of
 * A follow the tile chosen.  On the Zen 4 this was measured on, the
 * 8 x 32 tile runs the multiply-adds as fast as the 14 x 32 one from the
 * panels in L1 and L2
 * (its 16 accumulators cover the FMA latency; the loads are not the
 * bound). */

/* The most micro-panels of B one pass over A serves (Note [GEMM with a
 * gathered B]). */
#define PANEL_GROUP 8

typedef struct {
    const KernelFamily *family;
    GemmTile tile; /* Note [The narrow tile] */
    THBlasBlocking blocking; /* its mr: tile.mr */
    int itemsize;
    int64_t m, n, k;
    int64_t m_padded; /* round_up(m, MR): the rows of packed A and of Cpanel */
    int64_t kc_step;
    int64_t group; /* B micro-panels per pass over A */
    const void *a_packed; /* KC block after KC block, as pack_a lays them */
    THBlasGatherB gather_b;
    THBlasScatterC scatter_c;
    void *ctx;
    atomic_bool out_of_memory;
} GatheredJob;

#define TH_DEFINE_GATHERED(T)                                              \
    static void pack_all_a_##T(GatheredJob *job, THBlasMatrix a, T *dst)   \
    {                                                                      \
        for (int64_t pc = 0; pc < job->k; pc += job->kc_step) {            \
            int64_t kc = min64(job->kc_step, job->k - pc);                 \
            pack_a_##T(job->m, kc, job->blocking.mr,                       \
                       (const T *)a.data + pc * a.col_stride, a.row_stride, \
                       a.col_stride, dst + job->m_padded * pc);            \
        }                                                                  \
    }                                                                      \
    /* C panels [0, count) = A @ B's micro-panels first, first + 1, ... */ \
    static void gathered_group_##T(const GatheredJob *job, int64_t first,  \
                                   int64_t count, T *b_panel, T *c_panels) \
    {                                                                      \
        UKernel_##T ukernel = job->tile.ukernel_##T;                       \
        int mr = job->blocking.mr, nr = job->blocking.nr;                  \
        int64_t c_size = job->m_padded * nr;                               \
        const T *a_packed = job->a_packed;                                 \
        if (job->k == 0) {                                                 \
            memset(c_panels, 0, (size_t)(count * c_size) * sizeof(T));     \
        }                                                                  \
        for (int64_t pc = 0; pc < job->k; pc += job->kc_step) {            \
            int64_t kc = min64(job->kc_step, job->k - pc);                 \
            const T *a_block = a_packed + job->m_padded * pc;              \
            for (int64_t g = 0; g < count; g++) {                          \
                job->gather_b(job->ctx, pc, kc, (first + g) * nr, nr,      \
                              (char *)b_panel);                            \
                T *c_panel = c_panels + g * c_size;                        \
                for (int64_t ir = 0; ir < job->m; ir += mr) {              \
                    ukernel(kc, a_block + ir * kc, 0, NULL, b_panel, nr,   \
                            (T)1, pc == 0 ? (T)0 : (T)1, c_panel + ir * nr, \
                            nr, 1, mr, nr);                                \
                }                                                          \
            }                                                              \
        }                                                                  \
        for (int64_t g = 0; g < count; g++) {                              \
            int64_t j0 = (first + g) * nr;                                 \
            job->scatter_c(job->ctx, j0, min64(nr, job->n - j0),           \
                           (const char *)(c_panels + g * c_size), nr);     \
        }                                                                  \
    }

TH_DEFINE_GATHERED(float)
TH_DEFINE_GATHERED(double)

/* Panels [begin, end) on one thread, a group at a time, with its own B
 * panel and group of C panels. */
static void
run_gathered(int64_t begin, int64_t end, void *ctx)
{
    GatheredJob *job = ctx;
    int itemsize = job->itemsize;
    int64_t nr = job->blocking.nr;
    /* (kc + 1) rows: gather_b may write one row past the panel */
    size_t b_bytes = (size_t)round_up((job->kc_step + 1) * nr * itemsize, GEMM_ALIGN);
    size_t c_bytes = (size_t)(job->group * job->m_padded * nr * itemsize);
    void *b_panel, *c_panels;
    if (!THBlas_allocPackBuffers(&b_panel, b_bytes, &c_panels, c_bytes)) {
        atomic_store(&job->out_of_memory, true);
        return;
    }
    memset(b_panel, 0, b_bytes); /* the columns past n start defined */
    for (int64_t first = begin; first < end; first += job->group) {
        int64_t count = min64(job->group, end - first);
        if (itemsize == 4) {
            gathered_group_float(job, first, count, b_panel, c_panels);
        } else {
            gathered_group_double(job, first, count, b_panel, c_panels);
        }
    }
    free(b_panel);
    free(c_panels);
}

/* B micro-panels per pass over A: 1 while packed A fits in L2, else as
 * many as fill a quarter of L2 with their C panels, at most PANEL_GROUP
 * (Note [GEMM with a gathered B]). */
static int64_t
panel_group(const GatheredJob *job)
{
    int64_t caches[NUM_CACHE_LEVELS];
    THBlas_cacheSizes(caches);
    int64_t a_bytes = job->m_padded * job->k * job->itemsize;
    int64_t c_bytes = job->m_padded * job->blocking.nr * job->itemsize;
    if (a_bytes <= caches[CACHE_L2]) {
        return 1;
    }
    return clamp64(caches[CACHE_L2] / 4 / c_bytes, 1, PANEL_GROUP);
}

int
THBlas_gemmGathered(THDtype dtype, int64_t m, int64_t n, int64_t k,
                    THBlasMatrix a, THBlasGatherB gather_b,
                    THBlasScatterC scatter_c, void *ctx)
{
    if (!is_packed_dtype(dtype)) {
        return THError_set(TH_ERR_VALUE,
                           "THBlas_gemmGathered: %s does not take the packed GEMM",
                           THDtype_name(dtype));
    }
    if (m == 0 || n == 0) {
        return 0;
    }
    int itemsize = THDtype_itemsize(dtype);
    GatheredJob job = {.family = current_family(), .itemsize = itemsize,
                       .m = m, .n = n, .k = k,
                       .gather_b = gather_b, .scatter_c = scatter_c, .ctx = ctx};
    job.tile = tile_for(job.family, m);
    job.blocking = blocking_for(job.family, itemsize, job.tile.mr);
    job.m_padded = round_up(m, job.blocking.mr);
    job.kc_step = k > 0 ? THBlas_balancedStep(k, job.blocking.kc, 8) : 1;
    job.group = panel_group(&job);
    atomic_init(&job.out_of_memory, false);
    int64_t packed_count;
    if (TH_mul_overflows(job.m_padded, k > 0 ? k : 1, &packed_count)) {
        return out_of_memory();
    }
    void *a_packed = TH_mallocArray(packed_count, (size_t)itemsize,
                                    "the GEMM's packed A");
    if (a_packed == NULL) {
        return -1;
    }
    if (dtype == TH_Float32) {
        pack_all_a_float(&job, a, a_packed);
    } else {
        pack_all_a_double(&job, a, a_packed);
    }
    job.a_packed = a_packed;
    int64_t panels = (n + job.blocking.nr - 1) / job.blocking.nr;
    int64_t panel_work = work_of(m, job.blocking.nr, k);
    THParallel_for(panels, GEMM_PARALLEL_WORK / 2 / panel_work + 1, run_gathered, &job);
    free(a_packed);
    return atomic_load(&job.out_of_memory) ? out_of_memory() : 0;
}

/* ---- a tapped A (Note [GEMM with a tapped A]) -------------------------------- */

/* Note [GEMM with a tapped A]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * The other way round from a gathered B: A is read in place, never
 * packed, because each of its MR-row blocks is one base pointer plus a
 * column offset per k step.  In a stride-1 convolution computed
 * transposed (C^T = columns^T @ W^T: rows are output positions, columns
 * are output channels), the MR positions of a block that lie on one
 * output line read tap p of the padded input from base + taps[p] on, MR
 * consecutive values: exactly what a packed A micro-panel's column is,
 * only found through taps[p] instead of at p * MR.  So the micro-kernel
 * reads A's column p at a + taps[p] (A_TAPS: one more scalar load per k
 * step, the broadcasts still embedded), B (the weight transposed, k x n)
 * is packed once into its NR-column panels, and nothing is gathered:
 *
 *   for each row block r                        (split over threads)
 *     a = A + row_block(r)                      (its first row's values)
 *     for jr in steps of NR
 *       micro-kernel: tile[:, jr:jr+NR] = A-block @ B-panel (all k)
 *     tile_out(r, tile)                         (the caller stores it)
 *
 * k is not blocked: B streams from L2 along the k steps, or from L3 when
 * it outgrows L2 (a convolution's weight from 256 channels of 3x3 on:
 * each value is 2 * MR flops, which L3 keeps up with; THConv.c's
 * direct_rows), while the block's reads of the input stay in L1 (a tap
 * of the next channel is the next plane of the same lines).  A block's rows
 * past its `rows` are computed (reading up to MR - 1 values past the last
 * row's) and not handed on.
 *
 * Note [Skipping zero taps]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~
 * A block on the first or last output lines of a padded convolution
 * reads whole kernel rows of padding: zeros, whose products add nothing.
 * So row_block may narrow the block's k steps to [k_begin, k_end), and
 * the micro-kernel runs those alone: A's columns from taps + k_begin on,
 * B's packed panel from row k_begin on (a panel is k rows of NR values).
 * The caller orders k so that a block's nonzero steps are one run
 * (THConv.c: a direct convolution's depth runs kernel rows first; the
 * weight gradient's k steps are output positions, line by line).  A 3x3 kernel over 14 x 14
 * outputs skips 2 of 42 kernel rows a plane, 5x5 over 28 x 28 6 of 140:
 * the multiply-adds a direct convolution (PyTorch's oneDNN) never does.
 * Each block's sum still runs in one order whatever the thread count.
 *
 * Note [Two lines in one block]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * A block's rows need not be one run: the micro-kernel reads its last
 * MR / 2 rows from a second base, `half` elements past the first
 * (row_block may set it; MR / 2, one run of MR rows, unless it does).
 * Output lines of MR / 2 positions then fill a block with two lines
 * instead of leaving half of it idle: a 3x3 convolution over 7 x 7
 * outputs (ResNet's 512-channel layers) under AVX-512's 14-row tile
 * takes one line from each of two samples, whose tap offsets differ by
 * one padded image.  Both lines have the same k steps to skip (Note
 * [Skipping zero taps]), since they are the same line of their samples.
 * The second base costs one add per k step beside the multiply-adds.
 *
 * Note [Skipping a line's edges]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * Skipping zero taps drops kernel rows that read only padding; a 3-wide
 * kernel row with a padding of 1 also reads padding in part: its first
 * tap at a line's first position, its third at the line's last.  Where
 * the k steps come in threes, one kernel row's three taps of one channel
 * (THConv.c's direct products), row_block may say so through `edges`: a
 * block whose row 0 is a line's first position (THBLAS_EDGE_FIRST) runs
 * a micro-kernel that leaves that row out of the first step of each
 * three, one whose row MR - 1 is a line's last (THBLAS_EDGE_LAST) leaves
 * it out of the third, and with two lines in the block (THBLAS_EDGE_HALVES,
 * Note [Two lines in one block]) rows MR / 2 and MR / 2 - 1 as well.  The
 * rows left out are compile-time masks, so each case is a kernel of its
 * own, for the family's tapped tile (the narrow one keeps every row).
 * Each step's B vectors are held live to its end by an empty asm: GCC
 * otherwise wrote a last multiply-add into a B register (the 132 form)
 * and paid for it with moves and two accumulators spilled a three.
 * Over 7 x 7 outputs (two lines a block) that is 4 of every 42
 * multiply-adds of a three, over 14 x 14 2 of 42, the ones a direct
 * convolution (oneDNN's) leaves out at a line's ends.  A block still sums
 * each value in one order whatever the thread count. */

typedef struct {
    GemmTile tile;
    const GemmTile *edge_tiles; /* the wide tile's tapped_edges, or NULL */
    int itemsize, nr;
    int64_t n, n_padded, k;
    const char *a;
    const int64_t *taps;
    const void *b_packed;
    THBlasRowBlock row_block;
    THBlasTileOut tile_out;
    void *ctx;
    atomic_bool out_of_memory;
} TappedJob;

#define TH_DEFINE_TAPPED(T)                                                \
    /* Row blocks [begin, end), each through `tile` (MR x n_padded). */    \
    static void tapped_blocks_##T(const TappedJob *job, int64_t begin,     \
                                  int64_t end, T *tile)                    \
    {                                                                      \
        for (int64_t r = begin; r < end; r++) {                            \
            THBlasRowSpan span = {.half = job->tile.mr / 2, .k_begin = 0,  \
                                  .k_end = job->k};                        \
            const T *a = (const T *)job->a + job->row_block(job->ctx, r, &span); \
            int rows = span.rows;                                          \
            int64_t k0 = span.k_begin, k1 = span.k_end;                    \
            UKernel_##T ukernel = job->edge_tiles == NULL                  \
                                      ? job->tile.ukernel_##T              \
                                      : job->edge_tiles[span.edges & 7].ukernel_##T; \
            for (int64_t jr = 0; jr < job->n; jr += job->nr) {             \
                ukernel(k1 - k0, a, span.half, job->taps + k0,             \
                        (const T *)job->b_packed + jr * job->k + k0 * job->nr, \
                        job->nr, (T)1, (T)0, tile + jr, job->n_padded, 1,  \
                        rows, job->nr);                                    \
            }                                                              \
            job->tile_out(job->ctx, r, rows, (const char *)tile,           \
                          job->n_padded);                                  \
        }                                                                  \
    }

TH_DEFINE_TAPPED(float)
TH_DEFINE_TAPPED(double)

static void
run_tapped(int64_t begin, int64_t end, void *ctx)
{
    TappedJob *job = ctx;
    void *tile = THBlas_allocPack((size_t)(job->tile.mr * job->n_padded * job->itemsize));
    if (tile == NULL) {
        atomic_store(&job->out_of_memory, true);
        return;
    }
    if (job->itemsize == 4) {
        tapped_blocks_float(job, begin, end, tile);
    } else {
        tapped_blocks_double(job, begin, end, tile);
    }
    free(tile);
}

int
THBlas_tappedRows(THDtype dtype)
{
    (void)dtype; /* one tile for both */
    return current_family()->tapped.mr;
}

int
THBlas_tappedRowsFor(THDtype dtype, int64_t m)
{
    (void)dtype;
    const KernelFamily *family = current_family();
    int64_t wide = family->tapped.mr, narrow = family->tapped_narrow.mr;
    return round_up(m, narrow) < round_up(m, wide) ? (int)narrow : (int)wide;
}

int
THBlas_gemmTapped(THDtype dtype, int rows, int64_t blocks, int64_t n, int64_t k,
                  const char *a, const int64_t *taps, THBlasMatrix b,
                  THBlasRowBlock row_block, THBlasTileOut tile_out, void *ctx)
{
    if (!is_packed_dtype(dtype)) {
        return THError_set(TH_ERR_VALUE,
                           "THBlas_gemmTapped: %s does not take the packed GEMM",
                           THDtype_name(dtype));
    }
    const KernelFamily *family = current_family();
    if (rows != family->tapped.mr && rows != family->tapped_narrow.mr) {
        return THError_set(TH_ERR_VALUE, "THBlas_gemmTapped: no %d-row tapped tile", rows);
    }
    if (blocks == 0 || n == 0) {
        return 0;
    }
    int itemsize = THDtype_itemsize(dtype);
    TappedJob job = {.tile = rows == family->tapped.mr ? family->tapped
                                                       : family->tapped_narrow,
                     .edge_tiles = rows == family->tapped.mr ? family->tapped_edges : NULL,
                     .itemsize = itemsize,
                     .nr = itemsize == 4 ? family->nr_float : family->nr_double,
                     .n = n, .k = k, .a = a, .taps = taps,
                     .row_block = row_block, .tile_out = tile_out, .ctx = ctx};
    job.n_padded = round_up(n, job.nr);
    atomic_init(&job.out_of_memory, false);
    int64_t packed_count;
    if (TH_mul_overflows(job.n_padded, k > 0 ? k : 1, &packed_count)) {
        return out_of_memory();
    }
    void *b_packed = TH_mallocArray(packed_count, (size_t)itemsize, "the GEMM's packed B");
    if (b_packed == NULL) {
        return -1;
    }
    if (dtype == TH_Float32) {
        pack_b_float(k, n, job.nr, (const float *)b.data, b.row_stride, b.col_stride,
                     b_packed);
    } else {
        pack_b_double(k, n, job.nr, (const double *)b.data, b.row_stride, b.col_stride,
                      b_packed);
    }
    job.b_packed = b_packed;
    int64_t block_work = work_of(job.tile.mr, n, k);
    THParallel_for(blocks, GEMM_PARALLEL_WORK / 2 / block_work + 1, run_tapped, &job);
    free(b_packed);
    return atomic_load(&job.out_of_memory) ? out_of_memory() : 0;
}

/* ---- tensors ---------------------------------------------------------------- */

/* The batch dims of a product, after folding (THBlas_gemmTensor). */
typedef struct {
    int ndim;
    int64_t sizes[TH_MAX_DIMS];
    int64_t strides[3][TH_MAX_DIMS]; /* of a, b, c */
} BatchDims;

static int
check_gemm_tensors(const THTensor *c, const THTensor *a, const THTensor *b)
{
    int nd = c->ndim;
    if (nd < 2 || a->ndim != nd || b->ndim != nd) {
        return THError_set(TH_ERR_RUNTIME,
                           "gemm: expected tensors of one ndim >= 2, got "
                           "%d, %d and %d",
                           a->ndim, b->ndim, c->ndim);
    }
    if (a->dtype != b->dtype || a->dtype != c->dtype) {
        return THError_set(TH_ERR_RUNTIME,
                           "gemm: expected one dtype, got %s, %s and %s",
                           THDtype_name(a->dtype), THDtype_name(b->dtype),
                           THDtype_name(c->dtype));
    }
    for (int d = 0; d < nd - 2; d++) {
        if (a->sizes[d] != c->sizes[d] || b->sizes[d] != c->sizes[d]) {
            return THError_set(TH_ERR_RUNTIME,
                               "gemm: batch dim %d differs", d);
        }
    }
    if (a->sizes[nd - 2] != c->sizes[nd - 2]
        || b->sizes[nd - 1] != c->sizes[nd - 1]
        || a->sizes[nd - 1] != b->sizes[nd - 2]) {
        return THError_set(TH_ERR_RUNTIME, "gemm: shapes do not multiply");
    }
    if (THTensor_mayOverlap(c, a) || THTensor_mayOverlap(c, b)
        || THTensor_checkNoInternalOverlap(c) < 0) {
        return THError_set(TH_ERR_RUNTIME,
                           "gemm: the result overlaps an operand");
    }
    return 0;
}

/* Drops size-1 batch dims and folds the innermost batch dims into the rows
 * of a and c while b does not move along them (stride 0): row i' = (batch
 * index) * m + i is then still one stride apart in a and in c. */
static void
fold_batch_dims(const THTensor *a, const THTensor *b, const THTensor *c,
                int64_t *m, THBlasMatrix *ma, THBlasMatrix *mc,
                BatchDims *batch)
{
    int nb = c->ndim - 2;
    while (nb > 0) {
        int d = nb - 1;
        int64_t size = c->sizes[d];
        bool rows_continue_a = *m == 1 || a->strides[d] == *m * ma->row_stride;
        bool rows_continue_c = *m == 1 || c->strides[d] == *m * mc->row_stride;
        if (size != 1
            && !(b->strides[d] == 0 && rows_continue_a && rows_continue_c)) {
            break;
        }
        if (size != 1 && *m == 1) {
            ma->row_stride = a->strides[d];
            mc->row_stride = c->strides[d];
        }
        *m *= size;
        nb--;
    }
    batch->ndim = 0;
    for (int d = 0; d < nb; d++) {
        if (c->sizes[d] == 1) {
            continue;
        }
        batch->sizes[batch->ndim] = c->sizes[d];
        batch->strides[0][batch->ndim] = a->strides[d];
        batch->strides[1][batch->ndim] = b->strides[d];
        batch->strides[2][batch->ndim] = c->strides[d];
        batch->ndim++;
    }
}

/* A tensor product as matrices: `count` products of one m x n x k shape,
 * product i offset by offsets[i], offsets[count + i] and
 * offsets[2 * count + i] elements in a, b and c (offsets is NULL when
 * count == 1; the caller frees it). */
typedef struct {
    int64_t m, n, k, count;
    THBlasMatrix a, b, c;
    int64_t *offsets;
} TensorProduct;

/* c's, a's and b's product (checked by check_gemm_tensors, c nonempty;
 * c may have another dtype than a and b). */
static int
tensor_product(const THTensor *c, const THTensor *a, const THTensor *b,
               TensorProduct *p)
{
    int nd = c->ndim;
    p->m = a->sizes[nd - 2];
    p->k = a->sizes[nd - 1];
    p->n = b->sizes[nd - 1];
    p->a = (THBlasMatrix){THTensor_data(a), a->strides[nd - 2],
                          a->strides[nd - 1]};
    p->b = (THBlasMatrix){THTensor_data(b), b->strides[nd - 2],
                          b->strides[nd - 1]};
    p->c = (THBlasMatrix){THTensor_data(c), c->strides[nd - 2],
                          c->strides[nd - 1]};
    p->count = 1;
    p->offsets = NULL;
    BatchDims batch;
    fold_batch_dims(a, b, c, &p->m, &p->a, &p->c, &batch);
    if (batch.ndim == 0) {
        return 0;
    }
    int64_t count = c->numel / (p->m * p->n);
    /* count <= c's numel, but c may be an out= view (Note [Counts to
     * bytes]) */
    int64_t *offsets = count <= INT64_MAX / 3
                           ? TH_mallocArray(3 * count, sizeof(int64_t),
                                            "matmul")
                           : NULL;
    if (offsets == NULL) {
        return count <= INT64_MAX / 3 ? -1 : out_of_memory();
    }
    /* Odometer over the batch index, last dim fastest. */
    int64_t index[TH_MAX_DIMS] = {0};
    int64_t offset[3] = {0, 0, 0};
    for (int64_t i = 0; i < count; i++) {
        for (int t = 0; t < 3; t++) {
            offsets[t * count + i] = offset[t];
        }
        for (int d = batch.ndim - 1; d >= 0; d--) {
            for (int t = 0; t < 3; t++) {
                offset[t] += batch.strides[t][d];
            }
            if (++index[d] < batch.sizes[d]) {
                break;
            }
            for (int t = 0; t < 3; t++) {
                offset[t] -= batch.sizes[d] * batch.strides[t][d];
            }
            index[d] = 0;
        }
    }
    p->count = count;
    p->offsets = offsets;
    return 0;
}

static int
gemm_tensor_native(THTensor *c, THTensor *a, THTensor *b, THScalar beta,
                   THScalar alpha)
{
    if (check_gemm_tensors(c, a, b) < 0) {
        return -1;
    }
    if (c->numel == 0) {
        return 0;
    }
    TensorProduct p;
    if (tensor_product(c, a, b, &p) < 0) {
        return -1;
    }
    if (p.offsets == NULL) {
        return THBlas_gemm(c->dtype, p.m, p.n, p.k, alpha, p.a, p.b, beta,
                           p.c);
    }
    int status = THBlas_gemmBatched(c->dtype, p.count, p.m, p.n, p.k, alpha,
                                    p.a, p.offsets, p.b, p.offsets + p.count,
                                    beta, p.c, p.offsets + 2 * p.count);
    free(p.offsets);
    return status;
}

/* Note [Half-precision matmul]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * float16 and bfloat16 products accumulate in float32 and round each
 * result once into c.  bfloat16 runs on the CPU's bfloat16 dot-product
 * instruction where the avx512 family is in use and the CPU has
 * AVX512-BF16 (Note [bfloat16 GEMM on the dot-product instruction] in
 * THBlasBF16.c), into a float32 copy of c.  Otherwise the product runs
 * the float32 GEMM: the operands are converted to float32 first (F16C's
 * vcvtph2ps for float16, a 16-bit shift for bfloat16: THHalf_toFloatN),
 * which costs O(mk + kn) against the product's O(mkn), and a float32
 * copy of each operand. */
static int
gemm_tensor_bf16_dot(THTensor *wide_c, THTensor *a, THTensor *b,
                     THScalar beta, THScalar alpha)
{
    if (wide_c->numel == 0) {
        return 0;
    }
    TensorProduct p;
    if (tensor_product(wide_c, a, b, &p) < 0) {
        return -1;
    }
    bool batched = p.offsets != NULL;
    int status = THBlas_gemmBF16Batched(
        p.count, p.m, p.n, p.k, (float)scalar_as_double(alpha), p.a,
        p.offsets, p.b, batched ? p.offsets + p.count : NULL,
        (float)scalar_as_double(beta), p.c,
        batched ? p.offsets + 2 * p.count : NULL);
    free(p.offsets);
    return status;
}

static int
gemm_tensor_half(THTensor *c, THTensor *a, THTensor *b, THScalar beta,
                 THScalar alpha)
{
    /* beta == 0: c is only written, so its old values are not converted */
    THTensor *wide_c = scalar_is_zero(beta)
                           ? THTensor_newEmptyLike(c, TH_Float32)
                           : THTensor_newCast(c, TH_Float32, false);
    if (wide_c == NULL) {
        return -1;
    }
    int status = -1;
    if (c->dtype == TH_BFloat16 && THBlas_bf16DotAvailable()) {
        status = gemm_tensor_bf16_dot(wide_c, a, b, beta, alpha);
    } else {
        THTensor *wide_a = THTensor_newCast(a, TH_Float32, false);
        THTensor *wide_b = THTensor_newCast(b, TH_Float32, false);
        if (wide_a != NULL && wide_b != NULL) {
            status = gemm_tensor_native(wide_c, wide_a, wide_b, beta, alpha);
        }
        THTensor_release(wide_a);
        THTensor_release(wide_b);
    }
    if (status == 0) {
        status = THTensor_copy(c, wide_c);
    }
    THTensor_release(wide_c);
    return status;
}

int
THBlas_gemmTensor(THTensor *c, THTensor *a, THTensor *b, THScalar beta,
                  THScalar alpha)
{
    if (THDtype_isHalf(c->dtype)) {
        return check_gemm_tensors(c, a, b) < 0
                   ? -1
                   : gemm_tensor_half(c, a, b, beta, alpha);
    }
    return gemm_tensor_native(c, a, b, beta, alpha);
}
