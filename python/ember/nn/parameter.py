"""ember.nn.Parameter: a tensor that a Module registers as a learnable weight.

A Parameter is an ember.Tensor of the Python subclass `Parameter`, made by
ember._C._make_subclass so that it shares the memory of the tensor it wraps
(as torch.Tensor._make_subclass does).  Assigning one to a Module attribute
registers it (see Module.__setattr__).  Results of operators on a Parameter
are plain ember.Tensors.
"""

import ember
from ember import _C

__all__ = ["Parameter", "UninitializedParameter", "UninitializedBuffer"]


class Parameter(ember.Tensor):
    """A learnable tensor: `Parameter(data=None, requires_grad=True)`.

    `data` is shared, not copied; None gives an empty tensor of shape (0,).
    """

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = ember.empty(0)
        return _C._make_subclass(cls, data.detach(), requires_grad)

    def __init__(self, data=None, requires_grad=True):
        # Everything is done in __new__; the base __init__ takes the sizes.
        pass

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = type(self)(self.data.clone(), self.requires_grad)
        memo[id(self)] = result
        return result

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self.detach().clone(), self.requires_grad))


def _rebuild_parameter(data, requires_grad):
    return Parameter(data, requires_grad)


_UNINITIALIZED_SHAPE = (
    "Can't access the shape of an uninitialized parameter or buffer. This error "
    "usually happens in `load_state_dict` when trying to load an uninitialized "
    "parameter into an initialized one. Call `forward` to initialize the "
    "parameters before accessing their attributes.")


class UninitializedTensorMixin:
    """A placeholder whose shape is not known yet (lazy modules).

    It holds an empty tensor of the intended dtype and device; `materialize
    (shape)` gives it storage of `shape` and turns it, in place (its
    __class__ is reassigned, so every holder of the object sees the change),
    into `cls_to_become`.  Its shape cannot be read before that."""

    cls_to_become = None

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = type(self)(self.requires_grad, self.data.device, self.data.dtype)
        memo[id(self)] = result
        return result

    def materialize(self, shape, device=None, dtype=None):
        device = self.data.device if device is None else device
        dtype = self.data.dtype if dtype is None else dtype
        self.data = ember.empty(shape, device=device, dtype=dtype)
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError(_UNINITIALIZED_SHAPE)

    def numel(self):
        # PyTorch blocks every operator but a few (size, copy_, to, casts)
        # on a placeholder; ember blocks reading its shape and numel.
        raise ValueError(
            "Attempted to use an uninitialized parameter in numel. This error happens "
            "when you are using a `LazyModule` or explicitly manipulating "
            "`ember.nn.parameter.UninitializedParameter` objects. When using LazyModules "
            "Call `forward` with a dummy batch to initialize the parameters before "
            "calling ember functions")

    def share_memory_(self):
        raise RuntimeError(
            "Can't share memory on an uninitialized parameter or buffer. "
            "Call `forward` to initialize the parameters before calling "
            "`module.share_memory()`.")

    def __repr__(self):
        return f"<{self.__class__.__name__}>"

    __str__ = __repr__

    def __reduce_ex__(self, protocol):
        return (self.__class__, (self.requires_grad,))


def is_lazy(param):
    """True for a parameter or buffer that is not materialised yet."""
    return isinstance(param, UninitializedTensorMixin)


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A Parameter whose shape a lazy module fills in at its first forward."""

    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        data = ember.empty(0, device=device, dtype=dtype)
        return _C._make_subclass(cls, data, requires_grad)

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass


class UninitializedBuffer(UninitializedTensorMixin, ember.Tensor):
    """A buffer whose shape a lazy module fills in at its first forward."""

    cls_to_become = ember.Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None):
        data = ember.empty(0, device=device, dtype=dtype)
        return _C._make_subclass(cls, data, requires_grad)

    def __init__(self, requires_grad=False, device=None, dtype=None):
        pass


class _BufferMeta(type(ember.Tensor)):
    """isinstance(t, Buffer) holds for any tensor marked `_is_buffer` (what
    Buffer(...) returns), as PyTorch's metaclass does."""

    def __instancecheck__(cls, instance):
        if cls is Buffer and isinstance(instance, ember.Tensor) and getattr(instance, "_is_buffer", False):
            return True
        return super().__instancecheck__(instance)


class Buffer(ember.Tensor, metaclass=_BufferMeta):
    """A tensor that, assigned as a Module attribute, registers itself as a
    buffer: `Buffer(data=None, *, persistent=True)` (PyTorch >= 2.5).

    It returns `data` detached (sharing its memory), marked with
    `persistent` and `_is_buffer`; its type stays ember.Tensor."""

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            data = ember.empty(0)
        tensor = data.detach().requires_grad_(data.requires_grad)
        tensor.persistent = persistent
        tensor._is_buffer = True
        return tensor
