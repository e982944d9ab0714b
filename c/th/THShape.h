/*
 * THShape.h -- operators that rearrange elements: cat, stack, flip, roll,
 * repeat, repeat_interleave, diag, tril/triu, one_hot (and diagonal, the
 * one view here).
 *
 * Each returns a new tensor (or writes into `out`) with the values moved;
 * the other view-making ones (split, chunk, unbind, ...) are plain
 * narrow/select calls in the binding.  Moves within one dtype go through
 * one strided copy keyed by item size (a float32 moves as 4 raw bytes), so
 * no operator here is written per dtype.
 */
#ifndef TH_SHAPE_H
#define TH_SHAPE_H

#include "THTensor.h"

/* PyTorch's cat: inputs promoted to one dtype, concatenated along dim;
 * 1-d empty tensors (the legacy "no data" tensor) are skipped. */
THTensor *THTensor_newCat(int n, THTensor *const *tensors, int64_t dim);
/* The same into `out`, which must already have the result's shape and a
 * dtype the result can be cast to; nothing is written on error. */
int THTensor_catOut(THTensor *out, int n, THTensor *const *tensors,
                    int64_t dim);
/* stack: equal-size inputs joined along a new dim; out may be NULL. */
THTensor *THTensor_newStack(int n, THTensor *const *tensors, int64_t dim);
int THTensor_stackOut(THTensor *out, int n, THTensor *const *tensors,
                      int64_t dim);

/* flip: reverse the order of elements along each listed dim. */
THTensor *THTensor_newFlip(THTensor *tensor, int ndims, const int64_t *dims);
/* roll: shift elements along dims circularly; ndims == 0 rolls the
 * flattened tensor (then nshifts must be 1). */
THTensor *THTensor_newRoll(THTensor *tensor, int nshifts,
                           const int64_t *shifts, int ndims,
                           const int64_t *dims);
/* Tensor.repeat: tile the tensor repeats[d] times along each dim;
 * nrepeats >= ndim, extra leading repeats add dims. */
THTensor *THTensor_newRepeat(THTensor *tensor, int nrepeats,
                             const int64_t *repeats);
/* repeat_interleave: element i along dim repeated repeats[i] times
 * (nrepeats == 1: every element repeats[0] times).  dim_given false
 * flattens the input first.  The caller checked repeats >= 0. */
THTensor *THTensor_newRepeatInterleave(THTensor *tensor, int64_t nrepeats,
                                       const int64_t *repeats, bool dim_given,
                                       int64_t dim);
/* diagonal: a view of the offset-th diagonal of the (dim1, dim2) planes,
 * as a new last dim. */
THTensor *THTensor_newDiagonal(THTensor *tensor, int64_t offset,
                               int64_t dim1, int64_t dim2);
/* diag: a vector's square matrix with it on the given diagonal, or a copy
 * of a matrix's diagonal. */
THTensor *THTensor_newDiag(THTensor *tensor, int64_t diagonal);
/* tril (upper == false) / triu of the last two dims, into a new tensor or
 * in place. */
THTensor *THTensor_newTriangle(THTensor *tensor, int64_t diagonal,
                               bool upper);
int THTensor_triangle_(THTensor *tensor, int64_t diagonal, bool upper);
/* one_hot of an int64 tensor: shape + (num_classes,), int64; num_classes
 * -1 means max + 1. */
THTensor *THTensor_newOneHot(THTensor *tensor, int64_t num_classes);

#endif /* TH_SHAPE_H */
