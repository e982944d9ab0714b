"""The graph IR of ember.jit: Graph, Block, Node, Value.

Note [The graph IR]
~~~~~~~~~~~~~~~~~~~
The IR is TorchScript's, in small (script-compilers.md, section 1.3):

* A **Value** is defined exactly once (SSA), by one Node or as a parameter
  of a Block, and has a static type (types.py).  `value.uses` lists every
  (node, input index) that reads it, so a pass can rewrite all readers with
  `replace_all_uses_with`.
* A **Node** has a `kind` such as "aten::mul", "prim::Constant" or
  "prim::If", input Values, output Values, attributes (`attrs`: a
  constant's value, keyword names) and, for control flow, sub-Blocks.  What
  a call node runs is its `callee`: the qualified name of a Python callable
  ("ember.mul", "Tensor.t", "F.linear", "operator.add"), resolved through
  the allowlist in ops.py, so a graph never holds arbitrary code.
* A **Block** is a list of nodes with parameters and returns.  Its returns
  are read by a sentinel Return node, its parameters written by a sentinel
  Param node, so uses of block returns are ordinary uses.
* Control flow is structured.  `prim::If(%cond)` has two blocks without
  parameters; the If's outputs are what the taken block returns (the phi
  nodes of SSA).  `prim::Loop(%max_trip, %start_cond, %carried...)` has one
  body block `(%i, %carried...) -> (%continue_cond, %carried'...)`; its
  outputs are the carried values after the last iteration.  A `for ... in
  range(n)` loop has trip count n and a constant-true condition; a `while`
  loop has trip count INT64_MAX.

Every node keeps the SourceRange it came from; errors raised while compiling
(ScriptError) and while running point at it.
"""

import itertools

from . import types as T


class SourceRange:
    """Where a node came from: a span of lines/columns of a source file."""

    __slots__ = ("filename", "lines", "lineno", "col", "end_lineno",
                 "end_col", "function_name", "first_line")

    def __init__(self, filename, lines, lineno, col, end_lineno=None,
                 end_col=None, function_name=None, first_line=None):
        self.filename = filename
        self.lines = lines          # all lines of the file (shared list)
        self.lineno = lineno        # 1-based, in the file
        self.col = col              # 0-based
        self.end_lineno = end_lineno or lineno
        self.end_col = end_col if end_col is not None else col + 1
        self.function_name = function_name
        self.first_line = first_line    # the function's first source line

    def where_in_function(self):
        """"line 3 of f": the line counted from the function's first source
        line (its decorator, if any), as a reader counts the listing."""
        if self.first_line is None or self.function_name is None:
            return f"line {self.lineno}"
        return f"line {self.lineno - self.first_line + 1} of {self.function_name}"

    def highlight(self):
        """The source line with a caret under the span, TorchScript style."""
        where = f'  File "{self.filename}", line {self.lineno}'
        if self.function_name:
            where += f", in {self.function_name}"
        if not self.lines or not 0 < self.lineno <= len(self.lines):
            return where
        text = self.lines[self.lineno - 1].rstrip("\n")
        end = self.end_col if self.end_lineno == self.lineno else len(text)
        width = max(1, end - self.col)
        return (f"{where}\n    {text}\n"
                f"    {' ' * self.col}{'~' * width} <--- HERE")

    def __repr__(self):
        return f"<SourceRange {self.filename}:{self.lineno}:{self.col}>"


class ScriptError(RuntimeError):
    """A problem found while compiling a scripted function.

    The message names the problem and, when the source is known, quotes the
    offending line with a caret under the construct."""

    def __init__(self, message, source_range=None):
        self.message = message
        self.source_range = source_range
        text = message
        if source_range is not None:
            text += ":\n" + source_range.highlight()
        super().__init__(text)


class Value:
    __slots__ = ("node", "offset", "type", "debug_name", "uses", "id",
                 "__weakref__")

    def __init__(self, node, offset, type_, id_):
        self.node = node
        self.offset = offset
        self.type = type_
        self.debug_name = None
        self.uses = []          # [(node, input index)]
        self.id = id_

    def replace_all_uses_with(self, other):
        if other is self:
            return
        for user, index in list(self.uses):
            user.replace_input(index, other)

    def __repr__(self):
        return f"%{self.debug_name or self.id}"


class Node:
    __slots__ = ("kind", "inputs", "outputs", "blocks", "attrs", "owning_block",
                 "source_range", "graph", "__weakref__")

    def __init__(self, graph, kind, source_range=None):
        self.graph = graph
        self.kind = kind
        self.inputs = []
        self.outputs = []
        self.blocks = []
        self.attrs = {}
        self.owning_block = None
        self.source_range = source_range

    # -- inputs and outputs ------------------------------------------------
    def add_input(self, value):
        value.uses.append((self, len(self.inputs)))
        self.inputs.append(value)
        return value

    def replace_input(self, index, value):
        old = self.inputs[index]
        old.uses.remove((self, index))
        self.inputs[index] = value
        value.uses.append((self, index))

    def remove_all_inputs(self):
        for index, value in enumerate(self.inputs):
            value.uses.remove((self, index))
        self.inputs = []

    def set_inputs(self, values):
        self.remove_all_inputs()
        for value in values:
            self.add_input(value)

    def add_output(self, type_=T.Tensor, name=None):
        value = Value(self, len(self.outputs), type_, self.graph.new_id())
        value.debug_name = name
        self.outputs.append(value)
        return value

    def erase_output(self, offset):
        value = self.outputs[offset]
        assert not value.uses, f"erasing {value} which still has uses"
        del self.outputs[offset]
        for i, out in enumerate(self.outputs):
            out.offset = i

    @property
    def output(self):
        assert len(self.outputs) == 1, f"{self.kind} has {len(self.outputs)} outputs"
        return self.outputs[0]

    def add_block(self):
        block = Block(self.graph, self)
        self.blocks.append(block)
        return block

    # -- attributes used by calls ------------------------------------------
    @property
    def callee(self):
        return self.attrs.get("callee")

    @property
    def kwnames(self):
        return self.attrs.get("kwnames", ())

    # -- position in the block ----------------------------------------------
    def destroy(self):
        """Removes the node; its outputs must have no uses left."""
        for out in self.outputs:
            assert not out.uses, f"destroying {self.kind} whose {out} is used"
        for block in self.blocks:
            block.destroy_contents()
        self.remove_all_inputs()
        if self.owning_block is not None:
            self.owning_block.nodes.remove(self)
            self.owning_block = None

    def move_before(self, other):
        self.owning_block.nodes.remove(self)
        block = other.owning_block
        block.nodes.insert(block.nodes.index(other), self)
        self.owning_block = block

    def is_before(self, other):
        """Whether self comes before other (same block)."""
        nodes = self.owning_block.nodes
        return nodes.index(self) < nodes.index(other)

    def all_nodes(self):
        """This node's sub-blocks' nodes, recursively."""
        for block in self.blocks:
            yield from block.all_nodes()

    def __repr__(self):
        return f"<Node {self.kind} -> {self.outputs}>"


class Block:
    __slots__ = ("graph", "owning_node", "nodes", "param_node", "return_node")

    def __init__(self, graph, owning_node):
        self.graph = graph
        self.owning_node = owning_node
        self.nodes = []
        self.param_node = Node(graph, "prim::Param")
        self.param_node.owning_block = self
        self.return_node = Node(graph, "prim::Return")
        self.return_node.owning_block = self

    @property
    def params(self):
        return self.param_node.outputs

    @property
    def returns(self):
        return self.return_node.inputs

    def add_param(self, type_, name=None):
        return self.param_node.add_output(type_, name)

    def add_return(self, value):
        return self.return_node.add_input(value)

    def set_returns(self, values):
        self.return_node.set_inputs(values)

    def append(self, node):
        node.owning_block = self
        self.nodes.append(node)
        return node

    def insert(self, index, node):
        node.owning_block = self
        self.nodes.insert(index, node)
        return node

    def all_nodes(self):
        """Every node of the block, sub-blocks included, in order."""
        for node in self.nodes:
            yield node
            yield from node.all_nodes()

    def destroy_contents(self):
        self.return_node.remove_all_inputs()
        for node in reversed(list(self.nodes)):
            for out in node.outputs:
                out.uses.clear()
            node.destroy()


class Graph:
    """A function: one top-level block whose params are the inputs."""

    def __init__(self):
        self._ids = itertools.count()
        self.block = Block(self, None)
        self.name = "graph"
        self.subgraph_counter = itertools.count()

    def new_id(self):
        return next(self._ids)

    # -- building -------------------------------------------------------------
    @property
    def inputs(self):
        return self.block.params

    @property
    def outputs(self):
        return self.block.returns

    def add_input(self, name=None, type_=T.Tensor):
        return self.block.add_param(type_, name)

    def create(self, kind, inputs=(), n_outputs=1, output_types=None,
               attrs=None, source_range=None):
        """A new node (not inserted yet)."""
        node = Node(self, kind, source_range)
        for value in inputs:
            node.add_input(value)
        types = list(output_types) if output_types is not None \
            else [T.Tensor] * n_outputs
        for t in types:
            node.add_output(t)
        if attrs:
            node.attrs.update(attrs)
        return node

    def all_nodes(self):
        return self.block.all_nodes()

    # -- printing ---------------------------------------------------------------
    def __str__(self):
        return GraphPrinter(self).print()

    def to_dot(self):
        """The graph as Graphviz DOT text (ir_dot.py): blocks and fusion
        groups drawn as clusters."""
        from .ir_dot import graph_to_dot
        return graph_to_dot(self)

    def copy(self):
        """A deep copy (values mapped one to one)."""
        new = Graph()
        new.name = self.name
        value_map = {}
        for param in self.inputs:
            value_map[param] = new.add_input(param.debug_name, param.type)
        clone_block_into(self.block, new.block, value_map)
        new.block.set_returns([value_map[v] for v in self.outputs])
        return new


def clone_node(node, graph, value_map):
    """A copy of `node` in `graph`, inputs mapped through value_map (which
    gains the outputs, and those of nested blocks)."""
    new = Node(graph, node.kind, node.source_range)
    new.attrs = dict(node.attrs)
    if "subgraph" in new.attrs:
        new.attrs["subgraph"] = new.attrs["subgraph"].copy()
    for value in node.inputs:
        new.add_input(value_map.get(value, value))
    for out in node.outputs:
        value_map[out] = new.add_output(out.type, out.debug_name)
    for block in node.blocks:
        new_block = new.add_block()
        for param in block.params:
            value_map[param] = new_block.add_param(param.type, param.debug_name)
        clone_block_into(block, new_block, value_map)
        new_block.set_returns([value_map.get(v, v) for v in block.returns])
    return new


def clone_block_into(block, target, value_map):
    for node in block.nodes:
        target.append(clone_node(node, target.graph, value_map))


# ---------------------------------------------------------------------------
# Printing, in TorchScript's format (script-compilers.md, section 1.4)


def format_constant(value):
    from .._tensor import Tensor
    if isinstance(value, Tensor):
        return f"<Tensor {str(value.dtype).replace('ember.', '')} " \
               f"{list(value.shape)}>"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return repr(value)
    return repr(value)


class GraphPrinter:
    """Names values once (debug name, made unique with .N) and prints."""

    def __init__(self, graph):
        self.graph = graph
        self.names = {}
        self.used_names = set()
        self.subgraphs = []

    def name(self, value):
        if value not in self.names:
            base = value.debug_name
            if base is None:
                candidate = str(value.id)
                while candidate in self.used_names:
                    candidate += "_"
            else:
                candidate = base
                suffix = 1
                while candidate in self.used_names:
                    candidate = f"{base}.{suffix}"
                    suffix += 1
            self.used_names.add(candidate)
            self.names[value] = candidate
        return "%" + self.names[value]

    def typed(self, value):
        return f"{self.name(value)} : {value.type}"

    def print(self):
        graph = self.graph
        lines = []
        params = [self.typed(v) for v in graph.inputs]
        head = "graph("
        joiner = ",\n" + " " * len(head)
        lines.append(f"{head}{joiner.join(params)}):")
        self.print_nodes(graph.block, 1, lines)
        lines.append(f"  return ({', '.join(map(self.name, graph.outputs))})")
        for kind, subgraph in self.subgraphs:
            lines.append(f"with {kind} = " + str(subgraph).replace("\n", "\n"))
        return "\n".join(lines) + "\n"

    def print_nodes(self, block, depth, lines):
        for node in block.nodes:
            self.print_node(node, depth, lines)

    def print_node(self, node, depth, lines):
        indent = "  " * depth
        outs = ", ".join(self.typed(v) for v in node.outputs)
        lhs = f"{outs} = " if outs else ""
        kind = node.kind
        if "subgraph" in node.attrs:
            kind = f"{kind}_{len(self.subgraphs)}"
            self.subgraphs.append((kind, node.attrs["subgraph"]))
        lines.append(f"{indent}{lhs}{kind}{self.format_attrs(node)}"
                     f"({self.format_inputs(node)})")
        for i, block in enumerate(node.blocks):
            params = ", ".join(self.typed(p) for p in block.params)
            lines.append(f"{indent}  block{i}({params}):")
            self.print_nodes(block, depth + 2, lines)
            lines.append(f"{indent}    -> ({', '.join(map(self.name, block.returns))})")

    def format_attrs(self, node):
        shown = {k: v for k, v in node.attrs.items()
                 if k not in ("callee", "kwnames", "subgraph") and not k.startswith("_")}
        if not shown:
            return ""
        return "[" + ", ".join(f"{k}={format_constant(v)}"
                               for k, v in sorted(shown.items())) + "]"

    def format_inputs(self, node):
        names = [self.name(v) for v in node.inputs]
        kwnames = node.kwnames
        if kwnames:
            first = len(names) - len(kwnames)
            names[first:] = [f"{k}={n}" for k, n in zip(kwnames, names[first:])]
        return ", ".join(names)
