/*
 * THScan.c -- the scans with a state richer than a sum: logcumsumexp
 * (a running logaddexp) and cummax/cummin (a running extremum and where it
 * was reached).  Declared in THReduce.h, next to cumsum and cumprod.
 *
 * Both read a contiguous copy of the input as [outer, n, inner] (n the
 * scanned dim) and write contiguous results of the input's shape.
 */
#include "THReduce.h"

#include "THFormulas.h" /* fp_logaddexp_<ctype> */

/* [outer, n, inner] for a scan along `dim` (already wrapped). */
static void
scan_layout(const THTensor *t, int64_t dim, int64_t *outer, int64_t *n,
            int64_t *inner)
{
    *outer = *n = *inner = 1;
    for (int d = 0; d < t->ndim; d++) {
        int64_t *factor = d < dim ? outer : d == dim ? n : inner;
        *factor *= t->sizes[d];
    }
}

/* The running log(sum(exp(x))), one logaddexp a step, so nothing
 * overflows; -inf is the empty sum. */
#define TH_DEFINE_LOGCUMSUMEXP(Name, ctype)                                  \
    static void logcumsumexp_##Name(const void *in, void *out,               \
                                    int64_t outer, int64_t n, int64_t inner) \
    {                                                                        \
        const ctype *x = in;                                                 \
        ctype *y = out;                                                      \
        for (int64_t o = 0; o < outer; o++) {                                \
            for (int64_t j = 0; j < inner; j++) {                            \
                int64_t base = o * n * inner + j;                            \
                ctype running = -(ctype)INFINITY;                            \
                for (int64_t i = 0; i < n; i++) {                            \
                    running = fp_logaddexp_##ctype(running,                  \
                                                   x[base + i * inner]);     \
                    y[base + i * inner] = running;                           \
                }                                                            \
            }                                                                \
        }                                                                    \
    }
TH_DEFINE_LOGCUMSUMEXP(Float32, float)
TH_DEFINE_LOGCUMSUMEXP(Float64, double)

/* cummax/cummin: a tie moves the index to the later element, and a NaN,
 * once seen, stays (v != v only for NaN), as in PyTorch. */
#define TH_DEFINE_CUM_EXTREMUM(Name, ctype, py)                              \
    static void cum_extremum_##Name(const void *in, void *out,               \
                                    int64_t *indices, int64_t outer,         \
                                    int64_t n, int64_t inner, bool is_max)   \
    {                                                                        \
        const ctype *x = in;                                                 \
        ctype *values = out;                                                 \
        for (int64_t o = 0; o < outer; o++) {                                \
            for (int64_t j = 0; j < inner; j++) {                            \
                int64_t base = o * n * inner + j, best_at = 0;               \
                ctype best = x[base];                                        \
                for (int64_t i = 0; i < n; i++) {                            \
                    ctype v = x[base + i * inner];                           \
                    /* compared in the compute type (float32 for 16-bit) */  \
                    __typeof__(TH_TO_FLOAT_##Name(v)) fv =                   \
                        TH_TO_FLOAT_##Name(v);                               \
                    __typeof__(fv) fbest = TH_TO_FLOAT_##Name(best);         \
                    bool wins = is_max ? fv >= fbest : fv <= fbest;          \
                    if (wins || fv != fv) {                                  \
                        best = v;                                            \
                        best_at = i;                                         \
                    }                                                        \
                    values[base + i * inner] = best;                         \
                    indices[base + i * inner] = best_at;                     \
                }                                                            \
            }                                                                \
        }                                                                    \
    }
TH_FORALL_DTYPES(TH_DEFINE_CUM_EXTREMUM)

typedef void (*CumExtremumFn)(const void *, void *, int64_t *, int64_t,
                              int64_t, int64_t, bool);
#define TH_CUM_EXTREMUM_ENTRY(Name, ctype, py) cum_extremum_##Name,
static const CumExtremumFn cum_extremum[TH_NUM_DTYPES] = {
    TH_FORALL_DTYPES(TH_CUM_EXTREMUM_ENTRY)
};

/* A contiguous copy of input and an empty result like it; the wrapped dim
 * and the layout.  -1 (nothing held) on error. */
static int
scan_setup(THTensor *input, int64_t dim, THDtype result_dtype,
           THTensor **source, THTensor **result, int64_t layout[3])
{
    int64_t wrapped;
    *source = *result = NULL;
    if (THTensor_wrapDim(dim, input->ndim, &wrapped) < 0) {
        return -1;
    }
    scan_layout(input, wrapped, &layout[0], &layout[1], &layout[2]);
    *source = THTensor_newContiguous(input);
    if (*source == NULL) {
        return -1;
    }
    *result = THTensor_newEmpty(input->ndim, input->sizes, result_dtype,
                                input->storage->device);
    if (*result == NULL) {
        THTensor_release(*source);
        *source = NULL;
        return -1;
    }
    return 0;
}

THTensor *
THTensor_newLogcumsumexp(THTensor *input, int64_t dim)
{
    if (!THDtype_isFloating(input->dtype)) {
        THError_set(TH_ERR_RUNTIME,
                    "\"logcumsumexp_out_cpu\" not implemented for '%s'",
                    THDtype_scalarTypeName(input->dtype));
        return NULL;
    }
    THTensor *source, *result;
    int64_t layout[3];
    if (scan_setup(input, dim, input->dtype, &source, &result, layout) < 0) {
        return NULL;
    }
    if (source->numel > 0) {
        if (input->dtype == TH_Float32) {
            logcumsumexp_Float32(THTensor_data(source), THTensor_data(result),
                                 layout[0], layout[1], layout[2]);
        }
        else {
            logcumsumexp_Float64(THTensor_data(source), THTensor_data(result),
                                 layout[0], layout[1], layout[2]);
        }
    }
    THTensor_release(source);
    return result;
}

int
THTensor_cumExtremum(THTensor *input, int64_t dim, bool is_max,
                     THTensor **values, THTensor **indices)
{
    THTensor *source;
    int64_t layout[3];
    *indices = NULL;
    if (scan_setup(input, dim, input->dtype, &source, values, layout) < 0) {
        return -1;
    }
    *indices = THTensor_newEmpty(input->ndim, input->sizes, TH_Int64,
                                 input->storage->device);
    if (*indices == NULL) {
        THTensor_release(source);
        THTensor_release(*values);
        *values = NULL;
        return -1;
    }
    if (source->numel > 0) {
        cum_extremum[input->dtype](THTensor_data(source),
                                   THTensor_data(*values),
                                   (int64_t *)THTensor_data(*indices),
                                   layout[0],
                                   layout[1], layout[2], is_max);
    }
    THTensor_release(source);
    return 0;
}
