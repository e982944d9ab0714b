/*
 * test_tensor.c -- creating tensors, lifetime and the geometry helpers
 * (THTensor.h, first half).
 */
#include "th_test.h"

static void
test_tensor_new_empty(void)
{
    THTensor *t = THTensor_newEmpty(TT_SIZES(2, 3, 4), TH_Float32,
                                    TH_DEVICE_CPU);
    CHECK_NOT_NULL(t);
    if (t == NULL) {
        return;
    }
    CHECK_SHAPE(t, 2, 3, 4);
    CHECK_STRIDES(t, 12, 4, 1);
    CHECK_EQ_INT(t->numel, 24);
    CHECK(t->is_contiguous);
    CHECK_EQ_INT(t->storage_offset, 0);
    CHECK_EQ_INT(t->storage->nbytes, 96);
    CHECK_EQ_INT(t->refcount, 1);
    CHECK_EQ_INT(t->storage->refcount, 1);
    CHECK_EQ_INT(tt_version(t), 0);
    CHECK_EQ_INT(t->dtype, TH_Float32);
    CHECK(THTensor_data(t) == t->storage->data);
    CHECK_EQ_INT(THTensor_itemsize(t), 4);
    CHECK_INVARIANTS(t);
    THTensor_retain(t);
    CHECK_EQ_INT(t->refcount, 2);
    THTensor_release(t);
    THTensor_release(t);
    THTensor_release(NULL);

    /* 0-dim: one element */
    THTensor *s = THTensor_newEmpty(0, NULL, TH_Int64, TH_DEVICE_CPU);
    CHECK(s != NULL && s->ndim == 0 && s->numel == 1 && s->is_contiguous);
    CHECK(s != NULL && s->storage->nbytes == 8);
    CHECK_INVARIANTS(s);
    THTensor_release(s);

    /* zero-size: no bytes, still contiguous */
    THTensor *z = THTensor_newEmpty(TT_SIZES(4, 0, 3), TH_Float64,
                                    TH_DEVICE_CPU);
    CHECK_SHAPE(z, 4, 0, 3);
    CHECK_STRIDES(z, 3, 3, 1); /* PyTorch: torch.empty(4, 0, 3).stride() */
    CHECK(z != NULL && z->numel == 0 && z->is_contiguous);
    CHECK(z != NULL && z->storage->nbytes == 0);
    CHECK_INVARIANTS(z);
    THTensor_release(z);

    /* size-1 dims */
    THTensor *o = THTensor_newEmpty(TT_SIZES(1, 5, 1), TH_Bool, TH_DEVICE_CPU);
    CHECK_STRIDES(o, 5, 1, 1);
    CHECK_INVARIANTS(o);
    THTensor_release(o);

    /* the most dims allowed */
    int64_t ones[TH_MAX_DIMS + 1];
    for (int d = 0; d <= TH_MAX_DIMS; d++) {
        ones[d] = 1;
    }
    ones[0] = 2;
    THTensor *wide = THTensor_newEmpty(TH_MAX_DIMS, ones, TH_UInt8,
                                       TH_DEVICE_CPU);
    CHECK(wide != NULL && wide->ndim == TH_MAX_DIMS && wide->numel == 2);
    CHECK_INVARIANTS(wide);
    THTensor_release(wide);
}

static void
test_tensor_new_empty_failures(void)
{
    THAllocatorStats d0 = THAllocator_deviceStats(TH_DEVICE_CPU);
    const int64_t big = (int64_t)1 << 40;
    /* numel overflows int64 */
    CHECK_NEW_FAILS(THTensor_newEmpty(TT_SIZES(big, big), TH_Float32,
                                      TH_DEVICE_CPU),
                    TH_ERR_RUNTIME, "overflow");
    CHECK_NEW_FAILS(THTensor_newEmpty(TT_SIZES(INT64_MAX, 2), TH_Bool,
                                      TH_DEVICE_CPU),
                    TH_ERR_RUNTIME, "overflow");
    /* numel fits, bytes do not */
    CHECK_NEW_FAILS(THTensor_newEmpty(TT_SIZES((int64_t)1 << 61), TH_Float64,
                                      TH_DEVICE_CPU),
                    TH_ERR_RUNTIME, "overflow");
    /* bytes fit in int64 but exceed the storage limit */
    CHECK_NEW_FAILS(THTensor_newEmpty(TT_SIZES(big >> 15, big >> 15), TH_Int64,
                                      TH_DEVICE_CPU),
                    TH_ERR_MEMORY, "");
    /* negative sizes (PyTorch's message) */
    CHECK_NEW_FAILS(THTensor_newEmpty(TT_SIZES(2, -1), TH_Float32,
                                      TH_DEVICE_CPU),
                    TH_ERR_RUNTIME,
                    "Trying to create tensor with negative dimension -1: "
                    "[2, -1]");
    /* a negative size next to an overflowing one is still "negative" */
    CHECK_NEW_FAILS(THTensor_newEmpty(TT_SIZES(big, big, -3), TH_Float32,
                                      TH_DEVICE_CPU),
                    TH_ERR_RUNTIME, "negative dimension -3");
    /* too many dims, negative ndim */
    int64_t ones[TH_MAX_DIMS + 1];
    for (int d = 0; d <= TH_MAX_DIMS; d++) {
        ones[d] = 1;
    }
    CHECK_NEW_FAILS(THTensor_newEmpty(TH_MAX_DIMS + 1, ones, TH_Float32,
                                      TH_DEVICE_CPU),
                    TH_ERR_VALUE, "at most 32 dimensions, got 33");
    CHECK_NEW_FAILS(THTensor_newEmpty(-1, ones, TH_Float32, TH_DEVICE_CPU),
                    TH_ERR_VALUE, "");
    /* bad dtype */
    CHECK_NEW_FAILS(THTensor_newEmpty(TT_SIZES(2), TH_NUM_DTYPES,
                                      TH_DEVICE_CPU),
                    TH_ERR_TYPE, "invalid dtype");
    CHECK_NEW_FAILS(THTensor_newEmpty(TT_SIZES(2), (THDtype)-1,
                                      TH_DEVICE_CPU),
                    TH_ERR_TYPE, "invalid dtype");
    THAllocatorStats d1 = THAllocator_deviceStats(TH_DEVICE_CPU);
    CHECK_EQ_INT(d1.num_allocs, d0.num_allocs);
    CHECK_EQ_INT(d1.live_blocks, d0.live_blocks);
}

/* Zero-element tensors may have huge other dims: the contiguous strides of
 * the outer dims then exceed int64, which must not produce negative or
 * garbage strides (nothing is ever read through them). */
static void
test_tensor_zero_size_huge_dims(void)
{
    const int64_t a = ((int64_t)1 << 32) + 1, b = (int64_t)3 << 30;
    THTensor *t = THTensor_newEmpty(TT_SIZES(0, a, b), TH_Float32,
                                    TH_DEVICE_CPU);
    CHECK_NOT_NULL(t);
    if (t == NULL) {
        return;
    }
    CHECK_EQ_INT(t->numel, 0);
    CHECK(t->is_contiguous);
    CHECK_EQ_INT(t->strides[2], 1);
    CHECK_EQ_INT(t->strides[1], b);
    CHECK(t->strides[0] >= 0);
    CHECK_INVARIANTS(t);
    THTensor *u = THTensor_newUnsqueeze(t, 1);
    if (u != NULL) {
        CHECK(u->strides[1] >= 0);
        CHECK_INVARIANTS(u);
    }
    else {
        THError_clear();
    }
    THTensor_release(u);
    /* flattening the huge dims would need a size beyond int64 */
    THTensor *f = THTensor_newFlatten(t, 1, 2);
    if (f != NULL) {
        CHECK_INVARIANTS(f);
        CHECK_MSG(f->sizes[1] > 0 && f->sizes[1] % a == 0,
                  "flatten gave a wrapped size %lld", (long long)f->sizes[1]);
    }
    else {
        CHECK_ERROR(TH_ERR_RUNTIME, "");
    }
    THTensor_release(f);
    THTensor_release(t);
}

static void
test_tensor_new_with_storage(void)
{
    THStorage *s = THStorage_new(24, TH_DEVICE_CPU); /* 6 float32 */
    THTensor *t = THTensor_newWithStorage(s, 0, TT_SIZES(2, 3), NULL,
                                          TH_Float32);
    CHECK_STRIDES(t, 3, 1);
    CHECK_INVARIANTS(t);
    CHECK(t != NULL && tt_version(t) == 0);
    THTensor_release(t);
    /* explicit strides, offset: the last element exactly at the end */
    t = THTensor_newWithStorage(s, 1, TT_SIZES(2, 2), (int64_t[]){1, 2},
                                TH_Float32);
    CHECK_NOT_NULL(t);
    CHECK(t != NULL && !t->is_contiguous);
    CHECK_INVARIANTS(t);
    THTensor_release(t);
    /* one element past the end */
    CHECK_NEW_FAILS(THTensor_newWithStorage(s, 1, TT_SIZES(2, 3), NULL,
                                            TH_Float32),
                    TH_ERR_RUNTIME,
                    "requiring a storage size of 28 are out of bounds for "
                    "storage of size 24");
    CHECK_NEW_FAILS(THTensor_newWithStorage(s, 0, TT_SIZES(4), NULL,
                                            TH_Float64),
                    TH_ERR_RUNTIME, "out of bounds");
    CHECK_NEW_FAILS(THTensor_newWithStorage(s, -1, TT_SIZES(1), NULL,
                                            TH_Float32),
                    TH_ERR_RUNTIME, "invalid storage offset -1");
    CHECK_NEW_FAILS(THTensor_newWithStorage(s, 2, TT_SIZES(2),
                                            (int64_t[]){-1}, TH_Float32),
                    TH_ERR_RUNTIME, "Negative strides");
    CHECK_NEW_FAILS(THTensor_newWithStorage(s, 0, TT_SIZES(2),
                                            (int64_t[]){INT64_MAX},
                                            TH_Float32),
                    TH_ERR_RUNTIME, "out of bounds");
    CHECK_NEW_FAILS(THTensor_newWithStorage(s, 0, TT_SIZES(2), NULL,
                                            TH_NUM_DTYPES),
                    TH_ERR_TYPE, "invalid dtype");
    /* empty tensors fit anywhere, even past the end */
    t = THTensor_newWithStorage(s, 100, TT_SIZES(0), NULL, TH_Float32);
    CHECK(t != NULL && t->numel == 0);
    THTensor_release(t);
    CHECK_EQ_INT(s->refcount, 1);
    THStorage_release(s);
}

/* checkInvariants must notice broken tensors, or the views tests would
 * prove nothing. */
static void
test_tensor_check_invariants_detects_corruption(void)
{
    THTensor *t = tt_arange(TH_Int32, TT_SIZES(3, 4));
    CHECK_INVARIANTS(t);
    if (t == NULL) {
        return;
    }
    THTensor saved = *t;

    t->numel = 11;
    CHECK_FAILS(THTensor_checkInvariants(t), TH_ERR_RUNTIME, "cached numel");
    *t = saved;
    t->is_contiguous = false;
    CHECK_FAILS(THTensor_checkInvariants(t), TH_ERR_RUNTIME, "is_contiguous");
    *t = saved;
    t->storage_offset = 1;
    CHECK_FAILS(THTensor_checkInvariants(t), TH_ERR_RUNTIME, "out of bounds");
    *t = saved;
    t->strides[0] = 5;
    CHECK_FAILS(THTensor_checkInvariants(t), TH_ERR_RUNTIME, "out of bounds");
    *t = saved;
    t->strides[1] = -1;
    CHECK_FAILS(THTensor_checkInvariants(t), TH_ERR_RUNTIME, "Negative");
    *t = saved;
    t->sizes[1] = -4;
    CHECK_FAILS(THTensor_checkInvariants(t), TH_ERR_RUNTIME, "negative");
    *t = saved;
    t->ndim = TH_MAX_DIMS + 1;
    CHECK_FAILS(THTensor_checkInvariants(t), TH_ERR_VALUE, "");
    *t = saved;
    t->dtype = TH_NUM_DTYPES;
    CHECK_FAILS(THTensor_checkInvariants(t), TH_ERR_RUNTIME, "corrupt");
    *t = saved;
    CHECK_INVARIANTS(t);
    THTensor_release(t);
}

static void
test_tensor_wrap_dim(void)
{
    int64_t out = -99;
    CHECK_OK(THTensor_wrapDim(-1, 3, &out));
    CHECK_EQ_INT(out, 2);
    CHECK_OK(THTensor_wrapDim(-3, 3, &out));
    CHECK_EQ_INT(out, 0);
    CHECK_OK(THTensor_wrapDim(2, 3, &out));
    CHECK_EQ_INT(out, 2);
    CHECK_FAILS(THTensor_wrapDim(3, 3, &out), TH_ERR_INDEX,
                "Dimension out of range (expected to be in range of [-3, 2], "
                "but got 3)");
    CHECK_FAILS(THTensor_wrapDim(-4, 3, &out), TH_ERR_INDEX,
                "but got -4)");
    /* a 0-dim tensor accepts dims 0 and -1, as in PyTorch */
    CHECK_OK(THTensor_wrapDim(0, 0, &out));
    CHECK_EQ_INT(out, 0);
    CHECK_OK(THTensor_wrapDim(-1, 0, &out));
    CHECK_EQ_INT(out, 0);
    CHECK_FAILS(THTensor_wrapDim(1, 0, &out), TH_ERR_INDEX, "[-1, 0]");
    CHECK_FAILS(THTensor_wrapDim(INT64_MIN, 4, &out), TH_ERR_INDEX, "");
    CHECK_FAILS(THTensor_wrapDim(INT64_MAX, 4, &out), TH_ERR_INDEX, "");
}

static void
test_tensor_size_helpers(void)
{
    int64_t numel = -1, strides[4];
    CHECK_OK(THTensor_checkedNumel(TT_SIZES(2, 3, 4), &numel));
    CHECK_EQ_INT(numel, 24);
    CHECK_OK(THTensor_checkedNumel(0, NULL, &numel));
    CHECK_EQ_INT(numel, 1);
    CHECK_OK(THTensor_checkedNumel(TT_SIZES(5, 0, INT64_MAX), &numel));
    CHECK_EQ_INT(numel, 0);
    CHECK_FAILS(THTensor_checkedNumel(TT_SIZES(INT64_MAX, 2), &numel),
                TH_ERR_RUNTIME, "Storage size calculation overflowed");

    THTensor_contiguousStrides(TT_SIZES(2, 3, 4), strides);
    CHECK(strides[0] == 12 && strides[1] == 4 && strides[2] == 1);
    THTensor_contiguousStrides(TT_SIZES(2, 0, 4), strides);
    CHECK(strides[0] == 4 && strides[1] == 4 && strides[2] == 1);

    int64_t shape[3] = {2, -1, 3};
    CHECK_OK(THTensor_inferSize(3, shape, 24));
    CHECK_EQ_INT(shape[1], 4);
    int64_t fixed[2] = {4, 6};
    CHECK_OK(THTensor_inferSize(2, fixed, 24));
    int64_t bad[2] = {2, 5};
    CHECK_FAILS(THTensor_inferSize(2, bad, 6), TH_ERR_RUNTIME,
                "shape '[2, 5]' is invalid for input of size 6");
    int64_t bad_infer[2] = {-1, 5};
    CHECK_FAILS(THTensor_inferSize(2, bad_infer, 6), TH_ERR_RUNTIME,
                "shape '[-1, 5]' is invalid for input of size 6");
    int64_t two[3] = {-1, 2, -1};
    CHECK_FAILS(THTensor_inferSize(3, two, 4), TH_ERR_RUNTIME,
                "only one dimension can be inferred");
    int64_t neg[2] = {-2, 3};
    CHECK_FAILS(THTensor_inferSize(2, neg, 6), TH_ERR_RUNTIME,
                "invalid shape dimension -2");
    int64_t ambiguous[2] = {0, -1};
    CHECK_FAILS(THTensor_inferSize(2, ambiguous, 0), TH_ERR_RUNTIME,
                "ambiguous");
    int64_t zero_ok[2] = {-1, 3};
    CHECK_OK(THTensor_inferSize(2, zero_ok, 0));
    CHECK_EQ_INT(zero_ok[0], 0);
    int64_t huge[3] = {(int64_t)1 << 40, (int64_t)1 << 40, -1};
    CHECK_FAILS(THTensor_inferSize(3, huge, 4), TH_ERR_RUNTIME, "too large");
}

static void
test_tensor_is_same_view(void)
{
    THTensor *a = tt_arange(TH_Float32, TT_SIZES(2, 3));
    THTensor *alias = a ? THTensor_newAlias(a) : NULL;
    THTensor *tr = a ? THTensor_newTranspose(a, 0, 1) : NULL;
    THTensor *b = tt_arange(TH_Float32, TT_SIZES(2, 3));
    CHECK(a && alias && tr && b);
    if (a && alias && tr && b) {
        CHECK(THTensor_isSameView(a, alias));
        CHECK(alias != a);
        CHECK(alias->version_counter == a->version_counter);
        CHECK(!THTensor_isSameView(a, tr));
        CHECK(!THTensor_isSameView(a, b));
    }
    THTensor_release(a);
    THTensor_release(alias);
    THTensor_release(tr);
    THTensor_release(b);
}

static void
test_tensor_scalars(void)
{
    THScalar b = THScalar_fromBool(true);
    THScalar i = THScalar_fromInt(-((int64_t)1 << 60));
    THScalar d = THScalar_fromDouble(2.5);
    CHECK(b.dtype == TH_Bool && b.value.b);
    CHECK(i.dtype == TH_Int64 && i.value.i == -((int64_t)1 << 60));
    CHECK(d.dtype == TH_Float64 && d.value.d == 2.5);
}

/* A view whose numel fits int64 but whose bytes do not: every dense copy
 * of it refuses with PyTorch's message instead of wrapping the size. */
static void
test_tensor_new_empty_like_huge_view(void)
{
    int64_t one = 1, huge = (int64_t)1 << 62, nbytes = 0;
    THTensor *t = THTensor_newEmpty(1, &one, TH_Float32, TH_DEVICE_CPU);
    THTensor *wide = THTensor_newExpand(t, 1, &huge);
    CHECK_NOT_NULL(wide);
    CHECK_NEW_FAILS(THTensor_newEmptyLike(wide, TH_Float32), TH_ERR_RUNTIME,
                    "Storage size calculation overflowed with "
                    "sizes=[4611686018427387904]");
    CHECK_NEW_FAILS(THTensor_newContiguous(wide), TH_ERR_RUNTIME,
                    "overflowed");
    CHECK_NEW_FAILS(THTensor_newEmpty(1, &huge, TH_Int8, TH_DEVICE_CPU),
                    TH_ERR_MEMORY, "");
    CHECK_FAILS(THTensor_checkedNbytes(1, &huge, TH_Float32, &nbytes),
                TH_ERR_RUNTIME, "overflowed");
    CHECK_OK(THTensor_checkedNbytes(1, &huge, TH_Bool, &nbytes));
    CHECK_EQ_INT(nbytes, huge);
    THTensor *values = NULL, *indices = NULL;
    CHECK_FAILS(THTensor_topk(wide, 1, 0, true, &values, &indices),
                TH_ERR_MEMORY, "too long");
    CHECK(values == NULL && indices == NULL);
    THTensor_release(wide);
    THTensor_release(t);
}

/* An empty tensor touches no memory: non-overlapping and dense whatever
 * its strides (PyTorch; randn(3, 0) fills one). */
static void
test_tensor_empty_is_dense(void)
{
    int64_t sizes[3] = {2, 0, 2};
    THTensor *t = THTensor_newEmpty(3, sizes, TH_Float32, TH_DEVICE_CPU);
    CHECK(THTensor_isNonOverlappingAndDense(t));
    CHECK_OK(THTensor_normal(t, THGenerator_default(), 0.0, 1.0));
    CHECK_OK(THTensor_uniform(t, THGenerator_default(), 0.0, 1.0));
    THTensor_release(t);
}

TH_TEST_SUITE(tensor) = {
    TH_TEST(test_tensor_new_empty),
    TH_TEST(test_tensor_new_empty_failures),
    TH_TEST(test_tensor_zero_size_huge_dims),
    TH_TEST(test_tensor_new_with_storage),
    TH_TEST(test_tensor_check_invariants_detects_corruption),
    TH_TEST(test_tensor_wrap_dim),
    TH_TEST(test_tensor_size_helpers),
    TH_TEST(test_tensor_is_same_view),
    TH_TEST(test_tensor_scalars),
    TH_TEST(test_tensor_new_empty_like_huge_view),
    TH_TEST(test_tensor_empty_is_dense),
    TH_TEST_END,
};
