/*
 * THIndex.h -- advanced indexing and the indexing operators.
 *
 * Every function here reads or writes elements at positions given by
 * integer index tensors (or bool masks).  They share one shape of kernel:
 * the positions are first turned into byte offsets, checking every one of
 * them against its dim's size (Note [Validate, then write]), and then a
 * THIter loop copies (or adds, or multiplies) one element per offset.
 *
 * Index tensors: int64 or int32 (int64 only for take, put_, index_fill_
 * and index_copy_, as in PyTorch).  Masks are bool (uint8
 * masks are accepted by advanced indexing, as in PyTorch).
 *
 * Functions named `new` return a new tensor; the others write into their
 * first argument, check that it is writable, and bump its version once.
 */
#ifndef TH_INDEX_H
#define TH_INDEX_H

#include "THTensor.h"

/* ---- advanced indexing ------------------------------------------------------
 *
 * `indices` lists, for the leading dims of `self`, either NULL (the dim is
 * kept whole) or an index tensor: int64/int32 positions (negative ones
 * count from the end), or a bool/uint8 mask of ndim >= 1 that covers
 * mask->ndim dims and stands for the positions of its true elements.  See
 * Note [Advanced indexing] in THIndex.c for the result's shape. */
THTensor *THTensor_newIndex(THTensor *self, int nindices,
                            THTensor *const *indices);
/* self[indices] = values (values broadcast to the indexed shape and are
 * converted to self's dtype), or += with `accumulate`.  With repeated
 * positions and !accumulate, one of the values wins. */
int THTensor_indexPut(THTensor *self, int nindices, THTensor *const *indices,
                      THTensor *values, bool accumulate);

/* ---- operators along one dim ---------------------------------------------- *
 * The writing ones (scatter, scatterReduce, indexAdd, indexFill, indexCopy)
 * refuse a dense index or source in self's memory, as PyTorch's
 * assert_no_overlap (THTensor_checkNoOverlap); a strided one, which that
 * check lets through, is copied aside and read as it was. */

THTensor *THTensor_newIndexSelect(THTensor *self, int64_t dim,
                                  THTensor *index);
THTensor *THTensor_newGather(THTensor *self, int64_t dim, THTensor *index);

typedef enum {
    TH_SCATTER_ASSIGN,
    TH_SCATTER_ADD,
    TH_SCATTER_MULTIPLY,
    TH_SCATTER_AMAX,   /* NaN-propagating, as maximum */
    TH_SCATTER_AMIN,
    TH_SCATTER_MEAN,   /* scatter_reduce only */
} THScatterReduce;

/* self[index[i][j]][j] = src[i][j] (for dim 0), reduced by `reduce`. */
int THTensor_scatter(THTensor *self, int64_t dim, THTensor *index,
                     THTensor *src, THScatterReduce reduce);
/* The same with one value for every position. */
int THTensor_scatterValue(THTensor *self, int64_t dim, THTensor *index,
                          THScalar value, THScatterReduce reduce);
/* scatter_reduce_: self reduced with src at the positions index names
 * (add, multiply, amax, amin or mean; TH_SCATTER_ASSIGN is refused).
 * Without include_self, the positions written start from the reduction's
 * identity instead of self's values. */
int THTensor_scatterReduce(THTensor *self, int64_t dim, THTensor *index,
                           THTensor *src, THScatterReduce reduce,
                           bool include_self);
/* self.select(dim, index[i]) += source.select(dim, i) * alpha */
int THTensor_indexAdd(THTensor *self, int64_t dim, THTensor *index,
                      THTensor *source, THScalar alpha);
/* self.select(dim, index[i]) = value */
int THTensor_indexFill(THTensor *self, int64_t dim, THTensor *index,
                       THScalar value);
/* self.select(dim, index[i]) = source.select(dim, i): index int64 and at
 * most 1-d, positions in [0, size) (no negative ones, as in PyTorch);
 * source is self with dim resized to len(index), of self's dtype.  With
 * repeated positions one of the slices wins. */
int THTensor_indexCopy(THTensor *self, int64_t dim, THTensor *index,
                       THTensor *source);

/* ---- masks and flat positions ------------------------------------------- */

/* self[mask] = value, mask broadcast to self's shape. */
int THTensor_maskedFill(THTensor *self, THTensor *mask, THScalar value);
/* The elements of self where mask (broadcast with self) is true, 1-d. */
THTensor *THTensor_newMaskedSelect(THTensor *self, THTensor *mask);
/* The positions of the non-zero elements: an (n, ndim) int64 tensor in
 * row-major order. */
THTensor *THTensor_newNonzero(THTensor *self);
/* self.flatten()[index], shaped like index. */
THTensor *THTensor_newTake(THTensor *self, THTensor *index);
/* self.flatten()[index] = source (+= with accumulate, repeated positions
 * adding up), written through self's own strides: index int64, negative
 * positions counting from the end; source of self's dtype with as many
 * elements as index, matched in row-major order. */
int THTensor_put(THTensor *self, THTensor *index, THTensor *source,
                 bool accumulate);


#endif /* TH_INDEX_H */
