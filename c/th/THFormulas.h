/*
 * THFormulas.h -- the value of one element, for every elementwise operator.
 *
 * The eager loops (THPointwise.c, THUnary.c) and the fused interpreter
 * (THFused.c) expand these same macros and inline functions, so an
 * operator computes the same bits whichever path runs it.  Two families:
 *
 *   EXPR_<OP>(Name, ctype, a, b, P)   THPointwise's operators, for every
 *                                    dtype category (TH_KIND_<Name>), and
 *                                    which dtypes each has loops for:
 *                                    THPointwiseFormulas.h, shared with
 *                                    the CUDA kernels too;
 *   TH_FORALL_FLOAT_FORMULAS(_)       THUnary's float formulas, one C
 *                                    expression in `x` (Note [Unary
 *                                    formulas]), plus the predicate and
 *                                    integer tables: THFloatFormulas.h,
 *                                    which the CUDA kernels share (Note
 *                                    [One formula, two compilers]).
 *
 * Note [No FMA contraction]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~
 * The library is compiled with -ffp-contract=off (setup.py): gcc would
 * otherwise fuse a * b + c into one FMA instruction in the AVX2 copies of
 * a loop (target_clones, target("avx2,fma")) but not in the baseline
 * ones, and the fused interpreter, whose instructions are separate loops,
 * could never match a contracted eager formula.  Without contraction every
 * formula rounds after each operation, as written, on every CPU.
 */
#ifndef TH_FORMULAS_H
#define TH_FORMULAS_H

#include "THTensor.h"

#include <float.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <tgmath.h>

/* A number (bool, int64 or double) as a ctype, the way eager converts a
 * wrapped number to the compute dtype (Note [Wrapped numbers] in
 * THPointwise.h): an int64 converts directly, never through double. */
#define TH_SCALAR_AS(ctype, number)                                    \
    ((number).dtype == TH_Float64 ? (ctype)(number).value.d            \
     : (number).dtype == TH_Int64 ? (ctype)(number).value.i            \
                                  : (ctype)(number).value.b)

#include "THPointwiseFormulas.h"

#endif /* TH_FORMULAS_H */
