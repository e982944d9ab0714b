"""The indexing operators: index_select, gather, scatter(_), scatter_add(_),
index_add(_), index_fill(_), masked_fill(_), masked_select, nonzero,
argwhere, take, index_put(_).

NumPy is the value oracle (np.take, np.take_along_axis, np.add.at, ...),
over random shapes, dtypes and non-contiguous inputs; torch, where
installed, is the oracle for signatures, error types and messages.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember

HYP = settings(max_examples=min(60, settings.default.max_examples), deadline=None)

DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float32, np.float64]


def values_of(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.floating):
        return (rng.standard_normal(shape) * 10).astype(dtype)
    return rng.integers(0, 100, size=shape).astype(dtype)


@st.composite
def inputs(draw, min_ndim=0, max_ndim=3, dtypes=DTYPES, min_size=0, writable=False):
    """(NumPy array, ember tensor with the same values): contiguous,
    transposed, sliced with a step, offset, or (read-only uses) expanded."""
    shape = tuple(draw(st.lists(st.integers(min_size, 4), min_size=min_ndim, max_size=max_ndim)))
    dtype = draw(st.sampled_from(dtypes))
    layout = draw(st.sampled_from(["contiguous", "transposed", "stepped", "offset"]
                                  + ([] if writable else ["expanded"])))
    a = values_of(shape, dtype, seed=draw(st.integers(0, 1000)))
    if layout == "transposed" and a.ndim >= 2:
        e = ember.tensor(np.ascontiguousarray(a.T)).t() if a.ndim == 2 else \
            ember.tensor(np.ascontiguousarray(a.transpose(2, 1, 0))).permute(2, 1, 0)
    elif layout == "stepped" and a.ndim >= 1:
        wide = np.repeat(a, 2, axis=-1)
        e = ember.tensor(wide)[..., ::2]
    elif layout == "offset":
        flat = np.concatenate([values_of((3,), dtype), a.ravel()])
        e = ember.tensor(flat)[3:].view(shape) if shape else ember.tensor(flat)[3]
    elif layout == "expanded" and a.ndim >= 1:
        a = np.broadcast_to(a[..., :1], shape).copy() if shape[-1] else a
        e = ember.tensor(a[..., :1].copy()).expand(*shape) if shape[-1] else ember.tensor(a)
    else:
        e = ember.tensor(a)
    assert e.shape == a.shape
    return a, e


def np_index(values, dtype=np.int64):
    return ember.tensor(np.asarray(values, dtype=dtype))


def assert_same(result, expected):
    assert tuple(result.shape) == expected.shape
    assert np.asarray(result).dtype == expected.dtype
    np.testing.assert_array_equal(np.asarray(result), expected)


# ---- index_select, gather, take -------------------------------------------------------


@HYP
@given(inputs(min_ndim=1), st.data())
def test_index_select_matches_numpy(ae, data):
    a, e = ae
    dim = data.draw(st.integers(-a.ndim, a.ndim - 1))
    size = a.shape[dim]
    n = data.draw(st.integers(0, 5)) if size else 0
    idx = np.array(data.draw(st.lists(st.integers(0, size - 1), min_size=n, max_size=n)) if size else [],
                   dtype=np.int64)
    index = np_index(idx, data.draw(st.sampled_from([np.int64, np.int32])))
    expected = np.take(a, idx, axis=dim)
    assert_same(ember.index_select(e, dim, index), expected)
    assert_same(e.index_select(dim, index), expected)


@HYP
@given(inputs(min_ndim=1), st.data())
def test_gather_matches_numpy(ae, data):
    a, e = ae
    dim = data.draw(st.integers(0, a.ndim - 1))
    # index no larger than the input apart from dim; any size along dim
    ishape = [data.draw(st.integers(0, s)) for s in a.shape]
    ishape[dim] = data.draw(st.integers(0, 4)) if a.shape[dim] else 0
    n = math.prod(ishape)
    idx = np.array(data.draw(st.lists(st.integers(0, max(a.shape[dim] - 1, 0)), min_size=n, max_size=n)),
                   dtype=np.int64).reshape(ishape)
    part = a[tuple(slice(0, s) if d != dim else slice(None) for d, s in enumerate(ishape))]
    expected = np.take_along_axis(part, idx, axis=dim)
    assert_same(ember.gather(e, dim, ember.tensor(idx)), expected)
    assert_same(e.gather(dim - a.ndim, ember.tensor(idx)), expected)


@HYP
@given(inputs(), st.data())
def test_take_matches_numpy(ae, data):
    a, e = ae
    n = a.size
    ishape = tuple(data.draw(st.lists(st.integers(0 if n else 0, 3), max_size=2)))
    if n == 0:
        ishape = (0,)
    idx = np.array(data.draw(st.lists(st.integers(-n, n - 1), min_size=math.prod(ishape),
                                      max_size=math.prod(ishape))) if n else [],
                   dtype=np.int64).reshape(ishape)
    assert_same(ember.take(e, ember.tensor(idx)), np.take(a.ravel(), idx))
    assert_same(e.take(ember.tensor(idx)), np.take(a.ravel(), idx))


def test_zero_dim_inputs():
    s = ember.tensor(5.0)
    assert ember.index_select(s, 0, ember.tensor([0])).shape == ()
    assert ember.index_select(s, 0, ember.tensor(0)).item() == 5.0
    assert ember.gather(s, 0, ember.tensor(0)).shape == ()
    assert ember.gather(s, 0, ember.tensor([0])).shape == (1,)
    assert ember.take(s, ember.tensor([0, 0])).tolist() == [5.0, 5.0]
    assert ember.nonzero(s).shape == (1, 0)
    assert [t.tolist() for t in ember.nonzero(s, as_tuple=True)] == [[0]]
    assert [t.tolist() for t in ember.nonzero(ember.tensor(0), as_tuple=True)] == [[]]
    assert ember.masked_select(s, ember.tensor(True)).tolist() == [5.0]
    assert ember.masked_fill(s, ember.tensor(True), 2).item() == 2.0
    assert s.clone().scatter_(0, ember.tensor(0), 1.0).item() == 1.0


# ---- scatter, scatter_add, index_add, index_fill, index_put ---------------------------


@st.composite
def scatter_cases(draw, unique):
    a, e = draw(inputs(min_ndim=1, min_size=1, writable=True,
                       dtypes=[np.int32, np.int64, np.float32, np.float64, np.uint8]))
    dim = draw(st.integers(0, a.ndim - 1))
    ishape = [draw(st.integers(0, s)) for s in a.shape]
    size = a.shape[dim]
    ishape[dim] = draw(st.integers(0, size))
    # unique: each column gets distinct positions, so no position is written twice
    idx = np.zeros(ishape, dtype=np.int64)
    for col in np.ndindex(*[s for d, s in enumerate(ishape) if d != dim]):
        positions = (draw(st.permutations(range(size)))[:ishape[dim]] if unique
                     else draw(st.lists(st.integers(0, size - 1), min_size=ishape[dim], max_size=ishape[dim])))
        where = list(col)
        where.insert(dim, slice(None))
        idx[tuple(where)] = positions
    sshape = [s + draw(st.integers(0, 1)) for s in ishape]
    src = values_of(tuple(sshape), a.dtype, seed=draw(st.integers(0, 100)))
    return a, e, dim, idx, src


def numpy_scatter(a, dim, idx, src, combine):
    out = a.copy()
    with np.errstate(over="ignore"):  # integers wrap, as in ember and torch
        return _numpy_scatter_into(out, dim, idx, src, combine)


def _numpy_scatter_into(out, dim, idx, src, combine):
    for pos in np.ndindex(*idx.shape):
        target = list(pos)
        target[dim] = idx[pos]
        out[tuple(target)] = combine(out[tuple(target)], src[pos])
    return out


@HYP
@given(scatter_cases(unique=True), st.booleans())
def test_scatter_matches_numpy(case, use_value):
    a, e, dim, idx, src = case
    src_e = ember.tensor(src)
    value = 3 if use_value else None
    expected = numpy_scatter(a, dim, idx, np.broadcast_to(np.asarray(3, a.dtype), idx.shape) if use_value else src,
                             lambda old, new: new)
    before = e._version
    result = ember.scatter(e, dim, ember.tensor(idx), value if use_value else src_e)
    assert_same(result, expected)
    assert e._version == before and result._version == 0
    returned = e.scatter_(dim, ember.tensor(idx), value=value) if use_value else e.scatter_(dim, ember.tensor(idx), src_e)
    assert returned is e
    assert_same(e, expected)
    assert e._version == before + 1


@HYP
@given(scatter_cases(unique=False))
def test_scatter_add_and_reduce_match_numpy(case):
    a, e, dim, idx, src = case
    added = numpy_scatter(a, dim, idx, src, lambda old, new: old + new)
    assert_same(ember.scatter_add(e, dim, ember.tensor(idx), ember.tensor(src)), added)
    assert_same(e.clone().scatter_(dim, ember.tensor(idx), ember.tensor(src), reduce="add"), added)
    multiplied = numpy_scatter(a, dim, idx, src, lambda old, new: old * new)
    assert_same(e.clone().scatter_(dim, ember.tensor(idx), ember.tensor(src), reduce="multiply"),
                multiplied)
    before = e._version
    assert e.scatter_add_(dim, ember.tensor(idx), ember.tensor(src)) is e
    assert_same(e, added)
    assert e._version == before + 1


@HYP
@given(inputs(min_ndim=1, min_size=1, writable=True, dtypes=[np.int64, np.float32, np.float64, np.int16]),
       st.data())
def test_index_add_and_index_fill_match_numpy(ae, data):
    a, e = ae
    dim = data.draw(st.integers(0, a.ndim - 1))
    size = a.shape[dim]
    idx = np.array(data.draw(st.lists(st.integers(0, size - 1), max_size=5)), dtype=np.int64)
    sshape = list(a.shape)
    sshape[dim] = len(idx)
    source = values_of(tuple(sshape), a.dtype, seed=1)
    alpha = data.draw(st.sampled_from([1, 2, -1]))
    expected = a.copy()
    np.add.at(expected, (slice(None),) * dim + (idx,), source * np.asarray(alpha, a.dtype))
    index = ember.tensor(idx.astype(data.draw(st.sampled_from([np.int64, np.int32]))))
    assert_same(ember.index_add(e, dim, index, ember.tensor(source), alpha=alpha), expected)
    before = e._version
    assert e.index_add_(dim, index, ember.tensor(source), alpha=alpha) is e
    assert_same(e, expected)
    assert e._version == before + 1
    # index_fill_ takes negative positions too
    fidx = np.array(data.draw(st.lists(st.integers(-size, size - 1), max_size=4)), dtype=np.int64)
    filled = expected.copy()
    filled[(slice(None),) * dim + (fidx,)] = 7
    assert_same(ember.index_fill(e, dim, ember.tensor(fidx), 7), filled)
    assert e.index_fill_(dim, ember.tensor(fidx), ember.tensor(7)) is e
    assert_same(e, filled)
    assert e._version == before + 2


@HYP
@given(inputs(min_ndim=1, writable=True, dtypes=[np.int32, np.float64, np.bool_]), st.data())
def test_index_put_matches_numpy(ae, data):
    a, e = ae
    k = data.draw(st.integers(1, a.ndim))
    n = data.draw(st.integers(0, 4))
    if any(s == 0 for s in a.shape[:k]):
        n = 0
    idx = tuple(np.array(data.draw(st.lists(st.integers(-s, s - 1), min_size=n, max_size=n)) if s else [],
                         dtype=np.int64) for s in a.shape[:k])
    vshape = (n,) + a.shape[k:]
    values = values_of(vshape, a.dtype, seed=2)
    accumulate = data.draw(st.booleans())
    indices = tuple(ember.tensor(i) for i in idx)
    if accumulate:
        expected = a.copy()
        np.add.at(expected, idx, values)
        if a.dtype == np.bool_:
            expected = expected.astype(np.bool_)
        result = ember.index_put(e, indices, ember.tensor(values), accumulate=True)
        assert_same(result, expected)
        before = e._version
        assert e.index_put_(list(indices), ember.tensor(values), True) is e
        assert_same(e, expected)
        assert e._version == before + 1
    else:  # unique positions only: with repeats, which write wins is open
        flat = [tuple(int(i[j]) % s for i, s in zip(idx, a.shape)) for j in range(n)]
        if len(set(flat)) == len(flat):
            expected = a.copy()
            expected[idx] = values
            assert_same(ember.index_put(e, indices, ember.tensor(values)), expected)


# ---- masks, nonzero --------------------------------------------------------------------


@st.composite
def masked_cases(draw, writable):
    a, e = draw(inputs(writable=writable))
    # a mask that broadcasts to the input: trailing dims, some of size 1
    k = draw(st.integers(0, a.ndim))
    mshape = tuple(1 if draw(st.booleans()) else s for s in a.shape[a.ndim - k:])
    mask = values_of(mshape, np.bool_, seed=draw(st.integers(0, 100)))
    return a, e, mask


@HYP
@given(masked_cases(writable=True), st.sampled_from([0, 1, 2.5, True]))
def test_masked_fill_matches_numpy(case, value):
    a, e, mask = case
    expected = np.where(mask, np.asarray(value).astype(a.dtype), a)
    assert_same(ember.masked_fill(e, ember.tensor(mask), value), expected)
    before = e._version
    assert e.masked_fill_(ember.tensor(mask), ember.tensor(value)) is e
    assert_same(e, expected)
    assert e._version == before + 1


@HYP
@given(masked_cases(writable=False))
def test_masked_select_matches_numpy(case):
    a, e, mask = case
    shape = np.broadcast_shapes(a.shape, mask.shape)
    expected = np.broadcast_to(a, shape)[np.broadcast_to(mask, shape)]
    assert_same(ember.masked_select(e, ember.tensor(mask)), expected)
    # the mask may be the larger one
    assert_same(e.masked_select(ember.tensor(mask[None])),
                np.broadcast_to(a, (1,) + shape)[np.broadcast_to(mask[None], (1,) + shape)])


@HYP
@given(inputs())
def test_nonzero_and_argwhere_match_numpy(ae):
    a, e = ae
    assert_same(ember.nonzero(e), np.argwhere(a))
    assert_same(e.nonzero(), np.argwhere(a))
    assert_same(ember.argwhere(e), np.argwhere(a))
    columns = ember.nonzero(e, as_tuple=True)
    assert isinstance(columns, tuple)
    for ours, theirs in zip(columns, np.nonzero(np.atleast_1d(a))):
        assert_same(ours, theirs.astype(np.int64))


def test_nonzero_counts_nan_and_negative_zero_like_numpy():
    a = np.array([0.0, -0.0, np.nan, 1e-300, -1.0], dtype=np.float64)
    assert ember.nonzero(ember.tensor(a)).flatten().tolist() == np.flatnonzero(a).tolist()


# ---- out= -------------------------------------------------------------------------------


def test_out_arguments():
    t = ember.arange(6.0).view(2, 3)
    out = ember.zeros(2, 2)
    r = ember.index_select(t, 1, ember.tensor([2, 0]), out=out)
    assert r is out and out.tolist() == [[2, 0], [5, 3]] and out._version == 1
    out = ember.zeros(2, 1)
    assert ember.gather(t, 1, ember.tensor([[1], [2]]), out=out) is out
    assert out.tolist() == [[1], [5]]
    out = ember.zeros(2)
    assert ember.take(t, ember.tensor([5, 0]), out=out).tolist() == [5, 0]
    out = ember.zeros(2)
    assert ember.masked_select(t, ember.tensor([[True, False, False], [False, False, True]]), out=out) is out
    assert out.tolist() == [0, 5]
    out = ember.zeros(2, 2, dtype=ember.int64)
    assert ember.nonzero(ember.tensor([[0, 1], [1, 0]]), out=out).tolist() == [[0, 1], [1, 0]]


def test_bad_out_is_left_alone():
    t = ember.arange(6.0).view(2, 3)
    wrong_shape = ember.zeros(3, 3)
    with pytest.raises(RuntimeError, match="shape"):
        ember.index_select(t, 1, ember.tensor([2, 0]), out=wrong_shape)
    assert wrong_shape.tolist() == [[0.0] * 3] * 3 and wrong_shape._version == 0
    wrong_dtype = ember.zeros(2, 2, dtype=ember.int64)
    with pytest.raises(RuntimeError, match="same scalar type"):
        ember.index_select(t, 1, ember.tensor([2, 0]), out=wrong_dtype)
    assert wrong_dtype._version == 0
    with pytest.raises(TypeError):
        ember.take(t, ember.tensor([0]), out=[1.0])


# out= of another dtype (Note [out= of the gathers] in IndexOps.c): PyTorch's
# RuntimeError in each operator's own words, before any shape check.
OUT_DTYPE_CASES = {
    "index_select": lambda m, x, out: m.index_select(x, 0, m.tensor([1, 0]), out=out),
    "gather": lambda m, x, out: m.gather(x, 1, m.tensor([[0, 2], [1, 1]]), out=out),
    "take": lambda m, x, out: m.take(x, m.tensor([4, 0]), out=out),
    "masked_select": lambda m, x, out: m.masked_select(x, x != 0, out=out),
    "nonzero": lambda m, x, out: m.nonzero(x, out=out),
}


def out_dtype_outcome(lib, name, input_dtype, out_dtype, right_shape):
    """(exception type, message) or (dtype, values, whether out came back)."""
    x = lib.tensor([[0, 1, 2], [3, 0, 5]], dtype=getattr(lib, input_dtype))
    shape = tuple(OUT_DTYPE_CASES[name](lib, x, None).shape) if right_shape else (7,)
    out = lib.zeros(shape, dtype=getattr(lib, out_dtype))
    try:
        result = OUT_DTYPE_CASES[name](lib, x, out)
    except Exception as error:  # noqa: BLE001 (the oracle's exception is the subject)
        if lib is ember:
            assert not out.any().item() and out._version == 0, "a refused out= is left alone"
        return type(error).__name__, str(error).splitlines()[0]
    return str(result.dtype).split(".")[1], result.tolist(), result is out


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
@pytest.mark.parametrize("right_shape", [True, False], ids=["out_shape", "other_shape"])
@pytest.mark.parametrize("input_dtype", ["float32", "int64", "bool"])
@pytest.mark.parametrize("out_dtype", ["bool", "uint8", "int32", "int64", "float16", "float32", "float64"])
@pytest.mark.parametrize("name", sorted(OUT_DTYPE_CASES))
def test_out_of_another_dtype_raises_as_torch(name, out_dtype, input_dtype, right_shape):
    torch = pytest.importorskip("torch")
    theirs = out_dtype_outcome(torch, name, input_dtype, out_dtype, right_shape)
    ours = out_dtype_outcome(ember, name, input_dtype, out_dtype, right_shape)
    if theirs[0].endswith("Error") or right_shape:
        assert ours == theirs
    else:  # PyTorch resizes out; ember does not
        assert ours[0] == "RuntimeError" and "shape" in ours[1]


def test_out_of_another_dtype_without_torch():
    x = ember.arange(6.0).view(2, 3)
    out = ember.zeros(5, dtype=ember.float64)  # the dtype is checked first
    with pytest.raises(RuntimeError, match=r"^Expected out tensor to have dtype float, but got double instead$"):
        ember.gather(x, 1, ember.tensor([[0], [1]]), out=out)
    with pytest.raises(RuntimeError, match=r"^nonzero: Expected out tensor to have scalar type Long but got "
                                           r"scalar typeDouble$"):
        ember.nonzero(x, out=out)
    with pytest.raises(RuntimeError, match=r"^take\(\): self and out expected to have the same dtype, but got "
                                           r"self\.dtype = Float and out\.dtype = Double$"):
        ember.take(x, ember.tensor([0]), out=out)
    with pytest.raises(RuntimeError, match=r"^masked_select\(\): self and result must have the same scalar type$"):
        ember.masked_select(x, x > 1, out=out)
    assert out._version == 0 and not out.any().item()


# ---- errors: types and messages as in PyTorch; nothing modified -----------------------


def error_cases(lib):
    t = lib.arange(12.0).reshape(3, 4)
    long = lambda v: lib.tensor(v)  # noqa: E731
    i, j = long([0, 1, 2, 3]), long([[0, 1, 2, 3], [3, 2, 1, 0]])  # positions into themselves
    return {
        "index_select_range": lambda: lib.index_select(t, 0, long([5])),
        "index_select_negative": lambda: lib.index_select(t, 0, long([-1])),
        "index_select_float": lambda: lib.index_select(t, 0, lib.tensor([0.0])),
        "index_select_2d": lambda: lib.index_select(t, 0, long([[0]])),
        "index_select_dim": lambda: lib.index_select(t, 2, long([0])),
        "gather_range": lambda: lib.gather(t, 0, long([[5]])),
        "gather_negative": lambda: lib.gather(t, 0, long([[-1]])),
        "gather_float": lambda: lib.gather(t, 0, lib.tensor([[0.0]])),
        "gather_int16": lambda: lib.gather(t, 0, lib.tensor([[0]], dtype=lib.int16)),
        "gather_ndim": lambda: lib.gather(t, 0, long([0])),
        "gather_size": lambda: lib.gather(t, 0, lib.zeros(2, 5, dtype=lib.int64)),
        "gather_size1": lambda: lib.gather(t, 1, lib.zeros(4, 2, dtype=lib.int64)),
        "scatter_range": lambda: t.clone().scatter_(0, long([[5]]), 1.0),
        "scatter_dtype": lambda: t.clone().scatter_(0, long([[0]]), lib.zeros(1, 1, dtype=lib.float64)),
        "scatter_src_size": lambda: t.clone().scatter_(0, long([[0, 1]]), lib.zeros(1, 1)),
        "scatter_float_index": lambda: t.clone().scatter_(0, lib.tensor([[0.0]]), lib.zeros(1, 1)),
        "scatter_add_float_index": lambda: t.clone().scatter_add_(0, lib.tensor([[0.0]]), lib.zeros(1, 1)),
        "scatter_self_size": lambda: t.clone().scatter_(0, lib.zeros(2, 5, dtype=lib.int64), 1.0),
        "scatter_ndim": lambda: t.clone().scatter_(0, long([0]), 1.0),
        "scatter_src_ndim": lambda: lib.scatter(t, 0, long([[1]]), lib.tensor(5.0)),
        "scatter_reduce": lambda: t.clone().scatter_(0, long([[0]]), 1.0, reduce="max"),
        "scatter_add_dtype": lambda: t.clone().scatter_add_(0, long([[0]]), lib.zeros(1, 1, dtype=lib.float64)),
        "scatter_add_range": lambda: t.clone().scatter_add_(0, long([[3]]), lib.zeros(1, 1)),
        "masked_fill_float_mask": lambda: t.clone().masked_fill_(lib.tensor([1.0, 0, 0, 0]), 1.0),
        "masked_fill_uint8_mask": lambda: t.clone().masked_fill_(lib.tensor([1, 0, 0, 0], dtype=lib.uint8), 1.0),
        "masked_fill_shape": lambda: t.clone().masked_fill_(lib.tensor([True] * 3), 1.0),
        "masked_fill_grow": lambda: t.clone().masked_fill_(lib.ones(2, 3, 4, dtype=lib.bool), 1.0),
        "masked_fill_value_1d": lambda: t.clone().masked_fill_(lib.tensor([True] * 4), lib.tensor([1.0])),
        "masked_select_float": lambda: lib.masked_select(t, lib.tensor([1.0, 0, 0, 0])),
        "masked_select_shape": lambda: lib.masked_select(t, lib.tensor([True] * 3)),
        "take_range": lambda: lib.take(t, long([12])),
        "take_negative": lambda: lib.take(t, long([-13])),
        "take_float": lambda: lib.take(t, lib.tensor([1.0])),
        "take_int32": lambda: lib.take(t, lib.tensor([1], dtype=lib.int32)),
        "index_put_dtype": lambda: t.clone().index_put_((long([0]),), lib.tensor(1.0, dtype=lib.float64)),
        "index_put_range": lambda: t.clone().index_put_((long([5]),), lib.tensor(1.0)),
        "index_put_shape": lambda: t.clone().index_put_((long([0]),), lib.zeros(3)),
        "index_put_tensor": lambda: t.clone().index_put_(long([0]), lib.tensor(1.0)),
        "index_put_none": lambda: t.clone().index_put_((None, long([0])), lib.tensor(1.0)),
        "index_put_value": lambda: t.clone().index_put_((long([0]),), 1.0),
        "index_put_mask": lambda: t.clone().index_put_((lib.tensor([True, False]),), lib.tensor(2.0)),
        "index_put_accumulate": lambda: t.clone().index_put_((long([0]),), lib.tensor(1.0), accumulate=2),
        "index_put_too_many": lambda: lib.zeros(3).index_put_((long([0]), long([0])), lib.tensor([1.0])),
        "index_fill_range": lambda: t.clone().index_fill_(0, long([5]), 1.0),
        "index_fill_float": lambda: t.clone().index_fill_(0, lib.tensor([0.0]), 1.0),
        "index_fill_2d": lambda: t.clone().index_fill_(0, long([[0]]), 1.0),
        "index_fill_value_1d": lambda: t.clone().index_fill_(0, long(0), lib.tensor([1.0])),
        "index_add_range": lambda: t.clone().index_add_(0, long([5]), lib.ones(1, 4)),
        "index_add_shape": lambda: t.clone().index_add_(0, long([0]), lib.ones(1, 3)),
        "index_add_dtype": lambda: t.clone().index_add_(0, long([0]), lib.ones(1, 4, dtype=lib.float64)),
        "index_add_count": lambda: t.clone().index_add_(0, long([0, 1]), lib.ones(1, 4)),
        "index_add_2d": lambda: t.clone().index_add_(0, long([[0]]), lib.ones(1, 4)),
        "index_add_float": lambda: t.clone().index_add_(0, lib.tensor([0.0]), lib.ones(1, 4)),
        # a dense argument sharing memory with the written tensor (PyTorch's
        # assert_no_overlap), checked after the shapes, before the positions
        "index_add_overlap": lambda: t.index_add_(1, long([0, 1, 2, 3]), t),
        "index_add_row_overlap": lambda: t[0].index_add_(0, long([3, 2, 1, 0]), t[0], alpha=2),
        "index_add_index_overlap": lambda: i.index_add_(0, i, lib.ones(4, dtype=lib.int64)),
        "scatter_overlap": lambda: t.scatter_(1, long([[0, 1], [2, 3]]), t),
        "scatter_add_overlap": lambda: t[1].scatter_add_(0, long([0, 1]), t[1, 2:]),
        "scatter_reduce_overlap": lambda: t.scatter_reduce_(1, long([[0], [1]]), t, "sum"),
        "scatter_multiply_overlap": lambda: t.scatter_(1, long([[0], [1]]), t, reduce="multiply"),
        "scatter_index_overlap": lambda: j.scatter_(1, j, 7),
        "scatter_add_index_overlap": lambda: j.scatter_add_(1, j, lib.ones(2, 4, dtype=lib.int64)),
        "scatter_index_overlap_out_of_range": lambda: (lambda k: k.scatter_(1, k, 0))(j + 4),
        "index_fill_index_overlap": lambda: i.index_fill_(0, i, 7),
        "index_fill_tensor_index_overlap": lambda: i.index_fill_(0, i, lib.tensor(7)),
    }


CASES = sorted(error_cases(ember))


def raised(fn):
    """(type, message) of what fn raises.  Not an ExceptionInfo: its
    traceback would keep the tensors of fn's frame alive in a cycle, to be
    freed by some later test's garbage collection (test_memory counts
    bytes)."""
    try:
        fn()
    except Exception as exc:
        return type(exc), str(exc).splitlines()[0]
    pytest.fail(f"{fn} did not raise")


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter with Tensor src")
@pytest.mark.parametrize("name", CASES)
def test_errors_match_torch(name):
    torch = pytest.importorskip("torch")
    theirs = raised(error_cases(torch)[name])
    ours = raised(error_cases(ember)[name])
    assert ours == theirs


def test_error_messages_without_torch():
    cases = error_cases(ember)
    with pytest.raises(IndexError, match=r"^index out of range in self$"):
        cases["index_select_range"]()
    with pytest.raises(RuntimeError, match=r"^index 5 is out of bounds for dimension 0 with size 3$"):
        cases["gather_range"]()
    with pytest.raises(IndexError, match=r"^out of range: tried to access index 12 on a tensor of 12 elements\.$"):
        cases["take_range"]()
    with pytest.raises(RuntimeError, match=r"^masked_fill_ only supports boolean masks, but got mask with dtype "
                                           r"float$"):
        cases["masked_fill_float_mask"]()


def test_failed_in_place_ops_modify_nothing():
    t = ember.arange(12.0).view(3, 4)
    snapshot, version = t.tolist(), t._version
    failing = [
        lambda: t.scatter_(0, ember.tensor([[0, 1], [5, 0]]), 1.0),        # second row out of range
        lambda: t.scatter_add_(0, ember.tensor([[0, 1], [2, 3]]), ember.ones(2, 2)),
        lambda: t.index_add_(0, ember.tensor([0, 3]), ember.ones(2, 4)),
        lambda: t.index_fill_(1, ember.tensor([0, 4]), 1.0),
        lambda: t.index_put_((ember.tensor([0, 1]), ember.tensor([0, 4])), ember.tensor(1.0)),
        lambda: t.index_put_((ember.tensor([0, 1]),), ember.zeros(3)),
        lambda: t.masked_fill_(ember.tensor([True, False]), 1.0),
        lambda: t.masked_fill_(ember.tensor([True] * 4), "x"),
    ]
    for fail in failing:
        with pytest.raises((IndexError, RuntimeError, TypeError)):
            fail()
        assert t.tolist() == snapshot
        assert t._version == version


def test_int32_indices_and_overflowing_values():
    t = ember.arange(6.0).view(2, 3)
    i32 = ember.tensor([[1, 0, 1]], dtype=ember.int32)
    assert ember.gather(t, 0, i32).tolist() == [[3, 1, 5]]
    assert t.clone().scatter_(0, i32, -1.0).tolist() == [[0, -1, 2], [-1, 4, -1]]
    assert t.clone().scatter_add_(0, i32, ember.ones(1, 3)).tolist() == [[0, 2, 2], [4, 4, 6]]
    with pytest.raises(RuntimeError, match="overflow"):
        ember.zeros(3, dtype=ember.uint8).masked_fill_(ember.tensor(True), 300)
    # alpha is converted to the dtype, as in PyTorch
    assert ember.zeros(3, dtype=ember.int64).index_add_(0, ember.tensor([0]), ember.tensor([1]),
                                                        alpha=1.5).tolist() == [1, 0, 0]


def test_in_place_ops_refuse_read_only_and_expanded():
    frozen = np.arange(4.0)
    frozen.flags.writeable = False
    r = ember.from_numpy(frozen)
    for op in [lambda x: x.scatter_(0, ember.tensor([0]), 1.0),
               lambda x: x.masked_fill_(ember.tensor(True), 1.0),
               lambda x: x.index_fill_(0, ember.tensor([0]), 1.0),
               lambda x: x.index_add_(0, ember.tensor([0]), ember.ones(1, dtype=ember.float64)),
               lambda x: x.index_put_((ember.tensor([0]),), ember.tensor(1.0, dtype=ember.float64))]:
        with pytest.raises(RuntimeError, match="read-only"):
            op(r)
    assert frozen.tolist() == [0.0, 1.0, 2.0, 3.0]
    e = ember.zeros(1).expand(4)
    with pytest.raises(RuntimeError, match="more than one element"):
        e.masked_fill_(ember.tensor(True), 1.0)
    with pytest.raises(RuntimeError, match="more than one element"):
        e.scatter_(0, ember.tensor([0]), 1.0)


def test_sources_sharing_memory_are_read_first():
    t = ember.arange(5.0)
    t.index_put_((ember.tensor([1, 2, 3, 4]),), t[:4])
    assert t.tolist() == [0, 0, 1, 2, 3]
    # a dense source in self's memory is refused (PyTorch's check); a
    # strided one passes it ("too hard") and is copied aside first
    s = ember.arange(6.0)
    s.scatter_(0, ember.tensor([1, 2, 3]), s[::2])
    assert s.tolist() == [0, 0, 2, 4, 4, 5]
    u = ember.arange(6.0)
    u.index_add_(0, ember.tensor([1, 2, 3]), u[::2])
    assert u.tolist() == [0, 1, 4, 7, 4, 5]


def test_signatures_and_keywords():
    t = ember.arange(6.0).view(2, 3)
    idx = ember.tensor([[0, 1, 0]])
    assert ember.scatter(t, 0, idx, src=ember.ones(1, 3)).tolist() == [[1, 1, 1], [3, 1, 5]]
    assert ember.scatter(t, dim=0, index=idx, value=9).tolist() == [[9, 1, 9], [3, 9, 5]]
    assert t.scatter(0, idx, 2.0, reduce="multiply").tolist() == [[0, 1, 4], [3, 8, 5]]
    assert ember.gather(t, dim=1, index=ember.tensor([[2], [0]])).tolist() == [[2], [3]]
    assert ember.index_select(t, dim=1, index=ember.tensor([1])).tolist() == [[1], [4]]
    assert ember.masked_fill(t, mask=ember.tensor([True, False, False]), value=-1).tolist() == \
        [[-1, 1, 2], [-1, 4, 5]]
    assert ember.index_put(t, indices=[ember.tensor([0])], values=ember.tensor(7.0)).tolist() == \
        [[7, 7, 7], [3, 4, 5]]
    # masked_fill broadcasts the input to the mask's shape, like torch
    assert ember.masked_fill(ember.zeros(3), ember.ones(2, 3, dtype=ember.bool), 1.0).shape == (2, 3)
    with pytest.raises(TypeError, match="missing required argument 'index'"):
        ember.gather(t, 0)
    with pytest.raises(TypeError):
        ember.scatter(t, 0, idx)
    with pytest.raises(TypeError):
        ember.index_select([1, 2], 0, ember.tensor([0]))
    assert t._version == 0


def test_signatures_match_torch():
    torch = pytest.importorskip("torch")
    for name in ["index_select", "gather", "take", "scatter", "scatter_add", "index_add", "index_fill",
                 "masked_fill", "masked_select", "nonzero", "argwhere", "index_put_", "index_put"]:
        assert hasattr(torch, name) and hasattr(ember, name), name
    for name in ["scatter_", "scatter_add_", "index_add_", "index_fill_", "masked_fill_", "index_put_"]:
        assert hasattr(torch.Tensor, name) and hasattr(ember.Tensor, name), name
        assert not hasattr(ember, name) or hasattr(torch, name), name


@pytest.mark.noleakcheck
def test_large_operators_match_numpy():
    # past the parallel grain and the GIL-free threshold
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 400)).astype(np.float32)
    e = ember.tensor(a)
    idx = rng.integers(0, 300, size=(300, 400))
    np.testing.assert_array_equal(np.asarray(ember.gather(e, 0, ember.tensor(idx))),
                                  np.take_along_axis(a, idx, axis=0))
    mask = a > 0
    np.testing.assert_array_equal(np.asarray(ember.masked_select(e, ember.tensor(mask))), a[mask])
    filled = e.clone().masked_fill_(ember.tensor(mask), 0.0)
    np.testing.assert_array_equal(np.asarray(filled), np.where(mask, 0, a))
    np.testing.assert_array_equal(np.asarray(ember.nonzero(ember.tensor(mask))), np.argwhere(mask))
    added = ember.zeros(300, 400).scatter_add_(0, ember.tensor(idx), e)
    expected = np.zeros((300, 400), dtype=np.float32)
    np.add.at(expected, (idx, np.arange(400)[None, :]), a)
    np.testing.assert_allclose(np.asarray(added), expected, rtol=1e-5, atol=1e-4)
