"""Shared-memory storages (c/th/THShared.c, c/python/Storage.c) and the
paths that use them: ember.multiprocessing queues and DataLoader workers.

Note [Shared memory by file descriptor]: a shared storage is a nameless
memory file, so nothing may appear in /dev/shm, and every descriptor must be
closed when its storage dies, in a worker that crashes too.  Workers use the
fork start method (PyTorch's default on Linux); kept small: these tests stay
in the leak gates.
"""
import gc
import multiprocessing
import multiprocessing.resource_sharer
import os
import signal

import numpy as np
import pytest

import ember
import ember.multiprocessing as emp
from ember.utils.data import DataLoader, Dataset, TensorDataset


def open_fds():
    fds = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the directory listing's own descriptor
            pass
    return set(fds.items())


def shm_entries():
    """ember's own entries in /dev/shm (the shm_open fallback names them
    ember_<pid>_<n>).  Other processes on the machine create entries there
    too (multiprocessing's semaphores, sem.mp-*), so only ours count."""
    if not os.path.isdir("/dev/shm"):
        return set()
    return {name for name in os.listdir("/dev/shm") if name.startswith("ember_")}


@pytest.fixture
def no_leaks():
    """Fails a test that leaves a descriptor, a /dev/shm entry or a child."""
    gc.collect()
    fds, shm = open_fds(), shm_entries()
    yield
    gc.collect()
    # The listener that serves this process's descriptors to others
    # (multiprocessing.reduction.DupFd) is Python's, started on first use.
    multiprocessing.resource_sharer.stop()
    assert open_fds() - fds == set()
    assert shm_entries() - shm == set()
    assert multiprocessing.active_children() == []


def test_share_memory_moves_in_place_and_views_follow(no_leaks):
    base = ember.arange(12.).view(3, 4)
    row = base[1]
    kept = base.numpy()  # a pointer to the old bytes, kept alive by the move
    assert not base.is_shared()
    assert base.share_memory_() is base
    assert base.is_shared() and row.is_shared()
    row += 100
    np.testing.assert_array_equal(base.numpy()[1], np.arange(4, 8) + 100)
    np.testing.assert_array_equal(kept, np.arange(12.).reshape(3, 4))
    base.share_memory_()  # a no-op once shared
    assert base.is_shared()


def test_new_shared_storage_and_its_descriptor(no_leaks):
    storage = ember.UntypedStorage._new_shared(32)
    assert storage.is_shared() and storage.nbytes() == 32
    assert storage.tolist() == [0] * 32
    fd, nbytes = storage._share_fd_cpu_()
    assert nbytes == 32 and os.fstat(fd).st_size == 32
    other = ember.UntypedStorage._new_shared_fd_cpu(fd, 32)
    view = other._tensor(ember.int32, 2, (3,), (2,))
    view.fill_(7)
    assert storage._tensor(ember.int32, 0, (8,), (1,)).tolist() == [0, 0, 7, 0, 7, 0, 7, 0]
    del storage, other, view
    with pytest.raises(OSError):  # the last holder closed it
        os.fstat(fd)
    empty = ember.UntypedStorage._new_shared(0)
    assert empty.is_shared() and empty.nbytes() == 0
    assert ember.empty(0).share_memory_().is_shared()


def test_shared_storage_bad_input(no_leaks):
    storage = ember.UntypedStorage._new_shared(8)
    fd, _ = storage._share_fd_cpu_()
    with pytest.raises(ValueError, match="holds 8 bytes, fewer than the 9"):
        ember.UntypedStorage._new_shared_fd_cpu(fd, 9)
    with pytest.raises(ValueError, match="non-negative"):
        ember.UntypedStorage._new_shared(-1)
    with pytest.raises(RuntimeError, match="Bad file descriptor"):
        ember.UntypedStorage._new_shared_fd_cpu(-1, 8)
    with pytest.raises(RuntimeError, match="out of bounds"):
        storage._tensor(ember.float32, 1, (2,), (1,))
    with pytest.raises(RuntimeError, match="mismatch in length of strides"):
        storage._tensor(ember.float32, 0, (2,), ())
    with pytest.raises(TypeError):
        storage._tensor("float", 0, (2,), (1,))


def _add_one_and_reply(inbox, outbox, done):
    tensor = inbox.get()
    tensor += 1
    outbox.put(ember.arange(4.) * 2)
    done.wait()  # the reply's descriptor is served by this process


def test_tensors_cross_processes_by_shared_memory(no_leaks):
    ctx = emp.get_context("fork")
    inbox, outbox, done = ctx.Queue(), ctx.Queue(), ctx.Event()
    tensor = ember.zeros(3)
    child = ctx.Process(target=_add_one_and_reply, args=(inbox, outbox, done))
    child.start()
    inbox.put(tensor)
    reply = outbox.get(timeout=30)
    done.set()
    child.join()
    child.close()
    assert tensor.is_shared() and tensor.tolist() == [1, 1, 1]
    assert reply.is_shared() and reply.tolist() == [0, 2, 4, 6]
    for q in (inbox, outbox):
        q.close()
        q.join_thread()


def test_worker_batches_come_back_in_shared_memory(no_leaks):
    data = TensorDataset(ember.arange(40.).view(20, 2), ember.arange(20))
    batches = list(DataLoader(data, batch_size=4, num_workers=2))
    assert [b[1].tolist() for b in batches] == [list(range(i, i + 4)) for i in range(0, 20, 4)]
    assert all(b[0].is_shared() and b[1].is_shared() for b in batches)
    del batches


class KillsItsWorker(Dataset):
    def __init__(self, how):
        self.how = how

    def __len__(self):
        return 16

    def __getitem__(self, i):
        if i == 9:
            if self.how == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(3)
        return ember.full((2,), float(i))


@pytest.mark.parametrize("how", ["sigkill", "exit"])
def test_a_dead_worker_raises_and_leaks_nothing(no_leaks, how):
    loader = DataLoader(KillsItsWorker(how), batch_size=2, num_workers=2)
    seen, batch = [], None
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid\(s\) \d+\) "
                                           r"exited unexpectedly"):
        for batch in loader:
            seen.append(batch[0, 0].item())
    # Batches the dead worker had made but not yet handed over are lost
    # with it (their memory was its to pass on).
    assert seen == [0.0, 2.0, 4.0, 6.0][:len(seen)]
    del batch, loader
