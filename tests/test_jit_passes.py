"""Tests of the jit optimisation passes (python/ember/jit/passes/).

Graphs are written in the printed IR format and read with parse_ir; each
rule is checked where it must fire and where it must not (inexact dtypes,
unknown types, aliasing), and every pass is checked to keep what
interpreter.run_graph computes.
"""

import importlib
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
from ember.jit import interpreter
from ember.jit import passes
from ember.jit import types as T
from ember.jit.ir_parser import IRParseError, parse_ir
from ember.jit.passes.log import RewriteLog, parse_opt_limit


# the package exports the pass functions under the modules' names
fusion_module = importlib.import_module("ember.jit.passes.fusion")


def kinds(graph):
    return [node.kind for node in graph.all_nodes()]


def callees(graph):
    return [node.callee for node in graph.all_nodes() if node.callee]


def same(a, b):
    """Equal values, tensors by dtype, shape and bits (NaN equal to NaN)."""
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, ember.Tensor):
        return isinstance(b, ember.Tensor) and a.dtype == b.dtype \
            and a.shape == b.shape and np.array_equal(a.numpy(), b.numpy(),
                                                      equal_nan=a.dtype.is_floating_point)
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return type(a) is type(b) and a == b


def check_pass(text, pass_fn, args, changed=True):
    """Runs pass_fn on the graph; results must be unchanged."""
    graph = parse_ir(text)
    expected = interpreter.run_graph(graph, fresh(args))
    assert pass_fn(graph, RewriteLog({})) is changed
    passes.lint_graph(graph)
    assert same(interpreter.run_graph(graph, fresh(args)), expected)
    return graph


def identities(result, args):
    """Which outputs are the same object as another output or an input."""
    outs = result if isinstance(result, tuple) else (result,)
    return [(i, j) for i, a in enumerate(outs) for j, b in enumerate(outs + tuple(args))
            if i != j and isinstance(a, ember.Tensor) and a is b]


def fresh(args):
    """Copies of tensor arguments (a graph may write into its inputs)."""
    return [a.clone() if isinstance(a, ember.Tensor) else a for a in args]


def f32(*shape):
    return ember.randn(*shape, dtype=ember.float32)


# ---------------------------------------------------------------------------
# parse_ir


ROUND_TRIP = """
graph(%x : Tensor(float32, 2d),
      %n : int):
  %one : int = prim::Constant[value=1]()
  %t : bool = prim::Constant[value=True]()
  %y : Tensor = aten::t(%x)
  %z : Tensor = aten::add(%y, %one, alpha=%one)
  %r : Tensor = prim::Loop(%n, %t, %z)
    block0(%i : int, %acc : Tensor):
      %w : Tensor = aten::mul(%acc, %i)
      -> (%t, %w)
  %m : str = prim::Constant[value='no\\'pe']()
  return (%r)
"""


def test_parse_ir_round_trip():
    graph = parse_ir(ROUND_TRIP)
    assert str(parse_ir(str(graph))) == str(graph)
    assert graph.inputs[0].type == T.TensorType(ember.float32, 2)
    assert callees(graph)[:2] == ["ember.t", "ember.add"]   # the first allowed spelling
    assert graph.block.nodes[-1].attrs["value"] == "no'pe"


def test_parse_ir_errors():
    with pytest.raises(IRParseError, match="undefined value %q"):
        parse_ir("graph(%x : Tensor):\n  %y : Tensor = aten::neg(%q)\n  return (%y)")
    with pytest.raises(KeyError, match="not an operator"):
        parse_ir("graph(%x : Tensor):\n  %y : Tensor = os.system(%x)\n  return (%y)")


# ---------------------------------------------------------------------------
# type propagation


def test_propagate_types_through_if_and_loop():
    graph = parse_ir("""
graph(%x : Tensor(float64, 2d), %c : bool, %n : int):
  %t : bool = prim::Constant[value=True]()
  %a : Tensor = ember.exp(%x)
  %b : Tensor = prim::If(%c)
    block0():
      -> (%a)
    block1():
      %s : Tensor = ember.sum(%a)
      -> (%s)
  %r : Tensor = prim::Loop(%n, %t, %a)
    block0(%i : int, %acc : Tensor):
      %w : Tensor = operator.mul(%acc, %i)
      -> (%t, %w)
  return (%b, %r)
""")
    assert passes.propagate_types(graph) is True
    assert passes.propagate_types(graph) is False
    a, b, r = (graph.block.nodes[i].output for i in (1, 2, 3))
    assert a.type == T.TensorType(ember.float64, 2)
    assert b.type == T.Tensor           # sum's type is unknown: the join is plain
    assert r.type == T.TensorType(ember.float64, 2)


# ---------------------------------------------------------------------------
# peephole


def peephole_graph(body, x_type="Tensor(float32, 2d)", extra=""):
    return parse_ir(f"""
graph(%x : {x_type}{extra}):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %fzero : float = prim::Constant[value=0.0]()
  %fone : float = prim::Constant[value=1.0]()
  %true : bool = prim::Constant[value=True]()
  %m1 : int = prim::Constant[value=-1]()
{body}
  %out : Tensor = ember.exp(%y)
  return (%out)
""")


def fires(body, x_type="Tensor(float32, 2d)", arg=None):
    """Whether the peephole rewrites %y's definition away; checks results."""
    graph = peephole_graph(body, x_type)
    args = [arg if arg is not None else f32(2, 2)]
    expected = interpreter.run_graph(graph, args)
    changed = passes.peephole(graph, RewriteLog({}))
    passes.lint_graph(graph)
    assert same(interpreter.run_graph(graph, args), expected)
    if changed:
        assert graph.block.nodes[-1].inputs[0] is graph.inputs[0]
    return changed


def test_double_transpose():
    assert fires("  %a : Tensor = Tensor.t(%x)\n  %y : Tensor = Tensor.t(%a)")
    assert fires("  %a : Tensor = attr.T(%x)\n  %y : Tensor = attr.T(%a)",
                 "Tensor(float32, 3d)", f32(2, 3, 4))
    assert fires("  %a : Tensor = Tensor.transpose(%x, %zero, %one)\n"
                 "  %y : Tensor = Tensor.transpose(%a, %m1, %zero)")
    # t() of a 3-d tensor raises (not hidden); unknown rank: not applied
    graph = peephole_graph("  %a : Tensor = Tensor.t(%x)\n  %y : Tensor = Tensor.t(%a)",
                           "Tensor(float32, 3d)")
    assert passes.peephole(graph) is False
    graph = peephole_graph("  %a : Tensor = Tensor.t(%x)\n  %y : Tensor = Tensor.t(%a)",
                           "Tensor")
    assert passes.peephole(graph) is False


def test_transpose_needs_the_same_pair():
    x = f32(2, 3, 4)
    two = "  %two : int = prim::Constant[value=2]()\n"
    assert not fires(two + "  %a : Tensor = Tensor.transpose(%x, %zero, %one)\n"
                     "  %y : Tensor = Tensor.transpose(%a, %one, %two)",
                     "Tensor(float32, 3d)", x)
    assert fires(two + "  %a : Tensor = Tensor.transpose(%x, %zero, %two)\n"
                 "  %y : Tensor = Tensor.transpose(%a, %two, %zero)",
                 "Tensor(float32, 3d)", x)


@pytest.mark.parametrize("body,x_type,arg,expected", [
    ("operator.add(%x, %zero)", "Tensor(int64, 2d)", None, True),
    ("operator.add(%zero, %x)", "Tensor(int64, 2d)", None, True),
    ("operator.add(%x, %zero)", "Tensor(float32, 2d)", None, False),  # -0.0
    ("operator.sub(%x, %zero)", "Tensor(float32, 2d)", None, True),
    ("operator.sub(%x, %fzero)", "Tensor(float32, 2d)", None, True),
    ("operator.sub(%x, %fzero)", "Tensor(int64, 2d)", None, False),  # -> float
    ("operator.mul(%x, %one)", "Tensor(float32, 2d)", None, True),
    ("operator.mul(%one, %x)", "Tensor(int32, 2d)", None, True),
    ("operator.mul(%x, %fone)", "Tensor(int64, 2d)", None, False),
    ("operator.mul(%x, %one)", "Tensor(bool, 2d)", None, False),     # -> int64
    ("operator.mul(%x, %true)", "Tensor(float32, 2d)", None, False),
    ("operator.mul(%x, %one)", "Tensor", None, False),              # dtype unknown
    ("operator.truediv(%x, %one)", "Tensor(float64, 2d)", None, True),
    ("operator.truediv(%x, %one)", "Tensor(int64, 2d)", None, False),  # -> float
    ("ember.mul(%x, %one)", "Tensor(float32, 2d)", None, True),
    ("operator.add(%x, %one)", "Tensor(int64, 2d)", None, False),
])
def test_identity_arithmetic(body, x_type, arg, expected):
    dtype = T.parse_type(x_type).dtype or ember.float32
    if arg is None:
        arg = (ember.randn(2, 2, dtype=ember.float64) * 5).to(dtype)
    assert fires(f"  %y : Tensor = {body}", x_type, arg) is expected


def test_identity_arithmetic_on_numbers():
    text = """
graph(%n : int, %f : float):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %a : int = operator.add(%n, %zero)
  %b : float = operator.add(%f, %zero)
  %c : float = operator.truediv(%n, %one)
  %d : float = operator.mul(%f, %one)
  return (%a, %b, %c, %d)
"""
    graph = check_pass(text, passes.peephole, [3, -0.0])
    assert graph.outputs[0] is graph.inputs[0]      # n + 0
    assert graph.outputs[1] is not graph.inputs[1]  # -0.0 + 0 is 0.0
    assert graph.outputs[2].type == T.Float         # n / 1 is a float
    assert graph.outputs[3] is graph.inputs[1]


def test_no_rewrite_hides_an_error():
    graph = peephole_graph("  %y : Tensor = ember.mul(%one, %x)")
    with pytest.raises(TypeError):
        interpreter.run_graph(graph, [f32(2, 2)])
    assert passes.peephole(graph) is False
    numbers = parse_ir("graph(%n : int):\n  %a : int = ember.neg(%n)\n"
                       "  %b : int = ember.neg(%a)\n  return (%b)")
    assert passes.peephole(numbers) is False


def test_double_negation():
    body = "  %a : Tensor = operator.neg(%x)\n  %y : Tensor = ember.neg(%a)"
    assert fires(body, "Tensor(int64, 2d)", ember.tensor([[1, -2]], dtype=ember.int64))
    graph = peephole_graph(body, "Tensor(bool, 2d)")
    assert passes.peephole(graph) is False          # -bool raises


def test_reshape_to_own_shape():
    assert fires("  %s : List[int] = attr.shape(%x)\n"
                 "  %y : Tensor = Tensor.reshape(%x, %s)", "Tensor")
    assert fires("  %s : List[int] = Tensor.size(%x)\n"
                 "  %y : Tensor = Tensor.view(%x, %s)", "Tensor")


ALIASING = """
graph(%x : Tensor(float32, 1d)):
  %one : int = prim::Constant[value=1]()
  %y : Tensor = operator.mul(%x, %one)
  %w : Tensor = Tensor.add_(%y, %one)
  return (%x)
"""


def test_no_rewrite_when_written_in_place_or_returned():
    check_pass(ALIASING, passes.peephole, [f32(3)], changed=False)
    returned = """
graph(%x : Tensor(float32, 1d)):
  %one : int = prim::Constant[value=1]()
  %y : Tensor = operator.mul(%x, %one)
  %v : Tensor = Tensor.view(%y, %one)
  return (%v)
"""
    check_pass(returned, passes.peephole, [f32(1)], changed=False)


def test_if_output_equal_to_condition_and_is_none():
    text = """
graph(%c : bool, %x : Tensor):
  %true : bool = prim::Constant[value=True]()
  %false : bool = prim::Constant[value=False]()
  %none : NoneType = prim::Constant[value=None]()
  %r : bool = prim::If(%c)
    block0():
      -> (%true)
    block1():
      -> (%false)
  %n : bool = operator.is_(%x, %none)
  %m : bool = operator.is_not(%x, %none)
  return (%r, %n, %m)
"""
    graph = check_pass(text, passes.peephole, [True, f32(1)])
    assert graph.outputs[0] is graph.inputs[0]
    assert [v.node.attrs["value"] for v in graph.outputs[1:]] == [False, True]


def test_type_facts_and_same_branches():
    text = """
graph(%x : Tensor(float64, 3d), %c : bool):
  %d : int = Tensor.dim(%x)
  %n : int = attr.ndim(%x)
  %t : dtype = attr.dtype(%x)
  %f : bool = Tensor.is_floating_point(%x)
  %r : Tensor = prim::If(%c)
    block0():
      -> (%x)
    block1():
      -> (%x)
  %s : Tuple[int, int, dtype, bool, Tensor] = prim.tuple(%d, %n, %t, %f, %r)
  return (%s)
"""
    graph = check_pass(text, passes.peephole, [ember.zeros(1, 1, 2, dtype=ember.float64), False])
    tup = graph.outputs[0].node
    assert [v.node.attrs.get("value") for v in tup.inputs[:4]] == [
        3, 3, ember.float64, True]
    assert tup.inputs[4] is graph.inputs[0]
    unknown = parse_ir("graph(%x : Tensor):\n  %d : int = Tensor.dim(%x)\n  return (%d)")
    assert passes.peephole(unknown) is False


# ---------------------------------------------------------------------------
# constant folding


def test_constant_fold_calls():
    text = """
graph(%x : Tensor):
  %two : int = prim::Constant[value=2]()
  %zero : int = prim::Constant[value=0]()
  %a : int = operator.mul(%two, %two)
  %b : float = math.sqrt(%a)
  %bad : float = operator.truediv(%two, %zero)
  %r : Tensor = operator.mul(%x, %b)
  return (%r, %bad)
"""
    graph = parse_ir(text)
    assert passes.constant_fold(graph) is True
    consts = [n.attrs["value"] for n in graph.block.nodes if n.kind == "prim::Constant"]
    assert 4 in consts and 2.0 in consts
    assert "operator.truediv" in callees(graph)    # raises at run time: kept
    with pytest.raises(ZeroDivisionError):
        interpreter.run_graph(graph, [f32(1)])


def test_constant_fold_refuses_random_big_and_escaping_tensors():
    text = """
graph(%x : Tensor):
  %n : int = prim::Constant[value=3]()
  %big : int = prim::Constant[value=2000]()
  %r : Tensor = ember.rand(%n)
  %z : Tensor = ember.zeros(%n)
  return (%r, %z)
"""
    graph = parse_ir(text)
    assert passes.constant_fold(graph) is False


def test_constant_fold_if_and_loop():
    text = """
graph(%x : Tensor):
  %false : bool = prim::Constant[value=False]()
  %true : bool = prim::Constant[value=True]()
  %zero : int = prim::Constant[value=0]()
  %a : Tensor = prim::If(%false)
    block0():
      %n : Tensor = ember.neg(%x)
      -> (%n)
    block1():
      %e : Tensor = ember.exp(%x)
      -> (%e)
  %b : Tensor = prim::Loop(%zero, %true, %a)
    block0(%i : int, %acc : Tensor):
      %w : Tensor = ember.neg(%acc)
      -> (%true, %w)
  return (%b)
"""
    graph = check_pass(text, passes.constant_fold, [f32(3)])
    assert "prim::If" not in kinds(graph) and "prim::Loop" not in kinds(graph)
    assert callees(graph) == ["ember.exp"]


# ---------------------------------------------------------------------------
# CSE


def test_cse_shares_pure_nodes_and_keeps_constants_apart():
    text = """
graph(%x : Tensor, %c : bool):
  %one : int = prim::Constant[value=1]()
  %one.1 : int = prim::Constant[value=1]()
  %fone : float = prim::Constant[value=1.0]()
  %true : bool = prim::Constant[value=True]()
  %a : Tensor = operator.add(%x, %one)
  %b : Tensor = operator.add(%x, %one.1)
  %c1 : Tensor = operator.add(%x, %fone)
  %d : Tensor = operator.add(%x, %true)
  %r : Tensor = prim::If(%c)
    block0():
      %e : Tensor = operator.add(%x, %one)
      -> (%e)
    block1():
      %f : Tensor = ember.exp(%x)
      -> (%f)
  %g : Tensor = ember.exp(%x)
  %s : Tensor = ember.rand(%one)
  %s2 : Tensor = ember.rand(%one)
  %l : List[Tensor] = prim.list(%a, %b, %c1, %d, %r, %g)
  %t : Tensor = ember.stack(%l)
  return (%t)
"""
    graph = parse_ir(text)
    args = [f32(3), True]
    expected = interpreter.run_graph(graph, args)
    assert passes.cse(graph, RewriteLog({})) is True
    assert same(interpreter.run_graph(graph, args), expected)
    adds = [n for n in graph.all_nodes() if n.callee == "operator.add"]
    assert len(adds) == 3                           # + 1, + 1.0, + True
    assert callees(graph).count("ember.exp") == 2   # sibling block not shared
    assert callees(graph).count("ember.rand") == 2  # not pure
    assert passes.cse(graph) is False


def test_cse_refuses_written_values():
    text = """
graph(%x : Tensor):
  %one : int = prim::Constant[value=1]()
  %a : Tensor = operator.add(%x, %one)
  %b : Tensor = operator.add(%x, %one)
  %w : Tensor = Tensor.mul_(%a, %one)
  %r : Tensor = operator.add(%a, %b)
  return (%r)
"""
    check_pass(text, passes.cse, [f32(2)], changed=False)


def test_cse_refuses_reads_of_a_value_written_in_between():
    # found by test_jit_fuzz: `a = (x * 2).relu(); x.add_(1); b = (x * 2).relu()`
    # read the same Value %x with different contents
    text = """
graph(%x : Tensor):
  %two : int = prim::Constant[value=2]()
  %one : int = prim::Constant[value=1]()
  %m : Tensor = operator.mul(%x, %two)
  %a : Tensor = Tensor.relu(%m)
  %w : Tensor = Tensor.add_(%x, %one)
  %m2 : Tensor = operator.mul(%x, %two)
  %b : Tensor = Tensor.relu(%m2)
  %r : Tensor = operator.add(%a, %b)
  return (%r)
"""
    graph = check_pass(text, passes.cse, [f32(2)], changed=False)
    assert callees(graph).count("operator.mul") == 2


# ---------------------------------------------------------------------------
# DCE


def test_dce_removes_dead_code_and_keeps_effects():
    text = """
graph(%x : Tensor, %c : bool, %n : int):
  %true : bool = prim::Constant[value=True]()
  %one : int = prim::Constant[value=1]()
  %dead : Tensor = ember.exp(%x)
  %w : Tensor = Tensor.add_(%x, %one)
  %a : Tensor, %unused : Tensor = prim::If(%c)
    block0():
      %p : Tensor = ember.neg(%x)
      %q : Tensor = ember.sin(%x)
      -> (%p, %q)
    block1():
      -> (%x, %x)
  %l : Tensor, %junk : Tensor = prim::Loop(%n, %true, %a, %x)
    block0(%i : int, %acc : Tensor, %j : Tensor):
      %acc2 : Tensor = operator.add(%acc, %i)
      %j2 : Tensor = ember.cos(%j)
      -> (%true, %acc2, %j2)
  return (%l)
"""
    graph = check_pass(text, passes.dce, [f32(2), True, 3])
    assert callees(graph) == ["Tensor.add_", "ember.neg", "operator.add"]
    if_node, loop = [n for n in graph.block.nodes if n.blocks]
    assert len(if_node.outputs) == 1 and len(if_node.blocks[0].returns) == 1
    assert len(loop.outputs) == 1 and len(loop.inputs) == 3
    assert len(loop.blocks[0].params) == 2
    assert passes.dce(graph) is False


# ---------------------------------------------------------------------------
# unrolling


LOOP = """
graph(%x : Tensor(float64, 1d), %n : int):
  %true : bool = prim::Constant[value=True]()
  %two : float = prim::Constant[value=0.5]()
  %trip : int = {trip}
  %r : Tensor, %k : int = prim::Loop(%trip, %true, %x, %n)
    block0(%i : int, %acc : Tensor, %count : int):
      %s : Tensor = operator.mul(%acc, %two)
      %t : Tensor = operator.add(%s, %i)
      %c2 : int = operator.add(%count, %i)
      -> (%true, %t, %c2)
  return (%r, %k)
"""


@pytest.mark.parametrize("trip", [0, 1, 8, 13, 70])
def test_unroll_constant_trip_counts(trip):
    text = LOOP.format(trip=f"prim::Constant[value={trip}]()")
    graph = check_pass(text, passes.unroll, [ember.ones(2, dtype=ember.float64), 5])
    loops = [n for n in graph.all_nodes() if n.kind == "prim::Loop"]
    assert len(loops) == (1 if trip >= 64 else 0)


def test_unroll_by_factor_with_epilogue():
    text = LOOP.format(trip="operator.add(%n, %n)")
    graph = parse_ir(text)
    assert passes.unroll(graph) is True
    passes.lint_graph(graph)
    assert passes.unroll(graph) is False        # marked: never again
    loops = [n for n in graph.all_nodes() if n.kind == "prim::Loop"]
    assert len(loops) == 2
    original = parse_ir(text)
    for n in (-3, 0, 1, 4, 8, 13):
        args = [ember.arange(2, dtype=ember.float64), n]
        assert same(interpreter.run_graph(graph, args),
                    interpreter.run_graph(original, args))


# ---------------------------------------------------------------------------
# fusion


CHAIN = """
graph(%x : Tensor(float32, 1d), %y : Tensor(float32, 1d), %s : float):
  %one : int = prim::Constant[value=1]()
  %a : Tensor = operator.mul(%x, %y)
  %b : Tensor = operator.add(%a, %one)
  %c : Tensor = ember.exp(%b)
  %d : Tensor = ember.sum(%c)
  %e : Tensor = operator.mul(%b, %s)
  return (%d, %e)
"""


def test_fusion_groups_a_chain():
    graph = check_pass(CHAIN, passes.fusion, [f32(3), f32(3), 2.0])
    group = [n for n in graph.block.nodes if n.kind == "prim::FusionGroup"]
    assert len(group) == 1
    group = group[0]
    sub = group.attrs["subgraph"]
    # the group runs before the sum (which reads %c); %e moves up to it
    assert [v.debug_name for v in group.inputs] == ["x", "y", "s"]
    assert [n.callee for n in sub.block.nodes if n.callee] == [
        "operator.mul", "operator.add", "ember.exp", "operator.mul"]
    assert [v.debug_name for v in sub.outputs] == ["c", "e"]
    assert kinds(graph) == ["prim::Constant", "prim::FusionGroup", "aten::sum"]
    program, outputs = passes.kernel_program(sub)
    assert program == [("mul", 3, 0, 1), ("const", 4, 1), ("add", 5, 3, 4),
                       ("exp", 6, 5), ("mul", 7, 5, 2)]
    assert outputs == [6, 7]


def test_fusion_single_ops_and_inplace_barrier():
    single = """
graph(%x : Tensor(float32, 1d)):
  %a : Tensor = ember.exp(%x)
  %d : Tensor = ember.sum(%a)
  %b : Tensor = ember.sin(%d)
  return (%b)
"""
    check_pass(single, passes.fusion, [f32(3)], changed=False)
    barrier = """
graph(%x : Tensor(float32, 1d), %z : Tensor(float32, 1d)):
  %one : int = prim::Constant[value=1]()
  %a : Tensor = ember.exp(%x)
  %w : Tensor = Tensor.add_(%x, %one)
  %b : Tensor = ember.sin(%a)
  return (%b)
"""
    check_pass(barrier, passes.fusion, [f32(3), f32(3)], changed=False)


def test_fusion_respects_the_operand_limit():
    names = [f"%x{i}" for i in range(9)]
    lines = ["  %s1 : Tensor = operator.add(%x0, %x1)"]
    for i in range(2, 9):
        lines.append(f"  %s{i} : Tensor = operator.add(%s{i - 1}, %x{i})")
    text = ("graph(" + ", ".join(f"{n} : Tensor(float32, 1d)" for n in names)
            + "):\n" + "\n".join(lines) + "\n  return (%s8)\n")
    args = [f32(2) for _ in names]
    graph = check_pass(text, passes.fusion, args)
    for node in graph.all_nodes():
        if node.kind == "prim::FusionGroup":
            tensors = sum(isinstance(v.type, T.TensorType) for v in node.inputs)
            assert tensors + len(node.outputs) <= 8


def test_build_kernel():
    if fusion_module.fused_kernel_type() is None:
        assert passes.build_kernel(parse_ir(CHAIN)) is None
        pytest.skip("ember._C has no FusedKernel yet (the C fused kernel is "
                    "merged by the integrator)")
    graph = parse_ir(CHAIN)
    passes.fusion(graph)
    node = next(n for n in graph.block.nodes if n.kind == "prim::FusionGroup")
    kernel = passes.build_kernel(node.attrs["subgraph"])
    args = [f32(3), f32(3), 2.0]
    out = kernel(*args)
    assert all(same(a, b) for a, b in zip(
        out, interpreter.run_subgraph(node.attrs["subgraph"], args)))


# ---------------------------------------------------------------------------
# manager: optimize, explain, opt limit


PIPELINE = """
graph(%x : Tensor(float32, 2d)):
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %a : Tensor = Tensor.t(%x)
  %b : Tensor = Tensor.t(%a)
  %c : Tensor = operator.sub(%b, %zero)
  %d : Tensor = operator.mul(%c, %one)
  %g : int = operator.add(%two, %two)
  %h : Tensor = operator.mul(%d, %g)
  %k : Tensor = ember.exp(%h)
  return (%k)
"""


def test_optimize_and_explain():
    graph = parse_ir(PIPELINE)
    args = [f32(2, 2)]
    expected = interpreter.run_graph(graph, args)
    text = passes.explain(graph)
    assert text.startswith(f"== input ==\n{graph}")     # graph not modified
    assert "== peephole: t(t(%x)) -> %x" in text
    assert "== constant_fold: aten::add(2, 2) -> 4 ==" in text
    assert "== fusion: fused mul -> exp ==" in text
    optimized = passes.optimize(graph)
    assert kinds(optimized) == ["prim::FusionGroup"]
    assert same(interpreter.run_graph(optimized, args), expected)
    assert str(parse_ir(str(optimized))) == str(optimized)   # subgraphs too
    unfused = passes.optimize(parse_ir(PIPELINE), fuse=False)
    assert callees(unfused) == ["operator.mul", "ember.exp"]


def test_opt_limit(monkeypatch):
    monkeypatch.setenv("EMBER_JIT_OPT_LIMIT", "peephole=1,constant_fold=0")
    graph = passes.optimize(parse_ir(PIPELINE), fuse=False)
    # only t(t(x)) went; 2 + 2 was not folded
    assert callees(graph) == ["operator.sub", "operator.mul", "operator.add",
                              "operator.mul", "ember.exp"]
    assert parse_opt_limit("cse=0, dce=3") == {"cse": 0, "dce": 3}
    with pytest.raises(ValueError, match="unknown pass 'peeephole'"):
        parse_opt_limit("peeephole=1")
    with pytest.raises(ValueError, match="expected 'pass=N'"):
        parse_opt_limit("cse")
    monkeypatch.setenv("EMBER_JIT_OPT_LIMIT", "dce=1")
    graph = parse_ir("graph(%x : Tensor):\n  %a : Tensor = ember.exp(%x)\n"
                     "  %b : Tensor = ember.sin(%a)\n  return (%x)")
    assert passes.dce(graph) is True            # only the last dead node goes
    assert callees(graph) == ["ember.exp"]
    passes.lint_graph(graph)


# ---------------------------------------------------------------------------
# every pass keeps the results (hypothesis)

UNARY = ["ember.exp", "ember.neg", "operator.neg", "Tensor.t", "ember.sin",
         "ember.abs"]
INPLACE = ["Tensor.add_", "Tensor.mul_", "Tensor.neg_"]
BINARY = ["operator.add", "operator.sub", "operator.mul", "operator.truediv",
          "ember.maximum"]
OPERANDS = ["%zero", "%one", "%fone", "%fzero"]


@st.composite
def random_graphs(draw):
    """A straight-line graph over %x and %y (2x2) with constants."""
    lines = ["  %zero : int = prim::Constant[value=0]()",
             "  %one : int = prim::Constant[value=1]()",
             "  %fzero : float = prim::Constant[value=0.0]()",
             "  %fone : float = prim::Constant[value=1.0]()",
             "  %two : int = prim::Constant[value=2]()",
             "  %four : int = operator.add(%two, %two)"]
    values = ["%x", "%y"]
    for i in range(draw(st.integers(1, 10))):
        choice = draw(st.integers(0, 5))
        if choice == 0:     # in place: the alias analysis must notice
            op = draw(st.sampled_from(INPLACE))
            args = [draw(st.sampled_from(values))]
            if op != "Tensor.neg_":
                args.append(draw(st.sampled_from(["%one", "%two"])))
        elif choice < 3:
            op = draw(st.sampled_from(UNARY))
            args = [draw(st.sampled_from(values))]
        else:
            op = draw(st.sampled_from(BINARY))
            args = [draw(st.sampled_from(values)),
                    draw(st.sampled_from(values + OPERANDS + ["%four"]))]
            if draw(st.booleans()):
                args.reverse()
            if op == "ember.maximum" and not all(a in values for a in args):
                op = "operator.add"
        lines.append(f"  %v{i} : Tensor = {op}({', '.join(args)})")
        values.append(f"%v{i}")
    outs = draw(st.lists(st.sampled_from(values[2:]), min_size=1, max_size=3))
    return lines, outs


@settings(max_examples=40, deadline=None)
@given(graph=random_graphs(),
       dtype=st.sampled_from([ember.float32, ember.float64, ember.int64]),
       data=st.data())
def test_passes_preserve_results(graph, dtype, data):
    lines, outs = graph
    ty = f"Tensor({str(dtype).replace('ember.', '')}, 2d)"
    text = (f"graph(%x : {ty}, %y : {ty}):\n" + "\n".join(lines)
            + f"\n  return ({', '.join(outs)})\n")
    ints = data.draw(st.lists(st.integers(-3, 3), min_size=8, max_size=8))
    x = ember.tensor(ints[:4], dtype=ember.float64).reshape(2, 2).to(dtype)
    y = ember.tensor(ints[4:], dtype=ember.float64).reshape(2, 2).to(dtype)
    x = x * 1.5 if dtype.is_floating_point else x
    args = [x, y]
    try:
        inputs = fresh(args)
        expected = interpreter.run_graph(parse_ir(text), inputs)
        aliasing = identities(expected, inputs)
    except RuntimeError:
        return      # an op refused these dtypes: nothing to preserve
    for pass_fn in (passes.propagate_types, passes.constant_fold,
                    passes.peephole, passes.cse, passes.dce, passes.unroll,
                    passes.fusion, passes.optimize):
        graph_ = parse_ir(text)
        passes.propagate_types(graph_)
        pass_fn(graph_)
        passes.lint_graph(graph_)
        inputs = fresh(args)
        result = interpreter.run_graph(graph_, inputs)
        assert same(result, expected), pass_fn
        assert identities(result, inputs) == aliasing, pass_fn
    # optimize stops at a fixed point: no cleanup pass finds anything more
    graph_ = passes.optimize(parse_ir(text), fuse=False)
    for pass_fn in (passes.constant_fold, passes.peephole, passes.cse, passes.dce):
        assert pass_fn(graph_) is False, pass_fn


# ---------------------------------------------------------------------------
# control flow, and fused kernels standing in for the subgraphs


@st.composite
def loop_graphs(draw):
    """A for loop (constant or input trip count) with an If inside."""
    body_ops = draw(st.lists(st.sampled_from(
        ["operator.mul(%acc, %half)", "operator.add(%acc, %i)",
         "ember.sin(%acc)", "operator.sub(%acc, %zero)",
         "operator.add(%acc, %x)"]), min_size=1, max_size=5))
    lines = []
    prev = "%acc"
    for j, op in enumerate(body_ops):
        lines.append(f"      %b{j} : Tensor = {op.replace('%acc', prev)}")
        prev = f"%b{j}"
    trip = draw(st.sampled_from(["%n", "%c3", "%c9", "%c70", "%zero"]))
    return f"""
graph(%x : Tensor(float64, 1d), %n : int, %flag : bool):
  %true : bool = prim::Constant[value=True]()
  %zero : int = prim::Constant[value=0]()
  %c3 : int = prim::Constant[value=3]()
  %c9 : int = prim::Constant[value=9]()
  %c70 : int = prim::Constant[value=70]()
  %half : float = prim::Constant[value=0.5]()
  %r : Tensor, %k : int = prim::Loop({trip}, %true, %x, %zero)
    block0(%i : int, %acc : Tensor, %count : int):
{chr(10).join(lines)}
      %pick : Tensor = prim::If(%flag)
        block0():
          %e : Tensor = ember.exp({prev})
          -> (%e)
        block1():
          -> ({prev})
      %c2 : int = operator.add(%count, %i)
      -> (%true, %pick, %c2)
  return (%r, %k)
"""


@settings(max_examples=25, deadline=None)
@given(text=loop_graphs(), n=st.integers(-2, 20), flag=st.booleans())
def test_passes_preserve_loops(text, n, flag):
    args = [ember.tensor([0.25, -1.0], dtype=ember.float64), n, flag]
    expected = interpreter.run_graph(parse_ir(text), args)
    for pass_fn in (passes.unroll, passes.optimize):
        graph = parse_ir(text)
        pass_fn(graph)
        passes.lint_graph(graph)
        assert same(interpreter.run_graph(graph, args), expected)


def run_with_kernels(graph, args):
    """run_graph, each FusionGroup run by its FusedKernel (the subgraph
    when the kernel's guard says no)."""
    real = interpreter.run_subgraph
    kernels = {}

    def with_kernel(subgraph, inputs):
        if id(subgraph) not in kernels:
            kernels[id(subgraph)] = passes.build_kernel(subgraph)
        out = kernels[id(subgraph)](*inputs)
        return list(out) if out is not None else real(subgraph, inputs)

    interpreter.run_subgraph = with_kernel
    try:
        return interpreter.run_graph(graph, args)
    finally:
        interpreter.run_subgraph = real


@settings(max_examples=30, deadline=None)
@given(graph=random_graphs(), dtype=st.sampled_from([ember.float32, ember.float64]))
def test_fused_kernels_match_the_subgraphs(graph, dtype):
    if fusion_module.fused_kernel_type() is None:
        pytest.skip("ember._C has no FusedKernel yet")
    lines, outs = graph
    ty = f"Tensor({str(dtype).replace('ember.', '')}, 2d)"
    text = (f"graph(%x : {ty}, %y : {ty}):\n" + "\n".join(lines)
            + f"\n  return ({', '.join(outs)})\n")
    args = [ember.randn(2, 2, dtype=dtype), ember.randn(2, 2, dtype=dtype)]
    expected = interpreter.run_graph(parse_ir(text), fresh(args))
    assert same(run_with_kernels(passes.optimize(parse_ir(text)), fresh(args)),
                expected)


def test_fusion_register_limit():
    lines = ["  %half : float = prim::Constant[value=0.5]()", "  %v0 : Tensor = ember.exp(%x)"]
    for i in range(1, 300):
        lines.append(f"  %v{i} : Tensor = operator.mul(%v{i - 1}, %half)")
    text = ("graph(%x : Tensor(float32, 1d)):\n" + "\n".join(lines)
            + "\n  return (%v299)\n")
    graph = check_pass(text, passes.fusion, [f32(2)])
    groups = [n for n in graph.all_nodes() if n.kind == "prim::FusionGroup"]
    assert len(groups) == 2
    for node in groups:
        sub = node.attrs["subgraph"]
        assert len(sub.inputs) + len(sub.block.nodes) <= 256
        if fusion_module.fused_kernel_type() is not None:
            passes.build_kernel(sub)        # the C validation accepts it


def test_identity_table_agrees_with_torch():
    """Every (dtype, op, number) the peephole treats as exact is exact in
    torch: same dtype, same bits (-0.0 included)."""
    torch = pytest.importorskip("torch")
    import operator
    peephole_module = importlib.import_module("ember.jit.passes.peephole")
    functions = {"+": operator.add, "-": operator.sub, "*": operator.mul,
                 "/": operator.truediv}
    identity = {"+": 0, "-": 0, "*": 1, "/": 1}
    for name in ("bool", "uint8", "int8", "int16", "int32", "int64",
                 "float32", "float64"):
        dtype = getattr(ember, name)
        values = [-0.0, 0.0, 1.5, -2.0, float("inf"), float("nan")] \
            if dtype.is_floating_point else [0, 1, 3]
        x = torch.tensor(values, dtype=getattr(torch, name)) \
            if name != "bool" else torch.tensor([True, False])
        for op, fn in functions.items():
            for number in (identity[op], float(identity[op]), bool(identity[op])):
                if not peephole_module._exact_identity(
                        T.TensorType(dtype, 1), number, op):
                    continue
                result = fn(x, number)
                assert result.dtype == x.dtype, (name, op, number)
                assert torch.equal(bits(result), bits(x)), (name, op, number)
    # and the one it refuses on floats for that reason
    minus_zero = torch.tensor([-0.0])
    assert not torch.equal(bits(minus_zero + 0), bits(minus_zero))


def bits(tensor):
    """The tensor's bytes as integers (so -0.0 != 0.0 and nan == nan)."""
    import torch
    return tensor.view(torch.uint8)


def elif_chain(branches, directory):
    """`if k == 0: ... elif k == 1: ... else: ...`, from a module file."""
    lines = ["import ember", "", "", "def chain(x, k: int):"]
    for i in range(branches):
        lines.append(f"    {'if' if i == 0 else 'elif'} k == {i}:")
        lines.append(f"        x = x * {i + 1} + 1")
    lines += ["    else:", "        x = x - 1", "    return x", ""]
    path = directory / f"ember_elif_chain_{branches}.py"
    path.write_text("\n".join(lines))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.chain


def test_elif_chain_compiles_in_linear_side_effect_checks(tmp_dir, monkeypatch):
    # has_side_effects(If) used to ask every nested node, and each nested
    # If asked its own again: 2**n calls for n branches (20: 18 s, 24 never
    # finished).  Counted, not timed: the calls must grow linearly, and a
    # budget far above the linear count stops a regression at once (fails,
    # never hangs: pytest.fail is no Exception the compiler could catch).
    import ember.jit.passes.util as util
    checks = []
    original = util.has_side_effects

    def counting(node):
        checks.append(node)
        if len(checks) > 100_000:
            pytest.fail("has_side_effects called over 100000 times")
        return original(node)

    monkeypatch.setattr(util, "has_side_effects", counting)
    counts = {}
    for branches in (20, 40):
        chain = ember.jit.script(elif_chain(branches, tmp_dir))
        checks.clear()
        x = ember.ones(2)
        for k in (0, 7, branches - 1, branches, -1):
            want = x * (k + 1) + 1 if 0 <= k < branches else x - 1
            assert chain(x, k).tolist() == want.tolist()
        counts[branches] = len(checks)
    assert 0 < counts[40] <= 2.5 * counts[20], counts
