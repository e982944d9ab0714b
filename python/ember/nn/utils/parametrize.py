"""Parametrizations (PyTorch's torch.nn.utils.parametrize).

`register_parametrization(module, "weight", P)` makes `module.weight` a
computed value, P(original), where `original` is the tensor that used to
be the parameter (or the tensors P.right_inverse gave for it).  How:

  * the module's class is swapped, in place, for a fresh subclass
    "Parametrized<Class>" on which `weight` is a property, so that only
    this module is affected;
  * the original moves to `module.parametrizations.weight.original` (or
    `original0`, `original1`, ... when right_inverse returns several), so
    the state_dict keys are `parametrizations.weight.original`;
  * reading `module.weight` runs the chain of parametrizations (every time,
    or once per `cached()` block); assigning to it runs their right_inverse
    in reverse and stores the result in the original(s).

remove_parametrizations undoes all this, leaving either the current value
(leave_parametrized=True) or the original as the parameter.
"""

import collections.abc
import contextlib
import copy
import copyreg

import ember

from ..modules.container import ModuleDict, ModuleList
from ..parameter import Parameter

__all__ = ["cached", "ParametrizationList", "register_parametrization", "is_parametrized",
           "remove_parametrizations", "type_before_parametrizations",
           "transfer_parametrizations_and_params"]

# Note [Parametrization cache]: inside `with cached():` each parametrized
# tensor is computed once, keyed by (id(module), name); the cache is
# dropped when the outermost block exits.
_cache_enabled = 0
_cache = {}


@contextlib.contextmanager
def cached():
    """Computes each parametrized tensor once inside the block (e.g. a
    weight used at every step of an RNN)."""
    global _cache, _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache = {}


def _register_parameter_or_buffer(module, name, value):
    if isinstance(value, Parameter):
        module.register_parameter(name, value)
    else:
        module.register_buffer(name, value)


def _set_in_place(dest, src):
    """dest takes src's value, shape and dtype while staying the same
    object (torch's Tensor.set_), so optimizers holding it stay valid."""
    with ember.no_grad():
        dest.data = src.detach()


class ParametrizationList(ModuleList):
    """The chain of parametrizations of one tensor, and its original(s)."""

    def __init__(self, modules, original, unsafe=False):
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        original_shape, original_dtype = original.shape, original.dtype
        with ember.no_grad():
            new = original
            for module in reversed(self):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, (ember.Tensor, collections.abc.Sequence)):
            raise ValueError(
                "'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                f"Got {type(new).__name__}")
        self.is_tensor = isinstance(new, ember.Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            self._register_one_original(original, new)
        else:
            self._register_originals(original, new)
        if not self.unsafe:
            self._check_unchanged(self(), original_shape, original_dtype)

    def _register_one_original(self, original, new):
        if original.dtype != new.dtype:
            raise ValueError(
                "When `right_inverse` outputs one tensor, it may not change the dtype.\n"
                f"original.dtype: {original.dtype}\n"
                f"right_inverse(original).dtype: {new.dtype}")
        if original.device != new.device:
            raise ValueError(
                "When `right_inverse` outputs one tensor, it may not change the device.\n"
                f"original.device: {original.device}\n"
                f"right_inverse(original).device: {new.device}")
        _set_in_place(original, new)   # the same Parameter object lives on
        _register_parameter_or_buffer(self, "original", original)

    def _register_originals(self, original, new):
        for i, tensor in enumerate(new):
            if not isinstance(tensor, ember.Tensor):
                raise ValueError(
                    "'right_inverse' must return a Tensor or a Sequence of tensors "
                    "(list, tuple...). "
                    f"Got element {i} of the sequence with type {type(tensor).__name__}.")
            if isinstance(original, Parameter):
                tensor = Parameter(tensor, original.requires_grad)
            tensor.requires_grad_(original.requires_grad)
            _register_parameter_or_buffer(self, f"original{i}", tensor)

    @staticmethod
    def _check_unchanged(value, shape, dtype):
        if not isinstance(value, ember.Tensor):
            raise ValueError(f"A parametrization must return a tensor. Got {type(value).__name__}.")
        if value.dtype != dtype:
            raise ValueError(
                "Registering a parametrization may not change the dtype of the tensor, "
                "unless `unsafe` flag is enabled.\n"
                f"unparametrized dtype: {dtype}\n"
                f"parametrized dtype: {value.dtype}")
        if value.shape != shape:
            raise ValueError(
                "Registering a parametrization may not change the shape of the tensor, "
                "unless `unsafe` flag is enabled.\n"
                f"unparametrized shape: {shape}\n"
                f"parametrized shape: {value.shape}")

    def right_inverse(self, value):
        """Stores in the original(s) what makes the chain produce `value`."""
        with ember.no_grad():
            for module in reversed(self):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(
                        f"parametrization {type(module).__name__} does not implement "
                        "right_inverse.")
                value = module.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, ember.Tensor):
                    raise ValueError(
                        f"`right_inverse` should return a tensor. Got {type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(
                        f"The tensor returned by `right_inverse` has dtype {value.dtype} "
                        f"while `original` has dtype {self.original.dtype}")
                _set_in_place(self.original, value)
                return
            if not isinstance(value, collections.abc.Sequence):
                raise ValueError(
                    f"'right_inverse' must return a sequence of tensors. Got {type(value).__name__}.")
            if len(value) != self.ntensors:
                raise ValueError(
                    "'right_inverse' must return a sequence of tensors of length "
                    f"{self.ntensors}. Got a sequence of length {len(value)}.")
            for i, tensor in enumerate(value):
                original_i = getattr(self, f"original{i}")
                if not isinstance(tensor, ember.Tensor):
                    raise ValueError(
                        "'right_inverse' must return a sequence of tensors "
                        f"or reference-type opaques. Got element {i} of type {type(tensor).__name__}.")
                if original_i.dtype != tensor.dtype:
                    raise ValueError(
                        f"Tensor {i} returned by `right_inverse` has dtype {tensor.dtype} "
                        f"while `original{i}` has dtype {original_i.dtype}")
                _set_in_place(original_i, tensor)

    def forward(self):
        if self.is_tensor:
            value = self[0](self.original)
        else:
            value = self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in list(self)[1:]:
            value = module(value)
        return value


def _inject_new_class(module):
    """Swaps module's class for a one-off subclass that can carry the
    properties of this module alone."""
    cls = module.__class__

    def default_deepcopy(self, memo):
        replica = memo.get(id(self))
        if replica is not None:
            return replica
        replica = self.__new__(self.__class__)
        memo[id(self)] = replica
        replica.__dict__ = copy.deepcopy(self.__dict__, memo)
        for slot in copyreg._slotnames(self.__class__):
            if hasattr(self, slot):
                setattr(replica, slot, copy.deepcopy(getattr(self, slot), memo))
        return replica

    def getstate(self):
        raise RuntimeError(
            "Serialization of parametrized modules is only "
            "supported through state_dict(). See:\n"
            "https://pytorch.org/tutorials/beginner/saving_loading_models.html"
            "#saving-loading-a-general-checkpoint-for-inference-and-or-resuming-training")

    namespace = {"__getstate__": getstate}
    if not hasattr(cls, "__deepcopy__"):
        namespace["__deepcopy__"] = default_deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), namespace)


def _inject_property(module, tensor_name):
    """module.<tensor_name> becomes the chain's output; assigning to it
    goes through the chain's right_inverse."""
    if hasattr(module, tensor_name):
        raise AssertionError(f"Module already has an attribute named '{tensor_name}'")

    def get_parametrized(self):
        parametrization = self.parametrizations[tensor_name]
        if not _cache_enabled:
            return parametrization()
        key = (id(self), tensor_name)
        tensor = _cache.get(key)
        if tensor is None:
            tensor = _cache[key] = parametrization()
        return tensor

    def set_original(self, value):
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def _check_stacked(parametrization, current, tensor_name):
    """The checks of a parametrization added on top of others (without
    `unsafe`): it keeps the dtype and shape, and so does its inverse."""
    value = parametrization(current)
    if not isinstance(value, ember.Tensor):
        raise ValueError(f"A parametrization must return a tensor. Got {type(value).__name__}.")
    for what, ours, theirs in (("dtype", current.dtype, value.dtype),
                               ("shape", current.shape, value.shape)):
        if ours != theirs:
            raise ValueError(
                f"Registering a parametrization may not change the {what} of the tensor, "
                "unless the `unsafe` flag is enabled.\n"
                f"module.{tensor_name}.{what}: {ours}\n"
                f"parametrization(module.{tensor_name}).{what}: {theirs}")
    if not hasattr(parametrization, "right_inverse"):
        return
    try:
        inverse = parametrization.right_inverse(value)
    except NotImplementedError:
        return
    if not isinstance(inverse, ember.Tensor):
        raise ValueError(
            f"parametrization.right_inverse must return a tensor. Got: {type(inverse).__name__}")
    for what, ours, theirs in (("dtype", current.dtype, inverse.dtype),
                               ("shape", current.shape, inverse.shape)):
        if ours != theirs:
            raise ValueError(
                f"The tensor returned by parametrization.right_inverse must have the same {what} "
                f"as module.{tensor_name}, unless the `unsafe` flag is enabled.\n"
                f"module.{tensor_name}.{what}: {ours}\n"
                f"returned {what}: {theirs}")


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Parametrizes module.<tensor_name> by `parametrization` (a Module),
    stacking it on top of any earlier ones (see the module docstring)."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            _check_stacked(parametrization, getattr(module, tensor_name), tensor_name)
        chain = module.parametrizations[tensor_name]
        chain.append(parametrization)
        chain.unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        chain = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = chain
    else:
        raise ValueError(
            f"Module '{module}' does not have a parameter, a buffer, or a "
            f"parametrized element with name '{tensor_name}'")
    return module


def is_parametrized(module, tensor_name=None):
    """Whether module (or its tensor `tensor_name`) has parametrizations."""
    parametrizations = getattr(module, "parametrizations", None)
    if parametrizations is None or not isinstance(parametrizations, ModuleDict):
        return False
    if tensor_name is None:
        return len(parametrizations) > 0
    return tensor_name in parametrizations


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Makes module.<tensor_name> an ordinary parameter (or buffer) again:
    its current value when `leave_parametrized`, else its original."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    chain = module.parametrizations[tensor_name]
    if chain.is_tensor:
        original = chain.original
        if leave_parametrized:
            with ember.no_grad():
                value = getattr(module, tensor_name)
            _set_in_place(original, value)
    elif leave_parametrized:
        value = getattr(module, tensor_name)
        original = Parameter(value.detach()) if value.requires_grad else value
    else:
        raise ValueError(
            "Cannot leave unparametrized (`leave_parametrized=False`) a tensor "
            "that is parametrized in terms of a sequence of tensors.")
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module):
    """The module's class as it was before any parametrization."""
    if is_parametrized(module):
        return module.__class__.__bases__[0]
    return type(module)


def transfer_parametrizations_and_params(from_module, to_module, tensor_name=None):
    """Gives to_module the parametrizations of from_module (all of them, or
    the one of `tensor_name`), sharing their original tensors."""
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name)))
        source = from_module.parametrizations[name]
        for parametrization in source:
            register_parametrization(to_module, name, parametrization)
        target = to_module.parametrizations[name]
        if hasattr(source, "original"):
            target.original = source.original
        else:
            i = 0
            while hasattr(source, f"original{i}"):
                setattr(target, f"original{i}", getattr(source, f"original{i}"))
                i += 1
    return to_module
