"""Shape operators: cat/concat/stack/hstack/vstack, split/chunk/tensor_split/
unbind, flip/fliplr/flipud, roll, repeat/tile, tril/triu (and the in-place
forms), sort/argsort/msort/topk/kthvalue, unique/unique_consecutive,
one_hot.

Values are checked against NumPy (np.concatenate, np.split, np.flip,
np.roll, np.tile, np.tril, np.sort(kind="stable"), np.unique, ...) over
random shapes with 0- and 1-size dims, negative dims, all dtypes, and
inputs that are contiguous, transposed, sliced with a step, expanded
(stride 0) or offset into their storage.  Result dtypes, error types and
messages are checked against PyTorch where it is installed.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember
import ember.nn.functional as F

HYP = settings(max_examples=min(60, settings.default.max_examples), deadline=None)

NP_DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64,
             np.float32, np.float64]
SORTABLE = NP_DTYPES  # every dtype sorts (PyTorch refuses bool in topk only)
LAYOUTS = ["contiguous", "transposed", "stepped", "expanded", "offset"]


def ember_dtype(np_dtype):
    return ember.from_numpy(np.zeros(0, dtype=np_dtype)).dtype


def as_numpy(t):
    return np.asarray(t)


def random_values(rng, shape, dtype, special=False):
    """Small values, so sorts and unique see many ties; floats may also get
    NaN, infinities and -0.0 when `special`."""
    raw = rng.integers(-3, 4, size=shape)
    if dtype == np.bool_:
        return raw > 0
    if dtype == np.uint8:
        return np.abs(raw).astype(np.uint8)
    out = raw.astype(dtype)
    if special and np.issubdtype(dtype, np.floating) and out.size:
        picks = rng.integers(0, 6, size=shape)
        out = np.where(picks == 0, np.nan, out)
        out = np.where(picks == 1, -0.0, out)
        out = np.where((picks == 2) & (raw > 2), np.inf, out)
        out = np.where((picks == 2) & (raw < -2), -np.inf, out).astype(dtype)
    return out


def make_input(values, layout, rng):
    """(ember tensor, numpy array) with the same values, the ember one laid
    out as `layout` says (the NumPy one is the plain values)."""
    shape = values.shape
    ndim = values.ndim
    if layout == "transposed" and ndim >= 2:
        base = np.ascontiguousarray(values.transpose(tuple(reversed(range(ndim)))))
        e = ember.from_numpy(base).permute(*reversed(range(ndim)))
    elif layout == "stepped" and ndim >= 1:
        base = np.zeros((shape[0] * 2,) + shape[1:], dtype=values.dtype)
        base[::2] = values
        e = ember.from_numpy(base)[::2]
    elif layout == "expanded" and ndim >= 1 and values.size:
        d = int(rng.integers(0, ndim))
        row = np.take(values, [0], axis=d)
        values = np.broadcast_to(row, shape).copy()
        e = ember.from_numpy(np.ascontiguousarray(row)).expand(*shape)
    elif layout == "offset":
        base = np.zeros(values.size + 5, dtype=values.dtype)
        base[3:3 + values.size] = values.reshape(-1)
        e = ember.from_numpy(base).narrow(0, 3, values.size).view(tuple(shape))
    else:
        e = ember.from_numpy(values.copy())
    assert tuple(e.shape) == values.shape
    return e, values


@st.composite
def inputs(draw, dtypes=NP_DTYPES, min_dims=0, max_dims=4, max_side=5,
           special=True):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims,
                                  min_side=0, max_side=max_side))
    layout = draw(st.sampled_from(LAYOUTS))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = random_values(rng, shape, dtype, special)
    return make_input(values, layout, rng)


def assert_same(e, n):
    """ember result e equals numpy result n: shape, dtype, values (NaN at
    the same places)."""
    assert tuple(e.shape) == n.shape
    assert e.dtype == ember_dtype(n.dtype), (e.dtype, n.dtype)
    np.testing.assert_array_equal(as_numpy(e), n)


def torch_or_skip():
    return pytest.importorskip("torch")


def errors_alike(fe, ft):
    """Runs fe (ember) and ft (torch); both must raise the same type with
    the same message.  Returns the message."""
    with pytest.raises(Exception) as te:
        ft()
    with pytest.raises(type(te.value)) as ee:
        fe()
    assert str(ee.value) == str(te.value).split("\n")[0]
    return str(ee.value)


# ---- cat / stack -----------------------------------------------------------------


@st.composite
def cat_inputs(draw):
    dtype = draw(st.sampled_from(NP_DTYPES))
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=4))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    count = draw(st.integers(1, 4))
    pairs = []
    for _ in range(count):
        s = list(shape)
        s[dim] = draw(st.integers(0, 4))
        pairs.append(make_input(random_values(rng, tuple(s), dtype),
                                draw(st.sampled_from(LAYOUTS)), rng))
    return pairs, dim


@HYP
@given(cat_inputs())
def test_cat_matches_numpy(case):
    pairs, dim = case
    es, ns = zip(*pairs)
    expected = np.concatenate(ns, axis=dim)
    assert_same(ember.cat(list(es), dim), expected)
    assert_same(ember.concat(tuple(es), dim=dim), expected)
    assert_same(ember.concatenate(list(es), dim), expected)
    assert ember.cat(list(es), dim)._version == 0


@HYP
@given(inputs(max_dims=3), st.integers(1, 3), st.data())
def test_stack_matches_numpy(pair, count, data):
    e, n = pair
    dim = data.draw(st.integers(-n.ndim - 1, n.ndim))
    assert_same(ember.stack([e] * count, dim), np.stack([n] * count, axis=dim))


def test_cat_skips_legacy_empty_and_promotes():
    a = ember.tensor([[1, 2]], dtype=ember.int32)
    e = ember.zeros(0)
    out = ember.cat([e, a, e], 0)
    assert out.dtype == ember.float32  # the skipped tensor still promotes
    np.testing.assert_array_equal(as_numpy(out), [[1.0, 2.0]])
    assert tuple(ember.cat([ember.zeros(0), ember.zeros(0, dtype=ember.int64)]).shape) == (0,)


def test_cat_result_dtypes_match_torch():
    torch = torch_or_skip()
    names = ["bool", "uint8", "int8", "int16", "int32", "int64", "float32", "float64"]
    for a in names:
        for b in names:
            ea, eb = ember.ones(2, dtype=getattr(ember, a)), ember.ones(3, dtype=getattr(ember, b))
            ta, tb = torch.ones(2, dtype=getattr(torch, a)), torch.ones(3, dtype=getattr(torch, b))
            assert str(ember.cat([ea, eb]).dtype).split(".")[1] == str(torch.cat([ta, tb]).dtype).split(".")[1]
            assert str(ember.stack([ea[:1], eb[:1]]).dtype).split(".")[1] == \
                str(torch.stack([ta[:1], tb[:1]]).dtype).split(".")[1]


def test_cat_out():
    a = ember.tensor([[1.0, 2.0]])
    b = ember.tensor([[3, 4]], dtype=ember.int64)
    out = ember.zeros(2, 2, dtype=ember.float64)
    v = out._version
    r = ember.cat([a, b], out=out)
    assert r is out and out._version > v
    np.testing.assert_array_equal(as_numpy(out), [[1, 2], [3, 4]])
    # wrong shape: error, out untouched
    bad = ember.full((3, 2), 7.0)
    with pytest.raises(RuntimeError, match="expected out of shape"):
        ember.cat([a, b], out=bad)
    np.testing.assert_array_equal(as_numpy(bad), np.full((3, 2), 7.0, dtype=np.float32))
    # a float result cannot go into an int out
    iout = ember.zeros(2, 2, dtype=ember.int32)
    with pytest.raises(TypeError, match="can't be cast to the desired output type Int"):
        ember.cat([a, b], out=iout)
    np.testing.assert_array_equal(as_numpy(iout), np.zeros((2, 2), dtype=np.int32))
    # out overlapping an input
    big = ember.zeros(2, 2)
    with pytest.raises(RuntimeError, match="single memory location"):
        ember.cat([big[:1], a], out=big)
    # stack out
    sout = ember.zeros(2, 1, 2)
    assert ember.stack([a, a], out=sout) is sout
    np.testing.assert_array_equal(as_numpy(sout), [[[1, 2]], [[1, 2]]])


def test_cat_out_errors_match_torch():
    torch = torch_or_skip()
    errors_alike(lambda: ember.cat([ember.ones(2, 2), ember.ones(2, 2, dtype=ember.int32)],
                                   out=ember.zeros(4, 2, dtype=ember.int32)),
                 lambda: torch.cat([torch.ones(2, 2), torch.ones(2, 2, dtype=torch.int32)],
                                   out=torch.zeros(4, 2, dtype=torch.int32)))


def test_hstack_vstack():
    a, b = np.arange(2, dtype=np.float32), np.arange(3, dtype=np.float32)
    assert_same(ember.hstack([ember.from_numpy(a), ember.from_numpy(b)]), np.hstack([a, b]))
    m = np.arange(6, dtype=np.int64).reshape(2, 3)
    em = ember.from_numpy(m)
    assert_same(ember.hstack([em, em]), np.hstack([m, m]))
    assert_same(ember.vstack([em, ember.from_numpy(m[0])]), np.vstack([m, m[0]]))
    assert_same(ember.vstack([ember.tensor(1.0), ember.tensor(2.0)]),
                np.vstack([np.float32(1), np.float32(2)]))


# ---- split, chunk, tensor_split, unbind -----------------------------------------


def check_views(pieces, e, n_pieces):
    assert len(pieces) == len(n_pieces)
    for p, q in zip(pieces, n_pieces):
        assert_same(p, q)
        if p.numel() > 0:  # a view into e's memory
            assert e.untyped_storage().data_ptr() <= p.data_ptr()


@HYP
@given(inputs(min_dims=1), st.integers(0, 6), st.data())
def test_split_int_matches_numpy(pair, split_size, data):
    e, n = pair
    dim = data.draw(st.integers(-n.ndim, n.ndim - 1))
    size = n.shape[dim]
    if split_size == 0 and size != 0:
        with pytest.raises(RuntimeError, match="split_size can only be 0"):
            ember.split(e, split_size, dim)
        return
    step = split_size if split_size else 1
    expected = np.split(n, list(range(step, size, step)), axis=dim) if size else [n]
    check_views(ember.split(e, split_size, dim), e, expected)
    check_views(e.split(split_size, dim=dim), e, expected)


@HYP
@given(inputs(min_dims=1), st.data())
def test_split_sizes_and_tensor_split_match_numpy(pair, data):
    e, n = pair
    dim = data.draw(st.integers(-n.ndim, n.ndim - 1))
    size = n.shape[dim]
    cuts = sorted(data.draw(st.lists(st.integers(0, size), max_size=4)))
    sizes = [b - a for a, b in zip([0] + cuts, cuts + [size])]
    expected = np.split(n, cuts, axis=dim)
    check_views(ember.split(e, sizes, dim), e, expected)
    check_views(e.tensor_split(cuts, dim), e, expected)
    sections = data.draw(st.integers(1, 6))
    check_views(ember.tensor_split(e, sections, dim=dim), e,
                np.array_split(n, sections, axis=dim))
    chunks = data.draw(st.integers(1, 6))
    if size:
        step = -(-size // chunks)
        expected = np.split(n, list(range(step, size, step)), axis=dim)
    else:
        expected = [n] * chunks
    check_views(ember.chunk(e, chunks, dim), e, expected)
    check_views(e.unbind(dim), e, [np.take(n, i, axis=dim) for i in range(size)])


def test_split_views_share_memory():
    e = ember.arange(6.0)
    a, b = e.split(3)
    a[0] = 100.0
    assert e[0].item() == 100.0 and b._version == e._version


def test_split_errors_match_torch():
    torch = torch_or_skip()
    for fe, ft in [
        (lambda m: m.split(0), None),
        (lambda m: m.split([1, 2]), None),
        (lambda m: m.split([3, -1]), None),
        (lambda m: m.split(-1), None),
        (lambda m: m.chunk(0), None),
        (lambda m: m.tensor_split(0), None),
        (lambda m: m.split(1, 2), None),
    ]:
        errors_alike(lambda: fe(ember.zeros(2, 2)), lambda: fe(torch.zeros(2, 2)))
    errors_alike(lambda: ember.split(ember.tensor(1.0), 1), lambda: torch.split(torch.tensor(1.0), 1))
    errors_alike(lambda: ember.chunk(ember.tensor(1.0), 1), lambda: torch.chunk(torch.tensor(1.0), 1))
    errors_alike(lambda: ember.unbind(ember.tensor(1.0)), lambda: torch.unbind(torch.tensor(1.0)))


# ---- flip, roll, repeat, tile --------------------------------------------------


@HYP
@given(inputs(), st.data())
def test_flip_matches_numpy(pair, data):
    e, n = pair
    if n.ndim == 0:
        assert_same(ember.flip(e, ()), n)
        return
    dims = data.draw(st.lists(st.integers(0, n.ndim - 1), unique=True, max_size=n.ndim))
    signed = [d - n.ndim if data.draw(st.booleans()) else d for d in dims]
    expected = np.flip(n, axis=tuple(dims)) if dims else n
    assert_same(ember.flip(e, signed), expected)
    assert_same(e.flip(*signed) if signed else e.flip(()), expected)
    if n.ndim >= 2:
        assert_same(e.fliplr(), np.fliplr(n))
    assert_same(ember.flipud(e), np.flipud(n))


@HYP
@given(inputs(), st.data())
def test_roll_matches_numpy(pair, data):
    e, n = pair
    shift = data.draw(st.integers(-7, 7))
    assert_same(ember.roll(e, shift), np.roll(n, shift))
    if n.ndim == 0:
        return
    dims = data.draw(st.lists(st.integers(-n.ndim, n.ndim - 1), min_size=1, max_size=3))
    shifts = data.draw(st.lists(st.integers(-7, 7), min_size=len(dims), max_size=len(dims)))
    assert_same(e.roll(tuple(shifts), tuple(dims)), np.roll(n, shifts, axis=dims))
    assert_same(ember.roll(e, shifts[0], dims[0]), np.roll(n, shifts[0], axis=dims[0]))


@HYP
@given(inputs(max_dims=3, max_side=4), st.data())
def test_repeat_and_tile_match_numpy(pair, data):
    e, n = pair
    extra = data.draw(st.integers(0, 2))
    reps = data.draw(st.lists(st.integers(0, 3), min_size=n.ndim + extra, max_size=n.ndim + extra))
    if reps:
        assert_same(e.repeat(*reps), np.tile(n, reps))
        assert_same(e.repeat(reps), np.tile(n, reps))
    tile = data.draw(st.lists(st.integers(0, 3), max_size=4))
    assert_same(ember.tile(e, tile), np.tile(n, tile))
    assert_same(e.tile(tuple(tile)), np.tile(n, tile))


def test_repeat_many_copies():
    # a large repeat count goes by doubling copies
    e = ember.tensor([[1, 2]], dtype=ember.int16)
    assert_same(e.repeat(1000, 3), np.tile(np.array([[1, 2]], dtype=np.int16), (1000, 3)))


def test_shape_op_errors_match_torch():
    torch = torch_or_skip()
    cases = [
        lambda m, t: m.flip(0, 0),
        lambda m, t: m.flip(2),
        lambda m, t: t.roll(m, (1, 2), (0,)),
        lambda m, t: t.roll(m, (1, 2)),
        lambda m, t: t.roll(m, (), ()),
        lambda m, t: m.roll(1, 5),
        lambda m, t: m.repeat(2),
        lambda m, t: m.repeat(-1, 2),
        lambda m, t: t.fliplr(m[0]),
        lambda m, t: t.flipud(m[0, 0]),
        lambda m, t: t.tril(m[0]),
        lambda m, t: t.triu(m[0], 1),
    ]
    for case in cases:
        errors_alike(lambda: case(ember.zeros(2, 2), ember), lambda: case(torch.zeros(2, 2), torch))


@HYP
@given(inputs(max_dims=3), st.data())
def test_repeat_interleave_matches_numpy(pair, data):
    e, n = pair
    r = data.draw(st.integers(0, 3))
    assert_same(ember.repeat_interleave(e, r), np.repeat(n, r))
    if n.ndim == 0:
        return
    dim = data.draw(st.integers(-n.ndim, n.ndim - 1))
    reps = data.draw(st.lists(st.integers(0, 3), min_size=n.shape[dim], max_size=n.shape[dim]))
    assert_same(e.repeat_interleave(ember.tensor(reps, dtype=ember.int64), dim),
                np.repeat(n, np.array(reps, dtype=np.int64), axis=dim))
    assert_same(e.repeat_interleave(r, dim=dim), np.repeat(n, r, axis=dim))


def test_repeat_interleave_of_repeats_and_errors():
    assert_same(ember.repeat_interleave(ember.tensor([2, 0, 1])), np.array([0, 0, 2], dtype=np.int64))
    torch = torch_or_skip()
    for case in [lambda m, a: a.repeat_interleave(-1),
                 lambda m, a: a.repeat_interleave(m.tensor([1, 2]), dim=0),
                 lambda m, a: a.repeat_interleave(m.tensor([1, -2, 1]), dim=0),
                 lambda m, a: a.repeat_interleave(m.tensor([[1, 2, 1]]), dim=0),
                 lambda m, a: a.repeat_interleave(2, 0, output_size=5)]:
        errors_alike(lambda: case(ember, ember.zeros(3, 2)), lambda: case(torch, torch.zeros(3, 2)))


@HYP
@given(inputs(min_dims=2, max_dims=4), st.integers(-5, 5), st.data())
def test_diagonal_view_matches_numpy_and_torch(pair, offset, data):
    e, n = pair
    d1, d2 = data.draw(st.lists(st.integers(-n.ndim, n.ndim - 1), min_size=2, max_size=2,
                                unique_by=lambda d: d % n.ndim))
    view = ember.diagonal(e, offset, d1, d2)
    assert_same(view, np.diagonal(n, offset, d1, d2))
    assert view._version == e._version
    torch = pytest.importorskip("torch")
    t = torch.empty_strided(tuple(e.shape), e.stride())
    tv = torch.diagonal(t, offset, d1, d2)
    assert view.stride() == tv.stride()
    if view.numel():
        assert view.storage_offset() - e.storage_offset() == tv.storage_offset()


@HYP
@given(inputs(min_dims=1, max_dims=2), st.integers(-4, 4))
def test_diag_matches_numpy(pair, k):
    e, n = pair
    assert_same(ember.diag(e, k), np.diag(n, k))
    assert_same(e.diag(diagonal=k), np.diag(n, k))


def test_diag_errors_match_torch():
    torch = torch_or_skip()
    for case in [lambda m: m.diag(m.zeros(2, 2, 2)), lambda m: m.diag(m.tensor(1.0)),
                 lambda m: m.diagonal(m.zeros(2, 2), 0, 0, 0), lambda m: m.diagonal(m.zeros(3))]:
        errors_alike(lambda: case(ember), lambda: case(torch))


# ---- tril / triu -----------------------------------------------------------------


@HYP
@given(inputs(min_dims=2, max_dims=4), st.integers(-6, 6))
def test_tril_triu_match_numpy(pair, k):
    e, n = pair
    assert_same(ember.tril(e, k), np.tril(n, k))
    assert_same(e.triu(diagonal=k), np.triu(n, k))
    if e.stride() and 0 not in e.stride():  # in place needs distinct elements
        c = e.clone()
        assert c.tril_(k) is c
        assert_same(c, np.tril(n, k))
        c = e.clone()
        v = c._version
        c.triu_(k)
        assert_same(c, np.triu(n, k))
        assert c._version == v + 1


def test_tril_huge_diagonal_and_readonly():
    m = np.arange(6, dtype=np.float64).reshape(2, 3)
    e = ember.from_numpy(m.copy())
    assert_same(ember.tril(e, 2**62), m)
    assert_same(ember.tril(e, -2**62), np.zeros_like(m))
    ro = m.copy()
    ro.setflags(write=False)
    er = ember.from_numpy(ro)
    with pytest.raises(RuntimeError, match="read-only"):
        er.tril_()
    np.testing.assert_array_equal(ro, m)


# ---- sort, argsort, msort, topk, kthvalue ------------------------------------------


def np_stable_argsort(n, axis, descending):
    """np.argsort(kind='stable'); descending keeps equal elements in input
    order and puts NaN first, as PyTorch's stable descending sort does."""
    if not descending:
        return np.argsort(n, axis=axis, kind="stable")
    rev = np.flip(n, axis=axis)
    idx = np.flip(np.argsort(rev, axis=axis, kind="stable"), axis=axis)
    return n.shape[axis] - 1 - idx


@HYP
@given(inputs(dtypes=SORTABLE), st.data())
def test_sort_matches_numpy(pair, data):
    e, n = pair
    dim = data.draw(st.integers(-max(n.ndim, 1), max(n.ndim, 1) - 1))
    descending = data.draw(st.booleans())
    if n.ndim == 0:
        values, indices = ember.sort(e, dim, descending)
        assert_same(values, n)
        assert_same(indices, np.array(0))
        return
    idx = np_stable_argsort(n, dim, descending)
    expected_values = np.take_along_axis(n, idx, axis=dim)
    result = ember.sort(e, dim=dim, descending=descending, stable=True)
    assert_same(result.values, expected_values)
    assert_same(result.indices, idx.astype(np.int64))
    values, indices = e.sort(dim, descending)  # a tuple too
    assert_same(indices, idx.astype(np.int64))
    assert_same(ember.argsort(e, dim, descending), idx.astype(np.int64))
    assert_same(e.argsort(dim=dim, descending=descending, stable=False), idx.astype(np.int64))
    if dim in (0, -n.ndim):
        assert_same(ember.msort(e), np.take_along_axis(n, np_stable_argsort(n, 0, False), axis=0))


@HYP
@given(inputs(dtypes=SORTABLE, min_dims=1), st.data())
def test_topk_matches_sorted_reference(pair, data):
    e, n = pair
    dim = data.draw(st.integers(-n.ndim, n.ndim - 1))
    k = data.draw(st.integers(0, n.shape[dim]))
    largest = data.draw(st.booleans())
    ref = np.take_along_axis(n, np_stable_argsort(n, dim, largest), axis=dim)
    values, indices = ember.topk(e, k, dim, largest=largest)
    assert_same(values, np.take(ref, range(k), axis=dim))
    assert indices.dtype == ember.int64
    # the indices point at the returned values
    np.testing.assert_array_equal(np.take_along_axis(n, as_numpy(indices), axis=dim),
                                  as_numpy(values))
    if k:
        kv, ki = e.kthvalue(k, dim)
        asc = np.take_along_axis(n, np_stable_argsort(n, dim, False), axis=dim)
        assert_same(kv, np.take(asc, k - 1, axis=dim))
        np.testing.assert_array_equal(
            np.take_along_axis(n, np.expand_dims(as_numpy(ki), dim), axis=dim),
            np.expand_dims(as_numpy(kv), dim))
        kv, ki = ember.kthvalue(e, k, dim, keepdim=True)
        assert tuple(kv.shape) == tuple(1 if d == dim % n.ndim else s for d, s in enumerate(n.shape))


def test_topk_kthvalue_long_lanes_equal_stable_sort_prefix():
    # long lanes go through the quickselect path; (key, index) order makes
    # its result exactly the stable sort's prefix, indices included
    rng = np.random.default_rng(2)
    for dtype in NP_DTYPES:
        n = random_values(rng, (3, 500), dtype, special=True)
        e = ember.from_numpy(n.copy()).t()  # non-contiguous lanes
        nt = n.T
        for k in (1, 2, 37, 249, 250, 251, 500):
            for largest in (True, False):
                idx = np_stable_argsort(nt, 0, largest)[:k]
                values, indices = e.topk(k, 0, largest)
                assert_same(indices, idx.astype(np.int64))
                assert_same(values, np.take_along_axis(nt, idx, axis=0))
            kv, ki = ember.kthvalue(e, k, 0)
            idx = np_stable_argsort(nt, 0, False)[k - 1]
            assert_same(ki, idx.astype(np.int64))
            assert_same(kv, nt[idx, np.arange(3)])


def test_sort_stability_with_many_ties():
    rng = np.random.default_rng(0)
    for dtype in NP_DTYPES:
        n = random_values(rng, (5, 700), dtype, special=True)  # 700: radix path
        e = ember.from_numpy(n.copy())
        for descending in (False, True):
            for dim in (0, 1):
                idx = np_stable_argsort(n, dim, descending)
                assert_same(ember.argsort(e, dim, descending), idx.astype(np.int64))


@pytest.mark.noleakcheck
def test_sort_large_parallel_lanes():
    rng = np.random.default_rng(1)
    n = rng.integers(0, 50, size=(96, 1000)).astype(np.float32)
    e = ember.from_numpy(n)
    for dim in (0, 1):
        values, indices = e.sort(dim)
        idx = np.argsort(n, axis=dim, kind="stable")
        assert_same(indices, idx)
        assert_same(values, np.take_along_axis(n, idx, axis=dim))
    one = ember.from_numpy(n.reshape(-1))
    assert_same(one.argsort(), np.argsort(n.reshape(-1), kind="stable"))


def test_nan_ordering():
    x = ember.tensor([3.0, float("nan"), -float("inf"), 1.0, float("nan"), -0.0, 0.0, float("inf")])
    asc = ember.sort(x)
    np.testing.assert_array_equal(as_numpy(asc.indices), [2, 5, 6, 3, 0, 7, 1, 4])
    desc = ember.sort(x, descending=True)
    np.testing.assert_array_equal(as_numpy(desc.indices), [1, 4, 7, 0, 3, 5, 6, 2])
    top = ember.topk(x, 3)
    np.testing.assert_array_equal(as_numpy(top.indices), [1, 4, 7])
    low = ember.topk(x, 2, largest=False)
    np.testing.assert_array_equal(as_numpy(low.indices), [2, 5])


def test_sort_matches_torch_including_nan():
    torch = torch_or_skip()
    vals = [3.0, float("nan"), -float("inf"), 1.0, float("nan"), -0.0, 0.0, 1.0, float("inf")]
    for descending in (False, True):
        te = torch.sort(torch.tensor(vals), descending=descending, stable=True)
        ee = ember.sort(ember.tensor(vals), descending=descending)
        np.testing.assert_array_equal(as_numpy(ee.indices), te.indices.numpy())
        np.testing.assert_array_equal(as_numpy(ee.values), te.values.numpy())
    t = torch.topk(torch.tensor(vals), 4)
    np.testing.assert_array_equal(as_numpy(ember.topk(ember.tensor(vals), 4).values), t.values.numpy())
    k = torch.kthvalue(torch.tensor([3.0, 1.0, 2.0]), 2)
    ek = ember.kthvalue(ember.tensor([3.0, 1.0, 2.0]), 2)
    assert (ek.values.item(), ek.indices.item()) == (k.values.item(), k.indices.item())


def test_named_result_types():
    r = ember.sort(ember.tensor([2, 1]))
    assert type(r).__name__ == "sort" and type(r).__module__ == "ember.return_types"
    assert r[0] is r.values and r[1] is r.indices and len(r) == 2
    assert type(ember.topk(ember.tensor([2, 1]), 1)).__name__ == "topk"
    assert type(ember.kthvalue(ember.tensor([2, 1]), 1)).__name__ == "kthvalue"
    assert "values=" in repr(r) and "indices=" in repr(r)


def test_sort_errors_match_torch():
    torch = torch_or_skip()
    cases = [
        lambda m, t: t.sort(m, 2),
        lambda m, t: m.topk(3),
        lambda m, t: m.topk(-1),
        lambda m, t: m.kthvalue(3),
        lambda m, t: m.kthvalue(0),
        lambda m, t: t.argsort(m, 5),
    ]
    for case in cases:
        errors_alike(lambda: case(ember.zeros(2, 2), ember), lambda: case(torch.zeros(2, 2), torch))
    with pytest.raises(TypeError, match="must be bool"):
        ember.sort(ember.zeros(2), 0, 1)


# ---- unique ------------------------------------------------------------------------


@HYP
@given(inputs(max_dims=3), st.booleans(), st.booleans())
def test_unique_matches_numpy(pair, want_inverse, want_counts):
    e, n = pair
    got = ember.unique(e, return_inverse=want_inverse, return_counts=want_counts)
    ref = np.unique(n.reshape(-1), return_inverse=True, return_counts=True, equal_nan=False)
    if not (want_inverse or want_counts):
        assert_same(got, ref[0])
        return
    assert isinstance(got, tuple) and len(got) == 1 + want_inverse + want_counts
    assert_same(got[0], ref[0])
    if want_inverse:  # each NaN is its own value: which NaN slot is free
        inverse, expected = as_numpy(got[1]), ref[1].reshape(n.shape).astype(np.int64)
        assert got[1].dtype == ember.int64 and inverse.shape == n.shape
        nan = np.isnan(n) if n.dtype.kind == "f" else np.zeros(n.shape, dtype=bool)
        np.testing.assert_array_equal(inverse[~nan], expected[~nan])
        np.testing.assert_array_equal(as_numpy(got[0])[inverse], n)
    if want_counts:
        assert_same(got[-1], ref[2].astype(np.int64))
    assert_same(e.unique(sorted=False), ref[0])


def np_unique_consecutive(flat):
    starts = [i for i in range(len(flat)) if i == 0 or not (flat[i] == flat[i - 1])]
    values = flat[starts]
    counts = np.diff(starts + [len(flat)]).astype(np.int64)
    inverse = np.repeat(np.arange(len(starts), dtype=np.int64), counts)
    return values, inverse, counts


@HYP
@given(inputs(max_dims=3))
def test_unique_consecutive_matches_reference(pair):
    e, n = pair
    values, inverse, counts = np_unique_consecutive(n.reshape(-1))
    got = ember.unique_consecutive(e, return_inverse=True, return_counts=True)
    assert_same(got[0], values)
    assert_same(got[1], inverse.reshape(n.shape))
    assert_same(got[2], counts)
    assert_same(e.unique_consecutive(), values)


def test_unique_matches_torch():
    torch = torch_or_skip()
    vals = [3.0, 1.0, float("nan"), 3.0, float("nan"), -0.0, 0.0]
    t = torch.unique(torch.tensor(vals), return_inverse=True, return_counts=True)
    e = ember.unique(ember.tensor(vals), return_inverse=True, return_counts=True)
    for a, b in zip(e, t):
        np.testing.assert_array_equal(as_numpy(a), b.numpy())
    assert ember.unique(ember.tensor(True)).dtype == ember.bool
    rows = [[1, 2], [0, 5], [1, 2]]
    for consecutive in (False, True):
        for dim in (0, 1, -1):
            f = "unique_consecutive" if consecutive else "unique"
            e = getattr(ember, f)(ember.tensor(rows), dim=dim, return_inverse=True, return_counts=True)
            t = getattr(torch, f)(torch.tensor(rows), dim=dim, return_inverse=True, return_counts=True)
            for a, b in zip(e, t):
                np.testing.assert_array_equal(as_numpy(a), b.numpy())
    for case in [lambda m: m.unique(m.zeros(3, 0), dim=0), lambda m: m.unique(m.tensor(1.0), dim=0),
                 lambda m: m.unique(m.zeros(2, 2), dim=2)]:
        errors_alike(lambda: case(ember), lambda: case(torch))


@HYP
@given(inputs(min_dims=1, max_dims=3, special=False), st.data())
def test_unique_dim_matches_numpy(pair, data):
    e, n = pair
    dim = data.draw(st.integers(-n.ndim, n.ndim - 1))
    rows = n.shape[dim]
    if rows and n.size == 0:
        with pytest.raises(RuntimeError, match="0 sized dimensions"):
            ember.unique(e, dim=dim)
        return
    values, inverse, counts = ember.unique(e, dim=dim, return_inverse=True, return_counts=True)
    if n.size == 0:
        assert tuple(values.shape) == n.shape and inverse.numel() == 0 and counts.numel() == 0
        return
    ref = np.unique(n, axis=dim, return_inverse=True, return_counts=True)
    assert_same(values, ref[0])
    assert_same(inverse, ref[1].reshape(-1).astype(np.int64))
    assert_same(counts, ref[2].astype(np.int64))
    # consecutive: compare slices in input order
    slices = [np.take(n, i, axis=dim) for i in range(rows)]
    starts = [i for i in range(rows) if i == 0 or not np.array_equal(slices[i], slices[i - 1])]
    got = ember.unique_consecutive(e, return_counts=True, dim=dim)
    assert_same(got[0], np.take(n, starts, axis=dim))
    assert_same(got[1], np.diff(starts + [rows]).astype(np.int64))


# ---- one_hot ------------------------------------------------------------------------


@HYP
@given(hnp.arrays(np.int64, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
                  elements=st.integers(0, 5)), st.integers(0, 3))
def test_one_hot_matches_numpy(n, extra):
    e = ember.from_numpy(n.copy())
    if n.size == 0:
        assert_same(F.one_hot(e, 3), np.zeros(n.shape + (3,), dtype=np.int64))
        return
    classes = int(n.max()) + 1 + extra
    assert_same(F.one_hot(e, classes), np.eye(classes, dtype=np.int64)[n])
    assert_same(F.one_hot(e), np.eye(int(n.max()) + 1, dtype=np.int64)[n])
    if n.ndim >= 2:  # transposed input
        assert_same(F.one_hot(e.t() if n.ndim == 2 else e.transpose(0, 1), classes),
                    np.eye(classes, dtype=np.int64)[np.swapaxes(n, 0, 1)])


def test_one_hot_errors_match_torch():
    torch = torch_or_skip()
    TF = torch.nn.functional
    cases = [
        (lambda: F.one_hot(ember.zeros(2)), lambda: TF.one_hot(torch.zeros(2))),
        (lambda: F.one_hot(ember.tensor([-1])), lambda: TF.one_hot(torch.tensor([-1]))),
        (lambda: F.one_hot(ember.tensor([3]), 2), lambda: TF.one_hot(torch.tensor([3]), 2)),
        (lambda: F.one_hot(ember.tensor([1]), -2), lambda: TF.one_hot(torch.tensor([1]), -2)),
        (lambda: F.one_hot(ember.tensor([], dtype=ember.int64)),
         lambda: TF.one_hot(torch.tensor([], dtype=torch.int64))),
    ]
    msgs = [errors_alike(fe, ft) for fe, ft in cases]
    assert msgs[0] == "one_hot is only applicable to index tensor of type LongTensor."
    assert msgs[1] == "Class values must be non-negative."
    assert msgs[2] == "Class values must be smaller than num_classes."


# ---- cat / stack errors ------------------------------------------------------------


def test_cat_stack_errors_match_torch():
    torch = torch_or_skip()

    def both(f):
        return (lambda: f(ember, ember.zeros(2, 2), ember.zeros(2, 3)),
                lambda: f(torch, torch.zeros(2, 2), torch.zeros(2, 3)))

    msgs = [errors_alike(*both(f)) for f in [
        lambda m, a, b: m.cat([a, b]),
        lambda m, a, b: m.cat([]),
        lambda m, a, b: m.cat([a[0, 0]]),
        lambda m, a, b: m.cat([a, a[0]]),
        lambda m, a, b: m.cat([a], dim=2),
        lambda m, a, b: m.cat(a),
        lambda m, a, b: m.cat([a, 1]),
        lambda m, a, b: m.stack([a[0], b[0]]),
        lambda m, a, b: m.stack([]),
        lambda m, a, b: m.stack([a, a], 3),
    ]]
    assert msgs[0] == ("Sizes of tensors must match except in dimension 0. Expected size 2 "
                       "but got size 3 for tensor number 1 in the list.")
    assert msgs[1] == "torch.cat(): expected a non-empty list of Tensors"
    assert msgs[7] == "stack expects each tensor to be equal size, but got [2] at entry 0 and [3] at entry 1"


def test_inputs_unchanged_after_errors():
    a = ember.tensor([[1.0, 2.0]])
    before = as_numpy(a).copy()
    for f in [lambda: ember.cat([a, ember.zeros(1, 3)]), lambda: a.flip(0, 0),
              lambda: a.repeat(1), lambda: a.topk(5), lambda: F.one_hot(a),
              lambda: a.tril_(2**70)]:
        with pytest.raises((RuntimeError, TypeError, IndexError)):
            f()
    np.testing.assert_array_equal(as_numpy(a), before)
    assert a._version == 0


def test_fresh_results_start_at_version_zero():
    a = ember.ones(2, 2)
    for r in [ember.cat([a, a]), ember.stack([a, a]), a.flip(0), a.roll(1), a.repeat(2, 1),
              a.tril(), ember.sort(a)[0], ember.unique(a)]:
        assert r._version == 0


def test_zero_dim_sort_family_matches_torch():
    torch = torch_or_skip()
    for name, args in [("sort", ()), ("topk", (0,)), ("topk", (1,)), ("kthvalue", (1,)),
                       ("argsort", ()), ("msort", ())]:
        e = getattr(ember, name)(ember.tensor(5.0), *args)
        t = getattr(torch, name)(torch.tensor(5.0), *args)
        for a, b in (zip(e, t) if isinstance(t, tuple) else [(e, t)]):
            assert tuple(a.shape) == tuple(b.shape) and a.item() == b.item()


def test_out_of_another_dtype_for_a_16_bit_result_is_an_error():
    values, indices = ember.empty(2, dtype=ember.float64), ember.empty(2, dtype=ember.int64)
    with pytest.raises(RuntimeError, match="dtype c10::Half, but got double instead"):
        ember.sort(ember.ones(2, dtype=ember.float16), out=(values, indices))


def test_out_by_copy_single_results():
    m = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    for name, call, expected in [
        ("tril", lambda out: ember.tril(m, out=out), [[1, 0], [3, 4]]),
        ("triu", lambda out: ember.triu(m, 1, out=out), [[0, 2], [0, 0]]),
        ("msort", lambda out: ember.msort(m.flip(0), out=out), [[1, 2], [3, 4]]),
    ]:
        out = ember.zeros(2, 2)
        assert call(out) is out
        np.testing.assert_array_equal(as_numpy(out), expected)
        bad = ember.full((2, 2), 9, dtype=ember.int64)
        with pytest.raises(RuntimeError, match="Expected out tensor to have dtype float, but got long int"):
            call(bad)
        np.testing.assert_array_equal(as_numpy(bad), np.full((2, 2), 9, dtype=np.int64))
        with pytest.raises(RuntimeError, match="dtype float, but got c10::BFloat16 instead"):
            call(ember.zeros(2, 2, dtype=ember.bfloat16))  # PyTorch's C++ names, 16-bit ones too
        wrong = ember.full((3,), 9.0)
        with pytest.raises(RuntimeError, match="expected out of shape"):
            call(wrong)
        np.testing.assert_array_equal(as_numpy(wrong), np.full((3,), 9, dtype=np.float32))
    d = ember.zeros(2)
    assert ember.diag(m, out=d) is d
    np.testing.assert_array_equal(as_numpy(d), [1, 4])
    # out may alias the input: the result is computed first
    assert ember.tril(m, out=m) is m
    np.testing.assert_array_equal(as_numpy(m), [[1, 0], [3, 4]])


def test_out_pairs():
    x = ember.tensor([[3.0, 1.0, 2.0]])
    v, i = ember.zeros(1, 3), ember.zeros(1, 3, dtype=ember.int64)
    r = ember.sort(x, out=(v, i))
    assert r.values is v and r.indices is i and type(r).__name__ == "sort"
    np.testing.assert_array_equal(as_numpy(v), [[1, 2, 3]])
    np.testing.assert_array_equal(as_numpy(i), [[1, 2, 0]])
    v2, i2 = ember.zeros(1, 2), ember.zeros(1, 2, dtype=ember.int64)
    assert ember.topk(x, 2, out=(v2, i2)).values is v2
    np.testing.assert_array_equal(as_numpy(i2), [[0, 2]])
    v3, i3 = ember.zeros(1), ember.zeros(1, dtype=ember.int64)
    ember.kthvalue(x, 2, out=(v3, i3))
    assert (v3.item(), i3.item()) == (2.0, 2)
    # a bad second tensor: neither is written
    v4, i4 = ember.full((1, 3), 7.0), ember.full((1, 3), 7.0)
    with pytest.raises(RuntimeError, match="dtype long int, but got float"):
        ember.sort(x, out=(v4, i4))
    np.testing.assert_array_equal(as_numpy(v4), np.full((1, 3), 7, dtype=np.float32))
    with pytest.raises(TypeError, match="tuple of 2 Tensors"):
        ember.sort(x, out=v4)


def test_out_errors_match_torch():
    torch = torch_or_skip()
    errors_alike(lambda: ember.tril(ember.ones(2, 2), out=ember.zeros(2, 2, dtype=ember.int64)),
                 lambda: torch.tril(torch.ones(2, 2), out=torch.zeros(2, 2, dtype=torch.int64)))
    errors_alike(lambda: ember.sort(ember.ones(2), out=(ember.zeros(2, dtype=ember.int64), ember.zeros(2, dtype=ember.int64))),
                 lambda: torch.sort(torch.ones(2), out=(torch.zeros(2, dtype=torch.int64), torch.zeros(2, dtype=torch.int64))))


def test_unique_dim_many_rows():
    rng = np.random.default_rng(3)
    for dtype in (np.int8, np.float32, np.int64):
        n = random_values(rng, (3, 700), dtype)  # 700 columns: the radix path
        e = ember.from_numpy(n.copy())
        values, inverse, counts = ember.unique(e, dim=1, return_inverse=True, return_counts=True)
        ref = np.unique(n, axis=1, return_inverse=True, return_counts=True)
        assert_same(values, ref[0])
        assert_same(inverse, ref[1].reshape(-1).astype(np.int64))
        assert_same(counts, ref[2].astype(np.int64))
