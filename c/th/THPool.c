/*
 * THPool.c -- 2-D max and average pooling, plane by plane (Note [Pooling
 * windows] in THPool.h).  A thread owns whole planes, so the backward
 * passes add into grad_input without two threads touching one element.
 */
#include "THPool.h"

#include "THGeneral.h"
#include "THParallel.h"

#include <math.h>
#include <string.h>

/* The floating dtypes pooling runs in: (Name, ctype). */
#define TH_POOL_DTYPES(_) \
    _(Float32, float)     \
    _(Float64, double)

typedef struct {
    const THPoolShape *s;
    THAvgPoolDivisor divisor;
    char *in;            /* input or grad_input: planes x in_h x in_w */
    char *out;           /* output or grad_output: planes x out_h x out_w */
    int64_t *indices;    /* max pooling's argmax per output (may be NULL) */
    bool adaptive;       /* adaptive windows (Note [Adaptive pooling windows]) */
} PoolJob;

/* One window's rows or columns inside the input: [begin, end) stepping by
 * `step`, the first one at or after 0. */
typedef struct {
    int64_t begin, end;
} Span;

static Span
max_span(int64_t o, int64_t stride, int64_t pad, int64_t kernel, int64_t dilation,
         int64_t in)
{
    Span span = {o * stride - pad, 0};
    span.end = span.begin + (kernel - 1) * dilation + 1;
    if (span.end > in) {
        span.end = in;
    }
    while (span.begin < 0) {
        span.begin += dilation;
    }
    return span;
}

/* One dim of an average window: its span inside the input, and its size
 * clipped to the padded input. */
typedef struct {
    Span inside;
    int64_t padded;
} AvgExtent;

static AvgExtent
avg_extent(int64_t o, int64_t stride, int64_t pad, int64_t kernel, int64_t in)
{
    int64_t begin = o * stride - pad, end = begin + kernel;
    end = end > in + pad ? in + pad : end;
    AvgExtent e = {{begin < 0 ? 0 : begin, end > in ? in : end}, end - begin};
    return e;
}

/* Output o's window of an adaptive pooling along a dim of `in` elements
 * pooled to `out`: [floor(o in / out), ceil((o + 1) in / out)). */
static Span
adaptive_span(int64_t o, int64_t in, int64_t out)
{
    Span span = {o * in / out, ((o + 1) * in + out - 1) / out};
    return span;
}

/* Output row y's (columns: x's) window of max pooling, steps of dilation. */
static Span
max_rows(const PoolJob *job, int64_t y)
{
    const THPoolShape *s = job->s;
    return job->adaptive ? adaptive_span(y, s->in_h, s->out_h)
                         : max_span(y, s->stride_h, s->pad_h, s->kernel_h, s->dilation_h,
                                    s->in_h);
}

static Span
max_cols(const PoolJob *job, int64_t x)
{
    const THPoolShape *s = job->s;
    return job->adaptive ? adaptive_span(x, s->in_w, s->out_w)
                         : max_span(x, s->stride_w, s->pad_w, s->kernel_w, s->dilation_w,
                                    s->in_w);
}

/* The same for average pooling; an adaptive window has no padding. */
static AvgExtent
avg_rows(const PoolJob *job, int64_t y)
{
    const THPoolShape *s = job->s;
    if (job->adaptive) {
        Span span = adaptive_span(y, s->in_h, s->out_h);
        return (AvgExtent){span, span.end - span.begin};
    }
    return avg_extent(y, s->stride_h, s->pad_h, s->kernel_h, s->in_h);
}

static AvgExtent
avg_cols(const PoolJob *job, int64_t x)
{
    const THPoolShape *s = job->s;
    if (job->adaptive) {
        Span span = adaptive_span(x, s->in_w, s->out_w);
        return (AvgExtent){span, span.end - span.begin};
    }
    return avg_extent(x, s->stride_w, s->pad_w, s->kernel_w, s->in_w);
}

/* What window (rows, cols)'s sum is divided by (PyTorch's divide_factor);
 * 0 when it holds no input element (its output is 0). */
static int64_t
avg_divisor(const PoolJob *job, AvgExtent rows, AvgExtent cols)
{
    int64_t height = rows.inside.end - rows.inside.begin;
    int64_t width = cols.inside.end - cols.inside.begin;
    if (height <= 0 || width <= 0) {
        return 0;
    }
    if (job->divisor.divisor_override != 0) {
        return job->divisor.divisor_override;
    }
    return job->divisor.count_include_pad ? rows.padded * cols.padded : height * width;
}

/* ---- the kernels, one typed copy per dtype; each runs planes [begin, end) ---- */

#define TH_DEFINE_MAX_FORWARD(Name, ctype)                                   \
    static void max_forward_##Name(int64_t begin, int64_t end, void *ctx)   \
    {                                                                        \
        PoolJob *job = ctx;                                                  \
        const THPoolShape *s = job->s;                                       \
        int64_t in_plane = s->in_h * s->in_w, out_plane = s->out_h * s->out_w; \
        for (int64_t p = begin; p < end; p++) {                              \
            const ctype *in = (const ctype *)job->in + p * in_plane;         \
            ctype *out = (ctype *)job->out + p * out_plane;                  \
            int64_t *indices =                                               \
                job->indices ? job->indices + p * out_plane : NULL;          \
            for (int64_t y = 0; y < s->out_h; y++) {                         \
                Span rows = max_rows(job, y);                                \
                for (int64_t x = 0; x < s->out_w; x++) {                     \
                    Span cols = max_cols(job, x);                            \
                    ctype best = -(ctype)INFINITY;                           \
                    int64_t best_index = rows.begin * s->in_w + cols.begin;  \
                    for (int64_t r = rows.begin; r < rows.end; r += s->dilation_h) { \
                        for (int64_t c = cols.begin; c < cols.end;           \
                             c += s->dilation_w) {                           \
                            ctype v = in[r * s->in_w + c];                   \
                            if (v > best || isnan(v)) {                      \
                                best = v;                                    \
                                best_index = r * s->in_w + c;                \
                            }                                                \
                        }                                                    \
                    }                                                        \
                    out[y * s->out_w + x] = best;                            \
                    if (indices != NULL) {                                   \
                        indices[y * s->out_w + x] = best_index;              \
                    }                                                        \
                }                                                            \
            }                                                                \
        }                                                                    \
    }

#define TH_DEFINE_MAX_BACKWARD(Name, ctype)                                  \
    static void max_backward_##Name(int64_t begin, int64_t end, void *ctx)  \
    {                                                                        \
        PoolJob *job = ctx;                                                  \
        const THPoolShape *s = job->s;                                       \
        int64_t in_plane = s->in_h * s->in_w, out_plane = s->out_h * s->out_w; \
        for (int64_t p = begin; p < end; p++) {                              \
            ctype *grad_in = (ctype *)job->in + p * in_plane;                \
            const ctype *grad_out = (const ctype *)job->out + p * out_plane; \
            const int64_t *indices = job->indices + p * out_plane;           \
            memset(grad_in, 0, (size_t)in_plane * sizeof(ctype));           \
            for (int64_t k = 0; k < out_plane; k++) {                        \
                int64_t at = indices[k];                                     \
                if (at >= 0 && at < in_plane) { /* else: an empty window */  \
                    grad_in[at] += grad_out[k];                              \
                }                                                            \
            }                                                                \
        }                                                                    \
    }

#define TH_DEFINE_AVG_FORWARD(Name, ctype)                                   \
    static void avg_forward_##Name(int64_t begin, int64_t end, void *ctx)   \
    {                                                                        \
        PoolJob *job = ctx;                                                  \
        const THPoolShape *s = job->s;                                       \
        int64_t in_plane = s->in_h * s->in_w, out_plane = s->out_h * s->out_w; \
        for (int64_t p = begin; p < end; p++) {                              \
            const ctype *in = (const ctype *)job->in + p * in_plane;         \
            ctype *out = (ctype *)job->out + p * out_plane;                  \
            for (int64_t y = 0; y < s->out_h; y++) {                         \
                AvgExtent rows_of = avg_rows(job, y);                        \
                Span rows = rows_of.inside;                                  \
                for (int64_t x = 0; x < s->out_w; x++) {                     \
                    AvgExtent cols_of = avg_cols(job, x);                    \
                    Span cols = cols_of.inside;                              \
                    int64_t divisor = avg_divisor(job, rows_of, cols_of);    \
                    ctype sum = 0;                                           \
                    for (int64_t r = rows.begin; r < rows.end; r++) {        \
                        for (int64_t c = cols.begin; c < cols.end; c++) {    \
                            sum += in[r * s->in_w + c];                      \
                        }                                                    \
                    }                                                        \
                    out[y * s->out_w + x] =                                  \
                        divisor == 0 ? (ctype)0 : sum / (ctype)divisor;      \
                }                                                            \
            }                                                                \
        }                                                                    \
    }

#define TH_DEFINE_AVG_BACKWARD(Name, ctype)                                  \
    static void avg_backward_##Name(int64_t begin, int64_t end, void *ctx)  \
    {                                                                        \
        PoolJob *job = ctx;                                                  \
        const THPoolShape *s = job->s;                                       \
        int64_t in_plane = s->in_h * s->in_w, out_plane = s->out_h * s->out_w; \
        for (int64_t p = begin; p < end; p++) {                              \
            ctype *grad_in = (ctype *)job->in + p * in_plane;                \
            const ctype *grad_out = (const ctype *)job->out + p * out_plane; \
            memset(grad_in, 0, (size_t)in_plane * sizeof(ctype));           \
            for (int64_t y = 0; y < s->out_h; y++) {                         \
                AvgExtent rows_of = avg_rows(job, y);                        \
                Span rows = rows_of.inside;                                  \
                for (int64_t x = 0; x < s->out_w; x++) {                     \
                    AvgExtent cols_of = avg_cols(job, x);                    \
                    Span cols = cols_of.inside;                              \
                    int64_t divisor = avg_divisor(job, rows_of, cols_of);    \
                    if (divisor == 0) {                                      \
                        continue;                                            \
                    }                                                        \
                    ctype share = grad_out[y * s->out_w + x] / (ctype)divisor; \
                    for (int64_t r = rows.begin; r < rows.end; r++) {        \
                        for (int64_t c = cols.begin; c < cols.end; c++) {    \
                            grad_in[r * s->in_w + c] += share;               \
                        }                                                    \
                    }                                                        \
                }                                                            \
            }                                                                \
        }                                                                    \
    }

/* Note [Whole-plane means]
 * ~~~~~~~~~~~~~~~~~~~~~~~~
 * Adaptive average pooling to 1 x 1 (a CNN's global average pooling)
 * has one window, the whole plane: each output is a plain mean of
 * in_h * in_w contiguous values.  The window loop above adds them one
 * after another, a chain of dependent additions (49 of them, ~150 cycles,
 * for a 7x7 plane); plane_mean adds them in PLANE_LANES independent
 * double accumulators, which vectorise, and its sum rounds once.  The
 * backward needs no kernel: every input element's gradient is its
 * plane's output gradient / (in_h * in_w), an expand (ember/nn/_pooling.py). */
#define PLANE_LANES 8

#define TH_DEFINE_PLANE_MEAN(Name, ctype)                                    \
    TH_VECTOR_CLONES static void plane_mean_##Name(int64_t begin, int64_t end, \
                                                   void *ctx)               \
    {                                                                        \
        PoolJob *job = ctx;                                                  \
        int64_t plane = job->s->in_h * job->s->in_w;                         \
        for (int64_t p = begin; p < end; p++) {                              \
            const ctype *in = (const ctype *)job->in + p * plane;            \
            double lanes[PLANE_LANES] = {0}, total = 0.0;                    \
            int64_t i = 0;                                                   \
            for (; i + PLANE_LANES <= plane; i += PLANE_LANES) {             \
                for (int k = 0; k < PLANE_LANES; k++) {                      \
                    lanes[k] += (double)in[i + k];                           \
                }                                                            \
            }                                                                \
            for (; i < plane; i++) {                                         \
                total += (double)in[i];                                      \
            }                                                                \
            for (int k = 0; k < PLANE_LANES; k++) {                          \
                total += lanes[k];                                           \
            }                                                                \
            ((ctype *)job->out)[p] = (ctype)(total / (double)plane);        \
        }                                                                    \
    }

TH_POOL_DTYPES(TH_DEFINE_MAX_FORWARD)
TH_POOL_DTYPES(TH_DEFINE_MAX_BACKWARD)
TH_POOL_DTYPES(TH_DEFINE_AVG_FORWARD)
TH_POOL_DTYPES(TH_DEFINE_AVG_BACKWARD)
TH_POOL_DTYPES(TH_DEFINE_PLANE_MEAN)

typedef enum {
    MAX_FORWARD,
    MAX_BACKWARD,
    AVG_FORWARD,
    AVG_BACKWARD,
    PLANE_MEAN
} PoolKernel;

static THParallelFn
kernel_for(PoolKernel kernel, THDtype dtype)
{
#define TH_POOL_CASE(Name, ctype)                                           \
    case TH_##Name:                                                         \
        return kernel == MAX_FORWARD    ? max_forward_##Name                \
               : kernel == MAX_BACKWARD ? max_backward_##Name               \
               : kernel == AVG_FORWARD  ? avg_forward_##Name                \
               : kernel == AVG_BACKWARD ? avg_backward_##Name               \
                                        : plane_mean_##Name;
    switch (dtype) {
        TH_POOL_DTYPES(TH_POOL_CASE)
    default:
        return NULL;
    }
#undef TH_POOL_CASE
}

/* Runs `kernel` over every plane: 0, or -1 with an error. */
static int
run(PoolKernel kernel, THDtype dtype, PoolJob *job)
{
    THParallelFn fn = kernel_for(kernel, dtype);
    if (fn == NULL) {
        return THError_set(TH_ERR_TYPE, "pooling: expected a float32 or float64 tensor");
    }
    const THPoolShape *s = job->s;
    /* a plane's work: the larger of its input and its output */
    int64_t work = s->in_h * s->in_w + s->out_h * s->out_w;
    THParallel_for(s->planes, 1 + TH_PARALLEL_GRAIN / (work + 1), fn, job);
    return 0;
}

int
THPool2d_maxForward(THTensor *output, THTensor *indices, const THTensor *input,
                    const THPoolShape *s)
{
    PoolJob job = {.s = s, .in = THTensor_data(input), .out = THTensor_data(output),
                   .indices = indices ? (int64_t *)THTensor_data(indices) : NULL};
    return run(MAX_FORWARD, input->dtype, &job);
}

int
THPool2d_maxBackward(THTensor *grad_input, const THTensor *grad_output,
                     const THTensor *indices, const THPoolShape *s)
{
    PoolJob job = {.s = s, .in = THTensor_data(grad_input),
                   .out = THTensor_data(grad_output),
                   .indices = (int64_t *)THTensor_data(indices)};
    return run(MAX_BACKWARD, grad_output->dtype, &job);
}

int
THPool2d_avgForward(THTensor *output, const THTensor *input, const THPoolShape *s,
                    THAvgPoolDivisor divisor)
{
    PoolJob job = {.s = s, .divisor = divisor, .in = THTensor_data(input),
                   .out = THTensor_data(output)};
    return run(AVG_FORWARD, input->dtype, &job);
}

int
THPool2d_avgBackward(THTensor *grad_input, const THTensor *grad_output,
                     const THPoolShape *s, THAvgPoolDivisor divisor)
{
    PoolJob job = {.s = s, .divisor = divisor, .in = THTensor_data(grad_input),
                   .out = THTensor_data(grad_output)};
    return run(AVG_BACKWARD, grad_output->dtype, &job);
}

/* The adaptive forms run the kernels above over adaptive windows, taps one
 * apart, divided by the window's size. */
static THPoolShape
adaptive_shape(const THPoolShape *s)
{
    THPoolShape a = *s;
    a.dilation_h = a.dilation_w = 1;
    return a;
}

static const THAvgPoolDivisor adaptive_divisor = {.count_include_pad = true};

int
THPool2d_adaptiveMaxForward(THTensor *output, THTensor *indices, const THTensor *input,
                            const THPoolShape *s)
{
    THPoolShape a = adaptive_shape(s);
    PoolJob job = {.s = &a, .in = THTensor_data(input), .out = THTensor_data(output),
                   .indices = indices ? (int64_t *)THTensor_data(indices) : NULL,
                   .adaptive = true};
    return run(MAX_FORWARD, input->dtype, &job);
}

int
THPool2d_adaptiveAvgForward(THTensor *output, const THTensor *input, const THPoolShape *s)
{
    THPoolShape a = adaptive_shape(s);
    PoolJob job = {.s = &a, .divisor = adaptive_divisor, .in = THTensor_data(input),
                   .out = THTensor_data(output), .adaptive = true};
    bool whole_plane = s->out_h == 1 && s->out_w == 1; /* Note [Whole-plane means] */
    return run(whole_plane ? PLANE_MEAN : AVG_FORWARD, input->dtype, &job);
}

int
THPool2d_adaptiveAvgBackward(THTensor *grad_input, const THTensor *grad_output,
                             const THPoolShape *s)
{
    THPoolShape a = adaptive_shape(s);
    PoolJob job = {.s = &a, .divisor = adaptive_divisor, .in = THTensor_data(grad_input),
                   .out = THTensor_data(grad_output), .adaptive = true};
    return run(AVG_BACKWARD, grad_output->dtype, &job);
}
