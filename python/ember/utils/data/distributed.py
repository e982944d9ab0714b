"""DistributedSampler: each process of a data-parallel job reads its own
share of the dataset (torch.utils.data.distributed)."""
import math

from . import _random
from .sampler import Sampler

__all__ = ["DistributedSampler"]


def _default_group_value(value, getter):
    if value is not None:
        return value
    import ember.distributed as dist
    if not dist.is_available():
        raise RuntimeError("Requires distributed package to be available")
    return getter()


class DistributedSampler(Sampler):
    """Rank r of num_replicas reads indices r, r + num_replicas, ... of one
    order shared by all ranks: a permutation seeded by seed + epoch (call
    set_epoch at every epoch), or 0..n-1.  Every rank gets the same count:
    the order is padded by repeating its start, or cut (drop_last).

    The permutation is PyTorch's own for seed + epoch (torch.randperm with
    a torch.Generator seeded so: its Mersenne Twister, through NumPy), so a
    job gets the same shares, in the same order, as under PyTorch."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        import ember.distributed as dist
        num_replicas = _default_group_value(num_replicas, dist.get_world_size)
        rank = _default_group_value(rank, dist.get_rank)
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        self.shuffle = shuffle
        self.seed = seed
        count = len(dataset)
        if drop_last and count % num_replicas:
            self.num_samples = math.ceil((count - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(count / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def _order(self):
        count = len(self.dataset)
        if not self.shuffle:
            return list(range(count))
        return _random.torch_randperm(count, self.seed + self.epoch)

    def __iter__(self):
        indices = self._order()
        if self.drop_last:
            indices = indices[:self.total_size]
        else:
            padding = self.total_size - len(indices)
            repeats = math.ceil(padding / len(indices)) if indices else 0
            indices += (indices * repeats)[:padding]
        assert len(indices) == self.total_size
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """The epoch seeds the shuffle: set it before each epoch's iter()."""
        self.epoch = epoch
