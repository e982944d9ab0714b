"""ember._C.FusedKernel: fused elementwise programs (c/th/THFused.c).

The oracle is ember's own eager ops: a fused op must give the same bits
(same formula, same dtype, no FMA contraction).  Guard failures return
None; bad programs raise ValueError at construction.
"""

import sys

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import ember
from ember import _C

FusedKernel = _C.FusedKernel
DTYPES = {ember.float32: np.float32, ember.float64: np.float64}

SPEC_OPS = {"add": 2, "sub": 2, "mul": 2, "div": 2, "neg": 1, "abs": 1,
            "maximum": 2, "minimum": 2, "pow": 2, "exp": 1, "log": 1,
            "sqrt": 1, "rsqrt": 1, "sin": 1, "cos": 1, "tanh": 1,
            "sigmoid": 1, "relu": 1, "reciprocal": 1, "square": 1,
            "expm1": 1, "log1p": 1, "erf": 1, "silu": 1, "clamp": 3}
EAGER_NAMES = {"silu": ember.nn.functional.silu,
               "gelu": ember.nn.functional.gelu}


def eager_op(name):
    return EAGER_NAMES.get(name) or getattr(ember, name)


# Eager ops that, like PyTorch's, take no number as their second operand.
TENSOR_OPERANDS_ONLY = {"maximum", "minimum", "atan2", "hypot", "logaddexp", "logaddexp2"}


def eager(name, args, dtype):
    """The eager op on args (tensors or numbers); a number in first position
    becomes a 0-dim tensor of `dtype` (eager ops take a tensor first), and
    so does any number given to an op that takes tensors only."""
    args = list(args)
    for i, arg in enumerate(args):
        if not isinstance(arg, ember.Tensor) and (i == 0 or name in TENSOR_OPERANDS_ONLY):
            args[i] = ember.tensor(arg, dtype=dtype)
    return eager_op(name)(*args)


def bits(t):
    a = np.ascontiguousarray(t.numpy())
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


def assert_same_bits(got, want):
    assert tuple(got.shape) == tuple(want.shape)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(bits(got), bits(want))


def sample(shape, dtype, seed=0):
    """Values in [-3, 3] with zeros, signed zeros, infinities and NaN mixed
    in, so special-value paths of every formula are compared too."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(-3, 3, size=shape).astype(DTYPES[dtype])
    flat = a.reshape(-1)
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5]
    for i, v in enumerate(specials[: flat.size // 4]):
        flat[(i * 7) % flat.size] = v
    return ember.from_numpy(a)


def one_op_kernel(name, arity):
    return FusedKernel(arity, [(name, arity) + tuple(range(arity))], [arity])


# ---- the op table ------------------------------------------------------------


def test_ops_table_has_the_spec_ops():
    ops = FusedKernel.ops
    for name, arity in SPEC_OPS.items():
        assert ops[name] == arity
    assert _C._fused_ops() == ops
    assert "const" not in ops


# ---- every op vs eager -----------------------------------------------------------


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name", sorted(FusedKernel.ops))
def test_every_op_equals_eager_bitwise(name, dtype):
    arity = FusedKernel.ops[name]
    k = one_op_kernel(name, arity)
    tensors = [sample((5, 41), dtype, seed=s) for s in range(arity)]
    (got,) = k(*tensors)
    assert_same_bits(got, eager(name, tensors, dtype))
    # one operand a Python number, in each position (a float, then an int)
    for pos in range(arity if arity > 1 else 0):
        for number in (0.7, 2):
            args = list(tensors)
            args[pos] = number
            (got,) = k(*args)
            assert_same_bits(got, eager(name, args, dtype))


@pytest.mark.parametrize("isa", ["baseline", "avx2"])
def test_both_loop_families_equal_eager(isa):
    previous = _C._fused_isa()
    try:
        _C._fused_isa(isa)
    except ValueError:
        pytest.skip(f"no {isa} on this CPU")
    try:
        for name in ("exp", "tanh", "log", "sigmoid", "silu", "div", "pow"):
            arity = FusedKernel.ops[name]
            tensors = [sample((3000,), ember.float32, seed=s)
                       for s in range(arity)]
            (got,) = one_op_kernel(name, arity)(*tensors)
            assert_same_bits(got, eager(name, tensors, ember.float32))
    finally:
        _C._fused_isa(previous)


def test_no_fma_contraction_across_instructions():
    # a * b + c as two instructions rounds twice, as eager's two ops do
    a, b, c = (sample((4096,), ember.float32, seed=s) for s in range(3))
    k = FusedKernel(3, [("mul", 3, 0, 1), ("add", 4, 3, 2)], [4])
    (got,) = k(a, b, c)
    assert_same_bits(got, a * b + c)


# ---- programs over shapes, strides and numbers --------------------------------------

BENCH_PROGRAM = [("const", 2, 2.0), ("mul", 3, 2, 0), ("mul", 4, 3, 0),
                 ("const", 5, 3), ("mul", 6, 5, 1), ("add", 7, 4, 6),
                 ("const", 8, 1), ("add", 9, 1, 8), ("div", 10, 0, 9),
                 ("sub", 11, 7, 10)]


def bench_eager(a, b):
    return 2 * a * a + 3 * b - a / (b + 1)


def test_benchmark_expression():
    k = FusedKernel(2, BENCH_PROGRAM, [11], name="bench")
    for n in (1, 1023, 1024, 1025, 5000):
        a = sample((n,), ember.float32, seed=1)
        b = sample((n,), ember.float32, seed=2)
        (got,) = k(a, b)
        assert_same_bits(got, bench_eager(a, b))


def test_constants_and_numbers_convert_like_eager():
    # 0.1 is not a float32: eager converts the number to the dtype first
    for dtype in DTYPES:
        a = sample((50,), dtype)
        k = FusedKernel(2, [("const", 2, 0.1), ("mul", 3, 0, 2),
                            ("add", 4, 3, 1), ("const", 5, 2 ** 40 + 1),
                            ("sub", 6, 4, 5), ("const", 7, True),
                            ("add", 8, 6, 7)], [8])
        (got,) = k(a, 1e-3)
        want = ((a * 0.1 + 1e-3) - (2 ** 40 + 1)) + True
        assert_same_bits(got, want)


def views(draw, shape, dtype, seed):
    """A tensor of `shape`: contiguous, transposed, strided or expanded."""
    kind = draw(st.sampled_from(["contiguous", "transposed", "strided",
                                 "expanded", "scalar"]))
    if kind == "transposed" and len(shape) >= 2:
        base = sample(tuple(reversed(shape)), dtype, seed)
        return base.permute(*reversed(range(len(shape))))
    if kind == "strided" and shape:
        big = sample(shape[:-1] + (2 * shape[-1],), dtype, seed)
        return big[..., ::2]
    if kind == "expanded" and shape:
        return sample(shape[:-1] + (1,), dtype, seed).expand(*shape)
    if kind == "scalar":
        return sample((), dtype, seed)
    return sample(shape, dtype, seed)


@st.composite
def programs(draw):
    dtype = draw(st.sampled_from(list(DTYPES)))
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=0, max_size=3)))
    inputs = []
    for i in range(3):
        if i > 0 and draw(st.booleans()):
            inputs.append(draw(st.sampled_from([0.5, -2, 3.25, True])))
            continue
        # each input broadcasts: a suffix of the shape, some dims 1
        sub = shape[draw(st.integers(0, len(shape))):]
        sub = tuple(1 if draw(st.booleans()) else s for s in sub)
        inputs.append(views(draw, sub if i else shape, dtype, seed=i))
    names = sorted(FusedKernel.ops)
    code, regs = [], [0, 1, 2]
    for dst in range(3, 3 + draw(st.integers(1, 6))):
        name = draw(st.sampled_from(names))
        srcs = [draw(st.sampled_from(regs)) for _ in range(FusedKernel.ops[name])]
        code.append((name, dst, *srcs))
        regs.append(dst)
    return dtype, inputs, code


def run_eager(code, inputs, dtype):
    values = list(inputs)
    for name, dst, *srcs in code:
        args = [values[s] for s in srcs]
        if not any(isinstance(a, ember.Tensor) for a in args):
            args[0] = ember.tensor(args[0], dtype=dtype)
        values.append(eager(name, args, dtype))
    return values


@settings(max_examples=150, deadline=None)
@given(programs())
def test_random_programs_equal_eager(case):
    dtype, inputs, code = case
    try:
        values = run_eager(code, inputs, dtype)
    except RuntimeError as exc:  # eager sub refuses a bool, as torch does
        assume("with a bool tensor is not supported" not in str(exc))
        raise
    full = np.broadcast_shapes(*(tuple(x.shape) for x in inputs
                                 if isinstance(x, ember.Tensor)))
    last = values[-1]
    k = FusedKernel(3, code, [code[-1][1]])
    got = k(*inputs)
    if tuple(last.shape) != tuple(full):
        assert got is None  # the output's own shape is not the full one
        return
    assert_same_bits(got[0], last)
    assert got[0].is_contiguous()


def test_many_live_temporaries_use_shorter_blocks():
    # 40 float64 values alive at once: the block buffers no longer fit
    # 64 KiB of full blocks, so blocks get shorter; results do not change
    a = sample((3000,), ember.float64)
    code = [("mul", 1 + i, 0, 0) if i == 0 else ("add", 1 + i, i, 0)
            for i in range(40)]
    total, nxt = 40, 41
    for r in range(1, 41):
        code.append(("add", nxt, total, r))
        total, nxt = nxt, nxt + 1
    (got,) = FusedKernel(1, code, [total])(a)
    values = [a]
    for name, dst, *srcs in code:
        values.append(eager(name, [values[s] for s in srcs], ember.float64))
    assert_same_bits(got, values[total])


def test_multiple_outputs():
    a = sample((4, 33), ember.float32, seed=1)
    b = sample((33,), ember.float32, seed=2)
    k = FusedKernel(2, [("add", 2, 0, 1), ("exp", 3, 2), ("mul", 4, 3, 1)],
                    [4, 2, 0])
    out = k(a, b)
    assert isinstance(out, tuple) and len(out) == 3
    s = a + b
    assert_same_bits(out[0], ember.exp(s) * b)
    assert_same_bits(out[1], s)
    assert_same_bits(out[2], a)  # an input as output: a fresh copy
    assert out[2] is not a and out[2].data_ptr() != a.data_ptr()


@pytest.mark.parametrize("ninputs, instructions, outputs", [
    (1, [], [0]),                                                # never read
    (1, [("exp", 1, 0), ("neg", 2, 1), ("neg", 3, 2)], [0, 3]),  # slot reused
    (1, [("exp", 1, 0)], [1, 0]),
    (2, [("add", 2, 0, 1), ("mul", 3, 2, 2), ("sub", 4, 3, 1)], [4, 0, 1]),
])
def test_strided_input_as_output_is_the_input(ninputs, instructions, outputs):
    # A strided input is gathered into a block buffer; when it is also an
    # output, that buffer must survive the block's last step (it was given
    # to a later temporary after the input's last read: a wrong result).
    inputs = [sample((40, 33), ember.float32, seed=11).t(),
              sample((33, 80), ember.float32, seed=12)[:, ::2]][:ninputs]
    got = FusedKernel(ninputs, instructions, outputs)(*inputs)
    values = dict(enumerate(inputs))
    for name, dst, *srcs in instructions:
        values[dst] = eager(name, [values[s] for s in srcs], ember.float32)
    for tensor, reg in zip(got, outputs):
        assert_same_bits(tensor, values[reg])
        if reg < ninputs:
            assert tensor.data_ptr() != inputs[reg].data_ptr()


def test_output_of_stride0_input_is_filled():
    a = ember.tensor([2.5]).expand(2000)
    b = sample((2000,), ember.float32)
    k = FusedKernel(2, [("mul", 2, 0, 0), ("add", 3, 1, 0)], [2, 3])
    x, y = k(a, b)
    assert_same_bits(x, a * a)
    assert_same_bits(y, b + a)


def test_empty_and_zero_dim():
    k = FusedKernel(2, [("add", 2, 0, 1)], [2])
    (e,) = k(ember.empty(0, 3), ember.ones(3))
    assert tuple(e.shape) == (0, 3)
    (z,) = k(ember.tensor(1.5), 2.0)
    assert tuple(z.shape) == () and z.item() == 3.5


def test_subclass_inputs():
    p = ember.nn.Parameter(ember.ones(3))
    with ember.no_grad():
        (y,) = one_op_kernel("neg", 1)(p)
    assert_same_bits(y, -ember.ones(3))


@pytest.mark.noleakcheck
def test_large_input_runs_parallel_and_equals_eager():
    previous = ember.get_num_threads()
    ember.set_num_threads(2)
    try:
        n = 5 * 32768 + 77  # several parallel chunks and a short tail
        a = sample((n,), ember.float32, seed=3)
        b = sample((n,), ember.float32, seed=4)
        (got,) = FusedKernel(2, BENCH_PROGRAM, [11])(a, b)
        assert_same_bits(got, bench_eager(a, b))
        t = sample((700, 300), ember.float32, seed=5).t()  # strided, large
        (got,) = FusedKernel(2, BENCH_PROGRAM, [11])(t, 0.25)
        assert_same_bits(got, bench_eager(t, 0.25))
    finally:
        ember.set_num_threads(previous)


@pytest.mark.noleakcheck
def test_large_output_is_streamed_and_equals_eager():
    # >= 4 MiB of output: written with non-temporal stores (THFused.c,
    # Note [Streaming the outputs]); two outputs, one thread then two
    previous = ember.get_num_threads()
    a = sample((1_100_003,), ember.float32, seed=6)
    b = sample((1_100_003,), ember.float32, seed=7)
    k = FusedKernel(2, BENCH_PROGRAM, [11, 9])
    try:
        for threads in (1, 2):
            ember.set_num_threads(threads)
            y, b1 = k(a, b)
            assert_same_bits(y, bench_eager(a, b))
            assert_same_bits(b1, b + 1)
    finally:
        ember.set_num_threads(previous)


@pytest.mark.noleakcheck
def test_streamed_output_with_unaligned_runs_equals_eager():
    # runs of 1033 elements: most start off the 32-byte grid, so the
    # `stream` loops store an unaligned head and a tail plainly
    a = sample((1031, 1033), ember.float32, seed=8)
    b = sample((1033,), ember.float32, seed=9)
    k = FusedKernel(2, BENCH_PROGRAM, [11])
    (y,) = k(a, b)
    assert_same_bits(y, bench_eager(a, b))


@pytest.mark.noleakcheck
def test_input_swapped_by_another_thread_while_the_kernel_runs():
    # A large kernel runs without the GIL; another thread's `a.data = ...`
    # then releases the tensor the plan reads.  The call owns its inputs
    # (Note [A fused kernel owns its inputs] in Fused.c), so each result
    # is computed from one input, all ones or all zeros, never a mix of
    # freed and reused memory.
    import threading
    n = 1 << 20
    a = ember.ones(n)
    k = FusedKernel(1, [("exp", 1, 0), ("mul", 2, 1, 1)], [2])
    from_ones = (ember.exp(ember.ones(1)) * ember.exp(ember.ones(1))).numpy()[0]
    stop = threading.Event()

    def swap():
        flip = False
        while not stop.is_set():
            a.data = ember.zeros(n) if flip else ember.ones(n)
            flip = not flip

    previous = ember.get_num_threads()
    ember.set_num_threads(2)
    thread = threading.Thread(target=swap)
    thread.start()
    try:
        for _ in range(100):
            (y,) = k(a)
            values = np.unique(y.numpy())
            assert len(values) == 1 and values[0] in (1.0, from_ones), values
    finally:
        stop.set()
        thread.join()
        ember.set_num_threads(previous)


# ---- the guard -----------------------------------------------------------------------


def add_kernel():
    return FusedKernel(2, [("add", 2, 0, 1)], [2])


def test_guard_mixed_dtypes():
    assert add_kernel()(ember.ones(3), ember.ones(3, dtype=ember.float64)) is None


def test_guard_integer_tensors_and_no_tensor():
    k = add_kernel()
    assert k(ember.ones(3, dtype=ember.int64), ember.ones(3, dtype=ember.int64)) is None
    assert k(ember.ones(3, dtype=ember.int32), 1.0) is None
    assert k(1.0, 2.0) is None


def test_guard_requires_grad_only_under_grad_mode():
    a = ember.ones(3, requires_grad=True)
    k = add_kernel()
    assert k(a, 1.0) is None
    with ember.no_grad():
        (y,) = k(a, 1.0)
    assert not y.requires_grad
    assert_same_bits(y, ember.ones(3) + 1.0)


def test_guard_shapes_that_do_not_broadcast():
    assert add_kernel()(ember.ones(3), ember.ones(4)) is None


def test_guard_output_shape_differs_from_broadcast_shape():
    k = FusedKernel(2, [("exp", 2, 0), ("add", 3, 0, 1)], [2, 3])
    assert k(ember.ones(3), ember.ones(2, 3)) is None
    assert k(ember.ones(2, 3), ember.ones(3)) is not None


def test_guard_too_many_operands():
    code = [("add", 8, 0, 1)] + [("add", 8 + i, 7 + i, i) for i in range(1, 8)]
    k = FusedKernel(8, code, [15])
    xs = [ember.ones(2) for _ in range(8)]
    assert k(*xs) is None          # 8 tensors + 1 output > 8 operands
    (y,) = k(*xs[:7], 1.0)         # a number is not an operand
    assert_same_bits(y, ember.full((2,), 9.0))  # r1 is added twice


def test_guard_other_argument_types():
    k = add_kernel()
    assert k(ember.ones(2), [1.0, 2.0]) is None
    assert k(ember.ones(2), np.float32(1.0)) is None
    assert k(ember.ones(2), 2 ** 70) is None


def test_call_argument_errors():
    k = add_kernel()
    with pytest.raises(TypeError, match=r"takes 2 arguments \(1 given\)"):
        k(ember.ones(2))
    with pytest.raises(TypeError, match="keyword"):
        k(ember.ones(2), x=1.0)


# ---- validation -----------------------------------------------------------------------


@pytest.mark.parametrize("code, outputs, message", [
    ([("frobnicate", 2, 0, 1)], [2], "unknown op 'frobnicate'"),
    ([("add", 2, 0)], [2], "add takes 2 operands, got 1"),
    ([("exp", 2, 0, 1)], [2], "exp takes 1 operand, got 2"),
    ([("add", 2, 0, 7)], [2], "register 7 is used before it is defined"),
    ([("add", 2, 0, 3), ("exp", 3, 0)], [2], "used before it is defined"),
    ([("add", 2, 0, -1)], [2], "out of range"),
    ([("add", 300, 0, 1)], [300], "out of range"),
    ([("add", 2, 0, 2 ** 70)], [2], "out of range"),
    ([("add", 2, 0, 1), ("exp", 2, 0)], [2], "written a second time"),
    ([("add", 1, 0, 0)], [1], "is an input register"),
    ([("add", 2, 0, 1)], [5], "register 5 is not defined"),
    ([("add", 2, 0, 1)], [2, 2], "same register"),
    ([("add", 2, 0, 1)], [], "1 to 4 outputs"),
    ([("add", 2, 0, 1)], [0, 1, 2, 0, 1], "1 to 4 outputs"),
    ([("const", 2, "x")], [2], "constant must be"),
    ([("const", 2, 1.0, 3)], [2], "const takes"),
    (["add"], [2], "must be a tuple"),
    ([("add", 2.0, 0, 1)], [2], "must be an int"),
])
def test_validation_errors_are_value_errors(code, outputs, message):
    with pytest.raises(ValueError, match=message):
        FusedKernel(2, code, outputs)


def test_validation_of_counts():
    with pytest.raises(ValueError, match="0 to 64 inputs"):
        FusedKernel(65, [], [0])
    with pytest.raises(ValueError, match="at most 256 instructions"):
        FusedKernel(1, [("exp", 1 + i, i) for i in range(257)], [1])
    with pytest.raises(TypeError):
        FusedKernel(2, 5, [2])


def test_listing_and_attributes():
    k = FusedKernel(2, BENCH_PROGRAM[:3], [4], name="f")
    assert k.ninputs == 2 and k.noutputs == 1 and k.name == "f"
    assert k.program == ("f(r0, r1) -> (r4)\n  r2 = const 2.0\n"
                         "  r3 = mul r2, r0\n  r4 = mul r3, r0")
    assert repr(k) == k.program
    assert FusedKernel(1, [("const", 1, 3)], [1]).name == "fused"


# ---- references -------------------------------------------------------------------------


def test_no_references_leak_on_calls_and_errors():
    a, b = ember.ones(5), ember.ones(5)
    big = 2 ** 70
    k = add_kernel()
    before = [sys.getrefcount(x) for x in (a, b, k, big)]
    for _ in range(50):
        k(a, b)
        k(a, ember.ones(4))                      # guard: shapes
        k(a, [1.0])                              # guard: type
        k(a, big)                                # guard: overflow
        with pytest.raises(TypeError):
            k(a)
    assert [sys.getrefcount(x) for x in (a, b, k, big)] == before


def test_no_references_leak_on_validation_errors():
    name, value = "kernel-name", 12345.678
    code = [("const", 2, value), ("add", 3, 0, 2), ("exp", 3, 0)]
    before = [sys.getrefcount(x) for x in (name, value, code[0], code)]
    for _ in range(50):
        with pytest.raises(ValueError):
            FusedKernel(2, code, [3], name=name)
        k = FusedKernel(2, code[:2], [3], name=name)
        del k
    assert [sys.getrefcount(x) for x in (name, value, code[0], code)] == before


def test_spec_gives_the_constructors_data_back():
    """A device's launcher compiles `spec` (ember/cuda/_fused.py)."""
    instructions = (("mul", 2, 0, 1), ("const", 3, 2.0), ("const", 4, 7), ("const", 5, True),
                    ("clamp", 6, 2, 3, 4), ("exp", 7, 6))
    kernel = ember._C.FusedKernel(2, list(instructions), [7, 6], name="k")
    assert kernel.spec == (2, instructions, (7, 6))
    again = ember._C.FusedKernel(*kernel.spec, name="k")
    assert again.program == kernel.program
