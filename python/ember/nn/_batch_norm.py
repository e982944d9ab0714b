"""batch_norm on the C kernels of c/th/THNorm.c (Note [Batch norm in three
kernels]): per-channel statistics, the normalise + affine pass, and a
backward that gives grad_input, grad_weight and grad_bias in two passes.

ember.nn.functional.batch_norm checks the arguments (PyTorch's messages)
and sends float32/float64 inputs here; the running statistics are updated
here, in place, as PyTorch does (the variance unbiased).  instance_norm
runs here too, each (sample, channel) a channel of a batch of one.  A
second-order gradient (backward with create_graph=True) re-derives the
first through the composite formula, so double backward keeps working.
"""

import ember
from ember import _C
from ember.autograd.function import Function

KERNEL_DTYPES = (ember.float32, ember.float64)


def kernel_fits(input, weight, bias):
    """Whether the C kernels run this call: a float32/float64 input on the
    CPU with parameters of its dtype, and something to normalise (a CUDA
    input takes the composites, whose operators run on the device)."""
    return (input.dtype in KERNEL_DTYPES and input.numel() > 0 and not input.is_cuda
            and all(p is None or p.dtype == input.dtype for p in (weight, bias)))


def batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps):
    x = input.contiguous()
    if training:
        mean, var = _C._batch_norm_stats(x.detach())
        count = x.numel() // x.shape[1]
        from .functional import _update_running
        if running_mean is not None:
            _update_running(running_mean, mean, momentum)
        if running_var is not None:
            _update_running(running_var, var * (count / (count - 1)), momentum)
    else:
        mean, var = (s.detach().to(x.dtype).contiguous() for s in (running_mean, running_var))
    return _BatchNorm.apply(x, weight, bias, mean, var, bool(training), float(eps))


class _BatchNorm(Function):
    """(x - mean) / sqrt(var + eps) * weight + bias per channel, mean and var
    given (the batch's when training: the backward then differentiates
    through them)."""

    @staticmethod
    def forward(ctx, x, weight, bias, mean, var, training, eps):
        ctx.save_for_backward(x, weight, bias, mean, var)
        ctx.training, ctx.eps = training, eps
        return _C._batch_norm(x, mean, var, _contiguous(weight), _contiguous(bias), eps)

    @staticmethod
    def backward(ctx, grad):
        x, weight, bias, mean, var = ctx.saved_tensors
        needs = ctx.needs_input_grad
        if ember.is_grad_enabled():     # create_graph: a differentiable first gradient
            return _composite_backward(ctx, grad, x, weight, bias, mean, var)
        grads = _C._batch_norm_backward(grad.contiguous(), x, mean, var, _contiguous(weight),
                                        ctx.eps, ctx.training, needs[0],
                                        needs[1] and weight is not None,
                                        needs[2] and bias is not None)
        return (*grads, None, None, None, None)


def _contiguous(t):
    return None if t is None else t.contiguous()


def _composite_backward(ctx, grad, x, weight, bias, mean, var):
    """The first gradient through the composite formula, with its graph."""
    dims = [0] + list(range(2, x.dim()))
    shape = [1, x.shape[1]] + [1] * (x.dim() - 2)

    def composite(x, weight, bias):
        if ctx.training:
            batch_mean = x.mean(dim=dims, keepdim=True)
            centered = x - batch_mean
            batch_var = (centered * centered).mean(dim=dims, keepdim=True)
        else:
            batch_mean, batch_var = mean.reshape(shape), var.reshape(shape)
        out = (x - batch_mean) * ember.rsqrt(batch_var + ctx.eps)
        if weight is not None:
            out = out * weight.reshape(shape)
        if bias is not None:
            out = out + bias.reshape(shape)
        return out

    return (*recomputed_gradients(composite, (x, weight, bias), grad), None, None, None, None)


def recomputed_gradients(composite, tensors, grad):
    """The gradients of <composite(*tensors), grad> with respect to those of
    `tensors` that require grad (None for the others), with their graph:
    a fused kernel's first gradient made differentiable."""
    with ember.enable_grad():
        wanted = [t for t in tensors if t is not None and t.requires_grad]
        out = composite(*tensors)
        found = iter(ember.autograd.grad(out, wanted, grad, create_graph=True,
                                         allow_unused=True))
    return [next(found) if t is not None and t.requires_grad else None for t in tensors]


def instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                  momentum, eps):
    """Each (sample, channel) normalised as a channel of a batch of one (as
    PyTorch does); the running statistics follow the batch average of the
    instances'."""
    n, c = input.shape[0], input.shape[1]
    x = input.contiguous().reshape(1, n * c, *input.shape[2:])
    weight, bias = _repeat(weight, n), _repeat(bias, n)
    if not use_input_stats:
        mean, var = (_repeat(s.detach().to(x.dtype), n) for s in (running_mean, running_var))
        return _BatchNorm.apply(x, weight, bias, mean, var, False, float(eps)).reshape(
            input.shape)
    mean, var = _C._batch_norm_stats(x.detach())
    count = x.numel() // (n * c)
    from .functional import _update_running
    if running_mean is not None:
        _update_running(running_mean, mean.reshape(n, c).mean(0), momentum)
    if running_var is not None:
        unbiased = var * (count / (count - 1))
        _update_running(running_var, unbiased.reshape(n, c).mean(0), momentum)
    return _BatchNorm.apply(x, weight, bias, mean, var, True, float(eps)).reshape(input.shape)


def _repeat(t, times):
    return None if t is None else t.repeat(times).contiguous()
