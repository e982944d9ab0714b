/*
 * THShape.c -- cat, stack, flip, roll, repeat, repeat_interleave,
 * diagonal/diag, tril/triu and one_hot.  See THShape.h.
 *
 * Note [Moving blocks]
 * ~~~~~~~~~~~~~~~~~~~~
 * These operators only move elements, never convert them, so they are all
 * built from one primitive: copy a strided block of elements onto another
 * block of the same shape and dtype (move_block).  A Block is a raw
 * (data, sizes, strides) triple, not a THTensor: narrowing one is a pointer
 * bump with no allocation, and its strides may be negative, which is how
 * flip reads its input backwards.  The copy loops are generated per item
 * size (1, 2, 4, 8 bytes) rather than per dtype: moving a float32 is moving
 * four bytes.
 */
#include "THShape.h"

#include "THIter.h"
#include "THParallel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- blocks and the move loops (Note [Moving blocks]) ----------------------- */

typedef struct {
    char *data;
    int ndim;
    int64_t sizes[TH_MAX_DIMS];
    int64_t strides[TH_MAX_DIMS]; /* in elements; may be negative */
} Block;

static Block
block_of(const THTensor *tensor)
{
    Block block = {.data = THTensor_data(tensor), .ndim = tensor->ndim};
    memcpy(block.sizes, tensor->sizes, sizeof(block.sizes));
    memcpy(block.strides, tensor->strides, sizeof(block.strides));
    return block;
}

/* The sub-block [start, start + length) along dim. */
static Block
block_narrow(Block block, int64_t dim, int64_t start, int64_t length,
             int64_t itemsize)
{
    block.data += start * block.strides[dim] * itemsize;
    block.sizes[dim] = length;
    return block;
}

#define TH_FORALL_ITEMSIZES(_) \
    _(1, uint8_t)              \
    _(2, uint16_t)             \
    _(4, uint32_t)             \
    _(8, uint64_t)

/* move_<size>: data[0] = data[1], element by element (a THLoop).  The
 * contiguous branch is a plain indexed loop so the compiler vectorises
 * it. */
#define TH_DEFINE_MOVE(size, type)                                           \
    static void move_##size(char **data, const int64_t *strides, int64_t n,  \
                            void *ctx)                                       \
    {                                                                        \
        (void)ctx;                                                           \
        if (strides[0] == size && strides[1] == size) {                      \
            type *dst = (type *)data[0];                                     \
            const type *src = (const type *)data[1];                         \
            for (int64_t i = 0; i < n; i++) {                                \
                dst[i] = src[i];                                             \
            }                                                                \
            return;                                                          \
        }                                                                    \
        for (int64_t i = 0; i < n; i++) {                                    \
            *(type *)(data[0] + i * strides[0]) =                            \
                *(const type *)(data[1] + i * strides[1]);                   \
        }                                                                    \
    }
TH_FORALL_ITEMSIZES(TH_DEFINE_MOVE)
#undef TH_DEFINE_MOVE

static THLoop
move_loop(int64_t itemsize)
{
    switch (itemsize) {
    case 1: return move_1;
    case 2: return move_2;
    case 4: return move_4;
    default: return move_8;
    }
}

/* dst = src for two blocks of dst's shape that do not overlap. */
static int
move_block(const Block *dst, const Block *src, int64_t itemsize)
{
    THIterOperand ops[2] = {
        {dst->data, dst->ndim, dst->sizes, dst->strides, (int)itemsize},
        {src->data, src->ndim, src->sizes, src->strides, (int)itemsize},
    };
    THIter iter;
    if (THIter_initOperands(&iter, 2, ops, dst->ndim, dst->sizes) < 0) {
        return -1;
    }
    if (iter.numel > 0) {
        THIter_runParallel(&iter, move_loop(itemsize), NULL,
                           TH_PARALLEL_GRAIN);
    }
    return 0;
}

#define TH_SHAPE_BUF 512

/* ---- cat and stack ------------------------------------------------------------- */


/* PyTorch's canCast: a same-kind-or-wider rule that forbids floating to
 * integral and anything but bool to bool. */
static bool
can_cast(THDtype from, THDtype to)
{
    if (THDtype_isFloating(from) && !THDtype_isFloating(to)) {
        return false;
    }
    return from == TH_Bool || to != TH_Bool;
}

/* A 1-d tensor with no elements: PyTorch's legacy "no data" tensor, which
 * cat skips whatever the other inputs' shapes. */
static bool
is_legacy_empty(const THTensor *tensor)
{
    return tensor->ndim == 1 && tensor->sizes[0] == 0;
}

/* Checks cat's inputs and computes the result: shape, dtype and the
 * wrapped dim. */
static int
cat_plan(int n, THTensor *const *tensors, int64_t dim, int *ndim,
         int64_t *sizes, THDtype *dtype, int64_t *cat_dim)
{
    if (n == 0) {
        return THError_set(TH_ERR_VALUE,
                           "torch.cat(): expected a non-empty list of "
                           "Tensors");
    }
    const THTensor *ref = NULL;
    *dtype = tensors[0]->dtype;
    for (int i = 0; i < n; i++) {
        if (tensors[i]->ndim == 0) {
            return THError_set(TH_ERR_RUNTIME,
                               "zero-dimensional tensor (at position %d) "
                               "cannot be concatenated",
                               i);
        }
        *dtype = THDtype_promote(*dtype, tensors[i]->dtype);
        if (ref == NULL && !is_legacy_empty(tensors[i])) {
            ref = tensors[i];
        }
    }
    if (ref == NULL) { /* only legacy empties: the result is one too */
        *ndim = 1;
        sizes[0] = 0;
        *cat_dim = 0;
        return 0;
    }
    if (THTensor_wrapDim(dim, ref->ndim, cat_dim) < 0) {
        return -1;
    }
    *ndim = ref->ndim;
    memcpy(sizes, ref->sizes, sizeof(int64_t) * (size_t)ref->ndim);
    sizes[*cat_dim] = 0;
    for (int i = 0; i < n; i++) {
        const THTensor *t = tensors[i];
        if (is_legacy_empty(t)) {
            continue;
        }
        if (t->ndim != ref->ndim) {
            return THError_set(TH_ERR_RUNTIME,
                               "Tensors must have same number of dimensions: "
                               "got %d and %d",
                               ref->ndim, t->ndim);
        }
        for (int d = 0; d < t->ndim; d++) {
            if (d != *cat_dim && t->sizes[d] != ref->sizes[d]) {
                return THError_set(
                    TH_ERR_RUNTIME,
                    "Sizes of tensors must match except in dimension %lld. "
                    "Expected size %lld but got size %lld for tensor number "
                    "%d in the list.",
                    (long long)*cat_dim, (long long)ref->sizes[d],
                    (long long)t->sizes[d], i);
            }
        }
        sizes[*cat_dim] += t->sizes[*cat_dim];
    }
    return 0;
}

/* Writes each input, converted to out's dtype, into its slice of out. */
static int
cat_write(THTensor *out, int n, THTensor *const *tensors, int64_t dim)
{
    int64_t itemsize = THTensor_itemsize(out);
    Block dst = block_of(out);
    int64_t offset = 0;
    for (int i = 0; i < n; i++) {
        if (is_legacy_empty(tensors[i])) {
            continue;
        }
        THTensor *src = THTensor_newCast(tensors[i], out->dtype, false);
        if (src == NULL) {
            return -1;
        }
        Block part = block_narrow(dst, dim, offset, src->sizes[dim], itemsize);
        Block from = block_of(src);
        int status = move_block(&part, &from, itemsize);
        offset += src->sizes[dim];
        THTensor_release(src);
        if (status < 0) {
            return -1;
        }
    }
    return 0;
}

THTensor *
THTensor_newCat(int n, THTensor *const *tensors, int64_t dim)
{
    int ndim;
    int64_t sizes[TH_MAX_DIMS], cat_dim;
    THDtype dtype;
    if (cat_plan(n, tensors, dim, &ndim, sizes, &dtype, &cat_dim) < 0) {
        return NULL;
    }
    THTensor *out =
        THTensor_newEmpty(ndim, sizes, dtype, tensors[0]->storage->device);
    if (out != NULL && cat_write(out, n, tensors, cat_dim) < 0) {
        THTensor_release(out);
        return NULL;
    }
    return out;
}

/* Everything that makes `out` unusable for a result of this shape and
 * dtype, checked before anything is written. */
static int
check_out(const char *fname, const THTensor *out, int ndim,
          const int64_t *sizes, THDtype dtype, int n,
          THTensor *const *inputs)
{
    if (THTensor_checkWritable(out) < 0) {
        return -1;
    }
    if (out->ndim != ndim
        || memcmp(out->sizes, sizes, sizeof(int64_t) * (size_t)ndim) != 0) {
        char want[TH_SHAPE_BUF], got[TH_SHAPE_BUF];
        THTensor_formatSizes(want, sizeof(want), ndim, sizes);
        THTensor_formatSizes(got, sizeof(got), out->ndim, out->sizes);
        return THError_set(TH_ERR_RUNTIME,
                           "%s(): expected out of shape %s, but got %s "
                           "(ember does not resize out tensors)",
                           fname, want, got);
    }
    if (!can_cast(dtype, out->dtype)) {
        return THError_set(TH_ERR_TYPE,
                           "%s(): input types can't be cast to the desired "
                           "output type %s",
                           fname, THDtype_scalarTypeName(out->dtype));
    }
    if (THTensor_checkNoInternalOverlap(out) < 0) {
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (THTensor_mayOverlap(out, inputs[i])) {
            return THError_set(TH_ERR_RUNTIME,
                               "unsupported operation: some elements of the "
                               "input tensor and the written-to tensor refer "
                               "to a single memory location.");
        }
    }
    return 0;
}

int
THTensor_catOut(THTensor *out, int n, THTensor *const *tensors, int64_t dim)
{
    int ndim;
    int64_t sizes[TH_MAX_DIMS], cat_dim;
    THDtype dtype;
    if (cat_plan(n, tensors, dim, &ndim, sizes, &dtype, &cat_dim) < 0
        || check_out("torch.cat", out, ndim, sizes, dtype, n, tensors) < 0
        || cat_write(out, n, tensors, cat_dim) < 0) {
        return -1;
    }
    THTensor_bumpVersion(out);
    return 0;
}

static void
release_all(int n, THTensor **tensors)
{
    for (int i = 0; i < n; i++) {
        THTensor_release(tensors[i]);
    }
    free(tensors);
}

/* The inputs of stack as views with the new dim of size 1 inserted, ready
 * for cat; NULL on error.  Free with release_all. */
static THTensor **
stack_views(int n, THTensor *const *tensors, int64_t dim, int64_t *new_dim)
{
    if (n == 0) {
        THError_set(TH_ERR_RUNTIME, "stack expects a non-empty TensorList");
        return NULL;
    }
    const THTensor *first = tensors[0];
    for (int i = 1; i < n; i++) {
        const THTensor *t = tensors[i];
        if (t->ndim != first->ndim
            || memcmp(t->sizes, first->sizes,
                      sizeof(int64_t) * (size_t)t->ndim) != 0) {
            char a[TH_SHAPE_BUF], b[TH_SHAPE_BUF];
            THTensor_formatSizes(a, sizeof(a), first->ndim, first->sizes);
            THTensor_formatSizes(b, sizeof(b), t->ndim, t->sizes);
            THError_set(TH_ERR_RUNTIME,
                        "stack expects each tensor to be equal size, but "
                        "got %s at entry 0 and %s at entry %d",
                        a, b, i);
            return NULL;
        }
    }
    if (THTensor_wrapDim(dim, first->ndim + 1, new_dim) < 0) {
        return NULL;
    }
    THTensor **views = calloc((size_t)n, sizeof(*views));
    if (views == NULL) {
        THError_set(TH_ERR_MEMORY, "stack: out of memory");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        views[i] = THTensor_newUnsqueeze(tensors[i], *new_dim);
        if (views[i] == NULL) {
            release_all(n, views);
            return NULL;
        }
    }
    return views;
}

THTensor *
THTensor_newStack(int n, THTensor *const *tensors, int64_t dim)
{
    int64_t new_dim;
    THTensor **views = stack_views(n, tensors, dim, &new_dim);
    if (views == NULL) {
        return NULL;
    }
    THTensor *out = THTensor_newCat(n, views, new_dim);
    release_all(n, views);
    return out;
}

int
THTensor_stackOut(THTensor *out, int n, THTensor *const *tensors,
                  int64_t dim)
{
    int64_t new_dim;
    THTensor **views = stack_views(n, tensors, dim, &new_dim);
    if (views == NULL) {
        return -1;
    }
    int status = THTensor_catOut(out, n, views, new_dim);
    release_all(n, views);
    return status;
}

/* ---- flip and roll ------------------------------------------------------------- */

THTensor *
THTensor_newFlip(THTensor *tensor, int ndims, const int64_t *dims)
{
    bool flipped[TH_MAX_DIMS] = {false};
    for (int i = 0; i < ndims; i++) {
        int64_t d;
        if (THTensor_wrapDim(dims[i], tensor->ndim, &d) < 0) {
            return NULL;
        }
        if (flipped[d]) {
            THError_set(TH_ERR_RUNTIME,
                        "dim %lld appears multiple times in the list of dims",
                        (long long)d);
            return NULL;
        }
        flipped[d] = true;
    }
    THTensor *out = THTensor_newEmptyLike(tensor, tensor->dtype);
    if (out == NULL || tensor->numel == 0) {
        return out;
    }
    /* Read the input backwards: start at the last element of each flipped
     * dim and step with the negated stride (Note [Moving blocks]). */
    int64_t itemsize = THTensor_itemsize(tensor);
    Block src = block_of(tensor);
    for (int d = 0; d < tensor->ndim; d++) {
        if (flipped[d]) {
            src.data += (src.sizes[d] - 1) * src.strides[d] * itemsize;
            src.strides[d] = -src.strides[d];
        }
    }
    Block dst = block_of(out);
    if (move_block(&dst, &src, itemsize) < 0) {
        THTensor_release(out);
        return NULL;
    }
    return out;
}

/* One circular shift along one (wrapped) dim:
 * out[shift:] = in[:n - shift] and out[:shift] = in[n - shift:]. */
static THTensor *
roll_one_dim(THTensor *tensor, int64_t shift, int64_t dim)
{
    THTensor *out = THTensor_newEmptyLike(tensor, tensor->dtype);
    if (out == NULL || tensor->numel == 0) {
        return out;
    }
    int64_t n = tensor->sizes[dim];
    int64_t s = ((shift % n) + n) % n;
    int64_t itemsize = THTensor_itemsize(tensor);
    Block dst = block_of(out), src = block_of(tensor);
    Block tail_dst = block_narrow(dst, dim, s, n - s, itemsize);
    Block head_src = block_narrow(src, dim, 0, n - s, itemsize);
    Block head_dst = block_narrow(dst, dim, 0, s, itemsize);
    Block tail_src = block_narrow(src, dim, n - s, s, itemsize);
    if (move_block(&tail_dst, &head_src, itemsize) < 0
        || move_block(&head_dst, &tail_src, itemsize) < 0) {
        THTensor_release(out);
        return NULL;
    }
    return out;
}

/* roll with no dims: roll the flattened tensor, then restore the shape. */
static THTensor *
roll_flat(THTensor *tensor, int64_t shift)
{
    int64_t numel = tensor->numel;
    THTensor *contiguous = THTensor_newContiguous(tensor);
    THTensor *flat = contiguous ? THTensor_newView(contiguous, 1, &numel)
                                : NULL;
    THTensor *rolled = flat ? roll_one_dim(flat, shift, 0) : NULL;
    THTensor *out = rolled ? THTensor_newView(rolled, tensor->ndim,
                                              tensor->sizes)
                           : NULL;
    THTensor_release(contiguous);
    THTensor_release(flat);
    THTensor_release(rolled);
    return out;
}

THTensor *
THTensor_newRoll(THTensor *tensor, int nshifts, const int64_t *shifts,
                 int ndims, const int64_t *dims)
{
    if (nshifts == 0) {
        THError_set(TH_ERR_RUNTIME, "`shifts` required");
        return NULL;
    }
    if (nshifts != ndims && !(ndims == 0 && nshifts == 1)) {
        THError_set(TH_ERR_RUNTIME,
                    "shifts and dimensions must align. shifts: %d, dims:%d",
                    nshifts, ndims);
        return NULL;
    }
    if (ndims == 0) {
        return roll_flat(tensor, shifts[0]);
    }
    int64_t wrapped[TH_MAX_DIMS];
    for (int i = 0; i < ndims; i++) {
        if (THTensor_wrapDim(dims[i], tensor->ndim, &wrapped[i]) < 0) {
            return NULL;
        }
    }
    /* One dim at a time, as PyTorch does: each pass is two block moves. */
    THTensor_retain(tensor);
    THTensor *current = tensor;
    for (int i = 0; i < ndims && current != NULL; i++) {
        THTensor *next = tensor->ndim > 0
                             ? roll_one_dim(current, shifts[i], wrapped[i])
                             : THTensor_newClone(current);
        THTensor_release(current);
        current = next;
    }
    return current;
}

/* ---- repeat ------------------------------------------------------------------- */

/* Fills the rest of dim `dim` of `region` with copies of its first `size`
 * elements, doubling the copied part each time: O(log repeats) moves. */
static int
replicate_along(Block region, int64_t dim, int64_t size, int64_t repeats,
                int64_t itemsize)
{
    int64_t done = 1;
    while (done < repeats) {
        int64_t count = done < repeats - done ? done : repeats - done;
        Block src = block_narrow(region, dim, 0, count * size, itemsize);
        Block dst = block_narrow(region, dim, done * size, count * size,
                                 itemsize);
        if (move_block(&dst, &src, itemsize) < 0) {
            return -1;
        }
        done += count;
    }
    return 0;
}

THTensor *
THTensor_newRepeat(THTensor *tensor, int nrepeats, const int64_t *repeats)
{
    if (nrepeats < tensor->ndim) {
        THError_set(TH_ERR_RUNTIME,
                    "Number of dimensions of repeat dims can not be smaller "
                    "than number of dimensions of tensor");
        return NULL;
    }
    if (nrepeats > TH_MAX_DIMS) {
        THError_set(TH_ERR_VALUE,
                    "ember tensors have at most %d dimensions, got %d",
                    TH_MAX_DIMS, nrepeats);
        return NULL;
    }
    /* The input with leading dims of size 1 added to match repeats. */
    int lead = nrepeats - tensor->ndim;
    Block src = {.data = THTensor_data(tensor), .ndim = nrepeats};
    int64_t out_sizes[TH_MAX_DIMS];
    for (int d = 0; d < nrepeats; d++) {
        src.sizes[d] = d < lead ? 1 : tensor->sizes[d - lead];
        src.strides[d] = d < lead ? 0 : tensor->strides[d - lead];
        if (TH_mul_overflows(src.sizes[d], repeats[d], &out_sizes[d])) {
            THError_set(TH_ERR_MEMORY, "repeat: result too big");
            return NULL;
        }
    }
    for (int d = 0; d < nrepeats; d++) {
        if (out_sizes[d] < 0) {
            char shape[TH_SHAPE_BUF];
            THTensor_formatSizes(shape, sizeof(shape), nrepeats, out_sizes);
            THError_set(TH_ERR_RUNTIME,
                        "Trying to create tensor with negative dimension "
                        "%lld: %s",
                        (long long)out_sizes[d], shape);
            return NULL;
        }
    }
    THTensor *out = THTensor_newEmpty(nrepeats, out_sizes, tensor->dtype,
                                      tensor->storage->device);
    if (out == NULL || out->numel == 0) {
        return out;
    }
    /* Copy the input into the first block, then replicate dim by dim from
     * the innermost out: when dim d is replicated, the dims after it are
     * already full and the ones before it still one block wide. */
    int64_t itemsize = THTensor_itemsize(tensor);
    Block region = block_of(out);
    for (int d = 0; d < nrepeats; d++) {
        region.sizes[d] = src.sizes[d];
    }
    if (move_block(&region, &src, itemsize) < 0) {
        goto fail;
    }
    for (int d = nrepeats - 1; d >= 0; d--) {
        region.sizes[d] = out_sizes[d];
        if (replicate_along(region, d, src.sizes[d], repeats[d], itemsize)
            < 0) {
            goto fail;
        }
    }
    return out;
fail:
    THTensor_release(out);
    return NULL;
}

/* ---- repeat_interleave --------------------------------------------------------- */

/* A 1-d tensor: element i copied repeats[i] times, one element at a time
 * (a block move per element would cost an iterator set-up each). */
static void
repeat_elements(char *out, const char *in, int64_t in_stride, int64_t n,
                int64_t nrepeats, const int64_t *repeats, int64_t itemsize)
{
    int64_t j = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = repeats[nrepeats == 1 ? 0 : i];
        for (int64_t k = 0; k < r; k++, j++) {
            memcpy(out + j * itemsize, in + i * in_stride, (size_t)itemsize);
        }
    }
}

THTensor *
THTensor_newRepeatInterleave(THTensor *tensor, int64_t nrepeats,
                             const int64_t *repeats, bool dim_given,
                             int64_t dim)
{
    if (!dim_given || tensor->ndim == 0) { /* on the flattened input */
        int64_t numel = tensor->numel;
        THTensor *contiguous = THTensor_newContiguous(tensor);
        THTensor *flat = contiguous ? THTensor_newView(contiguous, 1, &numel)
                                    : NULL;
        THTensor *out = flat ? THTensor_newRepeatInterleave(
                                   flat, nrepeats, repeats, true, 0)
                             : NULL;
        THTensor_release(contiguous);
        THTensor_release(flat);
        return out;
    }
    int64_t d;
    if (THTensor_wrapDim(dim, tensor->ndim, &d) < 0) {
        return NULL;
    }
    int64_t size = tensor->sizes[d];
    if (nrepeats != 1 && nrepeats != size) {
        THError_set(TH_ERR_RUNTIME,
                    "repeats must have the same size as input along dim, but "
                    "got repeats.size(0) = %lld and input.size(%lld) = %lld",
                    (long long)nrepeats, (long long)d, (long long)size);
        return NULL;
    }
    int64_t sizes[TH_MAX_DIMS];
    memcpy(sizes, tensor->sizes, sizeof(sizes));
    sizes[d] = 0;
    for (int64_t i = 0; i < size; i++) {
        if (TH_add_overflows(sizes[d], repeats[nrepeats == 1 ? 0 : i],
                             &sizes[d])) {
            THError_set(TH_ERR_MEMORY, "repeat_interleave: result too big");
            return NULL;
        }
    }
    THTensor *out = THTensor_newEmpty(tensor->ndim, sizes, tensor->dtype,
                                      tensor->storage->device);
    if (out == NULL || out->numel == 0) {
        return out;
    }
    int64_t itemsize = THTensor_itemsize(tensor);
    if (tensor->ndim == 1) {
        repeat_elements(THTensor_data(out), THTensor_data(tensor),
                        tensor->strides[0] * itemsize, size, nrepeats,
                        repeats, itemsize);
        return out;
    }
    /* Slice i, broadcast along dim (stride 0) to its repeat count, is one
     * block move into the output. */
    Block dst = block_of(out), src = block_of(tensor);
    int64_t offset = 0;
    for (int64_t i = 0; i < size; i++) {
        int64_t r = repeats[nrepeats == 1 ? 0 : i];
        Block from = block_narrow(src, d, i, r, itemsize);
        from.strides[d] = 0;
        Block to = block_narrow(dst, d, offset, r, itemsize);
        if (r > 0 && move_block(&to, &from, itemsize) < 0) {
            THTensor_release(out);
            return NULL;
        }
        offset += r;
    }
    return out;
}

/* ---- diagonal / diag --------------------------------------------------------- */

THTensor *
THTensor_newDiagonal(THTensor *tensor, int64_t offset, int64_t dim1,
                     int64_t dim2)
{
    int64_t d1, d2;
    if (THTensor_wrapDim(dim1, tensor->ndim, &d1) < 0
        || THTensor_wrapDim(dim2, tensor->ndim, &d2) < 0) {
        return NULL;
    }
    if (d1 == d2) {
        THError_set(TH_ERR_RUNTIME,
                    "diagonal dimensions cannot be identical %lld, %lld",
                    (long long)dim1, (long long)dim2);
        return NULL;
    }
    /* The diagonal starts at (0, offset) above the main one, at
     * (-offset, 0) below it; it is empty when that lies outside. */
    int64_t rows = tensor->sizes[d1], cols = tensor->sizes[d2];
    int64_t length = offset >= 0 ? (cols - offset < rows ? cols - offset : rows)
                                 : (rows + offset < cols ? rows + offset : cols);
    int64_t start = tensor->storage_offset;
    if (length <= 0) {
        length = 0;
    }
    else {
        start += offset >= 0 ? offset * tensor->strides[d2]
                             : -offset * tensor->strides[d1];
    }
    int64_t sizes[TH_MAX_DIMS], strides[TH_MAX_DIMS];
    int ndim = 0;
    for (int d = 0; d < tensor->ndim; d++) {
        if (d != d1 && d != d2) {
            sizes[ndim] = tensor->sizes[d];
            strides[ndim++] = tensor->strides[d];
        }
    }
    sizes[ndim] = length;
    strides[ndim++] = tensor->strides[d1] + tensor->strides[d2];
    return THTensor_newAsStrided(tensor, ndim, sizes, strides, start);
}

THTensor *
THTensor_newDiag(THTensor *tensor, int64_t diagonal)
{
    if (tensor->ndim == 2) {
        THTensor *view = THTensor_newDiagonal(tensor, diagonal, 0, 1);
        THTensor *out = view ? THTensor_newContiguous(view) : NULL;
        if (out == view && out != NULL) { /* a copy, never the view */
            THTensor_release(out);
            out = THTensor_newClone(view);
        }
        THTensor_release(view);
        return out;
    }
    if (tensor->ndim != 1) {
        THError_set(TH_ERR_RUNTIME,
                    "diag(): Supports 1D or 2D tensors. Got %dD",
                    tensor->ndim);
        return NULL;
    }
    int64_t n = tensor->sizes[0];
    int64_t k = diagonal < 0 ? -diagonal : diagonal;
    int64_t side;
    if (TH_add_overflows(n, k, &side)) {
        THError_set(TH_ERR_MEMORY, "diag(): result too big");
        return NULL;
    }
    int64_t sizes[2] = {side, side};
    THTensor *out = THTensor_newEmpty(2, sizes, tensor->dtype,
                                      tensor->storage->device);
    if (out == NULL || out->numel == 0) {
        return out;
    }
    memset(THTensor_data(out), 0, (size_t)(out->numel * THTensor_itemsize(out)));
    THTensor *target = THTensor_newDiagonal(out, diagonal, 0, 1);
    if (target == NULL) {
        THTensor_release(out);
        return NULL;
    }
    Block dst = block_of(target), src = block_of(tensor);
    int status = move_block(&dst, &src, THTensor_itemsize(out));
    THTensor_release(target);
    if (status < 0) {
        THTensor_release(out);
        return NULL;
    }
    return out;
}

/* ---- tril / triu ------------------------------------------------------------- */

/* Sets n elements `stride` bytes apart to zero (all-zero bits is 0, 0.0
 * and false in every dtype). */
static void
zero_run(char *data, int64_t n, int64_t stride, int64_t itemsize)
{
    if (n <= 0) {
        return;
    }
    if (stride == itemsize) {
        memset(data, 0, (size_t)(n * itemsize));
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        memset(data + i * stride, 0, (size_t)itemsize);
    }
}

static int64_t
clamp64(int64_t x, int64_t lo, int64_t hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

/* Zeroes what tril (upper == false) or triu removes, in every matrix of
 * the batch: below the diagonal-th diagonal for triu, above it for tril. */
static void
zero_outside_triangle(THTensor *tensor, int64_t diagonal, bool upper)
{
    int nd = tensor->ndim;
    int64_t rows = tensor->sizes[nd - 2], cols = tensor->sizes[nd - 1];
    if (tensor->numel == 0) {
        return;
    }
    int64_t itemsize = THTensor_itemsize(tensor);
    int64_t row_stride = tensor->strides[nd - 2] * itemsize;
    int64_t col_stride = tensor->strides[nd - 1] * itemsize;
    /* Clamped so i + k cannot overflow; past the matrix it means "all". */
    int64_t k = clamp64(diagonal, -rows - 1, cols + 1);
    int64_t nbatch = tensor->numel / (rows * cols);
    for (int64_t b = 0; b < nbatch; b++) {
        char *matrix = THTensor_data(tensor);
        int64_t rest = b;
        for (int d = nd - 3; d >= 0; d--) {
            matrix += (rest % tensor->sizes[d]) * tensor->strides[d] * itemsize;
            rest /= tensor->sizes[d];
        }
        for (int64_t i = 0; i < rows; i++) {
            int64_t lo = upper ? 0 : clamp64(i + k + 1, 0, cols);
            int64_t hi = upper ? clamp64(i + k, 0, cols) : cols;
            zero_run(matrix + i * row_stride + lo * col_stride, hi - lo,
                     col_stride, itemsize);
        }
    }
}

static int
check_matrix(const THTensor *tensor, bool upper)
{
    if (tensor->ndim < 2) {
        return THError_set(TH_ERR_RUNTIME,
                           "%s: input tensor must have at least 2 dimensions",
                           upper ? "triu" : "tril");
    }
    return 0;
}

THTensor *
THTensor_newTriangle(THTensor *tensor, int64_t diagonal, bool upper)
{
    if (check_matrix(tensor, upper) < 0) {
        return NULL;
    }
    THTensor *out = THTensor_newClone(tensor);
    if (out != NULL) {
        zero_outside_triangle(out, diagonal, upper);
    }
    return out;
}

int
THTensor_triangle_(THTensor *tensor, int64_t diagonal, bool upper)
{
    if (check_matrix(tensor, upper) < 0
        || THTensor_checkWritable(tensor) < 0) {
        return -1;
    }
    zero_outside_triangle(tensor, diagonal, upper);
    THTensor_bumpVersion(tensor);
    return 0;
}

/* ---- one_hot ------------------------------------------------------------------ */

THTensor *
THTensor_newOneHot(THTensor *tensor, int64_t num_classes)
{
    if (tensor->dtype != TH_Int64) {
        THError_set(TH_ERR_RUNTIME, "one_hot is only applicable to index "
                                    "tensor of type LongTensor.");
        return NULL;
    }
    if (tensor->numel == 0 && num_classes == -1) {
        THError_set(TH_ERR_RUNTIME, "Can not infer total number of classes "
                                    "from empty tensor.");
        return NULL;
    }
    THTensor *flat = THTensor_newContiguous(tensor);
    if (flat == NULL) {
        return NULL;
    }
    const int64_t *classes = (const int64_t *)THTensor_data(flat);
    int64_t lo = 0, hi = -1;
    for (int64_t i = 0; i < flat->numel; i++) {
        lo = i == 0 || classes[i] < lo ? classes[i] : lo;
        hi = i == 0 || classes[i] > hi ? classes[i] : hi;
    }
    THTensor *out = NULL;
    if (lo < 0) {
        THError_set(TH_ERR_RUNTIME, "Class values must be non-negative.");
        goto done;
    }
    if (num_classes == -1) {
        num_classes = hi + 1;
    }
    else if (flat->numel > 0 && hi >= num_classes) {
        THError_set(TH_ERR_RUNTIME,
                    "Class values must be smaller than num_classes.");
        goto done;
    }
    int64_t sizes[TH_MAX_DIMS + 1];
    memcpy(sizes, tensor->sizes, sizeof(int64_t) * (size_t)tensor->ndim);
    sizes[tensor->ndim] = num_classes;
    out = THTensor_newEmpty(tensor->ndim + 1, sizes, TH_Int64,
                            tensor->storage->device);
    if (out == NULL || out->numel == 0) {
        goto done;
    }
    int64_t *hot = (int64_t *)THTensor_data(out);
    memset(hot, 0, (size_t)out->numel * sizeof(int64_t));
    for (int64_t i = 0; i < flat->numel; i++) {
        hot[i * num_classes + classes[i]] = 1;
    }
done:
    THTensor_release(flat);
    return out;
}
