/*
 * THBlas.h -- matrix multiply (GEMM) for every dtype.
 *
 *     C = beta * C + alpha * A @ B      A: m x k, B: k x n, C: m x n
 *
 * Matrices are described by a data pointer and two element strides (not
 * bytes, as in THTensor), so any strided view is accepted without a copy:
 * a transposed operand (BLAS's op(A) = A^T) is the same matrix with its two
 * strides swapped, see THBlasMatrix_transposed.  Strides may be 0 (an
 * expanded operand) for A and B; C must not overlap A or B and must not
 * have two elements at one address (the caller copies aside otherwise).
 *
 * float32 and float64 run a packed, cache-blocked GEMM with a register-tiled
 * micro-kernel (Note [GEMM blocking] in THBlas.c) chosen once at run time
 * for the CPU (AVX-512, AVX2+FMA, or portable vector code), and split over
 * THParallel's threads when the product is large.  Integer dtypes and bool
 * use a simple row-wise kernel with wrap-around arithmetic, as PyTorch's
 * integer matmul does; for bool the result is OR over p of A[i,p] AND
 * B[p,j].
 *
 * beta == 0 means C is only written, never read: NaNs already in C do not
 * propagate; likewise alpha == 0 means A and B are not read (BLAS's rules,
 * which PyTorch follows).  k == 0 gives C = beta * C.
 */
#ifndef TH_BLAS_H
#define TH_BLAS_H

#include "THDtype.h"
#include "THTensor.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *data;         /* element (0, 0) */
    int64_t row_stride; /* elements from (i, j) to (i + 1, j) */
    int64_t col_stride; /* elements from (i, j) to (i, j + 1) */
} THBlasMatrix;

static inline THBlasMatrix
THBlasMatrix_transposed(THBlasMatrix mat)
{
    THBlasMatrix t = {mat.data, mat.col_stride, mat.row_stride};
    return t;
}

/* Returns 0, or -1 with a TH error (out of memory for the packing
 * buffers).  alpha and beta are converted to dtype (floating values are
 * truncated for integer dtypes). */
int THBlas_gemm(THDtype dtype, int64_t m, int64_t n, int64_t k,
                THScalar alpha, THBlasMatrix a, THBlasMatrix b,
                THScalar beta, THBlasMatrix c);

/* A B (k x n) packed once into the packed GEMM's micro-panels for many
 * products with it (Note [One packed B for many products] in THBlas.c:
 * a recurrent layer's W_hh at every time step).  It keeps `b`, which
 * must stay unchanged while it is in use: products the packed kernel
 * does not run (other dtypes, m == 1, a family or blocking changed
 * since packing) read it instead. */
typedef struct {
    THDtype dtype;
    int64_t k, n;
    THBlasMatrix b;
    const void *family; /* the kernel family and k-blocking packed for */
    int64_t kc_step;
    void *panels; /* NULL: not packed (b is read) */
} THBlasPackedB;

/* Packs b for THBlas_gemmPackedB; 0, or -1 with a TH error (out of
 * memory).  Release it with THBlas_freePackedB (also after a failure). */
int THBlas_packB(THDtype dtype, int64_t k, int64_t n, THBlasMatrix b,
                 THBlasPackedB *out);
void THBlas_freePackedB(THBlasPackedB *packed);

/* THBlas_gemm with B = packed's (k x n): c (m x n) = beta c + alpha a @ B.
 * Each element of C gets the same value THBlas_gemm gives it. */
int THBlas_gemmPackedB(int64_t m, THScalar alpha, THBlasMatrix a,
                       const THBlasPackedB *packed, THScalar beta,
                       THBlasMatrix c);

/* `batch` independent GEMMs of one shape; product i uses the matrices
 * offset by a_offsets[i], b_offsets[i], c_offsets[i] elements from a, b
 * and c (so broadcast batch dims need no copy).  Each thread takes whole
 * products, except large products too few to share out evenly, which
 * run one after another on all threads. */
int THBlas_gemmBatched(THDtype dtype, int64_t batch, int64_t m, int64_t n,
                       int64_t k, THScalar alpha, THBlasMatrix a,
                       const int64_t *a_offsets, THBlasMatrix b,
                       const int64_t *b_offsets, THScalar beta,
                       THBlasMatrix c, const int64_t *c_offsets);

/* The same on tensors: c = beta * c + alpha * a @ b over the leading
 * (batch) dims, which must have equal sizes in all three (broadcast batch
 * dims are expanded views: stride 0 is fine for a and b).  a is
 * (..., m, k), b (..., k, n), c (..., m, n), one dtype, ndim >= 2.  c is
 * only written: it must not overlap a or b nor have two elements at one
 * address (THTensor_mayOverlap; the caller computes into a temporary then).
 * Batch dims that continue c's and a's rows while b stays fixed are folded
 * into m, so a (B, m, k) @ (k, n) product runs as one (B*m, k) GEMM. */
int THBlas_gemmTensor(THTensor *c, THTensor *a, THTensor *b, THScalar beta,
                      THScalar alpha);

/* For THBlas*.c, the packed GEMMs' shared pieces.  THBlas_allocPack: a
 * 64-byte-aligned buffer of at least `bytes`, or NULL; free() releases
 * it.  THBlas_allocPackBuffers: two of them, or neither (false: out of
 * memory).  THBlas_balancedStep: the step that cuts `extent` into as few
 * blocks of at most `block` as possible, all of about one size (a
 * multiple of `multiple` up to the last). */
void *THBlas_allocPack(size_t bytes);
bool THBlas_allocPackBuffers(void **a_pack, size_t a_bytes, void **b_pack,
                             size_t b_bytes);
int64_t THBlas_balancedStep(int64_t extent, int64_t block, int64_t multiple);

/* The loop nest of Note [GEMM blocking] (THBlas.c) over the blocks of B,
 * for every packed GEMM (float32, float64 and the bfloat16 one): the
 * dtype's code packs B's micro-panels and multiplies rows of A against a
 * packed block; THBlas_runLoopNest walks the blocks, on one thread or
 * shared by all (Note [One packed B for all threads] in THBlas.c). */
typedef struct {
    int64_t jc, nc; /* B's columns [jc, jc + nc) */
    int64_t pc, kc; /* and its rows, the k [pc, pc + kc) */
} THBlasBlockOfB;

typedef struct {
    int64_t m, n, k;         /* k >= 1 */
    int64_t mr, nr;          /* the tile: rows per unit of a thread's band,
                                columns per micro-panel of B */
    int64_t nc, kc_step;     /* the blocks of B */
    size_t a_bytes, b_bytes; /* a packed A block and B block, any block */
    /* Packs the block's micro-panels [panel0, panel1) into b_pack (at
     * panel * nr * kc elements, the block's own layout). */
    void (*pack_b)(void *ctx, const THBlasBlockOfB *block, int64_t panel0,
                   int64_t panel1, void *b_pack);
    /* C's rows [row0, row1) in the block's columns, from A's rows
     * (packed into a_pack a block of rows at a time) and the packed
     * block; beta applies to the first block of k, pc == 0. */
    void (*multiply)(void *ctx, const THBlasBlockOfB *block, int64_t row0,
                     int64_t row1, const void *b_pack, void *a_pack);
    void *ctx;
} THBlasLoopNest;

/* With buffers of a_bytes and b_bytes: the loop nest on the calling
 * thread.  With a_pack and b_pack NULL: split over the threads by rows,
 * with one packed B block shared by all; false when out of memory (C is
 * then partly written). */
bool THBlas_runLoopNest(const THBlasLoopNest *nest, void *a_pack,
                        void *b_pack);

/* Whether bfloat16 products run on the CPU's bfloat16 dot-product
 * instruction: the avx512 family is in use (THBlas_setKernel) and the CPU
 * has AVX512-BF16 (THBlasBF16.c). */
bool THBlas_bf16DotAvailable(void);

/* THBlas_gemmBatched for bfloat16 a and b and a float32 c, on that
 * instruction (Note [bfloat16 GEMM on the dot-product instruction]);
 * offsets may all be NULL for one product.  -1 with a TH error when the
 * instruction is not in use or out of memory. */
int THBlas_gemmBF16Batched(int64_t batch, int64_t m, int64_t n, int64_t k,
                           float alpha, THBlasMatrix a,
                           const int64_t *a_offsets, THBlasMatrix b,
                           const int64_t *b_offsets, float beta,
                           THBlasMatrix c, const int64_t *c_offsets);


/* Fills one packed micro-panel of B: dst[p * nr + j] = B[p0 + p][j0 + j]
 * for p < kc and j < nr.  Columns at or past n may hold any value (their
 * columns of C are not handed on), and the packer may write up to nr
 * elements past the panel's kc * nr (dst has room for (kc + 1) * nr). */
typedef void (*THBlasGatherB)(void *ctx, int64_t p0, int64_t kc, int64_t j0,
                              int nr, char *dst);
/* Receives columns [j0, j0 + cols) of C: row i of them starts at
 * panel + i * nr elements, for i < m. */
typedef void (*THBlasScatterC)(void *ctx, int64_t j0, int64_t cols,
                               const char *panel, int nr);

/* The widest B micro-panel any family packs (two 64-byte vectors of
 * float32): gather_b's nr never exceeds it. */
#define THBLAS_MAX_NR 32

/* C = A @ B for float32 or float64 where B is never stored: gather_b
 * packs each of its micro-panels straight from wherever its values live,
 * and C reaches the caller a column panel at a time through scatter_c
 * (Note [GEMM with a gathered B] in THBlas.c; the implicit GEMM of
 * THConv.c).  The panels are split over threads, so both callbacks run
 * concurrently on disjoint columns.  Returns 0, or -1 with a TH error. */
int THBlas_gemmGathered(THDtype dtype, int64_t m, int64_t n, int64_t k,
                        THBlasMatrix a, THBlasGatherB gather_b,
                        THBlasScatterC scatter_c, void *ctx);

/* What a row block of THBlas_gemmTapped's A tells its micro-kernel: rows,
 * how many of its MR rows count; half (preset to MR / 2), how far past
 * the first row's values its row MR / 2 reads (Note [Two lines in one
 * block] in THBlas.c); [k_begin, k_end) (preset to [0, k)), the k steps
 * where the block's A can be nonzero: its columns outside are zero (a
 * convolution's taps that fall in the padding) and are skipped; edges
 * (preset to 0), where the k steps come in threes, which rows read only
 * zeros in the first or the third of each three (Note [Skipping a line's
 * edges] in THBlas.c). */
typedef struct {
    int rows;
    int64_t half, k_begin, k_end;
    int edges;
} THBlasRowSpan;

#define THBLAS_EDGE_FIRST 1  /* row 0 in the first step of each three */
#define THBLAS_EDGE_LAST 2   /* row MR - 1 in the third */
#define THBLAS_EDGE_HALVES 4 /* and rows MR / 2, MR / 2 - 1 likewise */

/* A row block of THBlas_gemmTapped's A: returns where its first row's
 * values start (elements from a) and fills in *span. */
typedef int64_t (*THBlasRowBlock)(void *ctx, int64_t block, THBlasRowSpan *span);
/* Receives a row block's rows of C: row i < rows holds its n values from
 * tile + i * ld elements on. */
typedef void (*THBlasTileOut)(void *ctx, int64_t block, int rows, const char *tile,
                              int64_t ld);

/* The rows (MR) of THBlas_gemmTapped's row blocks under the family in
 * use: its usual tile's, and of its two tiles (usual and narrow) the one
 * that pads m rows to the fewest. */
int THBlas_tappedRows(THDtype dtype);
int THBlas_tappedRowsFor(THDtype dtype, int64_t m);

/* C = A @ B for float32 or float64 where A is read in place through tap
 * offsets: in row block r (r < blocks), A[i][p] = a[row_block(r) + i +
 * taps[p]] for i < MR = rows (THBlas_tappedRows or _tappedRowsFor), p < k,
 * i < MR / 2 (and half - MR / 2 further for the rest: THBlasRowBlock)
 * (Note [GEMM with a tapped A] in THBlas.c; a direct convolution,
 * THConv.c).  Rows past a block's count are still
 * read.  B (k x n) is packed once; C reaches the caller a row block at a
 * time through tile_out.  Blocks are split over threads, so both
 * callbacks run concurrently on different blocks.  Returns 0, or -1 with
 * a TH error. */
int THBlas_gemmTapped(THDtype dtype, int rows, int64_t blocks, int64_t n, int64_t k,
                      const char *a, const int64_t *taps, THBlasMatrix b,
                      THBlasRowBlock row_block, THBlasTileOut tile_out, void *ctx);

/* The micro-kernel family in use: "avx512", "avx2" or "generic". */
const char *THBlas_kernelName(void);
/* Selects a family by name (tests use it to cover each one).  Returns 0,
 * or -1 with a TH error when unknown or not supported by this CPU. */
int THBlas_setKernel(const char *name);

/* The packed GEMM's tile and blocking for one dtype under the family in
 * use (Note [GEMM blocking from the cache sizes] in THBlas.c). */
typedef struct {
    int mr, nr;             /* the micro-kernel's tile of C */
    int64_t mc, kc, nc;     /* the blocks of A (mc x kc) and B (kc x nc) */
} THBlasBlocking;

/* Fills *out for TH_Float32 or TH_Float64 (the packed dtypes); returns 0,
 * or -1 with a TH error for another dtype. */
int THBlas_blocking(THDtype dtype, THBlasBlocking *out);

/* The data cache sizes, in bytes, the blocking was derived from: level 1
 * to 3 (index 0 to 2), as the OS reports them, or the fallbacks. */
void THBlas_cacheSizes(int64_t sizes[3]);
/* Derives the blocking from these sizes instead (tests use tiny caches to
 * cross every block edge with small products); NULL restores the
 * detected sizes.  Not thread-safe: set it while no GEMM runs. */
void THBlas_setCacheSizes(const int64_t sizes[3]);

#endif /* TH_BLAS_H */
