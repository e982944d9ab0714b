"""LayerNorm over the trailing normalized_shape dims."""

import numbers

import ember

from .. import functional as F
from .. import init
from ..parameter import Parameter, UninitializedBuffer, UninitializedParameter
from .lazy import LazyModuleMixin
from .module import Module

__all__ = ["LayerNorm"]


class LayerNorm(Module):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last dims;
    weight starts at ones and bias at zeros."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True,
                 bias=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ember.empty(self.normalized_shape, dtype=dtype))
            if bias:
                self.bias = Parameter(ember.empty(self.normalized_shape, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


# ---- batch, instance, group and RMS normalisation --------------------------------

def _register_affine(module, channels, affine, bias, dtype):
    """weight and (with bias) bias per channel when affine, else None."""
    module.register_parameter(
        "weight", Parameter(ember.empty(channels, dtype=dtype)) if affine else None)
    module.register_parameter(
        "bias", Parameter(ember.empty(channels, dtype=dtype)) if affine and bias else None)


def _reset_affine(module):
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


class _NormBase(Module):
    """The parameters and running statistics BatchNorm and InstanceNorm share:
    weight (ones) and bias (zeros) when affine; running_mean (zeros),
    running_var (ones) and num_batches_tracked when track_running_stats."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _register_affine(self, num_features, affine, bias, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", ember.zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", ember.ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", ember.tensor(0, dtype=ember.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        _reset_affine(self)

    def _check_input_dim(self, input):
        raise NotImplementedError

    def _average_factor(self):
        """The momentum of this step; momentum=None means a cumulative
        average, 1 / (batches seen)."""
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)  # a buffer: autograd never sees it
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
        return factor

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    def forward(self, input):
        self._check_input_dim(input)
        factor = self._average_factor()
        use_batch_stats = self.training or (self.running_mean is None
                                            and self.running_var is None)
        keep_stats = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if keep_stats else None,
                            self.running_var if keep_stats else None, self.weight,
                            self.bias, use_batch_stats, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    def _check_input_dim(self, input):
        # spelled out (no generator over the allowed ranks), so that
        # ember.jit.script compiles it
        if input.dim() != 2 and input.dim() != 3:
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    def _check_input_dim(self, input):
        if input.dim() != 4:
            raise ValueError(f"expected 4D input (got {input.dim()}D input)")


class BatchNorm3d(_BatchNorm):
    def _check_input_dim(self, input):
        if input.dim() != 5:
            raise ValueError(f"expected 5D input (got {input.dim()}D input)")


class _InstanceNorm(_NormBase):
    _spatial_dims = 1

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats,
                         device, dtype, bias=bias)

    def forward(self, input):
        no_batch = self._spatial_dims + 1
        if input.dim() not in (no_batch, no_batch + 1):
            raise ValueError(f"expected {no_batch}D or {no_batch + 1}D input (got "
                             f"{input.dim()}D input)")
        channel_dim = input.dim() - no_batch
        if input.shape[channel_dim] != self.num_features and self.affine:
            raise ValueError(f"expected input's size at dim={channel_dim} to match "
                             f"num_features ({self.num_features}), but got: "
                             f"{input.shape[channel_dim]}.")
        if input.dim() == no_batch:
            return self._normalize(input.unsqueeze(0)).squeeze(0)
        return self._normalize(input)

    def _normalize(self, input):
        use_input_stats = self.training or not self.track_running_stats
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight,
                               self.bias, use_input_stats,
                               0.1 if self.momentum is None else self.momentum, self.eps)


class InstanceNorm1d(_InstanceNorm):
    _spatial_dims = 1


class InstanceNorm2d(_InstanceNorm):
    _spatial_dims = 2


class InstanceNorm3d(_InstanceNorm):
    _spatial_dims = 3


class GroupNorm(Module):
    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by "
                             f"num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _register_affine(self, num_channels, affine, bias, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}, bias={self.bias is not None}")


class RMSNorm(Module):
    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(ember.empty(self.normalized_shape, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


__all__ += ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
            "InstanceNorm3d", "GroupNorm", "RMSNorm"]


# ---- lazy batch norms ----------------------------------------------------------

class _LazyNormBase(LazyModuleMixin, _NormBase):
    """num_features from the first input's dim 1 (see lazy.py)."""

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True):
        # No affine parameters or statistics yet: placeholders replace them.
        super().__init__(0, eps, momentum, False, False, device, dtype, bias=False)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if self.affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if self.track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = ember.tensor(0, dtype=ember.int64)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        if not self.has_uninitialized_params():
            return
        self.num_features = input.shape[1]
        with ember.no_grad():
            if self.affine:
                self.weight.materialize((self.num_features,))
                if self.bias is not None:
                    self.bias.materialize((self.num_features,))
            if self.track_running_stats:
                self.running_mean.materialize((self.num_features,))
                self.running_var.materialize((self.num_features,))
            self.reset_parameters()


class LazyBatchNorm1d(_LazyNormBase, _BatchNorm):
    cls_to_become = BatchNorm1d

    def _check_input_dim(self, input):
        if input.dim() != 2 and input.dim() != 3:
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class LazyBatchNorm2d(_LazyNormBase, _BatchNorm):
    cls_to_become = BatchNorm2d

    def _check_input_dim(self, input):
        if input.dim() != 4:
            raise ValueError(f"expected 4D input (got {input.dim()}D input)")


class LazyBatchNorm3d(_LazyNormBase, _BatchNorm):
    cls_to_become = BatchNorm3d

    def _check_input_dim(self, input):
        if input.dim() != 5:
            raise ValueError(f"expected 5D input (got {input.dim()}D input)")


__all__ += ["LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d"]


class LocalResponseNorm(Module):
    """AlexNet's normalisation of each channel by its `size` neighbours
    (F.local_response_norm)."""

    __constants__ = ["size", "alpha", "beta", "k"]

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


__all__ += ["LocalResponseNorm"]
