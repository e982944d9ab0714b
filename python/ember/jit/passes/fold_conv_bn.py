"""Folds an eval-mode batch_norm into the convolution before it.

Note [Folding batch norm into a convolution]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
In eval mode batch_norm is an affine map per channel c with fixed numbers:

    bn(y)[c] = (y[c] - mean[c]) * scale[c] + beta[c],
    scale[c] = gamma[c] / sqrt(var[c] + eps)

and a convolution's output channel c is linear in its weights W[c] plus a
bias b[c].  So bn(conv(x, W, b)) = conv(x, W', b') with

    W'[c] = W[c] * scale[c]
    b'[c] = (b[c] - mean[c]) * scale[c] + beta[c]    (b = 0 without a bias)

computed once, here, at compile time (PyTorch's FoldFrozenConvBatchnorm,
run by torch.jit.freeze).  It needs every one of those tensors to be a
constant, which is what `ember.jit.freeze` makes of a module's parameters
and buffers; in a graph that takes them as inputs nothing folds.

The rewrite fires only when it is exact up to rounding:

* the batch_norm normalises with its running statistics (training=False);
* its input is the output of a conv1d/2d/3d whose weight (and bias, if
  any) are constants, and whose arguments are positional;
* the convolution's output has no other reader, except ones that look only
  at its shape (`.dim()`, `.shape`, `.size()`: the folded convolution has
  the same shape), so no reader sees the folded values in place of the
  convolution's own.

The folded convolution is a new node (the old constants are left to DCE),
so a constant weight shared with another convolution is never changed.
"""

from .log import log_or_default
from . import util

CONVOLUTIONS = {"F.conv1d", "ember.conv1d", "F.conv2d", "ember.conv2d", "F.conv3d",
                "ember.conv3d"}
BATCH_NORMS = {"F.batch_norm", "ember.batch_norm"}
SHAPE_READERS = {"Tensor.dim", "attr.ndim", "attr.shape", "Tensor.size"}


def fold_conv_bn(graph, log=None):
    """Folds every foldable conv -> batch_norm pair; returns whether it did."""
    log = log_or_default(log)
    changed = False
    for node in list(graph.all_nodes()):
        if node.owning_block is not None and node.callee in BATCH_NORMS:
            changed |= _fold(graph, node, log)
    return changed


def _constant_or_none(value):
    """(True, the tensor or None) for a constant, (False, None) otherwise."""
    if not util.is_constant(value):
        return False, None
    return True, util.constant_value(value)


def _foldable(bn):
    """(conv node, its weight, its bias, mean, var, gamma, beta, eps) or None."""
    if bn.kwnames or len(bn.inputs) != 8:
        return None
    source, mean, var, gamma, beta, training, _momentum, eps = bn.inputs
    conv = source.node
    if conv.callee not in CONVOLUTIONS or conv.kwnames or len(conv.inputs) < 2:
        return None
    if not (util.is_constant(training) and util.constant_value(training) is False):
        return None
    if any(user is not bn and user.callee not in SHAPE_READERS for user, _ in source.uses):
        return None
    known = [_constant_or_none(v) for v in (mean, var, gamma, beta, eps)]
    known.append(_constant_or_none(conv.inputs[1]))
    known.append(_constant_or_none(conv.inputs[2]) if len(conv.inputs) > 2 else (True, None))
    if not all(is_known for is_known, _ in known):
        return None
    mean, var, gamma, beta, eps, weight, bias = (value for _, value in known)
    if mean is None or var is None or weight is None or not isinstance(eps, float):
        return None
    return conv, weight, bias, mean, var, gamma, beta, eps


def folded_weights(weight, bias, mean, var, gamma, beta, eps):
    """(W', b') of Note [Folding batch norm into a convolution]."""
    import ember
    with ember.no_grad():
        scale = ember.rsqrt(var + eps)
        if gamma is not None:
            scale = scale * gamma
        shifted = -mean if bias is None else bias - mean
        new_bias = shifted * scale
        if beta is not None:
            new_bias = new_bias + beta
        per_channel = scale.reshape([-1] + [1] * (weight.dim() - 1))
        return (weight * per_channel).detach(), new_bias.detach()


def _fold(graph, bn, log):
    found = _foldable(bn)
    if found is None:
        return False
    conv, weight, bias, mean, var, gamma, beta, eps = found
    if not log.rewrite("fold_conv_bn", f"{conv.kind}+{bn.kind} -> {conv.kind} with "
                       f"folded weights", bn):
        return False
    new_weight, new_bias = folded_weights(weight, bias, mean, var, gamma, beta, eps)
    inputs = list(conv.inputs)
    inputs[1] = _constant(graph, new_weight, conv)
    bias_value = _constant(graph, new_bias, conv)
    if len(inputs) > 2:
        inputs[2] = bias_value
    else:
        inputs.append(bias_value)
    folded = graph.create(conv.kind, inputs, output_types=[bn.output.type],
                          attrs=dict(conv.attrs), source_range=conv.source_range)
    block = conv.owning_block
    block.insert(block.nodes.index(conv) + 1, folded)
    folded.output.debug_name = bn.output.debug_name
    for user, index in list(conv.output.uses):
        if user is not bn:          # a shape reader: same shape
            user.replace_input(index, folded.output)
    bn.output.replace_all_uses_with(folded.output)
    bn.destroy()
    conv.destroy()
    return True


def _constant(graph, tensor, before):
    """A prim::Constant holding `tensor`, inserted before node `before`."""
    from .. import types as T
    node = graph.create("prim::Constant", (), output_types=[T.type_of_value(tensor)],
                        attrs={"value": tensor})
    block = before.owning_block
    block.insert(block.nodes.index(before), node)
    return node.output


__all__ = ["fold_conv_bn", "folded_weights"]
