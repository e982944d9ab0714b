/*
 * THConv.c -- 1-, 2- and 3-D convolution through GEMM (Note [Convolution
 * as GEMM] and Note [Three spatial dims, one code path] in THConv.h).
 */
#include "THConv.h"

#include "THBlas.h"
#include "THGeneral.h"
#include "THParallel.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* The floating dtypes a convolution runs in: (Name, ctype). */
#define TH_CONV_DTYPES(_) \
    _(Float32, float)     \
    _(Float64, double)

/* Note [Samples side by side] in THConv.h: one implicit-GEMM product
 * covers enough samples for this many columns, as long as their padded
 * images stay under COLUMN_LIMIT elements (one sample is always allowed). */
#define GATHER_COLUMNS 4096
#define COLUMN_LIMIT ((int64_t)1 << 22)

/* The columns of one sample and one group, for col2im. */
typedef struct {
    const THConvShape *s;
    int64_t out_plane; /* out_d * out_h * out_w: the columns */
    char *image;       /* the sample's group block: channels x in_d x in_h x in_w */
    char *col;         /* (channels * kd * kh * kw) x out_plane */
} ColumnJob;

/* Where one kernel tap (k, i, j) reads: output (z, y, x) reads input
 * (z * stride_d + z_off, y * stride_h + y_off, x * stride_w + x_off), which
 * is on the volume for z in [z_lo, z_hi), y in [y_lo, y_hi) and x in
 * [x_lo, x_hi) and padding elsewhere. */
typedef struct {
    int64_t z_off, y_off, x_off, z_lo, z_hi, y_lo, y_hi, x_lo, x_hi;
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
    t.z_off = tap / (s->kernel_h * s->kernel_w) * s->dilation_d - s->pad_d;
    t.y_off = tap / s->kernel_w % s->kernel_h * s->dilation_h - s->pad_h;
    t.x_off = tap % s->kernel_w * s->dilation_w - s->pad_w;
    valid_span(s->out_d, s->in_d, s->stride_d, t.z_off, &t.z_lo, &t.z_hi);
    valid_span(s->out_h, s->in_h, s->stride_h, t.y_off, &t.y_lo, &t.y_hi);
    valid_span(s->out_w, s->in_w, s->stride_w, t.x_off, &t.x_lo, &t.x_hi);
    return t;
}

/* ---- col2im, one typed copy per dtype ------------------------------------------- */

/* Channels [begin, end) of the image += their column entries.  A thread
 * owns whole channels, so no two threads add to the same element. */
#define TH_DEFINE_COL2IM(Name, ctype)                                       \
    static void col2im_##Name(int64_t begin, int64_t end, void *ctx)       \
    {                                                                       \
        const ColumnJob *job = ctx;                                         \
        const THConvShape *s = job->s;                                      \
        int64_t taps = s->kernel_d * s->kernel_h * s->kernel_w;             \
        for (int64_t c = begin; c < end; c++) {                             \
            ctype *volume = (ctype *)job->image + c * s->in_d * s->in_h * s->in_w; \
            for (int64_t tap = 0; tap < taps; tap++) {                      \
                TapSpan t = tap_span(s, tap);                               \
                const ctype *src =                                          \
                    (const ctype *)job->col + (c * taps + tap) * job->out_plane; \
                for (int64_t z = t.z_lo; z < t.z_hi; z++) {                 \
                    ctype *plane = volume                                   \
                                   + (z * s->stride_d + t.z_off) * s->in_h * s->in_w; \
                    for (int64_t y = t.y_lo; y < t.y_hi; y++) {             \
                        ctype *line = plane + (y * s->stride_h + t.y_off) * s->in_w; \
                        const ctype *from = src + (z * s->out_h + y) * s->out_w; \
                        for (int64_t x = t.x_lo; x < t.x_hi; x++) {         \
                            line[x * s->stride_w + t.x_off] += from[x];     \
                        }                                                   \
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

/* ---- the implicit GEMM's B and C (Note [Convolution as an implicit GEMM]) -------- */

/* The widest B micro-panel of any GEMM family (AVX-512 float32). */
#define GATHER_MAX_NR THBLAS_MAX_NR

/* The forward product of a few samples and one group as a
 * THBlas_gemmGathered: B's column q is output position q of those samples
 * side by side, and its row (c, k, i, j) is their zero-padded images read
 * from tap_offsets[(c, k, i, j)] on (a direct product's rows: tap_offset). */
typedef struct {
    const THConvShape *s;
    int64_t out_plane;          /* out_d * out_h * out_w */
    int64_t out_group;          /* the rows of C */
    int64_t padded_d, padded_h, padded_w; /* in_d + 2 pad_d, ... */
    int64_t padded_image;       /* in_group * padded_d * padded_h * padded_w */
    const int64_t *tap_offsets; /* in_group * kd * kh * kw entries */
    char *padded;               /* the samples' padded images, one after another */
    int64_t columns;            /* samples * out_plane */
    int64_t depth;              /* in_group * kd * kh * kw */
    char *out;                  /* where C goes: the first sample's group block
                                   of the output, or the group's weight gradient */
    const char *bias;           /* the group's first bias value, or NULL */
    bool accumulate;            /* the weight gradient: add C to it */
    int tap_rows;               /* a direct product's row block (MR), or 0 */
    bool paired;                /* its blocks hold two samples' lines (Note
                                   [Two lines in one block] in THBlas.c) */
    int piece;                  /* its positions of one line per block: MR,
                                   or MR / 2 when paired */
    bool edges_in_threes;       /* its k steps come in threes with edges to
                                   skip (Note [Skipping a line's edges] in
                                   THBlas.c): a 3-wide kernel, padding 1 */
    int64_t line_blocks;        /* its pieces per output line */
} GatherJob;

/* [*lo, *hi): the taps t < taps of one kernel dim whose input index
 * at + t * dilation lies in [0, in) (at: the output's first index, padding
 * subtracted). */
static void
valid_taps(int64_t at, int64_t taps, int64_t dilation, int64_t in, int64_t *lo,
           int64_t *hi)
{
    int64_t first = at >= 0 ? 0 : (-at + dilation - 1) / dilation;
    int64_t last = in - 1 - at < 0 ? 0 : (in - 1 - at) / dilation + 1;
    *lo = first < taps ? first : taps;
    *hi = last < *lo ? *lo : last < taps ? last : taps;
}

/* Columns [col, col + len) of B (output positions of the samples side
 * by side) lie on one output line of one sample and read the padded image
 * from offset src on (plus the tap's offset), stride_w elements apart. */
typedef struct {
    int64_t col, len, src;
} LineRun;

/* The line run from column q on, ending by `end` at the latest. */
static LineRun
line_run_at(const GatherJob *job, int64_t q, int64_t end)
{
    const THConvShape *s = job->s;
    int64_t b = q / job->out_plane, r = q % job->out_plane;
    int64_t line = r / s->out_w, x = r % s->out_w;
    int64_t z = line / s->out_h, y = line % s->out_h;
    LineRun run = {q, s->out_w - x < end - q ? s->out_w - x : end - q,
                   b * job->padded_image
                       + (z * s->stride_d * job->padded_h + y * s->stride_h) * job->padded_w
                       + x * s->stride_w};
    return run;
}

/* The line runs of panel columns [j0, j0 + nr) below job->columns, their
 * col counted from j0. */
static int
line_runs(const GatherJob *job, int64_t j0, int nr, LineRun *runs)
{
    int64_t end = j0 + nr < job->columns ? j0 + nr : job->columns;
    int count = 0;
    for (int64_t q = j0; q < end; q += runs[count++].len) {
        runs[count] = line_run_at(job, q, end);
        runs[count].col -= j0;
    }
    return count;
}

/* Panel columns [col, col + len) are sample b's output positions r on. */
typedef struct {
    int64_t col, len, b, r;
} SampleRun;

/* The sample runs of columns [j0, j0 + cols). */
static int
sample_runs(const GatherJob *job, int64_t j0, int64_t cols, SampleRun *runs)
{
    int count = 0;
    for (int64_t q = j0; q < j0 + cols; count++) {
        int64_t b = q / job->out_plane, r = q % job->out_plane;
        int64_t len = job->out_plane - r < j0 + cols - q ? job->out_plane - r : j0 + cols - q;
        runs[count] = (SampleRun){q - j0, len, b, r};
        q += len;
    }
    return count;
}

/* Note [Gathering a panel row by selects]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * With stride_w 1, run r of a micro-panel's row puts the padded line read
 * from tap + src_r on into columns [col_r, col_r + len_r): column q of the
 * row is (tap + src_r - col_r)[q] there.  So a 32-byte chunk of the row
 * that one run covers is one vector load, from tap + src_r - col_r at the
 * chunk's column, and a chunk where runs meet is the first run's load with
 * each later run's loaded over the columns from col_r on, by a select
 * with a mask made once per panel; each chunk is stored once, aligned (the
 * panel is).  Copying each run as a whole row instead stored every row two
 * or three times, unaligned, each store crossing cache lines, and that
 * gather took a quarter of a 32-channel 5x5 convolution's time.  The loads
 * stay inside the padded buffer: successive runs lie on successive output
 * lines, whose padded lines start at least padded_w >= out_w >= len apart,
 * so src_r - col_r >= src_0 >= 0, and no load ends past tap + src_r + nr,
 * within the buffer's nr spare values (gather_buffers).  The chunks move
 * as 4-byte lanes, the same code for float32 and float64.
 *
 * gather_rows walks a chunk (a column of the panel) down all kc rows with
 * its runs and masks fixed, and picks the loop by how many runs meet in it:
 * one (copy_chunks: a load and a store a row), two (merge_chunks: two
 * loads, a select, a store; every such chunk when output lines are at
 * least CHUNK_LANES wide) or more (the general loop over the runs).  The
 * general loop everywhere cost 13 instructions a chunk (callgrind, AVX2
 * clone, 32-channel 5x5); the two special ones bring it to 8. */
typedef int32_t PanelChunk __attribute__((vector_size(32)));
enum { CHUNK_LANES = sizeof(PanelChunk) / 4 };

/* A chunk of rows [0, kc) that one run covers: each row one load, from
 * `from` plus the tap's offset. */
static inline __attribute__((always_inline)) void
copy_chunks(char *to, const char *from, const int64_t *offsets, int64_t kc,
            size_t itemsize, size_t row_bytes)
{
    for (int64_t p = 0; p < kc; p++, to += row_bytes) {
        PanelChunk row;
        memcpy(&row, from + offsets[p] * (int64_t)itemsize, sizeof(row));
        memcpy(to, &row, sizeof(row));
    }
}

/* A chunk of rows [0, kc) where two runs meet (most chunks where any do:
 * runs of a line at least CHUNK_LANES wide): `from`'s load, `also`'s over
 * the lanes of `mask`. */
static inline __attribute__((always_inline)) void
merge_chunks(char *to, const char *from, const char *also, const PanelChunk *mask,
             const int64_t *offsets, int64_t kc, size_t itemsize, size_t row_bytes)
{
    for (int64_t p = 0; p < kc; p++, to += row_bytes) {
        PanelChunk row, run;
        memcpy(&row, from + offsets[p] * (int64_t)itemsize, sizeof(row));
        memcpy(&run, also + offsets[p] * (int64_t)itemsize, sizeof(run));
        row = (run & *mask) | (row & ~*mask);
        memcpy(to, &row, sizeof(row));
    }
}

/* Panel rows [0, kc) of `row_bytes` (a multiple of 32) from the taps at
 * offsets[0, kc) and the line runs. */
static inline __attribute__((always_inline)) void
gather_rows(char *dst, const char *padded, const int64_t *offsets, int64_t kc,
            const LineRun *runs, int count, size_t itemsize, size_t row_bytes)
{
    int64_t first_lane[GATHER_MAX_NR + 1], bases[GATHER_MAX_NR];
    for (int r = 0; r < count; r++) {
        first_lane[r] = runs[r].col * (int64_t)itemsize / 4;
        bases[r] = (runs[r].src - runs[r].col) * (int64_t)itemsize;
    }
    first_lane[count] = INT64_MAX;
    int lo = 0;
    for (int64_t chunk = 0; chunk < (int64_t)(row_bytes / sizeof(PanelChunk)); chunk++) {
        int64_t begin = chunk * CHUNK_LANES, end = begin + CHUNK_LANES;
        while (first_lane[lo + 1] <= begin) {
            lo++; /* the run that covers the chunk's first column */
        }
        int hi = lo;
        PanelChunk masks[GATHER_MAX_NR];
        while (first_lane[hi + 1] < end) {
            hi++;
            for (int lane = 0; lane < CHUNK_LANES; lane++) {
                masks[hi][lane] = begin + lane >= first_lane[hi] ? -1 : 0;
            }
        }
        const char *from = padded + bases[lo] + chunk * (int64_t)sizeof(PanelChunk);
        char *to = dst + chunk * (int64_t)sizeof(PanelChunk);
        if (hi == lo) {
            copy_chunks(to, from, offsets, kc, itemsize, row_bytes);
        } else if (hi == lo + 1) {
            merge_chunks(to, from, padded + bases[hi] + chunk * (int64_t)sizeof(PanelChunk),
                         &masks[hi], offsets, kc, itemsize, row_bytes);
        } else {
            for (int64_t p = 0; p < kc; p++, to += row_bytes) {
                const char *tap = padded + offsets[p] * (int64_t)itemsize;
                PanelChunk row, run;
                memcpy(&row, from + offsets[p] * (int64_t)itemsize, sizeof(row));
                for (int r = lo + 1; r <= hi; r++) {
                    memcpy(&run, tap + bases[r] + chunk * (int64_t)sizeof(PanelChunk),
                           sizeof(run));
                    row = (run & masks[r]) | (row & ~masks[r]);
                }
                memcpy(to, &row, sizeof(row));
            }
        }
    }
}

/* gather_b: rows [p0, p0 + kc) of B's columns [j0, j0 + nr).  With
 * stride_w 1 a row is its line runs' loads merged (Note [Gathering a panel
 * row by selects]) when a row is whole 32-byte chunks (every GEMM
 * family's is); other strides, or another width, one value at a time.
 * Both gathers come in vector clones (Note [Vector clones] in
 * THGeneral.h). */
#define TH_DEFINE_GATHER_B(Name, ctype)                                     \
    TH_VECTOR_CLONES                                                        \
    static void gather_b_##Name(void *ctx, int64_t p0, int64_t kc, int64_t j0, \
                                int nr, char *panel)                        \
    {                                                                       \
        const GatherJob *job = ctx;                                         \
        LineRun runs[GATHER_MAX_NR];                                        \
        int count = line_runs(job, j0, nr, runs);                           \
        int64_t stride = job->s->stride_w;                                  \
        const int64_t *offsets = job->tap_offsets + p0;                     \
        if (stride == 1) {                                                  \
            size_t row_bytes = (size_t)nr * sizeof(ctype);                  \
            if (row_bytes % sizeof(PanelChunk) == 0) {                      \
                gather_rows(panel, job->padded, offsets, kc, runs, count,   \
                            sizeof(ctype), row_bytes);                      \
                return;                                                     \
            }                                                               \
        }                                                                   \
        ctype *dst = (ctype *)panel;                                        \
        for (int64_t p = 0; p < kc; p++, dst += nr) {                       \
            const ctype *tap = (const ctype *)job->padded + offsets[p];     \
            for (int r = 0; r < count; r++) {                               \
                const ctype *src = tap + runs[r].src;                       \
                for (int64_t x = 0; x < runs[r].len; x++) {                 \
                    dst[runs[r].col + x] = src[x * stride];                 \
                }                                                           \
            }                                                               \
        }                                                                   \
    }

/* Note [Prefetching the next panel's output]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * scatter_c writes each C panel's nr columns into out_group output rows a
 * plane apart: every row's stores reach lines that are not in cache, and
 * with one stream per channel the hardware prefetcher does not bring
 * them.  The next panel's columns continue the same rows where this
 * panel's end, so scatter_c asks for those lines (for writing) as it
 * leaves each row, and they arrive while the micro-kernel computes the
 * next panel.  On the 32-channel 5x5 forward (one thread, perf samples
 * against the micro-kernel's) that cut scatter_c's time by about a third,
 * a percent or two of the product.  The lines asked for stay within the
 * row's plane: a row that this panel finishes asks for nothing (the next
 * sample's rows lie elsewhere). */
static inline void
prefetch_for_writing(const char *from, size_t bytes)
{
    for (size_t line = 0; line < bytes; line += 64) {
        __builtin_prefetch(from + line, 1, 3);
    }
    __builtin_prefetch(from + bytes - 1, 1, 3);
}

/* scatter_c: C's columns [j0, j0 + cols) into the NCHW output, the bias
 * added on the way, the next panel's lines asked for (Note [Prefetching
 * the next panel's output]). */
#define TH_DEFINE_SCATTER_C(Name, ctype)                                    \
    static void scatter_c_##Name(void *ctx, int64_t j0, int64_t cols,      \
                                 const char *panel, int nr)                 \
    {                                                                       \
        const GatherJob *job = ctx;                                         \
        SampleRun runs[GATHER_MAX_NR];                                      \
        int count = sample_runs(job, j0, cols, runs);                       \
        for (int64_t o = 0; o < job->out_group; o++) {                      \
            const ctype *row = (const ctype *)panel + o * nr;               \
            ctype bias = job->bias == NULL ? 0 : ((const ctype *)job->bias)[o]; \
            for (int r = 0; r < count; r++) {                               \
                ctype *dst = (ctype *)job->out + runs[r].r                  \
                             + (runs[r].b * job->s->out_channels + o) * job->out_plane; \
                const ctype *src = row + runs[r].col;                       \
                if (job->bias == NULL) {                                    \
                    memcpy(dst, src, (size_t)runs[r].len * sizeof(ctype));  \
                    continue;                                               \
                }                                                           \
                for (int64_t x = 0; x < runs[r].len; x++) {                 \
                    dst[x] = src[x] + bias;                                 \
                }                                                           \
            }                                                               \
            const SampleRun *last = &runs[count - 1];                       \
            int64_t next = last->r + last->len, left = job->out_plane - next; \
            if (left > 0) {                                                 \
                prefetch_for_writing(                                       \
                    (const char *)((ctype *)job->out + next                 \
                                   + (last->b * job->s->out_channels + o) * job->out_plane), \
                    (size_t)(left < nr ? left : nr) * sizeof(ctype));       \
            }                                                               \
        }                                                                   \
    }

/* Note [Transposing the weight gradient's panel]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * The weight gradient's B is the forward's transposed: a panel row is one
 * output position, its nr columns nr taps (c, k, i, j), and tap j's values
 * along a line run lie contiguous in the padded buffer from taps[j] +
 * run.src on (stride_w 1).  So gather_bt moves LANES x LANES blocks (8 x 8
 * float32, 4 x 4 float64: 32-byte vectors): LANES taps' loads of LANES
 * positions each, transposed in registers (transpose_<dtype>, GCC's vector
 * extensions: AVX2 unpacks, shuffles and lane permutes in the x86-64-v3
 * clone, their 16-byte halves in the baseline one), stored as the LANES
 * panel rows' LANES columns, aligned.  No block falls back to one value at
 * a time:
 *   - a run whose length is not a multiple of LANES ends with a block of
 *     fewer positions: it loads all LANES (the reads past the run stay in
 *     the padded buffer: the next line's values, or its GATHER_MAX_NR spare
 *     zeros past the last image) and stores only the run's rows;
 *   - a panel's columns past the last tap (depth not a multiple of nr) read
 *     the last tap again, so every block is whole; what they put in those
 *     columns of B only reaches the same columns of C, which accumulate_c
 *     never reads.
 * The 4x4 blocks of 16-byte vectors this replaced moved each value with
 * twice the loads and stores and a third more shuffles; other strides still
 * go one value at a time. */
typedef float TransposeVec_Float32 __attribute__((vector_size(32)));
typedef double TransposeVec_Float64 __attribute__((vector_size(32)));
typedef int32_t TransposeMask_Float32 __attribute__((vector_size(32)));
typedef int64_t TransposeMask_Float64 __attribute__((vector_size(32)));

/* r[t][l] <- r[l][t] for an 8 x 8 block: pairs of rows interleaved, then
 * pairs of pairs, then the 16-byte halves swapped across. */
static inline __attribute__((always_inline)) void
transpose_Float32(TransposeVec_Float32 r[8])
{
    typedef TransposeMask_Float32 M;
    TransposeVec_Float32 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = __builtin_shuffle(r[i], r[i + 1], (M){0, 8, 1, 9, 4, 12, 5, 13});
        t[i + 1] = __builtin_shuffle(r[i], r[i + 1], (M){2, 10, 3, 11, 6, 14, 7, 15});
    }
    for (int i = 0; i < 8; i += 4) {
        for (int h = 0; h < 2; h++) {
            u[i + 2 * h] = __builtin_shuffle(t[i + h], t[i + h + 2],
                                             (M){0, 1, 8, 9, 4, 5, 12, 13});
            u[i + 2 * h + 1] = __builtin_shuffle(t[i + h], t[i + h + 2],
                                                 (M){2, 3, 10, 11, 6, 7, 14, 15});
        }
    }
    for (int i = 0; i < 4; i++) {
        r[i] = __builtin_shuffle(u[i], u[i + 4], (M){0, 1, 2, 3, 8, 9, 10, 11});
        r[i + 4] = __builtin_shuffle(u[i], u[i + 4], (M){4, 5, 6, 7, 12, 13, 14, 15});
    }
}

/* The same for a 4 x 4 block of doubles. */
static inline __attribute__((always_inline)) void
transpose_Float64(TransposeVec_Float64 r[4])
{
    typedef TransposeMask_Float64 M;
    TransposeVec_Float64 t[4];
    for (int i = 0; i < 4; i += 2) {
        t[i] = __builtin_shuffle(r[i], r[i + 1], (M){0, 4, 2, 6});
        t[i + 1] = __builtin_shuffle(r[i], r[i + 1], (M){1, 5, 3, 7});
    }
    for (int i = 0; i < 2; i++) {
        r[i] = __builtin_shuffle(t[i], t[i + 2], (M){0, 1, 4, 5});
        r[i + 2] = __builtin_shuffle(t[i], t[i + 2], (M){2, 3, 6, 7});
    }
}

/* gather_b of the weight gradient, whose B is the columns transposed:
 * rows [p0, p0 + kc) are output positions, columns [j0, j0 + nr) rows
 * (c, k, i, j) of the forward's B.  With stride_w 1 each line run moves in
 * transposed blocks (Note [Transposing the weight gradient's panel]);
 * other strides one value at a time. */
#define TH_DEFINE_GATHER_BT(Name, ctype)                                    \
    TH_VECTOR_CLONES                                                        \
    static void gather_bt_##Name(void *ctx, int64_t p0, int64_t kc, int64_t j0, \
                                 int nr, char *panel)                       \
    {                                                                       \
        typedef TransposeVec_##Name Vec;                                    \
        enum { LANES = sizeof(Vec) / sizeof(ctype) };                       \
        const GatherJob *job = ctx;                                         \
        int64_t cols = job->depth - j0 < nr ? job->depth - j0 : nr;         \
        bool by_blocks = job->s->stride_w == 1 && nr % LANES == 0;          \
        const ctype *taps[GATHER_MAX_NR];                                   \
        for (int64_t j = 0; j < nr; j++) { /* past the last tap: it again */ \
            taps[j] = (const ctype *)job->padded                            \
                      + job->tap_offsets[j0 + (j < cols ? j : cols - 1)];   \
        }                                                                   \
        for (int64_t q = p0; q < p0 + kc;) {                                \
            LineRun run = line_run_at(job, q, p0 + kc);                     \
            ctype *dst = (ctype *)panel + (q - p0) * nr;                    \
            for (int64_t j = 0; by_blocks && j < nr; j += LANES) {          \
                const ctype *from[LANES];                                   \
                _Pragma("GCC unroll 8")                                     \
                for (int t = 0; t < LANES; t++) {                           \
                    from[t] = taps[j + t] + run.src;                        \
                }                                                           \
                for (int64_t x = 0; x < run.len; x += LANES) {              \
                    Vec r[LANES];                                           \
                    _Pragma("GCC unroll 8")                                 \
                    for (int t = 0; t < LANES; t++) {                       \
                        memcpy(&r[t], from[t] + x, sizeof(Vec));            \
                    }                                                       \
                    transpose_##Name(r);                                    \
                    /* t < rows, not a loop to rows: r stays in registers */ \
                    int64_t rows = run.len - x;                             \
                    _Pragma("GCC unroll 8")                                 \
                    for (int t = 0; t < LANES; t++) {                       \
                        if (t < rows) {                                     \
                            memcpy(dst + (x + t) * nr + j, &r[t], sizeof(Vec)); \
                        }                                                   \
                    }                                                       \
                }                                                           \
            }                                                               \
            for (int64_t j = 0; !by_blocks && j < cols; j++) {              \
                for (int64_t x = 0; x < run.len; x++) {                     \
                    dst[x * nr + j] = taps[j][run.src + x * job->s->stride_w]; \
                }                                                           \
            }                                                               \
            q += run.len;                                                   \
        }                                                                   \
    }

/* scatter_c of the weight gradient: C's columns [j0, j0 + cols) into (or,
 * past the first samples, onto) the group's out_group x depth block. */
#define TH_DEFINE_ACCUMULATE_C(Name, ctype)                                 \
    static void accumulate_c_##Name(void *ctx, int64_t j0, int64_t cols,   \
                                    const char *panel, int nr)              \
    {                                                                       \
        const GatherJob *job = ctx;                                         \
        for (int64_t o = 0; o < job->out_group; o++) {                      \
            ctype *dst = (ctype *)job->out + o * job->depth + j0;           \
            const ctype *src = (const ctype *)panel + o * nr;               \
            for (int64_t x = 0; x < cols; x++) {                            \
                dst[x] = job->accumulate ? dst[x] + src[x] : src[x];        \
            }                                                               \
        }                                                                   \
    }

/* Note [Direct convolution by taps]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * With stride_w 1 the forward can skip the gather altogether: computed
 * transposed, out^T = B^T . W^T, its rows are output positions and its
 * columns output channels, and MR positions along one output line read
 * tap (c, k, i, j) as MR consecutive values of the padded buffer, from
 * that line's offset plus that tap's offset on.  That is a packed A
 * micro-panel's column found through an offset, so THBlas_gemmTapped
 * (Note [GEMM with a tapped A] in THBlas.c) runs the micro-kernel on the
 * padded buffer itself, with the weight transposed and packed once as B.
 * Its k steps, the depth, run kernel rows first, ((k, i), c, j) (the
 * weight arranged to match, Note [Arranging the weight]), so a block
 * skips the kernel rows that read only padding from its output line
 * (Note [Skipping zero taps] in THBlas.c), and under a 3-wide kernel
 * with a width padding of 1, whose taps j = 0, 1, 2 of one kernel row
 * and channel are three steps in a row, the taps that read the padding
 * at a line's ends (Note [Skipping a line's edges] in THBlas.c).
 * The row blocks are each output line cut into MR-position pieces (the
 * last one shorter: its extra rows read on into the padding and are
 * dropped), or, where MR / 2 positions cut the lines with less waste
 * (7-wide lines under AVX-512's 14 rows), MR / 2-position pieces, the
 * same piece of two samples in one block (Note [Two lines in one block]
 * in THBlas.c), and tile_out stores a block's MR x out_group tile
 * transposed into the NCHW output, adding the bias.  direct_rows takes
 * this path when the lines cut into pieces with little waste; the input
 * gradient, a forward convolution (Note [Input gradient as a convolution]
 * in THConv.h), takes it too. */

/* The first output position of row block `block` of a direct product: its
 * column of B (samples side by side), *rows, the block's positions on
 * that line, and *partner, whether its second half holds the same
 * positions of the next sample (job->paired, Note [Two lines in one
 * block] in THBlas.c: block pair by pair; an odd chunk's last sample has
 * none). */
static int64_t
tap_block_column(const GatherJob *job, int64_t block, int *rows, bool *partner)
{
    int64_t out_w = job->s->out_w;
    int64_t line = block / job->line_blocks, x = block % job->line_blocks * job->piece;
    *rows = (int)(out_w - x < job->piece ? out_w - x : job->piece);
    *partner = false;
    if (!job->paired) {
        return line * out_w + x; /* lines run on across the samples */
    }
    int64_t lines = job->out_plane / out_w; /* a sample's */
    int64_t q = (line / lines * 2 * lines + line % lines) * out_w + x;
    *partner = q + job->out_plane < job->columns;
    return q;
}

/* THBlasRowBlock: where the block's first position reads its taps from,
 * its partner's line one padded image further (job->paired), its k
 * steps: the kernel rows (k, i) that reach the volume from its output
 * line (and its partner's), one run as the depth runs kernel rows first (Note
 * [Skipping zero taps] in THBlas.c; its own rows between the first and
 * the last of them, when both k and i are cut, read zeros), and with
 * job->edges_in_threes its rows at the line's ends (Note [Skipping a
 * line's edges] in THBlas.c). */
static int64_t
tap_block_start(void *ctx, int64_t block, THBlasRowSpan *span)
{
    const GatherJob *job = ctx;
    const THConvShape *s = job->s;
    bool partner;
    int64_t q = tap_block_column(job, block, &span->rows, &partner);
    int64_t x = q % s->out_w;
    bool ends_line = x + span->rows == s->out_w && span->rows == job->piece;
    if (job->edges_in_threes) {
        span->edges = (x == 0 ? THBLAS_EDGE_FIRST : 0)
                      | (ends_line && (partner || !job->paired) ? THBLAS_EDGE_LAST : 0)
                      | (partner ? THBLAS_EDGE_HALVES : 0);
    }
    if (partner) { /* its rows from MR / 2 on: the next sample's */
        span->half = job->padded_image;
        span->rows += job->piece;
    }
    int64_t *k_begin = &span->k_begin, *k_end = &span->k_end;
    int64_t line = q % job->out_plane / s->out_w;
    int64_t z = line / s->out_h, y = line % s->out_h, k_lo, k_hi, i_lo, i_hi;
    valid_taps(z * s->stride_d - s->pad_d, s->kernel_d, s->dilation_d, s->in_d, &k_lo, &k_hi);
    valid_taps(y * s->stride_h - s->pad_h, s->kernel_h, s->dilation_h, s->in_h, &i_lo, &i_hi);
    int64_t row_steps = job->depth / (s->kernel_d * s->kernel_h); /* c, j */
    if (k_lo == k_hi || i_lo == i_hi) {
        *k_begin = *k_end = 0;
    } else {
        *k_begin = (k_lo * s->kernel_h + i_lo) * row_steps;
        *k_end = ((k_hi - 1) * s->kernel_h + i_hi) * row_steps;
    }
    return line_run_at(job, q, q + span->rows).src;
}

/* THBlasTileOut: a block's positions (tile rows) x out_group (tile
 * columns) into the NCHW output, transposed, the bias added: LANES x
 * LANES blocks through transpose_<dtype> (Note [Transposing the weight
 * gradient's panel]), rows past the block's repeating its last (never
 * stored), output channels past out_group read from the tile's padding
 * columns (never stored); a paired block's second half (Note [Two lines
 * in one block] in THBlas.c) the same way into its partner's positions.
 * Each block's stores reach out_group lines a plane apart, so it asks
 * for the next block's lines as it leaves, as scatter_c does (Note
 * [Prefetching the next panel's output]). */
#define TH_DEFINE_TILE_OUT(Name, ctype)                                     \
    /* `rows` tile rows from `values` on into positions q on */             \
    TH_VECTOR_CLONES                                                        \
    static void tile_rows_out_##Name(const GatherJob *job, int64_t q, int rows, \
                                     const ctype *values, int64_t ld)       \
    {                                                                       \
        typedef TransposeVec_##Name Vec;                                    \
        enum { LANES = sizeof(Vec) / sizeof(ctype) };                       \
        int64_t b = q / job->out_plane, r = q % job->out_plane;             \
        ctype *out = (ctype *)job->out + b * job->s->out_channels * job->out_plane + r; \
        for (int64_t o = 0; o < job->out_group; o += LANES) {               \
            for (int i = 0; i < rows; i += LANES) {                         \
                Vec v[LANES];                                               \
                _Pragma("GCC unroll 8")                                     \
                for (int t = 0; t < LANES; t++) {                           \
                    int row = i + t < rows ? i + t : rows - 1;              \
                    memcpy(&v[t], values + row * ld + o, sizeof(Vec));      \
                }                                                           \
                transpose_##Name(v);                                        \
                int count = rows - i < LANES ? rows - i : LANES;            \
                _Pragma("GCC unroll 8")                                     \
                for (int t = 0; t < LANES; t++) {                           \
                    if (o + t >= job->out_group) {                          \
                        break;                                              \
                    }                                                       \
                    ctype *dst = out + (o + t) * job->out_plane + i;        \
                    v[t] += job->bias == NULL ? 0 : ((const ctype *)job->bias)[o + t]; \
                    if (count == LANES) {                                   \
                        memcpy(dst, &v[t], sizeof(Vec));                    \
                        continue;                                           \
                    }                                                       \
                    for (int l = 0; l < count; l++) {                       \
                        dst[l] = v[t][l];                                   \
                    }                                                       \
                }                                                           \
            }                                                               \
        }                                                                   \
        int64_t next = r + rows, left = job->out_plane - next;              \
        for (int64_t o = 0; left > 0 && o < job->out_group; o++) {          \
            prefetch_for_writing((const char *)(out + o * job->out_plane + rows), \
                                 (size_t)(left < job->piece ? left : job->piece) \
                                     * sizeof(ctype));                      \
        }                                                                   \
    }                                                                       \
    static void tile_out_##Name(void *ctx, int64_t block, int rows,         \
                                const char *tile, int64_t ld)               \
    {                                                                       \
        const GatherJob *job = ctx;                                         \
        bool partner;                                                       \
        int64_t q = tap_block_column(job, block, &rows, &partner);          \
        tile_rows_out_##Name(job, q, rows, (const ctype *)tile, ld);        \
        if (partner) {                                                      \
            tile_rows_out_##Name(job, q + job->out_plane, rows,             \
                                 (const ctype *)tile + job->piece * ld, ld); \
        }                                                                   \
    }

TH_CONV_DTYPES(TH_DEFINE_COL2IM)
TH_CONV_DTYPES(TH_DEFINE_ADD_ROW)
TH_CONV_DTYPES(TH_DEFINE_GATHER_B)
TH_CONV_DTYPES(TH_DEFINE_SCATTER_C)
TH_CONV_DTYPES(TH_DEFINE_GATHER_BT)
TH_CONV_DTYPES(TH_DEFINE_ACCUMULATE_C)
TH_CONV_DTYPES(TH_DEFINE_TILE_OUT)

/* The typed kernels of one dtype. */
typedef struct {
    THParallelFn col2im;
    void (*add_row)(char *dst, const char *src, int64_t n, const char *value);
    THBlasGatherB gather_b, gather_bt;
    THBlasScatterC scatter_c, accumulate_c;
    THBlasTileOut tile_out;
    THParallelFn pad_channels_last;  /* Note [Weight gradient by taps] */
    THBlasTileOut add_tile;
    THParallelFn arrange_weight;     /* Note [Arranging the weight] */
} ConvKernels;

/* The dtype's kernels, or NULL (defined after the last of them). */
static const ConvKernels *kernels_for(THDtype dtype);

/* ---- shared geometry -------------------------------------------------------------- */

typedef struct {
    THDtype dtype;
    size_t itemsize;
    const ConvKernels *kernels;
    int64_t in_group;    /* in_channels / groups */
    int64_t out_group;   /* out_channels / groups */
    int64_t depth;       /* in_group * kd * kh * kw: the GEMM's inner dim */
    int64_t out_plane;   /* out_d * out_h * out_w: one channel's outputs */
    int64_t in_plane;    /* in_d * in_h * in_w */
    bool direct;         /* 1x1(x1), stride 1, no padding: the input is B */
} ConvPlan;

static ConvPlan
plan_of(const THConvShape *s, THDtype dtype)
{
    ConvPlan p;
    p.dtype = dtype;
    p.itemsize = (size_t)THDtype_itemsize(dtype);
    p.kernels = kernels_for(dtype);
    p.in_group = s->in_channels / s->groups;
    p.out_group = s->out_channels / s->groups;
    p.depth = p.in_group * s->kernel_d * s->kernel_h * s->kernel_w;
    p.out_plane = s->out_d * s->out_h * s->out_w;
    p.in_plane = s->in_d * s->in_h * s->in_w;
    p.direct = s->kernel_d == 1 && s->kernel_h == 1 && s->kernel_w == 1
               && s->stride_d == 1 && s->stride_h == 1 && s->stride_w == 1
               && s->pad_d == 0 && s->pad_h == 0 && s->pad_w == 0;
    return p;
}

static THBlasMatrix
row_major(char *data, int64_t cols)
{
    THBlasMatrix m = {data, cols, 1};
    return m;
}

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

static int
check_dtype(THDtype dtype)
{
    if (kernels_for(dtype) == NULL) {
        return THError_set(TH_ERR_TYPE,
                           "convolution: expected a float32 or float64 tensor");
    }
    return 0;
}

/* ---- the weight gradient by taps' kernels -------------------------------------- */

/* The weight gradient of one group by taps (Note [Weight gradient by
 * taps]). */
typedef struct {
    const ConvPlan *p;
    const THConvShape *s;
    int64_t padded_h, padded_w;
    int64_t padded_count;  /* padded_d * padded_h * padded_w * in_group */
    char *padded;          /* one sample's group block, zero-padded, channels
                              last (+ spare values: rows read past a block's) */
    const char *image;     /* the sample's group block of the input */
    int64_t *positions;    /* per output position: its first input value's
                              offset in padded */
    int64_t *tap_starts;   /* per tap (k, i, j): its offset in padded */
    int rows;              /* the tapped tile's rows (MR) */
    int64_t channel_blocks; /* row blocks per tap: in_group / MR, rounded up */
    char *sums;            /* (tap, c) x out_group: gW[g] transposed */
} TapWeightJob;

/* Note [Weight gradient by taps]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * The weight gradient transposed, gW^T[(tap, c)][o] = sum over positions q
 * of x_padded[c][q + tap] * grad[o][q], is a GEMM whose A (rows (tap, c),
 * columns the positions) is read in place once the padded image is laid
 * out channels last: then the rows c, c + 1, ... of one tap at position q
 * are consecutive values, from q's offset plus the tap's on, which is
 * what THBlas_gemmTapped reads (Note [GEMM with a tapped A] in THBlas.c,
 * with the roles of Note [Direct convolution by taps] swapped: there the
 * positions were the rows and the taps the k steps).  B is the sample's
 * grad transposed (positions x out_group), packed once per sample by the
 * GEMM from the grad itself; add_tile adds each row block's tile into a
 * (tap, c) x out_group sum, which becomes gW once all samples are in.  So
 * nothing is gathered: the gathered GEMM moved every column of B through
 * a transposing gather (Note [Transposing the weight gradient's panel]),
 * and its A through a staging copy; here each sample's image is moved
 * once, channels last (pad_channels_last: LANES x LANES transposes), and
 * its grad once (the GEMM's packing).  The tile's rows are channels, so
 * in_group should be a multiple of the tapped tile's rows, or near one
 * (weight_taps_fit, THBlas_tappedRowsFor picks the narrow tile for 32 or
 * 128 channels).  A row block's k steps are positions, a tap's outputs
 * line by line, so the lines whose reads of that tap fall in the padding
 * are a run at each end, skipped (Note [Skipping zero taps] in
 * THBlas.c). */

/* [*begin, *end): the output positions whose reads of tap `tap` can be
 * on the volume, the lines from the first such line to the last (Note
 * [Skipping zero taps] in THBlas.c); the others read padding. */
static void
tap_weight_positions(const THConvShape *s, int64_t tap, int64_t *begin, int64_t *end)
{
    TapSpan t = tap_span(s, tap);
    if (t.z_lo == t.z_hi || t.y_lo == t.y_hi || t.x_lo == t.x_hi) {
        *begin = *end = 0;
        return;
    }
    *begin = (t.z_lo * s->out_h + t.y_lo) * s->out_w;
    *end = ((t.z_hi - 1) * s->out_h + t.y_hi) * s->out_w;
}

/* The first row of the sums, (tap, c), that row block `block` adds to:
 * blocks run the channel blocks of one tap, then of the next. */
static inline int64_t
tap_weight_sum_row(const TapWeightJob *job, int64_t block)
{
    int64_t tap = block / job->channel_blocks;
    return tap * job->p->in_group + block % job->channel_blocks * job->rows;
}

/* THBlasRowBlock of the weight gradient by taps: block (tap, channel
 * block) starts at the tap's offset plus its first channel. */
static int64_t
tap_weight_block_start(void *ctx, int64_t block, THBlasRowSpan *span)
{
    const TapWeightJob *job = ctx;
    int64_t tap = block / job->channel_blocks;
    int64_t c = block % job->channel_blocks * job->rows;
    span->rows = (int)(job->p->in_group - c < job->rows ? job->p->in_group - c : job->rows);
    tap_weight_positions(job->s, tap, &span->k_begin, &span->k_end);
    return job->tap_starts[tap] + c;
}

/* One sample's group block into the interior of the channels-last padded
 * buffer: lines [begin, end) of in_d x in_h, LANES channels x LANES
 * positions at a time through transpose_<dtype>, the rest one value at a
 * time.  LANES channels at a time go through all the lines: reading them
 * line by line across all the channels at once walked as many planes as
 * there are channels, too many streams for the prefetchers (128 channels:
 * the transposes took 3.2% of the product, 1.6% this way). */
#define TH_DEFINE_PAD_CHANNELS_LAST(Name, ctype)                            \
    TH_VECTOR_CLONES                                                        \
    static void pad_channels_last_##Name(int64_t begin, int64_t end, void *ctx) \
    {                                                                       \
        typedef TransposeVec_##Name Vec;                                    \
        enum { LANES = sizeof(Vec) / sizeof(ctype) };                       \
        const TapWeightJob *job = ctx;                                      \
        const THConvShape *s = job->s;                                      \
        int64_t channels = job->p->in_group, width = s->in_w;               \
        int64_t plane = job->p->in_plane;                                   \
        for (int64_t c = 0; c < channels; c += LANES) {                     \
            for (int64_t line = begin; line < end; line++) {                \
                int64_t z = line / s->in_h, y = line % s->in_h;             \
                const ctype *src = (const ctype *)job->image + c * plane + line * width; \
                ctype *dst = (ctype *)job->padded + c                       \
                             + (((z + s->pad_d) * job->padded_h + y + s->pad_h) \
                                    * job->padded_w + s->pad_w) * channels; \
                if (channels - c < LANES) { /* the last few channels */     \
                    for (int64_t t = 0; t < channels - c; t++) {            \
                        for (int64_t x = 0; x < width; x++) {               \
                            dst[x * channels + t] = src[t * plane + x];     \
                        }                                                   \
                    }                                                       \
                    continue;                                               \
                }                                                           \
                int64_t x = 0;                                              \
                for (; x + LANES <= width; x += LANES) {                    \
                    Vec r[LANES];                                           \
                    _Pragma("GCC unroll 8")                                 \
                    for (int t = 0; t < LANES; t++) {                       \
                        memcpy(&r[t], src + t * plane + x, sizeof(Vec));    \
                    }                                                       \
                    transpose_##Name(r);                                    \
                    _Pragma("GCC unroll 8")                                 \
                    for (int t = 0; t < LANES; t++) {                       \
                        memcpy(dst + (x + t) * channels, &r[t], sizeof(Vec)); \
                    }                                                       \
                }                                                           \
                for (; x < width; x++) {                                    \
                    for (int t = 0; t < LANES; t++) {                       \
                        dst[x * channels + t] = src[t * plane + x];         \
                    }                                                       \
                }                                                           \
            }                                                               \
        }                                                                   \
    }

/* THBlasTileOut of the weight gradient by taps: a row block's rows (tap,
 * c), ..., (tap, c + rows - 1) added into the sums.  The sums outgrow L1
 * (128 channels of 3x3: 590K), and each block's rows come from L2 or
 * beyond, so it asks for the next block's rows (the next one its thread
 * runs, most often) as it leaves, as scatter_c does (Note [Prefetching
 * the next panel's output]): they arrive while the micro-kernel runs. */
#define TH_DEFINE_ADD_TILE(Name, ctype)                                     \
    static void add_tile_##Name(void *ctx, int64_t block, int rows,         \
                                const char *tile, int64_t ld)               \
    {                                                                       \
        const TapWeightJob *job = ctx;                                      \
        int64_t out_group = job->p->out_group;                              \
        ctype *sums = (ctype *)job->sums                                    \
                      + tap_weight_sum_row(job, block) * out_group;         \
        for (int i = 0; i < rows; i++) {                                    \
            ctype *dst = sums + i * out_group;                              \
            const ctype *src = (const ctype *)tile + i * ld;                \
            for (int64_t o = 0; o < out_group; o++) {                       \
                dst[o] += src[o];                                           \
            }                                                               \
        }                                                                   \
        int64_t blocks = job->channel_blocks * job->s->kernel_d             \
                         * job->s->kernel_h * job->s->kernel_w;             \
        if (block + 1 < blocks) {                                           \
            THBlasRowSpan next;                                             \
            tap_weight_block_start(ctx, block + 1, &next);                  \
            prefetch_for_writing(                                           \
                (const char *)((ctype *)job->sums                           \
                               + tap_weight_sum_row(job, block + 1) * out_group), \
                (size_t)(next.rows * out_group) * sizeof(ctype));           \
        }                                                                   \
    }

/* Note [Arranging the weight]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * The products read the weight W[g, o][c][tap] as it is, except in two
 * cases that need a copy: the input gradient's convolution, whose weight
 * is the layer's flipped, W'[g, c][o][tap] = W[g, o][c][taps - 1 - tap]
 * (Note [Input gradient as a convolution] in THConv.h), and a direct
 * product, whose depth runs kernel rows first, ((k, i), c, j), so that the
 * kernel rows a block's output line reaches are one run of its k steps
 * (Note [Skipping zero taps] in THBlas.c).  arrange_weight makes both at
 * once, reading the layer's weight in order: a flip writes each run of
 * taps it reads to another row of the result, and the next row it reads
 * writes next to those runs, so the lines being written stay in cache
 * (512 channels of 3x3: 9.4M, about 3% of the input gradient, what
 * reading and writing it costs; 16 x 16 channel tiles ran no faster).
 * Its buffer is kept across calls (Note [Work buffers kept across
 * calls]): freed, its pages were faulted in anew each call. */

typedef struct {
    const THConvShape *s; /* the convolution the weight is for */
    int64_t out_group, in_group, taps;
    const char *weight;   /* its own, or with flip the layer's */
    char *arranged;       /* groups * out_group rows of in_group * taps */
    bool flip, rows_first;
} ArrangeJob;

/* Rows [begin, end) of the weight read, (g, first index), each a run of
 * runs of taps: (o, c) for its own weight, (c, o) with flip.  The job's
 * fields are read into locals once: the stores would otherwise reload
 * them (the extension builds with -fno-strict-aliasing). */
#define TH_DEFINE_ARRANGE_WEIGHT(Name, ctype)                               \
    static void arrange_weight_##Name(int64_t begin, int64_t end, void *ctx) \
    {                                                                       \
        const ArrangeJob *job = ctx;                                        \
        const int64_t outs = job->out_group, ins = job->in_group, taps = job->taps; \
        const int64_t width = job->s->kernel_w, rows = taps / width;        \
        const bool flip = job->flip;                                        \
        /* kernel row r's values: ins * width apart, or one run */          \
        const int64_t run = job->rows_first ? ins * width : width;          \
        const int64_t channel = job->rows_first ? width : taps;             \
        const int64_t firsts = flip ? ins : outs, seconds = flip ? outs : ins; \
        ctype *arranged = (ctype *)job->arranged;                           \
        for (int64_t row = begin; row < end; row++) {                       \
            const ctype *src = (const ctype *)job->weight + row * seconds * taps; \
            int64_t g = row / firsts, first = row % firsts;                 \
            for (int64_t second = 0; second < seconds; second++, src += taps) { \
                int64_t o = flip ? second : first, c = flip ? first : second; \
                ctype *dst = arranged + (g * outs + o) * ins * taps + c * channel; \
                if (run == width && flip) { /* the taps reversed, one run */ \
                    for (int64_t tap = 0; tap < taps; tap++) {              \
                        dst[tap] = src[taps - 1 - tap];                     \
                    }                                                       \
                    continue;                                               \
                }                                                           \
                for (int64_t r = 0; r < rows; r++) {                        \
                    for (int64_t j = 0; j < width; j++) {                   \
                        int64_t tap = r * width + j;                        \
                        dst[r * run + j] = src[flip ? taps - 1 - tap : tap]; \
                    }                                                       \
                }                                                           \
            }                                                               \
        }                                                                   \
    }

TH_CONV_DTYPES(TH_DEFINE_PAD_CHANNELS_LAST)
TH_CONV_DTYPES(TH_DEFINE_ADD_TILE)
TH_CONV_DTYPES(TH_DEFINE_ARRANGE_WEIGHT)

static const ConvKernels *
kernels_for(THDtype dtype)
{
#define TH_KERNELS_ENTRY(Name, ctype) \
    static const ConvKernels kernels_##Name = {col2im_##Name, add_row_##Name, \
                                               gather_b_##Name, gather_bt_##Name, \
                                               scatter_c_##Name, accumulate_c_##Name, \
                                               tile_out_##Name, pad_channels_last_##Name, \
                                               add_tile_##Name, arrange_weight_##Name};
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

/* ---- the three products -------------------------------------------------------- */

/* Where sample n's group g starts: in the image-side operand (N x C_in x
 * in_plane: input or grad_input), the output-side one (N x C_out x
 * out_plane: output or grad_output) and the weight (or its gradient). */
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

/* 1x1, stride 1, no padding: each sample's input block already is B. */
static int
forward_direct(const ConvPlan *p, const THConvShape *s, char *input, char *weight,
               const char *bias, char *output)
{
    THScalar one = THScalar_fromDouble(1.0), zero = THScalar_fromDouble(0.0);
    int rc = 0;
    for (int64_t n = 0; n < s->batch && rc == 0; n++) {
        for (int64_t g = 0; g < s->groups && rc == 0; g++) {
            GroupBlock b = group_block(p, s, n, g, input, output, weight);
            rc = THBlas_gemm(p->dtype, p->out_group, p->out_plane, p->depth, one,
                             row_major(b.weight, p->depth),
                             row_major(b.image, p->out_plane), zero,
                             row_major(b.out, p->out_plane));
            for (int64_t o = 0; rc == 0 && bias != NULL && o < p->out_group; o++) {
                char *row = out_row(p, s, b.out, 0, o);
                p->kernels->add_row(row, row, p->out_plane,
                                    bias + (g * p->out_group + o) * p->itemsize);
            }
        }
    }
    return rc;
}

/* ---- buffers kept across calls (Note [Work buffers kept across calls]) ---------- */

/* Note [Work buffers kept across calls]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * The padded images and the weight gradient's staging block are a
 * megabyte or two on small layers.  Given back to malloc at the end of
 * every call, they reach the top of glibc's heap, which returns what
 * comes back beyond its trim threshold to the system, so the next call
 * faulted every page in again: the 32-channel 5x5 weight gradient took
 * 453 page faults a call (perf stat -e page-faults).  So each thread
 * keeps up to KEPT_BLOCKS such blocks of at most KEPT_BYTES for its next
 * call: take_buffer hands out the smallest kept block that is large
 * enough (taking it out of the thread's slots: a call owns it alone) or
 * a new one, and give_back_buffer keeps it, in an empty slot or in place
 * of a smaller block (freed), else frees it.  A thread's kept blocks are
 * freed when it ends (the key's destructor), the main thread's at exit. */
#define KEPT_BLOCKS 2
#define KEPT_BYTES ((size_t)16 << 20)

typedef struct {
    size_t bytes;
    max_align_t data[]; /* what take_buffer hands out */
} KeptBlock;

typedef struct {
    KeptBlock *blocks[KEPT_BLOCKS]; /* NULL: an empty slot */
} KeptBlocks;

static pthread_key_t kept_key;
static pthread_once_t kept_once = PTHREAD_ONCE_INIT;
static bool kept_available; /* the key and the exit handler are set up */

static void
free_kept(void *ctx)
{
    KeptBlocks *kept = ctx;
    for (int i = 0; i < KEPT_BLOCKS; i++) {
        free(kept->blocks[i]);
    }
    free(kept);
}

/* At exit: the exiting (main) thread's blocks; key destructors do not
 * run for it. */
static void
free_exiting_thread_kept(void)
{
    KeptBlocks *kept = pthread_getspecific(kept_key);
    if (kept != NULL) {
        pthread_setspecific(kept_key, NULL);
        free_kept(kept);
    }
}

static void
kept_init(void)
{
    kept_available = pthread_key_create(&kept_key, free_kept) == 0
                     && atexit(free_exiting_thread_kept) == 0;
}

/* This thread's slots, made on first use when `make`; NULL without. */
static KeptBlocks *
thread_kept(bool make)
{
    pthread_once(&kept_once, kept_init);
    if (!kept_available) {
        return NULL;
    }
    KeptBlocks *kept = pthread_getspecific(kept_key);
    if (kept == NULL && make) {
        kept = calloc(1, sizeof(*kept));
        if (kept != NULL && pthread_setspecific(kept_key, kept) != 0) {
            free(kept);
            kept = NULL;
        }
    }
    return kept;
}

/* A buffer of rows x cols items of itemsize bytes for this call
 * (uninitialized); NULL with a MemoryError-kind error. */
static void *
take_buffer(int64_t rows, int64_t cols, size_t itemsize, const char *what)
{
    int64_t count;
    size_t bytes;
    if (TH_mul_overflows(rows, cols, &count) || !TH_arrayNbytes(count, itemsize, &bytes)
        || bytes > SIZE_MAX - sizeof(KeptBlock)) {
        THError_set(TH_ERR_MEMORY, "convolution: %s too large", what);
        return NULL;
    }
    KeptBlocks *kept = thread_kept(false);
    int best = -1;
    for (int i = 0; kept != NULL && i < KEPT_BLOCKS; i++) {
        KeptBlock *block = kept->blocks[i];
        if (block != NULL && block->bytes >= bytes
            && (best < 0 || block->bytes < kept->blocks[best]->bytes)) {
            best = i;
        }
    }
    if (best >= 0) {
        KeptBlock *block = kept->blocks[best];
        kept->blocks[best] = NULL;
        return block->data;
    }
    KeptBlock *block = malloc(sizeof(KeptBlock) + bytes);
    if (block == NULL) {
        THError_set(TH_ERR_MEMORY, "convolution: out of memory for %s", what);
        return NULL;
    }
    block->bytes = bytes;
    return block->data;
}

/* Ends this call's use of a take_buffer block (NULL: none). */
static void
give_back_buffer(void *data)
{
    if (data == NULL) {
        return;
    }
    KeptBlock *block = (KeptBlock *)((char *)data - offsetof(KeptBlock, data));
    KeptBlocks *kept = block->bytes <= KEPT_BYTES ? thread_kept(true) : NULL;
    if (kept == NULL) {
        free(block);
        return;
    }
    int slot = 0; /* an empty one, else the smallest */
    for (int i = 0; i < KEPT_BLOCKS; i++) {
        if (kept->blocks[i] == NULL) {
            slot = i;
            break;
        }
        if (kept->blocks[i]->bytes < kept->blocks[slot]->bytes) {
            slot = i;
        }
    }
    if (kept->blocks[slot] != NULL && kept->blocks[slot]->bytes >= block->bytes) {
        free(block); /* the kept ones are all larger */
        return;
    }
    free(kept->blocks[slot]);
    kept->blocks[slot] = block;
}

/* Copies samples' group blocks into the interiors of their zero-padded
 * images: planes [begin, end) of images x in_group. */
typedef struct {
    const ConvPlan *p;
    const THConvShape *s;
    const GatherJob *gather;
    const char *image; /* the first sample's group block of the input */
} PadJob;

static void
pad_planes(int64_t begin, int64_t end, void *ctx)
{
    const PadJob *job = ctx;
    const THConvShape *s = job->s;
    const GatherJob *gather = job->gather;
    size_t line = (size_t)s->in_w * job->p->itemsize;
    for (int64_t t = begin; t < end; t++) {
        int64_t b = t / job->p->in_group, c = t % job->p->in_group;
        const char *src = job->image
                          + (b * s->in_channels + c) * job->p->in_plane * job->p->itemsize;
        char *dst = gather->padded
                    + (((t * gather->padded_d + s->pad_d) * gather->padded_h + s->pad_h)
                           * gather->padded_w + s->pad_w) * job->p->itemsize;
        for (int64_t z = 0; z < s->in_d; z++) {
            for (int64_t y = 0; y < s->in_h; y++) {
                memcpy(dst + (z * gather->padded_h + y) * gather->padded_w * job->p->itemsize,
                       src + (z * s->in_h + y) * line, line);
            }
        }
    }
}

/* Samples whose padded images one product covers: enough for about
 * GATHER_COLUMNS columns, within COLUMN_LIMIT elements. */
static int64_t
gathered_images(const ConvPlan *p, const THConvShape *s, int64_t padded_image)
{
    int64_t wanted = (GATHER_COLUMNS + p->out_plane - 1) / p->out_plane;
    int64_t fit = COLUMN_LIMIT / (padded_image > 0 ? padded_image : 1);
    int64_t images = wanted < fit ? wanted : fit;
    images = images < s->batch ? images : s->batch;
    return images > 1 ? images : 1;
}

/* Where depth row `row` reads, from its output's first value in the
 * padded images: rows (c, k, i, j), or with job->tap_rows (a direct
 * product) kernel rows first, ((k, i), c, j) (Note [Skipping zero taps]
 * in THBlas.c). */
static int64_t
tap_offset(const THConvShape *s, const GatherJob *job, int64_t in_group, int64_t row)
{
    int64_t c, k, i, j = row % s->kernel_w;
    if (job->tap_rows == 0) {
        int64_t taps = s->kernel_d * s->kernel_h * s->kernel_w;
        c = row / taps;
        k = row % taps / (s->kernel_h * s->kernel_w);
        i = row / s->kernel_w % s->kernel_h;
    } else {
        int64_t kernel_row = row / (s->kernel_w * in_group);
        c = row / s->kernel_w % in_group;
        k = kernel_row / s->kernel_h;
        i = kernel_row % s->kernel_h;
    }
    return ((c * job->padded_d + k * s->dilation_d) * job->padded_h + i * s->dilation_h)
               * job->padded_w
           + j * s->dilation_w;
}

/* The padded images' buffer (zeroed: the pads are never written again)
 * and the tap offsets; -1 with an error when out of memory. */
static int
gather_buffers(const ConvPlan *p, const THConvShape *s, GatherJob *job, int64_t images)
{
    int64_t count;
    job->padded = NULL;
    job->tap_offsets = NULL;
    if (TH_mul_overflows(images, job->padded_image, &count)
        || count > INT64_MAX - GATHER_MAX_NR) {
        return THError_set(TH_ERR_MEMORY, "convolution: the padded input is too large");
    }
    count += GATHER_MAX_NR; /* read past the last run: gather_b */
    /* Note [Work buffers kept across calls] */
    job->padded = take_buffer(count, 1, p->itemsize, "the padded input");
    int64_t *offsets = TH_mallocArray(p->depth, sizeof(int64_t), "the convolution's taps");
    if (job->padded == NULL || offsets == NULL) {
        give_back_buffer(job->padded);
        free(offsets);
        return -1;
    }
    memset(job->padded, 0, (size_t)count * p->itemsize);
    for (int64_t row = 0; row < p->depth; row++) {
        offsets[row] = tap_offset(s, job, p->in_group, row);
    }
    job->tap_offsets = offsets;
    return 0;
}

/* The padded buffer's shape, the samples it holds (*chunk) and the
 * buffers of Note [Convolution as an implicit GEMM], for a direct product
 * of tap_rows-row blocks (`paired`: two samples' lines in each) or
 * (tap_rows 0) a gathered one; -1 with an error. */
static int
gather_setup(const ConvPlan *p, const THConvShape *s, GatherJob *job, int tap_rows,
             bool paired, int64_t *chunk)
{
    *job = (GatherJob){.s = s, .out_plane = p->out_plane, .out_group = p->out_group,
                       .depth = p->depth, .tap_rows = tap_rows, .paired = paired,
                       .piece = paired ? tap_rows / 2 : tap_rows};
    if (tap_rows > 0) {
        job->line_blocks = (s->out_w + job->piece - 1) / job->piece;
        /* kernel rows first, ((k, i), c, j): j = 0, 1, 2 read x - 1, x, x + 1 */
        job->edges_in_threes = s->kernel_w == 3 && s->dilation_w == 1 && s->pad_w == 1;
    }
    job->padded_d = s->in_d + 2 * s->pad_d;
    job->padded_h = s->in_h + 2 * s->pad_h;
    job->padded_w = s->in_w + 2 * s->pad_w;
    int64_t padded_plane, padded_volume;
    if (TH_mul_overflows(job->padded_h, job->padded_w, &padded_plane)
        || TH_mul_overflows(job->padded_d, padded_plane, &padded_volume)
        || TH_mul_overflows(p->in_group, padded_volume, &job->padded_image)) {
        return THError_set(TH_ERR_MEMORY, "convolution: the padded input is too large");
    }
    *chunk = gathered_images(p, s, job->padded_image);
    return gather_buffers(p, s, job, *chunk);
}

static void
gather_free(GatherJob *job)
{
    give_back_buffer(job->padded);
    free((void *)job->tap_offsets);
}

/* Copies `images` samples' group blocks (from `image` on) into the padded
 * buffer and sets the product's columns. */
static void
gather_images(const ConvPlan *p, const THConvShape *s, GatherJob *job, const char *image,
              int64_t images)
{
    PadJob pad = {p, s, job, image};
    THParallel_for(images * p->in_group, 1 + TH_PARALLEL_GRAIN / (p->in_plane + 1),
                   pad_planes, &pad);
    job->columns = images * p->out_plane;
}

/* The rows (MR) of a direct product's blocks (Note [Direct convolution by
 * taps]), or 0 where the forward gathers: stride_w 1, some output, and
 * lines that MR-blocks, or with *paired MR / 2-position pieces of two
 * samples (Note [Two lines in one block] in THBlas.c; more than one
 * sample, and fewer positions covered so), cover with at most an eighth
 * more positions.  The
 * weight may outgrow L2: B's panels then stream from L3, two
 * multiply-adds per value and row of the block, which the Zen 4 keeps up
 * with; one thread, thread CPU time, batch 32, 3x3, against the gathered
 * GEMM (that gathers every panel and computes the padding's zeros): 256
 * channels at 14x14 70.7 -> 66.0 ms, 28x28 289 -> 272, 56x56 1190 ->
 * 1129, 512 at 14x14 298 -> 278.  At 7x7 (512 channels) the 8-row tile
 * ran 2% slower than gathering: its eighth row is idle; paired 7-position
 * pieces under the 14-row tile ran the forward 72.6-76.5 -> 66.3-70.6 ms
 * and the input gradient 78.3-78.7 -> 69.0-69.4 (alternating builds,
 * load 6-7 on two cores; torch 58-62 each). */
static int
direct_rows(const ConvPlan *p, const THConvShape *s, bool *paired)
{
    *paired = false;
    if (s->stride_w != 1 || p->out_plane == 0) {
        return 0;
    }
    int rows = THBlas_tappedRows(p->dtype), half = rows / 2;
    int64_t covered = (s->out_w + rows - 1) / rows * rows;
    int64_t covered_by_halves = (s->out_w + half - 1) / half * half;
    if (s->batch > 1 && covered_by_halves < covered) {
        covered = covered_by_halves;
        *paired = true;
    }
    if (covered * 8 > s->out_w * 9) {
        *paired = false;
        return 0;
    }
    return rows;
}

/* out[samples, g] = W[g] . B (+ bias) as one implicit GEMM of `images`
 * samples, or directly by taps. */
static int
forward_product(const ConvPlan *p, const THConvShape *s, GatherJob *job, char *weight,
                int64_t images)
{
    THBlasMatrix w = row_major(weight, p->depth);
    if (job->tap_rows == 0) {
        return THBlas_gemmGathered(p->dtype, p->out_group, job->columns, p->depth, w,
                                   p->kernels->gather_b, p->kernels->scatter_c, job);
    }
    int64_t samples = job->paired ? (images + 1) / 2 : images; /* per block */
    int64_t blocks = samples * (p->out_plane / s->out_w) * job->line_blocks;
    return THBlas_gemmTapped(p->dtype, job->tap_rows, blocks, p->out_group, p->depth,
                             job->padded,
                             job->tap_offsets, THBlasMatrix_transposed(w),
                             tap_block_start, p->kernels->tile_out, job);
}

/* The weight of the convolution s, arranged (Note [Arranging the
 * weight]): flipped from the layer's when `flip`, kernel rows first when
 * `rows_first`; NULL with an error when out of memory. */
static char *
arranged_weight(const ConvPlan *p, const THConvShape *s, const char *weight, bool flip,
                bool rows_first)
{
    int64_t taps = s->kernel_d * s->kernel_h * s->kernel_w;
    /* Note [Work buffers kept across calls] */
    char *arranged = take_buffer(s->groups * p->out_group, p->depth, p->itemsize,
                                 "the convolution's arranged weight");
    if (arranged == NULL) {
        return NULL;
    }
    ArrangeJob job = {s, p->out_group, p->in_group, taps, weight, arranged, flip,
                      rows_first};
    int64_t rows = s->groups * (flip ? p->in_group : p->out_group);
    /* (no rows: a layer without channels on the arranged side) */
    int64_t per_row = rows > 0 ? s->groups * p->out_group * p->depth / rows : 0;
    THParallel_for(rows, 1 + TH_PARALLEL_GRAIN / (per_row + 1),
                   p->kernels->arrange_weight, &job);
    return arranged;
}

/* out[samples, g] = W[g] . B (+ bias), a chunk of samples at a time
 * (weight: arranged for a direct product, Note [Arranging the weight]). */
static int
forward_gathered(const ConvPlan *p, const THConvShape *s, char *input, char *weight,
                 const char *bias, char *output)
{
    GatherJob job;
    int64_t chunk;
    bool paired;
    int rows = direct_rows(p, s, &paired);
    if (gather_setup(p, s, &job, rows, paired, &chunk) < 0) {
        return -1;
    }
    int rc = 0;
    for (int64_t n = 0; n < s->batch && rc == 0; n += chunk) {
        int64_t images = s->batch - n < chunk ? s->batch - n : chunk;
        for (int64_t g = 0; g < s->groups && rc == 0; g++) {
            GroupBlock b = group_block(p, s, n, g, input, output, weight);
            gather_images(p, s, &job, b.image, images);
            job.out = b.out;
            job.bias = bias == NULL ? NULL : bias + g * p->out_group * p->itemsize;
            rc = forward_product(p, s, &job, b.weight, images);
        }
    }
    gather_free(&job);
    return rc;
}

/* The forward product on raw operands (bias may be NULL); with `flip`
 * the weight is the layer's whose input gradient this convolution is
 * (Note [Arranging the weight]). */
static int
forward_products(const THConvShape *s, THDtype dtype, char *input, char *weight,
                 bool flip, const char *bias, char *output)
{
    if (check_dtype(dtype) < 0) {
        return -1;
    }
    ConvPlan p = plan_of(s, dtype);
    bool paired;
    bool rows_first = !p.direct && direct_rows(&p, s, &paired) > 0;
    char *arranged = NULL;
    if (flip || rows_first) {
        arranged = arranged_weight(&p, s, weight, flip, rows_first);
        if (arranged == NULL) {
            return -1;
        }
        weight = arranged;
    }
    int rc = p.direct ? forward_direct(&p, s, input, weight, bias, output)
                      : forward_gathered(&p, s, input, weight, bias, output);
    give_back_buffer(arranged);
    return rc;
}

int
THConv_forward(THTensor *output, const THTensor *input, const THTensor *weight,
               const THTensor *bias, const THConvShape *s)
{
    return forward_products(s, input->dtype, THTensor_data(input),
                            THTensor_data(weight), false,
                            bias == NULL ? NULL : THTensor_data(bias),
                            THTensor_data(output));
}

/* Note [Input gradient as a convolution] in THConv.h: with stride 1 and
 * pad <= dilation * (kernel - 1) in every dim. */
static bool
input_grad_is_a_convolution(const THConvShape *s)
{
    return s->stride_d == 1 && s->stride_h == 1 && s->stride_w == 1
           && s->pad_d <= s->dilation_d * (s->kernel_d - 1)
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
    t.in_d = s->out_d;
    t.in_h = s->out_h;
    t.in_w = s->out_w;
    t.out_d = s->in_d;
    t.out_h = s->in_h;
    t.out_w = s->in_w;
    t.pad_d = s->dilation_d * (s->kernel_d - 1) - s->pad_d;
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

static int
backward_input_as_convolution(THTensor *grad_input, const THTensor *grad_output,
                              const THTensor *weight, const THConvShape *s)
{
    THConvShape t = input_grad_shape(s);
    return forward_products(&t, grad_output->dtype, THTensor_data(grad_output),
                            THTensor_data(weight), true, NULL, THTensor_data(grad_input));
}

/* One sample at a time: col = W[g]^T . grad_out[n, g], then col2im. */
static int
backward_input_by_columns(THTensor *grad_input, const THTensor *grad_output,
                          const THTensor *weight, const THConvShape *s)
{
    ConvPlan p = plan_of(s, grad_output->dtype);
    char *col = alloc_matrix(&p, p.depth, p.out_plane, "the convolution's column buffer");
    if (col == NULL) {
        return -1;
    }
    THScalar one = THScalar_fromDouble(1.0), zero = THScalar_fromDouble(0.0);
    /* col2im adds into it */
    memset(THTensor_data(grad_input), 0, (size_t)grad_input->numel * p.itemsize);
    int rc = 0;
    for (int64_t n = 0; n < s->batch && rc == 0; n++) {
        for (int64_t g = 0; g < s->groups && rc == 0; g++) {
            GroupBlock b = group_block(&p, s, n, g, THTensor_data(grad_input),
                                       THTensor_data(grad_output), THTensor_data(weight));
            /* col (depth x out_plane) = W[g]^T . grad_out[n, g] */
            rc = THBlas_gemm(p.dtype, p.depth, p.out_plane, p.out_group, one,
                             THBlasMatrix_transposed(row_major(b.weight, p.depth)),
                             row_major(b.out, p.out_plane), zero,
                             row_major(col, p.out_plane));
            if (rc == 0) {
                ColumnJob job = {s, p.out_plane, b.image, col};
                THParallel_for(p.in_group, 1, p.kernels->col2im, &job);
            }
        }
    }
    free(col);
    return rc;
}

int
THConv_backwardInput(THTensor *grad_input, const THTensor *grad_output,
                     const THTensor *weight, const THConvShape *s)
{
    if (check_dtype(grad_output->dtype) < 0) {
        return -1;
    }
    if (input_grad_is_a_convolution(s)) {
        return backward_input_as_convolution(grad_input, grad_output, weight, s);
    }
    return backward_input_by_columns(grad_input, grad_output, weight, s);
}

/* Whether the weight gradient runs by taps (Note [Weight gradient by
 * taps]): the tapped tile's rows pad in_group by at most an eighth, each
 * sample has enough positions to amortize its packed grad and the tile
 * sums (an output plane of at least WEIGHT_TAPS_MIN_PLANE), and that
 * packed grad (out_plane x out_group), which every row block walks
 * through, stays within L2.  One thread, thread CPU time, batch 32:
 * 32-channel 5x5 at 28x28 16.1 -> 13.0 ms, 64-channel 3x3 at 56x56 86.6
 * -> 76.9, 128 at 28x28 82.2 -> 75.4.  The sums (depth x out_group) may
 * outgrow L2: at 256 channels (sums of 2.3M) add_tile's pass through them
 * is a tenth of the product, yet the gathered GEMM is slower still (a
 * shared machine, load 1 to 40 on 2 cores, best of 12 to 40 calls taking
 * turns in one process: float32 256 channels at 14x14 75.0-77.6 ms ->
 * 70.6-73.3, at 28x28 302-308 -> 276-283; float64 128 at 28x28 173 ->
 * 144, 256 at 14x14 164 -> 155; 512 at 14x14 even, 292 both in float32,
 * 683 -> 668 in float64; an earlier measurement had 81.7 against 78.1 at
 * 256 channels 14x14).  Two to four samples per GEMM, one pass over the
 * sums for them all, measured no better; cutting each sample's positions
 * into pieces of 64 to 256, or taking the taps of one channel block in
 * turn, was slower everywhere. */
#define WEIGHT_TAPS_MIN_PLANE 128

static bool
weight_taps_fit(const ConvPlan *p)
{
    THBlasBlocking blocking;
    if (p->out_plane < WEIGHT_TAPS_MIN_PLANE || p->in_group == 0
        || THBlas_blocking(p->dtype, &blocking) < 0) {
        return false;
    }
    int64_t rows = THBlas_tappedRowsFor(p->dtype, p->in_group), caches[3];
    int64_t padded_rows = (p->in_group + rows - 1) / rows * rows;
    int64_t packed = p->out_plane * ((p->out_group + blocking.nr - 1) / blocking.nr * blocking.nr);
    THBlas_cacheSizes(caches);
    int64_t l2_items = caches[1] / (int64_t)p->itemsize;
    return padded_rows * 8 <= p->in_group * 9 && packed <= l2_items;
}

/* The job's buffers and offsets; -1 with an error when out of memory. */
static int
tap_weight_setup(const ConvPlan *p, const THConvShape *s, TapWeightJob *job)
{
    int64_t taps = s->kernel_d * s->kernel_h * s->kernel_w;
    int64_t padded_d = s->in_d + 2 * s->pad_d;
    *job = (TapWeightJob){.p = p, .s = s, .padded_h = s->in_h + 2 * s->pad_h,
                          .padded_w = s->in_w + 2 * s->pad_w};
    job->rows = THBlas_tappedRowsFor(p->dtype, p->in_group);
    job->channel_blocks = (p->in_group + job->rows - 1) / job->rows;
    /* A tile of `rows` channels reads up to rows - 1 values past the last
     * channel block: the spare after the image covers them. */
    int64_t spare = job->rows > GATHER_MAX_NR ? job->rows : GATHER_MAX_NR;
    int64_t plane, volume;
    if (TH_mul_overflows(job->padded_h, job->padded_w, &plane)
        || TH_mul_overflows(padded_d, plane, &volume)
        || TH_mul_overflows(volume, p->in_group, &job->padded_count)
        || job->padded_count > INT64_MAX - spare) {
        return THError_set(TH_ERR_MEMORY, "convolution: the padded input is too large");
    }
    /* Note [Work buffers kept across calls] */
    job->padded = take_buffer(job->padded_count + spare, 1, p->itemsize,
                              "the padded input");
    job->sums = take_buffer(p->depth, p->out_group, p->itemsize, "the weight sums");
    job->positions = TH_mallocArray(p->out_plane, sizeof(int64_t), "the positions");
    job->tap_starts = TH_mallocArray(taps, sizeof(int64_t), "the convolution's taps");
    if (job->padded == NULL || job->sums == NULL || job->positions == NULL
        || job->tap_starts == NULL) {
        return -1;
    }
    memset(job->padded, 0, (size_t)(job->padded_count + spare) * p->itemsize);
    for (int64_t q = 0; q < p->out_plane; q++) {
        int64_t line = q / s->out_w, x = q % s->out_w;
        int64_t z = line / s->out_h, y = line % s->out_h;
        job->positions[q] = ((z * s->stride_d * job->padded_h + y * s->stride_h)
                                 * job->padded_w + x * s->stride_w) * p->in_group;
    }
    for (int64_t tap = 0; tap < taps; tap++) {
        int64_t k = tap / (s->kernel_h * s->kernel_w);
        int64_t i = tap / s->kernel_w % s->kernel_h, j = tap % s->kernel_w;
        job->tap_starts[tap] = ((k * s->dilation_d * job->padded_h + i * s->dilation_h)
                                    * job->padded_w + j * s->dilation_w) * p->in_group;
    }
    return 0;
}

static void
tap_weight_free(TapWeightJob *job)
{
    give_back_buffer(job->padded);
    give_back_buffer(job->sums);
    free(job->positions);
    free(job->tap_starts);
}

/* gW[g][o][c, tap] = sums[(tap, c)][o]. */
static void
sums_into_weight(const ConvPlan *p, int64_t taps, const char *sums, char *weight)
{
    for (int64_t tap = 0; tap < taps; tap++) {
        for (int64_t c = 0; c < p->in_group; c++) {
            const char *row = sums + (tap * p->in_group + c) * p->out_group * p->itemsize;
            for (int64_t o = 0; o < p->out_group; o++) {
                copy_item(weight + (o * p->depth + c * taps + tap) * p->itemsize,
                          row + o * p->itemsize, p->itemsize);
            }
        }
    }
}

/* gW by taps (Note [Weight gradient by taps]): per group, per sample, the
 * image channels last, then one tapped GEMM adding into the sums. */
static int
backward_weight_by_taps(const ConvPlan *p, const THConvShape *s, char *grad_weight,
                        const char *grad_output, const char *input)
{
    TapWeightJob job;
    if (tap_weight_setup(p, s, &job) < 0) {
        tap_weight_free(&job);
        return -1;
    }
    int64_t taps = s->kernel_d * s->kernel_h * s->kernel_w, lines = s->in_d * s->in_h;
    int rc = 0;
    for (int64_t g = 0; g < s->groups && rc == 0; g++) {
        memset(job.sums, 0, (size_t)(p->depth * p->out_group) * p->itemsize);
        for (int64_t n = 0; n < s->batch && rc == 0; n++) {
            GroupBlock b = group_block(p, s, n, g, (char *)input, (char *)grad_output,
                                       grad_weight);
            job.image = b.image;
            THParallel_for(lines, 1 + TH_PARALLEL_GRAIN / (s->in_w * p->in_group + 1),
                           p->kernels->pad_channels_last, &job);
            THBlasMatrix grad_t = {b.out, 1, p->out_plane}; /* out_plane x out_group */
            rc = THBlas_gemmTapped(p->dtype, job.rows, taps * job.channel_blocks,
                                   p->out_group, p->out_plane, job.padded, job.positions,
                                   grad_t, tap_weight_block_start, p->kernels->add_tile,
                                   &job);
        }
        if (rc == 0) {
            sums_into_weight(p, taps, job.sums,
                             grad_weight + g * p->out_group * p->depth * p->itemsize);
        }
    }
    tap_weight_free(&job);
    return rc;
}

/* gW[g] = sum over the samples of grad_out[n, g] . B^T, as implicit GEMMs
 * whose B is the forward's B transposed (gather_bt), a chunk of samples
 * side by side at a time (Note [Samples side by side]); the first chunk
 * sets gW, the others add to it. */
int
THConv_backwardWeight(THTensor *grad_weight, const THTensor *grad_output,
                      const THTensor *input, const THConvShape *s)
{
    if (check_dtype(input->dtype) < 0) {
        return -1;
    }
    ConvPlan p = plan_of(s, input->dtype);
    if (s->batch == 0) {
        memset(THTensor_data(grad_weight), 0, (size_t)grad_weight->numel * p.itemsize);
        return 0;
    }
    if (weight_taps_fit(&p)) {
        return backward_weight_by_taps(&p, s, THTensor_data(grad_weight),
                                       THTensor_data(grad_output), THTensor_data(input));
    }
    GatherJob job;
    int64_t chunk;
    if (gather_setup(&p, s, &job, 0, false, &chunk) < 0) {
        return -1;
    }
    char *staging = NULL;
    if (chunk > 1) {
        staging = take_buffer(p.out_group, chunk * p.out_plane, p.itemsize,
                              "the staging buffer");
        if (staging == NULL) {
            gather_free(&job);
            return -1;
        }
    }
    int rc = 0;
    for (int64_t n = 0; n < s->batch && rc == 0; n += chunk) {
        int64_t images = s->batch - n < chunk ? s->batch - n : chunk;
        for (int64_t g = 0; g < s->groups && rc == 0; g++) {
            GroupBlock b = group_block(&p, s, n, g, THTensor_data(input),
                                       THTensor_data(grad_output),
                                       THTensor_data(grad_weight));
            gather_images(&p, s, &job, b.image, images);
            char *out = b.out;
            if (images > 1) {
                gather_output(&p, s, b.out, staging, images);
                out = staging;
            }
            job.out = b.weight;
            job.accumulate = n > 0;
            rc = THBlas_gemmGathered(p.dtype, p.out_group, p.depth, job.columns,
                                     row_major(out, job.columns), p.kernels->gather_bt,
                                     p.kernels->accumulate_c, &job);
        }
    }
    give_back_buffer(staging);
    gather_free(&job);
    return rc;
}
