"""Derivatives of the LAPACK-backed ember.linalg functions (real dtypes).

Note [Decomposition gradients]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Each function that calls LAPACK (Note [LAPACK through NumPy]) records one
node, named as PyTorch names it (LinalgInvExBackward0, ...), whose `apply`
is PyTorch's formula written with ember operators and ember.linalg itself:
under create_graph=True the backward is recorded like any other
computation, so second derivatives come for free wherever the formula is
smooth.  A decomposition's own outputs are saved as SavedOutput, which
hands the formula an alias with this node as history (Note [Saved tensors]).
Functions composed of differentiable ops (norms, matrix_power, cross,
matrix_rank) need no node.

References: PyTorch's torch/csrc/autograd/FunctionsManual.cpp, and
M. Giles, "An extended collection of matrix derivative results" (2008).
"""

import ember

from ..autograd.formulas._common import sum_to
from ..autograd.graph import Node, SavedOutput, edges_of, record


def mT(x):
    return x.transpose(-2, -1)


def diag_embed(values):
    """Matrices with `values` (..., n) on their diagonals."""
    return values.unsqueeze(-1) * ember.eye(values.shape[-1], dtype=values.dtype)


def attach(node_class, inputs, outputs, saved, **attributes):
    """Records `outputs` (a tuple; None marks a non-differentiable one) as
    the results of a new `node_class` when grad mode is on and an input
    requires grad.  `saved` may name outputs by their position: ("out", i)."""
    if not ember.is_grad_enabled():
        return
    edges = edges_of(*inputs)
    if all(edge is None for edge in edges):
        return
    node = node_class(edges)
    for name, value in attributes.items():
        setattr(node, name, value)
    node.save(*(SavedOutput(outputs[v[1]], v[1]) if type(v) is tuple else v for v in saved))
    for i, output in enumerate(outputs):
        if output is not None:
            record(node, output, i)


def _linalg():
    return ember.linalg


# ---- inv, det, slogdet, solve --------------------------------------------------------

class LinalgInvExBackward0(Node):
    """X = A^-1:  gA = -X^T gX X^T."""

    __slots__ = ()

    def apply(self, grad):
        inverse, = self.unpack_saved()
        return (-mT(inverse).matmul(grad).matmul(mT(inverse)),)


class LinalgDetBackward0(Node):
    """d = det A:  gA = g d A^-T, the cofactor matrix; where some A is
    singular, the cofactors come from the SVD A = U S V^T instead:
    det(U) det(V) U diag(prod_{j != i} s_j) V^T (as PyTorch does)."""

    __slots__ = ()

    def apply(self, grad):
        a, det = self.unpack_saved()
        grad = grad.unsqueeze(-1).unsqueeze(-1)
        if bool((det != 0).all()):
            cofactors = det.unsqueeze(-1).unsqueeze(-1) * mT(_linalg().inv(a))
        else:
            cofactors = _cofactors_by_svd(a)
        return (grad * cofactors,)


def _cofactors_by_svd(a):
    u, s, vh = _linalg().svd(a)
    ones = ember.ones(s.shape[:-1] + (1,), dtype=s.dtype)
    before = ember.cat([ones, s[..., :-1]], -1).cumprod(-1)      # prod_{j<i} s_j
    after = ember.cat([s[..., 1:], ones], -1).flip(-1).cumprod(-1).flip(-1)  # j>i
    signs = _linalg().det(u) * _linalg().det(vh)
    return signs.unsqueeze(-1).unsqueeze(-1) * (u * (before * after).unsqueeze(-2)).matmul(vh)


class LinalgSlogdetBackward0(Node):
    """(sign, log|det A|):  gA = g_logabsdet A^-T; sign has no gradient."""

    __slots__ = ()
    num_outputs = 2

    def apply(self, grad_sign, grad_logabsdet):
        a, = self.unpack_saved()
        if grad_logabsdet is None:
            return (None,)
        grad = grad_logabsdet.unsqueeze(-1).unsqueeze(-1)
        return (grad * mT(_linalg().inv(a)),)


class LinalgSolveExBackward0(Node):
    """X = A^-1 B:  gB = A^-T gX,  gA = -gB X^T (left=True; left=False
    solves the transposed system).  B may be a batch of vectors and both
    may broadcast their batch dims."""

    __slots__ = ("vector", "left", "a_shape", "b_shape")
    num_outputs = 1

    def apply(self, grad):
        a, x = self.unpack_saved()
        a_edge, b_edge = self._edges
        if not self.left:
            a, x, grad = mT(a), mT(x), mT(grad)
        if self.vector:
            x, grad = x.unsqueeze(-1), grad.unsqueeze(-1)
        grad_b = _linalg().solve(mT(a), grad)
        grad_a = None
        if a_edge is not None:
            grad_a = -grad_b.matmul(mT(x))
            grad_a = sum_to(grad_a if self.left else mT(grad_a), self.a_shape)
        if b_edge is None:
            return grad_a, None
        if self.vector:
            grad_b = grad_b.squeeze(-1)
        elif not self.left:
            grad_b = mT(grad_b)
        return grad_a, sum_to(grad_b, self.b_shape)


# ---- cholesky, qr --------------------------------------------------------------------

class LinalgCholeskyExBackward0(Node):
    """A = L L^T:  gA = L^-T Phi(L^T gL) L^-1, Phi symmetrising the lower
    triangle with half the diagonal (PyTorch's cholesky_backward)."""

    __slots__ = ("upper",)

    def apply(self, grad):
        factor, = self.unpack_saved()
        lower = mT(factor) if self.upper else factor
        grad = mT(grad) if self.upper else grad
        middle = mT(lower).matmul(grad).tril()
        middle = 0.5 * (middle + mT(middle.tril(-1)))
        solve = _linalg().solve
        left_solved = solve(mT(lower), middle)             # L^-T M
        return (solve(lower, left_solved, left=False),)    # (L^-T M) L^-1


def _copy_lower_to_upper(m):
    return m.tril() + mT(m.tril(-1))


class LinalgQrBackward0(Node):
    """A = QR.  For m >= n (Q m x n):  M = R gR^T - gQ^T Q,
    gA = (gQ + Q copyltu(M)) R^-T.  For m < n, A = [X | Y] with X = QU:
    Y's gradient is Q gV and X's comes from the square case with
    gQ + Y gV^T (PyTorch's linalg_qr_backward)."""

    __slots__ = ("mode",)
    num_outputs = 2

    def apply(self, grad_q, grad_r):
        a, q, r = self.unpack_saved()
        m, n = a.shape[-2], a.shape[-1]
        if self.mode == "r":
            raise RuntimeError(
                "The derivative of linalg.qr depends on Q, which is not computed when "
                "mode='r'. Please use linalg.qr(A, mode='reduced') if you are going to "
                "differentiate through linalg.qr.")
        if self.mode == "complete" and m > n:
            raise RuntimeError(
                "The QR decomposition is not differentiable when mode='complete' and "
                "nrows > ncols.")
        if grad_q is None:
            grad_q = ember.zeros_like(q)
        if grad_r is None:
            grad_r = ember.zeros_like(r)
        if m >= n:
            return (_qr_square_backward(q, r, grad_q, grad_r),)
        y = a[..., :, m:]
        grad_y = q.matmul(grad_r[..., :, m:])
        grad_x = _qr_square_backward(q, r[..., :, :m],
                                     grad_q + y.matmul(mT(grad_r[..., :, m:])),
                                     grad_r[..., :, :m])
        return (ember.cat([grad_x, grad_y], -1),)


def _qr_square_backward(q, r, grad_q, grad_r):
    m = r.matmul(mT(grad_r)) - mT(grad_q).matmul(q)
    b = grad_q + q.matmul(_copy_lower_to_upper(m))
    # B R^-T is the transpose of R^-1 B^T
    return mT(_linalg().solve(r, mT(b)))


# ---- eigh, svd -----------------------------------------------------------------------

def _reciprocal_gaps(values):
    """E with E_ij = 1 / (values_j - values_i) off the diagonal, 0 on it."""
    gaps = values.unsqueeze(-2) - values.unsqueeze(-1)
    eye = ember.eye(values.shape[-1], dtype=values.dtype)
    return (1 - eye) / (gaps + eye)


class LinalgEighBackward0(Node):
    """A = V diag(L) V^T:  gA = V (diag(gL) + sym(V^T gV)/(L_j - L_i)) V^T,
    where the skew part of V^T gV over the eigenvalue gaps is symmetric
    (PyTorch's linalg_eig_backward, Hermitian case).  Repeated eigenvalues
    make the eigenvector gradient infinite, as in PyTorch."""

    __slots__ = ()
    num_outputs = 2

    def apply(self, grad_values, grad_vectors):
        values, vectors = self.unpack_saved()
        return (_eigh_backward(values, vectors, grad_values, grad_vectors),)


def _eigh_backward(values, vectors, grad_values, grad_vectors):
    inner = 0
    if grad_vectors is not None:
        projected = mT(vectors).matmul(grad_vectors)
        inner = 0.5 * (projected - mT(projected)) * _reciprocal_gaps(values)
    if grad_values is not None:
        inner = inner + diag_embed(grad_values)
    return vectors.matmul(inner).matmul(mT(vectors))


class LinalgSvdBackward0(Node):
    """A = U S V^T (reduced; full_matrices=True differentiates through its
    first k = min(m, n) columns, as PyTorch does).  With skew(X) = X - X^T
    and E_ij = 1 / (s_j^2 - s_i^2):
        gA = U [(skew(U^T gU) E) S + S (skew(V^T gV) E) + diag(gS)] V^T
             + (I - U U^T) gU S^-1 V^T + U S^-1 gV^T (I - V V^T)
    (PyTorch's svd_backward; its gauge check concerns complex inputs only)."""

    __slots__ = ()
    num_outputs = 3

    def apply(self, grad_u, grad_s, grad_vh):
        u, s, vh = self.unpack_saved()
        k = s.shape[-1]
        u, vh = u[..., :, :k], vh[..., :k, :]
        if grad_u is not None:
            grad_u = grad_u[..., :, :k]
        if grad_vh is not None:
            grad_vh = grad_vh[..., :k, :]
        return (_svd_backward(u, s, vh, grad_u, grad_s, grad_vh),)


def _svd_backward(u, s, vh, grad_u, grad_s, grad_vh):
    m, n, k = u.shape[-2], vh.shape[-1], s.shape[-1]
    if grad_u is None and grad_vh is None:
        return (u * grad_s.unsqueeze(-2)).matmul(vh)
    gaps = _reciprocal_gaps(s * s)
    inner = diag_embed(grad_s) if grad_s is not None else 0
    if grad_u is not None:
        u_grad_u = mT(u).matmul(grad_u)
        inner = inner + (u_grad_u - mT(u_grad_u)) * gaps * s.unsqueeze(-2)
    if grad_vh is not None:
        v_grad_v = vh.matmul(mT(grad_vh))
        inner = inner + s.unsqueeze(-1) * ((v_grad_v - mT(v_grad_v)) * gaps)
    grad_a = u.matmul(inner)
    if grad_u is not None and m > k:
        grad_a = grad_a + (grad_u - u.matmul(u_grad_u)) / s.unsqueeze(-2)
    grad_a = grad_a.matmul(vh)
    if grad_vh is not None and n > k:
        grad_a = grad_a + (u / s.unsqueeze(-2)).matmul(
            grad_vh - grad_vh.matmul(mT(vh)).matmul(vh))
    return grad_a


# ---- pinv, lstsq ---------------------------------------------------------------------

def pinv_backward(grad, pinv, a):
    """P = A^+ (Golub and Pereyra's derivative), as a gradient:
    gA = -P^T gP P^T + (I - A P) gP^T P P^T + P^T P gP^T (I - P A)."""
    p_t, grad_t = mT(pinv), mT(grad)
    eye_m = ember.eye(a.shape[-2], dtype=a.dtype)
    eye_n = ember.eye(a.shape[-1], dtype=a.dtype)
    return (-p_t.matmul(grad).matmul(p_t)
            + (eye_m - a.matmul(pinv)).matmul(grad_t).matmul(pinv).matmul(p_t)
            + p_t.matmul(pinv).matmul(grad_t).matmul(eye_n - pinv.matmul(a)))


class LinalgPinvBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        a, pinv = self.unpack_saved()
        return (pinv_backward(grad, pinv, a),)


class LinalgLstsqBackward0(Node):
    """X = A^+ B:  gB = P^T gX, gA = pinv_backward(gX B^T); the squared
    residuals r = |AX - B|^2 (X is their minimiser, so X's own change does
    not move them) add gA += 2 (AX - B) diag(gr) X^T, gB -= 2 (AX - B) diag(gr)."""

    __slots__ = ("vector", "a_shape", "b_shape")
    num_outputs = 4

    def apply(self, grad_x, grad_residuals, grad_rank, grad_singular_values):
        a, b, x = self.unpack_saved()
        a_edge, b_edge = self._edges
        if self.vector:
            b, x = b.unsqueeze(-1), x.unsqueeze(-1)
            grad_x = grad_x.unsqueeze(-1) if grad_x is not None else None
        grad_a = grad_b = 0
        if grad_x is not None:
            pinv = _linalg().pinv(a)
            grad_b = mT(pinv).matmul(grad_x)
            if a_edge is not None:
                grad_a = pinv_backward(grad_x.matmul(mT(b)), pinv, a)
        if grad_residuals is not None and grad_residuals.numel():
            weighted = (a.matmul(x) - b) * (2 * grad_residuals.unsqueeze(-2))
            grad_a = grad_a + weighted.matmul(mT(x))
            grad_b = grad_b - weighted
        if isinstance(grad_b, ember.Tensor) and self.vector:
            grad_b = grad_b.squeeze(-1)
        return (_gradient_or_none(grad_a, a_edge, self.a_shape),
                _gradient_or_none(grad_b, b_edge, self.b_shape))


def _gradient_or_none(grad, edge, shape):
    if edge is None or not isinstance(grad, ember.Tensor):
        return None
    return sum_to(grad, shape)
