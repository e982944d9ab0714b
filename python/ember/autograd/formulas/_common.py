"""What every derivative formula shares: registration, broadcasting
reduction, in-place and view bookkeeping.

Note [Writing a formula]
~~~~~~~~~~~~~~~~~~~~~~~~
A formula is two pieces, both registered here under the operator's names:

  - a *handler*, called by the C boundary (Note [The autograd boundary])
    with the operator's own arguments when grad mode is on and an input
    requires grad.  Grad mode is OFF while it runs, so calling the operator
    again takes the C path.  It computes the result, creates the node with
    the edges of its differentiable inputs, saves what backward needs, and
    attaches the node to the result;
  - a Node subclass named as PyTorch names it (MulBackward0) whose
    `apply(grad)` returns one gradient per edge, computed with ember
    operators (so that, under create_graph=True, backward is recorded too).

    class MulBackward0(Node):
        __slots__ = ()
        def apply(self, grad):
            input, other = self.unpack_saved()
            return (reduce_grad(grad * other, input) if self._edges[0] else None,
                    reduce_grad(grad * input, other) if self._edges[1] else None)

    @register("mul", "multiply")
    def mul(input, other, *, out=None):
        refuse_out("mul", out)
        result = ember.mul(input, other)
        node = MulBackward0(edges_of(input, other))
        node.save(input, other)
        return record(node, result)

In-place variants (`mul_`) come from `register_inplace("mul_", ember.mul)`,
which runs the out-of-place formula on a copy and moves the history
(Note [In-place operations]).  Operators without a derivative are
registered with `nondifferentiable(...)`: their results never require grad.
"""

import weakref

from ... import _C
from ..graph import Node, edge_of, edges_of, record, SavedOutput, _op_name  # noqa: F401
from ..graph import add_custom_function_view, custom_function_views, is_custom_function_view

_TensorBase = _C._TensorBase
_handlers = _C._autograd_handlers
_set_history = _C._set_history
_set_grad_enabled = _C._set_grad_enabled


def register(*names):
    """Registers the decorated handler for each operator name."""
    def decorate(handler):
        for name in names:
            if name in _handlers:
                raise RuntimeError(f"autograd handler for {name!r} registered twice")
            _handlers[name] = handler
        return handler
    return decorate


def nondifferentiable(*names):
    """Operators whose results never require grad (comparisons, argmax, ...)."""
    for name in names:
        if name in _handlers:
            raise RuntimeError(f"autograd handler for {name!r} registered twice")
        _handlers[name] = None


def refuse_out(name, out):
    if out is not None:
        raise RuntimeError(
            f"{name}(): functions with out=... arguments don't support automatic "
            "differentiation, but one of the arguments requires grad.")


def sum_to(grad, shape):
    """Sums a broadcast gradient back to `shape` (broadcasting's adjoint)."""
    grad_shape = grad.shape
    if grad_shape == shape:
        return grad
    leading = len(grad_shape) - len(shape)
    dims = list(range(leading))
    for i, size in enumerate(shape):
        if size == 1 and grad_shape[leading + i] != 1:
            dims.append(leading + i)
    if dims:
        grad = grad.sum(dims, keepdim=True)
    if leading:
        grad = grad.reshape(shape)
    return grad


class TensorMeta:
    """An input's shape and dtype, kept by formulas that need no values
    (add needs only shapes), so the node does not keep the memory alive."""

    __slots__ = ("shape", "dtype")

    def __init__(self, tensor):
        self.shape = tensor.shape
        self.dtype = tensor.dtype


def meta_of(value):
    """TensorMeta of a tensor, None for anything else (a Python number)."""
    return TensorMeta(value) if isinstance(value, _TensorBase) else None


def reduce_grad(grad, input):
    """The gradient for `input` (a tensor or TensorMeta) of a broadcasting
    op: summed to its shape and cast to its dtype.  None when `input` is
    not a tensor (a Python number)."""
    if input is None or not isinstance(input, (_TensorBase, TensorMeta)):
        return None
    grad = sum_to(grad, input.shape)
    if grad.dtype != input.dtype:
        grad = grad.to(input.dtype)
    return grad


# ---- views --------------------------------------------------------------------

def mark_view(view, base):
    """Records that `view` shares `base`'s memory (for in-place on views).

    The view remembers the tensor at the root of the chain of views, so an
    in-place write through it can update that tensor's history
    (Note [In-place operations])."""
    root = base._autograd_meta
    if root is None:
        root = base
    view._autograd_meta = root
    if root.grad_fn is not None:  # only a non-leaf can be written in place with grad
        entry = _views_of_root.get(id(root))
        if entry is not None and len(entry[1]) < entry[2]:
            entry[1].append(_weakref(view))  # _remember_view's common case, inline
        else:
            _remember_view(root, view)
    if custom_function_views and is_custom_function_view(base):
        add_custom_function_view(view)
    return view


# Note [Views after an in-place write]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A view made before an in-place write into its base (or into another view
# of that base) reads the new values, so its history must go through the
# write.  PyTorch regenerates such a view's grad_fn when it is next used;
# ember does it at the write: every live view of the written root gets the
# history of root.as_strided(its geometry), as the written view does.
# id(root) -> [weak reference to root, [weak references to its views],
# list length at which dead references are next dropped].
_views_of_root = {}
_weakref = weakref.ref


def _remember_view(root, view):
    key = id(root)
    entry = _views_of_root.get(key)
    if entry is None:
        entry = _views_of_root[key] = [
            weakref.ref(root, lambda _, key=key: _views_of_root.pop(key, None)), [], 8]
    views = entry[1]
    if len(views) >= entry[2]:  # drop the dead ones; amortised O(1) per view
        views[:] = [ref for ref in views if ref() is not None]
        entry[2] = max(8, 2 * len(views))
    views.append(weakref.ref(view))


def _refresh_views(root, written):
    """Note [Views after an in-place write]; grad mode is on."""
    entry = _views_of_root.get(id(root))
    if entry is None or entry[0]() is not root:
        return
    # A view detached since (detach_) keeps no history.
    views = [view for view in (ref() for ref in entry[1])
             if view is not None and view is not written and view.grad_fn is not None]
    entry[1][:] = [weakref.ref(view) for view in views]
    for view in views:
        old_history = view.grad_fn, view.output_nr
        alias = root.as_strided(view.size(), view.stride(), view.storage_offset())
        _set_history(view, alias.grad_fn, alias.output_nr)
        _move_retained_grad(view, *old_history)
    if written is not root:
        entry[1].append(weakref.ref(written))


def view_base(tensor):
    return tensor._autograd_meta


# ---- in-place operations ----------------------------------------------------------

def check_inplace(tensor):
    """PyTorch's refusals before writing into a tensor autograd tracks."""
    if tensor.requires_grad and tensor.grad_fn is None:
        base = tensor._autograd_meta
        if base is not None and base.requires_grad and base.grad_fn is None:
            raise RuntimeError(
                "a view of a leaf Variable that requires grad is being used in an "
                "in-place operation.")
        raise RuntimeError(
            "a leaf Variable that requires grad is being used in an in-place "
            "operation.")
    if custom_function_views and is_custom_function_view(tensor):
        raise RuntimeError(
            f"Output {tensor.output_nr} of {_op_name(tensor.grad_fn)} is a view and is being "
            "modified inplace. This view was created inside a custom Function (or because an "
            "input was returned as-is) and the autograd logic to handle view+inplace would "
            "override the custom backward associated with the custom Function, leading to "
            "incorrect gradients. This behavior is forbidden. You can fix this by cloning "
            "the output of the custom Function.")
    base = tensor._autograd_meta
    if base is not None and base.requires_grad and base.grad_fn is None:
        raise RuntimeError(
            "a view of a leaf Variable that requires grad is being used in an "
            "in-place operation.")
    producer = tensor.grad_fn
    if base is not None and producer is not None and producer.num_outputs > 1:
        raise RuntimeError(
            f"Output {tensor.output_nr} of {_op_name(producer)} is a view and is being "
            "modified inplace. This view is the output of a function that returns multiple "
            "views. Such functions do not allow the output views to be modified inplace. You "
            "should replace the inplace operation by an out-of-place one.")


def _snapshot(tensor):
    """A copy of `tensor` standing for its current value in the graph."""
    copy = tensor.clone()
    if tensor.grad_fn is not None:
        _set_history(copy, tensor.grad_fn, tensor.output_nr)
    return copy


def commit_inplace(tensor, result):
    """Writes `result` (computed out of place, with history) into `tensor`
    and makes `tensor` the output of result's node.

    Note [In-place operations]
    ~~~~~~~~~~~~~~~~~~~~~~~~~~
    `x.op_(args)` under autograd is `x_new = op(x_old, args)` written into
    x's memory.  The formula runs out of place on a snapshot of x (so the
    values it saves are the old ones), the result is copied into x (which
    bumps x's version counter, so nodes that saved x will refuse to use
    it), and x takes over the result's history.  When x is a view of a
    tensor `base`, base's values changed too: base gets a CopySlices node
    whose backward routes the gradient of x's region to the new history
    and the rest to base's old one, and x becomes a view of the new base.
    """
    if result.dtype != tensor.dtype:
        _set_grad_enabled(True)
        try:
            result = result.to(tensor.dtype)
        finally:
            _set_grad_enabled(False)
    tensor.copy_(result)
    base = tensor._autograd_meta
    old_history = tensor.grad_fn, tensor.output_nr
    if base is None:
        _set_history(tensor, result.grad_fn, result.output_nr)
        _move_retained_grad(tensor, *old_history)
        if id(tensor) in _views_of_root:
            _set_grad_enabled(True)
            try:
                _refresh_views(tensor, tensor)
            finally:
                _set_grad_enabled(False)
        return tensor
    old_base_history = base.grad_fn, base.output_nr
    node = CopySlices(edges_of(base, result), base, tensor)
    _set_history(base, node, 0)
    _move_retained_grad(base, *old_base_history)
    _set_grad_enabled(True)
    try:
        alias = base.as_strided(tensor.size(), tensor.stride(), tensor.storage_offset())
        _set_history(tensor, alias.grad_fn, alias.output_nr)
        _move_retained_grad(tensor, *old_history)
        _refresh_views(base, tensor)
    finally:
        _set_grad_enabled(False)
    return tensor


def _move_retained_grad(tensor, old_grad_fn, old_output_nr):
    """retain_grad() follows the tensor to its new history after an
    in-place write (as in PyTorch 2): .grad is the gradient of the value
    written last."""
    hooks = None if old_grad_fn is None else old_grad_fn._hooks
    if hooks is None or not hooks.retain:
        return
    ref = hooks.retain.get(old_output_nr)
    if ref is None or ref() is not tensor:
        return
    del hooks.retain[old_output_nr]
    tensor.grad_fn._get_hooks().retain[tensor.output_nr] = ref


def register_inplace(name, out_of_place):
    """Registers the handler of in-place operator `name` (e.g. "mul_") from
    its out-of-place operator (ember.mul): Note [In-place operations]."""
    @register(name)
    def inplace_handler(self, *args, **kwargs):
        check_inplace(self)
        snapshot = _snapshot(self)
        _set_grad_enabled(True)
        try:
            result = out_of_place(snapshot, *args, **kwargs)
        finally:
            _set_grad_enabled(False)
        return commit_inplace(self, result)
    inplace_handler.__name__ = name
    return inplace_handler


def _storage_span(sizes, strides, offset):
    """(lowest, one past highest) storage index a geometry touches."""
    low = high = offset
    for size, stride in zip(sizes, strides):
        if size == 0:
            return offset, offset
        if stride > 0:
            high += (size - 1) * stride
        else:
            low += (size - 1) * stride
    return low, high + 1


class CopySlices(Node):
    """Backward of an in-place write through a view into its base.

    Edges: (base before the write, the value written).  The incoming
    gradient is the new base's; the written region's part goes to the value
    written, the rest to the old base."""

    __slots__ = ("base_geometry", "view_geometry")

    def __init__(self, edges, base, view):
        super().__init__(edges)
        self.base_geometry = (tuple(base.shape), base.stride(), base.storage_offset())
        self.view_geometry = (tuple(view.shape), view.stride(), view.storage_offset())

    def apply(self, grad):
        # Written with differentiable operators only (index_put, take), so
        # that create_graph=True records this backward too: positions in a
        # flat stand-in for the storage say where each element lives.
        base_sizes, base_strides, base_offset = self.base_geometry
        view_sizes, view_strides, view_offset = self.view_geometry
        low_b, high_b = _storage_span(base_sizes, base_strides, base_offset)
        low_v, high_v = _storage_span(view_sizes, view_strides, view_offset)
        low = min(low_b, low_v)
        positions = _C.arange(max(high_b, high_v) - low)
        base_positions = positions.as_strided(base_sizes, base_strides, base_offset - low)
        view_positions = positions.as_strided(view_sizes, view_strides, view_offset - low)
        flat = _C.zeros(positions.numel(), dtype=grad.dtype).index_put(
            (base_positions.reshape(-1),), grad.reshape(-1), accumulate=True)
        value_grad = flat.take(view_positions)
        flat = flat.index_put((view_positions.reshape(-1),), _C.zeros((), dtype=grad.dtype))
        return flat.take(base_positions), value_grad
