/*
 * test_factories.c -- arange, linspace and eye (the fills of fresh
 * contiguous tensors in THCopy.c).
 */
#include "th_test.h"

static void
test_factories_arange_int(void)
{
    THTensor *t = THTensor_newEmpty(TT_SIZES(5), TH_Int64, TH_DEVICE_CPU);
    if (t == NULL) {
        CHECK(false);
        return;
    }
    CHECK_OK(THTensor_arange(t, THScalar_fromInt(-3), THScalar_fromInt(2)));
    CHECK_VALUES(t, -3, -1, 1, 3, 5);
    /* filling a fresh tensor is construction, not a write (THTensor.h) */
    CHECK_EQ_INT(tt_version(t), 0);
    /* large int64 values stay exact: the integer path, not doubles */
    const int64_t start = ((int64_t)1 << 62) + 1;
    CHECK_OK(THTensor_arange(t, THScalar_fromInt(start), THScalar_fromInt(3)));
    for (int64_t i = 0; i < 5; i++) {
        CHECK_EQ_INT(tt_get_int(t, i), start + 3 * i);
    }
    CHECK_OK(THTensor_arange(t, THScalar_fromInt(INT64_MAX - 4),
                             THScalar_fromInt(1)));
    CHECK_EQ_INT(tt_get_int(t, 4), INT64_MAX);
    CHECK_OK(THTensor_arange(t, THScalar_fromInt(INT64_MIN + 8),
                             THScalar_fromInt(-2)));
    CHECK_EQ_INT(tt_get_int(t, 4), INT64_MIN);
    /* a bool start or step counts as the integer 0/1 */
    CHECK_OK(THTensor_arange(t, THScalar_fromBool(true), THScalar_fromInt(4)));
    CHECK_VALUES(t, 1, 5, 9, 13, 17);
    CHECK_OK(THTensor_arange(t, THScalar_fromInt(10), THScalar_fromBool(true)));
    CHECK_VALUES(t, 10, 11, 12, 13, 14);
    THTensor_release(t);

    /* a narrower integer dtype */
    t = THTensor_newEmpty(TT_SIZES(4), TH_Int16, TH_DEVICE_CPU);
    CHECK_OK(t ? THTensor_arange(t, THScalar_fromInt(100),
                                 THScalar_fromInt(-50))
               : -1);
    CHECK_VALUES(t, 100, 50, 0, -50);
    THTensor_release(t);
}

static void
test_factories_arange_float(void)
{
    THTensor *t = THTensor_newEmpty(TT_SIZES(5), TH_Float64, TH_DEVICE_CPU);
    CHECK_OK(t ? THTensor_arange(t, THScalar_fromDouble(0.5),
                                 THScalar_fromDouble(0.25))
               : -1);
    CHECK_VALUES(t, 0.5, 0.75, 1.0, 1.25, 1.5);
    /* int scalars into a float tensor */
    CHECK_OK(t ? THTensor_arange(t, THScalar_fromInt(-2), THScalar_fromInt(3))
               : -1);
    CHECK_VALUES(t, -2, 1, 4, 7, 10);
    /* start + i * step, not repeated addition: 0.1 * 3 exactly as computed */
    CHECK_OK(t ? THTensor_arange(t, THScalar_fromDouble(0),
                                 THScalar_fromDouble(0.1))
               : -1);
    CHECK_EQ_DBL(t ? tt_get(t, 3) : 0, 3 * 0.1);
    THTensor_release(t);
    /* an integer tensor with a float step takes the double path */
    t = THTensor_newEmpty(TT_SIZES(4), TH_Int32, TH_DEVICE_CPU);
    CHECK_OK(t ? THTensor_arange(t, THScalar_fromInt(0),
                                 THScalar_fromDouble(0.5))
               : -1);
    CHECK_VALUES(t, 0, 0, 1, 1);
    THTensor_release(t);
    t = THTensor_newEmpty(TT_SIZES(3), TH_Float32, TH_DEVICE_CPU);
    CHECK_OK(t ? THTensor_arange(t, THScalar_fromDouble(1.5),
                                 THScalar_fromDouble(-1))
               : -1);
    CHECK_VALUES(t, 1.5, 0.5, -0.5);
    THTensor_release(t);
    /* zero elements */
    t = THTensor_newEmpty(TT_SIZES(0), TH_Float32, TH_DEVICE_CPU);
    CHECK_OK(t ? THTensor_arange(t, THScalar_fromInt(0), THScalar_fromInt(1))
               : -1);
    THTensor_release(t);
    /* not a fresh contiguous tensor */
    THTensor *m = THTensor_newEmpty(TT_SIZES(2, 2), TH_Float32, TH_DEVICE_CPU);
    THTensor *mt = m ? THTensor_newTranspose(m, 0, 1) : NULL;
    if (mt != NULL) {
        CHECK_FAILS(THTensor_arange(mt, THScalar_fromInt(0),
                                    THScalar_fromInt(1)),
                    TH_ERR_RUNTIME, "contiguous");
        CHECK_FAILS(THTensor_linspace(mt, 0, 1), TH_ERR_RUNTIME,
                    "contiguous");
        CHECK_FAILS(THTensor_eye(mt), TH_ERR_RUNTIME, "contiguous");
    }
    THTensor_release(mt);
    THTensor_release(m);
}

static void
test_factories_linspace(void)
{
    THTensor *t = THTensor_newEmpty(TT_SIZES(5), TH_Float64, TH_DEVICE_CPU);
    CHECK_OK(t ? THTensor_linspace(t, 0, 1) : -1);
    CHECK_VALUES(t, 0, 0.25, 0.5, 0.75, 1);
    CHECK(t && tt_version(t) == 0);
    THTensor_release(t);
    /* endpoints exact even when the step is inexact */
    t = THTensor_newEmpty(TT_SIZES(7), TH_Float64, TH_DEVICE_CPU);
    CHECK_OK(t ? THTensor_linspace(t, 0.1, 0.7) : -1);
    if (t != NULL) {
        CHECK_EQ_DBL(tt_get(t, 0), 0.1);
        CHECK_EQ_DBL(tt_get(t, 6), 0.7);
        for (int64_t i = 0; i < 7; i++) {
            CHECK_NEAR(tt_get(t, i), 0.1 + 0.1 * (double)i, 1e-15);
        }
    }
    THTensor_release(t);
    /* here start + 3 * step would round to 2/3 + 1 ulp: the second half
     * is computed back from `end`, as PyTorch does */
    t = THTensor_newEmpty(TT_SIZES(4), TH_Float64, TH_DEVICE_CPU);
    CHECK_OK(t ? THTensor_linspace(t, -1.0 / 3.0, 2.0 / 3.0) : -1);
    if (t != NULL) {
        double step = (2.0 / 3.0 - -1.0 / 3.0) / 3;
        CHECK_EQ_DBL(tt_get(t, 0), -1.0 / 3.0);
        CHECK_EQ_DBL(tt_get(t, 1), -1.0 / 3.0 + step);
        CHECK_EQ_DBL(tt_get(t, 2), 2.0 / 3.0 - step);
        CHECK_EQ_DBL(tt_get(t, 3), 2.0 / 3.0);
    }
    THTensor_release(t);
    t = THTensor_newEmpty(TT_SIZES(4), TH_Float32, TH_DEVICE_CPU);
    CHECK_OK(t ? THTensor_linspace(t, -1.0 / 3.0, 2.0 / 3.0) : -1);
    if (t != NULL) {
        CHECK_EQ_DBL(tt_get(t, 0), (double)(float)(-1.0 / 3.0));
        CHECK_EQ_DBL(tt_get(t, 3), (double)(float)(2.0 / 3.0));
    }
    THTensor_release(t);
    /* decreasing */
    t = THTensor_newEmpty(TT_SIZES(3), TH_Float64, TH_DEVICE_CPU);
    CHECK_OK(t ? THTensor_linspace(t, 10, -10) : -1);
    CHECK_VALUES(t, 10, 0, -10);
    THTensor_release(t);
    /* steps = 1: just start (PyTorch) */
    t = THTensor_newEmpty(TT_SIZES(1), TH_Float64, TH_DEVICE_CPU);
    CHECK_OK(t ? THTensor_linspace(t, 3, 7) : -1);
    CHECK_VALUES(t, 3);
    THTensor_release(t);
    /* steps = 0: nothing */
    t = THTensor_newEmpty(TT_SIZES(0), TH_Float64, TH_DEVICE_CPU);
    CHECK_OK(t ? THTensor_linspace(t, 3, 7) : -1);
    CHECK(t && t->numel == 0);
    THTensor_release(t);
    /* integer dtype: values truncated */
    t = THTensor_newEmpty(TT_SIZES(5), TH_Int32, TH_DEVICE_CPU);
    CHECK_OK(t ? THTensor_linspace(t, 0, 10) : -1);
    CHECK_VALUES(t, 0, 2, 5, 7, 10);
    THTensor_release(t);
}

static void
test_factories_eye(void)
{
    THTensor *t = THTensor_newEmpty(TT_SIZES(2, 3), TH_Float32, TH_DEVICE_CPU);
    if (t != NULL) {
        CHECK_OK(THTensor_fill(t, THScalar_fromInt(5)));
        CHECK_OK(THTensor_eye(t));
    }
    CHECK_VALUES(t, 1, 0, 0, 0, 1, 0);
    THTensor_release(t);
    t = THTensor_newEmpty(TT_SIZES(3, 2), TH_Int64, TH_DEVICE_CPU);
    CHECK_OK(t ? THTensor_eye(t) : -1);
    CHECK_VALUES(t, 1, 0, 0, 1, 0, 0);
    THTensor_release(t);
    t = THTensor_newEmpty(TT_SIZES(3, 3), TH_Bool, TH_DEVICE_CPU);
    CHECK_OK(t ? THTensor_eye(t) : -1);
    CHECK_VALUES(t, 1, 0, 0, 0, 1, 0, 0, 0, 1);
    THTensor_release(t);
    t = THTensor_newEmpty(TT_SIZES(0, 3), TH_Float64, TH_DEVICE_CPU);
    CHECK_OK(t ? THTensor_eye(t) : -1);
    THTensor_release(t);
    t = THTensor_newEmpty(TT_SIZES(1, 4), TH_UInt8, TH_DEVICE_CPU);
    CHECK_OK(t ? THTensor_eye(t) : -1);
    CHECK_VALUES(t, 1, 0, 0, 0);
    THTensor_release(t);
    t = THTensor_newEmpty(TT_SIZES(4), TH_Float64, TH_DEVICE_CPU);
    if (t != NULL) {
        CHECK_FAILS(THTensor_eye(t), TH_ERR_RUNTIME, "2-d");
    }
    THTensor_release(t);
}

TH_TEST_SUITE(factories) = {
    TH_TEST(test_factories_arange_int),
    TH_TEST(test_factories_arange_float),
    TH_TEST(test_factories_linspace),
    TH_TEST(test_factories_eye),
    TH_TEST_END,
};
