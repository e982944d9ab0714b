/*
 * test_conv.c -- THConv's three products (Note [Convolution as GEMM])
 * against the definition written as plain loops, in 2-D (depth 1) and 3-D
 * (Note [Three spatial dims, one code path]): strides, padding, dilation,
 * groups, the direct 1x1 path, float32 and float64; and the
 * adjoint identities <conv(x, w), g> = <x, grad_input(g, w)> =
 * <w, grad_weight(g, x)> that tie the backward products to the forward.
 */
#include "th_test.h"

#include <math.h>

/* An N x C x D x H x W tensor (a 2-D shape's has D = 1: the products
 * only read the element count and the data). */
static THTensor *
new5(THDtype dtype, int64_t a, int64_t b, int64_t c, int64_t d, int64_t e)
{
    int64_t sizes[5] = {a, b, c, d, e};
    return THTensor_newEmpty(5, sizes, dtype, TH_DEVICE_CPU);
}

/* Input index z * stride - pad + k * dilation, or -1 off the volume. */
static int64_t
source_index(int64_t z, int64_t k, int64_t stride, int64_t pad, int64_t dilation,
             int64_t in)
{
    int64_t at = z * stride - pad + k * dilation;
    return at >= 0 && at < in ? at : -1;
}

/* out[n][o][z][y][x] by the definition. */
static double
reference_at(const THTensor *in, const THTensor *w, const THConvShape *s,
             int64_t n, int64_t o, int64_t z, int64_t y, int64_t x)
{
    int64_t in_group = s->in_channels / s->groups;
    int64_t g = o / (s->out_channels / s->groups);
    double sum = 0.0;
    for (int64_t c = 0; c < in_group; c++) {
        for (int64_t t = 0; t < s->kernel_d * s->kernel_h * s->kernel_w; t++) {
            int64_t k = t / (s->kernel_h * s->kernel_w);
            int64_t i = t / s->kernel_w % s->kernel_h, j = t % s->kernel_w;
            int64_t iz = source_index(z, k, s->stride_d, s->pad_d, s->dilation_d, s->in_d);
            int64_t iy = source_index(y, i, s->stride_h, s->pad_h, s->dilation_h, s->in_h);
            int64_t ix = source_index(x, j, s->stride_w, s->pad_w, s->dilation_w, s->in_w);
            if (iz < 0 || iy < 0 || ix < 0) {
                continue;
            }
            int64_t channel = g * in_group + c;
            int64_t at = (((n * s->in_channels + channel) * s->in_d + iz) * s->in_h + iy)
                             * s->in_w + ix;
            sum += tt_get(in, at) * tt_get(w, (o * in_group + c) * s->kernel_d * s->kernel_h
                                                  * s->kernel_w + t);
        }
    }
    return sum;
}

static void
check_case(THDtype dtype, THConvShape s)
{
    s.out_d = THConv_outputSize(s.in_d, s.kernel_d, s.stride_d, s.pad_d, s.dilation_d);
    s.out_h = THConv_outputSize(s.in_h, s.kernel_h, s.stride_h, s.pad_h, s.dilation_h);
    s.out_w = THConv_outputSize(s.in_w, s.kernel_w, s.stride_w, s.pad_w, s.dilation_w);
    double tolerance = dtype == TH_Float32 ? 1e-4 : 1e-12;
    int64_t cg = s.in_channels / s.groups;
    THTensor *in = new5(dtype, s.batch, s.in_channels, s.in_d, s.in_h, s.in_w);
    THTensor *w = new5(dtype, s.out_channels, cg, s.kernel_d, s.kernel_h, s.kernel_w);
    THTensor *out = new5(dtype, s.batch, s.out_channels, s.out_d, s.out_h, s.out_w);
    THTensor *g = new5(dtype, s.batch, s.out_channels, s.out_d, s.out_h, s.out_w);
    THTensor *gin = new5(dtype, s.batch, s.in_channels, s.in_d, s.in_h, s.in_w);
    THTensor *gw = new5(dtype, s.out_channels, cg, s.kernel_d, s.kernel_h, s.kernel_w);
    tt_fill_pattern(in, 1);
    tt_fill_pattern(w, 2);
    tt_fill_pattern(g, 3);
    CHECK_OK(THConv_forward(out, in, w, NULL, &s));
    int64_t positions = s.out_d * s.out_h * s.out_w;
    for (int64_t k = 0; k < out->numel; k++) {
        int64_t n = k / (s.out_channels * positions), o = k / positions % s.out_channels;
        int64_t r = k % positions;
        double want = reference_at(in, w, &s, n, o, r / (s.out_h * s.out_w),
                                   r / s.out_w % s.out_h, r % s.out_w);
        CHECK_MSG(fabs(tt_get(out, k) - want) <= tolerance * (1 + fabs(want)),
                  "out[%lld] = %.17g, want %.17g", (long long)k, tt_get(out, k), want);
    }
    CHECK_OK(THConv_backwardInput(gin, g, w, &s));
    CHECK_OK(THConv_backwardWeight(gw, g, in, &s));
    double inner = tt_dot(out, g);
    CHECK_MSG(fabs(tt_dot(in, gin) - inner) <= tolerance * (1 + fabs(inner)),
              "<x, grad_input> = %.17g, <conv, g> = %.17g", tt_dot(in, gin), inner);
    CHECK_MSG(fabs(tt_dot(w, gw) - inner) <= tolerance * (1 + fabs(inner)),
              "<w, grad_weight> = %.17g, <conv, g> = %.17g", tt_dot(w, gw), inner);
    THTensor *all[] = {in, w, out, g, gin, gw};
    for (int i = 0; i < 6; i++) {
        THTensor_release(all[i]);
    }
}

static void
test_conv2d_products_match_the_definition(void)
{
    THConvShape cases[] = {
        {.batch = 2, .in_channels = 3, .out_channels = 4, .groups = 1, .in_h = 6,
         .in_w = 5, .kernel_h = 3, .kernel_w = 3, .stride_h = 1, .stride_w = 1,
         .pad_h = 1, .pad_w = 1, .dilation_h = 1, .dilation_w = 1},
        {.batch = 1, .in_channels = 4, .out_channels = 6, .groups = 2, .in_h = 7,
         .in_w = 6, .kernel_h = 3, .kernel_w = 2, .stride_h = 2, .stride_w = 1,
         .pad_h = 1, .pad_w = 0, .dilation_h = 1, .dilation_w = 2},
        {.batch = 2, .in_channels = 4, .out_channels = 4, .groups = 4, .in_h = 5,
         .in_w = 5, .kernel_h = 3, .kernel_w = 3, .stride_h = 1, .stride_w = 1,
         .pad_h = 2, .pad_w = 2, .dilation_h = 2, .dilation_w = 2},
        /* the direct path: 1x1, stride 1, no padding */
        {.batch = 2, .in_channels = 3, .out_channels = 5, .groups = 1, .in_h = 4,
         .in_w = 3, .kernel_h = 1, .kernel_w = 1, .stride_h = 1, .stride_w = 1,
         .pad_h = 0, .pad_w = 0, .dilation_h = 1, .dilation_w = 1},
    };
    THDtype dtypes[] = {TH_Float32, TH_Float64};
    for (size_t d = 0; d < 2; d++) {
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            check_case(dtypes[d], THConvShape_flat(cases[c]));
        }
    }
}

static void
test_conv3d_products_match_the_definition(void)
{
    THConvShape cases[] = {
        /* stride 1: the input gradient as a convolution */
        {.batch = 2, .in_channels = 3, .out_channels = 4, .groups = 1, .in_d = 4,
         .in_h = 5, .in_w = 4, .kernel_d = 3, .kernel_h = 3, .kernel_w = 2,
         .stride_d = 1, .stride_h = 1, .stride_w = 1, .pad_d = 1, .pad_h = 1, .pad_w = 0,
         .dilation_d = 1, .dilation_h = 1, .dilation_w = 1},
        /* strides, dilation and groups: col2im */
        {.batch = 1, .in_channels = 4, .out_channels = 6, .groups = 2, .in_d = 6,
         .in_h = 5, .in_w = 6, .kernel_d = 2, .kernel_h = 3, .kernel_w = 2,
         .stride_d = 2, .stride_h = 1, .stride_w = 2, .pad_d = 1, .pad_h = 2, .pad_w = 1,
         .dilation_d = 2, .dilation_h = 1, .dilation_w = 2},
        /* the direct path: 1x1x1, stride 1, no padding */
        {.batch = 2, .in_channels = 3, .out_channels = 2, .groups = 1, .in_d = 2,
         .in_h = 3, .in_w = 4, .kernel_d = 1, .kernel_h = 1, .kernel_w = 1,
         .stride_d = 1, .stride_h = 1, .stride_w = 1, .dilation_d = 1, .dilation_h = 1,
         .dilation_w = 1},
    };
    THDtype dtypes[] = {TH_Float32, TH_Float64};
    for (size_t d = 0; d < 2; d++) {
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            check_case(dtypes[d], cases[c]);
        }
    }
}

static void
test_conv2d_refuses_integer_dtypes(void)
{
    THConvShape s = THConvShape_flat(
        (THConvShape){.batch = 1, .in_channels = 1, .out_channels = 1, .groups = 1,
                      .in_h = 2, .in_w = 2, .out_h = 2, .out_w = 2, .kernel_h = 1,
                      .kernel_w = 1, .stride_h = 1, .stride_w = 1, .dilation_h = 1,
                      .dilation_w = 1});
    THTensor *t = new5(TH_Int64, 1, 1, 1, 2, 2);
    CHECK_FAILS(THConv_forward(t, t, t, NULL, &s), TH_ERR_TYPE, "float32 or float64");
    THTensor_release(t);
}

TH_TEST_SUITE(conv) = {
    TH_TEST(test_conv2d_products_match_the_definition),
    TH_TEST(test_conv3d_products_match_the_definition),
    TH_TEST(test_conv2d_refuses_integer_dtypes),
    TH_TEST_END,
};
