/*
 * THReduceFormulas.h -- what a reduction accumulates in and how it steps:
 * the accumulation and result types of sum/prod/mean and the scans, the
 * NaN-propagating max/min step, the arg-reductions' "better" test, and the
 * per-element and finishing math of var/std, the norms, logsumexp and
 * softmax.  Shared by the CPU kernels (THReduce.c) and ember.cuda's
 * reduction kernels (python/ember/cuda/_reduce.py), which NVRTC compiles
 * as CUDA C++: plain macros, no includes (Note [One formula, two
 * compilers] in THFloatFormulas.h); the math functions they name (sqrt,
 * log, pow, fabs) are the includer's.
 */
#ifndef TH_REDUCE_FORMULAS_H
#define TH_REDUCE_FORMULAS_H

/* The type sums, products and scans accumulate in: floating dtypes in
 * themselves (as PyTorch), the others in uint64_t, whose arithmetic wraps
 * like PyTorch's int64 does (signed overflow would be undefined in C). */
#define TH_ACC_Bool uint64_t
#define TH_ACC_UInt8 uint64_t
#define TH_ACC_Int8 uint64_t
#define TH_ACC_Int16 uint64_t
#define TH_ACC_Int32 uint64_t
#define TH_ACC_Int64 uint64_t
#define TH_ACC_Float32 float
#define TH_ACC_Float64 double
/* ... and the type their results are stored as. */
#define TH_RES_Bool int64_t
#define TH_RES_UInt8 int64_t
#define TH_RES_Int8 int64_t
#define TH_RES_Int16 int64_t
#define TH_RES_Int32 int64_t
#define TH_RES_Int64 int64_t
#define TH_RES_Float32 float
#define TH_RES_Float64 double

/* True only for a NaN; false (and folded away) for integer types. */
#define TH_ISNAN(v) ((v) != (v))
/* NaN-propagating max/min step, as PyTorch's max and min. */
#define TH_MAX_STEP(acc, v) (((v) > (acc)) | TH_ISNAN(v) ? (v) : (acc))
#define TH_MIN_STEP(acc, v) (((v) < (acc)) | TH_ISNAN(v) ? (v) : (acc))

/* Arg-reductions: a strictly better value replaces the best, so ties keep
 * the first index; the first NaN wins and stays. */
#define TH_ARG_BETTER_MAX(v, best) \
    ((v) > (best) || (TH_ISNAN(v) && !TH_ISNAN(best)))
#define TH_ARG_BETTER_MIN(v, best) \
    ((v) < (best) || (TH_ISNAN(v) && !TH_ISNAN(best)))

/* ---- the floating reductions' per-element and finishing math ---------- */

/* |v| with the sign bit cleared, as PyTorch's abs: |-0.0| is +0.0 (a
 * compare-and-negate would keep -0.0, which the inf norms then return) and
 * |-nan| is +nan.  fabs is type-generic here: <tgmath.h> in C, the float
 * and double overloads in C++ (CUDA's and libstdc++'s). */
#define TH_ABS(v) fabs(v)
#define TH_SQUARE(v) ((v) * (v))
/* var's second pass: the squared deviation from the first pass's mean. */
#define TH_SQUARED_DEVIATION(v, mean) (((v) - (mean)) * ((v) - (mean)))

/* var and std from m2, the sum of the n squared deviations (in double):
 * divided by n - correction, or by 0 (inf or nan, as PyTorch's) when that
 * is not positive. */
#define TH_VAR_DIVISOR(n, correction) \
    ((double)(n) - (correction) > 0 ? (double)(n) - (correction) : 0)
#define TH_VAR_FINISH(m2, n, correction, take_sqrt)             \
    ((take_sqrt) ? sqrt((m2) / TH_VAR_DIVISOR(n, correction)) \
                 : (m2) / TH_VAR_DIVISOR(n, correction))

/* The general p-norm, in double: sum |v|^p, then its p-th root; p = 0
 * counts the nonzero elements. */
#define TH_NORM_P_TERM(v, p) ((p) == 0 ? (double)((v) != 0) : pow(fabs(v), (p)))
#define TH_NORM_P_FINISH(total, p) ((p) == 0 ? (total) : pow((total), 1 / (p)))

/* logsumexp = log(sum exp(x - shift)) + shift, shift the max; an infinite
 * or NaN max is not subtracted (inf - inf would be nan): the result is then
 * the max itself, or -inf.  m - m is 0 exactly when m is finite. */
#define TH_LSE_SHIFT(max) ((max) - (max) == 0 ? (max) : 0)
#define TH_LSE_FINISH(total, max) (log(total) + TH_LSE_SHIFT(max))

/* softmax: exp(x - max) * SCALE; log_softmax: x - SHIFT; `total` is the
 * sum of exp(x - max) in double. */
#define TH_SOFTMAX_SCALE(ctype, total) ((ctype)(1 / (total)))
#define TH_LOG_SOFTMAX_SHIFT(ctype, max, total) ((max) + (ctype)log(total))

#endif /* TH_REDUCE_FORMULAS_H */
