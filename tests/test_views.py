"""Views: view, reshape, flatten, transpose/t/T, permute, squeeze, unsqueeze,
expand, narrow, select, unfold, as_strided, contiguous, clone, detach.

Every input is built three times from one NumPy buffer: an ember tensor and a
NumPy array that share that memory, and (when PyTorch is installed) a torch
tensor over it.  The same op runs on all three; we compare

  * values and element addresses against NumPy (the byte offset of element 0
    from the buffer start, and the stride of every dim that has more than one
    element: NumPy may pick other strides for size-1 dims),
  * sizes, strides and storage_offset against torch, exactly,

and check that the result is a view: same storage, same version counter,
writes show through.
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

# Modest example counts; the "leakgate" profile (fewer examples) still wins.
HYP = settings(max_examples=min(60, settings.default.max_examples), deadline=None)
HYP_SMALL = settings(max_examples=min(30, settings.default.max_examples), deadline=None)

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


# ---- the input trio ---------------------------------------------------------


class Trio:
    """One logical tensor as (ember, numpy, torch-or-None) on one buffer."""

    def __init__(self, e, n, t, buf):
        self.e, self.n, self.t, self.buf = e, n, t, buf

    def __repr__(self):
        e = self.e
        return (f"Trio(shape={tuple(e.shape)}, stride={e.stride()}, "
                f"offset={e.storage_offset()}, dtype={e.dtype})")

    def apply(self, fe, fn, ft=None):
        ft = fe if ft is None else ft
        return Trio(fe(self.e), fn(self.n), None if self.t is None else ft(self.t), self.buf)


def base_trio(shape, pad=0, dtype=np.float64):
    numel = math.prod(shape)
    buf = np.arange(numel + pad + 3).astype(dtype)
    n = buf[pad:pad + numel].reshape(shape)
    e = ember.from_numpy(buf).narrow(0, pad, numel).view(tuple(shape))
    t = None if torch is None else torch.from_numpy(buf).narrow(0, pad, numel).view(tuple(shape))
    return Trio(e, n, t, buf)


def byte_offset(arr, buf):
    return arr.__array_interface__["data"][0] - buf.__array_interface__["data"][0]


def check_same_view(e, n, t, buf, base=None):
    """e (ember) views the same elements as n (numpy) and has torch's geometry."""
    assert tuple(e.shape) == n.shape
    assert e.dtype == ember.tensor(np.zeros(0, dtype=n.dtype)).dtype
    np.testing.assert_array_equal(np.asarray(e), n)
    itemsize = n.itemsize
    if n.size > 0:
        assert e.data_ptr() - buf.ctypes.data == byte_offset(n, buf)
        assert e.storage_offset() * itemsize == byte_offset(n, buf)
        for d in range(n.ndim):
            if n.shape[d] > 1:
                assert e.stride(d) * itemsize == n.strides[d], (d, e.stride(), n.strides)
    assert e.untyped_storage().data_ptr() == buf.ctypes.data
    if base is not None:
        assert e._version == base._version
    if t is not None:
        assert tuple(e.shape) == tuple(t.shape)
        assert e.stride() == t.stride()
        assert e.storage_offset() == t.storage_offset()
        assert e.is_contiguous() == t.is_contiguous()


# ---- strategies ---------------------------------------------------------------

dim_sizes = st.sampled_from([0, 1, 1, 2, 3, 4, 5])


@st.composite
def shapes(draw, min_ndim=0, max_ndim=4):
    return tuple(draw(st.lists(dim_sizes, min_size=min_ndim, max_size=max_ndim)))


@st.composite
def layouts(draw, min_ndim=0, max_ndim=4, dtype=None):
    """A Trio: contiguous, offset, permuted, sliced and/or expanded."""
    shape = draw(shapes(min_ndim, max_ndim))
    pad = draw(st.integers(0, 3))
    if dtype is None:
        dtype = draw(st.sampled_from([np.float64, np.int16, np.float32]))
    trio = base_trio(shape, pad, dtype)
    for kind in draw(st.lists(st.sampled_from(["permute", "slice", "expand"]), max_size=3)):
        ndim = trio.n.ndim
        if kind == "permute":
            perm = tuple(draw(st.permutations(range(ndim))))
            trio = trio.apply(lambda x: x.permute(perm), lambda a: a.transpose(perm))
        elif kind == "slice":
            index = []
            for size in trio.n.shape:
                start = draw(st.integers(0, size))
                stop = draw(st.integers(start, size))
                step = draw(st.integers(1, 3))
                index.append(slice(start, stop, step))
            index = tuple(index)
            # NumPy: a trailing ... keeps even a 0-d result an array view
            trio = trio.apply(lambda x: x[index], lambda a: a[index + (Ellipsis,)])
        else:
            lead = draw(st.lists(st.integers(0, 3), max_size=int(ndim < max_ndim)))
            target = list(lead)
            for size in trio.n.shape:
                target.append(draw(st.integers(0, 3)) if size == 1 else size)
            target = tuple(target)
            trio = trio.apply(lambda x: x.expand(target),
                              lambda a: np.broadcast_to(a, target))
    return trio


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


@st.composite
def shapes_with_numel(draw, numel, max_ndim=4):
    ndim = draw(st.integers(0 if numel == 1 else 1, max_ndim))
    if numel == 0:
        dims = draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim))
        if 0 not in dims:
            dims[draw(st.integers(0, ndim - 1))] = 0
        return tuple(dims)
    dims, rest = [], numel
    for _ in range(ndim - 1):
        d = draw(st.sampled_from(divisors(rest)))
        dims.append(d)
        rest //= d
    if ndim:
        dims.append(rest)
    return tuple(draw(st.permutations(dims)))


@st.composite
def natural_reshapes(draw, shape):
    """Splits, merges and inserted 1s of `shape`: often viewable."""
    out, i = [], 0
    while i < len(shape):
        kind = draw(st.sampled_from(["keep", "split", "merge", "one"]))
        if kind == "split" and shape[i] > 0:
            a = draw(st.sampled_from(divisors(shape[i])))
            out += [a, shape[i] // a]
        elif kind == "merge" and i + 1 < len(shape):
            out.append(shape[i] * shape[i + 1])
            i += 1
        elif kind == "one":
            out += [1, shape[i]]
        else:
            out.append(shape[i])
        i += 1
    return tuple(out)


@st.composite
def layout_and_target(draw):
    trio = draw(layouts())
    shape = trio.n.shape
    target = draw(st.one_of(natural_reshapes(shape), shapes_with_numel(math.prod(shape))))
    if target and math.prod(shape) > 0 and draw(st.booleans()):
        k = draw(st.integers(0, len(target) - 1))
        target = target[:k] + (-1,) + target[k + 1:]
    return trio, target


def numpy_can_view(a, shape):
    try:
        np.reshape(a, shape, copy=False)
        return True
    except ValueError:
        return False


def writable(e):
    return e.numel() > 0 and all(st_ != 0 or sz <= 1 for sz, st_ in zip(e.shape, e.stride()))


# ---- view / reshape / flatten -----------------------------------------------------


@HYP
@given(layout_and_target())
def test_view_matches_numpy_and_torch(case):
    trio, target = case
    expected = np.reshape(trio.n, target)
    torch_view = None
    if trio.t is not None:
        try:
            torch_view = trio.t.view(target)
        except RuntimeError:
            torch_view = False
    try:
        v = trio.e.view(target)
    except RuntimeError as exc:
        assert "view size is not compatible" in str(exc)
        assert torch_view in (None, False)
        assert trio.n.size == 0 or not numpy_can_view(trio.n, target)
        return
    assert torch_view is not False, "ember made a view torch refuses"
    assert tuple(v.shape) == expected.shape
    np.testing.assert_array_equal(np.asarray(v), expected)
    assert v.untyped_storage().data_ptr() == trio.e.untyped_storage().data_ptr()
    assert v._version == trio.e._version
    if torch_view is not None:
        assert v.stride() == torch_view.stride()
        assert v.storage_offset() == torch_view.storage_offset()


@HYP
@given(layouts())
def test_view_exists_whenever_numpy_finds_one(trio):
    # NumPy's no-copy reshape rule is at most as permissive as PyTorch's
    # computeStride for non-empty arrays: when NumPy can view, so must we.
    shape = trio.n.shape
    if math.prod(shape) == 0:
        return
    for target in [(-1,), tuple(reversed(shape)), shape + (1,), (1,) + shape]:
        if numpy_can_view(trio.n, target):
            v = trio.e.view(target)
            np.testing.assert_array_equal(np.asarray(v), np.reshape(trio.n, target))


@HYP
@given(layout_and_target())
def test_reshape_views_when_possible_and_copies_otherwise(case):
    trio, target = case
    expected = np.reshape(trio.n, target)
    r = trio.e.reshape(target)
    assert tuple(r.shape) == expected.shape
    np.testing.assert_array_equal(np.asarray(r), expected)
    try:
        trio.e.view(target)
        viewable = True
    except RuntimeError:
        viewable = False
    shares = r.untyped_storage().data_ptr() == trio.e.untyped_storage().data_ptr()
    assert shares == viewable
    if trio.t is not None:
        tr = trio.t.reshape(target)
        t_shares = tr.untyped_storage().data_ptr() == trio.t.untyped_storage().data_ptr()
        assert shares == t_shares or trio.n.size == 0
        assert r.stride() == tr.stride() or trio.n.size == 0
        if shares:
            assert r.storage_offset() == tr.storage_offset()
    if viewable and writable(trio.e) and writable(r):
        before = trio.e._version
        r.fill_(-7)
        assert trio.e._version == before + 1
        assert np.all(np.asarray(trio.e) == -7)
    elif not viewable:
        assert r.is_contiguous() and r.storage_offset() == 0
        if r.numel() > 0:
            before = trio.n.copy()
            r.fill_(-7)
            np.testing.assert_array_equal(trio.n, before)  # a copy: base untouched


def test_view_errors():
    t = ember.arange(6.0)
    with pytest.raises(RuntimeError, match=r"shape '\[4\]' is invalid for input of size 6"):
        t.view(4)
    with pytest.raises(RuntimeError, match="only one dimension can be inferred"):
        t.view(-1, -1)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        t.view(2, 3).t().view(6)
    with pytest.raises(RuntimeError):
        ember.zeros(0, 3).view(-1, 0)
    with pytest.raises(TypeError):
        t.view(2.0, 3)


def test_view_and_reshape_argument_forms():
    t = ember.arange(24)
    for args in [((2, 3, 4),), ([2, 3, 4],), (2, 3, 4), (2, -1, 4)]:
        assert t.view(*args).shape == (2, 3, 4)
        assert t.reshape(*args).shape == (2, 3, 4)
    assert t.view(size=(4, 6)).shape == (4, 6)
    assert t.reshape(shape=(6, 4)).shape == (6, 4)
    assert t.view(()).shape == () if t.numel() == 1 else True
    assert ember.tensor([5]).view(()).shape == ()
    assert ember.tensor(5).view(1, 1).shape == (1, 1)
    assert ember.tensor(5).view(-1).tolist() == [5]


def test_reshape_copy_writes_do_not_show_through():
    base = ember.arange(6.0).view(2, 3)
    r = base.t().reshape(6)  # no view exists for the transpose
    assert r.untyped_storage().data_ptr() != base.untyped_storage().data_ptr()
    assert r.tolist() == [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    r[0] = 100
    assert base[0, 0].item() == 0.0
    assert base._version == 0


def test_reshape_as_and_view_as():
    t = ember.arange(12)
    other = ember.zeros(3, 4)
    v = t.view_as(other)
    assert v.shape == (3, 4) and v.stride() == (4, 1)
    assert v.data_ptr() == t.data_ptr()
    assert t.reshape_as(other).shape == (3, 4)
    with pytest.raises(TypeError):
        t.view_as((3, 4))
    with pytest.raises(RuntimeError):
        t.view_as(ember.zeros(5))


@HYP
@given(layouts(), st.data())
def test_flatten(trio, data):
    ndim = trio.n.ndim
    rng = max(ndim, 1)
    start = data.draw(st.integers(-rng, rng - 1))
    end = data.draw(st.integers(-rng, rng - 1))
    s, e_ = start % rng, end % rng
    if s > e_:
        with pytest.raises(RuntimeError, match="start_dim cannot come after end_dim"):
            trio.e.flatten(start, end)
        return
    f = trio.e.flatten(start, end)
    if ndim == 0:
        expected = trio.n.reshape(1)
    else:
        shape = trio.n.shape
        expected = trio.n.reshape(shape[:s] + (math.prod(shape[s:e_ + 1]),) + shape[e_ + 1:])
    assert tuple(f.shape) == expected.shape
    np.testing.assert_array_equal(np.asarray(f), expected)
    if trio.t is not None:
        tf = trio.t.flatten(start, end)
        assert tuple(tf.shape) == tuple(f.shape)
        if trio.n.size > 0:
            assert f.stride() == tf.stride()


def test_flatten_defaults_and_errors():
    t = ember.zeros(2, 3, 4)
    assert t.flatten().shape == (24,)
    assert t.flatten(1).shape == (2, 12)
    assert t.flatten(end_dim=1).shape == (6, 4)
    assert ember.tensor(3.0).flatten().shape == (1,)
    with pytest.raises(IndexError, match="Dimension out of range"):
        t.flatten(3)
    flat = t.flatten()
    assert flat.data_ptr() == t.data_ptr()  # contiguous: a view


# ---- transpose, t, T, permute ----------------------------------------------------


@HYP
@given(layouts(), st.data())
def test_transpose(trio, data):
    rng = max(trio.n.ndim, 1)
    d0 = data.draw(st.integers(-rng, rng - 1))
    d1 = data.draw(st.integers(-rng, rng - 1))
    r = trio.apply(lambda x: x.transpose(d0, d1),
                   lambda a: np.swapaxes(a, d0 % rng, d1 % rng) if a.ndim else a)
    check_same_view(r.e, r.n, r.t, trio.buf, base=trio.e)
    if trio.n.ndim:
        swapped = list(trio.e.stride())
        swapped[d0], swapped[d1] = swapped[d1], swapped[d0]
        assert r.e.stride() == tuple(swapped)


@HYP
@given(layouts(max_ndim=2))
def test_t(trio):
    r = trio.apply(lambda x: x.t(), lambda a: a.T)
    check_same_view(r.e, r.n, r.t, trio.buf, base=trio.e)


@HYP
@given(layouts())
def test_T_reverses_dims(trio):
    perm = tuple(reversed(range(trio.n.ndim)))
    r = trio.apply(lambda x: x.T, lambda a: a.T, lambda x: x.permute(perm))
    check_same_view(r.e, r.n, r.t, trio.buf, base=trio.e)


def test_t_rejects_3d():
    with pytest.raises(RuntimeError, match=r"t\(\) expects a tensor with <= 2 dimensions, but self is 3D"):
        ember.zeros(1, 2, 3).t()


@HYP
@given(layouts(), st.data())
def test_permute(trio, data):
    ndim = trio.n.ndim
    perm = tuple(data.draw(st.permutations(range(ndim))))
    # negative spellings of the same dims
    spelled = tuple(p - ndim if data.draw(st.booleans()) else p for p in perm)
    r = trio.apply(lambda x: x.permute(*spelled) if spelled else x.permute(()),
                   lambda a: a.transpose(perm))
    check_same_view(r.e, r.n, r.t, trio.buf, base=trio.e)
    assert r.e.stride() == tuple(trio.e.stride(p) for p in perm)


def test_permute_errors_and_forms():
    t = ember.zeros(2, 3, 4)
    assert t.permute(2, 0, 1).shape == (4, 2, 3)
    assert t.permute((2, 0, 1)).shape == (4, 2, 3)
    assert t.permute([2, 0, 1]).shape == (4, 2, 3)
    assert t.permute(dims=(2, 0, 1)).shape == (4, 2, 3)
    with pytest.raises(RuntimeError, match="duplicate dims"):
        t.permute(0, 0, 1)
    with pytest.raises(RuntimeError, match="does not match"):
        t.permute(0, 1)
    with pytest.raises(IndexError, match="Dimension out of range"):
        t.permute(0, 1, 3)


# ---- squeeze / unsqueeze ------------------------------------------------------------


@HYP
@given(layouts(), st.data())
def test_squeeze_all(trio, data):
    r = trio.apply(lambda x: x.squeeze(), lambda a: np.squeeze(a))
    check_same_view(r.e, r.n, r.t, trio.buf, base=trio.e)


@HYP
@given(layouts(), st.data())
def test_squeeze_dim_and_tuple(trio, data):
    ndim = trio.n.ndim
    rng = max(ndim, 1)
    dims = tuple(data.draw(st.lists(st.integers(-rng, rng - 1), max_size=3, unique_by=lambda d: d % rng)))
    as_int = len(dims) == 1 and data.draw(st.booleans())
    arg = dims[0] if as_int else dims
    np_axes = tuple(sorted({d % rng for d in dims if ndim and trio.n.shape[d % rng] == 1}))
    r = trio.apply(lambda x: x.squeeze(arg), lambda a: np.squeeze(a, axis=np_axes) if ndim else a)
    check_same_view(r.e, r.n, r.t, trio.buf, base=trio.e)
    assert trio.e.squeeze(dim=arg).shape == r.e.shape


def test_squeeze_examples():
    t = ember.zeros(1, 2, 1, 3)
    assert t.squeeze().shape == (2, 3)
    assert t.squeeze(0).shape == (2, 1, 3)
    assert t.squeeze(1).shape == (1, 2, 1, 3)  # not size 1: unchanged
    assert t.squeeze((0, 2)).shape == (2, 3)
    assert t.squeeze([0, -2]).shape == (2, 3)
    assert t.squeeze(()).shape == (1, 2, 1, 3)
    assert ember.tensor(1.0).squeeze().shape == ()
    assert ember.tensor(1.0).squeeze(0).shape == ()
    assert ember.tensor(1.0).squeeze(-1).shape == ()
    with pytest.raises(IndexError, match="Dimension out of range"):
        t.squeeze(4)
    with pytest.raises(IndexError, match="Dimension out of range"):
        ember.tensor(1.0).squeeze(1)


@HYP
@given(layouts(max_ndim=4), st.data())
def test_unsqueeze(trio, data):
    ndim = trio.n.ndim
    dim = data.draw(st.integers(-ndim - 1, ndim))
    r = trio.apply(lambda x: x.unsqueeze(dim), lambda a: np.expand_dims(a, dim))
    check_same_view(r.e, r.n, r.t, trio.buf, base=trio.e)
    assert r.e.squeeze(dim).shape == trio.e.shape


def test_unsqueeze_errors():
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-3, 2\], but got 3\)"):
        ember.zeros(2, 3).unsqueeze(3)
    with pytest.raises(IndexError):
        ember.zeros(2, 3).unsqueeze(-4)
    assert ember.tensor(1.0).unsqueeze(0).shape == (1,)
    assert ember.tensor(1.0).unsqueeze(-1).shape == (1,)


# ---- expand ---------------------------------------------------------------------------


@HYP
@given(layouts(max_ndim=3), st.data())
def test_expand(trio, data):
    shape = trio.n.shape
    lead = tuple(data.draw(st.lists(st.integers(0, 3), max_size=2)))
    target = []
    for size in shape:
        choice = data.draw(st.sampled_from(["same", "minus1", "grow"]))
        if choice == "minus1":
            target.append(-1)
        elif choice == "grow" and size == 1:
            target.append(data.draw(st.integers(0, 4)))
        else:
            target.append(size)
    target = lead + tuple(target)
    final = lead + tuple(s if t == -1 else t for s, t in zip(shape, target[len(lead):]))
    r = trio.apply(lambda x: x.expand(target), lambda a: np.broadcast_to(a, final))
    check_same_view(r.e, r.n, r.t, trio.buf, base=trio.e)
    for d in range(len(final)):
        od = d - len(lead)
        if final[d] != 1 and (od < 0 or shape[od] == 1):
            assert r.e.stride(d) == 0  # broadcast dims read one element
    # expand_as gives the same view
    other = ember.zeros(*final)
    ea = trio.e.expand_as(other)
    assert ea.shape == r.e.shape and ea.stride() == r.e.stride()
    assert ea.storage_offset() == r.e.storage_offset()


def test_expand_errors():
    t = ember.zeros(2, 3)
    with pytest.raises(RuntimeError, match="must match the existing size"):
        t.expand(4, 3, 4)
    with pytest.raises(RuntimeError, match="must be greater or equal to the number of dimensions"):
        t.expand(3)
    with pytest.raises(RuntimeError, match="isn't allowed in a leading, non-existing dimension"):
        t.expand(-1, 2, 3)
    e = ember.zeros(3, 1).expand(3, 4)
    assert e.stride() == (1, 0)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        e.fill_(1.0)


# ---- narrow, select, unfold --------------------------------------------------------


@HYP
@given(layouts(min_ndim=1), st.data())
def test_narrow(trio, data):
    ndim = trio.n.ndim
    dim = data.draw(st.integers(-ndim, ndim - 1))
    size = trio.n.shape[dim]
    start = data.draw(st.integers(-size, size))
    length = data.draw(st.integers(0, size - (start % size if size and start < 0 else start)))
    s = start + size if start < 0 else start
    index = (slice(None),) * (dim % ndim) + (slice(s, s + length),)
    r = trio.apply(lambda x: x.narrow(dim, start, length), lambda a: a[index])
    check_same_view(r.e, r.n, r.t, trio.buf, base=trio.e)


def test_narrow_errors():
    t = ember.zeros(4, 6)
    with pytest.raises(RuntimeError, match=r"start \(4\) \+ length \(3\) exceeds dimension size \(6\)"):
        t.narrow(1, 4, 3)
    with pytest.raises(IndexError, match="start out of range"):
        t.narrow(1, 7, 0)
    with pytest.raises(RuntimeError, match="cannot be applied to a 0-dim tensor"):
        ember.tensor(1.0).narrow(0, 0, 1)
    assert t.narrow(1, 6, 0).shape == (4, 0)


@HYP
@given(layouts(min_ndim=1), st.data())
def test_select(trio, data):
    ndim = trio.n.ndim
    dim = data.draw(st.integers(-ndim, ndim - 1))
    size = trio.n.shape[dim]
    if size == 0:
        with pytest.raises(IndexError, match="out of bounds"):
            trio.e.select(dim, 0)
        return
    index = data.draw(st.integers(-size, size - 1))
    np_index = (slice(None),) * (dim % ndim) + (index, Ellipsis)
    r = trio.apply(lambda x: x.select(dim, index), lambda a: a[np_index])
    check_same_view(r.e, r.n, r.t, trio.buf, base=trio.e)


def test_select_errors():
    t = ember.zeros(4, 6)
    with pytest.raises(IndexError, match="index 6 is out of bounds for dimension 1 with size 6"):
        t.select(1, 6)
    with pytest.raises(IndexError, match="index -5 is out of bounds for dimension 0 with size 4"):
        t.select(0, -5)
    with pytest.raises(IndexError, match="select\\(\\) cannot be applied to a 0-dim tensor"):
        ember.tensor(1.0).select(0, 0)


@HYP
@given(layouts(min_ndim=1), st.data())
def test_unfold(trio, data):
    ndim = trio.n.ndim
    dim = data.draw(st.integers(-ndim, ndim - 1))
    size = trio.n.shape[dim]
    win = data.draw(st.integers(0, size))
    step = data.draw(st.integers(1, 3))
    axis = dim % ndim

    def np_unfold(a):
        w = np.lib.stride_tricks.sliding_window_view(a, win, axis=axis)
        return w[(slice(None),) * axis + (slice(None, None, step),)]

    r = trio.apply(lambda x: x.unfold(dim, win, step), np_unfold)
    check_same_view(r.e, r.n, r.t, trio.buf, base=trio.e)


def test_unfold_examples_and_errors():
    t = ember.arange(7.0)
    u = t.unfold(0, 3, 2)
    assert u.tolist() == [[0, 1, 2], [2, 3, 4], [4, 5, 6]]
    assert u.stride() == (2, 1)
    assert ember.tensor(5.0).unfold(0, 1, 1).tolist() == [5.0]
    with pytest.raises(RuntimeError, match="maximum size for tensor at dimension 0 is 7 but size is 8"):
        t.unfold(0, 8, 1)
    with pytest.raises(RuntimeError, match="step is 0 but must be > 0"):
        t.unfold(0, 2, 0)


# ---- as_strided -----------------------------------------------------------------------


@st.composite
def strided_geometry(draw, nbytes_elems):
    ndim = draw(st.integers(0, 3))
    sizes = draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim))
    strides = draw(st.lists(st.integers(0, 5), min_size=ndim, max_size=ndim))
    offset = draw(st.integers(0, nbytes_elems + 2))
    return tuple(sizes), tuple(strides), offset


@HYP
@given(st.integers(0, 12), st.sampled_from([np.float64, np.int16, np.uint8]), st.data())
def test_as_strided_in_and_out_of_bounds(n, dtype, data):
    buf = np.arange(n).astype(dtype)
    e = ember.from_numpy(buf)
    sizes, strides, offset = data.draw(strided_geometry(n))
    numel = math.prod(sizes)
    last = offset + sum((s - 1) * st_ for s, st_ in zip(sizes, strides))
    in_bounds = numel == 0 or last < n
    if not in_bounds:
        with pytest.raises(RuntimeError, match="out of bounds for storage of size"):
            e.as_strided(sizes, strides, offset)
        return
    v = e.as_strided(sizes, strides, offset)
    assert tuple(v.shape) == sizes and v.stride() == strides
    assert v.storage_offset() == offset
    assert v.untyped_storage().data_ptr() == buf.ctypes.data
    assert v._version == e._version
    if numel:
        expected = np.lib.stride_tricks.as_strided(
            buf[offset:], shape=sizes, strides=tuple(s * buf.itemsize for s in strides))
        np.testing.assert_array_equal(np.asarray(v), expected)
    if torch is not None:
        tv = torch.from_numpy(buf).as_strided(sizes, strides, offset)
        assert tv.stride() == v.stride() and tv.storage_offset() == v.storage_offset()


def test_as_strided_never_reads_past_the_buffer():
    base = ember.arange(10.0)
    view = base[2:6]  # storage is still the whole 10 elements
    # the default offset is the view's own; bounds are against the storage
    v = view.as_strided((2, 2), (1, 1))
    assert v.storage_offset() == 2
    assert v.tolist() == [[2.0, 3.0], [3.0, 4.0]]
    assert view.as_strided((8,), (1,), 2).tolist() == [float(i) for i in range(2, 10)]
    for sizes, strides, offset in [((11,), (1,), 0), ((9,), (1,), 2), ((2,), (10,), 0),
                                   ((1,), (1,), 10), ((3, 3), (4, 1), 0),
                                   ((2,), (2**62,), 0), ((2**40, 2**40), (1, 1), 0)]:
        with pytest.raises(RuntimeError):
            base.as_strided(sizes, strides, offset)
    with pytest.raises(RuntimeError, match="Negative strides"):
        base.as_strided((2,), (-1,), 5)
    with pytest.raises(RuntimeError):
        base.as_strided((2,), (1,), -1)
    with pytest.raises(RuntimeError, match="mismatch in length of strides and shape"):
        base.as_strided((2, 2), (1,))
    # empty views may sit anywhere at or past the end
    assert base.as_strided((0,), (1,), 10).numel() == 0


@needs_torch
def test_as_strided_error_message_matches_torch():
    with pytest.raises(RuntimeError) as ours:
        ember.zeros(4).as_strided((5,), (1,))
    with pytest.raises(RuntimeError) as theirs:
        torch.zeros(4).as_strided((5,), (1,))
    assert str(ours.value) == str(theirs.value)


# ---- contiguous, clone, detach ------------------------------------------------------


@HYP
@given(layouts())
def test_contiguous(trio):
    c = trio.e.contiguous()
    np.testing.assert_array_equal(np.asarray(c), trio.n)
    assert c.is_contiguous()
    if trio.e.is_contiguous():
        assert c is trio.e
    else:
        assert c.untyped_storage().data_ptr() != trio.e.untyped_storage().data_ptr()
        assert c.storage_offset() == 0
        assert c._version == 0
        if trio.t is not None:
            assert c.stride() == trio.t.contiguous().stride()
    if trio.t is not None:
        assert trio.e.is_contiguous() == trio.t.is_contiguous()


@HYP
@given(layouts())
def test_clone(trio):
    c = trio.e.clone()
    assert c is not trio.e
    assert c.dtype == trio.e.dtype and c.shape == trio.e.shape
    np.testing.assert_array_equal(np.asarray(c), trio.n)
    if c.numel():
        assert c.untyped_storage().data_ptr() != trio.e.untyped_storage().data_ptr()
    assert c.storage_offset() == 0
    assert c._version == 0
    # torch's clone keeps the strides of any dense layout (preserve_format);
    # ember's clone is always row-major, so compare only where they agree.
    if trio.e.stride() == ember.empty(trio.e.shape).stride() and trio.t is not None:
        assert c.stride() == trio.t.clone().stride()
    if c.numel():
        before = trio.n.copy()
        c.fill_(3)
        np.testing.assert_array_equal(trio.n, before)  # independent memory


def test_clone_keeps_requires_grad_off_and_values():
    a = ember.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    c = a.clone()
    assert c.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert c.data_ptr() != a.data_ptr()


def test_detach_shares_memory_and_version_counter():
    a = ember.arange(6.0).view(2, 3)
    a.requires_grad = True
    d = a.detach()
    assert not d.requires_grad
    assert d.data_ptr() == a.data_ptr()
    assert d.stride() == a.stride() and d.storage_offset() == a.storage_offset()
    v0 = a._version
    d[0, 0] = 10.0
    assert a._version == v0 + 1 == d._version
    assert a[0, 0].item() == 10.0
    d.zero_()
    assert a._version == v0 + 2
    assert a.tolist() == [[0.0] * 3] * 2


# ---- version counter sharing -------------------------------------------------------------


def _all_views(base):
    return [
        base.view(-1), base.reshape(3, 4), base.flatten(), base.t(), base.T,
        base.permute(1, 0), base.transpose(0, 1), base.unsqueeze(0),
        base.unsqueeze(0).squeeze(0), base.narrow(1, 1, 2), base.select(0, 1),
        base[1], base[:, ::2], base[None, ..., 0], base.unfold(1, 2, 1),
        base.as_strided((2, 2), (1, 2), 1), base.detach(), base.view_as(base),
        base[0:1].expand(5, 4), base.contiguous(),
    ]


def test_views_share_version_counter_with_base():
    base = ember.zeros(3, 4)
    views = _all_views(base)
    assert base._version == 0
    for v in views:
        assert v._version == base._version
        assert v.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    expected = 0
    for v in views:
        if not writable(v):
            continue
        v.fill_(1.0)  # an in-place write through the view ...
        expected += 1
        assert base._version == expected  # ... bumps the base's counter
        assert all(w._version == expected for w in views)
    base[0, 0] = 5.0
    assert all(w._version == expected + 1 for w in views)


def test_new_tensors_start_their_own_version_counter():
    base = ember.zeros(3, 4)
    base.fill_(1.0)
    for fresh in [base.clone(), base.t().contiguous(), base.t().reshape(12), base.to(ember.float64)]:
        assert fresh._version == 0
        fresh.fill_(2.0)
        assert base._version == 1


def test_writes_through_views_show_in_base():
    base = ember.zeros(3, 4)
    base.t()[1, 2] = 5.0
    assert base[2, 1].item() == 5.0
    base.view(12)[11] = 7.0
    assert base[2, 3].item() == 7.0
    base.select(1, 0).fill_(9.0)
    assert base[:, 0].tolist() == [9.0, 9.0, 9.0]
    base.unfold(1, 2, 2)[0, 1, 1] = 4.0
    assert base[0, 3].item() == 4.0
    base.as_strided((2,), (5,), 1).fill_(-1.0)
    assert base.view(-1)[1].item() == -1.0 and base.view(-1)[6].item() == -1.0


def test_view_keeps_base_storage_alive():
    base = ember.arange(10.0)
    view = base[3:5]
    ptr = base.untyped_storage().data_ptr()
    del base
    import gc

    gc.collect()
    assert view.tolist() == [3.0, 4.0]
    assert view.untyped_storage().data_ptr() == ptr


@needs_torch
def test_empty_slice_offsets_match_torch():
    for index in [np.s_[5:5], np.s_[12:], np.s_[3:], np.s_[5:2], np.s_[1:, 10:], np.s_[:, 4:4]]:
        e = ember.arange(20).view(2, 10)[index]
        t = torch.arange(20).view(2, 10)[index]
        assert (tuple(e.shape), e.stride(), e.storage_offset()) == \
            (tuple(t.shape), t.stride(), t.storage_offset()), index


def test_geometry_changed_in_place_keeps_the_memory_and_counts_a_write():
    """unsqueeze_/t_/resize_ rebind the tensor to a view of its own memory
    (python/ember/_function_forms.py) and bump the version through the C
    method _bump_version; a resize_ that grows keeps the old values first."""
    base = ember.arange(6.0)
    view = base.view(2, 3)
    version = view._version
    view.t_()
    assert tuple(view.shape) == (3, 2) and view.stride() == (1, 3)
    view.unsqueeze_(0).squeeze_()
    view[0, 1] = 40.0
    assert base[3].item() == 40.0 and view._version == version + 4
    grown = ember.arange(3.0)
    grown.add_(1)
    before = grown._version
    grown.resize_(2, 4)
    assert grown.view(-1)[:3].tolist() == [1.0, 2.0, 3.0]
    assert grown._version == before + 1
    with pytest.raises(TypeError):
        grown._bump_version("later")
    with pytest.raises(TypeError):
        grown._bump_version(1, 2)
    grown._bump_version(100)
    assert grown._version == 101
