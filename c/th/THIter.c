/*
 * THIter.c -- broadcasting, dim ordering and coalescing for strided loops.
 * See THIter.h for the shape of the helper.
 */
#include "THIter.h"

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

/* Fills byte strides of operand k for every dim of the iteration shape
 * (outermost first), broadcasting it. */
static int
broadcast_operand_strides(const THTensor *shape_of, const THTensor *operand,
                          int64_t *byte_strides)
{
    int ndim = shape_of->ndim;
    int64_t itemsize = THTensor_itemsize(operand);
    if (operand->ndim > ndim) {
        return THError_set(TH_ERR_RUNTIME,
                           "a tensor with %d dimensions can't be broadcast "
                           "to a shape with %d dimensions",
                           operand->ndim, ndim);
    }
    for (int d = 0; d < ndim; d++) {
        int od = d - (ndim - operand->ndim);
        int64_t want = shape_of->sizes[d];
        if (od < 0) {
            byte_strides[d] = 0;
        }
        else if (operand->sizes[od] == want) {
            byte_strides[d] = operand->strides[od] * itemsize;
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

static int64_t
abs64(int64_t x)
{
    return x < 0 ? -x : x;
}

int
THIter_init(THIter *iter, int noperands, THTensor *const *operands)
{
    const THTensor *out = operands[0];
    int64_t strides[TH_MAX_DIMS][TH_ITER_MAX_OPERANDS];
    int64_t by_dim[TH_MAX_DIMS];

    if (noperands < 1 || noperands > TH_ITER_MAX_OPERANDS) {
        return THError_set(TH_ERR_RUNTIME, "THIter: bad operand count %d",
                           noperands);
    }
    for (int k = 0; k < noperands; k++) {
        if (broadcast_operand_strides(out, operands[k], by_dim) < 0) {
            return -1;
        }
        for (int d = 0; d < out->ndim; d++) {
            strides[d][k] = by_dim[d];
        }
        iter->data[k] = THTensor_data(operands[k]);
    }
    iter->noperands = noperands;
    iter->numel = out->numel;

    /* Keep the dims that move (size != 1), innermost first, then sort them
     * by operand 0's stride (stable insertion sort: ties keep row-major
     * order) so operand 0 is walked in memory order. */
    int order[TH_MAX_DIMS];
    int ndim = 0;
    for (int d = out->ndim - 1; d >= 0; d--) {
        if (out->sizes[d] != 1) {
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
                iter->shape[prev] *= out->sizes[d];
                continue;
            }
        }
        iter->shape[kept] = out->sizes[d];
        memcpy(iter->strides[kept], strides[d], sizeof(strides[d]));
        kept++;
    }
    iter->ndim = kept;
    return 0;
}

void
THIter_run(const THIter *iter, THLoop loop, void *ctx)
{
    if (iter->numel == 0) {
        return;
    }
    char *ptrs[TH_ITER_MAX_OPERANDS];
    memcpy(ptrs, iter->data, sizeof(ptrs));
    if (iter->ndim == 0) {
        static const int64_t zero_strides[TH_ITER_MAX_OPERANDS] = {0};
        loop(ptrs, zero_strides, 1, ctx);
        return;
    }
    int64_t counter[TH_MAX_DIMS] = {0};
    for (;;) {
        loop(ptrs, iter->strides[0], iter->shape[0], ctx);
        /* Advance the odometer over the outer dims (1, 2, ...). */
        int d = 1;
        for (; d < iter->ndim; d++) {
            for (int k = 0; k < iter->noperands; k++) {
                ptrs[k] += iter->strides[d][k];
            }
            if (++counter[d] < iter->shape[d]) {
                break;
            }
            for (int k = 0; k < iter->noperands; k++) {
                ptrs[k] -= iter->strides[d][k] * iter->shape[d];
            }
            counter[d] = 0;
        }
        if (d == iter->ndim) {
            return;
        }
    }
}
