"""ember.utils.data: datasets, samplers, default_collate and the DataLoader,
against torch.utils.data where PyTorch is installed.  Pure Python over C
entry points tested elsewhere (the shared-memory path is
tests/test_shared_memory.py, which the leak gates run)."""
import collections
import time

import numpy as np
import pytest

import ember
from ember.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset,
                              IterableDataset, RandomSampler, SequentialSampler, Subset,
                              SubsetRandomSampler, TensorDataset, WeightedRandomSampler,
                              default_collate, default_convert, get_worker_info,
                              random_split)


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def to_numpy(obj):
    """Nested batches as NumPy arrays (either library's tensors) and lists."""
    if hasattr(obj, "detach"):
        return obj.detach().numpy()
    if isinstance(obj, dict):
        return {k: to_numpy(v) for k, v in obj.items()}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(to_numpy(v) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_numpy(v) for v in obj)
    return obj


def assert_same_batches(ours, theirs):
    ours, theirs = to_numpy(ours), to_numpy(theirs)
    assert type(ours) is type(theirs)
    if isinstance(ours, np.ndarray):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        np.testing.assert_array_equal(ours, theirs)
    elif isinstance(ours, dict):
        assert ours.keys() == theirs.keys()
        for key in ours:
            assert_same_batches(ours[key], theirs[key])
    elif isinstance(ours, (list, tuple)):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert_same_batches(a, b)
    else:
        assert ours == theirs


def tensor_dataset(lib, n=23):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    y = np.arange(n, dtype=np.int64)
    return lib.utils.data.TensorDataset(lib.from_numpy(x), lib.from_numpy(y))


import ember.utils.data  # noqa: E402  (ember.utils.data, as torch.utils.data)


# ---- DataLoader batches, as PyTorch's --------------------------------------

@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("batch_size,drop_last", [(4, False), (4, True), (1, False),
                                                  (None, False)])
def test_sequential_batches_as_torch(torch, num_workers, batch_size, drop_last):
    ours = DataLoader(tensor_dataset(ember), batch_size=batch_size, drop_last=drop_last,
                      num_workers=num_workers)
    theirs = torch.utils.data.DataLoader(tensor_dataset(torch), batch_size=batch_size,
                                         drop_last=drop_last)
    assert len(ours) == len(theirs)
    assert_same_batches(list(ours), list(theirs))


def test_batch_sampler_and_sampler_arguments_as_torch(torch):
    order = [5, 3, 0, 9, 1]
    ours = DataLoader(tensor_dataset(ember), sampler=order, batch_size=2)
    theirs = torch.utils.data.DataLoader(tensor_dataset(torch), sampler=order, batch_size=2)
    assert_same_batches(list(ours), list(theirs))
    batches = [[1, 2], [7], [0, 4, 6]]
    ours = DataLoader(tensor_dataset(ember), batch_sampler=batches, num_workers=2)
    theirs = torch.utils.data.DataLoader(tensor_dataset(torch), batch_sampler=batches)
    assert len(ours) == 3
    assert_same_batches(list(ours), list(theirs))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_shuffle_visits_every_sample_once_reproducibly(num_workers):
    data = tensor_dataset(ember, 37)
    loader = DataLoader(data, batch_size=5, shuffle=True, num_workers=num_workers)

    def epoch():
        return [i for _, y in loader for i in y.tolist()]

    ember.manual_seed(11)
    first, second = epoch(), epoch()
    assert sorted(first) == sorted(second) == list(range(37))
    assert first != second and first != list(range(37))
    ember.manual_seed(11)
    assert epoch() == first


def test_shuffle_with_a_generator_is_reproducible():
    data = list(range(50))
    orders = [list(DataLoader(data, batch_size=None, shuffle=True,
                              generator=np.random.default_rng(4)))
              for _ in range(2)]
    assert orders[0] == orders[1] and sorted(orders[0]) == data
    assert orders[0] != data


def test_collate_fn_and_auto_collation_off():
    loader = DataLoader(range(7), batch_size=3, collate_fn=lambda b: sum(b))
    assert list(loader) == [3, 12, 6]
    unbatched = list(DataLoader([np.ones(2), np.zeros(2)], batch_size=None))
    assert all(isinstance(b, ember.Tensor) for b in unbatched)


# ---- default_collate ---------------------------------------------------------

Point = collections.namedtuple("Point", "x y")


def nested_samples(lib):
    return [{"image": lib.full((2, 3), float(i)),
             "label": i,
             "weight": 0.5 * i,
             "name": f"s{i}",
             "pair": (np.arange(3, dtype=np.int32) + i, np.float64(i)),
             "point": Point(lib.tensor([i, -i]), [i, i + 1]),
             "flag": bool(i % 2)}
            for i in range(4)]


def test_default_collate_nested_as_torch(torch):
    from torch.utils.data import default_collate as torch_collate
    assert_same_batches(default_collate(nested_samples(ember)),
                        torch_collate(nested_samples(torch)))


def test_default_collate_numpy_and_scalars_as_torch(torch):
    from torch.utils.data import default_collate as torch_collate
    for batch in ([np.float32(1.5), np.float32(2)], [np.int16(3), np.int16(-4)],
                  [np.zeros((2, 2), np.uint8), np.ones((2, 2), np.uint8)],
                  [1, 2, 3], [1.0, 2.5], [True, False], ["a", "b"], [(1, 2.0), (3, 4.0)]):
        assert_same_batches(default_collate(batch), torch_collate(batch))


def test_default_convert_as_torch(torch):
    from torch.utils.data import default_convert as torch_convert
    sample = {"a": np.arange(3), "b": (np.ones(2), "text"), "c": [1, 2]}
    assert_same_batches(default_convert(sample), torch_convert(sample))


def test_default_collate_bad_batches():
    with pytest.raises(RuntimeError, match=r"stack expects each tensor to be equal size, "
                                           r"but got \[2\] at entry 0 and \[3\] at entry 1 "
                                           r"\(collating \['image'\]\)"):
        default_collate([{"image": ember.ones(2)}, {"image": ember.ones(3)}])
    with pytest.raises(RuntimeError, match="each element in list of batch should be of "
                                           "equal size"):
        default_collate([[1, 2], [1]])
    with pytest.raises(TypeError, match="default_collate: batch must contain tensors, numpy "
                                        "arrays, numbers, dicts or lists; found <class "
                                        "'object'>"):
        default_collate([object()])
    with pytest.raises(TypeError, match="found <U1"):
        default_collate([np.array(["a"]), np.array(["b"])])


# ---- workers ---------------------------------------------------------------

class WhoLoadsMe(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = get_worker_info()
        return {"worker": info.id, "seed": info.seed, "initial_seed": ember.initial_seed(),
                "num_workers": info.num_workers, "draw": ember.rand(1),
                "threads": ember.get_num_threads()}


def test_worker_seeding_and_info():
    assert get_worker_info() is None
    ember.manual_seed(0)
    batches = list(DataLoader(WhoLoadsMe(), batch_size=2, num_workers=3))
    workers = [b["worker"][0].item() for b in batches]
    assert workers == [0, 1, 2, 0]  # round robin, delivered in order
    seeds = {b["worker"][0].item(): b["seed"][0].item() for b in batches}
    base = seeds[0]
    assert seeds == {0: base, 1: base + 1, 2: base + 2}
    for b in batches:
        assert (b["initial_seed"] == b["seed"]).all() and (b["num_workers"] == 3).all()
        assert (b["threads"] == 1).all()  # PyTorch's workers run one thread each
    ember.manual_seed(0)
    again = list(DataLoader(WhoLoadsMe(), batch_size=2, num_workers=3))
    assert [b["draw"].tolist() for b in again] == [b["draw"].tolist() for b in batches]
    assert list(DataLoader(WhoLoadsMe(), batch_size=2, num_workers=3))[0]["seed"][0] != base


def test_worker_seeding_as_torch(torch):
    """The same rule: worker i's seed is the epoch's base seed + i."""

    class TorchWhoLoadsMe(torch.utils.data.Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            info = torch.utils.data.get_worker_info()
            return info.id, info.seed, torch.initial_seed()

    def offsets(batches):
        base = batches[0][1][0].item()
        return [(b[0][0].item(), b[1][0].item() - base, b[2][0].item() - base)
                for b in batches]

    theirs = list(torch.utils.data.DataLoader(TorchWhoLoadsMe(), batch_size=2,
                                              num_workers=2))
    ours = list(DataLoader([None] * 6, batch_size=2, num_workers=2,
                           collate_fn=lambda b: (ember.tensor([get_worker_info().id]),
                                                 ember.tensor([get_worker_info().seed]),
                                                 ember.tensor([ember.initial_seed()]))))
    assert offsets(ours) == offsets(theirs)


def init_records_worker(worker_id):
    ember.utils.data.get_worker_info().dataset.started_by = worker_id


class StartedBy(Dataset):
    started_by = None

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return self.started_by


def test_worker_init_fn_runs_in_each_worker():
    loader = DataLoader(StartedBy(), batch_size=1, num_workers=2,
                        worker_init_fn=init_records_worker)
    assert [b.item() for b in loader] == [0, 1, 0, 1]


class FailsAt(Dataset):
    def __init__(self, bad):
        self.bad = bad

    def __len__(self):
        return 10

    def __getitem__(self, i):
        if i == self.bad:
            raise KeyError(f"no sample {i}")
        return i


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_dataset_error_comes_back_with_its_traceback(num_workers):
    loader = iter(DataLoader(FailsAt(5), batch_size=2, num_workers=num_workers))
    assert next(loader).tolist() == [0, 1]
    assert next(loader).tolist() == [2, 3]
    with pytest.raises(KeyError) as error:
        next(loader)
    if num_workers:
        message = str(error.value)
        assert "Caught KeyError in DataLoader worker process 0." in message
        assert "Original Traceback (most recent call last):" in message
        assert "in __getitem__" in message and "no sample 5" in message
    assert next(loader).tolist() == [6, 7]  # the iterator carries on, as PyTorch's


class SlowFirstItem(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        time.sleep(60 if i == 0 else 0)
        return i


def test_timeout():
    # The first batch is the slow one: a test that first waits for a fast batch
    # depends on how soon the worker starts, which took over 2 s in one CI run
    # (a loaded machine forking a large pytest process).
    loader = iter(DataLoader(SlowFirstItem(), batch_size=2, num_workers=1, timeout=1))
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=r"DataLoader timed out after 1 seconds"):
        next(loader)
    assert time.monotonic() - started >= 1  # not before its time


def test_timeout_lets_batches_through():
    loader = DataLoader(list(range(6)), batch_size=2, num_workers=1, timeout=60)
    assert [batch.tolist() for batch in loader] == [[0, 1], [2, 3], [4, 5]]


def test_persistent_workers_keep_their_processes():
    pids = []

    def collate(batch):
        import os
        return os.getpid()

    loader = DataLoader(range(8), batch_size=2, num_workers=2, persistent_workers=True,
                        collate_fn=collate)
    for _ in range(3):
        pids.append(list(loader))
    assert pids[0] == pids[1] == pids[2] and len(set(pids[0])) == 2
    first = iter(loader)
    next(first)  # an epoch left half way: its leftovers are dropped
    assert list(loader) == pids[0]


class Ranges(IterableDataset):
    """Splits its range between workers, as PyTorch's docs show."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))

    def __len__(self):
        return self.n


@pytest.mark.parametrize("num_workers", [0, 2, 3])
def test_iterable_dataset(num_workers):
    batches = [b.tolist() for b in DataLoader(Ranges(11), batch_size=2,
                                              num_workers=num_workers)]
    assert sorted(i for b in batches for i in b) == list(range(11))
    if num_workers == 0:
        assert batches == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10]]
    if num_workers == 2:  # interleaved worker by worker, as PyTorch's
        assert batches == [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9]]
    assert len(DataLoader(Ranges(11), batch_size=2)) == 6
    assert len(DataLoader(Ranges(11), batch_size=2, drop_last=True)) == 5


def test_iterable_dataset_interleaving_as_torch(torch):
    class TorchRanges(torch.utils.data.IterableDataset):
        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            return iter(range(info.id, 11, info.num_workers))

    theirs = [b.tolist() for b in torch.utils.data.DataLoader(TorchRanges(), batch_size=2,
                                                               num_workers=3)]
    ours = [b.tolist() for b in DataLoader(Ranges(11), batch_size=2, num_workers=3)]
    assert ours == theirs


# ---- datasets and samplers -------------------------------------------------

def test_datasets():
    data = TensorDataset(ember.arange(6), ember.arange(6) * 10)
    assert len(data) == 6 and [t.item() for t in data[2]] == [2, 20]
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        TensorDataset(ember.ones(2), ember.ones(3))
    both = ConcatDataset([range(3), range(10, 12)])
    assert len(both) == 5 and [both[i] for i in range(5)] == [0, 1, 2, 10, 11]
    assert both[-1] == 11
    assert [Subset(range(10), [7, 2])[i] for i in range(2)] == [7, 2]
    assert list((Ranges(2) + Ranges(3))) == [0, 1, 0, 1, 2]


def test_random_split_lengths_and_fractions_as_torch(torch):
    for lengths, n in (([3, 7], 10), ([0.33, 0.33, 0.34], 10), ([0.5, 0.5], 7)):
        ours = random_split(range(n), lengths)
        theirs = torch.utils.data.random_split(range(n), lengths)
        assert [len(s) for s in ours] == [len(s) for s in theirs]
        assert sorted(i for s in ours for i in s) == list(range(n))


def test_samplers():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    ember.manual_seed(1)
    assert sorted(RandomSampler(range(9))) == list(range(9))
    drawn = list(RandomSampler(range(3), replacement=True, num_samples=50))
    assert len(drawn) == 50 and set(drawn) <= {0, 1, 2}
    assert sorted(SubsetRandomSampler([4, 8, 15])) == [4, 8, 15]
    weighted = list(WeightedRandomSampler([0.0, 1.0, 0.0, 2.0], 40))
    assert len(weighted) == 40 and set(weighted) <= {1, 3}
    assert sorted(WeightedRandomSampler([1, 1, 1, 1], 4, replacement=False)) == [0, 1, 2, 3]
    batches = BatchSampler(range(7), 3, drop_last=False)
    assert list(batches) == [[0, 1, 2], [3, 4, 5], [6]] and len(batches) == 3
    assert len(BatchSampler(range(7), 3, drop_last=True)) == 2


def test_random_sampler_num_samples_over_length_repeats_whole_permutations():
    ember.manual_seed(3)
    drawn = list(RandomSampler(range(4), num_samples=10))
    assert sorted(drawn[:4]) == sorted(drawn[4:8]) == [0, 1, 2, 3]
    assert len(set(drawn[8:])) == 2


BAD_ARGUMENTS = [
    lambda m: m.RandomSampler(range(3), replacement=1),
    lambda m: m.RandomSampler(range(3), num_samples=0),
    lambda m: m.BatchSampler(range(3), 0, False),
    lambda m: m.BatchSampler(range(3), 2, 1),
    lambda m: m.WeightedRandomSampler([1.0, 2.0], 0),
    lambda m: list(m.WeightedRandomSampler([1.0, 2.0], 3, replacement=False)),
    lambda m: m.random_split(range(10), [3, 3]),
    lambda m: m.DataLoader(range(3), sampler=[0], shuffle=True),
    lambda m: m.DataLoader(range(3), batch_sampler=[[0]], batch_size=2),
    lambda m: m.DataLoader(range(3), num_workers=-1),
    lambda m: m.DataLoader(range(3), prefetch_factor=2),
    lambda m: m.DataLoader(range(3), persistent_workers=True),
    lambda m: m.DataLoader(range(3), timeout=-1),
]


@pytest.mark.parametrize("call", BAD_ARGUMENTS)
def test_bad_arguments_as_torch(torch, call):
    with pytest.raises(Exception) as theirs:
        call(torch.utils.data)
    with pytest.raises(type(theirs.value), match=str(theirs.value).replace("(", r"\(")
                       .replace(")", r"\)").replace(".", r"\.")):
        call(ember.utils.data)


def test_loader_attributes_as_torch(torch):
    for kwargs in (dict(batch_size=3), dict(batch_sampler=[[0, 1]]), dict(batch_size=None),
                   dict(batch_size=2, drop_last=True), dict(shuffle=True)):
        ours = DataLoader(range(5), **kwargs)
        theirs = torch.utils.data.DataLoader(range(5), **kwargs)
        assert (ours.batch_size, ours.drop_last, len(ours)) == \
            (theirs.batch_size, theirs.drop_last, len(theirs))
        assert type(ours.sampler).__name__ == type(theirs.sampler).__name__


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_other_start_methods(context):
    data = TensorDataset(ember.arange(20.).view(10, 2))
    batches = [b[0][:, 0].tolist() for b in DataLoader(
        data, batch_size=4, num_workers=2, multiprocessing_context=context)]
    assert batches == [[0.0, 2.0, 4.0, 6.0], [8.0, 10.0, 12.0, 14.0], [16.0, 18.0]]


def test_an_abandoned_iterator_stops_its_workers():
    import gc
    import multiprocessing
    # Only this loader's workers count: another test's children may still
    # be on their way out when this one starts.
    before = set(multiprocessing.active_children())
    loader = DataLoader(range(100), batch_size=2, num_workers=2, pin_memory=True,
                        prefetch_factor=3)
    iterator = iter(loader)
    assert next(iterator).tolist() == [0, 1]
    workers = set(multiprocessing.active_children()) - before
    assert len(workers) == 2
    del iterator
    gc.collect()
    assert workers.isdisjoint(multiprocessing.active_children())
