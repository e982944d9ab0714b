"""ember.jit's register bytecode and its VM (ember._C.Code, ember.jit.bytecode).

Programs are hand-assembled with bytecode.Assembler.  Every program runs on
both the C VM and the Python reference interpreter (`run_both`), which must
agree on the result, or on the exception's type, message and notes.
"""

import gc
import math
import operator
import struct
import sys
import weakref

import numpy as np
import pytest

import ember
from ember import _C
from ember.jit import bytecode as bc
from ember.jit.bytecode import Assembler, BytecodeError, Callsite, Op, run_reference

try:
    from hypothesis import given, settings
    from hypothesis import strategies as st
except ImportError:  # hypothesis is a test extra
    given = None


# ---- helpers ----------------------------------------------------------------------


def outcome(fn, *args):
    """('ok', result) or ('raise', type, message, notes) of fn(*args)."""
    try:
        return ("ok", fn(*args))
    except Exception as exc:  # noqa: BLE001 - the exception is the result
        return ("raise", type(exc), str(exc), tuple(getattr(exc, "__notes__", ())))


def same_value(a, b):
    if isinstance(a, ember.Tensor):
        return isinstance(b, ember.Tensor) and a.dtype == b.dtype and \
            np.array_equal(a.numpy(), b.numpy(), equal_nan=True)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and \
            all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return type(a) is type(b) and a == b


def run_both(program, *args):
    """Runs `program` on the C VM and the reference; returns the C outcome
    after checking that the two agree."""
    code = program.to_c()
    c_result = outcome(code, *args)
    ref_result = outcome(run_reference, program, args)
    if c_result[0] == "ok":
        assert ref_result[0] == "ok", ref_result
        assert same_value(c_result[1], ref_result[1]), (c_result, ref_result)
    else:
        assert c_result == ref_result
    return c_result


def result_of(program, *args):
    status, *rest = run_both(program, *args)
    assert status == "ok", rest
    return rest[0]


def error_of(program, *args):
    """(type, message, notes) of the error both VMs raise."""
    status, *rest = run_both(program, *args)
    assert status == "raise", rest
    return tuple(rest)


def note(name, pc, op, line=0):
    where = f"line {line}" if line else "line unknown"
    return f"ember.jit: in scripted function '{name}', {where} (instruction {pc}, {op})"


def counted_loop(trip, start=0, body=None):
    """for _ in range(trip): r0 = body(r0): LOOP_TEST/INC/JUMP."""
    asm = Assembler("loop", ["x"])
    i, n = asm.new_reg(), asm.new_reg()
    asm.load_const(i, start)
    asm.load_const(n, trip)
    top, done = asm.label(), asm.label()
    asm.bind(top)
    asm.loop_test(i, n, done, line=2)
    if body is None:
        asm.call(0, "operator.add", operator.add, [0, i], line=3)
    else:
        body(asm)
    asm.inc(i)
    asm.jump(top)
    asm.bind(done)
    asm.ret([0, i], line=4)
    return asm.finish()


# ---- the opcode table -----------------------------------------------------------------


def test_opcode_table_is_the_c_x_macro():
    opcodes = _C._jit_opcodes()
    assert set(opcodes) == {"LOAD_CONST", "MOVE", "CALL", "UNPACK", "JUMP",
                            "JUMP_IF_FALSE", "JUMP_IF_TRUE", "LOOP_TEST", "INC",
                            "FUSED", "DROP", "RETURN", "RAISE"}
    assert sorted(opcodes.values()) == list(range(len(opcodes)))
    assert {op.name: int(op) for op in Op} == opcodes
    assert set(_C._jit_operand_kinds()) == set(opcodes)
    assert _C._jit_operand_kinds()["CALL"] == ("reg_or_none", "callsite", "offset")
    assert _C._jit_raise_kinds() == (
        AssertionError, RuntimeError, ValueError, TypeError, IndexError, KeyError,
        NotImplementedError, ZeroDivisionError, Exception)


# ---- every opcode -------------------------------------------------------------------------


def test_load_const_move_return_one_and_many():
    asm = Assembler("f", ["a"])
    r1, r2 = asm.new_reg(), asm.new_reg()
    asm.load_const(r1, "k")
    asm.move(r2, 0)
    asm.ret([r2, r1, 0])
    program = asm.finish()
    program.verify()
    assert result_of(program, 5) == (5, "k", 5)
    one = Assembler("g", ["a"])
    one.ret(0)
    assert result_of(one.finish(), [1]) == [1]
    none = Assembler("h", [])
    none.ret([])
    assert result_of(none.finish()) == ()


def test_counted_loop_with_loop_test_and_inc():
    program = counted_loop(10)
    program.verify()
    assert result_of(program, 0) == (45, 10)
    assert result_of(counted_loop(0), 7) == (7, 0)
    assert result_of(counted_loop(-3), 7) == (7, 0)


def test_loop_on_a_tensor_matches_numpy():
    def body(asm):
        one = asm.new_reg()
        asm.load_const(one, 1.0)
        asm.call(0, "aten::add", ember.add, [0, one], line=3)

    x = ember.tensor([0.5, -2.0], dtype=ember.float32)
    out, trips = result_of(counted_loop(100, body=body), x)
    assert trips == 100
    expected = np.array([0.5, -2.0], dtype=np.float32)
    for _ in range(100):
        expected = expected + np.float32(1.0)
    np.testing.assert_array_equal(out.numpy(), expected)
    assert x.tolist() == [0.5, -2.0]  # the argument is untouched


def test_loop_counters_beyond_a_machine_word():
    big = 2**70
    assert result_of(counted_loop(big + 3, start=big), 0) == (3 * big + 3, big + 3)
    # INC across the largest machine word leaves the fast path.
    top = 2**63 - 2
    assert result_of(counted_loop(top + 3, start=top), 0)[1] == top + 3


def test_loop_test_and_inc_want_ints():
    assert error_of(counted_loop(2.5), 0)[:2] == (
        TypeError, "LOOP_TEST: counter and trip count must be ints, got 'int' and 'float'")
    asm = Assembler("f", ["x"])
    asm.inc(0, line=7)
    asm.ret(0)
    assert error_of(asm.finish(), 1.5) == (
        TypeError, "INC: the register must hold an int, got 'float'",
        (note("f", 0, "INC", 7),))
    assert result_of(asm.program, True) == 2  # bool is an int, as in Python


def branch_program(op):
    """return 'yes' if the condition jumps, else 'no'."""
    asm = Assembler("branch", ["cond"])
    out = asm.new_reg()
    taken = asm.label()
    asm.emit(op, 0, taken, line=5)
    asm.load_const(out, "no")
    asm.ret(out)
    asm.bind(taken)
    asm.load_const(out, "yes")
    asm.ret(out)
    return asm.finish()


@pytest.mark.parametrize("op", [Op.JUMP_IF_FALSE, Op.JUMP_IF_TRUE])
def test_conditional_jumps(op):
    program = branch_program(op)
    program.verify()
    jumps_on = op == Op.JUMP_IF_TRUE
    assert result_of(program, jumps_on) == "yes"
    assert result_of(program, not jumps_on) == "no"
    for cond in (1, None, ember.tensor([True])):
        exc_type, message, notes = error_of(program, cond)
        assert exc_type is TypeError
        assert message == (f"{op.name}: the condition must be a bool, got "
                           f"'{type(cond).__name__}'")
        assert notes == (note("branch", 0, op.name, 5),)


def unpack_program(count):
    asm = Assembler("unpack", ["seq"])
    regs = [asm.new_reg() for _ in range(count)]
    asm.unpack(regs, 0, line=2)
    asm.ret(list(reversed(regs)))
    return asm.finish()


def test_unpack_tuples_lists_and_tuple_subclasses():
    program = unpack_program(3)
    program.verify()
    assert result_of(program, (1, 2, 3)) == (3, 2, 1)
    assert result_of(program, [1, "b", None]) == (None, "b", 1)
    assert result_of(program, ember.zeros(4, 5, 6).shape) == (6, 5, 4)
    indices, values = result_of(unpack_program(2), ember.tensor([3.0, 1.0]).max(0))
    assert (indices.item(), values.item()) == (0, 3.0)


def test_unpack_into_its_own_source_register():
    asm = Assembler("f", ["pair"])
    other = asm.new_reg()
    asm.unpack([0, other], 0)
    asm.ret([0, other])
    assert result_of(asm.finish(), ("a", "b")) == ("a", "b")


def test_unpack_errors():
    program = unpack_program(3)
    assert error_of(program, (1, 2, 3, 4))[:2] == (
        ValueError, "too many values to unpack (expected 3)")
    assert error_of(program, [1, 2]) == (
        ValueError, "not enough values to unpack (expected 3, got 2)",
        (note("unpack", 0, "UNPACK", 2),))
    assert error_of(program, ember.zeros(3))[:2] == (
        TypeError, "UNPACK: expected a tuple or list, got 'Tensor'")


@pytest.mark.parametrize("kind", range(len(bc.RAISE_KINDS)))
@pytest.mark.parametrize("with_message", [False, True])
def test_raise_every_kind(kind, with_message):
    exc_class = bc.RAISE_KINDS[kind]
    asm = Assembler("fails", ["msg"])
    asm.raise_(exc_class, 0 if with_message else None, line=9)
    program = asm.finish()
    program.verify()
    exc_type, message, notes = error_of(program, "went wrong")
    assert exc_type is exc_class
    expected = exc_class("went wrong") if with_message else exc_class()
    assert message == str(expected)
    assert notes == (note("fails", 0, "RAISE", 9),)


class Kernel:
    """A stand-in for a FusedKernel: any callable returning a tuple or None."""

    def __init__(self, fn, ninputs, noutputs):
        self.fn, self.ninputs, self.noutputs = fn, ninputs, noutputs
        self.name = "stand_in"

    def __call__(self, *inputs):
        return self.fn(*inputs)


def fused_program(kernel):
    """(a * b, a + b) through `kernel`, or through two CALLs when it says None."""
    asm = Assembler("fused", ["a", "b"])
    prod, total = asm.new_reg(), asm.new_reg()
    fallback, done = asm.label(), asm.label()
    asm.fused(kernel, [0, 1], [prod, total], fallback, line=2)
    asm.jump(done)
    asm.bind(fallback)
    asm.call(prod, "aten::mul", ember.mul, [0, 1], line=2)
    asm.call(total, "aten::add", ember.add, [0, 1], line=2)
    asm.bind(done)
    asm.ret([prod, total], line=3)
    return asm.finish()


def test_fused_success_and_fallback():
    calls = []

    def guarded(a, b):
        calls.append((a, b))
        if isinstance(a, ember.Tensor) and a.dtype == ember.float64:
            return None  # the guard fails: the unfused code runs
        return (a * b, a + b)

    program = fused_program(Kernel(guarded, 2, 2))
    program.verify()
    a32 = ember.tensor([2.0, 3.0], dtype=ember.float32)
    prod, total = result_of(program, a32, a32)
    assert prod.tolist() == [4.0, 9.0] and total.tolist() == [4.0, 6.0]
    a64 = ember.tensor([2.0], dtype=ember.float64)
    prod, total = result_of(program, a64, 5.0)
    assert prod.tolist() == [10.0] and total.tolist() == [7.0]
    assert len(calls) == 4  # each case on both VMs
    # The (callable, ninputs, noutputs) form of a fused entry.
    assert result_of(fused_program((lambda a, b: (a - b, a), 2, 2)), 5, 3) == (2, 5)


def test_fused_kernel_returning_something_else():
    wrong_type = fused_program(Kernel(lambda a, b: [a, b], 2, 2))
    assert error_of(wrong_type, 1, 2) == (
        TypeError, "FUSED: kernel 0 must return a tuple of 2 outputs or None, got list",
        (note("fused", 0, "FUSED", 2),))
    wrong_length = fused_program(Kernel(lambda a, b: (a,), 2, 2))
    assert error_of(wrong_length, 1, 2)[1] == (
        "FUSED: kernel 0 must return a tuple of 2 outputs or None, got a tuple of 1")


def test_keyword_callsites_and_discarded_results():
    seen = []

    def record(a, b=0, *, scale=1):
        seen.append((a, b, scale))
        return (a + b) * scale

    asm = Assembler("kw", ["a", "b", "s"])
    out = asm.new_reg()
    asm.call(None, "record", record, [0], {"scale": 2}, line=1)   # dropped
    asm.call(out, "record", record, [0], {"b": 1, "scale": 2}, line=2)
    asm.ret(out)
    program = asm.finish()
    program.verify()
    assert result_of(program, 3, 4, 5) == (3 + 4) * 5  # b=r1, scale=r2
    assert seen == [(3, 0, 5), (3, 4, 5)] * 2
    x = ember.tensor([1.0, 2.0], dtype=ember.float64)
    asm = Assembler("add_alpha", ["x", "y", "alpha"])
    asm.call(0, "aten::add", ember.add, [0, 1], {"alpha": 2})
    asm.ret(0)
    assert result_of(asm.finish(), x, x, 3).tolist() == [4.0, 8.0]


def test_drop_empties_a_register():
    asm = Assembler("dropped", ["x"])
    asm.drop(0, line=1)
    asm.move(0, 0, line=2)   # reads the dropped register
    asm.ret(0)
    program = asm.finish()
    with pytest.raises(BytecodeError, match=r"instruction 1 \(MOVE\): register r0 "
                                            r"may be read before it is written"):
        program.verify()
    assert error_of(program, 1) == (
        RuntimeError, "register r0 is empty (read before it was written, or after DROP)",
        (note("dropped", 1, "MOVE", 2),))


@pytest.mark.parametrize("reader", ["move", "call", "return", "raise", "fused",
                                    "unpack", "jump", "loop_test", "inc"])
def test_reading_an_empty_register_is_a_runtime_error(reader):
    asm = Assembler("empty", ["x"])
    empty = asm.new_reg()
    end = asm.label()
    {
        "move": lambda: asm.move(0, empty),
        "call": lambda: asm.call(0, "f", operator.add, [0, empty]),
        "return": lambda: asm.ret([0, empty]),
        "raise": lambda: asm.raise_(ValueError, empty),
        "fused": lambda: asm.fused((operator.add, 2, 1), [0, empty], [0], end),
        "unpack": lambda: asm.unpack([0], empty),
        "jump": lambda: asm.jump_if_true(empty, end),
        "loop_test": lambda: asm.loop_test(0, empty, end),
        "inc": lambda: asm.inc(empty),
    }[reader]()
    asm.bind(end)
    asm.ret(0)
    exc_type, message, _ = error_of(asm.finish(), 0)
    assert exc_type is RuntimeError
    assert message == f"register r{empty} is empty (read before it was written, or after DROP)"


def test_running_off_the_end():
    asm = Assembler("no_return", ["x"])
    asm.move(0, 0, line=1)
    program = asm.finish()
    with pytest.raises(BytecodeError, match="can run off the end"):
        program.verify()
    assert error_of(program, 1) == (
        RuntimeError, "reached the end of the code without RETURN",
        (note("no_return", 1, "END"),))
    jumps_to_end = Assembler("jump_end", [])
    jumps_to_end.jump(1)
    assert error_of(jumps_to_end.finish())[1] == "reached the end of the code without RETURN"


def test_arguments_are_checked():
    asm = Assembler("two", ["a", "b"])
    asm.ret([0, 1])
    program = asm.finish()
    code = program.to_c()
    for args, message in [((1,), "two() takes 2 positional arguments but 1 was given"),
                          ((1, 2, 3), "two() takes 2 positional arguments but 3 were given")]:
        assert outcome(code, *args)[:3] == ("raise", TypeError, message)
        assert outcome(run_reference, program, args)[:3] == ("raise", TypeError, message)
    with pytest.raises(TypeError, match=r"two\(\) takes no keyword arguments"):
        code(1, b=2)


def test_exceptions_from_ops_keep_their_type_and_get_the_note():
    asm = Assembler("divide", ["a", "b"])
    asm.call(0, "aten::div", operator.truediv, [0, 1], line=12)
    asm.ret(0)
    program = asm.finish()
    exc_type, message, notes = error_of(program, 1.0, 0.0)
    assert (exc_type, message) == (ZeroDivisionError, "float division by zero")
    assert notes == (note("divide", 0, "CALL", 12),)
    # ember's own errors, with torch's message
    a, b = ember.zeros(2), ember.zeros(3)
    exc_type, message, notes = error_of(program, a, b)
    assert exc_type is RuntimeError and "must match the size" in message
    assert notes == (note("divide", 0, "CALL", 12),)


def test_nested_code_adds_one_note_per_level():
    inner = Assembler("inner", ["x"])
    inner.raise_(KeyError, 0, line=3)
    inner_code = inner.finish().to_c()
    outer = Assembler("outer", ["x"])
    outer.call(0, "inner", inner_code, [0], line=8)
    outer.ret(0)
    exc_type, message, notes = error_of(outer.finish(), "k")
    assert exc_type is KeyError and message == "'k'"
    assert notes == (note("inner", 0, "RAISE", 3), note("outer", 0, "CALL", 8))


def test_unbounded_recursion_is_a_recursion_error():
    holder = []
    asm = Assembler("forever", ["x"])
    asm.call(0, "self", lambda x: holder[0](x), [0])
    asm.ret(0)
    holder.append(asm.finish().to_c())
    with pytest.raises(RecursionError):
        holder[0](1)
    holder.clear()


def test_a_loop_that_never_ends_sees_signals(monkeypatch):
    """A backward jump checks for signals: an infinite loop can be interrupted."""
    import signal
    asm = Assembler("spin", [])
    asm.jump(0)
    code = asm.finish().to_c()

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with pytest.raises(KeyboardInterrupt) as info:
            code()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert info.value.__notes__ == [note("spin", 0, "JUMP")]


# ---- reference counts -----------------------------------------------------------------------


def refcounts(*objs):
    return [sys.getrefcount(o) for o in objs]


def test_refcounts_unchanged_after_success_and_after_errors():
    x = ember.tensor([1.0], dtype=ember.float32)
    const = ember.tensor([2.0], dtype=ember.float32)
    asm = Assembler("f", ["x", "mode"])
    y, z, w = asm.new_reg(), asm.new_reg(), asm.new_reg()
    asm.load_const(y, const)
    asm.move(z, 0)
    asm.call(w, "aten::mul", ember.mul, [z, y])
    asm.unpack([z], 1)            # mode: a 1-tuple, or anything else to fail
    asm.fused((lambda a, b: None, 2, 1), [0, y], [w], 6)
    asm.ret(w)
    asm.ret([w, y, 0, z])         # 6: the fallback
    code = asm.finish().to_c()
    before = refcounts(x, const)
    for _ in range(3):
        out = code(x, ("ok",))
        assert out[0].tolist() == [2.0] and out[1] is const and out[2] is x
        del out
        assert refcounts(x, const) == before
        with pytest.raises(ValueError):
            code(x, ())
        with pytest.raises(TypeError):
            code(x, None)
        assert refcounts(x, const) == before


def test_refcounts_after_op_exceptions_raise_and_empty_registers():
    x = object()
    const = object()

    def fail(*args):
        raise IndexError("no")

    asm = Assembler("g", ["x", "which"])
    c, out = asm.new_reg(), asm.new_reg()
    asm.load_const(c, const)
    is_zero = asm.new_reg()
    asm.call(is_zero, "eq", operator.eq, [1, c])   # which == const
    skip = asm.label()
    asm.jump_if_false(is_zero, skip)
    asm.call(out, "fail", fail, [0, c])
    asm.bind(skip)
    asm.ret([0, out])             # `out` is empty here: a RuntimeError
    code = asm.finish().to_c()
    cases = (const, "other")   # the one failing in `fail`, the one in RETURN
    before = refcounts(x, const)
    for i in range(len(cases)):
        try:
            code(x, cases[i])
        except (IndexError, RuntimeError):
            pass  # leaving the handler frees the exception and its traceback
        else:
            raise AssertionError("no error")
        assert refcounts(x, const) == before


def test_a_reference_cycle_through_a_callsite_is_collected():
    class Holder:
        def __call__(self, x):
            return x

    holder = Holder()
    asm = Assembler("cyclic", ["x"])
    asm.call(0, "holder", holder, [0])
    asm.ret(0)
    holder.code = asm.finish().to_c()   # code -> callsite -> holder -> code
    alive = weakref.ref(holder)
    assert holder.code(3) == 3
    del holder, asm
    gc.collect()
    assert alive() is None


# ---- construction and validation -------------------------------------------------------------


def simple_program():
    asm = Assembler("f", ["x"])
    r1, r2 = asm.new_reg(), asm.new_reg()
    asm.load_const(r1, 1.0, line=1)
    asm.call(r2, "aten::add", operator.add, [0, r1], line=2)
    asm.ret(r2, line=3)
    return asm.finish()


def test_introspection():
    program = simple_program()
    code = program.to_c()
    assert (code.name, code.nregs, code.nargs) == ("f", 3, 1)
    assert code.instructions == [tuple(ins) for ins in program.instructions]
    assert code.operands == (0, 1, 2)
    assert code.constants == (1.0,)
    assert code.callsites == ((operator.add, 2, None),)
    assert code.fused == ()
    assert code.lines == (1, 2, 3)
    assert repr(code) == "<ember._C.Code 'f': 3 instructions, 3 registers, 1 arguments>"
    program.lines = None
    assert program.to_c().lines is None
    assert program.to_c()(2.0) == 3.0
    with pytest.raises(TypeError):
        class Sub(_C.Code):  # noqa: F841 - a final type
            pass


def test_listing():
    asm = Assembler("listing", ["x", "y"])
    r = [asm.new_reg() for _ in range(4)]
    end = asm.label()
    asm.load_const(r[0], 1.0, line=3)
    asm.call(r[1], "aten::add", ember.add, [0], {"alpha": r[0]}, line=3)
    asm.call(None, "aten::append", list.append, [0, 1])
    asm.unpack([r[2], r[3]], 1)
    asm.jump_if_false(r[2], end)
    asm.loop_test(r[2], r[3], end)
    asm.fused(Kernel(None, 2, 1), [0, 1], [r[1]], end)
    asm.inc(r[2])
    asm.drop(r[3])
    asm.move(r[3], r[2])
    asm.jump(end)
    asm.bind(end)
    asm.raise_(AssertionError, r[0])
    asm.ret([r[1], r[2]])
    text = asm.finish().format()
    assert text.splitlines() == [
        "def listing(r0: x, r1: y):  # 6 registers",
        "   0  LOAD_CONST    r2 <- 1.0                       # line 3",
        "   1  CALL          r3 <- aten::add(r0, alpha=r2)   # line 3",
        "   2  CALL          aten::append(r0, r1)  (result dropped)",
        "   3  UNPACK        r4, r5 <- *r1",
        "   4  JUMP_IF_FALSE r4, ->11",
        "   5  LOOP_TEST     r4 >= r5 ? ->11",
        "   6  FUSED         r3 <- stand_in(r0, r1) else ->11",
        "   7  INC           r4",
        "   8  DROP          r5",
        "   9  MOVE          r5 <- r4",
        "  10  JUMP          ->11",
        "  11  RAISE         AssertionError(r2)",
        "  12  RETURN        (r3, r4)",
    ]


def pack(words):
    return struct.pack(f"{len(words)}i", *words)


def make_code(code=b"", operands=b"", nregs=1, nargs=0, constants=(), callsites=(),
              fused=(), lines=None, name="f"):
    return _C.Code(code, operands, nregs, nargs, constants, callsites, fused, lines, name)


def test_truncated_bytes_and_bad_sizes():
    ret = pack([Op.RETURN, 0, 1, 0])
    with pytest.raises(ValueError, match=r"code has 15 bytes, not a whole number of "
                                         r"16-byte instructions"):
        make_code(ret[:-1], pack([0]))
    with pytest.raises(ValueError, match=r"operands has 3 bytes"):
        make_code(ret, pack([0])[:3])
    with pytest.raises(ValueError, match=r"lines has 2 bytes, expected 4"):
        make_code(ret, pack([0]), lines=b"\0\0")
    with pytest.raises(ValueError, match=r"nregs must be between 0 and 65536, got -1"):
        make_code(nregs=-1)
    with pytest.raises(ValueError, match=r"nregs must be between 0 and 65536, got 65537"):
        make_code(nregs=65537)
    with pytest.raises(ValueError, match=r"nargs must be between 0 and nregs \(1\), got 2"):
        make_code(nargs=2)
    code = make_code()   # empty code is valid to construct, and fails when run
    with pytest.raises(RuntimeError, match="reached the end of the code"):
        code()


def test_wrong_argument_types():
    ret = pack([Op.RETURN, 0, 1, 0])
    cases = [
        dict(code=bytearray(ret)), dict(operands=[0]), dict(nregs=1.0),
        dict(nargs="0"), dict(constants=[1]), dict(callsites=[]), dict(fused=[]),
        dict(lines="x"), dict(name=b"f"),
    ]
    for case in cases:
        kwargs = dict(code=ret, operands=pack([0]))
        kwargs.update(case)
        with pytest.raises(TypeError):
            make_code(**kwargs)


@pytest.mark.parametrize("callsite, message", [
    ([1, 2, None], "callsite 0 must be a tuple (callable, nargs, kwnames or None), got 'list'"),
    ((1, 0, None), "callsite 0: 'int' object is not callable"),
    ((len, 1.0, None), "callsite 0: nargs must be an int, got 'float'"),
    ((len, True, None), "callsite 0: nargs must be an int, got 'bool'"),
    ((len, ["x"], None), "callsite 0: nargs must be an int, got 'list'"),
    ((len, 1, ["x"]), "callsite 0: kwnames must be None or a tuple of str, got 'list'"),
    ((len, 1, (1,)), "callsite 0: kwnames must be None or a tuple of str, "
                     "got an item of type 'int'"),
])
def test_malformed_callsites_are_type_errors(callsite, message):
    with pytest.raises(TypeError) as info:
        make_code(callsites=(callsite,))
    assert str(info.value) == "Code 'f': " + message


@pytest.mark.parametrize("callsite, message", [
    ((len, -1, None), "callsite 0: nargs -1 out of range [0, 2**31)"),
    ((len, 2**40, None), "callsite 0: nargs 1099511627776 out of range [0, 2**31)"),
    ((len, 1, ("a", "b")), "callsite 0: 2 keyword names for 1 arguments"),
    ((len, 2, ("a", "a")), "callsite 0: duplicate keyword name 'a'"),
])
def test_bad_callsite_values_are_value_errors(callsite, message):
    with pytest.raises(ValueError) as info:
        make_code(callsites=(callsite,))
    assert str(info.value) == "Code 'f': " + message
    if not isinstance(callsite[1], int) or callsite[1] >= 0:
        program = bc.Program("f", 0, 1, callsites=[Callsite("s", *callsite)])
        with pytest.raises(BytecodeError) as info:
            program.verify()
        assert str(info.value) == "Code 'f': " + message


@pytest.mark.parametrize("entry, error, message", [
    (object(), TypeError, "fused 0 must be a (callable, ninputs, noutputs) tuple or have "
                          "int attributes ninputs and noutputs, got 'object'"),
    ((1, 1, 1), TypeError, "fused 0: 'int' object is not callable"),
    ((len, 1.5, 1), TypeError, "fused 0: ninputs must be an int, got 'float'"),
    ((len, 1, -2), ValueError, "fused 0: noutputs -2 out of range [0, 2**31)"),
    (Kernel(len, 1, None), TypeError, "fused 0: noutputs must be an int, got 'NoneType'"),
])
def test_malformed_fused_entries(entry, error, message):
    with pytest.raises(error) as info:
        make_code(fused=(entry,))
    assert str(info.value) == "Code 'f': " + message
    with pytest.raises(BytecodeError) as info:
        bc.Program("f", 0, 1, fused=[entry]).verify()
    assert str(info.value) == "Code 'f': " + message


def fully_loaded_program():
    """A program with one of every table entry, for the mutation tests."""
    asm = Assembler("f", ["x"])
    r1 = asm.new_reg()
    asm.load_const(r1, 1.0)                                     # 0
    asm.call(r1, "add", operator.add, [0, r1])                  # 1
    asm.unpack([r1], 0)                                         # 2
    asm.fused((operator.add, 2, 1), [0, r1], [r1], 4)           # 3
    asm.jump_if_false(r1, 5)                                    # 4
    asm.loop_test(0, r1, 6)                                     # 5
    asm.raise_(ValueError, r1)                                  # 6
    asm.ret(r1)                                                 # 7
    return asm.finish()


# (instruction index, word, bad value, message after "instruction N (OP): ")
BAD_WORDS = [
    (0, 1, 2, "register 2 in operand a out of range [0, 2)"),
    (0, 1, -1, "register -1 in operand a out of range [0, 2)"),
    (0, 2, 1, "constant index 1 in operand b out of range [0, 1)"),
    (0, 3, 7, "unused operand c must be 0, got 7"),
    (1, 1, -2, "register (or -1) -2 in operand a out of range [0, 2)"),
    (1, 2, 1, "callsite index 1 in operand b out of range [0, 1)"),
    (1, 3, 8, "operand offset 8 in operand c out of range [0, 8)"),
    (1, 3, 6, "operands [6, 8) run past the end of operands (7 words)"),
    (2, 1, 7, "operands [7, 8) run past the end of operands (7 words)"),
    (2, 3, -1, "count -1 in operand c out of range [0, 2147483647)"),
    (2, 3, 9, "operands [2, 11) run past the end of operands (7 words)"),
    (3, 1, 1, "fused index 1 in operand a out of range [0, 1)"),
    (3, 2, 5, "operands [5, 8) run past the end of operands (7 words)"),
    (3, 3, 9, "jump target 9 in operand c out of range [0, 9)"),
    (4, 2, -1, "jump target -1 in operand b out of range [0, 9)"),
    (5, 2, 3, "register 3 in operand b out of range [0, 2)"),
    (6, 1, 9, "raise kind 9 in operand a out of range [0, 9)"),
    (7, 2, 2, "operands [6, 8) run past the end of operands (7 words)"),
]


@pytest.mark.parametrize("pc, word, value, message", BAD_WORDS)
def test_every_operand_is_validated(pc, word, value, message):
    program = fully_loaded_program()
    program.verify()
    program.to_c()
    ins = list(program.instructions[pc])
    ins[word] = value
    program.instructions[pc] = tuple(ins)
    expected = f"Code 'f': instruction {pc} ({Op(ins[0]).name}): {message}"
    with pytest.raises(ValueError) as info:
        program.to_c()
    assert str(info.value) == expected
    with pytest.raises(BytecodeError) as info:
        program.verify()
    assert str(info.value) == expected


def test_unknown_opcodes_and_bad_operand_registers():
    program = fully_loaded_program()
    for bad in (-1, len(Op), 1000):
        program.instructions[7] = (bad, 0, 1, 0)
        for check in (program.to_c, program.verify):
            with pytest.raises(ValueError, match=f"instruction 7: unknown opcode {bad}$"):
                check()
    program = fully_loaded_program()
    program.operands[2] = 2
    for check in (program.to_c, program.verify):
        with pytest.raises(ValueError, match=r"operand 2 is register 2, out of range \[0, 2\)"):
            check()


def test_jump_to_the_end_is_accepted_by_c_and_rejected_by_verify():
    program = fully_loaded_program()
    program.instructions[4] = (Op.JUMP_IF_FALSE, 1, 8, 0)
    program.to_c()
    with pytest.raises(BytecodeError, match=r"instruction 4 \(JUMP_IF_FALSE\) can run off"):
        program.verify()


def test_verify_dataflow_over_branches_and_fused_fallbacks():
    # r1 written on one branch only, read after the join.
    asm = Assembler("join", ["cond"])
    r1 = asm.new_reg()
    skip = asm.label()
    asm.jump_if_false(0, skip)
    asm.load_const(r1, 1)
    asm.bind(skip)
    asm.ret(r1)
    with pytest.raises(BytecodeError, match=r"instruction 2 \(RETURN\): register r1 may be read"):
        asm.finish().verify()
    # a FUSED output exists after the kernel ran, not at its fallback.
    asm = Assembler("fallback", ["x"])
    out = asm.new_reg()
    fallback = asm.label()
    asm.fused((operator.neg, 1, 1), [0], [out], fallback)
    asm.ret(out)
    asm.bind(fallback)
    asm.ret(out)
    with pytest.raises(BytecodeError, match=r"instruction 2 \(RETURN\): register r2|r1 may"):
        asm.finish().verify()
    # a loop: the counter is written before the loop, the body's value inside it.
    counted_loop(3).verify()
    # unreachable code is not checked
    asm = Assembler("dead", ["x"])
    asm.ret(0)
    asm.move(0, asm.new_reg())
    asm.finish().verify()
    with pytest.raises(BytecodeError, match="the code is empty"):
        Assembler("nothing", []).finish().verify()


def test_an_unbound_label_is_an_error():
    asm = Assembler("f", [])
    asm.jump(asm.label())
    with pytest.raises(BytecodeError, match="never bound"):
        asm.finish()


# ---- differential: random straight-line programs ------------------------------------------------

OPS = [("operator.add", operator.add), ("operator.sub", operator.sub),
       ("operator.mul", operator.mul), ("operator.truediv", operator.truediv),
       ("aten::add", ember.add), ("aten::mul", ember.mul),
       ("aten::maximum", ember.maximum)]

if given is not None:

    @st.composite
    def straight_line_programs(draw):
        nargs = draw(st.integers(1, 3))
        nregs = nargs + draw(st.integers(0, 4))
        asm = Assembler("random", [f"a{i}" for i in range(nargs)])
        asm.program.nregs = nregs
        reg = st.integers(0, nregs - 1)
        for line in range(1, draw(st.integers(1, 12)) + 1):
            kind = draw(st.sampled_from(["const", "move", "call", "drop"]))
            if kind == "const":
                asm.load_const(draw(reg), draw(st.sampled_from([0.0, 1.5, -2.0, 3.0])),
                               line=line)
            elif kind == "move":
                asm.move(draw(reg), draw(reg), line=line)
            elif kind == "call":
                name, fn = draw(st.sampled_from(OPS))
                asm.call(draw(reg), name, fn, [draw(reg), draw(reg)], line=line)
            else:
                asm.drop(draw(reg), line=line)
        asm.ret(draw(st.lists(reg, min_size=1, max_size=3)), line=99)
        return asm.finish()

    @settings(max_examples=150, deadline=None)
    @given(program=straight_line_programs(), data=st.data())
    def test_c_vm_matches_reference_vm_on_random_programs(program, data):
        tensors = data.draw(st.booleans())
        values = data.draw(st.lists(st.sampled_from([0.0, 1.0, -0.5, 4.0]),
                                    min_size=program.nargs, max_size=program.nargs))
        args = [ember.tensor([v], dtype=ember.float64) if tensors else v for v in values]
        status = run_both(program, *args)[0]
        try:
            program.verify()
        except BytecodeError:
            return  # may read an empty register: both VMs agreed on the error
        if status == "raise":   # a verified program fails only in an op
            assert run_both(program, *args)[1] in (ZeroDivisionError, TypeError,
                                                   RuntimeError)
