"""ember.jit's register bytecode: building, listing, checking and running it.

Note [The register bytecode]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A compiled function is a `Program`: a list of instructions `(op, a, b, c)`
over numbered registers, plus the tables they index (JIT_SPEC.md section B):

  constants   values LOAD_CONST copies into a register
  callsites   `Callsite(name, callable, nargs, kwnames)`: what CALL runs
  fused       fused kernels (a FusedKernel, or `(callable, ninputs,
              noutputs)`): FUSED runs one, or jumps to the unfused code
              when the kernel returns None (its guard failed)
  operands    register lists, addressed by an offset word of the instruction
              and a count (call arguments, UNPACK targets, kernel inputs then
              outputs, RETURN values)
  lines       the source line of each instruction (0 = unknown)

Registers 0..nargs-1 hold the arguments when a call starts; the others start
empty.  `Program.to_c()` builds the `ember._C.Code` that runs it (the C VM in
c/python/JitVM.c); `run_reference` runs it in Python with the same semantics,
messages and error notes, for differential tests.

The opcode numbers, the kind of each operand word and the RAISE exception
classes come from the C module (`_C._jit_opcodes()` and friends): the C
X-macro is their single source.

Example: `x = x + 1.0` a hundred times (`Assembler` writes it):

       0  LOAD_CONST    r1 <- 0
       1  LOAD_CONST    r2 <- 100
       2  LOAD_CONST    r3 <- 1.0
       3  LOOP_TEST     r1 >= r2 ? ->7
       4  CALL          r0 <- aten::add(r0, r3)
       5  INC           r1
       6  JUMP          ->3
       7  RETURN        r0
"""

import array
import dataclasses
import enum
import reprlib

from .. import _C

__all__ = ["Op", "RAISE_KINDS", "BytecodeError", "Callsite", "Program", "flow_effects",
           "Assembler", "Label", "run_reference", "fused_arity"]

Op = enum.IntEnum("Op", _C._jit_opcodes())
Op.__doc__ = "The VM's opcodes, numbered as in c/python/JitVM.c."

# Op -> the kind of its operand words a, b, c ("reg", "target", "offset", ...).
OPERAND_KINDS = {Op[name]: kinds for name, kinds in _C._jit_operand_kinds().items()}

# The exception classes RAISE raises, indexed by its kind operand.
RAISE_KINDS = _C._jit_raise_kinds()

# Registers per call allowed by the C VM (THP_JIT_MAX_REGS).
MAX_REGS = 65536
INT32_MAX = 2**31 - 1


class BytecodeError(ValueError):
    """A Program that breaks a rule of the bytecode (see Program.verify)."""


@dataclasses.dataclass(frozen=True)
class Callsite:
    """What one CALL runs: `callable(*args[:-len(kwnames)], **keywords)`.

    `name` is only for listings ("aten::add"); `nargs` counts positional and
    keyword arguments, the keyword ones last.
    """

    name: str
    callable: object
    nargs: int
    kwnames: tuple = None

    @property
    def npositional(self):
        return self.nargs - len(self.kwnames or ())

    def as_c(self):
        """The (callable, nargs, kwnames) triple _C.Code takes."""
        return (self.callable, self.nargs, self.kwnames)


def fused_arity(entry):
    """(callable, ninputs, noutputs) of a fused-table entry: a FusedKernel
    (attributes ninputs/noutputs) or a (callable, ninputs, noutputs) tuple."""
    if type(entry) is tuple and len(entry) == 3:
        return entry
    return entry, entry.ninputs, entry.noutputs


def _int32_bytes(words):
    data = array.array("i", words)
    assert data.itemsize == 4, "the bytecode is int32; array('i') is not here"
    return data.tobytes()


@dataclasses.dataclass
class Program:
    """A function in register bytecode (Note [The register bytecode])."""

    name: str
    nargs: int
    nregs: int
    instructions: list = dataclasses.field(default_factory=list)
    operands: list = dataclasses.field(default_factory=list)
    constants: list = dataclasses.field(default_factory=list)
    callsites: list = dataclasses.field(default_factory=list)
    fused: list = dataclasses.field(default_factory=list)
    lines: list = None
    arg_names: tuple = None

    def line_of(self, pc):
        """The source line of instruction `pc` (0 = unknown)."""
        if self.lines is None or not 0 <= pc < len(self.lines):
            return 0
        return self.lines[pc]

    def to_c(self):
        """The ember._C.Code running this program (the C constructor checks
        the structure again; verify() first gives clearer messages)."""
        return _C.Code(
            _int32_bytes(word for ins in self.instructions for word in ins),
            _int32_bytes(self.operands), self.nregs, self.nargs,
            tuple(self.constants), tuple(cs.as_c() for cs in self.callsites),
            tuple(self.fused),
            None if self.lines is None else _int32_bytes(self.lines),
            self.name)

    def verify(self):
        """Raises BytecodeError unless the program is well formed.

        The structural checks are the C constructor's, with the same
        messages; then a dataflow over the control-flow graph checks that
        every register is written before it is read on every path, and that
        no path runs off the end of the code.
        """
        _check_structure(self)
        _check_flow(self)

    def format(self):
        """A readable listing, one line per instruction."""
        return _format_program(self)

    def __str__(self):
        return self.format()


# ---- structural checks (the C constructor's, same messages) ---------------------


def _fail(program, message):
    raise BytecodeError(f"Code '{program.name}': {message}")


def _check_structure(p):
    if not 0 <= p.nregs <= MAX_REGS:
        _fail(p, f"nregs must be between 0 and {MAX_REGS}, got {p.nregs}")
    if not 0 <= p.nargs <= p.nregs:
        _fail(p, f"nargs must be between 0 and nregs ({p.nregs}), got {p.nargs}")
    if p.arg_names is not None and len(p.arg_names) != p.nargs:
        _fail(p, f"{len(p.arg_names)} argument names for {p.nargs} arguments")
    if p.lines is not None and len(p.lines) != len(p.instructions):
        _fail(p, f"lines has {4 * len(p.lines)} bytes, expected "
                 f"{4 * len(p.instructions)} (one int32 per instruction)")
    for i, site in enumerate(p.callsites):
        _check_callsite(p, i, site)
    for i, entry in enumerate(p.fused):
        _check_kernel(p, i, entry)
    for i, reg in enumerate(p.operands):
        if not 0 <= reg < p.nregs:
            _fail(p, f"operand {i} is register {reg}, out of range [0, {p.nregs})")
    for pc, ins in enumerate(p.instructions):
        _check_instruction(p, pc, ins)


def _check_arity(p, table, index, what, value):
    if not isinstance(value, int) or isinstance(value, bool):
        _fail(p, f"{table} {index}: {what} must be an int, got "
                 f"'{type(value).__name__}'")
    if not 0 <= value <= INT32_MAX:
        _fail(p, f"{table} {index}: {what} {value!r} out of range [0, 2**31)")


def _check_callsite(p, i, site):
    if not isinstance(site, Callsite):
        _fail(p, f"callsite {i} must be a Callsite, got '{type(site).__name__}'")
    if not callable(site.callable):
        _fail(p, f"callsite {i}: '{type(site.callable).__name__}' object is not callable")
    _check_arity(p, "callsite", i, "nargs", site.nargs)
    kwnames = site.kwnames
    if kwnames is None:
        return
    if type(kwnames) is not tuple:
        _fail(p, f"callsite {i}: kwnames must be None or a tuple of str, "
                 f"got '{type(kwnames).__name__}'")
    for k, name in enumerate(kwnames):
        if type(name) is not str:
            _fail(p, f"callsite {i}: kwnames must be None or a tuple of str, "
                     f"got an item of type '{type(name).__name__}'")
        if name in kwnames[:k]:
            _fail(p, f"callsite {i}: duplicate keyword name {name!r}")
    if len(kwnames) > site.nargs:
        _fail(p, f"callsite {i}: {len(kwnames)} keyword names for {site.nargs} arguments")


def _check_kernel(p, i, entry):
    try:
        kernel, ninputs, noutputs = fused_arity(entry)
    except AttributeError:
        _fail(p, f"fused {i} must be a (callable, ninputs, noutputs) tuple or "
                 f"have int attributes ninputs and noutputs, got "
                 f"'{type(entry).__name__}'")
    if not callable(kernel):
        _fail(p, f"fused {i}: '{type(kernel).__name__}' object is not callable")
    _check_arity(p, "fused", i, "ninputs", ninputs)
    _check_arity(p, "fused", i, "noutputs", noutputs)


def _operand_limit(p, kind):
    """(what, exclusive upper bound) of an operand word of this kind."""
    return {
        "reg": ("register", p.nregs),
        "reg_or_none": ("register (or -1)", p.nregs),
        "const": ("constant index", len(p.constants)),
        "callsite": ("callsite index", len(p.callsites)),
        "fused": ("fused index", len(p.fused)),
        "offset": ("operand offset", len(p.operands) + 1),
        "count": ("count", INT32_MAX),
        "target": ("jump target", len(p.instructions) + 1),
        "raise_kind": ("raise kind", len(RAISE_KINDS)),
    }[kind]


def _check_instruction(p, pc, ins):
    if len(ins) != 4 or not all(isinstance(w, int) and not isinstance(w, bool)
                                for w in ins):
        _fail(p, f"instruction {pc}: expected 4 int words, got {ins!r}")
    if ins[0] not in Op._value2member_map_:
        _fail(p, f"instruction {pc}: unknown opcode {ins[0]}")
    op = Op(ins[0])
    for which, value, kind in zip("abc", ins[1:], OPERAND_KINDS[op]):
        if kind == "unused":
            if value != 0:
                _fail(p, f"instruction {pc} ({op.name}): unused operand {which} "
                         f"must be 0, got {value}")
            continue
        if kind == "reg_or_none" and value == -1:
            continue
        what, limit = _operand_limit(p, kind)
        if not 0 <= value < limit:
            _fail(p, f"instruction {pc} ({op.name}): {what} {value} in operand "
                     f"{which} out of range [0, {limit})")
    span = _span(p, op, ins)
    if span is not None:
        offset, count = span
        if offset + count > len(p.operands):
            _fail(p, f"instruction {pc} ({op.name}): operands [{offset}, "
                     f"{offset + count}) run past the end of operands "
                     f"({len(p.operands)} words)")


def _span(p, op, ins):
    """(offset, count) of the register list an instruction uses, or None."""
    _, a, b, c = ins
    if op == Op.CALL:
        return c, p.callsites[b].nargs
    if op == Op.UNPACK:
        return a, c
    if op == Op.FUSED:
        _, ninputs, noutputs = fused_arity(p.fused[a])
        return b, ninputs + noutputs
    if op == Op.RETURN:
        return a, b
    return None


# ---- flow checks: definite assignment, no falling off the end ----------------------


def flow_effects(p, pc):
    """(registers read, [(successor, registers written, registers emptied)])
    of instruction `pc`; successor len(instructions) is the end."""
    op, a, b, c = p.instructions[pc]
    op, nxt = Op(op), pc + 1
    ops = p.operands
    if op == Op.LOAD_CONST:
        return (), [(nxt, (a,), ())]
    if op == Op.MOVE:
        return (b,), [(nxt, (a,), ())]
    if op == Op.CALL:
        args = ops[c:c + p.callsites[b].nargs]
        return args, [(nxt, (a,) if a >= 0 else (), ())]
    if op == Op.UNPACK:
        return (b,), [(nxt, ops[a:a + c], ())]
    if op == Op.JUMP:
        return (), [(a, (), ())]
    if op in (Op.JUMP_IF_FALSE, Op.JUMP_IF_TRUE):
        return (a,), [(nxt, (), ()), (b, (), ())]
    if op == Op.LOOP_TEST:
        return (a, b), [(nxt, (), ()), (c, (), ())]
    if op == Op.INC:
        return (a,), [(nxt, (a,), ())]
    if op == Op.FUSED:
        _, ninputs, noutputs = fused_arity(p.fused[a])
        inputs, outputs = ops[b:b + ninputs], ops[b + ninputs:b + ninputs + noutputs]
        return inputs, [(nxt, outputs, ()), (c, (), ())]  # outputs only on success
    if op == Op.DROP:
        return (), [(nxt, (), (a,))]
    if op == Op.RETURN:
        return ops[a:a + b], []
    if op == Op.RAISE:
        return (b,) if b >= 0 else (), []
    raise AssertionError(f"no flow rule for {op.name}")  # a new opcode in C


def _check_flow(p):
    n = len(p.instructions)
    if n == 0:
        _fail(p, "the code is empty (it must end in RETURN or RAISE)")
    # written[pc]: the registers written on every path to pc (None: no path).
    written = [None] * n
    written[0] = frozenset(range(p.nargs))
    work = [0]
    while work:
        pc = work.pop()
        for succ, writes, empties in flow_effects(p, pc)[1]:
            if succ == n:
                _fail(p, f"instruction {pc} ({Op(p.instructions[pc][0]).name}) "
                         f"can run off the end of the code (no RETURN or RAISE)")
            out = (written[pc] | frozenset(writes)) - frozenset(empties)
            merged = out if written[succ] is None else written[succ] & out
            if merged != written[succ]:
                written[succ] = merged
                work.append(succ)
    for pc in range(n):
        if written[pc] is None:
            continue  # unreachable: never runs
        for reg in flow_effects(p, pc)[0]:
            if reg not in written[pc]:
                _fail(p, f"instruction {pc} ({Op(p.instructions[pc][0]).name}): "
                         f"register r{reg} may be read before it is written "
                         f"(or after DROP)")


# ---- listing ----------------------------------------------------------------------

_short = reprlib.Repr()
_short.maxstring = 40
_short.maxother = 40


def _regs(regs):
    return ", ".join(f"r{r}" for r in regs)


def _describe(p, pc):
    """The operands of instruction `pc`, as the listing shows them."""
    op, a, b, c = p.instructions[pc]
    op, ops = Op(op), p.operands
    if op == Op.LOAD_CONST:
        return f"r{a} <- {_short.repr(p.constants[b])}"
    if op == Op.MOVE:
        return f"r{a} <- r{b}"
    if op == Op.CALL:
        site = p.callsites[b]
        args = [f"r{r}" for r in ops[c:c + site.npositional]]
        args += [f"{k}=r{r}" for k, r in zip(site.kwnames or (),
                                              ops[c + site.npositional:c + site.nargs])]
        call = f"{site.name}({', '.join(args)})"
        return f"r{a} <- {call}" if a >= 0 else f"{call}  (result dropped)"
    if op == Op.UNPACK:
        return f"{_regs(ops[a:a + c])} <- *r{b}"
    if op == Op.JUMP:
        return f"->{a}"
    if op in (Op.JUMP_IF_FALSE, Op.JUMP_IF_TRUE):
        return f"r{a}, ->{b}"
    if op == Op.LOOP_TEST:
        return f"r{a} >= r{b} ? ->{c}"
    if op in (Op.INC, Op.DROP):
        return f"r{a}"
    if op == Op.FUSED:
        kernel, ninputs, noutputs = fused_arity(p.fused[a])
        name = getattr(kernel, "name", None) or f"fused{a}"
        inputs = _regs(ops[b:b + ninputs])
        return (f"{_regs(ops[b + ninputs:b + ninputs + noutputs])} <- "
                f"{name}({inputs}) else ->{c}")
    if op == Op.RETURN:
        return _regs(ops[a:a + b]) if b == 1 else f"({_regs(ops[a:a + b])})"
    if op == Op.RAISE:
        return f"{RAISE_KINDS[a].__name__}({'' if b < 0 else f'r{b}'})"
    raise AssertionError(f"no listing rule for {op.name}")


def _format_program(p):
    names = p.arg_names or [f"arg{i}" for i in range(p.nargs)]
    params = ", ".join(f"r{i}: {name}" for i, name in enumerate(names))
    out = [f"def {p.name}({params}):  # {p.nregs} registers"]
    for pc, ins in enumerate(p.instructions):
        name = Op(ins[0]).name if ins[0] in Op._value2member_map_ else f"?{ins[0]}"
        try:
            body = _describe(p, pc)
        except (IndexError, KeyError, ValueError, TypeError, AttributeError):
            body = f"<malformed: {ins!r}>"
        line = p.line_of(pc)
        text = f"{pc:4d}  {name:<13} {body}"
        out.append(f"{text:<50}  # line {line}" if line else text)
    return "\n".join(out)


# ---- building -----------------------------------------------------------------------


class Label:
    """A jump target not known yet: bind it with Assembler.bind."""

    __slots__ = ("pc",)

    def __init__(self):
        self.pc = None


class Assembler:
    """Writes a Program instruction by instruction.

    Registers come from `new_reg()`; jump targets are ints or Labels bound
    later (`bind`).  Every emit takes the source `line` (0 = unknown).
    """

    def __init__(self, name, arg_names=()):
        self.program = Program(name=name, nargs=len(arg_names),
                               nregs=len(arg_names), lines=[],
                               arg_names=tuple(arg_names))
        self._labels = []  # (pc, word index, Label) to patch in finish()

    @property
    def here(self):
        """The index the next instruction will have."""
        return len(self.program.instructions)

    def new_reg(self):
        self.program.nregs += 1
        return self.program.nregs - 1

    def label(self):
        return Label()

    def bind(self, label):
        """Makes `label` point at the next instruction."""
        label.pc = self.here

    def emit(self, op, a=0, b=0, c=0, line=0):
        """Appends one instruction; returns its index."""
        words = [op, a, b, c]
        for i, word in enumerate(words[1:], 1):
            if isinstance(word, Label):
                self._labels.append((self.here, i, word))
                words[i] = 0
        self.program.instructions.append(tuple(int(w) for w in words))
        self.program.lines.append(line)
        return self.here - 1

    def span(self, regs):
        """Appends a register list to operands; returns its offset."""
        offset = len(self.program.operands)
        self.program.operands.extend(regs)
        return offset

    def constant(self, value):
        """The index of `value` in the constants (the same object once)."""
        for i, known in enumerate(self.program.constants):
            if known is value:
                return i
        self.program.constants.append(value)
        return len(self.program.constants) - 1

    def callsite(self, name, fn, nargs, kwnames=None):
        self.program.callsites.append(Callsite(name, fn, nargs, kwnames))
        return len(self.program.callsites) - 1

    # One method per opcode.
    def load_const(self, dst, value, line=0):
        return self.emit(Op.LOAD_CONST, dst, self.constant(value), line=line)

    def move(self, dst, src, line=0):
        return self.emit(Op.MOVE, dst, src, line=line)

    def call(self, dst, name, fn, args, kwargs=None, line=0):
        """dst = fn(*args, **kwargs) over registers; dst None drops the result."""
        kwargs = kwargs or {}
        site = self.callsite(name, fn, len(args) + len(kwargs),
                             tuple(kwargs) if kwargs else None)
        offset = self.span(list(args) + list(kwargs.values()))
        return self.emit(Op.CALL, -1 if dst is None else dst, site, offset, line=line)

    def unpack(self, dsts, src, line=0):
        return self.emit(Op.UNPACK, self.span(dsts), src, len(dsts), line=line)

    def jump(self, target, line=0):
        return self.emit(Op.JUMP, target, line=line)

    def jump_if_false(self, cond, target, line=0):
        return self.emit(Op.JUMP_IF_FALSE, cond, target, line=line)

    def jump_if_true(self, cond, target, line=0):
        return self.emit(Op.JUMP_IF_TRUE, cond, target, line=line)

    def loop_test(self, counter, trip, exit_target, line=0):
        return self.emit(Op.LOOP_TEST, counter, trip, exit_target, line=line)

    def inc(self, reg, line=0):
        return self.emit(Op.INC, reg, line=line)

    def fused(self, kernel, inputs, outputs, fallback, line=0):
        """outputs = kernel(*inputs), or jump to `fallback` when it returns None."""
        self.program.fused.append(kernel)
        offset = self.span(list(inputs) + list(outputs))
        return self.emit(Op.FUSED, len(self.program.fused) - 1, offset, fallback,
                         line=line)

    def drop(self, reg, line=0):
        return self.emit(Op.DROP, reg, line=line)

    def ret(self, regs, line=0):
        """Returns one register, or a tuple of several (a list of them)."""
        regs = [regs] if isinstance(regs, int) else list(regs)
        return self.emit(Op.RETURN, self.span(regs), len(regs), line=line)

    def raise_(self, exc_class, msg_reg=None, line=0):
        kind = RAISE_KINDS.index(exc_class)
        return self.emit(Op.RAISE, kind, -1 if msg_reg is None else msg_reg, line=line)

    def finish(self):
        """The Program, with every label resolved."""
        program = self.program
        for pc, word, label in self._labels:
            if label.pc is None:
                raise BytecodeError(f"instruction {pc}: a label that was never bound")
            ins = list(program.instructions[pc])
            ins[word] = label.pc
            program.instructions[pc] = tuple(ins)
        self._labels = []
        return program


# ---- the reference interpreter ---------------------------------------------------------

_EMPTY = object()  # an empty register (None is a value)


def _type_name(value):
    return type(value).__name__


def error_note(program, pc):
    """The PEP 678 note both VMs add to an exception raised at `pc`."""
    n = len(program.instructions)
    op = Op(program.instructions[pc][0]).name if pc < n else "END"
    line = program.line_of(pc)
    where = f"line {line}" if line > 0 else "line unknown"
    return (f"ember.jit: in scripted function '{program.name}', {where} "
            f"(instruction {pc}, {op})")


def run_reference(program, args):
    """Runs `program` on `args` in Python, as the C VM does: the same results,
    exception types, messages and notes.  Slow; for tests."""
    args = tuple(args)
    if len(args) != program.nargs:
        raise TypeError(f"{program.name}() takes {program.nargs} positional "
                        f"argument{'' if program.nargs == 1 else 's'} but "
                        f"{len(args)} {'was' if len(args) == 1 else 'were'} given")
    regs = list(args) + [_EMPTY] * (program.nregs - program.nargs)
    pc = 0
    try:
        while True:
            result, pc = _step(program, regs, pc)
            if result is not _EMPTY:
                return result
    except BaseException as exc:
        exc.add_note(error_note(program, pc))
        raise


def _read(regs, reg):
    value = regs[reg]
    if value is _EMPTY:
        raise RuntimeError(f"register r{reg} is empty (read before it was "
                           f"written, or after DROP)")
    return value


def _step(p, regs, pc):
    """Runs instruction `pc`: (returned value or _EMPTY, next pc)."""
    if pc == len(p.instructions):
        raise RuntimeError("reached the end of the code without RETURN")
    op, a, b, c = p.instructions[pc]
    op, ops, nxt = Op(op), p.operands, pc + 1
    if op == Op.LOAD_CONST:
        regs[a] = p.constants[b]
    elif op == Op.MOVE:
        regs[a] = _read(regs, b)
    elif op == Op.CALL:
        site = p.callsites[b]
        values = [_read(regs, r) for r in ops[c:c + site.nargs]]
        npos = site.npositional
        result = site.callable(*values[:npos],
                               **dict(zip(site.kwnames or (), values[npos:])))
        if a >= 0:
            regs[a] = result
    elif op == Op.UNPACK:
        _unpack(regs, _read(regs, b), ops[a:a + c])
    elif op == Op.JUMP:
        return _EMPTY, a
    elif op in (Op.JUMP_IF_FALSE, Op.JUMP_IF_TRUE):
        cond = _read(regs, a)
        if type(cond) is not bool:
            raise TypeError(f"{op.name}: the condition must be a bool, got "
                            f"'{_type_name(cond)}'")
        return _EMPTY, b if cond == (op == Op.JUMP_IF_TRUE) else nxt
    elif op == Op.LOOP_TEST:
        counter, trip = _read(regs, a), _read(regs, b)
        if not (isinstance(counter, int) and isinstance(trip, int)):
            raise TypeError(f"LOOP_TEST: counter and trip count must be ints, "
                            f"got '{_type_name(counter)}' and '{_type_name(trip)}'")
        return _EMPTY, c if counter >= trip else nxt
    elif op == Op.INC:
        value = _read(regs, a)
        if not isinstance(value, int):
            raise TypeError(f"INC: the register must hold an int, got "
                            f"'{_type_name(value)}'")
        regs[a] = value + 1
    elif op == Op.FUSED:
        if not _run_fused(p, regs, a, b):
            return _EMPTY, c
    elif op == Op.DROP:
        regs[a] = _EMPTY
    elif op == Op.RETURN:
        values = [_read(regs, r) for r in ops[a:a + b]]
        return (values[0] if b == 1 else tuple(values)), nxt
    elif op == Op.RAISE:
        cls = RAISE_KINDS[a]
        raise cls() if b < 0 else cls(_read(regs, b))
    return _EMPTY, nxt


def _unpack(regs, src, targets):
    if not isinstance(src, (tuple, list)):
        raise TypeError(f"UNPACK: expected a tuple or list, got '{_type_name(src)}'")
    items = tuple(src)
    if len(items) > len(targets):
        raise ValueError(f"too many values to unpack (expected {len(targets)})")
    if len(items) < len(targets):
        raise ValueError(f"not enough values to unpack (expected {len(targets)}, "
                         f"got {len(items)})")
    for reg, item in zip(targets, items):
        regs[reg] = item


def _run_fused(p, regs, index, offset):
    """Runs fused kernel `index`; False when its guard failed (None)."""
    kernel, ninputs, noutputs = fused_arity(p.fused[index])
    ops = p.operands
    result = kernel(*[_read(regs, r) for r in ops[offset:offset + ninputs]])
    if result is None:
        return False
    if not isinstance(result, tuple) or len(result) != noutputs:
        got = (f"a tuple of {len(result)}" if isinstance(result, tuple)
               else _type_name(result))
        raise TypeError(f"FUSED: kernel {index} must return a tuple of {noutputs} "
                        f"outputs or None, got {got}")
    for reg, value in zip(ops[offset + ninputs:offset + ninputs + noutputs], result):
        regs[reg] = value
    return True
