"""float16 and bfloat16 on CUDA tensors: the pointwise and unary kernels,
end to end without a GPU.

The `device` fixture of tests/test_cuda_launcher.py runs ember's CUDA path
with the kernels compiled by g++ (all the half-precision ones in one run,
`kernels` below), or on a real GPU through CuPy where there is one.  Each
element is widened to float32, computed with the CPU's float32 formula and
rounded once to the 16-bit dtype (Note [Half precision on the device] in
ember/cuda/_kernels.py), so every result must be the CPU operator's, bit
for bit: random values plus NaN, infinities, signed zeros, subnormals of
both formats and products that overflow to inf.
"""

import numpy as np
import pytest

import ember
from ember.cuda import _kernels, _launcher, _pointwise

import cuda_emulation
from test_cuda_binary_reduce_kernels import ALPHA_OPS, CPU
from test_cuda_launcher import device, runtime, seeded  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(cuda_emulation.compiler() is None, reason="no g++")

HALVES = ("float16", "bfloat16")
FLOAT_OPS = [op for op, info in _pointwise.ops().items() if info.float_ok]
UNARY_FORMULAS = [op for op in _kernels.float_formulas()
                  if op not in ("round_decimals", "nan_to_num")]


def _keys():
    """Every pointwise kernel these tests launch: each operator on
    same-dtype inputs in both rank classes, plus the mixed forms below."""
    for dtype in HALVES:
        for op in FLOAT_OPS:
            arity = _pointwise.ops()[op].arity
            ins = ("bool",) + (dtype,) * (arity - 1) if op == "where" else (dtype,) * arity
            for rank_class in _pointwise.RANK_CLASSES:
                yield op, ins, dtype, rank_class
        for ins, compute in (((dtype, "float32"), "float32"), ((dtype, "int64"), dtype),
                             ((dtype, "float64"), "float64")):
            yield "add", ins, compute, "contiguous"
    yield "add", ("float16", "bfloat16"), "float32", "contiguous"


@pytest.fixture(scope="module", autouse=True)
def kernels(runtime):
    runtime.preload("half_kernels",
                    [_launcher._pointwise_kernel(key) for key in _keys()]
                    + [_launcher._unary_kernel(op, dtype, rank_class)
                       for op in UNARY_FORMULAS for dtype in HALVES
                       for rank_class in _kernels.RANK_CLASSES])


# float16's largest finite and smallest subnormal, a float16 subnormal,
# bfloat16 subnormals, values whose products and sums overflow either format
SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 2.5, -3.0,
            65504.0, 6e-8, -3e-5, 1e-39, -5e-40, 3e38, -2e38, 300.0, 60000.0]


def _values(dtype, n, seed=14):
    rng = np.random.default_rng(seed)
    x = np.concatenate([SPECIALS, rng.standard_normal(n - len(SPECIALS)) * 3])
    return ember.tensor(x.astype(np.float32)).to(getattr(ember, dtype))


def same_bits(got, expected):
    """The same dtype, shape and values bit for bit (any NaN matches any
    NaN: a GPU's NaNs carry no payload)."""
    assert got.is_cuda and got.dtype == expected.dtype and got.shape == expected.shape
    got, expected = got.cpu(), expected
    if not expected.dtype.is_floating_point:
        assert (got == expected).all().item()
        return
    a = got.float().numpy()
    b = expected.float().numpy()
    differ = (a.view(np.uint32) != b.view(np.uint32)) & ~(np.isnan(a) & np.isnan(b))
    assert not differ.any(), f"got {a[differ][:5]}, CPU {b[differ][:5]}"


def _operands(op, dtype, n=48):
    arity = _pointwise.ops()[op].arity
    operands = [_values(dtype, n, seed=14 + k) for k in range(arity)]
    if op == "where":
        operands[0] = operands[1] > operands[2]
    return operands


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("op", FLOAT_OPS)
def test_pointwise_operator_matches_cpu(device, op, dtype):
    cpu = CPU[op]
    operands = _operands(op, dtype)
    same_bits(cpu(*[t.cuda() for t in operands]), cpu(*operands))
    # strided: each operand a transposed (6, 8) view
    views = [t.view(8, 6).t() for t in operands]
    same_bits(cpu(*[t.cuda().view(8, 6).t() for t in operands]), cpu(*views))
    if op == "where" or op in ALPHA_OPS or len(operands) == 1:
        return
    # a Python number as the last operand: it computes in float32
    try:
        expected = cpu(*operands[:-1], 1.1)
    except TypeError:  # maximum, atan2, ...: tensors only, as in PyTorch
        return
    same_bits(cpu(*[t.cuda() for t in operands[:-1]], 1.1), expected)


@pytest.mark.parametrize("dtype", HALVES)
def test_in_place_and_out(device, dtype):
    a, b = _values(dtype, 48), _values(dtype, 48, seed=3)
    da, db = a.cuda(), b.cuda()
    da.mul_(db)
    same_bits(da, a.clone().mul_(b))
    out = ember.empty(48, dtype=getattr(ember, dtype), device="cuda")
    ember.sub(a.cuda(), db, out=out)
    same_bits(out, ember.sub(a, b))
    same_bits(ember.clamp(a.cuda(), -1.5, 2.0), ember.clamp(a, -1.5, 2.0))
    same_bits(ember.where(db > 0, a.cuda(), 0.3), ember.where(b > 0, a, 0.3))


@pytest.mark.parametrize("dtype", HALVES)
def test_promotion_as_on_the_cpu(device, dtype):
    a = _values(dtype, 48)
    for other in (_values("float32", 48, seed=5), _values("float64", 48, seed=5),
                  ember.arange(48), _values("bfloat16" if dtype == "float16" else "float16",
                                            48, seed=5)):
        same_bits(a.cuda() + other.cuda(), a + other)


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("op", UNARY_FORMULAS)
def test_unary_formula_matches_cpu(device, op, dtype):
    a = _values(dtype, 48)
    if op == "gelu_tanh":
        def cpu(t):
            return ember.nn.functional.gelu(t, approximate="tanh")
    else:
        cpu = getattr(ember, op) if hasattr(ember, op) else getattr(ember._C, op)
    same_bits(cpu(a.cuda()), cpu(a))
    same_bits(cpu(a.cuda().view(8, 6).t()), cpu(a.view(8, 6).t()))


def test_number_as_gives_the_bits():
    assert _pointwise.number_as(1.0, "float16") == 0x3C00
    assert _pointwise.number_as(1.0, "bfloat16") == 0x3F80
    assert _pointwise.number_as(70000.0, "float16") == 0x7C00
    assert _pointwise.number_as(-2.0, "bfloat16") == 0xC000
