/*
 * THUnary.h -- elementwise unary math: exp, log, sin, ..., the activations
 * (sigmoid, relu, gelu, silu), rounding, the float predicates (isnan, ...)
 * and nan_to_num.
 *
 * Every operator is one entry of TH_FORALL_UNARY_OPS below; the kernels,
 * the dtype rules and the Python bindings are all generated from it.
 *
 * Note [Unary dtype rules]
 * ~~~~~~~~~~~~~~~~~~~~~~~~
 * Floating inputs give a result of the same dtype, computed in that dtype
 * (float32 with the f-suffixed libm functions).  What an integer or bool
 * input gives depends on the operator's rule, as in PyTorch:
 *
 *   TH_UNARY_TO_FLOAT      exp, sin, sigmoid, ...: the input is converted
 *                          to the default float dtype first.
 *   TH_UNARY_FLOAT_ONLY    frac, gelu, silu, round(decimals=...): refused
 *                          ("frac" not implemented for 'Long').
 *   TH_UNARY_ROUNDING      floor, ceil, round, trunc: the integer is its own
 *                          rounding, so the result is a copy; bool refused.
 *   TH_UNARY_IDENTITY      nan_to_num: an integer has no nan or inf, so the
 *                          result is a copy (bool included).
 *   TH_UNARY_INTEGER       relu, square: computed in the integer dtype;
 *                          relu refuses bool, square computes bool in int64.
 *   TH_UNARY_PREDICATE     isnan, isinf, ...: the result is bool for every
 *                          input; integers give a constant.
 *
 * An in-place op (x.exp_()) or an out= tensor must be able to hold the
 * result dtype (PyTorch's canCast: no floating into integral, nothing but
 * bool into bool), so x.exp_() on an int64 x fails with "result type Float
 * can't be cast to the desired output type Long".
 */
#ifndef TH_UNARY_H
#define TH_UNARY_H

#include "THTensor.h"

/* _(name, python_name, rule).  `name` is the C identifier; two entries can
 * share a Python name (gelu's two forms, round with decimals). */
#define TH_FORALL_UNARY_OPS(_)                                   \
    _(exp, "exp", TH_UNARY_TO_FLOAT)                             \
    _(exp2, "exp2", TH_UNARY_TO_FLOAT)                           \
    _(expm1, "expm1", TH_UNARY_TO_FLOAT)                         \
    _(log, "log", TH_UNARY_TO_FLOAT)                             \
    _(log2, "log2", TH_UNARY_TO_FLOAT)                           \
    _(log10, "log10", TH_UNARY_TO_FLOAT)                         \
    _(log1p, "log1p", TH_UNARY_TO_FLOAT)                         \
    _(sqrt, "sqrt", TH_UNARY_TO_FLOAT)                           \
    _(rsqrt, "rsqrt", TH_UNARY_TO_FLOAT)                         \
    _(reciprocal, "reciprocal", TH_UNARY_TO_FLOAT)               \
    _(sin, "sin", TH_UNARY_TO_FLOAT)                             \
    _(cos, "cos", TH_UNARY_TO_FLOAT)                             \
    _(tan, "tan", TH_UNARY_TO_FLOAT)                             \
    _(asin, "asin", TH_UNARY_TO_FLOAT)                           \
    _(acos, "acos", TH_UNARY_TO_FLOAT)                           \
    _(atan, "atan", TH_UNARY_TO_FLOAT)                           \
    _(asinh, "asinh", TH_UNARY_TO_FLOAT)                         \
    _(acosh, "acosh", TH_UNARY_TO_FLOAT)                         \
    _(atanh, "atanh", TH_UNARY_TO_FLOAT)                         \
    _(sinh, "sinh", TH_UNARY_TO_FLOAT)                           \
    _(cosh, "cosh", TH_UNARY_TO_FLOAT)                           \
    _(tanh, "tanh", TH_UNARY_TO_FLOAT)                           \
    _(sigmoid, "sigmoid", TH_UNARY_TO_FLOAT)                     \
    _(erf, "erf", TH_UNARY_TO_FLOAT)                             \
    _(erfc, "erfc", TH_UNARY_TO_FLOAT)                           \
    _(lgamma, "lgamma", TH_UNARY_TO_FLOAT)                       \
    _(digamma, "digamma", TH_UNARY_TO_FLOAT)                     \
    _(_trigamma, "_trigamma", TH_UNARY_TO_FLOAT)                 \
    _(erfinv, "erfinv", TH_UNARY_TO_FLOAT)                       \
    _(sinc, "sinc", TH_UNARY_TO_FLOAT)                           \
    _(gelu, "gelu", TH_UNARY_FLOAT_ONLY)                         \
    _(gelu_tanh, "gelu", TH_UNARY_FLOAT_ONLY)                    \
    _(_gelu_derivative, "_gelu_derivative", TH_UNARY_FLOAT_ONLY) \
    _(_gelu_tanh_derivative, "_gelu_tanh_derivative",            \
      TH_UNARY_FLOAT_ONLY)                                       \
    _(silu, "silu", TH_UNARY_FLOAT_ONLY)                         \
    _(frac, "frac", TH_UNARY_FLOAT_ONLY)                         \
    _(round_decimals, "round", TH_UNARY_FLOAT_ONLY)              \
    _(floor, "floor", TH_UNARY_ROUNDING)                         \
    _(ceil, "ceil", TH_UNARY_ROUNDING)                           \
    _(round, "round", TH_UNARY_ROUNDING)                         \
    _(trunc, "trunc", TH_UNARY_ROUNDING)                         \
    _(nan_to_num, "nan_to_num", TH_UNARY_IDENTITY)               \
    _(relu, "relu", TH_UNARY_INTEGER)                            \
    _(square, "square", TH_UNARY_INTEGER)                        \
    _(isnan, "isnan", TH_UNARY_PREDICATE)                        \
    _(isinf, "isinf", TH_UNARY_PREDICATE)                        \
    _(isfinite, "isfinite", TH_UNARY_PREDICATE)                  \
    _(isposinf, "isposinf", TH_UNARY_PREDICATE)                  \
    _(isneginf, "isneginf", TH_UNARY_PREDICATE)

typedef enum {
    TH_UNARY_TO_FLOAT,
    TH_UNARY_FLOAT_ONLY,
    TH_UNARY_ROUNDING,
    TH_UNARY_IDENTITY,
    TH_UNARY_INTEGER,
    TH_UNARY_PREDICATE,
} THUnaryRule;

typedef enum {
#define TH_UNARY_ENUM(name, pyname, rule) TH_UNARY_##name,
    TH_FORALL_UNARY_OPS(TH_UNARY_ENUM)
#undef TH_UNARY_ENUM
    TH_NUM_UNARY_OPS
} THUnaryOp;

/* The arguments besides the input.  default_float is the dtype integer
 * inputs of TH_UNARY_TO_FLOAT ops compute in (ember.get_default_dtype()). */
typedef struct {
    THDtype default_float;
    int64_t decimals;             /* round_decimals */
    double nan, posinf, neginf;   /* nan_to_num ... */
    bool has_posinf, has_neginf;  /* ... false: the dtype's max / lowest */
} THUnaryArgs;

/* THUnaryArgs with every optional argument at its default. */
THUnaryArgs THUnaryArgs_default(THDtype default_float);

/* "exp", "gelu", ...: the name used in error messages. */
const char *THUnary_name(THUnaryOp op);

/* The dtype op(input) has (Note [Unary dtype rules]); -1 with a TH error
 * when the op refuses the input's dtype. */
int THUnary_resultType(THUnaryOp op, THDtype input, const THUnaryArgs *args,
                       THDtype *out);

/* A new tensor holding op(input), laid out like the input (Note [Preserving
 * the layout] in THTensor.h). */
THTensor *THTensor_newUnary(THUnaryOp op, THTensor *input,
                            const THUnaryArgs *args);

/* out[...] = op(input).  out must have the input's shape and a dtype the
 * result can be cast to; it may be the input itself (the in-place ops) or
 * any other view.  Bumps out's version once.  On error nothing is
 * written. */
int THTensor_unaryOut(THUnaryOp op, THTensor *out, THTensor *input,
                      const THUnaryArgs *args);

#endif /* TH_UNARY_H */
