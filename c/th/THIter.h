/*
 * THIter.h -- the one strided-iteration helper of the core.
 *
 * Shape: N operands (operand 0 is the one written), all viewed at one
 * common shape; each operand broadcasts to it (missing leading dims and
 * dims of size 1 get stride 0).  The helper then
 *   1. converts strides to bytes,
 *   2. puts the dims in the order operand 0 is laid out in memory (its
 *      smallest stride innermost), so writes are sequential,
 *   3. coalesces neighbouring dims that every operand walks as one
 *      (stride[d+1] == size[d] * stride[d] for all operands),
 * and calls an inner loop on the innermost dimension, once per position of
 * the outer ones.  Inner loops have the NumPy ufunc signature:
 *
 *     loop(char **data, const int64_t *strides, int64_t n, void *ctx)
 *
 * data[k] points at operand k's first element of the run, strides[k] is its
 * byte stride along the run, and n is the run's length.
 *
 * Inner loops name their arguments `data`, `strides` and `n`, as above;
 * THCopy.c has the first family of them (the dtype casts).
 */
#ifndef TH_ITER_H
#define TH_ITER_H

#include "THTensor.h"

#define TH_ITER_MAX_OPERANDS 8

typedef void (*THLoop)(char **data, const int64_t *strides, int64_t n,
                       void *ctx);

typedef struct {
    int noperands;
    int ndim;                /* after coalescing; dim 0 is innermost */
    int64_t numel;
    int64_t shape[TH_MAX_DIMS];
    int64_t strides[TH_MAX_DIMS][TH_ITER_MAX_OPERANDS]; /* in bytes */
    char *data[TH_ITER_MAX_OPERANDS];
} THIter;

/* Computes the broadcast shape of two shapes, with PyTorch's message on a
 * mismatch.  out_sizes must have room for TH_MAX_DIMS. */
int THIter_broadcastShape(int ndim_a, const int64_t *sizes_a, int ndim_b,
                          const int64_t *sizes_b, int *out_ndim,
                          int64_t *out_sizes);

/* One operand as the iterator sees it: a tensor, or any strided block of
 * memory (a Python scalar converted into a local buffer is an operand with
 * ndim 0, so scalar ops need no tensor allocation). */
typedef struct {
    char *data;
    int ndim;
    const int64_t *sizes;
    const int64_t *strides; /* in elements */
    int itemsize;
} THIterOperand;

THIterOperand THIterOperand_fromTensor(const THTensor *tensor);

/* Prepares iteration of `operands` over operand 0's shape (the others
 * broadcast to it).  Returns 0, or -1 with a TH error when an operand
 * cannot broadcast. */
int THIter_init(THIter *iter, int noperands, THTensor *const *operands);
/* The same over an explicit shape, which every operand broadcasts to. */
int THIter_initOperands(THIter *iter, int noperands, const THIterOperand *ops,
                        int shape_ndim, const int64_t *shape);

/* Runs `loop` over every element, in operand 0's memory order. */
void THIter_run(const THIter *iter, THLoop loop, void *ctx);
/* Runs `loop` over elements [begin, end) of that order. */
void THIter_runRange(const THIter *iter, THLoop loop, void *ctx,
                     int64_t begin, int64_t end);
/* THIter_run split over the worker threads (THParallel.h) in chunks of at
 * least `grain` elements; `loop` must not touch Python or THError.  Only
 * for loops whose operand 0 is written once per element (no reductions
 * into a stride-0 output). */
void THIter_runParallel(const THIter *iter, THLoop loop, void *ctx,
                        int64_t grain);

#endif /* TH_ITER_H */
