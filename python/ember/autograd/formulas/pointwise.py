"""Derivatives of the elementwise operators of c/python/Pointwise.c: their
functions, methods, in-place variants and number slots (the unary math of
Unary.c is in unary.py).

Binary operators broadcast: each gradient is reduced back to its input's
shape and dtype with reduce_grad.  Python numbers are constants: they get no
edge and no gradient.
"""

import math
import operator

import ember

from ._common import (Node, SavedOutput, TensorMeta, _TensorBase, check_inplace,
                      commit_inplace, edges_of, meta_of, nondifferentiable, record, reduce_grad,
                      refuse_out, register, register_inplace)


# ---- gradients of broadcasting operands -------------------------------------------

def _reduce(grad, meta):
    """reduce_grad, where meta None means the gradient already has its
    input's shape and dtype (see _reduction_meta)."""
    return grad if meta is None else reduce_grad(grad, meta)


def _reduction_meta(operand, result):
    """The operand's TensorMeta when its gradient must be summed or cast
    back (the result broadcast it or promoted its dtype), else None:
    cheaper than always keeping one."""
    if operand.shape != result.shape or operand.dtype != result.dtype:
        return TensorMeta(operand)
    return None


# ---- add, sub ------------------------------------------------------------------

class AddBackward0(Node):
    __slots__ = ("alpha", "input_meta", "other_meta")

    def apply(self, grad):
        grad_other = None
        if self._edges[1] is not None:
            scaled = grad if self.alpha == 1 else grad * self.alpha
            grad_other = _reduce(scaled, self.other_meta)
        grad_input = _reduce(grad, self.input_meta) if self._edges[0] is not None else None
        return grad_input, grad_other


class SubBackward0(AddBackward0):
    __slots__ = ()


class RsubBackward1(AddBackward0):
    """number - tensor."""

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
    node_class = SubBackward0 if isinstance(a, _TensorBase) else RsubBackward1
    return _record_alpha(node_class, -1, a, b, a - b)


def _record_alpha(node_class, alpha, a, b, result):
    edges = edges_of(a, b)
    node = node_class(edges)
    node.alpha = alpha
    node.input_meta = _reduction_meta(a, result) if edges[0] is not None else None
    node.other_meta = _reduction_meta(b, result) if edges[1] is not None else None
    return record(node, result)


# ---- mul, div ------------------------------------------------------------------

class MulBackward0(Node):
    """Each factor is saved only for the other one's gradient, as PyTorch
    does, so that y * 2 followed by an in-place write into y stays legal."""

    __slots__ = ("input_meta", "other_meta")

    def apply(self, grad):
        input, other = self.unpack_saved()
        return (_reduce(grad * other, self.input_meta) if self._edges[0] is not None else None,
                _reduce(grad * input, self.other_meta) if self._edges[1] is not None else None)


def _record_mul(input, other, result):
    edges = edges_of(input, other)
    node = MulBackward0(edges)
    node.input_meta = _reduction_meta(input, result) if edges[0] is not None else None
    node.other_meta = _reduction_meta(other, result) if edges[1] is not None else None
    node.save(input if edges[1] is not None else None,
              other if edges[0] is not None else None)
    return record(node, result)


@register("mul", "multiply")
def mul(input, other, *, out=None):
    refuse_out("mul", out)
    return _record_mul(input, other, ember.mul(input, other))


@register("__mul__")
def mul_operator(a, b):
    return _record_mul(a, b, a * b)


class DivBackward0(Node):
    """The dividend is saved only for the divisor's gradient (as MulBackward0)."""

    __slots__ = ("input_meta", "other_meta")

    def apply(self, grad):
        input, other = self.unpack_saved()
        grad_input = grad_other = None
        if self._edges[0] is not None:
            grad_input = _reduce(grad / other, self.input_meta)
        if self._edges[1] is not None:
            grad_other = _reduce(-grad * input / (other * other), self.other_meta)
        return grad_input, grad_other


@register("div", "divide", "true_divide")
def div(input, other, *, rounding_mode=None, out=None):
    refuse_out("div", out)
    if rounding_mode is not None:
        # trunc/floor division is piecewise constant: zero gradient, as PyTorch.
        result = ember.div(input, other, rounding_mode=rounding_mode)
        node = DivBackward2(edges_of(input, other))
        node.metas = (meta_of(input), meta_of(other))
        return record(node, result)
    return _record_div(input, other, ember.div(input, other))


@register("__truediv__")
def div_operator(a, b):
    return _record_div(a, b, a / b)


def _record_div(input, other, result):
    edges = edges_of(input, other)
    node = DivBackward0(edges)
    node.input_meta = _reduction_meta(input, result) if edges[0] is not None else None
    node.other_meta = _reduction_meta(other, result) if edges[1] is not None else None
    node.save(input if edges[1] is not None else None, other)
    return record(node, result)


class _ZeroBackward(Node):
    """Gradient zero everywhere (floor, trunc division, comparisons written
    in place, ...): `metas` holds each input's TensorMeta."""

    __slots__ = ("metas",)

    def apply(self, grad):
        return tuple(ember.zeros(meta.shape, dtype=meta.dtype, device=grad.device)
                     if meta is not None and edge is not None else None
                     for meta, edge in zip(self.metas, self._edges))


class DivBackward2(_ZeroBackward):
    """div with rounding_mode='trunc' or 'floor'."""

    __slots__ = ()


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
                   # x += y records as x + y (the operator's own handler runs).
                   ("__iadd__", operator.add), ("__isub__", operator.sub),
                   ("__imul__", operator.mul), ("__itruediv__", operator.truediv)]:
    register_inplace(_name, _op)


# ---- pow -----------------------------------------------------------------------

class PowBackward0(Node):
    """input ** exponent, exponent a Python number (also square)."""

    __slots__ = ("exponent",)

    def apply(self, grad):
        input, = self.unpack_saved()
        exponent = self.exponent
        if exponent == 0:
            return (ember.zeros_like(input),)
        return (grad * (exponent * input.pow(exponent - 1)),)


class PowBackward1(Node):
    """input ** exponent, both tensors."""

    __slots__ = ()

    def apply(self, grad):
        input, exponent, result = self.unpack_saved()
        grad_input = grad_exponent = None
        if self._edges[0] is not None:
            # exponent 0 has derivative 0 everywhere, even at input 0
            # (where exponent * input ** -1 would be nan).
            local = ember.where(exponent == 0, 0.0, exponent * input.pow(exponent - 1))
            grad_input = reduce_grad(grad * local, input)
        if self._edges[1] is not None:
            grad_exponent = reduce_grad(grad * _log_base_term(input, exponent, result),
                                        exponent)
        return grad_input, grad_exponent


class PowBackward2(Node):
    """base ** exponent, base a Python number."""

    __slots__ = ("base",)

    def apply(self, grad):
        exponent, result = self.unpack_saved()
        base = self.base
        if base > 0:
            return (grad * (result * math.log(base)),)
        if base < 0:
            return (grad * (result * math.nan),)
        # 0 ** e: constant 0 (or 1 at e = 0) for e >= 0; inf * log(0) below.
        return (grad * ember.where(exponent >= 0, 0.0, result * -math.inf),)


def _log_base_term(input, exponent, result):
    """d(input ** exponent)/d exponent = result * log(input), taken as 0 where
    input == 0 and exponent >= 0 (PyTorch's convention: 0 ** e is constant
    there)."""
    at_zero = ember.logical_and(input == 0, exponent >= 0)
    return ember.where(at_zero, 0.0, result * input.log())


def _record_pow(input, exponent, result):
    if not isinstance(input, _TensorBase):
        node = PowBackward2(edges_of(exponent))
        node.base = input
        node.save(exponent, SavedOutput(result))
    elif not isinstance(exponent, _TensorBase):
        node = PowBackward0(edges_of(input))
        node.exponent = exponent
        node.save(input)
    else:
        node = PowBackward1(edges_of(input, exponent))
        node.save(input, exponent, SavedOutput(result))
    return record(node, result)


@register("pow")
def power(input, exponent, *, out=None):
    refuse_out("pow", out)
    return _record_pow(input, exponent, ember.pow(input, exponent))


@register("__pow__")
def pow_operator(a, b):
    return _record_pow(a, b, a ** b)


# ---- remainder, fmod, floor_divide --------------------------------------------------

class RemainderBackward0(Node):
    """remainder(input, number): the gradient passes through."""

    __slots__ = ()

    def apply(self, grad):
        return (grad,)


class RemainderBackward1(Node):
    """remainder(input, other) = input - floor(input / other) * other."""

    __slots__ = ()

    def apply(self, grad):
        input, other = self.unpack_saved()
        return (reduce_grad(grad, input) if self._edges[0] is not None else None,
                reduce_grad(-grad * input.div(other, rounding_mode="floor"), other)
                if self._edges[1] is not None else None)


class FmodBackward0(RemainderBackward0):
    """fmod(input, number): the gradient passes through."""

    __slots__ = ()


class FmodBackward1(Node):
    """fmod(input, other) = input - trunc(input / other) * other."""

    __slots__ = ()

    def apply(self, grad):
        input, other = self.unpack_saved()
        return (reduce_grad(grad, input) if self._edges[0] is not None else None,
                reduce_grad(-grad * input.div(other, rounding_mode="trunc"), other)
                if self._edges[1] is not None else None)


class _NotImplementedNode(Node):
    """PyTorch's `NotImplemented` node: the result requires grad, but
    backward through it raises (floor_divide, number % tensor)."""

    __slots__ = ("op_name",)

    def apply(self, *grads):
        raise RuntimeError(f"derivative for aten::{self.op_name} is not implemented")


_NotImplementedNode.__name__ = _NotImplementedNode.__qualname__ = "NotImplemented"


def _record_not_implemented(op_name, result, *inputs):
    node = _NotImplementedNode(edges_of(*inputs))
    node.op_name = op_name
    return record(node, result)


def _record_mod_like(one_sided, two_sided, op_name, input, other, result):
    if not isinstance(input, _TensorBase):
        return _record_not_implemented(op_name, result, input, other)
    if not isinstance(other, _TensorBase):
        return record(one_sided(edges_of(input)), result)
    node = two_sided(edges_of(input, other))
    node.save(input, other)
    return record(node, result)


@register("remainder")
def remainder(input, other, *, out=None):
    refuse_out("remainder", out)
    return _record_mod_like(RemainderBackward0, RemainderBackward1, "remainder",
                            input, other, ember.remainder(input, other))


@register("__mod__")
def mod_operator(a, b):
    return _record_mod_like(RemainderBackward0, RemainderBackward1, "remainder", a, b, a % b)


@register("fmod")
def fmod(input, other, *, out=None):
    refuse_out("fmod", out)
    return _record_mod_like(FmodBackward0, FmodBackward1, "fmod",
                            input, other, ember.fmod(input, other))


@register("floor_divide")
def floor_divide(input, other, *, out=None):
    refuse_out("floor_divide", out)
    return _record_not_implemented("floor_divide", ember.floor_divide(input, other),
                                   input, other)


@register("__floordiv__")
def floordiv_operator(a, b):
    return _record_not_implemented("floor_divide", a // b, a, b)


# ---- atan2 ---------------------------------------------------------------------

class Atan2Backward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, other = self.unpack_saved()
        scale = grad / (input * input + other * other)
        return (reduce_grad(scale * other, input) if self._edges[0] is not None else None,
                reduce_grad(scale * -input, other) if self._edges[1] is not None else None)


@register("atan2", "arctan2")
def atan2(input, other, *, out=None):
    refuse_out("atan2", out)
    result = ember.atan2(input, other)
    node = Atan2Backward0(edges_of(input, other))
    node.save(input, other)
    return record(node, result)


# ---- hypot, copysign, logaddexp, logaddexp2, xlogy ------------------------------------
# PyTorch's derivatives.yaml formulas; each gradient reduced to its operand.

def _grads(node, grad_input, grad_other, input, other):
    """The pair of gradients, computed only for operands with an edge."""
    return (reduce_grad(grad_input(), input) if node._edges[0] is not None else None,
            reduce_grad(grad_other(), other) if node._edges[1] is not None else None)


class HypotBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, other, result = self.unpack_saved()
        return _grads(self, lambda: grad * input / result, lambda: grad * other / result,
                      input, other)


class CopysignBackward0(Node):
    """d/dx copysign(x, y) = copysign(x, y) / x (0 where x is 0); y gets 0."""

    __slots__ = ()

    def apply(self, grad):
        input, other, result = self.unpack_saved()
        return _grads(self, lambda: grad * ember.where(input == 0, 0.0, result / input),
                      lambda: ember.zeros_like(grad), input, other)


class LogaddexpBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, other = self.unpack_saved()
        return _grads(self, lambda: grad / (1 + (other - input).exp()),
                      lambda: grad / (1 + (input - other).exp()), input, other)


class Logaddexp2Backward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, other = self.unpack_saved()
        return _grads(self, lambda: grad / (1 + (other - input).exp2()),
                      lambda: grad / (1 + (input - other).exp2()), input, other)


class XlogyBackward0(Node):
    """d/dx = log y where x != 0 (xlogy(x != 0, y)), d/dy = x / y."""

    __slots__ = ()

    def apply(self, grad):
        input, other = self.unpack_saved()
        return _grads(self, lambda: grad * ember.xlogy((input != 0).to(grad.dtype), other),
                      lambda: grad * input / other, input, other)


def _binary_handler(name, node_class, saves_result):
    op = getattr(ember, name)

    def handler(input, other, *, out=None):
        refuse_out(name, out)
        result = op(input, other)
        node = node_class(edges_of(input, other))
        if saves_result:
            node.save(input, other, SavedOutput(result))
        else:
            node.save(input, other)
        return record(node, result)
    handler.__name__ = name
    return handler


for _name, _node_class, _saves_result in [
        ("hypot", HypotBackward0, True), ("copysign", CopysignBackward0, True),
        ("logaddexp", LogaddexpBackward0, False), ("logaddexp2", Logaddexp2Backward0, False),
        ("xlogy", XlogyBackward0, False)]:
    register(_name)(_binary_handler(_name, _node_class, _saves_result))


# ---- lerp, addcmul, addcdiv --------------------------------------------------------

class LerpBackward0(Node):
    """lerp(start, end, w) = start + w (end - start): d/dstart = 1 - w,
    d/dend = w, d/dw = end - start.  A number weight gets nothing."""

    __slots__ = ()

    def apply(self, grad):
        start, end, weight = self.unpack_saved()
        edges = self._edges
        return (reduce_grad(grad * (1 - weight), start) if edges[0] is not None else None,
                reduce_grad(grad * weight, end) if edges[1] is not None else None,
                reduce_grad(grad * (end - start), weight) if edges[2] is not None else None)


class AddcmulBackward0(Node):
    __slots__ = ("value",)

    def apply(self, grad):
        input, tensor1, tensor2 = self.unpack_saved()
        edges, value = self._edges, self.value
        return (reduce_grad(grad, input) if edges[0] is not None else None,
                reduce_grad(grad * tensor2 * value, tensor1) if edges[1] is not None else None,
                reduce_grad(grad * tensor1 * value, tensor2) if edges[2] is not None else None)


class AddcdivBackward0(Node):
    __slots__ = ("value",)

    def apply(self, grad):
        input, tensor1, tensor2 = self.unpack_saved()
        edges, value = self._edges, self.value
        grad_tensor2 = None
        if edges[2] is not None:
            grad_tensor2 = reduce_grad(-grad * value * tensor1 / (tensor2 * tensor2), tensor2)
        return (reduce_grad(grad, input) if edges[0] is not None else None,
                reduce_grad(grad * value / tensor2, tensor1) if edges[1] is not None else None,
                grad_tensor2)


@register("lerp")
def lerp(input, end, weight, *, out=None):
    refuse_out("lerp", out)
    result = ember.lerp(input, end, weight)
    node = LerpBackward0(edges_of(input, end, weight))
    node.save(input, end, weight)
    return record(node, result)


def _addc_handler(name, node_class):
    op = getattr(ember, name)

    def handler(input, tensor1, tensor2, *, value=1, out=None):
        refuse_out(name, out)
        result = op(input, tensor1, tensor2, value=value)
        node = node_class(edges_of(input, tensor1, tensor2))
        node.value = value
        node.save(input, tensor1, tensor2)
        return record(node, result)
    handler.__name__ = name
    return handler


register("addcmul")(_addc_handler("addcmul", AddcmulBackward0))
register("addcdiv")(_addc_handler("addcdiv", AddcdivBackward0))


# ---- maximum, minimum --------------------------------------------------------------

class MaximumBackward0(Node):
    """Where the inputs tie, each gets half the gradient; a NaN on either
    side sends the whole gradient to both (PyTorch's formula)."""

    __slots__ = ()

    def apply(self, grad):
        input, other = self.unpack_saved()
        shared = ember.where(input == other, grad / 2, grad)
        grad_input = grad_other = None
        if self._edges[0] is not None:
            grad_input = reduce_grad(ember.where(self._loses(input, other), 0.0, shared), input)
        if self._edges[1] is not None:
            grad_other = reduce_grad(ember.where(self._loses(other, input), 0.0, shared), other)
        return grad_input, grad_other

    @staticmethod
    def _loses(a, b):
        return a < b


class MinimumBackward0(MaximumBackward0):
    __slots__ = ()

    @staticmethod
    def _loses(a, b):
        return a > b


def _record_extremum(node_class, input, other, result):
    node = node_class(edges_of(input, other))
    node.save(input, other)
    return record(node, result)


@register("maximum")
def maximum(input, other, *, out=None):
    refuse_out("maximum", out)
    return _record_extremum(MaximumBackward0, input, other, ember.maximum(input, other))


@register("minimum")
def minimum(input, other, *, out=None):
    refuse_out("minimum", out)
    return _record_extremum(MinimumBackward0, input, other, ember.minimum(input, other))


# ---- clamp, clip -------------------------------------------------------------------

class ClampBackward1(Node):
    """clamp with Python-number (or None) bounds: the gradient passes where
    the input is inside [min, max]."""

    __slots__ = ("min", "max")

    def apply(self, grad):
        input, = self.unpack_saved()
        return (ember.where(_inside(input, self.min, self.max), grad, 0.0),)


class ClampBackward0(Node):
    """clamp with a tensor bound: the gradient goes to whichever of input,
    min, max the result is (max wins when min > max, as the forward)."""

    __slots__ = ()

    def apply(self, grad):
        input, min, max = self.unpack_saved()
        grads = [None, None, None]
        if self._edges[0] is not None:
            grads[0] = reduce_grad(ember.where(_inside(input, min, max), grad, 0.0), input)
        if self._edges[1] is not None:
            takes_min = input < min
            if max is not None:
                takes_min = ember.logical_and(takes_min, min < max)
            grads[1] = reduce_grad(ember.where(takes_min, grad, 0.0), min)
        if self._edges[2] is not None:
            takes_max = input > max
            if min is not None:
                takes_max = ember.logical_or(takes_max, max < min)
            grads[2] = reduce_grad(ember.where(takes_max, grad, 0.0), max)
        return tuple(grads)


def _inside(input, min, max):
    if min is None:
        return input <= max
    if max is None:
        return input >= min
    return ember.logical_and(input >= min, input <= max)


def _record_clamp(input, min, max, result):
    if isinstance(min, _TensorBase) or isinstance(max, _TensorBase):
        node = ClampBackward0(edges_of(input, min, max))
        node.save(input, min, max)
    else:
        node = ClampBackward1(edges_of(input))
        node.min = min
        node.max = max
        node.save(input)
    return record(node, result)


@register("clamp")
def clamp(input, min=None, max=None, *, out=None):
    refuse_out("clamp", out)
    return _record_clamp(input, min, max, ember.clamp(input, min, max))


@register("clip")
def clip(input, min=None, max=None, *, out=None):
    refuse_out("clip", out)
    return _record_clamp(input, min, max, ember.clip(input, min, max))


# ---- where ---------------------------------------------------------------------


class WhereBackward0(Node):
    __slots__ = ("input_meta", "other_meta")

    def apply(self, grad):
        condition, = self.unpack_saved()
        return (_reduce(ember.where(condition, grad, 0.0), self.input_meta)
                if self._edges[0] is not None else None,
                _reduce(ember.where(condition, 0.0, grad), self.other_meta)
                if self._edges[1] is not None else None)


@register("where")
def where(condition, input, other, *, out=None):
    refuse_out("where", out)
    return _record_where(condition, input, other)


@register("Tensor.where")
def where_method(input, condition, other):
    """input.where(condition, other) is ember.where(condition, input, other)."""
    return _record_where(condition, input, other)


def _record_where(condition, input, other):
    result = ember.where(condition, input, other)
    edges = edges_of(input, other)
    node = WhereBackward0(edges)
    node.input_meta = _reduction_meta(input, result) if edges[0] is not None else None
    node.other_meta = _reduction_meta(other, result) if edges[1] is not None else None
    node.save(condition)
    return record(node, result)




# ---- abs, sign, positive -----------------------------------------------------------

class AbsBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, = self.unpack_saved()
        return (grad * input.sign(),)


@register("abs", "absolute", "__abs__")
def absolute(input, *, out=None):
    refuse_out("abs", out)
    result = ember.abs(input)
    node = AbsBackward0(edges_of(input))
    node.save(input)
    return record(node, result)


class SignBackward0(Node):
    """sign is a step function: gradient zero."""

    __slots__ = ()

    def apply(self, grad):
        return (ember.zeros_like(grad),)


@register("sign")
def sign(input, *, out=None):
    refuse_out("sign", out)
    return record(SignBackward0(edges_of(input)), ember.sign(input))


@register("positive")
def positive(input):
    """+t is t itself (as torch.positive): its history is already right."""
    return ember.positive(input)


# ---- in-place variants -------------------------------------------------------------

for _name, _op in [("pow_", ember.pow), ("__ipow__", operator.pow),
                   ("remainder_", ember.remainder), ("__imod__", operator.mod),
                   ("fmod_", ember.fmod),
                   ("floor_divide_", ember.floor_divide), ("__ifloordiv__", operator.floordiv),
                   ("atan2_", ember.atan2), ("arctan2_", ember.atan2),
                   ("abs_", ember.abs), ("absolute_", ember.abs), ("sign_", ember.sign),
                   ("clamp_", ember.clamp), ("clip_", ember.clip),
                   ("hypot_", ember.hypot), ("copysign_", ember.copysign),
                   ("xlogy_", ember.xlogy), ("lerp_", ember.lerp),
                   ("addcmul_", ember.addcmul), ("addcdiv_", ember.addcdiv)]:
    register_inplace(_name, _op)


# ---- operators without a derivative ----------------------------------------------

# Comparisons, logical and bitwise operators: bool or integer results.
_COMPARISONS = {"eq": "Eq", "ne": "Ne", "not_equal": "Ne", "lt": "Lt", "less": "Lt",
                "le": "Le", "less_equal": "Le", "gt": "Gt", "greater": "Gt",
                "ge": "Ge", "greater_equal": "Ge"}
_LOGICAL = {"logical_and": "LogicalAnd", "logical_or": "LogicalOr",
            "logical_xor": "LogicalXor", "logical_not": "LogicalNot"}
_BITWISE = ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
            "bitwise_right_shift", "bitwise_not"]
_BITWISE_OPERATORS = ["and", "or", "xor", "lshift", "rshift"]

nondifferentiable(*_COMPARISONS, *_LOGICAL, *_BITWISE, *(n + "_" for n in _BITWISE),
                  *(f"__{n}__" for n in _BITWISE_OPERATORS),
                  *(f"__i{n}__" for n in _BITWISE_OPERATORS), "__invert__",
                  "result_type", "promote_types", "can_cast",
                  *(f"__{n}__" for n in ("lt", "le", "eq", "ne", "gt", "ge")))


def _register_zero_grad_inplace(name, op, node_prefix):
    """x.name_(...) for a comparison or logical operator: the C operator's
    values, cast to x's dtype.  They are step functions of the inputs, so
    the node (named as PyTorch's: EqBackward0 for a number operand,
    EqBackward1 for a tensor one) gives every input a zero gradient."""
    node_classes = [type(f"{node_prefix}Backward{i}", (_ZeroBackward,), {"__slots__": ()})
                    for i in (0, 1)]

    @register(name)
    def handler(self, *args):
        check_inplace(self)
        result = op(self, *args).to(self.dtype)
        takes_tensor = any(isinstance(a, _TensorBase) for a in args)
        node = node_classes[takes_tensor](edges_of(self, *args))
        node.metas = tuple(map(meta_of, (self, *args)))
        return commit_inplace(self, record(node, result))
    handler.__name__ = name


for _name, _prefix in {**_COMPARISONS, **_LOGICAL}.items():
    _register_zero_grad_inplace(_name + "_", getattr(ember, _name), _prefix)
