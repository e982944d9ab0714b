"""ember.nn.utils: gradient clipping, parameter/vector conversion, packed
sequences, weight and spectral normalisation (the old hooks and, in
parametrizations, the parametrize-based ones), parametrize, and conv/linear +
batch-norm fusion (PyTorch's torch.nn.utils)."""

from .clip_grad import (clip_grad_norm, clip_grad_norm_, clip_grad_value_,  # noqa: F401
                        clip_grads_with_norm_, get_total_norm)
from .fusion import (fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval,  # noqa: F401
                     fuse_linear_bn_weights)
from .convert_parameters import parameters_to_vector, vector_to_parameters  # noqa: F401
from . import parametrizations, parametrize, rnn  # noqa: F401
from .spectral_norm import remove_spectral_norm, spectral_norm  # noqa: F401
from .weight_norm import remove_weight_norm, weight_norm  # noqa: F401

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_",
           "get_total_norm", "parameters_to_vector", "vector_to_parameters",
           "weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm",
           "fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights"]
