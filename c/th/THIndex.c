/*
 * THIndex.c -- advanced indexing (t[idx], t[idx] = v) and the indexing
 * operators: index_select, gather, scatter, index_add_, index_fill_,
 * index_copy_, masked_fill_, masked_select, nonzero, take, put_.
 *
 * Note [Validate, then write]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * Every position is checked before the first element moves: index
 * tensors are first turned into tensors of byte offsets (one serial pass
 * that stops at the first index out of range), and only then does a loop
 * copy elements.  So a bad index leaves the written tensor untouched, and
 * the element loops, which may run on worker threads, cannot fail.
 *
 * Note [Element loops by size]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * Moving an element does not depend on its dtype, only on its size: the
 * gather/put/fill loops exist once per element size (1, 2, 4, 8 bytes) and
 * move unsigned integers of that size.  Only the loops that compute
 * (accumulating puts, multiplying scatters) are generated per dtype from
 * the X-macros.
 */
#include "THIndex.h"

#include "THIter.h"
#include "THParallel.h"
#include "THPointwise.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- small helpers ----------------------------------------------------------- */

/* A shape as PyTorch prints it in messages: "[2, 3]". */
typedef struct {
    char text[TH_MAX_DIMS * 22 + 3];
} ShapeText;

static ShapeText
shape_text(int ndim, const int64_t *sizes)
{
    ShapeText s;
    THTensor_formatSizes(s.text, sizeof(s.text), ndim, sizes);
    return s;
}

#define SHAPE(t) (shape_text((t)->ndim, (t)->sizes).text)

/* Size and stride of dim d, a 0-d tensor counting as one element of a
 * 1-d one (PyTorch's rule for dim arguments). */
static int64_t
size_at(const THTensor *t, int64_t d)
{
    return t->ndim == 0 ? 1 : t->sizes[d];
}

static int64_t
stride_at(const THTensor *t, int64_t d)
{
    return t->ndim == 0 ? 0 : t->strides[d];
}

static int
ndim_at_least_1(const THTensor *t)
{
    return t->ndim == 0 ? 1 : t->ndim;
}

static bool
is_index_dtype(THDtype dtype)
{
    return dtype == TH_Int64 || dtype == TH_Int32;
}

static bool
is_mask_dtype(THDtype dtype)
{
    return dtype == TH_Bool || dtype == TH_UInt8;
}

static int
check_written(const THTensor *tensor)
{
    if (THTensor_checkWritable(tensor) < 0
        || THTensor_checkNoInternalOverlap(tensor) < 0) {
        return -1;
    }
    return 0;
}

/* check_written(self), then that neither index nor source shares memory
 * with self (PyTorch's assert_no_overlap, in its order): the checks of the
 * operators that write source's values at index. */
static int
check_written_apart(const THTensor *self, const THTensor *index,
                    const THTensor *source)
{
    if (check_written(self) < 0 || THTensor_checkNoOverlap(self, index) < 0
        || THTensor_checkNoOverlap(self, source) < 0) {
        return -1;
    }
    return 0;
}

/* A new 0-d tensor of dtype holding value (PyTorch's overflow check
 * included). */
static THTensor *
new_scalar_tensor(THScalar value, THDtype dtype)
{
    THTensor *t = THTensor_newEmpty(0, NULL, dtype, TH_DEVICE_CPU);
    if (t != NULL && THTensor_fill(t, value) < 0) {
        THTensor_release(t);
        return NULL;
    }
    return t;
}

/* `tensor` viewed as 1-d when it is 0-d (a new reference either way). */
static THTensor *
new_at_least_1d(THTensor *tensor)
{
    if (tensor->ndim > 0) {
        THTensor_retain(tensor);
        return tensor;
    }
    return THTensor_newUnsqueeze(tensor, 0);
}

/* A source that the loop reads while writing `dst`: copied aside when it
 * shares dst's memory, so no element is read after it was overwritten. */
static THTensor *
new_source_apart_from(THTensor *source, const THTensor *dst)
{
    if (source->storage == dst->storage) {
        return THTensor_newClone(source);
    }
    THTensor_retain(source);
    return source;
}

/* ---- byte offsets from index tensors (Note [Validate, then write]) -------- */

typedef struct {
    int64_t size;          /* of the indexed dim */
    int64_t stride_bytes;  /* of the indexed dim */
    bool wrap_negative;    /* -size <= i < 0 means i + size */
    bool found_bad;
    int64_t bad_value;
} OffsetCtx;

/* The index dtypes; operand 0 is the int64 offsets, operand 1 the index. */
#define TH_FORALL_INDEX_DTYPES(_) \
    _(Int32, int32_t)             \
    _(Int64, int64_t)

#define TH_DEFINE_ADD_OFFSETS(Name, itype)                                  \
    static void add_offsets_##Name(char **data, const int64_t *strides,    \
                                   int64_t n, void *vctx)                  \
    {                                                                      \
        OffsetCtx *ctx = vctx;                                             \
        int64_t low = ctx->wrap_negative ? -ctx->size : 0;                 \
        for (int64_t k = 0; k < n && !ctx->found_bad; k++) {               \
            int64_t i = *(const itype *)(data[1] + k * strides[1]);        \
            if (i < low || i >= ctx->size) {                               \
                ctx->found_bad = true;                                     \
                ctx->bad_value = i;                                        \
                return;                                                    \
            }                                                              \
            i += i < 0 ? ctx->size : 0;                                    \
            *(int64_t *)(data[0] + k * strides[0]) += i * ctx->stride_bytes; \
        }                                                                  \
    }
TH_FORALL_INDEX_DTYPES(TH_DEFINE_ADD_OFFSETS)
#undef TH_DEFINE_ADD_OFFSETS

/* Where a position was out of range: the message depends on the
 * operator, so the caller words it. */
typedef struct {
    bool found;
    int position; /* which index tensor (advanced indexing) */
    int64_t value;
    int64_t size;
} BadIndex;

/* offsets += index (broadcast to offsets' shape) * stride_bytes, after
 * checking every index against `size`.  Returns 0, or -1 with `bad` filled
 * (no TH error set) when an index is out of range. */
static int
add_index_offsets(THTensor *offsets, THTensor *index, int64_t size,
                  int64_t stride_bytes, bool wrap_negative, BadIndex *bad)
{
    if (offsets->numel == 0) {
        return 0;
    }
    THIter iter;
    THIterOperand ops[2] = {THIterOperand_fromTensor(offsets),
                            THIterOperand_fromTensor(index)};
    if (THIter_initOperands(&iter, 2, ops, offsets->ndim, offsets->sizes)
        < 0) {
        return -1;
    }
    OffsetCtx ctx = {.size = size, .stride_bytes = stride_bytes,
                     .wrap_negative = wrap_negative};
    THIter_run(&iter,
               index->dtype == TH_Int32 ? add_offsets_Int32
                                        : add_offsets_Int64,
               &ctx);
    if (ctx.found_bad) {
        bad->found = true;
        bad->value = ctx.bad_value;
        bad->size = size;
        return -1;
    }
    return 0;
}

/* A zeroed int64 tensor of the given shape. */
static THTensor *
new_zero_offsets(int ndim, const int64_t *sizes)
{
    THTensor *offsets = THTensor_newEmpty(ndim, sizes, TH_Int64,
                                          TH_DEVICE_CPU);
    if (offsets != NULL && offsets->numel > 0) {
        memset(THTensor_data(offsets), 0,
               (size_t)offsets->numel * sizeof(int64_t));
    }
    return offsets;
}

/* ---- element loops (Note [Element loops by size]) --------------------------- */

#define TH_FORALL_ELEMENT_SIZES(_) \
    _(1, uint8_t)                  \
    _(2, uint16_t)                 \
    _(4, uint32_t)                 \
    _(8, uint64_t)

/* Operands: 0 the result, 1 the source restrided, 2 byte offsets into it.
 * A run with one offset along contiguous memory (a row of t[rows]) is a
 * block copy. */
#define TH_DEFINE_GATHER(bytes, etype)                                      \
    static void gather_##bytes(char **data, const int64_t *strides,        \
                               int64_t n, void *ctx)                       \
    {                                                                      \
        (void)ctx;                                                         \
        if (strides[2] == 0 && strides[0] == bytes && strides[1] == bytes) {\
            memcpy(data[0], data[1] + *(const int64_t *)data[2],           \
                   (size_t)n * bytes);                                     \
            return;                                                        \
        }                                                                  \
        for (int64_t k = 0; k < n; k++) {                                  \
            int64_t offset = *(const int64_t *)(data[2] + k * strides[2]); \
            *(etype *)(data[0] + k * strides[0]) =                         \
                *(const etype *)(data[1] + k * strides[1] + offset);       \
        }                                                                  \
    }

/* Operands: 0 the order placeholder (Note [Order of puts]), 1 the
 * destination restrided, 2 the values, 3 byte offsets into the
 * destination. */
#define TH_DEFINE_PUT(bytes, etype)                                         \
    static void put_##bytes(char **data, const int64_t *strides, int64_t n,\
                            void *ctx)                                     \
    {                                                                      \
        (void)ctx;                                                         \
        if (strides[3] == 0 && strides[1] == bytes) {                      \
            /* one offset along contiguous memory: a row of t[rows] = v */ \
            etype *dst = (etype *)(data[1] + *(const int64_t *)data[3]);   \
            if (strides[2] == bytes) {                                     \
                memcpy(dst, data[2], (size_t)n * bytes);                   \
                return;                                                    \
            }                                                              \
            if (strides[2] == 0) {                                         \
                etype value = *(const etype *)data[2];                     \
                for (int64_t k = 0; k < n; k++) {                          \
                    dst[k] = value;                                        \
                }                                                          \
                return;                                                    \
            }                                                              \
        }                                                                  \
        for (int64_t k = 0; k < n; k++) {                                  \
            int64_t offset = *(const int64_t *)(data[3] + k * strides[3]); \
            *(etype *)(data[1] + k * strides[1] + offset) =                \
                *(const etype *)(data[2] + k * strides[2]);                \
        }                                                                  \
    }

/* Operands: 0 the destination, 1 the bool mask, 2 the value (stride 0). */
#define TH_DEFINE_FILL_WHERE(bytes, etype)                                  \
    static void fill_where_##bytes(char **data, const int64_t *strides,    \
                                   int64_t n, void *ctx)                   \
    {                                                                      \
        (void)ctx;                                                         \
        etype value = *(const etype *)data[2];                             \
        if (strides[0] == sizeof(etype) && strides[1] == sizeof(bool)) {   \
            etype *out = (etype *)data[0];                                 \
            /* a bool is one byte holding 0 or 1 */                       \
            const uint8_t *mask = (const uint8_t *)data[1];                \
            /* a bitwise blend (all ones where the mask is true), which */ \
            /* vectorises where `mask[k] ? value : out[k]` does not */     \
            for (int64_t k = 0; k < n; k++) {                              \
                etype select = (etype)0 - (etype)mask[k];                  \
                out[k] = (etype)((out[k] & ~select) | (value & select));   \
            }                                                              \
            return;                                                        \
        }                                                                  \
        for (int64_t k = 0; k < n; k++) {                                  \
            if (*(const bool *)(data[1] + k * strides[1])) {               \
                *(etype *)(data[0] + k * strides[0]) = value;              \
            }                                                              \
        }                                                                  \
    }

TH_FORALL_ELEMENT_SIZES(TH_DEFINE_GATHER)
TH_FORALL_ELEMENT_SIZES(TH_DEFINE_PUT)
TH_FORALL_ELEMENT_SIZES(TH_DEFINE_FILL_WHERE)

#define TH_SIZE_ENTRY_GATHER(bytes, etype) [bytes] = gather_##bytes,
#define TH_SIZE_ENTRY_PUT(bytes, etype) [bytes] = put_##bytes,
#define TH_SIZE_ENTRY_FILL_WHERE(bytes, etype) [bytes] = fill_where_##bytes,
static const THLoop gather_loops[9] = {
    TH_FORALL_ELEMENT_SIZES(TH_SIZE_ENTRY_GATHER)
};
static const THLoop put_loops[9] = {
    TH_FORALL_ELEMENT_SIZES(TH_SIZE_ENTRY_PUT)
};
static const THLoop fill_where_loops[9] = {
    TH_FORALL_ELEMENT_SIZES(TH_SIZE_ENTRY_FILL_WHERE)
};

/* Accumulating puts, per dtype: dst += value * alpha and dst *= value.
 * ctx points at alpha, stored in the dtype.  (Bool: + is "or", * "and".)
 * Operands as for put_<bytes>. */
#define TH_DEFINE_PUT_ADD(Name, ctype, py)                                  \
    static void put_add_##Name(char **data, const int64_t *strides,        \
                               int64_t n, void *ctx)                       \
    {                                                                      \
        ctype alpha = *(const ctype *)ctx;                                 \
        for (int64_t k = 0; k < n; k++) {                                  \
            int64_t offset = *(const int64_t *)(data[3] + k * strides[3]); \
            ctype *dst = (ctype *)(data[1] + k * strides[1] + offset);     \
            ctype value = *(const ctype *)(data[2] + k * strides[2]);      \
            *dst = TH_FROM_FLOAT_##Name(TH_TO_FLOAT_##Name(*dst)            \
                                        + TH_TO_FLOAT_##Name(value)        \
                                              * TH_TO_FLOAT_##Name(alpha)); \
        }                                                                  \
    }
/* The other combining puts: *dst = combine(*dst, value), in the element
 * type's compute type (float32 for the 16-bit floats).  (mul: in the
 * promoted type, for bool a product is no truth; max/min: NaN wins, as
 * maximum.) */
#define TH_DEFINE_PUT_COMBINE(Name, ctype, which, COMBINE)                   \
    static void put_##which##_##Name(char **data, const int64_t *strides,   \
                                     int64_t n, void *ctx)                   \
    {                                                                        \
        (void)ctx;                                                           \
        for (int64_t k = 0; k < n; k++) {                                    \
            int64_t offset = *(const int64_t *)(data[3] + k * strides[3]);   \
            ctype *dst = (ctype *)(data[1] + k * strides[1] + offset);       \
            ctype value = *(const ctype *)(data[2] + k * strides[2]);        \
            COMBINE(Name, dst, value);                                       \
        }                                                                    \
    }
#define TH_COMBINE_MUL(Name, dst, value)                                      \
    do {                                                                      \
        __typeof__(TH_TO_FLOAT_##Name(value) * TH_TO_FLOAT_##Name(value))     \
            product = TH_TO_FLOAT_##Name(*(dst)) * TH_TO_FLOAT_##Name(value); \
        *(dst) = TH_FROM_FLOAT_##Name(product);                               \
    } while (0)
#define TH_COMBINE_MAX(Name, dst, value)                                      \
    do {                                                                      \
        __typeof__(TH_TO_FLOAT_##Name(value)) new_ = TH_TO_FLOAT_##Name(value); \
        __typeof__(new_) old_ = TH_TO_FLOAT_##Name(*(dst));                   \
        if ((new_ > old_ || new_ != new_) && old_ == old_) {                  \
            *(dst) = (value);                                                 \
        }                                                                     \
    } while (0)
#define TH_COMBINE_MIN(Name, dst, value)                                      \
    do {                                                                      \
        __typeof__(TH_TO_FLOAT_##Name(value)) new_ = TH_TO_FLOAT_##Name(value); \
        __typeof__(new_) old_ = TH_TO_FLOAT_##Name(*(dst));                   \
        if ((new_ < old_ || new_ != new_) && old_ == old_) {                  \
            *(dst) = (value);                                                 \
        }                                                                     \
    } while (0)
#define TH_DEFINE_PUT_MUL(Name, ctype, py) \
    TH_DEFINE_PUT_COMBINE(Name, ctype, mul, TH_COMBINE_MUL)
#define TH_DEFINE_PUT_MAX(Name, ctype, py) \
    TH_DEFINE_PUT_COMBINE(Name, ctype, max, TH_COMBINE_MAX)
#define TH_DEFINE_PUT_MIN(Name, ctype, py) \
    TH_DEFINE_PUT_COMBINE(Name, ctype, min, TH_COMBINE_MIN)
TH_FORALL_DTYPES(TH_DEFINE_PUT_ADD)
TH_FORALL_DTYPES(TH_DEFINE_PUT_MUL)
TH_FORALL_DTYPES(TH_DEFINE_PUT_MAX)
TH_FORALL_DTYPES(TH_DEFINE_PUT_MIN)

#define TH_DTYPE_ENTRY_PUT_ADD(Name, ctype, py) put_add_##Name,
#define TH_DTYPE_ENTRY_PUT_MUL(Name, ctype, py) put_mul_##Name,
static const THLoop put_add_loops[TH_NUM_DTYPES] = {
    TH_FORALL_DTYPES(TH_DTYPE_ENTRY_PUT_ADD)
};
static const THLoop put_mul_loops[TH_NUM_DTYPES] = {
    TH_FORALL_DTYPES(TH_DTYPE_ENTRY_PUT_MUL)
};
#define TH_DTYPE_ENTRY_PUT_MAX(Name, ctype, py) put_max_##Name,
#define TH_DTYPE_ENTRY_PUT_MIN(Name, ctype, py) put_min_##Name,
static const THLoop put_max_loops[TH_NUM_DTYPES] = {
    TH_FORALL_DTYPES(TH_DTYPE_ENTRY_PUT_MAX)
};
static const THLoop put_min_loops[TH_NUM_DTYPES] = {
    TH_FORALL_DTYPES(TH_DTYPE_ENTRY_PUT_MIN)
};

/* How a put combines a value with what is there. */
typedef struct {
    THLoop loop;
    int64_t alpha[1]; /* put_add's factor, stored in the dtype (8 bytes) */
} PutMode;

static int
put_mode(THScatterReduce reduce, THDtype dtype, THScalar alpha,
         PutMode *mode)
{
    memset(mode, 0, sizeof(*mode));
    switch (reduce) {
    case TH_SCATTER_ASSIGN:
        mode->loop = put_loops[THDtype_itemsize(dtype)];
        return 0;
    case TH_SCATTER_MULTIPLY:
        mode->loop = put_mul_loops[dtype];
        return 0;
    case TH_SCATTER_AMAX:
        mode->loop = put_max_loops[dtype];
        return 0;
    case TH_SCATTER_AMIN:
        mode->loop = put_min_loops[dtype];
        return 0;
    case TH_SCATTER_ADD:
    case TH_SCATTER_MEAN: /* the sum; scatter_reduce divides */
        break;
    }
    mode->loop = put_add_loops[dtype];
    THTensor *alpha_tensor = new_scalar_tensor(alpha, dtype);
    if (alpha_tensor == NULL) {
        return -1;
    }
    memcpy(mode->alpha, THTensor_data(alpha_tensor),
           (size_t)THDtype_itemsize(dtype));
    THTensor_release(alpha_tensor);
    return 0;
}

/* Note [Order of puts]
 * ~~~~~~~~~~~~~~~~~~~~
 * THIter walks its operand 0 in memory order, but the destination of a put
 * has stride 0 along the dims the offsets move in (Note [Advanced
 * indexing]), so it would put those innermost: t[rows] = v would write
 * column by column.  A put therefore runs with a placeholder operand 0
 * whose strides are all 0: every dim ties, and THIter keeps ties in
 * row-major order, so elements go in the order of the indexing result,
 * reading values and offsets sequentially.  The loops skip data[0].
 * One thread: with repeated offsets, parallel writes would race.
 */
static int
run_put(const THIterOperand *ops, int ndim, const int64_t *sizes,
        PutMode *mode)
{
    static char placeholder;
    THIterOperand ordered[4] = {
        {.data = &placeholder, .ndim = 0, .itemsize = 1},
        ops[0], ops[1], ops[2],
    };
    THIter iter;
    if (THIter_initOperands(&iter, 4, ordered, ndim, sizes) < 0) {
        return -1;
    }
    THIter_run(&iter, mode->loop, mode->alpha);
    return 0;
}

static int
run_gather(const THIterOperand *ops, int ndim, const int64_t *sizes)
{
    THIter iter;
    if (THIter_initOperands(&iter, 3, ops, ndim, sizes) < 0) {
        return -1;
    }
    THIter_runParallel(&iter, gather_loops[ops[1].itemsize], NULL,
                       TH_PARALLEL_GRAIN);
    return 0;
}

/* ---- nonzero ------------------------------------------------------------------ */

#define TH_DEFINE_COUNT_NONZERO(Name, ctype, py)                            \
    static int64_t count_nonzero_##Name(const char *data, int64_t n)       \
    {                                                                      \
        const ctype *values = (const ctype *)data;                         \
        int64_t count = 0;                                                 \
        for (int64_t k = 0; k < n; k++) {                                  \
            count += TH_TO_FLOAT_##Name(values[k]) != 0;                                       \
        }                                                                  \
        return count;                                                      \
    }
TH_FORALL_DTYPES(TH_DEFINE_COUNT_NONZERO)

/* Writes the coordinates of each non-zero element of a row-major block
 * of the given shape (ndim >= 1), one row of `out` per element.  The last
 * dim is walked as a plain loop; an odometer steps the others.  The loop
 * is branch-free: every element's coordinates are written, and `out` only
 * moves past them when the element is non-zero (so `out` needs one spare
 * row at the end). */
#define TH_DEFINE_LIST_NONZERO(Name, ctype, py)                             \
    static void list_nonzero_##Name(const char *data, int64_t n, int ndim, \
                                    const int64_t *sizes, int64_t *out)    \
    {                                                                      \
        const ctype *values = (const ctype *)data;                         \
        int64_t inner = sizes[ndim - 1];                                   \
        int64_t outer[TH_MAX_DIMS] = {0};                                  \
        for (int64_t row = 0; row < n; row += inner) {                     \
            for (int64_t j = 0; j < inner; j++) {                          \
                for (int d = 0; d < ndim - 1; d++) {                       \
                    out[d] = outer[d];                                     \
                }                                                          \
                out[ndim - 1] = j;                                         \
                out += (TH_TO_FLOAT_##Name(values[row + j]) != 0) * ndim;                      \
            }                                                              \
            for (int d = ndim - 2; d >= 0 && ++outer[d] == sizes[d]; d--) {\
                outer[d] = 0;                                              \
            }                                                              \
        }                                                                  \
    }
TH_FORALL_DTYPES(TH_DEFINE_LIST_NONZERO)

typedef int64_t (*CountNonzeroFn)(const char *, int64_t);
typedef void (*ListNonzeroFn)(const char *, int64_t, int, const int64_t *,
                              int64_t *);
#define TH_DTYPE_ENTRY_COUNT(Name, ctype, py) count_nonzero_##Name,
#define TH_DTYPE_ENTRY_LIST(Name, ctype, py) list_nonzero_##Name,
static const CountNonzeroFn count_nonzero_fns[TH_NUM_DTYPES] = {
    TH_FORALL_DTYPES(TH_DTYPE_ENTRY_COUNT)
};
static const ListNonzeroFn list_nonzero_fns[TH_NUM_DTYPES] = {
    TH_FORALL_DTYPES(TH_DTYPE_ENTRY_LIST)
};

THTensor *
THTensor_newNonzero(THTensor *self)
{
    THTensor *values = THTensor_newContiguous(self);
    if (values == NULL) {
        return NULL;
    }
    const char *data = values->numel > 0 ? THTensor_data(values) : NULL;
    int64_t count =
        data != NULL ? count_nonzero_fns[values->dtype](data, values->numel)
                     : 0;
    /* one spare row for list_nonzero's branch-free writes */
    int64_t sizes[2] = {count + 1, self->ndim};
    THTensor *rows = THTensor_newEmpty(2, sizes, TH_Int64, TH_DEVICE_CPU);
    if (rows != NULL && count > 0 && self->ndim > 0) {
        list_nonzero_fns[values->dtype](data, values->numel, values->ndim,
                                        values->sizes,
                                        (int64_t *)THTensor_data(rows));
    }
    THTensor *result =
        rows == NULL ? NULL : THTensor_newNarrow(rows, 0, 0, count);
    THTensor_release(rows);
    THTensor_release(values);
    return result;
}

/* ---- advanced indexing ------------------------------------------------------- */

/* Note [Advanced indexing]
 * ~~~~~~~~~~~~~~~~~~~~~~~~
 * Each index tensor of t[...] stands at one dim of t (a k-dim mask stands
 * at k dims, as the k columns of its nonzero()).  All index tensors
 * broadcast together to one shape B, and the result is
 *     (dims before the indexed ones) + B + (dims after them)
 * when the indexed dims are adjacent, and B + (the other dims) when they
 * are not: NumPy's rule.  Both cases are computed the same way: t is
 * permuted so its indexed dims are adjacent (a no-op in the first case),
 * and the indexed dims collapse into one byte offset per position of B,
 * the sum over indexed dims of index * stride.  The result is then a plain
 * strided loop over three operands laid out in the result's shape: the
 * result, t with stride 0 along the B dims, and the offsets with stride 0
 * along the others.  The same plan, with the first two swapped, writes
 * t[...] = values.
 */
typedef struct {
    THTensor *self;    /* owned: the indexed tensor, indexed dims adjacent */
    int ndim;          /* of the result */
    int64_t sizes[TH_MAX_DIMS];
    int64_t self_strides[TH_MAX_DIMS];   /* elements; 0 along B */
    int64_t offset_strides[TH_MAX_DIMS]; /* elements; 0 outside B */
    THTensor *offsets; /* owned: int64 byte offsets into self, shape B */
} IndexPlan;

static void
plan_release(IndexPlan *plan)
{
    THTensor_release(plan->self);
    THTensor_release(plan->offsets);
}

static THIterOperand
plan_self_operand(const IndexPlan *plan)
{
    THIterOperand op = {
        .data = THTensor_data(plan->self),
        .ndim = plan->ndim,
        .sizes = plan->sizes,
        .strides = plan->self_strides,
        .itemsize = (int)THTensor_itemsize(plan->self),
    };
    return op;
}

static THIterOperand
plan_offsets_operand(const IndexPlan *plan)
{
    THIterOperand op = {
        .data = THTensor_data(plan->offsets),
        .ndim = plan->ndim,
        .sizes = plan->sizes,
        .strides = plan->offset_strides,
        .itemsize = (int)sizeof(int64_t),
    };
    return op;
}

static void
release_all(THTensor **tensors, int n)
{
    for (int i = 0; i < n; i++) {
        if (tensors[i] != NULL) {
            THTensor_release(tensors[i]);
            tensors[i] = NULL;
        }
    }
}

static int
check_index_dtypes(const THTensor *self, int nindices,
                   THTensor *const *indices)
{
    int consumed = 0;
    for (int i = 0; i < nindices; i++) {
        const THTensor *index = indices[i];
        if (index == NULL) {
            consumed++;
            continue;
        }
        if (!is_index_dtype(index->dtype) && !is_mask_dtype(index->dtype)) {
            return THError_set(TH_ERR_INDEX,
                               "tensors used as indices must be long, int, "
                               "byte or bool tensors");
        }
        if (is_mask_dtype(index->dtype) && index->ndim == 0) {
            return THError_set(TH_ERR_INDEX,
                               "a 0-dim bool index is only supported by "
                               "tensor[...] indexing");
        }
        consumed += is_mask_dtype(index->dtype) ? index->ndim : 1;
    }
    if (consumed > self->ndim) {
        return THError_set(TH_ERR_INDEX,
                           "too many indices for tensor of dimension %d "
                           "(got %d)",
                           self->ndim, consumed);
    }
    return 0;
}

/* A mask standing at dims [dim, dim + mask->ndim) of self must have their
 * sizes. */
static int
check_mask_shape(const THTensor *self, const THTensor *mask, int dim)
{
    for (int j = 0; j < mask->ndim; j++) {
        if (mask->sizes[j] != self->sizes[dim + j]) {
            return THError_set(TH_ERR_INDEX,
                               "The shape of the mask %s at index %d does "
                               "not match the shape of the indexed tensor %s "
                               "at index %d",
                               SHAPE(mask), j, SHAPE(self), dim + j);
        }
    }
    return 0;
}

/* The index tensor standing at each dim of self (a new reference, or NULL
 * for a dim kept whole), masks replaced by their nonzero() columns. */
static int
index_per_dim(THTensor *self, int nindices, THTensor *const *indices,
              THTensor **per_dim)
{
    if (check_index_dtypes(self, nindices, indices) < 0) {
        return -1;
    }
    memset(per_dim, 0, sizeof(THTensor *) * TH_MAX_DIMS);
    int dim = 0;
    for (int i = 0; i < nindices; i++) {
        THTensor *index = indices[i];
        if (index == NULL || !is_mask_dtype(index->dtype)) {
            if (index != NULL) {
                THTensor_retain(index);
            }
            per_dim[dim++] = index;
            continue;
        }
        if (check_mask_shape(self, index, dim) < 0) {
            release_all(per_dim, TH_MAX_DIMS);
            return -1;
        }
        THTensor *positions = THTensor_newNonzero(index);
        for (int j = 0; positions != NULL && j < index->ndim; j++) {
            per_dim[dim + j] = THTensor_newSelect(positions, 1, j);
            if (per_dim[dim + j] == NULL) {
                THTensor_release(positions);
                positions = NULL;
            }
        }
        if (positions == NULL) {
            release_all(per_dim, TH_MAX_DIMS);
            return -1;
        }
        THTensor_release(positions);
        dim += index->ndim;
    }
    return 0;
}

/* B: the shape all index tensors broadcast to. */
static int
broadcast_indices(THTensor *const *indexed, int nindexed, int *ndim,
                  int64_t *sizes)
{
    *ndim = 0;
    for (int k = 0; k < nindexed; k++) {
        if (THIter_broadcastShape(*ndim, sizes, indexed[k]->ndim,
                                  indexed[k]->sizes, ndim, sizes)
            < 0) {
            char shapes[1024];
            size_t used = 0;
            for (int j = 0; j < nindexed && used < sizeof(shapes); j++) {
                used += (size_t)snprintf(shapes + used,
                                         sizeof(shapes) - used, "%s%s",
                                         j == 0 ? "" : ", ",
                                         SHAPE(indexed[j]));
            }
            return THError_set(TH_ERR_INDEX,
                               "shape mismatch: indexing tensors could not "
                               "be broadcast together with shapes %s",
                               shapes);
        }
    }
    return 0;
}

/* Makes self's indexed dims adjacent (Note [Advanced indexing]): sets
 * plan->self and returns the dim where they start. */
static int
make_indexed_dims_adjacent(IndexPlan *plan, THTensor *self,
                           THTensor *const *per_dim, const int *positions,
                           int nindexed)
{
    bool adjacent =
        nindexed == 0 || positions[nindexed - 1] - positions[0] == nindexed - 1;
    if (adjacent) {
        THTensor_retain(self);
        plan->self = self;
        return nindexed == 0 ? 0 : positions[0];
    }
    int64_t order[TH_MAX_DIMS];
    int n = 0;
    for (int k = 0; k < nindexed; k++) {
        order[n++] = positions[k];
    }
    for (int d = 0; d < self->ndim; d++) {
        if (per_dim[d] == NULL) {
            order[n++] = d;
        }
    }
    plan->self = THTensor_newPermute(self, self->ndim, order);
    return plan->self == NULL ? -1 : 0;
}

/* Lays out the result's geometry: before + B + after. */
static int
plan_geometry(IndexPlan *plan, int first, int nindexed, int bndim,
              const int64_t *bsizes)
{
    const THTensor *self = plan->self;
    int after = self->ndim - first - nindexed;
    if (first + bndim + after > TH_MAX_DIMS) {
        return THError_set(TH_ERR_INDEX,
                           "advanced indexing would give a tensor of %d "
                           "dimensions; ember tensors have at most %d",
                           first + bndim + after, TH_MAX_DIMS);
    }
    int64_t bstrides[TH_MAX_DIMS];
    THTensor_contiguousStrides(bndim, bsizes, bstrides);
    int n = 0;
    for (int d = 0; d < first; d++, n++) {
        plan->sizes[n] = self->sizes[d];
        plan->self_strides[n] = self->strides[d];
        plan->offset_strides[n] = 0;
    }
    for (int j = 0; j < bndim; j++, n++) {
        plan->sizes[n] = bsizes[j];
        plan->self_strides[n] = 0;
        plan->offset_strides[n] = bstrides[j];
    }
    for (int d = first + nindexed; d < self->ndim; d++, n++) {
        plan->sizes[n] = self->sizes[d];
        plan->self_strides[n] = self->strides[d];
        plan->offset_strides[n] = 0;
    }
    plan->ndim = n;
    return 0;
}

/* Sums the offsets of every indexed dim; `bad->position` says which index
 * tensor held an out-of-range position. */
static int
plan_offsets(IndexPlan *plan, THTensor *const *indexed, int first,
             int nindexed, int bndim, const int64_t *bsizes,
             bool wrap_negative, BadIndex *bad)
{
    plan->offsets = new_zero_offsets(bndim, bsizes);
    if (plan->offsets == NULL) {
        return -1;
    }
    int64_t itemsize = THTensor_itemsize(plan->self);
    for (int k = 0; k < nindexed; k++) {
        int dim = first + k;
        if (add_index_offsets(plan->offsets, indexed[k],
                              plan->self->sizes[dim],
                              plan->self->strides[dim] * itemsize,
                              wrap_negative, bad)
            < 0) {
            if (bad->found) {
                bad->position = k;
                THError_set(TH_ERR_INDEX,
                            "index %lld is out of bounds for dimension %d "
                            "with size %lld",
                            (long long)bad->value, k, (long long)bad->size);
            }
            return -1;
        }
    }
    return 0;
}

/* The byte offsets into self of the true elements of `mask`, standing at
 * dims [first, first + mask->ndim) of self, in row-major order: what
 * nonzero() and plan_offsets would compute, in one branch-free pass (as in
 * list_nonzero, `out` moves only past true elements; one spare slot). */
static THTensor *
new_mask_offsets(const THTensor *self, int first, THTensor *mask)
{
    THTensor *bytes = THTensor_newContiguous(mask);
    if (bytes == NULL) {
        return NULL;
    }
    const uint8_t *m = bytes->numel > 0 ? (const uint8_t *)THTensor_data(bytes)
                                        : NULL;
    int64_t count = m == NULL ? 0
                              : count_nonzero_fns[TH_UInt8]((const char *)m,
                                                            bytes->numel);
    int64_t slots = count + 1;
    THTensor *offsets = THTensor_newEmpty(1, &slots, TH_Int64, TH_DEVICE_CPU);
    if (offsets != NULL && count > 0) {
        int k = mask->ndim;
        int64_t itemsize = THTensor_itemsize(self);
        int64_t inner = mask->sizes[k - 1];
        int64_t inner_step = self->strides[first + k - 1] * itemsize;
        int64_t coords[TH_MAX_DIMS] = {0};
        int64_t *out = (int64_t *)THTensor_data(offsets);
        for (int64_t row = 0; row < bytes->numel; row += inner) {
            int64_t base = 0;
            for (int d = 0; d < k - 1; d++) {
                base += coords[d] * self->strides[first + d] * itemsize;
            }
            for (int64_t j = 0; j < inner; j++) {
                *out = base + j * inner_step;
                out += m[row + j] != 0;
            }
            for (int d = k - 2; d >= 0 && ++coords[d] == mask->sizes[d]; d--) {
                coords[d] = 0;
            }
        }
    }
    THTensor *result =
        offsets == NULL ? NULL : THTensor_newNarrow(offsets, 0, 0, count);
    THTensor_release(offsets);
    THTensor_release(bytes);
    return result;
}

/* The one mask of t[mask] or t[:, mask] (and NULL when the index list has
 * anything else): its positions need no nonzero() and no range checks. */
static THTensor *
lone_mask(int nindices, THTensor *const *indices, int *first)
{
    THTensor *mask = NULL;
    for (int i = 0; i < nindices; i++) {
        if (indices[i] == NULL) {
            continue;
        }
        if (mask != NULL || !is_mask_dtype(indices[i]->dtype)
            || indices[i]->ndim == 0) {
            return NULL;
        }
        mask = indices[i];
        *first = i; /* every entry before it is NULL: one dim each */
    }
    return mask;
}

static int
plan_init_lone_mask(IndexPlan *plan, THTensor *self, int nindices,
                    THTensor *const *indices, THTensor *mask, int first)
{
    if (check_index_dtypes(self, nindices, indices) < 0
        || check_mask_shape(self, mask, first) < 0) {
        return -1;
    }
    THTensor_retain(self);
    plan->self = self;
    plan->offsets = new_mask_offsets(self, first, mask);
    if (plan->offsets == NULL
        || plan_geometry(plan, first, mask->ndim, 1, plan->offsets->sizes)
               < 0) {
        plan_release(plan);
        return -1;
    }
    return 0;
}

/* Prepares self[indices].  On failure a TH error is set and, when a
 * position was out of range, `bad` says which (callers may reword it). */
static int
plan_init(IndexPlan *plan, THTensor *self, int nindices,
          THTensor *const *indices, bool wrap_negative, BadIndex *bad)
{
    memset(plan, 0, sizeof(*plan));
    memset(bad, 0, sizeof(*bad));
    int mask_dim = 0;
    THTensor *mask = lone_mask(nindices, indices, &mask_dim);
    if (mask != NULL) {
        return plan_init_lone_mask(plan, self, nindices, indices, mask,
                                   mask_dim);
    }
    THTensor *per_dim[TH_MAX_DIMS];
    if (index_per_dim(self, nindices, indices, per_dim) < 0) {
        return -1;
    }
    THTensor *indexed[TH_MAX_DIMS];
    int positions[TH_MAX_DIMS];
    int nindexed = 0;
    for (int d = 0; d < self->ndim; d++) {
        if (per_dim[d] != NULL) {
            indexed[nindexed] = per_dim[d];
            positions[nindexed++] = d;
        }
    }
    int bndim;
    int64_t bsizes[TH_MAX_DIMS];
    int first = -1;
    if (broadcast_indices(indexed, nindexed, &bndim, bsizes) == 0) {
        first = make_indexed_dims_adjacent(plan, self, per_dim, positions,
                                           nindexed);
    }
    int status = -1;
    if (first >= 0 && plan_geometry(plan, first, nindexed, bndim, bsizes) == 0
        && plan_offsets(plan, indexed, first, nindexed, bndim, bsizes,
                        wrap_negative, bad)
               == 0) {
        status = 0;
    }
    release_all(per_dim, TH_MAX_DIMS);
    if (status < 0) {
        plan_release(plan);
    }
    return status;
}

static THTensor *
plan_gather(const IndexPlan *plan)
{
    THTensor *result = THTensor_newEmpty(plan->ndim, plan->sizes,
                                         plan->self->dtype,
                                         plan->self->storage->device);
    if (result == NULL || result->numel == 0) {
        return result;
    }
    THIterOperand ops[3] = {THIterOperand_fromTensor(result),
                            plan_self_operand(plan),
                            plan_offsets_operand(plan)};
    if (run_gather(ops, plan->ndim, plan->sizes) < 0) {
        THTensor_release(result);
        return NULL;
    }
    return result;
}

THTensor *
THTensor_newIndex(THTensor *self, int nindices, THTensor *const *indices)
{
    IndexPlan plan;
    BadIndex bad;
    if (plan_init(&plan, self, nindices, indices, true, &bad) < 0) {
        return NULL;
    }
    THTensor *result = plan_gather(&plan);
    plan_release(&plan);
    return result;
}

/* `values` converted to dtype, viewed with as many dims as the indexing
 * result (extra leading size-1 dims dropped), checked to broadcast to it,
 * and apart from self's memory.  A new reference, or NULL. */
static THTensor *
new_put_values(THTensor *values, const IndexPlan *plan, THTensor *self)
{
    int extra = values->ndim - plan->ndim;
    bool fits = true;
    for (int d = 0; d < values->ndim; d++) {
        int pd = d - extra;
        int64_t size = values->sizes[d];
        fits = fits && (pd < 0 ? size == 1
                               : size == 1 || size == plan->sizes[pd]);
    }
    if (!fits) {
        THError_set(TH_ERR_RUNTIME,
                    "shape mismatch: value tensor of shape %s cannot be "
                    "broadcast to indexing result of shape %s",
                    SHAPE(values),
                    shape_text(plan->ndim, plan->sizes).text);
        return NULL;
    }
    THTensor *cast = THTensor_newCast(values, self->dtype, false);
    if (cast == NULL) {
        return NULL;
    }
    THTensor *trimmed = cast;
    if (extra > 0) {
        trimmed = THTensor_newAsStrided(cast, plan->ndim, cast->sizes + extra,
                                        cast->strides + extra,
                                        cast->storage_offset);
        THTensor_release(cast);
        if (trimmed == NULL) {
            return NULL;
        }
    }
    THTensor *apart = new_source_apart_from(trimmed, self);
    THTensor_release(trimmed);
    return apart;
}

/* The write shared by index_put_, index_fill_ and index_add_: self is
 * checked writable, positions are all valid, then values go in. */
static int
plan_put(THTensor *self, int nindices, THTensor *const *indices,
         THTensor *values, THScatterReduce reduce, THScalar alpha,
         bool wrap_negative, BadIndex *bad)
{
    memset(bad, 0, sizeof(*bad));
    if (check_written(self) < 0) {
        return -1;
    }
    IndexPlan plan;
    if (plan_init(&plan, self, nindices, indices, wrap_negative, bad) < 0) {
        return -1;
    }
    PutMode mode;
    THTensor *source = new_put_values(values, &plan, self);
    int status = source == NULL ? -1
                                : put_mode(reduce, self->dtype, alpha, &mode);
    if (status == 0) {
        int64_t numel;
        THTensor_checkedNumel(plan.ndim, plan.sizes, &numel);
        THIterOperand ops[3] = {plan_self_operand(&plan),
                                THIterOperand_fromTensor(source),
                                plan_offsets_operand(&plan)};
        status = numel == 0 ? 0 : run_put(ops, plan.ndim, plan.sizes, &mode);
    }
    if (source != NULL) {
        THTensor_release(source);
    }
    plan_release(&plan);
    if (status == 0) {
        THTensor_bumpVersion(self);
    }
    return status;
}

int
THTensor_indexPut(THTensor *self, int nindices, THTensor *const *indices,
                  THTensor *values, bool accumulate)
{
    BadIndex bad;
    return plan_put(self, nindices, indices, values,
                    accumulate ? TH_SCATTER_ADD : TH_SCATTER_ASSIGN,
                    THScalar_fromInt(1), true, &bad);
}

/* ---- index_select, index_fill_, index_add_ --------------------------------- */

/* indices = (None,) * dim + (index,), the index at least 1-d. */
static int
dim_index_list(THTensor *index, int64_t dim, THTensor **indices)
{
    for (int64_t d = 0; d < dim; d++) {
        indices[d] = NULL;
    }
    indices[dim] = new_at_least_1d(index);
    return indices[dim] == NULL ? -1 : 0;
}

THTensor *
THTensor_newIndexSelect(THTensor *self, int64_t dim, THTensor *index)
{
    if (THTensor_wrapDim(dim, self->ndim, &dim) < 0) {
        return NULL;
    }
    if (index->ndim > 1) {
        THError_set(TH_ERR_INDEX,
                    "index_select(): Index is supposed to be a vector");
        return NULL;
    }
    if (!is_index_dtype(index->dtype)) {
        THError_set(TH_ERR_RUNTIME,
                    "index_select(): Expected dtype int32 or int64 for "
                    "index");
        return NULL;
    }
    THTensor *indices[TH_MAX_DIMS];
    THTensor *self_1d = new_at_least_1d(self);
    if (self_1d == NULL || dim_index_list(index, dim, indices) < 0) {
        if (self_1d != NULL) {
            THTensor_release(self_1d);
        }
        return NULL;
    }
    IndexPlan plan;
    BadIndex bad;
    THTensor *result = NULL;
    if (plan_init(&plan, self_1d, (int)dim + 1, indices, false, &bad) == 0) {
        result = plan_gather(&plan);
        plan_release(&plan);
    }
    else if (bad.found) {
        THError_set(TH_ERR_INDEX, "index out of range in self");
    }
    THTensor_release(indices[dim]);
    THTensor_release(self_1d);
    if (result != NULL && self->ndim == 0 && result->numel == 1) {
        int64_t no_sizes[1] = {0};
        THTensor *scalar = THTensor_newView(result, 0, no_sizes);
        THTensor_release(result);
        result = scalar;
    }
    return result;
}

/* An index out of range along `dim`, as each PyTorch operator words it:
 * the kind and the prefix vary ("index_copy_(): index 5 is ..."). */
static int
set_dim_bounds_error(THErrorKind kind, const char *prefix, int64_t dim,
                     const BadIndex *bad)
{
    return THError_set(kind,
                       "%sindex %lld is out of bounds for dimension %lld with "
                       "size %lld",
                       prefix, (long long)bad->value, (long long)dim,
                       (long long)bad->size);
}

/* The put behind index_fill_, index_add_ and index_copy_, on self viewed
 * as >= 1-d.  An index out of range fills `bad` (the caller words it). */
static int
dim_put(THTensor *self, int64_t dim, THTensor *index, THTensor *values,
        THScatterReduce reduce, THScalar alpha, bool wrap_negative,
        BadIndex *bad)
{
    memset(bad, 0, sizeof(*bad));
    THTensor *indices[TH_MAX_DIMS];
    THTensor *self_1d = new_at_least_1d(self);
    if (self_1d == NULL || dim_index_list(index, dim, indices) < 0) {
        if (self_1d != NULL) {
            THTensor_release(self_1d);
        }
        return -1;
    }
    int status = plan_put(self_1d, (int)dim + 1, indices, values, reduce,
                          alpha, wrap_negative, bad);
    THTensor_release(indices[dim]);
    THTensor_release(self_1d);
    return status;
}

int
THTensor_indexFill(THTensor *self, int64_t dim, THTensor *index,
                   THScalar value)
{
    if (index->dtype != TH_Int64) {
        return THError_set(TH_ERR_INDEX,
                           "index_fill_(): Expected dtype int64 for index.");
    }
    if (THTensor_checkNoOverlap(self, index) < 0) {
        return -1;
    }
    if (index->ndim > 1) {
        return THError_set(TH_ERR_RUNTIME, "Index has to be a vector/scalar");
    }
    if (THTensor_wrapDim(dim, self->ndim, &dim) < 0
        || check_written(self) < 0) {
        return -1;
    }
    THTensor *fill = new_scalar_tensor(value, self->dtype);
    if (fill == NULL) {
        return -1;
    }
    BadIndex bad;
    int status = dim_put(self, dim, index, fill, TH_SCATTER_ASSIGN,
                         THScalar_fromInt(1), true, &bad);
    if (bad.found) {
        set_dim_bounds_error(TH_ERR_INDEX, "", dim, &bad);
    }
    THTensor_release(fill);
    return status;
}

/* index_add_'s shape rule: source is self with dim resized to
 * len(index). */
static int
check_index_add_shapes(const THTensor *self, int64_t dim,
                       const THTensor *index, const THTensor *source)
{
    if (index->numel != size_at(source, dim)) {
        return THError_set(TH_ERR_RUNTIME,
                           "index_add_(): Number of indices (%lld) should be "
                           "equal to source.size(dim): (%lld), for dim: "
                           "%lld",
                           (long long)index->numel,
                           (long long)size_at(source, dim), (long long)dim);
    }
    bool same = ndim_at_least_1(self) == ndim_at_least_1(source);
    for (int d = 0; same && d < self->ndim; d++) {
        same = d == dim || self->sizes[d] == source->sizes[d];
    }
    if (!same) {
        return THError_set(TH_ERR_RUNTIME,
                           "source tensor shape must match self tensor "
                           "shape, excluding the specified dimension. Got "
                           "self.shape = %s source.shape = %s",
                           SHAPE(self), SHAPE(source));
    }
    return 0;
}

int
THTensor_indexAdd(THTensor *self, int64_t dim, THTensor *index,
                  THTensor *source, THScalar alpha)
{
    if (THTensor_wrapDim(dim, self->ndim, &dim) < 0) {
        return -1;
    }
    if (index->ndim > 1) {
        return THError_set(TH_ERR_INDEX,
                           "index_add_(): Index is supposed to be a vector, "
                           "but got dim: %d with type: %s and size: %s",
                           index->ndim, THDtype_scalarTypeName(index->dtype),
                           SHAPE(index));
    }
    if (!is_index_dtype(index->dtype)) {
        return THError_set(TH_ERR_RUNTIME,
                           "index_add_(): Expected dtype int32/int64 for "
                           "index but got: %s",
                           THDtype_scalarTypeName(index->dtype));
    }
    if (self->dtype != source->dtype) {
        return THError_set(TH_ERR_RUNTIME,
                           "index_add_(): self (%s) and source (%s) must "
                           "have the same scalar type",
                           THDtype_scalarTypeName(self->dtype),
                           THDtype_scalarTypeName(source->dtype));
    }
    if (check_index_add_shapes(self, dim, index, source) < 0
        || check_written_apart(self, index, source) < 0) {
        return -1;
    }
    THTensor *source_1d = new_at_least_1d(source);
    if (source_1d == NULL) {
        return -1;
    }
    BadIndex bad;
    int status = dim_put(self, dim, index, source_1d, TH_SCATTER_ADD, alpha,
                         false, &bad);
    if (bad.found) {
        set_dim_bounds_error(TH_ERR_RUNTIME, "", dim, &bad);
    }
    THTensor_release(source_1d);
    return status;
}

/* ---- index_copy_ ---------------------------------------------------------- */

/* The sizes of t without dim (none for a 0-d t), as PyTorch prints a
 * std::vector in index_copy_'s message: "2 4", "" when empty. */
static ShapeText
slice_text(const THTensor *t, int64_t dim)
{
    ShapeText s = {{0}};
    size_t used = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (d != dim) {
            used += (size_t)snprintf(s.text + used, sizeof(s.text) - used,
                                     "%s%lld", used == 0 ? "" : " ",
                                     (long long)t->sizes[d]);
        }
    }
    return s;
}

static bool
same_slices(const THTensor *self, const THTensor *source, int64_t dim)
{
    int self_dims = self->ndim - (self->ndim > 0);
    int source_dims = source->ndim - (source->ndim > 0);
    if (self_dims != source_dims) {
        return false;
    }
    for (int d = 0; d < self->ndim; d++) {
        if (d != dim && self->sizes[d] != source->sizes[d]) {
            return false;
        }
    }
    return true;
}

/* index_copy_'s checks, in PyTorch's order (dim already wrapped). */
static int
check_index_copy_args(THTensor *self, int64_t dim, THTensor *index,
                      THTensor *source)
{
    if (check_written_apart(self, index, source) < 0) {
        return -1;
    }
    if (index->ndim > 1) {
        return THError_set(TH_ERR_INDEX,
                           "index_copy_(): Index should have dimension 1 or "
                           "0 (got %d)",
                           index->ndim);
    }
    if (source->ndim == 0 && index->numel != 1) {
        return THError_set(TH_ERR_INDEX,
                           "index_copy_(): When source is scalar, index "
                           "should have one element (got %lld)",
                           (long long)index->numel);
    }
    if (source->ndim != self->ndim && source->ndim != 0 && self->ndim != 0) {
        return THError_set(TH_ERR_INDEX,
                           "index_copy_(): When source and destination are "
                           "not scalars, their dimensionality must match. "
                           "Source dimensionality (%d), destination "
                           "dimensionality (%d)",
                           source->ndim, self->ndim);
    }
    if (index->dtype != TH_Int64) {
        return THError_set(TH_ERR_RUNTIME,
                           "index_copy_(): Expected a long tensor for index, "
                           "but got %s",
                           THDtype_scalarTypeName(index->dtype));
    }
    if (self->dtype != source->dtype) {
        return THError_set(TH_ERR_RUNTIME,
                           "index_copy_(): self and source expected to have "
                           "the same dtype, but got (self) %s and (source) %s",
                           THDtype_scalarTypeName(self->dtype),
                           THDtype_scalarTypeName(source->dtype));
    }
    if (!same_slices(self, source, dim)) {
        /* (PyTorch says "at dimension 0" of the source whatever dim is) */
        return THError_set(TH_ERR_RUNTIME,
                           "index_copy_(): Source/destination tensor must "
                           "have same slice shapes. Destination slice shape: "
                           "%s at dimension %lld and source slice shape: %s "
                           "at dimension 0.",
                           slice_text(self, dim).text, (long long)dim,
                           slice_text(source, dim).text);
    }
    if (source->ndim != 0 && index->numel != source->sizes[dim]) {
        return THError_set(TH_ERR_INDEX,
                           "index_copy_(): Number of indices (%lld) should be "
                           "equal to source.size(dim) (%lld)",
                           (long long)index->numel,
                           (long long)source->sizes[dim]);
    }
    return 0;
}

int
THTensor_indexCopy(THTensor *self, int64_t dim, THTensor *index,
                   THTensor *source)
{
    if (THTensor_wrapDim(dim, self->ndim, &dim) < 0
        || check_index_copy_args(self, dim, index, source) < 0) {
        return -1;
    }
    if (source->numel == 0) {
        /* nothing to copy, so no position is read (PyTorch checks them
         * only as it copies) */
        THTensor_bumpVersion(self);
        return 0;
    }
    THTensor *source_1d = new_at_least_1d(source);
    if (source_1d == NULL) {
        return -1;
    }
    BadIndex bad;
    int status = dim_put(self, dim, index, source_1d, TH_SCATTER_ASSIGN,
                         THScalar_fromInt(1), false, &bad);
    if (bad.found) {
        set_dim_bounds_error(TH_ERR_INDEX, "index_copy_(): ", dim, &bad);
    }
    THTensor_release(source_1d);
    return status;
}

/* ---- gather and scatter ---------------------------------------------------- */

/* The offsets of index's positions along `dim` of self, for gather and
 * scatter (which, as in PyTorch, take no negative positions). */
static THTensor *
new_dim_offsets(THTensor *self, int64_t dim, THTensor *index)
{
    THTensor *offsets = new_zero_offsets(index->ndim, index->sizes);
    if (offsets == NULL) {
        return NULL;
    }
    BadIndex bad = {0};
    if (add_index_offsets(offsets, index, size_at(self, dim),
                          stride_at(self, dim) * THTensor_itemsize(self),
                          false, &bad)
        < 0) {
        if (bad.found) {
            set_dim_bounds_error(TH_ERR_RUNTIME, "", dim, &bad);
        }
        THTensor_release(offsets);
        return NULL;
    }
    return offsets;
}

/* `tensor` seen in index's shape: its own strides, except 0 along `dim`
 * when `skip_dim` (the offsets move along it instead). */
static THIterOperand
operand_in_index_shape(const THTensor *tensor, const THTensor *index,
                       int64_t dim, bool skip_dim, int64_t *strides)
{
    for (int d = 0; d < index->ndim; d++) {
        strides[d] = (skip_dim && d == dim) ? 0 : stride_at(tensor, d);
    }
    THIterOperand op = {
        .data = THTensor_data(tensor),
        .ndim = index->ndim,
        .sizes = index->sizes,
        .strides = strides,
        .itemsize = (int)THTensor_itemsize(tensor),
    };
    return op;
}

THTensor *
THTensor_newGather(THTensor *self, int64_t dim, THTensor *index)
{
    if (THTensor_wrapDim(dim, self->ndim, &dim) < 0) {
        return NULL;
    }
    if (!is_index_dtype(index->dtype)) {
        THError_set(TH_ERR_RUNTIME,
                    "gather(): Expected dtype int32/int64 for index");
        return NULL;
    }
    if (ndim_at_least_1(index) != ndim_at_least_1(self)) {
        THError_set(TH_ERR_RUNTIME,
                    "Index tensor must have the same number of dimensions "
                    "as input tensor");
        return NULL;
    }
    for (int d = 0; d < index->ndim; d++) {
        if (d != dim && index->sizes[d] > size_at(self, d)) {
            THError_set(TH_ERR_RUNTIME,
                        "Size does not match at dimension %d expected index "
                        "%s to be no larger than self %s apart from "
                        "dimension %lld",
                        d, SHAPE(index), SHAPE(self), (long long)dim);
            return NULL;
        }
    }
    THTensor *offsets = new_dim_offsets(self, dim, index);
    if (offsets == NULL) {
        return NULL;
    }
    THTensor *result = THTensor_newEmpty(index->ndim, index->sizes,
                                         self->dtype, TH_DEVICE_CPU);
    if (result != NULL && result->numel > 0) {
        int64_t strides[TH_MAX_DIMS];
        THIterOperand ops[3] = {
            THIterOperand_fromTensor(result),
            operand_in_index_shape(self, index, dim, true, strides),
            THIterOperand_fromTensor(offsets)};
        if (run_gather(ops, index->ndim, index->sizes) < 0) {
            THTensor_release(result);
            result = NULL;
        }
    }
    THTensor_release(offsets);
    return result;
}

/* scatter's shape rule: index fits in self (except along dim) and in
 * src. */
static int
check_scatter_shapes(const THTensor *self, int64_t dim,
                     const THTensor *index, const THTensor *src)
{
    if (ndim_at_least_1(index) != ndim_at_least_1(self)) {
        return THError_set(TH_ERR_RUNTIME,
                           "Index tensor must have the same number of "
                           "dimensions as self tensor");
    }
    if (src != NULL && ndim_at_least_1(index) != ndim_at_least_1(src)) {
        return THError_set(TH_ERR_RUNTIME,
                           "Index tensor must have the same number of "
                           "dimensions as src tensor");
    }
    bool fits = true;
    for (int d = 0; d < index->ndim; d++) {
        fits = fits && (d == dim || index->sizes[d] <= size_at(self, d))
               && (src == NULL || index->sizes[d] <= size_at(src, d));
    }
    if (fits) {
        return 0;
    }
    if (src == NULL) {
        return THError_set(TH_ERR_RUNTIME,
                           "Expected index %s to be no larger than self %s "
                           "apart from dimension %lld",
                           SHAPE(index), SHAPE(self), (long long)dim);
    }
    return THError_set(TH_ERR_RUNTIME,
                       "Expected index %s to be no larger than self %s apart "
                       "from dimension %lld and to be no larger size than "
                       "src %s",
                       SHAPE(index), SHAPE(self), (long long)dim,
                       SHAPE(src));
}

/* scatter with src a tensor shaped like index (is_value false) or a 0-d
 * value of self's dtype (is_value true). */
/* Everything scatter checks before writing; *dim is wrapped. */
static int
check_scatter_args(THTensor *self, int64_t *dim, THTensor *index,
                   THTensor *src, bool is_value)
{
    if (THTensor_wrapDim(*dim, self->ndim, dim) < 0) {
        return -1;
    }
    if (!is_index_dtype(index->dtype)) {
        return THError_set(TH_ERR_RUNTIME,
                           "scatter(): Expected dtype int32/int64 for index");
    }
    if (self->dtype != src->dtype) {
        return THError_set(TH_ERR_RUNTIME,
                           "scatter(): Expected self.dtype to be equal to "
                           "src.dtype");
    }
    if (check_written(self) < 0
        || check_scatter_shapes(self, *dim, index, is_value ? NULL : src)
               < 0
        || THTensor_checkNoOverlap(self, index) < 0
        || (!is_value && THTensor_checkNoOverlap(self, src) < 0)) {
        return -1;
    }
    return 0;
}

static int
scatter_impl(THTensor *self, int64_t dim, THTensor *index, THTensor *src,
             bool is_value, THScatterReduce reduce)
{
    if (check_scatter_args(self, &dim, index, src, is_value) < 0) {
        return -1;
    }
    PutMode mode;
    THTensor *offsets = new_dim_offsets(self, dim, index);
    THTensor *source = offsets == NULL ? NULL
                                       : new_source_apart_from(src, self);
    int status = source == NULL ? -1
                                : put_mode(reduce, self->dtype,
                                           THScalar_fromInt(1), &mode);
    if (status == 0 && index->numel > 0) {
        int64_t self_strides[TH_MAX_DIMS], src_strides[TH_MAX_DIMS];
        THIterOperand ops[3] = {
            operand_in_index_shape(self, index, dim, true, self_strides),
            is_value ? THIterOperand_fromTensor(source)
                     : operand_in_index_shape(source, index, dim, false,
                                              src_strides),
            THIterOperand_fromTensor(offsets)};
        status = run_put(ops, index->ndim, index->sizes, &mode);
    }
    if (source != NULL) {
        THTensor_release(source);
    }
    if (offsets != NULL) {
        THTensor_release(offsets);
    }
    if (status == 0) {
        THTensor_bumpVersion(self);
    }
    return status;
}

int
THTensor_scatter(THTensor *self, int64_t dim, THTensor *index,
                 THTensor *src, THScatterReduce reduce)
{
    return scatter_impl(self, dim, index, src, false, reduce);
}

int
THTensor_scatterValue(THTensor *self, int64_t dim, THTensor *index,
                      THScalar value, THScatterReduce reduce)
{
    THTensor *src = new_scalar_tensor(value, self->dtype);
    if (src == NULL) {
        return -1;
    }
    int status = scatter_impl(self, dim, index, src, true, reduce);
    THTensor_release(src);
    return status;
}

/* ---- scatter_reduce --------------------------------------------------------- */

/* The lowest and highest value of a bool or integer dtype. */
static void
integer_range(THDtype dtype, int64_t *lowest, int64_t *highest)
{
    switch (dtype) {
    case TH_Bool: *lowest = 0; *highest = 1; return;
    case TH_UInt8: *lowest = 0; *highest = UINT8_MAX; return;
    case TH_Int8: *lowest = INT8_MIN; *highest = INT8_MAX; return;
    case TH_Int16: *lowest = INT16_MIN; *highest = INT16_MAX; return;
    case TH_Int32: *lowest = INT32_MIN; *highest = INT32_MAX; return;
    default: *lowest = INT64_MIN; *highest = INT64_MAX; return;
    }
}

/* The value a reduction leaves unchanged: 0, 1, or the dtype's lowest /
 * highest value (infinities for floats). */
static THScalar
reduction_identity(THScatterReduce reduce, THDtype dtype)
{
    int64_t lowest, highest;
    integer_range(dtype, &lowest, &highest);
    bool floating = THDtype_isFloating(dtype);
    switch (reduce) {
    case TH_SCATTER_MULTIPLY:
        return THScalar_fromInt(1);
    case TH_SCATTER_AMAX:
        return floating ? THScalar_fromDouble(-INFINITY)
                        : THScalar_fromInt(lowest);
    case TH_SCATTER_AMIN:
        return floating ? THScalar_fromDouble(INFINITY)
                        : THScalar_fromInt(highest);
    default:
        return THScalar_fromInt(0);
    }
}

/* self = sum / count where count > 0, count being how many values each
 * position reduced (1 for self's own when include_self); floor division
 * for integers, as PyTorch. */
static int
divide_by_counts(THTensor *self, int64_t dim, THTensor *index,
                 bool include_self)
{
    THTensor *counts = THTensor_newEmpty(self->ndim, self->sizes,
                                         self->dtype, TH_DEVICE_CPU);
    if (counts == NULL) {
        return -1;
    }
    int status = THTensor_fill(counts, THScalar_fromInt(include_self));
    if (status == 0) {
        status = THTensor_scatterValue(counts, dim, index,
                                       THScalar_fromInt(1), TH_SCATTER_ADD);
    }
    THPointwiseOptions at_least_one = {.default_float = self->dtype};
    THPointwiseArg clamp_args[2] = {THPointwiseArg_tensor(counts),
                                    THPointwiseArg_number(
                                        THScalar_fromInt(1))};
    THTensor *divisor = status == 0 ? THPointwise_apply(TH_OP_MAXIMUM,
                                                        clamp_args,
                                                        &at_least_one)
                                    : NULL;
    THTensor_release(counts);
    if (divisor == NULL) {
        return -1;
    }
    THPointwiseOptions in_place = {.inplace = true,
                                   .default_float = self->dtype};
    THPointwiseArg div_args[2] = {THPointwiseArg_tensor(self),
                                  THPointwiseArg_tensor(divisor)};
    THTensor *result = THPointwise_apply(
        THDtype_isFloating(self->dtype) ? TH_OP_DIV : TH_OP_DIV_FLOOR,
        div_args, &in_place);
    THTensor_release(divisor);
    THTensor_release(result);
    return result == NULL ? -1 : 0;
}

int
THTensor_scatterReduce(THTensor *self, int64_t dim, THTensor *index,
                       THTensor *src, THScatterReduce reduce,
                       bool include_self)
{
    if (reduce == TH_SCATTER_ASSIGN) {
        return THError_set(TH_ERR_RUNTIME, "scatter_reduce(): no reduction");
    }
    /* checked first: the identity goes in before the values */
    int64_t wrapped = dim;
    if (check_scatter_args(self, &wrapped, index, src, false) < 0) {
        return -1;
    }
    if (!include_self
        && THTensor_scatterValue(self, dim, index,
                                 reduction_identity(reduce, self->dtype),
                                 TH_SCATTER_ASSIGN)
               < 0) {
        return -1;
    }
    if (scatter_impl(self, dim, index, src, false, reduce) < 0) {
        return -1;
    }
    return reduce == TH_SCATTER_MEAN
               ? divide_by_counts(self, dim, index, include_self)
               : 0;
}

/* ---- masks --------------------------------------------------------------------- */

int
THTensor_maskedFill(THTensor *self, THTensor *mask, THScalar value)
{
    if (THTensor_checkWritable(self) < 0) {
        return -1;
    }
    if (mask->dtype != TH_Bool) {
        return THError_set(TH_ERR_RUNTIME,
                           "masked_fill_ only supports boolean masks, but "
                           "got mask with dtype %s",
                           THDtype_cppTypeName(mask->dtype));
    }
    int ndim;
    int64_t sizes[TH_MAX_DIMS];
    if (THIter_broadcastShape(self->ndim, self->sizes, mask->ndim,
                              mask->sizes, &ndim, sizes)
        < 0) {
        return -1;
    }
    if (ndim != self->ndim) {
        return THError_set(TH_ERR_RUNTIME,
                           "output with shape %s doesn't match the "
                           "broadcast shape %s",
                           SHAPE(self), shape_text(ndim, sizes).text);
    }
    if (THTensor_checkNoInternalOverlap(self) < 0) {
        return -1;
    }
    THTensor *fill = new_scalar_tensor(value, self->dtype);
    if (fill == NULL) {
        return -1;
    }
    THIter iter;
    THTensor *operands[3] = {self, mask, fill};
    int status = THIter_init(&iter, 3, operands);
    if (status == 0 && self->numel > 0) {
        THIter_runParallel(&iter, fill_where_loops[THTensor_itemsize(self)],
                           NULL, TH_PARALLEL_GRAIN);
    }
    THTensor_release(fill);
    if (status == 0) {
        THTensor_bumpVersion(self);
    }
    return status;
}

THTensor *
THTensor_newMaskedSelect(THTensor *self, THTensor *mask)
{
    if (mask->dtype != TH_Bool) {
        THError_set(TH_ERR_RUNTIME,
                    "masked_select: expected BoolTensor for mask");
        return NULL;
    }
    int ndim;
    int64_t sizes[TH_MAX_DIMS];
    if (THIter_broadcastShape(mask->ndim, mask->sizes, self->ndim,
                              self->sizes, &ndim, sizes)
        < 0) {
        return NULL;
    }
    if (ndim == 0) { /* a mask needs a dim to stand at */
        ndim = 1;
        sizes[0] = 1;
    }
    THTensor *self_wide = THTensor_newExpand(self, ndim, sizes);
    THTensor *mask_wide = self_wide == NULL
                              ? NULL
                              : THTensor_newExpand(mask, ndim, sizes);
    THTensor *result = mask_wide == NULL
                           ? NULL
                           : THTensor_newIndex(self_wide, 1, &mask_wide);
    if (mask_wide != NULL) {
        THTensor_release(mask_wide);
    }
    if (self_wide != NULL) {
        THTensor_release(self_wide);
    }
    return result;
}

/* ---- take and put_: flat positions ----------------------------------------- */

/* `tensor`'s elements in row-major order, as a 1-d tensor (a view when it
 * is contiguous, else a contiguous copy). */
static THTensor *
new_flattened(THTensor *tensor)
{
    THTensor *values = THTensor_newContiguous(tensor);
    if (values == NULL) {
        return NULL;
    }
    int64_t numel = tensor->numel;
    THTensor *flat = THTensor_newView(values, 1, &numel);
    THTensor_release(values);
    return flat;
}

/* take's and put_'s message for a flat position out of range. */
static void
set_flat_bounds_error(const BadIndex *bad)
{
    THError_set(TH_ERR_INDEX,
                "out of range: tried to access index %lld on a tensor of "
                "%lld elements.",
                (long long)bad->value, (long long)bad->size);
}

THTensor *
THTensor_newTake(THTensor *self, THTensor *index)
{
    if (index->dtype != TH_Int64) {
        THError_set(TH_ERR_RUNTIME,
                    "take(): Expected a long tensor for index, but got %s",
                    THDtype_scalarTypeName(index->dtype));
        return NULL;
    }
    THTensor *flat = new_flattened(self);
    if (flat == NULL) {
        return NULL;
    }
    IndexPlan plan;
    BadIndex bad;
    THTensor *result = NULL;
    if (plan_init(&plan, flat, 1, &index, true, &bad) == 0) {
        result = plan_gather(&plan);
        plan_release(&plan);
    }
    else if (bad.found) {
        set_flat_bounds_error(&bad);
    }
    THTensor_release(flat);
    return result;
}

/* put_'s checks, in PyTorch's order. */
static int
check_put_args(THTensor *self, THTensor *index, THTensor *source)
{
    if (index->dtype != TH_Int64) {
        return THError_set(TH_ERR_RUNTIME,
                           "put_(): Expected a long tensor for index, but got "
                           "%s",
                           THDtype_scalarTypeName(index->dtype));
    }
    if (self->dtype != source->dtype) {
        return THError_set(TH_ERR_RUNTIME,
                           "put_(): self and source expected to have the "
                           "same dtype, but got self.dtype = %s and "
                           "source.dtype = %s",
                           THDtype_scalarTypeName(self->dtype),
                           THDtype_scalarTypeName(source->dtype));
    }
    if (source->numel != index->numel) {
        return THError_set(TH_ERR_INDEX,
                           "put_(): Expected source and index to have the "
                           "same number of elements, but got source.numel() "
                           "= %lld, index.numel() = %lld",
                           (long long)source->numel, (long long)index->numel);
    }
    if (self->numel == 0 && index->numel != 0) {
        return THError_set(TH_ERR_INDEX,
                           "put_(): Tried to put elements into an empty "
                           "tensor");
    }
    if (check_written_apart(self, index, source) < 0) {
        return -1;
    }
    return 0;
}

/* Turns flat (row-major) element numbers into byte offsets through the
 * strides of `self` (which has elements). */
static void
flat_to_byte_offsets(int64_t *offsets, int64_t n, const THTensor *self)
{
    int64_t itemsize = THTensor_itemsize(self);
    for (int64_t k = 0; k < n; k++) {
        int64_t rest = offsets[k], element = 0;
        for (int d = self->ndim - 1; d >= 0; d--) {
            element += rest % self->sizes[d] * self->strides[d];
            rest /= self->sizes[d];
        }
        offsets[k] = element * itemsize;
    }
}

/* The byte offsets into self of index's flat positions (negative ones
 * count from the end), 1-d in index's row-major order; NULL with `bad`
 * filled when one is out of range. */
static THTensor *
new_flat_offsets(THTensor *self, THTensor *index, BadIndex *bad)
{
    int64_t n = index->numel;
    THTensor *offsets = new_zero_offsets(1, &n);
    THTensor *positions = offsets == NULL ? NULL : new_flattened(index);
    /* a contiguous self: a position's offset is position * itemsize */
    int64_t step = self->is_contiguous ? THTensor_itemsize(self) : 1;
    int status = positions == NULL
                     ? -1
                     : add_index_offsets(offsets, positions, self->numel,
                                         step, true, bad);
    THTensor_release(positions); /* (NULL is fine) */
    if (status < 0) {
        THTensor_release(offsets);
        return NULL;
    }
    if (!self->is_contiguous) {
        flat_to_byte_offsets((int64_t *)THTensor_data(offsets), n, self);
    }
    return offsets;
}

int
THTensor_put(THTensor *self, THTensor *index, THTensor *source,
             bool accumulate)
{
    if (check_put_args(self, index, source) < 0) {
        return -1;
    }
    if (index->numel == 0) {
        THTensor_bumpVersion(self);
        return 0;
    }
    BadIndex bad = {0};
    THTensor *offsets = new_flat_offsets(self, index, &bad);
    if (offsets == NULL) {
        if (bad.found) {
            set_flat_bounds_error(&bad);
        }
        return -1;
    }
    THTensor *flat_source = new_flattened(source);
    THTensor *values = flat_source == NULL
                           ? NULL
                           : new_source_apart_from(flat_source, self);
    PutMode mode;
    int status = values == NULL
                     ? -1
                     : put_mode(accumulate ? TH_SCATTER_ADD
                                           : TH_SCATTER_ASSIGN,
                                self->dtype, THScalar_fromInt(1), &mode);
    if (status == 0) {
        /* the destination: self's first element, stride 0 (the offsets
         * move) */
        int64_t no_stride = 0;
        THIterOperand ops[3] = {
            {.data = THTensor_data(self), .ndim = 1, .sizes = offsets->sizes,
             .strides = &no_stride,
             .itemsize = (int)THTensor_itemsize(self)},
            THIterOperand_fromTensor(values),
            THIterOperand_fromTensor(offsets)};
        status = run_put(ops, 1, offsets->sizes, &mode);
    }
    THTensor_release(values); /* (NULL is fine) */
    THTensor_release(flat_source);
    THTensor_release(offsets);
    if (status == 0) {
        THTensor_bumpVersion(self);
    }
    return status;
}
