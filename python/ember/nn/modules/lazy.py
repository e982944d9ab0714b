"""LazyModuleMixin: modules whose parameter shapes come from the first input
(PyTorch's torch.nn.modules.lazy).

A lazy module (LazyLinear, LazyConv2d, LazyBatchNorm1d, ...) starts with
UninitializedParameter / UninitializedBuffer placeholders.  A forward
pre-hook runs `initialize_parameters(*input)` on the first call: it reads
the missing size (in_features, in_channels, num_features) off the input,
materialises the placeholders in place (so an optimizer built before the
first forward holds the real parameters afterwards) and initialises them as
the eager class would.  The module then becomes an instance of
`cls_to_become` (LazyLinear -> Linear) and the hooks go away.

Loading a state_dict into a lazy module materialises each placeholder to the
shape of the loaded tensor first (the load pre-hook), so a checkpoint of
the eager model loads without a dummy forward.
"""

import itertools

from ..parameter import is_lazy

__all__ = ["LazyModuleMixin"]


class LazyModuleMixin:
    """Mixed in before the eager class: class LazyLinear(LazyModuleMixin, Linear)."""

    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._load_hook = self._register_load_state_dict_pre_hook(self._lazy_load_hook)
        self._initialize_hook = self.register_forward_pre_hook(
            self._infer_parameters, with_kwargs=True)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        # A placeholder is saved as itself (detaching would lose its kind).
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if is_lazy(param) or keep_vars else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if is_lazy(buf) or keep_vars else buf.detach()

    def _lazy_load_hook(self, state_dict, prefix, local_metadata, strict,
                        missing_keys, unexpected_keys, error_msgs):
        """Materialises each placeholder that the state_dict has a real
        tensor for, to that tensor's shape (load_state_dict then copies)."""
        for name, param in itertools.chain(self._parameters.items(), self._buffers.items()):
            key = prefix + name
            if key in state_dict and param is not None and is_lazy(param):
                value = state_dict[key]
                if not is_lazy(value):
                    param.materialize(value.shape)

    def initialize_parameters(self, *args, **kwargs):
        raise NotImplementedError(
            f"initialize_parameters is not implemented for {self.__class__.__name__}")

    def has_uninitialized_params(self):
        return any(is_lazy(value) for value in itertools.chain(
            self._parameters.values(), self._buffers.values()))

    def _infer_parameters(self, module, args, kwargs=None):
        """The forward pre-hook of the first call (see the module docstring)."""
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        module._load_hook.remove()
        delattr(module, "_initialize_hook")
        delattr(module, "_load_hook")
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    def _replicate_for_data_parallel(self):
        raise RuntimeError(
            "Modules with uninitialized parameters can't be used with `DataParallel`. "
            "Run a dummy forward pass to correctly initialize the modules")
