"""Samplers: the order in which a DataLoader asks for indices
(torch.utils.data.sampler)."""
from . import _random

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler"]


def _is_positive_int(value):
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


class Sampler:
    """Iterates over indices of a dataset (``__iter__``, and ``__len__``
    when the length is known)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """Each index once per epoch in random order, or `num_samples` indices
    drawn with replacement.  Without a generator, the order comes from a
    seed drawn from the default generator at each ``iter()``."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.replacement, bool):
            raise TypeError("replacement should be a boolean value, but got "
                            f"replacement={self.replacement}")
        if not _is_positive_int(self.num_samples):
            raise ValueError("num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        if self.replacement:
            yield from _random.randint(n, self.num_samples, self.generator)
            return
        for _ in range(self.num_samples // n):
            yield from _random.randperm(n, self.generator)
        yield from _random.randperm(n, self.generator)[:self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, in random order, without replacement."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in _random.randperm(len(self.indices), self.generator):
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """Indices 0..len(weights)-1 drawn with probability proportional to the
    weights."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if not _is_positive_int(num_samples):
            raise ValueError("num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError("replacement should be a boolean value, but got "
                             f"replacement={replacement}")
        weights = [float(w) for w in (weights.tolist() if hasattr(weights, "tolist")
                                      else weights)]
        if any(isinstance(w, list) for w in weights):
            raise ValueError("weights should be a 1d sequence")
        self.weights = weights
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        if not self.replacement and self.num_samples > len(self.weights):
            raise RuntimeError(
                "cannot sample n_sample > prob_dist.size(-1) samples without replacement")
        if any(w < 0 for w in self.weights):
            raise RuntimeError(
                "invalid multinomial distribution (encountering probability entry < 0)")
        if sum(self.weights) <= 0:
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        yield from _random.multinomial(self.weights, self.num_samples, self.replacement,
                                       self.generator)

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of `sampler` into lists of `batch_size`."""

    def __init__(self, sampler, batch_size, drop_last):
        if not _is_positive_int(batch_size):
            raise ValueError("batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError("drop_last should be a boolean value, but got "
                             f"drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
