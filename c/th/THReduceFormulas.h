/*
 * THReduceFormulas.h -- what a reduction accumulates in and how it steps:
 * the accumulation and result types of sum/prod/mean, the NaN-propagating
 * max/min step and the arg-reductions' "better" test.  Shared by the CPU
 * kernels (THReduce.c) and ember.cuda's reduction kernels
 * (python/ember/cuda/_kernels.py), which NVRTC compiles as CUDA C++: plain
 * macros, no includes (Note [One formula, two compilers] in
 * THFloatFormulas.h).
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

#endif /* TH_REDUCE_FORMULAS_H */
