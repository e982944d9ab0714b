"""Small graph helpers shared by the passes."""

from .. import ops
from .. import types as T

# Kinds a call node may have besides these: anything with attrs["callee"].
CONTROL_KINDS = ("prim::If", "prim::Loop")
# Non-call kinds without side effects.  (ListUnpack is not here: a list of
# the wrong length raises.)
PURE_KINDS = ("prim::Constant", "prim::Uninitialized", "prim::FusionGroup",
              "prim::TupleUnpack")


def is_call(node):
    return node.callee is not None


def is_constant(value):
    return value.node.kind == "prim::Constant"


def constant_value(value):
    return value.node.attrs["value"]


def is_number_constant(value):
    """A constant int/float/bool (what `x + 0` and fusion look for)."""
    return is_constant(value) and type(constant_value(value)) in (int, float, bool)


def is_inplace_node(node):
    """A call that writes into an input: ops.is_inplace, plus any call given
    an `inplace=` keyword (F.relu(x, inplace=True): its value may be unknown)."""
    return is_call(node) and (ops.is_inplace(node.callee, node.kwnames)
                              or "inplace" in node.kwnames)


def is_pure_call(node):
    return is_call(node) and ops.is_pure(node.callee, node.kwnames) \
        and not is_inplace_node(node)


def has_side_effects(node):
    """Must stay even when its outputs are unused (DCE), and must not be
    moved across (fusion): impure calls, raises, unknown kinds; If/Loop
    when something inside has side effects.  An If/Loop asks only the
    nodes of its own blocks (each nested one answers for its blocks), so a
    call costs one visit per node below: an elif chain is linear, not
    exponential (node.all_nodes() here visited a nested If's nodes once
    per enclosing If)."""
    if node.kind in PURE_KINDS:
        return False
    if node.kind in CONTROL_KINDS:
        return any(has_side_effects(inner)
                   for block in node.blocks for inner in block.nodes)
    if is_call(node):
        return not is_pure_call(node)
    return True


def insert_constant(graph, value, before, type_=None):
    """A prim::Constant holding `value`, inserted before node `before`."""
    if type_ is None:
        type_ = T.type_of_value(value) or T.Any
    node = graph.create("prim::Constant", output_types=[type_],
                        attrs={"value": value})
    block = before.owning_block
    block.insert(block.nodes.index(before), node)
    return node.output


def insert_call(graph, callee, inputs, before, type_):
    """A call node `callee(*inputs)` inserted before node `before`."""
    node = graph.create(ops.kind_of(callee), inputs, output_types=[type_],
                        attrs={"callee": callee})
    block = before.owning_block
    block.insert(block.nodes.index(before), node)
    return node.output


def replace_node_outputs(node, values):
    """Every use of node's outputs now reads `values`; the node is removed."""
    for out, new in zip(node.outputs, values):
        out.replace_all_uses_with(new)
    node.destroy()


def remove_input(node, index):
    node.set_inputs([v for i, v in enumerate(node.inputs) if i != index])


def inline_block_before(block, node):
    """Moves the nodes of `block` before `node` (same graph); returns the
    block's return values (which the caller substitutes for node's outputs)."""
    returns = list(block.returns)
    for inner in list(block.nodes):
        inner.move_before(node)
    return returns


def block_size(block):
    """Nodes in a block, nested blocks included, constants not counted."""
    return sum(1 for node in block.all_nodes() if node.kind != "prim::Constant")


def insert_constant_at_end(graph, value, block, type_=None):
    """A prim::Constant appended to `block`."""
    if type_ is None:
        type_ = T.type_of_value(value) or T.Any
    node = graph.create("prim::Constant", output_types=[type_],
                        attrs={"value": value})
    block.append(node)
    return node.output
