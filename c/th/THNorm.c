/*
 * THNorm.c -- batch normalisation's statistics, forward and backward
 * (Note [Batch norm in three kernels] in THNorm.h).  The per-channel
 * passes run channels in parallel, the elementwise ones (sample, channel)
 * rows; every sum is accumulated in double over 8 independent lanes, which
 * the compiler can vectorise without reassociating one running sum.
 */
#include "THNorm.h"

#include "THGeneral.h"
#include "THParallel.h"

#include <math.h>
#include <stdlib.h>

/* The floating dtypes batch norm runs in: (Name, ctype). */
#define TH_NORM_DTYPES(_) \
    _(Float32, float)     \
    _(Float64, double)

#define LANES 8

/* The per-channel numbers one pass leaves for the next. */
typedef struct {
    double mean, var, invstd;
    double scale, shift;           /* forward: y = x * scale + shift */
    double sum_dy, dot;            /* sum(dy), sum(dy * (x - mean)) */
    double grad_scale, grad_mean, proj; /* dx = (dy - grad_mean
                                           - (x - mean) * proj) * grad_scale */
} Channel;

typedef struct {
    int64_t batch, channels, spatial; /* N, C, S */
    const char *x, *dy;
    char *out; /* output or grad_input */
    Channel *ch;
} NormJob;

static int64_t
per_channel(const NormJob *job)
{
    return job->batch * job->spatial;
}

/* ---- the kernels, one typed copy per dtype ----------------------------------- */

#define TH_DEFINE_NORM_KERNELS(Name, ctype)                                   \
    /* sum(row), sum((row - mean)^2) and sum(dy * (x - mean)) of one row */   \
    static double row_sum_##Name(const ctype *row, int64_t len)               \
    {                                                                         \
        double acc[LANES] = {0};                                              \
        int64_t i = 0;                                                        \
        for (; i + LANES <= len; i += LANES) {                                \
            for (int k = 0; k < LANES; k++) {                                 \
                acc[k] += (double)row[i + k];                                 \
            }                                                                 \
        }                                                                     \
        for (; i < len; i++) {                                                \
            acc[0] += (double)row[i];                                         \
        }                                                                     \
        return lanes_total(acc);                                              \
    }                                                                         \
    static double row_squares_##Name(const ctype *row, int64_t len, double mean) \
    {                                                                         \
        double acc[LANES] = {0};                                              \
        int64_t i = 0;                                                        \
        for (; i + LANES <= len; i += LANES) {                                \
            for (int k = 0; k < LANES; k++) {                                 \
                double d = (double)row[i + k] - mean;                         \
                acc[k] += d * d;                                              \
            }                                                                 \
        }                                                                     \
        for (; i < len; i++) {                                                \
            double d = (double)row[i] - mean;                                 \
            acc[0] += d * d;                                                  \
        }                                                                     \
        return lanes_total(acc);                                              \
    }                                                                         \
    static double row_dot_##Name(const ctype *dy, const ctype *x, int64_t len,  \
                                 double mean)                                 \
    {                                                                         \
        double acc[LANES] = {0};                                              \
        int64_t i = 0;                                                        \
        for (; i + LANES <= len; i += LANES) {                                \
            for (int k = 0; k < LANES; k++) {                                 \
                acc[k] += (double)dy[i + k] * ((double)x[i + k] - mean);      \
            }                                                                 \
        }                                                                     \
        for (; i < len; i++) {                                                \
            acc[0] += (double)dy[i] * ((double)x[i] - mean);                  \
        }                                                                     \
        return lanes_total(acc);                                              \
    }                                                                         \
                                                                              \
    /* channels [begin, end): mean and biased variance, two passes */        \
    static void stats_##Name(int64_t begin, int64_t end, void *ctx)           \
    {                                                                         \
        NormJob *job = ctx;                                                   \
        const ctype *x = (const ctype *)job->x;                               \
        for (int64_t c = begin; c < end; c++) {                               \
            double sum = 0.0, squares = 0.0;                                  \
            for (int64_t n = 0; n < job->batch; n++) {                        \
                sum += row_sum_##Name(x + row_of(job, n, c), job->spatial);   \
            }                                                                 \
            double mean = sum / (double)per_channel(job);                     \
            for (int64_t n = 0; n < job->batch; n++) {                        \
                squares += row_squares_##Name(x + row_of(job, n, c),          \
                                              job->spatial, mean);            \
            }                                                                 \
            job->ch[c].mean = mean;                                           \
            job->ch[c].var = squares / (double)per_channel(job);              \
        }                                                                     \
    }                                                                         \
                                                                              \
    /* rows [begin, end) of N x C: y = x * scale + shift */                  \
    static void forward_##Name(int64_t begin, int64_t end, void *ctx)         \
    {                                                                         \
        NormJob *job = ctx;                                                   \
        for (int64_t p = begin; p < end; p++) {                               \
            const Channel *ch = &job->ch[p % job->channels];                  \
            const ctype *x = (const ctype *)job->x + p * job->spatial;        \
            ctype *y = (ctype *)job->out + p * job->spatial;                  \
            ctype scale = (ctype)ch->scale, shift = (ctype)ch->shift;         \
            for (int64_t i = 0; i < job->spatial; i++) {                      \
                y[i] = x[i] * scale + shift;                                  \
            }                                                                 \
        }                                                                     \
    }                                                                         \
                                                                              \
    /* channels [begin, end): sum(dy) and sum(dy * (x - mean)) */            \
    static void grad_sums_##Name(int64_t begin, int64_t end, void *ctx)       \
    {                                                                         \
        NormJob *job = ctx;                                                   \
        const ctype *x = (const ctype *)job->x, *dy = (const ctype *)job->dy; \
        for (int64_t c = begin; c < end; c++) {                               \
            double sum_dy = 0.0, dot = 0.0;                                   \
            for (int64_t n = 0; n < job->batch; n++) {                        \
                int64_t row = row_of(job, n, c);                              \
                sum_dy += row_sum_##Name(dy + row, job->spatial);             \
                dot += row_dot_##Name(dy + row, x + row, job->spatial,        \
                                      job->ch[c].mean);                       \
            }                                                                 \
            job->ch[c].sum_dy = sum_dy;                                       \
            job->ch[c].dot = dot;                                             \
        }                                                                     \
    }                                                                         \
                                                                              \
    /* rows [begin, end): dx = (dy - grad_mean - (x - mean) proj) grad_scale */ \
    static void grad_input_##Name(int64_t begin, int64_t end, void *ctx)      \
    {                                                                         \
        NormJob *job = ctx;                                                   \
        for (int64_t p = begin; p < end; p++) {                               \
            const Channel *ch = &job->ch[p % job->channels];                  \
            const ctype *x = (const ctype *)job->x + p * job->spatial;        \
            const ctype *dy = (const ctype *)job->dy + p * job->spatial;      \
            ctype *dx = (ctype *)job->out + p * job->spatial;                 \
            ctype mean = (ctype)ch->mean, proj = (ctype)ch->proj;             \
            ctype grad_mean = (ctype)ch->grad_mean;                           \
            ctype grad_scale = (ctype)ch->grad_scale;                         \
            for (int64_t i = 0; i < job->spatial; i++) {                      \
                dx[i] = (dy[i] - grad_mean - (x[i] - mean) * proj) * grad_scale; \
            }                                                                 \
        }                                                                     \
    }

static double
lanes_total(const double acc[LANES])
{
    double total = 0.0;
    for (int k = 0; k < LANES; k++) {
        total += acc[k];
    }
    return total;
}

/* Where row (n, c) starts, in elements. */
static int64_t
row_of(const NormJob *job, int64_t n, int64_t c)
{
    return (n * job->channels + c) * job->spatial;
}

TH_NORM_DTYPES(TH_DEFINE_NORM_KERNELS)

typedef enum { STATS, FORWARD, GRAD_SUMS, GRAD_INPUT } NormKernel;

static THParallelFn
kernel_for(NormKernel kernel, THDtype dtype)
{
#define TH_NORM_CASE(Name, ctype)                                           \
    case TH_##Name:                                                         \
        return kernel == STATS       ? stats_##Name                         \
               : kernel == FORWARD   ? forward_##Name                       \
               : kernel == GRAD_SUMS ? grad_sums_##Name                     \
                                     : grad_input_##Name;
    switch (dtype) {
        TH_NORM_DTYPES(TH_NORM_CASE)
    default:
        return NULL;
    }
#undef TH_NORM_CASE
}

/* Channel-wise passes split the channels, row-wise ones the N x C rows. */
static void
run(NormKernel kernel, THDtype dtype, NormJob *job)
{
    bool by_channel = kernel == STATS || kernel == GRAD_SUMS;
    int64_t count = by_channel ? job->channels : job->batch * job->channels;
    int64_t work = by_channel ? per_channel(job) : job->spatial;
    THParallel_for(count, 1 + TH_PARALLEL_GRAIN / (work + 1), kernel_for(kernel, dtype),
                   job);
}

/* ---- per-channel tensors <-> Channel ----------------------------------------- */

static double
read_at(const THTensor *t, int64_t c, double absent)
{
    if (t == NULL) {
        return absent;
    }
#define TH_READ_CASE(Name, ctype) \
    case TH_##Name:               \
        return (double)((const ctype *)THTensor_data(t))[c];
    switch (t->dtype) {
        TH_NORM_DTYPES(TH_READ_CASE)
    default:
        return absent;
    }
#undef TH_READ_CASE
}

static void
write_at(THTensor *t, int64_t c, double value)
{
    if (t == NULL) {
        return;
    }
#define TH_WRITE_CASE(Name, ctype)                          \
    case TH_##Name:                                         \
        ((ctype *)THTensor_data(t))[c] = (ctype)value;      \
        break;
    switch (t->dtype) {
        TH_NORM_DTYPES(TH_WRITE_CASE)
    default:
        break;
    }
#undef TH_WRITE_CASE
}

/* The job over `input` with a Channel per channel: 0, or -1 with an error. */
static int
begin_job(NormJob *job, const THTensor *input, const THTensor *dy, char *out)
{
    if (kernel_for(STATS, input->dtype) == NULL) {
        return THError_set(TH_ERR_TYPE, "batch_norm: expected a float32 or float64 tensor");
    }
    job->batch = input->sizes[0];
    job->channels = input->sizes[1];
    job->spatial = 1;
    for (int d = 2; d < input->ndim; d++) {
        job->spatial *= input->sizes[d]; /* <= numel: no overflow */
    }
    job->x = THTensor_data(input);
    job->dy = dy ? THTensor_data(dy) : NULL;
    job->out = out;
    job->ch = TH_mallocArray(job->channels > 0 ? job->channels : 1, sizeof(Channel),
                             "batch_norm's per-channel buffer");
    return job->ch == NULL ? -1 : 0;
}

/* mean and invstd of each channel from the given statistics. */
static void
load_statistics(NormJob *job, const THTensor *mean, const THTensor *var, double eps)
{
    for (int64_t c = 0; c < job->channels; c++) {
        job->ch[c].mean = read_at(mean, c, 0.0);
        job->ch[c].invstd = 1.0 / sqrt(read_at(var, c, 1.0) + eps);
    }
}

/* ---- the entry points --------------------------------------------------------- */

int
THBatchNorm_stats(THTensor *mean, THTensor *var, const THTensor *input)
{
    NormJob job;
    if (begin_job(&job, input, NULL, NULL) < 0) {
        return -1;
    }
    run(STATS, input->dtype, &job);
    for (int64_t c = 0; c < job.channels; c++) {
        write_at(mean, c, job.ch[c].mean);
        write_at(var, c, job.ch[c].var);
    }
    free(job.ch);
    return 0;
}

int
THBatchNorm_forward(THTensor *output, const THTensor *input, const THTensor *mean,
                    const THTensor *var, const THTensor *weight, const THTensor *bias,
                    double eps)
{
    NormJob job;
    if (begin_job(&job, input, NULL, THTensor_data(output)) < 0) {
        return -1;
    }
    load_statistics(&job, mean, var, eps);
    for (int64_t c = 0; c < job.channels; c++) {
        Channel *ch = &job.ch[c];
        ch->scale = ch->invstd * read_at(weight, c, 1.0);
        ch->shift = read_at(bias, c, 0.0) - ch->mean * ch->scale;
    }
    run(FORWARD, input->dtype, &job);
    free(job.ch);
    return 0;
}

int
THBatchNorm_backward(THTensor *grad_input, THTensor *grad_weight, THTensor *grad_bias,
                     const THTensor *grad_output, const THTensor *input,
                     const THTensor *mean, const THTensor *var, const THTensor *weight,
                     double eps, bool training)
{
    NormJob job;
    char *out = grad_input ? THTensor_data(grad_input) : NULL;
    if (begin_job(&job, input, grad_output, out) < 0) {
        return -1;
    }
    load_statistics(&job, mean, var, eps);
    bool sums_needed = grad_weight != NULL || grad_bias != NULL
                       || (grad_input != NULL && training);
    if (sums_needed) {
        run(GRAD_SUMS, input->dtype, &job);
    }
    double count = (double)per_channel(&job);
    for (int64_t c = 0; c < job.channels; c++) {
        Channel *ch = &job.ch[c];
        if (sums_needed) {
            write_at(grad_weight, c, ch->dot * ch->invstd);
            write_at(grad_bias, c, ch->sum_dy);
        }
        ch->grad_scale = ch->invstd * read_at(weight, c, 1.0);
        /* eval: the statistics are constants, dx = dy * grad_scale */
        ch->grad_mean = training ? ch->sum_dy / count : 0.0;
        ch->proj = training ? ch->dot * ch->invstd * ch->invstd / count : 0.0;
    }
    if (grad_input != NULL) {
        run(GRAD_INPUT, input->dtype, &job);
    }
    free(job.ch);
    return 0;
}
