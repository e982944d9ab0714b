"""Derivatives of the elementwise operators (Pointwise.c, Unary.c):
gradcheck in float64 and parity with PyTorch's values and gradients."""

import gc
import re
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from autograd_utils import check_against_torch, check_gradcheck, leaf, noncontiguous

RNG_SEED = 1234


def uniform(shape, low=-1.0, high=1.0, seed=RNG_SEED):
    return np.random.default_rng(seed).uniform(low, high, size=shape)


def backward_ones(tensor):
    """tensor.sum().backward() without depending on sum's own formula."""
    lib = ember if isinstance(tensor, ember.Tensor) else pytest.importorskip("torch")
    tensor.backward(lib.ones_like(tensor))


def call(lib, name, *args, **kwargs):
    """lib.name(*args): activations live in torch.nn.functional."""
    if lib is not ember and name in ("gelu", "silu"):
        return getattr(lib.nn.functional, name)(*args, **kwargs)
    return getattr(lib, name)(*args, **kwargs)


# ---- unary math ------------------------------------------------------------------

# name -> (low, high) of the sample points: inside the domain, away from
# the kinks and jumps that finite differences cannot see through.
UNARY_DOMAINS = {
    "exp": (-1, 1), "exp2": (-1, 1), "expm1": (-1, 1), "log": (0.5, 2), "log2": (0.5, 2),
    "log10": (0.5, 2), "log1p": (-0.5, 1), "sqrt": (0.5, 2), "rsqrt": (0.5, 2),
    "reciprocal": (0.5, 2), "sin": (-2, 2), "cos": (-2, 2), "tan": (-1, 1),
    "asin": (-0.8, 0.8), "acos": (-0.8, 0.8), "atan": (-2, 2), "asinh": (-2, 2),
    "acosh": (1.5, 3), "atanh": (-0.8, 0.8), "sinh": (-1, 1),
    "cosh": (-1, 1), "tanh": (-2, 2), "sigmoid": (-3, 3), "erf": (-2, 2),
    "erfc": (-2, 2), "silu": (-3, 3), "gelu": (-3, 3), "relu": (-1, 1),
    "square": (-2, 2), "abs": (-1, 1), "neg": (-1, 1), "frac": (0.1, 0.9),
    "nan_to_num": (-1, 1),
}
STEP_FUNCTIONS = ["floor", "ceil", "trunc", "round", "sign"]
# Backwards that are not themselves differentiable functions of the input
# (a step of a step): gradgradcheck is meaningless for them.
NO_GRADGRAD = {"relu", "abs", "frac"}

TORCH_NODE_NAMES = {
    "exp": "ExpBackward0", "log1p": "Log1PBackward0", "square": "PowBackward0",
    "gelu": "GeluBackward0", "relu": "ReluBackward0", "round": "RoundBackward0",
    "nan_to_num": "NanToNumBackward0", "floor": "FloorBackward0", "sign": "SignBackward0",
}


@pytest.mark.parametrize("name", sorted(UNARY_DOMAINS))
def test_unary_gradcheck(name):
    x = uniform((2, 3), *UNARY_DOMAINS[name])
    check_gradcheck(lambda lib, a: call(lib, name, a), x,
                    gradgrad=name not in NO_GRADGRAD)


@pytest.mark.parametrize("name", sorted(UNARY_DOMAINS))
def test_unary_noncontiguous_gradcheck(name):
    x = noncontiguous(uniform((3, 2), *UNARY_DOMAINS[name], seed=7))
    check_gradcheck(lambda lib, a: getattr(a, name)() if name not in ("gelu", "silu")
                    else call(lib, name, a), x)


@pytest.mark.parametrize("name", sorted(UNARY_DOMAINS) + STEP_FUNCTIONS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary_matches_torch(name, dtype):
    low, high = UNARY_DOMAINS.get(name, (-3, 3))
    x = uniform((2, 3), low, high).astype(dtype)
    check_against_torch(lambda lib, a: call(lib, name, a), x)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_approximations(approximate):
    x = uniform((5,), -3, 3)
    check_gradcheck(lambda lib, a: ember.gelu(a, approximate=approximate), x, gradgrad=True)
    check_against_torch(
        lambda lib, a: call(lib, "gelu", a, approximate=approximate), x.astype(np.float32))


def test_round_decimals_and_nan_to_num_arguments():
    x = uniform((4,), -3, 3)
    check_against_torch(lambda lib, a: a.round(decimals=1), x)
    special = np.array([np.nan, np.inf, -np.inf, 0.5, -2.0])
    check_against_torch(lambda lib, a: lib.nan_to_num(a, 1.0, posinf=2.0, neginf=-3.0),
                        special)
    check_against_torch(lambda lib, a: a.nan_to_num() * 2, special)


@pytest.mark.parametrize("name", sorted(TORCH_NODE_NAMES))
def test_node_names_match_torch(name):
    torch = pytest.importorskip("torch")
    x = np.array([0.5, 1.5])
    e = call(ember, name, leaf(x))
    t = call(torch, name, torch.from_numpy(x).requires_grad_())
    assert type(e.grad_fn).__name__ == type(t.grad_fn).__name__ == TORCH_NODE_NAMES[name]


@pytest.mark.parametrize("program", [
    lambda lib, a, b: a ** b, lambda lib, a, b: a ** 2, lambda lib, a, b: 2 ** a,
    lambda lib, a, b: a % b, lambda lib, a, b: a % 2, lambda lib, a, b: lib.fmod(a, b),
    lambda lib, a, b: lib.fmod(a, 2), lambda lib, a, b: lib.atan2(a, b),
    lambda lib, a, b: lib.maximum(a, b), lambda lib, a, b: lib.minimum(a, b),
    lambda lib, a, b: a.clamp(0, 1), lambda lib, a, b: a.clamp(min=b),
    lambda lib, a, b: lib.where(a > 0, a, b), lambda lib, a, b: abs(a),
    lambda lib, a, b: a.sign(), lambda lib, a, b: lib.div(a, b, rounding_mode="floor"),
    lambda lib, a, b: 2 - a, lambda lib, a, b: a - 2, lambda lib, a, b: a / b,
    lambda lib, a, b: a // b,
])
def test_binary_node_names_match_torch(program):
    torch = pytest.importorskip("torch")
    x, y = np.array([0.5, 1.5]), np.array([2.0, 0.25])
    e = program(ember, leaf(x), leaf(y))
    t = program(torch, torch.from_numpy(x).requires_grad_(), torch.from_numpy(y).requires_grad_())
    assert type(e.grad_fn).__name__ == type(t.grad_fn).__name__
    # ember keeps a (None, 0) slot for a Python-number operand, torch none.
    assert (sum(f is not None for f, _ in e.grad_fn.next_functions)
            == sum(f is not None for f, _ in t.grad_fn.next_functions))


def test_create_graph_through_saved_outputs():
    """Ops saving their output (SavedOutput) differentiate twice."""
    torch = pytest.importorskip("torch")
    x = np.array([0.3, -0.7, 1.2])

    def second_derivative(lib, name, t):
        y = call(lib, name, t)
        (g,) = lib.autograd.grad(y, t, lib.ones_like(y), create_graph=True)
        (gg,) = lib.autograd.grad(g, t, lib.ones_like(g))
        return np.asarray(gg.detach())

    for name in ["exp", "tanh", "sigmoid", "exp2", "expm1", "reciprocal", "tan"]:
        np.testing.assert_allclose(
            second_derivative(ember, name, leaf(x)),
            second_derivative(torch, name, torch.from_numpy(x).requires_grad_()),
            rtol=1e-10)


# ---- binary arithmetic --------------------------------------------------------------

BINARY_PROGRAMS = {
    "pow": (lambda lib, a, b: lib.pow(a, b), (0.5, 2)),
    "pow_operator": (lambda lib, a, b: a ** b, (0.5, 2)),
    "atan2": (lambda lib, a, b: lib.atan2(a, b), (-1, 1)),
    "arctan2": (lambda lib, a, b: lib.arctan2(a, b), (-1, 1)),
    "remainder": (lambda lib, a, b: lib.remainder(a, b), (0.3, 2)),
    "mod_operator": (lambda lib, a, b: a % b, (0.3, 2)),
    "fmod": (lambda lib, a, b: lib.fmod(a, b), (-2, 2)),
    "maximum": (lambda lib, a, b: lib.maximum(a, b), (-1, 1)),
    "minimum": (lambda lib, a, b: lib.minimum(a, b), (-1, 1)),
    "mul": (lambda lib, a, b: a * b, (-1, 1)),
    "div": (lambda lib, a, b: a / b, (0.5, 2)),
    "where": (lambda lib, a, b: lib.where(a > b, a * 2, b), (-1, 1)),
    "where_method": (lambda lib, a, b: a.where(a > 0, b), (-1, 1)),
    "clamp_tensors": (lambda lib, a, b: lib.clamp(a, b - 0.5, b + 0.5), (-1, 1)),
    "clamp_min_tensor": (lambda lib, a, b: a.clamp(min=b), (-1, 1)),
    "clip_max_tensor": (lambda lib, a, b: lib.clip(a, max=b), (-1, 1)),
}
def _can_double_backward_broadcast(shapes):
    """A broadcast gradient is reduced with sum, whose own derivative
    belongs to the reductions' formulas."""
    return shapes[0] == shapes[1] or "sum" in ember._C._autograd_handlers


NONSMOOTH_BINARY = {"remainder", "mod_operator", "fmod", "maximum", "minimum", "where",
                    "where_method", "clamp_tensors", "clamp_min_tensor", "clip_max_tensor"}
BROADCAST_SHAPES = [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((3,), (2, 3))]


@pytest.mark.parametrize("name", sorted(BINARY_PROGRAMS))
@pytest.mark.parametrize("shapes", BROADCAST_SHAPES)
def test_binary_gradcheck(name, shapes):
    program, (low, high) = BINARY_PROGRAMS[name]
    a = uniform(shapes[0], low, high, seed=1)
    b = uniform(shapes[1], low, high, seed=2)
    check_gradcheck(program, a, b, gradgrad=name not in NONSMOOTH_BINARY
                    and _can_double_backward_broadcast(shapes))


@pytest.mark.parametrize("name", sorted(BINARY_PROGRAMS))
def test_binary_noncontiguous(name):
    program, (low, high) = BINARY_PROGRAMS[name]
    a = noncontiguous(uniform((3, 2), low, high, seed=3))
    b = noncontiguous(uniform((3, 2), low, high, seed=4))
    check_gradcheck(program, a, b)
    check_against_torch(program, a.astype(np.float32), b.astype(np.float32))


@pytest.mark.parametrize("name", sorted(BINARY_PROGRAMS))
@pytest.mark.parametrize("shapes", BROADCAST_SHAPES)
def test_binary_matches_torch(name, shapes):
    program, (low, high) = BINARY_PROGRAMS[name]
    a = uniform(shapes[0], low, high, seed=5).astype(np.float32)
    b = uniform(shapes[1], low, high, seed=6).astype(np.float32)
    check_against_torch(program, a, b)


@settings(max_examples=15, deadline=None)
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=3),
       name=st.sampled_from(sorted(BINARY_PROGRAMS)),
       drop=st.integers(0, 2), data=st.data())
def test_binary_broadcasting_property(shape, name, drop, data):
    """Random broadcasting partners: trailing dims kept or set to 1."""
    program, (low, high) = BINARY_PROGRAMS[name]
    other_shape = [data.draw(st.sampled_from([n, 1])) for n in shape[drop:]]
    a = uniform(tuple(shape), low, high, seed=8).astype(np.float32)
    b = uniform(tuple(other_shape), low, high, seed=9).astype(np.float32)
    check_against_torch(program, a, b)


def test_maximum_minimum_split_ties_like_torch():
    a = np.array([1.0, 2.0, np.nan, 0.5, 3.0])
    b = np.array([1.0, 1.0, 1.0, np.nan, 3.0])
    check_against_torch(lambda lib, x, y: lib.maximum(x, y), a, b)
    check_against_torch(lambda lib, x, y: lib.minimum(x, y), a, b)
    check_against_torch(lambda lib, x, y: lib.maximum(x, y) + lib.minimum(y, x),
                        a[[0, 1, 4]], b[[0, 1, 4]])


def test_pow_at_zero_like_torch():
    """0 ** 0, 0 ** negative, negative ** fractional: PyTorch's conventions."""
    base = np.array([0.0, 0.0, 2.0, -1.0, 0.0])
    exponent = np.array([0.0, -1.0, 0.0, 0.5, 2.0])
    check_against_torch(lambda lib, a, b: a ** b, base, exponent)
    for number in [0.0, 0, 2, 0.5, -2.0]:
        check_against_torch(lambda lib, b: number ** b, exponent)
    for number in [0, 0.0, 0.5, 2, -1, 3.0]:
        check_against_torch(lambda lib, a: a ** number, base)
        check_against_torch(lambda lib, a: lib.pow(a, number), base)


def test_remainder_fmod_other_gradient():
    a = np.array([-3.5, 2.25, 5.0, -0.75])
    b = np.array([2.0, -1.5, 1.5, 0.5])
    check_against_torch(lambda lib, x, y: lib.remainder(x, y) + lib.fmod(x, y) * 2, a, b)
    check_against_torch(lambda lib, x: lib.remainder(x, 1.5) + lib.fmod(x, -1.5) + x % 2, a)


def test_clamp_bounds_like_torch():
    x = np.array([-2.0, -0.5, 0.0, 0.5, 2.0, 1.0])
    low = np.array([-1.0, 0.0, 0.5, 0.0, 3.0, 1.0])
    high = np.array([1.0, 1.0, 0.4, 0.0, 2.5, 1.0])  # some min > max; ties
    check_against_torch(lambda lib, a, lo, hi: lib.clamp(a, lo, hi), x, low, high)
    check_against_torch(lambda lib, a, lo: lib.clamp(a, min=lo), x, low)
    check_against_torch(lambda lib, a, hi: a.clip(max=hi), x, high)
    for bounds in [(-1, 1), (0.5, None), (None, 0.5), (1.0, -1.0)]:
        check_against_torch(lambda lib, a: lib.clamp(a, *bounds), x)
        check_against_torch(lambda lib, a: a.clip(*bounds), x)
    check_gradcheck(lambda lib, a: lib.clamp(a, -0.3, 0.4), uniform((2, 3)), gradgrad=True)


def test_clamp_mixed_number_and_tensor_bound():
    """ember accepts a tensor min with a number max (torch refuses that
    combination): the number is a constant bound."""
    x = leaf(np.array([-2.0, 0.2, 3.0]))
    low = leaf(np.array([-1.0, 0.0, 0.0]))
    y = ember.clamp(x, min=low, max=2.0)
    backward_ones(y)
    np.testing.assert_array_equal(np.asarray(y.detach()), [-1.0, 0.2, 2.0])
    np.testing.assert_array_equal(np.asarray(x.grad), [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(np.asarray(low.grad), [1.0, 0.0, 0.0])


def test_where_with_numbers_and_keywords():
    x = uniform((2, 3), seed=11)
    check_against_torch(lambda lib, a: lib.where(a > 0, a, 2.0), x)
    check_against_torch(lambda lib, a: lib.where(a > 0, 2.0, a * 3), x)
    check_against_torch(lambda lib, a: lib.where(condition=a > 0, input=a, other=a.exp()), x)
    check_against_torch(lambda lib, a: a.where(condition=a > 0, other=-a), x)
    check_gradcheck(lambda lib, a, b: lib.where(a > 0, a.exp(), b * b), x, uniform((2, 3)),
                    gradgrad=True)
    check_gradcheck(lambda lib, a, b: lib.where(a > 0, a.exp(), b * b), x, uniform((3,)))
    cond = np.array([True, False, True])
    e = ember.where(ember.from_numpy(cond), leaf(uniform((2, 3))), 1.0)
    assert type(e.grad_fn).__name__ == "WhereBackward0"


# ---- Python numbers on either side ------------------------------------------------------

NUMBER_PROGRAMS = [
    lambda lib, a: 2 - a, lambda lib, a: a - 2, lambda lib, a: 2 + a, lambda lib, a: 3 * a,
    lambda lib, a: a / 3, lambda lib, a: 3 / a, lambda lib, a: a ** 2, lambda lib, a: a ** 0.5,
    lambda lib, a: 2 ** a, lambda lib, a: 0.5 ** a, lambda lib, a: a % 0.7,
    lambda lib, a: lib.fmod(a, 0.7), lambda lib, a: -a,
    lambda lib, a: abs(a), lambda lib, a: +a * 1, lambda lib, a: a.sub(2, alpha=3),
    lambda lib, a: lib.pow(a, 3), lambda lib, a: a.clamp(0.8, 1.5),
]


@pytest.mark.parametrize("index", range(len(NUMBER_PROGRAMS)))
def test_python_number_operands(index):
    program = NUMBER_PROGRAMS[index]
    x = uniform((2, 3), 0.5, 2, seed=12)
    check_against_torch(program, x)
    check_against_torch(program, x.astype(np.float32))
    check_gradcheck(program, x)


def test_int_tensor_with_float_tensor_requiring_grad():
    ints = np.array([[1, 2, 3], [0, -1, 4]], dtype=np.int64)
    floats = uniform((3,), 0.5, 2, seed=13)
    for program in [lambda lib, i, f: i * f, lambda lib, i, f: f / (i + 5),
                    lambda lib, i, f: lib.pow(f, i), lambda lib, i, f: lib.maximum(i, f),
                    lambda lib, i, f: lib.atan2(i, f), lambda lib, i, f: i ** f,
                    lambda lib, i, f: lib.where(i > 0, f, i)]:
        check_against_torch(program, ints, floats)
        check_against_torch(program, ints, floats.astype(np.float32))


def test_floor_divide_and_number_remainder_have_no_derivative():
    torch = pytest.importorskip("torch")
    for program, op in [(lambda lib, a: a // 2, "floor_divide"),
                        (lambda lib, a: lib.floor_divide(a, a + 3), "floor_divide"),
                        (lambda lib, a: 2 % a, "remainder")]:
        x = np.array([1.5, 2.5])
        e = program(ember, leaf(x))
        t = program(torch, torch.from_numpy(x).requires_grad_())
        assert e.requires_grad and t.requires_grad
        assert type(e.grad_fn).__name__ == type(t.grad_fn).__name__ == "NotImplemented"
        with pytest.raises(RuntimeError) as torch_error:
            backward_ones(t)
        with pytest.raises(RuntimeError, match=re.escape(str(torch_error.value))):
            backward_ones(e)
        assert str(torch_error.value) == f"derivative for aten::{op} is not implemented"


def test_rounding_division_has_zero_gradient():
    check_against_torch(lambda lib, a, b: lib.div(a, b, rounding_mode="floor") + a,
                        uniform((3,), seed=3), uniform((3,), 0.5, 1, seed=4))


# ---- in-place variants ---------------------------------------------------------------

INPLACE_PROGRAMS = {
    "exp_": lambda y: y.exp_(), "sigmoid_": lambda y: y.sigmoid_(),
    "tanh_": lambda y: y.tanh_(), "sqrt_": lambda y: y.abs_().sqrt_(),
    "log_": lambda y: y.abs_().add_(0.5).log_(), "relu_": lambda y: y.relu_(),
    "square_": lambda y: y.square_(), "round_": lambda y: y.round_(decimals=1),
    "nan_to_num_": lambda y: y.nan_to_num_(0.0), "floor_": lambda y: y.floor_(),
    "pow_": lambda y: y.pow_(2), "pow_tensor": lambda y: y.abs_().pow_(y.detach() * 0 + 3),
    "ipow": lambda y: y.__ipow__(3), "remainder_": lambda y: y.remainder_(0.7),
    "imod": lambda y: y.__imod__(0.7), "fmod_": lambda y: y.fmod_(0.7),
    "atan2_": lambda y: y.atan2_(y * 2 + 3), "arctan2_": lambda y: y.arctan2_(y * 2 + 3),
    "abs_": lambda y: y.abs_(), "absolute_": lambda y: y.absolute_(),
    "sign_": lambda y: y.sign_(), "clamp_": lambda y: y.clamp_(-0.2, 0.3),
    "clip_": lambda y: y.clip_(min=-0.2), "sin_": lambda y: y.sin_(),
    "reciprocal_": lambda y: y.add_(2).reciprocal_(), "frac_": lambda y: y.frac_(),
}


@pytest.mark.parametrize("name", sorted(INPLACE_PROGRAMS))
def test_inplace_matches_torch(name):
    inplace = INPLACE_PROGRAMS[name]

    def program(lib, a):
        y = a * 1.5
        result = inplace(y)
        assert result is y
        return y * 2

    check_against_torch(program, uniform((2, 3), seed=14))


def test_inplace_function_forms():
    def program(lib, a):
        y = a * 1
        lib.sin_(y)
        lib.exp_(y)  # saves y itself, after the write
        return y * 1

    x = uniform((2, 3), seed=15)
    check_against_torch(program, x)
    check_gradcheck(program, x, gradgrad=True)


def test_inplace_after_inplace_saving_output_raises_torch_message():
    """exp_ saves its output, x itself: a second in-place write invalidates it."""
    torch = pytest.importorskip("torch")
    x = uniform((2, 3), seed=15)

    def run(lib, a):
        y = a * 1
        lib.exp_(y)
        y.tanh_()
        backward_ones(y)

    with pytest.raises(RuntimeError) as torch_error:
        run(torch, torch.from_numpy(x).requires_grad_())
    with pytest.raises(RuntimeError) as ember_error:
        run(ember, leaf(x))
    assert _normalize(str(ember_error.value)) == _normalize(str(torch_error.value))


def test_inplace_through_a_view():
    if "__getitem__" not in ember._C._autograd_handlers:
        pytest.skip("indexing's formula is not registered")
    x = uniform((2, 3), seed=15)

    def exp_row(lib, a):
        y = a * 1
        lib.exp_(y[0])  # the base's history updates too
        return y

    def clamp_row(lib, a):
        y = a * 1
        y[1].clamp_(-0.2, 0.3)
        return y * 2

    for program in (exp_row, clamp_row):
        check_against_torch(program, x)
        check_gradcheck(program, x)


def test_second_inplace_write_invalidates_a_saved_view_like_torch():
    if "__getitem__" not in ember._C._autograd_handlers:
        pytest.skip("indexing's formula is not registered")
    x = ember.from_numpy(uniform((2, 3), seed=15)).requires_grad_()
    y = x * 1
    ember.exp_(y[0])   # saves the row it wrote (its output)
    y[1].clamp_(-0.2, 0.3)  # bumps the version counter all of y's views share
    with pytest.raises(RuntimeError, match="which is output 0 of Exp, is at version 2; "
                                           "expected version 1 instead"):
        y.sum().backward()


def test_inplace_comparison_has_zero_gradient():
    torch = pytest.importorskip("torch")
    for name in ["eq_", "lt_", "greater_equal_", "not_equal_", "logical_not_",
                 "logical_and_"]:
        x = np.array([0.5, 1.0, 2.0])

        def program(lib, a, b):
            y = a * 1
            args = () if name == "logical_not_" else (b,)
            getattr(y, name)(*args)
            return y + a

        e_a, e_b = leaf(x), leaf(x[::-1].copy())
        e = program(ember, e_a, e_b)
        backward_ones(e)
        np.testing.assert_array_equal(np.asarray(e_a.grad), [1.0, 1.0, 1.0])
        if name.startswith("logical"):
            continue  # torch records logical_and_ on floats as a multiplication
        check_against_torch(program, x, x[::-1].copy())
        y = torch.from_numpy(x).requires_grad_() * 1
        assert type(getattr(leaf(x) * 1, name)(1.0).grad_fn).__name__ == \
            type(getattr(y, name)(1.0).grad_fn).__name__


def test_inplace_on_leaf_refused():
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as torch_error:
        torch.ones(2, requires_grad=True).exp_()
    with pytest.raises(RuntimeError, match=re.escape(str(torch_error.value))):
        leaf(np.ones(2)).exp_()
    with pytest.raises(RuntimeError, match=re.escape(str(torch_error.value))):
        leaf(np.ones(2)).clamp_(0, 1)


def _normalize(message):
    """torch -> ember; the hints after the message differ."""
    return message.replace("torch", "ember").split(" Hint:")[0]


@pytest.mark.parametrize("program", [
    lambda lib, x: x.exp(), lambda lib, x: x.sigmoid(), lambda lib, x: lib.tanh(x),
    lambda lib, x: x.sqrt(), lambda lib, x: lib.relu(x),
    lambda lib, x: x ** x,
])
def test_modified_saved_output_raises_torch_message(program):
    torch = pytest.importorskip("torch")
    x = np.array([1.0, 2.0, 3.0], dtype=np.float32)

    def run(lib, t):
        y = program(lib, t)
        y.add_(1)
        backward_ones(y)

    with pytest.raises(RuntimeError) as torch_error:
        run(torch, torch.from_numpy(x).requires_grad_())
    with pytest.raises(RuntimeError) as ember_error:
        run(ember, leaf(x))
    assert _normalize(str(ember_error.value)) == _normalize(str(torch_error.value))


def test_modified_saved_input_raises():
    x = leaf(np.array([1.0, 2.0], dtype=np.float32))
    y = x * 1
    z = y.sin()
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        backward_ones(z)


# ---- out=, nondifferentiable results, registration ------------------------------------

@pytest.mark.parametrize("call_with_out", [
    lambda x, o: ember.exp(x, out=o), lambda x, o: ember.pow(x, 2, out=o),
    lambda x, o: ember.clamp(x, 0, 1, out=o), lambda x, o: ember.where(x > 0, x, 0.0, out=o),
    lambda x, o: ember.gelu(x, out=o), lambda x, o: ember.maximum(x, x, out=o),
    lambda x, o: ember.atan2(x, x, out=o), lambda x, o: ember.abs(x, out=o),
])
def test_out_refused_when_grad_needed(call_with_out):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as torch_error:
        torch.exp(torch.ones(2, requires_grad=True), out=torch.empty(2))
    expected = str(torch_error.value).replace("exp()", "")
    out = ember.empty(2)
    with pytest.raises(RuntimeError, match=re.escape(expected)):
        call_with_out(leaf(np.ones(2, dtype=np.float32)), out)


@pytest.mark.parametrize("program", [
    lambda lib, x: x == 1, lambda lib, x: x.lt(0.5), lambda lib, x: lib.greater_equal(x, x),
    lambda lib, x: x.isnan(), lambda lib, x: lib.isfinite(x), lambda lib, x: lib.isposinf(x),
    lambda lib, x: x.logical_not(), lambda lib, x: lib.logical_xor(x, x),
    lambda lib, x: x != x, lambda lib, x: lib.ne(x, 0), lambda lib, x: lib.less_equal(x, 1),
    lambda lib, x: lib.logical_and(x, x > 0), lambda lib, x: x.isneginf(),
])
def test_nondifferentiable_results(program):
    x = np.array([0.5, 1.0], dtype=np.float32)
    assert program(ember, leaf(x)).requires_grad is False
    check_against_torch(program, x)


def test_result_type_with_grad_tensor():
    x = leaf(np.ones(2, dtype=np.float32))
    assert ember.result_type(x, 2.0) == ember.float32


def test_positive_is_the_input_itself():
    x = leaf(np.ones(2))
    y = x * 2
    assert ember.positive(y) is y and +y is y and y.positive() is y


# The operator names of c/python/Pointwise.c and Unary.c (THPPointwise_functions,
# THPVariable_pointwise_methods, THPUnary_functions, THPVariable_unary_methods)
# and the number-slot names their slots dispatch to.
POINTWISE_BINARY = ["add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide",
                    "floor_divide", "remainder", "fmod", "pow", "atan2", "arctan2", "eq", "ne",
                    "not_equal", "lt", "less", "le", "less_equal", "gt", "greater", "ge",
                    "greater_equal", "logical_and", "logical_or", "logical_xor",
                    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
                    "bitwise_right_shift"]
POINTWISE_UNARY = ["neg", "negative", "abs", "absolute", "sign", "bitwise_not", "logical_not"]
POINTWISE_OTHER = ["maximum", "minimum", "positive", "clamp", "clip", "clamp_", "clip_",
                   "where", "result_type", "promote_types", "can_cast"]
UNARY_PLAIN = ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt",
               "reciprocal", "sin", "cos", "tan", "asin", "acos", "atan", "asinh", "acosh",
               "atanh", "sinh", "cosh", "tanh", "sigmoid", "erf", "erfc", "silu", "frac",
               "floor", "ceil", "trunc",
               "relu", "square", "isnan", "isinf", "isfinite", "isposinf", "isneginf",
               "round", "gelu", "nan_to_num"]
UNARY_INPLACE = ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt",
                 "reciprocal", "sin", "cos", "tan", "asin", "acos", "atan", "asinh", "acosh",
                 "atanh", "sinh", "cosh", "tanh", "sigmoid", "erf", "erfc", "frac", "floor",
                 "ceil", "trunc", "relu",
                 "square", "round", "nan_to_num"]
SLOT_NAMES = [f"__{n}__" for n in ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow",
                                    "and", "or", "xor", "lshift", "rshift"]]
TABLE_NAMES = sorted(
    POINTWISE_BINARY + [n + "_" for n in POINTWISE_BINARY] + POINTWISE_UNARY
    + [n + "_" for n in POINTWISE_UNARY] + POINTWISE_OTHER + UNARY_PLAIN
    + [n + "_" for n in UNARY_INPLACE])
DUNDER_NAMES = sorted(SLOT_NAMES + [n.replace("__", "__i", 1) for n in SLOT_NAMES]
                      + ["__neg__", "__abs__", "__invert__"])


def test_every_table_operator_is_registered():
    op_names = set(ember._C._op_names())
    handlers = ember._C._autograd_handlers
    assert set(TABLE_NAMES) <= op_names, set(TABLE_NAMES) - op_names
    assert [n for n in TABLE_NAMES + DUNDER_NAMES if n not in handlers] == []


def test_bitwise_slots_leave_no_history():
    x = leaf(np.ones(2, dtype=np.float32))
    ints = ember.tensor([1, 2])
    assert not (ints & 3).requires_grad and not (~ints).requires_grad
    with pytest.raises(TypeError):
        ~x
    assert (x * 2).requires_grad


@pytest.mark.parametrize("program", [
    lambda x: x.exp(), lambda x: x ** x, lambda x: (x * 1).exp_(), lambda x: x.relu(),
    lambda x: (x * 1).lt_(1.0), lambda x: ember.where(x > 0, x, 1.0),
])
def test_graph_freed_by_reference_counting(program):
    """Saved outputs keep no tensor -> node -> tensor cycle: dropping the
    result frees its node without the cycle collector."""
    x = leaf(np.array([0.5, 1.5]))
    gc.disable()
    try:
        y = program(x)
        node = weakref.ref(y.grad_fn)
        del y
        assert node() is None
    finally:
        gc.enable()
