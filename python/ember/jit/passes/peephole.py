"""Peephole rewrites: small local patterns replaced by what they equal.

Every rule fires ONLY where the rewrite is exact (TorchScript's
alias-sensitive peephole, script-compilers.md 2.1):

* t(t(x)) -> x and transpose(transpose(x, a, b), a, b) -> x (pairs equal or
  swapped; "Tensor.t", "attr.T", "Tensor.transpose"): x's rank must be
  known and valid for the ops (t() needs ndim <= 2, dims in range), so no
  error is hidden.  x.T.T -> x for any known rank (T reverses the dims).
* x + 0, x - 0, x * 1, x / 1 (also 0 + x, 1 * x) and -(-x): the dtype must
  be known and the result's dtype must be x's: int constants for any
  non-bool dtype, float constants only on float dtypes, `/ 1` only on float
  dtypes, never bool tensors; Python numbers only int (and float for * 1,
  / 1, - 0, --x).  `x + 0` on floats is NOT exact (-0.0 + 0 is +0.0): it
  fires only on integer dtypes; `x - 0` keeps -0.0 and fires on floats.
* x.reshape(x.shape) / x.view(x.size()) -> x.
* x.dim(), x.ndim, x.dtype, x.is_floating_point() of a refined tensor
  type -> the constant.
* an If output that always equals the condition -> the condition; one
  that both branches give as the same outer value -> that value;
  `v is None` / `v is not None` when v's type says; unwrap_optional of a
  value that cannot be None -> the value.

For tensors the replaced value must be safe to alias (Note [When
replacing a value is safe] in aliasing.py).  Replaced nodes are removed
when nothing else reads them; dead producers are left to DCE.
"""

from ... import _C
from .. import types as T
from . import util
from .aliasing import AliasInfo
from .log import log_or_default

ADD = {"operator.add", "ember.add", "Tensor.add"}
SUB = {"operator.sub", "ember.sub", "Tensor.sub", "ember.subtract",
       "Tensor.subtract"}
MUL = {"operator.mul", "ember.mul", "Tensor.mul", "ember.multiply",
       "Tensor.multiply"}
DIV = {"operator.truediv", "ember.div", "Tensor.div", "ember.divide",
       "Tensor.divide", "ember.true_divide", "Tensor.true_divide"}
NEG = {"operator.neg", "ember.neg", "Tensor.neg", "ember.negative",
       "Tensor.negative"}
TRANSPOSE_2D = {"Tensor.t", "ember.t"}
TRANSPOSE = {"Tensor.transpose", "ember.transpose"}
RESHAPE = {"Tensor.reshape", "ember.reshape", "Tensor.view"}
SHAPE_OF = {"attr.shape", "Tensor.size"}


def peephole(graph, log=None):
    """Applies the rules once over every node; returns whether it changed."""
    log = log_or_default(log)
    rewriter = _Peephole(graph, log)
    for node in list(graph.all_nodes()):
        if node.owning_block is not None:
            rewriter.visit(node)
    return rewriter.changed


class _Peephole:
    def __init__(self, graph, log):
        self.graph = graph
        self.log = log
        self.aliases = AliasInfo(graph)
        self.changed = False

    def visit(self, node):
        if node.kind == "prim::If":
            self.fold_if_condition(node)
            self.fold_same_branches(node)
            return
        callee = node.callee
        if callee is None or not node.outputs or not node.output.uses:
            return
        for rule in (self.double_transpose, self.identity_arithmetic,
                     self.double_negation, self.same_shape_reshape,
                     self.is_none, self.unwrap_optional, self.known_type_fact):
            if rule(node):
                return

    # -- applying a rewrite ---------------------------------------------------
    def replace(self, node, new, message):
        """node's single output -> `new`, if exact aliasing-wise and allowed."""
        old = node.output
        if not self.aliases.safe_to_replace(old, new):
            return False
        if not self.log.rewrite("peephole", message, node):
            return False
        self.aliases.merge(new, old)
        old.replace_all_uses_with(new)
        node.destroy()
        self.changed = True
        return True

    # -- rules ------------------------------------------------------------------
    def double_transpose(self, node):
        inner = node.inputs[0].node if node.inputs else None
        if inner is None or inner.callee is None or node.kwnames or inner.kwnames:
            return False
        x = inner.inputs[0] if inner.inputs else None
        ndim = getattr(x.type, "ndim", None) if x is not None else None
        if ndim is None:
            return False
        pair = (inner.callee, node.callee)
        if pair == ("attr.T", "attr.T") or (
                all(c in TRANSPOSE_2D or c == "attr.T" for c in pair) and ndim <= 2):
            if len(node.inputs) == 1 and len(inner.inputs) == 1:
                name = "T" if "attr.T" in pair else "t"
                return self.replace(node, x, f"{name}({name}({x})) -> {x}")
            return False
        if node.callee in TRANSPOSE and inner.callee in TRANSPOSE:
            outer_dims = _dims(node, ndim)
            inner_dims = _dims(inner, ndim)
            if outer_dims is not None and inner_dims is not None \
                    and sorted(outer_dims) == sorted(inner_dims):
                a, b = inner_dims
                return self.replace(
                    node, x, f"transpose(transpose({x}, {a}, {b}), ...) -> {x}")
        return False

    def identity_arithmetic(self, node):
        if node.kwnames or len(node.inputs) != 2:
            return False
        callee = node.callee
        left, right = node.inputs
        candidates = []
        if callee in ADD:
            candidates = [(left, right, 0, "+"), (right, left, 0, "+")]
        elif callee in SUB:
            candidates = [(left, right, 0, "-")]
        elif callee in MUL:
            candidates = [(left, right, 1, "*"), (right, left, 1, "*")]
        elif callee in DIV:
            candidates = [(left, right, 1, "/")]
        if not callee.startswith("operator."):
            candidates = candidates[:1]     # ember.add(0, x) raises: keep it
        for x, other, identity, op in candidates:
            if not util.is_number_constant(other):
                continue
            number = util.constant_value(other)
            if number == identity and _exact_identity(x.type, number, op) \
                    and (callee.startswith("operator.")
                         or isinstance(x.type, T.TensorType)):
                if self.replace(node, x, f"{x} {op} {number!r} -> {x}"):
                    return True
        return False

    def double_negation(self, node):
        if node.callee not in NEG or len(node.inputs) != 1 or node.kwnames:
            return False
        inner = node.inputs[0].node
        if inner.callee not in NEG or len(inner.inputs) != 1 or inner.kwnames:
            return False
        x = inner.inputs[0]
        if isinstance(x.type, T.TensorType):
            exact = x.type.dtype is not None and x.type.dtype != _C.bool
        else:   # numbers: only Python's own `-` (ember.neg(3) raises)
            exact = isinstance(x.type, (T.IntType, T.FloatType)) and \
                node.callee == inner.callee == "operator.neg"
        return exact and self.replace(node, x, f"-(-{x}) -> {x}")

    def same_shape_reshape(self, node):
        if node.callee not in RESHAPE or len(node.inputs) != 2 or node.kwnames:
            return False
        x, shape = node.inputs
        source = shape.node
        if source.callee in SHAPE_OF and len(source.inputs) == 1 \
                and not source.kwnames and source.inputs[0] is x \
                and isinstance(x.type, T.TensorType):
            name = node.callee.partition(".")[2]
            return self.replace(node, x, f"{name}({x}, {x}.shape) -> {x}")
        return False

    def is_none(self, node):
        if node.callee not in ("operator.is_", "operator.is_not") \
                or len(node.inputs) != 2:
            return False
        left, right = node.inputs
        if isinstance(left.type, T.NoneType):
            left, right = right, left
        if not isinstance(right.type, T.NoneType):
            return False
        if isinstance(left.type, T.NoneType):
            is_none = True
        elif isinstance(left.type, (T.OptionalType, T.AnyType)):
            return False
        else:
            is_none = False
        test = "is" if node.callee == "operator.is_" else "is not"
        answer = is_none if test == "is" else not is_none
        if not self.log.rewrite("peephole", f"{left} {test} None -> {answer}", node):
            return False
        constant = util.insert_constant(self.graph, answer, node, T.Bool)
        util.replace_node_outputs(node, [constant])
        self.changed = True
        return True

    def unwrap_optional(self, node):
        if node.callee != "prim.unwrap_optional":
            return False
        x = node.inputs[0]
        if isinstance(x.type, (T.OptionalType, T.NoneType, T.AnyType)):
            return False
        return self.replace(node, x, f"unwrap_optional({x}) -> {x}")

    def known_type_fact(self, node):
        """x.dim() / x.ndim / x.dtype / x.is_floating_point() of a refined
        tensor type -> the constant (the specialisation guarantees it)."""
        if len(node.inputs) != 1 or node.kwnames \
                or not isinstance(node.inputs[0].type, T.TensorType):
            return False
        x = node.inputs[0]
        dtype, ndim = x.type.dtype, x.type.ndim
        if node.callee in ("Tensor.dim", "Tensor.ndimension", "attr.ndim") \
                and ndim is not None:
            value, type_ = ndim, T.Int
        elif node.callee == "attr.dtype" and dtype is not None:
            value, type_ = dtype, T.Dtype
        elif node.callee == "Tensor.is_floating_point" and dtype is not None:
            value, type_ = dtype.is_floating_point, T.Bool
        else:
            return False
        if not self.log.rewrite("peephole", f"{node.kind}({x}) -> {value!r} "
                                f"(from {x.type})", node):
            return False
        util.replace_node_outputs(
            node, [util.insert_constant(self.graph, value, node, type_)])
        self.changed = True
        return True

    def fold_same_branches(self, node):
        """An If output both branches give as one outer value -> that value
        (the very object the If would return: no aliasing question)."""
        then_block, else_block = node.blocks
        for i, out in enumerate(node.outputs):
            value = then_block.returns[i]
            if out.uses and value is else_block.returns[i] \
                    and not _defined_inside(value, node) \
                    and self.log.rewrite("peephole", f"If output {out} -> {value} "
                                         "(both branches)", node):
                out.replace_all_uses_with(value)
                self.changed = True

    def fold_if_condition(self, node):
        """`c and True`-style If outputs: true branch gives True (or c),
        false branch gives False (or c): the output is c."""
        cond = node.inputs[0]
        then_block, else_block = node.blocks
        for i, out in enumerate(node.outputs):
            if not out.uses or not isinstance(out.type, T.BoolType):
                continue
            if _is_value_or_bool(then_block.returns[i], cond, True) and \
                    _is_value_or_bool(else_block.returns[i], cond, False):
                if self.log.rewrite("peephole",
                                    f"If output {out} -> condition {cond}", node):
                    out.replace_all_uses_with(cond)
                    self.changed = True


def _defined_inside(value, node):
    """Whether value is made inside node's blocks."""
    owner = value.node
    while owner is not None and owner.owning_block is not None:
        owner = owner.owning_block.owning_node
        if owner is node:
            return True
    return False


def _is_value_or_bool(value, cond, expected):
    if value is cond:
        return True
    return util.is_constant(value) and util.constant_value(value) is expected


def _dims(node, ndim):
    """transpose(x, a, b)'s normalised (a, b), or None if not constant ints
    in range (an out-of-range dim must still raise)."""
    if len(node.inputs) != 3:
        return None
    dims = []
    for value in node.inputs[1:]:
        if not util.is_constant(value) or type(util.constant_value(value)) is not int:
            return None
        d = util.constant_value(value)
        rank = max(ndim, 1)     # a 0-d tensor accepts dims 0 and -1
        if not -rank <= d < rank:
            return None
        dims.append(d % rank)
    return tuple(dims)


def _exact_identity(type_, number, op):
    """Whether `x op number` (number the identity) gives x exactly, same
    dtype: Note in the module docstring."""
    if type(number) is bool:
        return False
    if isinstance(type_, T.TensorType):
        dtype = type_.dtype
        if dtype is None or dtype == _C.bool:
            return False
        is_float = dtype.is_floating_point
        if op == "/" or isinstance(number, float):
            if not is_float:
                return False
        if op == "+" and is_float:
            return False        # -0.0 + 0 == +0.0
        return True
    if isinstance(type_, T.IntType):
        return type(number) is int and op != "/"   # int / 1 is a float
    if isinstance(type_, T.FloatType):
        return op in ("-", "*", "/")
    return False
