/*
 * THPool.h -- 2-D max and average pooling on contiguous NCHW tensors,
 * forward and backward, with PyTorch's semantics.
 *
 * Note [Pooling windows]
 * ~~~~~~~~~~~~~~~~~~~~~~
 * Every (sample, channel) plane is pooled on its own.  Output position
 * (y, x) reads the window whose top-left corner is
 * (y * stride_h - pad_h, x * stride_w - pad_w) in the padded input:
 *
 *   - max pooling reads kernel_h x kernel_w taps `dilation` apart, skips
 *     the taps in the padding (PyTorch pads with -inf, which never wins),
 *     keeps the first largest value and its flat index row * in_w + col in
 *     the plane; a NaN always wins, so the last NaN of a window is kept, as
 *     in PyTorch's kernel.  The backward adds each output gradient to the
 *     input element its index names.  With dilation a window can miss the
 *     input entirely (e.g. width 1, kernel 2, dilation 2, padding 1): its
 *     value is -inf and its index PyTorch's (the first tap at or after
 *     column 0, outside the plane); such an index names no element, and
 *     the backward drops its gradient (PyTorch adds it to the next plane).
 *   - average pooling sums the window's taps inside the input and divides
 *     by divisor_override when given, else by the window's size clipped to
 *     the padded input (count_include_pad) or to the input itself.
 *
 * With ceil_mode the last window may hang off the padded input's end, but
 * it must start inside the input or its left padding (THPool_outputSize).
 */

/*
 * Note [Adaptive pooling windows]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * Adaptive pooling fixes the output size instead of the window: along a
 * dim of `in` elements pooled to `out`, output o reads
 * [floor(o in / out), ceil((o + 1) in / out)), every tap (PyTorch's
 * start_index / end_index).  Windows cover the input and overlap by at most
 * one element when out does not divide in.  Max pooling keeps the first
 * largest value (the last NaN) and its flat index, as above, so its
 * backward is THPool2d_maxBackward; average pooling divides by the
 * window's size.  Only planes, in_h, in_w, out_h, out_w of the shape are
 * read; out_h, out_w > 0.
 */
#ifndef TH_POOL_H
#define TH_POOL_H

#include "THTensor.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    int64_t planes; /* batch * channels */
    int64_t in_h, in_w, out_h, out_w;
    int64_t kernel_h, kernel_w;
    int64_t stride_h, stride_w;
    int64_t pad_h, pad_w;
    int64_t dilation_h, dilation_w;
} THPoolShape;

/* How an average pooling window is divided (Note [Pooling windows]). */
typedef struct {
    bool count_include_pad;
    int64_t divisor_override; /* 0: none */
} THAvgPoolDivisor;

/* PyTorch's pooling output extent of one spatial dim; <= 0 when no window
 * fits.  Callers check kernel, stride and dilation are positive. */
static inline int64_t
THPool_outputSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                  int64_t dilation, bool ceil_mode)
{
    int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1
                   + (ceil_mode ? stride - 1 : 0);
    /* floor division (span may be negative) */
    int64_t out = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
    if (ceil_mode && (out - 1) * stride >= in + pad) {
        out--; /* the last window would start in the right padding */
    }
    return out;
}

/* Each takes contiguous tensors shaped (planes, in_h, in_w) and
 * (planes, out_h, out_w) in any layout with those element counts, of one
 * float32 or float64 dtype; indices are int64.  Results are written whole.
 * 0, or -1 with an error (a dtype they do not run in). */
int THPool2d_maxForward(THTensor *output, THTensor *indices, const THTensor *input,
                        const THPoolShape *shape);
int THPool2d_maxBackward(THTensor *grad_input, const THTensor *grad_output,
                         const THTensor *indices, const THPoolShape *shape);
int THPool2d_avgForward(THTensor *output, const THTensor *input,
                        const THPoolShape *shape, THAvgPoolDivisor divisor);
int THPool2d_avgBackward(THTensor *grad_input, const THTensor *grad_output,
                         const THPoolShape *shape, THAvgPoolDivisor divisor);
int THPool2d_adaptiveMaxForward(THTensor *output, THTensor *indices,
                                const THTensor *input, const THPoolShape *shape);
int THPool2d_adaptiveAvgForward(THTensor *output, const THTensor *input,
                                const THPoolShape *shape);
int THPool2d_adaptiveAvgBackward(THTensor *grad_input, const THTensor *grad_output,
                                 const THPoolShape *shape);

#endif /* TH_POOL_H */
