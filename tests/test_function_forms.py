"""PyTorch's top-level functions built in python/ember/_function_forms.py
and _dtype_info.py, against PyTorch: values, dtypes, shapes, gradients,
errors; gradchecks of the composed reductions and products."""

import math

import numpy as np
import pytest

import ember
from ember.autograd import gradcheck

torch = pytest.importorskip("torch")

NAN = math.nan


def to_ember(value):
    if isinstance(value, torch.Tensor):
        out = ember.tensor(value.detach().numpy().copy())
        return out.requires_grad_() if value.requires_grad else out
    if isinstance(value, (list, tuple)):
        return type(value)(to_ember(v) for v in value)
    if isinstance(value, dict):
        return {k: to_ember(v) for k, v in value.items()}
    if isinstance(value, torch.dtype):
        return getattr(ember, str(value).removeprefix("torch."))
    return value


def check_same(ours, theirs):
    if isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            check_same(o, t)
        return
    if isinstance(theirs, torch.Tensor):
        assert str(ours.dtype).removeprefix("ember.") == str(theirs.dtype).removeprefix("torch.")
        assert list(ours.shape) == list(theirs.shape)
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(force=True),
                                   rtol=1e-6, atol=1e-12, equal_nan=True)
    else:
        assert ours == theirs


def t64(*shape, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape))


def with_nans(*shape, seed=0):
    values = t64(*shape, seed=seed)
    values[values > 0.8] = NAN
    return values


# (name, positional args as torch objects, kwargs): each runs as ember.name
# and torch.name on the same values; a float64 tensor that requires grad
# also has its gradient of the result's sum compared.
CASES = [
    ("transpose", (t64(2, 3, 4), 0, 2), {}),
    ("t", (t64(2, 3),), {}),
    ("permute", (t64(2, 3, 4), (2, 0, 1)), {}),
    ("squeeze", (t64(2, 1, 3, 1),), {}),
    ("squeeze", (t64(2, 1, 3, 1), 1), {}),
    ("unsqueeze", (t64(2, 3), -1), {}),
    ("reshape", (t64(2, 3, 4).transpose(0, 2), (4, 6)), {}),
    ("narrow", (t64(5, 3), 0, 1, 3), {}),
    ("select", (t64(5, 3), 1, -1), {}),
    ("clone", (t64(5, 3),), {}),
    ("swapaxes", (t64(2, 3, 4), 0, -1), {}),
    ("swapdims", (t64(2, 3, 4), 1, 2), {}),
    ("movedim", (t64(2, 3, 4, 5), (0, 1), (3, 0)), {}),
    ("moveaxis", (t64(2, 3, 4), 0, -1), {}),
    ("ravel", (t64(3, 4).t(),), {}),
    ("broadcast_to", (t64(3, 1), (2, 3, 4)), {}),
    ("broadcast_tensors", (t64(3, 1), t64(4), t64(2, 1, 1)), {}),
    ("atleast_1d", (torch.tensor(2.0),), {}),
    ("atleast_2d", (t64(3), torch.tensor(1.0)), {}),
    ("atleast_3d", ([t64(3), t64(2, 3), t64(1, 2, 3, 4)],), {}),
    ("clamp_min", (t64(4, 3), 0.1), {}),
    ("clamp_max", (t64(4, 3), t64(3)), {}),
    ("arccos", (t64(6).clamp(-0.9, 0.9),), {}),
    ("arcsin", (t64(6).clamp(-0.9, 0.9),), {}),
    ("arctan", (t64(6),), {}),
    ("arctan2", (t64(6), t64(6, seed=1)), {}),
    ("sgn", (t64(6),), {}),
    ("nansum", (with_nans(4, 5),), {}),
    ("nansum", (with_nans(4, 5), 1), {"keepdim": True}),
    ("nansum", (torch.tensor([[1, 2], [3, 4]]), 0), {}),
    ("nanmean", (with_nans(4, 5),), {}),
    ("nanmean", (with_nans(4, 5), (0,)), {}),
    ("median", (t64(4, 5),), {}),
    ("median", (t64(4, 6), 1), {}),
    ("median", (t64(4, 5), 0), {"keepdim": True}),
    ("median", (torch.tensor([[1.0, NAN, 3.0, NAN], [NAN] * 4, [4.0, 2.0, 3.0, 1.0]]), 1), {}),
    ("median", (torch.tensor([1.0, NAN, 2.0]),), {}),
    ("median", (torch.tensor([7, 1, 4, 2]),), {}),
    ("median", (torch.tensor(3.0), 0), {}),
    ("median", (torch.zeros(0, 2), 1), {}),
    ("median", (torch.zeros(0),), {}),
    ("nanmedian", (torch.tensor([[1.0, NAN, 3.0, NAN], [2.0, 5.0, NAN, 4.0]]), 1), {}),
    ("nanmedian", (torch.tensor([1.0, NAN, 2.0, 6.0]),), {}),
    ("aminmax", (t64(4, 5),), {}),
    ("aminmax", (t64(4, 5),), {"dim": 1, "keepdim": True}),
    ("logit", (torch.tensor([0.0, 0.2, 0.5, 1.0], dtype=torch.float64),), {}),
    ("logit", (torch.tensor([0.0, 0.2, 0.5, 1.0], dtype=torch.float64),), {"eps": 1e-6}),
    ("deg2rad", (t64(5),), {}),
    ("rad2deg", (t64(5),), {}),
    ("fmax", (with_nans(6), with_nans(6, seed=1)), {}),
    ("fmin", (with_nans(6), with_nans(6, seed=1)), {}),
    ("heaviside", (torch.tensor([-1.5, 0.0, 2.0]), torch.tensor([0.5])), {}),
    ("trace", (t64(3, 4),), {}),
    ("trace", (torch.arange(6).view(2, 3),), {}),
    ("tensordot", (t64(2, 3, 4), t64(3, 4, 5)), {}),
    ("tensordot", (t64(2, 3, 4), t64(4, 2)), {"dims": ([0, 2], [1, 0])}),
    ("tensordot", (t64(2, 3), t64(3, 4)), {"dims": 1}),
    ("tensordot", (t64(2, 3), t64(4, 5)), {"dims": 0}),
    ("inner", (t64(2, 3), t64(4, 3)), {}),
    ("inner", (torch.tensor(2.0, dtype=torch.float64), t64(3)), {}),
    ("dist", (t64(2, 3), t64(3)), {}),
    ("dist", (t64(2, 3), t64(3)), {"p": 1}),
    ("addmv", (t64(2), t64(2, 3), t64(3)), {"beta": 0.5, "alpha": 2}),
    ("addmv", (torch.full((2,), NAN, dtype=torch.float64), t64(2, 3), t64(3)), {"beta": 0}),
    ("addr", (t64(2, 3), t64(2), t64(3)), {"alpha": 3}),
    ("diag_embed", (t64(2, 3),), {}),
    ("diag_embed", (t64(2, 3),), {"offset": 1, "dim1": 0, "dim2": 2}),
    ("diag_embed", (t64(2, 3),), {"offset": -2, "dim1": -1, "dim2": 0}),
    ("diagflat", (t64(2, 2),), {"offset": -1}),
    ("hsplit", (torch.arange(12).view(3, 4), 2), {}),
    ("hsplit", (torch.arange(12).view(3, 4), [1, 3]), {}),
    ("hsplit", (torch.arange(6), 3), {}),
    ("vsplit", (torch.arange(12).view(4, 3), [3]), {}),
    ("dsplit", (torch.arange(16).view(2, 2, 4), 2), {}),
    ("column_stack", ([torch.arange(3), torch.arange(6).view(3, 2)],), {}),
    ("dstack", ([t64(3), t64(3)],), {}),
    ("logspace", (0, 3, 4), {}),
    ("mode", (torch.tensor([[1, 2, 2, 3], [4, 4, 1, 1]]), 1), {}),
    ("mode", (torch.tensor([3.0, 1.0, 1.0, 3.0, 2.0], dtype=torch.float64),), {}),
    ("mode", (torch.tensor([[1.0, 2.0], [1.0, 3.0], [2.0, 3.0]], dtype=torch.float64), 0),
     {"keepdim": True}),
    ("quantile", (t64(3, 7), 0.3), {"dim": 1}),
    ("quantile", (t64(3, 7), torch.tensor([0.0, 0.25, 1.0], dtype=torch.float64)),
     {"dim": 0, "keepdim": True}),
    ("quantile", (t64(3, 7), 0.4), {}),
    ("quantile", (t64(3, 7), 0.4), {"keepdim": True}),
    ("quantile", (with_nans(4, 5), 0.5), {"dim": 1}),
    ("quantile", (t64(8), torch.tensor([0.1, 0.55, 0.9], dtype=torch.float64)),
     {"interpolation": "lower"}),
    ("quantile", (t64(8), torch.tensor([0.1, 0.55, 0.9], dtype=torch.float64)),
     {"interpolation": "higher"}),
    ("quantile", (t64(8), torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64)),
     {"interpolation": "midpoint"}),
    ("quantile", (t64(8), torch.tensor([0.1, 0.4, 0.9], dtype=torch.float64)),
     {"interpolation": "nearest"}),
    ("nanquantile", (with_nans(4, 5), 0.7), {"dim": 1}),
    ("nanquantile", (torch.full((2, 3), NAN, dtype=torch.float64), 0.5), {"dim": 1}),
    ("cov", (t64(3, 6),), {}),
    ("cov", (t64(6),), {"correction": 0}),
    ("cov", (t64(2, 4),), {"fweights": torch.tensor([1, 2, 1, 3]),
                            "aweights": torch.tensor([0.5, 1.0, 2.0, 1.0], dtype=torch.float64)}),
    ("cov", (t64(2, 4),), {"aweights": torch.tensor([0.5, 1.0, 2.0, 1.0], dtype=torch.float64)}),
    ("corrcoef", (t64(3, 6),), {}),
    ("renorm", (t64(3, 4), 2, 0, 1.5), {}),
    ("renorm", (t64(3, 4), 1, 1, 1.0), {}),
    ("float_power", (torch.tensor([2, 3]), 2), {}),
    ("float_power", (t64(3).abs(), t64(3, seed=2)), {}),
    ("rsub", (t64(3), 5.0), {"alpha": 2}),
    ("isin", (torch.tensor([1, 2, 3, 7]), torch.tensor([7, 2, 5])), {}),
    ("isin", (torch.tensor([1.0, NAN, 2.0]), torch.tensor([NAN, 1.0])), {"invert": True}),
    ("isin", (torch.tensor([1, 2]), torch.tensor([], dtype=torch.int64)), {}),
    ("masked_scatter", (t64(2, 3), torch.tensor([True, False, True]), t64(2, 3, seed=1)), {}),
    ("row_stack", ([torch.arange(3), torch.arange(3)],), {}),
    ("signbit", (torch.tensor([-0.0, 0.0, -1.5, -NAN, NAN, 2.0]),), {}),
    ("signbit", (torch.tensor([-3, 0, 4]),), {}),
    ("ldexp", (t64(3), torch.tensor([2, 1, 0])), {}),
    ("ldexp", (torch.tensor([1, 3]), torch.tensor([2, 1])), {}),
    ("gcd", (torch.tensor([12, -18, 0, 7, 0]), torch.tensor([8, 12, 0, 0, 5])), {}),
    ("lcm", (torch.tensor([4, -6, 0, 7]), torch.tensor([6, 4, 3, 5])), {}),
    ("trapezoid", (t64(3, 5),), {}),
    ("trapezoid", (t64(3, 5),), {"dx": 0.5, "dim": 0}),
    ("trapezoid", (t64(3, 5), t64(5, seed=1).cumsum(0)), {}),
    ("trapz", (t64(4),), {}),
    ("cumulative_trapezoid", (t64(3, 5),), {}),
    ("cumulative_trapezoid", (t64(3, 5), t64(3, 5, seed=2)), {"dim": 1}),
    ("hann_window", (7,), {}),
    ("hann_window", (7, False), {"dtype": torch.float64}),
    ("hamming_window", (6,), {}),
    ("hamming_window", (6, True, 0.5, 0.5), {}),
    ("blackman_window", (8,), {"dtype": torch.float64}),
    ("bartlett_window", (5,), {}),
    ("bartlett_window", (1,), {}),
    ("scalar_tensor", (3,), {}),
    ("is_same_size", (t64(2, 3), t64(2, 3)), {}),
    ("logspace", (-1, 1, 5), {"base": 2.0, "dtype": torch.float64}),
]


@pytest.mark.parametrize("name, args, kwargs", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_matches_torch(name, args, kwargs):
    theirs_args = [a.clone().requires_grad_() if _differentiable(a) else a for a in args]
    ours_args = to_ember(theirs_args)
    theirs = getattr(torch, name)(*theirs_args, **kwargs)
    ours = getattr(ember, name)(*ours_args, **to_ember(kwargs))
    check_same(ours, theirs)
    differentiable = [i for i, a in enumerate(theirs_args) if _differentiable(a)]
    outputs = [r for r in _flat(theirs) if r.requires_grad]
    if differentiable and outputs:
        sum(r.sum() for r in outputs).backward()
        sum(r.sum() for r in _flat(ours) if r.requires_grad).backward()
        for i in differentiable:
            check_same(ours_args[i].grad, theirs_args[i].grad)


def _differentiable(value):
    return isinstance(value, torch.Tensor) and value.dtype == torch.float64


def _flat(result):
    if isinstance(result, torch.Tensor) or isinstance(result, ember.Tensor):
        return [result]
    if not isinstance(result, (tuple, list)):
        return []
    return [r for r in result if isinstance(r, (torch.Tensor, ember.Tensor))]


def test_median_indices_point_at_the_median_among_ties():
    """Which of tied elements median names is unspecified in PyTorch; ember's
    index must hold the median's value."""
    x = ember.tensor([[5.0, 1.0, 1.0, 2.0], [3.0, 3.0, 3.0, 0.0]])
    values, indices = ember.median(x, 1)
    np.testing.assert_array_equal(values.numpy(), [1.0, 3.0])
    np.testing.assert_array_equal(x.gather(1, indices.unsqueeze(1)).squeeze(1).numpy(),
                                  values.numpy())


def test_median_spreads_its_gradient_over_ties_as_torch():
    for values in ([1.0, 2.0, 2.0, 3.0, 2.0], [1.0, NAN, NAN]):
        theirs = torch.tensor(values, requires_grad=True)
        ours = ember.tensor(values, requires_grad=True)
        torch.median(theirs).backward()
        ember.median(ours).backward()
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy())


def test_methods_exist_where_torch_has_them():
    x = t64(3, 4)
    for name, args in [("movedim", (0, 1)), ("nansum", ()), ("median", ()), ("logit", ()),
                       ("ravel", ()), ("trace", ()), ("swapaxes", (0, 1)),
                       ("broadcast_to", ((2, 3, 4),)), ("clamp_min", (0.0,)),
                       ("aminmax", ()), ("deg2rad", ()), ("arctan", ())]:
        check_same(getattr(to_ember(x), name)(*args), getattr(x, name)(*args))


@pytest.mark.parametrize("function", [
    lambda lib, x: lib.nansum(x, 1),
    lambda lib, x: lib.nanmean(x),
    lambda lib, x: lib.median(x, 0).values,
    lambda lib, x: lib.median(x),
    lambda lib, x: lib.logit(x.sigmoid(), eps=0.01),
    lambda lib, x: lib.trace(x),
    lambda lib, x: lib.tensordot(x, x, dims=([0], [1])),
    lambda lib, x: lib.inner(x, x),
    lambda lib, x: lib.dist(x, x.t()),
    lambda lib, x: lib.diag_embed(x, offset=1),
    lambda lib, x: lib.addr(x, x[0], x[1], beta=2, alpha=0.5),
    lambda lib, x: lib.movedim(x, 0, 1),
    lambda lib, x: lib.quantile(x, 0.3, dim=1),
    lambda lib, x: lib.nanquantile(x, lib.tensor([0.2, 0.9], dtype=lib.float64)),
    lambda lib, x: lib.mode(x, 0).values,
    lambda lib, x: lib.cov(x),
    lambda lib, x: lib.corrcoef(x),
    lambda lib, x: lib.renorm(x, 2, 0, 0.5),
    lambda lib, x: lib.masked_scatter(x, lib.tensor([True, False, True]), x.t()),
])
def test_gradcheck(function):
    x = ember.tensor(np.random.default_rng(3).standard_normal((3, 3)), requires_grad=True)
    assert gradcheck(lambda t: function(ember, t), (x,))


@pytest.mark.parametrize("shape, wrap", [((3, 3), False), ((7, 3), True), ((7, 3), False),
                                         ((3, 5), True), ((3, 3, 3), False)])
def test_fill_diagonal_matches_torch(shape, wrap):
    ours, theirs = ember.zeros(*shape), torch.zeros(*shape)
    assert ours.fill_diagonal_(2.5, wrap=wrap) is ours
    theirs.fill_diagonal_(2.5, wrap=wrap)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    strided = ember.zeros(6, 6)[::2, ::2]       # a view: the base sees the writes
    strided.fill_diagonal_(1.0)
    np.testing.assert_array_equal(strided.numpy(), np.eye(3))


def test_sum_to_size_and_get_device_match_torch():
    x = t64(2, 3, 4)
    for size in [(3, 4), (1, 4), (3, 1), (2, 1, 4), ((1, 1),)]:
        check_same(to_ember(x).sum_to_size(*size), x.sum_to_size(*size))
    assert ember.zeros(2).get_device() == torch.zeros(2).get_device() == -1


def test_masked_scatter_in_place_and_cov_warning():
    ours, theirs = ember.zeros(2, 3), torch.zeros(2, 3)
    mask, source = [True, False, True], np.arange(6.0).reshape(2, 3)
    ours.masked_scatter_(ember.tensor(mask), ember.tensor(source, dtype=ember.float32))
    theirs.masked_scatter_(torch.tensor(mask), torch.tensor(source, dtype=torch.float32))
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        assert math.isnan(ember.cov(ember.tensor([1.0])).item())


def test_empty_strided_and_adjoints_match_torch():
    ours, theirs = ember.empty_strided((2, 3), (1, 2)), torch.empty_strided((2, 3), (1, 2))
    assert tuple(ours.stride()) == tuple(theirs.stride()) and ours.dtype == ember.float32
    x = t64(2, 3)
    check_same(to_ember(x).H, x.H)
    check_same(to_ember(t64(4, 2, 3)).mT, t64(4, 2, 3).mT)
    for attribute in ("H", "mT", "mH"):
        with pytest.raises(RuntimeError) as theirs_error:
            getattr(torch.zeros(3), attribute)
        with pytest.raises(RuntimeError) as ours_error:
            getattr(ember.zeros(3), attribute)
        assert str(ours_error.value) == str(theirs_error.value)


def test_ldexp_gradient_is_two_to_the_exponent():
    """PyTorch computes ldexp's input gradient as an integer power of 2, so
    a negative exponent gives it 0, against its own forward (input * 0.5);
    ember's gradient is the forward's slope."""
    x = ember.tensor([1.0, 3.0], dtype=ember.float64, requires_grad=True)
    ember.ldexp(x, ember.tensor([-1, 2])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.5, 4.0])


def test_tensordot_writes_out():
    a, b = t64(2, 3), t64(3, 5, seed=1)
    out = ember.zeros(2, 5, dtype=ember.float64)
    assert ember.tensordot(to_ember(a), to_ember(b), 1, out=out) is out
    check_same(out, torch.tensordot(a, b, 1))


def test_is_complex_and_is_nonzero():
    assert ember.is_complex(ember.zeros(2)) is False
    assert ember.is_nonzero(ember.tensor([2.0])) is True
    assert ember.is_floating_point(ember.zeros(1)) and not ember.is_floating_point(
        ember.zeros(1, dtype=ember.int64))


@pytest.mark.parametrize("call", [
    lambda lib: lib.broadcast_shapes((2, 3), (4, 3)),
    lambda lib: lib.broadcast_shapes((2, 1), (1, 3), 5),
    lambda lib: lib.broadcast_tensors(lib.zeros(2, 3), lib.zeros(4, 3)),
    lambda lib: lib.broadcast_tensors(lib.zeros(2, 3), lib.zeros(3, 2)),  # names dim 1
    lambda lib: lib.broadcast_to(lib.zeros(2, 3), (3, 3)),
    lambda lib: lib.movedim(lib.zeros(2, 3, 4), (0, 1), (1,)),
    lambda lib: lib.movedim(lib.zeros(2, 3, 4), (0, 0), (1, 2)),
    lambda lib: lib.movedim(lib.zeros(2, 3, 4), 0, 5),
    lambda lib: lib.nanmean(lib.tensor([1, 2])),
    lambda lib: lib.median(lib.zeros(2, 0), 1),
    lambda lib: lib.trace(lib.zeros(2, 2, 2)),
    lambda lib: lib.tensordot(lib.zeros(2, 3), lib.zeros(4, 5), dims=1),
    lambda lib: lib.heaviside(lib.zeros(2), lib.zeros(2, dtype=lib.float64)),
    lambda lib: lib.aminmax(lib.zeros(0)),
    lambda lib: lib.is_nonzero(lib.zeros(2)),
    lambda lib: lib.is_nonzero(lib.zeros(0)),
    lambda lib: lib.inner(lib.zeros(2, 3), lib.zeros(4)),
    lambda lib: lib.hsplit(lib.arange(12).view(3, 4), 3),
    lambda lib: lib.vsplit(lib.arange(4), 2),
    lambda lib: lib.transpose([1, 2], 0, 1),
    lambda lib: lib.quantile(lib.zeros(3), 1.5),
    lambda lib: lib.quantile(lib.zeros(3, dtype=lib.int32), 0.5),
    lambda lib: lib.quantile(lib.zeros(3), lib.tensor([[0.5]])),
    lambda lib: lib.quantile(lib.zeros(3), 0.5, interpolation="foo"),
    lambda lib: lib.quantile(lib.zeros(0), 0.5),
    lambda lib: lib.mode(lib.zeros(2, 0), 1),
    lambda lib: lib.cov(lib.zeros(2, 2, 2)),
    lambda lib: lib.zeros(3).masked_scatter(lib.tensor([True, True, True]), lib.ones(2)),
    lambda lib: lib.zeros(2, 3, 4).fill_diagonal_(1),
    lambda lib: lib.zeros(3).fill_diagonal_(1),
    lambda lib: lib.ones(2, 3).sum_to_size(3, 3),
])
def test_errors_match_torch(call):
    with pytest.raises(Exception) as theirs:
        call(torch)
    with pytest.raises(type(theirs.value)) as ours:
        call(ember)
    assert str(ours.value) == str(theirs.value).replace("torch.", "ember.") \
        or str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_finfo_matches_torch(name):
    ours, theirs = ember.finfo(getattr(ember, name)), torch.finfo(getattr(torch, name))
    for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution",
                  "dtype"):
        assert getattr(ours, field) == getattr(theirs, field), field
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo_matches_torch(name):
    ours, theirs = ember.iinfo(getattr(ember, name)), torch.iinfo(getattr(torch, name))
    for field in ("bits", "max", "min", "dtype"):
        assert getattr(ours, field) == getattr(theirs, field), field
    assert repr(ours) == repr(theirs)


def test_finfo_defaults_to_the_default_dtype_and_refuses_integers():
    assert ember.finfo() == ember.finfo(ember.float32)
    ember.set_default_dtype(ember.float64)
    try:
        assert ember.finfo().eps == np.finfo(np.float64).eps
    finally:
        ember.set_default_dtype(ember.float32)
    for wrong, theirs in [(lambda: ember.finfo(ember.int32),
                           lambda: torch.finfo(torch.int32)),
                          (lambda: ember.iinfo(ember.float32),
                           lambda: torch.iinfo(torch.float32)),
                          (lambda: ember.iinfo(ember.bool), lambda: torch.iinfo(torch.bool)),
                          (lambda: ember.finfo(3), lambda: torch.finfo(3))]:
        with pytest.raises(TypeError) as expected:
            theirs()
        with pytest.raises(TypeError) as got:
            wrong()
        assert str(got.value) == str(expected.value).replace("torch", "ember")


from hypothesis import given, strategies as st  # noqa: E402

_shapes = st.lists(st.lists(st.sampled_from([0, 1, 2, 3]), max_size=4).map(tuple),
                   min_size=1, max_size=4)


@given(_shapes)
def test_broadcast_shapes_and_tensors_follow_numpy(shapes):
    """NumPy's broadcasting rule decides; the tensors come back as views of
    that shape, or both refuse."""
    try:
        expected = np.broadcast_shapes(*shapes)
    except ValueError:
        with pytest.raises(RuntimeError):
            ember.broadcast_shapes(*shapes)
        with pytest.raises(RuntimeError):
            ember.broadcast_tensors(*[ember.zeros(s) for s in shapes])
        return
    assert tuple(ember.broadcast_shapes(*shapes)) == expected
    tensors = [ember.arange(math.prod(s), dtype=ember.float64).reshape(s) for s in shapes]
    for ours, base in zip(ember.broadcast_tensors(*tensors), tensors):
        assert tuple(ours.shape) == expected
        np.testing.assert_array_equal(ours.numpy(), np.broadcast_to(base.numpy(), expected))


@pytest.mark.parametrize("name, args", [
    ("t_", ()), ("transpose_", (0, 2)), ("squeeze_", ()), ("squeeze_", (1,)),
    ("unsqueeze_", (0,)), ("unsqueeze_", (-1,)), ("swapaxes_", (0, 1)), ("swapdims_", (1, 2)),
    ("as_strided_", ((2, 2), (2, 1), 1)),
])
def test_inplace_geometry_matches_torch(name, args):
    shape = (2, 3) if name == "t_" else (2, 1, 3)
    theirs_base = torch.arange(6.0).reshape(shape)
    ours_base = ember.arange(6.0).reshape(shape)
    theirs, ours = theirs_base.view(shape), ours_base.view(shape)
    before = ours._version
    assert getattr(ours, name)(*args) is ours
    getattr(theirs, name)(*args)
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert tuple(ours.stride()) == tuple(theirs.stride())
    assert ours._version == before + 1
    ours.fill_(7.0)                              # still the base's memory
    theirs.fill_(7.0)
    np.testing.assert_array_equal(ours_base.numpy(), theirs_base.numpy())


def test_inplace_geometry_under_autograd_matches_torch():
    theirs_leaf = torch.arange(6.0, dtype=torch.float64).reshape(2, 3).requires_grad_()
    ours_leaf = to_ember(theirs_leaf)
    results = []
    for lib, leaf in ((torch, theirs_leaf), (ember, ours_leaf)):
        y = leaf * 2
        y.unsqueeze_(0)
        y.transpose_(0, 2)
        (y * lib.arange(6.0, dtype=lib.float64).reshape(3, 2, 1)).sum().backward()
        results.append(leaf.grad)
    check_same(results[1], results[0])
    for call in (lambda lib: lib.zeros(2, requires_grad=True).unsqueeze_(0),
                 lambda lib: lib.zeros(2, requires_grad=True).resize_(3),
                 lambda lib: (lib.zeros(2, requires_grad=True) * 2).resize_(3)):
        with pytest.raises(RuntimeError) as theirs:
            call(torch)
        with pytest.raises(RuntimeError) as ours:
            call(ember)
        assert str(ours.value) == str(theirs.value)


def test_saved_tensor_changed_in_geometry_is_refused():
    x = ember.ones(3, dtype=ember.float64, requires_grad=True)
    y = x * 2
    z = y * y                                    # saves y
    y.unsqueeze_(0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


@pytest.mark.parametrize("start, sizes", [
    ((6,), (2, 2)), ((6,), (2, 3)), ((4,), (3, 3)), ((2, 3), (0,)), ((3,), (5,)),
])
def test_resize_matches_torch(start, sizes):
    theirs = torch.arange(float(math.prod(start))).reshape(start)
    ours = ember.arange(float(math.prod(start))).reshape(start)
    ours.add_(0)      # a version past 0: a grown storage's new counter must pass it
    theirs.add_(0)
    before = ours._version
    assert ours.resize_(*sizes) is ours
    theirs.resize_(*sizes)
    assert tuple(ours.shape) == tuple(theirs.shape) and ours.is_contiguous()
    kept = min(math.prod(start), math.prod(sizes))   # the rest is uninitialised
    np.testing.assert_array_equal(ours.numpy().reshape(-1)[:kept],
                                  theirs.numpy().reshape(-1)[:kept])
    assert ours._version == before + 1


def test_resize_of_an_offset_view_and_resize_as():
    base = ember.arange(4.0)
    view = base[1:]
    view.resize_(5)
    assert view.storage_offset() == 1 and tuple(view.shape) == (5,)
    np.testing.assert_array_equal(view[:3].numpy(), [1.0, 2.0, 3.0])
    other = ember.zeros(2, 2)
    assert tuple(ember.arange(3.0).resize_as_(other).shape) == (2, 2)
