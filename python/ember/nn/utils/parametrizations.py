"""Parametrizations built on nn.utils.parametrize (PyTorch's
torch.nn.utils.parametrizations): weight_norm, spectral_norm, orthogonal.

orthogonal supports all three of PyTorch's maps, composed from ember's
operators: "matrix_exp" (scaling and squaring of a Taylor series, see
_matrix_exp), "cayley" (a linear solve) and "householder" (a product of
reflections, see _householder_product).  The QR factorisations they need
at registration (no gradient) come from LAPACK through NumPy, as PyTorch's
geqrf / householder_product do on the CPU.
"""

import math
from enum import Enum, auto

import numpy as np

import ember
import ember.nn.functional as F

from ..modules.module import Module
from . import parametrize
from .weight_norm import _weight_norm, norm_except_dim

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


# ---- orthogonal -------------------------------------------------------------

def _matrix_exp(A):
    """exp(A) for a square matrix (or a batch), differentiable by autograd.

    Note [Scaling and squaring]: exp(A) = exp(A / 2^s)^(2^s).  s is chosen
    (without gradient, from the largest 1-norm in the batch) so that
    ||A / 2^s||_1 <= 1/2; there the Taylor series of degree 18, summed by
    Horner's rule, is exact to far below float64's rounding (the remainder
    is < (1/2)^19 / 19!).  Then s squarings undo the scaling."""
    n = A.size(-1)
    with ember.no_grad():
        norm = A.abs().sum(-2).amax().item() if A.numel() else 0.0
    squarings = max(0, math.ceil(math.log2(norm / 0.5))) if norm > 0.5 else 0
    scaled = A / (2.0 ** squarings)
    identity = ember.eye(n, dtype=A.dtype, device=A.device)
    result = identity + scaled / 18
    for k in range(17, 0, -1):
        result = identity + (scaled @ result) / k
    for _ in range(squarings):
        result = result @ result
    return result


def _householder_product(A, tau):
    """LAPACK's orgqr: the first k columns of H_1 H_2 ... H_k, where H_i =
    I - tau_i v_i v_i^T and v_i is column i of A below the diagonal with a
    1 on it (torch.linalg.householder_product, real case), differentiable
    by autograd.  The reflections are applied right to left to I[:, :k]."""
    n, k = A.size(-2), A.size(-1)
    batch = tuple(A.shape[:-2])
    Q = ember.eye(n, k, dtype=A.dtype, device=A.device).expand(*batch, n, k)
    for i in reversed(range(tau.size(-1))):
        head = ember.cat([A.new_zeros(*batch, i), A.new_ones(*batch, 1)], dim=-1)
        v = ember.cat([head, A[..., i + 1:, i]], dim=-1).unsqueeze(-1)   # (..., n, 1)
        Q = Q - tau[..., i].unsqueeze(-1).unsqueeze(-1) * (v @ (v.mT @ Q))
    return Q


def _geqrf(A):
    """torch.geqrf (real, no gradient): R on and above the diagonal of the
    result, the Householder vectors below it, and tau; per matrix of the
    batch, from LAPACK through NumPy's qr(mode="raw")."""
    array = A.detach().numpy()
    batch = array.shape[:-2]
    flat = array.reshape((-1,) + array.shape[-2:])
    packed, taus = [], []
    for matrix in flat:
        h, tau = np.linalg.qr(matrix, mode="raw")
        packed.append(h.T)
        taus.append(tau)
    packed = np.stack(packed).reshape(array.shape) if flat.shape[0] else array.copy()
    taus = np.stack(taus).reshape(batch + (min(array.shape[-2:]),)) if flat.shape[0] else \
        np.zeros(batch + (min(array.shape[-2:]),), array.dtype)
    return ember.tensor(packed, dtype=A.dtype), ember.tensor(taus, dtype=A.dtype)


def _is_orthogonal(Q):
    k = Q.size(-1)
    identity = ember.eye(k, dtype=Q.dtype, device=Q.device)
    eps = 10.0 * Q.size(-2) * ember.finfo(Q.dtype).eps
    return ember.allclose(Q.mT @ Q, identity, atol=eps)


def _make_orthogonal(A):
    """The Q of A's QR factorisation, its columns' signs flipped so that R
    has a non-negative diagonal (a function of A alone)."""
    X, tau = _geqrf(A)
    Q = _householder_product(X, tau)
    return Q * X.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


class _Orthogonal(Module):
    """Maps an unconstrained matrix to an orthogonal one (or one with
    orthonormal columns or rows).

    Note [Trivialization]: with use_trivialization (the default), the map
    is Q = base @ map(X), where the buffer `base` is set by right_inverse
    to the orthogonal matrix being assigned and X to the point that maps
    to the identity; the optimiser then moves X near that point."""

    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        if weight.is_complex() and orthogonal_map == _OrthMaps.householder:
            raise ValueError("The householder parametrization does not support complex tensors.")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        n, k = X.size(-2), X.size(-1)
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            X = X.tril()
            if n != k:
                X = ember.cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], dim=-1)
            A = X - X.mT   # skew-symmetric
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = _matrix_exp(A)
            else:
                identity = ember.eye(n, dtype=A.dtype, device=A.device)
                Q = ember.linalg.solve(identity - 0.5 * A, identity + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = _householder_product(A, tau)
            # The diagonal of X (an integer in {-1, 1} at the trivialization
            # point) flips the signs of the columns, as PyTorch's does.
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if hasattr(self, "base"):
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q):
        with ember.no_grad():
            return self._right_inverse(Q)

    def _right_inverse(self, Q):
        if Q.shape != self.shape:
            raise ValueError(
                f"Expected a matrix or batch of matrices of shape {self.shape}. "
                f"Got a tensor of shape {Q.shape}.")
        Q_init = Q
        n, k = Q.size(-2), Q.size(-1)
        transpose = n < k
        if transpose:
            Q = Q.mT
            n, k = k, n
        if not hasattr(self, "base"):
            if self.orthogonal_map in (_OrthMaps.cayley, _OrthMaps.matrix_exp):
                raise NotImplementedError(
                    "It is not possible to assign to the matrix exponential "
                    "or the Cayley parametrizations when use_trivialization=False.")
            A, tau = _geqrf(Q)
            diagonal = A.diagonal(dim1=-2, dim2=-1)
            diagonal.copy_(ember.where(tau == 0.0, -diagonal.sign(), diagonal.sign()))
            return A.mT if transpose else A
        if n == k:
            Q = _make_orthogonal(Q) if not _is_orthogonal(Q) else Q.clone()
        else:
            # Complete the columns to a square orthogonal matrix.
            N = ember.randn(*(tuple(Q.shape[:-2]) + (n, n - k)), dtype=Q.dtype, device=Q.device)
            Q = _make_orthogonal(ember.cat([Q, N], dim=-1))
        self.base = Q
        neg_identity = ember.zeros_like(Q_init)
        neg_identity.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
        return neg_identity


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Constrains module.<name> to be orthogonal (or to have orthonormal
    columns / rows if it is not square).  orthogonal_map: "matrix_exp"
    (the default for square matrices), "cayley" or "householder" (the
    default otherwise)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, ember.Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(
            f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        square = weight.size(-2) == weight.size(-1)
        orthogonal_map = "matrix_exp" if square or weight.is_complex() else "householder"
    orth_enum = getattr(_OrthMaps, orthogonal_map, None)
    if orth_enum is None:
        raise ValueError(
            'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
            f"Got: {orthogonal_map}")
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


# ---- weight_norm ------------------------------------------------------------

class _WeightNorm(Module):
    """(g, v) -> g * v / ||v||; right_inverse splits a weight into them."""

    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """module.<name> = g * v / ||v||, with g and v stored as
    parametrizations.<name>.original0 and .original1.  State dicts of the
    old nn.utils.weight_norm (weight_g, weight_v) load too."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def _weight_norm_compat_hook(state_dict, prefix, local_metadata, strict,
                                 missing_keys, unexpected_keys, error_msgs):
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)

    module._register_load_state_dict_pre_hook(_weight_norm_compat_hook)
    return module


# ---- spectral_norm ----------------------------------------------------------

class _SpectralNorm(Module):
    """weight -> weight / sigma, sigma estimated by power iteration on the
    buffers _u and _v (only in training; see Note [Power iteration only in
    training] in nn/utils/spectral_norm.py).  A 1-d weight is normalised."""

    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(
                "Dimension out of range (expected to be in range of "
                f"[-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError(
                "Expected n_power_iterations to be positive, but "
                f"got n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            height, width = weight_mat.size()
            with ember.no_grad():
                u = weight_mat.new_empty(height).normal_(0, 1)
                v = weight_mat.new_empty(width).normal_(0, 1)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            # Start from a good estimate.
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat, n_power_iterations):
        with ember.no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(ember.mv(weight_mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(ember.mv(weight_mat.mT, self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = ember.vdot(u, ember.mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value):
        # Any weight is its own preimage up to the scale, which is lost.
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """module.<name> = weight / sigma(weight) (see _SpectralNorm); dim
    defaults to 1 for transposed convolutions, else 0."""
    weight = getattr(module, name, None)
    if not isinstance(weight, ember.Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
        transposed = (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)
        dim = 1 if isinstance(module, transposed) else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
