/*
 * test_copy.c -- THTensor_copy (every dtype pair, broadcasting, strides,
 * overlap, refusals, version counter), fill, newClone, newContiguous and
 * newCast.
 */
#include "th_test.h"

#include <math.h>

/* ---- every dtype to every dtype ------------------------------------------- */

/* Values every dtype holds exactly; bool sources hold 0/1. */
static const double grid_values[] = {0, 1, 7, 100, 0, 127};
static const double grid_bool_values[] = {0, 1, 1, 0, 0, 1};

static double
grid_expected(THDtype src, THDtype dst, int i)
{
    double v = src == TH_Bool ? grid_bool_values[i] : grid_values[i];
    return dst == TH_Bool ? (v != 0) : v;
}

static void
test_copy_all_dtype_pairs(void)
{
    for (int s = 0; s < TH_NUM_DTYPES; s++) {
        for (int d = 0; d < TH_NUM_DTYPES; d++) {
            const double *values =
                s == TH_Bool ? grid_bool_values : grid_values;
            /* contiguous -> contiguous (the vectorisable branch) */
            THTensor *src = tt_from((THDtype)s, TT_SIZES(2, 3), values);
            THTensor *dst = THTensor_newEmpty(TT_SIZES(2, 3), (THDtype)d,
                                              TH_DEVICE_CPU);
            /* strided -> strided (the generic branch): a transposed src
             * into a column-sliced dst */
            THTensor *src_t = tt_from((THDtype)s, TT_SIZES(3, 2), values);
            THTensor *tr = src_t ? THTensor_newTranspose(src_t, 0, 1) : NULL;
            THTensor *wide = THTensor_newEmpty(TT_SIZES(2, 6), (THDtype)d,
                                               TH_DEVICE_CPU);
            THTensor *cols = wide ? THTensor_newSlice(wide, 1, 0, 6, 2)
                                  : NULL;
            if (!src || !dst || !tr || !cols) {
                CHECK_MSG(false, "setup failed for %s -> %s",
                          THDtype_name((THDtype)s), THDtype_name((THDtype)d));
            }
            else {
                CHECK_OK(THTensor_copy(dst, src));
                CHECK_OK(THTensor_copy(cols, tr));
                for (int i = 0; i < 6; i++) {
                    double want = grid_expected((THDtype)s, (THDtype)d, i);
                    CHECK_MSG(tt_get(dst, i) == want,
                              "%s -> %s [%d]: got %g, expected %g",
                              THDtype_name((THDtype)s),
                              THDtype_name((THDtype)d), i, tt_get(dst, i),
                              want);
                    /* tr[r][c] = values[c * 2 + r] */
                    int j = (i % 3) * 2 + i / 3;
                    want = grid_expected((THDtype)s, (THDtype)d, j);
                    CHECK_MSG(tt_get(cols, i) == want,
                              "strided %s -> %s [%d]: got %g, expected %g",
                              THDtype_name((THDtype)s),
                              THDtype_name((THDtype)d), i, tt_get(cols, i),
                              want);
                }
            }
            THTensor_release(src);
            THTensor_release(dst);
            THTensor_release(tr);
            THTensor_release(src_t);
            THTensor_release(cols);
            THTensor_release(wide);
        }
    }
}

/* Copies one value from a 1-element tensor of dtype `from` to one of `to`
 * and returns the result as a double. */
static double
convert(THDtype from, double value, THDtype to)
{
    THTensor *a = tt_from(from, TT_SIZES(1), (double[]){value});
    THTensor *b = THTensor_newEmpty(TT_SIZES(1), to, TH_DEVICE_CPU);
    double result = NAN;
    if (a && b && THTensor_copy(b, a) == 0) {
        result = tt_get(b, 0);
    }
    THTensor_release(a);
    THTensor_release(b);
    return result;
}

static void
test_copy_conversions(void)
{
    /* float -> int truncates toward zero */
    for (int d = TH_UInt8; d <= TH_Int64; d++) {
        CHECK_EQ_DBL(convert(TH_Float64, 2.7, (THDtype)d), 2);
        CHECK_EQ_DBL(convert(TH_Float32, 2.7, (THDtype)d), 2);
    }
    CHECK_EQ_DBL(convert(TH_Float64, -2.7, TH_Int32), -2);
    CHECK_EQ_DBL(convert(TH_Float32, -2.7, TH_Int8), -2);
    CHECK_EQ_DBL(convert(TH_Float64, 2.7, TH_Float32), (double)2.7f);
    /* integers wrap modulo 2^bits */
    CHECK_EQ_DBL(convert(TH_Int64, -1, TH_UInt8), 255);
    CHECK_EQ_DBL(convert(TH_Int8, -1, TH_UInt8), 255);
    CHECK_EQ_DBL(convert(TH_Int32, -1, TH_UInt8), 255);
    CHECK_EQ_DBL(convert(TH_UInt8, 255, TH_Int8), -1);
    CHECK_EQ_DBL(convert(TH_Int64, 300, TH_UInt8), 44);
    CHECK_EQ_DBL(convert(TH_Int16, 300, TH_Int8), 44);
    CHECK_EQ_DBL(convert(TH_Int32, -129, TH_Int8), 127);
    CHECK_EQ_DBL(convert(TH_Int64, 65536 + 5, TH_Int16), 5);
    /* nonzero -> true, whatever the width (256 is not truncated to 0) */
    CHECK_EQ_DBL(convert(TH_Int16, 256, TH_Bool), 1);
    CHECK_EQ_DBL(convert(TH_Int64, -1, TH_Bool), 1);
    CHECK_EQ_DBL(convert(TH_Float64, 0.5, TH_Bool), 1);
    CHECK_EQ_DBL(convert(TH_Float32, -0.25, TH_Bool), 1);
    CHECK_EQ_DBL(convert(TH_Float64, -0.0, TH_Bool), 0);
    CHECK_EQ_DBL(convert(TH_Float64, NAN, TH_Bool), 1);
    CHECK_EQ_DBL(convert(TH_UInt8, 0, TH_Bool), 0);
    CHECK_EQ_DBL(convert(TH_Bool, 1, TH_Float32), 1);
    CHECK_EQ_DBL(convert(TH_Bool, 1, TH_Int64), 1);
    /* int64 -> float rounds to nearest even */
    CHECK_EQ_DBL(convert(TH_Int64, 16777217, TH_Float32), 16777216);
    CHECK_EQ_DBL(convert(TH_Int32, -16777217, TH_Float32), -16777216);
    /* float64 -> float32 overflow gives inf; NaN stays NaN */
    CHECK(isinf(convert(TH_Float64, 1e300, TH_Float32)));
    CHECK(isnan(convert(TH_Float64, NAN, TH_Float32)));

    /* int64 -> float64 beyond 2^53, exactly: 2^53 + 1 rounds to 2^53 */
    THTensor *big = THTensor_newEmpty(TT_SIZES(2), TH_Int64, TH_DEVICE_CPU);
    THTensor *f = THTensor_newEmpty(TT_SIZES(2), TH_Float64, TH_DEVICE_CPU);
    THTensor *back = THTensor_newEmpty(TT_SIZES(2), TH_Int64, TH_DEVICE_CPU);
    if (big && f && back) {
        ((int64_t *)THTensor_data(big))[0] = ((int64_t)1 << 53) + 1;
        ((int64_t *)THTensor_data(big))[1] = INT64_MIN;
        CHECK_OK(THTensor_copy(f, big));
        CHECK_EQ_DBL(tt_get(f, 0), 9007199254740992.0);
        CHECK_EQ_DBL(tt_get(f, 1), -9223372036854775808.0);
        /* int64 -> int64 is exact */
        CHECK_OK(THTensor_copy(back, big));
        CHECK_EQ_INT(tt_get_int(back, 0), ((int64_t)1 << 53) + 1);
        CHECK_EQ_INT(tt_get_int(back, 1), INT64_MIN);
    }
    THTensor_release(big);
    THTensor_release(f);
    THTensor_release(back);
}

static void
test_copy_broadcasts_src(void)
{
    THTensor *dst = THTensor_newEmpty(TT_SIZES(2, 3), TH_Int32, TH_DEVICE_CPU);
    THTensor *row = tt_from(TH_Float64, TT_SIZES(3), (double[]){1, 2, 3});
    THTensor *col = tt_from(TH_Int8, TT_SIZES(2, 1), (double[]){-4, 5});
    THTensor *one = tt_from(TH_Bool, 0, NULL, (double[]){1});
    CHECK_OK(THTensor_copy(dst, row));
    CHECK_VALUES(dst, 1, 2, 3, 1, 2, 3);
    CHECK_OK(THTensor_copy(dst, col));
    CHECK_VALUES(dst, -4, -4, -4, 5, 5, 5);
    CHECK_OK(THTensor_copy(dst, one));
    CHECK_VALUES(dst, 1, 1, 1, 1, 1, 1);
    CHECK(dst && tt_version(dst) == 3);

    THTensor *bad = tt_arange(TH_Float32, TT_SIZES(4));
    CHECK_FAILS(THTensor_copy(dst, bad), TH_ERR_RUNTIME,
                "The size of tensor a (3) must match the size of tensor b "
                "(4) at non-singleton dimension 1");
    /* dst does not broadcast to src */
    THTensor *bigger = tt_arange(TH_Float32, TT_SIZES(3, 2, 3));
    CHECK_FAILS(THTensor_copy(dst, bigger), TH_ERR_RUNTIME, "");
    THTensor *z = tt_arange(TH_Float32, TT_SIZES(0));
    CHECK_FAILS(THTensor_copy(dst, z), TH_ERR_RUNTIME, "");
    CHECK_VALUES(dst, 1, 1, 1, 1, 1, 1);
    CHECK(dst && tt_version(dst) == 3); /* failures do not bump */
    THTensor_release(bad);
    THTensor_release(bigger);
    THTensor_release(z);
    THTensor_release(dst);
    THTensor_release(row);
    THTensor_release(col);
    THTensor_release(one);
}

static void
test_copy_strided(void)
{
    /* transposed src into contiguous dst */
    THTensor *base = tt_arange(TH_Int64, TT_SIZES(3, 4));
    THTensor *t = base ? THTensor_newTranspose(base, 0, 1) : NULL;
    THTensor *dst = THTensor_newEmpty(TT_SIZES(4, 3), TH_Int64, TH_DEVICE_CPU);
    CHECK_OK(THTensor_copy(dst, t));
    CHECK_VALUES(dst, 0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11);
    /* contiguous src into transposed dst: writes land transposed */
    THTensor *out = THTensor_newEmpty(TT_SIZES(3, 4), TH_Int64, TH_DEVICE_CPU);
    THTensor *out_t = out ? THTensor_newTranspose(out, 0, 1) : NULL;
    CHECK_OK(THTensor_copy(out_t, dst));
    CHECK_VALUES(out, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11);
    /* slice with step into a narrow: only the selected elements change */
    THTensor *v = tt_arange(TH_Float32, TT_SIZES(10));
    THTensor *evens = v ? THTensor_newSlice(v, 0, 0, 10, 2) : NULL;
    THTensor *five = tt_from(TH_Float64, TT_SIZES(5),
                             (double[]){-1, -2, -3, -4, -5});
    CHECK_OK(THTensor_copy(evens, five));
    CHECK_VALUES(v, -1, 1, -2, 3, -3, 5, -4, 7, -5, 9);
    CHECK(v && tt_version(v) == 1);
    /* expanded (stride 0) source */
    THTensor *x = tt_from(TH_Float32, TT_SIZES(1), (double[]){42});
    THTensor *xe = x ? THTensor_newExpand(x, TT_SIZES(5)) : NULL;
    CHECK_OK(THTensor_copy(evens, xe));
    CHECK_VALUES(v, 42, 1, 42, 3, 42, 5, 42, 7, 42, 9);
    THTensor_release(x);
    THTensor_release(xe);
    THTensor_release(five);
    THTensor_release(evens);
    THTensor_release(v);
    THTensor_release(out_t);
    THTensor_release(out);
    THTensor_release(dst);
    THTensor_release(t);
    THTensor_release(base);
}

/* Overlapping copies behave as if src were read completely first (NumPy's
 * semantics for a[1:] = a[:-1]). */
static void
test_copy_overlapping(void)
{
    THTensor *a = tt_arange(TH_Int32, TT_SIZES(10));
    THTensor *tail = a ? THTensor_newSlice(a, 0, 1, 10, 1) : NULL;
    THTensor *head = a ? THTensor_newSlice(a, 0, 0, 9, 1) : NULL;
    CHECK_OK(THTensor_copy(tail, head)); /* a[1:] = a[:-1] */
    CHECK_VALUES(a, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8);
    CHECK_OK(THTensor_copy(head, tail)); /* a[:-1] = a[1:] */
    CHECK_VALUES(a, 0, 1, 2, 3, 4, 5, 6, 7, 8, 8);
    CHECK(a && tt_version(a) == 2);
    THTensor_release(tail);
    THTensor_release(head);

    /* a square matrix copied from its own transpose (m = m.T) */
    THTensor *m = tt_arange(TH_Float64, TT_SIZES(3, 3));
    THTensor *mt = m ? THTensor_newTranspose(m, 0, 1) : NULL;
    CHECK_OK(THTensor_copy(m, mt));
    CHECK_VALUES(m, 0, 3, 6, 1, 4, 7, 2, 5, 8);
    THTensor_release(mt);

    /* b[2:] = b[:6]: the source runs ahead of the destination */
    THTensor *b = tt_arange(TH_Int16, TT_SIZES(8));
    THTensor *x = b ? THTensor_newSlice(b, 0, 2, 8, 1) : NULL; /* b[2:] */
    THTensor *y = b ? THTensor_newSlice(b, 0, 0, 6, 1) : NULL; /* b[:6] */
    CHECK_OK(THTensor_copy(x, y));
    CHECK_VALUES(b, 0, 1, 0, 1, 2, 3, 4, 5);
    THTensor_release(x);
    THTensor_release(y);

    /* copying a tensor onto itself is a no-op that still counts as a write */
    int64_t before = m ? tt_version(m) : 0;
    CHECK_OK(THTensor_copy(m, m));
    CHECK_VALUES(m, 0, 3, 6, 1, 4, 7, 2, 5, 8);
    CHECK(m && tt_version(m) == before + 1);

    /* a broadcast source that overlaps the destination: row 0 into all */
    THTensor *r0 = m ? THTensor_newSelect(m, 0, 0) : NULL;
    CHECK_OK(THTensor_copy(m, r0));
    CHECK_VALUES(m, 0, 3, 6, 0, 3, 6, 0, 3, 6);
    THTensor_release(r0);
    THTensor_release(m);
    THTensor_release(b);
    THTensor_release(a);
}

static void
test_copy_refusals(void)
{
    /* into an expanded destination */
    THTensor *x = tt_from(TH_Float32, TT_SIZES(1), (double[]){5});
    THTensor *xe = x ? THTensor_newExpand(x, TT_SIZES(3)) : NULL;
    THTensor *src = tt_arange(TH_Float32, TT_SIZES(3));
    CHECK_FAILS(THTensor_copy(xe, src), TH_ERR_RUNTIME,
                "more than one element of the written-to tensor refers to a "
                "single memory location");
    CHECK_FAILS(THTensor_fill(xe, THScalar_fromInt(1)), TH_ERR_RUNTIME,
                "single memory location");
    CHECK(x && tt_get(x, 0) == 5 && tt_version(x) == 0);
    /* expanding a size-1 dim to size 1 is fine (one element per place) */
    THTensor *x1 = x ? THTensor_newExpand(x, TT_SIZES(1, 1)) : NULL;
    THTensor *seven = tt_from(TH_Int8, TT_SIZES(1), (double[]){7});
    CHECK_OK(THTensor_copy(x1, seven));
    CHECK(x && tt_get(x, 0) == 7);
    THTensor_release(seven);
    THTensor_release(x1);

    /* into read-only memory: refused, data and version untouched */
    float frozen[4] = {1, 2, 3, 4};
    THStorage *ro = THStorage_newExternal(frozen, sizeof(frozen),
                                          TH_DEVICE_CPU, true, NULL, NULL);
    THTensor *rt = ro ? THTensor_newWithStorage(ro, 0, TT_SIZES(4), NULL,
                                                TH_Float32)
                      : NULL;
    THStorage_release(ro);
    THTensor *four = tt_arange(TH_Float32, TT_SIZES(4));
    CHECK_NOT_NULL(rt);
    if (rt != NULL) {
        CHECK_FAILS(THTensor_copy(rt, four), TH_ERR_RUNTIME, "read-only");
        CHECK_FAILS(THTensor_fill(rt, THScalar_fromDouble(9)),
                    TH_ERR_RUNTIME, "read-only");
        CHECK_FAILS(THTensor_checkWritable(rt), TH_ERR_RUNTIME, "read-only");
        THTensor *v = THTensor_newSlice(rt, 0, 1, 3, 1);
        CHECK_FAILS(v ? THTensor_copy(v, four) : 0, TH_ERR_RUNTIME,
                    "read-only");
        CHECK_FAILS(THTensor_arange(rt, THScalar_fromInt(0),
                                    THScalar_fromInt(1)),
                    TH_ERR_RUNTIME, "read-only");
        CHECK_FAILS(THTensor_linspace(rt, 0, 1), TH_ERR_RUNTIME,
                    "read-only");
        CHECK(frozen[0] == 1 && frozen[1] == 2 && frozen[2] == 3
              && frozen[3] == 4);
        CHECK_EQ_INT(tt_version(rt), 0);
        /* reading from read-only memory is fine */
        CHECK_OK(THTensor_copy(four, rt));
        CHECK_VALUES(four, 1, 2, 3, 4);
        THTensor *c = THTensor_newClone(rt);
        CHECK(c && !c->storage->read_only);
        CHECK_VALUES(c, 1, 2, 3, 4);
        THTensor_release(c);
        THTensor_release(v);
    }
    CHECK_OK(THTensor_checkWritable(four));
    THTensor_release(four);
    THTensor_release(rt);
    THTensor_release(src);
    THTensor_release(xe);
    THTensor_release(x);
}

static void
test_copy_fill(void)
{
    THTensor *f = THTensor_newEmpty(TT_SIZES(2, 2), TH_Float32, TH_DEVICE_CPU);
    THTensor *i8 = THTensor_newEmpty(TT_SIZES(3), TH_Int8, TH_DEVICE_CPU);
    THTensor *i64 = THTensor_newEmpty(TT_SIZES(2), TH_Int64, TH_DEVICE_CPU);
    THTensor *b = THTensor_newEmpty(TT_SIZES(2), TH_Bool, TH_DEVICE_CPU);
    if (!f || !i8 || !i64 || !b) {
        CHECK(false);
    }
    else {
        CHECK_OK(THTensor_fill(f, THScalar_fromBool(true)));
        CHECK_VALUES(f, 1, 1, 1, 1);
        CHECK_OK(THTensor_fill(f, THScalar_fromDouble(2.5)));
        CHECK_VALUES(f, 2.5, 2.5, 2.5, 2.5);
        CHECK_OK(THTensor_fill(f, THScalar_fromInt(-3)));
        CHECK_VALUES(f, -3, -3, -3, -3);
        CHECK_EQ_INT(tt_version(f), 3);
        CHECK_OK(THTensor_fill(i8, THScalar_fromInt(7)));
        CHECK_VALUES(i8, 7, 7, 7);
        CHECK_OK(THTensor_fill(i8, THScalar_fromDouble(-2.9)));
        CHECK_VALUES(i8, -2, -2, -2);
        CHECK_OK(THTensor_fill(i8, THScalar_fromBool(false)));
        CHECK_VALUES(i8, 0, 0, 0);
        /* int64 scalars reach int64 tensors exactly (not via double) */
        CHECK_OK(THTensor_fill(i64, THScalar_fromInt(((int64_t)1 << 53) + 1)));
        CHECK_EQ_INT(tt_get_int(i64, 1), ((int64_t)1 << 53) + 1);
        CHECK_OK(THTensor_fill(i64, THScalar_fromInt(INT64_MIN)));
        CHECK_EQ_INT(tt_get_int(i64, 0), INT64_MIN);
        CHECK_OK(THTensor_fill(b, THScalar_fromDouble(0.5)));
        CHECK_VALUES(b, 1, 1);
        CHECK_OK(THTensor_fill(b, THScalar_fromInt(0)));
        CHECK_VALUES(b, 0, 0);
        CHECK_OK(THTensor_fill(b, THScalar_fromInt(256)));
        CHECK_VALUES(b, 1, 1);
        /* a strided view: only its elements */
        THTensor *col = THTensor_newSelect(f, 1, 0);
        CHECK_OK(col ? THTensor_fill(col, THScalar_fromInt(9)) : -1);
        CHECK_VALUES(f, 9, -3, 9, -3);
        CHECK_EQ_INT(tt_version(f), 4);
        THTensor_release(col);
    }
    /* zero elements: nothing written, still a write */
    THTensor *z = THTensor_newEmpty(TT_SIZES(0, 3), TH_Float64, TH_DEVICE_CPU);
    CHECK_OK(z ? THTensor_fill(z, THScalar_fromDouble(1)) : -1);
    CHECK(z && tt_version(z) == 1);
    /* 0-dim */
    THTensor *s = THTensor_newEmpty(0, NULL, TH_UInt8, TH_DEVICE_CPU);
    CHECK_OK(s ? THTensor_fill(s, THScalar_fromInt(-1)) : -1);
    CHECK(s && tt_get(s, 0) == 255);
    THTensor_release(s);
    THTensor_release(z);
    THTensor_release(f);
    THTensor_release(i8);
    THTensor_release(i64);
    THTensor_release(b);
}

static void
test_copy_clone_contiguous_cast(void)
{
    THTensor *base = tt_arange(TH_Int16, TT_SIZES(2, 3));
    THTensor *t = base ? THTensor_newTranspose(base, 0, 1) : NULL;
    if (base == NULL || t == NULL) {
        CHECK(false);
        THTensor_release(base);
        THTensor_release(t);
        return;
    }

    /* clone keeps the transposed layout (Note [Preserving the layout]) */
    THTensor *c = THTensor_newClone(t);
    CHECK_INVARIANTS(c);
    CHECK(c && c->storage != base->storage && !c->is_contiguous);
    CHECK(c && c->version_counter != base->version_counter);
    CHECK(c && tt_version(c) == 0 && c->dtype == TH_Int16);
    CHECK_SHAPE(c, 3, 2);
    CHECK_STRIDES(c, 1, 3);
    CHECK_VALUES(c, 0, 3, 1, 4, 2, 5);
    /* independent memory */
    if (c != NULL) {
        tt_set(c, 0, 99);
        CHECK_EQ_DBL(tt_get(base, 0), 0);
    }
    THTensor_release(c);
    /* a clone of a contiguous tensor is still a new storage */
    c = THTensor_newClone(base);
    CHECK(c && c->storage != base->storage);
    CHECK_VALUES(c, 0, 1, 2, 3, 4, 5);
    THTensor_release(c);

    /* newContiguous: the same tensor, retained, when already contiguous */
    c = THTensor_newContiguous(base);
    CHECK(c == base);
    CHECK_EQ_INT(base->refcount, 2);
    THTensor_release(c);
    CHECK_EQ_INT(base->refcount, 1);
    c = THTensor_newContiguous(t);
    CHECK(c && c != t && c->storage != base->storage && c->is_contiguous);
    CHECK_STRIDES(c, 2, 1);
    CHECK_VALUES(c, 0, 3, 1, 4, 2, 5);
    THTensor_release(c);

    /* newCast */
    c = THTensor_newCast(base, TH_Int16, false);
    CHECK(c == base);
    THTensor_release(c);
    c = THTensor_newCast(base, TH_Int16, true);
    CHECK(c && c != base && c->storage != base->storage);
    CHECK_VALUES(c, 0, 1, 2, 3, 4, 5);
    THTensor_release(c);
    c = THTensor_newCast(t, TH_Float64, false);
    CHECK(c && c->dtype == TH_Float64 && !c->is_contiguous);
    CHECK_SHAPE(c, 3, 2);
    CHECK_STRIDES(c, 1, 3);
    CHECK_VALUES(c, 0, 3, 1, 4, 2, 5);
    THTensor_release(c);
    c = THTensor_newCast(t, TH_Bool, false);
    CHECK_VALUES(c, 0, 1, 1, 1, 1, 1);
    THTensor_release(c);
    CHECK_NEW_FAILS(THTensor_newCast(t, TH_NUM_DTYPES, false), TH_ERR_TYPE,
                    "invalid dtype");
    THTensor_release(t);
    THTensor_release(base);
}

/* fill_ refuses values the dtype cannot hold, with PyTorch's rules. */
static void
test_copy_fill_overflow(void)
{
    int64_t sizes[1] = {2};
    THTensor *u8 = THTensor_newEmpty(1, sizes, TH_UInt8, TH_DEVICE_CPU);
    THTensor *i32 = THTensor_newEmpty(1, sizes, TH_Int32, TH_DEVICE_CPU);
    THTensor *f32 = THTensor_newEmpty(1, sizes, TH_Float32, TH_DEVICE_CPU);
    CHECK_OK(THTensor_fill(u8, THScalar_fromInt(7)));
    CHECK_FAILS(THTensor_fill(u8, THScalar_fromInt(300)), TH_ERR_RUNTIME,
                "without overflow");
    CHECK_VALUES(u8, 7, 7); /* a refused fill writes nothing */
    CHECK_OK(THTensor_fill(u8, THScalar_fromInt(-1))); /* wraps, as torch */
    CHECK_VALUES(u8, 255, 255);
    CHECK_FAILS(THTensor_fill(i32, THScalar_fromDouble(NAN)),
                TH_ERR_RUNTIME, "int32");
    CHECK_FAILS(THTensor_fill(i32, THScalar_fromDouble(3e9)),
                TH_ERR_RUNTIME, "overflow");
    CHECK_OK(THTensor_fill(i32, THScalar_fromDouble(-2.5)));
    CHECK_VALUES(i32, -2, -2);
    CHECK_FAILS(THTensor_fill(f32, THScalar_fromDouble(1e300)),
                TH_ERR_RUNTIME, "float32");
    CHECK_OK(THTensor_fill(f32, THScalar_fromDouble(INFINITY)));
    /* a float fits an integral dtype only within [min, max] (PyTorch) */
    CHECK_FAILS(THTensor_fill(u8, THScalar_fromDouble(-2.5)),
                TH_ERR_RUNTIME, "uint8");
    CHECK_FAILS(THScalar_checkFits(THScalar_fromDouble(-1.0), TH_UInt8),
                TH_ERR_RUNTIME, "uint8");
    CHECK_FAILS(THScalar_checkFits(THScalar_fromDouble(-0.5), TH_UInt8),
                TH_ERR_RUNTIME, "uint8");
    CHECK_FAILS(THScalar_checkFits(THScalar_fromDouble(255.5), TH_UInt8),
                TH_ERR_RUNTIME, "uint8");
    CHECK_OK(THScalar_checkFits(THScalar_fromInt(-255), TH_UInt8));
    CHECK_FAILS(THScalar_checkFits(THScalar_fromInt(-256), TH_UInt8),
                TH_ERR_RUNTIME, "uint8");
    CHECK_FAILS(THScalar_checkFits(THScalar_fromDouble(127.5), TH_Int8),
                TH_ERR_RUNTIME, "int8");
    CHECK_FAILS(THScalar_checkFits(THScalar_fromDouble(-128.5), TH_Int8),
                TH_ERR_RUNTIME, "int8");
    CHECK_OK(THScalar_checkFits(THScalar_fromDouble(-128.0), TH_Int8));
    CHECK_OK(THScalar_checkFits(THScalar_fromDouble(-9223372036854775808.0),
                                TH_Int64));
    CHECK_OK(THScalar_checkFits(THScalar_fromInt(INT64_MAX), TH_Int64));
    CHECK_FAILS(THScalar_checkFits(THScalar_fromDouble(9223372036854775808.0),
                                   TH_Int64),
                TH_ERR_RUNTIME, "int64");
    THTensor_release(u8);
    THTensor_release(i32);
    THTensor_release(f32);
}

TH_TEST_SUITE(copy) = {
    TH_TEST(test_copy_fill_overflow),
    TH_TEST(test_copy_all_dtype_pairs),
    TH_TEST(test_copy_conversions),
    TH_TEST(test_copy_broadcasts_src),
    TH_TEST(test_copy_strided),
    TH_TEST(test_copy_overlapping),
    TH_TEST(test_copy_refusals),
    TH_TEST(test_copy_fill),
    TH_TEST(test_copy_clone_contiguous_cast),
    TH_TEST_END,
};
