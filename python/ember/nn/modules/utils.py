"""Argument forms the layers share (PyTorch's torch.nn.modules.utils):
_pair(3) is (3, 3), _pair((1, 2)) stays (1, 2)."""

import collections.abc
from itertools import repeat

__all__ = []


def _ntuple(n, name="parse"):
    def parse(x):
        if isinstance(x, collections.abc.Iterable):
            return tuple(x)
        return tuple(repeat(x, n))

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")
