"""DataLoader: batches from a dataset, in the main process or in worker
processes (torch.utils.data.dataloader).

With num_workers > 0, each worker has an index queue and all share one
result queue.  The loader keeps prefetch_factor batches per worker in
flight, hands batches out in sampler order whatever order they arrive in,
notices a worker that died, and stops its workers when the iterator ends,
fails or is dropped (unless persistent_workers keeps them for the next
epoch).  Batch tensors come back through shared memory (ember.multiprocessing).
"""
import itertools
import multiprocessing
import os
import queue
import time

import ember.multiprocessing  # noqa: F401  (registers the tensor reducers)

from . import _random
from ._utils import MP_STATUS_CHECK_INTERVAL, ExceptionWrapper
from ._utils import worker as _worker
from ._utils.collate import default_collate, default_convert
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "get_worker_info", "default_collate", "default_convert"]

get_worker_info = _worker.get_worker_info


class _InfiniteConstantSampler(Sampler):
    """Index None forever: an iterable dataset's workers ignore the index."""

    def __iter__(self):
        while True:
            yield None


class DataLoader:
    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None,
                 batch_sampler=None, num_workers=0, collate_fn=None,
                 pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None,
                 *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device=""):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; "
                             "use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in "
                             "multiprocessing.let num_workers > 0 to enable "
                             "multiprocessing, otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory  # accepted; meaningful once CUDA exists
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.persistent_workers = persistent_workers
        self.generator = generator
        self._is_iterable = isinstance(dataset, IterableDataset)
        (self.sampler, self.batch_sampler, self.batch_size,
         self.drop_last) = self._check_sampling(shuffle, sampler, batch_sampler,
                                                batch_size, drop_last, generator)
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if self._auto_collation else default_convert)
        self._iterator = None

    def _check_sampling(self, shuffle, sampler, batch_sampler, batch_size, drop_last,
                        generator):
        if self._is_iterable:
            if shuffle not in (False, None):
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"shuffle option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"sampler option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with "
                                 "batch_size, shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is "
                             "mutually exclusive with drop_last")
        if sampler is None:
            if self._is_iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(self.dataset, generator=generator)
            else:
                sampler = SequentialSampler(self.dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        return sampler, batch_sampler, batch_size, drop_last

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self):
        if self._is_iterable:
            length = len(self.dataset)
            if self.batch_size is not None:
                length = (length // self.batch_size if self.drop_last
                          else -(-length // self.batch_size))
            return length
        return len(self._index_sampler)

    def __iter__(self):
        if self.num_workers == 0:
            return _SingleProcessDataLoaderIter(self)
        if not self.persistent_workers:
            return _MultiProcessingDataLoaderIter(self)
        if self._iterator is None:
            self._iterator = _MultiProcessingDataLoaderIter(self)
        else:
            self._iterator._reset(self)
        return self._iterator


class _BaseDataLoaderIter:
    def __init__(self, loader):
        self._dataset = loader.dataset
        self._is_iterable = loader._is_iterable
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._collate_fn = loader.collate_fn
        self._timeout = loader.timeout
        self._reset(loader, first_iter=True)

    def _reset(self, loader, first_iter=False):
        self._sampler_iter = iter(self._index_sampler)
        self._base_seed = _random.draw_seed(loader.generator)

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._index_sampler)

    def _next_index(self):
        return next(self._sampler_iter)

    def __next__(self):
        return self._next_data()


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._fetcher = _worker.create_fetcher(
            self._is_iterable, self._dataset, self._auto_collation, self._collate_fn,
            self._drop_last)

    def _next_data(self):
        return self._fetcher.fetch(self._next_index())


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    def __init__(self, loader):
        self._shutdown = True  # until there is something to shut down
        self._num_workers = loader.num_workers
        self._prefetch_factor = loader.prefetch_factor
        self._persistent_workers = loader.persistent_workers
        self._worker_init_fn = loader.worker_init_fn
        context = loader.multiprocessing_context
        if context is None:
            context = multiprocessing.get_context()
        elif isinstance(context, str):
            context = multiprocessing.get_context(context)
        self._context = context
        super().__init__(loader)

    def _start_workers(self):
        ctx = self._context
        self._done_event = ctx.Event()
        self._data_queue = ctx.Queue()
        self._index_queues, self._workers = [], []
        self._shutdown = False
        for i in range(self._num_workers):
            index_queue = ctx.Queue()
            process = ctx.Process(
                target=_worker.worker_loop,
                args=(self._is_iterable, self._dataset, index_queue, self._data_queue,
                      self._done_event, self._auto_collation, self._collate_fn,
                      self._drop_last, self._base_seed, self._worker_init_fn, i,
                      self._num_workers),
                daemon=True)
            process.start()
            self._index_queues.append(index_queue)
            self._workers.append(process)

    def _reset(self, loader, first_iter=False):
        super()._reset(loader, first_iter)
        self._send_idx = 0   # the next task to hand to a worker
        self._rcvd_idx = 0   # the next task to give to the user
        self._task_info = {}  # task -> (worker,) while out, (worker, data) once back
        self._tasks_outstanding = 0
        self._workers_status = [True] * self._num_workers
        self._worker_queue_cycle = itertools.cycle(range(self._num_workers))
        if first_iter:
            self._start_workers()
        else:
            self._resume_workers()
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _resume_workers(self):
        """A persistent worker answers ResumeIteration once its previous
        epoch's leftovers are through the queue; those are dropped."""
        for index_queue in self._index_queues:
            index_queue.put(_worker.ResumeIteration(self._base_seed))
        resumed = 0
        while resumed < self._num_workers:
            task_idx, _ = self._get_data()
            if isinstance(task_idx, _worker.ResumeIteration):
                resumed += 1

    def _try_put_index(self):
        if self._tasks_outstanding >= self._prefetch_factor * self._num_workers:
            return
        try:
            index = self._next_index()
        except StopIteration:
            return
        for _ in range(self._num_workers):
            worker_id = next(self._worker_queue_cycle)
            if self._workers_status[worker_id]:
                break
        else:
            return  # every worker is done (iterable dataset)
        self._index_queues[worker_id].put((self._send_idx, index))
        self._task_info[self._send_idx] = (worker_id,)
        self._tasks_outstanding += 1
        self._send_idx += 1

    def _check_workers_alive(self):
        dead = [w for w in self._workers if not w.is_alive()]
        if dead:
            pids = ", ".join(str(w.pid) for w in dead)
            self._shutdown_workers()
            raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited unexpectedly")

    def _get_data(self):
        """The next message of the result queue; fails on a dead worker or
        once `timeout` seconds pass without one."""
        started = time.monotonic()
        while True:
            wait = MP_STATUS_CHECK_INTERVAL
            if self._timeout > 0:
                left = self._timeout - (time.monotonic() - started)
                if left <= 0:
                    self._shutdown_workers()
                    raise RuntimeError(
                        f"DataLoader timed out after {self._timeout} seconds")
                wait = min(wait, left)
            try:
                return self._data_queue.get(timeout=wait)
            except queue.Empty:
                self._check_workers_alive()
            except (OSError, EOFError) as error:
                # A batch whose shared memory was to be served by a worker
                # that died (or a message it died writing): name the worker.
                self._wait_for_a_dead_worker()
                try:
                    self._check_workers_alive()
                except RuntimeError as dead:
                    raise dead from error
                raise

    def _wait_for_a_dead_worker(self, patience=5 * MP_STATUS_CHECK_INTERVAL):
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline:
            if any(not w.is_alive() for w in self._workers):
                return
            time.sleep(MP_STATUS_CHECK_INTERVAL / 10)

    def _next_data(self):
        while True:
            while self._rcvd_idx < self._send_idx:
                info = self._task_info[self._rcvd_idx]
                if len(info) == 2 or self._workers_status[info[0]]:
                    break
                del self._task_info[self._rcvd_idx]  # its worker ended
                self._rcvd_idx += 1
            else:
                if not self._persistent_workers:
                    self._shutdown_workers()
                raise StopIteration
            if len(self._task_info[self._rcvd_idx]) == 2:
                data = self._task_info.pop(self._rcvd_idx)[1]
                self._rcvd_idx += 1
                return self._process_data(data)
            task_idx, data = self._get_data()
            self._tasks_outstanding -= 1
            if isinstance(data, _worker.IterableDatasetStopIteration):
                self._workers_status[data.worker_id] = False
                self._try_put_index()
            elif task_idx == self._rcvd_idx:
                del self._task_info[task_idx]
                self._rcvd_idx += 1
                return self._process_data(data)
            else:
                self._task_info[task_idx] += (data,)

    def _process_data(self, data):
        self._try_put_index()
        if isinstance(data, ExceptionWrapper):
            data.reraise()
        return data

    def _shutdown_workers(self):
        if self._shutdown:
            return
        self._shutdown = True
        self._done_event.set()
        for index_queue in self._index_queues:
            index_queue.put(None)
        for process in self._workers:
            process.join(timeout=MP_STATUS_CHECK_INTERVAL * 5)
            if process.is_alive():
                process.terminate()
                process.join()
            process.close()
        # Our end of each pipe closes now, not whenever a traceback that
        # holds this iterator lets go: a queue's writer closes with its
        # feeder thread (joined: the workers are gone, so it cannot block
        # on a full pipe), the rest with the objects (the processes hold
        # the queues too, in their arguments).
        for q in self._index_queues + [self._data_queue]:
            q.close()
            q.join_thread()
        self._index_queues, self._workers, self._data_queue = [], [], None

    def __del__(self):
        self._shutdown_workers()
