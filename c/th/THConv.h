/*
 * THConv.h -- 1-, 2- and 3-D convolution (cross-correlation, as PyTorch's)
 * on NCDHW tensors: the forward product and both backward products.  One
 * code path for all three: Note [Three spatial dims, one code path].
 *
 * Note [Convolution as GEMM]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~
 * For one sample and one group, lay every receptive field out as a column:
 *
 *     col[c * kh * kw + i * kw + j][y * out_w + x]
 *         = input[c][y * stride_h - pad_h + i * dil_h]
 *                   [x * stride_w - pad_w + j * dil_w]      (0 off the image)
 *
 * Then the convolution is one GEMM with the weight seen as a matrix
 * (out_channels/groups) x (in_channels/groups * kh * kw):
 *
 *     forward          out[n, g]  = W[g] . col                (+ bias)
 *     input gradient   col        = W[g]^T . grad_out[n, g], then col2im
 *                                   adds each column entry back where it
 *                                   was read from (or, with stride 1, a
 *                                   convolution of its own: Note [Input
 *                                   gradient as a convolution])
 *     weight gradient  gW[g]     += grad_out[n, g] . col^T
 *
 * col is kh * kw times the size of the image, so the forward and weight-
 * gradient products never store it: Note [Convolution as an implicit
 * GEMM].  A 1x1 kernel with stride 1 and no padding needs no columns at
 * all: the input already is that matrix, and its forward is a plain GEMM.
 *
 * Note [Convolution as an implicit GEMM]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * The packed GEMM copies every KC x NR micro-panel of B into a small
 * buffer before the micro-kernel reads it (Note [GEMM blocking] in
 * THBlas.c); storing col first would only add a trip through memory of a
 * matrix kh * kw times the image's size.  So the products run as
 * THBlas_gemmGathered, whose gather_b packs each micro-panel straight from
 * the input.  The samples' group blocks are first copied into a zero-padded
 * buffer ((in_h + 2 pad_h) x (in_w + 2 pad_w) per channel, zeroed once), so
 * no read needs a bounds test: row (c, i, j) of col is the padded images
 * read from one offset on (tap_offsets), and a micro-panel's NR columns
 * are a few runs along output lines (line_runs), each a contiguous stretch
 * of a padded line when stride_w is 1 -- one vector load per run and
 * chunk of a row, merged by selects (Note [Gathering a panel row by
 * selects] in THConv.c).  The product's C arrives a column panel at a
 * time and is scattered into the NCHW output with the bias added
 * (scatter_c).  The weight gradient's B is col transposed (positions down,
 * (c, i, j) across): gather_bt reads each (c, i, j) along a line run and
 * writes it down the panel, and its column panels of C are added into gW;
 * when its working set fits L2 it gathers nothing either, reading each
 * sample's image in place, laid out channels last (Note [Weight gradient
 * by taps] in THConv.c).
 * With stride_w 1 the forward (and so the stride-1 input gradient) most
 * often gathers nothing at all: it runs transposed, reading the padded
 * buffer in place (Note [Direct convolution by taps] in THConv.c).
 *
 * Note [Samples side by side]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * One sample of a small image gives a GEMM too narrow to run well (a 7x7
 * output has 49 columns: the last micro-panel is mostly padding and the
 * weight is packed again for every sample).  So a product covers the
 * columns of several samples side by side, B's column b * out_plane +
 * position, enough for a few thousand columns (their padded images capped
 * at a few million elements, one sample always allowed).  The forward's
 * scatter_c finds each column's sample; the weight gradient copies
 * grad_out's rows of those samples side by side into a staging block (its
 * A) and sums over all their columns in one GEMM.
 *
 * Note [Input gradient as a convolution]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * With stride 1, input[c][y + i*d_h - p_h][x + j*d_w - p_w] meets
 * grad_out[o][y][x] through W[o][c][i][j], so the input gradient is itself
 * a stride-1 convolution of grad_out with the weight flipped in space and
 * with its two channel dims swapped per group,
 *
 *     W'[g, c][o][i][j] = W[g, o][c][kh - 1 - i][kw - 1 - j],
 *
 * and padding d*(k - 1) - p, which must not be negative.  That runs as the
 * forward product (depth out_group * kh * kw, an implicit GEMM, no col2im,
 * samples side by side) instead of a GEMM summing only out_group terms
 * followed by col2im's scattered adds.  Other strides and larger paddings
 * take the col2im route, one sample at a time.
 *
 * A transposed convolution is the input-gradient product run forward
 * (THConv_backwardInput), as in PyTorch.
 *
 * Note [Three spatial dims, one code path]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * The notes above speak of a 2-D image; the kernels run on volumes
 * (depth d x height h x width w, NCDHW), and a 2-D convolution is a 3-D one
 * of depth 1 (kernel depth 1, stride and dilation 1, no padding), a 1-D one
 * a 2-D one of height 1.  Nothing above changes with the extra dim: a
 * column row is a tap (c, k, i, j), a channel's positions (its "plane")
 * are d x h x w of them, the padded buffer pads all three dims, and a
 * micro-panel's columns are still runs along output lines (x), which is
 * all the gathers need.  A depth-1 volume costs the 2-D case nothing but a
 * few integer multiplications by 1 per line run.
 */
#ifndef TH_CONV_H
#define TH_CONV_H

#include "THTensor.h"

#include <stdint.h>

/* A 2-D shape has depth 1 in every _d field but pad_d (0): THConvShape_flat
 * says so (Note [Three spatial dims, one code path]). */
typedef struct {
    int64_t batch, in_channels, out_channels, groups;
    int64_t in_d, in_h, in_w, out_d, out_h, out_w;
    int64_t kernel_d, kernel_h, kernel_w;
    int64_t stride_d, stride_h, stride_w;
    int64_t pad_d, pad_h, pad_w;
    int64_t dilation_d, dilation_h, dilation_w;
} THConvShape;

/* `s` with its depth fields those of a 2-D convolution (depth 1). */
static inline THConvShape
THConvShape_flat(THConvShape s)
{
    s.in_d = s.out_d = s.kernel_d = s.stride_d = s.dilation_d = 1;
    s.pad_d = 0;
    return s;
}

/* The output extent of one spatial dim; 0 when the (dilated) kernel does
 * not fit the padded input.  C's division rounds toward zero, so a kernel
 * that overshoots by less than a stride would otherwise count one output,
 * whose taps read past the input. */
static inline int64_t
THConv_outputSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                  int64_t dilation)
{
    int64_t room = in + 2 * pad - dilation * (kernel - 1) - 1;
    return room < 0 ? 0 : room / stride + 1;
}

/* Each takes contiguous float32 or float64 tensors of one dtype, shaped as
 * `shape` says (input N x C x D x H x W, weight O x C/groups x kd x kh x kw,
 * output N x O x out_d x out_h x out_w; a 2-D tensor's sizes are those with
 * the depths of 1 left out); bias may be NULL.  The result tensor is
 * written whole.  0, or -1 with a MemoryError-kind error. */
int THConv_forward(THTensor *output, const THTensor *input,
                   const THTensor *weight, const THTensor *bias,
                   const THConvShape *shape);
int THConv_backwardInput(THTensor *grad_input, const THTensor *grad_output,
                         const THTensor *weight, const THConvShape *shape);
int THConv_backwardWeight(THTensor *grad_weight, const THTensor *grad_output,
                          const THTensor *input, const THConvShape *shape);

#endif /* TH_CONV_H */
