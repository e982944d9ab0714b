"""scatter, scatter_reduce, index_fill, index_copy, take, put, kthvalue and
unique on CUDA tensors, end to end without a GPU.

The `device` fixture of tests/test_cuda_launcher.py: ember/cuda/_index.py's
and _sort.py's kernel sources compiled by g++ (all in one run, `kernels`
below) and run on host memory, or a real GPU through CuPy where there is
one.  Every result is compared exactly with ember's CPU operator on the
same inputs, for every dtype the kernels take, on strided inputs and with
repeated indices where the operator combines them (their values are small
integers, so that sums and products are exact in any order of the atomic
combines); errors must be the CPU's (PyTorch's) messages, and gradients
the CPU's.
"""

import itertools
import math

import numpy as np
import pytest

import ember
from ember.cuda import _index, _launcher, _sort

import cuda_emulation
from test_cuda_half import _values as _half_values
from test_cuda_half import same_bits
from test_cuda_indexing import DTYPES, _error_of, _same_error, _values
from test_cuda_launcher import _as_numpy, device, runtime, same, seeded  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(cuda_emulation.compiler() is None, reason="no g++")

try:
    import torch
except ImportError:  # the CPU operators stay the oracle
    torch = None


@pytest.fixture(scope="module", autouse=True)
def kernels(runtime):
    """Every index, nonzero and sort kernel, compiled in one g++ run
    (the pointwise, copy and scan kernels around them compile on first
    use, into the disk cache the other CUDA suites share)."""
    runtime.preload("index_ops", [_launcher._index_kernel(*key) for key in _index.kernel_keys()]
                    + [_launcher._nonzero_kernel(dtype) for dtype in _index.DTYPES]
                    + [_launcher._sort_kernel(dtype) for dtype in _sort.DTYPES])


def _strided(shape, dtype):
    """_values of `shape` laid out with reversed strides (no dim dense)."""
    return _values(shape[::-1], dtype).permute(*reversed(range(len(shape))))


def _positions(shape, dim, count, distinct):
    """Index values along `dim` of a tensor of `shape`: `count` per lane,
    distinct ones (a random permutation's first) or with repeats."""
    if distinct:
        return ember.randn(*shape).argsort(dim=dim).narrow(dim, 0, count)
    index_shape = list(shape)
    index_shape[dim] = count
    return ember.randint(0, shape[dim], index_shape)


def _cuda(*tensors):
    return [t.cuda() for t in tensors]


# ---- scatter, scatter_add, scatter_reduce ----------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_scatter_and_its_reductions(device, dtype):
    a = _strided((4, 5, 3), dtype)
    da = a.cuda()
    for dim in range(3):
        src_shape = list(a.shape)
        src_shape[dim] = 7
        src = _strided(tuple(src_shape), dtype)  # larger than the index along dim
        distinct = _positions(a.shape, dim, a.shape[dim] - 1, True)
        repeated = _positions(a.shape, dim, 6, False)
        dsrc, ddistinct, drepeated = _cuda(src, distinct, repeated)
        same(da.scatter(dim, ddistinct, dsrc), a.scatter(dim, distinct, src))
        same(da.scatter(dim, ddistinct, 1), a.scatter(dim, distinct, 1))
        same(ember.scatter(da, dim, ddistinct.int(), value=2), a.scatter(dim, distinct.int(), value=2))
        same(da.scatter_add(dim, drepeated, dsrc), a.scatter_add(dim, repeated, src))
        for reduce in ("add", "multiply"):
            same(da.scatter(dim, drepeated, dsrc, reduce=reduce),
                 a.scatter(dim, repeated, src, reduce=reduce))
        for reduce, include_self in itertools.product(("sum", "prod", "mean", "amax", "amin"),
                                                      (True, False)):
            if reduce == "mean" and dtype == ember.bool:
                _same_error(lambda: a.scatter_reduce(dim, repeated, src, reduce),
                            lambda: da.scatter_reduce(dim, drepeated, dsrc, reduce))
                continue
            same(da.scatter_reduce(dim, drepeated, dsrc, reduce, include_self=include_self),
                 a.scatter_reduce(dim, repeated, src, reduce, include_self=include_self))
    got, expected = a.cuda(), a.clone()
    index, src = _positions(a.shape, 1, 6, False), _values((4, 6, 3), dtype)
    assert got.scatter_reduce_(1, index.cuda(), src.cuda(), "amin", include_self=False) is got
    same(got, expected.scatter_reduce_(1, index, src, "amin", include_self=False))
    assert got.scatter_(1, index.cuda(), src.cuda(), reduce="add") is got
    same(got, expected.scatter_(1, index, src, reduce="add"))
    assert got.scatter_(0, index[:, :3].cuda().clamp(max=3), 3) is got
    same(got, expected.scatter_(0, index[:, :3].clamp(max=3), 3))


def test_scatter_reduce_matches_pytorch(device):
    if torch is None:
        pytest.skip("needs PyTorch")
    a = _values((3, 6), ember.float64)
    index, src = ember.randint(0, 6, (3, 9)), _values((3, 9), ember.float64)
    for reduce, include_self in itertools.product(("sum", "prod", "mean", "amax", "amin"),
                                                  (True, False)):
        got = a.cuda().scatter_reduce(1, index.cuda(), src.cuda(), reduce,
                                      include_self=include_self)
        expected = torch.from_numpy(_as_numpy(a)).scatter_reduce(
            1, torch.from_numpy(index.numpy()), torch.from_numpy(src.numpy()), reduce,
            include_self=include_self)
        np.testing.assert_array_equal(_as_numpy(got.cpu()), expected.numpy())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_combines_round_once(device, dtype):
    """A float16 or bfloat16 combine is the CPU's: in float32, rounded once
    as it is stored (index_add's alpha * source too, which rounding the
    product first would change).  Values with NaN, infinities, signed
    zeros, subnormals and sums that overflow; each target element takes at
    most one value (distinct positions), so the order of the atomic
    combines cannot matter and every bit must be the CPU's."""
    a = _half_values(dtype, 48).view(4, 12)
    src = _half_values(dtype, 48, seed=5).view(4, 12)
    distinct = ember.randn(4, 12).argsort(dim=1)[:, :7]
    picked = src[:, :7].contiguous()
    da, dsrc, dpicked, ddistinct = _cuda(a, src, picked, distinct)
    for reduce, include_self in itertools.product(("sum", "prod", "mean", "amax", "amin"),
                                                  (True, False)):
        same_bits(da.scatter_reduce(1, ddistinct, dpicked, reduce, include_self=include_self),
                  a.scatter_reduce(1, distinct, picked, reduce, include_self=include_self))
    same_bits(da.scatter_add(1, ddistinct, dpicked), a.scatter_add(1, distinct, picked))
    same_bits(da.scatter(1, ddistinct, dpicked, reduce="multiply"),
              a.scatter(1, distinct, picked, reduce="multiply"))
    positions = distinct[0]
    for alpha in (1, 0.3, -7.1):
        same_bits(da.index_add(1, positions.cuda(), dsrc[:, :7], alpha=alpha),
                  a.index_add(1, positions, src[:, :7], alpha=alpha))
    same_bits(da[0].index_put((ddistinct[0],), dsrc[0, :7], accumulate=True),
              a[0].index_put((distinct[0],), src[0, :7], accumulate=True))
    same_bits(da.put(ddistinct[1], dsrc[1, :7], True), a.put(distinct[1], src[1, :7], True))


def test_scatter_of_0_d_tensors_values_and_its_own_memory(device):
    for dtype in (ember.float32, ember.int64):
        scalar = ember.tensor(3, dtype=dtype)
        same(scalar.cuda().scatter(0, ember.tensor(0).cuda(), ember.tensor(5, dtype=dtype).cuda()),
             scalar.scatter(0, ember.tensor(0), ember.tensor(5, dtype=dtype)))
        row = _values((4,), dtype)
        same(row.cuda().scatter(0, ember.tensor(2), 7), row.scatter(0, ember.tensor(2), 7))
        same(row.cuda().scatter_reduce(0, ember.tensor([1, 1, 3]).cuda(), row[:3].cuda(), "sum"),
             row.scatter_reduce(0, ember.tensor([1, 1, 3]), row[:3], "sum"))
    a = ember.arange(12.0).view(3, 4)
    got, expected = a.cuda(), a.clone()
    index = ember.tensor([[2, 0, 1, 0], [1, 2, 0, 2]])
    # a strided src in self's memory passes PyTorch's overlap check (a
    # dense one is refused) and is read as it was before the writes
    got[:, :2].scatter_(0, index[:, :2].cuda(), got[:, 2:])
    expected[:, :2].scatter_(0, index[:, :2], expected[:, 2:])
    same(got, expected)
    empty = ember.zeros(3, 0, dtype=ember.int64)
    same(a.cuda().scatter(1, empty.cuda(), a.cuda()), a.scatter(1, empty, a))
    nan = float("nan")
    x = ember.tensor([5.0, 1.0, 1.0])
    src = ember.tensor([1.0, nan, 2.0, nan])
    for reduce in ("amax", "amin"):  # NaN wins, as maximum's
        same(x.cuda().scatter_reduce(0, ember.tensor([0, 0, 2, 1]).cuda(), src.cuda(), reduce),
             x.scatter_reduce(0, ember.tensor([0, 0, 2, 1]), src, reduce))


def test_scatter_errors_are_the_cpus(device):
    a, src = ember.zeros(3, 4), ember.ones(3, 5)
    index = ember.tensor([[0, 1], [2, 3], [1, 1]])
    tall, wide = index.repeat(2, 1), index.repeat(1, 3)
    calls = [
        lambda t, i, s: t.scatter(1, i, s.double()),
        lambda t, i, s: t.scatter(1, i.float(), s),
        lambda t, i, s: t.scatter(1, i.view(-1), s),
        lambda t, i, s: t.scatter(1, i, s.view(-1)),
        lambda t, i, s: t.scatter(1, tall.to(i.device), s),
        lambda t, i, s: t.scatter(1, tall.to(i.device), 1.0),
        lambda t, i, s: t.scatter(0, wide.to(i.device), s),
        lambda t, i, s: t.scatter(1, i, s, reduce="max"),
        lambda t, i, s: t.scatter(1, i),
        lambda t, i, s: t.scatter(2, i, s),
        lambda t, i, s: t.scatter(1, i.masked_fill(i == 3, 4), s),  # one bad value
        lambda t, i, s: t.scatter(1, i - 1, s),
        lambda t, i, s: t.scatter_add(1, i + 1, s),
        lambda t, i, s: t.to(ember.int8).scatter(1, i, 300),
        lambda t, i, s: t[:1].expand(3, 4).scatter_(1, i, s),
        lambda t, i, s: t.scatter_reduce(1, i, s, "max"),
        lambda t, i, s: t.scatter_reduce(1, i, s, 3),
        lambda t, i, s: t.scatter_reduce(1, i, s.double(), "sum"),
        lambda t, i, s: t.scatter_reduce(1, i.masked_fill(i == 2, 7), s, "amax",
                                         include_self=False),
    ]
    for call in calls:
        _same_error(lambda: call(a, index, src), lambda: call(a.cuda(), index.cuda(), src.cuda()))


def test_overlapping_arguments_are_refused_as_on_the_cpu(device):
    """PyTorch's assert_no_overlap (c/th/THCopy.c:THTensor_checkNoOverlap):
    a dense index or source in the written tensor's memory, after the
    shapes and before the positions are read."""
    a = ember.arange(12.0).view(3, 4)
    i, j = ember.tensor([0, 1, 2, 3]), ember.tensor([[0, 1, 2, 3], [3, 2, 1, 0]])
    calls = [
        lambda t, i, j: t.index_add_(1, i, t),
        lambda t, i, j: t[0].index_add_(0, i, t[0], alpha=2),
        lambda t, i, j: i.index_add_(0, i, i.clone()),
        lambda t, i, j: t.scatter_(1, j, t),
        lambda t, i, j: t[1].scatter_add_(0, i[:2], t[1, 2:]),
        lambda t, i, j: t.scatter_reduce_(1, j, t, "sum"),
        lambda t, i, j: j.scatter_(1, j, 7),
        lambda t, i, j: (lambda k: k.scatter_(1, k, 0))(j + 4),  # before the bad positions
        lambda t, i, j: i.index_fill_(0, i, 7),
        lambda t, i, j: t.index_copy_(0, i[:2], t[1:]),
        lambda t, i, j: t.view(-1).put_(i, t[0]),
    ]
    for call in calls:
        _same_error(lambda: call(a.clone(), i.clone(), j.clone()),
                    lambda: call(a.cuda(), i.cuda(), j.cuda()))


# ---- index_fill -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_index_fill(device, dtype):
    a = _strided((4, 5, 3), dtype)
    index = ember.tensor([0, -1, 1, 0])  # negative positions count from the end
    for dim in (0, 1, -1):
        same(a.cuda().index_fill(dim, index.cuda(), 1), a.index_fill(dim, index, 1))
        same(ember.index_fill(a.cuda(), dim, index.cuda(), ember.tensor(2)),
             ember.index_fill(a, dim, index, ember.tensor(2)))
    got, expected = a.cuda(), a.clone()
    assert got.index_fill_(1, ember.tensor(-2).cuda(), 3) is got
    same(got, expected.index_fill_(1, ember.tensor(-2), 3))
    assert got.index_fill_(2, ember.tensor([2, 0]).cuda(), ember.tensor(4).cuda()) is got
    same(got, expected.index_fill_(2, ember.tensor([2, 0]), ember.tensor(4)))
    scalar = ember.tensor(2, dtype=dtype)
    same(scalar.cuda().index_fill(0, ember.tensor([0]).cuda(), 0),
         scalar.index_fill(0, ember.tensor([0]), 0))


def test_index_fill_errors_are_the_cpus(device):
    a, index = ember.zeros(3, 4), ember.tensor([0, 2])
    calls = [
        lambda t, i: t.index_fill(1, i.int(), 1.0),
        lambda t, i: t.index_fill(1, i.view(2, 1), 1.0),
        lambda t, i: t.index_fill(1, i + 3, 1.0),
        lambda t, i: t.index_fill(1, i - 6, 1.0),
        lambda t, i: t.index_fill(2, i, 1.0),
        lambda t, i: t.index_fill(1, i, ember.ones(1, device=t.device)),
        lambda t, i: t.to(ember.int8).index_fill(1, i, 300),
        lambda t, i: t[:1].expand(3, 4).index_fill_(1, i, 1.0),
    ]
    for call in calls:
        _same_error(lambda: call(a, index), lambda: call(a.cuda(), index.cuda()))


# ---- take -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_take(device, dtype):
    a = _strided((4, 5, 3), dtype)
    index = ember.tensor([[0, 59, -1], [-60, 7, 7]])
    same(a.cuda().take(index.cuda()), a.take(index))
    same(ember.take(a.cuda()[:, 1], ember.tensor(-2).cuda()), ember.take(a[:, 1], ember.tensor(-2)))
    same(a.cuda().take(index.t().cuda()), a.take(index.t()))
    same(a.cuda().take(ember.zeros(0, dtype=ember.int64).cuda()),
         a.take(ember.zeros(0, dtype=ember.int64)))
    scalar = ember.tensor(5, dtype=dtype)
    same(scalar.cuda().take(ember.tensor([0, -1, 0]).cuda()),
         scalar.take(ember.tensor([0, -1, 0])))


def test_take_errors_are_the_cpus(device):
    a = ember.zeros(3, 4)
    for index in (ember.tensor([0, 1], dtype=ember.int32), ember.tensor([12]),
                  ember.tensor([[0], [-13]]), ember.tensor([0.0])):
        _same_error(lambda: a.take(index), lambda: a.cuda().take(index.cuda()))


# ---- index_copy, put ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_index_copy(device, dtype):
    a = _strided((4, 5, 3), dtype)
    for dim in (0, 1, -1):
        size = a.shape[dim]
        index = ember.randperm(size)[:size - 1]  # distinct: which repeat wins is open
        source_shape = list(a.shape)
        source_shape[dim] = size - 1
        source = _strided(tuple(source_shape), dtype)
        same(a.cuda().index_copy(dim, index.cuda(), source.cuda()),
             a.index_copy(dim, index, source))
    got, expected = a.cuda(), a.clone()
    source = _values((4, 1, 3), dtype)
    assert got.index_copy_(1, ember.tensor(3).cuda(), source.cuda()) is got
    same(got, expected.index_copy_(1, ember.tensor(3), source))
    scalar, value = ember.tensor(1, dtype=dtype), ember.tensor(0, dtype=dtype)
    same(scalar.cuda().index_copy(0, ember.tensor([0]).cuda(), value.cuda()),
         scalar.index_copy(0, ember.tensor([0]), value))
    same(a.cuda()[:, 1, 0].index_copy(0, ember.tensor([2]).cuda(), value.cuda()),
         a[:, 1, 0].index_copy(0, ember.tensor([2]), value))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_put(device, dtype):
    a = _strided((4, 5, 3), dtype)  # no 1-d view: put through a dense copy
    distinct = ember.tensor([[0, 59, -2], [-60, 7, 8]])
    repeated = ember.tensor([[0, 59, -1], [-60, 7, 7]])  # (values small: exact sums)
    source = _values((6,), dtype)
    for target in (a, a.contiguous()):
        same(target.cuda().put(distinct.cuda(), source.cuda()), target.put(distinct, source))
        same(ember.put(target.cuda(), repeated.cuda(), source.cuda(), True),
             ember.put(target, repeated, source, True))
        got, expected = target.cuda(), target.clone()
        assert got.put_(repeated.t().cuda(), source.view(3, 2).cuda(), accumulate=True) is got
        same(got, expected.put_(repeated.t(), source.view(3, 2), accumulate=True))
    scalar = ember.tensor(2, dtype=dtype)
    same(scalar.cuda().put(ember.tensor([0, -1]).cuda(), source[:2].cuda(), True),
         scalar.put(ember.tensor([0, -1]), source[:2], True))
    empty = ember.zeros(0, dtype=ember.int64)
    same(a.cuda().put(empty.cuda(), source[:0].cuda()), a.put(empty, source[:0]))


def test_index_copy_and_put_errors_are_the_cpus(device):
    a, source = ember.zeros(3, 4), ember.ones(3, 2)
    index = ember.tensor([0, 2])
    calls = [
        lambda t, i, s: t.index_copy(1, i.int(), s),
        lambda t, i, s: t.index_copy(1, i.view(2, 1), s),
        lambda t, i, s: t.index_copy(1, i + 3, s),
        lambda t, i, s: t.index_copy(1, i - 1, s),
        lambda t, i, s: t.index_copy(2, i, s),
        lambda t, i, s: t.index_copy(1, i, s.double()),
        lambda t, i, s: t.index_copy(1, i, s[:2]),
        lambda t, i, s: t.index_copy(1, i, s[:, :1]),
        lambda t, i, s: t.index_copy(1, i, s.view(3, 2, 1)),
        lambda t, i, s: t.index_copy(1, i, s[0, 0]),
        lambda t, i, s: t[:1].expand(3, 4).index_copy_(1, i, s),
        lambda t, i, s: t.put(i.int(), s[0]),
        lambda t, i, s: t.put(i, s[0].double()),
        lambda t, i, s: t.put(i, s),
        lambda t, i, s: t.put(i + 11, s[0]),
        lambda t, i, s: t.t().put_(i - 14, s[0], accumulate=True),
        lambda t, i, s: t[:0].put_(i, s[0]),
        lambda t, i, s: t[:1].expand(3, 4).put_(i, s[0]),
    ]
    for call in calls:
        _same_error(lambda: call(a, index, source),
                    lambda: call(a.cuda(), index.cuda(), source.cuda()))
    got = a.cuda().t()
    _same_error(lambda: a.t().put_(index + 11, source[0]),
                lambda: got.put_(index.cuda() + 11, source[0].cuda()))
    same(got, a.t())  # a bad position writes nothing, strided target included


# ---- kthvalue ---------------------------------------------------------------------------

def _same_pair(got, expected):
    assert type(got) is type(expected)
    same(got.values, expected.values)
    same(got.indices, expected.indices)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_kthvalue(device, dtype):
    a = _values((3, 37, 2), dtype)  # ties everywhere: the stable order decides
    da = a.cuda()
    for k, keepdim in itertools.product((1, 2, 20, 37), (False, True)):
        _same_pair(da.kthvalue(k, 1, keepdim), a.kthvalue(k, 1, keepdim))
    for dim in (0, -1):  # each launch runs a block (and its threads) per lane
        _same_pair(da.kthvalue(2, dim), a.kthvalue(2, dim))
    _same_pair(ember.kthvalue(da.permute(2, 0, 1), 5, dim=2),
               ember.kthvalue(a.permute(2, 0, 1), 5, dim=2))
    scalar = ember.tensor(3, dtype=dtype)
    _same_pair(scalar.cuda().kthvalue(1), scalar.kthvalue(1))
    _same_pair(scalar.cuda().kthvalue(1, keepdim=True), scalar.kthvalue(1, keepdim=True))


def test_kthvalue_of_nans_and_its_errors(device):
    nan = float("nan")
    a = ember.tensor([[3.0, nan, -0.0, 0.0, 1.0, -2.0, nan]] * 2)
    a[1] = a[1].flip(0)
    for k in range(1, 8):
        _same_pair(a.cuda().kthvalue(k), a.kthvalue(k))
    for call in (lambda t: t.kthvalue(0), lambda t: t.kthvalue(8), lambda t: t.kthvalue(3, 0),
                 lambda t: t.kthvalue(1, dim=2)):
        _same_error(lambda: call(a), lambda: call(a.cuda()))


# ---- unique, unique_consecutive --------------------------------------------------------

def _same_results(got, expected):
    got = got if isinstance(got, tuple) else (got,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        same(g, e)
        if e.dtype.is_floating_point:  # -0.0 or 0.0: the first of its group
            np.testing.assert_array_equal(np.signbit(_as_numpy(g.cpu())), np.signbit(_as_numpy(e)))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_unique_and_unique_consecutive(device, dtype):
    a = _values((4, 37, 3), dtype)
    a[0, :5] = a[0, 5]  # runs, for unique_consecutive
    for x in (a, a.permute(2, 0, 1), a[:, :0], ember.tensor(1, dtype=dtype)):
        for inverse, counts in itertools.product((False, True), (False, True)):
            _same_results(x.cuda().unique(return_inverse=inverse, return_counts=counts),
                          x.unique(return_inverse=inverse, return_counts=counts))
            _same_results(ember.unique_consecutive(x.cuda(), return_inverse=inverse,
                                                   return_counts=counts),
                          ember.unique_consecutive(x, return_inverse=inverse,
                                                   return_counts=counts))
    if torch is not None and dtype != ember.bool:
        got = ember.unique(a.cuda(), sorted=True, return_inverse=True, return_counts=True)
        expected = torch.unique(torch.from_numpy(_as_numpy(a)), sorted=True, return_inverse=True,
                                return_counts=True)
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(_as_numpy(g.cpu()), e.numpy())


def test_unique_keeps_each_nan_and_ties_signed_zeros(device):
    nan = float("nan")
    for dtype in (ember.float32, ember.float64):
        a = ember.tensor([nan, 0.0, -0.0, 1.0, nan, -0.0, 1.0, -math.inf], dtype=dtype)
        for x in (a, a.flip(0)):
            _same_results(x.cuda().unique(return_inverse=True, return_counts=True),
                          x.unique(return_inverse=True, return_counts=True))
            _same_results(x.cuda().unique_consecutive(return_counts=True),
                          x.unique_consecutive(return_counts=True))


@pytest.mark.parametrize("dtype", [ember.bool, ember.int16, ember.float32], ids=str)
def test_unique_along_a_dim(device, dtype):
    # few distinct values: rows that repeat, and rows that tie on a prefix
    a = ember.randint(0, 2, (5, 6, 3)).to(dtype)
    a[3] = a[1]
    for x in (a, a.permute(2, 0, 1)):
        for dim, inverse, counts in itertools.product((0, 1, -1), (False, True), (False, True)):
            for unique in (ember.unique, ember.unique_consecutive):
                _same_results(unique(x.cuda(), return_inverse=inverse, return_counts=counts,
                                     dim=dim),
                              unique(x, return_inverse=inverse, return_counts=counts, dim=dim))
    if torch is not None:
        got = ember.unique(a.cuda(), return_inverse=True, return_counts=True, dim=1)
        expected = torch.unique(torch.from_numpy(_as_numpy(a)), return_inverse=True,
                                return_counts=True, dim=1)
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(_as_numpy(g.cpu()), e.numpy())


def test_unique_along_a_dim_with_nans_empties_and_errors(device):
    nan = float("nan")
    a = ember.tensor([[nan, 0.0, 1.0], [nan, -0.0, 1.0], [1.0, 2.0, 3.0], [0.0, 0.0, 1.0],
                      [1.0, 2.0, 3.0], [-math.inf, 0.0, 0.0]])
    for x in (a, a.flip(0)):
        _same_results(x.cuda().unique(dim=0, return_inverse=True, return_counts=True),
                      x.unique(dim=0, return_inverse=True, return_counts=True))
        _same_results(x.cuda().unique(dim=1, return_counts=True), x.unique(dim=1, return_counts=True))
    empty = ember.empty((0, 3))
    _same_results(empty.cuda().unique(dim=0, return_counts=True),
                  empty.unique(dim=0, return_counts=True))
    for x, dim in ((ember.empty((0, 3)), 1), (ember.tensor(1.0), 0)):
        _same_error(lambda: x.unique(dim=dim), lambda: x.cuda().unique(dim=dim))


# ---- autograd ---------------------------------------------------------------------------

def _grads(run, *tensors):
    """run(*leaves) on fresh leaves of `tensors`: (result, their grads)."""
    leaves = [t.clone().requires_grad_() for t in tensors]
    result = run(*leaves)
    weights = ember.arange(result.numel(), dtype=result.dtype, device=result.device)
    (result * weights.view(result.shape)).sum().backward()
    return result.detach(), [leaf.grad for leaf in leaves]


def _same_grads(run, *tensors):
    got, got_grads = _grads(run, *_cuda(*tensors))
    expected, expected_grads = _grads(run, *tensors)
    np.testing.assert_allclose(got.cpu().numpy(), expected.numpy(), rtol=1e-12)
    for g, e in zip(got_grads, expected_grads):
        assert g.is_cuda
        np.testing.assert_allclose(g.cpu().numpy(), e.numpy(), rtol=1e-12, atol=1e-15)


def test_autograd_through_the_scatters_fills_takes_and_selections(device):
    # distinct values: amax/amin are differentiable away from ties
    input = ember.randperm(12).view(3, 4).to(ember.float64) + 0.5
    src = ember.randperm(6).view(2, 3).to(ember.float64) * 1.7 + 0.25
    src[0, 1] = 0.0  # a zero: prod's gradient takes its own path
    index = ember.tensor([[2, 0, 2], [2, 1, 0]])
    for reduce, include_self in itertools.product(("sum", "prod", "mean", "amax", "amin"),
                                                  (True, False)):
        _same_grads(lambda x, s: x.scatter_reduce(0, index.to(x.device), s, reduce,
                                                  include_self=include_self), input, src)
    distinct = ember.tensor([[2, 0, 1], [1, 2, 0]])
    _same_grads(lambda x, s: x.scatter(0, distinct.to(x.device), s), input, src)
    _same_grads(lambda x: x.scatter(1, distinct.to(x.device), 2.0), input)
    _same_grads(lambda x, v: x.index_fill(1, ember.tensor([3, 0, 1], device=x.device), v),
                input, ember.tensor(1.5, dtype=ember.float64))
    _same_grads(lambda x: x.take(ember.tensor([[0, 11], [-1, 0]], device=x.device)), input)
    _same_grads(lambda x, s: x.index_copy(1, ember.tensor([3, 0], device=x.device), s[:, :2]),
                input, ember.cat([src, src[:1]]))
    for accumulate in (False, True):
        _same_grads(lambda x, s: x.put(ember.tensor([[0, 10], [-1, 5]], device=x.device),
                                       s[:, :2], accumulate=accumulate), input, src)
    _same_grads(lambda x: x.kthvalue(2, 1).values, input)
    _same_grads(lambda x: x.sort(dim=0, descending=True).values, input)
    _same_grads(lambda x: x.topk(2).values, input)
