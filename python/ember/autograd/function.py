"""Custom differentiable operations: ember.autograd.Function.

    class Exp(Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            y, = ctx.saved_tensors
            return grad * y

    y = Exp.apply(x)

As in PyTorch, `ctx` is the graph node itself (an instance of the generated
class ExpBackward), forward runs with grad mode off, and backward returns
one gradient (or None) per forward argument.
"""

import functools

from .. import _C
from .graph import Node, SavedOutput, add_custom_function_view, edge_of
from .grad_mode import no_grad

_TensorBase = _C._TensorBase
_set_history = _C._set_history
_is_grad_enabled = _C.is_grad_enabled


class FunctionCtx:
    """What forward and backward can ask of `ctx`."""

    def save_for_backward(self, *tensors):
        for t in tensors:
            if t is not None and not isinstance(t, _TensorBase):
                raise TypeError(
                    "save_for_backward can only save variables, but argument "
                    f"{tensors.index(t)} is of type {type(t).__name__}")
        self._to_save = tensors

    def mark_dirty(self, *tensors):
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors):
        self._non_differentiable = tensors

    def set_materialize_grads(self, value):
        self._materialize_grads = bool(value)

    @property
    def saved_tensors(self):
        return tuple(self.unpack_saved())


class BackwardCFunction(Node, FunctionCtx):
    """The node of one Function.apply call; also its ctx."""

    _forward_cls = None

    def apply(self, *grads):
        if self._materialize_grads:
            grads = tuple(_C.zeros(shape, dtype=dtype) if g is None else g
                          for g, (shape, dtype) in zip(grads, self._output_meta))
        result = self._forward_cls.backward(self, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        expected = len(self._input_is_tensor)
        if len(result) != expected:
            # PyTorch allows extra trailing Nones.
            if len(result) > expected and all(g is None for g in result[expected:]):
                result = result[:expected]
            else:
                raise RuntimeError(
                    f"function {type(self).__name__} returned an incorrect number of "
                    f"gradients (expected {expected}, got {len(result)})")
        grads_for_edges = []
        for i, (g, is_tensor) in enumerate(zip(result, self._input_is_tensor)):
            if not is_tensor:
                if g is not None:
                    raise RuntimeError(
                        f"function {type(self).__name__} returned a gradient different "
                        f"than None at position {i + 1}, but the corresponding forward "
                        "input was not a Variable")
                continue
            grads_for_edges.append(g)
        return tuple(grads_for_edges)


class _FunctionMeta(type):
    """Gives each Function subclass its node class, <Name>Backward."""

    def __init__(cls, name, bases, attrs):
        backward_cls = type(name + "Backward", (BackwardCFunction,),
                            {"_forward_cls": cls})
        cls._backward_cls = backward_cls
        super().__init__(name, bases, attrs)


class Function(metaclass=_FunctionMeta):
    """Subclass with static forward(ctx, *args) and backward(ctx, *grads)."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError(
            "You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD.")

    vjp = backward

    @classmethod
    def apply(cls, *args, **kwargs):
        if kwargs:
            raise TypeError(f"{cls.__name__}.apply() takes no keyword arguments")
        tensor_args = [a for a in args if isinstance(a, _TensorBase)]
        edges = tuple(edge_of(a) for a in tensor_args)
        record = _is_grad_enabled() and any(e is not None for e in edges)
        ctx = cls._backward_cls(edges)
        ctx.needs_input_grad = tuple(
            edge_of(a) is not None if isinstance(a, _TensorBase) else False for a in args)
        ctx._input_is_tensor = tuple(isinstance(a, _TensorBase) for a in args)
        ctx._to_save = ()
        ctx._dirty = ()
        ctx._non_differentiable = ()
        ctx._materialize_grads = True
        with no_grad():
            outputs = cls.forward(ctx, *args)
        if not record:
            return outputs
        return _wrap_outputs(ctx, args, outputs)


def _wrap_outputs(ctx, args, outputs):
    is_tuple = isinstance(outputs, tuple)
    results = list(outputs) if is_tuple else [outputs]
    dirty_ids = {id(t) for t in ctx._dirty}
    non_differentiable_ids = {id(t) for t in ctx._non_differentiable}
    inputs = [a for a in args if isinstance(a, _TensorBase)]
    input_ids = {id(a) for a in inputs}
    ctx.num_outputs = len(results)
    ctx._output_meta = []
    for i, out in enumerate(results):
        if not isinstance(out, _TensorBase):
            ctx._output_meta.append(((), None))
            continue
        ctx._output_meta.append((tuple(out.shape), out.dtype))
        if id(out) in non_differentiable_ids or not out.is_floating_point():
            continue  # integer and bool outputs are never differentiable
        if id(out) in dirty_ids:
            if out.is_leaf and out.requires_grad:
                raise RuntimeError(
                    "a leaf Variable that requires grad has been used in an in-place "
                    "operation.")
        elif id(out) in input_ids:
            # An input returned as is becomes a new alias with this history.
            out = results[i] = out.detach()
            _mark_custom_view(out, inputs)
        elif inputs:
            _mark_custom_view(out, inputs)
        _set_history(out, ctx, i)
    outputs_by_id = {id(out): i for i, out in enumerate(results)}
    ctx.save(*(SavedOutput(t, outputs_by_id[id(t)]) if id(t) in outputs_by_id else t
               for t in ctx._to_save))
    # The node must not keep its outputs alive (a tensor -> node -> tensor
    # cycle): only the SavedOutput aliases above stay.
    ctx._to_save = ctx._dirty = ctx._non_differentiable = ()
    return tuple(results) if is_tuple else results[0]


def _mark_custom_view(out, inputs):
    """Registers `out` as a custom Function's view when it shares memory with
    one of the inputs, and makes it a view of that input."""
    memory = out.untyped_storage().data_ptr()
    for t in inputs:
        if t.untyped_storage().data_ptr() == memory:
            root = t._autograd_meta
            out._autograd_meta = t if root is None else root
            add_custom_function_view(out)
            return


def once_differentiable(backward):
    """Decorator for a backward that is not itself differentiable: it runs
    with grad mode off even under create_graph=True."""
    @functools.wraps(backward)
    def wrapper(ctx, *grads):
        with no_grad():
            return backward(ctx, *grads)
    return wrapper
