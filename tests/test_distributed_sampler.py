"""DistributedSampler (no processes needed: num_replicas and rank given)."""
import pytest

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
