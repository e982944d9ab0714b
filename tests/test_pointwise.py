"""Elementwise binary, unary and ternary operators, the operator slots, type
promotion, out= and in-place rules.

Values: NumPy is the oracle, computed in the dtype ember computes in (the
promotion itself is checked against torch.result_type separately), over
random broadcastable shapes with 0- and 1-size dims and non-contiguous
inputs (transposed, stepped, offset, expanded).  Semantics and messages:
PyTorch, where installed.
"""

import operator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember

HYP = settings(max_examples=min(40, settings.default.max_examples), deadline=None)

DTYPES = {
    "bool": (ember.bool, np.bool_),
    "uint8": (ember.uint8, np.uint8),
    "int8": (ember.int8, np.int8),
    "int16": (ember.int16, np.int16),
    "int32": (ember.int32, np.int32),
    "int64": (ember.int64, np.int64),
    "float32": (ember.float32, np.float32),
    "float64": (ember.float64, np.float64),
}
NAMES = list(DTYPES)
INTS = ["uint8", "int8", "int16", "int32", "int64"]
FLOATS = ["float32", "float64"]
NP_OF = {str(e).removeprefix("ember."): n for e, n in DTYPES.values()}


def np_dtype(t):
    return NP_OF[str(t.dtype).removeprefix("ember.")]


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


# ---- building inputs -----------------------------------------------------------


def elements(name, small=False):
    nt = DTYPES[name][1]
    if nt is np.bool_:
        return st.booleans()
    if np.issubdtype(nt, np.integer):
        info = np.iinfo(nt)
        lo, hi = (max(info.min, -20), min(info.max, 20)) if small else (info.min, info.max)
        return st.integers(lo, hi)
    return st.floats(-1e3, 1e3, width=32 if nt is np.float32 else 64,
                     allow_nan=False).map(lambda v: v if abs(v) > 1e-3 or v == 0 else 0.0)


def layout(arr, how):
    """An ember tensor with arr's values, laid out in one of several ways."""
    if how == "transposed" and arr.ndim >= 2:
        return ember.tensor(np.ascontiguousarray(np.swapaxes(arr, -1, -2))).transpose(-1, -2)
    if how == "stepped" and arr.ndim >= 1:
        big = np.zeros(arr.shape[:-1] + (2 * arr.shape[-1],), dtype=arr.dtype)
        big[..., ::2] = arr
        return ember.tensor(big)[..., ::2]
    if how == "offset":
        flat = np.zeros(arr.size + 3, dtype=arr.dtype)
        flat[3:] = arr.ravel()
        return ember.tensor(flat)[3:].view(arr.shape)
    if how == "expanded" and arr.ndim >= 1 and arr.size > 0:
        # dim 0 becomes a broadcast (stride 0) dim; arr is made to match
        base = np.ascontiguousarray(arr[:1])
        arr[...] = base
        return ember.tensor(base).expand(*arr.shape)
    return ember.tensor(arr)


LAYOUTS = ["contiguous", "transposed", "stepped", "offset", "expanded"]


@st.composite
def broadcast_pair(draw, dtypes_a, dtypes_b=None, small=False):
    shape = tuple(draw(st.lists(st.integers(0, 4), max_size=3)))
    def sub(s):
        k = draw(st.integers(0, len(s)))
        return tuple(1 if draw(st.booleans()) else d for d in s[k:])
    sa, sb = (shape, sub(shape)) if draw(st.booleans()) else (sub(shape), shape)
    na = draw(st.sampled_from(dtypes_a))
    nb = draw(st.sampled_from(dtypes_b or dtypes_a))
    a = draw(hnp.arrays(DTYPES[na][1], sa, elements=elements(na, small)))
    b = draw(hnp.arrays(DTYPES[nb][1], sb, elements=elements(nb, small)))
    ta = layout(a, draw(st.sampled_from(LAYOUTS)))
    tb = layout(b, draw(st.sampled_from(LAYOUTS)))
    return a, b, ta, tb


def check_close(got, expected):
    got = np.asarray(got)
    assert got.shape == expected.shape
    if np.issubdtype(expected.dtype, np.floating):
        rtol = 2e-6 if expected.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)


def in_dtype(x, nt):
    with np.errstate(all="ignore"):
        return np.asarray(x).astype(nt)


# ---- binary ops vs NumPy -----------------------------------------------------------

# name: (ember function, numpy function, dtypes, bool output)
ARITH = {
    "add": (ember.add, np.add, NAMES),
    "sub": (ember.sub, np.subtract, INTS + FLOATS),
    "mul": (ember.mul, np.multiply, NAMES),
    "maximum": (ember.maximum, np.maximum, NAMES),
    "minimum": (ember.minimum, np.minimum, NAMES),
    "eq": (ember.eq, np.equal, NAMES),
    "ne": (ember.ne, np.not_equal, NAMES),
    "lt": (ember.lt, np.less, NAMES),
    "le": (ember.le, np.less_equal, NAMES),
    "gt": (ember.gt, np.greater, NAMES),
    "ge": (ember.ge, np.greater_equal, NAMES),
    "logical_and": (ember.logical_and, np.logical_and, NAMES),
    "logical_or": (ember.logical_or, np.logical_or, NAMES),
    "logical_xor": (ember.logical_xor, np.logical_xor, NAMES),
    "bitwise_and": (ember.bitwise_and, np.bitwise_and, ["bool"] + INTS),
    "bitwise_or": (ember.bitwise_or, np.bitwise_or, ["bool"] + INTS),
    "bitwise_xor": (ember.bitwise_xor, np.bitwise_xor, ["bool"] + INTS),
    "atan2": (ember.atan2, np.arctan2, NAMES),
    "div": (ember.div, np.true_divide, NAMES),
}


def expected_binary(name, npfn, a, b, compute):
    """numpy's answer computed in ember's compute dtype."""
    nt = NP_OF[str(compute).removeprefix("ember.")]
    if name in ("div", "atan2") and not np.issubdtype(nt, np.floating):
        nt = np.float32
    with np.errstate(all="ignore"):
        return npfn(in_dtype(a, nt), in_dtype(b, nt))


@pytest.mark.parametrize("name", list(ARITH))
@HYP
@given(data=st.data())
def test_binary_matches_numpy(name, data):
    fn, npfn, dtypes = ARITH[name]
    a, b, ta, tb = data.draw(broadcast_pair(dtypes))
    compute = ember.result_type(ta, tb)
    if name == "sub" and "bool" in (str(ta.dtype), str(tb.dtype)):
        return
    expected = expected_binary(name, npfn, a, b, compute)
    got = fn(ta, tb)
    check_close(got, expected.astype(np_dtype(got)))
    assert got.shape == tuple(np.broadcast_shapes(a.shape, b.shape))


DIVISION = {
    "floor_divide": (ember.floor_divide, np.floor_divide),
    "remainder": (ember.remainder, np.remainder),
    "fmod": (ember.fmod, np.fmod),
    "trunc": (lambda x, y: ember.div(x, y, rounding_mode="trunc"),
              lambda x, y: np.trunc(np.true_divide(x, y)) if x.dtype.kind == "f"
              else (np.sign(x) * np.sign(y) * (np.abs(x.astype(np.int64)) // np.abs(y.astype(np.int64)))).astype(x.dtype)),
    "floor": (lambda x, y: ember.div(x, y, rounding_mode="floor"), np.floor_divide),
}


@pytest.mark.parametrize("name", list(DIVISION))
@HYP
@given(data=st.data())
def test_integer_and_float_division_match_numpy(name, data):
    fn, npfn = DIVISION[name]
    a, b, ta, tb = data.draw(broadcast_pair(INTS + FLOATS, small=True))
    compute = NP_OF[str(ember.result_type(ta, tb)).removeprefix("ember.")]
    ca, cb = in_dtype(a, compute), in_dtype(b, compute)
    if compute().dtype.kind != "f":
        # torch's RuntimeError is tested apart; NumPy's min // -1 overflows
        cb = np.where(cb == 0, 1, cb).astype(compute)
        tb = ember.tensor(cb)
    with np.errstate(all="ignore"):
        expected = npfn(ca, cb)
    check_close(fn(ta, tb), expected)


@HYP
@given(data=st.data())
def test_pow_matches_numpy(data):
    a, b, ta, tb = data.draw(broadcast_pair(INTS + FLOATS, small=True))
    compute = NP_OF[str(ember.result_type(ta, tb)).removeprefix("ember.")]
    ca, cb = in_dtype(a, compute), in_dtype(b, compute)
    if compute().dtype.kind != "f":
        cb = np.abs(cb.astype(np.int64)).astype(compute) % 8
        tb = ember.tensor(cb)
    with np.errstate(all="ignore"):
        expected = np.power(ca, cb)
    got = np.asarray(ta ** tb)
    if compute().dtype.kind == "f":
        np.testing.assert_allclose(got, expected, rtol=1e-5, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)


@HYP
@given(data=st.data())
def test_shifts_match_numpy(data):
    a, b, ta, tb = data.draw(broadcast_pair(INTS))
    compute = NP_OF[str(ember.result_type(ta, tb)).removeprefix("ember.")]
    bits = 8 * np.dtype(compute).itemsize
    cb = (np.abs(in_dtype(b, np.int64)) % bits).astype(compute)
    ca = in_dtype(a, compute)
    tb = ember.tensor(cb)
    check_close(ta << tb, np.left_shift(ca, cb))
    check_close(ta >> tb, np.right_shift(ca, cb))


def test_shift_out_of_range_follows_torch(torch):
    # shifting by the width or more, or by a negative amount
    for dt in ["int8", "int16", "int32", "int64"]:
        a, b = [1, -5, 100], [70, -1, 3]
        ea, eb = (ember.tensor(v, dtype=DTYPES[dt][0]) for v in (a, b))
        ta, tb = (torch.tensor(v, dtype=getattr(torch, dt)) for v in (a, b))
        assert (ea << eb).tolist() == (ta << tb).tolist()
        assert (ea >> eb).tolist() == (ta >> tb).tolist()


# ---- scalars on either side ---------------------------------------------------------

SCALAR_OPS = [operator.add, operator.sub, operator.mul, operator.truediv,
              operator.eq, operator.lt, operator.ge]
NP_SCALAR_OPS = {operator.add: np.add, operator.sub: np.subtract, operator.mul: np.multiply,
                 operator.truediv: np.true_divide, operator.eq: np.equal,
                 operator.lt: np.less, operator.ge: np.greater_equal}


@HYP
@given(name=st.sampled_from(NAMES), op=st.sampled_from(SCALAR_OPS),
       scalar=st.one_of(st.booleans(), st.integers(-300, 300),
                        st.floats(-100, 100, allow_nan=False)),
       left=st.booleans(), data=st.data())
def test_scalar_either_side(name, op, scalar, left, data):
    shape = tuple(data.draw(st.lists(st.integers(0, 3), max_size=2)))
    a = data.draw(hnp.arrays(DTYPES[name][1], shape, elements=elements(name, small=True)))
    t = layout(a, data.draw(st.sampled_from(LAYOUTS)))
    compute = ember.result_type(t, scalar)
    if op is operator.sub and (name == "bool" or isinstance(scalar, bool)):
        with pytest.raises(RuntimeError, match="Subtraction"):
            op(scalar, t) if left else op(t, scalar)
        return
    got = op(scalar, t) if left else op(t, scalar)
    nt = NP_OF[str(compute).removeprefix("ember.")]
    if op is operator.truediv and not np.issubdtype(nt, np.floating):
        nt = np.float32
    # the number converted to the compute dtype (integers wrap, as in torch)
    sv = in_dtype(np.array(scalar, dtype=np.int64 if isinstance(scalar, int) else np.float64), nt)
    with np.errstate(all="ignore"):
        expected = NP_SCALAR_OPS[op](sv, in_dtype(a, nt)) if left else \
            NP_SCALAR_OPS[op](in_dtype(a, nt), sv)
    check_close(got, np.asarray(expected).astype(np_dtype(got)))


def test_scalar_does_not_change_dtype_or_wraps():
    u = ember.tensor([1, 2], dtype=ember.uint8)
    assert (u + 1000).dtype == ember.uint8
    assert (u + 1000).tolist() == [233, 234]
    assert (ember.tensor([1, 2], dtype=ember.int32) + 2.5).dtype == ember.float32
    assert (ember.tensor([1.0], dtype=ember.float32) * 2.5).dtype == ember.float32
    assert (ember.tensor([True]) + True).dtype == ember.bool
    assert (ember.tensor([True]) + 1).tolist() == [2]
    assert (ember.tensor([1], dtype=ember.int32) + ember.tensor(5)).dtype == ember.int32
    assert (ember.tensor([1], dtype=ember.int32) + ember.tensor(5.0)).dtype == ember.float32
    assert (2 - ember.tensor([1.0, 2.0])).tolist() == [1.0, 0.0]
    assert (2 / ember.tensor([1.0, 4.0])).tolist() == [2.0, 0.5]
    assert (2 ** ember.tensor([1, 3])).tolist() == [2, 8]
    assert (7 // ember.tensor([2, -2])).tolist() == [3, -4]
    assert (7 % ember.tensor([2, -2])).tolist() == [1, -1]


# ---- promotion parity with torch ---------------------------------------------------


def make_pair(mod, kind, name):
    """A tensor (with dims or 0-dim) or Python scalar of the given dtype."""
    dt = getattr(mod, name)
    if kind == "dim":
        return mod.ones(2, dtype=dt)
    if kind == "zero":
        return mod.ones((), dtype=dt)
    return {"bool": True, "int": 3, "float": 2.5}[kind]


KINDS = ["dim", "zero"]


@pytest.mark.parametrize("kind_b", KINDS + ["bool", "int", "float"])
@pytest.mark.parametrize("kind_a", KINDS)
def test_result_type_matches_torch_all_pairs(torch, kind_a, kind_b):
    for na in NAMES:
        for nb in (NAMES if kind_b in KINDS else [None]):
            ea = make_pair(ember, kind_a, na)
            ta = make_pair(torch, kind_a, na)
            eb = make_pair(ember, kind_b, nb) if nb else make_pair(ember, kind_b, "bool")
            tb = make_pair(torch, kind_b, nb) if nb else make_pair(torch, kind_b, "bool")
            want = str(torch.result_type(ta, tb)).removeprefix("torch.")
            assert str(ember.result_type(ea, eb)).removeprefix("ember.") == want
            assert str(ember.result_type(eb, ea)).removeprefix("ember.") == want
            ops = [operator.add, operator.mul, operator.truediv, operator.lt]
            # torch.maximum takes tensors only (ember's also takes numbers)
            for op in ops + ([ember.maximum] if kind_b in KINDS else []):
                top = torch.maximum if op is ember.maximum else op
                try:
                    expect = str(top(ta, tb).dtype)
                except (RuntimeError, TypeError) as e:
                    with pytest.raises(type(e)):
                        op(ea, eb)
                    continue
                assert str(op(ea, eb).dtype).removeprefix("ember.") == expect.removeprefix("torch.")


def test_promote_types_and_can_cast_match_torch(torch):
    for na in NAMES:
        for nb in NAMES:
            assert str(ember.promote_types(getattr(ember, na), getattr(ember, nb))) \
                .removeprefix("ember.") == str(torch.promote_types(
                    getattr(torch, na), getattr(torch, nb))).removeprefix("torch.")
            assert ember.can_cast(getattr(ember, na), getattr(ember, nb)) == \
                torch.can_cast(getattr(torch, na), getattr(torch, nb))


def test_default_dtype_governs_float_scalars_and_true_division():
    i = ember.tensor([1, 2])
    assert (i / i).dtype == ember.float32
    ember.set_default_dtype(ember.float64)
    try:
        assert (i / i).dtype == ember.float64
        assert (i * 0.5).dtype == ember.float64
        assert (ember.ones(2, dtype=ember.float32) * 0.5).dtype == ember.float32
    finally:
        ember.set_default_dtype(ember.float32)


# ---- unary, where, clamp ----------------------------------------------------------------

UNARY = {
    "neg": (ember.neg, np.negative, INTS + FLOATS),
    "abs": (ember.abs, np.abs, INTS + FLOATS),
    "sign": (ember.sign, np.sign, NAMES),
    "bitwise_not": (ember.bitwise_not, np.invert, ["bool"] + INTS),
    "logical_not": (ember.logical_not, np.logical_not, NAMES),
}


@pytest.mark.parametrize("name", list(UNARY))
@HYP
@given(data=st.data())
def test_unary_matches_numpy(name, data):
    fn, npfn, dtypes = UNARY[name]
    dt = data.draw(st.sampled_from(dtypes))
    shape = tuple(data.draw(st.lists(st.integers(0, 4), max_size=3)))
    a = data.draw(hnp.arrays(DTYPES[dt][1], shape, elements=elements(dt)))
    t = layout(a, data.draw(st.sampled_from(LAYOUTS)))
    with np.errstate(all="ignore"):
        expected = npfn(a) if not (name == "sign" and dt == "bool") else a
    check_close(fn(t), expected)
    if name in ("neg", "abs") or (name == "bitwise_not"):
        op = {"neg": operator.neg, "abs": operator.abs, "bitwise_not": operator.invert}[name]
        check_close(op(t), expected)


def test_sign_of_nan_and_zero_follow_torch():
    assert ember.sign(ember.tensor([float("nan"), -0.0, -3.0, 2.0])).tolist() == [0.0, 0.0, -1.0, 1.0]


@HYP
@given(data=st.data())
def test_where_matches_numpy(data):
    a, b, ta, tb = data.draw(broadcast_pair(NAMES))
    shape = np.broadcast_shapes(a.shape, b.shape)
    c = data.draw(hnp.arrays(np.bool_, shape))
    tc = layout(c, data.draw(st.sampled_from(LAYOUTS)))
    compute = NP_OF[str(ember.result_type(ta, tb)).removeprefix("ember.")]
    check_close(ember.where(tc, ta, tb), np.where(c, in_dtype(a, compute), in_dtype(b, compute)))
    check_close(ta.where(tc, tb) if ta.shape == tuple(shape) else ember.where(tc, ta, tb),
                np.where(c, in_dtype(a, compute), in_dtype(b, compute)))


@pytest.mark.parametrize("name", NAMES + ["float16", "bfloat16"])
def test_where_picks_the_same_bits_on_every_fast_path(name):
    """c/th/THPointwise.c:Note [Vectorised selects]: each pair of layouts of
    the two values (dense, a stride-0 scalar, strided) over an odd length
    that leaves a vector loop's remainder, bit for bit (NaN payloads, -0.0):
    the select copies one of its inputs' elements."""
    rng = np.random.default_rng(7)
    n = 37
    dtype = getattr(ember, name)
    specials = np.array([np.nan, -0.0, np.inf, -np.inf, 1.5, -2.25, 0.0, 3.0])

    def values(seed_shift):
        if name == "bool":
            return ember.tensor(rng.random(n) < 0.5)
        raw = np.concatenate([specials, rng.normal(size=n - len(specials)) * 40])
        raw = np.roll(raw, seed_shift)
        if name in INTS:
            raw = np.nan_to_num(raw, posinf=100, neginf=-100)
        return ember.tensor(raw).to(dtype)

    def bits(t):
        if name == "bfloat16":  # no NumPy dtype: widening to float32 keeps every bit
            t = t.float()
        array = t.numpy()
        return array.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[array.itemsize])

    condition = ember.tensor(rng.random(n) < 0.5)
    x, y = values(0), values(3)
    layouts = {"dense": lambda t: t, "scalar": lambda t: t[5:6].expand(n),
               "strided": lambda t: ember.cat([t, t]).view(2, n).t()[:, 1]}
    picks = condition.numpy()
    for x_layout, make_x in layouts.items():
        for y_layout, make_y in layouts.items():
            xs, ys = make_x(x), make_y(y)
            got = ember.where(condition, xs, ys)
            expected = np.where(picks, bits(xs.contiguous()), bits(ys.contiguous()))
            assert (bits(got) == expected).all(), (x_layout, y_layout)


TERNARY = {"clamp": (lambda a, b, c, **kw: ember.clamp(a, b, c, **kw), NAMES[1:]),
           "lerp": (ember.lerp, FLOATS),
           "addcmul": (lambda a, b, c, **kw: ember.addcmul(a, b, c, value=3, **kw), NAMES[1:]),
           "addcdiv": (lambda a, b, c, **kw: ember.addcdiv(a, b, c, value=3, **kw), FLOATS)}


@pytest.mark.parametrize("op", list(TERNARY))
def test_ternary_fast_paths_give_the_general_loops_bits(op):
    """c/th/THPointwise.c's ternary fast paths (a dense first input, each of
    the other two dense or a stride-0 scalar) over an odd length: bit for
    bit the general strided loop's result (a strided first input), with
    NaN, -0.0, infinities and zero divisors among the values."""
    fn, names = TERNARY[op]
    rng = np.random.default_rng(13)
    n = 37
    specials = np.array([np.nan, -0.0, np.inf, -np.inf, 1.5, -2.25, 0.0, 3.0, 0.5])
    layouts = {"dense": lambda t: t, "scalar": lambda t: t[5:6].expand(n),
               "strided": lambda t: ember.cat([t, t]).view(2, n).t()[:, 1]}
    for name in names:
        raw = [np.roll(np.concatenate([specials, rng.normal(size=n - len(specials)) * 40]), s)
               for s in (0, 3, 7)]
        if name in INTS:
            raw = [np.nan_to_num(r, posinf=100, neginf=-100) for r in raw]
        x, y, z = (ember.tensor(r).to(DTYPES[name][0]) for r in raw)
        for y_layout, make_y in layouts.items():
            for z_layout, make_z in layouts.items():
                general = fn(layouts["strided"](x), make_y(y), make_z(z))
                fast = fn(x, make_y(y), make_z(z))
                assert (fast.numpy().view(np.uint8) == general.numpy().view(np.uint8)).all(), \
                    (name, y_layout, z_layout)


@pytest.mark.parametrize("op", list(TERNARY) + ["where"])
def test_ternary_out_may_be_an_input(op):
    """out= the tensor of one of the operands: each element is read before
    its result is stored, so the result is the one into a fresh tensor."""
    fn = TERNARY[op][0] if op != "where" else (lambda a, b, c, **k: ember.where(a > 0, b, c, **k))
    rng = np.random.default_rng(5)
    for k in range(3):
        args = [ember.tensor(rng.normal(size=37).astype(np.float32)) for _ in range(3)]
        want = fn(*[a.clone() for a in args]).numpy()
        got = fn(*args, out=args[k])
        assert got is args[k]
        np.testing.assert_array_equal(got.numpy(), want)


def test_where_with_scalars_and_bad_condition(torch):
    c = ember.tensor([True, False])
    assert ember.where(c, 1, 2).dtype == ember.int64
    assert ember.where(c, 1.0, 2).dtype == ember.float32
    assert ember.where(c, ember.tensor([1, 2], dtype=ember.int32), 2.5).tolist() == [1.0, 2.5]
    with pytest.raises(RuntimeError) as ours:
        ember.where(ember.tensor([1.0]), 1, 2)
    with pytest.raises(RuntimeError) as theirs:
        torch.where(torch.tensor([1.0]), 1, 2)
    assert str(ours.value) == str(theirs.value)


def test_where_of_a_condition_alone_is_nonzero_as_tuple():
    c = np.array([[0, 3, 0], [1, 0, -2]])
    positions = ember.where(ember.tensor(c))
    assert isinstance(positions, tuple) and len(positions) == 2
    for got, expected in zip(positions, np.nonzero(c)):
        assert got.dtype == ember.int64 and got.tolist() == expected.tolist()
    assert [p.tolist() for p in ember.where(condition=ember.tensor(True))] == [[0]]
    with pytest.raises(TypeError, match=r"^where\(\): argument 'condition' \(position 1\) "
                                        "must be Tensor, not int$"):  # PyTorch's
        ember.where(3)


@HYP
@given(data=st.data(), lo=st.integers(-50, 50), hi=st.integers(-50, 50))
def test_clamp_matches_numpy(data, lo, hi):
    dt = data.draw(st.sampled_from(INTS[1:] + FLOATS))
    shape = tuple(data.draw(st.lists(st.integers(0, 4), max_size=3)))
    a = data.draw(hnp.arrays(DTYPES[dt][1], shape, elements=elements(dt, small=True)))
    t = layout(a, data.draw(st.sampled_from(LAYOUTS)))
    check_close(ember.clamp(t, lo, hi), np.minimum(np.maximum(a, lo), hi).astype(a.dtype))
    check_close(ember.clip(t, min=lo), np.maximum(a, lo).astype(a.dtype))
    check_close(t.clamp(max=hi), np.minimum(a, hi).astype(a.dtype))
    tlo = ember.tensor(np.full(shape[-1:] or (), lo, dtype=a.dtype))
    check_close(ember.clamp(t, tlo, hi), np.minimum(np.maximum(a, lo), hi).astype(a.dtype))


def test_clamp_promotes_and_propagates_nan(torch):
    i = ember.tensor([1, 2, 3])
    assert ember.clamp(i, min=1.5).tolist() == [1.5, 2.0, 3.0]
    x = ember.tensor([float("nan"), 0.0, 5.0])
    got = ember.clamp(x, 1.0, 2.0).tolist()
    assert np.isnan(got[0]) and got[1:] == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max'"):
        ember.clamp(i)
    # uint8 values and an int8 0-dim bound: computed in the common type
    u = ember.tensor([0, 5], dtype=ember.uint8)
    lo = ember.tensor(-1, dtype=ember.int8)
    assert ember.clamp(u, lo, 3.0).tolist() == \
        torch.clamp(torch.tensor([0, 5], dtype=torch.uint8), torch.tensor(-1, dtype=torch.int8), 3.0).tolist()


# ---- alpha, rounding modes ------------------------------------------------------------------


def test_alpha_and_rounding_mode():
    a = ember.tensor([1.0, 2.0])
    assert ember.add(a, a, alpha=2).tolist() == [3.0, 6.0]
    assert a.sub(a, alpha=0.5).tolist() == [0.5, 1.0]
    i = ember.tensor([7, -7])
    assert ember.div(i, 2, rounding_mode="trunc").tolist() == [3, -3]
    assert ember.div(i, 2, rounding_mode="floor").tolist() == [3, -4]
    assert ember.div(i, 2).tolist() == [3.5, -3.5]
    assert ember.true_divide(i, 2).tolist() == [3.5, -3.5]
    assert i.divide(2, rounding_mode=None).tolist() == [3.5, -3.5]


# ---- error messages (torch parity) --------------------------------------------------------------

ERROR_CASES = [
    lambda m: m.tensor([True]) - m.tensor([True]),
    lambda m: m.tensor([True]) - 1,
    lambda m: 1 - m.tensor([True]),
    lambda m: -m.tensor([True]),
    lambda m: +m.tensor([True]),
    lambda m: m.ones(3) + m.ones(4),
    lambda m: m.ones(2, 3) * m.ones(4, 1, 2),
    lambda m: m.tensor([1, 2]) // 0,
    lambda m: m.tensor([1, 2]) % m.tensor([1, 0]),
    lambda m: m.fmod(m.tensor([1, 2]), 0),
    lambda m: m.div(m.tensor([1, 2]), 0, rounding_mode="trunc"),
    lambda m: m.div(m.tensor([1, 2]), 2, rounding_mode="round"),
    lambda m: m.tensor([1, 2]) ** -1,
    lambda m: m.add(m.tensor([1]), 1, alpha=0.5),
    lambda m: m.add(m.tensor([1]), 1, alpha=True),
    lambda m: m.ones(2) & m.ones(2),
    lambda m: m.tensor([True]) // m.tensor([True]),
    lambda m: m.remainder(m.tensor([True]), m.tensor([True])),
    lambda m: m.abs(m.tensor([True])),
    lambda m: ~m.ones(2),
    lambda m: m.ones(2) << 1,
    lambda m: m.tensor([1]).add_(1.5),
    lambda m: m.tensor([1]).div_(2),
    lambda m: m.ones(3).add_(m.ones(2, 3)),
    lambda m: m.add(m.ones(2), m.ones(2), out=m.zeros(2, dtype=m.int64)),
    lambda m: m.ones(2) + "a",
    lambda m: m.ones(2) + None,
    lambda m: m.ones(2, dtype=m.uint8).__iadd__(m.ones(2, dtype=m.float32)),
]


@pytest.mark.parametrize("case", range(len(ERROR_CASES)))
def test_errors_match_torch(torch, case):
    fn = ERROR_CASES[case]
    with pytest.raises(Exception) as theirs:
        fn(torch)
    with pytest.raises(Exception) as ours:
        fn(ember)
    assert isinstance(ours.value, RuntimeError) == isinstance(theirs.value, RuntimeError)
    assert isinstance(ours.value, TypeError) == isinstance(theirs.value, TypeError)
    assert str(ours.value) == str(theirs.value)


def test_integer_division_by_zero_raises_and_float_does_not():
    i = ember.tensor([4, 5])
    for fn in (lambda: i // 0, lambda: i % ember.tensor([0, 1]), lambda: ember.fmod(i, 0),
               lambda: ember.div(i, ember.tensor([1, 0]), rounding_mode="floor"),
               lambda: i.floor_divide_(0)):
        with pytest.raises(RuntimeError, match="^ZeroDivisionError$"):
            fn()
    assert i.tolist() == [4, 5] and i._version == 0
    assert (i / 0).tolist() == [float("inf")] * 2
    assert np.isnan((ember.tensor([1.0]) % 0.0).tolist()[0])


# ---- out= ---------------------------------------------------------------------------------------


def test_out_writes_and_returns_out():
    a = ember.tensor([1.0, 2.0])
    out = ember.zeros(2)
    v = out._version
    r = ember.add(a, a, out=out)
    assert r is out and out.tolist() == [2.0, 4.0] and out._version == v + 1
    # a castable result into another dtype
    o64 = ember.zeros(2, dtype=ember.float64)
    assert ember.mul(ember.tensor([1, 2]), 3, out=o64).tolist() == [3.0, 6.0]
    ob = ember.zeros(2)
    assert ember.lt(a, 2, out=ob).tolist() == [1.0, 0.0]
    # out aliasing an input
    assert ember.add(a, 1, out=a) is a and a.tolist() == [2.0, 3.0]
    # non-contiguous out
    big = ember.zeros(4)
    ember.add(a, a, out=big[::2])
    assert big.tolist() == [4.0, 0.0, 6.0, 0.0]


@pytest.mark.parametrize("case", [
    lambda o: ember.add(ember.ones(2, 3), 1, out=o),                   # wrong shape
    lambda o: ember.div(ember.tensor([[1, 2, 3]]), 2, out=o),           # float into int
    lambda o: ember.add(ember.ones(3), 1, out=o.expand(2, 3)[0:1]),     # shape again
    lambda o: ember.neg(ember.ones(3), out=o[0:2]),
])
def test_out_errors_leave_out_unchanged(case):
    o = ember.tensor([[7, 8, 9]])
    with pytest.raises(RuntimeError):
        case(o)
    assert o.tolist() == [[7, 8, 9]] and o._version == 0


def test_out_error_messages():
    with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match the broadcast shape \[2, 3\]"):
        ember.add(ember.ones(2, 3), 1, out=ember.zeros(3))
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        ember.add(ember.ones(3), 1, out=ember.zeros(3, dtype=ember.int64))
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        ember.add(ember.ones(3), 1, out=ember.zeros(1).expand(3))
    with pytest.raises(TypeError, match="argument 'out' must be Tensor"):
        ember.add(ember.ones(3), 1, out=[1, 2, 3])


# ---- in-place -----------------------------------------------------------------------------------

INPLACE = [
    ("add_", operator.iadd, np.add), ("sub_", operator.isub, np.subtract),
    ("mul_", operator.imul, np.multiply), ("div_", operator.itruediv, np.true_divide),
    ("floor_divide_", operator.ifloordiv, np.floor_divide),
    ("remainder_", operator.imod, np.remainder), ("pow_", operator.ipow, np.power),
]


@pytest.mark.parametrize("name,iop,npfn", INPLACE)
def test_inplace_method_and_operator(name, iop, npfn):
    for use_operator in (False, True):
        base = np.array([[1.5, 2.0, -3.0], [4.0, 5.0, 6.5]], dtype=np.float32)
        other = np.array([2.0, -1.5, 0.5], dtype=np.float32)
        t = ember.tensor(base)
        view = t[1]
        v = t._version
        if use_operator:
            r = t
            r = iop(r, ember.tensor(other))
        else:
            r = getattr(t, name)(ember.tensor(other))
        assert r is t
        assert t._version == v + 1 and view._version == v + 1
        with np.errstate(all="ignore"):
            check_close(t, npfn(base, other))


def test_inplace_bitwise_logical_and_unary():
    i = ember.tensor([6, 3])
    i &= 3
    i |= 8
    i ^= 1
    i <<= 1
    i >>= 2
    assert i.tolist() == [(((6 & 3) | 8) ^ 1) << 1 >> 2, (((3 & 3) | 8) ^ 1) << 1 >> 2]
    b = ember.tensor([True, False])
    b.logical_xor_(ember.tensor([True, True]))
    assert b.tolist() == [False, True]
    x = ember.tensor([-1.5, 2.0])
    assert x.neg_() is x and x.tolist() == [1.5, -2.0]
    x.abs_()
    assert x.tolist() == [1.5, 2.0]
    x.sign_()
    assert x.tolist() == [1.0, 1.0]
    x.clamp_(min=2.0)
    assert x.tolist() == [2.0, 2.0]
    x.clip_(max=0.5)
    assert x.tolist() == [0.5, 0.5]
    assert x._version == 5
    f = ember.tensor([1.0, 3.0])
    f.lt_(2)
    assert f.tolist() == [1.0, 0.0] and f.dtype == ember.float32


def test_inplace_errors_change_nothing():
    i = ember.tensor([1, 2, 3])
    for fn in (lambda: i.add_(1.5), lambda: i.__itruediv__(2),
               lambda: i.add_(ember.ones(2, 3, dtype=ember.int64)),
               lambda: i.mul_(ember.ones(2))):
        with pytest.raises(RuntimeError):
            fn()
    assert i.tolist() == [1, 2, 3] and i._version == 0
    with pytest.raises(RuntimeError, match="more than one element"):
        ember.zeros(1).expand(3).add_(1)


def test_inplace_with_a_higher_precision_operand_casts_back():
    f = ember.tensor([1.0, 2.0], dtype=ember.float32)
    f += ember.tensor([0.5, 0.25], dtype=ember.float64)
    assert f.dtype == ember.float32 and f.tolist() == [1.5, 2.25]
    assert f._version == 1


def test_inplace_with_partially_overlapping_input_reads_first():
    t = ember.tensor([1.0, 2.0, 3.0, 4.0])
    t[1:].add_(t[:3])
    assert t.tolist() == [1.0, 3.0, 5.0, 7.0]
    u = ember.tensor([[1, 2], [3, 4]])
    u.add_(u.t())
    assert u.tolist() == [[2, 5], [5, 8]]
    a = ember.tensor([1.0, 2.0])
    a.add_(a)
    assert a.tolist() == [2.0, 4.0]


# ---- the Python protocols -------------------------------------------------------------------------


def test_hash_and_membership_are_by_identity():
    t = ember.ones(3)
    assert hash(t) == hash(t)
    assert t in [t]
    assert t in {t: 1}
    assert (t == None) is False  # noqa: E711
    assert (t != None) is True  # noqa: E711
    with pytest.raises(RuntimeError, match="ambiguous"):
        t in [ember.ones(3)]


def test_operators_return_not_implemented_for_other_types():
    t = ember.ones(2)
    assert t.__add__("a") is NotImplemented
    assert t.__radd__([1]) is NotImplemented
    assert t.__lt__(object()) is NotImplemented
    with pytest.raises(TypeError):
        pow(t, 2, 3)


def test_positive_returns_self_and_numpy_scalars_are_numbers():
    t = ember.tensor([1, 2])
    assert (+t) is t and ember.positive(t) is t
    assert (t + np.int64(2)).dtype == ember.int64
    assert (t * np.float32(0.5)).dtype == ember.float32
    assert (ember.tensor([True]) + np.bool_(True)).dtype == ember.bool


def test_rich_comparisons_and_reflected_forms():
    t = ember.tensor([1, 2, 3])
    assert (t == 2).tolist() == [False, True, False]
    assert (2 < t).tolist() == [False, False, True]
    assert (t >= t).tolist() == [True] * 3
    assert (3 - t).tolist() == [2, 1, 0]
    assert (12 / t).tolist() == [12.0, 6.0, 4.0]
    assert (2 ** t).tolist() == [2, 4, 8]
    assert (1 << t).tolist() == [2, 4, 8]
    assert (True & ember.tensor([True, False])).tolist() == [True, False]


def test_empty_and_zero_dim():
    e = ember.ones(0, 3)
    assert (e + 1).shape == (0, 3)
    assert (e + ember.ones(3)).shape == (0, 3)
    z = ember.tensor(2.0) * ember.tensor(3.0)
    assert z.shape == () and z.item() == 6.0


@pytest.mark.noleakcheck
def test_large_parallel_matches_serial():
    n = 200_000
    a = np.arange(n, dtype=np.float32)
    ta = ember.tensor(a)
    check_close(ta * 2 + ta, a * 2 + a)
    check_close(ta.t() if ta.dim() > 1 else ta[::2] - 1, a[::2] - 1)
    m = ember.tensor(a.reshape(400, 500))
    check_close(m.t() + m.t(), (a.reshape(400, 500).T * 2))
    check_close(m + ember.tensor(a[:500]), a.reshape(400, 500) + a[:500])
