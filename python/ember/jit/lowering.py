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

Constants are loaded once, in a prologue, into registers that stay loaded
(prim::Uninitialized, the value of a path that never reaches its readers,
is a None there).
Every other register is released (DROP) right after the instruction that
reads its value for the last time, so a tensor dies as early as in eager
code; that includes the temporaries of a fused group's fallback (an output
of the group is last read by its MOVE into the group's register).  A value read inside a loop but defined before it lives until the loop
ends (the body runs again).  A register freed by a DROP is reused for the
next value defined, so the register file stays small.
"""

from .. import _C
from . import bytecode
from .bytecode import Op
from .ir import ScriptError
from .ops import resolve


def _constant_key(value):
    """Constants equal by this key share one register: by type and value
    (1, 1.0 and True differ; so do 0.0 and -0.0, which compare equal; NaN
    equals NaN), inside tuples too; tensors by identity."""
    from .._tensor import Tensor
    if isinstance(value, Tensor):
        return ("tensor", id(value))
    if isinstance(value, float):
        return (float, repr(value))     # '-0.0' != '0.0', 'nan' == 'nan'
    if isinstance(value, tuple):
        return (tuple, tuple(_constant_key(item) for item in value))
    try:
        hash(value)
    except TypeError:
        return ("unhashable", id(value))
    return (type(value), value)


class Lowering:
    def __init__(self, graph, kernel_spec=None):
        self.graph = graph
        self.asm = bytecode.Assembler(graph.name)
        self.kernel_spec = kernel_spec
        self.fused_specs = []
        self.line = 0
        self.constant_objects = {}
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
        for value in self.deaths.get(position, ()):
            self.release_value(value)

    def release_value(self, value):
        register = self.register_of.get(value)
        if register is None or value in self.pinned or value in self.dead:
            return
        self.asm.drop(register, line=self.line)
        self.free_registers.append(register)
        self.dead.add(value)

    def release_block_locals(self, block):
        """Values made in `block` whose last reader is its return."""
        end = self.position[block.owning_node][1] - 1
        for value in block.returns:
            if self.last_use.get(value) == end and _defined_in(value, block):
                self.release_value(value)

    # -- the walk ---------------------------------------------------------------------
    def run(self):
        self.compute_liveness()
        self.dead = set()
        for value, position in self.last_use.items():
            self.deaths.setdefault(position, []).append(value)
        for param in self.graph.inputs:
            self.define(param)
        self.load_constants()
        for param in self.graph.inputs:
            if param not in self.last_use:
                self.release_value(param)
        self.lower_block(self.graph.block)
        self.line = 0
        self.asm.ret([self.reg(v) for v in self.graph.outputs])
        program = self.asm.finish()
        program.nargs = len(self.graph.inputs)
        program.nregs = max(self.nregs, program.nargs)
        program.arg_names = tuple(v.debug_name or f"arg{i}"
                                  for i, v in enumerate(self.graph.inputs))
        return program

    def constant_object(self, value):
        """One object per distinct constant, so the Assembler's identity
        check shares it."""
        return self.constant_objects.setdefault(_constant_key(value), value)

    def load_constants(self):
        """The prologue: every constant of the graph (fallback code of fused
        groups included) in a register of its own for the whole run."""
        registers = {}
        for node in self.graph.all_nodes():
            if node.kind in ("prim::Constant", "prim::Uninitialized"):
                # an Uninitialized value (on a path that always raises or
                # returns early) is a None nobody reads
                value = node.attrs["value"] if node.kind == "prim::Constant" else None
                self.register_of[node.output] = self.constant_register(value, registers)
                self.pinned.add(node.output)
            for inner in _fusion_constants(node):
                self.constant_register(inner.attrs["value"], registers)
        self.prologue_registers = registers

    def constant_register(self, value, registers):
        obj = self.constant_object(value)
        key = _constant_key(obj)
        if key not in registers:
            registers[key] = self.new_register()
            self.asm.load_const(registers[key], obj)
        return registers[key]

    def lower_block(self, block):
        for node in block.nodes:
            if node.source_range is not None:
                self.line = node.source_range.lineno
            self.lower_node(node)
            self.release_dead(self.position[node][0])
            self.release_dead(self.position[node][1])
            for out in node.outputs:
                if out not in self.last_use:
                    self.release_value(out)  # never read

    def lower_node(self, node):
        kind = node.kind
        if kind in ("prim::Constant", "prim::Uninitialized"):
            return  # loaded by the prologue
        if kind == "prim::If":
            return self.lower_if(node)
        if kind == "prim::Loop":
            return self.lower_loop(node)
        if kind == "prim::FusionGroup":
            return self.lower_fusion_group(node)
        if kind == "prim::RaiseException":
            cls = _exception_class(node.attrs["exception"])
            message = self.reg(node.inputs[0]) if node.inputs else None
            self.asm.raise_(cls, message, line=self.line)
            return
        if kind in ("prim::TupleUnpack", "prim::ListUnpack"):
            registers = [self.define(out) for out in node.outputs]
            self.asm.unpack(registers, self.reg(node.inputs[0]), line=self.line)
            return
        if node.callee is None:
            raise ScriptError(f"cannot lower a {kind} node", node.source_range)
        self.lower_call(node)

    def emit_call(self, dst, callee, args, kwnames):
        kwnames = tuple(kwnames)
        site = self.asm.callsite(callee, resolve(callee), len(args),
                                 kwnames or None)
        offset = self.asm.span(args)
        self.asm.emit(Op.CALL, -1 if dst is None else dst, site, offset, line=self.line)

    def lower_call(self, node):
        args = [self.reg(v) for v in node.inputs]
        if node.outputs and node.outputs[0] in self.last_use:
            dst = self.define(node.outputs[0])
        else:
            dst = None
            self.pinned.update(node.outputs)  # never materialised
        self.emit_call(dst, node.callee, args, node.kwnames)

    def move_returns(self, block, targets):
        for value, target in zip(block.returns, targets):
            if self.reg(value) != target:
                self.asm.move(target, self.reg(value), line=self.line)
        self.release_block_locals(block)

    def lower_if(self, node):
        targets = [self.define(out) for out in node.outputs]
        otherwise, end = self.asm.label(), self.asm.label()
        self.asm.jump_if_false(self.reg(node.inputs[0]), otherwise, line=self.line)
        self.lower_block(node.blocks[0])
        self.move_returns(node.blocks[0], targets)
        self.asm.jump(end, line=self.line)
        self.asm.bind(otherwise)
        self.lower_block(node.blocks[1])
        self.move_returns(node.blocks[1], targets)
        self.asm.bind(end)

    def lower_loop(self, node):
        body = node.blocks[0]
        line = self.line
        max_trip, start_cond, inits = node.inputs[0], node.inputs[1], node.inputs[2:]
        counter = self.new_register()
        self.asm.load_const(counter, self.constant_object(0), line=line)
        self.register_of[body.params[0]] = counter
        checks_cond = not (_is_true_constant(start_cond)
                           and _is_true_constant(body.returns[0]))
        cond = None
        if checks_cond:
            cond = self.new_register()
            self.asm.move(cond, self.reg(start_cond), line=line)
        carried = []
        for init, param, out in zip(inits, body.params[1:], node.outputs):
            # param, output and carried value share the register; the
            # output's death releases it (the params are pinned: the end of
            # the body writes the register again)
            register = self.new_register()
            self.asm.move(register, self.reg(init), line=line)
            self.register_of[param] = register
            self.register_of[out] = register
            carried.append(register)
        self.pinned.update(body.params)
        top, exit_ = self.asm.label(), self.asm.label()
        self.asm.bind(top)
        self.asm.loop_test(counter, self.reg(max_trip), exit_, line=line)
        if checks_cond:
            self.asm.jump_if_false(cond, exit_, line=line)
        self.lower_block(body)
        self.line = line
        self.parallel_move(list(body.returns[1:]), carried)
        if checks_cond and self.reg(body.returns[0]) != cond:
            self.asm.move(cond, self.reg(body.returns[0]), line=line)
        self.release_block_locals(body)
        self.asm.inc(counter, line=line)
        self.asm.jump(top, line=line)
        self.asm.bind(exit_)
        for register in (counter, cond):
            if register is not None:
                self.asm.drop(register, line=line)
                self.free_registers.append(register)

    def parallel_move(self, sources, targets):
        """targets[k] <- sources[k] for all k at once: a source that is
        also a target still to be written goes through a temporary."""
        pending = [(t, self.reg(s)) for s, t in zip(sources, targets)
                   if self.reg(s) != t]
        written = {t for t, _ in pending}
        staged, temps = [], []
        for target, source in pending:
            if source in written:
                temp = self.new_register()
                self.asm.move(temp, source, line=self.line)
                temps.append(temp)
                source = temp
            staged.append((target, source))
        for target, source in staged:
            self.asm.move(target, source, line=self.line)
        for temp in temps:
            self.asm.drop(temp, line=self.line)
            self.free_registers.append(temp)

    def lower_fusion_group(self, node):
        subgraph = node.attrs["subgraph"]
        targets = [self.define(out) for out in node.outputs]
        spec = self.kernel_spec(subgraph) if self.kernel_spec is not None \
            and hasattr(_C, "FusedKernel") else None
        if spec is None:
            self.lower_fallback(node, subgraph, targets)
            return
        ninputs, instructions, outputs, name = spec
        kernel = _C.FusedKernel(ninputs, instructions, outputs, name=name)
        self.fused_specs.append(spec)
        fallback, done = self.asm.label(), self.asm.label()
        self.asm.fused(kernel, [self.reg(v) for v in node.inputs], targets,
                       fallback, line=self.line)
        self.asm.jump(done, line=self.line)
        self.asm.bind(fallback)
        self.lower_fallback(node, subgraph, targets)
        self.asm.bind(done)

    def lower_fallback(self, node, subgraph, targets):
        """The group's own nodes, run one by one (when the kernel's guard
        fails: other dtypes, autograd, shapes that do not broadcast).  Each
        temporary is dropped after its last reader, as everywhere else: an
        intermediate after the last call that reads it, a group output after
        the MOVE into the group's register."""
        registers = dict(zip(subgraph.inputs, (self.reg(v) for v in node.inputs)))
        nodes = subgraph.block.nodes
        last_reader = {}
        for index, inner in enumerate(nodes):
            for value in inner.inputs:
                last_reader[value] = index
        outputs = set(subgraph.outputs)
        temporaries = {}   # value -> its register, while it holds one
        for index, inner in enumerate(nodes):
            if inner.kind == "prim::Constant":
                key = _constant_key(self.constant_object(inner.attrs["value"]))
                registers[inner.output] = self.prologue_registers[key]
                continue
            register = self.new_register()
            self.emit_call(register, inner.callee,
                           [registers[v] for v in inner.inputs], inner.kwnames)
            registers[inner.output] = temporaries[inner.output] = register
            for value in list(temporaries):
                if value not in outputs and last_reader.get(value, index) <= index:
                    self.drop_temporary(temporaries.pop(value))
        for index, (out, target) in enumerate(zip(subgraph.outputs, targets)):
            self.asm.move(target, registers[out], line=self.line)
            if out in temporaries and out not in subgraph.outputs[index + 1:]:
                self.drop_temporary(temporaries.pop(out))

    def drop_temporary(self, register):
        self.asm.drop(register, line=self.line)
        self.free_registers.append(register)


def _fusion_constants(node):
    if node.kind != "prim::FusionGroup":
        return ()
    return [n for n in node.attrs["subgraph"].block.nodes if n.kind == "prim::Constant"]


def _exception_class(name):
    for cls in bytecode.RAISE_KINDS:
        if cls.__name__ == name:
            return cls
    raise ScriptError(f"cannot raise {name}")


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


def lower(graph, kernel_spec=None):
    """The bytecode Program for `graph`, and the specs of its fused kernels
    (kernel_spec(subgraph) -> (ninputs, instructions, outputs, name))."""
    lowering = Lowering(graph, kernel_spec)
    return lowering.run(), lowering.fused_specs
