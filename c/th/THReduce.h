/*
 * THReduce.h -- reductions (sum, mean, prod, max, argmax, var, norm,
 * logsumexp, all, any, count_nonzero), softmax and the scans (cumsum,
 * cumprod, logcumsumexp, cummax, cummin).
 *
 * Every reduction takes the dims to remove as a mask over the input's dims
 * (THReduce_dimMask builds one from PyTorch-style dim lists) and returns a
 * new contiguous tensor: the input's shape without those dims, or with
 * them kept as size 1 when `keepdim`.  Result dtypes, empty-input rules and
 * error messages are PyTorch's; each function says its own.
 *
 * `dtype` arguments are a THDtype, or -1 for "the op's default".
 *
 * The kernels run on the worker threads for large inputs and never call
 * Python, so a caller may release the GIL around any of these functions.
 */
#ifndef TH_REDUCE_H
#define TH_REDUCE_H

#include "THTensor.h"

/* Fills mask[d] (d < tensor->ndim) with whether dim d is reduced.  ndims
 * == 0 (PyTorch's None and ()) means every dim.  Dims may be negative;
 * out-of-range ones and repeats are errors with PyTorch's messages. */
int THReduce_dimMask(const THTensor *tensor, int ndims, const int64_t *dims,
                     bool *mask);

/* sum and prod: bool and integer inputs give int64, floating ones their own
 * dtype; `dtype` first converts the input (and is the result dtype). */
THTensor *THTensor_newSum(THTensor *input, const bool *mask, bool keepdim,
                          int dtype);
THTensor *THTensor_newProd(THTensor *input, const bool *mask, bool keepdim,
                           int dtype);
/* Floating inputs (or a floating `dtype`) only; 0 elements give nan. */
THTensor *THTensor_newMean(THTensor *input, const bool *mask, bool keepdim,
                           int dtype);

/* amax/amin (and max()/min() without a dim: pass their name as `fname` for
 * the messages): NaN propagates; reducing over 0 elements is an error. */
THTensor *THTensor_newAmax(THTensor *input, const bool *mask, bool keepdim,
                           bool is_max, const char *fname);
/* The index of the first largest (smallest) element along *dim, or in the
 * flattened input when dim is NULL (no dim value is set aside for that:
 * argmax(dim=-2**63) is an out-of-range dim); a NaN counts as the largest
 * and the smallest.  int64 result. */
THTensor *THTensor_newArgmax(THTensor *input, const int64_t *dim,
                             bool keepdim, bool is_max);
/* max(dim)/min(dim): values and indices together. */
int THTensor_maxDim(THTensor *input, int64_t dim, bool keepdim, bool is_max,
                    THTensor **values, THTensor **indices);

/* Variance with Bessel-style `correction` (1: unbiased), or its square root
 * when `take_sqrt`.  Floating inputs only. */
THTensor *THTensor_newVar(THTensor *input, const bool *mask, double correction,
                          bool keepdim, bool take_sqrt);
/* The vector p-norm (p = 2 for 'fro'); p may be +-INFINITY.  Floating inputs
 * only; `dtype` first converts the input. */
THTensor *THTensor_newNorm(THTensor *input, double p, const bool *mask,
                           bool keepdim, int dtype);
/* log(sum(exp(x))) computed without overflow; integer inputs give the
 * default floating dtype (`float_dtype`). */
THTensor *THTensor_newLogsumexp(THTensor *input, const bool *mask,
                                bool keepdim, THDtype float_dtype);

/* all/any: bool result (uint8 for uint8 input, as PyTorch). */
THTensor *THTensor_newAll(THTensor *input, const bool *mask, bool keepdim);
THTensor *THTensor_newAny(THTensor *input, const bool *mask, bool keepdim);
/* The number of non-zero elements; int64 result, dims never kept. */
THTensor *THTensor_newCountNonzero(THTensor *input, const bool *mask);

/* softmax / log_softmax along `dim` (max subtracted first).  `dtype`
 * converts the input first; the input must then be floating. */
THTensor *THTensor_newSoftmax(THTensor *input, int64_t dim,
                              bool log_softmax, int dtype);

/* Running sum/product along `dim`: integer and bool inputs give int64
 * unless `dtype` says otherwise. */
THTensor *THTensor_newCumsum(THTensor *input, int64_t dim, int dtype);
THTensor *THTensor_newCumprod(THTensor *input, int64_t dim, int dtype);

/* Running log(sum(exp(x))) along `dim` (floating inputs only). */
THTensor *THTensor_newLogcumsumexp(THTensor *input, int64_t dim);
/* Running max (is_max) or min along `dim`: values like input, int64
 * indices of where each running value was last reached. */
int THTensor_cumExtremum(THTensor *input, int64_t dim, bool is_max,
                         THTensor **values, THTensor **indices);

#endif /* TH_REDUCE_H */
