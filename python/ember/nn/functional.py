"""ember.nn.functional: the functional forms of layers, activations and
losses (PyTorch's torch.nn.functional).

Activations that the C core implements with PyTorch's full signature are
the C operators themselves.  Everything else is a composite written from
ember operators, so autograd differentiates it with no formula of its own;
the checks come first and raise PyTorch's exception types and messages.
"""

import math
import warnings

import numpy as np

import ember
from .. import _C
from ..amp.autocast_mode import autocast_policy as _autocast_policy

__all__ = [
    "one_hot", "relu", "gelu", "silu", "sigmoid", "tanh", "softmax",
    "log_softmax", "linear", "dropout", "layer_norm", "embedding",
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "logsigmoid",
]

# C operators with PyTorch's signature.
one_hot = _C._one_hot
gelu = _C.gelu  # gelu(input, approximate='none')
sigmoid = _C.sigmoid
tanh = _C.tanh


# ---- activations --------------------------------------------------------------

def relu(input, inplace=False):
    return _C.relu_(input) if inplace else _C.relu(input)


def silu(input, inplace=False):
    if inplace:
        return input.mul_(_C.sigmoid(input))
    return _C.silu(input)


def logsigmoid(input):
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), which never overflows.

    min(x, 0) is written (x - |x|) / 2 (exact in floating point) so that the
    composite's derivative at x = 0 is sigmoid(0) = 1/2, as PyTorch's."""
    magnitude = ember.abs(input)
    return (input - magnitude) * 0.5 - ember.log1p(ember.exp(-magnitude))


def _softmax_dim(name, ndim, stacklevel):
    """PyTorch's legacy choice of dim when softmax is called without one."""
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the "
        "call to include dim=X as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("softmax", input.dim(), _stacklevel)
    return _C.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("log_softmax", input.dim(), _stacklevel)
    return _C.log_softmax(input, dim, dtype=dtype)


# ---- layers -------------------------------------------------------------------

@_autocast_policy("linear")
def linear(input, weight, bias=None):
    """input @ weight.T + bias; one fused addmm for a 2-D input, and for a
    contiguous N-D one with its leading dims folded into the rows
    (PyTorch's _flatten_nd_linear): the bias is added inside the product
    rather than by a pass of its own, and the backward is addmm's, whose
    weight gradient comes out in the weight's layout."""
    if bias is not None and input.dim() == 2:
        return ember.addmm(bias, input, weight.t())
    if (bias is not None and input.dim() > 0 and weight.dim() == 2 and bias.dim() == 1
            and input.is_contiguous()):
        leading = input.shape[:-1]
        rows = input.reshape(math.prod(leading), input.shape[-1])
        return ember.addmm(bias, rows, weight.t()).view(*leading, weight.shape[0])
    output = ember.matmul(input, weight.t())
    if bias is not None:
        output = output + bias
    return output


def dropout(input, p=0.5, training=True, inplace=False):
    """Zeroes each element with probability p and scales the rest by
    1 / (1 - p); the identity when not training."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        noise = ember.zeros((), dtype=input.dtype)
    else:
        keep = ember.rand(input.shape, dtype=input.dtype, device=input.device) < (1.0 - p)
        noise = keep.to(input.dtype).div_(1.0 - p)
    return input.mul_(noise) if inplace else input * noise


def _check_dropout_probability(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


# Note [Feature and alpha dropout]
# PyTorch's _dropout_impl (ATen's Dropout.cpp) is one recipe in four forms:
# the noise has the input's shape, or with feature dropout one draw per
# (sample, channel), shape (N, C, 1, ...), which broadcasts over the
# spatial dims.  Each draw keeps with probability 1 - p.  Plain dropout
# multiplies by keep / (1 - p); alpha dropout (for SELU networks) sends a
# dropped value to SELU's negative saturation -alpha' and then rescales by
# a and shifts by b, chosen so that zero mean and unit variance survive:
#     a = 1 / sqrt((alpha'^2 p + 1)(1 - p)),   output = a * x + b  (kept)
#     b = alpha' a p,                           output = b - alpha' a (dropped)
# with alpha' = SELU's scale * alpha = 1.7580993408473766.  Nothing is drawn
# when not training, p == 0 or the input is empty; p == 1 multiplies by a
# zero scalar (so every element becomes 0, alpha dropout included).

_SELU_NEGATIVE_SATURATION = 1.7580993408473766


def _dropout_noise(input, p, feature, alpha):
    """(scale, shift or None) of Note [Feature and alpha dropout]."""
    if feature and input.dim() < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    shape = list(input.shape[:2]) + [1] * (input.dim() - 2) if feature else input.shape
    keep = (ember.rand(shape, dtype=input.dtype, device=input.device) < (1.0 - p))
    keep = keep.to(input.dtype)
    if not alpha:
        return keep.div_(1.0 - p), None
    a = 1.0 / math.sqrt((_SELU_NEGATIVE_SATURATION ** 2 * p + 1) * (1 - p))
    shift = (keep - 1).mul_(_SELU_NEGATIVE_SATURATION * a).add_(
        _SELU_NEGATIVE_SATURATION * a * p)
    return keep.mul_(a), shift


def _dropout_impl(input, p, training, inplace, feature=False, alpha=False):
    _check_dropout_probability(p)
    if p == 0.0 or not training or input.numel() == 0:
        return input
    if p == 1.0:
        zero = ember.zeros((), dtype=input.dtype, device=input.device)
        return input.mul_(zero) if inplace else input * zero
    scale, shift = _dropout_noise(input, p, feature, alpha)
    output = input.mul_(scale) if inplace else input * scale
    return output if shift is None else output.add_(shift)


def _feature_dropout_unbatched(input, p, training, inplace, alpha=False):
    """Feature dropout of one sample: a batch of one, the result squeezed
    back (in place, the write goes through the view into `input`)."""
    result = _dropout_impl(input.unsqueeze(0), p, training, inplace, True, alpha)
    return input if inplace else result.squeeze(0)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, L) or (C, L) inputs, each with
    probability p, and scales the rest by 1 / (1 - p)."""
    _check_dropout_probability(p)
    if input.dim() not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.dim()}D input. "
            "Note that dropout1d exists to provide channel-wise dropout on inputs with 1 "
            "spatial dimension, a channel dimension, and an optional batch dimension "
            "(i.e. 2D or 3D inputs).")
    if input.dim() == 2:
        return _feature_dropout_unbatched(input, p, training, inplace)
    return _dropout_impl(input, p, training, inplace, feature=True)


def _warn_feature_dropout_rank(name, ndim, spatial):
    warnings.warn(
        f"{name}: Received a {ndim}-D input to {name}, which is deprecated "
        "and will result in an error in a future release. To retain the behavior "
        "and silence this warning, please use dropout instead. Note that "
        f"{name} exists to provide channel-wise dropout on inputs with {spatial} "
        "spatial dimensions, a channel dimension, and an optional batch dimension "
        f"(i.e. {spatial + 1}D or {spatial + 2}D inputs).", stacklevel=3)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, H, W) inputs.  As PyTorch, a 3-D
    input is read as (N, C, L), not as an unbatched (C, H, W), with a
    warning; other ranks warn and still drop along dims 0 and 1."""
    _check_dropout_probability(p)
    if input.dim() not in (3, 4):
        _warn_feature_dropout_rank("dropout2d", input.dim(), 2)
    if input.dim() == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise "
            "1D dropout behavior is desired - input is interpreted as shape (N, C, L), "
            "where C is the channel dim. This behavior will change in a future release "
            "to interpret the input as one without a batch dimension, i.e. shape "
            "(C, H, W). To maintain the 1D channel-wise dropout behavior, please switch "
            "to using dropout1d instead.", stacklevel=2)
    return _dropout_impl(input, p, training, inplace, feature=True)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, D, H, W) or (C, D, H, W) inputs."""
    _check_dropout_probability(p)
    if input.dim() not in (4, 5):
        _warn_feature_dropout_rank("dropout3d", input.dim(), 3)
    if input.dim() != 5:
        return _feature_dropout_unbatched(input, p, training, inplace)
    return _dropout_impl(input, p, training, inplace, feature=True)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks: dropped elements go to SELU's negative
    saturation, then an affine map keeps mean 0 and variance 1 (Note
    [Feature and alpha dropout])."""
    return _dropout_impl(input, p, training, inplace, alpha=True)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """alpha_dropout with one draw per (sample, channel)."""
    return _dropout_impl(input, p, training, inplace, feature=True, alpha=True)


__all__ += ["dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"]


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalises over the last len(normalized_shape) dims (biased variance);
    float32/float64 run the C kernels (ember/nn/_row_norm.py)."""
    normalized_shape = list(normalized_shape)
    k = len(normalized_shape)
    if k == 0 or list(input.shape[input.dim() - k:]) != normalized_shape or input.dim() < k:
        raise RuntimeError(
            f"Given normalized_shape={normalized_shape}, expected input with shape "
            f"[*, {', '.join(map(str, normalized_shape))}], but got input of size"
            f"{list(input.shape)}")
    for name, param in (("weight", weight), ("bias", bias)):
        if param is not None and list(param.shape) != normalized_shape:
            raise RuntimeError(
                f"Expected {name} to be of same shape as normalized_shape, but got "
                f"{name} of shape {list(param.shape)} and normalized_shape = "
                f"{normalized_shape}")
    if _batch_norm_kernel.kernel_fits(input, weight, bias):
        return _row_norm.layer_norm(input, k, weight, bias, eps)
    return _row_norm.layer_norm_composite(input, k, weight, bias, eps)


def _normalize_padding_idx(padding_idx, num_embeddings):
    """padding_idx in [0, num_embeddings), or -1 for none."""
    if padding_idx is None:
        return -1
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise AssertionError("Padding_idx must be within num_embeddings")
    return padding_idx % num_embeddings


def _embedding_renorm_(weight, input, max_norm, norm_type):
    """Rescales, in place, the rows of `weight` that `input` looks up and
    whose norm exceeds max_norm, to norm max_norm (PyTorch's 1e-7 guard)."""
    with ember.no_grad():
        rows = ember.unique(input.reshape(-1))
        selected = weight.index_select(0, rows)
        norms = selected.norm(p=norm_type, dim=1, keepdim=True)
        scale = ember.where(norms > max_norm, max_norm / (norms + 1e-7),
                            ember.ones_like(norms))
        weight.index_put_((rows,), selected * scale)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of `weight` at the indices `input`: shape input.shape + (dim,).
    The row padding_idx gets no gradient."""
    if input.dtype not in (ember.int64, ember.int32):
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the "
            f"following scalar types: Long, Int; but got {input.type()} instead "
            "(while checking arguments for embedding)")
    if weight.dim() != 2:
        raise RuntimeError("'weight' must be 2-D")
    if scale_grad_by_freq or sparse:
        raise NotImplementedError(
            "ember.nn.functional.embedding: scale_grad_by_freq and sparse "
            "gradients are not supported")
    padding_idx = _normalize_padding_idx(padding_idx, weight.size(0))
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    flat = input.reshape(-1)
    output = weight.index_select(0, flat).reshape(*input.shape, weight.size(1))
    if padding_idx >= 0:
        # Same values, but the padding rows are cut from the graph.
        is_padding = (input == padding_idx).unsqueeze(-1)
        output = ember.where(is_padding, output.detach(), output)
    return output


# Note [Bags]
# embedding_bag reduces the rows of `weight` that each bag's indices name,
# without materialising one tensor per bag: every index learns its bag
# (searchsorted of its position in the offsets), the indices no bag keeps
# (padding_idx, those past include_last_offset's final offset) are
# dropped, and index_add sums the remaining rows into their bags.
# "mean" divides by the count of rows a bag kept (an empty bag gives
# zeros); "max" takes, per bag and feature, the first row holding the
# maximum (ATen's scan keeps the first), found without autograd and then
# gathered, so the gradient reaches that row alone.

def _bag_of_each_index(input, offsets, include_last_offset):
    """(bag index of each position, number of bags, positions in a bag).
    With include_last_offset the final offset ends the last bag, as
    documented (and as PyTorch's float32 kernel reads it; its float64
    kernel lets the last bag run to the end of the input instead)."""
    bags = max(offsets.numel() - 1, 0) if include_last_offset else offsets.numel()
    positions = ember.arange(input.numel())
    bag = ember.searchsorted(offsets.long(), positions, right=True) - 1
    keep = bag < bags
    if include_last_offset and offsets.numel():
        keep = keep & (positions < offsets[-1])
    return bag, bags, keep


def _check_bag_offsets(input, weight, offsets):
    if offsets.numel() and offsets[0].item() != 0:
        raise RuntimeError(
            "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start "
            f"from position 0. However, got {offsets[0].item()}")
    if offsets.numel() and offsets[-1].item() > input.numel():
        raise RuntimeError(f"offsets[-1] can not be greater than input's length {input.numel()} "
                           f"but got offsets[-1] of {offsets[-1].item()}")
    rows = weight.shape[0]
    outside = (input < 0) | (input >= rows)
    if input.numel() and outside.any().item():
        position = int(outside.long().argmax().item())
        raise RuntimeError(f"Index {position} of input takes value {input[position].item()} "
                           f"which is not in the valid range [0, {rows})")


def _normalize_bag_arguments(input, weight, offsets, per_sample_weights, include_last_offset):
    """PyTorch's Python-side checks; a 2-D input becomes 1-D with offsets."""
    if per_sample_weights is not None and input.shape != per_sample_weights.shape:
        raise ValueError(
            f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, "
            f"then it must have the same shape as the input ({input.shape})")
    if weight.dim() != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension "
                         f"{weight.dim()}")
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError(
                "if input is 2D, then offsets has to be None, as input is treated is a "
                "mini-batch of fixed length sequences. However, found offsets of type "
                f"{type(offsets)}")
        offsets = ember.arange(0, input.numel(), max(input.shape[1], 1), dtype=input.dtype)
        include_last_offset = False
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.dim() != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.dim()}")
    return input, offsets, per_sample_weights, include_last_offset


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,
                  scale_grad_by_freq=False, mode="mean", sparse=False, per_sample_weights=None,
                  include_last_offset=False, padding_idx=None):
    """The sum, mean or max of each bag of rows of `weight` (Note [Bags]).
    A 1-D input is cut into bags at `offsets` (bag i starts at offsets[i]);
    a 2-D input is one bag per row.  per_sample_weights (mode "sum") scale
    each row first; indices equal to padding_idx are left out."""
    if weight.dtype == ember.int64 and input.is_floating_point():
        warnings.warn(
            "Argument order of nn.functional.embedding_bag was changed. "
            "Usage `embedding_bag(weight, input, ...)` is deprecated, "
            "and should now be `embedding_bag(input, weight, ...)`.", stacklevel=2)
        weight, input = input, weight
    input, offsets, per_sample_weights, include_last_offset = _normalize_bag_arguments(
        input, weight, offsets, per_sample_weights, include_last_offset)
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")
    if input.dtype not in (ember.int64, ember.int32):
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar "
            f"types: Long, Int; but got {input.type()} instead (while checking arguments for "
            "embedding_bag)")
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("ember.nn.functional.embedding_bag: scale_grad_by_freq and "
                                  "sparse gradients are not supported")
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(
            "embedding_bag: per_sample_weights was not None. per_sample_weights is only "
            f"supported for mode='sum' (got mode='{mode}'). Please open a feature request "
            "on GitHub.")
    _check_bag_offsets(input, weight, offsets)
    bag, bags, keep = _bag_of_each_index(input, offsets, include_last_offset)
    if padding_idx is not None:
        keep = keep & (input != _normalize_padding_idx(padding_idx, weight.shape[0]))
    if not keep.all().item():
        bag, input = bag[keep], input[keep]
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights[keep]
    rows = weight.index_select(0, input.long())
    if mode == "max":
        return _bag_max(rows, bag, bags)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.unsqueeze(1)
    sums = ember.zeros((bags, weight.shape[1]), dtype=weight.dtype).index_add(0, bag, rows)
    if mode == "sum":
        return sums
    counts = ember.zeros(bags, dtype=weight.dtype).index_add(
        0, bag, ember.ones(bag.numel(), dtype=weight.dtype))
    return sums / counts.clamp(min=1).unsqueeze(1)


def _bag_max(rows, bag, bags):
    """Per bag and feature, the first kept row's value that is the largest."""
    features = rows.shape[1]
    if rows.shape[0] == 0:
        return ember.zeros((bags, features), dtype=rows.dtype) + rows.sum() * 0
    with ember.no_grad():
        spread = bag.unsqueeze(1).expand(-1, features)
        largest = ember.zeros((bags, features), dtype=rows.dtype).scatter_reduce(
            0, spread, rows, "amax", include_self=False)
        position = ember.arange(rows.shape[0]).unsqueeze(1).expand(-1, features)
        is_max = rows == largest.index_select(0, bag)
        candidates = ember.where(is_max, position, ember.full_like(position, rows.shape[0]))
        first = ember.full((bags, features), rows.shape[0], dtype=ember.int64).scatter_reduce(
            0, spread, candidates, "amin", include_self=True)
        empty = first == rows.shape[0]
    picked = rows.gather(0, first.clamp(max=rows.shape[0] - 1))
    return picked.masked_fill(empty, 0.0)


__all__ += ["embedding_bag"]


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """A sample of softmax((logits + g) / tau) with g ~ Gumbel(0, 1); with
    hard, the one-hot of its argmax, whose gradient is the soft sample's
    (straight through)."""
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    gumbels = -ember.empty_like(logits).exponential_().log()
    y_soft = softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y_soft
    index = y_soft.max(dim, keepdim=True)[1]
    y_hard = ember.zeros_like(logits).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


__all__ += ["gumbel_softmax"]


# ---- losses -------------------------------------------------------------------

def _legacy_reduction(size_average, reduce):
    """PyTorch's mapping of the deprecated size_average/reduce flags."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    warnings.warn(
        "size_average and reduce args will be deprecated, please use "
        f"reduction='{'mean' if size_average and reduce else 'sum' if reduce else 'none'}' instead.",
        stacklevel=3)
    if size_average and reduce:
        return "mean"
    return "sum" if reduce else "none"


def _check_reduction(reduction):
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


_TYPE_NAMES = {
    "bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short",
    "int32": "Int", "int64": "Long", "float32": "Float", "float64": "Double",
    "float16": "Half", "bfloat16": "BFloat16",
}


def _type_name(dtype):
    """PyTorch's C++ name of a dtype in messages: Long, Float, ..."""
    return _TYPE_NAMES[str(dtype).removeprefix("ember.")]


def _check_class_weight(weight, n_classes):
    if weight is not None and (weight.dim() != 1 or weight.numel() != n_classes):
        raise RuntimeError(
            f"weight tensor should be defined either for all {n_classes} classes "
            f"or no classes but got weight tensor of shape: {list(weight.shape)}")


def _check_class_targets(input, target, weight, ignore_index):
    """PyTorch's nll_loss_nd checks, in its order.  Returns the target,
    a (1,) target of a (C,) input read as the 0-dim one it stands for."""
    if input.dim() < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.dim()})")
    if input.dim() == 1 and target.dim() == 1:
        if target.size(0) != 1:
            raise ValueError(
                "For 1D input, 1D target must have size 1, but got target size: "
                f"{target.size(0)}")
        target = target.reshape(())
    target_batch = target.size(0) if target.dim() > 0 else 0
    if input.dim() != 1 and input.size(0) != target_batch:
        raise ValueError(
            f"Expected input batch_size ({input.size(0)}) to match target "
            f"batch_size ({target_batch}).")
    if input.dim() <= 2:
        if target.dim() > 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    else:
        expected = [input.size(0)] + list(input.shape[2:])
        if list(target.shape) != expected:
            raise RuntimeError(f"Expected target size {expected}, got {list(target.shape)}")
    n_classes = input.size(1) if input.dim() >= 2 else input.size(0)
    _check_class_weight(weight, n_classes)
    if target.dtype not in (ember.int64, ember.uint8):
        raise RuntimeError(
            "expected target dtype to be Long or Byte, but got "
            f"{_type_name(target.dtype)}")
    valid = target != ignore_index
    out_of_range = valid & ((target < 0) | (target >= n_classes))
    if out_of_range.any().item():
        first = ember.masked_select(target, out_of_range)[0].item()
        raise IndexError(f"Target {first} is out of bounds.")
    return target


def _class_dim(input):
    return 0 if input.dim() == 1 else 1


def _nll(log_probs, target, weight, ignore_index):
    """The per-element losses -weight[t] * log_probs[t] (0 where t is
    ignore_index), after the checks, and the divisor of reduction="mean":
    the summed weights of the targets not ignored, or None when that is
    simply the number of elements (no weight, nothing ignored), so that the
    common case records no more than gather, neg and mean."""
    class_dim = _class_dim(log_probs)
    ignored = target == ignore_index
    any_ignored = ignored.any().item()
    safe_target = target.long().masked_fill(ignored, 0)
    loss = -log_probs.gather(class_dim, safe_target.unsqueeze(class_dim)).squeeze(class_dim)
    if weight is None:
        divisor = (~ignored).sum() if any_ignored else None
    else:
        element_weight = weight.index_select(0, safe_target.reshape(-1)).reshape(safe_target.shape)
        element_weight = element_weight.masked_fill(ignored, 0.0)
        loss = loss * element_weight
        divisor = element_weight.sum()
    if any_ignored:
        loss = loss.masked_fill(ignored, 0.0)
    return loss, divisor


def _reduce_nll(loss, divisor, reduction):
    if reduction == "mean" and divisor is not None:
        return loss.sum() / divisor
    return _reduce(loss, reduction)


@_autocast_policy("nll_loss")
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100,
             reduce=None, reduction="mean"):
    """Negative log likelihood of class-index targets given log-probabilities
    `input` of shape (C,), (N, C) or (N, C, d1, ...)."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    _check_reduction(reduction)
    target = _check_class_targets(input, target, weight, ignore_index)
    loss, divisor = _nll(input, target, weight, ignore_index)
    return _reduce_nll(loss, divisor, reduction)


def _broadcast_weight(weight, input):
    """Class weights shaped to broadcast along the class dim of `input`."""
    shape = [1] * input.dim()
    shape[_class_dim(input)] = weight.numel()
    return weight.reshape(shape)


def _cross_entropy_probabilities(input, target, weight, ignore_index,
                                 reduction, label_smoothing):
    """Cross entropy against class probabilities (target shaped as input)."""
    if not target.is_floating_point():
        raise RuntimeError(
            "Expected floating point type for target with class probabilities, "
            f"got {_type_name(target.dtype)}")
    if ignore_index >= 0:
        raise RuntimeError("ignore_index is not supported for floating point target")
    class_dim = _class_dim(input)
    n_classes = input.size(class_dim)
    _check_class_weight(weight, n_classes)
    log_probs = log_softmax(input, class_dim)
    if label_smoothing > 0.0:
        target = target * (1 - label_smoothing) + label_smoothing / n_classes
    products = log_probs * target
    if weight is not None:
        products = products * _broadcast_weight(weight, input)
    if reduction == "none":
        return -products.sum(class_dim)
    if reduction == "sum":
        return -products.sum()
    return -products.sum() / (input.numel() / n_classes)


def _cross_entropy_classes(input, target, weight, ignore_index, reduction,
                           label_smoothing):
    """Cross entropy against class indices, with PyTorch's label smoothing:
    (1 - eps) * nll + eps / C * (sum over classes of -weight * log p)."""
    target = _check_class_targets(input, target, weight, ignore_index)
    class_dim = _class_dim(input)
    n_classes = input.size(class_dim)
    log_probs = log_softmax(input, class_dim)
    nll, divisor = _nll(log_probs, target, weight, ignore_index)
    nll = _reduce_nll(nll, divisor, reduction)
    if label_smoothing == 0.0:
        return nll
    ignored = target == ignore_index
    weighted = log_probs if weight is None else log_probs * _broadcast_weight(weight, input)
    smooth = (-weighted.sum(class_dim)).masked_fill(ignored, 0.0)
    smooth = _reduce_nll(smooth, divisor, reduction)
    return (1 - label_smoothing) * nll + smooth * (label_smoothing / n_classes)


@_autocast_policy("cross_entropy")
def cross_entropy(input, target, weight=None, size_average=None,
                  ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """Cross entropy between logits `input` ((C,), (N, C) or (N, C, d1, ...))
    and class indices (integer target without the C dim) or class
    probabilities (floating target shaped as input)."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    _check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(
            f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing:g}")
    if input.shape == target.shape:
        return _cross_entropy_probabilities(
            input, target, weight, ignore_index, reduction, label_smoothing)
    return _cross_entropy_classes(
        input, target, weight, ignore_index, reduction, label_smoothing)


def _warn_size_mismatch(input, target):
    if target.shape != input.shape:
        warnings.warn(
            f"Using a target size ({target.shape}) that is different to the input "
            f"size ({input.shape}). This will likely lead to incorrect results due "
            "to broadcasting. Please ensure they have the same size.",
            stacklevel=3)


def _pointwise_loss(errors, weight, input, reduction):
    """Reduces elementwise errors, weighted by `weight` (shaped as input)."""
    if weight is None:
        return _reduce(errors, reduction)
    if weight.shape != input.shape:
        raise ValueError("Weights and input must have the same size.")
    weighted = errors * weight
    if reduction == "mean":
        return weighted.sum() / weight.sum()
    return _reduce(weighted, reduction)


@_autocast_policy("mse_loss")
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean",
             weight=None):
    """(input - target)**2, reduced."""
    _warn_size_mismatch(input, target)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    _check_reduction(reduction)
    difference = input - target
    return _pointwise_loss(difference * difference, weight, input, reduction)


@_autocast_policy("l1_loss")
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean",
            weight=None):
    """|input - target|, reduced."""
    _warn_size_mismatch(input, target)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    _check_reduction(reduction)
    return _pointwise_loss(ember.abs(input - target), weight, input, reduction)


@_autocast_policy("binary_cross_entropy")
def binary_cross_entropy(input, target, weight=None, size_average=None,
                         reduce=None, reduction="mean"):
    """-(t * log(x) + (1 - t) * log(1 - x)) for probabilities x, each log
    clamped at -100 as PyTorch does, so that x = 0 or 1 stays finite."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    _check_reduction(reduction)
    if target.shape != input.shape:
        raise ValueError(
            f"Using a target size ({target.shape}) that is different to the input "
            f"size ({input.shape}) is deprecated. Please ensure they have the same size.")
    if ((input < 0) | (input > 1)).any().item():
        raise RuntimeError("all elements of input should be between 0 and 1")
    log_x = ember.clamp(ember.log(input), min=-100)
    log_1mx = ember.clamp(ember.log1p(-input), min=-100)
    loss = (target - 1) * log_1mx - target * log_x
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@_autocast_policy("binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(input, target, weight=None,
                                     size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """binary_cross_entropy(sigmoid(input), target) computed stably:
    (1 - t) * x - (1 + (pos_weight - 1) * t) * logsigmoid(x)."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    _check_reduction(reduction)
    if target.shape != input.shape:
        raise ValueError(
            f"Target size ({target.shape}) must be the same as input size ({input.shape})")
    log_sigmoid = logsigmoid(input)
    if pos_weight is not None:
        log_sigmoid = log_sigmoid * ((pos_weight - 1) * target + 1)
    loss = (1 - target) * input - log_sigmoid
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


# ---- more activations ---------------------------------------------------------
#
# Piecewise activations are written with `where` so that each branch's
# derivative is the one PyTorch's backward kernel uses, boundaries included
# (hardtanh's gradient is 0 at min_val and max_val, hardswish's at -3 is
# -1/2, ...).  An `inplace=True` form computes the result and copies it into
# the input, so autograd records the write like any in-place op.

def _maybe_inplace(input, result, inplace):
    return input.copy_(result) if inplace else result


def threshold(input, threshold, value, inplace=False):
    """x if x > threshold else value."""
    return _maybe_inplace(input, ember.where(input > threshold, input, value), inplace)


def threshold_(input, threshold, value):
    return globals()["threshold"](input, threshold, value, inplace=True)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _maybe_inplace(input, ember.where(input > 0, input, input * negative_slope),
                          inplace)


def leaky_relu_(input, negative_slope=0.01):
    return leaky_relu(input, negative_slope, inplace=True)


def elu(input, alpha=1.0, inplace=False):
    """x if x > 0 else alpha * (exp(x) - 1)."""
    return _maybe_inplace(input, _elu(input, alpha, 1.0, 1.0), inplace)


def elu_(input, alpha=1.0):
    return elu(input, alpha, inplace=True)


class _Elu(ember.autograd.Function):
    """PyTorch's shared ELU kernel, forward and backward:

        forward   scale * x                                  for x > 0
                  scale * alpha * expm1(x * input_scale)     otherwise
        backward  grad * scale, or grad * scale * alpha * input_scale
                  * exp(x * input_scale)

    The backward takes exp of the input, not expm1's result + 1, which
    would lose every digit for very negative x.  It is made of
    differentiable ops, so double backward works."""

    @staticmethod
    def forward(ctx, input, alpha, scale, input_scale):
        ctx.save_for_backward(input)
        ctx.coefficients = (alpha, scale, input_scale)
        negative = ember.expm1(ember.clamp(input, max=0) * input_scale) * (alpha * scale)
        return ember.where(input > 0, input * scale, negative)

    @staticmethod
    def backward(ctx, grad):
        (input,) = ctx.saved_tensors
        alpha, scale, input_scale = ctx.coefficients
        slope = ember.exp(ember.clamp(input, max=0) * input_scale) * (alpha * scale * input_scale)
        return ember.where(input > 0, grad * scale, grad * slope), None, None, None


def _elu(input, alpha, scale, input_scale):
    return _Elu.apply(input, alpha, scale, input_scale)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace=False):
    return _maybe_inplace(input, _elu(input, _SELU_ALPHA, _SELU_SCALE, 1.0), inplace)


def selu_(input):
    return selu(input, inplace=True)


def celu(input, alpha=1.0, inplace=False):
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    return _maybe_inplace(input, _elu(input, alpha, 1.0, 1.0 / alpha), inplace)


def celu_(input, alpha=1.0):
    return celu(input, alpha, inplace=True)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold
    (the exponential is taken of the clamped value, so it never overflows)."""
    scaled = input * beta
    smooth = ember.log1p(ember.exp(ember.clamp(scaled, max=threshold))) / beta
    return ember.where(scaled > threshold, input, smooth)


def softsign(input):
    return input / (ember.abs(input) + 1)


def mish(input, inplace=False):
    return _maybe_inplace(input, input * ember.tanh(softplus(input)), inplace)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    clipped = ember.where(input <= min_val, min_val,
                          ember.where(input >= max_val, max_val, input))
    return _maybe_inplace(input, clipped, inplace)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input, inplace=False):
    """x / 6 + 1/2 on (-3, 3), 0 below, 1 above."""
    inside = (input > -3) & (input < 3)
    outside = (input >= 3).to(input.dtype)
    return _maybe_inplace(input, ember.where(inside, input / 6 + 0.5, outside), inplace)


def hardswish(input, inplace=False):
    """x * relu6(x + 3) / 6: 0 below -3, x above 3."""
    middle = input * (input + 3) / 6
    result = ember.where(input <= -3, ember.zeros_like(input),
                         ember.where(input < 3, middle, input))
    return _maybe_inplace(input, result, inplace)


@_autocast_policy("prelu")
def prelu(input, weight):
    """x if x > 0 else weight * x, weight one value per channel (dim 1) or
    a single value."""
    if weight.dim() > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, "
                           f"but got: ndim = {weight.dim()}")
    channels = weight.numel()
    if channels != 1:
        if input.dim() < 2 or input.shape[1] != channels:
            got = input.shape[1] if input.dim() >= 2 else 1
            raise RuntimeError(
                f"Mismatch of parameter numbers and input channel size. Found "
                f"parameter numbers = {channels} and channel size = {got}.")
        weight = weight.reshape([channels] + [1] * (input.dim() - 2))
    return ember.where(input > 0, input, input * weight)


def glu(input, dim=-1):
    """a * sigmoid(b), where a and b are the two halves of `input` along dim."""
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    size = input.shape[dim]
    if size % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension "
                           f"{dim % input.dim()} is size {size}")
    first, second = ember.chunk(input, 2, dim)
    return first * ember.sigmoid(second)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky ReLU: x where x > 0, else x * a.  Training draws a
    from U(lower, upper) for each element (and, as PyTorch's kernel, the
    gradient of an element at or below 0 is its own a); evaluation uses
    the fixed slope (lower + upper) / 2, i.e. leaky_relu."""
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    slopes = ember.rand(input.shape, dtype=input.dtype, device=input.device)
    slopes = slopes.mul_(upper - lower).add_(lower)
    noise = ember.where(input <= 0, slopes, ember.ones_like(slopes))
    return input.mul_(noise) if inplace else input * noise


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, inplace=True)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("softmin", input.dim(), _stacklevel)
    return softmax(-input, dim, dtype=dtype)


def tanhshrink(input):
    return input - ember.tanh(input)


def hardshrink(input, lambd=0.5):
    return ember.where(ember.abs(input) > lambd, input, ember.zeros_like(input))


def softshrink(input, lambd=0.5):
    if lambd < 0:
        largest, name = ((3.40282e+38, "Float") if input.dtype == ember.float32
                         else (1.79769e+308, "Double"))
        raise RuntimeError(f"lambda must be in range [0, {largest:g}] for input dtype "
                           f"{name}, but found {lambd:g}")
    return ember.where(input > lambd, input - lambd,
                       ember.where(input < -lambd, input + lambd, ember.zeros_like(input)))


# ---- more losses and distances ---------------------------------------------------

def _resolve_reduction(size_average, reduce, reduction):
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    _check_reduction(reduction)
    return reduction


@_autocast_policy("smooth_l1_loss")
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean",
                   beta=1.0):
    """0.5 * d**2 / beta where |d| < beta, else |d| - 0.5 * beta (d = input - target)."""
    _warn_size_mismatch(input, target)
    reduction = _resolve_reduction(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    distance = ember.abs(input - target)
    if beta == 0:
        return _reduce(distance, reduction)
    loss = ember.where(distance < beta, 0.5 * distance * distance / beta, distance - 0.5 * beta)
    return _reduce(loss, reduction)


@_autocast_policy("huber_loss")
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 * d**2 where |d| < delta, else delta * (|d| - 0.5 * delta)."""
    _warn_size_mismatch(input, target)
    _check_reduction(reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    distance = ember.abs(input - target)
    loss = ember.where(distance < delta, 0.5 * distance * distance,
                       delta * (distance - 0.5 * delta))
    return _pointwise_loss(loss, weight, input, reduction)


@_autocast_policy("kl_div")
def kl_div(input, target, size_average=None, reduce=None, reduction="mean",
           log_target=False):
    """KL(target || exp(input)) pointwise: input holds log-probabilities;
    target probabilities, or log-probabilities with log_target."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    elif reduction == "mean":
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the "
            "support size.'batchmean' divides only by the batch size, and aligns with "
            "the KL div math definition.'mean' will be changed to behave the same as "
            "'batchmean' in the next major release.", stacklevel=2)
    if reduction not in ("none", "mean", "sum", "batchmean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if log_target:
        loss = ember.exp(target) * (target - input)
    else:
        loss = ember.xlogy(target, target) - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.dim() != 0 else loss.sum()
    return _reduce(loss, reduction)


@_autocast_policy("poisson_nll_loss")
def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None,
                     eps=1e-8, reduce=None, reduction="mean"):
    """exp(input) - target * input (log_input), or input - target * log(input + eps);
    with full, Stirling's term target*log(target) - target + log(2*pi*target)/2
    where target > 1."""
    reduction = _resolve_reduction(size_average, reduce, reduction)
    if log_input:
        loss = ember.exp(input) - target * input
    else:
        loss = input - target * ember.log(input + eps)
    if full:
        stirling = (target * ember.log(target) - target
                    + 0.5 * ember.log(2 * 3.141592653589793 * target))
        loss = loss + stirling.masked_fill(target <= 1, 0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 * (log(max(var, eps)) + (input - target)**2 / max(var, eps)), plus
    0.5 * log(2*pi) with full.  var may have one dimension fewer, or a last
    dimension of 1 (one variance shared by the features)."""
    if not isinstance(var, ember.Tensor):
        var = ember.full_like(input, var)
    if var.shape != input.shape:
        if input.shape[:-1] == var.shape:
            var = var.unsqueeze(-1)
        elif not (input.shape[:-1] == var.shape[:-1] and var.shape[-1] == 1):
            raise ValueError("var is of incorrect size")
    _check_reduction(reduction)
    if bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    # PyTorch clamps var in place under no_grad: the value is clamped, the
    # gradient passes as if it were not.
    var = var + (ember.clamp(var, min=eps) - var).detach()
    difference = input - target
    loss = 0.5 * (ember.log(var) + difference * difference / var)
    if full:
        loss = loss + 0.5 * 1.8378770664093453   # log(2 * pi)
    return _reduce(loss, reduction)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """(x1 / max(|x1|, eps)) . (x2 / max(|x2|, eps)) along dim, broadcasting.

    As in PyTorch, each vector is normalised first and its norm is clamped
    without autograd seeing the clamp."""
    return (_normalised(x1, dim, eps) * _normalised(x2, dim, eps)).sum(dim)


def _normalised(x, dim, eps):
    norm = ember.norm(x, 2, dim, keepdim=True)
    return x / (norm + (ember.clamp(norm, min=eps) - norm).detach())


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The p-norm of x1 - x2 + eps along the last dimension."""
    dim = -1 if max(x1.dim(), x2.dim()) > 0 else 0
    difference = x1 - x2 + eps
    return ember.norm(difference, p, dim, keepdim=keepdim)


@_autocast_policy("cosine_embedding_loss")
def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None,
                          reduce=None, reduction="mean"):
    """1 - cos(x1, x2) for target 1; max(0, cos(x1, x2) - margin) for -1."""
    reduction = _resolve_reduction(size_average, reduce, reduction)
    if input1.dim() != input2.dim() or input1.shape != input2.shape:
        raise RuntimeError(f"cosine_embedding_loss: Input1 and Input2 must have the "
                           f"same shape, but got {tuple(input1.shape)} and "
                           f"{tuple(input2.shape)}")
    eps = 1e-12
    dim = input1.dim() - 1
    dot = (input1 * input2).sum(dim)
    magnitude = ((input1 * input1).sum(dim) + eps) * ((input2 * input2).sum(dim) + eps)
    cosine = dot / ember.sqrt(magnitude)
    zeros = ember.zeros_like(cosine)
    positive = ember.where(target == 1, 1 - cosine, zeros)
    negative = ember.where(target == -1, ember.clamp(cosine - margin, min=0), zeros)
    return _reduce(positive + negative, reduction)


@_autocast_policy("margin_ranking_loss")
def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None,
                        reduce=None, reduction="mean"):
    """max(0, -target * (input1 - input2) + margin)."""
    reduction = _resolve_reduction(size_average, reduce, reduction)
    if input1.dim() != input2.dim() or input1.dim() != target.dim():
        raise RuntimeError(
            f"margin_ranking_loss : All input tensors should have same dimension but got "
            f"sizes: input1: {input1.shape}, input2: {input2.shape}, target: {target.shape} ")
    loss = ember.clamp(-target * (input1 - input2) + margin, min=0)
    return _reduce(loss, reduction)


@_autocast_policy("triplet_margin_loss")
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6,
                        swap=False, size_average=None, reduce=None, reduction="mean"):
    """max(d(a, p) - d(a, n) + margin, 0) with d the p-norm distance; with
    swap, d(a, n) is replaced by min(d(a, n), d(p, n))."""
    reduction = _resolve_reduction(size_average, reduce, reduction)
    dims = (anchor.dim(), positive.dim(), negative.dim())
    if len(set(dims)) != 1:
        raise RuntimeError(
            f"The anchor, positive, and negative tensors are expected to have the same "
            f"number of dimensions, but got: anchor {dims[0]}D, positive {dims[1]}D, and "
            f"negative {dims[2]}D inputs")
    to_positive = pairwise_distance(anchor, positive, p, eps)
    to_negative = pairwise_distance(anchor, negative, p, eps)
    if swap:
        to_negative = ember.minimum(to_negative, pairwise_distance(positive, negative, p, eps))
    return _reduce(ember.clamp(to_positive - to_negative + margin, min=0), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None,
                                reduce=None, reduction="mean"):
    """The mean over classes of -(y log sigmoid(x) + (1 - y) log sigmoid(-x))."""
    reduction = _resolve_reduction(size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(dim=input.dim() - 1) / input.shape[-1]
    return _reduce(loss, reduction)


@_autocast_policy("soft_margin_loss")
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input))."""
    reduction = _resolve_reduction(size_average, reduce, reduction)
    return _reduce(softplus(-target * input), reduction)


@_autocast_policy("hinge_embedding_loss")
def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """input where target is 1; max(0, margin - input) where it is -1."""
    reduction = _resolve_reduction(size_average, reduce, reduction)
    zeros = ember.zeros_like(input)
    margin_part = ember.where(target != 1, ember.clamp(margin - input, min=0), zeros)
    direct_part = ember.where(target != -1, input, zeros)
    return _reduce(margin_part + direct_part, reduction)


__all__ += [
    "threshold", "threshold_", "leaky_relu", "leaky_relu_", "elu", "elu_", "selu",
    "selu_", "celu", "celu_", "softplus", "softsign", "mish", "hardtanh", "hardtanh_",
    "relu6", "hardsigmoid", "hardswish", "prelu", "glu", "softmin", "tanhshrink",
    "hardshrink", "softshrink", "smooth_l1_loss", "huber_loss", "kl_div",
    "poisson_nll_loss", "gaussian_nll_loss", "cosine_similarity", "pairwise_distance",
    "cosine_embedding_loss", "margin_ranking_loss", "triplet_margin_loss",
    "multilabel_soft_margin_loss", "soft_margin_loss", "hinge_embedding_loss",
]


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """input / (k + alpha * mean of x**2 over `size` neighbouring channels)
    ** beta (AlexNet's normalisation across channels).  The window mean is
    PyTorch's: the squares zero-padded along the channels (size // 2
    before, (size - 1) // 2 after) and average-pooled with stride 1."""
    dim = input.dim()
    if dim < 3:
        raise ValueError(   # sic: PyTorch's message keeps its source's indentation
            f"Expected 3D or higher dimensionality{' ' * 26}input (got {dim} dimensions)")
    if input.numel() == 0:
        return input
    batch, channels = input.shape[0], input.shape[1]
    # (N, 1, C, everything else): the channels become a pooled height
    squares = (input * input).reshape(batch, 1, channels, -1)
    squares = pad(squares, (0, 0, size // 2, (size - 1) // 2))
    div = avg_pool2d(squares, (size, 1), stride=1).reshape(input.shape)
    return input / div.mul(alpha).add(k).pow(beta)


def channel_shuffle(input, groups):
    """(N, C, *) with C = groups * k: channel g * k + i moves to i * groups + g
    (ShuffleNet's interleaving of the groups)."""
    if input.dim() <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with "
                           f"sizes {list(input.shape)}")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. "
                           f"Value of groups:{groups}")
    batch, channels, *rest = input.shape
    if channels % groups != 0:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {channels} "
                           f"channels and {groups} groups.")
    grouped = input.reshape(batch, groups, channels // groups, *rest)
    return grouped.transpose(1, 2).reshape(input.shape)


__all__ += ["rrelu", "rrelu_", "local_response_norm", "channel_shuffle"]


def _check_margin_input(input):
    """PyTorch's shape check of the multi-class margin losses: (C,), a
    scalar, or (N, C) with C > 0 (N may be 0)."""
    if not ((input.dim() <= 1 and input.numel() != 0)
            or (input.dim() == 2 and input.shape[1] != 0)):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch "
                           f"size, but got: {list(input.shape)}")


def _check_long_target(target):
    if target.dtype != ember.int64:
        raise RuntimeError(f"expected scalar type Long but found {_type_name(target.dtype)}")


def _reduce_per_sample(loss, reduction, keep_shape):
    """'mean' over samples is 0 for an empty batch, as PyTorch's kernels."""
    if reduction == "none":
        return loss.reshape(keep_shape)
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / max(loss.numel(), 1)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """The multi-class hinge loss of each sample, over the classes i other
    than its target y: sum of max(0, margin - x[y] + x[i]) ** p, times
    weight[y], divided by the number of classes.  As PyTorch's kernel, a
    term at exactly 0 has no gradient."""
    reduction = _resolve_reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    _check_margin_input(input)
    samples = 1 if input.dim() <= 1 else input.shape[0]
    classes = input.numel() if input.dim() <= 1 else input.shape[1]
    if target.dim() > 1 or target.numel() != samples:
        raise RuntimeError(
            "multi_margin_loss: target tensor should be 1-D with size equal to the number of "
            f"input samples (batch size). Expected target size [{samples}], but got "
            f"{list(target.shape)}. Input has shape {list(input.shape)}.")
    if weight is not None and weight.numel() != classes:
        raise RuntimeError(f"inconsistent weight size, expected {classes} but got "
                           f"{list(weight.shape)}")
    _check_long_target(target)
    # 'none' keeps one loss per target element: (N,), (1,) or a scalar
    per_sample_shape = [samples] if target.dim() == 1 else []
    target = target.reshape(samples)
    if target.numel() and ((target < 0) | (target >= classes)).any().item():
        raise RuntimeError("target out of range")
    scores = input.reshape(samples, classes)
    column = target.unsqueeze(1)
    excess = margin - scores.gather(1, column) + scores
    counted = (excess > 0) & (ember.arange(classes).unsqueeze(0) != column)
    terms = excess if p == 1 else excess * excess
    terms = ember.where(counted, terms, ember.zeros_like(terms))
    if weight is not None:
        terms = terms * weight.index_select(0, target).unsqueeze(1)
    loss = terms.sum(1) / classes
    return _reduce_per_sample(loss, reduction, per_sample_shape)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """The multi-label hinge loss: for each target class j (target lists
    them, ended by the first -1) and each non-target class i, max(0,
    1 - (x[j] - x[i])), summed and divided by the number of classes."""
    reduction = _resolve_reduction(size_average, reduce, reduction)
    if not ((input.dim() == 2 and input.shape[1] != 0)
            or (input.dim() == 1 and input.shape[0] != 0) or input.dim() == 0):
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch "
                           f"size, but got: {list(input.shape)}")
    classes = input.shape[-1] if input.dim() else 1
    samples = input.shape[0] if input.dim() == 2 else 1
    if input.dim() <= 1:
        consistent = target.dim() <= 1 and target.numel() == classes
    else:
        consistent = target.dim() == 2 and tuple(target.shape) == tuple(input.shape)
    if not consistent:
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: "
                           f"{list(input.shape)}")
    _check_long_target(target)
    if target.numel() and ((target < -1) | (target >= classes)).any().item():
        raise RuntimeError("argument #2 'target' is out of range")
    scores = input.reshape(samples, classes)
    target = target.reshape(samples, classes)
    # the listed targets: those before the first -1 of each row
    listed = (target >= 0).long().cumprod(1).bool()
    safe = target.masked_fill(~listed, 0)
    is_target = ember.zeros((samples, classes), dtype=ember.int64).scatter_add(
        1, safe, listed.long()) > 0
    excess = 1 - scores.gather(1, safe).unsqueeze(2) + scores.unsqueeze(1)   # (N, listed, C)
    counted = listed.unsqueeze(2) & ~is_target.unsqueeze(1) & (excess > 0)
    loss = ember.where(counted, excess, ember.zeros_like(excess)).sum((1, 2)) / classes
    return _reduce_per_sample(loss, reduction, [samples] if input.dim() == 2 else [])


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """max(d(a, p) - d(a, n) + margin, 0) for any distance function d
    (pairwise_distance by default); with swap, d(a, n) becomes
    min(d(a, n), d(p, n))."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    dims = (anchor.dim(), positive.dim(), negative.dim())
    if len(set(dims)) != 1:
        raise RuntimeError(
            f"The anchor, positive, and negative tensors are expected to have the same number "
            f"of dimensions, but got: anchor {dims[0]}D, positive {dims[1]}D, and negative "
            f"{dims[2]}D inputs")
    distance = pairwise_distance if distance_function is None else distance_function
    to_positive = distance(anchor, positive)
    to_negative = distance(anchor, negative)
    if swap:
        to_negative = ember.minimum(to_negative, distance(positive, negative))
    return _reduce(ember.clamp_min(margin + to_positive - to_negative, 0), reduction)


__all__ += ["multi_margin_loss", "multilabel_margin_loss", "triplet_margin_with_distance_loss"]


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(|input|_p, eps) along dim."""
    denominator = ember.clamp(ember.norm(input, p, dim, keepdim=True), min=eps)
    result = input / denominator
    return result if out is None else out.copy_(result)


__all__ += ["normalize"]


def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o]."""
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got "
                           f"{list(input1.shape[:-1])} and {list(input2.shape[:-1])}")
    if input1.shape[-1] != weight.shape[1]:
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got "
                           f"{input1.shape[-1]} but expected {weight.shape[1]}")
    if input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got "
                           f"{input2.shape[-1]} but expected {weight.shape[2]}")
    # (..., 1, 1, in1) @ (out, in1, in2) -> (..., out, 1, in2)
    left = ember.matmul(input1.unsqueeze(-2).unsqueeze(-2), weight).squeeze(-2)
    output = (left * input2.unsqueeze(-2)).sum(-1)
    return output if bias is None else output + bias


__all__ += ["bilinear"]


# ---- normalisation over batches, groups and instances ------------------------------
#
# float32/float64 run the C kernels of c/th/THNorm.c: batch and instance
# norm through ember/nn/_batch_norm.py, group (and layer) norm through
# ember/nn/_row_norm.py.  Other dtypes take the composites, written from
# ember operators.

def _channel_moments(input, dims):
    """(mean, biased variance) over `dims`, kept for broadcasting."""
    mean = input.mean(dim=dims, keepdim=True)
    centered = input - mean
    return mean, (centered * centered).mean(dim=dims, keepdim=True)


def _update_running(running, statistic, momentum):
    """running = (1 - momentum) * running + momentum * statistic, in place."""
    with ember.no_grad():
        running.mul_(1 - momentum).add_(statistic.to(running.dtype), alpha=momentum)


def _affine(output, weight, bias, shape):
    if weight is not None:
        output = output * weight.reshape(shape)
    if bias is not None:
        output = output + bias.reshape(shape)
    return output


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Normalises each channel (dim 1) over the batch and spatial dims: with
    the batch's statistics when training (updating running_mean/var, the
    variance unbiased), else with the running ones.  float32/float64 run
    the C kernels (ember/nn/_batch_norm.py), other dtypes the composite."""
    if input.dim() < 2:
        raise ValueError(f"Expected 2D or more input (got {input.dim()}D input)")
    channels = input.shape[1]
    count = input.numel() // max(channels, 1)
    if training and count == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got "
                         f"input size {input.shape}")
    for name, running in (("running_mean", running_mean), ("running_var", running_var)):
        if not training and running is None:
            raise RuntimeError(f"{name} must be defined in evaluation mode")
    if _batch_norm_kernel.kernel_fits(input, weight, bias):
        return _batch_norm_kernel.batch_norm(input, running_mean, running_var, weight, bias,
                                             training, momentum, eps)
    dims = [0] + list(range(2, input.dim()))
    shape = [1, channels] + [1] * (input.dim() - 2)
    if training:
        mean, variance = _channel_moments(input, dims)
        if running_mean is not None:
            _update_running(running_mean, mean.detach().reshape(channels), momentum)
        if running_var is not None:
            unbiased = variance.detach().reshape(channels) * (count / (count - 1))
            _update_running(running_var, unbiased, momentum)
    else:
        mean, variance = running_mean.reshape(shape), running_var.reshape(shape)
    output = (input - mean) * ember.rsqrt(variance + eps)
    return _affine(output, weight, bias, shape)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Normalises each (sample, channel) over its spatial dims; running
    statistics (when given) follow the batch average of the instances'."""
    if input.dim() < 3:
        raise ValueError(f"Expected 3D or more input (got {input.dim()}D input)")
    channels = input.shape[1]
    shape = [1, channels] + [1] * (input.dim() - 2)
    dims = list(range(2, input.dim()))
    if not use_input_stats and (running_mean is None or running_var is None):
        raise RuntimeError("Expected running_mean and running_var to be defined when "
                           "use_input_stats is false")
    count = input.numel() // max(input.shape[0] * channels, 1)
    if use_input_stats and count == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input "
                         f"size {input.shape}")
    if _batch_norm_kernel.kernel_fits(input, weight, bias):
        return _batch_norm_kernel.instance_norm(input, running_mean, running_var, weight,
                                                bias, use_input_stats, momentum, eps)
    if not use_input_stats:
        output = (input - running_mean.reshape(shape)) * ember.rsqrt(
            running_var.reshape(shape) + eps)
        return _affine(output, weight, bias, shape)
    mean, variance = _channel_moments(input, dims)
    if running_mean is not None:
        _update_running(running_mean, mean.detach().mean(0).reshape(channels), momentum)
    if running_var is not None:
        unbiased = variance.detach().mean(0).reshape(channels) * (count / (count - 1))
        _update_running(running_var, unbiased, momentum)
    output = (input - mean) * ember.rsqrt(variance + eps)
    return _affine(output, weight, bias, shape)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Splits the channels into num_groups groups and normalises each
    (sample, group) over its channels and spatial dims."""
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.dim()}")
    channels = input.shape[1]
    if channels % num_groups != 0:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {list(input.shape)} and "
                           f"num_groups={num_groups}")
    for name, param in (("weight", weight), ("bias", bias)):
        if param is not None and (param.dim() != 1 or param.numel() != channels):
            raise RuntimeError(
                f"Expected {name} to be a vector of size equal to the number of channels in "
                f"input, but got {name} of shape {list(param.shape)} and input of shape "
                f"{list(input.shape)}")
    if _batch_norm_kernel.kernel_fits(input, weight, bias):
        return _row_norm.group_norm(input, num_groups, weight, bias, eps)
    return _row_norm.group_norm_composite(input, num_groups, weight, bias, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x**2) + eps) over the last dims, times weight; eps
    defaults to the dtype's machine epsilon."""
    normalized_shape = [normalized_shape] if isinstance(normalized_shape, int) \
        else list(normalized_shape)
    k = len(normalized_shape)
    if input.dim() < k or list(input.shape[input.dim() - k:]) != normalized_shape:
        raise RuntimeError(   # sic: PyTorch's rms_norm prints "[*4]", not "[*, 4]"
            f"Given normalized_shape={normalized_shape}, expected input with shape "
            f"[*{', '.join(map(str, normalized_shape))}], but got input of size"
            f"{list(input.shape)}")
    if eps is None:
        eps = float(np.finfo(_numpy_dtype(input)).eps)
    dims = list(range(input.dim() - k, input.dim()))
    output = input * ember.rsqrt((input * input).mean(dim=dims, keepdim=True) + eps)
    return output if weight is None else output * weight


def _numpy_dtype(tensor):
    return np.dtype(str(tensor.dtype).removeprefix("ember."))


__all__ += ["batch_norm", "instance_norm", "group_norm", "rms_norm"]


# ---- attention -----------------------------------------------------------------------

@_autocast_policy("scaled_dot_product_attention")
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """softmax(query @ key^T * scale + bias) @ value over the last two dims.

    attn_mask: bool (True = may attend) or float (added to the scores),
    broadcast to (..., L, S); is_causal masks the positions above the
    diagonal.  A query that may attend to nothing gets a zero output, as
    PyTorch's CPU kernels give.  enable_gqa lets key/value have fewer heads
    (dim -3) than query, each shared by a group of query heads.

    float32/float64 calls without dropout run the blockwise C kernel
    (ember/nn/_attention.py: memory linear in the sequence length); the
    rest (dropout_p > 0, other dtypes, broadcast batch dims, a float mask
    of another dtype or one that needs a gradient) the composite below,
    which materialises the L x S scores."""
    _attention_kernel.check_arguments(query, key, value, attn_mask, enable_gqa)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    if _attention_kernel.kernel_fits(query, key, value, attn_mask, dropout_p, enable_gqa):
        return _attention_kernel.attention(query, key, value, attn_mask, scale, is_causal)
    return _composite_attention(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                enable_gqa)


def _composite_attention(query, key, value, attn_mask, dropout_p, is_causal, scale,
                         enable_gqa):
    """scaled_dot_product_attention as matmul, softmax, matmul."""
    length, source = query.shape[-2], key.shape[-2]
    if enable_gqa and query.dim() >= 3 and key.shape[-3] != query.shape[-3]:
        groups = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(groups, dim=-3)
        value = value.repeat_interleave(groups, dim=-3)
    scores = ember.matmul(query, key.transpose(-2, -1)) * scale
    allowed = None
    if is_causal:
        allowed = ember.ones(length, source, dtype=ember.bool).tril().to(query.device)
    if attn_mask is not None:
        if attn_mask.dtype == ember.bool:
            allowed = attn_mask if allowed is None else allowed & attn_mask
        else:
            scores = scores + attn_mask
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = _softmax_allowing_empty_rows(scores)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training=True)
    return ember.matmul(weights, value)


def _softmax_allowing_empty_rows(scores):
    """softmax over the last dim; a row that is all -inf gives zeros, not NaN."""
    empty = (scores == float("-inf")).all(dim=-1, keepdim=True)
    if not bool(empty.any()):
        return softmax(scores, -1)
    safe = scores.masked_fill(empty, 0.0)
    return softmax(safe, -1).masked_fill(empty, 0.0)


__all__ += ["scaled_dot_product_attention"]


from ._convolution import (conv1d, conv2d, conv3d, conv_transpose1d,  # noqa: E402
                           conv_transpose2d, conv_transpose3d, pad)

conv1d = _autocast_policy("conv1d")(conv1d)
conv2d = _autocast_policy("conv2d")(conv2d)
conv3d = _autocast_policy("conv3d")(conv3d)
conv_transpose1d = _autocast_policy("conv_transpose1d")(conv_transpose1d)
conv_transpose2d = _autocast_policy("conv_transpose2d")(conv_transpose2d)
conv_transpose3d = _autocast_policy("conv_transpose3d")(conv_transpose3d)

__all__ += ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
            "conv_transpose3d", "pad"]

from . import _attention as _attention_kernel  # noqa: E402
from . import _batch_norm as _batch_norm_kernel  # noqa: E402
from . import _row_norm  # noqa: E402
from ._pooling import (adaptive_avg_pool1d, adaptive_avg_pool2d,  # noqa: E402
                       adaptive_max_pool1d, adaptive_max_pool2d, avg_pool1d, avg_pool2d,
                       fold, interpolate, max_pool1d, max_pool2d, pixel_shuffle,
                       pixel_unshuffle, unfold)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


__all__ += ["adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d",
            "adaptive_max_pool2d", "avg_pool1d", "avg_pool2d", "fold", "interpolate",
            "max_pool1d", "max_pool2d", "pixel_shuffle", "pixel_unshuffle", "unfold",
            "upsample"]

from ._pooling3d import (adaptive_avg_pool3d, adaptive_max_pool3d, avg_pool3d,  # noqa: E402
                         max_pool3d, max_unpool1d, max_unpool2d, max_unpool3d)

__all__ += ["max_pool3d", "avg_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d",
            "max_unpool1d", "max_unpool2d", "max_unpool3d"]
