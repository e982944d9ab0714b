"""Type propagation: refine tensor types (dtype, ndim) through the graph.

The front end types every tensor plainly "Tensor"; a specialisation
refines the graph inputs from the actual arguments (Note [Types] in
types.py).  `propagate_types` recomputes each call's output types with
ops.result_types from its inputs' current types, joins the branches of an
If and iterates a Loop's carried types to a fixed point (types.unify), so
that the peephole pass can see dtypes and ranks.

Only tensor types are rewritten: the front end's own typing of numbers,
lists and tuples is kept (ops.result_types knows less about those, e.g.
a constant tuple index).
"""

from .. import ops
from .. import types as T


def propagate_types(graph, log=None):
    """Refines tensor output types in place; returns whether any changed."""
    return _block(graph.block)


def _set_type(value, new):
    """Sets a tensor value's type to `new` (tensor types only)."""
    if not (isinstance(value.type, T.TensorType) and isinstance(new, T.TensorType)):
        return False
    if value.type == new:
        return False
    value.type = new
    return True


def _block(block):
    changed = False
    for node in block.nodes:
        changed |= _node(node)
    return changed


def _node(node):
    if node.kind == "prim::Constant":
        new = T.type_of_value(node.attrs["value"])
        return _set_type(node.output, new) if new is not None else False
    if node.kind == "prim::If":
        return _if(node)
    if node.kind == "prim::Loop":
        return _loop(node)
    if node.callee is None:
        return False
    try:
        new = ops.result_types(node.callee, [v.type for v in node.inputs],
                               node.kwnames)
    except (KeyError, IndexError, AttributeError, TypeError):
        return False    # a call result_types has no rule for: keep the type
    if len(new) != len(node.outputs):
        return False
    changed = False
    for out, t in zip(node.outputs, new):
        changed |= _set_type(out, t)
    return changed


def _if(node):
    changed = _block(node.blocks[0]) | _block(node.blocks[1])
    for i, out in enumerate(node.outputs):
        joined = T.unify(node.blocks[0].returns[i].type,
                         node.blocks[1].returns[i].type)
        if joined is not None:
            changed |= _set_type(out, joined)
    return changed


def _values_in(node):
    yield from node.outputs
    for inner in node.all_nodes():
        yield from inner.outputs
    for block in node.blocks:
        yield from block.params
    for inner in node.all_nodes():
        for block in inner.blocks:
            yield from block.params


def _loop(node):
    """Carried types start as the inits' and widen (unify with what the body
    returns) until stable: the lattice is shallow, so this ends quickly.
    Intermediate narrowing is not a change: only the end state is compared."""
    before = {v: v.type for v in _values_in(node)}
    body = node.blocks[0]
    inits = node.inputs[2:]
    for param, init in zip(body.params[1:], inits):
        _set_type(param, init.type)
    for _ in range(8):
        _block(body)
        widened = False
        for param, init, ret in zip(body.params[1:], inits, body.returns[1:]):
            joined = T.unify(init.type, ret.type)
            if joined is not None and _set_type(param, joined):
                widened = True
        if not widened:
            break
    else:
        for param in body.params[1:]:   # did not settle: forget refinements
            _set_type(param, T.Tensor)
        _block(body)
    for out, param in zip(node.outputs, body.params[1:]):
        _set_type(out, param.type)
    return any(v.type != t for v, t in before.items())
