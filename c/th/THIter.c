/*
 * THIter.c -- broadcasting, dim ordering and coalescing for strided loops.
 * See THIter.h for the shape of the helper.
 */
#include "THIter.h"

#include "THParallel.h"

#include <string.h>

int
THIter_broadcastShape(int ndim_a, const int64_t *sizes_a, int ndim_b,
                      const int64_t *sizes_b, int *out_ndim,
                      int64_t *out_sizes)
{
    int ndim = ndim_a > ndim_b ? ndim_a : ndim_b;
    for (int d = ndim - 1; d >= 0; d--) {
        int da = d - (ndim - ndim_a);
        int db = d - (ndim - ndim_b);
        int64_t a = da >= 0 ? sizes_a[da] : 1;
        int64_t b = db >= 0 ? sizes_b[db] : 1;
        if (a != b && a != 1 && b != 1) {
            return THError_set(TH_ERR_RUNTIME,
                               "The size of tensor a (%lld) must match the "
                               "size of tensor b (%lld) at non-singleton "
                               "dimension %d",
                               (long long)a, (long long)b, d);
        }
        out_sizes[d] = a == 1 ? b : a;
    }
    *out_ndim = ndim;
    return 0;
}

/* Fills the byte strides of one operand for every dim of the iteration
 * shape (outermost first), broadcasting it. */
static int
broadcast_operand_strides(int ndim, const int64_t *shape,
                          const THIterOperand *operand, int64_t *byte_strides)
{
    if (operand->ndim > ndim) {
        return THError_set(TH_ERR_RUNTIME,
                           "a tensor with %d dimensions can't be broadcast "
                           "to a shape with %d dimensions",
                           operand->ndim, ndim);
    }
    for (int d = 0; d < ndim; d++) {
        int od = d - (ndim - operand->ndim);
        int64_t want = shape[d];
        if (od < 0) {
            byte_strides[d] = 0;
        }
        else if (operand->sizes[od] == want) {
            byte_strides[d] = operand->strides[od] * operand->itemsize;
        }
        else if (operand->sizes[od] == 1) {
            byte_strides[d] = 0;
        }
        else {
            return THError_set(TH_ERR_RUNTIME,
                               "The size of tensor a (%lld) must match the "
                               "size of tensor b (%lld) at non-singleton "
                               "dimension %d",
                               (long long)want,
                               (long long)operand->sizes[od], d);
        }
    }
    return 0;
}

THIterOperand
THIterOperand_fromTensor(const THTensor *tensor)
{
    THIterOperand op = {
        .data = THTensor_data(tensor),
        .ndim = tensor->ndim,
        .sizes = tensor->sizes,
        .strides = tensor->strides,
        .itemsize = (int)THTensor_itemsize(tensor),
    };
    return op;
}

static int64_t
abs64(int64_t x)
{
    return x < 0 ? -x : x;
}

int
THIter_init(THIter *iter, int noperands, THTensor *const *operands)
{
    THIterOperand ops[TH_ITER_MAX_OPERANDS];
    if (noperands < 1 || noperands > TH_ITER_MAX_OPERANDS) {
        return THError_set(TH_ERR_RUNTIME, "THIter: bad operand count %d",
                           noperands);
    }
    for (int k = 0; k < noperands; k++) {
        ops[k] = THIterOperand_fromTensor(operands[k]);
    }
    return THIter_initOperands(iter, noperands, ops, operands[0]->ndim,
                               operands[0]->sizes);
}

int
THIter_initOperands(THIter *iter, int noperands, const THIterOperand *ops,
                    int shape_ndim, const int64_t *shape)
{
    int64_t strides[TH_MAX_DIMS][TH_ITER_MAX_OPERANDS];
    int64_t by_dim[TH_MAX_DIMS];
    int64_t numel = 1;

    if (noperands < 1 || noperands > TH_ITER_MAX_OPERANDS) {
        return THError_set(TH_ERR_RUNTIME, "THIter: bad operand count %d",
                           noperands);
    }
    for (int k = 0; k < noperands; k++) {
        if (broadcast_operand_strides(shape_ndim, shape, &ops[k], by_dim) < 0) {
            return -1;
        }
        for (int d = 0; d < shape_ndim; d++) {
            strides[d][k] = by_dim[d];
        }
        iter->data[k] = ops[k].data;
    }
    for (int d = 0; d < shape_ndim; d++) {
        numel *= shape[d];
    }
    iter->noperands = noperands;
    iter->numel = numel;

    /* Keep the dims that move (size != 1), innermost first, then sort them
     * by operand 0's stride (stable insertion sort: ties keep row-major
     * order) so operand 0 is walked in memory order. */
    int order[TH_MAX_DIMS];
    int ndim = 0;
    for (int d = shape_ndim - 1; d >= 0; d--) {
        if (shape[d] != 1) {
            order[ndim++] = d;
        }
    }
    for (int i = 1; i < ndim; i++) {
        int d = order[i];
        int j = i - 1;
        while (j >= 0 && abs64(strides[order[j]][0]) > abs64(strides[d][0])) {
            order[j + 1] = order[j];
            j--;
        }
        order[j + 1] = d;
    }

    /* Coalesce: dim i folds into the previous kept dim when every operand
     * steps over it exactly as if the two were one longer dim. */
    int kept = 0;
    for (int i = 0; i < ndim; i++) {
        int d = order[i];
        if (kept > 0) {
            int prev = kept - 1;
            bool foldable = true;
            for (int k = 0; k < noperands; k++) {
                if (strides[d][k] != iter->shape[prev] * iter->strides[prev][k]) {
                    foldable = false;
                    break;
                }
            }
            if (foldable) {
                iter->shape[prev] *= shape[d];
                continue;
            }
        }
        iter->shape[kept] = shape[d];
        memcpy(iter->strides[kept], strides[d], sizeof(strides[d]));
        kept++;
    }
    iter->ndim = kept;
    return 0;
}

void
THIter_runRange(const THIter *iter, THLoop loop, void *ctx, int64_t begin,
                int64_t end)
{
    int noperands = iter->noperands;
    char *ptrs[TH_ITER_MAX_OPERANDS];
    memcpy(ptrs, iter->data, sizeof(ptrs));
    if (begin >= end) {
        return;
    }
    if (iter->ndim == 0) {
        static const int64_t zero_strides[TH_ITER_MAX_OPERANDS] = {0};
        loop(ptrs, zero_strides, 1, ctx);
        return;
    }
    /* The odometer position of element `begin` (dim 0 is innermost). */
    int64_t counter[TH_MAX_DIMS];
    int64_t rest = begin;
    for (int d = 0; d < iter->ndim; d++) {
        counter[d] = rest % iter->shape[d];
        rest /= iter->shape[d];
        for (int k = 0; k < noperands; k++) {
            ptrs[k] += counter[d] * iter->strides[d][k];
        }
    }
    int64_t remaining = end - begin;
    for (;;) {
        int64_t run = iter->shape[0] - counter[0];
        if (run > remaining) {
            run = remaining;
        }
        loop(ptrs, iter->strides[0], run, ctx);
        remaining -= run;
        if (remaining == 0) {
            return;
        }
        /* Back to the start of the row, then advance the outer dims. */
        for (int k = 0; k < noperands; k++) {
            ptrs[k] -= counter[0] * iter->strides[0][k];
        }
        counter[0] = 0;
        for (int d = 1; d < iter->ndim; d++) {
            for (int k = 0; k < noperands; k++) {
                ptrs[k] += iter->strides[d][k];
            }
            if (++counter[d] < iter->shape[d]) {
                break;
            }
            for (int k = 0; k < noperands; k++) {
                ptrs[k] -= iter->strides[d][k] * iter->shape[d];
            }
            counter[d] = 0;
        }
    }
}

void
THIter_run(const THIter *iter, THLoop loop, void *ctx)
{
    THIter_runRange(iter, loop, ctx, 0, iter->numel);
}

typedef struct {
    const THIter *iter;
    THLoop loop;
    void *ctx;
} RangeJob;

static void
run_range_job(int64_t begin, int64_t end, void *arg)
{
    RangeJob *job = arg;
    THIter_runRange(job->iter, job->loop, job->ctx, begin, end);
}

void
THIter_runParallel(const THIter *iter, THLoop loop, void *ctx, int64_t grain)
{
    if (iter->ndim == 0) {
        THIter_run(iter, loop, ctx);
        return;
    }
    RangeJob job = {iter, loop, ctx};
    THParallel_for(iter->numel, grain, run_range_job, &job);
}
