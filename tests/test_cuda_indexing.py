"""Advanced indexing and sorting on CUDA tensors, end to end without a GPU.

The same `device` fixture as tests/test_cuda_launcher.py: the kernel
sources of ember/cuda/_index.py and _sort.py compiled by g++ and run on
host memory (or a real GPU through CuPy where there is one).  Every result
is compared with ember's CPU operators exactly, for every dtype the CUDA
kernels take, and with PyTorch where it is installed; errors must be the
CPU's (PyTorch's) messages.
"""

import os

import numpy as np
import pytest

import ember
from ember.cuda import _launch, _nvrtc, _sort

import cuda_emulation
from test_cuda_launcher import ROOT, _as_numpy, device, runtime, same, seeded  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(cuda_emulation.compiler() is None, reason="no g++")

try:
    import torch
except ImportError:  # the CPU operators stay the oracle
    torch = None

DTYPES = [ember.bool, ember.uint8, ember.int8, ember.int16, ember.int32, ember.int64,
          ember.float32, ember.float64, ember.float16, ember.bfloat16]


def _values(shape, dtype):
    """Values of every dtype with repeats (ties for the sorts)."""
    return ember.randint(-4, 5, shape).to(dtype)


def _same_as_torch(got, tensor, index):
    """got == torch's tensor[index] (index items: ints, slices, None,
    Ellipsis and ember tensors)."""
    items = index if isinstance(index, tuple) else (index,)
    if torch is None or any(isinstance(i, ember.Tensor) and i.dtype == ember.uint8
                            for i in items):  # PyTorch deprecates uint8 masks
        return
    converted = tuple(torch.from_numpy(i.cpu().numpy()) if isinstance(i, ember.Tensor) else i
                      for i in items)
    expected = torch.from_numpy(_as_numpy(tensor))[converted]
    np.testing.assert_array_equal(_as_numpy(got.cpu()), expected.numpy())


def _error_of(run):
    """(type, message) of what run() raises (`error` goes at the end of the
    except block, so no traceback keeps device tensors alive)."""
    try:
        run()
    except Exception as error:
        return type(error), str(error)
    raise AssertionError("no error raised")


def _same_error(run_cpu, run_cuda):
    """Both raise the same exception type with the same message."""
    assert _error_of(run_cuda) == _error_of(run_cpu)


# ---- t[index] -------------------------------------------------------------------------

def _indexes(a):
    """Indexes of a 3x4x5 tensor: one index tensor in each dim with basic
    items around it, broadcast index tensors adjacent and apart, masks."""
    i, j = ember.tensor([0, 2, -1, 0]), ember.tensor([[3, 0], [1, -4]])
    mask = (a.to(ember.int64) > 0)
    return [i, (slice(None), j), (Ellipsis, ember.tensor([4, 0])), (1, slice(None), i),
            (None, i, slice(1, 3)), (i[:2], j[0]), (i[:2], slice(None), j[0]),
            (slice(None), j, ember.tensor([2, 0])), mask, (1, mask[0]),
            (slice(None), mask[0]), True, False, (Ellipsis, None, True),
            [0, 2], ember.tensor([1, 2], dtype=ember.int32), ember.tensor([], dtype=ember.int64),
            (i, i.view(4, 1)), mask.to(ember.uint8)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_getitem_with_index_tensors_and_masks(device, dtype):
    a = _values((3, 4, 5), dtype)
    da = a.cuda()
    for index in _indexes(a):
        cuda_index = tuple(x.cuda() if isinstance(x, ember.Tensor) else x for x in index) \
            if isinstance(index, tuple) else index.cuda() if isinstance(index, ember.Tensor) \
            else index
        same(da[cuda_index], a[index])
        same(da[index], a[index])  # CPU index tensors are moved to the device
        if not isinstance(index, list):
            _same_as_torch(da[cuda_index], a, index)
    same(da.permute(2, 0, 1)[ember.tensor([1, 0]).cuda()], a.permute(2, 0, 1)[ember.tensor([1, 0])])


def test_index_errors_are_the_cpus(device):
    a = ember.arange(24.0).view(2, 3, 4)
    da = a.cuda()
    bad_indexes = [ember.tensor([2]), ember.tensor([-3]), (slice(None), ember.tensor([0, 3])),
                   ember.tensor([1.0]), ember.ones(3, dtype=ember.bool),
                   (ember.tensor([0, 1]), ember.tensor([0, 1, 2])), (0, 0, 0, ember.tensor([0])),
                   (ember.tensor([0]), 5)]
    for index in bad_indexes:
        cuda_index = tuple(x.cuda() if isinstance(x, ember.Tensor) else x for x in index) \
            if isinstance(index, tuple) else index.cuda()
        _same_error(lambda: a[index], lambda: da[cuda_index])
    for bad_item in ("x", 1.5):
        _same_error(lambda: a[bad_item], lambda: da[bad_item])
    _same_error(lambda: a[0, 0, 0][0], lambda: da[0, 0, 0][0])  # a 0-d tensor
    _same_error(lambda: a.__setitem__(ember.tensor([0, 1]), ember.ones(3, 3)),
                lambda: da.__setitem__(ember.tensor([0, 1]).cuda(), ember.ones(3, 3).cuda()))
    _same_error(lambda: a.index_put((ember.tensor([0]),), ember.ones(1, dtype=ember.int64)),
                lambda: da.index_put((ember.tensor([0]).cuda(),),
                                     ember.ones(1, dtype=ember.int64).cuda()))
    _same_error(lambda: a.masked_select(ember.ones(4, dtype=ember.int64)),
                lambda: da.masked_select(ember.ones(4, dtype=ember.int64).cuda()))
    _same_error(lambda: a.masked_select(ember.ones(5, 1, dtype=ember.bool)),
                lambda: da.masked_select(ember.ones(5, 1, dtype=ember.bool).cuda()))
    wrong_device = (RuntimeError, "indices should be either on cpu or on the same device as "
                                  "the indexed tensor (cpu)")
    assert _error_of(lambda: a[ember.tensor([0]).cuda()]) == wrong_device
    assert _error_of(lambda: a.__setitem__(ember.tensor([0]).cuda(), 1.0)) == wrong_device


# ---- t[index] = value, index_put ------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_setitem_and_index_put(device, dtype):
    a = _values((3, 4, 5), dtype)
    for index in _indexes(a):
        expected, got = a.clone(), a.cuda()
        expected[index] = 1
        got[index] = 1
        same(got, expected)
        values = _values(tuple(a[index].shape), dtype)
        expected[index] = values
        got[index] = values.cuda()
        same(got, expected)
    rows = ember.tensor([0, 2, 0, 0])
    values = _values((4, 4, 5), dtype)
    for accumulate in (False, True):
        expected = a.index_put((rows,), values[:1], accumulate=accumulate)
        got = a.cuda().index_put((rows.cuda(),), values[:1].cuda(), accumulate=accumulate)
        same(got, expected)
    expected = a.index_put((rows, ember.tensor([1, 1, 1, 3])), values[:, 0], accumulate=True)
    got = a.cuda()
    assert got.index_put_((rows.cuda(), ember.tensor([1, 1, 1, 3]).cuda()), values[:, 0].cuda(),
                          accumulate=True) is got
    same(got, expected)  # repeated positions add up (atomically), in every dtype
    masked = a.cuda()
    masked[masked.to(ember.int64) > 0] = values[0, 0, 0].cuda()  # a 0-d value broadcasts
    expected = a.clone()
    expected[a.to(ember.int64) > 0] = values[0, 0, 0]
    same(masked, expected)


def test_setitem_converts_the_value_and_reads_it_before_writing(device):
    a = ember.arange(10.0)
    da = a.cuda()
    da[ember.tensor([1, 2, 3]).cuda()] = da[:3]  # overlaps what it writes
    a[ember.tensor([1, 2, 3])] = a[:3].clone()
    same(da, a)
    da[da > 4] = ember.tensor([7, 8, 9, 10, 11]).cuda()  # int64 values into float32
    a[a > 4] = ember.tensor([7, 8, 9, 10, 11])
    same(da, a)


# ---- nonzero, masked_select, where(cond) ------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nonzero_masked_select_and_where(device, dtype):
    a = _values((3, 70, 5), dtype)  # more elements than nonzero's block has threads
    da = a.cuda()
    same(da.nonzero(), a.nonzero())
    same(ember.argwhere(da.permute(2, 0, 1)), ember.argwhere(a.permute(2, 0, 1)))
    for got, expected in zip(da.nonzero(as_tuple=True), a.nonzero(as_tuple=True)):
        same(got, expected)
    for got, expected in zip(ember.where(da[0]), ember.where(a[0])):
        same(got, expected)
    mask = a.to(ember.int64) > 1
    same(da.masked_select(mask.cuda()), a.masked_select(mask))
    same(ember.masked_select(da[0], mask[:, :1].cuda()), ember.masked_select(a[0], mask[:, :1]))
    if torch is not None:
        expected = torch.from_numpy(_as_numpy(a)).nonzero()
        np.testing.assert_array_equal(_as_numpy(da.nonzero().cpu()), expected.numpy())
    scalar = ember.tensor(1, dtype=dtype)
    same(scalar.cuda().nonzero(), scalar.nonzero())
    same(scalar.cuda().nonzero(as_tuple=True)[0], scalar.nonzero(as_tuple=True)[0])
    same(ember.zeros(0, 3, dtype=dtype).cuda().nonzero(), ember.zeros(0, 3, dtype=dtype).nonzero())


# ---- autograd -----------------------------------------------------------------------------

def test_autograd_through_advanced_indexing(device):
    x = ember.randn(4, 5, dtype=ember.float64)
    rows, mask = ember.tensor([0, 3, 0, 0]), x > 0

    def run(x, rows, mask):
        x = x.clone().requires_grad_()
        y = (x[rows] * 2).sum() + (x[:, rows[:2]] ** 2).sum() + x.masked_select(mask).sum() \
            + x[mask].exp().sum() + x[1:, 1].sum()
        y.backward()
        return y, x.grad

    got, got_grad = run(x.cuda(), rows.cuda(), mask.cuda())
    expected, expected_grad = run(x, rows, mask)
    assert got_grad.is_cuda
    np.testing.assert_allclose(float(got), float(expected), rtol=1e-12)
    np.testing.assert_allclose(got_grad.cpu().numpy(), expected_grad.numpy(), rtol=1e-12)

    def written(x, rows):
        x = x.clone().requires_grad_()
        v = ember.ones(2, 5, dtype=ember.float64, device=x.device, requires_grad=True)
        y = x * 1
        y[rows[:2]] = v * 3
        (y * y).sum().backward()
        return x.grad, v.grad

    for g, e in zip(written(x.cuda(), rows.cuda()), written(x, rows)):
        np.testing.assert_allclose(g.cpu().numpy(), e.numpy(), rtol=1e-12)


# ---- sort, argsort, topk -------------------------------------------------------------------

def _same_sort(got, expected):
    same(got.values, expected.values)
    same(got.indices, expected.indices)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sort_argsort_and_topk(device, dtype):
    a = _values((4, 37, 3), dtype)  # ties everywhere: the stable order decides
    da = a.cuda()
    for dim in (0, 1, -1):
        for descending in (False, True):
            _same_sort(da.sort(dim=dim, descending=descending),
                       a.sort(dim=dim, descending=descending))
            _same_sort(ember.sort(da, dim, descending, stable=True),
                       ember.sort(a, dim, descending, stable=True))
            same(da.argsort(dim=dim, descending=descending),
                 a.argsort(dim=dim, descending=descending))
        for k in (0, 1, 3):
            for largest in (True, False):
                _same_sort(da.topk(k, dim=dim, largest=largest, sorted=True),
                           a.topk(k, dim=dim, largest=largest))
    if torch is not None and dtype != ember.bool:
        expected = torch.from_numpy(_as_numpy(a)).sort(dim=1, descending=True, stable=True)
        got = da.sort(dim=1, descending=True, stable=True)
        np.testing.assert_array_equal(_as_numpy(got.values.cpu()), expected.values.numpy())
        np.testing.assert_array_equal(_as_numpy(got.indices.cpu()), expected.indices.numpy())
    scalar = ember.tensor(3, dtype=dtype)
    _same_sort(scalar.cuda().sort(), scalar.sort())
    _same_sort(scalar.cuda().topk(1), scalar.topk(1))
    _same_sort(ember.zeros(2, 0, dtype=dtype).cuda().sort(), ember.zeros(2, 0, dtype=dtype).sort())


def _in_torch(tensor):
    """A CPU tensor as a PyTorch tensor of its dtype (through float32 for
    bfloat16, exactly)."""
    name = str(tensor.dtype).removeprefix("ember.")
    return torch.from_numpy(_as_numpy(tensor)).to(getattr(torch, name))


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.bfloat16],
                         ids=str)
def test_sort_orders_nans_signed_zeros_and_infinities_as_pytorch(device, dtype):
    """NaN after +inf (first descending), -0.0 tied with 0.0 in input
    order, and for the 16-bit dtypes subnormals and values that only
    differ past float16's or bfloat16's precision before rounding."""
    nan, inf = float("nan"), float("inf")
    a = ember.tensor([[3.0, nan, -0.0, 0.0, 1.0, 1.0, -inf, inf, nan, -2.0, 6e-8, -1e-39,
                       1.0009, 0.0]] * 2).to(dtype)
    a[1] = a[1].flip(0)
    da = a.cuda()
    for descending in (False, True):
        for dim in (0, 1):
            got = da.sort(dim=dim, descending=descending)
            _same_sort(got, a.sort(dim=dim, descending=descending))
            if torch is None:
                continue
            reference = _in_torch(a).sort(dim=dim, descending=descending, stable=True)
            np.testing.assert_array_equal(_as_numpy(got.values.cpu()),
                                          reference.values.float().numpy())
            np.testing.assert_array_equal(_as_numpy(got.indices.cpu()), reference.indices.numpy())
            np.testing.assert_array_equal(np.signbit(_as_numpy(got.values.cpu())),
                                          np.signbit(reference.values.float().numpy()))
    same(da.msort(), a.msort())
    _same_sort(da.topk(4), a.topk(4))  # NaN is the largest value
    _same_sort(da.topk(4, largest=False), a.topk(4, largest=False))
    for k in (1, 5, 14):
        _same_sort(da.kthvalue(k), a.kthvalue(k))
    for k in (1, 2):
        _same_sort(da.kthvalue(k, dim=0, keepdim=True), a.kthvalue(k, dim=0, keepdim=True))


def test_a_long_lane_sorts_like_the_cpu(device):
    a = ember.randn(2, 1500)  # 2048 padded items a lane, past any shared-memory tile
    a[:, ::7] = 0.5  # and ties
    _same_sort(a.cuda().sort(dim=1), a.sort(dim=1))
    _same_sort(a.cuda().topk(20, dim=1), a.topk(20, dim=1))


def test_sort_errors_are_the_cpus(device):
    a = ember.randn(3, 4)
    da = a.cuda()
    _same_error(lambda: a.topk(5), lambda: da.topk(5))
    _same_error(lambda: a.topk(-1), lambda: da.topk(-1))
    _same_error(lambda: a.sort(dim=2), lambda: da.sort(dim=2))
    _same_error(lambda: a.argsort(dim=-3), lambda: da.argsort(dim=-3))


def _out_dtype_cases(lib, x, index, flat, out):
    """Calls into out= tensors of another dtype than the result's, in
    ember or torch (`lib`); out(shape, dtype name) makes one."""
    return {
        "gather": lambda: lib.gather(x, 1, index, out=out((3, 2), "float64")),
        "gather into int": lambda: lib.gather(x, 1, index, out=out((3, 2), "int64")),
        "gather into half": lambda: lib.gather(x, 1, index, out=out((3, 2), "float16")),
        "index_select": lambda: lib.index_select(x, 0, flat, out=out((2, 4), "float64")),
        "take": lambda: lib.take(x, flat, out=out((2,), "float64")),
        "masked_select": lambda: lib.masked_select(x, x > 0, out=out((0,), "float64")),
        "nonzero": lambda: lib.nonzero(x, out=out((0, 2), "int32")),
        "sort values": lambda: lib.sort(x, out=(out((3, 4), "float64"), out((3, 4), "int64"))),
        "sort indices": lambda: lib.sort(x, out=(out((3, 4), "float32"), out((3, 4), "int32"))),
        "topk values": lambda: lib.topk(x, 2, out=(out((3, 2), "int64"), out((3, 2), "int64"))),
        "kthvalue values": lambda: lib.kthvalue(x, 2, out=(out((3,), "float64"),
                                                           out((3,), "int64"))),
        "kthvalue indices": lambda: lib.kthvalue(x, 2, out=(out((3,), "float32"),
                                                            out((3,), "int32"))),
        "msort": lambda: lib.msort(x, out=out((3, 4), "float64")),
        "matmul": lambda: lib.matmul(x, x.t(), out=out((3, 3), "float64")),
        "sum with dtype=": lambda: lib.sum(x, 0, dtype=lib.float64, out=out((4,), "float32")),
    }


def test_an_out_of_another_dtype_raises_pytorchs_error(device):
    """Operators that store their result's dtype only (gathers, selections,
    sorts, matrix products, a reduction's dtype=) refuse an out= of another
    dtype with PyTorch's RuntimeError and its words, whether or not the
    result could cast to it (ember.cuda raised NotImplementedError)."""
    a = ember.randn(3, 4)
    index, flat = ember.tensor([[0, 1], [1, 2], [0, 0]]), ember.tensor([0, 5])
    cases = _out_dtype_cases(ember, a.cuda(), index.cuda(), flat.cuda(),
                             lambda shape, dtype: ember.empty(
                                 shape, dtype=getattr(ember, dtype), device="cuda"))
    if torch is not None:
        expected = _out_dtype_cases(
            torch, *(torch.from_numpy(t.numpy()) for t in (a, index, flat)),
            lambda shape, dtype: torch.empty(shape, dtype=getattr(torch, dtype)))
    for name, run in cases.items():
        error_type, message = _error_of(run)
        assert error_type is RuntimeError, (name, message)
        if torch is not None:
            assert (error_type, message) == _error_of(expected[name]), name
    # where the result converts into out=, it still does (PyTorch's rule)
    got = ember.empty(3, 4, dtype=ember.float64, device="cuda")
    same(ember.add(a.cuda(), 1, out=got), (a + 1).double())


# ---- the sources compile for the GPUs -----------------------------------------------------

@pytest.mark.skipif(not _nvrtc.available(),
                    reason="NVRTC is not installed (pip install ember[cuda])")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_sort_kernels_compile_without_spills(arch):
    cache = os.path.join(ROOT, "build", "cuda_kernels")
    for dtype in _sort.DTYPES:
        name = _sort.kernel_name(dtype)
        compiled = _launch.compile_cached(_sort.kernel_source(dtype), arch, _sort.headers(),
                                          name=f"{name}.cu", directory=cache)
        assert compiled.spill_bytes[name] == 0 and compiled.registers[name] <= 64, \
            (name, compiled.registers[name])
