"""ember.jit program files: hostile, malformed and truncated files are
rejected with ProgramFileError (a ValueError); nothing crashes, nothing in
the file runs as code (Note [The program file] in jit/serialization.py)."""

import copy
import io
import json
import struct

import pytest

import ember
from ember import jit
from ember.jit.serialization import METADATA_KEY, ProgramFileError


def program(x, n: int):
    for i in range(n):
        x = x * 2 + i
    return x.relu() - 1


@pytest.fixture(scope="module")
def saved():
    """(raw bytes, JSON document, tensors) of a valid program file."""
    scripted = jit.script(program)
    buffer = io.BytesIO()
    jit.save(scripted, buffer)
    raw = buffer.getvalue()
    header_length = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + header_length])
    doc = json.loads(header["__metadata__"][METADATA_KEY])
    return raw, doc


def file_with(doc, raw_source=None, header_extra=None):
    """A safetensors file whose metadata holds `doc` (a dict, or a string
    put in verbatim) and no tensors."""
    text = doc if isinstance(doc, str) else json.dumps(doc)
    header = {"__metadata__": {METADATA_KEY: text}}
    if header_extra:
        header.update(header_extra)
    blob = json.dumps(header).encode()
    return io.BytesIO(struct.pack("<Q", len(blob)) + blob)


def mutated(doc, **changes):
    doc = copy.deepcopy(doc)
    doc.update(changes)
    return doc


def test_valid_file_loads_and_runs(saved):
    raw, doc = saved
    loaded = jit.load(io.BytesIO(raw))
    x = ember.tensor([1.0, -2.0])
    assert loaded(x, 3).tolist() == program(x, 3).tolist()
    assert jit.load(file_with(doc))(x, 0).tolist() == program(x, 0).tolist()


def test_truncated_files(saved):
    raw, _ = saved
    for cut in (0, 4, 8, 20, len(raw) // 2, len(raw) - 1):
        with pytest.raises(ProgramFileError):
            jit.load(io.BytesIO(raw[:cut]))


def test_not_a_program(saved, tmp_dir):
    ember.save({"w": ember.ones(2)}, tmp_dir / "weights.safetensors")
    with pytest.raises(ProgramFileError, match="not an ember.jit program file"):
        jit.load(tmp_dir / "weights.safetensors")
    with pytest.raises(ProgramFileError, match="JSON is malformed"):
        jit.load(file_with("{not json"))
    with pytest.raises(ProgramFileError, match="not an object"):
        jit.load(file_with("[1, 2]"))


def _cases(doc):
    code = doc["code"]
    first_call = next(i for i, ins in enumerate(code) if ins[0] == "CALL")
    jump = next(i for i, ins in enumerate(code) if ins[0] == "JUMP")

    def with_instruction(index, instruction):
        new_code = copy.deepcopy(code)
        new_code[index] = instruction
        return mutated(doc, code=new_code)

    call = code[first_call]
    yield "format", mutated(doc, format="pickle"), "not an ember.jit program"
    yield "version", mutated(doc, version=99), "unsupported program version"
    yield "missing field", {k: v for k, v in doc.items() if k != "nregs"}, "lacks the field"
    yield "bad opcode", with_instruction(0, ["EXEC", 0, 0, 0]), "unknown opcode"
    yield "opcode type", with_instruction(0, [7, 0, 0, 0]), "malformed instruction"
    yield "short instruction", with_instruction(0, ["MOVE", 0, 0]), "malformed instruction"
    yield "register out of range", with_instruction(first_call, ["CALL", 10**6, *call[2:]]), \
        "does not verify"
    yield "negative register", with_instruction(0, ["MOVE", -5, 0, 0]), "does not verify"
    yield "constant index", with_instruction(0, ["LOAD_CONST", 2, 999, 0]), "does not verify"
    yield "callsite index", with_instruction(first_call, ["CALL", call[1], 999, call[3]]), \
        "does not verify"
    yield "operand offset", with_instruction(first_call, ["CALL", call[1], call[2], 10**6]), \
        "does not verify"
    yield "jump outside", with_instruction(jump, ["JUMP", 10**6, 0, 0]), "does not verify"
    yield "jump negative", with_instruction(jump, ["JUMP", -1, 0, 0]), "does not verify"
    yield "word too large", with_instruction(0, ["MOVE", 2**40, 0, 0]), "malformed instruction"
    yield "no return", mutated(doc, code=code[:-1], lines=doc["lines"][:-1]), "does not verify"
    yield "lines", mutated(doc, lines=doc["lines"][:-1]), "one source line per instruction"
    yield "nregs", mutated(doc, nregs=10**9), "out of range"
    yield "nargs", mutated(doc, nargs=7), "out of range"
    yield "os.system", mutated(doc, callsites=[["os.system", 1, None]] + doc["callsites"][1:]), \
        "unknown operator"
    yield "eval", mutated(doc, callsites=[["builtins.eval", 1, None]] + doc["callsites"][1:]), \
        "unknown operator"
    yield "ember.save", mutated(doc, callsites=[["ember.save", 2, None]] + doc["callsites"][1:]), \
        "unknown operator"
    yield "dunder", mutated(doc, callsites=[["Tensor.__reduce_ex__", 2, None]]
                            + doc["callsites"][1:]), "unknown operator"
    yield "kwnames", mutated(doc, callsites=[[doc["callsites"][0][0], 2, ["a b"]]]
                             + doc["callsites"][1:]), "malformed keyword names"
    yield "callsite arity", mutated(doc, callsites=[[doc["callsites"][0][0], 300, None]]
                                    + doc["callsites"][1:]), "malformed callsite"
    yield "constant tag", mutated(doc, constants=[{"pickle": "cos\nsystem"}]), "malformed constant"
    yield "constant tensor", mutated(doc, constants=[{"tensor": "nope"}]), "missing tensor"
    yield "constant float", mutated(doc, constants=[{"float": "0xZZ"}]), "malformed float"
    yield "constant depth", mutated(doc, constants=[_nested(100)]), "nested too deeply"
    yield "dtype", mutated(doc, constants=[{"dtype": "object"}]), "malformed constant"
    yield "arg type", mutated(doc, arg_types=["Tensor", "os.system"]), "unknown argument type"
    yield "arg names", mutated(doc, arg_names=["x", "import os"]), "malformed argument names"
    yield "defaults", mutated(doc, defaults={"zz": {"int": 1}}), "names no argument"
    yield "state", mutated(doc, state=["weight"]), "missing tensors"
    yield "fused", mutated(doc, fused=[[1, [["system", 1, 0]], [1], "k"]]), "bad fused kernel"
    yield "fused shape", mutated(doc, fused=[{"ninputs": 1}]), "malformed fused kernel"
    yield "wrong field type", mutated(doc, operands="0,1,2"), "wrong type"


def _nested(depth):
    value = {"int": 1}
    for _ in range(depth):
        value = {"list": [value]}
    return value


def test_hostile_documents_are_rejected(saved):
    _, doc = saved
    for name, bad, message in _cases(doc):
        with pytest.raises(ProgramFileError, match=message):
            jit.load(file_with(bad))


def test_loading_never_runs_code(saved, monkeypatch):
    import os
    calls = []
    monkeypatch.setattr(os, "system", lambda *a: calls.append(a))
    _, doc = saved
    bad = mutated(doc, callsites=[["os.system", 1, None]] + doc["callsites"][1:])
    with pytest.raises(ProgramFileError):
        jit.load(file_with(bad))
    assert calls == []


# ---- edited programs: format strings, absurd constants, fused outputs ----------------


def document_of(fn):
    """(header, doc, tensor bytes) of ember.jit.save(jit.script(fn))."""
    buffer = io.BytesIO()
    jit.save(jit.script(fn), buffer)
    raw = buffer.getvalue()
    header_length = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + header_length])
    return header, json.loads(header["__metadata__"][METADATA_KEY]), raw[8 + header_length:]


def file_of(header, doc, data):
    """A program file: `header` with `doc` as its program, then the tensors."""
    header = dict(header, __metadata__={METADATA_KEY: json.dumps(doc)})
    blob = json.dumps(header).encode()
    return io.BytesIO(struct.pack("<Q", len(blob)) + blob + data)


def formats(x, n: int):
    s = f"{n}:{x.sum()!r:>12}|{n + 1:04d}"
    return x * n, s


def format_constant(doc):
    return next(i for i, c in enumerate(doc["constants"]) if "str" in c)


def test_format_program_round_trips():
    header, doc, data = document_of(formats)
    x = ember.ones(3)
    assert jit.load(file_of(header, doc, data))(x, 3)[1] == formats(x, 3)[1]


@pytest.mark.parametrize("fmt", [
    "{0.backward.__globals__}",       # attributes: any global, os.environ
    "{0.__class__}", "{0[0]}", "{n}", "{0!x}", "{0:{1}}", "{:>{}}",
    "{:99999999}", "{:.99999999f}", "{", "}", "{0}{}",
])
def test_format_string_in_file_cannot_reach_attributes(fmt):
    header, doc, data = document_of(formats)
    doc["constants"][format_constant(doc)] = {"str": fmt}
    with pytest.raises(ProgramFileError, match="bad format string"):
        jit.load(file_of(header, doc, data))


def test_format_string_must_be_a_str():
    header, doc, data = document_of(formats)
    doc["constants"][format_constant(doc)] = {"int": 3}
    with pytest.raises(ProgramFileError, match="must be a str"):
        jit.load(file_of(header, doc, data))


def computed_format(doc, left, right):
    """The program with its format string computed at run time:
    operator.add(left, right) into the format's register."""
    doc = copy.deepcopy(doc)
    site = next(i for i, s in enumerate(doc["callsites"]) if s[0] == "prim.format")
    call = next(i for i, ins in enumerate(doc["code"])
                if ins[0] == "CALL" and ins[2] == site)
    fmt_reg = doc["operands"][doc["code"][call][3]]
    spare = doc["nregs"]
    k = format_constant(doc)
    doc["constants"][k] = {"str": left}
    doc["constants"].append({"str": right})
    doc["callsites"].append(["operator.add", 2, None])
    doc["operands"] += [fmt_reg, spare]
    doc["code"][call:call] = [
        ["LOAD_CONST", spare, len(doc["constants"]) - 1, 0],
        ["CALL", fmt_reg, len(doc["callsites"]) - 1, len(doc["operands"]) - 2],
        ["DROP", spare, 0, 0]]
    doc["lines"][call:call] = [0, 0, 0]
    doc["nregs"] = spare + 1
    return doc


def test_computed_format_string_is_checked_when_it_runs():
    header, doc, data = document_of(formats)
    x = ember.ones(3)
    fine = jit.load(file_of(header, computed_format(doc, "{}:{!r:>12}", "|{:04d}"), data))
    assert fine(x, 3)[1] == formats(x, 3)[1]  # the edit itself works
    for left, right in [("{0.backward", ".__globals__}"), ("{1.", "__class__}"),
                        ("{0", "[0]}")]:
        loaded = jit.load(file_of(header, computed_format(doc, left, right), data))
        with pytest.raises(ValueError, match="plain positional fields"):
            loaded(x, 3)


def test_script_f_string_rules():
    x = ember.ones(2)

    def conversions(x, n: int):
        return f"{x!s}{x!r}{n!a}{n:+05d}{{}}"

    assert jit.script(conversions)(x, 7) == conversions(x, 7)

    def computed_spec(x, n: int):
        return f"{x:{n}}"

    with pytest.raises(Exception, match="computed format specs"):
        jit.script(computed_spec)

    def huge_width(n: int):
        return f"{n:>100000}"

    with pytest.raises(Exception, match="width above"):
        jit.script(huge_width)


def test_print_takes_no_keywords_from_a_file():
    def prints(x):
        print(x)
        return x

    header, doc, data = document_of(prints)
    site = next(i for i, s in enumerate(doc["callsites"]) if s[0] == "prim.print")
    doc["callsites"][site] = ["prim.print", 1, ["file"]]  # print(file=x)
    with pytest.raises(TypeError, match="unexpected keyword"):
        jit.load(file_of(header, doc, data))(ember.ones(1))


def test_wrongly_shaped_constants_are_program_file_errors(saved):
    _, doc = saved
    for bad in ({"dtype": []}, {"dtype": {"a": 1}}, {"slice": [1]}, {"int": []},
                {"int": 2**64}, {"tuple": {}}, {"float": 1.5}, {"str": 3}, [], None):
        with pytest.raises(ProgramFileError):
            jit.load(file_with(mutated(doc, constants=[bad])))
    fused = [[2**40, [], [0], "k"], [1, 5, [0], "k"], [1, [], [0], 7],
             [1, [["exp", 1, 2**70]], [1], "k"]]
    for bad in fused:
        with pytest.raises(ProgramFileError):
            jit.load(file_with(mutated(doc, fused=[bad])))


def expands(x):
    return x.expand(4, 3).exp() + 1


@pytest.mark.parametrize("size", [2**62, 2**63 - 1, -2, 2**31])
def test_absurd_size_constant_fails_cleanly_when_called(size):
    header, doc, data = document_of(expands)
    k = next(i for i, c in enumerate(doc["constants"]) if c == {"int": 4})
    doc["constants"][k] = {"int": size}
    loaded = jit.load(file_of(header, doc, data))
    with pytest.raises((RuntimeError, ValueError, MemoryError)):
        loaded(ember.zeros(3))


def two_outputs(x):
    y = ember.exp(x)
    return -(-y), y * 2


def test_strided_input_as_fused_output_through_a_loaded_program():
    header, doc, data = document_of(two_outputs)
    (ninputs, instructions, outputs, name), = doc["fused"]
    assert ninputs == 1 and len(outputs) == 2
    # The first output becomes the input itself (register 0): the kernel
    # must return a copy of x, not the temporary that reused x's buffer.
    doc["fused"] = [[ninputs, instructions, [0, outputs[0]], name]]
    loaded = jit.load(file_of(header, doc, data))
    x = ember.arange(24.0).reshape(4, 6).t()
    first, second = loaded(x)
    assert first.tolist() == x.tolist()
    assert second.tolist() == (-(-ember.exp(x))).tolist()


def test_program_too_large_to_verify_is_refused(saved):
    # The verifier keeps a register set per instruction: 40,000
    # instructions over 20,000 registers ran out of memory.
    _, doc = saved
    n = 20_000
    code = [["LOAD_CONST", i, 0, 0] for i in range(n)] + doc["code"]
    bad = mutated(doc, code=code, lines=[0] * len(code), nregs=n + doc["nregs"])
    with pytest.raises(ProgramFileError, match="too large to verify"):
        jit.load(file_with(bad))
