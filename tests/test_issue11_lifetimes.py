"""Issue 11, lifetimes of what a tensor object hands out and holds.

Exports (NumPy arrays, DLPack capsules) keep the memory alive, not the
tensor object; `t.data = x` installs before it releases; the tensor's own
slots (dealloc, iteration) survive re-entry; the Python-allocator bridge
(c/python/Allocator.c, Note [Calling a Python allocator]) keeps the
allocator alive across its own calls and never runs Python with an
exception pending; print options are validated and a huge expanded tensor
prints a summary.  Run under ASan by `make leak-asan`.
"""

import gc
import threading
import weakref

import numpy as np
import pytest

import ember
from ember import memory


# Every test starts and ends with the built-in allocator (conftest.py).
pytestmark = pytest.mark.usefixtures("default_allocator_restored")


class RawAllocator:
    """A Python allocator over the C allocator's raw blocks."""

    def __init__(self):
        self.cpu = memory.get_allocator()
        self.live = set()

    def malloc(self, nbytes):
        address = self.cpu.raw_malloc(nbytes)
        self.live.add(address)
        return address

    def free(self, address):
        self.live.remove(address)
        self.cpu.raw_free(address)


# ---- 1. exports keep the memory alive ---------------------------------------


def test_numpy_export_survives_data_swap():
    t = ember.arange(4.0)
    arr = t.numpy()
    t.data = ember.zeros(1)
    gc.collect()
    assert arr.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert t.tolist() == [0.0]


def test_numpy_export_base_is_the_storage_and_writes_are_shared():
    t = ember.arange(6.0).view(2, 3)
    arr = t.numpy()
    assert isinstance(arr.base, ember.UntypedStorage)
    assert arr.base.data_ptr() == t.untyped_storage().data_ptr()
    assert arr.ctypes.data == t.data_ptr()
    arr[1, 2] = 42.0
    assert t[1, 2].item() == 42.0
    t.fill_(7.0)
    assert (arr == 7.0).all()


def test_asarray_and_array_protocol_survive_data_swap():
    t = ember.arange(5, dtype=ember.int64)
    a = np.asarray(t)
    b = t.__array__()
    t.data = ember.zeros(2, dtype=ember.int64)
    del t
    gc.collect()
    assert a.tolist() == b.tolist() == [0, 1, 2, 3, 4]


def test_dlpack_capsule_and_import_survive_data_swap():
    t = ember.arange(3.0)
    capsule = t.__dlpack__()
    t.data = ember.zeros(1)
    gc.collect()
    assert ember.from_dlpack(capsule).tolist() == [0.0, 1.0, 2.0]
    u = ember.arange(3.0)
    via_numpy = np.from_dlpack(u)
    u.data = ember.zeros(1)
    gc.collect()
    assert via_numpy.tolist() == [0.0, 1.0, 2.0]


def test_dlpack_max_version_that_swaps_data():
    t = ember.arange(3.0)

    class Major:
        def __index__(self):
            t.data = ember.zeros(5)
            return 1

    capsule = t.__dlpack__(max_version=(Major(), 0))
    gc.collect()
    # The call exports the tensor t held when it began, as PyTorch (which
    # unpacks self before parsing max_version) does: Note [Pinned
    # arguments]; that memory stays alive through the capsule.
    assert ember.from_dlpack(capsule).tolist() == [0.0, 1.0, 2.0]
    assert t.tolist() == [0.0] * 5


def test_numpy_memory_freed_when_the_last_array_goes():
    with memory.use_allocator(RawAllocator()) as raw:
        t = ember.arange(8.0)
        arr = t.numpy()
        del t
        assert len(raw.live) == 1
        del arr
        gc.collect()
        assert len(raw.live) == 0



def test_exports_while_another_thread_swaps_data():
    """Every export sees one whole arange, whichever data it caught."""
    t = ember.arange(8.0)
    stop = threading.Event()

    def swapper():
        n = 1
        while not stop.is_set():
            t.data = ember.arange(float(n % 64 + 1))
            n += 1

    thread = threading.Thread(target=swapper)
    thread.start()
    try:
        for _ in range(2000):
            arr = t.numpy()
            capsule = t.__dlpack__()
            assert arr.tolist() == list(range(len(arr)))
            from_capsule = ember.from_dlpack(capsule).tolist()
            assert from_capsule == list(range(len(from_capsule)))
            for i, row in enumerate(t):
                assert row.item() <= 64.0
    finally:
        stop.set()
        thread.join()


# ---- 2. t.data = x, x.grad = x ------------------------------------------------


def test_data_setter_installs_before_releasing():
    """The old memory's free runs Python that reads the tensor again."""
    seen = []

    class Watching(RawAllocator):
        def free(self, address):
            seen.append(victim.tolist())
            super().free(address)

    with memory.use_allocator(Watching()):
        victim = ember.arange(3.0)
    victim.data = ember.ones(2)
    assert seen == [[1.0, 1.0]]


def test_data_setter_checks_like_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, ember):
        x = lib.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="must be floating point or complex dtype"):
            x.data = lib.zeros(3, dtype=lib.int64)
        x.data = lib.zeros(2, dtype=lib.float64)  # other shapes and floats: fine
        assert x.dtype == lib.float64 and tuple(x.shape) == (2,)
        y = lib.ones(3)
        y.data = lib.zeros(3, dtype=lib.int64)  # no grad: any dtype
        assert y.dtype == lib.int64
        with pytest.raises(TypeError, match="Variable data has to be a tensor"):
            y.data = [1]


def test_grad_cannot_be_the_tensor_itself():
    torch = pytest.importorskip("torch")
    for lib in (torch, ember):
        x = lib.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="can't assign Variable as its own grad"):
            x.grad = x
        assert x.grad is None
        x.grad = x.detach()  # another tensor object on the same memory: fine
        assert x.grad is not None


# ---- 3. dealloc and iteration --------------------------------------------------


@pytest.mark.parametrize("link", ["grad", "attribute"])
def test_long_chain_deallocates_without_overflowing_the_stack(link):
    head = tail = ember.zeros(1)
    for _ in range(200_000):
        nxt = ember.zeros(1)
        if link == "grad":
            tail.grad = nxt
        else:
            tail.next = nxt
        tail = nxt
    del tail
    del head  # recursion this deep would overflow the C stack without a trashcan
    gc.collect()


def test_iterator_rechecks_rank_after_data_becomes_0d():
    t = ember.arange(3.0)
    it = iter(t)
    assert next(it).item() == 0.0
    t.data = ember.tensor(5.0)
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        next(it)


def test_iterator_stops_when_data_shrinks():
    t = ember.arange(4.0)
    it = iter(t)
    next(it), next(it)
    t.data = ember.zeros(1)
    assert list(it) == []


def test_tolist_survives_a_finalizer_that_swaps_data():
    t = ember.arange(2000.0)

    class Swapper:
        def __del__(self):
            t.data = ember.zeros(1)

    cycle = Swapper()
    cycle.self = cycle
    del cycle  # collected by a later allocation, maybe inside tolist
    values = t.tolist()
    assert values == [float(i) for i in range(2000)] or values == [0.0]


# ---- 4. the Python-allocator bridge ---------------------------------------------


def test_malloc_that_uninstalls_itself():
    cpu = memory.get_allocator()

    class Uninstalls(RawAllocator):
        def malloc(self, nbytes):
            memory.set_allocator(cpu)  # drops the registry's reference to us
            return super().malloc(nbytes)

    alloc = Uninstalls()
    memory.set_allocator(alloc)
    del alloc
    t = ember.arange(10.0)  # the allocator must survive its own malloc
    assert t.sum().item() == 45.0
    assert memory.get_allocator().name == "cpu"
    del t
    gc.collect()


def test_malloc_that_swaps_an_input_data():
    a = ember.arange(100.0)
    b = ember.ones(100)

    class Swaps(RawAllocator):
        def malloc(self, nbytes):
            a.data = ember.zeros(1)
            b.data = ember.zeros(1)
            return super().malloc(nbytes)

    with memory.use_allocator(Swaps()):
        try:
            c = a + b
        except RuntimeError:
            c = None
    assert c is None or c.tolist() in ([i + 1.0 for i in range(100)], [0.0])


class FailsOnce(RawAllocator):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def malloc(self, nbytes):
        self.calls += 1
        if self.calls == 1:
            raise MemoryError("first allocation refused")
        return super().malloc(nbytes)


@pytest.mark.parametrize("op", [
    lambda x: x.sort(),
    lambda x: x.topk(2),
    lambda x: x.kthvalue(2),
    lambda x: ember.unique(x, return_inverse=True, return_counts=True),
])
def test_second_allocation_after_a_failed_one_keeps_the_first_error(op):
    x = ember.tensor([3.0, 1.0, 2.0, 1.0])
    alloc = FailsOnce()
    with memory.use_allocator(alloc):
        with pytest.raises(MemoryError, match="first allocation refused"):
            op(x)
    gc.collect()
    assert alloc.live == set()


def test_callback_exception_becomes_the_operator_exception():
    class Raises:
        def malloc(self, nbytes):
            raise KeyError("from malloc")

        def free(self, address):
            raise AssertionError("never called")

    with memory.use_allocator(Raises()):
        with pytest.raises(KeyError, match="from malloc"):
            ember.empty(10)


@pytest.mark.parametrize("address, error, message", [
    (-64, ValueError, "negative address"),
    (1, ValueError, "not aligned to 16 bytes"),
    ("64", TypeError, "must return an int address"),
    (2**70, OverflowError, "too large"),
])
def test_bad_malloc_addresses_are_refused(address, error, message):
    given_back = []

    class Bad:
        def malloc(self, nbytes):
            return address

        def free(self, returned):
            given_back.append(returned)

    with memory.use_allocator(Bad()):
        with pytest.raises(error, match=message):
            ember.empty(4)
    if error is ValueError:
        assert given_back == [address]  # the refused block is handed back


def test_misaligned_block_from_a_real_allocator_is_refused_and_returned():
    class OffByEight(RawAllocator):
        def malloc(self, nbytes):
            return super().malloc(nbytes + 8) + 8

        def free(self, address):
            super().free(address - 8)

    alloc = OffByEight()
    with memory.use_allocator(alloc):
        with pytest.raises(ValueError, match="aligned to 16 bytes"):
            ember.zeros(3)
    assert alloc.live == set()


def test_raw_free_zero_is_a_noop_and_double_free_raises():
    cpu = memory.get_allocator()
    cpu.raw_free(0)
    cpu.raw_free(0, 16)
    address = cpu.raw_malloc(32)
    cpu.raw_free(address)
    with pytest.raises(ValueError, match="already freed"):
        cpu.raw_free(address)
    t = ember.zeros(4)
    with pytest.raises(ValueError, match="not returned by this allocator's raw_malloc"):
        cpu.raw_free(t.data_ptr())  # a tensor's memory is not a raw block
    assert t.tolist() == [0.0] * 4


def test_free_keeps_a_pending_exception():
    class Alloc(RawAllocator):
        pass

    with memory.use_allocator(Alloc()):
        t = ember.zeros(4)

    def drop_while_raising():
        nonlocal t
        try:
            raise LookupError("pending")
        finally:
            del t  # python_free runs with LookupError in flight

    with pytest.raises(LookupError, match="pending"):
        drop_while_raising()



class Keeper(RawAllocator):
    """An allocator that keeps what it allocated: a cycle through C."""

    def __init__(self):
        super().__init__()
        self.kept = []


def test_python_allocator_holding_its_tensor_is_collected():
    alloc = Keeper()
    with memory.use_allocator(alloc):
        alloc.kept.append(ember.arange(16.0))
    live = alloc.live
    collected = weakref.ref(alloc)
    del alloc
    gc.collect()
    assert collected() is None
    assert live == set()  # the block went back through the allocator's free


def test_python_allocator_cycle_is_kept_while_installed_or_shared():
    alloc = Keeper()
    with memory.use_allocator(alloc):
        t = ember.arange(4.0)
        alloc.kept.append(t)
        gc.collect()  # installed: reachable from the registry, untouched
        assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    alloc.kept.append(t.view(2, 2))  # two tensors share the storage
    del t
    live = alloc.live
    collected = weakref.ref(alloc)
    del alloc
    gc.collect()  # the shared edge is not shown to the GC: the cycle stays
    survivor = collected()
    assert survivor is not None and len(live) == 1
    assert survivor.kept[1].tolist() == [[0.0, 1.0], [2.0, 3.0]]
    survivor.kept.clear()  # breaking it by hand frees everything
    del survivor
    gc.collect()
    assert collected() is None and live == set()


# ---- 5. print options and huge tensors -------------------------------------------


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(precision=-1), ValueError, "precision must be >= 0"),
    (dict(precision="x"), TypeError, "precision must be an integer"),
    (dict(precision=2.5), TypeError, "precision must be an integer"),
    (dict(threshold="a"), TypeError, "threshold must be numeric"),
    (dict(threshold=float("nan")), ValueError, "threshold must be non-NAN"),
    (dict(threshold=-1), ValueError, "threshold must be >= 0"),
    (dict(edgeitems=-1), ValueError, "edgeitems must be >= 0"),
    (dict(linewidth=-5), ValueError, "linewidth must be >= 0"),
    (dict(linewidth=None, sci_mode="yes"), TypeError, "sci_mode must be a bool"),
])
def test_set_printoptions_rejects_bad_values_and_changes_nothing(kwargs, error, message):
    before = ember.get_printoptions() if hasattr(ember, "get_printoptions") else None
    text = repr(ember.arange(5.0))
    with pytest.raises(error, match=message):
        ember.set_printoptions(**{"precision": 3, **kwargs})
    assert repr(ember.arange(5.0)) == text
    if before is not None:
        assert ember.get_printoptions() == before


def test_set_printoptions_numpy_messages_match():
    saved = np.get_printoptions()
    try:
        for kwargs in (dict(threshold="a"), dict(precision="x"),
                       dict(threshold=float("nan"))):
            with pytest.raises(Exception) as ours:
                ember.set_printoptions(**kwargs)
            with pytest.raises(Exception) as numpys:
                np.set_printoptions(**kwargs)
            assert type(ours.value) is type(numpys.value)
            assert str(ours.value) == str(numpys.value)
    finally:
        np.set_printoptions(**saved)


@pytest.mark.parametrize("shape", [(2**40,), (2**62,), (2**31, 2**31), (3, 2**61), (2**20, 5, 2**20)])
def test_repr_of_huge_expanded_tensor_summarises_like_torch(shape):
    torch = pytest.importorskip("torch")
    ours = ember.zeros(*[1] * len(shape)).expand(*shape)
    theirs = torch.zeros(*[1] * len(shape)).expand(*shape)
    assert repr(ours) == repr(theirs).replace("torch.", "ember.")


@pytest.mark.parametrize("options", [{}, dict(edgeitems=0), dict(edgeitems=1), dict(edgeitems=15)])
def test_summarised_repr_still_matches_torch(options):
    torch = pytest.importorskip("torch")
    try:
        ember.set_printoptions(**options)
        torch.set_printoptions(**options)
        for shape in [(2000,), (20, 30, 40), (1001, 1)]:
            n = int(np.prod(shape))
            ours = ember.arange(float(n)).view(*shape)
            theirs = torch.arange(float(n)).view(*shape)
            assert repr(ours) == repr(theirs).replace("torch.", "ember.")
    finally:
        ember.set_printoptions(profile="default")
        torch.set_printoptions(profile="default")
