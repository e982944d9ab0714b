"""Superinstructions (Note [Superinstructions] in c/th/THFused.c): two
arithmetic instructions run as one loop must give the bits of eager ember,
for every pair of {add, sub, mul, div}, every vector/scalar form, both
sides of the second op, both float dtypes and both loop families."""

import itertools

import numpy as np
import pytest

import ember
from ember._C import FusedKernel

OPS = ["add", "sub", "mul", "div"]
DTYPES = {ember.float32: np.float32, ember.float64: np.float64}
N = 2 * 1024 + 37  # two full blocks and a tail


def sample(dtype, seed):
    """Values with zeros, signed zeros, infinities and NaN mixed in."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(-3, 3, size=N).astype(DTYPES[dtype])
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0])
    a[seed::5] = np.resize(specials, len(a[seed::5]))
    return ember.from_numpy(a)


def bits(t):
    a = np.ascontiguousarray(t.numpy())
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


def eager(name, x, y):
    if not isinstance(x, ember.Tensor):
        x = ember.tensor(x, dtype=y.dtype)
    return getattr(ember, name)(x, y)


# (x, y, z): registers 0 and 1 are tensors, 2 is a number (a scalar)
FORMS = [(0, 1, 0), (2, 1, 0), (0, 2, 1), (0, 1, 2), (2, 0, 1), (1, 2, 2)]


@pytest.fixture(params=["avx2", "baseline"])
def isa(request):
    before = ember._C._fused_isa()
    try:
        ember._C._fused_isa(request.param)
    except ValueError:
        pytest.skip("no avx2 on this machine")
    yield request.param
    ember._C._fused_isa(before)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("first,then", list(itertools.product(OPS, OPS)))
def test_pairs_equal_eager(isa, dtype, first, then):
    regs = [sample(dtype, 0), sample(dtype, 1), 1.75]
    for (x, y, z), t_left in itertools.product(FORMS, [True, False]):
        second = (then, 4, 3, z) if t_left else (then, 4, z, 3)
        code = [(first, 3, x, y), second]
        (got,) = FusedKernel(3, code, [4])(*regs)
        t = eager(first, regs[x], regs[y])
        want = eager(then, t, regs[z]) if t_left else eager(then, regs[z], t)
        np.testing.assert_array_equal(bits(got), bits(want))


def test_a_pair_reading_a_freed_slot_is_not_fused_in_place():
    # t = x * 2 frees x's block buffer (x is gathered: strided), which the
    # pair's result may then get; the result still equals eager
    base = sample(ember.float32, 2)
    x = base[::2]
    code = [("const", 2, 2.0), ("mul", 3, 0, 2), ("add", 4, 3, 1)]
    y = sample(ember.float32, 3)[: x.shape[0]]
    (got,) = FusedKernel(2, code, [4])(x, y)
    np.testing.assert_array_equal(bits(got), bits(ember.add(x * 2.0, y)))
