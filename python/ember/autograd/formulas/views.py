"""Derivatives of the view and copy methods (c/python/VariableViews.c).

A view shares its input's memory, so every handler here that returns a view
calls mark_view(result, input): an in-place write through the view then
updates its base's history (Note [In-place operations] in _common.py).

Note [Index maps]
~~~~~~~~~~~~~~~~~
Many operators only pick elements of their input: select, narrow, diagonal,
unfold, t[index], ...  Output element k is input element number p[k] (in
row-major order), so the backward adds the gradient of output k into
position p[k] of a zero gradient.  The map p is found without any
per-operator reasoning: run the same operator on `element_positions(shape)`
(arange(numel).reshape(shape)) and every output element *is* its p[k].

    backward = scatter_positions(grad, p, shape)
             = zeros(numel).index_put((p,), grad, accumulate=True).reshape(shape)

Positions that repeat (overlapping unfold windows, t[[0, 0]]) accumulate,
as they must.  index_put is an ember operator with its own formula (its
values' gradient gathers at the same positions), so the backward is
differentiable again (create_graph=True, gradgradcheck).
"""

import math

import ember

from ... import _C
from ._common import (Node, _storage_span, check_inplace, commit_inplace,
                      edges_of, mark_view, meta_of, nondifferentiable, record,
                      reduce_grad, register, sum_to)

_TensorBase = _C._TensorBase
_owns_its_memory = _C._owns_its_memory
_set_grad_enabled = _C._set_grad_enabled


# ---- shared helpers (also used by shape.py and indexing.py) ---------------------

def element_positions(shape, device=None):
    """arange(numel).reshape(shape): each element holds its own row-major
    position (Note [Index maps]), on `device` (the gradient's: a CUDA
    gradient's index map runs on the GPU, its index tensors there too)."""
    return ember.arange(math.prod(shape), device=device).reshape(shape)


def scatter_positions(grad, positions, shape):
    """A zero tensor of `shape` with grad[k] added at flat position
    positions[k]; repeated positions accumulate (Note [Index maps])."""
    flat = ember.zeros(math.prod(shape), dtype=grad.dtype, device=grad.device)
    flat = flat.index_put((positions.reshape(-1),), grad.reshape(-1), accumulate=True)
    return flat.reshape(shape)


def wrap_dim(dim, ndim):
    """A possibly negative dim as an index in [0, ndim) (0-d counts as 1-d)."""
    return dim + max(ndim, 1) if dim < 0 else dim


def is_view_of(result, input):
    """Whether `result` shares memory with `input` (reshape may copy)."""
    return result is not input and not _owns_its_memory(result)


def record_view(node, result, input):
    """Attaches `node` to `result`, a view of `input`, and marks the view."""
    record(node, result)
    return mark_view(result, input)


def composite(op, *args, **kwargs):
    """Runs `op` with grad mode on, so that an operator written in terms of
    others (hstack is cat) is recorded by their formulas."""
    _set_grad_enabled(True)
    try:
        return op(*args, **kwargs)
    finally:
        _set_grad_enabled(False)


class IndexMapBackward(Node):
    """Backward of an operator that picks input elements: `forward_op` is
    replayed on the positions tensor as forward_op(positions, *args)
    (Note [Index maps])."""

    __slots__ = ("input_shape", "forward_op", "args")

    def apply(self, grad):
        shape = self.input_shape
        positions = self.forward_op(element_positions(shape, grad.device), *self.args)
        return (scatter_positions(grad, positions, shape),)


def record_index_map(node_class, input, result, forward_op, args, view=True):
    """Records an IndexMapBackward subclass for `result` = forward_op(input, *args)."""
    node = node_class(edges_of(input))
    node.input_shape = input.shape
    node.forward_op = forward_op
    node.args = args
    record(node, result)
    return mark_view(result, input) if view else result


# ---- view, reshape, flatten, squeeze, unsqueeze: same elements, other shape ------

class ViewBackward0(Node):
    """The gradient is reshaped back to the input's shape."""

    __slots__ = ("input_shape",)

    def apply(self, grad):
        return (grad.reshape(self.input_shape),)


class UnsafeViewBackward0(ViewBackward0):
    """reshape that had to copy (non-contiguous input)."""
    __slots__ = ()


class SqueezeBackward0(ViewBackward0):
    __slots__ = ()


class SqueezeBackward1(ViewBackward0):
    __slots__ = ()


class SqueezeBackward2(ViewBackward0):
    __slots__ = ()


class UnsqueezeBackward0(ViewBackward0):
    __slots__ = ()


def _record_reshape(node_class, input, result):
    """reshape-like results are views when the layout allows, else copies."""
    if result is input:
        return result
    view = is_view_of(result, input)
    if not view and node_class is ViewBackward0:
        node_class = UnsafeViewBackward0
    node = node_class(edges_of(input))
    node.input_shape = input.shape
    record(node, result)
    return mark_view(result, input) if view else result


@register("view")
def view(self, *shape):
    return _record_reshape(ViewBackward0, self, self.view(*shape))


@register("view_as")
def view_as(self, other):
    return _record_reshape(ViewBackward0, self, self.view_as(other))


@register("reshape")
def reshape(self, *shape):
    return _record_reshape(ViewBackward0, self, self.reshape(*shape))


@register("reshape_as")
def reshape_as(self, other):
    return _record_reshape(ViewBackward0, self, self.reshape_as(other))


@register("flatten")
def flatten(self, *args, **kwargs):
    return _record_reshape(ViewBackward0, self, self.flatten(*args, **kwargs))


@register("squeeze")
def squeeze(self, *args, **kwargs):
    dim = args[0] if args else kwargs.get("dim")
    node_class = (SqueezeBackward0 if dim is None
                  else SqueezeBackward2 if isinstance(dim, (tuple, list)) else SqueezeBackward1)
    return _record_reshape(node_class, self, self.squeeze(*args, **kwargs))


@register("unsqueeze")
def unsqueeze(self, *args, **kwargs):
    return _record_reshape(UnsqueezeBackward0, self, self.unsqueeze(*args, **kwargs))


# ---- transpose, t, permute, T ------------------------------------------------------

class TransposeBackward0(Node):
    __slots__ = ("dim0", "dim1")

    def apply(self, grad):
        return (grad.transpose(self.dim0, self.dim1),)


class TBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        return (grad.t(),)


class PermuteBackward0(Node):
    """The gradient goes through the inverse permutation."""

    __slots__ = ("inverse",)

    def apply(self, grad):
        return (grad.permute(self.inverse),)


@register("transpose")
def transpose(self, dim0, dim1):
    result = self.transpose(dim0, dim1)
    node = TransposeBackward0(edges_of(self))
    node.dim0, node.dim1 = dim0, dim1
    return record_view(node, result, self)


@register("t")
def t(self):
    return record_view(TBackward0(edges_of(self)), self.t(), self)


def _inverse_permutation(dims, ndim):
    inverse = [0] * len(dims)
    for position, dim in enumerate(dims):
        inverse[wrap_dim(dim, ndim)] = position
    return tuple(inverse)


@register("permute")
def permute(self, *dims, **kwargs):
    result = self.permute(*dims, **kwargs)
    if "dims" in kwargs:
        dims = kwargs["dims"]
    elif len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = dims[0]
    node = PermuteBackward0(edges_of(self))
    node.inverse = _inverse_permutation(dims, self.dim())
    return record_view(node, result, self)


@register("T")
def T(self):
    node = PermuteBackward0(edges_of(self))
    node.inverse = tuple(range(self.dim() - 1, -1, -1))  # reversing is its own inverse
    return record_view(node, self.T, self)


# ---- expand ------------------------------------------------------------------------

class ExpandBackward0(Node):
    """Broadcasting's adjoint: the gradient summed back to the input's shape."""

    __slots__ = ("input_shape",)

    def apply(self, grad):
        return (sum_to(grad, self.input_shape),)


def _record_expand(self, result):
    node = ExpandBackward0(edges_of(self))
    node.input_shape = self.shape
    return record_view(node, result, self)


@register("expand")
def expand(self, *sizes):
    return _record_expand(self, self.expand(*sizes))


@register("expand_as")
def expand_as(self, other):
    return _record_expand(self, self.expand_as(other))


# ---- narrow, select, unfold: index maps -----------------------------------------------

class SliceBackward0(IndexMapBackward):
    __slots__ = ()


class SelectBackward0(IndexMapBackward):
    __slots__ = ()


class UnfoldBackward0(IndexMapBackward):
    __slots__ = ()


@register("narrow")
def narrow(input, dim, start, length):
    return record_index_map(SliceBackward0, input, input.narrow(dim, start, length),
                            _TensorBase.narrow, (dim, start, length))


@register("select")
def select(input, dim, index):
    return record_index_map(SelectBackward0, input, input.select(dim, index),
                            _TensorBase.select, (dim, index))


@register("unfold")
def unfold(self, dimension, size, step):
    return record_index_map(UnfoldBackward0, self, self.unfold(dimension, size, step),
                            _TensorBase.unfold, (dimension, size, step))


# ---- as_strided: storage geometry --------------------------------------------------------

class AsStridedBackward0(Node):
    """The gradient is placed at the output's storage positions, then read
    back at the input's (CopySlices's flat-storage trick, with index_put and
    take so that it is differentiable).  An input that overlaps itself (an
    expanded tensor) is not divided by its multiplicity as PyTorch does."""

    __slots__ = ("input_geometry", "output_geometry")

    def apply(self, grad):
        in_sizes, in_strides, in_offset = self.input_geometry
        out_sizes, out_strides, out_offset = self.output_geometry
        low_in, high_in = _storage_span(in_sizes, in_strides, in_offset)
        low_out, high_out = _storage_span(out_sizes, out_strides, out_offset)
        low, span = min(low_in, low_out), max(high_in, high_out) - min(low_in, low_out)
        storage = ember.arange(span)
        out_positions = storage.as_strided(out_sizes, out_strides, out_offset - low)
        in_positions = storage.as_strided(in_sizes, in_strides, in_offset - low)
        storage_grad = scatter_positions(grad, out_positions, (span,))
        return (storage_grad.take(in_positions),)


def _geometry(tensor):
    return (tuple(tensor.shape), tensor.stride(), tensor.storage_offset())


@register("as_strided")
def as_strided(input, size, stride, storage_offset=None):
    result = input.as_strided(size, stride, storage_offset)
    node = AsStridedBackward0(edges_of(input))
    node.input_geometry = _geometry(input)
    node.output_geometry = _geometry(result)
    return record_view(node, result, input)


# ---- contiguous, clone, to and the casts: copies ------------------------------------------

class CloneBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        return (grad,)


class ToCopyBackward0(Node):
    """The gradient is cast back to the input's dtype."""

    __slots__ = ("input_dtype",)

    def apply(self, grad):
        return (grad.to(self.input_dtype),)


@register("contiguous")
def contiguous(self, *args, **kwargs):
    result = self.contiguous(*args, **kwargs)
    if result is self:  # already contiguous: PyTorch returns self, no node
        return self
    return record(CloneBackward0(edges_of(self)), result)


@register("clone")
def clone(input, *args, **kwargs):
    return record(CloneBackward0(edges_of(input)), input.clone(*args, **kwargs))


def _record_cast(input, result):
    """A converted copy: no node when nothing changed (PyTorch returns self)
    or when the new dtype cannot require grad (integers, bool)."""
    if result is input or not result.is_floating_point():
        return result
    node = ToCopyBackward0(edges_of(input))
    node.input_dtype = input.dtype
    return record(node, result)


@register("to")
def to(self, *args, **kwargs):
    return _record_cast(self, self.to(*args, **kwargs))


def _register_cast(name):
    method = getattr(_TensorBase, name)

    @register(name)
    def cast(self, *args, **kwargs):
        return _record_cast(self, method(self, *args, **kwargs))
    cast.__name__ = name


for _name in ("float", "double", "half", "bfloat16"):
    _register_cast(_name)

# Integer and bool results cannot require grad: PyTorch records nothing.
nondifferentiable("bool", "byte", "char", "short", "int", "long")


# ---- copy_, fill_, zero_: in-place writes that replace every value ------------------------

class CopyBackwards(Node):
    """self's old values are overwritten (zero gradient); src gets the
    gradient summed to its shape (it was broadcast) and cast to its dtype."""

    __slots__ = ("src_meta",)

    def apply(self, grad):
        grad_self = ember.zeros_like(grad) if self._edges[0] is not None else None
        grad_src = reduce_grad(grad, self.src_meta) if self._edges[1] is not None else None
        return grad_self, grad_src


class ZeroBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        return (ember.zeros_like(grad),)


class FillBackward2(ZeroBackward0):
    """fill_(number)."""
    __slots__ = ()


class FillBackward3(Node):
    """fill_(0-d tensor): every element is the value, so it gets their sum."""

    __slots__ = ("value_meta",)

    def apply(self, grad):
        grad_self = ember.zeros_like(grad) if self._edges[0] is not None else None
        grad_value = (reduce_grad(grad.sum(), self.value_meta)
                      if self._edges[1] is not None else None)
        return grad_self, grad_value


def _write_whole(self, node, new_values):
    """Gives `self` the values `new_values` (a fresh tensor) and the history
    `node` (Note [In-place operations])."""
    return commit_inplace(self, record(node, new_values))


@register("copy_")
def copy_(self, src, non_blocking=False):
    check_inplace(self)
    new_values = ember.empty_like(self)
    new_values.copy_(src, non_blocking)
    node = CopyBackwards(edges_of(self, src))
    node.src_meta = meta_of(src)
    return _write_whole(self, node, new_values)


@register("fill_")
def fill_(self, value):
    check_inplace(self)
    new_values = ember.empty_like(self)
    new_values.fill_(value)
    if isinstance(value, _TensorBase):
        node = FillBackward3(edges_of(self, value))
        node.value_meta = meta_of(value)
    else:
        node = FillBackward2(edges_of(self))
    return _write_whole(self, node, new_values)


@register("zero_")
def zero_(self):
    check_inplace(self)
    return _write_whole(self, ZeroBackward0(edges_of(self)), ember.zeros_like(self))
