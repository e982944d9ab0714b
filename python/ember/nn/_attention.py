"""scaled_dot_product_attention on the blockwise C kernel of
c/th/THAttention.c (Note [Attention in blocks]): the scores are computed a
block at a time with a running max and sum (the flash-attention
recurrence), so memory stays linear in the sequence length; the forward
keeps the output and one logsumexp per query row, and the backward
recomputes each block of probabilities from them.

ember.nn.functional.scaled_dot_product_attention sends a call here when
kernel_fits says so; everything else takes the composite (matmul, softmax,
matmul).  A second-order gradient (backward with create_graph=True)
re-derives the first through the composite, so double backward keeps
working.
"""

import ember
from ember import _C
from ember.autograd.function import Function


def _tracing():
    from ember.jit.trace import is_tracing  # on use: ember.jit loads after ember.nn
    return is_tracing()


KERNEL_DTYPES = (ember.float32, ember.float64)


# C++'s names for the dtypes, which PyTorch's messages print.
_CXX_NAMES = {ember.bool: "bool", ember.uint8: "unsigned char", ember.int8: "signed char",
              ember.int16: "short int", ember.int32: "int", ember.int64: "long int",
              ember.float16: "c10::Half", ember.bfloat16: "c10::BFloat16",
              ember.float32: "float", ember.float64: "double"}


def _cxx_name(dtype):
    return _CXX_NAMES.get(dtype, str(dtype))


def check_arguments(query, key, value, attn_mask, enable_gqa):
    """PyTorch's checks of scaled_dot_product_attention: one dtype for
    query, key and value; a mask that is bool, float32 or of the query's
    dtype; under enable_gqa, key/value heads that divide the query's."""
    if not query.dtype == key.dtype == value.dtype:
        raise RuntimeError(
            f"Expected query, key, and value to have the same dtype, but got query.dtype: "
            f"{_cxx_name(query.dtype)} key.dtype: {_cxx_name(key.dtype)} and value.dtype: "
            f"{_cxx_name(value.dtype)} instead.")
    if attn_mask is not None and attn_mask.dtype not in (ember.bool, ember.float32,
                                                         query.dtype):
        raise RuntimeError(   # sic: two spaces before query.dtype, as PyTorch prints
            f"Expected attn_mask dtype to be bool or float or to match query dtype, but got "
            f"attn_mask.dtype: {_cxx_name(attn_mask.dtype)} and  query.dtype: "
            f"{_cxx_name(query.dtype)} instead.")
    if enable_gqa and query.dim() >= 3 and key.dim() >= 3 \
            and query.shape[-3] % max(key.shape[-3], 1) != 0:
        raise RuntimeError(   # sic: PyTorch's message stops there
            "Number of heads in key and value must divide the number of heads in ")


def kernel_fits(query, key, value, attn_mask, dropout_p, enable_gqa):
    """Whether the C kernel runs this call: no dropout; float32/float64
    query, key and value of one dtype, at least 2-D, with equal leading
    (batch) dims; key/value heads equal to the query's, or dividing them
    under enable_gqa; something to attend to; and a mask that is bool or of
    the query's dtype (or float32, converted) without a gradient to give
    it; no trace recording (the tracer cannot see inside the kernel); and
    host memory (a CUDA call takes the composite, on the device's kernels)."""
    if dropout_p > 0.0 or query.dtype not in KERNEL_DTYPES or _tracing() or query.is_cuda:
        return False
    if key.dtype != query.dtype or value.dtype != query.dtype:
        return False
    if query.dim() < 2 or key.dim() != query.dim() or value.dim() != query.dim():
        return False
    if query.shape[:-3] != key.shape[:-3] or key.shape[:-1] != value.shape[:-1]:
        return False
    if query.shape[-1] != key.shape[-1] or 0 in (query.numel(), key.numel(), value.numel()):
        return False
    if query.dim() >= 3 and key.shape[-3] != query.shape[-3]:
        if not enable_gqa or query.shape[-3] % key.shape[-3] != 0:
            return False
    if attn_mask is None:
        return True
    target = (*query.shape[:-1], key.shape[-2])
    if attn_mask.dim() > len(target) or any(
            size not in (1, want) for size, want in zip(reversed(attn_mask.shape),
                                                        reversed(target))):
        return False    # the composite raises PyTorch's broadcast error
    return not (attn_mask.requires_grad and ember.is_grad_enabled())


def attention(query, key, value, attn_mask, scale, is_causal):
    """The kernel on 4-D views: (*batch, H, L, E) with the batch dims
    flattened, 3-D inputs as one batch, 2-D ones as one batch of one
    head."""
    lead = query.shape[:-2]
    q, k, v = (_as_4d(t) for t in (query, key, value))
    mask = None
    if attn_mask is not None:
        if attn_mask.dtype not in (ember.bool, query.dtype):
            attn_mask = attn_mask.to(query.dtype)   # float32 with float64 operands
        mask = _as_4d(attn_mask.expand(*lead, query.shape[-2], key.shape[-2]))
    out = _BlockAttention.apply(q, k, v, mask, float(scale), bool(is_causal))
    return out.reshape(*lead, query.shape[-2], value.shape[-1])


def _as_4d(t):
    if t.dim() == 2:
        return t.unsqueeze(0).unsqueeze(0)
    if t.dim() == 3:
        return t.unsqueeze(0)
    return t.reshape(-1, *t.shape[-3:]) if t.dim() > 4 else t


class _BlockAttention(Function):
    """softmax(q k^T scale + mask) v per (batch, head) on the C kernel."""

    @staticmethod
    def forward(ctx, q, k, v, mask, scale, causal):
        out, logsumexp = _C._attention(q, k, v, mask, scale, causal)
        ctx.save_for_backward(q, k, v, out, logsumexp, mask)
        ctx.scale, ctx.causal = scale, causal
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, out, logsumexp, mask = ctx.saved_tensors
        if ember.is_grad_enabled():     # create_graph: a differentiable first gradient
            return _composite_backward(ctx, grad, q, k, v, mask)
        needs = ctx.needs_input_grad
        grads = _C._attention_backward(grad, q, k, v, out, logsumexp, mask, ctx.scale,
                                       ctx.causal, needs[0], needs[1], needs[2])
        return (*grads, None, None, None)


def _composite_backward(ctx, grad, q, k, v, mask):
    """The first gradient through the composite formula, with its graph."""
    from .functional import _composite_attention
    operands = (q, k, v)
    with ember.enable_grad():
        inputs = [t for t in operands if t.requires_grad]
        out = _composite_attention(q, k, v, mask, 0.0, ctx.causal, ctx.scale,
                                   enable_gqa=True)
        found = iter(ember.autograd.grad(out, inputs, grad, create_graph=True,
                                         allow_unused=True))
    grads = [next(found) if t.requires_grad else None for t in operands]
    return (*grads, None, None, None)
