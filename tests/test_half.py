"""float16 and bfloat16: the dtypes, casts bit for bit against PyTorch's
(every 16-bit pattern, and float32 patterns around every rounding
boundary), type promotion, factories, printing, NumPy and DLPack.

The operators on them (computed in float32, rounded once) are in
test_half_ops.py.
"""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

HALVES = [(ember.float16, torch.float16), (ember.bfloat16, torch.bfloat16)]
HALF_IDS = ["float16", "bfloat16"]


def torch_from_bits(bits, tdtype):
    """A torch tensor of tdtype holding the uint16 patterns `bits`."""
    return torch.from_numpy(bits.astype(np.uint16).view(np.int16)).view(tdtype)


def bits16(t):
    """The uint16 patterns of an ember 16-bit tensor (through DLPack)."""
    return torch.from_dlpack(t.contiguous()).view(torch.int16).numpy().view(np.uint16)


def bits32(t):
    return np.asarray(t).view(np.uint32)


ALL16 = np.arange(65536, dtype=np.uint32)


def float32_patterns():
    """Every top-16-bit pattern with low halves that sit on, next to and
    between the rounding boundaries of both formats (ties with an odd and
    an even kept bit, float16's 13-bit and bfloat16's 16-bit cut), plus a
    million fixed pseudo-random patterns."""
    lows = np.array([0x0000, 0x0001, 0x0FFF, 0x1000, 0x1001, 0x1FFF, 0x2000,
                     0x3000, 0x3001, 0x7FFF, 0x8000, 0x8001, 0xE000, 0xFFFF],
                    dtype=np.uint32)
    grid = (ALL16[:, None] << 16 | lows[None, :]).ravel()
    rng = np.random.default_rng(20261201)
    noise = rng.integers(0, 2**32, size=1 << 20, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([grid, noise])


# ---- the dtypes ---------------------------------------------------------------


def test_dtype_objects_match_torch():
    assert ember.half is ember.float16
    assert repr(ember.float16) == "ember.float16"
    assert repr(ember.bfloat16) == "ember.bfloat16"
    for e, t in HALVES:
        assert e.is_floating_point and t.is_floating_point
        assert e.is_signed == t.is_signed
        assert e.itemsize == t.itemsize == 2
        assert ember.empty(3, dtype=e).element_size() == 2


@pytest.mark.parametrize("edtype,tdtype", HALVES, ids=HALF_IDS)
def test_factories(edtype, tdtype):
    assert ember.zeros(2, 3, dtype=edtype).dtype is edtype
    assert ember.ones(4, dtype=edtype).tolist() == [1.0] * 4
    assert ember.full((2,), 0.1, dtype=edtype).tolist() == \
        torch.full((2,), 0.1, dtype=tdtype).tolist()
    assert ember.arange(0, 3, 0.5, dtype=edtype).tolist() == \
        torch.arange(0, 3, 0.5, dtype=tdtype).tolist()
    assert ember.eye(2, dtype=edtype).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    values = [0.1, -2.5, 1e-6, 300.7, float("inf")]
    assert ember.tensor(values, dtype=edtype).tolist() == \
        torch.tensor(values, dtype=tdtype).tolist()
    assert ember.tensor(1.3, dtype=edtype).item() == \
        torch.tensor(1.3, dtype=tdtype).item()


@pytest.mark.parametrize("edtype,tdtype", HALVES, ids=HALF_IDS)
def test_fill_overflow_message(edtype, tdtype):
    with pytest.raises(RuntimeError) as expected:
        torch.full((2,), 1e39, dtype=tdtype)
    with pytest.raises(RuntimeError) as got:
        ember.full((2,), 1e39, dtype=edtype)
    assert str(got.value) == str(expected.value)


# ---- casts, bit for bit ----------------------------------------------------------


@pytest.mark.parametrize("edtype,tdtype", HALVES, ids=HALF_IDS)
def test_every_16bit_pattern_to_float32(edtype, tdtype):
    source = torch_from_bits(ALL16, tdtype)
    ours = ember.from_dlpack(source).float()
    np.testing.assert_array_equal(bits32(ours), bits32(source.float()))


@pytest.mark.parametrize("edtype,tdtype", HALVES, ids=HALF_IDS)
def test_every_16bit_value_back_from_float32(edtype, tdtype):
    # the float32 images of all 65536 patterns (NaNs with every payload)
    wide = torch_from_bits(ALL16, tdtype).float()
    ours = ember.from_numpy(wide.numpy()).to(edtype)
    np.testing.assert_array_equal(bits16(ours),
                                  wide.to(tdtype).view(torch.int16).numpy().view(np.uint16))


@pytest.mark.parametrize("edtype,tdtype", HALVES, ids=HALF_IDS)
def test_float32_patterns_round_like_torch(edtype, tdtype):
    patterns = float32_patterns()
    source = patterns.view(np.float32)
    ours = ember.from_numpy(source).to(edtype)
    theirs = torch.from_numpy(source).to(tdtype)
    np.testing.assert_array_equal(bits16(ours), theirs.view(torch.int16).numpy().view(np.uint16))


@pytest.mark.parametrize("edtype,tdtype", HALVES, ids=HALF_IDS)
def test_strided_and_scalar_casts_agree_with_contiguous(edtype, tdtype):
    # the strided loop and a one-element fill use the scalar conversion,
    # the contiguous one the bulk (F16C) path: the same bits
    source = float32_patterns()[:200_000].view(np.float32)
    strided = ember.from_numpy(source)[::2].to(edtype)
    np.testing.assert_array_equal(
        bits16(strided), bits16(ember.from_numpy(source[::2].copy()).to(edtype)))
    source16 = torch_from_bits(ALL16, tdtype)
    back = ember.from_dlpack(source16)[::3].float()
    np.testing.assert_array_equal(bits32(back), bits32(source16[::3].float()))


@pytest.mark.parametrize("edtype,tdtype", HALVES, ids=HALF_IDS)
@pytest.mark.parametrize("src", ["bool", "uint8", "int8", "int16", "int32",
                                 "int64", "float64"])
def test_other_dtypes_to_half_like_torch(edtype, tdtype, src):
    # through float32, as PyTorch: float64 may round twice
    values = {
        "bool": [True, False],
        "float64": [1 + 2**-11 + 2**-40, 1 + 2**-8 + 2**-40, 65519.99, 65520.0,
                    1e300, -1e-300, 2**-24 * 1.5, float("inf")],
    }.get(src, [0, 1, -1, 100, 2049, 4097, 257, 127])
    if src == "uint8":
        values = [0, 1, 255, 129]
    if src in ("int32", "int64"):
        values += [2**24 + 1, 16777217 + 2**30, -(2**31)]
    if src == "int64":
        values += [2**62 + 2**40 + 1]
    if src in ("int8", "int16"):
        info = np.iinfo(src)
        values = [v for v in values if info.min <= v <= info.max]
    t = torch.tensor(values, dtype=getattr(torch, src))
    ours = ember.tensor(values, dtype=getattr(ember, src)).to(edtype)
    assert bits16(ours).tolist() == t.to(tdtype).view(torch.int16).numpy().view(np.uint16).tolist()


@pytest.mark.parametrize("edtype,tdtype", HALVES, ids=HALF_IDS)
@pytest.mark.parametrize("dst", ["bool", "uint8", "int8", "int16", "int32",
                                 "int64", "float64"])
def test_half_to_other_dtypes_like_torch(edtype, tdtype, dst):
    values = [0.0, -0.0, 1.5, -2.75, 100.25, 3.0, 0.001, -7.5]
    if dst == "uint8":
        values = [v for v in values if v >= 0]
    t = torch.tensor(values, dtype=tdtype)
    ours = ember.tensor(values, dtype=edtype).to(getattr(ember, dst))
    assert ours.tolist() == t.to(getattr(torch, dst)).tolist()


@pytest.mark.parametrize("edtype,tdtype", HALVES, ids=HALF_IDS)
def test_half_and_bfloat16_methods(edtype, tdtype):
    x = ember.tensor([0.1, 2.0, -3.3])
    y = torch.tensor([0.1, 2.0, -3.3])
    name = "half" if edtype is ember.float16 else "bfloat16"
    assert getattr(x, name)().dtype is edtype
    assert getattr(x, name)().tolist() == getattr(y, name)().tolist()
    same = x.to(edtype)
    assert same.to(edtype) is same  # no copy when the dtype matches
    assert same.to(ember.float64).tolist() == y.to(tdtype).double().tolist()


# ---- promotion ------------------------------------------------------------------


def test_promotion_like_torch():
    cases = [
        (ember.ones(2, dtype=ember.float16), ember.ones(2, dtype=ember.bfloat16)),
        (ember.ones(2, dtype=ember.float16), ember.ones(2, dtype=ember.int64)),
        (ember.ones(2, dtype=ember.bfloat16), ember.ones(2, dtype=ember.uint8)),
        (ember.ones(2, dtype=ember.float16), ember.ones(2, dtype=ember.float32)),
        (ember.ones(2, dtype=ember.bfloat16), ember.ones(2, dtype=ember.float64)),
        (ember.ones(2, dtype=ember.float16), 2.5),
        (ember.ones(2, dtype=ember.bfloat16), 3),
        (ember.ones(2, dtype=ember.int32), ember.tensor(2.0, dtype=ember.float16)),
        (ember.ones(2, dtype=ember.float16), ember.tensor(2.0, dtype=ember.float64)),
        (ember.ones(2, dtype=ember.bool), ember.ones(2, dtype=ember.bfloat16)),
    ]

    def to_torch(v):
        return torch.from_dlpack(v) if isinstance(v, ember.Tensor) else v

    for a, b in cases:
        expected = (to_torch(a) + to_torch(b)).dtype
        got = (a + b).dtype
        assert str(got).removeprefix("ember.") == str(expected).removeprefix("torch."), (a.dtype, b)


# ---- printing, NumPy, DLPack -------------------------------------------------------


@pytest.mark.parametrize("edtype,tdtype", HALVES, ids=HALF_IDS)
@pytest.mark.parametrize("values", [[1.0, 2.0], [1.1, 2.5e4], [[0.1, 100.0]],
                                    [float("nan"), -float("inf"), 1e-5], [],
                                    [3.0]])
def test_repr_like_torch(edtype, tdtype, values):
    expected = repr(torch.tensor(values, dtype=tdtype)).replace("torch.", "ember.")
    assert repr(ember.tensor(values, dtype=edtype)) == expected


def test_numpy_float16_zero_copy():
    array = np.array([1.5, -2.0, 65504.0], dtype=np.float16)
    t = ember.from_numpy(array)
    assert t.dtype is ember.float16
    array[0] = 3.0
    assert t.tolist() == [3.0, -2.0, 65504.0]
    back = t.numpy()
    assert back.dtype == np.float16
    back[1] = 7.0
    assert t.tolist()[1] == 7.0
    np.testing.assert_array_equal(np.asarray(t), array)


def test_bfloat16_numpy_raises_like_torch():
    with pytest.raises(TypeError) as expected:
        torch.ones(2, dtype=torch.bfloat16).numpy()
    with pytest.raises(TypeError) as got:
        ember.ones(2, dtype=ember.bfloat16).numpy()
    assert str(got.value) == str(expected.value)
    with pytest.raises(TypeError, match="BFloat16"):
        np.asarray(ember.ones(2, dtype=ember.bfloat16))


@pytest.mark.parametrize("edtype,tdtype", HALVES, ids=HALF_IDS)
def test_dlpack_both_ways(edtype, tdtype):
    ours = ember.tensor([1.0, -0.5, 3.25], dtype=edtype)
    theirs = torch.from_dlpack(ours)
    assert theirs.dtype == tdtype
    assert theirs.tolist() == [1.0, -0.5, 3.25]
    back = ember.from_dlpack(torch.tensor([2.0, 0.25], dtype=tdtype))
    assert back.dtype is edtype and back.tolist() == [2.0, 0.25]
    # zero-copy: a write through torch shows in ember
    theirs[0] = 8.0
    assert ours.tolist()[0] == 8.0
