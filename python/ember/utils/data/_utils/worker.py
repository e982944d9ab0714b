"""The loop a DataLoader worker process runs (torch.utils.data._utils.worker).

A worker takes (task index, indices) from its own index queue, fetches and
collates the samples, and puts (task index, batch) on the result queue it
shares with its siblings; an exception travels as an ExceptionWrapper.
It stops on None, when the loader sets `done_event`, or when the loader's
process is gone.
"""
import os
import queue
import random
from dataclasses import dataclass

import numpy as np

import ember

_worker_info = None


@dataclass(frozen=True)
class WorkerInfo:
    id: int
    num_workers: int
    seed: int
    dataset: object


def get_worker_info():
    """In a DataLoader worker: its WorkerInfo (id, num_workers, seed,
    dataset); in the main process: None."""
    return _worker_info


@dataclass(frozen=True)
class IterableDatasetStopIteration:
    """Sent by a worker whose iterable dataset is exhausted."""
    worker_id: int


@dataclass(frozen=True)
class ResumeIteration:
    """Sent to a persistent worker at a new epoch; it answers in kind."""
    seed: int = None


def _seed_everything(seed, worker_id, base_seed):
    random.seed(seed)
    ember.manual_seed(seed)
    np.random.seed(np.random.SeedSequence([worker_id, base_seed]).generate_state(4))


class _MapFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset, self.auto_collation = dataset, auto_collation
        self.collate_fn, self.drop_last = collate_fn, drop_last

    def fetch(self, index):
        if self.auto_collation:
            if hasattr(self.dataset, "__getitems__") and self.dataset.__getitems__:
                data = self.dataset.__getitems__(index)
            else:
                data = [self.dataset[i] for i in index]
        else:
            data = self.dataset[index]
        return self.collate_fn(data)


class _IterableFetcher(_MapFetcher):
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        super().__init__(dataset, auto_collation, collate_fn, drop_last)
        self.iterator = iter(dataset)
        self.ended = False

    def fetch(self, index):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.iterator))
        data = []
        for _ in index:
            try:
                data.append(next(self.iterator))
            except StopIteration:
                self.ended = True
                break
        if not data or (self.drop_last and len(data) < len(index)):
            raise StopIteration
        return self.collate_fn(data)


def create_fetcher(is_iterable, dataset, auto_collation, collate_fn, drop_last):
    cls = _IterableFetcher if is_iterable else _MapFetcher
    return cls(dataset, auto_collation, collate_fn, drop_last)


def _loader_is_gone(parent_pid):
    # A worker whose parent dies is adopted by another process.  (The
    # parent is the loader's process under fork and spawn, the fork server
    # under forkserver, which lives as long as the loader's process.)
    return os.getppid() != parent_pid


def worker_loop(is_iterable, dataset, index_queue, data_queue, done_event,
                auto_collation, collate_fn, drop_last, base_seed, init_fn,
                worker_id, num_workers):
    from . import ExceptionWrapper, MP_STATUS_CHECK_INTERVAL
    global _worker_info
    parent_pid = os.getppid()
    try:
        # As PyTorch's workers: one thread each, so that num_workers
        # processes do not each start a pool as large as the machine.
        ember.set_num_threads(1)
        seed = base_seed + worker_id
        _seed_everything(seed, worker_id, base_seed)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed,
                                  dataset=dataset)
        init_error = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = create_fetcher(is_iterable, dataset, auto_collation, collate_fn,
                                     drop_last)
        except Exception:
            init_error = ExceptionWrapper(where=f"in DataLoader worker process {worker_id}")
        iteration_ended = False
        while not _loader_is_gone(parent_pid):
            try:
                task = index_queue.get(timeout=MP_STATUS_CHECK_INTERVAL)
            except queue.Empty:
                continue
            if isinstance(task, ResumeIteration):
                data_queue.put((task, None))
                iteration_ended = False
                if is_iterable and init_error is None:
                    fetcher = create_fetcher(is_iterable, dataset, auto_collation,
                                             collate_fn, drop_last)
                continue
            if task is None or done_event.is_set():
                break
            if iteration_ended:
                continue
            task_idx, index = task
            if init_error is not None:
                data, init_error = init_error, None
                iteration_ended = True
            else:
                try:
                    data = fetcher.fetch(index)
                except StopIteration:
                    if not is_iterable:
                        raise
                    data = IterableDatasetStopIteration(worker_id)
                    iteration_ended = True
                except Exception:
                    data = ExceptionWrapper(
                        where=f"in DataLoader worker process {worker_id}")
            data_queue.put((task_idx, data))
            del data, index, task  # the batch's memory goes with its last holder
    except KeyboardInterrupt:
        pass
    if done_event.is_set():
        data_queue.cancel_join_thread()
        data_queue.close()
