/*
 * THSort.h -- sorting along a dim: sort, topk, kthvalue, unique.
 *
 * Note [Sort keys]
 * ~~~~~~~~~~~~~~~~
 * Every dtype is sorted through one 64-bit unsigned key per element whose
 * unsigned order is the element order PyTorch uses:
 *   - integers and bool: the value as int64 with its sign bit flipped;
 *   - floats: the value as double (exact for float32), -0.0 folded into
 *     0.0, the IEEE bits made monotonic (negative: all bits flipped,
 *     positive: sign bit set), and every NaN mapped to UINT64_MAX, so NaN
 *     sorts after +inf ("NaN is the largest value", as in PyTorch).
 * Descending order sorts the complemented key (~key) ascending, which puts
 * NaN first.  Items are (key, index) pairs compared by key, then index: a
 * total order, so the sort routines (an LSD radix sort on the keys for
 * long lanes, a merge sort for short ones, a quickselect when topk and
 * kthvalue want only a few positions) give exactly the stable order
 * whatever `stable` says, never see a dtype, and output
 * values are read back from the input by index (keys are never decoded).
 */
#ifndef TH_SORT_H
#define TH_SORT_H

#include "THTensor.h"

/* values, indices = input sorted along dim.  Both results are new
 * tensors shaped like input (indices int64). */
int THTensor_sort(THTensor *input, int64_t dim, bool descending,
                  THTensor **values, THTensor **indices);
/* The k largest (or smallest) along dim, in sorted order. */
int THTensor_topk(THTensor *input, int64_t k, int64_t dim, bool largest,
                  THTensor **values, THTensor **indices);
/* The k-th smallest along dim (k counts from 1); dim removed unless
 * keepdim. */
int THTensor_kthvalue(THTensor *input, int64_t k, int64_t dim, bool keepdim,
                      THTensor **values, THTensor **indices);
/* The distinct values of the flattened input, ascending.  `inverse`
 * (input's shape: the position of each element in `values`) and `counts`
 * are computed only when the pointer is not NULL.  NaNs are all distinct,
 * as in PyTorch. */
int THTensor_unique(THTensor *input, THTensor **values, THTensor **inverse,
                    THTensor **counts);
/* The same for runs of equal neighbours, in input order (no sort). */
int THTensor_uniqueConsecutive(THTensor *input, THTensor **values,
                               THTensor **inverse, THTensor **counts);
/* unique (consecutive == false) or unique_consecutive of the slices
 * input.select(dim, i): values keeps dim, with only the distinct slices
 * (ascending lexicographically, or in input order); inverse and counts
 * have one entry per input slice and per distinct slice. */
int THTensor_uniqueDim(THTensor *input, int64_t dim, bool consecutive,
                       THTensor **values, THTensor **inverse,
                       THTensor **counts);

#endif /* TH_SORT_H */
