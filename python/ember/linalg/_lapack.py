"""The bridge from ember.linalg to LAPACK, through numpy.linalg.

Note [LAPACK through NumPy]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
ember writes no factorisation of its own: every decomposition runs in the
LAPACK that NumPy ships (numpy.linalg's gufuncs, batched over leading dims,
float32 kept as float32).  An input goes in as a zero-copy NumPy view of
its memory (`detach().numpy()`, whatever its strides: the gufuncs copy into
LAPACK's column-major layout themselves) and the fresh result comes back
through `ember.from_numpy`, again without a copy.  NumPy releases the GIL
inside LAPACK.

numpy.linalg reports a failure without LAPACK's `info` (which pivot was
zero, which minor was not positive-definite, which batch element), which
PyTorch's messages name.  Only on that error path, `failing_batch_element`
reruns the matrices one by one to find the first that fails, and the
op's own helper below recovers the index PyTorch reports.
"""

import numpy as np

from .. import _C
from ..nn.functional import _type_name

from_numpy = _C.from_numpy


class LinAlgError(RuntimeError):
    """A linear algebra routine failed on its input (PyTorch's
    torch.linalg.LinAlgError, also a RuntimeError)."""


LinAlgError.__module__ = "ember.linalg"


def as_numpy(tensor):
    """A zero-copy NumPy view of `tensor`'s values (any strides)."""
    return tensor.detach().numpy()


def as_tensor(array, dtype):
    """A NumPy result as a tensor of `dtype`, without a copy where possible."""
    array = np.asarray(array, dtype=_NUMPY_DTYPES[dtype], order="C")
    return from_numpy(array)


_NUMPY_DTYPES = {_C.float32: np.float32, _C.float64: np.float64}


# ---- argument checks (PyTorch's messages) -------------------------------------------

def check_floating(name, tensor, what="input", low_precision=False):
    """PyTorch's checkFloatingOrComplex: a floating tensor, 16-bit only
    where `low_precision` allows it (LAPACK takes float32 and float64)."""
    if not tensor.dtype.is_floating_point:
        raise RuntimeError(
            f"{name}: Expected a floating point or complex tensor as {what}. "
            f"Got {_type_name(tensor.dtype)}")
    if not low_precision and tensor.dtype not in _NUMPY_DTYPES:
        raise RuntimeError(
            f"{name}: Low precision dtypes not supported. Got {_type_name(tensor.dtype)}")


def check_matrix(name, tensor, what="A", low_precision=False):
    if tensor.dim() < 2:
        raise RuntimeError(
            f"{name}: The input tensor {what} must have at least 2 dimensions.")
    check_floating(name, tensor, low_precision=low_precision)


def check_norm_dtype(name, input_dtype, dtype):
    """PyTorch's check_linalg_norm_dtype: a norm's dtype= is floating and
    may widen the input's dtype, never narrow it (THTensor_newNorm's test,
    for the norms composed in Python and ember.cuda's)."""
    if dtype is None:
        return
    if not dtype.is_floating_point:
        raise RuntimeError(
            f"{name}: dtype should be floating point or complex, but got {_type_name(dtype)}")
    if _C.promote_types(input_dtype, dtype) != dtype:
        raise RuntimeError(
            f"{name}: the dtype of the input ({_type_name(input_dtype)}) should be "
            f"convertible without narrowing to the specified dtype ({_type_name(dtype)})")


def check_square(name, tensor):
    check_matrix(name, tensor)
    check_square_shape(name, tensor)


def check_square_shape(name, tensor):
    """The shape half of check_square (matrix_power also takes integers)."""
    if tensor.dim() < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    rows, cols = tensor.shape[-2], tensor.shape[-1]
    if rows != cols:
        raise RuntimeError(
            f"{name}: A must be batches of square matrices, "
            f"but they are {rows} by {cols} matrices")


# ---- failures ------------------------------------------------------------------------

def failing_batch_element(function, matrices):
    """(flat batch index, matrix) of the first matrix `function` raises
    numpy.linalg.LinAlgError on."""
    flat = matrices.reshape((-1,) + matrices.shape[-2:])
    for index, matrix in enumerate(flat):
        try:
            function(matrix)
        except np.linalg.LinAlgError:
            return index, matrix
    return 0, flat[0]  # pragma: no cover - the batched call did fail


def batch_prefix(matrices, index):
    return f"(Batch element {index}): " if matrices.ndim > 2 else ""


def first_dependent_column(matrix):
    """The 1-based step at which LU with partial pivoting meets a zero
    pivot: the first k whose leading k columns are linearly dependent
    (elimination of column k leaves it zero below the diagonal exactly
    then).  Read off the diagonal of R in A = QR, which holds each column's
    distance from the span of the ones before it."""
    r = np.abs(np.diagonal(np.linalg.qr(matrix, mode="r")))
    scale = max(float(np.max(np.abs(matrix), initial=0.0)), 1.0)
    tolerance = matrix.shape[-1] * np.finfo(matrix.dtype).eps * scale
    small = np.nonzero(~(r > tolerance))[0]
    return int(small[0]) + 1 if small.size else matrix.shape[-1]


def first_bad_leading_minor(matrix):
    """The order of the first leading minor that is not positive-definite
    (what potrf's info reports), by bisection: a leading block factorises
    only if every smaller one does."""
    low, high = 0, matrix.shape[-1]  # block `low` factorises, `high` does not
    while high - low > 1:
        middle = (low + high) // 2
        try:
            np.linalg.cholesky(matrix[:middle, :middle])
            low = middle
        except np.linalg.LinAlgError:
            high = middle
    return high


def raise_singular_inverse(name, matrices):
    index, matrix = failing_batch_element(np.linalg.inv, matrices)
    raise LinAlgError(
        f"{name}: {batch_prefix(matrices, index)}The diagonal element "
        f"{first_dependent_column(matrix)} is zero, the inversion could not be "
        "completed because the input matrix is singular.")


def raise_not_positive_definite(name, matrices):
    index, matrix = failing_batch_element(np.linalg.cholesky, matrices)
    raise LinAlgError(
        f"{name}: {batch_prefix(matrices, index)}The factorization could not be "
        "completed because the input is not positive-definite (the leading minor "
        f"of order {first_bad_leading_minor(matrix)} is not positive-definite).")


def check_positive_pivots(name, factor):
    """OpenBLAS's potrf lets a NaN pivot through where LAPACK's reference
    check (pivot <= 0 or NaN) stops: the first NaN on the factor's diagonal
    is where PyTorch reports the failing minor."""
    diagonals = np.diagonal(factor, axis1=-2, axis2=-1).reshape(-1, factor.shape[-1])
    bad = np.isnan(diagonals)
    if bad.any():
        index = int(np.argmax(bad.any(axis=-1)))
        raise LinAlgError(
            f"{name}: {batch_prefix(factor, index)}The factorization could not be "
            "completed because the input is not positive-definite (the leading minor "
            f"of order {int(np.argmax(bad[index])) + 1} is not positive-definite).")


def raise_singular_solve(matrices):
    index, _ = failing_batch_element(np.linalg.inv, matrices)
    raise LinAlgError(
        f"torch.linalg.solve: {batch_prefix(matrices, index)}The solver failed "
        "because the input matrix is singular.")


def raise_svd_nonfinite(name, matrices):
    has_nan = np.isnan(matrices).any(axis=(-2, -1)).reshape(-1)
    index = int(np.argmax(has_nan))
    raise LinAlgError(
        f"{name}: {batch_prefix(matrices, index)}The algorithm failed to converge "
        "because the input matrix contained non-finite values.")


def raise_eigh_failed(matrices):
    index, _ = failing_batch_element(lambda m: np.linalg.eigh(m), matrices)
    raise LinAlgError(
        f"linalg.eigh: {batch_prefix(matrices, index)}The algorithm failed to "
        "converge because the input matrix is ill-conditioned or has too many "
        "repeated eigenvalues (error code: 1).")


def quiet():
    """NumPy's floating-point warnings off: NaN and inf in an input give
    NaN and inf in the result, silently, as in PyTorch."""
    return np.errstate(all="ignore")
