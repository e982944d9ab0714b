"""ember.nn.Module: the base class of every layer.

A Module keeps three ordered registries, filled by attribute assignment:

    _parameters   name -> Parameter (or None)    learnable, in state_dict
    _buffers      name -> Tensor (or None)       state such as running stats
    _modules      name -> Module (or None)       children, walked recursively

`self.weight = Parameter(...)` lands in `_parameters`, not in `__dict__`;
`__getattr__` (called only when normal lookup fails) reads it back.  Every
walk (parameters(), state_dict(), to(), train(), ...) is a recursion over
`_modules`.  The layout of names, reprs and state_dict keys is PyTorch's.
"""

import functools
import itertools
import weakref
from collections import OrderedDict, namedtuple
from collections.abc import Mapping

import ember

from ..parameter import Buffer, Parameter, is_lazy
from . import _backward_hooks

__all__ = ["Module"]


def _typename(obj):
    """PyTorch's torch.typename: "ember.FloatTensor", "int", "mod.Class"."""
    if isinstance(obj, ember.Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    qualname = getattr(obj, "__qualname__", None)
    if qualname is None:
        module = type(obj).__module__ or ""
        qualname = type(obj).__qualname__
    if module in ("", "builtins"):
        return qualname
    return f"{module}.{qualname}"


def _addindent(text, num_spaces):
    """Indents every line of `text` but the first by `num_spaces`."""
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    first = lines.pop(0)
    return first + "\n" + "\n".join(num_spaces * " " + line for line in lines)


class _IncompatibleKeys(
        namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What load_state_dict returns: the keys it could not match."""

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class RemovableHandle:
    """Returned by register_*_hook; `handle.remove()` unregisters the hook."""

    _next_id = 0

    def __init__(self, hooks_dict):
        # A weak reference: a handle must not keep a dead module's hooks alive.
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1

    def remove(self):
        hooks_dict = self.hooks_dict_ref()
        if hooks_dict is not None and self.id in hooks_dict:
            del hooks_dict[self.id]

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.remove()


def _add_hook(hooks, hook, prepend):
    """Stores `hook` in the ordered dict `hooks`; returns its handle."""
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


class Module:
    """Base class for all neural network modules (PyTorch's nn.Module)."""

    # state_dict()'s _metadata records this; _load_from_state_dict may read it.
    _version = 1

    training: bool

    def __init__(self, *args, **kwargs):
        if kwargs:
            raise TypeError(
                f"{type(self).__name__}.__init__() got an unexpected keyword "
                f"argument '{next(iter(kwargs))}'")
        if args:
            raise TypeError(
                f"{type(self).__name__}.__init__() takes 1 positional argument "
                f"but {len(args) + 1} were given")
        # object.__setattr__: our own __setattr__ reads these dicts.
        setattr_ = super().__setattr__
        setattr_("training", True)
        setattr_("_parameters", OrderedDict())
        setattr_("_buffers", OrderedDict())
        setattr_("_non_persistent_buffers_set", set())
        setattr_("_modules", OrderedDict())
        setattr_("_forward_pre_hooks", OrderedDict())
        setattr_("_forward_pre_hooks_with_kwargs", set())
        setattr_("_forward_hooks", OrderedDict())
        setattr_("_forward_hooks_with_kwargs", set())
        setattr_("_backward_pre_hooks", OrderedDict())
        setattr_("_backward_hooks", OrderedDict())
        setattr_("_state_dict_hooks", OrderedDict())
        setattr_("_load_state_dict_pre_hooks", OrderedDict())

    def forward(self, *input):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" '
            f"function")

    # ---- registration -------------------------------------------------------

    def register_buffer(self, name, tensor, persistent=True):
        """Adds a tensor that is state but not a parameter (e.g. running
        mean); `persistent=False` keeps it out of state_dict()."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_new_name(name, "buffer", self._buffers)
        if tensor is not None and not isinstance(tensor, ember.Tensor):
            raise TypeError(
                f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                "(ember Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name, param):
        """Adds a Parameter (or None, a declared but absent one)."""
        if "_parameters" not in self.__dict__:
            raise AttributeError(
                "cannot assign parameter before Module.__init__() call")
        self._check_new_name(name, "parameter", self._parameters)
        if param is None:
            self._parameters[name] = None
        elif not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                "(ember.nn.Parameter or None required)")
        elif param.grad_fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model "
                f"parameters must be created explicitly. To express '{name}' "
                "as a function of another Tensor, compute the value in "
                "the forward() method.")
        else:
            self._parameters[name] = param

    def add_module(self, name, module):
        """Adds a child module (or None), reachable as an attribute."""
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {_typename(name)}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = module

    register_module = add_module

    def _check_new_name(self, name, kind, registry):
        """PyTorch's checks on a parameter or buffer name."""
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {_typename(name)}")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if hasattr(self, name) and name not in registry:
            raise KeyError(f"attribute '{name}' already exists")

    def get_submodule(self, target):
        """The submodule at dotted path `target` ("" is self)."""
        module = self
        for item in target.split(".") if target else []:
            if not hasattr(module, item):
                raise AttributeError(
                    module._get_name() + " has no attribute `" + item + "`")
            module = getattr(module, item)
            if not isinstance(module, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return module

    def get_parameter(self, target):
        """The Parameter at dotted path `target`, e.g. "0.weight"."""
        module_path, _, param_name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, param_name):
            raise AttributeError(
                module._get_name() + " has no attribute `" + param_name + "`")
        param = getattr(module, param_name)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + param_name + "` is not an nn.Parameter")
        return param

    # ---- attribute protocol -------------------------------------------------

    def __getattr__(self, name):
        # Only reached when normal lookup fails: look in the registries.
        for registry in ("_parameters", "_buffers", "_modules"):
            entries = self.__dict__.get(registry)
            if entries is not None and name in entries:
                return entries[name]
        raise AttributeError(
            f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError(
                    "cannot assign parameters before Module.__init__() call")
            self._forget(name, keep="_parameters")
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as parameter '{name}' "
                    "(ember.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if self.__dict__.get("_modules") is None:
                raise AttributeError(
                    "cannot assign module before Module.__init__() call")
            self._forget(name, keep="_modules")
            self._modules[name] = value
        elif name in self.__dict__.get("_modules", ()):
            if value is not None:
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as child module '{name}' "
                    "(ember.nn.Module or None expected)")
            self._modules[name] = value
        elif isinstance(value, Buffer) or name in self.__dict__.get("_buffers", ()):
            if value is not None and not isinstance(value, ember.Tensor):
                raise TypeError(
                    f"cannot assign '{_typename(value)}' as buffer '{name}' "
                    "(ember.nn.Buffer, ember.Tensor or None expected)")
            # An nn.Buffer brings its persistence; a tensor keeps the old one.
            if isinstance(value, Buffer):
                persistent = value.persistent
            else:
                persistent = name not in self._non_persistent_buffers_set
            self.register_buffer(name, value, persistent)
        else:
            super().__setattr__(name, value)

    def _forget(self, name, keep):
        """Removes `name` from every place but the registry `keep`, so that a
        name lives in exactly one registry (or __dict__)."""
        self.__dict__.pop(name, None)
        for registry in ("_parameters", "_buffers", "_modules"):
            if registry != keep:
                self.__dict__[registry].pop(name, None)
        self._non_persistent_buffers_set.discard(name)

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            super().__delattr__(name)

    def __dir__(self):
        keys = list(object.__dir__(self)) + list(self._parameters)
        keys += list(self._modules) + list(self._buffers)
        return sorted(key for key in set(keys) if not key[0].isdigit())

    # ---- walks --------------------------------------------------------------

    def _named_members(self, get_members, prefix="", recurse=True,
                       remove_duplicate=True):
        """(dotted name, member) over this module (and its descendants when
        `recurse`), each member once when `remove_duplicate`."""
        memo = set()
        modules = (self.named_modules(prefix=prefix,
                                      remove_duplicate=remove_duplicate)
                   if recurse else [(prefix, self)])
        for module_prefix, module in modules:
            for name, value in get_members(module):
                if value is None or value in memo:
                    continue
                if remove_duplicate:
                    memo.add(value)
                yield (module_prefix + ("." if module_prefix else "") + name,
                       value)

    def parameters(self, recurse=True):
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(
            lambda module: module._parameters.items(), prefix=prefix,
            recurse=recurse, remove_duplicate=remove_duplicate)

    def buffers(self, recurse=True):
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(
            lambda module: module._buffers.items(), prefix=prefix,
            recurse=recurse, remove_duplicate=remove_duplicate)

    def children(self):
        for _, module in self.named_children():
            yield module

    def named_children(self):
        memo = set()
        for name, module in self._modules.items():
            if module is not None and module not in memo:
                memo.add(module)
                yield name, module

    def modules(self):
        for _, module in self.named_modules():
            yield module

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """Pre-order walk: (dotted name, module), self first as `prefix`."""
        if memo is None:
            memo = set()
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            child_prefix = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, child_prefix, remove_duplicate)

    # ---- modes and gradients ------------------------------------------------

    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Drops (or zeroes in place) the .grad of every parameter."""
        for param in self.parameters():
            _zero_grad(param, set_to_none)

    # ---- conversions --------------------------------------------------------

    def apply(self, fn):
        """Calls fn on every descendant, children first, then on self."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def _apply(self, fn):
        """Replaces each parameter's .data (and .grad's) and each buffer by
        fn(tensor), recursively.  A Parameter object keeps its identity, so
        optimizers holding it stay valid (PyTorch's default, non-swap path)."""
        for module in self.children():
            module._apply(fn)
        for param in self._parameters.values():
            if param is None:
                continue
            with ember.no_grad():
                param.data = fn(param)
            if param.grad is not None:
                with ember.no_grad():
                    param.grad = fn(param.grad)
        for key, buf in self._buffers.items():
            if buf is not None:
                self._buffers[key] = fn(buf)
        return self

    def to(self, *args, **kwargs):
        """to(dtype), to(device), to(device, dtype), to(tensor): moves every
        parameter and buffer to the device and converts the floating-point
        ones to the dtype; integer ones keep their dtype."""
        device, dtype = _parse_to(*args, **kwargs)
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(
                "nn.Module.to only accepts floating point or complex dtypes, "
                f"but got desired dtype={dtype}")

        def convert(tensor):
            target = dtype if dtype is not None and tensor.is_floating_point() else None
            if device is None:
                return tensor if target is None else tensor.to(target)
            return tensor.to(device, target) if target is not None else tensor.to(device)

        return self._apply(convert)

    def float(self):
        return self._apply(
            lambda t: t.float() if t.is_floating_point() else t)

    def double(self):
        return self._apply(
            lambda t: t.double() if t.is_floating_point() else t)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else device)

    # ---- calling ------------------------------------------------------------

    def register_forward_pre_hook(self, hook, *, prepend=False,
                                  with_kwargs=False):
        """hook(module, args) -> None or new args (a tuple, or one value);
        with_kwargs: hook(module, args, kwargs) -> None or (args, kwargs)."""
        handle = _add_hook(self._forward_pre_hooks, hook, prepend)
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs.add(handle.id)
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args, output) -> None or a replacement output;
        with_kwargs: hook(module, args, kwargs, output)."""
        handle = _add_hook(self._forward_hooks, hook, prepend)
        if with_kwargs:
            self._forward_hooks_with_kwargs.add(handle.id)
        return handle

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """hook(module, grad_output) -> None or new grad_output, run when
        the gradients of the module's outputs are known."""
        return _add_hook(self._backward_pre_hooks, hook, prepend)

    def register_full_backward_hook(self, hook, prepend=False):
        """hook(module, grad_input, grad_output) -> None or new grad_input,
        run when the gradients of the module's inputs are known (see
        _backward_hooks.py for how the module's backward is found)."""
        return _add_hook(self._backward_hooks, hook, prepend)

    def __call__(self, *args, **kwargs):
        for hook_id, hook in list(self._forward_pre_hooks.items()):
            if hook_id in self._forward_pre_hooks_with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError(
                            "forward pre-hook must return None or a tuple of "
                            f"(new_args, new_kwargs), but got {result}.")
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        backward_hooked = bool(self._backward_hooks or self._backward_pre_hooks)
        if backward_hooked:
            hook_state, args = _backward_hooks.wrap_inputs(self, args)
        output = self.forward(*args, **kwargs)
        for hook_id, hook in list(self._forward_hooks.items()):
            if hook_id in self._forward_hooks_with_kwargs:
                result = hook(self, args, kwargs, output)
            else:
                result = hook(self, args, output)
            if result is not None:
                output = result
        if backward_hooked:
            output = _backward_hooks.wrap_outputs(hook_state, output)
        return output

    # ---- state_dict ---------------------------------------------------------

    def _register_state_dict_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata), run after this
        module (and its children) have added their entries; a non-None
        result replaces the state_dict (PyTorch's private hook, which the
        old spectral_norm uses to stamp its version into the metadata)."""
        return _add_hook(self._hooks("_state_dict_hooks"), hook, False)

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        """hook(state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs), with the module first when
        `with_module`: run before this module reads its keys, free to
        rewrite `state_dict` (e.g. rename an older checkpoint's keys)."""
        if with_module:
            hook = functools.partial(hook, self)
        return _add_hook(self._hooks("_load_state_dict_pre_hooks"), hook, False)

    def register_load_state_dict_pre_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata, strict,
        missing_keys, unexpected_keys, error_msgs)."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def _hooks(self, registry):
        """The hook dict `registry`, made on first use for modules built
        (or unpickled) before it existed."""
        hooks = self.__dict__.get(registry)
        if hooks is None:
            hooks = OrderedDict()
            super().__setattr__(registry, hooks)
        return hooks

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        """Adds this module's own parameters and persistent buffers."""
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if keep_vars else buf.detach()

    def state_dict(self, *, destination=None, prefix="", keep_vars=False):
        """OrderedDict of dotted name -> tensor (detached, sharing memory
        unless keep_vars), with PyTorch's `_metadata` attribute."""
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        metadata = getattr(destination, "_metadata", None)
        if metadata is not None:
            metadata[prefix[:-1]] = {"version": self._version}
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination,
                                  prefix=prefix + name + ".",
                                  keep_vars=keep_vars)
        for hook in self._hooks("_state_dict_hooks").values():
            result = hook(self, destination, prefix,
                          metadata.get(prefix[:-1]) if metadata is not None else {})
            if result is not None:
                destination = result
        return destination

    def _local_state(self):
        """This module's own entries that state_dict() would save."""
        persistent_buffers = {
            name: buf for name, buf in self._buffers.items()
            if name not in self._non_persistent_buffers_set}
        return {name: value for name, value in itertools.chain(
            self._parameters.items(), persistent_buffers.items())
            if value is not None}

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs,
                              pending_copies):
        """Checks this module's keys of `state_dict`; appends the (target,
        source) pairs to copy to `pending_copies` and problems to the lists.
        Nothing is copied here: load_state_dict copies only if all is well."""
        for hook in self._hooks("_load_state_dict_pre_hooks").values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys,
                 unexpected_keys, error_msgs)
        local_state = self._local_state()
        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            input_param = state_dict[key]
            if not isinstance(input_param, ember.Tensor):
                error_msgs.append(
                    f'While copying the parameter named "{key}", expected '
                    "ember.Tensor or Tensor-like object from checkpoint but "
                    f"received {type(input_param)}")
                continue
            # PyTorch's backward compatibility: a 0-dim param from a (1,) one.
            if param.dim() == 0 and input_param.dim() == 1:
                input_param = input_param[0]
            # A placeholder of a lazy module takes any shape (its load hook
            # has materialised it, unless the checkpoint holds one too).
            if not is_lazy(param) and input_param.shape != param.shape:
                error_msgs.append(
                    f"size mismatch for {key}: copying a param with shape "
                    f"{input_param.shape} from checkpoint, the shape in current "
                    f"model is {param.shape}.")
                continue
            pending_copies.append((key, param, input_param))
        if strict:
            for key in state_dict:
                if key.startswith(prefix):
                    input_name = key[len(prefix):].split(".", 1)[0]
                    if input_name not in self._modules and input_name not in local_state:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copies `state_dict`'s tensors into this module's parameters and
        buffers (in place, under no_grad).  Returns (missing_keys,
        unexpected_keys); raises PyTorch's RuntimeError, modifying nothing,
        on a size mismatch or (when strict) on missing or unexpected keys."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(
                f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing_keys, unexpected_keys, error_msgs, pending = [], [], [], []
        metadata = getattr(state_dict, "_metadata", None)

        def load(module, local_state_dict, prefix=""):
            local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
            module._load_from_state_dict(
                local_state_dict, prefix, local_metadata, True, missing_keys,
                unexpected_keys, error_msgs, pending)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    load(child, {k: v for k, v in local_state_dict.items()
                                 if k.startswith(child_prefix)}, child_prefix)

        load(self, OrderedDict(state_dict))
        if strict:
            if unexpected_keys:
                error_msgs.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected_keys)))
            if missing_keys:
                error_msgs.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing_keys)))
        if error_msgs:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                self.__class__.__name__, "\n\t".join(error_msgs)))
        self._copy_pending(pending, assign)
        return _IncompatibleKeys(missing_keys, unexpected_keys)

    def _copy_pending(self, pending, assign):
        """Writes the checked (key, target, source) triples.  With `assign`,
        the target's module entry is replaced by the source instead."""
        with ember.no_grad():
            for key, target, source in pending:
                if not assign:
                    target.copy_(source)
                    continue
                *path, name = key.split(".")
                owner = self.get_submodule(".".join(path))
                if name in owner._parameters:
                    if not isinstance(source, Parameter):
                        source = Parameter(source, target.requires_grad)
                    owner._parameters[name] = source
                else:
                    owner._buffers[name] = source

    # ---- printing -----------------------------------------------------------

    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        """The text inside the parentheses of this module's repr line."""
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [
            "(" + name + "): " + _addindent(repr(module), 2)
            for name, module in self._modules.items()]
        lines = extra_lines + child_lines
        main_str = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main_str += extra_lines[0]
            else:
                main_str += "\n  " + "\n  ".join(lines) + "\n"
        return main_str + ")"


def _zero_grad(param, set_to_none):
    """Optimizer.zero_grad and Module.zero_grad on one tensor."""
    if param.grad is None:
        return
    if set_to_none:
        param.grad = None
        return
    grad = param.grad
    if grad.grad_fn is not None:
        grad.detach_()
    else:
        grad.requires_grad_(False)
    grad.zero_()


def _parse_to(*args, **kwargs):
    """(device, dtype) from Module.to's overloads."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
    for arg in args:
        if isinstance(arg, ember.dtype):
            dtype = arg
        elif isinstance(arg, ember.Tensor):
            dtype, device = arg.dtype, arg.device
        elif isinstance(arg, (str, ember.device)) or (
                isinstance(arg, int) and not isinstance(arg, bool)):  # an int: a CUDA index
            device = arg
        elif not isinstance(arg, bool):  # non_blocking, positionally
            raise TypeError(f"to() received an invalid combination of arguments: {arg!r}")
    return device, dtype
