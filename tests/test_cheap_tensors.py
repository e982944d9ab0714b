"""The fast paths behind cheap tensor objects (issue 15): ember.Tensor's own
dealloc (Note [ember.Tensor's own dealloc] in c/python/Variable.c), the
per-thread header free lists (Note [Header free lists] in
c/th/THHeaderCache.h), the one-item fast path of t[i] / t[a:b]
(c/python/Indexing.c), small ints read without a call (THPUtils_smallInt in
c/python/THP.h), the self-only pin frame (c/python/Pin.c) and its
dispatch (Note [Methods whose only tensor is self] in c/python/Autograd.c),
and the free list of tensor objects (Note [A free list of tensor objects]
in c/python/Variable.c).  NumPy is the
value oracle; torch, where installed, the message oracle.  No timing here: bench/bench_core.py measures."""

import gc
import sys
import threading
import weakref

import numpy as np
import pytest

import ember

try:
    import torch
except ImportError:  # torch is the message oracle where installed
    torch = None


class Marker:
    """An object whose death a weak reference can watch."""


# ---- ember.Tensor's dealloc -------------------------------------------------


def test_instance_dict_is_freed_with_the_tensor():
    t = ember.zeros(2)
    value = Marker()
    t.note = value
    watch = weakref.ref(value)
    del value
    assert watch() is not None
    del t
    assert watch() is None


def test_weakref_callback_runs_when_the_tensor_dies():
    seen = []
    t = ember.ones(3)
    ref = weakref.ref(t, lambda r: seen.append(r))
    del t
    assert seen == [ref] and ref() is None


def test_dealloc_keeps_a_pending_exception():
    t = ember.zeros(1)
    t.note = Marker()
    with pytest.raises(KeyError, match="kept"):
        try:
            raise KeyError("kept")
        finally:
            del t  # its dict is cleared while the KeyError is in flight


def test_heap_type_references_balance():
    # (counted outside the asserts: pytest's rewriting of an assert holds
    # the objects it names while it runs)
    many = [ember.zeros(1)[0:1] for _ in range(10)]
    held = sys.getrefcount(ember.Tensor)
    del many[5:]
    half = sys.getrefcount(ember.Tensor)
    del many
    after = sys.getrefcount(ember.Tensor)
    assert (held - half, held - after) == (5, 10)  # one per instance


def test_subclasses_keep_their_del_and_type_references():
    deleted = []

    class Logged(ember.Tensor):
        def __del__(self):
            deleted.append(self.tolist())

    before = sys.getrefcount(Logged)
    t = ember._C._make_subclass(Logged, ember.zeros(2), False)
    t.note = Marker()
    del t
    after = sys.getrefcount(Logged)
    assert deleted == [[0.0, 0.0]] and after == before
    p = ember.nn.Parameter(ember.ones(2))
    held = sys.getrefcount(ember.nn.Parameter)
    del p
    after = sys.getrefcount(ember.nn.Parameter)
    assert held - after == 1


def collected_in_a_cycle(make):
    """Whether a tensor from make(), in a cycle through its own dict, is
    freed by the collector."""
    t = make()
    t.me = t
    watch = weakref.ref(t)
    del t
    gc.collect()
    return watch() is None


def test_tensor_in_a_cycle_through_its_dict_is_collected():
    assert collected_in_a_cycle(lambda: ember.zeros(2))


# ---- header free lists -------------------------------------------------------


def test_reused_headers_carry_nothing_over():
    a = np.arange(6, dtype=np.float32)
    lent = ember.from_numpy(a)
    lent_version = lent.add_(1)._version
    assert lent_version == 1
    del lent  # its tensor, storage and counter headers are free now
    fresh = ember.empty(4)
    assert fresh._version == 0 and fresh.storage_offset() == 0
    assert fresh.stride() == (1,) and fresh.shape == (4,)
    fresh.fill_(2.0)  # the storage is writable, unlike a read-only lend
    np.testing.assert_array_equal(a, np.arange(1, 7, dtype=np.float32))


def test_memory_stats_count_each_fresh_tensor():
    before = ember.memory.stats()
    kept = [ember.empty(4) for _ in range(40)]
    views = [k[1:3] for k in kept]
    mid = ember.memory.stats()
    assert mid["live_blocks"] - before["live_blocks"] == 40
    del kept, views
    after = ember.memory.stats()
    assert after["live_blocks"] == before["live_blocks"]
    assert after["allocated_bytes"] == before["allocated_bytes"]


def test_tensors_made_and_freed_on_threads():
    base = ember.arange(12.0).view(3, 4)
    results = []

    def work():
        local = []
        for i in range(50):
            t = ember.empty(3).fill_(i)
            local.append((t[1:].sum().item(), base.transpose(0, 1)[i % 4]))
        results.append(local)

    before = ember.memory.stats()["live_blocks"]
    threads = [threading.Thread(target=work) for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(results) == 3
    for local in results:
        for i, (total, column) in enumerate(local):
            assert total == 2.0 * i
            np.testing.assert_array_equal(column.numpy(),
                                          base.numpy()[:, i % 4])
    # the views made on the threads outlive them here, then go
    del results
    assert ember.memory.stats()["live_blocks"] == before


# ---- t[i] and t[a:b] ----------------------------------------------------------


@pytest.mark.parametrize("index", [0, 2, -1, -4, slice(1, 3), slice(None),
                                   slice(-2, None), slice(None, None, 2),
                                   slice(5, 1), slice(1, 100, 3),
                                   slice(-100, 2)])
def test_one_item_index_matches_numpy(index):
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    t = ember.from_numpy(a)
    view = t[index]
    np.testing.assert_array_equal(view.numpy(), a[index])
    assert view.stride() == tuple(s // 4 for s in a[index].strides)
    view.add_(0)
    assert t._version == 1  # a view shares its base's counter


def test_one_item_index_errors():
    t = ember.zeros(4, 6)
    with pytest.raises(IndexError) as out_of_range:
        t[4]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        t[::-1]
    with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
        ember.tensor(1.0)[0]
    if torch is not None:
        with pytest.raises(IndexError) as expected:
            torch.zeros(4, 6)[4]
        assert str(out_of_range.value) == str(expected.value)


def test_one_item_index_of_a_strided_view():
    a = np.arange(24, dtype=np.float64).reshape(4, 6)
    t = ember.from_numpy(a).transpose(0, 1)
    np.testing.assert_array_equal(t[2].numpy(), a.T[2])
    np.testing.assert_array_equal(t[1:5:2].numpy(), a.T[1:5:2])
    assert t[1:5:2].storage_offset() == 1


# ---- bounds and sizes read straight from small ints ----------------------------
# Exact ints of one CPython digit (|v| < 2**30) are read without a call
# (THPUtils_smallInt); everything else takes the general path.  Both paths
# must agree.

BIG = 2**40


@pytest.mark.parametrize("start", [None, 0, 1, -1, -3, 4, 7, -7, 2**30 - 1,
                                   2**30, -(2**30), BIG, -BIG, True,
                                   np.int64(2)])
@pytest.mark.parametrize("stop", [None, 0, 3, -1, 9, -9, 2**30, -BIG, BIG,
                                  False, np.int64(-2)])
def test_slice_bounds_match_numpy(start, stop):
    a = np.arange(24, dtype=np.float32).reshape(6, 4)
    t = ember.from_numpy(a)
    view = t[start:stop]
    expected = a[start:stop]
    np.testing.assert_array_equal(view.numpy(), expected)
    assert view.shape == expected.shape
    if expected.size:
        offset = (expected.__array_interface__["data"][0]
                  - a.__array_interface__["data"][0]) // 4
        assert view.storage_offset() == offset


@pytest.mark.parametrize("index", [2**30 - 1, 2**30, -(2**30), -(2**30) - 1,
                                   BIG])
def test_int_index_out_of_range_names_the_value(index):
    with pytest.raises(IndexError) as caught:
        ember.zeros(4, 6)[index]
    assert str(index) in str(caught.value)
    if torch is not None:
        with pytest.raises(IndexError) as expected:
            torch.zeros(4, 6)[index]
        assert str(caught.value) == str(expected.value)


def test_sizes_and_dims_from_small_and_large_ints():
    t = ember.arange(24.0)
    assert t.view(4, -1).shape == (4, 6)
    assert t.reshape(-1, 2).shape == (12, 2)
    assert t.view(4, 6).transpose(-1, 0).shape == (6, 4)
    assert t.view(4, 6).transpose(np.int64(1), 0).shape == (6, 4)
    for shape in [(2**30, 1), (BIG, 0), (-(2**30), 1)]:
        with pytest.raises(RuntimeError):
            t.view(*shape)
    with pytest.raises(IndexError, match="Dimension out of range"):
        t.view(4, 6).transpose(2**30, 0)
    if torch is not None:
        with pytest.raises(RuntimeError) as expected:
            torch.arange(24.0).view(2**30, 1)
        with pytest.raises(RuntimeError) as caught:
            t.view(2**30, 1)
        assert str(caught.value) == str(expected.value)


def test_a_view_of_a_rebound_tensor_sees_its_new_data():
    # The pin of self (the fast path of Note [Pinned arguments]) must take
    # the tensor's THTensor at the call, not a stale one.
    t = ember.zeros(4, 6)
    v = t.view(24)
    t.data = ember.ones(2, 3)
    assert t.view(6).tolist() == [1.0] * 6
    assert t[1:2].tolist() == [[1.0, 1.0, 1.0]]
    assert v.tolist() == [0.0] * 24


# ---- the free list of tensor objects -------------------------------------------


def test_a_reused_tensor_object_starts_empty():
    # Each round frees a tensor that carried everything an object can carry
    # and makes fresh ones, which (on CPython 3.11) reuse its memory.
    for _ in range(40):
        old = ember.ones(3, requires_grad=True)
        (old * 2).sum().backward()
        old.note = Marker()
        old.register_hook(lambda g: g)
        watch = weakref.ref(old)
        del old
        assert watch() is None
        fresh = [ember.zeros(2).transpose(0, 0) for _ in range(4)]
        for t in fresh:
            assert type(t) is ember.Tensor
            assert t.grad is None and t.grad_fn is None
            assert not t.requires_grad and t.is_leaf
            assert not hasattr(t, "note") and t.__dict__ == {}
            assert weakref.getweakrefcount(t) == 0
            assert gc.is_tracked(t)
            refs = sys.getrefcount(t)  # the list's, t's, the argument's
            assert refs == 3
            assert t.tolist() == [0.0, 0.0]


def test_reused_tensor_objects_hold_their_type_references():
    # (counted outside the asserts, which hold what they name)
    before = sys.getrefcount(ember.Tensor)
    for _ in range(3):
        many = [ember.empty(1) for _ in range(50)]
        held = sys.getrefcount(ember.Tensor)
        del many
        after = sys.getrefcount(ember.Tensor)
        assert (held - before, after - before) == (50, 0)


def test_tensors_in_cycles_are_collected_between_reuses():
    # A tensor in a garbage cycle is finalized and freed by the collector
    # (and not kept: Note [A free list of tensor objects]); the tensors
    # made after it, some on reused memory, must be tracked and collected
    # the same way.
    for _ in range(5):
        assert collected_in_a_cycle(lambda: ember.ones(2))
        plain = [ember.ones(2) for _ in range(3)]  # reuse, then free again
        assert [p.tolist() for p in plain] == [[1.0, 1.0]] * 3
        del plain
        assert collected_in_a_cycle(lambda: ember.ones(2)[0:1])


# ---- methods whose only tensor is self --------------------------------------------


def test_self_only_methods_record_autograd():
    x = ember.arange(6.0).view(2, 3).requires_grad_()
    y = x.transpose(0, 1)
    assert y.grad_fn is not None and y.requires_grad
    y.narrow(0, 1, 2).sum().backward()
    assert x.grad.tolist() == [[0.0, 1.0, 1.0], [0.0, 1.0, 1.0]]
    with ember.no_grad():
        assert x.transpose(0, 1).grad_fn is None


def test_self_only_methods_check_their_arguments():
    t = ember.zeros(2, 3)
    with pytest.raises(TypeError):
        t.transpose(0, 1.0)
    with pytest.raises(TypeError):
        t.transpose(0)
    assert t.transpose(True, 0).shape == (3, 2)  # bools take the parser
    assert t.transpose(dim1=0, dim0=1).shape == (3, 2)
    assert t.narrow(1, -2, 2).shape == (2, 2)
    assert ember.empty(2, 3, dtype=ember.float64).dtype == ember.float64
    assert ember.empty(0).shape == (0,) and ember.empty(()).shape == ()
    if torch is not None:
        for dims in [(0, 2), (-3, 0)]:
            with pytest.raises(IndexError) as expected:
                torch.zeros(2, 3).transpose(*dims)
            with pytest.raises(IndexError) as caught:
                t.transpose(*dims)
            assert str(caught.value) == str(expected.value)
