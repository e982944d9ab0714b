/*
 * test_reduce.c -- reductions, softmax and scans (THReduce.h): the dim
 * masks, each driver of Note [Reduction plan], and the error paths.
 */
#include "th_test.h"

#include <math.h>

static void
test_reduce_dim_mask(void)
{
    THTensor *t = tt_arange(TH_Float32, TT_SIZES(2, 3, 4));
    bool mask[TH_MAX_DIMS];
    CHECK_OK(THReduce_dimMask(t, 0, NULL, mask));
    CHECK(mask[0] && mask[1] && mask[2]);
    CHECK_OK(THReduce_dimMask(t, 2, (int64_t[]){-1, 0}, mask));
    CHECK(mask[0] && !mask[1] && mask[2]);
    CHECK_FAILS(THReduce_dimMask(t, 1, (int64_t[]){3}, mask), TH_ERR_INDEX,
                "expected to be in range of [-3, 2], but got 3");
    CHECK_FAILS(THReduce_dimMask(t, 2, (int64_t[]){1, -2}, mask),
                TH_ERR_RUNTIME, "dim 1 appears multiple times");
    THTensor_release(t);
}

/* Sum over dims 0 and 2 of a contiguous 3-d tensor: the reduced dims do not
 * merge, so the plan copies; dim 0 of a matrix takes the columns driver;
 * a transposed full sum is still one run. */
static void
test_reduce_sum_layouts(void)
{
    THTensor *t = tt_arange(TH_Float32, TT_SIZES(2, 3, 4));
    bool mask[TH_MAX_DIMS];
    CHECK_OK(THReduce_dimMask(t, 2, (int64_t[]){0, 2}, mask));
    THTensor *s = THTensor_newSum(t, mask, false, -1);
    CHECK_SHAPE(s, 3);
    /* sum over i < 2, k < 4 of 12 i + 4 j + k = 48 + 32 j + 12 */
    CHECK_VALUES(s, 60, 92, 124);
    THTensor_release(s);

    THTensor *m = tt_arange(TH_Float64, TT_SIZES(3, 2));
    CHECK_OK(THReduce_dimMask(m, 1, (int64_t[]){0}, mask));
    s = THTensor_newSum(m, mask, true, -1);
    CHECK_SHAPE(s, 1, 2);
    CHECK_VALUES(s, 6, 9);
    THTensor_release(s);

    THTensor *mt = THTensor_newTranspose(m, 0, 1);
    CHECK_OK(THReduce_dimMask(mt, 0, NULL, mask));
    s = THTensor_newSum(mt, mask, false, -1);
    CHECK_SCALAR_SHAPE(s);
    CHECK_VALUES(s, 15);
    THTensor_release(s);
    THTensor_release(mt);
    THTensor_release(m);
    THTensor_release(t);
}

static void
test_reduce_integer_results_are_int64(void)
{
    THTensor *t = tt_from(TH_Int8, TT_SIZES(3), (double[]){100, 100, 100});
    bool mask[TH_MAX_DIMS];
    CHECK_OK(THReduce_dimMask(t, 0, NULL, mask));
    THTensor *s = THTensor_newSum(t, mask, false, -1);
    CHECK(s != NULL && s->dtype == TH_Int64);
    CHECK_VALUES(s, 300);
    THTensor_release(s);
    THTensor *c = THTensor_newCumsum(t, 0, -1);
    CHECK(c != NULL && c->dtype == TH_Int64);
    CHECK_VALUES(c, 100, 200, 300);
    THTensor_release(c);
    THTensor_release(t);
}

static void
test_reduce_argmax_first_index_and_nan(void)
{
    THTensor *t = tt_from(TH_Float32, TT_SIZES(2, 3),
                          (double[]){1, 5, 5, NAN, 2, NAN});
    THTensor *values;
    THTensor *indices;
    CHECK_OK(THTensor_maxDim(t, 1, false, true, &values, &indices));
    CHECK_VALUES(indices, 1, 0);
    CHECK(values != NULL && tt_get(values, 0) == 5 && isnan(tt_get(values, 1)));
    THTensor_release(values);
    THTensor_release(indices);
    THTensor *flat = THTensor_newArgmax(t, NULL, false, false);
    CHECK_VALUES(flat, 3);
    THTensor_release(flat);
    THTensor_release(t);
}

static void
test_reduce_empty_errors(void)
{
    THTensor *e = THTensor_newEmpty(TT_SIZES(0, 3), TH_Float32, TH_DEVICE_CPU);
    bool mask[TH_MAX_DIMS];
    CHECK_OK(THReduce_dimMask(e, 0, NULL, mask));
    CHECK_NEW_FAILS(THTensor_newAmax(e, mask, false, true, "max"),
                    TH_ERR_RUNTIME, "max(): Expected reduction dim to be");
    CHECK_OK(THReduce_dimMask(e, 1, (int64_t[]){0}, mask));
    CHECK_NEW_FAILS(THTensor_newAmax(e, mask, false, true, "amax"),
                    TH_ERR_INDEX, "amax(): Expected reduction dim 0 to have "
                                  "non-zero size.");
    THTensor *s = THTensor_newProd(e, mask, false, -1);
    CHECK_VALUES(s, 1, 1, 1);
    THTensor_release(s);
    THTensor *i = THTensor_newEmpty(TT_SIZES(2), TH_Int32, TH_DEVICE_CPU);
    CHECK_NEW_FAILS(THTensor_newMean(i, mask, false, -1), TH_ERR_RUNTIME,
                    "Got: Int");
    CHECK_NEW_FAILS(THTensor_newSoftmax(i, 0, false, -1), TH_ERR_RUNTIME,
                    "\"softmax_kernel_impl\" not implemented for 'Int'");
    THTensor_release(i);
    THTensor_release(e);
}

/* A full reduction split over two threads equals the serial one up to
 * rounding, and the argmax index of the second chunk is global. */
static void
test_reduce_split_driver(void)
{
    int64_t n = 4 * TH_PARALLEL_GRAIN + 7;
    THTensor *t = tt_arange(TH_Float64, TT_SIZES(n));
    bool mask[TH_MAX_DIMS];
    CHECK_OK(THReduce_dimMask(t, 0, NULL, mask));
    int saved = THParallel_getNumThreads();
    CHECK_OK(THParallel_setNumThreads(2));
    THTensor *s = THTensor_newSum(t, mask, false, -1);
    CHECK(s != NULL && tt_get(s, 0) == (double)n * (double)(n - 1) / 2);
    THTensor *v = THTensor_newVar(t, mask, 0, false, false);
    CHECK(v != NULL
          && fabs(tt_get(v, 0) - ((double)n * n - 1) / 12) < 1e-6 * n * n);
    THTensor *a = THTensor_newArgmax(t, NULL, false, true);
    CHECK_VALUES(a, (double)(n - 1));
    CHECK_OK(THParallel_setNumThreads(saved));
    THTensor_release(a);
    THTensor_release(v);
    THTensor_release(s);
    THTensor_release(t);
}

/* The order of Note [Accurate sums], modelled lane by lane: a run longer
 * than a leaf is halved at a multiple of the 64 lanes; a leaf adds the
 * lanes of its blocks front to back (Note [Block cascade]); a block adds
 * its element i to lane i % 64; the lanes of two halves are added lane by
 * lane, and the 64 lanes are folded in halves at the end.  (The constants
 * are THReduce.c's TH_PAIRWISE_LEAF, _LANES and _BLOCKS.) */
enum { MODEL_BLOCK = 4096, MODEL_LANES = 64, MODEL_BLOCKS = 8 };

static void
model_lanes(const float *x, int64_t n, float *out)
{
    if (n > MODEL_BLOCK * MODEL_BLOCKS) {
        int64_t half = (n / 2) & ~(int64_t)(MODEL_LANES - 1);
        float later[MODEL_LANES];
        model_lanes(x, half, out);
        model_lanes(x + half, n - half, later);
        for (int l = 0; l < MODEL_LANES; l++) {
            out[l] += later[l];
        }
        return;
    }
    for (int l = 0; l < MODEL_LANES; l++) {
        out[l] = 0.0f;
    }
    for (int64_t start = 0; start < n; start += MODEL_BLOCK) {
        float block[MODEL_LANES] = {0};
        for (int64_t i = start; i < n && i < start + MODEL_BLOCK; i++) {
            block[(i - start) % MODEL_LANES] += x[i];
        }
        for (int l = 0; l < MODEL_LANES; l++) {
            out[l] += block[l];
        }
    }
}

static float
model_sum(const float *x, int64_t n)
{
    float lane[MODEL_LANES];
    model_lanes(x, n, lane);
    for (int width = MODEL_LANES / 2; width >= 1; width /= 2) {
        for (int l = 0; l < width; l++) {
            lane[l] += lane[l + width];
        }
    }
    return lane[0];
}

/* Bit for bit the modelled order, whichever build runs: natively on an
 * AVX-512 CPU one block at a time, under valgrind (no AVX-512) with the
 * side-by-side blocks of Note [Two streams].  The values span many
 * binades, so another order would round differently. */
static void
test_reduce_float_sum_adds_in_the_pairwise_order(void)
{
    int64_t sizes[] = {2 * MODEL_BLOCK + 130, 3 * MODEL_BLOCK + 77, 40000,
                       MODEL_BLOCKS * MODEL_BLOCK * 3 + 4099};
    int saved = THParallel_getNumThreads();
    CHECK_OK(THParallel_setNumThreads(1)); /* the split driver cuts runs */
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        int64_t n = sizes[k];
        THTensor *t = THTensor_newEmpty(1, &n, TH_Float32, TH_DEVICE_CPU);
        CHECK_NOT_NULL(t);
        if (t == NULL) {
            continue;
        }
        float *x = (float *)THTensor_data(t);
        uint32_t state = 12345u;
        for (int64_t i = 0; i < n; i++) {
            state = state * 1664525u + 1013904223u;
            x[i] = ldexpf((float)(state >> 8), (int)(state % 24) - 30);
        }
        bool mask[TH_MAX_DIMS];
        CHECK_OK(THReduce_dimMask(t, 0, NULL, mask));
        THTensor *s = THTensor_newSum(t, mask, false, -1);
        CHECK_NOT_NULL(s);
        if (s != NULL) {
            CHECK(*(float *)THTensor_data(s) == model_sum(x, n));
        }
        THTensor_release(s);
        THTensor_release(t);
    }
    CHECK_OK(THParallel_setNumThreads(saved));
}

/* Note [Reduction groups]: sum over (0, 2, 3) of a 2 x 3 x 4 x 256 tensor
 * is a contiguous run of 1024 elements (dims 2 and 3, TH_GROUP_MIN_FOLD)
 * at the 2 positions of dim 0: each output folds its two slices on their
 * own and adds the second's sum to the first's, on any thread count (3
 * outputs: the per-output group driver on 1 and 2 threads).  The int32
 * copy checks an integer kernel's slices and merge. */
static void
test_reduce_sum_over_groups_of_slices(void)
{
    enum { N = 2, C = 3, RUN = 4 * 256 };
    THTensor *t = THTensor_newEmpty(TT_SIZES(N, C, 4, 256), TH_Float32,
                                    TH_DEVICE_CPU);
    THTensor *ints = THTensor_newEmpty(TT_SIZES(N, C, 4, 256), TH_Int32,
                                       TH_DEVICE_CPU);
    CHECK_NOT_NULL(t);
    CHECK_NOT_NULL(ints);
    if (t == NULL || ints == NULL) {
        THTensor_release(t);
        THTensor_release(ints);
        return;
    }
    float *x = (float *)THTensor_data(t);
    int32_t *xi = (int32_t *)THTensor_data(ints);
    uint32_t state = 777u;
    for (int64_t i = 0; i < N * C * RUN; i++) {
        state = state * 1664525u + 1013904223u;
        x[i] = ldexpf((float)(state >> 8), (int)(state % 24) - 30);
        xi[i] = (int32_t)(state >> 12) - (1 << 19);
    }
    bool mask[TH_MAX_DIMS];
    CHECK_OK(THReduce_dimMask(t, 3, (int64_t[]){0, 2, 3}, mask));
    int saved = THParallel_getNumThreads();
    for (int threads = 1; threads <= 2; threads++) {
        CHECK_OK(THParallel_setNumThreads(threads));
        THTensor *s = THTensor_newSum(t, mask, false, -1);
        THTensor *m = THTensor_newMean(t, mask, false, -1);
        THTensor *si = THTensor_newSum(ints, mask, false, -1);
        CHECK_SHAPE(s, C);
        CHECK_SHAPE(si, C);
        for (int c = 0; s != NULL && m != NULL && si != NULL && c < C; c++) {
            float want = model_sum(x + c * RUN, RUN)
                         + model_sum(x + (C + c) * RUN, RUN);
            CHECK(((float *)THTensor_data(s))[c] == want);
            CHECK(((float *)THTensor_data(m))[c] == want / (float)(N * RUN));
            int64_t exact = 0;
            for (int64_t i = 0; i < RUN; i++) {
                exact += xi[c * RUN + i] + xi[(C + c) * RUN + i];
            }
            CHECK(((int64_t *)THTensor_data(si))[c] == exact);
        }
        THTensor_release(s);
        THTensor_release(m);
        THTensor_release(si);
    }
    CHECK_OK(THParallel_setNumThreads(saved));
    THTensor_release(ints);
    THTensor_release(t);
}

static void
test_reduce_softmax_rows_sum_to_one(void)
{
    THTensor *t = tt_from(TH_Float64, TT_SIZES(2, 2),
                          (double[]){1000, 1001, -3, -3});
    THTensor *s = THTensor_newSoftmax(t, 1, false, -1);
    CHECK_NOT_NULL(s);
    if (s != NULL) {
        CHECK_NEAR(tt_get(s, 0) + tt_get(s, 1), 1.0, 1e-12);
        CHECK_NEAR(tt_get(s, 1), 1 / (1 + exp(-1.0)), 1e-12);
        CHECK_NEAR(tt_get(s, 2), 0.5, 1e-12);
    }
    THTensor_release(s);
    THTensor_release(t);
}

TH_TEST_SUITE(reduce) = {
    TH_TEST(test_reduce_dim_mask),
    TH_TEST(test_reduce_sum_layouts),
    TH_TEST(test_reduce_integer_results_are_int64),
    TH_TEST(test_reduce_argmax_first_index_and_nan),
    TH_TEST(test_reduce_empty_errors),
    TH_TEST(test_reduce_split_driver),
    TH_TEST(test_reduce_float_sum_adds_in_the_pairwise_order),
    TH_TEST(test_reduce_sum_over_groups_of_slices),
    TH_TEST(test_reduce_softmax_rows_sum_to_one),
    TH_TEST_END,
};
