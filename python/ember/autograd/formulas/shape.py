"""Derivatives of the joining, splitting, reordering and sorting operators
(c/python/Shape.c).

Joins (cat, stack) hand each input its slice of the gradient; splits
(split, chunk, unbind) are one node with one output per piece, and their
backward joins the pieces' gradients again, with zeros for the pieces no
gradient reached.  Sorting-like operators (sort, topk, kthvalue) scatter the
values' gradient back to where the values came from; their indices output
is an integer tensor and is not differentiable.
"""

import ember

from ... import _C
from ._common import (Node, TensorMeta, edges_of, mark_view, nondifferentiable,
                      record, refuse_out, register, register_inplace)
from .views import IndexMapBackward, SliceBackward0, composite, record_index_map, wrap_dim

_TensorBase = _C._TensorBase


def _cast(grad, dtype):
    return grad if grad.dtype == dtype else grad.to(dtype)


# ---- cat, stack, hstack, vstack -------------------------------------------------------

class CatBackward0(Node):
    """Input i gets the slice of the gradient it filled (reshaped back for
    hstack/vstack, which joined 0-d and 1-d inputs as 1-d and 2-d ones)."""

    __slots__ = ("dim", "sizes", "metas")

    def apply(self, grad):
        grads = []
        start = 0
        for size, meta, edge in zip(self.sizes, self.metas, self._edges):
            if edge is not None:
                piece = grad.narrow(self.dim, start, size)
                if piece.shape != meta.shape:
                    piece = piece.reshape(meta.shape)
                grads.append(_cast(piece, meta.dtype))
            else:
                grads.append(None)
            start += size
        return tuple(grads)


def _record_cat(tensors, dim, sizes, result):
    node = CatBackward0(edges_of(*tensors))
    node.dim = dim
    node.sizes = sizes
    node.metas = [TensorMeta(t) for t in tensors]
    return record(node, result)


@register("cat", "concat", "concatenate")
def cat(tensors, dim=0, *, out=None):
    refuse_out("cat", out)
    result = ember.cat(tensors, dim)
    dim = wrap_dim(dim, result.dim())
    # A 1-d empty input is skipped by cat whatever the other inputs' shape.
    sizes = [t.shape[dim] if t.dim() == result.dim() else 0 for t in tensors]
    return _record_cat(tensors, dim, sizes, result)


@register("hstack")
def hstack(tensors, *, out=None):
    refuse_out("hstack", out)
    result = ember.hstack(tensors)
    dim = 0 if tensors[0].dim() <= 1 else 1
    sizes = [t.shape[dim] if t.dim() > 0 else 1 for t in tensors]
    return _record_cat(tensors, dim, sizes, result)


@register("vstack")
def vstack(tensors, *, out=None):
    refuse_out("vstack", out)
    result = ember.vstack(tensors)
    sizes = [t.shape[0] if t.dim() >= 2 else 1 for t in tensors]
    return _record_cat(tensors, 0, sizes, result)


class StackBackward0(Node):
    """Input i gets the gradient's slice i along the new dim."""

    __slots__ = ("dim", "dtypes")

    def apply(self, grad):
        return tuple(_cast(piece, dtype) if edge is not None else None
                     for piece, dtype, edge in zip(grad.unbind(self.dim), self.dtypes,
                                                   self._edges))


@register("stack")
def stack(tensors, dim=0, *, out=None):
    refuse_out("stack", out)
    result = ember.stack(tensors, dim)
    node = StackBackward0(edges_of(*tensors))
    node.dim = wrap_dim(dim, result.dim())
    node.dtypes = [t.dtype for t in tensors]
    return record(node, result)


# ---- split, chunk, unbind, tensor_split: several views of one input -------------------

class SplitBackward0(Node):
    """One output per piece; the pieces' gradients are joined again, zeros
    standing for the pieces no gradient reached."""

    __slots__ = ("dim", "piece_shapes", "num_outputs")

    def apply(self, *grads):
        return (ember.cat(self._filled(grads), self.dim),)

    def _filled(self, grads):
        given = next(g for g in grads if g is not None)
        return [ember.zeros(shape, dtype=given.dtype, device=given.device) if g is None else g
                for g, shape in zip(grads, self.piece_shapes)]


class SplitWithSizesBackward0(SplitBackward0):
    __slots__ = ()


class UnbindBackward0(SplitBackward0):
    """The pieces lost the dim: they are stacked instead of concatenated."""

    __slots__ = ()

    def apply(self, *grads):
        return (ember.stack(self._filled(grads), self.dim),)


def _record_pieces(node_class, input, dim, pieces):
    node = node_class(edges_of(input))
    node.dim = wrap_dim(dim, input.dim())
    node.piece_shapes = [piece.shape for piece in pieces]
    node.num_outputs = len(pieces)
    for output_nr, piece in enumerate(pieces):
        record(node, piece, output_nr)
        mark_view(piece, input)
    return pieces


@register("split")
def split(tensor, split_size_or_sections, dim=0):
    pieces = ember.split(tensor, split_size_or_sections, dim)
    node_class = (SplitBackward0 if isinstance(split_size_or_sections, int)
                  else SplitWithSizesBackward0)
    return _record_pieces(node_class, tensor, dim, pieces)


@register("chunk")
def chunk(input, chunks, dim=0):
    return _record_pieces(SplitBackward0, input, dim, ember.chunk(input, chunks, dim))


@register("unbind")
def unbind(input, dim=0):
    return _record_pieces(UnbindBackward0, input, dim, ember.unbind(input, dim))


@register("__iter__")
def iterate(self):
    return iter(unbind(self, 0))


@register("tensor_split")
def tensor_split(input, indices_or_sections, dim=0):
    """Each piece is its own narrow (PyTorch records one SliceBackward0 each)."""
    pieces = ember.tensor_split(input, indices_or_sections, dim)
    dim = wrap_dim(dim, input.dim())
    start = 0
    for piece in pieces:
        length = piece.shape[dim]
        record_index_map(SliceBackward0, input, piece, _TensorBase.narrow, (dim, start, length))
        start += length
    return pieces


# ---- flip, roll, repeat, tile, repeat_interleave ---------------------------------------

class FlipBackward0(Node):
    __slots__ = ("dims",)

    def apply(self, grad):
        return (grad.flip(self.dims),)


def _record_flip(input, dims, result):
    node = FlipBackward0(edges_of(input))
    node.dims = dims
    return record(node, result)


@register("flip")
def flip(input, dims):
    return _record_flip(input, dims, ember.flip(input, dims))


@register("fliplr")
def fliplr(input):
    return _record_flip(input, (1,), ember.fliplr(input))


@register("flipud")
def flipud(input):
    return _record_flip(input, (0,), ember.flipud(input))


class RollBackward0(Node):
    """Rolling back by the same shifts."""

    __slots__ = ("shifts", "dims")

    def apply(self, grad):
        return (grad.roll(self.shifts, self.dims),)


@register("roll")
def roll(input, shifts, dims=None):
    result = ember.roll(input, shifts, dims)
    node = RollBackward0(edges_of(input))
    node.shifts = -shifts if isinstance(shifts, int) else tuple(-s for s in shifts)
    node.dims = dims
    return record(node, result)


class RepeatBackward0(Node):
    """Each input element was copied once per tile: the gradient, viewed as
    (r0, s0, r1, s1, ...), is summed over the tile dims r."""

    __slots__ = ("repeats", "input_shape")

    def apply(self, grad):
        repeats, shape = self.repeats, tuple(self.input_shape)
        if not repeats:
            return (grad,)
        padded = (1,) * (len(repeats) - len(shape)) + shape
        interleaved = [size for pair in zip(repeats, padded) for size in pair]
        summed = grad.reshape(interleaved).sum(list(range(0, 2 * len(repeats), 2)))
        return (summed.reshape(shape),)


def _record_repeat(input, repeats, result):
    node = RepeatBackward0(edges_of(input))
    node.repeats = repeats
    node.input_shape = input.shape
    return record(node, result)


@register("repeat")
def repeat(self, *sizes):
    result = self.repeat(*sizes)
    if len(sizes) == 1 and not isinstance(sizes[0], int):
        sizes = sizes[0]
    return _record_repeat(self, tuple(sizes), result)


@register("tile")
def tile(input, dims):
    result = ember.tile(input, dims)
    dims = tuple(dims)
    return _record_repeat(input, (1,) * (input.dim() - len(dims)) + dims, result)


@register("repeat_interleave")
def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """index_select of the input at arange(n) repeated (PyTorch's composite:
    its IndexSelectBackward0 adds the copies' gradients back)."""
    if repeats is None:  # repeat_interleave(repeats): an integer result
        return ember.repeat_interleave(input)
    size = input.numel() if dim is None else input.size(dim)
    index = ember.repeat_interleave(ember.arange(size), repeats, output_size=output_size)
    if dim is None:
        return composite(lambda: ember.index_select(input.reshape(-1), 0, index))
    return composite(ember.index_select, input, dim, index)


# ---- diagonal, diag, tril, triu -----------------------------------------------------------

class DiagonalBackward0(IndexMapBackward):
    __slots__ = ()


class DiagonalBackward0_copy(IndexMapBackward):
    """diag of a matrix: a copy of its diagonal."""
    __slots__ = ()


class DiagEmbedBackward0(Node):
    """diag of a vector: the gradient's diagonal."""

    __slots__ = ("diagonal",)

    def apply(self, grad):
        return (grad.diagonal(self.diagonal),)


@register("diagonal")
def diagonal(input, offset=0, dim1=0, dim2=1):
    return record_index_map(DiagonalBackward0, input, input.diagonal(offset, dim1, dim2),
                            _TensorBase.diagonal, (offset, dim1, dim2))


@register("diag")
def diag(input, diagonal=0):
    result = ember.diag(input, diagonal)
    if input.dim() == 2:
        return record_index_map(DiagonalBackward0_copy, input, result, ember.diag,
                                (diagonal,), view=False)
    node = DiagEmbedBackward0(edges_of(input))
    node.diagonal = diagonal
    return record(node, result)


class TrilBackward0(Node):
    """The gradient of the kept triangle passes, the rest is zero."""

    __slots__ = ("diagonal",)

    def apply(self, grad):
        return (grad.tril(self.diagonal),)


class TriuBackward0(TrilBackward0):
    __slots__ = ()

    def apply(self, grad):
        return (grad.triu(self.diagonal),)


def _record_triangle(node_class, input, diagonal, result):
    node = node_class(edges_of(input))
    node.diagonal = diagonal
    return record(node, result)


@register("tril")
def tril(input, diagonal=0, *, out=None):
    refuse_out("tril", out)
    return _record_triangle(TrilBackward0, input, diagonal, ember.tril(input, diagonal))


@register("triu")
def triu(input, diagonal=0, *, out=None):
    refuse_out("triu", out)
    return _record_triangle(TriuBackward0, input, diagonal, ember.triu(input, diagonal))


register_inplace("tril_", ember.tril)
register_inplace("triu_", ember.triu)


# ---- sort, msort, topk, kthvalue: values differentiable, indices not ----------------------

class SortBackward0(Node):
    """The values' gradient goes back to the positions they were taken
    from: scattered along dim at the indices output."""

    __slots__ = ("dim", "input_shape", "keepdim")
    num_outputs = 2  # (values, indices); only values is differentiable

    def apply(self, grad, grad_indices=None):
        (indices,) = self.unpack_saved()
        if not self.input_shape:  # a 0-d input is its own only value
            return (grad.reshape(()),)
        if not self.keepdim:
            grad, indices = grad.unsqueeze(self.dim), indices.unsqueeze(self.dim)
        zeros = ember.zeros(self.input_shape, dtype=grad.dtype, device=grad.device)
        return (zeros.scatter(self.dim, indices, grad),)


class TopkBackward0(SortBackward0):
    __slots__ = ()


class KthvalueBackward0(SortBackward0):
    __slots__ = ()


def _record_selection(node_class, input, dim, result, keepdim=True):
    values, indices = result[0], result[1]
    node = node_class(edges_of(input))
    node.dim = wrap_dim(dim, input.dim())
    node.input_shape = input.shape
    node.keepdim = keepdim
    node.save(indices)
    record(node, values)
    return result


@register("sort")
def sort(input, dim=-1, descending=False, *, stable=False, out=None):
    refuse_out("sort", out)
    return _record_selection(SortBackward0, input, dim,
                             ember.sort(input, dim, descending, stable=stable))


@register("msort")
def msort(input, *, out=None):
    refuse_out("msort", out)
    return _record_selection(SortBackward0, input, 0, ember.sort(input, 0))[0]


@register("topk")
def topk(input, k, dim=-1, largest=True, sorted=True, *, out=None):
    refuse_out("topk", out)
    return _record_selection(TopkBackward0, input, dim,
                             ember.topk(input, k, dim, largest, sorted))


@register("kthvalue")
def kthvalue(input, k, dim=-1, keepdim=False, *, out=None):
    refuse_out("kthvalue", out)
    return _record_selection(KthvalueBackward0, input, dim,
                             ember.kthvalue(input, k, dim, keepdim), keepdim)


# ---- unique: recorded, but PyTorch has no derivative for it -----------------------------

class NotImplementedBackward(Node):
    """A node whose backward raises PyTorch's error for an operator that
    records history but has no derivative formula (unique; scatter with
    reduce= uses it too)."""

    __slots__ = ("message",)
    error = NotImplementedError

    def apply(self, *grads):
        raise self.error(self.message)


class Unique2Backward0(NotImplementedBackward):
    __slots__ = ()


class UniqueDimBackward0(NotImplementedBackward):
    __slots__ = ()


class UniqueConsecutiveBackward0(NotImplementedBackward):
    __slots__ = ()


def _record_unique(node_class, aten_name, input, result):
    values = result[0] if isinstance(result, tuple) else result
    node = node_class(edges_of(input))
    node.message = f"the derivative for '{aten_name}' is not implemented."
    record(node, values)
    return result


@register("unique")
def unique(input, *args, **kwargs):
    result = ember.unique(input, *args, **kwargs)
    if kwargs.get("dim", args[3] if len(args) > 3 else None) is not None:
        return _record_unique(UniqueDimBackward0, "unique_dim", input, result)
    return _record_unique(Unique2Backward0, "_unique2", input, result)


@register("unique_consecutive")
def unique_consecutive(input, *args, **kwargs):
    result = ember.unique_consecutive(input, *args, **kwargs)
    return _record_unique(UniqueConsecutiveBackward0, "unique_consecutive", input, result)


nondifferentiable("argsort", "_one_hot")
