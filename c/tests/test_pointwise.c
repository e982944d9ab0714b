/*
 * test_pointwise.c -- the elementwise operators of THPointwise.h: promotion
 * with wrapped numbers, the loops' fast and strided paths, out= and
 * in-place rules, integer division by zero.
 */
#include "th_test.h"

static THPointwiseOptions
default_options(void)
{
    THPointwiseOptions options = {
        .out = NULL,
        .inplace = false,
        .alpha = THScalar_fromInt(1),
        .default_float = TH_Float32,
    };
    return options;
}

static THDtype
result_type2(THPointwiseArg a, THPointwiseArg b)
{
    THPointwiseArg args[2] = {a, b};
    return THPointwise_resultType(2, args, TH_Float32);
}

static void
test_pointwise_result_type(void)
{
    THTensor *i32 = tt_arange(TH_Int32, TT_SIZES(2));
    THTensor *u8 = tt_arange(TH_UInt8, TT_SIZES(2));
    THTensor *b = tt_arange(TH_Bool, TT_SIZES(2));
    THTensor *f32_0d = tt_arange(TH_Float32, 0, NULL);
    THTensor *i64_0d = tt_arange(TH_Int64, 0, NULL);
    THPointwiseArg t_i32 = THPointwiseArg_tensor(i32);
    /* numbers only lift the category */
    CHECK_EQ_INT(result_type2(t_i32, THPointwiseArg_number(
                                         THScalar_fromDouble(2.5))),
                 TH_Float32);
    CHECK_EQ_INT(result_type2(THPointwiseArg_tensor(u8),
                              THPointwiseArg_number(THScalar_fromInt(1000))),
                 TH_UInt8);
    CHECK_EQ_INT(result_type2(THPointwiseArg_tensor(b),
                              THPointwiseArg_number(THScalar_fromBool(true))),
                 TH_Bool);
    CHECK_EQ_INT(result_type2(THPointwiseArg_tensor(b),
                              THPointwiseArg_number(THScalar_fromInt(1))),
                 TH_Int64);
    /* 0-dim tensors too; tensors with dims promote fully */
    CHECK_EQ_INT(result_type2(t_i32, THPointwiseArg_tensor(i64_0d)),
                 TH_Int32);
    CHECK_EQ_INT(result_type2(t_i32, THPointwiseArg_tensor(f32_0d)),
                 TH_Float32);
    CHECK_EQ_INT(result_type2(t_i32, THPointwiseArg_tensor(u8)), TH_Int32);
    CHECK(!THPointwise_canCast(TH_Float32, TH_Int64));
    CHECK(!THPointwise_canCast(TH_Int8, TH_Bool));
    CHECK(THPointwise_canCast(TH_Bool, TH_Float32));
    CHECK(THPointwise_canCast(TH_Float64, TH_Float32));
    THTensor_release(i32);
    THTensor_release(u8);
    THTensor_release(b);
    THTensor_release(f32_0d);
    THTensor_release(i64_0d);
}

static void
test_pointwise_broadcast_number_and_strided(void)
{
    THPointwiseOptions options = default_options();
    THTensor *m = tt_arange(TH_Float32, TT_SIZES(2, 3));
    THTensor *mt = THTensor_newTranspose(m, 0, 1); /* 3 x 2, strided */
    THTensor *row = tt_arange(TH_Float32, TT_SIZES(2));
    THPointwiseArg args[2] = {THPointwiseArg_tensor(mt),
                              THPointwiseArg_tensor(row)};
    THTensor *sum = THPointwise_apply(TH_OP_ADD, args, &options);
    CHECK_SHAPE(sum, 3, 2);
    /* mt = [[0, 3], [1, 4], [2, 5]] + [0, 1] */
    CHECK_VALUES(sum, 0, 4, 1, 5, 2, 6);
    CHECK_INVARIANTS(sum);
    args[1] = THPointwiseArg_number(THScalar_fromInt(2));
    THTensor *left = THPointwise_apply(TH_OP_SUB, args, &options);
    CHECK_VALUES(left, -2, 1, -1, 2, 0, 3);
    THPointwiseArg swapped[2] = {THPointwiseArg_number(THScalar_fromInt(2)),
                                 THPointwiseArg_tensor(mt)};
    THTensor *right = THPointwise_apply(TH_OP_SUB, swapped, &options);
    CHECK_VALUES(right, 2, -1, 1, -2, 0, -3);
    THTensor *less = THPointwise_apply(TH_OP_LT, swapped, &options);
    CHECK(less != NULL && less->dtype == TH_Bool);
    CHECK_VALUES(less, 0, 1, 0, 1, 0, 1);
    THTensor_release(less);
    THTensor_release(right);
    THTensor_release(left);
    THTensor_release(sum);
    THTensor_release(row);
    THTensor_release(mt);
    THTensor_release(m);
}

static void
test_pointwise_integer_semantics(void)
{
    THPointwiseOptions options = default_options();
    THTensor *a = tt_from(TH_Int32, TT_SIZES(4),
                          (double[]){7, -7, 7, -7});
    THTensor *b = tt_from(TH_Int32, TT_SIZES(4),
                          (double[]){2, 2, -2, -2});
    THPointwiseArg args[2] = {THPointwiseArg_tensor(a),
                              THPointwiseArg_tensor(b)};
    THTensor *floor = THPointwise_apply(TH_OP_DIV_FLOOR, args, &options);
    CHECK_VALUES(floor, 3, -4, -4, 3);
    THTensor *rem = THPointwise_apply(TH_OP_REMAINDER, args, &options);
    CHECK_VALUES(rem, 1, 1, -1, -1);
    THTensor *fmod = THPointwise_apply(TH_OP_FMOD, args, &options);
    CHECK_VALUES(fmod, 1, -1, 1, -1);
    THTensor *div = THPointwise_apply(TH_OP_DIV, args, &options);
    CHECK(div != NULL && div->dtype == TH_Float32);
    CHECK_VALUES(div, 3.5, -3.5, -3.5, 3.5);
    /* int32 wraps on overflow */
    THTensor *big = tt_from(TH_Int32, TT_SIZES(1), (double[]){2147483647});
    THPointwiseArg wrap[2] = {THPointwiseArg_tensor(big),
                              THPointwiseArg_number(THScalar_fromInt(1))};
    THTensor *wrapped = THPointwise_apply(TH_OP_ADD, wrap, &options);
    CHECK_VALUES(wrapped, -2147483648.0);
    /* division by zero is refused before anything runs */
    tt_set(b, 3, 0);
    CHECK_NEW_FAILS(THPointwise_apply(TH_OP_DIV_TRUNC, args, &options),
                    TH_ERR_RUNTIME, "ZeroDivisionError");
    THTensor_release(wrapped);
    THTensor_release(big);
    THTensor_release(div);
    THTensor_release(fmod);
    THTensor_release(rem);
    THTensor_release(floor);
    THTensor_release(b);
    THTensor_release(a);
}

static void
test_pointwise_inplace_and_out_rules(void)
{
    THPointwiseOptions options = default_options();
    THTensor *a = tt_arange(TH_Int64, TT_SIZES(3));
    THTensor *wide = tt_arange(TH_Int64, TT_SIZES(2, 3));
    THPointwiseArg args[2] = {THPointwiseArg_tensor(a),
                              THPointwiseArg_number(THScalar_fromDouble(1.5))};
    options.inplace = true;
    CHECK_NEW_FAILS(THPointwise_apply(TH_OP_ADD, args, &options),
                    TH_ERR_RUNTIME,
                    "result type Float can't be cast to the desired output "
                    "type Long");
    args[1] = THPointwiseArg_tensor(wide);
    CHECK_NEW_FAILS(THPointwise_apply(TH_OP_ADD, args, &options),
                    TH_ERR_RUNTIME,
                    "output with shape [3] doesn't match the broadcast shape "
                    "[2, 3]");
    CHECK_EQ_INT(tt_version(a), 0);
    CHECK_VALUES(a, 0, 1, 2);
    args[1] = THPointwiseArg_number(THScalar_fromInt(10));
    THTensor *same = THPointwise_apply(TH_OP_ADD, args, &options);
    CHECK(same == a);
    CHECK_VALUES(a, 10, 11, 12);
    CHECK_EQ_INT(tt_version(a), 1);
    /* out= of a wider dtype: computed in int64, cast on the way out */
    THTensor *out = tt_arange(TH_Float64, TT_SIZES(3));
    options.inplace = false;
    options.out = out;
    THTensor *result = THPointwise_apply(TH_OP_MUL, args, &options);
    CHECK(result == out);
    CHECK_VALUES(out, 100, 110, 120);
    CHECK_EQ_INT(tt_version(out), 1);
    THTensor_release(result);
    THTensor_release(out);
    THTensor_release(same);
    THTensor_release(wide);
    THTensor_release(a);
}

static void
test_pointwise_where_and_clamp(void)
{
    THPointwiseOptions options = default_options();
    THTensor *cond = tt_from(TH_Bool, TT_SIZES(3), (double[]){1, 0, 1});
    THTensor *x = tt_from(TH_Float64, TT_SIZES(3), (double[]){-5, 0.5, 9});
    THPointwiseArg where_args[3] = {
        THPointwiseArg_tensor(cond), THPointwiseArg_tensor(x),
        THPointwiseArg_number(THScalar_fromInt(7))};
    THTensor *w = THPointwise_apply(TH_OP_WHERE, where_args, &options);
    CHECK(w != NULL && w->dtype == TH_Float64);
    CHECK_VALUES(w, -5, 7, 9);
    THPointwiseArg clamp_args[3] = {
        THPointwiseArg_tensor(x), THPointwiseArg_number(THScalar_fromInt(0)),
        THPointwiseArg_number(THScalar_fromInt(1))};
    THTensor *c = THPointwise_apply(TH_OP_CLAMP, clamp_args, &options);
    CHECK_VALUES(c, 0, 0.5, 1);
    where_args[0] = THPointwiseArg_tensor(x);
    CHECK_NEW_FAILS(THPointwise_apply(TH_OP_WHERE, where_args, &options),
                    TH_ERR_RUNTIME,
                    "where expected condition to be a boolean tensor, but got "
                    "a tensor with dtype Double");
    THTensor_release(c);
    THTensor_release(w);
    THTensor_release(x);
    THTensor_release(cond);
}

TH_TEST_SUITE(pointwise) = {
    TH_TEST(test_pointwise_result_type),
    TH_TEST(test_pointwise_broadcast_number_and_strided),
    TH_TEST(test_pointwise_integer_semantics),
    TH_TEST(test_pointwise_inplace_and_out_rules),
    TH_TEST(test_pointwise_where_and_clamp),
    TH_TEST_END,
};
