"""ember.linalg: PyTorch's torch.linalg for real float32/float64 tensors.

Every factorisation runs in LAPACK through numpy.linalg (Note [LAPACK
through NumPy] in _lapack.py), batched over the leading dims; each records
PyTorch's derivative (Note [Decomposition gradients] in _backward.py).
Norms, cross, matrix_power and matrix_rank are compositions of
differentiable ember operators; the norms (all but the singular-value ones)
also take float16 and bfloat16, as PyTorch's.

Not here: complex dtypes, the `out=` arguments, the `*_ex` variants,
`eig`/`eigvals` (non-symmetric), `lu*`, `solve_triangular`.  `lstsq` runs
LAPACK's gelsd for every `driver` (the drivers agree on full-rank inputs;
only which outputs are filled follows `driver`, as in PyTorch).
"""

import collections
import math
import sys
import warnings

import numpy as np

import ember

from . import _backward as _bw
from ._backward import attach
from ._lapack import (LinAlgError, _type_name, as_numpy, as_tensor, check_floating, check_matrix,
                      check_norm_dtype, check_square, check_square_shape, quiet, raise_eigh_failed, raise_not_positive_definite,
                      check_positive_pivots, raise_singular_inverse, raise_singular_solve, raise_svd_nonfinite)

__all__ = ["LinAlgError", "norm", "vector_norm", "matrix_norm", "inv", "det", "slogdet",
           "solve", "cholesky", "qr", "eigh", "eigvalsh", "svd", "svdvals", "lstsq", "pinv",
           "matrix_rank", "cross", "matrix_power"]


# ---- named results (ember.return_types) ---------------------------------------------

def _result_type(name, fields):
    """A named tuple shown as ember.return_types.<name>(field=..., ...), the
    Python-made sibling of the struct sequences of c/python/ReturnTypes.c."""
    base = collections.namedtuple(name, fields)

    def __repr__(self):
        shown = ", ".join(f"{f}={v!r}" for f, v in zip(fields, self))
        return f"ember.return_types.{name}({shown})"

    cls = type(name, (base,), {"__slots__": (), "__repr__": __repr__,
                               "__module__": "ember.return_types"})
    setattr(sys.modules["ember.return_types"], name, cls)
    return cls


_Slogdet = _result_type("linalg_slogdet", ("sign", "logabsdet"))
_Eigh = _result_type("linalg_eigh", ("eigenvalues", "eigenvectors"))
_Qr = _result_type("linalg_qr", ("Q", "R"))
_Svd = _result_type("linalg_svd", ("U", "S", "Vh"))
_Lstsq = _result_type("linalg_lstsq", ("solution", "residuals", "rank", "singular_values"))
_SlogdetTop = _result_type("slogdet", ("sign", "logabsdet"))


# ---- inverse, determinants, solve ----------------------------------------------------

def inv(A):
    """The inverse of each square matrix of A."""
    check_square("linalg.inv", A)
    a = as_numpy(A)
    try:
        with quiet():
            result = as_tensor(np.linalg.inv(a), A.dtype)
    except np.linalg.LinAlgError:
        raise_singular_inverse("linalg.inv", a)
    attach(_bw.LinalgInvExBackward0, (A,), (result,), (("out", 0),))
    return result


def det(A):
    check_square("linalg.det", A)
    with quiet():
        result = as_tensor(np.linalg.det(as_numpy(A)), A.dtype)
    attach(_bw.LinalgDetBackward0, (A,), (result,), (A, ("out", 0)))
    return result


def slogdet(A):
    """(sign, log|det A|): sign is 0 and logabsdet -inf for a singular A."""
    check_square("linalg.slogdet", A)
    with quiet():
        sign, logabsdet = np.linalg.slogdet(as_numpy(A))
    sign, logabsdet = as_tensor(sign, A.dtype), as_tensor(logabsdet, A.dtype)
    attach(_bw.LinalgSlogdetBackward0, (A,), (None, logabsdet), (A,))
    return _Slogdet(sign, logabsdet)


def _is_vector_rhs(A, B):
    """PyTorch's rule: B is a (batch of) vector(s) when it is 1-D or has
    exactly A's batch shape plus one dim."""
    return B.dim() == 1 or (B.dim() == A.dim() - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def solve(A, B, *, left=True):
    """X with AX = B (left=True) or XA = B."""
    check_square("linalg.solve", A)
    check_floating("linalg.solve", B)
    if A.dtype != B.dtype:
        raise RuntimeError(
            "linalg.solve: Expected A and B to have the same dtype, but found A of type "
            f"{_type(A)} and B of type {_type(B)} instead")
    vector = _is_vector_rhs(A, B)
    a, b = as_numpy(A), as_numpy(B)
    if vector:
        b = b[..., None]
    if not left:
        a, b = np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2)
    if b.shape[-2] != a.shape[-1]:
        rows, cols = (b.shape[-2], b.shape[-1]) if left else (b.shape[-1], b.shape[-2])
        raise RuntimeError(
            "linalg.solve: Incompatible shapes of A and B for the equation "
            f"{'AX = B' if left else 'XA = B'} ({a.shape[-2]}x{a.shape[-1]} and {rows}x{cols})")
    try:
        with quiet():
            x = np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise_singular_solve(a)
    if not left:
        x = np.swapaxes(x, -1, -2)
    result = as_tensor(x[..., 0] if vector else x, A.dtype)
    attach(_bw.LinalgSolveExBackward0, (A, B), (result,), (A, ("out", 0)),
           vector=vector, left=left, a_shape=tuple(A.shape), b_shape=tuple(B.shape))
    return result


def _type(tensor):
    return _type_name(tensor.dtype)


# ---- cholesky, qr, eigh, svd ---------------------------------------------------------

def cholesky(A, *, upper=False):
    """L with A = L L^T (or U with A = U^T U), from A's lower triangle."""
    check_square("linalg.cholesky", A)
    a = as_numpy(A)
    try:
        with quiet():
            factor = np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        raise_not_positive_definite("linalg.cholesky", a)
    check_positive_pivots("linalg.cholesky", factor)
    result = as_tensor(np.swapaxes(factor, -1, -2) if upper else factor, A.dtype)
    attach(_bw.LinalgCholeskyExBackward0, (A,), (result,), (("out", 0),), upper=upper)
    return result


def qr(A, mode="reduced"):
    if mode not in ("reduced", "r", "complete"):
        raise RuntimeError(
            f"qr received unrecognized mode '{mode}' but expected one of 'reduced' "
            "(default), 'r', or 'complete'")
    check_matrix("linalg.qr", A)
    with quiet():
        if mode == "r":
            q, r = np.empty((0,), dtype=as_numpy(A).dtype), np.linalg.qr(as_numpy(A), mode="r")
        else:
            q, r = np.linalg.qr(as_numpy(A), mode=mode)
    q, r = as_tensor(q, A.dtype), as_tensor(r, A.dtype)
    attach(_bw.LinalgQrBackward0, (A,), (q, r), (A, ("out", 0), ("out", 1)), mode=mode)
    return _Qr(q, r)


def _check_uplo(UPLO):
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")


def _eigh_arrays(A, UPLO):
    a = as_numpy(A)
    try:
        with quiet():
            return np.linalg.eigh(a, UPLO=UPLO)
    except np.linalg.LinAlgError:
        raise_eigh_failed(a)


def eigh(A, UPLO="L"):
    """Eigenvalues (ascending) and eigenvectors of symmetric matrices, from
    the triangle UPLO names."""
    _check_uplo(UPLO)
    check_square("linalg.eigh", A)
    values, vectors = _eigh_arrays(A, UPLO)
    values, vectors = as_tensor(values, A.dtype), as_tensor(vectors, A.dtype)
    attach(_bw.LinalgEighBackward0, (A,), (values, vectors), (("out", 0), ("out", 1)))
    return _Eigh(values, vectors)


def eigvalsh(A, UPLO="L"):
    """The eigenvalues alone; when recording, eigh's (its backward needs
    the eigenvectors, with their history for double backward)."""
    _check_uplo(UPLO)
    check_square("linalg.eigvalsh", A)
    if _recording(A):
        return eigh(A, UPLO).eigenvalues
    with quiet():
        return as_tensor(np.linalg.eigvalsh(as_numpy(A), UPLO=UPLO), A.dtype)


def _recording(*tensors):
    return ember.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _svd_arrays(name, A, full_matrices, compute_uv=True):
    """numpy.linalg.svd, with PyTorch's answer to what LAPACK cannot take:
    an error for NaN, NaN singular values (and vectors) for infinities."""
    a = as_numpy(A)
    finite = np.isfinite(a).all(axis=(-2, -1))
    if not finite.all():
        if np.isnan(a).any():
            raise_svd_nonfinite(name, a)
        a = np.where(finite[..., None, None], a, 0)
    with quiet():
        if compute_uv:
            results = np.linalg.svd(a, full_matrices=full_matrices)
        else:
            results = (np.linalg.svd(a, compute_uv=False),)
    results = tuple(np.where(finite.reshape(finite.shape + (1,) * (r.ndim - finite.ndim)), r, np.nan)
                    for r in results)
    return results if compute_uv else results[0]


def svd(A, full_matrices=True, *, driver=None):
    """U, S, Vh with A = U diag(S) Vh, S descending."""
    check_matrix("linalg.svd", A)
    u, s, vh = _svd_arrays("linalg.svd", A, full_matrices)
    u, s, vh = (as_tensor(x, A.dtype) for x in (u, s, vh))
    attach(_bw.LinalgSvdBackward0, (A,), (u, s, vh), (("out", 0), ("out", 1), ("out", 2)))
    return _Svd(u, s, vh)


def svdvals(A, *, driver=None):
    """The singular values alone; when recording, svd's (as eigvalsh)."""
    check_matrix("linalg.svd", A)
    if _recording(A):
        return svd(A, full_matrices=False).S
    return as_tensor(_svd_arrays("linalg.svd", A, False, compute_uv=False), A.dtype)


# ---- pinv, matrix_rank, lstsq --------------------------------------------------------

def _tolerances(A, atol, rtol):
    """PyTorch's defaults: rtol = eps * max(m, n) unless atol > 0 is given."""
    atol = 0.0 if atol is None else atol
    if rtol is None:
        given = atol if not isinstance(atol, ember.Tensor) else float(atol.max())
        rtol = 0.0 if given > 0 else np.finfo(as_numpy(A).dtype).eps * max(A.shape[-2:])
    return atol, rtol


def _cutoff(largest, atol, rtol):
    """max(atol, rtol * largest), with tensor tolerances broadcast over the batch."""
    def as_array(x):
        return as_numpy(x) if isinstance(x, ember.Tensor) else x
    return np.maximum(as_array(atol), as_array(rtol) * largest)


def _pinv_array(A, atol, rtol, hermitian):
    """V diag(1/s) U^T over the singular values above the cutoff (for
    hermitian A: the eigendecomposition, with |eigenvalues|)."""
    if hermitian:
        values, vectors = _eigh_arrays(A, "L")
        left, right, s = vectors, np.swapaxes(vectors, -1, -2), values
    else:
        left, s, right = _svd_arrays("linalg.svd", A, False)
    magnitude = np.abs(s)
    largest = magnitude.max(axis=-1, initial=0.0, keepdims=True)
    with quiet():
        kept = magnitude > _cutoff(largest, atol, rtol)
        inverse = np.where(kept, 1 / np.where(kept, s, 1), 0)
        return (np.swapaxes(right, -1, -2) * inverse[..., None, :]) @ np.swapaxes(left, -1, -2)


def pinv(A, rcond=None, hermitian=False, *, atol=None, rtol=None):
    """The Moore-Penrose pseudo-inverse: singular values at or below
    max(atol, rtol * largest) count as zero (a positional `rcond` is rtol,
    PyTorch's older form)."""
    if rcond is not None:
        rtol = rcond
    check_matrix("linalg.pinv", A)
    atol, rtol = _tolerances(A, atol, rtol)
    result = as_tensor(_pinv_array(A, atol, rtol, hermitian), A.dtype)
    attach(_bw.LinalgPinvBackward0, (A,), (result,), (A, ("out", 0)))
    return result


def matrix_rank(A, tol=None, hermitian=False, *, atol=None, rtol=None):
    """The number of singular values above max(atol, rtol * largest)
    (a positional `tol` is atol with rtol = 0, PyTorch's older form)."""
    if tol is not None:
        atol, rtol = tol, 0.0
    check_matrix("linalg.matrix_rank", A)
    atol, rtol = _tolerances(A, atol, rtol)
    a = as_numpy(A)
    with quiet():
        if hermitian:
            s = np.abs(np.linalg.eigvalsh(a))
        else:
            s = _svd_arrays("linalg.svd", A, False, compute_uv=False)
    largest = s.max(axis=-1, initial=0.0, keepdims=True)
    rank = (s > _cutoff(largest, atol, rtol)).sum(axis=-1)
    return ember.from_numpy(np.asarray(rank, dtype=np.int64))


_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _check_lstsq(A, B, driver):
    check_matrix("torch.linalg.lstsq", A, "input")
    for t in (A, B):
        check_floating("torch.linalg.lstsq", t)
    if A.dtype != B.dtype:
        raise RuntimeError(
            "torch.linalg.lstsq: Expected input and other to have the same dtype, but got "
            f"input's dtype {_type(A)} and other's dtype {_type(B)}")
    if driver is not None and driver not in _DRIVERS:
        raise RuntimeError(
            "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    vector = B.dim() == A.dim() - 1
    rows = B.shape[-1] if vector else B.shape[-2]
    if rows != A.shape[-2]:
        raise RuntimeError(
            "torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    return vector


def lstsq(A, B, rcond=None, *, driver=None):
    """The least-squares solution of AX = B, and per driver: the squared
    residuals (m > n, full rank, not gelsy), the rank (not gels), the
    singular values (gelsd, gelss)."""
    vector = _check_lstsq(A, B, driver)
    driver = driver or "gelsy"
    a, b = as_numpy(A), as_numpy(B)
    if vector:
        b = b[..., None]
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    m, n, k = a.shape[-2], a.shape[-1], b.shape[-1]
    rcond = rcond if rcond is not None else np.finfo(a.dtype).eps * max(m, n)
    solution = np.empty(batch + (n, k), a.dtype)
    ranks = np.empty(batch, np.int64)
    singular = np.empty(batch + (min(m, n),), a.dtype)
    with quiet():
        for index in np.ndindex(*batch):
            try:
                x, _, rank, s = np.linalg.lstsq(a[index], b[index], rcond=rcond)
            except np.linalg.LinAlgError as error:
                raise LinAlgError(f"torch.linalg.lstsq: {error}") from None
            solution[index], ranks[index], singular[index] = x, rank, s
        full_rank = bool((ranks == n).all())
        if m > n and driver != "gelsy" and (full_rank or driver == "gels"):
            residuals = ((a @ solution - b) ** 2).sum(axis=-2)
        else:
            residuals = np.empty((0,), a.dtype)
    solution = as_tensor(solution[..., 0] if vector else solution, A.dtype)
    residuals = as_tensor(residuals, A.dtype)
    rank = ember.from_numpy(ranks if driver != "gels" else np.empty((0,), np.int64))
    singular = as_tensor(singular if driver in ("gelsd", "gelss") else np.empty((0,), a.dtype),
                         A.dtype)
    attach(_bw.LinalgLstsqBackward0, (A, B),
           (solution, residuals if residuals.numel() else None, None, None),
           (A, B, ("out", 0)), vector=vector, a_shape=tuple(A.shape), b_shape=tuple(B.shape))
    return _Lstsq(solution, residuals, rank, singular)


# ---- norms ---------------------------------------------------------------------------

def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    if isinstance(ord, str):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' must be Number, not str")
    if isinstance(dim, list):
        dim = tuple(dim)
    if dim is None and keepdim:
        dim = tuple(range(x.dim()))
    return ember.norm(x, ord, dim, keepdim, dtype=dtype)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    if ord not in _MATRIX_NORM_ORDERS:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    # 16-bit inputs: not for the singular values, which LAPACK computes
    check_matrix("linalg.matrix_norm", A, low_precision=ord not in ("nuc", 2, -2))
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {_dims(dim)}")
    check_norm_dtype("linalg.matrix_norm", A.dtype, dtype)
    if dtype is not None:
        A = A.to(dtype)
    rows, cols = (d % A.dim() for d in dim)
    if ord == "fro":
        return vector_norm(A, 2, (rows, cols), keepdim)
    if ord in ("nuc", 2, -2):
        moved = A.permute([d for d in range(A.dim()) if d not in (rows, cols)] + [rows, cols])
        s = svdvals(moved)
        result = s.sum(-1) if ord == "nuc" else (s.amax(-1) if ord == 2 else s.amin(-1))
        if keepdim:
            for d in sorted((rows, cols)):
                result = result.unsqueeze(d)
        return result
    if ord in (1, -1, math.inf, -math.inf):
        summed, extreme = (rows, cols) if abs(ord) == 1 else (cols, rows)
        sums = A.abs().sum(summed, keepdim=True)
        result = sums.amax(extreme, keepdim=True) if ord > 0 else sums.amin(extreme, keepdim=True)
        return result if keepdim else result.squeeze(max(rows, cols)).squeeze(min(rows, cols))


_MATRIX_NORM_ORDERS = ("fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf)


def _dims(dim):
    return list(dim) if isinstance(dim, (tuple, list)) else dim


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """A vector norm (dim an int, or None with 1-D A or ord None) or a
    matrix norm (dim a 2-tuple or ord a string, or None with 2-D A and ord
    given)."""
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) == 2 or isinstance(ord, str):
            return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
        return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.dim() not in (1, 2):
        raise RuntimeError(
            "linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. "
            f"Got {A.dim()}D.")
    if A.dim() == 1 and not isinstance(ord, str):
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)


# ---- cross, matrix_power -------------------------------------------------------------

def cross(input, other, *, dim=-1):
    """The cross product of 3-vectors along `dim`, broadcasting the rest."""
    if input.dim() != other.dim():
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if input.shape[dim] != 3 or other.shape[dim] != 3:
        raise RuntimeError(
            f"linalg.cross: inputs dimension {dim} must have length 3. "
            f"Got {input.shape[dim]} and {other.shape[dim]}")
    shape = np.broadcast_shapes(tuple(input.shape), tuple(other.shape))
    a, b = input.expand(*shape), other.expand(*shape)

    def part(t, i):
        return t.narrow(dim, i, 1)

    return ember.cat([part(a, 1) * part(b, 2) - part(a, 2) * part(b, 1),
                      part(a, 2) * part(b, 0) - part(a, 0) * part(b, 2),
                      part(a, 0) * part(b, 1) - part(a, 1) * part(b, 0)], dim)


def matrix_power(A, n):
    """A^n by repeated squaring (n < 0: of A's inverse)."""
    check_square_shape("linalg.matrix_power", A)
    if n < 0:
        A, n = inv(A), -n
    if n == 0:
        return ember.eye(A.shape[-1], dtype=A.dtype).expand(*A.shape).clone()
    result = None
    power = A
    while n:
        if n & 1:
            result = power if result is None else result.matmul(power)
        n >>= 1
        if n:
            power = power.matmul(power)
    return result


# ---- the top-level aliases (ember.det, Tensor.inverse, ...) --------------------------

def logdet(input):
    """log det(input): NaN where the determinant is negative."""
    sign, logabsdet = slogdet(input)
    return ember.where(sign < 0, ember.full_like(logabsdet, math.nan), logabsdet)


def _slogdet_top(input):
    return _SlogdetTop(*slogdet(input))


def _cross_top(input, other, dim=None):
    """torch.cross: without dim, the first dim of size 3 (deprecated there)."""
    if dim is None:
        warnings.warn(
            "Using torch.cross without specifying the dim arg is deprecated.\n"
            "Please either pass the dim explicitly or simply use torch.linalg.cross.\n"
            "The default value of dim will change to agree with that of linalg.cross "
            "in a future release.", UserWarning, stacklevel=2)
        shape = np.broadcast_shapes(tuple(input.shape), tuple(other.shape))
        dim = next((i for i, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    return cross(input, other, dim=dim)


def pinverse(input, rcond=1e-15):
    return pinv(input, rtol=rcond)


TOP_LEVEL = {"det": det, "inverse": inv, "logdet": logdet, "slogdet": _slogdet_top,
             "pinverse": pinverse, "matrix_power": matrix_power, "cross": _cross_top}
