"""flip, roll, repeat, tile, tril/triu and the float predicates (isnan,
isinf, isfinite, isposinf, isneginf) on CUDA tensors, end to end without a
GPU.

The `device` fixture of tests/test_cuda_launcher.py runs ember's CUDA path
with the kernel sources of ember/cuda/_rearrange.py and _kernels.py
compiled by g++ (all of them in one run, `kernels` below), or on a real
GPU through CuPy where there is one.  Elements move as bits and the
predicates are exact, so every result must be ember's CPU operator's (and
NumPy's) exactly, for every dtype; errors must be the CPU's messages.
"""

import os

import numpy as np
import pytest

import ember
from ember.cuda import _kernels, _launch, _launcher, _nvrtc, _rearrange

import cuda_emulation
from test_cuda_indexing import _same_error
from test_cuda_launcher import ROOT, _as_numpy, device, runtime, same, seeded  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(cuda_emulation.compiler() is None, reason="no g++")

DTYPES = [ember.bool, ember.uint8, ember.int8, ember.int16, ember.int32, ember.int64,
          ember.float32, ember.float64, ember.float16, ember.bfloat16]
PREDICATES = list(_kernels.predicate_formulas())


@pytest.fixture(scope="module", autouse=True)
def kernels(runtime):
    runtime.preload("rearrange_kernels",
                    [_launcher._rearrange_kernel(dtype) for dtype in _rearrange.DTYPES]
                    + [_launcher._unary_kernel(op, dtype, rank_class) for op in PREDICATES
                       for dtype in _kernels.DTYPES for rank_class in _kernels.RANK_CLASSES])


def _values(shape, dtype):
    return ember.randint(-50, 50, shape).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_flip_and_roll(device, dtype):
    a = _values((3, 4, 5), dtype)
    strided = a.transpose(0, 2)  # a strided input reads through its strides
    for x in (a, strided):
        dx = x.cuda()
        for dims in ([0], [2], [0, 2], [-1, 1, 0]):
            same(dx.flip(dims), x.flip(dims))
            expected = np.flip(_as_numpy(x), dims)
            np.testing.assert_array_equal(_as_numpy(dx.flip(*dims).cpu()), expected)
        same(ember.fliplr(dx), ember.fliplr(x))
        same(ember.flipud(dx), ember.flipud(x))
        for shifts, dims in ((1, 0), (-7, 2), ((1, 2), (0, 2)), ((2, -1), (1, 1)), (6, None),
                             (-13, None)):
            same(dx.roll(shifts, dims), x.roll(shifts, dims))
        np.testing.assert_array_equal(_as_numpy(dx.roll((1, -2), (0, 2)).cpu()),
                                      np.roll(_as_numpy(x), (1, -2), (0, 2)))
        np.testing.assert_array_equal(_as_numpy(ember.roll(dx, 7).cpu()),
                                      np.roll(_as_numpy(x), 7))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_repeat_and_tile(device, dtype):
    a = _values((2, 3), dtype)
    for x in (a, a.t()):
        dx = x.cuda()
        for repeats in ((1, 1), (2, 3), (3, 1, 2), (2, 1, 1, 1), (0, 2)):
            same(dx.repeat(*repeats), x.repeat(*repeats))
            np.testing.assert_array_equal(_as_numpy(dx.repeat(repeats).cpu()),
                                          np.tile(_as_numpy(x), repeats))
        same(dx.tile(2), x.tile(2))
        same(dx.tile((2, 1, 3)), x.tile((2, 1, 3)))
    same(ember.tensor(5, dtype=dtype).cuda().repeat(3, 2),
         ember.tensor(5, dtype=dtype).repeat(3, 2))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_tril_and_triu(device, dtype):
    a = _values((2, 4, 5), dtype)
    for x in (a, a.transpose(1, 2)):
        dx = x.cuda()
        for diagonal in (0, 1, -2, 7, -9):
            same(dx.tril(diagonal), x.tril(diagonal))
            same(ember.triu(dx, diagonal=diagonal), ember.triu(x, diagonal=diagonal))
            np.testing.assert_array_equal(_as_numpy(dx.triu(diagonal).cpu()),
                                          np.triu(_as_numpy(x), diagonal))
        inplace = dx.clone()
        assert inplace.tril_(-1) is inplace
        same(inplace, x.tril(-1))
        out = ember.empty(x.shape, dtype=dtype, device="cuda")
        assert ember.triu(dx, 1, out=out) is out
        same(out, x.triu(1))
    view = a.cuda()
    view[:, 1:, 1:].triu_()  # in place through a strided view, the rest untouched
    expected = a.clone()
    expected[:, 1:, 1:].triu_()
    same(view, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", PREDICATES)
def test_float_predicates(device, op, dtype):
    specials = ember.tensor([0.0, -0.0, 1.5, -2.0, float("nan"), float("inf"), -float("inf"),
                             1e30, -1e-40, 65504.0, 70000.0] * 2)
    a = specials.to(dtype) if dtype.is_floating_point else _values((22,), dtype)
    for x in (a, a.view(2, 11).t()):  # contiguous, and strided
        got = getattr(ember, op)(x.cuda())
        same(got, getattr(ember, op)(x))
        if dtype != ember.bfloat16 and op in ("isnan", "isinf", "isfinite"):
            np.testing.assert_array_equal(_as_numpy(got.cpu()), getattr(np, op)(_as_numpy(x)))
    out = ember.empty(22, dtype=ember.bool, device="cuda")
    assert getattr(ember, op)(a.cuda(), out=out) is out
    same(out, getattr(ember, op)(a))


def test_rot90_and_a_finiteness_check_run_on_the_device(device):
    """rot90 is flips and a transpose; isfinite guards a loss: both run
    through the table."""
    x = ember.randn(3, 4)
    same(ember.rot90(x.cuda(), 1, (0, 1)), ember.rot90(x, 1, (0, 1)))
    same(ember.rot90(x.cuda(), -1, (0, 1)), ember.rot90(x, -1, (0, 1)))
    assert bool(ember.isfinite(x.cuda()).all())


def test_0_d_tensors_and_integer_tensors_as_arguments(device):
    t = ember.tensor(2.5)
    for run in (lambda x: x.flip(0), lambda x: x.roll(3, 0), lambda x: x.roll(1),
                lambda x: x.repeat(2, 3), lambda x: x.tile(2)):
        same(run(t.cuda()), run(t))
    a = _values((3, 4), ember.int64)
    same(a.cuda().roll(ember.tensor(2), ember.tensor(1)), a.roll(2, 1))
    same(a.cuda().flip(np.int64(1)), a.flip(1))
    same(a.cuda().repeat(ember.tensor(2), 1), a.repeat(2, 1))


def test_gradients_flow_through_them_on_the_device(device):
    x = ember.randn(3, 4, dtype=ember.float64)
    weights = ember.randn(6, 8, dtype=ember.float64)

    def loss(t, w):
        moved = t.flip(0).roll(1, 1).tril(1).repeat(2, 2)
        return (moved * w).sum()

    dx = x.cuda().requires_grad_()
    loss(dx, weights.cuda()).backward()
    cx = x.clone().requires_grad_()
    loss(cx, weights).backward()
    same(dx.grad, cx.grad)


def test_errors_are_the_cpus(device):
    a = ember.randn(3, 4)
    da = a.cuda()
    for run in (lambda t: t.flip(2), lambda t: t.flip(0, -2), lambda t: t.flip(),
                lambda t: ember.fliplr(t[0]), lambda t: ember.flipud(t[0, 0]),
                lambda t: t.roll((1, 2), 0), lambda t: t.roll((), 0), lambda t: t.roll(1, 3),
                lambda t: t.roll((1, 2)), lambda t: t.repeat(2), lambda t: t.repeat(2, -3),
                lambda t: t.tril(out=ember.empty(3, 4, dtype=ember.float64,
                                                 device=t.device)),
                lambda t: t[0].tril(), lambda t: t[0].triu_(), lambda t: t.tile(),
                lambda t: t.repeat(*[1] * 33)):
        _same_error(lambda: run(a), lambda: run(da))


@pytest.mark.skipif(not _nvrtc.available(),
                    reason="NVRTC is not installed (pip install ember[cuda])")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_kernels_compile_without_spills(arch):
    """Each family as one program (one NVRTC run: the sources' headers have
    include guards), every kernel of it checked."""
    cache = os.path.join(ROOT, "build", "cuda_kernels")
    rearranging = {_rearrange.kernel_name(dtype): _rearrange.kernel_source(dtype)
                   for dtype in _rearrange.DTYPES}
    predicates = {_kernels.kernel_name(op, dtype, rank_class):
                  _kernels.kernel_source(op, dtype, rank_class)
                  for op in PREDICATES for dtype in _kernels.DTYPES
                  for rank_class in _kernels.RANK_CLASSES}
    for stem, sources, headers in (("rearrange", rearranging, _rearrange.headers()),
                                   ("predicates", predicates, _kernels.headers())):
        compiled = _launch.compile_cached("\n".join(sources.values()), arch, headers,
                                          name=f"ember_{stem}.cu", directory=cache)
        for name in sources:
            assert compiled.spill_bytes[name] == 0 and compiled.registers[name] <= 64, \
                (name, compiled.registers[name], compiled.spill_bytes[name])


@pytest.mark.parametrize("dtype", [ember.bool, ember.int16, ember.float32, ember.bfloat16],
                         ids=str)
def test_repeat_interleave(device, dtype):
    a = _values((3, 4), dtype)
    for x in (a, a.t()):  # a strided input gathers through its strides
        dx = x.cuda()
        counts = ember.tensor([2, 0, 3] + [1] * (x.shape[1] - 3))
        for repeats, dim, kwargs in ((2, None, {}), (3, 0, {}),
                                     (2, -1, {"output_size": 2 * x.shape[1]}),
                                     (ember.tensor([1, 0, 2, 1][:x.shape[0]]), 0, {}),
                                     (counts, 1, {}), (counts.int(), -1, {}),
                                     (ember.tensor(2), None, {}), (ember.tensor([3]), 1, {})):
            on_device = repeats.cuda() if isinstance(repeats, ember.Tensor) else repeats
            same(dx.repeat_interleave(on_device, dim, **kwargs),
                 x.repeat_interleave(repeats, dim, **kwargs))
        # a 0-dim CPU tensor of repeats goes with CUDA tensors
        same(dx.repeat_interleave(ember.tensor(2), 0), x.repeat_interleave(2, 0))
        same(ember.repeat_interleave(dx[1, 2], 3), ember.repeat_interleave(x[1, 2], 3))
    counts = ember.tensor([1, 0, 4, 2])
    same(ember.repeat_interleave(counts.cuda()), ember.repeat_interleave(counts))


def test_repeat_interleave_errors_are_the_cpus(device):
    a = ember.randn(3, 4)
    da = a.cuda()
    for run in (lambda t: t.repeat_interleave(-1), lambda t: t.repeat_interleave(2, 2),
                lambda t: t.repeat_interleave(ember.tensor([1, 2], device=t.device), 0),
                lambda t: t.repeat_interleave(ember.tensor([1, -1, 1], device=t.device), 0),
                lambda t: t.repeat_interleave(ember.tensor([1.0, 2.0, 1.0], device=t.device), 0),
                lambda t: t.repeat_interleave(2, 0, output_size=5)):
        _same_error(lambda: run(a), lambda: run(da))
