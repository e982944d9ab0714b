"""Common subexpression elimination over pure nodes (notes 2.3).

Two nodes are the same computation when they have the same kind, callee,
keyword names, input Values and (for constants) the same value of the
same type: 1, 1.0 and True are three different constants, and so are 0.0
and -0.0.  The table is scoped like the blocks: a node may reuse an
earlier one in its own block or in an enclosing block (which dominates
it), never one inside a sibling block.

Not shared: impure calls, nodes with blocks, tensor constants, list
results (two lists are two objects), nodes that read a value written in
place anywhere (`a = x * 2; x.add_(1); b = x * 2`: the same input Value,
two different contents; like TorchScript's CSE, which skips nodes whose
inputs have writers), and nodes whose results are written in place or
would make two graph outputs one object (Note [When replacing a value is
safe] in aliasing.py).
"""


from .. import types as T
from . import util
from .aliasing import AliasInfo
from .log import log_or_default


def cse(graph, log=None):
    """Shares repeated pure computations; returns whether it changed."""
    log = log_or_default(log)
    eliminator = _CSE(graph, log)
    eliminator.block(graph.block, {})
    return eliminator.changed


def constant_key(value):
    """A hashable key equal only for constants of the same type and value."""
    if isinstance(value, float):
        return ("float", repr(value))   # 0.0 != -0.0; nan == nan
    if isinstance(value, (tuple, list)):
        keys = tuple(constant_key(item) for item in value)
        return None if None in keys else (type(value).__name__, keys)
    if isinstance(value, (bool, int, str, type(None))):
        return (type(value).__name__, value)
    if type(value).__name__ == "dtype":
        return ("dtype", str(value))
    return None     # tensors and anything else: never equal


def node_key(node):
    if any(isinstance(out.type, T.ListType) for out in node.outputs):
        return None     # two lists are two objects, even when equal
    if node.kind == "prim::Constant":
        key = constant_key(node.attrs["value"])
        return None if key is None else ("prim::Constant", key, node.output.type)
    if not util.is_pure_call(node) or node.blocks:
        return None
    return (node.kind, node.callee, tuple(node.kwnames),
            tuple(id(v) for v in node.inputs), len(node.outputs))


class _CSE:
    def __init__(self, graph, log):
        self.graph = graph
        self.log = log
        self.aliases = AliasInfo(graph)
        self.changed = False

    def block(self, block, outer):
        table = _ScopedTable(outer)
        for node in list(block.nodes):
            key = node_key(node)
            if key is not None and not self.reads_written(node):
                earlier = table.get(key)
                if earlier is not None and self.share(node, earlier):
                    continue
                table[key] = node
            for sub in node.blocks:
                self.block(sub, table)

    def reads_written(self, node):
        """Whether an input may be written in place somewhere in the graph:
        its contents then depend on where the node runs."""
        return any(self.aliases.is_written(v) for v in node.inputs)

    def share(self, node, earlier):
        for old, new in zip(node.outputs, earlier.outputs):
            if self.aliases.is_written(old) or self.aliases.is_written(new) or (
                    self.aliases.escapes(old) and self.aliases.escapes(new)):
                return False
        if not self.log.rewrite(
                "cse", f"{', '.join(map(repr, node.outputs))} -> "
                       f"{', '.join(map(repr, earlier.outputs))}", node):
            return False
        for old, new in zip(node.outputs, earlier.outputs):
            self.aliases.merge(new, old)
        util.replace_node_outputs(node, earlier.outputs)
        self.changed = True
        return True


class _ScopedTable(dict):
    """A dict that falls back to the enclosing block's table."""

    def __init__(self, outer):
        super().__init__()
        self.outer = outer

    def get(self, key, default=None):
        if key in self:
            return self[key]
        return self.outer.get(key, default) if self.outer is not None else default


