"""The IR as a picture: `Graph.to_dot()` (Graphviz DOT text).

One box per node, labelled as the text printer writes it (`%h = aten::mul`,
same value names), one ellipse per graph input, and an edge from the node
that defines a value to each node that uses it.  A node's blocks (the two
branches of `prim::If`, the body of `prim::Loop`) are drawn inside it as
clusters, their parameters and returns as small nodes; a `prim::FusionGroup`
is a cluster holding its subgraph, whose inputs are fed by the group's.
Ids are numbered in print order, so the same graph gives the same text.
"""

from ..utils import _dot
from .ir import GraphPrinter


def graph_to_dot(graph):
    drawer = _IRDrawer()
    lines = drawer.draw_graph(graph, GraphPrinter(graph), "  ")
    return _dot.digraph(graph.name, lines)


class _IRDrawer:
    def __init__(self):
        self.count = 0
        self.clusters = 0

    def new_id(self):
        self.count += 1
        return f"v{self.count}"

    def draw_graph(self, graph, printer, indent, feeders=None):
        """Lines for a whole graph.  `feeders` (for a fusion group's
        subgraph) are the DOT ids that feed each input; returns the lines,
        and the return node's id as self.last_return."""
        lines = []
        defined = {}        # Value -> DOT id of what defines it
        for index, value in enumerate(graph.inputs):
            dot_id = self.new_id()
            defined[value] = dot_id
            lines.append(f"{indent}{dot_id}"
                         f"{_dot.attrs(label=printer.typed(value), shape='ellipse')};")
            if feeders is not None:
                lines.append(f"{indent}{feeders[index]} -> {dot_id};")
        self.draw_nodes(graph.block, printer, defined, indent, lines)
        self.last_return = self.draw_return(graph.block, "return", printer,
                                            defined, indent, lines)
        return lines

    def draw_nodes(self, block, printer, defined, indent, lines):
        for node in block.nodes:
            if "subgraph" in node.attrs:
                self.draw_fusion_group(node, printer, defined, indent, lines)
            else:
                self.draw_node(node, printer, defined, indent, lines)

    def draw_node(self, node, printer, defined, indent, lines):
        dot_id = self.new_id()
        outs = ", ".join(printer.typed(v) for v in node.outputs)
        call = node.kind + printer.format_attrs(node)
        label = f"{outs} =\n{call}" if outs else call
        lines.append(f"{indent}{dot_id}{_dot.attrs(label=label, shape='box')};")
        self.draw_inputs(node.inputs, dot_id, defined, indent, lines)
        for index, block in enumerate(node.blocks):
            self.draw_block(node, index, block, dot_id, printer, defined, indent, lines)
        for value in node.outputs:
            defined[value] = dot_id
        return dot_id

    def draw_inputs(self, values, dot_id, defined, indent, lines):
        for value in values:
            lines.append(f"{indent}{defined[value]} -> {dot_id};")

    def draw_block(self, node, index, block, node_id, printer, defined, indent, lines):
        """block `index` of `node` as a cluster: params fed by the node,
        nodes, and a return that flows back into the node."""
        self.clusters += 1
        inner = indent + "  "
        lines.append(f"{indent}subgraph cluster_{self.clusters} {{")
        lines.append(f"{inner}label={_dot.quote(f'{node.kind} block{index}')}; "
                     'style="rounded"; color="#1565c0";')
        if block.params:
            params_id = self.new_id()
            names = ", ".join(printer.typed(p) for p in block.params)
            lines.append(f"{inner}{params_id}"
                         f"{_dot.attrs(label=f'block{index}({names})', shape='ellipse')};")
            lines.append(f"{inner}{node_id} -> {params_id} [style=\"dashed\"];")
            for param in block.params:
                defined[param] = params_id
        self.draw_nodes(block, printer, defined, inner, lines)
        returns_id = self.draw_return(block, "->", printer, defined, inner, lines)
        lines.append(f"{indent}}}")
        lines.append(f"{indent}{returns_id} -> {node_id} [style=\"dashed\"];")

    def draw_return(self, block, word, printer, defined, indent, lines):
        dot_id = self.new_id()
        names = ", ".join(printer.name(v) for v in block.returns)
        lines.append(f"{indent}{dot_id}"
                     f"{_dot.attrs(label=f'{word} ({names})', shape='plaintext')};")
        self.draw_inputs(block.returns, dot_id, defined, indent, lines)
        return dot_id

    def draw_fusion_group(self, node, printer, defined, indent, lines):
        """The group's subgraph boxed: the group's inputs feed the subgraph's
        inputs, and the subgraph's return feeds the group node."""
        self.clusters += 1
        kind = f"{node.kind}_{len(printer.subgraphs)}"
        printer.subgraphs.append((kind, node.attrs["subgraph"]))
        inner = indent + "  "
        lines.append(f"{indent}subgraph cluster_{self.clusters} {{")
        lines.append(f"{inner}label={_dot.quote(kind)}; style=\"filled\"; "
                     'fillcolor="#fff3e0"; color="#e65100";')
        subgraph = node.attrs["subgraph"]
        feeders = [defined[value] for value in node.inputs]
        lines += self.draw_graph(subgraph, GraphPrinter(subgraph), inner, feeders)
        dot_id = self.new_id()
        outs = ", ".join(printer.typed(v) for v in node.outputs)
        label = f"{outs} =\n{kind}"
        lines.append(f"{inner}{dot_id}{_dot.attrs(label=label, shape='box')};")
        lines.append(f"{inner}{self.last_return} -> {dot_id};")
        lines.append(f"{indent}}}")
        for value in node.outputs:
            defined[value] = dot_id

