"""Unary elementwise math: exp, log, trig, activations, rounding, the float
predicates and nan_to_num.

NumPy (computing in float64, or in the input dtype for the exact ops) is the
oracle for values, over random shapes and layouts (offset, permuted,
sliced, expanded); PyTorch is the oracle for result dtypes, rounding,
nan_to_num's defaults, gelu's two forms and the error messages.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember

HYP = settings(max_examples=min(30, settings.default.max_examples), deadline=None)

DTYPES = {
    "bool": (ember.bool, np.bool_),
    "uint8": (ember.uint8, np.uint8),
    "int8": (ember.int8, np.int8),
    "int16": (ember.int16, np.int16),
    "int32": (ember.int32, np.int32),
    "int64": (ember.int64, np.int64),
    "float32": (ember.float32, np.float32),
    "float64": (ember.float64, np.float64),
}
INT_NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64"]
FLOAT_NAMES = ["float32", "float64"]

# Relative tolerance by dtype: float32 results come from the f-suffixed libm
# functions (a few ulp), float64 ones from the double versions.
RTOL = {np.float32: 1e-6, np.float64: 1e-12}

_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return np.where(x < 0, np.exp(x) / (1 + np.exp(x)), 1 / (1 + np.exp(-x)))


def _gelu(x):
    return x * 0.5 * (1 + _erf(x / math.sqrt(2)))


def _gelu_tanh(x):
    inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
    return 0.5 * x * (1 + np.tanh(inner))


# ---- the op table ----------------------------------------------------------------
#
# Floating ops: name -> (float64 reference, input range).  The reference runs
# on the input converted to float64; the result is compared with RTOL.
FLOAT_OPS = {
    "exp": (np.exp, (-80, 80)),
    "exp2": (np.exp2, (-120, 120)),
    "expm1": (np.expm1, (-80, 80)),
    "log": (np.log, (-1, 50)),
    "log2": (np.log2, (-1, 50)),
    "log10": (np.log10, (-1, 50)),
    "log1p": (np.log1p, (-1.5, 50)),
    "sqrt": (np.sqrt, (-1, 50)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (-1, 50)),
    "reciprocal": (lambda x: 1 / x, (-50, 50)),
    "sin": (np.sin, (-20, 20)),
    "cos": (np.cos, (-20, 20)),
    "tan": (np.tan, (-20, 20)),
    "asin": (np.arcsin, (-1.2, 1.2)),
    "acos": (np.arccos, (-1.2, 1.2)),
    "atan": (np.arctan, (-50, 50)),
    "asinh": (np.arcsinh, (-80, 80)),
    "acosh": (np.arccosh, (0.5, 80)),
    "atanh": (np.arctanh, (-1.2, 1.2)),
    "sinh": (np.sinh, (-80, 80)),
    "cosh": (np.cosh, (-80, 80)),
    "tanh": (np.tanh, (-20, 20)),
    "sigmoid": (_sigmoid, (-100, 100)),
    "erf": (_erf, (-6, 6)),
    "erfc": (_erfc, (-6, 9)),
}
# Ops that refuse integer inputs; their formulas cancel (1 + erf(x) for
# negative x), so their tolerance is absolute, relative to |x|.
FLOAT_ONLY_OPS = {
    "gelu": (_gelu, (-10, 10)),
    "silu": (lambda x: x * _sigmoid(x), (-100, 100)),
}
# Exact ops: name -> reference in the input's own dtype.
EXACT_OPS = {
    "floor": np.floor,
    "ceil": np.ceil,
    "round": np.rint,  # half to even, as PyTorch
    "trunc": np.trunc,
    "frac": lambda x: x - np.trunc(x),
    "relu": lambda x: np.where(x < 0, x.dtype.type(0), x),
    "square": lambda x: x * x,
    "nan_to_num": np.nan_to_num,
    "isnan": np.isnan,
    "isinf": np.isinf,
    "isfinite": np.isfinite,
    "isposinf": np.isposinf,
    "isneginf": np.isneginf,
}
PREDICATES = ["isnan", "isinf", "isfinite", "isposinf", "isneginf"]
ALL_OPS = list(FLOAT_OPS) + list(FLOAT_ONLY_OPS) + list(EXACT_OPS)
# PyTorch has name_ for all of these but the predicates, gelu and silu.
INPLACE_OPS = [n for n in ALL_OPS if n not in PREDICATES + ["gelu", "silu"]]


def expected_dtype(name, in_name):
    """Note [Unary dtype rules] in c/th/THUnary.h; None when refused."""
    if name in PREDICATES:
        return "bool"
    if in_name in FLOAT_NAMES:
        return in_name
    if name in FLOAT_OPS:
        return "float32"
    if name in FLOAT_ONLY_OPS or name == "frac":
        return None
    if name == "square":
        return "int64" if in_name == "bool" else in_name
    if in_name == "bool" and name in ("floor", "ceil", "round", "trunc", "relu"):
        return None
    return in_name


# ---- strategies ---------------------------------------------------------------

dim_sizes = st.sampled_from([0, 1, 1, 2, 3, 4, 5])


def values_for(np_dtype, lo=-20.0, hi=20.0, specials=False):
    if np_dtype is np.bool_:
        return st.booleans()
    if np.issubdtype(np_dtype, np.integer):
        info = np.iinfo(np_dtype)
        return st.integers(max(info.min, -20), min(info.max, 40))
    width = 32 if np_dtype is np.float32 else 64
    finite = st.floats(float(np_dtype(lo)), float(np_dtype(hi)), width=width)
    if specials:
        return finite | st.sampled_from([math.nan, math.inf, -math.inf, -0.0])
    return finite


@st.composite
def layouts(draw, np_dtype, lo=-20.0, hi=20.0, specials=False):
    """(ember tensor, NumPy array) with the same values and layout:
    offset inside a buffer, then maybe permuted, sliced with steps and
    expanded."""
    shape = tuple(draw(st.lists(dim_sizes, max_size=3)))
    pad = draw(st.integers(0, 3))
    numel = math.prod(shape)
    buf = np.array(draw(st.lists(values_for(np_dtype, lo, hi, specials),
                                 min_size=numel + pad, max_size=numel + pad)),
                   dtype=np_dtype)
    n = buf[pad:].reshape(shape)
    e = ember.tensor(buf)[pad:].view(shape)
    for kind in draw(st.lists(st.sampled_from(["permute", "slice", "expand"]),
                              max_size=3)):
        if kind == "permute":
            perm = tuple(draw(st.permutations(range(n.ndim))))
            e, n = e.permute(perm), n.transpose(perm)
        elif kind == "slice":
            index = []
            for size in n.shape:
                start = draw(st.integers(0, size))
                index.append(slice(start, draw(st.integers(start, size)),
                                   draw(st.integers(1, 3))))
            index = tuple(index)
            e, n = e[index], n[index + (Ellipsis,)]
        else:
            target = tuple(draw(st.lists(st.integers(0, 3), max_size=int(n.ndim < 3))))
            target += tuple(draw(st.integers(0, 3)) if s == 1 else s for s in n.shape)
            e, n = e.expand(target), np.broadcast_to(n, target)
    assert tuple(e.shape) == n.shape
    return e, n


def check_close(got, expected, np_dtype, atol=0.0):
    """got (an ember tensor) matches expected within the dtype's tolerance:
    relative RTOL, plus `atol` (scalar or per element) and an absolute
    slack of the smallest normal number (subnormal results keep few
    digits); nan where expected is nan, infinities exactly."""
    got = np.asarray(got).astype(np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert got.shape == expected.shape
    # a float64 reference rounded to float32 can overflow to inf
    with np.errstate(over="ignore"):
        expected = expected.astype(np_dtype).astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(got[~finite], expected[~finite])
    atol = np.broadcast_to(np.asarray(atol, dtype=np.float64), expected.shape)[finite]
    g, x = got[finite], expected[finite]
    bound = atol + np.finfo(np_dtype).tiny + RTOL[np_dtype] * np.abs(x)
    bad = ~(np.abs(g - x) <= bound)
    assert not bad.any(), f"got {g[bad][:5]}, expected {x[bad][:5]}"


# ---- differential tests against NumPy -------------------------------------------------


@pytest.mark.parametrize("name", list(FLOAT_OPS))
@HYP
@given(data=st.data(), dtype=st.sampled_from(FLOAT_NAMES + FLOAT_NAMES + INT_NAMES))
def test_float_ops_match_numpy(name, dtype, data):
    nt = DTYPES[dtype][1]
    reference, (lo, hi) = FLOAT_OPS[name]
    e, n = data.draw(layouts(nt, lo, hi, specials=True))
    with np.errstate(all="ignore"):
        expected = reference(n.astype(np.float64))
    # integers and bools compute in the default float dtype
    out_dtype = dtype if dtype in FLOAT_NAMES else "float32"
    got = getattr(ember, name)(e)
    assert got.dtype == DTYPES[out_dtype][0]
    assert tuple(got.shape) == n.shape
    check_close(got, expected, DTYPES[out_dtype][1])
    check_close(getattr(e, name)(), expected, DTYPES[out_dtype][1])  # the method


@pytest.mark.parametrize("name", list(FLOAT_ONLY_OPS))
@HYP
@given(data=st.data(), dtype=st.sampled_from(FLOAT_NAMES))
def test_activations_match_numpy(name, dtype, data):
    nt = DTYPES[dtype][1]
    reference, (lo, hi) = FLOAT_ONLY_OPS[name]
    e, n = data.draw(layouts(nt, lo, hi))
    x = n.astype(np.float64)
    with np.errstate(all="ignore"):
        expected = reference(x)
    got = getattr(ember, name)(e)
    assert got.dtype == DTYPES[dtype][0]
    # absolute error up to a few ulp of |x| (1 + erf(x) cancels for x < 0)
    atol = 4 * np.finfo(nt).eps * np.maximum(np.abs(x), 1)
    check_close(got, expected, nt, atol=atol)


@HYP
@given(data=st.data(), dtype=st.sampled_from(FLOAT_NAMES))
def test_gelu_tanh_matches_numpy(data, dtype):
    nt = DTYPES[dtype][1]
    e, n = data.draw(layouts(nt, -10, 10))
    x = n.astype(np.float64)
    atol = 4 * np.finfo(nt).eps * np.maximum(np.abs(x), 1)
    check_close(ember.gelu(e, approximate="tanh"), _gelu_tanh(x), nt, atol=atol)


def _gelu_derivatives(x):
    """gelu's derivatives in float64 (autograd's GeluBackward0 uses them)."""
    exact = 0.5 * (1 + _erf(x / math.sqrt(2))) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    k, c = math.sqrt(2 / math.pi), 0.044715
    t = np.tanh(k * (x + c * x ** 3))
    tanh_form = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x)
    return exact, tanh_form


@HYP
@given(data=st.data(), dtype=st.sampled_from(FLOAT_NAMES))
def test_gelu_derivatives_match_numpy(data, dtype):
    nt = DTYPES[dtype][1]
    e, n = data.draw(layouts(nt, -10, 10))
    exact, tanh_form = _gelu_derivatives(n.astype(np.float64))
    atol = 8 * np.finfo(nt).eps
    check_close(ember._C._gelu_derivative(e), exact, nt, atol=atol)
    check_close(ember._C._gelu_tanh_derivative(e), tanh_form, nt, atol=atol)


@pytest.mark.parametrize("name", list(EXACT_OPS))
@HYP
@given(data=st.data(), dtype=st.sampled_from(FLOAT_NAMES + FLOAT_NAMES + INT_NAMES))
def test_exact_ops_match_numpy(name, dtype, data):
    et, nt = DTYPES[dtype]
    out_name = expected_dtype(name, dtype)
    e, n = data.draw(layouts(nt, -6, 6, specials=True))
    if out_name is None:
        with pytest.raises(RuntimeError):
            getattr(ember, name)(e)
        return
    if name == "square" and dtype == "bool":
        n = n.astype(np.int64)
    with np.errstate(all="ignore"):
        expected = EXACT_OPS[name](n)
    got = getattr(ember, name)(e)
    assert got.dtype == DTYPES[out_name][0]
    np.testing.assert_array_equal(np.asarray(got), expected)


@HYP
@given(data=st.data(), dtype=st.sampled_from(FLOAT_NAMES),
       decimals=st.integers(-3, 4))
def test_round_decimals_matches_its_formula(data, dtype, decimals):
    nt = DTYPES[dtype][1]
    e, n = data.draw(layouts(nt, -1000, 1000))
    scale = nt(10.0 ** abs(decimals))
    if decimals >= 0:
        expected = np.rint(n * scale) / scale
    else:
        expected = np.rint(n / scale) * scale
    got = ember.round(e, decimals=decimals)
    assert got.dtype == DTYPES[dtype][0]
    np.testing.assert_array_equal(np.asarray(got), expected)


@HYP
@given(data=st.data(), dtype=st.sampled_from(FLOAT_NAMES),
       nan=st.floats(-5, 5), posinf=st.none() | st.floats(-1e3, 1e3),
       neginf=st.none() | st.floats(-1e3, 1e3))
def test_nan_to_num_with_values_matches_numpy(data, dtype, nan, posinf, neginf):
    nt = DTYPES[dtype][1]
    e, n = data.draw(layouts(nt, specials=True))
    got = ember.nan_to_num(e, nan=nan, posinf=posinf, neginf=neginf)
    expected = np.nan_to_num(n, nan=nan, posinf=posinf, neginf=neginf)
    np.testing.assert_array_equal(np.asarray(got), expected)


# ---- layout, out= and in-place ------------------------------------------------------


@HYP
@given(data=st.data())
def test_result_is_laid_out_like_the_input(data):
    # Note [Preserving the layout]: the same strides as empty_like
    e, n = data.draw(layouts(np.float32))
    assert ember.exp(e).stride() == ember.empty_like(e).stride()
    assert ember.isnan(e).stride() == ember.empty_like(e, dtype=ember.bool).stride()
    i = ember.exp(e.to(ember.int32))  # converted first, same layout
    assert i.stride() == ember.empty_like(e).stride()


@HYP
@given(data=st.data(), name=st.sampled_from(INPLACE_OPS))
def test_inplace_matches_function_on_views(name, data):
    base = ember.tensor(np.linspace(-3, 3, 24, dtype=np.float64).reshape(4, 6))
    kind = data.draw(st.sampled_from(["t", "step", "offset", "plain"]))
    view = {"t": lambda b: b.t(), "step": lambda b: b[:, ::2],
            "offset": lambda b: b[1:, 2:], "plain": lambda b: b}[kind](base)
    before = np.asarray(base).copy()
    expected = getattr(ember, name)(view)
    version = base._version
    result = getattr(view, name + "_")()
    assert result is view
    assert base._version == version + 1  # bumped once, seen from the base
    np.testing.assert_array_equal(np.asarray(view), np.asarray(expected))
    # only the view's elements changed
    mask = np.zeros(before.shape, dtype=bool)
    {"t": lambda m: m.__setitem__(Ellipsis, True),
     "step": lambda m: m.__setitem__((slice(None), slice(None, None, 2)), True),
     "offset": lambda m: m.__setitem__((slice(1, None), slice(2, None)), True),
     "plain": lambda m: m.__setitem__(Ellipsis, True)}[kind](mask)
    np.testing.assert_array_equal(np.asarray(base)[~mask], before[~mask])


def test_inplace_ops_keep_integer_dtypes():
    x = ember.tensor([-2, 0, 3], dtype=ember.int32)
    assert x.relu_().tolist() == [0, 0, 3]
    assert x.square_().tolist() == [0, 0, 9]
    assert x.floor_().tolist() == [0, 0, 9] and x.dtype == ember.int32
    assert x.nan_to_num_().tolist() == [0, 0, 9]
    assert x._version == 4


def test_out_writes_converted_and_returns_out():
    x = ember.tensor([0.0, 1.0, 2.0], dtype=ember.float32)
    out = ember.empty(3, dtype=ember.float64)
    assert ember.exp(x, out=out) is out
    np.testing.assert_allclose(np.asarray(out), np.exp(np.array([0, 1, 2], dtype=np.float32)),
                               rtol=1e-7)
    assert out._version == 1
    i = ember.tensor([1, 4, 9])
    out64 = ember.empty(3, dtype=ember.float64)
    ember.sqrt(i, out=out64)
    assert out64.tolist() == [1.0, 2.0, 3.0]
    b = ember.empty(3, dtype=ember.bool)
    ember.isnan(ember.tensor([0.0, float("nan"), 1.0]), out=b)
    assert b.tolist() == [False, True, False]
    strided = ember.zeros(6, dtype=ember.float32)
    ember.square(x, out=strided[::2])
    assert strided.tolist() == [0.0, 0.0, 1.0, 0.0, 4.0, 0.0]
    assert ember.exp(x, out=None).tolist() == ember.exp(x).tolist()


def test_out_overlapping_the_input_reads_it_first():
    buf = ember.tensor([0.0, 1.0, 4.0, 9.0, 16.0], dtype=ember.float64)
    ember.sqrt(buf[:4], out=buf[1:])  # a shifted view of the input
    assert buf.tolist() == [0.0, 0.0, 1.0, 2.0, 3.0]
    same = ember.tensor([1.0, 4.0], dtype=ember.float64)
    assert ember.sqrt(same, out=same).tolist() == [1.0, 2.0]


@pytest.mark.parametrize("out_dtype, message", [
    ("int64", "result type Float can't be cast to the desired output type Long"),
    ("bool", "result type Float can't be cast to the desired output type Bool"),
])
def test_out_with_wrong_dtype_is_refused_and_unchanged(out_dtype, message):
    x = ember.tensor([1.0, 2.0], dtype=ember.float32)
    out = ember.zeros(2, dtype=DTYPES[out_dtype][0])
    with pytest.raises(RuntimeError, match=message):
        ember.exp(x, out=out)
    assert not np.asarray(out).any() and out._version == 0


def test_out_errors():
    x = ember.tensor([1.0, 2.0], dtype=ember.float32)
    out = ember.zeros(3, dtype=ember.float32)
    with pytest.raises(RuntimeError, match=r"exp\(\): the out tensor has shape \[3\] "
                                           r"but the result has shape \[2\]"):
        ember.exp(x, out=out)
    assert out.tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(TypeError, match=r"exp\(\): argument 'out' must be Tensor, not int"):
        ember.exp(x, out=1)
    with pytest.raises(RuntimeError, match="isposinf does not support non-boolean outputs"):
        ember.isposinf(x, out=ember.zeros(2, dtype=ember.float32))
    with pytest.raises(RuntimeError, match="Found dtype Float but expected Long"):
        ember.floor(ember.tensor([1, 2]), out=ember.zeros(2, dtype=ember.float32))
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        ember.exp(x, out=ember.zeros(1, dtype=ember.float32).expand(2))
    assert x.tolist() == [1.0, 2.0]


def test_inplace_errors_leave_the_tensor_unchanged():
    i = ember.tensor([1, 2])
    for name in ["exp_", "sqrt_", "sigmoid_"]:
        with pytest.raises(RuntimeError,
                           match="result type Float can't be cast to the desired output type Long"):
            getattr(i, name)()
    with pytest.raises(RuntimeError, match="Long can't be cast to the desired output type Bool"):
        ember.tensor([True]).square_()
    with pytest.raises(RuntimeError, match="Boolean inputs not supported for relu"):
        ember.tensor([True]).relu_()
    with pytest.raises(RuntimeError, match="\"frac\" not implemented for 'Long'"):
        i.frac_()
    with pytest.raises(RuntimeError, match="more than one element"):
        ember.tensor([1.0]).expand(3).exp_()
    assert i.tolist() == [1, 2] and i._version == 0
    a = np.array([1.0, 2.0], dtype=np.float32)
    a.flags.writeable = False
    with pytest.raises(RuntimeError, match="read-only"):
        ember.from_numpy(a).exp_()
    assert a.tolist() == [1.0, 2.0]


def test_argument_errors():
    x = ember.tensor([1.5], dtype=ember.float32)
    with pytest.raises(TypeError, match="must be Tensor, not float"):
        ember.exp(1.0)
    with pytest.raises(TypeError, match="missing required argument 'input'"):
        ember.exp()
    with pytest.raises(TypeError, match="takes at most 0 positional arguments"):
        ember.exp(x, x)
    with pytest.raises(TypeError, match="unexpected keyword argument 'alpha'"):
        x.exp(alpha=1)
    with pytest.raises(TypeError, match="'decimals' must be int, not float"):
        ember.round(x, decimals=1.0)
    with pytest.raises(TypeError, match="'decimals' must be int, not bool"):
        ember.round(x, decimals=True)
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh"):
        ember.gelu(x, approximate="foo")
    with pytest.raises(TypeError, match="'approximate' must be str, not NoneType"):
        ember.gelu(x, approximate=None)
    with pytest.raises(TypeError, match="'nan' must be float, not str"):
        ember.nan_to_num(x, nan="a")
    with pytest.raises(RuntimeError, match="\"round\" not implemented for 'Long'"):
        ember.round(ember.tensor([1]), decimals=0)
    with pytest.raises(RuntimeError, match="\"floor\" not implemented for 'Bool'"):
        ember.floor(ember.tensor([True]))
    assert ember.nan_to_num(x, 1.0, 2.0, 3.0).tolist() == [1.5]


# ---- special values ---------------------------------------------------------------------

SPECIALS = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.0, -1.0, 0.5, -0.5,
            2.5, -2.5, 1e-30, -1e-30, 1e30, -1e30, 1e-310, 100.0, -100.0, 800.0, -800.0]


@pytest.mark.parametrize("dtype", FLOAT_NAMES)
@pytest.mark.parametrize("name", list(FLOAT_OPS) + list(FLOAT_ONLY_OPS) + ["gelu_tanh"])
def test_special_values(name, dtype):
    et, nt = DTYPES[dtype]
    with np.errstate(all="ignore"):
        n = np.array(SPECIALS, dtype=nt)
        x = n.astype(np.float64)
        if name == "gelu_tanh":
            got = ember.gelu(ember.tensor(n), approximate="tanh")
            expected = _gelu_tanh(x)
        else:
            got = getattr(ember, name)(ember.tensor(n))
            expected = {**FLOAT_OPS, **FLOAT_ONLY_OPS}[name][0](x)
        expected = expected.astype(nt)
    cancels = name in ("gelu", "gelu_tanh", "silu")
    atol = 4 * np.finfo(nt).eps * np.maximum(np.abs(x), 1) if cancels else 0.0
    check_close(got, expected, nt, atol=atol)


def test_domain_errors_and_signed_zeros():
    x = ember.tensor([-1.0, -0.0, 0.0], dtype=ember.float32)
    assert np.isnan(ember.log(x)[0].item()) and np.isnan(ember.sqrt(x)[0].item())
    assert ember.log(x)[1].item() == -math.inf
    assert np.isnan(ember.asin(ember.tensor([2.0])).item())
    assert np.isnan(ember.log1p(ember.tensor([-2.0])).item())
    signs = lambda t: np.signbit(np.asarray(t)).tolist()  # noqa: E731
    assert signs(ember.sqrt(x)[1:]) == [True, False]
    assert signs(ember.relu(x)[1:]) == [True, False]  # PyTorch keeps -0.0
    assert signs(ember.trunc(ember.tensor([-0.5]))) == [True]
    assert signs(ember.round(ember.tensor([-0.5]))) == [True]
    assert ember.reciprocal(x)[1:].tolist() == [-math.inf, math.inf]
    assert ember.rsqrt(x)[1:].tolist() == [-math.inf, math.inf]
    assert np.isnan(ember.relu(ember.tensor([math.nan])).item())


def _ulp_error(got, exact, np_dtype):
    """|got - exact| in units of the last place of exact rounded to np_dtype
    (subnormal results count in units of the smallest subnormal)."""
    rounded = exact.astype(np_dtype)
    ulp = np.spacing(np.abs(rounded)).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / ulp


@pytest.mark.noleakcheck
@pytest.mark.parametrize("name", ["exp", "sigmoid", "tanh"])
def test_float32_exp_sigmoid_tanh_within_a_few_ulp(name):
    # these are evaluated by polynomials for float32 (Note [Vectorisable
    # exp] in c/th/THUnary.c): sweep exp's whole finite range densely,
    # subnormal results and the overflow edge included
    x = np.concatenate([np.linspace(-104, 89, 400_001, dtype=np.float32),
                        np.linspace(-1, 1, 100_001, dtype=np.float32),
                        np.float32(88.72283) + np.arange(-8, 8, dtype=np.float32) * 1e-5,
                        np.float32(-87.33654) + np.arange(-8, 8, dtype=np.float32) * 1e-5])
    got = np.asarray(getattr(ember, name)(ember.tensor(x)))
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore"):
        exact = {"exp": np.exp, "sigmoid": _sigmoid, "tanh": np.tanh}[name](x64)
        rounded = exact.astype(np.float32)
    finite = np.isfinite(rounded)
    np.testing.assert_array_equal(got[~finite], rounded[~finite])
    # expf itself is within 0.5 ulp (tanhf: 2.2); sigmoid adds a division
    # and a sum
    bound = {"exp": 1.5, "sigmoid": 2.5, "tanh": 2.0}[name]
    assert _ulp_error(got[finite], exact[finite], np.float32).max() <= bound


@pytest.mark.noleakcheck
def test_float32_exp_at_and_below_the_underflow_edge():
    # Note [Exp without underflow]: below -104 exp gives +0 without
    # computing an underflowing product.  Every float32 from -86 to -105:
    # a subnormal result is the exact value rounded to the subnormals'
    # grid up to the formula's own error (1.5 ulp of a normal float), so
    # nothing that rounds to 2^-149 or more is cut to 0; normal results
    # within 1.5 ulp; the results below the cut +0, never -0
    start, stop = np.float32(-86.0).view(np.uint32), np.float32(-105.0).view(np.uint32)
    x = np.arange(start, stop + 1, dtype=np.uint32).view(np.float32)
    got = np.asarray(ember.exp(ember.tensor(x))).astype(np.float64)
    exact = np.exp(x.astype(np.float64))
    step = float(np.spacing(np.float32(0)))            # the smallest subnormal
    subnormal = exact < np.finfo(np.float32).tiny
    error = np.abs(got - exact) / step
    allowed = 0.5 + 1.5 * 2.0**-23 * exact / step
    assert (error[subnormal] <= allowed[subnormal]).all()
    assert _ulp_error(got[~subnormal], exact[~subnormal], np.float32).max() <= 1.5
    assert (got[x < -104] == 0).all() and not np.signbit(got[x < -104]).any()
    assert got[x > -103.2].min() > 0          # 2^-149 and up: not cut to 0
    far = np.float32([-104.0, -150.0, -1e30, -np.finfo(np.float32).max, -np.inf, np.nan])
    out = np.asarray(ember.exp(ember.tensor(far)))
    assert out[:-1].tolist() == [0.0] * 5 and not np.signbit(out[:-1]).any()
    assert np.isnan(out[-1])
    # sigmoid reads exp(-|x|): its tails and softmax's masked entries
    tails = np.asarray(ember.sigmoid(ember.tensor(np.float32([-200.0, -np.inf, 200.0]))))
    assert tails.tolist() == [0.0, 0.0, 1.0]
    row = ember.tensor(np.float32([[0.0, -np.inf, -300.0, 1.0]]))
    np.testing.assert_array_equal(np.asarray(ember.softmax(row, dim=1))[0, 1:3], [0.0, 0.0])


@pytest.mark.noleakcheck
def test_float32_log_within_one_ulp_over_every_binade():
    # every 4099th positive float32 bit pattern: subnormals to the largest
    bits = np.arange(1, 0x7F800000, 4099, dtype=np.uint32)
    x = np.concatenate([bits.view(np.float32), np.float32([0.0, -0.0, -1.0, np.inf, -np.inf, np.nan])])
    got = np.asarray(ember.log(ember.tensor(x)))
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = np.log(x.astype(np.float64))
    finite = np.isfinite(exact)
    assert _ulp_error(got[finite], exact[finite], np.float32).max() <= 1.0
    assert got[-6:-3].tolist()[:2] == [-math.inf, -math.inf]
    assert np.isnan(got[-4]) and got[-3] == math.inf and np.isnan(got[-2:]).all()


def test_round_is_half_to_even():
    x = ember.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 0.49999997], dtype=ember.float32)
    assert ember.round(x).tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 4.0, 0.0]
    assert ember.round(ember.tensor([1234.5678]), decimals=-2).tolist() == [1200.0]


def test_sigmoid_is_stable_at_the_extremes():
    for et, big in [(ember.float32, 100.0), (ember.float64, 800.0)]:
        x = ember.tensor([-big, big, -math.inf, math.inf], dtype=et)
        got = ember.sigmoid(x).tolist()
        assert got[1:] == [1.0, 0.0, 1.0]
        assert 0.0 <= got[0] < 1e-40
    # the tiny tail survives instead of flushing to 0 early
    assert ember.sigmoid(ember.tensor([-100.0], dtype=ember.float32)).item() > 0


def test_nan_to_num_defaults_are_the_dtype_range():
    for et, nt in [(ember.float32, np.float32), (ember.float64, np.float64)]:
        x = ember.tensor([math.nan, math.inf, -math.inf, 1.5], dtype=et)
        info = np.finfo(nt)
        assert ember.nan_to_num(x).tolist() == [0.0, float(info.max), float(info.min), 1.5]
        big = ember.nan_to_num(x, posinf=1e300, neginf=-1e300).tolist()
        assert big[1:3] == ([math.inf, -math.inf] if nt is np.float32 else [1e300, -1e300])
    i = ember.tensor([1, 2])
    assert ember.nan_to_num(i, nan=5.0).tolist() == [1, 2]


def test_integer_square_wraps_and_rounding_copies():
    x = ember.tensor([300, -300], dtype=ember.int16)
    assert ember.square(x).tolist() == [24464, 24464]
    big = ember.tensor([2**40], dtype=ember.int64)
    assert ember.square(big).tolist() == [0]
    f = ember.floor(x)
    assert f.tolist() == [300, -300] and f.dtype == ember.int16
    f[0] = 1
    assert x[0].item() == 300  # a copy, not the input


def test_default_dtype_decides_integer_results():
    old = ember.get_default_dtype()
    try:
        ember.set_default_dtype(ember.float64)
        assert ember.exp(ember.tensor([1])).dtype == ember.float64
        with pytest.raises(RuntimeError, match="Double can't be cast to the desired output type Long"):
            ember.tensor([1]).exp_()
    finally:
        ember.set_default_dtype(old)


@pytest.mark.noleakcheck
def test_large_inputs_run_in_parallel_and_match_numpy():
    old = ember.get_num_threads()
    try:
        ember.set_num_threads(2)
        n = np.linspace(-20, 20, 300_001, dtype=np.float32)
        e = ember.tensor(n)
        check_close(ember.exp(e[::3]), np.exp(n[::3].astype(np.float64)), np.float32)
        check_close(ember.sigmoid(e), _sigmoid(n.astype(np.float64)), np.float32)
        check_close(ember.sqrt(ember.tensor(np.arange(200_000))),
                    np.sqrt(np.arange(200_000, dtype=np.float64)), np.float32)
        assert not np.asarray(ember.isnan(e)).any()
        m = e.clone()
        m.tanh_()
        check_close(m, np.tanh(n.astype(np.float64)), np.float32)
    finally:
        ember.set_num_threads(old)


# ---- PyTorch parity ----------------------------------------------------------------------


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _torch_call(torch, name, x):
    f = getattr(torch, name, None)
    return f(x) if f is not None else getattr(torch.nn.functional, name)(x)


@pytest.mark.parametrize("name", ALL_OPS)
def test_result_dtype_matches_torch_for_every_input_dtype(torch, name):
    for in_name, (et, nt) in DTYPES.items():
        values = np.array([0, 1, 1], dtype=nt)
        try:
            expected = str(_torch_call(torch, name, torch.from_numpy(values)).dtype)
        except (RuntimeError, NotImplementedError):
            expected = None
        try:
            got = str(getattr(ember, name)(ember.tensor(values)).dtype)
        except RuntimeError:
            got = None
        assert got == (None if expected is None else expected.replace("torch", "ember")), in_name
        assert expected_dtype(name, in_name) == (
            None if expected is None else expected.replace("torch.", ""))


@pytest.mark.parametrize("name", ALL_OPS)
@pytest.mark.parametrize("dtype", FLOAT_NAMES)
def test_values_match_torch(torch, name, dtype):
    nt = DTYPES[dtype][1]
    values = np.concatenate([np.linspace(-6, 6, 49), [math.nan, math.inf, -math.inf, -0.0]])
    values = values.astype(nt)
    expected = _torch_call(torch, name, torch.from_numpy(values)).numpy()
    if name == "gelu":
        # PyTorch disagrees with itself here: its AVX-512 float32 loop gives
        # gelu(inf) = nan, its scalar and float64 paths (and AVX2) inf, the
        # limit; ember gives inf on every machine.
        expected = np.where(np.isposinf(values), values, expected)
    got = np.asarray(getattr(ember, name)(ember.tensor(values)))
    assert got.dtype == expected.dtype
    if got.dtype == np.bool_ or name in EXACT_OPS:
        np.testing.assert_array_equal(got, expected)
    else:
        atol = 4 * np.finfo(nt).eps * np.maximum(np.abs(values), 1)
        check_close(got, expected, nt, atol=atol)


def test_round_nan_to_num_and_gelu_match_torch(torch):
    halves = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1.25, 1.35, 2.675, 1234.5678],
                      dtype=np.float32)
    t, e = torch.from_numpy(halves), ember.tensor(halves)
    assert ember.round(e).tolist() == torch.round(t).tolist()
    for d in (-2, -1, 0, 1, 2, 3):
        assert ember.round(e, decimals=d).tolist() == torch.round(t, decimals=d).tolist()
    specials = np.array([math.nan, math.inf, -math.inf, 2.0], dtype=np.float64)
    for kwargs in ({}, {"nan": 1.0}, {"posinf": 7.0, "neginf": -7.0}, {"nan": 2, "posinf": 1e300}):
        for nt in (np.float32, np.float64):
            assert (ember.nan_to_num(ember.tensor(specials.astype(nt)), **kwargs).tolist()
                    == torch.nan_to_num(torch.from_numpy(specials.astype(nt)), **kwargs).tolist())
    x = np.linspace(-8, 8, 81).astype(np.float32)
    for approximate in ("none", "tanh"):
        expected = torch.nn.functional.gelu(torch.from_numpy(x), approximate=approximate).numpy()
        got = np.asarray(ember.gelu(ember.tensor(x), approximate=approximate))
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_layout_matches_torch(torch):
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    cases = [lambda b: b.t()[::2], lambda b: b[:, ::2], lambda b: b[:, :1].expand(4, 3),
             lambda b: b.t(), lambda b: b[1:, 1:]]
    for make in cases:
        e = make(ember.tensor(base))
        t = make(torch.from_numpy(base))
        assert ember.exp(e).stride() == torch.exp(t).stride()
        assert ember.isnan(e).stride() == torch.isnan(t).stride()


def test_error_messages_match_torch(torch):
    cases = [
        (lambda m: m.tensor([1, 2]).exp_(), RuntimeError),
        (lambda m: m.tensor([True]).square_(), RuntimeError),
        (lambda m: m.relu(m.tensor([True])), RuntimeError),
        (lambda m: m.exp(m.tensor([1.0]), out=m.zeros(1, dtype=m.int64)), RuntimeError),
        (lambda m: m.floor(m.tensor([1]), out=m.zeros(1, dtype=m.float32)), RuntimeError),
        (lambda m: m.isposinf(m.tensor([1.0]), out=m.zeros(1)), RuntimeError),
        (lambda m: m.tensor([1.0]).expand(2).exp_(), RuntimeError),
    ]
    for case, kind in cases:
        with pytest.raises(kind) as expected:
            case(torch)
        with pytest.raises(kind) as got:
            case(ember)
        assert str(got.value) == str(expected.value)
