"""ember.nn.functional: the functional forms of layers, activations and
losses (PyTorch's torch.nn.functional).

Activations that the C core implements with PyTorch's full signature are
the C operators themselves.  Everything else is a composite written from
ember operators, so autograd differentiates it with no formula of its own;
the checks come first and raise PyTorch's exception types and messages.
"""

import warnings

import ember
from .. import _C
from ..amp.autocast_mode import autocast_policy

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

@autocast_policy("linear")
def linear(input, weight, bias=None):
    """input @ weight.T + bias; one fused addmm for a 2-D input."""
    if input.dim() == 2 and bias is not None:
        return ember.addmm(bias, input, weight.t())
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
        keep = ember.rand(input.shape, dtype=input.dtype) < (1.0 - p)
        noise = keep.to(input.dtype).div_(1.0 - p)
    return input.mul_(noise) if inplace else input * noise


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalises over the last len(normalized_shape) dims (biased variance)."""
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
    dims = tuple(range(input.dim() - k, input.dim()))
    centered = input - input.mean(dim=dims, keepdim=True)
    variance = (centered * centered).mean(dim=dims, keepdim=True)
    output = centered * ember.rsqrt(variance + eps)
    if weight is not None:
        output = output * weight
    if bias is not None:
        output = output + bias
    return output


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


@autocast_policy("nll_loss")
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


@autocast_policy("cross_entropy")
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


@autocast_policy("mse_loss")
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean",
             weight=None):
    """(input - target)**2, reduced."""
    _warn_size_mismatch(input, target)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    _check_reduction(reduction)
    difference = input - target
    return _pointwise_loss(difference * difference, weight, input, reduction)


@autocast_policy("l1_loss")
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean",
            weight=None):
    """|input - target|, reduced."""
    _warn_size_mismatch(input, target)
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    _check_reduction(reduction)
    return _pointwise_loss(ember.abs(input - target), weight, input, reduction)


@autocast_policy("binary_cross_entropy")
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


@autocast_policy("binary_cross_entropy_with_logits")
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
