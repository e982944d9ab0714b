"""ember.cuda's var/std, vector-norm, logsumexp, softmax/log_softmax and
scan (cumsum/cumprod) kernels, checked without a GPU.

test_cuda_binary_reduce_kernels.py compiles them with NVRTC for sm_80 and
sm_90 (no spills, at most MAX_REGISTERS) with every other reduction.  Here:

1. the host side: plans (keys, result shapes and dtypes, the packed line
   geometry, the norm kernel chosen by p), the CPU operators' errors, the
   launch shapes;
2. the kernel sources compiled by g++ as host C++ (tests/cuda_emulation.py,
   blocks run cooperatively: a block's threads at once, __syncthreads() a
   barrier) on NumPy arrays, compared with ember's CPU operators over
   contiguous, transposed (strided) and sliced inputs, every dim, keepdim,
   odd sizes and empty dims.  Bit for bit where the order of operations is
   the CPU's: the inf norms (max/min), every scan (one thread per line, in
   order), and float32 softmax/log_softmax over lines the CPU takes in
   tiles (a dim before a contiguous last dim: its sum of exps is in double,
   as the kernel's, and a few float32 exps add exactly in double, in any
   order, so only exp and the scaling could differ, and they are the same
   formulas).  To rounding otherwise: the other sums add in another order
   than the CPU's pairwise sums.
"""

import ctypes
import math
import os

import numpy as np
import pytest

import ember
from ember.cuda import _launch, _pointwise, _reduce

import cuda_emulation
from test_cuda_binary_reduce_kernels import (EMULATION_DIR, _same, _strided_ember, _values,
                                             reduction_sources)

needs_gxx = pytest.mark.skipif(cuda_emulation.compiler() is None, reason="no g++")

NORMS = ["norm1", "norm2", "norm_inf", "norm_neg_inf", "normp"]
OPS = ["var", "std", *NORMS, "logsumexp", "softmax", "log_softmax", "cumsum", "cumprod"]
FLOATS = ["float32", "float64"]
HALVES = ["float16", "bfloat16"]
# NumPy's dtypes: the half-precision kernels run end to end in
# tests/test_cuda_half_reductions.py (NumPy has no bfloat16)
ALL = list(_pointwise.ARITH_DTYPES)


def keys(dtypes=tuple(_reduce.DTYPES)):
    for op in OPS:
        for dtype in _reduce.kernel_dtypes(op):
            for rank_class in _reduce.RANK_CLASSES:
                if dtype in dtypes:
                    yield op, dtype, rank_class


# ---- the tables and sources ------------------------------------------------------------

def test_every_op_has_the_cpus_dtypes():
    floats, every = FLOATS + HALVES, ALL + HALVES
    assert {op: _reduce.kernel_dtypes(op) for op in OPS} == {
        "var": floats, "std": floats, **{n: floats for n in NORMS}, "logsumexp": every,
        "softmax": floats, "log_softmax": floats, "cumsum": every, "cumprod": every}
    assert _reduce.result_dtype("logsumexp", "int16") == "float32"
    assert _reduce.result_dtype("cumsum", "uint8") == "int64"
    assert _reduce.result_dtype("cumprod", "float32") == "float32"
    # the half-precision dtypes keep their dtype and compute in float32
    for op in OPS:
        assert _reduce.result_dtype(op, "bfloat16") == "bfloat16"
        assert _reduce.compute_dtype(op, "float16") == "float32"
    assert len(list(keys())) == 132


def test_sources_use_the_shared_formulas():
    var = _reduce.kernel_source("std", "float64", "contiguous")
    # two passes: the mean, then the squared deviations from it
    assert var.count("ember_block_combine<") == 2
    assert "TH_SQUARED_DEVIATION(v, mean)" in var and "TH_VAR_FINISH((double)m2, n, param, true)" in var
    softmax = _reduce.kernel_source("softmax", "float32", "strided")
    assert "exp_Float32(v - best)" in softmax and "TH_SOFTMAX_SCALE(scalar_t, acc)" in softmax
    assert "ember_offsets(r, reduced).out" in softmax
    lse = _reduce.kernel_source("logsumexp", "int8", "contiguous")
    assert "typedef float scalar_t;" in lse and "TH_LSE_SHIFT((double)best)" in lse
    scan = _reduce.kernel_source("cumsum", "int8", "contiguous")
    assert "(TH_ACC_Int64)(int64_t)ember_widen(in[" in scan
    assert "EMBER_FOR_EACH_INDEX(o, n_out)" in scan
    assert "__syncthreads" not in scan


# ---- 1. the host side ---------------------------------------------------------------------

def test_plans():
    x = ember.ones((2, 3, 4))
    p = _reduce.plan("var", x, dim=(0, 2), keepdim=True, correction=0)
    assert p.key == ("var", "float32", "strided") and p.out_shape == (1, 3, 1)
    assert (p.n_out, p.n_reduce, p.param) == (3, 8, 0)
    assert _reduce.plan("std", x).key == ("std", "float32", "contiguous")
    for order, kernel in ((1, "norm1"), (2, "norm2"), (math.inf, "norm_inf"),
                          (-math.inf, "norm_neg_inf"), (3, "normp"), (0, "normp"),
                          (0.5, "normp"), (-1, "normp")):
        p = _reduce.plan("norm", x, dim=1, p=order)
        assert p.key[0] == kernel and p.param == order and p.out_shape == (2, 4)
    p = _reduce.plan("logsumexp", ember.ones(5, dtype=ember.int32), dim=0)
    assert p.key == ("logsumexp", "int32", "contiguous") and p.out_dtype == "float32"
    previous = ember.get_default_dtype()
    ember.set_default_dtype(ember.float64)
    try:  # the CPU's logsumexp of integers computes in the default dtype
        assert ember.logsumexp(ember.ones(5, dtype=ember.int32), 0).dtype == ember.float64
        with pytest.raises(NotImplementedError, match="computes in float32 only"):
            _reduce.plan("logsumexp", ember.ones(5, dtype=ember.int32), dim=0)
    finally:
        ember.set_default_dtype(previous)


def test_line_plans():
    x = ember.ones((2, 3, 4), dtype=ember.float64)
    p = _reduce.plan("softmax", x, dim=1)
    assert p.key == ("softmax", "float64", "contiguous") and p.out_shape == (2, 3, 4)
    assert (p.n_out, p.n_reduce, p.strides.reduce, p.strides.inner) == (8, 3, 3, 4)
    p = _reduce.plan("cumsum", x.transpose(0, 2), dim=-1)  # (4, 3, 2), strides (1, 4, 12)
    assert p.key == ("cumsum", "float64", "strided") and p.out_dtype == "float64"
    kept, line = p.strides
    assert kept.ndim == 2 and list(kept.sizes[:2]) == [3, 4]
    assert list(kept.in_strides[:2]) == [4, 1] and list(kept.out_strides[:2]) == [2, 6]
    assert (line.ndim, line.sizes[0], line.in_strides[0], line.out_strides[0]) == (1, 2, 12, 1)
    p = _reduce.plan("cumprod", ember.tensor(3, dtype=ember.int8), dim=0)
    assert p.key[2] == "contiguous" and p.out_shape == () and (p.n_out, p.n_reduce) == (1, 1)
    assert p.out_dtype == "int64"
    p = _reduce.plan("log_softmax", ember.ones((0, 3)), dim=0)
    assert (p.n_out, p.n_reduce) == (3, 0)


def test_launch_shapes():
    x = ember.ones((1000, 7))
    assert _reduce.launch_config(_reduce.plan("cumsum", x, dim=1), sms=132) == ((4,), (256,))
    assert _reduce.launch_config(_reduce.plan("softmax", x, dim=1), sms=132) == \
        ((1000,), (32,))
    assert _reduce.launch_config(_reduce.plan("var", x, dim=0), sms=132) == ((7,), (512,))


def _message(call):
    with pytest.raises(Exception) as raised:
        call()
    return type(raised.value), str(raised.value)


@pytest.mark.parametrize("op, dtype, kwargs", [
    ("var", ember.int32, {"dim": 0}), ("std", ember.bool, {}),
    ("norm", ember.int64, {"p": 2}), ("softmax", ember.int32, {"dim": 0}),
    ("log_softmax", ember.uint8, {"dim": 0}), ("mean", ember.int16, {}),
])
def test_plan_refuses_what_the_cpu_refuses(op, dtype, kwargs):
    t = ember.ones(3, dtype=dtype)
    cpu = {"norm": lambda: ember.linalg.vector_norm(t, kwargs["p"]),
           "softmax": lambda: ember.softmax(t, 0),
           "log_softmax": lambda: ember.log_softmax(t, 0)}.get(
               op, lambda: getattr(ember, op)(t, **kwargs))
    assert _message(lambda: _reduce.plan(op, t, **kwargs)) == _message(cpu)


def test_plan_errors():
    empty = ember.ones((2, 0))
    for order in (math.inf, -math.inf, -1):
        assert _message(lambda: _reduce.plan("norm", empty, dim=1, p=order)) == \
            _message(lambda: ember.linalg.vector_norm(empty, order, dim=1))
    assert _reduce.plan("norm", empty, dim=1, p=2).n_reduce == 0  # has an identity
    with pytest.raises(IndexError, match="Dimension out of range"):
        _reduce.plan("cumsum", empty, dim=2)
    with pytest.raises(TypeError, match="'dim' must be int"):
        _reduce.plan("softmax", empty, dim=None)


# ---- 2. the kernels run on the CPU ----------------------------------------------------

@pytest.fixture(scope="module")
def emulated():
    os.makedirs(EMULATION_DIR, exist_ok=True)
    return cuda_emulation.build_sources("reduce_scan", reduction_sources(keys(ALL)),
                                        _reduce.headers(), EMULATION_DIR)


def _run(library, p, out, x):
    args = _reduce.arguments(p, out.ctypes.data, x.ctypes.data)
    (grid,), (block,) = _reduce.launch_config(p, sms=1)
    # a few blocks of up to 8 threads: the loops over outputs (or lines)
    # and a three-level tree, with few threads to run at once on the CPU
    getattr(library, f"emulate_{_reduce.kernel_name(*p.key)}")(
        ctypes.c_uint(min(grid, 3)), ctypes.c_uint(min(block, 8)), _launch.kernel_params(args))


def _input(dtype, rng, shape=(4, 5, 24)):
    n = math.prod(shape)
    if dtype.startswith("float"):
        x = rng.standard_normal(n) * 2
        x[[5, 300, 301]] = [np.nan, np.inf, -np.inf]  # one line each: nan, inf, -inf
        x[400:404] = x[450]  # ties
        x[200] = -120.0  # exp(x - max) underflows
        return x.astype(dtype).reshape(shape)
    return _values(dtype, n, rng).reshape(shape)


def _views(x):
    """(view, what) pairs: contiguous, transposed, sliced with odd sizes."""
    return [(x, "contiguous"), (x.transpose(2, 0, 1), "transposed"),
            (x[:, ::2, 3:], "sliced")]


def _as_ember(view):
    return ember.from_numpy(view) if view.flags.c_contiguous else _strided_ember(view)


def _compare(out, expected, exact, n, what):
    if exact:
        _same(out, expected, what)
        return
    eps = np.finfo(expected.dtype).eps
    np.testing.assert_allclose(out, expected, rtol=8 * max(n, 1) * eps, atol=8 * max(n, 1) * eps,
                               equal_nan=True, err_msg=what)


def _check(library, op, view, cpu, exact, **plan_kwargs):
    expected = cpu(ember.tensor(view.copy(order="C"))).numpy()
    p = _reduce.plan(op, _as_ember(view), **plan_kwargs)
    assert p.out_shape == expected.shape and p.out_dtype == str(expected.dtype)
    out = np.full(expected.shape, 7, dtype=expected.dtype)
    _run(library, p, out, view)
    _compare(out, expected, exact, p.n_reduce, f"{op} {p.key[2]} {plan_kwargs}")


REDUCE_DIMS = [(None, False), (2, False), (1, True), (0, False), ((0, 2), True)]


@needs_gxx
@pytest.mark.parametrize("op, dtype", [(op, d) for op in ("var", "std") for d in FLOATS])
def test_var_std_match_cpu(emulated, op, dtype):
    x = _input(dtype, np.random.default_rng(1))
    x[np.isinf(x)] = 3.0  # inf - inf: a nan the CPU's merge may also make elsewhere
    for view, _ in _views(x):
        for dim, keepdim in REDUCE_DIMS:
            for correction in (1, 0, 30):  # 30: a divisor <= 0 for the short dims
                _check(emulated, op, view,
                       lambda t: getattr(ember, op)(t, dim, correction=correction,
                                                    keepdim=keepdim),
                       False, dim=dim, keepdim=keepdim, correction=correction)


@needs_gxx
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("order", [1, 2, math.inf, -math.inf, 3, 0, 0.5, -1.5])
def test_norms_match_cpu(emulated, dtype, order):
    x = _input(dtype, np.random.default_rng(2))
    x.flat[7] = 0.0  # a zero: |0|^-1.5 = inf, min |x| = 0
    exact = math.isinf(order)
    for view, _ in _views(x):
        for dim, keepdim in REDUCE_DIMS:
            _check(emulated, "norm", view,
                   lambda t: ember.linalg.vector_norm(t, order, dim=dim, keepdim=keepdim),
                   exact, dim=dim, keepdim=keepdim, p=order)


@needs_gxx
@pytest.mark.parametrize("dtype", ALL)
def test_logsumexp_matches_cpu(emulated, dtype):
    x = _input(dtype, np.random.default_rng(3))
    for view, _ in _views(x):
        for dim, keepdim in REDUCE_DIMS:
            dims = tuple(range(view.ndim)) if dim is None else dim
            _check(emulated, "logsumexp", view,
                   lambda t: ember.logsumexp(t, dims, keepdim=keepdim), False,
                   dim=dim, keepdim=keepdim)


def _exact_softmax(view, dim):
    """Whether the CPU's softmax of this (contiguous) input takes its lines
    in tiles, summing its exps in double (THReduce.c: run_lines), and the
    exps are float32: then the sums are exact, whatever their order."""
    return view.dtype == np.float32 and view.ndim >= 2 and dim % view.ndim != view.ndim - 1


@needs_gxx
@pytest.mark.parametrize("op, dtype", [(op, d) for op in ("softmax", "log_softmax")
                                       for d in FLOATS])
def test_softmax_matches_cpu(emulated, op, dtype):
    x = _input(dtype, np.random.default_rng(4))
    cpu = getattr(ember, op)
    for view, _ in _views(x):
        for dim in (0, 1, 2, -1):
            _check(emulated, op, view, lambda t: cpu(t, dim), _exact_softmax(view, dim),
                   dim=dim)
    _check(emulated, op, np.array(1.5, dtype), lambda t: cpu(t, 0), True, dim=0)
    for shape, dim in (((0, 3), 0), ((0, 3), 1), ((3, 0), 1)):
        _check(emulated, op, np.ones(shape, dtype), lambda t: cpu(t, dim), True, dim=dim)


@needs_gxx
@pytest.mark.parametrize("op, dtype", [(op, d) for op in ("cumsum", "cumprod") for d in ALL])
def test_scans_match_cpu(emulated, op, dtype):
    x = _input(dtype, np.random.default_rng(5))
    if op == "cumprod" and dtype.startswith("float"):
        x = (1 + x / 64).astype(dtype)  # products that stay finite
    cpu = getattr(ember, op)
    for view, _ in _views(x):
        for dim in (0, 1, 2, -1):
            _check(emulated, op, view, lambda t: cpu(t, dim), True, dim=dim)
    _check(emulated, op, np.array(3, dtype), lambda t: cpu(t, 0), True, dim=0)
    _check(emulated, op, np.ones((0, 3), dtype), lambda t: cpu(t, 1), True, dim=1)


@needs_gxx
@pytest.mark.parametrize("dtype", FLOATS)
def test_zero_dim_and_empty_reductions_match_cpu(emulated, dtype):
    """PyTorch's values: var of nothing is nan, logsumexp -inf, a norm 0;
    a 0-d tensor reduces over its one element."""
    scalar, empty = np.array(-1.5, dtype), np.ones((3, 0, 2), dtype)
    cases = [("var", lambda t, d, k: ember.var(t, d, keepdim=k), {}),
             ("std", lambda t, d, k: ember.std(t, d, correction=0, keepdim=k),
              {"correction": 0}),
             ("logsumexp", lambda t, d, k: ember.logsumexp(t, d, keepdim=k), {}),
             ("norm", lambda t, d, k: ember.linalg.vector_norm(t, 2, d, k), {"p": 2}),
             ("norm", lambda t, d, k: ember.linalg.vector_norm(t, 0.5, d, k), {"p": 0.5})]
    for op, cpu, kwargs in cases:
        for view, dim, keepdim in ((scalar, 0, False), (scalar, -1, True), (empty, 1, False),
                                   (empty, (0, 1), True), (empty, 2, False)):
            _check(emulated, op, view, lambda t: cpu(t, dim, keepdim), True, dim=dim,
                   keepdim=keepdim, **kwargs)
