"""ember.nn.parallel: data parallelism (torch.nn.parallel): across processes
(DistributedDataParallel) and, on one device, DataParallel."""
from .data_parallel import DataParallel, data_parallel
from .distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]
