"""Reference counting and object lifetime across the C layer.

The ownership chain (docs/architecture.md): THPVariable --1 ref--> THTensor --1 ref-->
THStorage --> bytes (allocator or external exporter).  These tests watch
each link from Python: sys.getrefcount on exporters, a Python allocator to
observe the free, weakrefs for objects that must die, and gc.collect() for
cycles through the GC-tracked fields (grad, grad_fn, hooks, __dict__).
PyTorch is the oracle for the attribute semantics and error messages.
"""

import ctypes
import gc
import io
import struct
import sys
import weakref

import numpy as np
import pytest

import ember
from ember import memory

DTYPES = [ember.bool, ember.uint8, ember.int8, ember.int16, ember.int32,
          ember.int64, ember.float32, ember.float64]


def _live_blocks():
    return memory.stats()["live_blocks"]


# ---- exporters' reference counts ----------------------------------------------------


def test_getrefcount_of_exported_array_before_during_after():
    a = np.arange(8.0)
    before = sys.getrefcount(a)
    t = ember.from_numpy(a)
    during = sys.getrefcount(a)
    assert during == before + 1
    views = [t[1:], t.view(2, 4), t.t() if t.dim() == 2 else t.unsqueeze(0)]
    assert sys.getrefcount(a) == during
    del t
    assert sys.getrefcount(a) == during  # the views still hold the storage
    del views
    assert sys.getrefcount(a) == before


def test_getrefcount_of_dlpack_exporter():
    a = np.arange(8.0)
    before = sys.getrefcount(a)
    t = ember.from_dlpack(a)
    assert sys.getrefcount(a) > before
    v = t[::2]
    del t
    assert sys.getrefcount(a) > before
    del v
    assert sys.getrefcount(a) == before


def test_getrefcount_of_tensor_exported_to_numpy():
    # Each array's base is a storage object (Note [Zero-copy lifetime]):
    # the arrays hold the memory, not the tensor.
    t = ember.arange(4.0)
    before = sys.getrefcount(t)
    arrays = [t.numpy(), t.numpy(), np.asarray(t)]
    assert sys.getrefcount(t) == before
    assert all(isinstance(a.base, ember.UntypedStorage) for a in arrays)
    bases = [a.base for a in arrays]
    base_counts = [sys.getrefcount(b) for b in bases]
    del arrays
    assert [sys.getrefcount(b) for b in bases] == [n - 1 for n in base_counts]


def test_getrefcount_of_storage_exported_as_buffer():
    s = ember.zeros(4).untyped_storage()
    before = sys.getrefcount(s)
    m = memoryview(s)
    assert sys.getrefcount(s) == before + 1  # view->obj
    m2 = m[1:]
    assert sys.getrefcount(s) == before + 1  # slices share the managed buffer
    m.release()
    m2.release()
    assert sys.getrefcount(s) == before


def test_getrefcount_of_tensor_methods_unchanged():
    t = ember.arange(6.0)
    before = sys.getrefcount(t)
    for _ in range(3):
        t.shape, t.dtype, t.stride(), t.size(), t.data_ptr(), t.tolist()
        t.grad, t.grad_fn, t.requires_grad, t.is_leaf, t._version
        t.untyped_storage(), t.view(2, 3), t[0], t.item() if t.numel() == 1 else None
        repr(t), len(t), list(iter(t)), t.requires_grad_(False)
    assert sys.getrefcount(t) == before


# ---- the storage chain is freed when the last holder dies ------------------------------


@pytest.mark.parametrize("last", ["tensor", "view", "storage", "numpy", "memoryview",
                                  "capsule", "np_from_dlpack", "from_dlpack"])
def test_storage_chain_freed_with_last_holder(last):
    counting = memory.CountingAllocator()
    with memory.use_allocator(counting):
        t = ember.ones(4, 4)
    holders = {
        "view": lambda: t[1:, ::2].t(),
        "storage": lambda: t.untyped_storage(),
        "numpy": lambda: t.numpy(),
        "memoryview": lambda: memoryview(t.untyped_storage()),
        "capsule": lambda: t.__dlpack__(),
        "np_from_dlpack": lambda: np.from_dlpack(t),
        "from_dlpack": lambda: ember.from_dlpack(t),
        "tensor": lambda: t,
    }
    keep = holders[last]()
    del t
    gc.collect()
    assert counting.live_blocks == 1 and counting.num_frees == 0
    if last == "memoryview":
        keep.release()
    del keep
    assert counting.live_blocks == 0 and counting.num_frees == 1


def test_chain_of_holders_freed_in_any_order():
    counting = memory.CountingAllocator()
    with memory.use_allocator(counting):
        t = ember.arange(12.0)
    chain = [t.view(3, 4), None, None, None]
    chain[1] = chain[0].numpy()
    chain[2] = ember.from_numpy(chain[1])  # a tensor on NumPy on ember
    chain[3] = np.from_dlpack(chain[2])
    del t
    for i in (2, 0, 3):
        chain[i] = None
        assert counting.live_blocks == 1
    chain.clear()
    assert counting.live_blocks == 0


def test_untyped_storage_keeps_memory_alive():
    blocks = _live_blocks()
    t = ember.arange(6, dtype=ember.int32)
    s = t.untyped_storage()
    address = t.data_ptr()
    del t
    assert _live_blocks() == blocks + 1
    assert s.data_ptr() == address
    assert s.nbytes() == 24
    assert list(s)[:8] == [0, 0, 0, 0, 1, 0, 0, 0]
    assert s.tolist()[20:] == [5, 0, 0, 0]
    del s
    assert _live_blocks() == blocks


def test_untyped_storage_is_shared_by_views():
    t = ember.zeros(2, 3)
    a, b = t.untyped_storage(), t[1].untyped_storage()
    assert a is not b
    assert a.data_ptr() == b.data_ptr() and a.nbytes() == b.nbytes() == 24
    assert t[1].storage_offset() == 3


# ---- GC cycles -------------------------------------------------------------------------


def _make_cycle(kind):
    a, b = ember.ones(3), ember.ones(3)
    if kind == "grad":
        a.grad = b
        b.grad = a
    elif kind == "self-grad_fn":  # (a.grad = a is refused, as in PyTorch)
        a.grad_fn = a
    elif kind == "grad_fn":
        a.grad_fn = [b]
        b.grad_fn = {"next": a}
    elif kind == "attribute":
        a.foo = a
    elif kind == "attributes-pair":
        a.other = b
        b.other = a
    elif kind == "hooks":
        a._backward_hooks = [a]
    elif kind == "meta":
        a._autograd_meta = {"self": a, "b": b}
        b._autograd_meta = (a,)
    elif kind == "mixed":
        a.grad = b
        b.grad_fn = [a]
    return a, b


CYCLES = ["grad", "self-grad_fn", "grad_fn", "attribute", "attributes-pair", "hooks",
          "meta", "mixed"]


@pytest.mark.parametrize("kind", CYCLES)
def test_cycles_are_collected(kind):
    counting = memory.CountingAllocator()
    with memory.use_allocator(counting):
        a, b = _make_cycle(kind)
    wa, wb = weakref.ref(a), weakref.ref(b)
    del a, b
    gc.collect()
    assert wa() is None and wb() is None
    assert counting.live_blocks == 0  # and their memory went back


def test_cycle_is_uncollected_without_gc():
    # Proves the cycle is real (so the test above can fail): only the
    # collector frees it.
    gc.disable()
    try:
        a, _ = _make_cycle("grad")
        wa = weakref.ref(a)
        del a, _
        assert wa() is not None
    finally:
        gc.enable()
    gc.collect()
    assert wa() is None


def test_gc_sees_tensor_referents():
    a, b = ember.ones(2), ember.ones(2)
    hooks, meta, fn = [1], {"k": 2}, object()
    a.grad = b
    a.grad_fn = fn
    a._backward_hooks = hooks
    a._autograd_meta = meta
    refs = gc.get_referents(a)
    for obj in (b, fn, hooks, meta):
        assert any(r is obj for r in refs)
    assert gc.is_tracked(a)


def test_fields_cleared_on_dealloc():
    fn, hooks = object(), []
    fn_ref = sys.getrefcount(fn)
    hooks_ref = sys.getrefcount(hooks)
    t = ember.ones(2)
    t.grad_fn = fn
    t._backward_hooks = hooks
    assert sys.getrefcount(fn) == fn_ref + 1
    del t
    assert sys.getrefcount(fn) == fn_ref
    assert sys.getrefcount(hooks) == hooks_ref


@pytest.mark.parametrize("field", ["grad", "grad_fn", "_backward_hooks", "_autograd_meta"])
def test_field_getters_return_new_references(field):
    # A getter hands out a new reference: reading the field leaves its
    # value's count alone (exercise 2 takes the Py_INCREF away).
    t = ember.ones(2)
    value = ember.zeros(2) if field == "grad" else object()
    setattr(t, field, value)
    before = sys.getrefcount(value)
    for _ in range(3):
        assert getattr(t, field) is value
    assert sys.getrefcount(value) == before


def test_field_setters_release_old_values():
    old, new = object(), object()
    t = ember.ones(1)
    before = sys.getrefcount(old)
    t.grad_fn = old
    t.grad_fn = new
    assert sys.getrefcount(old) == before
    t.grad_fn = None
    assert t.grad_fn is None
    g = ember.ones(1)
    g_before = sys.getrefcount(g)
    t.grad = g
    assert sys.getrefcount(g) == g_before + 1
    del t.grad
    assert t.grad is None and sys.getrefcount(g) == g_before


# ---- the buffer protocol of UntypedStorage ------------------------------------------------


def test_storage_buffer_shares_bytes():
    t = ember.zeros(4, dtype=ember.uint8)
    s = t.untyped_storage()
    m = memoryview(s)
    assert (m.format, m.itemsize, m.ndim, m.shape, m.strides) == ("B", 1, 1, (4,), (1,))
    assert not m.readonly and m.nbytes == 4 and m.c_contiguous
    m[0] = 7
    t[3] = 9
    assert t.tolist() == [7, 0, 0, 9]
    assert bytes(m) == b"\x07\x00\x00\x09"
    assert np.frombuffer(s, dtype=np.uint8).ctypes.data == t.data_ptr()
    f = ember.arange(3, dtype=ember.float32).untyped_storage()
    assert memoryview(f).cast("f").tolist() == [0.0, 1.0, 2.0]
    m.release()


def test_storage_buffer_keeps_storage_alive():
    blocks = _live_blocks()
    t = ember.full((4,), 3, dtype=ember.int8)
    m = memoryview(t.untyped_storage())
    del t
    assert _live_blocks() == blocks + 1
    assert m.tolist() == [3, 3, 3, 3]
    m.release()
    assert _live_blocks() == blocks


def test_storage_buffer_writable_consumers():
    s = ember.zeros(4, dtype=ember.uint8).untyped_storage()
    assert io.BytesIO(b"ab").readinto(s) == 2
    struct.pack_into("B", s, 3, 200)
    assert s.tolist() == [97, 98, 0, 200]


def test_read_only_storage_refuses_writable_buffers():
    data = b"abcd"
    s = ember.from_numpy(data).untyped_storage()
    assert s.is_read_only
    m = memoryview(s)
    assert m.readonly
    with pytest.raises(TypeError):
        m[0] = 1
    with pytest.raises((BufferError, TypeError)):
        io.BytesIO(b"xy").readinto(s)
    with pytest.raises((BufferError, TypeError)):
        struct.pack_into("B", s, 0, 1)
    a = np.frombuffer(s, dtype=np.uint8)
    assert not a.flags.writeable
    assert data == b"abcd"
    m.release()


class _PyBuffer(ctypes.Structure):
    """The leading fields of Py_buffer, padded past its end."""
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p),
                ("len", ctypes.c_ssize_t), ("itemsize", ctypes.c_ssize_t),
                ("readonly", ctypes.c_int), ("rest", ctypes.c_char * 128)]


def _get_buffer(obj, flags):
    """PyObject_GetBuffer(obj, view, flags) called directly, as C code
    would; returns (readonly, len) after releasing the view again."""
    get = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p, ctypes.c_int)(
        ("PyObject_GetBuffer", ctypes.pythonapi))
    release = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)(("PyBuffer_Release", ctypes.pythonapi))
    view = _PyBuffer()
    get(obj, ctypes.addressof(view), flags)
    result = (view.readonly, view.len)
    release(ctypes.addressof(view))
    return result


PyBUF_SIMPLE, PyBUF_WRITABLE = 0, 1


def test_storage_getbuffer_writable_request():
    ro = ember.from_numpy(b"abcd").untyped_storage()
    before = sys.getrefcount(ro)
    with pytest.raises(BufferError, match="read-only"):
        _get_buffer(ro, PyBUF_WRITABLE)
    assert sys.getrefcount(ro) == before  # no reference taken on failure
    assert _get_buffer(ro, PyBUF_SIMPLE) == (1, 4)
    rw = ember.zeros(2).untyped_storage()
    assert _get_buffer(rw, PyBUF_WRITABLE) == (0, 8)
    assert sys.getrefcount(ro) == before and sys.getrefcount(rw) == 2


def test_storage_buffer_read_only_flag_from_writable_source():
    s = ember.from_numpy(bytearray(b"ab")).untyped_storage()
    assert not s.is_read_only and not memoryview(s).readonly


def test_empty_storage_buffer():
    s = ember.empty(0).untyped_storage()
    m = memoryview(s)
    assert m.nbytes == 0 and bytes(m) == b"" and len(s) == 0
    m.release()


def test_storage_basics():
    s = ember.arange(3, dtype=ember.int16).untyped_storage()
    assert len(s) == s.nbytes() == s.size() == 6
    assert s[2] == 1 and s[-2] == 2
    with pytest.raises(IndexError):
        s[6]
    assert s.device == ember.device("cpu")
    assert "6 bytes" in repr(s)
    assert "read-only" in repr(ember.from_numpy(b"x").untyped_storage())


# ---- Tensor attributes, as in PyTorch ------------------------------------------------


def test_requires_grad_is_leaf_grad_defaults():
    t = ember.ones(3)
    assert t.requires_grad is False and t.is_leaf is True
    assert t.grad is None and t.grad_fn is None
    t.requires_grad = True
    assert t.requires_grad is True and t.is_leaf is True
    t.requires_grad = False
    assert t.requires_grad is False
    assert t.requires_grad_() is t and t.requires_grad
    assert t.requires_grad_(False) is t and not t.requires_grad


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d not in (ember.float32, ember.float64)])
def test_requires_grad_on_non_float_refused(dtype):
    t = ember.zeros(2, dtype=dtype)
    with pytest.raises(RuntimeError, match="^only Tensors of floating point dtype can require gradients$"):
        t.requires_grad = True
    with pytest.raises(RuntimeError, match="only Tensors of floating point dtype can require gradients"):
        t.requires_grad_()
    assert t.requires_grad is False
    t.requires_grad = False  # always allowed


def test_requires_grad_must_be_bool():
    t = ember.ones(2)
    for value in (1, "yes", None):
        with pytest.raises(RuntimeError, match="requires_grad must be a bool"):
            t.requires_grad = value
    with pytest.raises(RuntimeError, match="requires_grad must be a bool"):
        del t.requires_grad
    with pytest.raises(TypeError, match="must be bool, not int"):
        t.requires_grad_(1)
    assert t.requires_grad is False


def test_requires_grad_non_leaf():
    t = ember.ones(2)
    t.grad_fn = object()  # what autograd records on a result
    assert t.is_leaf is False
    with pytest.raises(RuntimeError, match=r"leaf variables\. If you want.*detach\(\)"):
        t.requires_grad = False
    with pytest.raises(RuntimeError, match=r"^you can only change requires_grad flags of leaf variables\.$"):
        t.requires_grad = True
    with pytest.raises(RuntimeError, match="leaf variables"):
        t.requires_grad_(False)
    t.requires_grad_(True)  # allowed on a non-leaf, as in PyTorch
    assert t.requires_grad
    t.grad_fn = None
    assert t.is_leaf is True


def test_grad_setter_accepts_matching_tensor():
    t = ember.ones(2, 3)
    g = ember.zeros(2, 3)
    t.grad = g
    assert t.grad is g
    t.grad = None
    assert t.grad is None
    i = ember.ones(3, dtype=ember.int64)
    i.grad = ember.ones(3, dtype=ember.int64)  # allowed, as in PyTorch
    assert i.grad.dtype == ember.int64


def test_grad_setter_type_check():
    t = ember.ones(3)
    for bad, name in ((3, "int"), ([1.0, 2.0, 3.0], "list"), (np.ones(3, dtype=np.float64), "numpy.ndarray")):
        with pytest.raises(TypeError) as info:
            t.grad = bad
        assert str(info.value) == (
            "assigned grad expected to be a Tensor or None but got grad of type " + name)
    assert t.grad is None


@pytest.mark.parametrize("tensor_dtype, grad_dtype, grad_name, tensor_name", [
    (ember.float32, ember.float64, "double", "Float"),
    (ember.float32, ember.int64, "long int", "Float"),
    (ember.float64, ember.float32, "float", "Double"),
    (ember.int32, ember.int16, "short int", "Int"),
    (ember.float32, ember.bool, "bool", "Float"),
    (ember.uint8, ember.int8, "signed char", "Byte"),
    (ember.int8, ember.uint8, "unsigned char", "Char"),
    (ember.int64, ember.int32, "int", "Long"),
])
def test_grad_setter_dtype_check(tensor_dtype, grad_dtype, grad_name, tensor_name):
    t = ember.ones(3, dtype=tensor_dtype)
    with pytest.raises(RuntimeError) as info:
        t.grad = ember.ones(3, dtype=grad_dtype)
    assert str(info.value).startswith(
        f"attempting to assign a gradient with dtype '{grad_name}' to a tensor "
        f"with grad_dtype '{tensor_name}'. The gradient must match the tensor's grad_dtype")
    assert t.grad is None


@pytest.mark.parametrize("tensor_shape, grad_shape", [
    ((3,), (4,)), ((3,), (3, 1)), ((), (1,)), ((2, 3), (3, 2)), ((0,), ())])
def test_grad_setter_shape_check(tensor_shape, grad_shape):
    t = ember.ones(tensor_shape)
    with pytest.raises(RuntimeError) as info:
        t.grad = ember.ones(grad_shape)
    assert str(info.value) == (
        f"attempting to assign a gradient of size '{list(grad_shape)}' to a tensor of "
        f"size '{list(tensor_shape)}'. Please ensure that the gradient and the tensor "
        "are the same size")
    assert t.grad is None


def test_grad_setter_messages_match_torch():
    torch = pytest.importorskip("torch")
    cases = [
        (lambda m: m.ones(3), lambda m: 3),
        (lambda m: m.ones(3), lambda m: m.ones(4)),
        (lambda m: m.ones(2, 3), lambda m: m.ones(3, 2)),
        (lambda m: m.ones(3), lambda m: m.ones(3, dtype=m.float64)),
        (lambda m: m.ones(3, dtype=m.int32), lambda m: m.ones(3, dtype=m.int16)),
    ]
    for make_t, make_g in cases:
        errors = []
        for m in (ember, torch):
            t = make_t(m)
            with pytest.raises((TypeError, RuntimeError)) as info:
                t.grad = make_g(m)
            errors.append((info.type, str(info.value)))
        (ours_type, ours), (theirs_type, theirs) = errors
        assert ours_type is theirs_type
        assert theirs.startswith(ours)  # PyTorch adds advice on grad_dtype


def test_is_leaf_and_version_read_only():
    t = ember.ones(2)
    with pytest.raises(AttributeError):
        t.is_leaf = False
    with pytest.raises(AttributeError):
        t._version = 5


def test_version_counter_like_torch():
    t = ember.zeros(4)
    v, d, data = t[1:], t.detach(), t.data
    assert t._version == 0
    v.fill_(1.0)  # views share the counter
    assert t._version == v._version == d._version == 1
    assert data._version == 0  # .data has its own
    d.zero_()
    assert t._version == 2
    data.zero_()
    assert t._version == 2 and data._version == 1
    t[0] = 3.0
    assert t._version == 3
    t.copy_(ember.ones(4))
    assert t._version == 4
    t.clone().fill_(2.0)
    assert t._version == 4


def test_data_attribute():
    t = ember.arange(4.0)
    t.requires_grad = True
    d = t.data
    assert d.data_ptr() == t.data_ptr()
    assert d.requires_grad is False and d.grad_fn is None
    d[0] = 10.0
    assert t[0].item() == 10.0
    t.data = ember.zeros(5)
    assert t.shape == (5,) and t.requires_grad
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got int"):
        t.data = 3
    with pytest.raises(RuntimeError, match="Deleting tensor data is not allowed"):
        del t.data
    assert t.shape == (5,)


def test_data_setter_frees_old_memory():
    counting = memory.CountingAllocator()
    with memory.use_allocator(counting):
        t = ember.ones(10)
        t.data = ember.ones(3)
    assert counting.live_blocks == 1 and counting.num_frees == 1
    del t
    assert counting.live_blocks == 0


def test_detach_shares_memory_without_history():
    t = ember.ones(3)
    t.requires_grad = True
    t.grad_fn = None
    d = t.detach()
    assert d.requires_grad is False and d.is_leaf and d.grad is None
    assert d.data_ptr() == t.data_ptr()
