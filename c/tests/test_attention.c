/*
 * test_attention.c -- THAttention's blockwise forward and backward (Note
 * [Attention in blocks]) against the definition written as plain loops
 * over the whole L x S matrix, float32 and float64: lengths that are not
 * multiples of the blocks (L != S, more than one key block, short and long
 * query blocks), grouped-query
 * heads, a bool mask broadcast over batch and heads (stride 0) with a row
 * that may attend to nothing, a float mask with -inf entries, and
 * is_causal.
 */
#include "th_test.h"

#include <math.h>
#include <stdlib.h>

enum { B = 2, H = 4, HK = 2, S = 300, E = 5, EV = 3 };
/* The query length: 70 (the short query blocks) or 800 (the long ones). */
static int64_t L = 70;
enum { NO_MASK, BOOL_MASK, FLOAT_MASK };

static THTensor *
new4(THDtype dtype, int64_t a, int64_t b, int64_t c, int64_t d)
{
    int64_t sizes[4] = {a, b, c, d};
    return THTensor_newEmpty(4, sizes, dtype, TH_DEVICE_CPU);
}

static THTensor *
filled4(THDtype dtype, int64_t a, int64_t b, int64_t c, int64_t d, unsigned seed)
{
    THTensor *t = new4(dtype, a, b, c, d);
    tt_fill_pattern(t, seed);
    return t;
}

/* An (L, S) mask seen as (B, H, L, S) through stride-0 batch and head dims;
 * row 3 may attend to nothing. */
static THTensor *
broadcast_mask(THDtype dtype, int kind)
{
    int64_t plane[2] = {L, S};
    THTensor *base = THTensor_newEmpty(2, plane, dtype, TH_DEVICE_CPU);
    tt_fill_pattern(base, 99);
    for (int64_t i = 0; i < L; i++) {
        for (int64_t j = 0; j < S; j++) {
            bool hidden = i == 3 || (i * 7 + j * 3) % 5 == 0;
            double value = tt_get(base, i * S + j);
            if (kind == BOOL_MASK) {
                tt_set(base, i * S + j, hidden ? 0.0 : 1.0);
            } else if (hidden) {
                tt_set(base, i * S + j, -INFINITY);
            } else {
                tt_set(base, i * S + j, value);
            }
        }
    }
    int64_t sizes[4] = {B, H, L, S}, strides[4] = {0, 0, S, 1};
    THTensor *mask = THTensor_newWithStorage(base->storage, base->storage_offset, 4, sizes,
                                             strides, dtype);
    THTensor_release(base);
    return mask;
}

/* element (a, b, c, d) of a contiguous 4-D tensor */
static double
at4(const THTensor *t, int64_t a, int64_t b, int64_t c, int64_t d)
{
    return tt_get(t, ((a * t->sizes[1] + b) * t->sizes[2] + c) * t->sizes[3] + d);
}

/* The probabilities of head (b, h) by the definition: p is L x S. */
static void
reference_probabilities(double *p, const THTensor *q, const THTensor *k,
                        const THTensor *mask, bool causal, double scale, int64_t b,
                        int64_t h)
{
    int64_t kh = h / (H / HK);
    for (int64_t i = 0; i < L; i++) {
        double best = -INFINITY, total = 0.0;
        for (int64_t j = 0; j < S; j++) {
            double s = 0.0;
            for (int64_t e = 0; e < E; e++) {
                s += at4(q, b, h, i, e) * at4(k, b, kh, j, e);
            }
            s *= scale;
            if (mask != NULL) {
                double m = tt_get(mask, i * S + j); /* (L, S) broadcast */
                s = mask->dtype == TH_Bool ? (m != 0.0 ? s : -INFINITY) : s + m;
            }
            if (causal && j > i) {
                s = -INFINITY;
            }
            p[i * S + j] = s;
            best = s > best ? s : best;
        }
        for (int64_t j = 0; j < S; j++) {
            double w = best == -INFINITY ? 0.0 : exp(p[i * S + j] - best);
            p[i * S + j] = w;
            total += w;
        }
        for (int64_t j = 0; j < S; j++) {
            p[i * S + j] = total == 0.0 ? 0.0 : p[i * S + j] / total;
        }
    }
}

static double
tolerance_of(THDtype dtype)
{
    return dtype == TH_Float32 ? 2e-5 : 1e-12;
}

static void
check_case(THDtype dtype, int mask_kind, bool causal)
{
    double scale = 0.37, tol = tolerance_of(dtype);
    THTensor *q = filled4(dtype, B, H, L, E, 1), *k = filled4(dtype, B, HK, S, E, 2);
    THTensor *v = filled4(dtype, B, HK, S, EV, 3), *g = filled4(dtype, B, H, L, EV, 4);
    THTensor *mask = mask_kind == NO_MASK ? NULL
                     : broadcast_mask(mask_kind == BOOL_MASK ? TH_Bool : dtype, mask_kind);
    THTensor *out = new4(dtype, B, H, L, EV);
    int64_t lse_sizes[3] = {B, H, L};
    THTensor *lse = THTensor_newEmpty(3, lse_sizes, dtype, TH_DEVICE_CPU);
    THTensor *gq = new4(dtype, B, H, L, E), *gk = new4(dtype, B, HK, S, E);
    THTensor *gv = new4(dtype, B, HK, S, EV);
    CHECK_OK(THAttention_forward(out, lse, q, k, v, mask, scale, causal));
    CHECK_OK(THAttention_backward(gq, gk, gv, g, q, k, v, out, lse, mask, scale, causal));

    double *p = malloc(sizeof(double) * L * S), *ds = malloc(sizeof(double) * L * S);
    double *want_gk = calloc(B * HK * S * E, sizeof(double));
    double *want_gv = calloc(B * HK * S * EV, sizeof(double));
    double worst = 0.0;
    for (int64_t b = 0; b < B; b++) {
        for (int64_t h = 0; h < H; h++) {
            int64_t kh = h / (H / HK);
            reference_probabilities(p, q, k, mask, causal, scale, b, h);
            for (int64_t i = 0; i < L; i++) {
                double d = 0.0; /* sum_j p_ij dp_ij */
                for (int64_t j = 0; j < S; j++) {
                    double dp = 0.0;
                    for (int64_t e = 0; e < EV; e++) {
                        dp += at4(g, b, h, i, e) * at4(v, b, kh, j, e);
                    }
                    ds[i * S + j] = dp;
                    d += p[i * S + j] * dp;
                }
                for (int64_t e = 0; e < EV; e++) {
                    double o = 0.0;
                    for (int64_t j = 0; j < S; j++) {
                        o += p[i * S + j] * at4(v, b, kh, j, e);
                    }
                    worst = fmax(worst, fabs(o - at4(out, b, h, i, e)));
                }
                for (int64_t j = 0; j < S; j++) {
                    ds[i * S + j] = p[i * S + j] * (ds[i * S + j] - d);
                }
                for (int64_t e = 0; e < E; e++) {
                    double dq = 0.0;
                    for (int64_t j = 0; j < S; j++) {
                        dq += scale * ds[i * S + j] * at4(k, b, kh, j, e);
                    }
                    worst = fmax(worst, fabs(dq - at4(gq, b, h, i, e)));
                }
            }
            for (int64_t j = 0; j < S; j++) {
                for (int64_t i = 0; i < L; i++) {
                    for (int64_t e = 0; e < E; e++) {
                        want_gk[((b * HK + kh) * S + j) * E + e] +=
                            scale * ds[i * S + j] * at4(q, b, h, i, e);
                    }
                    for (int64_t e = 0; e < EV; e++) {
                        want_gv[((b * HK + kh) * S + j) * EV + e] +=
                            p[i * S + j] * at4(g, b, h, i, e);
                    }
                }
            }
        }
    }
    for (int64_t i = 0; i < gk->numel; i++) {
        worst = fmax(worst, fabs(want_gk[i] - tt_get(gk, i)));
    }
    for (int64_t i = 0; i < gv->numel; i++) {
        worst = fmax(worst, fabs(want_gv[i] - tt_get(gv, i)));
    }
    CHECK_MSG(worst <= tol, "%s mask %d causal %d: off by %g", THDtype_name(dtype),
              mask_kind, causal, worst);
    if (mask_kind != NO_MASK) { /* row 3 attends to nothing: zeros, lse -inf */
        CHECK_EQ_DBL(at4(out, 0, 0, 3, 0), 0.0);
        CHECK(isinf(tt_get(lse, 3)) && tt_get(lse, 3) < 0);
    }
    free(p);
    free(ds);
    free(want_gk);
    free(want_gv);
    THTensor *all[] = {q, k, v, g, out, lse, gq, gk, gv, mask};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        if (all[i] != NULL) {
            THTensor_release(all[i]);
        }
    }
}

static void
test_attention_matches_the_definition(void)
{
    THDtype dtypes[2] = {TH_Float64, TH_Float32};
    for (int t = 0; t < 2; t++) {
        for (int mask_kind = NO_MASK; mask_kind <= FLOAT_MASK; mask_kind++) {
            check_case(dtypes[t], mask_kind, false);
        }
        check_case(dtypes[t], NO_MASK, true);
        check_case(dtypes[t], BOOL_MASK, true);
    }
    L = 800;
    check_case(TH_Float64, BOOL_MASK, true);
    check_case(TH_Float32, FLOAT_MASK, false);
    L = 70;
}

static void
test_attention_refuses_bad_operands(void)
{
    THTensor *q = new4(TH_Int64, 1, 2, 3, 4), *k = new4(TH_Float32, 1, 3, 3, 4);
    THTensor *f = new4(TH_Float32, 1, 2, 3, 4);
    int64_t lse_sizes[3] = {1, 2, 3};
    THTensor *lse = THTensor_newEmpty(3, lse_sizes, TH_Float32, TH_DEVICE_CPU);
    CHECK_FAILS(THAttention_forward(f, lse, q, q, q, NULL, 1.0, false), TH_ERR_TYPE,
                "float32 or float64");
    /* 2 query heads cannot share 3 key heads */
    CHECK_FAILS(THAttention_forward(f, lse, f, k, k, NULL, 1.0, false), TH_ERR_RUNTIME,
                "multiple of Hk");
    CHECK_FAILS(THAttention_forward(f, lse, f, f, f, k, 1.0, false), TH_ERR_RUNTIME,
                "mask");
    THTensor_release(q);
    THTensor_release(k);
    THTensor_release(f);
    THTensor_release(lse);
}

TH_TEST_SUITE(attention) = {
    TH_TEST(test_attention_matches_the_definition),
    TH_TEST(test_attention_refuses_bad_operands),
    TH_TEST_END,
};
