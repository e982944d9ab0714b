"""Scripted functions and modules: compile once, specialise per call types.

Note [Specialisation]
~~~~~~~~~~~~~~~~~~~~~
`@ember.jit.script` compiles the source to a graph once (`f.graph`).  What
runs is compiled per *argument signature*, as TorchScript's ArgumentSpec
does: for each tensor argument its dtype, its number of dimensions and
whether autograd must see it (it requires grad and grad mode is on); for
any other argument its type.  The first call with a new signature

  1. copies the graph and refines its input types (Tensor -> Tensor(float32,
     2d)), then propagates types through the ops that allow it;
  2. runs the passes (passes/manager.py): the exact-only-for-some-dtypes
     peepholes fire where the refinement proves them exact;
  3. fuses elementwise groups, unless autograd must record the call (the
     unfused ops then go through autograd like eager code);
  4. lowers to bytecode and builds the C VM's Code object,

and caches the result; later calls with that signature go straight to the
VM.  `f.code` is the *generic* program (nothing refined, fused groups behind
their run-time guards): the one `ember.jit.save` writes, which runs for any
arguments.
"""

import inspect

from .. import _C
from .._tensor import Tensor
from . import types as T
from .ir import ScriptError


def argument_signature(args, grad_enabled):
    """The specialisation key of a call (Note [Specialisation])."""
    key = []
    for arg in args:
        if isinstance(arg, Tensor):
            key.append((arg.dtype, arg.dim(), grad_enabled and arg.requires_grad))
        elif isinstance(arg, (list, tuple)):
            # a list of ints and a list of tensors must not share an entry
            key.append((type(arg), argument_signature(arg, grad_enabled)))
        else:
            key.append(type(arg))
    return tuple(key)


def describe_type(value):
    """The type of a Python value, in the script's words ('List[int]')."""
    t = T.type_of_value(value)
    if t is None:
        return type(value).__name__
    return str(_unrefined(t))


def _unrefined(t):
    if isinstance(t, T.TensorType):
        return T.Tensor
    if isinstance(t, T.ListType):
        return T.ListType(_unrefined(t.elem))
    if isinstance(t, T.TupleType):
        return T.TupleType([_unrefined(e) for e in t.elems])
    return t


def value_matches(value, t):
    """Whether a Python value may be passed for a parameter of type t."""
    if isinstance(t, T.AnyType):
        return True
    if isinstance(t, T.TensorType):
        return isinstance(value, Tensor)
    if isinstance(t, T.BoolType):
        return isinstance(value, bool)
    if isinstance(t, T.IntType):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(t, T.FloatType):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(t, T.NumberType):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(t, T.StrType):
        return isinstance(value, str)
    if isinstance(t, T.NoneType):
        return value is None
    if isinstance(t, T.DtypeType):
        return isinstance(value, _C.dtype)
    if isinstance(t, T.OptionalType):
        return value is None or value_matches(value, t.elem)
    if isinstance(t, T.ListType):
        return isinstance(value, list) and all(value_matches(v, t.elem) for v in value)
    if isinstance(t, T.TupleType):
        return isinstance(value, tuple) and len(value) == len(t.elems) and all(
            value_matches(v, e) for v, e in zip(value, t.elems))
    return False


class Parameters:
    """Names, types and defaults of a scripted function's parameters, and the
    binding of call arguments to them, with TorchScript's messages."""

    def __init__(self, name, names, types, defaults):
        self.name = name
        self.names = list(names)
        self.types = list(types)
        self.defaults = dict(defaults)

    def bind(self, args, kwargs):
        n = len(self.names)
        if len(args) > n:
            raise TypeError(f"{self.name}() expected at most {n} argument(s) "
                            f"but received {len(args)} argument(s)")
        bound = list(args)
        for extra in kwargs:
            if extra not in self.names:
                raise TypeError(f"{self.name}() got an unexpected keyword argument '{extra}'")
        for name in self.names[len(args):]:
            if name in kwargs:
                bound.append(kwargs.pop(name))
            elif name in self.defaults:
                bound.append(self.defaults[name])
            else:
                raise TypeError(f"{self.name}() is missing value for argument "
                                f"'{name}'.")
        if kwargs:
            extra = next(iter(kwargs))
            if extra in self.names:
                raise TypeError(f"{self.name}() got multiple values for argument '{extra}'")
            raise TypeError(f"{self.name}() got an unexpected keyword argument '{extra}'")
        for value, name, t in zip(bound, self.names, self.types):
            if not value_matches(value, t):
                raise TypeError(
                    f"{self.name}() Expected a value of type '{t}' for argument "
                    f"'{name}' but instead found type '{describe_type(value)}'.")
        return bound


class Compiled:
    """One specialisation: the optimised graph, its bytecode program, the
    specs its fused kernels were built from, and the C Code that runs it."""

    __slots__ = ("graph", "program", "fused_specs", "code")

    def __init__(self, graph, program, fused_specs, code):
        self.graph = graph
        self.program = program
        self.fused_specs = fused_specs
        self.code = code


def compile_graph(graph, input_types=None, fuse=True, name=None, log=None):
    """Optimises a copy of `graph` (refined to input_types) and lowers it."""
    from .passes import manager
    from . import lowering
    from .passes.fusion import kernel_spec
    graph = graph.copy()
    graph.name = name or graph.name
    if input_types is not None:
        for value, t in zip(graph.inputs, input_types):
            value.type = t
    graph = manager.optimize(graph, fuse=fuse, log=log)
    program, fused_specs = lowering.lower(graph, kernel_spec=kernel_spec)
    return Compiled(graph, program, fused_specs, program.to_c())


class ScriptFunction:
    """What `@ember.jit.script` returns: callable like the original."""

    def __init__(self, graph, parameters, source_fn=None, qualified_name=None):
        self.graph = graph
        self.parameters = parameters
        self.__name__ = parameters.name
        self.__qualname__ = qualified_name or parameters.name
        self.__doc__ = getattr(source_fn, "__doc__", None)
        self.__wrapped__ = source_fn
        self._specialisations = {}
        self._generic = None

    # -- running ------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if kwargs or len(args) != len(self.parameters.names):
            args = self.parameters.bind(args, dict(kwargs))
        key = argument_signature(args, _C.is_grad_enabled())
        compiled = self._specialisations.get(key)
        if compiled is None:
            args = self.parameters.bind(args, {})
            compiled = self._specialise(key, args)
        return compiled.code(*args)

    def _specialise(self, key, args):
        input_types = []
        needs_autograd = False
        for arg, t, k in zip(args, self.parameters.types, key):
            if isinstance(arg, Tensor):
                input_types.append(T.TensorType(arg.dtype, arg.dim()))
                needs_autograd |= k[2]
            elif arg is None:
                input_types.append(T.NoneT)  # lets `is None` tests fold
            else:
                input_types.append(t)
        compiled = compile_graph(self.graph, input_types, fuse=not needs_autograd,
                                 name=self.__name__)
        self._specialisations[key] = compiled
        return compiled

    # -- looking inside ----------------------------------------------------------------
    @property
    def generic(self):
        """The program for any arguments (what `code` prints, what is saved)."""
        if self._generic is None:
            self._generic = compile_graph(self.graph, fuse=True, name=self.__name__)
        return self._generic

    @property
    def code(self):
        return self.generic.program.format()

    def graph_for(self, *args, **kwargs):
        """The optimised graph that runs for these arguments."""
        args = self.parameters.bind(args, dict(kwargs))
        key = argument_signature(args, _C.is_grad_enabled())
        compiled = self._specialisations.get(key) or self._specialise(key, args)
        return compiled.graph

    def code_for(self, *args, **kwargs):
        args = self.parameters.bind(args, dict(kwargs))
        key = argument_signature(args, _C.is_grad_enabled())
        compiled = self._specialisations.get(key) or self._specialise(key, args)
        return compiled.program.format()

    def cuda_source_for(self, *args, **kwargs):
        """The CUDA C++ source of each fusion group that runs for these
        arguments, as ember.cuda generates it for CUDA tensors (one kernel a
        group; ember/cuda/_fused.py): the sources joined, or "" when nothing
        fused.  Needs no GPU."""
        from ..cuda import _fused
        from .passes.fusion import kernel_spec
        graph = self.graph_for(*args, **kwargs)
        sources = []
        for node in graph.all_nodes():
            if node.kind != "prim::FusionGroup":
                continue
            ninputs, instructions, outputs, _ = kernel_spec(node.attrs["subgraph"])
            program = (ninputs, tuple(map(tuple, instructions)), tuple(outputs))
            is_tensor = tuple(isinstance(v.type, T.TensorType) for v in node.inputs)
            dtypes = {v.type.dtype for v in node.inputs if isinstance(v.type, T.TensorType)}
            dtype = str(dtypes.pop() if len(dtypes) == 1 else _C.float32).removeprefix("ember.")
            sources.append(_fused.cuda_source(program, dtype, is_tensor))
        return "\n".join(sources)

    def __repr__(self):
        return f"<ember.jit.ScriptFunction {self.__qualname__}>"


class ScriptModule:
    """`ember.jit.script(module)`: forward compiled, parameters and buffers
    passed as leading inputs on every call (so training updates are seen)."""

    def __init__(self, module, function, state_names):
        self._module = module
        self._function = function
        self._state_names = list(state_names)
        self._graph_before_freezing_passes = None

    def _state(self):
        state = dict(self._module.named_parameters())
        state.update(dict(self._module.named_buffers()))
        return [state[name] for name in self._state_names]

    def __call__(self, *args, **kwargs):
        return self._function(*self._state(), *args, **kwargs)

    @property
    def graph(self):
        return self._function.graph

    @property
    def code(self):
        return self._function.code

    def graph_for(self, *args):
        return self._function.graph_for(*self._state(), *args)

    def __getattr__(self, name):
        return getattr(self._module, name)

    def __repr__(self):
        return f"<ember.jit.ScriptModule wrapping {type(self._module).__name__}>"


def script(obj):
    """Compiles a function (or an nn.Module's forward) to a ScriptFunction."""
    from ..nn import Module
    from . import frontend
    if isinstance(obj, (ScriptFunction, ScriptModule)):
        return obj
    if isinstance(obj, Module):
        graph, signature, state_names = frontend.compile_module_forward(obj)
        parameters = _parameters_from(signature, type(obj).__name__ + ".forward")
        return ScriptModule(obj, ScriptFunction(graph, parameters, obj.forward),
                            state_names)
    if not inspect.isfunction(obj):
        raise TypeError(f"ember.jit.script expects a function or an nn.Module, "
                        f"got {type(obj).__name__}")
    graph, signature = frontend.compile_function(obj)
    parameters = _parameters_from(signature, obj.__name__)
    return ScriptFunction(graph, parameters, obj, obj.__qualname__)


def freeze(mod, preserved_attrs=None, optimize_numerics=True):
    """torch.jit.freeze: a copy of a scripted module in eval mode whose
    parameters and buffers are constants of its graph, optimised once.

    With optimize_numerics (PyTorch's default) this folds each eval-mode
    batch_norm into the convolution before it (Note [Folding batch norm
    into a convolution], passes/fold_conv_bn.py), which changes results by
    rounding only.  The constants are copies taken now: later changes to
    the module's weights are not seen, as in PyTorch.  A state tensor the
    forward writes in place (a running count) stays an input, as do those
    named in preserved_attrs (dotted names, as named_parameters gives)."""
    from .passes import manager
    from .passes.log import RewriteLog, parse_opt_limit
    import os
    if not isinstance(mod, ScriptModule):
        raise RuntimeError("Freezing expects a ScriptModule as input. Please use "
                           "ember.jit.script or ember.jit.trace to script your 'nn.Module'.")
    if mod._module.training:
        raise RuntimeError("Freezing is currently only implemented for modules in eval "
                           "mode. Please call .eval() on your module before freezing.")
    function = mod._function
    keep = set(preserved_attrs or ()) | _state_written_in_place(mod)
    graph, kept = _graph_with_constant_state(function.graph, mod._state_names,
                                             mod._state(), keep)
    limits = parse_opt_limit(os.environ.get("EMBER_JIT_OPT_LIMIT", ""))
    if not optimize_numerics:
        limits["fold_conv_bn"] = 0
    unoptimized = graph
    graph = manager.optimize(graph.copy(), log=RewriteLog(limits), fuse=False)
    n_state = len(mod._state_names)
    params = function.parameters
    kept_names = [name for name in mod._state_names if name in kept]
    parameters = Parameters(params.name, kept_names + params.names[n_state:],
                            [T.Tensor] * len(kept_names) + params.types[n_state:],
                            params.defaults)
    frozen = ScriptFunction(graph, parameters, function.__wrapped__, function.__qualname__)
    frozen_module = ScriptModule(mod._module, frozen, kept_names)
    # what ember.jit.explain starts from, so that it shows the fold
    frozen_module._graph_before_freezing_passes = unoptimized
    return frozen_module


def _state_written_in_place(mod):
    """The state names whose graph input some node writes into."""
    from .passes import util
    written = set()
    for name, value in zip(mod._state_names, mod._function.graph.inputs):
        if any(index == 0 and util.is_inplace_node(user) for user, index in value.uses):
            written.add(name)
    return written


def _graph_with_constant_state(graph, state_names, state, keep):
    """A copy of graph whose leading state inputs are constants (detached
    copies of the tensors), except those named in keep; and the kept names."""
    from .ir import Graph, clone_block_into
    new = Graph()
    new.name = graph.name
    value_map, kept = {}, set()
    inputs = list(graph.inputs)
    for value, name, tensor in zip(inputs, state_names, state):
        if name in keep:
            value_map[value] = new.add_input(value.debug_name, value.type)
            kept.add(name)
            continue
        constant = tensor.detach().clone()
        node = new.create("prim::Constant", (), output_types=[T.type_of_value(constant)],
                          attrs={"value": constant})
        new.block.append(node)
        node.output.debug_name = value.debug_name
        value_map[value] = node.output
    for value in inputs[len(state_names):]:
        value_map[value] = new.add_input(value.debug_name, value.type)
    clone_block_into(graph.block, new.block, value_map)
    new.block.set_returns([value_map.get(v, v) for v in graph.outputs])
    return new, kept


def _parameters_from(signature, name):
    return Parameters(name, signature.names, signature.types, signature.defaults)


__all__ = ["script", "freeze", "ScriptFunction", "ScriptModule", "ScriptError",
           "compile_graph"]
