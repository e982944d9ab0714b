"""layer_norm and group_norm on the C kernels of c/th/THNorm.c (Note [Layer
and group norm as row norm]): one forward pass per row giving the output and
the row's mean and 1/std, one backward pass per row giving grad_input with
grad_weight and grad_bias summed alongside.

ember.nn.functional checks the arguments (PyTorch's messages) and sends
float32/float64 inputs here; the composites below run the other dtypes.  A
second-order gradient (backward with create_graph=True) re-derives the
first through the composite, as batch norm's does, so double backward works.
"""

import math

import ember
from ember import _C
from ember.autograd.function import Function

from ._batch_norm import recomputed_gradients


def layer_norm(input, normalized_ndim, weight, bias, eps):
    return _RowNorm.apply(input.contiguous(), weight, bias, False, normalized_ndim,
                          float(eps))


def group_norm(input, num_groups, weight, bias, eps):
    return _RowNorm.apply(input.contiguous(), weight, bias, True, num_groups, float(eps))


def layer_norm_composite(input, normalized_ndim, weight, bias, eps):
    dims = tuple(range(input.dim() - normalized_ndim, input.dim()))
    output = _normalized(input, dims, eps)
    if weight is not None:
        output = output * weight
    if bias is not None:
        output = output + bias
    return output


def group_norm_composite(input, num_groups, weight, bias, eps):
    per_group = math.prod(input.shape[1:]) // num_groups    # -1 is ambiguous when N = 0
    grouped = input.reshape(input.shape[0], num_groups, per_group)
    output = _normalized(grouped, (2,), eps).reshape(input.shape)
    shape = [1, input.shape[1]] + [1] * (input.dim() - 2)
    if weight is not None:
        output = output * weight.reshape(shape)
    if bias is not None:
        output = output + bias.reshape(shape)
    return output


def _normalized(x, dims, eps):
    """(x - mean) / sqrt(biased variance + eps) over `dims`."""
    centered = x - x.mean(dim=dims, keepdim=True)
    variance = (centered * centered).mean(dim=dims, keepdim=True)
    return centered * ember.rsqrt(variance + eps)


def _flat(t):
    return None if t is None else t.contiguous().reshape(-1)


class _RowNorm(Function):
    """Layer norm over the last `arg` dims (grouped false) or group norm
    with `arg` groups."""

    @staticmethod
    def forward(ctx, x, weight, bias, grouped, arg, eps):
        kernel = _C._group_norm if grouped else _C._layer_norm
        output, mean, rstd = kernel(x, _flat(weight), _flat(bias), arg, eps)
        ctx.save_for_backward(x, weight, bias, mean, rstd)
        ctx.grouped, ctx.arg, ctx.eps = grouped, arg, eps
        return output

    @staticmethod
    def backward(ctx, grad):
        x, weight, bias, mean, rstd = ctx.saved_tensors
        if ember.is_grad_enabled():     # create_graph: a differentiable first gradient
            composite = group_norm_composite if ctx.grouped else layer_norm_composite
            grads = recomputed_gradients(
                lambda *t: composite(t[0], ctx.arg, t[1], t[2], ctx.eps), (x, weight, bias),
                grad)
            return (*grads, None, None, None)
        needs = ctx.needs_input_grad
        kernel = _C._group_norm_backward if ctx.grouped else _C._layer_norm_backward
        grad_x, grad_w, grad_b = kernel(grad.contiguous(), x, mean, rstd, _flat(weight),
                                        ctx.arg, needs[0], needs[1] and weight is not None,
                                        needs[2] and bias is not None)
        if grad_w is not None:
            grad_w = grad_w.reshape(weight.shape)
        if grad_b is not None:
            grad_b = grad_b.reshape(bias.shape)
        return grad_x, grad_w, grad_b, None, None, None
