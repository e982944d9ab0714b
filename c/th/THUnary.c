/*
 * THUnary.c -- the unary elementwise kernels and their dtype rules.
 *
 * Three families of inner loops, each generated from one table of
 * formulas (Note [Unary formulas]):
 *   float loops      float32 -> float32 and float64 -> float64;
 *   predicate loops  float32/float64 -> bool (isnan, ...);
 *   integer loops    integer -> same integer (relu, square).
 * Everything else an op can do to a non-float input (convert it to the
 * default float first, copy it, refuse it) is decided once, by the rules of
 * Note [Unary dtype rules] in THUnary.h, before any loop runs.
 */
#include "THUnary.h"

#include "THFormulas.h"
#include "THIter.h"
#include "THParallel.h"

#include <float.h>
#include <stdio.h>
#include <string.h>
#include <tgmath.h>

/* ---- per-op facts ------------------------------------------------------- */

static const struct {
    const char *name;
    THUnaryRule rule;
} op_info[TH_NUM_UNARY_OPS] = {
#define TH_UNARY_INFO(name, pyname, rule) [TH_UNARY_##name] = {pyname, rule},
    TH_FORALL_UNARY_OPS(TH_UNARY_INFO)
#undef TH_UNARY_INFO
};

const char *
THUnary_name(THUnaryOp op)
{
    return op_info[op].name;
}

THUnaryArgs
THUnaryArgs_default(THDtype default_float)
{
    THUnaryArgs args = {.default_float = default_float};
    return args;
}

/* ---- the values a loop reads besides its input: THUnaryParams ---------- */

/* v, or an infinity of its sign when it is beyond the float dtype's range. */
static double
saturate(double v, THDtype dtype)
{
    double max = THDtype_floatingMax(dtype);
    return fabs(v) > max ? copysign((double)INFINITY, v) : v;
}

static THUnaryParams
loop_params(const THUnaryArgs *args, THDtype dtype)
{
    double max = THDtype_floatingMax(dtype);
    /* in double: -INT64_MIN would overflow an int64_t */
    double exponent = fabs((double)args->decimals);
    THUnaryParams p = {
        .ten_pow = saturate(pow(10.0, exponent), dtype),
        .divide = args->decimals < 0,
        .nan = saturate(args->nan, dtype),
        .posinf = args->has_posinf ? saturate(args->posinf, dtype) : max,
        .neginf = args->has_neginf ? saturate(args->neginf, dtype) : -max,
    };
    return p;
}

/* The dtypes each family is generated for (names from TH_FORALL_DTYPES). */
#define TH_FORALL_FLOAT_DTYPES(_, extra) \
    _(extra, Float32, float)             \
    _(extra, Float64, double)
#define TH_FORALL_INTEGER_DTYPES(_, extra) \
    _(extra, UInt8, uint8_t)               \
    _(extra, Int8, int8_t)                 \
    _(extra, Int16, int16_t)               \
    _(extra, Int32, int32_t)               \
    _(extra, Int64, int64_t)

/* TH_VECTOR_CLONES: Note [Vector clones] in THGeneral.h. */

/* ---- loops: unary_<name>_<Dtype>(data, strides, n, ctx) --------------------
 *
 * data[0] is the output (of out_t), data[1] the input (of in_t); they
 * may be the same memory (in-place ops).  As in THCopy.c, the contiguous
 * branch repeats the strided loop with constant strides so the compiler can
 * vectorise it (where the formula calls libm it stays a scalar call). */
#define TH_DEFINE_UNARY_LOOP(name, formula, Dtype, in_t, out_t)          \
    TH_VECTOR_CLONES                                                         \
    static void unary_##name##_##Dtype(char **data, const int64_t *strides, \
                                       int64_t n, void *ctx)                 \
    {                                                                        \
        typedef in_t scalar_t; /* the name the formulas use */               \
        const THUnaryParams *p = ctx;                                           \
        (void)p;                                                             \
        if (strides[0] == sizeof(out_t) && strides[1] == sizeof(in_t)) { \
            out_t *out = (out_t *)data[0];                                   \
            const in_t *in = (const in_t *)data[1];                  \
            for (int64_t k = 0; k < n; k++) {                                \
                scalar_t x = in[k];                                          \
                out[k] = (out_t)(formula);                                   \
            }                                                                \
            return;                                                          \
        }                                                                    \
        for (int64_t k = 0; k < n; k++) {                                    \
            scalar_t x = *(const in_t *)(data[1] + k * strides[1]);      \
            *(out_t *)(data[0] + k * strides[0]) = (out_t)(formula);         \
        }                                                                    \
    }

#define TH_DEFINE_SAME_TYPE_LOOP(op, Dtype, in_t) \
    TH_APPLY(TH_DEFINE_UNARY_LOOP, TH_UNPAREN op, Dtype, in_t, in_t)
#define TH_DEFINE_PREDICATE_LOOP(op, Dtype, in_t) \
    TH_APPLY(TH_DEFINE_UNARY_LOOP, TH_UNPAREN op, Dtype, in_t, bool)

#define TH_FLOAT_LOOPS(name, formula) \
    TH_FORALL_FLOAT_DTYPES(TH_DEFINE_SAME_TYPE_LOOP, (name, formula))
#define TH_PREDICATE_LOOPS(name, formula, int_value) \
    TH_FORALL_FLOAT_DTYPES(TH_DEFINE_PREDICATE_LOOP, (name, formula))
#define TH_INTEGER_LOOPS(name, formula) \
    TH_FORALL_INTEGER_DTYPES(TH_DEFINE_SAME_TYPE_LOOP, (name, formula))

TH_FORALL_FLOAT_FORMULAS(TH_FLOAT_LOOPS)
TH_FORALL_PREDICATE_FORMULAS(TH_PREDICATE_LOOPS)
TH_FORALL_INTEGER_FORMULAS(TH_INTEGER_LOOPS)

/* unary_loops[op][input dtype]; NULL where no loop exists (the dtype rules
 * convert, copy or refuse such inputs before a loop is looked up). */
#define TH_LOOP_ENTRY(op, Dtype, scalar_t) \
    TH_APPLY(TH_LOOP_ENTRY_, TH_UNPAREN op, Dtype)
#define TH_LOOP_ENTRY_(name, Dtype) \
    [TH_UNARY_##name][TH_##Dtype] = unary_##name##_##Dtype,
#define TH_FLOAT_ENTRIES(name, formula) \
    TH_FORALL_FLOAT_DTYPES(TH_LOOP_ENTRY, (name))
#define TH_PREDICATE_ENTRIES(name, formula, int_value) \
    TH_FORALL_FLOAT_DTYPES(TH_LOOP_ENTRY, (name))
#define TH_INTEGER_ENTRIES(name, formula) \
    TH_FORALL_INTEGER_DTYPES(TH_LOOP_ENTRY, (name))

static const THLoop unary_loops[TH_NUM_UNARY_OPS][TH_NUM_DTYPES] = {
    TH_FORALL_FLOAT_FORMULAS(TH_FLOAT_ENTRIES)
    TH_FORALL_PREDICATE_FORMULAS(TH_PREDICATE_ENTRIES)
    TH_FORALL_INTEGER_FORMULAS(TH_INTEGER_ENTRIES)
};

/* What a predicate answers for every element of an integer tensor. */
static const bool predicate_integer_value[TH_NUM_UNARY_OPS] = {
#define TH_PREDICATE_VALUE(name, formula, int_value) \
    [TH_UNARY_##name] = int_value,
    TH_FORALL_PREDICATE_FORMULAS(TH_PREDICATE_VALUE)
#undef TH_PREDICATE_VALUE
};

/* out[k] = *(bool *)ctx: a predicate on an integer tensor. */
static void
fill_bool_loop(char **data, const int64_t *strides, int64_t n, void *ctx)
{
    bool value = *(const bool *)ctx;
    for (int64_t k = 0; k < n; k++) {
        *(bool *)(data[0] + k * strides[0]) = value;
    }
}

/* ---- dtype rules (Note [Unary dtype rules]) ----------------------------- */

static int
refuse_dtype(THUnaryOp op, THDtype input)
{
    if (op == TH_UNARY_relu) {
        return THError_set(TH_ERR_RUNTIME,
                           "Boolean inputs not supported for relu");
    }
    return THError_set(TH_ERR_RUNTIME, "\"%s\" not implemented for '%s'",
                       op_info[op].name, THDtype_scalarTypeName(input));
}

int
THUnary_resultType(THUnaryOp op, THDtype input, const THUnaryArgs *args,
                   THDtype *out)
{
    THUnaryRule rule = op_info[op].rule;
    if (rule == TH_UNARY_PREDICATE) {
        *out = TH_Bool;
        return 0;
    }
    if (THDtype_isFloating(input)) {
        *out = input;
        return 0;
    }
    switch (rule) {
    case TH_UNARY_TO_FLOAT:
        *out = args->default_float;
        return 0;
    case TH_UNARY_FLOAT_ONLY:
        return refuse_dtype(op, input);
    case TH_UNARY_ROUNDING:
    case TH_UNARY_INTEGER:
        if (input == TH_Bool) {
            if (op != TH_UNARY_square) {
                return refuse_dtype(op, input);
            }
            *out = TH_Int64; /* PyTorch: square(bool) is pow(bool, 2) */
            return 0;
        }
        *out = input;
        return 0;
    default: /* TH_UNARY_IDENTITY */
        *out = input;
        return 0;
    }
}

/* True when op(input) is input's values unchanged (an integer floor, an
 * integer nan_to_num). */
static bool
is_plain_copy(THUnaryOp op, THDtype input)
{
    THUnaryRule rule = op_info[op].rule;
    return !THDtype_isFloating(input)
           && (rule == TH_UNARY_ROUNDING || rule == TH_UNARY_IDENTITY);
}

/* PyTorch's canCast: no floating into integral, nothing else into bool. */
static bool
can_cast(THDtype from, THDtype to)
{
    if (THDtype_isFloating(from) && !THDtype_isFloating(to)) {
        return false;
    }
    return from == TH_Bool || to != TH_Bool;
}

/* ---- running the kernel ------------------------------------------------- */

/* The tensor the loop reads: the input itself (retained), or the input
 * converted to the dtype the loop computes in (a new tensor laid out like
 * the input): the result dtype, or the input's own for a predicate, where
 * float16 and bfloat16 compute in float32 (Note [Half-precision dtypes]). */
static THTensor *
new_kernel_input(THTensor *input, THDtype result, bool predicate)
{
    THDtype wanted = THDtype_computeDtype(predicate ? input->dtype : result);
    if (input->dtype == wanted) {
        THTensor_retain(input);
        return input;
    }
    return THTensor_newCast(input, wanted, false);
}

/* dst = op(src); dst has the result dtype and src's shape.  Runs on the
 * worker threads for large tensors; nothing here can fail after
 * THIter_initOperands. */
static int
run_kernel(THUnaryOp op, THTensor *dst, THTensor *src,
           const THUnaryArgs *args, THDtype result)
{
    THIterOperand operands[2] = {THIterOperand_fromTensor(dst),
                                 THIterOperand_fromTensor(src)};
    THIter iter;
    if (THIter_initOperands(&iter, 2, operands, dst->ndim, dst->sizes) < 0) {
        return -1;
    }
    if (op_info[op].rule == TH_UNARY_PREDICATE
        && !THDtype_isFloating(src->dtype)) {
        bool value = predicate_integer_value[op];
        THIter_runParallel(&iter, fill_bool_loop, &value, TH_PARALLEL_GRAIN);
        return 0;
    }
    /* the result's range: a float16 nan_to_num saturates at 65504 */
    THUnaryParams params = loop_params(args, result);
    THIter_runParallel(&iter, unary_loops[op][src->dtype], &params,
                       TH_PARALLEL_GRAIN);
    return 0;
}

THTensor *
THTensor_newUnary(THUnaryOp op, THTensor *input, const THUnaryArgs *args)
{
    THDtype result = input->dtype;
    if (THUnary_resultType(op, input->dtype, args, &result) < 0) {
        return NULL;
    }
    if (is_plain_copy(op, input->dtype)) {
        return THTensor_newClone(input);
    }
    bool predicate = op_info[op].rule == TH_UNARY_PREDICATE;
    THTensor *src = new_kernel_input(input, result, predicate);
    if (src == NULL) {
        return NULL;
    }
    THDtype computed = THDtype_computeDtype(result);
    THTensor *dst;
    if (src != input && src->dtype == computed) {
        /* a fresh converted copy: compute in place in it */
        THTensor_retain(src);
        dst = src;
    }
    else {
        dst = THTensor_newEmptyLike(input, computed);
    }
    if (dst != NULL && run_kernel(op, dst, src, args, result) < 0) {
        THTensor_release(dst);
        dst = NULL;
    }
    THTensor_release(src);
    /* a float16 or bfloat16 result, computed in float32, rounded once */
    return THTensor_convertOwned(&dst, result) < 0 ? NULL : dst;
}

/* ---- out= and in-place -------------------------------------------------- */

static int
check_same_shape(THUnaryOp op, const THTensor *out, const THTensor *input)
{
    bool same = out->ndim == input->ndim;
    for (int d = 0; same && d < out->ndim; d++) {
        same = out->sizes[d] == input->sizes[d];
    }
    if (same) {
        return 0;
    }
    char want[256], got[256];
    THTensor_formatSizes(want, sizeof(want), input->ndim, input->sizes);
    THTensor_formatSizes(got, sizeof(got), out->ndim, out->sizes);
    return THError_set(TH_ERR_RUNTIME,
                       "%s(): the out tensor has shape %s but the result has "
                       "shape %s",
                       op_info[op].name, got, want);
}

/* Refuses an out that cannot receive the result; see Note [Unary dtype
 * rules] for the dtype part. */
static int
check_out(THUnaryOp op, const THTensor *out, const THTensor *input,
          THDtype result)
{
    if (check_same_shape(op, out, input) < 0) {
        return -1;
    }
    const char *result_name = THDtype_scalarTypeName(result);
    const char *out_name = THDtype_scalarTypeName(out->dtype);
    if (op_info[op].rule == TH_UNARY_PREDICATE && out->dtype != TH_Bool) {
        return THError_set(TH_ERR_RUNTIME,
                           "%s does not support non-boolean outputs.",
                           op_info[op].name);
    }
    if (is_plain_copy(op, input->dtype) && op_info[op].rule
        == TH_UNARY_ROUNDING && out->dtype != result) {
        return THError_set(TH_ERR_RUNTIME,
                           "Found dtype %s but expected %s", out_name,
                           result_name);
    }
    if (!can_cast(result, out->dtype)) {
        return THError_set(TH_ERR_RUNTIME,
                           "result type %s can't be cast to the desired "
                           "output type %s",
                           result_name, out_name);
    }
    if (THTensor_checkWritable(out) < 0) {
        return -1;
    }
    return THTensor_checkNoInternalOverlap(out);
}

/* out = op(src) through a temporary of the result dtype, then copied (and
 * converted) into out; THTensor_copy bumps out's version. */
static int
unary_through_temporary(THUnaryOp op, THTensor *out, THTensor *src,
                        THDtype result, const THUnaryArgs *args)
{
    THTensor *tmp = THTensor_newEmptyLike(src, THDtype_computeDtype(result));
    if (tmp == NULL) {
        return -1;
    }
    int status = run_kernel(op, tmp, src, args, result);
    if (status == 0) {
        status = THTensor_copy(out, tmp);
    }
    THTensor_release(tmp);
    return status;
}

int
THTensor_unaryOut(THUnaryOp op, THTensor *out, THTensor *input,
                  const THUnaryArgs *args)
{
    THDtype result = input->dtype;
    if (THUnary_resultType(op, input->dtype, args, &result) < 0
        || check_out(op, out, input, result) < 0) {
        return -1;
    }
    if (is_plain_copy(op, input->dtype)) {
        return THTensor_copy(out, input);
    }
    bool predicate = op_info[op].rule == TH_UNARY_PREDICATE;
    THTensor *src = new_kernel_input(input, result, predicate);
    if (src == NULL) {
        return -1;
    }
    int status;
    if (out->dtype != THDtype_computeDtype(result)
        || THTensor_overlapsPartially(out, src)) {
        status = unary_through_temporary(op, out, src, result, args);
    }
    else {
        status = run_kernel(op, out, src, args, result);
        if (status == 0) {
            THTensor_bumpVersion(out);
        }
    }
    THTensor_release(src);
    return status;
}
