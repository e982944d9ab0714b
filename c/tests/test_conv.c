/*
 * test_conv.c -- THConv2d's three products (Note [Convolution as GEMM])
 * against the definition written as plain loops: strides, padding,
 * dilation, groups, the direct 1x1 path, float32 and float64; and the
 * adjoint identities <conv(x, w), g> = <x, grad_input(g, w)> =
 * <w, grad_weight(g, x)> that tie the backward products to the forward.
 */
#include "th_test.h"

#include <math.h>

static THTensor *
new4(THDtype dtype, int64_t a, int64_t b, int64_t c, int64_t d)
{
    int64_t sizes[4] = {a, b, c, d};
    return THTensor_newEmpty(4, sizes, dtype, TH_DEVICE_CPU);
}

/* out[n][o][y][x] by the definition. */
static double
reference_at(const THTensor *in, const THTensor *w, const THConvShape *s,
             int64_t n, int64_t o, int64_t y, int64_t x)
{
    int64_t in_group = s->in_channels / s->groups;
    int64_t g = o / (s->out_channels / s->groups);
    double sum = 0.0;
    for (int64_t c = 0; c < in_group; c++) {
        for (int64_t i = 0; i < s->kernel_h; i++) {
            for (int64_t j = 0; j < s->kernel_w; j++) {
                int64_t iy = y * s->stride_h - s->pad_h + i * s->dilation_h;
                int64_t ix = x * s->stride_w - s->pad_w + j * s->dilation_w;
                if (iy < 0 || iy >= s->in_h || ix < 0 || ix >= s->in_w) {
                    continue;
                }
                int64_t channel = g * in_group + c;
                sum += tt_get(in, ((n * s->in_channels + channel) * s->in_h + iy) * s->in_w + ix)
                       * tt_get(w, ((o * in_group + c) * s->kernel_h + i) * s->kernel_w + j);
            }
        }
    }
    return sum;
}

static void
check_case(THDtype dtype, THConvShape s)
{
    s.out_h = THConv_outputSize(s.in_h, s.kernel_h, s.stride_h, s.pad_h, s.dilation_h);
    s.out_w = THConv_outputSize(s.in_w, s.kernel_w, s.stride_w, s.pad_w, s.dilation_w);
    double tolerance = dtype == TH_Float32 ? 1e-4 : 1e-12;
    THTensor *in = new4(dtype, s.batch, s.in_channels, s.in_h, s.in_w);
    THTensor *w = new4(dtype, s.out_channels, s.in_channels / s.groups, s.kernel_h, s.kernel_w);
    THTensor *out = new4(dtype, s.batch, s.out_channels, s.out_h, s.out_w);
    THTensor *g = new4(dtype, s.batch, s.out_channels, s.out_h, s.out_w);
    THTensor *gin = new4(dtype, s.batch, s.in_channels, s.in_h, s.in_w);
    THTensor *gw = new4(dtype, s.out_channels, s.in_channels / s.groups, s.kernel_h, s.kernel_w);
    tt_fill_pattern(in, 1);
    tt_fill_pattern(w, 2);
    tt_fill_pattern(g, 3);
    CHECK_OK(THConv2d_forward(out, in, w, NULL, &s));
    for (int64_t n = 0, k = 0; n < s.batch; n++) {
        for (int64_t o = 0; o < s.out_channels; o++) {
            for (int64_t y = 0; y < s.out_h; y++) {
                for (int64_t x = 0; x < s.out_w; x++, k++) {
                    double want = reference_at(in, w, &s, n, o, y, x);
                    CHECK_MSG(fabs(tt_get(out, k) - want) <= tolerance * (1 + fabs(want)),
                              "out[%lld] = %.17g, want %.17g", (long long)k, tt_get(out, k),
                              want);
                }
            }
        }
    }
    CHECK_OK(THConv2d_backwardInput(gin, g, w, &s));
    CHECK_OK(THConv2d_backwardWeight(gw, g, in, &s));
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
            check_case(dtypes[d], cases[c]);
        }
    }
}

static void
test_conv2d_refuses_integer_dtypes(void)
{
    THConvShape s = {.batch = 1, .in_channels = 1, .out_channels = 1, .groups = 1,
                     .in_h = 2, .in_w = 2, .out_h = 2, .out_w = 2, .kernel_h = 1,
                     .kernel_w = 1, .stride_h = 1, .stride_w = 1, .dilation_h = 1,
                     .dilation_w = 1};
    THTensor *t = new4(TH_Int64, 1, 1, 2, 2);
    CHECK_FAILS(THConv2d_forward(t, t, t, NULL, &s), TH_ERR_TYPE, "float32 or float64");
    THTensor_release(t);
}

TH_TEST_SUITE(conv) = {
    TH_TEST(test_conv2d_products_match_the_definition),
    TH_TEST(test_conv2d_refuses_integer_dtypes),
    TH_TEST_END,
};
