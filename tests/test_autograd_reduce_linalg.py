"""Derivatives of the reductions (Reduce.c) and products (Linalg.c):
gradcheck in float64, parity with PyTorch's values and gradients, the
non-differentiable results and the registration of every operator name."""

import math

import numpy as np
import pytest

import ember
from autograd_utils import check_against_torch, check_gradcheck, leaf, noncontiguous

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

RNG = np.random.default_rng(1234)


def arr(*shape, dtype=np.float64, low=-1.0, high=1.0):
    return RNG.uniform(low, high, size=shape).astype(dtype)


def check_both(fn, *arrays, gradgrad=False, **tolerances):
    """gradcheck and torch parity of fn(lib, *tensors) at `arrays`."""
    check_gradcheck(fn, *arrays, **tolerances)
    check_against_torch(fn, *arrays)


def check_gradgrad(fn, *arrays):
    """gradgradcheck; skipped while a formula its backward uses (from another
    operator family) is not registered yet."""
    try:
        check_gradcheck(fn, *arrays, gradgrad=True)
    except NotImplementedError as error:
        pytest.skip(f"double backward needs another family's formula: {error}")


DIMS = [None, 0, -1, (0, 2), (-1, 0), ()]


# ---- sum, mean ------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["sum", "mean"])
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_mean_dims(op, dim, keepdim):
    a = arr(2, 3, 2)
    if dim is None:
        fn = (lambda lib, x: getattr(x, op)()) if not keepdim else \
             (lambda lib, x: getattr(lib, op)(x, dim=None, keepdim=True))
    else:
        def fn(lib, x):
            return getattr(lib, op)(x, dim, keepdim)
    check_both(fn, a)
    check_both(fn, noncontiguous(a))


@pytest.mark.parametrize("op", ["sum", "mean"])
def test_sum_mean_dtype_argument(op):
    a = arr(3, 4, dtype=np.float32)
    check_against_torch(lambda lib, x: getattr(x, op)(1, dtype=lib.float64), a)
    check_against_torch(lambda lib, x: getattr(lib, op)(x, dtype=lib.float64), a)


def test_sum_of_0d_and_empty():
    check_both(lambda lib, x: x.sum(0), np.array(1.5))
    check_against_torch(lambda lib, x: x.sum(0), np.zeros((0, 3)))
    check_against_torch(lambda lib, x: x.mean(1), np.zeros((0, 3)))


@pytest.mark.parametrize("op", ["sum", "mean"])
def test_gradients_accumulate_over_two_backwards(op):
    # the first .grad must own dense memory: the second adds into it in place
    x = leaf(arr(2, 3))
    getattr(x, op)().backward()
    getattr(x, op)(1).sum().backward()
    expected = 2.0 if op == "sum" else 1 / 6 + 1 / 3
    np.testing.assert_allclose(np.asarray(x.grad), np.full((2, 3), expected))


def test_sum_mean_gradgrad():
    check_gradgrad(lambda lib, x: (x.sum(1) ** 2).mean(), arr(2, 3))


# ---- prod -----------------------------------------------------------------------------

PROD_INPUTS = {
    "no zero": np.array([[0.5, -1.5, 2.0], [1.2, 0.7, -0.9]]),
    "one zero": np.array([[0.5, 0.0, 2.0], [1.2, 0.7, -0.9]]),
    "two zeros in a row": np.array([[0.0, 0.0, 2.0], [1.2, 0.7, -0.9]]),
    "zeros in two rows": np.array([[0.0, 1.5, 2.0], [1.2, 0.0, 0.0]]),
}


@pytest.mark.parametrize("values", PROD_INPUTS.values(), ids=PROD_INPUTS.keys())
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_prod(values, dim, keepdim):
    if dim is None:
        if keepdim:
            pytest.skip("prod takes keepdim only with a dim")
        fn = lambda lib, x: x.prod()  # noqa: E731
    else:
        def fn(lib, x):
            return lib.prod(x, dim, keepdim=keepdim)
    check_both(fn, values)
    check_both(fn, noncontiguous(values))


def test_prod_dtype_and_0d():
    check_against_torch(lambda lib, x: x.prod(dtype=lib.float64),
                        np.array([1.5, 0.0, 2.0], dtype=np.float32))
    check_both(lambda lib, x: x.prod(0), np.array(2.5))


def test_prod_gradgrad():
    check_gradgrad(lambda lib, x: x.prod(1), PROD_INPUTS["no zero"])


# ---- amax, amin, max, min ---------------------------------------------------------------

TIES = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, -1.0], [3.0, 0.5, 3.0]])


@pytest.mark.parametrize("op", ["amax", "amin"])
@pytest.mark.parametrize("dim", [(), 0, -1, (0, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_amax_amin_split_ties_evenly(op, dim, keepdim):
    check_against_torch(lambda lib, x: getattr(lib, op)(x, dim, keepdim), TIES)
    check_against_torch(lambda lib, x: getattr(lib, op)(x, dim, keepdim), noncontiguous(TIES))
    check_gradcheck(lambda lib, x: getattr(lib, op)(x, dim, keepdim), arr(3, 4))


@pytest.mark.parametrize("op", ["max", "min"])
def test_full_max_min_split_ties(op):
    check_against_torch(lambda lib, x: getattr(x, op)(), TIES)
    check_both(lambda lib, x: getattr(lib, op)(x), arr(2, 3))


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_dim_route_to_indices(op, dim, keepdim):
    def fn(lib, x):
        values, indices = getattr(lib, op)(x, dim, keepdim=keepdim)
        assert not indices.requires_grad
        return values
    check_both(fn, arr(3, 4))
    check_against_torch(fn, noncontiguous(arr(3, 4)))
    check_against_torch(lambda lib, x: getattr(x, op)(dim, keepdim)[0], np.ones((3, 3)))


def test_max_dim_node_has_two_outputs():
    x = leaf(arr(2, 3))
    values, indices = x.max(1)
    assert type(values.grad_fn).__name__ == "MaxBackward0"
    assert values.grad_fn.num_outputs == 2
    assert indices.grad_fn is None and not indices.requires_grad
    check_both(lambda lib, x: x.max(0)[0], np.array(1.5))


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_with_a_tensor_is_elementwise(op):
    if ember._C._autograd_handlers.get("maximum") is None:
        pytest.skip("maximum/minimum formulas (pointwise family) not merged yet")
    check_against_torch(lambda lib, x, y: getattr(lib, op)(x, y), arr(2, 3), arr(3))


ERROR_CALLS = [
    lambda lib, x: x.sum(2), lambda lib, x: x.sum((0, 0)), lambda lib, x: x.max(keepdim=True),
    lambda lib, x: x.softmax(), lambda lib, x: x.logsumexp(), lambda lib, x: x.prod((0, 1)),
    lambda lib, x: x.cumsum(3),
    lambda lib, x: x.matmul(x), lambda lib, x: x.mm(x.sum(0)), lambda lib, x: x.dot(x),
    lambda lib, x: lib.addmm(x, x, x), lambda lib, x: x.bmm(x), lambda lib, x: x.cumsum(),
]


@pytest.mark.parametrize("call", ERROR_CALLS)
def test_errors_are_torchs_with_grad(call):
    torch = pytest.importorskip("torch")
    a = arr(2, 3)
    with pytest.raises(Exception) as torch_error:
        call(torch, torch.from_numpy(a.copy()).requires_grad_())
    with pytest.raises(type(torch_error.value)):
        call(ember, leaf(a))


def test_max_min_gradgrad():
    check_gradgrad(lambda lib, x: x.amax(1) * x.max(0)[0].sum(), arr(2, 3))


# ---- logsumexp, var, std, norm ----------------------------------------------------------

@pytest.mark.parametrize("dim", [0, -1, (0, 1), (-1, 0)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_logsumexp(dim, keepdim):
    check_both(lambda lib, x: lib.logsumexp(x, dim, keepdim), arr(3, 4))
    check_against_torch(lambda lib, x: x.logsumexp(dim, keepdim=keepdim),
                        noncontiguous(arr(3, 4) * 50))


VAR_CALLS = {
    "default": lambda x: ((), {}),
    "unbiased False": lambda x: ((False,), {}),
    "dim unbiased keepdim": lambda x: ((1, False, True), {}),
    "dim tuple": lambda x: (((0, -1),), {}),
    "correction 0": lambda x: ((0,), {"correction": 0}),
    "correction 2 keepdim": lambda x: ((-1,), {"correction": 2, "keepdim": True}),
    "dim None correction": lambda x: ((None,), {"correction": 0.5}),
}


@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize("call", VAR_CALLS.values(), ids=VAR_CALLS.keys())
def test_var_std(op, call):
    def fn(lib, x):
        args, kwargs = call(x)
        return getattr(lib, op)(x, *args, **kwargs)
    check_both(fn, arr(3, 4))
    check_against_torch(fn, noncontiguous(arr(3, 4)))


@pytest.mark.parametrize("op", ["var_mean", "std_mean"])
@pytest.mark.parametrize("call", VAR_CALLS.values(), ids=VAR_CALLS.keys())
def test_var_mean_std_mean(op, call):
    def fn(lib, x):
        args, kwargs = call(x)
        return getattr(lib, op)(x, *args, **kwargs)
    check_both(fn, arr(3, 4))

    def spread_only(lib, x):
        return getattr(lib, op)(x, 1)[0]
    check_against_torch(spread_only, arr(3, 4))


def test_std_of_constant_has_zero_gradient():
    check_against_torch(lambda lib, x: x.std(1), np.ones((2, 3)))


def test_var_std_gradgrad():
    check_gradgrad(lambda lib, x: x.std(1) + x.var(), arr(2, 3))


@pytest.mark.parametrize("p", [2, 1, math.inf, -math.inf, "fro", 3, 1.5, None])
@pytest.mark.parametrize("dim", [None, 0, -1, (0, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_norm(p, dim, keepdim):
    def fn(lib, x):
        return lib.norm(x, p, dim, keepdim)
    check_against_torch(fn, arr(3, 4))
    check_against_torch(fn, noncontiguous(arr(3, 4)))
    if not (isinstance(p, float) and math.isinf(p)):
        check_gradcheck(fn, arr(3, 4))


def test_norm_at_zero_and_ties():
    check_against_torch(lambda lib, x: x.norm(), np.zeros((2, 3)))
    check_against_torch(lambda lib, x: x.norm(dim=1), np.array([[0.0, 0.0], [3.0, 4.0]]))
    check_against_torch(lambda lib, x: x.norm(math.inf), np.array([1.0, -2.0, 2.0]))
    check_against_torch(lambda lib, x: x.norm(dtype=lib.float64),
                        arr(3, dtype=np.float32))


def test_norm_gradgrad():
    check_gradgrad(lambda lib, x: x.norm(dim=1), arr(2, 3))


# ---- softmax, log_softmax, cumsum, cumprod -----------------------------------------------

@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_log_softmax(op, dim):
    check_both(lambda lib, x: getattr(lib, op)(x, dim), arr(3, 4) * 3)
    check_against_torch(lambda lib, x: getattr(x, op)(dim), noncontiguous(arr(2, 3, 4)))
    check_against_torch(lambda lib, x: getattr(x, op)(dim, dtype=lib.float64),
                        arr(3, 4, dtype=np.float32))
    check_both(lambda lib, x: getattr(x, op)(0), np.array(0.7))


def test_softmax_gradgrad():
    check_gradgrad(lambda lib, x: x.softmax(1) * x.log_softmax(0), arr(2, 3))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum(dim):
    check_both(lambda lib, x: lib.cumsum(x, dim), arr(3, 4))
    check_against_torch(lambda lib, x: x.cumsum(dim, dtype=lib.float64),
                        noncontiguous(arr(3, 4, dtype=np.float32)))
    check_both(lambda lib, x: x.cumsum(0), np.array(0.7))


@pytest.mark.parametrize("values", PROD_INPUTS.values(), ids=PROD_INPUTS.keys())
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumprod(values, dim):
    check_both(lambda lib, x: lib.cumprod(x, dim), values)
    check_against_torch(lambda lib, x: x.cumprod(dim, dtype=lib.float64),
                        noncontiguous(values.astype(np.float32)))


def test_scan_gradgrad():
    check_gradgrad(lambda lib, x: x.cumsum(1) * x.cumprod(0), arr(2, 3))


# ---- non-differentiable results, out= ----------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda lib, x: x.argmax(), lambda lib, x: lib.argmin(x, 1, keepdim=True),
    lambda lib, x: x.all(), lambda lib, x: lib.any(x, 0),
    lambda lib, x: x.count_nonzero(), lambda lib, x: lib.count_nonzero(x, (0, 1)),
])
def test_nondifferentiable_results(call):
    torch = pytest.importorskip("torch")
    a = arr(2, 3)
    result = call(ember, leaf(a))
    expected = call(torch, torch.from_numpy(a.copy()).requires_grad_())
    assert not result.requires_grad and result.grad_fn is None
    np.testing.assert_array_equal(np.asarray(result), expected.numpy())


@pytest.mark.parametrize("call", [
    lambda lib, x, out: lib.sum(x, 1, out=out), lambda lib, x, out: lib.mean(x, 1, out=out),
    lambda lib, x, out: lib.prod(x, 1, out=out), lambda lib, x, out: lib.amax(x, 1, out=out),
    lambda lib, x, out: lib.logsumexp(x, 1, out=out), lambda lib, x, out: lib.var(x, 1, out=out),
    lambda lib, x, out: lib.norm(x, dim=1, out=out),
    lambda lib, x, out: lib.mv(x, x.sum(0), out=out),
])
def test_out_is_refused(call):
    torch = pytest.importorskip("torch")
    a = arr(3, 3)
    x, out = leaf(a), ember.zeros(3, dtype=ember.float64)
    with pytest.raises(RuntimeError) as ember_error:
        call(ember, x, out)
    with pytest.raises(RuntimeError) as torch_error:
        call(torch, torch.from_numpy(a.copy()).requires_grad_(),
             torch.zeros(3, dtype=torch.float64))
    assert "don't support automatic differentiation" in str(ember_error.value)
    assert str(ember_error.value).split("(")[0] in str(torch_error.value)
    assert not np.any(np.asarray(out))


# ---- products ---------------------------------------------------------------------------

MATMUL_SHAPES = [
    ((3,), (3,)), ((2, 3), (3, 4)), ((3,), (3, 4)), ((2, 3), (3,)),
    ((2, 2, 3), (3, 4)), ((2, 2, 3), (3,)), ((3,), (2, 3, 4)),
    ((2, 1, 2, 3), (3, 3, 2)), ((2, 3), (2, 3, 4)), ((1, 2, 3), (2, 3, 2)),
]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul_every_case(shapes):
    a, b = arr(*shapes[0]), arr(*shapes[1])
    check_both(lambda lib, x, y: lib.matmul(x, y), a, b)
    check_against_torch(lambda lib, x, y: x @ y, noncontiguous(a), noncontiguous(b))


def test_matmul_one_operand_requires_grad():
    check_against_torch(lambda lib, x, y: x.matmul(y.detach()), arr(2, 2, 3), arr(3, 2))
    check_against_torch(lambda lib, x, y: x.detach().matmul(y), arr(2, 2, 3), arr(3, 2))


def test_imatmul_rebinds():
    def fn(lib, x, y):
        z = x * 1
        z @= y
        return z
    check_against_torch(fn, arr(2, 3), arr(3, 3))


def test_matmul_grad_fn_names():
    torch = pytest.importorskip("torch")
    for shapes in [((3,), (3,)), ((2, 3), (3,)), ((2, 3), (3, 2))]:
        x, y = leaf(arr(*shapes[0])), leaf(arr(*shapes[1]))
        tx = torch.zeros(shapes[0], dtype=torch.float64, requires_grad=True)
        ty = torch.zeros(shapes[1], dtype=torch.float64, requires_grad=True)
        assert type((x @ y).grad_fn).__name__ == type((tx @ ty).grad_fn).__name__


@pytest.mark.parametrize("name, shapes", [
    ("mm", ((2, 3), (3, 4))), ("bmm", ((2, 2, 3), (2, 3, 4))), ("mv", ((2, 3), (3,))),
    ("dot", ((3,), (3,))), ("vdot", ((3,), (3,))), ("outer", ((3,), (2,))),
    ("ger", ((3,), (2,))),
])
def test_products(name, shapes):
    a, b = arr(*shapes[0]), arr(*shapes[1])
    check_both(lambda lib, x, y: getattr(lib, name)(x, y), a, b)
    check_against_torch(lambda lib, x, y: getattr(x, name)(y), noncontiguous(a), noncontiguous(b))


def test_outer_promotes_and_casts_grads_back():
    check_against_torch(lambda lib, x, y: lib.outer(x, y), arr(3, dtype=np.float32), arr(2))


@pytest.mark.parametrize("input_shape", [(2, 4), (4,), (1, 4), (2, 1), ()])
@pytest.mark.parametrize("beta, alpha", [(1, 1), (0.5, -2.0), (0, 3)])
def test_addmm(input_shape, beta, alpha):
    fn = lambda lib, c, a, b: lib.addmm(c, a, b, beta=beta, alpha=alpha)  # noqa: E731
    check_both(fn, arr(*input_shape), arr(2, 3), arr(3, 4))
    check_against_torch(fn, arr(*input_shape), noncontiguous(arr(2, 3)), noncontiguous(arr(3, 4)))


@pytest.mark.parametrize("transposed", ["mat1", "mat2", "both"])
def test_addmm_grads_keep_column_major_operands_layout(transposed):
    # linear's addmm(bias, x, W.t()): W's gradient is computed in W's own
    # layout, so the leaf takes it without a copy (PyTorch's
    # mm_mat2_backward); the values are the same either way.
    m1 = arr(3, 5).T if transposed in ("mat1", "both") else arr(5, 3)
    m2 = arr(4, 3).T if transposed in ("mat2", "both") else arr(3, 4)
    fn = lambda lib, c, a, b: lib.addmm(c, a, b, beta=0.5, alpha=-2.0)  # noqa: E731
    check_both(fn, arr(4), m1, m2)
    weight = ember.tensor(arr(4, 3), requires_grad=True)
    inputs = arr(5, 3)
    x = ember.tensor(inputs, requires_grad=True)
    ember.addmm(ember.zeros(4, dtype=ember.float64), x, weight.t()).sum().backward()
    assert weight.grad.stride() == (3, 1) and x.grad.stride() == (3, 1)
    want = np.ones((5, 4)).T @ inputs
    np.testing.assert_allclose(weight.grad.numpy(), want, rtol=1e-12)


@pytest.mark.parametrize("input_shape", [(2, 2, 4), (2, 4), (1, 1, 4)])
@pytest.mark.parametrize("beta, alpha", [(1, 1), (0.5, -2.0)])
def test_baddbmm(input_shape, beta, alpha):
    fn = lambda lib, c, a, b: c.baddbmm(a, b, beta=beta, alpha=alpha)  # noqa: E731
    check_both(fn, arr(*input_shape), arr(2, 2, 3), arr(2, 3, 4))


@pytest.mark.parametrize("name, shapes", [
    ("addmm_", ((2, 4), (2, 3), (3, 4))), ("baddbmm_", ((2, 2, 4), (2, 2, 3), (2, 3, 4)))])
def test_inplace_add_products(name, shapes):
    def fn(lib, c, a, b):
        d = c * 1
        getattr(d, name)(a, b, beta=0.5, alpha=2.0)
        return d
    check_both(fn, *(arr(*s) for s in shapes))


def test_products_gradgrad():
    check_gradgrad(lambda lib, x, y: (x @ y).sum() * lib.mm(x, y), arr(2, 3), arr(3, 2))
    check_gradgrad(lambda lib, c, x, y: lib.addmm(c, x, y, beta=0.5), arr(2), arr(2, 3), arr(3, 2))


GRADGRAD_CASES = {
    "prod with zeros": (lambda lib, x: x.prod(1), PROD_INPUTS["zeros in two rows"]),
    "full prod with a zero": (lambda lib, x: x.prod(), PROD_INPUTS["one zero"]),
    "cumprod with zeros": (lambda lib, x: x.cumprod(1), PROD_INPUTS["two zeros in a row"]),
    "batched matmul": (lambda lib, x, y: x @ y, arr(2, 1, 2, 3), arr(3, 3, 2)),
    "N-D @ matrix": (lambda lib, x, y: x @ y, arr(2, 2, 3), arr(3, 2)),
    "vector @ N-D": (lambda lib, x, y: x @ y, arr(3), arr(2, 3, 2)),
    "mv": (lambda lib, x, y: x.mv(y), arr(2, 3), arr(3)),
    "outer": (lambda lib, x, y: lib.outer(x, y), arr(3), arr(2)),
    "baddbmm": (lambda lib, c, x, y: c.baddbmm(x, y, alpha=2.0, beta=0.5),
                arr(2, 1, 2), arr(2, 2, 3), arr(2, 3, 2)),
    "logsumexp": (lambda lib, x: x.logsumexp(1), arr(2, 3)),
    "std_mean": (lambda lib, x: lib.std_mean(x, 1), arr(2, 3)),
    "norm p=3": (lambda lib, x: x.norm(3, 1), arr(2, 3)),
    "log_softmax dtype": (lambda lib, x: x.log_softmax(1, dtype=lib.float64), arr(2, 3)),
}


@pytest.mark.parametrize("case", GRADGRAD_CASES.values(), ids=GRADGRAD_CASES.keys())
def test_gradgrad(case):
    fn, *arrays = case
    check_gradgrad(fn, *arrays)


@settings(max_examples=15, deadline=None)
@given(batch_a=st.lists(st.integers(1, 2), max_size=2),
       batch_b=st.lists(st.integers(1, 2), max_size=2),
       n=st.integers(1, 3), k=st.integers(1, 3), m=st.integers(1, 3),
       a_vector=st.booleans(), b_vector=st.booleans())
def test_matmul_broadcasting_hypothesis(batch_a, batch_b, n, k, m, a_vector, b_vector):
    a_shape = (k,) if a_vector else tuple(batch_a) + (n, k)
    b_shape = (k,) if b_vector else tuple(batch_b) + (k, m)
    check_against_torch(lambda lib, x, y: x @ y, arr(*a_shape), arr(*b_shape))


@settings(max_examples=15, deadline=None)
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=3), data=st.data())
def test_reductions_hypothesis(shape, data):
    # at least one dim: torch's var and logsumexp backward mishandle dim=()
    dims = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), min_size=1,
                              unique_by=lambda d: d % len(shape)))
    keepdim = data.draw(st.booleans())
    op = data.draw(st.sampled_from(["sum", "mean", "amax", "logsumexp", "var", "norm"]))
    dims = tuple(dims)
    if op == "norm":
        fn = lambda lib, x: x.norm(2, dims, keepdim)  # noqa: E731
    else:
        fn = lambda lib, x: getattr(x, op)(dims, keepdim=keepdim)  # noqa: E731
    check_against_torch(fn, arr(*shape))


# ---- registration -----------------------------------------------------------------------

REDUCE_NAMES = ["sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin",
                "var", "std", "norm", "logsumexp", "all", "any", "count_nonzero", "softmax",
                "log_softmax", "cumsum", "cumprod", "var_mean", "std_mean"]
LINALG_NAMES = ["matmul", "mm", "bmm", "mv", "dot", "vdot", "outer", "ger", "addmm",
                "baddbmm", "addmm_", "baddbmm_", "_gemm_kernel", "_gemm_blocking",
                "__matmul__"]


def test_every_operator_is_registered():
    handlers = ember._C._autograd_handlers
    assert not [n for n in REDUCE_NAMES + LINALG_NAMES if n not in handlers]
    op_names = set(ember._C._op_names())
    # the names above are exactly the two tables' (each is a THPOp)
    assert set(REDUCE_NAMES + LINALG_NAMES) - {"__matmul__"} <= op_names
    for name in ["argmax", "argmin", "all", "any", "count_nonzero"]:
        assert handlers[name] is None


def test_grad_fn_names_match_torch():
    torch = pytest.importorskip("torch")
    a = arr(2, 3)
    programs = [lambda lib, x: x.sum(), lambda lib, x: x.sum(1), lambda lib, x: x.mean(),
                lambda lib, x: x.mean(0), lambda lib, x: x.prod(), lambda lib, x: x.prod(1),
                lambda lib, x: x.amax(1), lambda lib, x: x.amin(), lambda lib, x: x.max(),
                lambda lib, x: x.min(1)[0], lambda lib, x: x.logsumexp(1),
                lambda lib, x: x.var(), lambda lib, x: x.std(1), lambda lib, x: x.norm(),
                lambda lib, x: x.softmax(1), lambda lib, x: x.log_softmax(0),
                lambda lib, x: x.cumsum(0), lambda lib, x: x.cumprod(1),
                lambda lib, x: lib.var_mean(x)[0], lambda lib, x: lib.std_mean(x)[1],
                lambda lib, x: lib.addmm(x, x, lib.ones(3, 3, dtype=lib.float64)),
                lambda lib, x: lib.outer(x.sum(0), x.sum(1))]
    for program in programs:
        ours = program(ember, leaf(a)).grad_fn
        theirs = program(torch, torch.from_numpy(a.copy()).requires_grad_()).grad_fn
        assert type(ours).__name__ == type(theirs).__name__
