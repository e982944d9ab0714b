"""Folding an eval-mode batch norm into the layer before it (PyTorch's
torch.nn.utils.fusion).

In eval mode BatchNorm is an affine map per channel c,
    y = (x - mean_c) * scale_c + beta_c,   scale_c = gamma_c / sqrt(var_c + eps),
so a convolution or linear layer followed by it equals one layer with its
weight's output channel c multiplied by scale_c and its bias replaced by
(bias_c - mean_c) * scale_c + beta_c.
"""

import copy

import ember

from ..parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights"]


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A copy of `conv` that computes bn(conv(x)) (both in eval mode);
    transpose=True for a transposed convolution (output channels on dim 1)."""
    if conv.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused_conv = copy.deepcopy(conv)
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")
    fused_conv.weight, fused_conv.bias = fuse_conv_bn_weights(
        fused_conv.weight, fused_conv.bias, bn.running_mean, bn.running_var,
        bn.eps, bn.weight, bn.bias, transpose)
    return fused_conv


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """(weight, bias) Parameters of the fused convolution; a missing conv
    bias or batch-norm affine weight/bias counts as zeros/ones/zeros.  The
    results keep the convolution's dtypes."""
    weight_dtype = conv_w.dtype
    bias_dtype = conv_b.dtype if conv_b is not None else weight_dtype
    conv_b = ember.zeros_like(bn_rm) if conv_b is None else conv_b
    bn_w = ember.ones_like(bn_rm) if bn_w is None else bn_w
    bn_b = ember.zeros_like(bn_rm) if bn_b is None else bn_b
    var_rsqrt = ember.rsqrt(bn_rv + bn_eps)
    # The output channels are dim 0 of a convolution's weight, dim 1 of a
    # transposed convolution's.
    channel_dims = [1, -1] if transpose else [-1, 1]
    shape = channel_dims + [1] * (conv_w.dim() - 2)
    fused_w = (conv_w * (bn_w * var_rsqrt).reshape(shape)).to(dtype=weight_dtype)
    fused_b = ((conv_b - bn_rm) * var_rsqrt * bn_w + bn_b).to(dtype=bias_dtype)
    return Parameter(fused_w, conv_w.requires_grad), Parameter(fused_b, conv_b.requires_grad)


def fuse_linear_bn_eval(linear, bn):
    """A copy of `linear` that computes bn(linear(x)) (both in eval mode)."""
    if linear.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused_linear = copy.deepcopy(linear)
    # A batch norm of one feature broadcasts over every output feature.
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise AssertionError(
            "To fuse, linear.out_features == bn.num_features or bn.num_features == 1, "
            f"got linear.out_features={linear.out_features} and bn.num_features={bn.num_features}")
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")
    fused_linear.weight, fused_linear.bias = fuse_linear_bn_weights(
        fused_linear.weight, fused_linear.bias, bn.running_mean, bn.running_var,
        bn.eps, bn.weight, bn.bias)
    return fused_linear


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """(weight, bias) Parameters of the fused linear layer."""
    weight_dtype = linear_w.dtype
    bias_dtype = linear_b.dtype if linear_b is not None else weight_dtype
    linear_b = ember.zeros_like(bn_rm) if linear_b is None else linear_b
    bn_scale = bn_w * ember.rsqrt(bn_rv + bn_eps)
    fused_w = linear_w * bn_scale.unsqueeze(-1).to(dtype=weight_dtype)
    fused_b = ((linear_b - bn_rm) * bn_scale + bn_b).to(dtype=bias_dtype)
    return Parameter(fused_w, linear_w.requires_grad), Parameter(fused_b, linear_b.requires_grad)
