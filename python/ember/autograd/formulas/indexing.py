"""Derivatives of the index operators (c/python/IndexOps.c) and of t[index],
t[index] = value.

Gathers (index_select, gather, take, t[index], masked_select) scatter their
gradient back, adding the contributions of repeated indices; scatters
(scatter, index_add, index_fill, index_copy, put, masked_fill, index_put)
pass the gradient through where the input survived and gather it for the
values written.
"""

import ember

from ... import _C
from ._common import (Node, SavedOutput, check_inplace, commit_inplace, edges_of, mark_view,
                      meta_of, nondifferentiable, record, reduce_grad, refuse_out, register,
                      register_inplace, sum_to)
from .shape import NotImplementedBackward
from .views import (IndexMapBackward, SelectBackward0, SliceBackward0, UnsqueezeBackward0,
                    element_positions, is_view_of, record_index_map, scatter_positions,
                    wrap_dim)

_TensorBase = _C._TensorBase


def _needs(node, i):
    return node._edges[i] is not None


def _zeros(shape, like):
    return ember.zeros(shape, dtype=like.dtype, device=like.device)


class _IndexNode(Node):
    """A node keeping its index tensor as a saved tensor (version-checked:
    Note [Saved tensors])."""

    __slots__ = ()

    @property
    def index(self):
        return self.unpack_saved()[0]


class _MaskNode(Node):
    """A node keeping its mask as a saved tensor."""

    __slots__ = ()

    @property
    def mask(self):
        return self.unpack_saved()[0]


# ---- index_select, gather, take -----------------------------------------------------------

class IndexSelectBackward0(_IndexNode):
    """Each selected slice's gradient is added back at its index."""

    __slots__ = ("dim", "input_shape")

    def apply(self, grad):
        return (_zeros(self.input_shape, grad).index_add(self.dim, self.index, grad),)


@register("index_select")
def index_select(input, dim, index, *, out=None):
    refuse_out("index_select", out)
    result = ember.index_select(input, dim, index)
    node = IndexSelectBackward0(edges_of(input))
    node.dim, node.input_shape = dim, input.shape
    node.save(index)
    return record(node, result)


class GatherBackward0(_IndexNode):
    __slots__ = ("dim", "input_shape")

    def apply(self, grad):
        return (_zeros(self.input_shape, grad).scatter_add(self.dim, self.index, grad),)


@register("gather")
def gather(input, dim, index, *, sparse_grad=False, out=None):
    refuse_out("gather", out)
    result = ember.gather(input, dim, index)
    node = GatherBackward0(edges_of(input))
    node.dim, node.input_shape = dim, input.shape
    node.save(index)
    return record(node, result)


class TakeBackward0(_IndexNode):
    """take indexes the flattened input: a scatter at flat positions."""

    __slots__ = ("input_shape",)

    def apply(self, grad):
        return (scatter_positions(grad, self.index, self.input_shape),)


@register("take")
def take(input, index, *, out=None):
    refuse_out("take", out)
    result = ember.take(input, index)
    node = TakeBackward0(edges_of(input))
    node.input_shape = input.shape
    node.save(index)
    return record(node, result)


# ---- scatter, scatter_add, index_add, index_fill --------------------------------------------

class ScatterBackward0(_IndexNode):
    """Written positions lose their input gradient; src gets the gradient
    of where it was written."""

    __slots__ = ("dim",)

    def apply(self, grad):
        return (grad.scatter(self.dim, self.index, 0) if _needs(self, 0) else None,
                grad.gather(self.dim, self.index) if _needs(self, 1) else None)


class ScatterBackward1(_IndexNode):
    """scatter of a number: only the input has a gradient."""

    __slots__ = ("dim",)

    def apply(self, grad):
        return (grad.scatter(self.dim, self.index, 0),)


class ScatterAddBackward0(_IndexNode):
    __slots__ = ("dim",)

    def apply(self, grad):
        return (grad if _needs(self, 0) else None,
                grad.gather(self.dim, self.index) if _needs(self, 1) else None)


class ScatterReduceNotImplemented(NotImplementedBackward):
    """scatter(..., reduce=): PyTorch records a node named NotImplemented."""
    __slots__ = ()
    error = RuntimeError


ScatterReduceNotImplemented.__name__ = ScatterReduceNotImplemented.__qualname__ = "NotImplemented"


@register("scatter")
def scatter(input, dim, index, src=None, *, value=None, reduce=None, out=None):
    refuse_out("scatter", out)
    source = src if src is not None else value
    if reduce is not None:
        result = ember.scatter(input, dim, index, source, reduce=reduce)
        node = ScatterReduceNotImplemented(edges_of(input, source))
        node.message = "derivative for aten::scatter is not implemented"
        return record(node, result)
    result = ember.scatter(input, dim, index, source)
    if isinstance(source, _TensorBase):
        node = ScatterBackward0(edges_of(input, source))
    else:
        node = ScatterBackward1(edges_of(input))
    node.dim = dim
    node.save(index)
    return record(node, result)


@register("scatter_add")
def scatter_add(input, dim, index, src, *, out=None):
    refuse_out("scatter_add", out)
    result = ember.scatter_add(input, dim, index, src)
    node = ScatterAddBackward0(edges_of(input, src))
    node.dim = dim
    node.save(index)
    return record(node, result)


class ScatterReduceBackward0(Node):
    """PyTorch's scatter_reduce_backward.  `written` marks the positions
    some src value reached; without include_self, self's values there took
    no part, so they get no gradient.
      sum:  self gets grad, src the gradient of where it went;
      mean: the same divided by each position's count;
      prod: grad times the product of the other values (see _prod_grads);
      amax, amin: the gradient is shared evenly among the values (self's
            and src's) equal to the result."""

    __slots__ = ("dim", "reduce", "include_self")

    def apply(self, grad):
        input, index, src, result = self.unpack_saved()
        dim, reduce = self.dim, self.reduce
        written = ember.zeros(input.shape, dtype=ember.bool, device=grad.device).scatter(
            dim, index, True)
        if reduce == "sum":
            grad_self, grad_src = grad, grad.gather(dim, index)
        elif reduce == "mean":
            self_counts = ember.full(input.shape, float(self.include_self), dtype=grad.dtype,
                                     device=grad.device)
            counts = self_counts.scatter_add(
                dim, index, ember.ones(src.shape, dtype=grad.dtype, device=grad.device))
            scaled = grad / counts.clamp(min=1)
            grad_self, grad_src = scaled, scaled.gather(dim, index)
        elif reduce == "prod":
            grad_self, grad_src = self._prod_grads(grad, input, index, src, result)
        else:
            # (self's ties count even without include_self, as in PyTorch)
            self_wins = (input == result).to(grad.dtype)
            src_wins = (src == result.gather(dim, index)).to(grad.dtype)
            shares = self_wins.scatter_add(dim, index, src_wins)
            share = grad / shares.clamp(min=1)
            grad_self = self_wins * share
            grad_src = src_wins * share.gather(dim, index)
        if not self.include_self:
            grad_self = grad_self.masked_fill(written, 0)
        return (grad_self if _needs(self, 0) else None,
                grad_src if _needs(self, 1) else None)


    def _prod_grads(self, grad, input, index, src, result):
        """PyTorch's formula: result / value where the value is not 0; a
        zero's gradient is the product of the others, found by reducing
        again with that zero replaced by 1 (0 when another zero remains)."""
        dim, include_self = self.dim, self.include_self
        masked_self = input.masked_fill(input == 0, 1)
        others_of_self = masked_self.scatter_reduce(dim, index, src, "prod",
                                                    include_self=include_self)
        grad_self = grad * others_of_self / masked_self
        src_zero = src == 0
        zeros_there = ember.zeros(input.shape, dtype=grad.dtype, device=grad.device).scatter_add(
            dim, index, src_zero.to(grad.dtype)).gather(dim, index)
        lone_zero = src_zero & (zeros_there == 1)
        others_of_src = input.scatter_reduce(dim, index, src.masked_fill(lone_zero, 1),
                                             "prod", include_self=include_self)
        grad_src = ember.where(lone_zero, (grad * others_of_src).gather(dim, index),
                               (grad * result).gather(dim, index) / src.masked_fill(src_zero, 1))
        return grad_self, grad_src


@register("scatter_reduce")
def scatter_reduce(input, dim, index, src, reduce, *, include_self=True, out=None):
    refuse_out("scatter_reduce", out)
    result = ember.scatter_reduce(input, dim, index, src, reduce, include_self=include_self)
    node = ScatterReduceBackward0(edges_of(input, src))
    node.dim, node.reduce, node.include_self = dim, reduce, include_self
    node.save(input, index, src, SavedOutput(result))
    return record(node, result)


class IndexAddBackward0(_IndexNode):
    __slots__ = ("dim", "alpha", "source_shape")

    def apply(self, grad):
        grad_source = None
        if _needs(self, 1):
            grad_source = grad.index_select(self.dim, self.index)
            if self.alpha != 1:
                grad_source = grad_source * self.alpha
            grad_source = grad_source.reshape(self.source_shape)
        return (grad if _needs(self, 0) else None, grad_source)


@register("index_add")
def index_add(input, dim, index, source, *, alpha=1, out=None):
    refuse_out("index_add", out)
    result = ember.index_add(input, dim, index, source, alpha=alpha)
    node = IndexAddBackward0(edges_of(input, source))
    node.dim, node.alpha, node.source_shape = dim, alpha, source.shape
    node.save(index)
    return record(node, result)


class IndexFillBackward0(_IndexNode):
    __slots__ = ("dim", "value_meta")

    def apply(self, grad):
        return (grad.index_fill(self.dim, self.index, 0),)


class IndexFillBackward1(IndexFillBackward0):
    """A 0-d tensor value fills every indexed slice: it gets their sum."""

    __slots__ = ()

    def apply(self, grad):
        grad_value = None
        if _needs(self, 1):
            grad_value = reduce_grad(grad.index_select(self.dim, self.index).sum(),
                                     self.value_meta)
        return (grad.index_fill(self.dim, self.index, 0) if _needs(self, 0) else None,
                grad_value)


@register("index_fill")
def index_fill(input, dim, index, value):
    result = ember.index_fill(input, dim, index, value)
    if isinstance(value, _TensorBase):
        node = IndexFillBackward1(edges_of(input, value))
    else:
        node = IndexFillBackward0(edges_of(input))
    node.dim, node.value_meta = wrap_dim(dim, input.dim()), meta_of(value)
    node.save(index)
    return record(node, result)


# ---- index_copy, put ----------------------------------------------------------------------------

class IndexCopyBackward0(_IndexNode):
    """The copied slices replace the input's: those pass the input no
    gradient, and each source slice gets the gradient of where it went."""

    __slots__ = ("dim", "source_shape")

    def apply(self, grad):
        grad_source = None
        if _needs(self, 1):
            grad_source = grad.index_select(self.dim, self.index).reshape(self.source_shape)
        return (grad.index_fill(self.dim, self.index, 0) if _needs(self, 0) else None,
                grad_source)


@register("index_copy")
def index_copy(input, dim, index, source):
    result = ember.index_copy(input, dim, index, source)
    node = IndexCopyBackward0(edges_of(input, source))
    node.dim, node.source_shape = wrap_dim(dim, input.dim()), source.shape
    node.save(index)
    return record(node, result)


class PutBackward0(_IndexNode):
    """put writes source at flat positions: the input keeps its gradient
    where nothing was written (everywhere when accumulating), and source
    gets the gradient of its positions (PyTorch's formula, itself a put
    and a take, so that it has a derivative too)."""

    __slots__ = ("accumulate", "source_shape")

    def apply(self, grad):
        grad_input = grad_source = None
        if _needs(self, 0):
            grad_input = grad if self.accumulate else grad.put(
                self.index, _zeros(self.index.shape, grad), accumulate=False)
        if _needs(self, 1):
            grad_source = grad.take(self.index).reshape(self.source_shape)
        return grad_input, grad_source


@register("put")
def put(input, index, source, accumulate=False):
    result = ember.put(input, index, source, accumulate=accumulate)
    node = PutBackward0(edges_of(input, source))
    node.accumulate, node.source_shape = accumulate, source.shape
    node.save(index)
    return record(node, result)


# ---- masked_fill, masked_select ---------------------------------------------------------------

class MaskedFillBackward0(_MaskNode):
    __slots__ = ("input_meta", "value_meta")

    def apply(self, grad):
        return (reduce_grad(grad.masked_fill(self.mask, 0), self.input_meta),)


class MaskedFillBackward1(MaskedFillBackward0):
    """A 0-d tensor value fills every masked element: it gets their sum."""

    __slots__ = ()

    def apply(self, grad):
        grad_input = grad_value = None
        if _needs(self, 0):
            grad_input = reduce_grad(grad.masked_fill(self.mask, 0), self.input_meta)
        if _needs(self, 1):
            kept = grad.masked_fill(self.mask.logical_not(), 0)
            grad_value = reduce_grad(kept.sum(), self.value_meta)
        return grad_input, grad_value


@register("masked_fill")
def masked_fill(input, mask, value):
    result = ember.masked_fill(input, mask, value)
    if isinstance(value, _TensorBase):
        node = MaskedFillBackward1(edges_of(input, value))
    else:
        node = MaskedFillBackward0(edges_of(input))
    node.input_meta, node.value_meta = meta_of(input), meta_of(value)
    node.save(mask)
    return record(node, result)


class MaskedSelectBackward0(_MaskNode):
    """The selected elements' gradients go back under the (broadcast) mask."""

    __slots__ = ("input_meta", "shape")

    def apply(self, grad):
        mask = self.mask.expand(self.shape)
        spread = _zeros(self.shape, grad).index_put((mask,), grad)
        return (reduce_grad(spread, self.input_meta),)


def _broadcast_shape(a, b):
    ndim = max(len(a), len(b))
    a, b = (1,) * (ndim - len(a)) + tuple(a), (1,) * (ndim - len(b)) + tuple(b)
    return tuple(y if x == 1 else x for x, y in zip(a, b))


@register("masked_select")
def masked_select(input, mask, *, out=None):
    refuse_out("masked_select", out)
    result = ember.masked_select(input, mask)
    node = MaskedSelectBackward0(edges_of(input))
    node.input_meta = meta_of(input)
    node.save(mask)
    node.shape = _broadcast_shape(input.shape, mask.shape)
    return record(node, result)


nondifferentiable("nonzero", "argwhere")


# ---- index_put and t[index] = value ------------------------------------------------------------

def _sum_to_value(grad, value_meta):
    """The gradient of the written region for the value written there: the
    value was broadcast to the region (possibly dropping leading 1-dims)."""
    if value_meta is None:
        return None
    shape = value_meta.shape
    extra = len(shape) - grad.dim()
    if extra > 0:
        grad = sum_to(grad, shape[extra:]).reshape(shape)
    return reduce_grad(grad, value_meta)


class IndexPutBackward0(Node):
    """input[index] = values: the overwritten region passes no gradient to
    the input (unless accumulating), values get the region's gradient.
    `index` is anything t[index] accepts (a tuple of index tensors for
    index_put), the region found through its positions (Note [Index
    maps])."""

    __slots__ = ("input_shape", "index", "accumulate", "values_meta")

    def apply(self, grad):
        grad_input = grad_values = None
        if _needs(self, 0):
            grad_input = grad if self.accumulate else self._zero_region(grad)
        if _needs(self, 1):
            grad_values = _sum_to_value(grad[self.index], self.values_meta)
        return grad_input, grad_values

    def _zero_region(self, grad):
        shape = self.input_shape
        positions = element_positions(shape, grad.device)[self.index].reshape(-1)
        flat = grad.reshape(-1).index_put((positions,), ember.zeros((), dtype=grad.dtype))
        return flat.reshape(shape)


class CopySlices(IndexPutBackward0):
    """t[basic index] = value (PyTorch's name for a write into a view of t)."""
    __slots__ = ()


@register("index_put")
def index_put(input, indices, values, accumulate=False):
    result = ember.index_put(input, indices, values, accumulate=accumulate)
    node = IndexPutBackward0(edges_of(input, values))
    node.input_shape, node.index = input.shape, tuple(indices)
    node.accumulate, node.values_meta = accumulate, meta_of(values)
    return record(node, result)


def _is_basic(index):
    """Only ints, slices, None and Ellipsis: t[index] is a view."""
    items = index if type(index) is tuple else (index,)
    return all(item is None or item is Ellipsis or type(item) in (int, slice)
               for item in items)


@register("__setitem__")
def setitem(self, index, value):
    """Note [In-place operations]: the new values are computed out of place
    and committed into self (and into self's base when self is a view)."""
    check_inplace(self)
    new_values = self.clone()
    new_values[index] = value
    node_class = CopySlices if _is_basic(index) else IndexPutBackward0
    node = node_class(edges_of(self, value))
    node.input_shape, node.index = self.shape, index
    node.accumulate, node.values_meta = False, meta_of(value)
    commit_inplace(self, record(node, new_values))


for _name, _op in [("scatter_", ember.scatter), ("scatter_add_", ember.scatter_add),
                   ("scatter_reduce_", ember.scatter_reduce),
                   ("index_add_", ember.index_add), ("index_fill_", ember.index_fill),
                   ("index_copy_", ember.index_copy), ("put_", ember.put),
                   ("masked_fill_", ember.masked_fill), ("index_put_", ember.index_put)]:
    register_inplace(_name, _op)


# ---- t[index] -------------------------------------------------------------------------------

class IndexBackward0(IndexMapBackward):
    """Advanced indexing (a copy): repeated indices accumulate."""
    __slots__ = ()


class AliasBackward0(IndexMapBackward):
    """t[...]: the same elements."""
    __slots__ = ()


_FULL_SLICE = slice(None)


def _basic_node_class(index):
    """PyTorch's name for t[basic index]: that of the last step it records
    (select for an int, slice, unsqueeze for None)."""
    items = [item for item in (index if type(index) is tuple else (index,))
             if item is not Ellipsis and not (type(item) is slice and item == _FULL_SLICE)]
    if not items:
        return AliasBackward0
    if all(item is None for item in items):
        return UnsqueezeBackward0
    last = [item for item in items if item is not None][-1]
    return SliceBackward0 if type(last) is slice else SelectBackward0


@register("__getitem__")
def getitem(self, index):
    result = self[index]
    if not self.requires_grad:  # only an index tensor required grad
        return result
    view = is_view_of(result, self)
    node_class = _basic_node_class(index) if view else IndexBackward0
    if node_class is UnsqueezeBackward0:  # only new dims: a reshape
        node = UnsqueezeBackward0(edges_of(self))
        node.input_shape = self.shape
        record(node, result)
        return mark_view(result, self)
    return record_index_map(node_class, self, result, _TensorBase.__getitem__, (index,),
                            view=view)
