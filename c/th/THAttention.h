/*
 * THAttention.h -- scaled dot product attention computed block by block,
 * never holding the L x S matrix of scores (the flash-attention
 * recurrence; Dao et al., "FlashAttention", 2022, and PyTorch's CPU
 * kernel aten/src/ATen/native/cpu/FlashAttentionKernel.cpp).
 *
 * Note [Attention in blocks]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~
 * For one (batch, head), rows i of Q (L x E), K and V (S x E, S x Ev):
 *
 *   s_ij = scale * q_i . k_j + bias_ij      (bias: a float mask, or -inf
 *                                            where a bool mask is false or
 *                                            j > i under is_causal)
 *   o_i  = sum_j exp(s_ij - lse_i) v_j,     lse_i = log sum_j exp(s_ij)
 *
 * forward   a block of Br query rows walks the key blocks of Bc keys
 *           keeping, per row, the running max m, the running sum
 *           l = sum exp(s - m) and the unnormalised output o; a new block
 *           with max m' rescales l and o by exp(m - m') before adding its
 *           own exp(s - m') terms.  At the end o /= l and lse = m + log l
 *           is stored (L numbers per head) for the backward.
 * backward  with P = exp(S - lse) recomputed per block from Q, K and lse,
 *           D_i = do_i . o_i and dP = dO V^T:
 *               dV += P^T dO,   dS = P * (dP - D),
 *               dQ += scale dS K,   dK += scale dS^T Q.
 *
 * So the extra memory is a few Br x Bc blocks per thread, linear in
 * nothing but the block sizes.  A row that may attend to nothing (every
 * bias -inf) gets o = 0, lse = -inf and zero gradients, as PyTorch's CPU
 * kernels give.
 */
#ifndef TH_ATTENTION_H
#define TH_ATTENTION_H

#include "THTensor.h"

#include <stdbool.h>

/* query (B, H, L, E), key (B, Hk, S, E), value (B, Hk, S, Ev), any
 * strides, one floating dtype (float32 or float64), H a multiple of Hk
 * (query head h reads key/value head h / (H / Hk), grouped-query
 * attention).  mask: NULL, or (B, H, L, S) of any strides (0 for broadcast
 * dims), bool (true = may attend) or of the query's dtype (added to the
 * scores).  out (B, H, L, Ev) and logsumexp (B, H, L) contiguous, of the
 * query's dtype.  0, or -1 with an error. */
int THAttention_forward(THTensor *out, THTensor *logsumexp, const THTensor *query,
                        const THTensor *key, const THTensor *value, const THTensor *mask,
                        double scale, bool causal);

/* The gradients of the forward above given grad_out (the shape of out,
 * any strides) and the forward's out and logsumexp.  grad_query,
 * grad_key, grad_value contiguous, shaped as query, key and value; any of
 * them may be NULL (not wanted).  0, or -1 with an error. */
int THAttention_backward(THTensor *grad_query, THTensor *grad_key, THTensor *grad_value,
                         const THTensor *grad_out, const THTensor *query,
                         const THTensor *key, const THTensor *value, const THTensor *out,
                         const THTensor *logsumexp, const THTensor *mask, double scale,
                         bool causal);

#endif /* TH_ATTENTION_H */
