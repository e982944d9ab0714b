"""A small, conservative alias analysis for the rewrites that replace one
value by another (peephole `x + 0 -> x`, CSE, constant folding of tensors).

Note [When replacing a value is safe]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
`y = x + 0` is a fresh tensor, `x` is not: after `y -> x` a write into
one is seen through the other, and a caller handed `y` would get `x`
itself.  So a replacement is made only when neither value can be written
and the replaced one cannot reach the caller.

Values of mutable types (tensors, lists, tuples, optionals) are put into
alias *classes* (union-find): a view, a container, an in-place op, an
If/Loop output and what flows into it all share one class with their
inputs.  A class is *written* if an in-place call (ops.is_inplace) reads
any member, and *escapes* if it holds a graph output.  Unknown calls
returning tensors are assumed fresh only when they are not views
(ops.is_view) and not in MAY_RETURN_INPUT.
"""

from .. import ops
from .. import types as T
from . import util

# Calls that may hand back (part of) an input though they are no views.
MAY_RETURN_INPUT = frozenset({
    "type_as", "expand", "expand_as", "as_strided", "to", "contiguous",
    "resolve_conj", "resolve_neg", "getitem", "__getitem__", "align_as",
    "unwrap_optional", "list", "tuple", "max", "min", "broadcast_tensors",
    "movedim", "swapaxes", "swapdims", "view_as_real", "index_select",
})

_IMMUTABLE = (T.IntType, T.FloatType, T.BoolType, T.StrType, T.NoneType,
              T.NumberType, T.DtypeType)


def is_mutable_type(type_):
    return not isinstance(type_, _IMMUTABLE)


def _aliases_inputs(node):
    """Whether a call's outputs may share memory with its inputs."""
    if util.is_inplace_node(node):
        return True
    callee = node.callee
    return ops.is_view(callee) or callee.startswith("prim.") \
        or ops.method_name(callee) in MAY_RETURN_INPUT


class AliasInfo:
    """Alias classes of one graph (rebuild it after structural changes;
    `merge` records a replacement made since)."""

    def __init__(self, graph):
        self.parent = {}
        self.written = set()        # roots of written classes
        self.escaping = set()       # roots of classes holding an output
        self._written_values = []
        self._walk(graph.block)
        self.written = {self.find(v) for v in self._written_values}
        self.escaping = {self.find(v) for v in graph.outputs}

    # -- union-find --------------------------------------------------------
    def find(self, value):
        root = value
        while self.parent.get(root, root) is not root:
            root = self.parent[root]
        while value is not root:
            value, self.parent[value] = self.parent.get(value, value), root
        return root

    def union(self, a, b):
        if not (is_mutable_type(a.type) and is_mutable_type(b.type)):
            return
        ra, rb = self.find(a), self.find(b)
        if ra is rb:
            return
        self.parent[rb] = ra
        if rb in self.written:
            self.written.add(ra)
        if rb in self.escaping:
            self.escaping.add(ra)

    def merge(self, a, b):
        """After `b` was replaced by `a`: one class."""
        self.union(a, b)

    # -- queries -----------------------------------------------------------
    def is_written(self, value):
        return is_mutable_type(value.type) and self.find(value) in self.written

    def escapes(self, value):
        return is_mutable_type(value.type) and self.find(value) in self.escaping

    def safe_to_replace(self, old, new):
        """Note [When replacing a value is safe]."""
        return not (self.is_written(old) or self.is_written(new)
                    or self.escapes(old))

    # -- building ----------------------------------------------------------
    def _walk(self, block):
        for node in block.nodes:
            self._node(node)
            for sub in node.blocks:
                self._walk(sub)
            self._control_flow(node)

    def _node(self, node):
        if not util.is_call(node):
            if node.kind not in ("prim::Constant", "prim::If", "prim::Loop",
                                 "prim::FusionGroup", "prim::Uninitialized"):
                self._merge_all(node)   # unknown kinds: everything aliases
            return
        if _aliases_inputs(node):
            self._merge_all(node)
        if util.is_inplace_node(node):
            for value in node.inputs:
                if is_mutable_type(value.type):
                    self._written_values.append(value)

    def _merge_all(self, node):
        values = [v for v in node.inputs + node.outputs
                  if is_mutable_type(v.type)]
        for other in values[1:]:
            self.union(values[0], other)

    def _control_flow(self, node):
        if node.kind == "prim::If":
            for i, out in enumerate(node.outputs):
                for block in node.blocks:
                    self.union(out, block.returns[i])
        elif node.kind == "prim::Loop":
            body = node.blocks[0]
            for i, out in enumerate(node.outputs):
                self.union(out, node.inputs[2 + i])
                self.union(out, body.params[1 + i])
                self.union(out, body.returns[1 + i])
