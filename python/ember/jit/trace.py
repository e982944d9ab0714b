"""ember.jit.trace: record the ops of one eager run into a graph.

Note [Tracing]
~~~~~~~~~~~~~~
Tracing runs the function once, eagerly, on example inputs, with a tracer
hook set in C (Note [The tracer hook] in c/python/Autograd.c): every
operator entry point hands its call to `Tracer.record`, which runs the op
for real and appends one node to the graph.  Tensors are matched to graph
values by identity (every tensor seen is kept alive until the trace ends,
so an id is never reused).  A tensor the trace did not produce (a global,
a tensor made by a factory function) becomes a constant; so does every
Python number.

What tracing cannot see is Python control flow: an `if` on a tensor's value
runs one branch, and only that branch is recorded.  The conversions that
let data steer Python (`bool(t)`, `t.item()`, `int(t)`, `float(t)`) are
where that happens, so each one warns with a TracerWarning, as PyTorch's
tracer does.  Script the function (`ember.jit.script`) to keep the control
flow.
"""

import contextlib
import inspect
import warnings

from .. import _C
from .._tensor import Tensor
from . import ops
from . import types as T
from .ir import Graph


class TracerWarning(Warning):
    """The trace may not generalise to other inputs."""


# Number slots and other non-THPOp entry points, by the name C passes.
SLOT_CALLEES = {
    "__add__": "operator.add", "__sub__": "operator.sub",
    "__mul__": "operator.mul", "__truediv__": "operator.truediv",
    "__floordiv__": "operator.floordiv", "__mod__": "operator.mod",
    "__pow__": "operator.pow", "__matmul__": "operator.matmul",
    "__and__": "operator.and_", "__or__": "operator.or_",
    "__xor__": "operator.xor", "__lshift__": "operator.lshift",
    "__rshift__": "operator.rshift",
    "__iadd__": "operator.iadd", "__isub__": "operator.isub",
    "__imul__": "operator.imul", "__itruediv__": "operator.itruediv",
    "__ifloordiv__": "operator.ifloordiv", "__imod__": "operator.imod",
    "__ipow__": "operator.ipow", "__iand__": "operator.iand",
    "__ior__": "operator.ior", "__ixor__": "operator.ixor",
    "__neg__": "operator.neg", "__abs__": "operator.abs",
    "__invert__": "operator.invert",
    "__lt__": "operator.lt", "__le__": "operator.le", "__eq__": "operator.eq",
    "__ne__": "operator.ne", "__gt__": "operator.gt", "__ge__": "operator.ge",
    "__getitem__": "operator.getitem", "__setitem__": "Tensor.__setitem__",
    "T": "attr.T",
}

CONVERSIONS = {
    "__bool__": ("a Python boolean", bool),
    "item": ("a Python number", lambda t: t.item()),
    "__int__": ("a Python integer", int),
    "__float__": ("a Python float", float),
    "__index__": ("a Python index", lambda t: t.__index__()),
}

_CONVERSION_MESSAGE = (
    "Converting a tensor to {what} might cause the trace to be incorrect. "
    "We can't record the data flow of Python values, so this value will be "
    "treated as a constant in the future. This means that the trace might "
    "not generalize to other inputs!")


class Tracer:
    def __init__(self, graph):
        self.graph = graph
        self.values = {}      # id(tensor) -> Value
        self.keep_alive = []  # every object whose id is in self.values
        self._names = {id(fn): name for name, fn in ops.callee_table().items()}

    # -- values -------------------------------------------------------------------
    def bind(self, obj, value):
        self.values[id(obj)] = value
        self.keep_alive.append(obj)

    def constant(self, obj):
        node = self.graph.create("prim::Constant", (), output_types=[
            T.type_of_value(obj) or T.Any], attrs={"value": obj})
        self.graph.block.append(node)
        return node.output

    def value_of(self, obj):
        if isinstance(obj, Tensor):
            if id(obj) in self.values:
                return self.values[id(obj)]
            value = self.constant(obj)  # a tensor the trace did not make
            self.bind(obj, value)
            return value
        if isinstance(obj, (list, tuple)) and any(
                isinstance(o, (Tensor, list, tuple)) for o in obj):
            items = [self.value_of(o) for o in obj]
            callee = "prim.list" if isinstance(obj, list) else "prim.tuple"
            return self.call_node(callee, items, ())
        return self.constant(obj)

    def call_node(self, callee, inputs, kwnames):
        types = ops.result_types(callee, [v.type for v in inputs], kwnames)
        node = self.graph.create(ops.kind_of(callee), inputs, output_types=types,
                                 attrs={"callee": callee, "kwnames": tuple(kwnames)})
        self.graph.block.append(node)
        return node.output

    # -- the hook ---------------------------------------------------------------------
    def record(self, what, args, kwnames):
        """Called by C for every op while tracing (Note [The tracer hook])."""
        if isinstance(what, str) and what in CONVERSIONS:
            description, convert = CONVERSIONS[what]
            warnings.warn(_CONVERSION_MESSAGE.format(what=description),
                          TracerWarning, stacklevel=3)
            return convert(*args)
        if isinstance(what, str):
            if what == "__iter__":
                return iter(self.record_call("Tensor.unbind", args, None))
            callee = SLOT_CALLEES[what]
        else:
            callee = self._names.get(id(what))
            if callee is None:
                raise RuntimeError(f"ember.jit.trace: cannot record {what!r}")
        return self.record_call(callee, args, kwnames)

    def record_call(self, callee, args, kwnames):
        kwnames = tuple(kwnames or ())
        npos = len(args) - len(kwnames)
        fn = ops.resolve(callee)
        result = fn(*args[:npos], **dict(zip(kwnames, args[npos:])))
        inputs = [self.value_of(a) for a in args]
        output = self.call_node(callee, inputs, kwnames)
        self.bind_result(result, output)
        return result

    def bind_result(self, result, value):
        if isinstance(result, Tensor):
            self.bind(result, value)
        elif isinstance(result, (tuple, list)):
            for i, item in enumerate(result):
                if isinstance(item, Tensor):
                    index = self.constant(i)
                    self.bind(item, self.call_node("operator.getitem", [value, index], ()))


def _parameter_names(fn, n):
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    return (names + [f"input{i}" for i in range(len(names), n)])[:n]


_tracing_depth = 0


@contextlib.contextmanager
def recording(record):
    """The tracer hook set to `record` for the length of a trace
    (ember.jit.trace, ember.onnx.export); is_tracing() is True meanwhile."""
    global _tracing_depth
    _C._set_tracer(record)
    _tracing_depth += 1
    try:
        yield
    finally:
        _tracing_depth -= 1
        _C._set_tracer(None)


def is_tracing():
    """Whether a trace is recording, as torch.jit.is_tracing.  Layers whose
    C kernels run inside one autograd Function the tracer cannot see
    (scaled_dot_product_attention, the recurrent layers) take their
    composite path while it is."""
    return _tracing_depth > 0


def trace(fn, example_inputs):
    """Runs fn(*example_inputs) once and returns a ScriptFunction of the ops
    it ran (Note [Tracing]).  example_inputs: a tensor or a tuple of them."""
    from .function import Parameters, ScriptFunction
    if isinstance(example_inputs, Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    for i, x in enumerate(example_inputs):
        if not isinstance(x, Tensor):
            raise TypeError(f"ember.jit.trace: example input {i} is a "
                            f"{type(x).__name__}, expected a Tensor")
    name = getattr(fn, "__name__", "traced")
    graph = Graph()
    graph.name = name
    tracer = Tracer(graph)
    names = _parameter_names(getattr(fn, "forward", fn), len(example_inputs))
    for x, param_name in zip(example_inputs, names):
        tracer.bind(x, graph.add_input(param_name, T.Tensor))
    with recording(tracer.record):
        result = fn(*example_inputs)
    outputs = list(result) if isinstance(result, tuple) else [result]
    graph.block.set_returns([tracer.value_of(o) for o in outputs])
    parameters = Parameters(name, names, [T.Tensor] * len(names), {})
    return ScriptFunction(graph, parameters, fn if inspect.isfunction(fn) else None)
