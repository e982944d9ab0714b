"""Functions PyTorch itself builds from other operators: closeness tests,
grids, index helpers, differences, products and block matrices.

Each is written over ember's differentiable operators, so autograd
differentiates it through them (no formula of its own).  Their Tensor
methods, where PyTorch has one, are attached at the bottom.
"""

import builtins
import functools
import math

from . import _C
from ._tensor import Tensor

__all__ = ["isclose", "allclose", "equal", "meshgrid", "take_along_dim", "diff", "kron",
           "cdist", "tril_indices", "triu_indices", "flatten", "unflatten", "block_diag",
           "cartesian_prod", "rot90", "vander", "polygamma", "as_tensor"]


def _unpack_tensors(tensors):
    """f(a, b, c) and f([a, b, c]) both give [a, b, c]."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return list(tensors[0])
    return list(tensors)


def _is_floating(dtype):
    return dtype in (_C.float32, _C.float64)


_SCALAR_TYPE_NAMES = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short",
                      "int32": "Int", "int64": "Long", "float32": "Float", "float64": "Double"}


def _scalar_type_name(dtype):
    """PyTorch's name of a dtype in messages ("Float", "Long", ...)."""
    return _SCALAR_TYPE_NAMES[str(dtype).removeprefix("ember.")]


# ---- closeness --------------------------------------------------------------------

def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|input - other| <= atol + rtol * |other|, elementwise; equal values
    (infinities included) are close, NaN only with equal_nan."""
    if input.dtype != other.dtype:
        raise RuntimeError(f"{_scalar_type_name(input.dtype)} did not match "
                           f"{_scalar_type_name(other.dtype)}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol:g}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol:g}")
    equal_values = input == other
    if equal_nan and _is_floating(input.dtype):
        equal_values = equal_values | (input.isnan() & other.isnan())
    if input.dtype == _C.bool:
        return equal_values
    if not _is_floating(input.dtype):
        input = input.to(_C.get_default_dtype())
        other = other.to(input.dtype)
    within = (input - other).abs() <= atol + rtol * other.abs()
    # infinities are close only when equal (inf - inf is NaN, never within)
    return equal_values | (within & input.isfinite() & other.isfinite())


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """isclose everywhere, as a Python bool."""
    return builtins.bool(isclose(input, other, rtol, atol, equal_nan).all().item())


def equal(input, other):
    """True when the tensors have the same shape and the same elements."""
    if not isinstance(other, Tensor):
        raise TypeError(f"equal(): argument 'other' (position 2) must be Tensor, not "
                        f"{type(other).__name__}")
    if input.shape != other.shape:
        return False
    return builtins.bool((input == other).all().item())


# ---- grids and indices ----------------------------------------------------------

def _meshgrid_ij(tensors):
    shape = tuple(t.numel() for t in tensors)
    grids = []
    for i, t in enumerate(tensors):
        view = [1] * len(tensors)
        view[i] = -1
        grids.append(t.reshape(view).expand(shape))
    return grids


def meshgrid(*tensors, indexing=None):
    """Coordinate grids from 0-D or 1-D tensors: 'ij' (matrix, the default)
    or 'xy' (Cartesian: the first two grid dims swapped).  The grids are
    expanded views of the inputs."""
    tensors = _unpack_tensors(tensors)
    if not tensors:
        raise RuntimeError("torch.meshgrid: Expected at least one tensor")
    if indexing is None:
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", "
                           f"but received: {indexing}")
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError("torch.meshgrid: Expected 0D or 1D tensor in the tensor "
                               f"list but got: {t}")
    if indexing == "xy" and len(tensors) >= 2:
        grids = _meshgrid_ij([tensors[1], tensors[0]] + tensors[2:])
        return tuple([grids[1], grids[0]] + grids[2:])
    return tuple(_meshgrid_ij(tensors))


def _triangle_indices(keep, row, col, offset, dtype):
    if row < 0 or col < 0:
        raise RuntimeError(f"row must be non-negative, got{row}" if row < 0
                           else f"col must be non-negative, got{col}")
    mask = getattr(_C.ones((row, col)), keep)(offset) != 0
    return mask.nonzero().t().to(dtype)


def tril_indices(row, col, offset=0, *, dtype=None):
    """The (row, column) indices of the lower triangle of a row x col
    matrix (on and below diagonal `offset`), row-major: a 2 x N tensor."""
    return _triangle_indices("tril", row, col, offset, dtype or _C.int64)


def triu_indices(row, col, offset=0, *, dtype=None):
    """The same for the upper triangle."""
    return _triangle_indices("triu", row, col, offset, dtype or _C.int64)


def take_along_dim(input, indices, dim=None):
    """input's elements at `indices` along dim (gather after broadcasting
    the other dims); with no dim, of the flattened tensors."""
    if not _C.int64 == indices.dtype:
        raise RuntimeError("torch.take_along_dim(): dtype of indices should be Long but "
                           f"got {_scalar_type_name(indices.dtype)}")
    if dim is None:
        return input.reshape(-1).gather(0, indices.reshape(-1))
    if input.ndim != indices.ndim:
        raise RuntimeError("torch.take_along_dim(): input and indices should have the same "
                           f"number of dimensions, but got {input.ndim} dimensions for input, "
                           f"and {indices.ndim} dimensions for indices")
    dim = dim % max(input.ndim, 1)
    shape = list(input.shape)
    index_shape = list(indices.shape)
    shape[dim] = index_shape[dim] = 1
    common = _broadcast_shapes(shape, index_shape)
    input_shape, index_shape = list(common), list(common)
    input_shape[dim] = input.shape[dim]
    index_shape[dim] = indices.shape[dim]
    return input.expand(input_shape).gather(dim, indices.expand(index_shape))


def _broadcast_shapes(a, b):
    ndim = max(len(a), len(b))
    a = [1] * (ndim - len(a)) + list(a)
    b = [1] * (ndim - len(b)) + list(b)
    for d in reversed(range(ndim)):  # PyTorch names the innermost mismatch
        if a[d] != b[d] and 1 not in (a[d], b[d]):
            raise RuntimeError(f"The size of tensor a ({a[d]}) must match the size of tensor b "
                               f"({b[d]}) at non-singleton dimension {d}")
    return [y if x == 1 else x for x, y in zip(a, b)]


# ---- differences and products ---------------------------------------------------

def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along dim (logical_xor for bool), after
    prepending / appending the given tensors."""
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    dim = dim % input.ndim
    parts = [t for t in (prepend, input, append) if t is not None]
    if len(parts) > 1:
        # a 0-dim tensor stands for one slice of its value
        one_slice = tuple(input.shape[:dim]) + (1,) + tuple(input.shape[dim + 1:])
        input = _C.cat([t.expand(one_slice) if t.ndim == 0 else t for t in parts], dim)
    for _ in range(n):
        length = input.shape[dim]
        if length == 0:
            break
        later, earlier = input.narrow(dim, 1, length - 1), input.narrow(dim, 0, length - 1)
        input = later.logical_xor(earlier) if input.dtype == _C.bool else later - earlier
    return input


def kron(input, other):
    """The Kronecker product: block (i, j, ...) is input[i, j, ...] * other."""
    ndim = max(input.ndim, other.ndim)
    a_shape = (1,) * (ndim - input.ndim) + tuple(input.shape)
    b_shape = (1,) * (ndim - other.ndim) + tuple(other.shape)
    # a as (a0, 1, a1, 1, ...), b as (1, b0, 1, b1, ...): their product
    # holds every a[i] * b[j] at (i, j), read row-major as (i * b + j)
    a = input.reshape([s for d in a_shape for s in (d, 1)])
    b = other.reshape([s for d in b_shape for s in (1, d)])
    return (a * b).reshape([x * y for x, y in zip(a_shape, b_shape)])


_CDIST_MODES = (None, "use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                "donot_use_mm_for_euclid_dist")


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distance between each row of x1 (..., P, M) and each row
    of x2 (..., R, M): (..., P, R).  compute_mode is accepted for
    PyTorch's signature; the distances are always computed directly."""
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    if x1.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D")
    if x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X2 got: {x2.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError("X1 and X2 must have the same number of columns. "
                           f"X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    if not _is_floating(x1.dtype) or not _is_floating(x2.dtype):
        raise RuntimeError("cdist only supports floating-point dtypes, X1 got: "
                           f"{_scalar_type_name(x1.dtype)}")
    gaps = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).abs()
    if p == 0:
        return (gaps != 0).to(gaps.dtype).sum(-1)
    if math.isinf(p):
        return gaps.amax(-1)
    total = gaps.square().sum(-1) if p == 2 else gaps.pow(p).sum(-1)
    # total ** (1/p) has an infinite slope at 0: the gradient of a zero
    # distance is taken as 0 (PyTorch's), through the where
    zero = total == 0
    root = total.where(~zero, 1.0)
    root = root.sqrt() if p == 2 else root.pow(1.0 / p)
    return root.where(~zero, 0.0)


# ---- shapes -----------------------------------------------------------------------

def flatten(input, start_dim=0, end_dim=-1):
    """input with dims start_dim..end_dim merged into one."""
    return input.flatten(start_dim, end_dim)


def unflatten(input, dim, sizes):
    """input with dim split into `sizes` (one of them may be -1)."""
    sizes = tuple(sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    dim = dim % max(input.ndim, 1)
    known = math.prod(s for s in sizes if s != -1)
    if -1 not in sizes and known != input.shape[dim]:
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to "
                           f"the size of dim {dim} ({input.shape[dim]}) in the input tensor")
    return input.reshape(input.shape[:dim] + sizes + input.shape[dim + 1:])


def block_diag(*tensors):
    """The tensors (0-, 1- or 2-D) as the diagonal blocks of one matrix."""
    blocks = []
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise RuntimeError("torch.block_diag: Input tensors must have 2 or fewer "
                               f"dimensions. Input {i} has {t.ndim} dimensions")
        blocks.append(t.reshape(1, -1) if t.ndim < 2 else t)
    if not blocks:
        return _C.empty((1, 0))
    dtype = functools.reduce(_C.promote_types, [b.dtype for b in blocks])
    width = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        height, cols = b.shape
        rows.append(_C.cat([_C.zeros((height, left), dtype=dtype), b.to(dtype),
                            _C.zeros((height, width - left - cols), dtype=dtype)], 1))
        left += cols
    return _C.cat(rows, 0)


def cartesian_prod(*tensors):
    """Every combination of one element from each 1-D tensor, one per row
    (itertools.product order)."""
    for t in tensors:
        if t.ndim != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    dtype = functools.reduce(_C.promote_types, [t.dtype for t in tensors])
    grids = meshgrid(*[t.to(dtype) for t in tensors], indexing="ij")
    return _C.stack([g.reshape(-1) for g in grids], 1)


def rot90(input, k=1, dims=(0, 1)):
    """input rotated by 90 degrees k times, from dims[0] towards dims[1]."""
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = dims[0] % input.ndim, dims[1] % input.ndim
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} "
                           f"and dim1 = {d1}")
    k %= 4
    if k == 1:
        return input.flip([d1]).transpose(d0, d1)
    if k == 2:
        return input.flip([d0, d1])
    if k == 3:
        return input.flip([d0]).transpose(d0, d1)
    return input.clone()


# B_2k / (2k)!: the coefficients of the asymptotic series of polygamma.
_BERNOULLI_OVER_FACTORIAL = [1 / 12, -1 / 720, 1 / 30240, -1 / 1209600, 1 / 47900160,
                             -691 / 1307674368000, 1 / 74724249600,
                             -3617 / 10670622842880000]


def polygamma(n, input, *, out=None):
    """The n-th derivative of digamma (n = 0 is digamma itself).

    For n >= 1: psi_n(x) = psi_n(x + K) + (-1)^(n+1) n! sum_{k<K} 1/(x+k)^(n+1),
    with K steps taking every x past 10 + n, where the asymptotic series
      (-1)^(n+1) [(n-1)!/z^n + n!/(2 z^(n+1)) + sum_k B_2k (2k+n-1)!/((2k)! z^(2k+n))]
    is accurate to double precision.  Written over differentiable operators,
    so psi_n's derivative (psi_{n+1}) comes from autograd.  The shift costs
    one pass per unit the smallest finite input lies below 10 + n (a few for
    positive inputs; a large negative input makes it slow, not wrong)."""
    if out is not None:
        raise TypeError("polygamma(): out= is not supported")
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"polygamma(): argument 'n' (position 1) must be int, "
                        f"not {type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    x = input if _is_floating(input.dtype) else input.to(_C.get_default_dtype())
    if n == 0:
        return x.digamma()
    sign = 1.0 if n % 2 else -1.0          # (-1)^(n+1)
    threshold = 10.0 + n
    finite = x[x.isfinite()]
    lowest = finite.min().item() if finite.numel() else threshold
    steps = builtins.max(0, math.ceil(threshold - lowest))
    total = _C.zeros_like(x)
    z = x
    for _ in range(steps):
        shifted = z < threshold
        total = total + _C.where(shifted, z.pow(-(n + 1)), 0.0)
        z = _C.where(shifted, z + 1, z)
    series = math.factorial(n - 1) * z.pow(-n) + math.factorial(n) / 2 * z.pow(-(n + 1))
    for k, coefficient in enumerate(_BERNOULLI_OVER_FACTORIAL, start=1):
        series = series + coefficient * math.factorial(2 * k + n - 1) * z.pow(-(2 * k + n))
    return sign * (math.factorial(n) * total + series)


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of a 1-D x: columns x^(N-1), ..., x^0 (or
    x^0, ..., x^(N-1) when increasing), built by a running product."""
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    if N is None:
        N = x.shape[0]
    if N < 0:
        raise RuntimeError("N must be non-negative.")
    dtype = x.dtype if _is_floating(x.dtype) else _C.int64
    x = x.to(dtype)
    columns = [_C.ones((x.shape[0], min(N, 1)), dtype=dtype)]
    if N > 1:
        columns.append(x.unsqueeze(1).expand((x.shape[0], N - 1)).cumprod(1))
    result = _C.cat(columns, 1)
    return result if increasing else result.flip([1])


def as_tensor(data, dtype=None, device=None):
    """torch.as_tensor: shares memory where it can.  A tensor comes back
    itself (through .to() when dtype or device differ), a NumPy array's
    memory (ember.from_numpy) and a CUDA array's (its
    __cuda_array_interface__: CuPy, Numba) are shared when dtype and device
    already match; anything else (lists, numbers) is copied by ember.tensor."""
    if not isinstance(data, Tensor):
        if hasattr(data, "__cuda_array_interface__"):
            from .cuda._interop import from_cuda_array_interface
            data = from_cuda_array_interface(data)
        elif type(data).__module__ == "numpy" and type(data).__name__ == "ndarray":
            data = _C.from_numpy(data)
        else:
            return _C.tensor(data, dtype=dtype, device=device)
    conversion = {key: value for key, value in (("dtype", dtype), ("device", device))
                  if value is not None}
    return data.to(**conversion) if conversion else data


# ---- the Tensor methods PyTorch has for these ---------------------------------------

for _name in ["isclose", "allclose", "equal", "take_along_dim", "diff", "kron", "unflatten",
              "rot90"]:
    setattr(Tensor, _name, globals()[_name])
del _name


def _polygamma_method(self, n):
    """Tensor.polygamma(n): note the order, n first for the function."""
    return polygamma(n, self)


Tensor.polygamma = _polygamma_method
