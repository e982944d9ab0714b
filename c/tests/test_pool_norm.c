/*
 * test_pool_norm.c -- THPool2d's max and average pooling (Note [Pooling
 * windows]) against the definition written as plain loops, float32 and
 * float64, with strides, padding, dilation and ceil_mode; the backward
 * passes through the adjoint identity <pool(x), g> = <x, backward(g)> (the
 * max backward with the forward's indices); and THNorm's batch norm
 * (Note [Batch norm in three kernels]) against plain sums, with its
 * backward checked by central differences of <forward(x), g>; layer and
 * group norm (Note [Layer and group norm as row norm]) the same way, and
 * their backward's per-thread partial sums against one thread; adaptive
 * pooling (Note [Adaptive pooling windows]) against its windows.
 */
#include "th_test.h"

#include <math.h>

static THTensor *
new_tensor(THDtype dtype, int ndim, int64_t a, int64_t b, int64_t c, int64_t d)
{
    int64_t sizes[4] = {a, b, c, d};
    return THTensor_newEmpty(ndim, sizes, dtype, TH_DEVICE_CPU);
}

/* Deterministic values in [offset - 1, offset + 1). */
static void
fill(THTensor *t, unsigned seed, double offset)
{
    tt_fill_pattern(t, seed);
    for (int64_t i = 0; i < t->numel; i++) {
        tt_set(t, i, tt_get(t, i) + offset);
    }
}

static double
tolerance_of(THDtype dtype)
{
    return dtype == TH_Float32 ? 1e-5 : 1e-12;
}

/* ---- pooling ------------------------------------------------------------------ */

/* The max of window (plane, y, x) by the definition, and its flat index;
 * (-inf, -1) when every tap is padding. */
static double
max_reference(const THTensor *in, const THPoolShape *s, int64_t plane, int64_t y,
              int64_t x, int64_t *index)
{
    double best = -INFINITY;
    *index = -1;
    for (int64_t i = 0; i < s->kernel_h; i++) {
        for (int64_t j = 0; j < s->kernel_w; j++) {
            int64_t r = y * s->stride_h - s->pad_h + i * s->dilation_h;
            int64_t c = x * s->stride_w - s->pad_w + j * s->dilation_w;
            if (r < 0 || r >= s->in_h || c < 0 || c >= s->in_w) {
                continue;
            }
            double v = tt_get(in, (plane * s->in_h + r) * s->in_w + c);
            if (*index < 0 || v > best) {
                best = v;
                *index = r * s->in_w + c;
            }
        }
    }
    return best;
}

/* The mean of window (plane, y, x) by the definition. */
static double
avg_reference(const THTensor *in, const THPoolShape *s, THAvgPoolDivisor d,
              int64_t plane, int64_t y, int64_t x)
{
    double sum = 0.0;
    int64_t inside = 0, padded = 0;
    for (int64_t r = y * s->stride_h - s->pad_h; r < y * s->stride_h - s->pad_h + s->kernel_h;
         r++) {
        for (int64_t c = x * s->stride_w - s->pad_w;
             c < x * s->stride_w - s->pad_w + s->kernel_w; c++) {
            if (r >= s->in_h + s->pad_h || c >= s->in_w + s->pad_w) {
                continue; /* past the padded input (ceil_mode's last window) */
            }
            padded++;
            if (r >= 0 && r < s->in_h && c >= 0 && c < s->in_w) {
                inside++;
                sum += tt_get(in, (plane * s->in_h + r) * s->in_w + c);
            }
        }
    }
    int64_t divisor = d.divisor_override ? d.divisor_override
                      : d.count_include_pad ? padded
                                            : inside;
    return inside == 0 ? 0.0 : sum / (double)divisor;
}

static void
check_pool_case(THDtype dtype, THPoolShape s, bool ceil_mode, THAvgPoolDivisor divisor)
{
    s.out_h = THPool_outputSize(s.in_h, s.kernel_h, s.stride_h, s.pad_h, s.dilation_h,
                                ceil_mode);
    s.out_w = THPool_outputSize(s.in_w, s.kernel_w, s.stride_w, s.pad_w, s.dilation_w,
                                ceil_mode);
    double tolerance = tolerance_of(dtype);
    THTensor *in = new_tensor(dtype, 4, 1, s.planes, s.in_h, s.in_w);
    THTensor *out = new_tensor(dtype, 4, 1, s.planes, s.out_h, s.out_w);
    THTensor *indices = new_tensor(TH_Int64, 4, 1, s.planes, s.out_h, s.out_w);
    THTensor *g = new_tensor(dtype, 4, 1, s.planes, s.out_h, s.out_w);
    THTensor *gin = new_tensor(dtype, 4, 1, s.planes, s.in_h, s.in_w);
    fill(in, 7, 0.0);
    fill(g, 8, 0.0);
    const int64_t *index = (const int64_t *)THTensor_data(indices);

    CHECK_OK(THPool2d_maxForward(out, indices, in, &s));
    for (int64_t p = 0, k = 0; p < s.planes; p++) {
        for (int64_t y = 0; y < s.out_h; y++) {
            for (int64_t x = 0; x < s.out_w; x++, k++) {
                int64_t want_index;
                double want = max_reference(in, &s, p, y, x, &want_index);
                CHECK_MSG(tt_get(out, k) == want && index[k] == want_index,
                          "max[%lld] = %g at %lld, want %g at %lld", (long long)k,
                          tt_get(out, k), (long long)index[k], want, (long long)want_index);
            }
        }
    }
    /* the max backward is the transpose of "pick the indexed element" */
    CHECK_OK(THPool2d_maxBackward(gin, g, indices, &s));
    double picked = 0.0;
    for (int64_t k = 0; k < g->numel; k++) {
        int64_t plane = k / (s.out_h * s.out_w);
        picked += tt_get(g, k) * tt_get(in, plane * s.in_h * s.in_w + index[k]);
    }
    CHECK_MSG(fabs(tt_dot(in, gin) - picked) <= tolerance * (1 + fabs(picked)),
              "<x, max grad_input> = %.17g, want %.17g", tt_dot(in, gin), picked);

    CHECK_OK(THPool2d_avgForward(out, in, &s, divisor));
    for (int64_t p = 0, k = 0; p < s.planes; p++) {
        for (int64_t y = 0; y < s.out_h; y++) {
            for (int64_t x = 0; x < s.out_w; x++, k++) {
                double want = avg_reference(in, &s, divisor, p, y, x);
                CHECK_MSG(fabs(tt_get(out, k) - want) <= tolerance * (1 + fabs(want)),
                          "avg[%lld] = %.17g, want %.17g", (long long)k, tt_get(out, k), want);
            }
        }
    }
    CHECK_OK(THPool2d_avgBackward(gin, g, &s, divisor));
    double inner = tt_dot(out, g);
    CHECK_MSG(fabs(tt_dot(in, gin) - inner) <= tolerance * (1 + fabs(inner)),
              "<x, avg grad_input> = %.17g, <avg, g> = %.17g", tt_dot(in, gin), inner);
    THTensor *all[] = {in, out, indices, g, gin};
    for (int i = 0; i < 5; i++) {
        THTensor_release(all[i]);
    }
}

static void
test_pool2d_matches_the_definition(void)
{
    THPoolShape cases[] = {
        {.planes = 3, .in_h = 6, .in_w = 6, .kernel_h = 2, .kernel_w = 2, .stride_h = 2,
         .stride_w = 2, .dilation_h = 1, .dilation_w = 1},
        {.planes = 2, .in_h = 7, .in_w = 5, .kernel_h = 3, .kernel_w = 3, .stride_h = 2,
         .stride_w = 1, .pad_h = 1, .pad_w = 1, .dilation_h = 1, .dilation_w = 1},
        {.planes = 2, .in_h = 7, .in_w = 8, .kernel_h = 3, .kernel_w = 2, .stride_h = 2,
         .stride_w = 3, .pad_h = 1, .pad_w = 1, .dilation_h = 2, .dilation_w = 1},
        {.planes = 1, .in_h = 1, .in_w = 1, .kernel_h = 1, .kernel_w = 1, .stride_h = 1,
         .stride_w = 1, .dilation_h = 1, .dilation_w = 1},
    };
    THAvgPoolDivisor divisors[] = {{true, 0}, {false, 0}, {false, 3}};
    THDtype dtypes[] = {TH_Float32, TH_Float64};
    for (size_t d = 0; d < 2; d++) {
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            for (int ceil_mode = 0; ceil_mode < 2; ceil_mode++) {
                /* dilation is max pooling's; the average runs the others */
                THAvgPoolDivisor divisor = divisors[(c + (size_t)ceil_mode) % 3];
                check_pool_case(dtypes[d], cases[c], ceil_mode, divisor);
            }
        }
    }
}

static void
test_pool_output_size_follows_pytorch(void)
{
    CHECK_EQ_INT(THPool_outputSize(6, 2, 2, 0, 1, false), 3);
    CHECK_EQ_INT(THPool_outputSize(7, 2, 2, 0, 1, false), 3);
    CHECK_EQ_INT(THPool_outputSize(7, 2, 2, 0, 1, true), 4);
    /* ceil_mode: the last window must start inside the input or left padding */
    CHECK_EQ_INT(THPool_outputSize(5, 2, 2, 1, 1, true), 3);
    CHECK_EQ_INT(THPool_outputSize(1, 3, 1, 0, 1, false), -1);
    CHECK_EQ_INT(THPool_outputSize(1, 3, 2, 0, 1, true), 0);
}

static void
test_pool_refuses_integer_dtypes(void)
{
    THPoolShape s = {.planes = 1, .in_h = 2, .in_w = 2, .out_h = 1, .out_w = 1,
                     .kernel_h = 2, .kernel_w = 2, .stride_h = 2, .stride_w = 2,
                     .dilation_h = 1, .dilation_w = 1};
    THTensor *t = new_tensor(TH_Int64, 4, 1, 1, 2, 2);
    CHECK_FAILS(THPool2d_maxForward(t, NULL, t, &s), TH_ERR_TYPE, "float32 or float64");
    CHECK_FAILS(THPool2d_avgForward(t, t, &s, (THAvgPoolDivisor){true, 0}), TH_ERR_TYPE,
                "float32 or float64");
    THTensor_release(t);
}

/* ---- batch norm ------------------------------------------------------------------ */

/* N x C x S = 3 x 2 x 5; per-channel tensors of length 2. */
enum { N = 3, C = 2, S = 5 };

static void
per_channel_moments(const THTensor *x, int64_t c, double *mean, double *var)
{
    double sum = 0.0, squares = 0.0;
    for (int64_t n = 0; n < N; n++) {
        for (int64_t i = 0; i < S; i++) {
            sum += tt_get(x, (n * C + c) * S + i);
        }
    }
    *mean = sum / (N * S);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t i = 0; i < S; i++) {
            double d = tt_get(x, (n * C + c) * S + i) - *mean;
            squares += d * d;
        }
    }
    *var = squares / (N * S);
}

/* <batch_norm(x) with the batch's statistics, g> */
static double
loss(THTensor *x, const THTensor *w, const THTensor *b, const THTensor *g, double eps)
{
    THTensor *mean = new_tensor(x->dtype, 1, C, 0, 0, 0);
    THTensor *var = new_tensor(x->dtype, 1, C, 0, 0, 0);
    THTensor *y = new_tensor(x->dtype, 3, N, C, S, 0);
    CHECK_OK(THBatchNorm_stats(mean, var, x));
    CHECK_OK(THBatchNorm_forward(y, x, mean, var, w, b, eps));
    double result = tt_dot(y, g);
    THTensor_release(mean);
    THTensor_release(var);
    THTensor_release(y);
    return result;
}

static void
test_batch_norm_matches_the_definition(void)
{
    double eps = 1e-3;
    THTensor *x = new_tensor(TH_Float64, 3, N, C, S, 0);
    THTensor *w = new_tensor(TH_Float64, 1, C, 0, 0, 0);
    THTensor *b = new_tensor(TH_Float64, 1, C, 0, 0, 0);
    THTensor *g = new_tensor(TH_Float64, 3, N, C, S, 0);
    THTensor *mean = new_tensor(TH_Float64, 1, C, 0, 0, 0);
    THTensor *var = new_tensor(TH_Float64, 1, C, 0, 0, 0);
    THTensor *y = new_tensor(TH_Float64, 3, N, C, S, 0);
    THTensor *gx = new_tensor(TH_Float64, 3, N, C, S, 0);
    THTensor *gw = new_tensor(TH_Float64, 1, C, 0, 0, 0);
    THTensor *gb = new_tensor(TH_Float64, 1, C, 0, 0, 0);
    fill(x, 11, 1000.0); /* a large mean: sum(x^2) - M m^2 would cancel */
    fill(w, 12, 1.5);
    fill(b, 13, 0.0);
    fill(g, 14, 0.0);
    CHECK_OK(THBatchNorm_stats(mean, var, x));
    CHECK_OK(THBatchNorm_forward(y, x, mean, var, w, b, eps));
    for (int64_t c = 0; c < C; c++) {
        double want_mean, want_var;
        per_channel_moments(x, c, &want_mean, &want_var);
        CHECK_NEAR(tt_get(mean, c), want_mean, 1e-12 * want_mean);
        CHECK_NEAR(tt_get(var, c), want_var, 1e-9 * want_var);
        for (int64_t n = 0; n < N; n++) {
            for (int64_t i = 0; i < S; i++) {
                int64_t k = (n * C + c) * S + i;
                double want = (tt_get(x, k) - want_mean) / sqrt(want_var + eps) * tt_get(w, c)
                              + tt_get(b, c);
                CHECK_NEAR(tt_get(y, k), want, 1e-9);
            }
        }
    }
    /* training backward against central differences of the loss */
    CHECK_OK(THBatchNorm_backward(gx, gw, gb, g, x, mean, var, w, eps, true));
    double h = 1e-6;
    THTensor *params[] = {x, w, b}, *grads[] = {gx, gw, gb};
    for (int p = 0; p < 3; p++) {
        for (int64_t k = 0; k < params[p]->numel; k++) {
            double keep = tt_get(params[p], k);
            tt_set(params[p], k, keep + h);
            double up = loss(x, w, b, g, eps);
            tt_set(params[p], k, keep - h);
            double down = loss(x, w, b, g, eps);
            tt_set(params[p], k, keep);
            CHECK_NEAR(tt_get(grads[p], k), (up - down) / (2 * h), 1e-5);
        }
    }
    /* eval: the statistics are constants, grad_input = g * w / sqrt(var + eps) */
    CHECK_OK(THBatchNorm_backward(gx, NULL, NULL, g, x, mean, var, w, eps, false));
    for (int64_t k = 0; k < gx->numel; k++) {
        int64_t c = k / S % C;
        CHECK_NEAR(tt_get(gx, k), tt_get(g, k) * tt_get(w, c) / sqrt(tt_get(var, c) + eps), 1e-12);
    }
    THTensor *all[] = {x, w, b, g, mean, var, y, gx, gw, gb};
    for (int i = 0; i < 10; i++) {
        THTensor_release(all[i]);
    }
}

static void
test_batch_norm_float32_without_affine(void)
{
    THTensor *x = new_tensor(TH_Float32, 2, 8, C, 0, 0); /* (N, C): S = 1 */
    THTensor *mean = new_tensor(TH_Float32, 1, C, 0, 0, 0);
    THTensor *var = new_tensor(TH_Float32, 1, C, 0, 0, 0);
    THTensor *y = new_tensor(TH_Float32, 2, 8, C, 0, 0);
    fill(x, 21, 0.0);
    CHECK_OK(THBatchNorm_stats(mean, var, x));
    CHECK_OK(THBatchNorm_forward(y, x, mean, var, NULL, NULL, 0.0));
    for (int64_t c = 0; c < C; c++) {
        double sum = 0.0, squares = 0.0;
        for (int64_t n = 0; n < 8; n++) {
            sum += tt_get(y, n * C + c);
            squares += tt_get(y, n * C + c) * tt_get(y, n * C + c);
        }
        CHECK_NEAR(sum / 8, 0.0, 1e-6);
        CHECK_NEAR(squares / 8, 1.0, 1e-5);
    }
    THTensor *all[] = {x, mean, var, y};
    for (int i = 0; i < 4; i++) {
        THTensor_release(all[i]);
    }
}

/* ---- layer and group norm (Note [Layer and group norm as row norm]) ---------- */

/* rows = 4 (N = 2 samples x G = 2 groups), 2 channels a row of S = 3. */
static const THRowNormShape ROWS = {.rows = 4, .groups = 2, .channels = 2, .spatial = 3};
enum { ROW_NUMEL = 24, ROW_PARAMS = 4 };

/* <row_norm(x), g> */
static double
row_loss(const THTensor *x, const THTensor *w, const THTensor *b, const THTensor *g,
         double eps)
{
    THTensor *y = new_tensor(x->dtype, 1, ROW_NUMEL, 0, 0, 0);
    THTensor *mean = new_tensor(x->dtype, 1, ROWS.rows, 0, 0, 0);
    THTensor *rstd = new_tensor(x->dtype, 1, ROWS.rows, 0, 0, 0);
    CHECK_OK(THRowNorm_forward(y, mean, rstd, x, w, b, &ROWS, eps));
    double result = tt_dot(y, g);
    THTensor_release(y);
    THTensor_release(mean);
    THTensor_release(rstd);
    return result;
}

static void
test_row_norm_matches_the_definition(void)
{
    double eps = 1e-3;
    THTensor *x = new_tensor(TH_Float64, 1, ROW_NUMEL, 0, 0, 0);
    THTensor *g = new_tensor(TH_Float64, 1, ROW_NUMEL, 0, 0, 0);
    THTensor *y = new_tensor(TH_Float64, 1, ROW_NUMEL, 0, 0, 0);
    THTensor *gx = new_tensor(TH_Float64, 1, ROW_NUMEL, 0, 0, 0);
    THTensor *w = new_tensor(TH_Float64, 1, ROW_PARAMS, 0, 0, 0);
    THTensor *b = new_tensor(TH_Float64, 1, ROW_PARAMS, 0, 0, 0);
    THTensor *gw = new_tensor(TH_Float64, 1, ROW_PARAMS, 0, 0, 0);
    THTensor *gb = new_tensor(TH_Float64, 1, ROW_PARAMS, 0, 0, 0);
    THTensor *mean = new_tensor(TH_Float64, 1, ROWS.rows, 0, 0, 0);
    THTensor *rstd = new_tensor(TH_Float64, 1, ROWS.rows, 0, 0, 0);
    fill(x, 31, 1000.0); /* a large mean: the statistics must not cancel */
    fill(g, 32, 0.0);
    fill(w, 33, 1.5);
    fill(b, 34, 0.0);
    CHECK_OK(THRowNorm_forward(y, mean, rstd, x, w, b, &ROWS, eps));
    int64_t len = ROWS.channels * ROWS.spatial;
    for (int64_t r = 0; r < ROWS.rows; r++) {
        double sum = 0.0, squares = 0.0;
        for (int64_t i = 0; i < len; i++) {
            sum += tt_get(x, r * len + i);
        }
        double want_mean = sum / (double)len;
        for (int64_t i = 0; i < len; i++) {
            double d = tt_get(x, r * len + i) - want_mean;
            squares += d * d;
        }
        double want_rstd = 1.0 / sqrt(squares / (double)len + eps);
        CHECK_NEAR(tt_get(mean, r), want_mean, 1e-12 * want_mean);
        CHECK_NEAR(tt_get(rstd, r), want_rstd, 1e-9 * want_rstd);
        for (int64_t i = 0; i < len; i++) {
            int64_t c = (r % ROWS.groups) * ROWS.channels + i / ROWS.spatial;
            double want = (tt_get(x, r * len + i) - want_mean) * want_rstd * tt_get(w, c)
                          + tt_get(b, c);
            CHECK_NEAR(tt_get(y, r * len + i), want, 1e-9);
        }
    }
    CHECK_OK(THRowNorm_backward(gx, gw, gb, g, x, mean, rstd, w, &ROWS));
    double h = 1e-6;
    THTensor *params[] = {x, w, b}, *grads[] = {gx, gw, gb};
    for (int p = 0; p < 3; p++) {
        for (int64_t k = 0; k < params[p]->numel; k++) {
            double keep = tt_get(params[p], k);
            tt_set(params[p], k, keep + h);
            double up = row_loss(x, w, b, g, eps);
            tt_set(params[p], k, keep - h);
            double down = row_loss(x, w, b, g, eps);
            tt_set(params[p], k, keep);
            CHECK_NEAR(tt_get(grads[p], k), (up - down) / (2 * h), 1e-5);
        }
    }
    THTensor *all[] = {x, g, y, gx, w, b, gw, gb, mean, rstd};
    for (int i = 0; i < 10; i++) {
        THTensor_release(all[i]);
    }
}

/* A layer norm large enough for the backward to split its rows between
 * threads gives the one-thread result (the partial sums add up). */
static void
test_layer_norm_backward_threads_agree(void)
{
    THRowNormShape s = {.rows = 64, .groups = 1, .channels = 2048, .spatial = 1};
    int64_t numel = s.rows * s.channels;
    THTensor *x = new_tensor(TH_Float32, 2, s.rows, s.channels, 0, 0);
    THTensor *g = new_tensor(TH_Float32, 2, s.rows, s.channels, 0, 0);
    THTensor *y = new_tensor(TH_Float32, 2, s.rows, s.channels, 0, 0);
    THTensor *mean = new_tensor(TH_Float32, 1, s.rows, 0, 0, 0);
    THTensor *rstd = new_tensor(TH_Float32, 1, s.rows, 0, 0, 0);
    THTensor *gx[2], *gw[2];
    fill(x, 41, 3.0);
    fill(g, 42, 0.0);
    CHECK_OK(THRowNorm_forward(y, mean, rstd, x, NULL, NULL, &s, 1e-5));
    int threads = THParallel_getNumThreads();
    for (int run = 0; run < 2; run++) {
        CHECK_OK(THParallel_setNumThreads(run == 0 ? 1 : 3));
        gx[run] = new_tensor(TH_Float32, 2, s.rows, s.channels, 0, 0);
        gw[run] = new_tensor(TH_Float32, 1, s.channels, 0, 0, 0);
        CHECK_OK(THRowNorm_backward(gx[run], gw[run], NULL, g, x, mean, rstd, NULL, &s));
    }
    CHECK_OK(THParallel_setNumThreads(threads));
    for (int64_t k = 0; k < numel; k++) {
        CHECK_NEAR(tt_get(gx[1], k), tt_get(gx[0], k), 1e-6);
    }
    for (int64_t c = 0; c < s.channels; c++) {
        CHECK_NEAR(tt_get(gw[1], c), tt_get(gw[0], c), 1e-4);
    }
    /* no affine: every row of y has mean 0 and variance 1 */
    double sum = 0.0, squares = 0.0;
    for (int64_t i = 0; i < s.channels; i++) {
        sum += tt_get(y, i);
        squares += tt_get(y, i) * tt_get(y, i);
    }
    CHECK_NEAR(sum / (double)s.channels, 0.0, 1e-5);
    CHECK_NEAR(squares / (double)s.channels, 1.0, 1e-4);
    THTensor *all[] = {x, g, y, mean, rstd, gx[0], gx[1], gw[0], gw[1]};
    for (int i = 0; i < 9; i++) {
        THTensor_release(all[i]);
    }
}

/* ---- adaptive pooling (Note [Adaptive pooling windows]) ----------------------- */

static void
test_adaptive_pool2d_matches_the_definition(void)
{
    THPoolShape s = {.planes = 2, .in_h = 7, .in_w = 5, .out_h = 3, .out_w = 4};
    THTensor *in = new_tensor(TH_Float64, 4, 1, 2, 7, 5);
    THTensor *out = new_tensor(TH_Float64, 4, 1, 2, 3, 4);
    THTensor *indices = new_tensor(TH_Int64, 4, 1, 2, 3, 4);
    THTensor *g = new_tensor(TH_Float64, 4, 1, 2, 3, 4);
    THTensor *gin = new_tensor(TH_Float64, 4, 1, 2, 7, 5);
    fill(in, 51, 0.0);
    fill(g, 52, 0.0);
    const int64_t *index = (const int64_t *)THTensor_data(indices);
    CHECK_OK(THPool2d_adaptiveMaxForward(out, indices, in, &s));
    for (int64_t p = 0, k = 0; p < s.planes; p++) {
        for (int64_t y = 0; y < s.out_h; y++) {
            for (int64_t x = 0; x < s.out_w; x++, k++) {
                int64_t top = y * 7 / 3, bottom = ((y + 1) * 7 + 2) / 3;
                int64_t left = x * 5 / 4, right = ((x + 1) * 5 + 3) / 4;
                double best = -INFINITY;
                int64_t at = -1;
                for (int64_t r = top; r < bottom; r++) {
                    for (int64_t c = left; c < right; c++) {
                        double v = tt_get(in, (p * 7 + r) * 5 + c);
                        if (at < 0 || v > best) {
                            best = v;
                            at = r * 5 + c;
                        }
                    }
                }
                CHECK_MSG(tt_get(out, k) == best && index[k] == at,
                          "adaptive max[%lld] = %g at %lld, want %g at %lld", (long long)k,
                          tt_get(out, k), (long long)index[k], best, (long long)at);
            }
        }
    }
    CHECK_OK(THPool2d_adaptiveAvgForward(out, in, &s));
    for (int64_t p = 0, k = 0; p < s.planes; p++) {
        for (int64_t y = 0; y < s.out_h; y++) {
            for (int64_t x = 0; x < s.out_w; x++, k++) {
                int64_t top = y * 7 / 3, bottom = ((y + 1) * 7 + 2) / 3;
                int64_t left = x * 5 / 4, right = ((x + 1) * 5 + 3) / 4;
                double sum = 0.0;
                for (int64_t r = top; r < bottom; r++) {
                    for (int64_t c = left; c < right; c++) {
                        sum += tt_get(in, (p * 7 + r) * 5 + c);
                    }
                }
                CHECK_NEAR(tt_get(out, k), sum / (double)((bottom - top) * (right - left)),
                           1e-12);
            }
        }
    }
    /* the average backward is the forward's adjoint */
    CHECK_OK(THPool2d_adaptiveAvgBackward(gin, g, &s));
    double inner = tt_dot(out, g);
    CHECK_NEAR(tt_dot(in, gin), inner, 1e-12 * (1 + fabs(inner)));
    THTensor *all[] = {in, out, indices, g, gin};
    for (int i = 0; i < 5; i++) {
        THTensor_release(all[i]);
    }
}

TH_TEST_SUITE(pool_norm) = {
    TH_TEST(test_pool2d_matches_the_definition),
    TH_TEST(test_pool_output_size_follows_pytorch),
    TH_TEST(test_pool_refuses_integer_dtypes),
    TH_TEST(test_batch_norm_matches_the_definition),
    TH_TEST(test_batch_norm_float32_without_affine),
    TH_TEST(test_row_norm_matches_the_definition),
    TH_TEST(test_layer_norm_backward_threads_agree),
    TH_TEST(test_adaptive_pool2d_matches_the_definition),
    TH_TEST_END,
};
