"""ember.jit.save / ember.jit.load: a compiled program as data.

Note [The program file]
~~~~~~~~~~~~~~~~~~~~~~~
A saved program is a safetensors file (the container ember.save writes:
python/ember/serialization.py), so its tensors are plain little-endian
blobs any safetensors reader can list.  The program itself is one JSON
document in the header's metadata, under the key "ember.jit":

    format, version       "ember.jit.program", 1
    name, arg_names,      the signature, with types as their printed names
    arg_types, defaults   ("Tensor", "List[int]") and defaults as constants
    nargs, nregs          the register file
    code                  [[opcode name, a, b, c], ...]
    operands, lines       int lists
    constants             tagged values: {"int": 3}, {"float": "0x1.8p+1"}
                          (hex: exact), {"bool": true}, {"str": ...},
                          {"none": null}, {"dtype": "float32"},
                          {"tensor": "constant.0"} (a tensor of the file),
                          {"slice": [...]}, {"tuple": [...]}, {"list": [...]},
                          {"ellipsis": null}
    callsites             [[callee, nargs, kwnames or null], ...]: callees
                          are names from ops.py's allowlist
    fused                 [[ninputs, instructions, outputs, name], ...]: each
                          rebuilt with _C.FusedKernel, which validates it
    state                 for a module: the names of the tensors "state.*"
                          passed before the arguments
    graph                 the optimised graph, printed, for people

Nothing in the file is ever executed as code: no pickle, no eval.  Loading
checks every field's type and range, resolves callees only through the
allowlist, rebuilds kernels through their validating constructor, and runs
the bytecode verifier (bytecode.Program.verify) before building the C Code
object, whose constructor checks the structure once more.  The strings a
prim.format call may take as its format are checked too: plain positional
fields only, no attribute or index chains (Note [Format strings in a
program] in ops.py).  Anything wrong raises ProgramFileError (a
ValueError) naming the problem.  What the file cannot promise -- that a
size is reasonable, that a loop ends -- is the running program's to
report: an absurd size raises as in eager mode, and the VM checks signals
on backward jumps, so a call can be interrupted.

The encoding is canonical (sorted keys, fixed separators, tensors named by
position), so save -> load -> save writes the same bytes.
"""

import json
import os

from .. import _C
from .. import serialization as container
from .._tensor import Tensor
from . import bytecode, ops
from . import types as T

FORMAT = "ember.jit.program"
VERSION = 1
METADATA_KEY = "ember.jit"
INT32_MIN, INT32_MAX = -2**31, 2**31 - 1
INT64_MIN, INT64_MAX = -2**63, 2**63 - 1


# The verifier's dataflow keeps a register set per instruction: a file
# with a long straight line over many registers would cost time and memory
# quadratic in its size (40,000 instructions over 20,000 registers ran out
# of memory).  Compiled programs stay far below this.
MAX_VERIFY_CELLS = 8_000_000


class ProgramFileError(ValueError):
    """A program file that is malformed, truncated or not ember's."""


# ---------------------------------------------------------------------------
# Constants


def encode_constant(value, tensors):
    """A JSON-able tagged form of a constant; tensors go into `tensors`."""
    if isinstance(value, Tensor):
        name = f"constant.{len(tensors)}"
        tensors[name] = value
        return {"tensor": name}
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, float):
        return {"float": value.hex()}
    if isinstance(value, str):
        return {"str": value}
    if value is None:
        return {"none": None}
    if value is Ellipsis:
        return {"ellipsis": None}
    if isinstance(value, _C.dtype):
        return {"dtype": str(value).replace("ember.", "")}
    if isinstance(value, slice):
        return {"slice": [encode_constant(v, tensors)
                          for v in (value.start, value.stop, value.step)]}
    if isinstance(value, tuple):
        return {"tuple": [encode_constant(v, tensors) for v in value]}
    if isinstance(value, list):
        return {"list": [encode_constant(v, tensors) for v in value]}
    raise ProgramFileError(f"cannot save a constant of type {type(value).__name__}")


_DTYPES = {name: getattr(_C, name) for name in (
    "bool", "uint8", "int8", "int16", "int32", "int64", "float32", "float64")}


def decode_constant(entry, tensors, depth=0):
    if depth > 32:
        raise ProgramFileError("constant nested too deeply")
    if not isinstance(entry, dict) or len(entry) != 1:
        raise ProgramFileError(f"malformed constant {_short(entry)}")
    (tag, payload), = entry.items()
    if tag == "tensor":
        if not isinstance(payload, str) or payload not in tensors:
            raise ProgramFileError(f"constant refers to a missing tensor {_short(payload)}")
        return tensors[payload]
    if tag == "bool" and isinstance(payload, bool):
        return payload
    if tag == "int" and type(payload) is int and INT64_MIN <= payload <= INT64_MAX:
        return payload
    if tag == "float" and isinstance(payload, str):
        try:
            return float.fromhex(payload)
        except (ValueError, OverflowError):
            raise ProgramFileError(f"malformed float constant {_short(payload)}") from None
    if tag == "str" and isinstance(payload, str):
        return payload
    if tag in ("none", "ellipsis") and payload is None:
        return None if tag == "none" else Ellipsis
    if tag == "dtype" and isinstance(payload, str) and payload in _DTYPES:
        return _DTYPES[payload]
    if tag == "slice" and isinstance(payload, list) and len(payload) == 3:
        return slice(*(decode_constant(v, tensors, depth + 1) for v in payload))
    if tag in ("tuple", "list") and isinstance(payload, list):
        items = [decode_constant(v, tensors, depth + 1) for v in payload]
        return tuple(items) if tag == "tuple" else items
    raise ProgramFileError(f"malformed constant {_short(entry)}")


def _short(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# ---------------------------------------------------------------------------
# Saving


def _document(saved):
    """The JSON document and tensors for a Saved description."""
    program = saved.program
    tensors = {}
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "name": program.name,
        "arg_names": list(saved.arg_names),
        "arg_types": [str(t) for t in saved.arg_types],
        "defaults": {k: encode_constant(v, tensors) for k, v in sorted(saved.defaults.items())},
        "nargs": program.nargs,
        "nregs": program.nregs,
        "code": [[bytecode.Op(ins[0]).name, *map(int, ins[1:])]
                 for ins in program.instructions],
        "operands": list(program.operands),
        "lines": list(program.lines or [0] * len(program.instructions)),
        "constants": [encode_constant(c, tensors) for c in program.constants],
        "callsites": [[cs.name, cs.nargs, list(cs.kwnames) if cs.kwnames else None]
                      for cs in program.callsites],
        "fused": [list(spec) for spec in saved.fused_specs],
        "state": list(saved.state_names),
        "graph": saved.graph_text,
    }
    for name, tensor in zip(saved.state_names, saved.state):
        tensors[f"state.{name}"] = tensor
    return doc, tensors


class Saved:
    """Everything a program file holds, from a compiled or a loaded function."""

    def __init__(self, program, fused_specs, arg_names, arg_types, defaults,
                 graph_text, state_names=(), state=()):
        self.program = program
        self.fused_specs = [tuple(s) for s in fused_specs]
        self.arg_names = list(arg_names)
        self.arg_types = list(arg_types)
        self.defaults = dict(defaults)
        self.graph_text = graph_text
        self.state_names = list(state_names)
        self.state = list(state)


def _saved_of(fn):
    from .function import ScriptFunction, ScriptModule
    if isinstance(fn, LoadedFunction):
        return fn._saved
    if isinstance(fn, ScriptModule):
        function = fn._function
        n_state = len(fn._state_names)
        compiled = function.generic
        params = function.parameters
        return Saved(compiled.program, compiled.fused_specs, params.names[n_state:],
                     params.types[n_state:], params.defaults, str(compiled.graph),
                     [n for n in fn._state_names], [t.detach() for t in fn._state()])
    if isinstance(fn, ScriptFunction):
        compiled = fn.generic
        params = fn.parameters
        return Saved(compiled.program, compiled.fused_specs, params.names,
                     params.types, params.defaults, str(compiled.graph))
    raise TypeError(f"ember.jit.save expects a scripted function or module, "
                    f"got {type(fn).__name__}")


def save_program(fn, f):
    doc, tensors = _document(_saved_of(fn))
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)
    metadata = {METADATA_KEY: text}
    tensors = {name: tensors[name].detach().contiguous() for name in sorted(tensors)}
    if isinstance(f, (str, bytes, os.PathLike)):
        container._write_atomically(os.fsdecode(f), tensors, metadata)
    else:
        container._write_stream(f, tensors, metadata)


# ---------------------------------------------------------------------------
# Loading


def _read(f):
    try:
        if isinstance(f, (str, bytes, os.PathLike)):
            with open(f, "rb") as stream:
                return container._read_tensors_and_metadata(*container._sized_stream(stream))
        return container._read_tensors_and_metadata(*container._sized_stream(f))
    except container.SafetensorsError as exc:
        raise ProgramFileError(f"not a readable program file: {exc}") from None


def _field(doc, name, kind, check=None):
    if name not in doc:
        raise ProgramFileError(f"program file lacks the field {name!r}")
    value = doc[name]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise ProgramFileError(f"field {name!r} has the wrong type "
                               f"({type(value).__name__})")
    if check is not None and not check(value):
        raise ProgramFileError(f"field {name!r} is out of range: {_short(value)}")
    return value


def _int_list(doc, name, low=INT32_MIN, high=INT32_MAX):
    values = _field(doc, name, list)
    for v in values:
        if type(v) is not int or not low <= v <= high:
            raise ProgramFileError(f"field {name!r} holds a bad entry {_short(v)}")
    return values


def _parse_types(names):
    types = []
    for text in names:
        if not isinstance(text, str):
            raise ProgramFileError(f"bad argument type {_short(text)}")
        try:
            types.append(T.parse_type(text))
        except (ValueError, TypeError, RecursionError):
            raise ProgramFileError(f"unknown argument type {_short(text)}") from None
    return types


def _decode_code(doc):
    code = []
    for entry in _field(doc, "code", list):
        if not (isinstance(entry, list) and len(entry) == 4 and isinstance(entry[0], str)
                and all(type(w) is int and INT32_MIN <= w <= INT32_MAX for w in entry[1:])):
            raise ProgramFileError(f"malformed instruction {_short(entry)}")
        if entry[0] not in bytecode.Op.__members__:
            raise ProgramFileError(f"unknown opcode {_short(entry[0])}")
        code.append((int(bytecode.Op[entry[0]]), *entry[1:]))
    return code


def _decode_callsites(doc):
    sites = []
    for entry in _field(doc, "callsites", list):
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)
                and type(entry[1]) is int and 0 <= entry[1] <= 255):
            raise ProgramFileError(f"malformed callsite {_short(entry)}")
        callee, nargs, kwnames = entry
        try:
            fn = ops.resolve(callee)
        except KeyError:
            raise ProgramFileError(f"unknown operator {_short(callee)}: not one a "
                                   f"script may call") from None
        if kwnames is not None:
            if not (isinstance(kwnames, list) and kwnames
                    and all(isinstance(k, str) and k.isidentifier() for k in kwnames)):
                raise ProgramFileError(f"malformed keyword names {_short(kwnames)}")
            kwnames = tuple(kwnames)
        sites.append(bytecode.Callsite(callee, fn, nargs, kwnames))
    return sites


def _decode_fused(doc):
    specs, kernels = [], []
    for entry in _field(doc, "fused", list):
        if not (isinstance(entry, list) and len(entry) == 4):
            raise ProgramFileError(f"malformed fused kernel {_short(entry)}")
        ninputs, instructions, outputs, name = entry
        try:
            instructions = [tuple(i) for i in instructions]
            kernel = _C.FusedKernel(ninputs, instructions, outputs, name=name)
        except (ValueError, TypeError, OverflowError) as exc:
            raise ProgramFileError(f"bad fused kernel: {exc}") from None
        specs.append((ninputs, instructions, outputs, name))
        kernels.append(kernel)
    return specs, kernels


def load_program(f):
    tensors, metadata = _read(f)
    if not metadata or METADATA_KEY not in metadata:
        raise ProgramFileError("not an ember.jit program file (no 'ember.jit' metadata)")
    try:
        doc = json.loads(metadata[METADATA_KEY])
    except (ValueError, RecursionError):
        raise ProgramFileError("the program's JSON is malformed") from None
    if not isinstance(doc, dict):
        raise ProgramFileError("the program's JSON is not an object")
    if doc.get("format") != FORMAT:
        raise ProgramFileError(f"not an ember.jit program (format {_short(doc.get('format'))})")
    if doc.get("version") != VERSION:
        raise ProgramFileError(f"unsupported program version {_short(doc.get('version'))} "
                               f"(this ember reads version {VERSION})")
    name = _field(doc, "name", str)
    arg_names = _field(doc, "arg_names", list)
    if not all(isinstance(n, str) and n.isidentifier() for n in arg_names):
        raise ProgramFileError("malformed argument names")
    arg_types = _parse_types(_field(doc, "arg_types", list))
    if len(arg_types) != len(arg_names):
        raise ProgramFileError("argument names and types differ in number")
    defaults = {k: decode_constant(v, tensors)
                for k, v in _field(doc, "defaults", dict).items()}
    if not set(defaults) <= set(arg_names):
        raise ProgramFileError("a default names no argument")
    state_names = _field(doc, "state", list)
    if not all(isinstance(n, str) and f"state.{n}" in tensors for n in state_names):
        raise ProgramFileError("the module state refers to missing tensors")
    state = [tensors[f"state.{n}"] for n in state_names]
    nargs = _field(doc, "nargs", int, lambda v: v == len(arg_names) + len(state_names))
    nregs = _field(doc, "nregs", int, lambda v: nargs <= v <= 65536)
    code = _decode_code(doc)
    if len(code) * max(nregs, 1) > MAX_VERIFY_CELLS:
        raise ProgramFileError(f"the program is too large to verify: {len(code)} "
                               f"instructions over {nregs} registers (at most "
                               f"{MAX_VERIFY_CELLS} instruction-registers)")
    lines = _int_list(doc, "lines", 0, INT32_MAX)
    if len(lines) != len(code):
        raise ProgramFileError("one source line per instruction expected")
    constants = [decode_constant(c, tensors) for c in _field(doc, "constants", list)]
    specs, kernels = _decode_fused(doc)
    program = bytecode.Program(
        name=name, nargs=nargs, nregs=nregs, instructions=code,
        operands=_int_list(doc, "operands"), constants=constants,
        callsites=_decode_callsites(doc), fused=kernels, lines=lines,
        arg_names=tuple(state_names) + tuple(arg_names))
    try:
        program.verify()
        c_code = program.to_c()
    except ValueError as exc:
        raise ProgramFileError(f"the bytecode does not verify: {exc}") from None
    _check_format_strings(program)
    saved = Saved(program, specs, arg_names, arg_types, defaults,
                  _field(doc, "graph", str), state_names, state)
    return LoadedFunction(saved, c_code)


# Work (register entries copied) the format-string analysis may do before
# it leaves the check to prim.format's own, at run time.
_FORMAT_ANALYSIS_BUDGET = 200_000


def _constants_in_registers(program, tracked):
    """For each instruction, {register in `tracked`: the constant indices
    it may hold} when the instruction runs (None where no path reaches):
    a may-analysis over the control-flow graph (LOAD_CONST and MOVE carry
    constants; any other write forgets them).  None when it would take more
    than _FORMAT_ANALYSIS_BUDGET steps (a file built to be slow to check)."""
    Op = bytecode.Op
    n = len(program.instructions)
    states = [None] * n
    states[0] = {}
    work, spent = [0], 0
    while work:
        pc = work.pop()
        op, a, b, _ = program.instructions[pc]
        state = states[pc]
        for successor, written, emptied in bytecode.flow_effects(program, pc)[1]:
            spent += len(state) + 1
            if spent > _FORMAT_ANALYSIS_BUDGET:
                return None
            after = {r: consts for r, consts in state.items()
                     if r not in written and r not in emptied}
            if op == Op.LOAD_CONST and a in tracked:
                after[a] = frozenset((b,))
            elif op == Op.MOVE and a in tracked and b in state:
                after[a] = state[b]
            if successor >= n:
                continue
            old = states[successor]
            if old is None:
                states[successor] = after
                work.append(successor)
                continue
            merged = dict(old)
            for r, consts in after.items():
                merged[r] = merged.get(r, frozenset()) | consts
            if merged != old:
                states[successor] = merged
                work.append(successor)
    return states


def _check_format_strings(program):
    """Every constant a prim.format call may take as its format string is
    one a program may use (Note [Format strings in a program] in ops.py;
    prim.format checks whatever it is given again when it runs, so a
    string computed at run time, or a program too large to analyse here,
    is still checked)."""
    Op = bytecode.Op
    sites = {i for i, site in enumerate(program.callsites) if site.name == "prim.format"}
    calls = [(pc, ins) for pc, ins in enumerate(program.instructions)
             if ins[0] == Op.CALL and ins[2] in sites]
    if not calls:
        return
    for pc, (_, _, site, _) in calls:
        if program.callsites[site].nargs == 0:
            raise ProgramFileError(f"instruction {pc}: prim.format without a format string")
    tracked = {program.operands[offset] for _, (_, _, _, offset) in calls}
    moves = [(a, b) for op, a, b, _ in program.instructions if op == Op.MOVE]
    while True:  # and the registers moved into them, transitively
        more = {b for a, b in moves if a in tracked} - tracked
        if not more:
            break
        tracked |= more
    states = _constants_in_registers(program, tracked)
    if states is None:
        return
    for pc, (_, _, _, offset) in calls:
        if states[pc] is None:
            continue  # unreachable
        for index in sorted(states[pc].get(program.operands[offset], ())):
            try:
                ops.check_format_string(program.constants[index])
            except (ValueError, TypeError) as exc:
                raise ProgramFileError(f"instruction {pc}: bad format string "
                                       f"{_short(program.constants[index])}: {exc}") from None


class LoadedFunction:
    """A program read by ember.jit.load: runs without the original source."""

    def __init__(self, saved, c_code):
        from .function import Parameters
        self._saved = saved
        self._c_code = c_code
        self.__name__ = saved.program.name
        self.parameters = Parameters(saved.program.name, saved.arg_names,
                                     saved.arg_types, saved.defaults)

    def __call__(self, *args, **kwargs):
        args = self.parameters.bind(args, dict(kwargs))
        return self._c_code(*self._saved.state, *args)

    @property
    def code(self):
        return self._saved.program.format()

    @property
    def graph(self):
        """The optimised graph as printed when it was saved."""
        return self._saved.graph_text

    def __repr__(self):
        return f"<ember.jit loaded program {self.__name__}>"
