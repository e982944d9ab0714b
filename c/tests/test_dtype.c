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
        {TH_Float16, 2, "float16"}, {TH_BFloat16, 2, "bfloat16"},
    };
    CHECK_EQ_INT(TH_NUM_DTYPES, 10);
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
        bool is_float = d == TH_Float32 || d == TH_Float64
                        || d == TH_Float16 || d == TH_BFloat16;
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
 * dtypes, rows and columns in enum order: b1 u1 i1 i2 i4 i8 f4 f8 f2
 * bf. */
static void
test_dtype_promotion_matches_pytorch(void)
{
    enum { b1 = TH_Bool, u1 = TH_UInt8, i1 = TH_Int8, i2 = TH_Int16,
           i4 = TH_Int32, i8 = TH_Int64, f4 = TH_Float32, f8 = TH_Float64,
           f2 = TH_Float16, bf = TH_BFloat16 };
    static const int table[TH_NUM_DTYPES][TH_NUM_DTYPES] = {
        /*        b1  u1  i1  i2  i4  i8  f4  f8  f2  bf */
        /* b1 */ {b1, u1, i1, i2, i4, i8, f4, f8, f2, bf},
        /* u1 */ {u1, u1, i2, i2, i4, i8, f4, f8, f2, bf},
        /* i1 */ {i1, i2, i1, i2, i4, i8, f4, f8, f2, bf},
        /* i2 */ {i2, i2, i2, i2, i4, i8, f4, f8, f2, bf},
        /* i4 */ {i4, i4, i4, i4, i4, i8, f4, f8, f2, bf},
        /* i8 */ {i8, i8, i8, i8, i8, i8, f4, f8, f2, bf},
        /* f4 */ {f4, f4, f4, f4, f4, f4, f4, f8, f4, f4},
        /* f8 */ {f8, f8, f8, f8, f8, f8, f8, f8, f8, f8},
        /* f2 */ {f2, f2, f2, f2, f2, f2, f4, f8, f2, f4},
        /* bf */ {bf, bf, bf, bf, bf, bf, f4, f8, f4, bf},
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

/* A few bit patterns of each conversion (the Python tests compare all of
 * them with PyTorch). */
static void
test_dtype_half_conversions(void)
{
    static const struct {
        uint32_t f32;
        uint16_t f16, bf16;
    } to16[] = {
        {0x3f800000, 0x3c00, 0x3f80}, /* 1 */
        {0xc0000000, 0xc000, 0xc000}, /* -2 */
        {0x477fe000, 0x7bff, 0x4780}, /* 65504: largest half */
        {0x477ff000, 0x7c00, 0x4780}, /* 65520: tie, to even = inf */
        {0x477fefff, 0x7bff, 0x4780}, /* just below the tie */
        {0x33800000, 0x0001, 0x3380}, /* 2^-24: smallest subnormal */
        {0x33000000, 0x0000, 0x3300}, /* 2^-25: tie, to even = 0 */
        {0x33000001, 0x0001, 0x3300}, /* just above the tie */
        {0x387fe000, 0x0400, 0x3880}, /* rounds up to the smallest normal */
        {0x3f808000, 0x3c04, 0x3f80}, /* bf16 tie, even stays */
        {0x3f818000, 0x3c0c, 0x3f82}, /* bf16 tie, odd rounds up */
        {0x7f7fffff, 0x7c00, 0x7f80}, /* FLT_MAX: inf in both */
        {0xff800000, 0xfc00, 0xff80}, /* -inf */
        {0x7fa12345, 0x7f09, 0xffff}, /* a NaN: quiet, payload / 0xffff */
        {0x00000001, 0x0000, 0x0000}, /* float32 subnormal */
    };
    for (size_t i = 0; i < sizeof(to16) / sizeof(to16[0]); i++) {
        float f = TH_floatFromBits(to16[i].f32);
        CHECK_EQ_INT(THHalf_fromFloat(f).bits, to16[i].f16);
        CHECK_EQ_INT(THBFloat16_fromFloat(f).bits, to16[i].bf16);
    }
    static const struct {
        uint16_t f16;
        uint32_t f32;
    } from16[] = {
        {0x3c00, 0x3f800000}, {0x0001, 0x33800000}, {0x83ff, 0xb87fc000},
        {0x7c00, 0x7f800000}, {0x7c01, 0x7fc02000}, {0xfe00, 0xffc00000},
    };
    for (size_t i = 0; i < sizeof(from16) / sizeof(from16[0]); i++) {
        THHalf h = {from16[i].f16};
        CHECK_EQ_INT(TH_floatBits(THHalf_toFloat(h)), from16[i].f32);
    }
    THBFloat16 b = {0x7f81}; /* signalling NaN: kept as it is */
    CHECK_EQ_INT(TH_floatBits(THBFloat16_toFloat(b)), 0x7f810000);
}

static void
test_dtype_buffer_formats(void)
{
    THDtype out;
    /* every dtype's own format round-trips */
    for (int d = 0; d < TH_NUM_DTYPES; d++) {
        const char *fmt = THDtype_bufferFormat((THDtype)d);
        if (d == TH_BFloat16) { /* no struct-module code */
            CHECK(fmt == NULL);
            continue;
        }
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
    /* float16 is 'e'; with another itemsize it is refused */
    CHECK_OK(THDtype_fromBufferFormat("<e", 2, &out));
    CHECK_EQ_INT(out, TH_Float16);
    CHECK_FAILS(THDtype_fromBufferFormat("e", 4, &out), TH_ERR_TYPE,
                "can't convert a buffer of format 'e'");
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
    TH_TEST(test_dtype_half_conversions),
    TH_TEST_END,
};
