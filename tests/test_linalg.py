"""matmul and its family: matmul/@, mm, bmm, mv, dot, vdot, outer/ger,
addmm(_), baddbmm(_), out=.

Values are checked against NumPy (np.matmul, np.outer) over random shapes:
broadcast batch dims, 0- and 1-size dims, vectors on either side, and
operands that are transposed, sliced with steps, offset or expanded views.
Semantics (result shapes and dtypes, which dtypes are refused, error
messages) are checked against PyTorch where it is installed.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember

HYP = settings(max_examples=min(80, settings.default.max_examples), deadline=None)

DTYPES = [np.float32, np.float64, np.int64, np.int32, np.int16, np.int8, np.uint8]


def tolerance(dtype, k):
    """float32 sums of k products of values in [-1, 1] drift with k."""
    if dtype == np.float32:
        return dict(rtol=1e-5, atol=1e-6 * (k + 1))
    if dtype == np.float64:
        return dict(rtol=1e-12, atol=1e-13 * (k + 1))
    return dict(rtol=0, atol=0)


def random_values(rng, shape, dtype):
    if np.issubdtype(dtype, np.floating):
        return rng.uniform(-1, 1, shape).astype(dtype)
    low = 0 if dtype == np.uint8 else -4
    return rng.integers(low, 5, shape).astype(dtype)


def operand(rng, shape, dtype, layout):
    """(ember, numpy) views with equal values, in one of several layouts."""
    shape = tuple(shape)
    if layout == "transposed" and len(shape) >= 2:
        base = random_values(rng, shape[:-2] + (shape[-1], shape[-2]), dtype)
        e = ember.tensor(base).transpose(-1, -2)
        return e, np.swapaxes(base, -1, -2)
    if layout == "stepped" and len(shape) >= 1:
        base = random_values(rng, shape[:-1] + (2 * shape[-1] + 1,), dtype)
        e = ember.tensor(base)[..., 1::2]
        return e, base[..., 1::2]
    if layout == "offset":
        base = random_values(rng, (2,) + shape, dtype)
        return ember.tensor(base)[1], base[1]
    if layout == "expanded" and len(shape) >= 3 and shape[0] > 0:
        base = random_values(rng, (1,) + shape[1:], dtype)
        e = ember.tensor(base).expand(*shape)
        return e, np.broadcast_to(base, shape)
    base = random_values(rng, shape, dtype)
    return ember.tensor(base), base


def check_close(got, want, k):
    got_np = got.numpy()
    assert got_np.shape == want.shape
    assert got_np.dtype == want.dtype
    np.testing.assert_allclose(got_np, want, **tolerance(want.dtype.type, k))


# ---- matmul against NumPy ------------------------------------------------------

small = st.integers(0, 9)
batch_size = st.sampled_from([0, 1, 1, 2, 3])
layouts = st.sampled_from(["contiguous", "transposed", "stepped", "offset", "expanded"])


@st.composite
def matmul_shapes(draw):
    """Shapes that multiply, with batch dims broadcasting against each other."""
    m, k, n = draw(small), draw(small), draw(small)
    batch = draw(st.lists(batch_size, max_size=3))
    a_rank = draw(st.sampled_from([1, 2, 2 + len(batch)]))
    b_rank = draw(st.sampled_from([1, 2, 2 + len(batch)]))

    def batch_for(rank):
        dims = batch[len(batch) - (rank - 2):] if rank > 2 else []
        # a size-1 dim broadcasts against the other operand's size
        return [1 if draw(st.booleans()) and d > 0 else d for d in dims]

    a = [k] if a_rank == 1 else batch_for(a_rank) + [m, k]
    b = [k] if b_rank == 1 else batch_for(b_rank) + [k, n]
    return a, b


@HYP
@given(shapes=matmul_shapes(), dtype=st.sampled_from(DTYPES), la=layouts, lb=layouts,
       seed=st.integers(0, 2**31))
def test_matmul_matches_numpy(shapes, dtype, la, lb, seed):
    rng = np.random.default_rng(seed)
    (ea, na), (eb, nb) = operand(rng, shapes[0], dtype, la), operand(rng, shapes[1], dtype, lb)
    want = np.matmul(na, nb)
    k = shapes[0][-1]
    check_close(ember.matmul(ea, eb), want, k)
    check_close(ea @ eb, want, k)
    check_close(ea.matmul(eb), want, k)


@HYP
@given(m=small, k=small, n=small, dtype=st.sampled_from(DTYPES),
       la=layouts, lb=layouts, seed=st.integers(0, 2**31))
def test_mm_mv_dot_outer_match_numpy(m, k, n, dtype, la, lb, seed):
    rng = np.random.default_rng(seed)
    ea, na = operand(rng, (m, k), dtype, la)
    eb, nb = operand(rng, (k, n), dtype, lb)
    ev, nv = operand(rng, (k,), dtype, lb)
    ew, nw = operand(rng, (k,), dtype, la)
    check_close(ember.mm(ea, eb), na @ nb, k)
    check_close(ea.mm(eb), na @ nb, k)
    check_close(ember.mv(ea, ev), na @ nv, k)
    check_close(ember.dot(ev, ew), np.asarray(np.dot(nv, nw)), k)
    check_close(ember.vdot(ev, ew), np.asarray(np.dot(nv, nw)), k)
    check_close(ember.outer(ev, ew), np.outer(nv, nw), 1)
    check_close(ember.ger(ev, ew), np.outer(nv, nw), 1)


@HYP
@given(b=st.integers(0, 3), m=small, k=small, n=small, dtype=st.sampled_from(DTYPES),
       la=layouts, lb=layouts, seed=st.integers(0, 2**31))
def test_bmm_matches_numpy(b, m, k, n, dtype, la, lb, seed):
    rng = np.random.default_rng(seed)
    ea, na = operand(rng, (b, m, k), dtype, la)
    eb, nb = operand(rng, (b, k, n), dtype, lb)
    check_close(ember.bmm(ea, eb), np.matmul(na, nb), k)


@HYP
@given(m=small, k=small, n=small, dtype=st.sampled_from([np.float32, np.float64, np.int64]),
       input_shape=st.sampled_from(["full", "row", "column", "scalar"]),
       beta=st.sampled_from([0, 1, 2]), alpha=st.sampled_from([1, -1, 3]),
       seed=st.integers(0, 2**31))
def test_addmm_matches_numpy(m, k, n, dtype, input_shape, beta, alpha, seed):
    rng = np.random.default_rng(seed)
    ea, na = operand(rng, (m, k), dtype, "transposed")
    eb, nb = operand(rng, (k, n), dtype, "stepped")
    shape = {"full": (m, n), "row": (n,), "column": (m, 1), "scalar": ()}[input_shape]
    ec, nc = operand(rng, shape, dtype, "contiguous")
    want = (beta * nc + alpha * (na @ nb)).astype(dtype)
    check_close(ember.addmm(ec, ea, eb, beta=beta, alpha=alpha), want, k)
    check_close(ec.addmm(ea, eb, beta=beta, alpha=alpha), want, k)


def test_addmm_beta_zero_ignores_nan():
    nan = ember.full((2, 2), float("nan"))
    a, b = ember.ones(2, 3), ember.ones(3, 2)
    assert ember.addmm(nan, a, b, beta=0).tolist() == [[3.0, 3.0], [3.0, 3.0]]
    # and beta != 0 propagates it, as in BLAS and PyTorch
    assert np.isnan(ember.addmm(nan, a, b, beta=0.5).numpy()).all()


def test_alpha_zero_does_not_read_the_product():
    for size in (2, 64):  # the row-wise and the packed kernel
        nan = ember.full((size, size), float("nan"))
        out = ember.addmm(ember.ones(size, size), nan, nan, alpha=0)
        assert (out.numpy() == 1).all()
        out = ember.addmm(ember.ones(size, size), nan, nan, alpha=0, beta=0)
        assert (out.numpy() == 0).all()


def test_baddbmm_matches_numpy():
    rng = np.random.default_rng(0)
    ea, na = operand(rng, (3, 4, 5), np.float64, "transposed")
    eb, nb = operand(rng, (3, 5, 2), np.float64, "contiguous")
    ec, nc = operand(rng, (4, 2), np.float64, "contiguous")
    want = 2 * nc + 0.5 * np.matmul(na, nb)
    check_close(ember.baddbmm(ec, ea, eb, beta=2, alpha=0.5), want, 5)
    check_close(ec.baddbmm(ea, eb, beta=2, alpha=0.5), want, 5)


def test_integer_products_wrap_around():
    a = ember.tensor([[100, 100]], dtype=ember.int8)
    assert (a @ a.T).tolist() == [[32]]  # 20000 mod 256, as PyTorch
    big = ember.tensor([2**62, 2**62], dtype=ember.int64)
    assert ember.dot(big, ember.tensor([2, 2], dtype=ember.int64)).item() == 0


def test_empty_products():
    assert ember.mm(ember.ones(0, 3), ember.ones(3, 4)).shape == (0, 4)
    assert ember.mm(ember.ones(2, 0), ember.ones(0, 4)).tolist() == [[0.0] * 4] * 2
    assert ember.dot(ember.ones(0), ember.ones(0)).item() == 0.0
    assert ember.matmul(ember.ones(0, 2, 3), ember.ones(3, 5)).shape == (0, 2, 5)
    nan = ember.full((2, 2), float("nan"))
    assert ember.addmm(nan, ember.ones(2, 0), ember.ones(0, 2), beta=0).tolist() == [[0.0] * 2] * 2


# ---- out= and in-place -----------------------------------------------------------


def test_out_receives_the_result():
    a, b = ember.ones(2, 3), ember.ones(3, 4)
    out = ember.empty(2, 4)
    version = out._version
    assert ember.mm(a, b, out=out) is out
    assert out.tolist() == [[3.0] * 4] * 2
    assert out._version == version + 1
    assert ember.matmul(a, b, out=out) is out
    c = ember.zeros(4)
    assert ember.addmm(c, a, b, beta=1, alpha=2, out=out) is out
    assert out.tolist() == [[6.0] * 4] * 2


def test_out_transposed_view():
    a, b = ember.ones(2, 3), ember.ones(3, 4)
    base = ember.zeros(4, 2)
    ember.mm(a, b, out=base.T)
    assert base.tolist() == [[3.0, 3.0]] * 4


def test_out_overlapping_an_operand():
    a = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    want = (a.numpy() @ a.numpy()).tolist()
    assert ember.mm(a, a, out=a) is a
    assert a.tolist() == want


@pytest.mark.parametrize("out_shape,out_dtype,message", [
    ((2, 3), ember.float32, "Expected out tensor to have shape [2, 4], but got [2, 3] instead"),
    ((2, 4), ember.float64, "Expected out tensor to have dtype float, but got double instead"),
])
def test_out_refused_leaves_it_unchanged(out_shape, out_dtype, message):
    a, b = ember.ones(2, 3), ember.ones(3, 4)
    out = ember.full(out_shape, 7.0, dtype=out_dtype)
    for call in (lambda: ember.mm(a, b, out=out), lambda: ember.matmul(a, b, out=out),
                 lambda: ember.addmm(ember.zeros(4), a, b, out=out)):
        with pytest.raises(RuntimeError) as info:
            call()
        assert str(info.value) == message
        assert (out.numpy() == 7.0).all()


def test_out_with_shared_elements_refused():
    out = ember.zeros(1, 2).expand(2, 2)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        ember.mm(ember.ones(2, 2), ember.ones(2, 2), out=out)


def test_addmm_in_place():
    c = ember.ones(2, 2)
    version = c._version
    assert c.addmm_(ember.ones(2, 3), ember.ones(3, 2), beta=2, alpha=1) is c
    assert c.tolist() == [[5.0, 5.0]] * 2
    assert c._version == version + 1
    b = ember.zeros(2, 2, 2)
    b.baddbmm_(ember.ones(2, 2, 3), ember.ones(2, 3, 2))
    assert b.tolist() == [[[3.0, 3.0]] * 2] * 2


def test_addmm_in_place_shape_refused():
    c = ember.ones(2, 1)
    with pytest.raises(RuntimeError) as info:
        c.addmm_(ember.ones(2, 3), ember.ones(3, 2))
    assert str(info.value) == ("Bad in-place call: input tensor size [2, 1] and output "
                               "tensor size [2, 2] should match")
    assert c.tolist() == [[1.0], [1.0]]


# ---- the @ operator ------------------------------------------------------------


def test_matmul_operator_and_rebinding_imatmul():
    a = ember.ones(2, 2)
    alias = a
    a @= ember.full((2, 2), 2.0)
    # like PyTorch: a is rebound to a new tensor, the old one is untouched
    assert a.tolist() == [[4.0, 4.0]] * 2
    assert alias.tolist() == [[1.0, 1.0]] * 2


@pytest.mark.parametrize("other", [3, [1.0, 2.0], None])
def test_matmul_operator_non_tensor(other):
    with pytest.raises(TypeError, match="unsupported operand type"):
        ember.ones(2) @ other
    with pytest.raises(TypeError, match="unsupported operand type"):
        other @ ember.ones(2)


def test_argument_errors():
    with pytest.raises(TypeError, match=r"mm\(\): argument 'mat2' \(position 2\) must be Tensor, not int"):
        ember.mm(ember.ones(2, 2), 3)
    with pytest.raises(TypeError, match="missing required argument 'mat2'"):
        ember.mm(ember.ones(2, 2))
    with pytest.raises(TypeError, match="unexpected keyword argument 'beta'"):
        ember.mm(ember.ones(2, 2), ember.ones(2, 2), beta=1)
    with pytest.raises(TypeError, match="at most 2 positional arguments"):
        ember.addmm(ember.ones(2, 2), ember.ones(2, 2), ember.ones(2, 2), 1, 1)
    assert ember.mm(ember.ones(2, 2), mat2=ember.ones(2, 2)).shape == (2, 2)
    assert ember.addmm(ember.ones(2), mat1=ember.ones(2, 2), mat2=ember.ones(2, 2),
                       alpha=2).tolist() == [[5.0, 5.0]] * 2


# ---- PyTorch parity ------------------------------------------------------------

f32, f64, i64, b8 = "float32", "float64", "int64", "bool"

# (function, [(shape, dtype) of each tensor argument], keyword arguments)
PARITY_CASES = [
    ("matmul", [((3,), f32), ((3,), f32)], {}),
    ("matmul", [((3,), f32), ((4,), f32)], {}),
    ("matmul", [((), f32), ((3,), f32)], {}),
    ("matmul", [((3,), f32), ((4, 5), f32)], {}),
    ("matmul", [((2, 3), f32), ((4, 5), f32)], {}),
    ("matmul", [((3, 4), f32), ((5,), f32)], {}),
    ("matmul", [((2, 2, 3), f32), ((4, 5), f32)], {}),
    ("matmul", [((2, 2, 3), f32), ((4,), f32)], {}),
    ("matmul", [((2, 4), f32), ((2, 3, 2), f32)], {}),
    ("matmul", [((4,), f32), ((2, 3, 2), f32)], {}),
    ("matmul", [((5, 2, 4), f32), ((3, 4, 2), f32)], {}),
    ("matmul", [((2, 5, 2, 4), f32), ((3, 4, 2), f32)], {}),
    ("matmul", [((5, 1, 2, 4), f32), ((3, 4, 2), f32)], {}),
    ("matmul", [((1, 2, 4), f32), ((3, 1, 5, 2), f32)], {}),
    ("matmul", [((3,), f32), ((3,), f64)], {}),
    ("matmul", [((2, 3), f32), ((3, 2), f64)], {}),
    ("matmul", [((2, 2, 3), f32), ((3,), f64)], {}),
    ("matmul", [((3, 2), f64), ((2,), i64)], {}),
    ("matmul", [((2, 2, 3), f32), ((2, 3, 2), f64)], {}),
    ("matmul", [((3,), b8), ((3,), b8)], {}),
    ("matmul", [((2, 3), b8), ((3,), b8)], {}),
    ("matmul", [((2, 3), b8), ((3, 2), b8)], {}),
    ("matmul", [((2, 2, 3), b8), ((2, 3, 2), b8)], {}),
    ("matmul", [((2, 3), i64), ((3, 2), i64)], {}),
    ("mm", [((2, 3), f32), ((4, 5), f32)], {}),
    ("mm", [((2, 3, 1), f32), ((2, 4), f32)], {}),
    ("mm", [((2, 3), f32), ((3,), f32)], {}),
    ("mm", [((2, 3), f32), ((3, 2), f64)], {}),
    ("mm", [((2, 3), b8), ((3, 5), f32)], {}),
    ("bmm", [((2, 2, 3), f32), ((3, 3, 2), f32)], {}),
    ("bmm", [((2, 2, 3), f32), ((2, 4, 2), f32)], {}),
    ("bmm", [((2, 3), f32), ((2, 4, 2), f32)], {}),
    ("bmm", [((2, 2, 3), f32), ((2, 3), f32)], {}),
    ("bmm", [((2, 2, 3), f64), ((2, 3, 2), f32)], {}),
    ("bmm", [((2, 2, 3), b8), ((2, 3, 2), b8)], {}),
    ("mv", [((3, 4), f32), ((5,), f32)], {}),
    ("mv", [((2,), f32), ((3,), f32)], {}),
    ("mv", [((2, 3), f32), ((3, 1), f32)], {}),
    ("mv", [((2, 3), f32), ((3,), f64)], {}),
    ("dot", [((3,), f32), ((4,), f32)], {}),
    ("dot", [((2, 3), f32), ((3,), f32)], {}),
    ("dot", [((3,), f32), ((3,), f64)], {}),
    ("dot", [((3,), b8), ((3,), b8)], {}),
    ("vdot", [((3,), f32), ((3,), f64)], {}),
    ("outer", [((2, 3), f32), ((3,), f32)], {}),
    ("outer", [((3,), f32), ((2, 2), f32)], {}),
    ("outer", [((2,), i64), ((3,), f32)], {}),
    ("outer", [((2,), b8), ((3,), b8)], {}),
    ("addmm", [((3,), f32), ((2, 3), f32), ((3, 3), f32)], {}),
    ("addmm", [((4,), f32), ((2, 3), f32), ((3, 3), f32)], {}),
    ("addmm", [((2, 2, 2), f32), ((2, 3), f32), ((3, 2), f32)], {}),
    ("addmm", [((2, 2), f32), ((2, 3, 1), f32), ((3, 2), f32)], {}),
    ("addmm", [((2, 2), f32), ((2, 3), f32), ((4, 2), f32)], {}),
    ("addmm", [((2, 2), f32), ((2, 3), f32), ((3, 2), f64)], {}),
    ("addmm", [((2, 2), f64), ((2, 3), f32), ((3, 2), f64)], {}),
    ("addmm", [((2, 2), b8), ((2, 3), b8), ((3, 2), b8)], {}),
    ("addmm", [((2, 2), i64), ((2, 3), i64), ((3, 2), i64)], {"beta": 0.5, "alpha": 1.5}),
    ("baddbmm", [((2, 2), f32), ((2, 2, 3), f32), ((2, 3, 2), f32)], {"beta": 2}),
    ("baddbmm", [((3, 2, 2), f32), ((2, 2, 3), f32), ((2, 3, 2), f32)], {}),
    ("baddbmm", [((2, 2), f64), ((2, 2, 3), f32), ((2, 3, 2), f32)], {}),
    ("baddbmm", [((2, 2), f32), ((2, 2, 3), f32), ((2, 3, 2), f64)], {}),
    ("baddbmm", [((2, 2), f32), ((2, 2, 3), f32), ((2, 4, 2), f32)], {}),
]


def outcome(module, name, args, kwargs):
    tensors = [module.ones(shape, dtype=getattr(module, dtype)) for shape, dtype in args]
    try:
        result = getattr(module, name)(*tensors, **kwargs)
    except Exception as exc:  # noqa: BLE001 -- the exception is the outcome
        return type(exc).__name__, str(exc)
    return tuple(result.shape), str(result.dtype).split(".")[-1], result.tolist()


@pytest.mark.parametrize("name,args,kwargs", PARITY_CASES)
def test_torch_parity(name, args, kwargs):
    torch = pytest.importorskip("torch")
    want = outcome(torch, name, args, kwargs)
    got = outcome(ember, name, args, kwargs)
    if want[0] == "RuntimeError" and "expand(torch.FloatTensor" in want[1]:
        want = (want[0], want[1].replace("torch.FloatTensor", "ember.Tensor"))
    assert got == want


def test_torch_parity_methods():
    torch = pytest.importorskip("torch")
    for name in ["matmul", "mm", "bmm", "mv", "dot", "vdot", "outer", "ger",
                 "addmm", "addmm_", "baddbmm", "baddbmm_"]:
        assert hasattr(torch.Tensor, name) and hasattr(ember.Tensor, name), name
    for name in ["matmul", "mm", "bmm", "mv", "dot", "vdot", "outer", "ger", "addmm", "baddbmm"]:
        assert hasattr(torch, name) and hasattr(ember, name), name


# ---- large products: every kernel family, one and two threads --------------------


@pytest.mark.noleakcheck
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_products_every_kernel_and_thread_count(dtype):
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (301, 203)).astype(dtype)
    b = rng.uniform(-1, 1, (203, 157)).astype(dtype)
    want = a @ b
    families = ["generic", "avx2", "avx512"]
    saved_kernel, saved_threads = ember._C._gemm_kernel(), ember.get_num_threads()
    try:
        for family in families:
            try:
                ember._C._gemm_kernel(family)
            except RuntimeError:
                continue  # not on this CPU
            for threads in (1, 2):
                ember.set_num_threads(threads)
                check_close(ember.tensor(a) @ ember.tensor(b), want, 203)
                # transposed operands and a wide (column-split) product
                check_close(ember.tensor(b).T @ ember.tensor(a).T, b.T @ a.T, 203)
    finally:
        ember._C._gemm_kernel(saved_kernel)
        ember.set_num_threads(saved_threads)


def test_gemm_kernel_knob():
    assert ember._C._gemm_kernel() in ("avx512", "avx2", "generic")
    with pytest.raises(ValueError, match="unknown GEMM kernel 'mmx'"):
        ember._C._gemm_kernel("mmx")


@pytest.mark.noleakcheck
def test_batched_broadcast_large():
    rng = np.random.default_rng(2)
    a = rng.uniform(-1, 1, (4, 1, 70, 80)).astype(np.float32)
    b = rng.uniform(-1, 1, (3, 80, 90)).astype(np.float32)
    check_close(ember.tensor(a) @ ember.tensor(b), np.matmul(a, b), 80)


@pytest.mark.noleakcheck
def test_concurrent_python_threads():
    """Large products release the GIL; two Python threads multiplying at once
    (one of them then runs its GEMM serially) both get the right answer."""
    import threading

    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (200, 150)).astype(np.float32)
    b = rng.uniform(-1, 1, (150, 180)).astype(np.float32)
    want = a @ b
    ea, eb = ember.tensor(a), ember.tensor(b)
    results = [None] * 4

    def work(i):
        results[i] = [(ea @ eb).numpy() for _ in range(3)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for per_thread in results:
        for got in per_thread:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_gemm_blocking_reports_the_family_and_blocks():
    info = ember._C._gemm_blocking()
    assert info["kernel"] == ember._C._gemm_kernel()
    assert len(info["caches"]) == 3 and all(size > 0 for size in info["caches"])
    for dtype in ("float32", "float64"):
        b = info[dtype]
        assert b["mc"] % b["mr"] == 0 and b["nc"] % b["nr"] == 0 and b["kc"] % 8 == 0


# The shapes whose path is picked by shape (Note [GEMM small products]):
# the batch-64 MLP's products and their backward, small outputs, a batch.
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape_a, shape_b, ta, tb", [
    ((64, 78), (12, 78), False, True), ((64, 12), (12, 78), False, False),
    ((64, 12), (64, 78), True, False), ((64, 12), (10, 12), False, True),
    ((8, 33, 40), (8, 40, 37), False, False), ((5, 20), (3, 20), False, True)])
def test_small_and_skinny_products(dtype, shape_a, shape_b, ta, tb):
    rng = np.random.default_rng(2)
    a = rng.uniform(-1, 1, shape_a).astype(dtype)
    b = rng.uniform(-1, 1, shape_b).astype(dtype)
    ea, eb = ember.tensor(a), ember.tensor(b)
    if ta:
        a, ea = a.swapaxes(-1, -2), ea.transpose(-1, -2)
    if tb:
        b, eb = b.swapaxes(-1, -2), eb.transpose(-1, -2)
    check_close(ea @ eb, a @ b, a.shape[-1])


def each_gemm_family():
    """Switches to each GEMM kernel family this CPU runs, yielding its name;
    the family in use before is back afterwards, also on a failure."""
    saved = ember._C._gemm_kernel()
    try:
        for family in ["generic", "avx2", "avx512"]:
            try:
                ember._C._gemm_kernel(family)
            except RuntimeError:
                continue  # not on this CPU
            yield family
    finally:
        ember._C._gemm_kernel(saved)


# Note [GEMM with few columns]: x @ W.t() with fewer outputs than the tile's
# columns runs as blocks of dot products along both operands' contiguous
# rows, under every family; odd k (a scalar tail), rows and columns that cut
# the blocks, a strided x (sliced columns: rows still contiguous along k),
# a batch folded into the rows, addmm's beta and a non-contiguous out.
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_few_columns_every_kernel(dtype):
    rng = np.random.default_rng(4)
    for _family in each_gemm_family():
        for m, n, k in [(64, 10, 128), (13, 3, 37), (7, 5, 4), (33, 2, 200)]:
            x = rng.uniform(-1, 1, (m, 2 * k)).astype(dtype)
            w = rng.uniform(-1, 1, (n, k)).astype(dtype)
            ex, ew = ember.tensor(x)[:, :k], ember.tensor(w)
            want = x[:, :k] @ w.T
            check_close(ex @ ew.t(), want, k)
            check_close(ember.tensor(x)[:, ::2] @ ew.t(), x[:, ::2] @ w.T, k)
            check_close(ember.nn.functional.linear(ex, ew), want, k)
            batched = ember.tensor(np.stack([x[:, :k]] * 2))
            check_close(batched @ ew.t(), np.stack([want] * 2), k)
            c = rng.uniform(-1, 1, (m, n)).astype(dtype)
            check_close(ember.addmm(ember.tensor(c), ex, ew.t(), beta=0.5, alpha=2),
                        0.5 * c + 2 * want, k)
            out = ember.zeros(n, m, dtype=ex.dtype).t()  # column-major out
            ember.matmul(ex, ew.t(), out=out)
            check_close(out, want, k)


# Note [GEMM small products] and [The narrow tile], every family this CPU
# runs: m, n, k up to 40 reach every floating path (the row-wise loop, the
# dot-product blocks, A read in place from its rows for at most four panels
# of columns, B read in place, every tile with its partial last row tile);
# each operand contiguous, transposed or stepped; addmm's beta and alpha;
# a batch of them (bmm) too.
@HYP
@given(m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 40),
       dtype=st.sampled_from([np.float32, np.float64]), la=layouts, lb=layouts,
       beta=st.sampled_from([0.0, 1.0, -0.5]), alpha=st.sampled_from([1.0, 2.0]),
       family=st.sampled_from(["generic", "avx2", "avx512"]), seed=st.integers(0, 2**31))
def test_small_products_every_path_and_family(m, n, k, dtype, la, lb, beta, alpha, family,
                                              seed):
    saved = ember._C._gemm_kernel()
    try:
        ember._C._gemm_kernel(family)
    except RuntimeError:
        return  # not on this CPU
    try:
        rng = np.random.default_rng(seed)
        (ea, na), (eb, nb) = operand(rng, (m, k), dtype, la), operand(rng, (k, n), dtype, lb)
        c = random_values(rng, (m, n), dtype)
        got = ember.addmm(ember.tensor(c), ea, eb, beta=beta, alpha=alpha)
        check_close(got, beta * c + alpha * (na @ nb), k)
        (ea, na), (eb, nb) = operand(rng, (3, m, k), dtype, la), operand(rng, (3, k, n), dtype, lb)
        check_close(ember.bmm(ea, eb), np.matmul(na, nb), k)
    finally:
        ember._C._gemm_kernel(saved)


# Note [Packing a column-major A] (c/th/THBlas.c): an A with row stride 1
# (a transposed matrix, a slice of one, an expanded column, rows that
# overlap) is packed a few columns of every panel at a time.  Small integers
# make every product exact, so any element packed into the wrong place
# shows; m, k and n take each tile of every family (MR 14, 10, 8, 6, 4) with
# a partial last panel, k a tail of the 8-column steps and more than one KC
# block, m more than one MC block.
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_column_major_a_packs_exactly_every_kernel(dtype):
    rng = np.random.default_rng(8)
    for family in each_gemm_family():
        for m, k, n in [(20, 13, 40), (47, 300, 37), (29, 530, 17), (520, 70, 33)]:
            base = rng.integers(-3, 4, (k, m + 5)).astype(dtype)
            b = rng.integers(-3, 4, (k, n)).astype(dtype)
            column = rng.integers(-3, 4, m + k).astype(dtype)
            cases = {
                "transposed slice": (ember.tensor(base)[:, 2:2 + m].t(), base[:, 2:2 + m].T),
                "expanded column": (ember.tensor(column[:m]).unsqueeze(1).expand(m, k),
                                    np.broadcast_to(column[:m, None], (m, k))),
                "overlapping rows": (ember.tensor(column).as_strided((m, k), (1, 1)),
                                     np.lib.stride_tricks.sliding_window_view(column, k)[:m]),
            }
            for case, (a, a_np) in cases.items():
                assert a.stride()[0] == 1
                got = (a @ ember.tensor(b)).numpy()
                np.testing.assert_array_equal(got, a_np @ b, err_msg=f"{family} {case}")
