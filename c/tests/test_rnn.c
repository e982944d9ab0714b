/*
 * test_rnn.c -- THRNN's time loops (Note [Recurrent layers in one loop]):
 * the LSTM forward, with and without a projection (Note [LSTM
 * projections]), against a scalar reference written from the formulas,
 * float32 and float64, both directions; the backward of every mode and of
 * the projected LSTM against central differences of the forward; integer
 * dtypes refused.
 */
#include "th_test.h"

#include "THRNN.h"

#include <math.h>

enum { STEPS = 3, BATCH = 2, HIDDEN = 3, PROJ = 2 };

static THTensor *
new_tensor(THDtype dtype, int ndim, int64_t a, int64_t b, int64_t c)
{
    int64_t sizes[3] = {a, b, c};
    return THTensor_newEmpty(ndim, sizes, dtype, TH_DEVICE_CPU);
}

/* Deterministic values in [-scale, scale). */
static THTensor *
filled(THDtype dtype, int ndim, int64_t a, int64_t b, int64_t c, unsigned seed,
       double scale)
{
    THTensor *t = new_tensor(dtype, ndim, a, b, c);
    tt_fill_pattern(t, seed);
    for (int64_t i = 0; i < t->numel; i++) {
        tt_set(t, i, tt_get(t, i) * scale);
    }
    return t;
}

static double
sigmoid(double x)
{
    return 1 / (1 + exp(-x));
}

/* The LSTM over all steps in double, one element at a time, projected by
 * w_hr (PROJ x HIDDEN) unless it is NULL: the outputs' values into
 * out[T][B][width], width PROJ or HIDDEN (w is (4 HIDDEN, width)). */
static void
lstm_reference(const THTensor *gates, const THTensor *w, const THTensor *w_hr,
               const THTensor *h0, const THTensor *c0, bool reverse,
               double out[STEPS][BATCH][HIDDEN])
{
    int width = w_hr == NULL ? HIDDEN : PROJ;
    double h[BATCH][HIDDEN], c[BATCH][HIDDEN];
    for (int b = 0; b < BATCH; b++) {
        for (int j = 0; j < HIDDEN; j++) {
            h[b][j] = j < width ? tt_get(h0, b * width + j) : 0;
            c[b][j] = tt_get(c0, b * HIDDEN + j);
        }
    }
    for (int k = 0; k < STEPS; k++) {
        int t = reverse ? STEPS - 1 - k : k;
        double pre[BATCH][4 * HIDDEN], u[BATCH][HIDDEN];
        for (int b = 0; b < BATCH; b++) {
            for (int g = 0; g < 4 * HIDDEN; g++) {
                pre[b][g] = tt_get(gates, (t * BATCH + b) * 4 * HIDDEN + g);
                for (int j = 0; j < width; j++) {
                    pre[b][g] += h[b][j] * tt_get(w, g * width + j);
                }
            }
        }
        for (int b = 0; b < BATCH; b++) {
            for (int j = 0; j < HIDDEN; j++) {
                double i = sigmoid(pre[b][j]), f = sigmoid(pre[b][HIDDEN + j]);
                double g = tanh(pre[b][2 * HIDDEN + j]), o = sigmoid(pre[b][3 * HIDDEN + j]);
                c[b][j] = f * c[b][j] + i * g;
                u[b][j] = o * tanh(c[b][j]);
            }
            for (int p = 0; p < width; p++) {
                h[b][p] = w_hr == NULL ? u[b][p] : 0;
                for (int j = 0; w_hr != NULL && j < HIDDEN; j++) {
                    h[b][p] += u[b][j] * tt_get(w_hr, p * HIDDEN + j);
                }
                (&out[0][0][0])[(t * BATCH + b) * width + p] = h[b][p];
            }
        }
    }
}

static void
test_lstm_forward_matches_the_formulas(void)
{
    THDtype dtypes[2] = {TH_Float32, TH_Float64};
    for (int d = 0; d < 2; d++) {
        for (int variant = 0; variant < 4; variant++) {
            bool reverse = variant & 1, projected = variant & 2;
            int64_t width = projected ? PROJ : HIDDEN;
            THDtype dtype = dtypes[d];
            THTensor *gates = filled(dtype, 3, STEPS, BATCH, 4 * HIDDEN, 1, 2.0);
            THTensor *w = filled(dtype, 2, 4 * HIDDEN, width, 0, 2, 1.0);
            THTensor *w_hr = projected ? filled(dtype, 2, PROJ, HIDDEN, 0, 5, 1.0) : NULL;
            THTensor *h0 = filled(dtype, 2, BATCH, width, 0, 3, 1.0);
            THTensor *c0 = filled(dtype, 2, BATCH, HIDDEN, 0, 4, 1.0);
            THTensor *out = new_tensor(dtype, 3, STEPS, BATCH, width);
            THTensor *cells = new_tensor(dtype, 3, STEPS, BATCH, HIDDEN);
            double expected[STEPS][BATCH][HIDDEN];
            lstm_reference(gates, w, w_hr, h0, c0, reverse, expected);
            CHECK_OK(THRNN_forward(TH_RNN_LSTM, reverse, gates, out, cells, w, NULL, w_hr,
                                   h0, c0));
            for (int64_t i = 0; i < out->numel; i++) {
                CHECK_NEAR(tt_get(out, i), (&expected[0][0][0])[i],
                           dtype == TH_Float32 ? 1e-5 : 1e-12);
            }
            THTensor *all[] = {gates, w, w_hr, h0, c0, out, cells};
            for (int i = 0; i < 7; i++) {
                if (all[i] != NULL) {
                    THTensor_release(all[i]);
                }
            }
        }
    }
}

/* The forward's tensors for one mode (float64); w_hr projects an LSTM
 * (NULL: no projection), `width` is the hidden state's (PROJ or HIDDEN). */
typedef struct {
    THRNNMode mode;
    int64_t width;
    THTensor *gates, *w, *b_hh, *w_hr, *h0, *c0, *weights_out;
} Problem;

static bool
keeps_saved(THRNNMode mode)
{
    return mode == TH_RNN_LSTM || mode == TH_RNN_GRU;
}

/* L = sum(output * weights_out) for the problem's inputs (gates are
 * copied: the forward overwrites them). */
static double
loss(const Problem *p)
{
    THTensor *gates = THTensor_newEmptyLike(p->gates, TH_Float64);
    THTensor *out = new_tensor(TH_Float64, 3, STEPS, BATCH, p->width);
    THTensor *saved = new_tensor(TH_Float64, 3, STEPS, BATCH, HIDDEN);
    THTensor_copy(gates, p->gates);
    CHECK_OK(THRNN_forward(p->mode, false, gates, out, keeps_saved(p->mode) ? saved : NULL,
                           p->w, p->b_hh, p->w_hr, p->h0, p->c0));
    double total = tt_dot(out, p->weights_out);
    THTensor_release(gates);
    THTensor_release(out);
    THTensor_release(saved);
    return total;
}

/* The backward's gradient of `wrt` (an input of the problem) against
 * central differences of `loss`. */
static void
check_against_differences(Problem *p, THTensor *wrt, const THTensor *grad)
{
    const double h = 1e-6;
    for (int64_t k = 0; k < wrt->numel; k++) {
        double keep = tt_get(wrt, k);
        tt_set(wrt, k, keep + h);
        double up = loss(p);
        tt_set(wrt, k, keep - h);
        double down = loss(p);
        tt_set(wrt, k, keep);
        CHECK_NEAR(tt_get(grad, k), (up - down) / (2 * h), 1e-6);
    }
}

/* One mode's backward against differences: the gates', h0's, c0's and
 * (projected) W_hr's gradients. */
static void
check_backward(THRNNMode mode, bool projected)
{
    int64_t width = THRNN_gateCount(mode) * HIDDEN, state = projected ? PROJ : HIDDEN;
    bool lstm = mode == TH_RNN_LSTM, gru = mode == TH_RNN_GRU;
    Problem p = {mode, state, filled(TH_Float64, 3, STEPS, BATCH, width, 5, 1.0),
                 filled(TH_Float64, 2, width, state, 0, 6, 0.7),
                 gru ? filled(TH_Float64, 1, width, 0, 0, 7, 0.5) : NULL,
                 projected ? filled(TH_Float64, 2, PROJ, HIDDEN, 0, 13, 0.8) : NULL,
                 filled(TH_Float64, 2, BATCH, state, 0, 8, 1.0),
                 lstm ? filled(TH_Float64, 2, BATCH, HIDDEN, 0, 9, 1.0) : NULL,
                 filled(TH_Float64, 3, STEPS, BATCH, state, 10, 1.0)};
    THTensor *gates = THTensor_newEmptyLike(p.gates, TH_Float64);
    THTensor *out = new_tensor(TH_Float64, 3, STEPS, BATCH, state);
    THTensor *saved = keeps_saved(mode) ? new_tensor(TH_Float64, 3, STEPS, BATCH, HIDDEN)
                                        : NULL;
    THTensor_copy(gates, p.gates);
    CHECK_OK(THRNN_forward(mode, false, gates, out, saved, p.w, p.b_hh, p.w_hr, p.h0, p.c0));
    THTensor *grad_gates = THTensor_newEmptyLike(p.gates, TH_Float64);
    THTensor *grad_hidden = gru ? THTensor_newEmptyLike(p.gates, TH_Float64) : NULL;
    THTensor *grad_h = filled(TH_Float64, 2, BATCH, state, 0, 11, 0.0);
    THTensor *grad_c = lstm ? filled(TH_Float64, 2, BATCH, HIDDEN, 0, 12, 0.0) : NULL;
    /* filled with a pattern: the backward must overwrite it, not add to it */
    THTensor *grad_w_hr = projected ? filled(TH_Float64, 2, PROJ, HIDDEN, 0, 14, 1.0) : NULL;
    CHECK_OK(THRNN_backward(mode, false, grad_gates, grad_hidden, grad_h, grad_c, grad_w_hr,
                            p.weights_out, gates, out, saved, p.w, p.w_hr, p.h0, p.c0));
    check_against_differences(&p, p.gates, grad_gates);
    check_against_differences(&p, p.h0, grad_h);
    if (lstm) {
        check_against_differences(&p, p.c0, grad_c);
    }
    if (projected) {
        check_against_differences(&p, p.w_hr, grad_w_hr);
    }
    THTensor *all[] = {p.gates, p.w, p.b_hh, p.w_hr, p.h0, p.c0, p.weights_out, gates,
                       out, saved, grad_gates, grad_hidden, grad_h, grad_c, grad_w_hr};
    for (int i = 0; i < 15; i++) {
        if (all[i] != NULL) {
            THTensor_release(all[i]);
        }
    }
}

static void
test_backward_matches_differences(void)
{
    THRNNMode modes[4] = {TH_RNN_TANH, TH_RNN_RELU, TH_RNN_LSTM, TH_RNN_GRU};
    for (int m = 0; m < 4; m++) {
        check_backward(modes[m], false);
    }
}

static void
test_projected_lstm_backward_matches_differences(void)
{
    check_backward(TH_RNN_LSTM, true);
}

static void
test_rnn_refuses_integer_dtypes(void)
{
    THTensor *gates = new_tensor(TH_Int64, 3, STEPS, BATCH, HIDDEN);
    THTensor *w = new_tensor(TH_Int64, 2, HIDDEN, HIDDEN, 0);
    THTensor *h0 = new_tensor(TH_Int64, 2, BATCH, HIDDEN, 0);
    THTensor *out = new_tensor(TH_Int64, 3, STEPS, BATCH, HIDDEN);
    CHECK_FAILS(THRNN_forward(TH_RNN_TANH, false, gates, out, NULL, w, NULL, NULL, h0, NULL),
                TH_ERR_TYPE, "float32 or float64");
    THTensor *all[] = {gates, w, h0, out};
    for (int i = 0; i < 4; i++) {
        THTensor_release(all[i]);
    }
}

TH_TEST_SUITE(rnn) = {
    TH_TEST(test_lstm_forward_matches_the_formulas),
    TH_TEST(test_backward_matches_differences),
    TH_TEST(test_projected_lstm_backward_matches_differences),
    TH_TEST(test_rnn_refuses_integer_dtypes),
    TH_TEST_END,
};
