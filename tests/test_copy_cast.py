"""copy_ and dtype conversion: copy_ across every dtype pair (NumPy's astype
is the oracle for in-range values), broadcasting, strided and overlapping
copies; to(), the cast methods, fill_, zero_, item, tolist, the Python
number protocol, len and iteration.
"""

import math
import operator

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
NAMES = list(DTYPES)

CANDIDATES = [0, 1, 2, 3, 7, 100, 127, 128, 200, 255, 256, 1000, 30000, 40000,
              2**31 - 1, 2**40, -1, -2, -100, -128, -129, -1000, -30000, -2**31,
              0.5, 0.75, 2.5, -2.5, 99.99, -127.9, 1e6 + 0.25, 1e-3, -0.5]


def representable(v, np_dtype):
    """v exactly representable as a value of np_dtype."""
    if np_dtype is np.bool_:
        return v in (0, 1)
    if np.issubdtype(np_dtype, np.integer):
        info = np.iinfo(np_dtype)
        return float(v).is_integer() and info.min <= v <= info.max
    return float(np_dtype(v)) == v


def in_range_for(v, np_dtype):
    """Converting v to np_dtype is defined (no overflow): C and NumPy agree."""
    if np_dtype is np.bool_ or np.issubdtype(np_dtype, np.floating):
        return True
    info = np.iinfo(np_dtype)
    return info.min <= math.trunc(v) <= info.max


def pair_values(src, dst):
    s, d = DTYPES[src][1], DTYPES[dst][1]
    return [v for v in CANDIDATES if representable(v, s) and in_range_for(v, d)]


# ---- copy_ across dtypes ------------------------------------------------------------


@pytest.mark.parametrize("dst", NAMES)
@pytest.mark.parametrize("src", NAMES)
def test_copy_all_dtype_pairs_like_numpy_astype(src, dst):
    values = pair_values(src, dst)
    a = np.array(values, dtype=DTYPES[src][1])
    expected = a.astype(DTYPES[dst][1])
    if DTYPES[dst][1] is np.bool_:
        np.testing.assert_array_equal(expected, a != 0)  # bool(x) is x != 0
    s = ember.tensor(a)
    assert s.dtype == DTYPES[src][0]
    d = ember.empty(len(values), dtype=DTYPES[dst][0])
    out = d.copy_(s)
    assert out is d
    assert d.dtype == DTYPES[dst][0]
    np.testing.assert_array_equal(np.asarray(d), expected)
    # to(dtype) and the strided path (every other element) agree
    np.testing.assert_array_equal(np.asarray(s.to(DTYPES[dst][0])), expected)
    wide = ember.zeros(2 * len(values), dtype=DTYPES[dst][0])
    wide[::2].copy_(s)
    np.testing.assert_array_equal(np.asarray(wide[::2]), expected)
    assert not np.asarray(wide[1::2]).any()
    if torch is not None:
        t = torch.from_numpy(a).to(getattr(torch, dst))
        np.testing.assert_array_equal(t.numpy(), np.asarray(d))


@pytest.mark.parametrize("name", NAMES)
def test_cast_truncates_toward_zero_and_bool_is_nonzero(name):
    et, nt = DTYPES[name]
    f = ember.tensor([2.9, -2.9, 0.0, -0.0, 0.4], dtype=ember.float64)
    if nt is np.bool_:
        assert f.to(et).tolist() == [True, True, False, False, True]
    elif np.issubdtype(nt, np.unsignedinteger):
        assert f[::2].to(et).tolist() == [2, 0, 0]
    elif np.issubdtype(nt, np.integer):
        assert f.to(et).tolist() == [2, -2, 0, 0, 0]
    b = ember.tensor([True, False, True])
    assert np.asarray(b.to(et)).tolist() == np.array([1, 0, 1]).astype(nt).tolist()


@st.composite
def copy_cases(draw):
    """dst and a src that broadcasts to it, each maybe transposed, sliced
    or offset inside a bigger buffer."""
    dshape = tuple(draw(st.lists(st.integers(0, 4), max_size=3)))
    k = draw(st.integers(0, len(dshape)))
    sshape = tuple(1 if draw(st.booleans()) else s for s in dshape[k:])
    return dshape, sshape, draw(st.sampled_from(NAMES)), draw(st.sampled_from(NAMES)), \
        draw(st.booleans()), draw(st.booleans()), draw(st.integers(1, 2))


def strided(shape, np_dtype, transposed, step, fill):
    """A (tensor, ndarray) pair sharing memory with the given layout."""
    big = tuple(s * step for s in shape)
    if transposed:
        big = big[::-1]
    base = (np.arange(math.prod(big)) % 97 + fill).astype(np_dtype).reshape(big)
    if transposed:
        base_t = base.T
    else:
        base_t = base
    index = tuple(slice(None, None, step) for _ in shape)
    arr = base_t[index + (Ellipsis,)]  # an array view even when 0-d
    e = ember.from_numpy(base)
    if transposed:
        e = e.permute(tuple(reversed(range(len(shape)))))
    return e[index], arr, base


@HYP
@given(copy_cases())
def test_copy_broadcasts_and_handles_strides(case):
    dshape, sshape, dname, sname, dtrans, strans, step = case
    dst, dst_arr, dst_base = strided(dshape, DTYPES[dname][1], dtrans, step, fill=0)
    src_vals = (np.arange(math.prod(sshape)) % 50).reshape(sshape)
    src, src_arr, _ = strided(sshape, DTYPES[sname][1], strans, 1, fill=0)
    src_arr[...] = src_vals.astype(DTYPES[sname][1])
    expected_base = dst_base.copy()
    if dtrans:
        expected_base.T[tuple(slice(None, None, step) for _ in dshape) + (Ellipsis,)] = \
            np.broadcast_to(src_arr, dshape).astype(DTYPES[dname][1])
    else:
        expected_base[tuple(slice(None, None, step) for _ in dshape) + (Ellipsis,)] = \
            np.broadcast_to(src_arr, dshape).astype(DTYPES[dname][1])
    version = dst._version
    dst.copy_(src)
    np.testing.assert_array_equal(dst_base, expected_base)  # and nothing else changed
    assert dst._version == version + 1


def test_copy_broadcast_errors():
    with pytest.raises(RuntimeError, match="must match the size of tensor b"):
        ember.zeros(3).copy_(ember.zeros(2))
    with pytest.raises(RuntimeError):
        ember.zeros(3).copy_(ember.zeros(1, 3))  # src may not have more dims
    with pytest.raises(TypeError, match="must be Tensor"):
        ember.zeros(3).copy_([1, 2, 3])
    d = ember.zeros(2, 3)
    d.copy_(ember.tensor(5))  # 0-d source
    assert d.tolist() == [[5.0] * 3] * 2
    d.copy_(ember.tensor([[1.0], [2.0]]))
    assert d.tolist() == [[1.0] * 3, [2.0] * 3]


@pytest.mark.parametrize("name", NAMES)
def test_overlapping_copy_reads_source_first(name):
    et, nt = DTYPES[name]
    a = (np.arange(10) % 3).astype(nt) if nt is not np.bool_ else np.arange(10) % 3 == 1
    t = ember.tensor(a)
    a[1:] = a[:-1].copy()
    t[1:].copy_(t[:-1])
    np.testing.assert_array_equal(np.asarray(t), a)
    t2 = ember.tensor(a)
    a[:-2] = a[2:].copy()
    t2[:-2].copy_(t2[2:])
    np.testing.assert_array_equal(np.asarray(t2), a)


def test_overlapping_transposed_copy():
    a = np.arange(16.0).reshape(4, 4)
    t = ember.tensor(a)
    t.copy_(t.t())
    np.testing.assert_array_equal(np.asarray(t), a.T)
    t = ember.arange(12.0)
    t.view(3, 4)[:, 1:].copy_(t.view(3, 4)[:, :-1].clone())  # a clone is not an alias
    assert t.view(3, 4).tolist() == [[0, 0, 1, 2], [4, 4, 5, 6], [8, 8, 9, 10]]


def test_copy_into_itself_is_a_no_op_that_bumps_the_version():
    t = ember.arange(5.0)
    v = t._version
    t.copy_(t)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert t._version == v + 1


def test_copy_into_expanded_raises():
    e = ember.zeros(3).expand(2, 3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor refers to a single memory location"):
        e.copy_(ember.ones(2, 3))
    with pytest.raises(RuntimeError, match="more than one element"):
        e.fill_(1)
    with pytest.raises(RuntimeError, match="more than one element"):
        e.zero_()
    assert e.tolist() == [[0.0] * 3] * 2
    # an empty tensor has no element to write twice, whatever its strides
    empty = ember.zeros(1, 0).expand(3, 0)
    empty.copy_(ember.zeros(3, 0))
    empty.fill_(1.0)
    assert empty.shape == (3, 0)


def test_copy_into_read_only_memory_raises():
    a = np.arange(3.0)
    a.flags.writeable = False
    t = ember.from_numpy(a)
    with pytest.raises(RuntimeError, match="read-only"):
        t.copy_(ember.ones(3))
    with pytest.raises(RuntimeError, match="read-only"):
        t.fill_(1.0)
    assert a.tolist() == [0.0, 1.0, 2.0]


# ---- to() and the cast methods ---------------------------------------------------------


def test_to_returns_self_when_nothing_changes():
    x = ember.zeros(2, 3)
    assert x.to(ember.float32) is x
    assert x.to(x) is x
    assert x.to("cpu") is x
    assert x.to(ember.device("cpu")) is x
    assert x.to(dtype=ember.float32) is x
    assert x.to("cpu", ember.float32) is x
    c = x.to(ember.float32, copy=True)
    assert c is not x and c.dtype == ember.float32
    assert c.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()


def test_to_converts():
    x = ember.tensor([[1.5, -2.5], [3.0, 0.0]])
    assert x.to(ember.int64).tolist() == [[1, -2], [3, 0]]
    assert x.to(ember.zeros(1, dtype=ember.int8)).dtype == ember.int8
    assert x.to("cpu", ember.float64).dtype == ember.float64
    assert x.to(device="cpu", dtype=ember.int16).dtype == ember.int16
    assert x.to(ember.bool).tolist() == [[True, True], [True, False]]
    y = x.t().to(ember.float64)  # non-contiguous input
    assert y.tolist() == [[1.5, 3.0], [-2.5, 0.0]]
    assert y._version == 0
    with pytest.raises(RuntimeError, match="CuPy|NVIDIA driver|No CUDA GPUs"):
        x.to("cuda")  # tests/test_cuda_host.py tests the CUDA side
    with pytest.raises(TypeError):
        x.to(3.5)


@needs_torch
def test_to_identity_rules_match_torch():
    for ours, theirs in [(ember.zeros(3), torch.zeros(3))]:
        for fn in [lambda t, m: t.to(m.float32), lambda t, m: t.to("cpu"), lambda t, m: t.float(),
                   lambda t, m: t.to(t), lambda t, m: t.to(m.float32, copy=True),
                   lambda t, m: t.double(), lambda t, m: t.to(m.float64).to(m.float64)]:
            assert (fn(ours, ember) is ours) == (fn(theirs, torch) is theirs)


@pytest.mark.parametrize("method,name", [
    ("float", "float32"), ("double", "float64"), ("long", "int64"), ("int", "int32"),
    ("bool", "bool"), ("byte", "uint8"), ("short", "int16"), ("char", "int8"),
])
def test_cast_methods(method, name):
    et, nt = DTYPES[name]
    a = np.array([0, 1, 2, 100, 5], dtype=np.int64)
    for src_name in NAMES:
        s = ember.tensor(a.astype(DTYPES[src_name][1]))
        r = getattr(s, method)()
        assert r.dtype == et
        if src_name == name:
            assert r is s  # already that dtype: self
        else:
            assert r.untyped_storage().data_ptr() != s.untyped_storage().data_ptr()
            np.testing.assert_array_equal(np.asarray(r), a.astype(DTYPES[src_name][1]).astype(nt))


# ---- fill_ and zero_ ---------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("value", [0, 1, 7, -3, 2.75, -2.75, True, False])
def test_fill_like_numpy(name, value):
    et, nt = DTYPES[name]
    if not in_range_for(value, nt):
        pytest.skip("out of range for the dtype")
    t = ember.zeros(2, 3, dtype=et)
    assert t.fill_(value) is t
    expected = np.full((2, 3), np.float64(value)).astype(nt)
    np.testing.assert_array_equal(np.asarray(t), expected)
    assert t._version == 1


def test_fill_value_kinds_and_errors():
    t = ember.zeros(4)
    t.fill_(np.float32(1.5))
    assert t.tolist() == [1.5] * 4
    t.fill_(np.int64(3))
    assert t.tolist() == [3.0] * 4
    t.fill_(ember.tensor(2.5))
    assert t.tolist() == [2.5] * 4
    t.fill_(ember.tensor(True))
    assert t.tolist() == [1.0] * 4
    with pytest.raises(RuntimeError, match=r"fill_ only supports 0-dimension value tensor but got tensor with 1 dimensions\."):
        t.fill_(ember.zeros(2))
    for bad in ["a", None, [1.0], object()]:
        with pytest.raises(TypeError):
            t.fill_(bad)
    assert t.tolist() == [1.0] * 4


def test_fill_and_zero_only_touch_the_view():
    base = ember.arange(12.0).view(3, 4)
    base[:, 1::2].fill_(-1)
    assert base.tolist() == [[0, -1, 2, -1], [4, -1, 6, -1], [8, -1, 10, -1]]
    col = base.t()[2]
    assert col.zero_() is col
    assert base[:, 2].tolist() == [0, 0, 0]
    assert base[:, 0].tolist() == [0, 4, 8]
    assert base._version == 2
    empty = ember.zeros(0, 3)
    empty.fill_(5)
    empty.zero_()
    assert empty.shape == (0, 3)


# ---- item, tolist, Python numbers -----------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_item_and_tolist_types(name):
    et, nt = DTYPES[name]
    a = np.array([[1, 0, 2]], dtype=nt) if nt is not np.bool_ else np.array([[True, False, True]])
    t = ember.tensor(a)
    lst = t.tolist()
    assert lst == a.tolist()
    assert [type(x) for x in lst[0]] == [type(x) for x in a.tolist()[0]]
    x = t[0, 2].item()
    assert x == a[0, 2] and type(x) is type(a.tolist()[0][2])
    assert t[:, 2:].item() == x  # any one-element shape
    assert ember.tensor(a[0, 0]).tolist() == a[0, 0].item()  # 0-d: a scalar


def test_item_exact_values_and_errors():
    assert ember.tensor(0.1, dtype=ember.float32).item() == float(np.float32(0.1))
    assert ember.tensor(2**62).item() == 2**62
    assert ember.tensor([[[-7]]], dtype=ember.int8).item() == -7
    with pytest.raises(RuntimeError, match="^a Tensor with 2 elements cannot be converted to Scalar$"):
        ember.zeros(2).item()
    with pytest.raises(RuntimeError, match="^a Tensor with 0 elements cannot be converted to Scalar$"):
        ember.zeros(0).item()


def test_tolist_strided_and_empty():
    t = ember.arange(12).view(3, 4)
    assert t.t()[::2].tolist() == np.arange(12).reshape(3, 4).T[::2].tolist()
    assert t[:, None, 1].tolist() == [[1], [5], [9]]
    assert ember.zeros(2, 0).tolist() == [[], []]
    assert ember.zeros(0, 2).tolist() == []
    assert ember.zeros(1).expand(2, 3).tolist() == [[0.0] * 3] * 2


def test_float_int_bool_index_conversions():
    assert float(ember.tensor([[2.5]])) == 2.5
    assert float(ember.tensor(3)) == 3.0 and type(float(ember.tensor(3))) is float
    assert int(ember.tensor([-2.7])) == -2
    assert int(ember.tensor(2.7)) == 2
    assert int(ember.tensor(True)) == 1
    assert bool(ember.tensor([0.0])) is False
    assert bool(ember.tensor([[3]])) is True
    assert bool(ember.tensor(False)) is False
    assert operator.index(ember.tensor(4)) == 4
    assert operator.index(ember.tensor([[3]], dtype=ember.int8)) == 3
    assert operator.index(ember.tensor(True)) == 1
    assert [10, 20, 30][ember.tensor(1)] == 20
    assert list(range(ember.tensor(3))) == [0, 1, 2]


@pytest.mark.parametrize("fn", [float, int])
def test_number_conversion_errors(fn):
    for t in [ember.zeros(2), ember.zeros(0), ember.zeros(2, 2)]:
        with pytest.raises(ValueError, match="^only one element tensors can be converted to Python scalars$"):
            fn(t)


def test_bool_errors():
    with pytest.raises(RuntimeError, match="^Boolean value of Tensor with more than one value is ambiguous$"):
        bool(ember.zeros(2))
    with pytest.raises(RuntimeError, match="^Boolean value of Tensor with no values is ambiguous$"):
        bool(ember.zeros(0))
    with pytest.raises(RuntimeError, match="ambiguous"):
        if ember.ones(2, 2):
            pass


def test_index_errors():
    for t in [ember.tensor(1.0), ember.tensor([1, 2]), ember.zeros(0, dtype=ember.int64)]:
        with pytest.raises(TypeError, match="^only integer tensors of a single element can be converted to an index$"):
            operator.index(t)
    with pytest.raises(TypeError):
        [1, 2][ember.tensor(0.0)]


@needs_torch
def test_conversion_errors_match_torch():
    cases = [
        (float, (2,)), (int, (0,)), (bool, (2,)), (bool, (0,)), (operator.index, (2,)),
        (lambda t: t.item(), (3,)), (len, ()), (iter, ()),
    ]
    for fn, shape in cases:
        with pytest.raises(Exception) as theirs:
            fn(torch.zeros(shape))
        with pytest.raises(Exception) as ours:
            fn(ember.zeros(shape))
        assert type(ours.value) is type(theirs.value), fn
        assert str(ours.value) == str(theirs.value), fn


# ---- len and iteration ---------------------------------------------------------------------


def test_len_and_iter():
    t = ember.arange(6).view(3, 2)
    assert len(t) == 3
    rows = list(t)
    assert [r.tolist() for r in rows] == [[0, 1], [2, 3], [4, 5]]
    assert all(r.untyped_storage().data_ptr() == t.untyped_storage().data_ptr() for r in rows)
    rows[1].fill_(9)  # rows are views
    assert t[1].tolist() == [9, 9]
    elems = list(ember.tensor([1.5, 2.5]))
    assert all(e.shape == () for e in elems) and [e.item() for e in elems] == [1.5, 2.5]
    assert len(ember.zeros(0, 3)) == 0 and list(ember.zeros(0)) == []
    assert [r.shape for r in ember.zeros(2, 0)] == [(0,), (0,)]
    a, b = ember.tensor([1, 2])  # unpacking
    assert (a.item(), b.item()) == (1, 2)


def test_len_and_iter_of_0d_raise_type_error():
    s = ember.tensor(3.0)
    with pytest.raises(TypeError, match="^len\\(\\) of a 0-d tensor$"):
        len(s)
    with pytest.raises(TypeError, match="^iteration over a 0-d tensor$"):
        iter(s)
    with pytest.raises(TypeError):
        list(s)


def _layouts(module):
    """The same five layouts built in ember or torch."""
    base = module.arange(24.0).view(2, 3, 4)
    return {
        "contiguous": base,
        "transposed": base.transpose(0, 2),
        "permuted": base.permute(1, 2, 0),
        "gappy slice": base[:, :, ::2],
        "expanded": module.zeros(3, 1).expand(3, 4),
    }


@pytest.mark.parametrize("name", list(_layouts(ember)))
def test_copies_preserve_layout_like_torch(name):
    # Note [Preserving the layout]: clone, to(dtype) and *_like keep the
    # memory order (torch.preserve_format); contiguous() is row-major.
    torch = pytest.importorskip("torch")
    e, t = _layouts(ember)[name], _layouts(torch)[name]
    pairs = [
        (e.clone(), t.clone()),
        (e.double(), t.double()),
        (e.to(ember.int32), t.to(torch.int32)),
        (ember.zeros_like(e), torch.zeros_like(t)),
        (ember.empty_like(e), torch.empty_like(t)),
        (ember.rand_like(e), torch.rand_like(t)),
        (e.contiguous(), t.contiguous()),
    ]
    for mine, theirs in pairs:
        assert mine.stride() == theirs.stride(), name
    np.testing.assert_array_equal(e.clone().numpy(), t.clone().numpy())
