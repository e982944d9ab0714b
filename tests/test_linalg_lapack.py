"""ember.linalg (norms, inv, det, slogdet, solve, cholesky, qr, eigh,
eigvalsh, svd, svdvals, lstsq, pinv, matrix_rank, cross, matrix_power) and
the top-level aliases, against PyTorch: values, gradients of the same
losses, error messages; plus gradcheck and gradgradcheck on every
differentiable function.  (tests/test_linalg.py holds the matmul family.)

Decompositions are unique only up to signs of their vectors, so losses of
them are sign-invariant (squares of U, V, Q, R).
"""

import math

import numpy as np
import pytest

import ember
from ember.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

DTYPES = [(np.float32, dict(rtol=2e-4, atol=2e-4)), (np.float64, dict(rtol=1e-9, atol=1e-9))]
BATCHES = [(), (2,), (2, 1)]


def rng():
    return np.random.default_rng(12)


def general(shape, dtype, seed=0):
    """Well-conditioned matrices: random plus a multiple of the identity."""
    values = np.random.default_rng(seed).uniform(-1, 1, shape)
    if shape[-1] == shape[-2]:
        values = values + 2 * np.eye(shape[-1])
    return values.astype(dtype)


def spd(shape, dtype, seed=0):
    """Symmetric positive-definite matrices with distinct eigenvalues."""
    a = np.random.default_rng(seed).uniform(-1, 1, shape)
    return (a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def pair(array, requires_grad=False):
    return (ember.tensor(array, requires_grad=requires_grad),
            torch.tensor(array, requires_grad=requires_grad))


def close(e, t, tol):
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), **tol)


def same_gradients(loss, array, tol):
    """Runs loss(module, A) in ember and torch; compares values and A's gradient."""
    e, t = pair(array, True)
    le, lt = loss(ember, e), loss(torch, t)
    close(le, lt, tol)
    le.backward()
    lt.backward()
    close(e.grad, t.grad, tol)


def weights(shape, seed=1):
    return np.random.default_rng(seed).uniform(0.5, 1.5, shape)


# ---- values and gradients against torch ----------------------------------------------

@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("batch", BATCHES)
def test_inv_det_slogdet(dtype, tol, batch):
    a = general(batch + (3, 3), dtype)
    w = weights(batch + (3, 3))
    same_gradients(lambda m, x: (m.linalg.inv(x) * m.tensor(w, dtype=x.dtype)).sum(), a, tol)
    same_gradients(lambda m, x: m.linalg.det(x).sum(), a, tol)
    same_gradients(lambda m, x: m.linalg.slogdet(x).logabsdet.sum(), a, tol)
    e, t = pair(a)
    close(ember.linalg.slogdet(e).sign, torch.linalg.slogdet(t).sign, tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_solve_shapes_and_broadcasting(dtype, tol):
    a = general((2, 3, 3), dtype)
    for b_shape, left in [((3,), True), ((2, 3), True), ((3, 2), True), ((1, 3, 2), True),
                          ((4, 3), False), ((2, 1, 3), False)]:
        b = np.random.default_rng(3).uniform(-1, 1, b_shape).astype(dtype)
        ea, ta = pair(a, True)
        eb, tb = pair(b, True)
        ex, tx = ember.linalg.solve(ea, eb, left=left), torch.linalg.solve(ta, tb, left=left)
        close(ex, tx, tol)
        w = weights(tuple(tx.shape))
        (ex * ember.tensor(w, dtype=ex.dtype)).sum().backward()
        (tx * torch.tensor(w, dtype=tx.dtype)).sum().backward()
        close(ea.grad, ta.grad, tol)
        close(eb.grad, tb.grad, tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(dtype, tol, batch, upper):
    a = spd(batch + (4, 4), dtype)
    w = weights(batch + (4, 4))
    # the gradient flows through the symmetrised input, as in PyTorch's tests
    same_gradients(lambda m, x: (m.linalg.cholesky(x + x.transpose(-1, -2), upper=upper)
                                 * m.tensor(w, dtype=x.dtype)).sum(), a, tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (2, 3, 5)])
def test_qr(dtype, tol, shape):
    a = general(shape, dtype)
    for mode in ("reduced", "complete", "r"):
        e, t = pair(a)
        (eq, er), (tq, tr) = ember.linalg.qr(e, mode=mode), torch.linalg.qr(t, mode=mode)
        assert tuple(eq.shape) == tuple(tq.shape) and tuple(er.shape) == tuple(tr.shape)
        close(er.abs(), tr.abs(), tol)
        if mode != "r":
            close(eq.matmul(er), t, tol)
    wq, wr = weights(shape[:-2] + (shape[-2], min(shape[-2:]))), weights(
        shape[:-2] + (min(shape[-2:]), shape[-1]), 2)

    def loss(m, x):
        q, r = m.linalg.qr(x)
        return (q * q * m.tensor(wq, dtype=x.dtype)).sum() + (r * r * m.tensor(wr, dtype=x.dtype)).sum()
    same_gradients(loss, a, tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("batch", BATCHES)
def test_eigh_eigvalsh(dtype, tol, batch):
    a = spd(batch + (4, 4), dtype)
    wl, wv = weights(batch + (4,)), weights(batch + (4, 4), 2)
    for uplo in ("L", "U"):
        e, t = pair(np.triu(a) if uplo == "U" else np.tril(a))
        close(ember.linalg.eigh(e, UPLO=uplo).eigenvalues, torch.linalg.eigh(t, UPLO=uplo)[0], tol)
        close(ember.linalg.eigvalsh(e, UPLO=uplo), torch.linalg.eigvalsh(t, UPLO=uplo), tol)

    def loss(m, x):
        values, vectors = m.linalg.eigh(x + x.transpose(-1, -2))
        return ((values * m.tensor(wl, dtype=x.dtype)).sum()
                + (vectors * vectors * m.tensor(wv, dtype=x.dtype)).sum())
    same_gradients(loss, a, tol)
    same_gradients(lambda m, x: (m.linalg.eigvalsh(x) ** 2).sum(), a, tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (3, 3), (2, 4, 3)])
@pytest.mark.parametrize("full_matrices", [False, True])
def test_svd_svdvals(dtype, tol, shape, full_matrices):
    a = general(shape, dtype)
    e, t = pair(a)
    eu, es, evh = ember.linalg.svd(e, full_matrices=full_matrices)
    tu, ts, tvh = torch.linalg.svd(t, full_matrices=full_matrices)
    assert (tuple(eu.shape), tuple(evh.shape)) == (tuple(tu.shape), tuple(tvh.shape))
    close(es, ts, tol)
    close(ember.linalg.svdvals(e), ts, tol)
    k = min(shape[-2:])
    wu, ws, wv = weights(tu.shape), weights(ts.shape, 2), weights(tvh.shape, 3)

    def loss(m, x):
        u, s, vh = m.linalg.svd(x, full_matrices=full_matrices)
        u, vh = u[..., :k], vh[..., :k, :]  # the rest is not differentiable
        return ((u * u * m.tensor(wu[..., :k], dtype=x.dtype)).sum()
                + (s * m.tensor(ws, dtype=x.dtype)).sum()
                + (vh * vh * m.tensor(wv[..., :k, :], dtype=x.dtype)).sum())
    same_gradients(loss, a, tol)
    same_gradients(lambda m, x: (m.linalg.svdvals(x) ** 3).sum(), a, tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (2, 3, 3)])
def test_pinv_matrix_rank(dtype, tol, shape):
    a = general(shape, dtype)
    same_gradients(lambda m, x: (m.linalg.pinv(x) * m.tensor(weights(shape[:-2] + shape[:-3:-1]),
                                                             dtype=x.dtype)).sum(), a, tol)
    low_rank = (a[..., :, :1] @ a[..., :1, :]).astype(dtype)
    e, t = pair(low_rank)
    close(ember.linalg.pinv(e), torch.linalg.pinv(t), tol)
    for kwargs in ({}, dict(hermitian=False, atol=0.5), dict(rtol=0.9), dict(atol=0.1, rtol=0.1)):
        assert ember.linalg.matrix_rank(e, **kwargs).tolist() == \
            torch.linalg.matrix_rank(t, **kwargs).tolist()
        assert ember.linalg.matrix_rank(ember.tensor(a), **kwargs).tolist() == \
            torch.linalg.matrix_rank(torch.tensor(a), **kwargs).tolist()
    s = spd((3, 3), dtype)
    assert ember.linalg.matrix_rank(ember.tensor(s), hermitian=True).item() == 3
    close(ember.linalg.pinv(ember.tensor(s), hermitian=True),
          torch.linalg.pinv(torch.tensor(s), hermitian=True), tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("a_shape,b_shape", [((4, 3), (4, 2)), ((3, 3), (3,)), ((2, 4, 3), (2, 4)),
                                             ((2, 5, 3), (1, 5, 2)), ((3, 4), (3, 1))])
@pytest.mark.parametrize("driver", [None, "gels", "gelsd", "gelss"])
def test_lstsq(dtype, tol, a_shape, b_shape, driver):
    a = general(a_shape, dtype)
    b = np.random.default_rng(5).uniform(-1, 1, b_shape).astype(dtype)
    if driver == "gels" and a_shape[-2] < a_shape[-1]:
        return  # QR without pivoting: PyTorch solves a different problem
    ea, ta = pair(a, True)
    eb, tb = pair(b, True)
    er, tr = ember.linalg.lstsq(ea, eb, driver=driver), torch.linalg.lstsq(ta, tb, driver=driver)
    for e_field, t_field in zip(er, tr):
        assert tuple(e_field.shape) == tuple(t_field.shape)
        assert e_field.dtype == getattr(ember, str(t_field.dtype).removeprefix("torch."))
    close(er.solution, tr.solution, tol)
    close(er.residuals, tr.residuals, tol)
    close(er.singular_values, tr.singular_values, tol)
    assert er.rank.tolist() == tr.rank.tolist()
    loss_e = er.solution.square().sum() + er.residuals.sum()
    loss_t = tr.solution.square().sum() + tr.residuals.sum()
    loss_e.backward()
    loss_t.backward()
    close(ea.grad, ta.grad, tol)
    close(eb.grad, tb.grad, tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_norms(dtype, tol):
    a = general((2, 3, 4), dtype)
    e, t = pair(a)
    for ord in (2, 1, 3.5, 0, math.inf, -math.inf):
        for dim in (None, 1, (0, 2)):
            for keepdim in (False, True):
                close(ember.linalg.vector_norm(e, ord, dim, keepdim),
                      torch.linalg.vector_norm(t, ord, dim, keepdim), tol)
    for ord in ("fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf):
        for dim in ((-2, -1), (2, 0), (0, 1)):
            for keepdim in (False, True):
                close(ember.linalg.matrix_norm(e, ord, dim, keepdim),
                      torch.linalg.matrix_norm(t, ord, dim, keepdim), tol)
                close(ember.linalg.norm(e, ord, dim, keepdim), torch.linalg.norm(t, ord, dim, keepdim), tol)
    close(ember.linalg.norm(e), torch.linalg.norm(t), tol)
    close(ember.linalg.norm(e[0], 1), torch.linalg.norm(t[0], 1), tol)
    close(ember.linalg.norm(e[0, 0], 3), torch.linalg.norm(t[0, 0], 3), tol)
    close(ember.linalg.norm(e, dim=1), torch.linalg.norm(t, dim=1), tol)
    close(ember.linalg.vector_norm(e, dtype=ember.float64), torch.linalg.vector_norm(t, dtype=torch.float64), tol)
    same_gradients(lambda m, x: m.linalg.matrix_norm(x, "nuc").sum(), a, tol)
    same_gradients(lambda m, x: m.linalg.matrix_norm(x, 2).sum(), a, tol)
    same_gradients(lambda m, x: m.linalg.norm(x, 1, (1, 2)).sum(), a, tol)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_norms_of_16_bit_inputs(dtype):
    """As PyTorch: computed in float32, returned in the input's dtype
    unless dtype= widens it; gradients in the input's dtype."""
    tol = dict(rtol=1e-2, atol=1e-2)
    a = general((2, 3, 4), np.float32)
    e_dtype, t_dtype = getattr(ember, dtype), getattr(torch, dtype)

    def pair_16(requires_grad=False):
        return (ember.tensor(a).to(e_dtype).requires_grad_(requires_grad),
                torch.tensor(a).to(t_dtype).requires_grad_(requires_grad))

    def same(norm):
        (e, t) = pair_16(True)
        ne, nt = norm(ember, e), norm(torch, t)
        assert str(ne.dtype) == str(nt.dtype).replace("torch", "ember")
        close(ne.float(), nt.float(), tol)
        ne.sum().backward()
        nt.sum().backward()
        assert e.grad.dtype == e_dtype
        close(e.grad.float(), t.grad.float(), tol)

    for ord in (2, 1, 3.5, 0.5, math.inf, -math.inf):
        for dim in (None, 1, (0, 2)):
            same(lambda m, x: m.linalg.vector_norm(x, ord, dim))
    for ord in ("fro", 1, -1, math.inf, -math.inf):
        same(lambda m, x: m.linalg.matrix_norm(x, ord))
        same(lambda m, x: m.linalg.norm(x, ord, (0, 2), keepdim=True))
    for wider in ("float32", "float64"):
        same(lambda m, x: m.linalg.vector_norm(x, 2, 1, dtype=getattr(m, wider)))
        same(lambda m, x: m.linalg.matrix_norm(x, 1, dtype=getattr(m, wider)))
    same(lambda m, x: m.norm(x, p=1, dim=2))
    same(lambda m, x: x.norm())


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_cross_matrix_power(dtype, tol):
    a, b = general((2, 1, 3), dtype), general((4, 3), dtype, 1)[None]
    (ea, ta), (eb, tb) = pair(a, True), pair(b, True)
    ec, tc = ember.linalg.cross(ea, eb), torch.linalg.cross(ta, tb)
    close(ec, tc, tol)
    (ec * ec).sum().backward()
    (tc * tc).sum().backward()
    close(ea.grad, ta.grad, tol)
    close(eb.grad, tb.grad, tol)
    close(ember.linalg.cross(ember.tensor(a.swapaxes(1, 2)), ember.tensor(a.swapaxes(1, 2)), dim=1),
          torch.linalg.cross(torch.tensor(a.swapaxes(1, 2)), torch.tensor(a.swapaxes(1, 2)), dim=1), tol)
    m = general((2, 3, 3), dtype) / 2
    for n in (0, 1, 2, 5, -1, -3):
        same_gradients(lambda mod, x: mod.linalg.matrix_power(x, n).sum() + x.sum(), m, tol)
    ints = ember.tensor([[1, 2], [3, 4]]).matrix_power(3)
    assert ints.tolist() == torch.tensor([[1, 2], [3, 4]]).matrix_power(3).tolist()


def test_top_level_aliases():
    a = general((2, 3, 3), np.float64)
    e, t = pair(a)
    tol = dict(rtol=1e-9, atol=1e-9)
    close(ember.det(e), torch.det(t), tol)
    close(e.det(), t.det(), tol)
    close(ember.inverse(e), torch.inverse(t), tol)
    close(e.inverse(), t.inverse(), tol)
    close(ember.logdet(-e), torch.logdet(-t), dict(tol, equal_nan=True))
    close(e.pinverse(), t.pinverse(), tol)
    close(ember.matrix_power(e, 3), torch.matrix_power(t, 3), tol)
    close(ember.cross(e, e[:1], dim=2), torch.cross(t, t[:1], dim=2), tol)
    with pytest.warns(UserWarning, match="without specifying the dim arg is deprecated"):
        close(e.cross(e.flip(0)), torch.cross(t, t.flip(0), dim=1), tol)
    close(ember.linalg.pinv(e, 0.5), torch.linalg.pinv(t, 0.5), tol)
    sign, logabsdet = ember.slogdet(e)
    close(logabsdet, torch.slogdet(t).logabsdet, tol)
    assert type(ember.slogdet(e)).__name__ == "slogdet"


def test_named_results():
    a = ember.tensor(spd((3, 3), np.float64))
    for result, name, fields in [
            (ember.linalg.slogdet(a), "linalg_slogdet", ("sign", "logabsdet")),
            (ember.linalg.eigh(a), "linalg_eigh", ("eigenvalues", "eigenvectors")),
            (ember.linalg.qr(a), "linalg_qr", ("Q", "R")),
            (ember.linalg.svd(a), "linalg_svd", ("U", "S", "Vh")),
            (ember.linalg.lstsq(a, a), "linalg_lstsq",
             ("solution", "residuals", "rank", "singular_values"))]:
        assert type(result) is getattr(ember.return_types, name)
        assert result._fields == fields
        assert isinstance(result, tuple)
        assert repr(result).startswith(f"ember.return_types.{name}({fields[0]}=tensor(")


# ---- gradcheck, gradgradcheck --------------------------------------------------------

def f64(array):
    return ember.tensor(array, dtype=ember.float64, requires_grad=True)


def symmetric(f):
    return lambda x: f(x + x.transpose(-1, -2))


GRADCHECKS = {
    "inv": (lambda x: ember.linalg.inv(x), general),
    "det": (lambda x: ember.linalg.det(x), general),
    "slogdet": (lambda x: ember.linalg.slogdet(x).logabsdet, general),
    "cholesky": (symmetric(lambda x: ember.linalg.cholesky(x)), spd),
    "cholesky_upper": (symmetric(lambda x: ember.linalg.cholesky(x, upper=True)), spd),
    "eigh": (symmetric(lambda x: ember.linalg.eigh(x)), spd),
    "eigvalsh": (symmetric(lambda x: ember.linalg.eigvalsh(x)), spd),
    "svdvals": (lambda x: ember.linalg.svdvals(x), general),
    "pinv": (lambda x: ember.linalg.pinv(x), general),
    "matrix_norm_nuc": (lambda x: ember.linalg.matrix_norm(x, "nuc"), general),
    "matrix_power": (lambda x: ember.linalg.matrix_power(x, -2), general),
}


@pytest.mark.parametrize("name", sorted(GRADCHECKS))
def test_gradcheck_and_gradgradcheck(name):
    function, make = GRADCHECKS[name]
    x = f64(make((2, 3, 3), np.float64))
    assert gradcheck(function, (x,))
    assert gradgradcheck(function, (x,))


def test_gradcheck_eigh_vectors_sign_invariant():
    x = f64(spd((3, 3), np.float64))
    assert gradcheck(symmetric(lambda a: ember.linalg.eigh(a).eigenvectors.square()), (x,))
    assert gradgradcheck(symmetric(lambda a: ember.linalg.eigh(a).eigenvectors.square()), (x,))


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (3, 3)])
def test_gradcheck_svd_qr(shape):
    x = f64(general(shape, np.float64))

    def svd_invariant(a):
        u, s, vh = ember.linalg.svd(a, full_matrices=False)
        return u.square(), s, vh.square(), u.matmul(vh)
    assert gradcheck(svd_invariant, (x,))
    assert gradgradcheck(svd_invariant, (x,))
    assert gradcheck(lambda a: ember.linalg.qr(a), (x,))
    assert gradgradcheck(lambda a: (ember.linalg.qr(a).Q.square(), ember.linalg.qr(a).R), (x,))


@pytest.mark.parametrize("left", [True, False])
def test_gradcheck_solve(left):
    a = f64(general((2, 3, 3), np.float64))
    b = f64(np.random.default_rng(2).uniform(-1, 1, (3, 2) if left else (4, 3)))
    assert gradcheck(lambda x, y: ember.linalg.solve(x, y, left=left), (a, b))
    assert gradgradcheck(lambda x, y: ember.linalg.solve(x, y, left=left), (a, b))
    v = f64(np.random.default_rng(2).uniform(-1, 1, (3,)))
    assert gradcheck(lambda x, y: ember.linalg.solve(x, y), (a, v))


def test_gradcheck_lstsq_cross():
    a = f64(general((5, 3), np.float64))
    b = f64(np.random.default_rng(4).uniform(-1, 1, (5, 2)))
    assert gradcheck(lambda x, y: ember.linalg.lstsq(x, y, driver="gelsd")[:2], (a, b))
    assert gradgradcheck(lambda x, y: ember.linalg.lstsq(x, y, driver="gelsd")[:2], (a, b))
    u = f64(general((2, 3), np.float64))
    v = f64(general((2, 3), np.float64, 1))
    assert gradcheck(lambda x, y: ember.linalg.cross(x, y), (u, v))


def cofactors(a):
    n = a.shape[-1]
    result = np.empty_like(a)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(a, i, 0), j, 1)
            result[i, j] = (-1) ** (i + j) * np.linalg.det(minor)
    return result


def test_det_of_singular_matrices():
    """The gradient of det is the cofactor matrix, by SVD where det is 0.
    (PyTorch 2.13 returns zeros for the rank-2 matrix here, and fails its
    own gradcheck on it; minors are the oracle.)"""
    for a in (np.array([[1., 2, 3], [2, 4, 6], [1, 0, 1]]), np.array([[1., 2], [2, 4]]),
              np.zeros((3, 3))):
        x = f64(a)
        ember.linalg.det(x).backward()
        np.testing.assert_allclose(x.grad.numpy(), cofactors(a), atol=1e-12)
    assert gradcheck(lambda x: ember.linalg.det(x), (f64([[1., 2, 3], [2, 4, 6], [1, 0, 1]]),))


def test_backward_refusals_of_qr():
    x = f64(general((4, 3), np.float64))
    with pytest.raises(RuntimeError, match="mode='r'. Please use linalg.qr"):
        ember.linalg.qr(x, mode="r").R.sum().backward()
    with pytest.raises(RuntimeError, match="not differentiable when mode='complete' and nrows > ncols"):
        ember.linalg.qr(x, mode="complete").Q.sum().backward()


# ---- errors: messages as PyTorch's -----------------------------------------------------

def same_error(call):
    with pytest.raises(Exception) as torch_error:
        call(torch)
    with pytest.raises(Exception) as ember_error:
        call(ember)
    assert str(ember_error.value) == str(torch_error.value)
    assert isinstance(ember_error.value, RuntimeError) == isinstance(torch_error.value, RuntimeError)
    return ember_error.value


SINGULAR = [[1., 2, 3], [2, 4, 6], [0, 1, 1]]
NOT_PD = [[1., 2, 0], [2, 1, 0], [0, 0, 1]]


@pytest.mark.filterwarnings("ignore:Using torch.cross without specifying the dim")
@pytest.mark.parametrize("call", [
    lambda m: m.linalg.inv(m.tensor(SINGULAR)),
    lambda m: m.linalg.inv(m.tensor([[1., 0, 0], [0, 0, 0], [0, 0, 1]])),
    lambda m: m.linalg.inv(m.stack([m.eye(3), m.tensor(SINGULAR)])),
    lambda m: m.linalg.solve(m.tensor(SINGULAR), m.ones(3)),
    lambda m: m.linalg.solve(m.stack([m.eye(3), m.tensor(SINGULAR)]), m.ones(2, 3)),
    lambda m: m.linalg.cholesky(m.tensor(NOT_PD)),
    lambda m: m.linalg.cholesky(m.stack([m.eye(3), m.tensor(NOT_PD)])),
    lambda m: m.linalg.cholesky(m.tensor([[1., 0], [0, float("nan")]])),
    lambda m: m.linalg.cholesky(m.tensor([[float("nan"), 0], [0, 1.]])),
    lambda m: m.linalg.svd(m.tensor([[float("nan"), 0], [0, 1.]])),
    lambda m: m.linalg.svdvals(m.stack([m.eye(2), m.full((2, 2), float("nan"))])),
    lambda m: m.linalg.inv(m.ones(2, 3)),
    lambda m: m.linalg.det(m.ones(3)),
    lambda m: m.linalg.inv(m.ones(2, 2, dtype=m.int64)),
    lambda m: m.linalg.cholesky(m.ones(2, 2, dtype=m.int32)),
    lambda m: m.linalg.solve(m.eye(2), m.ones(3)),
    lambda m: m.linalg.solve(m.eye(2), m.ones(2), left=False),
    lambda m: m.linalg.solve(m.eye(2), m.ones(2, dtype=m.float64)),
    lambda m: m.linalg.eigh(m.eye(2), UPLO="X"),
    lambda m: m.linalg.eigh(m.ones(2, 3)),
    lambda m: m.linalg.qr(m.eye(2), mode="x"),
    lambda m: m.linalg.svd(m.ones(3)),
    lambda m: m.linalg.matrix_power(m.ones(2, 3), 2),
    lambda m: m.linalg.matrix_power(m.tensor(SINGULAR), -1),
    lambda m: m.linalg.cross(m.ones(2), m.ones(2)),
    lambda m: m.linalg.cross(m.ones(2, 3), m.ones(3)),
    lambda m: m.cross(m.ones(2, 2), m.ones(2, 2)),
    lambda m: m.linalg.norm(m.ones(2, 2), ord="fro", dim=0),
    lambda m: m.linalg.pinv(m.tensor([[1., 0], [0, float("nan")]])),
    lambda m: m.linalg.matrix_norm(m.ones(2, 2), ord=3),
    lambda m: m.linalg.matrix_norm(m.ones(2)),
    lambda m: m.linalg.vector_norm(m.ones(2, dtype=m.int64)),
    lambda m: m.linalg.norm(m.ones(2, 2, 2), ord=2),
    lambda m: m.linalg.norm(m.ones(2, 2, 2), ord="fro"),
    lambda m: m.linalg.norm(m.ones(2), ord="nuc"),
    # 16-bit inputs: the norms take them, the singular values do not
    lambda m: m.linalg.matrix_norm(m.ones(2, 2, dtype=m.float16), "nuc"),
    lambda m: m.linalg.matrix_norm(m.ones(2, 2, dtype=m.bfloat16), 2, dtype=m.float32),
    lambda m: m.linalg.matrix_norm(m.ones(2, dtype=m.float16), 3),
    lambda m: m.linalg.inv(m.eye(2, dtype=m.float16)),
    # a norm's dtype= widens, never narrows
    lambda m: m.linalg.vector_norm(m.ones(2), dtype=m.float16),
    lambda m: m.linalg.vector_norm(m.ones(2, dtype=m.float16), dtype=m.bfloat16),
    lambda m: m.linalg.vector_norm(m.ones(2, dtype=m.float16), dtype=m.int32),
    lambda m: m.linalg.matrix_norm(m.ones(2, 2), 1, dtype=m.float16),
    lambda m: m.linalg.matrix_norm(m.ones(2, 2, dtype=m.float64), dtype=m.float32),
    lambda m: m.norm(m.ones(2, dtype=m.float64), dtype=m.float32),
    lambda m: m.ones(2).norm(1, dtype=m.bfloat16),
    lambda m: m.linalg.lstsq(m.eye(2), m.ones(3, 1)),
    lambda m: m.linalg.lstsq(m.eye(2), m.ones(2, 1), driver="x"),
    lambda m: m.linalg.lstsq(m.eye(2), m.ones(2, 1, dtype=m.float64)),
])
def test_errors_as_pytorch(call):
    same_error(call)


def test_linalg_error_class():
    error = same_error(lambda m: m.linalg.inv(m.tensor(SINGULAR)))
    assert isinstance(error, ember.linalg.LinAlgError)


@pytest.mark.parametrize("function", [
    lambda m, x: m.linalg.inv(x), lambda m, x: m.linalg.det(x),
    lambda m, x: m.linalg.slogdet(x).logabsdet, lambda m, x: m.linalg.eigh(x).eigenvalues,
    lambda m, x: m.linalg.eigvalsh(x), lambda m, x: m.linalg.qr(x).R,
    lambda m, x: m.linalg.solve(x, m.ones(2, dtype=x.dtype)),
    lambda m, x: m.linalg.pinv(x, hermitian=True)])
@pytest.mark.parametrize("where", [(0, 0), (1, 1)])
def test_nan_inputs_give_nan_without_error(function, where):
    """PyTorch returns NaN here (the positions differ between LAPACKs)."""
    a = np.eye(2)
    a[where] = np.nan
    e, t = pair(a)
    assert np.isnan(function(ember, e).numpy()).any() == np.isnan(function(torch, t).numpy()).any()


def test_svd_of_infinities_is_nan():
    a = ember.stack([ember.eye(2), ember.full((2, 2), float("inf"))])
    s = ember.linalg.svdvals(a)
    assert np.isnan(s[1].numpy()).all() and s[0].tolist() == [1.0, 1.0]
    assert np.isnan(ember.linalg.svd(a).U[1].numpy()).all()


def test_singular_values_of_singular_matrices():
    a = np.array(SINGULAR)
    e, t = pair(a)
    tol = dict(rtol=1e-9, atol=1e-9)
    close(ember.linalg.det(e), torch.linalg.det(t), tol)
    # The LU of this matrix meets an exact zero pivot (ember's, NumPy's, and
    # torch.linalg.lu_factor_ex's: info 3), so the sign is 0 as in NumPy.
    # torch.linalg.slogdet itself depends on the CPU: sign 0 on AMD, but sign 1
    # and logabsdet -35.6 (|det| 3e-16) on an Intel Xeon with MKL; so PyTorch
    # is the oracle through det, to 1e-9, and the sign of roundoff is not compared.
    es, ns = ember.linalg.slogdet(e), np.linalg.slogdet(a)
    assert es.sign.item() == ns.sign == 0 and es.logabsdet.item() == ns.logabsdet == -math.inf
    ts = torch.linalg.slogdet(t)
    assert abs(ts.sign.item() * math.exp(ts.logabsdet.item())) < 1e-9
    assert ember.linalg.matrix_rank(e).item() == 2


def test_inputs_in_any_layout():
    """Transposed, stepped and expanded views go to LAPACK as they are."""
    base = general((3, 6, 3), np.float64)
    e, t = ember.tensor(base), torch.tensor(base)
    for view in (lambda x: x.transpose(-1, -2)[..., ::2], lambda x: x[:, ::2, :],
                 lambda x: x[:1, :3].expand(4, 3, 3)):
        close(ember.linalg.inv(view(e)), torch.linalg.inv(view(t)), dict(rtol=1e-9, atol=1e-9))
        close(ember.linalg.eigvalsh(view(e)), torch.linalg.eigvalsh(view(t)), dict(rtol=1e-9, atol=1e-9))
