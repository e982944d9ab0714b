"""ember.compile: PyTorch's torch.compile, on ember.jit.

`ember.compile(fn_or_module)` scripts what `ember.jit.script` can compile
(the typed graph, its passes, fusion, the bytecode VM) and runs the rest
eagerly, warning once, in one line, what fell back and why:

    ember.compile: running forward eagerly: <the compiler's reason>

Only whole functions fall back (PyTorch can break a graph in the middle of
a function; ember compiles all of it or none).  With `fullgraph=True` a
function that cannot be compiled raises instead, as in PyTorch.

The script compiler reads a module's non-tensor attributes as constants
(Note in ember/jit/frontend.py), `self.training` among them, so a compiled
module keeps one program per train/eval state of its submodules, like the
guards PyTorch's compiler puts on the module.  `mode`, `dynamic`,
`backend` and `options` choose among PyTorch's code generators; ember has
one, so they are accepted and change nothing.
"""

import functools
import warnings

from . import jit
from .jit.ir import ScriptError
from .nn import Module

__all__ = ["compile"]


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor",
            mode=None, options=None, disable=False):
    """A compiled version of `model` (a function or an nn.Module); without
    `model`, a decorator (`@ember.compile(fullgraph=True)`)."""
    if model is None:
        return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic,
                                 backend=backend, mode=mode, options=options,
                                 disable=disable)
    if not callable(model):
        raise RuntimeError("ember.compile: the model must be callable (a function or "
                           "an nn.Module)")
    if disable:
        return model
    if isinstance(model, Module):
        return OptimizedModule(model, fullgraph)
    return _CompiledFunction(model, fullgraph)


class _Compiler:
    """Scripts a callable once per key; remembers what could not be compiled."""

    def __init__(self, what, fullgraph):
        self.what = what
        self.fullgraph = fullgraph
        self.programs = {}      # key -> ScriptFunction/ScriptModule, or None (eager)
        self.warned = False

    def program(self, key, target):
        if key not in self.programs:
            self.programs[key] = self._script(target)
        return self.programs[key]

    def _script(self, target):
        try:
            return jit.script(target)
        except (ScriptError, TypeError) as error:
            self.fall_back(error, stacklevel=5)
            return None

    def fall_back(self, error, stacklevel=4):
        if self.fullgraph:
            raise error
        if not self.warned:
            self.warned = True
            reason = " ".join(str(error).split())
            warnings.warn(f"ember.compile: running {self.what} eagerly: {reason}",
                          stacklevel=stacklevel)

    def run(self, program, eager, args, kwargs):
        """program(*args, **kwargs); eager for arguments it was not compiled for."""
        if program is None:
            return eager(*args, **kwargs)
        try:
            _bind(program, args, kwargs)
        except (RuntimeError, TypeError) as error:   # a type the script cannot take
            self.fall_back(error)
            return eager(*args, **kwargs)
        return program(*args, **kwargs)


def _bind(program, args, kwargs):
    """Checks the arguments against the script's typed signature (raises)."""
    if isinstance(program, jit.ScriptModule):
        program._function.parameters.bind(program._state() + list(args), dict(kwargs))
    else:
        program.parameters.bind(list(args), dict(kwargs))


class _CompiledFunction:
    def __init__(self, fn, fullgraph):
        functools.update_wrapper(self, fn)
        self._orig_fn = fn
        self._compiler = _Compiler(getattr(fn, "__name__", "the function"), fullgraph)

    def __call__(self, *args, **kwargs):
        program = self._compiler.program(None, self._orig_fn)
        return self._compiler.run(program, self._orig_fn, args, kwargs)

    def __get__(self, obj, objtype=None):   # a compiled function used as a method
        return self if obj is None else functools.partial(self, obj)


class OptimizedModule(Module):
    """What ember.compile(module) returns.  The original is the submodule
    `_orig_mod`, so state_dict keys carry its prefix ("_orig_mod.fc.weight"),
    as PyTorch's; attributes not found here are looked up on it."""

    def __init__(self, mod, fullgraph=False):
        super().__init__()
        self._orig_mod = mod
        object.__setattr__(self, "_compiler", _Compiler(
            f"{type(mod).__name__}.forward", fullgraph))

    def forward(self, *args, **kwargs):
        mod = self._orig_mod
        key = tuple(sub.training for sub in mod.modules())
        program = self._compiler.program(key, mod)
        return self._compiler.run(program, mod, args, kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)
