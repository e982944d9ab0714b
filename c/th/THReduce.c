/*
 * THReduce.c -- reductions, softmax and scans.  See THReduce.h.
 *
 * Note [Reduction plan]
 * ~~~~~~~~~~~~~~~~~~~~~
 * A reduction splits the input's dims into kept ones (one output element
 * per position) and reduced ones.  The plan reduces every output over ONE
 * strided run of `len` elements at `stride`: the reduced dims are sorted
 * by stride and merged, which works for any dense layout (a full reduction
 * of a transposed tensor is still one contiguous run).  When they cannot
 * be merged (sum over dims 0 and 2 of a contiguous 3-d tensor), the input
 * is first copied with the kept dims first and the reduced dims last,
 * which makes the run contiguous, unless the reduced dims hold a long
 * contiguous run: then each output folds that run at every position of the
 * other reduced dims (Note [Reduction groups]).  Arg-reductions keep the
 * reduced dims in their original order, since their result is a row-major
 * index.
 *
 * Three drivers then run a kernel over the plan:
 *   - per output: each output folds its whole run (parallel over outputs);
 *   - split: few outputs with long runs (a full reduction): each run is
 *     cut into one chunk per thread, the chunks are folded in parallel into
 *     partial results, and the partials are merged in chunk order, so the
 *     result depends only on the thread count, never on timing;
 *   - columns: when the run is not contiguous but the innermost kept dim
 *     is (sum(dim=0) of a row-major matrix), whole rows are folded into a
 *     row of accumulators, vectorised along the row, instead of walking
 *     each column with a large stride.  Kernels with a column form: sum,
 *     mean, prod, max/min, all/any, count_nonzero, var/std; the others
 *     (arg-reductions, norms, logsumexp) walk the columns per output.
 *
 * Note [Accurate sums]
 * ~~~~~~~~~~~~~~~~~~~~
 * Floating sums are pairwise, like NumPy's: a block of up to
 * TH_PAIRWISE_LEAF elements is added by TH_PAIRWISE_LANES independent
 * accumulators (each sees at most LEAF / LANES = 64 elements; independent
 * chains are also what lets the compiler vectorise the loop without
 * reassociating anything), a leaf of up to TH_PAIRWISE_BLOCKS blocks adds
 * its blocks' lanes front to back (Note [Block cascade]), and longer runs
 * are halved recursively.  The error grows with log(n) instead of n: 2**25
 * float32 ones sum to 2**25 exactly, where a plain float loop gets stuck
 * at 2**24 (2**24 + 1 rounds back to 2**24).  Column sums use the same
 * halving over rows.
 *
 * The block size trades accuracy for speed: NumPy's leaves give each
 * accumulator 16 elements, but every leaf ends a short loop and stores its
 * lanes, and with 1024-element leaves a 2**24-element sum streamed from
 * memory ran ~20% slower than one flat loop (Zen 1).  4096 closes most of
 * that gap, and on random data the error stays that of the final
 * rounding, as NumPy's.
 *
 * Note [Block cascade]
 * ~~~~~~~~~~~~~~~~~~~~
 * On Zen 4 even 4096-element leaves cost: each ended a recursive call that
 * zeroes, stores and merges 64 lanes through memory, and one thread's
 * 16M-float sum ran at 0.92-0.95x PyTorch's GB/s on the same buffer
 * (PyTorch adds in a flat loop and cascades its partials in registers).
 * In a C test over one 64 MiB buffer (thread CPU time, 200-400 rounds,
 * all variants interleaved, median of per-round ratios), the recursion
 * with 4096-element leaves ran at 0.95x a flat 4-zmm loop like PyTorch's,
 * and a leaf of 8 blocks, whose lanes are added front to back into running
 * lanes, at 1.04-1.07x when built with AVX-512VL's 32 registers (both
 * sets of lanes stay in registers; with AVX2's 16 the same loop ran at
 * 0.98x).  4 blocks gave 1.04-1.05x, 16 no more than 8.  A lane now adds
 * its 64 elements, then up to 7 block partials in a chain, then the
 * log2(n / 32768) levels of the tree: a few more roundings than the plain
 * tree, far fewer than NumPy's 128-element leaves' chains of 16.
 *
 * Note [Two streams]
 * ~~~~~~~~~~~~~~~~~~
 * A sum of data far larger than the cache is bound by how many cache
 * misses one core keeps in flight, not by the additions.  Reading two
 * places at once gives the hardware prefetchers two streams to run ahead
 * on: the whole blocks of a contiguous leaf are taken two at a time and
 * their lanes added side by side in one loop (16 AVX2 registers of
 * accumulators for float32; wider accumulators, double and uint64, stay
 * one block at a time, as 32 registers would spill).  Side by side
 * sibling leaves of 4096 took one thread's 16M-float sum from ~15.5 to
 * ~18.5 GB/s on Zen 1, PyTorch's being ~16 (software prefetch alone
 * gained ~8% in a C test); the pair of blocks is the same two streams 16
 * KB apart, not measured on Zen 1 since the blocks became cascaded.
 *
 * On Zen 4 (AVX-512) the pair cost instead: one thread's 16M-float sum,
 * by thread CPU time side by side with PyTorch in one process, ran at
 * 0.64-0.80x PyTorch's GB/s with the pair and at 0.79-1.0x one leaf at a
 * time (two sessions' measurements; prefetching 1 to 16 KB ahead gained
 * nothing there, nor did it in a third's C test).  So the pair is taken
 * only on CPUs without AVX-512 (two_streams_pay); with it, one block at a
 * time, front to back, the pattern Zen 4's prefetchers follow best.  The
 * split follows the ISA, not the CPU model: no Intel AVX-512 machine has
 * been measured either way.
 *
 * Nor do the leaves use 512-bit vectors (Note [256-bit leaves]).  What
 * does pay a little there is two streams far apart (Note [Two halves]).
 *
 * Note [Two halves]
 * ~~~~~~~~~~~~~~~~~
 * The AVX-512VL build walks the two halves of a contiguous run longer than
 * a leaf side by side: both halves' trees are descended together while
 * both parts are longer than a leaf, and each pair of leaves is added
 * block by block in one loop (name##_block_pair, its two blocks n / 2
 * elements apart), two read streams ~n / 2 apart instead of one.  Each
 * half's lanes get the same additions in the same order as when walked
 * alone (where the two trees' shapes part, the rest is walked one after the
 * other), so the order of Note [Accurate sums] and its models in the tests
 * do not change.  float32 only (TH_PAIR_FITS): two blocks' double or
 * uint64 lanes would spill even AVX-512VL's 32 registers.
 *
 * One thread's 16M-float sum beside PyTorch's in one process (thread CPU
 * time, alternating processes of 20 rounds, the median of the per-round
 * ratios; shared 2-core Zen 4): one stream at a time 1.038, 1.017, 1.020
 * (load ~6) and 1.006, 1.014, 1.029 (load ~1.7) x PyTorch's GB/s; the
 * halves side by side 1.038, 1.037, 1.040 and 1.032, 1.034, 1.010: about
 * +1%, within the noise of one pair (a session before measured +2.5%).
 * Prefetching 4 KB ahead in the pair loop took it to 0.65x.
 *
 * That is as far as a sum can go there.  tools/memory_bandwidth.py times
 * bare read loops beside PyTorch's sum on the same 64 MiB (30 rounds,
 * medians of per-round ratios): load and OR, 8 ymm or zmm sums, 2 halves
 * and 4 quarters reached 1.06-1.09x PyTorch's GB/s, software prefetch
 * 0.92-1.00x, ember's sum 1.04x.  (In C alone the same loops on huge pages
 * topped out at 39-41 GB/s; PyTorch's sum reaches 37-39.)  PyTorch is at
 * ~0.92-0.95x of what one core reads, so 1.1x its GB/s is out of reach.
 *
 * Note [256-bit leaves]
 * ~~~~~~~~~~~~~~~~~~~~~
 * The pairwise sums are built for AVX2 and the baseline
 * (TH_TARGET_CLONES_256), and once more for AVX-512 CPUs with AVX-512VL's
 * 32 registers but 256-bit vectors (TH_TARGET_AVX512VL_256, picked at run
 * time by pairwise_avx512vl_runs, as target_clones cannot name it): on
 * Zen 4, a sum streamed from memory with 64-byte loads ran ~10% slower
 * than with 32-byte ones.  In a C test of the leaf loop over 64 MiB of
 * float32 (thread CPU time, interleaved, best of 20-50, with and without
 * huge pages), 4 zmm accumulators reached 0.80-0.93x the rate of 8 ymm
 * ones, and 8 ymm ones 0.94-1.03x that of a loop that only loads and ORs
 * (the one-core read bandwidth); the cascaded leaf of Note [Block
 * cascade] ran at 0.95x with zmm lanes, 1.07x with ymm ones.  The other
 * vectorised kernels (max/min, exp, column sums) keep their AVX-512 copy:
 * they have not been measured with 256-bit loads.
 *
 * Every build adds the same elements in the same order into each lane,
 * so the result is bit for bit the same on every CPU
 * (tests/test_memory_bound_kernels.py and c/tests/test_reduce.c check it
 * against a model of the order; under valgrind, which reports no AVX-512,
 * the AVX2 build and its pair of blocks run).
 */
#include "THReduce.h"

#include "THFloatFormulas.h"
#include "THParallel.h"
#include "THReduceFormulas.h"

#include <math.h>
#include <string.h>

/* ---- dtype traits ------------------------------------------------------- */

#define TH_FORALL_FLOAT_DTYPES(_) \
    _(Float32, float, "float32")  \
    _(Float64, double, "float64")

/* The vectorised kernels (max/min scans, exp, column sums) are built
 * three times on x86-64, for AVX-512, AVX2 and the baseline, with the same
 * lanes and order of operations (so the same results), and the loader
 * picks one for the running CPU (GCC function multi-versioning): one
 * binary, full-width vectors where present. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TH_TARGET_CLONES \
    __attribute__((target_clones("avx512f", "avx2", "default")))
/* The same without the AVX-512 copy: for the pairwise leaves, which stream
 * from memory faster with 256-bit loads (Note [256-bit leaves]). */
#define TH_TARGET_CLONES_256 \
    __attribute__((target_clones("avx2", "default")))
#else
#define TH_TARGET_CLONES
#define TH_TARGET_CLONES_256
#endif

static THDtype
sum_result_dtype(THDtype dtype)
{
    return THDtype_isFloating(dtype) ? dtype : TH_Int64;
}


/* ---- kernels ---------------------------------------------------------------
 *
 * A reduction kernel is three functions over an accumulator of acc_size
 * bytes:
 *   fold(in, n, stride, first, acc, params): acc = reduction of the n
 *       elements in[0], in[stride], ... (stride in elements); `first` is the
 *       index of in[0] in the whole run (for arg-reductions);
 *   merge(acc, later, params): acc = acc combined with the partial of the
 *       elements that follow it;
 *   finish(acc, out, out2, count, params): writes the result (and a second
 *       one, the value of max(dim), when out2 is not NULL); count is the
 *       run's length.
 * plus, optionally, column(in, rows, row_stride, width, accs, params),
 * folding `width` adjacent runs at once (Note [Reduction plan]).
 */
typedef struct {
    double p;          /* norm order */
    double correction; /* var/std */
    bool take_sqrt;    /* std */
} ReduceParams;

typedef void (*FoldFn)(const char *in, int64_t n, int64_t stride,
                       int64_t first, void *acc, const ReduceParams *params);
typedef void (*MergeFn)(void *acc, const void *later,
                        const ReduceParams *params);
typedef void (*FinishFn)(const void *acc, char *out, char *out2,
                         int64_t count, const ReduceParams *params);
typedef void (*ColumnFn)(const char *in, int64_t rows, int64_t row_stride,
                         int64_t width, void *accs,
                         const ReduceParams *params);

typedef struct {
    size_t acc_size; /* at most TH_REDUCE_MAX_ACC */
    FoldFn fold;
    MergeFn merge;
    FinishFn finish;
    ColumnFn column; /* NULL: the per-output driver handles every layout */
} ReduceKernel;

#define TH_REDUCE_MAX_ACC 32

/* ---- exp over blocks ------------------------------------------------------
 *
 * softmax and logsumexp spend their time in exp.  They use exp_<Name> from
 * THFloatFormulas.h (Note [Vectorisable exp]): plain arithmetic for float32,
 * which gcc vectorises in these loops, libm's exp for float64.  It is the
 * formula ember.exp computes, and the one ember.cuda's softmax and
 * logsumexp kernels call, so the GPU computes the same exps.
 */
/* Elements per exp block along one line (softmax over a line of width 1,
 * logsumexp). */
#define TH_EXP_CHUNK 256

/* exp_block_<Name>(x, shift, shift_step, y, n): y[i] = exp(x[i] -
 * shift[i * shift_step]) for i < n (shift_step 0 or 1); y may be x. */
#define TH_DEFINE_EXP_BLOCK(Name, ctype, py)                                 \
    TH_TARGET_CLONES static void exp_block_##Name(                           \
        const ctype *x, const ctype *shift, int64_t shift_step, ctype *y,   \
        int64_t n)                                                           \
    {                                                                        \
        if (shift_step == 0) {                                               \
            const ctype s = shift[0];                                        \
            for (int64_t i = 0; i < n; i++) {                                \
                y[i] = exp_##Name(x[i] - s);                                 \
            }                                                                \
            return;                                                          \
        }                                                                    \
        for (int64_t i = 0; i < n; i++) {                                    \
            y[i] = exp_##Name(x[i] - shift[i]);                              \
        }                                                                    \
    }
TH_FORALL_FLOAT_DTYPES(TH_DEFINE_EXP_BLOCK)

/* ---- pairwise sums (Note [Accurate sums]) ------------------------------- */

#define TH_PAIRWISE_LEAF 4096 /* elements per block */
#define TH_PAIRWISE_LANES 64
#define TH_PAIRWISE_BLOCKS 8 /* blocks per leaf (Note [Block cascade]) */
/* Whether two blocks' lanes fit in the 16 AVX2 registers: float32's do;
 * double and uint64 ones would spill to the stack, which costs more than
 * the second stream gains (Note [Two streams]). */
#define TH_PAIR_FITS(acc_t) (2 * TH_PAIRWISE_LANES * sizeof(acc_t) <= 512)

/* Whether the side-by-side blocks pay on this CPU: not on one with AVX-512
 * (Note [Two streams]), which runs the AVX-512VL build one block at a time
 * (Note [256-bit leaves]).  It is a load and a bit test, made once a leaf. */
static inline bool
two_streams_pay(void)
{
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    return !__builtin_cpu_supports("avx512f");
#else
    return true;
#endif
}

/* The pairwise sums' build for AVX-512 CPUs: 256-bit vectors with
 * AVX-512VL's 32 registers (Note [256-bit leaves]).  target_clones can
 * name neither AVX-512VL nor a vector width, so the sums pick this build
 * themselves (pairwise_avx512vl_runs). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TH_TARGET_AVX512VL_256 \
    __attribute__((target("avx512f,avx512vl,prefer-vector-width=256")))
static inline bool
pairwise_avx512vl_runs(void)
{
    return __builtin_cpu_supports("avx512vl");
}
#else
#define TH_TARGET_AVX512VL_256
static inline bool
pairwise_avx512vl_runs(void)
{
    return false;
}
#endif

/* The body of a name##_lanes function called `self` (one per build): runs
 * longer than a leaf are halved, a multiple of the lane count so that lanes
 * stay aligned, and the halves' lanes added lane by lane. */
#define TH_PAIRWISE_LANES_BODY(name, self, acc_t, pair_blocks)              \
    {                                                                        \
        if (n > TH_PAIRWISE_LEAF * TH_PAIRWISE_BLOCKS) {                     \
            int64_t half = (n / 2) & ~(int64_t)(TH_PAIRWISE_LANES - 1);      \
            acc_t later[TH_PAIRWISE_LANES];                                  \
            self(x, half, stride, shift, out);                               \
            self(x + half * stride, n - half, stride, shift, later);         \
            for (int l = 0; l < TH_PAIRWISE_LANES; l++) {                    \
                out[l] += later[l];                                          \
            }                                                                \
            return;                                                          \
        }                                                                    \
        name##_leaf(x, n, stride, shift, (pair_blocks), out);                \
    }

/* name(x, n, stride, shift): the sum of MAP(x[i * stride]) in acc_t.  MAP
 * may use `shift` (the mean, for the squared deviations of var).
 *
 * The recursion hands lane vectors, not scalars, up the tree
 * (name##_lanes adds lane l of the left half to lane l of the right half),
 * so a leaf costs one store of its lanes and the 64 lanes are reduced to
 * one number only once, at the top. */
#define TH_DEFINE_PAIRWISE(name, ctype, acc_t, MAP)                          \
    /* total[l] += the sum of MAP over the elements l, l + 64, ... of the   \
     * block x[0, n), n <= TH_PAIRWISE_LEAF (stride in elements). */         \
    static inline __attribute__((always_inline)) void name##_block(          \
        const ctype *x, int64_t n, int64_t stride, acc_t shift,              \
        acc_t *total)                                                        \
    {                                                                        \
        acc_t lane[TH_PAIRWISE_LANES] = {0};                                 \
        int64_t i = 0;                                                       \
        (void)shift;                                                         \
        if (stride == 1) {                                                   \
            for (; i + TH_PAIRWISE_LANES <= n; i += TH_PAIRWISE_LANES) {     \
                for (int l = 0; l < TH_PAIRWISE_LANES; l++) {                \
                    acc_t v = (acc_t)x[i + l];                               \
                    lane[l] += MAP(v);                                       \
                }                                                            \
            }                                                                \
        }                                                                    \
        else {                                                               \
            for (; i + TH_PAIRWISE_LANES <= n; i += TH_PAIRWISE_LANES) {     \
                for (int l = 0; l < TH_PAIRWISE_LANES; l++) {                \
                    acc_t v = (acc_t)x[(i + l) * stride];                    \
                    lane[l] += MAP(v);                                       \
                }                                                            \
            }                                                                \
        }                                                                    \
        for (int l = 0; i + l < n; l++) {                                    \
            acc_t v = (acc_t)x[(i + l) * stride];                            \
            lane[l] += MAP(v);                                               \
        }                                                                    \
        for (int l = 0; l < TH_PAIRWISE_LANES; l++) {                        \
            total[l] += lane[l];                                             \
        }                                                                    \
    }                                                                        \
    /* Two whole contiguous blocks, x[0, LEAF) and y[0, LEAF), added side  \
     * by side (Note [Two streams]); tx and ty get what name##_block calls  \
     * would add, in the same order (tx first, when they are one). */       \
    static inline __attribute__((always_inline)) void name##_block_pair(     \
        const ctype *x, const ctype *y, acc_t shift, acc_t *tx, acc_t *ty)   \
    {                                                                        \
        acc_t a[TH_PAIRWISE_LANES] = {0}, b[TH_PAIRWISE_LANES] = {0};        \
        (void)shift;                                                         \
        for (int64_t i = 0; i < TH_PAIRWISE_LEAF; i += TH_PAIRWISE_LANES) {  \
            for (int l = 0; l < TH_PAIRWISE_LANES; l++) {                    \
                acc_t v = (acc_t)x[i + l], w = (acc_t)y[i + l];              \
                a[l] += MAP(v);                                              \
                b[l] += MAP(w);                                              \
            }                                                                \
        }                                                                    \
        for (int l = 0; l < TH_PAIRWISE_LANES; l++) {                        \
            tx[l] += a[l];                                                   \
        }                                                                    \
        for (int l = 0; l < TH_PAIRWISE_LANES; l++) {                        \
            ty[l] += b[l];                                                   \
        }                                                                    \
    }                                                                        \
    /* A leaf, n <= TH_PAIRWISE_BLOCKS * TH_PAIRWISE_LEAF: its blocks' lanes \
     * added front to back (Note [Block cascade]). */                        \
    static inline __attribute__((always_inline)) void name##_leaf(           \
        const ctype *x, int64_t n, int64_t stride, acc_t shift,              \
        bool pair_blocks, acc_t *out)                                        \
    {                                                                        \
        acc_t total[TH_PAIRWISE_LANES] = {0};                                \
        int64_t start = 0;                                                   \
        if (pair_blocks && TH_PAIR_FITS(acc_t) && stride == 1) {             \
            for (; start + 2 * TH_PAIRWISE_LEAF <= n;                        \
                 start += 2 * TH_PAIRWISE_LEAF) {                            \
                name##_block_pair(x + start, x + start + TH_PAIRWISE_LEAF,   \
                                  shift, total, total);                      \
            }                                                                \
        }                                                                    \
        for (; start < n; start += TH_PAIRWISE_LEAF) {                       \
            int64_t len = n - start < TH_PAIRWISE_LEAF ? n - start           \
                                                       : TH_PAIRWISE_LEAF;   \
            name##_block(x + start * stride, len, stride, shift, total);     \
        }                                                                    \
        memcpy(out, total, sizeof(total));                                   \
    }                                                                        \
    /* Two contiguous leaves side by side, block by block: ox and oy get  \
     * what name##_leaf would give each (Note [Two halves]). */              \
    static inline __attribute__((always_inline)) void name##_leaf_pair(      \
        const ctype *x, int64_t nx, const ctype *y, int64_t ny, acc_t shift, \
        acc_t *ox, acc_t *oy)                                                \
    {                                                                        \
        acc_t tx[TH_PAIRWISE_LANES] = {0}, ty[TH_PAIRWISE_LANES] = {0};      \
        int64_t start = 0;                                                   \
        for (; start + TH_PAIRWISE_LEAF <= nx                                \
               && start + TH_PAIRWISE_LEAF <= ny;                            \
             start += TH_PAIRWISE_LEAF) {                                    \
            name##_block_pair(x + start, y + start, shift, tx, ty);          \
        }                                                                    \
        for (int64_t i = start; i < nx; i += TH_PAIRWISE_LEAF) {             \
            int64_t len = nx - i < TH_PAIRWISE_LEAF ? nx - i                 \
                                                    : TH_PAIRWISE_LEAF;      \
            name##_block(x + i, len, 1, shift, tx);                          \
        }                                                                    \
        for (int64_t i = start; i < ny; i += TH_PAIRWISE_LEAF) {             \
            int64_t len = ny - i < TH_PAIRWISE_LEAF ? ny - i                 \
                                                    : TH_PAIRWISE_LEAF;      \
            name##_block(y + i, len, 1, shift, ty);                          \
        }                                                                    \
        memcpy(ox, tx, sizeof(tx));                                          \
        memcpy(oy, ty, sizeof(ty));                                          \
    }                                                                        \
    TH_TARGET_CLONES_256 static void name##_lanes(                           \
        const ctype *x, int64_t n, int64_t stride, acc_t shift, acc_t *out)  \
    TH_PAIRWISE_LANES_BODY(name, name##_lanes, acc_t, two_streams_pay())     \
    TH_TARGET_AVX512VL_256 static void name##_lanes_avx512vl(                \
        const ctype *x, int64_t n, int64_t stride, acc_t shift, acc_t *out)  \
    TH_PAIRWISE_LANES_BODY(name, name##_lanes_avx512vl, acc_t, false)        \
    /* The lanes of x[0, nx) and y[0, ny), contiguous, each in the order of  \
     * name##_lanes_avx512vl, their trees walked side by side while they    \
     * have the same shape (Note [Two halves]). */                           \
    TH_TARGET_AVX512VL_256 static void name##_lanes_pair_avx512vl(           \
        const ctype *x, int64_t nx, const ctype *y, int64_t ny, acc_t shift, \
        acc_t *ox, acc_t *oy)                                                \
    {                                                                        \
        const int64_t leaf = TH_PAIRWISE_LEAF * TH_PAIRWISE_BLOCKS;          \
        if (nx <= leaf && ny <= leaf) {                                      \
            name##_leaf_pair(x, nx, y, ny, shift, ox, oy);                   \
            return;                                                          \
        }                                                                    \
        if (nx <= leaf || ny <= leaf) {                                      \
            name##_lanes_avx512vl(x, nx, 1, shift, ox);                      \
            name##_lanes_avx512vl(y, ny, 1, shift, oy);                      \
            return;                                                          \
        }                                                                    \
        int64_t hx = (nx / 2) & ~(int64_t)(TH_PAIRWISE_LANES - 1);           \
        int64_t hy = (ny / 2) & ~(int64_t)(TH_PAIRWISE_LANES - 1);           \
        acc_t lx[TH_PAIRWISE_LANES], ly[TH_PAIRWISE_LANES];                  \
        name##_lanes_pair_avx512vl(x, hx, y, hy, shift, ox, oy);             \
        name##_lanes_pair_avx512vl(x + hx, nx - hx, y + hy, ny - hy, shift,  \
                                   lx, ly);                                  \
        for (int l = 0; l < TH_PAIRWISE_LANES; l++) {                        \
            ox[l] += lx[l];                                                  \
            oy[l] += ly[l];                                                  \
        }                                                                    \
    }                                                                        \
    /* The AVX-512VL build's lanes of x[0, n): contiguous runs longer than  \
     * a leaf walk their halves side by side (Note [Two halves]). */         \
    static void name##_lanes_avx512vl_top(const ctype *x, int64_t n,         \
                                          int64_t stride, acc_t shift,       \
                                          acc_t *out)                        \
    {                                                                        \
        if (stride != 1 || !TH_PAIR_FITS(acc_t)                              \
            || n <= TH_PAIRWISE_LEAF * TH_PAIRWISE_BLOCKS) {                 \
            name##_lanes_avx512vl(x, n, stride, shift, out);                 \
            return;                                                          \
        }                                                                    \
        int64_t half = (n / 2) & ~(int64_t)(TH_PAIRWISE_LANES - 1);          \
        acc_t later[TH_PAIRWISE_LANES];                                      \
        name##_lanes_pair_avx512vl(x, half, x + half, n - half, shift, out,  \
                                   later);                                   \
        for (int l = 0; l < TH_PAIRWISE_LANES; l++) {                        \
            out[l] += later[l];                                              \
        }                                                                    \
    }                                                                        \
    static acc_t name(const ctype *x, int64_t n, int64_t stride,             \
                      acc_t shift)                                           \
    {                                                                        \
        acc_t lane[TH_PAIRWISE_LANES];                                       \
        if (pairwise_avx512vl_runs()) {                                      \
            name##_lanes_avx512vl_top(x, n, stride, shift, lane);            \
        }                                                                    \
        else {                                                               \
            name##_lanes(x, n, stride, shift, lane);                         \
        }                                                                    \
        for (int width = TH_PAIRWISE_LANES / 2; width >= 1; width /= 2) {    \
            for (int l = 0; l < width; l++) {                                \
                lane[l] += lane[l + width];                                  \
            }                                                                \
        }                                                                    \
        return lane[0];                                                      \
    }

#define TH_MAP_IDENTITY(v) (v)
#define TH_MAP_ABS(v) TH_ABS(v)
#define TH_MAP_SQUARE(v) TH_SQUARE(v)
#define TH_MAP_SQUARED_DEVIATION(v) TH_SQUARED_DEVIATION(v, shift)

/* sum_pairwise_<Name> for every dtype (wrapping unsigned sums for the
 * integer ones), and abs/square/deviation sums for the floating ones.
 * Built without GCC's loop distribution, which would split the loop of
 * name##_block_pair back into one loop per block (Note [Two streams]). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-tree-loop-distribution")
#endif
#define TH_DEFINE_SUM_PAIRWISE(Name, ctype, py) \
    TH_DEFINE_PAIRWISE(sum_pairwise_##Name, ctype, TH_ACC_##Name, \
                       TH_MAP_IDENTITY)
TH_FORALL_ARITH_DTYPES(TH_DEFINE_SUM_PAIRWISE)

#define TH_DEFINE_FLOAT_PAIRWISE(Name, ctype, py)                           \
    TH_DEFINE_PAIRWISE(abs_pairwise_##Name, ctype, ctype, TH_MAP_ABS)       \
    TH_DEFINE_PAIRWISE(square_pairwise_##Name, ctype, ctype, TH_MAP_SQUARE) \
    TH_DEFINE_PAIRWISE(deviation_pairwise_##Name, ctype, ctype,             \
                       TH_MAP_SQUARED_DEVIATION)
TH_FORALL_FLOAT_DTYPES(TH_DEFINE_FLOAT_PAIRWISE)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

/* Columns: name(x, rows, row_stride, width, shift, acc) sets acc[k] = the
 * sum over the rows of MAP(in[r * row_stride + k], k), k < width <=
 * TH_COLUMN_TILE, halving the rows like the pairwise sum.  MAP may use
 * shift[k] (the column's mean, for var).
 *
 * Note [Column tiles]
 * ~~~~~~~~~~~~~~~~~~~
 * A column sum of a row-major matrix is a sum of row vectors.  A tile is
 * up to TH_COLUMN_TILE columns (4 KB of float accumulators, so a leaf's
 * accumulators plus the partials of the levels above stay in L1): a bias
 * gradient of 1536 columns is read as whole 6 KB rows, one sequential
 * stream, rather than as twelve 512-byte slivers per row at a 6 KB stride,
 * which the prefetchers and the TLB served poorly (~1.4x PyTorch's time).
 * A leaf folds four rows per pass over its accumulators, as
 * ((((acc + r0) + r1) + r2) + r3): four read streams, one load and store of
 * acc per four rows, and the same order of additions as one row at a
 * time, so the tile width and the thread count never change a result. */
#define TH_COLUMN_TILE 1024
#define TH_COLUMN_MIN_TILE 64
#define TH_COLUMN_LEAF 16

#define TH_DEFINE_COLUMN_PAIRWISE(name, ctype, acc_t, MAP)                   \
    TH_TARGET_CLONES static void name##_leaf(                                \
        const ctype *x, int64_t rows, int64_t row_stride, int64_t width,     \
        const acc_t *shift, acc_t *restrict acc)                             \
    {                                                                        \
        (void)shift;                                                         \
        for (int64_t k = 0; k < width; k++) {                                \
            acc[k] = 0;                                                      \
        }                                                                    \
        int64_t r = 0;                                                       \
        for (; r + 4 <= rows; r += 4) {                                      \
            const ctype *r0 = x + r * row_stride, *r1 = r0 + row_stride;     \
            const ctype *r2 = r1 + row_stride, *r3 = r2 + row_stride;        \
            for (int64_t k = 0; k < width; k++) {                            \
                acc_t v0 = (acc_t)r0[k], v1 = (acc_t)r1[k];                  \
                acc_t v2 = (acc_t)r2[k], v3 = (acc_t)r3[k];                  \
                acc[k] = acc[k] + MAP(v0, k) + MAP(v1, k) + MAP(v2, k)       \
                         + MAP(v3, k);                                       \
            }                                                                \
        }                                                                    \
        for (; r < rows; r++) {                                              \
            const ctype *row = x + r * row_stride;                           \
            for (int64_t k = 0; k < width; k++) {                            \
                acc_t v = (acc_t)row[k];                                     \
                acc[k] += MAP(v, k);                                         \
            }                                                                \
        }                                                                    \
    }                                                                        \
    static void name(const ctype *x, int64_t rows, int64_t row_stride,       \
                     int64_t width, const acc_t *shift, acc_t *acc)          \
    {                                                                        \
        if (rows <= TH_COLUMN_LEAF) {                                        \
            name##_leaf(x, rows, row_stride, width, shift, acc);             \
            return;                                                          \
        }                                                                    \
        acc_t later[TH_COLUMN_TILE];                                         \
        int64_t half = rows / 2;                                             \
        name(x, half, row_stride, width, shift, acc);                        \
        name(x + half * row_stride, rows - half, row_stride, width, shift,   \
             later);                                                         \
        for (int64_t k = 0; k < width; k++) {                                \
            acc[k] += later[k];                                              \
        }                                                                    \
    }

#define TH_COLUMN_MAP_IDENTITY(v, k) (v)
#define TH_COLUMN_MAP_SQUARED_DEVIATION(v, k) \
    (((v) - shift[k]) * ((v) - shift[k]))

#define TH_DEFINE_COLUMN_SUM(Name, ctype, py)                         \
    TH_DEFINE_COLUMN_PAIRWISE(column_pairwise_##Name, ctype,          \
                              TH_ACC_##Name, TH_COLUMN_MAP_IDENTITY)
TH_FORALL_ARITH_DTYPES(TH_DEFINE_COLUMN_SUM)
#define TH_DEFINE_COLUMN_DEVIATION(Name, ctype, py)                   \
    TH_DEFINE_COLUMN_PAIRWISE(column_deviation_##Name, ctype, ctype,  \
                              TH_COLUMN_MAP_SQUARED_DEVIATION)
TH_FORALL_FLOAT_DTYPES(TH_DEFINE_COLUMN_DEVIATION)

/* ---- sum, mean, prod ---------------------------------------------------- */

#define TH_DEFINE_SUM_KERNEL(Name, ctype, py)                                \
    static void sum_fold_##Name(const char *in, int64_t n, int64_t stride,   \
                                int64_t first, void *acc,                    \
                                const ReduceParams *params)                  \
    {                                                                        \
        (void)first;                                                         \
        (void)params;                                                        \
        *(TH_ACC_##Name *)acc =                                              \
            sum_pairwise_##Name((const ctype *)in, n, stride, 0);            \
    }                                                                        \
    static void sum_merge_##Name(void *acc, const void *later,               \
                                 const ReduceParams *params)                 \
    {                                                                        \
        (void)params;                                                        \
        *(TH_ACC_##Name *)acc += *(const TH_ACC_##Name *)later;              \
    }                                                                        \
    static void sum_finish_##Name(const void *acc, char *out, char *out2,    \
                                  int64_t count, const ReduceParams *params) \
    {                                                                        \
        (void)out2;                                                          \
        (void)count;                                                         \
        (void)params;                                                        \
        *(TH_RES_##Name *)out = (TH_RES_##Name) * (const TH_ACC_##Name *)acc; \
    }                                                                        \
    static void sum_column_##Name(const char *in, int64_t rows,              \
                                  int64_t row_stride, int64_t width,         \
                                  void *accs, const ReduceParams *params)    \
    {                                                                        \
        (void)params;                                                        \
        column_pairwise_##Name((const ctype *)in, rows, row_stride, width,   \
                               NULL, (TH_ACC_##Name *)accs);                 \
    }                                                                        \
    static void prod_fold_##Name(const char *in, int64_t n, int64_t stride,  \
                                 int64_t first, void *acc,                   \
                                 const ReduceParams *params)                 \
    {                                                                        \
        (void)first;                                                         \
        (void)params;                                                        \
        const ctype *x = (const ctype *)in;                                  \
        TH_ACC_##Name product = 1;                                           \
        for (int64_t i = 0; i < n; i++) {                                    \
            product *= (TH_ACC_##Name)x[i * stride];                         \
        }                                                                    \
        *(TH_ACC_##Name *)acc = product;                                     \
    }                                                                        \
    static void prod_merge_##Name(void *acc, const void *later,              \
                                  const ReduceParams *params)                \
    {                                                                        \
        (void)params;                                                        \
        *(TH_ACC_##Name *)acc *= *(const TH_ACC_##Name *)later;              \
    }                                                                        \
    static void prod_column_##Name(const char *in, int64_t rows,             \
                                   int64_t row_stride, int64_t width,        \
                                   void *accs, const ReduceParams *params)   \
    {                                                                        \
        (void)params;                                                        \
        const ctype *x = (const ctype *)in;                                  \
        TH_ACC_##Name *acc = accs;                                           \
        for (int64_t k = 0; k < width; k++) {                                \
            acc[k] = 1;                                                      \
        }                                                                    \
        for (int64_t r = 0; r < rows; r++) {                                 \
            for (int64_t k = 0; k < width; k++) {                            \
                acc[k] *= (TH_ACC_##Name)x[r * row_stride + k];              \
            }                                                                \
        }                                                                    \
    }
TH_FORALL_ARITH_DTYPES(TH_DEFINE_SUM_KERNEL)

#define TH_SUM_KERNEL_ENTRY(Name, ctype, py)                                 \
    {sizeof(TH_ACC_##Name), sum_fold_##Name, sum_merge_##Name,               \
     sum_finish_##Name, sum_column_##Name},
static const ReduceKernel sum_kernels[TH_NUM_DTYPES] = {
    TH_FORALL_ARITH_DTYPES(TH_SUM_KERNEL_ENTRY)
};
#define TH_PROD_KERNEL_ENTRY(Name, ctype, py)                                \
    {sizeof(TH_ACC_##Name), prod_fold_##Name, prod_merge_##Name,             \
     sum_finish_##Name, prod_column_##Name},
static const ReduceKernel prod_kernels[TH_NUM_DTYPES] = {
    TH_FORALL_ARITH_DTYPES(TH_PROD_KERNEL_ENTRY)
};

#define TH_DEFINE_MEAN_KERNEL(Name, ctype, py)                               \
    static void mean_finish_##Name(const void *acc, char *out, char *out2,   \
                                   int64_t count,                            \
                                   const ReduceParams *params)               \
    {                                                                        \
        (void)out2;                                                          \
        (void)params;                                                        \
        /* 0 / 0 is nan, as PyTorch's mean of nothing */                     \
        *(ctype *)out = *(const ctype *)acc / (ctype)count;                  \
    }
TH_FORALL_FLOAT_DTYPES(TH_DEFINE_MEAN_KERNEL)

static const ReduceKernel mean_kernels[2] = {
    {sizeof(float), sum_fold_Float32, sum_merge_Float32, mean_finish_Float32,
     sum_column_Float32},
    {sizeof(double), sum_fold_Float64, sum_merge_Float64,
     mean_finish_Float64, sum_column_Float64},
};

/* ---- max, min, argmax, argmin ------------------------------------------- */

/* GCC vector types for the max/min scans: TH_VEC_BYTES of the dtype's
 * values (bool as uint8_t: C has no vectors of _Bool), and the unsigned
 * integers of the same width, for selecting lanes through a mask (C, unlike
 * C++, has no ?: on vectors). */
#define TH_VEC_BYTES 32
#define TH_VEC_ACCS 4 /* independent vector accumulators */
#define TH_VELEM_Bool uint8_t
#define TH_VELEM_UInt8 uint8_t
#define TH_VELEM_Int8 int8_t
#define TH_VELEM_Int16 int16_t
#define TH_VELEM_Int32 int32_t
#define TH_VELEM_Int64 int64_t
#define TH_VELEM_Float32 float
#define TH_VELEM_Float64 double
#define TH_VBITS_Bool uint8_t
#define TH_VBITS_UInt8 uint8_t
#define TH_VBITS_Int8 uint8_t
#define TH_VBITS_Int16 uint16_t
#define TH_VBITS_Int32 uint32_t
#define TH_VBITS_Int64 uint64_t
#define TH_VBITS_Float32 uint32_t
#define TH_VBITS_Float64 uint64_t

#define TH_VEC_COMPARE_max >
#define TH_VEC_COMPARE_min <

/* The NaN-propagating max (min) of n >= 1 elements.  The contiguous case
 * runs TH_VEC_ACCS vector accumulators and takes each new value where it
 * is better or NaN, as STEP does, lane by lane. */
#define TH_DEFINE_MINMAX_RUN(Name, ctype, py, which, STEP)                   \
    typedef TH_VELEM_##Name which##_vec_##Name                               \
        __attribute__((vector_size(TH_VEC_BYTES)));                          \
    typedef TH_VBITS_##Name which##_bits_##Name                              \
        __attribute__((vector_size(TH_VEC_BYTES)));                          \
    TH_TARGET_CLONES static ctype which##_run_##Name(const ctype *x,         \
                                                     int64_t n,              \
                                                     int64_t stride)         \
    {                                                                        \
        enum { LANES = TH_VEC_BYTES / sizeof(ctype) };                       \
        enum { BLOCK = LANES * TH_VEC_ACCS };                                \
        ctype best = x[0];                                                   \
        int64_t i = 0;                                                       \
        if (stride == 1 && n >= BLOCK) {                                     \
            which##_vec_##Name acc[TH_VEC_ACCS];                             \
            memcpy(acc, x, sizeof(acc));                                     \
            for (i = BLOCK; i + BLOCK <= n; i += BLOCK) {                    \
                for (int k = 0; k < TH_VEC_ACCS; k++) {                      \
                    which##_vec_##Name v;                                    \
                    memcpy(&v, x + i + k * LANES, sizeof(v));                \
                    which##_bits_##Name take = (which##_bits_##Name)(        \
                        (v TH_VEC_COMPARE_##which acc[k]) | (v != v));       \
                    acc[k] = (which##_vec_##Name)(                           \
                        ((which##_bits_##Name)v & take)                      \
                        | ((which##_bits_##Name)acc[k] & ~take));            \
                }                                                            \
            }                                                                \
            ctype lanes[BLOCK];                                              \
            memcpy(lanes, acc, sizeof(lanes));                               \
            for (int l = 0; l < BLOCK; l++) {                                \
                best = STEP(best, lanes[l]);                                 \
            }                                                                \
        }                                                                    \
        for (; i < n; i++) {                                                 \
            ctype v = x[i * stride];                                         \
            best = STEP(best, v);                                            \
        }                                                                    \
        return best;                                                         \
    }

/* max/min kernels; fold is never called with n == 0 (the callers refuse
 * empty reductions first). */
#define TH_DEFINE_MINMAX_KERNEL(Name, ctype, py, which, STEP)                \
    TH_DEFINE_MINMAX_RUN(Name, ctype, py, which, STEP)                       \
    static void which##_fold_##Name(const char *in, int64_t n,               \
                                    int64_t stride, int64_t first,           \
                                    void *acc, const ReduceParams *params)   \
    {                                                                        \
        (void)first;                                                         \
        (void)params;                                                        \
        *(ctype *)acc = which##_run_##Name((const ctype *)in, n, stride);    \
    }                                                                        \
    static void which##_merge_##Name(void *acc, const void *later,           \
                                     const ReduceParams *params)             \
    {                                                                        \
        (void)params;                                                        \
        ctype v = *(const ctype *)later;                                     \
        *(ctype *)acc = STEP(*(ctype *)acc, v);                              \
    }                                                                        \
    static void which##_finish_##Name(const void *acc, char *out,            \
                                      char *out2, int64_t count,             \
                                      const ReduceParams *params)            \
    {                                                                        \
        (void)out2;                                                          \
        (void)count;                                                         \
        (void)params;                                                        \
        *(ctype *)out = *(const ctype *)acc;                                 \
    }                                                                        \
    static void which##_column_##Name(const char *in, int64_t rows,          \
                                      int64_t row_stride, int64_t width,     \
                                      void *accs,                            \
                                      const ReduceParams *params)            \
    {                                                                        \
        (void)params;                                                        \
        const ctype *x = (const ctype *)in;                                  \
        ctype *acc = accs;                                                   \
        memcpy(acc, x, sizeof(ctype) * (size_t)width);                       \
        for (int64_t r = 1; r < rows; r++) {                                 \
            for (int64_t k = 0; k < width; k++) {                            \
                ctype v = x[r * row_stride + k];                             \
                acc[k] = STEP(acc[k], v);                                    \
            }                                                                \
        }                                                                    \
    }

#define TH_DEFINE_MAX_KERNEL(Name, ctype, py) \
    TH_DEFINE_MINMAX_KERNEL(Name, ctype, py, max, TH_MAX_STEP)
#define TH_DEFINE_MIN_KERNEL(Name, ctype, py) \
    TH_DEFINE_MINMAX_KERNEL(Name, ctype, py, min, TH_MIN_STEP)
TH_FORALL_ARITH_DTYPES(TH_DEFINE_MAX_KERNEL)
TH_FORALL_ARITH_DTYPES(TH_DEFINE_MIN_KERNEL)

#define TH_MAX_KERNEL_ENTRY(Name, ctype, py) \
    {sizeof(ctype), max_fold_##Name, max_merge_##Name, max_finish_##Name,    \
     max_column_##Name},
#define TH_MIN_KERNEL_ENTRY(Name, ctype, py) \
    {sizeof(ctype), min_fold_##Name, min_merge_##Name, min_finish_##Name,    \
     min_column_##Name},
static const ReduceKernel max_kernels[TH_NUM_DTYPES] = {
    TH_FORALL_ARITH_DTYPES(TH_MAX_KERNEL_ENTRY)
};
static const ReduceKernel min_kernels[TH_NUM_DTYPES] = {
    TH_FORALL_ARITH_DTYPES(TH_MIN_KERNEL_ENTRY)
};

#define TH_DEFINE_ARG_KERNEL(Name, ctype, py, which, BETTER)                 \
    typedef struct {                                                         \
        ctype value;                                                         \
        int64_t index;                                                       \
    } which##_acc_##Name;                                                    \
    static void which##_fold_##Name(const char *in, int64_t n,               \
                                    int64_t stride, int64_t first,           \
                                    void *acc, const ReduceParams *params)   \
    {                                                                        \
        (void)params;                                                        \
        const ctype *x = (const ctype *)in;                                  \
        ctype best = x[0];                                                   \
        int64_t best_index = 0;                                              \
        for (int64_t i = 1; i < n; i++) {                                    \
            ctype v = x[i * stride];                                         \
            if (BETTER(v, best)) {                                           \
                best = v;                                                    \
                best_index = i;                                              \
            }                                                                \
        }                                                                    \
        which##_acc_##Name *a = acc;                                         \
        a->value = best;                                                     \
        a->index = first + best_index;                                       \
    }                                                                        \
    static void which##_merge_##Name(void *acc, const void *later,           \
                                     const ReduceParams *params)             \
    {                                                                        \
        (void)params;                                                        \
        which##_acc_##Name *a = acc;                                         \
        const which##_acc_##Name *b = later;                                 \
        if (BETTER(b->value, a->value)) {                                    \
            *a = *b;                                                         \
        }                                                                    \
    }                                                                        \
    static void which##_finish_##Name(const void *acc, char *out,            \
                                      char *out2, int64_t count,             \
                                      const ReduceParams *params)            \
    {                                                                        \
        (void)count;                                                         \
        (void)params;                                                        \
        const which##_acc_##Name *a = acc;                                   \
        *(int64_t *)out = a->index;                                          \
        if (out2 != NULL) {                                                  \
            *(ctype *)out2 = a->value;                                       \
        }                                                                    \
    }

#define TH_DEFINE_ARGMAX_KERNEL(Name, ctype, py) \
    TH_DEFINE_ARG_KERNEL(Name, ctype, py, argmax, TH_ARG_BETTER_MAX)
#define TH_DEFINE_ARGMIN_KERNEL(Name, ctype, py) \
    TH_DEFINE_ARG_KERNEL(Name, ctype, py, argmin, TH_ARG_BETTER_MIN)
TH_FORALL_ARITH_DTYPES(TH_DEFINE_ARGMAX_KERNEL)
TH_FORALL_ARITH_DTYPES(TH_DEFINE_ARGMIN_KERNEL)

#define TH_ARGMAX_KERNEL_ENTRY(Name, ctype, py)                              \
    {sizeof(argmax_acc_##Name), argmax_fold_##Name, argmax_merge_##Name,     \
     argmax_finish_##Name, NULL},
#define TH_ARGMIN_KERNEL_ENTRY(Name, ctype, py)                              \
    {sizeof(argmin_acc_##Name), argmin_fold_##Name, argmin_merge_##Name,     \
     argmin_finish_##Name, NULL},
static const ReduceKernel argmax_kernels[TH_NUM_DTYPES] = {
    TH_FORALL_ARITH_DTYPES(TH_ARGMAX_KERNEL_ENTRY)
};
static const ReduceKernel argmin_kernels[TH_NUM_DTYPES] = {
    TH_FORALL_ARITH_DTYPES(TH_ARGMIN_KERNEL_ENTRY)
};

/* ---- all, any, count_nonzero -------------------------------------------- */

#define TH_DEFINE_LOGICAL_KERNEL(Name, ctype, py)                            \
    static void all_fold_##Name(const char *in, int64_t n, int64_t stride,   \
                                int64_t first, void *acc,                    \
                                const ReduceParams *params)                  \
    {                                                                        \
        (void)first;                                                         \
        (void)params;                                                        \
        const ctype *x = (const ctype *)in;                                  \
        bool result = true;                                                  \
        for (int64_t i = 0; i < n && result; i++) {                          \
            result = x[i * stride] != 0;                                     \
        }                                                                    \
        *(bool *)acc = result;                                               \
    }                                                                        \
    static void any_fold_##Name(const char *in, int64_t n, int64_t stride,   \
                                int64_t first, void *acc,                    \
                                const ReduceParams *params)                  \
    {                                                                        \
        (void)first;                                                         \
        (void)params;                                                        \
        const ctype *x = (const ctype *)in;                                  \
        bool result = false;                                                 \
        for (int64_t i = 0; i < n && !result; i++) {                         \
            result = x[i * stride] != 0;                                     \
        }                                                                    \
        *(bool *)acc = result;                                               \
    }                                                                        \
    static void count_fold_##Name(const char *in, int64_t n, int64_t stride, \
                                  int64_t first, void *acc,                  \
                                  const ReduceParams *params)                \
    {                                                                        \
        (void)first;                                                         \
        (void)params;                                                        \
        const ctype *x = (const ctype *)in;                                  \
        int64_t count = 0;                                                   \
        for (int64_t i = 0; i < n; i++) {                                    \
            count += x[i * stride] != 0;                                     \
        }                                                                    \
        *(int64_t *)acc = count;                                             \
    }                                                                        \
    static void all_column_##Name(const char *in, int64_t rows,              \
                                  int64_t row_stride, int64_t width,         \
                                  void *accs, const ReduceParams *params)    \
    {                                                                        \
        (void)params;                                                        \
        const ctype *x = (const ctype *)in;                                  \
        bool *acc = accs;                                                    \
        for (int64_t k = 0; k < width; k++) {                                \
            acc[k] = true;                                                   \
        }                                                                    \
        for (int64_t r = 0; r < rows; r++) {                                 \
            for (int64_t k = 0; k < width; k++) {                            \
                acc[k] &= x[r * row_stride + k] != 0;                        \
            }                                                                \
        }                                                                    \
    }                                                                        \
    static void any_column_##Name(const char *in, int64_t rows,              \
                                  int64_t row_stride, int64_t width,         \
                                  void *accs, const ReduceParams *params)    \
    {                                                                        \
        (void)params;                                                        \
        const ctype *x = (const ctype *)in;                                  \
        bool *acc = accs;                                                    \
        for (int64_t k = 0; k < width; k++) {                                \
            acc[k] = false;                                                  \
        }                                                                    \
        for (int64_t r = 0; r < rows; r++) {                                 \
            for (int64_t k = 0; k < width; k++) {                            \
                acc[k] |= x[r * row_stride + k] != 0;                        \
            }                                                                \
        }                                                                    \
    }                                                                        \
    static void count_column_##Name(const char *in, int64_t rows,            \
                                    int64_t row_stride, int64_t width,       \
                                    void *accs, const ReduceParams *params)  \
    {                                                                        \
        (void)params;                                                        \
        const ctype *x = (const ctype *)in;                                  \
        int64_t *acc = accs;                                                 \
        for (int64_t k = 0; k < width; k++) {                                \
            acc[k] = 0;                                                      \
        }                                                                    \
        for (int64_t r = 0; r < rows; r++) {                                 \
            for (int64_t k = 0; k < width; k++) {                            \
                acc[k] += x[r * row_stride + k] != 0;                        \
            }                                                                \
        }                                                                    \
    }
TH_FORALL_ARITH_DTYPES(TH_DEFINE_LOGICAL_KERNEL)

static void
all_merge(void *acc, const void *later, const ReduceParams *params)
{
    (void)params;
    *(bool *)acc = *(bool *)acc && *(const bool *)later;
}

static void
any_merge(void *acc, const void *later, const ReduceParams *params)
{
    (void)params;
    *(bool *)acc = *(bool *)acc || *(const bool *)later;
}

static void
bool_finish(const void *acc, char *out, char *out2, int64_t count,
            const ReduceParams *params)
{
    (void)out2;
    (void)count;
    (void)params;
    /* bool and uint8 results share the representation 0/1 */
    *(uint8_t *)out = *(const bool *)acc ? 1 : 0;
}

static void
count_merge(void *acc, const void *later, const ReduceParams *params)
{
    (void)params;
    *(int64_t *)acc += *(const int64_t *)later;
}

static void
int64_finish(const void *acc, char *out, char *out2, int64_t count,
             const ReduceParams *params)
{
    (void)out2;
    (void)count;
    (void)params;
    *(int64_t *)out = *(const int64_t *)acc;
}

#define TH_ALL_KERNEL_ENTRY(Name, ctype, py) \
    {sizeof(bool), all_fold_##Name, all_merge, bool_finish,                  \
     all_column_##Name},
#define TH_ANY_KERNEL_ENTRY(Name, ctype, py) \
    {sizeof(bool), any_fold_##Name, any_merge, bool_finish,                  \
     any_column_##Name},
#define TH_COUNT_KERNEL_ENTRY(Name, ctype, py) \
    {sizeof(int64_t), count_fold_##Name, count_merge, int64_finish,          \
     count_column_##Name},
static const ReduceKernel all_kernels[TH_NUM_DTYPES] = {
    TH_FORALL_ARITH_DTYPES(TH_ALL_KERNEL_ENTRY)
};
static const ReduceKernel any_kernels[TH_NUM_DTYPES] = {
    TH_FORALL_ARITH_DTYPES(TH_ANY_KERNEL_ENTRY)
};
static const ReduceKernel count_kernels[TH_NUM_DTYPES] = {
    TH_FORALL_ARITH_DTYPES(TH_COUNT_KERNEL_ENTRY)
};

/* ---- norms, var, logsumexp (floating dtypes) ---------------------------- */

/* The per-element accumulations of the norms: sum |x| (p = 1), sum x^2
 * (p = 2), max |x| (inf), min |x| (-inf), count of x != 0 (p = 0), sum
 * |x|^p (any other p, in double). */
#define TH_DEFINE_NORM_KERNELS(Name, ctype, py)                              \
    static void norm1_fold_##Name(const char *in, int64_t n, int64_t stride, \
                                  int64_t first, void *acc,                  \
                                  const ReduceParams *params)                \
    {                                                                        \
        (void)first;                                                         \
        (void)params;                                                        \
        *(ctype *)acc = abs_pairwise_##Name((const ctype *)in, n, stride, 0); \
    }                                                                        \
    static void norm2_fold_##Name(const char *in, int64_t n, int64_t stride, \
                                  int64_t first, void *acc,                  \
                                  const ReduceParams *params)                \
    {                                                                        \
        (void)first;                                                         \
        (void)params;                                                        \
        *(ctype *)acc =                                                      \
            square_pairwise_##Name((const ctype *)in, n, stride, 0);         \
    }                                                                        \
    static void norm2_finish_##Name(const void *acc, char *out, char *out2,  \
                                    int64_t count,                           \
                                    const ReduceParams *params)              \
    {                                                                        \
        (void)out2;                                                          \
        (void)count;                                                         \
        (void)params;                                                        \
        *(ctype *)out = (ctype)sqrt((double)*(const ctype *)acc);            \
    }                                                                        \
    static void norminf_fold_##Name(const char *in, int64_t n,               \
                                    int64_t stride, int64_t first,           \
                                    void *acc, const ReduceParams *params)   \
    {                                                                        \
        (void)first;                                                         \
        const ctype *x = (const ctype *)in;                                  \
        ctype best = TH_MAP_ABS(x[0]);                                       \
        for (int64_t i = 1; i < n; i++) {                                    \
            ctype v = TH_MAP_ABS(x[i * stride]);                             \
            best = params->p > 0 ? TH_MAX_STEP(best, v)                      \
                                 : TH_MIN_STEP(best, v);                     \
        }                                                                    \
        *(ctype *)acc = best;                                                \
    }                                                                        \
    static void norminf_merge_##Name(void *acc, const void *later,           \
                                     const ReduceParams *params)             \
    {                                                                        \
        ctype best = *(ctype *)acc;                                          \
        ctype v = *(const ctype *)later;                                     \
        *(ctype *)acc =                                                      \
            params->p > 0 ? TH_MAX_STEP(best, v) : TH_MIN_STEP(best, v);     \
    }                                                                        \
    static void normp_fold_##Name(const char *in, int64_t n, int64_t stride, \
                                  int64_t first, void *acc,                  \
                                  const ReduceParams *params)                \
    {                                                                        \
        (void)first;                                                         \
        const ctype *x = (const ctype *)in;                                  \
        double total = 0;                                                    \
        for (int64_t i = 0; i < n; i++) {                                    \
            double v = (double)x[i * stride];                                \
            total += TH_NORM_P_TERM(v, params->p);                           \
        }                                                                    \
        *(double *)acc = total;                                              \
    }                                                                        \
    static void normp_finish_##Name(const void *acc, char *out, char *out2,  \
                                    int64_t count,                           \
                                    const ReduceParams *params)              \
    {                                                                        \
        (void)out2;                                                          \
        (void)count;                                                         \
        double total = *(const double *)acc;                                 \
        *(ctype *)out = (ctype)TH_NORM_P_FINISH(total, params->p);           \
    }
TH_FORALL_FLOAT_DTYPES(TH_DEFINE_NORM_KERNELS)

static void
double_sum_merge(void *acc, const void *later, const ReduceParams *params)
{
    (void)params;
    *(double *)acc += *(const double *)later;
}

/* Index 0: Float32, 1: Float64. */
static const ReduceKernel norm1_kernels[2] = {
    {sizeof(float), norm1_fold_Float32, sum_merge_Float32, sum_finish_Float32,
     NULL},
    {sizeof(double), norm1_fold_Float64, sum_merge_Float64,
     sum_finish_Float64, NULL},
};
static const ReduceKernel norm2_kernels[2] = {
    {sizeof(float), norm2_fold_Float32, sum_merge_Float32,
     norm2_finish_Float32, NULL},
    {sizeof(double), norm2_fold_Float64, sum_merge_Float64,
     norm2_finish_Float64, NULL},
};
static const ReduceKernel norminf_kernels[2] = {
    {sizeof(float), norminf_fold_Float32, norminf_merge_Float32,
     max_finish_Float32, NULL},
    {sizeof(double), norminf_fold_Float64, norminf_merge_Float64,
     max_finish_Float64, NULL},
};
static const ReduceKernel normp_kernels[2] = {
    {sizeof(double), normp_fold_Float32, double_sum_merge,
     normp_finish_Float32, NULL},
    {sizeof(double), normp_fold_Float64, double_sum_merge,
     normp_finish_Float64, NULL},
};

/* var: each fold is an exact two-pass (mean, then the pairwise sum of
 * squared deviations from it); partials are merged with Chan et al.'s
 * formula, which is exact in exact arithmetic. */
typedef struct {
    double mean;
    double m2;
    int64_t n;
} VarAcc;
_Static_assert(sizeof(VarAcc) <= TH_REDUCE_MAX_ACC,
               "every accumulator fits a partials slot");

#define TH_DEFINE_VAR_KERNEL(Name, ctype, py)                                \
    static void var_fold_##Name(const char *in, int64_t n, int64_t stride,   \
                                int64_t first, void *acc,                    \
                                const ReduceParams *params)                  \
    {                                                                        \
        (void)first;                                                         \
        (void)params;                                                        \
        const ctype *x = (const ctype *)in;                                  \
        VarAcc *a = acc;                                                     \
        a->n = n;                                                            \
        a->mean = 0;                                                         \
        a->m2 = 0;                                                           \
        if (n > 0) {                                                         \
            ctype mean = sum_pairwise_##Name(x, n, stride, 0) / (ctype)n;    \
            a->mean = (double)mean;                                          \
            a->m2 = (double)deviation_pairwise_##Name(x, n, stride, mean);   \
        }                                                                    \
    }                                                                        \
    static void var_finish_##Name(const void *acc, char *out, char *out2,    \
                                  int64_t count, const ReduceParams *params) \
    {                                                                        \
        (void)out2;                                                          \
        (void)count;                                                         \
        const VarAcc *a = acc;                                               \
        *(ctype *)out = (ctype)TH_VAR_FINISH(a->m2, a->n, params->correction, \
                                             params->take_sqrt);             \
    }                                                                        \
    static void var_column_##Name(const char *in, int64_t rows,              \
                                  int64_t row_stride, int64_t width,         \
                                  void *accs, const ReduceParams *params)    \
    {                                                                        \
        (void)params;                                                        \
        const ctype *x = (const ctype *)in;                                  \
        ctype mean[TH_COLUMN_TILE];                                          \
        ctype m2[TH_COLUMN_TILE];                                            \
        column_pairwise_##Name(x, rows, row_stride, width, NULL, mean);      \
        for (int64_t k = 0; k < width; k++) {                                \
            mean[k] /= (ctype)rows;                                          \
        }                                                                    \
        column_deviation_##Name(x, rows, row_stride, width, mean, m2);       \
        VarAcc *a = accs;                                                    \
        for (int64_t k = 0; k < width; k++) {                                \
            a[k].mean = (double)mean[k];                                     \
            a[k].m2 = (double)m2[k];                                         \
            a[k].n = rows;                                                   \
        }                                                                    \
    }
TH_FORALL_FLOAT_DTYPES(TH_DEFINE_VAR_KERNEL)

static void
var_merge(void *acc, const void *later, const ReduceParams *params)
{
    (void)params;
    VarAcc *a = acc;
    const VarAcc *b = later;
    if (b->n == 0) {
        return;
    }
    if (a->n == 0) {
        *a = *b;
        return;
    }
    double n = (double)(a->n + b->n);
    double delta = b->mean - a->mean;
    a->m2 += b->m2 + delta * delta * (double)a->n * (double)b->n / n;
    a->mean += delta * (double)b->n / n;
    a->n += b->n;
}

static const ReduceKernel var_kernels[2] = {
    {sizeof(VarAcc), var_fold_Float32, var_merge, var_finish_Float32,
     var_column_Float32},
    {sizeof(VarAcc), var_fold_Float64, var_merge, var_finish_Float64,
     var_column_Float64},
};

/* logsumexp: (max, sum of exp(x - max)); an infinite max is not
 * subtracted (inf - inf would be nan): the result is then the max itself
 * or -inf, as PyTorch's. */
typedef struct {
    double max;
    double sum;
} LogSumExpAcc;

#define TH_DEFINE_LSE_KERNEL(Name, ctype, py)                                \
    static void lse_fold_##Name(const char *in, int64_t n, int64_t stride,   \
                                int64_t first, void *acc,                    \
                                const ReduceParams *params)                  \
    {                                                                        \
        (void)first;                                                         \
        (void)params;                                                        \
        const ctype *x = (const ctype *)in;                                  \
        LogSumExpAcc *a = acc;                                               \
        a->max = n > 0 ? (double)max_run_##Name(x, n, stride) : -INFINITY;  \
        a->sum = 0;                                                          \
        ctype shift = (ctype)TH_LSE_SHIFT(a->max);                           \
        ctype e[TH_EXP_CHUNK];                                               \
        for (int64_t i = 0; i < n; i += TH_EXP_CHUNK) {                      \
            int64_t m = n - i < TH_EXP_CHUNK ? n - i : TH_EXP_CHUNK;         \
            for (int64_t c = 0; c < m; c++) {                                \
                e[c] = x[(i + c) * stride];                                  \
            }                                                                \
            exp_block_##Name(e, &shift, 0, e, m);                            \
            a->sum += (double)sum_pairwise_##Name(e, m, 1, 0);               \
        }                                                                    \
    }                                                                        \
    static void lse_finish_##Name(const void *acc, char *out, char *out2,    \
                                  int64_t count, const ReduceParams *params) \
    {                                                                        \
        (void)out2;                                                          \
        (void)count;                                                         \
        (void)params;                                                        \
        const LogSumExpAcc *a = acc;                                         \
        *(ctype *)out = (ctype)TH_LSE_FINISH(a->sum, a->max);               \
    }
TH_FORALL_FLOAT_DTYPES(TH_DEFINE_LSE_KERNEL)

static void
lse_merge(void *acc, const void *later, const ReduceParams *params)
{
    (void)params;
    LogSumExpAcc *a = acc;
    const LogSumExpAcc *b = later;
    double max = TH_MAX_STEP(a->max, b->max);
    double shift = TH_LSE_SHIFT(max);
    a->sum = a->sum * exp(TH_LSE_SHIFT(a->max) - shift)
             + b->sum * exp(TH_LSE_SHIFT(b->max) - shift);
    a->max = max;
}

static const ReduceKernel lse_kernels[2] = {
    {sizeof(LogSumExpAcc), lse_fold_Float32, lse_merge, lse_finish_Float32,
     NULL},
    {sizeof(LogSumExpAcc), lse_fold_Float64, lse_merge, lse_finish_Float64,
     NULL},
};

static int
float_index(THDtype dtype)
{
    return dtype == TH_Float64 ? 1 : 0;
}

/* ---- walking the kept dims ---------------------------------------------- */

/* Row-major positions over some dims, with the element offsets of up to two
 * operands that walk them. */
typedef struct {
    int ndim;
    int64_t sizes[TH_MAX_DIMS];
    int64_t strides[2][TH_MAX_DIMS];
} Odometer;

typedef struct {
    int64_t counter[TH_MAX_DIMS];
    int64_t offset[2];
} OdometerPos;

static void
odometer_seek(const Odometer *o, int64_t index, OdometerPos *pos)
{
    pos->offset[0] = pos->offset[1] = 0;
    for (int d = o->ndim - 1; d >= 0; d--) {
        pos->counter[d] = index % o->sizes[d];
        index /= o->sizes[d];
        pos->offset[0] += pos->counter[d] * o->strides[0][d];
        pos->offset[1] += pos->counter[d] * o->strides[1][d];
    }
}

static void
odometer_next(const Odometer *o, OdometerPos *pos)
{
    for (int d = o->ndim - 1; d >= 0; d--) {
        pos->offset[0] += o->strides[0][d];
        pos->offset[1] += o->strides[1][d];
        if (++pos->counter[d] < o->sizes[d]) {
            return;
        }
        pos->offset[0] -= o->sizes[d] * o->strides[0][d];
        pos->offset[1] -= o->sizes[d] * o->strides[1][d];
        pos->counter[d] = 0;
    }
}

/* ---- the plan (Note [Reduction plan]) ----------------------------------- */

/* Note [Reduction groups]
 * ~~~~~~~~~~~~~~~~~~~~~~~
 * When the reduced dims do not merge into one run, the contiguous part of
 * them often does: BatchNorm's backward sums a (32, 64, 56, 56) gradient
 * over (0, 2, 3), where dims 2 and 3 are a contiguous run of 3136 floats
 * and dim 0 repeats it at a stride of 64 runs.  Copying the input with the
 * kept dims first (Note [Reduction plan]) reads and writes it all once
 * more before the sum reads it: ~4.1 ms for that gradient on one Zen 4
 * thread.  So the plan instead takes the reduced dims of stride 1 and the
 * ones that merge with them as the run, and the other reduced dims as
 * groups: each output folds its S slices (the run at every position of the
 * group dims, row-major over them, largest stride first) where they lie.
 *
 * The order: each slice is folded on its own (a sum's is the pairwise sum
 * of Note [Accurate sums], down to one number), and the slices' partials
 * are merged as a tree, halving the slices [lo, hi) at lo + (hi - lo) / 2
 * and merging the later half's partial into the earlier's, for every
 * kernel without an index (arg-reductions keep the copy).  A group plan's
 * result does not depend on the thread count: the per-output driver runs
 * it.  Whether a reduction takes groups does: a plan that would take the
 * split driver (fewer outputs than threads) keeps the copy, whose run the
 * split driver cuts by the thread count as before, so such a reduction can
 * round differently with 3 threads than with 1 or 2.
 *
 * A fold per slice costs a call and, for a sum, the reduction of 64 lanes
 * to one, where the copied run would have run on through its blocks; for
 * short runs that outweighs the copy it saves.  So groups are taken only
 * for runs of TH_GROUP_MIN_FOLD elements or more: a lost earlier version
 * with a threshold of 256 cost small reductions +43% instructions per call
 * (17,705 -> 25,303); 1024 did not. */
#define TH_GROUP_MIN_FOLD 1024

typedef struct {
    THTensor *source;  /* owned: the input, or a copy laid out for the run */
    Odometer kept;     /* the kept dims of size > 1; strides[0] in source */
    Odometer groups;   /* the reduced dims outside the run (Note [Reduction
                        * groups]); ndim 0 when the run is all of them */
    int64_t n_out;
    int64_t n_slices;  /* the run's positions in `groups` (1 without) */
    int64_t len;       /* elements per slice */
    int64_t stride;    /* element stride along the run */
    int64_t count;     /* elements per output: len * n_slices */
} ReducePlan;

/* The dims d of `t` with mask[d] (reduced) and size > 1, largest stride
 * first (in dim order when keep_order); the count, or -1 when one has size
 * 0 (the reduction is over nothing). */
static int
reduced_dims_by_stride(const THTensor *t, const bool *mask, bool keep_order,
                       int *dims)
{
    int n = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (mask[d] && t->sizes[d] == 0) {
            return -1;
        }
        if (mask[d] && t->sizes[d] != 1) {
            dims[n++] = d;
        }
    }
    if (!keep_order) { /* largest stride first: insertion sort */
        for (int i = 1; i < n; i++) {
            int d = dims[i];
            int j = i - 1;
            while (j >= 0 && t->strides[dims[j]] < t->strides[d]) {
                dims[j + 1] = dims[j];
                j--;
            }
            dims[j + 1] = d;
        }
    }
    return n;
}

/* The number of dims at the end of dims[0, n) that merge into one run with
 * the last, and the run's length and stride. */
static int
merged_tail(const THTensor *t, const int *dims, int n, int64_t *len,
            int64_t *stride)
{
    *stride = t->strides[dims[n - 1]];
    *len = t->sizes[dims[n - 1]];
    int i = n - 2;
    for (; i >= 0 && t->strides[dims[i]] == *len * *stride; i--) {
        *len *= t->sizes[dims[i]];
    }
    return n - 1 - i;
}

/* Sets the plan's run to the reduced dims dims[0, n) of `t` (largest
 * stride first) that merge with the last; returns how many do.  Dims of
 * size 1 never matter; a dim of size 0 (n < 0) empties the run. */
static int
plan_run(ReducePlan *plan, const THTensor *t, const int *dims, int n)
{
    plan->len = n < 0 ? 0 : 1;
    plan->stride = 1;
    if (n <= 0) {
        return n < 0 ? 0 : n;
    }
    return merged_tail(t, dims, n, &plan->len, &plan->stride);
}

/* Whether the per-output driver gives way to the split one: fewer outputs
 * than threads, each long enough for two chunks. */
static bool
plan_splits(int64_t n_out, int64_t count)
{
    int nthreads = THParallel_getNumThreads();
    return nthreads > 1 && n_out < nthreads
           && count / TH_PARALLEL_GRAIN >= 2;
}

/* Takes the groups of Note [Reduction groups] for the reduced dims
 * dims[0, ngroups) of `t`, which do not merge with the plan's run: false
 * (plan untouched) when the run is not contiguous, is shorter than
 * TH_GROUP_MIN_FOLD, or the plan would be split. */
static bool
plan_groups(ReducePlan *plan, const THTensor *t, const bool *mask,
            const int *dims, int ngroups)
{
    if (plan->stride != 1 || plan->len < TH_GROUP_MIN_FOLD) {
        return false;
    }
    int64_t n_out = 1, n_slices = 1;
    for (int d = 0; d < t->ndim; d++) {
        n_out *= mask[d] ? 1 : t->sizes[d];
    }
    for (int i = 0; i < ngroups; i++) {
        n_slices *= t->sizes[dims[i]];
    }
    if (plan_splits(n_out, plan->len * n_slices)) {
        return false;
    }
    plan->groups.ndim = ngroups;
    for (int i = 0; i < ngroups; i++) {
        plan->groups.sizes[i] = t->sizes[dims[i]];
        plan->groups.strides[0][i] = t->strides[dims[i]];
        plan->groups.strides[1][i] = 0;
    }
    plan->n_slices = n_slices;
    return true;
}

/* The input with its kept dims first and its reduced dims last, copied
 * contiguous; mask is rewritten to match. */
static THTensor *
new_kept_first_copy(THTensor *t, bool *mask)
{
    int64_t order[TH_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (!mask[d]) {
            order[n++] = d;
        }
    }
    int nkept = n;
    for (int d = 0; d < t->ndim; d++) {
        if (mask[d]) {
            order[n++] = d;
        }
    }
    THTensor *permuted = THTensor_newPermute(t, t->ndim, order);
    if (permuted == NULL) {
        return NULL;
    }
    THTensor *copy = THTensor_newContiguous(permuted);
    THTensor_release(permuted);
    for (int d = 0; d < t->ndim; d++) {
        mask[d] = d >= nkept;
    }
    return copy;
}

static int
plan_init(ReducePlan *plan, THTensor *input, const bool *input_mask,
          bool keep_order)
{
    bool mask[TH_MAX_DIMS];
    memcpy(mask, input_mask, sizeof(bool) * (size_t)input->ndim);
    THTensor *source = input;
    THTensor_retain(source);
    plan->groups.ndim = 0;
    plan->n_slices = 1;
    int dims[TH_MAX_DIMS];
    int n = reduced_dims_by_stride(source, mask, keep_order, dims);
    int in_run = plan_run(plan, source, dims, n);
    bool one_run = in_run >= n; /* n < 0: a run of nothing */
    if (!one_run
        && (keep_order
            || !plan_groups(plan, source, mask, dims, n - in_run))) {
        THTensor_release(source);
        source = new_kept_first_copy(input, mask);
        if (source == NULL) {
            return -1;
        }
        n = reduced_dims_by_stride(source, mask, keep_order, dims);
        plan_run(plan, source, dims, n); /* all of them now */
    }
    plan->source = source;
    plan->count = plan->len * plan->n_slices;
    plan->n_out = 1;
    plan->kept.ndim = 0;
    for (int d = 0; d < source->ndim; d++) {
        if (!mask[d] && source->sizes[d] != 1) {
            int k = plan->kept.ndim++;
            plan->kept.sizes[k] = source->sizes[d];
            plan->kept.strides[0][k] = source->strides[d];
            plan->kept.strides[1][k] = 0;
            plan->n_out *= source->sizes[d];
        }
    }
    return 0;
}

/* Whether the columns driver applies: the run is strided while the
 * innermost kept dim is contiguous. */
static bool
plan_uses_columns(const ReducePlan *plan, const ReduceKernel *kernel)
{
    int last = plan->kept.ndim - 1;
    return kernel->column != NULL && last >= 0 && plan->stride != 1
           && plan->len > 1 && plan->kept.strides[0][last] == 1;
}

/* ---- the drivers -------------------------------------------------------- */

typedef struct {
    const ReducePlan *plan;
    const ReduceKernel *kernel;
    const ReduceParams *params;
    char *out;
    char *out2;
    int64_t out_itemsize;
    int64_t out2_itemsize;
    /* split driver */
    int64_t base; /* element offset of the run being split */
    int nchunks;
    unsigned char (*partials)[TH_REDUCE_MAX_ACC];
} ReduceJob;

static char *
source_at(const ReducePlan *plan, int64_t element_offset)
{
    return THTensor_data(plan->source)
           + element_offset * THTensor_itemsize(plan->source);
}

static void
finish_output(const ReduceJob *job, const void *acc, int64_t o)
{
    job->kernel->finish(acc, job->out + o * job->out_itemsize,
                        job->out2 == NULL ? NULL
                                          : job->out2 + o * job->out2_itemsize,
                        job->plan->count, job->params);
}

static void
per_output_job(int64_t begin, int64_t end, void *arg)
{
    const ReduceJob *job = arg;
    const ReducePlan *plan = job->plan;
    _Alignas(16) unsigned char acc[TH_REDUCE_MAX_ACC];
    OdometerPos pos;
    odometer_seek(&plan->kept, begin, &pos);
    for (int64_t o = begin; o < end; o++) {
        job->kernel->fold(source_at(plan, pos.offset[0]), plan->len,
                          plan->stride, 0, acc, job->params);
        finish_output(job, acc, o);
        odometer_next(&plan->kept, &pos);
    }
}

/* The number of merges the tree of Note [Reduction groups] over n slices
 * makes once slice i is folded: one for each node [lo, hi) of two or more
 * slices that ends with it (hi == i + 1), the deepest first. */
static int
merges_after_slice(int64_t i, int64_t n)
{
    int merges = 0;
    int64_t lo = 0, hi = n;
    while (hi - lo > 1) {
        merges += hi == i + 1;
        int64_t mid = lo + (hi - lo) / 2;
        if (i < mid) {
            hi = mid;
        }
        else {
            lo = mid;
        }
    }
    return merges;
}

/* Outputs folded side by side by the group driver, and the partials each
 * may have pending: the depth of the slices' tree plus one. */
#define TH_GROUP_OUTPUTS 16
#define TH_GROUP_DEPTH 64

/* The group driver (Note [Reduction groups]): up to TH_GROUP_OUTPUTS
 * outputs at a time, slice by slice, so that the slices of neighbouring
 * outputs, which neighbour in memory, are read one after another.  Each
 * output's partials wait on its own stack and are merged in the tree's
 * order (post-order: the later half's partial into the earlier's), so
 * an output's result never depends on which outputs share its pass. */
static void
group_job(int64_t begin, int64_t end, void *arg)
{
    const ReduceJob *job = arg;
    const ReducePlan *plan = job->plan;
    const ReduceKernel *kernel = job->kernel;
    _Alignas(16) unsigned char pending[TH_GROUP_OUTPUTS][TH_GROUP_DEPTH]
                                      [TH_REDUCE_MAX_ACC];
    int64_t base[TH_GROUP_OUTPUTS];
    OdometerPos out_pos;
    odometer_seek(&plan->kept, begin, &out_pos);
    for (int64_t first = begin; first < end; first += TH_GROUP_OUTPUTS) {
        int width = end - first < TH_GROUP_OUTPUTS ? (int)(end - first)
                                                   : TH_GROUP_OUTPUTS;
        for (int k = 0; k < width; k++) {
            base[k] = out_pos.offset[0];
            odometer_next(&plan->kept, &out_pos);
        }
        int height = 0; /* partials pending per output */
        OdometerPos slice;
        odometer_seek(&plan->groups, 0, &slice);
        for (int64_t s = 0; s < plan->n_slices; s++) {
            int merges = merges_after_slice(s, plan->n_slices);
            for (int k = 0; k < width; k++) {
                kernel->fold(source_at(plan, base[k] + slice.offset[0]),
                             plan->len, plan->stride, 0, pending[k][height],
                             job->params);
                for (int m = 0; m < merges; m++) {
                    kernel->merge(pending[k][height - m - 1],
                                  pending[k][height - m], job->params);
                }
            }
            height += 1 - merges;
            odometer_next(&plan->groups, &slice);
        }
        for (int k = 0; k < width; k++) {
            finish_output(job, pending[k][0], first + k);
        }
    }
}

/* Chunk c of the run covers [c * len / nchunks, (c + 1) * len / nchunks). */
static void
split_chunk_job(int64_t begin, int64_t end, void *arg)
{
    const ReduceJob *job = arg;
    const ReducePlan *plan = job->plan;
    for (int64_t c = begin; c < end; c++) {
        int64_t lo = c * plan->len / job->nchunks;
        int64_t hi = (c + 1) * plan->len / job->nchunks;
        job->kernel->fold(source_at(plan, job->base + lo * plan->stride),
                          hi - lo, plan->stride, lo, job->partials[c],
                          job->params);
    }
}

static void
run_split(ReduceJob *job, int nchunks)
{
    const ReducePlan *plan = job->plan;
    _Alignas(16) unsigned char partials[TH_PARALLEL_MAX_THREADS]
                                       [TH_REDUCE_MAX_ACC];
    job->partials = partials;
    job->nchunks = nchunks;
    OdometerPos pos;
    odometer_seek(&plan->kept, 0, &pos);
    for (int64_t o = 0; o < plan->n_out; o++) {
        job->base = pos.offset[0];
        THParallel_for(nchunks, 1, split_chunk_job, job);
        for (int c = 1; c < nchunks; c++) {
            job->kernel->merge(partials[0], partials[c], job->params);
        }
        finish_output(job, partials[0], o);
        odometer_next(&plan->kept, &pos);
    }
}

/* Columns: work item w is tile (w % ntiles) of outer position (w / ntiles),
 * where the outer positions are the kept dims but the innermost. */
typedef struct {
    const ReduceJob *job;
    Odometer outer;
    int64_t width;
    int64_t tile;
    int64_t ntiles;
} ColumnJob;

static void
column_job(int64_t begin, int64_t end, void *arg)
{
    const ColumnJob *cj = arg;
    const ReduceJob *job = cj->job;
    const ReducePlan *plan = job->plan;
    size_t acc_size = job->kernel->acc_size;
    _Alignas(16) unsigned char accs[TH_COLUMN_TILE * TH_REDUCE_MAX_ACC];
    for (int64_t w = begin; w < end; w++) {
        int64_t outer_index = w / cj->ntiles;
        int64_t first = (w % cj->ntiles) * cj->tile;
        int64_t width = cj->width - first < cj->tile ? cj->width - first
                                                     : cj->tile;
        OdometerPos pos;
        odometer_seek(&cj->outer, outer_index, &pos);
        job->kernel->column(source_at(plan, pos.offset[0] + first), plan->len,
                            plan->stride, width, accs, job->params);
        for (int64_t k = 0; k < width; k++) {
            finish_output(job, accs + (size_t)k * acc_size,
                          outer_index * cj->width + first + k);
        }
    }
}

static int64_t
ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* The columns per tile (Note [Column tiles]): as few tiles as fit, but
 * enough for every thread when there are few outer positions, each a
 * multiple of 16 columns (whole vectors) and at least TH_COLUMN_MIN_TILE. */
static int64_t
column_tile_width(int64_t width, int64_t nouter)
{
    int64_t ntiles = ceil_div(width, TH_COLUMN_TILE);
    int64_t for_threads = ceil_div(THParallel_getNumThreads(), nouter);
    int64_t most = ceil_div(width, TH_COLUMN_MIN_TILE);
    if (ntiles < for_threads) {
        ntiles = for_threads < most ? for_threads : most;
    }
    int64_t tile = ceil_div(ceil_div(width, ntiles), 16) * 16;
    return tile < TH_COLUMN_TILE ? tile : TH_COLUMN_TILE;
}

static void
run_columns(const ReduceJob *job)
{
    const ReducePlan *plan = job->plan;
    ColumnJob cj;
    cj.job = job;
    cj.outer = plan->kept;
    cj.outer.ndim--;
    cj.width = plan->kept.sizes[plan->kept.ndim - 1];
    int64_t nouter = plan->n_out / cj.width;
    cj.tile = column_tile_width(cj.width, nouter);
    cj.ntiles = ceil_div(cj.width, cj.tile);
    int64_t per_item = plan->len * cj.tile;
    THParallel_for(nouter * cj.ntiles,
                   per_item >= TH_PARALLEL_GRAIN
                       ? 1 : TH_PARALLEL_GRAIN / per_item,
                   column_job, &cj);
}

static void
run_plan(const ReducePlan *plan, const ReduceKernel *kernel,
         const ReduceParams *params, THTensor *out, THTensor *out2)
{
    ReduceJob job = {
        .plan = plan,
        .kernel = kernel,
        .params = params,
        .out = THTensor_data(out),
        .out2 = out2 == NULL ? NULL : THTensor_data(out2),
        .out_itemsize = THTensor_itemsize(out),
        .out2_itemsize = out2 == NULL ? 0 : THTensor_itemsize(out2),
    };
    if (plan->n_out == 0) {
        return;
    }
    if (plan->n_slices == 1 && plan_splits(plan->n_out, plan->count)) {
        int nthreads = THParallel_getNumThreads();
        int64_t max_chunks = plan->len / TH_PARALLEL_GRAIN;
        run_split(&job, max_chunks < nthreads ? (int)max_chunks : nthreads);
    }
    else if (plan_uses_columns(plan, kernel)) { /* never a group plan: stride 1 */
        run_columns(&job);
    }
    else {
        int64_t len = plan->count > 0 ? plan->count : 1;
        THParallel_for(plan->n_out,
                       len >= TH_PARALLEL_GRAIN ? 1 : TH_PARALLEL_GRAIN / len,
                       plan->n_slices > 1 ? group_job : per_output_job, &job);
    }
}

/* ---- entry points ------------------------------------------------------- */

int
THReduce_dimMask(const THTensor *tensor, int ndims, const int64_t *dims,
                 bool *mask)
{
    for (int d = 0; d < tensor->ndim; d++) {
        mask[d] = ndims == 0;
    }
    bool seen[TH_MAX_DIMS] = {false};
    for (int i = 0; i < ndims; i++) {
        int64_t d;
        if (THTensor_wrapDim(dims[i], tensor->ndim, &d) < 0) {
            return -1;
        }
        if (seen[d]) {
            return THError_set(TH_ERR_RUNTIME,
                               "dim %lld appears multiple times in the list "
                               "of dims",
                               (long long)d);
        }
        seen[d] = true;
        if (d < tensor->ndim) { /* a 0-d tensor's dim 0 is no real dim */
            mask[d] = true;
        }
    }
    return 0;
}

/* The result of reducing `input` over `mask` with one kernel: a new
 * contiguous tensor of out_dtype (and a second one, of out2_dtype, when
 * out2 is not NULL). */
static THTensor *
reduce_native(THTensor *input, const bool *mask, bool keepdim,
              bool keep_order, const ReduceKernel *kernel,
              const ReduceParams *params, THDtype out_dtype, THTensor **out2,
              THDtype out2_dtype)
{
    int64_t sizes[TH_MAX_DIMS];
    int ndim = 0;
    for (int d = 0; d < input->ndim; d++) {
        if (!mask[d]) {
            sizes[ndim++] = input->sizes[d];
        }
        else if (keepdim) {
            sizes[ndim++] = 1;
        }
    }
    THDeviceType device = input->storage->device;
    THTensor *out = THTensor_newEmpty(ndim, sizes, out_dtype, device);
    if (out == NULL) {
        return NULL;
    }
    if (out2 != NULL) {
        *out2 = THTensor_newEmpty(ndim, sizes, out2_dtype, device);
        if (*out2 == NULL) {
            THTensor_release(out);
            return NULL;
        }
    }
    ReducePlan plan;
    if (plan_init(&plan, input, mask, keep_order) < 0) {
        THTensor_release(out);
        if (out2 != NULL) {
            THTensor_release(*out2);
            *out2 = NULL;
        }
        return NULL;
    }
    run_plan(&plan, kernel, params, out, out2 == NULL ? NULL : *out2);
    THTensor_release(plan.source);
    return out;
}

/* Note [Reducing half precision]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * float16 and bfloat16 have no kernels of their own (Note [Half-precision
 * dtypes] in THDtype.h): their callers pick the float32 kernel
 * (kernels[THDtype_computeDtype(dtype)]), reduce() and new_from_lines()
 * run it on a float32 copy of the input, accumulating in float32 as
 * PyTorch does, and round each result once to the 16-bit dtype. */
static THTensor *
reduce(THTensor *input, const bool *mask, bool keepdim, bool keep_order,
       const ReduceKernel *kernel, const ReduceParams *params,
       THDtype out_dtype, THTensor **out2, THDtype out2_dtype)
{
    if (!THDtype_isHalf(input->dtype)) {
        return reduce_native(input, mask, keepdim, keep_order, kernel, params,
                             out_dtype, out2, out2_dtype);
    }
    THTensor *wide = THTensor_newCast(input, TH_Float32, false);
    if (wide == NULL) {
        return NULL;
    }
    THTensor *result = reduce_native(
        wide, mask, keepdim, keep_order, kernel, params,
        THDtype_computeDtype(out_dtype), out2,
        THDtype_computeDtype(out2_dtype));
    THTensor_release(wide);
    if (THTensor_convertOwned(&result, out_dtype) < 0
        || (out2 != NULL && THTensor_convertOwned(out2, out2_dtype) < 0)) {
        THTensor_release(result);
        if (out2 != NULL) {
            THTensor_release(*out2);
            *out2 = NULL;
        }
        return NULL;
    }
    return result;
}

/* `input` converted to dtype (retained as is when dtype < 0 or equal). */
static THTensor *
new_input_as(THTensor *input, int dtype)
{
    if (dtype < 0) {
        THTensor_retain(input);
        return input;
    }
    return THTensor_newCast(input, (THDtype)dtype, false);
}

/* sum/prod share the dtype rules; the kernels give int64 for integer
 * inputs, converted to an integer `dtype` afterwards. */
static THTensor *
sum_or_prod(THTensor *input, const bool *mask, bool keepdim, int dtype,
            const ReduceKernel *kernels)
{
    static const ReduceParams params = {0};
    THTensor *source = new_input_as(input, dtype);
    if (source == NULL) {
        return NULL;
    }
    THDtype acc_dtype = sum_result_dtype(source->dtype);
    THTensor *result = reduce(source, mask, keepdim, false,
                              &kernels[THDtype_computeDtype(source->dtype)], &params,
                              acc_dtype,
                              NULL, TH_Int64);
    THTensor_release(source);
    if (result != NULL && dtype >= 0 && (THDtype)dtype != acc_dtype) {
        THTensor *cast = THTensor_newCast(result, (THDtype)dtype, false);
        THTensor_release(result);
        return cast;
    }
    return result;
}

THTensor *
THTensor_newSum(THTensor *input, const bool *mask, bool keepdim, int dtype)
{
    return sum_or_prod(input, mask, keepdim, dtype, sum_kernels);
}

THTensor *
THTensor_newProd(THTensor *input, const bool *mask, bool keepdim, int dtype)
{
    return sum_or_prod(input, mask, keepdim, dtype, prod_kernels);
}

THTensor *
THTensor_newMean(THTensor *input, const bool *mask, bool keepdim, int dtype)
{
    static const ReduceParams params = {0};
    if (dtype >= 0 && !THDtype_isFloating((THDtype)dtype)) {
        THError_set(TH_ERR_RUNTIME,
                    "mean(): could not infer output dtype. Optional dtype "
                    "must be either a floating point or complex dtype. Got: "
                    "%s",
                    THDtype_scalarTypeName((THDtype)dtype));
        return NULL;
    }
    if (dtype < 0 && !THDtype_isFloating(input->dtype)) {
        THError_set(TH_ERR_RUNTIME,
                    "mean(): could not infer output dtype. Input dtype must "
                    "be either a floating point or complex dtype. Got: %s",
                    THDtype_scalarTypeName(input->dtype));
        return NULL;
    }
    THTensor *source = new_input_as(input, dtype);
    if (source == NULL) {
        return NULL;
    }
    THTensor *result = reduce(source, mask, keepdim, false,
                              &mean_kernels[float_index(source->dtype)],
                              &params, source->dtype, NULL, TH_Int64);
    THTensor_release(source);
    return result;
}

/* max/min/argmax have no identity: reducing nothing is an error.  Full
 * reductions and dim reductions have different messages in PyTorch. */
static int
check_nonempty_reduction(const THTensor *input, const bool *mask,
                         bool full, const char *fname, bool full_is_index)
{
    if (full) {
        if (input->numel == 0) {
            return THError_set(
                full_is_index ? TH_ERR_INDEX : TH_ERR_RUNTIME,
                "%s(): Expected reduction dim to be specified for "
                "input.numel() == 0.%s",
                fname,
                full_is_index ? ""
                              : " Specify the reduction dim with the 'dim' "
                                "argument.");
        }
        return 0;
    }
    for (int d = 0; d < input->ndim; d++) {
        if (mask[d] && input->sizes[d] == 0) {
            return THError_set(TH_ERR_INDEX,
                               "%s(): Expected reduction dim %d to have "
                               "non-zero size.",
                               fname, d);
        }
    }
    return 0;
}

static bool
mask_is_full(const THTensor *input, const bool *mask)
{
    for (int d = 0; d < input->ndim; d++) {
        if (!mask[d]) {
            return false;
        }
    }
    return true;
}

THTensor *
THTensor_newAmax(THTensor *input, const bool *mask, bool keepdim,
                 bool is_max, const char *fname)
{
    static const ReduceParams params = {0};
    if (check_nonempty_reduction(input, mask, mask_is_full(input, mask),
                                 fname, false)
        < 0) {
        return NULL;
    }
    const ReduceKernel *kernels = is_max ? max_kernels : min_kernels;
    return reduce(input, mask, keepdim, false,
                  &kernels[THDtype_computeDtype(input->dtype)], &params,
                  input->dtype, NULL, TH_Int64);
}

THTensor *
THTensor_newArgmax(THTensor *input, const int64_t *dim, bool keepdim,
                   bool is_max)
{
    static const ReduceParams params = {0};
    const char *fname = is_max ? "argmax" : "argmin";
    bool mask[TH_MAX_DIMS];
    if (input->dtype == TH_Bool) {
        THError_set(TH_ERR_RUNTIME, "%s(): does not support bool input",
                    fname);
        return NULL;
    }
    /* dim NULL: the mask of every dim (the flattened input) */
    if (THReduce_dimMask(input, dim != NULL ? 1 : 0, dim, mask) < 0
        || check_nonempty_reduction(input, mask, dim == NULL, fname, true)
               < 0) {
        return NULL;
    }
    const ReduceKernel *kernels = is_max ? argmax_kernels : argmin_kernels;
    return reduce(input, mask, keepdim, true,
                  &kernels[THDtype_computeDtype(input->dtype)], &params,
                  TH_Int64, NULL, TH_Int64);
}

int
THTensor_maxDim(THTensor *input, int64_t dim, bool keepdim, bool is_max,
                THTensor **values, THTensor **indices)
{
    static const ReduceParams params = {0};
    bool mask[TH_MAX_DIMS];
    *values = *indices = NULL;
    if (THReduce_dimMask(input, 1, &dim, mask) < 0
        || check_nonempty_reduction(input, mask, false,
                                    is_max ? "max" : "min", false)
               < 0) {
        return -1;
    }
    const ReduceKernel *kernels = is_max ? argmax_kernels : argmin_kernels;
    *indices = reduce(input, mask, keepdim, true,
                      &kernels[THDtype_computeDtype(input->dtype)], &params,
                      TH_Int64, values, input->dtype);
    return *indices == NULL ? -1 : 0;
}

static int
check_floating(const THTensor *input, const char *message_prefix)
{
    if (!THDtype_isFloating(input->dtype)) {
        return THError_set(TH_ERR_RUNTIME, "%s%s", message_prefix,
                           THDtype_scalarTypeName(input->dtype));
    }
    return 0;
}

THTensor *
THTensor_newVar(THTensor *input, const bool *mask, double correction,
                bool keepdim, bool take_sqrt)
{
    ReduceParams params = {.correction = correction, .take_sqrt = take_sqrt};
    if (!THDtype_isFloating(input->dtype)) {
        THError_set(TH_ERR_RUNTIME,
                    "std and var only support floating point and complex "
                    "dtypes");
        return NULL;
    }
    return reduce(input, mask, keepdim, false,
                  &var_kernels[float_index(input->dtype)], &params,
                  input->dtype, NULL, TH_Int64);
}

THTensor *
THTensor_newNorm(THTensor *input, double p, const bool *mask, bool keepdim,
                 int dtype)
{
    ReduceParams params = {.p = p};
    if (check_floating(input,
                       "linalg.vector_norm: Expected a floating point or "
                       "complex tensor as input. Got ")
        < 0) {
        return NULL;
    }
    if (dtype >= 0 && !THDtype_isFloating((THDtype)dtype)) {
        THError_set(TH_ERR_RUNTIME,
                    "linalg.vector_norm: dtype should be floating point or "
                    "complex, but got %s",
                    THDtype_scalarTypeName((THDtype)dtype));
        return NULL;
    }
    if (dtype >= 0
        && THDtype_promote(input->dtype, (THDtype)dtype) != (THDtype)dtype) {
        THError_set(TH_ERR_RUNTIME,
                    "linalg.vector_norm: the dtype of the input (%s) should "
                    "be convertible without narrowing to the specified "
                    "dtype (%s)",
                    THDtype_scalarTypeName(input->dtype),
                    THDtype_scalarTypeName((THDtype)dtype));
        return NULL;
    }
    bool no_identity = isinf(p) || p < 0;
    if (no_identity && input->numel == 0) {
        int dims[TH_MAX_DIMS];
        if (reduced_dims_by_stride(input, mask, false, dims) < 0) {
            THError_set(TH_ERR_RUNTIME,
                        "linalg.vector_norm cannot compute the %s norm on an "
                        "empty tensor because the operation does not have an "
                        "identity",
                        isinf(p) ? (p > 0 ? "inf" : "-inf") : "negative");
            return NULL;
        }
    }
    THTensor *source = new_input_as(input, dtype);
    if (source == NULL) {
        return NULL;
    }
    int which = float_index(source->dtype);
    const ReduceKernel *kernel = p == 1   ? &norm1_kernels[which]
                                 : p == 2 ? &norm2_kernels[which]
                                 : isinf(p) ? &norminf_kernels[which]
                                            : &normp_kernels[which];
    THTensor *result = reduce(source, mask, keepdim, false, kernel, &params,
                              source->dtype, NULL, TH_Int64);
    THTensor_release(source);
    return result;
}

THTensor *
THTensor_newLogsumexp(THTensor *input, const bool *mask, bool keepdim,
                      THDtype float_dtype)
{
    static const ReduceParams params = {0};
    THTensor *source = new_input_as(
        input, THDtype_isFloating(input->dtype) ? -1 : (int)float_dtype);
    if (source == NULL) {
        return NULL;
    }
    THTensor *result = reduce(source, mask, keepdim, false,
                              &lse_kernels[float_index(source->dtype)],
                              &params, source->dtype, NULL, TH_Int64);
    THTensor_release(source);
    return result;
}

THTensor *
THTensor_newAll(THTensor *input, const bool *mask, bool keepdim)
{
    static const ReduceParams params = {0};
    THDtype out = input->dtype == TH_UInt8 ? TH_UInt8 : TH_Bool;
    return reduce(input, mask, keepdim, false, &all_kernels[THDtype_computeDtype(input->dtype)],
                  &params, out, NULL, TH_Int64);
}

THTensor *
THTensor_newAny(THTensor *input, const bool *mask, bool keepdim)
{
    static const ReduceParams params = {0};
    THDtype out = input->dtype == TH_UInt8 ? TH_UInt8 : TH_Bool;
    return reduce(input, mask, keepdim, false, &any_kernels[THDtype_computeDtype(input->dtype)],
                  &params, out, NULL, TH_Int64);
}

THTensor *
THTensor_newCountNonzero(THTensor *input, const bool *mask)
{
    static const ReduceParams params = {0};
    return reduce(input, mask, false, false, &count_kernels[THDtype_computeDtype(input->dtype)],
                  &params, TH_Int64, NULL, TH_Int64);
}

/* ---- line operations: softmax and the scans -------------------------------
 *
 * A line is the run of elements along `dim` at one position of the other
 * dims; the output has the input's shape, contiguous.  A line function
 * processes `width` adjacent lines at once: element i of line j is at
 * in[i * in_stride + j] (and out[i * out_stride + j]).  When dim is not the
 * last dim and the input's last dim is contiguous (softmax over dim 0 of a
 * row-major matrix), lines go in tiles of up to TH_LINE_TILE, so each step
 * reads a contiguous piece of a row instead of one element per row; else
 * each line is one work item of width 1.
 */
#define TH_LINE_TILE 64

typedef void (*LineFn)(const char *in, int64_t in_stride, char *out,
                       int64_t out_stride, int64_t n, int64_t width,
                       const void *ctx);

typedef struct {
    Odometer outer;   /* the dims walked line by line (or tile by tile) */
    const char *in;
    char *out;
    int64_t in_itemsize;
    int64_t out_itemsize;
    int64_t in_stride;
    int64_t out_stride;
    int64_t n;
    int64_t width;    /* lines side by side: the last dim's size, or 1 */
    int64_t ntiles;   /* tiles per outer position */
    LineFn fn;
    const void *ctx;
} LinesJob;

static void
lines_job(int64_t begin, int64_t end, void *arg)
{
    const LinesJob *job = arg;
    for (int64_t item = begin; item < end; item++) {
        OdometerPos pos;
        int64_t first = (item % job->ntiles) * TH_LINE_TILE;
        int64_t width = job->width - first < TH_LINE_TILE ? job->width - first
                                                          : TH_LINE_TILE;
        odometer_seek(&job->outer, item / job->ntiles, &pos);
        job->fn(job->in + (pos.offset[0] + first) * job->in_itemsize,
                job->in_stride,
                job->out + (pos.offset[1] + first) * job->out_itemsize,
                job->out_stride, job->n, width, job->ctx);
    }
}

/* out has in's shape; dim has been wrapped (0 for a 0-d tensor). */
static void
run_lines(const THTensor *in, THTensor *out, int64_t dim, LineFn fn,
          const void *ctx)
{
    int last = in->ndim - 1;
    bool tiled = in->ndim >= 2 && dim != last && in->strides[last] == 1;
    LinesJob job = {
        .in = THTensor_data(in),
        .out = THTensor_data(out),
        .in_itemsize = THTensor_itemsize(in),
        .out_itemsize = THTensor_itemsize(out),
        .in_stride = in->ndim > 0 ? in->strides[dim] : 1,
        .out_stride = out->ndim > 0 ? out->strides[dim] : 1,
        .n = in->ndim > 0 ? in->sizes[dim] : 1,
        .width = tiled ? in->sizes[last] : 1,
        .fn = fn,
        .ctx = ctx,
    };
    job.ntiles = (job.width + TH_LINE_TILE - 1) / TH_LINE_TILE;
    int64_t nouter = 1;
    job.outer.ndim = 0;
    for (int d = 0; d < in->ndim; d++) {
        if (d != dim && !(tiled && d == last)) {
            int k = job.outer.ndim++;
            job.outer.sizes[k] = in->sizes[d];
            job.outer.strides[0][k] = in->strides[d];
            job.outer.strides[1][k] = out->strides[d];
            nouter *= in->sizes[d];
        }
    }
    if (nouter == 0 || job.n == 0 || job.width == 0) {
        return;
    }
    int64_t per_item = job.n * (job.width < TH_LINE_TILE ? job.width
                                                         : TH_LINE_TILE);
    int64_t grain =
        per_item >= TH_PARALLEL_GRAIN ? 1 : TH_PARALLEL_GRAIN / per_item;
    THParallel_for(nouter * job.ntiles, grain, lines_job, &job);
}

/* softmax: per line, the max, then exp(x - max) and its sum (in double),
 * then the scaling; log_softmax subtracts log(sum) instead.  The exps go
 * through exp_block_<Name> (Note [Vectorisable exp] in THFloatFormulas.h):
 * along the line in chunks for a single line, across the tile row by row
 * for tiles. */
#define TH_DEFINE_SOFTMAX_LINES(Name, ctype, py)                             \
    static void softmax_lines_##Name(const char *in, int64_t in_stride,      \
                                     char *out, int64_t out_stride,          \
                                     int64_t n, int64_t width,               \
                                     const void *ctx)                        \
    {                                                                        \
        const bool log_softmax = *(const bool *)ctx;                         \
        const ctype *x = (const ctype *)in;                                  \
        ctype *y = (ctype *)out;                                             \
        ctype max[TH_LINE_TILE];                                             \
        double total[TH_LINE_TILE] = {0};                                    \
        ctype e[TH_EXP_CHUNK];                                               \
        if (width == 1) {                                                    \
            max[0] = max_run_##Name(x, n, in_stride);                        \
            for (int64_t i = 0; i < n; i += TH_EXP_CHUNK) {                  \
                int64_t m = n - i < TH_EXP_CHUNK ? n - i : TH_EXP_CHUNK;     \
                for (int64_t c = 0; c < m && in_stride != 1; c++) {          \
                    e[c] = x[(i + c) * in_stride];                           \
                }                                                            \
                exp_block_##Name(in_stride == 1 ? x + i : e, max, 0, e, m);  \
                total[0] += (double)sum_pairwise_##Name(e, m, 1, 0);         \
                if (!log_softmax && out_stride == 1) {                       \
                    memcpy(y + i, e, sizeof(ctype) * (size_t)m);             \
                }                                                            \
                for (int64_t c = 0; c < m && !log_softmax && out_stride != 1; \
                     c++) {                                                  \
                    y[(i + c) * out_stride] = e[c];                          \
                }                                                            \
            }                                                                \
        }                                                                    \
        else {                                                               \
            memcpy(max, x, sizeof(ctype) * (size_t)width);                   \
            for (int64_t i = 1; i < n; i++) {                                \
                for (int64_t j = 0; j < width; j++) {                        \
                    ctype v = x[i * in_stride + j];                          \
                    max[j] = TH_MAX_STEP(max[j], v);                         \
                }                                                            \
            }                                                                \
            for (int64_t i = 0; i < n; i++) {                                \
                exp_block_##Name(x + i * in_stride, max, 1, e, width);       \
                for (int64_t j = 0; j < width; j++) {                        \
                    total[j] += (double)e[j];                                \
                }                                                            \
                for (int64_t j = 0; j < width && !log_softmax; j++) {        \
                    y[i * out_stride + j] = e[j];                            \
                }                                                            \
            }                                                                \
        }                                                                    \
        for (int64_t j = 0; j < width; j++) {                                \
            /* log_softmax: y = x - (max + log(sum)); softmax: y *= 1/sum */ \
            max[j] = log_softmax                                             \
                         ? TH_LOG_SOFTMAX_SHIFT(ctype, max[j], total[j])     \
                         : TH_SOFTMAX_SCALE(ctype, total[j]);                \
        }                                                                    \
        if (width == 1 && in_stride == 1 && out_stride == 1) {               \
            ctype factor = max[0]; /* one contiguous line: vectorised */     \
            for (int64_t i = 0; i < n; i++) {                                \
                y[i] = log_softmax ? x[i] - factor : y[i] * factor;          \
            }                                                                \
            return;                                                          \
        }                                                                    \
        for (int64_t i = 0; i < n; i++) {                                    \
            for (int64_t j = 0; j < width; j++) {                            \
                y[i * out_stride + j] = log_softmax                          \
                                            ? x[i * in_stride + j] - max[j]  \
                                            : y[i * out_stride + j] * max[j]; \
            }                                                                \
        }                                                                    \
    }
TH_FORALL_FLOAT_DTYPES(TH_DEFINE_SOFTMAX_LINES)

static const LineFn softmax_lines[2] = {softmax_lines_Float32,
                                        softmax_lines_Float64};

/* The scans run in the output dtype (the input is converted first), with
 * integers accumulated as wrapping uint64_t. */
#define TH_DEFINE_SCAN_LINES(Name, ctype, py, which, OP, IDENTITY)           \
    static void which##_lines_##Name(const char *in, int64_t in_stride,      \
                                     char *out, int64_t out_stride,          \
                                     int64_t n, int64_t width,               \
                                     const void *ctx)                        \
    {                                                                        \
        (void)ctx;                                                           \
        const ctype *x = (const ctype *)in;                                  \
        ctype *y = (ctype *)out;                                             \
        TH_ACC_##Name total[TH_LINE_TILE];                                   \
        if (width == 1) { /* one line: the running value in a register */  \
            TH_ACC_##Name running = IDENTITY;                                \
            for (int64_t i = 0; i < n; i++) {                                \
                running OP (TH_ACC_##Name)x[i * in_stride];                  \
                y[i * out_stride] = (ctype)running;                          \
            }                                                                \
            return;                                                          \
        }                                                                    \
        for (int64_t j = 0; j < width; j++) {                                \
            total[j] = IDENTITY;                                             \
        }                                                                    \
        for (int64_t i = 0; i < n; i++) {                                    \
            for (int64_t j = 0; j < width; j++) {                            \
                total[j] OP (TH_ACC_##Name)x[i * in_stride + j];             \
                y[i * out_stride + j] = (ctype)total[j];                     \
            }                                                                \
        }                                                                    \
    }
#define TH_DEFINE_CUMSUM_LINES(Name, ctype, py) \
    TH_DEFINE_SCAN_LINES(Name, ctype, py, cumsum, +=, 0)
#define TH_DEFINE_CUMPROD_LINES(Name, ctype, py) \
    TH_DEFINE_SCAN_LINES(Name, ctype, py, cumprod, *=, 1)
TH_FORALL_ARITH_DTYPES(TH_DEFINE_CUMSUM_LINES)
TH_FORALL_ARITH_DTYPES(TH_DEFINE_CUMPROD_LINES)

#define TH_CUMSUM_ENTRY(Name, ctype, py) cumsum_lines_##Name,
#define TH_CUMPROD_ENTRY(Name, ctype, py) cumprod_lines_##Name,
static const LineFn cumsum_lines[TH_NUM_DTYPES] = {
    TH_FORALL_ARITH_DTYPES(TH_CUMSUM_ENTRY)
};
static const LineFn cumprod_lines[TH_NUM_DTYPES] = {
    TH_FORALL_ARITH_DTYPES(TH_CUMPROD_ENTRY)
};

/* A new contiguous tensor of `input`'s shape filled by fn along `dim`. */
static THTensor *
new_from_lines(THTensor *input, int64_t dim, LineFn fn, const void *ctx)
{
    int64_t wrapped;
    if (THTensor_wrapDim(dim, input->ndim, &wrapped) < 0) {
        return NULL;
    }
    if (THDtype_isHalf(input->dtype)) { /* Note [Reducing half precision] */
        THTensor *wide = THTensor_newCast(input, TH_Float32, false);
        if (wide == NULL) {
            return NULL;
        }
        THTensor *out = new_from_lines(wide, dim, fn, ctx);
        THTensor_release(wide);
        return THTensor_convertOwned(&out, input->dtype) < 0 ? NULL : out;
    }
    THTensor *out = THTensor_newEmpty(input->ndim, input->sizes, input->dtype,
                                      input->storage->device);
    if (out != NULL) {
        run_lines(input, out, wrapped, fn, ctx);
    }
    return out;
}

THTensor *
THTensor_newSoftmax(THTensor *input, int64_t dim, bool log_softmax,
                    int dtype)
{
    int64_t wrapped;
    if (THTensor_wrapDim(dim, input->ndim, &wrapped) < 0) {
        return NULL;
    }
    THTensor *source = new_input_as(input, dtype);
    if (source == NULL) {
        return NULL;
    }
    if (!THDtype_isFloating(source->dtype)) {
        THError_set(TH_ERR_RUNTIME, "\"%s\" not implemented for '%s'",
                    log_softmax ? "log_softmax_kernel_impl"
                                : "softmax_kernel_impl",
                    THDtype_scalarTypeName(source->dtype));
        THTensor_release(source);
        return NULL;
    }
    THTensor *result = new_from_lines(
        source, dim, softmax_lines[float_index(source->dtype)], &log_softmax);
    THTensor_release(source);
    return result;
}

static THTensor *
scan(THTensor *input, int64_t dim, int dtype, const LineFn *lines)
{
    int64_t wrapped;
    if (THTensor_wrapDim(dim, input->ndim, &wrapped) < 0) {
        return NULL;
    }
    if (dtype < 0) {
        dtype = (int)sum_result_dtype(input->dtype);
    }
    THTensor *source = new_input_as(input, dtype);
    if (source == NULL) {
        return NULL;
    }
    THTensor *result = new_from_lines(
        source, dim, lines[THDtype_computeDtype(source->dtype)], NULL);
    THTensor_release(source);
    return result;
}

THTensor *
THTensor_newCumsum(THTensor *input, int64_t dim, int dtype)
{
    return scan(input, dim, dtype, cumsum_lines);
}

THTensor *
THTensor_newCumprod(THTensor *input, int64_t dim, int dtype)
{
    return scan(input, dim, dtype, cumprod_lines);
}
