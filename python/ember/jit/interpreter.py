"""A reference interpreter that runs a graph node by node.

It is the executable definition of what a graph means, and the oracle for
testing the rest of the compiler: each pass must leave `run_graph` giving
the same results, and the bytecode VM must agree with it.  It is slow (a
dictionary lookup per value) and never used to run scripts for speed.

Node kinds it knows (Note [The graph IR] in ir.py):
  prim::Constant        attrs["value"]
  prim::Uninitialized   a value on a path that always raises (never read)
  prim::RaiseException  attrs["exception"] names the class; optional message
  prim::If / prim::Loop structured control flow
  prim::FusionGroup     attrs["subgraph"]: run the subgraph (what the fused
                        kernel must compute)
  anything with attrs["callee"]: a call, keywords last (attrs["kwnames"])
"""

from .. import _C
from . import ops

INT64_MAX = 2**63 - 1

# RaiseException's exception names -> classes: the only ones a script raises,
# the VM's RAISE kinds (one list, in c/python/JitVM.c).
EXCEPTIONS = {cls.__name__: cls for cls in _C._jit_raise_kinds()}


class _Uninitialized:
    def __repr__(self):
        return "<uninitialized>"


UNINITIALIZED = _Uninitialized()


def run_graph(graph, args):
    """Runs `graph` on `args`; returns one value, or a tuple for several."""
    if len(args) != len(graph.inputs):
        raise TypeError(f"graph expects {len(graph.inputs)} inputs, "
                        f"got {len(args)}")
    env = dict(zip(graph.inputs, args))
    outputs = run_block(graph.block, env)
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def run_block(block, env):
    for node in block.nodes:
        run_node(node, env)
    return [env[v] for v in block.returns]


def call_node(node, inputs):
    fn = ops.resolve(node.callee)
    kwnames = node.kwnames
    if kwnames:
        positional = inputs[:len(inputs) - len(kwnames)]
        keywords = dict(zip(kwnames, inputs[len(inputs) - len(kwnames):]))
        return fn(*positional, **keywords)
    return fn(*inputs)


def run_node(node, env):
    kind = node.kind
    inputs = [env[v] for v in node.inputs]
    if kind == "prim::Constant":
        results = [node.attrs["value"]]
    elif kind == "prim::Uninitialized":
        results = [UNINITIALIZED]
    elif kind == "prim::RaiseException":
        cls = EXCEPTIONS[node.attrs["exception"]]
        raise cls(*inputs)
    elif kind == "prim::If":
        if not isinstance(inputs[0], bool):
            raise TypeError(f"If condition must be a bool, got {type(inputs[0]).__name__}")
        results = run_block(node.blocks[0 if inputs[0] else 1], env)
    elif kind == "prim::Loop":
        results = run_loop(node, inputs, env)
    elif kind == "prim::FusionGroup":
        results = run_subgraph(node.attrs["subgraph"], inputs)
    elif node.callee is not None:
        results = [call_node(node, inputs)]
        if not node.outputs:
            results = []
    else:
        raise NotImplementedError(f"the reference interpreter has no rule for {kind}")
    for value, result in zip(node.outputs, results):
        env[value] = result


def run_loop(node, inputs, env):
    max_trip, cond, carried = inputs[0], inputs[1], list(inputs[2:])
    body = node.blocks[0]
    i = 0
    while i < max_trip and cond:
        for param, value in zip(body.params, [i] + carried):
            env[param] = value
        results = run_block(body, env)
        cond, carried = results[0], results[1:]
        i += 1
    return carried


def run_subgraph(subgraph, inputs):
    result = run_graph(subgraph, inputs)
    return list(result) if len(subgraph.outputs) != 1 else [result]
