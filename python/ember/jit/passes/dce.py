"""Dead code elimination, mark and sweep (notes 2.3).

Marking starts from the graph outputs and from every node with side
effects (impure or in-place calls, RaiseException, unknown kinds; an If or
Loop holding one).  A live node makes its inputs live; a live If output
makes both branches' returns live; a live loop-carried slot (its output or
its body parameter) makes its initial value and the body's next value
live.  The sweep removes unmarked nodes, the dead outputs of live Ifs
(with the matching block returns) and the dead carried slots of live
Loops (output, initial value, body parameter and body return).
"""

from . import util
from .log import log_or_default


def dce(graph, log=None):
    """Removes dead code; returns whether it changed."""
    log = log_or_default(log)
    marks = _Marks()
    marks.start(graph)
    sweeper = _Sweep(marks, log)
    sweeper.block(graph.block)
    return sweeper.changed


class _Marks:
    def __init__(self):
        self.values = set()
        self.nodes = set()
        self.slots = set()      # (loop node, carried index)
        self.work = []

    def start(self, graph):
        for value in graph.outputs:
            self.value(value)
        for node in graph.all_nodes():
            # an If/Loop is marked through the effects inside it (node()
            # marks the owner), so it is not asked itself
            if node.kind not in util.CONTROL_KINDS and util.has_side_effects(node):
                self.node(node)
        while self.work:
            self.process(self.work.pop())

    def value(self, value):
        if value not in self.values:
            self.values.add(value)
            self.work.append(value)

    def node(self, node):
        if node in self.nodes:
            return
        self.nodes.add(node)
        owner = node.owning_block.owning_node if node.owning_block else None
        if owner is not None:
            self.node(owner)
        if node.kind == "prim::Loop":
            self.value(node.inputs[0])
            self.value(node.inputs[1])
            self.value(node.blocks[0].returns[0])
        else:
            for value in node.inputs:
                self.value(value)

    def slot(self, loop, index):
        if (loop, index) in self.slots:
            return
        self.slots.add((loop, index))
        self.node(loop)
        self.value(loop.inputs[2 + index])
        self.value(loop.blocks[0].returns[1 + index])

    def process(self, value):
        definer = value.node
        if definer.kind == "prim::Param":
            loop = definer.owning_block.owning_node
            if loop is not None and loop.kind == "prim::Loop":
                if value.offset == 0:
                    self.node(loop)
                else:
                    self.slot(loop, value.offset - 1)
            return
        self.node(definer)
        if definer.kind == "prim::If":
            for block in definer.blocks:
                self.value(block.returns[value.offset])
        elif definer.kind == "prim::Loop":
            self.slot(definer, value.offset)


class _Sweep:
    def __init__(self, marks, log):
        self.marks = marks
        self.log = log
        self.changed = False
        self.stopped = False    # the opt limit is spent: keep the rest

    def allow(self, message, node):
        if self.stopped:
            return False
        if not self.log.rewrite("dce", message, node):
            self.stopped = True
            return False
        self.changed = True
        return True

    def block(self, block):
        for node in reversed(list(block.nodes)):
            if node not in self.marks.nodes:
                if self.allow(f"removed dead {node.kind} -> "
                              f"{', '.join(map(repr, node.outputs))}", node):
                    node.destroy()
                continue
            if node.kind == "prim::If":
                self.if_outputs(node)
            elif node.kind == "prim::Loop":
                self.loop_slots_returns(node)
            for sub in node.blocks:
                self.block(sub)
            if node.kind == "prim::Loop":
                self.loop_slots_rest(node)

    def if_outputs(self, node):
        for i in reversed(range(len(node.outputs))):
            out = node.outputs[i]
            if out in self.marks.values or out.uses:
                continue
            if not self.allow(f"removed dead If output {out}", node):
                return
            for block in node.blocks:
                util.remove_input(block.return_node, i)
            node.erase_output(i)

    def dead_slots(self, node):
        return [i for i in reversed(range(len(node.outputs)))
                if (node, i) not in self.marks.slots]

    def loop_slots_returns(self, node):
        """First half of removing dead carried slots: the body returns go
        before the body is swept (they read values about to be removed)."""
        body = node.blocks[0]
        node.attrs["_dead_slots"] = []
        for i in self.dead_slots(node):
            if node.outputs[i].uses or not self.allow(
                    f"removed dead loop-carried {node.outputs[i]}", node):
                break
            util.remove_input(body.return_node, 1 + i)
            node.attrs["_dead_slots"].append(i)

    def loop_slots_rest(self, node):
        body = node.blocks[0]
        for i in node.attrs.pop("_dead_slots"):     # descending order
            body.param_node.erase_output(1 + i)
            node.erase_output(i)
            util.remove_input(node, 2 + i)
