"""PyTorch's top-level functions that ember had only as tensor methods, or
not at all: ember.transpose(x, 0, 1), ember.broadcast_tensors(a, b),
ember.median(x, dim), ember.nansum(x), ember.tensordot(a, b), ...

Three kinds live here:
  * function forms of methods the C core defines (x.transpose -> ember.transpose),
  * PyTorch's aliases and broadcasting helpers,
  * reductions and products PyTorch composes from other operators.
Every one is written over ember's differentiable operators, so autograd
differentiates it through them, except median and nanmedian without a
dim, whose gradient PyTorch spreads evenly over the tied elements (a small
autograd Function below).  Tensor methods are attached where PyTorch has
them.
"""

import builtins
import math
import warnings

from . import _C
from ._tensor import Tensor
from . import _functions
from ._functions import _unpack_tensors
from .autograd.formulas._common import _set_history, check_inplace
from .autograd.function import Function
from .linalg import _result_type

_Median = _result_type("median", ("values", "indices"))
_NanMedian = _result_type("nanmedian", ("values", "indices"))
_Aminmax = _result_type("aminmax", ("min", "max"))
_Mode = _result_type("mode", ("values", "indices"))


def _check_input(name, input):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, "
                        f"not {type(input).__name__}")


# ---- function forms of methods ------------------------------------------------------

def _function_form(method_name, name=None):
    """ember.<name>(input, ...) as input.<method_name>(...)."""
    name = name or method_name
    method = getattr(Tensor, method_name)

    def function(input, *args, **kwargs):
        _check_input(name, input)
        return method(input, *args, **kwargs)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"ember.{name}(input, ...) is input.{method_name}(...)."
    return function


_METHOD_FORMS = ("transpose", "t", "permute", "squeeze", "unsqueeze", "reshape", "narrow",
                 "select", "as_strided", "clone", "is_floating_point")
_FUNCTION_FORMS = {name: _function_form(name) for name in _METHOD_FORMS}
# PyTorch's NumPy-style aliases, functions and methods both
_ALIASES = {"swapaxes": "transpose", "swapdims": "transpose", "arccos": "acos",
            "arcsin": "asin", "arctan": "atan", "arcsinh": "asinh",
            "arccosh": "acosh", "arctanh": "atanh", "sgn": "sign"}
_FUNCTION_FORMS.update({alias: _function_form(target, alias)
                        for alias, target in _ALIASES.items()})


def is_complex(input):
    """False: ember has no complex dtypes."""
    _check_input("is_complex", input)
    return False


def is_nonzero(input):
    _check_input("is_nonzero", input)
    if input.numel() != 1:
        which = "no values" if input.numel() == 0 else "more than one value"
        raise RuntimeError(f"Boolean value of Tensor with {which} is ambiguous")
    return builtins.bool(input.item())


def clamp_min(input, min):
    return _C.clamp(input, min=min)


def clamp_max(input, max):
    return _C.clamp(input, max=max)


def ravel(input):
    """A 1-d view when the layout allows one, else a copy."""
    return input.reshape(-1)


# ---- broadcasting ---------------------------------------------------------------------

def broadcast_shapes(*shapes):
    """The shape that tensors of these shapes broadcast to (ints are 1-d shapes)."""
    shapes = [(s,) if isinstance(s, int) else tuple(s) for s in shapes]
    result = []
    for index, shape in enumerate(shapes):
        for negative, size in enumerate(reversed(shape), start=1):
            if negative > len(result):
                result.insert(0, size)
            elif result[-negative] == 1:
                result[-negative] = size
            elif size not in (1, result[-negative]):
                raise RuntimeError(
                    f"Attempting to broadcast a dimension of length {size} at -{negative}! "
                    f"Mismatching argument at index {index} had {shape}; but expected "
                    f"shape should be broadcastable to {result}")
    return _C.Size(result)


def broadcast_tensors(*tensors):
    """Views of the tensors expanded to their common shape."""
    tensors = _unpack_tensors(tensors)
    shape = ()
    for t in tensors:  # PyTorch's rule and message (its operators' infer_size)
        shape = _functions._broadcast_shapes(shape, t.shape)
    return tuple(t.expand(shape) for t in tensors)


def broadcast_to(input, size):
    _check_input("broadcast_to", input)
    return input.expand(size)


def _atleast(name, ndim, tensors):
    tensors = _unpack_tensors(tensors)
    shaped = []
    for t in tensors:
        _check_input(name, t)
        if t.dim() == 0:
            t = t.reshape((1,) * ndim)
        elif t.dim() == 1 and ndim >= 2:
            t = t.unsqueeze(0)
        if t.dim() == 2 and ndim == 3:
            t = t.unsqueeze(-1)
        shaped.append(t)
    return shaped[0] if len(shaped) == 1 else tuple(shaped)


def atleast_1d(*tensors):
    return _atleast("atleast_1d", 1, tensors)


def atleast_2d(*tensors):
    return _atleast("atleast_2d", 2, tensors)


def atleast_3d(*tensors):
    """A 1-d tensor becomes (1, n, 1) and a 2-d one (m, n, 1), as NumPy's."""
    return _atleast("atleast_3d", 3, tensors)


def movedim(input, source, destination):
    """A view with the dims in source moved to the positions in destination,
    the others keeping their order."""
    _check_input("movedim", input)
    source = [source] if isinstance(source, int) else list(source)
    destination = [destination] if isinstance(destination, int) else list(destination)
    if len(source) != len(destination):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({source} "
                           f"dims) should contain the same number of dims as destination "
                           f"({destination} dims)")
    ndim = input.dim()
    source = [_wrap_dim(d, ndim) for d in source]
    destination = [_wrap_dim(d, ndim) for d in destination]
    for name, dims in (("source", source), ("destination", destination)):
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({dims})")
    order = [None] * ndim
    for s, d in zip(source, destination):
        order[d] = s
    rest = iter(d for d in range(ndim) if d not in source)
    return input.permute([d if d is not None else next(rest) for d in order])


def _wrap_dim(dim, ndim):
    bound = builtins.max(ndim, 1)
    if not -bound <= dim < bound:
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-bound}, {bound - 1}], but got {dim})")
    return dim % bound


# ---- reductions -----------------------------------------------------------------------

def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """The sum with NaNs counted as zero."""
    _check_input("nansum", input)
    values = _C.where(_C.isnan(input), 0, input) if input.dtype.is_floating_point else input
    if dim is None:
        return values.sum(dtype=dtype)
    return values.sum(dim, keepdim=keepdim, dtype=dtype)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """The mean of the values that are not NaN (NaN where there are none)."""
    _check_input("nanmean", input)
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex "
                           f"dtype but got {_functions._scalar_type_name(input.dtype)}")
    counted = _C.logical_not(_C.isnan(input))
    count = counted.sum() if dim is None else counted.sum(dim, keepdim=keepdim)
    return nansum(input, dim, keepdim, dtype=dtype) / count


def median(input, dim=None, keepdim=False):
    """The lower median: of all elements (NaN if any is NaN), or along dim
    as (values, indices), where a row holding NaN gives its first NaN."""
    return _median("median", input, dim, keepdim, ignore_nan=False)


def nanmedian(input, dim=None, keepdim=False):
    """median() of the values that are not NaN (NaN where there are none)."""
    return _median("nanmedian", input, dim, keepdim, ignore_nan=True)


def _median(name, input, dim, keepdim, ignore_nan):
    _check_input(name, input)
    if dim is None:
        flat = input.reshape(-1)
        if flat.numel() == 0:
            return _C.full((), math.nan, dtype=input.dtype)
        value, _ = _median_along(flat.detach(), 0, ignore_nan)
        return _EvenlySpread.apply(input, value)
    result_type = _NanMedian if ignore_nan else _Median
    if input.dim() == 0:
        return result_type(input.clone(), _C.zeros((), dtype=_C.int64))
    dim = _wrap_dim(dim, input.dim())
    if input.shape[dim] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {dim} to have non-zero size.")
    _, indices = _median_along(input.detach(), dim, ignore_nan)
    indices = indices.unsqueeze(dim)
    values = input.gather(dim, indices)     # gathered from input: its gradient goes there
    if keepdim:
        return result_type(values, indices)
    return result_type(values.squeeze(dim), indices.squeeze(dim))


def _median_along(input, dim, ignore_nan):
    """(values, indices) of the lower median along dim, without autograd."""
    if input.numel() == 0:
        shape = list(input.shape)
        del shape[dim]
        return (_C.empty(shape, dtype=input.dtype), _C.empty(shape, dtype=_C.int64))
    ordered, order = input.sort(dim, stable=True)       # NaNs sort last
    length = input.shape[dim]
    if not input.dtype.is_floating_point:
        k = _C.full((), (length - 1) // 2, dtype=_C.int64)
    else:
        nans = _C.isnan(input)
        counted = (length - nans.sum(dim, keepdim=True)) if ignore_nan else \
            _C.full((), length, dtype=_C.int64)
        k = ((counted - 1).clamp(min=0) // 2)
    k = k.expand(_shape_with(input.shape, dim, 1)) if k.dim() == 0 else k
    values = ordered.gather(dim, k).squeeze(dim)
    indices = order.gather(dim, k).squeeze(dim)
    if input.dtype.is_floating_point and not ignore_nan:
        nans = _C.isnan(input)
        has_nan = nans.any(dim)
        first_nan = nans.to(_C.uint8).argmax(dim)
        values = _C.where(has_nan, math.nan, values)
        indices = _C.where(has_nan, first_nan, indices)
    return values, indices


def _shape_with(shape, dim, size):
    shape = list(shape)
    shape[dim] = size
    return shape


class _EvenlySpread(Function):
    """The median of all elements: its gradient is spread evenly over the
    elements equal to it (over the NaNs, when it is NaN), as PyTorch's."""

    @staticmethod
    def forward(ctx, input, value):
        ctx.save_for_backward(input, value)
        return value.clone()

    @staticmethod
    def backward(ctx, grad):
        input, value = ctx.saved_tensors
        ties = _C.isnan(input) if _C.isnan(value).item() else (input == value)
        ties = ties.to(grad.dtype)
        return ties * (grad / ties.sum()), None


def aminmax(input, *, dim=None, keepdim=False):
    """(min, max) of all elements or along dim."""
    _check_input("aminmax", input)
    if input.numel() == 0 and (dim is None or input.shape[dim] == 0):
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the "
                           "operation has no identity.")
    if dim is None:
        if keepdim:
            return _Aminmax(input.amin(tuple(range(input.dim())), keepdim=True),
                            input.amax(tuple(range(input.dim())), keepdim=True))
        return _Aminmax(input.amin(), input.amax())
    return _Aminmax(input.amin(dim, keepdim=keepdim), input.amax(dim, keepdim=keepdim))


def mode(input, dim=-1, keepdim=False):
    """The most frequent value along dim (the smallest among equally
    frequent ones) and the index of its last occurrence, as PyTorch's."""
    _check_input("mode", input)
    if input.dim() == 0:
        return _Mode(input.clone(), _C.zeros((), dtype=_C.int64))
    dim = _wrap_dim(dim, input.dim())
    if input.shape[dim] == 0:
        raise IndexError(f"mode(): Expected reduction dim {dim} to have non-zero size.")
    ordered = input.detach().sort(dim, stable=True).values
    positions = _C.arange(input.shape[dim]).view(
        [-1 if d == dim else 1 for d in range(input.dim())]).expand(input.shape)
    # a run of equal sorted values starts where the value changes; each
    # element's run length so far is its position less the run's start
    previous = ordered.narrow(dim, 0, input.shape[dim] - 1)
    changes = ordered.narrow(dim, 1, input.shape[dim] - 1) != previous
    starts = _C.cat([_C.ones_like(changes.narrow(dim, 0, 1)), changes], dim)
    run_start = _C.where(starts, positions, 0).cummax(dim).values
    run_length = positions - run_start
    best = run_length.argmax(dim, keepdim=True)         # the first longest run: smallest value
    value = ordered.gather(dim, best)
    last = _C.where(input.detach() == value, positions, -1).amax(dim, keepdim=True)
    values = input.gather(dim, last)
    if not keepdim:
        values, last = values.squeeze(dim), last.squeeze(dim)
    return _Mode(values, last)


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """The q-th quantiles along dim (of all elements when dim is None),
    interpolated between the two nearest ranks; NaN where a row holds NaN."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, out, ignore_nan=False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """quantile() of the values that are not NaN."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, out,
                     ignore_nan=True)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(name, input, q, dim, keepdim, interpolation, out, ignore_nan):
    _check_input(name, input)
    scalar_q = not isinstance(q, Tensor)
    q = _C.tensor([float(q)], dtype=input.dtype) if scalar_q else q
    if not scalar_q and q.dim() > 1:
        raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
    if input.dtype not in (_C.float32, _C.float64):
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    if input.numel() == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, "
                           f"midpoint or nearest, but got {interpolation}")
    if bool(((q < 0) | (q > 1)).any()):
        bad = q[(q < 0) | (q > 1)][0].item()
        raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {bad:g}")
    flat = dim is None
    values = input.reshape(-1) if flat else input
    dim = 0 if flat else _wrap_dim(dim, input.dim())
    ordered = values.sort(dim).values.movedim(dim, -1)       # NaNs sort last
    length = ordered.shape[-1]
    nans = _C.isnan(ordered)
    counted = (length - nans.sum(-1, keepdim=True)) if ignore_nan else \
        _C.full(list(ordered.shape[:-1]) + [1], length, dtype=_C.int64)
    # ranks: (..., len(q)), each q scaled to its row's last valid position;
    # as PyTorch's, a row holding NaN (for quantile) points at its last, a
    # NaN, and a row of NaN only (for nanquantile) at its first, so the
    # result is that NaN and the gradient goes to it
    last = (counted - 1).clamp(min=0).to(input.dtype)
    ranks = q.to(input.dtype) * last
    if not ignore_nan:
        ranks = _C.where(nans.any(-1, keepdim=True), float(length - 1), ranks)
    if interpolation == "nearest":
        ranks = ranks.round()
    below = ranks.floor().to(_C.int64)
    above = ranks.ceil().to(_C.int64)
    if interpolation in ("lower", "nearest"):
        above = below
    elif interpolation == "higher":
        below = above
    taken = list(ordered.shape[:-1]) + [q.numel()]
    low = ordered.gather(-1, below.expand(taken))
    if interpolation in ("lower", "higher", "nearest"):
        result = low                # one rank: q gets no gradient, as in PyTorch
    else:
        high = ordered.gather(-1, above.expand(taken))
        weight = 0.5 if interpolation == "midpoint" else ranks - below.to(input.dtype)
        result = low + weight * (high - low)
    result = result.movedim(-1, 0)                           # q's dim first
    if keepdim:
        result = result.reshape([q.numel()] + ([1] * input.dim() if flat else
                                               _shape_with(input.shape, dim, 1)))
    if scalar_q:
        result = result.squeeze(0)
    return result if out is None else out.copy_(result)


def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of the variables in input's rows (observations
    in its columns), with frequency and reliability weights."""
    _check_input("cov", input)
    if input.dim() > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got "
                           f"an input with {input.dim()} dimensions")
    observations = input.reshape(1, -1) if input.dim() < 2 else input
    if not observations.dtype.is_floating_point:
        observations = observations.to(_C.get_default_dtype())
    weights = None
    if fweights is not None:
        weights = fweights.to(observations.dtype)
    if aweights is not None:
        weights = aweights.to(observations.dtype) if weights is None else \
            weights * aweights.to(observations.dtype)
    if weights is None:
        total = observations.shape[1]
        mean = observations.mean(1, keepdim=True)
        norm = total - correction
    else:
        total = weights.sum()
        mean = (observations * weights).sum(1, keepdim=True) / total
        norm = total if correction == 0 else (
            total - correction if aweights is None else
            total - correction * (weights * aweights.to(observations.dtype)).sum() / total)
    centred = observations - mean
    scaled = centred if weights is None else centred * weights
    result = (scaled @ centred.t()) / _clamped_norm(norm)
    return result.squeeze() if input.dim() < 2 else result


def _clamped_norm(norm):
    """cov's divisor: at or below zero it is 0 (giving inf/nan), with
    PyTorch's warning."""
    if float(norm) <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly "
                      "less than the number of observations.", UserWarning, stacklevel=3)
    if isinstance(norm, Tensor):
        return norm.clamp(min=0)
    return builtins.max(norm, 0)


def corrcoef(input):
    """Pearson correlation coefficients of the variables in input's rows,
    clipped to [-1, 1]."""
    c = cov(input)
    if c.dim() == 0:
        return c / c
    stddev = c.diagonal().sqrt()
    return (c / stddev.unsqueeze(1) / stddev.unsqueeze(0)).clamp(-1, 1)


def renorm(input, p, dim, maxnorm):
    """Each slice along dim scaled down to p-norm maxnorm where its norm
    exceeds it."""
    _check_input("renorm", input)
    dim = _wrap_dim(dim, input.dim())
    others = [d for d in range(input.dim()) if d != dim]
    norms = input.norm(p, dim=others, keepdim=True) if others else input.abs()
    scale = _C.where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)
    return input * scale


# ---- elementwise ----------------------------------------------------------------------

def logit(input, eps=None):
    """log(p / (1 - p)), with p clamped to [eps, 1 - eps] when eps is given."""
    _check_input("logit", input)
    if eps is not None:
        input = input.clamp(eps, 1 - eps)
    # two logs, not log(p / (1 - p)): at p = 0 or 1 the gradient is then
    # inf as PyTorch's, where the quotient's chain rule meets 0 * inf
    return _C.log(input) - _C.log1p(-input)


def deg2rad(input):
    _check_input("deg2rad", input)
    return input * (math.pi / 180)


def rad2deg(input):
    _check_input("rad2deg", input)
    return input * (180 / math.pi)


def fmax(input, other):
    """maximum() that takes the other operand where one is NaN."""
    return _C.where(_C.isnan(other), input,
                    _C.where(_C.isnan(input), other, _C.maximum(input, other)))


def fmin(input, other):
    """minimum() that takes the other operand where one is NaN."""
    return _C.where(_C.isnan(other), input,
                    _C.where(_C.isnan(input), other, _C.minimum(input, other)))


def heaviside(input, values):
    """0 where input < 0, values where input == 0, 1 where input > 0."""
    _check_input("heaviside", input)
    if isinstance(values, Tensor) and values.dtype != input.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    step = (input > 0).to(input.dtype)
    return _C.where(input == 0, values, step)


# ---- products ---------------------------------------------------------------------------

def trace(input):
    """The sum of a matrix's main diagonal."""
    _check_input("trace", input)
    if input.dim() != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.dim()}")
    total = input.diagonal().sum()
    return total if input.dtype.is_floating_point else total.to(_C.int64)


def tensordot(a, b, dims=2, out=None):
    """The sum of products over dims: the last `dims` of a with the first of
    b, or the listed pairs ([a's dims], [b's dims])."""
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        dims_a, dims_b = list(range(-dims, 0)), list(range(dims))
    else:
        dims_a, dims_b = ([d] if isinstance(d, int) else list(d) for d in dims)
    for da, db in zip(dims_a, dims_b):   # named as given, as in PyTorch's message
        if a.shape[da] != b.shape[db]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size "
                               f"{a.shape[da]} in dim {da} and second has size "
                               f"{b.shape[db]} in dim {db}")
    dims_a = [_wrap_dim(d, a.dim()) for d in dims_a]
    dims_b = [_wrap_dim(d, b.dim()) for d in dims_b]
    free_a = [d for d in range(a.dim()) if d not in dims_a]
    free_b = [d for d in range(b.dim()) if d not in dims_b]
    contracted = math.prod(a.shape[d] for d in dims_a)
    left = a.permute(free_a + dims_a).reshape(-1, contracted)
    right = b.permute(dims_b + free_b).reshape(contracted, -1)
    result = (left @ right).reshape([a.shape[d] for d in free_a] +
                                    [b.shape[d] for d in free_b])
    return result if out is None else out.copy_(result)


def inner(input, other):
    """The dot product over the last dims (a product when either is 0-d)."""
    if input.dim() == 0 or other.dim() == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but "
                           f"got shapes {list(input.shape)} and {list(other.shape)}")
    return tensordot(input, other, ([-1], [-1]))


def dist(input, other, p=2):
    """The p-norm of input - other."""
    return (input - other).norm(p)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """beta * input + alpha * (mat @ vec); beta = 0 ignores input (NaN too)."""
    return _scaled_sum(input, mat @ vec, beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """beta * input + alpha * outer(vec1, vec2)."""
    return _scaled_sum(input, _C.outer(vec1, vec2), beta, alpha)


def _scaled_sum(input, product, beta, alpha):
    product = product if alpha == 1 else product * alpha
    if beta == 0:   # input is not read (a NaN there stays out); its gradient is 0
        return product + _C.where(_C.zeros((), dtype=_C.bool), input, 0)
    return product + (input if beta == 1 else input * beta)


def chain_matmul(*matrices):
    """The product of the matrices, left to right (PyTorch deprecates it for
    linalg.multi_dot)."""
    matrices = _unpack_tensors(matrices)
    result = matrices[0]
    for m in matrices[1:]:
        result = result @ m
    return result


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Matrices (in dims dim1, dim2 of the result) with input's last dim on
    their offset diagonal."""
    ndim = input.dim() + 1
    dim1, dim2 = _wrap_dim(dim1, ndim), _wrap_dim(dim2, ndim)
    if dim1 == dim2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = input.shape[-1] + builtins.abs(offset)
    square = _C.zeros(list(input.shape[:-1]) + [n, n], dtype=input.dtype)
    rows = _C.arange(input.shape[-1]) + builtins.max(-offset, 0)
    cols = _C.arange(input.shape[-1]) + builtins.max(offset, 0)
    square = _place_diagonal(square, input, rows, cols)
    # square's last two dims are (dim1, dim2) of the result
    rest = [d for d in range(ndim) if d not in (dim1, dim2)]
    order = [None] * ndim
    for position, d in enumerate(rest + [dim1, dim2]):
        order[d] = position
    return square.permute(order)


def _place_diagonal(square, values, rows, cols):
    """square with values[..., i] at [..., rows[i], cols[i]] (differentiable)."""
    n = square.shape[-1]
    positions = (rows * n + cols).expand(list(values.shape))
    flat = square.reshape(list(square.shape[:-2]) + [n * n])
    return flat.scatter(-1, positions, values).reshape(square.shape)


def diagflat(input, offset=0):
    """A matrix with input's flattened elements on its offset diagonal."""
    return diag_embed(input.reshape(-1), offset)


def float_power(input, exponent):
    """pow() in float64."""
    def widen(value):
        return value.to(_C.float64) if isinstance(value, Tensor) else value
    if not isinstance(input, Tensor):
        return _C.pow(_C.tensor(input, dtype=_C.float64), widen(exponent))
    return _C.pow(widen(input), widen(exponent))


def rsub(input, other, alpha=1):
    """other - alpha * input."""
    return -alpha * input + other if alpha != 1 else other - input


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """True where an element of `elements` occurs in test_elements (False
    with invert=True); either may be a number.  By binary search in the
    sorted test elements."""
    as_tensor = (elements if isinstance(elements, Tensor) else
                 _C.tensor(elements, dtype=test_elements.dtype))
    tests = (test_elements if isinstance(test_elements, Tensor) else
             _C.tensor([test_elements], dtype=as_tensor.dtype)).reshape(-1)
    if tests.dtype.is_floating_point:   # NaN matches nothing, and would upset the search
        tests = tests[_C.logical_not(_C.isnan(tests))]
    if tests.numel() == 0:
        found = _C.zeros(as_tensor.shape, dtype=_C.bool)
    else:
        ordered = tests.sort().values
        flat = as_tensor.reshape(-1).to(ordered.dtype)
        at = _C.searchsorted(ordered, flat).clamp(max=ordered.numel() - 1)
        found = (ordered[at] == flat).reshape(as_tensor.shape)
    return found.logical_not() if invert else found


def fill_diagonal_(self, fill_value, wrap=False):
    """Writes fill_value on the main diagonal (all dims equal beyond 2-d; a
    tall matrix restarts it every cols + 1 rows with wrap=True)."""
    if self.dim() < 2:
        raise RuntimeError("dimensions must larger than 1")
    if self.dim() > 2 and len(set(self.shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    n = builtins.min(self.shape)
    if self.dim() == 2 and wrap and self.shape[0] > self.shape[1] + 1:
        rows, cols = self.shape
        flat = _C.arange(0, rows * cols, cols + 1)
        index = (flat // cols, flat % cols)
    else:
        index = (_C.arange(n),) * self.dim()
    self[index] = fill_value
    return self


def sum_to_size(self, *size):
    """self summed over the dims it was broadcast along from size."""
    size = list(size[0]) if len(size) == 1 and not isinstance(size[0], int) else list(size)
    shape = list(self.shape)
    expandable = len(size) <= len(shape) and all(
        s == t or s == 1 for s, t in zip(reversed(size), reversed(shape)))
    if not expandable:
        raise RuntimeError(f"size {{{size}}} is not expandable to size {{{shape}}}.")
    lead = len(shape) - len(size)
    result = self.sum(list(range(lead))) if lead else self
    squeezed = [d for d, (s, t) in enumerate(zip(size, shape[lead:])) if s == 1 and t != 1]
    return result.sum(squeezed, keepdim=True) if squeezed else result


def get_device(self):
    """The CUDA device's index, -1 on the CPU."""
    return -1 if self.device.type == "cpu" else self.device.index


def masked_scatter(input, mask, source):
    """input with the positions where mask is True filled from source's
    elements in order."""
    _check_input("masked_scatter", input)
    mask = mask.expand(input.shape) if mask.shape != input.shape else mask
    taken = mask.reshape(-1).to(_C.int64).cumsum(0)
    if mask.numel() and taken[-1].item() > source.numel():
        raise RuntimeError("Number of elements of source < number of ones in mask")
    picked = source.reshape(-1)[(taken - 1).clamp(min=0)] if source.numel() else \
        _C.zeros(mask.numel(), dtype=input.dtype)
    return _C.where(mask, picked.reshape(input.shape), input)


def masked_scatter_(self, mask, source):
    return self.copy_(masked_scatter(self, mask, source))


def signbit(input):
    """True where the sign bit is set: negatives, -0.0 and NaNs carrying it."""
    _check_input("signbit", input)
    if not input.dtype.is_floating_point:
        return input < 0
    return _C.copysign(_C.ones((), dtype=input.dtype), input) < 0


def ldexp(input, other):
    """input * 2 ** other (in floating point)."""
    dtype = input.dtype if input.dtype.is_floating_point else _C.get_default_dtype()
    return input * _C.pow(_C.full((), 2.0, dtype=dtype), other.to(dtype))


def gcd(input, other):
    """The greatest common divisor, elementwise, of integer tensors (>= 0),
    by Euclid's steps run until every pair has reached zero."""
    a, b = _C.abs(input), _C.abs(other)
    a, b = broadcast_tensors(a, b)
    while bool((b != 0).any()):
        nonzero = b != 0
        a, b = _C.where(nonzero, b, a), _C.where(nonzero, a % _C.where(nonzero, b, 1), 0)
    return a


def lcm(input, other):
    """The least common multiple (0 where either is 0)."""
    divisor = gcd(input, other)
    return _C.where(divisor == 0, 0, _C.abs(input // _C.where(divisor == 0, 1, divisor) * other))


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The integral of y along dim by the trapezoid rule, at sample points x
    (or spacing dx, 1 by default)."""
    return _trapezoids(y, x, dx, dim).sum(dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoid-rule integral of y along dim."""
    return _trapezoids(y, x, dx, dim).cumsum(dim)


def trapz(y, x=None, *, dx=None, dim=-1):
    return trapezoid(y, x, dx=dx, dim=dim)


def _trapezoids(y, x, dx, dim):
    """The area of each trapezoid between neighbouring samples along dim."""
    n = y.shape[dim]
    left, right = y.narrow(dim, 0, builtins.max(n - 1, 0)), y.narrow(dim, 1, builtins.max(n - 1, 0))
    if x is None:
        width = 1.0 if dx is None else dx
    else:
        width = _functions.diff(x, dim=dim if x.dim() == y.dim() else -1)
    return (left + right) * width / 2


def _window(name, window_length, periodic, dtype, layout, device, requires_grad, values):
    """A window of window_length points; periodic windows are the first
    window_length of a symmetric window one point longer."""
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got "
                           f"window_length={window_length}")
    dtype = dtype or _C.get_default_dtype()
    if window_length <= 1:
        return _C.ones(window_length, dtype=dtype, device=device, requires_grad=requires_grad)
    n = window_length + 1 if periodic else window_length
    result = values(_C.arange(n, dtype=_C.float64), n)[:window_length]
    return result.to(dtype=dtype, device=device).requires_grad_(requires_grad)


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                requires_grad=False):
    return _window("hann_window", window_length, periodic, dtype, layout, device,
                   requires_grad, lambda k, n: 0.5 - 0.5 * _C.cos(2 * math.pi * k / (n - 1)))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   layout=None, device=None, requires_grad=False):
    return _window("hamming_window", window_length, periodic, dtype, layout, device,
                   requires_grad,
                   lambda k, n: alpha - beta * _C.cos(2 * math.pi * k / (n - 1)))


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    return _window("blackman_window", window_length, periodic, dtype, layout, device,
                   requires_grad,
                   lambda k, n: (0.42 - 0.5 * _C.cos(2 * math.pi * k / (n - 1))
                                 + 0.08 * _C.cos(4 * math.pi * k / (n - 1))))


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    return _window("bartlett_window", window_length, periodic, dtype, layout, device,
                   requires_grad,
                   lambda k, n: 1 - _C.abs(2 * k / (n - 1) - 1))


def empty_strided(size, stride, *, dtype=None, layout=None, device=None,
                  requires_grad=False, pin_memory=False):
    """An uninitialised tensor with the given strides, over just enough storage."""
    span = 1 + builtins.sum((n - 1) * s for n, s in zip(size, stride)) \
        if all(n > 0 for n in size) else 0
    flat = _C.empty(span, dtype=dtype or _C.get_default_dtype(), device=device,
                    pin_memory=pin_memory)
    return flat.as_strided(size, stride).requires_grad_(requires_grad)


def scalar_tensor(s, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False):
    return _C.full((), s, dtype=dtype or _C.get_default_dtype(), device=device,
                   requires_grad=requires_grad)


def is_same_size(input, other):
    return input.shape == other.shape


# ---- splitting and stacking -------------------------------------------------------------

def _split_along(name, input, sections, dim, least_dims):
    if input.dim() < least_dims:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {least_dims} "
                           f"dimension, but got a tensor with {input.dim()} dimensions!")
    if isinstance(sections, int) and input.shape[dim] % sections != 0:
        raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the "
                           f"size of the dimension {input.shape[dim]} is not divisible by "
                           f"the split_size {sections}!")
    return input.tensor_split(sections, dim)


def hsplit(input, indices_or_sections):
    return _split_along("hsplit", input, indices_or_sections, 1 if input.dim() > 1 else 0, 1)


def vsplit(input, indices_or_sections):
    return _split_along("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input, indices_or_sections):
    return _split_along("dsplit", input, indices_or_sections, 2, 3)


def column_stack(tensors):
    """1-d (and 0-d) tensors become columns; the rest are joined along dim 1."""
    columns = [t.reshape(-1, 1) if t.dim() <= 1 else t for t in tensors]
    return _C.hstack(columns)


def dstack(tensors):
    return _C.cat(list(atleast_3d(*tensors)) if len(tensors) > 1 else [atleast_3d(*tensors)],
                  2)


def logspace(start, end, steps, base=10.0, *, dtype=None, **kwargs):
    """steps points from base**start to base**end, evenly spaced in the exponent."""
    exponents = _C.linspace(start, end, steps, dtype=_C.float64)
    result = _C.pow(_C.full((), base, dtype=_C.float64), exponents)
    return result.to(dtype or _C.get_default_dtype(), **kwargs)


_FUNCTIONS = {name: globals()[name] for name in (
    "is_complex", "is_nonzero", "clamp_min", "clamp_max", "ravel", "broadcast_shapes",
    "broadcast_tensors", "broadcast_to", "atleast_1d", "atleast_2d", "atleast_3d", "movedim",
    "nansum", "nanmean", "median", "nanmedian", "aminmax", "logit", "deg2rad", "rad2deg",
    "fmax", "fmin", "heaviside", "trace", "tensordot", "inner", "dist", "addmv", "addr",
    "chain_matmul", "diag_embed", "diagflat", "hsplit", "vsplit", "dsplit", "column_stack",
    "dstack", "logspace", "mode", "quantile", "nanquantile", "cov", "corrcoef", "renorm",
    "float_power", "rsub", "isin", "masked_scatter", "signbit", "ldexp", "gcd", "lcm",
    "trapezoid", "trapz", "cumulative_trapezoid", "hann_window", "hamming_window",
    "blackman_window", "bartlett_window", "empty_strided", "scalar_tensor", "is_same_size")}
_FUNCTIONS["row_stack"] = _C.vstack
_FUNCTIONS["moveaxis"] = movedim
_FUNCTIONS.update(_FUNCTION_FORMS)

# the Tensor methods PyTorch has among them
_METHODS = ("is_complex", "is_nonzero", "clamp_min", "clamp_max", "ravel", "broadcast_to",
            "movedim", "moveaxis", "nansum", "nanmean", "median", "nanmedian", "aminmax",
            "logit", "deg2rad", "rad2deg", "fmax", "fmin", "heaviside", "trace", "inner",
            "dist", "addmv", "addr", "diag_embed", "hsplit", "vsplit", "dsplit", "swapaxes",
            "swapdims", "arccos", "arcsin", "arctan", "arcsinh", "arccosh",
            "arctanh", "sgn", "mode", "quantile",
            "nanquantile", "cov", "corrcoef", "renorm", "float_power", "isin", "masked_scatter",
            "signbit", "ldexp", "gcd", "lcm", "is_same_size")
_METHOD_ONLY = {"fill_diagonal_": fill_diagonal_, "sum_to_size": sum_to_size,
                "get_device": get_device, "masked_scatter_": masked_scatter_}
for _name in _METHODS:
    if not hasattr(Tensor, _name):
        setattr(Tensor, _name, _FUNCTIONS[_name])
for _name, _method in _METHOD_ONLY.items():
    if not hasattr(Tensor, _name):
        setattr(Tensor, _name, _method)
del _name, _method


def _matrix_transpose(self):
    """x.mT: the last two dims swapped (a view), for matrices and batches of them."""
    if self.dim() < 2:
        raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. "
                           f"Got {self.dim()}-D tensor.")
    return self.transpose(-2, -1)


def _matrix_adjoint(self):
    """x.mH: the conjugate transpose, which is mT for ember's real dtypes."""
    if self.dim() < 2:
        raise RuntimeError(f"tensor.mH is only supported on matrices or batches of matrices. "
                           f"Got {self.dim()}-D tensor.")
    return self.transpose(-2, -1)


def _adjoint_2d(self):
    """x.H: the conjugate transpose of a matrix, its transpose for real dtypes."""
    if self.dim() != 2:
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got "
                           f"{self.dim()}-D tensor.")
    return self.t()


if not hasattr(Tensor, "mT"):
    Tensor.mT = property(_matrix_transpose)
    Tensor.mH = property(_matrix_adjoint)
    Tensor.H = property(_adjoint_2d)


# ---- in-place changes of geometry ---------------------------------------------------

def _inplace_geometry(view_name):
    """x.<view_name>_(...): x itself becomes x.<view_name>(...), the same
    memory seen through the new geometry, as PyTorch's in-place views."""
    view = getattr(Tensor, view_name)

    def method(self, *args, **kwargs):
        tracked = self.requires_grad and _C.is_grad_enabled()
        if tracked:
            check_inplace(self)
            if self._autograd_meta is not None:
                raise RuntimeError(f"{view_name}_(): ember changes the geometry in place only "
                                   f"of a tensor that is not a view of another with "
                                   f"autograd history; use the out-of-place {view_name}()")
        result = view(self, *args, **kwargs)
        self.data = result
        self._bump_version()
        if tracked:
            _set_history(self, result.grad_fn, result.output_nr)
        return self

    method.__name__ = method.__qualname__ = view_name + "_"
    method.__doc__ = f"x.{view_name}_(...) makes x itself x.{view_name}(...)."
    return method


def resize_(self, *sizes, memory_format=None):
    """self reshaped to `sizes`, contiguous from its storage offset; the
    storage grows when too small, keeping its old bytes first.  ember's
    grown storage is new, so other views of the old one keep the old."""
    if self.requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    sizes = list(sizes[0]) if len(sizes) == 1 and not isinstance(sizes[0], int) \
        else list(sizes)
    needed = self.storage_offset() + math.prod(sizes)
    held = self.untyped_storage().nbytes() // self.element_size()
    if needed > held:
        grown = _C.empty(needed, dtype=self.dtype, device=self.device)
        grown[:held].copy_(self.as_strided((held,), (1,), 0))
        source = grown
    else:
        source = self
    strides = [1] * len(sizes)
    for d in range(len(sizes) - 2, -1, -1):
        strides[d] = strides[d + 1] * builtins.max(sizes[d + 1], 1)
    version = self._version
    self.data = source.as_strided(sizes, strides, self.storage_offset())
    self._bump_version(version)
    return self


def resize_as_(self, other, memory_format=None):
    return resize_(self, other.shape)


for _view_name in ("t", "transpose", "squeeze", "unsqueeze", "swapaxes", "swapdims",
                   "as_strided"):
    if not hasattr(Tensor, _view_name + "_"):
        setattr(Tensor, _view_name + "_", _inplace_geometry(_view_name))
for _name, _method in (("resize_", resize_), ("resize_as_", resize_as_)):
    if not hasattr(Tensor, _name):
        setattr(Tensor, _name, _method)
del _view_name, _name, _method

