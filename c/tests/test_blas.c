/*
 * test_blas.c -- THBlas_gemm against a naive triple loop: odd sizes around
 * the block edges, every layout (row-major, column-major, padded with
 * steps) of A, B and C, alpha/beta, beta == 0 over NaN, k == 0, every
 * kernel family this CPU supports (its wide and its narrow tile), one and
 * two threads, every dtype;
 * THBlas_gemmTensor's batch handling (broadcast and folded batch dims);
 * THBlas_gemmGathered with B and C through callbacks; THBlas_gemmPackedB
 * against THBlas_gemm, bit for bit; and the bfloat16
 * GEMM on the dot-product instruction where the CPU has it.
 */
#include "th_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- matrices of any dtype, read and written as doubles -------------------- */

static void
store(THDtype dtype, void *buf, int64_t i, double v)
{
    switch (dtype) {
#define TB_STORE(Name, T, py)                                                \
    case TH_##Name:                                                        \
        ((T *)buf)[i] = THDtype_isFloating(dtype) ? TH_FROM_FLOAT_##Name(v) \
                                                  : TH_FROM_FLOAT_##Name((int64_t)v); \
        break;
        TH_FORALL_DTYPES(TB_STORE)
#undef TB_STORE
    default:
        break;
    }
}

static double
load(THDtype dtype, const void *buf, int64_t i)
{
    switch (dtype) {
#define TB_LOAD(Name, T, py) \
    case TH_##Name:          \
        return (double)TH_TO_FLOAT_##Name(((const T *)buf)[i]);
        TH_FORALL_DTYPES(TB_LOAD)
#undef TB_LOAD
    default:
        return 0;
    }
}

/* Layouts: 0 row-major, 1 column-major, 2 padded rows and every other
 * column. */
enum { LAYOUT_ROWS, LAYOUT_COLS, LAYOUT_STEPPED, NUM_LAYOUTS };

typedef struct {
    int64_t rows, cols, rs, cs, span;
    char *buf;
} Mat;

static Mat
mat_new(int64_t rows, int64_t cols, int layout)
{
    Mat m = {rows, cols, cols, 1, 0, NULL};
    if (layout == LAYOUT_COLS) {
        m.rs = 1;
        m.cs = rows;
    } else if (layout == LAYOUT_STEPPED) {
        m.rs = 2 * cols + 3;
        m.cs = 2;
    }
    m.span = rows * m.rs + cols * m.cs + 1;
    m.buf = calloc((size_t)m.span, 8); /* 8: the largest itemsize */
    return m;
}

static int64_t
at(const Mat *m, int64_t i, int64_t j)
{
    return i * m->rs + j * m->cs;
}

/* Small values every dtype holds and whose float sums are exact. */
static double
value(THDtype dtype, int64_t i, int64_t j, int salt)
{
    int64_t v = (i * 7 + j * 3 + salt * 5) % 11;
    if (dtype == TH_Bool) {
        return (double)(v % 3 == 0);
    }
    if (THDtype_isFloating(dtype)) {
        return (double)(v - 5) / 4;
    }
    return (double)v;
}

static THBlasMatrix
as_blas(const Mat *m)
{
    THBlasMatrix b = {m->buf, m->rs, m->cs};
    return b;
}

/* A and B filled with value()'s small exact numbers. */
static void
fill_operands(THDtype dtype, Mat *a, Mat *b)
{
    for (int64_t i = 0; i < a->rows; i++) {
        for (int64_t p = 0; p < a->cols; p++) {
            store(dtype, a->buf, at(a, i, p), value(dtype, i, p, 1));
        }
    }
    for (int64_t p = 0; p < b->rows; p++) {
        for (int64_t j = 0; j < b->cols; j++) {
            store(dtype, b->buf, at(b, p, j), value(dtype, p, j, 2));
        }
    }
}

/* L1, L2, L3 small enough that every product crosses several KC, MC and
 * NC blocks (set with THBlas_setCacheSizes, NULL restores the detected). */
static const int64_t tiny_caches[3] = {4 << 10, 16 << 10, 64 << 10};

/* Runs one gemm and compares it with the triple loop, computed in double
 * (exact for these values) and converted to the dtype like the kernel's
 * result (wrap-around for integers, nonzero for bool). */
static void
check_case(THDtype dtype, int64_t m, int64_t n, int64_t k, const int *layouts,
           double alpha, double beta)
{
    Mat a = mat_new(m, k, layouts[0]);
    Mat b = mat_new(k, n, layouts[1]);
    Mat c = mat_new(m, n, layouts[2]);
    Mat want = mat_new(m, n, LAYOUT_ROWS);
    fill_operands(dtype, &a, &b);
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            /* beta == 0 must ignore whatever C holds, NaN included */
            double old = beta == 0 && THDtype_isFloating(dtype)
                             ? NAN
                             : value(dtype, i, j, 3);
            store(dtype, c.buf, at(&c, i, j), old);
            double sum = 0;
            for (int64_t p = 0; p < k; p++) {
                sum += load(dtype, a.buf, at(&a, i, p))
                       * load(dtype, b.buf, at(&b, p, j));
            }
            double expect = alpha * sum + (beta == 0 ? 0 : beta * old);
            store(dtype, want.buf, at(&want, i, j), expect);
        }
    }
    THScalar alpha_s = THDtype_isFloating(dtype)
                           ? THScalar_fromDouble(alpha)
                           : THScalar_fromInt((int64_t)alpha);
    THScalar beta_s = THDtype_isFloating(dtype)
                          ? THScalar_fromDouble(beta)
                          : THScalar_fromInt((int64_t)beta);
    th_clear_vector_upper();
    CHECK_OK(THBlas_gemm(dtype, m, n, k, alpha_s, as_blas(&a), as_blas(&b),
                         beta_s, as_blas(&c)));
    /* SSE code after it would run at a quarter of its speed: Note [Vector
     * kernels call no plain code] */
    CHECK_MSG(!th_vector_upper_in_use(),
              "%s %s m=%lld n=%lld k=%lld: returned with the upper halves of "
              "vector registers in use",
              THDtype_name(dtype), THBlas_kernelName(), (long long)m, (long long)n,
              (long long)k);
    int reported = 0;
    for (int64_t i = 0; i < m && reported < 3; i++) {
        for (int64_t j = 0; j < n && reported < 3; j++) {
            double got = load(dtype, c.buf, at(&c, i, j));
            double expect = load(dtype, want.buf, at(&want, i, j));
            if (!(fabs(got - expect) <= 1e-9 * (1 + fabs(expect)))) {
                CHECK_MSG(false,
                          "%s %s m=%lld n=%lld k=%lld layouts %d%d%d "
                          "alpha=%g beta=%g: C[%lld,%lld] = %g, want %g",
                          THDtype_name(dtype), THBlas_kernelName(),
                          (long long)m, (long long)n, (long long)k,
                          layouts[0], layouts[1], layouts[2], alpha, beta,
                          (long long)i, (long long)j, got, expect);
                reported++;
            }
        }
    }
    free(a.buf);
    free(b.buf);
    free(c.buf);
    free(want.buf);
}

/* Around every family's tile (MR 6 or 14, NR 8 to 32) and the blocks. */
static const int64_t odd_sizes[][3] = {
    {1, 1, 1},     {7, 5, 3},     {1, 63, 7},    {63, 1, 65},
    {65, 63, 7},   {13, 17, 257}, {129, 33, 65}, {6, 16, 256},
    {12, 32, 1},   {2, 3, 0},     {14, 32, 129}, {15, 33, 130},
    {29, 65, 31},  {28, 64, 300},
};
#define NUM_ODD_SIZES ((int)(sizeof(odd_sizes) / sizeof(odd_sizes[0])))

static const char *const all_families[] = {"generic", "avx2", "avx512"};
#define NUM_FAMILIES 3

/* Selects family f; false (and no error left set) when this CPU cannot
 * run it. */
static bool
use_family(int f)
{
    if (THBlas_setKernel(all_families[f]) < 0) {
        THError_clear();
        return false;
    }
    return true;
}

static void
check_odd_sizes(void)
{
    static const double coefficients[][2] = {{1, 0}, {0.5, 2}, {-1, 1}};
    for (int d = 0; d < 2; d++) {
        THDtype dtype = d == 0 ? TH_Float32 : TH_Float64;
        for (int s = 0; s < NUM_ODD_SIZES; s++) {
            int layouts[3] = {s % NUM_LAYOUTS, (s / 3) % NUM_LAYOUTS,
                              (s + 1) % NUM_LAYOUTS};
            const double *ab = coefficients[s % 3];
            check_case(dtype, odd_sizes[s][0], odd_sizes[s][1],
                       odd_sizes[s][2], layouts, ab[0], ab[1]);
        }
    }
}

/* Every family this CPU runs (printed: a CPU without AVX-512 cannot test
 * that family), every size above, a spread of layouts and coefficients;
 * then again with blocks derived from tiny caches, so the products cross
 * every MC, KC and NC edge too. */
static void
test_gemm_floating_matches_naive(void)
{
    const char *saved = THBlas_kernelName();
    printf("  GEMM kernel families run:");
    for (int f = 0; f < NUM_FAMILIES; f++) {
        if (!use_family(f)) {
            printf(" [%s: not on this CPU]", all_families[f]);
            continue;
        }
        printf(" %s", all_families[f]);
        check_odd_sizes();
        THBlas_setCacheSizes(tiny_caches);
        check_odd_sizes();
        THBlas_setCacheSizes(NULL);
    }
    printf("\n");
    CHECK_OK(THBlas_setKernel(saved));
}

/* The blocking of every family and dtype keeps the loops' invariants and
 * the analytical model's budgets (Note [GEMM blocking from the cache
 * sizes]): the B micro-panel in half of L1, the A block in half of L2. */
static void
test_gemm_blocking_follows_the_caches(void)
{
    static const int64_t caches[][3] = {
        {32 << 10, 512 << 10, 8 << 20},  /* Zen 1 */
        {48 << 10, 2 << 20, 32 << 20},   /* Sapphire Rapids-like */
        {1, 1, 1},                       /* nonsense: clamped */
    };
    const char *saved = THBlas_kernelName();
    for (int f = 0; f < NUM_FAMILIES; f++) {
        if (!use_family(f)) {
            continue;
        }
        for (int c = 0; c < 3; c++) {
            THBlas_setCacheSizes(caches[c]);
            for (int d = 0; d < 2; d++) {
                THDtype dtype = d == 0 ? TH_Float32 : TH_Float64;
                int64_t size = THDtype_itemsize(dtype);
                THBlasBlocking b;
                CHECK_OK(THBlas_blocking(dtype, &b));
                CHECK(b.mr >= 1 && b.nr >= 1 && b.kc % 8 == 0);
                CHECK(b.mc % b.mr == 0 && b.nc % b.nr == 0);
                CHECK(b.kc >= 64 && b.mc >= b.mr && b.nc >= b.nr);
                /* all of L1 for the AVX-512 family, half otherwise */
                int64_t l1_share = strcmp(all_families[f], "avx512") == 0 ? 1 : 2;
                if (c < 2) {
                    CHECK(b.kc * b.nr * size <= caches[c][0] / l1_share);
                    CHECK(b.mc * b.kc * size <= caches[c][1] / 2);
                    CHECK(b.kc * b.nc * size <= caches[c][2] / 2);
                }
            }
        }
        THBlas_setCacheSizes(NULL);
    }
    CHECK_OK(THBlas_setKernel(saved));
    THBlasBlocking ignored;
    CHECK_FAILS(THBlas_blocking(TH_Int32, &ignored), TH_ERR_VALUE,
                "does not take the packed GEMM");
    int64_t detected[3];
    THBlas_cacheSizes(detected);
    CHECK(detected[0] > 0 && detected[1] > 0 && detected[2] > 0);
}

static void
test_gemm_every_layout(void)
{
    for (int la = 0; la < NUM_LAYOUTS; la++) {
        for (int lb = 0; lb < NUM_LAYOUTS; lb++) {
            for (int lc = 0; lc < NUM_LAYOUTS; lc++) {
                int layouts[3] = {la, lb, lc};
                check_case(TH_Float32, 19, 21, 23, layouts, 1, 1);
                check_case(TH_Int32, 5, 6, 7, layouts, 2, 1);
            }
        }
    }
}

/* Matrix-vector shapes (m == 1 or n == 1, and dot products) take their
 * own path: dot products over contiguous rows, or scaled columns. */
static void
test_gemv_shapes_every_layout(void)
{
    static const int64_t shapes[][3] = {
        {1, 70, 90}, {90, 1, 70}, {1, 1, 333}, {1, 1, 0}, {5, 1, 3}};
    for (int s = 0; s < 5; s++) {
        for (int la = 0; la < NUM_LAYOUTS; la++) {
            for (int lb = 0; lb < NUM_LAYOUTS; lb++) {
                int layouts[3] = {la, lb, (la + lb) % NUM_LAYOUTS};
                check_case(TH_Float32, shapes[s][0], shapes[s][1],
                           shapes[s][2], layouts, 1, 0);
                check_case(TH_Float64, shapes[s][0], shapes[s][1],
                           shapes[s][2], layouts, 0.5, 2);
            }
        }
    }
}

/* An m x n x k product (shape) in float32 (alpha 1, beta 0) and float64
 * (alpha -0.5, beta 2). */
static void
check_both_dtypes(const int64_t shape[3], const int *layouts)
{
    check_case(TH_Float32, shape[0], shape[1], shape[2], layouts, 1, 0);
    check_case(TH_Float64, shape[0], shape[1], shape[2], layouts, -0.5, 2);
}

/* The paths picked by shape (Note [GEMM small products]): fewer columns
 * than NR (column by column dot products when A's rows and B's columns
 * are contiguous), and B read in place (full panels) beside its packed
 * partial panel. */
static void
test_gemm_small_products_every_layout(void)
{
    static const int64_t shapes[][3] = {
        {64, 10, 128}, {30, 3, 50}, {64, 64, 64}, {13, 37, 20}};
    for (int s = 0; s < 4; s++) {
        for (int la = 0; la < NUM_LAYOUTS; la++) {
            for (int lb = 0; lb < NUM_LAYOUTS; lb++) {
                int layouts[3] = {la, lb, (la + 2 * lb) % NUM_LAYOUTS};
                check_both_dtypes(shapes[s], layouts);
            }
        }
    }
}

/* Note [GEMM with few columns]: A's rows and B's columns contiguous with
 * fewer columns than NR take the blocks of dot products, under every
 * family this CPU runs: blocks cut at the edges of rows and columns, k
 * below and above each vector length and not a multiple of it (the
 * scalar tail), k == 0, every layout of C, beta 0 (NaN in C ignored) and
 * not. */
static void
test_gemm_few_columns_every_family(void)
{
    static const int64_t shapes[][3] = {
        {64, 10, 128}, {9, 3, 37}, {17, 7, 5},  {2, 15, 200},
        {33, 2, 1},    {5, 31, 0}, {3, 13, 19}, {8, 2, 16},
    };
    const char *saved = THBlas_kernelName();
    for (int f = 0; f < NUM_FAMILIES; f++) {
        if (!use_family(f)) {
            continue;
        }
        for (int s = 0; s < 8; s++) {
            for (int lc = 0; lc < NUM_LAYOUTS; lc++) {
                int layouts[3] = {LAYOUT_ROWS, LAYOUT_COLS, lc};
                check_both_dtypes(shapes[s], layouts);
            }
        }
    }
    CHECK_OK(THBlas_setKernel(saved));
}

/* Note [The narrow tile] in THBlas_gemm: odd m that every family pads to
 * fewer rows with its narrow tile (7, 15, 31 and 63 rows: 8, 16, 32 and 64
 * under both narrow tiles, 14, 28, 42 and 70 under AVX-512's tile, 12,
 * 18, 36 and 66 under the 6-row one), so A is packed in narrow
 * micro-panels and the last one is partial; A and B each transposed
 * (column-major) or stepped, C stepped; with the detected and with tiny
 * caches (MC cut to a few narrow tiles, several KC blocks). */
static void
test_gemm_narrow_tile_every_family(void)
{
    static const int64_t shapes[][3] = {
        {7, 37, 19}, {15, 33, 130}, {31, 65, 257}, {63, 50, 77}};
    const char *saved = THBlas_kernelName();
    for (int f = 0; f < NUM_FAMILIES; f++) {
        if (!use_family(f)) {
            continue;
        }
        for (int caches = 0; caches < 2; caches++) {
            THBlas_setCacheSizes(caches == 0 ? NULL : tiny_caches);
            for (int s = 0; s < 4; s++) {
                for (int la = 0; la < NUM_LAYOUTS; la++) {
                    for (int lb = 0; lb < NUM_LAYOUTS; lb++) {
                        int layouts[3] = {la, lb, LAYOUT_STEPPED};
                        check_both_dtypes(shapes[s], layouts);
                    }
                }
            }
        }
        THBlas_setCacheSizes(NULL);
    }
    CHECK_OK(THBlas_setKernel(saved));
}

/* Note [GEMM small products]: a row-major A under at most four panels of
 * B's columns is read in place by the narrow tile's rows (row tiles cut
 * at m, so the last repeats row 0; several KC blocks under the tiny
 * caches), and a column-major A is packed as before; ten rows take
 * AVX-512's 10-row tile (Note [The narrow tile]); small products keep
 * their packing buffers on the stack.  Every family this CPU runs, B and
 * C in every layout, beta 0 and not. */
static void
test_gemm_a_in_place_every_family(void)
{
    static const int64_t shapes[][3] = {
        {64, 64, 64}, {10, 128, 64}, {13, 40, 70}, {20, 50, 300},
        {30, 64, 33}, {10, 20, 9},   {3, 17, 129}, {40, 65, 12},
        {20, 129, 50}, /* one column past four AVX-512 float32 panels */
    };
    const char *saved = THBlas_kernelName();
    for (int f = 0; f < NUM_FAMILIES; f++) {
        if (!use_family(f)) {
            continue;
        }
        for (int caches = 0; caches < 2; caches++) {
            THBlas_setCacheSizes(caches == 0 ? NULL : tiny_caches);
            for (int s = 0; s < (int)(sizeof(shapes) / sizeof(shapes[0])); s++) {
                for (int la = 0; la < 2; la++) {
                    for (int lb = 0; lb < NUM_LAYOUTS; lb++) {
                        int layouts[3] = {la == 0 ? LAYOUT_ROWS : LAYOUT_COLS, lb,
                                          (s + lb) % NUM_LAYOUTS};
                        check_both_dtypes(shapes[s], layouts);
                    }
                }
            }
        }
        THBlas_setCacheSizes(NULL);
    }
    CHECK_OK(THBlas_setKernel(saved));
}

/* THBlas_gemmBatched with products large enough to split over threads
 * (64 x 64 x 64 = 2^18 multiply-adds): on one thread, and on two with a
 * batch that shares out evenly (whole products per thread) and one that
 * does not (each product on both threads); B broadcast (offset 0) and C
 * strided. */
static void
test_gemm_batched_large_products(void)
{
    enum { M = 64, N = 64, K = 64, MAX_BATCH = 4 };
    static const int cases[][2] = {{1, 4}, {2, 4}, {2, 3}}; /* threads, batch */
    Mat a = mat_new(MAX_BATCH * M, K, LAYOUT_ROWS);
    Mat b = mat_new(K, N, LAYOUT_COLS);
    Mat c = mat_new(MAX_BATCH * M, N, LAYOUT_STEPPED);
    fill_operands(TH_Float64, &a, &b);
    int64_t a_offsets[MAX_BATCH], b_offsets[MAX_BATCH], c_offsets[MAX_BATCH];
    for (int i = 0; i < MAX_BATCH; i++) {
        a_offsets[i] = i * M * a.rs;
        b_offsets[i] = 0;
        c_offsets[i] = i * M * c.rs;
    }
    int saved = THParallel_getNumThreads();
    for (int t = 0; t < 3; t++) {
        CHECK_OK(THParallel_setNumThreads(cases[t][0]));
        int batch = cases[t][1];
        memset(c.buf, 0, (size_t)c.span * 8);
        THBlasMatrix one_c = {c.buf, c.rs, c.cs};
        CHECK_OK(THBlas_gemmBatched(TH_Float64, batch, M, N, K,
                                    THScalar_fromDouble(1), as_blas(&a),
                                    a_offsets, as_blas(&b), b_offsets,
                                    THScalar_fromDouble(0), one_c,
                                    c_offsets));
        int wrong = 0;
        for (int64_t i = 0; i < MAX_BATCH * M; i++) {
            for (int64_t j = 0; j < N; j++) {
                double want = 0;
                for (int64_t p = 0; i < batch * M && p < K; p++) {
                    want += load(TH_Float64, a.buf, at(&a, i, p))
                            * load(TH_Float64, b.buf, at(&b, p, j));
                }
                wrong += load(TH_Float64, c.buf, at(&c, i, j)) != want;
            }
        }
        CHECK_MSG(wrong == 0, "%d threads, batch %d: %d wrong values",
                  cases[t][0], batch, wrong);
    }
    CHECK_OK(THParallel_setNumThreads(saved));
    free(a.buf);
    free(b.buf);
    free(c.buf);
}

/* Large enough to split over two threads: row bands sharing one packed
 * B (Note [One packed B for all threads]) in every family, wide and
 * narrow tile, over one block of B and -- with tiny caches -- over many
 * blocks of B and of each band's A; then column bands and gemv bands. */
static void
test_gemm_two_threads(void)
{
    const char *saved_kernel = THBlas_kernelName();
    int saved = THParallel_getNumThreads();
    CHECK_OK(THParallel_setNumThreads(2));
    int rows[3] = {LAYOUT_ROWS, LAYOUT_ROWS, LAYOUT_ROWS};
    int mixed[3] = {LAYOUT_COLS, LAYOUT_STEPPED, LAYOUT_COLS};
    for (int f = 0; f < NUM_FAMILIES; f++) {
        if (!use_family(f)) {
            continue;
        }
        for (int tiny = 0; tiny < 2; tiny++) {
            THBlas_setCacheSizes(tiny ? tiny_caches : NULL);
            check_case(TH_Float32, 150, 70, 40, rows, 1, 0);
            check_case(TH_Float64, 301, 97, 300, mixed, 0.5, 2);
            check_case(TH_Float32, 64, 40, 300, mixed, -1, 1);
        }
        THBlas_setCacheSizes(NULL);
    }
    CHECK_OK(THBlas_setKernel(saved_kernel));
    check_case(TH_Float64, 40, 170, 50, mixed, 0.5, 2); /* column bands */
    check_case(TH_Float32, 3000, 1, 100, rows, 1, 0);   /* gemv bands */
    /* 16 threads, 22 row tiles: equal chunks of 2 would leave 5 threads
     * an empty band (which once divided by zero in THBlas_balancedStep). */
    CHECK_OK(THParallel_setNumThreads(16));
    check_case(TH_Float32, 300, 300, 64, rows, 1, 0);
    check_case(TH_Float64, 300, 290, 64, rows, 1, 0);
    CHECK_OK(THParallel_setNumThreads(saved));
}

static void
test_gemm_integer_dtypes(void)
{
    int rows[3] = {LAYOUT_ROWS, LAYOUT_ROWS, LAYOUT_ROWS};
    for (int d = 0; d < TH_NUM_DTYPES; d++) {
        if (THDtype_isFloating((THDtype)d)) {
            continue;
        }
        check_case((THDtype)d, 7, 9, 65, rows, 1, 0);
        check_case((THDtype)d, 3, 4, 5, rows, 3, 2);
    }
}

/* PyTorch's int8 matmul wraps around: 100 * 100 + 100 * 100 = 20000 = 32
 * (mod 256); int64 wraps modulo 2^64 without undefined behaviour. */
static void
test_gemm_integer_wraps(void)
{
    int8_t a8[2] = {100, 100}, c8 = 0;
    THBlasMatrix a = {(char *)a8, 2, 1}, b = {(char *)a8, 1, 2};
    THBlasMatrix c = {(char *)&c8, 1, 1};
    CHECK_OK(THBlas_gemm(TH_Int8, 1, 1, 2, THScalar_fromInt(1), a, b,
                         THScalar_fromInt(0), c));
    CHECK_EQ_INT(c8, 32);
    int64_t big[2] = {INT64_MAX, 2}, c64 = 0;
    THBlasMatrix a64 = {(char *)big, 2, 1}, b64 = {(char *)big, 1, 2};
    THBlasMatrix cm64 = {(char *)&c64, 1, 1};
    CHECK_OK(THBlas_gemm(TH_Int64, 1, 1, 1, THScalar_fromInt(1), a64, b64,
                         THScalar_fromInt(0), cm64));
    CHECK_EQ_INT(c64, (int64_t)((uint64_t)INT64_MAX * (uint64_t)INT64_MAX));
}

/* k == 0 leaves beta * C (and zeros for beta == 0, even over NaN). */
static void
test_gemm_empty_k(void)
{
    float c[4] = {1, 2, NAN, 4};
    THBlasMatrix none = {NULL, 0, 1}, mc = {(char *)c, 2, 1};
    CHECK_OK(THBlas_gemm(TH_Float32, 2, 2, 0, THScalar_fromInt(1), none,
                         none, THScalar_fromDouble(2), mc));
    CHECK_EQ_DBL(c[0], 2);
    CHECK_EQ_DBL(c[3], 8);
    CHECK_OK(THBlas_gemm(TH_Float32, 2, 2, 0, THScalar_fromInt(1), none,
                         none, THScalar_fromInt(0), mc));
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_DBL(c[i], 0);
    }
    /* a large m x n over k == 0: still only beta * C */
    float *big = malloc(100 * 100 * sizeof(float));
    for (int i = 0; i < 100 * 100; i++) {
        big[i] = NAN;
    }
    THBlasMatrix mbig = {(char *)big, 100, 1};
    CHECK_OK(THBlas_gemm(TH_Float32, 100, 100, 0, THScalar_fromInt(1), none,
                         none, THScalar_fromInt(0), mbig));
    CHECK_EQ_DBL(big[0], 0);
    CHECK_EQ_DBL(big[9999], 0);
    free(big);
}

/* alpha == 0: A and B are not read, so their NaNs do not reach C. */
static void
test_gemm_zero_alpha_skips_the_product(void)
{
    for (int size = 2; size <= 64; size *= 32) { /* row-wise, packed */
        double *nans = malloc((size_t)(size * size) * sizeof(double));
        double *c = malloc((size_t)(size * size) * sizeof(double));
        for (int i = 0; i < size * size; i++) {
            nans[i] = NAN;
            c[i] = 1;
        }
        THBlasMatrix a = {(char *)nans, size, 1}, mc = {(char *)c, size, 1};
        CHECK_OK(THBlas_gemm(TH_Float64, size, size, size,
                             THScalar_fromInt(0), a, a,
                             THScalar_fromDouble(2), mc));
        CHECK_EQ_DBL(c[0], 2);
        CHECK_EQ_DBL(c[size * size - 1], 2);
        free(nans);
        free(c);
    }
}

static void
test_gemm_kernel_selection(void)
{
    const char *name = THBlas_kernelName();
    CHECK(strcmp(name, "avx512") == 0 || strcmp(name, "avx2") == 0
          || strcmp(name, "generic") == 0);
    CHECK_FAILS(THBlas_setKernel("sse9"), TH_ERR_VALUE,
                "unknown GEMM kernel 'sse9'");
    CHECK_OK(THBlas_setKernel("generic"));
    CHECK_STR_EQ(THBlas_kernelName(), "generic");
    CHECK_OK(THBlas_setKernel(name));
}

/* ---- tensors ------------------------------------------------------------------- */

/* A (3, 4, 5) batch times one (5, 6) matrix expanded over the batch: the
 * batch folds into the rows (one 12 x 5 GEMM).  Then a transposed batch
 * that cannot fold. */
static void
test_gemm_tensor_batches(void)
{
    double av[60], bv[30];
    for (int i = 0; i < 60; i++) {
        av[i] = (i % 7) - 3;
    }
    for (int i = 0; i < 30; i++) {
        bv[i] = (i % 5) - 2;
    }
    THTensor *a = tt_from(TH_Float32, TT_SIZES(3, 4, 5), av);
    THTensor *b2 = tt_from(TH_Float32, TT_SIZES(5, 6), bv);
    THTensor *b = THTensor_newExpand(b2, 3, (int64_t[]){3, 5, 6});
    THTensor *c = THTensor_newEmpty(3, (int64_t[]){3, 4, 6}, TH_Float32,
                                    TH_DEVICE_CPU);
    CHECK_OK(THBlas_gemmTensor(c, a, b, THScalar_fromInt(0),
                               THScalar_fromInt(1)));
    /* a batch-transposed copy: c2[i] = a[i] @ b2, with a viewed (4, 3, 5)
     * and permuted back, so batch strides do not continue the rows */
    THTensor *a_perm = THTensor_newPermute(a, 3, (int64_t[]){1, 0, 2});
    THTensor *a_clone = THTensor_newContiguous(a_perm);
    THTensor *a_back = THTensor_newPermute(a_clone, 3, (int64_t[]){1, 0, 2});
    THTensor *c2 = THTensor_newEmpty(3, (int64_t[]){3, 4, 6}, TH_Float32,
                                     TH_DEVICE_CPU);
    CHECK_OK(THBlas_gemmTensor(c2, a_back, b, THScalar_fromInt(0),
                               THScalar_fromInt(1)));
    const float *got = (const float *)THTensor_data(c);
    const float *got2 = (const float *)THTensor_data(c2);
    for (int bi = 0; bi < 3; bi++) {
        for (int i = 0; i < 4; i++) {
            for (int j = 0; j < 6; j++) {
                double want = 0;
                for (int p = 0; p < 5; p++) {
                    want += av[bi * 20 + i * 5 + p] * bv[p * 6 + j];
                }
                CHECK_EQ_DBL(got[bi * 24 + i * 6 + j], want);
                CHECK_EQ_DBL(got2[bi * 24 + i * 6 + j], want);
            }
        }
    }
    /* the result must not overlap an operand */
    THTensor *sq = tt_from(TH_Float32, TT_SIZES(2, 2), av);
    CHECK_FAILS(THBlas_gemmTensor(sq, sq, sq, THScalar_fromInt(0),
                                  THScalar_fromInt(1)),
                TH_ERR_RUNTIME, "overlaps");
    THTensor *owned[] = {a, b2, b, c, a_perm, a_clone, a_back, c2, sq};
    for (int i = 0; i < 9; i++) {
        THTensor_release(owned[i]);
    }
}

/* ---- THBlas_gemmGathered: B through gather_b, C through scatter_c --------- */

typedef struct {
    THDtype dtype;
    int64_t m, n;
    const Mat *b;
    Mat *c;
} GatheredCase;

/* Packs B's micro-panel from the stored matrix, with NaN in the columns
 * past n and in the spare row (which the contract lets gather_b fill):
 * none of it may reach C. */
static void
gather_stored(void *ctx, int64_t p0, int64_t kc, int64_t j0, int nr, char *dst)
{
    const GatheredCase *g = ctx;
    for (int64_t p = 0; p <= kc; p++) {
        for (int64_t j = 0; j < nr; j++) {
            bool real = p < kc && j0 + j < g->n;
            store(g->dtype, dst, p * nr + j,
                  real ? load(g->dtype, g->b->buf, at(g->b, p0 + p, j0 + j)) : NAN);
        }
    }
}

static void
scatter_stored(void *ctx, int64_t j0, int64_t cols, const char *panel, int nr)
{
    GatheredCase *g = ctx;
    for (int64_t i = 0; i < g->m; i++) {
        for (int64_t j = 0; j < cols; j++) {
            store(g->dtype, g->c->buf, at(g->c, i, j0 + j),
                  load(g->dtype, panel, i * nr + j));
        }
    }
}

static void
check_gathered(THDtype dtype, int64_t m, int64_t n, int64_t k, int a_layout)
{
    Mat a = mat_new(m, k, a_layout);
    Mat b = mat_new(k, n, LAYOUT_ROWS);
    Mat c = mat_new(m, n, LAYOUT_ROWS);
    fill_operands(dtype, &a, &b);
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            store(dtype, c.buf, at(&c, i, j), NAN); /* C is only written */
        }
    }
    GatheredCase g = {dtype, m, n, &b, &c};
    CHECK_OK(THBlas_gemmGathered(dtype, m, n, k, as_blas(&a), gather_stored,
                                 scatter_stored, &g));
    int reported = 0;
    for (int64_t i = 0; i < m && reported < 3; i++) {
        for (int64_t j = 0; j < n && reported < 3; j++) {
            double want = 0;
            for (int64_t p = 0; p < k; p++) {
                want += load(dtype, a.buf, at(&a, i, p)) * load(dtype, b.buf, at(&b, p, j));
            }
            double got = load(dtype, c.buf, at(&c, i, j));
            if (!(fabs(got - want) <= 1e-9 * (1 + fabs(want)))) {
                CHECK_MSG(false, "gathered %s %s m=%lld n=%lld k=%lld: C[%lld,%lld] = %g, want %g",
                          THDtype_name(dtype), THBlas_kernelName(), (long long)m,
                          (long long)n, (long long)k, (long long)i, (long long)j, got, want);
                reported++;
            }
        }
    }
    free(a.buf);
    free(b.buf);
    free(c.buf);
}

/* Products whose packed A outgrows the tiny caches' L2 while their
 * C panels stay small, so B's micro-panels go in groups (Note [GEMM with a
 * gathered B]), the last group short; m = 8 and 16 take the narrow tile
 * under every family (Note [The narrow tile]). */
static const int64_t grouped_sizes[][3] = {{8, 300, 600}, {16, 333, 300}, {5, 700, 800}};
#define NUM_GROUPED_SIZES ((int)(sizeof(grouped_sizes) / sizeof(grouped_sizes[0])))

/* Every family this CPU runs, the odd sizes (k == 0 among them; m on both
 * sides of each tile's multiples, so both tiles run) with the detected and
 * with tiny caches (several KC blocks, groups of panels), A in every
 * layout, two threads; and a dtype the packed GEMM does not take. */
static void
test_gemm_gathered_matches_naive(void)
{
    const char *saved = THBlas_kernelName();
    int saved_threads = THParallel_getNumThreads();
    for (int f = 0; f < NUM_FAMILIES; f++) {
        if (!use_family(f)) {
            continue;
        }
        for (int caches = 0; caches < 2; caches++) {
            THBlas_setCacheSizes(caches == 0 ? NULL : tiny_caches);
            for (int s = 0; s < NUM_ODD_SIZES; s++) {
                check_gathered(s % 2 ? TH_Float32 : TH_Float64, odd_sizes[s][0],
                               odd_sizes[s][1], odd_sizes[s][2], s % NUM_LAYOUTS);
            }
        }
        THBlas_setCacheSizes(tiny_caches);
        for (int s = 0; s < NUM_GROUPED_SIZES; s++) {
            for (int d = 0; d < 2; d++) {
                check_gathered(d == 0 ? TH_Float32 : TH_Float64, grouped_sizes[s][0],
                               grouped_sizes[s][1], grouped_sizes[s][2], s % NUM_LAYOUTS);
            }
        }
        THBlas_setCacheSizes(NULL);
        CHECK_OK(THParallel_setNumThreads(2));
        check_gathered(TH_Float32, 70, 300, 90, LAYOUT_ROWS);
        THBlas_setCacheSizes(tiny_caches);
        check_gathered(TH_Float64, 16, 333, 300, LAYOUT_ROWS);
        THBlas_setCacheSizes(NULL);
        CHECK_OK(THParallel_setNumThreads(saved_threads));
    }
    CHECK_OK(THBlas_setKernel(saved));
    THBlasMatrix none = {NULL, 0, 1};
    CHECK_FAILS(THBlas_gemmGathered(TH_Int32, 2, 2, 2, none, gather_stored,
                                    scatter_stored, NULL),
                TH_ERR_VALUE, "does not take the packed GEMM");
}

/* ---- one packed B for many products ------------------------------------------ */

/* Values whose products and sums round (unlike value()'s): a product
 * summed in another order or blocking would differ in the last bits. */
static double
rounding_value(int64_t i, int64_t j, int salt)
{
    return (double)((i * 13 + j * 7 + salt * 3) % 17 - 8) / 3.0 + 0.1 * salt;
}

/* THBlas_gemmPackedB against THBlas_gemm on the same operands: every
 * element of C equal, bit for bit (the same tile, blocking and kernel:
 * Note [One packed B for many products]), and within rounding of the
 * triple loop; beta == 0 over NaN.  The B packed once serves two
 * products, the second with another A.  `refamily`: the family is
 * switched to generic between packing and the products (which must then
 * read the kept B). */
static void
check_packed_b(THDtype dtype, int64_t m, int64_t n, int64_t k, int b_layout,
               double alpha, double beta, bool refamily)
{
    Mat a = mat_new(m, k, LAYOUT_ROWS), b = mat_new(k, n, b_layout);
    Mat want = mat_new(m, n, LAYOUT_ROWS), got = mat_new(m, n, LAYOUT_ROWS);
    for (int64_t p = 0; p < k; p++) {
        for (int64_t j = 0; j < n; j++) {
            store(dtype, b.buf, at(&b, p, j), rounding_value(p, j, 2));
        }
    }
    const char *family = THBlas_kernelName();
    THBlasPackedB packed;
    CHECK_OK(THBlas_packB(dtype, k, n, as_blas(&b), &packed));
    if (refamily) {
        CHECK_OK(THBlas_setKernel("generic"));
    }
    double tolerance = dtype == TH_Float32 ? 1e-4 : 1e-12;
    for (int round = 0; round < 2; round++) {
        for (int64_t i = 0; i < m; i++) {
            for (int64_t p = 0; p < k; p++) {
                store(dtype, a.buf, at(&a, i, p), rounding_value(i + round, p, 1));
            }
            for (int64_t j = 0; j < n; j++) {
                double old = beta == 0 ? NAN : rounding_value(i, j, 3);
                store(dtype, want.buf, at(&want, i, j), old);
                store(dtype, got.buf, at(&got, i, j), old);
            }
        }
        CHECK_OK(THBlas_gemm(dtype, m, n, k, THScalar_fromDouble(alpha), as_blas(&a),
                             as_blas(&b), THScalar_fromDouble(beta), as_blas(&want)));
        CHECK_OK(THBlas_gemmPackedB(m, THScalar_fromDouble(alpha), as_blas(&a), &packed,
                                    THScalar_fromDouble(beta), as_blas(&got)));
        int reported = 0;
        for (int64_t i = 0; i < m && reported < 3; i++) {
            for (int64_t j = 0; j < n && reported < 3; j++) {
                double sum = 0;
                for (int64_t p = 0; p < k; p++) {
                    sum += load(dtype, a.buf, at(&a, i, p)) * load(dtype, b.buf, at(&b, p, j));
                }
                double naive = alpha * sum + (beta == 0 ? 0 : beta * rounding_value(i, j, 3));
                double g = load(dtype, got.buf, at(&got, i, j));
                double w = load(dtype, want.buf, at(&want, i, j));
                if (!(g == w && fabs(g - naive) <= tolerance * (1 + fabs(naive)))) {
                    CHECK_MSG(false,
                              "packed B %s %s%s threads=%d m=%lld n=%lld k=%lld "
                              "b_layout %d alpha=%g beta=%g: C[%lld,%lld] = %.17g, "
                              "THBlas_gemm %.17g, naive %.17g",
                              THDtype_name(dtype), family, refamily ? "->generic" : "",
                              THParallel_getNumThreads(), (long long)m, (long long)n,
                              (long long)k, b_layout, alpha, beta, (long long)i,
                              (long long)j, g, w, naive);
                    reported++;
                }
            }
        }
    }
    THBlas_freePackedB(&packed);
    THBlas_freePackedB(&packed); /* a second free is harmless */
    CHECK_OK(THBlas_setKernel(family));
    free(a.buf);
    free(b.buf);
    free(want.buf);
    free(got.buf);
}

/* A recurrent step's shapes (m = 20 and 10 rows of a batch: the 10-row
 * tile; 50: the wide one; 8: the narrow one) with a partial last panel
 * and several k blocks; m == 1 and n below NR (the matrix-vector and
 * dot-block kernels, which read the kept B); k == 0. */
static const int64_t packed_sizes[][3] = {
    {20, 100, 70}, {10, 64, 300}, {50, 33, 129}, {8, 130, 257},
    {1, 40, 50},   {20, 5, 40},   {7, 9, 0},     {20, 1024, 256},
};
#define NUM_PACKED_SIZES ((int)(sizeof(packed_sizes) / sizeof(packed_sizes[0])))

/* Every family this CPU runs, float32 and float64, B in every layout,
 * with the detected and tiny caches (many k blocks), one and two
 * threads; a family switched after packing; and a dtype the packed GEMM
 * does not take, which keeps B unpacked. */
static void
test_gemm_packed_b_matches_gemm(void)
{
    const char *saved = THBlas_kernelName();
    int saved_threads = THParallel_getNumThreads();
    static const double coefficients[][2] = {{1, 0}, {0.5, 2}, {-1, 1}};
    for (int f = 0; f < NUM_FAMILIES; f++) {
        if (!use_family(f)) {
            continue;
        }
        for (int setting = 0; setting < 4; setting++) {
            THBlas_setCacheSizes(setting % 2 ? tiny_caches : NULL);
            CHECK_OK(THParallel_setNumThreads(setting < 2 ? 1 : 2));
            for (int s = 0; s < NUM_PACKED_SIZES; s++) {
                const double *ab = coefficients[s % 3];
                check_packed_b(s % 2 ? TH_Float64 : TH_Float32, packed_sizes[s][0],
                               packed_sizes[s][1], packed_sizes[s][2], s % NUM_LAYOUTS,
                               ab[0], ab[1], false);
            }
        }
        THBlas_setCacheSizes(NULL);
        CHECK_OK(THParallel_setNumThreads(saved_threads));
        check_packed_b(TH_Float32, 20, 100, 70, LAYOUT_COLS, 1, 1, true);
    }
    CHECK_OK(THBlas_setKernel(saved));
    /* the blocking changed between packing and the product */
    Mat b = mat_new(300, 40, LAYOUT_ROWS), a = mat_new(20, 300, LAYOUT_ROWS);
    Mat c = mat_new(20, 40, LAYOUT_ROWS);
    fill_operands(TH_Float32, &a, &b);
    THBlasPackedB packed;
    CHECK_OK(THBlas_packB(TH_Float32, 300, 40, as_blas(&b), &packed));
    THBlas_setCacheSizes(tiny_caches);
    CHECK_OK(THBlas_gemmPackedB(20, THScalar_fromDouble(1), as_blas(&a), &packed,
                                THScalar_fromDouble(0), as_blas(&c)));
    THBlas_setCacheSizes(NULL);
    for (int64_t i = 0; i < 20; i++) {
        for (int64_t j = 0; j < 40; j++) {
            double sum = 0;
            for (int64_t p = 0; p < 300; p++) {
                sum += value(TH_Float32, i, p, 1) * value(TH_Float32, p, j, 2);
            }
            CHECK_EQ_DBL(load(TH_Float32, c.buf, at(&c, i, j)), sum);
        }
    }
    THBlas_freePackedB(&packed);
    /* int32: not packed, the product reads B */
    fill_operands(TH_Int32, &a, &b);
    CHECK_OK(THBlas_packB(TH_Int32, 300, 40, as_blas(&b), &packed));
    CHECK(packed.panels == NULL);
    CHECK_OK(THBlas_gemmPackedB(20, THScalar_fromInt(1), as_blas(&a), &packed,
                                THScalar_fromInt(0), as_blas(&c)));
    for (int64_t j = 0; j < 40; j++) {
        int64_t sum = 0;
        for (int64_t p = 0; p < 300; p++) {
            sum += (int64_t)value(TH_Int32, 19, p, 1) * (int64_t)value(TH_Int32, p, j, 2);
        }
        CHECK_EQ_DBL(load(TH_Int32, c.buf, at(&c, 19, j)), (double)sum);
    }
    THBlas_freePackedB(&packed);
    free(a.buf);
    free(b.buf);
    free(c.buf);
}

/* ---- bfloat16 on the dot-product instruction -------------------------------- */

/* THBlas_gemmBF16Batched on one product of every odd size and a spread of
 * layouts, against the triple loop: value()'s numbers and their sums are
 * exact in bfloat16 and float32, so the float32 C must match exactly;
 * beta == 0 over NaN, and a second product of the batch (offsets). */
static void
check_bf16_case(int64_t m, int64_t n, int64_t k, const int *layouts,
                double alpha, double beta)
{
    Mat a = mat_new(m, k, layouts[0]);
    Mat b = mat_new(k, n, layouts[1]);
    Mat c = mat_new(m, n, layouts[2]);
    fill_operands(TH_BFloat16, &a, &b);
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            store(TH_Float32, c.buf, at(&c, i, j),
                  beta == 0 ? NAN : value(TH_Float32, i, j, 3));
        }
    }
    CHECK_OK(THBlas_gemmBF16Batched(1, m, n, k, (float)alpha, as_blas(&a),
                                    NULL, as_blas(&b), NULL, (float)beta,
                                    as_blas(&c), NULL));
    int reported = 0;
    for (int64_t i = 0; i < m && reported < 3; i++) {
        for (int64_t j = 0; j < n && reported < 3; j++) {
            double sum = 0;
            for (int64_t p = 0; p < k; p++) {
                sum += load(TH_BFloat16, a.buf, at(&a, i, p))
                       * load(TH_BFloat16, b.buf, at(&b, p, j));
            }
            double expect = alpha * sum
                            + (beta == 0 ? 0 : beta * value(TH_Float32, i, j, 3));
            double got = load(TH_Float32, c.buf, at(&c, i, j));
            if (!(got == expect)) {
                CHECK_MSG(false,
                          "bfloat16 dot m=%lld n=%lld k=%lld layouts %d%d%d: "
                          "C[%lld,%lld] = %g, want %g",
                          (long long)m, (long long)n, (long long)k, layouts[0],
                          layouts[1], layouts[2], (long long)i, (long long)j,
                          got, expect);
                reported++;
            }
        }
    }
    free(a.buf);
    free(b.buf);
    free(c.buf);
}

static void
check_bf16_odd_sizes(void)
{
    static const double coefficients[][2] = {{1, 0}, {0.5, 2}, {-1, 1}};
    for (int s = 0; s < NUM_ODD_SIZES; s++) {
        for (int l = 0; l < NUM_LAYOUTS; l++) {
            int layouts[3] = {(s + l) % NUM_LAYOUTS, l, (s + 1) % NUM_LAYOUTS};
            const double *ab = coefficients[(s + l) % 3];
            check_bf16_case(odd_sizes[s][0], odd_sizes[s][1], odd_sizes[s][2],
                            layouts, ab[0], ab[1]);
        }
    }
}

/* Two products of a batch from one buffer each: product 1 is offset. */
static void
check_bf16_batch(void)
{
    enum { M = 17, N = 40, K = 33 };
    THBFloat16 a[2 * M * K], b[2 * K * N];
    float c[2 * M * N];
    for (int i = 0; i < 2 * M * K; i++) {
        a[i] = THBFloat16_fromFloat((float)((i * 7) % 11 - 5) / 4);
    }
    for (int i = 0; i < 2 * K * N; i++) {
        b[i] = THBFloat16_fromFloat((float)((i * 3) % 13 - 6) / 2);
    }
    const int64_t a_offsets[2] = {0, M * K}, b_offsets[2] = {K * N, 0};
    const int64_t c_offsets[2] = {0, M * N};
    THBlasMatrix ma = {(char *)a, K, 1}, mb = {(char *)b, N, 1};
    THBlasMatrix mc = {(char *)c, N, 1};
    CHECK_OK(THBlas_gemmBF16Batched(2, M, N, K, 1.0f, ma, a_offsets, mb,
                                    b_offsets, 0.0f, mc, c_offsets));
    for (int t = 0; t < 2; t++) {
        for (int i = 0; i < M; i++) {
            for (int j = 0; j < N; j++) {
                double sum = 0;
                for (int p = 0; p < K; p++) {
                    sum += (double)THBFloat16_toFloat(a[a_offsets[t] + i * K + p])
                           * THBFloat16_toFloat(b[b_offsets[t] + p * N + j]);
                }
                CHECK_EQ_DBL(c[c_offsets[t] + i * N + j], sum);
            }
        }
    }
}

/* The dot path runs exactly when the avx512 family is in use on a CPU with
 * AVX512-BF16 (and is refused otherwise); it is run on every size, with
 * blocks from tiny caches (every KC, MC and NC edge), and on two threads. */
static void
test_gemm_bfloat16_dot_matches_naive(void)
{
    const char *saved = THBlas_kernelName();
    int saved_threads = THParallel_getNumThreads();
    for (int f = 0; f < NUM_FAMILIES; f++) {
        if (!use_family(f)) {
            continue;
        }
        if (!THBlas_bf16DotAvailable()) {
            THBlasMatrix none = {NULL, 0, 1};
            CHECK_FAILS(THBlas_gemmBF16Batched(1, 2, 2, 2, 1.0f, none, NULL,
                                               none, NULL, 0.0f, none, NULL),
                        TH_ERR_RUNTIME, "dot-product");
            continue;
        }
        printf("  bfloat16 dot-product GEMM run (%s)\n", all_families[f]);
        check_bf16_odd_sizes();
        check_bf16_batch();
        THBlas_setCacheSizes(tiny_caches);
        check_bf16_odd_sizes();
        THBlas_setCacheSizes(NULL);
        /* two threads: one packed B shared by row bands (Note [One packed
         * B for all threads]), over one and over many B blocks; and a
         * wide product, split by columns */
        CHECK_OK(THParallel_setNumThreads(2));
        int layouts[3] = {LAYOUT_COLS, LAYOUT_ROWS, LAYOUT_STEPPED};
        check_bf16_case(301, 97, 1100, layouts, 1, 0);
        THBlas_setCacheSizes(tiny_caches);
        check_bf16_case(301, 97, 1100, layouts, 0.5, 2);
        THBlas_setCacheSizes(NULL);
        check_bf16_case(45, 260, 70, layouts, 2, 0.5);
        CHECK_OK(THParallel_setNumThreads(saved_threads));
    }
    CHECK_OK(THBlas_setKernel(saved));
}

TH_TEST_SUITE(blas) = {
    TH_TEST(test_gemm_floating_matches_naive),
    TH_TEST(test_gemm_blocking_follows_the_caches),
    TH_TEST(test_gemm_every_layout),
    TH_TEST(test_gemv_shapes_every_layout),
    TH_TEST(test_gemm_small_products_every_layout),
    TH_TEST(test_gemm_few_columns_every_family),
    TH_TEST(test_gemm_narrow_tile_every_family),
    TH_TEST(test_gemm_a_in_place_every_family),
    TH_TEST(test_gemm_batched_large_products),
    TH_TEST(test_gemm_two_threads),
    TH_TEST(test_gemm_integer_dtypes),
    TH_TEST(test_gemm_integer_wraps),
    TH_TEST(test_gemm_empty_k),
    TH_TEST(test_gemm_zero_alpha_skips_the_product),
    TH_TEST(test_gemm_kernel_selection),
    TH_TEST(test_gemm_tensor_batches),
    TH_TEST(test_gemm_gathered_matches_naive),
    TH_TEST(test_gemm_bfloat16_dot_matches_naive),
    TH_TEST(test_gemm_packed_b_matches_gemm),
    TH_TEST_END,
};
