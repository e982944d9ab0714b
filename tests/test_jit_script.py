"""ember.jit end to end: script -> passes -> bytecode -> the C VM.

Each program runs three ways and must agree: eagerly (the oracle), through
the reference graph interpreter on the unoptimised graph, and through the
compiled, optimised, specialised bytecode in the C VM (fused or not)."""

import math
import warnings
from typing import List, Optional, Tuple

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
from ember import jit
from ember.jit import bytecode, interpreter
from ember.jit.function import compile_graph


def close(a, b):
    if isinstance(a, ember.Tensor):
        assert isinstance(b, ember.Tensor)
        assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(),
                                   rtol=1e-6, atol=1e-6)
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            close(x, y)
    else:
        assert a == b or (a != a and b != b)


def check(fn, *args):
    """fn(*args) eagerly == scripted (C VM) == unoptimised graph interpreted
    == generic (unspecialised) program."""
    expected = fn(*args)
    scripted = jit.script(fn)
    close(expected, scripted(*args))
    close(expected, scripted(*args))  # the cached specialisation
    bound = scripted.parameters.bind(args, {})   # defaults filled in
    close(expected, interpreter.run_graph(scripted.graph, bound))
    close(expected, scripted.generic.code(*bound))
    return scripted


def t(*values, dtype=ember.float32):
    return ember.tensor(list(values), dtype=dtype)


# ---- programs -----------------------------------------------------------------


def elementwise_chain(a, b):
    return 2 * a * a + 3 * b - a / (b + 1)


def with_branches(x, n: int):
    if n > 2:
        y = x * 2
    elif n == 2:
        y = x - 1
    else:
        y = -x
    return y.sum()


def with_loops(x, n: int):
    total = x * 0
    for i in range(n):
        if i == 3:
            continue
        total = total + x * i
        if i > 6:
            break
    k = 0
    while k < n:
        k += 2
    return total, k


def early_return(x, limit: float):
    for i in range(10):
        if x.sum().item() > limit:
            return x
        x = x + 1.0
    return x * 0


def list_and_tuple(xs: List[ember.Tensor], pair: Tuple[int, float]):
    total = xs[0] * pair[1]
    for x in xs:
        total = total + x
    return total + pair[0], len(xs)


def optional_arg(x, y: Optional[ember.Tensor] = None):
    if y is None:
        return x + 1
    return x + y


def reductions_and_views(x):
    m, idx = x.max(1)
    return x.t().t().sum(1) + m, idx, x.reshape(x.shape).shape


def math_and_asserts(x, p: float):
    assert p > 0, "p must be positive"
    return x * math.pi / p + math.sqrt(p)


def ops_mix(x, w):
    h = ember.matmul(x, w).relu()
    return ember.nn.functional.softmax(h, dim=1), ember.cat([h, h], 0).shape[0]


@pytest.mark.parametrize("fn,args", [
    (elementwise_chain, (t(1.0, 2.0, 3.0), t(0.5, 0.25, 4.0))),
    (with_branches, (t(1.0, -2.0), 1)),
    (with_branches, (t(1.0, -2.0), 2)),
    (with_branches, (t(1.0, -2.0), 5)),
    (with_loops, (t(1.0, 2.0), 0)),
    (with_loops, (t(1.0, 2.0), 1)),
    (with_loops, (t(1.0, 2.0), 8)),
    (with_loops, (t(1.0, 2.0), 17)),
    (early_return, (t(1.0), 3.5)),
    (early_return, (t(1.0), 100.0)),
    (list_and_tuple, ([t(1.0), t(2.0), t(3.0)], (2, 0.5))),
    (optional_arg, (t(1.0, 2.0),)),
    (optional_arg, (t(1.0, 2.0), t(3.0, 4.0))),
    (reductions_and_views, (ember.arange(12, dtype=ember.float32).reshape(3, 4),)),
    (math_and_asserts, (t(1.0, 2.0), 2.0)),
    (ops_mix, (ember.arange(6, dtype=ember.float32).reshape(2, 3) / 5,
               ember.arange(12, dtype=ember.float32).reshape(3, 4) / 7)),
])
def test_scripted_equals_eager(fn, args):
    check(fn, *args)


def test_assert_and_raise_messages():
    scripted = jit.script(math_and_asserts)
    with pytest.raises(AssertionError, match="p must be positive") as info:
        scripted(t(1.0), -1.0)
    assert any("math_and_asserts" in note for note in info.value.__notes__)


@settings(max_examples=25, deadline=None)
@given(shape_a=st.lists(st.integers(1, 4), min_size=0, max_size=3),
       broadcast=st.booleans(), dtype=st.sampled_from([ember.float32, ember.float64]),
       seed=st.integers(0, 2**16))
def test_fused_chain_equals_eager_exactly(shape_a, broadcast, dtype, seed):
    rng = np.random.default_rng(seed)
    np_dtype = np.float32 if dtype == ember.float32 else np.float64
    a = ember.from_numpy(rng.standard_normal(shape_a).astype(np_dtype))
    shape_b = [1] * len(shape_a) if broadcast else shape_a
    b = ember.from_numpy((rng.random(shape_b) + 0.5).astype(np_dtype))
    scripted = jit.script(elementwise_chain)
    got, expected = scripted(a, b), elementwise_chain(a, b)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got.numpy(), expected.numpy())
    assert "prim::FusionGroup" in str(scripted.graph_for(a, b))


def test_guard_falls_back_for_other_dtypes_and_errors():
    scripted = jit.script(elementwise_chain)
    a, b = ember.tensor([1, 2, 3]), ember.tensor([4, 5, 6])     # int64: no kernel
    close(elementwise_chain(a, b), scripted.generic.code(a, b))
    mixed = scripted.generic.code(t(1.0, 2.0), ember.tensor([1.0, 2.0], dtype=ember.float64))
    close(elementwise_chain(t(1.0, 2.0), ember.tensor([1.0, 2.0], dtype=ember.float64)), mixed)
    with pytest.raises(RuntimeError, match="must match the size"):
        scripted.generic.code(t(1.0, 2.0), t(1.0, 2.0, 3.0))


def test_argument_errors_name_the_parameter():
    scripted = jit.script(with_branches)
    with pytest.raises(TypeError, match="argument 'n' but instead found type 'float'"):
        scripted(t(1.0), 2.5)
    with pytest.raises(TypeError, match="argument 'x' but instead found type 'int'"):
        scripted(3, 2)
    with pytest.raises(TypeError, match="missing value for argument 'n'"):
        scripted(t(1.0))
    with pytest.raises(TypeError, match="expected at most 2 argument"):
        scripted(t(1.0), 1, 2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'm'"):
        scripted(t(1.0), m=2)
    assert scripted(x=t(1.0), n=3).item() == 2.0


def test_list_arguments_are_checked_on_every_new_element_type():
    scripted = jit.script(list_and_tuple)
    scripted([t(1.0)], (1, 2.0))
    with pytest.raises(TypeError, match="argument 'xs'"):
        scripted([1, 2], (1, 2.0))


def test_specialisations_are_cached_per_signature():
    scripted = jit.script(elementwise_chain)
    scripted(t(1.0), t(2.0))
    scripted(t(3.0), t(4.0))
    scripted(ember.ones(2, 2), ember.ones(2, 2))
    scripted(t(1.0, dtype=ember.float64), t(2.0, dtype=ember.float64))
    assert len(scripted._specialisations) == 3


def test_dtype_dependent_peephole_only_where_exact():
    def times_one_plus_zero(x):
        y = x * 1
        return (y + 0).relu()

    scripted = check(times_one_plus_zero, t(1.0, -2.0))
    graph = str(scripted.graph_for(t(1.0)))
    # x * 1 is x for floats; x + 0 is not (-0.0 + 0 is +0.0)
    assert "aten::mul" not in graph and "aten::add" in graph
    check(times_one_plus_zero, ember.tensor([1, -2]))
    graph = str(scripted.graph_for(ember.tensor([1])))
    assert "aten::mul" not in graph and "aten::add" not in graph
    check(times_one_plus_zero, ember.tensor([True, False]))
    assert "aten::mul" in str(scripted.graph_for(ember.tensor([True])))  # bool * 1 is int64


# ---- autograd through scripts ------------------------------------------------------


def test_gradients_equal_eager():
    def f(x, w, n: int):
        h = x
        for _ in range(n):
            h = (h * w).tanh() + h
        return (2 * h * h - h / (w * w + 1)).sum()

    scripted = jit.script(f)
    x0 = ember.randn(3, 4, dtype=ember.float64)
    w0 = ember.randn(4, dtype=ember.float64)
    grads = []
    for fn in (f, scripted):
        x = x0.clone().requires_grad_(True)
        w = w0.clone().requires_grad_(True)
        fn(x, w, 3).backward()
        grads.append((x.grad, w.grad))
    close(grads[0], grads[1])
    x = x0.clone().requires_grad_(True)
    assert "FusionGroup" not in str(scripted.graph_for(x, w0, 3))
    assert ember.autograd.gradcheck(lambda x, w: scripted(x, w, 2),
                                    (x0.clone().requires_grad_(True),
                                     w0.clone().requires_grad_(True)))


def test_generic_program_records_autograd_through_the_fallback():
    scripted = jit.script(elementwise_chain)
    a = ember.tensor([1.0, 2.0], requires_grad=True)
    b = ember.tensor([0.5, 1.5], requires_grad=True)
    scripted.generic.code(a, b).sum().backward()
    a2 = a.detach().requires_grad_(True)
    b2 = b.detach().requires_grad_(True)
    elementwise_chain(a2, b2).sum().backward()
    close((a.grad, b.grad), (a2.grad, b2.grad))
    with ember.no_grad():
        assert not scripted(a, b).requires_grad


def test_script_module_trains_like_eager():
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(3, 8), ember.nn.Tanh(), ember.nn.Linear(8, 2))
    scripted = jit.script(model)
    x = ember.randn(5, 3)
    close(model(x), scripted(x))
    scripted(x).sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).sum().backward()
    close(grads, [p.grad for p in model.parameters()])
    with ember.no_grad():
        model[0].weight.mul_(2)          # the scripted module sees updates
    close(model(x), scripted(x))


# ---- the VM: registers die early, no references leak -----------------------------------


def test_intermediates_die_as_early_as_in_eager():
    def f(x):
        y = x * 2
        z = y + 1          # y's last use
        return z.sum()

    scripted = jit.script(f)
    program = scripted.generic.program
    drops = [ins for ins in program.instructions if ins[0] == bytecode.Op.DROP]
    assert drops, program.format()
    assert scripted.generic.code(t(1.0, 2.0)).item() == f(t(1.0, 2.0)).item()


def test_fused_fallback_drops_each_temporary_after_its_last_reader():
    # Note [Lowering a graph to bytecode]: the unfused calls behind a FUSED
    # guard free their temporaries as early as the rest of the program.
    program = jit.script(elementwise_chain).generic.program
    ops = [bytecode.Op(ins[0]) for ins in program.instructions]
    fused = ops.index(bytecode.Op.FUSED)
    assert ops[fused + 1] == bytecode.Op.JUMP, program.format()
    fallback, done = program.instructions[fused][3], program.instructions[fused + 1][1]
    calls = [pc for pc in range(fallback, done) if ops[pc] == bytecode.Op.CALL]
    assert len(calls) >= 4, program.format()
    dropped = 0
    for pc in range(fallback, done):
        if ops[pc] != bytecode.Op.DROP:
            continue
        register = program.instructions[pc][1]
        readers = [q for q in range(fallback, pc)
                   if register in bytecode.flow_effects(program, q)[0]]
        assert readers, program.format()
        # only other DROPs between the last read and this one
        assert all(ops[q] == bytecode.Op.DROP for q in range(readers[-1] + 1, pc)), (
            f"r{register} outlives its last reader at {readers[-1]}:\n"
            + program.format())
        dropped += 1
    assert dropped == len(calls), program.format()   # every temporary
    a, b = t(1.0, 2.0), ember.tensor([3, 4])   # int64 b: the fallback runs
    close(elementwise_chain(a, b), jit.script(elementwise_chain).generic.code(a, b))


def test_vm_matches_reference_vm_and_releases_everything():
    scripted = jit.script(with_loops)
    program = scripted.generic.program
    x = t(1.0, 2.0)
    before = ember.memory.stats()["live_blocks"]
    for n in (0, 1, 5, 9):
        close(bytecode.run_reference(program, [x, n]), scripted.generic.code(x, n))
    assert ember.memory.stats()["live_blocks"] == before


# ---- whole-program: optimisation changes no result ------------------------------------


PROGRAMS = [elementwise_chain, with_branches, with_loops, reductions_and_views]


@pytest.mark.parametrize("fn", PROGRAMS)
@pytest.mark.parametrize("limit", ["constant_fold=0,peephole=0,cse=0,dce=0,unroll=0,fusion=0",
                                   "fusion=0", "unroll=0", ""])
def test_optimisation_changes_no_result(fn, limit, monkeypatch):
    monkeypatch.setenv("EMBER_JIT_OPT_LIMIT", limit)
    x = ember.arange(12, dtype=ember.float32).reshape(3, 4) / 3
    args = {elementwise_chain: (x, x + 1), with_branches: (x, 3),
            with_loops: (x, 11), reductions_and_views: (x,)}[fn]
    scripted = jit.script(fn)
    compiled = compile_graph(scripted.graph, fuse="fusion=0" not in limit)
    close(fn(*args), compiled.code(*args))


# ---- tracing -----------------------------------------------------------------------


def test_trace_records_ops_and_warns_about_control_flow():
    def f(x, y):
        z = x * 2 + y
        if z.sum() > 0:
            return z.exp()
        return z

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traced = jit.trace(f, (t(1.0, 2.0), t(3.0, 4.0)))
    assert any(issubclass(w.category, jit.TracerWarning) for w in caught)
    assert "aten::exp" in str(traced.graph)
    close(f(t(1.0, 2.0), t(0.5, 0.5)), traced(t(1.0, 2.0), t(0.5, 0.5)))
    # the branch is baked in: a negative input still takes the exp branch
    close(traced(t(-5.0), t(0.0)), (t(-5.0) * 2).exp())


def test_trace_module_and_in_place_ops():
    model = ember.nn.Linear(3, 2)

    def g(x):
        y = model(x)
        y.add_(1)
        return y[0], y.relu()

    x = ember.randn(2, 3)
    traced = jit.trace(g, x)
    close(g(x), traced(x))


# ---- save and load ---------------------------------------------------------------------


def test_save_load_round_trip(tmp_dir):
    scripted = jit.script(with_loops)
    path = tmp_dir / "loops.ejit"
    jit.save(scripted, path)
    loaded = jit.load(path)
    for n in (0, 3, 12):
        close(with_loops(t(1.0, 2.0), n), loaded(t(1.0, 2.0), n))
    again = tmp_dir / "again.ejit"
    jit.save(loaded, again)
    assert path.read_bytes() == again.read_bytes()
    assert "LOOP_TEST" in loaded.code and "graph(" in loaded.graph
    with pytest.raises(TypeError, match="argument 'n'"):
        loaded(t(1.0), "3")


def test_save_load_module_and_tensor_constants(tmp_dir):
    model = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.ReLU())
    scripted = jit.script(model)
    jit.save(scripted, tmp_dir / "m.ejit")
    loaded = jit.load(tmp_dir / "m.ejit")
    x = ember.randn(2, 3)
    with ember.no_grad():
        close(model(x), loaded(x))
    traced = jit.trace(lambda x: x + ember.ones(2) * 3, t(1.0, 2.0))
    jit.save(traced, tmp_dir / "c.ejit")
    close(jit.load(tmp_dir / "c.ejit")(t(0.0, 1.0)), t(3.0, 4.0))


# ---- regressions found by test_jit_fuzz.py ---------------------------------------------


def test_zero_and_negative_zero_constants_get_their_own_registers():
    # lowering shared one register between the constants 0.0 and -0.0
    # (equal, same hash): the -0.0 came back as 0.0
    def zeros(p: float):
        return p * 0.0, 0.0, -0.0, (0.0, -0.0)

    for fn in (jit.script(zeros), jit.script(zeros).generic.code):
        got = fn(-1.0)
        assert [math.copysign(1.0, v) for v in got[:3]] == [-1.0, 1.0, -1.0]
        assert [math.copysign(1.0, v) for v in got[3]] == [1.0, -1.0]
