"""The legacy tensor types: ember.FloatTensor, ember.LongTensor, ...

Old PyTorch programs construct tensors through them (`FloatTensor(2, 3)`,
`LongTensor([1, 2])`), test types with them (`isinstance(t,
FloatTensor)`) and cast with them (`t.type(LongTensor)`).  In PyTorch they
are not subclasses of Tensor but instances of a metaclass whose instance
check compares the dtype and the device; ember does the same, so every
ember tensor is created by the usual factories and stays an ember.Tensor.
"""

from . import _C
from ._device import device as _device


class _LegacyTensorType(type):
    """The metaclass: one class per dtype, all CPU (as PyTorch's torch.*Tensor)."""

    def __instancecheck__(cls, obj):
        from ._tensor import Tensor
        return (isinstance(obj, Tensor) and obj.dtype == cls.dtype
                and obj.device.type == "cpu")

    def __call__(cls, *args, size=None, device=None):
        if device is not None and _device(device).type != "cpu":
            raise RuntimeError(f"legacy constructor expects device type: cpu but "
                               f"device type: {_device(device).type} was passed")
        if size is not None:
            if args:
                raise TypeError("new(): got both positional arguments and size=")
            return _C.empty(size, dtype=cls.dtype)
        return _new_from_args(cls, args)

    def __repr__(cls):
        return f"<class 'ember.{cls.__name__}'>"


def _new_from_args(cls, args):
    from ._tensor import Tensor
    if not args:
        return _C.empty(0, dtype=cls.dtype)
    if len(args) == 1:
        (arg,) = args
        if isinstance(arg, Tensor):
            if arg.dtype != cls.dtype:
                raise TypeError(f"expected {cls.dtype} (got {arg.dtype})")
            return arg   # PyTorch returns an alias: the same tensor object
        if isinstance(arg, _C.Size):
            return _C.empty(arg, dtype=cls.dtype)
        if isinstance(arg, _C.UntypedStorage):
            raise TypeError("new(): ember cannot wrap a storage in a legacy "
                            "constructor; build the tensor from data or a size")
        if isinstance(arg, (list, tuple)) or hasattr(arg, "__array__"):
            return _C.tensor(arg, dtype=cls.dtype)
        if not hasattr(arg, "__index__"):
            raise TypeError(f"new(): data must be a sequence (got {type(arg).__name__})")
    return _C.empty(args, dtype=cls.dtype)


def _make(name, dtype):
    return _LegacyTensorType(name, (), {"dtype": dtype, "is_cuda": False,
                                        "__module__": "ember"})


# name -> the class; also the names Tensor.type() prints.
LEGACY_TYPES = {}
for _name, _dtype in [("BoolTensor", _C.bool), ("ByteTensor", _C.uint8),
                      ("CharTensor", _C.int8), ("ShortTensor", _C.int16),
                      ("IntTensor", _C.int32), ("LongTensor", _C.int64),
                      ("FloatTensor", _C.float32), ("DoubleTensor", _C.float64),
                      ("HalfTensor", _C.float16), ("BFloat16Tensor", _C.bfloat16)]:
    LEGACY_TYPES[_name] = _make(_name, _dtype)
del _name, _dtype


def legacy_type_of(dtype):
    """The legacy class of a dtype (FloatTensor for ember.float32)."""
    for cls in LEGACY_TYPES.values():
        if cls.dtype == dtype:
            return cls
    raise TypeError(f"no legacy tensor type for {dtype}")


def dtype_of_type_name(name):
    """The dtype a `t.type('ember.LongTensor')` string names (torch.* too)."""
    module, _, short = name.rpartition(".")
    if module in ("ember", "torch") and short in LEGACY_TYPES:
        return LEGACY_TYPES[short].dtype
    raise ValueError(f"invalid type: '{name}'")
