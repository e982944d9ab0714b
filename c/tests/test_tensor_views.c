/*
 * test_tensor_views.c -- every view function: geometry, values, error
 * kinds and messages, and the view contract (same storage, same version
 * counter, invariants hold).
 */
#include "th_test.h"

/* v is a view of base: shares storage and version counter, invariants
 * hold, and base's storage gained one reference per live view. */
#define CHECK_VIEW_OF(v, base)                                              \
    do {                                                                    \
        CHECK_INVARIANTS(v);                                                \
        if ((v) != NULL && (base) != NULL) {                                \
            CHECK((v) != (base));                                           \
            CHECK((v)->storage == (base)->storage);                         \
            CHECK((v)->version_counter == (base)->version_counter);         \
            CHECK((v)->dtype == (base)->dtype);                             \
            CHECK_EQ_INT((v)->refcount, 1);                                 \
        }                                                                   \
    } while (0)

/* A {2, 3, 4} float32 tensor holding 0..23. */
static THTensor *
base234(void)
{
    return tt_arange(TH_Float32, TT_SIZES(2, 3, 4));
}

static void
test_views_share_storage_and_version(void)
{
    THTensor *base = base234();
    THTensor *v = THTensor_newSelect(base, 0, 1);
    THTensor *w = v ? THTensor_newTranspose(v, 0, 1) : NULL;
    CHECK_VIEW_OF(v, base);
    CHECK_VIEW_OF(w, base);
    CHECK(base != NULL && base->storage->refcount == 3);
    CHECK(base != NULL && base->version_counter->refcount == 3);
    if (base && v && w) {
        /* a write through the view is seen by the base and counted there */
        CHECK_OK(THTensor_fill(w, THScalar_fromInt(-1)));
        CHECK_EQ_INT(tt_version(base), 1);
        CHECK_EQ_DBL(tt_get(base, 12), -1);
        CHECK_EQ_DBL(tt_get(base, 11), 11);
        /* and a write to the base is counted on the views */
        CHECK_OK(THTensor_fill(base, THScalar_fromInt(3)));
        CHECK_EQ_INT(tt_version(v), 2);
        CHECK_EQ_INT(tt_version(w), 2);
    }
    /* the views outlive the base */
    THTensor_release(base);
    if (w != NULL) {
        CHECK_EQ_INT(w->storage->refcount, 2);
        CHECK_EQ_DBL(tt_get(w, 5), 3);
    }
    THTensor_release(v);
    THTensor_release(w);
}

static void
test_views_view(void)
{
    THTensor *base = base234();
    THTensor *v = THTensor_newView(base, TT_SIZES(4, 6));
    CHECK_VIEW_OF(v, base);
    CHECK_SHAPE(v, 4, 6);
    CHECK_STRIDES(v, 6, 1);
    CHECK(v && tt_get(v, 23) == 23);
    THTensor_release(v);

    v = THTensor_newView(base, TT_SIZES(-1, 8));
    CHECK_VIEW_OF(v, base);
    CHECK_SHAPE(v, 3, 8);
    THTensor_release(v);

    v = THTensor_newView(base, TT_SIZES(2, 1, -1, 1));
    CHECK_VIEW_OF(v, base);
    CHECK_SHAPE(v, 2, 1, 12, 1);
    THTensor_release(v);

    CHECK_NEW_FAILS(THTensor_newView(base, TT_SIZES(5, 5)), TH_ERR_RUNTIME,
                    "shape '[5, 5]' is invalid for input of size 24");
    CHECK_NEW_FAILS(THTensor_newView(base, TT_SIZES(-1, 5)), TH_ERR_RUNTIME,
                    "shape '[-1, 5]' is invalid for input of size 24");
    CHECK_NEW_FAILS(THTensor_newView(base, TT_SIZES(-1, -1)), TH_ERR_RUNTIME,
                    "only one dimension can be inferred");

    /* a transposed tensor cannot be viewed flat ... */
    THTensor *t = THTensor_newTranspose(base, 1, 2); /* {2, 4, 3} */
    CHECK_NEW_FAILS(THTensor_newView(t, TT_SIZES(24)), TH_ERR_RUNTIME,
                    "view size is not compatible with input tensor's size "
                    "and stride");
    CHECK_NEW_FAILS(THTensor_newView(t, TT_SIZES(2, 12)), TH_ERR_RUNTIME,
                    "Use .reshape(...) instead.");
    /* ... but splitting or merging dims that stay together works */
    v = THTensor_newView(t, TT_SIZES(2, 2, 2, 3));
    CHECK_VIEW_OF(v, base);
    CHECK_STRIDES(v, 12, 2, 1, 4);
    CHECK_VALUES(v, 0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, 12, 16, 20, 13,
                 17, 21, 14, 18, 22, 15, 19, 23);
    THTensor_release(v);
    THTensor *p = THTensor_newPermute(base, TT_SIZES(1, 2, 0)); /* {3,4,2} */
    v = p ? THTensor_newView(p, TT_SIZES(12, 2)) : NULL;
    CHECK_VIEW_OF(v, base);
    CHECK_STRIDES(v, 1, 12);
    THTensor_release(v);
    THTensor_release(p);

    /* narrowed rows: {4, 6} -> columns 0..2 have strides {6, 1} */
    THTensor *m = tt_arange(TH_Int32, TT_SIZES(4, 6));
    THTensor *n = m ? THTensor_newNarrow(m, 1, 0, 3) : NULL;
    v = n ? THTensor_newView(n, TT_SIZES(2, 2, 3)) : NULL;
    CHECK_VIEW_OF(v, m);
    CHECK_STRIDES(v, 12, 6, 1);
    CHECK_VALUES(v, 0, 1, 2, 6, 7, 8, 12, 13, 14, 18, 19, 20);
    THTensor_release(v);
    if (n != NULL) {
        CHECK_NEW_FAILS(THTensor_newView(n, TT_SIZES(12)), TH_ERR_RUNTIME,
                        "view size is not compatible");
    }
    THTensor_release(n);
    THTensor_release(m);

    /* expanded (stride 0) dims may be split and merged with themselves */
    THTensor *one = tt_arange(TH_Int32, TT_SIZES(1));
    THTensor *e = one ? THTensor_newExpand(one, TT_SIZES(6)) : NULL;
    v = e ? THTensor_newView(e, TT_SIZES(2, 3)) : NULL;
    CHECK_VIEW_OF(v, one);
    CHECK_STRIDES(v, 0, 0);
    THTensor_release(v);
    THTensor_release(e);
    THTensor_release(one);

    /* 0-dim <-> one element */
    THTensor *s = THTensor_newSelect(base, 0, 0);
    THTensor *s2 = s ? THTensor_newSelect(s, 0, 1) : NULL;
    THTensor *s3 = s2 ? THTensor_newSelect(s2, 0, 2) : NULL; /* 0-dim, 6 */
    CHECK_SCALAR_SHAPE(s3);
    v = s3 ? THTensor_newView(s3, TT_SIZES(1, 1)) : NULL;
    CHECK_VIEW_OF(v, base);
    CHECK_SHAPE(v, 1, 1);
    CHECK(v && tt_get(v, 0) == 6);
    THTensor *back = v ? THTensor_newView(v, 0, NULL) : NULL;
    CHECK_VIEW_OF(back, base);
    CHECK_SCALAR_SHAPE(back);
    CHECK(back && back->storage_offset == 6);
    THTensor_release(back);
    THTensor_release(v);
    THTensor_release(s);
    THTensor_release(s2);
    THTensor_release(s3);

    /* zero elements: any shape of 0 elements */
    THTensor *z = tt_arange(TH_Float32, TT_SIZES(0, 4));
    v = z ? THTensor_newView(z, TT_SIZES(2, 0, 3)) : NULL;
    CHECK_VIEW_OF(v, z);
    CHECK_SHAPE(v, 2, 0, 3);
    THTensor_release(v);
    if (z != NULL) {
        CHECK_NEW_FAILS(THTensor_newView(z, TT_SIZES(0, -1)), TH_ERR_RUNTIME,
                        "ambiguous");
    }
    THTensor_release(z);
    THTensor_release(t);
    THTensor_release(base);
}

static void
test_views_reshape(void)
{
    THTensor *base = base234();
    /* viewable: a view, no copy */
    THTensor *r = THTensor_newReshape(base, TT_SIZES(6, -1));
    CHECK_VIEW_OF(r, base);
    CHECK_SHAPE(r, 6, 4);
    THTensor_release(r);

    /* not viewable: a copy in row-major order of the transposed values */
    THTensor *t = THTensor_newTranspose(base, 0, 2); /* {4, 3, 2} */
    THAllocatorStats d0 = THAllocator_deviceStats(TH_DEVICE_CPU);
    r = t ? THTensor_newReshape(t, TT_SIZES(-1)) : NULL;
    CHECK_NOT_NULL(r);
    CHECK_INVARIANTS(r);
    if (r != NULL && base != NULL) {
        CHECK(r->storage != base->storage);
        CHECK(r->version_counter != base->version_counter);
        CHECK_EQ_INT(tt_version(r), 0);
        CHECK(r->is_contiguous);
        CHECK_EQ_INT(THAllocator_deviceStats(TH_DEVICE_CPU).live_blocks,
                     d0.live_blocks + 1);
        CHECK_SHAPE(r, 24);
        CHECK_VALUES(r, 0, 12, 4, 16, 8, 20, 1, 13, 5, 17, 9, 21, 2, 14, 6,
                     18, 10, 22, 3, 15, 7, 19, 11, 23);
        CHECK_EQ_INT(r->storage->refcount, 1);
    }
    THTensor_release(r);
    if (t != NULL) {
        CHECK_NEW_FAILS(THTensor_newReshape(t, TT_SIZES(7, -1)),
                        TH_ERR_RUNTIME,
                        "shape '[7, -1]' is invalid for input of size 24");
    }
    THTensor_release(t);
    THTensor_release(base);
}

static void
test_views_flatten(void)
{
    THTensor *base = base234();
    THTensor *f = THTensor_newFlatten(base, 0, -1);
    CHECK_VIEW_OF(f, base);
    CHECK_SHAPE(f, 24);
    THTensor_release(f);
    f = THTensor_newFlatten(base, 1, 2);
    CHECK_VIEW_OF(f, base);
    CHECK_SHAPE(f, 2, 12);
    CHECK_STRIDES(f, 12, 1);
    THTensor_release(f);
    f = THTensor_newFlatten(base, -2, -2);
    CHECK_VIEW_OF(f, base);
    CHECK_SHAPE(f, 2, 3, 4);
    THTensor_release(f);
    CHECK_NEW_FAILS(THTensor_newFlatten(base, 2, 1), TH_ERR_RUNTIME,
                    "start_dim cannot come after end_dim");
    CHECK_NEW_FAILS(THTensor_newFlatten(base, 0, 3), TH_ERR_INDEX,
                    "Dimension out of range");
    /* a transposed tensor flattens by copying */
    THTensor *t = THTensor_newTranspose(base, 0, 1);
    f = t ? THTensor_newFlatten(t, 0, 1) : NULL;
    CHECK_INVARIANTS(f);
    CHECK_SHAPE(f, 6, 4);
    CHECK(f && base && f->storage != base->storage);
    CHECK(f && tt_get(f, 4) == 12); /* row 1 = t[0][1] = base[1][0] */
    THTensor_release(f);
    THTensor_release(t);
    /* 0-dim flattens to one element */
    THTensor *s = tt_arange(TH_Int64, 0, NULL);
    f = s ? THTensor_newFlatten(s, 0, -1) : NULL;
    CHECK_VIEW_OF(f, s);
    CHECK_SHAPE(f, 1);
    THTensor_release(f);
    THTensor_release(s);
    THTensor_release(base);
}

static void
test_views_transpose_permute(void)
{
    THTensor *base = base234();
    THTensor *t = THTensor_newTranspose(base, 0, 2);
    CHECK_VIEW_OF(t, base);
    CHECK_SHAPE(t, 4, 3, 2);
    CHECK_STRIDES(t, 1, 4, 12);
    CHECK(t && !t->is_contiguous);
    CHECK(t && t->storage_offset == 0);
    CHECK(t && tt_get(t, 1) == 12 && tt_get(t, 2) == 4);
    THTensor_release(t);
    t = THTensor_newTranspose(base, -1, -1);
    CHECK_VIEW_OF(t, base);
    CHECK(t && THTensor_isSameView(t, base));
    THTensor_release(t);
    CHECK_NEW_FAILS(THTensor_newTranspose(base, 0, 3), TH_ERR_INDEX,
                    "Dimension out of range (expected to be in range of "
                    "[-3, 2], but got 3)");
    /* transposing twice is contiguous again */
    THTensor *t1 = THTensor_newTranspose(base, 0, 1);
    THTensor *t2 = t1 ? THTensor_newTranspose(t1, 1, 0) : NULL;
    CHECK(t2 && t2->is_contiguous && THTensor_isSameView(t2, base));
    THTensor_release(t1);
    THTensor_release(t2);

    THTensor *p = THTensor_newPermute(base, TT_SIZES(2, 0, 1));
    CHECK_VIEW_OF(p, base);
    CHECK_SHAPE(p, 4, 2, 3);
    CHECK_STRIDES(p, 1, 12, 4);
    CHECK(p && tt_get(p, 1) == 4 && tt_get(p, 3) == 12 && tt_get(p, 6) == 1);
    THTensor_release(p);
    p = THTensor_newPermute(base, TT_SIZES(-1, -3, 1));
    CHECK_VIEW_OF(p, base);
    CHECK_STRIDES(p, 1, 12, 4);
    THTensor_release(p);
    CHECK_NEW_FAILS(THTensor_newPermute(base, TT_SIZES(0, 0, 1)),
                    TH_ERR_RUNTIME, "duplicate dims are not allowed");
    CHECK_NEW_FAILS(THTensor_newPermute(base, TT_SIZES(0, 2, -1)),
                    TH_ERR_RUNTIME, "duplicate dims");
    CHECK_NEW_FAILS(THTensor_newPermute(base, TT_SIZES(0, 1)),
                    TH_ERR_RUNTIME, "input.dim() = 3 is not equal to "
                                    "len(dims) = 2");
    CHECK_NEW_FAILS(THTensor_newPermute(base, TT_SIZES(0, 1, 3)),
                    TH_ERR_INDEX, "Dimension out of range");
    /* 0-dim: transpose(0, -1) and permute(()) are identities */
    THTensor *s = tt_arange(TH_Int64, 0, NULL);
    t = s ? THTensor_newTranspose(s, 0, -1) : NULL;
    CHECK_VIEW_OF(t, s);
    CHECK_SCALAR_SHAPE(t);
    THTensor_release(t);
    p = s ? THTensor_newPermute(s, 0, NULL) : NULL;
    CHECK_VIEW_OF(p, s);
    THTensor_release(p);
    THTensor_release(s);
    THTensor_release(base);
}

static void
test_views_squeeze_unsqueeze(void)
{
    THTensor *base = tt_arange(TH_Int16, TT_SIZES(1, 3, 1, 2));
    THTensor *s = THTensor_newSqueeze(base, 0, NULL);
    CHECK_VIEW_OF(s, base);
    CHECK_SHAPE(s, 3, 2);
    CHECK_STRIDES(s, 2, 1);
    THTensor_release(s);
    s = THTensor_newSqueeze(base, TT_SIZES(0));
    CHECK_VIEW_OF(s, base);
    CHECK_SHAPE(s, 3, 1, 2);
    THTensor_release(s);
    s = THTensor_newSqueeze(base, TT_SIZES(-2, 0));
    CHECK_VIEW_OF(s, base);
    CHECK_SHAPE(s, 3, 2);
    THTensor_release(s);
    /* listed dims that are not 1 stay (PyTorch squeeze(dim) semantics) */
    s = THTensor_newSqueeze(base, TT_SIZES(1, 3));
    CHECK_VIEW_OF(s, base);
    CHECK_SHAPE(s, 1, 3, 1, 2);
    THTensor_release(s);
    CHECK_NEW_FAILS(THTensor_newSqueeze(base, TT_SIZES(4)), TH_ERR_INDEX,
                    "Dimension out of range");
    /* squeeze all on an all-ones tensor gives 0-dim */
    THTensor *ones = tt_arange(TH_Int16, TT_SIZES(1, 1));
    s = ones ? THTensor_newSqueeze(ones, 0, NULL) : NULL;
    CHECK_VIEW_OF(s, ones);
    CHECK_SCALAR_SHAPE(s);
    THTensor *s0 = s ? THTensor_newSqueeze(s, TT_SIZES(0)) : NULL;
    CHECK_VIEW_OF(s0, ones);
    CHECK_SCALAR_SHAPE(s0);
    THTensor_release(s0);
    THTensor_release(s);
    THTensor_release(ones);

    THTensor *m = tt_arange(TH_Int16, TT_SIZES(2, 3));
    THTensor *u = THTensor_newUnsqueeze(m, 0);
    CHECK_VIEW_OF(u, m);
    CHECK_SHAPE(u, 1, 2, 3);
    CHECK_STRIDES(u, 6, 3, 1);
    CHECK(u && u->is_contiguous);
    THTensor_release(u);
    u = THTensor_newUnsqueeze(m, 1);
    CHECK_SHAPE(u, 2, 1, 3);
    CHECK_STRIDES(u, 3, 3, 1);
    CHECK_VIEW_OF(u, m);
    THTensor_release(u);
    u = THTensor_newUnsqueeze(m, -1);
    CHECK_VIEW_OF(u, m);
    CHECK_SHAPE(u, 2, 3, 1);
    CHECK_STRIDES(u, 3, 1, 1);
    THTensor_release(u);
    u = THTensor_newUnsqueeze(m, -3);
    CHECK_VIEW_OF(u, m);
    CHECK_SHAPE(u, 1, 2, 3);
    THTensor_release(u);
    CHECK_NEW_FAILS(THTensor_newUnsqueeze(m, 3), TH_ERR_INDEX,
                    "[-3, 2], but got 3");
    CHECK_NEW_FAILS(THTensor_newUnsqueeze(m, -4), TH_ERR_INDEX, "got -4");
    /* on a transposed tensor */
    THTensor *t = THTensor_newTranspose(m, 0, 1); /* {3,2} strides {1,3} */
    u = t ? THTensor_newUnsqueeze(t, 1) : NULL;
    CHECK_VIEW_OF(u, m);
    CHECK_SHAPE(u, 3, 1, 2);
    CHECK_VALUES(u, 0, 3, 1, 4, 2, 5);
    THTensor_release(u);
    THTensor_release(t);
    /* 0-dim -> {1} */
    THTensor *sc = tt_arange(TH_Int16, 0, NULL);
    u = sc ? THTensor_newUnsqueeze(sc, -1) : NULL;
    CHECK_VIEW_OF(u, sc);
    CHECK_SHAPE(u, 1);
    THTensor_release(u);
    THTensor_release(sc);
    /* no room for another dim */
    int64_t ones32[TH_MAX_DIMS];
    for (int d = 0; d < TH_MAX_DIMS; d++) {
        ones32[d] = 1;
    }
    THTensor *full = THTensor_newEmpty(TH_MAX_DIMS, ones32, TH_Int8,
                                       TH_DEVICE_CPU);
    if (full != NULL) {
        CHECK_NEW_FAILS(THTensor_newUnsqueeze(full, 0), TH_ERR_VALUE,
                        "at most 32 dimensions");
        CHECK_NEW_FAILS(THTensor_newUnfold(full, 0, 1, 1), TH_ERR_VALUE,
                        "at most 32 dimensions");
    }
    THTensor_release(full);
    THTensor_release(m);
    THTensor_release(base);
}

static void
test_views_expand(void)
{
    THTensor *col = tt_arange(TH_Int32, TT_SIZES(3, 1));
    THTensor *e = THTensor_newExpand(col, TT_SIZES(2, 3, 4));
    CHECK_VIEW_OF(e, col);
    CHECK_SHAPE(e, 2, 3, 4);
    CHECK_STRIDES(e, 0, 1, 0);
    CHECK(e && !e->is_contiguous && e->numel == 24);
    CHECK_VALUES(e, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 1,
                 1, 2, 2, 2, 2);
    THTensor_release(e);
    e = THTensor_newExpand(col, TT_SIZES(-1, 5));
    CHECK_VIEW_OF(e, col);
    CHECK_SHAPE(e, 3, 5);
    CHECK_STRIDES(e, 1, 0);
    THTensor_release(e);
    /* expanding to 0 */
    e = THTensor_newExpand(col, TT_SIZES(3, 0));
    CHECK_VIEW_OF(e, col);
    CHECK(e && e->numel == 0);
    THTensor_release(e);
    CHECK_NEW_FAILS(THTensor_newExpand(col, TT_SIZES(5, 4)), TH_ERR_RUNTIME,
                    "The expanded size of the tensor (5) must match the "
                    "existing size (3) at non-singleton dimension 0.  Target "
                    "sizes: [5, 4].  Tensor sizes: [3, 1]");
    CHECK_NEW_FAILS(THTensor_newExpand(col, TT_SIZES(4)), TH_ERR_RUNTIME,
                    "the number of sizes provided (1) must be greater or "
                    "equal to the number of dimensions in the tensor (2)");
    CHECK_NEW_FAILS(THTensor_newExpand(col, TT_SIZES(-1, 3, 1)),
                    TH_ERR_RUNTIME,
                    "isn't allowed in a leading, non-existing dimension 0");
    CHECK_NEW_FAILS(THTensor_newExpand(col, TT_SIZES(3, -2)), TH_ERR_RUNTIME,
                    "negative dimension -2");
    /* the element count of an expansion must fit int64 too */
    const int64_t big = (int64_t)1 << 40;
    CHECK_NEW_FAILS(THTensor_newExpand(col, TT_SIZES(big, 3, big)),
                    TH_ERR_RUNTIME, "overflow");
    /* 0-dim expands anywhere */
    THTensor *s = tt_arange(TH_Int32, 0, NULL);
    e = s ? THTensor_newExpand(s, TT_SIZES(2, 2)) : NULL;
    CHECK_VIEW_OF(e, s);
    CHECK_STRIDES(e, 0, 0);
    THTensor_release(e);
    THTensor_release(s);
    THTensor_release(col);
}

static void
test_views_narrow_select(void)
{
    THTensor *m = tt_arange(TH_Float64, TT_SIZES(4, 6));
    THTensor *n = THTensor_newNarrow(m, 1, 2, 3);
    CHECK_VIEW_OF(n, m);
    CHECK_SHAPE(n, 4, 3);
    CHECK_STRIDES(n, 6, 1);
    CHECK(n && n->storage_offset == 2 && !n->is_contiguous);
    CHECK_VALUES(n, 2, 3, 4, 8, 9, 10, 14, 15, 16, 20, 21, 22);
    THTensor_release(n);
    n = THTensor_newNarrow(m, 0, -2, 2);
    CHECK_VIEW_OF(n, m);
    CHECK(n && n->storage_offset == 12 && n->is_contiguous);
    THTensor_release(n);
    n = THTensor_newNarrow(m, -1, 6, 0); /* empty, at the very end */
    CHECK_VIEW_OF(n, m);
    CHECK_SHAPE(n, 4, 0);
    THTensor_release(n);
    CHECK_NEW_FAILS(THTensor_newNarrow(m, 1, 4, 3), TH_ERR_RUNTIME,
                    "start (4) + length (3) exceeds dimension size (6).");
    CHECK_NEW_FAILS(THTensor_newNarrow(m, 1, 0, -1), TH_ERR_RUNTIME,
                    "exceeds dimension size");
    CHECK_NEW_FAILS(THTensor_newNarrow(m, 1, 0, INT64_MAX), TH_ERR_RUNTIME,
                    "exceeds dimension size");
    CHECK_NEW_FAILS(THTensor_newNarrow(m, 1, 7, 0), TH_ERR_INDEX,
                    "start out of range");
    CHECK_NEW_FAILS(THTensor_newNarrow(m, 1, -7, 1), TH_ERR_INDEX,
                    "start out of range");
    CHECK_NEW_FAILS(THTensor_newNarrow(m, 2, 0, 1), TH_ERR_INDEX,
                    "Dimension out of range");

    THTensor *r = THTensor_newSelect(m, 0, -1);
    CHECK_VIEW_OF(r, m);
    CHECK_SHAPE(r, 6);
    CHECK(r && r->storage_offset == 18 && tt_get(r, 5) == 23);
    THTensor *x = r ? THTensor_newSelect(r, 0, 2) : NULL;
    CHECK_VIEW_OF(x, m);
    CHECK_SCALAR_SHAPE(x);
    CHECK(x && x->numel == 1 && tt_get(x, 0) == 20);
    if (x != NULL) {
        CHECK_NEW_FAILS(THTensor_newSelect(x, 0, 0), TH_ERR_INDEX,
                        "select() cannot be applied to a 0-dim tensor");
        CHECK_NEW_FAILS(THTensor_newNarrow(x, 0, 0, 1), TH_ERR_RUNTIME,
                        "narrow() cannot be applied to a 0-dim tensor");
    }
    THTensor_release(x);
    THTensor_release(r);
    r = THTensor_newSelect(m, 1, 5);
    CHECK_VIEW_OF(r, m);
    CHECK_STRIDES(r, 6);
    CHECK_VALUES(r, 5, 11, 17, 23);
    THTensor_release(r);
    CHECK_NEW_FAILS(THTensor_newSelect(m, 1, 6), TH_ERR_INDEX,
                    "index 6 is out of bounds for dimension 1 with size 6");
    CHECK_NEW_FAILS(THTensor_newSelect(m, 0, -5), TH_ERR_INDEX,
                    "index -5 is out of bounds for dimension 0 with size 4");
    CHECK_NEW_FAILS(THTensor_newSelect(m, -3, 0), TH_ERR_INDEX,
                    "Dimension out of range");
    THTensor *z = tt_arange(TH_Float64, TT_SIZES(0, 2));
    if (z != NULL) {
        CHECK_NEW_FAILS(THTensor_newSelect(z, 0, 0), TH_ERR_INDEX,
                        "out of bounds for dimension 0 with size 0");
    }
    THTensor_release(z);
    THTensor_release(m);
}

static void
test_views_slice(void)
{
    THTensor *v = tt_arange(TH_Int64, TT_SIZES(10));
    THTensor *s = THTensor_newSlice(v, 0, 1, 8, 3);
    CHECK_VIEW_OF(s, v);
    CHECK_SHAPE(s, 3);
    CHECK_STRIDES(s, 3);
    CHECK_VALUES(s, 1, 4, 7);
    THTensor_release(s);
    s = THTensor_newSlice(v, -1, 0, 10, 4);
    CHECK_VIEW_OF(s, v);
    CHECK_VALUES(s, 0, 4, 8);
    THTensor_release(s);
    s = THTensor_newSlice(v, 0, 9, 100, 2); /* stop beyond the end */
    CHECK_VIEW_OF(s, v);
    CHECK_VALUES(s, 9);
    THTensor_release(s);
    /* empty slices, even starting at the end, stay in bounds */
    s = THTensor_newSlice(v, 0, 5, 5, 1);
    CHECK_VIEW_OF(s, v);
    CHECK(s && s->numel == 0);
    THTensor_release(s);
    s = THTensor_newSlice(v, 0, 10, 10, 1);
    CHECK_VIEW_OF(s, v);
    CHECK(s && s->numel == 0);
    THTensor_release(s);
    s = THTensor_newSlice(v, 0, 7, 3, 1);
    CHECK_VIEW_OF(s, v);
    CHECK(s && s->numel == 0);
    THTensor_release(s);
    CHECK_NEW_FAILS(THTensor_newSlice(v, 0, 0, 10, 0), TH_ERR_VALUE,
                    "slice step must be positive");
    CHECK_NEW_FAILS(THTensor_newSlice(v, 0, 0, 10, -1), TH_ERR_VALUE,
                    "step must be positive");
    CHECK_NEW_FAILS(THTensor_newSlice(v, 1, 0, 10, 1), TH_ERR_INDEX,
                    "Dimension out of range");
    /* Python's t[::sys.maxsize]: one element, no overflow */
    s = THTensor_newSlice(v, 0, 0, 10, INT64_MAX);
    CHECK_VIEW_OF(s, v);
    CHECK_SHAPE(s, 1);
    CHECK_VALUES(s, 0);
    THTensor_release(s);
    s = THTensor_newSlice(v, 0, 3, 10, INT64_MAX - 1);
    CHECK_VIEW_OF(s, v);
    CHECK_VALUES(s, 3);
    THTensor_release(s);

    /* slices of a 2-d tensor, then of the slice (steps compose) */
    THTensor *m = tt_arange(TH_Int64, TT_SIZES(6, 5));
    THTensor *a = THTensor_newSlice(m, 1, 1, 5, 2);   /* cols 1, 3 */
    THTensor *b = a ? THTensor_newSlice(a, 0, 1, 6, 2) : NULL; /* rows 1,3,5 */
    CHECK_VIEW_OF(b, m);
    CHECK_SHAPE(b, 3, 2);
    CHECK_STRIDES(b, 10, 2);
    CHECK_VALUES(b, 6, 8, 16, 18, 26, 28);
    THTensor *c = b ? THTensor_newSlice(b, 0, 0, 3, 2) : NULL; /* rows 1, 5 */
    CHECK_VIEW_OF(c, m);
    CHECK_STRIDES(c, 20, 2);
    CHECK_VALUES(c, 6, 8, 26, 28);
    THTensor_release(c);
    /* huge step on a dim with stride 5: still one element, sane stride */
    c = THTensor_newSlice(m, 0, 2, 6, INT64_MAX);
    CHECK_VIEW_OF(c, m);
    CHECK_SHAPE(c, 1, 5);
    CHECK_VALUES(c, 10, 11, 12, 13, 14);
    THTensor_release(c);
    THTensor_release(b);
    THTensor_release(a);
    THTensor_release(m);
    THTensor_release(v);
}

static void
test_views_as_strided(void)
{
    THTensor *v = tt_arange(TH_Float32, TT_SIZES(10));
    /* overlapping windows */
    THTensor *w = THTensor_newAsStrided(v, TT_SIZES(4, 3), (int64_t[]){2, 1},
                                        1);
    CHECK_VIEW_OF(w, v);
    CHECK_VALUES(w, 1, 2, 3, 3, 4, 5, 5, 6, 7, 7, 8, 9);
    THTensor_release(w);
    /* the last element exactly at the end */
    w = THTensor_newAsStrided(v, TT_SIZES(3), (int64_t[]){1}, 7);
    CHECK_VIEW_OF(w, v);
    CHECK_VALUES(w, 7, 8, 9);
    THTensor_release(w);
    /* stride 0 is allowed (read-only style broadcast) */
    w = THTensor_newAsStrided(v, TT_SIZES(3, 2), (int64_t[]){0, 9}, 0);
    CHECK_VIEW_OF(w, v);
    CHECK_VALUES(w, 0, 9, 0, 9, 0, 9);
    THTensor_release(w);
    /* as_strided is relative to the storage, not to the view it is called
     * on: a narrow view can reach the whole storage */
    THTensor *n = THTensor_newNarrow(v, 0, 2, 2);
    w = n ? THTensor_newAsStrided(n, TT_SIZES(2), (int64_t[]){9}, 0) : NULL;
    CHECK_VIEW_OF(w, v);
    CHECK_VALUES(w, 0, 9);
    THTensor_release(w);
    THTensor_release(n);

    /* one element too far, in every way */
    CHECK_NEW_FAILS(THTensor_newAsStrided(v, TT_SIZES(3), (int64_t[]){1}, 8),
                    TH_ERR_RUNTIME,
                    "setStorage: sizes [3], strides [1], storage offset 8, "
                    "and itemsize 4 requiring a storage size of 44 are out "
                    "of bounds for storage of size 40");
    CHECK_NEW_FAILS(THTensor_newAsStrided(v, TT_SIZES(2), (int64_t[]){10}, 0),
                    TH_ERR_RUNTIME, "out of bounds");
    CHECK_NEW_FAILS(THTensor_newAsStrided(v, TT_SIZES(11), (int64_t[]){1}, 0),
                    TH_ERR_RUNTIME, "out of bounds");
    CHECK_NEW_FAILS(THTensor_newAsStrided(v, TT_SIZES(1), (int64_t[]){1}, 10),
                    TH_ERR_RUNTIME, "out of bounds");
    CHECK_NEW_FAILS(THTensor_newAsStrided(v, TT_SIZES(1), (int64_t[]){1}, -1),
                    TH_ERR_RUNTIME, "invalid storage offset");
    CHECK_NEW_FAILS(THTensor_newAsStrided(v, TT_SIZES(2), (int64_t[]){-1}, 5),
                    TH_ERR_RUNTIME, "Negative strides");
    CHECK_NEW_FAILS(THTensor_newAsStrided(v, TT_SIZES(-2), (int64_t[]){1}, 0),
                    TH_ERR_RUNTIME, "negative dimension");
    /* strides and offsets whose byte counts overflow int64 must not wrap
     * around into "in bounds" */
    CHECK_NEW_FAILS(THTensor_newAsStrided(v, TT_SIZES(2),
                                          (int64_t[]){INT64_MAX}, 0),
                    TH_ERR_RUNTIME, "out of bounds");
    CHECK_NEW_FAILS(THTensor_newAsStrided(v, TT_SIZES(3),
                                          (int64_t[]){(int64_t)1 << 62}, 0),
                    TH_ERR_RUNTIME, "out of bounds");
    CHECK_NEW_FAILS(THTensor_newAsStrided(v, TT_SIZES(5, 5),
                                          (int64_t[]){(int64_t)1 << 61,
                                                      (int64_t)1 << 61},
                                          0),
                    TH_ERR_RUNTIME, "out of bounds");
    /* (2^62) * 4 bytes wraps to 0 in 64 bits */
    CHECK_NEW_FAILS(THTensor_newAsStrided(v, TT_SIZES(1), (int64_t[]){1},
                                          (int64_t)1 << 62),
                    TH_ERR_RUNTIME, "out of bounds");
    CHECK_NEW_FAILS(THTensor_newAsStrided(v, TT_SIZES(1), (int64_t[]){1},
                                          INT64_MAX),
                    TH_ERR_RUNTIME, "out of bounds");
    CHECK_NEW_FAILS(THTensor_newAsStrided(v, TT_SIZES(INT64_MAX, 2),
                                          (int64_t[]){0, 0}, 0),
                    TH_ERR_RUNTIME, "overflow");
    /* zero elements touch nothing, whatever the strides */
    w = THTensor_newAsStrided(v, TT_SIZES(0, 3), (int64_t[]){INT64_MAX, 1},
                              0);
    CHECK_VIEW_OF(w, v);
    CHECK(w && w->numel == 0);
    THTensor_release(w);
    /* 0-dim at any in-bounds offset */
    w = THTensor_newAsStrided(v, 0, NULL, NULL, 9);
    CHECK_VIEW_OF(w, v);
    CHECK(w && w->numel == 1 && tt_get(w, 0) == 9);
    THTensor_release(w);
    int64_t ones[TH_MAX_DIMS + 1] = {0};
    CHECK_NEW_FAILS(THTensor_newAsStrided(v, TH_MAX_DIMS + 1, ones, ones, 0),
                    TH_ERR_VALUE, "at most 32 dimensions");
    THTensor_release(v);
}

static void
test_views_unfold(void)
{
    THTensor *v = tt_arange(TH_Int32, TT_SIZES(7));
    THTensor *u = THTensor_newUnfold(v, 0, 3, 2);
    CHECK_VIEW_OF(u, v);
    CHECK_SHAPE(u, 3, 3);
    CHECK_STRIDES(u, 2, 1);
    CHECK_VALUES(u, 0, 1, 2, 2, 3, 4, 4, 5, 6);
    THTensor_release(u);
    u = THTensor_newUnfold(v, -1, 7, 1);
    CHECK_VIEW_OF(u, v);
    CHECK_SHAPE(u, 1, 7);
    THTensor_release(u);
    u = THTensor_newUnfold(v, 0, 2, 3); /* windows 0-1, 3-4 (6 left over) */
    CHECK_VIEW_OF(u, v);
    CHECK_VALUES(u, 0, 1, 3, 4);
    THTensor_release(u);
    /* a huge step: one window, no overflowing stride */
    u = THTensor_newUnfold(v, 0, 2, INT64_MAX);
    CHECK_VIEW_OF(u, v);
    CHECK_SHAPE(u, 1, 2);
    CHECK_VALUES(u, 0, 1);
    THTensor_release(u);
    CHECK_NEW_FAILS(THTensor_newUnfold(v, 0, 8, 1), TH_ERR_RUNTIME,
                    "maximum size for tensor at dimension 0 is 7 but size "
                    "is 8");
    CHECK_NEW_FAILS(THTensor_newUnfold(v, 0, 2, 0), TH_ERR_RUNTIME,
                    "step is 0 but must be > 0");
    CHECK_NEW_FAILS(THTensor_newUnfold(v, 1, 2, 1), TH_ERR_INDEX,
                    "Dimension out of range");

    THTensor *m = tt_arange(TH_Int32, TT_SIZES(2, 4));
    u = THTensor_newUnfold(m, 1, 2, 2);
    CHECK_VIEW_OF(u, m);
    CHECK_SHAPE(u, 2, 2, 2);
    CHECK_STRIDES(u, 4, 2, 1);
    CHECK_VALUES(u, 0, 1, 2, 3, 4, 5, 6, 7);
    THTensor_release(u);
    u = THTensor_newUnfold(m, 0, 2, 1);
    CHECK_VIEW_OF(u, m);
    CHECK_SHAPE(u, 1, 4, 2);
    CHECK_STRIDES(u, 4, 1, 4);
    CHECK_VALUES(u, 0, 4, 1, 5, 2, 6, 3, 7);
    THTensor_release(u);
    /* a huge step on a dim with stride 4 */
    u = THTensor_newUnfold(m, 0, 1, INT64_MAX);
    CHECK_VIEW_OF(u, m);
    CHECK_SHAPE(u, 1, 4, 1);
    THTensor_release(u);
    THTensor_release(m);

    /* 0-dim: unfold(0, 1, 1) -> {1} */
    THTensor *s = tt_arange(TH_Int32, 0, NULL);
    u = s ? THTensor_newUnfold(s, 0, 1, 1) : NULL;
    CHECK_VIEW_OF(u, s);
    CHECK_SHAPE(u, 1);
    THTensor_release(u);
    if (s != NULL) {
        CHECK_NEW_FAILS(THTensor_newUnfold(s, 0, 2, 1), TH_ERR_RUNTIME,
                        "maximum size");
    }
    THTensor_release(s);
    THTensor_release(v);
}

static void
test_views_alias(void)
{
    THTensor *t = tt_arange(TH_UInt8, TT_SIZES(3, 2));
    THTensor *n = t ? THTensor_newNarrow(t, 0, 1, 2) : NULL;
    THTensor *a = n ? THTensor_newAlias(n) : NULL;
    CHECK_VIEW_OF(a, t);
    CHECK(a && n && THTensor_isSameView(a, n));
    CHECK(a && a->storage_offset == 2);
    THTensor_release(a);
    THTensor_release(n);
    THTensor_release(t);
}

TH_TEST_SUITE(views) = {
    TH_TEST(test_views_share_storage_and_version),
    TH_TEST(test_views_view),
    TH_TEST(test_views_reshape),
    TH_TEST(test_views_flatten),
    TH_TEST(test_views_transpose_permute),
    TH_TEST(test_views_squeeze_unsqueeze),
    TH_TEST(test_views_expand),
    TH_TEST(test_views_narrow_select),
    TH_TEST(test_views_slice),
    TH_TEST(test_views_as_strided),
    TH_TEST(test_views_unfold),
    TH_TEST(test_views_alias),
    TH_TEST_END,
};
