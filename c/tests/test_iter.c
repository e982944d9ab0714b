/*
 * test_iter.c -- THIter: broadcasting, dim ordering, coalescing, and the
 * loop driver (THIter.h).
 */
#include "th_test.h"

static void
test_iter_broadcast_shape(void)
{
    int64_t out[TH_MAX_DIMS];
    int ndim = -1;
    CHECK_OK(THIter_broadcastShape(TT_SIZES(3, 1), TT_SIZES(4), &ndim, out));
    CHECK(ndim == 2 && out[0] == 3 && out[1] == 4);
    CHECK_OK(THIter_broadcastShape(TT_SIZES(2, 1, 5), TT_SIZES(3, 1), &ndim,
                                   out));
    CHECK(ndim == 3 && out[0] == 2 && out[1] == 3 && out[2] == 5);
    CHECK_OK(THIter_broadcastShape(0, NULL, TT_SIZES(2, 3), &ndim, out));
    CHECK(ndim == 2 && out[0] == 2 && out[1] == 3);
    CHECK_OK(THIter_broadcastShape(0, NULL, 0, NULL, &ndim, out));
    CHECK_EQ_INT(ndim, 0);
    /* 1 broadcasts to 0; 0 and 0 agree */
    CHECK_OK(THIter_broadcastShape(TT_SIZES(0, 1), TT_SIZES(1, 7), &ndim,
                                   out));
    CHECK(ndim == 2 && out[0] == 0 && out[1] == 7);
    /* PyTorch's message */
    CHECK_FAILS(THIter_broadcastShape(TT_SIZES(3), TT_SIZES(4), &ndim, out),
                TH_ERR_RUNTIME,
                "The size of tensor a (3) must match the size of tensor b "
                "(4) at non-singleton dimension 0");
    CHECK_FAILS(THIter_broadcastShape(TT_SIZES(2, 3), TT_SIZES(5, 2, 4),
                                      &ndim, out),
                TH_ERR_RUNTIME,
                "The size of tensor a (3) must match the size of tensor b "
                "(4) at non-singleton dimension 2");
    CHECK_FAILS(THIter_broadcastShape(TT_SIZES(0), TT_SIZES(2), &ndim, out),
                TH_ERR_RUNTIME, "tensor a (0)");
}

/* Records every call of the inner loop. */
typedef struct {
    int calls;
    int64_t elements;
    int64_t max_n;
    double sum; /* of operand 1's float32 values, in visiting order * k */
    int64_t position;
} LoopLog;

static void
logging_loop(char **data, const int64_t *strides, int64_t n, void *ctx)
{
    LoopLog *log = ctx;
    log->calls++;
    log->elements += n;
    if (n > log->max_n) {
        log->max_n = n;
    }
    (void)data;
    (void)strides;
}

/* out[i] = in[i] + 1000 for float32 operands */
static void
add_thousand_loop(char **data, const int64_t *strides, int64_t n, void *ctx)
{
    (void)ctx;
    for (int64_t k = 0; k < n; k++) {
        *(float *)(data[0] + k * strides[0]) =
            *(const float *)(data[1] + k * strides[1]) + 1000.0f;
    }
}

static void
test_iter_coalesces_contiguous(void)
{
    THTensor *dst = tt_arange(TH_Float32, TT_SIZES(2, 3, 4));
    THTensor *src = tt_arange(TH_Float64, TT_SIZES(2, 3, 4));
    THIter iter;
    THTensor *ops[2] = {dst, src};
    CHECK_OK(THIter_init(&iter, 2, ops));
    CHECK_EQ_INT(iter.ndim, 1);
    CHECK_EQ_INT(iter.shape[0], 24);
    CHECK_EQ_INT(iter.numel, 24);
    CHECK_EQ_INT(iter.strides[0][0], 4); /* bytes */
    CHECK_EQ_INT(iter.strides[0][1], 8);
    CHECK(iter.data[0] == THTensor_data(dst));
    CHECK(iter.data[1] == THTensor_data(src));
    LoopLog log = {0};
    THIter_run(&iter, logging_loop, &log);
    CHECK_EQ_INT(log.calls, 1);
    CHECK_EQ_INT(log.elements, 24);

    /* size-1 dims never make an iteration dim */
    THTensor *a = tt_arange(TH_Int8, TT_SIZES(1, 5, 1));
    THTensor *one[1] = {a};
    CHECK_OK(THIter_init(&iter, 1, one));
    CHECK_EQ_INT(iter.ndim, 1);
    CHECK_EQ_INT(iter.shape[0], 5);
    CHECK_EQ_INT(iter.strides[0][0], 1);
    THTensor_release(a);

    /* 0-dim: no dims, one call of n = 1 */
    THTensor *s = tt_arange(TH_Float32, 0, NULL);
    THTensor *sops[1] = {s};
    CHECK_OK(THIter_init(&iter, 1, sops));
    CHECK_EQ_INT(iter.ndim, 0);
    log = (LoopLog){0};
    THIter_run(&iter, logging_loop, &log);
    CHECK_EQ_INT(log.calls, 1);
    CHECK_EQ_INT(log.elements, 1);
    THTensor_release(s);
    THTensor_release(dst);
    THTensor_release(src);
}

static void
test_iter_transposed_does_not_coalesce(void)
{
    THTensor *base = tt_arange(TH_Float32, TT_SIZES(3, 4));
    THTensor *src = base ? THTensor_newTranspose(base, 0, 1) : NULL; /* 4x3 */
    THTensor *dst = THTensor_newEmpty(TT_SIZES(4, 3), TH_Float32,
                                      TH_DEVICE_CPU);
    THIter iter;
    THTensor *ops[2] = {dst, src};
    CHECK_OK(THIter_init(&iter, 2, ops));
    CHECK_EQ_INT(iter.ndim, 2);
    /* innermost is dst's stride-1 dim */
    CHECK_EQ_INT(iter.shape[0], 3);
    CHECK_EQ_INT(iter.strides[0][0], 4);
    CHECK_EQ_INT(iter.strides[0][1], 16);
    CHECK_EQ_INT(iter.shape[1], 4);
    CHECK_EQ_INT(iter.strides[1][0], 12);
    CHECK_EQ_INT(iter.strides[1][1], 4);
    LoopLog log = {0};
    THIter_run(&iter, logging_loop, &log);
    CHECK_EQ_INT(log.calls, 4);
    CHECK_EQ_INT(log.elements, 12);
    CHECK_EQ_INT(log.max_n, 3);
    THIter_run(&iter, add_thousand_loop, NULL);
    CHECK_VALUES(dst, 1000, 1004, 1008, 1001, 1005, 1009, 1002, 1006, 1010,
                 1003, 1007, 1011);

    /* a transposed destination is walked in its memory order */
    THTensor *tdst = dst ? THTensor_newTranspose(dst, 0, 1) : NULL; /* 3x4 */
    THTensor *ops2[2] = {tdst, base};
    CHECK_OK(THIter_init(&iter, 2, ops2));
    CHECK_EQ_INT(iter.ndim, 2);
    CHECK_EQ_INT(iter.strides[0][0], 4);  /* dst's stride-1 dim inside */
    CHECK_EQ_INT(iter.strides[0][1], 16); /* base's dim 0 */
    CHECK_EQ_INT(iter.shape[0], 3);
    THIter_run(&iter, add_thousand_loop, NULL);
    /* tdst = base + 1000, so dst = base^T + 1000 */
    CHECK_VALUES(tdst, 1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008,
                 1009, 1010, 1011);
    THTensor_release(tdst);
    THTensor_release(dst);
    THTensor_release(src);
    THTensor_release(base);
}

static void
test_iter_partial_coalescing(void)
{
    /* {2, 3, 4} narrowed in the last dim to 2: dims 0 and 1 coalesce with
     * each other (stride 4 * 3 == 12) but not with the narrowed one */
    THTensor *base = tt_arange(TH_Float32, TT_SIZES(2, 3, 4));
    THTensor *n = base ? THTensor_newNarrow(base, 2, 1, 2) : NULL;
    THTensor *dst = THTensor_newEmpty(TT_SIZES(2, 3, 2), TH_Float32,
                                      TH_DEVICE_CPU);
    THIter iter;
    THTensor *ops[2] = {dst, n};
    CHECK_OK(THIter_init(&iter, 2, ops));
    CHECK_EQ_INT(iter.ndim, 2);
    CHECK_EQ_INT(iter.shape[0], 2);
    CHECK_EQ_INT(iter.shape[1], 6);
    CHECK_EQ_INT(iter.strides[1][0], 8);
    CHECK_EQ_INT(iter.strides[1][1], 16);
    THIter_run(&iter, add_thousand_loop, NULL);
    CHECK_VALUES(dst, 1001, 1002, 1005, 1006, 1009, 1010, 1013, 1014, 1017,
                 1018, 1021, 1022);
    THTensor_release(dst);
    THTensor_release(n);
    THTensor_release(base);
}

static void
test_iter_broadcasts_operands(void)
{
    THTensor *dst = THTensor_newEmpty(TT_SIZES(3, 4), TH_Float32,
                                      TH_DEVICE_CPU);
    THTensor *row = tt_arange(TH_Float32, TT_SIZES(4));
    THTensor *col = tt_arange(TH_Float32, TT_SIZES(3, 1));
    THIter iter;
    THTensor *ops[2] = {dst, row};
    CHECK_OK(THIter_init(&iter, 2, ops));
    CHECK_EQ_INT(iter.ndim, 2);
    CHECK_EQ_INT(iter.strides[1][1], 0); /* row repeats down the rows */
    THIter_run(&iter, add_thousand_loop, NULL);
    CHECK_VALUES(dst, 1000, 1001, 1002, 1003, 1000, 1001, 1002, 1003, 1000,
                 1001, 1002, 1003);
    THTensor *ops2[2] = {dst, col};
    CHECK_OK(THIter_init(&iter, 2, ops2));
    CHECK_EQ_INT(iter.strides[0][1], 0);
    THIter_run(&iter, add_thousand_loop, NULL);
    CHECK_VALUES(dst, 1000, 1000, 1000, 1000, 1001, 1001, 1001, 1001, 1002,
                 1002, 1002, 1002);

    /* operands that do not broadcast to operand 0's shape */
    THTensor *bad = tt_arange(TH_Float32, TT_SIZES(3));
    THTensor *ops3[2] = {dst, bad};
    CHECK_FAILS(THIter_init(&iter, 2, ops3), TH_ERR_RUNTIME,
                "The size of tensor a (4) must match the size of tensor b "
                "(3) at non-singleton dimension 1");
    THTensor *more = tt_arange(TH_Float32, TT_SIZES(1, 3, 4));
    THTensor *ops4[2] = {dst, more};
    CHECK_FAILS(THIter_init(&iter, 2, ops4), TH_ERR_RUNTIME,
                "can't be broadcast");
    CHECK_FAILS(THIter_init(&iter, 0, ops4), TH_ERR_RUNTIME,
                "bad operand count");
    CHECK_FAILS(THIter_init(&iter, TH_ITER_MAX_OPERANDS + 1, ops4),
                TH_ERR_RUNTIME, "bad operand count");
    THTensor_release(more);
    THTensor_release(bad);
    THTensor_release(dst);
    THTensor_release(row);
    THTensor_release(col);
}

static void
test_iter_zero_size_runs_nothing(void)
{
    THTensor *dst = THTensor_newEmpty(TT_SIZES(3, 0, 2), TH_Float32,
                                      TH_DEVICE_CPU);
    THTensor *src = tt_arange(TH_Float32, TT_SIZES(1, 2));
    THIter iter;
    THTensor *ops[2] = {dst, src};
    CHECK_OK(THIter_init(&iter, 2, ops));
    CHECK_EQ_INT(iter.numel, 0);
    LoopLog log = {0};
    THIter_run(&iter, logging_loop, &log);
    CHECK_EQ_INT(log.calls, 0);
    CHECK_EQ_INT(log.elements, 0);
    THTensor_release(dst);
    THTensor_release(src);
}

/* Many dims: the odometer visits every element exactly once. */
static void
test_iter_many_dims(void)
{
    int64_t sizes[6] = {2, 1, 3, 2, 1, 2};
    THTensor *base = tt_arange(TH_Float32, 6, sizes);
    int64_t perm[6] = {5, 0, 3, 1, 2, 4};
    THTensor *src = base ? THTensor_newPermute(base, 6, perm) : NULL;
    THTensor *dst = src ? THTensor_newEmpty(6, src->sizes, TH_Float32,
                                            TH_DEVICE_CPU)
                        : NULL;
    THIter iter;
    THTensor *ops[2] = {dst, src};
    CHECK_NOT_NULL(dst);
    if (dst == NULL) {
        THTensor_release(src);
        THTensor_release(base);
        return;
    }
    CHECK_OK(THIter_init(&iter, 2, ops));
    CHECK(iter.ndim >= 2 && iter.ndim <= 4);
    LoopLog log = {0};
    THIter_run(&iter, logging_loop, &log);
    CHECK_EQ_INT(log.elements, 24);
    THIter_run(&iter, add_thousand_loop, NULL);
    for (int64_t i = 0; i < 24; i++) {
        CHECK_EQ_DBL(tt_get(dst, i), tt_get(src, i) + 1000);
    }
    THTensor_release(dst);
    THTensor_release(src);
    THTensor_release(base);
}

TH_TEST_SUITE(iter) = {
    TH_TEST(test_iter_broadcast_shape),
    TH_TEST(test_iter_coalesces_contiguous),
    TH_TEST(test_iter_transposed_does_not_coalesce),
    TH_TEST(test_iter_partial_coalescing),
    TH_TEST(test_iter_broadcasts_operands),
    TH_TEST(test_iter_zero_size_runs_nothing),
    TH_TEST(test_iter_many_dims),
    TH_TEST_END,
};
