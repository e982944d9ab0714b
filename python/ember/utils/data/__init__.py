"""ember.utils.data: datasets, samplers and the DataLoader
(torch.utils.data)."""
from ._utils.collate import default_collate, default_convert
from ._utils.worker import WorkerInfo, get_worker_info
from .dataloader import DataLoader
from .distributed import DistributedSampler
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, StackDataset,
                      Subset, TensorDataset, random_split)
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                      SubsetRandomSampler, WeightedRandomSampler)

__all__ = ["BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset", "DistributedSampler",
           "IterableDataset", "RandomSampler", "Sampler", "SequentialSampler", "StackDataset", "Subset",
           "SubsetRandomSampler", "TensorDataset", "WeightedRandomSampler", "WorkerInfo",
           "default_collate", "default_convert", "get_worker_info", "random_split"]
