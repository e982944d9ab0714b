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

/*
 * Note [Layer and group norm as row norm]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * Layer and group norm both normalise each row of a contiguous input on
 * its own; a row is `channels` channels of `spatial` contiguous elements
 * (M = channels * spatial values), and the affine parameters of row r
 * start at channel (r % groups) * channels:
 *
 *   layer norm   rows = the leading dims' product, groups = 1,
 *                channels = the normalised dims' product, spatial = 1
 *   group norm   rows = N * G, groups = G, channels = C / G, spatial = S
 *
 * Statistics: two passes over the row (sum, then sum of squared
 * deviations from the mean), accumulated in double across blocks (Note
 * [Sums in blocks] in THNorm.c).  A row is read twice
 * but it is cache-resident (a GPT row is 1.5 KB, a group of a 56x56 image
 * 25 KB), both passes vectorise, and the result does not cancel for a
 * large mean; Welford's one pass would need a division per element and a
 * serial dependency between them.
 *
 *   forward    y = (x - m) r w_c + b_c,  r = 1 / sqrt(v + eps)
 *   backward   with g = dy w_c, xhat = (x - m) r, one read of the row for
 *              sum(g), sum(g (x - m)) and each channel's sum(dy) and
 *              sum(dy (x - m)) (for layer norm, in the same loop as the
 *              affine gradients' terms), then one write:
 *                dx = r (g - mean(g) - xhat mean(g xhat))
 *              grad_weight_c = sum over rows of r sum(dy (x - m)),
 *              grad_bias_c   = sum over rows of sum(dy), each thread
 *              adding into its own partial row, summed at the end (layer
 *              norm's rows a block at a time: Note [Row blocks of the
 *              affine gradients] in THNorm.c).
 */
typedef struct {
    int64_t rows, groups, channels, spatial;
} THRowNormShape;

/* input, output, grad_output, grad_input: contiguous, rows * channels *
 * spatial elements, float32 or float64; mean, rstd: contiguous, `rows`
 * elements; weight, bias and their gradients: contiguous, groups *
 * channels elements (weight, bias may be NULL; any gradient may be NULL:
 * not wanted), all of the input's dtype.  0, or -1 with an error. */
int THRowNorm_forward(THTensor *output, THTensor *mean, THTensor *rstd,
                      const THTensor *input, const THTensor *weight,
                      const THTensor *bias, const THRowNormShape *shape, double eps);
int THRowNorm_backward(THTensor *grad_input, THTensor *grad_weight,
                       THTensor *grad_bias, const THTensor *grad_output,
                       const THTensor *input, const THTensor *mean,
                       const THTensor *rstd, const THTensor *weight,
                       const THRowNormShape *shape);

#endif /* TH_NORM_H */
