/*
 * test_index.c -- THIndex.c's writes through flat and per-dim positions
 * (put_, index_copy_) on strided tensors, and the overlap check they make.
 * The Python suite (tests/test_index_copy_put.py) covers the operators'
 * arguments and messages; these tests pin the core's own promises: writes
 * go through the target's strides, and a bad position writes nothing
 * (Note [Validate, then write]).
 */
#include "th_test.h"

/* put_ into a transposed matrix: flat positions are row-major positions
 * of the transposed view, negative ones counting from the end, and with
 * accumulate repeated ones add up. */
static void
test_put_through_strides(void)
{
    THTensor *base = tt_arange(TH_Float64, TT_SIZES(3, 2));
    THTensor *t = base ? THTensor_newTranspose(base, 0, 1) : NULL; /* (2, 3) */
    THTensor *index = tt_from(TH_Int64, TT_SIZES(4), (double[]){1, -1, 1, 3});
    THTensor *source = tt_from(TH_Float64, TT_SIZES(2, 2),
                               (double[]){10, 20, 30, 40});
    /* t = [[0, 2, 4], [1, 3, 5]]: positions 1, 5, 1, 3 */
    CHECK_OK(THTensor_put(t, index, source, true));
    CHECK_VALUES(t, 0, 42, 4, 41, 3, 25);
    CHECK(base && tt_version(base) == 1);
    THTensor *bad = tt_from(TH_Int64, TT_SIZES(4), (double[]){0, 1, 2, 6});
    CHECK_FAILS(THTensor_put(t, bad, source, false), TH_ERR_INDEX,
                "tried to access index 6 on a tensor of 6 elements");
    CHECK_VALUES(t, 0, 42, 4, 41, 3, 25);
    CHECK(base && tt_version(base) == 1);
    THTensor_release(bad);
    THTensor_release(source);
    THTensor_release(index);
    THTensor_release(t);
    THTensor_release(base);
}

/* index_copy_ along dim 1 of a transposed matrix; an index out of range
 * (the last one) leaves the target as it was. */
static void
test_index_copy_through_strides(void)
{
    THTensor *base = tt_arange(TH_Int32, TT_SIZES(3, 2));
    THTensor *t = base ? THTensor_newTranspose(base, 0, 1) : NULL; /* (2, 3) */
    THTensor *index = tt_from(TH_Int64, TT_SIZES(2), (double[]){2, 0});
    THTensor *source = tt_from(TH_Int32, TT_SIZES(2, 2), (double[]){7, 8, 9, 6});
    CHECK_OK(THTensor_indexCopy(t, -1, index, source));
    CHECK_VALUES(t, 8, 2, 7, 6, 3, 9);
    THTensor *bad = tt_from(TH_Int64, TT_SIZES(2), (double[]){0, 3});
    CHECK_FAILS(THTensor_indexCopy(t, 1, bad, source), TH_ERR_INDEX,
                "index_copy_(): index 3 is out of bounds for dimension 1 "
                "with size 3");
    CHECK_VALUES(t, 8, 2, 7, 6, 3, 9);
    CHECK(base && tt_version(base) == 1);
    THTensor_release(bad);
    THTensor_release(source);
    THTensor_release(index);
    THTensor_release(t);
    THTensor_release(base);
}

/* PyTorch's assert_no_overlap: refused only when both tensors are dense
 * and share memory; interleaved views are "too hard" and pass. */
static void
test_check_no_overlap(void)
{
    THTensor *a = tt_arange(TH_Float32, TT_SIZES(8));
    THTensor *head = a ? THTensor_newSlice(a, 0, 0, 4, 1) : NULL;
    THTensor *middle = a ? THTensor_newSlice(a, 0, 2, 6, 1) : NULL;
    THTensor *tail = a ? THTensor_newSlice(a, 0, 4, 8, 1) : NULL;
    THTensor *even = a ? THTensor_newSlice(a, 0, 0, 8, 2) : NULL;
    THTensor *odd = a ? THTensor_newSlice(a, 0, 1, 8, 2) : NULL;
    CHECK_OK(THTensor_checkNoOverlap(head, tail));
    CHECK_FAILS(THTensor_checkNoOverlap(head, middle), TH_ERR_RUNTIME,
                "some elements of the input tensor and the written-to tensor "
                "refer to a single memory location");
    CHECK_FAILS(THTensor_checkNoOverlap(head, head), TH_ERR_RUNTIME,
                "single memory location");
    CHECK_OK(THTensor_checkNoOverlap(even, odd));
    CHECK_OK(THTensor_checkNoOverlap(even, head));
    THTensor_release(odd);
    THTensor_release(even);
    THTensor_release(tail);
    THTensor_release(middle);
    THTensor_release(head);
    THTensor_release(a);
}

TH_TEST_SUITE(index) = {
    TH_TEST(test_put_through_strides),
    TH_TEST(test_index_copy_through_strides),
    TH_TEST(test_check_no_overlap),
    TH_TEST_END,
};
