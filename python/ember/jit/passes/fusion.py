"""Fusion of elementwise chains into prim::FusionGroup nodes (notes 2.6),
and the translation of a group into an `ember._C.FusedKernel`.

Note [Fusion groups]
~~~~~~~~~~~~~~~~~~~~
A call is fusible when ops.elementwise_name names a kernel op of the same
arity, it has no keywords, its results are tensors and its inputs tensors
or numbers (and no known dtype rules the kernel out: every known dtype
float32/float64, all one dtype).  Each block is scanned in reverse; a
fusible node starts a group, which absorbs fusible producers of its inputs
and consumers of its outputs from the same block, nearest first, while
that stays legal:

* the group becomes one node placed after the definitions of all its
  inputs and before every outside reader of its outputs (right after its
  last member when it can), so such a place must exist;
* no node with side effects (an in-place write, a raise) may lie between
  a member and that place: nothing moves across one;
* tensor inputs + outputs <= MAX_OPERANDS (8, the kernel's limit),
  outputs <= MAX_OUTPUTS (4), inputs <= 64 and registers (inputs,
  constants, ops) <= 256 (THFused.h).

A group of one op is not formed.  The FusionGroup node's inputs are the
group's inputs in node-input order (number constants are copied into the
subgraph instead); attrs["subgraph"] is an ir.Graph with those inputs
and, as outputs, the group's values read outside it, in block order.
"""

from .. import ir
from .. import ops
from .. import types as T
from . import util
from .log import log_or_default

MAX_OPERANDS = 8
MAX_OUTPUTS = 4
MAX_INPUTS = 64         # THFused.h: TH_FUSED_MAX_INPUTS
MAX_REGISTERS = 256     # THFused.h: inputs + constants + instructions

# The kernel's ops and arities (section A of the JIT spec); the C type's
# own table (FusedKernel.ops) is used instead when it exists.
SPEC_KERNEL_OPS = {
    "add": 2, "sub": 2, "mul": 2, "div": 2, "neg": 1, "abs": 1,
    "maximum": 2, "minimum": 2, "pow": 2, "exp": 1, "log": 1, "sqrt": 1,
    "rsqrt": 1, "sin": 1, "cos": 1, "tanh": 1, "sigmoid": 1, "relu": 1,
    "reciprocal": 1, "square": 1, "expm1": 1, "log1p": 1, "erf": 1,
    "silu": 1, "clamp": 3,
}


def fused_kernel_type():
    """ember._C.FusedKernel, or None where the C core lacks it."""
    from ... import _C as C
    return getattr(C, "FusedKernel", None)


def kernel_ops():
    """{opname: arity} the fused kernel runs: the C table when built."""
    from ... import _C as C
    kernel = fused_kernel_type()
    if kernel is not None:
        table = getattr(kernel, "ops", None)
        if table is None and hasattr(C, "_fused_ops"):
            table = C._fused_ops()
        if table:
            return dict(table)
    return dict(SPEC_KERNEL_OPS)


def fusion(graph, log=None, supported_ops=None):
    """Forms fusion groups in every block; returns whether it changed."""
    log = log_or_default(log)
    table = kernel_ops() if supported_ops is None else dict(supported_ops)
    return _Fuser(graph, log, table).block(graph.block)


class _Fuser:
    def __init__(self, graph, log, table):
        self.graph = graph
        self.log = log
        self.table = table

    # -- which nodes ------------------------------------------------------------
    def fusible(self, node):
        if node.callee is None or node.blocks:
            return False
        name = ops.elementwise_name(node.callee, node.kwnames)
        if name is None or self.table.get(name) != len(node.inputs):
            return False
        if not node.outputs or not all(isinstance(o.type, T.TensorType)
                                       for o in node.outputs):
            return False
        if not all(isinstance(v.type, T.TensorType) or T.is_number(v.type)
                   for v in node.inputs):
            return False
        dtypes = {v.type.dtype for v in node.inputs + node.outputs
                  if isinstance(v.type, T.TensorType) and v.type.dtype is not None}
        return len(dtypes) <= 1 and all(d.is_floating_point for d in dtypes)

    # -- forming groups ---------------------------------------------------------
    def block(self, block):
        changed = False
        for node in list(block.nodes):
            for sub in node.blocks:
                changed |= self.block(sub)
        assigned = set()
        for node in reversed(list(block.nodes)):
            if node in assigned or node.owning_block is None \
                    or not self.fusible(node):
                continue
            group, where = self.grow(node, assigned)
            if len(group) < 2:
                continue
            if not self.log.rewrite("fusion", "fused " + " -> ".join(
                    ops.elementwise_name(n.callee) for n in group), node):
                continue
            assigned.update(group)
            self.materialize(group, where)
            changed = True
        return changed

    def grow(self, seed, assigned):
        """(members in block order, insertion index): the seed plus every
        fusible producer of an input or consumer of an output that can join,
        greedily, nearest first."""
        block = seed.owning_block
        position = {n: i for i, n in enumerate(block.nodes)}
        group = {seed}
        where = position[seed]
        grew = True
        while grew:
            grew = False
            for candidate in self.neighbours(group, block, assigned, position):
                placed = self.placement(group | {candidate}, block, position)
                if placed is not None:
                    group.add(candidate)
                    where = placed
                    grew = True
                    break
        return sorted(group, key=position.__getitem__), where

    def neighbours(self, group, block, assigned, position):
        found = set()
        for member in group:
            near = [v.node for v in member.inputs]
            near += [user for out in member.outputs for user, _ in out.uses]
            for node in near:
                if node not in group and node not in assigned \
                        and node.owning_block is block and node in position \
                        and self.fusible(node):
                    found.add(node)
        return sorted(found, key=position.__getitem__, reverse=True)

    def placement(self, group, block, position):
        """Note [Fusion groups]: the index in block.nodes before which the
        group's node can run, or None.  It must come after every input's
        definition and before every outside reader of an output, and no
        node with side effects may lie between a member and that point."""
        after, before = -1, len(block.nodes)
        for node in group:
            for value in node.inputs:
                top = _ancestor_in(value.node, block)
                if value.node not in group and top in position:
                    after = max(after, position[top])
            for out in node.outputs:
                for user, _ in out.uses:
                    top = _ancestor_in(user, block)
                    if user not in group and top in position:
                        before = min(before, position[top])
        last = max(position[n] for n in group)
        where = min(before, last + 1)
        if where <= after:
            return None
        first = min(position[n] for n in group)
        for node in block.nodes[min(first, where):max(last + 1, where)]:
            if node not in group and util.has_side_effects(node):
                return None
        return where if self.within_limits(group, position) else None

    def within_limits(self, group, position):
        group = sorted(group, key=position.__getitem__)
        inputs, outputs = group_interface(group)
        tensors = sum(isinstance(v.type, T.TensorType) for v in inputs)
        constants = {v for node in group for v in node.inputs
                     if util.is_number_constant(v)}
        registers = len(inputs) + len(constants) + len(group)
        return len(outputs) <= MAX_OUTPUTS and tensors + len(outputs) <= MAX_OPERANDS \
            and len(inputs) <= MAX_INPUTS and registers <= MAX_REGISTERS

    # -- building the FusionGroup node -------------------------------------------
    def materialize(self, group, where):
        block = group[0].owning_block
        anchor = block.nodes[where] if where < len(block.nodes) else None
        inputs, outputs = group_interface(group)
        subgraph = ir.Graph()
        subgraph.name = "fused"
        value_map = {v: subgraph.add_input(v.debug_name, v.type) for v in inputs}
        for node in group:
            for value in node.inputs:
                if value not in value_map:      # a number constant: copied
                    value_map[value] = util.insert_constant_at_end(
                        subgraph, util.constant_value(value), subgraph.block,
                        value.type)
            subgraph.block.append(ir.clone_node(node, subgraph, value_map))
        subgraph.block.set_returns([value_map[v] for v in outputs])
        last = group[-1]
        fused = self.graph.create("prim::FusionGroup", inputs,
                                  output_types=[v.type for v in outputs],
                                  attrs={"subgraph": subgraph},
                                  source_range=last.source_range)
        if anchor is None:
            block.append(fused)
        else:
            block.insert(block.nodes.index(anchor), fused)
        for old, new in zip(outputs, fused.outputs):
            old.replace_all_uses_with(new)
        for node in reversed(group):
            node.destroy()


def group_interface(group):
    """(inputs, outputs) of a group of nodes in block order: inputs in
    node-input order without number constants; outputs read outside."""
    members = set(group)
    produced = {out for node in group for out in node.outputs}
    inputs, seen = [], set()
    for node in group:
        for value in node.inputs:
            if value in produced or value in seen or util.is_number_constant(value):
                continue
            seen.add(value)
            inputs.append(value)
    outputs = [out for node in group for out in node.outputs
               if any(user not in members for user, _ in out.uses)]
    return inputs, outputs


def _ancestor_in(node, block):
    """The node of `block` that is `node` or holds it in a sub-block."""
    while node is not None and node.owning_block is not block:
        owner = node.owning_block.owning_node if node.owning_block else None
        node = owner
    return node


# ---------------------------------------------------------------------------
# Kernel translation


def build_kernel(subgraph, name="fused"):
    """The ember._C.FusedKernel computing a FusionGroup's subgraph, or None
    when this ember's C core has no FusedKernel (the lowering then emits
    only the group's unfused fallback code).

    Registers 0..n-1 are the subgraph inputs; each constant becomes a
    ("const", dst, value) and each call (opname, dst, srcs...), in order."""
    kernel_type = fused_kernel_type()
    if kernel_type is None:
        return None
    instructions, outputs = kernel_program(subgraph)
    return kernel_type(len(subgraph.inputs), instructions, outputs, name=name)


def kernel_spec(subgraph, name="fused"):
    """(ninputs, instructions, outputs, name): FusedKernel's arguments for a
    FusionGroup's subgraph, as plain data (what a program file stores)."""
    instructions, outputs = kernel_program(subgraph)
    return len(subgraph.inputs), instructions, outputs, name


def kernel_program(subgraph):
    """(instructions, output registers) for FusedKernel (spec section A)."""
    register = {v: i for i, v in enumerate(subgraph.inputs)}
    instructions = []
    for node in subgraph.block.nodes:
        dst = len(register)
        if node.kind == "prim::Constant":
            value = node.attrs["value"]
            instructions.append(("const", dst, int(value) if type(value) is bool
                                 else value))
        else:
            opname = ops.elementwise_name(node.callee, node.kwnames)
            if opname is None:
                raise ValueError(f"{node.kind} cannot run in a fused kernel")
            instructions.append((opname, dst, *(register[v] for v in node.inputs)))
        register[node.output] = dst
    return instructions, [register[v] for v in subgraph.outputs]
