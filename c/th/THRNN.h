/*
 * THRNN.h -- the time loop of one recurrent layer in one direction
 * (ember.nn.RNN, LSTM, GRU), forward and backward, with the gate math of
 * each step fused into one pass.
 *
 * Note [Recurrent layers in one loop]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * T steps, batch B, hidden size H, G = gates * H (1 for RNN, 4 for LSTM,
 * 3 for GRU, PyTorch's gate orders).  The caller computes the input
 * projection of every step as one GEMM, gates = x W_ih^T + b_ih (+ b_hh,
 * except for GRU), a (T, B, G) tensor.  Each step t then runs one GEMM
 * with W_hh and one fused pass over the gates:
 *
 *   RNN    h_t = act(gates_t + h_{t-1} W_hh^T)              act: tanh, relu
 *   LSTM   i, f, g, o = sig, sig, tanh, sig of (gates_t + h_{t-1} W_hh^T)
 *          c_t = f c_{t-1} + i g,   h_t = o tanh(c_t)
 *   GRU    a = h_{t-1} W_hh^T + b_hh (the reset gate sits inside it)
 *          r = sig(gates_r + a_r),  z = sig(gates_z + a_z)
 *          n = tanh(gates_n + r a_n),  h_t = (1 - z) n + z h_{t-1}
 *
 * The forward overwrites `gates` with what the backward needs (RNN: left
 * as is; LSTM: i, f, g, o; GRU: r, z, n) and fills `saved` (LSTM: c_t;
 * GRU: a_n; RNN: none).  The backward walks the steps the other way and
 * gives the gradient of every step's gates (for LSTM and RNN also the
 * gradient of h_{t-1} W_hh^T; GRU has a second one, of a), from which
 * the caller gets x's and the weights' gradients as whole-sequence GEMMs.
 * `reverse` runs the steps from T - 1 down to 0 (a bidirectional layer's
 * second direction).
 *
 * Note [LSTM projections]
 * ~~~~~~~~~~~~~~~~~~~~~~~
 * An LSTM with proj_size P < H (PyTorch's LSTMP) keeps a (B, H) cell but
 * a (B, P) hidden state: the cell's o tanh(c_t), call it u_t, goes
 * through a third per-step GEMM, h_t = u_t W_hr^T with W_hr (P, H), and
 * the recurrent GEMM reads that projected h_{t-1}, so W_hh is (G, P).
 * The output and h0 are (T, B, P) and (B, P); c0 and `saved` stay H
 * wide.  u_t is not kept: the backward recomputes it from o and c_t
 * while it runs the gate kernel, and per step
 *
 *   dh = dL/dh_t (the output's plus step t + 1's)      (B, P)
 *   du = dh W_hr                                       (B, H), GEMM
 *   gate kernel with du in place of dL/dh_t, giving u_t
 *   dW_hr += dh^T u_t                                  (P, H), GEMM
 *   dh_{t-1} = dgates W_hh                             (B, P), GEMM
 *
 * so dW_hr is summed over the steps inside the loop, the one weight
 * gradient that is not a whole-sequence GEMM of the caller (that one
 * would need every step's u_t and dh kept, T (B, H + P) more memory).
 */
#ifndef TH_RNN_H
#define TH_RNN_H

#include "THTensor.h"

#include <stdbool.h>

typedef enum { TH_RNN_TANH, TH_RNN_RELU, TH_RNN_LSTM, TH_RNN_GRU } THRNNMode;

/* 1, 1, 4 or 3. */
int THRNN_gateCount(THRNNMode mode);

/* All tensors contiguous, float32 or float64, one dtype: gates (T, B, G),
 * output (T, B, S) and saved (T, B, H), w_hh (G, S), b_hh (G) (GRU, may
 * be NULL for none; the others take it in `gates` and pass NULL), w_hr
 * (S, H) (LSTM with a projection, Note [LSTM projections]; NULL for
 * none), h0 (B, S) and c0 (B, H); S, the hidden state's width, is H
 * without a projection.  saved and c0 are NULL where the mode has none.
 * 0, or -1 with an error (a dtype it does not run in, out of memory). */
int THRNN_forward(THRNNMode mode, bool reverse, THTensor *gates, THTensor *output,
                  THTensor *saved, const THTensor *w_hh, const THTensor *b_hh,
                  const THTensor *w_hr, const THTensor *h0, const THTensor *c0);

/* grad_gates (T, B, G); grad_hidden_gates (T, B, G), GRU only (NULL
 * otherwise): the gradient of a.  grad_h (B, S) holds the gradient of h_n
 * on entry and of h0 on return; grad_c (B, H) likewise for LSTM (c_n, c0;
 * NULL otherwise).  grad_w_hr (S, H), with w_hr only: the gradient of
 * W_hr, overwritten.  grad_output (T, B, S) is the gradient of every h_t;
 * gates, output, saved are the forward's; w_hh, w_hr, h0, c0 its
 * arguments. */
int THRNN_backward(THRNNMode mode, bool reverse, THTensor *grad_gates,
                   THTensor *grad_hidden_gates, THTensor *grad_h, THTensor *grad_c,
                   THTensor *grad_w_hr, const THTensor *grad_output,
                   const THTensor *gates, const THTensor *output, const THTensor *saved,
                   const THTensor *w_hh, const THTensor *w_hr, const THTensor *h0,
                   const THTensor *c0);

#endif /* TH_RNN_H */
