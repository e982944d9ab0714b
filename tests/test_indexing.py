"""Basic indexing: t[i], t[-1], t[a:b:c], None, ..., and tuples of them, as
views (NumPy is the value oracle; torch, where installed, the geometry and
error-message oracle), and t[index] = value writing through to the base.

Advanced indexing (the second half): integer index tensors, lists, NumPy
arrays and bool masks, mixed with the basic items, giving copies; and
t[advanced] = value (index_put_ semantics).
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

HYP = settings(max_examples=min(80, settings.default.max_examples), deadline=None)
HYP_SMALL = settings(max_examples=min(40, settings.default.max_examples), deadline=None)

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


# ---- inputs: one buffer seen by ember, NumPy and torch -------------------------------


class Trio:
    def __init__(self, e, n, t, buf):
        self.e, self.n, self.t, self.buf = e, n, t, buf

    def __repr__(self):
        e = self.e
        return (f"Trio(shape={tuple(e.shape)}, stride={e.stride()}, "
                f"offset={e.storage_offset()}, dtype={e.dtype})")


@st.composite
def layouts(draw, min_ndim=0, max_ndim=4):
    shape = tuple(draw(st.lists(st.sampled_from([0, 1, 2, 3, 4, 5]), min_size=min_ndim,
                                max_size=max_ndim)))
    pad = draw(st.integers(0, 3))
    dtype = draw(st.sampled_from([np.float64, np.int32, np.uint8]))
    numel = math.prod(shape)
    buf = np.arange(numel + pad + 2).astype(dtype)
    n = buf[pad:pad + numel].reshape(shape)
    e = ember.from_numpy(buf).narrow(0, pad, numel).view(shape)
    t = None if torch is None else torch.from_numpy(buf).narrow(0, pad, numel).view(shape)
    if draw(st.booleans()):  # a permuted (non-contiguous) input
        perm = tuple(draw(st.permutations(range(len(shape)))))
        n, e = n.transpose(perm), e.permute(perm)
        t = None if t is None else t.permute(perm)
    return Trio(e, n, t, buf)


@st.composite
def basic_indices(draw, shape):
    """A basic index for `shape`: ints, slices (step > 0), None and at most
    one Ellipsis; sometimes a bare item instead of a tuple."""
    ndim = len(shape)
    use_ellipsis = draw(st.booleans())
    k = draw(st.integers(0, ndim))
    if use_ellipsis:
        split = draw(st.integers(0, k))
        dims = list(range(split)) + list(range(ndim - (k - split), ndim))
    else:
        dims = list(range(k))
    items = []
    for d in dims:
        size = shape[d]
        if size > 0 and draw(st.booleans()):
            items.append(draw(st.integers(-size, size - 1)))
        else:
            bound = st.none() | st.integers(-size - 2, size + 2)
            items.append(slice(draw(bound), draw(bound), draw(st.none() | st.integers(1, 4))))
    if use_ellipsis:
        items.insert(split, Ellipsis)
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), None)
    index = tuple(items)
    if len(index) == 1 and draw(st.booleans()):
        return index[0]
    return index


def as_tuple(index):
    return index if isinstance(index, tuple) else (index,)


def numpy_view(a, index):
    """a[index] as an ndarray view even when every item is an int."""
    items = as_tuple(index)
    if Ellipsis not in items:
        items = items + (Ellipsis,)
    return a[items]


def respell_ints(index, spell):
    """The same index with its ints spelled another way (NumPy ints, 0-d
    integer tensors): they must index exactly like Python ints."""
    if isinstance(index, tuple):
        return tuple(respell_ints(i, spell) for i in index)
    if isinstance(index, int) and not isinstance(index, bool):
        return spell(index)
    return index


# ---- getitem ----------------------------------------------------------------------------


@HYP
@given(layouts(), st.data())
def test_basic_getitem_matches_numpy_and_torch(trio, data):
    index = data.draw(basic_indices(trio.n.shape))
    v = trio.e[index]
    expected = numpy_view(trio.n, index)
    assert tuple(v.shape) == expected.shape
    assert v.dtype == trio.e.dtype
    np.testing.assert_array_equal(np.asarray(v), expected)
    # a view: same storage, same version counter, element 0 where NumPy has it
    assert v.untyped_storage().data_ptr() == trio.e.untyped_storage().data_ptr()
    assert v._version == trio.e._version
    if expected.size:
        assert v.data_ptr() == expected.__array_interface__["data"][0]
        for d in range(expected.ndim):
            if expected.shape[d] > 1:
                assert v.stride(d) * expected.itemsize == expected.strides[d]
    if trio.t is not None:
        tv = trio.t[index]
        assert tuple(v.shape) == tuple(tv.shape)
        assert v.stride() == tv.stride()
        assert v.storage_offset() == tv.storage_offset()


@HYP_SMALL
@given(layouts(min_ndim=1), st.data())
def test_int_spellings_index_like_python_ints(trio, data):
    index = data.draw(basic_indices(trio.n.shape))
    expected = trio.e[index]
    for spell in (np.int64, np.int32, lambda i: ember.tensor(i), lambda i: ember.tensor(i, dtype=ember.int16)):
        v = trio.e[respell_ints(index, spell)]
        assert v.shape == expected.shape
        assert v.stride() == expected.stride()
        assert v.storage_offset() == expected.storage_offset()


def test_getitem_examples():
    t = ember.arange(24).view(2, 3, 4)
    assert t[1].tolist() == [[12, 13, 14, 15], [16, 17, 18, 19], [20, 21, 22, 23]]
    assert t[-1, -1, -1].item() == 23
    assert t[0, 1].tolist() == [4, 5, 6, 7]
    assert t[:, 1:3, ::2].tolist() == [[[4, 6], [8, 10]], [[16, 18], [20, 22]]]
    assert t[..., 1].tolist() == [[1, 5, 9], [13, 17, 21]]
    assert t[None].shape == (1, 2, 3, 4)
    assert t[:, None, :, None].shape == (2, 1, 3, 1, 4)
    assert t[...].shape == (2, 3, 4)
    assert t[()].shape == (2, 3, 4)
    assert t[..., None].shape == (2, 3, 4, 1)
    assert t[1, ..., 2].tolist() == [14, 18, 22]
    assert t[5:].shape == (0, 3, 4)
    assert t[:, 1:1].shape == (2, 0, 4)
    s = ember.tensor(7.0)
    assert s[()].item() == 7.0 and s[()].shape == ()
    assert s[None].shape == (1,)
    assert s[...].shape == ()
    # an int index gives a 0-d view, not a Python number
    x = t[1, 2, 3]
    assert isinstance(x, ember.Tensor) and x.shape == () and x.item() == 23
    x.fill_(-1)
    assert t[1, 2, 3].item() == -1


def test_results_are_views_of_the_base():
    base = ember.zeros(3, 4)
    for view in [base[1], base[:, 2], base[1:, ::2], base[None, ..., 0], base[-1, -1], base[...]]:
        assert view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    v = base[1:, ::2]
    v.fill_(5.0)
    assert base.tolist() == [[0, 0, 0, 0], [5, 0, 5, 0], [5, 0, 5, 0]]
    assert base._version == v._version == 1


def test_index_out_of_range_messages():
    t = ember.zeros(3)
    with pytest.raises(IndexError, match=r"^index 5 is out of bounds for dimension 0 with size 3$"):
        t[5]
    with pytest.raises(IndexError, match=r"^index -4 is out of bounds for dimension 0 with size 3$"):
        t[-4]
    m = ember.zeros(2, 3)
    with pytest.raises(IndexError, match=r"^index 3 is out of bounds for dimension 1 with size 3$"):
        m[:, 3]
    # like torch, the message names the item's position in the index
    with pytest.raises(IndexError, match=r"^index 3 is out of bounds for dimension 1 with size 3$"):
        m[0, 3]
    with pytest.raises(IndexError, match=r"^index 5 is out of bounds for dimension 2 with size 3$"):
        m[None, 0, 5]
    with pytest.raises(IndexError, match="out of bounds"):
        ember.zeros(0)[0]


@needs_torch
@pytest.mark.parametrize("shape,index", [
    ((3,), 5), ((3,), -4), ((2, 3), (slice(None), 3)), ((2, 3), (0, 3)),
    ((2, 3), (None, 2)), ((2, 3), (Ellipsis, 7)), ((2, 3, 4), (None, 1, None, -5)),
    ((3,), (0, 0)), ((), 0), ((), (0,)), ((2, 3), (0, 0, 0)), ((2,), (None, None, 2)),
    ((2, 3), (0, np.int64(5))),
    ((3,), slice(None, None, -1)), ((3,), slice(None, None, 0)),
])
def test_index_errors_match_torch(shape, index):
    with pytest.raises(Exception) as theirs:
        torch.zeros(shape)[index]
    with pytest.raises(Exception) as ours:
        ember.zeros(shape)[index]
    assert type(ours.value) is type(theirs.value)
    assert str(ours.value) == str(theirs.value)


def test_too_many_indices():
    with pytest.raises(IndexError, match=r"^too many indices for tensor of dimension 1$"):
        ember.zeros(3)[0, 0]
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 0"):
        ember.tensor(1.0)[0,]
    with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
        ember.tensor(1.0)[0]
    with pytest.raises(IndexError, match="too many indices"):
        ember.zeros(2, 2)[0, ..., 0, 0]
    # None and ... do not count
    assert ember.zeros(3)[None, 0, None, ...].shape == (1, 1)


def test_non_positive_steps():
    t = ember.arange(5)
    with pytest.raises(ValueError, match=r"^step must be greater than zero$"):
        t[::-1]
    with pytest.raises(ValueError, match=r"^step must be greater than zero$"):
        t[4:0:-2]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        t[::0]


def test_two_ellipses_and_unsupported_indices():
    t = ember.zeros(2, 3)
    with pytest.raises(IndexError, match="single ellipsis"):
        t[..., ...]
    # (lists and integer tensors are advanced indices: see below)
    for bad in ["a", 1.5, ember.tensor(1.0), ember.tensor([0.0, 1.0])]:
        with pytest.raises((IndexError, TypeError)):
            t[bad]


def test_huge_slice_bounds_and_steps():
    import sys

    t = ember.arange(10)
    assert t[::sys.maxsize].tolist() == [0]
    assert t[3::sys.maxsize - 1].tolist() == [3]
    assert t[-sys.maxsize:sys.maxsize].tolist() == list(range(10))
    assert t[2**100:].shape == (0,)
    assert t[-2**100:2].tolist() == [0, 1]


# ---- setitem ------------------------------------------------------------------------------


@st.composite
def setitem_cases(draw):
    shape = tuple(draw(st.lists(st.sampled_from([0, 1, 2, 3, 4]), max_size=3)))
    dtype = draw(st.sampled_from([np.float64, np.float32, np.int64, np.int16]))
    index = draw(basic_indices(shape))
    target_shape = np.zeros(shape)[as_tuple(index) + ((Ellipsis,) if Ellipsis not in as_tuple(index) else ())].shape
    # a value broadcastable to the target: drop leading dims, set some to 1
    k = draw(st.integers(0, len(target_shape)))
    vshape = tuple(1 if draw(st.booleans()) else s for s in target_shape[k:])
    kind = draw(st.sampled_from(["int", "float", "bool", "tensor", "list", "ndarray", "tensor64"]))
    values = np.arange(1, math.prod(vshape) + 1).reshape(vshape) * 3 - 7
    if kind == "int":
        value = draw(st.integers(-50, 50))
    elif kind == "float":
        value = draw(st.floats(-50, 50, allow_nan=False))
    elif kind == "bool":
        value = draw(st.booleans())
    elif kind == "tensor":
        value = ember.tensor(values.astype(dtype))
    elif kind == "tensor64":  # another dtype: converted on the way in
        value = ember.tensor(values.astype(np.float64) + 0.5)
    elif kind == "list" and values.size:  # (an empty list loses its shape)
        value = values.tolist()
    else:
        value = values.astype(np.int32)
    return shape, dtype, index, value


def as_numpy_value(value, dtype):
    if isinstance(value, ember.Tensor):
        return np.asarray(value)
    return value


@HYP
@given(setitem_cases())
def test_setitem_matches_numpy(case):
    shape, dtype, index, value = case
    a = np.asarray(np.arange(math.prod(shape)).reshape(shape) + 1).astype(dtype)
    t = ember.tensor(a)
    expected = a.copy()
    nv = as_numpy_value(value, dtype)
    if isinstance(nv, float) and np.issubdtype(dtype, np.integer):
        nv = np.trunc(nv)  # C's float -> int conversion truncates
    expected[index] = np.asarray(nv).astype(dtype) if not np.isscalar(nv) else nv
    before = t._version
    t[index] = value
    np.testing.assert_array_equal(np.asarray(t), expected)
    assert t._version == before + 1
    assert t.dtype == ember.tensor(np.zeros(0, dtype)).dtype


def test_setitem_writes_through_views():
    base = ember.zeros(3, 4)
    view = base[1:]
    view[0, ::2] = 5.0
    assert base[1].tolist() == [5.0, 0.0, 5.0, 0.0]
    view[..., -1] = ember.tensor([1.0, 2.0])
    assert base[:, 3].tolist() == [0.0, 1.0, 2.0]
    base.t()[0] = [7, 8, 9]
    assert base[:, 0].tolist() == [7.0, 8.0, 9.0]
    assert base._version == view._version == 3


def test_setitem_value_kinds():
    t = ember.zeros(2, 3, dtype=ember.int64)
    t[0] = 4
    t[1] = [1, 2, 3]
    assert t.tolist() == [[4, 4, 4], [1, 2, 3]]
    t[:, 1] = np.array([10, 20])
    assert t.tolist() == [[4, 10, 4], [1, 20, 3]]
    t[...] = ember.tensor([[0], [1]])  # broadcast (2, 1) -> (2, 3)
    assert t.tolist() == [[0, 0, 0], [1, 1, 1]]
    t[0, 0] = 2.9  # float into int truncates
    t[0, 1] = True
    t[0, 2] = np.float64(-3.5)
    assert t[0].tolist() == [2, 1, -3]
    t[1] = ember.tensor(9.0)  # a 0-d tensor of another dtype
    assert t[1].tolist() == [9, 9, 9]
    b = ember.zeros(3, dtype=ember.bool)
    b[1] = 5
    b[2] = 0.25
    assert b.tolist() == [False, True, True]


def test_setitem_overlapping_source_reads_before_writing():
    t = ember.arange(6.0)
    a = np.arange(6.0)
    t[1:] = t[:-1]
    a[1:] = a[:-1].copy()
    assert t.tolist() == a.tolist()
    t = ember.arange(9.0).view(3, 3)
    t[...] = t.t()
    assert t.tolist() == np.arange(9.0).reshape(3, 3).T.tolist()


def test_bad_setitem_value_leaves_tensor_unchanged():
    t = ember.arange(6.0).view(2, 3)
    snapshot = t.tolist()
    version = t._version
    bad = [
        ((0,), "abc", TypeError),
        ((0,), object(), TypeError),
        ((0,), [1.0, 2.0], RuntimeError),          # (2,) does not broadcast to (3,)
        ((0,), [[1.0], [2.0, 3.0]], ValueError),   # ragged
        ((0,), ["a", "b", "c"], TypeError),
        ((0,), ember.zeros(4), RuntimeError),
        ((slice(None),), np.zeros((3, 3)), RuntimeError),
        ((5,), 1.0, IndexError),
        ((0, 0, 0), 1.0, IndexError),
        ((slice(None, None, -1),), 1.0, ValueError),
        ((0,), None, TypeError),
    ]
    for index, value, exc in bad:
        with pytest.raises(exc):
            t[index] = value
        assert t.tolist() == snapshot, (index, value)
        assert t._version == version, (index, value)


def test_setitem_into_expanded_and_read_only_raises():
    e = ember.zeros(1, 3).expand(4, 3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        e[...] = 1.0
    with pytest.raises(RuntimeError, match="more than one element"):
        e[:, 0] = ember.ones(4)
    # a single element of it is fine: a 0-d view
    e[0, 0] = 2.0
    assert e.tolist() == [[2.0, 0.0, 0.0]] * 4
    frozen = np.arange(3.0)
    frozen.flags.writeable = False
    r = ember.from_numpy(frozen)
    with pytest.raises(RuntimeError, match="read-only"):
        r[0] = 5.0
    assert frozen.tolist() == [0.0, 1.0, 2.0]


def test_delitem_is_refused():
    t = ember.zeros(3)
    with pytest.raises(TypeError):
        del t[0]
    assert t.shape == (3,)


# ---- advanced indexing: index tensors, lists, arrays and masks ------------------------
#
# The oracle is NumPy applied the way PyTorch indexes: first the basic items
# (ints, slices, None, ...) as a view, then the index arrays on that view.
# This differs from NumPy's own rule only when ints are mixed with index
# arrays (NumPy then broadcasts the ints with the arrays); torch, where
# installed, checks the oracle itself.


def _is_zero_dim_int(item):
    """A 0-d integer array or tensor indexes like an int (as in PyTorch)."""
    return (isinstance(item, (np.ndarray, ember.Tensor)) and item.ndim == 0
            and np.asarray(item).dtype != np.bool_)


def _is_advanced(item):
    return isinstance(item, (list, np.ndarray, ember.Tensor, bool)) and not _is_zero_dim_int(item)


def _np_index_array(item):
    if isinstance(item, ember.Tensor):
        return np.asarray(item)
    if isinstance(item, bool):
        return np.array([0] if item else [], dtype=np.int64)
    return np.asarray(item)


def torch_style_numpy_index(index):
    """(basic part, advanced part): a[index] == a[basic][advanced]."""
    basic, advanced = [], []
    for item in as_tuple(index):
        if isinstance(item, bool):
            basic.append(None)
            advanced.append(_np_index_array(item))
        elif _is_advanced(item):
            arr = _np_index_array(item)
            if isinstance(item, list) and len(item) == 0:
                arr = arr.astype(np.int64)
            k = arr.ndim if arr.dtype == np.bool_ else 1
            basic.extend([slice(None)] * k)
            advanced.append(arr)
        elif item is None:
            basic.append(None)
            advanced.append(slice(None))
        elif isinstance(item, slice):
            basic.append(item)
            advanced.append(slice(None))
        elif item is Ellipsis:
            basic.append(Ellipsis)
            advanced.append(Ellipsis)
        else:  # an int: selected away by the basic part
            basic.append(int(item))
    return tuple(basic), tuple(advanced)


def _expand_ellipsis(advanced, ndim):
    """The advanced part with its Ellipsis spelled as the full slices it
    stands for.  Where NumPy and PyTorch disagree, PyTorch wins: PyTorch
    decides whether the index arrays are adjacent (result dims in place) or
    not (result dims first) by the tensor dims they index, so an Ellipsis
    that covers no dim does not separate them; NumPy counts any Ellipsis in
    the index tuple as a separator.  t[None, [], ..., []] on a 0x0 tensor:
    NumPy (0, 1), PyTorch (1, 0).  With the Ellipsis expanded, both agree."""
    at = next((i for i, item in enumerate(advanced) if item is Ellipsis), None)
    if at is None:  # (by identity: `in` would compare the arrays with ==)
        return advanced
    consumed = sum(item.ndim if isinstance(item, np.ndarray) and item.dtype == np.bool_ else 1
                   for item in advanced if item is not Ellipsis)
    return advanced[:at] + (slice(None),) * (ndim - consumed) + advanced[at + 1:]


def numpy_getitem(a, index):
    basic, advanced = torch_style_numpy_index(index)
    selected = np.asarray(a[basic])
    return selected[_expand_ellipsis(advanced, selected.ndim)]


def numpy_setitem(a, index, value):
    basic, advanced = torch_style_numpy_index(index)
    if Ellipsis not in basic:
        basic = basic + (Ellipsis,)  # an array view even when all are ints
    view = a[basic]  # a view: the basic part never copies
    view[_expand_ellipsis(advanced, view.ndim)] = value


def to_torch_index(index):
    def conv(item):
        if isinstance(item, ember.Tensor):
            return torch.from_numpy(np.asarray(item).copy())
        if isinstance(item, np.ndarray):
            return torch.from_numpy(item.copy())
        if isinstance(item, list):  # (torch reads nested lists of bools its own way)
            return torch.from_numpy(np.asarray(item, dtype=None if item else np.int64))
        return item
    return tuple(conv(i) for i in as_tuple(index))


SPELLINGS = ["ndarray64", "ndarray32", "list", "tensor64", "tensor32"]


def spell(arr, how):
    if arr.dtype == np.bool_:
        how = {"ndarray32": "ndarray64", "tensor32": "tensor64"}.get(how, how)
    if how == "list" and arr.size == 0:
        how = "ndarray64"  # [] has lost the shape (and for a mask the dtype)
    if how == "ndarray64":
        return arr if arr.dtype == np.bool_ else arr.astype(np.int64)
    if how == "ndarray32":
        return arr.astype(np.int32)
    if how == "list":
        return arr.tolist()
    if how == "tensor64":
        return ember.tensor(arr if arr.dtype == np.bool_ else arr.astype(np.int64))
    return ember.tensor(arr.astype(np.int32))


@st.composite
def advanced_indices(draw, shape, unique=False):
    """An index for `shape` with at least one advanced item: index arrays
    (broadcasting together), or one mask, or a Python bool, mixed with ints,
    slices, None and an Ellipsis.  `unique`: no position is written twice
    (one index array without repeats, or a mask)."""
    ndim = len(shape)
    mode = draw(st.sampled_from(["arrays", "mask", "bool"] if ndim else ["bool"]))
    if unique and mode == "arrays":
        mode = draw(st.sampled_from(["one_array", "mask"]))
    how = draw(st.sampled_from(SPELLINGS))
    # which dims the advanced items stand at
    dims = list(range(ndim))
    items = {}
    if mode == "mask":
        k = draw(st.integers(1, min(2, ndim)))
        start = draw(st.integers(0, ndim - k))
        mask = np.array(draw(st.lists(st.booleans(), min_size=math.prod(shape[start:start + k]),
                                      max_size=math.prod(shape[start:start + k]))),
                        dtype=np.bool_).reshape(shape[start:start + k])
        items[start] = (spell(mask, how), k)
    elif mode in ("arrays", "one_array"):
        chosen = sorted(draw(st.sets(st.sampled_from(dims), min_size=1,
                                     max_size=1 if mode == "one_array" else min(3, ndim))))
        bshape = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
        if any(shape[d] == 0 for d in chosen):
            bshape = (0,)  # an index into an empty dim has no positions
        for d in chosen:
            size = shape[d]
            ashape = tuple(1 if draw(st.booleans()) else s for s in bshape[draw(st.integers(0, len(bshape))):])
            if size == 0:
                ashape = bshape
            n = math.prod(ashape)
            if size == 0:
                arr = np.zeros(ashape, dtype=np.int64)
            elif mode == "one_array":
                n = min(n, size)
                ashape = (n,)
                arr = np.array(draw(st.permutations(range(size)))[:n], dtype=np.int64)
                arr = np.where(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)),
                                        dtype=bool), arr - size, arr)
            else:
                arr = np.array(draw(st.lists(st.integers(-size, size - 1), min_size=n, max_size=n)),
                               dtype=np.int64).reshape(ashape)
            items[d] = (spell(arr, how) if arr.ndim or how != "list" else int(arr), 1)
    out = []
    d = 0
    while d < ndim:
        if d in items:
            item, k = items[d]
            out.append(item)
            d += k
            continue
        size = shape[d]
        choice = draw(st.sampled_from(["slice", "int", "full"]))
        if choice == "int" and size > 0:
            out.append(draw(st.integers(-size, size - 1)))
        elif choice == "slice":
            out.append(slice(draw(st.none() | st.integers(-size - 1, size + 1)), None,
                             draw(st.none() | st.integers(1, 3))))
        else:
            out.append(slice(None))
        d += 1
    if mode == "bool":
        out.insert(draw(st.integers(0, len(out))), draw(st.booleans()))
    # drop trailing full slices sometimes, replace a run by Ellipsis sometimes
    if out and draw(st.booleans()):
        i = draw(st.integers(0, len(out) - 1))
        j = draw(st.integers(i, len(out)))
        if all(isinstance(x, slice) and x == slice(None) for x in out[i:j]):
            out[i:j] = [Ellipsis]
    for _ in range(draw(st.integers(0, 1))):
        out.insert(draw(st.integers(0, len(out))), None)
    if len(out) == 1 and draw(st.booleans()):
        return out[0]
    return tuple(out)


@HYP
@given(layouts(min_ndim=1), st.data())
def test_advanced_getitem_matches_numpy_and_torch(trio, data):
    index = data.draw(advanced_indices(trio.n.shape))
    expected = numpy_getitem(trio.n, index)
    result = trio.e[index]
    assert tuple(result.shape) == expected.shape
    assert result.dtype == trio.e.dtype
    np.testing.assert_array_equal(np.asarray(result), expected)
    # a copy, with a version counter of its own
    if result.numel() and any(_is_advanced(i) for i in as_tuple(index)):
        assert result.untyped_storage().data_ptr() != trio.e.untyped_storage().data_ptr()
    assert result._version == 0
    if trio.t is not None:
        tr = trio.t[to_torch_index(index)]
        assert tuple(tr.shape) == tuple(result.shape)
        np.testing.assert_array_equal(tr.numpy(), expected)


@HYP
@given(layouts(min_ndim=1), st.data())
def test_advanced_setitem_matches_numpy(trio, data):
    unique = data.draw(st.booleans())
    index = data.draw(advanced_indices(trio.n.shape, unique=unique))
    target_shape = numpy_getitem(trio.n, index).shape
    if unique:  # a tensor of values broadcast to the indexed shape
        k = data.draw(st.integers(0, len(target_shape)))
        vshape = tuple(1 if data.draw(st.booleans()) else s for s in target_shape[k:])
        values = (np.arange(math.prod(vshape)).reshape(vshape) * 7 + 100).astype(np.float64)
        value = data.draw(st.sampled_from([ember.tensor(values), ember.tensor(values.astype(np.int32)),
                                           values]))
        nvalue = np.asarray(value).astype(trio.n.dtype)
    else:  # repeated positions: a scalar writes the same thing every time
        value = data.draw(st.integers(0, 100))
        nvalue = value
    expected = trio.n.copy()
    numpy_setitem(expected, index, nvalue)
    before = trio.e._version
    trio.e[index] = value
    np.testing.assert_array_equal(np.asarray(trio.e), expected)
    assert trio.e._version == before + 1


def test_zero_width_ellipsis_between_index_arrays_follows_torch():
    # NumPy counts the Ellipsis as a separator (result dims first: (0, 1));
    # PyTorch looks at the indexed dims, which are adjacent: (1, 0).  PyTorch
    # wins, and the oracle above (numpy_getitem) says the same.
    t = ember.zeros(0, 0)
    index = (None, [], Ellipsis, [])
    assert np.zeros((0, 0))[index].shape == (0, 1)
    assert t[index].shape == (1, 0)
    assert numpy_getitem(np.zeros((0, 0)), index).shape == (1, 0)
    u = ember.arange(6).view(2, 3)
    assert u[[1], ..., [2]].tolist() == [5]
    assert u[None, [1, 0], ..., [2, 0]].shape == (1, 2)
    if torch is not None:
        assert tuple(torch.zeros(0, 0)[None, torch.zeros(0, dtype=torch.long), ...,
                                       torch.zeros(0, dtype=torch.long)].shape) == (1, 0)


def test_advanced_getitem_examples():
    t = ember.arange(24).view(2, 3, 4)
    assert t[[1, 0]].tolist() == [t[1].tolist(), t[0].tolist()]
    assert t[:, [2, 0], 1].tolist() == [[9, 1], [21, 13]]
    assert t[[0, 1], [1, 2]].tolist() == [[4, 5, 6, 7], [20, 21, 22, 23]]
    assert t[[0, 1], :, [1, 2]].shape == (2, 3)  # non-adjacent: B first
    assert t[:, [0, 1], [1, 2]].shape == (2, 2)  # adjacent: in place
    assert t[..., [-1]].shape == (2, 3, 1)
    assert t[None, [0], None, [0]].shape == (1, 1, 1, 4)
    assert t[0, :, [0]].shape == (3, 1)  # PyTorch: the int selects first
    assert t[[[0], [1]], [[0, 1, 2]]].shape == (2, 3, 4)
    assert t[[]].shape == (0, 3, 4)
    assert t[True].shape == (1, 2, 3, 4)
    assert t[False].shape == (0, 2, 3, 4)
    assert t[ember.tensor(True)].shape == (1, 2, 3, 4)
    assert t[np.array([1, 0])].tolist() == t[[1, 0]].tolist()
    assert t[ember.tensor([1], dtype=ember.int32)].shape == (1, 3, 4)
    mask = ember.tensor(np.arange(24).reshape(2, 3, 4) > 20)
    assert t[mask].tolist() == [21, 22, 23]
    assert t[ember.tensor([True, False])].shape == (1, 3, 4)
    assert t[:, ember.tensor([[True, False, False, True]] * 3)].tolist() == [[0, 3, 4, 7, 8, 11],
                                                                          [12, 15, 16, 19, 20, 23]]
    # uint8 tensors are masks, as in PyTorch
    assert t[ember.tensor([0, 1], dtype=ember.uint8)].shape == (1, 3, 4)
    # a copy: writing to it leaves t alone
    c = t[[0]]
    c.fill_(-1)
    assert t[0, 0, 0].item() == 0


def test_advanced_setitem_examples():
    t = ember.zeros(3, 4)
    t[[0, 2]] = 1.0
    t[:, [1, 3]] = ember.tensor([5.0, 6.0])  # broadcast over rows
    t[[1, 1], [0, 0]] = 9  # repeated position: one of the writes wins
    assert t.tolist() == [[1, 5, 1, 6], [9, 5, 0, 6], [1, 5, 1, 6]]
    assert t._version == 3
    m = ember.zeros(2, 3, dtype=ember.int64)
    m[ember.tensor([[True, False, True], [False, True, False]])] = ember.tensor([1, 2, 3])
    assert m.tolist() == [[1, 0, 2], [0, 3, 0]]
    m[[0]] = [[7, 8, 9]]  # a list value, converted
    m[[1]] = 2.9  # float into int truncates
    assert m.tolist() == [[7, 8, 9], [2, 2, 2]]
    m[True] = 4
    assert m.tolist() == [[4] * 3] * 2
    # values read before anything is written, even from the same memory
    v = ember.arange(5.0)
    v[[1, 2, 3, 4]] = v[0:4]
    assert v.tolist() == [0, 0, 1, 2, 3]
    # writes go through a view to its base
    base = ember.zeros(2, 3)
    base[1][[0, 2]] = 1.0
    assert base.tolist() == [[0, 0, 0], [1, 0, 1]]
    # extra leading size-1 dims of the value are dropped, as in PyTorch
    w = ember.zeros(3, 4)
    w[[0, 1]] = ember.ones(1, 1, 4)
    assert np.asarray(w).sum() == 8


@pytest.mark.parametrize("shape,index", [
    ((3,), [5]), ((3, 4), (slice(None), [0, 9])), ((3, 4), ([0, 1], [0, 9])),
    ((3, 4), ([0, 1], [0, 1, 2])), ((3, 4), ([0, 1], [0, 1], [0])),
    ((3, 4), np.array([True, False])), ((3, 4), (slice(None), np.array([True, False]))),
    ((3, 4), np.array([[True, False]])), ((3,), [-4]), ((3, 4), "float"), ((3, 4), "int16"),
    ((3, 4), [0.5]), ((3, 4), 1.5),
])
def test_advanced_index_errors_match_torch(shape, index):
    torch = pytest.importorskip("torch")
    special = {"float": (torch.tensor([0.0]), ember.tensor([0.0])),
               "int16": (torch.tensor([0], dtype=torch.int16), ember.tensor([0], dtype=ember.int16))}
    if isinstance(index, str):
        tindex, eindex = special[index]
    else:
        tindex, eindex = to_torch_index(index), index
        if isinstance(index, list):
            tindex = torch.tensor(index)
    del special  # (no tensors left in this frame for the traceback to hold)
    assert raised(lambda: ember.zeros(shape)[eindex]) == raised(lambda: torch.zeros(shape)[tindex])


def raised(fn):
    """(type, message) of what fn raises; not an ExceptionInfo, whose
    traceback would keep fn's tensors alive in a cycle until some later
    test's garbage collection (test_memory counts allocated bytes)."""
    try:
        fn()
    except Exception as exc:
        return type(exc), str(exc)
    pytest.fail(f"{fn} did not raise")


def test_advanced_index_error_messages():
    t = ember.zeros(3)
    with pytest.raises(IndexError, match=r"^index 5 is out of bounds for dimension 0 with size 3$"):
        t[[5]]
    with pytest.raises(IndexError, match=r"^tensors used as indices must be long, int, byte or bool tensors$"):
        t[ember.tensor([1.0])]
    with pytest.raises(IndexError, match=r"^The shape of the mask \[2\] at index 0 does not match the "
                                         r"shape of the indexed tensor \[3\] at index 0$"):
        t[ember.tensor([True, False])]
    with pytest.raises(IndexError, match="too many indices"):
        t[[0], [0]]


def test_failed_advanced_setitem_leaves_tensor_unchanged():
    t = ember.arange(12.0).view(3, 4)
    snapshot, version = t.tolist(), t._version
    bad = [
        (([0, 1], [0, 9]), 1.0, IndexError),           # second index out of range
        (([0, 5],), ember.zeros(2, 4), IndexError),
        ((ember.tensor([1.0]),), 1.0, IndexError),     # float index
        ((ember.tensor([True, False]),), 1.0, IndexError),  # mask shape
        (([0, 1],), ember.zeros(3), RuntimeError),     # value does not broadcast
        (([0, 1],), ember.zeros(2, 1, 4), RuntimeError),
        (([0, 1], [0, 1, 2]), 1.0, IndexError),        # indices do not broadcast
        (([0],), "abc", TypeError),
        ((slice(None), [0, 1, 2, 3, 4]), 0.0, IndexError),
    ]
    for index, value, exc in bad:
        with pytest.raises(exc):
            t[index] = value
        assert t.tolist() == snapshot, (index, value)
        assert t._version == version, (index, value)
    with pytest.raises(RuntimeError, match=r"^shape mismatch: value tensor of shape \[3\] cannot be broadcast "
                                           r"to indexing result of shape \[2, 4\]$"):
        t[[0, 1]] = ember.zeros(3)


def test_advanced_setitem_into_expanded_and_read_only():
    e = ember.zeros(1, 3).expand(4, 3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        e[[0, 1]] = 1.0
    frozen = np.arange(3.0)
    frozen.flags.writeable = False
    r = ember.from_numpy(frozen)
    with pytest.raises(RuntimeError, match="read-only"):
        r[[0]] = 5.0
    assert frozen.tolist() == [0.0, 1.0, 2.0]


@pytest.mark.noleakcheck
def test_large_advanced_gather_and_put():
    # big enough for the parallel gather (and the GIL-free path)
    a = np.arange(200_000, dtype=np.float32).reshape(400, 500)
    t = ember.tensor(a)
    rows = np.random.default_rng(0).integers(-400, 400, size=300)
    np.testing.assert_array_equal(np.asarray(t[rows]), a[rows])
    np.testing.assert_array_equal(np.asarray(t[:, rows]), a[:, rows])
    t[rows] = 0.0
    a[rows] = 0.0
    np.testing.assert_array_equal(np.asarray(t), a)
