"""lint_graph: checks the invariants every pass must keep (TorchScript's
Graph::lint), so a test can run it after each pass.

* SSA and scoping: every input is defined earlier in its block or an
  enclosing one (block parameters included), never inside a sibling.
* Use lists agree with inputs both ways, and name only live nodes.
* Shapes of control flow: If has two parameterless blocks returning as
  many values as it has outputs; Loop has (trip, cond, inits...) inputs and
  a body (i, carried...) -> (cond, carried...); a FusionGroup's subgraph
  has its inputs and outputs (and is itself lint-clean).
"""


class GraphLintError(AssertionError):
    pass


def lint_graph(graph):
    """Raises GraphLintError naming the first broken invariant."""
    scope = set(graph.inputs)
    _check_params(graph.block)
    _block(graph.block, scope)
    return True


def _fail(message):
    raise GraphLintError(message)


def _check_params(block):
    for i, param in enumerate(block.params):
        if param.node is not block.param_node or param.offset != i:
            _fail(f"parameter {param} of a block is misnumbered")


def _uses_ok(node):
    for index, value in enumerate(node.inputs):
        if (node, index) not in value.uses:
            _fail(f"{node.kind} reads {value} but is missing from its uses")


def _block(block, scope):
    scope = set(scope)
    for node in block.nodes:
        if node.owning_block is not block:
            _fail(f"{node.kind} is listed in a block it does not belong to")
        _uses_ok(node)
        for value in node.inputs:
            if value not in scope:
                _fail(f"{node.kind} reads {value}, not defined before it in scope")
        _shape(node)
        for sub in node.blocks:
            _check_params(sub)
            _block(sub, scope | set(sub.params))
        for i, out in enumerate(node.outputs):
            if out.node is not node or out.offset != i:
                _fail(f"output {out} of {node.kind} is misnumbered")
            for user, index in out.uses:
                if user.owning_block is None or user.inputs[index] is not out:
                    _fail(f"{out} lists a use by a removed or changed node")
            scope.add(out)
    _uses_ok(block.return_node)
    for value in block.returns:
        if value not in scope:
            _fail(f"a block returns {value}, not defined in scope")


def _shape(node):
    if node.kind == "prim::If":
        if len(node.inputs) != 1 or len(node.blocks) != 2:
            _fail("prim::If needs one condition and two blocks")
        for block in node.blocks:
            if block.params or len(block.returns) != len(node.outputs):
                _fail("prim::If blocks must return one value per output")
    elif node.kind == "prim::Loop":
        carried = len(node.outputs)
        body = node.blocks[0] if len(node.blocks) == 1 else None
        if body is None or len(node.inputs) != 2 + carried \
                or len(body.params) != 1 + carried \
                or len(body.returns) != 1 + carried:
            _fail("prim::Loop must be (trip, cond, inits...) with a body "
                  "(i, carried...) -> (cond, carried...)")
    elif node.kind == "prim::FusionGroup":
        sub = node.attrs.get("subgraph")
        if sub is None or len(sub.inputs) != len(node.inputs) \
                or len(sub.outputs) != len(node.outputs):
            _fail("prim::FusionGroup's subgraph must match its inputs and outputs")
        lint_graph(sub)
    elif node.blocks:
        _fail(f"{node.kind} must not have blocks")
