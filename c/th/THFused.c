/*
 * THFused.c -- the fused elementwise interpreter: program validation, the
 * instruction loops (generated from THFormulas.h), and the blocked
 * interpreter of Note [Blocked interpretation] in THFused.h.
 */
#include "THFused.h"

#include "THFormulas.h"
#include "THParallel.h"

#include <stdlib.h>
#include <string.h>

/* Non-temporal stores (Note [Streaming the outputs]). */
#if defined(__SSE2__)
#include <immintrin.h>
#define TH_FUSED_HAVE_STREAM 1
#else
#define TH_FUSED_HAVE_STREAM 0
#endif

/* One vector of a block, v (a local array), stored to o without reading
 * o's line first; o is aligned to TH_FUSED_NT_BYTES_<isa>. */
#if TH_FUSED_HAVE_STREAM
#define TH_FUSED_NT_BYTES_baseline 16
#define TH_FUSED_NT_STORE_baseline_Float32(o, v) \
    _mm_stream_ps((o), _mm_loadu_ps(v))
#define TH_FUSED_NT_STORE_baseline_Float64(o, v) \
    _mm_stream_pd((o), _mm_loadu_pd(v))
#else
#define TH_FUSED_NT_BYTES_baseline 16
#define TH_FUSED_NT_STORE_baseline_Float32(o, v) memcpy((o), (v), 16)
#define TH_FUSED_NT_STORE_baseline_Float64(o, v) memcpy((o), (v), 16)
#endif
#define TH_FUSED_NT_BYTES_avx2 32
#define TH_FUSED_NT_STORE_avx2_Float32(o, v) \
    _mm256_stream_ps((o), _mm256_loadu_ps(v))
#define TH_FUSED_NT_STORE_avx2_Float64(o, v) \
    _mm256_stream_pd((o), _mm256_loadu_pd(v))


/* ---- op names and arities ------------------------------------------------- */

static const struct {
    const char *name;
    int arity;
} op_info[TH_NUM_FUSED_OPS + 1] = {
#define TH_FUSED_POINTWISE_INFO(name, OP, arity) [TH_FUSED_##name] = {#name, arity},
#define TH_FUSED_UNARY_INFO(name) [TH_FUSED_##name] = {#name, 1},
    TH_FORALL_FUSED_POINTWISE_OPS(TH_FUSED_POINTWISE_INFO)
    TH_FORALL_FUSED_UNARY_OPS(TH_FUSED_UNARY_INFO)
#undef TH_FUSED_POINTWISE_INFO
#undef TH_FUSED_UNARY_INFO
    [TH_FUSED_CONST] = {"const", 0},
};

int
THFused_opFromName(const char *name)
{
    for (int op = 0; op <= TH_FUSED_CONST; op++) {
        if (strcmp(op_info[op].name, name) == 0) {
            return op;
        }
    }
    return -1;
}

const char *
THFused_opName(THFusedOp op)
{
    return op_info[op].name;
}

int
THFused_arity(THFusedOp op)
{
    return op_info[op].arity;
}

/* ---- element functions: fused_elem_<op>_<Dtype> ----------------------------
 * One per (op, dtype), each the eager formula itself: EXPR_<OP> for
 * THPointwise's ops, the TH_FORALL_FLOAT_FORMULAS entry for THUnary's. */

#define TH_FUSED_INLINE static inline __attribute__((always_inline))

#define TH_FUSED_ELEM_1(name, OP, Name, T)                                   \
    TH_FUSED_INLINE T fused_elem_##name##_##Name(T a)                        \
    {                                                                        \
        return EXPR_##OP(Name, T, a);                                        \
    }
#define TH_FUSED_ELEM_2(name, OP, Name, T)                                   \
    TH_FUSED_INLINE T fused_elem_##name##_##Name(T a, T b)                   \
    {                                                                        \
        return EXPR_##OP(Name, T, a, b, 0);                                  \
    }
#define TH_FUSED_ELEM_3(name, OP, Name, T)                                   \
    TH_FUSED_INLINE T fused_elem_##name##_##Name(T a, T b, T c)              \
    {                                                                        \
        return EXPR_##OP(Name, T, a, b, c, 0);                               \
    }
#define TH_FUSED_POINTWISE_ELEMS(name, OP, arity)                            \
    TH_FUSED_ELEM_##arity(name, OP, Float32, float)                          \
    TH_FUSED_ELEM_##arity(name, OP, Float64, double)
TH_FORALL_FUSED_POINTWISE_OPS(TH_FUSED_POINTWISE_ELEMS)

/* The unary formulas read `p` only for round(decimals=) and nan_to_num,
 * which fused programs do not offer; they get the defaults. */
static const THUnaryParams no_params = {.ten_pow = 1.0};

#define TH_FUSED_UNARY_ELEM(name, formula, Name, T)                          \
    TH_FUSED_INLINE T fused_elem_##name##_##Name(T input)                    \
    {                                                                        \
        typedef T scalar_t; /* the names the formulas use */                 \
        scalar_t x = input;                                                  \
        const THUnaryParams *p = &no_params;                                 \
        (void)p;                                                             \
        return (T)(formula);                                                 \
    }
#define TH_FUSED_UNARY_ELEMS(name, formula)                                  \
    TH_FUSED_UNARY_ELEM(name, formula, Float32, float)                       \
    TH_FUSED_UNARY_ELEM(name, formula, Float64, double)
TH_FORALL_FLOAT_FORMULAS(TH_FUSED_UNARY_ELEMS)

/* ---- instruction loops --------------------------------------------------------
 *
 * loop(out, in, n): out[k] = op(in[0][k], in[1][k], ...) for k < n, where
 * an operand marked S in the loop's form is a scalar read once (in[i][0]).
 * out never overlaps an input (block buffers are never shared by a
 * source and its destination), hence `restrict`.  Each (op, dtype, form)
 * has a loop for any n (`tail`), one for n == TH_FUSED_BLOCK (`full`) and
 * one for any n with non-temporal stores (`stream`, Note [Streaming the
 * outputs]), and each exists twice: baseline x86-64 and AVX2.  With -ffp-contract=off
 * both compute the same bits (Note [No FMA contraction]). */
typedef void (*THFusedLoop)(char *out, char *const *in, int64_t n);

#define TH_FUSED_READ_V(ptr, value, k) ptr[k]
#define TH_FUSED_READ_S(ptr, value, k) value

#define TH_FUSED_OPERANDS(T)                                                 \
    T *restrict o = (T *)out;                                                \
    const T *restrict a = (const T *)in[0];                                  \
    const T av = a[0];                                                       \
    (void)av;                                                                \
    (void)n; /* unused by the `full` loops */
#define TH_FUSED_OPERAND(T, var, i)                                          \
    const T *restrict var = (const T *)in[i];                                \
    const T var##v = var[0];                                                 \
    (void)var##v;

/* The loop over k of one instruction or superinstruction, storing
 * o[k] = ELEM (an expression of k, the variadic argument).  `plain`
 * stores normally, k < LEN; `stream` is Note [Streaming the outputs]:
 * k < n, with non-temporal stores on the part of o aligned to the vector
 * width, plain stores on the unaligned head and the short tail.  The
 * vector loops are unrolled by 2: half the loop overhead (counter, compare,
 * branch) per element, ~17% fewer instructions on the bench chain. */
#define TH_FUSED_STORE_LOOP_plain(isa, Name, T, LEN, ...)                    \
    _Pragma("GCC unroll 2")                                                  \
    for (int64_t k = 0; k < (LEN); k++) {                                    \
        o[k] = (__VA_ARGS__);                                                \
    }
#define TH_FUSED_STORE_LOOP_stream(isa, Name, T, LEN, ...)                   \
    enum { W = TH_FUSED_NT_BYTES_##isa / (int)sizeof(T) };                   \
    int64_t head = (int64_t)((TH_FUSED_NT_BYTES_##isa                        \
                              - (uintptr_t)o % TH_FUSED_NT_BYTES_##isa)      \
                             % TH_FUSED_NT_BYTES_##isa / sizeof(T));         \
    head = head < n ? head : n;                                              \
    int64_t body_end = head + (n - head) / W * W;                            \
    for (int64_t k = 0; k < head; k++) {                                     \
        o[k] = (__VA_ARGS__);                                                \
    }                                                                        \
    _Pragma("GCC unroll 2")                                                  \
    for (int64_t at = head; at < body_end; at += W) {                        \
        T v[W];                                                              \
        for (int j = 0; j < W; j++) {                                        \
            int64_t k = at + j;                                              \
            v[j] = (__VA_ARGS__);                                            \
        }                                                                    \
        TH_FUSED_NT_STORE_##isa##_##Name(o + at, v);                         \
    }                                                                        \
    for (int64_t k = body_end; k < n; k++) {                                 \
        o[k] = (__VA_ARGS__);                                                \
    }

#define TH_FUSED_LOOP_1(isa, attr, name, Name, T, FA, suffix, STORE, LEN)    \
    attr static void fused_##name##_##Name##_##FA##_##suffix##_##isa(        \
        char *out, char *const *in, int64_t n)                               \
    {                                                                        \
        TH_FUSED_OPERANDS(T)                                                 \
        TH_FUSED_STORE_LOOP_##STORE(                                         \
            isa, Name, T, LEN,                                               \
            fused_elem_##name##_##Name(TH_FUSED_READ_##FA(a, av, k)))        \
    }
#define TH_FUSED_LOOP_2(isa, attr, name, Name, T, FA, FB, suffix, STORE, LEN) \
    attr static void fused_##name##_##Name##_##FA##FB##_##suffix##_##isa(    \
        char *out, char *const *in, int64_t n)                               \
    {                                                                        \
        TH_FUSED_OPERANDS(T)                                                 \
        TH_FUSED_OPERAND(T, b, 1)                                            \
        TH_FUSED_STORE_LOOP_##STORE(                                         \
            isa, Name, T, LEN,                                               \
            fused_elem_##name##_##Name(TH_FUSED_READ_##FA(a, av, k),         \
                                       TH_FUSED_READ_##FB(b, bv, k)))        \
    }
#define TH_FUSED_LOOP_3(isa, attr, name, Name, T, FA, FB, FC, suffix, STORE, \
                        LEN)                                                 \
    attr static void                                                         \
        fused_##name##_##Name##_##FA##FB##FC##_##suffix##_##isa(             \
            char *out, char *const *in, int64_t n)                           \
    {                                                                        \
        TH_FUSED_OPERANDS(T)                                                 \
        TH_FUSED_OPERAND(T, b, 1)                                            \
        TH_FUSED_OPERAND(T, c, 2)                                            \
        TH_FUSED_STORE_LOOP_##STORE(                                         \
            isa, Name, T, LEN,                                               \
            fused_elem_##name##_##Name(TH_FUSED_READ_##FA(a, av, k),         \
                                       TH_FUSED_READ_##FB(b, bv, k),         \
                                       TH_FUSED_READ_##FC(c, cv, k)))        \
    }

/* The forms of each arity: V (vector) or S (scalar) per operand, all but
 * all-scalar (computed once per run with the all-vector loop and n = 1).
 * Form index = bit i set when operand i is a scalar. */
#define TH_FUSED_FORMS_1(_, ...) _(__VA_ARGS__, V)
#define TH_FUSED_FORMS_2(_, ...) \
    _(__VA_ARGS__, V, V) _(__VA_ARGS__, S, V) _(__VA_ARGS__, V, S)
#define TH_FUSED_FORMS_3(_, ...)                                             \
    _(__VA_ARGS__, V, V, V) _(__VA_ARGS__, S, V, V) _(__VA_ARGS__, V, S, V)  \
    _(__VA_ARGS__, S, S, V) _(__VA_ARGS__, V, V, S) _(__VA_ARGS__, S, V, S)  \
    _(__VA_ARGS__, V, S, S)
#define TH_FUSED_NFORMS 7

#define TH_FUSED_LOOPS_OF_FORM_1(isa, attr, name, Name, T, FA)               \
    TH_FUSED_LOOP_1(isa, attr, name, Name, T, FA, tail, plain, n)            \
    TH_FUSED_LOOP_1(isa, attr, name, Name, T, FA, full, plain,               \
                    TH_FUSED_BLOCK)                                          \
    TH_FUSED_LOOP_1(isa, attr, name, Name, T, FA, stream, stream, n)
#define TH_FUSED_LOOPS_OF_FORM_2(isa, attr, name, Name, T, FA, FB)           \
    TH_FUSED_LOOP_2(isa, attr, name, Name, T, FA, FB, tail, plain, n)        \
    TH_FUSED_LOOP_2(isa, attr, name, Name, T, FA, FB, full, plain,           \
                    TH_FUSED_BLOCK)                                          \
    TH_FUSED_LOOP_2(isa, attr, name, Name, T, FA, FB, stream, stream, n)
#define TH_FUSED_LOOPS_OF_FORM_3(isa, attr, name, Name, T, FA, FB, FC)       \
    TH_FUSED_LOOP_3(isa, attr, name, Name, T, FA, FB, FC, tail, plain, n)    \
    TH_FUSED_LOOP_3(isa, attr, name, Name, T, FA, FB, FC, full, plain,       \
                    TH_FUSED_BLOCK)                                          \
    TH_FUSED_LOOP_3(isa, attr, name, Name, T, FA, FB, FC, stream, stream, n)

#define TH_FUSED_DEFINE_LOOPS(isa, attr, name, arity)                        \
    TH_FUSED_FORMS_##arity(TH_FUSED_LOOPS_OF_FORM_##arity, isa, attr, name,  \
                           Float32, float)                                   \
    TH_FUSED_FORMS_##arity(TH_FUSED_LOOPS_OF_FORM_##arity, isa, attr, name,  \
                           Float64, double)

/* The two loop families (Note [Vector clones] in THGeneral.h, chosen at run
 * time here as c/th/THBlas.c does). */
#if defined(__x86_64__) && defined(__GNUC__)
#define TH_FUSED_HAVE_AVX2 1
#define TH_FUSED_ATTR_avx2 __attribute__((target("avx2,fma")))
#else
#define TH_FUSED_HAVE_AVX2 0
#endif
#define TH_FUSED_ATTR_baseline

#define TH_FUSED_POINTWISE_LOOPS(name, OP, arity) \
    TH_FUSED_DEFINE_LOOPS(ISA, TH_CAT(TH_FUSED_ATTR_, ISA), name, arity)
#define TH_FUSED_UNARY_LOOPS(name) \
    TH_FUSED_DEFINE_LOOPS(ISA, TH_CAT(TH_FUSED_ATTR_, ISA), name, 1)

#define ISA baseline
TH_FORALL_FUSED_POINTWISE_OPS(TH_FUSED_POINTWISE_LOOPS)
TH_FORALL_FUSED_UNARY_OPS(TH_FUSED_UNARY_LOOPS)
#undef ISA
#if TH_FUSED_HAVE_AVX2
#define ISA avx2
TH_FORALL_FUSED_POINTWISE_OPS(TH_FUSED_POINTWISE_LOOPS)
TH_FORALL_FUSED_UNARY_OPS(TH_FUSED_UNARY_LOOPS)
#undef ISA
#endif

/* loops[op][dtype][form] = {tail, full, stream}; dtype 0 is float32, 1
 * float64. */
enum { TH_FUSED_TAIL, TH_FUSED_FULL, TH_FUSED_STREAM };
typedef THFusedLoop THFusedLoopTable[TH_NUM_FUSED_OPS][2][TH_FUSED_NFORMS][3];

#define TH_FUSED_FORM_INDEX_V 0
#define TH_FUSED_FORM_INDEX_S 1
#define TH_FUSED_ENTRY_1(isa, name, Name, d, FA)                             \
    [TH_FUSED_##name][d][TH_FUSED_FORM_INDEX_##FA] = {                       \
        fused_##name##_##Name##_##FA##_tail_##isa,                           \
        fused_##name##_##Name##_##FA##_full_##isa,                           \
        fused_##name##_##Name##_##FA##_stream_##isa},
#define TH_FUSED_ENTRY_2(isa, name, Name, d, FA, FB)                         \
    [TH_FUSED_##name][d][TH_FUSED_FORM_INDEX_##FA                            \
                         | TH_FUSED_FORM_INDEX_##FB << 1] = {                \
        fused_##name##_##Name##_##FA##FB##_tail_##isa,                       \
        fused_##name##_##Name##_##FA##FB##_full_##isa,                       \
        fused_##name##_##Name##_##FA##FB##_stream_##isa},
#define TH_FUSED_ENTRY_3(isa, name, Name, d, FA, FB, FC)                     \
    [TH_FUSED_##name][d][TH_FUSED_FORM_INDEX_##FA                            \
                         | TH_FUSED_FORM_INDEX_##FB << 1                     \
                         | TH_FUSED_FORM_INDEX_##FC << 2] = {                \
        fused_##name##_##Name##_##FA##FB##FC##_tail_##isa,                   \
        fused_##name##_##Name##_##FA##FB##FC##_full_##isa,                   \
        fused_##name##_##Name##_##FA##FB##FC##_stream_##isa},
#define TH_FUSED_ENTRIES(isa, name, arity)                                   \
    TH_FUSED_FORMS_##arity(TH_FUSED_ENTRY_##arity, isa, name, Float32, 0)    \
    TH_FUSED_FORMS_##arity(TH_FUSED_ENTRY_##arity, isa, name, Float64, 1)
#define TH_FUSED_POINTWISE_ENTRIES(name, OP, arity) \
    TH_FUSED_ENTRIES(ISA, name, arity)
#define TH_FUSED_UNARY_ENTRIES(name) TH_FUSED_ENTRIES(ISA, name, 1)

#define ISA baseline
static const THFusedLoopTable baseline_loops = {
    TH_FORALL_FUSED_POINTWISE_OPS(TH_FUSED_POINTWISE_ENTRIES)
    TH_FORALL_FUSED_UNARY_OPS(TH_FUSED_UNARY_ENTRIES)
};
#undef ISA
#if TH_FUSED_HAVE_AVX2
#define ISA avx2
static const THFusedLoopTable avx2_loops = {
    TH_FORALL_FUSED_POINTWISE_OPS(TH_FUSED_POINTWISE_ENTRIES)
    TH_FORALL_FUSED_UNARY_OPS(TH_FUSED_UNARY_ENTRIES)
};
#undef ISA
#endif

/* ---- superinstructions: two arithmetic ops in one loop -------------------------
 *
 * Note [Superinstructions]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~
 * Every instruction is a pass over its block: a load per operand and a
 * store per element, in L1.  When an instruction of {add, sub, mul, div}
 * is read exactly once, by the next vector instruction and that one is of
 * the same four ops, the two run as one loop:
 *
 *     t = first(x, y)             o[k] = then(first(x[k], y[k]), z[k])
 *     o = then(t, z)      =>      (side L), or then(z[k], first(...)) (R)
 *
 * t then lives in a vector register, never in a block buffer: one pass
 * instead of two.  Each op still rounds on its own (no FMA: Note [No FMA
 * contraction]), so the bits are those of the two loops.  x, y and z are
 * each a vector or a scalar (x and y not both scalars), as in the loops
 * above; the loop takes in = {x, y, z} and any n, with plain stores or
 * non-temporal ones (`stream`, Note [Streaming the outputs]). */
#define TH_FUSED_PAIR_APPLY_L(then, Name, t, z) fused_elem_##then##_##Name(t, z)
#define TH_FUSED_PAIR_APPLY_R(then, Name, t, z) fused_elem_##then##_##Name(z, t)

#define TH_FUSED_PAIR_LOOP(isa, attr, first, then, Name, T, FX, FY, FZ, SIDE,  \
                           STORE)                                              \
    attr static void                                                           \
        fused_##first##_##then##_##Name##_##FX##FY##FZ##SIDE##_##STORE##_##isa( \
            char *out, char *const *in, int64_t n)                             \
    {                                                                          \
        T *restrict o = (T *)out;                                              \
        TH_FUSED_OPERAND(T, x, 0)                                              \
        TH_FUSED_OPERAND(T, y, 1)                                              \
        TH_FUSED_OPERAND(T, z, 2)                                              \
        TH_FUSED_STORE_LOOP_##STORE(                                           \
            isa, Name, T, n,                                                   \
            TH_FUSED_PAIR_APPLY_##SIDE(                                        \
                then, Name,                                                    \
                fused_elem_##first##_##Name(TH_FUSED_READ_##FX(x, xv, k),      \
                                            TH_FUSED_READ_##FY(y, yv, k)),     \
                TH_FUSED_READ_##FZ(z, zv, k)))                                 \
    }
#define TH_FUSED_PAIR_LOOP_BOTH(isa, attr, first, then, Name, T, FX, FY, FZ,  \
                                SIDE)                                         \
    TH_FUSED_PAIR_LOOP(isa, attr, first, then, Name, T, FX, FY, FZ, SIDE,     \
                       plain)                                                 \
    TH_FUSED_PAIR_LOOP(isa, attr, first, then, Name, T, FX, FY, FZ, SIDE,     \
                       stream)

/* The pair forms: x and y (not both scalars), z, and t's side in `then`. */
#define TH_FUSED_PAIR_FORMS(_, ...)                                          \
    _(__VA_ARGS__, V, V, V, L) _(__VA_ARGS__, S, V, V, L)                    \
    _(__VA_ARGS__, V, S, V, L) _(__VA_ARGS__, V, V, S, L)                    \
    _(__VA_ARGS__, S, V, S, L) _(__VA_ARGS__, V, S, S, L)                    \
    _(__VA_ARGS__, V, V, V, R) _(__VA_ARGS__, S, V, V, R)                    \
    _(__VA_ARGS__, V, S, V, R) _(__VA_ARGS__, V, V, S, R)                    \
    _(__VA_ARGS__, S, V, S, R) _(__VA_ARGS__, V, S, S, R)

/* The ops a pair is made of: the first four of THFusedOp, so an op is its
 * own index in the pair table.  Two lists, as a macro cannot expand
 * itself: _(first, then) for the sixteen pairs. */
_Static_assert(TH_FUSED_add == 0 && TH_FUSED_sub == 1 && TH_FUSED_mul == 2
                   && TH_FUSED_div == 3,
               "the pair ops are THFusedOp 0 to 3");
#define TH_FUSED_PAIR_OPS 4
#define TH_FUSED_THEN_OPS(_, first)                                          \
    _(first, add) _(first, sub) _(first, mul) _(first, div)
#define TH_FUSED_FORALL_PAIRS(_)                                             \
    TH_FUSED_THEN_OPS(_, add) TH_FUSED_THEN_OPS(_, sub)                      \
    TH_FUSED_THEN_OPS(_, mul) TH_FUSED_THEN_OPS(_, div)

#define TH_FUSED_PAIR_LOOPS(first, then)                                     \
    TH_FUSED_PAIR_FORMS(TH_FUSED_PAIR_LOOP_BOTH, ISA,                        \
                        TH_CAT(TH_FUSED_ATTR_, ISA), first, then, Float32,   \
                        float)                                               \
    TH_FUSED_PAIR_FORMS(TH_FUSED_PAIR_LOOP_BOTH, ISA,                        \
                        TH_CAT(TH_FUSED_ATTR_, ISA), first, then, Float64,   \
                        double)

#define ISA baseline
TH_FUSED_FORALL_PAIRS(TH_FUSED_PAIR_LOOPS)
#undef ISA
#if TH_FUSED_HAVE_AVX2
#define ISA avx2
TH_FUSED_FORALL_PAIRS(TH_FUSED_PAIR_LOOPS)
#undef ISA
#endif

/* pair_loops[first][then][dtype][xy form][z scalar][side R][stream]; the
 * xy form is bit 0 for a scalar x, bit 1 for a scalar y (3, both, has no
 * loop); stream 1 is the loop with non-temporal stores. */
typedef THFusedLoop THFusedPairTable[TH_FUSED_PAIR_OPS][TH_FUSED_PAIR_OPS][2]
                                    [3][2][2][2];

#define TH_FUSED_SIDE_INDEX_L 0
#define TH_FUSED_SIDE_INDEX_R 1
#define TH_FUSED_PAIR_ENTRY(isa, first, then, Name, d, FX, FY, FZ, SIDE)     \
    [TH_FUSED_##first][TH_FUSED_##then][d]                                   \
    [TH_FUSED_FORM_INDEX_##FX | TH_FUSED_FORM_INDEX_##FY << 1]               \
    [TH_FUSED_FORM_INDEX_##FZ][TH_FUSED_SIDE_INDEX_##SIDE] = {               \
        fused_##first##_##then##_##Name##_##FX##FY##FZ##SIDE##_plain_##isa,  \
        fused_##first##_##then##_##Name##_##FX##FY##FZ##SIDE##_stream_##isa},
#define TH_FUSED_PAIR_ENTRIES(first, then)                                   \
    TH_FUSED_PAIR_FORMS(TH_FUSED_PAIR_ENTRY, ISA, first, then, Float32, 0)   \
    TH_FUSED_PAIR_FORMS(TH_FUSED_PAIR_ENTRY, ISA, first, then, Float64, 1)

#define ISA baseline
static const THFusedPairTable baseline_pairs = {
    TH_FUSED_FORALL_PAIRS(TH_FUSED_PAIR_ENTRIES)
};
#undef ISA
#if TH_FUSED_HAVE_AVX2
#define ISA avx2
static const THFusedPairTable avx2_pairs = {
    TH_FUSED_FORALL_PAIRS(TH_FUSED_PAIR_ENTRIES)
};
#undef ISA
#endif

/* ---- choosing the loop family ------------------------------------------------ */

static bool
cpu_has_avx2(void)
{
#if TH_FUSED_HAVE_AVX2
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

/* NULL until first used; then the family for this CPU (or a test's). */
static const THFusedLoopTable *_Atomic active_loops;

static const THFusedLoopTable *
loops_in_use(void)
{
    const THFusedLoopTable *table = active_loops;
    if (table == NULL) {
#if TH_FUSED_HAVE_AVX2
        table = cpu_has_avx2() ? &avx2_loops : &baseline_loops;
#else
        table = &baseline_loops;
#endif
        active_loops = table;
    }
    return table;
}

/* The superinstructions of the family in use. */
static const THFusedPairTable *
pairs_in_use(void)
{
#if TH_FUSED_HAVE_AVX2
    return loops_in_use() == &avx2_loops ? &avx2_pairs : &baseline_pairs;
#else
    return &baseline_pairs;
#endif
}

const char *
THFused_isa(void)
{
    return loops_in_use() == &baseline_loops ? "baseline" : "avx2";
}

int
THFused_setIsa(const char *name)
{
    if (strcmp(name, "baseline") == 0) {
        active_loops = &baseline_loops;
        return 0;
    }
#if TH_FUSED_HAVE_AVX2
    if (strcmp(name, "avx2") == 0 && cpu_has_avx2()) {
        active_loops = &avx2_loops;
        return 0;
    }
#endif
    return THError_set(TH_ERR_VALUE, "fused kernels: no '%s' loops on this "
                                     "machine", name);
}

/* ---- validation ---------------------------------------------------------------- */

static int
check_register(int reg, const char *what, int index)
{
    if (reg < 0 || reg >= TH_FUSED_MAX_REGISTERS) {
        return THError_set(TH_ERR_VALUE,
                           "instruction %d: %s register %d is out of range "
                           "(0 to %d)",
                           index, what, reg, TH_FUSED_MAX_REGISTERS - 1);
    }
    return 0;
}

/* Checks one instruction against the registers defined so far, then
 * defines its destination. */
static int
check_instruction(const THFusedInstruction *ins, int index, int ninputs,
                  bool *defined)
{
    if ((int)ins->op < 0 || ins->op > TH_FUSED_CONST) {
        return THError_set(TH_ERR_VALUE, "instruction %d: unknown op %d",
                           index, (int)ins->op);
    }
    for (int i = 0; i < op_info[ins->op].arity; i++) {
        int src = ins->src[i];
        if (check_register(src, "source", index) < 0) {
            return -1;
        }
        if (!defined[src]) {
            return THError_set(TH_ERR_VALUE,
                               "instruction %d (%s): register %d is used "
                               "before it is defined",
                               index, op_info[ins->op].name, src);
        }
    }
    if (check_register(ins->dst, "destination", index) < 0) {
        return -1;
    }
    if (ins->dst < ninputs) {
        return THError_set(TH_ERR_VALUE,
                           "instruction %d (%s): destination %d is an input "
                           "register (inputs are 0 to %d)",
                           index, op_info[ins->op].name, ins->dst,
                           ninputs - 1);
    }
    if (defined[ins->dst]) {
        return THError_set(TH_ERR_VALUE,
                           "instruction %d (%s): register %d is written a "
                           "second time (each register is written once)",
                           index, op_info[ins->op].name, ins->dst);
    }
    defined[ins->dst] = true;
    return 0;
}

static int
check_program(int ninputs, int ninstructions, const THFusedInstruction *code,
              int noutputs, const int *outputs)
{
    bool defined[TH_FUSED_MAX_REGISTERS] = {false};
    if (ninputs < 0 || ninputs > TH_FUSED_MAX_INPUTS) {
        return THError_set(TH_ERR_VALUE,
                           "a fused kernel takes 0 to %d inputs, not %d",
                           TH_FUSED_MAX_INPUTS, ninputs);
    }
    for (int r = 0; r < ninputs; r++) {
        defined[r] = true;
    }
    for (int i = 0; i < ninstructions; i++) {
        if (check_instruction(&code[i], i, ninputs, defined) < 0) {
            return -1;
        }
    }
    if (noutputs < 1 || noutputs > TH_FUSED_MAX_OUTPUTS) {
        return THError_set(TH_ERR_VALUE,
                           "a fused kernel has 1 to %d outputs, not %d",
                           TH_FUSED_MAX_OUTPUTS, noutputs);
    }
    for (int k = 0; k < noutputs; k++) {
        if (outputs[k] < 0 || outputs[k] >= TH_FUSED_MAX_REGISTERS
            || !defined[outputs[k]]) {
            return THError_set(TH_ERR_VALUE,
                               "output %d: register %d is not defined", k,
                               outputs[k]);
        }
        for (int j = 0; j < k; j++) {
            if (outputs[j] == outputs[k]) {
                return THError_set(TH_ERR_VALUE,
                                   "outputs %d and %d are the same register "
                                   "%d",
                                   j, k, outputs[k]);
            }
        }
    }
    return 0;
}

/* ---- analysis: schedule, dependencies, block buffers ------------------------- */

/* Keeps the instructions some output needs (a backward walk). */
static void
schedule_live(THFusedProgram *p)
{
    bool needed[TH_FUSED_MAX_REGISTERS] = {false};
    bool keep[TH_FUSED_MAX_REGISTERS] = {false}; /* per instruction */
    for (int k = 0; k < p->noutputs; k++) {
        needed[p->outputs[k]] = true;
    }
    for (int i = p->ninstructions - 1; i >= 0; i--) {
        const THFusedInstruction *ins = &p->code[i];
        if (!needed[ins->dst]) {
            continue;
        }
        keep[i] = true;
        for (int s = 0; s < op_info[ins->op].arity; s++) {
            needed[ins->src[s]] = true;
        }
    }
    p->nscheduled = 0;
    memset(p->nreads, 0, sizeof(p->nreads));
    for (int i = 0; i < p->ninstructions; i++) {
        if (keep[i]) {
            p->schedule[p->nscheduled++] = i;
            for (int s = 0; s < op_info[p->code[i].op].arity; s++) {
                p->nreads[p->code[i].src[s]]++;
            }
        }
    }
}

static void
find_output_inputs(THFusedProgram *p)
{
    uint64_t depends[TH_FUSED_MAX_REGISTERS] = {0};
    for (int r = 0; r < p->ninputs; r++) {
        depends[r] = (uint64_t)1 << r;
    }
    for (int i = 0; i < p->ninstructions; i++) {
        const THFusedInstruction *ins = &p->code[i];
        for (int s = 0; s < op_info[ins->op].arity; s++) {
            depends[ins->dst] |= depends[ins->src[s]];
        }
    }
    for (int k = 0; k < p->noutputs; k++) {
        p->output_inputs[k] = depends[p->outputs[k]];
    }
}

/* Gives block buffers (slots) to the inputs the schedule reads (a strided
 * one is gathered there) and to the temporaries, reusing a slot once its
 * register has been read for the last time.  A destination never gets a
 * slot freed by its own instruction, so loops never run in place.
 * Outputs get a slot too, though their instruction writes into the
 * output itself (plainly or streamed, Note [Streaming the outputs]).
 * An input that is also an output is copied from its slot after the last
 * step of the block (run_block), so it gets a slot even when no
 * instruction reads it, and that slot is never given to a later
 * temporary. */
static void
assign_slots(THFusedProgram *p)
{
    int last_use[TH_FUSED_MAX_REGISTERS];
    bool free_slot[TH_FUSED_MAX_REGISTERS];
    int nslots = 0;
    for (int r = 0; r < TH_FUSED_MAX_REGISTERS; r++) {
        last_use[r] = -1;
        p->slot_of[r] = -1;
    }
    for (int n = 0; n < p->nscheduled; n++) {
        const THFusedInstruction *ins = &p->code[p->schedule[n]];
        for (int s = 0; s < op_info[ins->op].arity; s++) {
            last_use[ins->src[s]] = n;
        }
    }
    for (int r = 0; r < p->ninputs; r++) {
        if (last_use[r] >= 0 || p->output_of[r] >= 0) {
            free_slot[nslots] = false;
            p->slot_of[r] = (int16_t)nslots++;
        }
        if (p->output_of[r] >= 0) {
            last_use[r] = p->nscheduled; /* read by the final copy */
        }
    }
    for (int n = 0; n < p->nscheduled; n++) {
        const THFusedInstruction *ins = &p->code[p->schedule[n]];
        if (ins->op != TH_FUSED_CONST) {
            int slot = 0;
            while (slot < nslots && !free_slot[slot]) {
                slot++;
            }
            if (slot == nslots) {
                nslots++;
            }
            free_slot[slot] = false;
            p->slot_of[ins->dst] = (int16_t)slot;
        }
        for (int s = 0; s < op_info[ins->op].arity; s++) {
            int src = ins->src[s];
            if (last_use[src] == n && p->slot_of[src] >= 0) {
                free_slot[p->slot_of[src]] = true;
            }
        }
    }
    p->nslots = nslots;
}

THFusedProgram *
THFusedProgram_new(int ninputs, int ninstructions,
                   const THFusedInstruction *code, int noutputs,
                   const int *outputs)
{
    if (ninstructions < 0 || ninstructions > TH_FUSED_MAX_REGISTERS) {
        THError_set(TH_ERR_VALUE, "a fused kernel has at most %d "
                                  "instructions, not %d",
                    TH_FUSED_MAX_REGISTERS, ninstructions);
        return NULL;
    }
    if (check_program(ninputs, ninstructions, code, noutputs, outputs) < 0) {
        return NULL;
    }
    THFusedProgram *p = calloc(1, sizeof(*p));
    size_t n = ninstructions > 0 ? (size_t)ninstructions : 1;
    if (p != NULL) {
        p->code = malloc(n * sizeof(*code));
        p->schedule = malloc(n * sizeof(int));
    }
    if (p == NULL || p->code == NULL || p->schedule == NULL) {
        THFusedProgram_free(p);
        THError_set(TH_ERR_MEMORY, "out of memory for a fused kernel");
        return NULL;
    }
    p->ninputs = ninputs;
    p->ninstructions = ninstructions;
    p->noutputs = noutputs;
    if (ninstructions > 0) {
        memcpy(p->code, code, (size_t)ninstructions * sizeof(*code));
    }
    p->nregs = ninputs;
    for (int i = 0; i < ninstructions; i++) {
        if (code[i].dst >= p->nregs) {
            p->nregs = code[i].dst + 1;
        }
    }
    memset(p->output_of, -1, sizeof(p->output_of));
    for (int k = 0; k < noutputs; k++) {
        p->outputs[k] = outputs[k];
        p->output_of[outputs[k]] = (int8_t)k;
    }
    schedule_live(p);
    find_output_inputs(p);
    assign_slots(p);
    return p;
}

void
THFusedProgram_free(THFusedProgram *program)
{
    if (program != NULL) {
        free(program->code);
        free(program->schedule);
        free(program);
    }
}

/* ---- prepare: the guard, the outputs, the iteration -------------------------- */

static bool
same_sizes(int ndim_a, const int64_t *a, int ndim_b, const int64_t *b)
{
    return ndim_a == ndim_b
           && (ndim_a == 0 || memcmp(a, b, sizeof(int64_t) * ndim_a) == 0);
}

/* The broadcast shape of the tensor inputs in `mask`; false when they do
 * not broadcast. */
static bool
broadcast_inputs(const THPointwiseArg *args, int ninputs, uint64_t mask,
                 int *ndim, int64_t *sizes)
{
    *ndim = 0;
    for (int i = 0; i < ninputs; i++) {
        const THTensor *t = args[i].tensor;
        if (t == NULL || !(mask >> i & 1)) {
            continue;
        }
        if (THIter_broadcastShape(*ndim, sizes, t->ndim, t->sizes, ndim,
                                  sizes)
            < 0) {
            THError_clear(); /* the eager fallback reports it */
            return false;
        }
    }
    return true;
}

/* Whether the inputs pass the guard's dtype and operand-count rules; sets
 * the dtype and the number of tensor inputs. */
static bool
check_dtypes(const THFusedProgram *p, const THPointwiseArg *args,
             THDtype *dtype, int *ntensors)
{
    *ntensors = 0;
    for (int i = 0; i < p->ninputs; i++) {
        const THTensor *t = args[i].tensor;
        if (t == NULL) {
            continue;
        }
        if (*ntensors > 0 && t->dtype != *dtype) {
            return false;
        }
        *dtype = t->dtype;
        (*ntensors)++;
    }
    return *ntensors > 0 && (*dtype == TH_Float32 || *dtype == TH_Float64)
           && p->noutputs + *ntensors <= TH_ITER_MAX_OPERANDS;
}

static void
store_value(THScalar number, THDtype dtype, THFusedValue *value)
{
    if (dtype == TH_Float32) {
        value->f = TH_SCALAR_AS(float, number);
    }
    else {
        value->d = TH_SCALAR_AS(double, number);
    }
}

/* Elements per block: TH_FUSED_BLOCK unless the slots would not fit the
 * scratch space; a multiple of 16 keeps every slot 64-byte aligned. */
static int
block_length(const THFusedProgram *p, int itemsize)
{
    if (p->nslots == 0) {
        return TH_FUSED_BLOCK;
    }
    int64_t fit = TH_FUSED_SCRATCH_BYTES / ((int64_t)p->nslots * itemsize);
    fit -= fit % 16;
    return fit >= TH_FUSED_BLOCK ? TH_FUSED_BLOCK : (int)fit;
}

int
THFused_prepare(THFusedPlan *plan, const THFusedProgram *program,
                const THPointwiseArg *args)
{
    const THFusedProgram *p = program;
    plan->program = p;
    for (int k = 0; k < TH_FUSED_MAX_OUTPUTS; k++) {
        plan->outputs[k] = NULL;
    }
    THDtype dtype = TH_Float32;
    int ntensors, ndim;
    int64_t sizes[TH_MAX_DIMS];
    uint64_t all = p->ninputs == 64 ? ~(uint64_t)0
                                    : ((uint64_t)1 << p->ninputs) - 1;
    if (!check_dtypes(p, args, &dtype, &ntensors)
        || !broadcast_inputs(args, p->ninputs, all, &ndim, sizes)) {
        return 1;
    }
    for (int k = 0; k < p->noutputs; k++) {
        int out_ndim;
        int64_t out_sizes[TH_MAX_DIMS];
        broadcast_inputs(args, p->ninputs, p->output_inputs[k], &out_ndim,
                         out_sizes);
        if (!same_sizes(out_ndim, out_sizes, ndim, sizes)) {
            return 1;
        }
    }
    plan->dtype = dtype;
    plan->ntensors = ntensors;
    plan->block_len = block_length(p, (int)THDtype_itemsize(dtype));
    THIterOperand operands[TH_ITER_MAX_OPERANDS];
    for (int k = 0; k < p->noutputs; k++) {
        plan->outputs[k] = THTensor_newEmpty(ndim, sizes, dtype,
                                             TH_DEVICE_CPU);
        if (plan->outputs[k] == NULL) {
            THFused_abandon(plan);
            return -1;
        }
        operands[k] = THIterOperand_fromTensor(plan->outputs[k]);
    }
    int j = 0;
    for (int i = 0; i < p->ninputs; i++) {
        if (args[i].tensor != NULL) {
            plan->tensor_reg[j] = i;
            operands[p->noutputs + j++] = THIterOperand_fromTensor(args[i].tensor);
        }
        else {
            store_value(args[i].number, dtype, &plan->values[i]);
        }
    }
    for (int i = 0; i < p->ninstructions; i++) {
        if (p->code[i].op == TH_FUSED_CONST) {
            store_value(p->code[i].value, dtype, &plan->values[p->code[i].dst]);
        }
    }
    plan->numel = plan->outputs[0]->numel;
    plan->stream = TH_FUSED_HAVE_STREAM
                   && plan->numel * THDtype_itemsize(dtype)
                          >= TH_FUSED_STREAM_BYTES;
    /* Cannot fail: every operand broadcasts to the shape (checked above). */
    if (THIter_initOperands(&plan->iter, p->noutputs + ntensors, operands,
                            ndim, sizes)
        < 0) {
        THFused_abandon(plan);
        return -1;
    }
    return 0;
}

/* ---- the interpreter ------------------------------------------------------------ */

/* memcpy to an output, with non-temporal stores (Note [Streaming the
 * outputs]); stream_copy_in_use() is the one of the loop family in use. */
typedef void (*StreamCopy)(char *dst, const char *src, int64_t nbytes);
static StreamCopy stream_copy_in_use(void);

/* One instruction of a run that computes a vector per block. */
typedef struct {
    THFusedLoop tail, full;
    THFusedLoop stream;            /* tail with non-temporal stores */
    bool streams;                  /* stores its output with `stream` */
    THFusedOp op;                  /* of the instruction (unfused) */
    int form;                      /* which operands are scalars */
    bool fused;                    /* a superinstruction */
    int dst;
    int output;                    /* output index, or -1: dst's slot */
    int nsrc;
    int src[TH_FUSED_MAX_ARITY];
} VectorStep;

/* How an input operand is read along this run. */
enum { READ_SCALAR, READ_IN_PLACE, READ_GATHER };

/* The per-run state: where each register's current block is. */
typedef struct {
    char *view[TH_FUSED_MAX_REGISTERS]; /* its block, or its scalar */
    bool scalar[TH_FUSED_MAX_REGISTERS];
    THFusedValue computed[TH_FUSED_MAX_REGISTERS]; /* scalar results */
    int read[TH_ITER_MAX_OPERANDS];                /* per tensor input */
    int itemsize;
    char *scratch;             /* the block buffers, slot_bytes each */
    int64_t slot_bytes;
    bool stream;               /* the plan's */
    StreamCopy stream_copy;    /* of the loop family in use */
    int nsteps;
    VectorStep steps[TH_FUSED_MAX_REGISTERS];
} RunState;

/* The output an instruction writing `reg` stores into directly, or -1. */
static int
direct_output(const THFusedProgram *p, int reg)
{
    return p->output_of[reg];
}

/* Whether a step writing `reg` into output `output` streams it (Note
 * [Streaming the outputs]): a large output that no later step reads (a
 * streamed line is no longer in the cache). */
static bool
streams_output(const RunState *st, const THFusedProgram *p, int reg,
               int output)
{
    return st->stream && output >= 0 && p->nreads[reg] == 0;
}

/* Where the result `reg` goes: its block buffer, or NULL for an output
 * (set per block). */
static char *
result_view(const RunState *st, const THFusedProgram *p, int reg,
            int output)
{
    return output >= 0 ? NULL : st->scratch + p->slot_of[reg] * st->slot_bytes;
}

static bool
is_pair_op(THFusedOp op)
{
    return op < TH_FUSED_PAIR_OPS;
}

/* Note [Superinstructions]: turns the last step, t = first(x, y), and
 * the instruction `ins` reading t into one step, when
 *   - both ops are pair ops and the last step is not fused already;
 *   - ins is t's only reader and t is not an output (t is never stored);
 *   - ins's destination is not x's or y's block buffer (a slot freed by
 *     the last step may be ins's: the loop must not run in place).
 * Returns whether it did. */
static bool
fuse_with_previous(const THFusedProgram *p, RunState *st,
                   const THFusedInstruction *ins,
                   const THFusedPairTable *pairs, int d)
{
    VectorStep *prev = &st->steps[st->nsteps - 1];
    int t = prev->dst;
    if (prev->fused || !is_pair_op(prev->op) || !is_pair_op(ins->op)
        || p->nreads[t] != 1 || p->output_of[t] >= 0) {
        return false;
    }
    int side = ins->src[0] == t ? 0 : ins->src[1] == t ? 1 : -1;
    if (side < 0) {
        return false;
    }
    int output = direct_output(p, ins->dst);
    char *dst_view = result_view(st, p, ins->dst, output);
    if (dst_view != NULL
        && (dst_view == st->view[prev->src[0]]
            || dst_view == st->view[prev->src[1]])) {
        return false;
    }
    int z = ins->src[1 - side];
    int z_scalar = st->scalar[z];
    const THFusedLoop *loop = (*pairs)[prev->op][ins->op][d][prev->form]
                                      [z_scalar][side];
    prev->tail = prev->full = loop[0];
    prev->stream = loop[1];
    prev->streams = streams_output(st, p, ins->dst, output);
    prev->fused = true;
    prev->nsrc = 3;
    prev->src[2] = z;
    prev->dst = ins->dst;
    prev->output = output;
    st->scalar[ins->dst] = false;
    st->view[ins->dst] = dst_view;
    return true;
}

/* Decides, for one run, what is a scalar; computes the scalar
 * instructions once; lists the vector ones with their loops. */
static void
plan_run(const THFusedPlan *plan, const int64_t *strides, char **data,
         RunState *st, char *scratch)
{
    const THFusedProgram *p = plan->program;
    const THFusedLoopTable *loops = loops_in_use();
    int itemsize = (int)THDtype_itemsize(plan->dtype);
    int d = plan->dtype == TH_Float32 ? 0 : 1;
    int64_t slot_bytes = (int64_t)plan->block_len * itemsize;
    const THFusedPairTable *pairs = pairs_in_use();
    st->itemsize = itemsize;
    st->scratch = scratch;
    st->slot_bytes = slot_bytes;
    st->stream = plan->stream;
    st->stream_copy = stream_copy_in_use();

    for (int r = 0; r < p->ninputs; r++) {
        st->scalar[r] = true;
        st->view[r] = (char *)&plan->values[r];
    }
    for (int j = 0; j < plan->ntensors; j++) {
        int op = p->noutputs + j, r = plan->tensor_reg[j];
        int64_t stride = strides[op];
        st->read[j] = stride == 0          ? READ_SCALAR
                      : stride == itemsize ? READ_IN_PLACE
                                           : READ_GATHER;
        st->scalar[r] = stride == 0;
        st->view[r] = stride == 0 ? data[op]
                      : stride == itemsize
                          ? data[op]
                          : scratch + p->slot_of[r] * slot_bytes;
    }
    st->nsteps = 0;
    for (int n = 0; n < p->nscheduled; n++) {
        const THFusedInstruction *ins = &p->code[p->schedule[n]];
        int arity = op_info[ins->op].arity, form = 0;
        if (ins->op == TH_FUSED_CONST) {
            st->scalar[ins->dst] = true;
            st->view[ins->dst] = (char *)&plan->values[ins->dst];
            continue;
        }
        char *in[TH_FUSED_MAX_ARITY];
        for (int s = 0; s < arity; s++) {
            form |= (int)st->scalar[ins->src[s]] << s;
            in[s] = st->view[ins->src[s]];
        }
        if (form == (1 << arity) - 1) {
            /* all scalars: once, with the all-vector loop and n = 1 */
            st->scalar[ins->dst] = true;
            st->view[ins->dst] = (char *)&st->computed[ins->dst];
            (*loops)[ins->op][d][0][0](st->view[ins->dst], in, 1);
            continue;
        }
        if (st->nsteps > 0
            && fuse_with_previous(p, st, ins, pairs, d)) {
            continue;
        }
        VectorStep *step = &st->steps[st->nsteps++];
        step->tail = (*loops)[ins->op][d][form][TH_FUSED_TAIL];
        step->full = (*loops)[ins->op][d][form][TH_FUSED_FULL];
        step->stream = (*loops)[ins->op][d][form][TH_FUSED_STREAM];
        step->op = ins->op;
        step->form = form;
        step->fused = false;
        step->dst = ins->dst;
        step->output = direct_output(p, ins->dst);
        step->streams = streams_output(st, p, ins->dst, step->output);
        step->nsrc = arity;
        memcpy(step->src, ins->src, sizeof(step->src));
        st->scalar[ins->dst] = false;
        st->view[ins->dst] = result_view(st, p, ins->dst, step->output);
    }
}

/* dst[0..n) = the elements at src with a byte stride. */
static void
gather(char *dst, const char *src, int64_t stride, int64_t n, int itemsize)
{
    if (itemsize == 4) {
        for (int64_t k = 0; k < n; k++) {
            memcpy(dst + 4 * k, src + k * stride, 4);
        }
    }
    else {
        for (int64_t k = 0; k < n; k++) {
            memcpy(dst + 8 * k, src + k * stride, 8);
        }
    }
}

static void
fill(char *dst, const char *value, int64_t n, int itemsize)
{
    for (int64_t k = 0; k < n; k++) {
        memcpy(dst + k * itemsize, value, (size_t)itemsize);
    }
}

/* Note [Streaming the outputs]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * A plain store to a line that is not in the cache first reads the line
 * from memory (to own it), so writing an output costs a read and a write.
 * For outputs larger than the caches, the step that computes an output
 * (when no later step reads it) runs its `stream` loop, which stores
 * with non-temporal stores: they write whole lines without reading them,
 * a third less memory traffic for y = f(a, b), and no copy pass.  (The
 * output then is not in the cache; for a large output it would not have
 * stayed there anyway.)  An output that is an input is copied with
 * stream_copy. */
/* memcpy, with non-temporal stores for the 16-byte aligned part of dst. */
static void
stream_copy(char *dst, const char *src, int64_t nbytes)
{
    int64_t done = 0;
#if TH_FUSED_HAVE_STREAM
    int64_t head = (int64_t)((16 - (uintptr_t)dst % 16) % 16);
    done = head < nbytes ? head : nbytes;
    memcpy(dst, src, (size_t)done);
    for (; done + 16 <= nbytes; done += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(src + done));
        _mm_stream_si128((__m128i *)(dst + done), v);
    }
#endif
    memcpy(dst + done, src + done, (size_t)(nbytes - done));
}

#if TH_FUSED_HAVE_AVX2
/* stream_copy with 32-byte stores: half the instructions. */
TH_FUSED_ATTR_avx2 static void
stream_copy_avx2(char *dst, const char *src, int64_t nbytes)
{
    int64_t head = (int64_t)((32 - (uintptr_t)dst % 32) % 32);
    int64_t done = head < nbytes ? head : nbytes;
    memcpy(dst, src, (size_t)done);
    for (; done + 32 <= nbytes; done += 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(src + done));
        _mm256_stream_si256((__m256i *)(dst + done), v);
    }
    memcpy(dst + done, src + done, (size_t)(nbytes - done));
}
#endif

static StreamCopy
stream_copy_in_use(void)
{
#if TH_FUSED_HAVE_AVX2
    if (loops_in_use() == &avx2_loops) {
        return stream_copy_avx2;
    }
#endif
    return stream_copy;
}

/* Runs the program over elements [start, start + len) of the run. */
static void
run_block(const THFusedPlan *plan, RunState *st, char **data,
          const int64_t *strides, int64_t start, int64_t len)
{
    const THFusedProgram *p = plan->program;
    int itemsize = st->itemsize;
    char *out[TH_FUSED_MAX_OUTPUTS];
    for (int j = 0; j < plan->ntensors; j++) {
        int op = p->noutputs + j, r = plan->tensor_reg[j];
        if (st->read[j] == READ_IN_PLACE) {
            st->view[r] = data[op] + start * itemsize;
        }
        else if (st->read[j] == READ_GATHER) {
            gather(st->view[r], data[op] + start * strides[op], strides[op],
                   len, itemsize);
        }
    }
    /* Outputs are fresh contiguous tensors walked in their memory order:
     * unit stride along every run (or a run of one element). */
    for (int k = 0; k < p->noutputs; k++) {
        out[k] = data[k] + start * itemsize;
    }
    bool full = len == TH_FUSED_BLOCK;
    for (int n = 0; n < st->nsteps; n++) {
        const VectorStep *step = &st->steps[n];
        char *in[TH_FUSED_MAX_ARITY];
        for (int s = 0; s < step->nsrc; s++) {
            in[s] = st->view[step->src[s]];
        }
        if (step->output >= 0) {
            st->view[step->dst] = out[step->output];
        }
        THFusedLoop loop = step->streams ? step->stream
                           : full        ? step->full
                                         : step->tail;
        loop(st->view[step->dst], in, len);
    }
    /* Outputs not written by their instruction: an input or a scalar. */
    for (int k = 0; k < p->noutputs; k++) {
        int r = p->outputs[k];
        if (st->scalar[r]) {
            fill(out[k], st->view[r], len, itemsize);
        }
        else if (st->view[r] != out[k] && plan->stream) {
            st->stream_copy(out[k], st->view[r], len * itemsize);
        }
        else if (st->view[r] != out[k]) {
            memcpy(out[k], st->view[r], (size_t)(len * itemsize));
        }
    }
}

/* The THLoop THIter calls once per run (ctx: the plan). */
static void
fused_run(char **data, const int64_t *strides, int64_t n, void *ctx)
{
    const THFusedPlan *plan = ctx;
    _Alignas(64) char scratch[TH_FUSED_SCRATCH_BYTES];
    RunState st;
    plan_run(plan, strides, data, &st, scratch);
    for (int64_t start = 0; start < n; start += plan->block_len) {
        int64_t len = n - start < plan->block_len ? n - start
                                                  : plan->block_len;
        run_block(plan, &st, data, strides, start, len);
    }
#if TH_FUSED_HAVE_STREAM
    if (plan->stream) {
        _mm_sfence(); /* the streamed stores are visible before we return */
    }
#endif
}

void
THFused_execute(const THFusedPlan *plan)
{
    if (plan->numel == 0) {
        return;
    }
    THIter_runParallel(&plan->iter, fused_run, (void *)plan,
                       TH_PARALLEL_GRAIN);
}

void
THFused_finish(THFusedPlan *plan, THTensor **outputs)
{
    for (int k = 0; k < plan->program->noutputs; k++) {
        outputs[k] = plan->outputs[k];
        plan->outputs[k] = NULL;
    }
}

void
THFused_abandon(THFusedPlan *plan)
{
    for (int k = 0; k < TH_FUSED_MAX_OUTPUTS; k++) {
        THTensor_release(plan->outputs[k]);
        plan->outputs[k] = NULL;
    }
}
