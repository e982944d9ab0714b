"""Factories: ember.tensor (and its dtype inference), empty/zeros/ones/full,
arange, linspace, eye, the *_like forms, rand/randn/randint with
manual_seed, the default dtype, requires_grad=, and ember.Size.

NumPy is the value oracle; torch, where installed, is the oracle for
inferred dtypes and exact linspace/arange values.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember

try:
    import torch
except ImportError:  # torch is the semantics oracle where installed
    torch = None

HYP = settings(max_examples=min(60, settings.default.max_examples), deadline=None)

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")

ALL_DTYPES = [ember.bool, ember.uint8, ember.int8, ember.int16, ember.int32,
              ember.int64, ember.float32, ember.float64]
NP_OF = {ember.bool: np.bool_, ember.uint8: np.uint8, ember.int8: np.int8,
         ember.int16: np.int16, ember.int32: np.int32, ember.int64: np.int64,
         ember.float32: np.float32, ember.float64: np.float64}


def dtype_name(dtype):
    return str(dtype).split(".")[-1]


def same_dtype(ours, theirs):
    return dtype_name(ours) == dtype_name(theirs)


@pytest.fixture
def default_float64():
    """Runs the test with float64 as the default dtype, then restores it."""
    saved = ember.get_default_dtype()
    ember.set_default_dtype(ember.float64)
    try:
        yield
    finally:
        ember.set_default_dtype(saved)
    assert ember.get_default_dtype() == saved


# ---- ember.tensor ----------------------------------------------------------------------


def test_tensor_from_nested_lists_and_tuples():
    t = ember.tensor([[1, 2, 3], (4, 5, 6)])
    assert t.shape == (2, 3) and t.dtype == ember.int64
    assert t.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert t.is_contiguous() and t.stride() == (3, 1) and t.storage_offset() == 0
    t = ember.tensor(((1.5,), (2.5,)))
    assert t.shape == (2, 1) and t.dtype == ember.float32
    assert ember.tensor([[[True]]]).shape == (1, 1, 1)


def test_tensor_from_scalars():
    for value, dtype in [(3, ember.int64), (2.5, ember.float32), (True, ember.bool),
                         (-7, ember.int64), (0.0, ember.float32)]:
        t = ember.tensor(value)
        assert t.shape == () and t.dtype == dtype and t.item() == value
    assert ember.tensor(2**62).item() == 2**62


def test_tensor_empty_list_is_float32_of_shape_0():
    t = ember.tensor([])
    assert t.shape == (0,) and t.dtype == ember.float32
    assert ember.tensor(()).shape == (0,)
    assert ember.tensor([[], []]).shape == (2, 0)
    assert ember.tensor([[], []]).dtype == ember.float32
    assert ember.tensor([], dtype=ember.int16).dtype == ember.int16


@pytest.mark.parametrize("data,expected", [
    ([True, False], ember.bool),
    ([True, 1], ember.int64),
    ([1, 2], ember.int64),
    ([1, 2.0], ember.float32),
    ([True, 2.5], ember.float32),
    ([[1], [2.5]], ember.float32),
    ([[True, False], [0, 1]], ember.int64),
])
def test_tensor_dtype_inference(data, expected):
    t = ember.tensor(data)
    assert t.dtype == expected
    assert t.tolist() == np.array(data).astype(NP_OF[expected]).tolist()


NUMPY_SCALAR_CASES = [
    np.float64(1.5), np.float32(2.5), np.int32(3), np.int8(-4), np.int16(5), np.uint8(6),
    np.bool_(True), np.int64(7),
    [np.float64(1.5), 2.0], [np.float32(1), 2], [np.int8(1), np.int8(2)],
    [np.bool_(True), False], [np.uint8(1), True], [[np.float64(1)], [3]],
    [np.int64(1), 2], [np.int16(3), True], [np.int32(1), 2.5],
]


@pytest.mark.parametrize("data", NUMPY_SCALAR_CASES, ids=repr)
def test_tensor_numpy_scalars_infer_like_torch(data):
    t = ember.tensor(data)
    expected = np.asarray(data).tolist()
    assert t.tolist() == expected
    if torch is not None:
        assert same_dtype(t.dtype, torch.tensor(data).dtype)


def test_tensor_numpy_scalar_dtypes():
    assert ember.tensor(np.float64(1.5)).dtype == ember.float64
    assert ember.tensor([np.float64(1.5), 2.0]).dtype == ember.float64
    assert ember.tensor([np.int32(1), np.int32(2)]).dtype == ember.int32
    assert ember.tensor([np.bool_(True)]).dtype == ember.bool
    assert ember.tensor([np.int16(3), True]).dtype == ember.int16
    assert ember.tensor([np.uint8(3), 2]).dtype == ember.int64


def test_tensor_from_0d_tensors():
    a = ember.tensor(2.5, dtype=ember.float64)
    t = ember.tensor(a)
    assert t.dtype == ember.float64 and t.shape == () and t.item() == 2.5
    assert t.data_ptr() != a.data_ptr()  # always a copy
    lst = ember.tensor([ember.tensor(1), ember.tensor(2)])
    assert lst.dtype == ember.int64 and lst.tolist() == [1, 2]
    mixed = ember.tensor([a, 1])
    assert mixed.dtype == ember.float64 and mixed.tolist() == [2.5, 1.0]
    assert ember.tensor([ember.tensor(True), False]).dtype == ember.bool


@pytest.mark.parametrize("np_dtype", [np.bool_, np.uint8, np.int8, np.int16, np.int32,
                                      np.int64, np.float32, np.float64])
def test_tensor_from_numpy_arrays_copies_and_keeps_dtype(np_dtype):
    a = (np.arange(12).reshape(3, 4) % 5).astype(np_dtype)
    for arr in [a, a.T, a[::2, 1::2], np.asarray(a[1, 2])]:
        t = ember.tensor(arr)
        assert t.dtype == ember.tensor(np.zeros(0, np_dtype)).dtype
        assert NP_OF[t.dtype] is np_dtype
        assert t.shape == arr.shape
        # a dense copy that keeps the array's memory order, as torch.tensor
        # does: a.T stays transposed, a gappy slice becomes row-major
        itemsize = arr.itemsize
        if arr.flags.c_contiguous or arr.flags.f_contiguous:
            assert t.stride() == tuple(s // itemsize for s in arr.strides)
        else:
            assert t.is_contiguous()
        np.testing.assert_array_equal(np.asarray(t), arr)
        if arr.size:
            before = arr.copy()
            t.fill_(1)
            np.testing.assert_array_equal(arr, before)  # a copy, not a view


@given(st.lists(st.lists(st.one_of(st.booleans(), st.integers(-2**40, 2**40),
                                   st.floats(-1e6, 1e6, allow_nan=False)),
                         min_size=3, max_size=3), min_size=0, max_size=4))
@HYP
def test_tensor_inference_matches_torch(data):
    t = ember.tensor(data)
    if data:
        kinds = {type(v) for row in data for v in row}
        expected = ember.float32 if float in kinds else ember.int64 if int in kinds else ember.bool
        assert t.dtype == expected
    np.testing.assert_array_equal(np.asarray(t).reshape(-1),
                                  np.array(data, dtype=NP_OF[t.dtype]).reshape(-1))
    if torch is not None:
        tt = torch.tensor(data)
        assert same_dtype(t.dtype, tt.dtype)
        assert tuple(t.shape) == tuple(tt.shape)
        assert t.tolist() == tt.tolist()


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_name)
def test_tensor_dtype_argument(dtype):
    data = [[0, 1, 2], [3, 100, 7]]
    t = ember.tensor(data, dtype=dtype)
    assert t.dtype == dtype
    np.testing.assert_array_equal(np.asarray(t), np.array(data).astype(NP_OF[dtype]))
    f = ember.tensor([0.0, 1.75, 2.5, 0.25], dtype=dtype)
    np.testing.assert_array_equal(np.asarray(f), np.array([0.0, 1.75, 2.5, 0.25]).astype(NP_OF[dtype]))
    assert ember.tensor(np.array(data), dtype=dtype).dtype == dtype
    assert ember.tensor(ember.tensor(data), dtype=dtype).dtype == dtype
    assert ember.tensor(True, dtype=dtype).item() == NP_OF[dtype](True).item()
    # Python's bool/int/float spell dtypes too
    assert ember.tensor([1], dtype=float).dtype == ember.float64
    assert ember.tensor([1.5], dtype=int).dtype == ember.int64
    assert ember.tensor([2], dtype=bool).dtype == ember.bool


@pytest.mark.parametrize("data", [
    [[1, 2], [3]], [[1, 2], 3], [1, [2, 3]], [[[1]], [2]], [[1], []],
])
def test_tensor_ragged_input_raises_value_error(data):
    with pytest.raises(ValueError):
        ember.tensor(data)


@pytest.mark.parametrize("data", ["abc", b"ab", ["a", "b"], [1, "a"], [[1.0], ["x"]], [1j], {1: 2}, [None], object()])
def test_tensor_rejects_non_numbers(data):
    with pytest.raises((TypeError, ValueError, RuntimeError)):
        ember.tensor(data)


def test_tensor_rejects_strings_with_type_error():
    for data in ["abc", ["a"], [1, "a"]]:
        with pytest.raises(TypeError):
            ember.tensor(data)


def test_tensor_requires_grad_flag():
    t = ember.tensor([1.0, 2.0], requires_grad=True)
    assert t.requires_grad and t.is_leaf
    assert not ember.tensor([1.0]).requires_grad
    assert ember.tensor([1.0], requires_grad=False).requires_grad is False
    with pytest.raises(RuntimeError, match="floating point"):
        ember.tensor([1, 2], requires_grad=True)
    with pytest.raises(RuntimeError, match="floating point"):
        ember.zeros(2, dtype=ember.int64, requires_grad=True)
    for factory in [lambda: ember.zeros(2, requires_grad=True), lambda: ember.ones(2, requires_grad=True),
                    lambda: ember.empty(2, requires_grad=True), lambda: ember.full((2,), 1.5, requires_grad=True),
                    lambda: ember.arange(3.0, requires_grad=True), lambda: ember.rand(2, requires_grad=True),
                    lambda: ember.randn(2, requires_grad=True), lambda: ember.eye(2, requires_grad=True),
                    lambda: ember.linspace(0, 1, 3, requires_grad=True),
                    lambda: ember.zeros_like(ember.ones(2), requires_grad=True)]:
        r = factory()
        assert r.requires_grad and r.is_leaf and r.grad is None


def test_tensor_argument_errors():
    with pytest.raises(TypeError):
        ember.tensor()
    with pytest.raises(TypeError):
        ember.tensor([1], dtype="float32")
    with pytest.raises(TypeError):
        ember.tensor([1], bogus=1)
    with pytest.raises(RuntimeError):
        ember.tensor([1], device="cuda")
    assert ember.tensor([1], device="cpu").tolist() == [1]


# ---- empty / zeros / ones / full ----------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES + [None], ids=lambda d: "default" if d is None else dtype_name(d))
def test_zeros_ones_empty(dtype):
    kw = {} if dtype is None else {"dtype": dtype}
    expected_dtype = ember.get_default_dtype() if dtype is None else dtype
    for shape_args, shape in [((2, 3), (2, 3)), (((2, 3),), (2, 3)), (([4],), (4,)),
                              ((), ()), (((),), ()), ((0, 5), (0, 5)), ((1, 1, 1), (1, 1, 1))]:
        z = ember.zeros(*shape_args, **kw)
        o = ember.ones(*shape_args, **kw)
        e = ember.empty(*shape_args, **kw)
        for t in (z, o, e):
            assert t.shape == shape and t.dtype == expected_dtype
            assert t.is_contiguous() and t.storage_offset() == 0
            assert t._version == 0 and not t.requires_grad
        np.testing.assert_array_equal(np.asarray(z), np.zeros(shape, NP_OF[expected_dtype]))
        np.testing.assert_array_equal(np.asarray(o), np.ones(shape, NP_OF[expected_dtype]))
    assert ember.zeros(size=(2, 1)).shape == (2, 1)


def test_shaped_factory_errors():
    with pytest.raises(RuntimeError, match="negative dimension"):
        ember.zeros(-1)
    with pytest.raises(RuntimeError, match="negative dimension"):
        ember.ones(2, -3)
    for bad in [(2.0,), ("a",), ([2, 2.5],), (True,)]:
        with pytest.raises(TypeError):
            ember.zeros(*bad)
    with pytest.raises(TypeError):
        ember.zeros(2, size=(3,))
    with pytest.raises(RuntimeError):
        ember.zeros(2**40, 2**40)  # size overflow, not a crash
    with pytest.raises((RuntimeError, MemoryError)):
        ember.empty(2**62)


@pytest.mark.parametrize("value,expected", [
    (3, ember.int64), (3.5, ember.float32), (True, ember.bool), (-2, ember.int64),
    (np.float64(2.5), ember.float32), (np.int32(2), ember.int64),
])
def test_full_infers_dtype_from_fill_value(value, expected):
    t = ember.full((2, 3), value)
    assert t.dtype == expected
    assert t.tolist() == [[NP_OF[expected](value).item()] * 3] * 2
    if torch is not None:
        assert same_dtype(t.dtype, torch.full((2, 3), value).dtype)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_name)
def test_full_with_dtype(dtype):
    for value in [0, 1, 7, 2.75, True]:
        t = ember.full([3], value, dtype=dtype)
        assert t.dtype == dtype
        np.testing.assert_array_equal(np.asarray(t), np.full(3, np.float64(value)).astype(NP_OF[dtype]))
    assert ember.full((), 5, dtype=dtype).shape == ()


def test_full_with_default_float64(default_float64):
    assert ember.full((1,), 1.5).dtype == ember.float64
    assert ember.full((1,), 1).dtype == ember.int64


def test_full_errors():
    with pytest.raises(TypeError):
        ember.full((2,), "a")
    with pytest.raises(TypeError):
        ember.full((2,))
    with pytest.raises(TypeError):
        ember.full(2.5, 1)


# ---- arange ----------------------------------------------------------------------------------


@pytest.mark.parametrize("args,dtype", [
    ((5,), ember.int64), ((5.0,), ember.float32), ((1, 7, 2), ember.int64),
    ((1, 2.5, 0.5), ember.float32), ((10, 0, -3), ember.int64), ((1.0, -1.0, -0.25), ember.float32),
    ((3, 3), ember.int64), ((0, 1, 0.1), ember.float32), ((-0.5, 0.5, 0.3), ember.float32),
    ((True,), ember.int64), ((np.int64(4),), ember.int64), ((-5, 5, 3), ember.int64),
    ((0, -10, -1), ember.int64), ((2, 1e6, 99999.5), ember.float32),
])
def test_arange_values_and_dtype(args, dtype):
    t = ember.arange(*args)
    assert t.dtype == dtype
    np.testing.assert_allclose(np.asarray(t), np.arange(*args).astype(NP_OF[dtype]), rtol=1e-6, atol=1e-7)
    assert t.shape == np.arange(*args).shape
    if torch is not None:
        tt = torch.arange(*[float(a) if isinstance(a, np.floating) else a for a in args])
        assert same_dtype(t.dtype, tt.dtype)
        assert t.tolist() == tt.tolist()


@given(st.integers(-50, 50), st.integers(-50, 50), st.integers(-7, 7).filter(bool))
@HYP
def test_arange_integers_match_python_range(start, end, step):
    if (step > 0 and end < start) or (step < 0 and end > start):
        with pytest.raises(RuntimeError, match="upper bound and lower bound inconsistent with step sign"):
            ember.arange(start, end, step)
        return
    t = ember.arange(start, end, step)
    assert t.dtype == ember.int64
    assert t.tolist() == list(range(start, end, step))


@given(st.floats(-100, 100), st.floats(-100, 100), st.floats(0.01, 10), st.booleans(),
       st.sampled_from([ember.float32, ember.float64]))
@HYP
def test_arange_floats_match_torch(start, end, step, negative, dtype):
    if negative:
        step = -step
    if (step > 0 and end < start) or (step < 0 and end > start):
        with pytest.raises(RuntimeError):
            ember.arange(start, end, step, dtype=dtype)
        return
    t = ember.arange(start, end, step, dtype=dtype)
    assert t.shape == (math.ceil((end - start) / step),)
    expected = start + np.arange(t.numel()) * step
    np.testing.assert_allclose(np.asarray(t), expected.astype(NP_OF[dtype]), rtol=1e-5, atol=1e-4)
    if torch is not None:
        # torch's CPU kernel fills SIMD chunks as base + i * step, so its last
        # bits depend on the vector width: equal shape, values to rounding.
        tt = torch.arange(start, end, step, dtype=getattr(torch, dtype_name(dtype)))
        assert tuple(tt.shape) == tuple(t.shape)
        tol = 1e-5 if dtype == ember.float32 else 1e-12
        np.testing.assert_allclose(np.asarray(t), tt.numpy(), rtol=tol, atol=tol * 100)


def test_arange_errors():
    with pytest.raises(RuntimeError, match="^step must be nonzero$"):
        ember.arange(0, 5, 0)
    with pytest.raises(RuntimeError, match="^step must be nonzero$"):
        ember.arange(0, 5, 0.0)
    with pytest.raises(RuntimeError, match="^upper bound and lower bound inconsistent with step sign$"):
        ember.arange(0, 5, -1)
    with pytest.raises(RuntimeError, match="^upper bound and lower bound inconsistent with step sign$"):
        ember.arange(5, 0)
    with pytest.raises(RuntimeError, match=r"^unsupported range: 0 -> nan$"):
        ember.arange(float("nan"))
    with pytest.raises(RuntimeError, match=r"^unsupported range: 0 -> inf$"):
        ember.arange(0, float("inf"))
    with pytest.raises(TypeError):
        ember.arange()
    with pytest.raises(TypeError):
        ember.arange("a")


def test_arange_with_default_float64(default_float64):
    assert ember.arange(0.5).dtype == ember.float64
    assert ember.arange(3).dtype == ember.int64
    assert ember.arange(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75]


# ---- linspace, eye ----------------------------------------------------------------------------


@given(st.floats(-1e3, 1e3), st.floats(-1e3, 1e3), st.integers(0, 40))
@HYP
def test_linspace_float64_like_torch(start, end, steps):
    t = ember.linspace(start, end, steps, dtype=ember.float64)
    assert t.dtype == ember.float64 and t.shape == (steps,)
    np.testing.assert_allclose(np.asarray(t), np.linspace(start, end, steps), rtol=1e-12, atol=1e-9)
    if steps:
        assert t[0].item() == start
    if steps > 1:
        assert t[-1].item() == end
    # PyTorch's symmetric fill: start + i * step below the middle, end - (steps
    # - 1 - i) * step from it, so the rounding mirrors around the middle.
    if steps > 1:
        step = (end - start) / (steps - 1)
        half = steps // 2
        formula = [start + step * i if i < half else end - step * (steps - 1 - i)
                   for i in range(steps)]
        assert t.tolist() == formula
    if torch is not None:
        # torch's CPU kernel runs the same formula per SIMD chunk (its last
        # bits depend on the vector width): equal to an ulp or two.
        tt = torch.linspace(start, end, steps, dtype=torch.float64)
        scale = max(abs(start), abs(end), 1e-300)
        np.testing.assert_allclose(np.asarray(t), tt.numpy(), rtol=0, atol=8e-16 * scale)


@given(st.floats(-1e3, 1e3), st.floats(-1e3, 1e3), st.integers(0, 40))
@HYP
def test_linspace_float32_close_to_torch(start, end, steps):
    t = ember.linspace(start, end, steps)
    assert t.dtype == ember.float32 and t.shape == (steps,)
    expected = np.linspace(start, end, steps).astype(np.float32)
    np.testing.assert_allclose(np.asarray(t), expected, rtol=1e-5, atol=1e-4)
    if torch is not None:
        np.testing.assert_allclose(np.asarray(t), torch.linspace(start, end, steps).numpy(),
                                   rtol=1e-5, atol=1e-4)


def test_linspace_examples_and_errors():
    assert ember.linspace(0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert ember.linspace(2, 3, 1).tolist() == [2.0]
    assert ember.linspace(2, 3, 0).shape == (0,)
    assert ember.linspace(0, 10, 4, dtype=ember.int64).tolist() == [0, 3, 6, 10]
    assert ember.linspace(1, -1, 3).tolist() == [1.0, 0.0, -1.0]
    with pytest.raises(RuntimeError, match="number of steps must be non-negative"):
        ember.linspace(0, 1, -1)
    with pytest.raises(TypeError):
        ember.linspace(0, 1)
    with pytest.raises(TypeError):
        ember.linspace(0, 1, 2.5)


@pytest.mark.parametrize("n,m", [(0, None), (1, None), (3, None), (2, 4), (4, 2), (3, 0), (0, 3)])
@pytest.mark.parametrize("dtype", [None, ember.int64, ember.bool, ember.float64])
def test_eye(n, m, dtype):
    kw = {} if dtype is None else {"dtype": dtype}
    t = ember.eye(n, **kw) if m is None else ember.eye(n, m, **kw)
    expected_dtype = ember.float32 if dtype is None else dtype
    assert t.dtype == expected_dtype
    np.testing.assert_array_equal(np.asarray(t), np.eye(n, m, dtype=NP_OF[expected_dtype]))
    assert t._version == 0


def test_eye_errors():
    with pytest.raises(RuntimeError, match="n must be greater or equal to 0, got -1"):
        ember.eye(-1)
    with pytest.raises(RuntimeError, match="m must be greater or equal to 0, got -2"):
        ember.eye(2, -2)
    with pytest.raises(TypeError):
        ember.eye(2.5)


# ---- *_like -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_name)
def test_like_factories(dtype):
    src = ember.ones(2, 3, dtype=dtype).t()  # shape and dtype come from here
    for fn, fill in [(ember.zeros_like, 0), (ember.ones_like, 1), (ember.empty_like, None)]:
        r = fn(src)
        assert r.shape == (3, 2) and r.dtype == dtype
        assert r.untyped_storage().data_ptr() != src.untyped_storage().data_ptr() or r.numel() == 0
        if fill is not None:
            np.testing.assert_array_equal(np.asarray(r), np.full((3, 2), fill, NP_OF[dtype]))
    r = ember.full_like(src, 2.75)
    assert r.dtype == dtype
    np.testing.assert_array_equal(np.asarray(r), np.full((3, 2), 2.75).astype(NP_OF[dtype]))
    r = ember.zeros_like(src, dtype=ember.float64)
    assert r.dtype == ember.float64 and r.shape == (3, 2)
    assert ember.full_like(src, 7, dtype=ember.int16).tolist() == [[7, 7]] * 3


def test_like_factory_errors():
    with pytest.raises(TypeError):
        ember.zeros_like([1, 2])
    with pytest.raises(TypeError):
        ember.full_like(ember.ones(2))
    with pytest.raises(TypeError):
        ember.zeros_like(ember.ones(2), fill_value=3)


# ---- random -----------------------------------------------------------------------------------


@pytest.fixture
def restore_seed():
    seed = ember.initial_seed()
    yield
    ember.manual_seed(seed)


def test_manual_seed_reproducibility(restore_seed):
    for make in [lambda: ember.rand(50), lambda: ember.randn(3, 7), lambda: ember.randint(0, 1000, (40,)),
                 lambda: ember.rand(10, dtype=ember.float64), lambda: ember.rand_like(ember.zeros(5)),
                 lambda: ember.randn_like(ember.zeros(5, dtype=ember.float64))]:
        ember.manual_seed(1234)
        a = make()
        b = make()  # the stream moves on
        ember.manual_seed(1234)
        c = make()
        ember.manual_seed(4321)
        d = make()
        assert a.tolist() == c.tolist()
        assert a.tolist() != b.tolist()
        assert a.tolist() != d.tolist()
    ember.manual_seed(77)
    assert ember.initial_seed() == 77
    ember.manual_seed(-1)  # wraps to 64 bits, as in torch
    assert ember.initial_seed() == 2**64 - 1
    with pytest.raises(TypeError):
        ember.manual_seed(1.5)


@pytest.mark.parametrize("dtype", [None, ember.float32, ember.float64])
def test_rand_uniform_range_and_shape(dtype, restore_seed):
    ember.manual_seed(0)
    kw = {} if dtype is None else {"dtype": dtype}
    t = ember.rand(1000, 10, **kw)
    assert t.shape == (1000, 10) and t.dtype == (dtype or ember.float32)
    a = np.asarray(t)
    assert a.min() >= 0.0 and a.max() < 1.0
    assert abs(a.mean() - 0.5) < 0.02
    assert abs(a.var() - 1 / 12) < 0.01
    assert ember.rand(()).shape == ()
    assert ember.rand(0, 3).shape == (0, 3)
    assert ember.rand((2, 3)).shape == (2, 3)


@pytest.mark.parametrize("dtype", [None, ember.float64])
def test_randn_moments(dtype, restore_seed):
    ember.manual_seed(0)
    kw = {} if dtype is None else {"dtype": dtype}
    a = np.asarray(ember.randn(20000, **kw))
    assert a.dtype == NP_OF[dtype or ember.float32]
    assert abs(a.mean()) < 0.05 and abs(a.std() - 1.0) < 0.05
    assert np.isfinite(a).all()
    assert (a < 0).any() and (a > 2).any()


@pytest.mark.parametrize("dtype", [None, ember.int64, ember.int32, ember.int16, ember.uint8,
                                   ember.int8, ember.float32, ember.float64])
def test_randint(dtype, restore_seed):
    ember.manual_seed(0)
    kw = {} if dtype is None else {"dtype": dtype}
    t = ember.randint(3, 10, (2000,), **kw)
    assert t.dtype == (dtype or ember.int64) and t.shape == (2000,)
    values = set(np.asarray(t).tolist())
    assert values == set(range(3, 10))  # every value in [low, high), no other
    h = ember.randint(5, (3, 4), **kw)  # randint(high, size)
    assert h.shape == (3, 4)
    assert set(np.asarray(h).tolist()[0]) <= set(range(5))
    n = ember.randint(-4, -2, size=(100,))  # (low, high) with size by keyword
    assert n.shape == (100,) and set(n.tolist()) == {-4, -3}
    k = ember.randint(low=1, high=3, size=[50])
    assert set(k.tolist()) == {1, 2}


def test_random_errors():
    with pytest.raises(TypeError, match="not implemented for 'int64'"):
        ember.rand(2, dtype=ember.int64)
    with pytest.raises(RuntimeError, match="from=0 >= to=0"):
        ember.randint(0, (5,))  # (high, size) with high 0: an empty range
    with pytest.raises(RuntimeError):
        ember.randint(3, 3, (5,))
    with pytest.raises(TypeError):
        ember.randint(0, 5, 7)  # size must be a sequence
    with pytest.raises(TypeError):
        ember.randint(3)


# ---- default dtype ----------------------------------------------------------------------------


def test_default_dtype_is_float32_and_settable(default_float64):
    assert ember.get_default_dtype() == ember.float64
    assert ember.tensor([1.5]).dtype == ember.float64
    assert ember.tensor([]).dtype == ember.float64
    assert ember.tensor([1]).dtype == ember.int64
    assert ember.zeros(1).dtype == ember.float64
    assert ember.ones(1).dtype == ember.float64
    assert ember.empty(1).dtype == ember.float64
    assert ember.rand(1).dtype == ember.float64
    assert ember.randn(1).dtype == ember.float64
    assert ember.linspace(0, 1, 2).dtype == ember.float64
    assert ember.eye(1).dtype == ember.float64
    assert ember.tensor([np.float32(1)]).dtype == ember.float32  # its own dtype


def test_default_dtype_restored_and_validated():
    assert ember.get_default_dtype() == ember.float32
    saved = ember.get_default_dtype()
    try:
        with pytest.raises(TypeError, match="only floating-point types are supported as the default type"):
            ember.set_default_dtype(ember.int64)
        assert ember.get_default_dtype() == ember.float32
        ember.set_default_dtype(ember.float32)
        assert ember.tensor([1.5]).dtype == ember.float32
    finally:
        ember.set_default_dtype(saved)


@needs_torch
def test_default_dtype_inference_matches_torch():
    saved_e, saved_t = ember.get_default_dtype(), torch.get_default_dtype()
    try:
        for name in ["float32", "float64"]:
            ember.set_default_dtype(getattr(ember, name))
            torch.set_default_dtype(getattr(torch, name))
            for data in [[1.5], [1, 2.0], [True, 2.5], [], 3.5]:
                assert same_dtype(ember.tensor(data).dtype, torch.tensor(data).dtype)
            assert same_dtype(ember.full((1,), 2.5).dtype, torch.full((1,), 2.5).dtype)
            assert same_dtype(ember.arange(2.5).dtype, torch.arange(2.5).dtype)
    finally:
        ember.set_default_dtype(saved_e)
        torch.set_default_dtype(saved_t)


# ---- ember.Size -------------------------------------------------------------------------------


def test_size_is_a_tuple():
    s = ember.zeros(2, 3).shape
    assert isinstance(s, ember.Size) and isinstance(s, tuple)
    assert s == (2, 3) and s == ember.Size([2, 3]) and tuple(s) == (2, 3)
    assert len(s) == 2 and s[0] == 2 and s[-1] == 3 and list(s) == [2, 3]
    a, b = s
    assert (a, b) == (2, 3)
    assert hash(s) == hash((2, 3))
    assert s.numel() == 6
    assert ember.zeros(()).shape == () and len(ember.zeros(()).shape) == 0
    assert ember.zeros(*s).shape == s


def test_size_repr():
    assert repr(ember.Size([2, 3])) == "ember.Size([2, 3])"
    assert str(ember.Size([4])) == "ember.Size([4])"
    assert repr(ember.Size([])) == "ember.Size([])"
    assert repr(ember.zeros(0, 1).shape) == "ember.Size([0, 1])"


def test_size_slicing_and_concatenation_stay_size():
    # torch.Size([2, 3])[1:] is torch.Size([3]); so is Size + tuple
    s = ember.Size([2, 3])
    assert s[1:] == (3,) and isinstance(s[1:], ember.Size)
    assert isinstance(s + (1,), ember.Size) and s + (1,) == (2, 3, 1)


def test_size_rejects_non_ints():
    with pytest.raises(TypeError):
        ember.Size([2.5])


def test_tensor_from_other_sequences():
    assert ember.tensor(range(4)).tolist() == [0, 1, 2, 3]
    assert ember.tensor(range(4)).dtype == ember.int64
    assert ember.tensor(range(0)).shape == (0,)
