"""Reductions, softmax and scans: sum, mean, prod, max/min, amax/amin,
argmax/argmin, var/std (+ var_mean/std_mean), norm, logsumexp, all/any,
count_nonzero, softmax/log_softmax, cumsum/cumprod.

Values are checked against NumPy on random layouts (contiguous, transposed,
stepped, expanded, offset views of one buffer, built with as_strided so
ember and NumPy read the same memory); dtypes, signatures and error messages
against PyTorch where it is installed.
"""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember

HYP = settings(max_examples=min(50, settings.default.max_examples), deadline=None)

ALL_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float32", "float64"]
FLOAT_DTYPES = ["float32", "float64"]
INT_DTYPES = ["uint8", "int8", "int16", "int32", "int64"]


def edt(name):
    return getattr(ember, name)


# ---- inputs: one NumPy view and the ember tensor over the same memory -------


def random_values(rng, n, dtype, small=False):
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(np.bool_)
    if dtype in INT_DTYPES:
        lo, hi = (-3, 4) if small else (-100, 100)
        if dtype == "uint8":
            lo = 0
        return rng.integers(lo, hi, n).astype(dtype)
    values = rng.standard_normal(n) * (1.0 if small else 10.0)
    return values.astype(dtype)


def ember_view(buf, view):
    """The ember tensor reading exactly the memory of NumPy `view` of `buf`."""
    base = ember.from_numpy(buf)
    item = buf.itemsize
    offset = (view.__array_interface__["data"][0] - buf.__array_interface__["data"][0]) // item
    strides = [s // item for s in view.strides]
    return base.as_strided(tuple(view.shape), tuple(strides), offset)


@st.composite
def inputs(draw, dtypes=ALL_DTYPES, max_ndim=4, small=False):
    """(ember tensor, numpy view) over one buffer, in a random layout."""
    dtype = draw(st.sampled_from(dtypes))
    ndim = draw(st.integers(0, max_ndim))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=ndim, max_size=ndim)))
    layout = draw(st.sampled_from(["contiguous", "transposed", "stepped", "expanded", "offset"]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    numel = math.prod(shape)
    if layout == "transposed" and ndim >= 2:
        perm = draw(st.permutations(range(ndim)))
        stored = tuple(shape[p] for p in perm)
        buf = random_values(rng, max(numel, 1), dtype, small)
        inverse = np.argsort(perm)
        view = buf[:numel].reshape(stored).transpose(inverse)
    elif layout == "stepped" and ndim >= 1:
        steps = draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim))
        big = tuple(s * k for s, k in zip(shape, steps))
        buf = random_values(rng, max(math.prod(big), 1), dtype, small)
        view = buf[:math.prod(big)].reshape(big)[tuple(slice(None, None, k) for k in steps)]
    elif layout == "expanded" and ndim >= 1:
        keep = draw(st.lists(st.booleans(), min_size=ndim, max_size=ndim))
        small_shape = tuple(s if k else 1 for s, k in zip(shape, keep))
        buf = random_values(rng, max(math.prod(small_shape), 1), dtype, small)
        view = np.broadcast_to(buf[:math.prod(small_shape)].reshape(small_shape), shape)
    else:
        offset = 3 if layout == "offset" else 0
        buf = random_values(rng, numel + offset + 1, dtype, small)
        view = buf[offset:offset + numel].reshape(shape)
    return ember_view(buf, view), view


@st.composite
def dims_for(draw, ndim, allow_none=True, allow_tuple=True):
    """None, an int or a tuple of distinct ints (negative ones too)."""
    rank = max(ndim, 1)
    choices = ["int"] + (["none"] if allow_none else []) + (["tuple"] if allow_tuple else [])
    kind = draw(st.sampled_from(choices))
    if kind == "none":
        return None
    if kind == "int":
        return draw(st.integers(-rank, rank - 1))
    picked = draw(st.lists(st.integers(0, rank - 1), unique=True, max_size=rank))
    return tuple(d - rank if draw(st.booleans()) else d for d in picked)


def np_axis(dim, ndim):
    """The NumPy axis for an ember dim (a 0-d tensor's dim 0 is no axis)."""
    if dim is None or ndim == 0:
        return None
    if isinstance(dim, tuple):
        if len(dim) == 0:
            return None
        return tuple(d % ndim for d in dim)
    return dim % ndim


def reduced_count(shape, axis):
    if axis is None:
        return math.prod(shape)
    axes = axis if isinstance(axis, tuple) else (axis,)
    return math.prod(shape[a] for a in axes)


def close(actual, expected, dtype, scale=None):
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape
    if dtype in ("float32", "float64"):
        tol = 2e-5 if dtype == "float32" else 1e-12
        scale = np.asarray(1.0 if scale is None else scale, dtype=np.float64)
        finite = scale[np.isfinite(scale)]
        atol = tol * max(1.0, float(finite.max()) if finite.size else 1.0)
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                                   rtol=tol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(actual, expected)


# ---- differential tests against NumPy ---------------------------------------


@HYP
@given(data=st.data())
def test_sum_matches_numpy(data):
    e, n = data.draw(inputs())
    dim = data.draw(dims_for(e.ndim))
    keepdim = data.draw(st.booleans())
    axis = np_axis(dim, e.ndim)
    result = e.sum(dim, keepdim=keepdim)
    acc = np.float64 if n.dtype.kind == "f" else np.int64
    expected = np.sum(n, axis=axis, keepdims=keepdim and n.ndim > 0, dtype=acc)
    want_dtype = str(n.dtype) if n.dtype.kind == "f" else "int64"
    assert result.dtype == edt(want_dtype)
    scale = np.sum(np.abs(n.astype(np.float64)), axis=axis, keepdims=keepdim and n.ndim > 0)
    close(result.numpy(), expected.astype(want_dtype), want_dtype, scale)
    assert ember.sum(e, dim=dim, keepdim=keepdim).shape == result.shape


@HYP
@given(data=st.data())
def test_mean_and_prod_match_numpy(data):
    e, n = data.draw(inputs(small=True))
    dim = data.draw(dims_for(e.ndim))
    keepdim = data.draw(st.booleans())
    axis = np_axis(dim, e.ndim)
    kd = keepdim and n.ndim > 0
    prod = e.prod(dim, keepdim) if isinstance(dim, int) else e.prod()
    prod_axis = axis if isinstance(dim, int) else None
    acc = np.float64 if n.dtype.kind == "f" else np.int64
    want = str(n.dtype) if n.dtype.kind == "f" else "int64"
    expected = np.prod(n, axis=prod_axis, keepdims=kd and isinstance(dim, int), dtype=acc)
    assert prod.dtype == edt(want)
    close(prod.numpy(), expected.astype(want), want,
          np.prod(np.abs(n.astype(np.float64)) + 1, axis=prod_axis,
                  keepdims=kd and isinstance(dim, int)))
    if n.dtype.kind == "f":
        mean = e.mean(dim, keepdim)
        with warnings.catch_warnings():  # NumPy warns on a mean of nothing
            warnings.simplefilter("ignore", RuntimeWarning)
            expected = np.mean(n.astype(np.float64), axis=axis, keepdims=kd)
        close(mean.numpy(), expected.astype(n.dtype), str(n.dtype))


@HYP
@given(data=st.data())
def test_amax_amin_match_numpy(data):
    e, n = data.draw(inputs())
    dim = data.draw(dims_for(e.ndim))
    keepdim = data.draw(st.booleans())
    axis = np_axis(dim, e.ndim)
    if reduced_count(n.shape, axis) == 0:
        with pytest.raises((RuntimeError, IndexError), match="amax"):
            e.amax(dim, keepdim)
        return
    kd = keepdim and n.ndim > 0
    np.testing.assert_array_equal(e.amax(dim, keepdim).numpy(), np.max(n, axis=axis, keepdims=kd))
    np.testing.assert_array_equal(e.amin(dim, keepdim).numpy(), np.min(n, axis=axis, keepdims=kd))
    assert e.amax(dim).dtype == e.dtype


@HYP
@given(data=st.data())
def test_max_min_argmax_with_dim_match_numpy(data):
    e, n = data.draw(inputs(dtypes=[d for d in ALL_DTYPES if d != "bool"], small=True))
    dim = data.draw(dims_for(e.ndim, allow_none=False, allow_tuple=False))
    keepdim = data.draw(st.booleans())
    axis = np_axis(dim, e.ndim)
    if reduced_count(n.shape, axis) == 0:
        with pytest.raises(IndexError, match="to have non-zero size"):
            e.max(dim)
        return
    kd = keepdim and n.ndim > 0
    values, indices = e.max(dim, keepdim)
    np.testing.assert_array_equal(values.numpy(), np.max(n, axis=axis, keepdims=kd))
    np.testing.assert_array_equal(indices.numpy(), np.argmax(n, axis=axis, keepdims=kd))
    values, indices = ember.min(e, dim=dim, keepdim=keepdim)
    np.testing.assert_array_equal(values.numpy(), np.min(n, axis=axis, keepdims=kd))
    np.testing.assert_array_equal(indices.numpy(), np.argmin(n, axis=axis, keepdims=kd))
    np.testing.assert_array_equal(e.argmax(dim, keepdim).numpy(), np.argmax(n, axis=axis, keepdims=kd))
    np.testing.assert_array_equal(e.argmin(dim).numpy(), np.argmin(n, axis=axis))


@HYP
@given(data=st.data())
def test_full_max_and_argmax_match_numpy(data):
    e, n = data.draw(inputs(dtypes=[d for d in ALL_DTYPES if d != "bool"], small=True))
    if n.size == 0:
        with pytest.raises(RuntimeError, match="Expected reduction dim to be specified"):
            e.max()
        with pytest.raises(IndexError, match="Expected reduction dim to be specified"):
            e.argmax()
        return
    assert e.max().item() == np.max(n)
    assert e.min().item() == np.min(n)
    assert e.argmax().item() == np.argmax(n)
    assert e.argmin().item() == np.argmin(n)
    assert ember.argmax(e, keepdim=True).shape == (1,) * e.ndim


@HYP
@given(data=st.data())
def test_var_std_match_numpy(data):
    e, n = data.draw(inputs(dtypes=FLOAT_DTYPES))
    dim = data.draw(dims_for(e.ndim))
    keepdim = data.draw(st.booleans())
    correction = data.draw(st.sampled_from([0, 1, 2]))
    axis = np_axis(dim, e.ndim)
    kd = keepdim and n.ndim > 0
    count = reduced_count(n.shape, axis)
    x = n.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.mean(x, axis=axis, keepdims=True) if count else np.full_like(
            np.sum(x, axis=axis, keepdims=True), np.nan)
        m2 = np.sum((x - mean) ** 2, axis=axis, keepdims=kd)
        expected = m2 / max(count - correction, 0)
    var = e.var(dim, correction=correction, keepdim=keepdim)
    std = e.std(dim, correction=correction, keepdim=keepdim)
    # var is scaled by the spread of the data (10**2) and float32 rounding
    close(var.numpy(), expected.astype(n.dtype), str(n.dtype), 100.0)
    close(std.numpy(), np.sqrt(expected).astype(n.dtype), str(n.dtype), 10.0)


@HYP
@given(data=st.data())
def test_norm_matches_numpy(data):
    e, n = data.draw(inputs(dtypes=FLOAT_DTYPES))
    dim = data.draw(dims_for(e.ndim))
    keepdim = data.draw(st.booleans())
    p = data.draw(st.sampled_from([2, 1, 3, 0.5, 0, float("inf"), float("-inf"), "fro"]))
    axis = np_axis(dim, e.ndim)
    kd = keepdim and n.ndim > 0
    count = reduced_count(n.shape, axis)
    a = np.abs(n.astype(np.float64))
    if p in (float("inf"), float("-inf")) and count == 0 and n.size == 0:
        with pytest.raises(RuntimeError, match="does not have an identity"):
            e.norm(p, dim, keepdim)
        return
    if p == float("inf"):
        expected = np.max(a, axis=axis, keepdims=kd)
    elif p == float("-inf"):
        expected = np.min(a, axis=axis, keepdims=kd)
    elif p == 0:
        expected = np.sum(a != 0, axis=axis, keepdims=kd).astype(np.float64)
    else:
        q = 2 if p == "fro" else p
        expected = np.sum(a ** q, axis=axis, keepdims=kd) ** (1 / q)
    close(e.norm(p, dim, keepdim).numpy(), expected.astype(n.dtype), str(n.dtype),
          np.sum(a, axis=axis, keepdims=kd))


@HYP
@given(data=st.data())
def test_logsumexp_matches_numpy(data):
    e, n = data.draw(inputs(dtypes=FLOAT_DTYPES + ["int32"]))
    dim = data.draw(dims_for(e.ndim, allow_none=False))
    axis = np_axis(dim, e.ndim)
    x = n.astype(np.float64)
    with np.errstate(divide="ignore"):
        expected = np.log(np.sum(np.exp(x), axis=axis))
    result = e.logsumexp(dim)
    want = str(n.dtype) if n.dtype.kind == "f" else "float32"
    assert result.dtype == edt(want)
    close(result.numpy(), expected.astype(want), want)


@HYP
@given(data=st.data())
def test_all_any_count_nonzero_match_numpy(data):
    e, n = data.draw(inputs(small=True))
    dim = data.draw(dims_for(e.ndim))
    keepdim = data.draw(st.booleans())
    axis = np_axis(dim, e.ndim)
    kd = keepdim and n.ndim > 0
    out_dtype = ember.uint8 if e.dtype == ember.uint8 else ember.bool
    for name, ref in (("all", np.all), ("any", np.any)):
        result = getattr(e, name)(dim, keepdim)
        assert result.dtype == out_dtype
        np.testing.assert_array_equal(result.numpy().astype(bool), ref(n, axis=axis, keepdims=kd))
    count = e.count_nonzero(dim)
    assert count.dtype == ember.int64
    np.testing.assert_array_equal(count.numpy(), np.count_nonzero(n, axis=axis))


@HYP
@given(data=st.data())
def test_cumsum_cumprod_match_numpy(data):
    e, n = data.draw(inputs(small=True))
    dim = data.draw(dims_for(e.ndim, allow_none=False, allow_tuple=False))
    axis = 0 if n.ndim == 0 else dim % n.ndim
    want = str(n.dtype) if n.dtype.kind == "f" else "int64"
    x = n.reshape(1) if n.ndim == 0 else n
    for name, ref in (("cumsum", np.cumsum), ("cumprod", np.cumprod)):
        result = getattr(e, name)(dim)
        assert result.dtype == edt(want)
        assert result.shape == e.shape
        expected = ref(x, axis=axis, dtype=np.float64 if want.startswith("float") else np.int64)
        close(result.numpy().reshape(x.shape), expected.astype(want), want,
              ref(np.abs(x.astype(np.float64)) + 1, axis=axis))


@HYP
@given(data=st.data())
def test_softmax_matches_float64_reference(data):
    e, n = data.draw(inputs(dtypes=FLOAT_DTYPES))
    dim = data.draw(dims_for(e.ndim, allow_none=False, allow_tuple=False))
    axis = 0 if n.ndim == 0 else dim % n.ndim
    x = (n.reshape(1) if n.ndim == 0 else n).astype(np.float64)
    shifted = x - (np.max(x, axis=axis, keepdims=True) if x.size else 0)
    with np.errstate(divide="ignore", invalid="ignore"):  # lines of length 0
        expected = np.exp(shifted) / np.sum(np.exp(shifted), axis=axis, keepdims=True)
        log_expected = shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
    soft = e.softmax(dim)
    close(soft.numpy().reshape(x.shape), expected.astype(n.dtype), str(n.dtype))
    close(ember.log_softmax(e, dim).numpy().reshape(x.shape), log_expected.astype(n.dtype),
          str(n.dtype), np.abs(log_expected))
    if x.size:
        np.testing.assert_allclose(np.sum(soft.numpy().reshape(x.shape).astype(np.float64), axis=axis),
                                   1.0, rtol=1e-5)


# ---- explicit cases ----------------------------------------------------------


def test_softmax_is_stable_for_large_inputs():
    x = ember.tensor([[1000.0, 1001.0, 1002.0], [-1000.0, -1000.0, -1000.0]])
    soft = x.softmax(1).numpy()
    np.testing.assert_allclose(soft[0], np.exp([-2, -1, 0]) / np.sum(np.exp([-2, -1, 0])), rtol=1e-6)
    np.testing.assert_allclose(soft[1], [1 / 3] * 3, rtol=1e-6)
    assert np.all(np.isfinite(x.log_softmax(1).numpy()))
    assert x.logsumexp(1).numpy()[0] == pytest.approx(1002 + math.log(np.sum(np.exp([-2, -1, 0]))))
    inf = ember.tensor([float("inf"), 1.0])
    assert inf.logsumexp(0).item() == float("inf")
    assert ember.tensor([float("-inf")] * 2).logsumexp(0).item() == float("-inf")


def test_softmax_exp_accuracy_and_special_values():
    # the float32 exps are vectorised (Note [Vectorisable exp] in THFloatFormulas.h)
    # (np.linspace leaks a reference per call in NumPy 2.x: built by hand)
    x = (np.arange(20001, dtype=np.float64) * (87 / 20000) - 87).astype(np.float32)
    ref = np.exp(x.astype(np.float64))
    np.testing.assert_allclose(ember.from_numpy(x).softmax(0).numpy(), ref / ref.sum(), rtol=2e-6,
                               atol=1e-38)  # float32 denormals hold few digits
    np.testing.assert_allclose(ember.from_numpy(x).logsumexp(0).item(), np.log(ref.sum()), rtol=1e-6)
    inf, nan = float("inf"), float("nan")
    assert ember.tensor([-inf, 0.0]).softmax(0).tolist() == [0.0, 1.0]
    assert ember.tensor([-200.0, 0.0]).softmax(0).tolist() == [0.0, 1.0]
    assert ember.tensor([-inf, 0.0]).log_softmax(0).tolist() == [-inf, 0.0]
    assert all(math.isnan(v) for v in ember.tensor([nan, 0.0, 1.0]).softmax(0).tolist())
    assert all(math.isnan(v) for v in ember.tensor([inf, 0.0]).softmax(0).tolist())
    wide = np.array([88.0, 80.0, -80.0, -100.0], dtype=np.float32)
    expected = np.exp(wide.astype(np.float64) - 88.0)
    np.testing.assert_allclose(ember.from_numpy(wide).softmax(0).numpy(), expected / expected.sum(),
                               rtol=2e-6, atol=1e-37)


def test_softmax_dtype_argument():
    i = ember.tensor([1, 2, 3])
    out = ember.softmax(i, 0, dtype=ember.float64)
    assert out.dtype == ember.float64
    assert i.softmax(0, ember.float32).dtype == ember.float32
    with pytest.raises(NotImplementedError, match="^\"softmax_lastdim_kernel_impl\" not implemented for 'Long'$"):
        i.softmax(0)
    with pytest.raises(NotImplementedError, match="^\"softmax_kernel_impl\" not implemented for 'Long'$"):
        ember.zeros(2, 3, dtype=ember.int64).softmax(0)
    with pytest.raises(NotImplementedError, match="^\"log_softmax_lastdim_kernel_impl\" not implemented for 'Bool'$"):
        ember.log_softmax(ember.tensor([True]), 0)
    with pytest.raises(TypeError, match="dim"):
        i.softmax()


def test_empty_reductions_follow_pytorch():
    e = ember.zeros(0, 3)
    assert e.sum().item() == 0
    assert e.prod().item() == 1
    assert math.isnan(e.mean().item())
    assert e.sum(0).tolist() == [0.0, 0.0, 0.0]
    assert e.all().item() is True and e.any().item() is False
    assert e.max(1).values.shape == (0,)
    assert e.amax(1).shape == (0,)
    assert e.logsumexp(0).tolist() == [float("-inf")] * 3
    assert e.norm().item() == 0
    with pytest.raises(RuntimeError, match=r"^max\(\): Expected reduction dim to be specified for "
                       r"input.numel\(\) == 0. Specify the reduction dim with the 'dim' argument.$"):
        e.max()
    with pytest.raises(IndexError, match=r"^max\(\): Expected reduction dim 0 to have non-zero size.$"):
        e.max(0)
    with pytest.raises(IndexError, match=r"^argmin\(\): Expected reduction dim to be specified"):
        e.argmin()
    with pytest.raises(RuntimeError, match="amin"):
        e.amin()
    with pytest.raises(RuntimeError, match="cannot compute the inf norm on an empty tensor"):
        e.norm(float("inf"))


def test_norms_take_magnitudes_with_the_sign_bit_clear():
    """|-0.0| is +0.0 and |-nan| is +nan, as PyTorch's abs: the inf norms
    return one of the magnitudes, sign bit and all."""
    def sign(value):
        return math.copysign(1.0, value)

    for dtype in (ember.float32, ember.float64):
        zeros = ember.tensor([-0.0, 1.0, -0.0], dtype=dtype)
        assert sign(ember.linalg.vector_norm(zeros, float("-inf")).item()) == 1.0
        assert sign(ember.linalg.vector_norm(zeros[::2], float("inf")).item()) == 1.0
        assert sign(zeros[:1].norm(1).item()) == 1.0
        columns = ember.tensor([[-0.0, -0.0], [-0.0, 1.0]], dtype=dtype)
        for dim in (0, 1):
            for order in (float("inf"), float("-inf")):
                norms = ember.linalg.vector_norm(columns, order, dim=dim).tolist()
                assert [sign(v) for v in norms] == [1.0, 1.0], (order, dim)
        nan = ember.tensor([-float("nan")], dtype=dtype)
        for order in (float("inf"), float("-inf"), 1):
            assert sign(ember.linalg.vector_norm(nan, order).item()) == 1.0, order


def test_nan_propagation():
    nan = float("nan")
    x = ember.tensor([1.0, nan, 3.0, nan])
    assert math.isnan(x.max().item()) and math.isnan(x.min().item())
    assert math.isnan(x.amax(0).item())
    assert x.argmax().item() == 1 and x.argmin().item() == 1
    values, indices = ember.tensor([[nan, 1.0, nan], [2.0, 5.0, 1.0]]).max(1)
    assert math.isnan(values[0].item()) and indices.tolist() == [0, 1]
    assert math.isnan(x.sum().item()) and math.isnan(x.norm(float("inf")).item())
    # over the outer dim of a row-major matrix (the columns driver)
    m = ember.tensor([[1.0, nan, 0.0], [nan, 2.0, 5.0], [3.0, 4.0, 1.0]])
    assert [math.isnan(v) for v in m.amax(0).tolist()] == [True, True, False]
    assert [math.isnan(v) for v in m.amin(0).tolist()] == [True, True, False]
    assert m.amax(0)[2].item() == 5.0 and m.amin(0)[2].item() == 0.0
    # a long contiguous run takes the vectorised path
    long = ember.zeros(1000)
    long[700] = nan
    assert math.isnan(long.max().item()) and long.argmax().item() == 700


def test_argmax_ties_give_the_first_index():
    x = ember.tensor([[1, 3, 3, 0], [2, 2, 2, 2]])
    assert x.argmax(1).tolist() == [1, 0]
    assert x.argmin(1).tolist() == [3, 0]
    assert x.argmax().item() == 1
    assert x.max(0).indices.tolist() == [1, 0, 0, 1]


def test_integer_sums_promote_and_wrap_like_int64():
    assert ember.tensor([True, True, False]).sum().dtype == ember.int64
    assert ember.tensor([True, True, False]).sum().item() == 2
    x = ember.tensor(np.array([100, 100, 100], dtype=np.int8))
    assert x.sum().item() == 300 and x.sum().dtype == ember.int64
    assert x.sum(dtype=ember.int8).item() == np.int8(44)
    assert x.prod().item() == 1000000
    big = ember.tensor([2**62, 2**62, 2**62])
    assert big.sum().item() == np.sum(np.array([2**62] * 3, dtype=np.int64))
    assert ember.tensor([1.5, 2.5]).sum(dtype=ember.float64).dtype == ember.float64
    assert ember.tensor([1, 2]).sum(dtype=ember.float32).item() == 3.0
    assert ember.tensor([1, 2]).cumsum(0, dtype=ember.int32).dtype == ember.int32


def test_dim_errors():
    x = ember.zeros(2, 3)
    with pytest.raises(IndexError, match=r"^Dimension out of range \(expected to be in range of "
                       r"\[-2, 1\], but got 2\)$"):
        x.sum(2)
    with pytest.raises(IndexError, match=r"got -3"):
        x.amax(-3)
    with pytest.raises(IndexError, match=r"got 2"):
        x.max(2)
    with pytest.raises(IndexError, match=r"got 2"):
        x.cumsum(2)
    with pytest.raises(RuntimeError, match=r"^dim 0 appears multiple times in the list of dims$"):
        x.sum((0, -2))
    with pytest.raises(TypeError):
        x.sum(0.5)
    with pytest.raises(TypeError):
        x.argmax((0, 1))
    with pytest.raises(TypeError, match="keepdim"):
        x.sum(0, keepdim=1)
    with pytest.raises(TypeError, match="unexpected keyword"):
        x.sum(axis=0)
    with pytest.raises(TypeError, match="dim"):
        x.logsumexp()
    with pytest.raises(TypeError, match="dim"):
        x.cumsum()


def test_dtype_errors():
    i = ember.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match=r"^mean\(\): could not infer output dtype. Input dtype "
                       r"must be either a floating point or complex dtype. Got: Long$"):
        i.mean()
    with pytest.raises(RuntimeError, match=r"Optional dtype must be .* Got: Int$"):
        ember.zeros(2).mean(dtype=ember.int32)
    assert i.mean(dtype=ember.float64).item() == 2.0
    with pytest.raises(RuntimeError, match="^std and var only support floating point"):
        i.var()
    with pytest.raises(RuntimeError, match="^linalg.vector_norm: Expected a floating point"):
        i.norm()
    with pytest.raises(RuntimeError, match=r"^argmax\(\): does not support bool input$"):
        ember.tensor([True]).argmax()


def test_var_signatures():
    x = ember.tensor([[1.0, 2.0, 4.0], [3.0, 5.0, 9.0]])
    n = x.numpy().astype(np.float64)
    assert x.var().item() == pytest.approx(np.var(n, ddof=1))
    assert x.var(False).item() == pytest.approx(np.var(n))
    assert x.var(1, False).tolist() == pytest.approx(np.var(n, axis=1).tolist())
    assert x.var(1, True, True).shape == (2, 1)
    assert x.std(0, unbiased=False).tolist() == pytest.approx(np.std(n, axis=0).tolist())
    assert x.var(correction=0).item() == pytest.approx(np.var(n))
    assert math.isnan(ember.tensor([1.0]).var().item())
    var, mean = ember.var_mean(x, 1)
    assert var.tolist() == pytest.approx(np.var(n, axis=1, ddof=1).tolist())
    assert mean.tolist() == pytest.approx(np.mean(n, axis=1).tolist())
    std, mean = ember.std_mean(x, correction=0)
    assert std.item() == pytest.approx(np.std(n))
    with pytest.raises(RuntimeError, match="both unbiased and correction"):
        x.var(0, unbiased=True, correction=0)


def test_norm_signatures():
    x = ember.tensor([[3.0, -4.0], [0.0, 0.0]])
    assert x.norm().item() == 5.0
    assert x.norm(p="fro").item() == 5.0
    assert x.norm(1).item() == 7.0
    assert x.norm(2, 1, True).shape == (2, 1)
    assert ember.norm(x, float("inf")).item() == 4.0
    assert x.norm(float("-inf"), 1).tolist() == [3.0, 0.0]
    assert x.norm(0).item() == 2.0
    assert x.norm(dtype=ember.float64).dtype == ember.float64
    with pytest.raises(RuntimeError, match="nuc"):
        x.norm(p="nuc")


def test_max_return_type_is_a_named_tuple():
    x = ember.tensor([[1.0, 5.0], [7.0, 2.0]])
    result = x.max(1)
    assert type(result).__name__ == "max"
    assert type(result).__module__ == "ember.return_types"
    values, indices = result
    assert result.values.tolist() == [5.0, 7.0] and result.indices.tolist() == [1, 0]
    assert values is result[0] and indices is result[1]
    assert repr(result).startswith("ember.return_types.max(values=tensor(")
    assert type(ember.min(x, 0)).__name__ == "min"
    assert ember.return_types.max is type(result)
    assert ember.return_types.min is type(ember.min(x, 0))
    assert ember.max(x, dim=1, keepdim=True).values.shape == (2, 1)


def test_max_with_a_tensor_is_the_elementwise_maximum():
    a = ember.tensor([1.0, 5.0])
    b = ember.tensor([3.0, 2.0])
    assert ember.max(a, b).tolist() == [3.0, 5.0]
    assert a.min(b).tolist() == [1.0, 2.0]


def test_out_argument():
    x = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    out = ember.empty(2)
    result = ember.sum(x, 0, out=out)
    assert result is out and out.tolist() == [4.0, 6.0]
    ember.cumsum(x.flatten(), 0, out=ember.empty(4))
    wrong_dtype = ember.zeros(2, dtype=ember.int64)
    with pytest.raises(RuntimeError, match="dtype"):
        ember.sum(x, 0, dtype=ember.float32, out=wrong_dtype)
    assert wrong_dtype.tolist() == [0, 0]
    wrong_shape = ember.zeros(3)
    with pytest.raises(RuntimeError, match="shape"):
        ember.amax(x, 1, out=wrong_shape)
    assert wrong_shape.tolist() == [0.0, 0.0, 0.0]


def test_function_and_method_forms_agree():
    x = ember.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    for name in ("sum", "mean", "prod", "amax", "amin", "all", "any", "count_nonzero"):
        assert getattr(ember, name)(x).tolist() == getattr(x, name)().tolist()
    with pytest.raises(TypeError, match="must be Tensor"):
        ember.sum([1.0, 2.0])


def test_zero_dim_inputs():
    s = ember.tensor(3.0)
    assert s.sum(0).item() == 3.0 and s.sum(-1).shape == ()
    assert s.max(0).values.item() == 3.0 and s.argmax(0).item() == 0
    assert s.cumsum(0).item() == 3.0 and s.softmax(0).item() == 1.0
    with pytest.raises(IndexError, match=r"\[-1, 0\], but got 1"):
        s.sum(1)


# ---- large inputs: the parallel drivers and the accuracy -------------------


@pytest.mark.noleakcheck
@pytest.mark.parametrize("threads", [1, 2])
def test_float32_sum_of_2_24_values_is_accurate(threads):
    rng = np.random.default_rng(0)
    a = rng.random(1 << 24, dtype=np.float32)
    exact = float(np.sum(a, dtype=np.float64))  # pairwise in float64: error ~1e-16
    saved = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        ours = ember.from_numpy(a).sum().item()
        mean = ember.from_numpy(a).mean().item()
    finally:
        ember.set_num_threads(saved)
    numpy_error = abs(float(np.sum(a)) - exact) / exact
    our_error = abs(ours - exact) / exact
    assert our_error < 1e-5
    assert our_error < max(4 * numpy_error, 1e-6)
    assert abs(mean - exact / a.size) / (exact / a.size) < 1e-5
    # ones: a plain float loop would stop at 2**24
    ones = ember.ones(1 << 25)
    assert ones.sum().item() == 2**25


@pytest.mark.noleakcheck
@pytest.mark.parametrize("threads", [1, 2])
def test_large_reductions_on_every_driver(threads):
    rng = np.random.default_rng(1)
    saved = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        flat = rng.standard_normal(300_000).astype(np.float32)
        e = ember.from_numpy(flat)
        # split driver: the argmax index must be global, ties keep the first
        flat[10] = flat[250_000] = 100.0
        assert e.argmax().item() == 10
        assert e.max().item() == 100.0
        assert e.sum().item() == pytest.approx(float(np.sum(flat, dtype=np.float64)), abs=1e-2)
        var = float(np.var(flat.astype(np.float64), ddof=1))
        assert e.var().item() == pytest.approx(var, rel=1e-5)
        assert e.logsumexp(0).item() == pytest.approx(
            float(np.log(np.sum(np.exp(flat.astype(np.float64))))), rel=1e-6)
        # columns driver: sum over the outer dim of a row-major matrix
        m = rng.standard_normal((3000, 200)).astype(np.float32)
        em = ember.from_numpy(m)
        np.testing.assert_allclose(em.sum(0).numpy(), m.astype(np.float64).sum(0), rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(em.mean(0).numpy(), m.astype(np.float64).mean(0), rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(em.sum(0).numpy(), em.contiguous().sum(0).numpy())
        np.testing.assert_array_equal(em.amax(0).numpy(), m.max(0))
        np.testing.assert_allclose(em.var(0).numpy(), m.astype(np.float64).var(0, ddof=1), rtol=1e-4)
        np.testing.assert_allclose(em.narrow(0, 0, 20).prod(0).numpy(),
                                   m[:20].astype(np.float64).prod(0), rtol=1e-4)
        # per-output driver with many outputs
        np.testing.assert_allclose(em.sum(1).numpy(), m.astype(np.float64).sum(1), rtol=1e-4, atol=1e-3)
        np.testing.assert_array_equal(em.argmax(0).numpy(), np.argmax(m, axis=0))
        np.testing.assert_allclose(em.softmax(1).numpy().sum(1), 1.0, rtol=1e-5)
        np.testing.assert_allclose(em.cumsum(1).numpy(), np.cumsum(m, axis=1), rtol=1e-4, atol=1e-3)
        # lines in tiles: along dim 0, 200 columns = 3 full tiles and a part
        np.testing.assert_allclose(em.cumsum(0).numpy(), np.cumsum(m.astype(np.float64), axis=0),
                                   rtol=1e-4, atol=1e-2)
        np.testing.assert_allclose(em.softmax(0).numpy().sum(0), 1.0, rtol=1e-5)
        x64 = m.astype(np.float64)
        np.testing.assert_allclose(em.log_softmax(0).numpy(),
                                   x64 - np.log(np.exp(x64).sum(0)), rtol=1e-5, atol=1e-5)
    finally:
        ember.set_num_threads(saved)


@pytest.mark.noleakcheck
def test_results_are_deterministic_for_a_thread_count():
    rng = np.random.default_rng(2)
    e = ember.from_numpy(rng.standard_normal(1 << 20).astype(np.float32))
    saved = ember.get_num_threads()
    ember.set_num_threads(2)
    try:
        assert len({e.sum().item() for _ in range(5)}) == 1
    finally:
        ember.set_num_threads(saved)


# ---- PyTorch parity -----------------------------------------------------------


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def test_result_dtypes_match_torch(torch):
    for name in ALL_DTYPES:
        e = ember.zeros(2, 3, dtype=edt(name))
        t = torch.zeros(2, 3, dtype=getattr(torch, name))
        for op in ("sum", "prod", "amax", "amin", "all", "any", "count_nonzero"):
            assert str(getattr(e, op)().dtype).split(".")[1] == str(getattr(t, op)().dtype).split(".")[1], (name, op)
        for op in ("cumsum", "cumprod"):
            assert str(getattr(e, op)(0).dtype).split(".")[1] == str(getattr(t, op)(0).dtype).split(".")[1], (name, op)
        assert str(e.max(0).values.dtype) == str(t.max(0).values.dtype).replace("torch", "ember")
        if name in INT_DTYPES:
            assert e.logsumexp(0).dtype == ember.float32
            assert str(t.logsumexp(0).dtype) == "torch.float32"


def test_error_messages_match_torch(torch):
    cases = [
        lambda m, x: x.sum(2),
        lambda m, x: x.sum((0, 0)),
        lambda m, x: x.max(-3),
        lambda m, x: m.zeros(0, 3).max(),
        lambda m, x: m.zeros(0, 3).max(0),
        lambda m, x: m.zeros(0, 3).argmax(),
        lambda m, x: m.zeros(2, 0).amax(1),
        lambda m, x: m.zeros(3, dtype=m.int32).mean(),
        lambda m, x: x.mean(dtype=m.int64),
        lambda m, x: m.zeros(3, dtype=m.int32).var(),
        lambda m, x: m.zeros(3, dtype=m.bool).argmax(),
        lambda m, x: m.zeros(3, dtype=m.int32).norm(),
        lambda m, x: m.zeros(0).norm(float("inf")),
    ]
    for case in cases:
        with pytest.raises(Exception) as theirs:
            case(torch, torch.zeros(2, 3))
        with pytest.raises(Exception) as ours:
            case(ember, ember.zeros(2, 3))
        assert type(ours.value) is type(theirs.value)
        assert str(ours.value) == str(theirs.value).splitlines()[0]


def test_values_match_torch_for_named_cases(torch):
    data = np.array([[1.5, -2.0, 3.0], [0.0, 4.0, -1.0]], dtype=np.float32)
    e, t = ember.tensor(data), torch.tensor(data)
    for call in (lambda x: x.var(1, correction=0), lambda x: x.std(), lambda x: x.norm(3),
                 lambda x: x.logsumexp((0, 1)), lambda x: x.log_softmax(0), lambda x: x.cumprod(1),
                 lambda x: x.max(1).indices, lambda x: x.argmin(), lambda x: x.norm(p="fro", dim=0)):
        np.testing.assert_allclose(call(e).numpy(), call(t).numpy(), rtol=1e-6, atol=1e-6)


# out= of another dtype (Note [out= dtype of the reductions] in Reduce.c):
# each case is (name, call(lib, x, out)); x is 2x3, out has the result's shape.
OUT_DTYPE_CASES = {
    "sum": lambda m, x, out: m.sum(x, 0, out=out),
    "sum_dtype_float64": lambda m, x, out: m.sum(x, 0, dtype=m.float64, out=out),
    "sum_dtype_int32": lambda m, x, out: m.sum(x, 0, dtype=m.int32, out=out),
    "prod": lambda m, x, out: m.prod(x, 0, out=out),
    "mean": lambda m, x, out: m.mean(x, 0, out=out),
    "mean_dtype_float64": lambda m, x, out: m.mean(x, 0, dtype=m.float64, out=out),
    "amax": lambda m, x, out: m.amax(x, 0, out=out),
    "amin": lambda m, x, out: m.amin(x, 0, out=out),
    "all": lambda m, x, out: m.all(x, 0, out=out),
    "any": lambda m, x, out: m.any(x, 0, out=out),
    "logsumexp": lambda m, x, out: m.logsumexp(x, 0, out=out),
    "var": lambda m, x, out: m.var(x, 0, out=out),
    "std": lambda m, x, out: m.std(x, 0, out=out),
    "norm": lambda m, x, out: m.norm(x, 2, 0, out=out),
    "norm_dtype_float64": lambda m, x, out: m.norm(x, 2, 0, dtype=m.float64, out=out),
    "cumsum": lambda m, x, out: m.cumsum(x[0], 0, out=out),
    "cumsum_dtype_float64": lambda m, x, out: m.cumsum(x[0], 0, dtype=m.float64, out=out),
    "cumprod": lambda m, x, out: m.cumprod(x[0], 0, out=out),
    "logcumsumexp": lambda m, x, out: m.logcumsumexp(x[0], 0, out=out),
    "searchsorted": lambda m, x, out: m.searchsorted(x[0].sort().values, x[1], out=out),
    "searchsorted_out_int32": lambda m, x, out: m.searchsorted(x[0].sort().values, x[1],
                                                               out_int32=True, out=out),
    "bucketize": lambda m, x, out: m.bucketize(x[1], x[0].sort().values, out=out),
    "histc": lambda m, x, out: m.histc(x[0], 3, out=out),
}
OUT_DTYPES = ["bool", "uint8", "int32", "int64", "float16", "float32", "float64"]


def out_dtype_outcome(lib, name, input_dtype, out_dtype):
    """(exception type, message) or (dtype, values, out itself?) of one case."""
    data = [[0.5, -2.0, 3.75], [1.25, 4.0, -1.0]]
    x = lib.tensor(data, dtype=getattr(lib, input_dtype))
    out = lib.zeros(3, dtype=getattr(lib, out_dtype))
    try:
        result = OUT_DTYPE_CASES[name](lib, x, out)
    except Exception as error:  # noqa: BLE001 (the oracle's exception is the subject)
        if lib is ember:  # (PyTorch's mean has written out when its division refuses)
            assert out.tolist() == [0] * 3 and out._version == 0, "a refused out= is left alone"
        return type(error).__name__, str(error).splitlines()[0]
    return str(result.dtype).split(".")[1], result.tolist(), result is out


@pytest.mark.parametrize("input_dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("out_dtype", OUT_DTYPES)
@pytest.mark.parametrize("name", sorted(OUT_DTYPE_CASES))
def test_out_of_another_dtype_converts_or_raises_as_torch(torch, name, input_dtype, out_dtype):
    if name in ("histc", "logcumsumexp") and input_dtype == "int64" == out_dtype:
        pytest.skip("an integral input: PyTorch's NotImplementedError, the core's RuntimeError")
    theirs = out_dtype_outcome(torch, name, input_dtype, out_dtype)
    ours = out_dtype_outcome(ember, name, input_dtype, out_dtype)
    if theirs[0].endswith("Error"):
        assert ours == theirs
        return
    assert ours[0] == theirs[0] and ours[2] and theirs[2]
    tolerance = 2e-3 if out_dtype == "float16" else 1e-6
    np.testing.assert_allclose(np.array(ours[1], dtype=np.float64), np.array(theirs[1], dtype=np.float64),
                               rtol=tolerance, atol=tolerance)


# PyTorch 2.13's own outcomes, for runs without it (the leak gates run no torch).
OUT_DTYPE_EXPECTED = [
    ("sum", "float64", [1.75, 2.0, 2.75]),
    ("prod", "bool", [True, True, True]),
    ("mean", "int64", "result type Float can't be cast to the desired output type Long"),
    ("mean_dtype_float64", "float32", "Expected out tensor to have dtype double, but got float instead"),
    ("var", "float64", [0.28125, 18.0, 11.28125]),
    ("std", "int32", "result type Float can't be cast to the desired output type Int"),
    ("all", "uint8", [0, 1, 1]),
    ("any", "float32", "any only supports bool tensor for result, got: Float"),
    ("logsumexp", "int32", "logsumexp(): Expected floating point type for result tensor, but got: Int"),
    ("amax", "float64", "Expected the dtype for input and out to match, but got Float for input's dtype and "
                        "Double for out's dtype."),
    ("norm", "float64", "Expected out tensor to have dtype float, but got double instead"),
    ("cumsum", "bool", "\"cumsum_out_cpu\" not implemented for 'Bool'"),
    ("cumprod", "int64", [0, 0, 0]),
    ("logcumsumexp", "float64", "expected scalar_type Float but found Double"),
    ("searchsorted_out_int32", "int64", "torch.searchsorted(): output tensor's dtype is wrong, it can only be "
                                        "Int(int32) or Long(int64) depending on whether out_int32 flag is "
                                        "True, but we got output tensor's dtype Long and out_int32 flag is True"),
    ("histc", "float64", "torch.histogram: input tensor and hist tensor should have the same dtype, but got "
                         "input float and hist double"),
]


@pytest.mark.parametrize("name, out_dtype, expected", OUT_DTYPE_EXPECTED)
def test_out_of_another_dtype_without_torch(name, out_dtype, expected):
    outcome = out_dtype_outcome(ember, name, "float32", out_dtype)
    if isinstance(expected, str):
        assert outcome[1] == expected
    else:
        assert outcome[0] == out_dtype and outcome[2]
        np.testing.assert_allclose(np.array(outcome[1], dtype=np.float64), expected, rtol=1e-6)


def test_sum_into_an_integral_out_converts_each_element_first():
    # PyTorch sums in out's dtype: 0.5 + 0.75 -> 0 + 0, not int(1.25)
    out = ember.zeros((), dtype=ember.int64)
    assert ember.sum(ember.tensor([0.5, 0.75]), 0, out=out) is out and out.item() == 0
    assert ember.cumsum(ember.tensor([0.5, 0.75]), 0, out=ember.zeros(2, dtype=ember.int64)).tolist() == [0, 0]


@pytest.mark.noleakcheck
def test_gil_released_kernels_with_python_allocator_and_threads():
    # large inputs run without the GIL: a Python allocator must still work
    # (it takes the GIL back) and concurrent callers get the same results
    import threading
    from ember import memory

    a = np.random.default_rng(3).random((40, 40, 40), dtype=np.float32)
    e = ember.from_numpy(a)
    with memory.use_allocator(memory.CountingAllocator()) as alloc:
        r = e.sum((0, 2))  # dims that do not merge: a copy, allocated without the GIL
        np.testing.assert_allclose(r.numpy(), a.astype(np.float64).sum((0, 2)), rtol=1e-5)
        del r
    assert alloc.live_blocks == 0 and alloc.num_allocs >= 2
    results = []

    def work():
        for _ in range(5):
            results.append(e.sum().item())
            e.softmax(0)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 15 and len(set(results)) == 1
