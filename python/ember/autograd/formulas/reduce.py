"""Derivatives of the reductions, softmax and scans (c/python/Reduce.c).

Note [Reduction gradients]
~~~~~~~~~~~~~~~~~~~~~~~~~~
A reduction over `dims` maps the input's shape to the shape without those
dims (or with them as size 1 under keepdim).  Every formula here starts by
putting the reduced dims back as size 1 (`_unsqueeze_reduced`), so the
gradient and the saved result broadcast against the input; then:

  sum        grad expanded to the input's shape (a view, no copy)
  mean       the same, divided by the number of elements reduced
  prod       grad * product of the *other* elements (result / x when x has
             no zeros, an exact product of the others when it has)
  amax/amin  grad split evenly among the elements equal to the result
  max(dim)   grad scattered to the positions the indices name
  var/std    grad * 2 (x - mean) / (N - correction)  (std: / (2 std))
  logsumexp  grad * exp(x - result)

A full reduction (dim=None) yields a 0-d result, which already broadcasts
against any shape: nothing to unsqueeze.  Every backward is written with
ember operators so it can itself be recorded (create_graph=True).
"""

import math

import ember

from ... import _C
from ._common import (Node, SavedOutput, edges_of, nondifferentiable, record, refuse_out,
                      register)

_is_grad_enabled = _C.is_grad_enabled
_set_grad_enabled = _C._set_grad_enabled
_TensorBase = _C._TensorBase
_MISSING = object()  # a required argument left out: the C call raises PyTorch's error


# ---- shared helpers --------------------------------------------------------------

def _reduced_dims(dim, ndim):
    """The reduced dims as a sorted tuple of non-negative ints, or None for
    every dim (dim None or empty, as PyTorch).  The C call has already
    checked the range, so only the wrap-around is left to do."""
    if dim is None:
        return None
    if isinstance(dim, int):
        return (dim % (ndim or 1),)
    if len(dim) == 0:
        return None
    rank = ndim or 1
    return tuple(sorted(d % rank for d in dim))


def _unsqueeze_reduced(tensor, dims, keepdim, ndim):
    """`tensor` (a reduction's result or its gradient) with the reduced dims
    reinserted as size 1, so it broadcasts against the input."""
    if keepdim or dims is None or ndim == 0:
        return tensor
    for d in dims:
        tensor = tensor.unsqueeze(d)
    return tensor


def _count_reduced(shape, dims):
    """How many input elements each result element reduces."""
    if dims is None:
        return math.prod(shape)
    return math.prod(shape[d] for d in dims)


def _to_dtype(grad, dtype):
    return grad if grad.dtype == dtype else grad.to(dtype)


def _needs_input_grad(node):
    return node._edges[0] is not None


class _ReductionBackward(Node):
    """What every reduction node keeps: the input's shape and dtype and how
    the reduction was called."""

    __slots__ = ("shape", "dtype", "dims", "keepdim")

    def _setup(self, input, dims, keepdim):
        self.shape = input.shape
        self.dtype = input.dtype
        self.dims = dims
        self.keepdim = keepdim

    def _broadcastable(self, tensor):
        return _unsqueeze_reduced(tensor, self.dims, self.keepdim, len(self.shape))

    def _expanded(self, grad):
        """The small gradient expanded to the input's shape: a view, except
        when it goes straight into a leaf's .grad, which must own dense
        memory (a later backward accumulates into it in place; PyTorch's
        AccumulateGrad clones such a gradient too)."""
        grad = grad.expand(self.shape)
        edge = self._edges[0]
        if edge is not None and isinstance(edge[0], _TensorBase):
            grad = grad.contiguous()
        return grad


def _record_reduction(node_class, input, dim, keepdim, result, *saved):
    node = node_class(edges_of(input))
    node._setup(input, _reduced_dims(dim, input.ndim), keepdim)
    if saved:
        node.save(*saved)
    return record(node, result)


# ---- sum, mean --------------------------------------------------------------------

class SumBackward0(_ReductionBackward):
    """sum over every dim (SumBackward1: over the given dims)."""

    __slots__ = ()

    def apply(self, grad):
        # cast the small gradient, then expand it (a view, no copy)
        return (self._expanded(_to_dtype(self._broadcastable(grad), self.dtype)),)


class SumBackward1(SumBackward0):
    __slots__ = ()


def _register_sum_like(name, all_dims_class, some_dims_class):
    """sum and mean: one node class for a full reduction, one for dims."""
    @register(name)
    def handler(input, dim=None, keepdim=False, *, dtype=None, out=None):
        refuse_out(name, out)
        reduce = getattr(input, name)
        if dim is None and dtype is None and keepdim is False:
            return _record_reduction(all_dims_class, input, None, False, reduce())
        result = reduce(dim, keepdim, dtype=dtype)
        reduces_all = _reduced_dims(dim, input.ndim) is None
        node_class = all_dims_class if reduces_all else some_dims_class
        return _record_reduction(node_class, input, dim, keepdim, result)
    handler.__name__ = name
    return handler


_register_sum_like("sum", SumBackward0, SumBackward1)


class MeanBackward0(_ReductionBackward):
    """mean over every dim (MeanBackward1: over the given dims)."""

    __slots__ = ()

    def apply(self, grad):
        count = _count_reduced(self.shape, self.dims)
        # divide and cast the small gradient, then expand it (a view)
        grad = self._broadcastable(grad / count)  # count 0: nan, as the forward
        return (self._expanded(_to_dtype(grad, self.dtype)),)


class MeanBackward1(MeanBackward0):
    __slots__ = ()


_register_sum_like("mean", MeanBackward0, MeanBackward1)


# ---- prod -------------------------------------------------------------------------

def _product_of_others(x, dim):
    """Entry k along `dim`: the product of x's other entries along `dim`.

    Exact when x holds zeros (where result / x is not): copy k of x has
    its entry k replaced by 1, and its product is taken.  Costs n times
    x's memory (n = x.shape[dim]), so it runs only when x has a zero."""
    n = x.shape[dim]
    copies = x.unsqueeze(0).expand((n,) + tuple(x.shape))
    return _move_first_dim_to(_replace_diagonal_by_one(copies, dim).prod(dim + 1), dim)


def _replace_diagonal_by_one(copies, dim):
    """copies[k] with its entry k along dim+1 set to 1."""
    n = copies.shape[0]
    mask_shape = [1] * copies.ndim
    mask_shape[0] = mask_shape[dim + 1] = n
    diagonal = ember.eye(n, dtype=ember.bool).reshape(mask_shape)
    return ember.where(diagonal, ember.ones((), dtype=copies.dtype), copies)


def _move_first_dim_to(tensor, dim):
    order = list(range(1, tensor.ndim))
    order.insert(dim, 0)
    return tensor.permute(order)


def _has_zero(tensor):
    return bool(ember.eq(tensor, 0).any())


class ProdBackward0(_ReductionBackward):
    """prod over every element (ProdBackward1: along one dim)."""

    __slots__ = ()

    def apply(self, grad):
        input, result = self.unpack_saved()
        grad = self._broadcastable(grad)
        if input.ndim == 0:
            return (_to_dtype(grad, self.dtype),)
        if not _has_zero(input):
            grad_input = grad * self._broadcastable(result) / input
        elif self.dims is None:
            others = _product_of_others(input.reshape(-1), 0).reshape(self.shape)
            grad_input = grad * others
        else:
            grad_input = grad * _product_of_others(input, self.dims[0])
        return (_to_dtype(grad_input, self.dtype),)


class ProdBackward1(ProdBackward0):
    __slots__ = ()


@register("prod")
def prod(input, dim=None, keepdim=False, *, dtype=None, out=None):
    refuse_out("prod", out)
    result = input.prod(dim, keepdim, dtype=dtype)
    node_class = ProdBackward0 if dim is None else ProdBackward1
    return _record_reduction(node_class, input, dim, keepdim, result,
                             input, SavedOutput(result))


# ---- amax, amin, max, min -----------------------------------------------------------

class AmaxBackward0(_ReductionBackward):
    """The gradient is split evenly among the elements equal to the result
    (PyTorch's rule for ties)."""

    __slots__ = ()

    def apply(self, grad):
        input, result = self.unpack_saved()
        ties = ember.eq(input, self._broadcastable(result))
        if self.dims is None:
            count = ties.sum()
        else:
            count = ties.sum(self.dims, keepdim=True)
        grad_input = self._broadcastable(grad) / count * ties
        return (_to_dtype(grad_input, self.dtype),)


class AminBackward0(AmaxBackward0):
    __slots__ = ()


class MaxBackward1(AmaxBackward0):
    """max() of every element."""
    __slots__ = ()


class MinBackward1(AmaxBackward0):
    """min() of every element."""
    __slots__ = ()


@register("amax")
def amax(input, dim=(), keepdim=False, *, out=None):
    refuse_out("amax", out)
    result = input.amax(dim, keepdim)
    return _record_reduction(AmaxBackward0, input, dim, keepdim, result,
                             input, SavedOutput(result))


@register("amin")
def amin(input, dim=(), keepdim=False, *, out=None):
    refuse_out("amin", out)
    result = input.amin(dim, keepdim)
    return _record_reduction(AminBackward0, input, dim, keepdim, result,
                             input, SavedOutput(result))


class MaxBackward0(Node):
    """max(dim) -> (values, indices): the values' gradient goes to the
    positions the indices name.  Two outputs; the indices have no
    gradient (they are never given this node as their history)."""

    __slots__ = ("shape", "dtype", "dim", "keepdim")
    num_outputs = 2

    def apply(self, grad, grad_indices=None):
        if not self.shape:  # 0-d input: the value is the input
            return (grad,)
        (indices,) = self.unpack_saved()
        if not self.keepdim:
            grad = grad.unsqueeze(self.dim)
            indices = indices.unsqueeze(self.dim)
        zeros = ember.zeros(self.shape, dtype=grad.dtype, device=grad.device)
        return (zeros.scatter(self.dim, indices, grad),)


class MinBackward0(MaxBackward0):
    __slots__ = ()


def _max_or_min(name, full_node, dim_node, elementwise, input, dim, keepdim):
    if isinstance(dim, _TensorBase) and keepdim is _MISSING:
        # max(input, other) is the elementwise maximum: its own formula
        _set_grad_enabled(True)
        try:
            return elementwise(input, dim)
        finally:
            _set_grad_enabled(False)
    if dim is _MISSING:
        if keepdim is not _MISSING:
            return getattr(input, name)(keepdim=keepdim)  # raises PyTorch's error
        result = getattr(input, name)()
        return _record_reduction(full_node, input, None, False, result,
                                 input, SavedOutput(result))
    keepdim = False if keepdim is _MISSING else keepdim
    values_and_indices = getattr(input, name)(dim, keepdim)
    values, indices = values_and_indices
    node = dim_node(edges_of(input))
    node.shape = input.shape
    node.dtype = input.dtype
    node.dim = dim % (input.ndim or 1)
    node.keepdim = keepdim
    node.save(indices)
    record(node, values)
    return values_and_indices


@register("max")
def max_handler(input, dim=_MISSING, keepdim=_MISSING):
    return _max_or_min("max", MaxBackward1, MaxBackward0, ember.maximum, input, dim, keepdim)


@register("min")
def min_handler(input, dim=_MISSING, keepdim=_MISSING):
    return _max_or_min("min", MinBackward1, MinBackward0, ember.minimum, input, dim, keepdim)


# ---- logsumexp ----------------------------------------------------------------------

class LogsumexpBackward0(_ReductionBackward):
    __slots__ = ()

    def apply(self, grad):
        input, result = self.unpack_saved()
        weights = ember.exp(input - self._broadcastable(result))
        return (_to_dtype(self._broadcastable(grad) * weights, self.dtype),)


@register("logsumexp")
def logsumexp(input, dim=_MISSING, keepdim=False, *, out=None):
    refuse_out("logsumexp", out)
    if dim is _MISSING:
        return input.logsumexp(keepdim=keepdim)  # raises PyTorch's error
    result = input.logsumexp(dim, keepdim)
    return _record_reduction(LogsumexpBackward0, input, dim, keepdim, result,
                             input, SavedOutput(result))


# ---- var, std, var_mean, std_mean ---------------------------------------------------

def _var_arguments(dim=None, unbiased=None, keepdim=False, correction=None, out=None):
    """(dim, correction, keepdim, out) from var's forms: var(unbiased),
    var(dim, unbiased, keepdim), var(dim, *, correction, keepdim)."""
    if isinstance(dim, bool):  # var(unbiased)
        dim, unbiased = None, dim
    if correction is None:
        correction = 0 if unbiased is False else 1
    return dim, correction, keepdim, out


def _centered(input, dims):
    mean = input.mean() if dims is None else input.mean(dims, keepdim=True)
    return input - mean


def _var_input_grad(node, input, grad_var):
    """d var / d input applied to grad_var (already broadcastable)."""
    denominator = _count_reduced(node.shape, node.dims) - node.correction
    scale = 2.0 / denominator if denominator > 0 else math.inf
    return grad_var * scale * _centered(input, node.dims)


def _std_to_var_grad(grad_std, std):
    """grad of var from grad of std = sqrt(var): grad / (2 std), 0 where std is 0."""
    return ember.where(ember.eq(std, 0), ember.zeros((), dtype=std.dtype),
                       grad_std / (2 * std))


class VarBackward0(_ReductionBackward):
    __slots__ = ("correction",)

    def apply(self, grad):
        (input,) = self.unpack_saved()
        return (_var_input_grad(self, input, self._broadcastable(grad)),)


class StdBackward0(_ReductionBackward):
    __slots__ = ("correction",)

    def apply(self, grad):
        input, std = self.unpack_saved()
        grad_var = _std_to_var_grad(self._broadcastable(grad), self._broadcastable(std))
        return (_var_input_grad(self, input, grad_var),)


def _var_or_std(name, node_class, input, args, kwargs):
    dim, correction, keepdim, out = _var_arguments(*args, **kwargs)
    refuse_out(name, out)
    result = getattr(ember, name)(input, *args, **kwargs)
    node = node_class(edges_of(input))
    node._setup(input, _reduced_dims(dim, input.ndim), keepdim)
    node.correction = correction
    if node_class is StdBackward0:
        node.save(input, SavedOutput(result))
    else:
        node.save(input)
    return record(node, result)


@register("var")
def var(input, *args, **kwargs):
    return _var_or_std("var", VarBackward0, input, args, kwargs)


@register("std")
def std(input, *args, **kwargs):
    return _var_or_std("std", StdBackward0, input, args, kwargs)


class VarMeanBackward0(_ReductionBackward):
    """(var, mean) or (std, mean): two differentiable outputs."""

    __slots__ = ("correction",)
    num_outputs = 2

    def apply(self, grad_spread, grad_mean):
        input, spread = self.unpack_saved()
        grad_input = None
        if grad_spread is not None:
            grad_spread = self._broadcastable(grad_spread)
            if type(self) is StdMeanBackward0:
                grad_spread = _std_to_var_grad(grad_spread, self._broadcastable(spread))
            grad_input = _var_input_grad(self, input, grad_spread)
        if grad_mean is not None:
            count = _count_reduced(self.shape, self.dims)
            grad_of_mean = self._expanded(self._broadcastable(grad_mean / count))
            grad_input = grad_of_mean if grad_input is None else grad_input + grad_of_mean
        return (grad_input,)


class StdMeanBackward0(VarMeanBackward0):
    __slots__ = ()


def _var_or_std_mean(name, node_class, input, args, kwargs):
    dim, correction, keepdim, _ = _var_arguments(*args, **kwargs)
    spread, mean = result = getattr(ember, name)(input, *args, **kwargs)
    node = node_class(edges_of(input))
    node._setup(input, _reduced_dims(dim, input.ndim), keepdim)
    node.correction = correction
    node.save(input, SavedOutput(spread))
    record(node, spread, 0)
    record(node, mean, 1)
    return result


@register("var_mean")
def var_mean(input, *args, **kwargs):
    return _var_or_std_mean("var_mean", VarMeanBackward0, input, args, kwargs)


@register("std_mean")
def std_mean(input, *args, **kwargs):
    return _var_or_std_mean("std_mean", StdMeanBackward0, input, args, kwargs)


# ---- norm ---------------------------------------------------------------------------

class LinalgVectorNormBackward0(_ReductionBackward):
    """Vector p-norm: grad * sign(x) |x|^(p-1) / norm^(p-1), with the usual
    special cases (p=1: sign; p=inf: split among the largest |x|; a zero
    norm gives a zero gradient)."""

    __slots__ = ("p",)

    def apply(self, grad):
        input, norm = self.unpack_saved()
        grad = self._broadcastable(grad)
        norm = self._broadcastable(norm)
        p = self.p
        if p == 0:
            grad_input = ember.zeros(self.shape, dtype=self.dtype, device=grad.device)
        elif p == 1:
            grad_input = grad * ember.sign(input)
        elif math.isinf(p):
            ties = ember.eq(ember.abs(input), norm)
            count = ties.sum() if self.dims is None else ties.sum(self.dims, keepdim=True)
            grad_input = grad / count * ember.sign(input) * ties
        else:
            if p == 2:
                direction = input / norm
            else:
                direction = (ember.sign(input) * ember.abs(input) ** (p - 1)
                             / norm ** (p - 1))
            zero = ember.zeros((), dtype=direction.dtype)
            grad_input = grad * ember.where(ember.eq(norm, 0), zero, direction)
        return (_to_dtype(grad_input, self.dtype),)


def _norm_order(p):
    return 2.0 if p is None or isinstance(p, str) else float(p)


@register("norm")
def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    refuse_out("norm", out)
    result = input.norm(p, dim, keepdim, dtype=dtype)
    node = LinalgVectorNormBackward0(edges_of(input))
    node._setup(input, _reduced_dims(dim, input.ndim), keepdim)
    node.p = _norm_order(p)
    node.save(input, SavedOutput(result))
    return record(node, result)


# ---- softmax, log_softmax -------------------------------------------------------------

class SoftmaxBackward0(Node):
    """y * (grad - sum(grad * y, dim))."""

    __slots__ = ("dim", "dtype")

    def apply(self, grad):
        (y,) = self.unpack_saved()
        dim = self.dim
        weighted_sum = (grad * y).sum(dim, keepdim=True)
        if _is_grad_enabled():  # recording backward: no in-place writes
            grad_input = (grad - weighted_sum) * y
        else:
            grad_input = (grad - weighted_sum).mul_(y)
        return (_to_dtype(grad_input, self.dtype),)


class LogSoftmaxBackward0(Node):
    """grad - exp(y) * sum(grad, dim)."""

    __slots__ = ("dim", "dtype")

    def apply(self, grad):
        (y,) = self.unpack_saved()
        grad_sum = grad.sum(self.dim, keepdim=True)
        if _is_grad_enabled():
            grad_input = grad - ember.exp(y) * grad_sum
        else:
            grad_input = grad - ember.exp(y).mul_(grad_sum)
        return (_to_dtype(grad_input, self.dtype),)


def _softmax_like(node_class, op, input, dim, dtype):
    if dim is _MISSING:
        return op(input)  # raises PyTorch's error
    result = op(input, dim) if dtype is None else op(input, dim, dtype)
    node = node_class(edges_of(input))
    node.dim = dim
    node.dtype = input.dtype
    node.save(SavedOutput(result))
    return record(node, result)


@register("softmax")
def softmax(input, dim=_MISSING, dtype=None):
    return _softmax_like(SoftmaxBackward0, ember.softmax, input, dim, dtype)


@register("log_softmax")
def log_softmax(input, dim=_MISSING, dtype=None):
    return _softmax_like(LogSoftmaxBackward0, ember.log_softmax, input, dim, dtype)


# ---- cumsum, cumprod ------------------------------------------------------------------

def _reverse_cumsum(tensor, dim):
    return tensor.flip([dim]).cumsum(dim).flip([dim])


class CumsumBackward0(Node):
    """The gradient of a running sum is the reversed running sum."""

    __slots__ = ("dim", "dtype")

    def apply(self, grad):
        if grad.ndim == 0:
            return (_to_dtype(grad, self.dtype),)
        return (_to_dtype(_reverse_cumsum(grad, self.dim), self.dtype),)


class CumprodBackward0(Node):
    """d y_j / d x_k = prod_{i <= j, i != k} x_i for j >= k.

    Without zeros that is y_j / x_k, so the gradient is a reversed running
    sum of grad * y divided by x; with zeros, the products of the others
    are taken exactly (n times the memory, only then)."""

    __slots__ = ("dim", "dtype")

    def apply(self, grad):
        input, result = self.unpack_saved()
        if input.ndim == 0:
            return (_to_dtype(grad, self.dtype),)
        dim = self.dim
        if not _has_zero(input):
            grad_input = _reverse_cumsum(grad * result, dim) / input
        else:
            grad_input = _cumprod_grad_with_zeros(input, grad, dim)
        return (_to_dtype(grad_input, self.dtype),)


def _cumprod_grad_with_zeros(x, grad, dim):
    """sum_{j >= k} grad_j prod_{i <= j, i != k} x_i, exactly."""
    n = x.shape[dim]
    copies = x.unsqueeze(0).expand((n,) + tuple(x.shape))
    running = _replace_diagonal_by_one(copies, dim).to(grad.dtype).cumprod(dim + 1)
    mask_shape = [1] * copies.ndim
    mask_shape[0] = mask_shape[dim + 1] = n
    later = ember.ones((n, n), dtype=ember.bool, device=grad.device).triu().reshape(
        mask_shape)  # j >= k
    terms = running * grad.unsqueeze(0) * later
    return _move_first_dim_to(terms.sum(dim + 1), dim)


def _scan(node_class, name, input, dim, dtype, out, saves_values):
    refuse_out(name, out)
    if dim is _MISSING:
        return getattr(input, name)()  # raises PyTorch's error
    result = getattr(input, name)(dim, dtype=dtype)
    node = node_class(edges_of(input))
    node.dim = dim % (input.ndim or 1)
    node.dtype = input.dtype
    if saves_values:
        node.save(input, SavedOutput(result))
    return record(node, result)


@register("cumsum")
def cumsum(input, dim=_MISSING, *, dtype=None, out=None):
    return _scan(CumsumBackward0, "cumsum", input, dim, dtype, out, False)


@register("cumprod")
def cumprod(input, dim=_MISSING, *, dtype=None, out=None):
    return _scan(CumprodBackward0, "cumprod", input, dim, dtype, out, True)


# ---- logcumsumexp, cummax, cummin -----------------------------------------------------

def _reverse_logcumsumexp(tensor, dim):
    return tensor.flip([dim]).logcumsumexp(dim).flip([dim])


class LogcumsumexpBackward0(Node):
    """d result_i / d x_j = exp(x_j - result_i) for j <= i, so
    grad_x_j = sum_{i >= j} grad_i exp(x_j - result_i), summed in log space
    (a reversed logcumsumexp) separately over the positive and negative
    gradients, so that nothing overflows (PyTorch does the same)."""

    __slots__ = ("dim",)

    def apply(self, grad):
        input, result = self.unpack_saved()
        if input.ndim == 0:
            return (grad,)
        dim = self.dim
        with_result = []
        for part in (grad.clamp(min=0), (-grad).clamp(min=0)):
            with_result.append((input + _reverse_logcumsumexp(part.log() - result, dim)).exp())
        return (with_result[0] - with_result[1],)


@register("logcumsumexp")
def logcumsumexp(input, dim, *, out=None):
    refuse_out("logcumsumexp", out)
    result = input.logcumsumexp(dim)
    node = LogcumsumexpBackward0(edges_of(input))
    node.dim = dim % (input.ndim or 1)
    node.save(input, SavedOutput(result))
    return record(node, result)


class CummaxBackward0(Node):
    """Each running value's gradient goes to the element it was taken from
    (summed where several share one); the indices get none."""

    __slots__ = ("shape", "dim")
    num_outputs = 2

    def apply(self, grad, grad_indices=None):
        (indices,) = self.unpack_saved()
        if not self.shape:
            return (grad,)
        zeros = ember.zeros(self.shape, dtype=grad.dtype, device=grad.device)
        return (zeros.scatter_add(self.dim, indices, grad),)


class CumminBackward0(CummaxBackward0):
    __slots__ = ()


def _cum_extremum(name, node_class, input, dim):
    values_and_indices = getattr(input, name)(dim)
    values, indices = values_and_indices
    node = node_class(edges_of(input))
    node.shape = input.shape
    node.dim = dim % (input.ndim or 1)
    node.save(indices)
    record(node, values)
    return values_and_indices


@register("cummax")
def cummax(input, dim):
    return _cum_extremum("cummax", CummaxBackward0, input, dim)


@register("cummin")
def cummin(input, dim):
    return _cum_extremum("cummin", CumminBackward0, input, dim)


# ---- no derivative ----------------------------------------------------------------------

nondifferentiable("argmax", "argmin", "all", "any", "count_nonzero")
# Integer results (searchsorted, bucketize) and counts (PyTorch has no
# derivative for bincount or histc either).
nondifferentiable("searchsorted", "bucketize", "bincount", "histc")
