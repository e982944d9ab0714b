"""One recurrent layer in one direction on the C time loop of c/th/THRNN.c
(Note [Recurrent layers in one loop]), for ember.nn.RNN, LSTM and GRU and
their cells.

The forward is one GEMM for the input projection of every time step, then
the C loop: per step one GEMM with W_hh and one fused gate kernel (and an
LSTM with proj_size one GEMM with W_hr, Note [LSTM projections]).  The
backward runs the loop the other way in C, which gives the gradient of
every step's gates (and W_hr's, summed over the steps in the loop); x's
and the other weights' gradients are then whole-sequence GEMMs (dW_ih =
dgates^T x, dW_hh = dgates^T h_{t-1}, the biases sums), so there is one
autograd node per layer and direction, not one per step.

A second-order gradient (backward with create_graph=True) re-derives the
first through the per-step composite of ember/nn/modules/rnn.py, so double
backward keeps working.  rnn.py sends here float32/float64 layers without
packed sequences; those run the composite.
"""

import ember
from ember import _C
from ember.autograd.function import Function


def _tracing():
    from ember.jit.trace import is_tracing  # on use: ember.jit loads after ember.nn
    return is_tracing()


KERNEL_DTYPES = (ember.float32, ember.float64)


def kernel_fits(x, h0, c0, weights):
    """Whether the C loop runs this layer: a float32/float64 input with at
    least one step and one sequence, states and weights of its dtype; and
    no trace recording (the tracer cannot see inside the loop)."""
    if _tracing():
        return False
    tensors = (h0, c0, *weights)
    return (x.dtype in KERNEL_DTYPES and x.shape[0] > 0 and x.shape[1] > 0
            and all(t is None or t.dtype == x.dtype for t in tensors))


def run_direction(mode, x, h0, c0, weights, reverse):
    """(T, B, I) x through one layer and direction: (output, h_n, c_n),
    c_n None except for LSTM.  weights: (w_ih, w_hh, b_ih, b_hh, w_hr),
    w_hr None without a projection."""
    results = _Direction.apply(mode, reverse, x, h0, c0, *weights)
    return results if mode == "LSTM" else (*results, None)


class _Direction(Function):
    """One layer and direction: (output, h_n) and for LSTM c_n."""

    @staticmethod
    def forward(ctx, mode, reverse, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr):
        gates = _input_projection(mode, x, w_ih, b_ih, b_hh)
        gru_bias = _contiguous(b_hh) if mode == "GRU" else None
        output, saved = _C._rnn_forward(gates, w_hh.contiguous(), h0.contiguous(),
                                        _contiguous(c0), gru_bias, _contiguous(w_hr), mode,
                                        reverse)
        ctx.mode, ctx.reverse = mode, reverse
        ctx.save_for_backward(x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, gates, output,
                              saved)
        last = 0 if reverse else x.shape[0] - 1
        if mode == "LSTM":
            return output, output[last].clone(), saved[last].clone()
        return output, output[last].clone()

    @staticmethod
    def backward(ctx, grad_output, grad_h, grad_c=None):
        if ember.is_grad_enabled():     # create_graph: a differentiable first gradient
            return _composite_backward(ctx, grad_output, grad_h, grad_c)
        x, h0, c0, w_ih, w_hh, _, _, w_hr, gates, output, saved = ctx.saved_tensors
        grad_gates, grad_hidden, grad_h0, grad_c0, grad_w_hr = _C._rnn_backward(
            grad_output.contiguous(), grad_h.contiguous(), _contiguous(grad_c), gates,
            output, saved, w_hh.contiguous(), _contiguous(w_hr), h0.contiguous(),
            _contiguous(c0), ctx.mode, ctx.reverse)
        steps, batch, features = x.shape
        grad_x_gates = grad_gates.reshape(steps * batch, -1)
        # GRU's W_hh h + b_hh has a gradient of its own; the others share one
        grad_h_gates = grad_x_gates if grad_hidden is None else grad_hidden.reshape(
            steps * batch, -1)
        needs = ctx.needs_input_grad
        grad_x = grad_w_ih = grad_w_hh = grad_b_ih = grad_b_hh = None
        if needs[2]:
            grad_x = ember.matmul(grad_x_gates, w_ih).reshape(steps, batch, features)
        if needs[5]:
            grad_w_ih = ember.matmul(grad_x_gates.t(), x.reshape(steps * batch, features))
        if needs[6]:
            h_prev = _previous_states(output, h0, ctx.reverse)
            grad_w_hh = ember.matmul(grad_h_gates.t(), h_prev)
        if needs[7]:
            grad_b_ih = grad_x_gates.sum(0)
        if needs[8]:
            # one sum for both biases when they share a gradient (the engine
            # copies a gradient two leaves would share: Note [Adopting
            # gradients])
            shared = grad_hidden is None and grad_b_ih is not None
            grad_b_hh = grad_b_ih if shared else grad_h_gates.sum(0)
        return (None, None, grad_x, grad_h0 if needs[3] else None,
                grad_c0 if needs[4] else None, grad_w_ih, grad_w_hh, grad_b_ih, grad_b_hh,
                grad_w_hr if needs[9] else None)


def _contiguous(t):
    return None if t is None else t.contiguous()


def _input_projection(mode, x, w_ih, b_ih, b_hh):
    """x W_ih^T + b_ih, plus b_hh except for GRU (whose b_hh sits inside
    the reset gate's product), for all steps in one GEMM: (T, B, G)."""
    steps, batch, features = x.shape
    flat = x.reshape(steps * batch, features)
    bias = b_ih
    if mode != "GRU" and b_hh is not None:
        bias = b_hh if bias is None else b_ih + b_hh
    gates = (ember.matmul(flat, w_ih.t()) if bias is None
             else ember.addmm(bias, flat, w_ih.t()))
    return gates.reshape(steps, batch, -1).contiguous()


def _previous_states(output, h0, reverse):
    """h_{t-1} for every step t in the order of `output`, as (T * B, H)."""
    first = h0.unsqueeze(0)
    earlier = (ember.cat([output[1:], first]) if reverse
               else ember.cat([first, output[:-1]]))
    return earlier.reshape(-1, h0.shape[-1])


def _composite_backward(ctx, grad_output, grad_h, grad_c):
    """The first gradient through the per-step composite, with its graph."""
    from .modules.rnn import _STEPS, _run_direction

    x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, *_ = ctx.saved_tensors
    args = (x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr)
    with ember.enable_grad():
        inputs = [t for t in args if t is not None and t.requires_grad]
        out, h, c = _run_direction(_STEPS[ctx.mode], x, h0, c0,
                                   (w_ih, w_hh, b_ih, b_hh, w_hr), ctx.reverse, None)
        outputs = [out, h] + ([c] if c is not None else [])
        grads = [grad_output, grad_h] + ([grad_c] if c is not None else [])
        found = iter(ember.autograd.grad(outputs, inputs, grads, create_graph=True,
                                         allow_unused=True))
    result = [next(found) if t is not None and t.requires_grad else None for t in args]
    return (None, None, *result)
