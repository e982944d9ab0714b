"""Zero-copy exchange with NumPy, PEP 3118 buffers and DLPack (c/python/Numpy.c).

See Note [Zero-copy lifetime]: an imported tensor's storage points at the
exporter's memory and holds the exporter exactly as long as the storage
lives; an exported ndarray's base is the tensor.  PyTorch (when installed)
is the oracle for error messages and for DLPack interop.

NumPy factories always get an explicit dtype here: the debug-ABI NumPy of
the refcount gate drifts sys.gettotalrefcount() by one per np.zeros/ones/
empty call without one (NumPy's, not ember's), which reads as a leak.
"""

import array
import ctypes
import gc
import sys
import weakref

import numpy as np
import pytest

import ember
from ember import memory

try:
    from hypothesis import given, strategies as st
    from hypothesis.extra import numpy as hnp
except ImportError:  # pragma: no cover - hypothesis is a test extra
    given = None

NP_DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64,
             np.float32, np.float64]
EMBER_DTYPES = [ember.bool, ember.uint8, ember.int8, ember.int16, ember.int32,
                ember.int64, ember.float32, ember.float64]


def _live_blocks():
    return memory.stats()["live_blocks"]


def _elem_strides(a):
    return tuple(s // a.itemsize for s in a.strides)


class Buf(bytearray):
    """A buffer exporter that can be weakly referenced."""


# ---- from_numpy: sharing --------------------------------------------------------


def test_from_numpy_shares_memory_article_example():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = ember.from_numpy(a)
    assert t.data_ptr() == a.ctypes.data
    a += 1.0  # in place: the shared memory changes, t sees it
    assert t.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    a = a + 1.0  # a new array bound to the old name: t keeps the old one
    assert t.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert a.tolist() == [[2.0, 3.0, 4.0], [5.0, 6.0, 7.0]]


def test_from_numpy_writes_through_tensor():
    a = np.zeros((2, 3), dtype=np.int64)
    t = ember.from_numpy(a)
    t[1] = 7
    t[0, 2] = 5
    assert a.tolist() == [[0, 0, 5], [7, 7, 7]]
    t.fill_(3)
    assert (a == 3).all()


@pytest.mark.parametrize("np_dtype, ember_dtype", list(zip(NP_DTYPES, EMBER_DTYPES)))
def test_from_numpy_all_dtypes(np_dtype, ember_dtype):
    a = (np.arange(12) % 3).astype(np_dtype).reshape(3, 4)
    t = ember.from_numpy(a)
    assert t.dtype == ember_dtype
    assert t.shape == (3, 4)
    assert t.stride() == (4, 1)
    assert t.data_ptr() == a.ctypes.data
    assert t.tolist() == a.tolist()
    assert t.untyped_storage().nbytes() == a.nbytes
    back = t.numpy()
    assert back.dtype == np.dtype(np_dtype)
    assert back.ctypes.data == a.ctypes.data


@pytest.mark.parametrize("make", [
    lambda b: b.T,
    lambda b: b.transpose(2, 0, 1),
    lambda b: b[:, ::2, 1:],
    lambda b: b[1, :, ::3],
    lambda b: b[..., 1],
    lambda b: b[::2, 1:3, ::2],
    lambda b: np.broadcast_to(b[0, 0], (3, 4)),  # stride 0
], ids=["T", "permute", "slice", "select-step", "last", "steps", "broadcast"])
def test_from_numpy_keeps_strides(make):
    b = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    a = make(b)
    t = ember.from_numpy(a)
    assert tuple(t.shape) == a.shape
    assert t.stride() == _elem_strides(a)
    assert t.data_ptr() == a.ctypes.data
    assert t.tolist() == a.tolist()
    assert t.is_contiguous() == a.flags.c_contiguous
    b += 100  # writes to the base show through the strided view
    assert t.tolist() == a.tolist()


def test_from_numpy_0d_and_empty():
    t = ember.from_numpy(np.array(3.5))
    assert t.shape == ()
    assert t.dim() == 0
    assert t.item() == 3.5

    e = ember.from_numpy(np.zeros((0, 3), dtype=np.int32))
    assert e.shape == (0, 3)
    assert e.dtype == ember.int32
    assert e.numel() == 0
    assert e.tolist() == []
    assert e.untyped_storage().nbytes() == 0
    assert e.numpy().shape == (0, 3)


def test_from_numpy_counts_no_allocation():
    before = memory.stats()
    a = np.ones(1000, dtype=np.float32)
    t = ember.from_numpy(a)
    v = t[10:20]
    assert memory.stats() == before
    del t, v


# ---- from_numpy: any PEP 3118 buffer ----------------------------------------------


def test_bytearray_shares_and_is_writable():
    b = bytearray(b"abc")
    t = ember.from_numpy(b)
    assert t.dtype == ember.uint8
    assert t.tolist() == [97, 98, 99]
    t[0] = 65
    assert b == bytearray(b"Abc")
    b[2] = 90
    assert t.tolist() == [65, 98, 90]


def test_array_module_buffers():
    d = array.array("d", [1.0, 2.5])
    t = ember.from_numpy(d)
    assert t.dtype == ember.float64
    assert t.tolist() == [1.0, 2.5]
    t[1] = 9.0
    assert d[1] == 9.0
    assert ember.from_numpy(array.array("i", [1, -2])).dtype == ember.int32
    assert ember.from_numpy(array.array("q", [1])).dtype == ember.int64
    assert ember.from_numpy(array.array("h", [1])).dtype == ember.int16
    assert ember.from_numpy(array.array("f", [1])).dtype == ember.float32


def test_ctypes_buffer_with_explicit_byte_order():
    c = (ctypes.c_double * 3)(1.0, 2.0, 3.0)  # format '<d'
    t = ember.from_numpy(c)
    assert t.dtype == ember.float64
    assert t.tolist() == [1.0, 2.0, 3.0]
    c[0] = 5.0
    assert t[0].item() == 5.0


def test_memoryview_and_memoryview_slice():
    raw = bytearray(range(10))
    t = ember.from_numpy(memoryview(raw))
    assert t.tolist() == list(range(10))
    s = ember.from_numpy(memoryview(raw)[2:8:2])
    assert s.shape == (3,)
    assert s.stride() == (2,)
    assert s.tolist() == [2, 4, 6]
    raw[4] = 44
    assert s.tolist() == [2, 44, 6]
    m = ember.from_numpy(memoryview(raw)[:8].cast("i"))
    assert m.dtype == ember.int32 and m.shape == (2,)


def test_bytes_give_a_read_only_tensor():
    t = ember.from_numpy(b"xyz")
    assert t.untyped_storage().is_read_only
    assert t.tolist() == [120, 121, 122]
    with pytest.raises(RuntimeError, match="read-only"):
        t.fill_(0)
    assert t.tolist() == [120, 121, 122]


def test_non_buffer_is_a_type_error():
    with pytest.raises(TypeError, match="buffer protocol.*int"):
        ember.from_numpy(3)
    with pytest.raises(TypeError, match="list"):
        ember.from_numpy([1, 2, 3])


# ---- from_numpy: refusals ------------------------------------------------------------


def test_negative_strides_refused():
    a = np.arange(5.0)
    with pytest.raises(ValueError) as info:
        ember.from_numpy(a[::-1])
    msg = str(info.value)
    assert "negative" in msg and "array.copy()" in msg
    t = ember.from_numpy(a[::-1].copy())  # the fix the message names works
    assert t.tolist() == [4.0, 3.0, 2.0, 1.0, 0.0]


def test_negative_strides_message_matches_torch():
    torch = pytest.importorskip("torch")
    a = np.arange(4.0)[::-1]
    with pytest.raises(ValueError) as ours:
        ember.from_numpy(a)
    with pytest.raises(ValueError) as theirs:
        torch.from_numpy(a)
    assert str(ours.value).strip() == str(theirs.value).strip()


def test_strides_not_multiple_of_itemsize_refused():
    rec = np.zeros(3, dtype=[("a", "i1"), ("b", "f4")])
    with pytest.raises(ValueError, match="not a multiple of the element byte size.*Copy"):
        ember.from_numpy(rec["b"])
    odd = np.ndarray((3,), dtype=np.float32, buffer=np.zeros(20, np.uint8),
                     strides=(5,))
    with pytest.raises(ValueError, match="multiple of the element byte size"):
        ember.from_numpy(odd)
    assert ember.from_numpy(rec["b"].copy()).tolist() == [0.0, 0.0, 0.0]


def test_non_native_byte_order_refused():
    a = np.arange(3, dtype=">f4")
    with pytest.raises(TypeError, match="byte order") as info:
        ember.from_numpy(a)
    assert "astype" in str(info.value)  # names the fix
    fixed = a.astype(a.dtype.newbyteorder("="))
    assert ember.from_numpy(fixed).tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("dtype", [np.complex64, object, "U3", "S3",
                                   np.uint16, np.uint32, np.uint64])
def test_unsupported_dtypes_refused(dtype):
    a = np.zeros(3, dtype=dtype)
    with pytest.raises(TypeError, match="supported types are.*float32 and float64"):
        ember.from_numpy(a)


def test_too_many_dims_refused():
    a = np.zeros((1,) * 33, dtype=np.float64)
    with pytest.raises(ValueError, match="33 dimensions"):
        ember.from_numpy(a)


def test_refusal_releases_the_exporter():
    a = np.zeros(3, dtype=np.complex64)
    before = sys.getrefcount(a)
    for _ in range(3):
        with pytest.raises(TypeError):
            ember.from_numpy(a)
    assert sys.getrefcount(a) == before
    a.resize(10)  # no export left behind: resizing is allowed
    b = bytearray(4)
    mv = memoryview(b)[::-1]
    with pytest.raises(ValueError):
        ember.from_numpy(mv)
    mv.release()
    b.extend(b"more")  # a leaked export would raise BufferError here


# ---- read-only memory ------------------------------------------------------------------


def _read_only_array():
    a = np.arange(6, dtype=np.float32)
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("write", [
    lambda t: t.fill_(1.0),
    lambda t: t.copy_(ember.ones(6)),
    lambda t: t.__setitem__(0, 5.0),
    lambda t: t.__setitem__(slice(None), 5.0),
    lambda t: t.zero_(),
    lambda t: t[1:].fill_(2.0),
    lambda t: t.view(2, 3)[1].zero_(),
], ids=["fill_", "copy_", "setitem", "setitem-slice", "zero_", "view-fill_", "view-zero_"])
def test_read_only_tensor_refuses_writes(write):
    a = _read_only_array()
    t = ember.from_numpy(a)
    assert t.untyped_storage().is_read_only
    with pytest.raises(RuntimeError, match="read-only.*clone"):
        write(t)
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert t.tolist() == a.tolist()


def test_read_only_tensor_numpy_is_read_only_and_clone_is_writable():
    a = _read_only_array()
    t = ember.from_numpy(a)
    n = t.numpy()
    assert not n.flags.writeable
    with pytest.raises(ValueError):
        n[0] = 1.0
    c = t.clone()
    assert not c.untyped_storage().is_read_only
    c.fill_(1.0)
    assert c.tolist() == [1.0] * 6
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    # reading still works and the tensor can be a source
    w = ember.zeros(6)
    w.copy_(t)
    assert w.tolist() == a.tolist()


# ---- lifetime of the exporter ----------------------------------------------------------


def test_exporter_lives_exactly_as_long_as_the_storage():
    b = Buf(16)
    alive = weakref.ref(b)
    t = ember.from_numpy(b)
    del b
    gc.collect()
    assert alive() is not None
    view = t[2:]
    storage = t.untyped_storage()
    del t
    assert alive() is not None  # the view still holds it
    del view
    assert alive() is not None  # the storage object still holds it
    del storage
    assert alive() is None  # freed at once, not at the next collection


def test_refcount_of_exported_array():
    a = np.arange(4.0)
    before = sys.getrefcount(a)
    t = ember.from_numpy(a)
    assert sys.getrefcount(a) == before + 1  # the Py_buffer's reference
    v = t.view(2, 2)
    s = t.untyped_storage()
    assert sys.getrefcount(a) == before + 1  # one per storage, not per tensor
    t2 = ember.from_numpy(a)
    assert sys.getrefcount(a) == before + 2
    del t, v, t2
    assert sys.getrefcount(a) == before + 1
    del s
    assert sys.getrefcount(a) == before


def test_ndarray_export_blocks_resize_while_held():
    a = np.arange(4.0)
    t = ember.from_numpy(a)
    with pytest.raises(ValueError, match="resize"):
        a.resize(10)
    del t
    a.resize(10)
    assert a.shape == (10,)


def test_array_array_export_blocks_resize_while_held():
    ar = array.array("i", [1, 2, 3])
    alive = weakref.ref(ar)
    t = ember.from_numpy(ar)
    with pytest.raises(BufferError):
        ar.append(4)
    del ar
    assert alive() is not None
    del t
    assert alive() is None


def test_bytearray_export_blocks_resize_while_held():
    b = bytearray(8)
    t = ember.from_numpy(b)
    with pytest.raises(BufferError):
        b.extend(b"x")
    del t
    b.extend(b"x")
    assert len(b) == 9


# ---- Tensor.numpy() and __array__ ----------------------------------------------------


def test_numpy_shares_memory_both_ways():
    t = ember.arange(6.0).view(2, 3)
    n = t.numpy()
    assert isinstance(n.base, ember.UntypedStorage)  # the memory, not t
    assert n.ctypes.data == t.data_ptr()
    assert n.dtype == np.float32 and n.shape == (2, 3)
    assert n.flags.writeable
    n[0, 0] = 42.0
    assert t[0, 0].item() == 42.0
    t.fill_(7.0)
    assert (n == 7.0).all()


@pytest.mark.parametrize("dtype", EMBER_DTYPES)
def test_numpy_dtypes(dtype):
    t = ember.zeros(2, 3, dtype=dtype)
    n = t.numpy()
    assert n.dtype == np.dtype(NP_DTYPES[EMBER_DTYPES.index(dtype)])
    assert n.tolist() == t.tolist()


def test_numpy_of_views_keeps_strides_and_offset():
    base = ember.arange(24).view(2, 3, 4)
    for view in (base.transpose(0, 2), base[1, :, 1::2], base.permute(2, 0, 1),
                 base.expand(2, 2, 3, 4), base[0, 0, 0]):
        n = view.numpy()
        assert n.shape == tuple(view.shape)
        assert _elem_strides(n) == view.stride()
        assert n.ctypes.data == view.data_ptr()
        assert n.tolist() == view.tolist()


def test_numpy_keeps_the_memory_alive():
    # The array's base is the storage: the tensor object may go (or get
    # another .data), the memory stays until the last array goes.
    t = ember.arange(5.0)
    alive = weakref.ref(t)
    blocks = _live_blocks()
    before = sys.getrefcount(t)
    n = t.numpy()
    assert sys.getrefcount(t) == before  # the array does not hold t
    assert n.base.data_ptr() == t.untyped_storage().data_ptr()
    del t
    gc.collect()
    assert alive() is None
    assert n.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert _live_blocks() == blocks
    del n
    assert _live_blocks() == blocks - 1


def test_numpy_of_empty_tensor():
    t = ember.zeros(0, 4)
    n = t.numpy()
    assert n.shape == (0, 4) and n.dtype == np.float32
    assert ember.from_numpy(n).shape == (0, 4)


def test_asarray_array_and_dunder_array():
    t = ember.arange(6.0)
    x = np.asarray(t)
    assert x.ctypes.data == t.data_ptr()
    y = np.array(t)  # copies
    assert y.ctypes.data != t.data_ptr()
    assert y.tolist() == t.tolist()
    y[0] = 100.0
    assert t[0].item() == 0.0
    z = t.__array__(dtype=np.int32)
    assert z.dtype == np.int32 and z.tolist() == [0, 1, 2, 3, 4, 5]
    assert t.__array__(np.float64).dtype == np.float64
    same = t.__array__()
    assert same.ctypes.data == t.data_ptr()
    copied = t.__array__(copy=True)
    assert copied.ctypes.data != t.data_ptr() and copied.tolist() == t.tolist()
    assert np.asarray(t, dtype=np.float64).tolist() == t.tolist()
    assert np.array(t, copy=False).ctypes.data == t.data_ptr()
    assert np.array(t, dtype=np.float32, copy=False).ctypes.data == t.data_ptr()
    assert np.array(t, dtype=np.float32, copy=True).ctypes.data != t.data_ptr()
    with pytest.raises(ValueError, match="avoid copy"):  # NumPy 2's copy=False
        np.array(t, dtype=np.int32, copy=False)
    with pytest.raises(ValueError, match="avoid copy"):
        t.__array__(np.float64, copy=False)
    assert (np.sin(np.asarray(t)) == np.sin(np.arange(6.0, dtype=np.float32))).all()


def test_numpy_requires_grad_refused_like_torch():
    t = ember.ones(3)
    t.requires_grad = True
    msg = ("Can't call numpy() on Tensor that requires grad. "
           "Use tensor.detach().numpy() instead.")
    with pytest.raises(RuntimeError) as info:
        t.numpy()
    assert str(info.value) == msg
    with pytest.raises(RuntimeError, match=r"requires grad"):
        np.asarray(t)
    assert t.detach().numpy().tolist() == [1.0, 1.0, 1.0]


def test_numpy_requires_grad_message_matches_torch():
    torch = pytest.importorskip("torch")
    t = ember.ones(2)
    t.requires_grad = True
    with pytest.raises(RuntimeError) as ours:
        t.numpy()
    with pytest.raises(RuntimeError) as theirs:
        torch.ones(2, requires_grad=True).numpy()
    assert str(ours.value) == str(theirs.value)


def test_numpy_force():
    t = ember.arange(3.0)
    t.requires_grad = True
    f = t.numpy(force=True)
    assert f.tolist() == [0.0, 1.0, 2.0]
    assert f.ctypes.data != t.data_ptr()  # force detaches and copies
    plain = ember.arange(3.0)
    assert plain.numpy(force=False).ctypes.data == plain.data_ptr()


def test_numpy_round_trip():
    a = np.random.default_rng(0).standard_normal((3, 5))
    t = ember.from_numpy(a)
    n = t.numpy()
    assert n.ctypes.data == a.ctypes.data
    t2 = ember.from_numpy(n)
    t2[0, 0] = -1.0
    assert a[0, 0] == -1.0


# ---- DLPack -----------------------------------------------------------------------------


def test_dlpack_capsule_and_device():
    t = ember.arange(6.0)
    cap = t.__dlpack__()
    assert type(cap).__name__ == "PyCapsule"
    assert "dltensor" in repr(cap)
    assert "versioned" in repr(t.__dlpack__(max_version=(1, 0)))
    assert t.__dlpack_device__() == (1, 0)
    del cap
    assert "dltensor" in repr(t.__dlpack__(dl_device=(1, 0), copy=False, stream=None))
    with pytest.raises(BufferError, match="dl_device"):
        t.__dlpack__(dl_device=(2, 0))  # CUDA: not what we hold
    with pytest.raises(BufferError, match="copy=True"):
        t.__dlpack__(copy=True)
    assert np.from_dlpack(t, device="cpu").tolist() == t.tolist()


def test_numpy_from_dlpack_zero_copy():
    t = ember.arange(12.0).view(3, 4).t()
    n = np.from_dlpack(t)
    assert n.ctypes.data == t.data_ptr()
    assert n.shape == (4, 3)
    assert _elem_strides(n) == t.stride()
    assert n.tolist() == t.tolist()
    n[0, 0] = 9.0
    assert t[0, 0].item() == 9.0


def test_numpy_from_dlpack_keeps_memory_after_tensor_dies():
    blocks = _live_blocks()
    t = ember.arange(4.0)
    alive = weakref.ref(t)
    n = np.from_dlpack(t)
    del t
    assert alive() is None  # the capsule holds the THTensor, not the object
    assert _live_blocks() == blocks + 1
    assert n.tolist() == [0.0, 1.0, 2.0, 3.0]
    del n
    assert _live_blocks() == blocks


@pytest.mark.parametrize("dtype", EMBER_DTYPES)
def test_dlpack_dtypes_round_trip(dtype):
    t = ember.ones(2, 3, dtype=dtype)
    n = np.from_dlpack(t)
    assert n.dtype == np.dtype(NP_DTYPES[EMBER_DTYPES.index(dtype)])
    back = ember.from_dlpack(n)
    assert back.dtype == dtype
    assert back.data_ptr() == t.data_ptr()
    assert back.tolist() == t.tolist()


def test_ember_from_dlpack_numpy_zero_copy_and_lifetime():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    sub = a[:, 1:3]
    alive = weakref.ref(sub)  # the exporter (its base is a's base, not a)
    t = ember.from_dlpack(sub)
    assert t.data_ptr() == sub.ctypes.data
    assert t.stride() == (4, 1)
    assert t.tolist() == [[1, 2], [5, 6], [9, 10]]
    a[0, 1] = 100
    assert t[0, 0].item() == 100
    t[2, 1] = -1
    assert a[2, 2] == -1
    del a, sub
    assert alive() is not None  # the capsule's deleter holds it
    del t
    assert alive() is None


def test_from_dlpack_round_trips_and_capsules():
    t = ember.arange(5.0)
    assert ember.from_dlpack(t).data_ptr() == t.data_ptr()
    assert ember.from_dlpack(np.from_dlpack(t)).data_ptr() == t.data_ptr()
    cap = t.__dlpack__()
    t2 = ember.from_dlpack(cap)
    assert t2.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    with pytest.raises(ValueError, match="not consumed"):
        ember.from_dlpack(cap)  # a capsule is consumed once
    vcap = t.__dlpack__(max_version=(1, 0))
    assert ember.from_dlpack(vcap).data_ptr() == t.data_ptr()
    del cap, vcap


def test_from_dlpack_0d_and_empty():
    s = ember.tensor(3.0)
    assert np.from_dlpack(s).shape == ()
    assert ember.from_dlpack(np.array(2.0)).shape == ()
    assert np.from_dlpack(ember.zeros(0)).shape == (0,)
    assert ember.from_dlpack(np.zeros((0, 2), dtype=np.float64)).shape == (0, 2)


def test_from_dlpack_rejects_non_exporters():
    with pytest.raises(TypeError, match="__dlpack__"):
        ember.from_dlpack([1, 2])
    for dtype in (np.complex64, np.complex128):
        a = np.zeros(2, dtype)
        before = sys.getrefcount(a)
        with pytest.raises(TypeError, match="unsupported DLPack dtype"):
            ember.from_dlpack(a)
        assert sys.getrefcount(a) == before  # the capsule was not leaked


def test_dlpack_requires_grad_refused():
    t = ember.ones(2)
    t.requires_grad = True
    with pytest.raises(BufferError, match="require gradient.*detach"):
        t.__dlpack__()
    assert np.from_dlpack(t.detach()).tolist() == [1.0, 1.0]


def test_dlpack_read_only_needs_versioned_export():
    ro = ember.from_numpy(np.frombuffer(b"\x01\x02\x03\x04", dtype=np.uint8))
    assert ro.untyped_storage().is_read_only
    with pytest.raises(BufferError, match="read-only.*max_version"):
        ro.__dlpack__()
    cap = ro.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(cap)
    del cap
    n = np.from_dlpack(ro)
    assert not n.flags.writeable
    assert n.tolist() == [1, 2, 3, 4]
    # and a read-only NumPy array comes in read-only
    a = np.arange(3.0)
    a.flags.writeable = False
    t = ember.from_dlpack(a)
    assert t.untyped_storage().is_read_only
    with pytest.raises(RuntimeError, match="read-only"):
        t.fill_(0.0)
    assert a.tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_unconsumed_capsule_frees_memory(max_version):
    blocks = _live_blocks()
    cap = ember.ones(100).__dlpack__(max_version=max_version)
    assert _live_blocks() == blocks + 1
    del cap
    assert _live_blocks() == blocks


def test_consumed_capsule_frees_with_consumer():
    blocks = _live_blocks()
    cap = ember.ones(100).__dlpack__()
    n = np.from_dlpack(_CapsuleHolder(cap))
    del cap
    assert _live_blocks() == blocks + 1
    del n
    assert _live_blocks() == blocks


class _CapsuleHolder:
    """Hands out one ready-made capsule (legacy protocol)."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, stream=None):
        capsule, self.capsule = self.capsule, None
        return capsule

    def __dlpack_device__(self):
        return (1, 0)


def test_torch_from_dlpack_shares_memory():
    torch = pytest.importorskip("torch")
    t = ember.arange(5.0)
    tt = torch.from_dlpack(t)
    assert tt.data_ptr() == t.data_ptr()
    assert tt.dtype == torch.float32
    tt[0] = 55.0
    assert t[0].item() == 55.0
    t[1] = -1.0
    assert tt[1].item() == -1.0
    blocks = _live_blocks()
    del t
    assert _live_blocks() == blocks  # torch keeps it
    del tt
    assert _live_blocks() == blocks - 1


def test_ember_from_dlpack_torch_shares_memory():
    torch = pytest.importorskip("torch")
    tor = torch.arange(12, dtype=torch.int64).view(3, 4)[:, 1:]
    e = ember.from_dlpack(tor)
    assert e.data_ptr() == tor.data_ptr()
    assert e.dtype == ember.int64
    assert e.stride() == tuple(tor.stride())
    assert e.tolist() == tor.tolist()
    tor += 1
    assert e.tolist() == tor.tolist()
    e[0, 0] = 99
    assert tor[0, 0].item() == 99


@pytest.mark.parametrize("dtype", EMBER_DTYPES)
def test_torch_dlpack_dtypes(dtype):
    torch = pytest.importorskip("torch")
    t = ember.ones(3, dtype=dtype)
    tt = torch.from_dlpack(t)
    assert str(tt.dtype).removeprefix("torch.") == str(dtype).removeprefix("ember.")
    assert ember.from_dlpack(tt).dtype == dtype


if given is not None:
    @given(
        hnp.arrays(dtype=st.sampled_from([np.int16, np.float32, np.float64, np.uint8]),
                   shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=5)),
        st.data())
    def test_from_numpy_any_positive_slicing(arr, data):
        index = tuple(
            slice(data.draw(st.integers(0, n)), None, data.draw(st.integers(1, 3)))
            for n in arr.shape)
        view = arr[index]
        t = ember.from_numpy(view)
        assert tuple(t.shape) == view.shape
        if view.size:
            # a size-1 dim's stride is arbitrary (NumPy may normalise it)
            assert [s for s, n in zip(t.stride(), view.shape) if n > 1] == [
                s for s, n in zip(_elem_strides(view), view.shape) if n > 1]
            assert t.data_ptr() == view.ctypes.data
        np.testing.assert_array_equal(t.numpy(), view)
        np.testing.assert_array_equal(np.from_dlpack(t), view)


def test_as_tensor_shares_what_it_can_as_pytorch():
    """torch.as_tensor: an ndarray of a matching dtype is shared, a tensor
    comes back itself, anything that needs converting or is not an array
    is copied.  Checked against PyTorch where it is installed."""
    a = np.arange(6.0).reshape(2, 3)
    shared = ember.as_tensor(a)
    a += 1  # in place: the tensor sees it
    assert shared.dtype == ember.float64 and shared.tolist() == a.tolist()
    converted = ember.as_tensor(a, dtype=ember.float32)
    a += 1
    assert converted.dtype == ember.float32 and converted.tolist() == (a - 1).tolist()
    t = ember.ones(2)
    assert ember.as_tensor(t) is t and ember.as_tensor(t, dtype=ember.float32) is t
    assert ember.as_tensor(t, device="cpu") is t
    assert ember.as_tensor(t, dtype=ember.int64).dtype == ember.int64
    assert ember.as_tensor([[1, 2], [3, 4]]).dtype == ember.int64
    assert ember.as_tensor(2.5).shape == () and ember.as_tensor((True,)).dtype == ember.bool
    with pytest.raises(ValueError, match="negative"):
        ember.as_tensor(np.arange(3.0)[::-1])
    try:
        import torch
    except ImportError:  # the oracle is optional (and off under the leak gates)
        return
    for data in (np.arange(6.0).reshape(2, 3), [[1, 2], [3, 4]], 2.5, (True, False)):
        ours, theirs = ember.as_tensor(data), torch.as_tensor(data)
        assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
        assert ours.tolist() == theirs.tolist()
    b = np.arange(3.0)
    assert ember.as_tensor(b).data_ptr() == torch.as_tensor(b).data_ptr() == b.ctypes.data
