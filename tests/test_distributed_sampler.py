"""DistributedSampler (no processes needed: num_replicas and rank given)."""
import pytest

from ember.utils.data import _random
from ember.utils.data.distributed import DistributedSampler


def _shares(n, replicas, **kwargs):
    data = list(range(n))
    return [list(DistributedSampler(data, replicas, r, **kwargs)) for r in range(replicas)]


@pytest.mark.parametrize("n", [0, 1, 5, 8, 11])
@pytest.mark.parametrize("replicas", [1, 2, 3, 4])
@pytest.mark.parametrize("drop_last", [False, True])
def test_shares_are_torchs_without_shuffle(n, replicas, drop_last):
    torch = pytest.importorskip("torch")
    from torch.utils.data.distributed import DistributedSampler as TorchSampler
    if n == 0 and not drop_last:
        pytest.skip("torch divides by zero padding an empty dataset")
    data = list(range(n))
    for rank in range(replicas):
        ours = DistributedSampler(data, replicas, rank, shuffle=False, drop_last=drop_last)
        theirs = TorchSampler(data, replicas, rank, shuffle=False, drop_last=drop_last)
        assert list(ours) == list(theirs)
        assert len(ours) == len(theirs)


@pytest.mark.parametrize("n,replicas", [(10, 3), (7, 2), (16, 4)])
@pytest.mark.parametrize("drop_last", [False, True])
def test_shuffled_shares_partition_one_permutation(n, replicas, drop_last):
    shares = _shares(n, replicas, seed=3, drop_last=drop_last)
    assert len({len(s) for s in shares}) == 1
    taken = [i for s in shares for i in s]
    if drop_last:
        assert len(set(taken)) == len(taken) and len(taken) == n - n % replicas
    else:
        assert set(taken) == set(range(n)) and len(taken) == -(-n // replicas) * replicas
    assert shares == _shares(n, replicas, seed=3, drop_last=drop_last)


@pytest.mark.parametrize("n,replicas", [(1, 1), (10, 3), (7, 2), (16, 4), (1000, 3)])
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("seed", [0, 5, -3, 2**32 + 7])
def test_shuffled_shares_are_torchs(n, replicas, drop_last, seed):
    torch = pytest.importorskip("torch")
    from torch.utils.data.distributed import DistributedSampler as TorchSampler
    data = list(range(n))
    for epoch in (0, 3):
        for rank in range(replicas):
            ours = DistributedSampler(data, replicas, rank, seed=seed, drop_last=drop_last)
            theirs = TorchSampler(data, replicas, rank, seed=seed, drop_last=drop_last)
            ours.set_epoch(epoch)
            theirs.set_epoch(epoch)
            assert list(ours) == list(theirs)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 17, 500])
def test_torch_randperm_is_torchs(n):
    torch = pytest.importorskip("torch")
    for seed in (0, 1, 12345, 2**40 + 9):
        generator = torch.Generator()
        generator.manual_seed(seed)
        assert _random.torch_randperm(n, seed) == torch.randperm(n, generator=generator).tolist()


def test_torch_randperm_above_the_32bit_range(monkeypatch):
    # PyTorch's branch for n >= 2**32 // 20 (64-bit draws, inside-out
    # shuffle), run here on small n; too large to compare with torch itself
    monkeypatch.setattr(_random, "_TORCH_RANDPERM_64BIT_FROM", 0)
    for n in (1, 2, 9, 300):
        order = _random.torch_randperm(n, 4)
        assert sorted(order) == list(range(n))
        assert order == _random.torch_randperm(n, 4)
    assert _random.torch_randperm(300, 4) != _random.torch_randperm(300, 5)


def test_set_epoch_and_seed_change_the_order():
    data = list(range(50))
    sampler = DistributedSampler(data, 2, 0, seed=1)
    first = list(sampler)
    assert list(sampler) == first
    sampler.set_epoch(1)
    assert list(sampler) != first
    assert list(DistributedSampler(data, 2, 0, seed=2)) != first
    # the epoch and the seed enter only through their sum, as in PyTorch
    assert list(DistributedSampler(data, 2, 0, seed=2)) == list(sampler)


def test_bad_rank():
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval \[0, 1\]"):
        DistributedSampler(list(range(4)), 2, 2)
