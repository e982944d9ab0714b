"""Derivatives of the unary math operators (c/python/Unary.c).

Each operator gets a Node whose apply is its derivative written with ember
operators, and a handler built by one of the factories below: the handler
saves either the input or, where the derivative is cheapest in terms of
the result (exp, tanh, sigmoid, sqrt, relu, ...), the output through
SavedOutput, so that create_graph=True differentiates the backward too.
In-place variants come from register_inplace, except for the operators
saving their output: x.exp_() saves x itself after the write (as PyTorch),
so a later in-place write into x makes backward refuse, and no copy is kept.
"""

import math

import ember

from ... import _C
from ._common import (Node, SavedOutput, check_inplace, commit_inplace, edges_of,
                      nondifferentiable, record, refuse_out, register, register_inplace)
from .pointwise import PowBackward0

_is_grad_enabled = _C.is_grad_enabled

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_TANH_KAPPA = 0.044715
_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2


# ---- derivatives in terms of the output -------------------------------------------

class ExpBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        result, = self.unpack_saved()
        return (grad * result,)


class Exp2Backward0(Node):
    __slots__ = ()

    def apply(self, grad):
        result, = self.unpack_saved()
        return (grad * (result * _LN2),)


class Expm1Backward0(Node):
    __slots__ = ()

    def apply(self, grad):
        result, = self.unpack_saved()
        return (grad * (result + 1),)


class SqrtBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        result, = self.unpack_saved()
        return (grad / (2 * result),)


class RsqrtBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        result, = self.unpack_saved()
        return (-0.5 * grad * result.pow(3),)


class ReciprocalBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        result, = self.unpack_saved()
        return (-grad * (result * result),)


class TanBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        result, = self.unpack_saved()
        return (grad * (1 + result * result),)


class TanhBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        result, = self.unpack_saved()
        return (grad * (1 - result * result),)


class SigmoidBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        result, = self.unpack_saved()
        return (grad * ((1 - result) * result),)


class ReluBackward0(Node):
    """relu(x) > 0 exactly where x > 0; the gradient at 0 is 0, as PyTorch."""

    __slots__ = ()

    def apply(self, grad):
        result, = self.unpack_saved()
        return (ember.where(result > 0, grad, 0.0),)


# ---- derivatives in terms of the input --------------------------------------------

class LogBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, = self.unpack_saved()
        return (grad / input,)


class Log2Backward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, = self.unpack_saved()
        return (grad / (input * _LN2),)


class Log10Backward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, = self.unpack_saved()
        return (grad / (input * _LN10),)


class Log1PBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, = self.unpack_saved()
        return (grad / (input + 1),)


class SinBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, = self.unpack_saved()
        return (grad * input.cos(),)


class CosBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, = self.unpack_saved()
        return (grad * -input.sin(),)


class AsinBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, = self.unpack_saved()
        return (grad * (1 - input * input).rsqrt(),)


class AcosBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, = self.unpack_saved()
        return (grad * -(1 - input * input).rsqrt(),)


class AtanBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, = self.unpack_saved()
        return (grad / (input * input + 1),)


class AsinhBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, = self.unpack_saved()
        return (grad * (input * input + 1).rsqrt(),)


class AcoshBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, = self.unpack_saved()
        return (grad * (input * input - 1).rsqrt(),)


class AtanhBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, = self.unpack_saved()
        return (grad / (1 - input * input),)


class SinhBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, = self.unpack_saved()
        return (grad * input.cosh(),)


class CoshBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, = self.unpack_saved()
        return (grad * input.sinh(),)


class ErfBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, = self.unpack_saved()
        return (grad * (_TWO_OVER_SQRT_PI * (-(input * input)).exp()),)


class ErfcBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, = self.unpack_saved()
        return (grad * (-_TWO_OVER_SQRT_PI * (-(input * input)).exp()),)


class SiluBackward0(Node):
    """silu(x) = x * s with s = sigmoid(x): s * (1 + x * (1 - s))."""

    __slots__ = ()

    def apply(self, grad):
        input, = self.unpack_saved()
        s = input.sigmoid()
        return (grad * (s * (1 + input * (1 - s))),)


class NanToNumBackward0(Node):
    """The replaced entries (nan, +-inf) are constants."""

    __slots__ = ()

    def apply(self, grad):
        input, = self.unpack_saved()
        return (ember.where(input.isfinite(), grad, 0.0),)


class GeluBackward0(Node):
    __slots__ = ("approximate",)

    def apply(self, grad):
        input, = self.unpack_saved()
        if not _is_grad_enabled():  # no double backward: one fused kernel
            derivative = (_C._gelu_tanh_derivative if self.approximate == "tanh"
                          else _C._gelu_derivative)
            return (grad * derivative(input),)
        if self.approximate == "tanh":
            return (grad * _gelu_tanh_derivative(input),)
        cdf = 0.5 * (1 + (input * _INV_SQRT_2).erf())
        pdf = _INV_SQRT_2PI * (-0.5 * input * input).exp()
        return (grad * (cdf + input * pdf),)


def _gelu_tanh_derivative(x):
    """d/dx of 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + kappa x^3)."""
    x_sq = x * x
    tanh_u = (_SQRT_2_OVER_PI * (x + _GELU_TANH_KAPPA * x_sq * x)).tanh()
    du_dx = _SQRT_2_OVER_PI * (1 + 3 * _GELU_TANH_KAPPA * x_sq)
    return 0.5 * (1 + tanh_u) + 0.5 * x * (1 - tanh_u * tanh_u) * du_dx


# ---- zero gradient (piecewise constant) and identity ---------------------------------

class _ZeroGradUnary(Node):
    __slots__ = ()

    def apply(self, grad):
        return (ember.zeros_like(grad),)


class FloorBackward0(_ZeroGradUnary):
    __slots__ = ()


class CeilBackward0(_ZeroGradUnary):
    __slots__ = ()


class TruncBackward0(_ZeroGradUnary):
    __slots__ = ()


class RoundBackward0(_ZeroGradUnary):
    __slots__ = ()


class RoundBackward1(_ZeroGradUnary):
    """round(x, decimals=d)."""

    __slots__ = ()


class FracBackward0(Node):
    """frac(x) = x - trunc(x): slope 1."""

    __slots__ = ()

    def apply(self, grad):
        return (grad,)


class PolygammaBackward0(Node):
    """trigamma' = polygamma(2, x), the composite ember.polygamma (itself
    differentiable through the operators it is written with)."""

    __slots__ = ()

    def apply(self, grad):
        input, = self.unpack_saved()
        return (grad * ember.polygamma(2, input),)


class LgammaBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        input, = self.unpack_saved()
        return (grad * input.digamma(),)


class DigammaBackward0(Node):
    """digamma' is trigamma (PyTorch's polygamma(1, x)), computed by the C
    kernel _trigamma, whose own derivative is PolygammaBackward0's."""

    __slots__ = ()

    def apply(self, grad):
        input, = self.unpack_saved()
        return (grad * ember._C._trigamma(input),)


class ErfinvBackward0(Node):
    """erfinv'(x) = sqrt(pi) / 2 * exp(erfinv(x)^2)."""

    __slots__ = ()

    def apply(self, grad):
        result, = self.unpack_saved()
        return (grad * (_SQRT_PI_OVER_2 * (result * result).exp()),)


class SincBackward0(Node):
    """(cos(pi x) pi x - sin(pi x)) / (pi x^2), 0 at x = 0."""

    __slots__ = ()

    def apply(self, grad):
        input, = self.unpack_saved()
        pi_x = input * math.pi
        slope = (pi_x * pi_x.cos() - pi_x.sin()) / (pi_x * input)
        return (grad * ember.where(input == 0, 0.0, slope),)


# ---- handlers ----------------------------------------------------------------------

def _saving_output(name, node_class):
    op = getattr(ember, name)

    def handler(input, *, out=None):
        refuse_out(name, out)
        result = op(input)
        node = node_class(edges_of(input))
        node.save(SavedOutput(result))
        return record(node, result)
    return handler


def _saving_output_inplace(name, node_class):
    """x.name_(): the derivative needs only the new x, so the node saves x
    itself once the values are written (Note [In-place operations])."""
    op = getattr(ember, name)

    def handler(self):
        check_inplace(self)
        node = node_class(edges_of(self))
        commit_inplace(self, record(node, op(self)))
        node.save(SavedOutput(self))
        return self
    return handler


def _saving_input(name, node_class):
    op = getattr(ember, name)

    def handler(input, *, out=None):
        refuse_out(name, out)
        result = op(input)
        node = node_class(edges_of(input))
        node.save(input)
        return record(node, result)
    return handler


def _saving_nothing(name, node_class):
    op = getattr(ember, name)

    def handler(input, *, out=None):
        refuse_out(name, out)
        return record(node_class(edges_of(input)), op(input))
    return handler


_FORMULAS = [
    (_saving_output, {"exp": ExpBackward0, "exp2": Exp2Backward0, "expm1": Expm1Backward0,
                      "sqrt": SqrtBackward0, "rsqrt": RsqrtBackward0,
                      "reciprocal": ReciprocalBackward0, "tan": TanBackward0,
                      "tanh": TanhBackward0, "sigmoid": SigmoidBackward0,
                      "relu": ReluBackward0, "erfinv": ErfinvBackward0}),
    (_saving_input, {"log": LogBackward0, "log2": Log2Backward0, "log10": Log10Backward0,
                     "log1p": Log1PBackward0, "sin": SinBackward0, "cos": CosBackward0,
                     "asin": AsinBackward0, "acos": AcosBackward0, "atan": AtanBackward0,
                     "asinh": AsinhBackward0, "acosh": AcoshBackward0,
                     "atanh": AtanhBackward0,
                     "sinh": SinhBackward0, "cosh": CoshBackward0, "erf": ErfBackward0,
                     "erfc": ErfcBackward0, "silu": SiluBackward0,
                     "lgamma": LgammaBackward0, "digamma": DigammaBackward0,
                     "sinc": SincBackward0}),
    (_saving_nothing, {"floor": FloorBackward0, "ceil": CeilBackward0,
                       "trunc": TruncBackward0, "frac": FracBackward0}),
]

for _factory, _table in _FORMULAS:
    for _name, _node_class in _table.items():
        register(_name)(_factory(_name, _node_class))
        if _factory is _saving_output:
            register(_name + "_")(_saving_output_inplace(_name, _node_class))


@register("square")
def square(input, *, out=None):
    """square(x) is x ** 2 (PyTorch records it as PowBackward0)."""
    refuse_out("square", out)
    result = ember.square(input)
    node = PowBackward0(edges_of(input))
    node.exponent = 2
    node.save(input)
    return record(node, result)


@register("round")
def round_values(input, *, decimals=None, out=None):
    refuse_out("round", out)
    if decimals is None:
        return record(RoundBackward0(edges_of(input)), ember.round(input))
    return record(RoundBackward1(edges_of(input)), ember.round(input, decimals=decimals))


@register("gelu")
def gelu(input, *, approximate="none", out=None):
    refuse_out("gelu", out)
    result = ember.gelu(input, approximate=approximate)
    node = GeluBackward0(edges_of(input))
    node.approximate = approximate
    node.save(input)
    return record(node, result)


@register("nan_to_num")
def nan_to_num(input, *args, out=None, **kwargs):
    refuse_out("nan_to_num", out)
    result = ember.nan_to_num(input, *args, **kwargs)
    node = NanToNumBackward0(edges_of(input))
    node.save(input)
    return record(node, result)


for _name in ["log", "log2", "log10", "log1p", "sin", "cos", "asin", "acos", "atan", "asinh",
              "acosh", "atanh", "sinh", "cosh", "erf", "erfc", "frac", "floor", "ceil", "trunc", "square", "round",
              "nan_to_num", "lgamma", "digamma", "sinc"]:
    register_inplace(_name + "_", getattr(ember, _name))

# Predicates: bool results.
nondifferentiable("isnan", "isinf", "isfinite", "isposinf", "isneginf")
# Only digamma's backward calls it: differentiable so that digamma is twice.
@register("_trigamma")
def trigamma(input):
    result = ember._C._trigamma(input)
    node = PolygammaBackward0(edges_of(input))
    node.save(input)
    return record(node, result)
