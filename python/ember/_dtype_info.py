"""ember.finfo and ember.iinfo: the numeric limits of a dtype, as PyTorch's.

The numbers come from NumPy's finfo/iinfo of the same format; bfloat16,
which NumPy lacks, is float32 with 16 bits of mantissa dropped: the same
exponent range (so the same tiny), 8 bits of precision (eps 2**-7) and a
largest value of (2 - 2**-7) * 2**127.
"""

import numpy as np

from . import _C

__all__ = ["finfo", "iinfo"]

_NUMPY_FLOATS = {_C.float16: np.float16, _C.float32: np.float32, _C.float64: np.float64}
_NUMPY_INTS = {_C.uint8: np.uint8, _C.int8: np.int8, _C.int16: np.int16,
               _C.int32: np.int32, _C.int64: np.int64}


def _dtype_name(dtype):
    return str(dtype).removeprefix("ember.")


def _check_dtype(function, dtype):
    if not isinstance(dtype, _C.dtype):
        raise TypeError(f"{function}(): argument 'type' (position 1) must be ember.dtype, "
                        f"not {type(dtype).__name__}")


class finfo:
    """The limits of a floating-point dtype (the default dtype when none is
    given): bits, eps, max, min, tiny (= smallest_normal), resolution."""

    def __init__(self, type=None):
        if type is None:
            type = _C.get_default_dtype()
        _check_dtype("finfo", type)
        if type is _C.bfloat16:
            self._set(bits=16, eps=2.0 ** -7, max=(2 - 2.0 ** -7) * 2.0 ** 127,
                      tiny=2.0 ** -126, resolution=10.0 ** -2)
        elif type in _NUMPY_FLOATS:
            info = np.finfo(_NUMPY_FLOATS[type])
            self._set(bits=info.bits, eps=float(info.eps), max=float(info.max),
                      tiny=float(info.smallest_normal), resolution=10.0 ** -info.precision)
        else:
            raise TypeError("ember.finfo() requires a floating point input type. "
                            "Use ember.iinfo to handle 'ember.finfo'")
        self.dtype = _dtype_name(type)

    def _set(self, bits, eps, max, tiny, resolution):
        self.bits, self.eps, self.max, self.min = bits, eps, max, -max
        self.tiny = self.smallest_normal = tiny
        self.resolution = resolution

    def __eq__(self, other):
        return isinstance(other, finfo) and self.dtype == other.dtype

    __hash__ = None   # PyTorch's finfo is unhashable too

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, "
                f"tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """The limits of an integer dtype: bits, max, min."""

    def __init__(self, type):
        _check_dtype("iinfo", type)
        if type is _C.bool:
            raise TypeError("ember.bool is not supported by ember.iinfo")
        if type not in _NUMPY_INTS:
            raise TypeError("ember.iinfo() requires an integer input type. "
                            "Use ember.finfo to handle 'ember.iinfo'")
        info = np.iinfo(_NUMPY_INTS[type])
        self.bits, self.max, self.min = info.bits, int(info.max), int(info.min)
        self.dtype = _dtype_name(type)

    def __eq__(self, other):
        return isinstance(other, iinfo) and self.dtype == other.dtype

    __hash__ = None

    def __repr__(self):
        return f"iinfo(min={float(self.min):g}, max={float(self.max):g}, dtype={self.dtype})"
