/*
 * test_dtype.c -- the dtype tables, the two X-macro lists, promotion and
 * buffer-format parsing (THDtype.h).
 */
#include "th_test.h"

static void
test_dtype_itemsizes_and_names(void)
{
    static const struct {
        THDtype dtype;
        int itemsize;
        const char *name;
    } expected[] = {
        {TH_Bool, 1, "bool"},       {TH_UInt8, 1, "uint8"},
        {TH_Int8, 1, "int8"},       {TH_Int16, 2, "int16"},
        {TH_Int32, 4, "int32"},     {TH_Int64, 8, "int64"},
        {TH_Float32, 4, "float32"}, {TH_Float64, 8, "float64"},
    };
    CHECK_EQ_INT(TH_NUM_DTYPES, 8);
    for (size_t i = 0; i < sizeof(expected) / sizeof(expected[0]); i++) {
        CHECK_EQ_INT(expected[i].dtype, i); /* the enum order */
        CHECK_EQ_INT(THDtype_itemsize(expected[i].dtype),
                     expected[i].itemsize);
        CHECK_STR_EQ(THDtype_name(expected[i].dtype), expected[i].name);
        CHECK(THDtype_isValid((int)expected[i].dtype));
    }
    CHECK_EQ_INT(THDtype_itemsize(TH_NUM_DTYPES), 0);
    CHECK_EQ_INT(THDtype_itemsize((THDtype)-1), 0);
    CHECK_STR_EQ(THDtype_name(TH_NUM_DTYPES), "invalid");
    CHECK_STR_EQ(THDtype_name((THDtype)-1), "invalid");
    CHECK(!THDtype_isValid(TH_NUM_DTYPES));
    CHECK(!THDtype_isValid(-1));
}

static void
test_dtype_categories(void)
{
    for (int d = 0; d < TH_NUM_DTYPES; d++) {
        bool is_float = d == TH_Float32 || d == TH_Float64;
        CHECK_EQ_INT(THDtype_isFloating((THDtype)d), is_float);
        CHECK_EQ_INT(THDtype_isIntegral((THDtype)d, true), !is_float);
        CHECK_EQ_INT(THDtype_isIntegral((THDtype)d, false),
                     !is_float && d != TH_Bool);
    }
    CHECK(!THDtype_isIntegral(TH_NUM_DTYPES, true));
    CHECK(!THDtype_isFloating(TH_NUM_DTYPES));
}

/* Note [Dtype X-macro] promises the two lists agree: build every table
 * from both and compare them entry by entry. */
#define OUTER_NAME(Name, ctype, py) py,
#define OUTER_IDENT(Name, ctype, py) #Name,
#define OUTER_CTYPE(Name, ctype, py) #ctype,
#define OUTER_SIZE(Name, ctype, py) sizeof(ctype),
#define OUTER_ENUM(Name, ctype, py) TH_##Name,
#define INNER_NAME(extra, Name, ctype, py) py,
#define INNER_IDENT(extra, Name, ctype, py) #Name,
#define INNER_CTYPE(extra, Name, ctype, py) #ctype,
#define INNER_SIZE(extra, Name, ctype, py) sizeof(ctype),
#define INNER_ENUM(extra, Name, ctype, py) TH_##Name,
#define INNER_EXTRA(extra, Name, ctype, py) TH_APPLY(EXTRA_SUM, TH_UNPAREN extra),
#define EXTRA_SUM(a, b) (a) + (b)

static void
test_dtype_xmacro_lists_agree(void)
{
    static const char *const outer_names[] = {TH_FORALL_DTYPES(OUTER_NAME)};
    static const char *const inner_names[] = {
        TH_FORALL_DTYPES_INNER(INNER_NAME, ())};
    static const char *const outer_idents[] = {TH_FORALL_DTYPES(OUTER_IDENT)};
    static const char *const inner_idents[] = {
        TH_FORALL_DTYPES_INNER(INNER_IDENT, ())};
    static const char *const outer_ctypes[] = {TH_FORALL_DTYPES(OUTER_CTYPE)};
    static const char *const inner_ctypes[] = {
        TH_FORALL_DTYPES_INNER(INNER_CTYPE, ())};
    static const size_t outer_sizes[] = {TH_FORALL_DTYPES(OUTER_SIZE)};
    static const size_t inner_sizes[] = {
        TH_FORALL_DTYPES_INNER(INNER_SIZE, ())};
    static const int outer_enums[] = {TH_FORALL_DTYPES(OUTER_ENUM)};
    static const int inner_enums[] = {TH_FORALL_DTYPES_INNER(INNER_ENUM, ())};
    /* `extra` is passed through, parenthesised, to every inner call. */
    static const int extras[] = {TH_FORALL_DTYPES_INNER(INNER_EXTRA, (40, 2))};

    size_t n_outer = sizeof(outer_names) / sizeof(outer_names[0]);
    size_t n_inner = sizeof(inner_names) / sizeof(inner_names[0]);
    CHECK_EQ_INT(n_outer, TH_NUM_DTYPES);
    CHECK_EQ_INT(n_inner, TH_NUM_DTYPES);
    CHECK_EQ_INT(sizeof(extras) / sizeof(extras[0]), TH_NUM_DTYPES);
    for (size_t i = 0; i < n_outer && i < n_inner; i++) {
        CHECK_STR_EQ(outer_names[i], inner_names[i]);
        CHECK_STR_EQ(outer_idents[i], inner_idents[i]);
        CHECK_STR_EQ(outer_ctypes[i], inner_ctypes[i]);
        CHECK_EQ_INT(outer_sizes[i], inner_sizes[i]);
        CHECK_EQ_INT(outer_enums[i], (int)i);
        CHECK_EQ_INT(inner_enums[i], (int)i);
        CHECK_EQ_INT(extras[i], 42);
        /* and both agree with the runtime tables */
        CHECK_STR_EQ(THDtype_name((THDtype)i), outer_names[i]);
        CHECK_EQ_INT(THDtype_itemsize((THDtype)i), outer_sizes[i]);
    }
}

/* PyTorch's promoteTypes table (c10/core/ScalarType.cpp) restricted to our
 * dtypes, rows and columns in enum order: b1 u1 i1 i2 i4 i8 f4 f8. */
static void
test_dtype_promotion_matches_pytorch(void)
{
    enum { b1 = TH_Bool, u1 = TH_UInt8, i1 = TH_Int8, i2 = TH_Int16,
           i4 = TH_Int32, i8 = TH_Int64, f4 = TH_Float32, f8 = TH_Float64 };
    static const int table[TH_NUM_DTYPES][TH_NUM_DTYPES] = {
        /*        b1  u1  i1  i2  i4  i8  f4  f8 */
        /* b1 */ {b1, u1, i1, i2, i4, i8, f4, f8},
        /* u1 */ {u1, u1, i2, i2, i4, i8, f4, f8},
        /* i1 */ {i1, i2, i1, i2, i4, i8, f4, f8},
        /* i2 */ {i2, i2, i2, i2, i4, i8, f4, f8},
        /* i4 */ {i4, i4, i4, i4, i4, i8, f4, f8},
        /* i8 */ {i8, i8, i8, i8, i8, i8, f4, f8},
        /* f4 */ {f4, f4, f4, f4, f4, f4, f4, f8},
        /* f8 */ {f8, f8, f8, f8, f8, f8, f8, f8},
    };
    for (int a = 0; a < TH_NUM_DTYPES; a++) {
        for (int b = 0; b < TH_NUM_DTYPES; b++) {
            THDtype got = THDtype_promote((THDtype)a, (THDtype)b);
            CHECK_MSG(got == (THDtype)table[a][b],
                      "promote(%s, %s) = %s, expected %s",
                      THDtype_name((THDtype)a), THDtype_name((THDtype)b),
                      THDtype_name(got), THDtype_name((THDtype)table[a][b]));
        }
    }
    /* the spot checks the brief names, spelled out */
    CHECK_EQ_INT(THDtype_promote(TH_UInt8, TH_Int8), TH_Int16);
    CHECK_EQ_INT(THDtype_promote(TH_Int8, TH_UInt8), TH_Int16);
    CHECK_EQ_INT(THDtype_promote(TH_Bool, TH_Int8), TH_Int8);
    CHECK_EQ_INT(THDtype_promote(TH_Int64, TH_Float32), TH_Float32);
    CHECK_EQ_INT(THDtype_promote(TH_Float32, TH_Float64), TH_Float64);
}

static void
test_dtype_buffer_formats(void)
{
    THDtype out;
    /* every dtype's own format round-trips */
    for (int d = 0; d < TH_NUM_DTYPES; d++) {
        const char *fmt = THDtype_bufferFormat((THDtype)d);
        CHECK_NOT_NULL(fmt);
        if (fmt == NULL) {
            continue;
        }
        out = TH_NUM_DTYPES;
        CHECK_OK(THDtype_fromBufferFormat(fmt, THDtype_itemsize((THDtype)d),
                                          &out));
        CHECK_EQ_INT(out, d);
    }
    CHECK(THDtype_bufferFormat(TH_NUM_DTYPES) == NULL);
    CHECK_STR_EQ(THDtype_bufferFormat(TH_Float32), "f");
    CHECK_STR_EQ(THDtype_bufferFormat(TH_Bool), "?");

    static const struct {
        const char *format;
        int itemsize;
        THDtype dtype;
    } accepted[] = {
        {"<f", 4, TH_Float32}, {"=d", 8, TH_Float64}, {"@d", 8, TH_Float64},
        {"l", 8, TH_Int64},    {"<l", 4, TH_Int32},   {"q", 8, TH_Int64},
        {"<q", 8, TH_Int64},   {"i", 4, TH_Int32},    {"h", 2, TH_Int16},
        {"b", 1, TH_Int8},     {"B", 1, TH_UInt8},    {"?", 1, TH_Bool},
        {"=?", 1, TH_Bool},    {"<B", 1, TH_UInt8},
    };
    for (size_t i = 0; i < sizeof(accepted) / sizeof(accepted[0]); i++) {
        out = TH_NUM_DTYPES;
        THError_clear();
        int status = THDtype_fromBufferFormat(accepted[i].format,
                                              accepted[i].itemsize, &out);
        CHECK_MSG(status == 0 && out == accepted[i].dtype,
                  "format '%s' itemsize %d: status %d dtype %s (%s)",
                  accepted[i].format, accepted[i].itemsize, status,
                  THDtype_name(out), THError_message());
    }
    /* PEP 3118: a NULL format means unsigned bytes */
    out = TH_NUM_DTYPES;
    CHECK_OK(THDtype_fromBufferFormat(NULL, 1, &out));
    CHECK_EQ_INT(out, TH_UInt8);

    /* big-endian data is refused with a TypeError-kind error */
    CHECK_FAILS(THDtype_fromBufferFormat(">f", 4, &out), TH_ERR_TYPE,
                "non-native byte order");
    CHECK_FAILS(THDtype_fromBufferFormat("!i", 4, &out), TH_ERR_TYPE,
                "non-native byte order");
    /* float16 ('e') is not a dtype of ours */
    CHECK_FAILS(THDtype_fromBufferFormat("e", 2, &out), TH_ERR_TYPE,
                "can't convert a buffer of format 'e'");
    CHECK_FAILS(THDtype_fromBufferFormat("<e", 2, &out), TH_ERR_TYPE,
                "format 'e'");
    /* unsigned wider than a byte, complex, structs, sizes that disagree */
    CHECK_FAILS(THDtype_fromBufferFormat("Q", 8, &out), TH_ERR_TYPE, "");
    CHECK_FAILS(THDtype_fromBufferFormat("H", 2, &out), TH_ERR_TYPE, "");
    CHECK_FAILS(THDtype_fromBufferFormat("Zd", 16, &out), TH_ERR_TYPE, "");
    CHECK_FAILS(THDtype_fromBufferFormat("T{i:x:}", 4, &out), TH_ERR_TYPE,
                "");
    CHECK_FAILS(THDtype_fromBufferFormat("ii", 4, &out), TH_ERR_TYPE, "");
    CHECK_FAILS(THDtype_fromBufferFormat("f", 8, &out), TH_ERR_TYPE, "");
    CHECK_FAILS(THDtype_fromBufferFormat("d", 4, &out), TH_ERR_TYPE, "");
    CHECK_FAILS(THDtype_fromBufferFormat("i", 3, &out), TH_ERR_TYPE, "");
    CHECK_FAILS(THDtype_fromBufferFormat("?", 4, &out), TH_ERR_TYPE, "");
    CHECK_FAILS(THDtype_fromBufferFormat("", 1, &out), TH_ERR_TYPE, "");
    CHECK_FAILS(THDtype_fromBufferFormat("<", 1, &out), TH_ERR_TYPE, "");
}

TH_TEST_SUITE(dtype) = {
    TH_TEST(test_dtype_itemsizes_and_names),
    TH_TEST(test_dtype_categories),
    TH_TEST(test_dtype_xmacro_lists_agree),
    TH_TEST(test_dtype_promotion_matches_pytorch),
    TH_TEST(test_dtype_buffer_formats),
    TH_TEST_END,
};
