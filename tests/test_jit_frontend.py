"""ember.jit.frontend: Python source -> graph, checked by running the graph
through the reference interpreter against eager Python."""

import math
from typing import List, Optional, Tuple

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.jit import ir
from ember.jit.frontend import compile_function, compile_module_forward
from ember.jit.interpreter import run_graph

SCALE = 3
NAME = "ember"


def same(a, b):
    if isinstance(a, ember.Tensor):
        assert isinstance(b, ember.Tensor)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    else:
        assert a == b and type(a) is type(b), (a, b)


def check(fn, *args):
    """Compiles fn, runs the graph on args; compares with eager Python."""
    graph, _ = compile_function(fn)
    same(run_graph(graph, list(args)), fn(*args))
    return graph


def t(*values):
    return ember.tensor(list(values), dtype=ember.float32)


def error_of(fn):
    with pytest.raises(ir.ScriptError) as info:
        compile_function(fn)
    return info.value


def assert_error(fn, message, caret_line):
    """The error's message, and the quoted source line under it."""
    err = error_of(fn)
    text = str(err)
    assert message in err.message, err.message
    assert caret_line in text, text
    assert "<--- HERE" in text
    return err


# ---------------------------------------------------------------------------
# straight-line code


def arith(x, y: int, z: float):
    a = x * y + z - 1
    b = -a / 2
    c = y // 2 + y % 3 - y ** 2
    return b @ x, c, z * 2.5, x > 0


def test_arithmetic():
    check(arith, t(1, 2, 3), 5, 1.5)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.floats(-10, 10), min_size=1, max_size=6), st.integers(-5, 5))
def test_arithmetic_hypothesis(values, n):
    check(arith, t(*values), n, 0.5)


def calls(x):
    y = ember.relu(x).sum(dim=0, keepdim=True)
    z = F.softmax(x, dim=0) + nn.functional.relu(x)
    m = math.sqrt(4.0) + math.pi
    return y * m + z.exp(), x.shape[0], x.ndim, x.dtype


def test_calls_methods_attributes():
    check(calls, t(1, -2, 3))


def tuples(x):
    values, indices = x.max(0)
    a, b = (x + 1, 2)
    pair = (a, b)
    first = pair[0]
    s = x.sort()
    return values, indices, first * pair[1], s[0], pair[-1], len(pair)


def test_tuples_and_unpacking():
    check(tuples, ember.tensor([[1.0, 5.0], [3.0, 2.0]], dtype=ember.float32))


def lists(x, n: int):
    xs = [x, x * 2, x * 3]
    total = xs[0] + xs[-1]
    sizes = [1, 2, n]
    sizes.append(4)
    ys: List[int] = []
    ys.append(n)
    a, b = x.chunk(2)
    return total, sizes[3] + len(sizes) + ys[0], ember.cat(xs), a + b


def test_lists():
    check(lists, t(1, 2, 3, 4), 3)


def indexing(x):
    y = x[0]
    z = x[1:, ::2]
    w = x[..., 0]
    v = x[None, 1]
    x[0, 0] = 7.0
    x[1] += 1.0
    return y, z, w, v, x


def test_indexing():
    make = lambda: ember.arange(12, dtype=ember.float32).reshape(3, 4)  # noqa
    graph, _ = compile_function(indexing)
    same(run_graph(graph, [make()]), indexing(make()))


def strings(x, n: int):
    s = f"n={n} x={x.sum().item():.1f}"
    return s + "!", float(n), int(2.7), bool(n), str(n)


def test_fstrings_and_conversions():
    check(strings, t(1, 2), 3)


def conditions(x, a: int, b: int):
    r = 0
    if 0 < a < b:
        r = 1
    if a > 0 and b > 0 or a == b:
        r += 10
    if not a:
        r += 100
    if x.sum() > 0:
        r += 1000
    if (x > 100).any():
        r += 5
    c = a if a > b else b
    return r + c


@settings(max_examples=25, deadline=None)
@given(st.integers(-3, 3), st.integers(-3, 3), st.floats(-2, 2))
def test_conditions_hypothesis(a, b, v):
    check(conditions, t(v, 1.0), a, b)


def short_circuit(xs: List[int], i: int):
    return i < len(xs) and xs[i] > 0


def test_and_short_circuits():
    check(short_circuit, [1, 2], 5)
    check(short_circuit, [1, 2], 1)


def globals_and_defaults(x, scale: int = SCALE, name: str = "a"):
    y = x.to(ember.float64) * scale
    return y, NAME + name


def test_globals_and_defaults():
    graph, sig = compile_function(globals_and_defaults)
    assert [p.name for p in sig.params] == ["x", "scale", "name"]
    assert sig.params[1].default == 3 and str(sig.params[1].type) == "int"
    assert str(sig.return_type) == "Tuple[Tensor, str]"
    same(run_graph(graph, [t(1), 3, "a"]), globals_and_defaults(t(1)))


# ---------------------------------------------------------------------------
# Optional


def optional(x, bias: Optional[ember.Tensor] = None, k: Optional[int] = None):
    if bias is not None:
        x = x + bias
    if k is None:
        return x
    return x * k


def test_optional_refinement():
    for bias in (None, t(1, 1)):
        for k in (None, 3):
            check(optional, t(1, 2), bias, k)


def optional_early_raise(x, k: Optional[int]):
    if k is None:
        raise ValueError("k is required")
    return x * k


def test_optional_refined_after_raise():
    check(optional_early_raise, t(1, 2), 2)
    graph, _ = compile_function(optional_early_raise)
    with pytest.raises(ValueError, match="k is required"):
        run_graph(graph, [t(1), None])


def optional_var(x, n: int):
    out: Optional[ember.Tensor] = None
    for i in range(n):
        out = x * i
    if out is None:
        return x
    return out


def test_optional_variable_through_loop():
    for n in (0, 1, 3):
        check(optional_var, t(1, 2), n)


# ---------------------------------------------------------------------------
# loops and exits


def for_range(x, n: int):
    for i in range(n):
        x = x + i
    for j in range(1, n, 2):
        x = x * j
    k = 0
    for k in range(n, 0, -1):
        x = x - k
    return x, k


def for_list(xs: List[int]):
    total = 0
    for v in xs:
        total += v
    return total


def for_tensor(x):
    acc = x[0] * 0
    for row in x:
        acc = acc + row
    return acc


def for_tuple(x):
    out = x
    for v in (1, 2.5, x):
        out = out * v
    return out


def while_loop(n: int):
    i, s = 0, 0
    while i < n:
        s += i * i
        i += 1
    return s


@pytest.mark.parametrize("n", [0, 1, 4])
def test_loops(n):
    check(for_range, t(1, 2), n)
    check(for_list, list(range(n)))
    check(for_tensor, ember.ones(max(n, 1), 2, dtype=ember.float32))
    check(for_tuple, t(1, 2))
    check(while_loop, n)


def break_continue(n: int, stop: int):
    total = 0
    for i in range(n):
        if i % 2 == 1:
            continue
        if i >= stop:
            break
        total += i
    j = 0
    while True:
        j += 1
        if j > stop:
            break
    return total, j


def early_return(xs: List[int], target: int):
    for i in range(len(xs)):
        if xs[i] == target:
            return i
    return -1


def nested_return(n: int, m: int):
    for i in range(n):
        for j in range(m):
            if i * j == 6:
                return i + j
            if j > i:
                break
    return -1


def return_in_if(x, flag: bool):
    if flag:
        return x + 1
    y = x * 2
    if y.sum() > 100:
        return y
    return y - 1


@pytest.mark.parametrize("n", [0, 1, 2, 7])
def test_exits(n):
    for stop in (0, 2, 5):
        check(break_continue, n, stop)
    for target in (0, 1, 5):
        check(early_return, list(range(n)), target)
    for m in (0, 1, 4):
        check(nested_return, n, m)
    check(return_in_if, t(1, n), n % 2 == 0)


def while_with_return(n: int):
    i = 0
    while i < n:
        i += 1
        if i == 3:
            return i * 10
    return i


@pytest.mark.parametrize("n", [0, 1, 3, 5])
def test_while_return(n):
    check(while_with_return, n)


def asserts_and_raises(x, n: int):
    assert n >= 0, "n must be non-negative"
    assert n < 100
    if n == 7:
        raise ValueError(f"bad n {n}")
    return x * n


def test_assert_and_raise():
    graph = check(asserts_and_raises, t(1), 3)
    with pytest.raises(AssertionError, match="non-negative"):
        run_graph(graph, [t(1), -1])
    with pytest.raises(AssertionError):
        run_graph(graph, [t(1), 200])
    with pytest.raises(ValueError, match="bad n 7"):
        run_graph(graph, [t(1), 7])


def test_uninitialized_on_raising_path():
    def f(n: int):
        if n > 0:
            y = n
        else:
            raise RuntimeError("neg")
        return y
    graph = check(f, 2)
    assert "prim::Uninitialized" in str(graph)


# ---------------------------------------------------------------------------
# inlining


def helper(x, k: int = 2):
    return x * k


def uses_helper(x):
    return helper(x) + helper(x, k=3) + helper(x, 4)


def test_inline_helpers():
    graph = check(uses_helper, t(1, 2))
    assert "prim::Loop" not in str(graph)


def rec(x, n: int):
    return rec(x, n - 1)


def test_recursion_is_an_error():
    assert_error(rec, "recursive calls aren't supported", "return rec(x, n - 1)")


def test_inline_argument_checks():
    def wrong_type(x):
        return helper(x, "a")
    assert_error(wrong_type, "Expected a value of type 'int' for argument 'k'",
                 'helper(x, "a")')

    def too_many(x):
        return helper(x, 1, 2)
    assert_error(too_many, "takes 2 positional arguments but 3 were given",
                 "helper(x, 1, 2)")

    def bad_keyword(x):
        return helper(x, q=1)
    assert_error(bad_keyword, "unexpected keyword argument 'q'", "q=1")

    def missing(x):
        return helper()
    assert_error(missing, "missing required argument 'x'", "helper()")


# ---------------------------------------------------------------------------
# modules


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 2)
        self.register_buffer("shift", ember.ones(2, dtype=ember.float32))
        self.scale = 2.0
        self.use_relu = True

    def helper(self, y):
        return y + self.shift

    def forward(self, x):
        y = self.linear(x) * self.scale
        if self.use_relu:
            y = F.relu(y)
        if self.training:
            y = y + 1
        return self.helper(y)


def test_module_forward():
    block = Block()
    graph, sig, names = compile_module_forward(block)
    assert names == ["linear.weight", "linear.bias", "shift"]
    assert sig.names == names + ["x"]
    state = dict(block.named_parameters())
    state.update(dict(block.named_buffers()))
    x = ember.randn(4, 3, dtype=ember.float32)
    args = [state[n] for n in names] + [x]
    same(run_graph(graph, args), block(x))
    block.eval()
    graph, _, _ = compile_module_forward(block)
    same(run_graph(graph, args), block(x))


# ---------------------------------------------------------------------------
# printing


def test_graph_printing():
    def f(x, n: int):
        if n > 2:
            x = x + 1
        return x
    text = str(compile_function(f)[0])
    assert text.startswith("graph(%x : Tensor,")
    assert "%n : int" in text
    assert "prim::If(" in text and "block0():" in text and "block1():" in text
    assert "aten::add(%x, " in text
    assert "aten::gt(%n, " in text

    def g(n: int):
        s = 0
        for i in range(n):
            s += i
        return s
    text = str(compile_function(g)[0])
    assert "prim::Loop(" in text and "aten::__range_length" in text
    assert "block0(%i : int, %s." in text
    assert "aten::iadd" in text


def test_source_ranges():
    graph, _ = compile_function(arith)
    node = next(n for n in graph.all_nodes() if n.kind == "aten::matmul")
    rng = node.source_range
    assert rng.lines[rng.lineno - 1].strip().startswith("return b @ x")
    assert rng.filename.endswith("test_jit_frontend.py")


# ---------------------------------------------------------------------------
# errors


def test_unsupported_syntax():
    def with_stmt(x):
        with x:
            pass
        return x
    assert_error(with_stmt, "with statements aren't supported", "with x:")

    def lam(x):
        f = lambda y: y  # noqa: E731
        return x
    assert_error(lam, "lambda expressions aren't supported", "lambda y: y")

    def comp(xs: List[int]):
        return [v for v in xs]
    assert_error(comp, "list comprehensions aren't supported", "[v for v in xs]")

    def tryblock(x):
        try:
            x = x + 1
        except ValueError:
            pass
        return x
    assert_error(tryblock, "try blocks aren't supported", "try:")

    def glob(x):
        global SCALE
        return x
    assert_error(glob, "global statements aren't supported", "global SCALE")

    def nested(x):
        def inner(y):
            return y
        return x
    assert_error(nested, "nested function definitions aren't supported", "def inner")

    def star(*args):
        return args
    assert_error(star, "variadic arguments (*args) aren't supported", "def star")

    def walrus(x, n: int):
        if (m := n) > 0:
            return x
        return x
    assert_error(walrus, "assignment expressions (:=) aren't supported", "m := n")


def test_unknown_names():
    def name(x):
        return x + undefined_thing  # noqa: F821
    assert_error(name, "undefined value undefined_thing", "undefined_thing")

    def method(x):
        return x.no_such_method()
    assert_error(method, "unknown attribute or method 'no_such_method' of Tensor",
                 "x.no_such_method")

    def function(x):
        return ember.no_such_function(x)
    assert_error(function, "unknown attribute or function 'no_such_function'",
                 "ember.no_such_function")


def test_type_errors():
    def cond_str(x, s: str):
        if s:
            return x
        return x
    assert_error(cond_str, "expected a bool, a number or a tensor for a condition, "
                 "but got a value of type str", "if s:")

    def add_str(x):
        return "a" + x
    assert_error(add_str, "unsupported operand type(s) for +: 'str' and 'Tensor'",
                 'return "a" + x')

    def reassign(x):
        n = 1
        n = x
        return n
    assert_error(reassign, "Variable 'n' previously had type int but is now being "
                 "assigned to a value of type Tensor", "n = x")

    def returns(x, flag: bool):
        if flag:
            return x
        return 1
    assert_error(returns, "Previous return statement returned a value of type "
                 "Tensor but this return statement returns a value of type int",
                 "return 1")

    def mixed_list(x):
        return [1, x]
    assert_error(mixed_list, "Lists must contain only a single type, first element "
                 "had type int and element 1 had type Tensor", "[1, x]")

    def annotated(x) -> int:
        return x
    assert_error(annotated, "Return value was annotated as having type int",
                 "return x")

    def loop_type(x, n: int):
        y = 0
        for i in range(n):
            y = x
        return y
    assert_error(loop_type, "Variable 'y' previously had type int", "y = x")


def test_branch_and_loop_definitions():
    def one_branch(x, flag: bool):
        if flag:
            y = x
        return y
    err = assert_error(one_branch, "y is not defined in the false branch", "return y")
    assert err.source_range.lineno > 0

    def in_loop(x, n: int):
        for i in range(n):
            z = x
        return z
    assert_error(in_loop, "z is first defined inside the loop", "return z")

    def unused_ok(x, flag: bool):
        if flag:
            y = x
        return x
    check(unused_ok, t(1), True)


def test_branch_type_mismatch():
    def f(x, flag: bool):
        if flag:
            y = x
        else:
            y = 1
        return y
    assert_error(f, "Type mismatch: y is set to type Tensor in the true branch "
                 "and type int in the false branch", "if flag:")


def test_unsupported_raise_and_calls():
    class MyError(Exception):
        pass

    def raises(x):
        raise MyError("no")
    assert_error(raises, "only exceptions of the classes", 'raise MyError("no")')

    def printing(x):
        print(x)
        return x
    assert_error(printing, "Python builtin print() isn't supported", "print(x)")

    def tuple_index(x):
        pair = (x, 1)
        return pair[2]
    assert_error(tuple_index, "tuple index 2 out of range", "pair[2]")

    def range_float(x):
        for i in range(2.5):
            x = x + 1
        return x
    assert_error(range_float, "range() arguments must be int, not float", "range(2.5)")


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
        self.heads = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])
        self.tied = self.heads[0]

    def forward(self, x, extra: Optional[ember.Tensor] = None):
        y = self.seq(x)
        for head in self.heads:
            y = y + head(y)
        y = self.tied(y)
        if extra is not None:
            y = y * extra
        return y


def test_sequential_module_list_and_shared_modules():
    stack = Stack()
    graph, sig, names = compile_module_forward(stack)
    assert len(names) == len(set(names)) == 8  # the tied head's tensors once
    assert sig.names[-2:] == ["x", "extra"]
    assert sig.defaults == {"extra": None}
    state = dict(stack.named_parameters())
    x = ember.randn(5, 3, dtype=ember.float32)
    for extra in (None, ember.full((5, 2), 2.0, dtype=ember.float32)):
        same(run_graph(graph, [state[n] for n in names] + [x, extra]),
             stack(x, extra))


def counting(xs: List[int], limit: int):
    count = 0
    total = 0
    i = 0
    while i < len(xs):
        v = xs[i]
        i += 1
        if v < 0:
            continue
        if total + v > limit:
            break
        total += v
        count += 1
    return count, total, i


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-5, 9), max_size=6), st.integers(0, 20))
def test_while_break_continue_hypothesis(xs, limit):
    check(counting, xs, limit)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 4), max_size=6), st.integers(0, 4))
def test_early_return_hypothesis(xs, target):
    check(early_return, xs, target)


def loop_mutation(x, n: int):
    for i in range(n):
        x[i % 3] = x[i % 3] * 2.0
        x += 1.0
    return x


def test_inplace_in_loops():
    for n in (0, 1, 4):
        graph, _ = compile_function(loop_mutation)
        same(run_graph(graph, [t(1, 2, 3), n]), loop_mutation(t(1, 2, 3), n))


def unannotated_none(x, b=None):
    if b is None:
        return x
    return x + b


def test_unannotated_none_default_is_optional_tensor():
    _, sig = compile_function(unannotated_none)
    assert str(sig.params[1].type) == "Optional[Tensor]"
    check(unannotated_none, t(1), None)
    check(unannotated_none, t(1), t(2))


def test_exit_transform_structure():
    text = str(compile_function(early_return)[0])
    assert text.count("prim::Loop(") == 1
    # the loop carries the returned flag and value; the exit checks follow
    assert "aten::__not__" in text and "prim::Uninitialized" in text
    assert "aten::__range_length" in text


def test_is_none_on_non_optional_is_constant():
    def f(x):
        return x is None, x is not None
    graph = check(f, t(1))
    assert "aten::__is__" not in str(graph)


def test_library_call_arity():
    def extra_keyword(x):
        return F.softmax(x, dim=0, bogus=1)
    assert_error(extra_keyword, "unexpected keyword argument 'bogus'", "bogus=1")

    def too_few(x):
        return F.linear(x)
    assert_error(too_few, "missing a required argument", "F.linear(x)")


class MaybeBias(nn.Module):
    def __init__(self, bias):
        super().__init__()
        self.register_buffer("bias", ember.ones(2, dtype=ember.float32) if bias else None)

    def forward(self, x):
        if self.bias is not None:
            x = x + self.bias
        return x


def test_constant_condition_compiles_only_the_taken_branch():
    for bias in (False, True):
        module = MaybeBias(bias)
        graph, _, names = compile_module_forward(module)
        assert "prim::If" not in str(graph)
        x = t(1, 2)
        state = {"bias": module.bias}
        same(run_graph(graph, [state[n] for n in names] + [x]), module(x))


def test_inline_scripted_function():
    scripted = ember.jit.script(helper)

    def caller(x):
        return scripted(x, 5)
    graph, _ = compile_function(caller)
    same(run_graph(graph, [t(1, 2)]), helper(t(1, 2), 5))
    assert "aten::mul" in str(graph)
