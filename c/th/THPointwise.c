/*
 * THPointwise.c -- elementwise operators: the inner loops (generated from
 * the dtype X-macros), type promotion, and the prepare/execute/finish
 * driver described in THPointwise.h.
 */
#include "THPointwise.h"

#include "THFormulas.h"
#include "THParallel.h"
#include "THStream.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* ---- dtype categories, scalar helpers, the formulas and which dtypes each
 * operator has loops for (TH_POINTWISE_*_OPS): THPointwiseFormulas.h,
 * through THFormulas.h ---------------------------------------------------- */

#define TH_IF_0(...)
#define TH_IF_1(...) __VA_ARGS__
/* Expands to the rest of the arguments when flag is 1, to nothing when 0. */
#define TH_WHEN(flag, ...) TH_CAT(TH_IF_, flag)(__VA_ARGS__)

#define TH_TYPE_SAME(ctype) ctype
#define TH_TYPE_BOOLEAN(ctype) bool

/* ---- the loops ---------------------------------------------------------------
 * loop(data, strides, n, ctx) with data[0] the output; ctx points at the
 * plan's parameter (alpha) in the compute dtype.  Each loop has plain
 * indexed fast paths, which GCC vectorises: all contiguous, and one input a
 * scalar (stride 0, a number or a broadcast dim); then the general strided
 * path. */
#define TH_BINARY_LOOP(OP, Name, ctype, TYPE)                                \
    static void OP##_##Name(char **data, const int64_t *strides, int64_t n, \
                            void *ctx)                                       \
    {                                                                        \
        typedef TH_TYPE_##TYPE(ctype) out_t;                                 \
        const ctype P = *(const ctype *)ctx;                                 \
        (void)P;                                                             \
        out_t *o = (out_t *)data[0];                                         \
        const ctype *x = (const ctype *)data[1];                             \
        const ctype *y = (const ctype *)data[2];                             \
        if (strides[0] == sizeof(out_t)) {                                   \
            if (strides[1] == sizeof(ctype) && strides[2] == sizeof(ctype)) { \
                for (int64_t k = 0; k < n; k++) {                            \
                    o[k] = EXPR_##OP(Name, ctype, x[k], y[k], P);            \
                }                                                            \
                return;                                                      \
            }                                                                \
            if (strides[1] == sizeof(ctype) && strides[2] == 0) {            \
                const ctype yv = *y;                                         \
                for (int64_t k = 0; k < n; k++) {                            \
                    o[k] = EXPR_##OP(Name, ctype, x[k], yv, P);              \
                }                                                            \
                return;                                                      \
            }                                                                \
            if (strides[1] == 0 && strides[2] == sizeof(ctype)) {            \
                const ctype xv = *x;                                         \
                for (int64_t k = 0; k < n; k++) {                            \
                    o[k] = EXPR_##OP(Name, ctype, xv, y[k], P);              \
                }                                                            \
                return;                                                      \
            }                                                                \
        }                                                                    \
        for (int64_t k = 0; k < n; k++) {                                    \
            const ctype a = *(const ctype *)(data[1] + k * strides[1]);      \
            const ctype b = *(const ctype *)(data[2] + k * strides[2]);      \
            *(out_t *)(data[0] + k * strides[0]) =                           \
                EXPR_##OP(Name, ctype, a, b, P);                             \
        }                                                                    \
    }

#define TH_UNARY_LOOP(OP, Name, ctype, TYPE)                                 \
    static void OP##_##Name(char **data, const int64_t *strides, int64_t n, \
                            void *ctx)                                       \
    {                                                                        \
        typedef TH_TYPE_##TYPE(ctype) out_t;                                 \
        (void)ctx;                                                           \
        if (strides[0] == sizeof(out_t) && strides[1] == sizeof(ctype)) {    \
            out_t *o = (out_t *)data[0];                                     \
            const ctype *x = (const ctype *)data[1];                         \
            for (int64_t k = 0; k < n; k++) {                                \
                o[k] = EXPR_##OP(Name, ctype, x[k]);                         \
            }                                                                \
            return;                                                          \
        }                                                                    \
        for (int64_t k = 0; k < n; k++) {                                    \
            const ctype a = *(const ctype *)(data[1] + k * strides[1]);      \
            *(out_t *)(data[0] + k * strides[0]) = EXPR_##OP(Name, ctype, a); \
        }                                                                    \
    }

/* Note [Fused streaming loops]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * A large result is written with streaming stores (Note [Streaming stores]
 * in THStream.h).  Computing a block into L1 with the ordinary loop and then
 * copying it out keeps every operator on one path, but splits the work into
 * phases: while 8 KB of streaming stores drain, no load of the inputs is in
 * flight.  One thread's c = a + b over 16M floats in C (NumPy's buffers,
 * 16 bytes past a line; thread CPU time, alternated with NumPy's
 * add(out=) in one process, median of 15-25 per-round ratios, load 3-7;
 * tools/memory_bandwidth.py): block and copy 1.04-1.08x NumPy's GB/s (2 KB
 * blocks 0.91x, 512 B ones 0.78x; prefetching the next block's inputs
 * during the copy 1.06x), a loop that adds 32 floats into a local array
 * and streams it out with 16-byte stores 1.20-1.25x, the same with 32-byte
 * stores 1.26-1.30x, 64-byte ones 1.20-1.22x.  ember's add(out=) went from
 * 1.03x to 1.20-1.22x with the loops below.  (32-byte stores would need a
 * second, AVX build of every loop, picked at run time.)
 *
 * So the binary and unary operators also have a fused loop, OP_Name_streamed,
 * for the flat layouts (a contiguous result, each input contiguous or one
 * number -- every layout that streams, but two numbers): it computes
 * TH_STREAM_CHUNK bytes of results with the operator's formula into a local
 * array and hands it to THStream_storeChunk, which GCC inlines, keeping the
 * array in registers; loads and stores interleave as in a plain loop.  The
 * formula and its order are the ordinary loop's, so the results are the
 * same bit for bit.  The loop returns false for any other layout, and the
 * driver then takes the block path (as it does for the ternary operators).
 * The driver runs the ordinary loop on the elements before the result's
 * first TH_STREAM_ALIGN boundary and after its last whole chunk. */
#define TH_STREAM_PER_CHUNK(out_t) ((int)(TH_STREAM_CHUNK / sizeof(out_t)))
/* The body of a fused loop over o[0, n), n a multiple of the chunk: `value`
 * is the result at index i.  The inner loop's constant trip count lets GCC
 * unroll it and keep `chunk` in registers. */
#define TH_STREAM_CHUNKS(out_t, value)                                       \
    for (int64_t k = 0; k < n; k += TH_STREAM_PER_CHUNK(out_t)) {            \
        out_t chunk[TH_STREAM_PER_CHUNK(out_t)];                             \
        for (int j = 0; j < TH_STREAM_PER_CHUNK(out_t); j++) {               \
            const int64_t i = k + j;                                         \
            chunk[j] = (value);                                              \
        }                                                                    \
        THStream_storeChunk(o + k, chunk);                                   \
    }                                                                        \
    return true;
#define TH_BINARY_STREAM_LOOP(OP, Name, ctype, TYPE)                         \
    static bool OP##_##Name##_streamed(char **data, const int64_t *strides,  \
                                       int64_t n, void *ctx)                 \
    {                                                                        \
        typedef TH_TYPE_##TYPE(ctype) out_t;                                 \
        const ctype P = *(const ctype *)ctx;                                 \
        (void)P;                                                             \
        out_t *o = (out_t *)data[0];                                         \
        const ctype *x = (const ctype *)data[1];                             \
        const ctype *y = (const ctype *)data[2];                             \
        if (strides[0] != sizeof(out_t)) {                                   \
            return false;                                                    \
        }                                                                    \
        if (strides[1] == sizeof(ctype) && strides[2] == sizeof(ctype)) {    \
            TH_STREAM_CHUNKS(out_t, EXPR_##OP(Name, ctype, x[i], y[i], P))   \
        }                                                                    \
        if (strides[1] == sizeof(ctype) && strides[2] == 0) {                \
            const ctype yv = *y;                                             \
            TH_STREAM_CHUNKS(out_t, EXPR_##OP(Name, ctype, x[i], yv, P))     \
        }                                                                    \
        if (strides[1] == 0 && strides[2] == sizeof(ctype)) {                \
            const ctype xv = *x;                                             \
            TH_STREAM_CHUNKS(out_t, EXPR_##OP(Name, ctype, xv, y[i], P))     \
        }                                                                    \
        return false;                                                        \
    }
#define TH_UNARY_STREAM_LOOP(OP, Name, ctype, TYPE)                          \
    static bool OP##_##Name##_streamed(char **data, const int64_t *strides,  \
                                       int64_t n, void *ctx)                 \
    {                                                                        \
        typedef TH_TYPE_##TYPE(ctype) out_t;                                 \
        (void)ctx;                                                           \
        out_t *o = (out_t *)data[0];                                         \
        const ctype *x = (const ctype *)data[1];                             \
        if (strides[0] != sizeof(out_t) || strides[1] != sizeof(ctype)) {    \
            return false;                                                    \
        }                                                                    \
        TH_STREAM_CHUNKS(out_t, EXPR_##OP(Name, ctype, x[i]))                \
    }

/* Note [Vectorised selects]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~
 * where(c, x, y) picks one of two values per element, which GCC turns into
 * a vector blend only when (1) both values are loaded before the pick:
 * `c[k] ? x[k] : y[k]` loads one of them only, as C requires, so the loop
 * keeps a branch -- a mispredicted one half the time on a random mask,
 * ~3 ns an element, 20x the comparison that made the mask; and (2) the
 * condition is read as uint8_t: GCC 12 finds no vector type for a _Bool
 * load.  So the ternary loops load every operand into a local first, and
 * where's condition is read as the byte a bool is stored in (0 or 1).
 * The fast paths are the contiguous first input with each of the other two
 * contiguous or a scalar (clamp(x, 0, 1), where(c, grad, 0.0)). */
#define TH_TERNARY_FIRST_SAME(ctype) ctype
#define TH_TERNARY_FIRST_BOOLEAN(ctype) uint8_t
#define TH_TERNARY_FAST_PATH(OP, Name, ctype, y_at, z_at)                    \
    for (int64_t k = 0; k < n; k++) {                                        \
        const in0_t a = x[k];                                                \
        const ctype b = y_at, c = z_at;                                      \
        o[k] = EXPR_##OP(Name, ctype, a, b, c, P);                           \
    }                                                                        \
    return;
#define TH_TERNARY_LOOP(OP, Name, ctype, TYPE)                               \
    static void OP##_##Name(char **data, const int64_t *strides, int64_t n, \
                            void *ctx)                                       \
    {                                                                        \
        typedef TH_TERNARY_FIRST_##TYPE(ctype) in0_t;                        \
        const ctype P = *(const ctype *)ctx;                                 \
        (void)P;                                                             \
        ctype *o = (ctype *)data[0];                                         \
        const in0_t *x = (const in0_t *)data[1];                             \
        const ctype *y = (const ctype *)data[2];                             \
        const ctype *z = (const ctype *)data[3];                             \
        if (strides[0] == sizeof(ctype) && strides[1] == sizeof(in0_t)) {    \
            const bool y_dense = strides[2] == sizeof(ctype);                \
            const bool z_dense = strides[3] == sizeof(ctype);                \
            if (y_dense && z_dense) {                                        \
                TH_TERNARY_FAST_PATH(OP, Name, ctype, y[k], z[k])            \
            }                                                                \
            if (y_dense && strides[3] == 0) {                                \
                const ctype zv = *z;                                         \
                TH_TERNARY_FAST_PATH(OP, Name, ctype, y[k], zv)              \
            }                                                                \
            if (strides[2] == 0 && z_dense) {                                \
                const ctype yv = *y;                                         \
                TH_TERNARY_FAST_PATH(OP, Name, ctype, yv, z[k])              \
            }                                                                \
            if (strides[2] == 0 && strides[3] == 0) {                        \
                const ctype yv = *y, zv = *z;                                \
                TH_TERNARY_FAST_PATH(OP, Name, ctype, yv, zv)                \
            }                                                                \
        }                                                                    \
        for (int64_t k = 0; k < n; k++) {                                    \
            const in0_t a = *(const in0_t *)(data[1] + k * strides[1]);      \
            const ctype b = *(const ctype *)(data[2] + k * strides[2]);      \
            const ctype c = *(const ctype *)(data[3] + k * strides[3]);      \
            *(ctype *)(data[0] + k * strides[0]) =                           \
                EXPR_##OP(Name, ctype, a, b, c, P);                          \
        }                                                                    \
    }

/* One loop per (operator, dtype of a category it supports). */
#define TH_GEN_LOOP(LOOP, OP, B, I, F, TYPE, Name, ctype)                    \
    TH_WHEN(TH_KIND_##Name(B, I, F), LOOP(OP, Name, ctype, TYPE))
#define TH_GEN_FOR_DTYPE(info, Name, ctype, py) \
    TH_APPLY(TH_GEN_LOOP, TH_UNPAREN info, Name, ctype)
#define TH_GEN_BINARY(OP, B, I, F, TYPE) \
    TH_FORALL_ARITH_DTYPES_INNER(TH_GEN_FOR_DTYPE, (TH_BINARY_LOOP, OP, B, I, F, TYPE))
#define TH_GEN_UNARY(OP, B, I, F, TYPE) \
    TH_FORALL_ARITH_DTYPES_INNER(TH_GEN_FOR_DTYPE, (TH_UNARY_LOOP, OP, B, I, F, TYPE))
#define TH_GEN_TERNARY(OP, B, I, F, TYPE) \
    TH_FORALL_ARITH_DTYPES_INNER(TH_GEN_FOR_DTYPE, (TH_TERNARY_LOOP, OP, B, I, F, TYPE))
TH_POINTWISE_BINARY_OPS(TH_GEN_BINARY)
TH_POINTWISE_UNARY_OPS(TH_GEN_UNARY)
TH_POINTWISE_TERNARY_OPS(TH_GEN_TERNARY)
#define TH_GEN_BINARY_STREAMED(OP, B, I, F, TYPE)                            \
    TH_FORALL_ARITH_DTYPES_INNER(TH_GEN_FOR_DTYPE,                           \
                                 (TH_BINARY_STREAM_LOOP, OP, B, I, F, TYPE))
#define TH_GEN_UNARY_STREAMED(OP, B, I, F, TYPE)                             \
    TH_FORALL_ARITH_DTYPES_INNER(TH_GEN_FOR_DTYPE,                           \
                                 (TH_UNARY_STREAM_LOOP, OP, B, I, F, TYPE))
TH_POINTWISE_BINARY_OPS(TH_GEN_BINARY_STREAMED)
TH_POINTWISE_UNARY_OPS(TH_GEN_UNARY_STREAMED)

/* loops[op][compute dtype]; NULL where the operator has no loop. */
#define TH_LOOP_ENTRY(OP, B, I, F, Name)                                     \
    TH_WHEN(TH_KIND_##Name(B, I, F), [TH_OP_##OP][TH_##Name] = OP##_##Name,)
#define TH_ENTRY_FOR_DTYPE(info, Name, ctype, py) \
    TH_APPLY(TH_LOOP_ENTRY, TH_UNPAREN info, Name)
#define TH_LOOP_ROW(OP, B, I, F, TYPE) \
    TH_FORALL_ARITH_DTYPES_INNER(TH_ENTRY_FOR_DTYPE, (OP, B, I, F))
static const THLoop loops[TH_NUM_POINTWISE_OPS][TH_NUM_DTYPES] = {
    TH_POINTWISE_BINARY_OPS(TH_LOOP_ROW)
    TH_POINTWISE_UNARY_OPS(TH_LOOP_ROW)
    TH_POINTWISE_TERNARY_OPS(TH_LOOP_ROW)
};

/* stream_loops[op][compute dtype]: the fused loops of Note [Fused
 * streaming loops]; NULL for the ternary operators. */
#define TH_STREAM_LOOP_ENTRY(OP, B, I, F, Name)                              \
    TH_WHEN(TH_KIND_##Name(B, I, F),                                         \
            [TH_OP_##OP][TH_##Name] = OP##_##Name##_streamed,)
#define TH_STREAM_ENTRY_FOR_DTYPE(info, Name, ctype, py) \
    TH_APPLY(TH_STREAM_LOOP_ENTRY, TH_UNPAREN info, Name)
#define TH_STREAM_LOOP_ROW(OP, B, I, F, TYPE) \
    TH_FORALL_ARITH_DTYPES_INNER(TH_STREAM_ENTRY_FOR_DTYPE, (OP, B, I, F))
static const THStreamLoop stream_loops[TH_NUM_POINTWISE_OPS][TH_NUM_DTYPES] = {
    TH_POINTWISE_BINARY_OPS(TH_STREAM_LOOP_ROW)
    TH_POINTWISE_UNARY_OPS(TH_STREAM_LOOP_ROW)
};

/* Whether the operator's output is bool whatever the inputs. */
#define TH_BOOL_OUTPUT_SAME 0
#define TH_BOOL_OUTPUT_BOOLEAN 1
#define TH_BOOL_OUTPUT_ENTRY(OP, B, I, F, TYPE) \
    [TH_OP_##OP] = TH_CAT(TH_BOOL_OUTPUT_, TYPE),
static const bool bool_output[TH_NUM_POINTWISE_OPS] = {
    TH_POINTWISE_BINARY_OPS(TH_BOOL_OUTPUT_ENTRY)
    TH_POINTWISE_UNARY_OPS(TH_BOOL_OUTPUT_ENTRY)
};

/* Sets *found when an element is 0 (the integer-division check). */
#define TH_DEFINE_FIND_ZERO(Name, ctype, py)                                  \
    static void find_zero_##Name(char **data, const int64_t *strides,         \
                                 int64_t n, void *ctx)                        \
    {                                                                         \
        bool *found = ctx;                                                    \
        for (int64_t k = 0; k < n; k++) {                                     \
            if (*(const ctype *)(data[0] + k * strides[0]) == 0) {            \
                *found = true;                                                \
            }                                                                 \
        }                                                                     \
    }
TH_FORALL_ARITH_DTYPES(TH_DEFINE_FIND_ZERO)
#define TH_FIND_ZERO_ENTRY(Name, ctype, py) find_zero_##Name,
static const THLoop find_zero_loops[TH_NUM_DTYPES] = {
    TH_FORALL_ARITH_DTYPES(TH_FIND_ZERO_ENTRY)
};

/* ---- names, numbers and single elements --------------------------------- */

static const char *const op_names[TH_NUM_POINTWISE_OPS] = {
#define TH_OP_NAME(NAME, name, arity) name,
    TH_FORALL_POINTWISE_OPS(TH_OP_NAME)
#undef TH_OP_NAME
};

static const int op_arity[TH_NUM_POINTWISE_OPS] = {
#define TH_OP_ARITY(NAME, name, arity) arity,
    TH_FORALL_POINTWISE_OPS(TH_OP_ARITY)
#undef TH_OP_ARITY
};

int
THPointwise_arity(THPointwiseOp op)
{
    return op_arity[op];
}

/* Writes a number converted to dtype at `buffer`.  Promotion never makes a
 * floating number meet an integer compute dtype, so the conversion is
 * defined (integers wrap into narrower integer dtypes, as in PyTorch). */
#define TH_STORE_NUMBER(Name, ctype, py)                                     \
    case TH_##Name: {                                                        \
        ctype v = TH_SCALAR_AS(ctype, number);                               \
        memcpy(buffer, &v, sizeof(v));                                       \
        break;                                                               \
    }

static void
store_number(THScalar number, THDtype dtype, void *buffer)
{
    switch (dtype) {
        TH_FORALL_ARITH_DTYPES(TH_STORE_NUMBER)
    default:
        break;
    }
}
#undef TH_STORE_NUMBER

/* The value of a one-element tensor, exactly, as a bool, int64 or double. */
#define TH_LOAD_ELEMENT(Name, ctype, py)                                     \
    case TH_##Name: {                                                        \
        ctype v;                                                             \
        memcpy(&v, p, sizeof(v));                                            \
        return TH_KIND_##Name(THScalar_fromBool(v),                          \
                              THScalar_fromInt((int64_t)v),                  \
                              THScalar_fromDouble(                           \
                                  (double)TH_TO_FLOAT_##Name(v)));           \
    }

static THScalar
load_element(const THTensor *tensor)
{
    const char *p = THTensor_data(tensor);
    switch (tensor->dtype) {
        TH_FORALL_DTYPES(TH_LOAD_ELEMENT)
    default:
        break;
    }
    return THScalar_fromInt(0);
}
#undef TH_LOAD_ELEMENT

/* ---- type promotion ---------------------------------------------------------- */

/* -1 stands for "no input of this kind yet" (PyTorch's Undefined). */
static int
promote_defined(int a, THDtype b)
{
    return a < 0 ? (int)b : (int)THDtype_promote((THDtype)a, b);
}

/* PyTorch's combine_categories: the lower-priority result only counts
 * when it is of a higher category than the higher-priority one. */
static int
combine_categories(int higher, int lower)
{
    if (higher < 0) {
        return lower;
    }
    if (lower < 0 || THDtype_isFloating((THDtype)higher)) {
        return higher;
    }
    if (higher == TH_Bool || THDtype_isFloating((THDtype)lower)) {
        return (int)THDtype_promote((THDtype)higher, (THDtype)lower);
    }
    return higher;
}

static THDtype
number_dtype(THScalar number, THDtype default_float)
{
    return number.dtype == TH_Float64 ? default_float : number.dtype;
}

THDtype
THPointwise_resultType(int nargs, const THPointwiseArg *args,
                       THDtype default_float)
{
    int dims = -1, zero_dim = -1, numbers = -1;
    for (int k = 0; k < nargs; k++) {
        const THTensor *t = args[k].tensor;
        if (t == NULL) {
            numbers = promote_defined(
                numbers, number_dtype(args[k].number, default_float));
        }
        else if (t->ndim > 0) {
            dims = promote_defined(dims, t->dtype);
        }
        else {
            zero_dim = promote_defined(zero_dim, t->dtype);
        }
    }
    int result =
        combine_categories(dims, combine_categories(zero_dim, numbers));
    return result < 0 ? default_float : (THDtype)result;
}

bool
THPointwise_canCast(THDtype from, THDtype to)
{
    if (THDtype_isFloating(from) && THDtype_isIntegral(to, false)) {
        return false;
    }
    return from == TH_Bool || to != TH_Bool;
}

/* ---- checks ------------------------------------------------------------------ */

static THDtype
arg_dtype(const THPointwiseArg *arg)
{
    return arg->tensor != NULL ? arg->tensor->dtype : arg->number.dtype;
}

static int
arg_ndim(const THPointwiseArg *arg)
{
    return arg->tensor != NULL ? arg->tensor->ndim : 0;
}

static const int64_t *
arg_sizes(const THPointwiseArg *arg)
{
    return arg->tensor != NULL ? arg->tensor->sizes : NULL;
}

/* PyTorch's own messages for bool inputs of - and unary -. */
static int
check_bool_arithmetic(THPointwiseOp op, const THPointwiseArg *args)
{
    if (op == TH_OP_SUB || op == TH_OP_SUB_ALPHA) {
        bool a = arg_dtype(&args[0]) == TH_Bool;
        bool b = arg_dtype(&args[1]) == TH_Bool;
        if (a && b) {
            return THError_set(TH_ERR_RUNTIME,
                               "Subtraction, the `-` operator, with two bool "
                               "tensors is not supported. Use the `^` or "
                               "`logical_xor()` operator instead.");
        }
        if (a || b) {
            return THError_set(TH_ERR_RUNTIME,
                               "Subtraction, the `-` operator, with a bool "
                               "tensor is not supported. If you are trying to "
                               "invert a mask, use the `~` or `logical_not()` "
                               "operator instead.");
        }
    }
    if (op == TH_OP_NEG && arg_dtype(&args[0]) == TH_Bool) {
        return THError_set(TH_ERR_RUNTIME,
                           "Negation, the `-` operator, on a bool tensor is "
                           "not supported. If you are trying to invert a "
                           "mask, use the `~` or `logical_not()` operator "
                           "instead.");
    }
    return 0;
}

static int
check_alpha(THScalar alpha, THDtype compute)
{
    if (alpha.dtype == TH_Bool && compute != TH_Bool) {
        return THError_set(TH_ERR_RUNTIME, "Boolean alpha only supported for "
                                           "Boolean results.");
    }
    if (alpha.dtype == TH_Float64 && !THDtype_isFloating(compute)) {
        return THError_set(TH_ERR_RUNTIME,
                           "For integral input tensors, argument alpha must "
                           "not be a floating point number.");
    }
    return 0;
}

static int
check_pow_exponent(const THPointwiseArg *args)
{
    const THPointwiseArg *base = &args[0], *exponent = &args[1];
    if (base->tensor != NULL && THDtype_isIntegral(base->tensor->dtype, true)
        && exponent->tensor == NULL && exponent->number.dtype == TH_Int64
        && exponent->number.value.i < 0) {
        return THError_set(TH_ERR_RUNTIME, "Integers to negative integer "
                                           "powers are not allowed.");
    }
    return 0;
}

/* Note [Numbers that must fit]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * Arithmetic wraps a number into the compute dtype as C casts do
 * (int8 tensor + 300 adds 44, as in PyTorch).  But where a number is a
 * value the result may hold rather than an operand of arithmetic, PyTorch
 * converts it with an overflow check: where's values, clamp's bounds
 * (maximum/minimum take numbers only as clamp's), alpha, and an integer
 * pow's exponent.  int8.clamp(300) is then "value cannot be converted to
 * type int8 without overflow", never a bound of 44. */
static bool
number_must_fit(THPointwiseOp op, const THPointwiseArg *args, int k,
                THDtype compute)
{
    switch (op) {
    case TH_OP_WHERE: return k > 0;
    case TH_OP_CLAMP:
    case TH_OP_MAXIMUM:
    case TH_OP_MINIMUM: return true;
    case TH_OP_POW:
        return k == 1 && args[0].tensor != NULL
               && THDtype_isIntegral(compute, true);
    default: return false;
    }
}

static int
check_numbers_fit(THPointwiseOp op, const THPointwiseArg *args,
                  const THPointwiseOptions *options, THDtype compute)
{
    for (int k = 0; k < op_arity[op]; k++) {
        if (args[k].tensor == NULL && number_must_fit(op, args, k, compute)
            && THScalar_checkFits(args[k].number, compute) < 0) {
            return -1;
        }
    }
    if (op == TH_OP_ADD_ALPHA || op == TH_OP_SUB_ALPHA) {
        return THScalar_checkFits(options->alpha, compute);
    }
    return 0;
}

static bool
is_integer_division(THPointwiseOp op, THDtype compute)
{
    return (op == TH_OP_DIV_TRUNC || op == TH_OP_DIV_FLOOR
            || op == TH_OP_REMAINDER || op == TH_OP_FMOD)
           && THDtype_isIntegral(compute, true);
}

/* lerp computes in its input's dtype: `end`, and a `weight` tensor with
 * dims, must have it (PyTorch's messages); integers have no kernel. */
static int
check_lerp(const THPointwiseArg *args)
{
    THDtype dtype = arg_dtype(&args[0]);
    static const char *const what[] = {NULL, "end", "weight"};
    for (int k = 1; k < 3; k++) {
        const THTensor *t = args[k].tensor;
        if (t != NULL && t->dtype != dtype && (k == 1 || t->ndim > 0)) {
            return THError_set(TH_ERR_RUNTIME,
                               "expected dtype %s for `%s` but got dtype %s",
                               THDtype_cppTypeName(dtype), what[k],
                               THDtype_cppTypeName(t->dtype));
        }
    }
    if (!THDtype_isFloating(dtype)) {
        return THError_set(TH_ERR_RUNTIME,
                           "\"lerp_kernel_%s\" not implemented for '%s'",
                           args[2].tensor != NULL ? "tensor" : "scalar",
                           THDtype_scalarTypeName(dtype));
    }
    return 0;
}

/* PyTorch refuses two integer (or bool) divisors, whatever `input` is. */
static int
check_addcdiv(const THPointwiseArg *args)
{
    if (THDtype_isFloating(arg_dtype(&args[1]))
        || THDtype_isFloating(arg_dtype(&args[2]))) {
        return 0;
    }
    return THError_set(
        TH_ERR_RUNTIME,
        "Integer division with addcdiv is no longer supported, and in a "
        "future  release addcdiv will perform a true division of tensor1 and "
        "tensor2. The historic addcdiv behavior can be implemented as (input "
        "+ value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for "
        "integer inputs and as (input + value * tensor1 / tensor2) for float "
        "inputs. The future addcdiv behavior is just the latter "
        "implementation: (input + value * tensor1 / tensor2), for all "
        "dtypes.");
}

/* Operators whose integer (and bool) inputs compute in the default float
 * dtype. */
static bool
promotes_to_float(THPointwiseOp op)
{
    return op == TH_OP_DIV || op == TH_OP_ATAN2 || op == TH_OP_COPYSIGN
           || op == TH_OP_XLOGY;
}

/* The compute dtype: the inputs' result type, floating for true division
 * and the promotes_to_float operators, bool for where's condition (which
 * takes no part). */
static int
compute_dtype(THPointwiseOp op, const THPointwiseArg *args,
              const THPointwiseOptions *options, THDtype *out)
{
    int first = op == TH_OP_WHERE ? 1 : 0;
    int arity = op_arity[op];
    if (op == TH_OP_WHERE
        && (args[0].tensor == NULL || args[0].tensor->dtype != TH_Bool)) {
        return THError_set(TH_ERR_RUNTIME,
                           "where expected condition to be a boolean tensor, "
                           "but got a tensor with dtype %s",
                           THDtype_scalarTypeName(arg_dtype(&args[0])));
    }
    if (op == TH_OP_LERP && check_lerp(args) < 0) {
        return -1;
    }
    THDtype dtype = op == TH_OP_LERP
                        ? arg_dtype(&args[0])
                        : THPointwise_resultType(arity - first, args + first,
                                                 options->default_float);
    if (promotes_to_float(op) && !THDtype_isFloating(dtype)) {
        dtype = options->default_float;
    }
    if (op == TH_OP_ADDCDIV && check_addcdiv(args) < 0) {
        return -1;
    }
    if (check_bool_arithmetic(op, args) < 0) {
        return -1;
    }
    if ((op == TH_OP_ADD_ALPHA || op == TH_OP_SUB_ALPHA)
        && check_alpha(options->alpha, dtype) < 0) {
        return -1;
    }
    if (op == TH_OP_POW && check_pow_exponent(args) < 0) {
        return -1;
    }
    if (check_numbers_fit(op, args, options, dtype) < 0) {
        return -1;
    }
    if (loops[op][THDtype_computeDtype(dtype)] == NULL) {
        return THError_set(TH_ERR_RUNTIME, "\"%s\" not implemented for '%s'",
                           op_names[op], THDtype_scalarTypeName(dtype));
    }
    *out = dtype;
    return 0;
}

/* ---- memory overlap ------------------------------------------------------- */

/* ---- prepare --------------------------------------------------------------- */

static bool
same_shape(int ndim_a, const int64_t *a, int ndim_b, const int64_t *b)
{
    return ndim_a == ndim_b
           && (ndim_a == 0 || memcmp(a, b, sizeof(int64_t) * ndim_a) == 0);
}

/* Checks out= or the in-place self against the result. */
static int
check_output(const THTensor *out, int ndim, const int64_t *sizes,
             THDtype result_dtype)
{
    if (!same_shape(out->ndim, out->sizes, ndim, sizes)) {
        char have[256], want[256];
        return THError_set(TH_ERR_RUNTIME,
                           "output with shape %s doesn't match the broadcast "
                           "shape %s",
                           THTensor_formatSizes(have, sizeof(have), out->ndim,
                                        out->sizes),
                           THTensor_formatSizes(want, sizeof(want), ndim, sizes));
    }
    if (!THPointwise_canCast(result_dtype, out->dtype)) {
        return THError_set(TH_ERR_RUNTIME,
                           "result type %s can't be cast to the desired "
                           "output type %s",
                           THDtype_scalarTypeName(result_dtype),
                           THDtype_scalarTypeName(out->dtype));
    }
    if (THTensor_checkWritable(out) < 0 || THTensor_checkNoInternalOverlap(out) < 0) {
        return -1;
    }
    return 0;
}

/* Sets plan->result and plan->written.  The loop writes `written_dtype`
 * (the result dtype, or float32 for a half-precision result: Note
 * [Half-precision dtypes]); finish rounds a float32 `written` into the
 * result. */
static int
make_output(THPointwisePlan *plan, const THPointwiseArg *args, int arity,
            const THPointwiseOptions *options, int ndim,
            const int64_t *sizes, THDtype result_dtype,
            THDtype written_dtype)
{
    THTensor *out = options->inplace ? args[0].tensor : options->out;
    if (out != NULL) {
        if (check_output(out, ndim, sizes, result_dtype) < 0) {
            return -1;
        }
        THTensor_retain(out);
        plan->result = out;
        plan->bump_version = true;
        if (out->dtype == written_dtype) {
            THTensor_retain(out);
            plan->written = out;
            return 0;
        }
        /* Computed in the result type, then cast by finish. */
        plan->written = THTensor_newEmptyLike(out, written_dtype);
        return plan->written == NULL ? -1 : 0;
    }
    /* A new result is laid out like the first input of the result's shape
     * when that one is dense (Note [Preserving the layout]). */
    THTensor *model = NULL;
    for (int k = 0; k < arity && model == NULL; k++) {
        const THTensor *t = args[k].tensor;
        if (t != NULL && same_shape(t->ndim, t->sizes, ndim, sizes)
            && (t->is_contiguous || THTensor_isNonOverlappingAndDense(t))) {
            model = args[k].tensor;
        }
    }
    plan->result = model != NULL && !model->is_contiguous
                       ? THTensor_newEmptyLike(model, result_dtype)
                       : THTensor_newEmpty(ndim, sizes, result_dtype,
                                           TH_DEVICE_CPU);
    if (plan->result == NULL) {
        return -1;
    }
    if (written_dtype != result_dtype) {
        plan->written = THTensor_newEmptyLike(plan->result, written_dtype);
        return plan->written == NULL ? -1 : 0;
    }
    THTensor_retain(plan->result);
    plan->written = plan->result;
    return 0;
}

static const int64_t zero_strides[TH_MAX_DIMS];

/* Sets up input k (operand k + 1) in the compute dtype: numbers and
 * one-element tensors go into the plan's buffer (a broadcast scalar, and
 * no overlap with the output possible); other tensors of another dtype, or
 * partially overlapping the output, are copied first. */
static int
make_input(THPointwisePlan *plan, int k, const THPointwiseArg *arg,
           THDtype dtype, THIterOperand *operand)
{
    THTensor *t = arg->tensor;
    if (t == NULL || t->numel == 1) {
        THScalar value = t == NULL ? arg->number : load_element(t);
        store_number(value, dtype, &plan->buffers[k]);
        operand->data = (char *)&plan->buffers[k];
        operand->ndim = t == NULL ? 0 : t->ndim;
        operand->sizes = t == NULL ? NULL : t->sizes;
        operand->strides = zero_strides;
        operand->itemsize = THDtype_itemsize(dtype);
        return 0;
    }
    if (t->dtype != dtype) {
        t = plan->temporaries[k] = THTensor_newCast(t, dtype, false);
    }
    else if (THTensor_overlapsPartially(plan->written, t)) {
        t = plan->temporaries[k] = THTensor_newClone(t);
    }
    if (t == NULL) {
        return -1;
    }
    *operand = THIterOperand_fromTensor(t);
    return 0;
}

/* True when every operand can be walked as one run: tensors laid out
 * exactly like the dense output, and buffers (stride 0). */
static bool
is_flat(const THTensor *written, int noperands, const THIterOperand *ops)
{
    if (!written->is_contiguous
        && !THTensor_isNonOverlappingAndDense(written)) {
        return false;
    }
    for (int k = 1; k < noperands; k++) {
        if (ops[k].strides == zero_strides) {
            continue;
        }
        if (ops[k].ndim != written->ndim
            || (written->ndim > 0
                && (memcmp(ops[k].sizes, written->sizes,
                           sizeof(int64_t) * written->ndim) != 0
                    || memcmp(ops[k].strides, written->strides,
                              sizeof(int64_t) * written->ndim) != 0))) {
            return false;
        }
    }
    return true;
}

static int
check_divisor(const THIterOperand *divisor, THDtype dtype)
{
    bool found = false;
    THIter iter;
    if (THIter_initOperands(&iter, 1, divisor, divisor->ndim,
                            divisor->sizes) < 0) {
        return -1;
    }
    THIter_run(&iter, find_zero_loops[dtype], &found);
    return found ? THError_set(TH_ERR_RUNTIME, "ZeroDivisionError") : 0;
}

static int
setup_iteration(THPointwisePlan *plan, THIterOperand *ops, int ndim,
                const int64_t *sizes)
{
    plan->numel = plan->written->numel;
    if (is_flat(plan->written, plan->noperands, ops)) {
        plan->flat = true;
        for (int k = 0; k < plan->noperands; k++) {
            plan->flat_data[k] = ops[k].data;
            plan->flat_strides[k] =
                ops[k].strides == zero_strides ? 0 : ops[k].itemsize;
        }
        return 0;
    }
    plan->flat = false;
    return THIter_initOperands(&plan->iter, plan->noperands, ops, ndim,
                               sizes);
}

static void
plan_init(THPointwisePlan *plan)
{
    plan->result = NULL;
    plan->written = NULL;
    plan->bump_version = false;
    plan->numel = 0;
    plan->param.i = 0;
    for (int k = 0; k <= TH_POINTWISE_MAX_INPUTS; k++) {
        plan->temporaries[k] = NULL;
    }
}

void
THPointwise_abandon(THPointwisePlan *plan)
{
    for (int k = 0; k <= TH_POINTWISE_MAX_INPUTS; k++) {
        THTensor_release(plan->temporaries[k]);
        plan->temporaries[k] = NULL;
    }
    THTensor_release(plan->written);
    THTensor_release(plan->result);
    plan->written = plan->result = NULL;
}

static int
prepare(THPointwisePlan *plan, THPointwiseOp op, const THPointwiseArg *args,
        const THPointwiseOptions *options)
{
    int arity = op_arity[op];
    THDtype dtype = TH_Bool;
    if (compute_dtype(op, args, options, &dtype) < 0) {
        return -1;
    }
    if (options->inplace && args[0].tensor == NULL) {
        return THError_set(TH_ERR_RUNTIME, "in-place operation on a number");
    }
    int ndim = 0;
    int64_t sizes[TH_MAX_DIMS];
    for (int k = 0; k < arity; k++) {
        if (THIter_broadcastShape(ndim, sizes, arg_ndim(&args[k]),
                                  arg_sizes(&args[k]), &ndim, sizes) < 0) {
            return -1;
        }
    }
    THDtype result_dtype = bool_output[op] ? TH_Bool : dtype;
    /* the loop's dtype: float32 for float16 and bfloat16 */
    dtype = THDtype_computeDtype(dtype);
    if (make_output(plan, args, arity, options, ndim, sizes, result_dtype,
                    THDtype_computeDtype(result_dtype))
        < 0) {
        return -1;
    }
    THIterOperand ops[TH_POINTWISE_MAX_INPUTS + 1];
    ops[0] = THIterOperand_fromTensor(plan->written);
    for (int k = 0; k < arity; k++) {
        THDtype input_dtype = (op == TH_OP_WHERE && k == 0) ? TH_Bool : dtype;
        if (make_input(plan, k, &args[k], input_dtype, &ops[k + 1]) < 0) {
            return -1;
        }
    }
    plan->noperands = arity + 1;
    plan->loop = loops[op][dtype];
    plan->stream_loop = stream_loops[op][dtype];
    if (op == TH_OP_ADD_ALPHA || op == TH_OP_SUB_ALPHA || op == TH_OP_ADDCMUL
        || op == TH_OP_ADDCDIV) {
        store_number(options->alpha, dtype, &plan->param);
    }
    if (is_integer_division(op, dtype) && check_divisor(&ops[2], dtype) < 0) {
        return -1;
    }
    return setup_iteration(plan, ops, ndim, sizes);
}

int
THPointwise_prepare(THPointwisePlan *plan, THPointwiseOp op,
                    const THPointwiseArg *args,
                    const THPointwiseOptions *options)
{
    plan_init(plan);
    if ((int)op < 0 || op >= TH_NUM_POINTWISE_OPS) {
        return THError_set(TH_ERR_RUNTIME, "invalid pointwise operator %d",
                           (int)op);
    }
    if (prepare(plan, op, args, options) < 0) {
        THPointwise_abandon(plan);
        return -1;
    }
    return 0;
}

/* ---- execute and finish ------------------------------------------------------ */

static void
run_flat_range(int64_t begin, int64_t end, void *arg)
{
    THPointwisePlan *plan = arg;
    char *data[TH_POINTWISE_MAX_INPUTS + 1];
    for (int k = 0; k < plan->noperands; k++) {
        data[k] = plan->flat_data[k] + begin * plan->flat_strides[k];
    }
    plan->loop(data, plan->flat_strides, end - begin, &plan->param);
}

/* Note [Streaming stores]: a flat result of at least the threshold whose
 * bytes no input's bytes overlap (inputs partially overlapping the result
 * were copied by make_input; this also excludes an input that IS the
 * result, in-place).  Buffers (stride 0) live in the plan. */
static bool
streams_result(const THPointwisePlan *plan)
{
    if (!plan->flat) {
        return false;
    }
    const char *out = plan->flat_data[0];
    const char *out_end = out + plan->numel * plan->flat_strides[0];
    if ((size_t)(out_end - out) < THStream_threshold()) {
        return false;
    }
    for (int k = 1; k < plan->noperands; k++) {
        const char *in = plan->flat_data[k];
        const char *in_end = in + plan->numel * plan->flat_strides[k];
        if (plan->flat_strides[k] != 0 && in < out_end && out < in_end) {
            return false;
        }
    }
    return true;
}

/* Each block is computed by the ordinary loop into `block`, which stays in
 * L1, then streamed out to the result. */
static void
run_block_streaming(THPointwisePlan *plan, int64_t begin, int64_t end)
{
    _Alignas(64) char block[TH_STREAM_BLOCK];
    const int64_t itemsize = plan->flat_strides[0];
    const int64_t per_block = TH_STREAM_BLOCK / itemsize;
    char *data[TH_POINTWISE_MAX_INPUTS + 1];
    data[0] = block;
    for (int64_t start = begin; start < end; start += per_block) {
        int64_t count = end - start < per_block ? end - start : per_block;
        for (int k = 1; k < plan->noperands; k++) {
            data[k] = plan->flat_data[k] + start * plan->flat_strides[k];
        }
        plan->loop(data, plan->flat_strides, count, &plan->param);
        THStream_copy(plan->flat_data[0] + start * itemsize, block,
                      (size_t)(count * itemsize));
    }
}

static _Atomic int64_t fused_ranges;

/* The fused loop (Note [Fused streaming loops]) over the whole chunks of
 * [begin, end) from the result's first TH_STREAM_ALIGN boundary, the
 * ordinary loop over the elements around them.  False, with nothing
 * written, when the operator has no fused loop or it does not take this
 * layout. */
static bool
run_fused_streaming(THPointwisePlan *plan, int64_t begin, int64_t end)
{
    if (plan->stream_loop == NULL) {
        return false;
    }
    const int64_t itemsize = plan->flat_strides[0];
    const int64_t per_chunk = TH_STREAM_CHUNK / itemsize;
    const uintptr_t at = (uintptr_t)(plan->flat_data[0] + begin * itemsize);
    const int64_t head_bytes = (int64_t)(-at & (TH_STREAM_ALIGN - 1));
    if (head_bytes % itemsize != 0) {
        return false; /* elements off their natural alignment */
    }
    const int64_t first = begin + head_bytes / itemsize;
    if (end - first < per_chunk) {
        return false;
    }
    const int64_t last = first + (end - first) / per_chunk * per_chunk;
    char *data[TH_POINTWISE_MAX_INPUTS + 1];
    for (int k = 0; k < plan->noperands; k++) {
        data[k] = plan->flat_data[k] + first * plan->flat_strides[k];
    }
    if (!plan->stream_loop(data, plan->flat_strides, last - first,
                           &plan->param)) {
        return false;
    }
    run_flat_range(begin, first, plan);
    run_flat_range(last, end, plan);
    atomic_fetch_add(&fused_ranges, 1);
    return true;
}

static void
run_streaming_range(int64_t begin, int64_t end, void *arg)
{
    THPointwisePlan *plan = arg;
    if (!run_fused_streaming(plan, begin, end)) {
        run_block_streaming(plan, begin, end);
    }
    THStream_fence(); /* before THParallel_for's join publishes the result */
}

int64_t
THPointwise_fusedStreamingRanges(void)
{
    return atomic_load(&fused_ranges);
}

static _Atomic int64_t streamed_runs;

int64_t
THPointwise_streamedRuns(void)
{
    return atomic_load(&streamed_runs);
}

void
THPointwise_execute(THPointwisePlan *plan)
{
    if (plan->numel == 0) {
        return;
    }
    if (!plan->flat) {
        THIter_runParallel(&plan->iter, plan->loop, &plan->param,
                           TH_PARALLEL_GRAIN);
    }
    else if (streams_result(plan)) {
        atomic_fetch_add(&streamed_runs, 1);
        THParallel_for(plan->numel, TH_PARALLEL_GRAIN, run_streaming_range,
                       plan);
    }
    else if (plan->numel < 2 * TH_PARALLEL_GRAIN) {
        plan->loop(plan->flat_data, plan->flat_strides, plan->numel,
                   &plan->param);
    }
    else {
        THParallel_for(plan->numel, TH_PARALLEL_GRAIN, run_flat_range, plan);
    }
}

THTensor *
THPointwise_finish(THPointwisePlan *plan)
{
    int status = 0;
    if (plan->written != plan->result) {
        status = THTensor_copy(plan->result, plan->written); /* bumps */
    }
    else if (plan->bump_version) {
        THTensor_bumpVersion(plan->result);
    }
    THTensor *result = plan->result;
    plan->result = NULL;
    THPointwise_abandon(plan);
    if (status < 0) {
        THTensor_release(result);
        return NULL;
    }
    return result;
}

THTensor *
THPointwise_apply(THPointwiseOp op, const THPointwiseArg *args,
                  const THPointwiseOptions *options)
{
    THPointwisePlan plan;
    if (THPointwise_prepare(&plan, op, args, options) < 0) {
        return NULL;
    }
    THPointwise_execute(&plan);
    return THPointwise_finish(&plan);
}
