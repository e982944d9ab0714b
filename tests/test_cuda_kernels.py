"""ember.cuda's generated unary kernels, checked without a GPU.

1. NVRTC compiles every kernel source (each floating-point unary formula x
   float32/float64 x rank class) to SASS for sm_80 and sm_90, with no
   register spills and at most MAX_REGISTERS registers.
2. The same sources, compiled as host C++ by g++ (tests/cuda_emulation.py),
   run on NumPy arrays, contiguous and strided, and agree bit for bit with
   ember's CPU operators.
"""

import concurrent.futures
import ctypes
import itertools
import math

import numpy as np
import pytest

import ember
from ember.cuda import _kernels, _nvrtc

import cuda_emulation

ARCHS = ("sm_80", "sm_90")
# Registers a thread of an elementwise kernel may use.  At 64, 32 warps fit
# on an SM (65536 registers): half of sm_80/sm_90's 64, plenty to keep
# memory busy for a kernel that reads and writes one element per step.
# Measured (CUDA 13 NVRTC): at most 60, float64 atan (CUDA's libdevice);
# the float32 kernels, whose formulas are mostly plain arithmetic, use less.
MAX_REGISTERS = 64

needs_nvrtc = pytest.mark.skipif(not _nvrtc.available(),
                                 reason="NVRTC is not installed (pip install ember[cuda])")
needs_gxx = pytest.mark.skipif(cuda_emulation.compiler() is None, reason="no g++")

OPS = list(_kernels.float_formulas())


# ---- the formulas read out of THFloatFormulas.h ------------------------------------

def test_every_formula_is_read_and_checked():
    # Each formula of the header gets a CPU reference below, so a formula the
    # parser missed or invented fails here.
    assert set(OPS) == set(REFERENCES)
    assert _kernels.float_formulas()["relu"] == "x < 0 ? 0 : x"
    assert _kernels.float_formulas()["sinc"].startswith("x == 0 ? (scalar_t)1 : sin(")


def test_kernel_source_rejects_unknown_keys():
    with pytest.raises(ValueError, match="no floating-point unary formula named 'isnann'"):
        _kernels.kernel_source("isnann", "float32", "contiguous")
    with pytest.raises(ValueError, match="not 'int32'"):
        _kernels.kernel_source("exp", "int32", "contiguous")
    with pytest.raises(ValueError, match="rank class"):
        _kernels.kernel_source("exp", "float32", "broadcast")


def test_pack_strides_innermost_first():
    s = _kernels.pack_strides((2, 3, 4), (12, 1, 3), (12, 4, 1))
    assert s.ndim == 3
    assert list(s.sizes[:3]) == [4, 3, 2]
    assert list(s.in_strides[:3]) == [3, 1, 12]
    assert list(s.out_strides[:3]) == [1, 4, 12]
    with pytest.raises(ValueError, match="at most 32 dimensions"):
        _kernels.pack_strides((1,) * 33, (1,) * 33, (1,) * 33)
    with pytest.raises(ValueError, match="same length"):
        _kernels.pack_strides((2, 3), (3, 1), (1,))


# ---- 1. every kernel compiles to SASS -----------------------------------------------

@pytest.fixture(scope="module")
def compiled():
    """{(arch, dtype, rank class): (registers, spills)}: all of one key's
    kernels compiled as one program (41 sources, each including the same
    headers), the programs in parallel (NVRTC releases the GIL)."""
    def batch(key):
        arch, dtype, rank_class = key
        source = "\n".join(_kernels.kernel_source(op, dtype, rank_class) for op in OPS)
        cubin, registers, spills, _ = _nvrtc.compile(
            source, arch, _kernels.headers(), name=f"unary_{dtype}_{rank_class}.cu")
        assert cubin[:4] == b"\x7fELF"
        return registers, spills

    keys = list(itertools.product(ARCHS, _kernels.DTYPES, _kernels.RANK_CLASSES))
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        return dict(zip(keys, pool.map(batch, keys)))


@needs_nvrtc
@pytest.mark.parametrize("rank_class", _kernels.RANK_CLASSES)
@pytest.mark.parametrize("dtype", list(_kernels.DTYPES))
@pytest.mark.parametrize("arch", ARCHS)
def test_every_kernel_compiles_without_spills(compiled, arch, dtype, rank_class):
    registers, spills = compiled[arch, dtype, rank_class]
    names = {_kernels.kernel_name(op, dtype, rank_class) for op in OPS}
    assert set(registers) == names
    assert {k: v for k, v in spills.items() if v} == {}
    assert {k: v for k, v in registers.items() if v > MAX_REGISTERS} == {}


@needs_nvrtc
def test_compiled_kernel_is_cached_per_key():
    first = _kernels.compiled_kernel("sigmoid", "float32", "strided", "sm_90")
    assert first.name == "ember_unary_sigmoid_float32_strided"
    assert first.cubin[:4] == b"\x7fELF"
    assert first.spill_bytes == 0 and 0 < first.registers <= MAX_REGISTERS
    assert _kernels.compiled_kernel("sigmoid", "float32", "strided", "sm_90") is first


@needs_nvrtc
def test_compile_error_carries_the_log():
    with pytest.raises(_nvrtc.NVRTCError, match="undefined_thing"):
        _nvrtc.compile('extern "C" __global__ void k() { undefined_thing(); }', "sm_90")


# ---- 2. the kernels run on the CPU, bit for bit ----------------------------------

def _saturate(v, dtype):
    big = float(np.finfo(dtype).max)
    return math.copysign(math.inf, v) if abs(v) > big else v


def unary_params(dtype, decimals=0, nan=0.0, posinf=None, neginf=None):
    """THUnaryParams prepared as THUnary.c's loop_params does."""
    big = float(np.finfo(dtype).max)
    try:
        ten_pow = 10.0 ** abs(decimals)
    except OverflowError:
        ten_pow = math.inf
    return _kernels.THUnaryParams(
        ten_pow=_saturate(ten_pow, dtype), divide=decimals < 0, nan=_saturate(nan, dtype),
        posinf=big if posinf is None else _saturate(posinf, dtype),
        neginf=-big if neginf is None else _saturate(neginf, dtype))


def _by_name(op):
    return lambda t, **kw: getattr(ember, op)(t) if hasattr(ember, op) else getattr(ember._C, op)(t)


# op -> (CPU operator, [keyword arguments of each call checked])
REFERENCES = {op: (_by_name(op), [{}]) for op in OPS}
REFERENCES["gelu"] = (ember.nn.functional.gelu, [{}])
REFERENCES["gelu_tanh"] = (
    lambda t: ember.nn.functional.gelu(t, approximate="tanh"), [{}])
REFERENCES["round_decimals"] = (
    lambda t, decimals: ember.round(t, decimals=decimals),
    [{"decimals": 2}, {"decimals": -1}, {"decimals": 0}])
REFERENCES["nan_to_num"] = (
    ember.nan_to_num, [{}, {"nan": 1.5, "neginf": -7.0}, {"posinf": 1e300}])


def _inputs(dtype):
    """Special values (nan, +-inf, +-0, subnormals, the edges of exp's range,
    halves for rounding, negative integers for the gamma family) and random
    values at several scales."""
    tiny = np.finfo(dtype).smallest_subnormal
    specials = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, tiny, -tiny, 3 * tiny,
                np.finfo(dtype).tiny, np.finfo(dtype).max, -np.finfo(dtype).max,
                0.5, -0.5, 1.5, 2.5, -2.5, 1.0, -1.0, 2.0, -3.0, 0.999, -0.999,
                88.7, -87.3, 103.9, -104.0, 709.7, -745.1, 0.625, -0.625, 1e-8, 1.25e4]
    rng = np.random.default_rng(14)
    scales = [rng.standard_normal(160) * s for s in (0.1, 1.0, 4.0, 30.0, 1e4)]
    return np.concatenate([np.array(specials), *scales, rng.uniform(-1, 1, 60)]).astype(dtype)


def _bits(a):
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


def _strides(a):
    return tuple(s // a.itemsize for s in a.strides)


# The dtypes run here on NumPy arrays; float16 and bfloat16 (NumPy has no
# bfloat16) run end to end in tests/test_cuda_half.py.
NUMPY_DTYPES = ["float32", "float64"]


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cuda_emulation")
    return {dtype: cuda_emulation.build(dtype, str(directory)) for dtype in NUMPY_DTYPES}


def _launch(library, op, dtype, rank_class, x, out, params, grid, block, strides=None):
    name = _kernels.kernel_name(op, dtype, rank_class)
    extra = [ctypes.byref(strides)] if strides is not None else []
    getattr(library, f"emulate_{name}")(
        ctypes.c_uint(grid), ctypes.c_uint(block), ctypes.c_void_p(x.ctypes.data),
        ctypes.c_void_p(out.ctypes.data), ctypes.c_int64(x.size), *extra,
        ctypes.byref(params))


def _assert_same_bits(got, expected, what):
    """Equal bits, or NaN in both: which NaN operand an x86 instruction
    passes on (and so the result's sign and payload) depends on operand
    order, which gcc may swap in the vectorised CPU loops."""
    assert got.shape == expected.shape
    got, expected = np.ascontiguousarray(got), np.ascontiguousarray(expected)
    differ = (_bits(got) != _bits(expected)) & ~(np.isnan(got) & np.isnan(expected))
    assert not differ.any(), f"{what}: got {got[differ][:5]}, CPU {expected[differ][:5]}"


@needs_gxx
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_kernel_matches_cpu_bit_for_bit(emulated, op, dtype):
    library, (cpu_op, calls) = emulated[dtype], REFERENCES[op]
    x = _inputs(dtype)
    for kwargs in calls:
        params = unary_params(dtype, **kwargs)
        expected = cpu_op(ember.tensor(x), **kwargs).numpy()

        # contiguous: fewer threads than elements (the grid-stride loop),
        # then more (the bound check)
        for grid, block in ((3, 32), (40, 64)):
            out = np.full_like(x, 7.0)
            _launch(library, op, dtype, "contiguous", x, out, params, grid, block)
            _assert_same_bits(out, expected, f"{op} contiguous {kwargs}")

        # strided: a transposed, sliced input written into a transposed
        # output inside a larger buffer
        base = x[:450].reshape(18, 25)
        view = base[::2, 3:].T                       # (22, 9), neither order
        expected_view = cpu_op(ember.tensor(np.ascontiguousarray(view)), **kwargs).numpy()
        out_base = np.full((9, 30), 7.0, dtype=dtype)
        out_view = out_base[:, 4:26].T               # (22, 9), column-major
        strides = _kernels.pack_strides(view.shape, _strides(view), _strides(out_view))
        _launch(library, op, dtype, "strided", view, out_view, params, 2, 32, strides)
        _assert_same_bits(out_view, expected_view, f"{op} strided {kwargs}")
        untouched = np.ones(out_base.shape, bool)
        untouched[:, 4:26] = False
        assert (out_base[untouched] == 7.0).all()

        # a broadcast input (stride 0, as ember's expand) in three dimensions
        view = np.broadcast_to(x[:20].reshape(4, 1, 5), (4, 3, 5))
        expected_view = cpu_op(ember.tensor(np.ascontiguousarray(view)), **kwargs).numpy()
        out = np.full(view.shape, 7.0, dtype=dtype)
        strides = _kernels.pack_strides(view.shape, _strides(view), _strides(out))
        _launch(library, op, dtype, "strided", view, out, params, 1, 8, strides)
        _assert_same_bits(out, expected_view, f"{op} broadcast {kwargs}")
