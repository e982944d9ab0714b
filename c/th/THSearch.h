/*
 * THSearch.h -- binary search and counting: searchsorted (and bucketize,
 * its 1-D special case), bincount and histc.  PyTorch's checks and
 * messages.
 */
#ifndef TH_SEARCH_H
#define TH_SEARCH_H

#include "THTensor.h"

/* For each element of `values`, the index in the last dim of `sorted` at
 * which it would be inserted keeping the order: before equal elements, or
 * after them when `right`.  `sorted` is 1-D, or has values' leading dims
 * (one sorted line per line of values).  `sorter` (int64, NULL: none)
 * gives the order of an unsorted `sorted` (argsort's result).  Both are
 * compared in their promoted dtype.  int64 result, or int32 when
 * out_int32. */
THTensor *THTensor_newSearchsorted(THTensor *sorted, THTensor *values,
                                   bool right, THTensor *sorter,
                                   bool out_int32);

/* The count of each value 0..max of a 1-D non-negative integer tensor, at
 * least minlength of them; with `weights` (NULL: none) the sum of their
 * weights instead (float32 for float32 weights, else float64). */
THTensor *THTensor_newBincount(THTensor *input, THTensor *weights,
                               int64_t minlength);

/* A histogram of `bins` equal bins over [min, max] (floating input; the
 * data's own range when min == max); elements outside are ignored. */
THTensor *THTensor_newHistc(THTensor *input, int64_t bins, double min,
                            double max);

#endif /* TH_SEARCH_H */
