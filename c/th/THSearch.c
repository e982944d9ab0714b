/*
 * THSearch.c -- searchsorted, bincount, histc (THSearch.h).
 *
 * Each reads contiguous copies of its inputs in the dtype it computes in,
 * then runs one loop generated per dtype.
 */
#include "THSearch.h"

#include <math.h>
#include <string.h>

/* A row-major copy of t in dtype (t itself, retained, when it is one). */
static THTensor *
contiguous_as(THTensor *t, THDtype dtype)
{
    THTensor *cast = THTensor_newCast(t, dtype, false);
    if (cast == NULL) {
        return NULL;
    }
    THTensor *result = THTensor_newContiguous(cast);
    THTensor_release(cast);
    return result;
}

/* ---- searchsorted ------------------------------------------------------- */

/* PyTorch's bound search, including how NaN compares: the left bound
 * moves past elements that are not >= the value, the right bound past
 * those not > it. */
#define TH_DEFINE_SEARCH(Name, ctype, py)                                    \
    static void search_##Name(const void *sorted_data,                       \
                              const void *values_data,                       \
                              const int64_t *sorter, int64_t n,              \
                              bool one_line, int64_t line_length,            \
                              int64_t nvalues, bool right, int64_t *out)     \
    {                                                                        \
        const ctype *sorted = sorted_data, *values = values_data;            \
        for (int64_t i = 0; i < nvalues; i++) {                              \
            int64_t line = one_line ? 0 : i / line_length;                   \
            const ctype *seq = sorted + line * n;                            \
            const int64_t *order = sorter ? sorter + line * n : NULL;        \
            ctype v = values[i];                                             \
            int64_t lo = 0, hi = n;                                          \
            while (lo < hi) {                                                \
                int64_t mid = lo + (hi - lo) / 2;                            \
                ctype m = order ? seq[order[mid]] : seq[mid];                \
                if (right ? !(TH_TO_FLOAT_##Name(m) > TH_TO_FLOAT_##Name(v)) \
                          : !(TH_TO_FLOAT_##Name(m) >= TH_TO_FLOAT_##Name(v))) { \
                    lo = mid + 1;                                            \
                }                                                            \
                else {                                                       \
                    hi = mid;                                                \
                }                                                            \
            }                                                                \
            out[i] = lo;                                                     \
        }                                                                    \
    }
TH_FORALL_DTYPES(TH_DEFINE_SEARCH)

typedef void (*SearchFn)(const void *, const void *, const int64_t *,
                         int64_t, bool, int64_t, int64_t, bool, int64_t *);
#define TH_SEARCH_ENTRY(Name, ctype, py) search_##Name,
static const SearchFn search_loops[TH_NUM_DTYPES] = {
    TH_FORALL_DTYPES(TH_SEARCH_ENTRY)
};

static int
check_search_shapes(const THTensor *sorted, const THTensor *values)
{
    if (sorted->ndim == 0) {
        return THError_set(TH_ERR_RUNTIME,
                           "torch.searchsorted(): boundaries tensor should "
                           "have positive dimension, but got 0 dimension");
    }
    if (sorted->ndim == 1) {
        return 0;
    }
    if (values->ndim != sorted->ndim
        || memcmp(values->sizes, sorted->sizes,
                  sizeof(int64_t) * (size_t)(sorted->ndim - 1))
               != 0) {
        char have[256], want[256];
        return THError_set(
            TH_ERR_RUNTIME,
            "torch.searchsorted(): boundaries tensor should be 1 dimension or "
            "the first N-1 dimensions of boundaries tensor and input value "
            "tensor must match, but we got boundaries tensor %s and input "
            "value tensor %s",
            THTensor_formatSizes(want, sizeof(want), sorted->ndim,
                                 sorted->sizes),
            THTensor_formatSizes(have, sizeof(have), values->ndim,
                                 values->sizes));
    }
    return 0;
}

/* sorter: int64, sorted's shape, every entry a valid position. */
static int
check_sorter(const THTensor *sorted, const THTensor *sorter,
             const int64_t *order)
{
    int64_t n = sorted->sizes[sorted->ndim - 1];
    for (int64_t i = 0; i < sorter->numel; i++) {
        if (order[i] < 0 || order[i] >= n) {
            return THError_set(TH_ERR_RUNTIME, "torch.searchsorted(): sorter "
                                               "index out of range");
        }
    }
    return 0;
}

static int
check_sorter_meta(const THTensor *sorted, const THTensor *sorter)
{
    if (sorter->dtype != TH_Int64) {
        return THError_set(TH_ERR_RUNTIME,
                           "torch.searchsorted(): sorter must be a tensor of "
                           "long dtype but got dtype %s",
                           THDtype_scalarTypeName(sorter->dtype));
    }
    if (sorter->ndim != sorted->ndim
        || memcmp(sorter->sizes, sorted->sizes,
                  sizeof(int64_t) * (size_t)sorted->ndim)
               != 0) {
        char a[256], b[256];
        return THError_set(
            TH_ERR_RUNTIME,
            "torch.searchsorted(): boundary and sorter must have the same "
            "size, but got boundary tensor %sand got sorter tensor %s",
            THTensor_formatSizes(a, sizeof(a), sorted->ndim, sorted->sizes),
            THTensor_formatSizes(b, sizeof(b), sorter->ndim, sorter->sizes));
    }
    return 0;
}

THTensor *
THTensor_newSearchsorted(THTensor *sorted, THTensor *values, bool right,
                         THTensor *sorter, bool out_int32)
{
    if (check_search_shapes(sorted, values) < 0
        || (sorter != NULL && check_sorter_meta(sorted, sorter) < 0)) {
        return NULL;
    }
    THDtype dtype = THDtype_promote(sorted->dtype, values->dtype);
    THTensor *seq = contiguous_as(sorted, dtype);
    THTensor *vals = seq ? contiguous_as(values, dtype) : NULL;
    THTensor *order = vals && sorter ? contiguous_as(sorter, TH_Int64) : NULL;
    THTensor *result = vals && (sorter == NULL || order)
                           ? THTensor_newEmpty(values->ndim, values->sizes,
                                               TH_Int64,
                                               values->storage->device)
                           : NULL;
    if (result != NULL && order != NULL
        && check_sorter(sorted, order, (const int64_t *)THTensor_data(order))
               < 0) {
        THTensor_release(result);
        result = NULL;
    }
    if (result != NULL) {
        int64_t n = sorted->sizes[sorted->ndim - 1];
        int64_t line = values->ndim > 0 ? values->sizes[values->ndim - 1] : 1;
        const int64_t *order_data =
            order ? (const int64_t *)THTensor_data(order) : NULL;
        search_loops[dtype](THTensor_data(seq), THTensor_data(vals),
                            order_data, n, sorted->ndim == 1, line,
                            values->numel, right,
                            (int64_t *)THTensor_data(result));
    }
    if (result != NULL && out_int32) {
        THTensor *narrow = THTensor_newCast(result, TH_Int32, false);
        THTensor_release(result);
        result = narrow;
    }
    THTensor_release(seq);
    THTensor_release(vals);
    THTensor_release(order);
    return result;
}

/* ---- bincount ------------------------------------------------------------ */

static int
check_bincount(const THTensor *input, const THTensor *weights,
               int64_t minlength)
{
    if (!THDtype_isIntegral(input->dtype, false)) {
        return THError_set(TH_ERR_RUNTIME,
                           "\"bincount_cpu\" not implemented for '%s'",
                           THDtype_scalarTypeName(input->dtype));
    }
    if (minlength < 0) {
        return THError_set(TH_ERR_RUNTIME, "minlength should be >= 0");
    }
    if (input->ndim != 1) {
        return THError_set(TH_ERR_RUNTIME, "bincount only supports 1-d "
                                           "non-negative integral inputs.");
    }
    if (weights != NULL
        && (weights->ndim != 1 || weights->sizes[0] != input->sizes[0])) {
        return THError_set(TH_ERR_RUNTIME, "weights should be 1-d and have "
                                           "the same length as input");
    }
    return 0;
}

/* The number of bins: max + 1 (at least minlength); -1 on a negative. */
static int64_t
bincount_bins(const int64_t *x, int64_t n, int64_t minlength)
{
    int64_t bins = minlength;
    for (int64_t i = 0; i < n; i++) {
        if (x[i] < 0) {
            return THError_set(TH_ERR_RUNTIME,
                               "bincount only supports 1-d non-negative "
                               "integral inputs.");
        }
        if (x[i] >= bins) {
            bins = x[i] + 1;
        }
    }
    return bins;
}

/* counts[x[i]] += w[i] (or 1), in double, then cast to the result. */
static void
accumulate_bins(const int64_t *x, const double *w, int64_t n, double *counts)
{
    for (int64_t i = 0; i < n; i++) {
        counts[x[i]] += w != NULL ? w[i] : 1.0;
    }
}

THTensor *
THTensor_newBincount(THTensor *input, THTensor *weights, int64_t minlength)
{
    if (check_bincount(input, weights, minlength) < 0) {
        return NULL;
    }
    THTensor *x = contiguous_as(input, TH_Int64);
    THTensor *w = x && weights ? contiguous_as(weights, TH_Float64) : NULL;
    if (x == NULL || (weights != NULL && w == NULL)) {
        THTensor_release(x);
        return NULL;
    }
    const int64_t *x_data = (const int64_t *)THTensor_data(x);
    int64_t bins = bincount_bins(x_data, x->numel, minlength);
    THTensor *counts = bins >= 0 ? THTensor_newEmpty(1, &bins, TH_Float64,
                                                     input->storage->device)
                                 : NULL;
    THTensor *result = NULL;
    if (counts != NULL) {
        memset(THTensor_data(counts), 0, sizeof(double) * (size_t)bins);
        accumulate_bins(x_data, w ? (const double *)THTensor_data(w) : NULL,
                        x->numel, (double *)THTensor_data(counts));
        THDtype dtype = weights == NULL                 ? TH_Int64
                        : weights->dtype == TH_Float32 ? TH_Float32
                                                       : TH_Float64;
        result = THTensor_newCast(counts, dtype, false);
    }
    THTensor_release(counts);
    THTensor_release(x);
    THTensor_release(w);
    return result;
}

/* ---- histc -------------------------------------------------------------- */

/* Bin of each element computed in the input's dtype, as PyTorch: the
 * fraction of the range times bins, truncated; max itself goes into the
 * last bin. */
#define TH_DEFINE_HISTC(Name, ctype)                                         \
    static void histc_##Name(const void *data, int64_t n, double min,        \
                             double max, int64_t bins, int64_t *counts)      \
    {                                                                        \
        const ctype *x = data;                                               \
        const ctype lo = (ctype)min, hi = (ctype)max;                        \
        for (int64_t i = 0; i < n; i++) {                                    \
            ctype v = x[i];                                                  \
            if (!(v >= lo && v <= hi)) { /* NaN too */                       \
                continue;                                                    \
            }                                                                \
            int64_t bin = (int64_t)((v - lo) / (hi - lo) * (ctype)bins);     \
            counts[bin < bins ? bin : bins - 1]++;                           \
        }                                                                    \
    }
TH_DEFINE_HISTC(Float32, float)
TH_DEFINE_HISTC(Float64, double)

/* The data's smallest and largest elements; NaN for both when it has one
 * (n > 0). */
#define TH_DEFINE_DATA_RANGE(Name, ctype)                                    \
    static void data_range_##Name(const void *data, int64_t n, double *min, \
                                  double *max)                               \
    {                                                                        \
        const ctype *x = data;                                               \
        *min = *max = (double)x[0];                                          \
        for (int64_t i = 0; i < n; i++) {                                    \
            double v = (double)x[i];                                         \
            if (v != v) {                                                    \
                *min = *max = v;                                             \
                return;                                                      \
            }                                                                \
            *min = v < *min ? v : *min;                                      \
            *max = v > *max ? v : *max;                                      \
        }                                                                    \
    }
TH_DEFINE_DATA_RANGE(Float32, float)
TH_DEFINE_DATA_RANGE(Float64, double)

/* The histogram's range: [min, max], else the data's (NaN when the data
 * has one), widened by 1 each way when empty. */
static int
histc_range(const THTensor *x, double *min, double *max)
{
    if (*min == *max && x->numel > 0) {
        if (x->dtype == TH_Float32) {
            data_range_Float32(THTensor_data(x), x->numel, min, max);
        }
        else {
            data_range_Float64(THTensor_data(x), x->numel, min, max);
        }
    }
    if (*min == *max) {
        *min -= 1;
        *max += 1;
    }
    if (!isfinite(*min) || !isfinite(*max)) {
        return THError_set(TH_ERR_RUNTIME,
                           "torch.histc: range of [%g, %g] is not finite",
                           *min, *max);
    }
    if (!(*min < *max)) {
        return THError_set(TH_ERR_RUNTIME,
                           "torch.histc: max must be larger than min");
    }
    return 0;
}

THTensor *
THTensor_newHistc(THTensor *input, int64_t bins, double min, double max)
{
    if (!THDtype_isFloating(input->dtype)) {
        THError_set(TH_ERR_RUNTIME,
                    "\"histogram_cpu\" not implemented for '%s'",
                    THDtype_scalarTypeName(input->dtype));
        return NULL;
    }
    if (bins <= 0) {
        THError_set(TH_ERR_RUNTIME,
                    "torch.histogram(): bins must be > 0, but got %lld for "
                    "dimension 0",
                    (long long)bins);
        return NULL;
    }
    THTensor *x = THTensor_newContiguous(input);
    if (x == NULL) {
        return NULL;
    }
    THTensor *counts = NULL, *result = NULL;
    if (histc_range(x, &min, &max) == 0) {
        counts = THTensor_newEmpty(1, &bins, TH_Int64, input->storage->device);
    }
    if (counts != NULL) {
        memset(THTensor_data(counts), 0, sizeof(int64_t) * (size_t)bins);
        int64_t *count_data = (int64_t *)THTensor_data(counts);
        if (x->dtype == TH_Float32) {
            histc_Float32(THTensor_data(x), x->numel, min, max, bins,
                          count_data);
        }
        else {
            histc_Float64(THTensor_data(x), x->numel, min, max, bins,
                          count_data);
        }
        result = THTensor_newCast(counts, input->dtype, false);
    }
    THTensor_release(counts);
    THTensor_release(x);
    return result;
}
