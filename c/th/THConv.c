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

/* Note [Samples side by side] in THConv.h: the columns of one product
 * cover enough samples for this many columns, as long as the buffer stays
 * under COLUMN_LIMIT elements (one sample is always allowed). */
#define TARGET_COLUMNS 1024
#define COLUMN_LIMIT ((int64_t)1 << 22)

/* The columns of one product: `images` samples of one group side by side. */
typedef struct {
    const THConvShape *s;
    int64_t out_plane;    /* out_h * out_w: the columns of one sample */
    int64_t images;       /* samples side by side */
    int64_t image_stride; /* elements from one sample's image to the next */
    char *image;          /* the first sample's channels x in_h x in_w */
    char *col;            /* (channels * kh * kw) x (images * out_plane) */
} ColumnJob;

/* Where one kernel tap (i, j) reads: output (y, x) reads input
 * (y * stride_h + y_off, x * stride_w + x_off), which is on the image for
 * y in [y_lo, y_hi) and x in [x_lo, x_hi) and padding elsewhere. */
typedef struct {
    int64_t y_off, x_off, y_lo, y_hi, x_lo, x_hi;
} TapSpan;

/* [*lo, *hi): the outputs of one dim (out of `out`) whose input
 * index * stride + offset lies in [0, in). */
static void
valid_span(int64_t out, int64_t in, int64_t stride, int64_t offset, int64_t *lo,
           int64_t *hi)
{
    int64_t first = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
    int64_t last = in - 1 - offset < 0 ? 0 : (in - 1 - offset) / stride + 1;
    *lo = first < out ? first : out;
    *hi = last < *lo ? *lo : last < out ? last : out;
}

static TapSpan
tap_span(const THConvShape *s, int64_t tap)
{
    TapSpan t;
    t.y_off = tap / s->kernel_w * s->dilation_h - s->pad_h;
    t.x_off = tap % s->kernel_w * s->dilation_w - s->pad_w;
    valid_span(s->out_h, s->in_h, s->stride_h, t.y_off, &t.y_lo, &t.y_hi);
    valid_span(s->out_w, s->in_w, s->stride_w, t.x_off, &t.x_lo, &t.x_hi);
    return t;
}

/* ---- im2col and col2im, one typed copy per dtype ------------------------------ */

/* Rows [begin, end) of the column matrix from the images (zero off them).
 * The image lines are copied span by span, so the bounds are tested once
 * per tap instead of once per element. */
#define TH_DEFINE_IM2COL(Name, ctype)                                       \
    static void im2col_plane_##Name(const THConvShape *s, const TapSpan *t, \
                                    const ctype *plane, ctype *dst)         \
    {                                                                       \
        int64_t w = s->out_w;                                               \
        memset(dst, 0, (size_t)(t->y_lo * w) * sizeof(ctype));             \
        for (int64_t y = t->y_lo; y < t->y_hi; y++) {                       \
            const ctype *src = plane + (y * s->stride_h + t->y_off) * s->in_w; \
            ctype *line = dst + y * w;                                      \
            memset(line, 0, (size_t)t->x_lo * sizeof(ctype));               \
            if (s->stride_w == 1) {                                         \
                memcpy(line + t->x_lo, src + t->x_lo + t->x_off,            \
                       (size_t)(t->x_hi - t->x_lo) * sizeof(ctype));        \
            } else {                                                        \
                for (int64_t x = t->x_lo; x < t->x_hi; x++) {               \
                    line[x] = src[x * s->stride_w + t->x_off];              \
                }                                                           \
            }                                                               \
            memset(line + t->x_hi, 0, (size_t)(w - t->x_hi) * sizeof(ctype)); \
        }                                                                   \
        memset(dst + t->y_hi * w, 0,                                        \
               (size_t)((s->out_h - t->y_hi) * w) * sizeof(ctype));         \
    }                                                                       \
    static void im2col_##Name(int64_t begin, int64_t end, void *ctx)       \
    {                                                                       \
        const ColumnJob *job = ctx;                                         \
        const THConvShape *s = job->s;                                      \
        int64_t taps = s->kernel_h * s->kernel_w;                           \
        int64_t in_plane = s->in_h * s->in_w;                               \
        for (int64_t row = begin; row < end; row++) {                       \
            TapSpan t = tap_span(s, row % taps);                            \
            for (int64_t b = 0; b < job->images; b++) {                     \
                const ctype *plane = (const ctype *)job->image              \
                                     + b * job->image_stride                \
                                     + row / taps * in_plane;               \
                ctype *dst = (ctype *)job->col                              \
                             + (row * job->images + b) * job->out_plane;    \
                im2col_plane_##Name(s, &t, plane, dst);                     \
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
        int64_t taps = s->kernel_h * s->kernel_w;                           \
        for (int64_t c = begin; c < end; c++) {                             \
            ctype *plane = (ctype *)job->image + c * s->in_h * s->in_w;     \
            for (int64_t tap = 0; tap < taps; tap++) {                      \
                TapSpan t = tap_span(s, tap);                               \
                const ctype *src =                                          \
                    (const ctype *)job->col + (c * taps + tap) * job->out_plane; \
                for (int64_t y = t.y_lo; y < t.y_hi; y++) {                 \
                    ctype *line = plane + (y * s->stride_h + t.y_off) * s->in_w; \
                    const ctype *from = src + y * s->out_w;                 \
                    for (int64_t x = t.x_lo; x < t.x_hi; x++) {             \
                        line[x * s->stride_w + t.x_off] += from[x];         \
                    }                                                       \
                }                                                           \
            }                                                               \
        }                                                                   \
    }

/* dst[0, n) = src[0, n) + value (the bias added while a block is copied
 * out of the staging buffer). */
#define TH_DEFINE_ADD_ROW(Name, ctype)                                      \
    static void add_row_##Name(char *dst, const char *src, int64_t n,       \
                               const char *value)                           \
    {                                                                       \
        ctype v = *(const ctype *)value;                                    \
        for (int64_t x = 0; x < n; x++) {                                   \
            ((ctype *)dst)[x] = ((const ctype *)src)[x] + v;                \
        }                                                                   \
    }

TH_CONV_DTYPES(TH_DEFINE_IM2COL)
TH_CONV_DTYPES(TH_DEFINE_COL2IM)
TH_CONV_DTYPES(TH_DEFINE_ADD_ROW)

/* The typed kernels of one dtype. */
typedef struct {
    THParallelFn im2col, col2im;
    void (*add_row)(char *dst, const char *src, int64_t n, const char *value);
} ConvKernels;

static const ConvKernels *
kernels_for(THDtype dtype)
{
#define TH_KERNELS_ENTRY(Name, ctype) \
    static const ConvKernels kernels_##Name = {im2col_##Name, col2im_##Name, add_row_##Name};
    TH_CONV_DTYPES(TH_KERNELS_ENTRY)
#undef TH_KERNELS_ENTRY
#define TH_KERNELS_CASE(Name, ctype) \
    case TH_##Name:                  \
        return &kernels_##Name;
    switch (dtype) {
        TH_CONV_DTYPES(TH_KERNELS_CASE)
    default:
        return NULL;
    }
#undef TH_KERNELS_CASE
}

/* ---- shared geometry -------------------------------------------------------------- */

typedef struct {
    THDtype dtype;
    size_t itemsize;
    const ConvKernels *kernels;
    int64_t in_group;    /* in_channels / groups */
    int64_t out_group;   /* out_channels / groups */
    int64_t depth;       /* in_group * kh * kw: the GEMM's inner dim */
    int64_t out_plane;   /* out_h * out_w */
    int64_t in_plane;    /* in_h * in_w */
    bool direct;         /* 1x1, stride 1, no padding: no column buffer */
    int64_t images;      /* samples per product (Note [Samples side by side]) */
} ConvPlan;

/* Enough samples for TARGET_COLUMNS columns, within COLUMN_LIMIT; one when
 * the input itself is the column matrix. */
static int64_t
images_per_product(const ConvPlan *p, const THConvShape *s)
{
    if (p->direct || p->out_plane == 0) {
        return 1;
    }
    int64_t wanted = (TARGET_COLUMNS + p->out_plane - 1) / p->out_plane;
    int64_t fit = COLUMN_LIMIT / ((p->depth > 0 ? p->depth : 1) * p->out_plane);
    int64_t images = wanted < fit ? wanted : fit;
    images = images < s->batch ? images : s->batch;
    return images > 1 ? images : 1;
}

static ConvPlan
plan_of(const THConvShape *s, THDtype dtype)
{
    ConvPlan p;
    p.dtype = dtype;
    p.itemsize = (size_t)THDtype_itemsize(dtype);
    p.kernels = kernels_for(dtype);
    p.in_group = s->in_channels / s->groups;
    p.out_group = s->out_channels / s->groups;
    p.depth = p.in_group * s->kernel_h * s->kernel_w;
    p.out_plane = s->out_h * s->out_w;
    p.in_plane = s->in_h * s->in_w;
    p.direct = s->kernel_h == 1 && s->kernel_w == 1 && s->stride_h == 1
               && s->stride_w == 1 && s->pad_h == 0 && s->pad_w == 0;
    p.images = images_per_product(&p, s);
    return p;
}

static THBlasMatrix
row_major(char *data, int64_t cols)
{
    THBlasMatrix m = {data, cols, 1};
    return m;
}

/* The scratch of one call: the column buffer (NULL on a direct plan: the
 * input is the columns) and, when a product covers several samples, the
 * staging buffer of their out_group x (images * out_plane) output-side
 * block. */
typedef struct {
    char *col;
    char *staging;
} ConvScratch;

static char *
alloc_matrix(const ConvPlan *p, int64_t rows, int64_t cols, const char *what)
{
    int64_t count;
    if (TH_mul_overflows(rows, cols, &count)) {
        THError_set(TH_ERR_MEMORY, "convolution: %s too large", what);
        return NULL;
    }
    return TH_mallocArray(count, p->itemsize, what);
}

static void
free_scratch(ConvScratch *scratch)
{
    free(scratch->col);
    free(scratch->staging);
}

/* The plan and scratch of one call: 0, or -1 with an error (a dtype the
 * kernels do not run in, or no memory for the buffers). */
static int
prepare(THDtype dtype, const THConvShape *s, ConvPlan *p, ConvScratch *scratch)
{
    if (kernels_for(dtype) == NULL) {
        return THError_set(TH_ERR_TYPE,
                           "convolution: expected a float32 or float64 tensor");
    }
    *p = plan_of(s, dtype);
    scratch->col = scratch->staging = NULL;
    int64_t cols = p->images * p->out_plane;
    if (!p->direct) {
        scratch->col = alloc_matrix(p, p->depth, cols, "the convolution's column buffer");
        if (scratch->col == NULL) {
            return -1;
        }
    }
    if (p->images > 1) {
        scratch->staging = alloc_matrix(p, p->out_group, cols,
                                        "the convolution's staging buffer");
        if (scratch->staging == NULL) {
            free_scratch(scratch);
            return -1;
        }
    }
    return 0;
}

/* The columns of samples [n, n + images) and group g, whose input-side
 * block starts at `image`. */
static char *
columns_of(const ConvPlan *p, const THConvShape *s, char *image, int64_t images,
           const ConvScratch *scratch)
{
    if (p->direct) {
        return image; /* the input plane already is the (depth x out_plane) matrix */
    }
    ColumnJob job = {s, p->out_plane, images, s->in_channels * p->in_plane, image,
                     scratch->col};
    THParallel_for(p->depth, 1 + TH_PARALLEL_GRAIN / (images * p->out_plane + 1),
                   p->kernels->im2col, &job);
    return scratch->col;
}

/* ---- the three products -------------------------------------------------------- */

/* Where sample n's group g starts: in the image-side operand (N x C_in x H x W:
 * input or grad_input), the output-side one (N x C_out x out_h x out_w:
 * output or grad_output) and the weight (or its gradient). */
typedef struct {
    char *image, *out, *weight;
} GroupBlock;

static GroupBlock
group_block(const ConvPlan *p, const THConvShape *s, int64_t n, int64_t g,
            char *image, char *out, char *weight)
{
    GroupBlock b;
    b.image = image + (n * s->in_channels + g * p->in_group) * p->in_plane * p->itemsize;
    b.out = out + (n * s->out_channels + g * p->out_group) * p->out_plane * p->itemsize;
    b.weight = weight + g * p->out_group * p->depth * p->itemsize;
    return b;
}

/* Row o of sample b's output-side block (out = its sample 0's block). */
static char *
out_row(const ConvPlan *p, const THConvShape *s, char *out, int64_t b, int64_t o)
{
    return out + (b * s->out_channels + o) * p->out_plane * p->itemsize;
}

/* Row o of the staging buffer's sample b. */
static char *
staging_row(const ConvPlan *p, char *staging, int64_t images, int64_t b, int64_t o)
{
    return staging + (o * images + b) * p->out_plane * p->itemsize;
}

/* out[b, o] = staging (+ bias[first_channel + o]) for `images` samples. */
static void
scatter_output(const ConvPlan *p, const THConvShape *s, char *out, char *staging,
               int64_t images, const char *bias, int64_t first_channel)
{
    size_t bytes = (size_t)p->out_plane * p->itemsize;
    for (int64_t b = 0; b < images; b++) {
        for (int64_t o = 0; o < p->out_group; o++) {
            char *dst = out_row(p, s, out, b, o);
            char *src = staging_row(p, staging, images, b, o);
            if (bias == NULL) {
                memcpy(dst, src, bytes);
            } else {
                p->kernels->add_row(dst, src, p->out_plane,
                                    bias + (first_channel + o) * p->itemsize);
            }
        }
    }
}

/* staging = out[b, o] for `images` samples (the weight gradient's left
 * operand with the samples side by side). */
static void
gather_output(const ConvPlan *p, const THConvShape *s, char *out, char *staging,
              int64_t images)
{
    for (int64_t b = 0; b < images; b++) {
        for (int64_t o = 0; o < p->out_group; o++) {
            memcpy(staging_row(p, staging, images, b, o), out_row(p, s, out, b, o),
                   (size_t)p->out_plane * p->itemsize);
        }
    }
}

/* The forward product on raw operands (bias may be NULL). */
static int
forward_products(const THConvShape *s, THDtype dtype, char *input, char *weight,
                 const char *bias, char *output)
{
    ConvPlan p;
    ConvScratch scratch;
    if (prepare(dtype, s, &p, &scratch) < 0) {
        return -1;
    }
    THScalar one = THScalar_fromDouble(1.0), zero = THScalar_fromDouble(0.0);
    int rc = 0;
    for (int64_t n = 0; n < s->batch && rc == 0; n += p.images) {
        int64_t images = s->batch - n < p.images ? s->batch - n : p.images;
        for (int64_t g = 0; g < s->groups && rc == 0; g++) {
            GroupBlock b = group_block(&p, s, n, g, input, output, weight);
            char *col = columns_of(&p, s, b.image, images, &scratch);
            bool staged = images > 1;
            char *dst = staged ? scratch.staging : b.out;
            rc = THBlas_gemm(p.dtype, p.out_group, images * p.out_plane, p.depth, one,
                             row_major(b.weight, p.depth),
                             row_major(col, images * p.out_plane), zero,
                             row_major(dst, images * p.out_plane));
            if (rc == 0 && (staged || bias != NULL)) {
                /* in place when not staged: src == dst row by row */
                scatter_output(&p, s, b.out, dst, images, bias, g * p.out_group);
            }
        }
    }
    free_scratch(&scratch);
    return rc;
}

int
THConv2d_forward(THTensor *output, const THTensor *input,
                 const THTensor *weight, const THTensor *bias,
                 const THConvShape *s)
{
    return forward_products(s, input->dtype, THTensor_data(input),
                            THTensor_data(weight),
                            bias == NULL ? NULL : THTensor_data(bias),
                            THTensor_data(output));
}

/* Note [Input gradient as a convolution] in THConv.h: with stride 1 and
 * pad <= dilation * (kernel - 1) in both dims. */
static bool
input_grad_is_a_convolution(const THConvShape *s)
{
    return s->stride_h == 1 && s->stride_w == 1
           && s->pad_h <= s->dilation_h * (s->kernel_h - 1)
           && s->pad_w <= s->dilation_w * (s->kernel_w - 1);
}

/* The forward convolution that maps grad_output to grad_input. */
static THConvShape
input_grad_shape(const THConvShape *s)
{
    THConvShape t = *s;
    t.in_channels = s->out_channels;
    t.out_channels = s->in_channels;
    t.in_h = s->out_h;
    t.in_w = s->out_w;
    t.out_h = s->in_h;
    t.out_w = s->in_w;
    t.pad_h = s->dilation_h * (s->kernel_h - 1) - s->pad_h;
    t.pad_w = s->dilation_w * (s->kernel_w - 1) - s->pad_w;
    return t;
}

/* One float32 or float64 element (a fixed-size memcpy is one move). */
static inline void
copy_item(char *dst, const char *src, size_t itemsize)
{
    if (itemsize == sizeof(float)) {
        memcpy(dst, src, sizeof(float));
    } else {
        memcpy(dst, src, sizeof(double));
    }
}

/* W' (groups * in_group) x out_group x kh x kw, the weight of that
 * convolution: W'[g, ci][co][i][j] = W[g, co][ci][kh - 1 - i][kw - 1 - j].
 * NULL with an error when out of memory. */
static char *
flipped_weight(const ConvPlan *p, const THConvShape *s, const char *weight)
{
    int64_t taps = s->kernel_h * s->kernel_w;
    char *flipped = TH_mallocArray(s->groups * p->in_group * p->out_group * taps,
                                   p->itemsize, "the convolution's flipped weight");
    if (flipped == NULL) {
        return NULL;
    }
    for (int64_t g = 0; g < s->groups; g++) {
        for (int64_t co = 0; co < p->out_group; co++) {
            for (int64_t ci = 0; ci < p->in_group; ci++) {
                const char *src = weight
                    + ((g * p->out_group + co) * p->in_group + ci) * taps * p->itemsize;
                char *dst = flipped
                    + ((g * p->in_group + ci) * p->out_group + co) * taps * p->itemsize;
                for (int64_t tap = 0; tap < taps; tap++) {
                    copy_item(dst + (taps - 1 - tap) * p->itemsize,
                              src + tap * p->itemsize, p->itemsize);
                }
            }
        }
    }
    return flipped;
}

static int
backward_input_as_convolution(THTensor *grad_input, const THTensor *grad_output,
                              const THTensor *weight, const THConvShape *s)
{
    ConvPlan p = plan_of(s, grad_output->dtype);
    char *flipped = flipped_weight(&p, s, THTensor_data(weight));
    if (flipped == NULL) {
        return -1;
    }
    THConvShape t = input_grad_shape(s);
    int rc = forward_products(&t, p.dtype, THTensor_data(grad_output), flipped, NULL,
                              THTensor_data(grad_input));
    free(flipped);
    return rc;
}

/* One sample at a time: col = W[g]^T . grad_out[n, g], then col2im. */
static int
backward_input_by_columns(THTensor *grad_input, const THTensor *grad_output,
                          const THTensor *weight, const THConvShape *s)
{
    THConvShape one_at_a_time = *s;
    one_at_a_time.batch = 1; /* the plan's columns hold one sample */
    ConvPlan p;
    ConvScratch scratch;
    if (prepare(grad_output->dtype, &one_at_a_time, &p, &scratch) < 0) {
        return -1;
    }
    THScalar one = THScalar_fromDouble(1.0), zero = THScalar_fromDouble(0.0);
    if (!p.direct) { /* col2im adds into it */
        memset(THTensor_data(grad_input), 0, (size_t)grad_input->numel * p.itemsize);
    }
    int rc = 0;
    for (int64_t n = 0; n < s->batch && rc == 0; n++) {
        for (int64_t g = 0; g < s->groups && rc == 0; g++) {
            GroupBlock b = group_block(&p, s, n, g, THTensor_data(grad_input),
                                       THTensor_data(grad_output), THTensor_data(weight));
            char *col = p.direct ? b.image : scratch.col;
            /* col (depth x out_plane) = W[g]^T . grad_out[n, g] */
            rc = THBlas_gemm(p.dtype, p.depth, p.out_plane, p.out_group, one,
                             THBlasMatrix_transposed(row_major(b.weight, p.depth)),
                             row_major(b.out, p.out_plane), zero,
                             row_major(col, p.out_plane));
            if (rc == 0 && !p.direct) {
                ColumnJob job = {s, p.out_plane, 1, 0, b.image, col};
                THParallel_for(p.in_group, 1, p.kernels->col2im, &job);
            }
        }
    }
    free_scratch(&scratch);
    return rc;
}

int
THConv2d_backwardInput(THTensor *grad_input, const THTensor *grad_output,
                       const THTensor *weight, const THConvShape *s)
{
    if (kernels_for(grad_output->dtype) == NULL) {
        return THError_set(TH_ERR_TYPE,
                           "convolution: expected a float32 or float64 tensor");
    }
    if (input_grad_is_a_convolution(s)) {
        return backward_input_as_convolution(grad_input, grad_output, weight, s);
    }
    return backward_input_by_columns(grad_input, grad_output, weight, s);
}

int
THConv2d_backwardWeight(THTensor *grad_weight, const THTensor *grad_output,
                        const THTensor *input, const THConvShape *s)
{
    ConvPlan p;
    ConvScratch scratch;
    if (prepare(input->dtype, s, &p, &scratch) < 0) {
        return -1;
    }
    THScalar one = THScalar_fromDouble(1.0), zero = THScalar_fromDouble(0.0);
    if (s->batch == 0) {
        memset(THTensor_data(grad_weight), 0, (size_t)grad_weight->numel * p.itemsize);
    }
    int rc = 0;
    for (int64_t n = 0; n < s->batch && rc == 0; n += p.images) {
        int64_t images = s->batch - n < p.images ? s->batch - n : p.images;
        int64_t cols = images * p.out_plane;
        for (int64_t g = 0; g < s->groups && rc == 0; g++) {
            GroupBlock b = group_block(&p, s, n, g, THTensor_data(input),
                                       THTensor_data(grad_output),
                                       THTensor_data(grad_weight));
            char *col = columns_of(&p, s, b.image, images, &scratch);
            char *out = b.out;
            if (images > 1) {
                gather_output(&p, s, b.out, scratch.staging, images);
                out = scratch.staging;
            }
            /* gW[g] (+)= grad_out[samples, g] . col^T; the first block sets it */
            rc = THBlas_gemm(p.dtype, p.out_group, p.depth, cols, one,
                             row_major(out, cols),
                             THBlasMatrix_transposed(row_major(col, cols)),
                             n == 0 ? zero : one, row_major(b.weight, p.depth));
        }
    }
    free_scratch(&scratch);
    return rc;
}
