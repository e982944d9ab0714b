"""ember.cuda's cast kernels (to(dtype), half(), copy_ between dtypes on the
device), checked without a GPU.

1. NVRTC compiles every (source dtype, destination dtype, rank class) cast
   to SASS for sm_80 and sm_90, with no spills (skipped without NVRTC).
2. The same sources compiled by g++ (tests/cuda_emulation.py) convert
   buffers of ember CPU tensors, compared with the CPU's casts
   (THCopy.c) bit for bit: all 65536 bit patterns of float16 and of
   bfloat16 to every dtype; every dtype to both of them, over every 16-bit
   value widened, the midpoints between neighbours (the ties of rounding
   to nearest even) and their float32 neighbours, random float32 and
   float64 bit patterns and every int16; floating values to the integers,
   out of range and NaN included (Note [Float to integer casts] in
   ember/cuda/_cast.py); strided and broadcast operands.
3. The launcher's paths (to, half/float/bfloat16/..., copy_) on a tensor on
   'cuda', end to end, with no copy through the host; and those across the
   bus, each element moved once in the narrower dtype.
"""

import ctypes
import itertools
import os

import numpy as np
import pytest

import ember
from ember.cuda import _cast, _launch, _launcher, _nvrtc, _runtime

import cuda_emulation
from test_cuda_launcher import device, runtime, seeded  # noqa: F401 (fixtures)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, "build", "cuda_kernels")
EMULATION_DIR = os.path.join(ROOT, "build", "cuda_emulation")
ARCHS = ("sm_80", "sm_90")
MAX_REGISTERS = 64  # as the other kernel families (test_cuda_kernels.py)
DTYPES = list(_cast.DTYPES)
HALVES = ("float16", "bfloat16")
KEYS = list(itertools.product(DTYPES, DTYPES, _cast.RANK_CLASSES))

needs_nvrtc = pytest.mark.skipif(not _nvrtc.available(),
                                 reason="NVRTC is not installed (pip install ember[cuda])")
needs_gxx = pytest.mark.skipif(cuda_emulation.compiler() is None, reason="no g++")


def _dtype(name):
    return getattr(ember, name)


# ---- the sources ------------------------------------------------------------------------

def test_sources_convert_as_th_convert():
    assert len(KEYS) == 200
    src = _cast.kernel_source("float32", "bfloat16", "strided")
    assert "ember_store(out[o.out], (float)ember_widen(in[o.in]));" in src
    assert "ember_offsets(i, strides)" in src
    src = _cast.kernel_source("bfloat16", "int8", "contiguous")
    assert "ember_store(out[i], ember_float_to_int32(ember_widen(in[i])));" in src
    assert "ember_float_to_int64(" in _cast.kernel_source("float64", "int64", "contiguous")
    # integers convert as C converts; within one dtype the bits move
    assert "ember_store(out[i], ember_widen(in[i]));" in _cast.kernel_source(
        "int64", "uint8", "contiguous")
    assert "ember_store(out[i], in[i]);" in _cast.kernel_source(
        "float16", "float16", "contiguous")
    with pytest.raises(ValueError, match="casts are generated for"):
        _cast.kernel_source("complex64", "float32", "contiguous")
    with pytest.raises(ValueError, match="rank class"):
        _cast.kernel_source("int8", "float32", "broadcast")


def test_plans():
    a = ember.empty((3, 4), dtype=ember.float16)
    key, strides = _cast.plan(ember.empty((3, 4)), a)
    assert key == ("float16", "float32", "contiguous") and strides is None
    key, strides = _cast.plan(ember.empty((4, 3), dtype=ember.int8).t(), a)
    assert key == ("float16", "int8", "strided")
    assert list(strides.sizes[:2]) == [4, 3] and list(strides.in_strides[:2]) == [1, 4]
    assert list(strides.out_strides[:2]) == [3, 1] and strides.ndim == 2
    # a broadcast source: stride 0
    key, strides = _cast.plan(ember.empty((3, 4)), ember.empty(4, dtype=ember.bool))
    assert key[2] == "strided" and list(strides.in_strides[:2]) == [1, 0]


# ---- 1. every cast compiles -------------------------------------------------------------

@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_every_cast_compiles_without_spills(arch):
    registers, spills = {}, {}
    for rank_class in _cast.RANK_CLASSES:
        source = "\n".join(_cast.kernel_source(*key) for key in KEYS if key[2] == rank_class)
        compiled = _launch.compile_cached(source, arch, _cast.headers(),
                                          name=f"casts_{rank_class}.cu", directory=CACHE)
        registers.update(compiled.registers)
        spills.update(compiled.spill_bytes)
    assert set(registers) == {_cast.kernel_name(*key) for key in KEYS}
    assert {k: v for k, v in spills.items() if v} == {}
    assert {k: v for k, v in registers.items() if v > MAX_REGISTERS} == {}


# ---- 2. the kernels run on the CPU --------------------------------------------------------

@pytest.fixture(scope="module")
def emulated():
    os.makedirs(EMULATION_DIR, exist_ok=True)
    sources = []
    for key in KEYS:
        sources += [_cast.kernel_source(*key),
                    cuda_emulation.params_launcher(_cast.kernel_name(*key),
                                                   _cast.kernel_parameters(*key))]
    return cuda_emulation.build_sources("casts", sources, _cast.headers(), EMULATION_DIR)


def _cast_on_emulated_device(library, source, dtype, out=None):
    """`source` (a CPU tensor) converted by the cast kernel into `out` (a
    new contiguous CPU tensor of `dtype` when None): the kernel reads and
    writes the tensors' host memory."""
    out = ember.empty(source.shape, dtype=_dtype(dtype)) if out is None else out
    key, strides = _cast.plan(out, source)
    args = _cast.arguments(strides, out.data_ptr(), source.data_ptr(), out.numel())
    getattr(library, f"emulate_{_cast.kernel_name(*key)}")(
        ctypes.c_uint(4), ctypes.c_uint(64), _launch.kernel_params(args))
    return out


def _bits(tensor):
    """The elements' bytes as unsigned integers (bool as 0/1)."""
    width = tensor.element_size()
    raw = ctypes.string_at(tensor.data_ptr(), tensor.numel() * width)
    return np.frombuffer(raw, dtype=f"u{width}")


def same_bits(got, expected, what):
    """Bit for bit; a float32 or float64 NaN matches any NaN (a GPU's
    conversions do not keep payloads; the 16-bit formats' are integer code
    and exact)."""
    assert got.dtype == expected.dtype and got.shape == expected.shape
    a, b = _bits(got.contiguous()), _bits(expected.contiguous())
    differ = a != b
    if got.dtype in (ember.float32, ember.float64):
        float_t = np.float32 if got.dtype == ember.float32 else np.float64
        differ &= ~(np.isnan(a.view(float_t)) & np.isnan(b.view(float_t)))
    assert not differ.any(), (f"{what}: {differ.sum()} differ, e.g. at "
                              f"{np.flatnonzero(differ)[:4]}: got {a[differ][:4]}, "
                              f"CPU {b[differ][:4]}")


def _all_patterns(dtype):
    """Every 16-bit pattern as a tensor of `dtype`."""
    bits = np.arange(1 << 16, dtype=np.uint16)
    result = ember.empty(1 << 16, dtype=_dtype(dtype))
    ctypes.memmove(result.data_ptr(), bits.ctypes.data, bits.nbytes)
    return result


def _to_half_inputs():
    """Values of every dtype to round into float16 and bfloat16: each
    16-bit value widened, the midpoints between neighbours (ties) and their
    float32 neighbours, random float32 and float64 bits, every int16."""
    widened = [_all_patterns(h).float().numpy() for h in HALVES]
    values = []
    for w in widened:
        w = np.sort(w[np.isfinite(w)])
        middle = ((w[:-1].astype(np.float64) + w[1:]) / 2).astype(np.float32)
        values += [w, middle, np.nextafter(middle, np.float32(np.inf)),
                   np.nextafter(middle, np.float32(-np.inf))]
    rng = np.random.default_rng(14)
    values.append(rng.integers(0, 1 << 32, 1 << 17, dtype=np.uint32).view(np.float32))
    floats = np.concatenate(values + [np.array([np.nan, np.inf, -np.inf, 65520.0, 65519.99,
                                                3.4e38, -1e-45], np.float32)])
    with np.errstate(invalid="ignore"):  # signalling NaNs among the random bits
        wide = floats.astype(np.float64)
        doubles = np.concatenate([
            wide, rng.integers(0, 1 << 64, 1 << 16, dtype=np.uint64).view(np.float64),
            wide * (1 + 2.0 ** -30)])
    ints = np.arange(-(1 << 15), 1 << 15, dtype=np.int64)
    big = np.concatenate([ints, rng.integers(-(1 << 62), 1 << 62, 4096), [-(1 << 63), (1 << 63) - 1]])
    return {"float32": floats, "float64": doubles, "int16": ints.astype(np.int16),
            "int8": ints[(ints >= -128) & (ints < 128)].astype(np.int8),
            "uint8": np.arange(256, dtype=np.uint8), "int32": big.astype(np.int32),
            "int64": big.astype(np.int64), "bool": np.array([True, False])}


@needs_gxx
@pytest.mark.parametrize("src", HALVES)
def test_every_16_bit_pattern_to_every_dtype(emulated, src):
    x = _all_patterns(src)
    for dst in DTYPES:
        same_bits(_cast_on_emulated_device(emulated, x, dst), x.to(_dtype(dst)),
                  f"{src} -> {dst}")


@needs_gxx
@pytest.mark.parametrize("dst", HALVES)
def test_every_dtype_to_the_16_bit_formats(emulated, dst):
    for src, values in _to_half_inputs().items():
        x = ember.from_numpy(values.copy())
        same_bits(_cast_on_emulated_device(emulated, x, dst), x.to(_dtype(dst)),
                  f"{src} -> {dst}")
    for half in HALVES:  # bool, and the other 16-bit format (every pattern)
        x = _all_patterns(half)
        same_bits(_cast_on_emulated_device(emulated, x, dst), x.to(_dtype(dst)),
                  f"{half} -> {dst}")


def _float_values(dtype, rng):
    """Floats for the integer casts: in range, at and past every integer
    type's limits, huge, NaN and the infinities."""
    limits = [2.0 ** k + d for k in (7, 8, 15, 16, 31, 32, 63, 64) for d in (-1, -0.5, 0, 0.5, 1)]
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.9, 2.7, 255.5, 1e10, -1e10, 3e38]
    x = np.concatenate([limits, np.negative(limits), special,
                        rng.standard_normal(2000) * 10.0 ** rng.integers(0, 20, 2000)])
    return x.astype(dtype)


@needs_gxx
@pytest.mark.parametrize("src", ["float32", "float64"])
def test_floats_to_integers_and_bool_as_the_cpu(emulated, src):
    x = ember.from_numpy(_float_values(src, np.random.default_rng(5)))
    for dst in ("bool", "uint8", "int8", "int16", "int32", "int64"):
        same_bits(_cast_on_emulated_device(emulated, x, dst), x.to(_dtype(dst)),
                  f"{src} -> {dst}")


@needs_gxx
def test_every_other_pair_as_the_cpu(emulated):
    rng = np.random.default_rng(9)
    inputs = {name: ember.from_numpy(values.copy())
              for name, values in _to_half_inputs().items()}
    inputs["float32"] = ember.from_numpy(_float_values("float32", rng))
    inputs["float64"] = ember.from_numpy(_float_values("float64", rng))
    for src, dst in itertools.product(inputs, inputs):
        x = inputs[src]
        same_bits(_cast_on_emulated_device(emulated, x, dst), x.to(_dtype(dst)),
                  f"{src} -> {dst}")


@needs_gxx
def test_strided_and_broadcast_operands(emulated):
    x = _all_patterns("bfloat16")[:4096].view(64, 64)
    for dst in ("float16", "int16", "float64"):
        same_bits(_cast_on_emulated_device(emulated, x.t(), dst), x.t().to(_dtype(dst)),
                  f"transposed -> {dst}")
        out = ember.zeros((64, 64), dtype=_dtype(dst)).t()  # a strided destination
        _cast_on_emulated_device(emulated, x[::2, 1::3], dst, out=out[:32, :21])
        expected = ember.zeros((64, 64), dtype=_dtype(dst)).t()
        expected[:32, :21].copy_(x[::2, 1::3])
        same_bits(out, expected, f"strided destination {dst}")
    row = ember.arange(5, dtype=ember.int32)
    out = _cast_on_emulated_device(emulated, row, "float16", out=ember.empty(3, 5, dtype=ember.float16))
    same_bits(out, row.expand(3, 5).to(ember.float16), "broadcast")


# ---- 3. the launcher's paths ----------------------------------------------------------------

@pytest.fixture
def copies(device, monkeypatch):
    """The (kind, bytes) of each copy while the test runs (the emulated
    runtime's memcpy, or CuPy's)."""
    recorded = []
    memcpy = _runtime.current().memcpy

    def recording(destination, source, nbytes, kind):
        recorded.append((kind, nbytes))
        return memcpy(destination, source, nbytes, kind)

    monkeypatch.setattr(_runtime.current(), "memcpy", recording)
    yield recorded
    monkeypatch.undo()


def _moved(copies, kind):
    """The bytes the recorded copies of `kind` moved."""
    return sum(nbytes for k, nbytes in copies if k == kind)


def _values(dtype, shape=(6, 8)):
    rng = np.random.default_rng(21)
    x = np.concatenate([[np.nan, np.inf, -np.inf, -0.0, 70000.0, -300.7, 1e-6],
                        rng.standard_normal(41) * 100])
    return ember.from_numpy(x.astype(np.float32)).to(_dtype(dtype)).view(*shape)


@pytest.mark.parametrize("src, dst", [("float32", "float16"), ("float16", "float32"),
                                      ("bfloat16", "float16"), ("float64", "bfloat16"),
                                      ("float32", "int8"), ("bfloat16", "int64"),
                                      ("int32", "float16"), ("float16", "bool")])
def test_to_and_copy_convert_on_the_device(device, copies, src, dst):
    x = _values(src)
    d = x.cuda()
    copies.clear()
    results = [(d.to(_dtype(dst)), x.to(_dtype(dst))),
               (d.t().to(_dtype(dst)), x.t().to(_dtype(dst))),
               (d.to("cuda", _dtype(dst)), x.to(_dtype(dst)))]
    out = ember.empty((8, 6), dtype=_dtype(dst), device="cuda").t()  # strided destination
    results.append((out.copy_(d), ember.empty((8, 6), dtype=_dtype(dst)).t().copy_(x)))
    row = ember.empty((6, 8), dtype=_dtype(dst), device="cuda")
    results.append((row.copy_(d[2]), ember.empty((6, 8), dtype=_dtype(dst)).copy_(x[2])))
    assert not _moved(copies, _runtime.DEVICE_TO_HOST)
    assert any(k.startswith(f"ember_cast_{src}_to_{dst}") for k in device.launches)
    for got, expected in results:
        assert got.is_cuda
        same_bits(got.cpu(), expected, f"{src} -> {dst}")


def test_dtype_shorthands_convert_on_the_device(device, copies):
    x = _values("float32")
    d = x.cuda()
    copies.clear()
    pairs = [(d.half(), x.half()), (d.bfloat16(), x.bfloat16()), (d.half().float(), x.half().float()),
             (d.double(), x.double()), (d.long(), x.long()), (d.int(), x.int()),
             (d.short(), x.short()), (d.char(), x.char()), (d.byte(), x.byte()),
             (d.bool(), x.bool()), (d.to(ember.float16).bfloat16(), x.half().bfloat16())]
    assert not _moved(copies, _runtime.DEVICE_TO_HOST)
    for got, expected in pairs:
        assert got.is_cuda
        same_bits(got.cpu(), expected, str(expected.dtype))


@pytest.mark.parametrize("src, dst", [("float32", "float16"), ("float64", "bfloat16"),
                                      ("float32", "int8"), ("bfloat16", "bool"),
                                      ("float16", "float32"), ("int8", "float64"),
                                      ("float32", "int32"), ("bfloat16", "float16")])
def test_copies_across_the_bus_convert_on_the_narrow_side(device, copies, src, dst):
    """Note [Convert on the narrow side]: to('cpu', dtype), to('cuda',
    dtype) and copy_ across devices move each element once, in the
    narrower dtype (a cast kernel on the device converts before a narrowing
    copy to the host and after a widening copy from it), with the CPU's
    bits either way; strided and broadcast sources included."""
    x = _values(src)
    d = x.cuda()
    narrow = min(_dtype(src).itemsize, _dtype(dst).itemsize) * x.numel()
    casts = lambda: [k for k in device.launches if k.startswith(f"ember_cast_{src}_to_{dst}")]  # noqa: E731
    for to_host in (lambda: d.t().to("cpu", _dtype(dst)),
                    lambda: ember.empty((8, 6), dtype=_dtype(dst)).copy_(d.t()),
                    lambda: d.to(device="cpu", dtype=_dtype(dst)).t()):
        copies.clear()
        device.launches.clear()
        same_bits(to_host(), x.t().to(_dtype(dst)), f"cuda {src} -> cpu {dst}")
        assert copies == [(_runtime.DEVICE_TO_HOST, narrow)]
        assert bool(casts()) == (_dtype(dst).itemsize < _dtype(src).itemsize)
    for to_device in (lambda: x.t().to("cuda", _dtype(dst)),
                      lambda: ember.empty((8, 6), dtype=_dtype(dst), device="cuda").copy_(x.t()),
                      lambda: ember.empty((2, 8, 6), dtype=_dtype(dst), device="cuda")
                      .copy_(x.t())[1]):
        copies.clear()
        device.launches.clear()
        got = to_device()
        assert got.is_cuda and copies == [(_runtime.HOST_TO_DEVICE, narrow)]
        assert bool(casts()) == (_dtype(dst).itemsize > _dtype(src).itemsize)
        same_bits(got.cpu(), x.t().to(_dtype(dst)), f"cpu {src} -> cuda {dst}")
    empty = ember.empty((0, 3), device="cuda")
    assert empty.half().shape == (0, 3) and empty.half().dtype == ember.float16
    assert empty.to("cpu", ember.float16).shape == (0, 3)


def test_reductions_with_dtype_convert_first_on_the_device(device, copies):
    x = ember.arange(24, dtype=ember.int32).view(4, 6)
    h = _values("bfloat16")
    d, dh = x.cuda(), h.cuda()
    copies.clear()
    pairs = [(d.sum(dtype=ember.float16), x.sum(dtype=ember.float16)),
             (d.prod(1, dtype=ember.bfloat16), x.prod(1, dtype=ember.bfloat16)),
             (d.cumsum(0, dtype=ember.int8), x.cumsum(0, dtype=ember.int8)),
             (d.mean(dtype=ember.float64), x.mean(dtype=ember.float64)),
             (ember.softmax(dh, 1, dtype=ember.float32), ember.softmax(h, 1, dtype=ember.float32)),
             (dh.amax(0), h.amax(0))]
    assert not _moved(copies, _runtime.DEVICE_TO_HOST)
    for got, expected in pairs:
        same_bits(got.cpu(), expected, str(expected.dtype))
    with pytest.raises(TypeError, match="unexpected keyword argument 'dtype'"):
        ember.logsumexp(d, 0, dtype=ember.float32)


def test_out_and_in_place_of_another_dtype_convert_on_the_device(device, copies):
    h, f = _values("float16"), _values("float32")
    dh, df = h.cuda(), f.cuda()
    copies.clear()
    dh.add_(df)  # float16 += float32: computed in float32, rounded into float16
    h.add_(f)
    out = ember.empty((8, 6), dtype=ember.bfloat16, device="cuda").t()
    ember.exp(df, out=out)
    sums = ember.empty(8, dtype=ember.float64, device="cuda")
    ember.sum(df, 0, out=sums)
    joined = ember.empty((12, 8), dtype=ember.float64, device="cuda")
    ember.cat([dh, df], out=joined)  # float16 and float32 rows, each converted
    assert not _moved(copies, _runtime.DEVICE_TO_HOST)
    same_bits(joined.cpu(), ember.cat([h, f], out=ember.empty((12, 8), dtype=ember.float64)),
              "cat into float64")
    same_bits(dh.cpu(), h, "float16 += float32")
    same_bits(out.cpu(), ember.exp(f, out=ember.empty((8, 6), dtype=ember.bfloat16).t()),
              "exp into bfloat16")
    np.testing.assert_allclose(sums.cpu().numpy(), ember.sum(f, 0).double().numpy(),
                               rtol=1e-6)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        ember.exp(df, out=ember.empty((6, 8), dtype=ember.int64, device="cuda"))
