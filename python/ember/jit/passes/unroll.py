"""Loop unrolling for `for ... in range(n)` loops (notes 2.4).

Only loops whose start condition and body condition are the constant True
qualify (a `for` over a range), with a body of at most MAX_BODY_SIZE
nodes (nested blocks counted, constants not).  Inner loops go first.

* Constant trip count n with n * body size <= MAX_UNROLLED_SIZE and n <
  MAX_BODY_REPEATS: the body is copied n times in place of the loop.
* Otherwise the body is copied UNROLL_FACTOR times into a main loop that
  runs n // 8 times, followed by the rest: with a constant n the n % 8
  leftover copies, else an epilogue loop (the original) run n % 8 times
  (n is clamped at 0 first: a negative trip count runs nothing).

The iteration index stays right: a copy reads `8 * k + j` in the main
loop and `8 * (n // 8) + e` in the epilogue.  Loops made here are marked
(attrs["_unrolled"]) and never unrolled again, so a fixed point ends.
"""

from .. import ir
from .. import ops
from .. import types as T
from . import util
from .log import log_or_default

UNROLL_FACTOR = 8
MAX_BODY_REPEATS = 64
MAX_BODY_SIZE = 32
MAX_UNROLLED_SIZE = 256


def unroll(graph, log=None):
    """Unrolls every qualifying loop; returns whether it changed."""
    log = log_or_default(log)
    return _block(graph, graph.block, log)


def _block(graph, block, log):
    changed = False
    for node in list(block.nodes):
        for sub in node.blocks:
            changed |= _block(graph, sub, log)
        if node.kind == "prim::Loop" and _qualifies(node):
            changed |= _unroll_loop(graph, node, log)
    return changed


def _is_true(value):
    return util.is_constant(value) and util.constant_value(value) is True


def _qualifies(loop):
    body = loop.blocks[0]
    return not loop.attrs.get("_unrolled") and _is_true(loop.inputs[1]) \
        and _is_true(body.returns[0]) and util.block_size(body) <= MAX_BODY_SIZE


def _constant_trip(loop):
    trip = loop.inputs[0]
    if util.is_constant(trip) and type(util.constant_value(trip)) is int:
        return util.constant_value(trip)
    return None


def _unroll_loop(graph, loop, log):
    n = _constant_trip(loop)
    size = max(util.block_size(loop.blocks[0]), 1)
    if n is not None and n < MAX_BODY_REPEATS and n * size <= MAX_UNROLLED_SIZE:
        if not log.rewrite("unroll", f"Loop of {n} iterations fully unrolled", loop):
            return False
        carried = _copy_body(graph, loop, list(loop.inputs[2:]), loop,
                             [util.insert_constant(graph, i, loop, T.Int)
                              for i in range(max(n, 0))])
        util.replace_node_outputs(loop, carried)
        return True
    if not log.rewrite("unroll", f"Loop unrolled by {UNROLL_FACTOR}"
                       + (f" ({n} iterations)" if n is not None else ""), loop):
        return False
    _unroll_by_factor(graph, loop, n)
    return True


def _copy_body(graph, loop, carried, before, indices):
    """len(indices) copies of the body before node `before`, the i-th
    reading indices[i] as its counter; returns the carried values after."""
    def place(node):
        block = before.owning_block
        block.insert(block.nodes.index(before), node)
    return _copies(graph, loop, carried, indices, place)


def _copy_body_at_end(graph, loop, carried, block, indices):
    """The same, appended to `block`."""
    return _copies(graph, loop, carried, indices, block.append)


def _copies(graph, loop, carried, indices, place):
    body = loop.blocks[0]
    for index in indices:
        value_map = {body.params[0]: index}
        value_map.update(zip(body.params[1:], carried))
        for node in body.nodes:
            place(ir.clone_node(node, graph, value_map))
        carried = [value_map.get(v, v) for v in body.returns[1:]]
    return carried


def _int_op(graph, callee, a, b, before):
    return util.insert_call(graph, callee, [a, b], before, T.Int)


def _unroll_by_factor(graph, loop, n):
    body = loop.blocks[0]
    uses_counter = bool(body.params[0].uses)
    factor = util.insert_constant(graph, UNROLL_FACTOR, loop, T.Int)
    true = util.insert_constant(graph, True, loop, T.Bool)
    if n is not None:
        main_trip = util.insert_constant(graph, max(n, 0) // UNROLL_FACTOR, loop, T.Int)
    else:
        zero = util.insert_constant(graph, 0, loop, T.Int)
        count = util.insert_call(graph, "builtins.max", [loop.inputs[0], zero],
                                 loop, T.Int)
        main_trip = _int_op(graph, "operator.floordiv", count, factor, loop)

    main = graph.create("prim::Loop", [main_trip, true] + list(loop.inputs[2:]),
                        output_types=[v.type for v in loop.outputs],
                        attrs={"_unrolled": True}, source_range=loop.source_range)
    loop.owning_block.insert(loop.owning_block.nodes.index(loop), main)
    main_body = main.add_block()
    k = main_body.add_param(T.Int, "k")
    carried = [main_body.add_param(p.type, p.debug_name) for p in body.params[1:]]
    main_body.add_return(util.insert_constant_at_end(graph, True, main_body))
    indices = []
    for j in range(UNROLL_FACTOR):
        if uses_counter:
            base = _int_op_in(graph, "operator.mul", k, UNROLL_FACTOR, main_body)
            indices.append(_int_op_in(graph, "operator.add", base, j, main_body))
        else:
            indices.append(k)
    results = _copy_body_at_end(graph, loop, carried, main_body, indices)
    for value in results:
        main_body.add_return(value)

    done = _int_op(graph, "operator.mul", main_trip, factor, loop)
    if n is not None:
        leftover = [util.insert_constant(graph, max(n, 0) // UNROLL_FACTOR
                                         * UNROLL_FACTOR + e, loop, T.Int)
                    for e in range(max(n, 0) % UNROLL_FACTOR)]
        carried = _copy_body(graph, loop, list(main.outputs), loop, leftover)
        util.replace_node_outputs(loop, carried)
        return
    # the original loop becomes the epilogue: n % 8 iterations, from `done`
    rest = _int_op(graph, "operator.sub", count, done, loop)
    loop.replace_input(0, rest)
    for i, value in enumerate(main.outputs):
        loop.replace_input(2 + i, value)
    loop.attrs["_unrolled"] = True
    counter = body.params[0]
    if uses_counter:
        index = graph.create(
            "aten::add", [done, counter], output_types=[T.Int],
            attrs={"callee": "operator.add"})
        body.insert(0, index)
        for user, i in list(counter.uses):
            if user is not index:
                user.replace_input(i, index.output)


def _int_op_in(graph, callee, a, number, block):
    """callee(a, number) appended to `block` (number a new constant)."""
    const = util.insert_constant_at_end(graph, number, block)
    node = graph.create(ops.kind_of(callee), [a, const], output_types=[T.Int],
                        attrs={"callee": callee})
    block.append(node)
    return node.output

