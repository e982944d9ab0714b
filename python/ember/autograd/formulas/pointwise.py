"""Derivatives of the elementwise operators (c/python/Pointwise.c, Unary.c).

Binary operators broadcast: each gradient is reduced back to its input's
shape and dtype with reduce_grad.  Python numbers are constants: they get no
edge and no gradient.
"""

import ember

from ._common import (Node, edges_of, meta_of, nondifferentiable, record, reduce_grad,
                      refuse_out, register, register_inplace)


# ---- add, sub ------------------------------------------------------------------

class AddBackward0(Node):
    __slots__ = ("alpha", "input_meta", "other_meta")

    def apply(self, grad):
        grad_other = None
        if self._edges[1] is not None:
            scaled = grad if self.alpha == 1 else grad * self.alpha
            grad_other = reduce_grad(scaled, self.other_meta)
        return (reduce_grad(grad, self.input_meta) if self._edges[0] is not None else None, grad_other)


class SubBackward0(AddBackward0):
    __slots__ = ()


def _add_like(node_class, op, input, other, alpha, out, name):
    refuse_out(name, out)
    result = op(input, other, alpha=alpha)
    sign = 1 if node_class is AddBackward0 else -1
    return _record_alpha(node_class, sign * alpha, input, other, result)


@register("add")
def add(input, other, *, alpha=1, out=None):
    return _add_like(AddBackward0, ember.add, input, other, alpha, out, "add")


@register("sub", "subtract")
def sub(input, other, *, alpha=1, out=None):
    return _add_like(SubBackward0, ember.sub, input, other, alpha, out, "sub")


# The operator slots receive the operands in source order, either of them
# possibly a Python number (2 - t calls t's slot with (2, t)); the C slot
# computes the value, the same node class differentiates it.

@register("__add__")
def add_operator(a, b):
    return _record_alpha(AddBackward0, 1, a, b, a + b)


@register("__sub__")
def sub_operator(a, b):
    return _record_alpha(SubBackward0, -1, a, b, a - b)


def _record_alpha(node_class, alpha, a, b, result):
    node = node_class(edges_of(a, b))
    node.alpha = alpha
    node.input_meta = meta_of(a)
    node.other_meta = meta_of(b)
    return record(node, result)


# ---- mul, div ------------------------------------------------------------------

class MulBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, other = self.unpack_saved()
        return (reduce_grad(grad * other, input) if self._edges[0] is not None else None,
                reduce_grad(grad * input, other) if self._edges[1] is not None else None)


@register("mul", "multiply")
def mul(input, other, *, out=None):
    refuse_out("mul", out)
    result = ember.mul(input, other)
    node = MulBackward0(edges_of(input, other))
    node.save(input, other)
    return record(node, result)


@register("__mul__")
def mul_operator(a, b):
    node = MulBackward0(edges_of(a, b))
    node.save(a, b)
    return record(node, a * b)


class DivBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, other = self.unpack_saved()
        grad_input = grad_other = None
        if self._edges[0] is not None:
            grad_input = reduce_grad(grad / other, input)
        if self._edges[1] is not None:
            grad_other = reduce_grad(-grad * input / (other * other), other)
        return grad_input, grad_other


@register("div", "divide", "true_divide")
def div(input, other, *, rounding_mode=None, out=None):
    refuse_out("div", out)
    if rounding_mode is not None:
        # trunc/floor division is piecewise constant: zero gradient, as PyTorch.
        result = ember.div(input, other, rounding_mode=rounding_mode)
        node = _ZeroBackward(edges_of(input, other))
        node.metas = (meta_of(input), meta_of(other))
        return record(node, result)
    result = ember.div(input, other)
    node = DivBackward0(edges_of(input, other))
    node.save(input, other)
    return record(node, result)


@register("__truediv__")
def div_operator(a, b):
    node = DivBackward0(edges_of(a, b))
    node.save(a, b)
    return record(node, a / b)


class _ZeroBackward(Node):
    """Gradient zero everywhere (floor, trunc division, ...)."""

    __slots__ = ("metas",)

    def apply(self, grad):
        return tuple(ember.zeros(meta.shape, dtype=meta.dtype)
                     if meta is not None and edge is not None else None
                     for meta, edge in zip(self.metas, self._edges))


# ---- neg -----------------------------------------------------------------------

class NegBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        return (-grad,)


@register("neg", "negative", "__neg__")
def neg(input, *, out=None):
    refuse_out("neg", out)
    return record(NegBackward0(edges_of(input)), ember.neg(input))


for _name, _op in [("add_", ember.add), ("sub_", ember.sub), ("subtract_", ember.sub),
                   ("mul_", ember.mul), ("multiply_", ember.mul), ("div_", ember.div),
                   ("divide_", ember.div), ("true_divide_", ember.true_divide),
                   ("neg_", ember.neg), ("negative_", ember.neg),
                   ("__iadd__", add_operator), ("__isub__", sub_operator),
                   ("__imul__", mul_operator), ("__itruediv__", div_operator)]:
    register_inplace(_name, _op)

nondifferentiable("eq", "ne", "not_equal", "lt", "le", "gt", "ge", "less", "greater")
