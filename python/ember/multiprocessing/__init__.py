"""ember.multiprocessing: Python's multiprocessing, with tensors that travel
between processes through shared memory (torch.multiprocessing).

Importing it registers reducers (reductions.py) with
multiprocessing.reduction.ForkingPickler, the pickler that queues and pipes
use: a tensor put on a queue is moved into shared memory (in place, as
``t.share_memory_()``) and sent as a handle to its memory file, so the
receiver maps the same bytes instead of unpickling a copy.
"""
import multiprocessing
from multiprocessing import *  # noqa: F401,F403  (the same API as Python's)

from .reductions import init_reductions

__all__ = list(multiprocessing.__all__) + [
    "get_sharing_strategy", "set_sharing_strategy", "get_all_sharing_strategies",
]

# Note [Shared memory by file descriptor] in c/th/THShared.h: the only way
# ember shares memory is PyTorch's Linux default.
_SHARING_STRATEGIES = {"file_descriptor"}


def get_all_sharing_strategies():
    return set(_SHARING_STRATEGIES)


def get_sharing_strategy():
    return "file_descriptor"


def set_sharing_strategy(new_strategy):
    if new_strategy not in _SHARING_STRATEGIES:
        raise ValueError(
            f"sharing strategy {new_strategy!r} is not supported: ember shares memory "
            f"by file descriptor only ({sorted(_SHARING_STRATEGIES)})")


init_reductions()
