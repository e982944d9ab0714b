"""Tests for python/ember/_tensor_str.py (tensor repr formatting).

The module is loaded straight from its file so these tests run even when the
``ember`` package itself cannot be imported (e.g. the C core is not built).
PyTorch, when installed, is the oracle: ``tensor_repr(arr, ...)`` must equal
``repr(torch.from_numpy(arr))`` with ``torch.`` replaced by ``ember.``.
"""

from __future__ import annotations

import importlib.util
import math
import pathlib
import sys

import numpy as np
import pytest

_MODULE_PATH = (
    pathlib.Path(__file__).resolve().parents[1] / "python" / "ember" / "_tensor_str.py"
)


def _load_module():
    name = "_ember_tensor_str_under_test"
    spec = importlib.util.spec_from_file_location(name, _MODULE_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


ts = _load_module()


@pytest.fixture(autouse=True)
def _default_print_options():
    """Every test starts and ends with default options (ours and torch's)."""
    ts.set_printoptions(profile="default")
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_printoptions(profile="default")
        torch.set_default_dtype(torch.float32)
    yield
    ts.set_printoptions(profile="default")
    if torch is not None:
        torch.set_printoptions(profile="default")
        torch.set_default_dtype(torch.float32)


def _ours(arr, **kwargs):
    return ts.tensor_repr(arr, arr.dtype.name, **kwargs)


# ---------------------------------------------------------------------------
# Golden strings (no torch needed)
# ---------------------------------------------------------------------------

GOLDEN = [
    (np.array([1.0, 2.0], np.float32), "tensor([1., 2.])"),
    (np.array([1.23456789], np.float32), "tensor([1.2346])"),
    (np.array([1e10, 1.0], np.float32), "tensor([1.0000e+10, 1.0000e+00])"),
    (np.array(3.0, np.float32), "tensor(3.)"),
    (np.array(7, np.int64), "tensor(7)"),
    (np.array([1, 2], np.int32), "tensor([1, 2], dtype=ember.int32)"),
    (np.array([1, -20, 300], np.int64), "tensor([  1, -20, 300])"),
    (np.array([True, False]), "tensor([ True, False])"),
    (np.array([np.nan, np.inf, -np.inf, 1.0], np.float32), "tensor([nan, inf, -inf, 1.])"),
    (np.array([-0.0, 0.0], np.float32), "tensor([-0., 0.])"),
    (np.array([1.5, 2.0], np.float64), "tensor([1.5000, 2.0000], dtype=ember.float64)"),
    (np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), "tensor([[1., 2.],\n        [3., 4.]])"),
    (
        np.arange(8).reshape(2, 2, 2),
        "tensor([[[0, 1],\n         [2, 3]],\n\n        [[4, 5],\n         [6, 7]]])",
    ),
    (np.zeros((0,), np.float32), "tensor([])"),
    (np.zeros((0,), np.int64), "tensor([], dtype=ember.int64)"),
    (np.zeros((0, 3), np.float32), "tensor([], size=(0, 3))"),
    (np.zeros((2, 0), np.bool_), "tensor([], size=(2, 0), dtype=ember.bool)"),
    (np.arange(1001), "tensor([   0,    1,    2,  ...,  998,  999, 1000])"),
]


@pytest.mark.parametrize("arr,expected", GOLDEN, ids=[repr(e) for _, e in GOLDEN])
def test_golden(arr, expected):
    assert _ours(arr) == expected


def test_golden_grad_suffixes():
    arr = np.array([1.0, 2.0], np.float32)
    assert _ours(arr, requires_grad=True) == "tensor([1., 2.], requires_grad=True)"
    assert (
        _ours(arr, requires_grad=True, grad_fn_name="MulBackward0")
        == "tensor([1., 2.], grad_fn=<MulBackward0>)"
    )


def test_golden_default_float_and_dtype_spellings():
    f64 = np.array([1.5], np.float64)
    f32 = np.array([1.5], np.float32)
    assert ts.tensor_repr(f64, "float64", default_float="float64") == "tensor([1.5000])"
    assert (
        ts.tensor_repr(f32, "float32", default_float="float64")
        == "tensor([1.5000], dtype=ember.float32)"
    )
    for spelling in ("float64", "ember.float64", np.dtype("float64")):
        assert ts.tensor_repr(f64, spelling) == "tensor([1.5000], dtype=ember.float64)"


def test_golden_long_row_wraps():
    text = _ours(np.arange(40, dtype=np.float32) + 0.5)
    lines = text.split("\n")
    assert len(lines) > 1
    assert all(len(line) <= 80 for line in lines)
    assert all(line.startswith(" " * 8) for line in lines[1:])


def test_printoptions_state_roundtrip():
    ts.set_printoptions(precision=2, threshold=5, edgeitems=1, linewidth=40, sci_mode=True)
    assert ts.get_printoptions() == {
        "precision": 2,
        "threshold": 5,
        "edgeitems": 1,
        "linewidth": 40,
        "sci_mode": True,
    }
    ts.set_printoptions(precision=3)  # sci_mode resets to None, like torch
    assert ts.get_printoptions()["sci_mode"] is None
    assert ts.get_printoptions()["threshold"] == 5
    with ts.printoptions(precision=6, sci_mode=False):
        assert ts.get_printoptions()["precision"] == 6
    assert ts.get_printoptions()["precision"] == 3
    ts.set_printoptions(profile="full")
    assert ts.get_printoptions()["threshold"] == math.inf
    ts.set_printoptions(profile="default")
    assert _ours(np.arange(10)) == "tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])"
    ts.set_printoptions(threshold=5)
    assert _ours(np.arange(10)) == "tensor([0, 1, 2,  ..., 7, 8, 9])"


# ---------------------------------------------------------------------------
# Parity with PyTorch
# ---------------------------------------------------------------------------


def _torch():
    return pytest.importorskip("torch")


def _reference(arr):
    torch = _torch()
    return repr(torch.from_numpy(np.array(arr, copy=True))).replace("torch.", "ember.")


def _check(arr, **kwargs):
    assert _ours(arr, **kwargs) == _reference(arr)


def _f(values, dtype=np.float32):
    with np.errstate(all="ignore"):
        return np.array(values, dtype=dtype)


_rng = np.random.default_rng(1234)
_nan, _inf = float("nan"), float("inf")

PARITY_CASES = {
    # integral-valued floats / precision / scientific notation
    "int_floats": _f([1, 2, 3]),
    "int_floats_neg": _f([-1, 20, -300]),
    "precision4": _f([1.23456789, -2.5, 0.1]),
    "round_up_width": _f([9.99996, 1.0]),
    "sci_big": _f([1e10, 1.0]),
    "sci_small": _f([1e-5, 1.0]),
    "sci_ratio": _f([0.5, 600.0]),
    "no_sci_ratio_1000": _f([1.0, 1000.0]),
    "sci_ratio_above_1000": _f([1.0, 1000.5]),
    "sci_1e8": _f([1e8]),
    "sci_above_1e8": _f([1.5e8]),
    "threshold_1e-4_f32": _f([1e-4]),
    "threshold_1e-4_f64": _f([1e-4], np.float64),
    "sci_int_mode": _f([1e9, -3.0, 7.0]),
    "huge_tiny_mix": _f([1e-30, 1e30, -1.0, 0.0], np.float64),
    "f64_extremes": _f([1.7e308, 5e-324, -2.2e-308], np.float64),
    "f32_extremes": _f([3.4e38, 1.4e-45, -1.2e-38]),
    "f16": _f([0.1, 65504.0, -3.0], np.float16),
    "f16_int": _f([1.0, 2.0, -3.0], np.float16),
    # nan / inf / negative zero
    "nan_only": _f([_nan]),
    "inf_only": _f([_inf, -_inf]),
    "nan_inf_ints": _f([_nan, _inf, -_inf, 1.0, 20.0]),
    "nan_inf_frac": _f([_nan, _inf, -_inf, 1.5]),
    "nan_inf_sci": _f([_nan, _inf, 1e-7, 3e5]),
    "neg_zero": _f([-0.0]),
    "neg_zero_mix": _f([-0.0, 0.0, 1.0]),
    "neg_zero_frac": _f([-0.0, 0.25]),
    "all_zero": _f(np.zeros((2, 3))),
    "zero_scalar": _f(0.0),
    "neg_zero_scalar": _f(-0.0),
    # 0-d
    "scalar_f32": _f(3.0),
    "scalar_frac": _f(3.14159),
    "scalar_sci": _f(1.5e-9),
    "scalar_nan": _f(_nan),
    "scalar_neg_inf": _f(-_inf, np.float64),
    "scalar_f64": _f(2.5, np.float64),
    "scalar_i64": np.array(5, np.int64),
    "scalar_i8": np.array(-5, np.int8),
    "scalar_u8": np.array(255, np.uint8),
    "scalar_bool": np.array(True),
    # integers / bool
    "i64_aligned": np.array([1, -22, 333, -4444], np.int64),
    "i32": np.array([1, 2, 3], np.int32),
    "i16": np.array([-32768, 32767], np.int16),
    "i8": np.array([-128, 0, 127], np.int8),
    "u8": np.array([0, 7, 255], np.uint8),
    "i64_extremes": np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max]),
    "i64_matrix": np.array([[1, 200], [-30, 4]], np.int64),
    "bool_vec": np.array([True, False, True]),
    "bool_all_true": np.array([True, True]),
    "bool_matrix": np.array([[True, False], [False, False]]),
    # nesting
    "matrix": _f([[1.5, 2.0], [3.0, 4.25]]),
    "matrix_i32": np.arange(6, dtype=np.int32).reshape(2, 3),
    "cube": _f(np.arange(24).reshape(2, 3, 4) / 3),
    "hyper4": np.arange(36, dtype=np.int16).reshape(3, 2, 3, 2),
    "hyper5": _f(np.arange(32).reshape(2, 2, 2, 2, 2)),
    "singletons": _f([[[5.0]]]),
    "column": _f([[1.0], [2.0], [3.0]]),
    # line wrapping
    "wrap_f32": _f(np.linspace(-5, 5, 50)),
    "wrap_i64": np.arange(100, dtype=np.int64),
    "wrap_sci": _f(np.logspace(-8, 8, 40)),
    "wrap_bool": np.arange(60) % 3 == 0,
    "wrap_in_matrix": _f(np.arange(60).reshape(2, 30) * 1.25),
    "wrap_in_cube": np.arange(120, dtype=np.int32).reshape(2, 2, 30),
    "wrap_nan": _f([_nan] * 40),
    # summarisation
    "sum_1d_1001": np.arange(1001, dtype=np.int64),
    "sum_1d_1000_no": np.arange(1000, dtype=np.int64),
    "sum_1d_float": _f(np.arange(2000) / 7),
    "sum_2d": _f(np.arange(1200).reshape(40, 30) * 0.5),
    "sum_2d_narrow": np.arange(2002, dtype=np.int32).reshape(1001, 2),
    "sum_2d_wide": _f(np.arange(2002).reshape(2, 1001)),
    "sum_3d": _f(np.arange(1320).reshape(11, 10, 12) - 600),
    "sum_4d": np.arange(1296, dtype=np.int64).reshape(6, 6, 6, 6),
    "sum_4d_big": _f(np.arange(2 * 7 * 8 * 9).reshape(2, 7, 8, 9) / 3),
    "sum_width_from_edges": np.concatenate([[1], np.full(2000, 123456789), [2]]),
    "sum_sci_hidden": _f(np.concatenate([[1.0], np.full(2000, 1e12), [2.0]])),
    "sum_random": _f(_rng.standard_normal((13, 100))),
    "sum_bool": (np.arange(3000) % 2 == 0).reshape(30, 100),
    # empty tensors
    "empty_f32": _f([]),
    "empty_f64": np.zeros(0, np.float64),
    "empty_i64": np.zeros(0, np.int64),
    "empty_i32": np.zeros(0, np.int32),
    "empty_bool": np.zeros(0, np.bool_),
    "empty_0x3": np.zeros((0, 3), np.float32),
    "empty_3x0_i64": np.zeros((3, 0), np.int64),
    "empty_2x0x4_u8": np.zeros((2, 0, 4), np.uint8),
    "empty_0x0_f64": np.zeros((0, 0), np.float64),
    # dtype suffix rules
    "suffix_f64": _f([1.0, 2.0], np.float64),
    "suffix_f16": _f([1.0, 2.0], np.float16),
    "suffix_i8_matrix": np.arange(4, dtype=np.int8).reshape(2, 2),
    "suffix_wraps": _f(np.arange(18).reshape(2, 9) + 1e5 + 0.5, np.float64),
    # complex (not required, but supported)
    "complex64": np.array([1 + 2j, -3.5 - 0.5j], np.complex64),
    "complex128": np.array([[1j, 2], [3, -4j]], np.complex128),
    "complex_scalar": np.array(1 - 1j, np.complex64),
}


@pytest.mark.parametrize("name", list(PARITY_CASES))
def test_parity_cases(name):
    _check(PARITY_CASES[name])


@pytest.mark.parametrize(
    "arr",
    [
        _f([1.0, 2.0]),
        _f(3.5),
        _f(np.arange(12).reshape(3, 4) / 3),
        _f(np.arange(76) * 1.5),  # long last line pushes the suffix down
        _f(np.arange(70) + 0.5, np.float64),  # dtype + grad_fn suffixes
        _f(np.arange(2000) / 3),
    ],
)
def test_parity_autograd_suffixes(arr):
    torch = _torch()
    leaf = torch.from_numpy(arr.copy()).requires_grad_()
    want = repr(leaf).replace("torch.", "ember.")
    assert _ours(arr, requires_grad=True) == want

    product = leaf * 2
    want = repr(product).replace("torch.", "ember.")
    got = _ours(
        product.detach().numpy(),
        requires_grad=True,
        grad_fn_name=type(product.grad_fn).__name__,
    )
    assert got == want


@pytest.mark.parametrize("arr_name", ["suffix_f64", "precision4", "empty_f32", "empty_f64",
                                      "complex64", "complex128", "scalar_f64", "i32"])
def test_parity_default_float64(arr_name):
    torch = _torch()
    arr = PARITY_CASES[arr_name]
    torch.set_default_dtype(torch.float64)
    try:
        want = _reference(arr)
    finally:
        torch.set_default_dtype(torch.float32)
    assert _ours(arr, default_float="float64") == want


_OPTION_SETS = [
    dict(precision=2),
    dict(precision=0),
    dict(precision=8),
    dict(sci_mode=True),
    dict(sci_mode=False),
    dict(threshold=5),
    dict(threshold=5, edgeitems=1),
    dict(threshold=0),
    dict(edgeitems=0),
    dict(threshold=10, edgeitems=0),
    dict(linewidth=30),
    dict(linewidth=200),
    dict(linewidth=5),
    dict(profile="short"),
    dict(profile="full"),
    dict(profile="short", precision=6, sci_mode=True),
]

_OPTION_ARRAYS = [
    "precision4", "sci_big", "sci_small", "int_floats", "nan_inf_frac", "all_zero",
    "scalar_frac", "i64_aligned", "bool_vec", "cube", "wrap_f32", "wrap_i64",
    "sum_1d_float", "sum_2d", "sum_3d", "empty_0x3", "complex64", "matrix",
]


@pytest.mark.parametrize("options", _OPTION_SETS, ids=[repr(o) for o in _OPTION_SETS])
def test_parity_set_printoptions(options):
    torch = _torch()
    torch.set_printoptions(**options)
    ts.set_printoptions(**options)
    assert ts.get_printoptions() == dict(torch._tensor_str.get_printoptions())
    for name in _OPTION_ARRAYS:
        arr = PARITY_CASES[name]
        assert _ours(arr) == _reference(arr), name
    # a tensor that would use grad suffixes under a narrow line width
    arr = PARITY_CASES["wrap_in_matrix"]
    leaf = torch.from_numpy(arr.copy()).requires_grad_()
    assert _ours(arr, requires_grad=True) == repr(leaf).replace("torch.", "ember.")


def test_parity_printoptions_context_manager():
    torch = _torch()
    arr = PARITY_CASES["precision4"]
    with ts.printoptions(precision=1), torch._tensor_str.printoptions(precision=1):
        assert _ours(arr) == _reference(arr)
    assert _ours(arr) == _reference(arr)


# ---------------------------------------------------------------------------
# Property-based parity
# ---------------------------------------------------------------------------

try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp
except ImportError:  # pragma: no cover - hypothesis is optional
    st = None

if st is None:

    def test_parity_hypothesis():
        pytest.skip("hypothesis not installed")

else:

    _DTYPES = [
        np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64,
        np.float16, np.float32, np.float64,
    ]

    _SPECIALS = [0.0, -0.0, _nan, _inf, -_inf, 1e-30, 1e30, 1e-5, 1e9, 0.5, 1.0, -7.0]

    def _as_dtype(value, dtype):
        with np.errstate(all="ignore"):
            return float(np.array(value, dtype=dtype))

    def _element_strategy(dtype):
        dtype = np.dtype(dtype)
        if dtype.kind == "f":
            width = dtype.itemsize * 8
            return st.one_of(
                st.floats(width=width, allow_nan=True, allow_infinity=True),
                st.integers(-1000, 1000).map(float),
                st.sampled_from(_SPECIALS).map(lambda v: _as_dtype(v, dtype)),
            )
        return hnp.from_dtype(dtype)

    @st.composite
    def _small_arrays(draw):
        dtype = draw(st.sampled_from(_DTYPES))
        shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=6))
        return draw(hnp.arrays(dtype, shape, elements=_element_strategy(dtype)))

    _BIG_SHAPES = [(1001,), (3000,), (40, 30), (1001, 1), (2, 600), (11, 10, 11),
                   (3, 4, 5, 20), (7, 7, 7, 7)]

    @st.composite
    def _big_arrays(draw):
        dtype = np.dtype(draw(st.sampled_from(_DTYPES)))
        shape = draw(st.sampled_from(_BIG_SHAPES))
        seed = draw(st.integers(0, 2**32 - 1))
        regime = draw(st.sampled_from(["ints", "normal", "logmix", "specials"]))
        rng = np.random.default_rng(seed)
        size = int(np.prod(shape))
        if regime == "ints":
            values = rng.integers(-100, 100, size=size).astype(np.float64)
        elif regime == "normal":
            values = rng.standard_normal(size) * 10.0 ** rng.integers(-6, 10)
        elif regime == "logmix":
            values = np.sign(rng.standard_normal(size)) * 10.0 ** rng.uniform(-30, 30, size)
        else:
            values = rng.choice(np.array(_SPECIALS), size=size)
        with np.errstate(all="ignore"):
            if dtype.kind in "iub":
                if dtype.kind != "b":
                    info = np.iinfo(dtype)
                    values = np.nan_to_num(values, posinf=0, neginf=0)
                    values = np.clip(values, info.min, info.max)
                values = values.astype(dtype)
            return values.astype(dtype).reshape(shape)

    # Scale with the active profile (conftest's "leakgate" profile runs fewer).
    _BASE_EXAMPLES = settings.default.max_examples
    _NO_HEALTH = list(HealthCheck)

    @settings(max_examples=3 * _BASE_EXAMPLES,
              deadline=None, suppress_health_check=_NO_HEALTH)
    @given(arr=_small_arrays())
    def test_parity_hypothesis_small(arr):
        _torch()
        _check(arr)

    @settings(max_examples=max(10, _BASE_EXAMPLES // 2),
              deadline=None, suppress_health_check=_NO_HEALTH)
    @given(arr=_big_arrays())
    def test_parity_hypothesis_summarised(arr):
        _torch()
        _check(arr)
