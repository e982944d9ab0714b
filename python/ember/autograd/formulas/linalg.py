"""Derivatives of the products (c/python/Linalg.c).

Note [Product gradients]
~~~~~~~~~~~~~~~~~~~~~~~~
For C = A @ B:  dA = dC @ B^T  and  dB = A^T @ dC.  Each is one GEMM on
a transposed *view* (the GEMM takes strides, so nothing is copied), and
each is skipped when its input needs no gradient; a node saves only the
operand the other one's gradient needs.

matmul is several products in one (Note [Products as batched GEMM] in
Linalg.c): a 1-D left operand is a 1 x k row, a 1-D right operand a k x 1
column, and the batch dims broadcast.  Its backward undoes each step: the
gradient gets the vector dims back, the two GEMMs run, and the batch dims
an operand was broadcast along are summed away (sum_to).  The common
shapes get the plain node PyTorch would show (DotBackward0, MvBackward0,
MmBackward0); an N-D left operand times a matrix folds its batch dims into
the rows, so its weight gradient is one GEMM, not one per batch.
"""

import ember

from ._common import (Node, edges_of, nondifferentiable, record, refuse_out, register,
                      register_inplace, sum_to)

_matmul = ember.matmul


def _to_dtype(grad, dtype):
    return grad if grad.dtype == dtype else grad.to(dtype)


def _record_product(node_class, a, b, result):
    """Records a two-operand product, saving each operand only if the
    other operand's gradient will need it."""
    edges = edges_of(a, b)
    node = node_class(edges)
    node.save(a if edges[1] is not None else None, b if edges[0] is not None else None)
    return record(node, result)


# ---- mm, bmm, mv, dot, vdot ---------------------------------------------------------

class MmBackward0(Node):
    """C = A B.  A is saved only when B needs a gradient and vice versa
    (_record_product), so a saved operand also says which gradient to make."""

    __slots__ = ()

    def apply(self, grad):
        a, b = self.unpack_saved()
        return (grad.mm(b.t()) if b is not None else None,
                a.t().mm(grad) if a is not None else None)


@register("mm")
def mm(input, mat2, *, out=None):
    refuse_out("mm", out)
    return _record_product(MmBackward0, input, mat2, input.mm(mat2))


class BmmBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        a, b = self.unpack_saved()
        return (grad.bmm(b.transpose(1, 2)) if b is not None else None,
                a.transpose(1, 2).bmm(grad) if a is not None else None)


@register("bmm")
def bmm(input, mat2, *, out=None):
    refuse_out("bmm", out)
    return _record_product(BmmBackward0, input, mat2, input.bmm(mat2))


class MvBackward0(Node):
    """y = A v:  dA = outer(dy, v),  dv = A^T dy."""

    __slots__ = ()

    def apply(self, grad):
        a, v = self.unpack_saved()
        return (ember.outer(grad, v) if v is not None else None,
                a.t().mv(grad) if a is not None else None)


@register("mv")
def mv(input, vec, *, out=None):
    refuse_out("mv", out)
    return _record_product(MvBackward0, input, vec, input.mv(vec))


class DotBackward0(Node):
    __slots__ = ()

    def apply(self, grad):
        a, b = self.unpack_saved()
        return (grad * b if b is not None else None,
                grad * a if a is not None else None)


class VdotBackward0(DotBackward0):
    """Real dtypes only: conjugation is the identity."""
    __slots__ = ()


@register("dot")
def dot(input, tensor, *, out=None):
    refuse_out("dot", out)
    return _record_product(DotBackward0, input, tensor, input.dot(tensor))


@register("vdot")
def vdot(input, other, *, out=None):
    refuse_out("vdot", out)
    return _record_product(VdotBackward0, input, other, input.vdot(other))


# ---- outer, ger -------------------------------------------------------------------------

class MulBackward0(Node):
    """outer(a, b) = a b^T, PyTorch's broadcast multiply (hence its name):
    da = G b,  db = G^T a.  outer promotes dtypes, so each
    gradient is cast back to its input's dtype."""

    __slots__ = ("dtypes",)

    def apply(self, grad):
        a, b = self.unpack_saved()
        a_dtype, b_dtype = self.dtypes
        dtype = grad.dtype
        return (_to_dtype(grad.mv(_to_dtype(b, dtype)), a_dtype) if b is not None else None,
                _to_dtype(grad.t().mv(_to_dtype(a, dtype)), b_dtype) if a is not None else None)


def _outer_like(name, input, vec2, out):
    refuse_out(name, out)
    result = getattr(input, name)(vec2)
    node = _record_product(MulBackward0, input, vec2, result).grad_fn
    node.dtypes = (input.dtype, vec2.dtype)
    return result


@register("outer")
def outer(input, vec2, *, out=None):
    return _outer_like("outer", input, vec2, out)


@register("ger")
def ger(input, vec2, *, out=None):
    return _outer_like("ger", input, vec2, out)


# ---- matmul, @ --------------------------------------------------------------------------

class MatmulBackward0(Node):
    """matmul beyond the plain cases: vectors on either side of an N-D
    operand, broadcast batch dims (Note [Product gradients])."""

    __slots__ = ("a_shape", "b_shape")

    def apply(self, grad):
        a, b = self.unpack_saved()
        a_shape, b_shape = self.a_shape, self.b_shape
        if len(a_shape) == 1:
            grad = grad.unsqueeze(-2)
            a = a.unsqueeze(0) if a is not None else None
        if len(b_shape) == 1:
            grad = grad.unsqueeze(-1)
            b = b.unsqueeze(-1) if b is not None else None
        grad_a = grad_b = None
        if b is not None:
            grad_a = sum_to(ember.matmul(grad, b.transpose(-1, -2)), _as_matrix_shape(a_shape))
            grad_a = grad_a.reshape(a_shape)
        if a is not None:
            if len(b_shape) <= 2 and a.ndim > 2:
                # fold a's batch dims into its rows: one GEMM for the weight
                k = a.shape[-1]
                grad_b = a.reshape(-1, k).t().mm(grad.reshape(-1, grad.shape[-1]))
            else:
                grad_b = sum_to(ember.matmul(a.transpose(-1, -2), grad),
                                _as_matrix_shape(b_shape, True))
            grad_b = grad_b.reshape(b_shape)
        return grad_a, grad_b


def _as_matrix_shape(shape, column=False):
    """An operand's shape as matmul sees it: a vector is a 1 x k row (left)
    or a k x 1 column (right)."""
    if len(shape) != 1:
        return tuple(shape)
    return (shape[0], 1) if column else (1, shape[0])


def _matmul_node(a, b, result):
    a_ndim, b_ndim = a.ndim, b.ndim
    if a_ndim == 2 and b_ndim == 2:  # the training hot path first
        return _record_product(MmBackward0, a, b, result)
    if b_ndim == 1 and a_ndim <= 2:
        return _record_product(DotBackward0 if a_ndim == 1 else MvBackward0, a, b, result)
    _record_product(MatmulBackward0, a, b, result)
    node = result.grad_fn
    node.a_shape = a.shape
    node.b_shape = b.shape
    return result


@register("matmul")
def matmul(input, other, *, out=None):
    if out is not None:
        refuse_out("matmul", out)
    return _matmul_node(input, other, _matmul(input, other))


@register("__matmul__")
def matmul_operator(a, b):
    return _matmul_node(a, b, a @ b)


# ---- addmm, baddbmm ---------------------------------------------------------------------

class AddmmBackward0(Node):
    """beta * input + alpha * (mat1 @ mat2); input broadcasts."""

    __slots__ = ("input_shape", "beta", "alpha", "mat1_columns", "mat2_columns")

    def apply(self, grad):
        mat1, mat2 = self.unpack_saved()
        input_grad_edge, mat1_edge, mat2_edge = self._edges
        grad_input = grad_mat1 = grad_mat2 = None
        if input_grad_edge is not None:
            scaled = grad if self.beta == 1 else grad * self.beta
            grad_input = sum_to(scaled, self.input_shape)
        alpha = self.alpha
        if mat1_edge is not None:
            grad_mat1 = self._product_in_layout(grad, self._transposed(mat2), self.mat1_columns)
            grad_mat1 = grad_mat1 if alpha == 1 else grad_mat1 * alpha
        if mat2_edge is not None:
            grad_mat2 = self._product_in_layout(self._transposed(mat1), grad, self.mat2_columns)
            grad_mat2 = grad_mat2 if alpha == 1 else grad_mat2 * alpha
        return grad_input, grad_mat1, grad_mat2

    def _product_in_layout(self, a, b, columns):
        """a @ b, computed as (b^T @ a^T)^T when the operand it is the
        gradient of is laid out column after column (linear's weight.t()),
        so that the gradient comes out in that layout and its leaf takes it
        without a copy (PyTorch's mm_mat1_backward and mm_mat2_backward)."""
        if columns:
            return self._transposed(self._product(self._transposed(b), self._transposed(a)))
        return self._product(a, b)

    @staticmethod
    def _product(a, b):
        return a.mm(b)

    @staticmethod
    def _transposed(matrix):
        return matrix.t()


class BaddbmmBackward0(AddmmBackward0):
    __slots__ = ()

    @staticmethod
    def _product(a, b):
        return a.bmm(b)

    @staticmethod
    def _transposed(batch):
        return batch.transpose(1, 2)


def _column_major(matrix):
    """Whether the last two dims of `matrix` are laid out column after
    column: the transpose of a contiguous matrix."""
    stride = matrix.stride()
    return stride[-2] == 1 and stride[-1] == matrix.shape[-2] != 1


def _add_product(node_class, name, input, m1, m2, beta, alpha, out):
    refuse_out(name, out)
    result = getattr(input, name)(m1, m2, beta=beta, alpha=alpha)
    node = node_class(edges_of(input, m1, m2))
    node.input_shape = input.shape
    node.beta = beta
    node.alpha = alpha
    node.mat1_columns = _column_major(m1)
    node.mat2_columns = _column_major(m2)
    _, m1_edge, m2_edge = node._edges
    node.save(m1 if m2_edge is not None else None, m2 if m1_edge is not None else None)
    return record(node, result)


@register("addmm")
def addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    return _add_product(AddmmBackward0, "addmm", input, mat1, mat2, beta, alpha, out)


@register("baddbmm")
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    return _add_product(BaddbmmBackward0, "baddbmm", input, batch1, batch2, beta, alpha, out)


register_inplace("addmm_", ember.addmm)
register_inplace("baddbmm_", ember.baddbmm)

# _gemm_kernel and _gemm_blocking are in the function table, but take no
# tensor.
nondifferentiable("_gemm_kernel")
nondifferentiable("_gemm_blocking")
