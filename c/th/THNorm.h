/*
 * THNorm.h -- batch normalisation over the channels (dim 1) of a
 * contiguous (N, C, *) tensor, seen as N x C x S with S the product of the
 * trailing dims (1 for an (N, C) input).
 *
 * Note [Batch norm in three kernels]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * With M = N * S values per channel, mean m and biased variance v:
 *
 *   stats      m = sum(x) / M,  v = sum((x - m)^2) / M      (two passes,
 *              accumulated in double, so a large mean cannot cancel the
 *              variance away as sum(x^2) - M m^2 would)
 *   forward    y = (x - m) * r * w + b,  r = 1 / sqrt(v + eps), done as
 *              y = x * scale + shift per channel
 *   backward   with xhat = (x - m) * r,  gb = sum(dy),  gw = sum(dy * xhat):
 *                training  dx = w r (dy - gb / M - xhat * gw / M)
 *                eval      dx = w r dy      (m, v are constants then)
 *
 * In training m, v are the batch's (stats); in eval they are the running
 * statistics.  Updating the running statistics is the caller's (ember.nn).
 */
#ifndef TH_NORM_H
#define TH_NORM_H

#include "THTensor.h"

#include <stdbool.h>

/* input: contiguous, ndim >= 2, float32 or float64; the per-channel tensors
 * (mean, var, weight, bias, grad_weight, grad_bias) contiguous of length C
 * in the input's dtype.  weight, bias may be NULL (1 and 0); any of the
 * backward's three results may be NULL (not wanted).  0, or -1 with an
 * error (a dtype they do not run in). */
int THBatchNorm_stats(THTensor *mean, THTensor *var, const THTensor *input);
int THBatchNorm_forward(THTensor *output, const THTensor *input, const THTensor *mean,
                        const THTensor *var, const THTensor *weight,
                        const THTensor *bias, double eps);
int THBatchNorm_backward(THTensor *grad_input, THTensor *grad_weight,
                         THTensor *grad_bias, const THTensor *grad_output,
                         const THTensor *input, const THTensor *mean,
                         const THTensor *var, const THTensor *weight, double eps,
                         bool training);

#endif /* TH_NORM_H */
