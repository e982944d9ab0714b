"""ember.nn.init: in-place initialisers of weights (PyTorch's nn.init).

Each function overwrites the values of `tensor` (under no_grad, so it works
on a Parameter that requires grad) and returns `tensor`.  Random values come
from `generator` (an ember.Generator), by default ember's global one
(ember.manual_seed), drawn in place by Tensor.uniform_/normal_.
"""

import math
import warnings

import ember

__all__ = [
    "calculate_gain", "uniform_", "normal_", "constant_", "ones_", "zeros_",
    "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
]

_LINEAR_FNS = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
               "conv_transpose2d", "conv_transpose3d")


def calculate_gain(nonlinearity, param=None):
    """The recommended scale of the weights for a nonlinearity."""
    if nonlinearity in _LINEAR_FNS or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif (not isinstance(param, bool) and isinstance(param, int)) or isinstance(param, float):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    """(fan_in, fan_out) of a weight laid out (out, in, *receptive field)."""
    if tensor.dim() < 2:
        raise ValueError(
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive_field_size = 1
    for size in tensor.shape[2:]:
        receptive_field_size *= size
    fan_in = tensor.size(1) * receptive_field_size
    fan_out = tensor.size(0) * receptive_field_size
    return fan_in, fan_out


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    valid_modes = ["fan_in", "fan_out"]
    if mode not in valid_modes:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid_modes}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fills `tensor` with values drawn from U(a, b)."""
    with ember.no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fills `tensor` with values drawn from N(mean, std**2)."""
    with ember.no_grad():
        return tensor.normal_(mean, std, generator=generator)


def constant_(tensor, val):
    with ember.no_grad():
        return tensor.fill_(val)


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    with ember.no_grad():
        return tensor.zero_()


def _is_empty(tensor):
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return True
    return False


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Glorot uniform: U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Glorot normal: N(0, std**2), std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu",
                     generator=None):
    """He uniform: U(-b, b), b = gain * sqrt(3 / fan)."""
    if _is_empty(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    bound = math.sqrt(3.0) * gain / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu",
                    generator=None):
    """He normal: N(0, std**2), std = gain / sqrt(fan)."""
    if _is_empty(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    return normal_(tensor, 0.0, gain / math.sqrt(fan), generator)


def eye_(tensor):
    """The identity matrix (a 2-D tensor; rectangular ones get ones on the diagonal)."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with ember.no_grad():
        tensor.copy_(ember.eye(*tensor.shape, dtype=tensor.dtype))
    return tensor


def dirac_(tensor, groups=1):
    """A convolution weight that passes each input channel to the output
    channel of the same index (per group): 1 at the kernel's centre."""
    dims = tensor.dim()
    if dims not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tensor.shape
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = sizes[0] // groups
    with ember.no_grad():
        tensor.zero_()
        centre = tuple(size // 2 for size in sizes[2:])
        for g in range(groups):
            for d in range(min(per_group, sizes[1])):
                tensor[(g * per_group + d, d) + centre] = 1
    return tensor


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """N(mean, std**2) truncated to [a, b], by rejection: redraw the values
    outside [a, b] from the normal when most draws land inside, else draw
    uniformly on [a, b] and accept with the normal density's ratio."""
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    inside = _normal_cdf((b - mean) / std) - _normal_cdf((a - mean) / std)
    with ember.no_grad():
        if inside > 0.3:
            _redraw_outside(tensor, a, b,
                            lambda t: t.normal_(mean, std, generator=generator))
        else:
            _uniform_rejection(tensor, mean, std, a, b, generator)
    return tensor


def _normal_cdf(x):
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


def _redraw_outside(tensor, low, high, draw):
    draw(tensor)
    while True:
        outside = (tensor < low) | (tensor > high)
        if not bool(outside.any()):
            return
        tensor.copy_(ember.where(outside, draw(ember.empty_like(tensor)), tensor))


def _uniform_rejection(tensor, mean, std, a, b, generator):
    """Uniform proposals on [a, b], accepted with probability
    pdf(x) / pdf(mode), until every element holds an accepted one."""
    mode = max(a, min(mean, b))
    log_peak = -0.5 * ((mode - mean) / std) ** 2
    pending = ember.ones(tensor.shape, dtype=ember.bool)
    while bool(pending.any()):
        candidates = ember.empty_like(tensor).uniform_(a, b, generator=generator)
        log_density = -0.5 * ((candidates - mean) / std) ** 2 - log_peak
        accept = ember.empty_like(tensor).uniform_(generator=generator).log() <= log_density
        take = pending & accept
        tensor.copy_(ember.where(take, candidates, tensor))
        pending = pending & ~accept


def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix from the QR factorisation of a normal one,
    the signs fixed so that R's diagonal is positive; dims after the first
    are flattened."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with ember.no_grad():
        flattened = ember.empty((rows, cols), dtype=tensor.dtype).normal_(
            0, 1, generator=generator)
        if rows < cols:
            flattened = flattened.t()
        q, r = ember.linalg.qr(flattened)
        q = q * ember.sign(ember.diagonal(r)).unsqueeze(0)
        if rows < cols:
            q = q.t()
        tensor.view_as(q).copy_(q)
        tensor.mul_(gain)
    return tensor


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """N(0, std**2) values, with a fraction `sparsity` of each column zero."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    zeros = int(math.ceil(sparsity * rows))
    with ember.no_grad():
        tensor.normal_(0, std, generator=generator)
        for col in range(cols):
            picked = ember.randperm(rows, generator=generator)[:zeros]
            tensor[picked, col] = 0
    return tensor


__all__ += ["eye_", "dirac_", "trunc_normal_", "orthogonal_", "sparse_"]
