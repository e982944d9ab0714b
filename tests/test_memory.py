"""ember.memory: allocator statistics and pluggable allocators.

c/th/THAllocator.c keeps the statistics, c/python/Allocator.c bridges
allocators written in Python (Note [Allocator lifetime]), and
python/ember/memory.py holds the Python half.  Every test restores the
installed allocator (use_allocator, or try/finally) so nothing leaks into
the next test.
"""

import ctypes
import gc
import sys
import weakref

import numpy as np
import pytest

import ember
from ember import memory

STAT_KEYS = {"allocated_bytes", "peak_allocated_bytes", "live_blocks",
             "num_allocs", "num_frees", "cached_bytes", "cached_blocks",
             "cache_hits", "cache_misses"}


def _delta(before, after):
    return {k: after[k] - before[k] for k in STAT_KEYS}


# Every test starts and ends with the built-in allocator (conftest.py).
pytestmark = pytest.mark.usefixtures("default_allocator_restored")


class RawCpu:
    """A minimal ad-hoc allocator on the C allocator's raw entry points."""

    def __init__(self):
        self.cpu = memory.get_allocator()
        self.calls = []

    def malloc(self, nbytes):
        self.calls.append(("malloc", nbytes))
        return self.cpu.raw_malloc(nbytes)

    def free(self, address):
        self.calls.append(("free", address))
        self.cpu.raw_free(address)


# ---- statistics ---------------------------------------------------------------------


def test_stats_keys_and_types():
    s = memory.stats()
    assert set(s) == STAT_KEYS
    assert all(type(v) is int and v >= 0 for v in s.values())
    assert memory.stats("cpu") == s
    assert memory.stats(ember.device("cpu")) == s
    assert s["peak_allocated_bytes"] >= s["allocated_bytes"]
    assert s["num_allocs"] - s["num_frees"] == s["live_blocks"]


@pytest.mark.parametrize("n, dtype, itemsize", [
    (1, ember.float32, 4), (1000, ember.float32, 4), (7, ember.float64, 8),
    (33, ember.uint8, 1), (5, ember.int16, 2), (3, ember.bool, 1)])
def test_allocation_adds_exact_bytes_and_one_block(n, dtype, itemsize):
    before = memory.stats()
    t = ember.empty(n, dtype=dtype)
    during = memory.stats()
    d = _delta(before, during)
    assert d["allocated_bytes"] == itemsize * n
    assert d["live_blocks"] == 1
    assert d["num_allocs"] == 1
    assert d["num_frees"] == 0
    assert during["peak_allocated_bytes"] >= during["allocated_bytes"]
    del t
    after = memory.stats()
    d = _delta(before, after)
    assert d["allocated_bytes"] == 0
    assert d["live_blocks"] == 0
    assert d["num_allocs"] == 1 and d["num_frees"] == 1


def test_factories_allocate_one_block_each():
    before = memory.stats()
    ts = [ember.zeros(10), ember.ones(2, 5), ember.full((3,), 2.0),
          ember.arange(10), ember.tensor([1.0, 2.0]), ember.rand(4)]
    expected = sum(t.nbytes for t in ts)
    d = _delta(before, memory.stats())
    assert d["live_blocks"] == len(ts)
    assert d["allocated_bytes"] == expected
    del ts
    assert _delta(before, memory.stats())["allocated_bytes"] == 0


def test_empty_tensor_allocates_nothing():
    before = memory.stats()
    t = ember.empty(0)
    z = ember.zeros(0, 5)
    assert memory.stats() == before
    del t, z


def test_views_add_nothing():
    t = ember.zeros(4, 6)
    before = memory.stats()
    views = [t.view(24), t.t(), t[1:3], t[0], t.transpose(0, 1), t.narrow(1, 1, 2),
             t.expand(2, 4, 6), t.unsqueeze(0), t.as_strided((2, 2), (1, 1)),
             t.reshape(6, 4), t.detach(), t.data, t.contiguous()]
    assert memory.stats() == before
    del views
    assert memory.stats() == before


def test_copies_allocate():
    t = ember.zeros(4, 6)
    before = memory.stats()
    c = t.t().contiguous()
    k = t.clone()
    d = _delta(before, memory.stats())
    assert d["live_blocks"] == 2 and d["allocated_bytes"] == 2 * 4 * 24
    del c, k


def test_from_numpy_adds_nothing():
    a = np.ones((100, 10), dtype=np.float64)
    before = memory.stats()
    t = ember.from_numpy(a)
    n = t.numpy()
    d = ember.from_dlpack(a)
    assert memory.stats() == before
    del t, n, d
    assert memory.stats() == before


def test_peak_and_reset_peak_stats():
    memory.reset_peak_stats()
    base = memory.stats()
    assert base["peak_allocated_bytes"] == base["allocated_bytes"]
    big = ember.empty(10_000, dtype=ember.uint8)
    small = ember.empty(100, dtype=ember.uint8)
    s = memory.stats()
    assert s["peak_allocated_bytes"] == base["allocated_bytes"] + 10_100
    del big
    s = memory.stats()
    assert s["allocated_bytes"] == base["allocated_bytes"] + 100
    assert s["peak_allocated_bytes"] == base["allocated_bytes"] + 10_100  # sticks
    memory.reset_peak_stats()
    s = memory.stats()
    assert s["peak_allocated_bytes"] == s["allocated_bytes"] == base["allocated_bytes"] + 100
    del small
    assert memory.stats()["peak_allocated_bytes"] == base["allocated_bytes"] + 100
    memory.reset_peak_stats("cpu")
    assert memory.stats()["peak_allocated_bytes"] == memory.stats()["allocated_bytes"]


def test_stats_bad_device():
    with pytest.raises((TypeError, ValueError, RuntimeError)):
        memory.stats("tpu")
    with pytest.raises((TypeError, ValueError, RuntimeError)):
        memory.stats(3)


# ---- get_allocator / CAllocator ---------------------------------------------------------


def test_get_allocator_is_a_callocator():
    a = memory.get_allocator()
    assert isinstance(a, memory.CAllocator)
    assert type(a) is ember._C.CAllocator
    assert a.name == "cpu"
    assert repr(a) == "<ember.memory.CAllocator 'cpu'>"
    assert set(a.stats()) == STAT_KEYS
    assert memory.get_allocator("cpu").name == "cpu"
    with pytest.raises(TypeError):
        memory.CAllocator()


def test_callocator_raw_malloc_is_uncounted():
    cpu = memory.get_allocator()
    before, own_before = memory.stats(), cpu.stats()
    address = cpu.raw_malloc(128)
    assert isinstance(address, int) and address != 0
    assert address % 64 == 0  # the CPU allocator aligns to a cache line
    ctypes.memset(address, 0x5A, 128)
    assert ctypes.string_at(address, 4) == b"\x5a" * 4
    assert memory.stats() == before and cpu.stats() == own_before
    cpu.raw_free(address, 128)
    assert memory.stats() == before
    for bad in (0, -1, 1 << 60):
        with pytest.raises(ValueError, match="nbytes"):
            cpu.raw_malloc(bad)
    with pytest.raises(TypeError):
        cpu.raw_free()


def test_callocator_own_stats_count_its_tensors():
    cpu = memory.get_allocator()
    before = cpu.stats()
    t = ember.empty(25, dtype=ember.float64)
    d = _delta(before, cpu.stats())
    assert d["allocated_bytes"] == 200 and d["live_blocks"] == 1
    del t
    assert _delta(before, cpu.stats())["live_blocks"] == 0


# ---- set_allocator / use_allocator ------------------------------------------------------


def test_set_allocator_returns_previous():
    cpu = memory.get_allocator()
    counting = memory.CountingAllocator()
    previous = memory.set_allocator(counting)
    try:
        assert isinstance(previous, memory.CAllocator) and previous.name == "cpu"
        assert memory.get_allocator() is counting
        other = RawCpu()
        assert memory.set_allocator(other) is counting
        assert memory.get_allocator() is other
    finally:
        back = memory.set_allocator(previous)
    assert back is other
    assert memory.get_allocator().name == cpu.name


def test_use_allocator_context_manager():
    counting = memory.CountingAllocator()
    with memory.use_allocator(counting) as installed:
        assert installed is counting
        assert memory.get_allocator() is counting
        t = ember.ones(10)
    assert memory.get_allocator().name == "cpu"
    assert counting.num_allocs == 1
    assert counting.live_blocks == 1 and counting.allocated_bytes == 40
    assert t.tolist() == [1.0] * 10
    del t
    assert counting.live_blocks == 0 and counting.num_frees == 1


def test_use_allocator_restores_on_exception():
    counting = memory.CountingAllocator()
    with pytest.raises(KeyError):
        with memory.use_allocator(counting):
            raise KeyError("boom")
    assert memory.get_allocator().name == "cpu"


def test_nested_use_allocator():
    outer, inner = memory.CountingAllocator(), memory.CountingAllocator()
    with memory.use_allocator(outer):
        a = ember.empty(3)
        with memory.use_allocator(inner):
            b = ember.empty(5)
            assert memory.get_allocator() is inner
        c = ember.empty(7)
        assert memory.get_allocator() is outer
    assert sorted(outer.sizes.values()) == [12, 28]
    assert list(inner.sizes.values()) == [20]
    del a, b, c
    assert outer.live_blocks == 0 and inner.live_blocks == 0


def test_ad_hoc_allocator_class():
    alloc = RawCpu()
    with memory.use_allocator(alloc):
        t = ember.zeros(6, dtype=ember.int32)
    assert alloc.calls == [("malloc", 24)]
    t.fill_(5)
    assert t.tolist() == [5] * 6
    address = t.data_ptr()
    del t
    assert alloc.calls[-1] == ("free", address)


def test_freed_through_its_allocator_after_another_was_installed():
    first, second = memory.CountingAllocator(), memory.CountingAllocator()
    with memory.use_allocator(first):
        a = ember.ones(8)
        memory.set_allocator(second)  # use_allocator restores the CPU one after
        b = ember.ones(4)
    assert first.live_blocks == 1 and second.live_blocks == 1
    del a
    assert first.num_frees == 1 and first.live_blocks == 0
    assert second.num_frees == 0
    del b
    assert second.num_frees == 1 and second.live_blocks == 0


def test_python_allocator_counts_in_device_stats_once():
    counting = memory.CountingAllocator()
    cpu = memory.get_allocator()
    before, cpu_before = memory.stats(), cpu.stats()
    with memory.use_allocator(counting):
        t = ember.empty(256)
    d = _delta(before, memory.stats())
    assert d["allocated_bytes"] == 1024 and d["live_blocks"] == 1
    assert d["num_allocs"] == 1
    # the delegated raw_malloc is not counted a second time by the C allocator
    assert cpu.stats() == cpu_before
    del t
    d = _delta(before, memory.stats())
    assert d["allocated_bytes"] == 0 and d["live_blocks"] == 0 and d["num_frees"] == 1


def test_poisoning_allocator_fills_fresh_and_freed_memory():
    recorder = _FreeRecorder()
    poison = memory.PoisoningAllocator(base=recorder)
    with memory.use_allocator(poison):
        t = ember.empty(8, dtype=ember.uint8)
    assert t.tolist() == [memory.PoisoningAllocator.FRESH] * 8
    t[0] = 1
    del t
    assert recorder.freed == [bytes([memory.PoisoningAllocator.FREED]) * 8]
    assert poison.live_blocks == 0 and poison.num_frees == 1


class _FreeRecorder:
    """A base allocator that records each block's bytes as it is freed."""

    def __init__(self):
        self.cpu = memory.get_allocator()
        self.sizes = {}
        self.freed = []

    def malloc(self, nbytes):
        address = self.cpu.raw_malloc(nbytes)
        self.sizes[address] = nbytes
        return address

    def free(self, address):
        self.freed.append(ctypes.string_at(address, self.sizes.pop(address)))
        self.cpu.raw_free(address)


def test_counting_allocator_repr_and_properties():
    counting = memory.CountingAllocator()
    with memory.use_allocator(counting):
        x = ember.empty(2, 2)
        y = ember.empty(3, dtype=ember.int64)
    assert counting.allocated_bytes == 16 + 24
    assert counting.live_blocks == 2
    assert "live_blocks=2" in repr(counting) and "num_allocs=2" in repr(counting)
    del x, y
    assert counting.allocated_bytes == 0


# ---- failures ------------------------------------------------------------------------------


class _MallocRaises:
    def malloc(self, nbytes):
        raise KeyError(f"no memory for {nbytes}")

    def free(self, address):  # pragma: no cover - never called
        raise AssertionError("free without malloc")


@pytest.mark.parametrize("make", [
    lambda: ember.ones(5), lambda: ember.zeros(2, 3), lambda: ember.empty(4),
    lambda: ember.arange(10), lambda: ember.tensor([1.0, 2.0]),
    lambda: ember.from_numpy(np.ones(3, dtype=np.float64)).clone(),
], ids=["ones", "zeros", "empty", "arange", "tensor", "clone"])
def test_malloc_exception_propagates_and_nothing_leaks(make):
    before = memory.stats()
    with memory.use_allocator(_MallocRaises()):
        with pytest.raises(KeyError, match="no memory for"):
            make()
    assert memory.stats() == before


def test_malloc_returning_zero_is_memory_error():
    class Zero:
        def malloc(self, nbytes):
            return 0

        def free(self, address):  # pragma: no cover
            raise AssertionError

    before = memory.stats()
    with memory.use_allocator(Zero()):
        with pytest.raises(MemoryError, match="address 0 for 20 bytes"):
            ember.ones(5)
    assert memory.stats() == before


def test_malloc_returning_non_int_is_type_error():
    class Str:
        def malloc(self, nbytes):
            return "not an address"

        def free(self, address):  # pragma: no cover
            raise AssertionError

    before = memory.stats()
    with memory.use_allocator(Str()):
        with pytest.raises(TypeError):
            ember.ones(5)
    assert memory.stats() == before


def test_free_that_raises_is_unraisable(monkeypatch):
    class BadFree(memory.CountingAllocator):
        def free(self, address):
            super().free(address)
            raise ValueError("free failed")

    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(
        (u.exc_type, str(u.exc_value), u.object)))
    before = memory.stats()
    bad = BadFree()
    with memory.use_allocator(bad):
        t = ember.ones(4)
    del t  # must not crash, must not raise here
    assert seen == [(ValueError, "free failed", bad)]
    assert bad.num_frees == 1 and bad.live_blocks == 0
    d = _delta(before, memory.stats())
    assert d["allocated_bytes"] == 0 and d["live_blocks"] == 0


def test_free_keeps_a_pending_exception():
    counting = memory.CountingAllocator()
    with memory.use_allocator(counting):
        t = ember.ones(4)
    holder = [t]
    del t
    with pytest.raises(ZeroDivisionError):
        try:
            1 / 0
        finally:
            holder.clear()  # the free runs while the exception is in flight
    assert counting.num_frees == 1


def test_free_with_the_error_indicator_set():
    # Unlike a `finally:` block (the exception is saved, not pending), a C
    # error path drops objects while the error indicator is set: list.sort
    # releases the keys it computed after the key function raised.  The
    # Python free must run with the indicator saved and restore it after.
    counting = memory.CountingAllocator()

    def key(i):
        if i == 0:
            with memory.use_allocator(counting):
                return ember.ones(4)  # only sort's list of keys holds it
        raise ZeroDivisionError("the key failed")

    with pytest.raises(ZeroDivisionError, match="the key failed"):
        sorted([0, 1], key=key)
    assert counting.num_frees == 1 and counting.live_blocks == 0


@pytest.mark.parametrize("obj", [
    object(), 3, None, "malloc",
    type("OnlyMalloc", (), {"malloc": lambda self, n: 0})(),
    type("OnlyFree", (), {"free": lambda self, a: None})(),
    type("NotCallable", (), {"malloc": 1, "free": lambda self, a: None})(),
], ids=["object", "int", "None", "str", "only-malloc", "only-free", "not-callable"])
def test_objects_without_malloc_free_are_type_errors(obj):
    before = memory.get_allocator()
    with pytest.raises(TypeError, match="malloc.*free"):
        memory.set_allocator(obj)
    assert memory.get_allocator().name == before.name


def test_set_allocator_bad_device():
    with pytest.raises((TypeError, ValueError, RuntimeError)):
        memory.set_allocator(memory.CountingAllocator(), device="tpu")
    assert memory.get_allocator().name == "cpu"


# ---- lifetime of the allocator object ---------------------------------------------------


def test_allocator_released_when_uninstalled_and_storages_gone():
    counting = memory.CountingAllocator()
    alive = weakref.ref(counting)
    with memory.use_allocator(counting):
        t = ember.ones(10)
        v = t[2:]
    s = t.untyped_storage()
    del counting
    gc.collect()
    assert alive() is not None  # uninstalled but still backing memory
    del t, v
    assert alive() is not None  # the storage object still holds it
    del s
    assert alive() is None  # released at once with its last storage


def test_allocator_released_when_uninstalled_without_storages():
    alloc = RawCpu()
    alive = weakref.ref(alloc)
    before = sys.getrefcount(alloc)
    previous = memory.set_allocator(alloc)
    assert sys.getrefcount(alloc) == before + 1  # the registry's reference
    memory.set_allocator(previous)
    assert sys.getrefcount(alloc) == before
    del alloc
    assert alive() is None


def test_get_allocator_returns_the_same_object_not_a_copy():
    alloc = RawCpu()
    with memory.use_allocator(alloc):
        assert memory.get_allocator() is alloc
        assert memory.get_allocator() is memory.get_allocator()


def test_stats_survive_many_allocators():
    before = memory.stats()
    for _ in range(5):
        with memory.use_allocator(memory.CountingAllocator()):
            ts = [ember.empty(16) for _ in range(3)]
        del ts
    d = _delta(before, memory.stats())
    assert d["allocated_bytes"] == 0 and d["live_blocks"] == 0
    assert d["num_allocs"] == 15 and d["num_frees"] == 15


# ---- the CPU block cache (Note [The CPU block cache]) ---------------------------------

CACHE_LIMIT = 256 << 20


@pytest.fixture
def cache():
    """A known cache: empty, CACHE_LIMIT bytes, restored afterwards.

    (Under AddressSanitizer the cache is off by default; these tests turn it
    on for themselves.)"""
    previous = memory.set_cache_limit(CACHE_LIMIT)
    memory.empty_cache()
    yield
    memory.set_cache_limit(previous)
    memory.empty_cache()


def _minor_faults():
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


@pytest.mark.parametrize("nbytes, capacity", [
    (1, 64), (64, 64), (65, 128), (200, 256), (256, 256), (257, 320),
    (320, 320), (321, 384), (512, 512), (513, 640), (1000, 1024),
    (4097, 5120), ((1 << 20) + 1, 1280 << 10),
    (2 << 20, 2 << 20), ((2 << 20) + 1, 4 << 20),  # mapped: whole 2 MiB pages
    ((4 << 20) + 1, 6 << 20), (64 << 20, 64 << 20), ((64 << 20) + 1, 80 << 20)])
def test_block_capacity_size_classes(nbytes, capacity):
    assert memory.block_capacity(nbytes) == capacity


def test_block_capacity_is_monotonic_and_at_most_a_quarter_larger():
    previous = 0
    for nbytes in sorted(list(range(1, 5000, 7))
                         + [(1 << k) + d for k in range(12, 40) for d in (-1, 0, 1)]):
        capacity = memory.block_capacity(nbytes)
        assert capacity >= nbytes and capacity >= previous
        assert capacity % 64 == 0
        if nbytes > 256 and capacity < (2 << 20):
            assert capacity <= nbytes * 1.25 + 64
        previous = capacity
    for bad in (0, -1, 1 << 60):
        with pytest.raises(ValueError, match="nbytes"):
            memory.block_capacity(bad)


def test_cache_reuses_a_freed_block_of_the_same_class(cache):
    t = ember.empty(250, dtype=ember.uint8)
    address = t.data_ptr()
    del t
    u = ember.empty(50, dtype=ember.int32)  # 200 bytes: the same 256-byte class
    assert u.data_ptr() == address
    del u
    v = ember.empty(1000, dtype=ember.uint8)  # another class: a new block
    assert v.data_ptr() != address
    del v


def test_cache_stats_keep_live_and_cached_apart(cache):
    before = memory.stats()
    assert before["cached_bytes"] == 0 and before["cached_blocks"] == 0
    t = ember.empty(1000, dtype=ember.uint8)
    d = _delta(before, memory.stats())
    assert d == dict.fromkeys(STAT_KEYS, 0) | {
        "allocated_bytes": 1000, "peak_allocated_bytes": d["peak_allocated_bytes"],
        "live_blocks": 1, "num_allocs": 1, "cache_misses": 1}
    del t
    d = _delta(before, memory.stats())
    assert d["allocated_bytes"] == 0 and d["live_blocks"] == 0
    assert d["num_frees"] == 1
    assert d["cached_bytes"] == memory.block_capacity(1000) == 1024
    assert d["cached_blocks"] == 1
    u = ember.empty(1001, dtype=ember.uint8)
    d = _delta(before, memory.stats())
    assert d["allocated_bytes"] == 1001 and d["live_blocks"] == 1
    assert d["cached_bytes"] == 0 and d["cached_blocks"] == 0
    assert d["cache_hits"] == 1 and d["cache_misses"] == 1
    # the allocator's own statistics say the same
    own = memory.get_allocator().stats()
    assert own["cached_blocks"] == 0 and own["cache_hits"] >= 1
    del u
    assert _delta(before, memory.stats())["cached_blocks"] == 1


def test_empty_cache_returns_every_block(cache):
    before = memory.stats()
    ts = [ember.empty(n, dtype=ember.uint8) for n in (10, 100, 5000, 3 << 20)]
    del ts
    s = memory.stats()
    assert s["cached_blocks"] == before["cached_blocks"] + 4
    assert s["cached_bytes"] == sum(memory.block_capacity(n)
                                    for n in (10, 100, 5000, 3 << 20))
    memory.empty_cache()
    s = memory.stats()
    assert s["cached_blocks"] == 0 and s["cached_bytes"] == 0
    assert s["allocated_bytes"] == before["allocated_bytes"]
    memory.empty_cache()  # emptying an empty cache is fine
    assert memory.stats() == s


def test_empty_cache_leaves_live_tensors_alone(cache):
    t = ember.full((100,), 7.0)
    memory.empty_cache()
    assert t.tolist() == [7.0] * 100


def test_cache_limit_bounds_the_cache(cache):
    assert memory.get_cache_limit() == CACHE_LIMIT
    assert memory.set_cache_limit(1024) == CACHE_LIMIT
    a, b = ember.empty(1000, dtype=ember.uint8), ember.empty(1000, dtype=ember.uint8)
    del a, b  # only one 1024-byte block fits
    s = memory.stats()
    assert s["cached_blocks"] == 1 and s["cached_bytes"] == 1024
    big = ember.empty(4096, dtype=ember.uint8)
    del big  # does not fit at all: really freed
    assert memory.stats()["cached_blocks"] == 1
    assert memory.set_cache_limit(0) == 1024  # lowering empties the cache
    assert memory.stats()["cached_blocks"] == 0
    t = ember.empty(10)
    del t
    assert memory.stats()["cached_blocks"] == 0  # 0: caching off
    with pytest.raises(ValueError, match="non-negative"):
        memory.set_cache_limit(-1)
    assert memory.get_cache_limit() == 0
    with pytest.raises(TypeError):
        memory.set_cache_limit("big")


@pytest.mark.parametrize("nbytes", [1, 3, 63, 64, 65, 1000, 4097, 1 << 20,
                                    (2 << 20) + 5])
def test_cached_blocks_stay_aligned(cache, nbytes):
    for _ in range(3):  # fresh, then reused
        t = ember.empty(nbytes, dtype=ember.uint8)
        assert t.data_ptr() % 64 == 0
        if nbytes >= 2 << 20:
            assert t.data_ptr() % (2 << 20) == 0  # huge-page aligned
        t.fill_(1)
        del t


@pytest.mark.noleakcheck
def test_reused_large_block_costs_no_page_faults(cache):
    n = 4 << 20  # 16 MiB of float32: 4096 pages of 4 KiB
    t = ember.empty(n)
    t.fill_(1.0)
    address = t.data_ptr()
    del t
    start = _minor_faults()
    u = ember.empty(n)
    u.fill_(2.0)
    faults = _minor_faults() - start
    assert u.data_ptr() == address
    assert faults < 64, f"{faults} minor faults touching a reused block"
    del u


def test_raw_entry_points_bypass_the_cache(cache):
    cpu = memory.get_allocator()
    before = cpu.stats()
    for _ in range(3):
        address = cpu.raw_malloc(1000)
        assert address % 64 == 0
        cpu.raw_free(address)
    assert cpu.stats() == before


def test_python_allocators_bypass_the_cache(cache):
    counting = memory.CountingAllocator()
    before = memory.stats()
    with memory.use_allocator(counting):
        for _ in range(3):
            t = ember.empty(100)
            del t
    assert counting.num_allocs == 3 and counting.num_frees == 3
    d = _delta(before, memory.stats())
    assert d["num_allocs"] == 3 and d["num_frees"] == 3
    assert d["cached_blocks"] == 0 and d["cache_hits"] == 0
    assert d["cache_misses"] == 0


def test_poisoning_allocator_still_sees_every_block(cache):
    poison = memory.PoisoningAllocator()
    with memory.use_allocator(poison):
        for _ in range(2):
            t = ember.empty(8, dtype=ember.uint8)
            assert t.tolist() == [memory.PoisoningAllocator.FRESH] * 8
            del t
    assert poison.num_allocs == 2 and poison.num_frees == 2


@pytest.mark.noleakcheck
def test_threads_never_share_a_block(cache):
    import threading

    errors = []
    before = memory.stats()

    def work(seed):
        try:
            held = []
            for i in range(300):
                n = 1 + (seed * 7919 + i * 104729) % 3000
                t = ember.empty(n, dtype=ember.int32)
                t.fill_(seed)
                held.append(t)
                if len(held) > 4:
                    old = held.pop(0)
                    if set(old.tolist()) != {seed}:
                        errors.append(f"thread {seed}: block overwritten")
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(1, 5)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    after = memory.stats()
    assert after["live_blocks"] == before["live_blocks"]
    assert after["allocated_bytes"] == before["allocated_bytes"]
    assert 0 < after["cached_bytes"] <= CACHE_LIMIT
    assert after["num_allocs"] - before["num_allocs"] == 4 * 300


@pytest.mark.noleakcheck
@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork")
def test_forked_child_can_allocate(cache):
    import os

    t = ember.empty(100)
    del t  # cached in the parent, inherited by the child
    pid = os.fork()
    if pid == 0:  # the child: allocate from the inherited cache, then leave
        ok = False
        try:
            u = ember.full((100,), 3.0)
            ok = u.tolist() == [3.0] * 100 and memory.stats()["cache_hits"] > 0
            del u
            memory.empty_cache()
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
