/*
 * THAttention.c -- scaled dot product attention in blocks (Note [Attention
 * in blocks] in THAttention.h).
 *
 * The block products go to THBlas_gemm (on strided views: query, key,
 * value and grad_out are read in place); the per-row work on a block of
 * scores (bias, running max, exp, sums) is typed, one copy per dtype,
 * vectorised through TH_VECTOR_CLONES and the float32 exp of
 * Note [Vectorisable exp].  The forward splits (batch, head, query block)
 * units over the threads; the backward (batch, key/value head) units, so
 * each thread owns the rows of dK and dV it accumulates into (with
 * grouped-query attention several query heads add into one key head).
 */
#include "THAttention.h"

#include "THBlas.h"
#include "THFormulas.h"
#include "THGeneral.h"
#include "THParallel.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* The dtypes the kernel runs in: (Name, ctype). */
#define TH_ATTENTION_DTYPES(_) \
    _(Float32, float)          \
    _(Float64, double)

/* Query rows per block (Br): short sequences take the smaller block,
 * which wastes less of the causal diagonal blocks; long ones the larger,
 * which halves how often each key block is packed for the GEMMs. */
#define BLOCK_Q_SHORT 64
#define BLOCK_Q_LONG 128
#define LONG_QUERIES 768
#define BLOCK_KV 256 /* keys per block (Bc) */
#define LANES 8

/* One (batch, head)'s matrix of a 4-D tensor: rows are dim 2. */
static THBlasMatrix
head_matrix(const THTensor *t, int64_t b, int64_t h)
{
    int64_t offset = b * t->strides[0] + h * t->strides[1];
    THBlasMatrix mat = {THTensor_data(t) + offset * THDtype_itemsize(t->dtype),
                        t->strides[2], t->strides[3]};
    return mat;
}

/* Rows [first, ...) of a matrix. */
static THBlasMatrix
rows_from(THBlasMatrix mat, int64_t first, int itemsize)
{
    mat.data += first * mat.row_stride * itemsize;
    return mat;
}

/* A scratch block of `rows` x `cols` elements, row-major. */
static THBlasMatrix
block_matrix(void *data, int64_t cols)
{
    THBlasMatrix mat = {data, cols, 1};
    return mat;
}

/* What one block of scores needs to know about its bias. */
typedef struct {
    const char *data;          /* the mask at (row 0, key 0) of this head, or NULL */
    int64_t row_stride, col_stride;
    bool is_bool;
    bool causal;
    int64_t first_row, first_key; /* of the block, in the head */
} BlockBias;

typedef struct {
    THDtype dtype;
    int itemsize;
    int64_t batch, heads, kv_heads, q_len, kv_len, head_dim, value_dim;
    int64_t block_q; /* Br */
    double scale;
    bool causal;
    const THTensor *query, *key, *value, *mask, *grad_out, *out;
    const THTensor *logsumexp; /* written by the forward, read by the backward */
    THTensor *result, *grad_query, *grad_key, *grad_value;
    atomic_bool failed; /* a gemm or a scratch allocation ran out of memory */
} AttentionJob;

/* Rows in the query block starting at `row`. */
static int64_t
rows_in_block(const AttentionJob *job, int64_t row)
{
    return job->q_len - row < job->block_q ? job->q_len - row : job->block_q;
}

static int64_t
query_blocks(const AttentionJob *job)
{
    return (job->q_len + job->block_q - 1) / job->block_q;
}

/* Keys [0, end) a query block [first, last) may see: under is_causal key
 * j is hidden from row i when j > i. */
static int64_t
keys_seen(const AttentionJob *job, int64_t last_row)
{
    return job->causal && last_row < job->kv_len ? last_row : job->kv_len;
}

static BlockBias
block_bias(const AttentionJob *job, int64_t b, int64_t h, int64_t row, int64_t key)
{
    BlockBias bias = {NULL, 0, 0, false, job->causal, row, key};
    const THTensor *mask = job->mask;
    if (mask != NULL) {
        int64_t offset = b * mask->strides[0] + h * mask->strides[1]
                         + row * mask->strides[2] + key * mask->strides[3];
        bias.data = THTensor_data(mask) + offset * THDtype_itemsize(mask->dtype);
        bias.row_stride = mask->strides[2];
        bias.col_stride = mask->strides[3];
        bias.is_bool = mask->dtype == TH_Bool;
    }
    return bias;
}

/* ---- the per-row kernels, one typed copy per dtype ---------------------------- */

/* Note [Exps apart from their sum]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * The exps of the blocks of scores took a fifth of the forward's time
 * (perf, b1 h8 L 2048 causal).  In one loop with the row's sum, whose
 * LANES (8) running sums fix the order of the additions, gcc vectorises
 * them 8 lanes wide even for AVX-512.  Apart, the exps (one per element,
 * nothing carried between them) run 16 lanes wide in their AVX-512 clone,
 * and the sum then rereads the row from L1 in the same 8 running sums and
 * order: the same bits as the single loop, and on the Zen 4 (one thread,
 * thread CPU time, a C loop over 128 rows of 256 float32 scores) ~0.77 ->
 * ~0.62 ns an element.  The AVX2 clone gains nothing from the split.  The
 * backward's probabilities take the exps alone. */

#define TH_DEFINE_ATTENTION_ROWS(Name, ctype)                                 \
    TH_VECTOR_CLONES                                                          \
    static void add_row_##Name(ctype *row, const ctype *m, int64_t stride,    \
                               int64_t cols)                                  \
    {                                                                         \
        if (stride == 1) {                                                    \
            for (int64_t c = 0; c < cols; c++) {                              \
                row[c] += m[c];                                               \
            }                                                                 \
        } else {                                                              \
            for (int64_t c = 0; c < cols; c++) {                              \
                row[c] += m[c * stride];                                      \
            }                                                                 \
        }                                                                     \
    }                                                                         \
    static void hide_##Name(ctype *row, const bool *m, int64_t stride,        \
                            int64_t cols)                                     \
    {                                                                         \
        for (int64_t c = 0; c < cols; c++) {                                  \
            row[c] = m[c * stride] ? row[c] : (ctype)-INFINITY;               \
        }                                                                     \
    }                                                                         \
                                                                              \
    /* s[r, c] += bias, or -inf where the mask or causality hides key c */   \
    static void add_bias_##Name(ctype *s, int64_t rows, int64_t cols,         \
                                const BlockBias *bias)                        \
    {                                                                         \
        for (int64_t r = 0; r < rows; r++) {                                  \
            ctype *row = s + r * cols;                                        \
            if (bias->data != NULL) {                                         \
                const char *m = bias->data                                    \
                                + r * bias->row_stride                        \
                                      * (bias->is_bool ? 1 : (int64_t)sizeof(ctype)); \
                if (bias->is_bool) {                                          \
                    hide_##Name(row, (const bool *)m, bias->col_stride, cols); \
                } else {                                                      \
                    add_row_##Name(row, (const ctype *)m, bias->col_stride,   \
                                   cols);                                     \
                }                                                             \
            }                                                                 \
            if (bias->causal) {                                               \
                int64_t seen = bias->first_row + r + 1 - bias->first_key;     \
                for (int64_t c = seen < 0 ? 0 : seen; c < cols; c++) {        \
                    row[c] = (ctype)-INFINITY;                                \
                }                                                             \
            }                                                                 \
        }                                                                     \
    }                                                                         \
                                                                              \
    TH_VECTOR_CLONES                                                          \
    static ctype row_max_##Name(const ctype *row, int64_t cols)               \
    {                                                                         \
        ctype acc[LANES];                                                     \
        for (int k = 0; k < LANES; k++) {                                     \
            acc[k] = (ctype)-INFINITY;                                        \
        }                                                                     \
        int64_t c = 0;                                                        \
        for (; c + LANES <= cols; c += LANES) {                               \
            for (int k = 0; k < LANES; k++) {                                 \
                acc[k] = row[c + k] > acc[k] ? row[c + k] : acc[k];           \
            }                                                                 \
        }                                                                     \
        for (; c < cols; c++) {                                               \
            acc[0] = row[c] > acc[0] ? row[c] : acc[0];                       \
        }                                                                     \
        ctype best = acc[0];                                                  \
        for (int k = 1; k < LANES; k++) {                                     \
            best = acc[k] > best ? acc[k] : best;                             \
        }                                                                     \
        return best;                                                          \
    }                                                                         \
                                                                              \
    /* row[c] = exp(row[c] - shift), in place */                              \
    TH_VECTOR_CLONES_AVX512                                                   \
    static void exp_shifted_row_##Name(ctype *row, int64_t cols, ctype shift) \
    {                                                                         \
        for (int64_t c = 0; c < cols; c++) {                                  \
            row[c] = exp_##Name(row[c] - shift);                              \
        }                                                                     \
    }                                                                         \
                                                                              \
    /* the sum of a row, in LANES running sums */                             \
    TH_VECTOR_CLONES                                                          \
    static ctype row_sum_##Name(const ctype *row, int64_t cols)               \
    {                                                                         \
        ctype acc[LANES] = {0};                                               \
        int64_t c = 0;                                                        \
        for (; c + LANES <= cols; c += LANES) {                               \
            for (int k = 0; k < LANES; k++) {                                 \
                acc[k] += row[c + k];                                         \
            }                                                                 \
        }                                                                     \
        for (; c < cols; c++) {                                               \
            acc[0] += row[c];                                                 \
        }                                                                     \
        ctype total = 0;                                                      \
        for (int k = 0; k < LANES; k++) {                                     \
            total += acc[k];                                                  \
        }                                                                     \
        return total;                                                         \
    }                                                                         \
                                                                              \
    /* row[c] = exp(row[c] - shift); returns the sum of the new row, in       \
     * two passes (Note [Exps apart from their sum]) */                       \
    static ctype exp_row_##Name(ctype *row, int64_t cols, ctype shift)        \
    {                                                                         \
        exp_shifted_row_##Name(row, cols, shift);                             \
        return row_sum_##Name(row, cols);                                     \
    }                                                                         \
                                                                              \
    TH_VECTOR_CLONES                                                          \
    static void scale_row_##Name(ctype *row, int64_t cols, ctype factor)      \
    {                                                                         \
        for (int64_t c = 0; c < cols; c++) {                                  \
            row[c] *= factor;                                                 \
        }                                                                     \
    }                                                                         \
                                                                              \
    /* The forward's step for one block of scores s (rows x cols): s       \
     * becomes exp(s - m'), and the running max m, sum l and output o     \
     * (ld value_dim) are rescaled to the new max m'. */                     \
    static void online_softmax_##Name(ctype *s, int64_t rows, int64_t cols,   \
                                      ctype *m, ctype *l, ctype *o,           \
                                      int64_t value_dim)                      \
    {                                                                         \
        for (int64_t r = 0; r < rows; r++) {                                  \
            ctype *row = s + r * cols;                                        \
            ctype block_max = row_max_##Name(row, cols);                      \
            ctype new_max = block_max > m[r] ? block_max : m[r];              \
            if (new_max == (ctype)-INFINITY) {                                \
                memset(row, 0, cols * sizeof(ctype)); /* nothing seen yet */  \
                continue;                                                     \
            }                                                                 \
            ctype rescale = exp_##Name(m[r] - new_max); /* 0 for m = -inf */  \
            l[r] = l[r] * rescale + exp_row_##Name(row, cols, new_max);       \
            if (rescale != (ctype)1) {                                        \
                scale_row_##Name(o + r * value_dim, value_dim, rescale);      \
            }                                                                 \
            m[r] = new_max;                                                   \
        }                                                                     \
    }                                                                         \
                                                                              \
    /* o /= l and lse = m + log l; a row that saw nothing stays 0, -inf */   \
    static void finish_rows_##Name(ctype *o, ctype *lse, const ctype *m,      \
                                   const ctype *l, int64_t rows,              \
                                   int64_t value_dim)                         \
    {                                                                         \
        for (int64_t r = 0; r < rows; r++) {                                  \
            if (l[r] == 0) {                                                  \
                lse[r] = (ctype)-INFINITY;                                    \
                continue;                                                     \
            }                                                                 \
            scale_row_##Name(o + r * value_dim, value_dim, (ctype)1 / l[r]);  \
            lse[r] = m[r] + log(l[r]);                                        \
        }                                                                     \
    }                                                                         \
                                                                              \
    /* The backward's P = exp(s - lse) of one block, in place */             \
    static void probabilities_##Name(ctype *s, int64_t rows, int64_t cols,    \
                                     const ctype *lse)                        \
    {                                                                         \
        for (int64_t r = 0; r < rows; r++) {                                  \
            if (lse[r] == (ctype)-INFINITY) {                                 \
                memset(s + r * cols, 0, cols * sizeof(ctype));                \
            } else {                                                          \
                exp_shifted_row_##Name(s + r * cols, cols, lse[r]);           \
            }                                                                 \
        }                                                                     \
    }                                                                         \
                                                                              \
    /* dS = P * (dP - D), in place of dP */                                  \
    TH_VECTOR_CLONES                                                          \
    static void score_grad_##Name(ctype *dp, const ctype *p, int64_t rows,    \
                                  int64_t cols, const ctype *d)               \
    {                                                                         \
        for (int64_t r = 0; r < rows; r++) {                                  \
            for (int64_t c = 0; c < cols; c++) {                              \
                dp[r * cols + c] = p[r * cols + c] * (dp[r * cols + c] - d[r]); \
            }                                                                 \
        }                                                                     \
    }                                                                         \
                                                                              \
    /* D_r = do_r . o_r for `rows` rows (strided grad_out, contiguous o) */   \
    static void output_dots_##Name(ctype *d, THBlasMatrix dout, const ctype *o, \
                                   int64_t rows, int64_t value_dim)           \
    {                                                                         \
        for (int64_t r = 0; r < rows; r++) {                                  \
            const ctype *g = (const ctype *)dout.data + r * dout.row_stride;  \
            double sum = 0.0;                                                 \
            for (int64_t e = 0; e < value_dim; e++) {                         \
                sum += (double)g[e * dout.col_stride] * o[r * value_dim + e]; \
            }                                                                 \
            d[r] = (ctype)sum;                                                \
        }                                                                     \
    }

TH_ATTENTION_DTYPES(TH_DEFINE_ATTENTION_ROWS)

/* The typed row kernels of one dtype, so the block loops below are
 * written once. */
typedef struct {
    void (*add_bias)(void *s, int64_t rows, int64_t cols, const BlockBias *bias);
    void (*online_softmax)(void *s, int64_t rows, int64_t cols, void *m, void *l, void *o,
                           int64_t value_dim);
    void (*finish_rows)(void *o, void *lse, const void *m, const void *l, int64_t rows,
                        int64_t value_dim);
    void (*probabilities)(void *s, int64_t rows, int64_t cols, const void *lse);
    void (*score_grad)(void *dp, const void *p, int64_t rows, int64_t cols,
                       const void *d);
    void (*output_dots)(void *d, THBlasMatrix dout, const void *o, int64_t rows,
                        int64_t value_dim);
    void (*start_rows)(void *m, void *l, int64_t rows);
} RowKernels;

#define TH_DEFINE_ROW_TABLE(Name, ctype)                                      \
    static void start_rows_##Name(void *m, void *l, int64_t rows)             \
    {                                                                         \
        for (int64_t r = 0; r < rows; r++) {                                  \
            ((ctype *)m)[r] = (ctype)-INFINITY;                               \
            ((ctype *)l)[r] = 0;                                              \
        }                                                                     \
    }                                                                         \
    static const RowKernels row_kernels_##Name = {                           \
        (void (*)(void *, int64_t, int64_t, const BlockBias *))add_bias_##Name, \
        (void (*)(void *, int64_t, int64_t, void *, void *, void *,           \
                  int64_t))online_softmax_##Name,                             \
        (void (*)(void *, void *, const void *, const void *, int64_t,        \
                  int64_t))finish_rows_##Name,                                \
        (void (*)(void *, int64_t, int64_t, const void *))probabilities_##Name, \
        (void (*)(void *, const void *, int64_t, int64_t,                     \
                  const void *))score_grad_##Name,                            \
        (void (*)(void *, THBlasMatrix, const void *, int64_t,                \
                  int64_t))output_dots_##Name,                                \
        start_rows_##Name,                                                    \
    };

TH_ATTENTION_DTYPES(TH_DEFINE_ROW_TABLE)

static const RowKernels *
row_kernels(THDtype dtype)
{
#define TH_ROW_TABLE_CASE(Name, ctype) \
    case TH_##Name:                    \
        return &row_kernels_##Name;
    switch (dtype) {
        TH_ATTENTION_DTYPES(TH_ROW_TABLE_CASE)
    default:
        return NULL;
    }
#undef TH_ROW_TABLE_CASE
}

/* ---- the block loops --------------------------------------------------------- */

/* c = alpha a @ b + beta c, recording an allocation failure in the job
 * (THError's slot is per thread: the caller reports it). */
static void
gemm(AttentionJob *job, int64_t m, int64_t n, int64_t k, double alpha, THBlasMatrix a,
     THBlasMatrix b, double beta, THBlasMatrix c)
{
    if (THBlas_gemm(job->dtype, m, n, k, THScalar_fromDouble(alpha), a, b,
                    THScalar_fromDouble(beta), c) < 0) {
        atomic_store(&job->failed, true);
    }
}

/* scores (rows x cols) = scale q_rows k_keys^T + bias */
static void
block_scores(AttentionJob *job, char *scores, int64_t b, int64_t h, int64_t row,
             int64_t rows, int64_t key, int64_t cols)
{
    int itemsize = job->itemsize;
    int64_t kv_head = h / (job->heads / job->kv_heads);
    THBlasMatrix q = rows_from(head_matrix(job->query, b, h), row, itemsize);
    THBlasMatrix k = rows_from(head_matrix(job->key, b, kv_head), key, itemsize);
    gemm(job, rows, cols, job->head_dim, job->scale, q, THBlasMatrix_transposed(k), 0.0,
         block_matrix(scores, cols));
    BlockBias bias = block_bias(job, b, h, row, key);
    row_kernels(job->dtype)->add_bias(scores, rows, cols, &bias);
}

/* Forward of units [begin, end): unit = (batch * heads + head) * blocks +
 * query block. */
static void
forward_units(int64_t begin, int64_t end, void *ctx)
{
    AttentionJob *job = ctx;
    const RowKernels *rk = row_kernels(job->dtype);
    int itemsize = job->itemsize;
    char *scores = malloc((size_t)job->block_q * BLOCK_KV * itemsize);
    char *stats = malloc((size_t)2 * job->block_q * itemsize); /* m, then l */
    if (scores == NULL || stats == NULL) {
        atomic_store(&job->failed, true);
        end = begin;
    }
    for (int64_t unit = begin; unit < end; unit++) {
        int64_t head_index = unit / query_blocks(job);
        int64_t b = head_index / job->heads, h = head_index % job->heads;
        int64_t row = unit % query_blocks(job) * job->block_q;
        int64_t rows = rows_in_block(job, row);
        int64_t kv_head = h / (job->heads / job->kv_heads);
        /* this block's rows of out, contiguous (row, value_dim) */
        char *o = THTensor_data(job->result)
                  + (head_index * job->q_len + row) * job->value_dim * itemsize;
        char *m = stats, *l = stats + job->block_q * itemsize;
        memset(o, 0, (size_t)(rows * job->value_dim * itemsize));
        rk->start_rows(m, l, rows);
        int64_t keys = keys_seen(job, row + rows);
        for (int64_t key = 0; key < keys; key += BLOCK_KV) {
            int64_t cols = keys - key < BLOCK_KV ? keys - key : BLOCK_KV;
            block_scores(job, scores, b, h, row, rows, key, cols);
            rk->online_softmax(scores, rows, cols, m, l, o, job->value_dim);
            THBlasMatrix v = rows_from(head_matrix(job->value, b, kv_head), key, itemsize);
            gemm(job, rows, job->value_dim, cols, 1.0, block_matrix(scores, cols), v, 1.0,
                 block_matrix(o, job->value_dim));
        }
        char *lse = THTensor_data(job->logsumexp) + (head_index * job->q_len + row) * itemsize;
        rk->finish_rows(o, lse, m, l, rows, job->value_dim);
    }
    free(scores);
    free(stats);
}

/* The backward's step for query block [row, row + rows) of head h against
 * key block [key, key + cols); p and dp are scratch blocks, d the rows'
 * D = do . o. */
static void
backward_block(AttentionJob *job, char *p, char *dp, const char *d, int64_t b, int64_t h,
               int64_t row, int64_t rows, int64_t key, int64_t cols)
{
    const RowKernels *rk = row_kernels(job->dtype);
    int itemsize = job->itemsize;
    int64_t kv_head = h / (job->heads / job->kv_heads);
    int64_t head_index = b * job->heads + h;
    const char *lse = THTensor_data(job->logsumexp)
                      + (head_index * job->q_len + row) * itemsize;
    THBlasMatrix dout = rows_from(head_matrix(job->grad_out, b, h), row, itemsize);
    THBlasMatrix q = rows_from(head_matrix(job->query, b, h), row, itemsize);
    THBlasMatrix k = rows_from(head_matrix(job->key, b, kv_head), key, itemsize);
    THBlasMatrix v = rows_from(head_matrix(job->value, b, kv_head), key, itemsize);
    THBlasMatrix pm = block_matrix(p, cols), dsm = block_matrix(dp, cols);

    block_scores(job, p, b, h, row, rows, key, cols);
    rk->probabilities(p, rows, cols, lse);
    if (job->grad_value != NULL) { /* dV += P^T dO */
        THBlasMatrix dv = rows_from(head_matrix(job->grad_value, b, kv_head), key, itemsize);
        gemm(job, cols, job->value_dim, rows, 1.0, THBlasMatrix_transposed(pm), dout, 1.0,
             dv);
    }
    if (job->grad_query == NULL && job->grad_key == NULL) {
        return;
    }
    /* dP = dO V^T, then dS = P (dP - D) */
    gemm(job, rows, cols, job->value_dim, 1.0, dout, THBlasMatrix_transposed(v), 0.0, dsm);
    rk->score_grad(dp, p, rows, cols, d);
    if (job->grad_query != NULL) { /* dQ += scale dS K */
        THBlasMatrix dq = rows_from(head_matrix(job->grad_query, b, h), row, itemsize);
        gemm(job, rows, job->head_dim, cols, job->scale, dsm, k, 1.0, dq);
    }
    if (job->grad_key != NULL) { /* dK += scale dS^T Q */
        THBlasMatrix dk = rows_from(head_matrix(job->grad_key, b, kv_head), key, itemsize);
        gemm(job, cols, job->head_dim, rows, job->scale, THBlasMatrix_transposed(dsm), q, 1.0,
             dk);
    }
}

/* Backward of units [begin, end): unit = batch * kv_heads + kv head, which
 * owns its rows of dK and dV and those of dQ of its query heads. */
static void
backward_units(int64_t begin, int64_t end, void *ctx)
{
    AttentionJob *job = ctx;
    const RowKernels *rk = row_kernels(job->dtype);
    int itemsize = job->itemsize;
    int64_t group = job->heads / job->kv_heads;
    char *p = malloc((size_t)job->block_q * BLOCK_KV * itemsize);
    char *dp = malloc((size_t)job->block_q * BLOCK_KV * itemsize);
    char *d = malloc((size_t)job->block_q * itemsize);
    if (p == NULL || dp == NULL || d == NULL) {
        atomic_store(&job->failed, true);
        end = begin;
    }
    for (int64_t unit = begin; unit < end; unit++) {
        int64_t b = unit / job->kv_heads, kv_head = unit % job->kv_heads;
        for (int64_t h = kv_head * group; h < (kv_head + 1) * group; h++) {
            int64_t head_index = b * job->heads + h;
            for (int64_t row = 0; row < job->q_len; row += job->block_q) {
                int64_t rows = rows_in_block(job, row);
                const char *o = THTensor_data(job->out)
                                + (head_index * job->q_len + row) * job->value_dim
                                      * itemsize;
                THBlasMatrix dout = rows_from(head_matrix(job->grad_out, b, h), row,
                                              itemsize);
                rk->output_dots(d, dout, o, rows, job->value_dim);
                int64_t keys = keys_seen(job, row + rows);
                for (int64_t key = 0; key < keys; key += BLOCK_KV) {
                    int64_t cols = keys - key < BLOCK_KV ? keys - key : BLOCK_KV;
                    backward_block(job, p, dp, d, b, h, row, rows, key, cols);
                }
            }
        }
    }
    free(p);
    free(dp);
    free(d);
}

/* ---- checks and entry points ---------------------------------------------------- */

static bool
same_sizes(const THTensor *t, int ndim, const int64_t *sizes)
{
    if (t->ndim != ndim) {
        return false;
    }
    for (int d = 0; d < ndim; d++) {
        if (t->sizes[d] != sizes[d]) {
            return false;
        }
    }
    return true;
}

/* Fills the job's shape from query, key, value and mask, checking them;
 * 0, or -1 with an error. */
static int
begin_job(AttentionJob *job, const THTensor *query, const THTensor *key,
          const THTensor *value, const THTensor *mask, double scale, bool causal)
{
    memset(job, 0, sizeof(*job));
    if (row_kernels(query->dtype) == NULL) {
        return THError_set(TH_ERR_TYPE, "attention: expected float32 or float64 tensors, "
                                        "got %s", THDtype_name(query->dtype));
    }
    if (query->ndim != 4 || key->ndim != 4 || value->ndim != 4) {
        return THError_set(TH_ERR_RUNTIME, "attention: expected 4-D query, key and value");
    }
    if (key->dtype != query->dtype || value->dtype != query->dtype) {
        return THError_set(TH_ERR_TYPE, "attention: query, key and value must have one "
                                        "dtype");
    }
    job->dtype = query->dtype;
    job->itemsize = THDtype_itemsize(query->dtype);
    job->batch = query->sizes[0];
    job->heads = query->sizes[1];
    job->q_len = query->sizes[2];
    job->head_dim = query->sizes[3];
    job->kv_heads = key->sizes[1];
    job->kv_len = key->sizes[2];
    job->value_dim = value->sizes[3];
    job->block_q = job->q_len >= LONG_QUERIES ? BLOCK_Q_LONG : BLOCK_Q_SHORT;
    job->scale = scale;
    job->causal = causal;
    int64_t key_sizes[4] = {job->batch, job->kv_heads, job->kv_len, job->head_dim};
    int64_t value_sizes[4] = {job->batch, job->kv_heads, job->kv_len, job->value_dim};
    if (!same_sizes(key, 4, key_sizes) || !same_sizes(value, 4, value_sizes)
        || job->kv_heads == 0 || job->heads % job->kv_heads != 0) {
        return THError_set(TH_ERR_RUNTIME, "attention: key and value must be (B, Hk, S, E) "
                                           "and (B, Hk, S, Ev) with H a multiple of Hk");
    }
    int64_t mask_sizes[4] = {job->batch, job->heads, job->q_len, job->kv_len};
    if (mask != NULL && (!same_sizes(mask, 4, mask_sizes)
                         || (mask->dtype != TH_Bool && mask->dtype != job->dtype))) {
        return THError_set(TH_ERR_RUNTIME, "attention: the mask must be (B, H, L, S), bool "
                                           "or of the query's dtype");
    }
    job->query = query;
    job->key = key;
    job->value = value;
    job->mask = mask;
    atomic_init(&job->failed, false);
    return 0;
}

static int
check_result(const THTensor *t, const char *what, THDtype dtype, int ndim,
             const int64_t *sizes)
{
    if (t != NULL && (!same_sizes(t, ndim, sizes) || !t->is_contiguous || t->dtype != dtype)) {
        return THError_set(TH_ERR_RUNTIME, "attention: %s must be contiguous, of the "
                                           "query's dtype and shape", what);
    }
    return 0;
}

static int
finish_job(AttentionJob *job)
{
    return atomic_load(&job->failed)
               ? THError_set(TH_ERR_MEMORY, "attention: out of memory for the block buffers")
               : 0;
}

/* Multiply-adds per unit, for THParallel_for's grain. */
static int64_t
grain_for(int64_t work_per_unit)
{
    return 1 + TH_PARALLEL_GRAIN / (work_per_unit + 1);
}

int
THAttention_forward(THTensor *out, THTensor *logsumexp, const THTensor *query,
                    const THTensor *key, const THTensor *value, const THTensor *mask,
                    double scale, bool causal)
{
    AttentionJob job;
    if (begin_job(&job, query, key, value, mask, scale, causal) < 0) {
        return -1;
    }
    int64_t out_sizes[4] = {job.batch, job.heads, job.q_len, job.value_dim};
    if (check_result(out, "out", job.dtype, 4, out_sizes) < 0
        || check_result(logsumexp, "logsumexp", job.dtype, 3, out_sizes) < 0) {
        return -1;
    }
    job.result = out;
    job.logsumexp = logsumexp;
    int64_t units = job.batch * job.heads * query_blocks(&job);
    int64_t work = job.block_q * job.kv_len * (job.head_dim + job.value_dim);
    THParallel_for(units, grain_for(work), forward_units, &job);
    return finish_job(&job);
}

int
THAttention_backward(THTensor *grad_query, THTensor *grad_key, THTensor *grad_value,
                     const THTensor *grad_out, const THTensor *query, const THTensor *key,
                     const THTensor *value, const THTensor *out, const THTensor *logsumexp,
                     const THTensor *mask, double scale, bool causal)
{
    AttentionJob job;
    if (begin_job(&job, query, key, value, mask, scale, causal) < 0) {
        return -1;
    }
    int64_t out_sizes[4] = {job.batch, job.heads, job.q_len, job.value_dim};
    if (!same_sizes(grad_out, 4, out_sizes) || grad_out->dtype != job.dtype) {
        return THError_set(TH_ERR_RUNTIME, "attention: grad_out must match the output");
    }
    if (check_result(out, "out", job.dtype, 4, out_sizes) < 0
        || check_result(logsumexp, "logsumexp", job.dtype, 3, out_sizes) < 0
        || check_result(grad_query, "grad_query", job.dtype, 4, query->sizes) < 0
        || check_result(grad_key, "grad_key", job.dtype, 4, key->sizes) < 0
        || check_result(grad_value, "grad_value", job.dtype, 4, value->sizes) < 0) {
        return -1;
    }
    job.grad_out = grad_out;
    job.out = out;
    job.logsumexp = logsumexp;
    job.grad_query = grad_query;
    job.grad_key = grad_key;
    job.grad_value = grad_value;
    THTensor *grads[3] = {grad_query, grad_key, grad_value};
    for (int i = 0; i < 3; i++) { /* the block loops accumulate into them */
        if (grads[i] != NULL && THTensor_fill(grads[i], THScalar_fromDouble(0.0)) < 0) {
            return -1;
        }
    }
    int64_t group = job.heads / job.kv_heads;
    int64_t work = group * job.q_len * job.kv_len * (2 * job.head_dim + 3 * job.value_dim);
    THParallel_for(job.batch * job.kv_heads, grain_for(work), backward_units, &job);
    return finish_job(&job);
}
