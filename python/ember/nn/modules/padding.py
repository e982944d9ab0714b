"""Padding layers (PyTorch's torch.nn.modules.padding), each a fixed call
of F.pad.  `padding` is an int (the same on every side) or a tuple
(left, right[, top, bottom[, front, back]]), last dim first."""

from .. import functional as F
from .module import Module
from .utils import _ntuple, _pair, _quadruple

__all__ = ["CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d",
           "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d",
           "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d",
           "ZeroPad1d", "ZeroPad2d", "ZeroPad3d"]

_sextuple = _ntuple(6, "_sextuple")


class _PadNd(Module):
    """A padding layer of `mode` over the last len(padding) // 2 dims."""

    __constants__ = ["padding"]
    mode = None

    def forward(self, input):
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self):
        return f"{self.padding}"


class _CircularPadNd(_PadNd):
    """Circular padding checks the input's rank first, in its own words."""

    mode = "circular"
    spatial = None

    def forward(self, input):
        if input.dim() not in (self.spatial + 1, self.spatial + 2):
            raise ValueError(f"expected {self.spatial + 1}D or {self.spatial + 2}D input "
                             f"(got {input.dim()}D input)")
        return super().forward(input)


class CircularPad1d(_CircularPadNd):
    spatial = 1

    def __init__(self, padding):
        super().__init__()
        self.padding = _pair(padding)


class CircularPad2d(_CircularPadNd):
    spatial = 2

    def __init__(self, padding):
        super().__init__()
        self.padding = _quadruple(padding)


class CircularPad3d(_CircularPadNd):
    spatial = 3

    def __init__(self, padding):
        super().__init__()
        self.padding = _sextuple(padding)


class _ConstantPadNd(Module):
    __constants__ = ["padding", "value"]

    def __init__(self, value):
        super().__init__()
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    def __init__(self, padding, value):
        super().__init__(value)
        self.padding = _pair(padding)


class ConstantPad2d(_ConstantPadNd):
    def __init__(self, padding, value):
        super().__init__(value)
        self.padding = _quadruple(padding)


class ConstantPad3d(_ConstantPadNd):
    def __init__(self, padding, value):
        super().__init__(value)
        self.padding = _sextuple(padding)


class _ReflectionPadNd(_PadNd):
    mode = "reflect"


class ReflectionPad1d(_ReflectionPadNd):
    def __init__(self, padding):
        super().__init__()
        self.padding = _pair(padding)


class ReflectionPad2d(_ReflectionPadNd):
    def __init__(self, padding):
        super().__init__()
        self.padding = _quadruple(padding)


class ReflectionPad3d(_ReflectionPadNd):
    def __init__(self, padding):
        super().__init__()
        self.padding = _sextuple(padding)


class _ReplicationPadNd(_PadNd):
    mode = "replicate"


class ReplicationPad1d(_ReplicationPadNd):
    def __init__(self, padding):
        super().__init__()
        self.padding = _pair(padding)


class ReplicationPad2d(_ReplicationPadNd):
    def __init__(self, padding):
        super().__init__()
        self.padding = _quadruple(padding)


class ReplicationPad3d(_ReplicationPadNd):
    def __init__(self, padding):
        super().__init__()
        self.padding = _sextuple(padding)


class ZeroPad1d(ConstantPad1d):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad3d(ConstantPad3d):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"
