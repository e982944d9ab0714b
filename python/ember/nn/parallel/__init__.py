"""ember.nn.parallel: data parallelism across processes (torch.nn.parallel)."""
from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
