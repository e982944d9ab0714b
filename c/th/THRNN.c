/*
 * THRNN.c -- the recurrent layers' time loops (Note [Recurrent layers in
 * one loop] in THRNN.h): per step one THBlas_gemm with W_hh and one fused
 * gate kernel, and an LSTM with a projection one GEMM more (Note [LSTM
 * projections] in THRNN.h).  The gate kernels run row by row over the
 * batch; their inner loops over the hidden units use THFormulas.h's
 * vectorisable sigmoid and tanh, compiled once more for AVX2, and the
 * LSTM's, the heaviest, for AVX-512 too (Note [Vector clones]).
 */
#include "THRNN.h"

#include "THBlas.h"
#include "THFormulas.h"
#include "THGeneral.h"

#include <stdlib.h>
#include <string.h>

/* The dtypes the loops run in: (Name, ctype). */
#define TH_RNN_DTYPES(_) \
    _(Float32, float)    \
    _(Float64, double)

/* One time step: each pointer is the step's (B, width) slice, rows
 * contiguous; the forward reads the inputs and writes the outputs marked
 * so, the backward likewise. */
typedef struct {
    int64_t batch, hidden;
    char *gates;        /* (B, G) fwd: pre-activations in, activations out */
    char *hidden_gates; /* GRU (B, G): fwd a = h W_hh^T + b_hh; bwd its grad */
    const char *h_prev; /* (B, H) h_{t-1} */
    char *h;            /* (B, H) h_t; with a projection u_t = o tanh(c_t),
                           out in the backward too */
    const char *c_prev; /* LSTM (B, H) c_{t-1} */
    char *c;            /* LSTM: c_t; GRU: a_n, kept for the backward */
    const char *grad_out; /* (B, H) dL/dh_t from the layer's output; with a
                             projection the whole dL/du_t */
    char *grad_h;       /* (B, H) dL/dh_t from step t + 1 in, dL/dh_{t-1} out
                           (GRU: the part that bypasses W_hh); NULL with a
                           projection (the loop keeps dL/dh_t) */
    char *grad_c;       /* LSTM (B, H) dL/dc_t in, dL/dc_{t-1} out */
    char *grad_gates;   /* (B, G) out */
} Step;

/* ---- the gate kernels, one typed copy per dtype ------------------------------ */

#define ROW(ptr, ctype, b, width) ((ctype *)(ptr) + (b) * (width))

/* Each kernel is a row function, whose restrict parameters (one per gate:
 * the gates of a row are H apart) let gcc vectorise the loop over the
 * hidden units, and a step function over the batch's rows. */
#define TH_DEFINE_RNN_KERNELS(Name, ctype)                                      \
    static inline void rnn_forward_row_##Name(int64_t H, bool relu,             \
                                              const ctype *restrict pre,        \
                                              ctype *restrict h)                \
    {                                                                           \
        for (int64_t j = 0; j < H; j++) {                                       \
            h[j] = relu ? vselect(pre[j] > 0, pre[j], (ctype)0) : vtanh(pre[j]); \
        }                                                                       \
    }                                                                           \
    TH_VECTOR_CLONES static void rnn_forward_##Name(const Step *s, bool relu)   \
    {                                                                           \
        int64_t H = s->hidden;                                                  \
        for (int64_t b = 0; b < s->batch; b++) {                                \
            rnn_forward_row_##Name(H, relu, ROW(s->gates, ctype, b, H),         \
                                   ROW(s->h, ctype, b, H));                     \
        }                                                                       \
    }                                                                           \
    /* tanh' = 1 - h^2; relu' = (h > 0), as PyTorch's threshold_backward */    \
    static inline void rnn_backward_row_##Name(                                 \
        int64_t H, bool relu, const ctype *restrict h,                          \
        const ctype *restrict go, const ctype *restrict dh,                     \
        ctype *restrict dpre)                                                   \
    {                                                                           \
        for (int64_t j = 0; j < H; j++) {                                       \
            ctype d = go[j] + dh[j];                                            \
            dpre[j] = relu ? vselect(h[j] > 0, d, (ctype)0)                     \
                           : d * (1 - h[j] * h[j]);                             \
        }                                                                       \
    }                                                                           \
    TH_VECTOR_CLONES static void rnn_backward_##Name(const Step *s, bool relu)  \
    {                                                                           \
        int64_t H = s->hidden;                                                  \
        for (int64_t b = 0; b < s->batch; b++) {                                \
            rnn_backward_row_##Name(H, relu, ROW(s->h, ctype, b, H),            \
                                    ROW(s->grad_out, ctype, b, H),              \
                                    ROW(s->grad_h, ctype, b, H),                \
                                    ROW(s->grad_gates, ctype, b, H));           \
        }                                                                       \
    }                                                                           \
                                                                                \
    /* gi, gf, gg, go: the pre-activations in, i, f, g, o out */              \
    static inline void lstm_forward_row_##Name(                                 \
        int64_t H, ctype *restrict gi, ctype *restrict gf, ctype *restrict gg,  \
        ctype *restrict go, const ctype *restrict c_prev, ctype *restrict c,    \
        ctype *restrict h)                                                      \
    {                                                                           \
        for (int64_t j = 0; j < H; j++) {                                       \
            ctype in = stable_sigmoid(gi[j]), forget = stable_sigmoid(gf[j]);   \
            ctype cand = vtanh(gg[j]), out = stable_sigmoid(go[j]);             \
            ctype cell = forget * c_prev[j] + in * cand;                        \
            gi[j] = in;                                                         \
            gf[j] = forget;                                                     \
            gg[j] = cand;                                                       \
            go[j] = out;                                                        \
            c[j] = cell;                                                        \
            h[j] = out * vtanh(cell);                                           \
        }                                                                       \
    }                                                                           \
    TH_VECTOR_CLONES_AVX512 static void lstm_forward_##Name(const Step *s, bool relu)  \
    {                                                                           \
        (void)relu; /* RNN's flag: one signature for the table */            \
        int64_t H = s->hidden;                                                  \
        for (int64_t b = 0; b < s->batch; b++) {                                \
            ctype *g = ROW(s->gates, ctype, b, 4 * H);                          \
            lstm_forward_row_##Name(H, g, g + H, g + 2 * H, g + 3 * H,          \
                                    ROW(s->c_prev, ctype, b, H),                \
                                    ROW(s->c, ctype, b, H),                     \
                                    ROW(s->h, ctype, b, H));                    \
        }                                                                       \
    }                                                                           \
    /* a: the activations i, f, g, o; d: their gradients.  tanh(c_t) is     \
     * recomputed rather than stored.  `projected` (a constant at each call, \
     * so each inlined copy vectorises without the branch): grad_out is all \
     * of dL/du_t, dh is unused, and u_t = o tanh(c_t) goes to u. */         \
    static inline void lstm_backward_row_##Name(                                \
        int64_t H, bool projected, const ctype *restrict ai,                    \
        const ctype *restrict af, const ctype *restrict ag,                     \
        const ctype *restrict ao, const ctype *restrict c_prev,                 \
        const ctype *restrict c, const ctype *restrict grad_out,                \
        const ctype *restrict dh, ctype *restrict dc, ctype *restrict di,       \
        ctype *restrict df, ctype *restrict dg, ctype *restrict d_o,            \
        ctype *restrict u)                                                      \
    {                                                                           \
        for (int64_t j = 0; j < H; j++) {                                       \
            ctype tanh_c = vtanh(c[j]);                                         \
            ctype d_h = projected ? grad_out[j] : grad_out[j] + dh[j];          \
            if (projected) {                                                    \
                u[j] = ao[j] * tanh_c;                                          \
            }                                                                   \
            ctype d_c = dc[j] + d_h * ao[j] * (1 - tanh_c * tanh_c);            \
            di[j] = d_c * ag[j] * ai[j] * (1 - ai[j]);                          \
            df[j] = d_c * c_prev[j] * af[j] * (1 - af[j]);                      \
            dg[j] = d_c * ai[j] * (1 - ag[j] * ag[j]);                          \
            d_o[j] = d_h * tanh_c * ao[j] * (1 - ao[j]);                        \
            dc[j] = d_c * af[j];                                                \
        }                                                                       \
    }                                                                           \
    TH_VECTOR_CLONES_AVX512 static void lstm_backward_##Name(const Step *s, bool relu) \
    {                                                                           \
        (void)relu; /* RNN's flag: one signature for the table */            \
        int64_t H = s->hidden;                                                  \
        for (int64_t b = 0; b < s->batch; b++) {                                \
            const ctype *a = ROW(s->gates, ctype, b, 4 * H);                    \
            ctype *d = ROW(s->grad_gates, ctype, b, 4 * H);                     \
            const ctype *c_prev = ROW(s->c_prev, ctype, b, H);                  \
            const ctype *c = ROW(s->c, ctype, b, H);                            \
            const ctype *grad_out = ROW(s->grad_out, ctype, b, H);              \
            ctype *dc = ROW(s->grad_c, ctype, b, H);                            \
            if (s->grad_h == NULL) {                                            \
                lstm_backward_row_##Name(H, true, a, a + H, a + 2 * H,          \
                                         a + 3 * H, c_prev, c, grad_out, NULL,  \
                                         dc, d, d + H, d + 2 * H, d + 3 * H,    \
                                         ROW(s->h, ctype, b, H));               \
            }                                                                   \
            else {                                                              \
                lstm_backward_row_##Name(H, false, a, a + H, a + 2 * H,         \
                                         a + 3 * H, c_prev, c, grad_out,        \
                                         ROW(s->grad_h, ctype, b, H), dc, d,    \
                                         d + H, d + 2 * H, d + 3 * H, NULL);    \
            }                                                                   \
        }                                                                       \
    }                                                                           \
                                                                                \
    /* gr, gz, gn: the input projection in, r, z, n out; ar, az, an: a */     \
    static inline void gru_forward_row_##Name(                                  \
        int64_t H, ctype *restrict gr, ctype *restrict gz, ctype *restrict gn,  \
        const ctype *restrict ar, const ctype *restrict az,                     \
        const ctype *restrict an, const ctype *restrict h_prev,                 \
        ctype *restrict an_kept, ctype *restrict h)                             \
    {                                                                           \
        for (int64_t j = 0; j < H; j++) {                                       \
            ctype reset = stable_sigmoid(gr[j] + ar[j]);                        \
            ctype update = stable_sigmoid(gz[j] + az[j]);                       \
            ctype cand = vtanh(gn[j] + reset * an[j]);                          \
            gr[j] = reset;                                                      \
            gz[j] = update;                                                     \
            gn[j] = cand;                                                       \
            an_kept[j] = an[j];                                                 \
            h[j] = (1 - update) * cand + update * h_prev[j];                    \
        }                                                                       \
    }                                                                           \
    TH_VECTOR_CLONES static void gru_forward_##Name(const Step *s, bool relu)   \
    {                                                                           \
        (void)relu; /* RNN's flag: one signature for the table */            \
        int64_t H = s->hidden;                                                  \
        for (int64_t b = 0; b < s->batch; b++) {                                \
            ctype *g = ROW(s->gates, ctype, b, 3 * H);                          \
            const ctype *a = ROW(s->hidden_gates, ctype, b, 3 * H);             \
            gru_forward_row_##Name(H, g, g + H, g + 2 * H, a, a + H, a + 2 * H, \
                                   ROW(s->h_prev, ctype, b, H),                 \
                                   ROW(s->c, ctype, b, H), ROW(s->h, ctype, b, H)); \
        }                                                                       \
    }                                                                           \
    /* dx*: the gradient of the input projection, da*: of a (they differ    \
     * only in the candidate's third, which a reaches through r); dh: in,   \
     * dL/dh_t from step t + 1; out, the part of dL/dh_{t-1} that bypasses  \
     * W_hh */                                                                \
    static inline void gru_backward_row_##Name(                                 \
        int64_t H, const ctype *restrict ar, const ctype *restrict az,          \
        const ctype *restrict an, const ctype *restrict an_kept,                \
        const ctype *restrict h_prev, const ctype *restrict grad_out,           \
        ctype *restrict dh, ctype *restrict dxr, ctype *restrict dxz,           \
        ctype *restrict dxn, ctype *restrict dar, ctype *restrict daz,          \
        ctype *restrict dan)                                                    \
    {                                                                           \
        for (int64_t j = 0; j < H; j++) {                                       \
            ctype reset = ar[j], update = az[j], cand = an[j];                  \
            ctype d_h = grad_out[j] + dh[j];                                    \
            ctype d_n = d_h * (1 - update) * (1 - cand * cand);                 \
            ctype d_r = d_n * an_kept[j] * reset * (1 - reset);                 \
            ctype d_z = d_h * (h_prev[j] - cand) * update * (1 - update);       \
            dxr[j] = d_r;                                                       \
            dxz[j] = d_z;                                                       \
            dxn[j] = d_n;                                                       \
            dar[j] = d_r;                                                       \
            daz[j] = d_z;                                                       \
            dan[j] = d_n * reset;                                               \
            dh[j] = d_h * update;                                               \
        }                                                                       \
    }                                                                           \
    TH_VECTOR_CLONES static void gru_backward_##Name(const Step *s, bool relu)  \
    {                                                                           \
        (void)relu; /* RNN's flag: one signature for the table */            \
        int64_t H = s->hidden;                                                  \
        for (int64_t b = 0; b < s->batch; b++) {                                \
            const ctype *a = ROW(s->gates, ctype, b, 3 * H);                    \
            ctype *dx = ROW(s->grad_gates, ctype, b, 3 * H);                    \
            ctype *da = ROW(s->hidden_gates, ctype, b, 3 * H);                  \
            gru_backward_row_##Name(H, a, a + H, a + 2 * H,                     \
                                    ROW(s->c, ctype, b, H),                     \
                                    ROW(s->h_prev, ctype, b, H),                \
                                    ROW(s->grad_out, ctype, b, H),              \
                                    ROW(s->grad_h, ctype, b, H), dx, dx + H,    \
                                    dx + 2 * H, da, da + H, da + 2 * H);        \
        }                                                                       \
    }

TH_RNN_DTYPES(TH_DEFINE_RNN_KERNELS)

static bool
runs_in(THDtype dtype)
{
    return dtype == TH_Float32 || dtype == TH_Float64;
}

/* kernels[dtype][mode][backward], the dtypes in TH_RNN_DTYPES's order;
 * relu is RNN's choice of activation, which the others ignore. */
typedef void (*CellKernel)(const Step *s, bool relu);

#define TH_RNN_KERNEL_TABLE(Name, ctype)                          \
    {{rnn_forward_##Name, rnn_backward_##Name},                   \
     {rnn_forward_##Name, rnn_backward_##Name},                   \
     {lstm_forward_##Name, lstm_backward_##Name},                 \
     {gru_forward_##Name, gru_backward_##Name}},

static const CellKernel cell_kernels[2][4][2] = {TH_RNN_DTYPES(TH_RNN_KERNEL_TABLE)};

static void
run_cell(THRNNMode mode, THDtype dtype, bool backward, const Step *s)
{
    cell_kernels[dtype == TH_Float64][mode][backward](s, mode == TH_RNN_RELU);
}

/* ---- the time loops ------------------------------------------------------------ */

int
THRNN_gateCount(THRNNMode mode)
{
    return mode == TH_RNN_LSTM ? 4 : mode == TH_RNN_GRU ? 3 : 1;
}

/* The layout both loops share: sizes, element size and the byte size of
 * one step's (B, S), (B, H) and (B, G) slices, S the hidden state's width:
 * the projection's, or H (Note [LSTM projections] in THRNN.h). */
typedef struct {
    THDtype dtype;
    int64_t steps, batch, hidden, gate_width, state_width;
    bool projected;
    int64_t item, state_bytes, cell_bytes, gate_bytes;
} Layout;

static int
layout_of(Layout *l, THRNNMode mode, const THTensor *gates, const THTensor *output,
          const THTensor *w_hr)
{
    if (!runs_in(gates->dtype)) {
        THError_set(TH_ERR_TYPE, "rnn: expected a float32 or float64 tensor");
        return -1;
    }
    if (w_hr != NULL && mode != TH_RNN_LSTM) {
        THError_set(TH_ERR_VALUE, "rnn: only an LSTM takes a projection (w_hr)");
        return -1;
    }
    l->dtype = gates->dtype;
    l->steps = gates->sizes[0];
    l->batch = gates->sizes[1];
    l->state_width = output->sizes[2];
    l->projected = w_hr != NULL;
    l->hidden = l->projected ? w_hr->sizes[1] : l->state_width;
    l->gate_width = THRNN_gateCount(mode) * l->hidden;
    l->item = THDtype_itemsize(l->dtype);
    /* <= the tensors' byte sizes, which exist: no overflow */
    l->state_bytes = l->batch * l->state_width * l->item;
    l->cell_bytes = l->batch * l->hidden * l->item;
    l->gate_bytes = l->batch * l->gate_width * l->item;
    return 0;
}

static char *
data_at(const THTensor *t, int64_t step, int64_t step_bytes)
{
    return t == NULL ? NULL : (char *)THTensor_data(t) + step * step_bytes;
}

/* Runs CASE(Name, ctype), which ends in break, for the dtype's case. */
#define TH_RNN_SWITCH(dtype, CASE)                                              \
    switch (dtype) {                                                            \
        TH_RNN_DTYPES(CASE)                                                     \
    default:                                                                    \
        break; /* layout_of admits only the dtypes above */                     \
    }

/* sum += addend, n elements. */
#define TH_DEFINE_ADD_INTO(Name, ctype)                                         \
    static void add_into_##Name(ctype *restrict sum, const ctype *restrict addend, \
                                int64_t n)                                      \
    {                                                                           \
        for (int64_t i = 0; i < n; i++) {                                       \
            sum[i] += addend[i];                                                \
        }                                                                       \
    }

TH_RNN_DTYPES(TH_DEFINE_ADD_INTO)

/* w^T (cols x rows) of the (rows x cols) row-major w, packed once for
 * every step's product with it (Note [One packed B for many products] in
 * THBlas.c): it replaced a row-major copy of w^T, whose transpose and
 * strided reads took ~1.07 of the packed version's time per forward step
 * (20 x 256 @ 256 x 1024, 35 steps, one thread, the Zen 4). */
static int
pack_transposed(const Layout *l, const THTensor *w, THBlasPackedB *packed)
{
    int64_t rows = w->sizes[0], cols = w->sizes[1];
    THBlasMatrix w_rows = {THTensor_data(w), cols, 1};
    return THBlas_packB(l->dtype, cols, rows, THBlasMatrix_transposed(w_rows), packed);
}

/* (B x S) h_{t-1} @ W_hh^T (S x G) into `out` (B x G): out = beta out +
 * h W_hh^T. */
static int
hidden_product(const Layout *l, const char *h, const THBlasPackedB *w_hh_t, double beta,
               char *out)
{
    return THBlas_gemmPackedB(l->batch, THScalar_fromDouble(1.0),
                              (THBlasMatrix){(char *)h, l->state_width, 1}, w_hh_t,
                              THScalar_fromDouble(beta),
                              (THBlasMatrix){out, l->gate_width, 1});
}

/* (B x G) grad @ W_hh (G x S) into grad_h (B x S), added when `accumulate`. */
static int
grad_hidden_product(const Layout *l, const char *grad, const THTensor *w_hh,
                    bool accumulate, char *grad_h)
{
    THBlasMatrix w = {THTensor_data(w_hh), l->state_width, 1};
    return THBlas_gemm(l->dtype, l->batch, l->state_width, l->gate_width,
                       THScalar_fromDouble(1.0),
                       (THBlasMatrix){(char *)grad, l->gate_width, 1}, w,
                       THScalar_fromDouble(accumulate ? 1.0 : 0.0),
                       (THBlasMatrix){grad_h, l->state_width, 1});
}

/* The projection h_t = u_t W_hr^T: (B x H) u @ (H x S) W_hr^T into h. */
static int
projection_product(const Layout *l, const char *u, const THBlasPackedB *w_hr_t, char *h)
{
    return THBlas_gemmPackedB(l->batch, THScalar_fromDouble(1.0),
                              (THBlasMatrix){(char *)u, l->hidden, 1}, w_hr_t,
                              THScalar_fromDouble(0.0),
                              (THBlasMatrix){h, l->state_width, 1});
}

/* The projection's backward into u_t: dh (B x S), dL/dh_t from step
 * t + 1, gets the output's share grad_out added, then grad_u (B x H) =
 * dh @ W_hr (S x H). */
static int
grad_projection_product(const Layout *l, const char *grad_out, char *dh,
                        const THTensor *w_hr, char *grad_u)
{
    int64_t n = l->batch * l->state_width;
#define TH_ADD_CASE(Name, ctype)                                                \
    case TH_##Name:                                                             \
        add_into_##Name((ctype *)dh, (const ctype *)grad_out, n);               \
        break;
    TH_RNN_SWITCH(l->dtype, TH_ADD_CASE)
#undef TH_ADD_CASE
    return THBlas_gemm(l->dtype, l->batch, l->hidden, l->state_width,
                       THScalar_fromDouble(1.0),
                       (THBlasMatrix){dh, l->state_width, 1},
                       (THBlasMatrix){THTensor_data(w_hr), l->hidden, 1},
                       THScalar_fromDouble(0.0), (THBlasMatrix){grad_u, l->hidden, 1});
}

/* dW_hr (S x H) += dh^T (S x B, dh read by columns) @ u_t (B x H). */
static int
accumulate_grad_w_hr(const Layout *l, const char *dh, const char *u, THTensor *grad_w_hr)
{
    THBlasMatrix dh_rows = {(char *)dh, l->state_width, 1};
    THBlasMatrix dh_t = THBlasMatrix_transposed(dh_rows);
    return THBlas_gemm(l->dtype, l->state_width, l->hidden, l->batch,
                       THScalar_fromDouble(1.0), dh_t,
                       (THBlasMatrix){(char *)u, l->hidden, 1}, THScalar_fromDouble(1.0),
                       (THBlasMatrix){THTensor_data(grad_w_hr), l->hidden, 1});
}

/* GRU's a = b_hh (or 0) before the product adds h W_hh^T; the product's
 * beta. */
static double
start_hidden_gates(const Layout *l, const THTensor *b_hh, char *a)
{
    if (b_hh == NULL) {
        return 0.0;
    }
    int64_t row_bytes = l->gate_width * l->item;
    for (int64_t b = 0; b < l->batch; b++) {
        memcpy(a + b * row_bytes, THTensor_data(b_hh), (size_t)row_bytes);
    }
    return 1.0;
}

/* The step the forward runs k-th. */
static int64_t
step_at(const Layout *l, bool reverse, int64_t k)
{
    return reverse ? l->steps - 1 - k : k;
}

int
THRNN_forward(THRNNMode mode, bool reverse, THTensor *gates, THTensor *output,
              THTensor *saved, const THTensor *w_hh, const THTensor *b_hh,
              const THTensor *w_hr, const THTensor *h0, const THTensor *c0)
{
    Layout l;
    if (layout_of(&l, mode, gates, output, w_hr) < 0) {
        return -1;
    }
    /* scratch: W_hh^T packed; GRU's a; with a projection W_hr^T packed
     * and u_t (freeing a packed B never packed is a no-op) */
    THBlasPackedB w_hh_t = {.panels = NULL}, w_hr_t = {.panels = NULL};
    char *hidden_gates = NULL, *unprojected = NULL;
    bool ready = pack_transposed(&l, w_hh, &w_hh_t) == 0;
    if (ready && mode == TH_RNN_GRU) {
        hidden_gates = TH_mallocArray(l.gate_bytes, 1, "GRU's hidden gates");
        ready = hidden_gates != NULL;
    }
    if (ready && l.projected) {
        if (pack_transposed(&l, w_hr, &w_hr_t) == 0) {
            unprojected = TH_mallocArray(l.cell_bytes, 1, "LSTM's o tanh(c)");
        }
        ready = unprojected != NULL;
    }
    Step s = {.batch = l.batch, .hidden = l.hidden, .hidden_gates = hidden_gates,
              .h_prev = THTensor_data(h0), .c_prev = data_at(c0, 0, 0)};
    int status = ready ? 0 : -1;
    for (int64_t k = 0; k < l.steps && status == 0; k++) {
        int64_t t = step_at(&l, reverse, k);
        char *h = data_at(output, t, l.state_bytes);
        s.gates = data_at(gates, t, l.gate_bytes);
        s.h = l.projected ? unprojected : h;
        s.c = data_at(saved, t, l.cell_bytes);
        if (mode == TH_RNN_GRU) {
            double beta = start_hidden_gates(&l, b_hh, hidden_gates);
            status = hidden_product(&l, s.h_prev, &w_hh_t, beta, hidden_gates);
        }
        else {
            status = hidden_product(&l, s.h_prev, &w_hh_t, 1.0, s.gates);
        }
        if (status == 0) {
            run_cell(mode, l.dtype, false, &s);
        }
        if (status == 0 && l.projected) {
            status = projection_product(&l, unprojected, &w_hr_t, h);
        }
        s.h_prev = h;
        s.c_prev = s.c;
    }
    free(unprojected);
    THBlas_freePackedB(&w_hr_t);
    free(hidden_gates);
    THBlas_freePackedB(&w_hh_t);
    return status;
}

int
THRNN_backward(THRNNMode mode, bool reverse, THTensor *grad_gates,
               THTensor *grad_hidden_gates, THTensor *grad_h, THTensor *grad_c,
               THTensor *grad_w_hr, const THTensor *grad_output, const THTensor *gates,
               const THTensor *output, const THTensor *saved, const THTensor *w_hh,
               const THTensor *w_hr, const THTensor *h0, const THTensor *c0)
{
    Layout l;
    if (layout_of(&l, mode, gates, output, w_hr) < 0) {
        return -1;
    }
    /* with a projection, u_t (recomputed by the gate kernel) and dL/du_t */
    char *unprojected = NULL, *grad_unprojected = NULL;
    if (l.projected) {
        unprojected = TH_mallocArray(l.cell_bytes, 1, "LSTM's o tanh(c)");
        if (unprojected != NULL) {
            grad_unprojected = TH_mallocArray(l.cell_bytes, 1, "the gradient of u_t");
        }
        if (grad_unprojected == NULL) {
            free(unprojected);
            return -1;
        }
        memset(THTensor_data(grad_w_hr), 0, (size_t)(grad_w_hr->numel * l.item));
    }
    char *dh = THTensor_data(grad_h); /* dL/dh_t from step t + 1, then dL/dh_{t-1} */
    Step s = {.batch = l.batch, .hidden = l.hidden, .grad_h = l.projected ? NULL : dh,
              .grad_c = data_at(grad_c, 0, 0), .h = unprojected,
              .grad_out = grad_unprojected};
    int status = 0;
    for (int64_t k = l.steps - 1; k >= 0 && status == 0; k--) {
        int64_t t = step_at(&l, reverse, k);
        int64_t prev = step_at(&l, reverse, k - 1); /* unused when k == 0 */
        const char *grad_out = data_at(grad_output, t, l.state_bytes);
        s.gates = data_at(gates, t, l.gate_bytes);
        s.c = data_at(saved, t, l.cell_bytes);
        s.h_prev = k == 0 ? THTensor_data(h0) : data_at(output, prev, l.state_bytes);
        s.c_prev = k == 0 ? data_at(c0, 0, 0) : data_at(saved, prev, l.cell_bytes);
        s.grad_gates = data_at(grad_gates, t, l.gate_bytes);
        s.hidden_gates = data_at(grad_hidden_gates, t, l.gate_bytes);
        if (l.projected) {
            status = grad_projection_product(&l, grad_out, dh, w_hr, grad_unprojected);
        }
        else {
            s.h = data_at(output, t, l.state_bytes);
            s.grad_out = grad_out;
        }
        if (status == 0) {
            run_cell(mode, l.dtype, true, &s);
        }
        if (status == 0 && l.projected) {
            status = accumulate_grad_w_hr(&l, dh, unprojected, grad_w_hr);
        }
        if (status == 0) {
            status = mode == TH_RNN_GRU
                         ? grad_hidden_product(&l, s.hidden_gates, w_hh, true, dh)
                         : grad_hidden_product(&l, s.grad_gates, w_hh, false, dh);
        }
    }
    free(grad_unprojected);
    free(unprojected);
    return status;
}
