/*
 * THConv.c -- 2-D convolution through GEMM (Note [Convolution as GEMM] in
 * THConv.h).
 */
#include "THConv.h"

#include "THBlas.h"
#include "THGeneral.h"
#include "THParallel.h"

#include <stdlib.h>
#include <string.h>

/* The floating dtypes a convolution runs in: (Name, ctype). */
#define TH_CONV_DTYPES(_) \
    _(Float32, float)     \
    _(Float64, double)

/* One sample and group's geometry, in elements. */
typedef struct {
    const THConvShape *s;
    int64_t channels;  /* in_channels / groups: the column blocks */
    int64_t out_plane; /* out_h * out_w: the columns */
    char *image;       /* channels x in_h x in_w, this sample and group */
    char *col;         /* (channels * kh * kw) x out_plane */
} ColumnJob;

/* ---- im2col and col2im, one typed copy per dtype ------------------------------ */

/* Rows [begin, end) of the column matrix from the image (zero off it). */
#define TH_DEFINE_IM2COL(Name, ctype)                                       \
    static void im2col_##Name(int64_t begin, int64_t end, void *ctx)       \
    {                                                                       \
        const ColumnJob *job = ctx;                                         \
        const THConvShape *s = job->s;                                      \
        const ctype *image = (const ctype *)job->image;                     \
        ctype *col = (ctype *)job->col;                                     \
        int64_t taps = s->kernel_h * s->kernel_w;                           \
        for (int64_t row = begin; row < end; row++) {                       \
            int64_t c = row / taps, i = row % taps / s->kernel_w,           \
                    j = row % s->kernel_w;                                  \
            const ctype *plane = image + c * s->in_h * s->in_w;             \
            ctype *dst = col + row * job->out_plane;                        \
            for (int64_t y = 0; y < s->out_h; y++) {                        \
                int64_t iy = y * s->stride_h - s->pad_h + i * s->dilation_h; \
                ctype *line = dst + y * s->out_w;                           \
                if (iy < 0 || iy >= s->in_h) {                              \
                    memset(line, 0, (size_t)s->out_w * sizeof(ctype));      \
                    continue;                                               \
                }                                                           \
                for (int64_t x = 0; x < s->out_w; x++) {                    \
                    int64_t ix = x * s->stride_w - s->pad_w                 \
                                 + j * s->dilation_w;                       \
                    line[x] = ix >= 0 && ix < s->in_w                       \
                                  ? plane[iy * s->in_w + ix]                \
                                  : (ctype)0;                               \
                }                                                           \
            }                                                               \
        }                                                                   \
    }

/* Channels [begin, end) of the image += their column entries.  A thread
 * owns whole channels, so no two threads add to the same element. */
#define TH_DEFINE_COL2IM(Name, ctype)                                       \
    static void col2im_##Name(int64_t begin, int64_t end, void *ctx)       \
    {                                                                       \
        const ColumnJob *job = ctx;                                         \
        const THConvShape *s = job->s;                                      \
        ctype *image = (ctype *)job->image;                                 \
        const ctype *col = (const ctype *)job->col;                         \
        int64_t taps = s->kernel_h * s->kernel_w;                           \
        for (int64_t c = begin; c < end; c++) {                             \
            ctype *plane = image + c * s->in_h * s->in_w;                   \
            for (int64_t tap = 0; tap < taps; tap++) {                      \
                int64_t i = tap / s->kernel_w, j = tap % s->kernel_w;       \
                const ctype *src = col + (c * taps + tap) * job->out_plane; \
                for (int64_t y = 0; y < s->out_h; y++) {                    \
                    int64_t iy =                                            \
                        y * s->stride_h - s->pad_h + i * s->dilation_h;     \
                    if (iy < 0 || iy >= s->in_h) {                          \
                        continue;                                           \
                    }                                                       \
                    for (int64_t x = 0; x < s->out_w; x++) {                \
                        int64_t ix = x * s->stride_w - s->pad_w             \
                                     + j * s->dilation_w;                   \
                        if (ix >= 0 && ix < s->in_w) {                      \
                            plane[iy * s->in_w + ix] += src[y * s->out_w + x]; \
                        }                                                   \
                    }                                                       \
                }                                                           \
            }                                                               \
        }                                                                   \
    }

TH_CONV_DTYPES(TH_DEFINE_IM2COL)
TH_CONV_DTYPES(TH_DEFINE_COL2IM)

static THParallelFn
im2col_for(THDtype dtype)
{
#define TH_IM2COL_CASE(Name, ctype) \
    case TH_##Name:                 \
        return im2col_##Name;
    switch (dtype) {
        TH_CONV_DTYPES(TH_IM2COL_CASE)
    default:
        return NULL;
    }
#undef TH_IM2COL_CASE
}

static THParallelFn
col2im_for(THDtype dtype)
{
#define TH_COL2IM_CASE(Name, ctype) \
    case TH_##Name:                 \
        return col2im_##Name;
    switch (dtype) {
        TH_CONV_DTYPES(TH_COL2IM_CASE)
    default:
        return NULL;
    }
#undef TH_COL2IM_CASE
}

/* ---- shared geometry -------------------------------------------------------------- */

typedef struct {
    THDtype dtype;
    size_t itemsize;
    int64_t in_group;    /* in_channels / groups */
    int64_t out_group;   /* out_channels / groups */
    int64_t depth;       /* in_group * kh * kw: the GEMM's inner dim */
    int64_t out_plane;   /* out_h * out_w */
    int64_t in_plane;    /* in_h * in_w */
    bool direct;         /* 1x1, stride 1, no padding: no column buffer */
} ConvPlan;

static ConvPlan
plan_of(const THConvShape *s, THDtype dtype)
{
    ConvPlan p;
    p.dtype = dtype;
    p.itemsize = (size_t)THDtype_itemsize(dtype);
    p.in_group = s->in_channels / s->groups;
    p.out_group = s->out_channels / s->groups;
    p.depth = p.in_group * s->kernel_h * s->kernel_w;
    p.out_plane = s->out_h * s->out_w;
    p.in_plane = s->in_h * s->in_w;
    p.direct = s->kernel_h == 1 && s->kernel_w == 1 && s->stride_h == 1
               && s->stride_w == 1 && s->pad_h == 0 && s->pad_w == 0;
    return p;
}

static THBlasMatrix
row_major(char *data, int64_t cols)
{
    THBlasMatrix m = {data, cols, 1};
    return m;
}

/* The column buffer, or NULL (with an error) when it cannot be had; a
 * direct plan needs none and gets a dummy non-NULL pointer. */
static char *
alloc_columns(const ConvPlan *p)
{
    static char none;
    if (p->direct) {
        return &none;
    }
    int64_t count;
    if (TH_mul_overflows(p->depth, p->out_plane, &count)) {
        THError_set(TH_ERR_MEMORY, "convolution: column buffer too large");
        return NULL;
    }
    return TH_mallocArray(count, p->itemsize, "the convolution's column buffer");
}

static void
free_columns(const ConvPlan *p, char *col)
{
    if (!p->direct) {
        free(col);
    }
}

/* col of one sample and group (image = its first input channel). */
static char *
columns_of(const ConvPlan *p, const THConvShape *s, char *image, char *col)
{
    if (p->direct) {
        return image; /* the input plane already is the (depth x out_plane) matrix */
    }
    ColumnJob job = {s, p->in_group, p->out_plane, image, col};
    THParallel_for(p->depth, 1 + TH_PARALLEL_GRAIN / (p->out_plane + 1),
                   im2col_for(p->dtype), &job);
    return col;
}

/* The plan and column buffer of one product: 0, or -1 with an error (a
 * dtype the kernels do not run in, or no memory for the buffer). */
static int
prepare(THDtype dtype, const THConvShape *s, ConvPlan *p, char **buffer)
{
    if (im2col_for(dtype) == NULL) {
        return THError_set(TH_ERR_TYPE,
                           "convolution: expected a float32 or float64 tensor");
    }
    *p = plan_of(s, dtype);
    *buffer = alloc_columns(p);
    return *buffer == NULL ? -1 : 0;
}

/* ---- the three products -------------------------------------------------------- */

/* Where sample n's group g starts: in the image-side tensor (N x C_in x H x W:
 * input or grad_input), the output-side one (N x C_out x out_h x out_w:
 * output or grad_output) and the weight (or its gradient). */
typedef struct {
    char *image, *out, *weight;
} GroupBlock;

static GroupBlock
group_block(const ConvPlan *p, const THConvShape *s, int64_t n, int64_t g,
            const THTensor *image, const THTensor *out, const THTensor *weight)
{
    GroupBlock b;
    b.image = THTensor_data(image)
              + (n * s->in_channels + g * p->in_group) * p->in_plane * p->itemsize;
    b.out = THTensor_data(out)
            + (n * s->out_channels + g * p->out_group) * p->out_plane * p->itemsize;
    b.weight = THTensor_data(weight) + g * p->out_group * p->depth * p->itemsize;
    return b;
}

static void
add_bias(const ConvPlan *p, char *out, const char *bias, int64_t first_channel)
{
#define TH_ADD_BIAS_CASE(Name, ctype)                                      \
    case TH_##Name:                                                        \
        for (int64_t o = 0; o < p->out_group; o++) {                       \
            ctype b = ((const ctype *)bias)[first_channel + o];            \
            ctype *row = (ctype *)out + o * p->out_plane;                  \
            for (int64_t x = 0; x < p->out_plane; x++) {                   \
                row[x] += b;                                               \
            }                                                              \
        }                                                                  \
        break;
    switch (p->dtype) {
        TH_CONV_DTYPES(TH_ADD_BIAS_CASE)
    default:
        break;
    }
#undef TH_ADD_BIAS_CASE
}

int
THConv2d_forward(THTensor *output, const THTensor *input,
                 const THTensor *weight, const THTensor *bias,
                 const THConvShape *s)
{
    ConvPlan p;
    char *buffer;
    if (prepare(input->dtype, s, &p, &buffer) < 0) {
        return -1;
    }
    THScalar one = THScalar_fromDouble(1.0), zero = THScalar_fromDouble(0.0);
    int rc = 0;
    for (int64_t n = 0; n < s->batch && rc == 0; n++) {
        for (int64_t g = 0; g < s->groups && rc == 0; g++) {
            GroupBlock b = group_block(&p, s, n, g, input, output, weight);
            char *col = columns_of(&p, s, b.image, buffer);
            rc = THBlas_gemm(p.dtype, p.out_group, p.out_plane, p.depth, one,
                             row_major(b.weight, p.depth), row_major(col, p.out_plane),
                             zero, row_major(b.out, p.out_plane));
            if (rc == 0 && bias != NULL) {
                add_bias(&p, b.out, THTensor_data(bias), g * p.out_group);
            }
        }
    }
    free_columns(&p, buffer);
    return rc;
}

int
THConv2d_backwardInput(THTensor *grad_input, const THTensor *grad_output,
                       const THTensor *weight, const THConvShape *s)
{
    ConvPlan p;
    char *buffer;
    if (prepare(grad_output->dtype, s, &p, &buffer) < 0) {
        return -1;
    }
    THScalar one = THScalar_fromDouble(1.0), zero = THScalar_fromDouble(0.0);
    if (!p.direct) { /* col2im adds into it */
        memset(THTensor_data(grad_input), 0,
               (size_t)grad_input->numel * p.itemsize);
    }
    int rc = 0;
    for (int64_t n = 0; n < s->batch && rc == 0; n++) {
        for (int64_t g = 0; g < s->groups && rc == 0; g++) {
            GroupBlock b = group_block(&p, s, n, g, grad_input, grad_output, weight);
            char *col = p.direct ? b.image : buffer;
            /* col (depth x out_plane) = W[g]^T . grad_out[n, g] */
            rc = THBlas_gemm(p.dtype, p.depth, p.out_plane, p.out_group, one,
                             THBlasMatrix_transposed(row_major(b.weight, p.depth)),
                             row_major(b.out, p.out_plane), zero,
                             row_major(col, p.out_plane));
            if (rc == 0 && !p.direct) {
                ColumnJob job = {s, p.in_group, p.out_plane, b.image, col};
                THParallel_for(p.in_group, 1, col2im_for(p.dtype), &job);
            }
        }
    }
    free_columns(&p, buffer);
    return rc;
}

int
THConv2d_backwardWeight(THTensor *grad_weight, const THTensor *grad_output,
                        const THTensor *input, const THConvShape *s)
{
    ConvPlan p;
    char *buffer;
    if (prepare(input->dtype, s, &p, &buffer) < 0) {
        return -1;
    }
    THScalar one = THScalar_fromDouble(1.0), zero = THScalar_fromDouble(0.0);
    if (s->batch == 0) {
        memset(THTensor_data(grad_weight), 0,
               (size_t)grad_weight->numel * p.itemsize);
    }
    int rc = 0;
    for (int64_t n = 0; n < s->batch && rc == 0; n++) {
        for (int64_t g = 0; g < s->groups && rc == 0; g++) {
            GroupBlock b = group_block(&p, s, n, g, input, grad_output, grad_weight);
            char *col = columns_of(&p, s, b.image, buffer);
            /* gW[g] (+)= grad_out[n, g] . col^T; the first sample sets it */
            rc = THBlas_gemm(p.dtype, p.out_group, p.depth, p.out_plane, one,
                             row_major(b.out, p.out_plane),
                             THBlasMatrix_transposed(row_major(col, p.out_plane)),
                             n == 0 ? zero : one, row_major(b.weight, p.depth));
        }
    }
    free_columns(&p, buffer);
    return rc;
}
