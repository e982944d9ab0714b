"""Lowering: a graph becomes register bytecode (bytecode.py, run by the C VM).

Note [Lowering a graph to bytecode]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Every Value gets a register.  Structured control flow becomes jumps:

    prim::If(%c)                    JUMP_IF_FALSE c, else
      block0 -> (%a)                <block0>; MOVE out <- a; JUMP end
      block1 -> (%b)          else: <block1>; MOVE out <- b
                               end:
    prim::Loop(%n, %c0, %x0)        counter <- 0; cond <- c0; x <- x0
      block0(%i, %x) -> (%c, %y) top: LOOP_TEST counter, n, exit
                                    JUMP_IF_FALSE cond, exit   (not for `for`)
                                    <body, %i and %x read counter and x>
                                    MOVE x <- y; MOVE cond <- c
                                    INC counter; JUMP top
                              exit: (the loop's output is register x)
    prim::FusionGroup               FUSED k, (inputs, outputs), fallback
                                    JUMP done
                          fallback: <the group's nodes, unfused>
                              done:

Constants are loaded once, in a prologue, into registers that stay loaded.
Every other register is released (DROP) right after the instruction that
reads its value for the last time, so a tensor dies as early as in eager
code.  A value read inside a loop but defined before it lives until the loop
ends (the body runs again).  A register freed by a DROP is reused for the
next value defined, so the register file stays small.
"""

from . import interpreter, ops
from . import types as T
from .ir import ScriptError


class Assembler:
    """Collects instructions and the tables they index."""

    def __init__(self, name):
        self.name = name
        self.instructions = []   # [opname, a, b, c]
        self.lines = []
        self.operands = []
        self.constants = []
        self.callsites = []      # (callee, nargs, kwnames)
        self.fused = []          # FusedKernel objects
        self.fused_graphs = []   # their subgraphs (for saving and printing)
        self._callsite_index = {}
        self.line = 0

    def emit(self, op, a=0, b=0, c=0):
        self.instructions.append([op, a, b, c])
        self.lines.append(self.line)
        return len(self.instructions) - 1

    def here(self):
        return len(self.instructions)

    def patch(self, index, field, value):
        self.instructions[index][field] = value

    def operand_list(self, registers):
        offset = len(self.operands)
        self.operands.extend(registers)
        return offset

    def callsite(self, callee, nargs, kwnames):
        key = (callee, nargs, tuple(kwnames))
        if key not in self._callsite_index:
            self._callsite_index[key] = len(self.callsites)
            self.callsites.append(key)
        return self._callsite_index[key]

    def constant(self, value):
        # Constants compare by type and value (1, 1.0 and True differ);
        # tensors by identity.
        for i, existing in enumerate(self.constants):
            if type(existing) is type(value) and _same_constant(existing, value):
                return i
        self.constants.append(value)
        return len(self.constants) - 1


def _same_constant(a, b):
    from .._tensor import Tensor
    if isinstance(a, Tensor):
        return a is b
    if isinstance(a, float) and a != a:
        return b != b
    try:
        return bool(a == b)
    except Exception:
        return False


class Lowering:
    def __init__(self, graph, build_kernel=None):
        self.graph = graph
        self.asm = Assembler(graph.name)
        self.build_kernel = build_kernel
        self.register_of = {}
        self.free_registers = []
        self.nregs = 0
        self.position = {}       # node -> (start, end) in the linear walk
        self.last_use = {}       # value -> position after which it is dead
        self.pinned = set()      # values whose register is never released
        self.deaths = {}         # position -> [values dying there]

    # -- registers --------------------------------------------------------------
    def new_register(self):
        if self.free_registers:
            return self.free_registers.pop()
        self.nregs += 1
        return self.nregs - 1

    def define(self, value, register=None):
        if value in self.register_of:
            return self.register_of[value]
        self.register_of[value] = self.new_register() if register is None \
            else register
        return self.register_of[value]

    def reg(self, value):
        try:
            return self.register_of[value]
        except KeyError:
            raise ScriptError(f"internal error: {value} has no register") from None

    # -- liveness -------------------------------------------------------------------
    def number_nodes(self, block, counter, loops):
        for node in block.nodes:
            start = next(counter)
            for sub in node.blocks:
                self.number_nodes(sub, counter,
                                  loops + [node] if node.kind == "prim::Loop" else loops)
                next(counter)  # the block's end (its return moves)
            self.position[node] = (start, next(counter))
            self._loops_of[node] = loops

    def compute_liveness(self):
        import itertools
        self._loops_of = {}
        counter = itertools.count()
        self.number_nodes(self.graph.block, counter, [])
        self.end_position = next(counter)
        for node in self.graph.all_nodes():
            for value in node.inputs:
                self.note_use(value, node, self.position[node][0])
            for block in node.blocks:
                end = self.position[node][1] - 1
                for value in block.returns:
                    self.note_use(value, node, end)
        for value in self.graph.outputs:
            self.last_use[value] = self.end_position

    def note_use(self, value, user, at):
        defining = value.node
        def_loops = self._loops_of.get(defining, []) \
            if defining.kind != "prim::Param" else self._param_loops(defining)
        # a use inside a loop the value is not defined in lasts until that
        # loop ends: the body reads it again on the next iteration
        for loop in self._loops_of[user] + ([user] if user.kind == "prim::Loop" else []):
            if loop not in def_loops and loop is not defining:
                at = max(at, self.position[loop][1])
                break
        self.last_use[value] = max(self.last_use.get(value, -1), at)

    def _param_loops(self, param_node):
        owner = param_node.owning_block.owning_node
        if owner is None:
            return []
        return self._loops_of[owner] + ([owner] if owner.kind == "prim::Loop" else [])

    def release_dead(self, position):
        """DROP every register whose value was read for the last time at
        `position`, and make it reusable."""
        for value in self.dying_at(position):
            self.release_value(value)

    def dying_at(self, position):
        return self.deaths.get(position, [])

    # -- the walk ---------------------------------------------------------------------
    def run(self):
        self.compute_liveness()
        self.dead = set()
        for value, position in self.last_use.items():
            self.deaths.setdefault(position, []).append(value)
        for i, param in enumerate(self.graph.inputs):
            self.define(param)
        self.load_constants()
        for param in self.graph.inputs:
            if param not in self.last_use:
                self.release_value(param)
        self.lower_block(self.graph.block)
        self.asm.line = 0
        offset = self.asm.operand_list([self.reg(v) for v in self.graph.outputs])
        self.asm.emit("RETURN", offset, len(self.graph.outputs))
        return self.asm, self.nregs, len(self.graph.inputs)

    def load_constants(self):
        """The prologue: every constant of the graph (fallback code of fused
        groups included) in a register of its own for the whole run."""
        seen = {}
        for node in self.graph.all_nodes():
            if node.kind != "prim::Constant":
                continue
            index = self.asm.constant(node.attrs["value"])
            if index not in seen:
                seen[index] = self.new_register()
                self.asm.emit("LOAD_CONST", seen[index], index)
            self.register_of[node.output] = seen[index]
            self.pinned.add(node.output)

    def lower_block(self, block):
        for node in block.nodes:
            if node.source_range is not None:
                self.asm.line = node.source_range.lineno
            self.lower_node(node)
            self.release_dead(self.position[node][0])
            self.release_dead(self.position[node][1])
            for out in node.outputs:
                if out not in self.last_use:
                    self.release_value(out)  # never read

    def lower_node(self, node):
        kind = node.kind
        if kind == "prim::Constant":
            return
        if kind == "prim::Uninitialized":
            self.define(node.output)
            return
        if kind == "prim::If":
            return self.lower_if(node)
        if kind == "prim::Loop":
            return self.lower_loop(node)
        if kind == "prim::FusionGroup":
            return self.lower_fusion_group(node)
        if kind == "prim::RaiseException":
            cls = node.attrs["exception"]
            kinds = list(interpreter.EXCEPTIONS)
            message = self.reg(node.inputs[0]) if node.inputs else -1
            self.asm.emit("RAISE", kinds.index(cls), message)
            return
        if kind in ("prim::TupleUnpack", "prim::ListUnpack"):
            registers = [self.define(out) for out in node.outputs]
            offset = self.asm.operand_list(registers)
            self.asm.emit("UNPACK", offset, self.reg(node.inputs[0]), len(registers))
            return
        if node.callee is None:
            raise ScriptError(f"cannot lower a {kind} node", node.source_range)
        self.lower_call(node)

    def lower_call(self, node):
        args = [self.reg(v) for v in node.inputs]
        site = self.asm.callsite(node.callee, len(args), node.kwnames)
        offset = self.asm.operand_list(args)
        if node.outputs and node.outputs[0] in self.last_use:
            dst = self.define(node.outputs[0])
        else:
            dst = -1
            for out in node.outputs:
                self.pinned.add(out)  # never materialised
        self.asm.emit("CALL", dst, site, offset)

    def move_returns(self, block, targets):
        for value, target in zip(block.returns, targets):
            if self.reg(value) != target:
                self.asm.emit("MOVE", target, self.reg(value))
        self.release_block_locals(block)

    def release_block_locals(self, block):
        """Values made in `block` whose last reader is its return."""
        end = self.position[block.owning_node][1] - 1
        for value in block.returns:
            if self.last_use.get(value) == end and _defined_in(value, block):
                self.release_value(value)

    def release_value(self, value):
        register = self.register_of.get(value)
        if register is None or value in self.pinned or value in self.dead:
            return
        self.asm.emit("DROP", register)
        self.free_registers.append(register)
        self.dead.add(value)
    def lower_if(self, node):
        targets = [self.define(out) for out in node.outputs]
        jump_else = self.asm.emit("JUMP_IF_FALSE", self.reg(node.inputs[0]))
        self.lower_block(node.blocks[0])
        self.move_returns(node.blocks[0], targets)
        jump_end = self.asm.emit("JUMP")
        self.asm.patch(jump_else, 2, self.asm.here())
        self.lower_block(node.blocks[1])
        self.move_returns(node.blocks[1], targets)
        self.asm.patch(jump_end, 1, self.asm.here())

    def lower_loop(self, node):
        body = node.blocks[0]
        max_trip, start_cond, inits = node.inputs[0], node.inputs[1], node.inputs[2:]
        counter = self.new_register()
        self.asm.emit("LOAD_CONST", counter, self.asm.constant(0))
        self.register_of[body.params[0]] = counter
        checks_cond = not (_is_true_constant(start_cond)
                           and _is_true_constant(body.returns[0]))
        cond = None
        if checks_cond:
            cond = self.new_register()
            self.asm.emit("MOVE", cond, self.reg(start_cond))
        carried = []
        for init, param, out in zip(inits, body.params[1:], node.outputs):
            register = self.new_register()
            self.asm.emit("MOVE", register, self.reg(init))
            # param, output and carried value share the register; the
            # output's death releases it (the params are pinned: the end of
            # the body writes the register again)
            self.register_of[param] = register
            self.register_of[out] = register
            carried.append(register)
        self.pinned.update(body.params)
        top = self.asm.emit("LOOP_TEST", counter, self.reg(max_trip))
        exits = [top]
        if checks_cond:
            exits.append(self.asm.emit("JUMP_IF_FALSE", cond))
        self.lower_block(body)
        self.parallel_move(list(body.returns[1:]), carried)
        if checks_cond and self.reg(body.returns[0]) != cond:
            self.asm.emit("MOVE", cond, self.reg(body.returns[0]))
        self.release_block_locals(body)
        self.asm.emit("INC", counter)
        self.asm.emit("JUMP", top)
        exit_pc = self.asm.here()
        self.asm.patch(top, 3, exit_pc)
        if checks_cond:
            self.asm.patch(exits[1], 2, exit_pc)
        self.asm.emit("DROP", counter)
        self.free_registers.append(counter)
        if checks_cond:
            self.asm.emit("DROP", cond)
            self.free_registers.append(cond)

    def parallel_move(self, sources, targets):
        """targets[k] <- sources[k] for all k at once: a source that is
        also a target still to be written goes through a temporary."""
        pending = [(t, self.reg(s)) for s, t in zip(sources, targets)
                   if self.reg(s) != t]
        temps = []
        written = {t for t, _ in pending}
        staged = []
        for target, source in pending:
            if source in written:
                temp = self.new_register()
                self.asm.emit("MOVE", temp, source)
                temps.append(temp)
                staged.append((target, temp))
            else:
                staged.append((target, source))
        for target, source in staged:
            self.asm.emit("MOVE", target, source)
        for temp in temps:
            self.asm.emit("DROP", temp)
            self.free_registers.append(temp)

    def lower_fusion_group(self, node):
        subgraph = node.attrs["subgraph"]
        kernel = self.build_kernel(subgraph) if self.build_kernel else None
        targets = [self.define(out) for out in node.outputs]
        if kernel is not None:
            index = len(self.asm.fused)
            self.asm.fused.append(kernel)
            self.asm.fused_graphs.append(subgraph)
            offset = self.asm.operand_list(
                [self.reg(v) for v in node.inputs] + targets)
            fused = self.asm.emit("FUSED", index, offset)
            jump_done = self.asm.emit("JUMP")
            self.asm.patch(fused, 3, self.asm.here())
        self.lower_fallback(node, subgraph, targets)
        if kernel is not None:
            self.asm.patch(jump_done, 1, self.asm.here())

    def lower_fallback(self, node, subgraph, targets):
        """The group's own nodes, run one by one (when the kernel's guard
        fails: other dtypes, autograd, shapes that do not broadcast)."""
        mapping = dict(zip(subgraph.inputs, node.inputs))
        for inner in subgraph.block.nodes:
            if inner.kind == "prim::Constant":
                index = self.asm.constant(inner.attrs["value"])
                register = self.new_register()
                self.asm.emit("LOAD_CONST", register, index)
                mapping[inner.output] = ("reg", register)
                continue
            args = []
            for value in inner.inputs:
                mapped = mapping[value]
                args.append(mapped[1] if isinstance(mapped, tuple) else self.reg(mapped))
            site = self.asm.callsite(inner.callee, len(args), inner.kwnames)
            offset = self.asm.operand_list(args)
            register = self.new_register()
            self.asm.emit("CALL", register, site, offset)
            mapping[inner.output] = ("reg", register)
        temporaries = {m[1] for m in mapping.values() if isinstance(m, tuple)}
        for out, target in zip(subgraph.outputs, targets):
            mapped = mapping[out]
            source = mapped[1] if isinstance(mapped, tuple) else self.reg(mapped)
            self.asm.emit("MOVE", target, source)
        for register in sorted(temporaries):
            self.asm.emit("DROP", register)
            self.free_registers.append(register)


def _defined_in(value, block):
    """Whether value is made by a node of block (or of a block inside it)."""
    node = value.node
    while node is not None and node.owning_block is not None:
        if node.owning_block is block:
            return node.kind != "prim::Param"
        node = node.owning_block.owning_node
    return False


def _is_true_constant(value):
    node = value.node
    return node.kind == "prim::Constant" and node.attrs.get("value") is True


def lower(graph, build_kernel=None):
    """(assembler, nregs, nargs) for `graph`."""
    return Lowering(graph, build_kernel).run()


__all__ = ["lower", "Assembler", "T", "ops"]
