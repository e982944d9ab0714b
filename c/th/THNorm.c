/*
 * THNorm.c -- batch normalisation's statistics, forward and backward
 * (Note [Batch norm in three kernels] in THNorm.h).  The per-channel
 * passes run channels in parallel, the elementwise ones (sample, channel)
 * rows; every sum is accumulated in independent lanes, in double (across
 * blocks: Note [Sums in blocks]).
 */
#include "THNorm.h"

#include "THGeneral.h"
#include "THParallel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The floating dtypes batch norm runs in: (Name, ctype). */
#define TH_NORM_DTYPES(_)                                                     \
    _(Float32, float)                                                         \
    _(Float64, double)

/*
 * Note [Sums in blocks]
 * ~~~~~~~~~~~~~~~~~~~~~
 * A row's sums run LANES independent accumulators (one running sum would
 * be a chain of dependent additions, and reassociating it is not the
 * compiler's to do).  Converting every float32 term to double halves the
 * vector width and adds a conversion per element, which made layer
 * norm's statistics twice as slow as PyTorch's; so each lane adds the
 * terms of a block of BLOCK elements (BLOCK / LANES = 8 terms a lane) in
 * the row's dtype, and the block's lanes are then added into double
 * lanes.  float32 rounds only inside a block of 8 terms; the long sums
 * over the row stay in double.  (The variance stays two-pass: Note [Batch
 * norm in three kernels].)  row_sum, row_squares and layer norm's
 * backward sums (row_layer_sums) work so.  row_sum_dot (batch and group
 * norm's backward) converts each term: gcc vectorised its blocked form,
 * two sums over two inputs, with a permutation per load, and group
 * norm's backward ran 1.4x slower than with double lanes.
 */
#define LANES 16
#define BLOCK (8 * LANES)

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
    /* a block's lanes added into the double lanes */                         \
    static inline void add_block_##Name(double acc[LANES], const ctype part[LANES]) \
    {                                                                         \
        for (int k = 0; k < LANES; k++) {                                     \
            acc[k] += (double)part[k];                                        \
        }                                                                     \
    }                                                                         \
    /* sum(row) and sum((row - mean)^2) of one row (Note [Sums in blocks]) */ \
    TH_VECTOR_CLONES static double row_sum_##Name(const ctype *row, int64_t len) \
    {                                                                         \
        double acc[LANES] = {0};                                              \
        int64_t i = 0;                                                        \
        for (; i + BLOCK <= len; i += BLOCK) {                                \
            ctype part[LANES] = {0};                                          \
            for (int j = 0; j < BLOCK; j += LANES) {                          \
                for (int k = 0; k < LANES; k++) {                             \
                    part[k] += row[i + j + k];                                \
                }                                                             \
            }                                                                 \
            add_block_##Name(acc, part);                                      \
        }                                                                     \
        ctype part[LANES] = {0}; /* the last, partial block */                \
        for (; i + LANES <= len; i += LANES) {                                \
            for (int k = 0; k < LANES; k++) {                                 \
                part[k] += row[i + k];                                        \
            }                                                                 \
        }                                                                     \
        add_block_##Name(acc, part);                                          \
        for (; i < len; i++) {                                                \
            acc[0] += (double)row[i];                                         \
        }                                                                     \
        return lanes_total(acc);                                              \
    }                                                                         \
    TH_VECTOR_CLONES static double row_squares_##Name(const ctype *row, int64_t len, double mean) \
    {                                                                         \
        double acc[LANES] = {0};                                              \
        ctype mean_c = (ctype)mean;                                           \
        int64_t i = 0;                                                        \
        for (; i + BLOCK <= len; i += BLOCK) {                                \
            ctype part[LANES] = {0};                                          \
            for (int j = 0; j < BLOCK; j += LANES) {                          \
                for (int k = 0; k < LANES; k++) {                             \
                    ctype d = row[i + j + k] - mean_c;                        \
                    part[k] += d * d;                                         \
                }                                                             \
            }                                                                 \
            add_block_##Name(acc, part);                                      \
        }                                                                     \
        ctype part[LANES] = {0};                                              \
        for (; i + LANES <= len; i += LANES) {                                \
            for (int k = 0; k < LANES; k++) {                                 \
                ctype d = row[i + k] - mean_c;                                \
                part[k] += d * d;                                             \
            }                                                                 \
        }                                                                     \
        add_block_##Name(acc, part);                                          \
        for (; i < len; i++) {                                                \
            double d = (double)row[i] - mean;                                 \
            acc[0] += d * d;                                                  \
        }                                                                     \
        return lanes_total(acc);                                              \
    }                                                                         \
    /* sum(dy) and sum(dy * (x - mean)) of one row, in one read */            \
    TH_VECTOR_CLONES static void row_sum_dot_##Name(const ctype *dy,         \
                                                    const ctype *x,          \
                                                    int64_t len, double mean, \
                                                    double out[2])           \
    {                                                                         \
        double sums[LANES] = {0}, dots[LANES] = {0};                          \
        int64_t i = 0;                                                        \
        for (; i + LANES <= len; i += LANES) {                                \
            for (int k = 0; k < LANES; k++) {                                 \
                sums[k] += (double)dy[i + k];                                 \
                dots[k] += (double)dy[i + k] * ((double)x[i + k] - mean);     \
            }                                                                 \
        }                                                                     \
        for (; i < len; i++) {                                                \
            sums[0] += (double)dy[i];                                         \
            dots[0] += (double)dy[i] * ((double)x[i] - mean);                 \
        }                                                                     \
        out[0] = lanes_total(sums);                                           \
        out[1] = lanes_total(dots);                                           \
    }                                                                         \
                                                                              \
    /* channels [begin, end): mean and biased variance, two passes */         \
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
    /* rows [begin, end) of N x C: y = x * scale + shift */                   \
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
    /* channels [begin, end): sum(dy) and sum(dy * (x - mean)) */             \
    static void grad_sums_##Name(int64_t begin, int64_t end, void *ctx)       \
    {                                                                         \
        NormJob *job = ctx;                                                   \
        const ctype *x = (const ctype *)job->x, *dy = (const ctype *)job->dy; \
        for (int64_t c = begin; c < end; c++) {                               \
            double sum_dy = 0.0, dot = 0.0;                                   \
            for (int64_t n = 0; n < job->batch; n++) {                        \
                int64_t row = row_of(job, n, c);                              \
                double sums[2];                                               \
                row_sum_dot_##Name(dy + row, x + row, job->spatial,           \
                                   job->ch[c].mean, sums);                    \
                sum_dy += sums[0];                                            \
                dot += sums[1];                                               \
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
#define TH_NORM_CASE(Name, ctype)                                             \
    case TH_##Name:                                                           \
        return kernel == STATS       ? stats_##Name                           \
               : kernel == FORWARD   ? forward_##Name                         \
               : kernel == GRAD_SUMS ? grad_sums_##Name                       \
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
#define TH_READ_CASE(Name, ctype)                                             \
    case TH_##Name:                                                           \
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
#define TH_WRITE_CASE(Name, ctype)                                            \
    case TH_##Name:                                                           \
        ((ctype *)THTensor_data(t))[c] = (ctype)value;                        \
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

/* ---- layer and group norm (Note [Layer and group norm as row norm]) ---------- */

typedef struct {
    THRowNormShape s;
    int64_t len; /* M = channels * spatial */
    const char *x, *dy, *weight, *bias; /* weight, bias: never NULL here */
    char *out;                          /* output or grad_input */
    char *mean, *rstd;                  /* per row */
    double eps;
    int64_t chunks;  /* backward: blocks of rows, each with its own partial sums */
    double *partial; /* chunks x (grad_weight, grad_bias) x groups * channels */
    double *block;   /* as partial, each slot holding a ctype: a row block's sums */
} RowJob;

/*
 * Note [Row blocks of the affine gradients]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * With spatial 1 (layer norm), every row adds one term to each channel's
 * grad_weight and grad_bias.  Adding each term straight into the double
 * partial sums costs a double load, add and store per element and row,
 * more than the rest of the row's backward; instead the terms of ROW_BLOCK
 * rows are summed in the row's dtype (as PyTorch's kernel sums all of
 * them) and each block's sum is then added into the double partial sums.
 * A block sums few terms, so float32 rounds little; the long sum over
 * all rows stays in double.  Group norm with several groups touches other
 * channels in consecutive rows, so its blocks are single rows.
 */
#define ROW_BLOCK 8

/* Row r's first channel among the affine parameters. */
static int64_t
first_channel(const RowJob *job, int64_t r)
{
    return (r % job->s.groups) * job->s.channels;
}

/* The rows of backward chunk k: [*begin, *end). */
static void
chunk_rows(const RowJob *job, int64_t k, int64_t *begin, int64_t *end)
{
    *begin = job->s.rows * k / job->chunks;
    *end = job->s.rows * (k + 1) / job->chunks;
}

#define TH_DEFINE_ROW_NORM_KERNELS(Name, ctype)                               \
    /* y = (x - mean) rstd w + b of one row, from its statistics */           \
    TH_VECTOR_CLONES static void row_affine_##Name(const RowJob *job, const ctype *x, ctype *y, \
                                  int64_t first, ctype mean, ctype rstd)      \
    {                                                                         \
        const ctype *w = (const ctype *)job->weight + first;                  \
        const ctype *b = (const ctype *)job->bias + first;                    \
        int64_t spatial = job->s.spatial;                                     \
        if (spatial == 1) {                                                   \
            for (int64_t c = 0; c < job->s.channels; c++) {                   \
                y[c] = (x[c] - mean) * rstd * w[c] + b[c];                    \
            }                                                                 \
            return;                                                           \
        }                                                                     \
        for (int64_t c = 0; c < job->s.channels; c++) {                       \
            ctype scale = rstd * w[c], shift = b[c] - mean * scale;           \
            const ctype *xc = x + c * spatial;                                \
            ctype *yc = y + c * spatial;                                      \
            for (int64_t i = 0; i < spatial; i++) {                           \
                yc[i] = xc[i] * scale + shift;                                \
            }                                                                 \
        }                                                                     \
    }                                                                         \
                                                                                \
    /* rows [begin, end): statistics (two passes), then the affine pass */    \
    static void row_forward_##Name(int64_t begin, int64_t end, void *ctx)     \
    {                                                                         \
        RowJob *job = ctx;                                                    \
        for (int64_t r = begin; r < end; r++) {                               \
            const ctype *x = (const ctype *)job->x + r * job->len;            \
            double mean = row_sum_##Name(x, job->len) / (double)job->len;     \
            double var = row_squares_##Name(x, job->len, mean) / (double)job->len; \
            double rstd = 1.0 / sqrt(var + job->eps);                         \
            ((ctype *)job->mean)[r] = (ctype)mean;                            \
            ((ctype *)job->rstd)[r] = (ctype)rstd;                            \
            row_affine_##Name(job, x, (ctype *)job->out + r * job->len,       \
                              first_channel(job, r), (ctype)mean, (ctype)rstd); \
        }                                                                     \
    }                                                                         \
                                                                                \
    /* spatial > 1 (group norm), one read of a row: sums[0] = sum(dy w),      \
     * sums[1] = sum(dy w (x - mean)), and each channel's sum(dy (x - mean))  \
     * rstd and sum(dy) added to gw, gb */                                    \
    TH_VECTOR_CLONES static void row_group_sums_##Name(const RowJob *job, const ctype *x, \
                                                       const ctype *dy, const ctype *w, \
                                                       double mean, double rstd, \
                                                       double *restrict gw, double *restrict gb, \
                                                       double sums[2])        \
    {                                                                         \
        int64_t spatial = job->s.spatial;                                     \
        sums[0] = sums[1] = 0.0;                                              \
        for (int64_t c = 0; c < job->s.channels; c++) {                       \
            double both[2];                                                   \
            row_sum_dot_##Name(dy + c * spatial, x + c * spatial, spatial, mean, both); \
            double sum_dy = both[0], dot = both[1];                           \
            sums[0] += sum_dy * (double)w[c];                                 \
            sums[1] += dot * (double)w[c];                                    \
            gw[c] += dot * rstd;                                              \
            gb[c] += sum_dy;                                                  \
        }                                                                     \
    }                                                                         \
    /* LANES channels of a layer norm row (Note [Sums in blocks]):            \
     * g = dy w and g (x - mean) into the lanes pg, pgx; dy (x - mean) rstd   \
     * and dy into the row block's sums bw, bb (Note [Row blocks of the       \
     * affine gradients]) */                                                  \
    static inline void layer_lanes_##Name(const ctype *restrict x, const ctype *restrict dy, \
                                          const ctype *restrict w, ctype mean, ctype rstd, \
                                          ctype *restrict bw, ctype *restrict bb, \
                                          ctype pg[LANES], ctype pgx[LANES])  \
    {                                                                         \
        for (int k = 0; k < LANES; k++) {                                     \
            ctype d = x[k] - mean, g = dy[k] * w[k];                          \
            pg[k] += g;                                                       \
            pgx[k] += g * d;                                                  \
            bw[k] += dy[k] * d * rstd;                                        \
            bb[k] += dy[k];                                                   \
        }                                                                     \
    }                                                                         \
    /* spatial 1, one read of the row: sums[0] = sum(dy w), sums[1] = sum(dy w \
     * (x - mean)), and the row's terms of the affine gradients added into bw, bb */ \
    TH_VECTOR_CLONES static void row_layer_sums_##Name(const ctype *x, const ctype *dy, \
                                                       const ctype *w, int64_t channels, \
                                                       ctype mean, ctype rstd, ctype *bw, \
                                                       ctype *bb, double sums[2]) \
    {                                                                         \
        double acc_g[LANES] = {0}, acc_gx[LANES] = {0};                       \
        int64_t c = 0;                                                        \
        for (; c + BLOCK <= channels; c += BLOCK) {                           \
            ctype pg[LANES] = {0}, pgx[LANES] = {0};                          \
            for (int j = 0; j < BLOCK; j += LANES) {                          \
                layer_lanes_##Name(x + c + j, dy + c + j, w + c + j, mean, rstd, bw + c + j, \
                                   bb + c + j, pg, pgx);                      \
            }                                                                 \
            add_block_##Name(acc_g, pg);                                      \
            add_block_##Name(acc_gx, pgx);                                    \
        }                                                                     \
        ctype pg[LANES] = {0}, pgx[LANES] = {0}; /* the last, partial block */ \
        for (; c + LANES <= channels; c += LANES) {                           \
            layer_lanes_##Name(x + c, dy + c, w + c, mean, rstd, bw + c, bb + c, pg, pgx); \
        }                                                                     \
        add_block_##Name(acc_g, pg);                                          \
        add_block_##Name(acc_gx, pgx);                                        \
        for (; c < channels; c++) {                                           \
            ctype d = x[c] - mean, g = dy[c] * w[c];                          \
            acc_g[0] += (double)g;                                            \
            acc_gx[0] += (double)(g * d);                                     \
            bw[c] += dy[c] * d * rstd;                                        \
            bb[c] += dy[c];                                                   \
        }                                                                     \
        sums[0] = lanes_total(acc_g);                                         \
        sums[1] = lanes_total(acc_gx);                                        \
    }                                                                         \
                                                                              \
    /* a block's sums into the chunk's double partial sums; the block reset */ \
    TH_VECTOR_CLONES static void flush_block_##Name(ctype *restrict bw, ctype *restrict bb, \
                                   double *restrict gw, double *restrict gb,  \
                                   int64_t channels)                          \
    {                                                                         \
        for (int64_t c = 0; c < channels; c++) {                              \
            gw[c] += (double)bw[c];                                           \
            gb[c] += (double)bb[c];                                           \
            bw[c] = bb[c] = 0;                                                \
        }                                                                     \
    }                                                                         \
                                                                                \
    /* dx = rstd w dy + (x - mean) slope + offset over one row */             \
    TH_VECTOR_CLONES static void row_grad_input_##Name(const RowJob *job, const ctype *x, \
                                      const ctype *dy, const ctype *w,        \
                                      ctype *dx, ctype mean, ctype rstd,      \
                                      ctype slope, ctype offset)              \
    {                                                                         \
        int64_t spatial = job->s.spatial;                                     \
        if (spatial == 1) {                                                   \
            for (int64_t c = 0; c < job->s.channels; c++) {                   \
                dx[c] = rstd * w[c] * dy[c] + (x[c] - mean) * slope + offset; \
            }                                                                 \
            return;                                                           \
        }                                                                     \
        for (int64_t c = 0; c < job->s.channels; c++) {                       \
            ctype scale = rstd * w[c];                                        \
            int64_t at = c * spatial;                                         \
            for (int64_t i = 0; i < spatial; i++) {                           \
                dx[at + i] = dy[at + i] * scale + (x[at + i] - mean) * slope + offset; \
            }                                                                 \
        }                                                                     \
    }                                                                         \
                                                                                \
    /* chunks [begin, end): each chunk's rows, into its own partial sums */   \
    static void row_backward_##Name(int64_t begin, int64_t end, void *ctx)    \
    {                                                                         \
        RowJob *job = ctx;                                                    \
        int64_t width = job->s.groups * job->s.channels;                      \
        int64_t block_rows = job->s.groups == 1 ? ROW_BLOCK : 1;              \
        for (int64_t k = begin; k < end; k++) {                               \
            double *gw = job->partial + 2 * k * width, *gb = gw + width;      \
            ctype *bw = (ctype *)(job->block + 2 * k * width), *bb = bw + width; \
            int64_t first_row, end_row;                                       \
            chunk_rows(job, k, &first_row, &end_row);                         \
            for (int64_t r = first_row; r < end_row; r++) {                   \
                const ctype *x = (const ctype *)job->x + r * job->len;        \
                const ctype *dy = (const ctype *)job->dy + r * job->len;      \
                int64_t first = first_channel(job, r);                        \
                const ctype *w = (const ctype *)job->weight + first;          \
                double mean = (double)((const ctype *)job->mean)[r];          \
                double rstd = (double)((const ctype *)job->rstd)[r];          \
                double sums[2];                                               \
                if (job->s.spatial > 1) {                                     \
                    row_group_sums_##Name(job, x, dy, w, mean, rstd, gw + first, \
                                          gb + first, sums);                  \
                }                                                             \
                else {                                                        \
                    row_layer_sums_##Name(x, dy, w, job->s.channels, (ctype)mean, \
                                          (ctype)rstd, bw + first, bb + first, sums); \
                    if ((r - first_row + 1) % block_rows == 0 || r + 1 == end_row) { \
                        flush_block_##Name(bw + first, bb + first, gw + first, \
                                           gb + first, job->s.channels);      \
                    }                                                         \
                }                                                             \
                if (job->out == NULL) {                                       \
                    continue;                                                 \
                }                                                             \
                /* mean(g) and mean(g xhat) over the row */                   \
                double mean_g = sums[0] / (double)job->len;                   \
                double mean_gx = sums[1] * rstd / (double)job->len;           \
                row_grad_input_##Name(job, x, dy, w,                          \
                                      (ctype *)job->out + r * job->len,       \
                                      (ctype)mean, (ctype)rstd,               \
                                      (ctype)(-rstd * rstd * mean_gx),        \
                                      (ctype)(-rstd * mean_g));               \
            }                                                                 \
        }                                                                     \
    }

TH_NORM_DTYPES(TH_DEFINE_ROW_NORM_KERNELS)

static THParallelFn
row_kernel_for(bool backward, THDtype dtype)
{
#define TH_ROW_NORM_CASE(Name, ctype)                                         \
    case TH_##Name:                                                           \
        return backward ? row_backward_##Name : row_forward_##Name;
    switch (dtype) {
        TH_NORM_DTYPES(TH_ROW_NORM_CASE)
    default:
        return NULL;
    }
#undef TH_ROW_NORM_CASE
}

/* A `width`-element buffer of `value` in `dtype`, for absent
 * affine parameters (the kernels then need no branch per element). */
static char *
constant_row(THDtype dtype, int64_t width, double value)
{
    size_t itemsize = dtype == TH_Float32 ? sizeof(float) : sizeof(double);
    char *row = TH_mallocArray(width > 0 ? width : 1, itemsize, "a norm's affine default");
    for (int64_t c = 0; row != NULL && c < width; c++) {
        if (dtype == TH_Float32) {
            ((float *)row)[c] = (float)value;
        } else {
            ((double *)row)[c] = value;
        }
    }
    return row;
}

/* Fills `job` over `input`, with defaults for a NULL weight (1) or bias (0)
 * in owned[0], owned[1] (the caller frees them).  0, or -1. */
static int
begin_row_job(RowJob *job, const THRowNormShape *shape, const THTensor *input,
              const THTensor *weight, const THTensor *bias, char **owned)
{
    if (row_kernel_for(false, input->dtype) == NULL) {
        return THError_set(TH_ERR_TYPE, "layer_norm/group_norm: expected a float32 or "
                                        "float64 tensor");
    }
    int64_t width = shape->groups * shape->channels;
    job->s = *shape;
    job->len = shape->channels * shape->spatial;
    job->x = THTensor_data(input);
    owned[0] = weight ? NULL : constant_row(input->dtype, width, 1.0);
    owned[1] = bias ? NULL : constant_row(input->dtype, width, 0.0);
    job->weight = weight ? THTensor_data(weight) : owned[0];
    job->bias = bias ? THTensor_data(bias) : owned[1];
    if (job->weight == NULL || job->bias == NULL) {
        free(owned[0]);
        free(owned[1]);
        return -1;
    }
    return 0;
}

int
THRowNorm_forward(THTensor *output, THTensor *mean, THTensor *rstd, const THTensor *input,
                  const THTensor *weight, const THTensor *bias,
                  const THRowNormShape *shape, double eps)
{
    RowJob job = {.eps = eps};
    char *owned[2];
    if (begin_row_job(&job, shape, input, weight, bias, owned) < 0) {
        return -1;
    }
    job.out = THTensor_data(output);
    job.mean = THTensor_data(mean);
    job.rstd = THTensor_data(rstd);
    THParallel_for(shape->rows, 1 + TH_PARALLEL_GRAIN / (job.len + 1),
                   row_kernel_for(false, input->dtype), &job);
    free(owned[0]);
    free(owned[1]);
    return 0;
}

/* One chunk of rows per thread when the work is worth the hand-off. */
static int64_t
backward_chunks(const RowJob *job)
{
    int64_t threads = THParallel_getNumThreads();
    if (job->s.rows * job->len < 2 * TH_PARALLEL_GRAIN || THParallel_inParallelRegion()) {
        return 1;
    }
    return threads < job->s.rows ? threads : job->s.rows;
}

int
THRowNorm_backward(THTensor *grad_input, THTensor *grad_weight, THTensor *grad_bias,
                   const THTensor *grad_output, const THTensor *input,
                   const THTensor *mean, const THTensor *rstd, const THTensor *weight,
                   const THRowNormShape *shape)
{
    RowJob job = {0};
    char *owned[2];
    if (begin_row_job(&job, shape, input, weight, NULL, owned) < 0) {
        return -1;
    }
    job.dy = THTensor_data(grad_output);
    job.out = grad_input ? THTensor_data(grad_input) : NULL;
    job.mean = THTensor_data(mean);
    job.rstd = THTensor_data(rstd);
    job.chunks = backward_chunks(&job);
    int64_t width = shape->groups * shape->channels;
    int64_t partials = 2 * job.chunks * width; /* <= 2 * threads * numel */
    job.partial = TH_mallocArray(partials, sizeof(double), "a norm's partial sums");
    job.block = job.partial ? TH_mallocArray(partials, sizeof(double), "a norm's row-block sums")
                            : NULL;
    if (job.block == NULL) {
        free(job.partial);
        free(owned[0]);
        free(owned[1]);
        return -1;
    }
    memset(job.partial, 0, (size_t)partials * sizeof(double));
    memset(job.block, 0, (size_t)partials * sizeof(double));
    THParallel_for(job.chunks, 1, row_kernel_for(true, input->dtype), &job);
    for (int64_t c = 0; c < width; c++) {
        double gw = 0.0, gb = 0.0;
        for (int64_t k = 0; k < job.chunks; k++) {
            gw += job.partial[2 * k * width + c];
            gb += job.partial[(2 * k + 1) * width + c];
        }
        write_at(grad_weight, c, gw);
        write_at(grad_bias, c, gb);
    }
    free(job.partial);
    free(job.block);
    free(owned[0]);
    free(owned[1]);
    return 0;
}
