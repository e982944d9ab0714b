"""ember.cuda's pointwise (binary, ternary, integer unary) and reduction
kernels, checked without a GPU.

1. NVRTC compiles every kernel source the templates produce for same-dtype
   inputs (each THPointwise operator x each compute dtype it has a CPU
   loop for x rank class; each reduction x dtype x rank class), plus the
   mixed-dtype kernels the CPU checks below use, to SASS for sm_80 and
   sm_90, with no spills and at most MAX_REGISTERS registers.  Cubins are
   cached on disk under build/cuda_kernels (keyed by a hash of the source,
   headers, arch and NVRTC version), so only the first run pays NVRTC.
2. The host side: launch shapes, argument packing, type promotion, the
   packed strides and the cache key.
3. The same sources compiled by g++ as host C++ (tests/cuda_emulation.py)
   run on NumPy arrays and are compared with ember's CPU operators: bit for
   bit for every pointwise kernel (contiguous, strided, broadcast, Python
   number operands, mixed input dtypes) and for the integer sums and
   products, max/min and arg-reductions; float sums, means and products add
   in another order than the CPU's pairwise sums, so they are compared to
   rounding.  Reductions run with the cooperative emulation (a block's
   threads at once, __syncthreads() a barrier), so the shared-memory tree
   is what is checked.
"""

import concurrent.futures
import ctypes
import itertools
import os

import numpy as np
import pytest

import ember
from ember.cuda import _launch, _nvrtc, _pointwise, _reduce

import cuda_emulation

ARCHS = ("sm_80", "sm_90")
# As for the unary kernels (test_cuda_kernels.py): 32 warps per SM.
MAX_REGISTERS = 64
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, "build", "cuda_kernels")

needs_nvrtc = pytest.mark.skipif(not _nvrtc.available(),
                                 reason="NVRTC is not installed (pip install ember[cuda])")
needs_gxx = pytest.mark.skipif(cuda_emulation.compiler() is None, reason="no g++")

POINTWISE = list(_pointwise.ops())
# compiled here; the ones emulated here (the others: test_cuda_reduce_scan_kernels.py)
REDUCTIONS = list(_reduce.REDUCTIONS)
EMULATED_REDUCTIONS = ["sum", "prod", "mean", "amax", "amin", "argmax", "argmin"]


def same_dtype_inputs(op, dtype):
    arity = _pointwise.ops()[op].arity
    return ("bool",) + (dtype,) * (arity - 1) if op == "where" else (dtype,) * arity


# Mixed input dtypes, converted on load as the CPU converts before its loop.
MIXED = [("add", ("int32", "float32"), "float32"), ("mul", ("uint8", "int64"), "int64"),
         ("div", ("int32", "int32"), "float32"), ("lt", ("int16", "float64"), "float64"),
         ("where", ("bool", "int8", "float32"), "float32"),
         ("atan2", ("int64", "bool"), "float32"), ("maximum", ("bool", "int8"), "int8"),
         # what the number forms below plan: int32 tensor / 3, 3 / int32
         # tensor, int16 tensor < 1.5 (the number in the compute dtype)
         ("div", ("int32", "float32"), "float32"), ("div", ("float32", "int32"), "float32"),
         ("lt", ("int16", "float32"), "float32")]


def pointwise_keys():
    for op in POINTWISE:
        for dtype in _pointwise.kernel_dtypes(op):
            for rank_class in _pointwise.RANK_CLASSES:
                yield op, same_dtype_inputs(op, dtype), dtype, rank_class
    for op, ins, compute in MIXED:
        for rank_class in _pointwise.RANK_CLASSES:
            yield op, ins, compute, rank_class


def reduce_keys(ops=REDUCTIONS, dtypes=tuple(_reduce.DTYPES)):
    for op in ops:
        for dtype in _reduce.kernel_dtypes(op):
            for rank_class in _reduce.RANK_CLASSES:
                if dtype in dtypes:
                    yield op, dtype, rank_class


# ---- the tables read out of THPointwiseFormulas.h ----------------------------------

def test_tables_match_the_cpu_operators():
    ops = _pointwise.ops()
    assert ops["add"] == _pointwise.OpInfo(2, True, True, True, False, False)
    assert ops["where"].bool_first and not ops["where"].bool_output
    assert ops["sub"].bool_ok is False and ops["div"].int_ok is False
    assert all(ops[c].bool_output for c in ("eq", "ne", "lt", "le", "gt", "ge",
                                            "logical_and", "logical_or", "logical_xor"))
    assert ops["where"].arity == ops["clamp"].arity == 3
    assert _pointwise.kernel_dtypes("bitwise_and") == [
        "bool", "uint8", "int8", "int16", "int32", "int64"]
    assert _pointwise.kernel_dtypes("atan2") == ["float32", "float64", "float16", "bfloat16"]
    # every operator has a CPU reference below
    assert set(POINTWISE) == set(CPU)


def test_kernel_source_rejects_bad_keys():
    with pytest.raises(ValueError, match="no pointwise formula named 'nope'"):
        _pointwise.kernel_source("nope", ("int32", "int32"), "int32", "contiguous")
    with pytest.raises(ValueError, match="no kernel computing in 'bool'"):
        _pointwise.kernel_source("sub", ("bool", "bool"), "bool", "contiguous")
    with pytest.raises(ValueError, match="condition must be bool"):
        _pointwise.kernel_source("where", ("int8", "int8", "int8"), "int8", "strided")
    with pytest.raises(ValueError, match="rank class"):
        _reduce.kernel_source("sum", "int32", "broadcast")
    with pytest.raises(ValueError, match="argmax has no kernel for 'bool'"):
        _reduce.kernel_source("argmax", "bool", "contiguous")


def test_sources_expand_the_cpu_formula():
    src = _pointwise.kernel_source("add_alpha", ("int8", "int8"), "int8", "strided")
    assert "EXPR_ADD_ALPHA(Int8, int8_t, a0, a1, P)" in src
    assert "ember_operand_offsets<3>(i, strides)" in src
    src = _reduce.kernel_source("sum", "int32", "contiguous")
    assert "typedef TH_ACC_Int32 acc_t;" in src and "(TH_RES_Int32)total" in src


# ---- 1. every kernel compiles to SASS ------------------------------------------------

@pytest.fixture(scope="module")
def compiled():
    """{arch: ({kernel: registers}, {kernel: spill bytes})}: one program per
    (arch, family, compute dtype, rank class), in parallel (NVRTC releases
    the GIL), through the disk cache."""
    batches = {}
    for key in pointwise_keys():
        batches.setdefault(("pointwise", key[2], key[3]), []).append(
            _pointwise.kernel_source(*key))
    for key in reduce_keys():
        batches.setdefault(("reduce", key[1], key[2]), []).append(_reduce.kernel_source(*key))

    def compile_batch(item):
        (family, dtype, rank_class), arch = item
        headers = _reduce.headers() if family == "reduce" else _pointwise.headers()
        c = _launch.compile_cached("\n".join(batches[family, dtype, rank_class]), arch, headers,
                                   name=f"{family}_{dtype}_{rank_class}.cu", directory=CACHE)
        assert c.cubin[:4] == b"\x7fELF"
        return arch, c

    registers, spills = {a: {} for a in ARCHS}, {a: {} for a in ARCHS}
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for arch, c in pool.map(compile_batch, itertools.product(batches, ARCHS)):
            registers[arch].update(c.registers)
            spills[arch].update(c.spill_bytes)
    return registers, spills


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_every_kernel_compiles_without_spills(compiled, arch):
    registers, spills = compiled[0][arch], compiled[1][arch]
    names = {_pointwise.kernel_name(*key) for key in pointwise_keys()}
    names |= {_reduce.kernel_name(*key) for key in reduce_keys()}
    assert set(registers) == names
    assert {k: v for k, v in spills.items() if v} == {}
    assert {k: v for k, v in registers.items() if v > MAX_REGISTERS} == {}


# kernels per family: (operator, dtypes) pairs x rank classes
KERNEL_COUNTS = {"pointwise": 698, "reduce": 124, "var/std/norm/logsumexp": 76,
                 "softmax": 16, "scans": 40}


def test_kernel_counts():
    families = {"pointwise": list(pointwise_keys()), "reduce": [], "var/std/norm/logsumexp": [],
                "softmax": [], "scans": []}
    for key in reduce_keys():
        family = ("reduce" if key[0] in EMULATED_REDUCTIONS else
                  "scans" if _reduce.REDUCTIONS[key[0]].kind == "scan" else
                  "softmax" if _reduce.REDUCTIONS[key[0]].kind == "line" else
                  "var/std/norm/logsumexp")
        families[family].append(key)
    counts = {family: len(keys) for family, keys in families.items()}
    print(f"kernels: {counts}, {sum(counts.values())} in all, each for {len(ARCHS)} archs")
    assert counts == KERNEL_COUNTS


@needs_nvrtc
def test_compile_cache_hits_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_KERNEL_CACHE", str(tmp_path))
    source = _reduce.kernel_source("amax", "int16", "contiguous")
    first = _launch.compile_cached(source, "sm_90", _reduce.headers())
    assert len(list(tmp_path.iterdir())) == 2  # the cubin and its report

    def compile_again(*args, **kwargs):
        raise AssertionError("compiled again")

    monkeypatch.setattr(_nvrtc, "compile", compile_again)
    assert _launch.compile_cached(source, "sm_90", _reduce.headers()) == first
    # another arch is another key
    with pytest.raises(AssertionError, match="compiled again"):
        _launch.compile_cached(source, "sm_80", _reduce.headers())


# ---- 2. the host side ------------------------------------------------------------------

def test_launch_config():
    assert _launch.launch_config(0, sms=132) == ((1,), (256,))
    assert _launch.launch_config(1000, sms=132) == ((4,), (256,))
    # a grid-stride loop: at most 8 blocks per SM
    assert _launch.launch_config(1 << 28, sms=132) == ((1056,), (256,))
    assert _launch.launch_config(1 << 28, sms=108) == ((864,), (256,))
    with pytest.raises(ValueError, match="non-negative"):
        _launch.launch_config(-1)
    # without a device: the default SM count
    assert _launch.launch_config(1 << 28)[0][0] % _launch.BLOCKS_PER_SM == 0


def test_reduce_launch_config():
    assert _launch.reduce_launch_config(1, 1 << 20, sms=132) == ((1,), (512,))
    assert _launch.reduce_launch_config(10, 100, sms=132) == ((10,), (128,))
    assert _launch.reduce_launch_config(10 ** 6, 3, sms=132) == ((132 * 64,), (32,))
    assert _launch.reduce_launch_config(0, 0, sms=4) == ((1,), (32,))


def test_kernel_params_point_at_each_argument():
    args = [ctypes.c_int64(7), ctypes.c_double(2.5), _pointwise.EmberInput("int16")(None, -3)]
    params = _launch.kernel_params(args)
    assert ctypes.c_int64.from_address(params[0]).value == 7
    assert ctypes.c_double.from_address(params[1]).value == 2.5
    assert _pointwise.EmberInput("int16").from_address(params[2]).value == -3
    assert ctypes.sizeof(_pointwise.EmberInput("bool")) == 16


@pytest.mark.parametrize("a, b", [
    (ember.ones(3, dtype=ember.int32), 2.5),
    (ember.ones(3, dtype=ember.uint8), 1000),
    (ember.ones(3, dtype=ember.int32), ember.tensor(1, dtype=ember.int64)),
    (ember.ones(3, dtype=ember.int8), ember.ones(3, dtype=ember.float64)),
    (ember.tensor(True), 3),
    (ember.ones(2, dtype=ember.bool), ember.ones(2, dtype=ember.bool)),
])
def test_plan_promotes_as_the_cpu(a, b):
    p = _pointwise.plan("add", a, b)
    assert p.key[2] == str(ember.add(a, b).dtype).removeprefix("ember.")
    assert p.out_dtype == p.key[2]


def test_plan_rules():
    i32 = ember.ones((2, 3), dtype=ember.int32)
    assert _pointwise.plan("div", i32, i32).key == ("div", ("int32", "int32"), "float32",
                                                    "contiguous")
    assert _pointwise.plan("lt", i32, 1.5).out_dtype == "bool"
    p = _pointwise.plan("add", ember.ones(3, dtype=ember.uint8), 1000)
    assert p.values == [None, 1000 % 256] and p.key[1] == ("uint8", "uint8")
    assert _pointwise.plan("sub_alpha", i32, i32, alpha=-2).param == -2
    with pytest.raises(RuntimeError, match="\"sub_cuda\" not implemented for 'Bool'"):
        _pointwise.plan("sub", ember.ones(2, dtype=ember.bool), True)
    with pytest.raises(RuntimeError, match="condition to be a boolean tensor"):
        _pointwise.plan("where", i32, i32, i32)
    # three-operand promotion, as clamp's: dims decide, numbers only by category
    x = ember.ones(3, dtype=ember.int16)
    assert _pointwise.plan("clamp", x, ember.tensor(0, dtype=ember.int64), 5).key[2] == "int16"
    assert _pointwise.plan("clamp", x, 0, 5.5).key[2] == "float32"


def test_number_as_converts_like_c():
    assert _pointwise.number_as(300, "int8") == 44
    assert _pointwise.number_as(-1, "uint8") == 255
    assert _pointwise.number_as(2 ** 63 - 1, "float32") == float(np.float32(2 ** 63 - 1))
    assert _pointwise.number_as(0.1, "float32") == float(np.float32(0.1))
    assert _pointwise.number_as(1e300, "float32") == float("inf")
    assert _pointwise.number_as(2, "bool") is True


def test_plan_strides_broadcast_with_stride_zero():
    a = ember.ones((4, 1, 5))
    b = ember.ones((5, 3)).t()  # (3, 5), transposed: not contiguous
    p = _pointwise.plan("mul", a, b)
    assert p.rank_class == "strided" and p.shape == (4, 3, 5) and p.numel == 60
    s = p.strides
    assert s.ndim == 3 and list(s.sizes[:3]) == [5, 3, 4]
    assert list(s.strides[0][:3]) == [1, 5, 15]   # the output, contiguous
    assert list(s.strides[1][:3]) == [1, 0, 5]    # a repeats along dim 1
    assert list(s.strides[2][:3]) == [3, 1, 0]    # b transposed, repeated along dim 0
    assert _pointwise.plan("mul", a, 2).rank_class == "contiguous"


def test_reduce_plan():
    x = ember.ones((2, 3, 4), dtype=ember.int32)
    p = _reduce.plan("sum", x, dim=1, keepdim=True)
    assert p.key == ("sum", "int32", "contiguous") and p.out_dtype == "int64"
    assert p.out_shape == (2, 1, 4) and (p.n_out, p.n_reduce) == (8, 3)
    assert (p.strides.reduce, p.strides.inner) == (3, 4)
    p = _reduce.plan("argmax", x.transpose(0, 2), dim=(0,))
    assert p.key[2] == "strided" and p.out_shape == (3, 2)
    with pytest.raises(RuntimeError, match="does not support bool"):
        _reduce.plan("argmax", ember.ones(2, dtype=ember.bool))
    with pytest.raises(IndexError, match="Dimension out of range"):
        _reduce.plan("sum", x, dim=3)
    with pytest.raises(IndexError, match="numel\\(\\) == 0"):
        _reduce.plan("amax", ember.ones(0))


# ---- 3. the kernels run on the CPU ----------------------------------------------------

def _ember(array):
    return ember.tensor(np.ascontiguousarray(array))


# op -> CPU operator on (a, b[, c]); alpha/value 2 where the op has one.
def _binary(fn, **kw):
    return lambda *args: fn(*args, **kw)


CPU = {
    "add": ember.add, "add_alpha": _binary(ember.add, alpha=2), "sub": ember.sub,
    "sub_alpha": _binary(ember.sub, alpha=2), "mul": ember.mul, "div": ember.div,
    "div_trunc": _binary(ember.div, rounding_mode="trunc"),
    "div_floor": _binary(ember.div, rounding_mode="floor"),
    "remainder": ember.remainder, "fmod": ember.fmod, "pow": ember.pow,
    "maximum": ember.maximum, "minimum": ember.minimum, "atan2": ember.atan2,
    "hypot": ember.hypot, "copysign": ember.copysign, "logaddexp": ember.logaddexp,
    "logaddexp2": ember.logaddexp2, "xlogy": ember.xlogy, "eq": ember.eq, "ne": ember.ne,
    "lt": ember.lt, "le": ember.le, "gt": ember.gt, "ge": ember.ge,
    "logical_and": ember.logical_and, "logical_or": ember.logical_or,
    "logical_xor": ember.logical_xor, "bitwise_and": ember.bitwise_and,
    "bitwise_or": ember.bitwise_or, "bitwise_xor": ember.bitwise_xor,
    "lshift": ember.bitwise_left_shift, "rshift": ember.bitwise_right_shift,
    "neg": ember.neg, "abs": ember.abs, "sign": ember.sign,
    "bitwise_not": ember.bitwise_not, "logical_not": ember.logical_not,
    "where": ember.where, "clamp": ember.clamp, "lerp": ember.lerp,
    "addcmul": _binary(ember.addcmul, value=2), "addcdiv": _binary(ember.addcdiv, value=2),
}
ALPHA_OPS = {"add_alpha", "sub_alpha", "addcmul", "addcdiv"}


def _values(dtype, n, rng, positive=False, nonzero=False):
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool)
    if dtype.startswith("float"):
        specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 2.5, -3.0])
        x = np.concatenate([specials, rng.standard_normal(n - len(specials)) * 3])
        x = np.abs(x) if positive else x
        return x.astype(dtype)
    info = np.iinfo(dtype)
    x = rng.integers(max(info.min, -100), min(info.max, 100), n, endpoint=True)
    x[:4] = [info.min, info.max, 0, 1][:4] if not positive else [0, 1, 2, 3]
    if positive:
        x = np.abs(x) % 7
    if nonzero:
        x[x == 0] = 3
    return x.astype(dtype)


def _operands(op, in_dtypes, n, rng):
    out = []
    for k, d in enumerate(in_dtypes):
        second = k == 1
        out.append(_values(d, n, rng,
                           positive=(op in ("pow", "lshift", "rshift") and second
                                     and not d.startswith("float")),
                           nonzero=(op in ("div_trunc", "div_floor", "remainder", "fmod")
                                    and second and not d.startswith("float"))))
    return out


def _same(got, expected, what):
    got, expected = np.ascontiguousarray(got), np.ascontiguousarray(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape, what
    if got.dtype.kind == "f":
        bits = np.uint32 if got.dtype == np.float32 else np.uint64
        differ = (got.view(bits) != expected.view(bits)) & ~(np.isnan(got) & np.isnan(expected))
    else:
        differ = got != expected
    assert not differ.any(), f"{what}: got {got[differ][:5]}, CPU {expected[differ][:5]}"


EMULATION_DIR = os.path.join(ROOT, "build", "cuda_emulation")


def reduction_sources(keys):
    """The reduction kernels' sources, each with its emulation launcher
    (blocks run cooperatively; the scans, without __syncthreads, need not)."""
    sources = []
    for key in keys:
        cooperative = _reduce.REDUCTIONS[key[0]].kind != "scan"
        sources += [_reduce.kernel_source(*key),
                    cuda_emulation.params_launcher(_reduce.kernel_name(*key),
                                                   _reduce.kernel_parameters(*key),
                                                   cooperative=cooperative)]
    return sources


@pytest.fixture(scope="module")
def emulated():
    os.makedirs(EMULATION_DIR, exist_ok=True)
    sources = []
    for key in pointwise_keys():
        name = _pointwise.kernel_name(*key)
        sources += [_pointwise.kernel_source(*key),
                    cuda_emulation.params_launcher(name, _pointwise.kernel_parameters(*key))]
    # NumPy has no bfloat16: the half-precision reductions run end to end
    # in tests/test_cuda_half_reductions.py
    sources += reduction_sources(reduce_keys(EMULATED_REDUCTIONS, _pointwise.ARITH_DTYPES))
    return cuda_emulation.build_sources("pointwise_reduce", sources, _reduce.headers(),
                                        EMULATION_DIR)


def _run(library, p, out, inputs, grid, block):
    ptrs = [None if x is None else x.ctypes.data for x in inputs]
    args = _pointwise.arguments(p, out.ctypes.data, ptrs)
    getattr(library, f"emulate_{_pointwise.kernel_name(*p.key)}")(
        ctypes.c_uint(grid), ctypes.c_uint(block), _launch.kernel_params(args))


def _cases():
    """NumPy-array cases; the half-precision kernels run end to end in
    tests/test_cuda_half.py (NumPy has no bfloat16)."""
    for op in POINTWISE:
        for dtype in _pointwise.kernel_dtypes(op):
            if dtype not in _pointwise.LOOP_DTYPES:
                yield op, same_dtype_inputs(op, dtype)
    for op, ins, _ in MIXED:
        yield op, ins


@needs_gxx
@pytest.mark.parametrize("op, in_dtypes", list(_cases()),
                         ids=[f"{op}-{'-'.join(d)}" for op, d in _cases()])
def test_pointwise_kernel_matches_cpu(emulated, op, in_dtypes):
    rng = np.random.default_rng(14)
    cpu, alpha = CPU[op], 2
    arrays = _operands(op, in_dtypes, 120, rng)
    tensors = [ember.tensor(a) for a in arrays]
    expected = cpu(*tensors).numpy()
    p = _pointwise.plan(op, *tensors, alpha=alpha)
    assert p.rank_class == "contiguous"
    # fewer threads than elements (the grid-stride loop), then more
    for grid, block in ((3, 16), (9, 32)):
        out = np.full(expected.shape, 7, dtype=expected.dtype)
        _run(emulated, p, out, arrays, grid, block)
        _same(out, expected, f"{op} contiguous")

    # strided and broadcast: input 0 a transposed (6, 5) view, input 1 a
    # (6, 1) column repeated along dim 1 (stride 0), input 2 a (5,) row; the
    # result written into a column-major view inside a larger buffer
    views = [arrays[0][:30].reshape(5, 6).T]
    if len(arrays) > 1:
        views.append(arrays[1][30:36].reshape(6, 1))
    if len(arrays) > 2:
        views.append(arrays[2][40:45])
    expected = cpu(*[_ember(v) for v in views]).numpy()
    out_base = np.full((5, 9), 7, dtype=expected.dtype)
    out_view = out_base[:, 2:8].T
    p = _pointwise.plan(op, *[_ember(v) for v in views], alpha=alpha,
                        out_strides=[s // out_view.itemsize for s in out_view.strides])
    assert p.rank_class == "strided"
    # the plan saw contiguous copies (ember has no view of a NumPy view):
    # the strides the kernel walks are the NumPy views' own
    p = p._replace(strides=_pointwise.pack_operand_strides(
        p.shape, [[s // out_view.itemsize for s in out_view.strides]]
        + [_np_strides(v, p.shape) for v in views]))
    _run(emulated, p, out_view, views, 2, 8)
    _same(out_view, expected, f"{op} strided")
    fill = np.array(7).astype(expected.dtype)
    assert (out_base[:, :2] == fill).all() and (out_base[:, 8:] == fill).all()

    # a Python number as the last operand (and as the first for binary ops)
    number = {"bool": True}.get(in_dtypes[-1], 3 if not in_dtypes[-1].startswith("float")
                                 else 1.5)
    positions = [] if len(arrays) == 1 or op in ("addcmul", "addcdiv") else [len(arrays) - 1]
    positions += [0] if len(arrays) == 2 else []
    for position in positions:
        operands = list(tensors)
        operands[position] = number
        try:
            expected = cpu(*operands).numpy()
        except (TypeError, RuntimeError):
            continue  # a form the CPU operator does not take (atan2(2, t))
        p = _pointwise.plan(op, *operands, alpha=alpha)
        inputs = [None if k == position else a for k, a in enumerate(arrays)]
        out = np.full(expected.shape, 7, dtype=expected.dtype)
        _run(emulated, p, out, inputs, 4, 32)
        _same(out, expected, f"{op} with a number at {position}")


def _np_strides(array, shape):
    """array's element strides broadcast to `shape` (0 where it repeats)."""
    lead = len(shape) - array.ndim
    strides = [0] * lead
    for d, (size, s) in enumerate(zip(array.shape, array.strides)):
        strides.append(0 if size == 1 and shape[lead + d] != 1 else s // array.itemsize)
    return strides


def _cpu_reduce(op, t, dim, keepdim):
    if op in ("sum", "mean"):
        return getattr(ember, op)(t, dim=tuple(range(t.ndim)) if dim is None else dim,
                                  keepdim=keepdim)
    if op == "prod":  # prod takes one dim, like torch.prod
        return ember.prod(t) if dim is None and not keepdim else \
            ember.prod(t.reshape(-1), 0, keepdim=True).reshape((1,) * t.ndim) if dim is None \
            else ember.prod(t, dim, keepdim=keepdim)
    if op in ("amax", "amin"):
        return getattr(ember, op)(t, dim=() if dim is None else dim, keepdim=keepdim)
    return getattr(ember, op)(t, dim=dim, keepdim=keepdim)


def _reduce_input(dtype, rng):
    if dtype.startswith("float"):
        x = rng.standard_normal(4 * 5 * 24) * 2
        x[[5, 300, 301]] = [np.nan, np.inf, -np.inf]
        x[400:404] = x[450]  # ties
        return x.astype(dtype).reshape(4, 5, 24)
    x = _values(dtype, 4 * 5 * 24, rng)
    if dtype != "bool":
        x[100:110] = np.iinfo(dtype).max  # ties at the top
    return x.reshape(4, 5, 24)


def _run_reduce(library, p, out, x, grid, block):
    args = _reduce.arguments(p, out.ctypes.data, x.ctypes.data)
    getattr(library, f"emulate_{_reduce.kernel_name(*p.key)}")(
        ctypes.c_uint(grid), ctypes.c_uint(block), _launch.kernel_params(args))


@needs_gxx
@pytest.mark.parametrize("op, dtype", [key[:2] for key in reduce_keys(
    EMULATED_REDUCTIONS, _pointwise.ARITH_DTYPES) if key[2] == "contiguous"])
def test_reduction_kernel_matches_cpu(emulated, op, dtype):
    rng = np.random.default_rng(7)
    x = _reduce_input(dtype, rng)
    if op == "prod" and dtype.startswith("float"):
        x = (1 + x / 64).astype(dtype)  # products that stay finite
    exact = not (op in ("sum", "prod", "mean") and dtype.startswith("float"))
    for view, dim, keepdim in ((x, None, False), (x, 2, False), (x, 1, True), (x, 0, False),
                               (x.transpose(2, 0, 1), 0, False),
                               (x[:, ::2, 3:], None, True)):
        if op.startswith("arg") and dim is None and keepdim:
            keepdim = False
        expected = _cpu_reduce(op, ember.tensor(np.ascontiguousarray(view)), dim,
                               keepdim).numpy()
        t = ember.from_numpy(view) if view.flags.c_contiguous else _strided_ember(view)
        p = _reduce.plan(op, t, dim=dim, keepdim=keepdim)
        assert p.out_shape == expected.shape
        out = np.full(expected.shape, 7, dtype=expected.dtype)
        (grid,), (block,) = _launch.reduce_launch_config(p.n_out, p.n_reduce, sms=2)
        # a few blocks of 8 threads: the grid loop over outputs and a
        # three-level tree, with few threads to run at once on the CPU
        _run_reduce(emulated, p, out, view, min(grid, 3), min(block, 8))
        what = f"{op} {p.key[2]} dim={dim}"
        if exact:
            _same(out, expected, what)
        else:
            # another order of additions: at most ~n ulp of the largest term
            eps = np.finfo(dtype).eps
            finite = np.abs(view[np.isfinite(view)])
            np.testing.assert_allclose(out, expected, rtol=4 * p.n_reduce * eps,
                                       atol=4 * p.n_reduce * eps * finite.max(),
                                       equal_nan=True, err_msg=what)


def _strided_ember(view):
    """An ember tensor with `view`'s shape and strides (a view of a copy of
    its base, so only the metadata matters to plan)."""
    base = ember.from_numpy(np.ascontiguousarray(view.base if view.base is not None else view))
    return base.as_strided(view.shape, [s // view.itemsize for s in view.strides])
