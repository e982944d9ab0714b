"""float16 and bfloat16 reductions, softmax and scans on CUDA tensors, end
to end without a GPU.

The `device` fixture of tests/test_cuda_launcher.py runs ember's CUDA path
with the kernels compiled by g++ (all the half-precision reductions in one
run, `kernels` below), or on a real GPU through CuPy where there is one.
A half-precision reduction is float32's: elements widened on load, float32
accumulators, one rounding as the result is stored (Note [Reducing half
precision on the device] in ember/cuda/_reduce.py), as the CPU's (Note
[Reducing half precision] in c/th/THReduce.c).  So:

  * bit for bit where the float32 kernels agree with the CPU's whatever
    the order: max/min and their indices, the inf norms, the scans (one
    thread a line, in order), and sums and means of values on a grid fine
    enough that float32 adds them exactly in any order;
  * to PyTorch's tolerances for half precision (torch.testing: float16
    rtol 1e-3, bfloat16 1.6e-2, atol 1e-5) otherwise, against ember's CPU
    and against PyTorch's CPU operators.
"""

import numpy as np
import pytest

import ember
from ember.cuda import _launcher, _reduce

import cuda_emulation
from test_cuda_half import SPECIALS, same_bits
from test_cuda_launcher import device, runtime, seeded  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(cuda_emulation.compiler() is None, reason="no g++")

HALVES = ("float16", "bfloat16")
# torch.testing.assert_close's defaults for the two dtypes
TOLERANCES = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5)}


@pytest.fixture(scope="module", autouse=True)
def kernels(runtime):
    runtime.preload("half_reductions",
                    [_launcher._reduce_kernel((op, dtype, rank_class))
                     for op in _reduce.REDUCTIONS for dtype in HALVES
                     if dtype in _reduce.kernel_dtypes(op)
                     for rank_class in _reduce.RANK_CLASSES])


def _random(dtype, shape, seed=14, specials=True, positive=False):
    """Random values of `dtype` (rounded from float32), with NaN, the
    infinities, zeros, subnormals and ties at the start when `specials`."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    x = rng.uniform(0.5, 2.0, n) if positive else rng.standard_normal(n) * 3
    if specials:
        x[:len(SPECIALS)] = SPECIALS
        x[40:44] = x[45]  # ties
    rng.shuffle(x)
    return ember.tensor(x.astype(np.float32)).to(getattr(ember, dtype)).view(*shape)


def _grid(dtype, shape, seed=3):
    """Values k / 16 for |k| < 128: 8 significant bits at most (exact in both
    formats), so float32 adds a few thousand of them exactly in any order."""
    rng = np.random.default_rng(seed)
    k = rng.integers(-127, 128, int(np.prod(shape)))
    return ember.tensor((k / 16).astype(np.float32)).to(getattr(ember, dtype)).view(*shape)


def same_up_to_zero_signs(got, expected):
    """same_bits, but a 0 matches a -0: max and min take the first of equal
    values they meet, and the block's tree meets them in another order than
    the CPU's scan (indices agree: the arg-reductions' ties go to the lower
    index)."""
    zeros = expected == 0
    same_bits(got.cpu().masked_fill(zeros, 0).cuda(), expected.masked_fill(zeros, 0))


def _views(x):
    """The tensor on the device, contiguous and transposed (strided), with
    its CPU twin: [(cuda view, cpu view)]."""
    d = x.cuda()
    return [(d, x), (d.transpose(0, 2), x.transpose(0, 2)), (d[:, 1:, ::2], x[:, 1:, ::2])]


def close(got, expected, dtype):
    """Same dtype and shape, values within the dtype's tolerances, NaN where
    the CPU has NaN."""
    assert got.is_cuda and got.dtype == expected.dtype and got.shape == expected.shape
    rtol, atol = TOLERANCES[dtype]
    np.testing.assert_allclose(got.cpu().float().numpy(), expected.float().numpy(),
                               rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", HALVES)
def test_max_min_and_their_indices_match_cpu_bit_for_bit(device, dtype):
    x = _random(dtype, (4, 6, 10))
    for d, h in _views(x):
        for op in ("amax", "amin", "argmax", "argmin"):
            same_up_to_zero_signs(getattr(d, op)(), getattr(h, op)())
            for dim in (0, 1, 2, -1):
                same_up_to_zero_signs(getattr(d, op)(dim), getattr(h, op)(dim))
        same_up_to_zero_signs(d.amax(dim=(0, 2), keepdim=True),
                              h.amax(dim=(0, 2), keepdim=True))
        values, indices = d.max(dim=1)
        same_up_to_zero_signs(values, h.max(dim=1).values)
        same_bits(indices, h.max(dim=1).indices)
        same_up_to_zero_signs(d.min(), h.min())
        for order in (float("inf"), float("-inf")):
            same_up_to_zero_signs(ember.norm(d, order, dim=2), ember.norm(h, order, dim=2))


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_scans_match_cpu_bit_for_bit(device, op, dtype):
    x = _random(dtype, (4, 6, 10), specials=False, positive=op == "cumprod")
    x[0, 0, 3] = float("nan")
    x[1, 2, 0] = float("inf")
    for d, h in _views(x):
        for dim in (0, 1, 2):
            same_bits(getattr(d, op)(dim), getattr(h, op)(dim))


@pytest.mark.parametrize("dtype", HALVES)
def test_sums_of_exact_values_match_cpu_bit_for_bit(device, dtype):
    x = _grid(dtype, (6, 40, 12))
    for d, h in _views(x):
        same_bits(d.sum(), h.sum())
        same_bits(d.mean(), h.mean())
        for dim in (0, 1, (0, 2)):
            same_bits(d.sum(dim), h.sum(dim))
            same_bits(d.mean(dim, keepdim=True), h.mean(dim, keepdim=True))
        same_bits(ember.norm(d, 1, dim=1), ember.norm(h, 1, dim=1))
    # one rounding at the end: 2048 x 1/16 is 128, where a bfloat16
    # accumulator would stall at 32 (its ulp there is 0.25: 1/16 rounds away)
    ones = ember.full((2048,), 1 / 16, dtype=getattr(ember, dtype))
    same_bits(ones.cuda().sum(), ember.tensor(128.0, dtype=ones.dtype))


def _float_cases(d, h):
    """(what, device result, CPU result) for the reductions that add."""
    cases = []
    for dim in (None, 1, (0, 2)):
        cases += [(f"sum {dim}", d.sum(dim), h.sum(dim)), (f"mean {dim}", d.mean(dim), h.mean(dim))]
    cases += [("prod", d.prod(2), h.prod(2)), ("var", d.var(1), h.var(1)),
              ("std", d.std(dim=(0, 2), unbiased=False, keepdim=True),
               h.std(dim=(0, 2), unbiased=False, keepdim=True)),
              ("logsumexp", ember.logsumexp(d, 2), ember.logsumexp(h, 2)),
              ("softmax", d.softmax(1), h.softmax(1)),
              ("log_softmax", ember.log_softmax(d, 2), ember.log_softmax(h, 2))]
    for order in (1, 2, 3, 0.5):
        cases.append((f"norm {order}", ember.norm(d, order, dim=1),
                      ember.norm(h, order, dim=1)))
    return cases


@pytest.mark.parametrize("dtype", HALVES)
def test_float_reductions_match_cpu_to_tolerance(device, dtype):
    # positive values: no cancellation, so relative tolerances apply
    x = _random(dtype, (4, 30, 6), specials=False, positive=True)
    for d, h in _views(x):
        for what, got, expected in _float_cases(d, h):
            try:
                close(got, expected, dtype)
            except AssertionError as error:
                raise AssertionError(f"{what}: {error}") from None


def _torch(x):
    torch = pytest.importorskip("torch")  # the oracle of one test; the rest run without it
    return torch.from_numpy(x.float().numpy()).to(getattr(torch, str(x.dtype)[6:]))


@pytest.mark.parametrize("dtype", HALVES)
def test_float_reductions_match_pytorch(device, dtype):
    x = _random(dtype, (4, 30, 6), specials=False, positive=True)
    t = _torch(x)
    d = x.cuda().transpose(0, 1)
    t = t.transpose(0, 1)
    for got, expected in [(d.sum(), t.sum()), (d.mean(0), t.mean(0)), (d.var(2), t.var(2)),
                          (d.norm(), t.norm()), (ember.logsumexp(d, 1), t.logsumexp(1)),
                          (d.softmax(0), t.softmax(0)), (d.log_softmax(2), t.log_softmax(2)),
                          (d.cumsum(0), t.cumsum(0))]:
        assert str(got.dtype)[6:] == str(expected.dtype)[6:]
        rtol, atol = TOLERANCES[dtype]
        np.testing.assert_allclose(got.cpu().float().numpy(), expected.float().numpy(),
                                   rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", HALVES)
def test_nan_and_infinities_propagate_as_on_the_cpu(device, dtype):
    x = _random(dtype, (3, 19, 2))  # the specials: NaN and both infinities
    for d, h in _views(x):
        for what, got, expected in _float_cases(d, h):
            a, b = got.cpu().float().numpy(), expected.float().numpy()
            assert (np.isnan(a) == np.isnan(b)).all(), what
            assert (np.isinf(a) == np.isinf(b)).all() and (a[np.isinf(a)] == b[np.isinf(b)]).all(), what


@pytest.mark.parametrize("dtype", HALVES)
def test_empty_and_zero_dim_reductions_match_cpu(device, dtype):
    empty = ember.empty((3, 0), dtype=getattr(ember, dtype))
    same_bits(empty.cuda().sum(1), empty.sum(1))
    same_bits(empty.cuda().sum(), empty.sum())
    same_bits(empty.cuda().prod(1), empty.prod(1))
    same_bits(empty.cuda().cumsum(1), empty.cumsum(1))
    scalar = ember.tensor(2.5, dtype=getattr(ember, dtype))
    for op in ("sum", "mean", "amax", "argmin"):
        same_bits(getattr(scalar.cuda(), op)(), getattr(scalar, op)())
    same_bits(scalar.cuda().softmax(0), scalar.softmax(0))
    with pytest.raises(IndexError, match="Expected reduction dim to be specified"):
        empty.cuda().amax()


def test_half_reductions_keep_their_dtype_whatever_the_default(device):
    previous = ember.get_default_dtype()
    ember.set_default_dtype(ember.float64)
    try:  # float16 computes in float32 on the device as on the CPU
        x = _grid("float16", (5, 7))
        same_bits(ember.logsumexp(x.cuda(), 1), ember.logsumexp(x, 1))
        same_bits(x.cuda().cumsum(0), x.cumsum(0))
    finally:
        ember.set_default_dtype(previous)
