"""Constant folding (TorchScript's constant propagation, notes 2.2).

* A pure call (ops.is_pure: deterministic, no side effect, no write) whose
  inputs are all prim::Constant is run with the real callable and replaced
  by a constant.  Refused: calls that raise (the error stays for run
  time), calls without inputs (they may read global state), tensor results
  with more than MAX_TENSOR_ELEMENTS elements or requiring grad, tensor
  results made from numbers only (they depend on the default dtype), and
  tensor/list results that are written in place or reach the caller (a
  constant is one object shared by every run).
* `prim::If` on a constant condition is replaced by the taken block.
* `prim::Loop` with a constant trip count <= 0 or a constant false start
  condition is replaced by its initial values.
"""

from .. import interpreter
from .. import types as T
from ..._tensor import Tensor
from . import util
from .aliasing import AliasInfo, is_mutable_type
from .log import log_or_default

MAX_TENSOR_ELEMENTS = 1024
_CONSTANT_TYPES = (int, float, bool, str, type(None), tuple, list)


def constant_fold(graph, log=None):
    """Folds what it can, once over the graph; returns whether it changed."""
    log = log_or_default(log)
    folder = _Folder(graph, log)
    folder.block(graph.block)
    return folder.changed


class _Folder:
    def __init__(self, graph, log):
        self.graph = graph
        self.log = log
        self.aliases = None     # built on first need (tensor/list results)
        self.changed = False

    def block(self, block):
        for node in list(block.nodes):
            if node.owning_block is None:
                continue
            if node.kind == "prim::If":
                self.fold_if(node)
            elif node.kind == "prim::Loop":
                self.fold_loop(node)
            elif util.is_pure_call(node):
                self.fold_call(node)
        # blocks of surviving control flow (inlined ones were visited above)
        for node in list(block.nodes):
            for sub in node.blocks:
                self.block(sub)

    def fold_call(self, node):
        if not node.inputs or len(node.outputs) != 1 \
                or not all(util.is_constant(v) for v in node.inputs):
            return
        args = [util.constant_value(v) for v in node.inputs]
        try:
            result = interpreter.call_node(node, args)
        except Exception:  # noqa: BLE001 - the op's own error stays for run time
            return
        if not self.foldable(node, result):
            return
        message = f"{node.kind}({', '.join(map(_short, args))}) -> {_short(result)}"
        if not self.log.rewrite("constant_fold", message, node):
            return
        type_ = node.output.type
        if isinstance(result, Tensor):
            type_ = T.type_of_value(result)
        constant = util.insert_constant(self.graph, result, node, type_)
        util.replace_node_outputs(node, [constant])
        self.changed = True

    def foldable(self, node, result):
        if isinstance(result, Tensor):
            if result.numel() > MAX_TENSOR_ELEMENTS or result.requires_grad:
                return False
            if not any(isinstance(a, Tensor) for a in
                       (util.constant_value(v) for v in node.inputs)):
                return False    # ember.zeros(3): depends on the default dtype
        elif not isinstance(result, _CONSTANT_TYPES) and \
                type(result).__name__ not in ("dtype", "Size"):
            return False
        if isinstance(result, (list, tuple)) and not all(
                isinstance(item, (int, float, bool, str, type(None)))
                for item in result):
            return False
        if is_mutable_type(node.output.type) and not isinstance(result, tuple):
            if self.aliases is None:
                self.aliases = AliasInfo(self.graph)
            out = node.output
            if self.aliases.is_written(out) or self.aliases.escapes(out):
                return False
        return True

    def fold_if(self, node):
        cond = node.inputs[0]
        if not util.is_constant(cond) or type(util.constant_value(cond)) is not bool:
            return
        taken = 0 if util.constant_value(cond) else 1
        if not self.log.rewrite(
                "constant_fold", f"If({util.constant_value(cond)}) -> block{taken}", node):
            return
        returns = util.inline_block_before(node.blocks[taken], node)
        util.replace_node_outputs(node, returns)
        self.aliases = None
        self.changed = True

    def fold_loop(self, node):
        trip, start = node.inputs[0], node.inputs[1]
        never = (util.is_constant(start) and util.constant_value(start) is False) \
            or (util.is_constant(trip) and type(util.constant_value(trip)) is int
                and util.constant_value(trip) <= 0)
        if not never:
            return
        if not self.log.rewrite("constant_fold", "Loop that never runs -> its inits",
                                node):
            return
        util.replace_node_outputs(node, list(node.inputs[2:]))
        self.aliases = None
        self.changed = True


def _short(value):
    from ..ir import format_constant
    text = format_constant(value)
    return text if len(text) <= 40 else text[:37] + "..."
