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

import os

import numpy as np
import pytest

import ember
from ember.cuda import _kernels, _launch, _launcher, _nvrtc, _pointwise
from ember.cuda import _matmul as _tiled_matmul

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


def _product_reference(a, b, dtype):
    """a @ b in float64 from the operands' exact values, and a bound on
    what float32 sums of k products may differ from it (k roundings of the
    partial sums' size, plus half a unit in the last place of the format)."""
    a64, b64 = a.double().numpy(), b.double().numpy()
    exact = np.matmul(a64, b64)
    k = a64.shape[-1]
    magnitude = np.matmul(np.abs(a64), np.abs(b64))
    format_ulp = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}[dtype]
    return exact, (k * 2.0 ** -24) * magnitude + format_ulp * np.abs(exact) + 1e-30


def _close_to_product(got, a, b, dtype):
    assert got.is_cuda and got.dtype == getattr(ember, dtype)
    exact, bound = _product_reference(a, b, dtype)
    error = np.abs(got.cpu().double().numpy() - exact)
    assert (error <= bound).all(), f"worst error {error.max()}, bound there {bound.flat[error.argmax()]}"


@pytest.mark.parametrize("dtype", HALVES)
def test_half_matmul_sums_in_float32_and_rounds_once(device, dtype):
    """ember's tiled kernel (Note [A tiled product] in ember/cuda/_matmul.py):
    shapes that leave partial tiles, strided and broadcast operands, 1-d
    operands, k = 0, out=; small integers give the exact product, bit for bit."""
    half = getattr(ember, dtype)
    a, b = ember.randn(17, 33).to(half), ember.randn(33, 9).to(half)
    _close_to_product(a.cuda() @ b.cuda(), a, b, dtype)
    _close_to_product(b.cuda().t() @ a.cuda().t(), b.t(), a.t(), dtype)  # transposed views
    _close_to_product(ember.matmul(a.cuda(), b.cuda()[:, 2]), a, b[:, 2], dtype)
    _close_to_product(ember.matmul(b.cuda()[:, 2], a.cuda().t()[:, :33].t().t()[:33, :17].t().t()),
                      b[:, 2], a.t(), dtype)
    batched, shared = ember.randn(2, 1, 5, 7).to(half), ember.randn(3, 7, 4).to(half)
    _close_to_product(batched.cuda() @ shared.cuda(), batched, shared, dtype)
    same_bits(ember.zeros(3, 0).to(half).cuda() @ ember.zeros(0, 4).to(half).cuda(),
              ember.zeros(3, 4).to(half))
    integers = ember.randint(-4, 5, (9, 20)).to(half), ember.randint(-4, 5, (20, 18)).to(half)
    same_bits(integers[0].cuda() @ integers[1].cuda(), integers[0] @ integers[1])
    out = ember.empty(9, 18, dtype=half, device="cuda").t().contiguous().t()  # column-major
    ember.mm(integers[0].cuda(), integers[1].cuda(), out=out)
    same_bits(out, integers[0] @ integers[1])


@pytest.mark.parametrize("dtype", HALVES)
def test_a_half_linear_layer_trains_on_the_device(device, dtype):
    """Forward and every gradient of a 16-bit Linear on the device match
    float64 products of the same values, within float32 sums rounded once."""
    half = getattr(ember, dtype)
    layer = ember.nn.Linear(12, 5).to(half)
    x = ember.randn(6, 12).to(half)
    grad_out = ember.randn(6, 5).to(half)
    layer.cuda()
    y = layer(x.cuda().requires_grad_())
    y.backward(grad_out.cuda())
    weight, bias = layer.weight.detach().cpu(), layer.bias.detach().cpu()
    exact, bound = _product_reference(x, weight.t(), dtype)
    error = np.abs((y.detach().cpu().double() - bias.double()).numpy() - exact)
    assert (error <= 2 * bound + 2.0 ** -6 * np.abs(bias.double().numpy())).all()
    _close_to_product(layer.weight.grad, grad_out.t(), x, dtype)


@pytest.mark.skipif(not _nvrtc.available(),
                    reason="NVRTC is not installed (pip install ember[cuda])")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_matmul_kernels_compile_without_spills(arch):
    cache = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         "build", "cuda_kernels")
    for dtype in _tiled_matmul.DTYPES:
        name = _tiled_matmul.kernel_name(dtype)
        compiled = _launch.compile_cached(_tiled_matmul.kernel_source(dtype), arch,
                                          _tiled_matmul.headers(), name=f"{name}.cu",
                                          directory=cache)
        assert compiled.spill_bytes[name] == 0 and compiled.registers[name] <= 64, \
            (name, compiled.registers[name], compiled.spill_bytes[name])
