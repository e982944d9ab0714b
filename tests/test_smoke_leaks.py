"""A small, fast smoke subset that calls every C entry point of ember._C once
or twice, success and error paths alike.

`make leak-valgrind` runs this file under valgrind memcheck (about 50x
slower), so it stays light: no hypothesis, no torch, small tensors, few
gc.collect() calls.  The thorough tests are in test_numpy_interop.py,
test_memory.py and test_refcount.py.

NumPy factories always get an explicit dtype here: the debug-ABI NumPy of
the refcount gate drifts sys.gettotalrefcount() by one per np.zeros/ones/
empty call without one (NumPy's, not ember's), which reads as a leak.
"""

import array
import gc
import pickle
import weakref

import numpy as np
import pytest

import ember
from ember import memory


def test_creation():
    assert ember.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert ember.tensor(2.5, dtype=ember.float64).item() == 2.5
    assert ember.tensor([True, False]).dtype == ember.bool
    assert ember.tensor(np.arange(3)).tolist() == [0, 1, 2]
    assert ember.empty(2, 3).shape == (2, 3)
    assert ember.zeros(3, dtype=ember.int16).tolist() == [0, 0, 0]
    assert ember.ones((2,)).tolist() == [1.0, 1.0]
    assert ember.full((2,), 7, dtype=ember.int64).tolist() == [7, 7]
    assert ember.arange(1, 7, 2).tolist() == [1, 3, 5]
    assert ember.linspace(0, 1, 3).tolist() == [0.0, 0.5, 1.0]
    assert ember.eye(2).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    base = ember.ones(2, 2, dtype=ember.int32)
    for like in (ember.empty_like, ember.zeros_like, ember.ones_like):
        assert like(base).dtype == ember.int32
    assert ember.full_like(base, 3).tolist() == [[3, 3], [3, 3]]
    ember.manual_seed(0)
    assert ember.initial_seed() == 0
    r = ember.rand(4)
    assert 0.0 <= min(r.tolist()) and max(r.tolist()) < 1.0
    assert ember.randn(3).shape == (3,)
    assert ember.rand_like(r).shape == ember.randn_like(r).shape == (4,)
    assert ember.randint(0, 5, (6,)).dtype == ember.int64
    old = ember.get_default_dtype()
    ember.set_default_dtype(ember.float64)
    try:
        assert ember.zeros(1).dtype == ember.float64
    finally:
        ember.set_default_dtype(old)
    assert ember.Tensor(2, 3).shape == (2, 3)
    assert ember.Tensor([1, 2]).dtype == ember.float32


def test_creation_errors():
    with pytest.raises(TypeError):
        ember.zeros("x")
    with pytest.raises((ValueError, RuntimeError)):
        ember.empty(-1)
    with pytest.raises((TypeError, ValueError)):
        ember.tensor([[1, 2], [3]])
    with pytest.raises(TypeError):
        ember.tensor(object())
    with pytest.raises(TypeError):
        ember.ones(2, dtype="float32x")
    with pytest.raises(TypeError):
        ember.Tensor(2, dtype=ember.int32)


def test_views_and_copies():
    t = ember.arange(12.0)
    assert t.view(3, 4).stride() == (4, 1)
    assert t.view_as(ember.empty(4, 3)).shape == (4, 3)
    m = t.reshape(3, 4)
    assert m.reshape_as(ember.empty(2, 6)).shape == (2, 6)
    assert m.flatten().shape == (12,)
    assert m.transpose(0, 1).stride() == (1, 4)
    assert m.t().shape == m.T.shape == (4, 3)
    assert m.permute(1, 0).shape == (4, 3)
    assert m.unsqueeze(0).squeeze().shape == (3, 4)
    assert m[0:1].squeeze(0).shape == (4,)
    assert m[:, :1].expand(3, 5).stride() == (4, 0)
    assert ember.ones(1, 4).expand_as(m).shape == (3, 4)
    assert m.narrow(1, 1, 2).tolist()[0] == [1.0, 2.0]
    assert m.select(0, 2).tolist() == [8.0, 9.0, 10.0, 11.0]
    assert t.unfold(0, 4, 4).shape == (3, 4)
    assert t.as_strided((2, 2), (1, 2), 1).tolist() == [[1.0, 3.0], [2.0, 4.0]]
    c = m.t().contiguous()
    assert c.is_contiguous() and c.data_ptr() != t.data_ptr()
    k = m.clone()
    k.fill_(1.0)
    assert m[0, 0].item() == 0.0
    k.zero_()
    k.copy_(m)
    assert k.tolist() == m.tolist()
    d = m.detach()
    d.detach_()
    assert d.data_ptr() == t.data_ptr()
    assert m.to(ember.int32).dtype == ember.int32
    assert m.to("cpu") is m or m.to("cpu").data_ptr() == m.data_ptr()
    for cast, dtype in ((t.bool, ember.bool), (t.byte, ember.uint8), (t.char, ember.int8),
                        (t.short, ember.int16), (t.int, ember.int32), (t.long, ember.int64),
                        (t.float, ember.float32), (t.double, ember.float64)):
        assert cast().dtype == dtype
    assert m.storage_offset() == 0 and m[1].storage_offset() == 4
    assert (m.dim(), m.ndimension(), m.numel(), m.nelement()) == (2, 2, 12, 12)
    assert (m.element_size(), m.itemsize, m.nbytes, m.ndim) == (4, 4, 48, 2)
    assert m.size(1) == 4 and m.size() == (3, 4) and m.stride(-1) == 1
    assert m.is_floating_point() and not m.is_cuda
    assert m.device == ember.device("cpu")


def test_view_errors():
    m = ember.zeros(2, 3)
    with pytest.raises(RuntimeError):
        m.t().view(6)
    with pytest.raises(IndexError):
        m.transpose(0, 5)
    with pytest.raises(RuntimeError):
        m.expand(3, 3)
    with pytest.raises(RuntimeError):
        m.copy_(ember.zeros(4))
    with pytest.raises(IndexError):
        m.size(2)
    with pytest.raises(TypeError):
        m.fill_("a")


def test_indexing():
    m = ember.arange(12).view(3, 4)
    assert m[1].tolist() == [4, 5, 6, 7]
    assert m[-1, 1::2].tolist() == [9, 11]
    assert m[..., 0].tolist() == [0, 4, 8]
    assert m[None, 0].shape == (1, 4)
    assert m[ember.tensor(2)].tolist() == [8, 9, 10, 11]
    m[0] = 100
    m[1, 1:3] = ember.tensor([-1, -2])
    assert m[0].tolist() == [100] * 4 and m[1].tolist() == [4, -1, -2, 7]
    with pytest.raises(IndexError):
        m[3]
    assert m[[0, 2]].tolist() == [[100] * 4, [8, 9, 10, 11]]  # advanced: a copy
    with pytest.raises(IndexError):
        m[[0, 5]]
    with pytest.raises(ValueError):
        m[::-1]
    with pytest.raises(IndexError):
        m[0, 0, 0]
    with pytest.raises((TypeError, ValueError, RuntimeError)):
        del m[0]


def test_python_protocols():
    s = ember.tensor(3.0)
    assert float(s) == 3.0 and int(s) == 3 and bool(s)
    assert [1, 2, 3, 4][ember.tensor(1)] == 2
    assert f"{s:.1f}" == "3.0"
    v = ember.arange(3)
    assert len(v) == 3 and [x.item() for x in v] == [0, 1, 2]
    assert hash(v) == hash(v)
    with pytest.raises(RuntimeError):
        bool(v)
    with pytest.raises(TypeError):
        len(s)
    with pytest.raises(TypeError):
        iter(s)
    with pytest.raises(ValueError):
        float(v)
    with pytest.raises(TypeError):
        [1][ember.tensor(0.0)]
    assert "tensor(" in repr(v) and "tensor(" in str(s)
    assert pickle.loads(pickle.dumps(v)).tolist() == [0, 1, 2]
    assert ember.Size([2, 3]) == (2, 3) and ember.Size([2, 3]).numel() == 6
    assert str(ember.float32) == "ember.float32"
    assert ember.dtype is type(ember.int8)


def test_attributes():
    t = ember.ones(2)
    t.requires_grad = True
    g = ember.zeros(2)
    t.grad = g
    assert t.grad is g and t.is_leaf and t.grad_fn is None
    with pytest.raises(RuntimeError):
        t.grad = ember.zeros(3)
    with pytest.raises(RuntimeError):
        t.grad = ember.zeros(2, dtype=ember.float64)
    with pytest.raises(TypeError):
        t.grad = 1
    with pytest.raises(RuntimeError):
        t.numpy()
    with pytest.raises(BufferError):
        t.__dlpack__()
    assert t.numpy(force=True).tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError):
        ember.zeros(1, dtype=ember.int32).requires_grad = True
    t._backward_hooks = [t]
    t._autograd_meta = {"t": t}
    t.grad_fn = [t]
    assert not t.is_leaf
    assert t._version == 0 and t.data.data_ptr() == t.data_ptr()
    t.data = ember.zeros(3)
    assert t.shape == (3,)
    w = weakref.ref(t)
    del t, g
    gc.collect()
    assert w() is None


def test_from_numpy_and_numpy():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = ember.from_numpy(a)
    a += 1.0
    assert t[0, 0].item() == 1.0
    assert ember.from_numpy(a.T).stride() == (1, 3)
    n = t.numpy()
    assert isinstance(n.base, ember.UntypedStorage)
    assert n.ctypes.data == a.ctypes.data
    assert np.asarray(t).ctypes.data == a.ctypes.data
    assert np.array(t).ctypes.data != a.ctypes.data
    assert t.__array__(np.int64).dtype == np.int64
    assert ember.from_numpy(array.array("d", [1.0])).tolist() == [1.0]
    assert ember.from_numpy(memoryview(bytearray(4))[::2]).shape == (2,)
    ro = ember.from_numpy(b"ab")
    with pytest.raises(RuntimeError):
        ro.fill_(0)
    assert not ro.numpy().flags.writeable
    for bad in (a[::-1], np.zeros(2, ">f4"), np.zeros(2, np.complex64), np.zeros(2, "U2")):
        with pytest.raises((TypeError, ValueError)):
            ember.from_numpy(bad)
    rec = np.zeros(2, dtype=[("a", "i1"), ("b", "f4")])
    with pytest.raises(ValueError):
        ember.from_numpy(rec["b"])
    with pytest.raises(TypeError):
        ember.from_numpy(1)
    assert ember.from_numpy(np.array(1.5)).item() == 1.5
    assert ember.from_numpy(np.zeros((0, 2), dtype=np.float64)).shape == (0, 2)


def test_dlpack_both_ways():
    t = ember.arange(6.0).view(2, 3)
    assert t.__dlpack_device__() == (1, 0)
    n = np.from_dlpack(t)
    assert n.ctypes.data == t.data_ptr()
    back = ember.from_dlpack(n)
    assert back.data_ptr() == t.data_ptr()
    assert ember.from_dlpack(t.t()).stride() == (1, 3)
    cap = t.__dlpack__()
    assert ember.from_dlpack(cap).tolist() == t.tolist()
    with pytest.raises(ValueError):
        ember.from_dlpack(cap)
    unused = t.__dlpack__(max_version=(1, 0))
    del unused
    unused = t.__dlpack__()
    del unused
    ro = ember.from_numpy(b"abcd")
    with pytest.raises(BufferError):
        ro.__dlpack__()
    assert not np.from_dlpack(ro).flags.writeable
    with pytest.raises(TypeError):
        ember.from_dlpack(np.zeros(2, np.complex64))
    with pytest.raises(TypeError):
        ember.from_dlpack(object())
    with pytest.raises(BufferError):
        t.__dlpack__(copy=True)


def test_storage_buffer():
    t = ember.zeros(4, dtype=ember.uint8)
    s = t.untyped_storage()
    m = memoryview(s)
    m[1] = 5
    assert t.tolist() == [0, 5, 0, 0]
    assert (len(s), s.nbytes(), s.size(), s[1]) == (4, 4, 4, 5)
    assert s.tolist() == [0, 5, 0, 0] and s.data_ptr() == t.data_ptr()
    assert s.device == ember.device("cpu") and not s.is_read_only
    assert "4 bytes" in repr(s)
    with pytest.raises(IndexError):
        s[4]
    del t, s
    assert m.tolist() == [0, 5, 0, 0]
    m.release()
    ro = ember.from_numpy(b"xy").untyped_storage()
    assert memoryview(ro).readonly
    with pytest.raises((BufferError, TypeError)):
        memoryview(ro).cast("B")[0] = 1
    with pytest.raises(TypeError):
        ember.UntypedStorage()


def test_python_allocator():
    before = memory.stats()
    assert set(before) == {"allocated_bytes", "peak_allocated_bytes", "live_blocks",
                           "num_allocs", "num_frees", "cached_bytes", "cached_blocks",
                           "cache_hits", "cache_misses"}
    cpu = memory.get_allocator()
    assert isinstance(cpu, memory.CAllocator) and cpu.name == "cpu"
    address = cpu.raw_malloc(8)
    cpu.raw_free(address, 8)
    assert set(cpu.stats()) == set(before)
    counting = memory.CountingAllocator()
    with memory.use_allocator(counting):
        assert memory.get_allocator() is counting
        t = ember.ones(4)
        with memory.use_allocator(memory.PoisoningAllocator()):
            p = ember.empty(2, dtype=ember.uint8)
    assert p.tolist() == [0xAA, 0xAA]
    assert counting.live_blocks == 2  # the poisoning one delegates to it
    del t, p
    assert counting.live_blocks == 0
    memory.reset_peak_stats()
    after = memory.stats()
    assert after["live_blocks"] == before["live_blocks"]
    assert after["allocated_bytes"] == before["allocated_bytes"]


def test_allocator_error_paths():
    class Raises:
        def malloc(self, nbytes):
            raise KeyError("nope")

        def free(self, address):
            pass

    class Zero(Raises):
        def malloc(self, nbytes):
            return 0

    class BadFree(memory.CountingAllocator):
        def free(self, address):
            super().free(address)
            raise ValueError("free failed")

    with memory.use_allocator(Raises()):
        with pytest.raises(KeyError):
            ember.ones(3)
    with memory.use_allocator(Zero()):
        with pytest.raises(MemoryError):
            ember.ones(3)
    with pytest.raises(TypeError):
        memory.set_allocator(object())
    seen = []
    import sys
    old_hook = sys.unraisablehook
    sys.unraisablehook = lambda u: seen.append(u.exc_type)
    try:
        with memory.use_allocator(BadFree()):
            t = ember.ones(2)
        del t
    finally:
        sys.unraisablehook = old_hook
    assert seen == [ValueError]
    assert isinstance(memory.get_allocator(), memory.CAllocator)



def test_issue11_lifetimes_smoke():
    """A few of tests/test_issue11_lifetimes.py, so valgrind sees them."""
    t = ember.arange(4.0)
    arr = t.numpy()
    capsule = t.__dlpack__()
    t.data = ember.zeros(1)  # the exports keep the old memory alive
    assert arr.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert ember.from_dlpack(capsule).tolist() == [0.0, 1.0, 2.0, 3.0]
    x = ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError):
        x.grad = x
    with pytest.raises(RuntimeError):
        x.data = ember.zeros(2, dtype=ember.int64)
    it = iter(ember.arange(2.0))
    cpu = memory.get_allocator()
    cpu.raw_free(0)
    address = cpu.raw_malloc(16)
    cpu.raw_free(address)
    with pytest.raises(ValueError):
        cpu.raw_free(address)

    class FailsOnce(memory.CountingAllocator):
        calls = 0

        def malloc(self, nbytes):
            self.calls += 1
            if self.calls == 1:
                raise MemoryError("first")
            return super().malloc(nbytes)

        def __repr__(self):
            return "FailsOnce()"

    failing = FailsOnce()
    with memory.use_allocator(failing):
        with pytest.raises(MemoryError, match="first"):
            ember.tensor([2.0, 1.0]).sort()

    class Misaligned(memory.CountingAllocator):
        def malloc(self, nbytes):
            return super().malloc(nbytes) + 8

        def free(self, address):
            super().free(address - 8)

        def __repr__(self):
            return "Misaligned()"

    with memory.use_allocator(Misaligned()):
        with pytest.raises(ValueError):
            ember.ones(3)
    del it
    assert failing.live_blocks == 0


# ---- operators: each family once, with its error paths -----------------------


def test_pointwise_operators():
    a = ember.arange(6, dtype=ember.float32).view(2, 3)
    b = ember.tensor([1.0, 2.0, 4.0])
    assert (a + b).tolist() == [[1, 3, 6], [4, 6, 9]]
    assert (2 - a)[0].tolist() == [2, 1, 0] and (a * 2.0 / b).shape == (2, 3)
    assert ember.add(a, b, alpha=2, out=ember.empty(2, 3)).shape == (2, 3)
    assert (a > 2).dtype == ember.bool and (~(a > 2)).any().item()
    assert ember.where(a > 2, a, -a).sum().item() == 9.0
    assert a.clamp(1, 4).max().item() == 4.0
    i = ember.arange(4)
    i += 1
    assert (i // 2).tolist() == [0, 1, 1, 2] and i._version == 1
    with pytest.raises(RuntimeError, match="must match the size"):
        ember.ones(2, 3) + ember.ones(4)
    with pytest.raises(RuntimeError, match="can't be cast"):
        i += 0.5
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        i // 0
    assert (a.__add__("x")) is NotImplemented


def test_unary_and_reductions():
    x = ember.linspace(-2, 2, 5)
    assert ember.exp(x).shape == (5,) and x.sigmoid().min().item() > 0
    assert ember.relu(x).tolist() == [0.0, 0.0, 0.0, 1.0, 2.0]
    assert ember.isnan(x.log()).sum().item() == 2
    y = x.view(1, 5).expand(2, 5)
    assert y.sum(dim=1).tolist() == [0.0, 0.0] and y.mean().item() == 0.0
    values, indices = y.max(dim=1)
    assert values.tolist() == [2.0, 2.0] and indices.tolist() == [4, 4]
    assert (ember.softmax(y, dim=1).sum(dim=1) - 1).abs().max().item() < 1e-6
    assert x.cumsum(0)[-1].item() == 0.0 and x.var().item() > 0
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.sum(dim=3)
    with pytest.raises(RuntimeError):
        ember.exp(x, out=ember.empty(2))


def test_linalg_indexing_and_shape():
    m = ember.arange(6, dtype=ember.float32).view(2, 3)
    assert (m @ m.t()).tolist() == [[5.0, 14.0], [14.0, 50.0]]
    assert ember.addmm(ember.ones(2, 2), m, m.t(), beta=0).shape == (2, 2)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        m @ m
    assert m[[1, 0], [0, 2]].tolist() == [3.0, 2.0] and m[m > 3].tolist() == [4.0, 5.0]
    m[m > 4] = -1.0
    assert m.gather(1, ember.tensor([[0], [1]])).tolist() == [[0.0], [4.0]]
    assert ember.nonzero(m < 0).tolist() == [[1, 2]]
    with pytest.raises(IndexError, match="out of bounds"):
        m[[0, 5]]
    assert ember.cat([m, m]).shape == (4, 3) and ember.stack([m, m], 1).shape == (2, 2, 3)
    assert [p.shape for p in m.split(2, dim=1)] == [(2, 2), (2, 1)]
    assert m.sort(dim=1).indices[1].tolist() == [2, 0, 1]
    assert ember.unique(ember.tensor([3, 1, 3])).tolist() == [1, 3]
    assert m.flip(0).roll(1, 1).tril().shape == (2, 3)
    with pytest.raises(RuntimeError, match="Sizes of tensors must match"):
        ember.cat([m, ember.ones(2, 2)])


def test_autograd_boundary():
    # The C side of autograd (c/python/Autograd.c): THPOp dispatch for
    # functions, methods and slots, _edges/_versions/_set_history, weakrefs,
    # _make_subclass, and its error paths.
    x = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = ember.tensor([0.5, -1.0, 2.0], requires_grad=True)
    y = (ember.mul(x, w) + x.exp() - 2 / w)[1:].sum()
    y.backward()
    assert x.grad.shape == (3,) and w.grad.shape == (3,)
    m = ember.ones(2, 3, requires_grad=True)
    loss = (m @ ember.ones(3, 2)).softmax(dim=1).max()
    (gm,) = ember.autograd.grad(loss, m)
    assert gm.shape == (2, 3)
    ref = weakref.ref(x)
    assert ref() is x
    with ember.no_grad():
        assert (x * 2).grad_fn is None
    with pytest.raises(RuntimeError, match="leaf Variable"):
        x.add_(1)
    with pytest.raises(TypeError):
        ember.Tensor.add(3, 4)
    with pytest.raises(TypeError):
        ember._C._set_history(1, None, 0)
    with pytest.raises(TypeError):
        ember._C._make_subclass(int, x)
    parameter = ember._C._make_subclass(ember.Tensor, x.detach(), True)
    assert parameter.requires_grad and parameter.is_leaf
    assert ember._C._edges(x, 2.0, y)[1] is None
    assert ember._C._versions(x, 1.0, None) == (0, None, None)


def test_jit_vm_fused_kernel_and_tracer():
    # The C side of ember.jit: the bytecode VM (c/python/JitVM.c) with
    # loops, branches, calls, fused kernels and their fallback, its error
    # paths; FusedKernel directly (c/python/Fused.c); the tracer hook.
    def f(x, w, n: int):
        h = x
        for i in range(n):
            if i % 2 == 0:
                h = (h * w + 1.0).tanh()
            else:
                h = h - w / (h * h + 1)
        return h.sum(), h

    scripted = ember.jit.script(f)
    x, w = ember.linspace(-1, 1, 5), ember.ones(5) * 0.5
    total, h = scripted(x, w, 5)
    assert h.shape == (5,)
    scripted(x.double(), w.double(), 2)                  # another specialisation
    scripted.generic.code(ember.tensor([1, 2, 3, 4, 5]), w, 3)  # guard fails: fallback
    xg = x.clone().requires_grad_(True)
    scripted(xg, w, 3)[0].backward()                     # autograd through the VM
    assert xg.grad.shape == (5,)
    with pytest.raises(TypeError):
        scripted(x, w, "3")
    with pytest.raises(RuntimeError):
        scripted(x, ember.ones(4), 1)                    # error inside the VM
    kernel = ember._C.FusedKernel(2, [("mul", 2, 0, 1), ("const", 3, 2.0), ("add", 4, 2, 3)], [4])
    (out,) = kernel(x, w)
    assert out.shape == (5,)
    assert kernel(x, ember.ones(5, dtype=ember.float64)) is None
    with pytest.raises(ValueError):
        ember._C.FusedKernel(1, [("nope", 1, 0)], [1])
    traced = ember.jit.trace(lambda a: (a * 2).relu(), x)
    assert traced(x).shape == (5,)


def test_optimizer_one_pass_update():
    # c/python/Optim.c: Adam's one-pass kernel, the op-by-op fallback, and
    # the entry point's refusals and errors.
    params = [ember.nn.Parameter(ember.randn(4, 3)), ember.nn.Parameter(ember.randn(5).half())]
    opt = ember.optim.AdamW(params, lr=0.1, amsgrad=True)
    for p in params:
        p.grad = ember.ones_like(p)
    opt.step()
    p = ember.zeros(3)
    args = [p, ember.ones(3), ember.zeros(3), ember.zeros(3), None, 0.1, 0.0, False, 0.9,
            0.999, 1e-8, 1.0, 0.03, False, False]
    assert ember._C._adam_step_(*args)
    assert not ember._C._adam_step_(*args[:1], ember.ones(4), *args[2:])
    with pytest.raises(TypeError):
        ember._C._adam_step_(*args[:5], "lr", *args[6:])
    with pytest.raises(TypeError):
        ember._C._adam_step_(*args[:-1])
